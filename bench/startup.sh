#!/usr/bin/env bash
# CLI start-up: pisb --version and pisb list (empty state) against /bin/true.
set -uo pipefail
. "$(dirname "$0")/lib.sh"
section "startup (medians of $BENCH_RUNS runs in 5 interleaved rounds; goal: within 1.2x /bin/true in every round)"
# each command against /bin/true run by run, alternately (interleaved_ms),
# in five rounds: the load of a shared machine falls on both, and the
# worst round counts.
# Sets ms (pisb's median) and t (/bin/true's).
startup() { # LABEL CMD
	local r0 r1 r2
	read -r ms t r0 r1 r2 <<<"$(interleaved_ms 5 "$2" /bin/true)"
	row "$1" "$ms" "/bin/true" "$t" 1.2
	awk -v a="$r0" -v b="$r1" -v c="$r2" 'BEGIN { printf "  %-34s %.2f-%.2f-%.2fx (min-median-max of 5 interleaved rounds; goal: max <= 1.2)\n", "  ratio to /bin/true by round", a, b, c }'
	result "$1, worst round's ratio to /bin/true" "$r2" - "" x "<=1.2"
}
startup "pisb --version" "pisb --version"
v=$ms
startup "pisb list (empty state)" "pisb list"
l=$ms
# with sandboxes: list pings each running one's controller; in a state dir
# of its own, so that it counts three whatever else has run
three=$(mktemp -d /tmp/pisb-bench-list.XXXXXX)
chmod 700 "$three"
for n in bl1 bl2 bl3; do PI_SANDBOX_HOME=$three pisb create "$n" -q >/dev/null || echo "  cannot create $n"; done
l3=$(PI_SANDBOX_HOME=$three median_ms pisb list)
row "pisb list (3 running sandboxes)" "$l3" "/bin/true" "$t"
for n in bl1 bl2 bl3; do PI_SANDBOX_HOME=$three pisb destroy "$n" --confirm "$n" -q >/dev/null 2>&1; done
rm -rf "$three"
awk -v v="$v" -v l="$l" 'BEGIN { printf "  %-34s %s\n", "under 2 ms", (v < 2 && l < 2) ? "yes" : "NO" }'
