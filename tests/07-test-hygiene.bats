#!/usr/bin/env bats
# The suites' assertions can fail: no `[ A ] && [ B ]` (bats checks only B)
# and no `run … || true` (never fails).  tests/lint/asserts finds them; the
# samples show it reports every bad form and none of the good ones.
load helpers

@test "no suite has an assertion that cannot fail" {
	run --separate-stderr "$TOP/tests/lint/asserts"
	[ "$output" = "" ]
	[ "$status" -eq 0 ]
}

@test "the checker reports every bad line of the bad sample, with file and line" {
	run -1 "$TOP/tests/lint/asserts" "$TOP/tests/lint/bad.sample"
	want=$(grep -n '# BAD$' "$TOP/tests/lint/bad.sample" | cut -d: -f1 | tr '\n' ' ')
	got=$(printf '%s\n' "$output" | cut -d: -f2 | tr '\n' ' ')
	[ "$got" = "$want" ]
	[ "${#lines[@]}" -eq "$(grep -c '# BAD$' "$TOP/tests/lint/bad.sample")" ]
	[[ ${lines[0]} == "$TOP/tests/lint/bad.sample:3: only the last test of a && chain is checked:"* ]]
	[[ ${lines[-1]} == *"|| true hides the status that run checks:"* ]]
}

@test "the checker passes the good sample: && for control flow, || true outside run" {
	run -0 "$TOP/tests/lint/asserts" "$TOP/tests/lint/good.sample"
	[ "$output" = "" ]
}

@test "a bad line added to a copy of a real suite is found" {
	cp "$TOP/tests/00-dispatch-basics.bats" "$BATS_TEST_TMPDIR/copy.bats"
	run -0 "$TOP/tests/lint/asserts" "$BATS_TEST_TMPDIR/copy.bats"
	printf '\t[ -x "$PISB_BIN_DIR/pisb" ] && [ -d "$TOP" ]\n' >> "$BATS_TEST_TMPDIR/copy.bats"
	run -1 "$TOP/tests/lint/asserts" "$BATS_TEST_TMPDIR/copy.bats"
	[ "${#lines[@]}" -eq 1 ]
	[[ $output == "$BATS_TEST_TMPDIR/copy.bats:$(wc -l < "$BATS_TEST_TMPDIR/copy.bats"):"* ]]
}

@test "no file of the tree holds a merge-conflict marker" {
	# a merge once left <<<<<<< ... >>>>>>> in a man page; nothing else saw it
	run grep -rnIE '^(<{7}|>{7})( |$)' "$TOP" --exclude-dir=.git \
		--exclude-dir=node_modules --exclude-dir=.cache --exclude-dir=build \
		--exclude-dir=bin --exclude-dir=bin-san
	[ "$output" = "" ]
	[ "$status" -eq 1 ]
}
