#!/usr/bin/env bats
# The project on the drivers whose workspace is not a local disk:
# opensandbox (the copy pushed in, the workspace read back as one tar
# archive that the host parses as data, never extracts or runs) against
# the fake OpenSandbox server, and sbx (its shared workspace directory)
# against the fake sbx CLI.  create --project, diff, apply, sync.
load helpers
load fakes/opensandbox

setup() {
	pisb_test_setup
	require_cmd jq
	require_cmd git
	require_cmd python3
	R=$BATS_TEST_TMPDIR/repo
	export HOME=$BATS_TEST_TMPDIR/home
	mkdir -p "$HOME"
}

teardown() {
	for n in $(pisb list -q 2>/dev/null); do pisb destroy "$n" --confirm "$n" >/dev/null 2>&1 || true; done
	os_fake_stop
}

g() { git -C "$R" -c user.email=t@example.com -c user.name=t "$@"; }

# tracked (one edited since the commit), untracked, ignored, excluded by
# .git/info/exclude, executable, a symlink, binary, CRLF and secrets
make_repo() {
	mkdir -p "$R/src"
	git -C "$R" init -q
	printf 'alpha\nbeta\n' >"$R/a.txt"
	printf 'int main(void)\n{\n\treturn 0;\n}\n' >"$R/src/main.c"
	printf '#!/bin/sh\necho run\n' >"$R/run.sh"
	chmod 755 "$R/run.sh"
	printf 'one\r\ntwo\r\n' >"$R/crlf.txt"
	printf '\000\001bin' >"$R/blob.bin"
	ln -s a.txt "$R/link"
	printf '*.log\n' >"$R/.gitignore"
	printf 'TOKEN=host-secret\n' >"$R/.env"
	g add -A
	g commit -qm init
	printf 'alpha\nBETA\n' >"$R/a.txt"
	printf 'untracked\n' >"$R/u.txt"
	printf 'ignored\n' >"$R/debug.log"
	printf 'scratch.txt\n' >>"$R/.git/info/exclude"
	printf 'private notes\n' >"$R/scratch.txt"
}

os_box() {
	os_fake_start
	os_config "$BATS_TEST_TMPDIR/r.yaml"
	run -0 --separate-stderr pisb create box -f "$BATS_TEST_TMPDIR/r.yaml" --project "$R"
}

sbx_box() {
	export PATH="$TOP/tests/fakes:$PATH"
	printf 'driver: sbx\n' >"$BATS_TEST_TMPDIR/s.yaml"
	run -0 --separate-stderr pisb create box -f "$BATS_TEST_TMPDIR/s.yaml" --project "$R"
}

# the files of the workspace (without .git), sorted
ws_files() {
	run -0 pisb exec box -- sh -c 'find . -path ./.git -prune -o \( -type f -o -type l \) -print | LC_ALL=C sort'
}

edits='printf "alpha\nBETA\ngamma\n" > a.txt
printf "int main(void)\n{\n\treturn 1;\n}\n" > src/main.c
rm crlf.txt
printf "fresh\n" > added.txt
chmod 644 run.sh
ln -sfn src link
printf "noise\n" > more.log'

check_copy() {
	ws_files
	[ "$output" = "$(printf '%s\n' ./.gitignore ./a.txt ./blob.bin ./crlf.txt ./link ./run.sh ./src/main.c ./u.txt)" ]
	run -0 pisb read box a.txt
	[ "$output" = $'alpha\nBETA' ]
	pisb read box blob.bin --raw >"$BATS_TEST_TMPDIR/blob"
	cmp "$BATS_TEST_TMPDIR/blob" "$R/blob.bin"
	run -0 pisb stat box run.sh --json
	jq -e '.mode == "0755"' <<<"$output"
	run -0 pisb exec box -- readlink link
	[ "$output" = a.txt ]
	jq -e '.files == 8 and .secretsHidden == 1 and .mode == "copy"' "$PI_SANDBOX_HOME/instances/box/project/info.json"
	# inside, git's one commit is the base, and nothing changed since
	run -0 pisb exec box -- git log --format=%s
	[ "$output" = "pisb: the project as copied from the host" ]
	run -0 pisb exec box -- git status --porcelain
	[ "$output" = "" ]
	run -0 --separate-stderr pisb diff box --json
	jq -e '.changes == [] and .unchanged == 8' <<<"$output"
}

check_diff_apply() {
	cp -a "$R" "$BATS_TEST_TMPDIR/base"
	rm -rf "$BATS_TEST_TMPDIR/base/.git"
	cp -a "$BATS_TEST_TMPDIR/base" "$BATS_TEST_TMPDIR/after"
	(cd "$BATS_TEST_TMPDIR/after" && sh -c "$edits")
	run -0 pisb exec box --sh "$edits"
	run -0 --separate-stderr pisb diff box --json
	js=$output
	jq -e '[.changes[] | [.path, .status]] == [["a.txt","modified"],["added.txt","added"],["crlf.txt","deleted"],
	       ["link","modified"],["run.sh","modified"],["src/main.c","modified"]]' <<<"$js"
	jq -e '.changes[] | select(.path == "run.sh") | .oldMode == 33261 and .newMode == 33188' <<<"$js"
	jq -e '.changes[] | select(.path == "link") | .newType == "symlink"' <<<"$js"
	run -0 --separate-stderr pisb diff box
	ours=$output
	for f in a.txt src/main.c; do
		run -1 git diff --no-index "$BATS_TEST_TMPDIR/base/$f" "$BATS_TEST_TMPDIR/after/$f"
		want=$(sed -n '/^@@/,$p' <<<"$output")
		got=$(awk -v f="diff --git a/$f b/$f" '$0 == f {on=1; next} /^diff --git/ {on=0} on' <<<"$ours" | sed -n '/^@@/,$p')
		[ "$got" = "$want" ] || { echo "$f: got"; echo "$got"; echo "want"; echo "$want"; false; }
	done
	# the ignored file only with --all
	run -0 --separate-stderr pisb diff box --all --json
	jq -e '[.changes[].path] | index("more.log")' <<<"$output"
	g add -A
	g commit -qm 'host state at create'
	run -0 --separate-stderr pisb apply box --json
	jq -e '.written == 5 and .deleted == 1' <<<"$output"
	run -0 git -C "$R" status --porcelain
	[ "$output" = "$(printf '%s\n' ' M a.txt' ' D crlf.txt' ' M link' ' M run.sh' ' M src/main.c' '?? added.txt')" ]
	[ "$(readlink "$R/link")" = src ]
	[ "$(stat -c %a "$R/run.sh")" = 644 ]
	cmp "$R/src/main.c" "$BATS_TEST_TMPDIR/after/src/main.c"
	[ ! -e "$R/more.log" ]
	# the base moved: nothing left
	run -0 --separate-stderr pisb diff box --json
	jq -e '.changes == []' <<<"$output"
}

check_sync() {
	printf 'host edit\n' >"$R/u.txt"
	printf 'new on host\n' >"$R/h.txt"
	run -0 pisb exec box --sh 'printf "sandbox edit\n" > a.txt'
	printf 'host edit of a\n' >"$R/a.txt"
	run -4 --separate-stderr pisb sync box --json
	jq -e '.written == 2 and .conflicts == ["a.txt"]' <<<"$output"
	run -0 pisb read box h.txt
	[ "$output" = "new on host" ]
	run -0 pisb read box u.txt
	[ "$output" = "host edit" ]
	# the sandbox's own change was kept
	run -0 pisb read box a.txt
	[ "$output" = "sandbox edit" ]
	run -0 --separate-stderr pisb diff box --json
	jq -e '[.changes[] | [.path, .conflict]] == [["a.txt", true]]' <<<"$output"
}

@test "opensandbox: create --project pushes the selection (no ignored, excluded or secret files), verified, git inside" {
	make_repo
	os_box
	check_copy
	# the fake's own view of the workspace agrees
	ROOT=$(os_admin GET "/_fake/sandboxes/$(os_sid box)" | jq -r .root)
	[ ! -e "$ROOT/workspace/.env" ]
	[ ! -e "$ROOT/workspace/scratch.txt" ]
	[ ! -e "$ROOT/workspace/debug.log" ]
	[ ! -e "$ROOT/workspace/.git/pisb-base" ]
	# nothing staged is left on the host
	[ -z "$(ls -A "$PI_SANDBOX_HOME/instances/box/project" | grep -v '^base$\|^info.json$')" ]
}

@test "opensandbox: diff reads the remote workspace; apply writes the host project; the base moves" {
	make_repo
	os_box
	check_diff_apply
}

@test "opensandbox: sync writes host edits in, keeps the sandbox's own, lists conflicts (exit 4)" {
	make_repo
	os_box
	check_sync
}

@test "opensandbox: a stopped or paused sandbox: diff and apply exit 5, say it is not running, resume nothing, write nothing" {
	make_repo
	os_box
	sid=$(os_sid box)
	run -0 pisb exec box --sh 'printf "sandbox\n" > a.txt'
	run -0 --separate-stderr pisb stop box
	[ "$(os_state "$sid")" = Paused ]
	run -5 --separate-stderr pisb diff box
	[ "$stderr" = "fatal: sandbox 'box' is not running (driver opensandbox: its workspace is read from inside it, and diff starts nothing; start it with 'pisb start box')" ]
	# --json: the error on stderr only (an object on stdout is --json-errors')
	run -5 --separate-stderr pisb apply box --json
	[ -z "$output" ]
	[[ $stderr == "fatal: sandbox 'box' is not running"* ]]
	[ "$(os_state "$sid")" = Paused ]
	[ "$(cat "$R/a.txt")" = $'alpha\nBETA' ]
	# paused on the server behind pisb's back (another client): the same
	run -0 --separate-stderr pisb start box
	run -0 os_api POST "/sandboxes/$sid/pause"
	for i in $(seq 100); do [ "$(os_state "$sid")" = Paused ] && break; sleep 0.05; done
	[ "$(os_state "$sid")" = Paused ]
	run -5 --separate-stderr pisb apply box
	[ "$stderr" = "fatal: sandbox 'box': the server has it Paused, not running (start it with 'pisb start box')" ]
	[ "$(os_state "$sid")" = Paused ]
	[ "$(cat "$R/a.txt")" = $'alpha\nBETA' ]
	# started again, the change is there and applies
	run -0 --separate-stderr pisb start box
	run -0 --separate-stderr pisb apply box --json
	jq -e '.written == 1' <<<"$output"
	[ "$(cat "$R/a.txt")" = sandbox ]
}

@test "opensandbox: a hostile workspace archive: links out are shown never followed, bad names refused, nothing written" {
	make_repo
	os_box
	ROOT=$(os_admin GET "/_fake/sandboxes/$(os_sid box)" | jq -r .root)
	# a symlink out is data: shown, and apply refuses to write it
	run -0 pisb exec box -- ln -sfn /etc/shadow link
	run -0 --separate-stderr pisb diff box --json
	jq -e '.changes[] | select(.path == "link") | .newType == "symlink"' <<<"$output"
	[[ $output != *"root:"* ]]
	run -1 --separate-stderr pisb apply box
	[[ $stderr == *"points outside the project"* ]]
	[ "$(readlink "$R/link")" = a.txt ]
	# the sandbox's own tar (first on its PATH) writes crafted archives
	mkdir -p "$ROOT/evil"
	cat >"$ROOT/evil/tar" <<-'PY'
	#!/usr/bin/env python3
	import io, sys, tarfile
	a = sys.argv[sys.argv.index("-f") + 1]
	kind = open("/evil/kind").read().strip()
	def add(t, name, data=b"x", typ=tarfile.REGTYPE, link=""):
	    ti = tarfile.TarInfo(name)
	    ti.type, ti.linkname, ti.mode = typ, link, 0o644
	    ti.size = len(data) if typ == tarfile.REGTYPE else 0
	    t.addfile(ti, io.BytesIO(data) if typ == tarfile.REGTYPE else None)
	with tarfile.open(a, "w", format=tarfile.PAX_FORMAT) as t:
	    add(t, "./a.txt", b"evil a\n")
	    if kind == "absolute":
	        add(t, "/tmp/pisb-evil-abs", b"evil")
	    elif kind == "dotdot":
	        add(t, "./src/../../evil", b"evil")
	    elif kind == "hardlink":
	        add(t, "./evil", typ=tarfile.LNKTYPE, link="/etc/shadow")
	    elif kind == "gitdir":
	        add(t, "./.git/hooks/post-checkout", b"#!/bin/sh\ntouch /tmp/pisb-evil-hook\n")
	PY
	chmod 755 "$ROOT/evil/tar"
	os_admin POST /_fake/faults '{"command_path":"/evil:/usr/local/bin:/usr/bin:/bin"}' >/dev/null
	cp -a "$R" "$BATS_TEST_TMPDIR/before"
	for kind in absolute dotdot hardlink; do
		echo "$kind" >"$ROOT/evil/kind"
		run -1 --separate-stderr pisb apply box --force
		[[ $stderr == *"refused"* ]] || [[ $stderr == *"does not hold"* ]] || { echo "$kind: $stderr"; false; }
		diff -r "$BATS_TEST_TMPDIR/before" "$R"
		[ ! -e /tmp/pisb-evil-abs ]
		[ ! -e "$BATS_TEST_TMPDIR/evil" ]
	done
	# entries under .git are left out, never written to the host
	echo gitdir >"$ROOT/evil/kind"
	run -0 --separate-stderr pisb diff box --json
	jq -e '[.changes[].path] | index(".git/hooks/post-checkout") == null' <<<"$output"
	run -0 --separate-stderr pisb apply box --force
	[ ! -e "$R/.git/hooks/post-checkout" ]
	[ ! -e /tmp/pisb-evil-hook ]
	[ "$(cat "$R/a.txt")" = "evil a" ]
}

@test "sbx: create --project copies into the shared workspace; diff, apply and sync work on it" {
	make_repo
	sbx_box
	check_copy
	check_diff_apply
	check_sync
}

@test "the driver matrix lists diff for opensandbox and sbx" {
	run -0 pisb drivers --json
	jq -e '.drivers[] | select(.name == "opensandbox") | .verbs.diff.supported' <<<"$output"
	jq -e '.drivers[] | select(.name == "sbx") | .verbs.diff.supported' <<<"$output"
}
