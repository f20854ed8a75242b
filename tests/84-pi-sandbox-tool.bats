#!/usr/bin/env bats
# The sandbox tool of the Pi extension: the seed's actions on this project's
# sandboxes, and nothing of the host. Real Pi with a scripted model that tries
# every key and action that would reach the host (each refused, nothing
# written on the host, no host command run), then uses the tool as intended.
load helpers
load pi/helpers

setup_file() {
	pi_require_local_driver
	if [ "$PI_FLAVOR" = current ]; then pi_install_current; else pi_install_legacy; fi
	pi_env "$BATS_FILE_TMPDIR"
	export SB; SB=$(pi_name own)
	export MINE; MINE=$(pi_name mine)
	export FOREIGN; FOREIGN=$(pi_name foreign)
	export PISB_SANDBOX=$SB PISB_LIFECYCLE=keep
	export OUT="$BATS_FILE_TMPDIR/run.jsonl" OUT2="$BATS_FILE_TMPDIR/matrix.jsonl"
	export HOSTDIR="$BATS_FILE_TMPDIR/host"
	mkdir -p "$HOSTDIR"
	echo "DOTENV-SECRET-5d1c" > "$PROJ/.env"
	printf 'version: 1\ndriver: local\nsetup:\n  - echo evil > /workspace/evil\n' > "$HOSTDIR/outside.yaml"
	ln -s "$HOSTDIR/outside.yaml" "$PROJ/link.yaml"
	# a sandbox of the same state directory that this project did not create
	pisb create "$FOREIGN" -f "$PROJ/.pi/sandbox.yaml" >/dev/null

	local script
	# the matrix's keys, each with a value that would leave a mark on the host if it were used
	export MATRIX_ACTIONS='["list","create","prepare","start","stop","destroy","inspect","exec","exec-status","exec-kill","read","write","logs","services","preview","push","pull","apply","diff","sync","docker","shell","connect","gc","renew","doctor","validate","pool","help"]'
	local keys
	keys=$(jq -nc --arg h "$HOSTDIR" --arg p "$PROJ" '{
	 onReady: ("touch " + $h + "/MARK-onready-@A@"), from: ($p + "/.env"), file: ($h + "/outside.yaml"),
	 hostDir: ($h + "/MARK-hostdir-@A@"), all: true, stateDir: ($h + "/MARK-state-@A@"), ownerPid: 1,
	 eventsFd: 1, oldFile: [($p + "/.env")], newFile: [($p + "/.env")], driver: "local", raw: true}')
	export MATRIX_KEYS=$keys
	script=$(jq -nc --arg h "$HOSTDIR" --arg p "$PROJ" --arg mine "$MINE" --arg foreign "$FOREIGN" '
	 def sb($o): {tools:[{name:"sandbox",args:{input:($o|tojson)}}]};
	 [
	 sb({action:"create",name:$mine,config:".pi/sandbox.yaml",onReady:("id > " + $h + "/HOSTMARK-onready")}),
	 sb({action:"write",path:"/workspace/dotenv",from:($p + "/.env")}),
	 sb({action:"push",name:$mine,hostDir:$p,all:true}),
	 sb({action:"pull",path:"/workspace",hostDir:($h + "/pulled")}),
	 sb({action:"list",stateDir:($h + "/state")}),
	 sb({action:"create",name:$mine,config:($h + "/outside.yaml")}),
	 sb({action:"create",name:$mine,config:"link.yaml"}),
	 sb({action:"create",name:$mine,config:"../host/outside.yaml"}),
	 sb({action:"create",name:$mine,config:".env"}),
	 sb({action:"create",name:$mine,file:($h + "/outside.yaml")}),
	 sb({action:"docker",verb:"ps"}),
	 sb({action:"edit",path:"/workspace/x",oldFile:[($p + "/.env")],newFile:[($p + "/.env")]}),
	 sb({action:"connect",name:$mine,file:($p + "/.pi/sandbox.yaml")}),
	 sb({action:"shell"}),
	 sb({action:"inspect",name:$foreign}),
	 sb({action:"destroy",name:$foreign,confirm:$foreign}),
	 sb({action:"exec",name:$foreign,cmd:"echo reached-foreign"}),
	 sb({action:"create",name:$mine,config:".pi/sandbox.yaml",ownerPid:1}),
	 sb({action:"create",name:$mine,config:".pi/sandbox.yaml"}),
	 sb({action:"list"}),
	 sb({action:"exec",name:$mine,cmd:"echo hi-from-tool; echo $0"}),
	 sb({action:"write",name:$mine,path:"/workspace/t.txt",content:"tool text\n"}),
	 sb({action:"read",name:$mine,path:"/workspace/t.txt"}),
	 sb({action:"exec",cmd:"echo in-own-sandbox"}),
	 sb({action:"exec",name:$mine,cmd:"sleep 30; echo late",timeoutMs:0}),
	 sb({action:"destroy",name:$mine}),
	 sb({action:"destroy",name:$mine,confirm:$mine}),
	 sb({action:"help"}),
	 sb({action:"pool",n:4}),
	 {text:"done"}]')
	run_pi_json "$script" "$OUT" || true
	# a second session (a fresh context): every action (those of the tool, the
	# refused ones, help) with every host key, one key a call, one call a turn
	# (Pi 0.73.1 loses the end of its JSON output after turns of many calls)
	script=$(jq -nc --arg mine "$MINE" --argjson actions "$MATRIX_ACTIONS" --argjson keys "$MATRIX_KEYS" '[
	 ($actions[] as $a | $keys | to_entries[] | .key as $k | {tools:[
	   {name:"sandbox",id:("m_" + $a + "_" + $k),args:{input:({action:$a,name:$mine,path:"/workspace/x",content:"x",cmd:"true",
	    confirm:$mine,config:".pi/sandbox.yaml",port:1,pid:"h"} + {($k): (.value | if type == "string" then sub("@A@"; $a) else . end)} | tojson)}}]}),
	 {text:"done"}]')
	run_pi_json "$script" "$OUT2" || true
}

teardown_file() {
	pi_destroy "$SB" "$MINE" "$FOREIGN"
}

# refused N TEXT: tool result N is an error naming TEXT and saying nothing ran
refused() {
	tool_result "$OUT" "$1"
	[ "$tool_name" = sandbox ]
	[ "$tool_err" = true ]
	[[ $tool_text == *"$2"* ]]
	[[ $tool_text == *"nothing was run"* ]]
}

@test "pi played the whole script" {
	cat "$OUT.stderr"
	[ "$(jq -s '[.[] | select(.type=="tool_execution_end")] | length' "$OUT")" -eq 29 ]
	cat "$OUT2.stderr"
	[ "$(jq -s '[.[] | select(.type=="tool_execution_end")] | length' "$OUT2")" -eq $((29 * 12)) ]
}

@test "onReady (a host command) is refused, and no host command ran" {
	refused 0 "'onReady' is not accepted"
	[ ! -e "$HOSTDIR/HOSTMARK-onready" ]
}

@test "write from a host file is refused, and the file did not get in" {
	refused 1 "'from' is not accepted"
	run pisb exec "$SB" -- cat /workspace/dotenv
	[ "$status" -ne 0 ]
	[[ $output != *DOTENV-SECRET* ]]
}

@test "push and pull of host directories are refused" {
	refused 2 "action 'push' is not available"
	refused 3 "action 'pull' is not available"
	[ ! -e "$HOSTDIR/pulled" ]
}

@test "stateDir is refused" {
	refused 4 "'stateDir' is not accepted"
	[ ! -e "$HOSTDIR/state" ]
}

@test "a config outside the project, through a symlink or .., is refused" {
	refused 5 "outside the project directory"
	refused 6 "outside the project directory"
	refused 7 "outside the project directory"
}

@test "a project file that is no sandbox.yaml is parsed, never echoed" {
	refused 8 "is not a valid sandbox.yaml"
	[[ $tool_text != *DOTENV-SECRET* ]]
	! grep -q DOTENV-SECRET "$OUT"
}

@test "file, docker, edit with host files, connect and shell are refused" {
	refused 9 "'file' is not accepted"
	refused 10 "docker goes through the docker tools"
	refused 11 "'oldFile' is not accepted"
	refused 12 "'file' is not accepted"
	refused 12 "action 'connect' is not available"
	refused 13 "action 'shell' is not available"
	refused 17 "'ownerPid' is not accepted"
}

@test "a sandbox not created from this project is out of reach, and was not touched" {
	refused 14 "not this session's and was not created from this project"
	refused 15 "not this session's and was not created from this project"
	refused 16 "not this session's and was not created from this project"
	run -0 pisb inspect "$FOREIGN" --json
	jq -e '.status == "running"' <<<"$output"
	tool_result "$OUT" 19
	[ "$tool_err" = false ]
	jq -e --arg f "$FOREIGN" '[.[].name] | index($f) == null' <<<"$tool_text"
}

@test "create from a project config, then list shows the session's and the created sandbox" {
	tool_result "$OUT" 18
	[ "$tool_err" = false ]
	jq -e --arg m "$MINE" '.name == $m and .config.metadata["pisb.pi/role"] == "tool"' <<<"$tool_text"
	tool_result "$OUT" 19
	jq -e --arg m "$MINE" --arg s "$SB" '([.[].name] | sort) == ([$m, $s] | sort)' <<<"$tool_text"
}

@test "exec, write and read act inside the named sandbox; name defaults to the session's" {
	tool_result "$OUT" 20
	[ "$tool_err" = false ]
	[[ $tool_text == *hi-from-tool* ]]
	tool_result "$OUT" 21
	[ "$tool_err" = false ]
	tool_result "$OUT" 22
	[ "$tool_err" = false ]
	[[ $tool_text == *"tool text"* ]]
	[ ! -e "$PROJ/t.txt" ]
	tool_result "$OUT" 23
	[ "$tool_err" = false ]
	[[ $tool_text == *in-own-sandbox* ]]
}

@test "exec with timeoutMs 0 returns a handle while the command runs on" {
	tool_result "$OUT" 24
	[ "$tool_err" = false ]
	jq -e '.running == true and (.pid | type) == "string"' <<<"$tool_text"
}

@test "destroy needs confirm equal to the name, then removes the sandbox" {
	refused 25 "destroy needs confirm"
	tool_result "$OUT" 26
	[ "$tool_err" = false ]
	run pisb inspect "$MINE" --json
	[ "$status" -eq 3 ]
}

@test "pool (sandboxes kept booted on the host) is refused, and no pool was made" {
	refused 28 "action 'pool' is not available"
	run -0 pisb pool --json
	[ "$output" = "[]" ]
}

@test "help lists the seed's actions and nothing that reaches the host" {
	tool_result "$OUT" 27
	[ "$tool_err" = false ]
	jq -e '[.actions[].action] == ["list","create","prepare","start","stop","destroy","inspect","exec","exec-status","exec-kill","read","write","logs","services","preview"]' <<<"$tool_text"
	! grep -Eq 'onReady|hostDir|stateDir|"from"' <<<"$tool_text"
}

@test "every action with every host key: each call refused naming its key, no mark on the host" {
	# the second session's tool calls, each with the id m_ACTION_KEY
	run -0 jq -sc '[.[] | select(.type=="tool_execution_end" and (.toolCallId | startswith("m_")))
	 | (.toolCallId | split("_")) as $id
	 | {action: $id[1], key: $id[2], err: (.isError // false), text: ([.result.content[]? | .text // empty] | join(""))}]' "$OUT2"
	echo "$output" | head -c 3000
	jq -e 'length == 29 * 12 and (map(.action + "/" + .key) | unique | length) == 29 * 12' <<<"$output"
	jq -e 'map(select(.err != true)) == []' <<<"$output"
	jq -e 'map(select(. as $r | $r.text | contains("\u0027" + $r.key + "\u0027 is not accepted") | not)) == []' <<<"$output"
	jq -e 'map(select(.text | contains("nothing was run") | not)) == []' <<<"$output"
	jq -e 'map(select(.text | contains("DOTENV-SECRET"))) == []' <<<"$output"
	run -0 find "$HOSTDIR" -name 'MARK-*'
	[ -z "$output" ]
	run pisb exec "$SB" -- test -e /workspace/evil
	[ "$status" -eq 1 ]
}
