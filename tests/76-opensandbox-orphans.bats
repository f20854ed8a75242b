#!/usr/bin/env bats
# Nothing orphaned on the OpenSandbox server: a create killed at each
# stage, then gc; dead owners under each policy; live owners and another
# state directory's sandboxes never touched; the server down.
load helpers
load fakes/opensandbox

setup() {
	pisb_test_setup
	require_cmd jq
	require_cmd curl
	os_fake_start
	os_config "$BATS_TEST_TMPDIR/r.yaml" "  image: python:3.11" "  timeoutSeconds: 600"
}

teardown() {
	[ -n "${OWNER:-}" ] && kill "$OWNER" 2>/dev/null
	os_fake_stop
}

remote_count() {
	os_admin GET /_fake/sandboxes | jq length
}

nothing_local() {
	[ -z "$(ls -A "$PI_SANDBOX_HOME/instances" 2>/dev/null)" ]
	[ -z "$(ls -A "$PI_SANDBOX_HOME/staging" 2>/dev/null)" ]
}

policy_yaml() {
	os_config "$BATS_TEST_TMPDIR/$1.yaml" "  image: python:3.11" "  timeoutSeconds: 600" \
		"  lifecycle:" "    onSessionShutdown: $1"
}

# wait_creating NAME: until the create of NAME has published its instance
# and the server provisions it (a poll, not a sleep: a loaded machine is slow)
wait_creating() {
	local i
	for i in $(seq 200); do
		if [ "$(jq -r .state "$PI_SANDBOX_HOME/instances/$1/status.json" 2>/dev/null)" = creating ] &&
			[ "$(remote_count)" -ge 1 ]; then
			return 0
		fi
		sleep 0.1
	done
	return 1
}

@test "create sends the intent as metadata and records it before the POST" {
	os_fault '{"delay_ms":{"create":1500}}'
	pisb create m -f "$BATS_TEST_TMPDIR/r.yaml" &
	pid=$!
	sleep 0.5
	# during the POST: the staged record already names the intent
	iid=$(jq -r .remote.instanceId "$PI_SANDBOX_HOME"/staging/m.*/record.json)
	[ "${#iid}" -eq 16 ]
	wait "$pid"
	[ "$(jq -r .remote.instanceId "$PI_SANDBOX_HOME/instances/m/record.json")" = "$iid" ]
	md=$(os_admin GET "/_fake/sandboxes/$(os_sid m)" | jq -c .request.metadata)
	jq -e --arg i "$iid" '.["pisb-instance"] == $i and .["pisb-policy"] == "kill"
		and .["pisb-name"] == "m" and .["pi-extension"] == "pisb"
		and (.["pisb-state"] | test("^s[0-9a-f]{16}$"))' <<<"$md"
}

@test "create killed before the server made anything: gc leaves nothing local and nothing on the server" {
	# the staged record is written, then the create dies; the server never
	# creates (the POST is dropped): the state a kill before the POST leaves
	os_fault '{"fail":{"create":{"status":0,"count":1,"delay_ms":1500}}}'
	pisb create early -f "$BATS_TEST_TMPDIR/r.yaml" &
	pid=$!
	sleep 0.5
	kill -KILL "$pid"
	wait "$pid" || true
	sleep 1.2
	[ -n "$(ls -A "$PI_SANDBOX_HOME/staging")" ]
	[ "$(remote_count)" -eq 0 ]
	run -0 pisb gc --json
	jq -e '.removed == [] and ([.cleaned[] | select(.kind == "staging")] | length) == 1' <<<"$output"
	nothing_local
	[ "$(remote_count)" -eq 0 ]
}

@test "create SIGKILLed during the POST: gc finds the sandbox by its metadata, kills it, cleans staging" {
	os_fault '{"delay_ms":{"create":1500}}'
	pisb create during -f "$BATS_TEST_TMPDIR/r.yaml" &
	pid=$!
	sleep 0.5
	kill -KILL "$pid"
	wait "$pid" || true
	# the server finishes the POST after its client died
	sleep 1.5
	[ "$(remote_count)" -eq 1 ]
	[ -z "$(ls -A "$PI_SANDBOX_HOME/instances")" ]
	run -0 pisb gc --dry-run --json
	jq -e '.removed[0].kind == "opensandbox" and (.removed[0].reason | test("interrupted"))' <<<"$output"
	[ "$(remote_count)" -eq 1 ]
	run -0 pisb gc --json
	jq -e '(.removed | length) == 1 and ([.cleaned[] | select(.kind == "staging")] | length) == 1' <<<"$output"
	[ "$(remote_count)" -eq 0 ]
	nothing_local
}

@test "create SIGKILLed while the server provisions: gc kills the interrupted instance's sandbox" {
	os_fault '{"pending_ms":5000}'
	pisb create prov -f "$BATS_TEST_TMPDIR/r.yaml" &
	pid=$!
	wait_creating prov
	kill -KILL "$pid"
	wait "$pid" || true
	[ "$(jq -r .state "$PI_SANDBOX_HOME/instances/prov/status.json")" = creating ]
	[ "$(remote_count)" -eq 1 ]
	run -0 pisb gc --json
	jq -e '.removed[0].name == "prov" and (.removed[0].reason | test("interrupted"))' <<<"$output"
	[ "$(remote_count)" -eq 0 ]
	nothing_local
}

@test "SIGTERM and SIGINT during create kill what was created, then exit 128+N" {
	os_fault '{"pending_ms":5000}'
	pisb create t1 -f "$BATS_TEST_TMPDIR/r.yaml" 2>"$BATS_TEST_TMPDIR/err" &
	pid=$!
	sleep 1
	kill -TERM "$pid"
	st=0
	wait "$pid" || st=$?
	[ "$st" -eq 143 ]
	grep -q "interrupted by SIGTERM" "$BATS_TEST_TMPDIR/err"
	grep -q "the sandbox was killed" "$BATS_TEST_TMPDIR/err"
	[ "$(remote_count)" -eq 0 ]
	nothing_local
	os_fault '{"pending_ms":0,"delay_ms":{"create":1500}}'
	pisb create t2 -f "$BATS_TEST_TMPDIR/r.yaml" 2>/dev/null &
	pid=$!
	sleep 0.5
	kill -INT "$pid"
	st=0
	wait "$pid" || st=$?
	[ "$st" -eq 130 ]
	[ "$(remote_count)" -eq 0 ]
	nothing_local
}

@test "a sandbox whose local record is gone is killed by gc (policy from its metadata)" {
	run -0 pisb create lost -f "$BATS_TEST_TMPDIR/r.yaml"
	rm -rf "$PI_SANDBOX_HOME/instances/lost"
	# another sandbox, still recorded, names the server to gc
	run -0 pisb create kept -f "$BATS_TEST_TMPDIR/r.yaml"
	[ "$(remote_count)" -eq 2 ]
	run -0 pisb gc --json
	jq -e '(.removed | length) == 1 and (.removed[0].reason | test("no local record"))' <<<"$output"
	[ "$(remote_count)" -eq 1 ]
	[ "$(os_state "$(os_sid kept)")" = Running ]
}

@test "a dead owner's sandbox: policy kill -> killed and removed" {
	sleep 300 &
	OWNER=$!
	policy_yaml kill
	run -0 pisb create dk -f "$BATS_TEST_TMPDIR/kill.yaml" --owner-pid "$OWNER"
	id=$(os_sid dk)
	run -0 pisb gc --json
	jq -e '.removed == [] and ([.kept[] | select(.name == "dk")] | length) == 1' <<<"$output"
	[ "$(os_state "$id")" = Running ]
	kill "$OWNER"
	wait "$OWNER" || true
	run -0 pisb gc --json
	jq -e '.removed[0].name == "dk" and (.removed[0].reason | test("policy kill"))' <<<"$output"
	[ "$(os_state "$id")" = gone ]
	nothing_local
}

@test "a dead owner's sandbox: policy pause -> paused, kept, not renewed" {
	sleep 300 &
	OWNER=$!
	policy_yaml pause
	run -0 pisb create dp -f "$BATS_TEST_TMPDIR/pause.yaml" --owner-pid "$OWNER"
	id=$(os_sid dp)
	kill "$OWNER"
	wait "$OWNER" || true
	run -0 pisb gc --json
	jq -e '.cleaned[0].name == "dp" and (.cleaned[0].reason | test("policy pause"))' <<<"$output"
	[ "$(os_state "$id")" = Paused ]
	[ "$(jq -r .state "$PI_SANDBOX_HOME/instances/dp/status.json")" = paused ]
	run -0 pisb gc --json
	jq -e '.kept[0].name == "dp" and (.kept[0].reason | test("paused"))' <<<"$output"
	[ "$(os_state "$id")" = Paused ]
}

@test "a dead owner's sandbox: policy keep -> left running, record kept" {
	sleep 300 &
	OWNER=$!
	policy_yaml keep
	run -0 pisb create dkeep -f "$BATS_TEST_TMPDIR/keep.yaml" --owner-pid "$OWNER"
	id=$(os_sid dkeep)
	kill "$OWNER"
	wait "$OWNER" || true
	run -0 pisb gc --json
	jq -e '.kept[0].name == "dkeep" and (.kept[0].reason | test("policy keep"))' <<<"$output"
	[ "$(os_state "$id")" = Running ]
	[ -d "$PI_SANDBOX_HOME/instances/dkeep" ]
}

@test "a live owner's sandbox and another state directory's sandboxes are never touched" {
	sleep 300 &
	OWNER=$!
	run -0 pisb create live -f "$BATS_TEST_TMPDIR/r.yaml" --owner-pid "$OWNER"
	other=$BATS_TEST_TMPDIR/other-state
	mkdir -m 700 "$other"
	run -0 pisb --state-dir "$other" create foreign -f "$BATS_TEST_TMPDIR/r.yaml"
	fid=$(jq -r .remote.sandboxId "$other/instances/foreign/record.json")
	# the other pisb's record is gone: to us it is still not ours
	rm -rf "$other/instances/foreign"
	run -0 pisb gc --json
	jq -e '.removed == [] and .failed == []' <<<"$output"
	[ "$(os_state "$(os_sid live)")" = Running ]
	[ "$(os_state "$fid")" = Running ]
}

@test "create of the same name kills an earlier create's orphan first" {
	os_fault '{"delay_ms":{"create":1500}}'
	pisb create again -f "$BATS_TEST_TMPDIR/r.yaml" &
	pid=$!
	sleep 0.5
	kill -KILL "$pid"
	wait "$pid" || true
	sleep 1.5
	[ "$(remote_count)" -eq 1 ]
	os_fault '{"delay_ms":{"create":0}}'
	run -0 pisb create again -f "$BATS_TEST_TMPDIR/r.yaml"
	[ "$(remote_count)" -eq 1 ]
	[ "$(os_state "$(os_sid again)")" = Running ]
	[ -z "$(ls -A "$PI_SANDBOX_HOME/staging")" ]
}

@test "server down: gc keeps the staged create (its intent) and says why" {
	os_fault '{"delay_ms":{"create":1500}}'
	pisb create down -f "$BATS_TEST_TMPDIR/r.yaml" &
	pid=$!
	sleep 0.5
	kill -KILL "$pid"
	wait "$pid" || true
	os_fake_stop
	run -1 --separate-stderr pisb gc --json
	jq -e '(.failed[0].reason | test("cannot be reached|kept until it answers"))' <<<"$output"
	[ -n "$(ls -A "$PI_SANDBOX_HOME/staging")" ]
}

@test "start of a create killed while provisioning finishes it (workspace, setup), instead of leaving it interrupted" {
	os_config "$BATS_TEST_TMPDIR/s.yaml" "  image: python:3.11" "  timeoutSeconds: 600"
	printf 'setup:\n  - echo finished-setup > /workspace/done\n' >>"$BATS_TEST_TMPDIR/s.yaml"
	os_fault '{"pending_ms":3000}'
	pisb create fin -f "$BATS_TEST_TMPDIR/s.yaml" &
	pid=$!
	wait_creating fin
	kill -KILL "$pid"
	wait "$pid" || true
	run -0 pisb list --json
	jq -e '.[0].status == "interrupted"' <<<"$output"
	run -0 pisb start fin --events-fd 3 3>"$BATS_TEST_TMPDIR/ev"
	jq -e '.event == "ready" and .sandboxId != null' "$BATS_TEST_TMPDIR/ev"
	run -0 pisb inspect fin
	jq -e '.status == "running"' <<<"$output"
	run -0 pisb read fin done --raw
	[ "$output" = finished-setup ]
	grep -q "finishing an interrupted create" "$PI_SANDBOX_HOME/instances/fin/remote.log"
	[ "$(remote_count)" -eq 1 ]
}

@test "start --events-fd: 'ready' with resumed true after a pause" {
	run -0 pisb create ev -f "$BATS_TEST_TMPDIR/r.yaml"
	run -0 pisb stop ev
	run -0 pisb start ev --events-fd 3 3>"$BATS_TEST_TMPDIR/ev"
	jq -e '.event == "ready" and .resumed == true and .name == "ev" and .driver == "opensandbox"' "$BATS_TEST_TMPDIR/ev"
	run -0 pisb start ev --events-fd 3 3>"$BATS_TEST_TMPDIR/ev2"
	jq -e '.event == "ready" and .resumed == false' "$BATS_TEST_TMPDIR/ev2"
}
