#!/usr/bin/env bats
# Seams where host-side pisb touches what a sandbox wrote (issue 18, items
# 1, 2, 6 (pull), 10).  Each test is the attack, made from inside the
# sandbox, and asserts the host untouched: marker files absent, secrets
# absent from every output, the host disk bounded.
#   - pull, then push, of a repository whose .git/config, hooks and
#     attributes would run commands: nothing runs on the host
#   - the masks over /etc/shadow, /etc/ssh, ... cannot be removed inside
#   - the controller reads the guest's .sandbox.yaml with the sandbox
#     root's rights only
#   - pull never replaces a host symlink (exit 4, nothing changed)
#   - pull keeps holes and caps what it writes
#   - the setup and resume hooks and the sandbox's init cannot grow the
#     controller's log (a host file) without bound
load helpers

setup_file() {
	unshare -Ur true 2>/dev/null || skip "machine lacks: unprivileged user namespaces"
	FS_TMP=$(mktemp -d /tmp/pisb-fs94.XXXXXX)
	chmod 755 "$FS_TMP"
	export FS_TMP PI_SANDBOX_HOME="$FS_TMP/state"
	pisb create seam >/dev/null
}

teardown_file() {
	pisb destroy seam --confirm seam >/dev/null 2>&1 || true
	rm -rf "$FS_TMP"
	rm -f /usr/local/.pisb-test94-secret /etc/ssh/pisb-test94.pub /etc/ssh/pisb-test94-late.pub /etc/sudoers.d/pisb-test94-late /etc/pisb-test94-live /etc/pisb-test94.sock
}

setup() {
	pisb_test_setup
	export PI_SANDBOX_HOME="$FS_TMP/state"
	st=
}

# the unprivileged user's sandbox and state dir ($st) of a test that
# failed before its own clean-up: never left running
teardown() {
	if [ -n "$st" ]; then
		if [ -d "$st/s" ]; then
			as_user pisb --state-dir "$st/s" destroy u --confirm u >/dev/null 2>&1 || true
		fi
		rm -rf "$st"
	fi
}

# Inside sandbox $1 (pisb command prefix in $PISB): a repository at
# /workspace/evil whose config, hooks and attributes each touch a host
# marker under $2 when git runs there; the file a.txt tracked.
plant_repo() {
	local m=$2
	$PISB exec "$1" --sh "
		set -e
		rm -rf /workspace/evil && mkdir -p /workspace/evil/sub && cd /workspace/evil
		git init -q . && echo tracked >a.txt && echo deep >sub/b.txt && echo 'a.txt filter=x' >.gitattributes
		git add -A && git -c user.email=t@example.com -c user.name=t commit -qm one
		# armed after the commit: from here on, git in this tree runs them
		git config core.fsmonitor 'touch $m/fsmonitor; echo'
		git config core.hooksPath .git/hooks
		git config filter.x.clean 'touch $m/filter; cat'
		git config filter.x.smudge 'touch $m/smudge; cat'
		git config core.pager 'touch $m/pager; cat'
		git config core.sshCommand 'touch $m/ssh'
		git config include.path ../included
		printf '[core]\n\tfsmonitor = touch $m/include; echo\n' >included
		for h in post-checkout pre-commit post-index-change reference-transaction pre-push; do
			printf '#!/bin/sh\ntouch $m/hook-%s\n' \$h >.git/hooks/\$h && chmod +x .git/hooks/\$h
		done
		git -c core.fsmonitor=false -c core.hooksPath=/dev/null update-index --index-version 4
	"
}

no_markers() {
	run ls -A "$1"
	[ "$status" = 0 ]
	[ "$output" = "" ]
}

@test "pull, then push, of a repository armed by the sandbox runs nothing on the host" {
	require_cmd git
	local m="$BATS_TEST_TMPDIR/markers" h="$BATS_TEST_TMPDIR/host"
	mkdir -p "$m"
	PISB=pisb plant_repo seam "$m"
	# the attack: the user pulls the tree with its .git (asked for), then pushes it back
	run -0 pisb pull seam /workspace/evil "$h/evil" --include-git
	grep -q fsmonitor "$h/evil/.git/config"
	[ -x "$h/evil/.git/hooks/post-checkout" ]
	run -0 pisb push seam "$h/evil" --to /workspace/back --json
	# the index was read: the tracked files went, the untracked one did not
	jq -e '.files == 3' <<<"$output"
	run -0 pisb exec seam --sh 'cd /workspace/back && ls -A | sort | tr "\n" " "'
	[ "$output" = ".gitattributes a.txt sub " ]
	run -0 pisb push seam "$h/evil/sub" --to /workspace/back2 --json
	jq -e '.files == 1' <<<"$output"
	no_markers "$m"
	# control: the vectors are live, git itself on that tree runs them
	git -C "$h/evil" status >/dev/null 2>&1 || true
	[ -e "$m/fsmonitor" ] || [ -e "$m/include" ]
}

@test "pull leaves .git out unless --include-git, and refuses a .git PATH or HOSTDIR" {
	require_cmd git
	local m="$BATS_TEST_TMPDIR/markers" h="$BATS_TEST_TMPDIR/host"
	mkdir -p "$m"
	PISB=pisb plant_repo seam "$m"
	run -0 pisb pull seam /workspace/evil "$h/plain"
	[[ $output == *"left out"*".git"*"--include-git"* ]]
	[ ! -e "$h/plain/.git" ]
	[ -f "$h/plain/a.txt" ]
	[ -f "$h/plain/included" ]
	run -2 pisb pull seam /workspace/evil/.git "$h/g"
	[[ $output == *"--include-git"* ]]
	[ ! -e "$h/g" ]
	run -2 pisb pull seam /workspace/evil/sub "$h/x/.git/hooks"
	[ ! -e "$h/x" ]
	# a tree with .GIT (a case-insensitive file system's .git) is left out too
	pisb exec seam --sh 'mkdir -p /workspace/ci/.GIT && echo x >/workspace/ci/.GIT/config && echo y >/workspace/ci/f'
	run -0 pisb pull seam /workspace/ci "$h/ci"
	[ ! -e "$h/ci/.GIT" ]
	[ -f "$h/ci/f" ]
	no_markers "$m"
}

@test "push follows no symlink on the way to a tracked path" {
	require_cmd git
	local r="$BATS_TEST_TMPDIR/repo" secret="$BATS_TEST_TMPDIR/secretdir"
	mkdir -p "$r/d" "$secret"
	echo "HOST-SECRET-$RANDOM" >"$secret/f"
	git -C "$r" init -q
	echo ok >"$r/d/f"
	echo top >"$r/top"
	git -C "$r" add -A
	# d becomes a symlink to a host directory: the index still lists d/f
	rm -rf "$r/d"
	ln -s "$secret" "$r/d"
	run -0 pisb push seam "$r" --to /workspace/sl --json
	jq -e '.files == 1' <<<"$output"
	run pisb read seam /workspace/sl/d/f
	[ "$status" -ne 0 ]
	[[ $output != *HOST-SECRET* ]]
}

@test "a damaged or hostile git index is an error, never git" {
	local r="$BATS_TEST_TMPDIR/bad"
	mkdir -p "$r/.git"
	printf 'DIRC\0\0\0\7\0\0\0\1garbage' >"$r/.git/index"
	echo x >"$r/f"
	run -1 pisb push seam "$r" --to /workspace/bad
	[[ $output == *"git index"* ]]
	[[ $output == *"--all"* || $output == *damaged* || $output == *version* ]]
	run -0 pisb push seam "$r" --to /workspace/bad --all --json
	jq -e '.files == 2' <<<"$output"
}

# masks: root inside tries every way to uncover the host's files, and
# looks after each step
uncover='show() { cat /etc/shadow /etc/gshadow /etc/ssh/* /etc/ssl/private/* /tmp/mv/* 2>/dev/null; }
	for p in /etc/shadow /etc/gshadow /etc/ssh /etc/ssl/private /etc/docker; do
		umount "$p" 2>/dev/null; show
		umount -l "$p" 2>/dev/null; show
		mount -o remount,rw "$p" 2>/dev/null; show
	done
	mkdir -p /tmp/mv && mount --move /etc/ssh /tmp/mv 2>/dev/null; show
	umount /etc 2>/dev/null || umount -l /etc 2>/dev/null; show
	echo done'

@test "the masks over /etc/shadow, /etc/ssh, ... cannot be removed from inside" {
	require_root
	local pub="HOST-SSH-PUB-$RANDOM-$RANDOM"
	mkdir -p /etc/ssh
	echo "$pub" >/etc/ssh/pisb-test94.pub
	chmod 644 /etc/ssh/pisb-test94.pub
	# a fresh sandbox, to see the file planted now
	run -0 pisb create maskt
	run -0 pisb exec maskt --sh "$uncover"
	rm -f /etc/ssh/pisb-test94.pub
	pisb destroy maskt --confirm maskt >/dev/null
	[[ $output == *done* ]]
	[[ $output != *"$pub"* ]]
	if [ -s /etc/shadow ]; then
		[[ $output != *"$(head -1 /etc/shadow)"* ]]
	fi
}

@test "a masked path the host makes while the sandbox runs stays masked; the rest of /etc is the host's, live and read-only; no socket of the host's /etc shows" {
	require_root
	local pub="HOST-LATE-$RANDOM-$RANDOM"
	python3 -c 'import socket,sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])' /etc/pisb-test94.sock
	run -0 pisb create maskl
	mkdir -p /etc/ssh /etc/sudoers.d
	echo "$pub" >/etc/ssh/pisb-test94-late.pub
	echo "$pub" >/etc/sudoers.d/pisb-test94-late
	echo "$pub" >/etc/pisb-test94-live
	chmod 644 /etc/ssh/pisb-test94-late.pub /etc/sudoers.d/pisb-test94-late /etc/pisb-test94-live
	run pisb exec maskl --sh 'cat /etc/ssh/* /etc/sudoers.d/* 2>/dev/null; ls -A /etc/ssh /etc/sudoers.d; echo "live: $(cat /etc/pisb-test94-live)"
		ls -la /etc/pisb-test94.sock 2>&1; touch /etc/pisb-w 2>&1; echo end'
	rm -f /etc/ssh/pisb-test94-late.pub /etc/sudoers.d/pisb-test94-late /etc/pisb-test94-live /etc/pisb-test94.sock
	pisb destroy maskl --confirm maskl >/dev/null
	[ "$status" = 0 ]
	[[ $output == *end* ]]
	[ "$(grep -c "$pub" <<<"$output")" = 1 ]
	[[ $output == *"live: $pub"* ]]
	[[ $output == *"pisb-test94.sock"*"No such file"* ]]
	[[ $output == *"Read-only file system"* ]]
	[ ! -e /etc/pisb-w ]
}

@test "the masks hold for an unprivileged user too" {
	st=$(mktemp -d /tmp/pisb-user94.XXXXXX); chown pisbtest "$st" 2>/dev/null || skip "machine lacks: the test user pisbtest"
	local pub="HOST-SSH-PUB-$RANDOM-$RANDOM"
	mkdir -p /etc/ssh
	echo "$pub" >/etc/ssh/pisb-test94.pub
	chmod 644 /etc/ssh/pisb-test94.pub
	run -0 as_user pisb --state-dir "$st/s" create u
	run -0 as_user pisb --state-dir "$st/s" exec u --sh "$uncover"
	rm -f /etc/ssh/pisb-test94.pub
	as_user pisb --state-dir "$st/s" destroy u --confirm u >/dev/null
	rm -rf "$st"
	[[ $output == *done* ]]
	[[ $output != *"$pub"* ]]
}

@test "the controller reads the guest's .sandbox.yaml with the sandbox's rights only" {
	require_root
	local text="HOST-ROOT-ONLY-$RANDOM-$RANDOM"
	# a host file root inside can see (host /usr is bound in) but not
	# read, shaped so that a parse error would quote it (an unknown key)
	printf '%s: 1\n' "$text" >/usr/local/.pisb-test94-secret
	chmod 600 /usr/local/.pisb-test94-secret
	run -1 pisb exec seam -- cat /usr/local/.pisb-test94-secret
	[[ $output != *"$text"* ]]
	pisb exec seam -- ln -sf /usr/local/.pisb-test94-secret /workspace/.sandbox.yaml
	run pisb svc seam ensure
	[ "$status" -ne 0 ]
	[[ $output == *"Permission denied"* ]]
	[[ $output != *"$text"* ]]
	local t
	for t in ../../../../usr/local/.pisb-test94-secret /proc/self/root/usr/local/.pisb-test94-secret \
		/proc/1/root/usr/local/.pisb-test94-secret /etc/shadow /etc/gshadow; do
		pisb exec seam -- ln -sf "$t" /workspace/.sandbox.yaml
		run pisb svc seam ensure
		[[ $output != *"$text"* ]]
		if [ -s /etc/shadow ]; then
			[[ $output != *"$(head -1 /etc/shadow)"* ]]
		fi
	done
	# the logs keep no copy either
	run pisb logs seam
	[[ $output != *"$text"* ]]
	rm -f /usr/local/.pisb-test94-secret
	pisb exec seam -- rm -f /workspace/.sandbox.yaml
}

@test "at a start, the init reads the guest's .sandbox.yaml with the sandbox's rights only, before anything of the sandbox runs" {
	require_root
	local text="HOST-ROOT-ONLY-$RANDOM-$RANDOM" t
	printf '%s: 1\n' "$text" >/usr/local/.pisb-test94-secret
	chmod 600 /usr/local/.pisb-test94-secret
	for t in /usr/local/.pisb-test94-secret ../../../../usr/local/.pisb-test94-secret \
		/proc/1/root/usr/local/.pisb-test94-secret /etc/shadow; do
		pisb exec seam -- ln -sf "$t" /workspace/.sandbox.yaml
		run -0 pisb stop seam
		run pisb start seam
		[ "$status" = 0 ]
		[[ $output != *"$text"* ]]
		run pisb logs seam
		[[ $output != *"$text"* ]]
		if [ -s /etc/shadow ]; then
			[[ $output != *"$(head -1 /etc/shadow)"* ]]
		fi
	done
	# the one it cannot read is named in the controller's log
	pisb exec seam -- ln -sf /usr/local/.pisb-test94-secret /workspace/.sandbox.yaml
	run -0 pisb stop seam
	run -0 pisb start seam
	grep -q "Permission denied" "$PI_SANDBOX_HOME/instances/seam/controller.log"
	# and a config it can read is taken at the start
	pisb exec seam --sh 'rm -f /workspace/.sandbox.yaml && printf "version: 1\nservices:\n  w94:\n    command: sleep 1000\n    health: process\n" >/workspace/.sandbox.yaml'
	run -0 pisb stop seam
	run -0 pisb start seam
	run -0 pisb svc seam status --json
	[[ $output == *'"w94"'* ]]
	rm -f /usr/local/.pisb-test94-secret
	pisb exec seam -- rm -f /workspace/.sandbox.yaml
}

@test "pull over a host symlink is a conflict: exit 4, the link and its target untouched" {
	local h="$BATS_TEST_TMPDIR/h" target="$BATS_TEST_TMPDIR/target"
	mkdir -p "$h"
	echo original >"$target"
	ln -s "$target" "$h/link"
	pisb exec seam --sh 'mkdir -p /workspace/sl2 && echo evil >/workspace/sl2/link && echo new >/workspace/sl2/other'
	run -4 pisb pull seam /workspace/sl2 "$h"
	[[ $output == *"'link' is a symlink on the host"* ]]
	[ -L "$h/link" ]
	[ "$(readlink "$h/link")" = "$target" ]
	[ "$(cat "$target")" = original ]
	# nothing changed: the other file did not land either
	[ ! -e "$h/other" ]
	run ls -A "$h"
	[ "$output" = link ]
}

@test "pull keeps holes: a 1 TiB sparse file costs the host almost nothing" {
	pisb exec seam --sh 'rm -rf /workspace/sp && mkdir /workspace/sp && cd /workspace/sp &&
		truncate -s 1T huge && printf head | dd of=huge conv=notrunc 2>/dev/null &&
		printf tail | dd of=huge bs=1 seek=$((2 * 1024 * 1024 * 1024)) conv=notrunc 2>/dev/null &&
		truncate -s 2G hole-only'
	local h="$BATS_TEST_TMPDIR/sp"
	# the cap guards the host even if holes were ever written densely
	run -0 pisb pull seam /workspace/sp "$h" --json --max-bytes 104857600
	jq -e '.files == 2' <<<"$output"
	[ "$(stat -c %s "$h/huge")" = $((1024 * 1024 * 1024 * 1024)) ]
	[ "$(stat -c %s "$h/hole-only")" = $((2 * 1024 * 1024 * 1024)) ]
	# allocated: a few blocks, not gigabytes
	[ "$(du -k "$h/huge" | cut -f1)" -lt 1024 ]
	[ "$(du -k "$h/hole-only" | cut -f1)" -lt 1024 ]
	[ "$(head -c 4 "$h/huge")" = head ]
	[ "$(dd if="$h/huge" bs=1 skip=$((2 * 1024 * 1024 * 1024)) count=4 2>/dev/null)" = tail ]
	rm -rf "$h"
	pisb exec seam -- rm -rf /workspace/sp
}

@test "push keeps holes too: a host sparse file does not fill the sandbox's disk" {
	local d="$BATS_TEST_TMPDIR/sparse"
	mkdir -p "$d"
	truncate -s 4G "$d/big"
	echo x >>"$d/big"
	run -0 pisb push seam "$d" --to /workspace/sp2 --json
	run -0 pisb exec seam --sh 'stat -c %s /workspace/sp2/big; du -k /workspace/sp2/big | cut -f1'
	[ "${lines[0]}" = $((4 * 1024 * 1024 * 1024 + 2)) ]
	[ "${lines[1]}" -lt 1024 ]
	pisb exec seam -- rm -rf /workspace/sp2
}

@test "pull is capped: over --max-bytes it fails and writes nothing" {
	pisb exec seam --sh 'rm -rf /workspace/cap && mkdir /workspace/cap && cd /workspace/cap &&
		head -c 600000 /dev/urandom >a && head -c 600000 /dev/urandom >b && truncate -s 5G c'
	local h="$BATS_TEST_TMPDIR/cap"
	mkdir -p "$h"
	run -1 pisb pull seam /workspace/cap "$h" --max-bytes 1000000
	[[ $output == *"more than 1000000 bytes"* ]]
	[[ $output == *"--max-bytes"* ]]
	run ls -A "$h"
	[ "$output" = "" ]
	# one file alone over the cap is refused before it is written
	run -1 pisb pull seam /workspace/cap/a "$h" --max-bytes 1000
	[[ $output == *"at 'a', 600000 bytes"* ]]
	run ls -A "$h"
	[ "$output" = "" ]
	# holes do not count: under the cap with the 5 GiB file
	run -0 pisb pull seam /workspace/cap "$h" --max-bytes 1300000
	[ "$(stat -c %s "$h/c")" = $((5 * 1024 * 1024 * 1024)) ]
	run -2 pisb pull seam /workspace/cap "$h" --max-bytes 0
	rm -rf "$h"
	pisb exec seam -- rm -rf /workspace/cap
}

@test "an unprivileged user: pull, then push, of an armed repository runs nothing" {
	require_cmd git
	st=$(mktemp -d /tmp/pisb-user94.XXXXXX); chown pisbtest "$st" 2>/dev/null || skip "machine lacks: the test user pisbtest"
	chmod 755 "$st"
	as_user mkdir "$st/m" "$st/h"
	run -0 as_user pisb --state-dir "$st/s" create u
	PISB="as_user pisb --state-dir $st/s" plant_repo u "$st/m"
	run -0 as_user pisb --state-dir "$st/s" pull u /workspace/evil "$st/h/evil" --include-git
	run -0 as_user pisb --state-dir "$st/s" push u "$st/h/evil" --to /workspace/back --json
	jq -e '.files == 3' <<<"$output"
	run ls -A "$st/m"
	as_user pisb --state-dir "$st/s" destroy u --confirm u >/dev/null
	rm -rf "$st"
	[ "$output" = "" ]
}

# The controller's log of instance dir $1 and its one rotated copy hold at
# most 1 MiB each (plus the one line of the controller that crossed it).
ctl_log_bounded() {
	local f
	for f in "$1/controller.log" "$1/controller.log.1"; do
		[ ! -e "$f" ] || [ "$(stat -c %s "$f")" -le $((1024 * 1024 + 4096)) ]
	done
	[ -z "$(find "$1" -maxdepth 1 -name 'controller.log*' ! -name controller.log ! -name controller.log.1)" ]
}

# setup floods, resume leaves a flood running, root inside writes to the
# init's stdio: the writers get a pipe and /dev/null, never the log file.
# The setup's flood is 4 MB: past the 1 MiB burst (the rest is dropped),
# and drained in well under a second, so that what the bucket keeps until
# the first check (1 MiB, then 256 KiB a second, the resume writer's too)
# stays under the 2 MiB that controller.log and controller.log.1 hold: the
# setup's first line is still there (20 MB took 3-4 s to drain, and on a
# loaded machine the line was rotated out before the test looked)
flood_yaml='setup:
  - "echo setup-said-hello; head -c 4000000 /dev/zero | tr \"\\\\0\" y"
resume:
  - "echo resume-said-hello; setsid sh -c \"exec yes\" </dev/null &"
'

# what the init's stdio is, as root inside sees it (as host root, the init
# is not dumpable: its fds are unreadable inside)
init_stdio='for f in 0 1 2; do readlink /proc/1/fd/$f 2>/dev/null || echo unreadable; done | sort -u'

@test "a flood through the setup and resume hooks or the init's stderr leaves controller.log bounded" {
	require_root
	local d="$PI_SANDBOX_HOME/instances/flood"
	printf '%s' "$flood_yaml" >"$BATS_TEST_TMPDIR/s.yaml"
	run -0 pisb create flood -f "$BATS_TEST_TMPDIR/s.yaml"
	ctl_log_bounded "$d"
	cat "$d"/controller.log* | grep -q '^setup-said-hello$'
	cat "$d"/controller.log* | grep -q 'dropped [0-9]* bytes of hook output'
	# the init holds no host fd: its stdio is /dev/null (a write to it
	# would have put 3 MB into controller.log)
	run -0 pisb exec flood --sh "$init_stdio"
	[ "$output" = /dev/null ] || [ "$output" = unreadable ]
	run -0 pisb exec flood --sh '{ head -c 3000000 /dev/zero >/proc/1/fd/2; } 2>/dev/null; echo tried'
	[ "$output" = tried ]
	ctl_log_bounded "$d"
	# resume: a writer left running in the background keeps writing
	run -0 pisb stop flood
	run -0 pisb start flood
	ctl=$(pisb inspect flood | jq -r .controller.pid)
	# start waits for the resume script, which only forks the writer: its
	# exec of yes can come a moment later
	for _ in $(seq 100); do pisb exec flood -- pgrep -x yes >/dev/null && break; sleep 0.1; done
	run -0 pisb exec flood -- pgrep -x yes
	sleep 5
	ctl_log_bounded "$d"
	# (the resume's first line is rotated out by now: a burst, then 256 KiB/s)
	cat "$d"/controller.log* | grep -q 'dropped [0-9]* bytes of hook output'
	run -0 pisb inspect flood
	jq -e '.controller.alive and .controller.pid == '"$ctl" <<<"$output"
	[ "$(awk '/^VmRSS/ { print $2 }' /proc/$ctl/status)" -lt 65536 ]
	run -0 pisb exec flood -- echo alive
	[ "$output" = alive ]
	run -0 pisb destroy flood --confirm flood
}

@test "an unprivileged user: the hooks' flood and the init's stderr leave controller.log bounded" {
	st=$(mktemp -d /tmp/pisb-user94.XXXXXX); chown pisbtest "$st" 2>/dev/null || skip "machine lacks: the test user pisbtest"
	chmod 755 "$st"
	printf '%s' "$flood_yaml" >"$st/s.yaml"
	chmod 644 "$st/s.yaml"
	run -0 as_user pisb --state-dir "$st/s" create u -f "$st/s.yaml"
	ctl_log_bounded "$st/s/instances/u"
	grep -q '^setup-said-hello$' "$st"/s/instances/u/controller.log*
	run -0 as_user pisb --state-dir "$st/s" exec u --sh "$init_stdio"
	[ "$output" = /dev/null ] || [ "$output" = unreadable ]
	run -0 as_user pisb --state-dir "$st/s" exec u --sh '{ head -c 3000000 /dev/zero >/proc/1/fd/2; } 2>/dev/null; echo tried'
	[ "$output" = tried ]
	run -0 as_user pisb --state-dir "$st/s" stop u
	run -0 as_user pisb --state-dir "$st/s" start u
	for _ in $(seq 100); do as_user pisb --state-dir "$st/s" exec u -- pgrep -x yes >/dev/null && break; sleep 0.1; done
	run -0 as_user pisb --state-dir "$st/s" exec u -- pgrep -x yes
	sleep 5
	ctl_log_bounded "$st/s/instances/u"
	run -0 as_user pisb --state-dir "$st/s" exec u -- echo alive
	as_user pisb --state-dir "$st/s" destroy u --confirm u >/dev/null
	rm -rf "$st"
	[ "$output" = alive ]
}

@test "the init's binary is the sandbox's own sealed copy: root inside cannot chmod or write a user's own build through /proc/1/exe" {
	st=$(mktemp -d /tmp/pisb-user94.XXXXXX); chown pisbtest "$st" 2>/dev/null || skip "machine lacks: the test user pisbtest"
	# the user's own build: root inside maps to its owner
	cp -a "$PISB_BIN_DIR" "$st/bin"
	chown -R pisbtest "$st/bin"
	chmod 755 "$st" "$st/bin"
	mode=$(stat -c %a "$st/bin/pisb-init")
	sum=$(sha256sum <"$st/bin/pisb-init")
	own() { runuser -u pisbtest -- env PATH="$PATH" PISB_EXEC_PATH="$st/bin" HOME=/tmp "$st/bin/pisb" --state-dir "$st/s" "$@"; }
	run -0 own create u
	run -0 own exec u --sh 'readlink /proc/1/exe; chmod 777 /proc/1/exe 2>/dev/null; chmod 000 /proc/1/exe 2>/dev/null; printf x | dd of=/proc/1/exe conv=notrunc 2>/dev/null && echo WROTE; echo done'
	own destroy u --confirm u >/dev/null
	[[ ${lines[0]} == "/memfd:pisb-init"* ]]
	[ "${lines[-1]}" = done ]
	[[ $output != *WROTE* ]]
	[ "$(stat -c %a "$st/bin/pisb-init")" = "$mode" ]
	[ "$(sha256sum <"$st/bin/pisb-init")" = "$sum" ]
}
