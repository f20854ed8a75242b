#!/usr/bin/env bats
# DESIGN §10 for the local driver: each rule is tried for real.
load helpers

setup_file() {
	export PI_SANDBOX_HOME="$BATS_FILE_TMPDIR/state"
	unshare -Ur true 2>/dev/null || return 0
	printf 'resources:\n  cpus: 1\n  memoryGiB: 1\n  pids: 128\n' > "$BATS_FILE_TMPDIR/lim.yaml"
	if [ "$(id -u)" = 0 ]; then
		pisb create iso -f "$BATS_FILE_TMPDIR/lim.yaml" >/dev/null
	else
		pisb create iso >/dev/null
	fi
}

teardown_file() {
	pisb destroy iso --confirm iso >/dev/null 2>&1 || true
}

setup() {
	export PI_SANDBOX_HOME="$BATS_FILE_TMPDIR/state"
	require_userns
}

@test "root inside is not root outside" {
	run -0 pisb exec iso -- cat /proc/self/uid_map
	read -r inside outside count <<<"$output"
	[ "$inside" = 0 ]
	[ "$outside" != 0 ]
	init=$(pisb inspect iso | jq -r .controller.initPid)
	[ "$(awk '/^Uid:/ {print $2}' /proc/$init/status)" != 0 ]
}

@test "host files are invisible: /root, /home, the checkout, the state dir, a planted secret" {
	secret="$BATS_TEST_TMPDIR/host-secret-$$"
	echo top-secret > "$secret"
	run pisb exec iso -- cat "$secret"
	[ "$status" -ne 0 ]
	[[ $output != *top-secret* ]]
	run -0 pisb exec iso --sh 'ls -A /root /home | grep -v "^/" | grep -v "^$" || true'
	[ -z "$output" ]
	run pisb exec iso -- ls "$TOP/Makefile"
	[ "$status" -ne 0 ]
	run pisb exec iso -- ls "$PI_SANDBOX_HOME"
	[ "$status" -ne 0 ]
	run -0 pisb exec iso --sh 'cat /etc/shadow 2>/dev/null | wc -c'
	[ "$output" = 0 ]
}

@test "system directories are read-only" {
	run pisb exec iso --sh 'echo x > /usr/bin/pisb-evil'
	[ "$status" -ne 0 ]
	[ ! -e /usr/bin/pisb-evil ]
	run pisb exec iso --sh 'echo x >> /etc/passwd'
	[ "$status" -ne 0 ]
}

@test "no host sockets: docker, ssh agent" {
	sock="$BATS_TEST_TMPDIR/agent.sock"
	python3 -c "import socket,sys; s=socket.socket(socket.AF_UNIX); s.bind(sys.argv[1])" "$sock"
	SSH_AUTH_SOCK="$sock" run -0 pisb exec iso --sh 'echo "[$SSH_AUTH_SOCK]"; test -e /var/run/docker.sock && echo docker; test -e /run/docker.sock && echo docker; test -e '"$sock"' && echo agent; true'
	[ "$output" = "[]" ]
}

@test "host processes are invisible and cannot be signalled" {
	sleep 300 &
	hostpid=$!
	run -0 pisb exec iso --sh 'ls /proc | grep -E "^[0-9]+$" | sort -n | head -1; cat /proc/1/comm'
	[ "$(sed -n 1p <<<"$output")" = 1 ]
	[ "$(sed -n 2p <<<"$output")" = pisb-init ]
	run -0 pisb exec iso --sh "ps -eo comm 2>/dev/null | grep -c -x sleep || true"
	[ "$output" = 0 ]
	run pisb exec iso -- kill -9 "$hostpid"
	kill -0 "$hostpid"
	kill "$hostpid"
}

@test "the init holds nothing of the host: no environment, no command line path, only stdio and its socket" {
	run -0 pisb exec iso --sh 'tr "\0" "\n" </proc/1/environ | wc -l; tr "\0" " " </proc/1/cmdline; echo; ls /proc/1/fd | sort -n | tr "\n" " "'
	[ "$(sed -n 1p <<<"$output")" = 0 ]
	[ "$(sed -n 2p <<<"$output")" = "pisb-init " ]
	[ "$(sed -n 3p <<<"$output")" = "0 1 2 3 " ]
	# the controller's environment is the host's: the init's is empty
	ctl=$(pisb inspect iso | jq -r .controller.pid)
	[ -n "$(tr "\0" "\n" <"/proc/$ctl/environ")" ]
}

@test "no network but loopback: host loopback and outside addresses are unreachable" {
	python3 -c 'import socket,time; s=socket.socket(); s.bind(("127.0.0.1",0)); s.listen(); print(s.getsockname()[1], flush=True); time.sleep(30)' > "$BATS_TEST_TMPDIR/port" &
	srv=$!
	for i in $(seq 50); do [ -s "$BATS_TEST_TMPDIR/port" ] && break; sleep 0.1; done
	port=$(cat "$BATS_TEST_TMPDIR/port")
	probe='import socket,sys
s=socket.socket(); s.settimeout(2)
try:
    s.connect((sys.argv[1], int(sys.argv[2]))); print("connected")
except OSError as e: print("refused", e.errno)'
	run -0 pisb exec iso -- python3 -c "$probe" 127.0.0.1 "$port"
	[[ $output == refused* ]]
	# TEST-NET-1: there is no route at all, so nothing is sent
	run -0 pisb exec iso -- python3 -c "$probe" 192.0.2.1 80
	[[ $output == "refused 101" ]]
	run -0 pisb exec iso --sh 'ls /sys/class/net'
	[ "$output" = lo ]
	kill $srv
}

@test "loopback inside works for the sandbox's own servers" {
	run -0 pisb exec iso -- python3 -c 'import socket; a=socket.socket(); a.bind(("127.0.0.1",0)); a.listen(); b=socket.create_connection(a.getsockname()); print("ok")'
	[ "$output" = ok ]
}

@test "a memory hog is killed at its limit; the host and the sandbox go on" {
	require_root
	run pisb exec iso -- python3 -c 'b=bytearray(3*1024*1024*1024); print("allocated")'
	[ "$status" -eq 137 ]
	[[ $output != *allocated* ]]
	run -0 pisb exec iso -- echo alive
}

@test "a fork bomb stops at the pids limit; the host and other sandboxes keep working" {
	require_root
	run -0 pisb create other
	run pisb exec iso --sh 'for i in $(seq 400); do sleep 4 & done 2>/dev/null; echo started $(jobs -p | wc -l)'
	run -0 pisb exec other -- echo other-ok
	run -0 true
	cg=/sys/fs/cgroup/pids/$(jq -r .cgroup "$PI_SANDBOX_HOME/instances/iso/status.json")
	n=$(cat "$cg/pids.current")
	# it stayed under the ceiling, and the ceiling did refuse forks
	[ "$n" -le 128 ]
	[ "$(awk '/^max/ {print $2}' "$cg/pids.events")" -gt 0 ]
	# the bomb's children end by themselves; wait for the sandbox to recover
	for i in $(seq 100); do [ "$(cat "$cg/pids.current")" -le 4 ] && break; sleep 0.1; done
	run -0 pisb exec iso -- echo recovered
	pisb destroy other --confirm other
}

@test "the same isolation holds for an unprivileged user" {
	st=$(mktemp -d /tmp/pisb-user.XXXXXX); chown pisbtest "$st" 2>/dev/null || skip "machine lacks: the test user pisbtest"
	run -0 as_user pisb --state-dir "$st/s" create u
	run -0 as_user pisb --state-dir "$st/s" exec u -- cat /proc/self/uid_map
	read -r inside outside count <<<"$output"
	[ "$inside" = 0 ]
	[ "$outside" = "$(id -u pisbtest)" ]
	[ "$count" = 1 ]
	run -0 as_user pisb --state-dir "$st/s" exec u --sh 'ls -A /root | wc -l; ls -A /home | wc -l; ls /sys/class/net'
	[ "$output" = "$(printf '0\n0\nlo')" ]
	# masked: unreadable, or an empty file where the host has its hashes
	run as_user pisb --state-dir "$st/s" exec u --sh 'cat /etc/shadow 2>/dev/null | wc -c'
	[ "$output" = 0 ]
	as_user pisb --state-dir "$st/s" destroy u --confirm u
	rm -rf "$st"
}

@test "disk full inside is an error inside: /tmp is bounded; the host is unaffected" {
	before=$(df --output=avail / | tail -1)
	# more than /tmp holds (half the memory), less than the memory limit
	size=$(pisb exec iso --sh "df -B1 --output=size /tmp | tail -1")
	run pisb exec iso --sh "head -c $((size + 64 * 1024 * 1024)) /dev/zero > /tmp/fill"
	echo "$output"
	[ "$status" -ne 0 ]
	[[ $output == *"No space left"* ]]
	run -0 pisb exec iso --sh 'rm /tmp/fill; echo still-fine'
	[ "$output" = still-fine ]
	after=$(df --output=avail / | tail -1)
	# the host's disk did not absorb what was written
	[ $(( before - after )) -lt 200000 ]
}
