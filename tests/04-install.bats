#!/usr/bin/env bats
# make install / uninstall into a DESTDIR, and the installed pisb finding
# its binaries through the compiled-in libexec dir.
load helpers

setup() { pisb_test_setup; }

@test "make install puts binaries, man pages and completions under DESTDIR; uninstall removes them" {
	[ -z "${PISB_SKIP_INSTALL_TEST:-}" ] || skip "PISB_SKIP_INSTALL_TEST set"
	d="$BATS_TEST_TMPDIR/dest"
	b="$BATS_TEST_TMPDIR/build"
	# a private copy of the tree, so the build under test is not disturbed
	git -C "$TOP" ls-files -z | (cd "$TOP" && xargs -0 tar -cf -) | (mkdir -p "$b" && tar -C "$b" -xf -)
	# with the objects of the tree's own build (mtimes kept): make install
	# after a plain make rebuilds only what the new PREFIX changes
	if [ -d "$TOP/build/rel" ]; then
		mkdir -p "$b/build"
		cp -a "$TOP/build/rel" "$b/build/rel"
	fi
	run -0 make -s -C "$b" -j"$(nproc)" install PREFIX=/opt/pisb DESTDIR="$d"
	[ -x "$d/opt/pisb/bin/pisb" ]
	for p in pisb-create pisb-exec pisb-fs pisb-svc pisb-docker pisb-gc pisb-renew pisb-init; do
		[ -x "$d/opt/pisb/libexec/pisb/$p" ]
	done
	ls "$d/opt/pisb/share/man/man1/pisb.1" "$d/opt/pisb/share/man/man5/pisb-state.5"
	[ -f "$d/opt/pisb/share/bash-completion/completions/pisb" ]
	[ -f "$d/opt/pisb/share/zsh/site-functions/_pisb" ]
	[ -f "$d/opt/pisb/share/fish/vendor_completions.d/pisb.fish" ]
	# the dispatcher looks in the compiled-in libexec dir: /opt/pisb/libexec/pisb
	run -0 strings "$d/opt/pisb/bin/pisb"
	[[ $output == */opt/pisb/libexec/pisb* ]]
	# with the DESTDIR prefix it works through PISB_EXEC_PATH
	PATH=/usr/bin:/bin PISB_EXEC_PATH="$d/opt/pisb/libexec/pisb" run -0 "$d/opt/pisb/bin/pisb" list --json
	[ "$output" = "[]" ]
	run -0 make -s -C "$b" uninstall PREFIX=/opt/pisb DESTDIR="$d"
	[ -z "$(find "$d" -type f)" ]
}
