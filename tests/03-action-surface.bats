#!/usr/bin/env bats
# pisb action end to end on a real local sandbox: the JSON surface the Pi
# sandbox tool drives (pisb(1), THE ACTION SURFACE).  Every answer is one
# JSON object on stdout; errors are {"error":{"code","exit","message"}}
# with the documented exit status.
load helpers

setup() {
	pisb_test_setup
	require_userns
}

teardown() {
	for n in $(pisb list -q 2>/dev/null); do pisb destroy "$n" --confirm "$n" >/dev/null 2>&1 || true; done
}

# One JSON value on stdout, nothing else.
one_object() {
	jq -e -s 'length == 1 and (.[0] | type == "object")' <<<"$output" >/dev/null ||
		{ echo "not one JSON object: $output"; return 1; }
}

# $output is {"error":{...}} with this code and exit status.
is_error() {
	jq -e --arg c "$1" --argjson x "$2" \
		'keys == ["error"] and (.error | keys == ["code","exit","message"])
		 and .error.code == $c and .error.exit == $x and (.error.message | length > 0)' <<<"$output" >/dev/null ||
		{ echo "not a $1/$2 error: $output"; return 1; }
}

create_demo() {
	run --separate-stderr pisb action '{"action":"create","name":"demo"}'
	[ "$status" -eq 0 ] || { echo "create failed ($status): $output $stderr"; return 1; }
}

@test "create answers one object describing the running sandbox" {
	run -0 --separate-stderr pisb action '{"action":"create","name":"demo","sessionId":"sess-7"}'
	one_object
	jq -e '.name == "demo" and .driver == "local" and .status == "running"
	       and .sessionId == "sess-7" and .controller.alive and (.limits.enforced | type == "object")' <<<"$output"
	[ -z "$stderr" ]
	run -0 --separate-stderr pisb action '{"action":"list"}'
	jq -e 'length == 1 and .[0].name == "demo" and .[0].status == "running"' <<<"$output"
	run -0 --separate-stderr pisb action '{"action":"inspect","name":"demo"}'
	one_object
	jq -e '.sessionId == "sess-7" and (.config | type == "object")' <<<"$output"
}

@test "exec answers {pid,running,output,exitCode,truncated} and exits 0 whatever the command's status" {
	create_demo
	run -0 --separate-stderr pisb action '{"action":"exec","name":"demo","command":["sh","-c","echo out; echo err >&2; exit 3"]}'
	one_object
	jq -e 'keys == ["exitCode","output","pid","running","truncated"]
	       and .running == false and .exitCode == 3 and .truncated == false
	       and .output == "out\nerr\n" and (.pid | type == "string")' <<<"$output"
	run -0 --separate-stderr pisb action '{"action":"exec","name":"demo","command":["no-such-command"]}'
	jq -e '.exitCode == 127 and .running == false' <<<"$output"
}

@test "exec: a string command runs through /bin/sh -lc; env as object or list; cwd" {
	create_demo
	run -0 --separate-stderr pisb action '{"action":"exec","name":"demo","command":"echo $((6 * 7)) | tr 4 x"}'
	jq -e '.output == "x2\n" and .exitCode == 0' <<<"$output"
	run -0 --separate-stderr pisb action '{"action":"exec","name":"demo","env":{"A":"one","B":"two words"},"command":"echo \"$A/$B\""}'
	jq -e '.output == "one/two words\n"' <<<"$output"
	run -0 --separate-stderr pisb action '{"action":"exec","name":"demo","env":["A=1","A=2"],"command":["sh","-c","echo $A"]}'
	jq -e '.output == "2\n"' <<<"$output"
	run -0 --separate-stderr pisb action '{"action":"exec","name":"demo","cwd":"/tmp","command":["pwd"]}'
	jq -e '.output == "/tmp\n"' <<<"$output"
	run -0 --separate-stderr pisb action '{"action":"exec","name":"demo","command":["pwd"]}'
	jq -e '.output == "/workspace\n"' <<<"$output"
}

@test "exec waits 10 s by default, then hands back a handle for exec-status and exec-kill" {
	create_demo
	start=$(date +%s%N)
	run -0 --separate-stderr pisb action '{"action":"exec","name":"demo","command":"echo begun; sleep 60"}'
	ms=$((($(date +%s%N) - start) / 1000000))
	[ "$ms" -ge 9500 ] || { echo "answered after $ms ms"; return 1; }
	[ "$ms" -lt 20000 ] || { echo "answered after $ms ms"; return 1; }
	jq -e '.running == true and .exitCode == null and .output == "begun\n"' <<<"$output"
	h=$(jq -r .pid <<<"$output")
	run -0 --separate-stderr pisb action "{\"action\":\"exec-status\",\"name\":\"demo\",\"handle\":\"$h\",\"timeoutMs\":100}"
	one_object
	jq -e --arg h "$h" '.pid == $h and .running == true and .output == ""' <<<"$output"
	run -0 --separate-stderr pisb action "{\"action\":\"exec-kill\",\"name\":\"demo\",\"handle\":\"$h\"}"
	jq -e --arg h "$h" '.pid == $h and .running == false and .exitCode == 143' <<<"$output"
}

@test "exec with timeoutMs 0 returns at once; exec-status collects the rest" {
	create_demo
	run -0 --separate-stderr pisb action '{"action":"exec","name":"demo","timeoutMs":0,"command":"sleep 0.3; echo late; exit 4"}'
	jq -e '.running == true' <<<"$output"
	h=$(jq -r .pid <<<"$output")
	run -0 --separate-stderr pisb action "{\"action\":\"exec-status\",\"name\":\"demo\",\"handle\":\"$h\",\"timeoutMs\":5000}"
	jq -e '.running == false and .exitCode == 4 and .output == "late\n"' <<<"$output"
}

@test "exec output is capped at 64 KiB per answer, and the rest follows" {
	create_demo
	run -0 --separate-stderr pisb action '{"action":"exec","name":"demo","command":"head -c 100000 /dev/zero | tr \"\\000\" a"}'
	jq -e '.truncated == true and (.output | length) == 65536 and .exitCode == 0' <<<"$output"
	h=$(jq -r .pid <<<"$output")
	run -0 --separate-stderr pisb action "{\"action\":\"exec-status\",\"name\":\"demo\",\"handle\":\"$h\"}"
	jq -e '.truncated == false and (.output | length) == 34464' <<<"$output"
}

@test "pisb action - reads the object from stdin" {
	create_demo
	run -0 --separate-stderr pisb action - <<<'{"action":"exec","name":"demo","command":["echo","from stdin"]}'
	jq -e '.output == "from stdin\n"' <<<"$output"
	run -0 --separate-stderr pisb action - <<<'  {}  '
	jq -e '.actions | length > 20' <<<"$output"
	# empty input, like {} and "help", asks for the list
	run -0 --separate-stderr pisb action - </dev/null
	jq -e '.actions | length > 20' <<<"$output"
	run -2 --separate-stderr pisb action - <<<'{"action":'
	is_error usage 2
}

@test "errors are one JSON object with the documented code and exit status" {
	run -3 --separate-stderr pisb action '{"action":"inspect","name":"nope"}'
	is_error not-found 3
	[[ $stderr == "fatal: no such sandbox 'nope'" ]]
	run -2 --separate-stderr pisb action '{"action":"inspect"}'
	is_error usage 2
	jq -e '.error.message | contains("missing key") and contains("name")' <<<"$output"
	create_demo
	run -4 --separate-stderr pisb action '{"action":"create","name":"demo"}'
	is_error busy 4
	run -0 --separate-stderr pisb action '{"action":"stop","name":"demo"}'
	jq -e '.status == "stopped"' <<<"$output"
	run -5 --separate-stderr pisb action '{"action":"exec","name":"demo","command":["true"]}'
	is_error backend 5
	[[ $stderr == *"not running"* ]]
	run -2 --separate-stderr pisb action '{"action":"exec","name":"demo"}'
	is_error usage 2
}

@test "a handle of an earlier run is refused with 3 after stop and start" {
	create_demo
	run -0 --separate-stderr pisb action '{"action":"exec","name":"demo","command":["true"]}'
	h=$(jq -r .pid <<<"$output")
	run -0 --separate-stderr pisb action '{"action":"stop","name":"demo"}'
	run -0 --separate-stderr pisb action '{"action":"start","name":"demo"}'
	jq -e '.status == "running"' <<<"$output"
	run -3 --separate-stderr pisb action "{\"action\":\"exec-status\",\"name\":\"demo\",\"handle\":\"$h\"}"
	is_error not-found 3
	jq -e '.error.message | contains("earlier run")' <<<"$output"
}

@test "positional values are never taken for options" {
	# "--help" reaches inspect as a name, not as the option
	run -2 --separate-stderr pisb action '{"action":"inspect","name":"--help"}'
	is_error usage 2
	jq -e '.error.message | contains("invalid sandbox name") and contains("--help")' <<<"$output"
	run -2 --separate-stderr pisb action '{"action":"create","name":"--dry-run"}'
	is_error usage 2
	jq -e '.error.message | contains("invalid name")' <<<"$output"
	[ "$(pisb list -q)" = "" ]
}

@test "positional values of verbs that take a command are never taken for options either" {
	# exec, svc and docker put their positionals before "--" CMD
	run --separate-stderr pisb action '{"action":"exec","name":"--help","command":["true"]}'
	[ "$status" -eq 2 ] || { echo "exec name '--help' gave status $status: $output"; return 1; }
	is_error usage 2
	run --separate-stderr pisb action '{"action":"svc","name":"demo","op":"--version"}'
	[ "$status" -eq 2 ] || { echo "svc op '--version' gave status $status: $output"; return 1; }
	is_error usage 2
	run --separate-stderr pisb action "{\"action\":\"docker\",\"name\":\"--state-dir\",\"verb\":\"$BATS_TEST_TMPDIR\"}"
	[ "$status" -eq 2 ] || { echo "docker name '--state-dir' gave status $status: $output"; return 1; }
	is_error usage 2
}

@test "flags: true adds the option, false leaves it out" {
	create_demo
	run -0 --separate-stderr pisb action '{"action":"list","templates":true}'
	[ "$output" = "[]" ]
	run -0 --separate-stderr pisb action '{"action":"list","templates":false}'
	jq -e 'length == 1 and .[0].name == "demo"' <<<"$output"
	run -0 --separate-stderr pisb action '{"action":"create","name":"dry","dryRun":true}'
	jq -e '.driver == "local"' <<<"$output"
	[ "$(pisb list -q)" = demo ]
}

@test "destroy needs confirm, then answers {name,destroyed}" {
	create_demo
	run -2 --separate-stderr pisb action '{"action":"destroy","name":"demo"}'
	is_error usage 2
	jq -e '.error.message | contains("--confirm demo")' <<<"$output"
	run -2 --separate-stderr pisb action '{"action":"destroy","name":"demo","confirm":"other"}'
	is_error usage 2
	run -0 --separate-stderr pisb action '{"action":"destroy","name":"demo","confirm":"demo"}'
	one_object
	jq -e '. == {"name":"demo","destroyed":true}' <<<"$output"
	run -0 --separate-stderr pisb action '{"action":"list"}'
	[ "$output" = "[]" ]
	run -3 --separate-stderr pisb action '{"action":"destroy","name":"demo","confirm":"demo"}'
	is_error not-found 3
}

@test "pisb action needs exactly one argument" {
	run -2 --separate-stderr pisb action
	[[ $stderr == *"usage: pisb action"* ]]
	run -2 --separate-stderr pisb action '{}' extra
	[[ $stderr == *"usage: pisb action"* ]]
}
