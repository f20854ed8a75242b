#!/usr/bin/env bats
# pisb push and pull: git-tracked files by default, --all, atomic
# replacement, checksums, round trips, and pull refusing archives that
# would write outside HOSTDIR (crafted with python3's tarfile and fed
# through pull's extraction via PISB_TEST_PULL_ARCHIVE).
load helpers

setup_file() {
	unshare -Ur true 2>/dev/null || skip "machine lacks: unprivileged user namespaces"
	FS_TMP=$(mktemp -d /tmp/pisb-fs32.XXXXXX)
	chmod 755 "$FS_TMP"
	export FS_TMP PI_SANDBOX_HOME="$FS_TMP/state"
	pisb create fs >/dev/null
}

teardown_file() {
	pisb destroy fs --confirm fs >/dev/null 2>&1 || true
	pisb destroy off --confirm off >/dev/null 2>&1 || true
	rm -rf "$FS_TMP"
}

setup() {
	pisb_test_setup
	export PI_SANDBOX_HOME="$FS_TMP/state"
}

# A git checkout: tracked, modified, deleted, untracked and ignored files.
make_repo() {
	local r=$1
	mkdir -p "$r/d"
	git -C "$r" init -q
	echo 'committed' >"$r/a.txt"
	echo 'to be deleted' >"$r/b.txt"
	echo 'deep' >"$r/d/e.txt"
	echo 'ignored.txt' >"$r/.gitignore"
	ln -s a.txt "$r/link"
	git -C "$r" add -A
	git -C "$r" -c user.email=t@example.com -c user.name=t commit -qm init
	echo 'edited, not committed' >"$r/a.txt"
	rm "$r/b.txt"
	echo 'untracked' >"$r/c.txt"
	echo 'ignored' >"$r/ignored.txt"
}

names() {   # sorted entry names of a sandbox directory
	pisb ls fs "$1" --json | jq -r '[.entries[].name] | join(" ")'
}

@test "push sends the files git tracks, as they are in the working tree" {
	require_cmd git
	make_repo "$BATS_TEST_TMPDIR/repo"
	run -0 pisb push fs "$BATS_TEST_TMPDIR/repo" --to /workspace/p1 --json
	jq -e '.files == 4 and .to == "/workspace/p1" and (.sha256 | test("^[0-9a-f]{64}$"))
	       and .archiveBytes > 0 and .bytes == 39' <<<"$output"
	[ "$(names p1)" = ".gitignore a.txt d link" ]
	run -0 pisb read fs p1/a.txt
	[ "$output" = 'edited, not committed' ]
	run -0 pisb ls fs p1 --json
	jq -e '.entries[] | select(.name == "link") | .type == "symlink" and .target == "a.txt"' <<<"$output"
	# a subdirectory of a checkout: only what git tracks there
	run -0 pisb push fs "$BATS_TEST_TMPDIR/repo/d" --to /workspace/p2
	[ "$(names p2)" = "e.txt" ]
}

@test "push --all, and a directory outside git, send every file" {
	require_cmd git
	make_repo "$BATS_TEST_TMPDIR/repo"
	run -0 pisb push fs "$BATS_TEST_TMPDIR/repo" --to /workspace/p3 --all --json
	[ "$(names p3)" = ".git .gitignore a.txt c.txt d ignored.txt link" ]
	local plain="$BATS_TEST_TMPDIR/plain"
	mkdir -p "$plain/x/empty"
	echo one >"$plain/one"
	echo two >"$plain/x/two"
	run -0 pisb push fs "$plain" --to /workspace/p4 --json
	jq -e '.files == 2 and .bytes == 8' <<<"$output"
	[ "$(names p4)" = "one x" ]
	[ "$(names p4/x)" = "empty two" ]
}

@test "push replaces the target: stale files go, the workspace keeps .sandbox.yaml" {
	local src="$BATS_TEST_TMPDIR/src"
	mkdir -p "$src/sub"
	echo new >"$src/new.txt"
	echo s >"$src/sub/s.txt"
	pisb write fs /workspace/p5/stale.txt --mkdir --content stale
	run -0 pisb push fs "$src" --to /workspace/p5
	[ "$(names p5)" = "new.txt sub" ]
	# again, over a tree that exists
	echo newer >"$src/new.txt"
	run -0 pisb push fs "$src" --to /workspace/p5
	run -0 pisb read fs p5/new.txt
	[ "$output" = newer ]
	# the workspace itself (whose parent the overlay cannot move directories in)
	pisb write fs stale-in-ws.txt --content x
	run -0 pisb push fs "$src" --json
	jq -e '.to == "/workspace" and .keptConfig == true' <<<"$output"
	[ "$(names /workspace)" = ".sandbox.yaml new.txt sub" ]
	run -0 pisb read fs .sandbox.yaml
	[[ $output == *'"workspace":"/workspace"'* ]]
	# no staging or old trees left anywhere near
	run -0 pisb ls fs / --json
	jq -e '[.entries[].name | select(test("pisb"))] == []' <<<"$output"
}

@test "push then pull round-trips bytes, modes, symlinks and empty directories" {
	local src="$BATS_TEST_TMPDIR/rt" out="$BATS_TEST_TMPDIR/back"
	mkdir -p "$src/bin" "$src/empty" "$src/deep/er"
	printf 'a\0b\r\n\377' >"$src/mixed.bin"
	head -c 3000000 /dev/urandom >"$src/deep/er/big"
	printf '#!/bin/sh\necho hi\n' >"$src/bin/run"
	chmod 755 "$src/bin/run"
	chmod 600 "$src/mixed.bin"
	ln -s ../mixed.bin "$src/bin/rel-link"
	run -0 pisb push fs "$src" --to /workspace/rt --json
	push_sha=$(jq -r .sha256 <<<"$output")
	run -0 pisb exec fs -- /workspace/rt/bin/run
	[ "$output" = hi ]
	run -0 pisb pull fs /workspace/rt "$out" --json
	jq -e --arg out "$out" '.to == $out and .files == 4 and .bytes == 3000024' <<<"$output"
	diff -r --no-dereference "$src" "$out"
	[ "$(stat -c %a "$out/bin/run")" = 755 ]
	[ "$(stat -c %a "$out/mixed.bin")" = 600 ]
	[ "$(readlink "$out/bin/rel-link")" = ../mixed.bin ]
	[ -d "$out/empty" ]
	# the same tree makes the same archive on both sides
	[ "$(jq -r .sha256 <<<"$output")" = "$push_sha" ]
	# nothing of the staging directory is left on the host
	[ -z "$(find "$out" -name '.pisb-pull-*')" ]
}

@test "pull a file, into a new directory; a missing path exits 3" {
	pisb write fs pf/one.txt --mkdir --content 'just me'
	run -0 pisb pull fs pf/one.txt "$BATS_TEST_TMPDIR/new/dir"
	[ "$(cat "$BATS_TEST_TMPDIR/new/dir/one.txt")" = 'just me' ]
	run -3 pisb pull fs pf/none.txt "$BATS_TEST_TMPDIR/x"
	run -3 pisb push fs "$BATS_TEST_TMPDIR/no-such-dir"
}

@test "pull replaces host files but never a directory by a file, nor through a host symlink" {
	pisb write fs pc/a.txt --mkdir --content fresh
	pisb write fs pc/sub/b.txt --mkdir --content b
	local out="$BATS_TEST_TMPDIR/pc"
	mkdir -p "$out"
	echo old >"$out/a.txt"
	run -0 pisb pull fs pc "$out"
	[ "$(cat "$out/a.txt")" = fresh ]
	# a directory on the host where the sandbox has a file: conflict, nothing changed
	rm "$out/a.txt" && mkdir "$out/a.txt"
	echo keep >"$out/sub/b.txt"
	run -4 --separate-stderr pisb pull fs pc "$out"
	[[ $stderr == *"'a.txt' is a directory on the host"* ]]
	[ "$(cat "$out/sub/b.txt")" = keep ]
	# a host symlink where the sandbox has a directory is not followed
	local elsewhere="$BATS_TEST_TMPDIR/elsewhere"
	mkdir -p "$elsewhere"
	rm -rf "$out" && mkdir -p "$out" && ln -s "$elsewhere" "$out/sub"
	run -4 pisb pull fs pc "$out"
	[ -z "$(ls -A "$elsewhere")" ]
	[ ! -e "$out/a.txt" ]
}

@test "pull drops set-user-ID bits" {
	pisb exec fs --sh 'mkdir -p /workspace/su && printf x > /workspace/su/tool && chmod 4755 /workspace/su/tool'
	run -0 pisb pull fs su "$BATS_TEST_TMPDIR/su"
	[ "$(stat -c %a "$BATS_TEST_TMPDIR/su/tool")" = 755 ]
}

# Make a tar archive with one harmless file and one bad entry.
craft() {
	python3 - "$@" <<-'PY'
	import io, sys, tarfile
	path, kind, target = sys.argv[1], sys.argv[2], sys.argv[3]
	def add(t, name, data=b"x", typ=tarfile.REGTYPE, link="", mode=0o644):
	    ti = tarfile.TarInfo(name)
	    ti.type, ti.linkname, ti.mode = typ, link, mode
	    ti.size = len(data) if typ == tarfile.REGTYPE else 0
	    t.addfile(ti, io.BytesIO(data) if typ == tarfile.REGTYPE else None)
	with tarfile.open(path, "w", format=tarfile.PAX_FORMAT) as t:
	    add(t, "ok.txt", b"fine")
	    if kind == "dotdot":
	        add(t, "../evil", b"evil")
	    elif kind == "dotdot2":
	        add(t, "../../evil", b"evil")
	    elif kind == "dotdot-mid":
	        add(t, "a/../../../evil", b"evil")
	    elif kind == "absolute":
	        add(t, target, b"evil")
	    elif kind == "symlink-abs":
	        add(t, "evil", typ=tarfile.SYMTYPE, link=target)
	    elif kind == "symlink-up":
	        add(t, "d/evil", typ=tarfile.SYMTYPE, link="../../../evil")
	    elif kind == "symlink-then-file":
	        add(t, "esc", typ=tarfile.SYMTYPE, link="/tmp")
	        add(t, "esc/evil", b"evil")
	    elif kind == "hardlink-up":
	        add(t, "evil", typ=tarfile.LNKTYPE, link="../../evil")
	    elif kind == "hardlink-abs":
	        add(t, "evil", typ=tarfile.LNKTYPE, link=target)
	    elif kind == "device":
	        add(t, "evil", typ=tarfile.CHRTYPE)
	    elif kind == "good":
	        add(t, "sub/inner.txt", b"inner")
	        add(t, "sub/rel", typ=tarfile.SYMTYPE, link="../ok.txt")
	        add(t, "hard", typ=tarfile.LNKTYPE, link="ok.txt")
	PY
}

@test "pull refuses archives that point outside HOSTDIR, and writes nothing" {
	require_cmd python3
	local d="$BATS_TEST_TMPDIR" secret="$BATS_TEST_TMPDIR/host-secret"
	echo 'host secret' >"$secret"
	for kind in dotdot dotdot2 dotdot-mid absolute symlink-abs symlink-up symlink-then-file \
		hardlink-up hardlink-abs device; do
		local target="$secret"
		[ "$kind" = absolute ] && target="$d/abs-evil"
		craft "$d/$kind.tar" "$kind" "$target"
		mkdir -p "$d/out-$kind"
		PISB_TEST_PULL_ARCHIVE="$d/$kind.tar" run -1 --separate-stderr pisb pull fs x "$d/out-$kind"
		[[ $stderr == *"refusing"* ]] || [[ $stderr == *"extract"* ]] || { echo "$kind: $stderr"; false; }
		# nothing landed: not the bad entry, not even the good one before it
		[ -z "$(ls -A "$d/out-$kind")" ] || { echo "$kind left: $(ls -A "$d/out-$kind")"; false; }
		[ ! -e "$d/evil" ]
		[ ! -e "$d/abs-evil" ]
		[ ! -e /tmp/evil ]
		[ "$(cat "$secret")" = 'host secret' ]
	done
}

@test "the pull test hook extracts a well-formed archive like a real pull" {
	require_cmd python3
	craft "$BATS_TEST_TMPDIR/good.tar" good ""
	PISB_TEST_PULL_ARCHIVE="$BATS_TEST_TMPDIR/good.tar" run -0 pisb pull fs x "$BATS_TEST_TMPDIR/good" --json
	jq -e '.files == 4' <<<"$output"
	[ "$(cat "$BATS_TEST_TMPDIR/good/sub/inner.txt")" = inner ]
	[ "$(readlink "$BATS_TEST_TMPDIR/good/sub/rel")" = ../ok.txt ]
	[ "$(cat "$BATS_TEST_TMPDIR/good/hard")" = fine ]
}

@test "push and pull of a stopped sandbox: exit 5" {
	pisb create off >/dev/null
	pisb stop off >/dev/null
	mkdir -p "$BATS_TEST_TMPDIR/src"
	run -5 --separate-stderr pisb push off "$BATS_TEST_TMPDIR/src"
	[[ $stderr == *"sandbox 'off' is not running"* ]]
	run -5 pisb pull off /workspace "$BATS_TEST_TMPDIR/out"
	pisb destroy off --confirm off >/dev/null
}

@test "an unprivileged user: push and pull round trip" {
	id pisbtest >/dev/null 2>&1 || skip "machine lacks: the test user pisbtest"
	local st
	st=$(mktemp -d /tmp/pisb-fs32u.XXXXXX)
	chown pisbtest "$st"
	mkdir -p "$st/src/sub"
	head -c 100000 /dev/urandom >"$st/src/sub/rand"
	printf 'x\0y\n' >"$st/src/nul"
	chown -R pisbtest "$st/src"
	run -0 as_user pisb --state-dir "$st/s" create u2
	run -0 as_user pisb --state-dir "$st/s" push u2 "$st/src" --to /workspace/in --json
	jq -e '.files == 2' <<<"$output"
	run -0 as_user pisb --state-dir "$st/s" pull u2 /workspace/in "$st/out" --json
	diff -r "$st/src" "$st/out"
	[ "$(stat -c %U "$st/out/nul")" = pisbtest ]
	run -0 as_user pisb --state-dir "$st/s" destroy u2 --confirm u2
	rm -rf "$st"
}
