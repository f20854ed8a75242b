#!/usr/bin/env bash
# CLI start-up: pisb --version and pisb list (empty state) against /bin/true.
set -uo pipefail
. "$(dirname "$0")/lib.sh"
section "startup (median of $BENCH_RUNS; target: under 2 ms, within 1.2x /bin/true)"
t=$(median_ms /bin/true)
v=$(median_ms pisb --version)
l=$(median_ms pisb list)
row "pisb --version" "$v" "/bin/true" "$t" 1.2
row "pisb list (empty state)" "$l" "/bin/true" "$t" 1.2
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
