#!/usr/bin/env bats
# #18 item 8: every sandbox (and template) root creates has a host id range
# of its own (drivers/local/ns.c pisb_ids_alloc), recorded in its record,
# freed on destroy, allocated host-wide (/var/lib/pisb, whatever the state
# dir; the state dir's own registry when that is read-only); a process of
# one sandbox that escaped to the host, as its host uid, can neither signal
# nor ptrace another sandbox's processes nor read its files.
# The tests use a registry of their own (PISB_ID_REGISTRY), so that the
# suites running beside them as root take no range they expect.
load helpers

setup() {
	pisb_test_setup
	require_userns
	require_root
	require_cmd jq
	require_cmd setpriv
	export PISB_ID_REGISTRY="$BATS_TEST_TMPDIR/reg"
	REG=$PISB_ID_REGISTRY
}

teardown() {
	if [ -n "${X:-}" ]; then rm -rf "$X"; fi
	for n in $(pisb list -q 2>/dev/null); do pisb destroy "$n" --confirm "$n" >/dev/null 2>&1 || true; done
	for n in $(pisb list --templates -q 2>/dev/null); do pisb destroy "$n" --confirm "$n" --template >/dev/null 2>&1 || true; done
}

base() { jq -r .uidBase "$PI_SANDBOX_HOME/$1/record.json"; }
# run as host uid/gid $1 with no groups: what an escaped process of that
# sandbox would be
as() { local u=$1; shift; setpriv --reuid="$u" --regid="$u" --clear-groups "$@"; }

@test "two sandboxes get distinct, non-overlapping ranges, recorded and freed on destroy" {
	run -0 pisb create a
	run -0 pisb create b
	ua=$(base instances/a) ub=$(base instances/b)
	[ "$ua" -ge 1000065536 ]
	[ "$ub" -ge 1000065536 ]
	[ "$ua" != "$ub" ]
	d=$((ua > ub ? ua - ub : ub - ua))
	[ "$d" -ge 65536 ]
	# what the kernel maps, and what pisb reports
	run -0 pisb exec a -- cat /proc/self/uid_map
	[ "$(echo $output)" = "0 $ua 65536" ]
	run -0 pisb exec b -- cat /proc/self/uid_map
	[ "$(echo $output)" = "0 $ub 65536" ]
	[ "$(cut -d' ' -f1,4 "$REG/idranges/$ua")" = "a $PI_SANDBOX_HOME" ]
	# files written inside belong to the range outside
	run -0 pisb exec a --sh 'echo secret-a > /root/s; chmod 600 /root/s'
	[ "$(stat -c %u:%g "$PI_SANDBOX_HOME/instances/a/disk/upper/root/s")" = "$ua:$ua" ]
	# destroy frees the range, and the next create takes it again
	run -0 pisb destroy a --confirm a
	[ ! -e "$REG/idranges/$ua" ]
	run -0 pisb create c
	[ "$(base instances/c)" = "$ua" ]
	[ -e "$REG/idranges/$ub" ]
}

@test "attack: a process of sandbox A, as A's host uid, cannot signal, ptrace or read sandbox B" {
	run -0 pisb create a
	run -0 pisb create b
	ua=$(base instances/a) ub=$(base instances/b)
	run -0 pisb exec b --sh 'echo secret-b > /root/s; chmod 600 /root/s; setsid sleep 600 </dev/null >/dev/null 2>&1 &'
	pid=
	for _ in $(seq 100); do
		pid=$(ps -eo pid=,uid=,args= | awk -v u="$ub" '$2 == u && $3 == "sleep" && $4 == 600 { print $1; exit }')
		[ -n "$pid" ] && break
		sleep 0.1
	done
	[ -n "$pid" ]
	# B's process runs as B's host uid
	[ "$(ps -o uid= -p "$pid" | tr -d ' ')" = "$ub" ]
	# A's uid: no signal, no ptrace (its /proc/PID/mem and root)
	run -1 as "$ua" kill -0 "$pid"
	[[ $output == *"Operation not permitted"* ]]
	run -1 as "$ua" cat "/proc/$pid/environ"
	[[ $output == *"Permission denied"* ]]
	run -2 as "$ua" ls "/proc/$pid/root/"
	[[ $output == *"Permission denied"* ]]
	# B's file, hard-linked where every uid can reach it (the state
	# directory is root's alone): only its owner decides who reads it
	X=$(mktemp -d /tmp/pisb-91.XXXXXX)
	chmod 755 "$X"
	ln "$PI_SANDBOX_HOME/instances/b/disk/upper/root/s" "$X/s"
	run -1 as "$ua" cat "$X/s"
	[[ $output == *"Permission denied"* ]]
	[[ $output != *secret-b* ]]
	# nor writable, nor can A take it over
	run -2 as "$ua" sh -c "echo pwned > '$X/s'"
	[[ $output == *"Permission denied"* ]]
	run -1 as "$ua" chmod 666 "$X/s"
	[[ $output == *"Operation not permitted"* ]]
	[ "$(stat -c %a "$X/s")" = 600 ]
	# control: B's own uid can (the test would catch a broken setup)
	run -0 as "$ub" cat "$X/s"
	[ "$output" = secret-b ]
	run -0 as "$ub" kill -0 "$pid"
	run -0 pisb exec b -- cat /root/s
	[ "$output" = secret-b ]
}

# acl.py set PATH XATTR UID GID: an ACL naming user UID (r) and group GID (w);
# acl.py get PATH XATTR: its named entries, "user:ID group:ID" (no acl
# tools on the machine: the xattr's own layout, version 2 then entries of
# tag, permissions, id)
acl_py() {
	cat <<-'EOF'
	import os, struct, sys
	op, path, name = sys.argv[1:4]
	if op == "set":
	    u, g = int(sys.argv[4]), int(sys.argv[5])
	    e = [(0x01, 6, 0xffffffff), (0x02, 4, u), (0x04, 4, 0xffffffff),
	         (0x08, 2, g), (0x10, 6, 0xffffffff), (0x20, 4, 0xffffffff)]
	    os.setxattr(path, name, struct.pack("<I", 2) + b"".join(struct.pack("<HHI", *x) for x in e))
	else:
	    a = os.getxattr(path, name)
	    out = []
	    for off in range(4, len(a), 8):
	        tag, perm, i = struct.unpack_from("<HHI", a, off)
	        if tag in (0x02, 0x08):
	            out.append(("user:" if tag == 0x02 else "group:") + str(i))
	    print(" ".join(out))
	EOF
}

@test "a template's range is its own; a sandbox made from it gets another, files shifted with setuid bits, file capabilities and ACLs" {
	require_cmd setcap
	cat > "$BATS_TEST_TMPDIR/t.yaml" <<-'EOF'
	setup:
	  - "echo from-template > /root/f; chmod 600 /root/f; cp /bin/true /root/suid; chmod 4755 /root/suid; cp /bin/true /root/capped; setcap cap_net_raw+ep /root/capped"
	  - "touch /root/acl; mkdir /root/dacl"
	EOF
	run -0 pisb prepare t -f "$BATS_TEST_TMPDIR/t.yaml"
	ut=$(base templates/t)
	# ACLs naming user 1234 and group 2345 of the template, as setfacl
	# inside would have written them (host ids of its range)
	acl_py > "$BATS_TEST_TMPDIR/acl.py"
	tr=$PI_SANDBOX_HOME/templates/t/disk/upper/root
	python3 "$BATS_TEST_TMPDIR/acl.py" set "$tr/acl" system.posix_acl_access $((ut + 1234)) $((ut + 2345))
	python3 "$BATS_TEST_TMPDIR/acl.py" set "$tr/dacl" system.posix_acl_default $((ut + 1234)) $((ut + 2345))
	[ "$(stat -c %u "$PI_SANDBOX_HOME/templates/t/disk/upper/root/f")" = "$ut" ]
	run -0 pisb create s --template t
	us=$(base instances/s)
	[ "$us" != "$ut" ]
	u=$PI_SANDBOX_HOME/instances/s/disk/upper/root
	[ "$(stat -c %u:%g "$u/f")" = "$us:$us" ]
	[ "$(stat -c %u:%g "$u/suid")" = "$us:$us" ]
	# nothing of the copy is left in the template's range
	[ -z "$(find "$PI_SANDBOX_HOME/instances/s/disk" -uid "$ut" -o -gid "$ut" | head -1)" ]
	run -0 pisb exec s --sh 'cat /root/f; stat -c %a:%u /root/suid; getcap /root/capped'
	[ "${lines[0]}" = from-template ]
	[ "${lines[1]}" = 4755:0 ]
	[[ ${lines[2]} == *"cap_net_raw"*"ep"* ]]
	# POSIX ACL entries naming a user or group moved too: inside the copy
	# they name the same ids as in the template, on the host ids of its range
	run -0 python3 "$BATS_TEST_TMPDIR/acl.py" get "$u/acl" system.posix_acl_access
	[ "$output" = "user:$((us + 1234)) group:$((us + 2345))" ]
	run -0 python3 "$BATS_TEST_TMPDIR/acl.py" get "$u/dacl" system.posix_acl_default
	[ "$output" = "user:$((us + 1234)) group:$((us + 2345))" ]
	run -0 pisb exec s -- python3 -c "$(cat "$BATS_TEST_TMPDIR/acl.py")" get /root/acl system.posix_acl_access
	[ "$output" = "user:1234 group:2345" ]
	# the template's files stay in its range
	[ "$(stat -c %u "$PI_SANDBOX_HOME/templates/t/disk/upper/root/f")" = "$ut" ]
	run -0 python3 "$BATS_TEST_TMPDIR/acl.py" get "$PI_SANDBOX_HOME/templates/t/disk/upper/root/acl" system.posix_acl_access
	[ "$output" = "user:$((ut + 1234)) group:$((ut + 2345))" ]
	run -0 pisb destroy t --confirm t --template
	[ ! -e "$REG/idranges/$ut" ]
}

@test "a stale range (its creator died before any record claimed it) is left to pisb gc while a range without an entry is free; gc removes it" {
	mkdir -p "$PI_SANDBOX_HOME/idranges" "$REG/idranges"
	chmod 700 "$PI_SANDBOX_HOME" "$PI_SANDBOX_HOME/idranges" "$REG" "$REG/idranges"
	# a dead allocator (pid 1's start time never matches 1) and no record:
	# in the state dir's own registry (from before the host-wide one) and
	# in the host-wide one (its state dir gone)
	echo "ghost 999999 1" > "$PI_SANDBOX_HOME/idranges/1000065536"
	echo "ghost 999999 1 $BATS_TEST_TMPDIR/gone" > "$REG/idranges/1000196608"
	# a live one (this shell) keeps its range, in either
	echo "busy $$ $(awk '{print $22}' /proc/$$/stat)" > "$PI_SANDBOX_HOME/idranges/1000131072"
	echo "busy2 $$ $(awk '{print $22}' /proc/$$/stat) /nowhere" > "$REG/idranges/1000262144"
	# a create takes the lowest range no entry names, and judges none
	run -0 pisb create a
	[ "$(base instances/a)" = 1000327680 ]
	[ -e "$PI_SANDBOX_HOME/idranges/1000065536" ]
	[ -e "$REG/idranges/1000196608" ]
	# a dry run names the two stale entries and removes nothing
	run -0 --separate-stderr pisb gc --dry-run --json
	# (the lowest range first)
	run -0 jq -r '[.cleaned[] | select(.kind == "idrange") | .name] | join(" ")' <<<"$output"
	[ "$output" = "$PI_SANDBOX_HOME/idranges/1000065536 $REG/idranges/1000196608" ]
	[ -e "$PI_SANDBOX_HOME/idranges/1000065536" ]
	[ -e "$REG/idranges/1000196608" ]
	run -0 --separate-stderr pisb gc --json
	# (the lowest range first)
	run -0 jq -r '[.cleaned[] | select(.kind == "idrange") | .name] | join(" ")' <<<"$output"
	[ "$output" = "$PI_SANDBOX_HOME/idranges/1000065536 $REG/idranges/1000196608" ]
	[ ! -e "$PI_SANDBOX_HOME/idranges/1000065536" ]
	[ ! -e "$REG/idranges/1000196608" ]
	# the live ones and the sandbox's stay
	[ "$(cut -d' ' -f1 "$PI_SANDBOX_HOME/idranges/1000131072")" = busy ]
	[ "$(cut -d' ' -f1 "$REG/idranges/1000262144")" = busy2 ]
	[ "$(cut -d' ' -f1 "$REG/idranges/1000327680")" = a ]
	# the freed ranges are the lowest again
	run -0 pisb create b
	[ "$(base instances/b)" = 1000065536 ]
	run -0 pisb create c
	[ "$(base instances/c)" = 1000196608 ]
	[ "$(cut -d' ' -f1 "$REG/idranges/1000065536")" = b ]
}

@test "when every range has an entry, a create takes the lowest stale one; with none stale it fails, naming the registry" {
	# from 4000000000 on there are 4499 ranges below 2^32 - 1: each gets
	# an entry that cannot be judged (empty: kept), but for two stale ones
	export PISB_UID_BASE=4000000000
	mkdir -p "$REG/idranges"
	chmod 700 "$REG" "$REG/idranges"
	seq 4000065536 65536 $((4294967295 - 65536)) | (cd "$REG/idranges" && xargs touch)
	[ "$(ls "$REG/idranges" | wc -l)" = 4499 ]
	g1=$((4000065536 + 1000 * 65536)) g2=$((4000065536 + 10 * 65536))
	echo "ghost 999999 1 $BATS_TEST_TMPDIR/gone" > "$REG/idranges/$g1"
	echo "ghost 999999 1 $BATS_TEST_TMPDIR/gone" > "$REG/idranges/$g2"
	run -0 pisb create a
	[ "$(base instances/a)" = "$g2" ]
	[ "$(cut -d' ' -f1 "$REG/idranges/$g2")" = a ]
	run -0 pisb create b
	[ "$(base instances/b)" = "$g1" ]
	run -1 --separate-stderr pisb create c
	[[ $stderr == *"no host id range is free (see '$REG/idranges')"* ]]
	[ ! -e "$PI_SANDBOX_HOME/instances/c" ]
	run -0 pisb exec a -- true
}

@test "two state dirs share the host-wide registry: disjoint ranges, each freed on destroy" {
	local s1="$BATS_TEST_TMPDIR/s1" s2="$BATS_TEST_TMPDIR/s2"
	run -0 pisb --state-dir "$s1" create a
	run -0 pisb --state-dir "$s2" create a
	run -0 pisb --state-dir "$s2" create b
	u1=$(jq -r .uidBase "$s1/instances/a/record.json")
	u2=$(jq -r .uidBase "$s2/instances/a/record.json")
	u3=$(jq -r .uidBase "$s2/instances/b/record.json")
	local x y
	for x in "$u1 $u2" "$u1 $u3" "$u2 $u3"; do
		read -r x y <<<"$x"
		[ $((x > y ? x - y : y - x)) -ge 65536 ]
	done
	[ "$(cut -d' ' -f1,4 "$REG/idranges/$u1")" = "a $s1" ]
	[ "$(cut -d' ' -f1,4 "$REG/idranges/$u2")" = "a $s2" ]
	# nothing in the state dirs' own registries
	[ -z "$(find "$s1/idranges" "$s2/idranges" -mindepth 1)" ]
	run -0 pisb --state-dir "$s1" exec a -- cat /proc/self/uid_map
	[ "$(echo $output)" = "0 $u1 65536" ]
	run -0 pisb --state-dir "$s1" destroy a --confirm a
	[ ! -e "$REG/idranges/$u1" ]
	[ -e "$REG/idranges/$u2" ]
	run -0 pisb --state-dir "$s2" destroy a --confirm a
	run -0 pisb --state-dir "$s2" destroy b --confirm b
	[ -z "$(ls -A "$REG/idranges")" ]
}

@test "by default the host-wide registry is /var/lib/pisb" {
	unset PISB_ID_REGISTRY
	run -0 pisb create dflt
	u=$(base instances/dflt)
	[ "$(cut -d' ' -f1,4 "/var/lib/pisb/idranges/$u")" = "dflt $PI_SANDBOX_HOME" ]
	[ "$(stat -c %a:%u /var/lib/pisb/idranges)" = 700:0 ]
	run -0 pisb destroy dflt --confirm dflt
	# freed: gone, or (the lowest free range is handed out first) already
	# another sandbox's, of a suite running beside this one
	f=/var/lib/pisb/idranges/$u
	[ ! -e "$f" ] || [ "$(cut -d' ' -f1,4 "$f")" != "dflt $PI_SANDBOX_HOME" ]
}

@test "where the host-wide registry cannot be written (a read-only /var/lib), the state dir keeps its own" {
	require_cmd unshare
	mkdir -p "$BATS_TEST_TMPDIR/ro"
	run -0 unshare -m --propagation private sh -c '
		mount -t tmpfs -o ro tmpfs "$1" && PISB_ID_REGISTRY="$1/reg" pisb create fb' sh "$BATS_TEST_TMPDIR/ro"
	u=$(base instances/fb)
	[ "$u" -ge 1000065536 ]
	[ "$(cut -d' ' -f1 "$PI_SANDBOX_HOME/idranges/$u")" = fb ]
	run -0 pisb exec fb -- cat /proc/self/uid_map
	[ "$(echo $output)" = "0 $u 65536" ]
	run -0 pisb destroy fb --confirm fb
	[ ! -e "$PI_SANDBOX_HOME/idranges/$u" ]
}

@test "a sandbox from before per-sandbox ranges (shared range) is found: inspect and doctor warn, verify fails root-mapping" {
	run -0 pisb create old
	run -0 pisb create new
	# make 'old' what a create before ranges left: no uidBase, its disk
	# owned by the shared range at PISB_UID_BASE
	run -0 pisb stop old
	uo=$(base instances/old)
	jq 'del(.uidBase)' "$PI_SANDBOX_HOME/instances/old/record.json" > "$BATS_TEST_TMPDIR/r.json"
	cp "$BATS_TEST_TMPDIR/r.json" "$PI_SANDBOX_HOME/instances/old/record.json"
	find "$PI_SANDBOX_HOME/instances/old/disk" -uid "$uo" -exec chown -h 1000000000 {} +
	find "$PI_SANDBOX_HOME/instances/old/disk" -gid "$uo" -exec chgrp -h 1000000000 {} +
	run -0 pisb start old
	run -0 pisb exec old -- cat /proc/self/uid_map
	[ "$(echo $output)" = "0 1000000000 65536" ]
	# inspect
	run -0 pisb inspect old
	jq -e '.local.idRange == {"uidBase": 1000000000, "count": 65536, "shared": true}' <<<"$output"
	run -0 pisb inspect new
	jq -e --argjson b "$(base instances/new)" '.local.idRange == {"uidBase": $b, "count": 65536, "shared": false}' <<<"$output"
	# doctor: a warning naming it (not the other), with how to migrate
	run -0 --separate-stderr pisb doctor --json
	jq -e '.checks[] | select(.check == "id-ranges") | .status == "warn"' <<<"$output"
	jq -e '.checks[] | select(.check == "id-ranges") | .detail | test("sandbox .old.") and (test("new") | not)' <<<"$output"
	jq -e '.checks[] | select(.check == "id-ranges") | .fix | test("pisb destroy NAME")' <<<"$output"
	# verify: root-mapping fails for it, passes for the other
	run -1 --separate-stderr pisb verify old --json
	jq -e '.checks[] | select(.check == "root-mapping") | .pass == false and (.evidence | test("shared by every sandbox"))' <<<"$output"
	run -0 --separate-stderr pisb verify new --json
	jq -e '.checks[] | select(.check == "root-mapping") | .pass == true' <<<"$output"
	# once recreated, doctor passes the check
	run -0 pisb destroy old --confirm old
	run -0 --separate-stderr pisb doctor --json
	jq -e '.checks[] | select(.check == "id-ranges") | .status == "pass"' <<<"$output"
}
