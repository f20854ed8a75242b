#!/usr/bin/env bats
# The session's project through real Pi (legacy 0.73.1, the SDK driver) with
# a scripted model: the cwd is copied into the sandbox (pisb create
# --project), the first tool result says where it is and how changes come
# back, the agent's edit shows in /sandbox diff, /sandbox apply writes it into
# the host checkout after confirmation, a conflict writes nothing, the
# project's .env never reaches the agent, the model cannot apply; project.mode
# none, bind (edits on the host at once) and bind-ro (nothing can change).
load helpers
load pi/helpers
load fakes/opensandbox

setup_file() {
	pi_require_local_driver
	command -v git >/dev/null || skip "machine lacks: git"
	pi_install_legacy
}

setup() {
	pi_require_local_driver
	[ "$PI_FLAVOR" = legacy ] || skip "the SDK driver drives legacy Pi only"
	require_cmd jq
	pi_env "$BATS_TEST_TMPDIR"
	NAME=$(pi_name prj)
	export PISB_SANDBOX=$NAME
	g init -q
	printf 'alpha\nbeta\ngamma\n' > "$PROJ/a.txt"
	printf 'TOKEN=host-secret-42\n' > "$PROJ/.env"
	printf '.env\n' > "$PROJ/.gitignore"
	g add a.txt .gitignore .pi/sandbox.yaml
	g commit -qm init
	# lifecycle stop: the sandbox outlives one drive, so the test can look at it
	printf 'version: 1\ndriver: local\n' > "$PROJ/.pi/sandbox.yaml"
	export PISB_LIFECYCLE=keep
}

teardown() {
	pi_destroy "$NAME"
	os_fake_stop
}

# (safe.directory: a bind test gives the project to another user)
g() { git -C "$PROJ" -c safe.directory="$PROJ" -c user.email=t@example.com -c user.name=t "$@"; }

# script STEPS_JSON: the scripted model's steps, into $SCRIPT
script() {
	SCRIPT=$BATS_TEST_TMPDIR/steps.json
	printf '%s\n' "$1" > "$SCRIPT"
}

@test "the agent's edit: the first result names the project, /sandbox diff shows it, /sandbox apply writes exactly it" {
	script '[
	 {"tools":[{"name":"read","args":{"path":"a.txt"}}]},
	 {"tools":[{"name":"edit","args":{"path":"a.txt","edits":[{"oldText":"beta","newText":"BETA"}]}}]},
	 {"prompt":"/sandbox diff"},
	 {"prompt":"/sandbox apply"}]'
	run -0 drive PI_SCRIPT="$SCRIPT" DRIVE_UI=1 DRIVE_CONFIRM=1
	echo "$output"
	# the agent saw the project's file; the first result (only) carries the note
	jq -se '[.[] | select(.type=="tool")][0] | (.isError | not) and (.text | test("beta"))' <<<"$output"
	jq -se --arg p "$PROJ" '[.[] | select(.type=="tool")][0].note | startswith("[pisb] the project " + $p + " is a copy in /workspace") and contains("/sandbox diff") and contains("/sandbox apply") and (contains("\n") | not)' <<<"$output"
	jq -se '[.[] | select(.type=="tool")][1] | (.isError | not) and .note == ""' <<<"$output"
	# /sandbox diff: the unified diff of the edit, in a notification
	jq -se '[.[] | select(.type=="notify")][0] | .level == "info" and (.message | contains("--- a/a.txt\n+++ b/a.txt\n@@ -1,3 +1,3 @@\n alpha\n-beta\n+BETA\n gamma"))' <<<"$output"
	# the status line counted the change when the edit's result came, before /sandbox diff ran
	jq -se '[.[] | select(.type=="status" or .type=="tool" or .type=="notify")] | (map(.type == "tool" and .toolName == "edit") | index(true)) as $e | .[$e - 1] | .type == "status" and (.text | test("1 file changed"))' <<<"$output"
	jq -se '[.[] | select(.type=="status" or .type=="tool")] | (map(.type == "tool") | index(true)) as $r | .[$r - 1] | .type == "status" and (.text | test("· 0 files changed$"))' <<<"$output"
	# /sandbox apply asked first, then wrote
	jq -se '[.[] | select(.type=="confirm")] | length == 1 and (.[0].title | contains("apply")) and (.[0].message | contains("a.txt"))' <<<"$output"
	jq -se '[.[] | select(.type=="notify")][1] | .level == "info" and (.message | startswith("applied to ")) and (.message | contains("a.txt"))' <<<"$output"
	# the host checkout has exactly that change
	run -0 g diff
	diff -u <(printf '%s\n' 'diff --git a/a.txt b/a.txt' 'index' '--- a/a.txt' '+++ b/a.txt' '@@ -1,3 +1,3 @@' ' alpha' '-beta' '+BETA' ' gamma') \
		<(sed 's/^index .*/index/' <<<"$output")
	run -0 g status --porcelain
	[ "$output" = " M a.txt" ]
	# applied: nothing left to apply, so the quit says nothing of unapplied changes
	run -0 pisb diff "$NAME" --stat --json
	jq -e '.changes == []' <<<"$output"
}

@test "opensandbox (the fake server): the session's project is copied in; the agent's edit shows in /sandbox diff and /sandbox apply writes it" {
	os_fake_start
	printf 'version: 1\ndriver: opensandbox\nopensandbox: {domain: "127.0.0.1:%s", image: python:3.11}\n' "$OS_PORT" \
		> "$PROJ/.pi/sandbox.yaml"
	g add .pi/sandbox.yaml && g commit -qm opensandbox
	script '[
	 {"tools":[{"name":"edit","args":{"path":"a.txt","edits":[{"oldText":"beta","newText":"BETA"}]}}]},
	 {"prompt":"/sandbox diff"},
	 {"prompt":"/sandbox apply"}]'
	run -0 drive PI_SCRIPT="$SCRIPT" DRIVE_UI=1 DRIVE_CONFIRM=1
	echo "$output"
	jq -se --arg p "$PROJ" '[.[] | select(.type=="tool")][0] | (.isError | not) and (.note | startswith("[pisb] the project " + $p + " is a copy in /workspace"))' <<<"$output"
	jq -se '[.[] | select(.type=="notify")][0] | .level == "info" and (.message | contains("-beta\n+BETA"))' <<<"$output"
	jq -se '[.[] | select(.type=="notify")][1] | .level == "info" and (.message | startswith("applied to "))' <<<"$output"
	run -0 g status --porcelain
	[ "$output" = " M a.txt" ]
	[ "$(sed -n 2p "$PROJ/a.txt")" = BETA ]
	# the secret stayed on the host
	run -0 pisb exec "$NAME" -- sh -c 'ls -A /workspace'
	[[ $output != *.env* ]]
}

@test "/sandbox apply: no confirmation, nothing written" {
	script '[
	 {"tools":[{"name":"write","args":{"path":"a.txt","content":"agent\n"}}]},
	 {"prompt":"/sandbox apply"}]'
	run -0 drive PI_SCRIPT="$SCRIPT" DRIVE_UI=1
	echo "$output"
	local out=$output
	jq -se '[.[] | select(.type=="confirm")] | length == 1' <<<"$out"
	jq -se '[.[] | select(.type=="notify")][0] | .level == "warning" and (.message | contains("nothing written"))' <<<"$out"
	# quitting with the change unapplied says so (the sandbox is kept: where it is)
	jq -se --arg sb "$NAME" '[.[] | select(.type=="notify")][-1] | .level == "warning" and (.message | contains("1 changed file in sandbox '"'"'" + $sb + "'"'"' not applied")) and (.message | contains("pisb apply " + $sb))' <<<"$out"
	run -0 g status --porcelain
	[ -z "$output" ]
}

@test "/sandbox apply and /sandbox sync without a UI refuse unless --yes" {
	script '[
	 {"tools":[{"name":"write","args":{"path":"a.txt","content":"agent\n"}}]},
	 {"host":"printf \"host\\n\" > h.txt"},
	 {"prompt":"/sandbox apply"},
	 {"prompt":"/sandbox sync"}]'
	run -0 drive PI_SCRIPT="$SCRIPT"
	echo "$output"
	cat "$BATS_TEST_TMPDIR/drive.stderr"
	jq -se '[.[] | select(.type=="tool")][0].isError | not' <<<"$output"
	# no --yes: sync brought nothing in
	run -0 pisb exec "$NAME" -- sh -c 'test ! -e /workspace/h.txt && echo absent'
	[ "$output" = absent ]
	# without a UI the quit warning goes to standard error
	[[ $(cat "$BATS_TEST_TMPDIR/drive.stderr") == *"warning: 1 changed file in sandbox '$NAME' not applied to $PROJ"* ]]
	run -0 g status --porcelain
	[ "$output" = "?? h.txt" ]
	script '[
	 {"tools":[{"name":"write","args":{"path":"b.txt","content":"new\n"}}]},
	 {"prompt":"/sandbox sync --yes"},
	 {"prompt":"/sandbox apply --yes"}]'
	run -0 drive PI_SCRIPT="$SCRIPT"
	echo "$output"
	[ "$(cat "$PROJ/b.txt")" = new ]
	[ "$(cat "$PROJ/a.txt")" = agent ]
	run -0 pisb exec "$NAME" -- cat /workspace/h.txt
	[ "$output" = host ]
}

@test "a conflict: the host file changed since the copy; apply reports it and writes nothing; /sandbox sync brings the rest in" {
	script '[
	 {"tools":[{"name":"edit","args":{"path":"a.txt","edits":[{"oldText":"gamma","newText":"GAMMA"}]}}]},
	 {"tools":[{"name":"write","args":{"path":"new.txt","content":"agent file\n"}}]},
	 {"host":"printf \"host edit\\n\" >> a.txt; printf \"from the host\\n\" > h.txt"},
	 {"prompt":"/sandbox apply"},
	 {"prompt":"/sandbox sync"}]'
	run -0 drive PI_SCRIPT="$SCRIPT" DRIVE_UI=1 DRIVE_CONFIRM=1
	echo "$output"
	local out=$output
	# /sandbox sync asked, brought the host's new file in, left the conflict alone on both sides
	jq -se '[.[] | select(.type=="confirm")][1].title | startswith("bring the changes made to ")' <<<"$out"
	jq -se '[.[] | select(.type=="notify")][1] | .level == "warning" and (.message | contains("1 written, 0 deleted")) and (.message | contains("1 conflict left alone on both sides: a.txt"))' <<<"$out"
	run -0 pisb exec "$NAME" -- cat /workspace/h.txt
	[ "$output" = "from the host" ]
	run -0 pisb exec "$NAME" -- cat /workspace/a.txt
	[ "$output" = "$(printf 'alpha\nbeta\nGAMMA')" ]
	rm "$PROJ/h.txt"
	output=$out
	jq -se '[.[] | select(.type=="host")][0].status == 0' <<<"$output"
	jq -se '[.[] | select(.type=="notify")][0] | .level == "error" and (.message | startswith("apply refused, nothing written")) and (.message | contains("a.txt")) and (.message | contains("conflict"))' <<<"$output"
	# nothing written: the host's own edit only, no new.txt
	[ "$(cat "$PROJ/a.txt")" = "$(printf 'alpha\nbeta\ngamma\nhost edit')" ]
	[ ! -e "$PROJ/new.txt" ]
	# the changes are still in the sandbox
	run -0 pisb diff "$NAME" --stat --json
	jq -e '[.changes[].path] == ["a.txt", "new.txt"]' <<<"$output"
}

@test "the project's .env is not in the sandbox: the agent's read and bash cannot see it" {
	script '[
	 {"tools":[{"name":"read","args":{"path":".env"}}]},
	 {"tools":[{"name":"bash","args":{"command":"cat .env; grep -rs host-secret-42 /workspace /tmp /root /home | head -3; ls -a"}}]}]'
	run -0 drive PI_SCRIPT="$SCRIPT"
	echo "$output"
	jq -se '[.[] | select(.type=="tool")][0] | .toolName == "read" and .isError and (.text | contains("host-secret-42") | not)' <<<"$output"
	jq -se '[.[] | select(.type=="tool")][1] | (.text | contains("host-secret-42") | not) and (.text | test("a.txt"))' <<<"$output"
}

@test "the model's sandbox tool has no apply, diff or sync" {
	script '[
	 {"tools":[{"name":"write","args":{"path":"a.txt","content":"agent\n"}}]},
	 {"tools":[{"name":"sandbox","args":{"input":"{\"action\":\"apply\"}"}}]},
	 {"tools":[{"name":"sandbox","args":{"input":"{\"action\":\"apply\",\"force\":true}"}}]},
	 {"tools":[{"name":"sandbox","args":{"input":"{\"action\":\"sync\"}"}}]},
	 {"tools":[{"name":"sandbox","args":{"input":"help"}}]}]'
	run -0 drive PI_SCRIPT="$SCRIPT"
	echo "$output"
	jq -se '[.[] | select(.type=="tool")][1] | .isError and (.text | contains("action '"'"'apply'"'"' is not available"))' <<<"$output"
	jq -se '[.[] | select(.type=="tool")][2] | .isError and (.text | contains("not available"))' <<<"$output"
	jq -se '[.[] | select(.type=="tool")][3] | .isError and (.text | contains("not available"))' <<<"$output"
	jq -se '[.[] | select(.type=="tool")][4] | (.isError | not) and (.text | test("\"apply\"") | not)' <<<"$output"
	run -0 g status --porcelain
	[ -z "$output" ]
}

@test "config project.mode none: an empty workspace, and the note says so" {
	printf 'version: 1\ndriver: local\nproject: {mode: none}\n' > "$PROJ/.pi/sandbox.yaml"
	script '[{"tools":[{"name":"bash","args":{"command":"ls -a"}}]}, {"prompt":"/sandbox diff"}]'
	run -0 drive PI_SCRIPT="$SCRIPT" DRIVE_UI=1
	echo "$output"
	jq -se '[.[] | select(.type=="tool")][0] | (.text | test("a.txt") | not) and (.note | contains("holds no copy of the project"))' <<<"$output"
	jq -se '[.[] | select(.type=="notify")][0] | .level == "warning" and (.message | contains("holds no copy of the project"))' <<<"$output"
}

@test "project.mode bind: the note says the project is mounted, edits are on the host at once, /sandbox diff and apply say there is nothing to apply" {
	printf 'version: 1\ndriver: local\nproject: {mode: bind}\n' > "$PROJ/.pi/sandbox.yaml"
	# as root, the sandbox's root writes the project as its owner: a user's
	# project (a root-owned one is refused for bind)
	[ "$(id -u)" != 0 ] || chown -R 4242:4343 "$PROJ"
	script '[
	 {"tools":[{"name":"edit","args":{"path":"a.txt","edits":[{"oldText":"beta","newText":"BETA"}]}}]},
	 {"tools":[{"name":"bash","args":{"command":"cat .env; echo status=$?"}}]},
	 {"prompt":"/sandbox diff"},
	 {"prompt":"/sandbox apply"},
	 {"prompt":"/sandbox sync"}]'
	run -0 drive PI_SCRIPT="$SCRIPT" DRIVE_UI=1 DRIVE_CONFIRM=1
	echo "$output"
	local out=$output
	jq -se --arg p "$PROJ" '[.[] | select(.type=="tool")][0] | (.isError | not) and (.note | startswith("[pisb] the project " + $p + " is mounted at /workspace")) and (.note | contains("on the host at once"))' <<<"$output"
	# the edit is already in the host checkout; the secret stays hidden
	run -0 g diff -- a.txt
	[[ $output == *$'\n-beta\n+BETA\n'* ]]
	[ "$(cat "$PROJ/a.txt")" = "$(printf 'alpha\nBETA\ngamma')" ]
	jq -se '[.[] | select(.type=="tool")][1] | (.isError | not) and (.text | contains("host-secret-42") | not)' <<<"$out"
	jq -se '[.[] | select(.type=="status" and .text)][-1].text | contains("project bind-mounted")' <<<"$out"
	jq -se '[.[] | select(.type=="notify")] | length >= 3 and (.[0:3] | all(.level == "info" and (.message | contains("project.mode bind")) and (.message | contains("nothing to diff, apply or sync"))))' <<<"$out"
	# nothing asked, nothing warned at quit
	jq -se '[.[] | select(.type=="confirm")] | length == 0' <<<"$out"
	jq -se '[.[] | select(.type=="notify" and .level == "warning")] | length == 0' <<<"$out"
}

@test "project.mode bind-ro: the note says read-only; the agent reads the project, its edit, write and bash writes fail, the host project is unchanged" {
	printf 'version: 1\ndriver: local\nproject: {mode: bind-ro}\n' > "$PROJ/.pi/sandbox.yaml"
	script '[
	 {"tools":[{"name":"read","args":{"path":"a.txt"}}]},
	 {"tools":[{"name":"edit","args":{"path":"a.txt","edits":[{"oldText":"beta","newText":"BETA"}]}}]},
	 {"tools":[{"name":"write","args":{"path":"new.txt","content":"agent\n"}}]},
	 {"tools":[{"name":"bash","args":{"command":"echo x >> a.txt; echo status=$?; cat .env; echo env=$?"}}]},
	 {"prompt":"/sandbox diff"},
	 {"prompt":"/sandbox apply"}]'
	run -0 drive PI_SCRIPT="$SCRIPT" DRIVE_UI=1 DRIVE_CONFIRM=1
	echo "$output"
	local out=$output
	# the project itself, mounted: the agent reads the host's file, and the first result says read-only
	jq -se --arg p "$PROJ" '[.[] | select(.type=="tool")][0] | (.isError | not) and (.text | contains("alpha\nbeta\ngamma")) and (.note | startswith("[pisb] the project " + $p + " is mounted read-only at /workspace")) and (.note | contains("project.mode bind-ro")) and (.note | contains("it can be read but not changed"))' <<<"$out"
	# edit and write fail; the shell's write fails too, and the secret stays hidden
	jq -se '[.[] | select(.type=="tool")][1] | .isError' <<<"$out"
	jq -se '[.[] | select(.type=="tool")][2] | .isError' <<<"$out"
	jq -se '[.[] | select(.type=="tool")][3] | (.text | test("status=[1-9]")) and (.text | contains("host-secret-42") | not)' <<<"$out"
	# nothing reached the host project
	[ "$(cat "$PROJ/a.txt")" = "$(printf 'alpha\nbeta\ngamma')" ]
	[ ! -e "$PROJ/new.txt" ]
	# (the test's own .pi/sandbox.yaml aside)
	run -0 g status --porcelain --untracked-files=all -- . ':!.pi'
	[ -z "$output" ]
	# the status line and /sandbox diff and apply say read-only, nothing to apply; nothing asked
	jq -se '[.[] | select(.type=="status" and .text)][-1].text | contains("project bind-mounted read-only")' <<<"$out"
	jq -se '[.[] | select(.type=="notify")] | length >= 2 and (.[0:2] | all(.level == "info" and (.message | contains("mounted read-only")) and (.message | contains("nothing to diff, apply or sync"))))' <<<"$out"
	jq -se '[.[] | select(.type=="confirm")] | length == 0' <<<"$out"
}

@test "a driver whose table has diff (sbx, the fake CLI): the project is copied there too, reviewed and applied as on local; PISB_PUSH=1 changes nothing" {
	export HOME=$BATS_TEST_TMPDIR/home
	mkdir -p "$HOME"
	export PATH="$TOP/tests/fakes:$PATH"
	run -0 pisb drivers --json
	jq -e '.drivers[] | select(.name == "sbx") | .verbs.diff.supported == true' <<<"$output"
	printf 'version: 1\ndriver: sbx\n' > "$PROJ/.pi/sandbox.yaml"
	script '[
	 {"tools":[{"name":"read","args":{"path":"a.txt"}}]},
	 {"tools":[{"name":"edit","args":{"path":"a.txt","edits":[{"oldText":"beta","newText":"BETA"}]}}]},
	 {"tools":[{"name":"bash","args":{"command":"cat .env; echo status=$?"}}]},
	 {"prompt":"/sandbox apply"}]'
	run -0 drive PI_SCRIPT="$SCRIPT" PISB_PUSH=1 DRIVE_UI=1 DRIVE_CONFIRM=1
	echo "$output"
	local out=$output
	run -0 pisb inspect "$NAME" --json
	jq -e '.driver == "sbx"' <<<"$output"
	jq -se '[.[] | select(.type=="tool")][0] | (.isError | not) and (.text | test("beta"))' <<<"$out"
	jq -se --arg p "$PROJ" '[.[] | select(.type=="tool")][0].note | startswith("[pisb] the project " + $p + " is a copy in ")' <<<"$out"
	jq -se '[.[] | select(.type=="tool")][2] | (.text | contains("host-secret") | not) and (.text | contains("status=1"))' <<<"$out"
	jq -se '[.[] | select(.type=="notify")] | map(select(.message | startswith("applied to "))) | length == 1' <<<"$out"
	run -0 g diff --name-only -- a.txt
	[ "$output" = a.txt ]
	run -0 cat "$PROJ/a.txt"
	[ "$output" = "$(printf 'alpha\nBETA\ngamma')" ]
}
