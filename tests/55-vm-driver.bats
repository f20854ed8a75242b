#!/usr/bin/env bats
# The vm driver with real VMs: QEMU (TCG when KVM does not work here), our
# initramfs and guest agent, a Debian kernel.  One VM serves the whole file
# (setup_file); stop/start and a killed QEMU boot it twice more.
load helpers

setup_file() {
	export PI_SANDBOX_HOME="$BATS_FILE_TMPDIR/state"
	[ -z "$(vm_prereqs)" ] || return 0
	mkdir -p "$BATS_FILE_TMPDIR"
	cat > "$BATS_FILE_TMPDIR/vm.yaml" <<-'EOF'
	version: 1
	driver: vm
	resources: { cpus: 2, memoryGiB: 1, pids: 64 }
	diskGiB: 2
	env: { FROM_CONFIG: yes-it-is }
	setup:
	  - echo setup-ran > /root/setup-mark
	  - echo setup-says-hello
	  - mkdir -p .agents && printf '#!/bin/sh\necho agents-ran > /root/agents-mark\nexec sleep 600\n' > .agents/setup && chmod +x .agents/setup
	resume:
	  - echo "resumed $(pwd) $FROM_CONFIG" >> /root/resume.log
	  - echo resume-says-failing; exit 3
	  - (sleep 700 &); echo "resumed again" >> /root/resume.log
	EOF
	echo "host secret" > "$BATS_FILE_TMPDIR/host-only-file"
	# .agents/setup sleeps past a setup deadline shortened from 20 minutes
	PISB_TRACE="$BATS_FILE_TMPDIR/trace" PISB_VM_SETUP_MS=60000 pisb create vm1 -f "$BATS_FILE_TMPDIR/vm.yaml" > "$BATS_FILE_TMPDIR/create.out" 2> "$BATS_FILE_TMPDIR/create.err" ||
		echo "create failed: $?" >> "$BATS_FILE_TMPDIR/create.err"
}

teardown_file() {
	pisb destroy vm1 --confirm vm1 >/dev/null 2>&1 || true
	# the template test's, should it have failed half-way
	for n in ta tb ia ib ic itc gco gcq vr; do pisb destroy $n --confirm $n >/dev/null 2>&1 || true; done
	for n in tv it; do pisb destroy $n --template --confirm $n >/dev/null 2>&1 || true; done
}

# The boot snapshot of vm1's size (vm.c: <state>/vmsnap/<MiB>m-<cpus>c-<accel>).
snapdir() {
	local d
	for d in "$PI_SANDBOX_HOME"/vmsnap/1024m-2c-*; do echo "$d"; done
}

setup() {
	export PI_SANDBOX_HOME="$BATS_FILE_TMPDIR/state"
	vm_suite_setup "$BATS_FILE_TMPDIR/create.err"
}

@test "create boots a VM; without working KVM it says so, on stderr and in inspect" {
	run -0 pisb inspect vm1
	jq -e '.driver == "vm" and .status == "running" and .vm.network == false' <<<"$output"
	accel=$(jq -r .vm.accel <<<"$output")
	if [ "$accel" = tcg ]; then
		jq -e '.vm.machine == "q35" and (.vm.accelNote | test("TCG"))' <<<"$output"
		grep -q "note: sandbox 'vm1': .*TCG" "$BATS_FILE_TMPDIR/create.err"
	else
		jq -e '.vm.machine == "q35" and .vm.accelNote == null' <<<"$output"
	fi
	jq -e '.limits.cpus == 2 and .limits.memoryGiB == 1 and .vm.memoryMiB == 1024' <<<"$output"
	# the first boot in this state dir made the boot snapshot, then
	# restored it (the instance's disk behind the template's device, the
	# share hot-plugged)
	jq -e '.vm.boot == "snapshot" and (.vm.bootNote | test("made the boot snapshot"))' <<<"$output"
	grep -q "made the boot snapshot" "$BATS_FILE_TMPDIR/create.err"
	snap=$(snapdir)
	[ -s "$snap/state" ]
	grep -qx "memoryMiB 1024" "$snap/inputs"
	grep -qx "cpus 2" "$snap/inputs"
	[ "$(stat -c %a "$snap/state")" = 600 ]
	run -0 pisb list --json
	jq -e '.[] | select(.name == "vm1") | .driver == "vm" and .status == "running"' <<<"$output"
	# the agent's sockets are the owner's only
	for s in "$PI_SANDBOX_HOME"/instances/vm1/agent*.sock; do
		[ "$(stat -c %a "$s")" = 600 ]
	done
}

@test "PISB_TRACE: create and the VM's supervisor append their phases, each process's in order" {
	t=$BATS_FILE_TMPDIR/trace
	run -1 grep -vE '^pisb-trace [0-9]{16} [0-9]+ [a-z]+: .+$' "$t"
	for m in 'create: config parsed' 'vm: disk made (mke2fs)' 'vm: boot asked' 'vm: supervisor start' \
		'vm: boot snapshot made' 'vm: QEMU started (restore)' 'vm: restored, shares hot-plugged' \
		'vm: the agent took its arguments' 'vm: the agent answers' 'vm: running recorded, relay started' \
		'vm: booted' 'vm: setup run' 'create: reported'; do
		grep -q " $m\$" "$t" || { echo "no mark: $m"; false; }
	done
	# the supervisor's marks are its own (inspect's controller pid); the
	# cold boot's are absent (the snapshot was restored)
	sup=$(pisb inspect vm1 | jq -r .controller.pid)
	grep -q "^pisb-trace [0-9]* $sup vm: the agent answers\$" "$t"
	run -1 grep -q ' vm: QEMU started (cold boot)$' "$t"
	for p in $(cut -d' ' -f3 "$t" | sort -u); do
		awk -v p="$p" '$3 == p { print $2 }' "$t" > "$BATS_TEST_TMPDIR/ts"
		sort -n -c "$BATS_TEST_TMPDIR/ts"
	done
	# the create waited for the boot: booted after the agent answered
	a=$(grep ' vm: the agent answers$' "$t" | cut -d' ' -f2)
	b=$(grep ' vm: booted$' "$t" | cut -d' ' -f2)
	[ "$b" -ge "$a" ]
}

@test "what the host cannot honour is refused up front, naming the key, before QEMU starts" {
	ncpu=$(nproc)
	printf 'version: 1\ndriver: vm\nresources: { cpus: %d, memoryGiB: 1 }\n' $((ncpu + 1)) > "$BATS_TEST_TMPDIR/cpus.yaml"
	run -2 --separate-stderr pisb create big -f "$BATS_TEST_TMPDIR/cpus.yaml"
	[[ $stderr == *"resources.cpus: $((ncpu + 1)) vCPUs asked for, but this host has $ncpu CPUs"* ]]
	host_gib=$(awk '/^MemTotal/ { print int($2 / 1048576) + 1 }' /proc/meminfo)
	printf 'version: 1\ndriver: vm\nresources: { cpus: 1, memoryGiB: %d }\n' "$host_gib" > "$BATS_TEST_TMPDIR/mem.yaml"
	run -2 --separate-stderr pisb create big -f "$BATS_TEST_TMPDIR/mem.yaml"
	[[ $stderr == *"resources.memoryGiB: $host_gib GiB asked for"* ]]
	if [ "$ncpu" -lt 8 ]; then
		printf 'version: 1\ndriver: vm\nprofile: large\n' > "$BATS_TEST_TMPDIR/large.yaml"
		run -2 --separate-stderr pisb create big -f "$BATS_TEST_TMPDIR/large.yaml"
		[[ $stderr == *"profile: 8 vCPUs asked for"* ]]
	fi
	run -3 pisb inspect big
	[ ! -e "$PI_SANDBOX_HOME/instances/big" ]
	# no QEMU of that name was started
	! pgrep -f 'qemu-system.*pisb-big' >/dev/null
}

@test "pids: the guest's cgroup pids.max holds every command" {
	run -0 pisb exec vm1 -- cat /sys/fs/cgroup/pisb/pids.max
	[ "$output" = 64 ]
	run -0 pisb exec vm1 -- cat /proc/self/cgroup
	[ "$output" = "0::/pisb" ]
	# the sleeps go with the command's process group when it exits
	run --separate-stderr pisb exec vm1 --sh 'n=0; while [ $n -lt 100 ]; do sleep 600 & n=$((n+1)); done'
	[[ $stderr == *[Ff]ork* ]]
	run -0 pisb exec vm1 --sh 'ps -eo args | grep -c "[s]leep 600" || true'
	[ "$output" = 0 ]
	run -0 pisb inspect vm1
	jq -e '.limits.pids == 64 and .limits.enforced.pids == true' <<<"$output"
}

@test "the guest hands its free memory back: free page reporting is on, and QEMU's guest memory shrinks below half of it" {
	run -0 pisb exec vm1 -- sh -c 'ls /sys/bus/virtio/drivers/virtio_balloon | grep -c "^virtio"'
	[ "$output" = 1 ]
	# this file's vm1 (another run's may be up too): its supervisor's QEMU
	run -0 pisb inspect vm1
	q=$(pgrep -P "$(jq -r .controller.pid <<<"$output")" -f qemu-system)
	[ -n "$q" ]
	[ "$(readlink "/proc/$q/cwd")" = "$PI_SANDBOX_HOME/instances/vm1" ]
	# 1 GiB of guest memory, in QEMU's memfds (a restore populates the
	# snapshot's 256 MiB, a cold boot all of it); the guest reports what
	# is free
	shmem=""
	for _ in $(seq 120); do
		shmem=$(awk '$1 == "Pss_Shmem:" { print $2 }' "/proc/$q/smaps_rollup")
		[ "$shmem" -lt 524288 ] && break
		sleep 0.5
	done
	echo "QEMU Pss_Shmem: $shmem KiB"
	[ "$shmem" -lt 524288 ]
}

@test "a restored guest has all of its memory: the snapshot's 256 MiB and the rest plugged in (virtio-mem)" {
	run -0 pisb inspect vm1
	jq -e '.vm.boot == "snapshot" and .vm.memoryMiB == 1024' <<<"$output"
	q=$(pgrep -P "$(jq -r .controller.pid <<<"$output")" -f qemu-system)
	[ -n "$q" ]
	[ "$(readlink "/proc/$q/cwd")" = "$PI_SANDBOX_HOME/instances/vm1" ]
	tr '\0' ' ' < "/proc/$q/cmdline" | grep -q -- '-m 256M,maxmem=1024M '
	run -0 pisb exec vm1 -- sh -c 'ls /sys/bus/virtio/drivers/virtio_mem | grep -c "^virtio"'
	[ "$output" = 1 ]
	# what the guest can use is its 1 GiB less the kernel's (a cold boot
	# of 1 GiB shows 972 MiB here)
	run -0 pisb exec vm1 -- awk '$1 == "MemTotal:" { print $2 }' /proc/meminfo
	echo "MemTotal: $output kB"
	[ "$output" -gt 870000 ]
}

@test "KVM that is PVM: doctor says what it needs, and the driver goes to TCG at once, saying why" {
	pvm=false
	if [ -e /sys/module/kvm_pvm ] && ! grep -qwE 'vmx|svm' /proc/cpuinfo; then pvm=true; fi
	run -0 pisb inspect vm1
	if $pvm; then
		jq -e '.vm.accel == "tcg" and (.vm.accelNote | test("PVM.*CONFIG_PVM_GUEST"))' <<<"$output"
		grep -q "pisb: starting QEMU with TCG" "$PI_SANDBOX_HOME/instances/vm1/qemu.log"
		! grep -q "pisb: starting QEMU with KVM" "$PI_SANDBOX_HOME/instances/vm1/qemu.log"
	else
		jq -e '.vm.accelNote == null or (.vm.accelNote | test("PVM") | not)' <<<"$output"
	fi
	run pisb doctor --json
	if $pvm; then
		jq -e '.checks[] | select(.check == "kvm") | .status == "warn" and (.detail | test("PVM")) and (.fix | test("CONFIG_PVM_GUEST"))' <<<"$output"
	else
		jq -e '.checks[] | select(.check == "kvm") | .detail | test("PVM") | not' <<<"$output"
	fi
}

@test "image host: the host's userland runs in the guest (python3, git, gcc, node)" {
	run -0 pisb exec vm1 -- python3 -c 'import sys; print(sys.version_info[0])'
	[ "$output" = 3 ]
	run -0 pisb exec vm1 -- git --version
	[[ $output == "git version"* ]]
	run -0 pisb exec vm1 --sh 'cd /tmp && printf "int main(void){return 7;}" > t.c && gcc -o t t.c && ./t; echo $?'
	[ "$output" = 7 ]
	if command -v node >/dev/null; then
		run -0 pisb exec vm1 -- node -e 'console.log(6 * 7)'
		[ "$output" = 42 ]
	fi
	run -0 pisb exec vm1 -- readlink -f /bin/sh
	[ "$output" = "$(readlink -f /bin/sh)" ]
	run -0 pisb inspect vm1
	jq -e '.image == "host"' <<<"$output"
}

@test "image host: the share is read-only on the host side, even after the guest remounts it read-write" {
	ls_mode=$(stat -c %a /usr/bin/ls)
	run -0 pisb exec vm1 --sh 'mount -o remount,rw /run/pisb/host && grep " /run/pisb/host " /proc/mounts | cut -d" " -f4 | cut -d, -f1'
	[ "$output" = rw ]
	run -1 --separate-stderr pisb exec vm1 -- touch /run/pisb/host/usr/pisb-vm-probe
	[[ $stderr == *"Read-only file system"* ]]
	run -2 --separate-stderr pisb exec vm1 --sh 'echo x > /run/pisb/host/etc/pisb-vm-probe'
	[[ $stderr == *"Read-only file system"* ]]
	run -1 --separate-stderr pisb exec vm1 -- chmod 777 /run/pisb/host/usr/bin/ls
	[[ $stderr == *"Read-only file system"* ]]
	run -1 pisb exec vm1 -- rm -f /run/pisb/host/usr/bin/ls
	[ ! -e /usr/pisb-vm-probe ]
	[ ! -e /etc/pisb-vm-probe ]
	[ "$(stat -c %a /usr/bin/ls)" = "$ls_mode" ]
	[ -x /usr/bin/ls ]
	# writes through the root go to the sandbox's disk (the overlay's upper)
	run -0 pisb exec vm1 --sh 'echo mine > /usr/bin/pisb-vm-guest-file && cat /usr/bin/pisb-vm-guest-file'
	[ "$output" = mine ]
	[ ! -e /usr/bin/pisb-vm-guest-file ]
	# back to read-only for the tests after this one (a remount can be
	# refused busy while the last command's files are still being closed:
	# a few tries, as verify's probe does)
	run -0 pisb exec vm1 --sh 'for i in 1 2 3 4 5 6 7 8 9 10; do mount -o remount,ro /run/pisb/host 2>/dev/null && break; sleep 0.5; done
		grep " /run/pisb/host " /proc/mounts | cut -d" " -f4 | cut -d, -f1'
	[ "$output" = ro ]
}

@test "image host: the local driver's secrets stay masked in the guest" {
	run -0 pisb exec vm1 --sh 'wc -c < /etc/shadow'
	# (on failure: how the guest sees it, for the log)
	[ "$output" = 0 ] || { pisb exec vm1 --sh 'ls -la /etc/shadow /run/pisb/host/etc/shadow; grep -E "etc|host" /proc/self/mountinfo'; false; }
	run -0 pisb exec vm1 --sh 'ls -A /etc/ssh | wc -l'
	[ "$output" = 0 ]
	if [ -d /etc/ssl/private ]; then
		run -0 pisb exec vm1 --sh 'ls -A /etc/ssl/private | wc -l'
		[ "$output" = 0 ]
	fi
	# and the guest cannot uncover them: the covers are host mounts
	run -0 pisb exec vm1 --sh 'umount /etc/shadow 2>/dev/null; umount /run/pisb/host/etc/shadow 2>/dev/null; wc -c < /run/pisb/host/etc/shadow'
	[ "$output" = 0 ]
	# nor does the host uncover them by replacing the file, as useradd and
	# passwd do (a rename over it; here with the same content and mode)
	[ -s /etc/shadow ]
	cp -p /etc/shadow /etc/.shadow.pisb55
	mv -f /etc/.shadow.pisb55 /etc/shadow
	run -0 pisb exec vm1 --sh 'umount /etc/shadow 2>/dev/null; wc -c < /etc/shadow; wc -c < /run/pisb/host/etc/shadow'
	[ "$output" = "$(printf '0\n0')" ]
}

@test "image: DIR: the guest's root is the image (one read-only ext4 base, reused); nothing of the host's; instances write apart" {
	command -v busybox >/dev/null || skip "machine lacks: busybox (apt-get install busybox-static)"
	r="$BATS_TEST_TMPDIR/rootfs"
	mkdir -p "$r/bin" "$r/etc" "$r/root"
	cp "$(command -v busybox)" "$r/bin/busybox"
	for c in sh cat echo test readlink; do ln -s busybox "$r/bin/$c"; done
	echo from-image > "$r/etc/marker"
	# attack: a link out of the image to a host file (mke2fs reads the tree)
	ln -s "$BATS_FILE_TMPDIR/host-only-file" "$r/etc/leak"
	printf 'version: 1\ndriver: vm\nimage: %s\nresources: { cpus: 1, memoryGiB: 1 }\ndiskGiB: 2\n' "$r" > "$BATS_TEST_TMPDIR/img.yaml"
	run --separate-stderr pisb create ia -f "$BATS_TEST_TMPDIR/img.yaml"
	[ "$status" -eq 0 ] || { echo "create ia: exit $status: $stderr"; false; }
	[[ $stderr == *"image: PATH boots cold"* ]]
	base=$(echo "$PI_SANDBOX_HOME"/images/*/root.ext4)
	[ -f "$base" ]
	[ "$(stat -c %a "$base")" = 444 ]
	ino=$(stat -c %i "$base")
	[ "$(stat -c %i "$PI_SANDBOX_HOME/instances/ia/root.img")" = "$ino" ]
	run -0 pisb exec ia -- cat /etc/marker
	[ "$output" = from-image ]
	# the image's /bin/sh (busybox); no host /usr, no python3, no host file
	run -0 pisb exec ia -- sh -c 'readlink /bin/sh; test -e /usr || echo no-usr; test -e /usr/bin/python3 || echo no-python3'
	[ "$output" = $'busybox\nno-usr\nno-python3' ]
	run -1 --separate-stderr pisb exec ia -- cat /etc/leak
	[[ $output != *"host secret"* ]]
	[[ $stderr != *"host secret"* ]]
	run -0 pisb exec ia -- readlink /etc/leak
	[ "$output" = "$BATS_FILE_TMPDIR/host-only-file" ]
	run -0 pisb exec ia -- sh -c 'echo written-in-ia > /etc/marker; cat /etc/marker'
	[ "$output" = written-in-ia ]
	# a second create reuses the base: the same file, not built again
	run -0 --separate-stderr pisb create ib -f "$BATS_TEST_TMPDIR/img.yaml"
	[ "$(stat -c %i "$base")" = "$ino" ]
	[ "$(stat -c %i "$PI_SANDBOX_HOME/instances/ib/root.img")" = "$ino" ]
	run -0 pisb exec ib -- cat /etc/marker
	[ "$output" = from-image ]
	run -0 pisb exec ia -- cat /etc/marker
	[ "$output" = written-in-ia ]
	[ "$(cat "$r/etc/marker")" = from-image ]
	run -0 pisb inspect ib
	jq -e '.vm.boot == "cold"' <<<"$output"
	run -0 pisb destroy ia --confirm ia
	run -0 pisb destroy ib --confirm ib
	[ -f "$base" ]
	# a template of the image: its copy boots the same base, with the template's setup
	{ cat "$BATS_TEST_TMPDIR/img.yaml"; printf 'setup:\n  - echo tmpl > /etc/tmark\n'; } > "$BATS_TEST_TMPDIR/imgt.yaml"
	run -0 --separate-stderr pisb prepare it -f "$BATS_TEST_TMPDIR/imgt.yaml"
	run -0 --separate-stderr pisb create itc --template it --driver vm
	[ "$(stat -c %i "$PI_SANDBOX_HOME/instances/itc/root.img")" = "$ino" ]
	run -0 pisb exec itc -- sh -c 'cat /etc/marker /etc/tmark; test -e /usr || echo no-usr'
	[ "$output" = $'from-image\ntmpl\nno-usr' ]
	run -0 pisb destroy itc --confirm itc
	run -0 pisb destroy it --template --confirm it
	# a tarball: unpacked as data (libarchive), a base of its own
	tar --numeric-owner -C "$r" -czf "$BATS_TEST_TMPDIR/root.tgz" .
	printf 'version: 1\ndriver: vm\nimage: %s\nresources: { cpus: 1, memoryGiB: 1 }\ndiskGiB: 2\n' "$BATS_TEST_TMPDIR/root.tgz" > "$BATS_TEST_TMPDIR/tgz.yaml"
	run -0 --separate-stderr pisb create ic -f "$BATS_TEST_TMPDIR/tgz.yaml"
	[ "$(stat -c %i "$PI_SANDBOX_HOME/instances/ic/root.img")" != "$ino" ]
	run -0 pisb exec ic -- sh -c 'cat /etc/marker; test -e /usr || echo no-usr'
	[ "$output" = $'from-image\nno-usr' ]
	run -1 pisb exec ic -- cat /etc/leak
	[[ $output != *"host secret"* ]]
	run -0 pisb destroy ic --confirm ic
}

@test "the guest workspace holds .sandbox.yaml; .agents/setup runs, under the setup deadline" {
	run -0 pisb exec vm1 -- cat /workspace/.sandbox.yaml
	[ "$output" = "$(cat "$BATS_FILE_TMPDIR/vm.yaml")" ]
	run -0 pisb exec vm1 -- cat /root/agents-mark
	[ "$output" = agents-ran ]
	run -0 pisb inspect vm1
	jq -e '.setupError | test("^.agents/setup: the setup deadline \\(60 s\\) passed")' <<<"$output"
	run -0 pisb exec vm1 --sh 'ps -eo args | grep -c "[s]leep 600" || true'
	[ "$output" = 0 ]
}

@test "exec: exit statuses pass through (127 not found, 126 cannot run, 128+N signal)" {
	run -0 pisb exec vm1 -- true
	run -42 pisb exec vm1 -- sh -c 'exit 42'
	run -127 --separate-stderr pisb exec vm1 -- no-such-command
	[[ $stderr == *"no-such-command"* ]]
	run -126 pisb exec vm1 -- /etc/passwd
	run -137 pisb exec vm1 --sh 'kill -9 $$'
	run -143 pisb exec vm1 --sh 'kill -TERM $$'
}

@test "exec: stdout and stderr apart, stdin streamed, argv intact, cwd and env" {
	run -0 --separate-stderr pisb exec vm1 --sh 'echo out; echo err >&2'
	[ "$output" = out ]
	[ "$stderr" = err ]
	[ "$(pisb exec vm1 --sh 'printf "a\0b"' | od -An -c | tr -d ' \n')" = 'a\0b' ]
	run -0 bash -c 'printf "line1\nline2" | pisb exec vm1 -- cat'
	[ "$output" = "$(printf 'line1\nline2')" ]
	run -0 bash -c 'head -c 300000 /dev/zero | pisb exec vm1 -- wc -c'
	[ "$output" = 300000 ]
	run -0 pisb exec vm1 -- printf '%s|' 'a b' '' '$HOME' "it's"
	[ "$output" = "a b||\$HOME|it's|" ]
	run -0 pisb exec vm1 -- pwd
	[ "$output" = /workspace ]
	run -0 pisb exec vm1 --cwd /tmp --env ONE=1 -- sh -c 'echo "$(pwd) $ONE $FROM_CONFIG"'
	[ "$output" = "/tmp 1 yes-it-is" ]
	run -0 pisb exec vm1 -- cat /root/setup-mark
	[ "$output" = setup-ran ]
	# /dev has the links a userland expects (fd and the standard streams)
	run -0 bash -c 'printf "via dev stdin" | pisb exec vm1 -- sh -c "cat /dev/stdin; echo; echo to-stderr > /dev/stderr; ls /dev/fd/ > /dev/null && echo fd-ok"'
	[ "${lines[0]}" = "via dev stdin" ]
	[[ $output == *to-stderr* ]]
	[[ $output == *fd-ok* ]]
}

@test "exec: SIGTERM and SIGINT reach the command's process group in the guest" {
	out=$BATS_TEST_TMPDIR/out
	pisb exec vm1 --sh 'trap "echo got-term; exit 7" TERM; echo ready; sleep 60 & wait' > "$out" 2>&1 < /dev/null &
	pid=$!
	for _ in $(seq 100); do grep -q ready "$out" && break; sleep 0.1; done
	grep -q ready "$out"
	kill -TERM "$pid"
	status=0
	wait "$pid" || status=$?
	[ "$status" = 7 ]
	grep -q got-term "$out"
	pisb exec vm1 --sh 'echo ready; exec sleep 60' > "$out" 2>&1 < /dev/null &
	pid=$!
	for _ in $(seq 100); do grep -q ready "$out" && break; sleep 0.1; done
	kill -INT "$pid"
	status=0
	wait "$pid" || status=$?
	[ "$status" = 130 ]
	# nothing is left running in the guest
	run -0 pisb exec vm1 --sh 'ps -eo args | grep -c "[s]leep 60" || true'
	[ "$output" = 0 ]
	# a client killed outright: the agent kills the command when the
	# port stays closed (1.5 s)
	pisb exec vm1 -- sleep 61 > /dev/null 2>&1 < /dev/null &
	pid=$!
	for _ in $(seq 100); do
		[ "$(pisb exec vm1 --sh 'ps -eo args | grep -c "[s]leep 61" || true')" = 1 ] && break
		sleep 0.1
	done
	kill -KILL "$pid"
	wait "$pid" || true
	for _ in $(seq 100); do
		[ "$(pisb exec vm1 --sh 'ps -eo args | grep -c "[s]leep 61" || true')" = 0 ] && break
		sleep 0.2
	done
	run -0 pisb exec vm1 --sh 'ps -eo args | grep -c "[s]leep 61" || true'
	[ "$output" = 0 ]
}

@test "the guest has no network interface but lo, and none of the host's files" {
	run -0 pisb exec vm1 -- ls /sys/class/net
	[ "$output" = lo ]
	run -0 pisb exec vm1 --sh 'tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d " "'
	[ "$output" = lo ]
	run -1 pisb exec vm1 -- cat "$BATS_FILE_TMPDIR/host-only-file"
	run -2 pisb exec vm1 -- ls "$TOP"
	# the one shared file system is the host's read-only userland
	run -0 pisb exec vm1 --sh 'grep -E " (9p|virtiofs|nfs|fuse)" /proc/mounts | cut -d" " -f1-4'
	[ "$output" = "pisb-host /run/pisb/host virtiofs ro,nodev,relatime" ]
	run -0 pisb exec vm1 -- hostname
	[ "$output" = vm1 ]
}

@test "verify: the host's canaries unseen, no NIC but lo, the userland share read-only; text and JSON" {
	run -0 pisb verify vm1 --json
	jq -e '.name == "vm1" and .pass == true and .onHost == false and
		([.checks[].check] == ["host-files","host-env","network","host-share"]) and
		all(.checks[]; .pass == true and (.evidence | length > 0))' <<<"$output"
	jq -e '.checks[] | select(.check == "network") | .evidence | test("only network interface is lo")' <<<"$output"
	run -0 pisb verify vm1
	[ "${#lines[@]}" = 4 ]
	[[ ${lines[3]} == "PASS  host-share      "* ]]
	# the canaries are gone from the host, the share's probe never reached it
	[ -z "$(find /tmp -maxdepth 1 -name '.pisb-canary-*' -newer "$BATS_FILE_TMPDIR/vm.yaml")" ]
	[ -z "$(find /usr -maxdepth 1 -name '.pisb-verify-*')" ]
	# the share is read-only again in the guest
	run -0 pisb exec vm1 --sh 'grep " /run/pisb/host " /proc/mounts | cut -d" " -f4 | cut -d, -f1'
	[ "$output" = ro ]
	run -0 pisb drivers --json
	jq -e '.drivers[] | select(.name == "vm") | .verbs.verify.supported' <<<"$output"
}

# Replace a tool of the guest's with a script from stdin (guest root can);
# untool puts it back (and every test's end does).
tool() {
	touch "$BATS_TEST_TMPDIR/tool"
	pisb exec vm1 -- sh -c 'T=$(command -v "$1") && { [ -e "$T.real" ] || mv "$T" "$T.real"; } &&
		cat > "$T" && chmod 755 "$T"' sh "$1"
}
untool() {
	pisb exec vm1 -- sh -c 'for t in grep mount; do T=$(command -v $t) || T=/usr/bin/$t
		[ ! -e "$T.real" ] || mv -f "$T.real" "$T"; done'
}
teardown() {
	[ ! -e "$BATS_TEST_TMPDIR/tool" ] || untool >/dev/null 2>&1 || true
}

@test "attack: verify's answer from the guest is bounded and checked: a failing check is exit 1, a flood exit 5, controls replaced" {
	# a guest in which the canary shows up fails that check, and says so
	tool grep <<-'EOF'
	#!/bin/sh
	echo /proc/1/environ
	EOF
	run -1 pisb verify vm1 --json
	jq -e '.pass == false and ([.checks[] | select(.pass == false) | .check] == ["host-env"])' <<<"$output"
	untool
	# an answer past 4 KiB is refused, none of it shown
	tool mount <<-'EOF'
	#!/bin/sh
	printf '\033[2J'; head -c 100000 /dev/zero | tr '\0' x
	EOF
	run -5 --separate-stderr pisb verify vm1
	[[ $stderr == *"the guest's answer to verify exceeds 4 KiB: refused"* ]]
	[[ ${#stderr} -lt 400 ]]
	[[ $output != *xxxx* ]]
	untool
	# a guest that ends early fails every check it did not answer
	tool mount <<-'EOF'
	#!/bin/sh
	printf 'files\033]0;owned\007\n'
	kill -9 $PPID
	EOF
	run -1 pisb verify vm1
	[[ $output == *"FAIL  host-share      no answer from the guest"* ]]
	[[ $output != *$'\033'* ]]
	untool
	run -0 pisb verify vm1
}

@test "exec handles: --timeout-ms, exec-status collects new output, exec-kill ends the command" {
	run -0 pisb exec vm1 --timeout-ms 20000 --json -- sh -c 'echo hi; echo err >&2; exit 4'
	jq -e '.running == false and .exitCode == 4 and .output == "hi\nerr\n" and .truncated == false' <<<"$output"
	run -4 pisb exec vm1 --timeout-ms 20000 -- sh -c 'exit 4'
	run -0 pisb exec vm1 --timeout-ms 0 --json --sh 'echo start; sleep 60'
	jq -e '.running == true and .exitCode == null' <<<"$output"
	h=$(jq -r .pid <<<"$output")
	[[ $h == vm-* ]]
	seen=$(jq -r .output <<<"$output")
	for _ in $(seq 50); do
		[[ $seen == *start* ]] && break
		run -0 pisb exec-status vm1 "$h" --timeout-ms 200 --json
		jq -e '.running == true' <<<"$output"
		seen+=$(jq -r .output <<<"$output")
	done
	[ "$seen" = start ]
	run -0 pisb exec-kill vm1 "$h" --json
	jq -e '.running == false and .exitCode == 143' <<<"$output"
	run -0 pisb exec-status vm1 "$h" --json
	jq -e '.running == false and .exitCode == 143 and .output == ""' <<<"$output"
	# gc keeps a running VM's handles, finished ones too (they go with the VM)
	run -0 --separate-stderr pisb gc --json
	jq -e '.kept[] | select(.name == "vm1") | .reason == "running"' <<<"$output"
	[ -d "$PI_SANDBOX_HOME/instances/vm1/exec/$h" ]
	run -0 pisb exec-status vm1 "$h" --json
	jq -e '.running == false and .exitCode == 143' <<<"$output"
	run -3 pisb exec-status vm1 vm-00000000
	# nothing is left running in the guest
	run -0 pisb exec vm1 --sh 'ps -eo args | grep -c "[s]leep 60" || true'
	[ "$output" = 0 ]
}

# A template of vm1's size (its boot snapshot serves the three boots).
tpl_yaml() {
	cat > "$BATS_TEST_TMPDIR/tpl.yaml" <<-EOF
	version: 1
	driver: vm
	resources: { cpus: 2, memoryGiB: 1 }
	diskGiB: 2
	setup:
	  - echo from-template > /workspace/tfile
	  - $1
	EOF
	cat > "$BATS_TEST_TMPDIR/copy.yaml" <<-'EOF'
	version: 1
	driver: vm
	resources: { cpus: 2, memoryGiB: 1 }
	resume:
	  - echo copy-resumed > /root/copy-resumed
	EOF
}

@test "gc: a vm sandbox whose owner process is gone is powered off and destroyed; one whose QEMU died is marked stopped" {
	sleep 1000 3>&- & owner=$!
	printf 'version: 1\ndriver: vm\nresources: { cpus: 2, memoryGiB: 1 }\ndiskGiB: 2\n' > "$BATS_TEST_TMPDIR/gc.yaml"
	run -0 pisb create gco -f "$BATS_TEST_TMPDIR/gc.yaml" --owner-pid "$owner" -q
	run -0 pisb create gcq -f "$BATS_TEST_TMPDIR/gc.yaml" -q
	run -0 pisb inspect gco
	jq -e '.ownerPid == '"$owner"' and .ownerAlive and .status == "running"' <<<"$output"
	sup=$(jq -r .controller.pid <<<"$output")
	q=$(jq -r .controller.initPid <<<"$output")
	grep -q qemu-system "/proc/$q/cmdline"
	# gcq's QEMU dies: interrupted
	run -0 pisb inspect gcq
	kill -9 "$(jq -r .controller.initPid <<<"$output")"
	for _ in $(seq 100); do [ "$(pisb inspect gcq | jq -r .status)" = interrupted ] && break; sleep 0.1; done
	run -0 pisb inspect gcq
	jq -e '.status == "interrupted"' <<<"$output"
	kill "$owner"
	wait "$owner" 2>/dev/null || true
	run -0 --separate-stderr pisb gc --json
	jq -e '.removed[] | select(.name == "gco") | .kind == "sandbox" and (.reason | test("owner pid '"$owner"' is gone"))' <<<"$output"
	jq -e '.cleaned[] | select(.name == "gcq") | .reason | test("interrupted")' <<<"$output"
	jq -e '.kept[] | select(.name == "vm1") | .reason == "running"' <<<"$output"
	[ ! -e "$PI_SANDBOX_HOME/instances/gco" ]
	run -3 pisb inspect gco
	for _ in $(seq 100); do kill -0 "$q" 2>/dev/null || kill -0 "$sup" 2>/dev/null || break; sleep 0.1; done
	! kill -0 "$q" 2>/dev/null
	! kill -0 "$sup" 2>/dev/null
	run -0 pisb inspect gcq
	jq -e '.status == "stopped"' <<<"$output"
	# with --hours 0, the stopped one goes too: once it has been stopped
	# for more than 0 s (stoppedAt is in seconds; gc just marked it)
	st=$(jq -r .stoppedAt "$PI_SANDBOX_HOME/instances/gcq/status.json")
	for _ in $(seq 50); do [ "$(date +%s)" -gt "$st" ] && break; sleep 0.1; done
	run -0 --separate-stderr pisb gc --hours 0 --json
	jq -e '.removed[] | select(.name == "gcq") | .reason | test("stopped for")' <<<"$output"
	[ ! -e "$PI_SANDBOX_HOME/instances/gcq" ]
	run -0 pisb inspect vm1
	jq -e '.status == "running"' <<<"$output"
}

@test "templates: prepare keeps the set-up disk read-only; each create --template has a copy-on-write disk of its own" {
	command -v qemu-img >/dev/null || skip "machine lacks: qemu-img (install qemu-utils)"
	# setup also writes an image header (qcow2's magic) at the start of
	# its raw disk: a format taken from the bytes would read it as one
	tpl_yaml "printf 'QFI\\373\\0\\0\\0\\3' | dd of=/dev/vda conv=notrunc status=none"
	run -0 --separate-stderr pisb prepare tv -f "$BATS_TEST_TMPDIR/tpl.yaml"
	[[ $stderr == *"prepared template 'tv'"* ]]
	run -0 pisb list --templates --json
	jq -e '.[] | select(.name == "tv") | .driver == "vm" and .status == "template"' <<<"$output"
	tdir=$PI_SANDBOX_HOME/templates/tv
	[ "$(stat -c %a "$tdir/disk.img")" = 400 ]
	[ ! -e "$tdir/status.json" ]
	[ -z "$(find "$tdir" -type s)" ]
	[ -z "$(ls -A "$PI_SANDBOX_HOME/staging")" ]
	! pgrep -f 'qemu-system.*pisb-tv' >/dev/null
	made=$(stat -c %Y "$tdir/disk.img")
	# another driver cannot start from it
	run -2 --separate-stderr pisb create tl --template tv
	[[ $stderr == *"template 'tv' was prepared by driver vm, not local"* ]]
	run -3 pisb inspect tl
	# a copy has its template's disk size
	sed 's/^resources:.*/&\ndiskGiB: 3/' "$BATS_TEST_TMPDIR/copy.yaml" > "$BATS_TEST_TMPDIR/big.yaml"
	run -2 --separate-stderr pisb create tc --template tv -f "$BATS_TEST_TMPDIR/big.yaml"
	[[ $stderr == *"diskGiB: 3, but template 'tv' has a disk of 2 GiB"* ]]
	run -3 pisb inspect tc
	run -0 pisb create ta --template tv -f "$BATS_TEST_TMPDIR/copy.yaml"
	# the template's files, the copy's own config, its resume hooks
	run -0 pisb exec ta -- cat /workspace/tfile /root/copy-resumed
	[ "$output" = "$(printf 'from-template\ncopy-resumed')" ]
	run -0 pisb exec ta -- cat /workspace/.sandbox.yaml
	[ "$output" = "$(cat "$BATS_TEST_TMPDIR/copy.yaml")" ]
	run -0 pisb inspect ta
	jq -e '.template == "tv" and (.vm.disk | test("qcow2"))' <<<"$output"
	# the overlay names its backing file and both formats
	run -0 qemu-img info -U --output=json "$PI_SANDBOX_HOME/instances/ta/disk.qcow2"
	jq -e '.format == "qcow2" and ."backing-filename" == "../../templates/tv/disk.img" and ."backing-filename-format" == "raw"' <<<"$output"
	run -0 pisb exec ta --sh 'head -c 4 /dev/vda | od -An -c | tr -d " "'
	[ "$output" = 'QFI373' ]
	# a write in one copy: not in the template (a copy made after it),
	# nor in the other copy
	run -0 pisb exec ta --sh 'echo only-a > /workspace/mine; echo more >> /workspace/tfile; sync'
	run -0 pisb create tb --template tv -f "$BATS_TEST_TMPDIR/copy.yaml"
	run -0 pisb exec tb -- cat /workspace/tfile
	[ "$output" = from-template ]
	run -1 pisb exec tb -- test -e /workspace/mine
	run -0 pisb exec tb --sh 'echo only-b > /workspace/mine; sync'
	run -0 pisb exec ta -- cat /workspace/mine
	[ "$output" = only-a ]
	[ "$(stat -c %Y "$tdir/disk.img")" = "$made" ]
	# the template cannot go while copies stand on it
	run -4 --separate-stderr pisb destroy tv --template --confirm tv
	[[ $stderr == *"template 'tv' is in use by sandboxes 'ta', 'tb'"* ]]
	[ -s "$tdir/disk.img" ]
	run -0 pisb destroy ta --confirm ta
	run -0 pisb destroy tb --confirm tb
	run -0 pisb destroy tv --template --confirm tv
	[ ! -e "$tdir" ]
	run -0 pisb list --templates --json
	[ "$output" = "[]" ]
}

@test "templates: a setup that fails saves no template (1); a prepare that fails or is killed leaves no VM behind" {
	tpl_yaml "exit 9"
	run -1 --separate-stderr pisb prepare tv -f "$BATS_TEST_TMPDIR/tpl.yaml"
	[[ $stderr == *"prepare 'tv': setup failed, no template was saved: setup[1] 'exit 9' exited with 9"* ]]
	[ ! -e "$PI_SANDBOX_HOME/templates/tv" ]
	[ -z "$(ls -A "$PI_SANDBOX_HOME/staging")" ]
	! pgrep -f 'qemu-system.*pisb-tv' >/dev/null
	run -3 --separate-stderr pisb create ta --template tv -f "$BATS_TEST_TMPDIR/copy.yaml"
	[[ $stderr == *"template 'tv'"* ]]
	# a prepare killed while its setup runs leaves no VM behind: nothing
	# would list or stop it
	tpl_yaml "sleep 600"
	pisb prepare tk -f "$BATS_TEST_TMPDIR/tpl.yaml" > /dev/null 2>&1 &
	pid=$!
	for _ in $(seq 600); do [ -e "$PI_SANDBOX_HOME/staging/tk.prep/setup.log" ] && break; sleep 0.2; done
	pgrep -f 'qemu-system.*pisb-tk' >/dev/null
	kill -9 "$pid"
	wait "$pid" || true
	for _ in $(seq 100); do pgrep -f 'qemu-system.*pisb-tk' >/dev/null || break; sleep 0.2; done
	! pgrep -f 'qemu-system.*pisb-tk' >/dev/null
	grep -q "the prepare that booted this VM is gone" "$PI_SANDBOX_HOME/staging/tk.prep/qemu.log"
	[ ! -e "$PI_SANDBOX_HOME/templates/tk" ]
	rm -rf "$PI_SANDBOX_HOME/staging/tk.prep"
}

@test "verbs the driver does not serve fail with 1, naming it" {
	# (services: tests/54-vm-svc.bats; shell, the file verbs, push and the
	# project: tests/56-vm-fs.bats; docker: true, tests/48-vm-docker.bats)
	run -1 --separate-stderr pisb docker vm1 ps
	[[ $stderr == *"sandbox 'vm1' (driver vm) has no docker daemon of its own: create it with 'docker: true'"* ]]
	# logs: the setup's output; a service's log is logs/SERVICE.log, as
	# on local (this sandbox has none)
	run -0 pisb logs vm1
	[[ $output == *setup-says-hello* ]]
	run -3 --separate-stderr pisb logs vm1 web
	[[ $stderr == *"sandbox 'vm1' has no log for service 'web'"* ]]
}

@test "the disk persists across stop and start; stop, start and status" {
	run -0 pisb exec vm1 --sh 'echo kept > /root/kept; echo ws > /workspace/w'
	run -0 pisb stop vm1
	run -0 pisb list --json
	jq -e '.[] | select(.name == "vm1") | .status == "stopped"' <<<"$output"
	run -5 --separate-stderr pisb exec vm1 -- true
	[[ $stderr == *"pisb start vm1"* ]]
	snap=$(snapdir)
	made=$(stat -c %Y.%i "$snap/state")
	run -0 pisb start vm1
	run -0 pisb exec vm1 -- cat /root/kept /workspace/w /root/setup-mark
	[ "$output" = "$(printf 'kept\nws\nsetup-ran')" ]
	run -0 pisb start vm1
	# the second boot restored the snapshot the first one made: the
	# same file, no note; the guest got its own arguments from the host
	run -0 pisb inspect vm1
	jq -e '.vm.boot == "snapshot" and .vm.bootNote == null' <<<"$output"
	[ "$(stat -c %Y.%i "$snap/state")" = "$made" ]
	run -0 pisb exec vm1 -- hostname
	[ "$output" = vm1 ]
	run -0 pisb exec vm1 --sh 'cat /sys/fs/cgroup/pisb/pids.max'
	[ "$output" = 64 ]
}

@test "resume hooks run at start in the guest: in order, a failing one logged, what they start stays, a long one is resumePid" {
	# .agents/resume runs after the resume lines and is still running
	# when start stops waiting for it (10 s)
	run -0 pisb exec vm1 --sh 'rm -f /root/resume.log; mkdir -p .agents && printf "#!/bin/sh\necho agents-resume >> /root/resume.log\nexec sleep 120\n" > .agents/resume && chmod +x .agents/resume'
	run -0 pisb stop vm1
	# a failing resume line does not fail the start
	run -0 pisb start vm1
	for _ in $(seq 60); do
		[ "$(pisb exec vm1 -- cat /root/resume.log 2>/dev/null | wc -l)" -ge 3 ] && break
		sleep 1
	done
	# each line in the workspace with the config's env; the next line ran
	run -0 pisb exec vm1 -- cat /root/resume.log
	[ "$output" = "$(printf 'resumed /workspace yes-it-is\nresumed again\nagents-resume')" ]
	# the failing line's output and status are in the log
	run -0 pisb logs vm1
	[[ $output == *resume-says-failing* ]]
	[[ $output == *"resume[1] exited with 3"* ]]
	# what a resume line left in the background runs on
	run -0 pisb exec vm1 --sh 'ps -eo args | grep -cx "sleep 700"'
	[ "$output" = 1 ]
	# the script still runs: inspect names its runner on the host
	run -0 pisb inspect vm1
	rp=$(jq -r .resumePid <<<"$output")
	[ "$rp" != null ]
	kill -0 "$rp"
	run -0 pisb exec vm1 -- pkill -f "sleep 120"
	for _ in $(seq 100); do kill -0 "$rp" 2>/dev/null || break; sleep 0.2; done
	! kill -0 "$rp" 2>/dev/null
	run -0 pisb inspect vm1
	jq -e '.resumePid == null' <<<"$output"
	run -0 pisb logs vm1
	[[ $output == *".agents/resume exited with 143"* ]]
	# what the hook left running stays, the rest of the group did not
	run -0 pisb exec vm1 --sh 'rm .agents/resume; ps -eo args | grep -cx "sleep 700"'
	[ "$output" = 1 ]
}

@test "attack: a resume hook's flood of output is bounded on the host (setup.log past 1 MiB becomes setup.log.1)" {
	run -0 pisb exec vm1 --sh 'printf "#!/bin/sh\nhead -c 2600000 /dev/zero | tr \"\\\\0\" x\n" > .agents/resume && chmod +x .agents/resume'
	run -0 pisb stop vm1
	run -0 pisb start vm1
	d=$PI_SANDBOX_HOME/instances/vm1
	# setup.log holds the earlier test's "ended" until the flood rotates it
	for _ in $(seq 300); do [ -e "$d/setup.log.1" ] && grep -qs "resume hooks: ended" "$d/setup.log" && break; sleep 0.2; done
	grep -q "resume hooks: ended" "$d/setup.log"
	[ "$(stat -c %s "$d/setup.log")" -le 1048576 ]
	[ "$(stat -c %s "$d/setup.log.1")" -le 1048576 ]
	[ "$(stat -c %s "$d/setup.log.1")" -gt 500000 ]
	[ "$(stat -c %a "$d/setup.log.1")" = 600 ]
	run -0 pisb exec vm1 -- rm .agents/resume
}

@test "a stale boot snapshot (its inputs changed) is made again" {
	snap=$(snapdir)
	cp "$snap/inputs" "$BATS_TEST_TMPDIR/inputs"
	run -0 pisb stop vm1
	# as if the agent had changed: another initramfs hash
	sed -i 's/^initrd .*/initrd 0000000000000000/' "$snap/inputs"
	run -0 --separate-stderr pisb start vm1
	[[ $stderr == *"made the boot snapshot"* ]]
	run -0 pisb inspect vm1
	jq -e '.vm.boot == "snapshot" and (.vm.bootNote | test("made the boot snapshot"))' <<<"$output"
	cmp "$snap/inputs" "$BATS_TEST_TMPDIR/inputs"
	run -0 pisb exec vm1 -- cat /root/kept
	[ "$output" = kept ]
}

@test "a restored guest that dies before its agent answers is booted once more, cold, saying why" {
	pisb stop vm1
	t=$BATS_TEST_TMPDIR/trace
	# the supervisor stops itself once the restored agent took its
	# arguments; its QEMU is killed there, as a guest that fails in stage 1
	PISB_TRACE=$t PISB_TRACE_STOP='vm: the agent took its arguments' pisb start vm1 \
		> "$BATS_TEST_TMPDIR/out" 2> "$BATS_TEST_TMPDIR/err" &
	st=$!
	for _ in $(seq 600); do
		grep -q ' vm: the agent took its arguments$' "$t" 2>/dev/null && break
		sleep 0.1
	done
	sup=$(grep ' vm: the agent took its arguments$' "$t" | cut -d' ' -f3)
	[ -n "$sup" ]
	q=""
	for c in $(pgrep -P "$sup"); do
		case $(cat "/proc/$c/comm") in qemu-system*) q=$c ;; esac
	done
	[ -n "$q" ]
	kill -9 "$q"
	kill -CONT "$sup"
	wait "$st"
	grep -q "the restored guest died before its agent answered" "$BATS_TEST_TMPDIR/err"
	run -0 pisb inspect vm1
	jq -e '.status == "running" and .vm.boot == "cold" and (.vm.bootNote | test("restored guest died.*cold boot"))' <<<"$output"
	grep -q ' vm: QEMU started (cold boot)$' "$t"
	run -0 pisb exec vm1 -- cat /root/setup-mark
	[ "$output" = setup-ran ]
}

@test "a QEMU killed with SIGKILL shows as interrupted; start boots it again" {
	run -0 pisb inspect vm1
	qpid=$(jq -r .controller.initPid <<<"$output")
	[ -n "$qpid" ]
	[ "$qpid" != null ]
	grep -q qemu-system "/proc/$qpid/cmdline"
	kill -9 "$qpid"
	for _ in $(seq 50); do
		[ "$(pisb inspect vm1 | jq -r .status)" = interrupted ] && break
		sleep 0.1
	done
	run -0 pisb inspect vm1
	jq -e '.status == "interrupted" and .controller.alive == false' <<<"$output"
	run -5 pisb exec vm1 -- true
	# a corrupt boot snapshot: the start boots cold, says why, and drops
	# it (the next boot makes it again)
	snap=$(snapdir)
	head -c 1048576 /dev/urandom > "$snap/state"
	run -0 --separate-stderr pisb start vm1
	[[ $stderr == *"the boot snapshot could not be restored"*"cold boot"* ]]
	run -0 pisb inspect vm1
	jq -e '.status == "running" and .vm.boot == "cold" and (.vm.bootNote | test("could not be restored"))' <<<"$output"
	[ ! -e "$snap/inputs" ]
	run -0 pisb exec vm1 -- cat /root/kept
	[ "$output" = kept ]
}

@test "an idle guest drops its clean page cache, and its QEMU hands that memory back (PISB_VM_RECLAIM_S)" {
	cat > "$BATS_TEST_TMPDIR/r.yaml" <<-'EOF'
	version: 1
	driver: vm
	resources: { cpus: 2, memoryGiB: 1 }
	diskGiB: 2
	EOF
	PISB_VM_RECLAIM_S=2 run_ok pisb create vr -f "$BATS_TEST_TMPDIR/r.yaml"
	q=$(pgrep -P "$(pisb inspect vr | jq -r .controller.pid)" -f qemu-system)
	[ -n "$q" ]
	# 96 MiB written and read through the guest's page cache
	run -0 pisb exec vr -- sh -c 'head -c 100663296 /dev/urandom > /root/big && sync && cat /root/big > /dev/null && grep ^Cached: /proc/meminfo'
	cached=$(awk '{ print $2 }' <<<"$output")
	echo "guest Cached: $cached KiB"
	[ "$cached" -gt 65536 ]
	rss0=$(awk '/^VmRSS/ { print $2 }' "/proc/$q/status")
	# the guest idle: within a few 2 s intervals the agent drops the
	# cache, and free page reporting gives the pages back to the host
	for _ in $(seq 30); do
		sleep 2
		rss=$(awk '/^VmRSS/ { print $2 }' "/proc/$q/status")
		[ "$rss" -lt $((rss0 - 65536)) ] && break
	done
	echo "QEMU RSS: $rss0 KiB, then $rss KiB"
	[ "$rss" -lt $((rss0 - 65536)) ]
	run -0 pisb exec vr -- grep ^Cached: /proc/meminfo
	[ "$(awk '{ print $2 }' <<<"$output")" -lt 32768 ]
	# what was dropped is read again, whole
	run -0 pisb exec vr -- sh -c 'wc -c < /root/big'
	[ "$output" = 100663296 ]
	run -0 pisb destroy vr --confirm vr
}

@test "destroy stops the VM and removes everything" {
	run -0 pisb inspect vm1
	qpid=$(jq -r .controller.initPid <<<"$output")
	run -0 pisb destroy vm1 --confirm vm1
	[ ! -e "$PI_SANDBOX_HOME/instances/vm1" ]
	[ -z "$(ls -A "$PI_SANDBOX_HOME/trash" 2>/dev/null)" ]
	! grep -qs qemu-system "/proc/$qpid/cmdline"
	run -0 pisb list --json
	[ "$output" = "[]" ]
	run -3 pisb exec vm1 -- true
}
