#!/usr/bin/env bash
# examples/demo.sh - the main job end to end on the local driver (make demo):
# create a sandbox from examples/sandbox.yaml, run commands in it, show that
# files persist across stop/start, that the network is closed and the host
# invisible, open its preview, and clean up.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/pisb-demo.XXXXXX")
export PI_SANDBOX_HOME="$work/state"
name=demo

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
run() { printf '$ %s\n' "$*"; "$@"; }
cleanup() {
	pisb destroy "$name" --confirm "$name" -q >/dev/null 2>&1 || true
	rm -rf "$work"
}
trap cleanup EXIT

step "1. check the config"
run pisb validate -f "$here/sandbox.yaml" | head -c 300; echo ...

step "2. create the sandbox (setup runs once, services start)"
run pisb create "$name" -f "$here/sandbox.yaml"
run pisb list

step "3. run commands inside"
run pisb exec "$name" -- cat /workspace/index.html
run pisb exec "$name" --sh 'id; hostname; echo "GREETING=$GREETING"'
run pisb exec "$name" --sh 'echo "written before the stop" > /workspace/note.txt'

step "4. files persist across stop/start; processes do not"
run pisb exec "$name" --sh 'sleep 1000 >/dev/null 2>&1 & echo started a background sleep'
run pisb stop "$name"
run pisb start "$name"
run pisb exec "$name" -- cat /workspace/note.txt
run pisb exec "$name" --sh 'pgrep -x sleep || echo "no sleep: processes do not survive a stop"'

step "5. the network is closed; the host is invisible"
secret="$work/host-secret"
echo "host secret" > "$secret"
run pisb exec "$name" --sh "cat '$secret' 2>&1 || true"
run pisb exec "$name" -- python3 -c '
import socket
for host, port in (("127.0.0.1", 22), ("192.0.2.1", 80)):
    s = socket.socket(); s.settimeout(2)
    try:
        s.connect((host, port)); print(host, "reachable?!")
    except OSError as e:
        print(host, "->", e.strerror)'

previews=$(pisb inspect "$name" | jq -r '.previews[]?.url // empty')
if [ -n "$previews" ]; then
	step "6. the web service, through its preview URL on 127.0.0.1"
	url=$(head -n1 <<<"$previews")
	run curl -fsS "$url"
	if pisb exec "$name" --sh 'test -n "$HTTP_PROXY"' 2>/dev/null; then
		step "7. egress: only network.allowedHosts, through the proxy"
		run pisb exec "$name" --sh 'curl -sS -o /dev/null -w "%{http_code} " http://example.com/ || true; echo'
	fi
fi

step "8. clean up"
run pisb destroy "$name" --confirm "$name"
echo
echo "demo done: the sandbox and its state are gone."
