#!/usr/bin/env bats
# The session lifecycle of the seeds through real Pi with a scripted model:
# renewal of an opensandbox sandbox at the fake server while the session
# lives, the policy from pisb's normalised config (flow-style YAML), resume,
# a connected sandbox only disconnected, a throwing ready callback, a failed
# creation failing session_start, a destroyed sandbox's message, the start-up
# sweep of stale session sandboxes and the watchdog after kill -9.
load helpers
load fakes/opensandbox
load pi/helpers

setup_file() {
	pi_require_local_driver
	if [ "$PI_FLAVOR" = current ]; then pi_install_current; else pi_install_legacy; fi
}

setup() {
	pi_require_local_driver
	require_cmd jq
	require_cmd curl
	pi_env "$BATS_TEST_TMPDIR"
	OUT="$BATS_TEST_TMPDIR/run.jsonl"
	export PISB_PROBE_LOG="$BATS_TEST_TMPDIR/probe.jsonl"
}

teardown() {
	local n
	for n in $(pisb list --json 2>/dev/null | jq -r '.[].name' 2>/dev/null); do pi_destroy "$n"; done
	os_fake_stop
}

# os_project LIFECYCLE [TTL]: .pi/sandbox.yaml for the fake, in flow style
os_project() {
	local pol=$1 ttl=${2:-4}
	os_fake_start
	{
		echo "version: 1"
		echo "driver: opensandbox"
		echo "opensandbox: {domain: \"127.0.0.1:$OS_PORT\", image: python:3.11, timeoutSeconds: $ttl, lifecycle: {onSessionShutdown: $pol}}"
	} > "$PROJ/.pi/sandbox.yaml"
	pisb validate -f "$PROJ/.pi/sandbox.yaml" >/dev/null
}

events() {
	jq -sc '[.[] | select(.kind=="event")]' "$PISB_PROBE_LOG"
}

@test "opensandbox: renewed at the server while the session lives; flow-style kill applied at exit" {
	os_project kill 6
	run -0 run_pi_json '[{"tools":[{"name":"bash","args":{"command":"sleep 5; echo slept"}}]},{"text":"done"}]' "$OUT" -e "$PI_DIR/events-probe.ts"
	tool_result "$OUT" 0
	[ "$tool_err" = false ]
	[[ $tool_text == *slept* ]]
	# TTL 6 s: one renewal every 3 s; the session held the sandbox for more than 5 s
	[ "$(os_ops renew)" -ge 1 ]
	run -0 events
	echo "$output"
	local id name
	id=$(jq -r '.[0].sandboxId' <<<"$output")
	name=$(jq -r '.[0].name' <<<"$output")
	[ "$id" != "$name" ]
	[[ $name == pi-proj-* ]]
	[ "$(os_state "$id")" = gone ]
	jq -e '.[1].phase == "released" and .[1].mode == "kill" and .[1].pisbMode == "removed"' <<<"$output"
	run -0 pisb list --json
	jq -e 'length == 0' <<<"$output"
}

@test "opensandbox: shutdown waits for a renewal in flight before the kill, and none starts after it" {
	os_project kill 10
	# the renewal due at 5 s takes 3 s: it is in flight when the session
	# ends, 6 s and Pi's start after the create; the TTL leaves 2 s beyond
	# it (a busy machine once let the sandbox expire with TTL 6 s and a
	# renewal due at 3 s that took 2.5 s)
	os_fault '{"delay_ms":{"renew":3000}}'
	run -0 run_pi_json '[{"tools":[{"name":"bash","args":{"command":"sleep 6; echo slept"}}]},{"text":"done"}]' "$OUT"
	tool_result "$OUT" 0
	[ "$tool_err" = false ]
	run -0 os_admin GET /_fake/log
	jq -c '.[] | select(.op == "renew" or .op == "delete") | [.op, .start_ms, .end_ms]' <<<"$output"
	jq -e '[.[] | select(.op == "renew")] | length >= 1' <<<"$output"
	jq -e '[.[] | select(.op == "delete")] | length == 1' <<<"$output"
	# every renewal ended before the kill began
	jq -e '([.[] | select(.op == "delete")][0].start_ms) as $kill | all(.[] | select(.op == "renew"); .end_ms <= $kill)' <<<"$output"
}

@test "opensandbox: flow-style pause pauses at exit; the next session resumes it and renews it first" {
	os_project pause 60
	run -0 run_pi_json '[{"tools":[{"name":"bash","args":{"command":"echo one > one.txt"}}]},{"text":"done"}]' "$OUT" -e "$PI_DIR/events-probe.ts"
	run -0 events
	local id name
	id=$(jq -r '.[0].sandboxId' <<<"$output")
	name=$(jq -r '.[0].name' <<<"$output")
	jq -e '.[1].mode == "pause" and .[1].pisbMode == "stopped" and .[0].resumed == false' <<<"$output"
	[ "$(os_state "$id")" = Paused ]
	# as if the renewal interval (TTL 60 s: every 30 s) had passed: pisb's
	# record of the last renewal moved back, the server's expiry left alone
	local f="$PI_SANDBOX_HOME/instances/$name/status.json"
	cat "$f"
	jq 'walk(if type == "object" and has("renewedAt") then .renewedAt -= 100 else . end)' "$f" > "$f.new"
	mv "$f.new" "$f"
	local renews
	renews=$(os_ops renew)
	: > "$PISB_PROBE_LOG"
	run -0 run_pi_json '[{"tools":[{"name":"bash","args":{"command":"cat one.txt"}}]},{"text":"done"}]' "$OUT" -e "$PI_DIR/events-probe.ts"
	tool_result "$OUT" 0
	[ "$tool_text" = one ]
	run -0 events
	echo "$output"
	jq -e --arg id "$id" --arg n "$name" '.[0].resumed == true and .[0].sandboxId == $id and .[0].name == $n' <<<"$output"
	[ "$(os_ops renew)" -gt "$renews" ]
	[ "$(os_state "$id")" = Paused ]
}

@test "opensandbox: a connected sandbox is only disconnected and its record forgotten" {
	os_fake_start
	local out id
	out=$(os_api POST /v1/sandboxes -d '{"image":{"uri":"x"},"entrypoint":["tail"],"resourceLimits":{"cpu":"1"},"timeout":600}')
	id=$(sed '$d' <<<"$out" | jq -r .id)
	printf 'version: 1\ndriver: opensandbox\nopensandbox: {domain: "127.0.0.1:%s", sandboxId: %s, lifecycle: {onSessionShutdown: kill}}\n' \
		"$OS_PORT" "$id" > "$PROJ/.pi/sandbox.yaml"
	run -0 run_pi_json '[{"tools":[{"name":"bash","args":{"command":"echo attached"}}]},{"text":"done"}]' "$OUT" -e "$PI_DIR/events-probe.ts"
	tool_result "$OUT" 0
	[ "$tool_text" = attached ]
	run -0 events
	jq -e --arg id "$id" '.[0].sandboxId == $id and .[0].createdByExtension == false and .[1].mode == "keep" and .[1].pisbMode == "disconnected"' <<<"$output"
	[ "$(os_state "$id")" = Running ]
	[ "$(os_ops delete)" -eq 0 ]
	run -0 pisb list --json
	jq -e 'length == 0' <<<"$output"
}

@test "a throwing ready callback: the sandbox is killed and the session has none" {
	export PISB_TEST_READY_THROW=ready-callback-boom PI_EXT_LOAD="$PI_DIR/embedded.ts"
	run -0 run_pi_json "$(jq -nc --arg p "$PROJ" '[{tools:[{name:"bash",args:{command:("touch " + $p + "/HOSTMARK; echo ran")}}]},{text:"done"}]')" "$OUT"
	# pi's own report of the failed session_start
	grep -q ready-callback-boom "$OUT.stderr"
	jq -se '[.[] | select(.kind=="callback")] | length == 1 and .[0].phase == "ready"' "$PISB_PROBE_LOG"
	tool_result "$OUT" 0
	[ "$tool_err" = true ]
	[[ $tool_text == *"ready callback failed"* ]]
	[[ $tool_text == *"nothing was run on the host"* ]]
	[ ! -e "$PROJ/HOSTMARK" ]
	run -0 pisb list --json
	jq -e 'length == 0' <<<"$output"
}

@test "a sandbox that cannot be created fails session_start, and every tool refuses" {
	# the configuration validates, the server does not answer
	printf 'version: 1\ndriver: opensandbox\nopensandbox: {domain: "127.0.0.1:9", image: x}\n' > "$PROJ/.pi/sandbox.yaml"
	export OPEN_SANDBOX_API_KEY=k
	run -0 run_pi_json "$(jq -nc --arg p "$PROJ" '[{tools:[{name:"bash",args:{command:("touch " + $p + "/HOSTMARK")}}]},{tools:[{name:"read",args:{path:"a"}}]},{text:"done"}]')" "$OUT" -e "$PI_DIR/events-probe.ts"
	cat "$OUT.stderr"
	# pi's report of the handler that failed
	grep -q 'Extension error.*pisb sandbox unavailable' "$OUT.stderr"
	local i
	for i in 0 1; do
		tool_result "$OUT" $i
		[ "$tool_err" = true ]
		[[ $tool_text == *"pisb sandbox unavailable"* ]]
	done
	[ ! -e "$PROJ/HOSTMARK" ]
	[ "$(events)" = "[]" ]
}

@test "a destroyed sandbox: every tool says it is gone, that nothing ran on the host, and how to go on" {
	export PISB_SANDBOX; PISB_SANDBOX=$(pi_name gone)
	local script
	script=$(jq -nc --arg p "$PROJ" --arg sb "$PISB_SANDBOX" '[
	 {tools:[{name:"bash",args:{command:"echo alive > alive.txt"}}]},
	 {tools:[{name:"sandbox",args:{input:({action:"destroy",name:$sb,confirm:$sb}|tojson)}}]},
	 {tools:[{name:"bash",args:{command:("touch " + $p + "/HOSTMARK; exit 3")}}]},
	 {tools:[{name:"read",args:{path:"alive.txt"}}]},
	 {tools:[{name:"write",args:{path:"w.txt",content:"x"}}]},
	 {tools:[{name:"ls",args:{}}]},
	 {tools:[{name:"grep",args:{pattern:"x"}}]},
	 {tools:[{name:"bash",args:{command:"echo again"}}]},
	 {text:"done"}]')
	run run_pi_json "$script" "$OUT" -e "$PI_DIR/events-probe.ts"
	# Pi's own words when it did not end well
	[ "$status" -eq 0 ] || { echo "pi exited $status; its stderr:"; cat "$OUT.stderr"; tail -5 "$OUT"; false; }
	tool_result "$OUT" 0
	[ "$tool_err" = false ]
	tool_result "$OUT" 1
	[ "$tool_err" = false ]
	local i
	for i in 2 3 4 5 6 7; do
		tool_result "$OUT" $i
		[ "$tool_err" = true ]
		[[ $tool_text == *"sandbox '$PISB_SANDBOX' is gone (it was destroyed); nothing was run on the host"* ]]
		[[ $tool_text == *"/sandbox recreate"* ]]
		[[ $tool_text != *"Command exited with code"* ]]
		[[ $tool_text != *"ENOENT"* ]]
	done
	[ ! -e "$PROJ/HOSTMARK" ]
	[ ! -e "$PROJ/w.txt" ]
	run -0 events
	jq -e '.[1].phase == "released" and .[1].pisbMode == "removed"' <<<"$output"
}

@test "session start sweeps this user's stale and orphaned session sandboxes, never running, fresh or foreign ones" {
	export PISB_GC_HOURS=1
	local stale running foreign orphan fresh owner
	stale=$(pi_name stale)
	running=$(pi_name run)
	foreign=$(pi_name foreign)
	orphan=$(pi_name orphan)
	fresh=$(pi_name fresh)
	printf '{"version":1,"driver":"local","metadata":{"pisb.pi/project":"x","pisb.pi/role":"session"}}\n' > "$BATS_TEST_TMPDIR/session.json"
	pisb create "$stale" -f "$BATS_TEST_TMPDIR/session.json" >/dev/null
	# a session sandbox whose Pi died (its owner process is gone), stopped just now
	sleep 30 &
	owner=$!
	pisb create "$orphan" -f "$BATS_TEST_TMPDIR/session.json" --owner-pid "$owner" >/dev/null
	pisb stop "$orphan" >/dev/null
	kill "$owner"
	wait "$owner" || true
	# a session sandbox stopped just now, its owner unknown: kept
	pisb create "$fresh" -f "$BATS_TEST_TMPDIR/session.json" >/dev/null
	pisb stop "$fresh" >/dev/null
	pisb create "$running" -f "$BATS_TEST_TMPDIR/session.json" >/dev/null
	pisb create "$foreign" -f "$PROJ/.pi/sandbox.yaml" >/dev/null
	pisb stop "$stale" >/dev/null
	pisb stop "$foreign" >/dev/null
	# stopped two hours ago, as far as pisb's records say
	local f
	for f in "$PI_SANDBOX_HOME/instances/$stale/status.json" "$PI_SANDBOX_HOME/instances/$foreign/status.json"; do
		jq --argjson t $(($(date +%s) - 7200)) '.stoppedAt = $t' "$f" > "$f.new" && mv "$f.new" "$f"
	done
	run -0 pisb gc --dry-run --hours 1 --json
	echo "$output"
	jq -e --arg s "$stale" '[.removed[].name] | index($s) != null' <<<"$output"
	export PISB_SANDBOX; PISB_SANDBOX=$(pi_name s)
	run -0 run_pi_json '[{"text":"done"}]' "$OUT"
	run pisb inspect "$stale" --json
	[ "$status" -eq 3 ]
	run pisb inspect "$orphan" --json
	[ "$status" -eq 3 ]
	run -0 pisb inspect "$fresh" --json
	jq -e '.status == "stopped"' <<<"$output"
	run -0 pisb inspect "$running" --json
	jq -e '.status == "running"' <<<"$output"
	run -0 pisb inspect "$foreign" --json
	jq -e '.status == "stopped"' <<<"$output"
}

# kill9_pi: Pi with a long bash call in the background, killed with SIGKILL
# once its sandbox exists; sets name to the sandbox's
kill9_pi() {
	printf '%s\n' '[{"tools":[{"name":"bash","args":{"command":"sleep 120"}}]},{"text":"done"}]' > "$OUT.script.json"
	cd "$PROJ"
	PI_SCRIPT="$OUT.script.json" pi_exec --mode json --no-session --offline \
		--provider scripted --model m1 -e "$PI_DIR/scripted-provider.ts" -e "$PI_EXT" go > "$OUT" 2> "$OUT.stderr" &
	local pid=$! i
	name=
	for ((i = 0; i < 240; i++)); do
		grep -q '"tool_execution_start"' "$OUT" && name=$(pisb list --json | jq -r '.[0].name // empty') && [ -n "$name" ] && break
		sleep 0.25
	done
	echo "sandbox: $name, pi: $pid"
	[ -n "$name" ]
	# the pid is Pi's node process itself
	[[ $(readlink "/proc/$pid/exe") == */node ]]
	kill -9 "$pid"
	wait "$pid" || true
}

@test "kill -9 of Pi under policy remove: the watchdog destroys the sandbox within seconds" {
	export PISB_LIFECYCLE=remove
	local name i
	kill9_pi
	for ((i = 0; i < 80; i++)); do
		pisb inspect "$name" --json >/dev/null 2>&1 || break
		sleep 0.25
	done
	run pisb inspect "$name" --json
	[ "$status" -eq 3 ]
}

@test "kill -9 of Pi under policy stop: the watchdog stops the sandbox" {
	export PISB_LIFECYCLE=stop
	local name i
	kill9_pi
	for ((i = 0; i < 80; i++)); do
		[ "$(pisb inspect "$name" --json | jq -r .status)" = stopped ] && break
		sleep 0.25
	done
	run -0 pisb inspect "$name" --json
	jq -e '.status == "stopped"' <<<"$output"
}

@test "bash and the sandbox tool's exec use pisb exec --bash when pisb offers it, --sh otherwise" {
	export PISB_SANDBOX; PISB_SANDBOX=$(pi_name sh)
	run -0 run_pi_json '[{"tools":[{"name":"bash","args":{"command":"echo \"[${BASH_VERSION:+bash}]\" {1..3}"}}]},{"tools":[{"name":"sandbox","args":{"input":"{\"action\":\"exec\",\"cmd\":\"echo \\\"[${BASH_VERSION:+bash}]\\\" {1..3}\"}"}}]},{"text":"done"}]' "$OUT"
	local want='[] {1..3}'
	if pisb exec --help | grep -q -- '--bash STRING'; then want='[bash] 1 2 3'; fi
	tool_result "$OUT" 0
	[ "$tool_err" = false ]
	[ "$tool_text" = "$want" ]
	tool_result "$OUT" 1
	[ "$tool_err" = false ]
	jq -e --arg w "$want" '.output == $w + "\n"' <<<"$tool_text"
}

@test "bash through the extension: a background job does not hold the call, and keeps running in the sandbox" {
	export PISB_SANDBOX PISB_LIFECYCLE=keep; PISB_SANDBOX=$(pi_name bg)
	# a hang would end in Pi's own timeout (an error), not in a result
	# the job's fork may not have exec'd sleep yet when the second call looks (a
	# loaded machine): it looks for 2 s, and shows what runs when it finds none
	run -0 run_pi_json '[{"tools":[{"name":"bash","args":{"command":"sleep 300 & echo bg started","timeout":60}}]},{"tools":[{"name":"bash","args":{"command":"for i in 1 2 3 4 5 6 7 8 9 10; do pgrep -x sleep >/dev/null && echo still running && exit; sleep 0.2; done; ps -ef; exit 1"}}]},{"text":"done"}]' "$OUT"
	pisb logs "$PISB_SANDBOX" -n 20 || true   # shown if an assertion fails
	tool_result "$OUT" 0
	[ "$tool_err" = false ]
	[ "$tool_text" = "bg started" ]
	tool_result "$OUT" 1
	[ "$tool_err" = false ]
	[ "$tool_text" = "still running" ]
	run -0 pisb exec "$PISB_SANDBOX" -- pgrep -x sleep
	pi_destroy "$PISB_SANDBOX"
}

@test "a status-line refresh still running when the session ends: Pi waits for it and exits 0 (the sandbox destroyed meanwhile)" {
	export PISB_SANDBOX; PISB_SANDBOX=$(pi_name slow)
	# pisb diff (the status line's count, run in the background after bash) takes 4 s, as on a loaded machine
	printf '#!/bin/sh\nfor a; do [ "$a" = diff ] && sleep 4 && break; done\nexec %s "$@"\n' "$PISB_BIN_DIR/pisb" > "$BATS_TEST_TMPDIR/slow-pisb"
	chmod +x "$BATS_TEST_TMPDIR/slow-pisb"
	export PISB_BIN=$BATS_TEST_TMPDIR/slow-pisb
	local script
	script=$(jq -nc --arg sb "$PISB_SANDBOX" '[
	 {tools:[{name:"bash",args:{command:"echo alive"}}]},
	 {tools:[{name:"sandbox",args:{input:({action:"destroy",name:$sb,confirm:$sb}|tojson)}}]},
	 {tools:[{name:"bash",args:{command:"echo again"}}]},
	 {text:"done"}]')
	run run_pi_json "$script" "$OUT"
	cat "$OUT.stderr"
	# current Pi ends the session's ctx after session_shutdown: a refresh that outlived it threw there (exit 1)
	[ "$status" -eq 0 ]
	run grep -c 'stale' "$OUT.stderr"
	[ "$output" = 0 ]
	tool_result "$OUT" 2
	[ "$tool_err" = true ]
	[[ $tool_text == *"is gone (it was destroyed)"* ]]
}
