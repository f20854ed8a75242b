#!/usr/bin/env bats
# The sbx driver against the fake sbx CLI (tests/fakes/sbx: the real one is
# proprietary and needs KVM and a Docker login).  What pisb passes to sbx
# (argv, environment), lifecycle, teardown policies, exec, exit codes.
load helpers

setup() {
	pisb_test_setup
	require_cmd jq
	require_cmd python3
	export HOME=$BATS_TEST_TMPDIR/home
	mkdir -p "$HOME" "$BATS_TEST_TMPDIR/hostbin"
	SBXS=$HOME/.local/share/docker-sandboxes-fake
	# a host docker that would leave a mark, after the fakes on PATH
	printf '#!/bin/sh\necho "$0 $*" >> %s/host-docker-ran\nexit 99\n' "$BATS_TEST_TMPDIR" \
		> "$BATS_TEST_TMPDIR/hostbin/docker"
	chmod +x "$BATS_TEST_TMPDIR/hostbin/docker"
	export PATH="$TOP/tests/fakes:$PATH:$BATS_TEST_TMPDIR/hostbin"
	export PISB_SBX_POLL_MS=100 PISB_SBX_KEEPALIVE_MS=300
}

teardown() {
	for n in $(pisb list -q 2>/dev/null); do pisb destroy "$n" --confirm "$n" >/dev/null 2>&1 || true; done
	[ ! -e "$BATS_TEST_TMPDIR/host-docker-ran" ] || { echo "a host docker ran:"; cat "$BATS_TEST_TMPDIR/host-docker-ran"; false; }
}

# argv the fake got (without argv[0]), one JSON array a line
calls() { jq -c '.argv[1:]' "$SBXS/calls.log"; }
last_call() { calls | grep -F "\"$1\"" | tail -1; }
sbxname() { jq -r .remote.sbxName "$PI_SANDBOX_HOME/instances/$1/record.json"; }
wait_for() { for _ in $(seq 100); do eval "$1" && return 0; sleep 0.1; done; eval "$1"; }

@test "fake sbx: documented argv shapes, outputs and exit codes" {
	ws=$BATS_TEST_TMPDIR/ws
	mkdir -p "$ws"
	run -0 sbx create --name a shell "$ws"
	[ "$output" = "Created sandbox 'a'" ]
	run -0 sbx create -q --name b --cpus 2 --memory 2g -t tmpl:1 shell "$ws"
	[ -z "$output" ]
	run -1 sbx create --name a shell "$ws"
	[[ $output == *"already exists"* ]]
	run -1 sbx create --name c shell "$ws:ro"
	run -1 sbx create --name c --memory 512m shell "$ws"
	run -0 sbx ls --json
	jq -e '.sandboxes | map(.name) == ["a","b"] and all(.status == "running")' <<<"$output"
	run -0 sbx ls -q
	[ "$output" = "$(printf 'a\nb')" ]
	run -3 sbx exec a -- sh -c 'exit 3'
	run -0 sbx exec a -- pwd
	[ "$output" = "$ws" ]
	run -127 sbx exec a nosuchcommand
	[[ $output == *'executable file not found in $PATH'* ]]
	run -0 sbx stop a
	run -0 sbx ls --json
	jq -e '.sandboxes[0].status == "stopped"' <<<"$output"
	# exec starts a stopped sandbox
	run -0 sbx exec a -- true
	run -0 sbx ls --json
	jq -e '.sandboxes[0].status == "running"' <<<"$output"
	run -0 sbx ports a --publish 8080:3000
	run -0 sbx ports a
	[[ $output == *"127.0.0.1    8080       3000          tcp"* ]]
	run -1 sbx ports a --publish 8080:4000
	[[ $output == *"port is already allocated"* ]]
	run -1 sbx rm a </dev/null
	run -0 sbx rm --force a b
	run -1 sbx exec a -- true
	[[ $output == *"sandbox 'a' not found"* ]]
	run -1 sbx frobnicate
	[[ $output == *'unknown command "frobnicate" for "sbx"'* ]]
}

@test "create --driver sbx: argv, names pi-sbx-<pid>-<n>, record and status; list and inspect" {
	run -0 --separate-stderr pisb create box --driver sbx
	[ "$stderr" = "created sandbox 'box' (sbx)" ]
	ws=$PI_SANDBOX_HOME/instances/box/workspace
	[ -d "$ws" ]
	[ "$(sbxname box)" = pi-sbx-0-1 ]
	[ "$(last_call create)" = "[\"create\",\"--quiet\",\"--name\",\"pi-sbx-0-1\",\"shell\",\"$ws\"]" ]
	run -0 pisb list --json
	jq -e '.[0] | .name == "box" and .driver == "sbx" and .status == "running"' <<<"$output"
	run -0 pisb inspect box
	jq -e --arg ws "$ws" '.driver == "sbx" and .status == "running" and .workspace == $ws
		and .remote.sbxName == "pi-sbx-0-1" and .remote.state == "running"' <<<"$output"
	jq -e '.remote | .sbxName == "pi-sbx-0-1" and .createdByPisb and .teardown == "remove"' \
		"$PI_SANDBOX_HOME/instances/box/record.json"
	[ "$(stat -c %a "$PI_SANDBOX_HOME/instances/box/record.json")" = 600 ]
	# a second one gets the next number; an owner's pid goes into the name
	sleep 60 & owner=$!
	run -0 pisb create two --driver sbx --owner-pid "$owner"
	[ "$(sbxname two)" = "pi-sbx-$owner-1" ]
	run -0 pisb create three --driver sbx
	[ "$(sbxname three)" = pi-sbx-0-2 ]
	kill "$owner"
	# the name is taken: 4; no such sandbox: 3
	run -4 --separate-stderr pisb create box --driver sbx
	[[ $stderr == *"sandbox 'box' already exists"* ]]
	run -3 pisb stop nosuch
}

@test "sandbox.yaml sbx: cpus, memory, template, workspaceReadOnly reach sbx create" {
	cat > "$BATS_TEST_TMPDIR/s.yaml" <<-EOF
	driver: sbx
	sbx: {cpus: 3, memory: 6g, template: "docker.io/me/tmpl:1", workspaceReadOnly: true}
	EOF
	run -0 pisb create ro -f "$BATS_TEST_TMPDIR/s.yaml"
	d=$PI_SANDBOX_HOME/instances/ro
	[ "$(last_call create)" = "[\"create\",\"--quiet\",\"--name\",\"pi-sbx-0-1\",\"--cpus\",\"3\",\"--memory\",\"6g\",\"--template\",\"docker.io/me/tmpl:1\",\"shell\",\"$d/scratch\",\"$d/workspace:ro\"]" ]
	run -0 pisb inspect ro
	jq -e '.image == "docker.io/me/tmpl:1" and .limits.cpus == 3 and .limits.memoryGiB == 6
		and .limits.enforced.memory and .limits.diskGiB == null' <<<"$output"
	# resources without sbx.cpus/memory are used as the sandbox's size
	printf 'driver: sbx\nresources: {cpus: 4, memoryGiB: 8}\n' > "$BATS_TEST_TMPDIR/r.yaml"
	run -0 pisb create sized -f "$BATS_TEST_TMPDIR/r.yaml"
	[[ $(last_call create) == *'"--cpus","4","--memory","8g"'* ]]
	# setup runs in the workspace through sbx exec; a failure is kept, the sandbox stays
	printf 'driver: sbx\nsetup: ["echo made > f", "exit 7"]\n' > "$BATS_TEST_TMPDIR/setup.yaml"
	run -0 pisb create st -f "$BATS_TEST_TMPDIR/setup.yaml"
	[ "$(cat "$PI_SANDBOX_HOME/instances/st/workspace/f")" = made ]
	run -0 pisb inspect st
	jq -e '.setupError == "setup[1] '"'exit 7'"' exited with 7"' <<<"$output"
	# pisb logs shows sbx.log: the sbx commands, setup output
	run -0 pisb logs st
	[[ $output == *"sbx create --quiet --name pi-sbx-0-3"*"-> 0"* ]]
	[[ $output == *"setup failed: setup[1] 'exit 7' exited with 7"* ]]
	# what sbx cannot do is refused, naming the driver
	printf 'driver: sbx\nservices: {web: {command: "sleep 1"}}\n' > "$BATS_TEST_TMPDIR/svc.yaml"
	run -1 --separate-stderr pisb create svc -f "$BATS_TEST_TMPDIR/svc.yaml"
	[[ $stderr == *"driver sbx does not run services"* ]]
	printf 'driver: sbx\nnetwork: {allowedHosts: [example.com]}\n' > "$BATS_TEST_TMPDIR/net.yaml"
	run -1 --separate-stderr pisb create net -f "$BATS_TEST_TMPDIR/net.yaml"
	[[ $stderr == *"sbx policy"* ]]
	[ ! -e "$PI_SANDBOX_HOME/instances/svc" ]
	[ ! -e "$PI_SANDBOX_HOME/instances/net" ]
	printf 'driver: sbx\ndiskGiB: 20\n' > "$BATS_TEST_TMPDIR/disk.yaml"
	run -1 --separate-stderr pisb create disk -f "$BATS_TEST_TMPDIR/disk.yaml"
	[[ $stderr == *"cannot enforce diskGiB"* ]]
	run -2 --separate-stderr pisb create t --driver sbx --template foo
	[[ $stderr == *"sbx.template"* ]]
}

@test "shell: an interactive login shell through sbx exec -i" {
	run -0 pisb create box --driver sbx
	ws=$PI_SANDBOX_HOME/instances/box/workspace
	run -0 bash -c 'echo "echo in-shell; exit 5" | pisb shell box; echo "rc=$?"'
	[[ $output == *"in-shell"* ]]
	[[ $output == *"rc=5"* ]]
	[ "$(last_call exec)" = "[\"exec\",\"-i\",\"-w\",\"$ws\",\"pi-sbx-0-1\",\"--\",\"/bin/bash\",\"-l\"]" ]
}

@test "the sbx CLI gets a scrubbed environment: DOCKER_* and COMPOSE_* never, others only when allowlisted" {
	cat > "$BATS_TEST_TMPDIR/e.yaml" <<-EOF
	driver: sbx
	env: {FROM_CONFIG: yes}
	sbx: {envAllowlist: [ALLOWED_ONE], envPassthrough: [PASSED_ONE]}
	EOF
	export DOCKER_HOST=unix:///host-docker.sock DOCKER_CONTEXT=evil COMPOSE_FILE=/etc/x.yml
	export SECRET_TOKEN=s3cret ALLOWED_ONE=a1 PASSED_ONE=p1
	run -0 pisb create env -f "$BATS_TEST_TMPDIR/e.yaml"
	run -0 pisb exec env -- env
	inside=$output
	# every sbx invocation: nothing of the host's docker or secrets
	run -0 jq -s -e 'all(.[]; .env | (keys | map(select(test("^(DOCKER_|COMPOSE_)"))) | length == 0)
		and (has("SECRET_TOKEN") | not) and .ALLOWED_ONE == "a1" and (has("PASSED_ONE") | not))' "$SBXS/calls.log"
	# inside: config env and passthrough through -e; no DOCKER_HOST
	[[ $inside == *"FROM_CONFIG=yes"* ]]
	[[ $inside == *"PASSED_ONE=p1"* ]]
	[[ $inside != *"DOCKER_HOST"* ]]
	[[ $inside != *"s3cret"* ]]
	[[ $(last_call exec) == *'"-e","FROM_CONFIG=yes","-e","PASSED_ONE=p1"'* ]]
	# DOCKER_* cannot be allowlisted at all
	printf 'driver: sbx\nsbx: {envAllowlist: [DOCKER_HOST]}\n' > "$BATS_TEST_TMPDIR/bad.yaml"
	run -2 pisb create bad -f "$BATS_TEST_TMPDIR/bad.yaml"
}

@test "exec: status passed through, stdin/stdout/stderr streamed, --cwd, --env, --sh" {
	run -0 pisb create box --driver sbx
	ws=$PI_SANDBOX_HOME/instances/box/workspace
	run -42 --separate-stderr pisb exec box -- sh -c 'echo out; echo err >&2; exit 42'
	[ "$output" = out ]
	[ "$stderr" = err ]
	run -0 bash -c 'printf "a\nb\n" | pisb exec box -- wc -l'
	[ "$output" = 2 ]
	mkdir -p "$ws/sub"
	run -0 pisb exec box --cwd sub --env K=v -- sh -c 'pwd; echo $K'
	[ "$output" = "$(printf '%s\nv' "$ws/sub")" ]
	[[ $(last_call exec) == "[\"exec\",\"-i\",\"-w\",\"$ws/sub\",\"-e\",\"K=v\",\"pi-sbx-0-1\",\"--\",\"sh\",\"-c\""* ]]
	run -0 pisb exec box --sh 'echo $((6*7))'
	[ "$output" = 42 ]
	run -127 pisb exec box -- no-such-command
	# --events-fd: the sandbox is asked for /bin/bash first, then the shell runs by name
	run -0 pisb exec box --events-fd 3 --bash 'echo {1..3}' 3>"$BATS_TEST_TMPDIR/ev"
	[ "$output" = "1 2 3" ]
	jq -se '. == [{"event":"shell","name":"box","driver":"sbx","asked":"bash","shell":"/bin/bash"}]' "$BATS_TEST_TMPDIR/ev"
	[[ $(last_call exec) == *'"--","/bin/bash","-lc","echo {1..3}"]' ]]
	run -0 pisb exec box --events-fd 3 --sh 'echo $0' 3>"$BATS_TEST_TMPDIR/ev"
	jq -se 'length == 1 and .[0].asked == "sh" and .[0].shell == "/bin/sh"' "$BATS_TEST_TMPDIR/ev"
}

@test "exec: sbx gets stdio and no other descriptor, pisb's or its caller's" {
	run -0 pisb create box --driver sbx
	# descriptors the caller left open (not close-on-exec), and
	# --events-fd's: none reaches the sbx process (pisb's own pipes neither)
	run -0 pisb exec box --events-fd 3 -- true 3>"$BATS_TEST_TMPDIR/ev" 7</dev/null 9>"$BATS_TEST_TMPDIR/x"
	run -0 jq -c 'select(.argv[1] == "exec") | .fds' "$SBXS/calls.log"
	[ -n "$output" ]
	[ "$(sort -u <<<"$output")" = "[]" ]
}

@test "exec handles: --timeout-ms, exec-status, exec-kill; the action surface" {
	run -0 pisb create box --driver sbx
	run -0 pisb exec box --timeout-ms 5000 --json -- sh -c 'echo hi; exit 4'
	jq -e '.running == false and .output == "hi\n" and .exitCode == 4 and (.pid | test("^sbx-[0-9a-f]{8}$"))' <<<"$output"
	run -4 pisb exec box --timeout-ms 5000 -- sh -c 'exit 4'
	run -0 pisb exec box --timeout-ms 0 --json -- sh -c 'echo start; sleep 1; echo end; exit 2'
	h=$(jq -r .pid <<<"$output")
	jq -e '.running and .exitCode == null' <<<"$output"
	run -0 pisb exec-status box "$h" --timeout-ms 10000 --json
	jq -e '.running == false and .exitCode == 2 and (.output | test("end\n$"))' <<<"$output"
	# new output only
	run -0 pisb exec-status box "$h" --json
	jq -e '.output == "" and .exitCode == 2' <<<"$output"
	# kill: TERM reaches the command inside
	run -0 pisb exec box --timeout-ms 0 --json -- sh -c 'trap "echo termed; exit 9" TERM; echo up; while :; do sleep 0.1; done'
	h=$(jq -r .pid <<<"$output")
	wait_for "pisb exec-status box $h --json | jq -e '.output == \"up\n\"' >/dev/null || grep -q up '$PI_SANDBOX_HOME/instances/box/exec/$h/output'"
	run -0 pisb exec-kill box "$h" --json
	jq -e '.running == false and .exitCode == 9' <<<"$output"
	run -3 pisb exec-status box sbx-00000000
	run -3 pisb exec-status box ../../x
	# Pi's sandbox tool: exec through pisb action
	run -0 pisb action '{"action":"exec","name":"box","command":"echo via action"}'
	jq -e '.output == "via action\n" and .exitCode == 0' <<<"$output"
	# a supervisor killed without a status: unknown, 5
	run -0 pisb exec box --timeout-ms 0 --json -- sleep 30
	h=$(jq -r .pid <<<"$output")
	kill -KILL "$(cat "$PI_SANDBOX_HOME/instances/box/exec/$h/pid")"
	wait_for "flock -n '$PI_SANDBOX_HOME/instances/box/exec/$h/lock' true"
	run -5 --separate-stderr pisb exec-status box "$h" --json
	jq -e '.running == false and .exitCode == null' <<<"$output"
	[[ $stderr == *"exit status unknown"* ]]
}

@test "an exec handle keeps at most 8 MiB of output on the host; the rest is counted and said" {
	run -0 pisb create box --driver sbx
	run -0 pisb exec box --timeout-ms 0 --json -- sh -c 'head -c 9437184 /dev/zero; echo; exit 3'
	h=$(jq -r .pid <<<"$output")
	dir=$PI_SANDBOX_HOME/instances/box/exec/$h
	run -0 pisb exec-status box "$h" --timeout-ms 60000 --json
	jq -e '.running == false and .exitCode == 3 and .truncated == true and .droppedBytes == 1048577' <<<"$output"
	jq -e '.exitCode == 3 and .droppedBytes == 1048577' "$dir/status.json"
	[ "$(stat -c %s "$dir/output")" -le $(( 8 * 1024 * 1024 + 100 )) ]
	[ "$(stat -c %s "$dir/output")" -ge $(( 8 * 1024 * 1024 )) ]
	grep -q 'output past 8 MiB dropped' "$dir/output"
	# every later call says so too
	run -0 pisb exec-status box "$h" --json
	jq -e '.truncated == true and .droppedBytes == 1048577' <<<"$output"
	# a handle that stayed under the cap has no droppedBytes
	run -0 pisb exec box --timeout-ms 30000 --json -- echo small
	jq -e '.output == "small\n" and (has("droppedBytes") | not)' <<<"$output"
}

@test "file verbs work on the workspace sbx shares with the VM, and nothing outside it" {
	require_userns
	run -0 pisb create box --driver sbx
	ws=$PI_SANDBOX_HOME/instances/box/workspace
	run -0 bash -c 'printf "one\ntwo\n" | pisb write box d/f.txt --mkdir'
	# the VM sees what pisb wrote, and the other way round
	run -0 pisb exec box -- cat d/f.txt
	[ "$output" = "$(printf 'one\ntwo')" ]
	pisb exec box -- sh -c 'echo from-vm > d/g.txt'
	run -0 pisb read box "$ws/d/g.txt"
	[ "$output" = from-vm ]
	run -0 pisb ls box d --json
	jq -e '.entries | map(.name) == ["f.txt","g.txt"]' <<<"$output"
	run -0 pisb edit box d/f.txt --old two --new three
	run -0 pisb grep box three
	[ "$output" = "d/f.txt:2:three" ]
	run -0 pisb find box '**/*.txt'
	run -0 pisb mkdir box e/f
	run -0 pisb stat box e/f --json
	jq -e '.type == "dir"' <<<"$output"
	# outside the workspace nothing exists: the host's files stay out of reach
	run -3 pisb read box /etc/passwd
	run -3 pisb read box ../../../../../../../etc/passwd
	pisb exec box -- ln -s /etc/passwd pw
	run -3 pisb read box pw
	run -0 pisb write box x < /dev/null
	[ ! -e /x ]
	# push and pull go through the same workspace
	mkdir -p "$BATS_TEST_TMPDIR/src" && echo pushed > "$BATS_TEST_TMPDIR/src/p"
	run -0 pisb push box "$BATS_TEST_TMPDIR/src" --to in
	run -0 pisb exec box -- cat in/p
	[ "$output" = pushed ]
	run -0 pisb pull box d "$BATS_TEST_TMPDIR/out"
	[ "$(cat "$BATS_TEST_TMPDIR/out/f.txt")" = "$(printf 'one\nthree')" ]
}

@test "exec forwards signals to the command" {
	run -0 pisb create box --driver sbx
	pisb exec box -- sh -c 'trap "echo got-term; exit 7" TERM; echo up; while :; do sleep 0.1; done' \
		> "$BATS_TEST_TMPDIR/out" 2>&1 3>&- &
	pid=$!
	wait_for "grep -q up '$BATS_TEST_TMPDIR/out'"
	kill -TERM "$pid"
	rc=0
	wait "$pid" || rc=$?
	# what the command said, when it did not end as its trap does
	[ "$rc" = 7 ] || { echo "pisb exec exited $rc; its output:"; cat "$BATS_TEST_TMPDIR/out"; false; }
	grep -q got-term "$BATS_TEST_TMPDIR/out"
}

@test "stop, start, destroy: the sbx commands and the status they leave" {
	run -0 pisb create box --driver sbx --events-fd 3 3>"$BATS_TEST_TMPDIR/ev"
	jq -e '.event == "ready" and .driver == "sbx" and .sandboxId == "pi-sbx-0-1"' "$BATS_TEST_TMPDIR/ev"
	run -0 pisb stop box
	[ "$(last_call stop)" = '["stop","pi-sbx-0-1"]' ]
	run -0 pisb list --json
	jq -e '.[0].status == "stopped"' <<<"$output"
	run -0 pisb start box
	[ "$(calls | tail -1)" = '["exec","pi-sbx-0-1","--","true"]' ]
	run -0 pisb list --json
	jq -e '.[0].status == "running"' <<<"$output"
	# inspect asks sbx: stopped behind pisb's back shows
	sbx stop pi-sbx-0-1
	run -0 pisb inspect box
	jq -e '.status == "stopped" and .remote.state == "stopped"' <<<"$output"
	# pisb verify audits a sbx sandbox as pisb docker verify does
	run -0 pisb verify box --json
	jq -e '.pass and (.checks | length) == 7' <<<"$output"
	run -0 pisb destroy box --confirm box --events-fd 3 3>"$BATS_TEST_TMPDIR/ev2"
	[ "$(last_call rm)" = '["rm","--force","pi-sbx-0-1"]' ]
	jq -e '.event == "released" and .mode == "remove"' "$BATS_TEST_TMPDIR/ev2"
	[ ! -e "$PI_SANDBOX_HOME/instances/box" ]
	run -0 sbx ls --json
	jq -e '.sandboxes == []' <<<"$output"
	# removed from sbx behind pisb's back: exec fails closed (5), destroy still works
	run -0 pisb create gone --driver sbx
	sbx rm --force pi-sbx-0-1
	run -5 --separate-stderr pisb exec gone -- true
	[[ $stderr == *"sandbox 'gone'"* ]]
	run -0 pisb destroy gone --confirm gone
}

@test "exit codes: sbx missing (5), sbx failing (5, naming the command), timeout-free busy (4)" {
	# no sbx on PATH at all
	run -5 --separate-stderr env PATH=/usr/bin:/bin "$PISB_BIN_DIR/pisb" create box --driver sbx
	[[ $stderr == *"the sbx CLI is not on PATH"* ]]
	[ ! -e "$PI_SANDBOX_HOME/instances/box" ]
	# sbx create fails: 5, the message names the sandbox and the sbx command; nothing stays
	mkdir -p "$SBXS"
	echo '{"create":{"exit":1,"stderr":"Error: failed to start sandbox: start runtime: request failed: 500","count":1}}' > "$SBXS/faults.json"
	run -5 --separate-stderr pisb create box --driver sbx
	[[ $stderr == *"create 'box'"* ]]
	[[ $stderr == *"'sbx create --quiet --name pi-sbx-0-1 shell "* ]]
	[[ $stderr == *"failed with status 1: Error: failed to start sandbox"* ]]
	[ ! -e "$PI_SANDBOX_HOME/instances/box" ]
	# exec: sbx cannot start the sandbox -> 5, not the command's status
	run -0 pisb create box --driver sbx
	echo '{"exec":{"exit":1,"stderr":"Error: failed to start sandbox: start runtime: request failed: 500","count":1}}' > "$SBXS/faults.json"
	run -5 --separate-stderr pisb exec box -- true
	[[ $stderr == *"sandbox 'box': 'sbx exec pi-sbx-0-1' failed"* ]]
	# a VM that fails to start is retried (250 ms, 1 s) where nothing ran: start, probes
	run -0 pisb stop box
	echo '{"exec":{"exit":1,"stderr":"Error: failed to start sandbox: start runtime: request failed: 500","count":2}}' > "$SBXS/faults.json"
	run -0 pisb start box
	grep -q 'retrying' "$PI_SANDBOX_HOME/instances/box/sbx.log"
	echo '{"exec":{"exit":1,"stderr":"Error: failed to start sandbox: start runtime: request failed: 500","count":3}}' > "$SBXS/faults.json"
	run -5 pisb start box
	# stop fails: 5 naming sbx stop
	echo '{"stop":{"exit":1,"stderr":"Error: daemon unavailable","count":1}}' > "$SBXS/faults.json"
	run -5 --separate-stderr pisb stop box
	[[ $stderr == *"stop 'box': 'sbx stop pi-sbx-0-1' failed with status 1: Error: daemon unavailable"* ]]
	# busy: a lifecycle command holds op.lock
	exec 9>"$PI_SANDBOX_HOME/instances/box/op.lock"
	flock 9
	run -4 pisb stop box
	exec 9>&-
}

@test "teardown policies: the owner's death removes, stops or keeps the sandbox" {
	for policy in remove stop none; do
		printf 'driver: sbx\nsbx: {teardown: %s}\n' "$policy" > "$BATS_TEST_TMPDIR/$policy.yaml"
		sleep 60 & owner=$!
		run -0 pisb create "t-$policy" -f "$BATS_TEST_TMPDIR/$policy.yaml" --owner-pid "$owner"
		name=$(sbxname "t-$policy")
		[ "$name" = "pi-sbx-$owner-1" ]
		wait_for "pisb inspect t-$policy >/dev/null && [ -n \"\$(grep watchdog '$PI_SANDBOX_HOME/instances/t-$policy/sbx.log')\" ]"
		kill "$owner"
		case $policy in
		remove)
			wait_for "[ ! -e '$PI_SANDBOX_HOME/instances/t-remove' ]"
			[ "$(last_call rm)" = "[\"rm\",\"--force\",\"$name\"]" ]
			run -0 sbx ls -q
			[ -z "$output" ] ;;
		stop)
			wait_for "calls | grep -qF '[\"stop\",\"$name\"]'"
			wait_for "[ \"\$(pisb list --json | jq -r '.[] | select(.name==\"t-stop\") | .status')\" = stopped ]" ;;
		none)
			wait_for "grep -q 'teardown none' '$PI_SANDBOX_HOME/instances/t-none/sbx.log'"
			run -0 pisb list --json
			jq -e '.[] | select(.name == "t-none") | .status == "running"' <<<"$output"
			! calls | grep -E '^\["(rm|stop)"' | grep -qF "$name" ;;
		esac
	done
}

@test "idle stop (sandboxd's, faked): keepalive keeps a sandbox running, exec starts it again" {
	mkdir -p "$SBXS"
	echo '{"idle_ms": 1500}' > "$SBXS/settings.json"
	printf 'driver: sbx\nsbx: {keepalive: true}\n' > "$BATS_TEST_TMPDIR/k.yaml"
	run -0 pisb create kept -f "$BATS_TEST_TMPDIR/k.yaml"
	run -0 pisb create idle --driver sbx
	sleep 3
	run -0 pisb inspect idle
	jq -e '.status == "stopped"' <<<"$output"
	run -0 pisb inspect kept
	jq -e '.status == "running"' <<<"$output"
	# a command starts it again
	run -0 pisb exec idle -- echo back
	[ "$output" = back ]
	run -0 pisb list --json
	jq -e '.[] | select(.name == "idle") | .status == "running"' <<<"$output"
}

@test "keepalive pokes a running sandbox, never a stopped one" {
	printf 'driver: sbx\nsbx: {keepalive: true}\n' > "$BATS_TEST_TMPDIR/k.yaml"
	run -0 pisb create k -f "$BATS_TEST_TMPDIR/k.yaml"
	wait_for "[ \$(calls | grep -cF '[\"exec\",\"pi-sbx-0-1\",\"--\",\"true\"]') -ge 2 ]"
	run -0 pisb stop k
	n=$(calls | grep -cF '["exec","pi-sbx-0-1","--","true"]')
	sleep 1
	[ "$(calls | grep -cF '["exec","pi-sbx-0-1","--","true"]')" = "$n" ]
	run -0 sbx ls --json
	jq -e '.sandboxes[0].status == "stopped"' <<<"$output"
}

@test "the fake's VM holds no more than a microVM's guest: no host files, processes, network or root" {
	run -0 pisb create box --driver sbx
	ws=$PI_SANDBOX_HOME/instances/box/workspace
	printf 'host secret\n' > "$BATS_TEST_TMPDIR/secret"
	chmod 600 "$BATS_TEST_TMPDIR/secret"
	mkdir -p "$HOME/.ssh"
	echo key > "$HOME/.ssh/id_ed25519"
	# an unprivileged user (the host's root writes the workspace through it)
	run -0 pisb exec box -- id -u
	[ "$output" = 64100 ]
	run -0 pisb exec box -- sh -c 'echo made > made; pwd'
	[ "$output" = "$ws" ]
	[ "$(stat -c %u "$ws/made")" = 0 ]
	# no host file outside the workspace, not even the caller's home
	run -1 pisb exec box -- cat "$BATS_TEST_TMPDIR/secret"
	run -2 pisb exec box -- ls "$HOME/.ssh"
	run -1 pisb exec box -- test -e "$TOP/Makefile"
	run -1 pisb exec box -- test -e /var/run/docker.sock
	run -1 pisb exec box -- test -e /root
	run -1 pisb exec box -- touch /usr/pisb-was-here
	[ ! -e /usr/pisb-was-here ]
	# its own processes only: a host process is not there
	sleep 1234 &
	hostpid=$!
	run -0 pisb exec box -- ps -eo args
	kill "$hostpid"
	[[ $output != *"sleep 1234"* ]]
	# its own network: a host listener on loopback is not reachable
	python3 -c 'import socket,sys; s=socket.socket(); s.bind(("127.0.0.1",0)); s.listen(); print(s.getsockname()[1]); sys.stdout.flush(); s.accept()' > "$BATS_TEST_TMPDIR/port" 3>&- &
	lis=$!
	for _ in $(seq 100); do [ -s "$BATS_TEST_TMPDIR/port" ] && break; sleep 0.1; done
	run -1 pisb exec box -- python3 -c "import socket,sys; socket.create_connection(('127.0.0.1', $(cat "$BATS_TEST_TMPDIR/port")), 2)"
	kill "$lis"
	[[ $output == *"Connection refused"* ]]
	# what it leaves in /tmp stays for the next exec (one VM), until rm
	run -0 pisb exec box -- sh -c 'echo kept > /tmp/k'
	run -0 pisb exec box -- cat /tmp/k
	[ "$output" = kept ]
	[ "$(cat "$SBXS/vm/$(sbxname box)/disk/tmp/k")" = kept ]
}
