#!/usr/bin/env bats
# The completion scripts, driven: bash's _pisb with COMP_WORDS and
# COMP_CWORD set as readline sets them, fish's own `complete -C`, and zsh's
# _pisb against stand-ins for the completion system (zsh completes only
# inside its line editor, so the test sees what _pisb hands to _arguments).
# What they must do: find the verb after global options and their values;
# complete an option's value by its placeholder (host files, host
# directories, sandbox names, nothing for a number or a path inside the
# sandbox); complete a positional by its place in the synopsis (sandbox
# names only for NAME, host directories for HOSTDIR).
load helpers

# a stopped local sandbox that `pisb list` shows: its record is enough
fake_sandbox() {
	mkdir -p "$1/instances/$2"
	chmod 700 "$1"
	jq -n --arg n "$2" '{version:1,name:$n,driver:"local",createdAt:1,template:null,owner:{pid:0,start:0},sessionId:null,remote:null,config:{version:1}}' \
		>"$1/instances/$2/record.json"
}

setup() {
	pisb_test_setup
	fake_sandbox "$PI_SANDBOX_HOME" demo
	fake_sandbox "$PI_SANDBOX_HOME" dev
	OTHER=$BATS_TEST_TMPDIR/other
	fake_sandbox "$OTHER" elsewhere
	W=$BATS_TEST_TMPDIR/work
	mkdir -p "$W/conf.d/sub" "$W/cache dir"
	touch "$W/config.yaml" "$W/conf.d/a.yaml"
	cd "$W"
}

# bash: what _pisb offers for the last of "$@" (the words as bash splits
# them: "--file=x" is "--file" "=" "x"), one per line, sorted
comp() {
	bash -c 'source "$1/completions/pisb.bash"; shift
		COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMPREPLY=(); _pisb
		printf "%s\n" "${COMPREPLY[@]}"' _ "$TOP" "$@" | sed '/^$/d' | sort
}

# "$1" is what comp "${@:2}" offers, written on one line
offers() {
	local want=$1 got
	shift
	got=$(comp "$@" | paste -sd' ')
	[ "$got" = "$want" ] || { echo "pisb ${*:2}<TAB>: expected '$want', got '$got'"; return 1; }
}

@test "bash: registered without readline's filename fallback (an empty answer stays empty)" {
	run -0 bash -c 'source "$1/completions/pisb.bash"; complete -p pisb' _ "$TOP"
	[ "$output" = "complete -F _pisb pisb" ]
}

@test "bash: the verb is found after global options and their values" {
	offers "--timeout-ms" pisb --json exec --ti
	offers "--timeout-ms" pisb --state-dir "$W" -v exec --ti
	offers "--timeout-ms" pisb --state-dir = "$W" exec --ti
	offers "--timeout-ms" pisb --wait exec --ti
	offers "--timeout-ms" pisb --wait = 5 exec --ti
	offers "exec exec-kill exec-status" pisb --json ex
	offers "demo dev" pisb --json -q exec d
	# still the verb's place: every verb is offered
	run -0 comp pisb --state-dir "$W" --json ""
	for v in $(pisb --list-commands); do
		grep -qx -- "$v" <<<"$output" || { echo "no verb $v after global options"; return 1; }
	done
	# the names come from the state dir given on the line
	offers "elsewhere" pisb --state-dir "$OTHER" exec ""
	offers "elsewhere" pisb exec --state-dir "$OTHER" ""
}

@test "bash: option values: host files, host directories, sandbox names, or nothing" {
	# FILE: host files
	offers "cache dir conf.d config.yaml" pisb create x -f ""
	offers "conf.d config.yaml" pisb create x --file co
	offers "conf.d config.yaml" pisb create x --file = co
	offers "cache dir conf.d config.yaml" pisb create x --file =
	offers "conf.d/a.yaml conf.d/sub" pisb write demo /a --from conf.d/
	offers "config.yaml" pisb edit demo /a --old-file config
	offers "config.yaml" pisb edit demo /a --new-file config
	offers "config.yaml" pisb validate -f config
	offers "config.yaml" pisb connect demo -f config
	# a host DIR (--state-dir): directories only
	offers "cache dir conf.d" pisb --state-dir ""
	offers "cache dir conf.d" pisb list --state-dir ""
	offers "conf.d/sub" pisb --state-dir conf.d/
	# NAME: sandboxes
	offers "demo dev" pisb destroy demo --confirm ""
	# DRIVER: the registry's drivers (pisb drivers -q); a choice: its words
	offers "local opensandbox sbx vm" pisb create x --driver ""
	offers "sbx" pisb create x --driver s
	offers "keep remove stop" pisb release demo --policy ""
	# numbers: nothing (not sandbox names, not files)
	offers "" pisb exec demo --timeout-ms ""
	offers "" pisb exec-status demo h --timeout-ms ""
	offers "" pisb gc --hours ""
	offers "" pisb logs demo -n ""
	offers "" pisb grep demo x -C ""
	offers "" pisb read demo /f --offset ""
	offers "" pisb renew --interval ""
	offers "" pisb create x --owner-pid ""
	offers "" pisb --wait = ""
	# a directory inside the sandbox, and free text: nothing from the host
	offers "" pisb exec demo --cwd ""
	offers "" pisb find demo '*.c' --path ""
	offers "" pisb push demo . --to ""
	offers "" pisb exec demo --sh ""
	offers "" pisb create x --template ""
	# after a value, options again
	offers "--driver --dry-run" pisb create x -f config.yaml --dr
	# a value bash split at its = (K=V) is one value
	offers "demo dev" pisb exec -e K = V d
	offers "" pisb exec demo -e K = ""
	offers "" pisb exec demo -e K = V ""
}

@test "bash: positionals: sandbox names only for NAME, host directories for HOSTDIR, choices, else nothing" {
	offers "demo dev" pisb exec d
	offers "demo dev" pisb read ""
	offers "" pisb read demo ""
	offers "" pisb read demo /etc/passwd ""
	offers "" pisb exec-status demo ""
	offers "" pisb shell demo ""
	offers "" pisb grep demo ""
	offers "" pisb logs demo ""
	offers "build compose curl exec images import init load logs prune ps pull resources rm run start status stop verify" pisb docker demo ""
	offers "images import init" pisb docker demo i
	offers "cache dir conf.d" pisb push demo ""
	offers "conf.d/sub" pisb push demo conf.d/
	offers "" pisb pull demo ""
	offers "cache dir conf.d" pisb pull demo /src ""
	offers "" pisb list ""
	offers "" pisb gc ""
	# option values do not count as positionals
	offers "cache dir conf.d" pisb push --to /w demo ""
	offers "cache dir conf.d" pisb pull --state-dir "$PI_SANDBOX_HOME" demo /src ""
	offers "" pisb read demo --offset 3 ""
	# a choice in the synopsis
	offers "start status stop" pisb svc demo st
	offers "" pisb svc demo status ""
	offers "bash fish zsh" pisb completion ""
	offers "exec exec-kill exec-status" pisb help ex
	# after "--": the command's own words, nothing of ours
	offers "" pisb exec demo -- ""
	offers "" pisb exec demo -- ls -
	offers "" pisb svc demo start web -- ""
	# every verb whose synopsis starts with NAME offers sandboxes there
	for v in $(pisb --list-commands | grep -vxE 'help|completion'); do
		case $(pisb "$v" --help 2>/dev/null | head -n 1) in
		"usage: pisb $v NAME"*|"usage: pisb $v [NAME]"*) offers "demo dev" pisb "$v" d || return 1 ;;
		*) offers "" pisb "$v" d || return 1 ;;
		esac
	done
}

# ---- fish: its own completion engine ------------------------------------------------

# fish: the candidates (without descriptions) for each line given, one
# result line per input line, words sorted, "-" for none
fish_comp() {
	fish -c 'source $argv[1]/completions/pisb.fish
		for l in $argv[2..-1]
			set -l r (complete -C "$l" | string replace -r "\t.*" "" | sort | string join " ")
			test -n "$r"; and echo $r; or echo -
		end' "$TOP" "$@"
}

@test "fish: the verb after global options, option values and positionals by placeholder" {
	require_cmd fish
	run -0 --separate-stderr fish -n "$TOP/completions/pisb.fish"
	run -0 --separate-stderr fish_comp \
		"pisb --json exec --ti" \
		"pisb --state-dir $W exec --ti" \
		"pisb --state-dir $W ex" \
		"pisb --state-dir " \
		"pisb create x -f co" \
		"pisb edit demo /a --old-file config" \
		"pisb exec demo --timeout-ms " \
		"pisb gc --hours " \
		"pisb exec demo --cwd " \
		"pisb destroy demo --confirm d" \
		"pisb exec d" \
		"pisb read demo " \
		"pisb push demo " \
		"pisb pull demo /src " \
		"pisb svc demo st" \
		"pisb svc demo stop --ev" \
		"pisb exec demo -- " \
		"pisb completion " \
		"pisb --state-dir $OTHER exec " \
		"pisb exec --state-dir=$OTHER "
	[ "${lines[0]}" = "--timeout-ms" ]
	[ "${lines[1]}" = "--timeout-ms" ]
	[ "${lines[2]}" = "exec exec-kill exec-status" ]
	[ "${lines[3]}" = "cache\\ dir/ conf.d/" ] || [ "${lines[3]}" = "cache dir/ conf.d/" ]
	[ "${lines[4]}" = "conf.d/ config.yaml" ]
	[ "${lines[5]}" = "config.yaml" ]
	[ "${lines[6]}" = - ]
	[ "${lines[7]}" = - ]
	[ "${lines[8]}" = - ]
	[ "${lines[9]}" = "demo dev" ]
	[ "${lines[10]}" = "demo dev" ]
	[ "${lines[11]}" = - ]
	[ "${lines[12]}" = "cache\\ dir/ conf.d/" ] || [ "${lines[12]}" = "cache dir/ conf.d/" ]
	[ "${lines[13]}" = "cache\\ dir/ conf.d/" ] || [ "${lines[13]}" = "cache dir/ conf.d/" ]
	[ "${lines[14]}" = "start status stop" ]
	# svc's options, not those of the verb `stop` that is svc's operand
	[ "${lines[15]}" = - ]
	[ "${lines[16]}" = - ]
	[ "${lines[17]}" = "bash fish zsh" ]
	# the names come from the state dir given on the line
	[ "${lines[18]}" = elsewhere ]
	[ "${lines[19]}" = elsewhere ]
	[ "${#lines[@]}" = 20 ]
}

# ---- zsh: what _pisb hands to the completion system ---------------------------------

# zsh: run _pisb on the words "$@" (completing the last), with stand-ins
# that print what they were given
zsh_comp() {
	zsh -fc '
		_arguments() { print -r -- "words=(${words[*]}) CURRENT=$CURRENT"; print -rl -- "$@"; }
		_describe() { print -r -- "describe $1"; }
		top=$1; shift
		words=("$@"); CURRENT=$#
		source "$top/completions/_pisb"' _ "$TOP" "$@"
}

@test "zsh: the verb after global options; values and positionals by placeholder" {
	require_cmd zsh
	run -0 --separate-stderr zsh -n "$TOP/completions/_pisb"
	# the verb after global options and their values: _arguments sees the
	# verb's words only
	run -0 --separate-stderr zsh_comp pisb --json --state-dir /tmp exec --ti
	[ "${lines[0]}" = "words=(exec --ti) CURRENT=2" ]
	grep -q '^--timeout-ms=\[.*\]:N: $' <<<"$output"
	grep -qx '1:sandbox:_pisb_names' <<<"$output"
	run -0 --separate-stderr zsh_comp pisb --state-dir /tmp ""
	[ "$output" = "describe verb" ]
	run -0 --separate-stderr zsh_comp pisb -v ex
	[ "$output" = "describe verb" ]
	# a global option's value: a host directory
	run -0 --separate-stderr zsh_comp pisb --state-dir ""
	grep -q '^--state-dir=\[.*\]:DIR:_files -/$' <<<"$output"
	# FILE values are files, numbers and sandbox paths complete nothing
	run -0 --separate-stderr zsh_comp pisb create x -f ""
	grep -q '^--file=\[.*\]:FILE:_files$' <<<"$output"
	grep -q '^-f+\[.*\]:FILE:_files$' <<<"$output"
	grep -q '^--owner-pid=\[.*\]:PID: $' <<<"$output"
	run -0 --separate-stderr zsh_comp pisb edit demo /a --old-file ""
	grep -q '^--old-file=\[.*\]:FILE:_files$' <<<"$output"
	run -0 --separate-stderr zsh_comp pisb exec demo --cwd ""
	grep -q '^--cwd=\[.*\]:DIR: $' <<<"$output"
	run -0 --separate-stderr zsh_comp pisb destroy demo --confirm ""
	grep -q '^--confirm=\[.*\]:NAME:_pisb_names$' <<<"$output"
	# DRIVER: the registry's names; a choice: its words
	run -0 --separate-stderr zsh_comp pisb create x --driver ""
	grep -q '^--driver=\[.*\]:DRIVER:_pisb_drivers$' <<<"$output"
	run -0 --separate-stderr zsh_comp pisb release demo --policy ""
	grep -q '^--policy=\[.*\]:policy:(remove stop keep)$' <<<"$output"
	# positionals: names for NAME only, directories for HOSTDIR, choices
	run -0 --separate-stderr zsh_comp pisb pull demo /src ""
	grep -qx '1:sandbox:_pisb_names' <<<"$output"
	grep -qx '2:PATH: ' <<<"$output"
	grep -qx '3:HOSTDIR:_files -/' <<<"$output"
	run -1 grep -q '^\*' <<<"$output"
	run -0 --separate-stderr zsh_comp pisb push demo ""
	grep -qx '2:HOSTDIR:_files -/' <<<"$output"
	run -0 --separate-stderr zsh_comp pisb svc demo ""
	grep -q '^2:.*:(ensure status restart stop start preview.*)$' <<<"$output"
	grep -qx '3::SERVICE|PORT: ' <<<"$output"
	run -0 --separate-stderr zsh_comp pisb shell demo ""
	grep -qx '2::USER: ' <<<"$output"
}

# zsh for real: an interactive zsh in a pseudo-terminal (zpty) with
# compinit and completions/_pisb on fpath is sent LINE and a TAB; compadd
# is wrapped to print the matches it adds, between markers printed by the
# completion system's pre and post hooks.  Prints the matches, sorted.
zsh_real() {
	cat >"$BATS_TEST_TMPDIR/capture.zsh" <<-'EOF'
	zmodload zsh/zpty || exit 2
	top=$1 line=$2 init=$3
	cat >$init <<END
	PROMPT= RPROMPT=
	fpath=(${(q)top}/completions \$fpath)
	autoload -Uz compinit; compinit -u -D
	bindkey '^I' complete-word
	zstyle ':completion:*' insert-tab false
	compprefuncs=(_cap_begin) comppostfuncs=(_cap_end)
	_cap_begin() { print -r -- '<cap-begin>'; }
	_cap_end() { print -r -- '<cap-end>'; exit; }
	compadd() {
		local a
		for a in "\$@"; do
			case \$a in (-O|-A|-D) builtin compadd "\$@"; return;; (-) break;; esac
		done
		local -a got
		builtin compadd -O got "\$@"
		(( \$#got )) && print -rl -- "<m>"\${^got}
		builtin compadd "\$@"
	}
	print -r -- '<cap-ready>'
	END
	zpty cap zsh -f -i
	zpty -w cap "source ${(q)init}"
	zpty -r cap out '*<cap-ready>*' >/dev/null || exit 3
	zpty -w -n cap "$line"$'\t'
	on=0
	while zpty -r cap out; do
		case $out in
		(*'<cap-begin>'*) on=1 ;;
		(*'<cap-end>'*) break ;;
		(*'<m>'*) (( on )) && print -r -- ${${out#*<m>}%$'\r'*} ;;
		esac
	done
	zpty -d cap
	EOF
	local l
	for l in "$@"; do
		timeout 30 zsh -f "$BATS_TEST_TMPDIR/capture.zsh" "$TOP" "$l" "$BATS_TEST_TMPDIR/init.zsh" |
			sort -u | paste -sd' ' | sed 's/^$/-/'
	done
}

@test "zsh, completing for real: the verb after global options, values and positionals by placeholder" {
	require_cmd zsh
	zsh -fc 'zmodload zsh/zpty' || skip "machine lacks: the zsh/zpty module"
	run -0 zsh_real \
		"pisb --json exec --ti" \
		"pisb --state-dir $W ex" \
		"pisb --state-dir " \
		"pisb create x -f co" \
		"pisb create x --file=co" \
		"pisb exec demo --timeout-ms " \
		"pisb exec demo --cwd " \
		"pisb destroy demo --confirm d" \
		"pisb exec d" \
		"pisb read demo " \
		"pisb push demo " \
		"pisb pull demo /src " \
		"pisb svc demo st" \
		"pisb exec demo -- " \
		"pisb exec --state-dir $OTHER " \
		"pisb --state-dir=$OTHER exec "
	[ "${lines[0]}" = "--timeout-ms" ]
	[ "${lines[1]}" = "exec exec-kill exec-status" ]
	[ "${lines[2]}" = "cache\\ dir conf.d" ]
	[ "${lines[3]}" = "conf.d config.yaml" ]
	[ "${lines[4]}" = "conf.d config.yaml" ]
	[ "${lines[5]}" = - ]
	[ "${lines[6]}" = - ]
	[ "${lines[7]}" = "demo dev" ]
	[ "${lines[8]}" = "demo dev" ]
	[ "${lines[9]}" = - ]
	[ "${lines[10]}" = "cache\\ dir conf.d" ]
	[ "${lines[11]}" = "cache\\ dir conf.d" ]
	[ "${lines[12]}" = "start status stop" ]
	[ "${lines[13]}" = - ]
	[ "${lines[14]}" = elsewhere ]
	[ "${lines[15]}" = elsewhere ]
	[ "${#lines[@]}" = 16 ]
}
