#!/usr/bin/env bats
# docker: true on the vm driver: the host image's dockerd (Debian's
# docker.io) inside the guest, the same built-in service as on local
# (drivers/local/services.c, supervised by the VM's relay), reached by pisb
# docker through the driver's exec and svc slots (drivers/local/docker.c).
# The guest agent loads the bridge's modules, mounts cgroup2 for runc and
# binds the disk's docker/ at /var/lib/docker.  Images are made from the
# static busybox (no registry is reachable here).  One VM serves the file;
# nothing here is a mock.
load helpers
load docker_local

setup_file() {
	export PI_SANDBOX_HOME="$BATS_FILE_TMPDIR/state"
	[ -z "$(vm_prereqs)" ] || return 0
	[ -z "$(docker_lacks)" ] || return 0
	make_image "$BATS_FILE_TMPDIR/bb"
	printf 'version: 1\ndriver: vm\ndocker: true\nresources: { cpus: 2, memoryGiB: 2, pids: 512 }\ndiskGiB: 4\nnetwork:\n  allowedHosts: [registry.example.invalid]\n' > "$BATS_FILE_TMPDIR/dk.yaml"
	pisb create vdk -f "$BATS_FILE_TMPDIR/dk.yaml" > "$BATS_FILE_TMPDIR/create.out" 2> "$BATS_FILE_TMPDIR/create.err" ||
		echo "create failed: $?" >> "$BATS_FILE_TMPDIR/create.err"
}

teardown_file() {
	pisb destroy vdk --confirm vdk >/dev/null 2>&1 || true
}

setup() {
	export PI_SANDBOX_HOME="$BATS_FILE_TMPDIR/state"
	local why
	why=$(docker_lacks)
	[ -z "$why" ] || skip "machine lacks: $why"
	vm_suite_setup "$BATS_FILE_TMPDIR/create.err"
	IMG=$BATS_FILE_TMPDIR/bb/busybox.tar
}

@test "config: docker: true is taken on vm; its daemon counts among the VM's service ports" {
	run -0 pisb drivers --json
	jq -e '.drivers[] | select(.name == "vm") | .verbs.docker.supported' <<<"$output"
	printf 'version: 1\ndriver: vm\ndocker: true\nservices:\n' > "$BATS_TEST_TMPDIR/nine.yaml"
	for i in 1 2 3 4 5 6 7 8; do printf '  s%d: {command: sleep 1}\n' "$i" >> "$BATS_TEST_TMPDIR/nine.yaml"; done
	run -2 --separate-stderr pisb create x -f "$BATS_TEST_TMPDIR/nine.yaml"
	[[ $stderr == *"a vm sandbox runs at most 8 services"*"this config declares 8 and docker: true's daemon is one more" ]]
	[ ! -e "$PI_SANDBOX_HOME/instances/x" ]
	printf 'version: 1\ndriver: vm\ndocker: true\nimage: %s\n' "$BATS_TEST_TMPDIR" > "$BATS_TEST_TMPDIR/img.yaml"
	run -2 --separate-stderr pisb create x -f "$BATS_TEST_TMPDIR/img.yaml"
	[[ $stderr == *"docker: needs image: host"* ]]
}

@test "the daemon starts with the VM: a supervised service, its data root on the guest's disk (ext4, overlay2), no iptables" {
	wait_daemon vdk
	run -0 pisb svc vdk status dockerd --json
	jq -e '.services[0] | .state == "running" and .ready' <<<"$output"
	run -0 pisb docker vdk status --json
	jq -e '.driver == "vm" and .daemon.reachable and .daemon.storageDriver == "overlay2"' <<<"$output"
	run -0 pisb exec vdk -- stat -f -c %T /var/lib/docker
	[ "$output" = ext2/ext3 ]
	run -0 pisb exec vdk -- sh -c 'tr "\0" " " < /proc/$(cat /run/pisb-docker/dockerd.pid)/cmdline'
	[[ $output == "dockerd "*"--iptables=false"*"--cgroup-parent=/pisb/docker"* ]]
	[[ $output != *--rootless* ]]
	run -0 pisb exec vdk -- cat /run/pisb/docker.ready
	[ "$output" = ok ]
	# the guest still has no network interface of its own but lo (docker0
	# is the daemon's bridge, reaching nothing outside the guest)
	run -0 pisb exec vdk -- sh -c 'ls /sys/class/net | grep -v -e "^lo$" -e "^docker0$" -e "^veth" || true'
	[ -z "$output" ]
}

@test "the daemon's registry traffic goes through the host's egress proxy and its allowlist" {
	wait_daemon vdk
	run -0 pisb exec vdk -- sh -c 'tr "\0" "\n" < /proc/$(cat /run/pisb-docker/dockerd.pid)/environ'
	[[ $output == *"HTTPS_PROXY=http://127.0.0.1:3128"* ]]
	# not allowed: the proxy answers 403 (without it: a DNS or route error)
	run -1 --separate-stderr pisb docker vdk pull -- quay.io/pisb/none
	[[ $stderr == *'Get "https://quay.io/v2/": Forbidden'* ]]
	# allowed: the proxy tries it (and finds no such host)
	run -1 --separate-stderr pisb docker vdk pull -- registry.example.invalid/pisb/none
	[[ $stderr == *'Get "https://registry.example.invalid/v2/": '* ]]
	[[ $stderr != *Forbidden* ]]
}

@test "load, run attached and detached, exec, logs, ps, piped stdin, exit codes" {
	wait_daemon vdk
	run -0 pisb docker vdk load < "$IMG"
	[[ $output == *"Loaded image: busybox:latest"* ]]
	run -0 pisb docker vdk run -- --rm busybox /bin/echo hello-in-vm
	[ "$output" = hello-in-vm ]
	run -3 pisb docker vdk run -- --rm busybox /bin/sh -c 'exit 3'
	run -0 bash -c 'printf "piped in" | pisb docker vdk run -- -i --rm busybox /bin/cat'
	[ "$output" = "piped in" ]
	run -0 pisb docker vdk run -- -d --name sleeper busybox /bin/sh -c 'echo started; exec sleep 1000'
	run -0 pisb docker vdk exec -- sleeper /bin/echo from-exec
	[ "$output" = from-exec ]
	run -0 pisb docker vdk logs -- sleeper
	[ "$output" = started ]
	run -0 pisb docker vdk ps
	[[ $output == *sleeper* ]]
	run -0 pisb docker vdk rm -- -f sleeper
}

@test "containers live under the guest's pids limit and -m is enforced on them" {
	wait_daemon vdk
	pisb docker vdk load < "$IMG" >/dev/null
	run -0 pisb docker vdk run -- -d --name counted busybox /bin/sleep 1000
	id=$(pisb docker vdk ps -- --no-trunc --filter name=counted --format '{{.ID}}')
	[ -n "$id" ]
	# its cgroup is below the limited pisb/, beside the commands' pisb/cmd
	run -0 pisb exec vdk -- sh -c "cat /sys/fs/cgroup/pisb/pids.max; ls -d /sys/fs/cgroup/pisb/docker/$id; grep -c . /sys/fs/cgroup/pisb/docker/$id/cgroup.procs; grep -q . /sys/fs/cgroup/pisb/cgroup.procs && echo pisb-has-processes || echo pisb-is-inner"
	[ "${lines[0]}" = 512 ]
	[ "${lines[1]}" = "/sys/fs/cgroup/pisb/docker/$id" ]
	[ "${lines[2]}" -ge 1 ]
	[ "${lines[3]}" = pisb-is-inner ]
	run -0 pisb docker vdk rm -- -f counted
	run -0 pisb docker vdk run -- --rm -m 16m busybox /bin/cat /sys/fs/cgroup/memory.max
	[ "$output" = 16777216 ]
	# a hog over its 16 MiB is killed by the guest's kernel (SIGKILL: 137)
	run -137 pisb docker vdk run -- --rm -m 16m --memory-swap 16m busybox /bin/sh -c 'x=aaaaaaaa; while true; do x="$x$x"; done'
}

@test "-p publishes a preview on host 127.0.0.1, curl reaches it, rm unpublishes it" {
	wait_daemon vdk
	pisb docker vdk load < "$IMG" >/dev/null
	pisb write vdk www/index.html --mkdir --content 'served from a container in a VM'
	run -0 --separate-stderr pisb docker vdk run -- -d --name web -p 18080:80 -v /workspace/www:/www busybox /bin/httpd -f -p 80 -h /www
	[[ $stderr == *"published 18080 on http://127.0.0.1:"* ]]
	run -0 pisb docker vdk status --json
	hp=$(jq -r '.ports[] | select(.sandboxPort == 18080) | .hostPort' <<<"$output")
	[ "$(jq -r '.ports[] | select(.sandboxPort == 18080) | .hostIp' <<<"$output")" = 127.0.0.1 ]
	[ -n "$hp" ]
	out=""
	for i in $(seq 100); do out=$(curl -fsS "http://127.0.0.1:$hp/" 2>/dev/null) && break; sleep 0.2; done
	[ "$out" = "served from a container in a VM" ]
	run -0 pisb docker vdk curl -- 18080/index.html
	[ "$output" = "served from a container in a VM" ]
	run -0 pisb docker vdk verify --json
	jq -e '.checks[] | select(.check == "port-binds") | .pass and (.evidence | test("on 127.0.0.1 only"))' <<<"$output"
	run -1 --separate-stderr pisb docker vdk curl -- 18081/
	[[ $stderr == *"18081 is not a port sandbox 'vdk' published"* ]]
	run -0 --separate-stderr pisb docker vdk rm -- -f web
	[[ $stderr == *"unpublished 18080"* ]]
	run -0 pisb inspect vdk --json
	jq -e '[.previews[] | select(.service == "port-18080")] | length == 0' <<<"$output"
	run -7 curl -sS --max-time 5 "http://127.0.0.1:$hp/"
}

@test "a container reads no host file: not by path, and a bind of / is refused" {
	wait_daemon vdk
	pisb docker vdk load < "$IMG" >/dev/null
	secret=$BATS_TEST_TMPDIR/host-secret
	echo "host secret $RANDOM" > "$secret"
	run -1 --separate-stderr pisb docker vdk run -- --rm busybox /bin/cat "$secret"
	[[ $stderr == *"No such file or directory"* ]]
	run -1 pisb exec vdk -- test -e "$secret"
	run -2 --separate-stderr pisb docker vdk run -- --rm -v /:/host busybox /bin/ls "/host$PI_SANDBOX_HOME"
	[[ $stderr == *"'-v': bind source '/' is outside the workspace"* ]]
}

@test "docker verify passes; a host path made to appear inside fails host-mounts" {
	wait_daemon vdk
	run -0 pisb docker vdk verify --json
	jq -e '.pass and .driver == "vm"' <<<"$output"
	jq -e '[.checks[].check] == ["transport","env-scrub","env-forwarding","daemon","own-socket","host-daemon","host-mounts","contexts","port-binds"]' <<<"$output"
	jq -e '.checks[] | select(.check == "host-mounts") | .evidence | test("not visible inside")' <<<"$output"
	# the guest's root makes the host's ~/.docker exist inside: the check
	# fails, naming it (it looks for the paths, not for device and inode
	# numbers, which a VM's kernel numbers apart)
	run -0 pisb exec vdk -- mkdir -p "$HOME/.docker"
	run -1 pisb docker vdk verify --json
	jq -e --arg p "$HOME/.docker" '(.pass | not) and (.checks[] | select(.check == "host-mounts") | (.pass | not) and (.evidence | contains($p)))' <<<"$output"
	run -0 pisb exec vdk -- rm -rf "$HOME/.docker"
	run -0 pisb docker vdk verify
	[[ $output == *"all checks passed"* ]]
}

@test "after stop and start: the daemon is back, images kept, a restart-policy container runs again" {
	wait_daemon vdk
	pisb docker vdk load < "$IMG" >/dev/null
	run -0 pisb docker vdk run -- -d --restart unless-stopped --name keeper busybox /bin/sleep 100000
	id1=$(pisb docker vdk status --json | jq -r .daemon.id)
	run -0 pisb stop vdk
	run -1 --separate-stderr pisb docker vdk ps
	[[ $stderr == *"sandbox 'vdk' is stopped: its docker daemon runs only while it runs (pisb start vdk)" ]]
	run -0 pisb start vdk
	wait_daemon vdk
	[ "$(pisb docker vdk status --json | jq -r .daemon.id)" = "$id1" ]
	run -0 pisb docker vdk images
	[[ $output == *busybox* ]]
	running=""
	for i in $(seq 150); do
		running=$(pisb docker vdk ps -- --filter name=keeper --format '{{.Names}}')
		[ "$running" = keeper ] && break
		sleep 0.3
	done
	[ "$running" = keeper ]
	run -0 pisb docker vdk rm -- -f keeper
}
