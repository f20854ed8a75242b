#!/usr/bin/env bats
# pisb grep against ripgrep, line for line: several hundred patterns in
# ripgrep's syntax (the kinds Pi's model writes: words, \bfoo\(, alternations,
# classes, anchors, Unicode, -i, (?i), (?x)) over one tree of C headers,
# Python sources and a file of non-ASCII text, searched by pisb inside a
# sandbox and by rg over the host copy of the same tree; and pisb find's
# globs against fdfind -g.
load helpers

setup_file() {
	unshare -Ur true 2>/dev/null || skip "machine lacks: unprivileged user namespaces"
	command -v rg >/dev/null || skip "machine lacks: ripgrep (apt-get install ripgrep)"
	FS_TMP=$(mktemp -d /tmp/pisb-fs33.XXXXXX)
	chmod 755 "$FS_TMP"
	export FS_TMP PI_SANDBOX_HOME="$FS_TMP/state"
	local t="$FS_TMP/tree"
	mkdir -p "$t/uni"
	cp -a /usr/include/linux "$t/linux"
	for d in email json unittest; do
		[ -d "/usr/lib/python3.11/$d" ] && cp -a "/usr/lib/python3.11/$d" "$t/py-$d"
	done
	find "$t" -type l -delete
	find "$t" -name '__pycache__' -prune -exec rm -rf {} +
	find "$t" -name '.*' -prune -exec rm -rf {} +
	# non-ASCII text: accents, Greek, CJK, a KELVIN SIGN, a BOM, CRLF
	printf '\357\273\277TODO first line after a BOM\nTODO second\n' >"$t/uni/bom.txt"
	printf 'caf\303\251 Caf\303\251 CAF\303\211\n\316\261\316\262\316\263 \316\221\316\222\316\223 greek\n\346\227\245\346\234\254\350\252\236 kanji\n\342\204\252elvin and kelvin\nna\303\257ve r\303\251sum\303\251\nwin line\r\n\303\274ber \303\234BER\n' >"$t/uni/text.txt"
	# UTF-16 with a byte-order mark, both orders, a lone surrogate and an
	# odd last byte (ripgrep searches them as UTF-8, as pisb must)
	{ printf '\377\376'; printf 'TODO in utf-16le\n\316\272\317\214\317\203\316\274\316\265 greek\nplain line\n' | iconv -f UTF-8 -t UTF-16LE; } >"$t/uni/u16le.txt"
	{ printf '\376\377'; printf 'TODO in utf-16be\ncaf\303\251 CAF\303\211\n' | iconv -f UTF-8 -t UTF-16BE; } >"$t/uni/u16be.txt"
	printf '\377\376T\000O\000D\000O\000\000\330 \000x\000\n\000y' >"$t/uni/u16bad.txt"
	# a needle at every offset near a buffer's start and end (the prefilter
	# reads 16 and 32 bytes at a time), the last line without a newline
	for i in $(seq 0 40); do printf '%*szq_needle_%d end\n' "$i" '' "$i"; done >"$t/uni/edge.txt"
	printf 'short zq_needle_last' >>"$t/uni/edge.txt"
	printf 'zq_needle_tiny' >"$t/uni/tiny.txt"
	pisb create fs >/dev/null
	pisb push fs "$t" --to /workspace/tree --all >/dev/null
	: >"$FS_TMP/hits"
	: >"$FS_TMP/n"
}

teardown_file() {
	[ -n "${FS_TMP:-}" ] || return 0   # setup_file skipped before making it
	pisb destroy fs --confirm fs >/dev/null 2>&1 || true
	rm -rf "$FS_TMP"
}

# same PATTERN [-i]: pisb's (path:line) list equals rg's
same() {
	local a b
	a=$(pisb grep fs "$@" --path tree --limit 100000000 --json | jq -r '.matches[] | "\(.path):\(.line)"' | LC_ALL=C sort)
	b=$(cd "$FS_TMP/tree" && rg -n --no-heading --no-messages "${@:2}" -e "$1" . | LC_ALL=C grep -ao '^[^:]*:[0-9]*' | sed 's|^\./||' | LC_ALL=C sort)
	if [ "$a" != "$b" ]; then
		echo "pattern '$1' ${*:2}: pisb and rg differ"
		diff <(echo "$a") <(echo "$b") | head -5
		return 1
	fi
	[ -n "$a" ] && echo hit >>"$FS_TMP/hits"
	return 0
}

# words FROM TO: the word patterns of words FROM..TO-1 of the tree (its
# words from frequent to rare, every 7th), each counted in $FS_TMP/n
words() {
	mapfile -t W < <(cd "$FS_TMP/tree" && rg -oIN --no-filename '\b[a-z_][a-z0-9_]{3,}\b' . | LC_ALL=C sort | uniq -c | sort -rn | awk 'NR % 7 == 1 { print $2 }' | head -28)
	[ "${#W[@]}" -ge 20 ]
	local fails=0 i w x
	for ((i = $1; i < $2 && i < ${#W[@]}; i++)); do
		w=${W[$i]} x=${W[$(((i + 1) % ${#W[@]}))]}
		for p in "$w" "\\b$w\\b" "$w\\(" "\\b$w\\s*\\(" "^$w" "$w\$" "^\\s*$w" "$w|$x" "($w|$x)\\s*[=;]" \
			"(?i)$w" "[A-Z_]{2,}$w" "$w\\w*\\d" "\\w+$w" "$w[^a-z_]" "$w.*$x" "$w.+?;" \
			"#\\s*define\\s+\\w*$w" "(?i)\\b${w^^}\\b" "\\b$w\\b.*\\b$x\\b"; do
			echo "$p" >>"$FS_TMP/n"
			same "$p" || fails=$((fails + 1))
		done
		echo "${w^} -i" >>"$FS_TMP/n"
		same "${w^}" -i || fails=$((fails + 1))
	done
	[ "$fails" -eq 0 ]
}

# the fixed patterns: Unicode, classes, flags, set operations, needles
FIXED=('\p{L}+\d' '\p{Lu}{3,}' '\p{Greek}' '\p{Greek}+ \p{Greek}' '\p{Han}' 'é' '(?i)É' 'CAFÉ'
	'[^\x00-\x7F]' '[^[:ascii:]]' '\bstruct\s+\w+\s*\{' '^#include <[^>]+>' '\breturn\b'
	'TODO|FIXME|XXX' '^TODO' '^\s*$' '^$' '[[:upper:]]{4}' '[[:digit:]]+' '\d{4}'
	'0x[0-9a-fA-F]+' '(?x) struct \s+ \w+ \s* \{' '(?i:Define)' 'a{2,}' '\Bing\b'
	'u?int(8|16|32|64)_t' '[a-z]+_[a-z]+_[a-z]+' '\.\.\.' '\\' '"[^"]*"' "'.'"
	'/\*.*\*/' '\s+$' '^\t+' ' {8}' '\x{3b1}' '[α-ω]+' 'κ' '(?i)kelvin' '(?i)K'
	'(?i)ÜBER' 'über' '\w+é' '\bcafé\b' 'line\r$' '\r' '.\z' '\Adef ' '^(?:from|import) \w+'
	'def \w+\(self' 'class \w+\((\w+\.)?\w+\):' '(?m)^\s+return$' '(?s)a.b' '[[:alpha:]]+é'
	'__\w+__' '\$' '[\[\]]' '\{\}' '^\W+$' '\D\d\D' '\S\s\S' '[^\w\s]{3}'
	'(a|b|c|d|e)(f|g|h)' '(foo)?bar' 'x*' '(?i)struct\s+STAT' 'a(?i)B' '(?-i:a)' '[^a-z]'
	'EINVAL|ENOMEM|EFAULT|EPERM' 'malloc|calloc|realloc|free'
	'[a-z&&[^aeiou]]{5}' '[\w--\d]+\(' '[a-f~~d-z]{4}' '[^\w&&\p{Greek}]' '[\p{Greek}&&\p{Ll}]+'
	'[[:alpha:]--[a-c]]{6}' '[a[^b]]x' '[--a]' '[a-c-e]{3}' '[[:^alpha:]]{4}' '[a--]b'
	'(?-m)^#define' '(?m)\)$' '(?-s)a.b' '(?i-m)^TODO' '(?m:^\s+)return'
	'zq_needle_\d+' 'zq_needle_last' 'zq_needle_tiny' 'ZQ_NEEDLE_3\b' '\p{Greek}+ greek'
	'TODO in utf-16' 'café|greek' '\x{FFFD}' 'TODO|FIXME' 'error|warning|fatal')

# fixed [-i]: every fixed pattern, as given or with -i
fixed() {
	local fails=0 p
	for p in "${FIXED[@]}"; do
		echo "$p $*" >>"$FS_TMP/n"
		same "$p" "$@" || fails=$((fails + 1))
	done
	[ "$fails" -eq 0 ]
}

# Several hundred patterns in all, a test per part (one test of them all
# took minutes under load); the last test counts them.
@test "grep equals ripgrep, line for line: the patterns of the tree's words 1-7" {
	words 0 7
}

@test "grep equals ripgrep, line for line: the patterns of the tree's words 8-14" {
	words 7 14
}

@test "grep equals ripgrep, line for line: the patterns of the tree's words 15-21" {
	words 14 21
}

@test "grep equals ripgrep, line for line: the patterns of the tree's words 22-28" {
	words 21 28
}

@test "grep equals ripgrep, line for line: Unicode, classes, flags, set operations" {
	fixed
}

@test "grep equals ripgrep, line for line: the same with -i" {
	fixed -i
}

@test "grep equals ripgrep: several hundred patterns compared, most of them finding something" {
	echo "$(wc -l <"$FS_TMP/n") patterns, $(wc -l <"$FS_TMP/hits") with matches"
	[ "$(wc -l <"$FS_TMP/n")" -ge 300 ]
	# most patterns find something: the comparison is not of empty lists
	[ "$(wc -l <"$FS_TMP/hits")" -ge 250 ]
}

@test "grep: a BOM is not part of the first line (^TODO matches, the text has no BOM)" {
	run -0 pisb grep fs '^TODO' --path tree/uni/bom.txt
	[ "${lines[0]}" = 'bom.txt:1:TODO first line after a BOM' ]
	[ "${lines[1]}" = 'bom.txt:2:TODO second' ]
}

@test "grep refuses what ripgrep refuses, with ripgrep's reason" {
	run -2 --separate-stderr pisb grep fs '(?=x)' --path tree/uni
	[[ $stderr == *"look-around, including look-ahead and look-behind, is not supported"* ]]
	run -2 --separate-stderr pisb grep fs 'x(?<!y)' --path tree/uni
	[[ $stderr == *"look-around"* ]]
	run -2 --separate-stderr pisb grep fs '(a)\1' --path tree/uni
	[[ $stderr == *"backreferences are not supported"* ]]
	run -2 --separate-stderr pisb grep fs 'a\nb' --path tree/uni
	[[ $stderr == *"'\\n' is not allowed"* ]]
	run -2 --separate-stderr pisb grep fs '\p{NoSuchClass}' --path tree/uni
	[[ $stderr == *"invalid regular expression '\\p{NoSuchClass}'"* ]]
	run -2 --separate-stderr pisb grep fs '(?)x' --path tree/uni
	[[ $stderr == *"an empty flag group"* ]]
	run -2 --separate-stderr pisb grep fs '(?i-)x' --path tree/uni
	[[ $stderr == *"a dangling flag negation"* ]]
	run -2 --separate-stderr pisb grep fs '[a&&]' --path tree/uni
	[[ $stderr == *"empty character classes are not allowed"* ]]
	# and rg refuses them too
	run -2 rg '(?=x)' "$FS_TMP/tree/uni"
	run -2 rg '(a)\1' "$FS_TMP/tree/uni"
	run -2 rg '(?)x' "$FS_TMP/tree/uni"
	run -2 rg '(?i-)x' "$FS_TMP/tree/uni"
	run -2 rg '[a&&]' "$FS_TMP/tree/uni"
}

@test "grep: UTF-16 files (a byte-order mark) are searched as UTF-8, as ripgrep does" {
	run -0 pisb grep fs 'TODO in' --path tree/uni --glob 'u16*'
	[ "${lines[0]}" = 'u16be.txt:1:TODO in utf-16be' ]
	[ "${lines[1]}" = 'u16le.txt:1:TODO in utf-16le' ]
	[ "${#lines[@]}" = 2 ]
	run -0 pisb grep fs '\p{Greek}+ greek|CAFÉ' --path tree/uni --glob 'u16*'
	[ "${lines[0]}" = 'u16be.txt:2:café CAFÉ' ]
	[ "${lines[1]}" = 'u16le.txt:2:κόσμε greek' ]
	# a lone surrogate and an odd last byte: U+FFFD, as ripgrep shows them
	run -0 pisb grep fs '.' --path tree/uni/u16bad.txt
	[ "${lines[0]}" = $'u16bad.txt:1:TODO\xef\xbf\xbd x' ]
	[ "${lines[1]}" = $'u16bad.txt:2:\xef\xbf\xbd' ]
	run -0 rg -n '.' "$FS_TMP/tree/uni/u16bad.txt"
	[ "${lines[0]}" = $'1:TODO\xef\xbf\xbd x' ]
}

# fsame GLOB: pisb find's paths equal fdfind -g's (hidden files shown, no
# ignore files in this tree; directories without the trailing '/')
fsame() {
	local a b
	a=$(pisb find fs "$1" --path tree --limit 100000000 | sed 's|/$||' | LC_ALL=C sort)
	b=$(cd "$FS_TMP/tree" && fdfind -g --hidden --no-ignore "$1" | sed 's|^\./||; s|/$||' | LC_ALL=C sort)
	if [ "$a" != "$b" ]; then
		echo "glob '$1': pisb and fdfind differ"
		diff <(echo "$a") <(echo "$b") | head -5
		return 1
	fi
	[ -z "$a" ] || echo "$1" >>"$FS_TMP/fhits"
}

@test "find's globs equal fdfind -g's: braces, classes, ?, smart case" {
	command -v fdfind >/dev/null || skip "machine lacks: fd (apt-get install fd-find)"
	local fails=0
	: >"$FS_TMP/fhits"
	for g in '*.h' '{ioctl,types}.h' '*.{py,txt}' '{a,b,c}*.h' 'n?t*' '[a-c]*.h' '[!a-z]*' \
		'*_{v4,v6}*' '*.H' 'Makefile' 'TEXT.TXT' 'text.txt' '{email,json}' 'test_*.py' \
		'*{io,fs}*.h' 'x*.{h,py}' '__init__.py' '*.{Py,TXT}'; do
		fsame "$g" || fails=$((fails + 1))
	done
	[ "$fails" -eq 0 ]
	# the brace and smart-case globs found something
	grep -qxF '{ioctl,types}.h' "$FS_TMP/fhits"
	grep -qxF '*.{py,txt}' "$FS_TMP/fhits"
	grep -qxF 'text.txt' "$FS_TMP/fhits"
	# with an uppercase letter the case counts
	[ "$(grep -cxF -e '*.{Py,TXT}' -e 'TEXT.TXT' "$FS_TMP/fhits")" = 0 ]
}
