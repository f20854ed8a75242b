#!/usr/bin/env bats
# PISB_TRACE: the phase marks of create and the controller (the create
# breakdown of make bench), and make bench's summary table (bench/summary.py).
load helpers

setup() {
	pisb_test_setup
}

teardown() {
	# a controller a failed test left stopped (PISB_TRACE_STOP) goes on
	[ -z "${stopped_ctl:-}" ] || kill -CONT "$stopped_ctl" 2>/dev/null || true
	for n in $(pisb list -q 2>/dev/null); do pisb destroy "$n" --confirm "$n" >/dev/null 2>&1 || true; done
}

@test "PISB_TRACE=FILE: create and its controller append their phases to FILE, in order" {
	require_userns
	t=$BATS_TEST_TMPDIR/trace
	PISB_TRACE=$t run -0 --separate-stderr pisb create tr -q
	[ -z "$stderr" ]
	# every line: pisb-trace USEC PID WHAT
	run -1 grep -vE '^pisb-trace [0-9]{16} [0-9]+ [a-z]+: .+$' "$t"
	grep -q ' create: config parsed$' "$t"
	grep -q ' controller: cgroup created$' "$t"
	grep -q ' boot: init ready$' "$t"
	grep -q ' controller: status written (running)$' "$t"
	grep -q ' create: controller running$' "$t"
	# two processes: the create (pisb) and the controller (pisb inspect's pid)
	ctl=$(pisb inspect tr | jq -r .controller.pid)
	grep -q "^pisb-trace [0-9]* $ctl controller: start\$" "$t"
	[ "$(cut -d' ' -f3 "$t" | sort -u | wc -l)" = 2 ]
	# the create waited for the controller: for it to write 'running', which
	# it begins after binding its control socket
	c=$(grep ' controller: control socket$' "$t" | cut -d' ' -f2)
	r=$(grep ' create: controller running$' "$t" | cut -d' ' -f2)
	[ "$r" -ge "$c" ]
	# exec: its marks end before it enters the sandbox (inside, the path
	# would be the sandbox's)
	PISB_TRACE=$t run -0 pisb exec tr -- true
	grep -q ' exec: cgroups joined$' "$t"
	# stop: the client's marks and the controller's (it traces to the file
	# it was started with)
	PISB_TRACE=$t run -0 pisb stop tr -q
	grep -q ' stop: locked$' "$t"
	grep -q "^pisb-trace [0-9]* $ctl stop: cgroup removed\$" "$t"
	grep -q ' stop: controller gone$' "$t"
	# each process's marks are in time order
	for p in $(cut -d' ' -f3 "$t" | sort -u); do
		awk -v p="$p" '$3 == p { print $2 }' "$t" > "$BATS_TEST_TMPDIR/ts"
		sort -n -c "$BATS_TEST_TMPDIR/ts"
	done
}

@test "the boot joins namespaces made ahead (while the controller reads the record); their maker is gone, the init is the controller's only child" {
	require_userns
	t=$BATS_TEST_TMPDIR/trace
	PISB_TRACE=$t run -0 pisb create ah -q
	grep -q ' boot: namespaces made ahead$' "$t"
	ctl=$(pisb inspect ah | jq -r .controller.pid)
	init=$(pisb inspect ah | jq -r .controller.initPid)
	[ "$(ps --ppid "$ctl" -o pid= | tr -d ' ')" = "$init" ]
	# the sandbox's user, mount, network, ipc and uts namespaces are the
	# init's (what the command joins), none of them the controller's
	run -0 pisb exec ah --sh 'for n in user mnt net ipc uts; do readlink /proc/self/ns/$n; done'
	for n in user mnt net ipc uts; do
		grep -qxF "$(readlink "/proc/$init/ns/$n")" <<<"$output"
		[ "$(readlink "/proc/$init/ns/$n")" != "$(readlink "/proc/$ctl/ns/$n")" ]
	done
	# the ids of the record are mapped, the hostname is the sandbox's
	run -0 pisb exec ah --sh 'id -u; hostname; cat /proc/self/uid_map'
	[ "${lines[0]}" = 0 ]
	[ "${lines[1]}" = ah ]
	[ "$(awk '{print $2}' <<<"${lines[2]}")" = "$(pisb inspect ah | jq -r .local.idRange.uidBase)" ]
	# a start too
	run -0 pisb stop ah
	: >"$t"
	PISB_TRACE=$t run -0 pisb start ah
	grep -q ' boot: namespaces made ahead$' "$t"
	ctl=$(pisb inspect ah | jq -r .controller.pid)
	[ "$(ps --ppid "$ctl" -o pid= | tr -d ' ')" = "$(pisb inspect ah | jq -r .controller.initPid)" ]
}

@test "the namespaces' maker holds nothing of the controller's (only its socket) and maps no ids; it is gone once the sandbox runs" {
	require_userns
	run -0 pisb create mk -q
	run -0 pisb stop mk
	t=$BATS_TEST_TMPDIR/trace
	# the controller stopped where the boot has not taken them yet
	PISB_TRACE=$t PISB_TRACE_STOP='controller: image layers' pisb start mk >/dev/null 2>&1 3>&- &
	bg=$!
	ctl=$(stopped_at "$t" "controller: image layers")
	stopped_ctl=$ctl
	early=$(ps --ppid "$ctl" -o pid= | tr -d ' ')
	[ -n "$early" ]
	for i in $(seq 40); do
		[ "$(readlink "/proc/$early/ns/net")" != "$(readlink "/proc/$ctl/ns/net")" ] && break
		sleep 0.05
	done
	for n in user mnt net ipc uts; do
		[ "$(readlink "/proc/$early/ns/$n")" != "$(readlink "/proc/$ctl/ns/$n")" ]
	done
	[ "$(readlink "/proc/$early/ns/pid")" = "$(readlink "/proc/$ctl/ns/pid")" ]
	[ -z "$(cat "/proc/$early/uid_map")" ]
	run -1 grep -qaF -- --own-namespaces "/proc/$ctl/cmdline"
	# stdio and one socket: not the create's or start's socket, the lock,
	# the state directory or the log the controller holds
	run -0 sh -c "ls /proc/$early/fd | sort -n"
	[ "${#lines[@]}" = 4 ]
	[ "${lines[*]:0:3}" = "0 1 2" ]
	[[ $(readlink "/proc/$early/fd/${lines[3]}") == socket:* ]]
	[ "$(ls "/proc/$ctl/fd" | wc -l)" -gt 4 ]
	kill -CONT "$ctl"
	wait "$bg"
	[ ! -e "/proc/$early" ]
	run -0 pisb exec mk -- true
}

# stopped_bare WHAT CMD...: runs CMD (a create or start) with its
# controller stopped at WHAT, and checks that this controller was told
# that the boot makes its own namespaces and has no child (no maker)
stopped_bare() {
	local what=$1 t=$BATS_TEST_TMPDIR/trace.$RANDOM bg ctl
	shift
	PISB_TRACE=$t PISB_TRACE_STOP=$what "$@" >/dev/null 2>&1 3>&- &
	bg=$!
	ctl=$(stopped_at "$t" "$what")
	stopped_ctl=$ctl
	grep -qaF -- --own-namespaces "/proc/$ctl/cmdline"
	[ -z "$(ps --ppid "$ctl" -o pid=)" ]
	kill -CONT "$ctl"
	wait "$bg"
	run -1 grep -q 'namespaces made ahead' "$t"
}

@test "a boot that makes its own namespaces (a bound project; a disk image as root) gets none made ahead: its controller forks no maker" {
	require_userns
	R=$BATS_TEST_TMPDIR/proj
	mkdir -p "$R"
	printf 'hi\n' >"$R/a.txt"
	# as root, a bound project is a user's (root's own is refused)
	[ "$(id -u)" != 0 ] || chown -R 4242:4343 "$R"
	printf 'project:\n  mode: bind-ro\n' >"$BATS_TEST_TMPDIR/p.yaml"
	stopped_bare 'controller: image layers' pisb create pj -q -f "$BATS_TEST_TMPDIR/p.yaml" --project "$R"
	run -0 pisb exec pj -- cat a.txt
	[ "$output" = hi ]
	run -0 pisb stop pj
	stopped_bare 'controller: image layers' pisb start pj
	run -0 pisb exec pj -- cat a.txt
	[ "$output" = hi ]
	if [ "$(id -u)" = 0 ]; then
		printf 'diskGiB: 2\n' >"$BATS_TEST_TMPDIR/d.yaml"
		stopped_bare 'controller: image layers' pisb create dg -q -f "$BATS_TEST_TMPDIR/d.yaml"
		run -0 pisb exec dg -- true
		run -0 pisb stop dg
		stopped_bare 'controller: image layers' pisb start dg
		run -0 pisb exec dg -- true
	fi
}

@test "PISB_TRACE=1 writes to stderr (the controller's is controller.log); unset, nothing" {
	require_userns
	PISB_TRACE=1 run -0 --separate-stderr pisb create on
	[[ $stderr == *" create: controller running"* ]]
	[[ $stderr != *" controller: start"* ]]
	grep -q ' controller: status written (running)$' "$PI_SANDBOX_HOME/instances/on/controller.log"
	run -0 --separate-stderr pisb create off -q
	[ -z "$stderr" ]
	run -1 grep -c pisb-trace "$PI_SANDBOX_HOME/instances/off/controller.log"
	PISB_TRACE=0 run -0 --separate-stderr pisb create zero -q
	[ -z "$stderr" ]
	run -1 grep -c pisb-trace "$PI_SANDBOX_HOME/instances/zero/controller.log"
}

@test "no process of a traced sandbox holds the trace file open (the sandbox's root could reopen it)" {
	require_userns
	t=$BATS_TEST_TMPDIR/trace
	PISB_TRACE=$t run -0 pisb create held
	PISB_TRACE=$t run -0 pisb exec held -- true
	[ -s "$t" ]
	ctl=$(pisb inspect held | jq -r .controller.pid)
	init=$(pisb inspect held | jq -r .controller.initPid)
	for p in "$ctl" "$init"; do
		run -0 find "/proc/$p/fd" -lname "$t"
		[ -z "$output" ]
	done
}

@test "PISB_TRACE=PATH does not follow a symlink at PATH" {
	require_userns
	echo keep > "$BATS_TEST_TMPDIR/target"
	ln -s "$BATS_TEST_TMPDIR/target" "$BATS_TEST_TMPDIR/link"
	PISB_TRACE=$BATS_TEST_TMPDIR/link run -0 pisb create sym
	[ "$(cat "$BATS_TEST_TMPDIR/target")" = keep ]
}

@test "PISB_TRACE=PATH at a FIFO nobody reads does not block create or exec" {
	require_userns
	mkfifo "$BATS_TEST_TMPDIR/fifo"
	PISB_TRACE=$BATS_TEST_TMPDIR/fifo run -0 timeout 120 pisb create fifo -q
	PISB_TRACE=$BATS_TEST_TMPDIR/fifo run -0 timeout 60 pisb exec fifo -- true
}

@test "make bench's summary: one row per comparison, the best peer, the ratio and whether the goal was met" {
	tsv=$BATS_TEST_TMPDIR/r.tsv
	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' \
		exec "exec true" 6 nsenter 8 ms "<=1" \
		exec "exec true" 6 bwrap 4 ms "" \
		exec "exec true" "" docker "" - "cannot run: dockerd did not start" \
		lc "create" 30 bwrap 10 ms "<=1" \
		pv "relay" 800 direct 1000 MB/s ">=0.8" \
		pv "relay" 800 host 2000 MB/s "" \
		lc "stop" 7 - "" ms "<5" \
		lc "idle PSS" 400 - "" KiB "<=512" \
		lc "broken" NaN nsenter 3 ms "<=1" > "$tsv"
	run -0 python3 "$BATS_TEST_DIRNAME/../bench/summary.py" "$tsv" "$BATS_TEST_TMPDIR/t.md" "$BATS_TEST_TMPDIR/t.json"
	[ "$output" = "$(cat "$BATS_TEST_TMPDIR/t.md")" ]
	j=$BATS_TEST_TMPDIR/t.json
	[ "$(jq length "$j")" = 6 ]
	# the fastest peer is the best one; the goal is taken against the peer it names
	jq -e '.[0] | .bestPeer == "bwrap" and .ratio == 1.5 and .goal == "<=1" and .met == true' "$j"
	jq -e '.[0].peers | map(.peer) == ["nsenter", "bwrap", "docker"]' "$j"
	jq -e '.[0].peers[2] | .value == null and .note == "cannot run: dockerd did not start"' "$j"
	jq -e '.[1] | .ratio == 3 and .met == false' "$j"
	# throughput: the highest peer is the best; the goal is on its own peer
	jq -e '.[2] | .bestPeer == "host" and .ratio == 0.4 and .met == true' "$j"
	# no peer: the goal is on pisb's figure
	jq -e '.[3] | .bestPeer == null and .met == false' "$j"
	jq -e '.[4].met == true' "$j"
	# a failed measurement is a missed goal, not a number
	jq -e '.[5] | .pisb == null and .met == false' "$j"
	[[ $output == *"| exec true | 6.00 ms | bwrap 4.00 ms | 1.50x | <= 1x nsenter | yes | nsenter 8.00 ms (0.75x); docker: cannot run: dockerd did not start |"* ]]
	[[ $output == *"| stop | 7.00 ms | - | - | < 5 | **no** | - |"* ]]
	[[ $output == *"| broken | failed |"* ]]
}

@test "make bench's timer (bench/timeit.c): a clock before and after each command, no shell, stops at the first that fails" {
	bin=$BATS_TEST_TMPDIR/timeit
	cc -O2 -o "$bin" "$BATS_TEST_DIRNAME/../bench/timeit.c"
	# two commands: three increasing times, the first command's output
	# drained (not on the timer's stdout), the second after the first
	run -0 "$bin" sh -c 'echo noise; echo more >&2; sleep 0.05' '&&' /bin/true
	read -r a b c rest <<<"$output"
	[ -z "$rest" ]
	[[ $a =~ ^[0-9]{16}$ ]]
	[ "$b" -ge $((a + 50000)) ]
	[ "$c" -ge "$b" ]
	# a failure ends the sequence: the times up to it, exit 1
	run -1 "$bin" false '&&' touch "$BATS_TEST_TMPDIR/ran"
	[ "$(wc -w <<<"$output")" = 2 ]
	[ ! -e "$BATS_TEST_TMPDIR/ran" ]
	# a command that does not exist fails the same way; no command: usage
	run -1 "$bin" /nonexistent/cmd
	run -2 "$bin"
	run -2 "$bin" '&&' true
	[[ $output == *usage* ]]
}

@test "bench/redirect.c (preview's relay probe): every byte arrives direct, through a splice relay and (where BPF is allowed) a sockmap redirect" {
	bin=$BATS_TEST_TMPDIR/redirect
	cc -O2 -Wall -Wextra -Werror -o "$bin" "$BATS_TEST_DIRNAME/../bench/redirect.c"
	# a short download is an error (exit 1), so a line is three full ones
	run -0 "$bin" 8 2
	[ "${#lines[@]}" = 2 ]
	for l in "${lines[@]}"; do
		read -r d s k q rest <<<"$l"
		[ -z "$rest" ]
		[[ $d =~ ^[0-9]+$ ]]
		[[ $s =~ ^[0-9]+$ ]]
		# the redirect's pair is measured, or "- -" where BPF is denied
		# (not root, or a container without CAP_BPF)
		if [ "$k" != - ]; then
			[[ $k =~ ^[0-9]+$ ]]
			[[ $q =~ ^[0-9.]+$ ]]
		else
			[ "$q" = - ]
		fi
	done
	run -2 "$bin" 8
	[[ $output == *usage* ]]
}
