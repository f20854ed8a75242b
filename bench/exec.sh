#!/usr/bin/env bash
# exec round trip: pisb exec NAME -- true against nsenter into the same
# sandbox, bwrap, srt, and docker and podman exec into a running container.
# A peer that cannot run here is reported with the reason; the run goes on.
set -uo pipefail
. "$(dirname "$0")/lib.sh"
section "exec round trip (median of $BENCH_RUNS)"
pisb create bx -q >/dev/null || { echo "  cannot create a sandbox"; exit 1; }
init=$(pisb inspect bx | jq -r .controller.initPid)
# run by run, alternately (interleaved_ms): each pair sees the same load
read -r p n r0 r1 r2 <<<"$(interleaved_ms 5 "pisb exec bx -- true" "nsenter -t $init -U -m -p -n -i -u -C -r -w --preserve-credentials true")"
row "pisb exec bx -- true" "$p" "nsenter -t PID (same sbx)" "$n" 1
awk -v a="$r0" -v b="$r1" -v c="$r2" 'BEGIN { printf "  %-34s %.2f-%.2f-%.2fx (min-median-max of 5 interleaved rounds; goal: max <= 1)\n", "  ratio to nsenter by round", a, b, c }'
result "exec round trip, worst round's ratio to nsenter" "$r2" - "" x "<=1"
# 100 ms apart, as an agent issues commands: back to back, the kernel's
# rcu_sync stays fast for a while after one cgroup.procs write and the next
# skips the RCU grace period (10-20 ms on cgroup v1) a lone exec would pay
read -r sp sn s0 s1 s2 <<<"$(BENCH_RUNS=$(( BENCH_RUNS / 4 > 15 ? BENCH_RUNS / 4 : 15 )) interleaved_ms 3 "pisb exec bx -- true" "nsenter -t $init -U -m -p -n -i -u -C -r -w --preserve-credentials true" 100)"
row "pisb exec bx -- true (100 ms apart)" "$sp" "nsenter -t PID (100 ms apart)" "$sn" 1
awk -v a="$s0" -v b="$s1" -v c="$s2" 'BEGIN { printf "  %-34s %.2f-%.2f-%.2fx (min-median-max of 3 interleaved rounds)\n", "  ratio to nsenter by round", a, b, c }'
# idle memory: pisb's controller + init against a container's keeper +
# process (podman: conmon; docker: containerd-shim), PSS and RSS in KiB
mem() { # FIELD PID...
	local f=$1 p s=0
	shift
	for p in "$@"; do
		s=$(( s + $(awk -v k="$f:" '$1 == k { v += $2 } END { print v + 0 }' "/proc/$p/smaps_rollup" 2>/dev/null || echo 0) ))
	done
	echo "$s"
}
ctl=$(pisb inspect bx | jq -r .controller.pid)
# idle: 1.5 s after the last request to the controller (the inspect), as
# bench/lifecycle.sh measures (its trim comes 0.2 s after its last work)
sleep 1.5
pisb_pss=$(mem Pss "$ctl" "$init") pisb_rss=$(mem Rss "$ctl" "$init")
line "idle memory (controller + init)" "PSS $pisb_pss KiB, RSS $pisb_rss KiB"
mem_peer() { # LABEL PID...
	local pss rss
	pss=$(mem Pss "${@:2}") rss=$(mem Rss "${@:2}")
	line "idle memory ($1)" "PSS $pss KiB, RSS $rss KiB"
	result "idle memory PSS per sandbox" "$pisb_pss" "$1" "$pss" KiB
	result "idle memory RSS per sandbox" "$pisb_rss" "$1" "$rss" KiB
}
# the shell of --sh/--bash: its start (a login environment captured once
# per sandbox start, no profile at each call) against an argv exec, each
# pair timed in one interleaved run by the same timer (the exec row's
# median is bench/interleave.c's, of another run: hyperfine's median of
# --sh divided by it said 1.54x once, where the two timed alike are 1.08x)
pisb exec bx --sh true && pisb exec bx --bash true
read -r s sa _ <<<"$(interleaved_ms 3 "pisb exec bx --sh true" "pisb exec bx -- true")"
row "pisb exec bx --sh true" "$s" "pisb exec bx -- true" "$sa" 1.2
read -r bb ba _ <<<"$(interleaved_ms 3 "pisb exec bx --bash true" "pisb exec bx -- /bin/bash -c true")"
row "pisb exec bx --bash true" "$bb" "pisb exec bx -- /bin/bash -c true" "$ba" 1.2
read -r bb bt _ <<<"$(interleaved_ms 3 "pisb exec bx --bash true" "pisb exec bx -- true")"
row "pisb exec bx --bash true" "$bb" "pisb exec bx -- true" "$bt"
bw=(bwrap --unshare-all --ro-bind /usr /usr --symlink usr/bin /bin --symlink usr/lib /lib --symlink usr/lib64 /lib64 --proc /proc --dev /dev true)
if ! command -v bwrap >/dev/null; then
	cannot_run bwrap "$(missing bwrap bubblewrap)" "pisb exec bx -- true"
elif why=$(why_not "${bw[@]}"); then
	row "pisb exec bx -- true" "$p" "bwrap ... true" "$(median_ms "${bw[@]}")"
else
	cannot_run bwrap "$why" "pisb exec bx -- true"
fi
# srt (Anthropic's sandbox-runtime, from npm: make bench puts it on PATH)
if ! command -v srt >/dev/null; then
	cannot_run srt "srt not installed (npm install @anthropic-ai/sandbox-runtime; make bench does)" "pisb exec bx -- true"
elif why=$(why_not timeout 60 srt true); then
	row "pisb exec bx -- true" "$p" "srt true" "$(BENCH_RUNS=30 median_ms srt true)"
else
	cannot_run srt "$why" "pisb exec bx -- true"
fi

# a busybox image for the container peers, made from busybox-static
img=$(mktemp -d /tmp/pisb-bench-img.XXXXXX)
if bbin=$(static_busybox); then
	mkdir -p "$img/root/bin" && cp "$bbin" "$img/root/bin/busybox" && tar -C "$img/root" -cf "$img/bb.tar" .
fi

# docker exec into a running container of a private dockerd
docker_peer() {
	command -v dockerd >/dev/null || { cannot_run docker "$(missing dockerd docker.io)" "pisb exec bx -- true"; return; }
	[ "$(id -u)" = 0 ] || { cannot_run docker "a private dockerd needs root" "pisb exec bx -- true"; return; }
	[ -f "$img/bb.tar" ] || { cannot_run docker "no static busybox for its image (apt-get install busybox-static)" "pisb exec bx -- true"; return; }
	local d i dk
	d=$(mktemp -d /tmp/pisb-dockerd.XXXXXX)
	dockerd --data-root "$d/data" -H "unix://$d/sock" --pidfile "$d/pid" --exec-root "$d/exec" \
		--bridge=none --iptables=false --ip-masq=false >"$d/log" 2>&1 &
	for i in $(seq 100); do DOCKER_HOST="unix://$d/sock" docker info >/dev/null 2>&1 && break; sleep 0.2; done
	export DOCKER_HOST="unix://$d/sock"
	if ! docker info >/dev/null 2>&1; then
		cannot_run docker "dockerd did not start: $(grep -v '^\s*$' "$d/log" | tail -1)" "pisb exec bx -- true"
	elif ! why=$(why_not docker import "$img/bb.tar" pisb-bench-bb) ||
		! why=$(why_not docker run -d --name pisb-bench --network none pisb-bench-bb /bin/busybox sleep 3600); then
		cannot_run docker "$why" "pisb exec bx -- true"
	else
		dk=$(BENCH_RUNS=30 median_ms docker exec pisb-bench /bin/busybox true)
		row "pisb exec bx -- true" "$p" "docker exec (private dockerd)" "$dk"
		awk -v p="$p" -v d="$dk" 'BEGIN { printf "  %-34s %.1fx (target >= 20x: %s)\n", "pisb faster than docker exec by", d/p, ((d/p >= 20) ? "ok" : "NO") }'
		local cp
		cp=$(docker inspect -f '{{.State.Pid}}' pisb-bench 2>/dev/null)
		[ -n "$cp" ] && [ "$cp" != 0 ] && mem_peer "docker: shim + process" "$(awk '{ print $4 }' "/proc/$cp/stat")" "$cp"
		docker rm -f pisb-bench >/dev/null 2>&1
	fi
	kill "$(cat "$d/pid" 2>/dev/null)" 2>/dev/null; for i in $(seq 50); do [ -e "$d/pid" ] || break; sleep 0.2; done
	unset DOCKER_HOST
	# what dockerd left mounted under its directories (deepest first)
	findmnt -rn -o TARGET | awk -v d="$d/" 'index($0, d) == 1' | sort -r | while read -r m; do umount -l "$m"; done
	rm -rf --one-file-system "$d"
}

# podman exec into a running container, runc as its runtime: crun refuses a
# host with hybrid cgroups (v1 controllers and a v2 unified mount).  Modest
# open-files and process limits: runc fails to set podman's defaults (and
# this machine's own hard limits) in the container here
podman_peer() {
	command -v podman >/dev/null || { cannot_run podman "$(missing podman podman)" "pisb exec bx -- true"; return; }
	command -v runc >/dev/null || { cannot_run podman "$(missing runc runc) (crun refuses hybrid cgroups)" "pisb exec bx -- true"; return; }
	[ -f "$img/bb.tar" ] || { cannot_run podman "no static busybox for its image (apt-get install busybox-static)" "pisb exec bx -- true"; return; }
	local d pm pk
	d=$(mktemp -d /tmp/pisb-podman.XXXXXX)
	pm=(podman --root "$d/root" --runroot "$d/run" --storage-driver vfs --runtime "$(command -v runc)"
		--cgroup-manager cgroupfs --events-backend file --tmpdir "$d/tmp")
	if ! why=$(why_not "${pm[@]}" import "$img/bb.tar" pisb-bench-bb) ||
		! why=$(why_not "${pm[@]}" run -d --name pisb-bench --network none --ulimit nofile=1024:1024 --ulimit nproc=1024:1024 pisb-bench-bb /bin/busybox sleep 3600); then
		cannot_run podman "$why" "pisb exec bx -- true"
	else
		pk=$(BENCH_RUNS=30 median_ms "${pm[*]}" exec pisb-bench /bin/busybox true)
		row "pisb exec bx -- true" "$p" "podman exec (runc)" "$pk"
		local pids
		pids=$("${pm[@]}" inspect -f '{{.State.ConmonPid}} {{.State.Pid}}' pisb-bench 2>/dev/null)
		[ -n "$pids" ] && mem_peer "podman: conmon + process" $pids
	fi
	"${pm[@]}" rm -f -t 0 pisb-bench >/dev/null 2>&1
	rm -rf "$d"
}

docker_peer
podman_peer
rm -rf "$img"
pisb destroy bx --confirm bx -q
