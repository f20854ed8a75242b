#!/usr/bin/env bash
# exec round trip: pisb exec NAME -- true against nsenter into the same
# sandbox, bwrap, and docker exec into a running container (private dockerd).
set -uo pipefail
. "$(dirname "$0")/lib.sh"
section "exec round trip (median of $BENCH_RUNS)"
pisb create bx -q >/dev/null || { echo "  cannot create a sandbox"; exit 1; }
init=$(pisb inspect bx | jq -r .controller.initPid)
p=$(median_ms pisb exec bx -- true)
n=$(median_ms nsenter -t "$init" -U -m -p -n -i -u -C -r -w --preserve-credentials true)
row "pisb exec bx -- true" "$p" "nsenter -t PID (same sbx)" "$n" 2
# the shell of --sh/--bash: its start (a login environment captured once
# per sandbox start, no profile at each call) against an argv exec
pisb exec bx --sh true && pisb exec bx --bash true
s=$(median_ms pisb exec bx --sh true)
row "pisb exec bx --sh true" "$s" "pisb exec bx -- true" "$p" 1.2
bb=$(median_ms pisb exec bx --bash true)
ba=$(median_ms pisb exec bx -- /bin/bash -c true)
row "pisb exec bx --bash true" "$bb" "pisb exec bx -- /bin/bash -c true" "$ba" 1.2
row "pisb exec bx --bash true" "$bb" "pisb exec bx -- true" "$p"
if command -v bwrap >/dev/null; then
	b=$(median_ms bwrap --unshare-all --ro-bind /usr /usr --symlink usr/bin /bin --symlink usr/lib /lib --symlink usr/lib64 /lib64 --proc /proc --dev /dev true)
	row "pisb exec bx -- true" "$p" "bwrap ... true" "$b"
fi
if command -v dockerd >/dev/null && [ "$(id -u)" = 0 ]; then
	d=$(mktemp -d /tmp/pisb-dockerd.XXXXXX)
	dockerd --data-root "$d/data" -H "unix://$d/sock" --pidfile "$d/pid" --exec-root "$d/exec" \
		--bridge=none --iptables=false --ip-masq=false >"$d/log" 2>&1 &
	for i in $(seq 100); do DOCKER_HOST="unix://$d/sock" docker info >/dev/null 2>&1 && break; sleep 0.2; done
	export DOCKER_HOST="unix://$d/sock"
	img=$(mktemp -d); cp /bin/busybox "$img/" 2>/dev/null || true
	if [ -x "$img/busybox" ]; then
		printf 'FROM scratch\nCOPY busybox /bin/busybox\nCMD ["/bin/busybox","sleep","3600"]\n' > "$img/Dockerfile"
		docker build -q -t pisb-bench-bb "$img" >/dev/null 2>&1 && docker run -d --name pisb-bench --network none pisb-bench-bb >/dev/null 2>&1
		dk=$(BENCH_RUNS=30 median_ms docker exec pisb-bench /bin/busybox true)
		row "pisb exec bx -- true" "$p" "docker exec (private dockerd)" "$dk"
		awk -v p="$p" -v d="$dk" 'BEGIN { printf "  %-34s %.1fx (target >= 20x: %s)\n", "pisb faster than docker exec by", d/p, ((d/p >= 20) ? "ok" : "NO") }'
		docker rm -f pisb-bench >/dev/null 2>&1
	else
		line "docker exec" "skipped: busybox not installed for the scratch image"
	fi
	kill "$(cat "$d/pid")" 2>/dev/null; sleep 1; rm -rf "$d" "$img"
	unset DOCKER_HOST
else
	line "docker exec" "skipped: docker.io not installed (apt-get install docker.io) or not root"
fi
pisb destroy bx --confirm bx -q
