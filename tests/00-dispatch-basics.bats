#!/usr/bin/env bats
# The dispatcher: version, verbs, unknown verbs, help.
load helpers

setup() { pisb_test_setup; }

@test "pisb --version prints the version" {
	run -0 pisb --version
	[[ $output =~ ^pisb\ [0-9]+\.[0-9]+\.[0-9]+$ ]]
}

@test "every binary answers --version and --help" {
	for b in pisb pisb-create pisb-exec pisb-fs pisb-svc pisb-docker pisb-gc pisb-renew; do
		run -0 "$b" --version
		[[ $output == "$b "* ]]
		run -0 "$b" --help
		[[ $output == *usage:* ]]
	done
}

@test "pisb --list-commands lists every verb of the table" {
	run -0 pisb --list-commands
	for v in create prepare start stop destroy list inspect connect verify doctor exec exec-status exec-kill shell read write edit ls stat mkdir find grep logs push pull svc docker gc renew action help; do
		grep -qx "$v" <<<"$output" || { echo "missing $v"; false; }
	done
}

@test "unknown verb exits 2 and lists the real ones" {
	run -2 --separate-stderr pisb frobnicate
	[[ $stderr == *"unknown verb 'frobnicate'"* ]]
	[[ $stderr == *create* && $stderr == *exec* ]]
}

@test "unknown option exits 2 naming it" {
	run -2 --separate-stderr pisb list --frob
	[[ $stderr == *"unknown option '--frob'"* ]]
}

@test "pisb with no arguments prints usage and exits 2" {
	run -2 --separate-stderr pisb
	[[ $stderr == *usage:* ]]
}

@test "global options may come before the verb" {
	run -0 pisb --state-dir "$BATS_TEST_TMPDIR/s2" list --json
	[ "$output" = "[]" ]
	[ -d "$BATS_TEST_TMPDIR/s2" ]
}

@test "pisb help VERB opens the man page of the owning binary" {
	require_cmd man
	MANPAGER=cat PAGER=cat run -0 pisb help exec
	[[ $output == *PISB-EXEC* || $output == *pisb-exec* ]]
	run -2 pisb help nosuchverb
}

@test "no pisb binary carries more than 4 KiB of thread-local storage" {
	# every process zeroes its TLS at start and keeps it: two 128 KiB
	# _Thread_local buffers once cost every idle controller 256 KiB
	for b in "$PISB_BIN_DIR"/pisb*; do
		tls=$(readelf -lW "$b" | awk '$1 == "TLS" { print $6 }')
		echo "$b: $((${tls:-0})) bytes of TLS"
		[ "$((${tls:-0}))" -le 4096 ]
	done
}

@test "pisb runs list, inspect, create, start, stop, exec, exec-status and exec-kill itself, as their binaries would" {
	# a stand-in for every binary, first on the exec path: what pisb execs says so
	fake="$BATS_TEST_TMPDIR/fake"
	mkdir -p "$fake"
	for b in pisb-create pisb-exec; do
		printf '#!/bin/sh\necho "exec %s $*"\nexit 42\n' "$b" >"$fake/$b"
		chmod +x "$fake/$b"
	done
	export PISB_EXEC_PATH="$fake:$PISB_EXEC_PATH"
	run -0 --separate-stderr pisb list --json
	[ "$output" = "[]" ]
	run -3 --separate-stderr pisb inspect nosuch
	[ "$stderr" = "fatal: no such sandbox 'nosuch'" ]
	for v in exec-status exec-kill; do
		run -3 --separate-stderr pisb "$v" nosuch h1
		[ "$stderr" = "fatal: no such sandbox 'nosuch'" ]
	done
	run -3 --separate-stderr pisb exec nosuch -- true
	[ "$stderr" = "fatal: no such sandbox 'nosuch'" ]
	# and from pisb action
	run -0 --separate-stderr pisb action '{"action":"list"}'
	[ "$output" = "[]" ]
	run -3 --separate-stderr pisb action '{"action":"inspect","name":"nosuch"}'
	jq -e '.error.code == "not-found" and .error.exit == 3' <<<"$output"
	# the same messages and codes as the binary itself, --help and --version too
	run -0 pisb exec --help
	[ "$output" = "$(pisb-exec exec --help)" ]
	run -0 pisb list --version
	[ "$output" = "$(pisb-create list --version)" ]
	run -2 --separate-stderr pisb list --no-such-option
	[ "$stderr" = "$(pisb-create list --no-such-option 2>&1)" ]
	# create, start and stop of the local driver too
	for v in start stop; do
		run -3 --separate-stderr pisb "$v" nosuch
		[ "$stderr" = "fatal: no such sandbox 'nosuch'" ]
	done
	run -2 --separate-stderr pisb create Bad
	[[ $stderr == "fatal: invalid name 'Bad'"* ]]
	# but a driver that may load a library, or an image to import, goes to
	# pisb-create before anything is changed
	run -42 pisb create x --driver sbx
	[ "$output" = "exec pisb-create create x --driver sbx" ]
	printf 'version: 1\nimage: %s/rootfs.tar\n' "$BATS_TEST_TMPDIR" >"$BATS_TEST_TMPDIR/img.yaml"
	run -42 pisb create x -f "$BATS_TEST_TMPDIR/img.yaml"
	[ "$output" = "exec pisb-create create x -f $BATS_TEST_TMPDIR/img.yaml" ]
	# (nothing made: not even the state directories a create begins with)
	[ ! -e "$PI_SANDBOX_HOME/instances" ]
	# the other verbs still go to their binary
	run -42 pisb destroy x --confirm x
	[ "$output" = "exec pisb-create destroy x --confirm x" ]
	run -42 pisb shell x
	[ "$output" = "exec pisb-exec shell x" ]
}
