#!/usr/bin/env bats
# push and pull of an opensandbox sandbox, against the fake OpenSandbox
# server: one tar archive each way through execd's file API, unpacked or
# made by tar inside the sandbox, SHA-256 compared before anything is
# replaced.  The local driver's contract (tests/32) holds: git-tracked
# files by default, --all, --to, deletions, byte-exact content and modes,
# the old tree kept on any failure, pull staged on the host and refusing
# archives that would write outside HOSTDIR.
load helpers
load fakes/opensandbox

setup() {
	pisb_test_setup
	require_cmd jq
	require_cmd curl
	require_cmd git
	os_fake_start
	os_config "$BATS_TEST_TMPDIR/r.yaml"
	pisb create box -f "$BATS_TEST_TMPDIR/r.yaml"
	ID=$(os_sid box)
	ROOT=$(os_admin GET "/_fake/sandboxes/$ID" | jq -r .root)
}

teardown() {
	os_fake_stop
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
	pisb ls box "$1" --json | jq -r '[.entries[].name] | join(" ")'
}

# nothing of a transfer is left in the sandbox or in HOSTDIR
no_leftovers() {
	[ -z "$(find "$ROOT" -name '*pisb-push*' -o -name '*pisb-old*' -o -name '*pisb-pull*' -o -name '*pisb-probe*')" ] ||
		{ find "$ROOT" -name '*pisb-*'; false; }
}

@test "push sends the files git tracks as they are in the working tree, deletions included" {
	make_repo "$BATS_TEST_TMPDIR/repo"
	run -0 pisb push box "$BATS_TEST_TMPDIR/repo" --to /workspace/p1 --json
	jq -e '.files == 4 and .to == "/workspace/p1" and (.sha256 | test("^[0-9a-f]{64}$"))
	       and .archiveBytes > 0 and .bytes == 39 and .keptConfig == false' <<<"$output"
	[ "$(names p1)" = ".gitignore a.txt d link" ]
	run -0 pisb read box p1/a.txt
	[ "$output" = 'edited, not committed' ]
	[ "$(readlink "$ROOT/workspace/p1/link")" = a.txt ]
	# a subdirectory of a checkout: only what git tracks there
	run -0 pisb push box "$BATS_TEST_TMPDIR/repo/d" --to /workspace/p2
	[ "$(names p2)" = "e.txt" ]
	# the human line
	run -0 --separate-stderr pisb push box "$BATS_TEST_TMPDIR/repo/d" --to p2
	[[ $stderr == *"pushed 1 files (5 bytes) to '/workspace/p2', sha256 "* ]]
	no_leftovers
}

@test "push --all and a directory outside git send every file" {
	make_repo "$BATS_TEST_TMPDIR/repo"
	run -0 pisb push box "$BATS_TEST_TMPDIR/repo" --to /workspace/p3 --all
	[ "$(names p3)" = ".git .gitignore a.txt c.txt d ignored.txt link" ]
	local plain="$BATS_TEST_TMPDIR/plain"
	mkdir -p "$plain/x/empty"
	echo one >"$plain/one"
	echo two >"$plain/x/two"
	run -0 pisb push box "$plain" --to /workspace/p4 --json
	jq -e '.files == 2 and .bytes == 8' <<<"$output"
	[ "$(names p4)" = "one x" ]
	[ "$(names p4/x)" = "empty two" ]
}

@test "push replaces the target: files deleted on the host go, the workspace keeps .sandbox.yaml" {
	local src="$BATS_TEST_TMPDIR/src"
	mkdir -p "$src/sub"
	echo new >"$src/new.txt"
	echo gone >"$src/gone.txt"
	echo s >"$src/sub/s.txt"
	pisb write box /workspace/p5/stale.txt --mkdir --content stale
	pisb exec box -- chmod 0711 /workspace/p5
	run -0 pisb push box "$src" --to /workspace/p5
	[ "$(names p5)" = "gone.txt new.txt sub" ]
	# the target directory keeps its own mode
	[ "$(stat -c %a "$ROOT/workspace/p5")" = 711 ]
	# again, over a tree that exists, with a file deleted on the host
	rm "$src/gone.txt"
	echo newer >"$src/new.txt"
	run -0 pisb push box "$src" --to p5
	[ "$(names p5)" = "new.txt sub" ]
	run -0 pisb read box p5/new.txt
	[ "$output" = newer ]
	# the workspace itself (default --to) keeps its guest .sandbox.yaml
	pisb write box stale-in-ws.txt --content x
	pisb write box .sandbox.yaml --content 'guest: copy'
	run -0 pisb push box "$src" --json
	jq -e '.to == "/workspace" and .keptConfig == true' <<<"$output"
	[ "$(names /workspace)" = ".sandbox.yaml new.txt sub" ]
	run -0 pisb read box .sandbox.yaml
	[ "$output" = 'guest: copy' ]
	# elsewhere a .sandbox.yaml is just a file
	pisb write box p5/.sandbox.yaml --content other --mkdir
	run -0 pisb push box "$src" --to p5 --json
	jq -e '.keptConfig == false' <<<"$output"
	[ "$(names p5)" = "new.txt sub" ]
	# a pushed .sandbox.yaml wins
	echo 'version: 1' >"$src/.sandbox.yaml"
	run -0 pisb push box "$src" --json
	jq -e '.keptConfig == false' <<<"$output"
	[ "$(cat "$ROOT/workspace/.sandbox.yaml")" = 'version: 1' ]
	no_leftovers
}

@test "push then pull round-trip binary, NUL, CR LF and 10 MB files byte for byte, with modes and links" {
	local src="$BATS_TEST_TMPDIR/rt" out="$BATS_TEST_TMPDIR/back"
	mkdir -p "$src/bin" "$src/empty" "$src/deep/er/est"
	printf 'a\0b\r\n\377\376' >"$src/mixed.bin"
	head -c 10485760 /dev/urandom >"$src/deep/er/big"
	printf '#!/bin/sh\necho hi\n' >"$src/bin/run"
	printf 'no newline at the end' >"$src/deep/er/est/tail"
	: >"$src/zero"
	chmod 755 "$src/bin/run"
	chmod 600 "$src/mixed.bin"
	chmod 640 "$src/zero"
	ln -s ../mixed.bin "$src/bin/rel-link"
	run -0 pisb push box "$src" --to /workspace/rt --json
	jq -e '.files == 6 and .bytes == 10485760 + 7 + 18 + 21' <<<"$output"
	# byte-exact at the far end, modes kept
	cmp "$src/deep/er/big" "$ROOT/workspace/rt/deep/er/big"
	cmp "$src/mixed.bin" "$ROOT/workspace/rt/mixed.bin"
	[ "$(stat -c %a "$ROOT/workspace/rt/bin/run")" = 755 ]
	[ "$(stat -c %a "$ROOT/workspace/rt/mixed.bin")" = 600 ]
	[ "$(stat -c %a "$ROOT/workspace/rt/zero")" = 640 ]
	run -0 pisb exec box -- /workspace/rt/bin/run
	[ "$output" = hi ]
	run -0 pisb pull box /workspace/rt "$out" --json
	jq -e --arg out "$out" '.to == $out and .files == 6 and .bytes == 10485760 + 7 + 18 + 21
		and (.sha256 | test("^[0-9a-f]{64}$")) and .archiveBytes > 10485760' <<<"$output"
	diff -r --no-dereference "$src" "$out"
	[ "$(stat -c %a "$out/bin/run")" = 755 ]
	[ "$(stat -c %a "$out/mixed.bin")" = 600 ]
	[ "$(readlink "$out/bin/rel-link")" = ../mixed.bin ]
	[ -d "$out/empty" ]
	[ -d "$out/deep/er/est" ]
	[ -z "$(find "$out" -name '.pisb-*')" ]
	no_leftovers
}

@test "pull of nested directories, of a single file, into a new directory; missing is 3" {
	run -0 pisb exec box -- sh -c 'mkdir -p /srv/n/a/b/c && printf x > /srv/n/a/b/c/deep.txt && printf y > /srv/n/top && chmod 700 /srv/n/a/b'
	run -0 pisb pull box /srv/n "$BATS_TEST_TMPDIR/n" --json
	jq -e '.files == 2 and .bytes == 2' <<<"$output"
	[ "$(cat "$BATS_TEST_TMPDIR/n/a/b/c/deep.txt")" = x ]
	[ "$(stat -c %a "$BATS_TEST_TMPDIR/n/a/b")" = 700 ]
	pisb write box pf/one.txt --mkdir --content 'just me'
	run -0 pisb pull box pf/one.txt "$BATS_TEST_TMPDIR/new/dir"
	[ "$(cat "$BATS_TEST_TMPDIR/new/dir/one.txt")" = 'just me' ]
	[ "$(ls -A "$BATS_TEST_TMPDIR/new/dir")" = one.txt ]
	# a file through a symlink arrives under the link's name
	pisb exec box -- ln -s one.txt /workspace/pf/alias
	run -0 pisb pull box pf/alias "$BATS_TEST_TMPDIR/al"
	[ "$(cat "$BATS_TEST_TMPDIR/al/alias")" = 'just me' ]
	[ ! -L "$BATS_TEST_TMPDIR/al/alias" ]
	run -3 --separate-stderr pisb pull box pf/none.txt "$BATS_TEST_TMPDIR/x"
	[[ $stderr == *"no such file or directory '/workspace/pf/none.txt'"* ]]
	run -3 pisb push box "$BATS_TEST_TMPDIR/no-such-dir"
	no_leftovers
}

@test "pull replaces host files but never a directory by a file, and never writes through a host symlink" {
	pisb write box pc/a.txt --mkdir --content fresh
	pisb write box pc/sub/b.txt --mkdir --content b
	local out="$BATS_TEST_TMPDIR/pc"
	mkdir -p "$out"
	echo old >"$out/a.txt"
	run -0 pisb pull box pc "$out"
	[ "$(cat "$out/a.txt")" = fresh ]
	rm "$out/a.txt" && mkdir "$out/a.txt"
	echo keep >"$out/sub/b.txt"
	run -4 --separate-stderr pisb pull box pc "$out"
	[[ $stderr == *"'a.txt' is a directory on the host"* ]]
	[ "$(cat "$out/sub/b.txt")" = keep ]
	local elsewhere="$BATS_TEST_TMPDIR/elsewhere"
	mkdir -p "$elsewhere"
	rm -rf "$out" && mkdir -p "$out" && ln -s "$elsewhere" "$out/sub"
	run -4 pisb pull box pc "$out"
	[ -z "$(ls -A "$elsewhere")" ]
	[ ! -e "$out/a.txt" ]
}

@test "pull refuses links that escape HOSTDIR, and writes nothing" {
	local d="$BATS_TEST_TMPDIR"
	for kind in abs up; do
		run -0 pisb exec box -- sh -c "rm -rf /workspace/esc && mkdir -p /workspace/esc/d && echo fine > /workspace/esc/ok.txt"
		if [ $kind = abs ]; then
			pisb exec box -- ln -s /etc/passwd /workspace/esc/evil
		else
			pisb exec box -- ln -s ../../../evil /workspace/esc/d/evil
		fi
		mkdir -p "$d/out-$kind"
		run -1 --separate-stderr pisb pull box esc "$d/out-$kind"
		[[ $stderr == *"refusing symlink"*"it points outside"* ]]
		[ -z "$(ls -A "$d/out-$kind")" ]
	done
	# fifos and sockets do not travel (as with the local driver)
	run -0 pisb exec box -- sh -c 'rm -rf /workspace/esc && mkdir -p /workspace/esc && echo fine > /workspace/esc/ok.txt && mkfifo /workspace/esc/fifo'
	run -0 pisb pull box esc "$d/out-fifo"
	[ "$(ls -A "$d/out-fifo")" = ok.txt ]
}

@test "a hostile tar in the sandbox: absolute names, '..' and hard links out are refused, nothing written" {
	require_cmd python3
	# the sandbox's own tar (first on its PATH) writes a crafted archive
	mkdir -p "$ROOT/evil"
	cat >"$ROOT/evil/tar" <<-'PY'
	#!/usr/bin/env python3
	import io, os, sys, tarfile
	a = sys.argv[sys.argv.index("-f") + 1]
	kind = open("/evil/kind").read().strip()
	def add(t, name, data=b"x", typ=tarfile.REGTYPE, link=""):
	    ti = tarfile.TarInfo(name)
	    ti.type, ti.linkname, ti.mode = typ, link, 0o644
	    ti.size = len(data) if typ == tarfile.REGTYPE else 0
	    t.addfile(ti, io.BytesIO(data) if typ == tarfile.REGTYPE else None)
	with tarfile.open(a, "w", format=tarfile.PAX_FORMAT) as t:
	    add(t, "ok.txt", b"fine")
	    if kind == "absolute":
	        add(t, os.environ.get("EVIL_ABS", "/tmp/pisb-evil-abs"), b"evil")
	    elif kind == "dotdot":
	        add(t, "a/../../evil", b"evil")
	    elif kind == "hardlink":
	        add(t, "evil", typ=tarfile.LNKTYPE, link="../../evil")
	    elif kind == "symlink-then-file":
	        add(t, "esc", typ=tarfile.SYMTYPE, link="/tmp")
	        add(t, "esc/evil", b"evil")
	PY
	chmod 755 "$ROOT/evil/tar"
	os_admin POST /_fake/faults '{"command_path":"/evil:/usr/local/bin:/usr/bin:/bin"}' >/dev/null
	pisb write box /workspace/x.txt --content x
	for kind in absolute dotdot hardlink symlink-then-file; do
		echo "$kind" >"$ROOT/evil/kind"
		mkdir -p "$BATS_TEST_TMPDIR/out-$kind"
		run -1 --separate-stderr pisb pull box /workspace "$BATS_TEST_TMPDIR/out-$kind"
		[[ $stderr == *"refusing"* ]] || [[ $stderr == *"extract"* ]] || { echo "$kind: $stderr"; false; }
		[ -z "$(ls -A "$BATS_TEST_TMPDIR/out-$kind")" ]
		[ ! -e /tmp/pisb-evil-abs ]
		[ ! -e "$BATS_TEST_TMPDIR/evil" ]
		[ ! -e /tmp/evil ]
	done
}

@test "a damaged upload: checksum mismatch, exit 1, the old tree stays" {
	local src="$BATS_TEST_TMPDIR/src"
	mkdir -p "$src"
	echo v1 >"$src/f.txt"
	run -0 pisb push box "$src" --to /workspace/keep
	echo v2 >"$src/f.txt"
	echo more >"$src/g.txt"
	os_admin POST /_fake/faults '{"corrupt_uploads":1}' >/dev/null
	run -1 --separate-stderr pisb push box "$src" --to /workspace/keep
	[[ $stderr == *"checksum mismatch: sent "*", received "*"; nothing was replaced"* ]]
	[ "$(names keep)" = "f.txt" ]
	[ "$(cat "$ROOT/workspace/keep/f.txt")" = v1 ]
	no_leftovers
}

@test "server errors: a failed upload or command is exit 5, the old tree stays, nothing is left" {
	local src="$BATS_TEST_TMPDIR/src"
	mkdir -p "$src"
	echo v1 >"$src/f.txt"
	run -0 pisb push box "$src" --to /workspace/keep
	echo v2 >"$src/f.txt"
	os_fault '{"fail":{"execd_upload":{"status":500,"count":1,"body":{"code":"RUNTIME_ERROR","message":"error opening destination file: no space left on device"}}}}'
	run -5 --separate-stderr pisb push box "$src" --to /workspace/keep
	[[ $stderr == *"push: upload the archive: 500 RUNTIME_ERROR: error opening destination file: no space left on device"* ]]
	[ "$(cat "$ROOT/workspace/keep/f.txt")" = v1 ]
	# the command that would unpack and swap never answers: the upload is removed
	os_fault '{"fail":{"execd_command":{"status":503,"count":1}}}'
	run -5 --separate-stderr pisb push box "$src" --to /workspace/keep
	[[ $stderr == *"push"*"503"* ]]
	[ "$(cat "$ROOT/workspace/keep/f.txt")" = v1 ]
	no_leftovers
	# pull: the download fails
	os_fault '{"fail":{"execd_download":{"status":500,"count":1}}}'
	run -5 --separate-stderr pisb pull box /workspace/keep "$BATS_TEST_TMPDIR/out"
	[[ $stderr == *"pull"*"500"* ]]
	[ -z "$(ls -A "$BATS_TEST_TMPDIR/out")" ]
	no_leftovers
	# the sandbox is gone: exit 5, fail closed
	os_admin POST "/_fake/sandboxes/$ID/expire" >/dev/null
	run -5 pisb push box "$src"
	run -5 pisb pull box /workspace "$BATS_TEST_TMPDIR/out2"
}

@test "unpacking fails in the sandbox mid-way: the old tree stays whole" {
	local src="$BATS_TEST_TMPDIR/src"
	mkdir -p "$src/a" "$src/z"
	echo v1 >"$src/a/f.txt"
	run -0 pisb push box "$src" --to /workspace/keep
	echo v2 >"$src/a/f.txt"
	head -c 2000000 /dev/urandom >"$src/z/big"
	# tar dies after writing part of the tree (a wrapper that kills it)
	mkdir -p "$ROOT/half"
	cat >"$ROOT/half/tar" <<-'SH'
	#!/bin/sh
	case " $* " in *" -x "*) /usr/bin/tar "$@" & p=$!; sleep 0.2; kill -9 $p 2>/dev/null; wait $p; exit 2;; esac
	exec /usr/bin/tar "$@"
	SH
	chmod 755 "$ROOT/half/tar"
	os_admin POST /_fake/faults '{"command_path":"/half:/usr/local/bin:/usr/bin:/bin"}' >/dev/null
	run -1 --separate-stderr pisb push box "$src" --to /workspace/keep
	[[ $stderr == *"unpacking the archive in the sandbox failed; nothing was replaced"* ]]
	[ "$(names keep)" = "a z" ]
	[ -z "$(ls -A "$ROOT/workspace/keep/z")" ]
	[ "$(cat "$ROOT/workspace/keep/a/f.txt")" = v1 ]
	no_leftovers
}

@test "an image with busybox alone: push and pull go through busybox tar and sha256sum" {
	require_cmd busybox
	local src="$BATS_TEST_TMPDIR/src" bb
	bb=$(command -v busybox)
	mkdir -p "$src/d/e" "$ROOT/bb"
	printf 'a\0b\r\n' >"$src/d/e/nul"
	head -c 300000 /dev/urandom >"$src/rand"
	chmod 750 "$src/rand"
	echo old >"$src/old"
	run -0 pisb push box "$src" --to /workspace/bb
	rm "$src/old"
	ln -s "$bb" "$ROOT/bb/busybox"
	for t in sh mkdir rm mv cat stat chmod chown cp; do ln -s busybox "$ROOT/bb/$t"; done
	os_admin POST /_fake/faults '{"command_path":"/bb"}' >/dev/null
	run -0 pisb exec box -- /bin/bash -c 'command -v tar sha256sum; true'
	[ -z "$output" ]
	run -0 pisb push box "$src" --to /workspace/bb --json
	jq -e '.files == 2' <<<"$output"
	[ "$(names bb)" = "d rand" ]
	cmp "$src/rand" "$ROOT/workspace/bb/rand"
	[ "$(stat -c %a "$ROOT/workspace/bb/rand")" = 750 ]
	run -0 pisb pull box /workspace/bb "$BATS_TEST_TMPDIR/back" --json
	jq -e '.files == 2 and .bytes == 300005' <<<"$output"
	diff -r "$src" "$BATS_TEST_TMPDIR/back"
	no_leftovers
}

@test "an image without tar or sha256sum: exit 5 with a clear message, nothing changed" {
	local src="$BATS_TEST_TMPDIR/src"
	mkdir -p "$src"
	echo v1 >"$src/f.txt"
	run -0 pisb push box "$src" --to /workspace/keep
	mkdir -p "$ROOT/img"
	for t in sh bash mkdir rm mv cat stat chmod chown cp; do
		p=$(command -v $t) && ln -s "$p" "$ROOT/img/$t"
	done
	os_admin POST /_fake/faults '{"command_path":"/img"}' >/dev/null
	echo v2 >"$src/f.txt"
	run -5 --separate-stderr pisb push box "$src" --to /workspace/keep
	[[ $stderr == *"push: tar is not installed in the sandbox (push and pull need tar and sha256sum inside the sandbox); nothing was changed"* ]]
	[ "$(cat "$ROOT/workspace/keep/f.txt")" = v1 ]
	run -5 --separate-stderr pisb pull box /workspace/keep "$BATS_TEST_TMPDIR/out"
	[[ $stderr == *"pull: tar is not installed in the sandbox"* ]]
	ln -s "$(command -v tar)" "$ROOT/img/tar"
	run -5 --separate-stderr pisb push box "$src" --to /workspace/keep
	[[ $stderr == *"sha256sum is not installed in the sandbox"* ]]
	[ "$(cat "$ROOT/workspace/keep/f.txt")" = v1 ]
	no_leftovers
}

@test "a target that cannot be renamed (a mount point, say) is replaced entry by entry, or left whole" {
	local src="$BATS_TEST_TMPDIR/src" mv
	mv=$(command -v mv)
	mkdir -p "$src/old-dir"
	echo v1 >"$src/f.txt"
	echo o >"$src/old-dir/o.txt"
	run -0 pisb push box "$src" --to /workspace/keep
	# the sandbox's mv cannot move the target itself, nor (second round) a new entry named zz
	mkdir -p "$ROOT/busy"
	cat >"$ROOT/busy/mv" <<-SH
	#!/bin/sh
	[ "\$2" = /workspace/keep ] && { echo "mv: cannot move '\$2': Device or resource busy" >&2; exit 1; }
	case "\$2" in *pisb-push-*/zz) [ -e /busy/fail-zz ] && { echo "mv: cannot move '\$2': Input/output error" >&2; exit 1; };; esac
	exec $mv "\$@"
	SH
	chmod 755 "$ROOT/busy/mv"
	os_admin POST /_fake/faults '{"command_path":"/busy:/usr/local/bin:/usr/bin:/bin"}' >/dev/null
	rm -r "$src/old-dir"
	echo v2 >"$src/f.txt"
	mkdir -p "$src/zz"
	echo z >"$src/zz/z.txt"
	run -0 pisb push box "$src" --to /workspace/keep
	[ "$(names keep)" = "f.txt zz" ]
	[ "$(cat "$ROOT/workspace/keep/f.txt")" = v2 ]
	no_leftovers
	# a failure half-way through moving the new entries in puts the old ones back
	: >"$ROOT/busy/fail-zz"
	echo v3 >"$src/f.txt"
	echo a >"$src/a.txt"
	run -1 --separate-stderr pisb push box "$src" --to /workspace/keep
	[[ $stderr == *"cannot move the new entries into '/workspace/keep'; the old ones are back"* ]]
	[ "$(names keep)" = "f.txt zz" ]
	[ "$(cat "$ROOT/workspace/keep/f.txt")" = v2 ]
	no_leftovers
}

@test "push refuses the sandbox's root (also spelt with ..) and a target that is a file" {
	mkdir -p "$BATS_TEST_TMPDIR/src"
	run -2 --separate-stderr pisb push box "$BATS_TEST_TMPDIR/src" --to /
	[[ $stderr == *"refusing to replace the sandbox's root directory"* ]]
	run -2 --separate-stderr pisb push box "$BATS_TEST_TMPDIR/src" --to ..
	[[ $stderr == *"refusing to replace the sandbox's root directory"* ]]
	run -2 pisb push box "$BATS_TEST_TMPDIR/src" --to /workspace/a/../..
	# '..' resolves by name: /workspace/sub/.. is the workspace
	pisb write box w.txt --content w
	run -0 pisb push box "$BATS_TEST_TMPDIR/src" --to sub/.. --json
	jq -e '.to == "/workspace"' <<<"$output"
	[ "$(names /workspace)" = "" ]
	pisb write box afile --content x
	run -1 --separate-stderr pisb push box "$BATS_TEST_TMPDIR/src" --to afile
	[[ $stderr == *"'/workspace/afile' exists and is not a directory"* ]]
	[ "$(cat "$ROOT/workspace/afile")" = x ]
	no_leftovers
}

@test "logs of an opensandbox sandbox: pisb's remote log, with the setup output" {
	run -0 pisb logs box
	[[ $output == *"created sandbox $(os_sid box)"* ]]
	[[ $output == *"is ready"* ]]
	run -0 pisb logs box --json --lines 1
	jq -e '.lines == 1 and (.content | test("is ready")) and .truncated == false' <<<"$output"
	run -1 --separate-stderr pisb logs box web
	[[ $stderr == *"has no services"* ]]
	os_config "$BATS_TEST_TMPDIR/s.yaml" "  image: python:3.11"
	echo "setup:" >>"$BATS_TEST_TMPDIR/s.yaml"
	echo "  - echo hello-from-setup" >>"$BATS_TEST_TMPDIR/s.yaml"
	run -0 pisb create withsetup -f "$BATS_TEST_TMPDIR/s.yaml"
	run -0 pisb logs withsetup
	[[ $output == *"setup[0]: echo hello-from-setup"* ]]
	[[ $output == *"hello-from-setup"$'\n'* ]]
	# the server down: still readable
	os_fake_stop
	run -0 pisb logs withsetup
	[[ $output == *"hello-from-setup"* ]]
}
