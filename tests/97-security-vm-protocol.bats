#!/usr/bin/env bats
# The host side of the vm agent protocol against a hostile guest: guest
# root can replace pisb-agent on a command port, so every byte from it is
# hostile input (DESIGN §10).  The guest is tests/fakes/vm-agent on the
# sockets where QEMU's virtio-serial ports would be; the instance is a
# running vm sandbox as far as the host can tell (record, status, a held
# controller.lock), so no VM needs to boot.
load helpers

setup() {
	pisb_test_setup
	require_cmd python3
	require_cmd flock
	mkdir -p -m 0700 "$PI_SANDBOX_HOME/instances/box"
	chmod 0700 "$PI_SANDBOX_HOME" "$PI_SANDBOX_HOME/instances"
	D=$PI_SANDBOX_HOME/instances/box
	printf 'version: 1\ndriver: vm\n' > "$BATS_TEST_TMPDIR/vm.yaml"
	cfg=$(pisb validate -f "$BATS_TEST_TMPDIR/vm.yaml" --json)
	printf '{"version":1,"name":"box","driver":"vm","createdAt":1,"config":%s}\n' "$cfg" > "$D/record.json"
	printf '{"state":"running"}\n' > "$D/status.json"
	chmod 0600 "$D"/*.json
	flock "$D/controller.lock" sleep 600 3>&- &
	LOCKER=$!
	AGENT=
}

teardown() {
	[ -z "$AGENT" ] || kill "$AGENT" 2>/dev/null || true
	kill "$LOCKER" 2>/dev/null || true
}

start_agent() {
	"$TOP/tests/fakes/vm-agent" "$D" "$1" 3>&- &
	AGENT=$!
	for _ in $(seq 100); do [ -e "$D/agent.ready" ] && return 0; sleep 0.05; done
	return 1
}

@test "8 MiB of noise from the guest is skipped in one pass and the real frames still arrive" {
	start_agent noise
	run -7 --separate-stderr pisb exec box -- true
	[ "$output" = ok ]
}

@test "frame headers with over-long lengths are noise, not allocations" {
	start_agent hugelen
	run -3 --separate-stderr pisb exec box -- true
	[ "$output" = ok ]
}

@test "a truncated frame: pisb exec gives up with a message instead of hanging" {
	start_agent truncate
	run -5 --separate-stderr timeout 60 pisb exec box -- true
	[[ $stderr == *"began a frame and did not finish it"* ]]
}

@test "a guest that never answers: a second SIGTERM ends pisb exec at once, exit 143" {
	start_agent silent
	pisb exec box -- sleep 1000 2> "$BATS_TEST_TMPDIR/err" &
	pid=$!
	sleep 1
	kill -TERM "$pid"
	sleep 0.3
	kill -0 "$pid"             # still waiting for the guest's answer
	kill -TERM "$pid"
	for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
	run -143 wait "$pid"
	grep -q "did not report the command's end" "$BATS_TEST_TMPDIR/err"
}

@test "a guest that never answers: one SIGTERM ends pisb exec after the grace period" {
	start_agent silent
	pisb exec box -- sleep 1000 2> "$BATS_TEST_TMPDIR/err" &
	pid=$!
	sleep 1
	kill -TERM "$pid"
	for _ in $(seq 200); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
	run -143 wait "$pid"
	grep -q "within 10 s of signal 15" "$BATS_TEST_TMPDIR/err"
}

@test "the frame reader survives random streams (fuzz, bounded)" {
	require_cmd cc
	# the frame code instrumented, the rest of the library as built
	cc -std=gnu11 -D_GNU_SOURCE -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=undefined \
		-iquote "$TOP/common" -iquote "$TOP/drivers/vm" -o "$BATS_TEST_TMPDIR/fuzz" \
		"$TOP/tests/fuzz/vm-frames.c" "$TOP/drivers/vm/vm_exec.c" "$TOP/common/libpisb.a" -lyaml -ldl $(pkg-config --libs libpcre2-8)
	run -0 "$BATS_TEST_TMPDIR/fuzz" 150
	[ "$output" = "150 streams ok" ]
}

@test "the net port's stream layer survives random streams within its bounds (fuzz, both ends)" {
	require_cmd cc
	# vm_mux.c (the previews' and the egress proxy's streams, host and
	# guest side) instrumented
	cc -std=gnu11 -D_GNU_SOURCE -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=undefined \
		-iquote "$TOP/common" -iquote "$TOP/drivers/vm" -o "$BATS_TEST_TMPDIR/fuzz-mux" \
		"$TOP/tests/fuzz/vm-mux.c" "$TOP/drivers/vm/vm_mux.c"
	run -0 --separate-stderr "$BATS_TEST_TMPDIR/fuzz-mux" 30
	[ "$output" = "30 streams ok" ]
	# it did reach the paths that drop and reset, opened guest streams,
	# and the host took some of the guest's opens and refused others
	[[ $stderr =~ dropped\ [1-9][0-9]*,\ resets\ [1-9][0-9]*,\ local\ sockets\ [1-9] ]]
	[[ $stderr =~ guest\ opens\ taken\ [1-9][0-9]*,\ refused\ [1-9] ]]
}

@test "a command port that never answers: pisb exec gives up after PISB_VM_PORT_MS, naming the port" {
	start_agent mute
	PISB_VM_PORT_MS=8000 run -5 pisb exec box -- true
	[[ "$output" == *"did not answer on its command port 1 (2 tries in 8 s)"* ]]
}

@test "a command port that swallowed the first ping (a dead client's half frame): the second try runs the command" {
	start_agent stale
	run -0 pisb exec box -- true
	[ "$output" = ok ]
	# the instance's ports.log says which port did not answer
	run -0 cat "$D/ports.log"
	[[ "$output" == *"command port 1: no answer to PING within 5000 ms (try 1)"* ]]
	[ "${#lines[@]}" -eq 1 ]
}
