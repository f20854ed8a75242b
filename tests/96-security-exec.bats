#!/usr/bin/env bats
# Issue 18.3: the caller's terminal never enters the sandbox.  An attached
# `pisb exec` on a real terminal (tmux) gives the command a pty of the
# sandbox's own devpts, hung up when the command ends: what it leaves behind
# can neither read what the user types next nor write to the terminal.
load helpers

setup_file() {
	export PI_SANDBOX_HOME="$BATS_FILE_TMPDIR/state"
	unshare -Ur true 2>/dev/null || return 0
	pisb create tt >/dev/null
}

teardown_file() {
	pisb destroy tt --confirm tt >/dev/null 2>&1 || true
}

setup() {
	export PI_SANDBOX_HOME="$BATS_FILE_TMPDIR/state"
	require_userns
	require_cmd tmux
	T="$BATS_TEST_TMPDIR/tmux.sock"
	tmux -S "$T" new-session -d -x 120 -y 40 \
		"env -i PATH='$PATH' PI_SANDBOX_HOME='$PI_SANDBOX_HOME' PISB_EXEC_PATH='$PISB_EXEC_PATH' TERM=xterm HOME='$BATS_TEST_TMPDIR' PS1='HOST> ' bash --norc --noprofile -i"
	prompt_ready
}

teardown() {
	tmux -S "$T" kill-server 2>/dev/null || true
	pisb exec tt -- pkill -f pisb-attack 2>/dev/null || true
	if [ -n "${USER_ST:-}" ]; then
		as_user pisb --state-dir "$USER_ST/s" destroy tu --confirm tu >/dev/null 2>&1 || true
		rm -rf "$USER_ST"
	fi
}

# the host shell waits for input: its prompt is the last line shown
prompt_ready() {
	for i in $(seq 100); do screen | grep -v '^$' | tail -1 | grep -q '^HOST>$' && return 0; sleep 0.1; done
	echo "no prompt:"; screen
	return 1
}
type_line() { tmux -S "$T" send-keys -l "$1"; tmux -S "$T" send-keys Enter; }
screen() { tmux -S "$T" capture-pane -p -S -200; }
# wait (at most 10 s) until the terminal shows a line matching ERE
screen_has() {
	for i in $(seq 100); do screen | grep -Eq -- "$1" && return 0; sleep 0.1; done
	echo "terminal never showed /$1/:"; screen
	return 1
}

@test "a double-forked child cannot read or write the caller's terminal after exec returns" {
	pisb exec tt -- rm -f /tmp/got /tmp/got-tty /tmp/got-reopen /tmp/attack-done
	# the child keeps fds 0/1/2, ignores the hangup, leaves the session,
	# waits for exec to return, then reads what comes and writes to the terminal
	cat > "$BATS_TEST_TMPDIR/attack.sh" <<-'A'
	sleep 2
	echo INJECTED-OUTPUT >&1
	echo INJECTED-ERROR >&2
	timeout 4 cat /proc/self/fd/0 > /tmp/got 2>&1
	timeout 2 cat > /tmp/got-tty 2>&1 < /dev/tty
	t=$(readlink /proc/self/fd/0); timeout 2 cat > /tmp/got-reopen 2>&1 < "$t"
	echo done > /tmp/attack-done
	A
	pisb exec tt -- sh -c 'cat > /tmp/pisb-attack.sh' < "$BATS_TEST_TMPDIR/attack.sh"
	type_line "pisb exec tt --sh '(trap \"\" HUP; setsid sh /tmp/pisb-attack.sh &) ; echo launched'; echo EXITED=\$?"
	screen_has '^EXITED=0'
	prompt_ready
	# what the user types next goes to the host shell, and only there
	type_line "echo TYPED-SECRET-ONE"
	sleep 2.5
	type_line "echo TYPED-SECRET-TWO"
	screen_has '^TYPED-SECRET-TWO'
	for i in $(seq 300); do pisb exec tt -- test -e /tmp/attack-done && break; sleep 0.1; done
	run -0 pisb exec tt -- cat /tmp/attack-done
	run -0 pisb exec tt -- cat /tmp/got /tmp/got-tty /tmp/got-reopen
	[[ $output != *TYPED-SECRET* ]]
	run -0 screen
	[[ $output != *INJECTED-OUTPUT* ]]
	[[ $output != *INJECTED-ERROR* ]]
	[[ $output == *launched* ]]
}

@test "the command's terminal is a pty of the sandbox; window size, raw input and Ctrl-C reach it" {
	type_line "pisb exec tt --sh 'readlink /proc/self/fd/0 /proc/self/fd/1; stty size; read x; echo got=\$x'; echo EXITED=\$?"
	screen_has '^[0-9]+ [0-9]+'
	type_line "typed-line"
	screen_has '^EXITED=0'
	run -0 screen
	[[ $output == *"/dev/pts/"* ]]
	[[ $output == *"got=typed-line"* ]]
	[[ $output == *"40 120"* ]]
	# Ctrl-C is a byte on the raw terminal: the pty's line discipline signals the command
	type_line "pisb exec tt --sh 'trap \"echo got-int; exit 3\" INT; echo armed; sleep 50 & wait'; echo EXITED=\$?"
	screen_has '^armed'
	tmux -S "$T" send-keys C-c
	screen_has '^EXITED=3'
	run -0 screen
	[[ $output == *got-int* ]]
	# and the terminal is back in its own mode
	type_line "stty -a | grep -o ' -\\?icanon'"
	screen_has '^ icanon'
}

@test "TIOCSTI into the terminal it got never types into the host shell" {
	require_cmd python3
	pwned="$BATS_TEST_TMPDIR/tiocsti-pwned"
	cat > "$BATS_TEST_TMPDIR/sti.py" <<-P
	import fcntl, os, sys, termios, time
	later = len(sys.argv) > 1
	if later:
	    os.setsid()
	    time.sleep(2)
	for c in "touch $pwned\n":
	    try:
	        fcntl.ioctl(0, termios.TIOCSTI, c.encode())
	    except OSError as e:
	        pass
	P
	pisb exec tt -- sh -c 'cat > /tmp/pisb-attack-sti.py' < "$BATS_TEST_TMPDIR/sti.py"
	# while the command runs, and from a child left behind
	type_line "pisb exec tt --sh 'python3 /tmp/pisb-attack-sti.py; (python3 /tmp/pisb-attack-sti.py later &); echo sti-done'; echo EXITED=\$?"
	screen_has '^EXITED=0'
	sleep 3
	type_line "echo after-wait"
	screen_has '^after-wait'
	[ ! -e "$pwned" ]
}

@test "no fd of the caller's but 0, 1 and 2 enters the sandbox" {
	run -0 pisb exec tt -- ls /proc/self/fd 5</etc/hostname 7>"$BATS_TEST_TMPDIR/w"
	[ "$(echo $output)" = "0 1 2 3" ]
}

@test "the same for an unprivileged user: the child left behind reads nothing typed" {
	st=$(mktemp -d /tmp/pisb-ttyuser.XXXXXX); chmod 755 "$st"
	chown pisbtest "$st" 2>/dev/null || { rm -rf "$st"; skip "machine lacks: the test user pisbtest"; }
	USER_ST=$st
	run -0 as_user pisb --state-dir "$st/s" create tu
	printf 'sleep 2\necho INJECTED-OUTPUT\ntimeout 4 cat /proc/self/fd/0 > /tmp/got 2>&1\necho done > /tmp/attack-done\n' |
		as_user pisb --state-dir "$st/s" exec tu -- sh -c 'cat > /tmp/pisb-attack.sh'
	# a server of its own on a new socket: starting one on the socket of a
	# server still shutting down can fail ("server exited unexpectedly")
	tmux -S "$T" kill-server
	T="$BATS_TEST_TMPDIR/tmux-user.sock"
	tmux -S "$T" new-session -d -x 120 -y 40 \
		"runuser -u pisbtest -- env -i PATH='$PATH' PISB_EXEC_PATH='$PISB_EXEC_PATH' TERM=xterm HOME=/tmp PS1='HOST> ' bash --norc --noprofile -i"
	prompt_ready
	type_line "pisb --state-dir $st/s exec tu --sh '(trap \"\" HUP; setsid sh /tmp/pisb-attack.sh &) ; echo launched'; echo EXITED=\$?"
	screen_has '^EXITED=0'
	prompt_ready
	type_line "echo TYPED-SECRET-ONE"
	sleep 2.5
	type_line "echo TYPED-SECRET-TWO"
	screen_has '^TYPED-SECRET-TWO'
	for i in $(seq 300); do as_user pisb --state-dir "$st/s" exec tu -- test -e /tmp/attack-done && break; sleep 0.1; done
	run -0 as_user pisb --state-dir "$st/s" exec tu -- cat /tmp/got
	[[ $output != *TYPED-SECRET* ]]
	run -0 screen
	[[ $output != *INJECTED-OUTPUT* ]]
	# and a background job returns at once for this user too
	run -0 as_user timeout 20 pisb --state-dir "$st/s" exec tu --sh 'sleep 304 & echo started'
	[ "$output" = started ]
	run -0 as_user pisb --state-dir "$st/s" exec tu -- pgrep -f 'sleep 304'
	run -0 as_user pisb --state-dir "$st/s" destroy tu --confirm tu
}
