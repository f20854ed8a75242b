#!/usr/bin/env bats
# pisb read, write, edit, ls, stat, mkdir, logs on a real local sandbox:
# byte-exact round trips, JSON escaping, the 64 KiB cap, atomic replace,
# edit rules, exit codes 3/1/5, the man page.
load helpers

# One sandbox for the whole file.  The state dir's parents must be
# traversable by the id that root inside the sandbox maps to (it mounts
# the overlay), so it lives in its own 0755 directory, not in bats' 0700
# temp dir.
setup_file() {
	unshare -Ur true 2>/dev/null || skip "machine lacks: unprivileged user namespaces"
	FS_TMP=$(mktemp -d /tmp/pisb-fs30.XXXXXX)
	chmod 755 "$FS_TMP"
	export FS_TMP PI_SANDBOX_HOME="$FS_TMP/state"
	pisb create fs >/dev/null
}

teardown_file() {
	pisb destroy fs --confirm fs >/dev/null 2>&1 || true
	pisb destroy off --confirm off >/dev/null 2>&1 || true
	pisb destroy demo --confirm demo >/dev/null 2>&1 || true
	rm -rf "$FS_TMP"
}

setup() {
	pisb_test_setup
	export PI_SANDBOX_HOME="$FS_TMP/state"
}

@test "write from stdin, read it back as text and as JSON" {
	run -0 --separate-stderr pisb write fs hello.txt <<<"hello world"
	[[ $stderr == *"wrote '/workspace/hello.txt'"* ]]
	run -0 pisb read fs hello.txt
	[ "$output" = "hello world" ]
	run -0 pisb read fs /workspace/hello.txt --json
	jq -e '.path == "/workspace/hello.txt" and .content == "hello world\n" and .truncated == false
	       and .bytes == 12 and .offset == 1 and .lines == 1 and .nextOffset == null' <<<"$output"
	run -0 pisb write fs hello.txt --content "second" --json
	jq -e '.path == "/workspace/hello.txt" and .bytes == 6' <<<"$output"
	run -0 pisb read fs hello.txt
	[ "$output" = "second" ]
}

@test "NUL bytes, invalid UTF-8, CRLF and 10 MB round-trip byte-exact" {
	local f="$BATS_TEST_TMPDIR"
	printf 'a\0b\0\0c\n\377\376 bad \300\257 utf8\r\nline two\r\n' >"$f/mixed"
	head -c 10485760 /dev/urandom >"$f/big"
	printf 'no newline at the end' >"$f/nonl"
	: >"$f/empty"
	for n in mixed big nonl empty; do
		run -0 pisb write fs "rt/$n" --mkdir <"$f/$n"
		pisb read fs "rt/$n" --raw >"$f/$n.back"
		cmp "$f/$n" "$f/$n.back"
	done
	# the same through --from
	run -0 pisb write fs rt/big2 --from "$f/big"
	pisb read fs rt/big2 --raw | cmp - "$f/big"
}

@test "JSON output escapes NUL, control bytes and invalid UTF-8 (U+FFFD)" {
	printf 'a\0b\tc\r\n\377x "q" \\ \303\251\n' | pisb write fs esc.bin
	run -0 pisb read fs esc.bin --json
	jq -e '.content == "a\u0000b\tc\r\n\ufffdx \"q\" \\ é\n"' <<<"$output"
	run -0 pisb ls fs --json
	jq -e '.entries | map(.name) | index("esc.bin") != null' <<<"$output"
}

@test "read caps text at 64 KiB with an explicit field and marker; --raw does not" {
	local f="$BATS_TEST_TMPDIR/long"
	# one process writes the lines (a loop in the test body pays bats'
	# per-command trap each round)
	seq -f 'line %05g abcdefghij' 1 20000 >"$f"
	pisb write fs long.txt <"$f"
	run -0 pisb read fs long.txt --json
	jq -e '.truncated == true and (.content | length) <= 65536 and (.content | length) > 60000
	       and .bytes == 440000 and .nextOffset > 2000' <<<"$output"
	next=$(jq -r .nextOffset <<<"$output")
	# the text stops at a line boundary when lines are short
	jq -e '.content | endswith("\n")' <<<"$output"
	run -0 --separate-stderr pisb read fs long.txt
	[ "${#output}" -le 65536 ]
	[[ $stderr == *"truncated at 64 KiB"* ]]
	[[ $stderr == *"--offset $next"* ]]
	run -0 pisb read fs long.txt --offset "$next" --limit 1
	[ "$output" = "$(sed -n "${next}p" "$f")" ]
	pisb read fs long.txt --raw | cmp - "$f"
}

@test "read --offset and --limit select lines; past the end is an error" {
	printf 'one\ntwo\nthree\nfour\n' | pisb write fs lines.txt
	run -0 pisb read fs lines.txt --offset 2 --limit 2
	[ "$output" = $'two\nthree' ]
	run -0 pisb read fs lines.txt --offset 3 --json
	jq -e '.content == "three\nfour\n" and .offset == 3 and .lines == 2 and .nextOffset == null' <<<"$output"
	run -0 pisb read fs lines.txt --offset 1 --limit 3 --json
	jq -e '.lines == 3 and .nextOffset == 4 and .truncated == false' <<<"$output"
	run -1 --separate-stderr pisb read fs lines.txt --offset 9
	[[ $stderr == *"beyond the end"*"4 lines"* ]]
	run -2 pisb read fs lines.txt --raw --offset 2
}

@test "read: a missing file exits 3 naming it, a directory exits 1" {
	run -3 --separate-stderr pisb read fs no/such/file.txt
	[[ $stderr == *"/workspace/no/such/file.txt"* ]]
	run -3 pisb read fs /nope --raw
	run -1 --separate-stderr pisb read fs /workspace
	[[ $stderr == *"is a directory"* ]]
	run -1 --separate-stderr pisb read fs / --raw
	[[ $stderr == *"is a directory"* ]]
	run -3 --separate-stderr pisb read nosuch x
	[[ $stderr == *"no such sandbox 'nosuch'"* ]]
}

@test "write keeps the mode, --mode sets it, new files are 0644, --mkdir makes parents" {
	run -0 pisb write fs modes/a.sh --mkdir --mode 0755 --content '#!/bin/sh'
	run -0 pisb stat fs modes/a.sh --json
	jq -e '.mode == "0755" and .type == "file" and .size == 9' <<<"$output"
	run -0 pisb write fs modes/a.sh --content 'changed'
	run -0 pisb stat fs modes/a.sh --json
	jq -e '.mode == "0755" and .size == 7' <<<"$output"
	run -0 pisb write fs modes/b.txt --content x
	run -0 pisb stat fs modes/b.txt --json
	jq -e '.mode == "0644"' <<<"$output"
	run -0 pisb write fs modes/b.txt --mode 600 --content y
	run -0 pisb stat fs modes/b.txt --json
	jq -e '.mode == "0600"' <<<"$output"
	run -3 --separate-stderr pisb write fs missing/dir/c.txt --content x
	[[ $stderr == *"--mkdir"* ]]
	run -1 pisb write fs modes --content x
	run -2 pisb write fs modes/c.txt --mode 999 --content x
	run -2 pisb write fs modes/c.txt --content x --from /etc/hostname
	# no temp files are left behind
	run -0 pisb ls fs modes --json
	jq -e '[.entries[].name] == ["a.sh", "b.txt"]' <<<"$output"
}

@test "write through a symlink replaces the file it names, not the link" {
	run -0 pisb write fs link/target.txt --mkdir --content old
	pisb exec fs -- ln -s target.txt /workspace/link/ln
	run -0 pisb write fs link/ln --content new
	run -0 pisb ls fs link --json
	jq -e '.entries[] | select(.name == "ln") | .type == "symlink" and .target == "target.txt"' <<<"$output"
	run -0 pisb read fs link/target.txt
	[ "$output" = new ]
}

@test "20 concurrent writers of 1 MB each leave one whole version; readers never see a mix" {
	local d="$BATS_TEST_TMPDIR" i
	for i in $(seq 1 20); do
		head -c 1048576 /dev/zero | tr '\0' "$(printf "\\$(printf %03o $((64 + i)))")" >"$d/v$i"
		sha256sum <"$d/v$i" | cut -d' ' -f1 >>"$d/sums"
	done
	pisb write fs race.bin <"$d/v1"
	(for k in $(seq 1 15); do pisb read fs race.bin --raw | sha256sum | cut -d' ' -f1; done >"$d/seen") &
	local reader=$!
	for i in $(seq 1 20); do pisb write fs race.bin <"$d/v$i" & done
	wait
	pisb read fs race.bin --raw | sha256sum | cut -d' ' -f1 >"$d/final"
	grep -qxFf "$d/final" "$d/sums"
	# every read during the race saw one complete version
	[ -s "$d/seen" ]
	while read -r s; do grep -qxF "$s" "$d/sums"; done <"$d/seen"
	run -0 pisb ls fs --json
	jq -e '[.entries[].name | select(test("pisb"))] == []' <<<"$output"
}

@test "edit replaces texts that occur once, atomically, and keeps the mode" {
	printf 'alpha\nbeta\ngamma\n' | pisb write fs ed.txt --mode 0640
	run -0 pisb edit fs ed.txt --old alpha --new ALPHA --old gamma --new 'GAMMA
two lines' --json
	jq -e '.path == "/workspace/ed.txt" and .edits == 2 and .bytes == 27' <<<"$output"
	run -0 pisb read fs ed.txt
	[ "$output" = $'ALPHA\nbeta\nGAMMA\ntwo lines' ]
	run -0 pisb stat fs ed.txt --json
	jq -e '.mode == "0640"' <<<"$output"
}

@test "edit: 0 or 2 matches name the edit and write nothing; overlaps are refused" {
	printf 'one two one\nthree\n' | pisb write fs ed2.txt
	run -1 --separate-stderr pisb edit fs ed2.txt --old three --new 3 --old four --new 4
	[[ $stderr == *"edit 2"*"matches 0 times"* ]]
	run -1 --separate-stderr pisb edit fs ed2.txt --old one --new 1
	[[ $stderr == *"edit 1"*"matches 2 times"* ]]
	run -1 --separate-stderr pisb edit fs ed2.txt --old 'one two' --new x --old 'two one' --new y
	[[ $stderr == *"edits 1 and 2 overlap"* ]]
	run -0 pisb read fs ed2.txt
	[ "$output" = $'one two one\nthree' ]
	run -2 pisb edit fs ed2.txt --old three
	run -2 pisb edit fs ed2.txt
	run -3 pisb edit fs nope.txt --old a --new b
}

@test "edit --old-file/--new-file carry awkward bytes from host files" {
	printf 'x\0y\r\n$(rm -rf /) "q"\n' | pisb write fs ed3.bin
	printf '\0y\r\n$(rm -rf /)' >"$BATS_TEST_TMPDIR/old"
	printf -- '-- replaced --\n' >"$BATS_TEST_TMPDIR/new"
	run -0 pisb edit fs ed3.bin --old-file "$BATS_TEST_TMPDIR/old" --new-file "$BATS_TEST_TMPDIR/new" --old '"q"' --new "'q'"
	pisb read fs ed3.bin --raw >"$BATS_TEST_TMPDIR/back"
	printf "x-- replaced --\n 'q'\n" | cmp - "$BATS_TEST_TMPDIR/back"
	run -3 pisb edit fs ed3.bin --old-file "$BATS_TEST_TMPDIR/none" --new x
}

@test "ls: types, sizes, modes in one call, sorted; human form; 3 and 1" {
	pisb mkdir fs lsd/sub
	pisb write fs lsd/b.txt --content 12345
	pisb write fs lsd/a.txt --content 1 --mode 0600
	pisb exec fs --sh 'ln -s /etc/hostname /workspace/lsd/c-link && mkfifo /workspace/lsd/d-fifo'
	run -0 pisb ls fs lsd --json
	jq -e '.path == "/workspace/lsd" and ([.entries[].name] == ["a.txt", "b.txt", "c-link", "d-fifo", "sub"])' <<<"$output"
	jq -e '.entries[0] | .type == "file" and .size == 1 and .mode == "0600" and (.mtime | test("^20[0-9]{2}-[0-9]{2}-[0-9]{2}T.*Z$"))' <<<"$output"
	jq -e '.entries[1] | .type == "file" and .size == 5 and .mode == "0644"' <<<"$output"
	jq -e '.entries[2] | .type == "symlink" and .target == "/etc/hostname"' <<<"$output"
	jq -e '.entries[3].type == "other" and .entries[4].type == "dir"' <<<"$output"
	run -0 pisb ls fs lsd
	[ "${#lines[@]}" -eq 5 ]
	[[ ${lines[0]} == "-rw-------"*" 1 "*" a.txt" ]]
	[[ ${lines[2]} == "lrwxrwxrwx"*"c-link -> /etc/hostname" ]]
	[[ ${lines[4]} == "drwxr-xr-x"*" sub" ]]
	# default: the workspace
	run -0 pisb ls fs --json
	jq -e '.path == "/workspace" and (.entries | map(.name) | index("lsd") != null)' <<<"$output"
	run -3 pisb ls fs lsd/nope
	run -1 --separate-stderr pisb ls fs lsd/a.txt
	[[ $stderr == *"not a directory"* ]]
}

@test "stat: JSON keys, symlinks, read-only paths; missing exits 3" {
	pisb write fs st.txt --content abc
	run -0 pisb stat fs st.txt --json
	jq -e '.path == "/workspace/st.txt" and .type == "file" and .size == 3 and .mode == "0644"
	       and .readable == true and .writable == true and (.mtime | type == "string")' <<<"$output"
	run -0 pisb stat fs /workspace --json
	jq -e '.type == "dir"' <<<"$output"
	# the host image's /usr is bound read-only
	run -0 pisb stat fs /usr/bin --json
	jq -e '.type == "dir" and .readable == true and .writable == false' <<<"$output"
	pisb exec fs -- ln -sf st.txt /workspace/st-link
	run -0 pisb stat fs st-link --json
	jq -e '.type == "symlink" and .target == "st.txt" and .readable == true' <<<"$output"
	run -0 pisb stat fs st.txt
	[[ $output == *"type: file"* && $output == *"mode: 0644"* && $output == *"writable: yes"* ]]
	run -3 pisb stat fs no-such
}

@test "mkdir makes parents and accepts an existing directory; a file is in the way: 1" {
	run -0 pisb mkdir fs m1/m2/m3 --json
	jq -e '.path == "/workspace/m1/m2/m3" and .created == true' <<<"$output"
	run -0 pisb mkdir fs m1/m2/m3 --json
	jq -e '.created == false' <<<"$output"
	run -0 pisb stat fs m1/m2 --json
	jq -e '.type == "dir" and .mode == "0755"' <<<"$output"
	pisb write fs m1/file --content x
	run -1 pisb mkdir fs m1/file
	run -1 pisb mkdir fs m1/file/sub
}

@test "files work while commands run in the same sandbox" {
	run -0 pisb exec fs --timeout-ms 0 --json --sh 'while :; do echo tick >> /workspace/busy.log; sleep 0.05; done'
	local handle
	handle=$(jq -r .pid <<<"$output")
	sleep 0.3
	local n
	for n in 1 2 3 4 5; do   # not "i": bats' run uses it
		run -0 pisb write fs "busy-$n.txt" --content "$n"
		run -0 pisb read fs "busy-$n.txt"
		[ "$output" = "$n" ]
	done
	run -0 pisb read fs busy.log --json
	jq -e '.content | startswith("tick\n")' <<<"$output"
	run -0 pisb grep fs tick --path busy.log --limit 1 --json
	jq -e '.matchCount == 1 and .limitReached == true' <<<"$output"
	pisb exec-kill fs "$handle" >/dev/null 2>&1 || true
}

@test "a sandbox that is not running: exit 5 and how to start it" {
	pisb create off >/dev/null
	pisb stop off >/dev/null
	for verb in "read off x" "write off x --content y" "ls off" "stat off x" "mkdir off d" \
		"find off x" "grep off x" "edit off x --old a --new b"; do
		run -5 --separate-stderr pisb $verb
		[[ $stderr == *"sandbox 'off' is not running (start it with 'pisb start off')"* ]]
	done
	# logs are read on the host side and work while stopped
	run -0 pisb logs off
	pisb destroy off --confirm off >/dev/null
}

@test "logs: the controller log, --lines, service logs, missing service 3" {
	run -0 --separate-stderr pisb logs fs
	[[ $output == *"controller"* ]]
	run -0 pisb logs fs --json
	jq -e '.service == null and (.content | length) > 0 and .truncated == false and .lines >= 1' <<<"$output"
	mkdir -p "$PI_SANDBOX_HOME/instances/fs/logs"
	seq 1 1000 | sed 's/^/web line /' >"$PI_SANDBOX_HOME/instances/fs/logs/web.log"
	run -0 pisb logs fs web --lines 3
	[ "$output" = $'web line 998\nweb line 999\nweb line 1000' ]
	run -0 pisb logs fs web --json
	jq -e '.service == "web" and .lines == 100 and (.content | startswith("web line 901\n"))' <<<"$output"
	run -0 pisb logs fs web -n 500 --json
	jq -e '.lines == 500' <<<"$output"
	run -2 pisb logs fs web --lines 501
	run -3 --separate-stderr pisb logs fs db
	[[ $stderr == *"service 'db'"* ]]
	run -2 pisb logs fs ../../record
	# a log bigger than the cap: the last 64 KiB of whole lines, marked
	head -c 200000 /dev/zero | tr '\0' x >"$PI_SANDBOX_HOME/instances/fs/logs/wide.log"
	printf '\nlast\n' >>"$PI_SANDBOX_HOME/instances/fs/logs/wide.log"
	run -0 pisb logs fs wide --lines 3 --json
	jq -e '.truncated == true and (.content | length) <= 65536 and .content == "last\n"' <<<"$output"
}

@test "an unprivileged user: write, read --raw, edit, ls round trip" {
	id pisbtest >/dev/null 2>&1 || skip "machine lacks: the test user pisbtest"
	local st
	st=$(mktemp -d /tmp/pisb-fs30u.XXXXXX)
	chown pisbtest "$st"
	head -c 300000 /dev/urandom >"$st/data"
	printf 'x\0y\r\n' >>"$st/data"
	chmod 644 "$st/data"
	run -0 as_user pisb --state-dir "$st/s" create u1
	run -0 as_user pisb --state-dir "$st/s" write u1 d/data --mkdir --from "$st/data"
	as_user pisb --state-dir "$st/s" read u1 d/data --raw | cmp - "$st/data"
	run -0 as_user pisb --state-dir "$st/s" write u1 t.txt --content 'one two'
	run -0 as_user pisb --state-dir "$st/s" edit u1 t.txt --old two --new 2
	run -0 as_user pisb --state-dir "$st/s" read u1 t.txt
	[ "$output" = "one 2" ]
	run -0 as_user pisb --state-dir "$st/s" ls u1 --json
	jq -e '[.entries[].name] | index("t.txt") != null' <<<"$output"
	run -0 as_user pisb --state-dir "$st/s" exec u1 -- cat /workspace/t.txt
	[ "$output" = "one 2" ]
	run -0 as_user pisb --state-dir "$st/s" destroy u1 --confirm u1
	rm -rf "$st"
}

@test "the man page is clean roff and documents every option and JSON key" {
	require_cmd groff
	run -0 --separate-stderr groff -man -ww -z "$TOP/man/pisb-fs.1"
	[ -z "$stderr" ]
	local page
	page=$(sed 's/\\-/-/g' "$TOP/man/pisb-fs.1")
	for verb in read write edit ls stat mkdir find grep logs push pull; do
		[[ $page == *".B $verb"* || $page == *".B pisb $verb"* ]]
		for opt in $(pisb "$verb" --help | sed -n '/^options:/,/^$/p' | grep -o -- '--[a-z-]*'); do
			[[ $page == *"$opt"* ]] || { echo "man page lacks $verb $opt"; false; }
		done
	done
	for key in content truncated bytes offset lines nextOffset entries mtime readable writable \
		created matches matchCount limitReached linesTruncated files sha256 archiveBytes keptConfig; do
		[[ $page == *"$key"* ]] || { echo "man page lacks JSON key $key"; false; }
	done
	for sect in NAME SYNOPSIS DESCRIPTION OPTIONS "JSON OUTPUT" "EXIT STATUS" EXAMPLES; do
		grep -q "^\.SH \"\?$sect\"\?$" "$TOP/man/pisb-fs.1"
	done
}

@test "the man page's examples run" {
	require_cmd git
	pisb create demo >/dev/null
	local co="$BATS_TEST_TMPDIR/checkout"
	mkdir -p "$co" && git -C "$co" init -q && echo tracked >"$co/t.txt" && git -C "$co" add t.txt
	# the lines between .nf and .fi of EXAMPLES, roff escapes undone
	sed -n '/^\.SH EXAMPLES/,/^\.SH SEE ALSO/p' "$TOP/man/pisb-fs.1" |
		sed -n '/^\.nf/,/^\.fi/p' | grep -v '^\.[nf][fi]$' |
		sed -e 's/\\-/-/g' -e 's/\\e/\\/g' >"$BATS_TEST_TMPDIR/examples.sh"
	[ "$(wc -l <"$BATS_TEST_TMPDIR/examples.sh")" -ge 9 ]
	cd "$co"
	run -0 --separate-stderr bash -e "$BATS_TEST_TMPDIR/examples.sh"
	[[ $output == *'"content":"hello\n"'* ]]
	[[ $output == *"notes/hello.txt:1:goodbye"* ]]
	[ "$(cat "$co/notes/hello.txt")" = goodbye ]
	run -0 pisb read demo /workspace/src/t.txt
	[ "$output" = tracked ]
	pisb destroy demo --confirm demo >/dev/null
}
