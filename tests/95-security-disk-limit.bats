#!/usr/bin/env bats
# #18 item 6: diskGiB enforced by the local driver as root (the disk on an
# ext4 image of its own, loop-mounted while the sandbox runs): writing past
# it fails with ENOSPC inside, and the host filesystem gives no more than
# the image's size.
load helpers

setup() {
	pisb_test_setup
	require_userns
	require_root
	require_cmd jq
	require_cmd mkfs.ext4
	[ -e /dev/loop-control ] || skip "machine lacks: loop devices (/dev/loop-control)"
}

teardown() {
	for n in $(pisb list -q 2>/dev/null); do pisb destroy "$n" --confirm "$n" >/dev/null 2>&1 || true; done
	if [ -n "${OWN_FS:-}" ]; then umount "$OWN_FS" 2>/dev/null || umount -l "$OWN_FS" 2>/dev/null || true; fi
}

used_kib() { df -k --output=used "$PI_SANDBOX_HOME" | tail -1 | tr -d ' '; }

@test "attack: writing past diskGiB fails with ENOSPC inside; the host gives at most the image" {
	# the state dir on a filesystem of its own, so that what the host gave
	# is measured with df, whatever the suites beside this one write
	OWN_FS=$BATS_TEST_TMPDIR/fs
	mkdir -p "$OWN_FS"
	mount -t tmpfs -o size=3g,mode=0755 tmpfs "$OWN_FS"
	export PI_SANDBOX_HOME=$OWN_FS/state
	printf 'diskGiB: 2\n' > "$BATS_TEST_TMPDIR/d.yaml"
	PISB_TRACE=$BATS_TEST_TMPDIR/trace run -0 pisb create dk -f "$BATS_TEST_TMPDIR/d.yaml"
	# the disk image is mounted before the boot: the namespaces made
	# ahead hold a copy of the mounts from before it, the boot makes its own
	run -1 grep -q 'namespaces made ahead' "$BATS_TEST_TMPDIR/trace"
	grep -q 'boot: init ready' "$BATS_TEST_TMPDIR/trace"
	img=$PI_SANDBOX_HOME/instances/dk/disk.img
	[ "$(stat -c %s "$img")" = $((2 << 30)) ]
	run -0 pisb inspect dk
	jq -e '.limits.diskGiB == 2 and .limits.enforced.disk == true' <<<"$output"
	before=$(used_kib)
	# 3 GiB into the workspace, then into the root filesystem
	run -1 pisb exec dk --sh 'dd if=/dev/zero of=/workspace/big bs=1M count=3072'
	[[ $output == *"No space left on device"* ]]
	run -1 pisb exec dk --sh 'dd if=/dev/zero of=/root/big bs=1M count=64'
	[[ $output == *"No space left on device"* ]]
	after=$(used_kib)
	# what the host gave: at most the image (plus a little filesystem slack)
	[ $((after - before)) -le $(((2 << 20) + 65536)) ]
	[ "$(du -k "$img" | cut -f1)" -le $(((2 << 20) + 1024)) ]
	# nothing of it landed beside the image
	[ -z "$(find "$PI_SANDBOX_HOME/instances/dk" -xdev -name big)" ]
	# space freed inside is usable again, and the limit holds across a restart
	run -0 pisb exec dk --sh 'rm /workspace/big /root/big; echo kept > /workspace/k'
	run -0 pisb stop dk
	[ -z "$(grep " $PI_SANDBOX_HOME/instances/dk/disk " /proc/mounts)" ]
	run -0 pisb start dk
	run -0 pisb exec dk -- cat /workspace/k
	[ "$output" = kept ]
	run -1 pisb exec dk --sh 'dd if=/dev/zero of=/workspace/big bs=1M count=3072'
	[[ $output == *"No space left on device"* ]]
	# the mount is nosuid, nodev on the host side
	grep " $PI_SANDBOX_HOME/instances/dk/disk ext4 " /proc/mounts | grep -q nosuid
	run -0 pisb destroy dk --confirm dk
	[ ! -e "$img" ]
	[ -z "$(grep " $PI_SANDBOX_HOME/instances/dk/disk " /proc/mounts)" ]
}

@test "without diskGiB the disk stays a directory, reported as not enforced" {
	run -0 pisb create plain
	[ ! -e "$PI_SANDBOX_HOME/instances/plain/disk.img" ]
	run -0 pisb inspect plain
	jq -e '.limits.enforced.disk == false' <<<"$output"
}

@test "a diskGiB create from cron's PATH (/usr/bin:/bin, no sbin) finds mkfs.ext4; without one it says what is missing" {
	printf 'diskGiB: 2\n' > "$BATS_TEST_TMPDIR/d.yaml"
	p=$(command -v pisb)
	PATH=/usr/bin:/bin run -0 "$p" create cron -f "$BATS_TEST_TMPDIR/d.yaml"
	run -0 pisb inspect cron
	jq -e '.limits.enforced.disk == true' <<<"$output"
	# no mkfs.ext4 anywhere pisb looks: a PATH of an empty directory, and
	# /usr/sbin and /sbin hidden in a mount namespace of the test's own
	mkdir "$BATS_TEST_TMPDIR/empty"
	run -1 unshare -m --propagation private sh -c 'mount -t tmpfs tmpfs /usr/sbin && { [ -L /sbin ] || mount -t tmpfs tmpfs /sbin; } && PATH="$0" exec "$1" create nomkfs -f "$2"' \
		"$BATS_TEST_TMPDIR/empty" "$p" "$BATS_TEST_TMPDIR/d.yaml"
	[[ $output == *"diskGiB: no mkfs.ext4 in PATH, /usr/sbin or /sbin"*"install e2fsprogs"* ]]
	[ ! -e "$PI_SANDBOX_HOME/instances/nomkfs" ]
}

# Start `pisb create NAME -f $BATS_TEST_TMPDIR/d.yaml` in the background,
# stopped (PISB_TRACE_STOP) at the create's step "create: disk", when its
# disk image is mounted in staging/; kill it with SIGKILL there.  Sets MNT
# to the mount it left.
kill_create_at_disk() {
	t=$BATS_TEST_TMPDIR/trace.$1
	PISB_TRACE=$t PISB_TRACE_STOP='create: disk' pisb create "$1" -f "$BATS_TEST_TMPDIR/d.yaml" -q 3>&- &
	bg=$!
	pid=$(stopped_at "$t" "create: disk")
	MNT=$(awk -v p="$PI_SANDBOX_HOME/staging/$1." 'index($2, p) == 1 && $3 == "ext4" { print $2 }' /proc/mounts)
	[ -n "$MNT" ]
	kill -9 "$pid"
	wait "$bg" || true
	# SIGKILL ran no cleanup: the image stays mounted
	grep -q " $MNT ext4 " /proc/mounts
}

@test "fault: a create killed with its disk image mounted: the next create unmounts and removes it" {
	printf 'diskGiB: 2\n' > "$BATS_TEST_TMPDIR/d.yaml"
	kill_create_at_disk k1
	run -0 pisb create k2 -f "$BATS_TEST_TMPDIR/d.yaml"
	run -1 grep -q " $MNT " /proc/mounts
	[ ! -e "${MNT%/disk}" ]
	# the killed one's name is free again
	run -0 pisb create k1 -f "$BATS_TEST_TMPDIR/d.yaml"
	run -0 pisb exec k1 -- true
}

@test "fault: pisb gc unmounts and removes a killed create's mounted staging entry, whatever its age" {
	printf 'diskGiB: 2\n' > "$BATS_TEST_TMPDIR/d.yaml"
	kill_create_at_disk g1
	stage=${MNT%/disk}
	run -0 --separate-stderr pisb gc --dry-run --json
	jq -e --arg n "staging/${stage##*/}" '.cleaned[] | select(.name == $n) | .reason | test("left mounted")' <<<"$output"
	grep -q " $MNT ext4 " /proc/mounts
	run -0 --separate-stderr pisb gc --json
	jq -e --arg n "staging/${stage##*/}" '.cleaned[] | select(.name == $n) | .reason | test("left mounted")' <<<"$output"
	run -1 grep -q " $MNT " /proc/mounts
	[ ! -e "$stage" ]
	# the loop device went with the mount (autoclear): none is left on the image
	run -1 grep -q "$stage/disk.img" <(losetup -a 2>/dev/null)
}

# the disk limit inside sandbox $1: a write past 2 GiB fails; $2: the file
# the template's setup left there is readable
assert_disk_limited() {
	[ -f "$PI_SANDBOX_HOME/instances/$1/disk.img" ]
	[ "$(stat -c %s "$PI_SANDBOX_HOME/instances/$1/disk.img")" = $((2 << 30)) ]
	run -0 pisb inspect "$1"
	jq -e '.limits.diskGiB == 2 and .limits.enforced.disk == true' <<<"$output"
	run -0 pisb exec "$1" -- cat /root/from-template
	[ "$output" = "$2" ]
	run -1 pisb exec "$1" --sh 'dd if=/dev/zero of=/workspace/big bs=1M count=3072'
	[[ $output == *"No space left on device"* ]]
	[ -z "$(find "$PI_SANDBOX_HOME/instances/$1" -xdev -name big)" ]
}

@test "attack: a sandbox made from a template gets the diskGiB limit of a direct create" {
	printf 'diskGiB: 2\n' > "$BATS_TEST_TMPDIR/d.yaml"
	# a template prepared without diskGiB: its disk is a directory
	printf 'setup:\n  - "echo plain > /root/from-template"\n' > "$BATS_TEST_TMPDIR/p.yaml"
	run -0 pisb prepare plain -f "$BATS_TEST_TMPDIR/p.yaml"
	[ ! -e "$PI_SANDBOX_HOME/templates/plain/disk.img" ]
	run -0 pisb create fromplain --template plain -f "$BATS_TEST_TMPDIR/d.yaml"
	assert_disk_limited fromplain plain
	# a template prepared with diskGiB: setup ran on an image, which is kept
	printf 'diskGiB: 2\nsetup:\n  - "echo sized > /root/from-template"\n' > "$BATS_TEST_TMPDIR/s.yaml"
	run -0 pisb prepare sized -f "$BATS_TEST_TMPDIR/s.yaml"
	[ "$(stat -c %s "$PI_SANDBOX_HOME/templates/sized/disk.img")" = $((2 << 30)) ]
	run -1 grep -q " $PI_SANDBOX_HOME/templates/sized/" /proc/mounts
	run -0 pisb create fromsized --template sized -f "$BATS_TEST_TMPDIR/d.yaml"
	assert_disk_limited fromsized sized
	# of another size: a fresh image of the size asked, the tree copied in
	printf 'diskGiB: 3\n' > "$BATS_TEST_TMPDIR/d3.yaml"
	run -0 pisb create fromsized3 --template sized -f "$BATS_TEST_TMPDIR/d3.yaml"
	[ "$(stat -c %s "$PI_SANDBOX_HOME/instances/fromsized3/disk.img")" = $((3 << 30)) ]
	run -0 pisb exec fromsized3 -- cat /root/from-template
	[ "$output" = sized ]
	# without diskGiB, as a direct create: a directory, not enforced
	run -0 pisb create fromsizeddir --template sized
	[ ! -e "$PI_SANDBOX_HOME/instances/fromsizeddir/disk.img" ]
	run -0 pisb inspect fromsizeddir
	jq -e '.limits.enforced.disk == false' <<<"$output"
	run -0 pisb exec fromsizeddir -- cat /root/from-template
	[ "$output" = sized ]
	# the copies are each sandbox's own: the template's image is untouched
	# and nothing of it stays mounted
	run -0 pisb exec fromsized --sh 'echo changed > /root/from-template'
	run -0 pisb create again --template sized
	run -0 pisb exec again -- cat /root/from-template
	[ "$output" = sized ]
	run -1 grep -q "template-disk" /proc/mounts
	run -1 grep -q " $PI_SANDBOX_HOME/staging/" /proc/mounts
	run -0 pisb destroy sized --confirm sized --template
	run -0 pisb destroy plain --confirm plain --template
}

# kill sandbox $1's controller with SIGKILL; its disk image stays mounted
kill_controller() {
	pid=$(pisb inspect "$1" | jq -r .controller.pid)
	kill -9 "$pid"
	for i in $(seq 300); do
		[ "$(pisb inspect "$1" | jq -r .status)" = interrupted ] && break
		sleep 0.1
	done
	[ "$(pisb inspect "$1" | jq -r .status)" = interrupted ]
	grep -q " $PI_SANDBOX_HOME/instances/$1/disk ext4 " /proc/mounts
}

@test "fault: a controller killed with its disk image mounted: destroy detaches it; gc clears a trash entry left mounted" {
	printf 'diskGiB: 2\n' > "$BATS_TEST_TMPDIR/d.yaml"
	run -0 pisb create c1 -f "$BATS_TEST_TMPDIR/d.yaml"
	kill_controller c1
	run -0 pisb destroy c1 --confirm c1
	run -1 grep -q " $PI_SANDBOX_HOME/instances/c1/disk " /proc/mounts
	run -1 grep -q " $PI_SANDBOX_HOME/trash/" /proc/mounts
	[ -z "$(ls -A "$PI_SANDBOX_HOME/trash" 2>/dev/null)" ]
	# what a destroy before this fix left: the instance in the trash, its
	# image still mounted there, its destroying process gone
	run -0 pisb create c2 -f "$BATS_TEST_TMPDIR/d.yaml"
	kill_controller c2
	dead=$(sh -c 'echo $$')
	t=trash/instances-c2-$dead-$(date +%s%3N)
	mkdir -p "$PI_SANDBOX_HOME/trash"
	mv "$PI_SANDBOX_HOME/instances/c2" "$PI_SANDBOX_HOME/$t"
	grep -q " $PI_SANDBOX_HOME/$t/disk ext4 " /proc/mounts
	# its cgroups too are left (the killed controller did not remove them)
	rel=$(jq -r .cgroup "$PI_SANDBOX_HOME/$t/status.json")
	[[ "$rel" == pisb/c2.* ]]
	[ -n "$(cgroup_dirs "$rel")" ]
	run -0 --separate-stderr pisb gc --json
	jq -e --arg n "$t" '.cleaned[] | select(.name == $n)' <<<"$output"
	run -1 grep -q " $PI_SANDBOX_HOME/$t/" /proc/mounts
	[ ! -e "$PI_SANDBOX_HOME/$t" ]
	# gc removed them with the entry, at once (its sweep of empty cgroups
	# leaves those younger than a minute: a booting sandbox's)
	[ -z "$(cgroup_dirs "$rel")" ]
}

@test "fault: a controller killed with its disk image mounted: stop detaches it, and start mounts it once" {
	printf 'diskGiB: 2\n' > "$BATS_TEST_TMPDIR/d.yaml"
	run -0 pisb create c3 -f "$BATS_TEST_TMPDIR/d.yaml"
	run -0 pisb exec c3 --sh 'echo kept > /workspace/k'
	kill_controller c3
	grep -q " $PI_SANDBOX_HOME/instances/c3/disk ext4 " /proc/mounts
	run -0 pisb stop c3
	run -1 grep -q " $PI_SANDBOX_HOME/instances/c3/disk " /proc/mounts
	run -0 pisb start c3
	[ "$(grep -c " $PI_SANDBOX_HOME/instances/c3/disk " /proc/mounts)" = 1 ]
	run -0 pisb exec c3 -- cat /workspace/k
	[ "$output" = kept ]
	run -0 pisb destroy c3 --confirm c3
	run -1 grep -q " $PI_SANDBOX_HOME/instances/c3/disk " /proc/mounts
}
