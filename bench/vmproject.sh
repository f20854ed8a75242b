#!/usr/bin/env bash
# bench/vmproject.sh - the vm driver's bound project (project.mode bind,
# a virtiofs share of its own) against a vm sandbox without one: create to
# first exec (the snapshot path, 3 rounds), then in one guest 64 MiB
# written and read and 2,000 small files read, in the bound workspace and
# on the guest's own disk (/root).  Run by hand as root (not in make
# bench's list yet): bench/vmproject.sh.  Prints one line per measure.
set -uo pipefail
cd "$(dirname "$0")/.."
export PATH=$PWD/bin:$PATH
tmp=$(mktemp -d /tmp/pisb-vmproject.XXXXXX)
chmod 755 "$tmp"
export PI_SANDBOX_HOME=$tmp/state
trap 'for n in $(pisb list -q 2>/dev/null); do pisb destroy "$n" --confirm "$n" -q >/dev/null 2>&1; done; rm -rf "$tmp"' EXIT
P=$tmp/proj
mkdir -p "$P"
for i in $(seq 1 2000); do echo "file $i" > "$P/f$i.txt"; done
chown -hR 4242:4242 "$P"   # bind refuses a root-owned project on vm
printf 'version: 1\ndriver: vm\nresources: { cpus: 1, memoryGiB: 1 }\ndiskGiB: 2\n' > "$tmp/n.yaml"
printf 'version: 1\ndriver: vm\nresources: { cpus: 1, memoryGiB: 1 }\ndiskGiB: 2\nproject:\n  mode: bind\n' > "$tmp/b.yaml"
now() { date +%s.%N; }
pisb create warm -f "$tmp/n.yaml" >/dev/null 2>&1 && pisb destroy warm --confirm warm -q
for k in 1 2 3; do
	t0=$(now); pisb create n$k -f "$tmp/n.yaml" >/dev/null 2>&1; pisb exec n$k -- true; t1=$(now)
	t2=$(now); pisb create b$k -f "$tmp/b.yaml" --project "$P" >/dev/null 2>&1; pisb exec b$k -- true; t3=$(now)
	printf 'create->first exec: no project %.2f s, bind %.2f s\n' "$(echo "$t1-$t0" | bc)" "$(echo "$t3-$t2" | bc)"
	[ $k = 1 ] || { pisb destroy n$k --confirm n$k -q; pisb destroy b$k --confirm b$k -q; }
done
for where in /workspace /root; do
	pisb exec b1 --sh "cd $where; t0=\$(date +%s%N); dd if=/dev/zero of=big bs=1M count=64 status=none; sync; t1=\$(date +%s%N); cat big > /dev/null; t2=\$(date +%s%N); rm big; echo \"$where: write 64 MiB \$(( (t1-t0)/1000000 )) ms, read \$(( (t2-t1)/1000000 )) ms\""
done
pisb exec b1 --sh 'cp /workspace/f*.txt /root/; for where in /workspace /root; do cd $where; t0=$(date +%s%N); cat f*.txt | wc -l >/dev/null; t1=$(date +%s%N); echo "$where: read 2000 small files $(( (t1-t0)/1000000 )) ms"; done'
