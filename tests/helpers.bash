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

# run_ok CMD...: bats' run (stderr apart) that must exit 0, and that says
# how it failed when it did not: its status and stderr (run -0 names only
# the status), for the failures that come once in many runs
run_ok() {
	run --separate-stderr "$@"
	[ "$status" -eq 0 ] || { printf '`%s` exited %s; its stderr:\n%s\n' "$*" "$status" "$stderr"; return 1; }
}

# jq -e on no input at all exits 0 (jq 1.6: no value is not a false one),
# so `jq -e FILTER <<<"$output"` would pass for a command that printed
# nothing.  Here jq -e fails on empty input (exit 4, as jq 1.7 does),
# read from stdin or from the file named last; not with -n (no input
# read) or -s (an empty array is a value).
jq() {
	local a e=false skip=false last in
	for a in "$@"; do
		case $a in
		-e | --exit-status) e=true ;;
		-n | --null-input | -s | --slurp) skip=true ;;
		--*) ;;
		-*) [[ $a == *e* ]] && e=true
		    [[ $a == *[ns]* ]] && skip=true ;;
		esac
	done
	if ! $e || $skip; then
		command jq "$@"
		return
	fi
	last=${!#}
	if [ $# -ge 2 ] && [ -f "$last" ]; then
		if [ -z "$(tr -d '[:space:]' <"$last" | head -c 1)" ]; then
			echo "jq -e: '$last' is empty" >&2
			return 4
		fi
		command jq "$@"
		return
	fi
	in=$(cat)
	if [ -z "${in//[[:space:]]/}" ]; then
		echo "jq -e: no input" >&2
		return 4
	fi
	command jq "$@" <<<"$in"
}

# cgroup_dirs REL: the directories of the cgroup REL (pisb/NAME.GEN) that
# exist, one a line, in every hierarchy (v1's controllers, v2's root)
cgroup_dirs() {
	local d
	for d in /sys/fs/cgroup/"$1" /sys/fs/cgroup/*/"$1"; do
		[ ! -e "$d" ] || echo "$d"
	done
}

# stopped_at TRACE WHAT: the pid of the process that wrote the PISB_TRACE
# mark WHAT to TRACE and stopped itself there (PISB_TRACE_STOP=WHAT), once
# it has (60 s at most: a disk image may be made first; else it fails)
stopped_at() {
	local pid i
	for i in $(seq 1200); do
		pid=$(mark_pid "$1" "$2")
		if [ -n "$pid" ] && [ "$(awk '{ print $3 }' "/proc/$pid/stat" 2>/dev/null)" = T ]; then
			echo "$pid"
			return 0
		fi
		sleep 0.05
	done
	return 1
}

# mark_pid TRACE WHAT: the pid that wrote the PISB_TRACE mark WHAT to
# TRACE (its first), or nothing
mark_pid() {
	awk -v w="$2" 'substr($0, index($0, $4)) == w { print $3; exit }' "$1" 2>/dev/null
}

# marked_by TRACE WHAT: mark_pid, once the mark is there (10 s at most):
# a process told something may mark it after its teller stopped
marked_by() {
	local pid i
	for i in $(seq 200); do
		pid=$(mark_pid "$1" "$2")
		[ -z "$pid" ] || { echo "$pid"; return 0; }
		sleep 0.05
	done
	return 1
}

# Run a command as an unprivileged test user (created by .ci/run, or here).
as_user() {
	local u=${PISB_TEST_USER:-pisbtest}
	id "$u" >/dev/null 2>&1 || skip "machine lacks: the test user '$u' (run: useradd -m $u)"
	runuser -u "$u" -- env PATH="$PATH" PISB_EXEC_PATH="$PISB_EXEC_PATH" HOME="$(getent passwd "$u" | cut -d: -f6)" "$@"
}

# vm_relay_pid NAME: the pid of vm sandbox NAME's relay (drivers/vm/vm_net.c),
# the supervisor's child that holds net.log
vm_relay_pid() {
	local sup p
	sup=$(jq -r .controller.pid "$PI_SANDBOX_HOME/instances/$1/status.json")
	for p in $(pgrep -P "$sup"); do
		if ls -l "/proc/$p/fd" 2>/dev/null | grep -q 'net\.log'; then echo "$p"; return; fi
	done
}

# vm_suite_setup ERRFILE: a vm suite's setup(): skipped where the machine
# lacks what the vm driver needs; failed, saying why, when setup_file's
# create (its stderr in ERRFILE, "create failed" appended) did not work
vm_suite_setup() {
	local lacks
	lacks=$(vm_prereqs)
	[ -z "$lacks" ] || skip "machine lacks: $lacks"
	if grep -q "create failed" "$1"; then
		cat "$1"
		return 1
	fi
}

# vm_prereqs: what the vm driver needs that this machine lacks (empty: all there)
vm_prereqs() {
	command -v qemu-system-x86_64 >/dev/null || { echo "qemu-system-x86_64 (install qemu-system-x86)"; return; }
	command -v mke2fs >/dev/null || [ -x /sbin/mke2fs ] || { echo "mke2fs (install e2fsprogs)"; return; }
	[ -x "$PISB_BIN_DIR/pisb-agent" ] || { echo "bin/pisb-agent (run make)"; return; }
	local k
	if [ -n "${PISB_VM_KERNEL:-}" ] || [ -r "/boot/vmlinuz-$(uname -r)" ]; then return; fi
	for k in ${PISB_VM_CACHE:-} ${XDG_CACHE_HOME:+$XDG_CACHE_HOME/pisb/vm} ${HOME:+$HOME/.cache/pisb/vm} /var/cache/pisb/vm; do
		compgen -G "$k/boot/vmlinuz-*" >/dev/null && return
	done
	echo "a guest kernel (run: make vm-kernel)"
}
