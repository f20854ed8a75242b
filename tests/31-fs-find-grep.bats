#!/usr/bin/env bats
# pisb find and pisb grep: globs with **, .gitignore rules, .git and
# node_modules skipped, limits, context, -i, --literal, binary files, long
# lines, exit codes.
load helpers

# One sandbox and one tree for the whole file (see 30-fs-basics.bats for
# why the state dir is not in bats' temp dir).
setup_file() {
	unshare -Ur true 2>/dev/null || skip "machine lacks: unprivileged user namespaces"
	FS_TMP=$(mktemp -d /tmp/pisb-fs31.XXXXXX)
	chmod 755 "$FS_TMP"
	export FS_TMP PI_SANDBOX_HOME="$FS_TMP/state"
	local t="$FS_TMP/tree"
	mkdir -p "$t"/{.git,node_modules/x,build,docs/sub,src/sub/deep,lib/src}
	printf 'build/\n*.log\n!keep.log\n/docs/*.tmp\n# a comment\n\n' >"$t/.gitignore"
	echo 'TODO in git' >"$t/.git/config"
	echo 'TODO in node_modules' >"$t/node_modules/x/index.js"
	echo 'TODO built' >"$t/build/out.c"
	echo 'TODO log' >"$t/a.log"
	echo 'TODO kept log' >"$t/keep.log"
	echo 'TODO tmp' >"$t/docs/x.tmp"
	echo 'TODO deeper tmp' >"$t/docs/sub/z.tmp"
	echo 'TODO doc' >"$t/docs/y.md"
	printf 'int main() {\n\treturn 0;\n}\n// TODO fix\n' >"$t/src/main.c"
	printf 'gen.c\n' >"$t/src/.gitignore"
	echo 'TODO generated' >"$t/src/gen.c"
	printf 'static int helper(void);\nTODO: more\n' >"$t/src/sub/helper.c"
	echo 'export const x = 1;' >"$t/src/sub/deep/x.ts"
	echo 'TODO other' >"$t/lib/src/other.c"
	printf 'head\0 TODO binary\n' >"$t/bin.dat"
	printf 'win TODO\r\nline2\r\n' >"$t/crlf.txt"
	printf '\377 TODO \300 bad utf8\n' >"$t/bad.txt"
	{ printf 'TODO '; head -c 1000 /dev/zero | tr '\0' 'y'; printf '\n'; } >"$t/long.txt"
	for i in $(seq 1 20); do
		case $i in 5|7|15) echo "line $i MATCH" ;; *) echo "line $i" ;; esac
	done >"$t/ctx.txt"
	printf 'a.b(c)\naxb(c)\nA.B(C)\n' >"$t/re.txt"
	pisb create fs >/dev/null
	pisb push fs "$t" --to /workspace/tree --all >/dev/null
}

teardown_file() {
	pisb destroy fs --confirm fs >/dev/null 2>&1 || true
	rm -rf "$FS_TMP"
}

setup() {
	pisb_test_setup
	export PI_SANDBOX_HOME="$FS_TMP/state"
}

@test "find '**/*.c': matches at any depth, sorted, ignored files left out" {
	run -0 pisb find fs '**/*.c' --path tree
	[ "$output" = $'lib/src/other.c\nsrc/main.c\nsrc/sub/helper.c' ]
	run -0 pisb find fs '**/*.c' --path /workspace/tree --json
	jq -e '.path == "/workspace/tree" and .matches == ["lib/src/other.c", "src/main.c", "src/sub/helper.c"]
	       and .truncated == false' <<<"$output"
}

@test "find: a pattern without / matches base names; with / the path, / anchors" {
	run -0 pisb find fs '*.c' --path tree
	[ "$output" = $'lib/src/other.c\nsrc/main.c\nsrc/sub/helper.c' ]
	run -0 pisb find fs 'src/*.c' --path tree
	[ "$output" = $'lib/src/other.c\nsrc/main.c' ]
	run -0 pisb find fs '/src/*.c' --path tree
	[ "$output" = 'src/main.c' ]
	run -0 pisb find fs 'src/**/*.[ct]s' --path tree
	[ "$output" = 'src/sub/deep/x.ts' ]
	run -0 pisb find fs 'h?lper.[a-c]' --path tree
	[ "$output" = 'src/sub/helper.c' ]
	# directories end in /
	run -0 pisb find fs 'sub' --path tree
	[ "$output" = $'docs/sub/\nsrc/sub/' ]
	# nothing found is not an error
	run -0 pisb find fs '*.nothing' --path tree --json
	jq -e '.matches == [] and .truncated == false' <<<"$output"
}

@test "find honours .gitignore: patterns, anchoring, dir/, negation, nested files" {
	run -0 pisb find fs '*' --path tree --json
	jq -e '.matches == [".gitignore", "bad.txt", "bin.dat", "crlf.txt", "ctx.txt", "docs/", "docs/sub/",
	       "docs/sub/z.tmp", "docs/y.md", "keep.log", "lib/", "lib/src/", "lib/src/other.c", "long.txt",
	       "re.txt", "src/", "src/.gitignore", "src/main.c", "src/sub/", "src/sub/deep/", "src/sub/deep/x.ts",
	       "src/sub/helper.c"]' <<<"$output"
}

@test "find --no-ignore lists .git, node_modules and ignored files" {
	run -0 pisb find fs '*' --path tree --no-ignore --limit 100000 --json
	for p in .git/config node_modules/x/index.js build/out.c a.log docs/x.tmp src/gen.c; do
		jq -e --arg p "$p" '.matches | index($p) != null' <<<"$output"
	done
}

@test "find below the top of a checkout still applies the top .gitignore" {
	run -0 pisb find fs '*' --path tree/docs
	[ "$output" = $'sub/\nsub/z.tmp\ny.md' ]
	run -0 pisb find fs '*.c' --path tree/src
	[ "$output" = $'main.c\nsub/helper.c' ]
}

@test "find --limit stops and says so (truncated, stderr note)" {
	run -0 pisb find fs '*.c' --path tree --limit 2 --json
	jq -e '.matches == ["lib/src/other.c", "src/main.c"] and .truncated == true' <<<"$output"
	run -0 --separate-stderr pisb find fs '*.c' --path tree --limit 2
	[ "$output" = $'lib/src/other.c\nsrc/main.c' ]
	[[ $stderr == *"stopped at 2 results"* ]]
	# exactly the limit: nothing was cut
	run -0 pisb find fs '*.c' --path tree --limit 3 --json
	jq -e '(.matches | length) == 3 and .truncated == false' <<<"$output"
	run -2 pisb find fs '*.c' --path tree --limit 0
}

@test "find: a missing directory exits 3, a file 1; default is the workspace" {
	run -3 pisb find fs '*' --path nope
	run -1 --separate-stderr pisb find fs '*' --path tree/re.txt
	[[ $stderr == *"not a directory"* ]]
	run -0 pisb find fs 'helper.c'
	[ "$output" = 'tree/src/sub/helper.c' ]
}

@test "grep: path:line:text, ignored and binary files skipped" {
	run -0 pisb grep fs TODO --path tree
	[ "${lines[0]}" = "bad.txt:1:"$'\377'" TODO "$'\300'" bad utf8" ]
	[ "${lines[1]}" = "crlf.txt:1:win TODO"$'\r' ]
	[ "${lines[2]}" = "docs/sub/z.tmp:1:TODO deeper tmp" ]
	[ "${lines[3]}" = "docs/y.md:1:TODO doc" ]
	[ "${lines[4]}" = "keep.log:1:TODO kept log" ]
	[ "${lines[5]}" = "lib/src/other.c:1:TODO other" ]
	[[ ${lines[6]} == "long.txt:1:TODO yyy"* ]]
	[ "${lines[7]}" = "src/main.c:4:// TODO fix" ]
	[ "${lines[8]}" = "src/sub/helper.c:2:TODO: more" ]
	[ "${#lines[@]}" -eq 9 ]
	run -0 pisb grep fs TODO --path tree --no-ignore --limit 1000 --json
	jq -e '[.matches[].path] | (index(".git/config") != null and index("build/out.c") != null
	       and index("node_modules/x/index.js") != null and index("bin.dat") == null)' <<<"$output"
}

@test "grep --json: keys, escaping of CR and invalid UTF-8" {
	run -0 pisb grep fs 'TODO' --path tree --json
	jq -e '.path == "/workspace/tree" and .matchCount == 9 and .limitReached == false and .linesTruncated == true' <<<"$output"
	jq -e '.matches[0] == {"path":"bad.txt","line":1,"text":"\ufffd TODO \ufffd bad utf8","kind":"match"}' <<<"$output"
	jq -e '.matches[1].text == "win TODO\r"' <<<"$output"
}

@test "grep: -i, --literal and extended regex" {
	run -0 pisb grep fs 'a.b\(c\)' --path tree/re.txt
	[ "$output" = $'re.txt:1:a.b(c)\nre.txt:2:axb(c)' ]
	run -0 pisb grep fs 'a.b(c)' --literal --path tree/re.txt
	[ "$output" = 're.txt:1:a.b(c)' ]
	run -0 pisb grep fs 'a.b(c)' --literal -i --path tree/re.txt
	[ "$output" = $'re.txt:1:a.b(c)\nre.txt:3:A.B(C)' ]
	run -0 pisb grep fs '^a[x.]b' --ignore-case --path tree/re.txt
	[ "${#lines[@]}" -eq 3 ]
	run -0 pisb grep fs 'MATCH$|^line 1$' --path tree/ctx.txt
	[ "$output" = $'ctx.txt:1:line 1\nctx.txt:5:line 5 MATCH\nctx.txt:7:line 7 MATCH\nctx.txt:15:line 15 MATCH' ]
	run -0 pisb grep fs 'hel+per' --path tree --json
	jq -e '.matches == [{"path":"src/sub/helper.c","line":1,"text":"static int helper(void);","kind":"match"}]' <<<"$output"
}

@test "grep takes ripgrep's syntax: escapes in and out of classes, (?i), groups, lazy repeats, UTF-8" {
	run -0 pisb exec fs -- sh -c 'printf "const x = 42;\nfunction fooBar(a) {\n  h\303\251llo w\303\266rld\ntab\there\nkebab-case_name\nTODO later\n\${HOME}/x\n" > /workspace/tree/rg.txt'
	g() { pisb grep fs "$1" --path tree/rg.txt --json | jq -c '[.matches[].line]'; }
	[ "$(g '\d+')" = '[1]' ]
	[ "$(g '\D\d+;$')" = '[1]' ]
	[ "$(g 'function\s+\w+\(')" = '[2]' ]
	[ "$(g '^[\w-]+$')" = '[5]' ]
	[ "$(g '^[^\s\d]+-')" = '[5]' ]
	[ "$(g '(?i)todo')" = '[6]' ]
	[ "$(g '(?:foo|bar)Bar')" = '[2]' ]
	[ "$(g '(?P<v>x) = \d{2}')" = '[1]' ]
	[ "$(g 'f.*?Bar')" = '[2]' ]
	[ "$(g '\bx\b')" = '[1,7]' ]
	[ "$(g '\t')" = '[4]' ]
	[ "$(g 'tab\x09here')" = '[4]' ]
	[ "$(g '\$\{HOME\}')" = '[7]' ]
	# . and \w take a whole character, é is two bytes
	[ "$(g 'h.llo')" = '[3]' ]
	[ "$(g 'w\wrld')" = '[3]' ]
	[ "$(g 'h\x{e9}llo')" = '[3]' ]
	[ "$(g 'h[é]llo')" = '[3]' ]
	# a brace that starts no repetition is a brace, as for grep -E
	[ "$(g 'Bar\(a\) {')" = '[2]' ]
	# Unicode classes, flags anywhere, (?x)
	[ "$(g '\p{L}+\s+w\p{Ll}rld')" = '[3]' ]
	[ "$(g 'h\p{Latin}llo')" = '[3]' ]
	[ "$(g '\P{L}\p{Lu}')" = '[7]' ]
	[ "$(g 'TODO (?i)LATER')" = '[6]' ]
	[ "$(g '(?x) kebab - case # a comment')" = '[5]' ]
	# what ripgrep refuses is refused, naming the construct
	run -2 --separate-stderr pisb grep fs '(?=x)' --path tree/rg.txt
	[[ $stderr == *"look-around, including look-ahead and look-behind, is not supported"* ]]
	run -2 --separate-stderr pisb grep fs '(a)\1' --path tree/rg.txt
	[[ $stderr == *"backreferences are not supported"* ]]
	run -2 --separate-stderr pisb grep fs '\p{Klingon}' --path tree/rg.txt
	[[ $stderr == *"invalid regular expression '\\p{Klingon}'"* ]]
	# --literal takes the text as it is
	run -0 pisb grep fs '${HOME}' --literal --path tree/rg.txt
	[ "$output" = 'rg.txt:7:${HOME}/x' ]
}

@test "grep -C: context lines, merged groups, -- separators" {
	run -0 pisb grep fs MATCH --path tree/ctx.txt -C 1
	[ "$output" = "ctx.txt-4-line 4
ctx.txt:5:line 5 MATCH
ctx.txt-6-line 6
ctx.txt:7:line 7 MATCH
ctx.txt-8-line 8
--
ctx.txt-14-line 14
ctx.txt:15:line 15 MATCH
ctx.txt-16-line 16" ]
	run -0 pisb grep fs MATCH --path tree/ctx.txt --context 2 --json
	jq -e '[.matches[] | [.line, .kind]] == [[3,"context"],[4,"context"],[5,"match"],[6,"context"],[7,"match"],
	       [8,"context"],[9,"context"],[13,"context"],[14,"context"],[15,"match"],[16,"context"],[17,"context"]]
	       and .matchCount == 3' <<<"$output"
	# context at the edges of a file
	run -0 pisb grep fs 'line 1$|line 20' --path tree/ctx.txt -C 3 --json
	jq -e '[.matches[].line] == [1,2,3,4,17,18,19,20]' <<<"$output"
}

@test "grep --glob filters files by path" {
	run -0 pisb grep fs TODO --path tree --glob '*.c'
	[ "$output" = $'lib/src/other.c:1:TODO other\nsrc/main.c:4:// TODO fix\nsrc/sub/helper.c:2:TODO: more' ]
	run -0 pisb grep fs TODO --path tree --glob '/src/**/*.c'
	[ "$output" = $'src/main.c:4:// TODO fix\nsrc/sub/helper.c:2:TODO: more' ]
	run -0 pisb grep fs TODO --path tree --glob 'docs/*' --json
	jq -e '[.matches[].path] == ["docs/y.md"]' <<<"$output"
}

@test "grep --limit: stops, limitReached; exactly the limit is not reached" {
	run -0 pisb grep fs TODO --path tree --limit 2 --json
	jq -e '.matchCount == 2 and .limitReached == true and (.matches | length) == 2' <<<"$output"
	run -0 --separate-stderr pisb grep fs TODO --path tree --limit 2
	[ "${#lines[@]}" -eq 2 ]
	[[ $stderr == *"stopped at 2 matches"* ]]
	run -0 pisb grep fs MATCH --path tree/ctx.txt --limit 3 --json
	jq -e '.matchCount == 3 and .limitReached == false' <<<"$output"
	# the default is 100
	local big="$BATS_TEST_TMPDIR/many"
	seq 1 150 | sed 's/^/hit /' >"$big"
	pisb write fs many.txt <"$big"
	run -0 pisb grep fs hit --path many.txt --json
	jq -e '.matchCount == 100 and .limitReached == true' <<<"$output"
}

@test "grep cuts lines at 500 characters with a marker" {
	run -0 pisb grep fs TODO --path tree/long.txt
	[ "$output" = "long.txt:1:TODO $(head -c 495 /dev/zero | tr '\0' y) [truncated]" ]
	run -0 pisb grep fs TODO --path tree/long.txt --json
	jq -e '.linesTruncated == true and (.matches[0].text | length) == 512 and (.matches[0].text | endswith("y [truncated]"))' <<<"$output"
	# 500 multi-byte characters are kept whole
	printf '%0.sé' $(seq 1 600) | pisb write fs wide.txt
	run -0 pisb grep fs 'é' --path wide.txt --json
	jq -e '.matches[0].text == ("é" * 500) + " [truncated]"' <<<"$output"
}

@test "grep exit status: 1 when nothing matched (0 with --json), 2 for a bad regex, 3 for a missing path" {
	run -1 pisb grep fs 'no such text anywhere' --path tree
	[ -z "$output" ]
	run -0 pisb grep fs 'no such text anywhere' --path tree --json
	jq -e '.matches == [] and .matchCount == 0 and .limitReached == false' <<<"$output"
	run -2 --separate-stderr pisb grep fs 'a(b' --path tree
	[[ $stderr == *"invalid regular expression"* ]]
	run -3 pisb grep fs x --path tree/nope
	run -2 pisb grep fs x --path tree -C -1
}

@test "grep a single file reports its name; the default path is the workspace" {
	run -0 pisb grep fs TODO --path /workspace/tree/src/main.c
	[ "$output" = 'main.c:4:// TODO fix' ]
	pisb write fs top.txt --content 'unique-needle-31'
	run -0 pisb grep fs 'unique-needle-31'
	[ "$output" = 'top.txt:1:unique-needle-31' ]
}

@test "grep survives a mapped file shrinking under it: the sandbox truncates its own file mid-search (no SIGBUS)" {
	# files of 16 MiB and more are mapped; a read past a new, shorter end
	# is SIGBUS, which killed pisb grep (exit 135) before
	pisb exec fs --sh 'yes "a line of text without the needle" | head -c 40M >big.txt'
	run -0 pisb exec fs --json --timeout-ms 100 --sh 'while :; do truncate -s 64K big.txt; truncate -s 40M big.txt; done'
	h=$(jq -r 'select(.running) | .pid' <<<"$output")
	[ -n "$h" ]
	local i
	for i in $(seq 25); do
		run pisb grep fs zq_absent_needle --path big.txt
		[ "$status" -eq 1 ] || { echo "search $i: exit $status: $output"; pisb exec-kill fs "$h" >/dev/null; return 1; }
		run pisb grep fs 'line of text' --path big.txt --limit 3 --json
		[ "$status" -eq 0 ] || { echo "search $i: exit $status: $output"; pisb exec-kill fs "$h" >/dev/null; return 1; }
	done
	run -0 pisb exec-kill fs "$h" --json
	pisb exec fs -- rm -f big.txt
}
