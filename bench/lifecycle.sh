#!/usr/bin/env bash
# create -> first command and start -> first command against the throwaway
# peers (bwrap cold with the same view of the host: /usr, /etc masked;
# pasta's user + network namespace, rootlesskit's), interleaved round by
# round; where create's time goes
# (PISB_TRACE phases, medians), and what of it is the state directory's
# disk (the same with the state directory on a tmpfs, BENCH_SHM_RUNS
# rounds, default 10); stop; idle memory (RSS and PSS of
# controller + init, of one sandbox alone and per sandbox of BENCH_IDLE,
# default 10, idle together); BENCH_CONC (default 100) concurrent sandboxes.
set -uo pipefail
. "$(dirname "$0")/lib.sh"
N=${BENCH_LIFECYCLE_RUNS:-20}
CONC=${BENCH_CONC:-100}
section "lifecycle (image: host, no setup; median of $N rounds, each round runs pisb and every peer once)"
tmp=$(mktemp -d /tmp/pisb-bench-lc.XXXXXX)
# gone however the run ends (an interrupted one left it in /tmp)
trap 'rm -rf "$tmp"' EXIT
med() { sort -g | awk '{ a[NR] = $1 } END { if (NR == 0) print "NaN"; else print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
now_us() { local t=$EPOCHREALTIME; echo "${t/./}"; }
# elapsed_ms START_US END_US
elapsed_ms() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f\n", (b - a) / 1000 }'; }
# every command, pisb's and the peers', is timed by bench/timeit.c: no
# shell between the clock and the command (bash's own forks around one
# command cost 1.5-2.5 ms here, as much as a whole `pisb stop`), output to
# a pipe, `A && B` for pisb's two commands; it prints the clock before the
# first and after each command (microseconds)
TIMEIT=$(bench_tool timeit) || { line "lifecycle" "not measured: cannot build bench/timeit.c (cc)"; exit 0; }
# failed WHAT: a timed command that failed (timeit drains its output: run
# WHAT by hand to see why)
failed() {
	echo "$1" >>"$tmp/failed"
	[ -s "$tmp/first-error" ] || echo "'$1' exited non-zero" >"$tmp/first-error"
}
# timed FILE CMD... [&& CMD...]: appends the commands' wall time (ms) to
# FILE; a failure appends nothing, and is counted (failed)
timed() {
	local f=$1 t out
	shift
	out=$("$TIMEIT" "$@") || { failed "$*"; return 1; }
	read -ra t <<<"$out"
	elapsed_ms "${t[0]}" "${t[-1]}" >>"$f"
}

# the peers: each starts a fresh sandbox-like environment and runs true;
# bwrap with the view pisb's host image gives: /usr, and /etc with the
# paths common/hostmask.c masks covered (empty files, empty directories)
bw=(bwrap --unshare-all --die-with-parent --ro-bind /usr /usr --symlink usr/bin /bin --symlink usr/lib /lib
	--symlink usr/lib64 /lib64 --proc /proc --dev /dev --tmpfs /tmp --ro-bind /etc /etc)
for f in /etc/shadow /etc/gshadow /etc/shadow- /etc/gshadow- /etc/security/opasswd; do
	[ -f "$f" ] && bw+=(--ro-bind /dev/null "$f")
done
for d in /etc/ssh /etc/ssl/private /etc/sudoers.d /etc/docker /etc/pisb; do
	[ -d "$d" ] && bw+=(--tmpfs "$d")
done
bw+=(true)
pa=(timeout 20 pasta --config-net -q); [ "$(id -u)" = 0 ] && pa+=(--runas 0)
pa+=(-- true)
rk=(timeout 20 rootlesskit --net=host true)
# as root, rootlesskit wants a subordinate id range for root: a private
# mount namespace gives it one (as bench/preview.sh does; the host's
# /etc/subuid and /etc/subgid are not touched)
if [ "$(id -u)" = 0 ]; then
	echo "root:1000000:65536" >"$tmp/subid"
	rk=(timeout 20 unshare -m --propagation private sh -c 'mount --bind "$0" /etc/subuid && mount --bind "$0" /etc/subgid && exec "$@"'
		"$tmp/subid" rootlesskit --net=host --subid-source=static true)
fi
peers=()
peer_ok() { # NAME CMD PACKAGE ARGV...
	local name=$1 cmd=$2 pkg=$3 why
	shift 3
	if ! command -v "$cmd" >/dev/null; then
		cannot_run "$name" "$(missing "$cmd" "$pkg")" "create -> first command"
	elif ! why=$(why_not "$@"); then
		cannot_run "$name" "$why" "create -> first command"
	else
		peers+=("$name")
	fi
}
peer_ok bwrap bwrap bubblewrap "${bw[@]}"
[ "${peers[0]:-}" != bwrap ] || bw_ok=1
peer_ok pasta pasta passt "${pa[@]}"
peer_ok rootlesskit rootlesskit rootlesskit "${rk[@]}"
run_peer() {
	case $1 in
	bwrap) timed "$tmp/p.bwrap" "${bw[@]}" ;;
	pasta) timed "$tmp/p.pasta" "${pa[@]}" ;;
	rootlesskit) timed "$tmp/p.rootlesskit" "${rk[@]}" ;;
	esac
}

# marks START_US TRACE OUT [END_US LABEL]...: the phases of one round
# appended to OUT ("WHAT<tab>ms": each mark's time since the one before)
marks() {
	local s=$1 tr=$2 out=$3
	shift 3
	{
		echo "$s start"
		sed -n 's/^pisb-trace \([0-9]*\) [0-9]* \(.*\)$/\1 \2/p' "$tr" 2>/dev/null
		while [ $# -ge 2 ]; do echo "$1 $2"; shift 2; done
	} | sort -n -s -k1,1 | awk '{ t = $1; l = $0; sub(/^[0-9]+ /, "", l) } NR > 1 { printf "%s\t%.3f\n", l, (t - prev) / 1000 } { prev = t }' >>"$out"
}

# The timed rounds run untraced: a PISB_TRACE file on the disk of the
# state directory made every mark a change to its journal, and each fsync
# of the create a commit more (a create from the pool took 0.67 ms longer
# traced to /tmp, here an ext4).  Where the time goes comes from rounds of
# their own (traced, the file on a tmpfs where there is one: /dev/shm),
# each right after the timed one.
tr=$tmp/trace
if [ -d /dev/shm ] && [ -w /dev/shm ] && [ "$(stat -f -c %T /dev/shm 2>/dev/null)" = tmpfs ]; then
	tr=$(mktemp /dev/shm/pisb-bench-trace.XXXXXX)
	trap 'rm -rf "$tmp" "$tr"' EXIT
fi
# pisb's state directory (bench/run sets it)
state=${PI_SANDBOX_HOME:-${XDG_STATE_HOME:-$HOME/.local/state}/pi-sandbox}
# traced WHAT NAME PHASES: one traced run of WHAT (create, stop or start)
# of sandbox NAME, its phases appended to PHASES (not timed)
traced() {
	local what=$1 n=$2 ph=$3 out s m e
	: >"$tr"
	case $what in
	stop)
		read -r s e <<<"$(PISB_TRACE=$tr "$TIMEIT" pisb stop "$n")"
		marks "$s" "$tr" "$ph" "$e" "pisb stop exited" ;;
	*)
		out=$(PISB_TRACE=$tr "$TIMEIT" pisb "$what" "$n" -q '&&' pisb exec "$n" -- true) || return 0
		read -r s m e <<<"$out"
		[ -n "$e" ] || e=$m
		marks "$s" "$tr" "$ph" "$m" "pisb $what exited" "$e" "first command: namespaces entered, ran, exited" ;;
	esac
}

# beside PEER_OUT ROUND OUT CMD...: CMD timed into OUT and bwrap into
# PEER_OUT back to back, bwrap first in every other round.  What runs first
# after a stop or a destroy takes the kernel's end of that sandbox (its
# network namespace is torn down after the command returned, on a CPU of
# the two): always on pisb's side, it made a start 0.3-0.5 ms slower than
# the same start run after another (the tmpfs rounds below); bwrap, which
# ran after a create, never had it.  Each side takes it half the rounds.
beside() {
	local po=$1 r=$2
	shift 2
	if [ -z "${bw_ok:-}" ]; then
		timed "$@"
	elif [ $((r % 2)) = 0 ]; then
		timed "$po" "${bw[@]}"
		timed "$@"
	else
		timed "$@"
		timed "$po" "${bw[@]}"
	fi
}

for i in $(seq "$N"); do
	beside "$tmp/p.bwrap" "$i" "$tmp/create" pisb create "lc$i" -q '&&' pisb exec "lc$i" -- true
	traced create "lt$i" "$tmp/phases"
	for p in "${peers[@]}"; do [ "$p" = bwrap ] || run_peer "$p"; done
	timed "$tmp/stop" pisb stop "lc$i"
	traced stop "lt$i" "$tmp/stop-phases"
	beside "$tmp/p.bwrap.start" "$i" "$tmp/start" pisb start "lc$i" -q '&&' pisb exec "lc$i" -- true
	traced start "lt$i" "$tmp/start-phases"
	timed "$tmp/true" /bin/true
	timed "$tmp/version" pisb --version
	pisb destroy "lc$i" --confirm "lc$i" -q >/dev/null 2>&1
	pisb destroy "lt$i" --confirm "lt$i" -q >/dev/null 2>&1
done
fail=$(cat "$tmp/failed" 2>/dev/null | wc -l)
if [ "$fail" -gt 0 ]; then
	# a failed round's time is not a sandbox's: nothing is recorded
	line "lifecycle" "not measured: $fail of $((2 * N)) rounds failed; the first: $(cat "$tmp/first-error")"
	exit 1
fi
c=$(med <"$tmp/create")
t=$(med <"$tmp/start")
st=$(med <"$tmp/stop")
printf '  %-34s %9.3f ms\n' "create -> first command" "$c" "start -> first command" "$t"
printf '  %-34s %9.3f ms   (goal < 5 ms)\n' "stop" "$st"
tt=$(med <"$tmp/true")
printf '  %-34s %9.3f ms   (the timer and a process start: each pisb command pays it, a peer once)\n' "/bin/true, timed the same way" "$tt"
# what no sandbox work can take back: the program starts on each path
# (a glibc program's own start is mostly its CPU probe: bench/startup.sh's
# floor line).  pisb: its command, pisb exec, the command; bwrap: bwrap,
# the command (the controller is a fork of pisb, the init a libc-free
# program).  pisb --version is the start of a pisb command, timed the same
# way: with musl (Makefile) a fraction of /bin/true's.
tv=$(med <"$tmp/version")
awk -v t="$tt" -v v="$tv" 'BEGIN { printf "  %-34s 3 for pisb (pisb create or start, pisb exec, true), 2 for bwrap (bwrap, true); pisb --version takes %.3f ms, /bin/true %.3f: pisb'\''s two starts cost %.2f ms, bwrap'\''s one %.2f or more\n", "program starts on the path", v, t, 2 * v, t }'
# spread A B: min-median-max over the rounds of A's time / B's (same round)
spread() {
	paste "$1" "$2" | awk '$2 > 0 { print $1 / $2 }' | sort -g |
		awk '{ a[NR] = $1 } END { if (NR) printf "%.2f-%.2f-%.2f", a[1], (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2, a[NR]; else print "n/a" }'
}
for p in "${peers[@]}"; do
	v=$(med <"$tmp/p.$p")
	# bwrap: timed beside each create and each start (beside, above)
	vs=$v ps=$tmp/p.$p where=""
	if [ "$p" = bwrap ]; then
		ps=$tmp/p.bwrap.start vs=$(med <"$tmp/p.bwrap.start")
		where=$(printf ', beside the creates; %.3f ms beside the starts' "$vs")
	fi
	printf '  %-34s %9.3f ms   (peer%s; pisb create ratio %sx, start %sx; per round min-median-max: create %s, start %s)\n' \
		"$p ... true" "$v" "$where" "$(ratio "$c" "$v")" "$(ratio "$t" "$vs")" "$(spread "$tmp/create" "$tmp/p.$p")" "$(spread "$tmp/start" "$ps")"
	goal=""; [ "$p" = bwrap ] && goal="<=1"
	result "create -> first command" "$c" "$p" "$v" ms "$goal"
	result "start -> first command" "$t" "$p" "$vs" ms "$goal"
done
result "stop" "$st" - "" ms "<5"

# create -> first command from a pool of 1 spare (pisb pool, pisb-create(1)):
# the spare is booted ahead, the create claims it; each round waits (not
# timed) until the replacement of the last one is ready, then times the
# create against bwrap in the same round
pool_ready() { pisb pool --json 2>/dev/null | jq '.[0].ready // 0'; }
wait_spare() { for _ in $(seq 300); do [ "$(pool_ready)" = 1 ] && break; sleep 0.05; done; }
if pisb pool 1 -q; then
	for i in $(seq "$N"); do
		wait_spare
		timed "$tmp/pcreate" pisb create "lp$i" -q '&&' pisb exec "lp$i" -- true
		# the controller's log says whether it was a spare
		grep -qs "spare: claimed as 'lp$i'" "$state/instances/lp$i/controller.log" || echo "lp$i" >>"$tmp/pool-missed"
		[ -z "${bw_ok:-}" ] || timed "$tmp/pp.bwrap" "${bw[@]}"
		wait_spare
		traced create "lq$i" "$tmp/pool-phases"
		pisb destroy "lp$i" --confirm "lp$i" -q >/dev/null 2>&1
		pisb destroy "lq$i" --confirm "lq$i" -q >/dev/null 2>&1
	done
	pisb pool 0 -q
	if [ -s "$tmp/failed" ]; then
		line "pool" "not measured: $(wc -l <"$tmp/failed") rounds failed; the first: $(cat "$tmp/first-error")"
		exit 1
	fi
	pc=$(med <"$tmp/pcreate")
	missed=$(cat "$tmp/pool-missed" 2>/dev/null | wc -l)
	printf '  %-34s %9.3f ms   (%s of %s rounds took a spare)\n' "create -> first command, pool of 1" "$pc" "$((N - missed))" "$N"
	if [ -n "${bw_ok:-}" ]; then
		v=$(med <"$tmp/pp.bwrap")
		printf '  %-34s %9.3f ms   (peer, the same rounds; ratio %sx, per round min-median-max %s)\n' \
			"bwrap ... true" "$v" "$(ratio "$pc" "$v")" "$(spread "$tmp/pcreate" "$tmp/pp.bwrap")"
		if [ "$missed" -eq 0 ]; then
			result "create -> first command, from a pool of 1 (pisb pool 1)" "$pc" bwrap "$v" ms "<=1"
		else
			line "pool" "not in the summary: $missed rounds found no spare ready (15 s)"
		fi
	fi
else
	line "pool" "not measured: pisb pool 1 failed"
fi

# breakdown TITLE PHASES TOTAL: the median of each phase over the rounds,
# in the order they happen, and by kind (PISB_TRACE marks, drivers/local)
breakdown() {
	local title=$1 ph=$2 whole=$3 total
	printf '\n  %s, phase by phase (median ms of %s traced rounds beside the timed ones; PISB_TRACE marks):\n' "$title" "$N"
	awk -F'\t' '!($1 in seen) { seen[$1] = ++n; name[n] = $1 } { v[$1] = v[$1] " " $2 } END {
		for (i = 1; i <= n; i++) print name[i] "\t" v[name[i]] }' "$ph" |
	while IFS=$'\t' read -r label vals; do
		printf '%s\t%s\n' "$(printf '%s\n' $vals | med)" "$label"
	done >"$ph.med"
	total=$(awk -F'\t' '{ s += $1 } END { printf "%.1f", s }' "$ph.med")
	awk -F'\t' -v tot="$total" '{ printf "    %7.2f ms %4.0f%%  %s\n", $1, (tot > 0 ? 100 * $1 / tot : 0), $2 }' "$ph.med"
	awk -F'\t' '
		/spare claimed/ { k["pool: the spare claimed (its controller'\''s answer)"] += $1; next }
		/spare published/ { k["pool: the record written, the spare renamed"] += $1; next }
		/guest config|record written|record synced|intent written|staged files synced|published|rename synced|status written/ { k["fsync'\''ed writes (state files)"] += $1; next }
		/controller spawned|controller: start|controller: staged|controller: lock|controller running|controller gone|told to begin/ { k["controller spawn, exec, readiness and exit"] += $1; next }
		/config parsed|record and config/ { k["config parse (create and controller)"] += $1; next }
		/cgroups joined/ { k["cgroup joins (cgroup.procs on v1 waits for an RCU grace period)"] += $1; next }
		/boot: forked/ { k["fork of the boot child"] += $1; next }
		/exec: sandbox looked up/ { k["pisb exec start, sandbox lookup"] += $1; next }
		/cgroup created/ { k["cgroup creation"] += $1; next }
		/cgroup removed/ { k["cgroup removal"] += $1; next }
		/namespaces made ahead/ { k["namespaces made ahead (what the boot still waits of them)"] += $1; next }
		/root mounted/ { k["namespaces and overlay mount"] += $1; next }
		/services/ { k["services and network helper"] += $1; next }
		/user namespace and id maps/ { k["user namespace and id maps"] += $1; next }
		/init ready|booted$/ { k["sandbox init start"] += $1; next }
		/init reaped|every process killed/ { k["ending the processes and the pid namespace (the disk sync beside it)"] += $1; next }
		/syncfs/ { k["disk sync (syncfs): what outlasted the reaping"] += $1; next }
		/stopped recorded/ { k["status written (stopped)"] += $1; next }
		/image layers/ { k["image layers (host skeleton)"] += $1; next }
		/local driver|state directories|staging|disk$/ { k["state and staging directories"] += $1; next }
		/setup or resume|control socket|old run/ { k["hooks, control socket, old run"] += $1; next }
		/first command/ { k["first command: setns, fork, exec, exit"] += $1; next }
		/start$|arguments parsed|record opened|exited|reported|locked|asked/ { k["process start and exit, lock, request"] += $1; next }
		{ k["other"] += $1 }
		END { for (x in k) printf "%.2f\t%s\n", k[x], x }' "$ph.med" | sort -rn |
		awk -F'\t' -v tot="$total" 'BEGIN { print "  by kind:" } { printf "    %7.2f ms %4.0f%%  %s\n", $1, (tot > 0 ? 100 * $1 / tot : 0), $2 }'
	printf '    sum of the medians %s ms (the median of the untraced whole is %s ms; the marks add a little)\n' "$total" "$whole"
}
{
	breakdown "create -> first command" "$tmp/phases" "$c"
	[ ! -s "$tmp/pool-phases" ] || breakdown "create -> first command, from a pool of 1" "$tmp/pool-phases" "$pc"
	breakdown "start -> first command" "$tmp/start-phases" "$t"
	breakdown "stop" "$tmp/stop-phases" "$st"
} | tee "$tmp/breakdown.txt"
if [ -n "${BENCH_RESULTS:-}" ]; then
	{ echo; echo '## where the time goes (PISB_TRACE)'; echo; echo '```'; cat "$tmp/breakdown.txt"; echo '```'; } >>"${BENCH_RESULTS%.tsv}.notes.md"
fi

# diskGiB as root: the disk is an ext4 image of that size (sparse, made and
# formatted at create, loop-mounted at each start); what it adds to
# create -> first command, and what it costs the host's disk
if [ "$(id -u)" = 0 ]; then
	DN=${BENCH_DISK_RUNS:-5}
	printf 'version: 1\ndiskGiB: 10\n' >"$tmp/disk.yaml"
	for i in $(seq "$DN"); do
		timed "$tmp/dcreate" pisb create "dk$i" -q -f "$tmp/disk.yaml" '&&' pisb exec "dk$i" -- true
		timed "$tmp/dplain" pisb create "dp$i" -q '&&' pisb exec "dp$i" -- true
		[ "$i" = 1 ] && dkb=$(du -k "$state/instances/dk1/disk.img" 2>/dev/null | cut -f1)
		pisb destroy "dk$i" --confirm "dk$i" -q >/dev/null 2>&1
		pisb destroy "dp$i" --confirm "dp$i" -q >/dev/null 2>&1
	done
	if [ -s "$tmp/failed" ]; then
		line "diskGiB: 10" "not measured: $(wc -l <"$tmp/failed") timed commands failed; the first: $(cat "$tmp/first-error")"
		exit 1
	fi
	dc=$(med <"$tmp/dcreate")
	dp=$(med <"$tmp/dplain")
	printf '  %-34s %9.3f ms   (without diskGiB %.3f ms, same rounds: +%.0f ms; median of %s; the 10 GiB image takes %s KiB of the host disk)\n' \
		"create -> first command, diskGiB: 10" "$dc" "$dp" "$(awk -v a="$dc" -v b="$dp" 'BEGIN { print a - b }')" "$DN" "${dkb:-?}"
	result "create -> first command, diskGiB: 10 (ext4 image)" "$dc" "no diskGiB" "$dp" ms ""
else
	line "diskGiB" "not measured: only root enforces it (an ext4 image needs a loop mount)"
fi

# the state directory's disk: create -> first command and start -> first
# command with the state directory on a tmpfs (/dev/shm: no fsync reaches
# a disk, no inode of the disk's filesystem is made or freed), beside the
# same on the disk and bwrap, in the same rounds: how much of the gap to
# bwrap, which keeps nothing, is the persistent state (root's host-wide id
# registry, /var/lib/pisb, stays on the disk in both)
shm=
if [ -d /dev/shm ] && [ -w /dev/shm ] && [ "$(stat -f -c %T /dev/shm 2>/dev/null)" = tmpfs ]; then
	shm=$(mktemp -d /dev/shm/pisb-bench-state.XXXXXX)
	trap 'rm -rf "$tmp" "$tr" "$shm"' EXIT
fi
# on m|d CMD...: CMD with the state directory on the tmpfs (m) or the disk
on() {
	local w=$1
	shift
	if [ "$w" = m ]; then PI_SANDBOX_HOME=$shm "$@"; else "$@"; fi
}
if [ -n "$shm" ]; then
	SN=${BENCH_SHM_RUNS:-10}
	for i in $(seq "$SN"); do
		# each first in every other round (as beside, above)
		order="m d"; [ $((i % 2)) = 0 ] && order="d m"
		for w in $order; do on "$w" timed "$tmp/s.$w.create" pisb create "s$w$i" -q '&&' pisb exec "s$w$i" -- true; done
		[ -z "${bw_ok:-}" ] || timed "$tmp/mbw" "${bw[@]}"
		for w in $order; do on "$w" pisb stop "s$w$i" -q; done
		for w in $order; do on "$w" timed "$tmp/s.$w.start" pisb start "s$w$i" -q '&&' pisb exec "s$w$i" -- true; done
		for w in $order; do on "$w" pisb destroy "s$w$i" --confirm "s$w$i" -q >/dev/null 2>&1; done
	done
	if [ -s "$tmp/failed" ]; then
		line "state directory on a tmpfs" "not measured: $(wc -l <"$tmp/failed") timed commands failed; the first: $(cat "$tmp/first-error")"
		exit 1
	fi
	mc=$(med <"$tmp/s.m.create") ms=$(med <"$tmp/s.m.start") dc2=$(med <"$tmp/s.d.create") ds2=$(med <"$tmp/s.d.start")
	if [ -n "${bw_ok:-}" ]; then
		mb=$(med <"$tmp/mbw")
		printf '  %-34s create -> first command %.3f ms (%sx bwrap), start -> first command %.3f ms (%sx); on the disk, the same rounds: %.3f ms (%sx) and %.3f ms (%sx); bwrap %.3f ms: the disk (its fsyncs, its filesystem'\''s inodes) is %.2f ms of a create, %.2f of a start (median of %s)\n' \
			"state directory on a tmpfs" "$mc" "$(ratio "$mc" "$mb")" "$ms" "$(ratio "$ms" "$mb")" \
			"$dc2" "$(ratio "$dc2" "$mb")" "$ds2" "$(ratio "$ds2" "$mb")" "$mb" \
			"$(awk -v a="$dc2" -v b="$mc" 'BEGIN { print a - b }')" "$(awk -v a="$ds2" -v b="$ms" 'BEGIN { print a - b }')" "$SN"
		result "create -> first command, state directory on a tmpfs" "$mc" bwrap "$mb" ms ""
		result "start -> first command, state directory on a tmpfs" "$ms" bwrap "$mb" ms ""
	fi
else
	line "state directory on a tmpfs" "not measured: /dev/shm is not a writable tmpfs"
fi

# idle memory of one sandbox: RSS, and PSS (shared pages split fairly),
# idle: its controller gives back what its start (or a request) used 0.2 s
# after its last work (TRIM_DELAY_MS, drivers/local/controller.c), and
# then sleeps until it is asked something.  Measured 1.5 s after the last
# request (the inspects): a controller that woke once a second would show
# what its wake-up brought back
pisb create idle -q
ctl=$(pisb inspect idle | jq -r .controller.pid); init=$(pisb inspect idle | jq -r .controller.initPid)
sleep 1.5
kib() { awk -v k="$2:" '$1 == k { s += $2 } END { print s + 0 }' "/proc/$1/smaps_rollup"; }
rss=$(( $(kib "$ctl" Rss) + $(kib "$init" Rss) ))
pss=$(( $(kib "$ctl" Pss) + $(kib "$init" Pss) ))
printf '  %-34s %9d KiB RSS, %d KiB PSS (goal: PSS <= 512 KiB; %d idle sandboxes in 1 GiB by PSS)\n' \
	"idle memory (controller + init)" "$rss" "$pss" "$(( pss > 0 ? 1048576 / pss : 0 ))"
result "idle memory RSS (controller + init)" "$rss" - "" KiB "<4096"
result "idle memory PSS (controller + init)" "$pss" - "" KiB "<=512"
result "idle sandboxes in 1 GiB (by PSS of one alone)" "$(( pss > 0 ? 1048576 / pss : 0 ))" - "" count ">=2048"
# the same with IDLE sandboxes idle together: what one more costs (the
# pages of pisb's binaries and libraries are shared between them; a lone
# sandbox's PSS counts them all to it), and so how many fit in 1 GiB
IDLE=${BENCH_IDLE:-10}
for i in $(seq 2 "$IDLE"); do pisb create "idle$i" -q || echo "  cannot create idle$i"; done
pids=$(for n in idle $(seq -f 'idle%g' 2 "$IDLE"); do pisb inspect "$n" | jq -r '.controller.pid, .controller.initPid'; done)
sleep 1.5
tot=0
for p in $pids; do tot=$(( tot + $(kib "$p" Pss) )); done
per=$(( tot / IDLE ))
printf '  %-34s %9d KiB PSS per sandbox (controller + init; goal <= 512 KiB; %d idle sandboxes in 1 GiB)\n' \
	"idle memory, $IDLE sandboxes idle" "$per" "$(( per > 0 ? 1048576 / per : 0 ))"
result "idle memory PSS per sandbox, $IDLE idle (controller + init)" "$per" - "" KiB "<=512"
result "idle sandboxes in 1 GiB (by PSS, $IDLE idle)" "$(( per > 0 ? 1048576 / per : 0 ))" - "" count ">=2048"
for n in idle $(seq -f 'idle%g' 2 "$IDLE"); do pisb destroy "$n" --confirm "$n" -q; done

# CONC sandboxes created, exec'ed and stopped at once
s=$(now_us)
for i in $(seq "$CONC"); do
	( pisb create "cc$i" -q && pisb exec "cc$i" -- true && pisb stop "cc$i" -q ) >/dev/null 2>&1 || echo fail &
done >"$tmp/conc"
wait
e=$(now_us)
f=$(grep -c fail "$tmp/conc")
ct=$(elapsed_ms "$s" "$e")
printf '  %-34s %d failures in %.0f ms\n' "$CONC concurrent create/exec/stop" "$f" "$ct"
result "$CONC concurrent create/exec/stop: failures" "$f" - "" count "<1"
result "$CONC concurrent create/exec/stop: wall time" "$ct" - "" ms ""
for i in $(seq "$CONC"); do pisb destroy "cc$i" --confirm "cc$i" -q >/dev/null 2>&1; done
exit 0
