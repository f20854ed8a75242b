#!/usr/bin/env bats
# Fidelity of the fake OpenSandbox server (tests/fakes/opensandbox_server.py)
# against the documented wire behaviour (shared/reference/opensandbox.md,
# sandbox-lifecycle.yml, execd-api.yaml) and against the official JS SDK.
# Every test starts its own fake on a free 127.0.0.1 port with a fresh state
# directory and kills it in teardown.
load helpers

FAKE="$BATS_TEST_DIRNAME/fakes/opensandbox_server.py"
SDK_DIR="$BATS_TEST_DIRNAME/fakes/sdk-check"
KEY="fidelity-key-$$"

setup_file() {
	# Start the real interpreter, not a wrapper such as a pyenv shim, so the
	# PID that teardown kills is the fake itself.
	FAKE_PY=$(python3 -c 'import sys; print(sys.executable)')
	export FAKE_PY
	# The SDK test needs node_modules; install once.  A failure is recorded
	# and makes that test FAIL (never skip) with the npm output.
	rm -f "$BATS_FILE_TMPDIR/npm.failed"
	if [ ! -d "$SDK_DIR/node_modules/@alibaba-group/opensandbox" ]; then
		if ! command -v npm >/dev/null; then
			echo "npm is not installed" >"$BATS_FILE_TMPDIR/npm.failed"
		elif ! (cd "$SDK_DIR" && npm install --no-audit --no-fund) >"$BATS_FILE_TMPDIR/npm.log" 2>&1; then
			cp "$BATS_FILE_TMPDIR/npm.log" "$BATS_FILE_TMPDIR/npm.failed"
		fi
	fi
}

# start_fake [extra server args...]: sets PORT, B (base URL), FAKE_PID
start_fake() {
	local pf="$BATS_TEST_TMPDIR/port"
	rm -f "$pf"
	"${FAKE_PY:-python3}" "$FAKE" --port 0 --api-key "$KEY" --port-file "$pf" \
		--state-dir "$BATS_TEST_TMPDIR/state" --stream-grace-ms 0 "$@" \
		>"$BATS_TEST_TMPDIR/fake.out" 2>"$BATS_TEST_TMPDIR/fake.err" 3>&- &
	FAKE_PID=$!
	local i
	for i in $(seq 100); do
		[ -s "$pf" ] && break
		sleep 0.05
	done
	PORT=$(cat "$pf")
	[ -n "$PORT" ] || { cat "$BATS_TEST_TMPDIR/fake.err" >&2; return 1; }
	B="http://127.0.0.1:$PORT"
}

setup() {
	start_fake --pending-ms 300 --pausing-ms 250 --resuming-ms 250
}

teardown() {
	if [ -n "${FAKE_PID:-}" ]; then
		kill "$FAKE_PID" 2>/dev/null || true
		wait "$FAKE_PID" 2>/dev/null || true
	fi
}

# lc METHOD PATH [curl args...]: authenticated lifecycle call; prints body,
# then a last line with the HTTP status.
lc() {
	local m=$1 p=$2
	shift 2
	curl -sS -X "$m" -H "OPEN-SANDBOX-API-KEY: $KEY" -w '\n%{http_code}' "$@" "$B$p"
}
body() { sed '$d' <<<"$1"; }
# body_is JQ_ARGS...: the body of $output is JSON and jq -e ARGS holds of
# it (fails on an empty body, where a pipe into jq -e would pass)
body_is() {
	local b
	b=$(body "$output")
	[ -n "$b" ] && jq -e "$@" <<<"$b"
}
code() { tail -n1 <<<"$1"; }

CREATE='{"image":{"uri":"python:3.11"},"entrypoint":["tail","-f","/dev/null"],"resourceLimits":{"cpu":"1","memory":"2Gi"},"timeout":600,"metadata":{"team":"pisb"}}'

# mk [json]: create a sandbox, print its id
mk() {
	local r
	r=$(lc POST /v1/sandboxes -H 'Content-Type: application/json' -d "${1:-$CREATE}")
	[ "$(code "$r")" = 202 ] || { echo "create failed: $r" >&2; return 1; }
	body "$r" | jq -r .id
}

# wait_state ID STATE: poll GET (25 ms) for up to 10 s; prints states seen
wait_state() {
	local id=$1 want=$2 st last="" i
	for i in $(seq 400); do
		st=$(lc GET "/v1/sandboxes/$id" | sed '$d' | jq -r .status.state)
		[ "$st" != "$last" ] && printf '%s ' "$st" && last=$st
		[ "$st" = "$want" ] && return 0
		sleep 0.025
	done
	return 1
}

# execd base URL of a sandbox (endpoint has no scheme; the client prepends it)
execd() {
	local ep
	ep=$(lc GET "/v1/sandboxes/$1/endpoints/44772" | sed '$d' | jq -r .endpoint)
	echo "http://$ep"
}

@test "auth: 401 bodies are {code,message}; X-Request-ID on every response" {
	run -0 curl -sS -D "$BATS_TEST_TMPDIR/h" -w '\n%{http_code}' "$B/v1/sandboxes"
	[ "$(code "$output")" = 401 ]
	body_is '(keys == ["code","message"]) and .code == "MISSING_API_KEY"
		and .message == "Authentication credentials are missing. Provide API key via OPEN-SANDBOX-API-KEY header."'
	grep -qiE '^x-request-id: [0-9a-f]{32}' "$BATS_TEST_TMPDIR/h"

	run -0 curl -sS -H 'OPEN-SANDBOX-API-KEY: wrong' -H 'X-Request-ID: trace-123' -D "$BATS_TEST_TMPDIR/h" \
		-w '\n%{http_code}' "$B/v1/sandboxes/anything"
	[ "$(code "$output")" = 401 ]
	body_is '(keys == ["code","message"]) and .code == "INVALID_API_KEY"
		and .message == "Authentication credentials are invalid. Check your API key and try again."'
	grep -qi '^x-request-id: trace-123' "$BATS_TEST_TMPDIR/h"

	# auth runs before routing; /health and the proxy route are exempt
	run -0 curl -sS -w '\n%{http_code}' "$B/v1/no-such-route"
	[ "$(code "$output")" = 401 ]
	run -0 curl -sS -w '\n%{http_code}' "$B/health"
	[ "$(code "$output")" = 200 ]
	body_is '.status == "healthy"'
	run -0 lc GET /v1/sandboxes
	[ "$(code "$output")" = 200 ]
	body_is '.items == [] and .pagination.totalItems == 0 and .pagination.hasNextPage == false'
}

@test "create: 202, required fields, Pending -> Running, omitted fields absent" {
	# A Pending long enough that the first poll sees it even on a loaded
	# machine (300 ms was missed once in a fresh root running 4 suites).
	teardown
	start_fake --pending-ms 2500
	run -0 lc POST /v1/sandboxes -H 'Content-Type: application/json' -d "$CREATE"
	[ "$(code "$output")" = 202 ]
	local b id
	b=$(body "$output")
	id=$(jq -r .id <<<"$b")
	[[ $id =~ ^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$ ]]
	jq -e '.status.state == "Pending" and .entrypoint == ["tail","-f","/dev/null"] and .metadata == {"team":"pisb"}
		and (has("image") | not) and (.createdAt | test("Z$")) and (.expiresAt | test("Z$"))' <<<"$b"
	# expiresAt = createdAt + timeout (600 s)
	jq -e '((.expiresAt | sub("\\.[0-9]+";"") | fromdateiso8601) - (.createdAt | sub("\\.[0-9]+";"") | fromdateiso8601)) == 600' <<<"$b"

	run -0 wait_state "$id" Running
	[ "$output" = "Pending Running " ]
	run -0 lc GET "/v1/sandboxes/$id"
	body_is '.image == {"uri":"python:3.11"} and .status.reason == "CONTAINER_RUNNING"
		and (.status.lastTransitionAt | type == "string")'

	# timeout omitted = manual cleanup: no expiresAt key at all
	run -0 mk '{"snapshotId":"snap-1","resourceLimits":{"cpu":"1"}}'
	run -0 lc GET "/v1/sandboxes/$output"
	body_is '(has("expiresAt") | not) and .snapshotId == "snap-1" and .entrypoint == ["tail","-f","/dev/null"]'
}

@test "create validation: 422 pydantic detail, 400 reserved metadata prefix" {
	run -0 lc POST /v1/sandboxes -d '{"image":{"uri":"x"},"entrypoint":["a"],"resourceLimits":{},"timeout":10}'
	[ "$(code "$output")" = 422 ]
	body_is '.detail[0].loc == ["body","timeout"] and .detail[0].type == "greater_than_equal"'
	run -0 lc POST /v1/sandboxes -d '{"image":{"uri":"x"},"resourceLimits":{}}'
	[ "$(code "$output")" = 422 ]
	run -0 lc POST /v1/sandboxes -d '{"image":{"uri":"x"},"snapshotId":"s","entrypoint":["a"],"resourceLimits":{}}'
	[ "$(code "$output")" = 422 ]
	run -0 lc POST /v1/sandboxes -d '{"image":{"uri":"x"},"entrypoint":["a"],"resourceLimits":{},"metadata":{"opensandbox.io/x":"y"}}'
	[ "$(code "$output")" = 400 ]
	body_is '.code == "SANDBOX::INVALID_METADATA_LABEL" and (.message | contains("reserved prefix"))'
	run -0 lc POST /v1/sandboxes -d '{"image":{"uri":"x"},"entrypoint":["a"],"resourceLimits":{},"metadata":{"k":"has space"}}'
	[ "$(code "$output")" = 400 ]
}

@test "pause/resume: 202 empty, Pausing -> Paused, Resuming -> Running, 409 on wrong state" {
	local id
	# transitions long enough for a loaded machine's first poll to see them
	teardown
	start_fake --pending-ms 1500 --pausing-ms 1500 --resuming-ms 1500
	id=$(mk)
	# still Pending: pause is a conflict
	run -0 lc POST "/v1/sandboxes/$id/pause"
	[ "$(code "$output")" = 409 ]
	body_is '.code == "DOCKER::SANDBOX_NOT_RUNNING" and .message == "Sandbox is not in a running state."'
	wait_state "$id" Running >/dev/null

	run -0 lc POST "/v1/sandboxes/$id/resume"
	[ "$(code "$output")" = 409 ]
	body_is '.code == "DOCKER::SANDBOX_NOT_PAUSED" and .message == "Sandbox is not in a paused state."'

	run -0 lc POST "/v1/sandboxes/$id/pause"
	[ "$(code "$output")" = 202 ]
	[ -z "$(body "$output")" ] # empty body
	run -0 wait_state "$id" Paused
	[ "$output" = "Pausing Paused " ]
	run -0 lc POST "/v1/sandboxes/$id/pause"
	[ "$(code "$output")" = 409 ]
	# execd is unreachable while paused (server proxy: 502)
	run -0 curl -sS -o /dev/null -w '%{http_code}' "$(execd "$id")/ping"
	[ "$output" = 502 ]

	run -0 lc POST "/v1/sandboxes/$id/resume"
	[ "$(code "$output")" = 202 ]
	[ -z "$(body "$output")" ]
	run -0 wait_state "$id" Running
	[ "$output" = "Resuming Running " ]
	run -0 curl -sS -o /dev/null -w '%{http_code}' "$(execd "$id")/ping"
	[ "$output" = 200 ]
	run -0 lc POST /v1/sandboxes/00000000-0000-4000-8000-000000000000/pause
	[ "$(code "$output")" = 404 ]
}

@test "renew: 200 + GET reflects it; 400 past; 409 manual cleanup; 422 garbage; 404 unknown" {
	local id manual new
	id=$(mk)
	new=$(date -u -d '+2 hours' +%Y-%m-%dT%H:%M:%S.%NZ) # RFC3339Nano like the Go SDK
	run -0 lc POST "/v1/sandboxes/$id/renew-expiration" -H 'Content-Type: application/json' -d "{\"expiresAt\":\"$new\"}"
	[ "$(code "$output")" = 200 ]
	local got
	got=$(body "$output" | jq -r .expiresAt)
	[ "$got" = "${new:0:26}Z" ] # normalized to microseconds, Z
	run -0 lc GET "/v1/sandboxes/$id"
	[ "$(body "$output" | jq -r .expiresAt)" = "$got" ]
	# +00:00 offsets are accepted too, and a renew may shorten the TTL
	run -0 lc POST "/v1/sandboxes/$id/renew-expiration" -d "{\"expiresAt\":\"$(date -u -d '+30 minutes' +%Y-%m-%dT%H:%M:%S+00:00)\"}"
	[ "$(code "$output")" = 200 ]

	run -0 lc POST "/v1/sandboxes/$id/renew-expiration" -d '{"expiresAt":"2001-01-01T00:00:00Z"}'
	[ "$(code "$output")" = 400 ]
	body_is '.code == "DOCKER::INVALID_EXPIRATION" and .message == "New expiration time must be in the future."'

	manual=$(mk '{"image":{"uri":"x"},"entrypoint":["a"],"resourceLimits":{}}')
	run -0 lc POST "/v1/sandboxes/$manual/renew-expiration" -d "{\"expiresAt\":\"$new\"}"
	[ "$(code "$output")" = 409 ]
	body_is --arg id "$manual" '.code == "DOCKER::INVALID_EXPIRATION"
		and .message == "Sandbox \($id) does not have automatic expiration enabled."'

	run -0 lc POST "/v1/sandboxes/$id/renew-expiration" -d '{"expiresAt":"tomorrow"}'
	[ "$(code "$output")" = 422 ]
	body_is '.detail[0].loc == ["body","expiresAt"]'
	run -0 lc POST "/v1/sandboxes/$id/renew-expiration" -d "{\"expiresAt\":\"$new\",\"extra\":1}"
	[ "$(code "$output")" = 422 ]
	run -0 lc POST /v1/sandboxes/nope/renew-expiration -d "{\"expiresAt\":\"$new\"}"
	[ "$(code "$output")" = 404 ]
	body_is '.code == "DOCKER::SANDBOX_NOT_FOUND" and .message == "Sandbox nope not found."'
}

@test "expiry: once expiresAt passes the sandbox is 404 (lifecycle and execd)" {
	local id ep soon
	id=$(mk)
	wait_state "$id" Running >/dev/null
	ep=$(execd "$id")
	soon=$(date -u -d '+1 second' +%Y-%m-%dT%H:%M:%S.%NZ)
	run -0 lc POST "/v1/sandboxes/$id/renew-expiration" -d "{\"expiresAt\":\"$soon\"}"
	[ "$(code "$output")" = 200 ]
	run -0 lc GET "/v1/sandboxes/$id"
	[ "$(code "$output")" = 200 ]
	sleep 1.2
	run -0 lc GET "/v1/sandboxes/$id"
	[ "$(code "$output")" = 404 ]
	body_is --arg id "$id" '. == {"code":"DOCKER::SANDBOX_NOT_FOUND","message":"Sandbox \($id) not found."}'
	run -0 curl -sS -o /dev/null -w '%{http_code}' "$ep/ping"
	[ "$output" = 404 ]
	run -0 lc POST "/v1/sandboxes/$id/renew-expiration" -d "{\"expiresAt\":\"$(date -u -d '+1 hour' +%FT%TZ)\"}"
	[ "$(code "$output")" = 404 ]

	# admin knob: expire now
	id=$(mk)
	run -0 curl -sS -X POST -d "{\"expire_now\":\"$id\"}" "$B/_fake/faults"
	run -0 lc GET "/v1/sandboxes/$id"
	[ "$(code "$output")" = 404 ]
}

@test "endpoint: no scheme, host:port/path, any port; 400 bad port; delete 204 then 404" {
	local id ep
	id=$(mk)
	run -0 lc GET "/v1/sandboxes/$id/endpoints/44772"
	[ "$(code "$output")" = 200 ]
	ep=$(body "$output" | jq -r .endpoint)
	[[ $ep != http* ]]
	[ "$ep" = "127.0.0.1:$PORT/sandboxes/$id/proxy/44772" ]
	body_is 'has("headers") | not'
	run -0 lc GET "/v1/sandboxes/$id/endpoints/18080?use_server_proxy=false"
	[ "$(body "$output" | jq -r .endpoint)" = "127.0.0.1:$PORT/sandboxes/$id/proxy/18080" ]
	run -0 lc GET "/v1/sandboxes/$id/endpoints/70000"
	[ "$(code "$output")" = 400 ]
	body_is '.code == "DOCKER::INVALID_PORT"'
	run -0 lc GET "/v1/sandboxes/$id/endpoints/abc"
	[ "$(code "$output")" = 422 ]
	# the proxy route needs no API key; execd answers once Running
	wait_state "$id" Running >/dev/null
	run -0 curl -sS -w '%{http_code}' "http://$ep/ping"
	[ "$output" = 200 ]

	run -0 lc DELETE "/v1/sandboxes/$id"
	[ "$(code "$output")" = 204 ]
	[ -z "$(body "$output")" ]
	run -0 lc GET "/v1/sandboxes/$id"
	[ "$(code "$output")" = 404 ]
	run -0 lc DELETE "/v1/sandboxes/$id"
	[ "$(code "$output")" = 404 ]
}

@test "command stream: blank-line separated JSON, init first, exactly one terminal event, exit code" {
	local id ep
	id=$(mk)
	wait_state "$id" Running >/dev/null
	ep=$(execd "$id")
	curl -sS -N -D "$BATS_TEST_TMPDIR/h" -H 'Content-Type: application/json' \
		-d '{"command":"echo hi; printf \"a\\n\\nb\\r\\n\"; echo oops >&2; exit 3","cwd":"/workspace"}' \
		"$ep/command" >"$BATS_TEST_TMPDIR/s"
	grep -qi '^content-type: text/event-stream' "$BATS_TEST_TMPDIR/h"
	grep -qi '^transfer-encoding: chunked' "$BATS_TEST_TMPDIR/h"
	# framing: JSON line, blank line, JSON line, blank line ... (no "data:")
	awk 'NR % 2 == 1 && !/^\{.*\}$/ { bad = 1 } NR % 2 == 0 && $0 != "" { bad = 1 } END { exit bad || NR % 2 }' "$BATS_TEST_TMPDIR/s"
	sed -n 'p;n' "$BATS_TEST_TMPDIR/s" | jq -s -c . >"$BATS_TEST_TMPDIR/ev"
	jq -e '.[0].type == "init" and (.[0].text | test("^[0-9a-f]{32}$")) and all(.[]; .timestamp | type == "number")' "$BATS_TEST_TMPDIR/ev"
	jq -e '[.[] | select(.type == "execution_complete" or .type == "error")] | length == 1' "$BATS_TEST_TMPDIR/ev"
	jq -e '.[-1] == (.[-1] | select(.type == "error")) and .[-1].error == {"ename":"CommandExecError","evalue":"3","traceback":["exit status 3"]}' "$BATS_TEST_TMPDIR/ev"
	jq -e '[.[] | select(.type == "stdout") | .text] == ["hi","a","\n","b"]' "$BATS_TEST_TMPDIR/ev"
	jq -e '[.[] | select(.type == "stderr") | .text] == ["oops"]' "$BATS_TEST_TMPDIR/ev"

	# success: execution_complete, no error event
	curl -sS -N -d '{"command":"echo ok"}' "$ep/command" | sed -n 'p;n' | jq -s -c . >"$BATS_TEST_TMPDIR/ev"
	jq -e '[.[] | select(.type == "error")] == [] and .[-1].type == "execution_complete" and ([.[] | select(.type == "stdout") | .text] == ["ok"])' "$BATS_TEST_TMPDIR/ev"

	# synchronous validation errors are JSON, not a stream
	run -0 curl -sS -w '\n%{http_code}' -d '{"command":"ls","cwd":"/no/such/dir"}' "$ep/command"
	[ "$(code "$output")" = 400 ]
	body_is '.code == "INVALID_REQUEST_BODY"'
}

@test "interrupt and timeout: error event with evalue -1; status endpoint; 500 when not running" {
	local id ep cid
	id=$(mk)
	wait_state "$id" Running >/dev/null
	ep=$(execd "$id")
	curl -sS -N -d '{"command":"echo started; sleep 30"}' "$ep/command" >"$BATS_TEST_TMPDIR/s" 3>&- &
	local cpid=$!
	for _ in $(seq 60); do grep -q started "$BATS_TEST_TMPDIR/s" 2>/dev/null && break; sleep 0.05; done
	cid=$(head -n1 "$BATS_TEST_TMPDIR/s" | jq -r .text)
	run -0 curl -sS -w '%{http_code}' "$ep/command/status/$cid"
	[[ $output == *'"running":true'* ]]
	run -0 curl -sS -X DELETE -w '%{http_code}' "$ep/command?id=$cid"
	[ "$output" = 200 ]
	wait "$cpid"
	sed -n 'p;n' "$BATS_TEST_TMPDIR/s" | jq -s -e '.[-1].type == "error" and .[-1].error.evalue == "-1"
		and ([.[] | select(.type == "execution_complete" or .type == "error")] | length == 1)'
	run -0 curl -sS "$ep/command/status/$cid"
	jq -e '.running == false and .exit_code == -1 and .error == "signal: terminated" and (.finished_at | type == "string")' <<<"$output"
	run -0 curl -sS -X DELETE -w '\n%{http_code}' "$ep/command?id=$cid"
	[ "$(code "$output")" = 500 ]
	body_is '.code == "RUNTIME_ERROR"'

	run -0 curl -sS -N -d '{"command":"sleep 10","timeout":200}' "$ep/command"
	sed -n 'p;n' <<<"$output" | jq -s -e '.[-1].error == {"ename":"CommandExecError","evalue":"-1","traceback":["signal: killed"]}'
}

@test "files: upload/download byte-exact (NUL), info, search, mkdir, delete, 404" {
	local id ep
	id=$(mk)
	wait_state "$id" Running >/dev/null
	ep=$(execd "$id")
	printf 'head\0mid\r\n\377tail' >"$BATS_TEST_TMPDIR/in.bin"
	printf '{"path":"/workspace/up/in.bin","mode":640}' >"$BATS_TEST_TMPDIR/meta.json"
	run -0 curl -sS -w '%{http_code}' \
		-F "metadata=@$BATS_TEST_TMPDIR/meta.json;filename=metadata;type=application/json" \
		-F "file=@$BATS_TEST_TMPDIR/in.bin;type=application/octet-stream" "$ep/files/upload"
	[ "$output" = 200 ]
	curl -sS -D "$BATS_TEST_TMPDIR/h" -o "$BATS_TEST_TMPDIR/out.bin" "$ep/files/download?path=/workspace/up/in.bin"
	cmp "$BATS_TEST_TMPDIR/in.bin" "$BATS_TEST_TMPDIR/out.bin"
	grep -qi '^content-type: application/octet-stream' "$BATS_TEST_TMPDIR/h"
	grep -qi '^content-disposition: attachment; filename="in.bin"' "$BATS_TEST_TMPDIR/h"
	# a Range request gives 206 with exactly those bytes
	run -0 curl -sS -H 'Range: bytes=4-6' -o "$BATS_TEST_TMPDIR/part" -w '%{http_code}' "$ep/files/download?path=/workspace/up/in.bin"
	[ "$output" = 206 ]
	printf '\0mi' | cmp - "$BATS_TEST_TMPDIR/part"

	run -0 curl -sS "$ep/files/info?path=/workspace/up/in.bin"
	jq -e '."/workspace/up/in.bin" | .path == "/workspace/up/in.bin" and .type == "file" and .size == 15 and .mode == 640' <<<"$output"
	run -0 curl -sS -w '\n%{http_code}' "$ep/files/info?path=/workspace/up/in.bin&path=/workspace/missing"
	[ "$(code "$output")" = 404 ]
	body_is '.code == "FILE_NOT_FOUND"'
	run -0 curl -sS -w '\n%{http_code}' "$ep/files/download?path=/workspace/missing"
	[ "$(code "$output")" = 404 ]

	# the command side sees the same tree
	run -0 curl -sS -N -d '{"command":"wc -c < in.bin","cwd":"/workspace/up"}' "$ep/command"
	sed -n 'p;n' <<<"$output" | jq -s -e '[.[] | select(.type == "stdout") | .text] == ["15"]'

	run -0 curl -sS -w '%{http_code}' -d '{"/workspace/a/b":{"mode":700}}' "$ep/directories"
	[ "$output" = 200 ]
	run -0 curl -sS "$ep/directories/list?path=/workspace"
	jq -e '[.[].path] == ["/workspace/a","/workspace/up"] and all(.[]; .type == "directory")' <<<"$output"
	run -0 curl -sS "$ep/files/search?path=/workspace&pattern=*.bin"
	jq -e '[.[].path] == ["/workspace/up/in.bin"]' <<<"$output"
	run -0 curl -sS -X DELETE -w '%{http_code}' "$ep/files?path=/workspace/up/in.bin&path=/workspace/never-existed"
	[ "$output" = 200 ]
	run -0 curl -sS -o /dev/null -w '%{http_code}' "$ep/files/download?path=/workspace/up/in.bin"
	[ "$output" = 404 ]
	run -0 curl -sS -X DELETE -w '%{http_code}' "$ep/directories?path=/workspace/a"
	[ "$output" = 200 ]
	# missing metadata filename= is not a file part (gin form.File)
	run -0 curl -sS -w '\n%{http_code}' -F 'metadata={"path":"/workspace/x"}' -F "file=@$BATS_TEST_TMPDIR/in.bin" "$ep/files/upload"
	[ "$(code "$output")" = 400 ]
	body_is '.code == "INVALID_FILE_METADATA"'
}

@test "fault knobs: renew 503 N times, per-op delay, stats per route, concurrent renewals" {
	local id new
	id=$(mk)
	new=$(date -u -d '+1 hour' +%FT%TZ)
	run -0 curl -sS -X POST -d '{"fail":{"renew":{"status":503,"count":2}}}' "$B/_fake/faults"
	jq -e '.fail.renew == {"status":503,"count":2}' <<<"$output"
	run -0 lc POST "/v1/sandboxes/$id/renew-expiration" -d "{\"expiresAt\":\"$new\"}"
	[ "$(code "$output")" = 503 ]
	run -0 lc POST "/v1/sandboxes/$id/renew-expiration" -d "{\"expiresAt\":\"$new\"}"
	[ "$(code "$output")" = 503 ]
	run -0 lc POST "/v1/sandboxes/$id/renew-expiration" -d "{\"expiresAt\":\"$new\"}"
	[ "$(code "$output")" = 200 ]
	run -0 curl -sS "$B/_fake/stats"
	jq -e '.by_route["POST /v1/sandboxes/{id}/renew-expiration"] == 3 and .by_status["renew 503"] == 2
		and .by_status["renew 200"] == 1 and .by_op.create == 1' <<<"$output"
	# unknown knobs are rejected so typos do not silently pass
	run -0 curl -sS -w '\n%{http_code}' -X POST -d '{"renew_fial":1}' "$B/_fake/faults"
	[ "$(code "$output")" = 400 ]

	# 100 sandboxes renewed in parallel with a 50 ms server-side delay each:
	# serial handling would need >= 5 s
	local i
	for i in $(seq 100); do printf 'url = "%s/v1/sandboxes"\n' "$B"; done >"$BATS_TEST_TMPDIR/create"
	curl -sS --parallel --parallel-max 20 -H "OPEN-SANDBOX-API-KEY: $KEY" -d "$CREATE" -w '\n' \
		-K "$BATS_TEST_TMPDIR/create" | jq -r .id >"$BATS_TEST_TMPDIR/ids"
	[ "$(sort -u "$BATS_TEST_TMPDIR/ids" | grep -c -- -)" = 100 ]
	run -0 curl -sS -X POST -d '{"delay_ms":{"renew":50}}' "$B/_fake/faults"
	while read -r i; do
		printf 'url = "%s/v1/sandboxes/%s/renew-expiration"\noutput = "/dev/null"\n' "$B" "$i"
	done <"$BATS_TEST_TMPDIR/ids" >"$BATS_TEST_TMPDIR/urls"
	local t0 t1
	t0=$(date +%s%N)
	run -0 curl -sS --parallel --parallel-immediate --parallel-max 100 -X POST \
		-H "OPEN-SANDBOX-API-KEY: $KEY" -d "{\"expiresAt\":\"$new\"}" -w '%{http_code}\n' -K "$BATS_TEST_TMPDIR/urls"
	t1=$(date +%s%N)
	[ "$(grep -c '^200$' <<<"$output")" = 100 ]
	echo "100 parallel renewals took $(((t1 - t0) / 1000000)) ms"
	# parallel, shown by the server's own count (no wall-clock bound: a
	# loaded machine would make one fail that is not wrong)
	run -0 curl -sS "$B/_fake/stats"
	jq -e '.inflight_max > 10' <<<"$output"
}

@test "official JS SDK (@alibaba-group/opensandbox) drives the fake end to end" {
	if [ -f "$BATS_FILE_TMPDIR/npm.failed" ]; then
		echo "FAIL: could not install the SDK in $SDK_DIR (npm install --no-audit --no-fund)." >&2
		echo "Is the npm registry reachable?  npm output:" >&2
		cat "$BATS_FILE_TMPDIR/npm.failed" >&2
		return 1
	fi
	command -v node >/dev/null || { echo "FAIL: node is not installed" >&2; return 1; }
	run -0 --separate-stderr timeout 120 node "$SDK_DIR/check.mjs" --port "$PORT" --api-key "$KEY"
	echo "$output"
	[[ $output == *"[sdk-check] PASSED:"* ]]
}
