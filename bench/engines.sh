#!/usr/bin/env bash
# The engine choice of issue 17, measured: pisb's line search (PCRE2 with
# its JIT behind literal prefilters, common/search.c) against Hyperscan on
# the pattern kinds of bench/search.sh, over the same text files held in
# memory (bench/engines.c: no walk, no reads, no output, only the engines;
# CPU time).  Needs libhyperscan-dev (make bench installs it as root).
set -uo pipefail
. "$(dirname "$0")/lib.sh"
top=$(cd "$(dirname "$0")/.." && pwd)
section "search engines (CPU ms over text in memory; hs/pisb > 1: pisb's engine is faster)"
[ -f /usr/include/hs/hs.h ] || { cannot_run hyperscan "$(missing hyperscan libhyperscan-dev)" "engine"; exit 0; }
[ -f "$top/common/libpisb.a" ] || { line "engines" "common/libpisb.a not built (make)"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cc -O2 -std=gnu11 -D_GNU_SOURCE -iquote "$top/common" -o "$tmp/engines" "$top/bench/engines.c" \
	"$top/common/libpisb.a" $(pkg-config --libs libpcre2-8 2>/dev/null || echo -lpcre2-8) -lhs -lpthread ||
	{ line "engines" "bench/engines.c did not build"; exit 1; }
find /usr/include /usr/lib/python3 /usr/share/perl -type f 2>/dev/null >"$tmp/files"
ENGINES_TSV=$tmp/tsv "$tmp/engines" "${BENCH_ENGINE_ROUNDS:-5}" 'static inline' 'pisb_absent_needle' \
	'\bmutex\b@-i' 'malloc|calloc|realloc' '\w+\(' 'return' 'struct stat@-i' '\p{Greek}+' <"$tmp/files" |
	sed 's/^/  /'
# the summary: each kind's median, pisb's engine against Hyperscan
while IFS=$'\t' read -r pat p h; do
	result "engine $pat" "$p" "hyperscan" "$h" ms
done <"$tmp/tsv"
