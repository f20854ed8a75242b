#!/usr/bin/env bats
# The vm driver with real VMs: QEMU (TCG when KVM does not work here), our
# initramfs and guest agent, a Debian kernel.  One VM serves the whole file
# (setup_file); stop/start and a killed QEMU boot it twice more.
load helpers

# What the driver needs; a skip names what this machine lacks.
vm_prereqs() {
	command -v qemu-system-x86_64 >/dev/null || { echo "qemu-system-x86_64 (install qemu-system-x86)"; return; }
	command -v mke2fs >/dev/null || [ -x /sbin/mke2fs ] || { echo "mke2fs (install e2fsprogs)"; return; }
	[ -x "$PISB_BIN_DIR/pisb-agent" ] || { echo "bin/pisb-agent (run make)"; return; }
	local k
	if [ -n "${PISB_VM_KERNEL:-}" ] || [ -r "/boot/vmlinuz-$(uname -r)" ]; then return; fi
	for k in ${PISB_VM_CACHE:-} ${XDG_CACHE_HOME:+$XDG_CACHE_HOME/pisb/vm} ${HOME:+$HOME/.cache/pisb/vm} /var/cache/pisb/vm; do
		compgen -G "$k/boot/vmlinuz-*" >/dev/null && return
	done
	echo "a guest kernel (run: make vm-kernel)"
}

setup_file() {
	export PI_SANDBOX_HOME="$BATS_FILE_TMPDIR/state"
	[ -z "$(vm_prereqs)" ] || return 0
	mkdir -p "$BATS_FILE_TMPDIR"
	cat > "$BATS_FILE_TMPDIR/vm.yaml" <<-'EOF'
	version: 1
	driver: vm
	resources: { cpus: 2, memoryGiB: 1 }
	diskGiB: 2
	env: { FROM_CONFIG: yes-it-is }
	setup:
	  - echo setup-ran > /root/setup-mark
	  - echo setup-says-hello
	EOF
	echo "host secret" > "$BATS_FILE_TMPDIR/host-only-file"
	pisb create vm1 -f "$BATS_FILE_TMPDIR/vm.yaml" > "$BATS_FILE_TMPDIR/create.out" 2> "$BATS_FILE_TMPDIR/create.err" ||
		echo "create failed: $?" >> "$BATS_FILE_TMPDIR/create.err"
}

teardown_file() {
	pisb destroy vm1 --confirm vm1 >/dev/null 2>&1 || true
}

setup() {
	export PI_SANDBOX_HOME="$BATS_FILE_TMPDIR/state"
	local lacks
	lacks=$(vm_prereqs)
	[ -z "$lacks" ] || skip "machine lacks: $lacks"
	if grep -q "create failed" "$BATS_FILE_TMPDIR/create.err"; then
		cat "$BATS_FILE_TMPDIR/create.err"
		false
	fi
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
	run -0 pisb list --json
	jq -e '.[] | select(.name == "vm1") | .driver == "vm" and .status == "running"' <<<"$output"
	# the agent's sockets are the owner's only
	for s in "$PI_SANDBOX_HOME"/instances/vm1/agent*.sock; do
		[ "$(stat -c %a "$s")" = 600 ]
	done
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
	run -0 pisb exec vm1 --sh 'ps -o args | grep -c "[s]leep 60" || true'
	[ "$output" = 0 ]
	# a client killed outright: the agent kills the command when the
	# port stays closed (1.5 s)
	pisb exec vm1 -- sleep 61 > /dev/null 2>&1 < /dev/null &
	pid=$!
	for _ in $(seq 100); do
		[ "$(pisb exec vm1 --sh 'ps -o args | grep -c "[s]leep 61" || true')" = 1 ] && break
		sleep 0.1
	done
	kill -KILL "$pid"
	wait "$pid" || true
	for _ in $(seq 100); do
		[ "$(pisb exec vm1 --sh 'ps -o args | grep -c "[s]leep 61" || true')" = 0 ] && break
		sleep 0.2
	done
	run -0 pisb exec vm1 --sh 'ps -o args | grep -c "[s]leep 61" || true'
	[ "$output" = 0 ]
}

@test "the guest has no network interface but lo, and none of the host's files" {
	run -0 pisb exec vm1 -- ls /sys/class/net
	[ "$output" = lo ]
	run -0 pisb exec vm1 --sh 'tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d " "'
	[ "$output" = lo ]
	run -1 pisb exec vm1 -- cat "$BATS_FILE_TMPDIR/host-only-file"
	run -1 pisb exec vm1 -- ls "$TOP"
	run -0 pisb exec vm1 --sh 'grep -c -E " (9p|virtiofs|nfs|fuse)" /proc/mounts || true'
	[ "$output" = 0 ]
	run -0 pisb exec vm1 -- hostname
	[ "$output" = vm1 ]
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
	run -3 pisb exec-status vm1 vm-00000000
	# nothing is left running in the guest
	run -0 pisb exec vm1 --sh 'ps -o args | grep -c "[s]leep 60" || true'
	[ "$output" = 0 ]
}

@test "verbs the driver does not serve fail with 1, naming it" {
	run -1 --separate-stderr pisb shell vm1
	[[ $stderr == *"driver vm"* ]]
	run -1 --separate-stderr pisb read vm1 /etc/hostname
	[[ $stderr == *"vm"* ]]
	printf 'version: 1\ndriver: vm\nservices: { web: { command: "true", port: 8080 } }\n' > "$BATS_TEST_TMPDIR/svc.yaml"
	run -2 --separate-stderr pisb create vm2 -f "$BATS_TEST_TMPDIR/svc.yaml"
	[[ $stderr == *"services"* ]]
	run -3 pisb inspect vm2
	run -1 --separate-stderr pisb prepare tv -f "$BATS_FILE_TMPDIR/vm.yaml"
	[[ $stderr == *"driver vm"* ]]
	run -1 --separate-stderr pisb svc vm1 status
	[[ $stderr == *"driver vm"* ]]
	run -1 --separate-stderr pisb verify vm1
	[[ $stderr == *"driver vm"* ]]
	# logs: no controller, no services; the setup's output
	run -0 pisb logs vm1
	[[ $output == *setup-says-hello* ]]
	run -1 --separate-stderr pisb logs vm1 web
	[[ $stderr == *"sandbox 'vm1' has no services"*"setup.log"* ]]
}

@test "the disk persists across stop and start; stop, start and status" {
	run -0 pisb exec vm1 --sh 'echo kept > /root/kept; echo ws > /workspace/w'
	run -0 pisb stop vm1
	run -0 pisb list --json
	jq -e '.[] | select(.name == "vm1") | .status == "stopped"' <<<"$output"
	run -5 --separate-stderr pisb exec vm1 -- true
	[[ $stderr == *"pisb start vm1"* ]]
	run -0 pisb start vm1
	run -0 pisb exec vm1 -- cat /root/kept /workspace/w /root/setup-mark
	[ "$output" = "$(printf 'kept\nws\nsetup-ran')" ]
	run -0 pisb start vm1
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
	run -0 pisb start vm1
	run -0 pisb exec vm1 -- cat /root/kept
	[ "$output" = kept ]
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
