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
awk -v v="$v" -v l="$l" 'BEGIN { printf "  %-34s %s\n", "under 2 ms", (v < 2 && l < 2) ? "yes" : "NO" }'
