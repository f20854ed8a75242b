#!/usr/bin/env bash
# create-to-first-exec, stop, start (peers: pasta, rootlesskit); idle RSS;
# 50 concurrent sandboxes.
set -uo pipefail
. "$(dirname "$0")/lib.sh"
section "lifecycle (image: host, no setup; median of 20; target: each under 100 ms)"
med() { sort -n | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
ms() { local s e; s=$(date +%s%N); "$@" >/dev/null 2>&1; e=$(date +%s%N); echo $(( (e - s) / 1000 )) | awk '{ printf "%.3f\n", $1 / 1000 }'; }
c=(); s=(); t=()
for i in $(seq 20); do
	c+=("$(ms sh -c "pisb create lc$i && pisb exec lc$i -- true")")
	s+=("$(ms pisb stop lc$i)")
	t+=("$(ms pisb start lc$i)")
	pisb destroy lc$i --confirm lc$i -q
done
for pair in "create -> first exec:c" "stop:s" "start:t"; do
	label=${pair%%:*}; arr=${pair##*:}
	eval "vals=(\"\${$arr[@]}\")"
	m=$(printf '%s\n' "${vals[@]}" | med)
	awk -v l="$label" -v m="$m" 'BEGIN { printf "  %-34s %9.3f ms   (target < 100 ms: %s)\n", l, m, m < 100 ? "ok" : "NO" }'
done
# peers: a fresh user namespace with networking (pasta), rootlesskit's
# user + mount namespaces, each running true
peer_ms() { local v=(); for i in $(seq 20); do v+=("$(ms "$@")"); done; printf '%s\n' "${v[@]}" | med; }
# pasta drops root to nobody unless told to stay
pa=(timeout 20 pasta --config-net -q); [ "$(id -u)" = 0 ] && pa+=(--runas 0)
rk=(timeout 20 rootlesskit --net=host)
if ! command -v pasta >/dev/null; then
	cannot_run pasta "$(missing pasta passt)"
elif why=$(why_not "${pa[@]}" -- true); then
	awk -v m="$(peer_ms "${pa[@]}" -- true)" 'BEGIN { printf "  %-34s %9.3f ms   (peer)\n", "pasta --config-net -- true", m }'
else
	cannot_run pasta "$why"
fi
if ! command -v rootlesskit >/dev/null; then
	cannot_run rootlesskit "$(missing rootlesskit rootlesskit)"
elif why=$(why_not "${rk[@]}" true); then
	awk -v m="$(peer_ms "${rk[@]}" true)" 'BEGIN { printf "  %-34s %9.3f ms   (peer)\n", "rootlesskit --net=host true", m }'
else
	cannot_run rootlesskit "$why"
fi
pisb create idle -q
ctl=$(pisb inspect idle | jq -r .controller.pid); init=$(pisb inspect idle | jq -r .controller.initPid)
rss=$(( $(awk '/VmRSS/ {print $2}' /proc/$ctl/status) + $(awk '/VmRSS/ {print $2}' /proc/$init/status) ))
awk -v r="$rss" 'BEGIN { printf "  %-34s %9.0f KiB (target < 4096 KiB: %s)\n", "idle RSS (controller + init)", r, r < 4096 ? "ok" : "NO" }'
pisb destroy idle --confirm idle -q
s=$(date +%s%N); fail=0
for i in $(seq 50); do
	( pisb create cc$i -q && pisb exec cc$i -- true && pisb stop cc$i -q ) >/dev/null 2>&1 || echo fail &
done > /tmp/pisb-bench-conc.$$; wait
fail=$(grep -c fail /tmp/pisb-bench-conc.$$); rm -f /tmp/pisb-bench-conc.$$
e=$(date +%s%N)
awk -v f="$fail" -v t="$(( (e - s) / 1000000 ))" 'BEGIN { printf "  %-34s %d failures in %d ms (target: 0 failures)\n", "50 concurrent create/exec/stop", f, t }'
for i in $(seq 50); do pisb destroy cc$i --confirm cc$i -q >/dev/null 2>&1; done
