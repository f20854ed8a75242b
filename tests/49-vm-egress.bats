#!/usr/bin/env bats
# Egress of a vm sandbox (network.allowedHosts, issue #14): the guest has no
# network device; the agent listens on the guest's 127.0.0.1:3128 (the
# HTTP(S)_PROXY of every command) and turns each connection into a stream
# it opens on the net port (even ids, drivers/vm/vm_mux.c); the VM's relay
# on the host (drivers/vm/vm_net.c) hands each to the local driver's egress
# proxy (drivers/local/proxy.c), which checks the allowlist on the host.
# A server on the host's loopback plays the outside world, as in
# tests/42-svc-egress.bats.  One VM serves the file.
load helpers
load fixtures/svc/lib

FX="$BATS_TEST_DIRNAME/fixtures/vmnet"

setup_file() {
	export PI_SANDBOX_HOME="$BATS_FILE_TMPDIR/state"
	[ -z "$(vm_prereqs)" ] || return 0
	mkdir -p "$BATS_FILE_TMPDIR/www" "$BATS_FILE_TMPDIR/www2"
	echo "hello from outside" > "$BATS_FILE_TMPDIR/www/hello.txt"
	echo "not for the guest" > "$BATS_FILE_TMPDIR/www2/hello.txt"
	HP=$(host_free_port)
	HP2=$(host_free_port)
	echo "$HP $HP2" > "$BATS_FILE_TMPDIR/ports"
	python3 -m http.server "$HP" --bind 127.0.0.1 --directory "$BATS_FILE_TMPDIR/www" \
		>"$BATS_FILE_TMPDIR/outside.log" 2>&1 3>&- &
	echo $! > "$BATS_FILE_TMPDIR/outside.pid"
	python3 -m http.server "$HP2" --bind 127.0.0.1 --directory "$BATS_FILE_TMPDIR/www2" \
		>"$BATS_FILE_TMPDIR/outside2.log" 2>&1 3>&- &
	echo $! > "$BATS_FILE_TMPDIR/outside2.pid"
	for _ in $(seq 50); do curl -s -o /dev/null "http://127.0.0.1:$HP/" && break; sleep 0.1; done
	cat > "$BATS_FILE_TMPDIR/vm.yaml" <<-EOF2
	version: 1
	driver: vm
	resources: { cpus: 1, memoryGiB: 1 }
	diskGiB: 2
	network:
	  allowedHosts: ["localhost:$HP", "127.0.0.1:$HP"]
	EOF2
	pisb create egr1 -f "$BATS_FILE_TMPDIR/vm.yaml" > "$BATS_FILE_TMPDIR/create.out" 2> "$BATS_FILE_TMPDIR/create.err" ||
		echo "create failed: $?" >> "$BATS_FILE_TMPDIR/create.err"
}

teardown_file() {
	pisb destroy egr1 --confirm egr1 >/dev/null 2>&1 || true
	pisb destroy egr0 --confirm egr0 >/dev/null 2>&1 || true
	pisb destroy egt --confirm egt >/dev/null 2>&1 || true
	pisb destroy egtpl --template --confirm egtpl >/dev/null 2>&1 || true
	kill "$(cat "$BATS_FILE_TMPDIR/outside.pid")" "$(cat "$BATS_FILE_TMPDIR/outside2.pid")" 2>/dev/null || true
}

setup() {
	export PI_SANDBOX_HOME="$BATS_FILE_TMPDIR/state"
	vm_suite_setup "$BATS_FILE_TMPDIR/create.err"
	read -r HP HP2 < "$BATS_FILE_TMPDIR/ports"
	LOG="$PI_SANDBOX_HOME/instances/egr1/net.log"
}

# A shell line in the guest without NO_PROXY (it lists localhost and
# 127.0.0.1, the names the tests use for the outside world).
in_vm() {
	pisb exec egr1 -- sh -c "unset NO_PROXY no_proxy; $1"
}

# wait_log PATTERN: until net.log has a line matching PATTERN
wait_log() {
	for _ in $(seq 1 100); do
		grep -q "$1" "$LOG" && return 0
		sleep 0.1
	done
	grep "$1" "$LOG"
}

@test "an allowed host is reached through the proxy: absolute-URI HTTP, curl and wget" {
	run -0 pisb exec egr1 -- sh -c 'echo "$HTTP_PROXY $HTTPS_PROXY $http_proxy $https_proxy $NO_PROXY"'
	[ "$output" = "http://127.0.0.1:3128 http://127.0.0.1:3128 http://127.0.0.1:3128 http://127.0.0.1:3128 localhost,127.0.0.1,::1" ]
	run -0 in_vm "curl -sS -m 60 http://localhost:$HP/hello.txt"
	[ "$output" = "hello from outside" ]
	wait_log "egress: forward localhost:$HP"
	# the request reached the origin in origin form
	grep -q '"GET /hello.txt HTTP/1.1" 200' "$BATS_FILE_TMPDIR/outside.log"
	require_cmd wget
	run -0 in_vm "wget -q -T 60 -O - http://127.0.0.1:$HP/hello.txt"
	[ "$output" = "hello from outside" ]
	wait_log "egress: forward 127.0.0.1:$HP"
}

@test "an allowed host is reached through CONNECT (a tunnel: the bytes are the origin's)" {
	run -0 in_vm "curl -sS -m 60 -p http://localhost:$HP/hello.txt"
	[ "$output" = "hello from outside" ]
	wait_log "egress: CONNECT localhost:$HP"
	run -0 in_vm "curl -sS -m 60 -p -o /dev/null -w '%{http_code} %{http_connect}' http://127.0.0.1:$HP/hello.txt"
	[ "$output" = "200 200" ]
}

@test "a host not in allowedHosts gets 403 naming the host and network.allowedHosts" {
	run -0 in_vm "curl -sS -m 60 -w ' %{http_code}' http://evil.example/"
	[[ $output == *"egress to 'evil.example' is denied"*"network.allowedHosts of sandbox 'egr1'"*" 403" ]]
	# CONNECT (HTTPS): the answer is 403 and its header carries the reason
	run -56 in_vm "curl -sS -m 60 -v https://evil.example/"
	[[ $output == *"HTTP/1.1 403 Forbidden"* ]]
	[[ $output == *"X-Pisb-Error: pisb: egress to 'evil.example' is denied"*"network.allowedHosts"* ]]
	wait_log "egress: denied CONNECT evil.example:443 (not in network.allowedHosts)"
}

@test "an IP literal or a port that is not listed is refused; the origin sees nothing" {
	run -0 in_vm "curl -sS -m 60 -w ' %{http_code}' http://127.0.0.2:$HP/hello.txt"
	[[ $output == *"egress to '127.0.0.2' is denied"*" 403" ]]
	run -0 in_vm "curl -sS -m 60 -w ' %{http_code}' http://127.0.0.1:$HP2/hello.txt"
	[[ $output == *"egress to '127.0.0.1' port $HP2 is denied"*" 403" ]] ||
		[[ $output == *"egress to '127.0.0.1' is denied"*" 403" ]]
	run -0 in_vm "curl -sS -m 60 -w ' %{http_code}' http://localhost:$HP2/hello.txt"
	[[ $output == *"'localhost'"*" 403" ]]
	run -56 in_vm "curl -sS -m 60 -p http://127.0.0.1:$HP2/hello.txt"
	run ! grep -q 'GET' "$BATS_FILE_TMPDIR/outside2.log"
	# and nothing goes around the proxy: the guest has loopback only
	run -7 in_vm "curl -sS -m 10 --noproxy '*' http://127.0.0.1:$HP/hello.txt"
	run -0 pisb exec egr1 -- sh -c 'cat /proc/net/route | wc -l'
	[ "$output" = 1 ]
}

@test "a hostile guest on its own streams: only the proxy, at most 64 at once, the relay stays up" {
	put() { pisb write egr1 "$2" < "$FX/$1"; }
	relay=$(vm_relay_pid egr1)
	[ -n "$relay" ]
	rss0=$(awk '/^VmRSS/ {print $2}' "/proc/$relay/status")
	put attack.py /root/attack.py
	put vmport.py /root/vmport.py
	# 100 opens to the proxy's port at once, an open of an odd (host) id,
	# one to port 22, id 2 again, a request for a host not on the list,
	# 384 KiB on a stream without waiting for credit
	run -0 pisb exec egr1 -- python3 /root/attack.py egress 100 37
	echo "$output"
	res=$output
	# the first 64 were taken; the other 36 (ids 130..200) refused, and the
	# open of port 22 (id 202); the odd ids and the reused id got no answer
	[ "$(jq -c .refused <<<"$res")" = "$(seq 130 2 202 | jq -sc .)" ]
	# the proxy answered the request on stream 2: the host decides
	[[ $(jq -r .answer2 <<<"$res") == "HTTP/1.1 403 Forbidden"*"egress to 'evil.example' is denied"* ]]
	[ "$(jq -c '.datafrom - [2, 4]' <<<"$res")" = "[]" ]
	# the same process, its memory bounded
	kill -0 "$relay"
	[ "$(vm_relay_pid egr1)" = "$relay" ]
	rss=$(awk '/^VmRSS/ {print $2}' "/proc/$relay/status")
	echo "relay RSS $rss0 KiB before, $rss KiB after"
	[ $((rss - rss0)) -lt 8192 ]
	wait_log "dropped from the guest: [1-9][0-9]* bytes.*[1-9][0-9]* streams it opened refused"
	# the agent's new server takes the port back; egress works again
	for _ in $(seq 1 150); do
		[ "$(in_vm "curl -sS -m 10 http://localhost:$HP/hello.txt" 2>/dev/null)" = "hello from outside" ] && break
		sleep 0.2
	done
	run -0 in_vm "curl -sS -m 60 http://localhost:$HP/hello.txt"
	[ "$output" = "hello from outside" ]
}

@test "many connections at once through the proxy all complete" {
	run -0 in_vm "for i in \$(seq 1 66); do curl -sS -m 120 -o /tmp/o.\$i http://localhost:$HP/hello.txt & done; wait; cat /tmp/o.* | sort | uniq -c"
	[[ $output =~ ^\ *66\ hello\ from\ outside$ ]]
}

@test "without allowedHosts: no proxy in the environment, nothing on 3128, the relay refuses every stream the guest opens" {
	cat > "$BATS_TEST_TMPDIR/vm0.yaml" <<-'EOF2'
	version: 1
	driver: vm
	resources: { cpus: 1, memoryGiB: 1 }
	diskGiB: 2
	EOF2
	run -0 pisb create egr0 -f "$BATS_TEST_TMPDIR/vm0.yaml"
	run -0 pisb exec egr0 -- env
	[[ $output != *PROXY* ]]
	[[ $output != *proxy* ]]
	run -7 pisb exec egr0 -- curl -sS -m 10 --noproxy '*' "http://127.0.0.1:$HP/hello.txt"
	run -7 pisb exec egr0 -- curl -sS -m 10 --noproxy '*' "http://127.0.0.1:3128/"
	pisb write egr0 /root/attack.py < "$FX/attack.py"
	pisb write egr0 /root/vmport.py < "$FX/vmport.py"
	run -0 pisb exec egr0 -- python3 /root/attack.py egress 3 4 noproxy
	echo "$output"
	# ids 2, 4, 6 to the proxy's port and 8 to port 22: all refused
	[ "$(jq -c .refused <<<"$output")" = "[2,4,6,8]" ]
	[ "$(jq -c .datafrom <<<"$output")" = "[]" ]
	run -0 pisb destroy egr0 --confirm egr0
}

@test "a template's setup reaches the proxy while it is prepared; a sandbox made from it has its own" {
	# the file's config (allowedHosts) with a setup that fetches through the proxy
	{ cat "$BATS_FILE_TMPDIR/vm.yaml"
	  printf 'setup:\n  - env -u NO_PROXY -u no_proxy curl -sS -m 60 -o /root/fetched.txt http://localhost:%s/hello.txt\n' "$HP"
	} > "$BATS_TEST_TMPDIR/tpl.yaml"
	run -0 --separate-stderr pisb prepare egtpl -f "$BATS_TEST_TMPDIR/tpl.yaml"
	# the configuration is the one given (a template keeps only its disk)
	run -0 --separate-stderr pisb create egt --template egtpl -f "$BATS_TEST_TMPDIR/tpl.yaml"
	run -0 pisb exec egt -- cat /root/fetched.txt
	[ "$output" = "hello from outside" ]
	run -0 pisb exec egt -- sh -c 'echo "$HTTP_PROXY"'
	[ "$output" = "http://127.0.0.1:3128" ]
	run -0 pisb exec egt -- sh -c "unset NO_PROXY no_proxy; curl -sS -m 60 http://127.0.0.1:$HP/hello.txt"
	[ "$output" = "hello from outside" ]
	run -0 pisb destroy egt --confirm egt
	run -0 pisb destroy egtpl --template --confirm egtpl
}

@test "after stop and start the proxy is back" {
	run -0 pisb stop egr1
	run -0 pisb start egr1
	run -0 in_vm "curl -sS -m 60 http://localhost:$HP/hello.txt"
	[ "$output" = "hello from outside" ]
	run -0 in_vm "curl -sS -m 60 -w ' %{http_code}' http://evil.example/"
	[[ $output == *"'evil.example'"*" 403" ]]
}
