#!/usr/bin/env bats
# Docs, the option table and the completions agree: every verb and option
# the programs know is in the man page of the binary that owns it and in the
# completion scripts, the committed completions are what the table
# generates, every page is clean roff with EXIT STATUS and EXAMPLES, the
# runnable examples run, and the action surface speaks the table's keys.
# The checks are functions of a man dir and a completions dir, so that the
# tests at the end can show each one fails on a page that drifted.
load helpers

setup() { pisb_test_setup; }

teardown() {
	for n in $(pisb list -q 2>/dev/null); do pisb destroy "$n" --confirm "$n" >/dev/null 2>&1 || true; done
}

# ---- what the programs know ----------------------------------------------------

# Verbs a user can run (pisb --list-commands).
verbs() { pisb --list-commands; }

# The extra verbs of the dispatcher itself: they belong to pisb(1).
is_dispatcher_verb() { case $1 in action | help | completion) return 0 ;; esac; return 1; }

# The page that documents VERB: the last line of `pisb VERB --help` says
# "See pisb help VERB (man pisb-XXX)."
owner_of() {
	local verb=$1 help
	if is_dispatcher_verb "$verb"; then
		echo pisb
		return 0
	fi
	help=$(pisb "$verb" --help 2>&1) || { echo "pisb $verb --help failed: $help" >&2; return 1; }
	[[ $(tail -n 1 <<<"$help") =~ \(man\ (pisb(-[a-z]+)?)\)\.?$ ]] ||
		{ echo "pisb $verb --help: last line names no man page" >&2; return 1; }
	echo "${BASH_REMATCH[1]}"
}

# Long options of VERB, one a line without "--", from its --help "options:".
verb_opts() {
	pisb "$1" --help | awk '/^options:$/ { on = 1; next } /^$/ { on = 0 }
		on { if (match($0, /--[a-z0-9-]+/)) print substr($0, RSTART + 2, RLENGTH - 2) }'
}

# Short letter of a long option of VERB ("-f, --file FILE"), if any.
verb_short() {
	pisb "$1" --help | awk -v o="--$2" '/^options:$/ { on = 1; next } /^$/ { on = 0 }
		on && $1 ~ /^-[a-zA-Z],$/ && $2 == o { print substr($1, 2, 1) }'
}

# Global options, from pisb --help "global options:".
global_opts() {
	pisb --help | awk '/^global options:$/ { on = 1; next } /^$/ { on = 0 }
		on { if (match($0, /--[a-z0-9-]+/)) print substr($0, RSTART + 2, RLENGTH - 2) }'
}

# "exec-status" as a regex for its roff source form "exec\-status".
roff_re() { printf '%s' "${1//-/\\\\-}"; }

# FILE rendered as plain ASCII with bold as overstrike (c BS c), in one
# long line per paragraph, cached per file.
rendered() {
	local out=$BATS_TEST_TMPDIR/rendered${1//\//_}
	[ -f "$out" ] || groff -man -Tascii -P-c -P-u -rLL=2000n -rHY=0 "$1" >"$out" 2>/dev/null
	printf '%s' "$out"
}

# Is VERB set in bold in FILE, as a word of its own (".B pisb VERB",
# ".BR VERB ,", ".TP" + ".B VERB", "\fBVERB\fR" all render so)?
roff_has_verb() {
	V=$2 perl -0777 -ne '
		my $p = join "", map { quotemeta($_) . "\x08" . quotemeta($_) } split //, $ENV{V};
		exit(/(?<![a-z0-9-]\x08[a-z0-9-])$p(?![a-z0-9-]\x08)/ ? 0 : 1)' "$(rendered "$1")"
}

# Is the long option NAME in FILE, as "\-\-NAME" in the source or "--NAME"
# in the rendered text?  (A longer option with NAME as a prefix does not count.)
roff_has_opt() {
	local file=$1 name=$2
	grep -Pq -- "\\\\-\\\\-$(roff_re "$name" | sed 's/\\\\/\\\\\\\\/g')(?![a-z0-9]|\\\\-)" "$file" && return 0
	sed 's/.\x08//g' "$(rendered "$file")" | grep -Eq -- "--$name([^a-z0-9-]|$)"
}

# ---- the checks: print what disagrees, fail if anything does --------------------

# Every verb is in pisb(1), and in the page of the binary that owns it.
check_verbs_in_pages() {
	local man=$1 bad=0 verb owner
	for verb in $(verbs); do
		if ! roff_has_verb "$man/pisb.1" "$verb"; then
			echo "verb '$verb' is not in pisb.1"
			bad=1
		fi
		owner=$(owner_of "$verb") || { echo "verb '$verb': cannot tell which page owns it"; bad=1; continue; }
		[ "$owner" = pisb ] && continue
		if [ ! -f "$man/$owner.1" ]; then
			echo "verb '$verb': its man page $owner.1 is missing"
			bad=1
		elif ! roff_has_verb "$man/$owner.1" "$verb"; then
			echo "verb '$verb' is not in $owner.1"
			bad=1
		fi
	done
	return $bad
}

# Every option of every verb is in the owner's page; globals in pisb(1).
check_opts_in_pages() {
	local man=$1 bad=0 verb owner o
	for verb in $(verbs); do
		is_dispatcher_verb "$verb" && continue
		owner=$(owner_of "$verb") || { echo "verb '$verb': cannot tell which page owns it"; bad=1; continue; }
		if [ ! -f "$man/$owner.1" ]; then
			echo "verb '$verb': its man page $owner.1 is missing"
			bad=1
			continue
		fi
		for o in $(verb_opts "$verb"); do
			roff_has_opt "$man/$owner.1" "$o" || { echo "option --$o of '$verb' is not in $owner.1"; bad=1; }
		done
	done
	for o in $(global_opts); do
		roff_has_opt "$man/pisb.1" "$o" || { echo "global option --$o is not in pisb.1"; bad=1; }
	done
	return $bad
}

# Every verb in each completion script, every option of a verb (long and
# short) in that verb's line of the bash script and in zsh and fish.
check_completions() {
	local comp=$1 bad=0 verb o s line
	for verb in $(verbs); do
		grep -Eq "compgen -W \"([^\"]* )?$verb( [^\"]*)?\"" "$comp/pisb.bash" ||
			{ echo "verb '$verb' is not offered by pisb.bash"; bad=1; }
		grep -Fq "    '$verb:" "$comp/_pisb" || { echo "verb '$verb' is not offered by _pisb"; bad=1; }
		grep -Fq "'__pisb_verb' -a $verb " "$comp/pisb.fish" ||
			{ echo "verb '$verb' is not offered by pisb.fish"; bad=1; }
		is_dispatcher_verb "$verb" && continue
		line=$(grep -E "^    $verb\) opts=\"" "$comp/pisb.bash") || { echo "pisb.bash has no case for '$verb'"; bad=1; continue; }
		for o in $(verb_opts "$verb"); do
			[[ " ${line#*opts=\"} " == *" --$o "* || " ${line#*opts=\"}" == *" --$o\""* ]] ||
				{ echo "option --$o of '$verb' is not in pisb.bash"; bad=1; }
			s=$(verb_short "$verb" "$o")
			if [ -n "$s" ] && [[ " ${line#*opts=\"} " != *" -$s "* && " ${line#*opts=\"}" != *" -$s\""* ]]; then
				echo "option -$s of '$verb' is not in pisb.bash"
				bad=1
			fi
			grep -Eq "^    $verb\) _arguments .*'--$o=?\[" "$comp/_pisb" ||
				{ echo "option --$o of '$verb' is not in _pisb"; bad=1; }
			grep -Fq "__pisb_is $verb' -l $o " "$comp/pisb.fish" ||
				{ echo "option --$o of '$verb' is not in pisb.fish"; bad=1; }
		done
	done
	for o in $(global_opts); do
		grep -Fq -- "--$o" "$comp/pisb.bash" || { echo "global option --$o is not in pisb.bash"; bad=1; }
	done
	return $bad
}

# Roff warnings and the required sections of one page.
check_page() {
	local page=$1 out
	out=$(groff -man -ww -z "$page" 2>&1)
	[ -z "$out" ] || { echo "$(basename "$page"): groff -man -ww says: $out"; return 1; }
	grep -qx '.SH EXIT STATUS' "$page" || grep -qx '.SH "EXIT STATUS"' "$page" ||
		{ echo "$(basename "$page"): no EXIT STATUS section"; return 1; }
	grep -qx '.SH EXAMPLES' "$page" || { echo "$(basename "$page"): no EXAMPLES section"; return 1; }
}

# The "$ " lines of the .EX blocks marked `.\" runnable` in PAGE, as a bash
# script that stops at the first line that fails, naming it.
examples_script() {
	echo 'set -o pipefail'
	# whatever an example leaves running in the state dir it names is removed
	echo 'trap '\''for n in $(pisb list -q 2>/dev/null); do pisb destroy "$n" --confirm "$n" >/dev/null 2>&1; done'\'' EXIT'
	awk '/^\.\\" runnable$/ { want = 1; next }
	     want && /^\.EX$/ { on = 1; want = 0; next }
	     on && /^\.EE$/ { on = 0; next }
	     on && /^\$ / { sub(/^\$ /, ""); gsub(/\\-/, "-"); gsub(/\\\(aq/, "\047");
			     gsub(/\\\(dq/, "\""); gsub(/\\e/, "\\"); print }' "$1" |
	while IFS= read -r cmd; do
		printf '%s\n' "$cmd"
		printf 'rc=$?; if [ $rc -ne 0 ]; then echo "example failed with status $rc: %s" >&2; exit 1; fi\n' \
			"$(printf '%s' "$cmd" | sed 's/["$`\\]/\\&/g')"
	done
}

# Run the runnable examples of PAGE from the top of the source tree.
run_examples() {
	local page=$TOP/man/$1 script=$BATS_TEST_TMPDIR/examples-$1.sh
	[ -f "$page" ] || { echo "missing man page $1"; return 1; }
	examples_script "$page" >"$script"
	[ "$(grep -c '^rc=' "$script")" -ge "${2:-1}" ] || { echo "$1: fewer runnable examples than ${2:-1}"; return 1; }
	(cd "$TOP" && TMPDIR=$BATS_TEST_TMPDIR bash "$script")
}

# ---- completions -------------------------------------------------------------------

@test "the committed completion files are what 'pisb completion' generates" {
	for pair in bash:pisb.bash zsh:_pisb fish:pisb.fish; do
		run -0 --separate-stderr pisb completion "${pair%%:*}"
		diff <(printf '%s\n' "$output") "$TOP/completions/${pair#*:}" ||
			{ echo "completions/${pair#*:} is stale: run 'make completions'"; return 1; }
	done
	run -2 pisb completion tcsh
}

@test "every verb and option is in each completion script" {
	run check_completions "$TOP/completions"
	echo "$output"
	[ "$status" -eq 0 ]
}

@test "bash completion: registered, and completes verbs, options and sandbox names" {
	require_userns
	pisb create demo >/dev/null 2>&1
	run -0 bash -c '
		source "$1/completions/pisb.bash"
		complete -p pisb
		c() { COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMPREPLY=(); _pisb; echo "${COMPREPLY[*]}"; }
		c pisb exec
		c pisb exec demo --ti
		c pisb create de
		c pisb grep demo -
		c pisb ""' _ "$TOP"
	[ "${lines[0]}" = "complete -F _pisb pisb" ]
	[ "${lines[1]}" = "exec exec-status exec-kill" ]
	[ "${lines[2]}" = "--timeout-ms" ]
	[ "${lines[3]}" = "demo" ]
	[[ " ${lines[4]} " == *" -i "* && " ${lines[4]} " == *" -C "* && " ${lines[4]} " == *" --state-dir "* ]]
	for v in $(verbs); do [[ " ${lines[5]} " == *" $v "* ]] || { echo "no $v at the first word"; return 1; }; done
}

@test "zsh completion parses, and offers verbs and a verb's options" {
	require_cmd zsh
	run -0 --separate-stderr zsh -n "$TOP/completions/_pisb"
	[ "$(head -n 1 "$TOP/completions/_pisb")" = "#compdef pisb" ]
	# stand-ins for the completion system: print what it was given
	run -0 --separate-stderr zsh -fc '
		_describe() { print -l -- ${(P)2}; }
		_arguments() { print -l -- "$@"; }
		words=(pisb ex); CURRENT=2; source "$1/completions/_pisb"
		words=(pisb exec ""); CURRENT=3; source "$1/completions/_pisb"' _ "$TOP"
	[[ $output == *"exec-status:new output and status of a detached command"* ]]
	[[ $output == *"verify:audit a running sandbox's isolation live"* ]]
	[[ $output == *"--timeout-ms=[wait at most N ms (0-60000), then return a handle"* ]]
	[[ $output == *"1:sandbox:_pisb_names"* ]]
}

@test "fish completion parses, and completes verbs and a verb's options" {
	require_cmd fish
	run -0 --separate-stderr fish -n "$TOP/completions/pisb.fish"
	run -0 --separate-stderr fish -c 'source $argv[1]/completions/pisb.fish
		complete -C "pisb exec-"; complete -C "pisb exec demo --ti"; complete -C "pisb ver"' "$TOP"
	[[ $output == *exec-status* && $output == *exec-kill* ]]
	[[ $output == *--timeout-ms* ]]
	[[ $output == *"verify	audit a running sandbox's isolation live"* ]]
}

# ---- man pages -----------------------------------------------------------------------

@test "every verb is in pisb(1) and in the man page of the binary that owns it" {
	run check_verbs_in_pages "$TOP/man"
	echo "$output"
	[ "$status" -eq 0 ]
}

@test "every option of every verb is in its owner's man page, the global ones in pisb(1)" {
	run check_opts_in_pages "$TOP/man"
	echo "$output"
	[ "$status" -eq 0 ]
}

@test "every verb's --help works and names its man page" {
	for verb in $(verbs); do
		is_dispatcher_verb "$verb" && continue
		run -0 --separate-stderr pisb "$verb" --help
		[[ ${lines[-1]} == "See pisb help $verb (man pisb-"*")." ]] || { echo "$verb: ${lines[-1]}"; return 1; }
	done
}

@test "every man page is clean under groff -man -ww and has EXIT STATUS and EXAMPLES" {
	require_cmd groff
	local bad=0 n=0
	for page in "$TOP"/man/*.[1-8]; do
		n=$((n + 1))
		check_page "$page" || bad=1
	done
	[ "$n" -ge 7 ]
	[ "$bad" -eq 0 ]
}

@test "the pages every binary points at exist" {
	for b in pisb pisb-create pisb-exec pisb-fs pisb-svc pisb-docker pisb-gc pisb-renew; do
		[ -f "$TOP/man/$b.1" ] || { echo "missing man page man/$b.1"; return 1; }
	done
	[ -f "$TOP/man/pisb-state.5" ]
	[ -f "$TOP/man/pisb.yaml.5" ]
}

@test "pisb(1) documents the action keys that are not options (positionals, command)" {
	run -0 --separate-stderr pisb action '{}'
	help=$output
	for verb in $(verbs); do
		is_dispatcher_verb "$verb" && continue
		camel=$(for o in $(verb_opts "$verb"); do sed -E 's/-([a-z])/\U\1/g' <<<"$o"; done)
		for k in $(jq -r --arg v "$verb" '.actions[] | select(.action == $v) | .args | keys[]' <<<"$help"); do
			grep -qx "$k" <<<"$camel" && continue
			roff_has_verb "$TOP/man/pisb.1" "$k" || { echo "action key '$k' of '$verb' is not in pisb.1"; return 1; }
		done
	done
}

@test "runnable examples of pisb(1) run" {
	require_userns
	run_examples pisb.1 8
}

@test "runnable examples of pisb-create(1) run" {
	require_userns
	run_examples pisb-create.1 10
}

@test "runnable examples of pisb-exec(1) run" {
	require_userns
	run_examples pisb-exec.1 9
}

@test "runnable examples of pisb-state(5) run" {
	require_userns
	run_examples pisb-state.5 9
}

@test "runnable examples of pisb-gc(1) run" {
	require_userns
	run_examples pisb-gc.1 4
}

@test "runnable examples of pisb-docker(1) run" {
	require_userns
	run_examples pisb-docker.1 5
}

# ---- the action surface speaks the table's keys --------------------------------------

@test "pisb action '{}' lists every verb a user can run" {
	run -0 --separate-stderr pisb action '{}'
	listed=$(jq -r '.actions[].action' <<<"$output" | sort)
	expected=$(verbs | grep -vxE 'action|help|completion' | sort)
	[ "$listed" = "$expected" ]
	run -0 --separate-stderr pisb action help
	[ "$(jq -r '.actions[].action' <<<"$output" | sort)" = "$expected" ]
}

@test "action keys are the table's options in camelCase, plus positionals and command" {
	run -0 --separate-stderr pisb action '{}'
	help=$output
	for verb in $(verbs); do
		is_dispatcher_verb "$verb" && continue
		keys=$(jq -r --arg v "$verb" '.actions[] | select(.action == $v) | .args | keys[]' <<<"$help" | sort)
		camel=$(for o in $(verb_opts "$verb"); do sed -E 's/-([a-z])/\U\1/g' <<<"$o"; done | sort)
		# every option is a key
		for k in $camel; do grep -qx "$k" <<<"$keys" || { echo "$verb: option key '$k' missing"; return 1; }; done
		# every other key is a positional or command
		for k in $keys; do
			grep -qx "$k" <<<"$camel" && continue
			case $k in name | handle | user | path | glob | pattern | service | hostDir | op | verb | command) ;;
			*) echo "$verb: key '$k' is neither an option nor a known positional"; return 1 ;;
			esac
		done
		# dashdash verbs take command, the others do not
		if [[ $(pisb "$verb" --help | head -n 1) == *" -- CMD"* ]]; then
			grep -qx command <<<"$keys" || { echo "$verb: no command key"; return 1; }
		fi
	done
}

@test "an unknown action key exits 2 naming it, for every verb" {
	for verb in $(verbs); do
		is_dispatcher_verb "$verb" && continue
		run -2 --separate-stderr pisb action "{\"action\":\"$verb\",\"frobnicate\":1}"
		jq -e --arg v "$verb" '.error.exit == 2 and .error.code == "usage"
			and (.error.message | contains("unknown key") and contains("frobnicate"))' <<<"$output" ||
			{ echo "$verb: $output"; return 1; }
		[[ $stderr == *"fatal: "*frobnicate* ]]
	done
	run -2 --separate-stderr pisb action '{"action":"frobnicate"}'
	jq -e '.error.message | contains("frobnicate")' <<<"$output"
}

@test "a value of the wrong type exits 2 naming the key, for every key of every verb" {
	run -0 --separate-stderr pisb action '{}'
	jq -r '.actions[] | .action as $v | .args | to_entries[] | [$v, .key, .value] | @tsv' <<<"$output" \
		> "$BATS_TEST_TMPDIR/keys"
	# the calls run in one child shell (a loop in the test body pays bats'
	# per-command trap every round), then one jq checks every answer
	cat > "$BATS_TEST_TMPDIR/probe" <<'EOF'
while IFS=$'\t' read -r verb key type; do
	case $type in
	integer) bad='"12"' ;;
	boolean) bad='"yes"' ;;
	*) bad='7' ;;
	esac
	out=$(pisb action "{\"action\":\"$verb\",\"$key\":$bad}" 2>/dev/null)
	printf '%s\t%s\t%s\t%s\t%s\n' "$?" "$verb" "$key" "$bad" "$out"
done
EOF
	bash "$BATS_TEST_TMPDIR/probe" < "$BATS_TEST_TMPDIR/keys" > "$BATS_TEST_TMPDIR/answers"
	[ "$(wc -l < "$BATS_TEST_TMPDIR/answers")" -eq "$(wc -l < "$BATS_TEST_TMPDIR/keys")" ]
	[ "$(wc -l < "$BATS_TEST_TMPDIR/answers")" -ge 60 ]
	# every answer: exit status 2, error.exit 2, a message naming the key
	run -0 jq -rR 'split("\t") | . as [$rc, $verb, $key, $bad] | (.[4:] | join("\t")) as $out
		| ($out | try fromjson catch null) as $o
		| select($rc != "2" or ($o | .error.exit?) != 2 or (($o | .error.message? // "") | contains($key) | not))
		| "\($verb).\($key) = \($bad): exit \($rc): \($out)"' "$BATS_TEST_TMPDIR/answers"
	[ -z "$output" ]
}

# ---- the checks can fail ------------------------------------------------------------

@test "the verb check fails on a page that lost a verb, and on a missing page" {
	cp -r "$TOP/man" "$BATS_TEST_TMPDIR/man"
	sed -i '/exec\\-kill/d' "$BATS_TEST_TMPDIR/man/pisb-exec.1"
	rm "$BATS_TEST_TMPDIR/man/pisb-gc.1"
	run check_verbs_in_pages "$BATS_TEST_TMPDIR/man"
	[ "$status" -eq 1 ]
	[[ $output == *"verb 'exec-kill' is not in pisb-exec.1"* ]]
	[[ $output == *"verb 'gc': its man page pisb-gc.1 is missing"* ]]
}

@test "the option check fails on a page that lost an option" {
	cp -r "$TOP/man" "$BATS_TEST_TMPDIR/man"
	sed -i 's/\\-\\-owner\\-pid/\\-\\-owner/g' "$BATS_TEST_TMPDIR/man/pisb-create.1"
	sed -i 's/\\-\\-quiet//g' "$BATS_TEST_TMPDIR/man/pisb.1"
	run check_opts_in_pages "$BATS_TEST_TMPDIR/man"
	[ "$status" -eq 1 ]
	[[ $output == *"option --owner-pid of 'create' is not in pisb-create.1"* ]]
	[[ $output == *"option --owner-pid of 'connect' is not in pisb-create.1"* ]]
	[[ $output == *"global option --quiet is not in pisb.1"* ]]
}

@test "the completion check fails on scripts that lost a verb or an option" {
	cp -r "$TOP/completions" "$BATS_TEST_TMPDIR/comp"
	sed -i 's/ --dry-run//' "$BATS_TEST_TMPDIR/comp/pisb.bash"
	sed -i "/'exec-kill:/d" "$BATS_TEST_TMPDIR/comp/_pisb"
	sed -i "/__pisb_is grep' -l ignore-case/d" "$BATS_TEST_TMPDIR/comp/pisb.fish"
	run check_completions "$BATS_TEST_TMPDIR/comp"
	[ "$status" -eq 1 ]
	[[ $output == *"option --dry-run of 'create' is not in pisb.bash"* ]]
	[[ $output == *"verb 'exec-kill' is not offered by _pisb"* ]]
	[[ $output == *"option --ignore-case of 'grep' is not in pisb.fish"* ]]
}

@test "the page check fails on roff warnings and missing sections" {
	require_cmd groff
	printf '.TH X 1\n.SH NAME\nx \\- y\n.SH EXAMPLES\n.BR\n' >"$BATS_TEST_TMPDIR/x.1"
	run check_page "$BATS_TEST_TMPDIR/x.1"
	[ "$status" -eq 1 ]
	printf '.TH X 1\n.SH NAME\nx \\- y\n.SH EXAMPLES\nx\n' >"$BATS_TEST_TMPDIR/y.1"
	run check_page "$BATS_TEST_TMPDIR/y.1"
	[ "$status" -eq 1 ]
	[[ $output == *"no EXIT STATUS section"* ]]
}

@test "a runnable example that fails fails the run, naming the line" {
	printf '.SH EXAMPLES\n.\\" runnable\n.EX\n$ true\n$ pisb list \\-\\-frob\n.EE\n' >"$BATS_TEST_TMPDIR/z.1"
	examples_script "$BATS_TEST_TMPDIR/z.1" >"$BATS_TEST_TMPDIR/z.sh"
	run bash "$BATS_TEST_TMPDIR/z.sh"
	[ "$status" -eq 1 ]
	[[ $output == *"example failed with status 2: pisb list --frob"* ]]
}
