#!/usr/bin/env bats
# pisb pool (drivers/local/pool.c): spare sandboxes of a config booted
# ahead; a create of that config takes one instead of booting, and is the
# same sandbox a booting create makes (name inside, record, id range,
# setup, services); spares that died are skipped and swept; pool 0 leaves
# nothing running.
load helpers

setup() {
	pisb_test_setup
	require_userns
	require_cmd jq
	# as root: a registry of host id ranges of the suite's own (the
	# suites beside it use the host-wide one)
	export PISB_ID_REGISTRY=$BATS_TEST_TMPDIR/reg
}

teardown() {
	# the unprivileged user's state dir (its test ends its pool first)
	if [ -n "${USER_ST:-}" ]; then
		as_user pisb --state-dir "$USER_ST/s" pool 0 >/dev/null 2>&1 || true
		rm -rf "$USER_ST"
	fi
	for n in $(pisb list -q 2>/dev/null); do pisb destroy "$n" --confirm "$n" >/dev/null 2>&1 || true; done
	for f in "$PI_SANDBOX_HOME"/pool/*.conf; do
		[ -e "$f" ] || continue
		file=$(sed -n 2p "$f")
		pisb pool 0 ${file:+-f "$file"} >/dev/null 2>&1 || true
	done
	# a replacement that a destroy above started waits for the pool's lock,
	# finds the pool ended and makes nothing: a process of this state dir
	# still running is a leak (killed, and the test fails)
	sleep 0.3
	if pgrep -f -- "--state-dir $PI_SANDBOX_HOME( |\$)" >/dev/null; then
		pgrep -af -- "--state-dir $PI_SANDBOX_HOME( |\$)"
		pkill -KILL -f -- "--state-dir $PI_SANDBOX_HOME( |\$)"
		return 1
	fi
}

# ready [ARGS...]: the spares ready in the only pool (pisb pool --json)
ready() { pisb pool --json | jq '.[0].ready // 0'; }
# wait_ready N: until the pool has N spares ready (20 s at most)
wait_ready() {
	for _ in $(seq 200); do
		[ "$(ready)" = "$1" ] && return 0
		sleep 0.1
	done
	echo "the pool has $(ready) spares ready, not $1"
	return 1
}
spare_inits() {
	for d in "$PI_SANDBOX_HOME"/pool/spare-*/; do jq -r .init.pid "$d/status.json"; done | sort
}

@test "pool N boots N spares; a create of that config takes one: its init, its name inside, a replacement after" {
	run_ok pisb pool 2
	[[ $stderr == "pool "*": 2 spare sandboxes of the default config booted" ]]
	run -0 pisb pool --json
	jq -e 'length == 1 and .[0].driver == "local" and .[0].spares == 2 and .[0].ready == 2 and .[0].file == null and (.[0].key | test("^[0-9a-f]{16}$"))' <<<"$output"
	run -0 pisb pool
	[[ ${lines[0]} == "POOL"*"DRIVER"*"SPARES"*"READY"*"FILE" ]]
	[[ ${lines[1]} == *" local "*" 2 "*" 2 "*"(the default config)" ]]
	inits=$(spare_inits)
	[ "$(wc -l <<<"$inits")" = 2 ]
	# nothing of a spare is listed, and nothing of the guest ran in it
	run -0 pisb list -q
	[ -z "$output" ]
	t=$BATS_TEST_TMPDIR/trace
	PISB_TRACE=$t run_ok pisb create a
	grep -q ' create: spare claimed$' "$t"
	grep -q ' create: spare published$' "$t"
	# no controller spawned, no boot
	run -1 grep -q -e ' create: controller spawned$' -e ' boot: ' "$t"
	init=$(jq -r .init.pid "$PI_SANDBOX_HOME/instances/a/status.json")
	grep -qx "$init" <<<"$inits"
	run -0 pisb exec a -- hostname
	[ "$output" = a ]
	run -0 pisb exec a -- cat /proc/sys/kernel/hostname
	[ "$output" = a ]
	run -0 pisb inspect a
	jq -e '.name == "a" and .status == "running" and .driver == "local"' <<<"$output"
	jq -e '.name == "a"' "$PI_SANDBOX_HOME/instances/a/record.json"
	[ ! -e "$PI_SANDBOX_HOME/instances/a/claim.sock" ]
	# its controller's command line names it as a create's would, not
	# the spare it was (ps, pgrep -f)
	ctl=$(jq -r .controller.pid "$PI_SANDBOX_HOME/instances/a/status.json")
	[ "$(ps -o args= -p "$ctl")" = "$(readlink -f "$PISB_BIN_DIR/pisb") supervise a --state-dir $PI_SANDBOX_HOME --notify-fd 3" ]
	run -1 grep -q spare /proc/"$ctl"/cmdline
	# the taken spare left the pool; a replacement comes a moment later
	[ "$(ls -d "$PI_SANDBOX_HOME"/pool/spare-* | wc -l)" -le 2 ]
	wait_ready 2
	run -0 pisb list -q
	[ "$output" = a ]
	# stop and start: a boot of its own, as any sandbox
	run -0 pisb stop a
	run -0 pisb start a
	run -0 pisb exec a -- hostname
	[ "$output" = a ]
	[ "$(jq -r .init.pid "$PI_SANDBOX_HOME/instances/a/status.json")" != "$init" ]
}

@test "a create of another config, or with --template or --project, boots: the pool keeps its spares" {
	run -0 pisb pool 1
	printf 'version: 1\nenv:\n  X: "1"\n' >"$BATS_TEST_TMPDIR/other.yaml"
	t=$BATS_TEST_TMPDIR/trace
	PISB_TRACE=$t run_ok pisb create o -f "$BATS_TEST_TMPDIR/other.yaml"
	grep -q ' create: controller spawned$' "$t"
	run -1 grep -q ' create: spare claimed$' "$t"
	mkdir -p "$BATS_TEST_TMPDIR/proj"
	echo hi >"$BATS_TEST_TMPDIR/proj/f"
	: >"$t"
	PISB_TRACE=$t run_ok pisb create p --project "$BATS_TEST_TMPDIR/proj"
	run -1 grep -q ' create: spare claimed$' "$t"
	run -0 pisb exec p -- cat /workspace/f
	[ "$output" = hi ]
	[ "$(ready)" = 1 ]
	# the same text in a file is the same config: -f of the default's
	# normalised form is another text, another key
	run -0 pisb pool --json
	jq -e 'length == 1' <<<"$output"
}

@test "a pool of a config with setup and a service: setup runs after the claim, as NAME; the service runs" {
	cat >"$BATS_TEST_TMPDIR/s.yaml" <<'EOF'
version: 1
setup:
  - hostname > /workspace/setup-host
services:
  web:
    command: sleep 1000
EOF
	run_ok pisb pool 1 -f "$BATS_TEST_TMPDIR/s.yaml"
	run -0 pisb pool --json
	jq -e --arg f "$BATS_TEST_TMPDIR/s.yaml" '.[0].file == $f and .[0].ready == 1' <<<"$output"
	sp=$(ls -d "$PI_SANDBOX_HOME"/pool/spare-*)
	# booted, waiting: no setup ran, no service started
	[ ! -e "$sp/disk/upper/workspace/setup-host" ]
	jq -e '.state == "spare"' "$sp/status.json"
	t=$BATS_TEST_TMPDIR/trace
	PISB_TRACE=$t run_ok pisb create s -f "$BATS_TEST_TMPDIR/s.yaml"
	grep -q ' create: spare claimed$' "$t"
	run -0 pisb exec s -- cat /workspace/setup-host
	[ "$output" = s ]
	# (not ready: sleep listens on no port, as for a create that boots)
	run -0 pisb inspect s
	jq -e '[.services[] | select(.name == "web")] | length == 1 and .[0].hostPid > 0 and .[0].pid > 0' <<<"$output"
	# the config a create without -f uses is another one: not served
	: >"$t"
	PISB_TRACE=$t run_ok pisb create d
	run -1 grep -q ' create: spare claimed$' "$t"
}

@test "a claimed spare's controller is found by its name, a long one too (pgrep -f)" {
	run_ok pisb pool 1
	long=n234567890123456789012345678901234567890
	[ "${#long}" = 40 ]
	run_ok pisb create "$long"
	ctl=$(jq -r .controller.pid "$PI_SANDBOX_HOME/instances/$long/status.json")
	[ "$(pgrep -f -- "supervise $long --state-dir $PI_SANDBOX_HOME( |\$)")" = "$ctl" ]
	run -1 grep -q spare /proc/"$ctl"/cmdline
}

@test "the create's --owner-pid and --session-id are the sandbox's, not the spare's" {
	run -0 pisb pool 1
	sleep 1000 &
	owner=$!
	run_ok pisb create o --owner-pid "$owner" --session-id sess-1
	jq -e --argjson p "$owner" '.owner.pid == $p and .sessionId == "sess-1" and .name == "o"' "$PI_SANDBOX_HOME/instances/o/record.json" ||
		{ cat "$PI_SANDBOX_HOME/instances/o/record.json"; false; }
	kill "$owner"
}

# one_spare: a pool of 1 spare; sp its name, sbase its host id range,
# whose entry names it
one_spare() {
	run -0 pisb pool 1
	sp=$(basename "$(ls -d "$PI_SANDBOX_HOME"/pool/spare-*)")
	sbase=$(jq -r .uidBase "$PI_SANDBOX_HOME/pool/$sp/record.json")
	[ "$(cut -d' ' -f1 "$PISB_ID_REGISTRY/idranges/$sbase")" = "$sp" ]
}

@test "root: a claimed spare's host id range is the sandbox's: no other create gets it, and its entry names it" {
	require_root
	one_spare
	run_ok pisb create a
	[ "$(jq -r .uidBase "$PI_SANDBOX_HOME/instances/a/record.json")" = "$sbase" ]
	# at once, before a's controller renamed the entry: the next create
	# (the pool is empty) gets another range
	run_ok pisb create b
	[ "$(jq -r .uidBase "$PI_SANDBOX_HOME/instances/b/record.json")" != "$sbase" ]
	run -0 pisb exec a -- cat /proc/self/uid_map
	[ "$(echo $output)" = "0 $sbase 65536" ]
	# a moment later the entry names the sandbox
	for _ in $(seq 100); do
		[ "$(cut -d' ' -f1 "$PISB_ID_REGISTRY/idranges/$sbase")" = a ] && break
		sleep 0.1
	done
	[ "$(cut -d' ' -f1 "$PISB_ID_REGISTRY/idranges/$sbase")" = a ]
	wait_ready 1
	# destroy frees it, as for any sandbox
	run -0 pisb destroy a --confirm a
	[ ! -e "$PISB_ID_REGISTRY/idranges/$sbase" ]
}

@test "pool 0 ends the pool: every spare stopped and removed, its cgroup and id range too" {
	run -0 pisb pool 2
	ctls=$(for d in "$PI_SANDBOX_HOME"/pool/spare-*/; do jq -r .controller.pid "$d/status.json"; done)
	inits=$(spare_inits)
	cgs=$(for d in "$PI_SANDBOX_HOME"/pool/spare-*/; do jq -r .cgroup "$d/status.json"; done)
	[ "$(wc -l <<<"$ctls")" = 2 ]
	run_ok pisb pool 0
	[[ $stderr == "pool "*": ended" ]]
	run -0 pisb pool --json
	[ "$output" = "[]" ]
	# (the pool's lock file stays: removed, a process waiting on it would
	# hold a lock of a file no one else sees)
	[ -z "$(find "$PI_SANDBOX_HOME/pool" -mindepth 1 -maxdepth 1 ! -name '*.lock' ! -name '*.log')" ]
	# exited (a zombie until pid 1, their parent, reaps them)
	for p in $ctls $inits; do
		for _ in $(seq 100); do [ "$(awk '{ print $3 }' "/proc/$p/stat" 2>/dev/null || echo gone)" != Z ] || break; sleep 0.05; done
		st=$(awk '{ print $3 }' "/proc/$p/stat" 2>/dev/null || echo gone)
		[ "$st" = gone ] || [ "$st" = Z ]
	done
	for c in $cgs; do
		[ -z "$(cgroup_dirs "$c")" ]
	done
	if [ "$(id -u)" = 0 ]; then
		run -1 grep -rl spare- "$PISB_ID_REGISTRY/idranges"
	fi
	# a create now boots
	t=$BATS_TEST_TMPDIR/trace
	PISB_TRACE=$t run_ok pisb create c
	grep -q ' create: controller spawned$' "$t"
}

@test "root: pool 0 frees a spare's host id range while the process that made it still runs (a refill that has not exited yet)" {
	require_root
	one_spare
	# what pool 0 found right after a claim: the refill that made the
	# spare had released the pool's lock and not yet exited.  Here its
	# entry names a process that lives on (this shell)
	echo "$sp $$ $(awk '{print $22}' /proc/$$/stat) $PI_SANDBOX_HOME" >"$PISB_ID_REGISTRY/idranges/$sbase"
	run -0 pisb pool 0
	run -0 pisb pool --json
	[ "$output" = "[]" ]
	[ ! -e "$PISB_ID_REGISTRY/idranges/$sbase" ]
	# and a create takes the range again (the lowest without an entry)
	run -0 pisb create a
	[ "$(jq -r .uidBase "$PI_SANDBOX_HOME/instances/a/record.json")" = "$sbase" ]
}

@test "fault: a spare killed -9 is skipped by a create, swept by pisb gc, and the pool fills again by itself" {
	run -0 pisb pool 1
	sp=$(ls -d "$PI_SANDBOX_HOME"/pool/spare-*)
	ctl=$(jq -r .controller.pid "$sp/status.json")
	init=$(jq -r .init.pid "$sp/status.json")
	kill -9 "$ctl"
	for _ in $(seq 100); do kill -0 "$init" 2>/dev/null || break; sleep 0.05; done
	run -1 kill -0 "$init"
	# a dry run only says so
	run -0 pisb gc --dry-run --json
	jq -e --arg s "pool/$(basename "$sp")" '.cleaned | any(.kind == "spare" and .name == $s)' <<<"$output"
	[ -d "$sp" ]
	# the create boots (the dead spare cannot answer), and starts a refill
	t=$BATS_TEST_TMPDIR/trace
	PISB_TRACE=$t run_ok pisb create x
	grep -q ' create: controller spawned$' "$t"
	run -0 pisb exec x -- hostname
	[ "$output" = x ]
	wait_ready 1
	# the dead one is gone (the refill's count removed it, as gc would)
	[ ! -d "$sp" ]
	run -0 pisb gc --json
	jq -e '[.cleaned[] | select(.kind == "spare")] | length == 0' <<<"$output"
}

@test "pisb gc removes a dead spare with its cgroup" {
	run -0 pisb pool 1
	sp=$(ls -d "$PI_SANDBOX_HOME"/pool/spare-*)
	cg=$(jq -r .cgroup "$sp/status.json")
	kill -9 "$(jq -r .controller.pid "$sp/status.json")"
	sleep 0.3
	run -0 pisb gc --json
	jq -e --arg s "pool/$(basename "$sp")" '.cleaned | any(.kind == "spare" and .name == $s)' <<<"$output"
	[ ! -d "$sp" ]
	[ -z "$(cgroup_dirs "$cg")" ]
}

@test "two creates at once, one spare: both run, under their own names, one of them from the pool" {
	run -0 pisb pool 1
	t=$BATS_TEST_TMPDIR/trace
	PISB_TRACE=$t.1 pisb create c1 -q & p1=$!
	PISB_TRACE=$t.2 pisb create c2 -q & p2=$!
	wait "$p1"
	wait "$p2"
	run -0 pisb exec c1 -- hostname
	[ "$output" = c1 ]
	run -0 pisb exec c2 -- hostname
	[ "$output" = c2 ]
	[ "$(cat "$t.1" "$t.2" | grep -c ' create: spare claimed$')" = 1 ]
	i1=$(jq -r .init.pid "$PI_SANDBOX_HOME/instances/c1/status.json")
	i2=$(jq -r .init.pid "$PI_SANDBOX_HOME/instances/c2/status.json")
	[ "$i1" != "$i2" ]
}

@test "a create of a name that exists fails as without a pool (exit 4); the spare stays" {
	run -0 pisb create a
	run -0 pisb pool 1
	sp=$(ls -d "$PI_SANDBOX_HOME"/pool/spare-*)
	run -4 pisb create a
	[[ $output == *"sandbox 'a' already exists"* ]]
	[ -d "$sp" ]
	[ "$(ready)" = 1 ]
}

@test "usage: N outside 0-64 or not a number exits 2; a driver without pools exits 1 saying why" {
	run -2 --separate-stderr pisb pool 65
	[ "$stderr" = "fatal: pool: N must be a number from 0 to 64, not '65'" ]
	run -2 --separate-stderr pisb pool two
	[ "$stderr" = "fatal: pool: N must be a number from 0 to 64, not 'two'" ]
	run -2 pisb pool 1 2
	run -0 pisb drivers --json
	why=$(jq -r '.drivers[] | select(.name == "vm") | .verbs.pool.why' <<<"$output")
	[ -n "$why" ]
	run -1 --separate-stderr pisb pool 1 --driver vm
	[ "$stderr" = "fatal: the vm driver cannot 'pool': $why; see pisb drivers" ]
	run -3 pisb pool 1 -f "$BATS_TEST_TMPDIR/missing.yaml"
	[ ! -e "$PI_SANDBOX_HOME/pool" ] || [ -z "$(ls "$PI_SANDBOX_HOME/pool")" ]
}

@test "as an unprivileged user: a pool, a create from it (its name inside), pool 0" {
	st=$(mktemp -d /tmp/pisb-user.XXXXXX); USER_ST=$st
	chown pisbtest "$st" 2>/dev/null || skip "machine lacks: the test user pisbtest"
	run -0 as_user pisb --state-dir "$st/s" pool 1
	run -0 as_user env PISB_TRACE="$st/trace" pisb --state-dir "$st/s" create u1
	grep -q ' create: spare claimed$' "$st/trace"
	run -0 as_user pisb --state-dir "$st/s" exec u1 -- sh -c 'hostname; id -u'
	[ "$output" = "$(printf 'u1\n0')" ]
	run -0 as_user pisb --state-dir "$st/s" destroy u1 --confirm u1
	run -0 as_user pisb --state-dir "$st/s" pool 0
	sleep 0.3
	run -1 pgrep -f -- "--state-dir $st/s( |\$)"
}

@test "a pool is kept per file: after an edit, pool N -f FILE ends the pool of its old text, pool 0 -f FILE ends both" {
	printf 'version: 1\n' >"$BATS_TEST_TMPDIR/c.yaml"
	run -0 pisb pool 1 -f "$BATS_TEST_TMPDIR/c.yaml"
	run -0 pisb pool 1
	run -0 pisb pool --json
	old=$(jq -r --arg f "$BATS_TEST_TMPDIR/c.yaml" '.[] | select(.file == $f) | .key' <<<"$output")
	oldsp=$(grep -l "$old" "$PI_SANDBOX_HOME"/pool/spare-*/pool.key | xargs dirname)
	# edited: creates of it no longer match the old spares
	printf 'version: 1\nenv:\n  A: "1"\n' >"$BATS_TEST_TMPDIR/c.yaml"
	t=$BATS_TEST_TMPDIR/trace
	PISB_TRACE=$t run_ok pisb create e1 -f "$BATS_TEST_TMPDIR/c.yaml"
	run -1 grep -q ' create: spare claimed$' "$t"
	run -0 pisb pool 1 -f "$BATS_TEST_TMPDIR/c.yaml"
	run -0 pisb pool --json
	jq -e --arg f "$BATS_TEST_TMPDIR/c.yaml" --arg old "$old" '[.[] | select(.file == $f)] | length == 1 and .[0].key != $old and .[0].ready == 1' <<<"$output"
	# the default config's pool is another file's: kept
	jq -e '[.[] | select(.file == null)] | length == 1 and .[0].ready == 1' <<<"$output"
	[ ! -e "$oldsp" ]
	: >"$t"
	PISB_TRACE=$t run_ok pisb create e2 -f "$BATS_TEST_TMPDIR/c.yaml"
	grep -q ' create: spare claimed$' "$t"
	run -0 pisb pool 0 -f "$BATS_TEST_TMPDIR/c.yaml"
	run -0 pisb pool --json
	jq -e 'length == 1 and .[0].file == null' <<<"$output"
}
