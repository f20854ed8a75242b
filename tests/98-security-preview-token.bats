#!/usr/bin/env bats
# preview.auth: token.  A preview listens on host 127.0.0.1, so without a
# token every local user of the machine can reach it (the default, as the
# seed has it); with the token nothing reaches the service without it.
load helpers
load fixtures/svc/lib

setup() { svc_setup; }
teardown() { svc_teardown; }

token_box() {
	svc_create box "$(svc_yaml s <<-'Y'
	version: 1
	preview:
	  auth: token
	Y
	)"
	run -0 pisb svc box start web --preview --json -- 'exec python3 -m http.server $PORT --bind 127.0.0.1 --directory /workspace'
	URL=$(jq -r '.services[0].url' <<<"$output")
	echo hello > "$BATS_TEST_TMPDIR/hello.txt"
	pisb write box hello.txt < "$BATS_TEST_TMPDIR/hello.txt"
	[[ $URL =~ ^(http://127\.0\.0\.1:([0-9]+))/\?pisb_token=([0-9a-f]{32})$ ]]
	BASE=${BASH_REMATCH[1]}
	PORT=${BASH_REMATCH[2]}
	TOKEN=${BASH_REMATCH[3]}
}

@test "with the token off (the default) a preview URL carries no token and is open" {
	svc_create box "$(svc_yaml s <<<'version: 1')"
	run -0 pisb svc box start web --preview --json -- 'exec python3 -m http.server $PORT --bind 127.0.0.1'
	url=$(jq -r '.services[0].url' <<<"$output")
	[[ $url != *pisb_token* ]]
	run -0 curl -sS -o /dev/null -w '%{http_code}' "$url/"
	[ "$output" = 200 ]
}

@test "without the token: 403 before anything reaches the service" {
	token_box
	run -0 curl -sS -w ' %{http_code}' "$BASE/hello.txt"
	[[ $output == *"needs its token"*" 403" ]]
	run -0 curl -sS -o /dev/null -w '%{http_code}' "$BASE/hello.txt?pisb_token=0123456789abcdef0123456789abcdef"
	[ "$output" = 403 ]
	run -0 curl -sS -o /dev/null -w '%{http_code}' -H "Cookie: pisb_token_$PORT=nope" "$BASE/hello.txt"
	[ "$output" = 403 ]
	# a cookie of another port is not this one
	run -0 curl -sS -o /dev/null -w '%{http_code}' -H "Cookie: pisb_token_1=$TOKEN" "$BASE/hello.txt"
	[ "$output" = 403 ]
	# the service logged no request at all
	run -0 pisb logs box web
	[[ $output != *"GET /hello.txt"* ]]
}

@test "the URL's token sets a per-port cookie and redirects; the cookie or X-Pisb-Token admits" {
	token_box
	run -0 curl -sS -D - -o /dev/null "$BASE/hello.txt?a=1&pisb_token=$TOKEN&b=2"
	[[ $output == *"303 See Other"* ]]
	[[ $output == *"Location: /hello.txt?a=1&b=2"* ]]
	[[ $output == *"Set-Cookie: pisb_token_$PORT=$TOKEN; Path=/; HttpOnly; SameSite=Strict"* ]]
	# a browser's way: follow the redirect with the cookie jar
	run -0 curl -sS -L -c "$BATS_TEST_TMPDIR/jar" -b "$BATS_TEST_TMPDIR/jar" "$BASE/hello.txt?pisb_token=$TOKEN"
	[ "$output" = hello ]
	run -0 curl -sS -H "X-Pisb-Token: $TOKEN" "$BASE/hello.txt"
	[ "$output" = hello ]
	run -0 curl -sS -H "Cookie: other=1; pisb_token_$PORT=$TOKEN" "$BASE/hello.txt"
	[ "$output" = hello ]
}

@test "the token survives stop and start; the guest's .sandbox.yaml cannot turn it off" {
	token_box
	svc_guest_yaml box <<-'Y'
	preview:
	  auth: none
	Y
	run -0 pisb svc box ensure
	run -0 curl -sS -o /dev/null -w '%{http_code}' "$BASE/hello.txt"
	[ "$output" = 403 ]
	pisb stop box
	svc_start box
	run -0 pisb svc box start web --preview --json -- 'exec python3 -m http.server $PORT --bind 127.0.0.1 --directory /workspace'
	[ "$(jq -r '.services[0].url' <<<"$output")" = "$URL" ]
	run -0 curl -sS -H "X-Pisb-Token: $TOKEN" "$BASE/hello.txt"
	[ "$output" = hello ]
	# the token file is the owner's only
	[ "$(stat -c %a "$PI_SANDBOX_HOME/instances/box/preview.token")" = 600 ]
}

@test "a slow client that never sends its head is answered 408 and closed, the preview still serves" {
	token_box
	exec 5<>"/dev/tcp/127.0.0.1/$PORT"
	run -0 curl -sS -H "X-Pisb-Token: $TOKEN" "$BASE/hello.txt"
	[ "$output" = hello ]
	run -0 timeout 20 cat <&5
	[[ $output == *"408 Request Timeout"* ]]
	exec 5<&-
}

@test "preview.auth takes none or token" {
	printf 'version: 1\npreview:\n  auth: basic\n' > "$BATS_TEST_TMPDIR/c.yaml"
	run -2 pisb validate -f "$BATS_TEST_TMPDIR/c.yaml"
	[[ $output == *"preview.auth: must be one of: none, token"* ]]
	printf 'version: 1\npreview:\n  token: x\n' > "$BATS_TEST_TMPDIR/c.yaml"
	run -2 pisb validate -f "$BATS_TEST_TMPDIR/c.yaml"
	[[ $output == *"preview.token: unknown key"* ]]
}
