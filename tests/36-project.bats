#!/usr/bin/env bats
# The user's project in the sandbox: create --project (copy mode), pisb
# diff and pisb apply, on real git repositories; attacks on apply.
load helpers

setup_file() {
	unshare -Ur true 2>/dev/null || skip "machine lacks: unprivileged user namespaces"
	command -v git >/dev/null || skip "machine lacks: git"
	PJ_TMP=$(mktemp -d /tmp/pisb-pj36.XXXXXX)
	chmod 755 "$PJ_TMP"
	export PJ_TMP
}

teardown_file() {
	for n in $(PI_SANDBOX_HOME="$PJ_TMP/state" pisb list --json 2>/dev/null | jq -r '.[].name'); do
		PI_SANDBOX_HOME="$PJ_TMP/state" pisb destroy "$n" --confirm "$n" >/dev/null 2>&1 || true
	done
	rm -rf "$PJ_TMP"
}

setup() {
	pisb_test_setup
	export PI_SANDBOX_HOME="$PJ_TMP/state"
	N=p$BATS_SUITE_TEST_NUMBER
	R=$BATS_TEST_TMPDIR/repo
}

teardown() {
	[ -z "${RACE_PID:-}" ] || race_end
	pisb destroy "$N" --confirm "$N" >/dev/null 2>&1 || true
}

g() { git -C "$R" -c user.email=t@example.com -c user.name=t "$@"; }

# tracked (edited, deleted, renamed), untracked, ignored, binary,
# executable, symlink, CRLF, a non-UTF-8 name and secrets
make_repo() {
	mkdir -p "$R/src" "$R/keys"
	git -C "$R" init -q
	printf 'alpha\nbeta\ngamma\n' >"$R/a.txt"
	printf 'to be deleted\n' >"$R/gone.txt"
	printf 'old name\n' >"$R/old.txt"
	printf 'int main(void)\n{\n\treturn 0;\n}\n' >"$R/src/main.c"
	printf 'one\r\ntwo\r\n' >"$R/crlf.txt"
	printf '\000\001\002binary' >"$R/blob.bin"
	printf '#!/bin/sh\necho run\n' >"$R/run.sh"
	chmod 755 "$R/run.sh"
	ln -s a.txt "$R/link"
	printf 'latin1\n' >"$R/caf"$'\xe9'".txt"
	printf '*.log\nbuild/\n' >"$R/.gitignore"
	printf 'TOKEN=host-secret\n' >"$R/.env"
	printf 'PRIVATE KEY\n' >"$R/keys/id_ed25519"
	printf 'ssh-ed25519 AAAA\n' >"$R/keys/id_ed25519.pub"
	printf 'CERT\n' >"$R/server.pem"
	g add -A
	g add -f .env
	g commit -qm init
	printf 'alpha\nBETA\ngamma\n' >"$R/a.txt"         # edited, not committed
	rm "$R/gone.txt"                                  # deleted in the tree
	g mv old.txt new.txt                              # renamed
	printf 'untracked\n' >"$R/u.txt"
	printf 'ignored\n' >"$R/debug.log"
	mkdir -p "$R/build" && printf 'out\n' >"$R/build/out.o"
}

@test "create --project copies tracked and untracked files, never ignored ones, .git or secrets" {
	make_repo
	run -0 --separate-stderr pisb create "$N" --project "$R"
	run -0 pisb exec "$N" -- sh -c 'find . -path ./.git -prune -o \( -type f -o -type l \) -print | LC_ALL=C sort'
	want=$(printf '%s\n' ./.gitignore ./.sandbox.yaml ./a.txt ./blob.bin "./caf"$'\xe9'".txt" ./crlf.txt \
		./keys/id_ed25519.pub ./link ./new.txt ./run.sh ./src/main.c ./u.txt | LC_ALL=C sort)
	[ "$output" = "$want" ]
	# the working tree's content, byte for byte, and modes and links
	run -0 pisb read "$N" a.txt
	[ "$output" = $'alpha\nBETA\ngamma' ]
	pisb read "$N" crlf.txt --raw >"$BATS_TEST_TMPDIR/crlf"
	cmp "$BATS_TEST_TMPDIR/crlf" "$R/crlf.txt"
	pisb read "$N" blob.bin --raw >"$BATS_TEST_TMPDIR/blob"
	cmp "$BATS_TEST_TMPDIR/blob" "$R/blob.bin"
	run -0 pisb stat "$N" run.sh --json
	jq -e '.mode == "0755"' <<<"$output"
	run -0 pisb stat "$N" link --json
	jq -e '.type == "symlink" and .target == "a.txt"' <<<"$output"
	# the base: one entry per copied file, with the host file's SHA-256
	base=$PI_SANDBOX_HOME/instances/$N/project/base
	[ "$(stat -c %a "$base")" = 600 ]
	sha=$(sha256sum "$R/a.txt" | cut -d' ' -f1)
	tr '\0' '\n' <"$base" | grep -q "^f 644 17 .* $sha\$"
	jq -e '.files == 11 and .secretsHidden == 3 and .mode == "copy"' "$PI_SANDBOX_HOME/instances/$N/project/info.json"
	# inside, a git repository whose one commit is the base, and clean
	run -0 pisb exec "$N" -- git log --format=%s
	[ "$output" = "pisb: the project as copied from the host" ]
	run -0 pisb exec "$N" -- git status --porcelain
	[ "$output" = "" ]
	run -0 pisb exec "$N" -- git ls-files
	[[ $output != *".sandbox.yaml"* ]]
	# nothing of the host's .git came along
	run -0 pisb exec "$N" -- git remote
	[ "$output" = "" ]
}

@test "create --project of 2,000 files (copied in threads): every file, mode and digest as on the host, nothing changed" {
	mkdir -p "$R"
	git -C "$R" init -q
	for d in $(seq -w 0 39); do
		mkdir -p "$R/d$d/sub"
		for f in $(seq -w 0 24); do
			printf 'file %s/%s\n' "$d" "$f" >"$R/d$d/f$f.txt"
			printf 'sub %s/%s\n' "$d" "$f" >"$R/d$d/sub/s$f.txt"
		done
		chmod 755 "$R/d$d/f00.txt"
	done
	g add -A && g commit -qm many
	pisb create "$N" --project "$R" >/dev/null 2>&1
	jq -e '.files == 2000' "$PI_SANDBOX_HOME/instances/$N/project/info.json"
	run -0 pisb exec "$N" --sh 'find . -path ./.git -prune -o -path ./.sandbox.yaml -prune -o -type f -printf "%P %m\n" | LC_ALL=C sort'
	want=$(cd "$R" && find . -path ./.git -prune -o -type f -printf '%P %m\n' | LC_ALL=C sort)
	diff <(echo "$output") <(echo "$want")
	run -0 pisb exec "$N" --sh 'find . -path ./.git -prune -o -path ./.sandbox.yaml -prune -o -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum'
	want=$(cd "$R" && find . -path ./.git -prune -o -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum)
	diff <(echo "$output") <(echo "$want")
	run -0 --separate-stderr pisb diff "$N" --json
	jq -e '.changes == [] and .unchanged == 2000' <<<"$output"
	run -0 pisb exec "$N" -- git status --porcelain
	[ "$output" = "" ]
}

@test "create --project: the base's blobs come in the host's pack; git inside indexes it, fsck is clean, the tree is the host's" {
	mkdir -p "$R/src/deep"
	git -C "$R" init -q
	printf 'one\n' >"$R/a.txt"
	: >"$R/empty"
	head -c 200000 /dev/urandom >"$R/src/big.bin"   # more than one stored block
	head -c 1100000 /dev/urandom >"$R/src/huge.bin" # over 1 MiB: left to git
	printf '#!/bin/sh\n' >"$R/src/run.sh"
	chmod 755 "$R/src/run.sh"
	printf 'deep\n' >"$R/src/deep/d.c"
	ln -s ../a.txt "$R/src/link"
	g add -A && g commit -qm base
	pisb create "$N" --project "$R" >/dev/null 2>&1
	run -0 pisb exec "$N" --sh 'git count-objects -v'
	[[ $output == *$'in-pack: 6\n'* ]]
	[[ $output == *$'packs: 1\n'* ]]
	run -0 pisb exec "$N" --sh 'git fsck --strict --no-progress 2>&1'
	[ "$output" = "" ]
	run -0 pisb exec "$N" --sh 'git cat-file -p HEAD:src/huge.bin | cmp - src/huge.bin && echo same'
	[ "$output" = same ]
	# the same blobs and tree as the host's own commit of the same files
	run -0 pisb exec "$N" -- git rev-parse 'HEAD^{tree}'
	[ "$output" = "$(git -C "$R" rev-parse 'HEAD^{tree}')" ]
	run -0 pisb exec "$N" -- git status --porcelain
	[ "$output" = "" ]
	run -0 pisb exec "$N" --sh 'ls .git/pisb-base .git/objects/pack/tmp_pack_pisb 2>&1 || true'
	[[ $output != *pisb-base$'\n'* ]]
	[[ $output == *"No such file"*"No such file"* ]]
}

@test "secrets are copied only when the config opts in (project.secrets: include)" {
	make_repo
	printf 'project:\n  secrets: include\n  exclude: ["src/**"]\n' >"$BATS_TEST_TMPDIR/s.yaml"
	run -0 --separate-stderr pisb create "$N" -f "$BATS_TEST_TMPDIR/s.yaml" --project "$R"
	run -0 pisb read "$N" .env
	[ "$output" = "TOKEN=host-secret" ]
	run -0 pisb read "$N" keys/id_ed25519
	run -3 pisb stat "$N" src/main.c
	# a config that names an unknown mode is refused with its key path
	printf 'project:\n  mode: mirror\n' >"$BATS_TEST_TMPDIR/bad.yaml"
	run -2 --separate-stderr pisb create x"$N" -f "$BATS_TEST_TMPDIR/bad.yaml" --project "$R"
	[[ $stderr == *"project.mode: must be copy, bind, bind-ro or none"* ]]
}

@test "a copy leaves out every file under a directory named like a secret, as bind hides it whole" {
	mkdir -p "$R/certs.pem/deep" "$R/ok"
	printf 'CERT\n' >"$R/certs.pem/server"
	printf 'CERT2\n' >"$R/certs.pem/deep/chain"
	printf 'fine\n' >"$R/ok/file"
	run -0 --separate-stderr pisb create "$N" --project "$R"
	run -0 pisb exec "$N" -- sh -c 'find . -path ./.git -prune -o -type f -print | LC_ALL=C sort'
	[ "$output" = "$(printf '%s\n' ./.sandbox.yaml ./ok/file)" ]
	jq -e '.files == 1 and .secretsHidden == 2' "$PI_SANDBOX_HOME/instances/$N/project/info.json"
}

# The sandbox's edits, made the same way on a host copy of the base.
edits='printf "alpha\nBETA\ngamma\ndelta\n" > a.txt
printf "int main(void)\n{\n\tint x = 1;\n\treturn x;\n}\n" > src/main.c
printf "one\r\nTWO\r\nthree" > crlf.txt
rm new.txt
printf "fresh\n" > added.txt
chmod 644 run.sh
printf "\000changed" > blob.bin
ln -sfn src link
printf "noise\n" > more.log'

@test "diff: the patches equal git diff --no-index for text; statuses, binary, modes, links" {
	make_repo
	pisb create "$N" --project "$R" >/dev/null 2>&1
	cp -a "$R" "$BATS_TEST_TMPDIR/base"
	rm -rf "$BATS_TEST_TMPDIR/base/.git"
	cp -a "$BATS_TEST_TMPDIR/base" "$BATS_TEST_TMPDIR/after"
	(cd "$BATS_TEST_TMPDIR/after" && sh -c "$edits")
	run -0 pisb exec "$N" --sh "$edits"
	run -0 --separate-stderr pisb diff "$N"
	ours=$output
	for f in a.txt src/main.c crlf.txt; do
		run -1 git diff --no-index "$BATS_TEST_TMPDIR/base/$f" "$BATS_TEST_TMPDIR/after/$f"
		want=$(sed -n '/^@@/,$p' <<<"$output")
		got=$(awk -v f="diff --git a/$f b/$f" '$0 == f {on=1; next} /^diff --git/ {on=0} on' <<<"$ours" | sed -n '/^@@/,$p')
		[ "$got" = "$want" ] || { echo "$f: got"; echo "$got"; echo "want"; echo "$want"; false; }
	done
	[[ $ours == *"Binary files a/blob.bin and b/blob.bin differ"* ]]
	[[ $ours == *$'diff --git a/run.sh b/run.sh\nold mode 100755\nnew mode 100644'* ]]
	[[ $ours == *$'deleted file mode 100644\n--- a/new.txt\n+++ /dev/null'* ]]
	run -0 --separate-stderr pisb diff "$N" --json
	js=$output
	jq -e '[.changes[] | [.path, .status]] == [["a.txt","modified"],["added.txt","added"],["blob.bin","modified"],
	       ["crlf.txt","modified"],["link","modified"],["new.txt","deleted"],["run.sh","modified"],["src/main.c","modified"]]' <<<"$js"
	jq -e '.changes[] | select(.path == "blob.bin") | .binary' <<<"$js"
	jq -e '.changes[] | select(.path == "link") | .oldType == "symlink" and .newType == "symlink"' <<<"$js"
	jq -e '.changes[] | select(.path == "run.sh") | .oldMode == 33261 and .newMode == 33188' <<<"$js"
	jq -e '.changes[] | select(.path == "a.txt") | .added == 1 and .conflict == false' <<<"$js"
	jq -e 'all(.changes[]; .patch | type == "string")' <<<"$js"
	# ignored files and .sandbox.yaml only with --all
	run -0 --separate-stderr pisb diff "$N" --all --json
	jq -e '[.changes[].path] | index("more.log") and index(".sandbox.yaml")' <<<"$output"
	# PATHs narrow it; --stat is git's
	run -0 --separate-stderr pisb diff "$N" src --stat
	[ "$output" = $' src/main.c | 3 ++-\n 1 file changed, 2 insertions(+), 1 deletion(-)' ]
	run -2 --separate-stderr pisb diff "$N" ../etc
}

@test "diff works on a stopped sandbox, the same as on a running one" {
	make_repo
	pisb create "$N" --project "$R" >/dev/null 2>&1
	pisb exec "$N" --sh "$edits"
	run -0 --separate-stderr pisb diff "$N" --json
	running=$output
	pisb stop "$N" >/dev/null
	run -0 --separate-stderr pisb diff "$N" --json
	[ "$output" = "$running" ]
	run -0 pisb inspect "$N" --json
	jq -e '.status == "stopped"' <<<"$output"
}

@test "apply writes the changes and deletions; git diff on the host shows exactly them; the base moves" {
	make_repo
	pisb create "$N" --project "$R" >/dev/null 2>&1
	g add -A && g commit -qm 'host state at create'
	pisb exec "$N" --sh "$edits"
	run -0 --separate-stderr pisb apply "$N" --dry-run
	run -0 git -C "$R" status --porcelain
	[ "$output" = "" ]
	run -0 --separate-stderr pisb apply "$N" --json
	jq -e '.written == 7 and .deleted == 1' <<<"$output"
	run -0 git -C "$R" status --porcelain
	[ "$output" = "$(printf '%s\n' ' M a.txt' ' M blob.bin' ' M crlf.txt' ' M link' ' D new.txt' ' M run.sh' ' M src/main.c' '?? added.txt')" ]
	run -0 cat "$R/added.txt"
	[ "$output" = fresh ]
	[ "$(readlink "$R/link")" = src ]
	[ "$(stat -c %a "$R/run.sh")" = 644 ]
	cmp <(printf 'one\r\nTWO\r\nthree') "$R/crlf.txt"
	# the same patch the sandbox's own git shows
	run -0 pisb exec "$N" -- git diff -- a.txt src/main.c
	want=$output
	run -0 git -C "$R" diff -- a.txt src/main.c
	[ "$(grep -v '^index ' <<<"$output")" = "$(grep -v '^index ' <<<"$want")" ]
	# nothing left to apply, and the ignored file stayed inside
	run -0 --separate-stderr pisb diff "$N" --json
	jq -e '.changes == []' <<<"$output"
	[ ! -e "$R/more.log" ]
}

@test "apply refuses a conflict with exit 4 and writes nothing; --force overwrites" {
	make_repo
	pisb create "$N" --project "$R" >/dev/null 2>&1
	pisb exec "$N" --sh 'printf "sandbox\n" > a.txt; printf "new\n" > fresh.txt; printf "TOKEN=sandbox\n" > .env'
	printf 'host edit\n' >"$R/a.txt"
	run -4 --separate-stderr pisb apply "$N"
	[[ $stderr == *"'.env' changed in '$R' since the base too: a conflict"* ]]
	[ "$(cat "$R/a.txt")" = "host edit" ]
	[ ! -e "$R/fresh.txt" ]
	# the hidden host secret is not overwritten by what the sandbox made
	[ "$(cat "$R/.env")" = "TOKEN=host-secret" ]
	run -0 --separate-stderr pisb diff "$N" --json
	jq -e '[.changes[] | select(.conflict) | .path] == [".env","a.txt"]' <<<"$output"
	run -0 --separate-stderr pisb apply "$N" -- fresh.txt
	[ "$(cat "$R/fresh.txt")" = new ]
	run -0 --separate-stderr pisb apply "$N" a.txt --force
	[ "$(cat "$R/a.txt")" = sandbox ]
}

# race_host MODE FILE: a host edit between apply's check and its renames,
# with no hook in pisb: a fanotify listener (permission events, as root)
# holds apply's first open of a staged .pisb-apply.* file in the project
# until it has changed FILE (MODE edit: appended to, through an fd opened
# before the listener started; MODE create: FILE made, from an O_TMPFILE
# opened before, linked in), then lets apply go on.  Prints "raced" into
# $BATS_TEST_TMPDIR/raced once it did.
race_host() {
	[ "$(id -u)" = 0 ] || skip "machine lacks: root for fanotify permission events"
	cat >"$BATS_TEST_TMPDIR/race.py" <<'PY'
import ctypes, os, struct, sys
mode, root, target, flag = sys.argv[1:5]
libc = ctypes.CDLL(None, use_errno=True)
if mode == "edit":
    hold = os.open(os.path.join(root, target), os.O_WRONLY | os.O_APPEND)
else:
    hold = os.open(root, os.O_TMPFILE | os.O_WRONLY, 0o644)
    os.write(hold, b"made by the host\n")
fan = libc.fanotify_init(0x04 | 0x01, os.O_RDONLY)      # FAN_CLASS_CONTENT | FAN_CLOEXEC
if fan < 0 or libc.fanotify_mark(fan, 0x01, 0x00010000 | 0x08000000, -100, root.encode()) < 0:
    sys.exit("fanotify: %s" % os.strerror(ctypes.get_errno()))  # FAN_MARK_ADD, FAN_OPEN_PERM | FAN_EVENT_ON_CHILD
open(flag + ".ready", "w").close()
done = False
while True:
    buf = os.read(fan, 4096)
    off = 0
    while off + 24 <= len(buf):
        ln, _, _, _, mask, fd, pid = struct.unpack_from("IBBHQii", buf, off)
        off += ln
        if fd < 0:
            continue
        name = os.path.basename(os.readlink("/proc/self/fd/%d" % fd))
        if not done and name.startswith(".pisb-apply."):
            if mode == "edit":
                os.write(hold, b"host edit while apply ran\n")
            else:
                if libc.linkat(hold, b"", -100, os.path.join(root, target).encode(), 0x1000) < 0:  # AT_EMPTY_PATH
                    sys.exit("linkat: %s" % os.strerror(ctypes.get_errno()))
            with open(flag, "w") as f:
                f.write("raced\n")
            done = True
        os.write(fan, struct.pack("iI", fd, 0x01))      # FAN_ALLOW
        os.close(fd)
PY
	# its output to a file, not to bats's descriptors (bats waits for them)
	python3 "$BATS_TEST_TMPDIR/race.py" "$1" "$R" "$2" "$BATS_TEST_TMPDIR/raced" \
		>"$BATS_TEST_TMPDIR/race.log" 2>&1 3>&- &
	RACE_PID=$!
	for _ in $(seq 100); do [ -e "$BATS_TEST_TMPDIR/raced.ready" ] && break; sleep 0.1; done
	[ -e "$BATS_TEST_TMPDIR/raced.ready" ] || { cat "$BATS_TEST_TMPDIR/race.log" >&2; false; }
}

race_end() {
	kill "$RACE_PID" 2>/dev/null || true
	wait "$RACE_PID" 2>/dev/null || true
	RACE_PID=
}

@test "apply rechecks each host file at its rename: an edit after the check is a conflict (exit 4), all undone, the edit kept" {
	make_repo
	pisb create "$N" --project "$R" >/dev/null 2>&1
	pisb exec "$N" --sh 'printf "sandbox a\n" > a.txt; printf "sandbox main\n" > src/main.c; printf "new\n" > fresh.txt'
	before_main=$(cat "$R/src/main.c")
	race_host edit a.txt
	run -4 --separate-stderr pisb apply "$N"
	race_end
	[ "$(cat "$BATS_TEST_TMPDIR/raced")" = raced ]
	[[ $stderr == *"'a.txt' changed in the project while apply ran (after its check): a conflict"* ]]
	[[ $stderr == *"nothing was written"* ]]
	# the host's edit is there, nothing of the sandbox's is
	[ "$(cat "$R/a.txt")" = $'alpha\nBETA\ngamma\nhost edit while apply ran' ]
	[ "$(cat "$R/src/main.c")" = "$before_main" ]
	[ ! -e "$R/fresh.txt" ]
	run -0 find "$R" -name '.pisb-apply.*'
	[ "$output" = "" ]
	# now diff sees the conflict
	run -0 --separate-stderr pisb diff "$N" --json
	jq -e '[.changes[] | select(.conflict) | .path] == ["a.txt"]' <<<"$output"
}

@test "apply rechecks at its rename: a host file made after the check where the sandbox adds one is a conflict, all undone" {
	make_repo
	pisb create "$N" --project "$R" >/dev/null 2>&1
	pisb exec "$N" --sh 'printf "sandbox a\n" > a.txt; printf "from the sandbox\n" > zz-new.txt'
	race_host create zz-new.txt
	run -4 --separate-stderr pisb apply "$N"
	race_end
	[ "$(cat "$BATS_TEST_TMPDIR/raced")" = raced ]
	[[ $stderr == *"'zz-new.txt' changed in the project while apply ran (after its check): a conflict"* ]]
	[ "$(cat "$R/zz-new.txt")" = "made by the host" ]
	# a.txt, renamed into place before zz-new.txt's turn, is undone
	[ "$(cat "$R/a.txt")" = $'alpha\nBETA\ngamma' ]
	run -0 find "$R" -name '.pisb-apply.*'
	[ "$output" = "" ]
}

@test "apply never writes outside the project: symlinks out, host symlinks on the way, a file where a directory is" {
	make_repo
	mkdir "$BATS_TEST_TMPDIR/outside"
	pisb create "$N" --project "$R" >/dev/null 2>&1
	# a symlink the sandbox planted that points out of the project
	pisb exec "$N" --sh 'ln -s /etc/passwd out; ln -s ../../x src/up'
	run -1 --separate-stderr pisb apply "$N" -- out
	[[ $stderr == *"'out': a symlink that points outside the project ('/etc/passwd')"* ]]
	[ ! -e "$R/out" ]
	[ ! -L "$R/out" ]
	run -1 --separate-stderr pisb apply "$N" -- src/up
	[ ! -L "$R/src/up" ]
	# the host's directory became a symlink out: nothing is written through it
	pisb exec "$N" --sh 'mkdir -p sub && printf "evil\n" > sub/x.txt'
	ln -s "$BATS_TEST_TMPDIR/outside" "$R/sub"
	run -1 --separate-stderr pisb apply "$N" -- sub
	[[ $stderr == *"'sub/x.txt': something on its way in the project is no directory"* ]]
	[ ! -e "$BATS_TEST_TMPDIR/outside/x.txt" ]
	# a file on the host where the sandbox has a directory
	pisb exec "$N" --sh 'mkdir -p u.dir && printf "y\n" > u.dir/y.txt'
	printf 'host file\n' >"$R/u.dir"
	run -1 --separate-stderr pisb apply "$N" -- u.dir
	[ "$(cat "$R/u.dir")" = "host file" ]
	# a directory on the host where the sandbox has a file
	pisb exec "$N" --sh 'printf "f\n" > d2'
	mkdir "$R/d2"
	run -4 --separate-stderr pisb apply "$N" -- d2
	run -1 --separate-stderr pisb apply "$N" d2 --force
	[[ $stderr == *"'d2' is a directory in the project"* ]]
	[ -d "$R/d2" ]
	# one bad change refuses the whole apply: nothing of the good ones either
	pisb exec "$N" --sh 'printf "good\n" > good.txt'
	run -1 --separate-stderr pisb apply "$N" --force
	[ ! -e "$R/good.txt" ]
}

@test "the reader has the sandbox's rights only: a planted symlink is shown, never followed" {
	make_repo
	printf 'host only\n' >"$BATS_TEST_TMPDIR/host-secret"
	chmod 600 "$BATS_TEST_TMPDIR/host-secret"
	pisb create "$N" --project "$R" >/dev/null 2>&1
	pisb exec "$N" -- ln -s "$BATS_TEST_TMPDIR/host-secret" leak
	run -0 --separate-stderr pisb diff "$N"
	[[ $output == *"+$BATS_TEST_TMPDIR/host-secret"* ]]
	[[ $output != *"host only"* ]]
	# a directory of the base swapped for a symlink to the host's: the
	# base's files under it are gone (their parent is opened without a
	# link), the link is a link
	pisb exec "$N" --sh "mv src src.old && ln -s $BATS_TEST_TMPDIR src"
	run -0 --separate-stderr pisb diff "$N" --json
	jq -e '[.changes[] | select(.path == "src/main.c") | .status] == ["deleted"]' <<<"$output"
	jq -e '[.changes[] | select(.path == "src") | .newType] == ["symlink"]' <<<"$output"
	[[ $output != *"host only"* ]]
	# the workspace itself swapped for a symlink to the host's path: the
	# sandbox's disk is never read through it, running or stopped
	pisb exec "$N" --sh "cd / && mv /workspace /ws.old && ln -s $BATS_TEST_TMPDIR /workspace"
	run --separate-stderr pisb diff "$N" --json
	[ "$status" -ne 0 ]
	[[ $output != *"host-secret"* ]]
	pisb stop "$N" >/dev/null
	run --separate-stderr pisb diff "$N" --json
	[ "$status" -ne 0 ]
	[[ $output != *"host-secret"* ]]
}

@test "kill -9 during apply leaves each file old or new, never partial" {
	make_repo
	pisb create "$N" --project "$R" >/dev/null 2>&1
	pisb exec "$N" --sh 'head -c 30000000 /dev/zero | tr "\0" "x" > a.txt'
	new=$(pisb exec "$N" -- sha256sum a.txt | cut -d' ' -f1)
	old=$(sha256sum "$R/a.txt" | cut -d' ' -f1)
	pisb apply "$N" >/dev/null 2>&1 &
	pid=$!
	sleep 0.3
	kill -9 "$pid" 2>/dev/null || true
	wait "$pid" || true
	got=$(sha256sum "$R/a.txt" | cut -d' ' -f1)
	[ "$got" = "$old" ] || [ "$got" = "$new" ]
}

# five changes in apply's order: a.txt (M), b/new.txt (A, in a new
# directory), c.big (A, 300 KB), new.txt (D), src/main.c (M)
five_changes() {
	make_repo
	pisb create "$N" --project "$R" >/dev/null 2>&1
	g add -A && g commit -qm 'host state at create'
	pisb exec "$N" --sh 'printf "sandbox a\n" > a.txt; mkdir b; printf "b\n" > b/new.txt;
		head -c 300000 /dev/zero > c.big; rm new.txt; printf "int x;\n" >> src/main.c'
	run -0 --separate-stderr pisb diff "$N" --json
	jq -e '[.changes[].path] == ["a.txt","b/new.txt","c.big","new.txt","src/main.c"]' <<<"$output"
}

# the checkout is as committed, nothing of apply's left; then apply works
as_it_was_then_apply() {
	run -0 git -C "$R" status --porcelain --ignored=no
	[ "$output" = "" ]
	[ ! -e "$R/b" ]
	[ ! -e "$R/c.big" ]
	run -0 find "$R" -name '.pisb-apply*'
	[ "$output" = "" ]
	# the base did not move: the same five changes, and now they apply
	run -0 --separate-stderr pisb diff "$N" --json
	jq -e '[.changes[].path] == ["a.txt","b/new.txt","c.big","new.txt","src/main.c"]' <<<"$output"
	run -0 --separate-stderr pisb apply "$N" --json
	jq -e '.written == 4 and .deleted == 1' <<<"$output"
	run -0 git -C "$R" status --porcelain
	[ "$output" = "$(printf '%s\n' ' M a.txt' ' D new.txt' ' M src/main.c' '?? b/' '?? c.big')" ]
	run -0 find "$R" -name '.pisb-apply*'
	[ "$output" = "" ]
}

@test "apply is all or nothing: staging the 3rd of 5 files fails (EFBIG), the checkout is as it was" {
	five_changes
	run -1 --separate-stderr bash -c 'trap "" XFSZ; ulimit -f 100; exec pisb apply "$1"' _ "$N"
	[[ $stderr == *"nothing was written: the project is as it was"*"stage 'c.big'"* ]]
	as_it_was_then_apply
}

@test "apply is all or nothing: renaming the 5th of 5 fails (EBUSY), the four before are undone" {
	require_root
	five_changes
	# src/main.c is a mount point (of the same content: no conflict)
	cp "$R/src/main.c" "$BATS_TEST_TMPDIR/same.c"
	run -1 --separate-stderr unshare -m sh -c 'mount --bind "$1/same.c" "$2/src/main.c" && exec pisb apply "$3"' _ \
		"$BATS_TEST_TMPDIR" "$R" "$N"
	[[ $stderr == *"nothing was written: the project is as it was"*"write 'src/main.c'"* ]]
	as_it_was_then_apply
}

@test "--project: a missing directory is exit 3; a sandbox without one has nothing to diff" {
	run -3 --separate-stderr pisb create "$N" --project "$BATS_TEST_TMPDIR/nope"
	[[ $stderr == *"--project '$BATS_TEST_TMPDIR/nope'"* ]]
	# (every driver of this build has the project: the vm driver's is tests/56)
	# a sandbox made without a project has nothing to diff
	pisb create "$N" >/dev/null 2>&1
	run -3 --separate-stderr pisb diff "$N"
	[[ $stderr == *"it has no project (create it with '--project DIR')"* ]]
}

@test "sync brings host edits since the base in, keeps the sandbox's own, lists conflicts (exit 4)" {
	make_repo
	pisb create "$N" --project "$R" >/dev/null 2>&1
	printf 'host edit\n' >"$R/a.txt"          # host only: comes in
	rm "$R/new.txt"                            # host only: deleted inside
	printf 'host crlf\n' >"$R/crlf.txt"        # both, differently: conflict
	mkdir -p "$R/docs" && printf 'doc\n' >"$R/docs/d.txt"   # added on the host
	printf 'same\n' >"$R/u.txt"                # both, the same way
	pisb exec "$N" --sh 'printf "box crlf\n" > crlf.txt; printf "mine\n" > src/main.c; printf "same\n" > u.txt'
	run -4 --separate-stderr pisb sync "$N" --json
	jq -e '.written == 2 and .deleted == 1 and .unchangedBoth == 1 and .conflicts == ["crlf.txt"]' <<<"$output"
	run -0 pisb read "$N" a.txt
	[ "$output" = "host edit" ]
	run -0 pisb read "$N" docs/d.txt
	[ "$output" = doc ]
	run -3 pisb stat "$N" new.txt
	run -0 pisb read "$N" crlf.txt
	[ "$output" = "box crlf" ]
	run -0 pisb read "$N" src/main.c
	[ "$output" = mine ]
	# the base moved: what sync brought in is no change any more
	run -0 --separate-stderr pisb diff "$N" --json
	jq -e '[.changes[].path] == ["crlf.txt","src/main.c"]' <<<"$output"
	jq -e '.changes[] | select(.path == "crlf.txt") | .conflict' <<<"$output"
	# a stopped sandbox is not written into
	pisb stop "$N" >/dev/null
	run -5 --separate-stderr pisb sync "$N"
}

# ---- project.mode bind / bind-ro (the local driver) ----

make_bound() {
	mkdir -p "$R/sub" "$R/d.pem"
	git -C "$R" init -q
	printf 'hi\n' >"$R/a.txt"
	printf 'TOKEN=host-secret\n' >"$R/.env"
	printf 'PRIVATE KEY\n' >"$R/sub/id_rsa"
	printf 'inside a secret dir\n' >"$R/d.pem/x"
	ln -s /etc/shadow "$R/shadow"
	printf 'project:\n  mode: %s\n' "$1" >"$BATS_TEST_TMPDIR/m.yaml"
	# a user's project: as root, the sandbox's root writes it as its owner
	# (a root-owned one is refused for bind)
	chown -R 4242:4343 "$R"
}

@test "bind: the host project is the workspace, live both ways; secrets and the host's /etc/shadow hidden; .git read-only" {
	make_bound bind
	run -0 --separate-stderr pisb create "$N" -f "$BATS_TEST_TMPDIR/m.yaml" --project "$R"
	run -0 pisb exec "$N" -- cat a.txt
	[ "$output" = hi ]
	# live: the host's edit shows inside at once, the sandbox's on the host
	printf 'from host\n' >"$R/h.txt"
	run -0 pisb exec "$N" -- cat h.txt
	[ "$output" = "from host" ]
	run -0 pisb exec "$N" -- sh -c 'printf "from sandbox\n" > s.txt'
	[ "$(cat "$R/s.txt")" = "from sandbox" ]
	# secrets: empty, read-only, not unmountable
	run -0 pisb exec "$N" -- cat .env sub/id_rsa
	[ "$output" = "" ]
	run -0 pisb exec "$N" -- ls -A d.pem
	[ "$output" = "" ]
	run -2 pisb exec "$N" -- sh -c 'echo x > .env'
	run -0 pisb exec "$N" -- sh -c 'umount .env 2>/dev/null; umount -l .env 2>/dev/null; cat .env'
	[ "$output" = "" ]
	[ "$(cat "$R/.env")" = "TOKEN=host-secret" ]
	# a symlink in the project resolves in the sandbox's view, not the host's
	run -0 pisb exec "$N" -- cat shadow
	[ "$output" = "" ]
	# .git read-only: no hook can be planted for the host's git
	run -1 --separate-stderr pisb exec "$N" -- sh -c 'touch .git/hooks/pre-commit'
	[[ $stderr == *"Read-only file system"* ]]
	run -32 --separate-stderr pisb exec "$N" -- mount -o remount,rw .git
	[[ $stderr == *"permission denied"* ]]
	[ ! -e "$R/.git/hooks/pre-commit" ]
	# outside the project: nothing of the host
	run -1 pisb exec "$N" -- test -e "$R"
	run -1 pisb exec "$N" -- test -e "$BATS_TEST_TMPDIR"
	# nothing to apply: the sandbox writes the checkout itself
	run -1 --separate-stderr pisb diff "$N"
	[[ $stderr == *"nothing to apply (bind mode)"* ]]
	run -1 --separate-stderr pisb apply "$N"
	[[ $stderr == *"nothing to apply (bind mode)"* ]]
	run -1 --separate-stderr pisb sync "$N"
	[[ $stderr == *"nothing to apply (bind mode)"* ]]
	jq -e '.mode == "bind"' "$PI_SANDBOX_HOME/instances/$N/project/info.json"
}

@test "attack: bind as root: what the sandbox's root writes is the project owner's, never host root's (setuid, setgid, chown, mknod)" {
	make_bound bind
	printf 'root file\n' >"$R/r.txt"
	chown 0:0 "$R/r.txt"
	run -0 --separate-stderr pisb create "$N" -f "$BATS_TEST_TMPDIR/m.yaml" --project "$R"
	# inside, the owner is root and host root's file is nobody's
	run -0 pisb exec "$N" -- stat -c '%u:%g %n' a.txt r.txt
	[ "$output" = $'0:0 a.txt
65534:65534 r.txt' ]
	run -0 pisb exec "$N" -- sh -c 'cp /bin/sh s && chown 0:0 s && chmod 6755 s && stat -c %a s'
	[ "$output" = 6755 ]
	# on the host: the owner's setuid and setgid, not root's
	[ "$(stat -c '%u:%g %a' "$R/s")" = "4242:4343 6755" ]
	run -1 pisb exec "$N" -- chown 1000 a.txt
	run -1 pisb exec "$N" -- mknod n c 1 3
	[ ! -e "$R/n" ]
	# host root's file: "other"'s rights only
	run -2 pisb exec "$N" -- sh -c 'echo x >> r.txt'
	[ "$(cat "$R/r.txt")" = "root file" ]
	run -0 pisb exec "$N" -- sh -c 'echo new > new.txt'
	[ "$(stat -c %u:%g "$R/new.txt")" = 4242:4343 ]
	# the owner changed to root while stopped: start refuses
	run -0 pisb stop "$N"
	chown 0 "$R"
	run -1 --separate-stderr pisb start "$N"
	[[ $stderr == *"owned by root"* ]]
}

@test "bind as root: a project owned by root is refused (2) and nothing is made; bind-ro takes it" {
	make_bound bind
	chown -R 0:0 "$R"
	run -2 --separate-stderr pisb create "$N" -f "$BATS_TEST_TMPDIR/m.yaml" --project "$R"
	[[ $stderr == *"'$R' is owned by root (uid 0, gid 0)"*"never as host root"* ]]
	[ ! -e "$PI_SANDBOX_HOME/instances/$N" ]
	printf 'project:\n  mode: bind-ro\n' >"$BATS_TEST_TMPDIR/m.yaml"
	run -0 --separate-stderr pisb create "$N" -f "$BATS_TEST_TMPDIR/m.yaml" --project "$R"
	run -0 pisb exec "$N" -- cat a.txt
	[ "$output" = hi ]
}

@test "bind: stop/start keeps the bind; a secret made on the host while stopped is hidden at start" {
	make_bound bind
	pisb create "$N" -f "$BATS_TEST_TMPDIR/m.yaml" --project "$R" >/dev/null 2>&1
	pisb stop "$N" >/dev/null
	printf 'NEW=secret\n' >"$R/.env.local"
	printf 'after stop\n' >"$R/b.txt"
	run -0 --separate-stderr pisb start "$N"
	run -0 pisb exec "$N" -- cat b.txt
	[ "$output" = "after stop" ]
	run -0 pisb exec "$N" -- cat .env.local
	[ "$output" = "" ]
	run -0 pisb exec "$N" -- sh -c 'echo again > s.txt'
	[ "$(cat "$R/s.txt")" = again ]
}

@test "bind-ro: writes fail EROFS inside, a remount read-write fails, the host still sees its files" {
	make_bound bind-ro
	run -0 --separate-stderr pisb create "$N" -f "$BATS_TEST_TMPDIR/m.yaml" --project "$R"
	run -2 --separate-stderr pisb exec "$N" -- sh -c 'echo x > a.txt'
	[[ $stderr == *"Read-only file system"* ]]
	run -2 --separate-stderr pisb exec "$N" -- sh -c 'echo x > new.txt'
	[[ $stderr == *"Read-only file system"* ]]
	run -32 --separate-stderr pisb exec "$N" -- mount -o remount,rw /workspace
	[[ $stderr == *"permission denied"* ]]
	run -2 --separate-stderr pisb exec "$N" -- sh -c 'echo x > a.txt'
	[[ $stderr == *"Read-only file system"* ]]
	[ "$(cat "$R/a.txt")" = hi ]
	[ ! -e "$R/new.txt" ]
	printf 'live\n' >"$R/h.txt"
	run -0 pisb exec "$N" -- cat h.txt
	[ "$output" = live ]
	run -0 pisb exec "$N" -- cat .env
	[ "$output" = "" ]
	run -1 --separate-stderr pisb diff "$N"
	[[ $stderr == *"nothing to apply (bind-ro mode)"* ]]
}

@test "bind: project.secrets: include shows the secrets" {
	make_bound bind
	printf 'project:\n  mode: bind\n  secrets: include\n' >"$BATS_TEST_TMPDIR/m.yaml"
	pisb create "$N" -f "$BATS_TEST_TMPDIR/m.yaml" --project "$R" >/dev/null 2>&1
	run -0 pisb exec "$N" -- cat .env
	[ "$output" = "TOKEN=host-secret" ]
}

# wait_covered NAME: NAME of the project has a mount on it inside (the
# watcher covers what appears on the host; bounded: 10 s)
wait_covered() {
	local i
	for i in $(seq 100); do
		pisb exec "$N" -- grep -q " /workspace/$1 " /proc/self/mountinfo && return 0
		sleep 0.1
	done
	echo "not covered inside: $1" >&2
	return 1
}

# dead PID: no such process, or only its zombie
# (reaped between the two looks: gone too)
dead() { [ ! -e "/proc/$1" ] || grep -qs '^State:[[:space:]]*Z' "/proc/$1/status" || [ ! -e "/proc/$1" ]; }

@test "bind: a secret or .git made on the host while the sandbox runs is covered, locked (create, written later, temp+rename, new directory, moved in, made readable, nested .git)" {
	make_bound bind
	run -0 --separate-stderr pisb create "$N" -f "$BATS_TEST_TMPDIR/m.yaml" --project "$R"
	# host root's directory the sandbox (and so its watcher) cannot read
	mkdir -m 700 "$R/priv"
	printf 'S\n' >"$R/priv/.env"
	printf 'NEW=1\n' >"$R/.env.local"
	: >"$R/.npmrc"
	printf 'machine h password p\n' >"$R/tmp.save"
	mv "$R/tmp.save" "$R/.netrc"
	mkdir -p "$R/certs/deep"
	printf 'KEY\n' >"$R/certs/deep/x.pem"
	printf 'plain\n' >"$R/certs/readme.txt"
	mkdir "$R/new.pem"
	printf 'inside a new secret dir\n' >"$R/new.pem/x"
	mkdir -p "$BATS_TEST_TMPDIR/outside/keys"
	printf 'MOVED\n' >"$BATS_TEST_TMPDIR/outside/keys/server.key"
	mv "$BATS_TEST_TMPDIR/outside" "$R/moved-in"
	git init -q "$R/sub2"
	for f in .env.local .npmrc .netrc certs/deep/x.pem new.pem moved-in/keys/server.key sub2/.git; do
		wait_covered "$f"
	done
	printf '//registry/:_authToken=x\n' >>"$R/.npmrc"
	# opened up while the sandbox runs: its secret is covered then
	chmod 755 "$R/priv"
	wait_covered priv/.env
	# empty inside, and root inside cannot take a cover off (nor the one under it)
	run -0 pisb exec "$N" -- sh -c 'for f in .env.local .npmrc .netrc certs/deep/x.pem moved-in/keys/server.key priv/.env; do
		umount "$f"; umount -l "$f"; umount "$f"; mount -o remount,rw "$f"; cat "$f"; done 2>/dev/null; echo "[end]"'
	[ "$output" = "[end]" ]
	run -2 pisb exec "$N" -- sh -c 'echo x > .netrc'
	run -2 pisb exec "$N" -- sh -c 'umount -l certs/deep/x.pem 2>/dev/null; echo x >> certs/deep/x.pem'
	run -0 pisb exec "$N" -- sh -c 'umount -l new.pem 2>/dev/null; ls -A new.pem'
	[ "$output" = "" ]
	# the new directory itself is live, only its secret covered
	run -0 pisb exec "$N" -- cat certs/readme.txt
	[ "$output" = plain ]
	# the nested .git: read-only, for good
	run -1 --separate-stderr pisb exec "$N" -- sh -c 'umount -l sub2/.git 2>/dev/null; touch sub2/.git/hooks/pre-commit'
	[[ $stderr == *"Read-only file system"* ]]
	[ ! -e "$R/sub2/.git/hooks/pre-commit" ]
	# the host's files are as the host wrote them
	[ "$(cat "$R/.netrc")" = "machine h password p" ]
	[ "$(cat "$R/.npmrc")" = "//registry/:_authToken=x" ]
}

@test "bind: a secret removed and made again, or saved over by a rename, is covered again" {
	make_bound bind
	run -0 --separate-stderr pisb create "$N" -f "$BATS_TEST_TMPDIR/m.yaml" --project "$R"
	run -0 pisb exec "$N" -- cat .env
	[ "$output" = "" ]
	# rm takes the cover along (Linux detaches a mount whose file goes)
	rm "$R/.env"
	printf 'TOKEN=again\n' >"$R/.env"
	wait_covered .env
	run -0 pisb exec "$N" -- sh -c 'umount -l .env 2>/dev/null; cat .env; echo "[end]"'
	[ "$output" = "[end]" ]
	# an editor's save: a temporary file renamed over the secret
	printf 'TOKEN=saved\n' >"$R/.env.tmp~"
	mv "$R/.env.tmp~" "$R/.env"
	wait_covered .env
	run -0 pisb exec "$N" -- sh -c 'umount -l .env 2>/dev/null; cat .env; echo "[end]"'
	[ "$output" = "[end]" ]
	[ "$(cat "$R/.env")" = "TOKEN=saved" ]
}

@test "bind: the project's watcher lives with the sandbox: gone after stop and after kill -9 of the controller; none without a project" {
	make_bound bind
	run -0 --separate-stderr pisb create "$N" -f "$BATS_TEST_TMPDIR/m.yaml" --project "$R"
	ctl=$(pisb inspect "$N" | jq -r .controller.pid)
	w=$(pgrep -x -P "$ctl" pisb-watch)
	[ -n "$w" ]
	run -0 pisb stop "$N"
	dead "$w"
	run -0 --separate-stderr pisb start "$N"
	ctl=$(pisb inspect "$N" | jq -r .controller.pid)
	w=$(pgrep -x -P "$ctl" pisb-watch)
	[ -n "$w" ]
	printf 'AFTER=restart\n' >"$R/.env.restart"
	wait_covered .env.restart
	run -0 pisb exec "$N" -- cat .env.restart
	[ "$output" = "" ]
	kill -9 "$ctl"
	for i in $(seq 100); do
		dead "$w" && break
		sleep 0.1
	done
	dead "$w"
	# a sandbox without a project has no watcher
	run -0 --separate-stderr pisb create x"$N"
	ctl=$(pisb inspect x"$N" | jq -r .controller.pid)
	run -1 pgrep -x -P "$ctl" pisb-watch
	pisb destroy x"$N" --confirm x"$N" >/dev/null
}

@test "bind: events the kernel dropped (a full inotify queue) are made up by a walk of the whole project" {
	make_bound bind
	run -0 --separate-stderr pisb create "$N" -f "$BATS_TEST_TMPDIR/m.yaml" --project "$R"
	ctl=$(pisb inspect "$N" | jq -r .controller.pid)
	w=$(pgrep -x -P "$ctl" pisb-watch)
	[ -n "$w" ]
	mkdir "$R/many"
	printf 'S\n' >"$R/many/.env"
	wait_covered many/.env
	# stopped, the watcher reads nothing: more names than its queue holds
	# (plain files of a watched directory), then a secret whose event is
	# dropped, in a directory no queued event leads a walk to
	kill -STOP "$w"
	python3 -c 'import sys
for i in range(int(sys.argv[2]) + 100):
    open(f"{sys.argv[1]}/f{i}", "w").close()' "$R/many" "$(cat /proc/sys/fs/inotify/max_queued_events)"
	printf 'DROPPED=1\n' >"$R/.env.dropped"
	kill -CONT "$w"
	wait_covered .env.dropped
	run -0 pisb exec "$N" -- sh -c 'umount -l .env.dropped 2>/dev/null; cat .env.dropped; echo "[end]"'
	[ "$output" = "[end]" ]
}

@test "bind: a watcher that ends before the sandbox stops it (fail closed); start brings both back" {
	make_bound bind
	run -0 --separate-stderr pisb create "$N" -f "$BATS_TEST_TMPDIR/m.yaml" --project "$R"
	ctl=$(pisb inspect "$N" | jq -r .controller.pid)
	w=$(pgrep -x -P "$ctl" pisb-watch)
	[ -n "$w" ]
	kill -9 "$w"
	for i in $(seq 100); do
		s=$(pisb inspect "$N" | jq -r .status)
		[ "$s" = stopped ] && break
		sleep 0.1
	done
	[ "$s" = stopped ]
	grep -q "the project's watcher ended (signal 9): stopping the sandbox" "$PI_SANDBOX_HOME/instances/$N/controller.log"
	run -0 --separate-stderr pisb start "$N"
	printf 'AFTER=1\n' >"$R/.env.after"
	wait_covered .env.after
}

@test "bind: with secrets: include a secret made while running shows; a new .git is still read-only" {
	make_bound bind
	printf 'project:\n  mode: bind\n  secrets: include\n' >"$BATS_TEST_TMPDIR/m.yaml"
	run -0 --separate-stderr pisb create "$N" -f "$BATS_TEST_TMPDIR/m.yaml" --project "$R"
	printf 'LATE=1\n' >"$R/.env.late"
	git init -q "$R/sub3"
	# the watcher has seen .env.late by the time it covered the later .git
	wait_covered sub3/.git
	run -0 pisb exec "$N" -- cat .env.late
	[ "$output" = "LATE=1" ]
	run -1 --separate-stderr pisb exec "$N" -- touch sub3/.git/x
	[[ $stderr == *"Read-only file system"* ]]
}

@test "bind-ro: a secret made on the host while the sandbox runs is covered" {
	make_bound bind-ro
	run -0 --separate-stderr pisb create "$N" -f "$BATS_TEST_TMPDIR/m.yaml" --project "$R"
	printf 'id\n' >"$R/id_ed25519"
	wait_covered id_ed25519
	run -0 pisb exec "$N" -- sh -c 'umount -l id_ed25519 2>/dev/null; cat id_ed25519; echo "[end]"'
	[ "$output" = "[end]" ]
}

@test "bind and bind-ro for an unprivileged user: the masks and read-only hold (locked from a user namespace above)" {
	st=$(mktemp -d /tmp/pisb-user36.XXXXXX)
	chmod 755 "$st"
	chown pisbtest "$st" 2>/dev/null || skip "machine lacks: the test user pisbtest"
	mkdir -p "$st/repo/.git"
	printf 'hi\n' >"$st/repo/a.txt"
	printf 'TOKEN=host-secret\n' >"$st/repo/.env"
	chown -R pisbtest "$st/repo"
	printf 'project:\n  mode: bind\n' >"$st/b.yaml"
	printf 'project:\n  mode: bind-ro\n' >"$st/r.yaml"
	run -0 --separate-stderr as_user pisb --state-dir "$st/s" create u -f "$st/b.yaml" --project "$st/repo"
	run -0 --separate-stderr as_user pisb --state-dir "$st/s" create r -f "$st/r.yaml" --project "$st/repo"
	run -0 as_user pisb --state-dir "$st/s" exec u -- sh -c 'echo in > n.txt; umount .env 2>/dev/null; umount -l .env 2>/dev/null; cat .env; echo end'
	u_out=$output
	run -0 as_user pisb --state-dir "$st/s" exec u -- sh -c 'touch .git/h 2>/dev/null || echo ro-git'
	git_out=$output
	run -0 as_user pisb --state-dir "$st/s" exec r -- sh -c 'mount -o remount,rw /workspace 2>/dev/null; { echo x > a.txt; } 2>/dev/null || echo ro'
	r_out=$output
	# made on the host while it runs: covered as well (the watcher in the
	# user namespace above the sandbox's)
	as_user sh -c 'mkdir "$1/keys" && printf "TOKEN=late\n" >"$1/keys/.env"' _ "$st/repo"
	for i in $(seq 100); do
		as_user pisb --state-dir "$st/s" exec u -- grep -q " /workspace/keys/.env " /proc/self/mountinfo && break
		sleep 0.1
	done
	run -0 as_user pisb --state-dir "$st/s" exec u -- sh -c 'umount keys/.env 2>/dev/null; umount -l keys/.env 2>/dev/null; cat keys/.env; echo end'
	late_out=$output
	as_user pisb --state-dir "$st/s" destroy u --confirm u >/dev/null
	as_user pisb --state-dir "$st/s" destroy r --confirm r >/dev/null
	n=$(cat "$st/repo/n.txt")
	a=$(cat "$st/repo/a.txt")
	rm -rf "$st"
	[ "$u_out" = end ]
	[ "$late_out" = end ]
	[ "$git_out" = ro-git ]
	[ "$r_out" = ro ]
	[ "$n" = in ]
	[ "$a" = hi ]
}

@test "project.git: host brings the host's repository (history, remotes) in; diff and apply leave .git alone" {
	make_repo
	g remote add origin https://example.com/repo.git
	printf 'project:\n  git: host\n' >"$BATS_TEST_TMPDIR/g.yaml"
	run -0 --separate-stderr pisb create "$N" -f "$BATS_TEST_TMPDIR/g.yaml" --project "$R"
	run -0 pisb exec "$N" -- git log --format=%s
	[ "$output" = init ]
	run -0 pisb exec "$N" -- git remote
	[ "$output" = origin ]
	# the host's uncommitted edit is what the working tree holds
	run -0 pisb exec "$N" -- git diff --stat -- a.txt
	[[ $output == *"a.txt | 2 +-"* ]]
	# the agent's commit is no change pisb applies
	pisb exec "$N" --sh 'git -c user.name=a -c user.email=a@b commit -qam agent && echo more >> a.txt'
	run -0 --separate-stderr pisb diff "$N" --json
	jq -e '[.changes[].path] == ["a.txt"]' <<<"$output"
	head=$(git -C "$R" rev-parse HEAD)
	run -0 --separate-stderr pisb apply "$N"
	[ "$(git -C "$R" rev-parse HEAD)" = "$head" ]
	# without it, no history: the one base commit
	run -0 --separate-stderr pisb create x"$N" --project "$R"
	run -0 pisb exec x"$N" -- git log --format=%s
	[ "$output" = "pisb: the project as copied from the host" ]
	pisb destroy x"$N" --confirm x"$N" >/dev/null
}

@test "a conflict's diff starts from the base: base -> sandbox, then base -> host" {
	make_repo
	printf 'l1\nl2\nl3\nl4\nl5\nl6\nl7\nl8\n' >"$R/c.txt"
	pisb create "$N" --project "$R" >/dev/null 2>&1
	pisb exec "$N" --sh 'printf "l1\nSANDBOX\nl3\nl4\nl5\nl6\nl7\nl8\n" > c.txt'
	printf 'l1\nl2\nl3\nl4\nl5\nl6\nl7\nHOST\n' >"$R/c.txt"
	run -0 --separate-stderr pisb diff "$N" c.txt --json
	js=$output
	jq -e '.changes[0].conflict and .changes[0].added == 1 and .changes[0].removed == 1' <<<"$js"
	# the sandbox's patch: only its own line, against the base
	patch=$(jq -r '.changes[0].patch' <<<"$js")
	[[ $patch == *$'-l2\n+SANDBOX'* ]]
	[[ $patch != *HOST* ]]
	host=$(jq -r '.changes[0].hostPatch' <<<"$js")
	[[ $host == *$'--- a/c.txt\n+++ host/c.txt'* ]]
	[[ $host == *$'-l8\n+HOST'* ]]
	[[ $host != *SANDBOX* ]]
	run -0 --separate-stderr pisb diff "$N" c.txt
	[[ $output == *$'diff --git a/c.txt b/c.txt'* ]]
	[[ $output == *$'diff --git a/c.txt host/c.txt'* ]]
	# not a conflict: no host patch
	run -0 --separate-stderr pisb diff "$N" a.txt --json
	jq -e '.changes == [] or (.changes[0].hostPatch == null)' <<<"$output"
	# a base that apply moved is kept on the host: the next conflict on
	# that file starts from it, running or stopped
	pisb exec "$N" --sh 'printf "applied\nx\ny\n" > u.txt'
	run -0 --separate-stderr pisb apply "$N" u.txt
	pisb exec "$N" --sh 'printf "applied\nx\nY-SANDBOX\n" > u.txt'
	printf 'HOST-U\nx\ny\n' >"$R/u.txt"
	pisb stop "$N" >/dev/null
	run -0 --separate-stderr pisb diff "$N" u.txt --json
	patch=$(jq -r '.changes[0].patch' <<<"$output")
	[[ $patch == *$'-y\n+Y-SANDBOX'* ]]
	[[ $patch != *HOST-U* ]]
	jq -e '.changes[0].hostPatch | contains("+HOST-U")' <<<"$output"
}
