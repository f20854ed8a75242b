#!/usr/bin/env bats
# The extension in Pi's interactive terminal UI, typed at through tmux: the
# user's ! command, the /sandbox command (a terminal inside the sandbox), and
# what the extension shows there: the status line and its change count, the
# notifications of /sandbox diff.
load helpers
load pi/helpers

setup_file() {
	pi_require_local_driver
	command -v tmux >/dev/null || skip "machine lacks: tmux"
	pi_install_legacy
}

setup() {
	pi_require_local_driver
	pi_env "$BATS_TEST_TMPDIR"
	SB=$(pi_name tty)
	export PISB_SANDBOX=$SB PISB_LIFECYCLE=keep
	export PISB_TEST_HOST_SECRET=hunter2-from-host-env
	TMUX_S="pisb-pi-$$-$BATS_TEST_NUMBER"
	export TMUX_TMPDIR="$BATS_TEST_TMPDIR"
	# the first prompt makes the model call bash once (the project note's test)
	printf '%s\n' '[{"tools":[{"name":"bash","args":{"command":"echo model-ran-$((6*7)) | tee model.txt"}}]},{"text":"done"}]' > "$BATS_TEST_TMPDIR/script.json"
	local pi_cmd
	pi_cmd="cd '$PROJ' && PI_SCRIPT='$BATS_TEST_TMPDIR/script.json' node '$PI_DIR/node_modules/@mariozechner/pi-coding-agent/dist/cli.js'"
	pi_cmd+=" --no-session --offline --provider scripted --model m1 -e '$PI_DIR/scripted-provider.ts' -e '$PI_EXT'"
	tmux new-session -d -s "$TMUX_S" -x 160 -y 48 "$pi_cmd; echo PI-EXITED; sleep 30"
	# the sandbox is ready, and Pi takes commands (session_start is done),
	# once the status line names it with its driver ("creating sandbox
	# NAME…" before)
	screen_wait "sandbox $SB (local)" 60
}

teardown() {
	tmux kill-session -t "$TMUX_S" 2>/dev/null || true
	pi_destroy "$SB"
}

screen() { tmux capture-pane -p -t "$TMUX_S" -S -200; }

# screen_wait TEXT SECONDS: wait until the terminal shows TEXT
screen_wait() {
	local i
	for ((i = 0; i < $2 * 4; i++)); do
		screen | grep -qF -- "$1" && return 0
		sleep 0.25
	done
	echo "--- screen, waiting for '$1':"
	screen
	return 1
}

type_line() {
	tmux send-keys -t "$TMUX_S" -l -- "$1"
	sleep 0.3
	tmux send-keys -t "$TMUX_S" Enter
}

@test "interactive !: the user's command runs in the sandbox" {
	type_line '!echo "dir=$(pwd) secret=[$PISB_TEST_HOST_SECRET]"; echo typed > typed.txt'
	screen_wait "dir=/workspace secret=[]" 30
	run -0 pisb exec "$SB" --sh "cat /workspace/typed.txt"
	[ "$output" = typed ]
	[ ! -e "$PROJ/typed.txt" ]
}

@test "/sandbox opens a terminal inside the sandbox and returns to Pi" {
	# typed at once: a command Pi takes must run (one typed while
	# session_start ran was dropped, with the status line already up)
	tmux send-keys -t "$TMUX_S" -l -- "/sandbox"
	tmux send-keys -t "$TMUX_S" Enter
	# the sandbox's shell prompt (user@NAME:DIR), not a fixed wait: under
	# load the shell can take seconds to come, and a line typed before it
	# goes to Pi's editor
	screen_wait "@$SB:" 60
	type_line 'cd /workspace 2>/dev/null; echo "in-sandbox:$PISB_TEST_HOST_SECRET" > shell-was-here; exit'
	local i
	for ((i = 0; i < 120; i++)); do
		pisb exec "$SB" -- test -s /workspace/shell-was-here && break
		sleep 0.25
	done
	run -0 pisb exec "$SB" --sh "cat /workspace/shell-was-here"
	[ "$output" = "in-sandbox:" ]
	# back in Pi: the editor takes input again
	type_line '!echo back-in-pi'
	screen_wait "back-in-pi" 30
}

@test "the terminal shows the status line's change count and /sandbox diff's notification" {
	screen_wait "sandbox $SB (local) · 0 files changed" 30
	type_line '!echo from-the-user > tui.txt'
	screen_wait "sandbox $SB (local) · 1 file changed (/sandbox diff)" 30
	type_line "/sandbox diff"
	screen_wait "1 file(s) changed in sandbox '$SB' against $PROJ" 30
	screen_wait "+from-the-user" 5
	[ ! -e "$PROJ/tui.txt" ]
}

@test "the first tool result shows the extension's project note in the terminal" {
	# the note is on the model's first tool result, not on the user's ! command
	type_line '!echo user-cmd'
	screen_wait "user-cmd" 30
	run screen
	[[ $output != *"[pisb] "* ]]
	type_line 'run the command'
	screen_wait "model-ran-42" 60
	screen_wait "[pisb] the project" 30
	# Pi wraps the line at the terminal's width: its words, joined again
	local text
	text=$(screen | sed -n '/\[pisb\] the project/,$p' | tr -s ' \n' '  ')
	echo "note: $text"
	[[ $text == *"[pisb] the project $PROJ is a copy in /workspace (sandbox '$SB'): changes stay in the sandbox until the user reviews them with /sandbox diff"* ]]
	[ "$(screen | grep -c '\[pisb\] the project')" -eq 1 ]
	# the model's command ran in the sandbox's copy, not in the host project
	run -0 pisb exec "$SB" -- cat /workspace/model.txt
	[ "$output" = model-ran-42 ]
	[ ! -e "$PROJ/model.txt" ]
}
