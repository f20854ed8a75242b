#!/usr/bin/env bats
# pisb renew: which opensandbox sandboxes are due, what a renewal sends,
# failures retried and shown, owners, locks against stop and against
# itself, the --watch loop, and the parallel pass.
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
	[ -n "${BG:-}" ] && kill "$BG" 2>/dev/null && wait "$BG" 2>/dev/null
	os_fake_stop
}

# make NAME due now, as if its last renewal were long ago
make_due() {
	local f=$PI_SANDBOX_HOME/instances/$1/status.json
	jq '.extra.renewedAt = 0' "$f" >"$f.new" && mv "$f.new" "$f"
}

fake_expiry() {
	os_api GET "/v1/sandboxes/$1" | sed '$d' | jq -r '.expiresAt | sub("\\.[0-9]+";"") | fromdateiso8601'
}

@test "an empty state: nothing to do, exit 0, the report's three lists" {
	run -0 pisb renew --json
	[ "$output" = '{"renewed":[],"failed":[],"skipped":[]}' ]
	run -0 --separate-stderr pisb renew
	[[ $stderr == *"renewed 0, failed 0, skipped 0"* ]]
}

@test "only due sandboxes are renewed, to renewal time + timeoutSeconds" {
	run -0 pisb create a -f "$BATS_TEST_TMPDIR/r.yaml"
	run -0 pisb create b -f "$BATS_TEST_TMPDIR/r.yaml"
	os_admin DELETE /_fake/stats >/dev/null
	run -0 pisb renew --json
	jq -e '.renewed == [] and ([.skipped[].name] == ["a","b"])
		and (.skipped[0].reason | startswith("not due until"))' <<<"$output"
	[ "$(os_ops renew)" -eq 0 ]
	make_due b
	before=$(date +%s)
	run -0 pisb renew --json
	jq -e '.renewed == ["b"] and .failed == [] and [.skipped[].name] == ["a"]' <<<"$output"
	[ "$(os_ops renew)" -eq 1 ]
	exp=$(fake_expiry "$(os_sid b)")
	[ "$exp" -ge $((before + 600 - 2)) ]
	[ "$exp" -le $((before + 600 + 5)) ]
	run -0 pisb inspect b
	jq -e '.remote.renewFailures == 0 and .remote.renewedAt >= '"$before"'
		and .remote.nextRenewAt == .remote.renewedAt + 300' <<<"$output"
	grep -q "renewed sandbox $(os_sid b)" "$PI_SANDBOX_HOME/instances/b/remote.log"
}

@test "the interval is min(timeoutSeconds/2, 1 h): a short TTL is kept alive by passes" {
	os_config "$BATS_TEST_TMPDIR/s.yaml" "  image: x" "  timeoutSeconds: 8"
	run -0 pisb create short -f "$BATS_TEST_TMPDIR/s.yaml"
	id=$(os_sid short)
	run -0 pisb renew --json
	jq -e '.renewed == []' <<<"$output"
	sleep 4.2
	run -0 pisb renew --json
	jq -e '.renewed == ["short"]' <<<"$output"
	sleep 4.2
	run -0 pisb renew --json
	jq -e '.renewed == ["short"]' <<<"$output"
	# created over 8.4 s ago with an 8 s TTL: alive only thanks to the
	# renewals (8 s, not 4: a pass can take seconds on a loaded machine)
	[ "$(os_state "$id")" = Running ]
	os_config "$BATS_TEST_TMPDIR/l.yaml" "  image: x" "  timeoutSeconds: 86400"
	run -0 pisb create long -f "$BATS_TEST_TMPDIR/l.yaml"
	run -0 pisb inspect long
	jq -e '.remote.nextRenewAt - .remote.renewedAt == 3600' <<<"$output"
}

@test "a failed renewal (503) is reported, shown by inspect, and retried at the next pass" {
	run -0 pisb create f -f "$BATS_TEST_TMPDIR/r.yaml"
	make_due f
	os_fault '{"fail":{"renew":{"status":503,"count":1}}}'
	run -5 --separate-stderr pisb renew --json
	jq -e '.renewed == [] and .failed[0].name == "f" and (.failed[0].error | test("503"))' <<<"$output"
	[[ $stderr == *"renew 'f' failed"*"503"* ]]
	run -0 pisb inspect f
	jq -e '(.remote.lastRenewError | test("503 FAKE::INJECTED_FAULT")) and .remote.renewFailures == 1
		and .remote.lastRenewErrorAt > 0' <<<"$output"
	grep -q "renew failed (retried at the next pass)" "$PI_SANDBOX_HOME/instances/f/remote.log"
	run -0 pisb renew --json
	jq -e '.renewed == ["f"]' <<<"$output"
	run -0 pisb inspect f
	jq -e '.remote.renewFailures == 0' <<<"$output"
	[ "$(os_ops renew)" -eq 2 ]
}

@test "a sandbox whose owner process is gone is not renewed, so it expires" {
	sleep 0.1 &
	dead=$!
	wait "$dead"
	run -0 pisb create orphan -f "$BATS_TEST_TMPDIR/r.yaml" --owner-pid "$dead"
	run -0 pisb create owned -f "$BATS_TEST_TMPDIR/r.yaml" --owner-pid $$
	make_due orphan
	make_due owned
	run -0 pisb renew --json
	jq -e --arg p "$dead" '.renewed == ["owned"] and .skipped[0].name == "orphan"
		and (.skipped[0].reason | test("owner process " + $p + " is gone"))' <<<"$output"
	[ "$(os_ops renew)" -eq 1 ]
}

@test "a sandbox gone from the server fails once, is marked gone, then skipped" {
	run -0 pisb create g -f "$BATS_TEST_TMPDIR/r.yaml"
	os_fault "{\"expire_now\":\"$(os_sid g)\"}"
	make_due g
	run -5 --separate-stderr pisb renew --json
	jq -e '(.failed[0].error | test("no longer exists"))' <<<"$output"
	[[ $stderr == *"renew 'g' failed"*"no longer exists"* ]]
	run -0 pisb list --json
	jq -e '.[0].status == "gone"' <<<"$output"
	run -0 pisb renew --json
	jq -e '.failed == [] and (.skipped[0].reason | test("no longer exists"))' <<<"$output"
}

@test "a sandbox without automatic expiration is renewed at connect only, then left alone" {
	out=$(os_api POST /v1/sandboxes -d '{"image":{"uri":"x"},"entrypoint":["tail"],"resourceLimits":{"cpu":"1"}}')
	id=$(sed '$d' <<<"$out" | jq -r .id)
	os_config "$BATS_TEST_TMPDIR/c.yaml" "  sandboxId: $id"
	run -0 pisb connect manual -f "$BATS_TEST_TMPDIR/c.yaml"
	run -0 pisb inspect manual
	jq -e '.remote.noExpiration == true' <<<"$output"
	make_due manual
	run -0 pisb renew --json
	jq -e '.renewed == [] and (.skipped[0].reason | test("no automatic expiration"))' <<<"$output"
}

@test "renew without an API key in its environment says so (cron's environment is bare)" {
	run -0 pisb create nokey -f "$BATS_TEST_TMPDIR/r.yaml"
	make_due nokey
	unset OPEN_SANDBOX_API_KEY
	run -5 --separate-stderr pisb renew
	[[ $stderr == *"renew 'nokey' failed"*"no API key was given"* ]]
	export OPEN_SANDBOX_API_KEY=wrong
	run -5 --separate-stderr pisb renew
	[[ $stderr == *"rejected the API key from OPEN_SANDBOX_API_KEY"* ]]
}

@test "two passes at once never renew one sandbox twice" {
	run -0 pisb create c1 -f "$BATS_TEST_TMPDIR/r.yaml"
	make_due c1
	os_fault '{"delay_ms":{"renew":700}}'
	os_admin DELETE /_fake/stats >/dev/null
	pisb renew --json >"$BATS_TEST_TMPDIR/r1" &
	p1=$!
	pisb renew --json >"$BATS_TEST_TMPDIR/r2" &
	p2=$!
	wait "$p1" "$p2"
	[ "$(os_ops renew)" -eq 1 ]
	jq -s -e '([.[].renewed[]] == ["c1"]) and ([.[].skipped[].name] == ["c1"])' \
		"$BATS_TEST_TMPDIR/r1" "$BATS_TEST_TMPDIR/r2"
}

@test "stop waits for a renewal in flight: the pause starts after the renewal ended" {
	run -0 pisb create s -f "$BATS_TEST_TMPDIR/r.yaml"
	make_due s
	os_fault '{"delay_ms":{"renew":1500}}'
	os_admin DELETE /_fake/log >/dev/null
	pisb renew --json >"$BATS_TEST_TMPDIR/renew.out" &
	BG=$!
	# the renewal request has reached the server (and sleeps there)
	for i in $(seq 100); do [ "$(os_ops renew)" -ge 1 ] && break; sleep 0.02; done
	[ "$(os_ops renew)" -eq 1 ]
	run -0 pisb stop s
	wait "$BG"
	BG=
	jq -e '.renewed == ["s"]' "$BATS_TEST_TMPDIR/renew.out"
	[ "$(os_state "$(os_sid s)")" = Paused ]
	# stop blocked on the renewal: the server's log shows the pause
	# beginning only after the renewal ended (no wall-clock bound: under
	# load the renewal may be seen late, and stop then waits less)
	run -0 os_admin GET /_fake/log
	jq -e '(map(select(.op == "renew"))[0].end_ms) <= (map(select(.op == "pause"))[0].start_ms)' <<<"$output"
	# and the renewal's bookkeeping did not undo the pause
	run -0 pisb list --json
	jq -e '.[0].status == "paused"' <<<"$output"
}

@test "destroy waits for a renewal in flight before it kills" {
	run -0 pisb create d -f "$BATS_TEST_TMPDIR/r.yaml"
	make_due d
	os_fault '{"delay_ms":{"renew":1000}}'
	os_admin DELETE /_fake/log >/dev/null
	pisb renew --json >/dev/null &
	BG=$!
	for i in $(seq 100); do [ "$(os_ops renew)" -ge 1 ] && break; sleep 0.02; done
	run -0 pisb destroy d --confirm d
	wait "$BG" || true
	BG=
	run -0 os_admin GET /_fake/log
	jq -e '(map(select(.op == "renew"))[0].end_ms) <= (map(select(.op == "delete"))[0].start_ms)' <<<"$output"
	[ ! -e "$PI_SANDBOX_HOME/instances/d" ]
}

@test "renew --watch renews every interval until SIGTERM" {
	os_config "$BATS_TEST_TMPDIR/w.yaml" "  image: x" "  timeoutSeconds: 2"
	run -0 pisb create w -f "$BATS_TEST_TMPDIR/w.yaml"
	id=$(os_sid w)
	pisb renew --watch --interval 1 --json >"$BATS_TEST_TMPDIR/watch.out" 2>&1 &
	BG=$!
	sleep 4.5
	# a 2 s TTL, 4.5 s old: alive only because the loop renewed it
	[ "$(os_state "$id")" = Running ]
	kill -TERM "$BG"
	rc=0
	wait "$BG" || rc=$?
	BG=
	[ "$rc" -eq 0 ]
	[ "$(os_ops renew)" -ge 2 ]
	# one report line per pass
	[ "$(wc -l <"$BATS_TEST_TMPDIR/watch.out")" -ge 4 ]
	jq -e '.renewed' "$BATS_TEST_TMPDIR/watch.out" >/dev/null
}

@test "--interval without --watch is a usage error" {
	run -2 pisb renew --interval 5
}

@test "renewals run in parallel: 200 sandboxes at 50 ms each, many requests at once" {
	run -0 "$TOP/bench/renew.sh" 200
	[[ $output == *"200 renewed, 0 failed"* ]]
	# the fake server's own count of requests in flight at once (serial
	# renewals would show 1; no wall-clock bound, which load would break)
	peak=$(sed -n 's/.*, \([0-9]*\) requests at once.*/\1/p' <<<"$output")
	[ "${peak:-0}" -gt 10 ]
}

@test "pisb-renew(1) is clean roff with the crontab line" {
	require_cmd groff
	run -0 groff -man -ww -z "$TOP/man/pisb-renew.1"
	[ -z "$output" ]
	grep -q 'pisb renew \\-q' "$TOP/man/pisb-renew.1"
	for s in NAME SYNOPSIS DESCRIPTION OPTIONS "JSON OUTPUT" "EXIT STATUS" EXAMPLES; do
		grep -q "^\.SH \"\?$s\"\?$" "$TOP/man/pisb-renew.1"
	done
}

@test "a 409 from renew is a state conflict, not 'no expiration': re-read, then renewed at the next pass" {
	run -0 pisb create c409 -f "$BATS_TEST_TMPDIR/r.yaml"
	id=$(os_sid c409)
	make_due c409
	os_fault '{"fail":{"renew":{"status":409,"count":1,"body":{"code":"DOCKER::SANDBOX_STATE_CONFLICT","message":"busy"}}}}'
	os_admin DELETE /_fake/stats >/dev/null
	run -5 --separate-stderr pisb renew --json
	jq -e '.renewed == [] and (.failed[0].error | test("409")) and (.failed[0].error | test("still expires at"))' <<<"$output"
	# the sandbox was read again after the refusal
	[ "$(os_ops get)" -eq 1 ]
	run -0 pisb inspect c409
	jq -e '.remote.noExpiration == false' <<<"$output"
	before=$(date +%s)
	run -0 pisb renew --json
	jq -e '.renewed == ["c409"]' <<<"$output"
	exp=$(fake_expiry "$id")
	[ "$exp" -ge $((before + 600 - 2)) ]
}

@test "a server enforcing 'after the current expiresAt': connect never shortens, renew still works" {
	os_fault '{"renew_after_current":true}'
	# a sandbox with 2 h left; the config asks for 600 s
	out=$(os_api POST /v1/sandboxes -d '{"image":{"uri":"x"},"entrypoint":["tail"],"resourceLimits":{"cpu":"1"},"timeout":7200}')
	id=$(sed '$d' <<<"$out" | jq -r .id)
	before=$(fake_expiry "$id")
	os_config "$BATS_TEST_TMPDIR/c.yaml" "  sandboxId: $id" "  timeoutSeconds: 600"
	os_admin DELETE /_fake/stats >/dev/null
	run -0 pisb connect long -f "$BATS_TEST_TMPDIR/c.yaml"
	# nothing sent: its expiry is later than now + 600
	[ "$(os_ops renew)" -eq 0 ]
	[ "$(fake_expiry "$id")" -eq "$before" ]
	grep -q "later than a renewal would set: kept" "$PI_SANDBOX_HOME/instances/long/remote.log"
	make_due long
	run -0 pisb renew --json
	jq -e '.renewed == [] and (.skipped[0].reason | test("later than a renewal would set"))' <<<"$output"
	[ "$(fake_expiry "$id")" -eq "$before" ]
	# a sandbox of pisb's own is renewed through the strict server
	run -0 pisb create own -f "$BATS_TEST_TMPDIR/r.yaml"
	make_due own
	sleep 1.1
	run -0 pisb renew --json
	jq -e '.renewed == ["own"] and .failed == []' <<<"$output"
}

@test "a stale local expiry behind the server's: the 400 re-reads, and the later expiry is kept" {
	os_fault '{"renew_after_current":true}'
	run -0 pisb create stale -f "$BATS_TEST_TMPDIR/r.yaml"
	id=$(os_sid stale)
	# someone else moved it to 2 h from now
	t=$(date -u -d '+2 hours' +%Y-%m-%dT%H:%M:%SZ)
	run -0 os_api POST "/v1/sandboxes/$id/renew-expiration" -d "{\"expiresAt\":\"$t\"}"
	make_due stale
	run -0 pisb renew --json
	jq -e '.failed == [] and (.skipped[0].reason | test("already expires at"))' <<<"$output"
	[ "$(fake_expiry "$id")" -eq "$(date -u -d "$t" +%s)" ]
}

@test "a paused sandbox is not renewed; start makes it due again" {
	run -0 pisb create p -f "$BATS_TEST_TMPDIR/r.yaml"
	run -0 pisb stop p
	make_due p
	os_admin DELETE /_fake/stats >/dev/null
	run -0 pisb renew --json
	jq -e '.renewed == [] and (.skipped[0].reason | test("paused"))' <<<"$output"
	[ "$(os_ops renew)" -eq 0 ]
	run -0 pisb start p
	make_due p
	run -0 pisb renew --json
	jq -e '.renewed == ["p"]' <<<"$output"
}

@test "a disconnected sandbox leaves the roster: it is never renewed again" {
	out=$(os_api POST /v1/sandboxes -d '{"image":{"uri":"x"},"entrypoint":["tail"],"resourceLimits":{"cpu":"1"},"timeout":600}')
	id=$(sed '$d' <<<"$out" | jq -r .id)
	os_config "$BATS_TEST_TMPDIR/c.yaml" "  sandboxId: $id" "  timeoutSeconds: 600"
	run -0 pisb connect d -f "$BATS_TEST_TMPDIR/c.yaml"
	run -0 pisb stop d
	os_admin DELETE /_fake/stats >/dev/null
	run -0 pisb renew --json
	[ "$output" = '{"renewed":[],"failed":[],"skipped":[]}' ]
	[ "$(os_ops renew)" -eq 0 ]
	[ "$(os_state "$id")" = Running ]
}

@test "renew NAME renews that one now, due or not; unknown names and --watch are refused" {
	run -0 pisb create n1 -f "$BATS_TEST_TMPDIR/r.yaml"
	run -0 pisb create n2 -f "$BATS_TEST_TMPDIR/r.yaml"
	sleep 1.1
	os_admin DELETE /_fake/stats >/dev/null
	run -0 pisb renew n1 --json
	jq -e '.renewed == ["n1"] and .skipped == []' <<<"$output"
	[ "$(os_ops renew)" -eq 1 ]
	run -3 --separate-stderr pisb renew nosuch
	[[ $stderr == *"'nosuch'"* ]]
	run -2 --separate-stderr pisb renew n1 --watch
	[[ $stderr == *"no --watch"* ]]
}
