#!/usr/bin/env bats
# Faults: every sandbox state is recoverable with one pisb command, no
# command reports a success it could not record, nothing leaks.  kill -9 at
# random points of each mutating verb (bounded trials, checksums of every
# file afterwards), a full state filesystem, corrupt record.json and
# status.json, an instance directory deleted under its controller, and
# concurrency storms.  Trial counts are small so that the suite stays
# within a few minutes.
load helpers

setup() {
	pisb_test_setup
	S=$PI_SANDBOX_HOME
	mkdir -p "$S"
	chmod 700 "$S"
	MNT=
}

teardown() {
	for n in $(pisb list -q 2>/dev/null); do pisb destroy "$n" --confirm "$n" >/dev/null 2>&1 || true; done
	for d in "$S"/instances/*/; do
		[ -d "$d" ] || continue
		n=$(basename "$d")
		pisb destroy "$n" --confirm "$n" >/dev/null 2>&1 || true
	done
	if [ -n "$MNT" ]; then umount -l "$MNT" 2>/dev/null || true; fi
}

# a sandbox name no other suite running at the same time uses (cgroups
# are named pisb/NAME.GEN on the whole host)
uname_() {
	printf 'f%s%04x' "$1" $((RANDOM))
}

# the controller pid, init pid, generation of running sandbox $1
ids() {
	CTL=$(jq -r .controller.pid "$S/instances/$1/status.json")
	INIT=$(jq -r .init.pid "$S/instances/$1/status.json")
	GEN=$(jq -r .generation "$S/instances/$1/status.json")
}

# wait up to 10 s for pid $1 to be gone
gone() {
	for i in $(seq 200); do [ -d "/proc/$1" ] || return 0; sleep 0.05; done
	return 1
}

# how many cgroup dirs sandbox $1 (generation $2, or any) still has
cgroups_of() {
	ls -d /sys/fs/cgroup/pisb/"$1".${2:-*} /sys/fs/cgroup/*/pisb/"$1".${2:-*} 2>/dev/null | wc -l
}

# nothing of sandbox $1 (controller $CTL, init $INIT, generation $GEN) is
# left: no process, no cgroup, no mount of the state dir, no instance,
# staging or trash entry
assert_nothing_left() {
	gone "$CTL"
	gone "$INIT"
	[ ! -e "$S/instances/$1" ]
	run -0 cgroups_of "$1"
	[ "$output" = 0 ]
	run -0 sh -c "cat /proc/[0-9]*/mountinfo 2>/dev/null | grep -c -F ' $S/' || true"
	[ "$output" = 0 ]
	run -0 sh -c "ls -A '$S/staging' '$S/trash' 2>/dev/null | grep -v ':\$' | grep -c . || true"
	[ "$output" = 0 ]
}

# ---------- 1. a full state filesystem ----------

@test "full state filesystem: stop and gc fail saying what could not be written; after space is freed they succeed" {
	require_userns
	require_root
	MNT=$BATS_TEST_TMPDIR/small
	mkdir -p "$MNT"
	mount -t tmpfs -o size=24m,mode=700 tmpfs "$MNT"
	export PI_SANDBOX_HOME=$MNT/state
	S=$PI_SANDBOX_HOME
	run -0 pisb create full
	ids full
	kill -9 "$CTL"
	gone "$CTL"
	run -0 pisb inspect full
	jq -e '.status == "interrupted"' <<<"$output"
	# fill it up
	dd if=/dev/zero of="$MNT/fill" bs=1M 2>/dev/null || true
	run -1 --separate-stderr pisb stop full
	[[ $stderr == *"recording it failed"* ]]
	[[ $stderr == *"$S/instances/full"* || $stderr == *"status.json"* ]]
	[[ $stderr == *"No space left on device"* ]]
	[ "$output" = "" ]
	run -1 --separate-stderr pisb gc --json
	jq -e '.failed[] | select(.name == "full") | .reason | test("No space left")' <<<"$output"
	run -0 pisb inspect full
	jq -e '.status == "interrupted"' <<<"$output"
	# a running sandbox's stop on the full filesystem: the controller could
	# not write "stopped" either, and stop says so
	rm -f "$MNT/fill"
	run -0 pisb start full
	dd if=/dev/zero of="$MNT/fill" bs=1M 2>/dev/null || true
	run -1 --separate-stderr pisb stop full
	[[ $stderr == *"No space left on device"* ]]
	rm -f "$MNT/fill"
	run -0 pisb stop full
	run -0 pisb inspect full
	jq -e '.status == "stopped"' <<<"$output"
	run -0 pisb destroy full --confirm full
	export PI_SANDBOX_HOME=$BATS_TEST_TMPDIR/state
}

# ---------- 2. corrupt record.json ----------

corrupt_record() {
	local f=$S/instances/$1/record.json
	case $2 in
	empty) : >"$f" ;;
	truncated) head -c 40 "$f" >"$f.t" && mv "$f.t" "$f" ;;
	types) printf '{"version":1,"name":5,"driver":["local"],"config":"x"}\n' >"$f" ;;
	nuls) printf '{"version":1,"name":"a\0b","driver":"lo\0cal","config":{}}\n' >"$f" ;;
	huge) rm -f "$f" && truncate -s 200M "$f" ;;
	esac
}

@test "corrupt record.json (empty, truncated, wrong types, NULs, 200 MB): destroy and gc leave nothing behind" {
	require_userns
	for kind in empty truncated types nuls huge; do
		n=$(uname_ r)
		run -0 pisb create "$n"
		ids "$n"
		corrupt_record "$n" "$kind"
		# the record is reported with the sandbox's name and full path
		run -1 --separate-stderr pisb inspect "$n"
		[[ $stderr == *"'$n'"* ]]
		[[ $stderr == *"$S/instances/$n/record.json"* ]]
		[[ $stderr != *"Argument list too long"* ]]
		run -0 pisb list --json
		jq -e --arg n "$n" '.[] | select(.name == $n) | .status == "broken"' <<<"$output"
		run -0 --separate-stderr pisb destroy "$n" --confirm "$n"
		run -0 --separate-stderr pisb gc
		assert_nothing_left "$n"
	done
}

@test "corrupt record.json of a stopped sandbox: gc keeps it saying how to remove it, --hours 0 removes it" {
	require_userns
	n=$(uname_ s)
	run -0 pisb create "$n"
	run -0 pisb stop "$n"
	corrupt_record "$n" truncated
	run -0 --separate-stderr pisb gc --json
	jq -e --arg n "$n" '.kept[] | select(.name == $n) | .reason | test("unreadable record.*pisb destroy")' <<<"$output"
	touch -d '2 hours ago' "$S/instances/$n/record.json"
	run -0 --separate-stderr pisb gc --hours 1 --json
	jq -e --arg n "$n" '.removed[] | select(.name == $n)' <<<"$output"
	[ ! -e "$S/instances/$n" ]
}

@test "a controller whose status.json no longer names it is still found (through its lock) and stopped by destroy" {
	require_userns
	n=$(uname_ l)
	run -0 pisb create "$n"
	ids "$n"
	# the control socket gone too: destroy cannot ask, it must find the
	# lock's holder in /proc/locks
	rm -f "$S/instances/$n/control.sock"
	printf '{"state":"running","controller":{"pid":1,"start":1}}\n' >"$S/instances/$n/status.json"
	run -0 --separate-stderr pisb destroy "$n" --confirm "$n"
	run -0 pisb gc
	assert_nothing_left "$n"
}

@test "a controller.lock held by a leftover process that is no controller: list says unavailable, destroy ends it" {
	require_userns
	n=$(uname_ o)
	run -0 pisb create "$n"
	run -0 pisb stop "$n"
	# the lock taken by a child that exits, kept by its parent (so
	# /proc/locks names a pid that is gone)
	bash -c 'exec 9>"$0"; flock 9; exec sleep 1000' "$S/instances/$n/controller.lock" 3>&- &
	holder=$!
	for i in $(seq 100); do flock -n "$S/instances/$n/controller.lock" true 2>/dev/null || break; sleep 0.05; done
	printf '{"state":"stopping"}\n' >"$S/instances/$n/status.json"
	run -0 pisb inspect "$n"
	jq -e '.status == "unavailable"' <<<"$output"
	run -0 --separate-stderr pisb destroy "$n" --confirm "$n"
	gone "$holder"
	[ ! -e "$S/instances/$n" ]
}

# ---------- 6. status from liveness ----------

@test "corrupt status.json: list never says running without a live controller and init; destroy and gc leave nothing" {
	require_userns
	for kind in garbage types deadinit; do
		n=$(uname_ t)
		run -0 pisb create "$n"
		ids "$n"
		f=$S/instances/$n/status.json
		case $kind in
		garbage) printf 'not json at all' >"$f" ;;
		types) printf '{"state":7,"controller":"x","init":[]}\n' >"$f" ;;
		deadinit) jq -c '.init = {"pid": 1, "start": 987654321}' "$f" >"$f.t" && mv "$f.t" "$f" ;;
		esac
		run -0 pisb list --json
		st=$(jq -r --arg n "$n" '.[] | select(.name == $n) | .status' <<<"$output")
		[ "$st" != running ]
		run -0 --separate-stderr pisb destroy "$n" --confirm "$n"
		run -0 pisb gc
		assert_nothing_left "$n"
	done
}

@test "a stopped sandbox with a corrupt status.json: gc marks it stopped with a new status.json; start works" {
	require_userns
	n=$(uname_ u)
	run -0 pisb create "$n"
	run -0 pisb stop "$n"
	printf '{"state":' >"$S/instances/$n/status.json"
	run -0 pisb list --json
	jq -e --arg n "$n" '.[] | select(.name == $n) | .status != "running"' <<<"$output"
	run -0 --separate-stderr pisb gc --json
	jq -e --arg n "$n" '.cleaned[] | select(.name == $n) | .reason | test("unreadable status.json")' <<<"$output"
	run -0 pisb inspect "$n"
	jq -e '.status == "stopped"' <<<"$output"
	run -0 pisb start "$n"
	run -0 pisb exec "$n" -- true
}

# ---------- 3. the instance directory deleted or replaced ----------

@test "an instance directory deleted under a running controller: the controller shuts its sandbox down" {
	require_userns
	n=$(uname_ d)
	run -0 pisb create "$n"
	ids "$n"
	rm -rf "$S/instances/$n"
	gone "$CTL"
	gone "$INIT"
	run -0 cgroups_of "$n" "$GEN"
	[ "$output" = 0 ]
	# the name is free again, and a new create has its own single controller
	run -0 pisb create "$n"
	run -0 pisb exec "$n" -- true
	run -0 pisb destroy "$n" --confirm "$n"
}

@test "an instance directory replaced under a running controller: the old controller stops, the new sandbox runs" {
	require_userns
	n=$(uname_ m)
	run -0 pisb create "$n"
	ids "$n"
	old=$CTL
	mv "$S/instances/$n" "$BATS_TEST_TMPDIR/aside"
	run -0 pisb create "$n"
	gone "$old"
	run -0 pisb exec "$n" -- true
	rm -rf "$BATS_TEST_TMPDIR/aside"
	run -0 pisb destroy "$n" --confirm "$n"
}

# ---------- 4. cgroups ----------

@test "cgroups: destroy of a running sandbox, stop, and a killed create leave none; gc removes stale empty ones" {
	require_userns
	require_root
	for i in 1 2 3 4 5; do
		n=$(uname_ c)
		run -0 pisb create "$n"
		ids "$n"
		pisb exec "$n" --timeout-ms 0 --sh 'sleep 1000 & sleep 1000' >/dev/null
		run -0 pisb destroy "$n" --confirm "$n"
		run -0 cgroups_of "$n"
		[ "$output" = 0 ]
	done
	n=$(uname_ c)
	run -0 pisb create "$n"
	run -0 pisb stop "$n"
	run -0 cgroups_of "$n"
	[ "$output" = 0 ]
	run -0 pisb destroy "$n" --confirm "$n"
	# a leftover of a crashed controller, empty and old; and a fresh one
	# (a start may be about to use it), which gc keeps
	stale=$(uname_ z).0badc0de
	fresh=$(uname_ z).0badc0df
	if [ "$(stat -f -c %T /sys/fs/cgroup)" = cgroup2fs ]; then
		bases=(/sys/fs/cgroup/pisb)
	else
		bases=(/sys/fs/cgroup/memory/pisb /sys/fs/cgroup/pids/pisb /sys/fs/cgroup/cpu/pisb)
	fi
	for b in "${bases[@]}"; do
		mkdir -p "$b/$stale" "$b/$fresh"
		touch -d '1 hour ago' "$b/$stale"
	done
	run -0 --separate-stderr pisb gc --json
	jq -e --arg c "pisb/$stale" '.cleaned[] | select(.kind == "cgroup" and .name == $c)' <<<"$output"
	run -0 cgroups_of "${stale%.*}"
	[ "$output" = 0 ]
	run -0 cgroups_of "${fresh%.*}"
	[ "$output" = "${#bases[@]}" ]
	for b in "${bases[@]}"; do rmdir "$b/$fresh"; done
}

# ---------- kill -9 at random points ----------

# checksums of every file of the sandbox's disk but those named in $2
disk_sums() {
	(cd "$S/instances/$1/disk/upper" && find . -type f ! -name '.*.pisb-*' -print0 | sort -z | xargs -0 -r sha256sum)
}

@test "kill -9 during write: the file holds the old or the new content, other files are untouched, leftovers go" {
	require_userns
	n=$(uname_ w)
	run -0 pisb create "$n"
	head -c 3000000 /dev/urandom >"$BATS_TEST_TMPDIR/new"
	printf 'old\n' | pisb write "$n" /workspace/f
	pisb write "$n" /workspace/other <"$BATS_TEST_TMPDIR/new"
	old=$(printf 'old\n' | sha256sum | cut -d' ' -f1)
	new=$(sha256sum <"$BATS_TEST_TMPDIR/new" | cut -d' ' -f1)
	before=$(disk_sums "$n" | grep -v ' ./workspace/f$')
	for t in 1 2 3 4 5 6; do
		# a slow source: the write is killed while it copies
		(cat "$BATS_TEST_TMPDIR/new"; sleep 5) | pisb write "$n" /workspace/f &
		w=$!
		sleep 0.$((RANDOM % 4))
		kill -9 $w 2>/dev/null || true
		wait $w 2>/dev/null || true
		got=$(pisb exec "$n" -- sha256sum /workspace/f | cut -d' ' -f1)
		[ "$got" = "$old" ] || [ "$got" = "$new" ]
		after=$(disk_sums "$n" | grep -v ' ./workspace/f$')
		[ "$after" = "$before" ]
	done
	# killed writes left temp files; a later write of the file removes them
	# (once they are a few seconds old and no writer holds them)
	sleep 3
	run -0 pisb exec "$n" --sh 'ls -A /workspace | grep -c "^\.f\.pisb-" || true'
	echo "leftovers before: $output"
	printf 'final\n' | pisb write "$n" /workspace/f
	run -0 pisb exec "$n" --sh 'ls -A /workspace | grep -c "^\.f\.pisb-" || true'
	[ "$output" = 0 ]
	run -0 pisb read "$n" /workspace/f --raw
	[ "$output" = final ]
}

@test "kill -9 at random points of create, start, stop and destroy: one command recovers, nothing leaks" {
	require_userns
	for t in 1 2 3 4 5 6; do
		n=$(uname_ k)
		case $((t % 3)) in
		0) verb=(create "$n") ;;
		1) pisb create "$n" >/dev/null; pisb stop "$n" >/dev/null; verb=(start "$n") ;;
		2) pisb create "$n" >/dev/null; verb=(destroy "$n" --confirm "$n") ;;
		esac
		pisb "${verb[@]}" >/dev/null 2>&1 &
		p=$!
		sleep 0.$((RANDOM % 5))
		kill -9 $p 2>/dev/null || true
		wait $p 2>/dev/null || true
		# whatever state it is in, the status never claims running without
		# a controller, and one destroy removes it
		if [ -d "$S/instances/$n" ]; then
			run -0 pisb list --json
			st=$(jq -r --arg n "$n" '.[] | select(.name == $n) | .status' <<<"$output")
			if [ "$st" = running ]; then
				run -0 pisb exec "$n" -- true
			fi
			CTL=$(jq -r '.controller.pid // 0' "$S/instances/$n/status.json" 2>/dev/null || echo 0)
			INIT=$(jq -r '.init.pid // 0' "$S/instances/$n/status.json" 2>/dev/null || echo 0)
			run -0 --separate-stderr pisb destroy "$n" --confirm "$n" --wait=30
		else
			CTL=0 INIT=0
		fi
		run -0 pisb gc
		[ "$CTL" = 0 ] || gone "$CTL"
		[ "$INIT" = 0 ] || gone "$INIT"
		[ ! -e "$S/instances/$n" ]
		run -0 sh -c "pgrep -f 'supervise $n --state-dir $S( --notify-fd [0-9]+)?\$' | wc -l"
		[ "$output" = 0 ]
		run -0 sh -c "ls -A '$S/trash' 2>/dev/null | wc -l"
		[ "$output" = 0 ]
	done
}

# ---------- storms ----------

@test "parallel create, destroy and start of one name: at most one controller, a consistent state" {
	require_userns
	n=$(uname_ p)
	for i in $(seq 12); do
		case $((i % 3)) in
		0) pisb create "$n" >/dev/null 2>&1 & ;;
		1) pisb destroy "$n" --confirm "$n" >/dev/null 2>&1 & ;;
		2) pisb start "$n" >/dev/null 2>&1 & ;;
		esac
	done
	wait
	run -0 sh -c "pgrep -f 'supervise $n --state-dir $S( --notify-fd [0-9]+)?\$' | wc -l"
	ctls=$output
	[ "$ctls" -le 1 ]
	if [ -d "$S/instances/$n" ]; then
		run -0 pisb inspect "$n"
		st=$(jq -r .status <<<"$output")
		if [ "$st" = running ]; then
			[ "$ctls" = 1 ]
			run -0 pisb exec "$n" -- true
		else
			[ "$ctls" = 0 ]
		fi
		run -0 pisb destroy "$n" --confirm "$n"
	else
		[ "$ctls" = 0 ]
	fi
	run -0 sh -c "pgrep -f 'supervise $n --state-dir $S( --notify-fd [0-9]+)?\$' | wc -l"
	[ "$output" = 0 ]
}

@test "two creates of one name: the one that loses the publishing rename ends the controller it had begun, which leaves no cgroup" {
	require_userns
	n=$(uname_ w)
	t=$BATS_TEST_TMPDIR/trace
	# the first stops itself once its staged files are synced: its
	# controller has its lock, record and cgroup in the staged directory
	PISB_TRACE=$t PISB_TRACE_STOP='create: staged files synced' pisb create "$n" -q \
		>"$BATS_TEST_TMPDIR/a.out" 2>"$BATS_TEST_TMPDIR/a.err" 3>&- &
	bg=$!
	pid=$(stopped_at "$t" "create: staged files synced")
	# told before the flush, the controller may take its turn after it
	loser=$(marked_by "$t" "controller: staged")
	[ -n "$loser" ]
	[ -d "/proc/$loser" ]
	# it boots beside the flush: its init runs
	for i in $(seq 200); do grep -q "^pisb-trace [0-9]* $loser controller: booted\$" "$t" && break; sleep 0.05; done
	init=$(pgrep -P "$loser" -x pisb-init)
	[ -n "$init" ]
	if [ "$(id -u)" = 0 ]; then
		run -0 cgroups_of "$n"
		[ "$output" -ge 1 ]
	fi
	# the second publishes first
	run -0 pisb create "$n" -q
	kill -CONT "$pid"
	rc=0
	wait "$bg" || rc=$?
	[ "$rc" = 4 ]
	grep -q "sandbox '$n' already exists" "$BATS_TEST_TMPDIR/a.err"
	# the first's controller is gone (it undid its cgroup first), its
	# staged directory too; the winner runs with its own cgroup only
	gone "$loser"
	gone "$init"
	run -0 sh -c "ls '$S/staging' | grep -c '^$n\\.' || true"
	[ "$output" = 0 ]
	gen=$(pisb inspect "$n" | jq -r .controller.generation)
	if [ "$(id -u)" = 0 ]; then
		run -0 cgroups_of "$n"
		total=$output
		run -0 cgroups_of "$n" "$gen"
		[ "$total" = "$output" ]
		[ "$total" -ge 1 ]
	fi
	run -0 pisb exec "$n" -- echo ran
	[ "$output" = ran ]
	run -0 pisb destroy "$n" --confirm "$n"
	run -0 cgroups_of "$n"
	[ "$output" = 0 ]
}

@test "a create's controller boots beside the create's flush, but runs no setup hook before the sandbox is published" {
	require_userns
	n=$(uname_ h)
	t=$BATS_TEST_TMPDIR/trace
	printf 'setup:\n  - echo ran > /workspace/setup-mark\n' > "$BATS_TEST_TMPDIR/s.yaml"
	PISB_TRACE=$t PISB_TRACE_STOP='create: staged files synced' pisb create "$n" -q -f "$BATS_TEST_TMPDIR/s.yaml" \
		>"$BATS_TEST_TMPDIR/out" 2>&1 3>&- &
	bg=$!
	pid=$(stopped_at "$t" "create: staged files synced")
	ctl=$(marked_by "$t" "controller: staged")
	[ -n "$ctl" ]
	for i in $(seq 200); do grep -q "^pisb-trace [0-9]* $ctl controller: booted\$" "$t" && break; sleep 0.05; done
	grep -q "^pisb-trace [0-9]* $ctl controller: booted\$" "$t"
	# booted, unpublished: no setup ran, no control socket, no sandbox
	sleep 0.3
	run -0 sh -c "ls -d '$S'/staging/$n.*/disk/upper/workspace"
	[ ! -e "$output/setup-mark" ]
	[ ! -e "$S/instances/$n" ]
	run -1 grep -q "$ctl controller: told to begin" "$t"
	kill -CONT "$pid"
	wait "$bg"
	run -0 pisb exec "$n" -- cat /workspace/setup-mark
	[ "$output" = ran ]
	run -0 pisb destroy "$n" --confirm "$n"
}

@test "20 parallel execs all run, each with its own output" {
	require_userns
	n=$(uname_ x)
	run -0 pisb create "$n"
	for i in $(seq 20); do
		pisb exec "$n" --sh "echo run-$i" >"$BATS_TEST_TMPDIR/o$i" 2>&1 &
	done
	wait
	for i in $(seq 20); do
		[ "$(cat "$BATS_TEST_TMPDIR/o$i")" = "run-$i" ]
	done
}

@test "stop during a streaming exec: stop succeeds, the exec ends, the sandbox is stopped" {
	require_userns
	n=$(uname_ y)
	run -0 pisb create "$n"
	pisb exec "$n" --sh 'while :; do echo tick; sleep 0.1; done' >"$BATS_TEST_TMPDIR/stream" 2>&1 &
	x=$!
	sleep 1
	run -0 pisb stop "$n"
	for i in $(seq 100); do kill -0 $x 2>/dev/null || break; sleep 0.05; done
	run ! kill -0 $x
	grep -q tick "$BATS_TEST_TMPDIR/stream"
	run -0 pisb inspect "$n"
	jq -e '.status == "stopped"' <<<"$output"
}

@test "concurrent exec-status and exec-kill on one handle: each line goes to exactly one caller" {
	require_userns
	n=$(uname_ h)
	run -0 pisb create "$n"
	run -0 --separate-stderr pisb exec "$n" --timeout-ms 0 --json --sh 'i=0; while [ $i -lt 1500 ]; do echo line-$i; i=$((i+1)); done; sleep 0.5'
	h=$(jq -r .pid <<<"$output")
	# exec's own answer already holds the output so far
	jq -j .output <<<"$output" >"$BATS_TEST_TMPDIR/c0"
	for c in $(seq 9); do
		(
			while :; do
				out=$(pisb exec-status "$n" "$h" --json) || exit 1
				jq -j .output <<<"$out" >>"$BATS_TEST_TMPDIR/c$c"
				[ "$(jq -r .running <<<"$out")" = false ] && exit 0
			done
		) &
	done
	wait
	pisb exec-kill "$n" "$h" --json | jq -j .output >>"$BATS_TEST_TMPDIR/c10"
	# each byte exactly once: all the callers' output together is the
	# command's output, byte for byte in count and, sorted, line for line
	expect=$(seq 0 1499 | sed 's/^/line-/' | wc -c)
	run -0 sh -c "cat '$BATS_TEST_TMPDIR'/c* | wc -c"
	[ "$output" = "$expect" ]
	run -0 sh -c "cat '$BATS_TEST_TMPDIR'/c* | tr -d '\n' | sed 's/line-/\n/g' | grep -c ."
	[ "$output" = 1500 ]
}

# ---------- 7, 8: inputs ----------

@test "pisb action: 100,000 nested arrays are refused at once, naming the depth bound; duplicate keys are refused by name" {
	python3 -c "print('['*100000 + ']'*100000)" >"$BATS_TEST_TMPDIR/deep"
	run -2 --separate-stderr pisb action - <"$BATS_TEST_TMPDIR/deep"
	jq -e '.error.message | test("nested deeper than 128 levels")' <<<"$output"
	python3 -c "print('{\"action\":\"list\",\"x\":' + '['*127 + ']'*127 + '}')" >"$BATS_TEST_TMPDIR/ok"
	run -2 --separate-stderr pisb action - <"$BATS_TEST_TMPDIR/ok"
	jq -e ".error.message == \"action 'list': unknown key 'x'\"" <<<"$output"
	run -2 --separate-stderr pisb action '{"action":"exec","name":"a","name":"b","command":"true"}'
	jq -e ".error.message == \"action: key 'name' is given twice\"" <<<"$output"
	run -2 --separate-stderr pisb action '{"action":"exec","name":"a","env":{"K":"1","K":"2"},"command":"true"}'
	jq -e ".error.message == \"action key 'env': variable 'K' is given twice\"" <<<"$output"
}

@test "a controller that cannot be executed: create fails at once naming it and why, and leaves nothing" {
	n=$(uname_ x)
	bad=$BATS_TEST_TMPDIR/bad
	mkdir -p "$bad"
	# executable, but no program: execve says ENOEXEC
	printf 'not a program\n' >"$bad/pisb-svc"
	chmod 755 "$bad/pisb-svc"
	# pisb-create spawns pisb-svc's controller, found in PISB_EXEC_PATH first
	PISB_EXEC_PATH=$bad run -1 "$PISB_BIN_DIR/pisb-create" create "$n"
	[[ "$output" == *"could not start '$bad/pisb-svc': Exec format error"* ]]
	[ ! -e "$S/instances/$n" ]
	run -0 sh -c "ls -A '$S/staging' 2>/dev/null | grep -c . || true"
	[ "$output" = 0 ]
	run -0 cgroups_of "$n"
	[ "$output" = 0 ]
}
