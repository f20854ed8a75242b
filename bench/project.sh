#!/usr/bin/env bash
# The project in a sandbox (issue 13): create --project of a 10,000-file
# git tree and of this repository against cp -a and git worktree add of
# the same tree (the copy's own cost is create --project minus a create
# without a project), and pisb diff with 10 changed files out of 10,000
# against git status on the same tree (goal: at most 1.5x).
# BENCH_PROJECT_RUNS (default 5) runs of each create, median; the diff
# pair in hyperfine rounds (bench/lib.sh's paired_ms).
set -uo pipefail
. "$(dirname "$0")/lib.sh"
RUNS=${BENCH_PROJECT_RUNS:-5}
command -v git >/dev/null || { cannot_run git "$(missing git git)" "project"; exit 0; }
tmp=$(mktemp -d /tmp/pisb-bench-project.XXXXXX)
chmod 755 "$tmp"
trap 'for n in bpj bpjn; do pisb destroy "$n" --confirm "$n" -q >/dev/null 2>&1; done; rm -rf "$tmp"' EXIT
section "project (median of $RUNS creates; diff: goal <= 1.5x git status)"

# a git tree of 10,000 files: 100 directories of 100 files, 1-4 KiB of text
T=$tmp/tree
mkdir -p "$T"
python3 - "$T" <<'EOF'
import os, sys
root = sys.argv[1]
for d in range(100):
    os.makedirs(f"{root}/d{d:02}", exist_ok=True)
    for f in range(100):
        with open(f"{root}/d{d:02}/f{f:02}.c", "w") as fh:
            fh.write(f"/* {d} {f} */\n" + "int x_%d_%d;\n" % (d, f) * (40 + (d * f) % 200))
EOF
git -C "$T" init -q
git -C "$T" add -A
git -C "$T" -c user.email=b@example.com -c user.name=b commit -qm tree
# this repository as a clone (its tracked files, no build outputs)
git clone -q --no-hardlinks "$(git rev-parse --show-toplevel 2>/dev/null || pwd)" "$tmp/self"

now_ns() { date +%s%N; }
# med_ms CMD...: median wall ms of RUNS runs of CMD; each run after "$PREP"
med_ms() {
	local i t0 t1 v=()
	for ((i = 0; i < RUNS; i++)); do
		[ -z "${PREP:-}" ] || eval "$PREP" >/dev/null 2>&1
		t0=$(now_ns)
		"$@" >/dev/null 2>"$tmp/err" || { echo "  failed: $* ($(tail -1 "$tmp/err"))" >&2; echo NaN; return 1; }
		t1=$(now_ns)
		v+=("$(( (t1 - t0) / 1000 ))")
	done
	printf '%s\n' "${v[@]}" | sort -n | awk '{ a[NR] = $1 } END { printf "%.1f", a[int((NR + 1) / 2)] / 1000 }'
}

# traced_create DIR: RUNS creates of bpj with PISB_TRACE=1; prints the
# medians "TOTAL COPY GIT" in ms: the whole create, the copy (create's
# trace: guest config written -> project copied) and git inside
# (controller running -> reported: the workspace's one commit)
traced_create() {
	local i t0 t1 tr tot=() cpy=() git=()
	for ((i = 0; i < RUNS; i++)); do
		pisb destroy bpj --confirm bpj -q >/dev/null 2>&1
		t0=$(now_ns)
		tr=$(PISB_TRACE=1 pisb create bpj --project "$1" -q 2>&1 >/dev/null) || { echo NaN NaN NaN; return 1; }
		t1=$(now_ns)
		tot+=("$(( (t1 - t0) / 1000 ))")
		cpy+=("$(awk '/create: guest config written/ { a = $2 } /create: project copied/ { b = $2 } END { print b - a }' <<<"$tr")")
		git+=("$(awk '/create: controller running/ { a = $2 } /create: reported/ { b = $2 } END { print b - a }' <<<"$tr")")
	done
	for v in tot cpy git; do
		local -n arr=$v
		printf '%s\n' "${arr[@]}" | sort -n | awk '{ a[NR] = $1 } END { printf "%.1f ", a[int((NR + 1) / 2)] / 1000 }'
	done
	echo
}

# compare LABEL DIR: create --project DIR (its copy and git inside on their
# own), create alone, cp -a of the same files, git worktree add
compare() {
	local label=$1 dir=$2 files c cc cg cn cp wt
	files=$(git -C "$dir" ls-files | wc -l)
	read -r c cc cg <<<"$(traced_create "$dir")"
	PREP="pisb destroy bpjn --confirm bpjn -q" cn=$(med_ms pisb create bpjn -q)
	# cp -a of the same files (without .git, which create does not copy)
	rm -rf "$tmp/plain" && cp -a "$dir" "$tmp/plain" && rm -rf "$tmp/plain/.git"
	PREP="rm -rf $tmp/cp" cp=$(med_ms cp -a "$tmp/plain" "$tmp/cp")
	PREP="git -C $dir worktree remove --force $tmp/wt; rm -rf $tmp/wt; git -C $dir worktree prune" \
		wt=$(med_ms git -C "$dir" worktree add -q --detach "$tmp/wt")
	git -C "$dir" worktree remove --force "$tmp/wt" >/dev/null 2>&1
	git -C "$dir" worktree prune >/dev/null 2>&1
	line "$label" "$files files tracked"
	row "create --project, $label" "$c" "git worktree add" "$wt"
	row "  its copy (verified), $label" "$cc" "cp -a" "$cp"
	line "  its git commit inside" "$cg ms"
	line "  create without a project" "$cn ms"
}
compare "10,000 files" "$T"
compare "this repository" "$tmp/self"

# diff: 10 files changed out of 10,000, in the sandbox and in a copy of
# the tree for git status (its index refreshed first, as after a checkout)
pisb destroy bpj --confirm bpj -q >/dev/null 2>&1
pisb create bpj --project "$T" -q >/dev/null || { echo "  cannot create a sandbox"; exit 1; }
ws=$(pisb inspect bpj --json | jq -r '.workspace // "/workspace"')
pisb exec bpj -- sh -c 'for d in 0 1 2 3 4 5 6 7 8 9; do echo changed >> "d${d}0/f5$d.c"; done'
cp -a "$T" "$tmp/g"
for d in 0 1 2 3 4 5 6 7 8 9; do echo changed >>"$tmp/g/d${d}0/f5$d.c"; done
git -C "$tmp/g" status --porcelain >/dev/null
n=$(pisb diff bpj --json | jq '.changes | length')
g=$(git -C "$tmp/g" status --porcelain | wc -l)
[ "$n" = 10 ] && [ "$g" = 10 ] || line "warning" "diff shows $n changes, git status $g (want 10 each)"
BENCH_RUNS=${BENCH_PROJECT_DIFF_RUNS:-30}
read -r a b rmin rmed rmax <<<"$(paired_ms 3 "pisb diff bpj --stat" "git -C $tmp/g status --porcelain")"
row "diff --stat, 10 of 10,000 changed" "$a" "git status" "$b" 1.5
line "  ratio per round" "min $(printf %.2f "$rmin") median $(printf %.2f "$rmed") max $(printf %.2f "$rmax") (workspace $ws)"
read -r a b rmin rmed rmax <<<"$(paired_ms 3 "pisb diff bpj" "git -C $tmp/g diff")"
row "diff (patches), 10 of 10,000" "$a" "git diff" "$b"
exit 0
