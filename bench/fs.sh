#!/usr/bin/env bash
# Files: read and write of 64 KiB against nsenter+cat into the same sandbox;
# find over 100,000 files against GNU find and fd; grep over 200 MB against
# grep -rn and ripgrep — all inside the same sandbox (a peer that cannot run
# here is reported with the reason).
set -uo pipefail
. "$(dirname "$0")/lib.sh"
# median_pipe_ms CMD...: as median_ms, with the output going to a pipe
# (with /dev/null GNU grep stops at each file's first match and looks
# faster than it is)
median_pipe_ms() {
	local json
	json=$(mktemp)
	hyperfine -N --output=pipe --style none --warmup 2 --runs "$BENCH_RUNS" --export-json "$json" -- "$*" >/dev/null 2>&1 || {
		rm -f "$json"; echo NaN; return 1; }
	jq -r '.results[0].median * 1000' "$json"
	rm -f "$json"
}
section "files (median of $BENCH_RUNS; targets: read/write <= 2x nsenter, find/grep <= 1.5x)"
pisb create bfs -q >/dev/null || { echo "  cannot create a sandbox"; exit 1; }
init=$(pisb inspect bfs | jq -r .controller.initPid)
ns=(nsenter -t "$init" -U -m -r -w -S 0 -G 0)
tmp=$(mktemp -d)
# gone however the run ends (an interrupted one left it in /tmp)
trap 'rm -rf "$tmp"' EXIT
head -c 65536 /dev/urandom > "$tmp/f64"
pisb write bfs /workspace/f64 --from "$tmp/f64"
r=$(median_ms pisb read bfs /workspace/f64 --raw)
n=$(median_ms "${ns[@]}" cat /workspace/f64)
row "pisb read 64 KiB --raw" "$r" "nsenter ... cat" "$n" 2
# writes need stdin: both through the same shell, so the shell cancels out
wj=$(mktemp)
hyperfine -S sh --style none --warmup 5 --runs "$BENCH_RUNS" --export-json "$wj" \
	"pisb write bfs /workspace/w1 < $tmp/f64" \
	"${ns[*]} sh -c 'cat > /workspace/w2' < $tmp/f64" >/dev/null 2>&1
w=$(jq -r '.results[0].median * 1000' "$wj"); wn=$(jq -r '.results[1].median * 1000' "$wj"); rm -f "$wj"
row "pisb write 64 KiB" "$w" "nsenter ... sh -c 'cat >'" "$wn" 2
# a 100,000-file tree and a 200 MB source tree, made inside the sandbox
pisb exec bfs -- python3 - <<'PY'
import os, random
random.seed(1)
base = "/workspace/tree"
for d in range(1000):
    p = f"{base}/d{d % 50}/s{d}"
    os.makedirs(p, exist_ok=True)
    for f in range(100):
        ext = (".c", ".h", ".py", ".txt")[f % 4]
        open(f"{p}/f{f}{ext}", "w").close()
words = ["static", "int", "return", "struct", "void", "char", "const", "unsigned", "pisb_needle", "for", "while", "if"]
src = "/workspace/src"
os.makedirs(src, exist_ok=True)
total, i = 0, 0
while total < 200 * 1024 * 1024:
    lines = []
    for _ in range(2000):
        lines.append(" ".join(random.choice(words[:8] + words[9:]) for _ in range(10)) + ";")
    lines[random.randrange(2000)] += " pisb_needle"
    data = ("\n".join(lines) + "\n").encode()
    os.makedirs(f"{src}/m{i % 40}", exist_ok=True)
    open(f"{src}/m{i % 40}/file{i}.c", "wb").write(data)
    total += len(data); i += 1
PY
BENCH_RUNS=10
f=$(median_ms pisb find bfs '**/*.c' --path /workspace/tree --limit 1000000)
gf=$(median_ms "${ns[@]}" find /workspace/tree -name '*.c')
row "pisb find '**/*.c' (100k files)" "$f" "GNU find -name '*.c'" "$gf" 1.5
g=$(median_pipe_ms pisb grep bfs pisb_needle --path /workspace/src --limit 100000)
gg=$(median_pipe_ms "${ns[@]}" grep -rn pisb_needle /workspace/src)
row "pisb grep (200 MB)" "$g" "grep -rn" "$gg" 1.5
# the host image shows the host's rg inside the sandbox
if ! command -v rg >/dev/null; then
	cannot_run ripgrep "$(missing rg ripgrep)" "pisb grep (200 MB)"
elif why=$(why_not "${ns[@]}" rg -q pisb_needle /workspace/src); then
	rg_ms=$(median_pipe_ms "${ns[@]}" rg -n pisb_needle /workspace/src)
	row "pisb grep (200 MB)" "$g" "ripgrep (rg -n)" "$rg_ms"
else
	cannot_run ripgrep "$why" "pisb grep (200 MB)"
fi
if ! command -v fdfind >/dev/null; then
	cannot_run fd "$(missing fdfind fd-find)" "pisb find '**/*.c' (100k files)"
elif why=$(why_not fdfind -u -g '*.c' "/proc/$init/root/workspace/tree"); then
	fd_ms=$(median_ms fdfind -u -g '*.c' "/proc/$init/root/workspace/tree")
	row "pisb find '**/*.c' (100k files)" "$f" "fd -g '*.c' (fd-find)" "$fd_ms"
else
	cannot_run fd "$why" "pisb find '**/*.c' (100k files)"
fi
pisb destroy bfs --confirm bfs -q
