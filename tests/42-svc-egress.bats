#!/usr/bin/env bats
# Egress: a sandbox's network namespace has only loopback; allowedHosts are
# reached through the controller's proxy at 127.0.0.1:3128 inside it.  A
# server on the host's loopback plays the outside world: only the proxy
# (which connects from the host's namespace) can reach it.
load helpers
load fixtures/svc/lib

setup() {
	svc_setup
	mkdir -p "$BATS_TEST_TMPDIR/www"
	echo "hello from outside" > "$BATS_TEST_TMPDIR/www/hello.txt"
	HP=$(host_free_port)
	python3 -m http.server "$HP" --bind 127.0.0.1 --directory "$BATS_TEST_TMPDIR/www" \
		>"$BATS_TEST_TMPDIR/outside.log" 2>&1 3>&- &
	OUTSIDE=$!
	for i in $(seq 50); do curl -s -o /dev/null "http://127.0.0.1:$HP/" && break; sleep 0.1; done
}

teardown() {
	kill "$OUTSIDE" 2>/dev/null || true
	[ -z "${TLS:-}" ] || kill "$TLS" 2>/dev/null || true
	svc_teardown
}

# Run a shell line in the sandbox without NO_PROXY (which lists localhost
# and 127.0.0.1, the names the tests use for the outside world).
in_box() {
	pisb exec box -- sh -c "unset NO_PROXY no_proxy; $1"
}

allow_box() {
	svc_create box "$(svc_yaml s <<-Y
	network:
	  allowedHosts: [$1]
	Y
	)"
}

@test "outbound is denied by default: no proxy and no route out" {
	svc_create box "$(svc_yaml s <<<'version: 1')"
	run -0 pisb exec box -- env
	[[ $output != *PROXY* && $output != *proxy* ]]
	run -7 pisb exec box -- curl -sS -m 5 --noproxy '*' "http://127.0.0.1:$HP/hello.txt"
	run -7 pisb exec box -- curl -sS -m 5 --noproxy '*' "http://127.0.0.1:3128/"
	run -0 pisb exec box -- sh -c 'cat /proc/net/route | wc -l'
	[ "$output" = 1 ]
}

@test "an allowed host is reached through the proxy: absolute-URI HTTP" {
	allow_box "\"localhost:$HP\", 127.0.0.1"
	run -0 pisb exec box -- sh -c 'echo "$HTTP_PROXY $HTTPS_PROXY"'
	[ "$output" = "http://127.0.0.1:3128 http://127.0.0.1:3128" ]
	run -0 in_box "curl -sS http://localhost:$HP/hello.txt"
	[ "$output" = "hello from outside" ]
	# a stdlib client honours the same variables
	run -0 in_box "python3 -c 'import urllib.request as u; print(u.urlopen(\"http://localhost:$HP/hello.txt\").read().decode().strip())'"
	[ "$output" = "hello from outside" ]
	grep -q "egress: forward localhost:$HP" "$PI_SANDBOX_HOME/instances/box/controller.log"
	# the request reached the origin in origin form
	grep -q '"GET /hello.txt HTTP/1.1" 200' "$BATS_TEST_TMPDIR/outside.log"
}

@test "an allowed host is reached through CONNECT, HTTPS without interception" {
	require_cmd openssl
	TP=$(host_free_port)
	allow_box "\"localhost:$HP\", \"localhost:$TP\", 127.0.0.1"
	# CONNECT tunnelling plain HTTP
	run -0 in_box "curl -sS -p http://localhost:$HP/hello.txt"
	[ "$output" = "hello from outside" ]
	grep -q "egress: CONNECT localhost:$HP" "$PI_SANDBOX_HOME/instances/box/controller.log"
	# HTTPS: the guest sees the origin's own certificate
	openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=localhost -addext subjectAltName=DNS:localhost \
		-keyout "$BATS_TEST_TMPDIR/key.pem" -out "$BATS_TEST_TMPDIR/cert.pem" 2>/dev/null
	python3 - "$TP" "$BATS_TEST_TMPDIR" >/dev/null 2>&1 3>&- <<-'P' &
	import http.server, ssl, sys, os
	os.chdir(sys.argv[2] + "/www")
	srv = http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), http.server.SimpleHTTPRequestHandler)
	ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
	ctx.load_cert_chain(sys.argv[2] + "/cert.pem", sys.argv[2] + "/key.pem")
	srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
	srv.serve_forever()
	P
	TLS=$!
	for i in $(seq 50); do curl -sk -o /dev/null "https://127.0.0.1:$TP/" && break; sleep 0.1; done
	pisb exec box -- sh -c 'cat > /workspace/cert.pem' < "$BATS_TEST_TMPDIR/cert.pem"
	run -0 in_box "curl -sS --cacert /workspace/cert.pem https://localhost:$TP/hello.txt"
	[ "$output" = "hello from outside" ]
}

@test "a host not in allowedHosts gets 403 naming the host and network.allowedHosts" {
	allow_box localhost
	run -0 in_box "curl -sS -w ' %{http_code}' http://127.0.0.1:$HP/hello.txt"
	[[ $output == *"egress to '127.0.0.1' is denied"*"network.allowedHosts"*" 403" ]]
	run -0 in_box "curl -sS -w ' %{http_code}' http://evil.example/"
	[[ $output == *"'evil.example'"*"network.allowedHosts"*" 403" ]]
	# CONNECT (HTTPS): the answer is 403 and its header carries the reason
	run -56 in_box "curl -sS -v https://evil.example/"
	[[ $output == *"HTTP/1.1 403 Forbidden"* ]]
	[[ $output == *"X-Pisb-Error: pisb: egress to 'evil.example' is denied"*"network.allowedHosts"* ]]
	grep -q "egress: denied CONNECT evil.example:443 (not in network.allowedHosts)" \
		"$PI_SANDBOX_HOME/instances/box/controller.log"
	# the origin saw none of it
	run ! grep -q 'GET /hello.txt' "$BATS_TEST_TMPDIR/outside.log"
}

@test "direct connections still fail when hosts are allowed" {
	allow_box "\"localhost:$HP\", 127.0.0.1"
	run -7 in_box "curl -sS -m 5 --noproxy '*' http://localhost:$HP/hello.txt"
	run -7 in_box "curl -sS -m 5 --noproxy '*' http://127.0.0.1:$HP/hello.txt"
}

@test "*.domain allows names below the domain, not the domain itself" {
	allow_box '"*.pisb.invalid"'
	# allowed, so the proxy tries to resolve it (and cannot)
	run -0 in_box "curl -sS -w ' %{http_code}' http://www.pisb.invalid/"
	[[ $output == *"cannot resolve 'www.pisb.invalid'"*" 502" ]]
	run -0 in_box "curl -sS -w ' %{http_code}' http://pisb.invalid/"
	[[ $output == *"egress to 'pisb.invalid' is denied"*" 403" ]]
}

@test "editing the guest's .sandbox.yaml does not widen the allowlist" {
	allow_box localhost
	svc_guest_yaml box <<-'Y'
	network:
	  allowedHosts: [localhost, 127.0.0.1, "*.example"]
	Y
	run -0 pisb svc box ensure
	run -0 in_box "curl -sS -o /dev/null -w '%{http_code}' http://127.0.0.1:$HP/hello.txt"
	[ "$output" = 403 ]
}

@test "an allowed name that resolves to loopback is refused unless the address is listed" {
	allow_box "\"localhost:$HP\""
	run -0 in_box "curl -sS -w ' %{http_code}' http://localhost:$HP/hello.txt"
	[[ $output == *"egress to 'localhost' is denied: it resolves to 127.0.0.1, a loopback address"*"names that address literally"*" 403" ]]
	# CONNECT is checked the same way
	run -56 in_box "curl -sS -v -p http://localhost:$HP/hello.txt"
	[[ $output == *"HTTP/1.1 403 Forbidden"* ]]
	grep -q "egress: denied localhost:$HP (resolves to 127.0.0.1, a loopback address)" \
		"$PI_SANDBOX_HOME/instances/box/controller.log"
	# the host's loopback service saw none of it
	run ! grep -q 'GET /hello.txt' "$BATS_TEST_TMPDIR/outside.log"
}

@test "pisb's own preview relay on host loopback is not reachable through an allowed name" {
	svc_create box "$(svc_yaml s <<<'version: 1')"
	run -0 pisb svc box start web --preview --json -- 'exec python3 -m http.server $PORT --bind 127.0.0.1'
	url=$(jq -r '.services[0].url' <<<"$output")
	[[ $url =~ ^http://127\.0\.0\.1:([0-9]+) ]]
	pport=${BASH_REMATCH[1]}
	curl -sSf -o /dev/null "$url"          # the preview works from the host
	svc_create box2 "$(svc_yaml s2 <<-Y
	network:
	  allowedHosts: ["localhost:$pport"]
	Y
	)"
	run -0 pisb exec box2 -- sh -c "unset NO_PROXY no_proxy; curl -sS -w ' %{http_code}' http://localhost:$pport/"
	[[ $output == *"resolves to 127.0.0.1, a loopback address"*" 403" ]]
	pisb destroy box2 --confirm box2
}

@test "an entry without a port allows 80 and 443 only; host:port allows that port" {
	allow_box "localhost, 127.0.0.1"
	run -0 in_box "curl -sS -w ' %{http_code}' http://localhost:$HP/hello.txt"
	[[ $output == *"egress to 'localhost' port $HP is denied"*"ports 80 and 443 only"*"'localhost:$HP'"*" 403" ]]
	run -0 in_box "curl -sS -w ' %{http_code}' http://127.0.0.1:$HP/hello.txt"
	[[ $output == *"port $HP is denied"*" 403" ]]
	run ! grep -q 'GET /hello.txt' "$BATS_TEST_TMPDIR/outside.log"
}

@test "an address named literally with its port is reached" {
	allow_box "\"127.0.0.1:$HP\""
	run -0 in_box "curl -sS http://127.0.0.1:$HP/hello.txt"
	[ "$output" = "hello from outside" ]
	# the same port through a name is not: the name is not listed
	run -0 in_box "curl -sS -w ' %{http_code}' http://localhost:$HP/hello.txt"
	[[ $output == *" 403" ]]
}

@test "allowedHosts entries: host:port and [IPv6]:port validate, malformed ones name the entry" {
	f=$BATS_TEST_TMPDIR/c.yaml
	printf 'version: 1\nnetwork:\n  allowedHosts: [example.com, "api.example.com:8443", "[::1]:8080", "[2001:db8::1]", 10.0.0.1]\n' > "$f"
	run -0 pisb validate -f "$f" --json
	[ "$(jq -c .network.allowedHosts <<<"$output")" = '["example.com","api.example.com:8443","[::1]:8080","[2001:db8::1]","10.0.0.1"]' ]
	for bad in '"a.example:0"' '"a.example:70000"' '"a.example:"' '"::1"' '"[::1"' '"[nothost]:80"' '"[::1]x"' '"*:80"'; do
		printf 'version: 1\nnetwork:\n  allowedHosts: [%s]\n' "$bad" > "$f"
		run -2 pisb validate -f "$f"
		[[ $output == *"network.allowedHosts[0]"* ]]
	done
}
