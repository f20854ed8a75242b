#!/usr/bin/env bats
# pisb verify: the live isolation audit passes on a real sandbox, and every
# one of its checks can fail (the PISB_VERIFY_ON_HOST=1 test hook runs the
# probes on the host; real tampering with a sandbox's network and limits).
load helpers

CHECKS="host-files host-env root-mapping network host-loopback limits host-sockets host-processes namespaces no-new-privs"

setup() {
	pisb_test_setup
	require_userns
}

teardown() {
	for n in $(pisb list -q 2>/dev/null); do pisb destroy "$n" --confirm "$n" >/dev/null 2>&1 || true; done
	if [ -n "${VETH:-}" ]; then ip link del "$VETH" 2>/dev/null || true; fi
	if [ -n "${USTATE:-}" ]; then
		as_user pisb --state-dir "$USTATE/s" destroy u1 --confirm u1 >/dev/null 2>&1 || true
		rm -rf "$USTATE"
	fi
}

# a config whose limits no ordinary host process is under
small_limits() {
	printf 'resources:\n  cpus: 1\n  memoryGiB: 1\n  pids: 64\n' > "$BATS_TEST_TMPDIR/small.yaml"
}

# a unix socket file at $1, like an ssh agent's
make_sock() {
	python3 -c 'import socket, sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])' "$1"
}

@test "every check passes on a fresh sandbox (root)" {
	require_root
	require_cmd python3
	run -0 pisb create v
	make_sock "$BATS_TEST_TMPDIR/agent.sock"
	SSH_AUTH_SOCK=$BATS_TEST_TMPDIR/agent.sock run -0 --separate-stderr pisb verify v
	[[ $output == *"the caller's SSH_AUTH_SOCK absent"* ]]
	for c in $CHECKS; do
		grep -q "^PASS  $c " <<<"$output" || { echo "no PASS for $c"; false; }
	done
	[ "$(grep -c '^PASS  ' <<<"$output")" = 10 ]
	[[ $output != *FAIL* ]]
	# the evidence names what was looked for
	[[ $output == *"PISB_CANARY_"*"absent"* ]]
	# as root, the sandbox's own range (its record's uidBase)
	if [ "$(id -u)" = 0 ]; then
		[[ $output == *"root inside is uid $(jq -r .uidBase "$PI_SANDBOX_HOME/instances/v/record.json") outside"* ]]
	else
		[[ $output == *"root inside is uid $(id -u) outside"* ]]
	fi
	[[ $output == *"pid 1 is pisb-init"* ]]
	[[ $output == *"192.0.2.1:80: Network is unreachable"* ]]
	# the canaries this verify names (files and socket) were removed
	# again; other suites' verifies run beside this one, so only these
	local canaries c
	canaries=$(grep -o '/[^ ,;]*/\.pisb-canary-[^ ,;'"'"']*' <<<"$output" | sort -u)
	echo "$canaries"
	[ "$(grep -c . <<<"$canaries")" -ge 3 ]
	for c in $canaries; do
		[ ! -e "$c" ] || { echo "left behind: $c"; false; }
	done
}

@test "verify --json: {name, checks:[{check, pass, evidence}], pass}, in a fixed order" {
	require_root
	small_limits
	run -0 pisb create v -f "$BATS_TEST_TMPDIR/small.yaml"
	run --separate-stderr pisb verify v --json
	# a failing check says which, with its evidence
	[ "$status" -eq 0 ] || { jq -c '.checks[] | select(.pass | not)' <<<"$output" || echo "$output"; echo "$stderr"; false; }
	jq -e '.name == "v" and .pass == true and .onHost == false' <<<"$output"
	jq -e '(.checks | length) == 10 and all(.checks[]; (.check | type) == "string" and .pass == true and (.evidence | type) == "string" and (.evidence | length) > 0)' <<<"$output"
	jq -e '[.checks[].check] == ["host-files","host-env","root-mapping","network","host-loopback","limits","host-sockets","host-processes","namespaces","no-new-privs"]' <<<"$output"
	jq -e '.checks[] | select(.check == "limits") | .evidence | test("asked for in the config: 1 cpus, 1 GiB, 64 pids")' <<<"$output"
	[ -z "$stderr" ]
}

@test "each check fails when its probe runs on the host (PISB_VERIFY_ON_HOST=1, test-only hook)" {
	require_cmd python3
	small_limits
	run -0 pisb create v -f "$BATS_TEST_TMPDIR/small.yaml"
	make_sock "$BATS_TEST_TMPDIR/agent.sock"
	run -1 --separate-stderr env PISB_VERIFY_ON_HOST=1 SSH_AUTH_SOCK="$BATS_TEST_TMPDIR/agent.sock" pisb verify v --json
	jq -e '.pass == false and .onHost == true and (.checks | length) == 10' <<<"$output"
	for c in $CHECKS; do
		jq -e --arg c "$c" '.checks[] | select(.check == $c) | .pass == false' <<<"$output" >/dev/null ||
			{ echo "check $c did not fail on the host"; false; }
	done
	ev() { jq -r --arg c "$1" '.checks[] | select(.check == $c) | .evidence' <<<"$output"; }
	[[ $(ev host-files) == *"planted on the host is readable"* ]]
	[[ $(ev host-env) == *"PISB_CANARY_"*"is visible inside"* ]]
	[[ $(ev root-mapping) == *"root inside is root outside"* ]]
	[[ $(ev network) == *"a route out exists"* ]]
	[[ $(ev host-loopback) == *"connected to the host's listener"* ]]
	[[ $(ev limits) == *"not all in force"* ]]
	[[ $(ev host-sockets) == *"the caller's SSH_AUTH_SOCK '$BATS_TEST_TMPDIR/agent.sock' exists"* ]]
	[[ $(ev host-sockets) == *".pisb-canary-"*".sock' is visible"* ]]
	[[ $(ev host-processes) == *"not pisb-init"* ]]
	[[ $(ev namespaces) == *"shared with the host: user,mnt,pid,net,ipc,uts,cgroup"* ]]
	[[ $(ev no-new-privs) == *"NoNewPrivs is 0"* ]]
	# the human form says FAIL on every line and names the hook
	run -1 --separate-stderr env PISB_VERIFY_ON_HOST=1 pisb verify v
	[ "$(grep -c '^FAIL  ' <<<"$output")" = 10 ]
	[[ $output == *"PISB_VERIFY_ON_HOST=1: a test hook"* ]]
}

@test "a route added into the sandbox's network namespace fails the network check" {
	require_root
	require_cmd ip
	require_cmd nsenter
	run -0 pisb create v
	init=$(pisb inspect v | jq -r .controller.initPid)
	VETH=pv$$
	ip link add "$VETH" type veth peer name pvin netns "/proc/$init/ns/net" || skip "machine lacks: veth links"
	ip addr add 10.254.99.1/30 dev "$VETH"
	ip link set "$VETH" up
	nsenter -t "$init" -n sh -c 'ip addr add 10.254.99.2/30 dev pvin && ip link set pvin up && ip route add default via 10.254.99.1'
	run -1 --separate-stderr pisb verify v --json
	jq -e '.pass == false' <<<"$output"
	jq -e '.checks[] | select(.check == "network") | .pass == false and (.evidence | test("pvin") and test("a route out exists"))' <<<"$output"
	jq -e '[.checks[] | select(.pass == false) | .check] == ["network"]' <<<"$output"
	ip link del "$VETH"
	VETH=
	run -0 pisb verify v
}

@test "a limit lifted from the sandbox's cgroup fails the limits check" {
	require_root
	small_limits
	run -0 pisb create v -f "$BATS_TEST_TMPDIR/small.yaml"
	init=$(pisb inspect v | jq -r .controller.initPid)
	if [ "$(stat -fc %T /sys/fs/cgroup)" = cgroup2fs ]; then
		f=/sys/fs/cgroup$(sed -n 's/^0:://p' "/proc/$init/cgroup")/pids.max
	else
		f=/sys/fs/cgroup/pids$(awk -F: '$2 ~ /(^|,)pids(,|$)/ { print $3 }' "/proc/$init/cgroup")/pids.max
	fi
	[ "$(cat "$f")" = 64 ]
	echo max > "$f"
	run -1 --separate-stderr pisb verify v --json
	jq -e '.checks[] | select(.check == "limits") | .pass == false and (.evidence | test("pids unlimited"))' <<<"$output"
	jq -e '[.checks[] | select(.pass == false) | .check] == ["limits"]' <<<"$output"
}

@test "verify exit codes: 0 all pass, 1 a failure, 2 usage, 3 unknown, 5 not running" {
	require_root
	run -2 --separate-stderr pisb verify
	run -3 --separate-stderr pisb verify nosuch
	[[ $stderr == *"no such sandbox 'nosuch'"* ]]
	run -0 pisb create v
	run -0 pisb verify v
	run -1 env PISB_VERIFY_ON_HOST=1 pisb verify v
	run -0 pisb stop v
	run -5 --separate-stderr pisb verify v
	[[ $stderr == *"is not running"* ]]
	run -0 pisb start v
	run -0 pisb verify v -q
}

@test "unprivileged (pisbtest): everything isolated; default limits unenforced are a FAIL with the reason" {
	USTATE=$(mktemp -d /tmp/pisb-user.XXXXXX)
	chown pisbtest "$USTATE" 2>/dev/null || skip "machine lacks: the test user pisbtest"
	uid=$(id -u pisbtest)
	run -0 as_user pisb --state-dir "$USTATE/s" create u1
	run -1 --separate-stderr as_user pisb --state-dir "$USTATE/s" verify u1 --json
	jq -e '.pass == false and (.checks | length) == 10' <<<"$output"
	jq -e '[.checks[] | select(.pass == false) | .check] == ["limits"]' <<<"$output"
	jq -e '.checks[] | select(.check == "limits") | .evidence | test("not asked for explicitly") and test("not enforced") and test("pisb doctor")' <<<"$output"
	jq -e --arg u "$uid" '.checks[] | select(.check == "root-mapping") | .evidence | test("root inside is uid " + $u + " outside")' <<<"$output"
	# its $HOME got a canary too, and it is not visible inside
	jq -e '.checks[] | select(.check == "host-files") | .evidence | test("/home/pisbtest/.pisb-canary-")' <<<"$output"
	# and the hook makes every check fail for this user as well
	run -1 --separate-stderr as_user env PISB_VERIFY_ON_HOST=1 pisb --state-dir "$USTATE/s" verify u1 --json
	jq -e 'all(.checks[]; .pass == false)' <<<"$output"
}

# ---- the project check ----

# a project $P with secrets (a file, a key in a subdirectory, a file in a
# secret directory), a nested .git, an ordinary file; owned by a user
make_secret_project() {
	P=$BATS_TEST_TMPDIR/proj
	mkdir -p "$P/sub/.git" "$P/certs.pem" "$P/.git"
	printf 'hi\n' >"$P/a.txt"
	printf 'TOKEN=host-secret-%s\n' "$RANDOM" >"$P/.env"
	printf 'PRIVATE KEY %s\n' "$RANDOM" >"$P/sub/id_ed25519"
	printf 'CERT %s\n' "$RANDOM" >"$P/certs.pem/x"
	chown -R 4242:4343 "$P"
}

@test "project: with a bound project, verify checks that none of the host's secrets reads inside and every .git is read-only" {
	require_root
	make_secret_project
	printf 'project:\n  mode: bind\n' >"$BATS_TEST_TMPDIR/b.yaml"
	run -0 pisb create v -f "$BATS_TEST_TMPDIR/b.yaml" --project "$P"
	run -0 --separate-stderr pisb verify v --json
	jq -e '[.checks[].check] | .[-1] == "project" and length == 11' <<<"$output"
	jq -e '.checks[] | select(.check == "project") | .pass and (.evidence | test("^bind: 3 secret files") and test("every .git read-only"))' <<<"$output"
	# the human form too
	run -0 pisb verify v
	grep -q '^PASS  project ' <<<"$output"
}

@test "project: bind-ro and copy pass; the host's secret content planted inside a copy fails the check, naming the file" {
	require_root
	make_secret_project
	printf 'project:\n  mode: bind-ro\n' >"$BATS_TEST_TMPDIR/r.yaml"
	run -0 pisb create r -f "$BATS_TEST_TMPDIR/r.yaml" --project "$P"
	run -0 --separate-stderr pisb verify r --json
	jq -e '.checks[] | select(.check == "project") | .pass and (.evidence | test("^bind-ro: 3 secret files") and test("the project read-only"))' <<<"$output"
	run -0 pisb create c --project "$P"
	run -0 --separate-stderr pisb verify c --json
	jq -e '.checks[] | select(.check == "project") | .pass and (.evidence | test("^copy: 3 secret files"))' <<<"$output"
	# a file of the same name inside is the agent's own business; the
	# host's content in it is what the check looks for
	run -0 pisb exec c -- sh -c 'echo other > .env'
	run -0 pisb verify c
	cp "$P/sub/id_ed25519" "$BATS_TEST_TMPDIR/key"
	run -0 pisb exec c -- mkdir -p sub
	run -0 pisb write c sub/id_ed25519 --from "$BATS_TEST_TMPDIR/key"
	run -1 --separate-stderr pisb verify c --json
	jq -e '.pass == false and (.checks[] | select(.check == "project") | (.pass | not) and (.evidence | test("the host.s secret .sub/id_ed25519. reads inside")))' <<<"$output"
}

@test "project: secrets: include says the secrets are inside by choice; a sandbox without a project has no project check" {
	require_root
	make_secret_project
	printf 'project:\n  secrets: include\n' >"$BATS_TEST_TMPDIR/i.yaml"
	run -0 pisb create i -f "$BATS_TEST_TMPDIR/i.yaml" --project "$P"
	run -0 pisb exec i -- cat .env
	[ "$output" = "$(cat "$P/.env")" ]
	run -0 --separate-stderr pisb verify i --json
	jq -e '.checks[] | select(.check == "project") | .pass and (.evidence | test("inside by choice"))' <<<"$output"
	run -0 pisb create n
	run -0 --separate-stderr pisb verify n --json
	jq -e '[.checks[].check] | index("project") == null' <<<"$output"
}
