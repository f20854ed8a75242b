#!/usr/bin/env bats
# Services of local sandboxes: supervision, restarts, env, sticky ports,
# readiness, ensure/restart/stop from the guest's .sandbox.yaml, ad-hoc
# services, bare preview links, logs.
load helpers
load fixtures/svc/lib

setup() { svc_setup; }
teardown() {
	[ -z "${OUTSIDE:-}" ] || kill "$OUTSIDE" 2>/dev/null || true
	svc_teardown
}

@test "create starts the services; svc status shows state, pid, port, readiness and URL" {
	f=$(svc_yaml s <<-'Y'
	services:
	  web:
	    command: exec python3 -m http.server $PORT --bind 127.0.0.1
	    preview: true
	  worker:
	    command: exec sleep 1000
	    health: process
	Y
	)
	svc_create box "$f"
	run -0 pisb svc box status --json
	jq -e '.ok and (.services | length == 2)' <<<"$output"
	jq -e '.services[] | select(.name == "web") | .state == "running" and .ready and .readiness == "ready"
		and (.pid | type == "number") and (.port | type == "number") and .health == "tcp"
		and (.url | test("^http://127\\.0\\.0\\.1:[0-9]+$")) and .log == "logs/web.log"' <<<"$output"
	jq -e '.services[] | select(.name == "worker") | .state == "running" and .health == "process" and .url == null' <<<"$output"
	# the pid is the one inside the sandbox
	pid=$(jq -r '.services[] | select(.name == "worker") | .pid' <<<"$output")
	run -0 pisb exec box -- cat /proc/$pid/cmdline
	[[ $output == sleep* ]]
	# human form
	run -0 pisb svc box status
	[[ ${lines[0]} == SERVICE*STATE*PID*PORT*READY*RESTARTS*URL ]]
	[[ $output == *"web "*"running"*"http://127.0.0.1:"* ]]
	# inspect carries the same
	run -0 pisb inspect box
	jq -e '(.services | map(.name) | sort) == ["web","worker"] and (.previews | length == 1)' <<<"$output"
}

@test "a service that exits is restarted one second later, a successful exit too" {
	f=$(svc_yaml s <<-'Y'
	services:
	  blink:
	    command: date +%s%N >> /workspace/runs; exit 0
	    health: process
	Y
	)
	svc_create box "$f"
	sleep 3.6
	run -0 pisb exec box -- cat /workspace/runs
	n=${#lines[@]}
	[ "$n" -ge 3 ]
	[ "$n" -le 5 ]
	# one second (not less) between an exit and the next start
	for ((i = 1; i < n; i++)); do
		gap=$(( (${lines[i]} - ${lines[i-1]}) / 1000000 ))
		[ "$gap" -ge 950 ]
	done
	run -0 svc_json box blink
	jq -e '.restarts >= 2' <<<"$output"
	run -0 pisb logs box blink
	[[ $output == *"exited with status 0; restarting in 1 s"* ]]
}

@test "PORT and PUBLIC_URL are set; env refs get the referenced service's URL and it starts first" {
	f=$(svc_yaml s <<-'Y'
	services:
	  web:
	    command: >-
	      echo "$API|$PORT|$PUBLIC_URL" > /workspace/web.env;
	      python3 -c "import socket; socket.create_connection(('127.0.0.1', int(open('/workspace/api.env').read().split('|')[0])))"
	      && echo after > /workspace/order;
	      exec python3 -m http.server $PORT
	    env: {API: "${services.api.publicURL}/v1"}
	    preview: true
	  api:
	    command: echo "$PORT|$PUBLIC_URL" > /workspace/api.env; sleep 0.5; exec python3 -m http.server $PORT
	    preview: true
	  plain:
	    command: echo "[$PORT][${PUBLIC_URL-unset}]" > /workspace/plain.env; exec sleep 1000
	    health: process
	Y
	)
	svc_create box "$f"
	api_url=$(svc_field box api url)
	api_port=$(svc_field box api port)
	web_url=$(svc_field box web url)
	web_port=$(svc_field box web port)
	run -0 pisb exec box -- cat /workspace/api.env /workspace/web.env /workspace/order /workspace/plain.env
	[ "${lines[0]}" = "$api_port|$api_url" ]
	[ "${lines[1]}" = "$api_url/v1|$web_port|$web_url" ]
	# web started only once api accepted connections
	[ "${lines[2]}" = after ]
	# no preview, no PUBLIC_URL
	[ "${lines[3]}" = "[$(svc_field box plain port)][unset]" ]
}

@test "a service's env cannot replace PORT or PUBLIC_URL" {
	f=$(svc_yaml s <<-'Y'
	services:
	  web: {command: "true", env: {PORT: "1"}}
	Y
	)
	run -2 --separate-stderr pisb create box -f "$f"
	[[ $stderr == *"services.web.env.PORT"*"set by pisb"* ]]
}

@test "ports stay the same across restart and stop/start; fixed ports are used as given" {
	f=$(svc_yaml s <<-'Y'
	services:
	  a: {command: exec python3 -m http.server $PORT, preview: true}
	  b: {command: exec python3 -m http.server $PORT, port: 8123, preview: true}
	Y
	)
	svc_create box "$f"
	a1=$(svc_json box a | jq -c '[.port, .hostPort, .url]')
	b1=$(svc_json box b | jq -c '[.port, .hostPort, .url]')
	[ "$(jq '.[0]' <<<"$b1")" = 8123 ]
	run -0 pisb svc box restart
	[ "$(svc_json box a | jq -c '[.port, .hostPort, .url]')" = "$a1" ]
	run -0 pisb stop box
	svc_start box
	[ "$(svc_json box a | jq -c '[.port, .hostPort, .url]')" = "$a1" ]
	[ "$(svc_json box b | jq -c '[.port, .hostPort, .url]')" = "$b1" ]
	run -0 curl -sS -o /dev/null -w '%{http_code}' "$(jq -r '.[2]' <<<"$a1")/"
	[ "$output" = 200 ]
	# they are kept in the instance
	jq -e --argjson a "$a1" '.a.port == $a[0] and .a.hostPort == $a[1]' "$PI_SANDBOX_HOME/instances/box/services.json"
}

@test "readiness: TCP by default, HTTP 2xx/3xx for health: /path, process for health: process" {
	f=$(svc_yaml s <<-'Y'
	setup: ["echo ok > /workspace/ok && mkdir -p /workspace/sub"]
	services:
	  tcp: {command: exec python3 -m http.server $PORT}
	  http: {command: exec python3 -m http.server $PORT, health: /ok}
	  redirect: {command: exec python3 -m http.server $PORT, health: /sub}
	  proc: {command: exec sleep 1000, health: process}
	Y
	)
	svc_create box "$f"
	run -0 pisb svc box ensure --json
	jq -e '[.services[] | .ready] == [true,true,true,true]' <<<"$output"
	jq -e '[.services[] | {(.name): .health}] | add == {"tcp":"tcp","http":"http","redirect":"http","proc":"process"}' <<<"$output"
	# the HTTP check really asked for the path (a 301 for /sub is fine)
	run -0 pisb logs box redirect
	[[ $output == *'"GET /sub HTTP/1.1" 301'* ]]
}

@test "a failing health check names the service; the sandbox stays up, the log readable" {
	f=$(svc_yaml s <<-'Y'
	services:
	  bad: {command: exec python3 -m http.server $PORT, health: /missing, timeoutMs: 1500}
	  good: {command: exec sleep 1000, health: process}
	Y
	)
	svc_create box "$f"
	run -0 svc_json box bad
	jq -e '.readiness == "failed" and .ready == false and (.error | test("not ready within 1500 ms: the health check GET /missing answered 404"))' <<<"$output"
	run -1 --separate-stderr pisb svc box ensure
	[[ $stderr == *"service 'bad' is not ready"*"404"*"pisb logs box bad"* ]]
	[[ $stderr != *"'good'"* ]]
	run -0 pisb inspect box
	jq -e '.status == "running"' <<<"$output"
	run -0 pisb logs box bad
	[[ $output == *'"GET /missing HTTP/1.1" 404'* ]]
	grep -q "service 'bad' is not ready within 1500 ms" "$PI_SANDBOX_HOME/instances/box/controller.log"
}

@test "a service that never listens fails readiness after its timeoutMs" {
	f=$(svc_yaml s <<-'Y'
	services:
	  mute: {command: exec sleep 1000, timeoutMs: 300}
	Y
	)
	svc_create box "$f"
	run -1 --separate-stderr pisb svc box ensure mute --json
	jq -e '.ok == false and .services[0].readiness == "failed"' <<<"$output"
	[[ $stderr == *"service 'mute' is not ready: not ready within 300 ms: nothing accepts connections on port"* ]]
}

@test "ensure reads the edited guest .sandbox.yaml: new services start, live ones are kept, stopped ones restart" {
	f=$(svc_yaml s <<-'Y'
	services:
	  web: {command: exec python3 -m http.server $PORT}
	Y
	)
	svc_create box "$f"
	pid1=$(svc_field box web pid)
	svc_guest_yaml box <<-'Y'
	services:
	  web:
	    command: exec python3 -m http.server $PORT
	    previews: [{url: /new/, title: New link, description: added inside}]
	  extra:
	    command: exec sleep 1000
	    health: process
	Y
	run -0 pisb svc box ensure --json
	jq -e '.ok and ([.services[].name] | sort) == ["extra","web"] and all(.services[]; .ready)' <<<"$output"
	# the live process is kept; its new preview link is there at once
	[ "$(svc_field box web pid)" = "$pid1" ]
	run -0 pisb inspect box
	jq -e '.previews | length == 1 and .[0].title == "New link" and .[0].description == "added inside"
		and (.[0].url | test("^http://127.0.0.1:[0-9]+/new/$"))' <<<"$output"
	run -0 curl -sS -o /dev/null -w '%{http_code}' "$(jq -r '.previews[0].url' <<<"$output" | sed 's|/new/$|/|')"
	[ "$output" = 200 ]
	run -0 pisb svc box stop web
	[ "$(svc_field box web state)" = stopped ]
	run -0 pisb svc box ensure
	[ "$(svc_field box web state)" = running ]
	[ "$(svc_field box web pid)" != "$pid1" ]
	# a broken guest copy is reported, nothing changes
	svc_guest_yaml box <<<'services: {web: {command: x, port: 99999}}'
	run -2 --separate-stderr pisb svc box ensure
	[[ $stderr == *"/workspace/.sandbox.yaml"*"services.web.port"* ]]
	[ "$(svc_field box web state)" = running ]
}

@test "restart takes the latest command, env and health, and keeps port and preview" {
	f=$(svc_yaml s <<-'Y'
	services:
	  web:
	    command: echo A > /workspace/which; exec python3 -m http.server $PORT
	    preview: true
	Y
	)
	svc_create box "$f"
	before=$(svc_json box web | jq -c '[.port, .hostPort, .url]')
	pid1=$(svc_field box web pid)
	svc_guest_yaml box <<-'Y'
	services:
	  web:
	    command: echo "B $X" > /workspace/which; exec python3 -m http.server $PORT
	    env: {X: "y"}
	    health: /
	    preview: true
	Y
	run -0 pisb svc box restart web --json
	jq -e '.ok and .services[0].ready and .services[0].health == "http"' <<<"$output"
	[ "$(jq -c '.services[0] | [.port, .hostPort, .url]' <<<"$output")" = "$before" ]
	[ "$(jq -r '.services[0].pid' <<<"$output")" != "$pid1" ]
	run -0 pisb exec box -- cat /workspace/which
	[ "$output" = "B y" ]
}

@test "svc stop stops a service for good (no restart) and reports it" {
	f=$(svc_yaml s <<-'Y'
	services:
	  web: {command: exec python3 -m http.server $PORT}
	  other: {command: exec sleep 1000, health: process}
	Y
	)
	svc_create box "$f"
	hpid=$(svc_field box web hostPid)
	run -0 pisb svc box stop web
	[[ $output == "web: stopped" ]]
	run ! kill -0 "$hpid"
	sleep 1.5
	run -0 svc_json box web
	jq -e '.state == "stopped" and .pid == null and .ready == false' <<<"$output"
	[ "$(svc_field box other state)" = running ]
	# all of them
	run -0 pisb svc box stop --json
	jq -e 'all(.services[]; .state == "stopped")' <<<"$output"
}

@test "ad-hoc start waits for readiness and gets a port and a preview; YAML names are refused" {
	f=$(svc_yaml s <<-'Y'
	services:
	  web: {command: exec python3 -m http.server $PORT}
	Y
	)
	svc_create box "$f"
	run -0 pisb svc box start dev --preview --title "Dev server" --description "ad hoc" --json -- 'exec python3 -m http.server $PORT'
	jq -e '.ok and .services[0].kind == "adhoc" and .services[0].ready and (.services[0].url | test("^http://127.0.0.1:"))' <<<"$output"
	url=$(jq -r '.services[0].url' <<<"$output")
	jq -e '.previews[] | select(.service == "dev") | .title == "Dev server" and .description == "ad hoc"' <<<"$output"
	run -0 curl -sS -o /dev/null -w '%{http_code}' "$url/"
	[ "$output" = 200 ]
	# a name the YAML declares is not available for ad-hoc use
	run -4 --separate-stderr pisb svc box start web -- 'exec sleep 1'
	[[ $stderr == *"service 'web' is declared in /workspace/.sandbox.yaml"* ]]
	# fixed port; several words are quoted and joined
	run -0 pisb svc box start fixed --port 8555 -- python3 -m http.server 8555
	[[ $output == "fixed: running, port 8555" ]]
	run -4 --separate-stderr pisb svc box start again --port 8555 -- 'exec sleep 100'
	[[ $stderr == *"port 8555 is already the port of service 'fixed'"* ]]
	# ad-hoc services come back after stop/start, on the same ports
	run -0 pisb stop box
	svc_start box
	run -0 svc_json box dev
	jq -e --arg u "$url" '.state == "running" and .url == $u' <<<"$output"
	[ "$(svc_field box fixed port)" = 8555 ]
}

@test "svc preview links an already-listening server without supervising it" {
	svc_create box "$(svc_yaml s <<<'version: 1')"
	# started, then polled until it listens (a fixed 0.5 s was too short at a
	# load average of 38)
	run -0 pisb exec box -- sh -c 'setsid python3 -m http.server 4567 --bind 127.0.0.1 >/dev/null 2>&1 < /dev/null &
		python3 -c "import socket, time
for _ in range(600):
    try:
        socket.create_connection((\"127.0.0.1\", 4567), 1).close()
        break
    except OSError:
        time.sleep(0.1)
else:
    raise SystemExit(\"port 4567 never listened\")"'
	run -0 pisb svc box preview 4567 --title Docs --description "the docs"
	url=$output
	[[ $url == http://127.0.0.1:*/ ]]
	run -0 curl -sS -o /dev/null -w '%{http_code}' "$url"
	[ "$output" = 200 ]
	run -0 svc_json box port-4567
	jq -e '.kind == "link" and .state == "linked" and .pid == null' <<<"$output"
	run -0 pisb inspect box
	jq -e --arg u "$url" '.previews == [{"service":"port-4567","url":$u,"title":"Docs","description":"the docs","folder":null,"hostPort":(.previews[0].hostPort),"error":null}]' <<<"$output"
	run -2 pisb svc box preview 70000
}

@test "an ad-hoc service that never becomes ready: --timeout-ms, the service named, the sandbox up, the deadline kept" {
	svc_create box "$(svc_yaml s <<<'version: 1')"
	t0=$(date +%s%N)
	run -1 --separate-stderr pisb svc box start never --timeout-ms 800 -- 'echo starting; exec sleep 1000'
	ms=$(( ($(date +%s%N) - t0) / 1000000 ))
	[[ $stderr == *"service 'never' is not ready: not ready within 800 ms: nothing accepts connections on port"* ]]
	[[ $stderr == *"pisb logs box never"* ]]
	# it answered at the deadline, not after the default 60 s
	[ "$ms" -lt 20000 ]
	run -0 svc_json box never
	jq -e '.readiness == "failed" and .state == "starting" and (.pid | type == "number")' <<<"$output"
	run -0 pisb logs box never
	[[ $output == *starting* && $output == *"not ready within 800 ms"* ]]
	run -0 pisb exec box -- true
	# the deadline is part of the service, across stop/start
	run -0 jq -e '.never.adhoc.timeoutMs == 800' "$PI_SANDBOX_HOME/instances/box/services.json"
	run -2 --separate-stderr pisb svc box start x --timeout-ms 50 -- true
	[[ $stderr == *"--timeout-ms"*"100-120000"* ]]
	run -2 --separate-stderr pisb svc box stop never --timeout-ms 900
	[[ $stderr == *"go with 'start' only"* ]]
}

@test "svc remove forgets ad-hoc services and preview links, refuses declared ones" {
	f=$(svc_yaml s <<-'Y'
	services:
	  web: {command: exec python3 -m http.server $PORT --bind 127.0.0.1, preview: true}
	Y
	)
	svc_create box "$f"
	# an ad-hoc service that ignores TERM: remove waits for the KILL
	run -0 pisb svc box start dev --preview --port 8600 -- 'trap "" TERM; exec python3 -m http.server 8600 --bind 127.0.0.1'
	url=$(svc_field box dev url)
	run -0 curl -sS -o /dev/null -w '%{http_code}' "$url/"
	# a connection held open through the preview is closed by the removal
	exec 7<>"/dev/tcp/127.0.0.1/${url##*:}"
	# started, then polled until it listens (a fixed 0.5 s was too short at a
	# load average of 38)
	run -0 pisb exec box -- sh -c 'setsid python3 -m http.server 4567 --bind 127.0.0.1 >/dev/null 2>&1 < /dev/null &
		python3 -c "import socket, time
for _ in range(600):
    try:
        socket.create_connection((\"127.0.0.1\", 4567), 1).close()
        break
    except OSError:
        time.sleep(0.1)
else:
    raise SystemExit(\"port 4567 never listened\")"'
	run -0 pisb svc box preview 4567
	link=$output
	run -0 pisb svc box remove dev --json
	jq -e '.ok and .removed == "dev" and .services == [] and ([.previews[].service] | index("dev") == null)' <<<"$output"
	run -0 timeout 5 cat <&7
	exec 7<&-
	run -0 pisb exec box -- sh -c 'for p in /proc/[0-9]*; do cat $p/cmdline 2>/dev/null | tr "\0" " "; echo; done'
	[[ $output != *"http.server 8600"* ]]
	run -7 curl -sS -o /dev/null "$url/"
	run -3 pisb svc box status dev
	[ "$(jq 'has("dev")' "$PI_SANDBOX_HOME/instances/box/services.json")" = false ]
	# its port is free again, for a new service of the same name
	run -0 pisb svc box start dev --port 8600 -- 'exec python3 -m http.server 8600 --bind 127.0.0.1'
	# a link by its port, or by its name
	run -0 pisb svc box remove 4567
	[ "$output" = "removed port-4567" ]
	run -7 curl -sS -o /dev/null "$link"
	run -3 --separate-stderr pisb svc box remove port-4567
	[[ $stderr == *"no service or preview link 'port-4567' in sandbox 'box'"* ]]
	# the server it pointed at was never pisb's: it still runs
	run -0 pisb exec box -- python3 -c 'import urllib.request; urllib.request.urlopen("http://127.0.0.1:4567/")'
	# declared in the YAML: the YAML's to remove
	run -4 --separate-stderr pisb svc box remove web
	[[ $stderr == *"service 'web' is declared in /workspace/.sandbox.yaml: delete it there first"* ]]
	printf 'version: 1\n' | svc_guest_yaml box
	run -0 pisb svc box remove web
	[ "$output" = "removed web" ]
	run -2 pisb svc box remove
	# forgotten for good: not back after stop/start
	run -0 pisb stop box
	svc_start box
	run -0 pisb svc box status --json
	jq -e '[.services[].name] == ["dev"]' <<<"$output"
}

@test "a service whose platforms leave out linux is declared but not started" {
	f=$(svc_yaml s <<-'Y'
	services:
	  mac: {command: exec sleep 1000, platforms: [darwin]}
	  both: {command: exec sleep 1000, health: process, platforms: [linux, darwin]}
	Y
	)
	svc_create box "$f"
	run -0 svc_json box mac
	jq -e '.state == "disabled" and .pid == null' <<<"$output"
	[ "$(svc_field box both state)" = running ]
	run -0 pisb exec box -- pgrep -c sleep
	[ "$output" = 1 ]
}

@test "service logs are rotated past 1 MiB" {
	f=$(svc_yaml s <<-'Y'
	services:
	  chatty:
	    command: "head -c 700000 /dev/zero | tr '\\0' x; sleep 2; head -c 700000 /dev/zero | tr '\\0' x; echo; echo after; exec sleep 1000"
	    health: process
	Y
	)
	svc_create box "$f"
	logs=$PI_SANDBOX_HOME/instances/box/logs
	for i in $(seq 100); do grep -qs '^after$' "$logs/chatty.log" && break; sleep 0.1; done
	# within the rate (a 1 MiB burst, then 256 KiB/s): kept whole, split between the two files
	[ "$(stat -c %s "$logs/chatty.log.1")" -le 1048576 ]
	[ "$(stat -c %s "$logs/chatty.log.1")" -gt 500000 ]
	[ "$(stat -c %s "$logs/chatty.log")" -lt 1048576 ]
	[ "$(stat -c %a "$logs/chatty.log")" = 600 ]
	[ "$(cat "$logs/chatty.log.1" "$logs/chatty.log" | grep -v "^\[pisb " | tr -cd x | wc -c)" = 1400000 ]
	grep -q '^after$' "$logs/chatty.log"
	grep -q 'log rotated' "$logs/chatty.log"
}

@test "a service flooding its log: the controller lives, the log stays bounded, logs and stop/start work" {
	f=$(svc_yaml s <<-'Y'
	services:
	  flood:
	    command: exec yes
	    health: process
	Y
	)
	svc_create box "$f"
	logs=$PI_SANDBOX_HOME/instances/box/logs
	ctl=$(pisb inspect box | jq -r .controller.pid)
	sleep 6
	run -0 pisb inspect box
	jq -e '.controller.alive and .controller.pid == '"$ctl" <<<"$output"
	# 1 MiB a file, two files
	[ "$(stat -c %s "$logs/flood.log")" -le 1048576 ]
	[ "$(stat -c %s "$logs/flood.log.1")" -le 1048576 ]
	# the controller stays small (it never reads a log whole)
	[ "$(awk '/^VmRSS/ { print $2 }' /proc/$ctl/status)" -lt 65536 ]
	# what was dropped is said, on a line of its own
	cat "$logs/flood.log" "$logs/flood.log.1" | grep -q '^\[pisb .*\] dropped [0-9]* bytes of output'
	run -0 pisb logs box flood --lines 3
	[ "${lines[2]}" = y ] || [[ ${lines[2]} == *"[pisb "* ]]
	run -0 pisb svc box stop flood
	run -0 pisb svc box status --json
	jq -e '.services[] | select(.name == "flood") | .state == "stopped"' <<<"$output"
	run -0 pisb svc box restart flood
	run -0 pisb svc box status --json
	jq -e '.services[] | select(.name == "flood") | .state == "running"' <<<"$output"
	run -0 pisb stop box
	run -0 svc_start box
	run -0 pisb exec box -- true
}

@test "start survives any state of a service's log: huge, a directory, a link, a FIFO" {
	f=$(svc_yaml s <<-'Y'
	services:
	  talk:
	    command: "echo hello-log; exec sleep 1000"
	    health: process
	Y
	)
	svc_create box "$f"
	logs=$PI_SANDBOX_HOME/instances/box/logs
	echo untouched > "$BATS_TEST_TMPDIR/target"
	for kind in huge dir link fifo; do
		run -0 pisb stop box
		rm -rf "$logs/talk.log" "$logs/talk.log.1"
		case $kind in
		huge) truncate -s 4G "$logs/talk.log" ;;
		dir) mkdir -p "$logs/talk.log/sub" ;;
		link) ln -s "$BATS_TEST_TMPDIR/target" "$logs/talk.log" ;;
		fifo) mkfifo "$logs/talk.log" ;;
		esac
		run -0 timeout 60 pisb start box
		for i in $(seq 50); do grep -qs hello-log "$logs/talk.log" && break; sleep 0.1; done
		[ -f "$logs/talk.log" ]
		[ ! -L "$logs/talk.log" ]
		grep -q hello-log "$logs/talk.log"
		run -0 pisb logs box talk
		[[ $output == *hello-log* ]]
		[ "$(cat "$BATS_TEST_TMPDIR/target")" = untouched ]
	done
}

@test "every op prints JSON with --json" {
	f=$(svc_yaml s <<-'Y'
	services:
	  web: {command: exec python3 -m http.server $PORT, preview: true}
	Y
	)
	svc_create box "$f"
	for op in status ensure restart "stop web" "ensure web" "preview 4000"; do
		run -0 --separate-stderr pisb svc box $op --json
		jq -e '.ok and (.services | type == "array") and (.previews | type == "array")' <<<"$output"
	done
	run -0 --separate-stderr pisb svc box start adhoc --json -- 'exec python3 -m http.server $PORT'
	jq -e '.ok and .services[0].name == "adhoc"' <<<"$output"
	run -3 --separate-stderr pisb svc box status nosuch --json
	jq -e '.ok == false and .code == 3' <<<"$output"
	[[ $stderr == *"no service 'nosuch' in sandbox 'box'"* ]]
}

@test "svc on a stopped or missing sandbox, and usage errors" {
	svc_create box "$(svc_yaml s <<<'version: 1')"
	run -0 pisb stop box
	run -1 --separate-stderr pisb svc box status
	[[ $stderr == *"sandbox 'box' is stopped"*"pisb start box"* ]]
	run -3 pisb svc nosuch status
	run -2 --separate-stderr pisb svc box frobnicate
	[[ $stderr == *"unknown operation 'frobnicate'"* ]]
	run -2 --separate-stderr pisb svc box start dev
	[[ $stderr == *"the command is required"* ]]
	run -2 --separate-stderr pisb svc box status --port 3
	[[ $stderr == *"go with 'start' only"* ]]
	# services are the local and vm drivers' (tests/54): others are refused by name
	for d in sbx opensandbox; do
		mkdir -p "$PI_SANDBOX_HOME/instances/other-$d"
		jq -n --arg n "other-$d" --arg d "$d" '{version:1,name:$n,driver:$d,createdAt:1,template:null,owner:{pid:0,start:0},sessionId:null,remote:null,config:{version:1}}' \
			> "$PI_SANDBOX_HOME/instances/other-$d/record.json"
		run -1 --separate-stderr pisb svc "other-$d" status
		[[ $stderr == *"sandbox 'other-$d' (driver $d) cannot 'svc'"*"; see pisb drivers" ]]
	done
}

@test "runnable examples of pisb-svc(1) run" {
	# the "$ " lines of the .EX blocks marked `.\" runnable`, stopping at the first that fails
	script=$BATS_TEST_TMPDIR/examples.sh
	{
		echo 'set -o pipefail'
		awk '/^\.\\" runnable$/ { want = 1; next }
		     want && /^\.EX$/ { on = 1; want = 0; next }
		     on && /^\.EE$/ { on = 0; next }
		     on && /^\$ / { sub(/^\$ /, ""); gsub(/\\-/, "-"); gsub(/\\\(aq/, "\047");
				     gsub(/\\\(dq/, "\""); gsub(/\\e/, "\\"); print; print "rc=$?; [ $rc -eq 0 ] || { echo \"failed ($rc): line " NR "\" >&2; exit 1; }" }' \
			"$TOP/man/pisb-svc.1"
	} >"$script"
	[ "$(grep -c '^rc=' "$script")" -ge 12 ]
	(cd "$TOP" && TMPDIR=$BATS_TEST_TMPDIR bash "$script")
}

@test "services, previews and egress work for an unprivileged user" {
	st=$(mktemp -d /tmp/pisb-svcuser.XXXXXX); chmod 755 "$st"
	chown pisbtest "$st" 2>/dev/null || { rm -rf "$st"; skip "machine lacks: the test user pisbtest"; }
	hp=$(host_free_port)
	printf 'network:\n  allowedHosts: ["localhost:%s", 127.0.0.1]\nservices:\n  web:\n    command: exec python3 -m http.server $PORT\n    preview: true\n' "$hp" > "$st/s.yaml"
	chmod 644 "$st/s.yaml"
	python3 -m http.server "$hp" --bind 127.0.0.1 --directory "$st" >/dev/null 2>&1 3>&- &
	OUTSIDE=$!
	run -0 as_user pisb --state-dir "$st/s" create u -f "$st/s.yaml"
	run -0 as_user pisb --state-dir "$st/s" svc u status web --json
	jq -e '.services[0].ready' <<<"$output"
	run -0 curl -sS -o /dev/null -w '%{http_code}' "$(jq -r '.services[0].url' <<<"$output")/"
	[ "$output" = 200 ]
	printf 'services:\n  two: {command: exec sleep 100, health: process}\n' |
		as_user pisb --state-dir "$st/s" exec u -- sh -c 'cat > /workspace/.sandbox.yaml'
	run -0 as_user pisb --state-dir "$st/s" svc u ensure two
	run -0 as_user pisb --state-dir "$st/s" exec u -- sh -c "unset NO_PROXY no_proxy; curl -sS -o /dev/null -w '%{http_code}' http://localhost:$hp/s.yaml"
	[ "$output" = 200 ]
	run -0 as_user pisb --state-dir "$st/s" destroy u --confirm u
	rm -rf "$st"
}

@test "create warns about a service that did not become ready, and still creates" {
	printf 'services:\n  late:\n    command: sleep 100\n    timeoutMs: 300\n' > "$BATS_TEST_TMPDIR/late.yaml"
	run -0 --separate-stderr pisb create late -f "$BATS_TEST_TMPDIR/late.yaml"
	[[ $stderr == *"service 'late' is not ready"* ]]
	run -0 pisb inspect late
	jq -e '.status == "running"' <<<"$output"
	pisb destroy late --confirm late
}
