#!/usr/bin/env bash
# vm boot: create->first exec and start->first exec of a vm sandbox, cold
# boot (PISB_VM_SNAPSHOT=0) against the boot snapshot, interleaved round by
# round so that both see the same load.  The snapshot is made before the
# first round (its cost is printed apart).  Then a sandbox whose setup
# writes 32 MiB: create (setup runs) against create --template of a
# template prepared once with that setup (a qcow2 overlay, setup not run
# again), both to the first exec, interleaved.  VMBOOT_ROUNDS (default 3).
set -uo pipefail
. "$(dirname "$0")/lib.sh"
rounds=${VMBOOT_ROUNDS:-3}
section "vm boot (median of $rounds interleaved rounds; goal: snapshot create->first exec under 1 s)"
if ! command -v qemu-system-x86_64 >/dev/null; then cannot_run vm "no qemu-system-x86_64" "vm create->first exec"; exit 0; fi
cfg=$(mktemp /tmp/pisb-vmboot.XXXXXX.yaml)
tcfg=$(mktemp /tmp/pisb-vmboot.XXXXXX.yaml)
trap 'rm -f "$cfg" "$tcfg"' EXIT
printf 'version: 1\ndriver: vm\nresources: { cpus: 1, memoryGiB: 1 }\ndiskGiB: 2\n' > "$cfg"
ms() { date +%s%3N; }
# one measure: MODE(cold|snap) WHAT(create|start) NAME -> ms on stdout
one() {
	local snap=1 t0 t1
	[ "$1" = cold ] && snap=0
	if [ "$2" = create ]; then
		t0=$(ms)
		PISB_VM_SNAPSHOT=$snap pisb create "$3" -f "$cfg" -q >/dev/null 2>&1 && pisb exec "$3" -- true || { echo NaN; return; }
	else
		pisb stop "$3" -q >/dev/null 2>&1
		t0=$(ms)
		PISB_VM_SNAPSHOT=$snap pisb start "$3" -q >/dev/null 2>&1 && pisb exec "$3" -- true || { echo NaN; return; }
	fi
	t1=$(ms)
	echo $((t1 - t0))
}
t0=$(ms)
one snap create vmb-warm >/dev/null
line "make the snapshot (first create)" "$(( $(ms) - t0 )) ms, $(pisb inspect vmb-warm 2>/dev/null | jq -r '.vm.bootNote // "-"')"
pisb destroy vmb-warm --confirm vmb-warm -q >/dev/null 2>&1
declare -a cc sc cs ss
for ((r = 0; r < rounds; r++)); do
	cc+=("$(one cold create vmb-c$r)")
	sc+=("$(one snap create vmb-s$r)")
	cs+=("$(one cold start vmb-c$r)")
	ss+=("$(one snap start vmb-s$r)")
	line "round $r (load $(cut -d' ' -f1 /proc/loadavg))" "create cold ${cc[r]} snap ${sc[r]}; start cold ${cs[r]} snap ${ss[r]} ms"
	pisb destroy vmb-c$r --confirm vmb-c$r -q >/dev/null 2>&1
	pisb destroy vmb-s$r --confirm vmb-s$r -q >/dev/null 2>&1
done
med() { printf '%s\n' "$@" | sort -n | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
c1=$(med "${cc[@]}"); s1=$(med "${sc[@]}"); c2=$(med "${cs[@]}"); s2=$(med "${ss[@]}")
row "vm create->first exec (snapshot)" "$s1" "cold boot" "$c1"
row "vm start->first exec (snapshot)" "$s2" "cold boot" "$c2"
result "vm create->first exec (snapshot)" "$s1" "cold boot" "$c1" ms
result "vm start->first exec (snapshot)" "$s2" "cold boot" "$c2" ms

# templates: setup every time against a template's copy-on-write disk
printf 'version: 1\ndriver: vm\nresources: { cpus: 1, memoryGiB: 1 }\ndiskGiB: 2\nsetup:\n  - dd if=/dev/urandom of=/root/blob bs=1M count=32 status=none\n' > "$tcfg"
if ! command -v qemu-img >/dev/null; then cannot_run "create --template" "no qemu-img (qemu-utils)" "vm create --template->first exec"; exit 0; fi
t0=$(ms)
pisb prepare vmb-tpl -f "$tcfg" -q >/dev/null 2>&1 || { cannot_run "create --template" "pisb prepare failed" "vm create --template->first exec"; exit 0; }
line "prepare the template (setup once)" "$(( $(ms) - t0 )) ms"
declare -a tf tt
for ((r = 0; r < rounds; r++)); do
	t0=$(ms)
	pisb create vmb-f$r -f "$tcfg" -q >/dev/null 2>&1 && pisb exec vmb-f$r -- true && tf+=("$(( $(ms) - t0 ))") || tf+=(NaN)
	t0=$(ms)
	pisb create vmb-t$r --template vmb-tpl -f "$cfg" -q >/dev/null 2>&1 && pisb exec vmb-t$r -- test -s /root/blob && tt+=("$(( $(ms) - t0 ))") || tt+=(NaN)
	line "round $r (load $(cut -d' ' -f1 /proc/loadavg))" "create with setup ${tf[r]}, create --template ${tt[r]} ms"
	pisb destroy vmb-f$r --confirm vmb-f$r -q >/dev/null 2>&1
	pisb destroy vmb-t$r --confirm vmb-t$r -q >/dev/null 2>&1
done
pisb destroy vmb-tpl --template --confirm vmb-tpl -q >/dev/null 2>&1
row "vm create --template->first exec" "$(med "${tt[@]}")" "create + setup (32 MiB)" "$(med "${tf[@]}")"
