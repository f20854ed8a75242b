#!/usr/bin/env bats
# The Pi extension around the tools: abort, the user's ! commands, failing
# closed, the session lifecycle and its events. Real Pi, real local pisb.
load helpers
load pi/helpers

setup_file() {
	pi_require_local_driver
	if [ "$PI_FLAVOR" = current ]; then pi_install_current; else pi_install_legacy; fi
}

setup() {
	pi_require_local_driver
	pi_env "$BATS_TEST_TMPDIR"
	SB=$(pi_name s)
	export PISB_SANDBOX=$SB
	OUT="$BATS_TEST_TMPDIR/run.jsonl"
	export PISB_PROBE_LOG="$BATS_TEST_TMPDIR/probe.jsonl"
	export PISB_TEST_HOST_SECRET=hunter2-from-host-env
}

teardown() {
	local n
	pi_destroy "$SB"
	for n in $(pisb list --json 2>/dev/null | jq -r '.[].name' 2>/dev/null); do pi_destroy "$n"; done
}

# the SDK driver: legacy Pi only (current Pi is driven over RPC in 82-pi-current)
require_sdk() {
	[ "$PI_FLAVOR" = legacy ] || skip "the SDK driver drives legacy Pi only; 82-pi-current covers this over RPC"
}

@test "abort kills the command's process group inside the sandbox" {
	require_sdk
	export PISB_LIFECYCLE=keep
	printf '%s\n' '[{"tools":[{"name":"bash","args":{"command":"echo started; sleep 37; echo never"}}]}]' > "$OUT.script"
	run -0 drive PI_SCRIPT="$OUT.script" DRIVE_ABORT_MS=2500
	echo "$output"
	local line
	line=$(grep '"type":"tool"' <<<"$output")
	jq -e '.isError and (.text | test("started")) and (.text | test("Command aborted")) and (.text | test("never") | not)' <<<"$line"
	run -0 pisb exec "$SB" --sh 'ps -eo args | grep -c "^sleep 37" || true'
	[ "$output" = 0 ]
	! pgrep -fx "sleep 37"
}

@test "! and !! commands run in the sandbox, not on the host" {
	require_sdk
	export PISB_LIFECYCLE=keep
	run -0 drive DRIVE_USER_BASH='["pwd; echo \"[$PISB_TEST_HOST_SECRET]\"; echo from-bang > bang.txt", "!exit 7"]'
	echo "$output"
	jq -se '[.[] | select(.type=="user_bash")][0] | .handled and .exitCode == 0 and (.output | test("^/workspace\n\\[\\]\n"))' <<<"$output"
	jq -se '[.[] | select(.type=="user_bash")][1] | .handled and .exitCode == 7' <<<"$output"
	run -0 pisb exec "$SB" --sh "cat /workspace/bang.txt"
	[ "$output" = from-bang ]
	[ ! -e "$PROJ/bang.txt" ]
}

@test "after 'pisb stop', every tool and ! command fails and nothing runs on the host" {
	require_sdk
	export PISB_LIFECYCLE=keep
	local script
	script=$(jq -nc --arg sb "$SB" --arg p "$PROJ" '[
	 {tools:[{name:"bash",args:{command:"echo alive > alive.txt; echo alive"}}]},
	 {host:("pisb stop " + $sb)},
	 {tools:[{name:"bash",args:{command:("touch " + $p + "/HOSTMARK-bash; echo ran")}}]},
	 {tools:[{name:"read",args:{path:"alive.txt"}}]},
	 {tools:[{name:"write",args:{path:"w.txt",content:"x"}}]},
	 {tools:[{name:"edit",args:{path:"alive.txt",edits:[{oldText:"alive",newText:"dead"}]}}]},
	 {tools:[{name:"ls",args:{}}]},
	 {tools:[{name:"find",args:{pattern:"*"}}]},
	 {tools:[{name:"grep",args:{pattern:"alive"}}]}]')
	printf '%s\n' "$script" > "$OUT.script"
	run -0 drive PI_SCRIPT="$OUT.script" DRIVE_USER_BASH="[\"touch $PROJ/HOSTMARK-bang; echo ran\"]"
	echo "$output"
	jq -se '[.[] | select(.type=="tool")][0] | (.isError | not) and (.text | test("alive"))' <<<"$output"
	jq -se '[.[] | select(.type=="host")][0].status == 0' <<<"$output"
	[ "$(jq -s '[.[] | select(.type=="tool")][1:] | length' <<<"$output")" -eq 7 ]
	jq -se '[.[] | select(.type=="tool")][1:] | all(.isError and (.text | test("sandbox|pisb"; "i")) and (.text | test("ran") | not))' <<<"$output"
	jq -se '[.[] | select(.type=="user_bash")][0] | (.error // "" | test("sandbox")) and ((.output // "") | test("ran") | not)' <<<"$output"
	[ ! -e "$PROJ/HOSTMARK-bash" ]
	[ ! -e "$PROJ/HOSTMARK-bang" ]
	[ ! -e "$PROJ/w.txt" ]
	run -0 pisb inspect "$SB" --json
	jq -e '.status == "stopped"' <<<"$output"
}

@test "without pisb every tool call fails closed" {
	export PISB_BIN="$BATS_TEST_TMPDIR/no-such-dir/pisb"
	local script
	script=$(jq -nc --arg p "$PROJ" '[
	 {tools:[{name:"bash",args:{command:("touch " + $p + "/HOSTMARK; echo ran")}}]},
	 {tools:[{name:"read",args:{path:".pi/sandbox.yaml"}}]},
	 {tools:[{name:"write",args:{path:"w.txt",content:"x"}}]},
	 {tools:[{name:"ls",args:{}}]},
	 {text:"done"}]')
	run -0 run_pi_json "$script" "$OUT"
	local i
	for i in 0 1 2 3; do
		tool_result "$OUT" $i
		[ "$tool_err" = true ]
		[[ $tool_text == *"pisb not found"* ]]
		[[ $tool_text == *"nothing was run on the host"* ]]
	done
	[ ! -e "$PROJ/HOSTMARK" ]
	[ ! -e "$PROJ/w.txt" ]
}

@test "default lifecycle is the seed's kill: the session's sandbox is destroyed at exit" {
	unset PISB_SANDBOX
	run -0 run_pi_json '[{"tools":[{"name":"bash","args":{"command":"echo hi"}}]},{"text":"done"}]' "$OUT" -e "$PI_DIR/events-probe.ts"
	tool_result "$OUT" 0
	[ "$tool_err" = false ]
	run -0 pisb list --json
	jq -e 'length == 0' <<<"$output"
	jq -se '[.[] | select(.kind=="event")][1] | .mode == "kill" and .pisbMode == "removed"' "$PISB_PROBE_LOG"
}

@test "lifecycle stop: a project sandbox, stopped at exit, resumed with its workspace" {
	unset PISB_SANDBOX
	export PISB_LIFECYCLE=stop
	run -0 run_pi_json '[{"tools":[{"name":"bash","args":{"command":"echo kept > persist.txt"}}]},{"text":"done"}]' "$OUT"
	tool_result "$OUT" 0
	[ "$tool_err" = false ]
	run -0 pisb list --json
	echo "$output"
	jq -e 'length == 1 and (.[0].name | test("^pi-proj-[0-9a-f]{6}$")) and .[0].status == "stopped"' <<<"$output"
	SB=$(jq -r '.[0].name' <<<"$output")
	run -0 run_pi_json '[{"tools":[{"name":"bash","args":{"command":"cat persist.txt"}}]},{"text":"done"}]' "$OUT"
	tool_result "$OUT" 0
	[ "$tool_err" = false ]
	[ "$tool_text" = kept ]
	run -0 pisb list --json
	jq -e 'length == 1' <<<"$output"
	# the second session resumed it
	run -0 run_pi_json '[{"text":"done"}]' "$OUT" -e "$PI_DIR/events-probe.ts"
	jq -se '[.[] | select(.kind=="event")] | .[0].resumed == true and .[1].mode == "pause" and .[1].pisbMode == "stopped"' "$PISB_PROBE_LOG"
}

@test "the policy at exit is one pisb verb: release NAME --policy P where pisb has it, else destroy or stop" {
	unset PISB_SANDBOX
	# a pisb that logs its argv, then runs the real one
	printf '#!/bin/sh\nprintf "%%s\\n" "$*" >> %s/argv.log\nexec %s "$@"\n' "$BATS_TEST_TMPDIR" "$PISB_BIN_DIR/pisb" > "$BATS_TEST_TMPDIR/pisb"
	chmod +x "$BATS_TEST_TMPDIR/pisb"
	local p
	for p in remove stop; do
		: > "$BATS_TEST_TMPDIR/argv.log"
		PISB_BIN="$BATS_TEST_TMPDIR/pisb" PISB_LIFECYCLE=$p run -0 run_pi_json '[{"tools":[{"name":"bash","args":{"command":"echo hi"}}]},{"text":"done"}]' "$OUT"
		tool_result "$OUT" 0
		[ "$tool_err" = false ]
		cat "$BATS_TEST_TMPDIR/argv.log"
		if pisb release --help >/dev/null 2>&1; then
			grep -Eq "^release pi-proj-[0-9a-f]{6}(-[0-9a-f]{4})? --policy $p --events-fd 3$" "$BATS_TEST_TMPDIR/argv.log"
			! grep -Eq '^(destroy|stop) ' "$BATS_TEST_TMPDIR/argv.log"
		elif [ $p = remove ]; then
			grep -Eq '^destroy pi-proj-[0-9a-f]{6}-[0-9a-f]{4} --confirm ' "$BATS_TEST_TMPDIR/argv.log"
		else
			grep -Eq '^stop pi-proj-[0-9a-f]{6} --events-fd 3$' "$BATS_TEST_TMPDIR/argv.log"
		fi
		run -0 pisb list --json
		if [ $p = remove ]; then
			jq -e 'length == 0' <<<"$output"
		else
			jq -e 'length == 1 and .[0].status == "stopped"' <<<"$output"
			pi_destroy "$(jq -r '.[0].name' <<<"$output")"
		fi
	done
}

@test "lifecycle remove: a sandbox of the session's own, destroyed at exit" {
	unset PISB_SANDBOX
	export PISB_LIFECYCLE=remove
	run -0 run_pi_json '[{"tools":[{"name":"bash","args":{"command":"echo hi"}}]},{"text":"done"}]' "$OUT" -e "$PI_DIR/events-probe.ts"
	tool_result "$OUT" 0
	[ "$tool_err" = false ]
	run -0 pisb list --json
	jq -e 'length == 0' <<<"$output"
	jq -se '[.[] | select(.kind=="event")] | (.[0].phase == "ready") and (.[0].sandboxId | test("^pi-proj-[0-9a-f]{6}-[0-9a-f]{4}$")) and (.[1].phase == "released") and (.[1].mode == "kill") and (.[1].pisbMode == "removed")' "$PISB_PROBE_LOG"
}

@test "a sandbox that existed before is only disconnected" {
	run -0 pisb create "$SB" -f "$PROJ/.pi/sandbox.yaml"
	export PISB_LIFECYCLE=remove
	run -0 run_pi_json '[{"tools":[{"name":"bash","args":{"command":"echo hi"}}]},{"text":"done"}]' "$OUT" -e "$PI_DIR/events-probe.ts"
	tool_result "$OUT" 0
	[ "$tool_err" = false ]
	run -0 pisb inspect "$SB" --json
	jq -e '.status == "running"' <<<"$output"
	jq -se '[.[] | select(.kind=="event")] | (.[0].phase == "ready") and (.[0].createdByExtension == false) and (.[1].mode == "keep") and (.[1].pisbMode == "disconnected")' "$PISB_PROBE_LOG"
}

@test "ready and released events, and the system prompt names the workspace" {
	run -0 run_pi_json '[{"text":"done"}]' "$OUT" -e "$PI_DIR/events-probe.ts"
	cat "$PISB_PROBE_LOG"
	jq -se --arg sb "$SB" '[.[] | select(.kind=="event")] | length == 2
		and .[0].phase == "ready" and .[0].sandboxId == $sb and .[0].name == $sb and .[0].createdByExtension and .[0].workspace == "/workspace"
		and .[0].resumed == false and .[1].phase == "released" and .[1].mode == "kill" and .[1].pisbMode == "removed"' "$PISB_PROBE_LOG"
	jq -se --arg sb "$SB" '[.[] | select(.kind=="prompt")][0].systemPrompt
		| test("(Current working directory: |<cwd>\n)/workspace \\(inside pisb sandbox \u0027" + $sb + "\u0027")' "$PISB_PROBE_LOG"
}
