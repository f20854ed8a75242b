#!/usr/bin/env bats
# pisb doctor: real probes of what each driver needs, PASS/WARN/FAIL with
# the fix; its JSON; its exit status; a real FAIL where user namespaces
# are denied, and create's failure there pointing at 'pisb doctor'.
load helpers

NAMES='["state-dir","binaries","userns","overlayfs","local-boot","cgroups","loop","kvm","qemu","qemu-img","docker","sbx","drivers"]'

setup() {
	pisb_test_setup
}

# Run "$@" as the test user inside a user namespace where
# user.max_user_namespaces is 0: creating a user namespace fails there
# exactly as on a host that forbids them.  Needs root (it writes a
# two-line id map that keeps root and the test user).
denied_userns() {
	local u=${PISB_TEST_USER:-pisbtest} uid f pid
	uid=$(id -u "$u")
	f=$BATS_TEST_TMPDIR/go.$RANDOM
	unshare -U sh -c 'while [ ! -e "$0" ]; do sleep 0.02; done; exec sh -c "echo 0 > /proc/sys/user/max_user_namespaces || exit 99; u=\$1; shift; exec setpriv --reuid \$u --regid \$u --clear-groups env HOME=/tmp \"\$@\"" x "$@"' "$f" "$uid" "$@" &
	pid=$!
	# the maps can be written only once unshare(2) has run: wait for the new namespace
	# (a fixed sleep lost that race on a loaded fresh machine, and the child exited 99)
	local i=0
	while [ "$(readlink "/proc/$pid/ns/user")" = "$(readlink /proc/self/ns/user)" ]; do
		((++i < 500)) || { echo "denied_userns: unshare -U never ran" >&2; return 98; }
		sleep 0.01
	done
	# one write() per map file
	python3 -c 'import sys; [open("/proc/%s/%s" % (sys.argv[1], m), "w").write("0 0 1\n%s %s 1\n" % (sys.argv[2], sys.argv[2])) for m in ("uid_map", "gid_map")]' "$pid" "$uid"
	touch "$f"
	wait "$pid"
}

@test "doctor prints one PASS/WARN/FAIL line per check, fixes under the others" {
	run --separate-stderr pisb doctor
	[ "$status" -eq 0 ] || [ "$status" -eq 1 ]
	for c in state-dir binaries userns overlayfs local-boot cgroups loop kvm qemu qemu-img docker sbx; do
		grep -Eq "^(PASS|WARN|FAIL)  $c " <<<"$output" || { echo "no line for $c"; false; }
	done
	# every WARN/FAIL line is followed by a fix line, PASS lines never are
	awk '/^(WARN|FAIL)  / { want = 1; next } want { if ($0 !~ /^ +fix: /) exit 1; want = 0; next } /^ +fix: / { exit 1 }' <<<"$output"
}

@test "doctor --json: {checks:[{check,status,detail,fix}], ok}; exit status agrees with the statuses" {
	run --separate-stderr pisb doctor --json
	[ "$status" -eq 0 ] || [ "$status" -eq 1 ]
	jq -e --argjson names "$NAMES" '[.checks[].check] == $names' <<<"$output"
	jq -e 'all(.checks[]; (.status | IN("pass", "warn", "fail")) and (.detail | type) == "string" and (.detail | length) > 0)' <<<"$output"
	jq -e 'all(.checks[]; if .status == "pass" then .fix == null else (.fix | type) == "string" and (.fix | length) > 0 end)' <<<"$output"
	jq -e '.ok == ([.checks[] | select(.status == "fail")] | length == 0)' <<<"$output"
	if jq -e '.ok' <<<"$output" >/dev/null; then [ "$status" -eq 0 ]; else [ "$status" -eq 1 ]; fi
}

@test "on a host that runs sandboxes, what the local driver needs passes" {
	require_userns
	run --separate-stderr pisb doctor --json
	for c in state-dir binaries userns overlayfs local-boot; do
		jq -e --arg c "$c" '.checks[] | select(.check == $c) | .status == "pass"' <<<"$output" >/dev/null ||
			{ jq --arg c "$c" '.checks[] | select(.check == $c)' <<<"$output"; false; }
	done
	# doctor's word matches reality: a sandbox boots
	run -0 pisb create dr
	run -0 pisb destroy dr --confirm dr
}

@test "optional tools missing are WARN with the install fix, never FAIL" {
	mkdir -p "$BATS_TEST_TMPDIR/path"
	run --separate-stderr env PATH="$PISB_BIN_DIR:$BATS_TEST_TMPDIR/path" "$PISB_BIN_DIR/pisb" doctor --json
	for c in qemu docker sbx; do
		jq -e --arg c "$c" '.checks[] | select(.check == $c) | .status == "warn" and (.detail | test("not found on PATH")) and (.fix | length > 0)' <<<"$output" >/dev/null ||
			{ echo "check $c"; false; }
	done
	# a tool that is there is reported with its version
	printf '#!/bin/sh\necho "sbx version v0.45.1"\n' > "$BATS_TEST_TMPDIR/path/sbx"
	chmod +x "$BATS_TEST_TMPDIR/path/sbx"
	run --separate-stderr env PATH="$PISB_BIN_DIR:$BATS_TEST_TMPDIR/path" "$PISB_BIN_DIR/pisb" doctor --json
	jq -e '.checks[] | select(.check == "sbx") | .status == "pass" and (.detail | test("v0.45.1"))' <<<"$output"
}

@test "kvm: PASS only when a vCPU really ran, else WARN naming the step and the TCG fallback" {
	run --separate-stderr pisb doctor --json
	jq -e '.checks[] | select(.check == "kvm") | (.status == "pass" and (.detail | test("ran a vCPU to HLT"))) or (.status == "warn" and (.detail | test("TCG")))' <<<"$output"
	# an unprivileged user without access to /dev/kvm gets the WARN
	if id pisbtest >/dev/null 2>&1 && ! runuser -u pisbtest -- test -r /dev/kvm -a -w /dev/kvm; then
		run --separate-stderr as_user env PI_SANDBOX_HOME=/tmp/pisb-doctor-none pisb doctor --json
		jq -e '.checks[] | select(.check == "kvm") | .status == "warn" and (.detail | test("open /dev/kvm")) and (.fix | test("kvm"))' <<<"$output"
	fi
}

@test "a state directory others can read is a FAIL with the chmod fix" {
	mkdir -p "$PI_SANDBOX_HOME"
	chmod 755 "$PI_SANDBOX_HOME"
	run -1 --separate-stderr pisb doctor --json
	jq -e --arg p "$PI_SANDBOX_HOME" '.ok == false and (.checks[] | select(.check == "state-dir") | .status == "fail" and (.fix == "chmod 700 '"'"'" + $p + "'"'"'"))' <<<"$output"
	chmod 700 "$PI_SANDBOX_HOME"
}

@test "where user namespaces are denied: userns FAILs with the sysctl fix, and create points at 'pisb doctor'" {
	require_root
	require_cmd setpriv
	require_cmd python3
	id pisbtest >/dev/null 2>&1 || skip "machine lacks: the test user pisbtest"
	st=$(mktemp -d /tmp/pisb-doctor.XXXXXX)
	chown pisbtest "$st"
	run -1 --separate-stderr denied_userns env PI_SANDBOX_HOME="$st/s" PATH="$PATH" PISB_EXEC_PATH="$PISB_EXEC_PATH" pisb doctor --json
	jq -e '.ok == false' <<<"$output"
	jq -e '.checks[] | select(.check == "userns") | .status == "fail" and (.detail | test("No space left on device") and test("user.max_user_namespaces=0")) and (.fix | test("sysctl -w user.max_user_namespaces="))' <<<"$output"
	jq -e '.checks[] | select(.check == "local-boot") | .status == "fail"' <<<"$output"
	# the human form: FAIL line, then its fix
	run -1 --separate-stderr denied_userns env PI_SANDBOX_HOME="$st/s" PATH="$PATH" PISB_EXEC_PATH="$PISB_EXEC_PATH" pisb doctor
	grep -A1 '^FAIL  userns' <<<"$output" | grep -q 'fix: sudo sysctl -w user.max_user_namespaces='
	# create fails there, and says where to look
	run -1 --separate-stderr denied_userns env PI_SANDBOX_HOME="$st/s" PATH="$PATH" PISB_EXEC_PATH="$PISB_EXEC_PATH" pisb create nope
	[[ $stderr == *"user namespace"*"(see 'pisb doctor')"* ]]
	rm -rf "$st"
}
