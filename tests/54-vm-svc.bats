#!/usr/bin/env bats
# Services of a vm sandbox: supervised by the VM's relay (drivers/vm/
# vm_net.c) with the local driver's code (drivers/local/services.c, through
# its pisb_svc_ops), each service's command run in the guest by the agent
# on a service port of its own, checks and previews as streams on the net
# port.  The assertions of tests/40-svc-services.bats that concern one
# sandbox's services, on a VM.  One VM serves the file.
load helpers

FX="$BATS_TEST_DIRNAME/fixtures"

setup_file() {
	export PI_SANDBOX_HOME="$BATS_FILE_TMPDIR/state"
	[ -z "$(vm_prereqs)" ] || return 0
	cat > "$BATS_FILE_TMPDIR/vm.yaml" <<-'EOF2'
	version: 1
	driver: vm
	resources: { cpus: 1, memoryGiB: 1 }
	diskGiB: 2
	services:
	  web:
	    command: echo "$PORT|$PUBLIC_URL" > /workspace/web.env; exec python3 -m http.server $PORT --bind 127.0.0.1 --directory /workspace
	    preview: true
	  api:
	    command: mkdir -p /tmp/api; cd /tmp/api; rm -f ok.txt; (until bash -c "echo > /dev/tcp/127.0.0.1/$PORT" 2>/dev/null; do sleep 0.1; done; sleep 1; echo ok > ok.txt) & exec python3 -m http.server $PORT --bind 127.0.0.1
	    health: /ok.txt
	  worker:
	    command: echo worker up; exec sleep 1000
	    health: process
	EOF2
	pisb create sv1 -f "$BATS_FILE_TMPDIR/vm.yaml" > "$BATS_FILE_TMPDIR/create.out" 2> "$BATS_FILE_TMPDIR/create.err" ||
		echo "create failed: $?" >> "$BATS_FILE_TMPDIR/create.err"
	{ pisb write sv1 /root/attack-svc.py < "$FX/vmsvc/attack-svc.py" &&
		pisb write sv1 /root/vmport.py < "$FX/vmnet/vmport.py"; } >/dev/null 2>&1 ||
		echo "create failed: cannot write attack-svc.py" >> "$BATS_FILE_TMPDIR/create.err"
}

teardown_file() {
	pisb destroy sv1 --confirm sv1 >/dev/null 2>&1 || true
}

setup() {
	export PI_SANDBOX_HOME="$BATS_FILE_TMPDIR/state"
	vm_suite_setup "$BATS_FILE_TMPDIR/create.err"
}

# svc_field SERVICE JQ: a field of the service's status
svc_field() {
	pisb svc sv1 status "$1" --json | jq -r ".services[0] | $2"
}

# wait_for SERVICE JQ-CONDITION: poll its status until the condition holds
wait_for() {
	local _
	for _ in $(seq 1 300); do
		[ "$(svc_field "$1" "$2")" = true ] && return 0
		sleep 0.2
	done
	svc_field "$1" .
	return 1
}

relay_pid() { vm_relay_pid sv1; }

@test "services start with create, after setup; status has the local driver's JSON" {
	# ready soon after create, not at its return: a TCG guest on a
	# loaded machine takes its time to start python
	wait_for web .ready
	wait_for api .ready
	wait_for worker .ready
	run -0 pisb svc sv1 status --json
	jq -e '.ok and (.services | length == 3)' <<<"$output"
	jq -e '.services[] | select(.name == "web") | .state == "running" and .ready and .readiness == "ready"
		and .kind == "yaml" and .health == "tcp" and .declared and (.port | type == "number")
		and (.hostPort | type == "number") and .url == "http://127.0.0.1:\(.hostPort)" and .log == "logs/web.log"
		and (.hostPid | type == "number") and (.pid | type == "number") and .pid != .hostPid and .error == null and .restarts == 0' <<<"$output"
	# pid is the guest's: the service's own process there (sh -lc exec'd python3)
	gpid=$(jq -r '.services[] | select(.name == "web") | .pid' <<<"$output")
	run -0 pisb exec sv1 -- sh -c "tr '\\0' ' ' < /proc/$gpid/cmdline"
	[[ $output == *"http.server"* ]]
	run -0 pisb svc sv1 status --json
	jq -e '.services[] | select(.name == "worker") | .state == "running" and .ready and .health == "process" and .hostPort == null' <<<"$output"
	jq -e '.services[] | select(.name == "api") | .ready and .health == "http" and .healthPath == "/ok.txt"' <<<"$output"
	# the same keys as a local sandbox's service (services.c's svc_json)
	jq -e '.services[] | select(.name == "web") | keys == (["command","declared","error","health","hostPid","kind","log","name","pid","port","hostPort","ready","readiness","restarts","state","url"] | sort)' <<<"$output"
	# on the record too
	run -0 pisb inspect sv1
	jq -e '(.services | length == 3) and (.previews[] | select(.service == "web") | .hostPort | type == "number")' <<<"$output"
	# human status names them
	run -0 pisb svc sv1 status
	[[ $output == *web*running* ]]
	[[ $output == *worker*running* ]]
}

@test "a service's preview answers; it got PORT and PUBLIC_URL" {
	url=$(svc_field web .url)
	port=$(svc_field web .port)
	echo page > "$BATS_TEST_TMPDIR/p"
	pisb write sv1 page.txt < "$BATS_TEST_TMPDIR/p"
	run -0 curl -sS -m 60 "$url/page.txt"
	[ "$output" = page ]
	run -0 pisb exec sv1 -- cat /workspace/web.env
	[ "$output" = "$port|$url" ]
}

@test "an HTTP health check waits for a 2xx answer" {
	run -0 pisb logs sv1 api
	# the check asked before the file was there (404), and the service
	# became ready only after
	[[ $output == *'"GET /ok.txt HTTP/1.1" 404'*"'api' is ready (http check"* ]]
}

@test "logs NAME SERVICE shows the service's output and pisb's lines" {
	run -0 pisb logs sv1 worker
	[[ $output == *"starting 'worker': echo worker up"* ]]
	[[ $output == *"worker up"* ]]
	run -3 --separate-stderr pisb logs sv1 nosuch
	[[ $stderr == *"no log for service 'nosuch'"* ]]
}

@test "a service that dies is restarted, with its restarts counted" {
	pid0=$(svc_field worker .hostPid)
	run -0 pisb exec sv1 -- pkill -x sleep
	wait_for worker '.restarts >= 1 and .state == "running" and .hostPid != '"$pid0"
	run -0 pisb logs sv1 worker
	[[ $output == *"'worker' exited with status"*"restarting in 1 s"* ]]
}

@test "svc stop, ensure, restart answer as on local" {
	hp=$(svc_field web .hostPort)
	run -0 pisb svc sv1 stop web --json
	jq -e '.ok and .services[0].state == "stopped" and .services[0].pid == null' <<<"$output"
	# its preview stays, and says nothing listens
	run -0 curl -sS -m 60 -w ' %{http_code}' "http://127.0.0.1:$hp/"
	[[ $output == *"nothing accepts connections"*" 502" ]]
	run -0 pisb svc sv1 ensure --json
	jq -e '.ok and ([.services[] | .ready] | all)' <<<"$output"
	r0=$(svc_field web .restarts)
	run -0 pisb svc sv1 restart web --json
	jq -e '.ok and .services[0].state == "running" and .services[0].ready' <<<"$output"
	jq -e --argjson hp "$hp" '.services[0].hostPort == $hp' <<<"$output"
	run -0 curl -sS -m 60 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$hp/"
	[ "$output" = 200 ]
	run -3 --separate-stderr pisb svc sv1 status nosuch
	[[ $stderr == *"no service 'nosuch' in sandbox 'sv1'"* ]]
}

@test "an ad-hoc service starts, gets a preview, floods its log without harm, and is removed" {
	run -0 pisb svc sv1 start flood --preview --json -- '(yes flood-line | head -c 40000000) & exec python3 -m http.server $PORT --bind 127.0.0.1'
	jq -e '.ok and .services[0].kind == "adhoc" and .services[0].state == "running" and .services[0].ready' <<<"$output"
	url=$(jq -r .services[0].url <<<"$output")
	run -0 curl -sS -m 60 -o /dev/null -w '%{http_code}' "$url/"
	[ "$output" = 200 ]
	log="$PI_SANDBOX_HOME/instances/sv1/logs/flood.log"
	for _ in $(seq 1 300); do
		grep -q "dropped [0-9]* bytes of output" "$log" 2>/dev/null && break
		sleep 0.2
	done
	grep -q "dropped [0-9]* bytes of output" "$log"
	# the relay answers meanwhile, and the log stays bounded
	run -0 pisb svc sv1 status web --json
	jq -e '.services[0].ready' <<<"$output"
	[ "$(stat -c %s "$log")" -le $((1024 * 1024 + 4096)) ]
	run -0 pisb svc sv1 remove flood --json
	jq -e '.ok and .removed == "flood"' <<<"$output"
	run -3 pisb svc sv1 status flood
}

@test "more services than the VM's service ports: refused at create, naming the limit" {
	printf 'version: 1\ndriver: vm\nservices:\n' > "$BATS_TEST_TMPDIR/many.yaml"
	for i in 1 2 3 4 5 6 7 8 9; do
		printf '  s%d:\n    command: exec sleep 1000\n    health: process\n' "$i" >> "$BATS_TEST_TMPDIR/many.yaml"
	done
	run -2 --separate-stderr pisb create many -f "$BATS_TEST_TMPDIR/many.yaml"
	[[ $stderr == *"a vm sandbox runs at most 8 services"*"declares 9"* ]]
	[ ! -e "$PI_SANDBOX_HOME/instances/many" ]
}

@test "a guest that forges frames on a service's port: the relay stays, bounded; restart brings the services back" {
	relay=$(relay_pid)
	[ -n "$relay" ]
	# the runner (a child of the relay) of the service on port 10 (the
	# first service port): it reads
	# what the guest writes there
	runner=
	for p in $(pgrep -P "$relay"); do
		if ls -l "/proc/$p/fd" 2>/dev/null | grep -q 'agent10\.lock'; then runner=$p; fi
	done
	[ -n "$runner" ]
	rss0=$(awk '/^VmRSS/ {print $2}' "/proc/$runner/status")
	run -0 pisb exec sv1 -- python3 /root/attack-svc.py
	[[ $output == sent* ]]
	# the runner and the relay are the same processes, the runner barely
	# grew (the guest sent over 20 MiB); the relay still answers
	kill -0 "$runner"
	[ "$(relay_pid)" = "$relay" ]
	rss=$(awk '/^VmRSS/ {print $2}' "/proc/$runner/status")
	echo "runner RSS $rss0 KiB before, $rss KiB after"
	[ $((rss - rss0)) -lt 4096 ]
	run -0 pisb svc sv1 status --json
	jq -e '.ok and (.services | length == 3)' <<<"$output"
	# nothing it forged reached a log as output
	run -1 grep -q yyyy "$PI_SANDBOX_HOME/instances/sv1/logs/"*.log
	# the command whose agent server the guest killed lives on in the guest
	# as an orphan, holding its port (the guest's own doing); once the
	# guest ends it, the supervision brings the services back: a restart
	# answers, each runner a new one, each service ready
	pisb exec sv1 -- pkill -f http.server || true
	pids0=$(pisb svc sv1 status --json | jq -c '[.services[] | .hostPid]')
	run -0 pisb svc sv1 restart --json
	jq -e --argjson p0 "$pids0" '.ok and ([.services[] | .ready] | all) and ([.services[] | .hostPid] | all(. as $p | $p0 | index($p) | not))' <<<"$output"
	url=$(svc_field web .url)
	for _ in $(seq 1 100); do
		[ "$(curl -sS -m 30 -o /dev/null -w '%{http_code}' "$url/" 2>/dev/null)" = 200 ] && break
		sleep 0.2
	done
	run -0 curl -sS -m 60 -o /dev/null -w '%{http_code}' "$url/"
	[ "$output" = 200 ]
}

@test "stop stops the services (TERM first); start brings them back on the same ports" {
	hp=$(svc_field web .hostPort)
	port=$(svc_field web .port)
	run -0 pisb stop sv1
	run -0 pisb logs sv1 web
	[[ $output == *"stopping 'web': the sandbox stops"* ]]
	run -7 curl -sS -m 10 "http://127.0.0.1:$hp/"
	run -0 pisb start sv1
	run -0 pisb svc sv1 status --json
	jq -e '.ok and ([.services[] | .state == "running" and .ready] | all)' <<<"$output"
	jq -e --argjson hp "$hp" --argjson p "$port" '.services[] | select(.name == "web") | .hostPort == $hp and .port == $p' <<<"$output"
	run -0 curl -sS -m 60 "http://127.0.0.1:$hp/page.txt"
	[ "$output" = page ]
	# nothing started them again on the VM's way down (a relay started
	# anew would have, and stopped them a second time)
	run -0 pisb logs sv1 web
	[ "$(grep -c "stopping 'web': the sandbox stops" <<<"$output")" = 1 ]
}
