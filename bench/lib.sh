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

# cannot_run PEER REASON: the line for a peer that cannot run on this machine
# (the run goes on without it)
cannot_run() { printf '  peer %s: cannot run here: %s\n' "$1" "$2"; }

# why_not CMD...: runs CMD; prints nothing if it succeeds, else the last line
# of its error output (or its exit status) and returns 1
why_not() {
	local err
	err=$("$@" 2>&1 >/dev/null) && return 0
	err=$(printf '%s\n' "$err" | grep -v '^\s*$' | tail -1)
	printf '%s' "${err:-exit status $?}"
	return 1
}

# missing CMD PACKAGE: the reason a peer's command is absent
missing() { printf '%s not installed (apt-get install %s; make bench installs it as root)' "$1" "$2"; }

# static_busybox: path of a static busybox (busybox-static), for test images
# (Docker Hub is not reachable: images are made from it, never pulled)
static_busybox() {
	local b l
	b=$(command -v busybox) || return 1
	l=$(LC_ALL=C ldd "$b" 2>&1)	# ldd fails on a static binary
	[[ $l == *"not a dynamic executable"* ]] || return 1
	printf '%s' "$b"
}
