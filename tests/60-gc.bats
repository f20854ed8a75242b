#!/usr/bin/env bats
# pisb gc: each category is swept (dead owners, interrupted controllers,
# stale stopped sandboxes, orphaned handles, staging, trash, image caches,
# sbx leftovers); running and foreign sandboxes are left alone; --dry-run
# changes nothing; concurrent runs are safe.
load helpers

setup() {
	pisb_test_setup
	S=$PI_SANDBOX_HOME
	mkdir -p "$S"
	chmod 700 "$S"
	BGPIDS=()
}

teardown() {
	for p in "${BGPIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	for n in $(pisb list -q 2>/dev/null); do pisb destroy "$n" --confirm "$n" >/dev/null 2>&1 || true; done
}

# hold an flock on $1 in the background, in one process (the lock's fd is
# its own), with bats' fd 3 closed; sets HOLDER
hold_lock() {
	bash -c 'exec 9>"$0"; flock 9; exec sleep 1000' "$1" 3>&- &
	HOLDER=$!
	BGPIDS+=("$HOLDER")
	for i in $(seq 200); do
		[ -e "$1" ] && ! flock -n "$1" true 2>/dev/null && return 0
		sleep 0.02
	done
	return 1
}

# a pid that was just in use and is now surely gone
dead_pid() {
	sh -c 'echo $$'
}

# item L N [FILTER]: list L (removed|cleaned|kept) has one item
# {kind,name,reason} named N, and the jq FILTER is true of it; fails
# otherwise (a pipe into jq -e would pass on no input at all)
item() {
	jq -e --arg l "$1" --arg n "$2" '[.[$l][] | select(.name == $n)] | length == 1 and (.[0] | '"${3:-true}"')' <<<"$output"
}

# fake a record for a sandbox that lives elsewhere (driver $2, owner pid $3)
remote_record() {
	mkdir -p "$S/instances/$1"
	chmod 700 "$S/instances/$1"
	printf '{"version":1,"name":"%s","driver":"%s","createdAt":1,"template":null,"owner":{"pid":%s,"start":12345},"sessionId":null,"remote":null,"config":{"version":1}}\n' \
		"$1" "$2" "$3" > "$S/instances/$1/record.json"
}

@test "a session sandbox whose owner process is gone is stopped and destroyed; a live owner's stays" {
	require_userns
	sleep 1000 3>&- & owner=$!
	sleep 1000 3>&- & live=$!
	BGPIDS+=("$live")
	run -0 pisb create a --owner-pid "$owner"
	run -0 pisb create b --owner-pid "$live"
	run -0 pisb inspect a
	jq -e '.ownerPid == '"$owner"' and .ownerAlive' <<<"$output"
	kill "$owner"
	wait "$owner" 2>/dev/null || true
	run -0 --separate-stderr pisb gc --json
	item removed a '.kind == "sandbox" and (.reason | test("owner pid '"$owner"' is gone"))'
	item kept b '.reason == "running"'
	[ ! -e "$S/instances/a" ]
	run -0 pisb list -q
	[ "$output" = b ]
	run -0 pisb exec b -- true
	# the human form: one line per action
	kill "$live"
	wait "$live" 2>/dev/null || true
	run -0 --separate-stderr pisb gc
	[ "$output" = "removed sandbox 'b': owner pid $live is gone" ]
}

@test "an interrupted controller: the sandbox is marked stopped and its stale cgroup removed" {
	require_userns
	run -0 pisb create c
	ctl=$(jq .controller.pid "$S/instances/c/status.json")
	cg=$(jq -r '.cgroup // empty' "$S/instances/c/status.json")
	kill -9 "$ctl"
	for i in $(seq 100); do [ "$(pisb inspect c | jq -r .status)" = interrupted ] && break; sleep 0.05; done
	run -0 pisb inspect c
	jq -e '.status == "interrupted"' <<<"$output"
	run -0 --separate-stderr pisb gc --json
	item cleaned c '.kind == "sandbox" and (.reason | test("interrupted \\(last state .running.\\): marked stopped, its cgroup removed"))'
	jq -e '.removed == []' <<<"$output"
	run -0 pisb inspect c
	jq -e '.status == "stopped" and .stoppedAt != null' <<<"$output"
	if [ -n "$cg" ]; then
		run -0 sh -c "ls -d /sys/fs/cgroup/$cg /sys/fs/cgroup/*/$cg 2>/dev/null | wc -l"
		[ "$output" = 0 ]
	fi
	# its disk is intact: it starts again
	run -0 pisb start c
	run -0 pisb exec c -- true
}

@test "--hours removes sandboxes stopped for longer; without --hours stopped ones stay" {
	require_userns
	run -0 pisb create old
	run -0 pisb create recent
	run -0 pisb stop old
	run -0 pisb stop recent
	t=$(( $(date +%s) - 3 * 3600 ))
	jq --argjson t "$t" '.stoppedAt = $t' "$S/instances/old/status.json" > "$BATS_TEST_TMPDIR/st.json"
	cp "$BATS_TEST_TMPDIR/st.json" "$S/instances/old/status.json"
	run -0 --separate-stderr pisb gc --json
	item kept old '.reason == "stopped"'
	run -0 --separate-stderr pisb gc --hours 5 --json
	jq -e '.removed == []' <<<"$output"
	run -0 --separate-stderr pisb gc --hours 2 --json
	item removed old '.reason | test("stopped for 3 hours .since .*, more than --hours 2")'
	item kept recent
	[ ! -e "$S/instances/old" ]
	run -0 pisb list -q
	[ "$output" = recent ]
}

@test "orphaned exec handles: an earlier run's and a stopped sandbox's go, the current run's and a live runner's stay" {
	require_userns
	run -0 pisb create h
	run -0 pisb create s
	run -0 --separate-stderr pisb exec h --timeout-ms 5000 --json -- echo hi
	cur=$(jq -r .pid <<<"$output")
	mkdir -p "$S/instances/h/exec/00000000-deadbeef" "$S/instances/h/exec/00000000-11111111"
	echo old > "$S/instances/h/exec/00000000-deadbeef/output"
	# a runner of an earlier run that still holds its handle's lock
	hold_lock "$S/instances/h/exec/00000000-11111111/lock"
	run -0 pisb stop s
	mkdir -p "$S/instances/s/exec/abcdef01-00000001"
	run -0 --separate-stderr pisb gc --json
	item cleaned instances/h/exec/00000000-deadbeef '.kind == "handle" and (.reason | test("earlier run"))'
	item cleaned instances/s/exec/abcdef01-00000001 '.reason | test("stopped")'
	item kept instances/h/exec/00000000-11111111 '.reason | test("lock")'
	[ ! -e "$S/instances/h/exec/00000000-deadbeef" ]
	[ ! -e "$S/instances/s/exec/abcdef01-00000001" ]
	[ -d "$S/instances/h/exec/00000000-11111111" ]
	# the current run's handle still answers
	run -0 pisb exec-status h "$cur" --json
	jq -e '.exitCode == 0' <<<"$output"
}

@test "staging leftovers older than an hour go; fresh and in-use ones stay" {
	mkdir -p "$S/staging/x.1234abcd/disk" "$S/staging/y.5678abcd" "$S/staging/z.9999abcd"
	touch -d '2 hours ago' "$S/staging/x.1234abcd" "$S/staging/z.9999abcd"
	hold_lock "$S/staging/z.9999abcd/op.lock"
	touch -d '2 hours ago' "$S/staging/z.9999abcd"
	run -0 --separate-stderr pisb gc --json
	item cleaned staging/x.1234abcd '.kind == "staging" and (.reason | test("interrupted create"))'
	item kept staging/y.5678abcd '.reason | test("younger than 1 hour")'
	item kept staging/z.9999abcd '.reason | test("using it")'
	[ ! -e "$S/staging/x.1234abcd" ]
	[ -d "$S/staging/y.5678abcd" ]
	[ -d "$S/staging/z.9999abcd" ]
}

@test "trash leftovers of an interrupted destroy go; one still being removed, or whose controller runs, stays" {
	dead=$(dead_pid)
	now=$(( $(date +%s) * 1000 ))
	mkdir -p "$S/trash/instances-gone-$dead-1000/disk/upper" "$S/trash/instances-busy-$$-$now" \
		"$S/trash/instances-live-$dead-1000/disk/upper"
	hold_lock "$S/trash/instances-live-$dead-1000/controller.lock"
	run -0 --separate-stderr pisb gc --json
	item cleaned "trash/instances-gone-$dead-1000" '.kind == "trash"'
	item kept "trash/instances-busy-$$-$now" '.reason | test("still running")'
	item kept "trash/instances-live-$dead-1000" '.reason | test("controller still runs")'
	[ ! -e "$S/trash/instances-gone-$dead-1000" ]
	[ -d "$S/trash/instances-live-$dead-1000/disk/upper" ]
}

# a local record (no sandbox behind it) in $1 (instances/N or templates/N)
# whose config uses a rootfs image; $2 = its imageCache, or "" for a record
# written before records named their cache
local_record() {
	mkdir -p "$S/$1"
	jq -n --arg n "${1#*/}" --arg c "$2" '{version:1,name:$n,driver:"local",createdAt:1,template:null,owner:{pid:0,start:0},sessionId:null,remote:null}
		+ (if $c == "" then {} else {imageCache:$c} end) + {config:{version:1,image:"/srv/rootfs.tar"}}' > "$S/$1/record.json"
}

# a complete image cache images/$1 imported three hours ago
old_cache() {
	mkdir -p "$S/images/$1/rootfs/etc"
	echo ok > "$S/images/$1/complete"
	touch -d '3 hours ago' "$S/images/$1"
}

K1=1111111111111111111111111111111111111111111111111111111111111111
K2=2222222222222222222222222222222222222222222222222222222222222222
K3=3333333333333333333333333333333333333333333333333333333333333333

@test "image caches: unreferenced ones and dead imports go; referenced, fresh, in-use and importing ones and host skeletons stay" {
	mkdir -p "$S/images/host-1000000000/usr" "$S/images/fresh/rootfs"
	old_cache "$K1-1000"; old_cache "$K2-1000"; old_cache "$K3-1000"
	old_cache 0123abcd
	local_record instances/a "$K1-1000"
	local_record templates/t "$K2-1000"
	local_record staging/s.0000 "$K1-2000"
	old_cache "$K1-2000"
	remote_record keeper opensandbox 0
	# a process that uses a cache holds its lock shared
	bash -c 'exec 9>"$0"; flock -s 9; exec sleep 1000' "$S/images/$K3-1000.lock" 3>&- &
	BGPIDS+=($!)
	for i in $(seq 100); do ! flock -n "$S/images/$K3-1000.lock" true && break; sleep 0.02; done
	run -0 --separate-stderr pisb gc --dry-run --json
	item cleaned images/0123abcd '.kind == "image" and (.reason | test("unreferenced"))'
	[ -d "$S/images/0123abcd" ]
	run -0 --separate-stderr pisb gc --json
	item cleaned images/0123abcd '.reason | test("unreferenced")'
	item kept "images/$K1-1000" '.reason == "used by sandbox '\''a'\''"'
	item kept "images/$K2-1000" '.reason == "used by template '\''t'\''"'
	item kept "images/$K1-2000" '.reason == "used by the staged create '\''staging/s.0000'\''"'
	item kept "images/$K3-1000" '.reason | test("in use or being imported")'
	item kept images/fresh '.reason | test("younger than 1 hour")'
	item kept images/host-1000000000 '.kind == "image"'
	[ ! -e "$S/images/0123abcd" ]
	[ -f "$S/images/$K1-1000/complete" ]
	[ -f "$S/images/$K2-1000/complete" ]
	[ -f "$S/images/$K3-1000/complete" ]
	# a lock file is never removed (lock.h): only caches are listed
	run -1 jq -e '[.cleaned[], .kept[]] | map(.name) | any(endswith(".lock"))' <<<"$output"
	[ -e "$S/images/$K3-1000.lock" ]
	# an import in progress holds the lock exclusively (the shared holder
	# gone first: hold_lock takes a held lock for its own, and its flock
	# would take it later, when the last gc runs)
	kill "${BGPIDS[-1]}"
	wait "${BGPIDS[-1]}" 2>/dev/null || true
	hold_lock "$S/images/$K3-1000.lock"
	run -0 --separate-stderr pisb gc --json
	item kept "images/$K3-1000" '.reason | test("in use or being imported")'
	kill "$HOLDER"
	wait "$HOLDER" 2>/dev/null || true
	# nobody holds it any more, nobody references it: it goes
	run -0 --separate-stderr pisb gc --json
	item cleaned "images/$K3-1000"
	[ ! -e "$S/images/$K3-1000" ]
	# once the template is gone, so is its cache
	rm -rf "$S/templates/t"
	run -0 --separate-stderr pisb gc --json
	item cleaned "images/$K2-1000"
	item kept "images/$K1-1000"
	# an import whose process died before it published; one under way
	dead=$(printf '%x' "$(dead_pid)")
	mkdir -p "$S/images/.import-$K1-$dead/rootfs" "$S/images/.import-$K2-$(printf '%x' $$)/rootfs" \
		"$S/images/.import-$K3-$dead/rootfs"
	touch -d '3 hours ago' "$S/images/.import-$K1-$dead" "$S/images/.import-$K2-$(printf '%x' $$)"
	run -0 --separate-stderr pisb gc --json
	item cleaned "images/.import-$K1-$dead" '.reason | test("interrupted import")'
	item kept "images/.import-$K2-$(printf '%x' $$)" '.reason | test("under way")'
	item kept "images/.import-$K3-$dead" '.reason | test("younger than 1 hour")'
	[ ! -e "$S/images/.import-$K1-$dead" ]
	[ -d "$S/images/.import-$K3-$dead" ]
}

@test "image caches: a record from before imageCache that uses a rootfs image keeps every cache" {
	old_cache "$K1-1000"; old_cache "$K2-1000"
	local_record instances/new "$K1-1000"
	local_record instances/img ""
	run -0 --separate-stderr pisb gc --json
	item kept "images/$K1-1000" '.reason | test("used by sandbox")'
	item kept "images/$K2-1000" '.reason == "sandbox '\''img'\'' uses a rootfs image, but its record.json has no imageCache: every cache is kept"'
	[ -d "$S/images/$K2-1000" ]
	# an old-style record on image: host references nothing
	jq '.config.image = "host"' "$S/instances/img/record.json" > "$BATS_TEST_TMPDIR/r.json"
	cp "$BATS_TEST_TMPDIR/r.json" "$S/instances/img/record.json"
	run -0 --separate-stderr pisb gc --json
	item cleaned "images/$K2-1000" '.reason | test("unreferenced")'
	item kept "images/$K1-1000"
	[ ! -e "$S/images/$K2-1000" ]
}

@test "image caches: two images, two sandboxes; destroying one lets gc remove exactly its cache" {
	require_userns
	command -v busybox >/dev/null || skip "machine lacks: busybox (apt-get install busybox-static)"
	r="$BATS_TEST_TMPDIR/rootfs"
	mkdir -p "$r/bin" "$r/etc" "$r/root"
	cp "$(command -v busybox)" "$r/bin/busybox"
	for c in sh cat; do ln -s busybox "$r/bin/$c"; done
	for x in a b; do
		echo "image-$x" > "$r/etc/marker"
		tar --numeric-owner -C "$r" -czf "$BATS_TEST_TMPDIR/$x.tgz" .
		printf 'image: %s\n' "$BATS_TEST_TMPDIR/$x.tgz" > "$BATS_TEST_TMPDIR/$x.yaml"
	done
	run -0 pisb create one -f "$BATS_TEST_TMPDIR/a.yaml"
	run -0 pisb create two -f "$BATS_TEST_TMPDIR/b.yaml"
	run -0 pisb prepare tpl -f "$BATS_TEST_TMPDIR/b.yaml"
	c1=$(jq -r .imageCache "$S/instances/one/record.json")
	c2=$(jq -r .imageCache "$S/instances/two/record.json")
	c3=$(jq -r .imageCache "$S/templates/tpl/record.json")
	# image b: one KEY; as root, a copy per host id range (one for two,
	# one for tpl), else one cache for both
	[ "${c3%-*}" = "${c2%-*}" ]
	if [ "$(id -u)" = 0 ]; then [ "$c3" != "$c2" ]; else [ "$c3" = "$c2" ]; fi
	[[ $c1 =~ ^[0-9a-f]{64}-[0-9]+$ && $c2 =~ ^[0-9a-f]{64}-[0-9]+$ && $c1 != "$c2" ]]
	[ -f "$S/images/$c1/complete" ]
	[ -f "$S/images/$c2/complete" ]
	touch -d '3 hours ago' "$S/images/$c1" "$S/images/$c2" "$S/images/$c3"
	run -0 pisb destroy two --confirm two
	run -0 pisb stop one
	# the template still uses image b
	run -0 --separate-stderr pisb gc --json
	item kept "images/$c1" '.reason == "used by sandbox '\''one'\''"'
	item kept "images/$c3" '.reason == "used by template '\''tpl'\''"'
	if [ "$c3" != "$c2" ]; then
		# two's own copy went with it
		item cleaned "images/$c2" '.reason | test("unreferenced")'
		[ ! -e "$S/images/$c2" ]
		c2=$c3
	fi
	run -0 pisb destroy tpl --template --confirm tpl
	run -0 --separate-stderr pisb gc --dry-run --json
	item cleaned "images/$c2" '.reason | test("unreferenced")'
	[ -d "$S/images/$c2" ]
	run -0 --separate-stderr pisb gc
	[ "$output" = "cleaned image 'images/$c2': unreferenced: no sandbox or template uses it" ]
	[ ! -e "$S/images/$c2" ]
	[ -f "$S/images/$c1/complete" ]
	# the other sandbox still starts on its cache
	run -0 pisb start one
	run -0 pisb exec one -- cat /etc/marker
	[ "$output" = image-a ]
	# a running sandbox pins the cache it mounted, referenced or not
	jq 'del(.imageCache)' "$S/instances/one/record.json" > "$BATS_TEST_TMPDIR/r.json"
	jq '.config.image = "host"' "$BATS_TEST_TMPDIR/r.json" > "$S/instances/one/record.json"
	run -0 --separate-stderr pisb gc --json
	item kept "images/$c1" '.reason | test("in use")'
	[ -f "$S/images/$c1/complete" ]
	# a sandbox whose removal gc decides keeps nothing: its cache goes in the same pass
	cp "$BATS_TEST_TMPDIR/r.json" "$S/instances/one/record.json"
	run -0 pisb stop one
	jq '.stoppedAt = 1' "$S/instances/one/status.json" > "$BATS_TEST_TMPDIR/st.json"
	cp "$BATS_TEST_TMPDIR/st.json" "$S/instances/one/status.json"
	jq --arg c "$c1" '.imageCache = $c' "$BATS_TEST_TMPDIR/r.json" > "$S/instances/one/record.json"
	run -0 --separate-stderr pisb gc --hours 1 --json
	item removed one
	item cleaned "images/$c1"
	[ ! -e "$S/images/$c1" ]
}

@test "running sandboxes are untouched, whatever --hours says" {
	require_userns
	run -0 pisb create run1
	run -0 --separate-stderr pisb exec run1 --timeout-ms 0 --json -- sleep 30
	h=$(jq -r .pid <<<"$output")
	run -0 --separate-stderr pisb gc --hours 0 -v
	[ -z "$output" ]
	[[ $stderr == *"kept sandbox 'run1': running"* ]]
	run -0 pisb inspect run1
	jq -e '.status == "running"' <<<"$output"
	run -0 pisb exec-status run1 "$h" --json
	jq -e '.running == true' <<<"$output"
	run pisb exec-kill run1 "$h"
}

@test "sandboxes of other drivers: a dead owner is only reported, nothing is removed" {
	dead=$(dead_pid)
	remote_record far sbx "$dead"
	remote_record near sbx 0
	# opensandbox records are swept by that driver (tests/76); one it
	# cannot read is not touched
	remote_record odd opensandbox "$dead"
	run -0 --separate-stderr pisb gc --hours 0 --json
	item kept far '.reason | test("owner pid '"$dead"' is gone, but a sbx sandbox is released by its own driver")'
	item kept near '.reason | test("driver sbx")'
	item kept odd '.reason | test("not touched")'
	jq -e '.removed == [] and .cleaned == []' <<<"$output"
	[ -f "$S/instances/far/record.json" ]
	[ -f "$S/instances/near/record.json" ]
	[ -f "$S/instances/odd/record.json" ]
}

@test "--dry-run reports what it would do and changes nothing" {
	require_userns
	sleep 1000 3>&- & owner=$!
	run -0 pisb create dead1 --owner-pid "$owner"
	kill "$owner"; wait "$owner" 2>/dev/null || true
	run -0 pisb create intr
	kill -9 "$(jq .controller.pid "$S/instances/intr/status.json")"
	for i in $(seq 100); do [ "$(pisb inspect intr | jq -r .status)" = interrupted ] && break; sleep 0.05; done
	run -0 pisb create stale
	run -0 pisb stop stale
	jq '.stoppedAt = 1' "$S/instances/stale/status.json" > "$BATS_TEST_TMPDIR/st.json"
	cp "$BATS_TEST_TMPDIR/st.json" "$S/instances/stale/status.json"
	mkdir -p "$S/instances/stale/exec/00-11" "$S/staging/q.0000" "$S/trash/instances-t-$(dead_pid)-1"
	touch -d '2 hours ago' "$S/staging/q.0000"
	mkdir -p "$S/locks"
	snap() { (cd "$S" && find . -path ./locks -prune -o -printf '%p %s %T@\n' | sort); }
	before=$(snap)
	run -0 --separate-stderr pisb gc --hours 1 --dry-run --json
	jq -e '.dryRun == true' <<<"$output"
	item removed dead1
	item removed stale
	item cleaned intr
	item cleaned staging/q.0000
	[ "$(snap)" = "$before" ]
	run -0 pisb inspect intr
	jq -e '.status == "interrupted"' <<<"$output"
	# the human form says "would"
	run -0 --separate-stderr pisb gc --hours 1 --dry-run
	[[ $output == *"would remove sandbox 'dead1': owner pid $owner is gone"* ]]
	[[ $output == *"would clean staging 'staging/q.0000'"* ]]
	[ "$(snap)" = "$before" ]
	# and the real run does it
	run -0 --separate-stderr pisb gc --hours 1 --json
	item removed dead1
	item removed stale
	run -0 pisb list -q
	[ "$output" = intr ]
}

@test "concurrent gc runs are safe: a held lock makes gc do nothing and exit 0; parallel runs sweep each item once" {
	mkdir -p "$S/locks"
	hold_lock "$S/locks/gc.lock"
	for i in 1 2 3 4 5 6; do mkdir -p "$S/staging/old$i.0000/disk/upper/a/b"; touch -d '2 hours ago' "$S/staging/old$i.0000"; done
	run -0 --separate-stderr pisb gc --json
	jq -e '.busy == true and .cleaned == [] and .removed == []' <<<"$output"
	run -0 --separate-stderr pisb gc
	[[ $stderr == *"another pisb gc is running"* ]]
	[ -d "$S/staging/old1.0000" ]
	kill "$HOLDER"
	wait "$HOLDER" 2>/dev/null || true
	BGPIDS=()
	for i in 1 2 3 4; do pisb gc --json > "$BATS_TEST_TMPDIR/gc$i.json" 2>/dev/null 3>&- & BGPIDS+=($!); done
	for p in "${BGPIDS[@]}"; do wait "$p"; done
	BGPIDS=()
	n=$(cat "$BATS_TEST_TMPDIR"/gc[1-4].json | jq -s '[.[].cleaned[] | select(.kind == "staging")] | length')
	[ "$n" = 6 ]
	run -0 sh -c "ls '$S/staging' | wc -l"
	[ "$output" = 0 ]
}

@test "sbx leftovers: stopped pi-sbx-* of dead owners are removed with sbx rm, only when the sbx CLI exists" {
	run -0 --separate-stderr pisb gc -v --json
	jq -e '.note | test("sbx CLI not found")' <<<"$output"
	dead=$(dead_pid)
	mkdir -p "$BATS_TEST_TMPDIR/bin"
	cat > "$BATS_TEST_TMPDIR/bin/sbx" <<-EOF
	#!/bin/sh
	echo "\$* DOCKER_HOST=\${DOCKER_HOST:-unset}" >> "$BATS_TEST_TMPDIR/sbx.log"
	case "\$1" in
	ls) printf '%s\n' '{"sandboxes":[{"name":"pi-sbx-$dead-ab12","status":"stopped"},{"name":"pi-sbx-$dead-aa99","status":"stopped"},{"name":"pi-sbx-$$-cd34","status":"stopped"},{"name":"pi-sbx-$dead-ef56","status":"running"},{"name":"mine","status":"stopped"},{"name":"pi-sbx-myproj-1234abcd","status":"stopped"}]}' ;;
	rm) exit 0 ;;
	esac
	EOF
	chmod +x "$BATS_TEST_TMPDIR/bin/sbx"
	# a pisb sandbox of driver sbx (its owner gone, stopped by teardown
	# stop) is that sbx sandbox: pisb destroy removes it, not the sweep
	mkdir -p "$PI_SANDBOX_HOME/instances/kept"
	jq -n --arg s "pi-sbx-$dead-aa99" --argjson p "$dead" '{version:1,name:"kept",driver:"sbx",createdAt:1,template:null,owner:{pid:$p,start:1},sessionId:null,remote:{sbxName:$s,workspace:"/nowhere"},config:{version:1}}' \
		> "$PI_SANDBOX_HOME/instances/kept/record.json"
	PATH="$BATS_TEST_TMPDIR/bin:$PATH" DOCKER_HOST=tcp://203.0.113.1:2375 run -0 --separate-stderr pisb gc --dry-run --json
	item removed "pi-sbx-$dead-ab12" '.kind == "sbx"'
	[ "$(grep -c '^rm' "$BATS_TEST_TMPDIR/sbx.log")" = 0 ]
	PATH="$BATS_TEST_TMPDIR/bin:$PATH" DOCKER_HOST=tcp://203.0.113.1:2375 run -0 --separate-stderr pisb gc --json
	item removed "pi-sbx-$dead-ab12" '.reason | test("owner pid '"$dead"' is gone")'
	item kept "pi-sbx-$dead-aa99" '.reason | test("a pisb sandbox is this one")'
	item kept "pi-sbx-$$-cd34" '.reason | test("alive")'
	item kept "pi-sbx-$dead-ef56" '.reason | test("running")'
	item kept pi-sbx-myproj-1234abcd '.reason | test("not a session sandbox")'
	run -1 item kept mine
	[ "$(grep '^rm' "$BATS_TEST_TMPDIR/sbx.log")" = "rm --force pi-sbx-$dead-ab12 DOCKER_HOST=unset" ]
	# DOCKER_* never reaches the sbx CLI
	run -1 grep -v 'DOCKER_HOST=unset' "$BATS_TEST_TMPDIR/sbx.log"
}
