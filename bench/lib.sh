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

# paired_ms ROUNDS CMD_A CMD_B: both commands in one hyperfine run, ROUNDS
# times (BENCH_RUNS / ROUNDS runs each), so that the load of the machine
# falls on both; prints "A_MEDIAN B_MEDIAN RATIO_MIN RATIO_MEDIAN RATIO_MAX"
# (ms; the ratio A/B of each round's medians), or NaN on a failure.
# BENCH_PREPARE: a command run before each timed run (hyperfine --prepare)
paired_ms() {
	local rounds=$1 a=$2 b=$3 json r runs prep=()
	json=$(mktemp -d)
	runs=$(( BENCH_RUNS / rounds )); [ "$runs" -ge 3 ] || runs=3
	[ -z "${BENCH_PREPARE:-}" ] || prep=(--prepare "$BENCH_PREPARE")
	for ((r = 0; r < rounds; r++)); do
		hyperfine -N --style none --warmup 3 --runs "$runs" "${prep[@]}" --export-json "$json/$r.json" -- "$a" "$b" >/dev/null 2>&1 || {
			rm -rf "$json"; echo NaN NaN NaN NaN NaN; return 1; }
	done
	jq -rs '
		def med: sort | if length % 2 == 1 then .[length / 2 | floor] else (.[length / 2 - 1] + .[length / 2]) / 2 end;
		([.[].results[0].times[]] | med * 1000) as $a | ([.[].results[1].times[]] | med * 1000) as $b |
		[.[] | .results[0].median / .results[1].median] | sort as $r |
		"\($a) \($b) \($r[0]) \($r | med) \($r[-1])"' "$json"/*.json
	rm -rf "$json"
}

# interleaved_ms ROUNDS CMD_A CMD_B [GAP_MS]: like paired_ms, but run by
# run, A and B alternately (bench/interleave.c, built on first use): the
# load of the moment falls on both sides of every pair, where hyperfine
# runs one command's runs after the other's.  GAP_MS: a pause before each
# run.  BENCH_RUNS / ROUNDS pairs per round; the same five numbers.
interleaved_ms() {
	local rounds=$1 runs bin
	runs=$(( BENCH_RUNS / rounds )); [ "$runs" -ge 3 ] || runs=3
	bin=${BENCH_INTERLEAVE:-$(bench_tool interleave)} || { echo NaN NaN NaN NaN NaN; return 1; }
	"$bin" ${4:+-g "$4"} "$rounds" "$runs" "$2" "$3" || { echo NaN NaN NaN NaN NaN; return 1; }
}

# bench_tool NAME: the path of bench/NAME.c built (on first use, and again
# when it or bench/spawn.h is newer), or nothing when it cannot be built
bench_tool() {
	local src bin=/tmp/pisb-bench-$1.$(id -u)
	src=$(dirname "${BASH_SOURCE[0]}")/$1.c
	if [ ! -x "$bin" ] || [ "$bin" -ot "$src" ] || [ "$bin" -ot "${src%/*}/spawn.h" ]; then
		cc -O2 -o "$bin.$$" "$src" && mv -f "$bin.$$" "$bin" || return 1
	fi
	echo "$bin"
}

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }'; }

# result WHAT PISB PEER_LABEL PEER UNIT [GOAL]: one comparison for the
# summary table of bench/run (a tab-separated line in $BENCH_RESULTS; no-op
# when a script runs alone).  PEER_LABEL "-" and PEER "" for a figure with
# no peer.  GOAL is "<=R" (ratio pisb/peer at most R, lower is better: the
# default for times), ">=R" (at least R: throughput), or "<V"/">V" for a
# figure with no peer; empty for none.  A missed goal is reported, never a
# failure.
result() {
	[ -n "${BENCH_RESULTS:-}" ] || return 0
	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$(basename "$0" .sh)" "$1" "$2" "$3" "${4:-}" "${5:-ms}" "${6:-}" >>"$BENCH_RESULTS"
}

# peer_missing WHAT PEER_LABEL REASON: a peer that could not run, for the table
peer_missing() {
	[ -n "${BENCH_RESULTS:-}" ] || return 0
	printf '%s\t%s\t\t%s\t\t-\t%s\n' "$(basename "$0" .sh)" "$1" "$2" "cannot run: $3" >>"$BENCH_RESULTS"
}

# row LABEL VALUE_MS PEER_LABEL PEER_MS [LIMIT_RATIO]
row() {
	local r verdict=""
	r=$(ratio "$2" "$4")
	if [ -n "${5:-}" ]; then
		verdict=$(awk -v r="$r" -v l="$5" 'BEGIN { print (r != "n/a" && r <= l) ? "ok" : "OVER" }')
		verdict=" (target <= ${5}x: $verdict)"
	fi
	printf '  %-34s %9.3f ms   %-26s %9.3f ms   ratio %sx%s\n' "$1" "$2" "$3" "$4" "$r" "$verdict"
	result "$1" "$2" "$3" "$4" ms "${5:+<=$5}"
}

line() { printf '  %-34s %s\n' "$1" "$2"; }
section() { printf '\n%s\n' "$*"; }

# cannot_run PEER REASON [WHAT]: the line for a peer that cannot run on this
# machine (the run goes on without it); WHAT, if given, puts it in the
# summary table as that comparison's peer
cannot_run() {
	printf '  peer %s: cannot run here: %s\n' "$1" "$2"
	[ -z "${3:-}" ] || peer_missing "$3" "$1" "$2"
}

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
