#!/usr/bin/env bash
# bench/ab.sh BIN_A BIN_B [ROUNDS] - the local driver's lifecycle of two
# builds side by side: each round runs, for A and for B (each first in
# every other round), create -> first command, stop, start -> first
# command (the same sandbox flow as lifecycle.sh), and on the running
# sandbox an exec round trip (exec -- true), a 64 KiB write and its read
# back, with bwrap cold beside each, so that both see the same load.
# Prints the median of each and B/A, and each build's B/bwrap.  Each build
# gets its own state directory.  Not part of make bench: for comparing a change
# against main (e.g. BIN_A=a copy of main's bin/).
set -uo pipefail
[ $# -ge 2 ] || { echo "usage: bench/ab.sh BIN_A BIN_B [ROUNDS]" >&2; exit 2; }
A=$(realpath "$1") B=$(realpath "$2") N=${3:-20}
tmp=$(mktemp -d /tmp/pisb-bench-ab.XXXXXX)
trap 'for x in a b; do for n in $(PI_SANDBOX_HOME=$tmp/$x.state "$A/pisb" list -q 2>/dev/null); do PI_SANDBOX_HOME=$tmp/$x.state "$A/pisb" destroy "$n" --confirm "$n" -q >/dev/null 2>&1; done; done; rm -rf "$tmp"' EXIT
. "$(dirname "$0")/lib.sh"
TIMEIT=$(bench_tool timeit) || { echo "bench/ab.sh: cannot build bench/timeit.c (cc)" >&2; exit 2; }
med() { sort -g | awk '{ a[NR] = $1 } END { if (NR == 0) print "NaN"; else print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
# t OUT CMD... [&& CMD...]: the commands' wall time (ms) appended to OUT,
# timed by bench/timeit.c as make bench times them (no shell between the
# clock and the commands, output to a pipe)
t() {
	local f=$1 out v
	shift
	out=$("$TIMEIT" "$@") || echo "$f" >>"$tmp/failed"
	read -ra v <<<"$out"
	awk -v a="${v[0]}" -v b="${v[-1]}" 'BEGIN { printf "%.3f\n", (b - a) / 1000 }' >>"$f"
}
bw=(bwrap --unshare-all --die-with-parent --ro-bind /usr /usr --symlink usr/bin /bin --symlink usr/lib /lib
	--symlink usr/lib64 /lib64 --proc /proc --dev /dev --tmpfs /tmp true)
head -c 65536 /dev/urandom | base64 >"$tmp/f64k"
# A first in odd rounds, B first in even ones: what runs first takes the
# kernel's teardown of the sandbox destroyed just before (its network
# namespace goes after destroy returned)
for i in $(seq "$N"); do
	order="a b"; [ $((i % 2)) = 0 ] && order="b a"
	for x in $order; do
		bin=$A; [ $x = b ] && bin=$B
		export PI_SANDBOX_HOME=$tmp/$x.state
		t "$tmp/$x.create" "$bin/pisb" create "ab$i" -q '&&' "$bin/pisb" exec "ab$i" -- true
		t "$tmp/$x.exec" "$bin/pisb" exec "ab$i" -- true
		t "$tmp/$x.write" "$bin/pisb" write "ab$i" f64k --from "$tmp/f64k"
		t "$tmp/$x.read" "$bin/pisb" read "ab$i" f64k --raw
		t "$tmp/bw.$x" "${bw[@]}"
		t "$tmp/$x.stop" "$bin/pisb" stop "ab$i" -q
		t "$tmp/$x.start" "$bin/pisb" start "ab$i" -q '&&' "$bin/pisb" exec "ab$i" -- true
		"$bin/pisb" destroy "ab$i" --confirm "ab$i" -q >/dev/null 2>&1
	done
done
[ -s "$tmp/failed" ] && echo "warning: $(wc -l <"$tmp/failed") commands failed ($(sort -u "$tmp/failed" | xargs -n1 basename | tr '\n' ' '))"
cat "$tmp/bw.a" "$tmp/bw.b" >"$tmp/bw"
bwm=$(med <"$tmp/bw")
printf '%-26s %10s %10s %8s %10s %10s\n' "median of $N rounds" "A ms" "B ms" "B/A" "A/bwrap" "B/bwrap"
for w in create exec write read stop start; do
	a=$(med <"$tmp/a.$w") b=$(med <"$tmp/b.$w")
	case $w in
	create) label="create -> first command" ;;
	start) label="start -> first command" ;;
	exec) label="exec -- true" ;;
	write | read) label="$w 64 KiB" ;;
	*) label=$w ;;
	esac
	awk -v l="$label" -v a="$a" -v b="$b" -v w="$bwm" 'BEGIN { printf "%-26s %10.2f %10.2f %8.2f %10.2f %10.2f\n", l, a, b, b / a, a / w, b / w }'
done
printf '%-26s %10.2f   (bwrap cold, run beside each build in every round)\n' "bwrap ... true" "$bwm"
printf 'load average %s\n' "$(cut -d' ' -f1-3 /proc/loadavg)"
