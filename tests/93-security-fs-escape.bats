#!/usr/bin/env bats
# Paths given to pisb's file verbs resolve inside the sandbox's root only:
# "..", absolute symlinks, symlink chains, directory symlinks and /proc
# tricks that point at the host land inside the sandbox (or fail), never on
# a host file.  Tried against a secret planted on the host; writes aimed at
# host paths must neither create nor modify them.
load helpers

setup_file() {
	unshare -Ur true 2>/dev/null || skip "machine lacks: unprivileged user namespaces"
	FS_TMP=$(mktemp -d /tmp/pisb-fs93.XXXXXX)
	chmod 755 "$FS_TMP"
	export FS_TMP PI_SANDBOX_HOME="$FS_TMP/state"
	pisb create sec >/dev/null
}

teardown_file() {
	pisb destroy sec --confirm sec >/dev/null 2>&1 || true
	rm -rf "$FS_TMP"
}

setup() {
	pisb_test_setup
	export PI_SANDBOX_HOME="$FS_TMP/state"
	SECRET="$BATS_TEST_TMPDIR/host-secret"
	SECRET_TEXT="HOST-SECRET-$RANDOM-$RANDOM"
	echo "$SECRET_TEXT" >"$SECRET"
	SECRET_DIR=$(dirname "$SECRET")
	UP="../../../../../../../../../.."
	# links inside the sandbox that aim at the host secret every which way
	pisb exec sec --sh "
		set -e
		mkdir -p /workspace/esc && cd /workspace/esc && rm -rf ./*
		ln -s '$SECRET' abs
		ln -s '$UP$SECRET' rel
		ln -s abs chain1 && ln -s chain1 chain2 && ln -s chain2 chain3
		ln -s '$SECRET_DIR' dirlink
		ln -s '$UP$SECRET_DIR' reldirlink
		ln -s '/proc/self/root$SECRET' procself
		ln -s '/proc/1/root$SECRET' proc1
		ln -s '/proc/1/cwd$SECRET' proc1cwd
		ln -s '/proc/$$/root$SECRET' prochost
		ln -s / rootlink
	"
}

# The output of a command must not contain the host secret.
no_secret() {
	[[ $output != *"$SECRET_TEXT"* ]] || { echo "LEAK: $output"; false; }
}

secret_intact() {
	[ "$(cat "$SECRET")" = "$SECRET_TEXT" ]
}

@test "read: .., absolute and relative symlinks, chains, dir links, /proc never reach the host" {
	local p
	for p in "$SECRET" "$UP$SECRET" "/workspace/$UP$SECRET" esc/abs esc/rel esc/chain3 \
		esc/dirlink/host-secret esc/reldirlink/host-secret "esc/rootlink$SECRET" esc/procself \
		esc/proc1 esc/proc1cwd esc/prochost "/proc/self/root$SECRET" "/proc/1/root$SECRET" \
		"/proc/1/cwd$SECRET" "/proc/$$/root$SECRET" "/proc/self/cwd$SECRET" "/proc/thread-self/root$SECRET"; do
		run pisb read sec "$p"
		[ "$status" -ne 0 ] || { echo "read $p succeeded: $output"; false; }
		no_secret
		run pisb read sec "$p" --raw
		[ "$status" -ne 0 ]
		no_secret
		run pisb read sec "$p" --json
		no_secret
	done
}

@test "what an escaping path reaches is the sandbox's own file at that path" {
	# a decoy at the secret's path inside the sandbox
	run -0 pisb write sec "$SECRET" --mkdir --content SANDBOX-DECOY
	local p
	for p in "$SECRET" "$UP$SECRET" esc/abs esc/rel esc/chain3 esc/dirlink/host-secret \
		esc/reldirlink/host-secret "esc/rootlink$SECRET"; do
		run -0 pisb read sec "$p"
		[ "$output" = SANDBOX-DECOY ] || { echo "$p gave: $output"; false; }
	done
	# magic links are refused even when they would stay inside
	run -1 pisb read sec esc/proc1
	no_secret
	pisb exec sec -- rm -rf "$SECRET_DIR" >/dev/null
}

@test "write, edit and mkdir through escaping paths never touch the host" {
	local p
	for p in "$SECRET" "$UP$SECRET" esc/abs esc/rel esc/chain3 esc/dirlink/host-secret \
		esc/reldirlink/host-secret "esc/rootlink$SECRET" esc/procself esc/proc1; do
		pisb write sec "$p" --mkdir --content PWNED >/dev/null 2>&1 || true
		secret_intact || { echo "write $p changed the host secret"; false; }
		pisb edit sec "$p" --old "$SECRET_TEXT" --new PWNED >/dev/null 2>&1 || true
		secret_intact
	done
	for p in "$BATS_TEST_TMPDIR/new-file" "$UP$BATS_TEST_TMPDIR/new-file2" esc/dirlink/new-file3 \
		esc/reldirlink/new-file4; do
		pisb write sec "$p" --mkdir --content created >/dev/null 2>&1 || true
	done
	for p in "$BATS_TEST_TMPDIR/new-dir/sub" "$UP$BATS_TEST_TMPDIR/new-dir2" esc/dirlink/new-dir3; do
		pisb mkdir sec "$p" >/dev/null 2>&1 || true
	done
	secret_intact
	run ls -A "$BATS_TEST_TMPDIR"
	[ "$output" = host-secret ] || { echo "host dir now has: $output"; false; }
	# the writes landed in the sandbox instead
	run -0 pisb read sec "$BATS_TEST_TMPDIR/new-file"
	[ "$output" = created ]
	pisb exec sec -- rm -rf "$SECRET_DIR" >/dev/null
}

@test "ls, stat, find and grep see the sandbox's tree, not the host's" {
	# the host's root has the top directory of this checkout (/work, /src…);
	# the sandbox's does not
	top=${TOP#/}
	top=${top%%/*}
	[ -d "/$top" ]
	case $top in usr|etc|bin|sbin|lib|lib64|opt|tmp|var|root|home) skip "machine lacks: a checkout outside the system directories";; esac
	run -0 pisb ls sec / --json
	jq -e --arg t "$top" '[.entries[].name] | index($t) == null and index("workspace") != null' <<<"$output"
	run -0 pisb ls sec "$UP" --json
	jq -e --arg t "$top" '.entries | map(.name) | index($t) == null' <<<"$output"
	run -0 pisb ls sec esc/rootlink --json
	jq -e --arg t "$top" '.entries | map(.name) | index($t) == null' <<<"$output"
	run -3 pisb ls sec esc/dirlink
	run -3 pisb stat sec "$SECRET"
	run -3 pisb stat sec "/$top"
	run pisb find sec 'host-secret' --path "$SECRET_DIR"
	[ "$status" -eq 3 ]
	no_secret
	run pisb find sec 'host-secret' --path esc/reldirlink
	[ "$status" -eq 3 ]
	run pisb grep sec "$SECRET_TEXT" --path "$UP$SECRET_DIR"
	[ "$status" -ne 0 ]
	no_secret
	run pisb grep sec "$SECRET_TEXT" --path esc --json
	[ "$status" -eq 0 ]
	jq -e '.matchCount == 0' <<<"$output"
	# masked host files stay masked (a device node: refused, or empty)
	local p
	for p in /etc/shadow "$UP/etc/shadow" esc/rootlink/etc/shadow; do
		run pisb read sec "$p" --raw
		[[ $output != *"root:"* ]]
		[ "$status" -ne 0 ] || [ -z "$output" ]
	done
}

@test "push cannot target the host, pull cannot read it" {
	local src="$BATS_TEST_TMPDIR/src"
	mkdir -p "$src" && echo payload >"$src/p.txt"
	pisb push sec "$src" --to "$UP$BATS_TEST_TMPDIR/pushed" >/dev/null 2>&1 || true
	pisb push sec "$src" --to esc/dirlink/pushed2 >/dev/null 2>&1 || true
	[ ! -e "$BATS_TEST_TMPDIR/pushed" ]
	[ ! -e "$BATS_TEST_TMPDIR/pushed2" ]
	# pulling an escaping path gets the sandbox's file or nothing
	for p in esc/abs esc/rel "$SECRET" "$UP$SECRET" esc/procself esc/proc1; do
		rm -rf "$BATS_TEST_TMPDIR/out"
		pisb pull sec "$p" "$BATS_TEST_TMPDIR/out" >/dev/null 2>&1 || true
		run cat "$BATS_TEST_TMPDIR"/out/* 2>/dev/null
		no_secret
	done
	# a tree with a symlink to the host is refused on the way out
	run -1 --separate-stderr pisb pull sec esc "$BATS_TEST_TMPDIR/out2"
	[[ $stderr == *"refusing symlink"* ]]
	[ -z "$(ls -A "$BATS_TEST_TMPDIR/out2")" ]
	secret_intact
}

@test "an unprivileged user cannot reach the host through the sandbox either" {
	id pisbtest >/dev/null 2>&1 || skip "machine lacks: the test user pisbtest"
	local st secret
	st=$(mktemp -d /tmp/pisb-fs93u.XXXXXX)
	chown pisbtest "$st"
	secret="$st/mine"
	echo "USER-SECRET-$RANDOM" >"$secret"
	chown pisbtest "$secret"
	run -0 as_user pisb --state-dir "$st/s" create u3
	run -0 as_user pisb --state-dir "$st/s" exec u3 --sh "ln -s '$secret' /workspace/abs; ln -s '$UP$secret' /workspace/rel"
	for p in abs rel "$secret" "$UP$secret" "/proc/self/root$secret"; do
		run as_user pisb --state-dir "$st/s" read u3 "$p"
		[ "$status" -ne 0 ]
		[[ $output != *USER-SECRET* ]]
		as_user pisb --state-dir "$st/s" write u3 "$p" --content PWNED >/dev/null 2>&1 || true
		[[ $(cat "$secret") == USER-SECRET-* ]]
	done
	as_user pisb --state-dir "$st/s" write u3 "$st/created" --mkdir --content x >/dev/null 2>&1 || true
	[ ! -e "$st/created" ]
	run -0 as_user pisb --state-dir "$st/s" destroy u3 --confirm u3
	rm -rf "$st"
}
