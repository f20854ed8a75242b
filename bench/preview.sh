#!/usr/bin/env bash
# bench/preview.sh - the preview relay and service start-up of a local sandbox.
#
#   throughput  1 GiB download (tests/fixtures/svc/server.py, sendfile) from a
#               server inside the sandbox: through its preview, vs. directly
#               over the sandbox's own loopback by the same client (the host's
#               curl, moved into the sandbox's network namespace with
#               nsenter: only the relay differs); goal: preview >= 80% of
#               direct (median of ROUNDS, interleaved).  The same server on
#               the host's loopback is shown too: it is faster than any
#               server inside, whose memory is charged to the sandbox's
#               cgroup, relay or not.
#   probe       bench/redirect.c: the same download between two loopback
#               sockets (no sandbox) direct, through a splice relay as
#               pisb's and, as root, through a sockmap redirect (a BPF
#               verdict program: the kernel's only relay without user
#               space), and how much the redirect had queued for the client
#               at the server's EOF; pisb would take the redirect where it
#               is faster and can be bounded (it is neither here)
#   cpu         where the CPU goes during those downloads: CPU seconds per
#               GiB of the client (curl), the server and the relay (the
#               controller), from getrusage and /proc/PID/stat.  On a
#               machine with few cores the three share them, so the relay's
#               cost shows up as the client's and server's lost throughput:
#               this line says how much.
#   latency     p50 and p99 of REQS requests on fresh connections, the same
#               pairs; goal: under 0.2 ms added by the preview.  pasta's
#               server is also asked from inside pasta's namespace, so that
#               what each forwarder adds to its own server's p50 is
#               compared too (the two servers answer at their own pace)
#   peers       the same server behind pasta's -t forwarder and behind
#               rootlesskit's builtin port driver (slirp4netns network), in
#               the same rounds (each round: direct, preview, pasta,
#               rootlesskit); the ratio preview/peer of each round, reported
#               min-median-max; goal: preview at or better than each peer
#   ensure      `pisb svc NAME ensure web` (web: python3 -m http.server,
#               stopped before) minus the server's own start time measured
#               inside the sandbox; goal: under 300 ms added
#
# Needs pisb on PATH (make bench puts bin/ first), python3, curl, jq, user
# namespaces.  Prints one line per measure (and its row of make bench's
# summary); a missed goal is reported, not a failure.
# ROUNDS (default 5), REQS (default 500), SIZE_MB (default 1024) tune it.
# Other load on the machine shows in every number: run it on a quiet one.
set -euo pipefail

ROUNDS=${ROUNDS:-5}
REQS=${REQS:-500}
SIZE_MB=${SIZE_MB:-1024}
PEER_MAX_S=${PEER_MAX_S:-120}   # a peer's one download or latency run, at most
top=$(cd "$(dirname "$0")/.." && pwd)
. "$top/bench/lib.sh"
fix=$top/tests/fixtures/svc
work=$(mktemp -d "${TMPDIR:-/tmp}/pisb-bench-preview.XXXXXX")
direct_pid=
export PI_SANDBOX_HOME=$work/state
pasta_pid= pasta_srv= rk_pid=
cleanup() {
	# rootlesskit and what it runs: their own session (setsid), as a group
	[ -n "$rk_pid" ] && kill -TERM -- "-$rk_pid" 2>/dev/null
	[ -n "$direct_pid" ] && kill "$direct_pid" 2>/dev/null
	# pasta's command (its child: -f) outlives pasta and ignores SIGTERM
	# (the init of a pid namespace): the server by its pid, with SIGKILL
	if [ -n "$pasta_pid" ]; then
		pasta_srv=$(pgrep -P "$pasta_pid" || true)
		[ -n "$pasta_srv" ] && kill -KILL $pasta_srv 2>/dev/null
		kill "$pasta_pid" 2>/dev/null
	fi
	pisb destroy bench --confirm bench >/dev/null 2>&1 || true
	rm -rf "$work"
}
trap cleanup EXIT

for c in pisb python3 curl jq nsenter; do
	command -v "$c" >/dev/null || { echo "bench/preview.sh: needs $c on PATH" >&2; exit 2; }
done

col() { awk -v c="$1" '{ print $c }' "$2"; }
median() { sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }

cat >"$work/s.yaml" <<'EOF'
services:
  web:
    command: exec python3 -m http.server $PORT --bind 127.0.0.1
    preview: true
EOF
pisb create bench -f "$work/s.yaml" >/dev/null
pisb exec bench -- sh -c 'cat > /workspace/server.py' <"$fix/server.py"
out=$(pisb svc bench start srv --preview --json -- 'exec python3 /workspace/server.py')
url=$(jq -r '.services[0].url' <<<"$out")
inside=http://127.0.0.1:$(jq -r '.services[0].port' <<<"$out")
# run a host command in the network namespace of a process (the
# sandbox's init; later pasta's server) only: root joins it as it is, a
# user through its user namespace
netns_of=(-n); [ "$(id -u)" = 0 ] || netns_of=(-U -n --preserve-credentials)
init=$(pisb inspect bench | jq -r .controller.initPid)
innet_cmd=(nsenter -t "$init" "${netns_of[@]}" --)
innet() { "${innet_cmd[@]}" "$@"; }

# the same server and the same file on both sides
pisb exec bench -- sh -c "head -c ${SIZE_MB}M /dev/zero > /tmp/big.bin"
head -c "${SIZE_MB}M" /dev/zero >"$work/big.bin"
dport=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
python3 "$fix/server.py" "$dport" >/dev/null 2>&1 &
direct_pid=$!
for _ in $(seq 100); do curl -s -o /dev/null "http://127.0.0.1:$dport/slow?ms=0" && break; sleep 0.05; done
direct=http://127.0.0.1:$dport

# peer_up NAME PORT LOG: whether the peer's forwarded server answers on
# 127.0.0.1:PORT (waiting up to ~10 s); else it cannot run, LOG's last line
# saying why
peer_up() {
	local _
	for _ in $(seq 200); do curl -s -m 5 -o /dev/null "http://127.0.0.1:$2/slow?ms=0" && return 0; sleep 0.05; done
	curl -s -m 5 -o /dev/null "http://127.0.0.1:$2/slow?ms=0" && return 0
	cannot_run "$1" "its forwarded server did not answer: $(grep -v '^\s*$' "$3" | tail -1)" "preview relay throughput (1 GiB)"
	return 1
}

# peer_get NAME URL OUT WHAT: one download through the peer, its speed
# appended to OUT; a peer that stalls past PEER_MAX_S cannot run (1)
peer_get() {
	local v
	if v=$(curl -s -m "$PEER_MAX_S" -o /dev/null -w '%{speed_download}\n' "$2/file?path=$work/big.bin"); then
		echo "$v" >>"$3"
		return 0
	fi
	cannot_run "$1" "a ${SIZE_MB} MiB download through $4 did not finish in $PEER_MAX_S s" "preview relay throughput (1 GiB)"
	return 1
}

# the peer: the same server in pasta's user + network namespace, its port
# forwarded to the host's loopback by pasta (-t), the same file
pasta_url=
if ! command -v pasta >/dev/null; then
	cannot_run pasta "$(missing pasta passt)" "preview relay throughput (1 GiB)"
else
	pport=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
	pa=(pasta -f --config-net -q -t "$pport"); [ "$(id -u)" = 0 ] && pa+=(--runas 0)
	"${pa[@]}" -- python3 "$fix/server.py" "$pport" 127.0.0.1 >"$work/pasta.log" 2>&1 &
	pasta_pid=$!
	peer_up pasta "$pport" "$work/pasta.log" && pasta_url=http://127.0.0.1:$pport
fi

# the second peer: the same server in rootlesskit's namespaces (network:
# slirp4netns), its port published by rootlesskit's builtin port driver
# (a listener in the parent, connections made inside by the child).  As
# root, rootlesskit wants a subordinate id range for root: a private mount
# namespace gives it one (/etc/subuid and /etc/subgid bound over there
# only; the host's files are not touched)
rk_url=
if ! command -v rootlesskit >/dev/null; then
	cannot_run rootlesskit "$(missing rootlesskit rootlesskit)" "preview relay throughput (1 GiB)"
elif ! command -v slirp4netns >/dev/null; then
	cannot_run rootlesskit "$(missing slirp4netns slirp4netns) (its network for the builtin port driver)" "preview relay throughput (1 GiB)"
else
	rport=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
	rk=(rootlesskit --state-dir="$work/rk" --net=slirp4netns --disable-host-loopback --port-driver=builtin
		-p "127.0.0.1:$rport:8099/tcp")
	if [ "$(id -u)" = 0 ]; then
		echo "root:1000000:65536" >"$work/subid"
		rk=(unshare -m --propagation private sh -c 'mount --bind "$0" /etc/subuid && mount --bind "$0" /etc/subgid && exec "$@"'
			"$work/subid" "${rk[@]}" --subid-source=static)
	fi
	setsid "${rk[@]}" python3 "$fix/server.py" 8099 127.0.0.1 >"$work/rk.log" 2>&1 &
	rk_pid=$!
	peer_up rootlesskit "$rport" "$work/rk.log" && rk_url=http://127.0.0.1:$rport
fi

fail=0
# ratios OUT A_FILE B_FILE [COL]: "min median max" of A/B line by line
# (round by round; COL: the column, default 1)
ratios() {
	paste -d' ' "$1" "$2" | awk -v c="${3:-1}" '{ n = NF / 2; print $(c) / $(n + c) }' | sort -g |
		awk '{ a[NR] = $1 } END { printf "%.2f %.2f %.2f", a[1], (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2, a[NR] }'
}

# ---- throughput ----
: >"$work/tp.host"
: >"$work/tp.direct"

: >"$work/tp.relay"
: >"$work/tp.pasta"
for _ in $(seq "$ROUNDS"); do
	curl -s -m 600 -o /dev/null -w '%{speed_download}\n' "$direct/file?path=$work/big.bin" >>"$work/tp.host"
	innet curl -s -m 600 -o /dev/null -w '%{speed_download}\n' "$inside/file?path=/tmp/big.bin" >>"$work/tp.direct"
	curl -s -m 600 -o /dev/null -w '%{speed_download}\n' "$url/file?path=/tmp/big.bin" >>"$work/tp.relay"
	# a peer that stalls is dropped with the reason, never waited for
	[ -z "$pasta_url" ] || peer_get pasta "$pasta_url" "$work/tp.pasta" "its -t forwarder" || pasta_url=
	[ -z "$rk_url" ] || peer_get rootlesskit "$rk_url" "$work/tp.rk" "its builtin port driver" || rk_url=
done
h=$(median <"$work/tp.host")
d=$(median <"$work/tp.direct")
r=$(median <"$work/tp.relay")
mb() { awk -v x="$1" 'BEGIN {printf "%.0f", x / 1e6}'; }
pct=$(awk -v r="$r" -v d="$d" 'BEGIN {printf "%.0f", 100 * r / d}')
printf 'throughput: direct in the sandbox %s MB/s, preview %s MB/s: %s%% (goal >= 80%%); same server on host loopback %s MB/s\n' \
	"$(mb "$d")" "$(mb "$r")" "$pct" "$(mb "$h")"
[ "$pct" -ge 80 ] || fail=1
result "preview relay throughput (1 GiB)" "$(mb "$r")" "direct in the sandbox" "$(mb "$d")" MB/s ">=0.8"
result "preview relay throughput (1 GiB)" "$(mb "$r")" "host loopback" "$(mb "$h")" MB/s
if [ -s "$work/tp.pasta" ] && [ "$(wc -l <"$work/tp.pasta")" = "$(wc -l <"$work/tp.relay")" ]; then
	pt=$(median <"$work/tp.pasta")
	printf 'throughput: pasta -t forwarding the same server %s MB/s: preview %sx pasta (by round %s, min-median-max)\n' \
		"$(mb "$pt")" "$(ratio "$r" "$pt")" "$(ratios "$work/tp.relay" "$work/tp.pasta" | tr ' ' -)"
	result "preview relay throughput (1 GiB)" "$(mb "$r")" "pasta -t forwarder" "$(mb "$pt")" MB/s ">=1"
fi
if [ -s "$work/tp.rk" ] && [ "$(wc -l <"$work/tp.rk")" = "$(wc -l <"$work/tp.relay")" ]; then
	rt=$(median <"$work/tp.rk")
	printf 'throughput: rootlesskit builtin port driver %s MB/s: preview %sx rootlesskit (by round %s, min-median-max)\n' \
		"$(mb "$rt")" "$(ratio "$r" "$rt")" "$(ratios "$work/tp.relay" "$work/tp.rk" | tr ' ' -)"
	result "preview relay throughput (1 GiB)" "$(mb "$r")" "rootlesskit builtin" "$(mb "$rt")" MB/s ">=1"
fi

# ---- the kernel's other relay: a sockmap redirect (bench/redirect.c) ----
# the same bytes carried between two loopback sockets by pisb's way (splice
# through a pipe) and by a BPF verdict program (root only), interleaved;
# the tool prints MB/s
if rd=$(bench_tool redirect) && "$rd" "$SIZE_MB" "$ROUNDS" >"$work/redirect"; then
	rs=$(col 2 "$work/redirect" | median)
	if [ "$(col 3 "$work/redirect" | head -1)" = - ]; then
		printf 'relay probe (loopback, no sandbox): splice %s MB/s; sockmap redirect not measured (it needs CAP_BPF and CAP_NET_ADMIN: run as root)\n' "$rs"
	else
		rk=$(col 3 "$work/redirect" | median)
		printf 'relay probe (loopback, no sandbox): direct %s MB/s, splice relay %s, sockmap redirect %s (%sx splice; by round %s); at the server'"'"'s EOF the redirect held %s MiB queued for the client (no bound)\n' \
			"$(col 1 "$work/redirect" | median)" "$rs" "$rk" "$(ratio "$rk" "$rs")" \
			"$(ratios <(col 3 "$work/redirect") <(col 2 "$work/redirect") | tr ' ' -)" "$(col 4 "$work/redirect" | median)"
		result "relay probe: sockmap redirect (root)" "$rk" "splice relay (pisb's)" "$rs" MB/s
	fi
else
	printf 'relay probe: bench/redirect.c did not run\n'
fi

# ---- cpu per GiB: client, server, relay ----
srvpid=$(pisb svc bench status srv --json | jq -r '.services[0].hostPid')
ctlpid=$(pisb inspect bench | jq -r .controller.pid)
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)
# one download; prints client CPU seconds (children's rusage)
client_cpu() {
	python3 - "$@" <<-'EOF'
	import resource, subprocess, sys
	subprocess.run(sys.argv[1:], check=True, stdout=subprocess.DEVNULL)
	r = resource.getrusage(resource.RUSAGE_CHILDREN)
	print("%.3f" % (r.ru_utime + r.ru_stime))
	EOF
}
cpu_of() { # label, client command...
	local label=$1 s0 c0 cl
	shift
	s0=$(ticks "$srvpid") c0=$(ticks "$ctlpid")
	cl=$(client_cpu "$@")
	awk -v l="$label" -v cl="$cl" -v s="$(( $(ticks "$srvpid") - s0 ))" -v c="$(( $(ticks "$ctlpid") - c0 ))" \
		-v hz="$hz" -v gb="$(awk -v m="$SIZE_MB" 'BEGIN {print m / 1024}')" \
		'BEGIN {printf "%s: client %.2f s, server %.2f s, relay %.2f s", l, cl / gb, s / hz / gb, c / hz / gb}'
}
printf 'cpu per GiB (%s cores): %s; %s\n' "$(nproc)" \
	"$(cpu_of direct "${innet_cmd[@]}" curl -s -o /dev/null "$inside/file?path=/tmp/big.bin")" \
	"$(cpu_of preview curl -s -o /dev/null "$url/file?path=/tmp/big.bin")"

# ---- latency ----
: >"$work/lat.host"
: >"$work/lat.direct"
: >"$work/lat.relay"
# pasta's server from inside pasta's namespace too: what its forwarder
# adds to the same server there, as "added" is the preview's (the two
# servers, one in each, answer at their own pace)
pasta_in=()
if [ -n "$pasta_url" ] && psrv=$(pgrep -P "$pasta_pid" | head -1) && [ -n "$psrv" ]; then
	pasta_in=(nsenter -t "$psrv" "${netns_of[@]}" --)
fi
for _ in $(seq "$ROUNDS"); do
	python3 "$fix/client.py" latency "$direct/env?name=HOME" "$REQS" >>"$work/lat.host"
	innet python3 "$fix/client.py" latency "$inside/env?name=HOME" "$REQS" >>"$work/lat.direct"
	python3 "$fix/client.py" latency "$url/env?name=HOME" "$REQS" >>"$work/lat.relay"
	if [ -n "$pasta_url" ]; then
		if v=$(timeout "$PEER_MAX_S" python3 "$fix/client.py" latency "$pasta_url/env?name=HOME" "$REQS"); then
			echo "$v" >>"$work/lat.pasta"
			[ ${#pasta_in[@]} = 0 ] ||
				timeout "$PEER_MAX_S" "${pasta_in[@]}" python3 "$fix/client.py" latency "http://127.0.0.1:$pport/env?name=HOME" "$REQS" >>"$work/lat.pasta.direct" ||
				pasta_in=()
		else
			cannot_run pasta "$REQS requests through its -t forwarder failed or took over $PEER_MAX_S s" "preview relay latency p50"
			pasta_url=
		fi
	fi
	if [ -n "$rk_url" ]; then
		if v=$(timeout "$PEER_MAX_S" python3 "$fix/client.py" latency "$rk_url/env?name=HOME" "$REQS"); then
			echo "$v" >>"$work/lat.rk"
		else
			cannot_run rootlesskit "$REQS requests through its builtin port driver failed or took over $PEER_MAX_S s" "preview relay latency p50"
			rk_url=
		fi
	fi
done
# column 1: p50, column 2: p99 of each round
lh=$(col 1 "$work/lat.host" | median)
ld=$(col 1 "$work/lat.direct" | median)
lr=$(col 1 "$work/lat.relay" | median)
ld99=$(col 2 "$work/lat.direct" | median)
lr99=$(col 2 "$work/lat.relay" | median)
added=$(awk -v a="$lr" -v b="$ld" 'BEGIN {printf "%.3f", a - b}')
printf 'latency: p50 direct in the sandbox %.3f ms, preview %.3f ms: %s ms added (goal < 0.2 ms); host loopback %.3f ms\n' \
	"$ld" "$lr" "$added" "$lh"
awk -v a="$added" 'BEGIN {exit !(a < 0.2)}' || fail=1
printf 'latency: p99 direct in the sandbox %.3f ms, preview %.3f ms\n' "$ld99" "$lr99"
result "preview relay latency p50" "$lr" "direct in the sandbox" "$ld" ms
result "preview relay latency p99" "$lr99" "direct in the sandbox" "$ld99" ms
# peer_latency LABEL FILE: p50 and p99 through a peer, medians of the
# rounds, and the ratios preview/peer round by round
peer_latency() {
	local label=$1 f=$2 p50 p99
	[ -s "$f" ] && [ "$(wc -l <"$f")" = "$(wc -l <"$work/lat.relay")" ] || return 0
	p50=$(col 1 "$f" | median) p99=$(col 2 "$f" | median)
	printf 'latency: through %s p50 %.3f ms, p99 %.3f ms: preview %sx, %sx (by round p50 %s, p99 %s, min-median-max)\n' \
		"$label" "$p50" "$p99" "$(ratio "$lr" "$p50")" "$(ratio "$lr99" "$p99")" \
		"$(ratios "$work/lat.relay" "$f" 1 | tr ' ' -)" "$(ratios "$work/lat.relay" "$f" 2 | tr ' ' -)"
	result "preview relay latency p50" "$lr" "$label" "$p50" ms "<=1"
	result "preview relay latency p99" "$lr99" "$label" "$p99" ms "<=1"
}
peer_latency "pasta -t forwarder" "$work/lat.pasta"
peer_latency "rootlesskit builtin" "$work/lat.rk"
result "preview relay latency p50, added" "$added" - "" ms "<0.2"
# relay against relay: what each adds to its own server's direct p50
if [ ${#pasta_in[@]} -gt 0 ] && [ -s "$work/lat.pasta.direct" ] &&
   [ "$(wc -l <"$work/lat.pasta.direct")" = "$(wc -l <"$work/lat.pasta")" ]; then
	pd=$(col 1 "$work/lat.pasta.direct" | median) pp=$(col 1 "$work/lat.pasta" | median)
	padded=$(awk -v a="$pp" -v b="$pd" 'BEGIN {printf "%.3f", a - b}')
	printf 'latency: added to its own server'\''s direct p50: preview %s ms (server in the sandbox %.3f ms), pasta -t %s ms (server in its namespace %.3f ms): %sx\n' \
		"$added" "$ld" "$padded" "$pd" "$(ratio "$added" "$padded")"
	result "preview relay latency p50, added to its server's direct" "$added" "pasta -t forwarder" "$padded" ms
fi

# ---- ensure to ready ----
# the server's own start: launch to first accepted connection, inside
cat >"$work/own.py" <<'EOF'
import socket, subprocess, sys, time
t0 = time.perf_counter()
p = subprocess.Popen([sys.executable, "-m", "http.server", "8999", "--bind", "127.0.0.1"],
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
while True:
    try:
        socket.create_connection(("127.0.0.1", 8999)).close()
        break
    except OSError:
        time.sleep(0.001)
print("%.1f" % ((time.perf_counter() - t0) * 1000))
p.kill()
EOF
pisb exec bench -- sh -c 'cat > /workspace/own.py' <"$work/own.py"
: >"$work/own"
: >"$work/ens"
for _ in $(seq "$ROUNDS"); do
	pisb exec bench -- python3 /workspace/own.py >>"$work/own"
	pisb svc bench stop web >/dev/null
	t0=$(date +%s%N)
	pisb svc bench ensure web >/dev/null
	echo "$(( ($(date +%s%N) - t0) / 1000 ))" | awk '{printf "%.1f\n", $1 / 1000}' >>"$work/ens"
done
own=$(median <"$work/own")
ens=$(median <"$work/ens")
over=$(awk -v a="$ens" -v b="$own" 'BEGIN {printf "%.0f", a - b}')
printf 'ensure: python3 -m http.server starts in %.0f ms, ensure to ready %.0f ms: %s ms added (goal < 300 ms)\n' \
	"$own" "$ens" "$over"
[ "$over" -lt 300 ] || fail=1
result "svc ensure to ready, added to the server's own start" "$over" - "" ms "<300"
[ "$fail" = 0 ] || echo "  (a goal was missed: see the summary)"
exit 0
