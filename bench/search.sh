#!/usr/bin/env bash
# grep and find at ripgrep's and fd's level: pisb grep against rg -n,
# rg -n -j1 and grep -rn, pisb find against fdfind -g, on a tree of source
# and library text (/usr/include, python3, perl: about 200 MB, repeated
# until it is BENCH_SEARCH_MB, default 150, where a machine has less) copied
# into one sandbox.  Every command runs inside that sandbox (nsenter for the
# peers) and writes to a pipe (hyperfine --output=pipe: with /dev/null
# GNU grep stops at each file's first match).  The commands of one pattern
# are timed in one hyperfine run, in rounds (BENCH_SEARCH_ROUNDS, default
# 3, of BENCH_SEARCH_RUNS runs each, default 3) so that load from the rest
# of the machine falls on all of them; min-median-max over every run.
set -uo pipefail
. "$(dirname "$0")/lib.sh"
ROUNDS=${BENCH_SEARCH_ROUNDS:-3}
RUNS=${BENCH_SEARCH_RUNS:-3}
section "search ($ROUNDS rounds x $RUNS runs, min-median-max ms; goal: pisb <= 1.0x rg -n, find <= 1.0x fdfind -g)"
for t in rg:ripgrep fdfind:fd-find grep:grep; do
	command -v "${t%%:*}" >/dev/null || { cannot_run "${t%%:*}" "$(missing "${t%%:*}" "${t#*:}")" "search"; exit 0; }
done
pisb create bsearch -q >/dev/null || { echo "  cannot create a sandbox"; exit 1; }
init=$(pisb inspect bsearch | jq -r .controller.initPid)
ns="nsenter -t $init -U -m -r -w -S 0 -G 0"
# the tree, copied inside (the host image shows /usr read-only)
pisb exec bsearch -- sh -c 'mkdir -p /workspace/corpus && cd /workspace/corpus &&
	cp -a /usr/include include && cp -a /usr/lib/python3 python3 && cp -a /usr/share/perl perl &&
	for d in /usr/lib/x86_64-linux-gnu/perl /usr/lib/x86_64-linux-gnu/perl5; do
		[ -d "$d" ] && cp -a "$d" "perl-$(basename "$d")"; done; true'
# a machine with less of that text (a fresh Debian root has about 60 MB):
# copies of it, until the tree has the BENCH_SEARCH_MB (default 150) that
# the goal is set for
min=$((${BENCH_SEARCH_MB:-150} * 1000000))
pisb exec bsearch -- sh -c 'cd /workspace/corpus && n=2 &&
	while [ "$(du -sb . | cut -f1)" -lt "$1" ] && [ $n -le 9 ]; do
		mkdir "copy$n" && cp -a include python3 perl* "copy$n/" && n=$((n + 1)); done; true' _ "$min"
size=$($ns du -sb /workspace/corpus | cut -f1)
files=$($ns find /workspace/corpus -type f | wc -l)
copies=$($ns sh -c 'ls -d /workspace/corpus/copy* 2>/dev/null | wc -l')
note=""
[ "$copies" -gt 0 ] && note=", the text $((copies + 1)) times"
line "tree" "$((size / 1000000)) MB in $files files (/workspace/corpus$note)"
[ "$size" -ge "$min" ] || line "warning" "the tree is under $((min / 1000000)) MB"
D=/workspace/corpus
tmp=$(mktemp -d)
# gone however the run ends (an interrupted one left it in /tmp)
trap 'rm -rf "$tmp"' EXIT

# stats JSON...: "min median max" in ms over the runs of command N (0-based)
stats() {
	jq -s --argjson i "$1" '[.[] | .results[$i].times[]] | sort |
		"\(.[0] * 1000 | floor) \(.[(length / 2) | floor] * 1000 | floor) \(.[-1] * 1000 | floor)"' -r "${@:2}"
}

# measure LABEL CMD... : CMD 1 is pisb's, the rest its peers
measure() {
	local label=$1 i r
	shift
	for ((r = 0; r < ROUNDS; r++)); do
		hyperfine -N -i --output=pipe --style none --warmup 1 --runs "$RUNS" \
			--export-json "$tmp/r$r.json" -- "$@" >/dev/null 2>&1 || { line "$label" "a command failed: $*"; return; }
	done
	read -r a0 a1 a2 <<<"$(stats 0 "$tmp"/r*.json)"
	printf '  %-26s pisb %5s-%5s-%5s' "$label" "$a0" "$a1" "$a2"
	for ((i = 1; i < $#; i++)); do
		read -r b0 b1 b2 <<<"$(stats "$i" "$tmp"/r*.json)"
		printf ' | %s %5s-%5s-%5s %sx' "${PEERS[$((i - 1))]}" "$b0" "$b1" "$b2" "$(ratio "$a1" "$b1")"
		# the goal is against the first peer (rg -n, fdfind -g)
		result "${KIND:+$KIND }$label" "$a1" "${PEERS[$((i - 1))]}" "$b1" ms "$( [ "$i" = 1 ] && echo '<=1')"
	done
	printf '\n'
	rm -f "$tmp"/r*.json
}

# the pattern kinds of issue 17, a case-insensitive literal, a Unicode class
KINDS=("literal@static inline@" "rare literal@pisb_absent_needle@" "-i word@\\bmutex\\b@-i"
       "alternation@malloc|calloc|realloc@" "\\w+\\(@\\w+\\(@" "frequent literal@return@"
       "-i literal@struct stat@-i" "Unicode class@\\p{Greek}+@")
PEERS=("rg -n" "rg -n -j1" "grep -rn")
for k in "${KINDS[@]}"; do
	label=${k%%@*}; rest=${k#*@}; flag=${rest##*@}; pat=${rest%@*}
	q=$(printf %q "$pat")
	# the same lines as ripgrep (a check, not a timing)
	np=$(pisb grep bsearch $flag "$pat" --path $D --limit 100000000 | wc -l)
	nr=$($ns rg -n $flag -e "$pat" $D | wc -l)
	[ "$np" = "$nr" ] || line "$label" "MISMATCH: pisb $np lines, rg $nr"
	# grep -rn has no \p{..}: -P for that one
	gflag=-E; [ "$label" = "Unicode class" ] && gflag=-P
	KIND=grep measure "$label ($np)" "pisb grep bsearch $flag $q --path $D --limit 100000000" \
		"$ns rg -n $flag $q $D" "$ns rg -n -j1 $flag $q $D" "$ns grep -rn $flag $gflag $q $D"
done
PEERS=("fdfind -g" "fdfind -g -j1")
nf=$(pisb find bsearch '*.{c,h}' --path $D --limit 100000000 | wc -l)
KIND= measure "find '*.{c,h}' ($nf)" "pisb find bsearch *.{c,h} --path $D --limit 100000000" \
	"$ns fdfind -g --hidden --no-ignore *.{c,h} $D" "$ns fdfind -g -j1 --hidden --no-ignore *.{c,h} $D"
pisb destroy bsearch --confirm bsearch -q
