#!/usr/bin/env bats
# Pi's own tool behaviour through the extension (issue 12, items 3 and 4):
# bash-only syntax in the bash tool and ! commands, fd's brace globs in find,
# ripgrep's \p{L} and a first line after a byte-order mark in grep; and
# /sandbox recreate after the session's sandbox was destroyed. Real Pi with
# the scripted model, real local pisb sandboxes.
load helpers
load pi/helpers

setup_file() {
	pi_require_local_driver
	if [ "$PI_FLAVOR" = current ]; then pi_install_current; else pi_install_legacy; fi
	pi_env "$BATS_FILE_TMPDIR"
	export SB; SB=$(pi_name syn)
	export NOBASH; NOBASH=$(pi_name nobash)
	export PISB_SANDBOX=$SB PISB_LIFECYCLE=keep
	export OUT="$BATS_FILE_TMPDIR/run.jsonl"
	# every file is written through Pi's write tool, inside the sandbox
	local script
	script=$(jq -nc '
	 def w($p; $c): {tools:[{name:"write",args:{path:$p,content:$c}}]};
	 [
	 w("src/main.c"; "int main(void) { return 0; }\n"),
	 w("src/util.c"; "int util;\n"),
	 w("src/util.h"; "extern int util;\n"),
	 w("src/notes.txt"; "not a source file\n"),
	 w("lib/deep/other.h"; "#pragma once\n"),
	 w("words.txt"; "café\n12345\nÜber\nnaïve-word\n"),
	 w("bom.txt"; "\ufeffTODO: first line\nsecond TODO\n"),
	 {tools:[{name:"find",args:{pattern:"*.{c,h}"}}]},
	 {tools:[{name:"find",args:{pattern:"{main,util}.c"}}]},
	 {tools:[{name:"find",args:{pattern:"*.{c,h}",path:"lib"}}]},
	 {tools:[{name:"grep",args:{pattern:"^\\p{L}+$",path:"words.txt"}}]},
	 {tools:[{name:"grep",args:{pattern:"\\p{Lu}\\p{Ll}+"}}]},
	 {tools:[{name:"grep",args:{pattern:"^TODO"}}]},
	 {tools:[{name:"bash",args:{command:"[[ abc == a* ]] && echo dbl-bracket-match; arr=(x y z); echo \"arr ${#arr[@]} ${arr[1]}\"; cat <(echo from-procsub); echo brace {1..3}; printf %s $'"'"'tab\\there'"'"' | od -An -c | tr -s \" \"; printf '"'"'\\xc3\\xa9\\n'"'"'; echo \"shell $0\""}}]},
	 {text:"done"}]')
	run_pi_json "$script" "$OUT" || true
}

teardown_file() {
	pi_destroy "$SB" "$NOBASH"
}

@test "pi played the whole script" {
	cat "$OUT.stderr"
	[ "$(jq -s '[.[] | select(.type=="tool_execution_end")] | length' "$OUT")" -eq 14 ]
	local i
	for i in 0 1 2 3 4 5 6; do
		tool_result "$OUT" $i
		[ "$tool_err" = false ]
	done
	run -0 pisb read "$SB" /workspace/src/util.h --raw
	[ "$output" = "extern int util;" ]
}

@test "find: a brace glob *.{c,h} finds every C source and header, nothing else" {
	tool_result "$OUT" 7
	[ "$tool_err" = false ]
	[ "$(sort <<<"$tool_text")" = "$(printf 'lib/deep/other.h\nsrc/main.c\nsrc/util.c\nsrc/util.h')" ]
}

@test "find: a brace alternation of names {main,util}.c" {
	tool_result "$OUT" 8
	[ "$tool_err" = false ]
	[ "$(sort <<<"$tool_text")" = "$(printf 'src/main.c\nsrc/util.c')" ]
}

@test "find: a brace glob under a search path" {
	tool_result "$OUT" 9
	[ "$tool_err" = false ]
	[ "$tool_text" = "deep/other.h" ]
}

@test "grep: \\p{L} matches letters of any script, as ripgrep does" {
	tool_result "$OUT" 10
	[ "$tool_err" = false ]
	[ "$tool_text" = "$(printf 'words.txt:1: café\nwords.txt:3: Über')" ]
	tool_result "$OUT" 11
	[ "$tool_err" = false ]
	grep -qx 'words.txt:3: Über' <<<"$tool_text"
	[[ $tool_text != *"12345"* ]]
}

@test "grep: ^TODO matches the first line after a byte-order mark" {
	tool_result "$OUT" 12
	[ "$tool_err" = false ]
	[[ $tool_text == "bom.txt:1: "*"TODO: first line" ]]
	[[ $tool_text != *"second TODO"* ]]
}

@test "bash: [[ ]], arrays, <(…), {1..3}, \$'…' and printf '\\xc3\\xa9' behave as in bash" {
	tool_result "$OUT" 13
	[ "$tool_err" = false ]
	grep -qx 'dbl-bracket-match' <<<"$tool_text"
	grep -qx 'arr 3 y' <<<"$tool_text"
	grep -qx 'from-procsub' <<<"$tool_text"
	grep -qx 'brace 1 2 3' <<<"$tool_text"
	grep -qx ' t a b \\t h e r e' <<<"$tool_text"
	grep -qx 'é' <<<"$tool_text"
	grep -qx 'shell /bin/bash' <<<"$tool_text"
	[[ $tool_note != *"/bin/sh"* ]]
}

@test "a sandbox without bash: the bash tool runs sh (pisb exec's shell event says so), and the model is told once" {
	local out=$BATS_TEST_TMPDIR/nobash.jsonl
	run -0 pisb create "$NOBASH"
	# bash hidden from this run of the sandbox before any --bash call (pisb picks the shell once a run), as tests/20 does
	run -0 pisb exec "$NOBASH" -- sh -c 'mkdir -p /opt/realbin /tmp/ub && mount --bind /usr/bin /opt/realbin &&
		for f in /opt/realbin/*; do [ "${f##*/}" = bash ] || ln -s "$f" /tmp/ub/; done &&
		mount --bind /tmp/ub /usr/bin'
	run -1 pisb exec "$NOBASH" -- test -e /bin/bash
	PISB_SANDBOX=$NOBASH run_pi_json '[{"tools":[{"name":"bash","args":{"command":"echo \"shell $0\""}}]},
	 {"tools":[{"name":"bash","args":{"command":"echo again"}}]},{"text":"done"}]' "$out"
	cat "$out.stderr"
	tool_result "$out" 0
	[ "$tool_err" = false ]
	[ "$tool_text" = "shell /bin/sh" ]
	[[ $tool_note == *"commands run with /bin/sh, not bash (sandbox '$NOBASH' has no /bin/bash)"* ]]
	tool_result "$out" 1
	[ "$tool_err" = false ]
	[ "$tool_text" = again ]
	[ -z "$tool_note" ]
}

@test "! commands take bash-only syntax too" {
	[ "$PI_FLAVOR" = legacy ] || skip "the SDK driver drives legacy Pi only; 82-pi-current covers ! over RPC"
	run -0 drive DRIVE_USER_BASH='["[[ x == x ]] && a=(1 2) && echo \"bang ${#a[@]} $(cat <(echo ps))\""]'
	echo "$output"
	jq -se '[.[] | select(.type=="user_bash")][0] | .handled and .exitCode == 0 and (.output | test("^bang 2 ps\n"))' <<<"$output"
}

@test "/sandbox recreate: refused while the sandbox lives; after a destroy, a new sandbox serves the tools" {
	[ "$PI_FLAVOR" = legacy ] || skip "the SDK driver drives legacy Pi only"
	local name script
	name=$(pi_name rec)
	script=$(jq -nc --arg sb "$name" --arg p "$PROJ" '[
	 {tools:[{name:"bash",args:{command:"echo first > first.txt; echo alive"}}]},
	 {prompt:"/sandbox recreate"},
	 {host:("pisb destroy " + $sb + " --confirm " + $sb)},
	 {tools:[{name:"bash",args:{command:("touch " + $p + "/HOSTMARK; echo ran")}}]},
	 {prompt:"/sandbox recreate"},
	 {tools:[{name:"bash",args:{command:"ls; echo again > again.txt; echo back"}}]},
	 {tools:[{name:"read",args:{path:"again.txt"}}]}]')
	printf '%s\n' "$script" > "$BATS_TEST_TMPDIR/rec.script"
	run -0 drive PI_SCRIPT="$BATS_TEST_TMPDIR/rec.script" DRIVE_UI=1 PISB_SANDBOX="$name"
	echo "$output"
	pi_destroy "$name"
	# the first recreate leaves the living sandbox alone, saying so
	jq -se --arg sb "$name" '[.[] | select(.type=="notify")][0] | .level == "warning" and (.message | contains("sandbox '"'"'" + $sb + "'"'"' is still there"))' <<<"$output"
	jq -se '[.[] | select(.type=="tool")][0] | (.isError | not) and (.text | test("alive"))' <<<"$output"
	jq -se '[.[] | select(.type=="host")][0].status == 0' <<<"$output"
	# destroyed: the tool says so and nothing ran on the host
	jq -se --arg sb "$name" '[.[] | select(.type=="tool")][1] | .isError and (.text | contains("sandbox '"'"'" + $sb + "'"'"' is gone")) and (.text | contains("ran") | not)' <<<"$output"
	[ ! -e "$PROJ/HOSTMARK" ]
	# the second recreate makes a new sandbox of the same name: a fresh copy of the project
	jq -se --arg sb "$name" '[.[] | select(.type=="notify")][1] | .level == "info" and .message == ("sandbox '"'"'" + $sb + "'"'"' is ready")' <<<"$output"
	jq -se '[.[] | select(.type=="tool")][2] | (.isError | not) and (.text | test("back")) and (.text | test("first.txt") | not)' <<<"$output"
	jq -se '[.[] | select(.type=="tool")][3] | (.isError | not) and (.text | test("again"))' <<<"$output"
}
