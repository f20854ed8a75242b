# tests/docker_local.bash - for the suites that run a real dockerd (Debian's
# docker.io) inside a local sandbox with docker: true: an image made from the
# static busybox (no registry is reachable here), waiting for the daemon,
# and what the machine lacks for them.

# A docker-archive (docker save format) of one layer: the static busybox
# as /bin/busybox and its applets.
make_image() {
	local d=$1 l c
	mkdir -p "$d/root/bin" "$d/img"
	cp /bin/busybox "$d/root/bin/busybox"
	for a in sh true echo cat ls httpd sleep id wget; do ln -sf busybox "$d/root/bin/$a"; done
	tar -C "$d/root" -cf "$d/img/layer.tar" .
	l=$(sha256sum "$d/img/layer.tar" | cut -d' ' -f1)
	printf '{"architecture":"amd64","os":"linux","config":{"Cmd":["/bin/sh"]},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]}}' "$l" > "$d/img/config.json"
	c=$(sha256sum "$d/img/config.json" | cut -d' ' -f1)
	mv "$d/img/config.json" "$d/img/$c.json"
	printf '[{"Config":"%s.json","RepoTags":["busybox:latest"],"Layers":["layer.tar"]}]' "$c" > "$d/img/manifest.json"
	tar -C "$d/img" -cf "$d/busybox.tar" manifest.json "$c.json" layer.tar
}

# Until the sandbox's daemon answers (generous: the machine is shared).
wait_daemon() {
	local i
	local st
	for i in $(seq 600); do
		# (a status that times out while the daemon or its VM is still
		# starting is a "not yet", not a failure of the test)
		st=$(pisb docker "$1" status --json 2>/dev/null) || true
		[ -n "$st" ] && jq -e '.daemon.reachable' >/dev/null <<<"$st" && return 0
		# a sandbox left stopped (by a test that failed midway) has no
		# daemon to wait for
		[ -n "$st" ] && jq -e '.status == "stopped"' >/dev/null <<<"$st" && break
		sleep 0.2
	done
	pisb docker "$1" status >&2 || true
	tail -20 "$PI_SANDBOX_HOME/instances/$1/logs/dockerd.log" >&2 || true
	return 1
}

docker_lacks() {
	[ "$(id -u)" = 0 ] || { echo "root (the daemon needs the 65536 ids root inside maps)"; return; }
	unshare -Ur true 2>/dev/null || { echo "user namespaces"; return; }
	for c in dockerd docker docker-proxy runc containerd jq curl python3 nsenter; do
		command -v "$c" >/dev/null || { echo "$c (make deps installs docker.io)"; return; }
	done
	ldd /bin/busybox >/dev/null 2>&1 && { echo "a static /bin/busybox (busybox-static)"; return; }
	[ -x /bin/busybox ] || echo "a static /bin/busybox (busybox-static)"
}

# host_bind PID SRC DST: bind the host's SRC at DST in the mount namespace
# of PID (a sandbox's init), as a leak would: open_tree(2) clones SRC here,
# setns(2) enters the sandbox's namespace (its root: a host path no longer
# resolves), move_mount(2) attaches the clone at DST.
host_bind() {
	python3 - "$@" <<'PY'
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
pid, src, dst = sys.argv[1:4]
def die(what):
    sys.exit("%s: %s" % (what, os.strerror(ctypes.get_errno())))
# open_tree(AT_FDCWD, SRC, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE)
fd = libc.syscall(428, -100, src.encode(), 1 | 0o2000000 | 0x8000)
if fd < 0: die("open_tree")
ns = os.open("/proc/%s/ns/mnt" % pid, os.O_RDONLY)
if libc.setns(ns, 0x00020000) < 0: die("setns")
# move_mount(FD, "", AT_FDCWD, DST, MOVE_MOUNT_F_EMPTY_PATH)
if libc.syscall(429, fd, b"", -100, dst.encode(), 0x4) < 0: die("move_mount")
PY
}

# host_unbind PID DST: undo it (umount(8) would read a /proc/self/mountinfo
# that a host pid has not in there)
host_unbind() {
	nsenter -t "$1" -m -- python3 -c 'import ctypes, sys; sys.exit(ctypes.CDLL(None).umount2(sys.argv[1].encode(), 2))' "$2"
}
