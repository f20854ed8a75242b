#!/usr/bin/env bats
# The opensandbox driver's lifecycle against the fake OpenSandbox server:
# create (image, snapshotId), connect (sandboxId), stop/start/destroy,
# events and --on-ready, the API key's sources and where it never goes.
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

@test "create from an image: the request carries the config, pisb's metadata and a default-deny egress policy" {
	os_config "$BATS_TEST_TMPDIR/full.yaml" \
		"  image: python:3.11" \
		"  timeoutSeconds: 1200" \
		"  resourceLimits: {cpu: \"2\", memory: 4Gi}" \
		"  entrypoint: [sleep, infinity]" \
		"  env: {GREETING: hello}" \
		"  metadata: {project: apollo}" \
		"  volumes:" \
		"    - {name: data, mountPath: /data, pvc: {claimName: data-pvc, storage: 5Gi}}" \
		"  networkAllowlist: [pypi.org, \"*.pythonhosted.org\"]" \
		"  workspace: /work"
	run -0 pisb create demo -f "$BATS_TEST_TMPDIR/full.yaml" --session-id sess-42
	id=$(os_sid demo)
	[[ $id =~ ^[0-9a-f-]{36}$ ]]
	run -0 os_admin GET "/_fake/sandboxes/$id"
	jq -e '.state == "Running"' <<<"$output"
	jq -e '.request | .image.uri == "python:3.11" and .timeout == 1200
		and .resourceLimits == {"cpu":"2","memory":"4Gi"} and .entrypoint == ["sleep","infinity"]
		and .env.GREETING == "hello"
		and (.metadata | del(.["pisb-state"], .["pisb-instance"])) == {"project":"apollo","pi-extension":"pisb",
			"pi-session-id":"sess-42","pisb-policy":"kill","pisb-name":"demo"}
		and .networkPolicy == {"defaultAction":"deny","egress":[{"action":"allow","target":"pypi.org"},{"action":"allow","target":"*.pythonhosted.org"}]}
		and .volumes[0].name == "data" and .volumes[0].mountPath == "/data"
		and .volumes[0].pvc.claimName == "data-pvc" and .volumes[0].pvc.storage == "5Gi"' <<<"$output"
	# the workspace exists and commands start there; env reached the sandbox
	run -0 pisb exec demo -- sh -c 'pwd; echo "$GREETING"'
	[ "$output" = "$(printf '/work\nhello')" ]
	run -0 pisb inspect demo
	jq -e --arg id "$id" '.driver == "opensandbox" and .status == "running"
		and .remote.sandboxId == $id and .remote.createdByPisb == true
		and .remote.state == "Running" and (.remote.expiresAt | type) == "string"' <<<"$output"
	run -0 pisb list --json
	jq -e '.[0].name == "demo" and .[0].status == "running"' <<<"$output"
}

@test "create without networkAllowlist still denies egress; timeoutSeconds defaults to 3600" {
	os_config "$BATS_TEST_TMPDIR/d.yaml" "  image: alpine:3"
	run -0 pisb create dflt -f "$BATS_TEST_TMPDIR/d.yaml"
	run -0 os_admin GET "/_fake/sandboxes/$(os_sid dflt)"
	jq -e '.request | .timeout == 3600 and .networkPolicy == {"defaultAction":"deny","egress":[]}
		and .entrypoint == ["tail","-f","/dev/null"] and (.resourceLimits | has("cpu") and has("memory"))
		and (.metadata | del(.["pisb-state"], .["pisb-instance"])) == {"pi-extension":"pisb",
			"pisb-policy":"kill","pisb-name":"dflt"}' <<<"$output"
}

@test "create runs setup lines in the workspace; a failing one is kept in setupError" {
	cat >"$BATS_TEST_TMPDIR/s.yaml" <<-Y
	version: 1
	driver: opensandbox
	setup:
	  - echo one > one.txt
	  - echo two >> one.txt
	opensandbox:
	  domain: 127.0.0.1:$OS_PORT
	  image: x
	Y
	run -0 pisb create su -f "$BATS_TEST_TMPDIR/s.yaml"
	run -0 pisb exec su -- cat /workspace/one.txt
	[ "$output" = "$(printf 'one\ntwo')" ]
	run -0 pisb inspect su
	jq -e '.setupError == null' <<<"$output"
	sed -i 's/echo two >> one.txt/exit 7/' "$BATS_TEST_TMPDIR/s.yaml"
	run -0 pisb create sf -f "$BATS_TEST_TMPDIR/s.yaml"
	run -0 pisb inspect sf
	jq -e '.status == "running" and (.setupError | test("setup\\[1\\] .exit 7. exited with 7"))' <<<"$output"
	grep -q "setup failed" "$PI_SANDBOX_HOME/instances/sf/remote.log"
}

@test "create from a snapshotId" {
	os_config "$BATS_TEST_TMPDIR/s.yaml" "  snapshotId: snap-123"
	run -0 pisb create snap -f "$BATS_TEST_TMPDIR/s.yaml"
	run -0 os_api GET "/v1/sandboxes/$(os_sid snap)"
	body=$(sed '$d' <<<"$output")
	jq -e '.snapshotId == "snap-123" and .status.state == "Running"' <<<"$body"
}

@test "create emits ready on --events-fd with the sandbox's identity" {
	run -0 pisb create ev -f "$BATS_TEST_TMPDIR/r.yaml" --events-fd 3 3>"$BATS_TEST_TMPDIR/events"
	run -0 cat "$BATS_TEST_TMPDIR/events"
	[ "$(wc -l <"$BATS_TEST_TMPDIR/events")" -eq 1 ]
	jq -e --arg id "$(os_sid ev)" '.event == "ready" and .name == "ev" and .driver == "opensandbox"
		and .sandboxId == $id and .workspace == "/workspace"
		and .createdByExtension == true and .resumed == false' <<<"$output"
}

@test "a failing --on-ready consumer kills the sandbox and leaves no instance" {
	run -1 --separate-stderr pisb create hook -f "$BATS_TEST_TMPDIR/r.yaml" --on-ready false
	[[ $stderr == *"on-ready"* ]]
	[[ $stderr == *"killed"* ]]
	[ ! -e "$PI_SANDBOX_HOME/instances/hook" ]
	run -0 os_admin GET /_fake/stats
	jq -e '.sandboxes == 0 and .by_op.create == 1 and .by_op.delete == 1' <<<"$output"
	run -0 pisb list --json
	[ "$output" = "[]" ]
}

@test "--on-ready sees the ready event; a passing consumer keeps the sandbox" {
	run -0 pisb create ok -f "$BATS_TEST_TMPDIR/r.yaml" --on-ready 'printf "%s" "$PISB_EVENT" > '"$BATS_TEST_TMPDIR/hook.json"
	jq -e '.event == "ready" and .name == "ok" and .createdByExtension' "$BATS_TEST_TMPDIR/hook.json"
	[ "$(os_state "$(os_sid ok)")" = Running ]
}

@test "a create the server refuses fails with 5 and leaves nothing behind" {
	os_fault '{"fail":{"create":{"status":500,"count":1}}}'
	run -5 --separate-stderr pisb create bad -f "$BATS_TEST_TMPDIR/r.yaml"
	[[ $stderr == *"create sandbox: 500 FAKE::INJECTED_FAULT"* ]]
	[ ! -e "$PI_SANDBOX_HOME/instances/bad" ]
	[ -z "$(ls "$PI_SANDBOX_HOME/staging" 2>/dev/null)" ]
}

@test "a sandbox whose execd never answers is killed again; create fails with 5" {
	os_fault '{"fail":{"execd_ping":{"status":502,"count":-1}}}'
	export PISB_OS_READY_MS=1500
	run -5 --separate-stderr pisb create mute -f "$BATS_TEST_TMPDIR/r.yaml"
	[[ $stderr == *"execd does not answer"* ]]
	[ ! -e "$PI_SANDBOX_HOME/instances/mute" ]
	run -0 os_admin GET /_fake/stats
	jq -e '.sandboxes == 0 and .by_op.delete == 1' <<<"$output"
}

@test "create refuses a taken name (4) and reserved metadata keys before any request (2)" {
	run -0 pisb create dup -f "$BATS_TEST_TMPDIR/r.yaml"
	run -4 --separate-stderr pisb create dup -f "$BATS_TEST_TMPDIR/r.yaml"
	[[ $stderr == *"already exists"* ]]
	os_admin DELETE /_fake/stats >/dev/null
	os_config "$BATS_TEST_TMPDIR/bad.yaml" "  image: x" "  metadata: {opensandbox.io/owner: me}"
	run -2 --separate-stderr pisb create res -f "$BATS_TEST_TMPDIR/bad.yaml"
	[[ $stderr == *"opensandbox.io/"*"reserved"* ]]
	[ "$(os_admin GET /_fake/stats | jq .total)" -eq 0 ]
}

@test "stop pauses, start resumes, destroy kills and removes the instance" {
	run -0 pisb create life -f "$BATS_TEST_TMPDIR/r.yaml"
	id=$(os_sid life)
	run -0 pisb stop life --events-fd 3 3>"$BATS_TEST_TMPDIR/ev"
	[ "$(os_state "$id")" = Paused ]
	jq -e '.event == "released" and .mode == "pause" and .createdByExtension' "$BATS_TEST_TMPDIR/ev"
	run -0 pisb list --json
	jq -e '.[0].status == "paused"' <<<"$output"
	run -0 pisb start life
	[ "$(os_state "$id")" = Running ]
	run -0 pisb exec life -- echo back
	[ "$output" = back ]
	run -0 pisb destroy life --confirm life --events-fd 3 3>"$BATS_TEST_TMPDIR/ev"
	jq -e '.event == "released" and .mode == "kill"' "$BATS_TEST_TMPDIR/ev"
	[ "$(os_state "$id")" = gone ]
	[ ! -e "$PI_SANDBOX_HOME/instances/life" ]
}

@test "connect resumes a paused sandbox, renews it once, and reports resumed" {
	out=$(os_api POST /v1/sandboxes -d '{"image":{"uri":"x"},"entrypoint":["tail"],"resourceLimits":{"cpu":"1"},"timeout":60}')
	id=$(sed '$d' <<<"$out" | jq -r .id)
	os_api POST "/v1/sandboxes/$id/pause" >/dev/null
	[ "$(os_state "$id")" = Paused ]
	os_config "$BATS_TEST_TMPDIR/c.yaml" "  sandboxId: $id" "  timeoutSeconds: 7200"
	os_admin DELETE /_fake/stats >/dev/null
	before=$(date +%s)
	run -0 pisb connect att -f "$BATS_TEST_TMPDIR/c.yaml" --events-fd 3 3>"$BATS_TEST_TMPDIR/ev"
	[ "$(os_state "$id")" = Running ]
	[ "$(os_ops renew)" -eq 1 ]
	[ "$(os_ops resume)" -eq 1 ]
	# expiry = connect time + timeoutSeconds (not the 60 s it was created with)
	exp=$(os_api GET "/v1/sandboxes/$id" | sed '$d' | jq -r '.expiresAt | sub("\\.[0-9]+";"") | fromdateiso8601')
	[ "$exp" -ge $((before + 7200 - 5)) ]
	[ "$exp" -le $((before + 7200 + 60)) ]
	jq -e --arg id "$id" '.event == "ready" and .sandboxId == $id and .createdByExtension == false
		and .resumed == true' "$BATS_TEST_TMPDIR/ev"
	run -0 pisb inspect att
	jq -e '.remote.createdByPisb == false and .status == "running"' <<<"$output"
	run -0 pisb exec att -- echo attached
	[ "$output" = attached ]
}

@test "stop and destroy of a connected sandbox only disconnect: it keeps running" {
	out=$(os_api POST /v1/sandboxes -d '{"image":{"uri":"x"},"entrypoint":["tail"],"resourceLimits":{"cpu":"1"},"timeout":600}')
	id=$(sed '$d' <<<"$out" | jq -r .id)
	os_config "$BATS_TEST_TMPDIR/c.yaml" "  sandboxId: $id"
	run -0 pisb connect a -f "$BATS_TEST_TMPDIR/c.yaml"
	run -0 pisb stop a --events-fd 3 3>"$BATS_TEST_TMPDIR/ev"
	jq -e '.event == "released" and .mode == "disconnect" and .createdByExtension == false' "$BATS_TEST_TMPDIR/ev"
	[ ! -e "$PI_SANDBOX_HOME/instances/a" ]
	[ "$(os_state "$id")" = Running ]
	run -0 pisb connect b -f "$BATS_TEST_TMPDIR/c.yaml"
	run -0 pisb destroy b --confirm b
	[ ! -e "$PI_SANDBOX_HOME/instances/b" ]
	[ "$(os_state "$id")" = Running ]
	[ "$(os_ops delete)" -eq 0 ]
}

@test "connect to an unknown sandbox fails with 3 and leaves nothing" {
	os_config "$BATS_TEST_TMPDIR/c.yaml" "  sandboxId: no-such-sandbox"
	run -3 --separate-stderr pisb connect x -f "$BATS_TEST_TMPDIR/c.yaml"
	[[ $stderr == *"no sandbox 'no-such-sandbox'"* ]]
	[ ! -e "$PI_SANDBOX_HOME/instances/x" ]
}

@test "a failing --on-ready on connect disconnects and never kills" {
	out=$(os_api POST /v1/sandboxes -d '{"image":{"uri":"x"},"entrypoint":["tail"],"resourceLimits":{"cpu":"1"},"timeout":600}')
	id=$(sed '$d' <<<"$out" | jq -r .id)
	os_config "$BATS_TEST_TMPDIR/c.yaml" "  sandboxId: $id"
	run -1 --separate-stderr pisb connect h -f "$BATS_TEST_TMPDIR/c.yaml" --on-ready false
	[[ $stderr == *"disconnected"* ]]
	[ ! -e "$PI_SANDBOX_HOME/instances/h" ]
	[ "$(os_state "$id")" = Running ]
}

@test "the API key is never written to the state directory, logs or inspect" {
	run -0 pisb create k -f "$BATS_TEST_TMPDIR/r.yaml"
	run -0 pisb exec k -- true
	run -0 pisb stop k
	run -0 pisb start k
	run -0 pisb inspect k
	[[ $output != *"$OS_KEY"* ]]
	run -1 grep -rF -- "$OS_KEY" "$PI_SANDBOX_HOME"
	# not even part of it
	run -1 grep -rF -- "${OS_KEY:8:12}" "$PI_SANDBOX_HOME"
}

@test "-v traces the HTTP exchange with the API key redacted" {
	run -0 --separate-stderr pisb create -v tr -f "$BATS_TEST_TMPDIR/r.yaml"
	[[ $stderr == *"OPEN-SANDBOX-API-KEY: <redacted>"* ]]
	[[ $stderr == *"POST /v1/sandboxes"* ]]
	[[ $stderr != *"$OS_KEY"* ]]
	run -0 --separate-stderr pisb exec -v tr -- echo hi
	[[ $stderr == *"GET /v1/sandboxes/"* ]]
	[[ $stderr != *"$OS_KEY"* ]]
}

@test "apiKeyFile must be 0600: another mode is refused, naming the file and its mode" {
	unset OPEN_SANDBOX_API_KEY
	printf '%s\n' "$OS_KEY" >"$BATS_TEST_TMPDIR/key"
	chmod 644 "$BATS_TEST_TMPDIR/key"
	os_config "$BATS_TEST_TMPDIR/kf.yaml" "  image: x" "  apiKeyFile: $BATS_TEST_TMPDIR/key"
	run -2 --separate-stderr pisb create kf -f "$BATS_TEST_TMPDIR/kf.yaml"
	[[ $stderr == *"$BATS_TEST_TMPDIR/key"*"mode 0644"*"0600"* ]]
	[ "$(os_admin GET /_fake/stats | jq .total)" -eq 0 ]
	chmod 600 "$BATS_TEST_TMPDIR/key"
	run -0 pisb create kf -f "$BATS_TEST_TMPDIR/kf.yaml"
	run -0 pisb exec kf -- echo via-file
	[ "$output" = via-file ]
}

@test "list asks each server once (one list request per 200 of pisb's sandboxes, a GET per connected one); inspect asks" {
	run -0 pisb create l -f "$BATS_TEST_TMPDIR/r.yaml"
	run -0 pisb create l2 -f "$BATS_TEST_TMPDIR/r.yaml"
	out=$(os_api POST /v1/sandboxes -d '{"image":{"uri":"x"},"entrypoint":["tail"],"resourceLimits":{"cpu":"1"},"timeout":600}')
	os_config "$BATS_TEST_TMPDIR/c.yaml" "  sandboxId: $(sed '$d' <<<"$out" | jq -r .id)"
	run -0 pisb connect lc -f "$BATS_TEST_TMPDIR/c.yaml"
	os_admin DELETE /_fake/stats >/dev/null
	run -0 pisb list
	[ "$(os_admin GET /_fake/stats | jq .total)" -eq 2 ]
	[ "$(os_ops list)" -eq 1 ]
	[ "$(os_ops get)" -eq 1 ]
	run -0 pisb inspect l
	[ "$(os_ops get)" -eq 2 ]
	os_api POST "/v1/sandboxes/$(os_sid l)/pause" >/dev/null
	run -0 pisb list --json
	jq -e '.[0].name == "l" and .[0].status == "paused" and .[1].status == "running" and .[2].status == "running"' <<<"$output"
}

@test "network.allowedHosts with ports: OpenSandbox gets each host once, without the port; an IP literal is refused before any request" {
	os_config "$BATS_TEST_TMPDIR/p.yaml" "  image: alpine:3" \
		"network:" \
		"  allowedHosts: [pypi.org, \"pypi.org:8443\", \"api.example.com:8080\", \"*.example.org:443\"]"
	run -0 pisb create ports -f "$BATS_TEST_TMPDIR/p.yaml"
	run -0 os_admin GET "/_fake/sandboxes/$(os_sid ports)"
	jq -e '.request.networkPolicy == {"defaultAction":"deny","egress":[{"action":"allow","target":"pypi.org"},{"action":"allow","target":"api.example.com"},{"action":"allow","target":"*.example.org"}]}' <<<"$output"
	# the egress spec has no IP targets: refused, naming the entry, and
	# nothing was created on the server
	n=$(os_admin GET /_fake/sandboxes | jq 'length')
	for ip in 192.0.2.7 "192.0.2.7:443" "[2001:db8::1]:443"; do
		os_config "$BATS_TEST_TMPDIR/ip.yaml" "  image: alpine:3" "network:" "  allowedHosts: [pypi.org, \"$ip\"]"
		run -2 --separate-stderr pisb create ip -f "$BATS_TEST_TMPDIR/ip.yaml"
		[[ $stderr == *"network.allowedHosts[1]: '$ip': OpenSandbox's egress policy takes hostnames and *.domain only"* ]]
		[ ! -e "$PI_SANDBOX_HOME/instances/ip" ]
	done
	[ "$(os_admin GET /_fake/sandboxes | jq 'length')" = "$n" ]
	# the fake holds a target to the spec: a port or an IP is a 400
	for t in pypi.org:8443 192.0.2.7; do
		run -0 os_api POST /v1/sandboxes -d "{\"image\":{\"uri\":\"alpine:3\"},\"entrypoint\":[\"sleep\",\"9\"],\"resourceLimits\":{\"cpu\":\"1\"},\"timeout\":600,\"networkPolicy\":{\"defaultAction\":\"deny\",\"egress\":[{\"action\":\"allow\",\"target\":\"$t\"}]}}"
		[ "${lines[-1]}" = 400 ]
		[[ $output == *"is not an FQDN or wildcard domain"* ]]
	done
}

@test "pisb release: lifecycle.onSessionShutdown (pause here), --policy overrides; a connected sandbox is only disconnected" {
	os_config "$BATS_TEST_TMPDIR/p.yaml" "  image: alpine:3" "  lifecycle:" "    onSessionShutdown: pause"
	run -0 pisb create rel -f "$BATS_TEST_TMPDIR/p.yaml"
	id=$(os_sid rel)
	run -0 pisb release rel --events-fd 3 3>"$BATS_TEST_TMPDIR/ev"
	jq -e '.event == "released" and .driver == "opensandbox" and .mode == "pause"' "$BATS_TEST_TMPDIR/ev"
	[ "$(os_state "$id")" = Paused ]
	[ -e "$PI_SANDBOX_HOME/instances/rel" ]
	run -0 --separate-stderr pisb release rel --policy remove --json
	jq -e '. == {"name":"rel","status":"removed"}' <<<"$output"
	[ "$(os_state "$id")" = gone ]
	[ ! -e "$PI_SANDBOX_HOME/instances/rel" ]
	# connected: disconnect, whatever the policy says
	out=$(os_api POST /v1/sandboxes -d '{"image":{"uri":"x"},"entrypoint":["tail"],"resourceLimits":{"cpu":"1"},"timeout":600}')
	sid=$(sed '$d' <<<"$out" | jq -r .id)
	os_config "$BATS_TEST_TMPDIR/c.yaml" "  sandboxId: $sid"
	run -0 pisb connect att -f "$BATS_TEST_TMPDIR/c.yaml"
	run -0 pisb release att --policy remove --events-fd 3 3>"$BATS_TEST_TMPDIR/ev"
	jq -e '.mode == "disconnect"' "$BATS_TEST_TMPDIR/ev"
	[ "$(os_state "$sid")" = Running ]
	[ ! -e "$PI_SANDBOX_HOME/instances/att" ]
}
