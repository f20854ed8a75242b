#!/usr/bin/env bats
# The JSON writer's escaping and the reader's limits, through real commands.
load helpers

setup_file() {
	export PI_SANDBOX_HOME="$BATS_FILE_TMPDIR/state"
	unshare -Ur true 2>/dev/null && pisb create js >/dev/null || true
}

teardown_file() { pisb destroy js --confirm js >/dev/null 2>&1 || true; }

setup() {
	export PI_SANDBOX_HOME="$BATS_FILE_TMPDIR/state"
	require_userns
}

@test "control characters, quotes and backslashes are escaped; non-ASCII is kept" {
	run -0 pisb exec js --json --timeout-ms 5000 --sh 'printf "a\"b\\\\c\001\037\t\r\n é 日本 😀"'
	python3 -c '
import json, sys
o = json.loads(sys.argv[1])
assert o["output"] == "a\"b\\c\x01\x1f\t\r\n é 日本 😀", repr(o["output"])
assert "\\u0001" in sys.argv[1] and "\\u001f" in sys.argv[1]
assert "é" in sys.argv[1] and "😀" in sys.argv[1]      # kept as UTF-8, not \u-escaped
' "$output"
}

@test "invalid UTF-8 bytes each become U+FFFD, consistently" {
	run -0 pisb exec js --json --timeout-ms 5000 --sh 'printf "x\377y\300\257z\355\240\200w\360\202\202\254v"'
	python3 -c '
import json, sys
o = json.loads(sys.argv[1])["output"]
# one replacement per invalid byte: 1 + 2 + 3 + 4
assert o == "x\ufffdy\ufffd\ufffdz\ufffd\ufffd\ufffdw\ufffd\ufffd\ufffd\ufffdv", repr(o)
' "$output"
}

@test "a NUL byte is escaped, never truncates the string" {
	run -0 pisb exec js --json --timeout-ms 5000 --sh 'printf "before\000after"'
	jq -e '.output == "before\u0000after"' <<<"$output"
}

@test "the reader takes big inputs without a fixed token limit" {
	python3 - "$BATS_TEST_TMPDIR/big.json" <<-'PY'
	import json, sys
	env = {"K%d" % i: "v" * 10 for i in range(20000)}
	json.dump({"action": "exec", "name": "js", "env": env, "command": "echo ${K19999}", "timeoutMs": 5000}, open(sys.argv[1], "w"))
	PY
	run -2 --separate-stderr pisb action - < "$BATS_TEST_TMPDIR/big.json"
	# 20000 --env is past exec's own limit (256): the reader got through
	# all 40000+ tokens and the command's own check answered
	jq -e '.error.message | test("256")' <<<"$output"
	python3 -c 'import json; print(json.dumps({"action":"exec","name":"js","command":["sh","-c","echo deep"],"env":{"A":"1"},"timeoutMs":5000,"cwd":"/"}))' > "$BATS_TEST_TMPDIR/ok.json"
	run -0 pisb action - < "$BATS_TEST_TMPDIR/ok.json"
	jq -e '.output == "deep\n" and .exitCode == 0' <<<"$output"
}

@test "malformed JSON is a usage error naming the problem" {
	run -2 --separate-stderr pisb action '{"action":"list"'
	jq -e '.error.code == "usage" and (.error.message | test("JSON"))' <<<"$output"
	run -2 --separate-stderr pisb action '{"action":"list"} trailing'
	jq -e '.error.message | test("invalid JSON")' <<<"$output"
	run -2 --separate-stderr pisb action '{"action":"list"} {}'
	jq -e '.error.message | test("trailing data")' <<<"$output"
	run -2 --separate-stderr pisb action '[1,2]'
	jq -e '.error.message | test("object")' <<<"$output"
}
