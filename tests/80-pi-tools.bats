#!/usr/bin/env bats
# The Pi extension, tool by tool: real Pi (PI_FLAVOR, default 0.73.1) in JSON
# mode with a scripted model, every tool call running in a real local pisb
# sandbox. One Pi run plays the whole script in setup_file; each test checks
# one thing about it.
load helpers
load pi/helpers

setup_file() {
	pi_require_local_driver
	if [ "$PI_FLAVOR" = current ]; then pi_install_current; else pi_install_legacy; fi
	pi_env "$BATS_FILE_TMPDIR"
	export SB; SB=$(pi_name tools)
	export PISB_SANDBOX=$SB PISB_LIFECYCLE=keep
	export OUT="$BATS_FILE_TMPDIR/run.jsonl"

	# what must stay invisible: a host file, a project file that matches a secret
	# pattern (the project copy leaves it out: *.key),
	# host variables including an API key; a PI_ variable is passed on purpose
	export SECRET_FILE="$BATS_FILE_TMPDIR/host-secret.txt"
	echo "HOST-SECRET-FILE-7f3a" > "$SECRET_FILE"
	echo "PROJECT-ONLY-ON-HOST" > "$PROJ/host-only.key"
	export PISB_TEST_HOST_SECRET=hunter2-from-host-env
	export OPENAI_API_KEY=sk-test-must-not-leak
	export PI_TEST_VISIBLE=pi-variable-passed
	export PI_TEST_API_KEY=pi-key-not-passed

	local script
	script=$(jq -nc --arg secret "$SECRET_FILE" --arg proj "$PROJ" '[
	 {tools:[{name:"bash",args:{command:"echo hello; echo to-stderr >&2; pwd; hostname"}}]},
	 {tools:[{name:"bash",args:{command:"echo \"[$PISB_TEST_HOST_SECRET][$OPENAI_API_KEY][$PI_TEST_VISIBLE][$PI_TEST_API_KEY]\"; env | grep -c HOST_SECRET || true"}}]},
	 {tools:[{name:"bash",args:{command:("cat " + $secret + "; ls " + $proj)}}]},
	 {tools:[{name:"read",args:{path:$secret}}]},
	 {tools:[{name:"read",args:{path:"host-only.key"}}]},
	 {tools:[{name:"bash",args:{command:"echo about to fail; exit 42"}}]},
	 {tools:[{name:"bash",args:{command:"echo started; sleep 20; echo never", timeout:1}}]},
	 {tools:[{name:"bash",args:{command:"seq 1 100000"}}]},
	 {tools:[{name:"bash",args:{command:"for i in 1 2 3 4; do echo tick $i; sleep 0.3; done"}}]},
	 {tools:[{name:"write",args:{path:"notes/new.txt",content:"written by pi\nsecond line\n"}}]},
	 {tools:[{name:"read",args:{path:"notes/new.txt"}}]},
	 {tools:[{name:"edit",args:{path:"notes/new.txt",edits:[{oldText:"written",newText:"edited"}]}}]},
	 {tools:[{name:"ls",args:{}}]},
	 {tools:[{name:"ls",args:{path:"notes"}}]},
	 {tools:[{name:"find",args:{pattern:"*.txt"}}]},
	 {tools:[{name:"grep",args:{pattern:"edited"}}]},
	 {tools:[{name:"grep",args:{pattern:"SECOND LINE",ignoreCase:true,context:1}}]},
	 {tools:[{name:"grep",args:{pattern:"no-such-text-anywhere"}}]},
	 {tools:[{name:"read",args:{path:"/workspace/notes/new.txt"}}]},
	 {tools:[{name:"read",args:{path:($proj + "/notes/new.txt")}}]},
	 {tools:[{name:"sandbox",args:{input:"help"}}]},
	 {tools:[{name:"bash",args:{command:"echo $$ > /workspace/shell.pid; cat /proc/1/comm"}}]},
	 {tools:[{name:"read",args:{path:"{{fullOutputPath}}",offset:99999}}]},
	 {tools:[{name:"read",args:{path:"/tmp/pi-bash-0123456789abcdef.log"}}]},
	 {text:"done"}]')
	run_pi_json "$script" "$OUT" || true
}

teardown_file() {
	pi_destroy "$SB"
}

@test "pi ran the whole script and exited 0" {
	cat "$OUT.stderr"
	[ "$(jq -s '[.[] | select(.type=="tool_execution_end")] | length' "$OUT")" -eq 24 ]
	jq -se 'any(.[]; .type=="agent_end")' "$OUT"
}

@test "bash: output of both streams, cwd is the sandbox workspace" {
	tool_result "$OUT" 0
	[ "$tool_name" = bash ]
	[ "$tool_err" = false ]
	[[ $tool_text == *hello* ]]
	[[ $tool_text == *to-stderr* ]]
	grep -qx /workspace <<<"$tool_text"
}

@test "bash: host variables and API keys are invisible, PI_ variables pass" {
	tool_result "$OUT" 1
	[[ $tool_text == *"[][][pi-variable-passed][]"* ]]
	[[ $tool_text != *hunter2* ]]
	[[ $tool_text != *sk-test* ]]
}

@test "bash and read: a host-only secret file is invisible" {
	tool_result "$OUT" 2
	[[ $tool_text != *HOST-SECRET-FILE* ]]
	[[ $tool_text != *host-only.key* ]]
	tool_result "$OUT" 3
	[ "$tool_err" = true ]
	[[ $tool_text != *HOST-SECRET-FILE* ]]
	tool_result "$OUT" 4
	[ "$tool_err" = true ]
	[[ $tool_text != *PROJECT-ONLY-ON-HOST* ]]
}

@test "bash: a non-zero exit is an error with the exit code" {
	tool_result "$OUT" 5
	[ "$tool_err" = true ]
	[[ $tool_text == *"about to fail"* ]]
	[[ $tool_text == *"Command exited with code 42"* ]]
}

@test "bash: timeout ends the command the way Pi reports it" {
	tool_result "$OUT" 6
	[ "$tool_err" = true ]
	[[ $tool_text == *started* ]]
	[[ $tool_text == *"Command timed out after 1 seconds"* ]]
	[[ $tool_text != *never* ]]
	run -0 pisb exec "$SB" --sh 'ps -eo args | grep -c "^sleep 20" || true'
	[ "$output" = 0 ]
}

@test "bash: large output is cut to Pi's tail with the full output saved" {
	tool_result "$OUT" 7
	[ "$tool_err" = false ]
	[[ $tool_text == *"100000"* ]]
	[[ $tool_text == *"Showing lines"*" of 10000"*"Full output: "*pi-bash-* ]]
}

@test "bash: output streams while the command runs" {
	local n
	n=$(jq -s '[.[] | select(.type=="tool_execution_update" and .toolName=="bash"
		and ((.partialResult.content // [])[0].text // "" | test("tick 1")))] | length' "$OUT")
	echo "updates with partial output: $n"
	[ "$n" -ge 2 ]
	tool_result "$OUT" 8
	[[ $tool_text == *"tick 4"* ]]
}

@test "write, read, edit: the file exists inside the sandbox and not on the host" {
	tool_result "$OUT" 9
	[ "$tool_err" = false ]
	tool_result "$OUT" 10
	[ "$tool_err" = false ]
	[[ $tool_text == *"written by pi"* ]]
	tool_result "$OUT" 11
	[ "$tool_err" = false ]
	run -0 pisb read "$SB" /workspace/notes/new.txt --raw
	[ "$output" = "$(printf 'edited by pi\nsecond line')" ]
	[ ! -e "$PROJ/notes" ]
}

@test "ls lists the workspace and a subdirectory" {
	tool_result "$OUT" 12
	[ "$tool_err" = false ]
	grep -qx 'notes/' <<<"$tool_text"
	[[ $tool_text != *host-only.key* ]]
	tool_result "$OUT" 13
	[ "$tool_text" = new.txt ]
}

@test "find matches inside the sandbox" {
	tool_result "$OUT" 14
	[ "$tool_err" = false ]
	grep -qx 'notes/new.txt' <<<"$tool_text"
	[[ $tool_text != *host-only* ]]
}

@test "grep searches the sandbox in Pi's format" {
	tool_result "$OUT" 15
	[ "$tool_err" = false ]
	grep -qx 'notes/new.txt:1: edited by pi' <<<"$tool_text"
	tool_result "$OUT" 16
	grep -qx 'notes/new.txt-1- edited by pi' <<<"$tool_text"
	grep -qx 'notes/new.txt:2: second line' <<<"$tool_text"
	tool_result "$OUT" 17
	[ "$tool_text" = "No matches found" ]
}

@test "paths: workspace paths and host project paths name the same file" {
	tool_result "$OUT" 18
	[[ $tool_text == *"edited by pi"* ]]
	tool_result "$OUT" 19
	[[ $tool_text == *"edited by pi"* ]]
}

@test "the sandbox tool answers help through pisb action" {
	tool_result "$OUT" 20
	[ "$tool_err" = false ]
	[ -n "$tool_text" ]
}

@test "commands ran in the sandbox's own pid namespace, not on the host" {
	tool_result "$OUT" 21
	[ "$tool_err" = false ]
	run -0 pisb read "$SB" /workspace/shell.pid --raw
	[ -n "$output" ]
	# pid 1 of the command's world is not the host's pid 1
	[ "$(tail -n1 <<<"$tool_text")" != "$(cat /proc/1/comm)" ] || [ "$(cat /proc/1/comm)" = "$(cat /proc/self/comm)" ]
}

@test "read opens Pi's saved bash output on the host, and no other host file" {
	tool_result "$OUT" 22
	[ "$tool_err" = false ]
	[[ $tool_text == *100000* ]]
	tool_result "$OUT" 23
	[ "$tool_err" = true ]
}
