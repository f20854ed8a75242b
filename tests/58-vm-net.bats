#!/usr/bin/env bats
# Previews of a vm sandbox: host 127.0.0.1 listeners held by the VM's
# relay (drivers/vm/vm_net.c), each connection a stream on the guest
# agent's net port (virtio-serial, drivers/vm/vm_mux.c) to 127.0.0.1:PORT
# in the guest, which has no network device.  One VM serves the file.
load helpers

FX="$BATS_TEST_DIRNAME/fixtures/vmnet"

setup_file() {
	export PI_SANDBOX_HOME="$BATS_FILE_TMPDIR/state"
	[ -z "$(vm_prereqs)" ] || return 0
	cat > "$BATS_FILE_TMPDIR/vm.yaml" <<-'EOF2'
	version: 1
	driver: vm
	resources: { cpus: 1, memoryGiB: 1 }
	diskGiB: 2
	EOF2
	pisb create net1 -f "$BATS_FILE_TMPDIR/vm.yaml" > "$BATS_FILE_TMPDIR/create.out" 2> "$BATS_FILE_TMPDIR/create.err" ||
		echo "create failed: $?" >> "$BATS_FILE_TMPDIR/create.err"
	pisb write net1 /root/wait-port.py < "$BATS_TEST_DIRNAME/fixtures/vmnet/wait-port.py" >/dev/null 2>&1 ||
		echo "create failed: cannot write wait-port.py" >> "$BATS_FILE_TMPDIR/create.err"
}

teardown_file() {
	pisb destroy net1 --confirm net1 >/dev/null 2>&1 || true
	pisb destroy tok1 --confirm tok1 >/dev/null 2>&1 || true
}

setup() {
	export PI_SANDBOX_HOME="$BATS_FILE_TMPDIR/state"
	vm_suite_setup "$BATS_FILE_TMPDIR/create.err"
}

# guest_server PORT CMD...: run CMD in the guest in a session of its own
# (it outlives the exec, and holds none of the agent's four command ports
# as an exec handle would); the exec waits until something listens on
# 127.0.0.1:PORT there, so that CMD has left the exec's process group
# (which the agent kills when the exec ends) before it ends
guest_server() {
	local port=$1
	shift
	pisb exec net1 --sh "setsid -f $* > /dev/null 2>&1 < /dev/null; python3 /root/wait-port.py $port"
}

listening() {
	pisb exec net1 -- python3 /root/wait-port.py "$1"
}

# preview PORT: the preview's host port, into HP
preview() {
	run -0 pisb svc net1 preview "$1" --json
	HP=$(jq -r '.services[0].hostPort' <<<"$output")
	[[ $HP =~ ^[0-9]+$ ]]
}

put() { pisb write net1 "$2" < "$FX/$1"; }

relay_pid() { vm_relay_pid net1; }

@test "HTTP through a preview to a server the guest started; inspect shows it" {
	# the server is an exec handle's command
	run -0 pisb exec net1 --timeout-ms 200 --json -- python3 -m http.server 8001 --bind 127.0.0.1 --directory /workspace
	handle=$(jq -r .pid <<<"$output")
	listening 8001
	echo "hello from the guest" | pisb write net1 hello.txt
	run -0 pisb svc net1 preview 8001 --title Web --json
	jq -e '.ok == true and .services[0].name == "port-8001" and .services[0].port == 8001' <<<"$output"
	url=$(jq -r '.previews[] | select(.service == "port-8001") | .url' <<<"$output")
	[[ $url =~ ^http://127\.0\.0\.1:[0-9]+/$ ]]
	run -0 curl -sS -m 60 "${url}hello.txt"
	[ "$output" = "hello from the guest" ]
	run -0 curl -sS -m 60 -o /dev/null -w '%{http_code}' "${url}nope"
	[ "$output" = 404 ]
	run -0 pisb inspect net1
	jq -e --arg u "$url" '.previews[] | select(.service == "port-8001") | .url == $u and .title == "Web"' <<<"$output"
	# the human form prints the URL
	run -0 pisb svc net1 preview 8001
	[ "$output" = "$url" ]
	# on host loopback only
	hp=${url#http://127.0.0.1:}; hp=${hp%/}
	run -0 ss -Hltn "sport = :$hp"
	[[ $output == *"127.0.0.1:$hp"* ]]
	[[ $output != *"0.0.0.0:$hp"* ]]
	# TERM ends it: its status, 128 + 15
	run -143 pisb exec-kill net1 "$handle"
}

@test "a preview of a guest port where nothing listens answers 502" {
	preview 8999
	run -0 curl -sS -m 60 -w ' %{http_code}' "http://127.0.0.1:$HP/"
	[[ $output == *"nothing accepts connections"*" 502" ]]
}

@test "100 MB through a preview, byte-exact both ways" {
	pisb exec net1 --sh 'head -c 100000000 /dev/urandom > /workspace/big.bin'
	want=$(pisb exec net1 -- sha256sum /workspace/big.bin | cut -d' ' -f1)
	guest_server 8010 python3 -m http.server 8010 --bind 127.0.0.1 --directory /workspace
	preview 8010
	got=$(curl -sS -m 600 "http://127.0.0.1:$HP/big.bin" | sha256sum | cut -d' ' -f1)
	[ "$got" = "$want" ]
	# and up: the guest hashes what it gets
	put sink.py /workspace/sink.py
	head -c 100000000 /dev/urandom > "$BATS_TEST_TMPDIR/up.bin"
	want=$(sha256sum "$BATS_TEST_TMPDIR/up.bin" | cut -d' ' -f1)
	guest_server 8011 python3 /workspace/sink.py 8011
	preview 8011
	run -0 python3 "$FX/client.py" upload "$HP" "$BATS_TEST_TMPDIR/up.bin"
	[ "$output" = "$want" ]
	pisb exec net1 -- rm -f /workspace/big.bin
}

# the local driver's preview backend and client (tests/41-svc-previews.bats)
svc_server() {
	pisb write net1 /workspace/server.py < "$BATS_TEST_DIRNAME/fixtures/svc/server.py"
	guest_server 8030 python3 /workspace/server.py 8030
	preview 8030
	URL=http://127.0.0.1:$HP
}
CLIENT() { python3 "$BATS_TEST_DIRNAME/fixtures/svc/client.py" "$@"; }

@test "100 concurrent connections through one preview" {
	svc_server
	run -0 CLIENT concurrent "$URL/slow?ms=300" 100
	[ "$output" = "100 concurrent connections ok" ]
}

@test "WebSockets work through a vm preview" {
	svc_server
	run -0 CLIENT ws "$URL/ws"
	[ "$output" = "websocket echo ok" ]
}

@test "a client that half-closes still gets the whole answer from the guest" {
	svc_server
	run -0 CLIENT halfclose "$URL/close?n=500000"
	[ "$output" = 500000 ]
}

@test "a long-lived bidirectional stream (line echo) stays in step" {
	put echo.py /workspace/echo.py
	guest_server 8020 python3 /workspace/echo.py 8020
	preview 8020
	# two at once, interleaved, 300 round trips each
	python3 "$FX/client.py" echo "$HP" 300 > "$BATS_TEST_TMPDIR/a" &
	a=$!
	run -0 python3 "$FX/client.py" echo "$HP" 300
	[ "$output" = "ok 300" ]
	wait "$a"
	[ "$(cat "$BATS_TEST_TMPDIR/a")" = "ok 300" ]
}

@test "a guest that writes garbage on the net port is dropped; the relay stays, bounded, and serves again" {
	guest_server 8000 python3 -m http.server 8000 --bind 127.0.0.1 --directory /workspace
	echo hi | pisb write net1 hello.txt
	preview 8000
	relay=$(relay_pid)
	[ -n "$relay" ]
	rss0=$(awk '/^VmRSS/ {print $2}' "/proc/$relay/status")
	put attack.py /root/attack.py
	put vmport.py /root/vmport.py
	run -0 pisb exec net1 -- python3 /root/attack.py
	[[ $output == sent* ]]
	# the same process, its memory grown far less than what the guest
	# sent (over 20 MiB)
	kill -0 "$relay"
	[ "$(relay_pid)" = "$relay" ]
	rss=$(awk '/^VmRSS/ {print $2}' "/proc/$relay/status")
	echo "relay RSS $rss0 KiB before, $rss KiB after"
	[ $((rss - rss0)) -lt 4096 ]
	# it said what it dropped
	for _ in $(seq 1 100); do
		grep -q "dropped from the guest: [1-9][0-9]* bytes" "$PI_SANDBOX_HOME/instances/net1/net.log" && break
		sleep 0.2
	done
	grep "dropped from the guest: [1-9][0-9]* bytes" "$PI_SANDBOX_HOME/instances/net1/net.log"
	# the agent's new server takes the port back; the preview works again
	for _ in $(seq 1 150); do
		[ "$(curl -sS -m 10 "http://127.0.0.1:$HP/hello.txt" 2>/dev/null)" = hi ] && break
		sleep 0.2
	done
	run -0 curl -sS -m 30 "http://127.0.0.1:$HP/hello.txt"
	[ "$output" = hi ]
}

@test "the preview is gone after stop and back, on the same host port, after start" {
	preview 8000
	hp=$HP
	run -0 pisb stop net1
	run -7 curl -sS -m 10 "http://127.0.0.1:$hp/"
	run -0 pisb inspect net1
	jq -e '.previews == []' <<<"$output"
	run -0 pisb start net1
	run -0 pisb inspect net1
	jq -e --argjson hp "$hp" '.previews[] | select(.service == "port-8000") | .hostPort == $hp' <<<"$output"
	guest_server 8000 python3 -m http.server 8000 --bind 127.0.0.1 --directory /workspace
	echo back | pisb write net1 hello.txt
	run -0 curl -sS -m 60 "http://127.0.0.1:$hp/hello.txt"
	[ "$output" = back ]
}

@test "svc preview: a bad port is a usage error; svc status lists the previews (services: tests/54)" {
	run -2 --separate-stderr pisb svc net1 preview 70000
	[[ $stderr == *"PORT must be 1-65535"* ]]
	run -0 pisb svc net1 status --json
	jq -e '.ok and ([.services[] | .kind] | all(. == "link"))' <<<"$output"
}

@test "preview.auth: token holds on a vm sandbox: 403 before anything reaches the guest" {
	printf 'version: 1\ndriver: vm\nresources: { cpus: 1, memoryGiB: 1 }\ndiskGiB: 2\npreview:\n  auth: token\n' > "$BATS_TEST_TMPDIR/tok.yaml"
	run -0 pisb create tok1 -f "$BATS_TEST_TMPDIR/tok.yaml"
	pisb write tok1 /root/wait-port.py < "$FX/wait-port.py"
	pisb exec tok1 --sh 'echo secret-page > /workspace/p.txt; setsid -f python3 -m http.server 8000 --bind 127.0.0.1 --directory /workspace > /workspace/http.log 2>&1 < /dev/null; python3 /root/wait-port.py 8000'
	run -0 pisb svc tok1 preview 8000 --json
	url=$(jq -r '.services[0].url' <<<"$output")
	[[ $url =~ ^http://127\.0\.0\.1:([0-9]+)/\?pisb_token=([0-9a-f]{32})$ ]]
	hp=${BASH_REMATCH[1]}
	token=${BASH_REMATCH[2]}
	[ "$token" = "$(cat "$PI_SANDBOX_HOME/instances/tok1/preview.token")" ]
	run -0 curl -sS -m 60 -w ' %{http_code}' "http://127.0.0.1:$hp/p.txt"
	[[ $output == *"needs its token"*" 403" ]]
	# nothing reached the guest's server
	run -0 pisb exec tok1 -- cat /workspace/http.log
	[[ $output != *"GET /p.txt"* ]]
	run -0 curl -sS -m 60 -H "X-Pisb-Token: $token" "http://127.0.0.1:$hp/p.txt"
	[ "$output" = secret-page ]
	run -0 pisb exec tok1 -- cat /workspace/http.log
	[[ $output == *"GET /p.txt"* ]]
	run -0 pisb destroy tok1 --confirm tok1
}
