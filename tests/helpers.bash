# tests/helpers.bash - loaded by every suite: a fresh state dir per test,
# the freshly built binaries first on PATH, and named prerequisites.
bats_require_minimum_version 1.5.0

: "${PISB_BIN_DIR:=$BATS_TEST_DIRNAME/../bin}"
export PATH="$PISB_BIN_DIR:$PATH"
export PISB_EXEC_PATH="$PISB_BIN_DIR"
TOP=$(cd "$BATS_TEST_DIRNAME/.." && pwd)
EXAMPLES="$TOP/examples"
FIXTURES="$TOP/tests/fixtures"

pisb_test_setup() {
	export PI_SANDBOX_HOME="$BATS_TEST_TMPDIR/state"
	unset XDG_STATE_HOME
}

# Named prerequisites.  A skip must say which feature this machine lacks.
require_userns() {
	unshare -Ur true 2>/dev/null || skip "machine lacks: unprivileged user namespaces"
}
require_root() {
	[ "$(id -u)" = 0 ] || skip "machine lacks: root (test needs it)"
}
require_cmd() {
	command -v "$1" >/dev/null || skip "machine lacks: $1"
}

# Run a command as an unprivileged test user (created by .ci/run, or here).
as_user() {
	local u=${PISB_TEST_USER:-pisbtest}
	id "$u" >/dev/null 2>&1 || skip "machine lacks: the test user '$u' (run: useradd -m $u)"
	runuser -u "$u" -- env PATH="$PATH" PISB_EXEC_PATH="$PISB_EXEC_PATH" HOME="$(getent passwd "$u" | cut -d: -f6)" "$@"
}
