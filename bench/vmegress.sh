#!/usr/bin/env bash
# bench/vmegress.sh - the egress proxy (network.allowedHosts) of a vm
# sandbox vs. a local sandbox's.
#
#   latency     median of REQS small requests (a few bytes, a fresh
#               connection each: curl's time_total) from inside the sandbox
#               through its proxy (absolute-URI HTTP) to a server on the
#               host's loopback; vm: guest curl -> agent's 127.0.0.1:3128 ->
#               virtio-serial mux -> host relay's proxy -> server; local:
#               sandbox curl -> controller's proxy -> server
#   throughput  a SIZE_MB download the same way (median of ROUNDS), MB/s;
#               beside it the guest's own ceiling: SIZE_MB through a pipe
#               inside the guest (head | cat), which no egress path can beat
#
# The server is tests/fixtures/svc/server.py (/blob, /slow?ms=0) on host
# 127.0.0.1.  Runs this tree's bin/; needs python3, curl, jq, what the vm driver
# needs (QEMU, the assets); the vm runs under TCG when the host has no
# usable KVM, which shows in every vm number.  Prints one line per measure.
# Run by hand (not in make bench's list): bench/vmegress.sh; the vm boots
# take the same lock as the vm test suites when flock is there.
# REQS (default 50), ROUNDS (default 3), SIZE_MB (default 100) tune it.
set -euo pipefail

REQS=${REQS:-50}
ROUNDS=${ROUNDS:-3}
SIZE_MB=${SIZE_MB:-100}
top=$(cd "$(dirname "$0")/.." && pwd)
. "$top/bench/lib.sh"
export PATH=$top/bin:$PATH
work=$(mktemp -d "${TMPDIR:-/tmp}/pisb-bench-vmegress.XXXXXX")
chmod 700 "$work"
export PI_SANDBOX_HOME=$work/state
srv_pid=
cleanup() {
	[ -n "$srv_pid" ] && kill "$srv_pid" 2>/dev/null
	pisb destroy eloc --confirm eloc >/dev/null 2>&1 || true
	pisb destroy evm --confirm evm >/dev/null 2>&1 || true
	rm -rf "$work"
}
trap cleanup EXIT

for c in pisb python3 curl jq; do
	command -v "$c" >/dev/null || { echo "bench/vmegress.sh: needs $c on PATH" >&2; exit 2; }
done
median() { sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
python3 "$top/tests/fixtures/svc/server.py" "$port" >/dev/null 2>&1 3>&- &
srv_pid=$!
for _ in $(seq 100); do curl -s -o /dev/null "http://127.0.0.1:$port/slow?ms=0" && break; sleep 0.1; done

for d in local vm; do
	{
		echo "version: 1"
		echo "driver: $d"
		[ "$d" = local ] || printf 'resources: { cpus: 1, memoryGiB: 1 }\ndiskGiB: 2\n'
		echo "network:"
		echo "  allowedHosts: [\"127.0.0.1:$port\"]"
	} >"$work/$d.yaml"
done
pisb create eloc -f "$work/local.yaml" >/dev/null 2>&1
pisb create evm -f "$work/vm.yaml" >/dev/null 2>&1

# in_box NAME LINE: a shell line in the sandbox, without NO_PROXY (it
# lists 127.0.0.1, the test server's address)
in_box() { pisb exec "$1" -- sh -c "unset NO_PROXY no_proxy; $2"; }

declare -A lat tput
for b in eloc evm; do
	lat[$b]=$(in_box "$b" "for i in \$(seq $REQS); do curl -sS -o /dev/null -w '%{time_total}\n' 'http://127.0.0.1:$port/slow?ms=0'; done" |
		awk '{print $1 * 1000}' | median)
	tput[$b]=$(for r in $(seq "$ROUNDS"); do
		in_box "$b" "curl -sS -o /dev/null -w '%{speed_download}\n' 'http://127.0.0.1:$port/blob?mb=$SIZE_MB'"
	done | awk '{print $1 / 1e6}' | median)
done
floor=$(pisb exec evm -- sh -c "s=\$(date +%s%N); head -c $((SIZE_MB * 1000000)) /dev/zero | cat > /dev/null; e=\$(date +%s%N); echo \$(( (e - s) / 1000000 ))")
floor=$(awk -v ms="$floor" -v mb="$SIZE_MB" 'BEGIN{print (ms > 0 ? mb * 1000 / ms : 0)}')
printf 'egress latency     vm %.2f ms   local %.2f ms   (median of %d small requests, fresh connections; ratio %.1fx)\n' \
	"${lat[evm]}" "${lat[eloc]}" "$REQS" "$(awk -v a="${lat[evm]}" -v b="${lat[eloc]}" 'BEGIN{print (b > 0 ? a / b : 0)}')"
printf 'egress throughput  vm %.1f MB/s   local %.1f MB/s   (%d MB download, median of %d; ratio %.2f)\n' \
	"${tput[evm]}" "${tput[eloc]}" "$SIZE_MB" "$ROUNDS" "$(awk -v a="${tput[evm]}" -v b="${tput[eloc]}" 'BEGIN{print (b > 0 ? a / b : 0)}')"
printf 'guest pipe ceiling %.1f MB/s   (%d MB through head | cat inside the vm guest)\n' "$floor" "$SIZE_MB"
result "vm egress latency (small request, proxy)" "${lat[evm]}" "local egress" "${lat[eloc]}" ms -
result "vm egress throughput ($SIZE_MB MB)" "${tput[evm]}" "local egress" "${tput[eloc]}" MB/s -
