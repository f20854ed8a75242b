# bench/lib.sh - timing helpers for the benchmarks (sourced).
# Every comparison runs the peers in the same run, on the same machine, and
# reports medians and the ratio.

BENCH_RUNS=${BENCH_RUNS:-200}

# median_ms NAME CMD... : median wall time of CMD in ms (hyperfine -N: no shell)
median_ms() {
	local json
	json=$(mktemp)
	hyperfine -N --style none --warmup 5 --runs "$BENCH_RUNS" --export-json "$json" -- "$*" >/dev/null 2>&1 || {
		rm -f "$json"; echo NaN; return 1; }
	jq -r '.results[0].median * 1000' "$json"
	rm -f "$json"
}

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }'; }

# row LABEL VALUE_MS PEER_LABEL PEER_MS [LIMIT_RATIO]
row() {
	local r verdict=""
	r=$(ratio "$2" "$4")
	if [ -n "${5:-}" ]; then
		verdict=$(awk -v r="$r" -v l="$5" 'BEGIN { print (r != "n/a" && r <= l) ? "ok" : "OVER" }')
		verdict=" (target <= ${5}x: $verdict)"
	fi
	printf '  %-34s %9.3f ms   %-26s %9.3f ms   ratio %sx%s\n' "$1" "$2" "$3" "$4" "$r" "$verdict"
}

line() { printf '  %-34s %s\n' "$1" "$2"; }
section() { printf '\n%s\n' "$*"; }
