#!/usr/bin/env bats
# The opensandbox driver fails closed: a wrong key, a server that is down,
# a sandbox that expired or was paused behind pisb's back, execd tokens
# that change on resume.  Nothing ever runs on the host instead.
load helpers
load fakes/opensandbox

setup() {
	pisb_test_setup
	require_cmd jq
	require_cmd curl
	os_fake_start
	os_config "$BATS_TEST_TMPDIR/r.yaml"
}

teardown() {
	os_fake_stop
}

@test "a wrong API key is exit 5 with a clear message, and nothing is left" {
	export OPEN_SANDBOX_API_KEY=not-the-key
	run -5 --separate-stderr pisb create wk -f "$BATS_TEST_TMPDIR/r.yaml"
	[[ $stderr == *"rejected the API key from OPEN_SANDBOX_API_KEY"*"401 INVALID_API_KEY"* ]]
	[[ $stderr != *"not-the-key"* ]]
	[ ! -e "$PI_SANDBOX_HOME/instances/wk" ]
	# an existing sandbox used with a wrong key: 5 for every verb
	export OPEN_SANDBOX_API_KEY=$OS_KEY
	run -0 pisb create ok -f "$BATS_TEST_TMPDIR/r.yaml"
	export OPEN_SANDBOX_API_KEY=not-the-key
	run -5 --separate-stderr pisb exec ok -- true
	[[ $stderr == *"401 INVALID_API_KEY"* ]]
	run -5 pisb read ok x
	run -5 pisb stop ok
	run -5 pisb destroy ok --confirm ok
	[ -e "$PI_SANDBOX_HOME/instances/ok" ]
}

@test "no API key at all: the server's 401 says how to give one" {
	unset OPEN_SANDBOX_API_KEY
	run -5 --separate-stderr pisb create nk -f "$BATS_TEST_TMPDIR/r.yaml"
	[[ $stderr == *"MISSING_API_KEY"*"no API key was given"*"OPEN_SANDBOX_API_KEY"* ]]
}

@test "server down: every verb fails with 5 and nothing runs on the host" {
	run -0 pisb create down -f "$BATS_TEST_TMPDIR/r.yaml"
	os_fake_stop
	marker=$BATS_TEST_TMPDIR/ran-on-host
	run -5 --separate-stderr pisb exec down -- touch "$marker"
	[[ $stderr == *"cannot reach the OpenSandbox server at http://127.0.0.1:$OS_PORT"* ]]
	[ ! -e "$marker" ]
	run -5 pisb exec down --timeout-ms 100 --json -- touch "$marker"
	run -5 pisb read down a.txt
	run -5 pisb write down a.txt --content x
	run -5 pisb ls down
	run -5 pisb find down '*'
	run -5 pisb grep down x
	run -5 pisb start down
	run -5 pisb stop down
	run -5 pisb destroy down --confirm down
	[ ! -e "$marker" ]
	# the instance stays, so destroy can be tried again later
	[ -e "$PI_SANDBOX_HOME/instances/down" ]
	run -5 pisb create other -f "$BATS_TEST_TMPDIR/r.yaml"
	[ ! -e "$PI_SANDBOX_HOME/instances/other" ]
	# list and inspect ask the server, and say it cannot be asked
	run -0 pisb list --json
	jq -e '.[0].name == "down" and .[0].status == "unreachable"
		and (.[0].error | test("cannot reach the OpenSandbox server"))' <<<"$output"
	run -0 pisb list
	[[ $output == *"down"*"opensandbox"*"unreachable"* ]]
	run -0 pisb inspect down
	jq -e '.status == "unreachable" and (.error | test("cannot reach")) and .remote.sandboxId' <<<"$output"
}

@test "inspect shows the remote sandbox's own limits, image and state, no local-driver fields" {
	os_config "$BATS_TEST_TMPDIR/l.yaml" "  image: python:3.11" "  resourceLimits:" "    cpu: 500m" "    memory: 512Mi"
	run -0 pisb create lim -f "$BATS_TEST_TMPDIR/l.yaml"
	run -0 pisb inspect lim
	jq -e '.limits == {"resourceLimits":{"cpu":"500m","memory":"512Mi"},"note":"enforced by the OpenSandbox server, not by pisb"}' <<<"$output"
	jq -e '.image == "python:3.11" and .remoteState == "Running" and .status == "running"' <<<"$output"
	jq -e '.controller.alive == false and .controller.pid == null' <<<"$output"
	jq -e '.config | has("image") | not' <<<"$output"
	jq -e '.config | has("diskGiB") | not' <<<"$output"
	jq -e '.config.opensandbox.image == "python:3.11"' <<<"$output"
	# the server's state, not the last one pisb saw
	os_api POST "/v1/sandboxes/$(os_sid lim)/pause" >/dev/null
	run -0 pisb inspect lim
	jq -e '.status == "paused" and .remoteState == "Paused"' <<<"$output"
}

@test "a sandbox that expired on the server: inspect says gone, verbs fail with 5" {
	run -0 pisb create exp -f "$BATS_TEST_TMPDIR/r.yaml"
	os_fault "{\"expire_now\":\"$(os_sid exp)\"}"
	run -0 pisb inspect exp
	jq -e '.status == "gone"' <<<"$output"
	run -5 --separate-stderr pisb exec exp -- true
	[[ $stderr == *"no longer exists on the server: it expired or was deleted"* ]]
	run -0 pisb list --json
	jq -e '.[0].status == "gone"' <<<"$output"
	# destroy of a gone sandbox still cleans up locally
	run -0 pisb destroy exp --confirm exp
	[ ! -e "$PI_SANDBOX_HOME/instances/exp" ]
}

@test "a sandbox paused behind pisb's back is resumed before use" {
	run -0 pisb create pz -f "$BATS_TEST_TMPDIR/r.yaml"
	id=$(os_sid pz)
	os_api POST "/v1/sandboxes/$id/pause" >/dev/null
	[ "$(os_state "$id")" = Paused ]
	os_admin DELETE /_fake/stats >/dev/null
	run -0 pisb exec pz -- echo awake
	[ "$output" = awake ]
	[ "$(os_ops resume)" -eq 1 ]
	[ "$(os_state "$id")" = Running ]
	grep -q "resumed sandbox $id before use" "$PI_SANDBOX_HOME/instances/pz/remote.log"
	# the same for files
	os_api POST "/v1/sandboxes/$id/pause" >/dev/null
	run -0 pisb write pz f.txt --content hi
	run -0 pisb read pz f.txt
	[ "$output" = hi ]
}

@test "a paused sandbox whose execd would hang: pisb never talks to execd before resuming" {
	os_fake_stop
	os_fake_start --paused-execd hang --pausing-ms 300 --resuming-ms 300
	os_config "$BATS_TEST_TMPDIR/r.yaml"
	run -0 pisb create hang -f "$BATS_TEST_TMPDIR/r.yaml"
	run -0 pisb stop hang
	[ "$(os_state "$(os_sid hang)")" = Paused ]
	start=$(date +%s)
	run -0 pisb exec hang -- echo fine
	[ "$output" = fine ]
	[ $(($(date +%s) - start)) -lt 10 ]
}

@test "execd access tokens from the endpoint are sent, redacted in traces, re-read after resume" {
	os_fake_stop
	os_fake_start --execd-token
	os_config "$BATS_TEST_TMPDIR/r.yaml"
	run -0 pisb create tok -f "$BATS_TEST_TMPDIR/r.yaml"
	run -0 --separate-stderr pisb exec -v tok -- echo with-token
	[ "$output" = with-token ]
	[[ $stderr == *"X-EXECD-ACCESS-TOKEN: <redacted>"* ]]
	tokval=$(os_api GET "/v1/sandboxes/$(os_sid tok)/endpoints/44772" | sed '$d' | jq -r '.headers["X-EXECD-ACCESS-TOKEN"]')
	[[ $stderr != *"$tokval"* ]]
	# the token changes on resume
	run -0 pisb stop tok
	run -0 pisb start tok
	run -0 pisb exec tok -- echo again
	[ "$output" = again ]
	run -1 grep -rF -- "$tokval" "$PI_SANDBOX_HOME"
}

@test "a server that is slow to start the sandbox (Pending) is waited for" {
	os_fake_stop
	os_fake_start --pending-ms 800
	os_config "$BATS_TEST_TMPDIR/r.yaml"
	run -0 pisb create slow -f "$BATS_TEST_TMPDIR/r.yaml"
	run -0 pisb exec slow -- echo up
	[ "$output" = up ]
}

@test "errors from execd are reported, not mistaken for results" {
	run -0 pisb create ee -f "$BATS_TEST_TMPDIR/r.yaml"
	os_fault '{"fail":{"execd_command":{"status":500,"count":1}}}'
	run -5 --separate-stderr pisb exec ee -- echo x
	[[ $stderr == *"500"* ]]
	os_fault '{"fail":{"execd_download":{"status":503,"count":1}}}'
	run -0 pisb write ee a.txt --content x
	run -5 --separate-stderr pisb read ee a.txt
	[[ $stderr == *"503"* ]]
	os_fault '{"fail":{"execd_command":{"status":0,"count":1}}}'
	run -5 pisb exec ee -- echo dropped
}
