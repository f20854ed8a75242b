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
		st=$(pisb docker "$1" status --json 2>/dev/null)
		jq -e '.daemon.reachable' >/dev/null <<<"$st" && return 0
		# a sandbox left stopped (by a test that failed midway) has no
		# daemon to wait for
		jq -e '.status == "stopped"' >/dev/null <<<"$st" && break
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
