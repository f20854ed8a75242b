#!/usr/bin/env bats
# project.mode bind and bind-ro on the vm driver (issues #13, #14): the host
# project on a virtiofs share of its own (tag pisb-proj) at the guest's
# workspace.  Live both ways, bind-ro enforced on the host side, secrets and
# .git covered as on the local driver (tests/36), and the guest's root never
# host root: the attacks (setuid, mknod, chown 0, symlinks out, a rename
# over a mask) are tried from the guest and judged on the host.
# Two VMs for the file (setup_file): pb (bind, a project owned by uid 4242)
# and pr (bind-ro, a project owned by root).
load helpers

OWNER=4242

setup_file() {
	VP_TMP=$(mktemp -d /tmp/pisb-vp59.XXXXXX)
	chmod 755 "$VP_TMP"
	export VP_TMP PI_SANDBOX_HOME="$VP_TMP/state"
	[ -z "$(vm_prereqs)" ] || return 0
	make_project "$VP_TMP/rw"
	chown -hR "$OWNER:$OWNER" "$VP_TMP/rw"
	make_project "$VP_TMP/ro"
	echo "host canary" > "$VP_TMP/canary"
	printf 'version: 1\ndriver: vm\nresources: { cpus: 1, memoryGiB: 1 }\ndiskGiB: 2\nproject:\n  mode: bind\n' > "$VP_TMP/b.yaml"
	printf 'version: 1\ndriver: vm\nresources: { cpus: 1, memoryGiB: 1 }\ndiskGiB: 2\nproject:\n  mode: bind-ro\n' > "$VP_TMP/r.yaml"
	pisb create pb -f "$VP_TMP/b.yaml" --project "$VP_TMP/rw" > "$VP_TMP/create.out" 2> "$VP_TMP/create.err" ||
		echo "create failed: $?" >> "$VP_TMP/create.err"
	pisb create pr -f "$VP_TMP/r.yaml" --project "$VP_TMP/ro" >> "$VP_TMP/create.out" 2>> "$VP_TMP/create.err" ||
		echo "create failed (bind-ro): $?" >> "$VP_TMP/create.err"
}

teardown_file() {
	for n in pb pr ps px pt pa; do pisb destroy $n --confirm $n >/dev/null 2>&1 || true; done
	pisb destroy tp --template --confirm tp >/dev/null 2>&1 || true
	rm -rf "$VP_TMP"
}

setup() {
	pisb_test_setup
	export PI_SANDBOX_HOME="$VP_TMP/state"
	vm_suite_setup "$VP_TMP/create.err"
}

# a project with secrets (.env, a key, a .pem, a secret directory), a .git
# and symlinks that point out of it (absolute and by ..)
make_project() {
	mkdir -p "$1/sub" "$1/d.pem" "$1/.git/hooks"
	printf 'hi\n' > "$1/a.txt"
	printf 'TOKEN=host-secret\n' > "$1/.env"
	printf 'PRIVATE KEY\n' > "$1/sub/id_rsa"
	printf 'CERT\n' > "$1/server.pem"
	printf 'inside a secret dir\n' > "$1/d.pem/x"
	printf '[core]\n' > "$1/.git/config"
	ln -s "$VP_TMP/canary" "$1/out-abs"
	ln -s ../canary "$1/out-rel"
	ln -s ../../../../../../../.."$VP_TMP/canary" "$1/out-up"
	ln -s /etc/shadow "$1/shadow"
}

# what a guest stuck on its project looks like (for the log of a failure)
guest_dump() {
	timeout 60 pisb exec "$1" --sh 'for p in /proc/[0-9]*; do s=$(cat $p/stack 2>/dev/null | head -3 | tr "\n" " "); case "$s" in *fuse*) echo "$(cat $p/comm): $s";; esac; done' || true
	tail -5 "$PI_SANDBOX_HOME/instances/$1/project-virtiofsd.log" "$PI_SANDBOX_HOME/instances/$1/console.log" || true
}

# the project's owner edits a file of it on the host (this suite runs as
# root: the file is given to the owner, as the owner's editor would keep it)
owner_writes() {
	printf "$2" > "$1"
	chown "$OWNER:$OWNER" "$1"
}

# poll: run `pisb exec BOX -- CMD...` until its output is WANT (the host's
# edit reaches the guest once its cached attributes expire); the last
# output stays in $output for the caller's assertion
exec_until() {
	local box=$1 want=$2
	shift 2
	for _ in $(seq 1 60); do
		run pisb exec "$box" -- "$@"
		[ "$output" = "$want" ] && return 0
		sleep 0.5
	done
	return 0
}

@test "bind: create boots (snapshot path) with the project at the workspace, live both ways" {
	run -0 pisb inspect pb
	jq -e '.vm.boot == "snapshot"' <<<"$output"
	run -0 pisb exec pb -- sh -c 'pwd; cat a.txt; grep " /workspace " /proc/mounts | cut -d" " -f1,3'
	[ "$output" = "$(printf '/workspace\nhi\npisb-proj virtiofs')" ]
	# the guest's write is on the host at once
	run -0 pisb exec pb -- sh -c 'printf "from guest\n" > g.txt'
	[ "$(cat "$VP_TMP/rw/g.txt")" = "from guest" ]
	# the host's edit reaches the guest
	owner_writes "$VP_TMP/rw/h.txt" 'from host\n'
	exec_until pb "from host" cat h.txt
	[ "$output" = "from host" ]
	owner_writes "$VP_TMP/rw/g.txt" 'edited on host\n'
	exec_until pb "edited on host" cat g.txt
	[ "$output" = "edited on host" ]
	# the guest's root is the project's owner: its new files are the
	# owner's on the host, the owner's files root's in the guest
	run -0 stat -c %u:%g "$VP_TMP/rw/g.txt"
	[ "$output" = "$OWNER:$OWNER" ]
	run -0 pisb exec pb -- stat -c %u:%g a.txt
	[ "$output" = "0:0" ]
}

@test "bind and bind-ro: secrets are empty read-only files and directories the guest cannot uncover; .git is read-only" {
	for box in pb pr; do
		run -0 pisb exec "$box" -- sh -c 'wc -c < .env; wc -c < sub/id_rsa; wc -c < server.pem; ls -A d.pem | wc -l'
		[ "$output" = "$(printf '0\n0\n0\n0')" ]
		run -0 pisb exec "$box" -- sh -c 'umount .env 2>/dev/null; umount -l sub/id_rsa 2>/dev/null; wc -c < .env; wc -c < sub/id_rsa'
		[ "$output" = "$(printf '0\n0')" ]
		run -2 --separate-stderr pisb exec "$box" -- sh -c 'echo x > .env'
		[[ $stderr == *"Read-only file system"* ]]
		run -1 --separate-stderr pisb exec "$box" -- touch .git/hooks/pre-commit
		[[ $stderr == *"Read-only file system"* ]]
		# the .git itself is readable
		run -0 pisb exec "$box" -- cat .git/config
		[ "$output" = "[core]" ]
	done
	# a rename over a mask, or of a mask away, is refused (a mount point)
	run -0 pisb exec pb -- sh -c 'echo planted > p.txt'
	run -1 --separate-stderr pisb exec pb -- mv -f p.txt .env
	[[ $stderr == *"busy"* ]]
	run -1 --separate-stderr pisb exec pb -- mv .env moved
	[[ $stderr == *"busy"* ]]
	run -1 --separate-stderr pisb exec pb -- rm -rf d.pem
	[ "$(cat "$VP_TMP/rw/.env")" = "TOKEN=host-secret" ]
	[ "$(cat "$VP_TMP/rw/d.pem/x")" = "inside a secret dir" ]
	[ "$(cat "$VP_TMP/rw/sub/id_rsa")" = "PRIVATE KEY" ]
	[ ! -e "$VP_TMP/rw/moved" ]
	[ ! -e "$VP_TMP/rw/.git/hooks/pre-commit" ]
	[ ! -e "$VP_TMP/ro/.git/hooks/pre-commit" ]
}

@test "attack: the guest's root makes no setuid-root file, no device node and no root-owned file on the host" {
	run -0 pisb exec pb -- sh -c 'cp /bin/sh suid-sh && chmod 6755 suid-sh && stat -c %a suid-sh'
	[ "$output" = 6755 ]
	# the bits stick, but to the project's owner, never to host root
	run -0 stat -c %u:%g "$VP_TMP/rw/suid-sh"
	[ "$output" = "$OWNER:$OWNER" ]
	run -0 find "$VP_TMP/rw" -xdev \( -uid 0 -o -gid 0 \) -print
	[ "$output" = "" ]
	# no device node (virtiofsd has no CAP_MKNOD)
	run -1 --separate-stderr pisb exec pb -- mknod null-dev c 1 3
	[[ $stderr == *"Operation not permitted"* ]]
	run -1 --separate-stderr pisb exec pb -- mknod disk-dev b 8 0
	[ ! -e "$VP_TMP/rw/null-dev" ]
	[ ! -e "$VP_TMP/rw/disk-dev" ]
	# chown 0 gives the file to the owner; another id is not mapped
	run -0 pisb exec pb -- chown 0:0 a.txt
	run -0 stat -c %u:%g "$VP_TMP/rw/a.txt"
	[ "$output" = "$OWNER:$OWNER" ]
	run -1 --separate-stderr pisb exec pb -- chown 1000:1000 a.txt
	[[ $stderr == *"Value too large"* ]]
	run -0 stat -c %u:%g "$VP_TMP/rw/a.txt"
	[ "$output" = "$OWNER:$OWNER" ]
	# nothing in the project is a device, nor owned by root, after all that
	run -0 find "$VP_TMP/rw" -xdev \( -type b -o -type c -o -uid 0 -o -gid 0 \) -print
	[ "$output" = "" ]
	# no file capability: xattrs are off in the project's virtiofsd
	run -1 --separate-stderr pisb exec pb -- setcap cap_setuid+ep suid-sh
	run -0 getcap "$VP_TMP/rw/suid-sh"
	[ "$output" = "" ]
}

@test "attack: a symlink pointing out of the project resolves in the guest, never to the host's file" {
	for link in out-abs out-rel out-up; do
		run -1 --separate-stderr pisb exec pb -- cat "$link"
		[[ $stderr == *"No such file or directory"* ]]
		run -0 pisb exec pb -- readlink "$link"
		[ "$output" = "$(readlink "$VP_TMP/rw/$link")" ]
	done
	# /etc/shadow through a link is the guest's (masked, empty)
	run -0 pisb exec pb --sh 'wc -c < shadow'
	[ "$output" = 0 ]
	# a link the guest plants to a host path reads the guest's own tree
	run -0 pisb exec pb -- sh -c 'ln -s '"$VP_TMP"'/canary planted && { cat planted 2>/dev/null || echo unreadable; }'
	[ "$output" = unreadable ]
	# and nothing outside the project is in the guest
	run -1 pisb exec pb -- test -e "$VP_TMP/canary"
	run -1 pisb exec pb -- test -e "$VP_TMP/ro"
}

@test "bind-ro: writes fail, a guest remount read-write still cannot write (enforced on the host); host edits show" {
	run -0 stat -c %u "$VP_TMP/ro"
	[ "$output" = 0 ]
	run -2 --separate-stderr pisb exec pr -- sh -c 'echo x > a.txt'
	[[ $stderr == *"Read-only file system"* ]]
	# (bounded: a guest remount that hangs fails this test with the guest's
	# view of it, rather than the suite)
	run timeout 300 pisb exec pr --sh 'mount -o remount,rw /workspace && grep " /workspace " /proc/mounts | cut -d" " -f4 | cut -d, -f1'
	[ "$status" -eq 0 ] || guest_dump pr
	[ "$output" = rw ]
	run -2 --separate-stderr pisb exec pr -- sh -c 'echo x > a.txt'
	[[ $stderr == *"Read-only file system"* ]]
	run -1 --separate-stderr pisb exec pr -- touch new.txt
	[[ $stderr == *"Read-only file system"* ]]
	run -1 --separate-stderr pisb exec pr -- chmod 777 a.txt
	[[ $stderr == *"Read-only file system"* ]]
	run -1 pisb exec pr -- rm -f a.txt
	[ "$(cat "$VP_TMP/ro/a.txt")" = hi ]
	[ ! -e "$VP_TMP/ro/new.txt" ]
	run -0 stat -c %a "$VP_TMP/ro/a.txt"
	[ "$output" = 644 ]
	printf 'live\n' > "$VP_TMP/ro/h.txt"
	exec_until pr live cat h.txt
	[ "$output" = live ]
}

@test "diff, apply and sync: nothing to apply in bind and bind-ro modes (as on the local driver)" {
	run -1 --separate-stderr pisb diff pb
	[[ $stderr == *"nothing to apply (bind mode)"* ]]
	run -1 --separate-stderr pisb apply pb
	[[ $stderr == *"nothing to apply (bind mode)"* ]]
	run -1 --separate-stderr pisb sync pb
	[[ $stderr == *"nothing to apply (bind mode)"* ]]
	run -1 --separate-stderr pisb diff pr
	[[ $stderr == *"nothing to apply (bind-ro mode)"* ]]
	run -0 jq -r .mode "$PI_SANDBOX_HOME/instances/pb/project/info.json"
	[ "$output" = bind ]
}

@test "bind: a project owned by root is refused (2), nothing made; a missing one is 3" {
	mkdir -p "$BATS_TEST_TMPDIR/rootproj"
	run -2 --separate-stderr pisb create px -f "$VP_TMP/b.yaml" --project "$BATS_TEST_TMPDIR/rootproj"
	[[ $stderr == *"is owned by root"*"never as host root"* ]]
	[ ! -e "$PI_SANDBOX_HOME/instances/px" ]
	run -3 --separate-stderr pisb create px -f "$VP_TMP/b.yaml" --project "$BATS_TEST_TMPDIR/nosuch"
	[ ! -e "$PI_SANDBOX_HOME/instances/px" ]
}

@test "a project that cannot be served (sysfs: no idmapped mounts) fails create with the reason (5); nothing left, the boot snapshot kept" {
	snap=$(ls -d "$PI_SANDBOX_HOME"/vmsnap/1024m-1c-*)
	before=$(stat -c %i:%Y "$snap/inputs")
	run -5 --separate-stderr pisb create px -f "$VP_TMP/r.yaml" --project /sys/kernel/mm
	[[ $stderr == *"virtiofsd (the project '/sys/kernel/mm' for the guest) exited"*"idmapped mount"* ]]
	[ ! -e "$PI_SANDBOX_HOME/instances/px" ]
	run -1 pgrep -f "$PI_SANDBOX_HOME/instances/px/"
	[ "$(stat -c %i:%Y "$snap/inputs")" = "$before" ]
}

@test "bind: stop and a cold start keep the binding; a secret made while stopped is hidden; the guest writes again" {
	pisb stop pb
	owner_writes "$VP_TMP/rw/.env.local" 'NEW=secret\n'
	owner_writes "$VP_TMP/rw/b.txt" 'after stop\n'
	run -0 --separate-stderr env PISB_VM_SNAPSHOT=0 pisb start pb
	run -0 pisb inspect pb
	jq -e '.vm.boot == "cold"' <<<"$output"
	run -0 pisb exec pb -- sh -c 'cat b.txt; wc -c < .env.local; wc -c < .env'
	[ "$output" = "$(printf 'after stop\n0\n0')" ]
	run -0 pisb exec pb -- sh -c 'echo again > s.txt'
	[ "$(cat "$VP_TMP/rw/s.txt")" = again ]
	[ "$(cat "$VP_TMP/rw/.env.local")" = "NEW=secret" ]
}

# the pisb-watch that serves BOX's project (vm_project.c): the one with an
# fd on its view
vm_watch_pid() {
	local p
	for p in $(pgrep -x pisb-watch); do
		if ls -l "/proc/$p/fd" 2>/dev/null | grep -q "instances/$1/pview"; then echo "$p"; return; fi
	done
}

@test "bind: a secret or .git made on the host while the VM runs is covered (pisb-watch, in virtiofsd's namespace)" {
	[ -n "$(vm_watch_pid pb)" ]
	printf 'NEW=1\n' > "$VP_TMP/rw/tmp.n"
	mv "$VP_TMP/rw/tmp.n" "$VP_TMP/rw/.env.new"
	mkdir -p "$VP_TMP/rw/certs"
	printf 'KEY\n' > "$VP_TMP/rw/certs/x.pem"
	git init -q "$VP_TMP/rw/sub9"
	chown -hR "$OWNER:$OWNER" "$VP_TMP/rw/.env.new" "$VP_TMP/rw/certs" "$VP_TMP/rw/sub9"
	# empty in the guest (once its cached entry, if it looked before, expires)
	exec_until pb end sh -c 'cat .env.new certs/x.pem; echo end'
	[ "$output" = end ]
	exec_until pb ro sh -c 'touch sub9/.git/x 2>/dev/null && echo rw || echo ro'
	[ "$output" = ro ]
	# a mount on the host: nothing the guest does takes it off
	run -0 pisb exec pb -- sh -c 'umount -l .env.new 2>/dev/null; cat .env.new; echo end'
	[ "$output" = end ]
	[ "$(cat "$VP_TMP/rw/.env.new")" = "NEW=1" ]
}

@test "verify's project check: the host's secrets read in neither guest, pb's .git takes no write, pr takes no write at all" {
	run -0 --separate-stderr pisb verify pb --json
	jq -e '[.checks[].check] == ["host-files","host-env","network","host-share","project"]' <<<"$output"
	jq -e '.checks[] | select(.check == "project") | .pass and (.evidence | test("^bind: [4-9] secret files") and test("every .git read-only"))' <<<"$output"
	run -0 --separate-stderr pisb verify pr --json
	jq -e '.checks[] | select(.check == "project") | .pass and (.evidence | test("^bind-ro: [4-9] secret files") and test("the project read-only"))' <<<"$output"
}

@test "bind: project.secrets: include shows the secrets" {
	printf 'version: 1\ndriver: vm\nresources: { cpus: 1, memoryGiB: 1 }\ndiskGiB: 2\nproject:\n  mode: bind-ro\n  secrets: include\n' > "$BATS_TEST_TMPDIR/s.yaml"
	run_ok pisb create ps -f "$BATS_TEST_TMPDIR/s.yaml" --project "$VP_TMP/ro"
	run -0 pisb exec ps -- cat .env
	[ "$output" = "TOKEN=host-secret" ]
	run -0 --separate-stderr pisb verify ps --json
	jq -e '.checks[] | select(.check == "project") | .pass and (.evidence | test("inside by choice"))' <<<"$output"
	pisb destroy ps --confirm ps
}

@test "bind: the project's .agents/setup runs at create (a config without setup lines still looks for it)" {
	mkdir -p "$BATS_TEST_TMPDIR/ag/.agents"
	printf '#!/bin/sh\necho "ran in $(pwd)" > /root/agents-mark\n' > "$BATS_TEST_TMPDIR/ag/.agents/setup"
	chmod +x "$BATS_TEST_TMPDIR/ag/.agents/setup"
	chown -hR "$OWNER:$OWNER" "$BATS_TEST_TMPDIR/ag"
	run_ok pisb create pa -f "$VP_TMP/b.yaml" --project "$BATS_TEST_TMPDIR/ag"
	run -0 pisb exec pa -- cat /root/agents-mark
	[ "$output" = "ran in /workspace" ]
	pisb destroy pa --confirm pa
}

@test "create --template with bind: the copy's workspace is the project; its config stays off the host project" {
	command -v qemu-img >/dev/null || skip "machine lacks: qemu-img (install qemu-utils)"
	printf 'version: 1\ndriver: vm\nresources: { cpus: 1, memoryGiB: 1 }\ndiskGiB: 2\nsetup:\n  - echo from-template > /root/tfile\n' > "$BATS_TEST_TMPDIR/t.yaml"
	run_ok pisb prepare tp -f "$BATS_TEST_TMPDIR/t.yaml"
	run_ok pisb create pt --template tp -f "$VP_TMP/b.yaml" --project "$VP_TMP/rw"
	run -0 pisb exec pt -- sh -c 'cat /root/tfile; cat a.txt; wc -c < .env; echo from-copy > c.txt'
	[ "$output" = "$(printf 'from-template\nhi\n0')" ]
	[ "$(cat "$VP_TMP/rw/c.txt")" = from-copy ]
	run -0 stat -c %u:%g "$VP_TMP/rw/c.txt"
	[ "$output" = "$OWNER:$OWNER" ]
	[ ! -e "$VP_TMP/rw/.sandbox.yaml" ]
	pisb destroy pt --confirm pt
	pisb destroy tp --template --confirm tp
	[ "$(cat "$VP_TMP/rw/c.txt")" = from-copy ]
}

@test "destroy leaves the host project as it was, and no virtiofsd of the sandbox behind" {
	before=$(cd "$VP_TMP/rw" && find . -path ./.git -prune -o -type f -print0 | sort -z | xargs -0 sha256sum)
	run -0 pisb destroy pb --confirm pb
	after=$(cd "$VP_TMP/rw" && find . -path ./.git -prune -o -type f -print0 | sort -z | xargs -0 sha256sum)
	[ "$before" = "$after" ]
	[ "$(cat "$VP_TMP/rw/.env")" = "TOKEN=host-secret" ]
	[ ! -e "$PI_SANDBOX_HOME/instances/pb" ]
	run -1 pgrep -f "$PI_SANDBOX_HOME/instances/pb/"
	[ -z "$(vm_watch_pid pb)" ]
}
