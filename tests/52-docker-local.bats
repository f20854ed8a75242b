#!/usr/bin/env bats
# docker: true on the local driver: a real dockerd (Debian's docker.io)
# inside the sandbox, as a built-in service, reached by pisb docker through
# the driver table.  Images are made from the static busybox (no registry
# is reachable here) and loaded with docker load.  Nothing here is a mock.
load helpers
load docker_local

setup_file() {
	export PI_SANDBOX_HOME="$BATS_FILE_TMPDIR/state"
	[ -z "$(docker_lacks)" ] || return 0
	make_image "$BATS_FILE_TMPDIR/bb"
	# previews behind a token: pisb docker curl must bring it
	printf 'version: 1\ndocker: true\npreview: {auth: token}\nnetwork:\n  allowedHosts: [registry.example.invalid]\n' > "$BATS_FILE_TMPDIR/docker.yaml"
	pisb create dk -f "$BATS_FILE_TMPDIR/docker.yaml" >/dev/null
}

teardown_file() {
	pisb destroy dk --confirm dk >/dev/null 2>&1 || true
}

setup() {
	export PI_SANDBOX_HOME="$BATS_FILE_TMPDIR/state"
	local why
	why=$(docker_lacks)
	[ -z "$why" ] || skip "machine lacks: $why"
	IMG=$BATS_FILE_TMPDIR/bb/busybox.tar
}

teardown() {
	if [ -n "${UDIR:-}" ]; then rm -rf "$UDIR"; fi
	if [ -n "${EVIL:-}" ]; then kill "$EVIL" 2>/dev/null || true; fi
	if [ -n "${HOSTD:-}" ]; then
		kill "$HOSTD" 2>/dev/null || true
		wait "$HOSTD" 2>/dev/null || true
		# the host daemon's containerd and what it left mounted under its
		# roots go too, or the test's directory cannot be removed (EBUSY)
		pkill -f -- "$BATS_TEST_TMPDIR/hostd" 2>/dev/null || true
		awk -v h="$BATS_TEST_TMPDIR/hostd/" 'index($5, h) == 1 { print $5 }' /proc/self/mountinfo |
			sort -r | xargs -r -n1 umount -l 2>/dev/null || true
	fi
}

@test "config: docker must be a boolean, is for the local and vm drivers with the host image, and owns the service name dockerd" {
	printf 'version: 1\ndocker: "yes"\n' > "$BATS_TEST_TMPDIR/a.yaml"
	run -2 --separate-stderr pisb create x -f "$BATS_TEST_TMPDIR/a.yaml"
	[[ $stderr == *"docker: must be true or false" ]]
	printf 'version: 1\ndriver: opensandbox\ndocker: true\n' > "$BATS_TEST_TMPDIR/b.yaml"
	run -2 --separate-stderr pisb create x -f "$BATS_TEST_TMPDIR/b.yaml"
	[[ $stderr == *"docker: is for the local and vm drivers only (driver is opensandbox)" ]]
	printf 'version: 1\ndocker: true\nservices:\n  dockerd:\n    command: sleep 1\n' > "$BATS_TEST_TMPDIR/c.yaml"
	run -2 --separate-stderr pisb create x -f "$BATS_TEST_TMPDIR/c.yaml"
	[[ $stderr == *"services.dockerd: is the name of the built-in docker daemon's service (docker: true)" ]]
	[ ! -e "$PI_SANDBOX_HOME/instances/x" ]
}

@test "an unprivileged user's sandbox cannot hold the daemon: create says so and leaves nothing" {
	# a directory the test user can reach (BATS_TEST_TMPDIR's parents may not be)
	d=$(mktemp -d /tmp/pisb-52-user.XXXXXX)
	UDIR=$d
	cp "$BATS_FILE_TMPDIR/docker.yaml" "$d/docker.yaml"
	chmod -R a+rwX "$d"
	run -1 --separate-stderr as_user env PI_SANDBOX_HOME="$d/state" pisb create u1 -f "$d/docker.yaml"
	[[ $stderr == *"docker: true needs pisb to run as root"* ]] || { echo "$stderr"; false; }
	run -0 as_user env PI_SANDBOX_HOME="$d/state" pisb list -q
	[ -z "$output" ]
}

@test "the daemon starts with the sandbox: a supervised service, its data root on the instance disk, its socket inside only" {
	wait_daemon dk
	run -0 pisb svc dk status --json
	jq -e '.services[] | select(.name == "dockerd") | .state == "running"' <<<"$output"
	run -0 pisb docker dk status --json
	jq -e '.driver == "local" and .daemon.reachable and (.daemon.id | length) > 10' <<<"$output"
	# overlay2 works because /var/lib/docker is the disk, not the overlay root
	jq -e '.daemon.storageDriver == "overlay2"' <<<"$output"
	run -0 pisb exec dk -- stat -f -c %T /var/lib/docker
	[ "$output" != overlayfs ]
	[ -d "$PI_SANDBOX_HOME/instances/dk/disk/docker/image" ]
	# the socket is on the sandbox's /run: the host has no such file from it
	run -0 pisb exec dk -- stat -c %F /run/docker.sock
	[ "$output" = socket ]
	run -0 pisb exec dk -- docker info --format '{{.ID}}'
	[ "$output" = "$(pisb docker dk status --json | jq -r .daemon.id)" ]
}

@test "the daemon's registry traffic goes through the egress proxy and its allowlist" {
	wait_daemon dk
	run -0 pisb exec dk -- sh -c 'tr "\0" "\n" < /proc/$(cat /run/pisb-docker/dockerd.pid)/environ'
	[[ $output == *"HTTPS_PROXY=http://127.0.0.1:3128"* ]]
	# not allowed: the proxy answers 403 (without it: a DNS or route error)
	run -1 --separate-stderr pisb docker dk pull -- quay.io/pisb/none
	[[ $stderr == *'Get "https://quay.io/v2/": Forbidden'* ]]
	# allowed: the proxy tries it (and finds no such host)
	run -1 --separate-stderr pisb docker dk pull -- registry.example.invalid/pisb/none
	[[ $stderr == *'Get "https://registry.example.invalid/v2/": '* ]]
	[[ $stderr != *Forbidden* ]]
}

@test "load, images, run attached and detached, exec, logs, ps" {
	wait_daemon dk
	run -0 pisb docker dk load < "$IMG"
	[[ $output == *"Loaded image: busybox:latest"* ]]
	run -0 pisb docker dk images
	[[ $output == *busybox*latest* ]]
	run -0 pisb docker dk run -- --rm busybox /bin/echo hello-inside
	[ "$output" = hello-inside ]
	run -3 pisb docker dk run -- --rm busybox /bin/sh -c 'exit 3'
	run -0 pisb docker dk run -- -d --name sleeper busybox /bin/sh -c 'echo started; exec sleep 1000'
	run -0 pisb docker dk exec -- sleeper /bin/echo from-exec
	[ "$output" = from-exec ]
	run -0 pisb docker dk logs -- sleeper
	[ "$output" = started ]
	run -0 pisb docker dk ps
	[[ $output == *sleeper* ]]
	run -0 bash -c 'printf "piped in" | pisb docker dk run -- -i --rm busybox /bin/cat'
	[ "$output" = "piped in" ]
	run -0 pisb docker dk rm -- -f sleeper
	run -0 pisb docker dk ps -- -a
	[[ $output != *sleeper* ]]
}

@test "import: a root filesystem tarball becomes an image, from standard input or a workspace file" {
	wait_daemon dk
	tar -C "$BATS_FILE_TMPDIR/bb/root" -cf "$BATS_TEST_TMPDIR/rootfs.tar" .
	run -0 --separate-stderr pisb docker dk import -- - imported:1 < "$BATS_TEST_TMPDIR/rootfs.tar"
	[[ $output == sha256:* ]]
	run -0 pisb docker dk run -- --rm imported:1 /bin/echo from-stdin
	[ "$output" = from-stdin ]
	pisb write dk img/rootfs.tar --mkdir < "$BATS_TEST_TMPDIR/rootfs.tar"
	run -0 pisb docker dk import -- -c 'CMD ["/bin/echo", "from-change"]' -m by-pisb img/rootfs.tar imported:2
	run -0 pisb docker dk run -- --rm imported:2
	[ "$output" = from-change ]
	run -0 pisb docker dk images -- --format '{{.Repository}}:{{.Tag}}' imported
	[[ $output == *imported:1* ]]
	[[ $output == *imported:2* ]]
	# a host path is not the workspace's, nor is a URL
	run -2 --separate-stderr pisb docker dk import -- "$BATS_TEST_TMPDIR/rootfs.tar" x:1
	[[ $stderr == *"is outside the workspace"* ]]
	run -2 --separate-stderr pisb docker dk import -- https://example.com/r.tar x:1
	[[ $stderr == *"'https://example.com/r.tar' is refused: a URL"* ]]
}

@test "build from a Dockerfile FROM the loaded image, in the workspace" {
	wait_daemon dk
	pisb docker dk load < "$IMG" >/dev/null
	pisb write dk app/Dockerfile --mkdir --content 'FROM busybox
RUN echo built-by-pisb > /built.txt
CMD ["/bin/cat", "/built.txt"]
'
	run -0 pisb docker dk build -- -t app:1 app
	run -0 pisb docker dk run -- --rm app:1
	[ "$output" = built-by-pisb ]
}

@test "BuildKit is the default builder: the sandbox's /etc/docker/daemon.json says so, and the daemon tells its clients" {
	wait_daemon dk
	run -0 pisb exec dk -- cat /etc/docker/daemon.json
	jq -e '.features.buildkit == true' <<<"$output"
	# on the instance disk, the sandbox's own (kept across stop and start)
	[ -f "$PI_SANDBOX_HOME/instances/dk/disk/docker/pisb-etc/daemon.json" ]
	# the ping a docker client reads its default builder from
	run -0 pisb exec dk -- curl -sS -I --unix-socket /run/docker.sock http://docker/_ping
	[[ $output == *"Builder-Version: 2"* ]]
}

@test "init writes the shared templates inside the workspace: detected, --lang, --compose, kept unless --force" {
	wait_daemon dk
	pisb write dk web/package.json --mkdir --content '{}'
	run -0 --separate-stderr pisb docker dk init -- web
	[[ $stderr == *"node: build it with 'pisb docker dk build -- -t IMAGE /workspace/web'"* ]]
	run -0 pisb read dk web/Dockerfile --raw
	[[ $output == "FROM node:22-alpine"* ]]
	run -0 pisb read dk web/.dockerignore --raw
	[[ $output == *".env"* ]]
	run -4 --separate-stderr pisb docker dk init --json -- web
	jq -e '.lang == "node" and .files[0].status == "kept"' <<<"$output"
	run -0 --separate-stderr pisb docker dk init --json -- --lang=python --compose --force web
	jq -e '.lang == "python" and .port == 8000 and ([.files[].status] | unique) == ["written"]' <<<"$output"
	run -0 pisb read dk web/compose.yaml --raw
	[[ $output == *'- "8000:8000"'* ]]
	# outside the workspace: refused before anything runs; a link out is not followed
	run -2 --separate-stderr pisb docker dk init -- /etc
	[[ $stderr == *"directory '/etc' is outside the workspace"* ]]
	run -0 pisb exec dk -- ln -s /etc /workspace/out
	run -3 pisb docker dk init -- out
	run -1 pisb exec dk -- test -e /etc/Dockerfile
}

@test "-p publishes a preview on host 127.0.0.1, curl reaches it, rm unpublishes it" {
	wait_daemon dk
	pisb docker dk load < "$IMG" >/dev/null
	pisb write dk www/index.html --mkdir --content 'served from a container'
	run -0 --separate-stderr pisb docker dk run -- -d --name web -p 18080:80 -v /workspace/www:/www busybox /bin/httpd -f -p 80 -h /www
	[[ $stderr == *"published 18080 on http://127.0.0.1:"* ]]
	run -0 pisb docker dk status --json
	hp=$(jq -r '.ports[] | select(.sandboxPort == 18080) | .hostPort' <<<"$output")
	[ "$(jq -r '.ports[] | select(.sandboxPort == 18080) | .hostIp' <<<"$output")" = 127.0.0.1 ]
	[ -n "$hp" ]
	tok=$(cat "$PI_SANDBOX_HOME/instances/dk/preview.token")
	run -0 pisb inspect dk --json
	jq -e --arg u "http://127.0.0.1:$hp/?pisb_token=$tok" '.previews[] | select(.service == "port-18080") | .url == $u' <<<"$output"
	out=""
	for i in $(seq 100); do out=$(curl -fsS -H "X-Pisb-Token: $tok" "http://127.0.0.1:$hp/" 2>/dev/null) && break; sleep 0.2; done
	[ "$out" = "served from a container" ]
	# without the token the preview answers 403; pisb docker curl brings it
	run -0 curl -sS -o /dev/null -w '%{http_code}' "http://127.0.0.1:$hp/"
	[ "$output" = 403 ]
	run -0 pisb docker dk curl -- 18080/index.html
	[ "$output" = "served from a container" ]
	# what a preview cannot show is said, naming the port
	run -0 --separate-stderr pisb docker dk run -- -d --rm -p 18082 -p 18083:53/udp busybox sleep 1
	[[ $stderr == *"-p 18082: no host port given, so no preview"* ]]
	[[ $stderr == *"-p 53/udp: previews are HTTP, so udp ports get none"* ]]
	# bound to loopback only: the host's listener table says so
	run -0 pisb docker dk verify --json
	jq -e '.checks[] | select(.check == "port-binds") | .pass and (.evidence | test("on 127.0.0.1 only"))' <<<"$output"
	# a port no container published is refused, and a path with a CR too
	run -1 --separate-stderr pisb docker dk curl -- 18081/
	[[ $stderr == *"18081 is not a port sandbox 'dk' published"* ]]
	run -2 --separate-stderr pisb docker dk curl -- $'18080/x\r\nHost: evil'
	[[ $stderr == *"the path may hold no space, control or non-ASCII byte"* ]]
	run -0 --separate-stderr pisb docker dk rm -- -f web
	[[ $stderr == *"unpublished 18080"* ]]
	run -0 pisb inspect dk --json
	jq -e '[.previews[] | select(.service == "port-18080")] | length == 0' <<<"$output"
	run -7 curl -sS --max-time 5 "http://127.0.0.1:$hp/"
	run -1 pisb docker dk curl -- 18080/
}

@test "a container reads no host file: not by path, not through a bind of /" {
	wait_daemon dk
	pisb docker dk load < "$IMG" >/dev/null
	secret=$BATS_TEST_TMPDIR/host-secret
	echo "host secret $RANDOM" > "$secret"
	run -1 --separate-stderr pisb docker dk run -- --rm busybox /bin/cat "$secret"
	[[ $stderr == *"No such file or directory"* ]]
	# / of the daemon is the sandbox's root, never the host's
	run --separate-stderr pisb docker dk run -- --rm -v /:/host busybox /bin/cat "/host$secret"
	[ "$status" -ne 0 ]
	[[ $output != *"host secret"* ]]
	# the host's state directory (the sandbox's own disk included) is not there
	run --separate-stderr pisb docker dk run -- --rm -v /:/host busybox /bin/ls "/host$PI_SANDBOX_HOME"
	[ "$status" -ne 0 ]
}

@test "a private host dockerd sees none of the sandbox's containers or images, and the sandbox cannot reach it" {
	wait_daemon dk
	pisb docker dk load < "$IMG" >/dev/null
	h=$BATS_TEST_TMPDIR/hostd
	mkdir -p "$h"
	dockerd --host "unix://$h/docker.sock" --data-root "$h/data" --exec-root "$h/exec" --pidfile "$h/pid" \
		--bridge=none --iptables=false --ip6tables=false > "$h/log" 2>&1 &
	HOSTD=$!
	for i in $(seq 300); do docker -H "unix://$h/docker.sock" info >/dev/null 2>&1 && break; sleep 0.2; done
	run -0 docker -H "unix://$h/docker.sock" info --format '{{.ID}}'
	hostid=$output
	[ "$hostid" != "$(pisb docker dk status --json | jq -r .daemon.id)" ]
	run -0 pisb docker dk run -- -d --name only-inside busybox /bin/sleep 1000
	run -0 docker -H "unix://$h/docker.sock" ps -aq
	[ -z "$output" ]
	run -0 docker -H "unix://$h/docker.sock" images -q
	[ -z "$output" ]
	# the host daemon's socket path does not exist inside, nor in a container
	run -1 pisb exec dk -- test -e "$h/docker.sock"
	# (a bind of / is refused by pisb docker's argument policy first)
	run -2 --separate-stderr pisb docker dk run -- --rm -v /:/host busybox /bin/ls "/host$h/docker.sock"
	[[ $stderr == *"'-v': bind source '/' is outside the workspace"* ]]
	run -0 pisb docker dk rm -- -f only-inside
}

@test "after stop and start: the daemon is back, images kept, a restart-policy container runs again" {
	wait_daemon dk
	pisb docker dk load < "$IMG" >/dev/null
	run -0 pisb docker dk run -- -d --restart unless-stopped --name keeper busybox /bin/sleep 100000
	id1=$(pisb docker dk status --json | jq -r .daemon.id)
	# this run's cgroup (another state dir's sandbox 'dk' may run beside
	# this one: tests/95's)
	rel=$(jq -r .cgroup "$PI_SANDBOX_HOME/instances/dk/status.json")
	[[ $rel == pisb/dk.* ]]
	# a daemon.json of the sandbox's own is kept at start (here: the
	# classic builder)
	run -0 pisb exec dk -- sh -c 'echo "{\"features\": {\"buildkit\": false}}" > /etc/docker/daemon.json'
	run -0 pisb stop dk
	# no cgroup of it (nor of its containers, below it) is left in any hierarchy
	[ -z "$(cgroup_dirs "$rel")" ]
	run -0 --separate-stderr pisb docker dk status --json
	jq -e '.status == "stopped" and (.daemon.reachable | not)' <<<"$output"
	run -1 --separate-stderr pisb docker dk ps
	[[ $stderr == *"sandbox 'dk' is stopped: its docker daemon runs only while it runs (pisb start dk)" ]]
	run -0 pisb start dk
	wait_daemon dk
	[ "$(pisb docker dk status --json | jq -r .daemon.id)" = "$id1" ]
	run -0 pisb exec dk -- cat /etc/docker/daemon.json
	jq -e '.features.buildkit == false' <<<"$output"
	run -0 pisb exec dk -- curl -sS -I --unix-socket /run/docker.sock http://docker/_ping
	[[ $output == *"Builder-Version: 1"* ]]
	run -0 pisb exec dk -- rm /etc/docker/daemon.json
	run -0 pisb docker dk images
	[[ $output == *busybox* ]]
	running=""
	for i in $(seq 150); do
		running=$(pisb docker dk ps -- --filter name=keeper --format '{{.Names}}')
		[ "$running" = keeper ] && break
		sleep 0.2
	done
	[ "$running" = keeper ]
	run -0 pisb docker dk rm -- -f keeper
}

@test "the sandbox's cgroups are its daemon's: -m is enforced on a container, the sandbox's own limit stays root's" {
	wait_daemon dk
	pisb docker dk load < "$IMG" >/dev/null
	# delegated: the daemon runs without --rootless
	run -0 pisb exec dk -- sh -c 'tr "\0" " " < /proc/$(cat /run/pisb-docker/dockerd.pid)/cmdline'
	[[ $output == "dockerd "* ]]
	[[ $output != *--rootless* ]]
	run -0 pisb docker dk run -- --rm -m 16m busybox /bin/cat /sys/fs/cgroup/memory/memory.limit_in_bytes
	[ "$output" = 16777216 ]
	# a hog over its 16 MiB is killed by the kernel (SIGKILL: 137)
	run -137 pisb docker dk run -- --rm -m 16m busybox /bin/sh -c 'x=aaaaaaaa; while true; do x="$x$x"; done'
	# the sandbox's root can divide its cgroup, never raise its limit
	run -0 pisb exec dk -- cat /sys/fs/cgroup/memory/memory.limit_in_bytes
	limit=$output
	run -2 --separate-stderr pisb exec dk -- sh -c 'echo 1099511627776 > /sys/fs/cgroup/memory/memory.limit_in_bytes'
	[[ $stderr == *"Permission denied"* ]]
	run -0 pisb exec dk -- cat /sys/fs/cgroup/memory/memory.limit_in_bytes
	[ "$output" = "$limit" ]
}

@test "resources report the sandbox and its daemon; prune removes every image" {
	wait_daemon dk
	pisb docker dk load < "$IMG" >/dev/null
	run -0 pisb docker dk resources --json
	jq -e '(.cpus | type) == "number" and (.docker | test("Images")) and (.disk | test("/var/lib/docker"))' <<<"$output"
	run -0 pisb docker dk prune
	run -0 pisb docker dk images -- -q
	[ -z "$output" ]
}

@test "docker verify and pisb verify pass on the sandbox's own daemon" {
	wait_daemon dk
	run -0 pisb docker dk verify --json
	jq -e '.pass' <<<"$output"
	for c in transport env-scrub env-forwarding daemon own-socket host-daemon host-mounts contexts port-binds; do
		jq -e --arg c "$c" '.checks[] | select(.check == $c) | .pass' <<<"$output" >/dev/null || { echo "check $c: $output"; false; }
	done
	run -0 pisb docker dk verify
	[[ $output == *"all checks passed"* ]]
	run -0 pisb verify dk
	[[ $output == *"PASS  host-sockets    the docker socket is the sandbox's own daemon's"* ]]
}

@test "attack: a host listener mounted over the sandbox's docker socket fails both audits" {
	wait_daemon dk
	init=$(pisb inspect dk --json | jq -r .controller.initPid)
	[ "$init" -gt 1 ]
	# a host process (host pid, net and user namespace) listening on a
	# socket in the sandbox's mount namespace, bound over /run/docker.sock
	nsenter -t "$init" -m -S "$(stat -c %u "$PI_SANDBOX_HOME/instances/dk/disk/upper")" -G "$(stat -c %g "$PI_SANDBOX_HOME/instances/dk/disk/upper")" -- python3 -c '
import socket, sys, os
s = socket.socket(socket.AF_UNIX)
s.bind("/tmp/evil.sock"); s.listen(8)
open("/tmp/evil.ready", "w").close()
while True:
    c, _ = s.accept(); c.close()
' &
	EVIL=$!
	for i in $(seq 100); do pisb exec dk -- test -e /tmp/evil.ready && break; sleep 0.1; done
	run -0 nsenter -t "$init" -m -- mount --bind /tmp/evil.sock /run/docker.sock
	run -1 pisb docker dk verify --json
	jq -e '.checks[] | select(.check == "own-socket") | (.pass | not) and (.evidence | test("not a process of the sandbox"))' <<<"$output"
	run -1 pisb verify dk
	[[ $output == *"FAIL  host-sockets    '/var/run/docker.sock' exists; '/run/docker.sock' exists"* ]]
	# (umount(8) reads /proc/self/mountinfo, which a host pid has not in there)
	run -0 nsenter -t "$init" -m -- python3 -c 'import ctypes, sys; sys.exit(ctypes.CDLL(None).umount2(b"/run/docker.sock", 0))'
	run -0 pisb docker dk verify --json
	run -0 pisb verify dk
}

@test "attack: a host directory bound inside by another spelling fails host-mounts (device and inode, not path strings)" {
	wait_daemon dk
	init=$(pisb inspect dk --json | jq -r .controller.initPid)
	[ "$init" -gt 1 ]
	h=$BATS_TEST_TMPDIR/home
	mkdir -p "$h/.ssh"
	echo host-key > "$h/.ssh/id_ed25519"
	ln -s "$h" "$BATS_TEST_TMPDIR/home-link"
	run -0 pisb exec dk -- mkdir -p /opt/keys /mnt/home
	run -0 env HOME="$h" pisb docker dk verify --json
	jq -e '.checks[] | select(.check == "host-mounts") | .pass' <<<"$output"
	# the host's ~/.ssh at a path of its own inside: the old path check
	# (is $HOME/.ssh there inside?) passed it
	run -0 host_bind "$init" "$h/.ssh" /opt/keys
	run -0 pisb exec dk -- cat /opt/keys/id_ed25519
	[ "$output" = host-key ]
	for spelled in "$h" "$h//" "$h/./" "$BATS_TEST_TMPDIR/home-link" "$BATS_TEST_TMPDIR//home/../home"; do
		run -1 env HOME="$spelled" pisb docker dk verify --json
		jq -e --arg w "'/opt/keys' inside is the host's '$spelled/.ssh'" '.checks[] | select(.check == "host-mounts") | (.pass | not) and .evidence == $w' <<<"$output" ||
			{ echo "HOME=$spelled: $output"; false; }
	done
	run -0 host_unbind "$init" /opt/keys
	# a bind of a directory above it reaches it too
	run -0 host_bind "$init" "$h" /mnt/home
	run -1 env HOME="$h" pisb docker dk verify --json
	jq -e --arg w "'/mnt/home' inside is the host's '$h', which holds '$h/.ssh'" '.checks[] | select(.check == "host-mounts") | (.pass | not) and .evidence == $w' <<<"$output"
	run -0 host_unbind "$init" /mnt/home
	run -0 env HOME="$h" pisb docker dk verify --json
	jq -e '.checks[] | select(.check == "host-mounts") | .pass' <<<"$output"
}
