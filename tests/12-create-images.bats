#!/usr/bin/env bats
# image: PATH — a rootfs directory or tarball, imported once into a cache.
load helpers

setup() {
	pisb_test_setup
	require_userns
	command -v busybox >/dev/null || skip "machine lacks: busybox (apt-get install busybox-static)"
	r="$BATS_TEST_TMPDIR/rootfs"
	mkdir -p "$r/bin" "$r/etc" "$r/root"
	cp "$(command -v busybox)" "$r/bin/busybox"
	for c in sh ls cat echo id mkdir; do ln -s busybox "$r/bin/$c"; done
	echo 'root:x:0:0:root:/root:/bin/sh' > "$r/etc/passwd"
	echo from-image > "$r/etc/marker"
}

teardown() {
	for n in $(pisb list -q 2>/dev/null); do pisb destroy "$n" --confirm "$n" >/dev/null 2>&1 || true; done
}

@test "a tarball image (any compression) boots, with a writable root" {
	for z in gz xz bz2 zst; do
		case $z in gz) f=-z ;; xz) f=-J ;; bz2) f=-j ;; zst) f=--zstd ;; esac
		command -v "$( [ $z = zst ] && echo zstd || ([ $z = bz2 ] && echo bzip2 || ([ $z = gz ] && echo gzip || echo xz)))" >/dev/null || continue
		tar --numeric-owner -C "$r" $f -cf "$BATS_TEST_TMPDIR/root.tar.$z" .
		printf 'image: %s\n' "$BATS_TEST_TMPDIR/root.tar.$z" > "$BATS_TEST_TMPDIR/c.yaml"
		run -0 pisb create "t$z" -f "$BATS_TEST_TMPDIR/c.yaml"
		run -0 pisb exec "t$z" --sh 'cat /etc/marker; echo changed > /etc/marker; cat /etc/marker; test -x /usr/bin/python3 || echo no-host-usr'
		[ "$output" = "$(printf 'from-image\nchanged\nno-host-usr')" ]
		run -0 pisb inspect "t$z"
		jq -e --arg p "$BATS_TEST_TMPDIR/root.tar.$z" '.image == $p' <<<"$output"
	done
	# the image itself was not changed
	[ "$(cat "$r/etc/marker")" = from-image ]
}

@test "the same tarball is imported once, whatever its name; instances stay independent" {
	tar --numeric-owner -C "$r" -czf "$BATS_TEST_TMPDIR/a.tgz" .
	cp "$BATS_TEST_TMPDIR/a.tgz" "$BATS_TEST_TMPDIR/b.tgz"
	printf 'image: %s\n' "$BATS_TEST_TMPDIR/a.tgz" > "$BATS_TEST_TMPDIR/a.yaml"
	printf 'image: %s\n' "$BATS_TEST_TMPDIR/b.tgz" > "$BATS_TEST_TMPDIR/b.yaml"
	run -0 pisb create one -f "$BATS_TEST_TMPDIR/a.yaml"
	run -0 pisb create two -f "$BATS_TEST_TMPDIR/b.yaml"
	# one KEY (content-addressed); as root each sandbox has a host id
	# range of its own, so a copy per range (KEY-UIDBASE)
	[ "$(ls "$PI_SANDBOX_HOME"/images | grep -v -e '^host-' -e '\.lock$' | sed 's/-[0-9]*$//' | sort -u | wc -l)" = 1 ]
	if [ "$(id -u)" = 0 ]; then
		[ "$(ls -d "$PI_SANDBOX_HOME"/images/*/rootfs | wc -l)" = 2 ]
	else
		[ "$(ls -d "$PI_SANDBOX_HOME"/images/*/rootfs | wc -l)" = 1 ]
	fi
	run -0 pisb exec one --sh 'echo mine > /etc/marker'
	run -0 pisb exec two -- cat /etc/marker
	[ "$output" = from-image ]
}

@test "a sandbox keeps the image it was created from when the file changes; a lost cache is imported again" {
	tar --numeric-owner -C "$r" -czf "$BATS_TEST_TMPDIR/a.tgz" .
	printf 'image: %s\n' "$BATS_TEST_TMPDIR/a.tgz" > "$BATS_TEST_TMPDIR/a.yaml"
	run -0 pisb create keep -f "$BATS_TEST_TMPDIR/a.yaml"
	cache=$(jq -r .imageCache "$PI_SANDBOX_HOME/instances/keep/record.json")
	[ -f "$PI_SANDBOX_HOME/images/$cache/complete" ]
	run -0 pisb stop keep
	# the tarball at the same path now holds something else
	echo changed-image > "$r/etc/marker"
	tar --numeric-owner -C "$r" -czf "$BATS_TEST_TMPDIR/a.tgz" .
	run -0 pisb start keep
	run -0 pisb exec keep -- cat /etc/marker
	[ "$output" = from-image ]
	# and the start neither hashed nor imported the new file
	[ "$(ls -d "$PI_SANDBOX_HOME"/images/*/rootfs | wc -l)" = 1 ]
	# a cache deleted by hand: the path is imported again, and the log says so
	run -0 pisb stop keep
	rm -rf "${PI_SANDBOX_HOME:?}/images/$cache"
	run -0 pisb start keep
	run -0 pisb exec keep -- cat /etc/marker
	[ "$output" = changed-image ]
	run -0 pisb logs keep
	[[ $output == *"image cache 'images/$cache' is gone; importing '$BATS_TEST_TMPDIR/a.tgz' again"* ]]
}

@test "a directory image boots" {
	printf 'image: %s\n' "$r" > "$BATS_TEST_TMPDIR/c.yaml"
	run -0 pisb create dir -f "$BATS_TEST_TMPDIR/c.yaml"
	run -0 pisb exec dir -- cat /etc/marker
	[ "$output" = from-image ]
}

@test "a missing or unreadable image fails create before anything exists" {
	printf 'image: %s\n' "$BATS_TEST_TMPDIR/nope.tar" > "$BATS_TEST_TMPDIR/c.yaml"
	run --separate-stderr pisb create gone -f "$BATS_TEST_TMPDIR/c.yaml"
	[ "$status" -ne 0 ]
	[[ $stderr == *nope.tar* ]]
	echo "not a tarball" > "$BATS_TEST_TMPDIR/junk.tar"
	printf 'image: %s\n' "$BATS_TEST_TMPDIR/junk.tar" > "$BATS_TEST_TMPDIR/c.yaml"
	run -1 --separate-stderr pisb create junk -f "$BATS_TEST_TMPDIR/c.yaml"
	[[ $stderr == *junk.tar* ]]
	run -0 pisb list --json
	[ "$output" = "[]" ]
}

@test "a tarball with ../ or absolute names cannot write outside the cache" {
	python3 - "$BATS_TEST_TMPDIR/evil.tar" <<-'PY'
	import io, sys, tarfile
	with tarfile.open(sys.argv[1], "w") as t:
	    for name in ("../escaped", "/tmp/pisb-absolute-escape", "bin/../../escaped2"):
	        data = b"evil"
	        i = tarfile.TarInfo(name); i.size = len(data)
	        t.addfile(i, io.BytesIO(data))
	PY
	printf 'image: %s\n' "$BATS_TEST_TMPDIR/evil.tar" > "$BATS_TEST_TMPDIR/c.yaml"
	run pisb create evil -f "$BATS_TEST_TMPDIR/c.yaml"
	[ ! -e "$PI_SANDBOX_HOME/images/escaped" ]
	[ ! -e "$PI_SANDBOX_HOME/escaped" ]
	[ ! -e /tmp/pisb-absolute-escape ]
	[ ! -e "$PI_SANDBOX_HOME/escaped2" ]
}
