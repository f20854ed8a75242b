#!/usr/bin/env bats
# Local sandboxes: create, setup, stop/start persistence, templates,
# destroy, list/inspect, locks and bad input.
load helpers

setup() {
	pisb_test_setup
	require_userns
}

teardown() {
	for n in $(pisb list -q 2>/dev/null); do pisb destroy "$n" --confirm "$n" >/dev/null 2>&1 || true; done
}

@test "list --json on an empty state prints []" {
	run -0 pisb list --json
	[ "$output" = "[]" ]
}

@test "the state dir is created 0700 and a group-readable one is refused" {
	run -0 pisb list
	[ "$(stat -c %a "$PI_SANDBOX_HOME")" = 700 ]
	chmod 750 "$PI_SANDBOX_HOME"
	run -2 --separate-stderr pisb list
	[[ $stderr == *"accessible by group or others"* ]]
	[[ $stderr == *"chmod 700"* ]]
}

@test "create runs setup lines and .agents/setup, then the sandbox runs" {
	cat > "$BATS_TEST_TMPDIR/s.yaml" <<-'Y'
	setup:
	  - echo one > /workspace/one.txt
	  - mkdir -p /workspace/.agents && printf '#!/bin/sh\necho agents > /workspace/agents.txt\n' > /workspace/.agents/setup && chmod +x /workspace/.agents/setup
	Y
	run -0 pisb create demo -f "$BATS_TEST_TMPDIR/s.yaml"
	run -0 pisb exec demo -- cat /workspace/one.txt /workspace/agents.txt
	[ "$output" = "$(printf 'one\nagents')" ]
	run -0 pisb inspect demo
	jq -e '.status == "running" and .driver == "local" and .image == "host" and .controller.alive' <<<"$output"
	# the guest copy of the config is in the workspace
	run -0 pisb exec demo -- cat /workspace/.sandbox.yaml
	[[ $output == *"echo one"* ]]
}

@test "a failed setup is reported and the sandbox still starts" {
	printf 'setup:\n  - "exit 9"\n' > "$BATS_TEST_TMPDIR/s.yaml"
	run -0 --separate-stderr pisb create bad -f "$BATS_TEST_TMPDIR/s.yaml"
	[[ $stderr == *"setup failed"*"exited with 9"* ]]
	run -0 pisb inspect bad
	jq -e '.status == "running" and (.setupError | test("exited with 9"))' <<<"$output"
}

@test "setup's detached descendants are stopped before activation" {
	printf 'setup:\n  - "sleep 300 & echo started"\n' > "$BATS_TEST_TMPDIR/s.yaml"
	run -0 pisb create det -f "$BATS_TEST_TMPDIR/s.yaml"
	run -1 pisb exec det -- pgrep -x sleep
}

@test "files, home and installed programs persist across stop/start; processes do not" {
	run -0 pisb create keep
	run -0 pisb exec keep --sh 'echo data > /workspace/f; echo home > /root/h; mkdir -p /usr/local/bin 2>/dev/null; mkdir -p /opt/tool && printf "#!/bin/sh\necho tool\n" > /opt/tool/run && chmod +x /opt/tool/run; sleep 1000 >/dev/null 2>&1 &'
	run -0 pisb stop keep
	run -0 pisb inspect keep
	jq -e '.status == "stopped"' <<<"$output"
	run -5 --separate-stderr pisb exec keep -- true
	[[ $stderr == *"is not running"* ]]
	run -0 pisb start keep
	run -0 pisb exec keep --sh 'cat /workspace/f /root/h; /opt/tool/run'
	[ "$output" = "$(printf 'data\nhome\ntool')" ]
	run -1 pisb exec keep -- pgrep -x sleep
}

@test "resume hooks run on start and inspect shows a long one's resumePid" {
	cat > "$BATS_TEST_TMPDIR/s.yaml" <<-'Y'
	resume:
	  - echo resumed >> /workspace/resume.log
	Y
	run -0 pisb create res -f "$BATS_TEST_TMPDIR/s.yaml"
	run -1 pisb exec res -- test -e /workspace/resume.log
	run -0 pisb stop res
	run -0 pisb start res
	run -0 pisb exec res -- cat /workspace/resume.log
	[ "$output" = resumed ]
	run -0 pisb inspect res
	jq -e '.resumePid == null' <<<"$output"
}

@test "prepare saves a template; create --template copies it without running setup" {
	printf 'setup:\n  - "echo x >> /workspace/count"\n' > "$BATS_TEST_TMPDIR/s.yaml"
	run -0 pisb prepare base -f "$BATS_TEST_TMPDIR/s.yaml"
	run -0 pisb list --templates --json
	jq -e 'map(.name) == ["base"]' <<<"$output"
	run -0 pisb create a --template base
	run -0 pisb create b --template base
	run -0 pisb exec a -- cat /workspace/count
	[ "$output" = x ]
	run -0 pisb exec a --sh 'echo only-a > /workspace/mine'
	run -1 pisb exec b -- test -e /workspace/mine
	# a template and an instance may share a name
	run -0 pisb create base
	run -0 pisb destroy base --template --confirm base
	run -0 pisb exec base -- true
}

@test "a failed prepare never publishes a template" {
	printf 'setup:\n  - "exit 1"\n' > "$BATS_TEST_TMPDIR/s.yaml"
	run -1 --separate-stderr pisb prepare broken -f "$BATS_TEST_TMPDIR/s.yaml"
	[[ $stderr == *"no template was saved"* ]]
	run -0 pisb list --templates --json
	[ "$output" = "[]" ]
}

@test "unknown name exits 3, taken name 4, invalid name and config 2 before anything exists" {
	run -3 pisb inspect nope
	run -3 pisb start nope
	run -0 pisb create dup
	run -4 --separate-stderr pisb create dup
	[[ $stderr == *"already exists"* ]]
	run -2 pisb create BadName
	printf 'services:\n  web:\n    command: x\n    port: 99999\n' > "$BATS_TEST_TMPDIR/bad.yaml"
	run -2 --separate-stderr pisb create cfgbad -f "$BATS_TEST_TMPDIR/bad.yaml"
	[[ $stderr == *"services.web.port"* ]]
	run -3 pisb inspect cfgbad
}

@test "destroy needs --confirm NAME and removes disk and logs" {
	run -0 pisb create gone
	run -2 pisb destroy gone
	run -2 pisb destroy gone --confirm other
	run -0 pisb destroy gone --confirm gone
	[ ! -e "$PI_SANDBOX_HOME/instances/gone" ]
	run -0 pisb list --json
	[ "$output" = "[]" ]
}

@test "a mutating command on a busy sandbox exits 4, or waits with --wait" {
	run -0 pisb create busy
	exec 9>"$PI_SANDBOX_HOME/instances/busy/op.lock"
	flock -x 9
	run -4 --separate-stderr pisb stop busy
	[[ $stderr == *busy* ]]
	( sleep 1; flock -u 9 ) &
	run -0 pisb stop busy --wait=10
	exec 9>&-
}

@test "kill -9 of the controller: inspect says interrupted, start recovers" {
	run -0 pisb create crash
	run -0 pisb exec crash --sh 'echo safe > /workspace/f; sync'
	pid=$(pisb inspect crash | jq -r .controller.pid)
	kill -9 "$pid"
	for i in $(seq 50); do
		s=$(pisb inspect crash | jq -r .status)
		[ "$s" = interrupted ] && break
		sleep 0.1
	done
	[ "$s" = interrupted ]
	run -0 pisb start crash
	run -0 pisb exec crash -- cat /workspace/f
	[ "$output" = safe ]
}

@test "a controller that does not answer is reported unavailable" {
	run -0 pisb create stuck
	pid=$(pisb inspect stuck | jq -r .controller.pid)
	kill -STOP "$pid"
	run -0 pisb inspect stuck
	kill -CONT "$pid"
	jq -e '.status == "unavailable"' <<<"$output"
}

@test "list pings every running controller at once: stuck ones are unavailable, the others running, a stopped one stopped" {
	run -0 pisb create la
	run -0 pisb create lb
	run -0 pisb create lc
	run -0 pisb create ld
	run -0 pisb create le
	run -0 pisb stop ld
	pid=$(pisb inspect lb | jq -r .controller.pid)
	pid2=$(pisb inspect le | jq -r .controller.pid)
	kill -STOP "$pid" "$pid2"
	run -0 --separate-stderr pisb list --json
	kill -CONT "$pid" "$pid2"
	[ "$(jq -c '[.[] | select(.name | test("^l[a-e]$")) | [.name, .status]]' <<<"$output")" = \
	  '[["la","running"],["lb","unavailable"],["lc","running"],["ld","stopped"],["le","unavailable"]]' ]
	# the stuck one answers again: running (no ping of the last list is read in its place)
	run -0 --separate-stderr pisb list --json
	[ "$(jq -c '[.[] | select(.name | test("^l[a-e]$")) | .status]' <<<"$output")" = '["running","running","running","stopped","running"]' ]
}

@test "the sandbox survives its caller: SIGHUP of the creating shell" {
	# the shell that ran create dies of the hangup (129); the sandbox must not
	# (HUP's default action restored: a run under nohup ignores it)
	run -129 setsid env --default-signal=HUP bash -c 'pisb create survivor >/dev/null; kill -HUP $$'
	sleep 0.2
	run -0 pisb inspect survivor
	jq -e '.status == "running"' <<<"$output"
}

@test "the controller: pisb itself for a sandbox of the host image, pisb-svc for one whose proxy resolves names; both start, stop, start" {
	ctl_exe() { readlink -f "/proc/$(pisb inspect "$1" | jq -r .controller.pid)/exe"; }
	run -0 pisb create lean
	[ "$(ctl_exe lean)" = "$(readlink -f "$PISB_BIN_DIR/pisb")" ]
	pgrep -f "pisb supervise lean --state-dir"
	printf 'version: 1\nnetwork:\n  allowedHosts: ["localhost"]\n' > "$BATS_TEST_TMPDIR/ah.yaml"
	run -0 pisb create proxied -f "$BATS_TEST_TMPDIR/ah.yaml"
	[ "$(ctl_exe proxied)" = "$(readlink -f "$PISB_BIN_DIR/pisb-svc")" ]
	for n in lean proxied; do
		run -0 pisb stop "$n"
		run -0 pisb start "$n"
		run -0 pisb exec "$n" -- cat /proc/1/comm
		[ "$output" = pisb-init ]
	done
	[ "$(ctl_exe lean)" = "$(readlink -f "$PISB_BIN_DIR/pisb")" ]
	# the init bears its name before the start reports (it said so after
	# its exec): under load a command read the memfd's name here
	for _ in 1 2 3 4 5 6 7 8; do
		run -0 pisb stop lean
		run -0 pisb start lean
		run -0 pisb exec lean -- cat /proc/1/comm
		[ "$output" = pisb-init ]
	done
	# the controller is a fork of pisb (no exec), named as an exec'd one
	# would be: in full, or with an empty environment as much as fits
	ctl=$(pisb inspect lean | jq -r .controller.pid)
	[ "$(ps -o args= -p "$ctl")" = "$(readlink -f "$PISB_BIN_DIR/pisb") supervise lean --state-dir $PI_SANDBOX_HOME --notify-fd 3" ]
	run -0 env -i "$PISB_BIN_DIR/pisb" --state-dir "$PI_SANDBOX_HOME" stop lean
	run -0 env -i "$PISB_BIN_DIR/pisb" --state-dir "$PI_SANDBOX_HOME" start lean
	ctl=$(pisb inspect lean | jq -r .controller.pid)
	[[ "$(ps -o args= -p "$ctl")" == *"pisb supervise lean"* ]]
	[ "$(ctl_exe lean)" = "$(readlink -f "$PISB_BIN_DIR/pisb")" ]
	# a create that pisb-create runs (not pisb) spawns pisb-svc's
	run -0 pisb-create create viacreate
	[ "$(ctl_exe viacreate)" = "$(readlink -f "$PISB_BIN_DIR/pisb-svc")" ]
	# the verb is internal: pisb runs it, and lists it nowhere
	run -2 --separate-stderr pisb supervise
	[[ $stderr == *"usage: pisb supervise NAME"* ]]
	run -0 pisb help
	[[ $output != *supervise* ]]
}

@test "an idle sandbox sleeps: neither its controller nor its init wakes on a timer, nor holds an inotify instance; orphans are reaped at once" {
	run -0 pisb create sleepy
	ctl=$(pisb inspect sleepy | jq -r .controller.pid)
	init=$(pisb inspect sleepy | jq -r .controller.initPid)
	# orphans: each sh's background sleep outlives it and becomes the init's
	run -0 pisb exec sleepy --sh 'for i in 1 2 3 4 5; do sh -c "sleep 0.1 &"; done'
	sleep 0.6
	run -0 pisb exec sleepy -- ps -eo stat=,args=
	[[ $output != *"Z "* ]]
	[[ $output != *"sleep 0.1"* ]]
	# after the last request (the exec asks nothing of the controller, the
	# inspects do): its trim 0.2 s later, then nothing
	sleep 0.5
	switches() { awk '/^(voluntary|nonvoluntary)_ctxt_switches/ { s += $2 } END { print s }' "/proc/$1/status"; }
	c0=$(switches "$ctl") i0=$(switches "$init")
	sleep 2.5
	[ "$(switches "$ctl")" = "$c0" ]
	[ "$(switches "$init")" = "$i0" ]
	# and it still answers at once
	run -0 pisb exec sleepy -- true
	# its watch of instances/ is no inotify instance: the kernel allows a
	# user 128, which idle sandboxes must not take from the user's programs
	run -0 find "/proc/$ctl/fd" -lname 'anon_inode:inotify'
	[ -z "$output" ]
	run -0 pisb stop sleepy
}

@test "a start moves the overlay's scratch directory of the last run aside and drops it, and what an interrupted run left" {
	run -0 pisb create scratch
	run -0 pisb exec scratch --sh 'echo kept > /root/f'
	run -0 pisb stop scratch
	w=$PI_SANDBOX_HOME/instances/scratch/disk/work
	[ -d "$w/work" ]
	mkdir "$w/old-left-by-a-crash"
	# the old ones are dropped once the sandbox runs, after the start has
	# been told so (the drop is not on the start's path): waited for
	only_work() { for _ in $(seq 50); do [ "$(ls -A "$w")" = work ] && return 0; sleep 0.1; done; }
	run -0 pisb start scratch
	only_work
	run -0 ls -A "$w"
	[ "$output" = work ]
	run -0 pisb stop scratch
	run -0 pisb start scratch
	only_work
	run -0 ls -A "$w"
	[ "$output" = work ]
	run -0 pisb exec scratch -- cat /root/f
	[ "$output" = kept ]
}

@test "limits are enforced (as root) and read back in inspect" {
	require_root
	printf 'resources:\n  cpus: 1\n  memoryGiB: 1\n  pids: 64\n' > "$BATS_TEST_TMPDIR/s.yaml"
	run -0 pisb create lim -f "$BATS_TEST_TMPDIR/s.yaml"
	run -0 pisb inspect lim
	jq -e '.limits.cpus == 1 and .limits.memoryGiB == 1 and .limits.pids == 64 and .limits.enforced.memory and .limits.enforced.pids and .limits.enforced.cpus' <<<"$output"
	jq -e '.limits.enforced.disk == false and (.limits.note | test("disk"))' <<<"$output"
}

@test "an explicit limit that cannot be enforced is an error (unprivileged)" {
	st=$(mktemp -d /tmp/pisb-user.XXXXXX); chown pisbtest "$st" 2>/dev/null || skip "machine lacks: the test user pisbtest"
	chmod 755 "$st"
	printf 'resources:\n  memoryGiB: 1\n' > "$st/s.yaml"
	chmod 644 "$st/s.yaml"
	run -1 --separate-stderr as_user pisb --state-dir "$st/s" create lim -f "$st/s.yaml"
	[[ $stderr == *"not enforced"* ]]
	rm -rf "$st"
}

@test "a caller's umask 077 (a hardened root's) does not keep a sandbox from booting, at create or at start" {
	( umask 077 && pisb create um -q ) || { echo "create under umask 077 failed"; false; }
	run -0 pisb exec um -- true
	run -0 pisb stop um
	( umask 077 && pisb start um -q ) || { echo "start under umask 077 failed"; false; }
	run -0 pisb exec um -- hostname
	[ "$output" = um ]
	# what pisb keeps private stays so
	[ "$(stat -c %a "$PI_SANDBOX_HOME/instances/um/record.json")" = 600 ]
}

@test "works as an unprivileged user: create, exec, stop, start, destroy" {
	st=$(mktemp -d /tmp/pisb-user.XXXXXX); chown pisbtest "$st" 2>/dev/null || skip "machine lacks: the test user pisbtest"
	run -0 as_user pisb --state-dir "$st/s" create u1
	run -0 as_user pisb --state-dir "$st/s" exec u1 --sh 'id -u; echo x > /workspace/f'
	[ "$output" = 0 ]
	run -0 as_user pisb --state-dir "$st/s" stop u1
	run -0 as_user pisb --state-dir "$st/s" start u1
	run -0 as_user pisb --state-dir "$st/s" exec u1 -- cat /workspace/f
	[ "$output" = x ]
	run -0 as_user pisb --state-dir "$st/s" inspect u1
	jq -e '.limits.enforced.memory == false and (.limits.note | test("not enforced"))' <<<"$output"
	run -0 as_user pisb --state-dir "$st/s" destroy u1 --confirm u1
	rm -rf "$st"
}
