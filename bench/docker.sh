#!/usr/bin/env bash
# docker: true on the local driver: how long the sandbox's own dockerd takes
# to answer after pisb start against a private host dockerd's start until it
# answers, `docker run --rm busybox true` through pisb
# docker against the same on a private dockerd on the host (same image, same
# machine, same run), and the idle memory of the sandbox with its daemon
# against that host daemon's; each with its ratio.  Runs alone too: bench/docker.sh.
set -uo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
own=
hd=
if [ -z "${PI_SANDBOX_HOME:-}" ]; then
	PI_SANDBOX_HOME=$(mktemp -d /tmp/pisb-bench.XXXXXX)/state
	export PI_SANDBOX_HOME
	own=1
fi
cleanup() {
	if [ -n "$hd" ]; then kill "$hd" 2>/dev/null; wait "$hd" 2>/dev/null; fi
	if [ -n "$own" ]; then pisb destroy dkb --confirm dkb -q >/dev/null 2>&1; rm -rf "$(dirname "$PI_SANDBOX_HOME")"; fi
}
trap cleanup EXIT
RUNS=${BENCH_DOCKER_RUNS:-20}
STARTS=${BENCH_DOCKER_STARTS:-5}
section "docker: true, local driver (median of $RUNS runs, $STARTS starts)"
command -v dockerd >/dev/null || { cannot_run docker "$(missing dockerd docker.io)"; exit 0; }
[ "$(id -u)" = 0 ] || { cannot_run docker "the sandbox's daemon and a private host dockerd need root"; exit 0; }
bbin=$(static_busybox) || { cannot_run docker "no static busybox for the image (apt-get install busybox-static)"; exit 0; }

# one image, a docker-archive of the static busybox, for both daemons
img=$(mktemp -d /tmp/pisb-bench-dimg.XXXXXX)
mkdir -p "$img/root/bin" "$img/a"
cp "$bbin" "$img/root/bin/busybox"
ln -s busybox "$img/root/bin/true"
tar -C "$img/root" -cf "$img/a/layer.tar" .
l=$(sha256sum "$img/a/layer.tar" | cut -d' ' -f1)
printf '{"architecture":"amd64","os":"linux","config":{},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]}}' "$l" > "$img/a/c.json"
c=$(sha256sum "$img/a/c.json" | cut -d' ' -f1)
mv "$img/a/c.json" "$img/a/$c.json"
printf '[{"Config":"%s.json","RepoTags":["busybox:latest"],"Layers":["layer.tar"]}]' "$c" > "$img/a/manifest.json"
tar -C "$img/a" -cf "$img/bb.tar" manifest.json "$c.json" layer.tar

ready() {   # until the sandbox's daemon answers (at most 120 s)
	local i
	for i in $(seq 2400); do
		pisb docker dkb status --json 2>/dev/null | jq -e .daemon.reachable >/dev/null && return 0
		sleep 0.05
	done
	return 1
}
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }
median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

printf 'version: 1\ndocker: true\n' > "$img/docker.yaml"
pisb create dkb -q -f "$img/docker.yaml" >/dev/null || { echo "  cannot create a sandbox with docker: true"; exit 1; }
ready || { cannot_run "pisb docker" "the sandbox's daemon did not answer: $(tail -1 "$PI_SANDBOX_HOME/instances/dkb/logs/dockerd.log")"; exit 1; }
pisb docker dkb load < "$img/bb.tar" >/dev/null

# daemon ready after pisb start (stop first: every start boots it again)
st=() rd=()
for _ in $(seq "$STARTS"); do
	pisb stop dkb -q >/dev/null
	t0=$(now_ms)
	pisb start dkb -q >/dev/null
	t1=$(now_ms)
	ready || { echo "  the daemon did not come back after pisb start"; exit 1; }
	t2=$(now_ms)
	st+=($((t1 - t0)))
	rd+=($((t2 - t0)))
done
line "pisb start dkb" "$(printf '%s\n' "${st[@]}" | median) ms"

# a private dockerd of the host, its own data and exec roots, no network
# set-up (no bridge, no iptables): started and stopped STARTS times, the
# time until it answers docker info (polled every 50 ms, as above)
d=$(mktemp -d /tmp/pisb-dockerd.XXXXXX)
hstart() {
	dockerd --data-root "$d/data" -H "unix://$d/sock" --pidfile "$d/pid" --exec-root "$d/exec" \
		--bridge=none --iptables=false --ip6tables=false --ip-masq=false >"$d/log" 2>&1 &
	hd=$!
}
hready() {
	local i
	for i in $(seq 2400); do
		docker -H "unix://$d/sock" info >/dev/null 2>&1 && return 0
		kill -0 "$hd" 2>/dev/null || return 1
		sleep 0.05
	done
	return 1
}
hstop() { kill "$hd" 2>/dev/null; wait "$hd" 2>/dev/null; hd=; }
hrd=()
for _ in $(seq "$STARTS"); do
	t0=$(now_ms)
	hstart
	hready || break
	t1=$(now_ms)
	hrd+=($((t1 - t0)))
	hstop
done
p_ready=$(printf '%s\n' "${rd[@]}" | median)
if [ ${#hrd[@]} -eq "$STARTS" ]; then
	row "pisb start + daemon answers" "$p_ready" "host dockerd start + answers" "$(printf '%s\n' "${hrd[@]}" | median)"
else
	line "pisb start dkb + daemon answers" "$p_ready ms"
	cannot_run "host dockerd" "$(grep -v '^\s*$' "$d/log" | tail -1)" "pisb start + daemon answers"
fi

# the same run on that host dockerd
hstart
hready
p=$(BENCH_RUNS=$RUNS median_ms pisb docker dkb run -- --rm --network none busybox /bin/true)
if docker -H "unix://$d/sock" load < "$img/bb.tar" >/dev/null 2>&1; then
	h=$(BENCH_RUNS=$RUNS median_ms docker -H "unix://$d/sock" run --rm --network none busybox /bin/true)
	row "pisb docker dkb run --rm true" "$p" "docker run --rm (host dockerd)" "$h"
else
	cannot_run "host dockerd" "$(grep -v '^\s*$' "$d/log" | tail -1)" "pisb docker dkb run --rm true"
fi
pi=$(BENCH_RUNS=$RUNS median_ms pisb exec dkb -- docker run --rm --network none busybox /bin/true)
row "pisb exec dkb -- docker run --rm" "$pi" "pisb docker dkb run --rm" "$p"

# idle memory: every process of the sandbox (its pid namespace), after 10 s
sleep 10
init=$(pisb inspect dkb --json | jq -r .controller.initPid)
ns=$(readlink "/proc/$init/ns/pid")
rss=0
for q in /proc/[0-9]*; do
	[ "$(readlink "$q/ns/pid" 2>/dev/null)" = "$ns" ] || continue
	r=$(awk '/^VmRSS/ { print $2 }' "$q/status" 2>/dev/null)
	rss=$((rss + ${r:-0}))
done
hr=0
for q in $(cat "$d/pid" 2>/dev/null) $(pgrep -P "$(cat "$d/pid" 2>/dev/null)" 2>/dev/null); do
	r=$(awk '/^VmRSS/ { print $2 }' "/proc/$q/status" 2>/dev/null)
	hr=$((hr + ${r:-0}))
done
rm_=$(awk -v k="$rss" 'BEGIN { printf "%.1f", k / 1024 }')
hm_=$(awk -v k="$hr" 'BEGIN { printf "%.1f", k / 1024 }')
printf '  %-34s %9s MiB  %-26s %9s MiB  ratio %sx\n' "idle RSS, sandbox + its daemon" "$rm_" "idle RSS, host dockerd" "$hm_" "$(ratio "$rm_" "$hm_")"
line "" "(sandbox: every process in its pid namespace: init, dockerd, containerd; host: dockerd and its children)"
result "idle RSS, sandbox + its daemon" "$rm_" "idle RSS, host dockerd" "$hm_" MiB
hstop
rm -rf "$d" "$img"
