#!/usr/bin/env bats
# Previews: host 127.0.0.1 URLs relaying TCP into the sandbox.  Each of
# Gondolin's reported ingress failures is a test here: 502s on
# close-delimited responses, stalls when a backend refuses an upload early,
# truncated large responses.
load helpers
load fixtures/svc/lib

setup() { svc_setup; }
teardown() {
	[ -z "${SQUATTER:-}" ] || kill "$SQUATTER" 2>/dev/null || true
	svc_teardown
}

CLIENT() { python3 "$SVC_FIX/client.py" "$@"; }

# A sandbox "box" running server.py as ad-hoc service "srv"; sets URL.
preview_box() {
	svc_create box "$(svc_yaml s <<<'version: 1')"
	svc_push_server box
	run -0 pisb svc box start srv --preview --json -- 'exec python3 /workspace/server.py'
	URL=$(jq -r '.services[0].url' <<<"$output")
	[[ $URL == http://127.0.0.1:* ]]
}

@test "close-delimited responses arrive whole, 200 times in a row (no 502, no short read)" {
	preview_box
	want=$(CLIENT pattern-sha 300000)
	# the 200 requests from one child shell (a loop in the test body pays
	# bats' per-command trap every round)
	run -0 env URL="$URL" BODY="$BATS_TEST_TMPDIR/body" bash -c 'for i in $(seq 200); do
		out=$(curl -sS --http1.1 -o "$BODY" -w "%{http_code} %{size_download}" "$URL/close?n=300000")
		[ "$out" = "200 300000" ] || { echo "request $i: $out"; exit 1; }
	done'
	[ "$(sha256sum < "$BATS_TEST_TMPDIR/body" | cut -d' ' -f1)" = "$want" ]
	# a large one to a slow reader: the relay holds buffered bytes when
	# the backend's EOF comes, and must deliver them before passing it on
	run -0 bash -c "curl -sS --limit-rate 40M '$URL/close?n=40000000' | sha256sum"
	[ "${output%% *}" = "$(CLIENT pattern-sha 40000000)" ]
}

@test "chunked responses arrive byte-exact" {
	preview_box
	run -0 bash -c "curl -sS --http1.1 '$URL/chunked?n=1000000' | sha256sum"
	[ "${output%% *}" = "$(CLIENT pattern-sha 1000000)" ]
}

@test "a 100 MB download is byte-exact (Content-Length)" {
	preview_box
	run -0 bash -c "curl -sS '$URL/blob?mb=100' | sha256sum"
	[ "${output%% *}" = "$(CLIENT pattern-sha 104857600)" ]
}

@test "a 100 MB upload is byte-exact (Content-Length and chunked)" {
	preview_box
	head -c 100M /dev/urandom > "$BATS_TEST_TMPDIR/up"
	sum=$(sha256sum < "$BATS_TEST_TMPDIR/up" | cut -d' ' -f1)
	run -0 curl -sS -X POST -H 'Expect:' --data-binary "@$BATS_TEST_TMPDIR/up" "$URL/upload"
	[ "$output" = "$sum 104857600" ]
	head -c 10M "$BATS_TEST_TMPDIR/up" > "$BATS_TEST_TMPDIR/up10"
	sum=$(sha256sum < "$BATS_TEST_TMPDIR/up10" | cut -d' ' -f1)
	run -0 curl -sS -X POST -H 'Expect:' -H 'Transfer-Encoding: chunked' -T "$BATS_TEST_TMPDIR/up10" "$URL/upload"
	[ "$output" = "$sum 10485760" ]
}

@test "a backend that refuses an upload early: the client gets the answer, nothing stalls" {
	preview_box
	head -c 100M /dev/zero > "$BATS_TEST_TMPDIR/up"
	for i in 1 2 3; do
		start=$(date +%s%N)
		run -0 timeout 20 curl -sS -X POST -H 'Expect:' --data-binary "@$BATS_TEST_TMPDIR/up" \
			-w ' %{http_code}' "$URL/reject"
		[ "$output" = "rejected
 413" ]
		[ $(( ($(date +%s%N) - start) / 1000000 )) -lt 5000 ]
	done
	# and the relay still serves
	run -0 curl -sS "$URL/slow?ms=1"
	[ "$output" = ok ]
}

@test "WebSockets work through a preview" {
	preview_box
	run -0 CLIENT ws "$URL/ws"
	[ "$output" = "websocket echo ok" ]
}

@test "100 concurrent connections through one preview" {
	preview_box
	run -0 CLIENT concurrent "$URL/slow?ms=300" 100
	[ "$output" = "100 concurrent connections ok" ]
}

@test "a client that half-closes still gets the whole answer" {
	preview_box
	run -0 CLIENT halfclose "$URL/close?n=500000"
	[ "$output" = 500000 ]
}

@test "a server listening on ::1 only is reached too" {
	preview_box
	run -0 pisb svc box start six --preview --json -- 'exec python3 -m http.server $PORT --bind ::1'
	jq -e '.services[0].ready' <<<"$output"
	run -0 curl -sS -o /dev/null -w '%{http_code}' "$(jq -r '.services[0].url' <<<"$output")/"
	[ "$output" = 200 ]
}

@test "previews listen on 127.0.0.1 only" {
	require_cmd ss
	preview_box
	port=${URL##*:}
	cpid=$(pisb inspect box | jq -r .controller.pid)
	run -0 ss -Hltnp
	mine=$(grep "pid=$cpid," <<<"$output" | awk '{print $4}')
	[ -n "$mine" ]
	# every listener of the controller: loopback only
	while read -r addr; do [[ $addr == 127.0.0.1:* ]] || { echo "listens on $addr"; false; }; done <<<"$mine"
	grep -qx "127.0.0.1:$port" <<<"$mine"
	# and not reachable on another address of this host
	other=$(hostname -I 2>/dev/null | awk '{print $1}')
	if [ -n "$other" ]; then
		run ! curl -sS -m 3 -o /dev/null "http://$other:$port/"
	fi
}

@test "a preview of a stopped service answers 502 naming it" {
	preview_box
	run -0 pisb svc box stop srv
	run -0 curl -sS -w '\n%{http_code}' "$URL/"
	[ "${lines[1]}" = 502 ]
	[[ ${lines[0]} == *"service 'srv' is stopped"*"pisb logs box srv"* ]]
	run -0 pisb svc box ensure srv
	run -0 curl -sS "$URL/slow?ms=1"
	[ "$output" = ok ]
}

@test "host ports are kept across stop/start; a port taken meanwhile is reported clearly" {
	f=$(svc_yaml s <<-'Y'
	services:
	  web: {command: exec python3 -m http.server $PORT, preview: true}
	Y
	)
	svc_create box "$f"
	url=$(svc_field box web url)
	port=${url##*:}
	run -0 pisb stop box
	svc_start box
	[ "$(svc_field box web url)" = "$url" ]
	run -0 pisb stop box
	# someone else takes the port while the sandbox is stopped
	python3 -c 'import socket,sys,time; s=socket.socket(); s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(); print("ready", flush=True); time.sleep(300)' "$port" > "$BATS_TEST_TMPDIR/sq" 3>&- &
	SQUATTER=$!
	for i in $(seq 50); do grep -q ready "$BATS_TEST_TMPDIR/sq" && break; sleep 0.1; done
	svc_start box
	run -0 pisb inspect box
	jq -e --arg u "$url/" '.status == "running" and .previews[0].url == $u
		and (.previews[0].error | test("preview port 127.0.0.1:[0-9]+ of service .web. is taken by another process"))' <<<"$output"
	[ "$(svc_field box web ready)" = true ]
	[[ $(svc_field box web error) == *"is taken by another process"* ]]
	grep -q "preview port 127.0.0.1:$port of service 'web' is taken by another process" \
		"$PI_SANDBOX_HOME/instances/box/controller.log"
	# once it is free again, ensure takes it back
	kill "$SQUATTER"; wait "$SQUATTER" 2>/dev/null || true; SQUATTER=
	run -0 pisb svc box ensure
	run -0 pisb inspect box
	jq -e '.previews[0].error == null' <<<"$output"
	run -0 curl -sS -o /dev/null -w '%{http_code}' "$url/"
	[ "$output" = 200 ]
}

@test "preview mappings, preview lists with folders and absolute links show in inspect" {
	f=$(svc_yaml s <<-'Y'
	services:
	  web:
	    command: exec python3 -m http.server $PORT
	    preview: {title: Web app, description: the app}
	    previews:
	      - {url: /docs/, title: Docs}
	      - folder: Elsewhere
	        links:
	          - {url: "https://example.org/x", title: Example, description: an absolute link}
	          - {url: /admin, title: Admin}
	  api:
	    command: exec python3 -m http.server $PORT
	    preview: true
	Y
	)
	svc_create box "$f"
	w=$(svc_field box web url)
	a=$(svc_field box api url)
	run -0 pisb inspect box --json
	jq -e --arg w "$w" --arg a "$a" '[.previews[] | {service,url,title,description,folder}] == [
		{"service":"web","url":($w+"/"),"title":"Web app","description":"the app","folder":null},
		{"service":"web","url":($w+"/docs/"),"title":"Docs","description":null,"folder":null},
		{"service":"web","url":"https://example.org/x","title":"Example","description":"an absolute link","folder":"Elsewhere"},
		{"service":"web","url":($w+"/admin"),"title":"Admin","description":null,"folder":"Elsewhere"},
		{"service":"api","url":($a+"/"),"title":"api","description":null,"folder":null}]' <<<"$output"
	[ "$w" != "$a" ]
}
