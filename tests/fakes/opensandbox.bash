# tests/fakes/opensandbox.bash - the fake OpenSandbox server for the pisb
# opensandbox driver's suites (7x).  Load after helpers:
#
#   load helpers
#   load fakes/opensandbox
#
# os_fake_start [server args...]  start a fake on a free port: OS_PORT,
#                                 OS_URL, OS_FAKE_PID; exports
#                                 OPEN_SANDBOX_API_KEY=$OS_KEY
# os_fake_stop                    kill it (teardown)
# os_config FILE [LINE...]        a remote.yaml for the fake; each LINE is
#                                 added under opensandbox: (give its indent)
# os_api METHOD PATH [curl args]  lifecycle call with the key; prints the
#                                 body, then the status on the last line
# os_admin METHOD PATH [JSON]     the fake's /_fake admin API
# os_fault JSON                   POST /_fake/faults
# os_sid NAME                     the sandbox id pisb recorded for NAME
# os_state ID                     the fake's state word for a sandbox
# os_ops OP                       how many requests of operation OP came

: "${OS_KEY:=pisb-test-key-$$-s3cr3tvalue}"
OS_FAKE="$BATS_TEST_DIRNAME/fakes/opensandbox_server.py"

os_fake_start() {
	local pf="$BATS_TEST_TMPDIR/os-port" i
	rm -f "$pf"
	# the real interpreter, not a pyenv shim: teardown must kill the fake
	: "${OS_FAKE_PY:=$(python3 -c 'import sys; print(sys.executable)')}"
	"$OS_FAKE_PY" "$OS_FAKE" --port 0 --api-key "$OS_KEY" --port-file "$pf" \
		--state-dir "$BATS_TEST_TMPDIR/os-fake" --stream-grace-ms 0 --pending-ms 0 \
		--pausing-ms 0 --resuming-ms 0 --min-timeout 1 "$@" \
		>"$BATS_TEST_TMPDIR/os-fake.out" 2>"$BATS_TEST_TMPDIR/os-fake.err" 3>&- &
	OS_FAKE_PID=$!
	for i in $(seq 200); do
		[ -s "$pf" ] && break
		sleep 0.05
	done
	OS_PORT=$(cat "$pf" 2>/dev/null)
	[ -n "$OS_PORT" ] || { cat "$BATS_TEST_TMPDIR/os-fake.err" >&2; return 1; }
	OS_URL="http://127.0.0.1:$OS_PORT"
	export OPEN_SANDBOX_API_KEY="$OS_KEY"
}

os_fake_stop() {
	if [ -n "${OS_FAKE_PID:-}" ]; then
		kill "$OS_FAKE_PID" 2>/dev/null || true
		wait "$OS_FAKE_PID" 2>/dev/null || true
		OS_FAKE_PID=
	fi
}

os_config() {
	local f=$1
	shift
	{
		echo "version: 1"
		echo "driver: opensandbox"
		echo "opensandbox:"
		echo "  domain: 127.0.0.1:${OS_PORT:-9}"
		if [ $# -eq 0 ]; then
			echo "  image: python:3.11"
		fi
		for l in "$@"; do
			echo "$l"
		done
	} >"$f"
}

os_api() {
	local m=$1 p=$2
	shift 2
	curl -sS -X "$m" -H "OPEN-SANDBOX-API-KEY: $OS_KEY" -H 'Content-Type: application/json' \
		-w '\n%{http_code}' "$@" "$OS_URL$p"
}

os_admin() {
	if [ $# -ge 3 ]; then
		curl -sS -X "$1" -d "$3" "$OS_URL$2"
	else
		curl -sS -X "$1" "$OS_URL$2"
	fi
}

os_fault() {
	os_admin POST /_fake/faults "$1" >/dev/null
}

os_sid() {
	jq -r .remote.sandboxId "$PI_SANDBOX_HOME/instances/$1/record.json"
}

os_state() {
	os_admin GET "/_fake/sandboxes/$1" | jq -r '.state // "gone"'
}

os_ops() {
	os_admin GET /_fake/stats | jq -r --arg op "$1" '.by_op[$op] // 0'
}
