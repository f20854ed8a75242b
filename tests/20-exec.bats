#!/usr/bin/env bats
# pisb exec: attached streaming, exit statuses, signals, handles, env, cwd.
load helpers

setup_file() {
	export PI_SANDBOX_HOME="$BATS_FILE_TMPDIR/state"
	unshare -Ur true 2>/dev/null || return 0
	pisb create ex >/dev/null
}

teardown_file() {
	pisb destroy ex --confirm ex >/dev/null 2>&1 || true
}

setup() {
	export PI_SANDBOX_HOME="$BATS_FILE_TMPDIR/state"
	require_userns
}

@test "exit status passes through; 127 for a missing command; 128+N for a signal" {
	run -0 pisb exec ex -- true
	run -42 pisb exec ex -- sh -c 'exit 42'
	run -127 --separate-stderr pisb exec ex -- no-such-command
	[[ $stderr == *"no-such-command"* ]]
	run -126 pisb exec ex -- /etc/passwd
	run -137 pisb exec ex --sh 'kill -9 $$'
	run -143 pisb exec ex --sh 'kill -TERM $$'
}

@test "stdout and stderr are separate and byte-exact; stdin reaches the command" {
	run -0 --separate-stderr pisb exec ex --sh 'printf "out\0x"; printf err >&2'
	[ "$stderr" = err ]
	[ "$(pisb exec ex --sh 'printf "a\0b"' | od -An -c | tr -d ' \n')" = 'a\0b' ]
	run -0 bash -c 'printf "hello" | pisb exec ex -- cat'
	[ "$output" = hello ]
}

@test "output streams as it comes" {
	pisb exec ex --sh 'echo first; sleep 3; echo second' > "$BATS_TEST_TMPDIR/out" &
	pid=$!
	sleep 1
	[ "$(cat "$BATS_TEST_TMPDIR/out")" = first ]
	wait $pid
	[ "$(cat "$BATS_TEST_TMPDIR/out")" = "$(printf 'first\nsecond')" ]
}

@test "--cwd is workspace-relative or absolute; --env adds variables" {
	run -0 pisb exec ex --sh 'mkdir -p /workspace/sub /opt/x'
	run -0 pisb exec ex --cwd sub -- pwd
	[ "$output" = /workspace/sub ]
	run -0 pisb exec ex --cwd /opt/x -- pwd
	[ "$output" = /opt/x ]
	run -0 pisb exec ex --env A=1 --env B='two words' --sh 'echo "$A/$B"'
	[ "$output" = "1/two words" ]
	run -2 pisb exec ex --env NOEQUALS -- true
}

@test "nothing of the caller's environment enters the sandbox" {
	export PISB_CANARY_SECRET=leak-$$ OPENAI_API_KEY=sk-test AWS_SECRET_ACCESS_KEY=x
	run -0 pisb exec ex -- env
	[[ $output != *leak-* ]]
	[[ $output != *OPENAI* ]]
	[[ $output != *AWS_* ]]
	for k in PATH HOME LANG TERM USER SHELL TMPDIR; do grep -q "^$k=" <<<"$output"; done
}

@test "a bare command name is looked up in the sandbox's PATH, never the caller's" {
	run -0 pisb exec ex --sh 'mkdir -p /opt/callerpath && printf "#!/bin/sh\necho found\n" >/opt/callerpath/pisb-t20 && chmod +x /opt/callerpath/pisb-t20'
	PATH="/opt/callerpath:$PATH" run -127 --separate-stderr pisb exec ex -- pisb-t20
	[[ $stderr == *"pisb-t20"* ]]
	run -0 pisb exec ex --env PATH=/opt/callerpath:/usr/bin:/bin -- pisb-t20
	[ "$output" = found ]
}

@test "SIGINT and SIGTERM reach the sandboxed process group" {
	pisb exec ex -- rm -f /tmp/int-ready
	pisb exec ex --sh 'trap "echo got-int; exit 3" INT; touch /tmp/int-ready; sleep 31 & wait' > "$BATS_TEST_TMPDIR/out" &
	pid=$!
	# signal only once the trap is in place
	for i in $(seq 100); do pisb exec ex -- test -e /tmp/int-ready && break; sleep 0.1; done
	kill -INT $pid
	# wait in this shell: `run wait` would wait from a subshell, which
	# only knows the job's status if it ended before the fork
	rc=0; wait $pid || rc=$?
	[ "$rc" = 3 ]
	[ "$(cat "$BATS_TEST_TMPDIR/out")" = got-int ]
	pisb exec ex --sh 'sleep 32' &
	pid=$!
	for i in $(seq 100); do pisb exec ex -- pgrep -f 'sleep 32' >/dev/null && break; sleep 0.1; done
	kill -TERM $pid
	rc=0; wait $pid || rc=$?
	[ "$rc" = 143 ]
	# the group got the signal with the shell; its sleep ends as soon as
	# it is scheduled, which on a loaded machine can be after exec returned
	for i in $(seq 50); do pisb exec ex -- pgrep -f 'sleep 32' >/dev/null || break; sleep 0.1; done
	run -1 pisb exec ex -- pgrep -f 'sleep 32'
	pisb exec ex -- pkill sleep || true
}

@test "the command dies with its caller" {
	bash -c 'pisb exec ex --sh "sleep 33 & sleep 34"; echo never' &
	caller=$!
	sleep 0.5
	run -0 pisb exec ex -- pgrep -f 'sleep 3[34]'
	kill -KILL $caller
	for i in $(seq 40); do pisb exec ex -- pgrep -f 'sleep 3[34]' >/dev/null || break; sleep 0.1; done
	run -1 pisb exec ex -- pgrep -f 'sleep 3[34]'
}

@test "--timeout-ms: a finished command returns its output and exit code" {
	run -0 pisb exec ex --json --timeout-ms 5000 --sh 'echo hi; exit 4'
	jq -e '.running == false and .exitCode == 4 and .output == "hi\n" and .truncated == false and (.pid | type == "string")' <<<"$output"
}

@test "--timeout-ms: a running command returns a handle; exec-status returns only new output" {
	run -0 pisb exec ex --json --timeout-ms 200 --sh 'echo one; sleep 1; echo two; exit 5'
	jq -e '.running == true and .exitCode == null and .output == "one\n"' <<<"$output"
	h=$(jq -r .pid <<<"$output")
	run -0 pisb exec-status ex "$h" --json --timeout-ms 5000
	jq -e '.running == false and .exitCode == 5 and .output == "two\n"' <<<"$output"
	run -0 pisb exec-status ex "$h" --json
	jq -e '.output == "" and .exitCode == 5' <<<"$output"
}

@test "the timeout only ends the wait: the command goes on" {
	run -0 pisb exec ex --json --timeout-ms 0 --sh 'sleep 0.5; echo done > /tmp/flag'
	sleep 1
	run -0 pisb exec ex -- cat /tmp/flag
	[ "$output" = done ]
}

@test "collected output is capped at 64 KiB per call, with truncated" {
	run -0 pisb exec ex --json --timeout-ms 5000 --sh 'head -c 200000 /dev/zero | tr "\0" a'
	jq -e '.truncated == true and (.output | length) == 65536 and .running == false' <<<"$output"
	h=$(jq -r .pid <<<"$output")
	run -0 pisb exec-status ex "$h" --json
	jq -e '(.output | length) == 65536 and .truncated == true' <<<"$output"
	run -0 pisb exec-status ex "$h" --json
	run -0 pisb exec-status ex "$h" --json
	jq -e '(.output | length) == (200000 - 3*65536) and .truncated == false' <<<"$output"
}

@test "a UTF-8 character is never split between two calls" {
	run -0 pisb exec ex --json --timeout-ms 5000 --sh 'printf a; for i in $(seq 40000); do printf "é"; done'
	jq -e '.truncated == true' <<<"$output"
	[[ $output != *'\ufffd'* ]]
	h=$(jq -r .pid <<<"$output")
	run -0 pisb exec-status ex "$h" --json
	[[ $output != *'\ufffd'* ]]
}

@test "exec-kill ends the process group: TERM, then KILL after 2 s" {
	run -0 pisb exec ex --json --timeout-ms 100 --sh 'trap "" TERM; sleep 35 & wait'
	h=$(jq -r .pid <<<"$output")
	run -0 pisb exec-kill ex "$h" --json
	jq -e '.running == false and .exitCode == 137' <<<"$output"
	run -1 pisb exec ex -- pgrep -f 'sleep 35'
	run -0 pisb exec ex --json --timeout-ms 100 --sh 'sleep 60'
	h=$(jq -r .pid <<<"$output")
	run -0 pisb exec-kill ex "$h" --json
	jq -e '.exitCode == 143' <<<"$output"
	# a leader that TERM ends, a child of its group that ignores TERM:
	# the group is ended, not only the leader
	run -0 pisb exec ex --json --timeout-ms 100 --sh '(trap "" TERM; exec sleep 36) & wait'
	h=$(jq -r .pid <<<"$output")
	run -0 pisb exec-kill ex "$h" --json
	jq -e '.running == false and .exitCode == 143' <<<"$output"
	run -1 pisb exec ex -- pgrep -f 'sleep 36'
}

@test "only the newest 128 completed handles are kept" {
	first=$(pisb exec ex --json --timeout-ms 5000 -- true | jq -r .pid)
	for i in $(seq 128); do pisb exec ex --json --timeout-ms 5000 -- true >/dev/null; done
	run -3 --separate-stderr pisb exec-status ex "$first"
	[[ $stderr == *"no handle"* ]]
	[ "$(ls "$PI_SANDBOX_HOME/instances/ex/exec" | wc -l)" -le 129 ]
}

@test "handles of a previous run are refused after stop/start" {
	h=$(pisb exec ex --json --timeout-ms 100 --sh 'sleep 30' | jq -r .pid)
	run -0 pisb stop ex
	run -0 pisb start ex
	run -3 --separate-stderr pisb exec-status ex "$h"
	[[ $stderr == *"earlier run"* ]]
	run -2 pisb exec-status ex not_a_handle
}

@test "exec on a stopped or unknown sandbox fails closed (5, 3)" {
	run -3 pisb exec nosuch -- true
	run -0 pisb create ex2
	run -0 pisb stop ex2
	run -5 --separate-stderr pisb exec ex2 -- true
	[[ $stderr == *"not running"* ]]
	run -0 pisb destroy ex2 --confirm ex2
	run -2 pisb exec ex
	run -2 pisb exec ex --sh 'x' -- y
}

@test "shell opens an interactive terminal in the sandbox" {
	require_cmd script
	# type after the prompt is up, as a person would
	run -7 bash -c "(sleep 0.5; printf 'tty; hostname; exit 7\n'; sleep 1) | script -qec 'pisb shell ex' /dev/null"
	[[ $output == */dev/pts/* ]]
	[[ $output == *ex* ]]
}

@test "a background job does not hold exec: it returns when the shell exits and the job keeps running" {
	pisb exec ex -- pkill -f 'sleep 301' || true
	start=$(date +%s%N)
	run -0 timeout 20 pisb exec ex --sh 'sleep 301 & echo started'
	end=$(date +%s%N)
	[ "$output" = started ]
	# well under the 301 s the job lives (the bound is loose: a loaded machine)
	[ $(( (end - start) / 1000000 )) -lt 10000 ]
	run -0 pisb exec ex -- pgrep -f 'sleep 301'
	# what the shell wrote before it exited is all delivered, stderr too
	run -0 --separate-stderr timeout 20 pisb exec ex --sh 'sleep 302 & head -c 300000 /dev/zero | tr "\0" b; echo err >&2'
	[ "${#output}" = 300000 ]
	[ "$stderr" = err ]
	# the job may go on writing: it neither blocks nor dies of EPIPE
	# (what the job writes before the shell has exited may be delivered
	# too: the job waits a second before its first tick, and only the
	# first line is the shell's for certain)
	run -0 timeout 20 pisb exec ex --sh '(sleep 1; for i in $(seq 50); do echo tick; sleep 0.1; done; echo alive > /tmp/bg-alive) & echo ok'
	[ "${lines[0]}" = ok ]
	for i in $(seq 200); do pisb exec ex -- test -e /tmp/bg-alive && break; sleep 0.1; done
	run -0 pisb exec ex -- cat /tmp/bg-alive
	[ "$output" = alive ]
	pisb exec ex -- pkill -f 'sleep 30[12]' || true
}

@test "what an exec leaves running belongs to the sandbox: every process of its pid namespace has its parent inside" {
	run -0 pisb exec ex -- sh -c 'sleep 1234 &'
	init=$(pisb inspect ex | jq -r .controller.initPid)
	ns=$(readlink "/proc/$init/ns/pid")
	n=0
	for p in /proc/[0-9]*; do
		[ "$(readlink "$p/ns/pid" 2>/dev/null)" = "$ns" ] || continue
		[ "${p#/proc/}" != "$init" ] || continue
		ppid=$(awk '$1 == "PPid:" { print $2 }' "$p/status" 2>/dev/null) || continue
		[ -n "$ppid" ] || continue
		# a parent outside (the host's init) would keep the sandbox's stop
		# waiting until it reaps the process
		[ "$(readlink "/proc/$ppid/ns/pid")" = "$ns" ]
		n=$((n + 1))
	done
	# the sleep and the process draining its output
	[ "$n" -ge 2 ]
	run -0 pisb exec ex -- pkill -f 'sleep 1234'
}

@test "a dev server started with & keeps serving after exec returned" {
	require_cmd python3
	require_cmd curl
	run -0 timeout 20 pisb exec ex --sh 'cd /tmp && python3 -m http.server 18431 --bind 127.0.0.1 & echo serving'
	[ "$output" = serving ]
	for i in $(seq 100); do pisb exec ex -- curl -fsS -o /dev/null http://127.0.0.1:18431/ && break; sleep 0.1; done
	# several requests: each one is logged to the stderr it inherited
	for i in 1 2 3; do run -0 pisb exec ex -- curl -fsS -o /dev/null -w '%{http_code}' http://127.0.0.1:18431/; [ "$output" = 200 ]; done
	run -0 pisb exec ex -- pgrep -f 'http.server 18431'
	pisb exec ex -- pkill -f 'http.server 18431'
}

@test "--timeout-ms: a background job does not keep the handle running" {
	run -0 pisb exec ex --json --timeout-ms 10000 --sh 'sleep 303 & echo started'
	jq -e '.running == false and .exitCode == 0 and .output == "started\n"' <<<"$output"
	run -0 pisb exec ex -- pgrep -f 'sleep 303'
	pisb exec ex -- pkill -f 'sleep 303'
}

@test "a handle keeps at most 8 MiB of output on the host; the rest is dropped and said" {
	run -0 pisb exec ex --json --timeout-ms 2000 -- yes
	jq -e '.running == true' <<<"$output"
	h=$(jq -r .pid <<<"$output")
	sleep 1
	run -0 pisb exec-kill ex "$h" --json
	jq -e '.running == false and .exitCode == 143 and .truncated == true and .droppedBytes > 0' <<<"$output"
	dir=$PI_SANDBOX_HOME/instances/ex/exec/$h
	[ "$(stat -c %s "$dir/output")" -le $(( 8 * 1024 * 1024 + 100 )) ]
	[ "$(stat -c %s "$dir/output")" -ge $(( 8 * 1024 * 1024 )) ]
	grep -q 'output past 8 MiB dropped' "$dir/output"
	# every later call says so too, with the count
	run -0 pisb exec-status ex "$h" --json
	jq -e '.truncated == true and .droppedBytes > 0' <<<"$output"
	# a handle that stayed under the cap has no droppedBytes
	run -0 pisb exec ex --json --timeout-ms 5000 -- echo small
	jq -e 'has("droppedBytes") | not' <<<"$output"
}

@test "--bash runs bash syntax as bash does; --sh stays sh" {
	run -0 pisb exec ex --bash 'echo {1..3}; [[ a == a ]] && echo dbl; a=(x y z); echo "${a[1]}"; echo $'"'"'t\tab'"'"'; printf "\xc3\xa9\n"'
	[ "${lines[0]}" = "1 2 3" ]
	[ "${lines[1]}" = dbl ]
	[ "${lines[2]}" = y ]
	[ "${lines[3]}" = "$(printf 't\tab')" ]
	[ "${lines[4]}" = "é" ]
	run -0 pisb exec ex --bash 'echo "$BASH_VERSION"'
	[ -n "$output" ]
	run -0 pisb exec ex --sh 'echo "${BASH_VERSION:-none}"'
	[ "$output" = none ]
	run -0 pisb exec ex --json --timeout-ms 5000 --bash 'echo {a,b}'
	jq -e '.output == "a b\n"' <<<"$output"
	run -2 pisb exec ex --sh x --bash y
}

@test "--events-fd: one shell event for --sh and --bash (attached and handles), none for argv; the command never gets the fd" {
	ev=$BATS_TEST_TMPDIR/ev
	run -0 pisb exec ex --events-fd 3 --bash 'echo "$BASH_VERSION" | grep -c .' 3>"$ev"
	[ "$output" = 1 ]
	run -0 jq -sc . "$ev"
	[ "$output" = '[{"event":"shell","name":"ex","driver":"local","asked":"bash","shell":"/bin/bash"}]' ]
	run -0 pisb exec ex --events-fd 3 --sh 'echo "$0"' 3>"$ev"
	[ "$output" = /bin/sh ]
	jq -se 'length == 1 and .[0].asked == "sh" and .[0].shell == "/bin/sh"' "$ev"
	run -0 pisb exec ex --events-fd 3 --timeout-ms 5000 --json --bash 'echo {a,b}' 3>"$ev"
	jq -e '.output == "a b\n"' <<<"$output"
	jq -se 'length == 1 and .[0].shell == "/bin/bash"' "$ev"
	run -0 pisb exec ex --events-fd 3 -- true 3>"$ev"
	[ ! -s "$ev" ]
	# not inherited: a background job cannot hold the caller's pipe open
	run -0 pisb exec ex --events-fd 3 --bash 'if [ -e /proc/$$/fd/3 ]; then echo has-fd3; else echo no-fd3; fi' 3>"$ev"
	[ "$output" = no-fd3 ]
	run -2 --separate-stderr pisb exec ex --events-fd 9 --bash true
	[[ $stderr == *"--events-fd 9"* ]]
}

@test "--sh and --bash see the login profile's environment, captured at start; --env wins" {
	# (/etc is the host's, read-only: root's own profile, read by sh -l and bash -l)
	run -1 pisb exec ex -- test -e /root/.bash_profile
	run -0 pisb exec ex --sh 'cp -p /root/.profile /root/.profile.pisb-test 2>/dev/null; echo "export PISB_PROFILE_MARK=from-profile" >> /root/.profile'
	run -0 pisb stop ex
	run -0 pisb start ex
	run -0 pisb exec ex --sh 'echo "$PISB_PROFILE_MARK"'
	[ "$output" = from-profile ]
	run -0 pisb exec ex --bash 'echo "$PISB_PROFILE_MARK"'
	[ "$output" = from-profile ]
	run -0 pisb exec ex --env PISB_PROFILE_MARK=mine --sh 'echo "$PISB_PROFILE_MARK"'
	[ "$output" = mine ]
	# argv exec is not a shell: no profile
	run -1 pisb exec ex -- printenv PISB_PROFILE_MARK
	pisb exec ex --sh 'rm -f /root/.profile; [ ! -e /root/.profile.pisb-test ] || mv /root/.profile.pisb-test /root/.profile'
}

@test "--bash falls back to sh in a sandbox without bash" {
	# a new run (the shell is chosen once per start), then bash hidden from
	# this sandbox's view: /usr/bin replaced by links to everything but bash
	run -0 pisb stop ex
	run -0 pisb start ex
	run -0 pisb exec ex -- sh -c 'mkdir -p /opt/realbin /tmp/ub && mount --bind /usr/bin /opt/realbin &&
		for f in /opt/realbin/*; do [ "${f##*/}" = bash ] || ln -s "$f" /tmp/ub/; done &&
		mount --bind /tmp/ub /usr/bin'
	run -1 pisb exec ex -- test -e /bin/bash
	run -0 pisb exec ex --bash 'echo "${BASH_VERSION:-none}" $0'
	[ "$output" = "none /bin/sh" ]
	# --events-fd says so
	run -0 pisb exec ex --events-fd 3 --bash 'echo in-sh' 3>"$BATS_TEST_TMPDIR/ev"
	[ "$output" = in-sh ]
	jq -e '.event == "shell" and .asked == "bash" and .shell == "/bin/sh"' "$BATS_TEST_TMPDIR/ev"
	run -0 pisb stop ex
	run -0 pisb start ex
}

@test "an attached command whose sandbox stops under it: 137 and a message saying so" {
	pisb exec ex -- sleep 100 2>"$BATS_TEST_TMPDIR/err" &
	pid=$!
	for _ in $(seq 50); do pisb exec ex -- sh -c 'ps -eo args | grep -q "^sleep 100"' && break; sleep 0.1; done
	pisb stop ex
	run -137 wait "$pid"
	grep -q "sandbox 'ex' stopped while the command ran" "$BATS_TEST_TMPDIR/err"
	# a command killed by itself says nothing of the kind
	pisb start ex
	run -137 --separate-stderr pisb exec ex -- sh -c 'kill -9 $$'
	[ -z "$stderr" ]
}
