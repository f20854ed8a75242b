#!/usr/bin/env bats
# The driver layer (common/driver.h): `pisb drivers` prints the verb x
# driver matrix from the drivers' tables; every verb a driver lacks gets
# the one refusal; the README and pisb(1) say what the tables say; the
# same verb gives the same JSON shape whatever the driver.
load helpers

setup() {
	pisb_test_setup
	require_cmd jq
	mkdir -p "$PI_SANDBOX_HOME"
	chmod 700 "$PI_SANDBOX_HOME"
}

teardown() {
	for n in j-local j-sbx; do
		[ ! -e "$PI_SANDBOX_HOME/instances/$n" ] || pisb destroy "$n" --confirm "$n" >/dev/null 2>&1 || true
	done
}

# A record of sandbox NAME with driver D (nothing behind it: a refusal
# comes before the driver is asked anything).
fake_record() {
	mkdir -p "$PI_SANDBOX_HOME/instances/$1"
	jq -n --arg n "$1" --arg d "$2" \
		'{version:1,name:$n,driver:$d,createdAt:1,template:null,owner:{pid:0,start:0},sessionId:null,remote:null,config:{version:1,workspace:"/workspace"}}' \
		> "$PI_SANDBOX_HOME/instances/$1/record.json"
}

# The fake sbx CLI on PATH, its state under a HOME of the test's own.
use_fake_sbx() {
	export HOME=$BATS_TEST_TMPDIR/home
	mkdir -p "$HOME"
	export PATH="$TOP/tests/fakes:$PATH"
}

# A config for driver D (opensandbox needs its section).
driver_yaml() {
	printf 'version: 1\ndriver: %s\n' "$1"
	if [ "$1" = opensandbox ]; then
		printf 'opensandbox:\n  domain: 127.0.0.1:9\n  sandboxId: sb-1\n'
	fi
}

# The command line that runs VERB on sandbox NAME (a config in $2 for
# the verbs that make a sandbox).
verb_argv() {
	local v=$1 n=$2 f=$3
	case $v in
	prepare) echo "prepare $n -f $f" ;;
	connect) echo "connect $n -f $f" ;;
	create) echo "create $n -f $f" ;;
	start|stop|inspect|shell|logs|verify) echo "$v $n" ;;
	destroy) echo "destroy $n --confirm $n" ;;
	release) echo "release $n" ;;
	exec) echo "exec $n -- true" ;;
	"exec --timeout-ms") echo "exec $n --timeout-ms 0 -- true" ;;
	exec-status|exec-kill) echo "$v $n h-1" ;;
	read|stat) echo "$v $n f" ;;
	write) echo "write $n f --content x" ;;
	edit) echo "edit $n f --old a --new b" ;;
	ls) echo "ls $n" ;;
	mkdir) echo "mkdir $n d" ;;
	find) echo "find $n x" ;;
	grep) echo "grep $n x" ;;
	push) echo "push $n $BATS_TEST_TMPDIR" ;;
	pull) echo "pull $n /workspace $BATS_TEST_TMPDIR/out" ;;
	svc) echo "svc $n status" ;;
	preview) echo "svc $n preview 3000" ;;
	docker) echo "docker $n ps" ;;
	diff) echo "diff $n" ;;
	*) return 1 ;;
	esac
}

@test "pisb drivers --json: every driver of the registry, every verb, supported or why not" {
	run -0 --separate-stderr pisb drivers --json
	m=$output
	jq -e '.drivers | map(.name) == ["local","vm","opensandbox","sbx"]' <<<"$m"
	jq -e '.verbs | length > 20' <<<"$m"
	# each driver answers for each verb, and a supported verb has no why
	jq -e '. as $m | all(.drivers[]; (.verbs | keys | sort) == ($m.verbs | sort))' <<<"$m"
	jq -e 'all(.drivers[].verbs[]; (.supported | type) == "boolean")' <<<"$m"
	jq -e '[.drivers[].verbs[] | select(.supported and .why != null)] | length == 0' <<<"$m"
	jq -e 'all(.drivers[]; (.summary | type) == "string" and (.summary | length) > 10)' <<<"$m"
	# every driver has the mandatory lifecycle slots
	jq -e 'all(.drivers[]; .verbs.start.supported and .verbs.stop.supported and .verbs.destroy.supported and .verbs.inspect.supported)' <<<"$m"
	# -q: the names, one a line, as the completions offer them
	run -0 pisb drivers -q
	[ "$output" = "$(printf 'local\nvm\nopensandbox\nsbx')" ]
	# the text matrix: a header with every driver, a row per verb
	run -0 pisb drivers
	[[ ${lines[0]} == "VERB"*"local"*"vm"*"opensandbox"*"sbx" ]]
	n=$(jq '.verbs | length' <<<"$m")
	[ "$(grep -cE '^[a-z]' <<<"$output")" -ge "$n" ]
}

@test "every verb a driver lacks is refused with the one message, exit 1 (generated from the matrix)" {
	run -0 pisb drivers --json
	m=$output
	checked=0
	while IFS=$'\t' read -r d v why; do
		n=x-$d
		case $v in
		# not a per-sandbox command: gc sweeps, renew runs a pass, pool
		# keeps spares of a config (tests/16-create-pool.bats)
		gc|renew|pool) continue ;;
		esac
		[ -e "$PI_SANDBOX_HOME/instances/$n" ] || fake_record "$n" "$d"
		driver_yaml "$d" > "$BATS_TEST_TMPDIR/$d.yaml"
		argv=$(verb_argv "$v" "$n" "$BATS_TEST_TMPDIR/$d.yaml") || { echo "no command line for verb '$v'"; false; }
		# shellcheck disable=SC2086
		run -1 --separate-stderr pisb $argv
		want="fatal: sandbox '$n' (driver $d) cannot '$v'"
		if [ -n "$why" ]; then want="$want: $why"; fi
		want="$want; see pisb drivers"
		[ "$stderr" = "$want" ] || { echo "pisb $argv: got '$stderr', want '$want'"; false; }
		checked=$((checked + 1))
	done < <(jq -r '.drivers[] | .name as $d | .verbs | to_entries[] | select(.value.supported | not) | [$d, .key, (.value.why // "")] | @tsv' <<<"$m")
	# the loop ran over every refused pair but gc, renew and pool, and there are some
	want=$(jq '[.drivers[].verbs | to_entries[] | select((.value.supported | not) and (.key | IN("gc","renew","pool") | not))] | length' <<<"$m")
	[ "$want" -gt 10 ]
	[ "$checked" -eq "$want" ]
}

@test "the README's matrix is the one pisb drivers prints" {
	run -0 pisb drivers --json
	want=$(jq -r '"| verb | " + (.drivers | map(.name) | join(" | ")) + " |",
		"|---|" + (.drivers | map("---|") | join("")),
		(. as $m | .verbs[] as $v | "| `" + $v + "` | " + ($m.drivers | map(if .verbs[$v].supported then "yes" else "—" end) | join(" | ")) + " |")' <<<"$output")
	got=$(sed -n '/^<!-- pisb drivers -->$/,/^<!-- end pisb drivers -->$/p' "$TOP/README.md" | grep '^|')
	[ -n "$got" ]
	diff <(echo "$want") <(echo "$got")
}

@test "pisb(1) names every driver with its summary, and says how to add one" {
	run -0 pisb drivers --json
	while IFS=$'\t' read -r d s; do
		grep -qxF ".B $d" "$TOP/man/pisb.1" || { echo "pisb.1 lacks driver '$d'"; false; }
		grep -qxF "$s" "$TOP/man/pisb.1" || { echo "pisb.1 lacks the summary of '$d': $s"; false; }
	done < <(jq -r '.drivers[] | [.name, .summary] | @tsv' <<<"$output")
	grep -q '^\.SS Adding a driver' "$TOP/man/pisb.1"
	grep -q 'pisb_drivers\[\]' "$TOP/man/pisb.1"
}

@test "config validation and --driver name the drivers of the registry" {
	printf 'version: 1\ndriver: nosuch\n' > "$BATS_TEST_TMPDIR/bad.yaml"
	run -2 --separate-stderr pisb validate -f "$BATS_TEST_TMPDIR/bad.yaml"
	names=$(pisb drivers -q | paste -sd, | sed 's/,/, /g')
	[[ $stderr == *"driver: must be one of: $names"* ]]
	run -2 --separate-stderr pisb create box --driver nosuch
	[ "$stderr" = "fatal: --driver: unknown driver 'nosuch' ($names)" ]
	# a driver without templates
	run -2 --separate-stderr pisb create box --driver sbx --template t
	[[ $stderr == *"--template: driver sbx has no pisb templates"* ]]
}

@test "the core names no driver: what differs by driver is a capability bit of its table" {
	# issue #11's done-when: no driver chosen by name outside the registry
	run -1 grep -rnE 'PISB_DRIVER_|strcmp\([^)]*driver' "$TOP/cmd" "$TOP/common" --include=*.c --include=*.h
	# the capabilities' refusals name the drivers that have them
	printf 'version: 1\ndriver: sbx\ndocker: true\n' > "$BATS_TEST_TMPDIR/d.yaml"
	run -2 --separate-stderr pisb validate -f "$BATS_TEST_TMPDIR/d.yaml"
	[[ $stderr == *"docker: is for the local and vm drivers only (driver is sbx, whose sandboxes always have their own daemon)" ]]
	mkdir -p "$BATS_TEST_TMPDIR/p"
	printf 'version: 1\ndriver: sbx\nproject: {mode: bind-ro}\n' > "$BATS_TEST_TMPDIR/p.yaml"
	run -2 --separate-stderr pisb create px -f "$BATS_TEST_TMPDIR/p.yaml" --project "$BATS_TEST_TMPDIR/p"
	[ "$stderr" = "fatal: project.mode: bind-ro is built for the local and vm drivers only; use copy" ]
	[ ! -e "$PI_SANDBOX_HOME/instances/px" ]
}

@test "doctor lists the drivers of this build" {
	run --separate-stderr pisb doctor --json
	names=$(pisb drivers -q | paste -sd, | sed 's/,/, /g')
	jq -e --arg n "$names" '.checks[] | select(.check == "drivers") | .detail | contains($n)' <<<"$output"
}

# The keys of the object in $output, without the driver's own object
# (inspect's "remote", "vm" or "local") and the times given only when known
# (startedAt, stoppedAt), pisb-create(1), into file $1.
shape() {
	jq -c 'del(.remote, .vm, .local, .startedAt, .stoppedAt) | keys' <<<"$output" > "$1"
}

@test "create, start, stop --json: the same object shape on local and on (fake) sbx" {
	require_userns
	use_fake_sbx
	for d in local sbx; do
		run -0 --separate-stderr pisb create "j-$d" --driver "$d" --json
		jq -e --arg d "$d" '.name == "j-\($d)" and .driver == $d and .status == "running"' <<<"$output"
		shape "$BATS_TEST_TMPDIR/create-$d"
		# no event line on stdout: one object
		[ "$(jq -s length <<<"$output")" = 1 ]
		run -0 --separate-stderr pisb stop "j-$d" --json
		jq -e '.status == "stopped"' <<<"$output"
		shape "$BATS_TEST_TMPDIR/stop-$d"
		run -0 --separate-stderr pisb start "j-$d" --json
		jq -e '.status == "running"' <<<"$output"
		shape "$BATS_TEST_TMPDIR/start-$d"
	done
	for v in create stop start; do
		diff "$BATS_TEST_TMPDIR/$v-local" "$BATS_TEST_TMPDIR/$v-sbx"
	done
	# events go to --events-fd, on both
	for d in local sbx; do
		run -0 pisb stop "j-$d" --events-fd 3 3>"$BATS_TEST_TMPDIR/ev-$d"
		jq -e --arg d "$d" '.event == "released" and .driver == $d' "$BATS_TEST_TMPDIR/ev-$d"
		run -0 pisb destroy "j-$d" --confirm "j-$d"
	done
}

@test "--on-ready: the ready event on every driver; a failing consumer leaves nothing behind (local, fake sbx)" {
	require_userns
	use_fake_sbx
	for d in local sbx; do
		export HOOK_OUT=$BATS_TEST_TMPDIR/hook-$d
		run -0 pisb create "j-$d" --driver "$d" --events-fd 3 \
			--on-ready 'printf "%s" "$PISB_EVENT" > "$HOOK_OUT"' 3>"$BATS_TEST_TMPDIR/ev-$d"
		jq -e --arg d "$d" '.event == "ready" and .name == "j-\($d)" and .driver == $d and .createdByExtension == true' "$BATS_TEST_TMPDIR/ev-$d"
		jq -e --arg d "$d" '.event == "ready" and .driver == $d' "$BATS_TEST_TMPDIR/hook-$d"
		run -0 pisb destroy "j-$d" --confirm "j-$d"
		run -1 --separate-stderr pisb create "j-$d" --driver "$d" --on-ready 'exit 7'
		[[ $stderr == *"on-ready"* ]]
		[[ $stderr == *"create 'j-$d' (the sandbox was killed and the instance removed)"* ]]
		[ ! -e "$PI_SANDBOX_HOME/instances/j-$d" ]
	done
	# the fake sbx has no sandbox left either
	run -0 sbx ls --json
	jq -e '.sandboxes == []' <<<"$output"
}

@test "pisb release: the sandbox's own policy on every driver (local: remove; sbx: sbx.teardown), --policy overrides" {
	require_userns
	use_fake_sbx
	# local: no policy of its own, so remove
	run -0 pisb create j-local
	run -0 --separate-stderr pisb release j-local --json --events-fd 3 3>"$BATS_TEST_TMPDIR/ev"
	jq -e '. == {"name":"j-local","status":"removed"}' <<<"$output"
	jq -e '.event == "released" and .driver == "local" and .mode == "remove"' "$BATS_TEST_TMPDIR/ev"
	[ ! -e "$PI_SANDBOX_HOME/instances/j-local" ]
	# --policy keep: left running, and said so
	run -0 pisb create j-local
	run -0 --separate-stderr pisb release j-local --policy keep --json --events-fd 3 3>"$BATS_TEST_TMPDIR/ev"
	jq -e '.name == "j-local" and .status == "running"' <<<"$output"
	jq -e '.mode == "keep"' "$BATS_TEST_TMPDIR/ev"
	run -2 --separate-stderr pisb release j-local --policy pause
	[[ $stderr == *"--policy: 'pause' is not one of remove, stop, keep"* ]]
	run -0 pisb release j-local --policy stop
	run -0 pisb inspect j-local
	jq -e '.status == "stopped"' <<<"$output"
	# sbx: sbx.teardown, the watchdog's policy
	printf 'version: 1\ndriver: sbx\nsbx:\n  teardown: stop\n' > "$BATS_TEST_TMPDIR/stop.yaml"
	run -0 pisb create j-sbx -f "$BATS_TEST_TMPDIR/stop.yaml"
	run -0 --separate-stderr pisb release j-sbx --json --events-fd 3 3>"$BATS_TEST_TMPDIR/ev"
	jq -e '.name == "j-sbx" and .status == "stopped"' <<<"$output"
	jq -e '.event == "released" and .driver == "sbx" and .mode == "stop"' "$BATS_TEST_TMPDIR/ev"
	run -0 pisb release j-sbx --policy remove
	[ ! -e "$PI_SANDBOX_HOME/instances/j-sbx" ]
	run -0 sbx ls --json
	jq -e '.sandboxes == []' <<<"$output"
	run -3 pisb release nosuch
}
