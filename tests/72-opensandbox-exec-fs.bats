#!/usr/bin/env bats
# Commands and files in an opensandbox sandbox, through execd, against the
# fake OpenSandbox server: the same CLI and JSON as the local driver.
load helpers
load fakes/opensandbox

setup() {
	pisb_test_setup
	require_cmd jq
	require_cmd curl
	os_fake_start
	os_config "$BATS_TEST_TMPDIR/r.yaml"
	pisb create box -f "$BATS_TEST_TMPDIR/r.yaml"
	ID=$(os_sid box)
}

teardown() {
	os_fake_stop
}

# ---- exec ----

@test "exec streams stdout and stderr apart and passes the exit status through" {
	run -3 --separate-stderr pisb exec box -- sh -c 'echo out; echo err >&2; printf "a\n\nb\n"; exit 3'
	[ "$output" = "$(printf 'out\na\n\nb')" ]
	[ "$stderr" = err ]
	run -0 pisb exec box -- echo "two  spaces" "'quoted'" '$HOME'
	[ "$output" = "two  spaces 'quoted' \$HOME" ]
}

@test "pisb hands a remote sandbox's exec and list to pisb-exec and pisb-create, which load libcurl" {
	# pisb serves exec and list itself, linked static; libcurl it cannot
	# load, so the command starts over in the owning binary (cmd/pisb_serve.c)
	wrap="$BATS_TEST_TMPDIR/wrap"
	mkdir -p "$wrap"
	for b in pisb-create pisb-exec; do
		printf '#!/bin/sh\necho "%s $*" >>"%s/log"\nexec "%s/%s" "$@"\n' "$b" "$wrap" "$PISB_BIN_DIR" "$b" >"$wrap/$b"
		chmod +x "$wrap/$b"
	done
	export PISB_EXEC_PATH="$wrap:$PISB_EXEC_PATH"
	run -3 --separate-stderr pisb exec box -- sh -c 'echo out; echo err >&2; exit 3'
	[ "$output" = out ]
	[ "$stderr" = err ]
	run -0 --separate-stderr pisb list --json
	jq -e 'map(select(.name == "box"))[0].driver == "opensandbox"' <<<"$output"
	run -0 cat "$wrap/log"
	[ "$output" = "$(printf 'pisb-exec exec box -- sh -c echo out; echo err >&2; exit 3\npisb-create list --json')" ]
}

@test "exec: --sh, --cwd (workspace-relative or absolute) and --env" {
	run -0 pisb exec box --sh 'echo "$0"; pwd'
	[ "$output" = "$(printf '/bin/sh\n/workspace')" ]
	run -0 pisb exec box --cwd / -- pwd
	[ "$output" = / ]
	run -0 pisb mkdir box sub/dir
	run -0 pisb exec box --cwd sub/dir -- pwd
	[ "$output" = /workspace/sub/dir ]
	run -0 pisb exec box --env A=1 --env 'B=two words' -- sh -c 'echo "$A|$B"'
	[ "$output" = "1|two words" ]
}

@test "exec: a missing command is 127, a missing --cwd is 126" {
	run -127 --separate-stderr pisb exec box -- no-such-command-xyz
	[[ $stderr == *"no-such-command-xyz"* ]]
	run -126 --separate-stderr pisb exec box --cwd /no/such/dir -- true
	[[ $stderr == *"/no/such/dir"* ]]
}

@test "exec --timeout-ms returns a handle; exec-status collects new output and the status" {
	run -0 pisb exec box --timeout-ms 300 --json -- sh -c 'echo first; sleep 1; echo second; exit 4'
	jq -e '.running == true and .exitCode == null and .output == "first\n" and .truncated == false' <<<"$output"
	h=$(jq -r .pid <<<"$output")
	run -0 pisb exec-status box "$h" --timeout-ms 5000 --json
	jq -e --arg h "$h" '.pid == $h and .running == false and .exitCode == 4 and .output == "second\n"' <<<"$output"
	# a quick command finishes within the wait
	run -0 pisb exec box --timeout-ms 5000 --json -- echo quick
	jq -e '.running == false and .exitCode == 0 and .output == "quick\n"' <<<"$output"
}

@test "exec output past 64 KiB is truncated and the rest comes with exec-status" {
	run -0 pisb exec box --timeout-ms 10000 --json -- sh -c 'head -c 100000 /dev/zero | tr "\0" x'
	jq -e '.truncated == true and (.output | length) == 65536 and .running == false' <<<"$output"
	h=$(jq -r .pid <<<"$output")
	run -0 pisb exec-status box "$h" --json
	jq -e '.truncated == false and (.output | length) == (100000 - 65536) and .exitCode == 0' <<<"$output"
}

@test "exec-kill ends a detached command (SIGTERM: 143)" {
	run -0 pisb exec box --timeout-ms 100 --json -- sleep 30
	h=$(jq -r .pid <<<"$output")
	run -0 pisb exec-kill box "$h" --json
	jq -e '.running == false and .exitCode == 143' <<<"$output"
	run -0 os_admin GET "/_fake/sandboxes/$ID"
	jq -e --arg h "$h" '.commands[$h].running == false' <<<"$output"
}

@test "Ctrl-C interrupts the remote command through execd, not only the stream" {
	pisb exec box -- sh -c 'echo started; sleep 30' >"$BATS_TEST_TMPDIR/out" 2>&1 &
	pid=$!
	for i in $(seq 100); do grep -q started "$BATS_TEST_TMPDIR/out" && break; sleep 0.05; done
	kill -INT "$pid"
	start=$(date +%s)
	rc=0
	wait "$pid" || rc=$?
	[ "$rc" -eq 130 ]
	[ $(($(date +%s) - start)) -lt 8 ]
	[ "$(os_ops execd_interrupt)" -eq 1 ]
	run -0 os_admin GET "/_fake/sandboxes/$ID"
	jq -e '[.commands[] | select(.running)] | length == 0' <<<"$output"
}

@test "a stream dropped before the exit status is exit 5 'unknown', never 0" {
	pisb exec box -- sh -c 'echo started; sleep 30' >"$BATS_TEST_TMPDIR/out" 2>"$BATS_TEST_TMPDIR/err" &
	pid=$!
	for i in $(seq 100); do grep -q started "$BATS_TEST_TMPDIR/out" && break; sleep 0.05; done
	# the sandbox disappears under the running command: the fake drops the stream
	os_admin POST "/_fake/sandboxes/$ID/expire" >/dev/null
	rc=0
	wait "$pid" || rc=$?
	[ "$rc" -eq 5 ]
	grep -q "exit status is unknown" "$BATS_TEST_TMPDIR/err"
}

@test "a handle whose command execd no longer knows reports exitCode null and exit 5" {
	run -0 pisb exec box --timeout-ms 100 --json -- sleep 5
	h=$(jq -r .pid <<<"$output")
	os_fault '{"fail":{"execd_command_status":{"status":404,"count":1,"body":{"code":"INVALID_REQUEST_BODY","message":"command not found"}}}}'
	run -5 --separate-stderr pisb exec-status box "$h" --json
	jq -e '.running == false and .exitCode == null' <<<"$output"
	[[ $stderr == *"unknown"* ]]
}

# ---- files ----

@test "write then read: text with --json, bytes exact with --raw" {
	printf 'one\ntwo\nthree\n' | pisb write box notes.txt
	run -0 pisb read box notes.txt --json
	jq -e '.path == "/workspace/notes.txt" and .content == "one\ntwo\nthree\n" and .truncated == false
		and .bytes == 14 and .lines == 3' <<<"$output"
	run -0 pisb read box notes.txt --offset 2 --limit 1 --json
	jq -e '.content == "two\n" and .offset == 2 and .nextOffset == 3' <<<"$output"
	printf 'a\0b\r\nc\xff' >"$BATS_TEST_TMPDIR/bin"
	run -0 pisb write box /tmp/bin.dat --from "$BATS_TEST_TMPDIR/bin"
	pisb read box /tmp/bin.dat --raw >"$BATS_TEST_TMPDIR/back"
	cmp "$BATS_TEST_TMPDIR/bin" "$BATS_TEST_TMPDIR/back"
	# the fake's sandbox root holds exactly those bytes
	root=$(os_admin GET "/_fake/sandboxes/$ID" | jq -r .root)
	cmp "$BATS_TEST_TMPDIR/bin" "$root/tmp/bin.dat"
}

@test "read caps text at 64 KiB and says so" {
	run -0 pisb exec box -- sh -c 'head -c 70000 /dev/zero | tr "\0" y > big.txt'
	run -0 pisb read box big.txt --json
	jq -e '.truncated == true and (.content | length) == 65536 and .bytes == 70000' <<<"$output"
	# with lines, the cap cuts at a whole line
	run -0 pisb exec box -- sh -c 'for i in $(seq 2000); do printf "%099d\n" $i; done > lines.txt'
	run -0 pisb read box lines.txt --json
	jq -e '.truncated == true and (.content | length) == 65500 and .lines == 655 and .nextOffset == 656' <<<"$output"
}

@test "read cuts a lone long line at 64 KiB, never inside a UTF-8 sequence (the local driver's window)" {
	# 65535 bytes of 'a', then a 2-byte character across the 64 KiB mark
	run -0 pisb exec box -- sh -c 'head -c 65535 /dev/zero | tr "\0" a > u.txt; printf "\303\251tail\n" >> u.txt'
	pisb read box u.txt >"$BATS_TEST_TMPDIR/out" 2>/dev/null
	[ "$(wc -c <"$BATS_TEST_TMPDIR/out")" -eq 65535 ]
	run -0 pisb read box u.txt --json
	jq -e '.truncated == true and (.content | length) == 65535 and .nextOffset == 1 and .lines == 1' <<<"$output"
}

@test "read and write errors: missing is 3, a directory is 1, a missing parent needs --mkdir" {
	run -3 --separate-stderr pisb read box nope.txt
	[[ $stderr == *"no such file or directory '/workspace/nope.txt'"* ]]
	run -0 pisb mkdir box adir
	run -1 --separate-stderr pisb read box adir
	[[ $stderr == *"is a directory"* ]]
	run -3 --separate-stderr pisb write box deep/er/f.txt --content x
	[[ $stderr == *"--mkdir"* ]]
	run -0 pisb write box deep/er/f.txt --content x --mkdir
	run -0 pisb exec box -- cat deep/er/f.txt
	[ "$output" = x ]
}

@test "write keeps an existing file's mode, --mode sets it" {
	run -0 pisb write box m.sh --content 'echo hi' --mode 0750
	run -0 pisb stat box m.sh --json
	jq -e '.mode == "0750" and .type == "file" and .size == 7' <<<"$output"
	run -0 pisb write box m.sh --content 'echo bye'
	run -0 pisb stat box m.sh --json
	jq -e '.mode == "0750" and .size == 8' <<<"$output"
	run -0 pisb exec box -- ./m.sh
	[ "$output" = bye ]
}

@test "edit replaces texts that occur once, else writes nothing" {
	printf 'alpha\nbeta\ngamma\nbeta\n' | pisb write box e.txt
	run -0 pisb edit box e.txt --old alpha --new ALPHA --old gamma --new GAMMA --json
	jq -e '.path == "/workspace/e.txt" and .edits == 2' <<<"$output"
	run -1 --separate-stderr pisb edit box e.txt --old beta --new B
	[[ $stderr == *"matches 2 times"* ]]
	run -0 pisb read box e.txt
	[ "$output" = "$(printf 'ALPHA\nbeta\nGAMMA\nbeta')" ]
}

@test "ls and stat give types, sizes, modes and times" {
	run -0 pisb write box d/f.txt --content 12345 --mkdir
	run -0 pisb exec box -- ln -s f.txt d/link
	run -0 pisb ls box d --json
	jq -e '.path == "/workspace/d" and ([.entries[].name] == ["f.txt","link"])
		and .entries[0].type == "file" and .entries[0].size == 5 and .entries[0].mode == "0644"
		and .entries[1].type == "symlink"' <<<"$output"
	run -0 pisb stat box d --json
	jq -e '.path == "/workspace/d" and .type == "dir" and .readable and .writable' <<<"$output"
	run -1 --separate-stderr pisb ls box d/f.txt
	[[ $stderr == *"not a directory"* ]]
	run -3 pisb ls box missing
	run -3 pisb stat box missing
}

@test "find: globs with **, base-name globs, .gitignore, .git and node_modules skipped" {
	run -0 pisb exec box -- sh -c 'mkdir -p .git src/lib node_modules/m build && echo build/ > .gitignore &&
		touch src/a.c src/lib/b.c src/lib/c.h node_modules/m/i.c build/o.c .git/x.c'
	run -0 pisb find box '*.c' --json
	jq -e '.matches == ["src/a.c","src/lib/b.c"] and .truncated == false' <<<"$output"
	run -0 pisb find box 'src/**/*.h' --json
	jq -e '.matches == ["src/lib/c.h"]' <<<"$output"
	run -0 pisb find box 'lib' --json
	jq -e '.matches == ["src/lib/"]' <<<"$output"
	run -0 pisb find box '*.c' --no-ignore --json
	jq -e '.matches | index("build/o.c") and index("node_modules/m/i.c") and index(".git/x.c")' <<<"$output"
	run -0 pisb find box '*' --path src --limit 2 --json
	jq -e '.matches == ["a.c","lib/"] and .truncated == true' <<<"$output"
	run -3 pisb find box '*' --path nowhere
	# the checkout's .gitignore above the search directory applies too
	run -0 pisb exec box -- sh -c 'echo "*.log" >> .gitignore && touch src/lib/x.log src/lib/y.txt'
	run -0 pisb find box '*' --path src/lib --json
	jq -e '.matches == ["b.c","c.h","y.txt"]' <<<"$output"
}

@test "grep: regex, literal, -i, --glob, -C, --limit, and paths relative to the search dir" {
	run -0 pisb exec box -- sh -c 'mkdir -p src && printf "int main(void)\n{\n  return 0;\n}\n" > src/m.c &&
		printf "Main idea\nnothing\n" > README && printf "a.b\naxb\n" > dots.txt'
	run -0 pisb grep box 'ma[i]n' --json
	jq -e '.matches == [{"path":"src/m.c","line":1,"text":"int main(void)","kind":"match"}]
		and .matchCount == 1 and .limitReached == false and .linesTruncated == false' <<<"$output"
	run -0 pisb grep box main -i --json
	jq -e '[.matches[].path] == ["README","src/m.c"]' <<<"$output"
	run -0 pisb grep box a.b --literal --json
	jq -e '.matchCount == 1 and .matches[0].text == "a.b"' <<<"$output"
	run -0 pisb grep box 'return' -C 1 --glob '*.c' --json
	jq -e '[.matches[] | [.line, .kind]] == [[2,"context"],[3,"match"],[4,"context"]]' <<<"$output"
	run -0 pisb grep box . --limit 2 --json
	jq -e '.matchCount == 2 and .limitReached == true' <<<"$output"
	run -0 pisb grep box return --path src/m.c --json
	jq -e '.matches[0].path == "m.c"' <<<"$output"
	run -2 pisb grep box '(' --json
	run -3 pisb grep box x --path nowhere
	# ripgrep's syntax, as locally: the sandbox's grep -E gets the translation
	run -0 pisb grep box '\d;$' --json
	jq -e '.matches == [{"path":"src/m.c","line":3,"text":"  return 0;","kind":"match"}]' <<<"$output"
	run -0 pisb grep box '(?i)^MAIN\s\w+$' --json
	jq -e '[.matches[].path] == ["README"]' <<<"$output"
}

@test "grep cuts lines at 500 characters" {
	run -0 pisb exec box -- sh -c 'head -c 800 /dev/zero | tr "\0" q > long.txt'
	run -0 pisb grep box q --json
	jq -e '.linesTruncated == true and (.matches[0].text | startswith("qqq"))' <<<"$output"
}

# ---- stdin (execd takes none) ----

@test "exec with piped stdin is refused (exit 2) instead of dropping it; /dev/null, a tty-less empty pipe and an empty file run" {
	run -2 --separate-stderr bash -c 'echo x | pisb exec box -- sh -c "cat; echo done"'
	[ "$output" = "" ]
	[[ $stderr == *"stdin has data"*"'box'"*"pisb write box /tmp/in"* ]]
	printf 'data\n' >"$BATS_TEST_TMPDIR/in"
	run -2 --separate-stderr bash -c 'pisb exec box -- cat <"$1"' _ "$BATS_TEST_TMPDIR/in"
	[[ $stderr == *"stdin has data"* ]]
	run -2 --separate-stderr bash -c 'echo x | pisb exec box --timeout-ms 1000 -- cat'
	[[ $stderr == *"stdin has data"* ]]
	run -0 bash -c 'pisb exec box -- sh -c "cat; echo done" </dev/null'
	[ "$output" = done ]
	run -0 bash -c 'true | pisb exec box -- echo ok'
	[ "$output" = ok ]
	: >"$BATS_TEST_TMPDIR/empty"
	run -0 bash -c 'pisb exec box -- echo ok <"$1"' _ "$BATS_TEST_TMPDIR/empty"
	[ "$output" = ok ]
	# the documented workaround
	run -0 bash -c 'pisb write box /tmp/in <"$1"' _ "$BATS_TEST_TMPDIR/in"
	run -0 pisb exec box --sh 'cat < /tmp/in; echo done' </dev/null
	[ "$output" = "$(printf 'data\ndone')" ]
}

@test "a command killed from outside says so on stderr: by a signal, or with its sandbox deleted" {
	pisb exec box -- sleep 30 </dev/null >"$BATS_TEST_TMPDIR/out" 2>"$BATS_TEST_TMPDIR/err" &
	pid=$!
	sleep 1
	# what a server shutdown does to the command: SIGKILL from outside
	pg=$(os_admin GET "/_fake/sandboxes/$ID" | jq -r '[.commands[] | select(.running) | .pid][0]')
	kill -KILL -- "-$pg"
	st=0
	wait "$pid" || st=$?
	[ "$st" -eq 137 ]
	grep -q "pisb: the command was killed inside the sandbox (signal: killed)" "$BATS_TEST_TMPDIR/err"
	pisb exec box -- sleep 30 </dev/null >"$BATS_TEST_TMPDIR/out" 2>"$BATS_TEST_TMPDIR/err" &
	pid=$!
	sleep 1
	os_api DELETE "/v1/sandboxes/$ID" >/dev/null
	st=0
	wait "$pid" || st=$?
	[ "$st" -eq 5 ]
	grep -q "no longer exists on the server" "$BATS_TEST_TMPDIR/err"
}
