#!/usr/bin/env bats
# The same extension under the current Pi (@earendil-works/pi-coding-agent on
# Node 24, both installed from npm into tests/pi/.cache on first use): the
# tool scenario and the session tests run again with PI_FLAVOR=current, and
# the ! command and abort are driven over RPC, which current Pi routes through
# the extension. 84 to 87 run again under it too.
load helpers
load pi/helpers

setup_file() {
	pi_require_local_driver
	PI_FLAVOR=current pi_install_current ||
		skip "machine lacks: Node >= 22.19 and @earendil-works/pi-coding-agent@$PI_CURRENT_VERSION from npm (current Pi not tested)"
}

setup() {
	pi_require_local_driver
	export PI_FLAVOR=current
	pi_env "$BATS_TEST_TMPDIR"
	SB=$(pi_name cur)
	export PISB_SANDBOX=$SB PISB_LIFECYCLE=keep
	export PISB_TEST_HOST_SECRET=hunter2-from-host-env
}

teardown() {
	pi_destroy "$SB"
}

# rpc_session SCRIPT_JSON OUT LINES...: Pi in RPC mode; each LINE is a JSON
# command, "sleep N", "wait TEXT" (until Pi's output has TEXT, at most 60 s)
# or "host CMD" (run on the host). stdin closes after the last, and Pi exits.
rpc_session() {
	local script=$1 out=$2 l i
	shift 2
	printf '%s\n' "$script" > "$out.script.json"
	: > "$out"
	(cd "$PROJ" && for l in "$@"; do
		case $l in
		"sleep "*) $l ;;
		"wait "*) for ((i = 0; i < 240; i++)); do grep -qF -- "${l#wait }" "$out" && break; sleep 0.25; done ;;
		"host "*) sh -c "${l#host }" >/dev/null 2>&1 ;;
		*) printf '%s\n' "$l" ;;
		esac
	done | PI_SCRIPT="$out.script.json" pi --mode rpc --no-session --offline --provider scripted --model m1 \
		-e "$PI_DIR/scripted-provider.ts" -e "$PI_EXT" > "$out" 2> "$out.stderr")
}

@test "current Pi: the tool scenario of 80-pi-tools.bats passes" {
	run bats "$TOP/tests/80-pi-tools.bats"
	echo "$output"
	[ "$status" -eq 0 ]
	[[ $output != *"not ok"* ]]
}

@test "current Pi: the session tests of 81-pi-session.bats pass" {
	run bats -f 'fails closed|lifecycle|disconnected|events' "$TOP/tests/81-pi-session.bats"
	echo "$output"
	[ "$status" -eq 0 ]
	[[ $output != *"not ok"* ]]
	[[ $output == *"ok "*"fails closed"* ]]
}

@test "current Pi: the sandbox tool tests of 84-pi-sandbox-tool.bats pass" {
	run bats "$TOP/tests/84-pi-sandbox-tool.bats"
	echo "$output"
	[ "$status" -eq 0 ]
	[[ $output != *"not ok"* ]]
}

@test "current Pi: the lifecycle tests of 85-pi-lifecycle.bats pass" {
	run bats "$TOP/tests/85-pi-lifecycle.bats"
	echo "$output"
	[ "$status" -eq 0 ]
	[[ $output != *"not ok"* ]]
	[[ $output == *"ok "*"kill -9"* ]]
}

@test "current Pi: the bash syntax, find and grep tests of 86-pi-syntax.bats pass" {
	run bats -f 'played|find:|grep:|bash:' "$TOP/tests/86-pi-syntax.bats"
	echo "$output"
	[ "$status" -eq 0 ]
	[[ $output != *"not ok"* ]]
	[[ $output == *"ok "*"brace glob"* ]]
}

@test "current Pi: the docker tools of 87-pi-docker.bats pass" {
	run bats "$TOP/tests/87-pi-docker.bats"
	echo "$output"
	[ "$status" -eq 0 ]
	[[ $output != *"not ok"* ]]
	[[ $output == *"ok "*"docker_curl reaches"* ]]
}

@test "current Pi: an RPC ! command runs in the sandbox" {
	local cmd='pwd; echo \"[$PISB_TEST_HOST_SECRET]\"; echo bang > bang.txt'
	run -0 rpc_session '[{"text":"done"}]' "$BATS_TEST_TMPDIR/rpc.jsonl" \
		"{\"id\":\"b1\",\"type\":\"bash\",\"command\":\"$cmd\"}" 'wait "id":"b1"' 
	cat "$BATS_TEST_TMPDIR/rpc.jsonl.stderr"
	grep '"b1"' "$BATS_TEST_TMPDIR/rpc.jsonl"
	jq -se '[.[] | select(.type=="response" and .id=="b1")][0] | .success and .data.exitCode == 0
		and (.data.output | test("^/workspace\n\\[\\]\n"))' "$BATS_TEST_TMPDIR/rpc.jsonl"
	run -0 pisb exec "$SB" --sh "cat /workspace/bang.txt"
	[ "$output" = bang ]
	[ ! -e "$PROJ/bang.txt" ]
}

@test "current Pi: RPC abort kills the sandboxed command" {
	run -0 rpc_session '[{"tools":[{"name":"bash","args":{"command":"echo started; sleep 38; echo never"}}]},{"text":"done"}]' \
		"$BATS_TEST_TMPDIR/rpc.jsonl" '{"id":"p1","type":"prompt","message":"go"}' 'wait "toolName":"bash"' "sleep 3" \
		'{"id":"a1","type":"abort"}' 'wait "type":"tool_execution_end"' 
	jq -c 'select(.type=="tool_execution_end" or .type=="response")' "$BATS_TEST_TMPDIR/rpc.jsonl" | cut -c1-300
	jq -se '[.[] | select(.type=="tool_execution_end")][0] | .isError
		and (.result.content[0].text | test("started")) and (.result.content[0].text | test("Command aborted"))' "$BATS_TEST_TMPDIR/rpc.jsonl"
	run -0 pisb exec "$SB" --sh 'ps -eo args | grep -c "^sleep 38" || true'
	[ "$output" = 0 ]
	! pgrep -fx "sleep 38"
}

@test "current Pi: after 'pisb stop' tools and RPC ! commands fail, nothing runs on the host" {
	local script
	script=$(jq -nc --arg p "$PROJ" '[
	 {tools:[{name:"bash",args:{command:"echo alive"}}]}, {text:"one"},
	 {tools:[{name:"bash",args:{command:("touch " + $p + "/HOSTMARK; echo ran")}}]},
	 {tools:[{name:"read",args:{path:".sandbox.yaml"}}]},
	 {tools:[{name:"write",args:{path:"w.txt",content:"x"}}]},
	 {tools:[{name:"ls",args:{}}]},
	 {tools:[{name:"grep",args:{pattern:"x"}}]},
	 {text:"two"}]')
	run -0 rpc_session "$script" "$BATS_TEST_TMPDIR/rpc.jsonl" \
		'{"id":"p1","type":"prompt","message":"go"}' 'wait "type":"agent_end"' "host pisb stop $SB" \
		'{"id":"p2","type":"prompt","message":"again"}' 'wait "type":"agent_end","messages"' "sleep 2" \
		"{\"id\":\"b1\",\"type\":\"bash\",\"command\":\"touch $PROJ/HOSTMARK-bang; echo ran\"}" 'wait "id":"b1"'
	local f="$BATS_TEST_TMPDIR/rpc.jsonl"
	jq -se '[.[] | select(.type=="tool_execution_end")][0] | (.isError | not)' "$f"
	[ "$(jq -s '[.[] | select(.type=="tool_execution_end")][1:] | length' "$f")" -eq 5 ]
	jq -se '[.[] | select(.type=="tool_execution_end")][1:] | all(.isError and (.result.content[0].text | test("sandbox|pisb"; "i")))' "$f"
	grep '"b1"' "$f"
	jq -se '[.[] | select(.id=="b1")][0] | (.success | not) or (.data.output | test("ran") | not)' "$f"
	[ ! -e "$PROJ/HOSTMARK" ]
	[ ! -e "$PROJ/HOSTMARK-bang" ]
}
