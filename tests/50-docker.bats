#!/usr/bin/env bats
# pisb docker: only a sbx sandbox has a docker daemon of its own, and that
# driver is not in this build; so every verb refuses honestly, naming the
# driver, and nothing ever reaches the host's docker (no docker process,
# DOCKER_HOST ignored).
load helpers

VERBS="status verify resources prune ps images pull load run logs exec build init compose stop start rm curl"

setup() {
	pisb_test_setup
	mkdir -p "$PI_SANDBOX_HOME"
	chmod 700 "$PI_SANDBOX_HOME"
}

teardown() {
	if [ -n "${LISTENER:-}" ]; then kill "$LISTENER" 2>/dev/null || true; fi
	for n in $(pisb list -q 2>/dev/null); do pisb destroy "$n" --confirm "$n" >/dev/null 2>&1 || true; done
}

# a record for a sandbox of driver $2 (no controller needed to refuse)
fake_record() {
	mkdir -p "$PI_SANDBOX_HOME/instances/$1"
	jq -n --arg n "$1" --arg d "$2" '{version:1,name:$n,driver:$d,createdAt:1,template:null,owner:{pid:0,start:0},sessionId:null,remote:null,config:{version:1}}' \
		> "$PI_SANDBOX_HOME/instances/$1/record.json"
}

@test "a local sandbox has no daemon of its own: every verb exits 1 and says what it needs" {
	require_userns
	run -0 pisb create d
	for v in $VERBS; do
		run -1 --separate-stderr pisb docker d "$v"
		[ "$stderr" = "fatal: sandbox 'd' (driver local) has no docker daemon of its own; pisb docker needs a sbx sandbox (driver: sbx), which this build does not provide yet" ] ||
			{ echo "verb $v: $stderr"; false; }
		[ -z "$output" ]
	done
	# arguments after -- change nothing
	run -1 --separate-stderr pisb docker d run -- alpine echo hi
	[[ $stderr == *"has no docker daemon of its own"* ]]
	# and the sandbox is untouched
	run -0 pisb exec d -- true
}

@test "exit codes: 3 unknown sandbox, 2 unknown verb or missing arguments" {
	run -3 --separate-stderr pisb docker nosuch ps
	[ "$stderr" = "fatal: no such sandbox 'nosuch'" ]
	fake_record d local
	run -2 --separate-stderr pisb docker d frobnicate
	[[ $stderr == *"unknown verb 'frobnicate'"* ]]
	run -2 --separate-stderr pisb docker d
	run -2 --separate-stderr pisb docker
	run -2 --separate-stderr pisb docker BAD ps
	# --json errors are JSON on stdout too (pisb action's contract)
	run -3 --separate-stderr pisb docker nosuch ps --json-errors
	jq -e '.error.exit == 3' <<<"$output"
}

@test "other drivers: a sbx record says the driver is missing from this build; remote ones have no daemon" {
	fake_record box sbx
	run -1 --separate-stderr pisb docker box ps
	[[ $stderr == *"sandbox 'box' uses driver sbx, which this build does not provide yet"* ]]
	[[ $stderr == *"will not fall back to the host's docker daemon"* ]]
	fake_record far opensandbox
	run -1 --separate-stderr pisb docker far images
	[[ $stderr == *"sandbox 'far' (driver opensandbox) has no docker daemon of its own"* ]]
}

@test "the host's docker is never touched: no docker process, DOCKER_HOST and the host socket ignored" {
	require_cmd python3
	fake_record d local
	fake_record box sbx
	# a docker on PATH that would leave a mark
	mkdir -p "$BATS_TEST_TMPDIR/bin"
	printf '#!/bin/sh\necho "$0 $*" >> %s/docker-ran\n' "$BATS_TEST_TMPDIR" > "$BATS_TEST_TMPDIR/bin/docker"
	chmod +x "$BATS_TEST_TMPDIR/bin/docker"
	# a "daemon" on DOCKER_HOST that records every connection
	sock=$BATS_TEST_TMPDIR/docker.sock
	python3 -c '
import os, socket, sys
s = socket.socket(socket.AF_UNIX)
s.bind(sys.argv[1]); s.listen(8)
open(sys.argv[1] + ".ready", "w").close()
while True:
    c, _ = s.accept()
    open(sys.argv[2], "a").write("connect\n")
    c.close()
' "$sock" "$BATS_TEST_TMPDIR/daemon-hit" 3>&- &
	LISTENER=$!
	for i in $(seq 100); do [ -e "$sock.ready" ] && break; sleep 0.05; done
	for n in d box; do
		for v in $VERBS; do
			run -1 env PATH="$BATS_TEST_TMPDIR/bin:$PATH" DOCKER_HOST="unix://$sock" DOCKER_CONTEXT=evil \
				pisb docker "$n" "$v"
		done
	done
	[ ! -e "$BATS_TEST_TMPDIR/docker-ran" ]
	[ ! -e "$BATS_TEST_TMPDIR/daemon-hit" ]
	# the binary has no reference to docker's socket or DOCKER_HOST at all
	run -1 grep -c -e 'docker.sock' -e 'DOCKER_HOST' "$PISB_BIN_DIR/pisb-docker"
}
