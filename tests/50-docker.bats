#!/usr/bin/env bats
# pisb docker: docker inside a sbx sandbox's own daemon, through `sbx exec`
# (the fake sbx of tests/fakes/sbx stands in for the proprietary CLI and
# its VM).  Other drivers have no daemon of their own and are refused,
# naming the driver.  Nothing ever reaches the host's docker: no host
# docker process, DOCKER_HOST and the host socket ignored.
load helpers

VERBS="status verify resources prune ps images pull load import run logs exec build init compose stop start rm curl"
SOCK=unix:///var/run/docker.sock

setup() {
	pisb_test_setup
	require_cmd jq
	require_cmd python3
	mkdir -p "$PI_SANDBOX_HOME"
	chmod 700 "$PI_SANDBOX_HOME"
	export HOME=$BATS_TEST_TMPDIR/home
	mkdir -p "$HOME" "$BATS_TEST_TMPDIR/hostbin"
	SBXS=$HOME/.local/share/docker-sandboxes-fake
	# a host docker that would leave a mark, on PATH after the fakes
	printf '#!/bin/sh\necho "$0 $*" >> %s/docker-ran\nexit 99\n' "$BATS_TEST_TMPDIR" > "$BATS_TEST_TMPDIR/hostbin/docker"
	chmod +x "$BATS_TEST_TMPDIR/hostbin/docker"
	export PATH="$TOP/tests/fakes:$PATH:$BATS_TEST_TMPDIR/hostbin"
}

teardown() {
	if [ -n "${LISTENER:-}" ]; then kill "$LISTENER" 2>/dev/null || true; fi
	if [ -n "${WEB:-}" ]; then kill "$WEB" 2>/dev/null || true; fi
	for n in $(pisb list -q 2>/dev/null); do pisb destroy "$n" --confirm "$n" >/dev/null 2>&1 || true; done
}

# a record for a sandbox of driver $2 (no controller needed to refuse)
fake_record() {
	mkdir -p "$PI_SANDBOX_HOME/instances/$1"
	jq -n --arg n "$1" --arg d "$2" '{version:1,name:$n,driver:$d,createdAt:1,template:null,owner:{pid:0,start:0},sessionId:null,remote:null,config:{version:1}}' \
		> "$PI_SANDBOX_HOME/instances/$1/record.json"
}
# the docker argv the fake daemon got inside the sandbox, one JSON array a line
docker_calls() { jq -c '.argv' "$SBXS/docker.log"; }
sbx_calls() { jq -c '.argv[1:]' "$SBXS/calls.log"; }

@test "every verb runs docker inside the sbx sandbox, pinned to its own daemon" {
	run -0 pisb create box --driver sbx
	ws=$PI_SANDBOX_HOME/instances/box/workspace
	run -0 pisb docker box pull -- alpine
	[[ $output == *"Downloaded newer image for alpine:latest"* ]]
	[ "$(sbx_calls | tail -1)" = "[\"exec\",\"-i\",\"-w\",\"$ws\",\"pi-sbx-0-1\",\"--\",\"docker\",\"-H\",\"$SOCK\",\"pull\",\"alpine\"]" ]
	[ "$(docker_calls | tail -1)" = "[\"-H\",\"$SOCK\",\"pull\",\"alpine\"]" ]
	run -0 pisb docker box run -- --name hi alpine echo hello
	[ "$output" = hello ]
	run -0 pisb docker box run -- -d --name web alpine sleep 100
	run -0 pisb docker box ps
	[[ $output == *"web"* ]]
	run -0 pisb docker box images
	[[ $output == *"alpine"* ]]
	run -0 pisb docker box logs -- hi
	[ "$output" = hello ]
	run -0 pisb docker box exec -- web echo inside
	[ "$output" = inside ]
	run -0 pisb docker box stop -- web
	run -0 pisb docker box start -- web
	run -0 pisb docker box rm -- -f web
	run -0 bash -c 'printf "tarball" | pisb docker box load'
	[[ $output == *"Loaded image: loaded-7:latest"* ]]
	mkdir -p "$ws/app"
	run -0 pisb docker box build -- -t app:1 app
	printf 'services:\n  web:\n    image: alpine\n' > "$ws/compose.yaml"
	run -0 pisb docker box compose -- up -d
	run -0 pisb docker box prune
	[ "$(docker_calls | tail -1)" = "[\"-H\",\"$SOCK\",\"system\",\"prune\",\"--all\",\"--force\"]" ]
	# docker's status is passed through
	run -1 --separate-stderr pisb docker box logs -- nosuch
	[[ $stderr == *"No such container: nosuch"* ]]
	# an unknown verb is a usage error that names it, and never reaches docker
	n=$(wc -l < "$SBXS/docker.log")
	run -2 --separate-stderr pisb docker box frobnicate-not-a-verb
	[[ $stderr == *"unknown verb 'frobnicate-not-a-verb'"* ]]
	[ "$(wc -l < "$SBXS/docker.log")" = "$n" ]
	# every docker call pinned -H; none saw a DOCKER_HOST
	run -0 jq -s -e 'all(.[]; .argv[0:2] == ["-H","unix:///var/run/docker.sock"] and .DOCKER_HOST == null)' "$SBXS/docker.log"
}

@test "status and verify report the sandbox's daemon; resources its size" {
	run -0 pisb create box --driver sbx
	run -0 pisb docker box status --json
	jq -e '.driver == "sbx" and .sbxName == "pi-sbx-0-1" and .status == "running"
		and .daemon.reachable and (.daemon.id | startswith("FAKE:")) and .daemon.version == "27.3.1"
		and .ports == [] and .env == "strict"' <<<"$output"
	run -0 pisb docker box status
	[[ $output == *"docker daemon inside: 27.3.1"* ]]
	# the caller's ~/.ssh and ~/.docker exist on the host: the VM has neither
	mkdir -p "$HOME/.ssh" "$HOME/.docker"
	DOCKER_HOST=unix:///host.sock COMPOSE_FILE=x run -0 pisb docker box verify --json
	jq -e '.pass and (.checks | map(.check) == ["transport","env-scrub","env-forwarding","daemon","host-mounts","contexts","port-binds"])
		and all(.checks[]; .pass)' <<<"$output"
	run -0 pisb docker box verify
	[[ $output == *"[PASS] env-scrub"* ]]
	[[ $output == *"all checks passed"* ]]
	# a backend that shares them fails the audit (the fake misconfigured)
	printf '{"extra_mounts": ["%s"]}\n' "$HOME/.ssh" > "$SBXS/settings.json"
	run -0 pisb stop box
	run -0 pisb start box
	run -1 pisb docker box verify --json
	jq -e '(.pass | not) and (.checks[] | select(.check == "host-mounts") | .pass | not)' <<<"$output"
	rm "$SBXS/settings.json"
	run -0 pisb stop box
	run -0 pisb start box
	run -0 pisb docker box verify --json
	# a port bound beyond loopback fails the audit (exit 1)
	sbx ports pi-sbx-0-1 --publish 0.0.0.0:18080:3000
	run -1 pisb docker box verify --json
	jq -e '(.pass | not) and (.checks[] | select(.check == "port-binds") | .pass | not)' <<<"$output"
	run -0 pisb docker box resources --json
	jq -e '(.cpus | type) == "number" and (.memory | test("Mem:")) and (.docker | test("Images"))' <<<"$output"
	# a stopped sandbox is not started to be looked at
	run -0 pisb stop box
	run -0 pisb docker box status --json
	jq -e '.status == "stopped" and (.daemon.reachable | not)' <<<"$output"
	run -0 sbx ls --json
	jq -e '.sandboxes[0].status == "stopped"' <<<"$output"
}

@test "run publishes its ports on loopback; curl reaches only published ports" {
	run -0 pisb create box --driver sbx
	port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
	run -0 --separate-stderr pisb docker box run -- -d --name web -e A=b -p "0.0.0.0:$port:3000" alpine nc -p 9
	[[ $stderr == *"published $port:3000 on 127.0.0.1"* ]]
	# the container's own "-p 9" is not a port to publish
	[ "$(sbx_calls | grep -c '"--publish"')" = 1 ]
	[ "$(sbx_calls | tail -1)" = "[\"ports\",\"pi-sbx-0-1\",\"--publish\",\"$port:3000\"]" ]
	run -0 pisb docker box status --json
	jq -e --argjson p "$port" '.ports == [{"hostIp":"127.0.0.1","hostPort":$p,"sandboxPort":3000,"protocol":"tcp"}]' <<<"$output"
	# the fake forwards nothing: something on the host port stands in for it
	mkdir -p "$BATS_TEST_TMPDIR/www" && echo served > "$BATS_TEST_TMPDIR/www/index.html"
	python3 -m http.server "$port" --bind 127.0.0.1 --directory "$BATS_TEST_TMPDIR/www" >/dev/null 2>&1 3>&- &
	WEB=$!
	for _ in $(seq 50); do curl -s "http://127.0.0.1:$port/" >/dev/null 2>&1 && break; sleep 0.1; done
	run -0 pisb docker box curl -- "$port/index.html"
	[ "$output" = served ]
	run -0 pisb docker box curl -- "http://127.0.0.1:$port/"
	run -1 --separate-stderr pisb docker box curl -- 1
	[[ $stderr == *"127.0.0.1:1 is not a port sandbox 'box' published"* ]]
	run -2 pisb docker box curl -- http://example.com:80/
	run -2 pisb docker box curl
	# no header goes in through the path (as on the local driver)
	run -2 --separate-stderr pisb docker box curl -- "$port"$'/x\r\nX-Injected: 1'
	[[ $stderr == *"the path may hold no space, control or non-ASCII byte"* ]]
	# rm unpublishes what the container published (sbx would leave it stale)
	run -0 --separate-stderr pisb docker box rm -- -f web
	[[ $stderr == *"unpublished $port:3000/tcp"* ]]
	[ "$(sbx_calls | tail -1)" = "[\"ports\",\"pi-sbx-0-1\",\"--unpublish\",\"$port:3000/tcp\"]" ]
	run -0 pisb docker box status --json
	jq -e '.ports == []' <<<"$output"
	# the policy's parse of -p: a cluster with [::]:H:C, --publish= with udp
	run -0 --separate-stderr pisb docker box run -- -dp "[::]:18091:3001" alpine
	[ "$(sbx_calls | tail -1)" = '["ports","pi-sbx-0-1","--publish","18091:3001"]' ]
	run -0 --separate-stderr pisb docker box run -- -d --publish=127.0.0.1:18092:53/udp alpine
	[ "$(sbx_calls | tail -1)" = '["ports","pi-sbx-0-1","--publish","18092:53/udp"]' ]
	# no host port: docker picks one inside, which sbx cannot know: not published
	n=$(sbx_calls | grep -c '"--publish"')
	run -0 --separate-stderr pisb docker box run -- -d -p 3002 alpine
	[[ $stderr == *"-p 3002: no host port given, so not published"* ]]
	[ "$(sbx_calls | grep -c '"--publish"')" = "$n" ]
}

@test "compose up publishes the project's ports on loopback, down unpublishes them" {
	run -0 pisb create box --driver sbx
	ws=$PI_SANDBOX_HOME/instances/box/workspace
	printf 'services:\n  web:\n    image: nginx\n    ports:\n      - "18080:3000"\n  dns:\n    image: x\n    ports:\n      - 15353:53/udp\n' > "$ws/compose.yaml"
	run -0 --separate-stderr pisb docker box compose -- up -d
	[[ $stderr == *"published 18080:3000/tcp on 127.0.0.1"* ]]
	[[ $stderr == *"published 15353:53/udp"* ]]
	[[ $(sbx_calls | grep -F '"compose","-f","compose.yaml","ps","--format","json"') ]]
	# up again: nothing published twice
	run -0 --separate-stderr pisb docker box compose -- up -d
	[[ $stderr != *"warning"* ]]
	run -0 pisb docker box status --json
	jq -e '.ports | map("\(.hostPort):\(.sandboxPort)/\(.protocol)") == ["18080:3000/tcp","15353:53/udp"]' <<<"$output"
	run -0 --separate-stderr pisb docker box compose -- down
	[[ $stderr == *"unpublished 18080:3000/tcp"* ]]
	run -0 pisb docker box status --json
	jq -e '.ports == []' <<<"$output"
}

@test "init writes a starting Dockerfile inside the workspace, never outside it" {
	run -0 pisb create box --driver sbx
	ws=$PI_SANDBOX_HOME/instances/box/workspace
	mkdir -p "$ws/web" && echo '{}' > "$ws/web/package.json"
	run -0 --separate-stderr pisb docker box init -- web
	grep -q '^FROM node' "$ws/web/Dockerfile"
	grep -Fx '.env' "$ws/web/.dockerignore"
	[[ $stderr == *"node: build it with"* ]]
	run -4 --separate-stderr pisb docker box init --json -- web
	jq -e '.files[0] == {file:"Dockerfile",status:"kept",existing:"Dockerfile"}' <<<"$output"
	run -3 pisb docker box init -- nosuch
	# a DIR outside the workspace is refused before anything runs (exit
	# 2); a symlink out of it is not followed
	run -2 --separate-stderr pisb docker box init -- ../../../..
	[[ $stderr == *"directory '../../../..' is outside the workspace"* ]]
	[ ! -e "$PI_SANDBOX_HOME/instances/box/Dockerfile" ]
	[ ! -e "$PI_SANDBOX_HOME/Dockerfile" ]
	ln -s /etc "$ws/out"
	run -3 pisb docker box init -- out
	[ ! -e /etc/Dockerfile ]
	# --lang, --compose, --force; the planted link a file is written through is not followed
	ln -s "$BATS_TEST_TMPDIR/victim" "$ws/web/Dockerfile.pisb-init.1"
	run -0 --separate-stderr pisb docker box init --json -- --lang go --compose --force web
	jq -e '.lang == "go" and .port == 8080 and ([.files[].status] | unique) == ["written"]' <<<"$output"
	grep -q '^FROM golang' "$ws/web/Dockerfile"
	grep -qF -- '- "8080:8080"' "$ws/web/compose.yaml"
	[ ! -e "$BATS_TEST_TMPDIR/victim" ]
	run -2 --separate-stderr pisb docker box init -- --lang cobol
	[[ $stderr == *"'--lang cobol'"* ]]
}

@test "other drivers have no daemon of their own: every verb exits 1 and names the driver" {
	fake_record far opensandbox
	for v in $VERBS; do
		run -1 --separate-stderr pisb docker far "$v"
		[[ $stderr == "fatal: sandbox 'far' (driver opensandbox) cannot 'docker': "*"; see pisb drivers" ]] ||
			{ echo "verb $v: $stderr"; false; }
		[ -z "$output" ]
	done
}

@test "a local sandbox without docker: true has no daemon: every verb exits 1 and says how to get one" {
	fake_record loc local
	for v in $VERBS; do
		run -1 --separate-stderr pisb docker loc "$v"
		[ "$stderr" = "fatal: sandbox 'loc' (driver local) has no docker daemon of its own: create it with 'docker: true' in its sandbox.yaml (pisb never uses the host's docker daemon)" ] ||
			{ echo "verb $v: $stderr"; false; }
		[ -z "$output" ]
	done
}

@test "exit codes: 3 unknown sandbox, 2 unknown verb or missing arguments, 5 sandbox gone or sbx missing" {
	run -3 --separate-stderr pisb docker nosuch ps
	[ "$stderr" = "fatal: no such sandbox 'nosuch'" ]
	fake_record d local
	run -2 --separate-stderr pisb docker d frobnicate
	[[ $stderr == *"unknown verb 'frobnicate'"* ]]
	run -2 --separate-stderr pisb docker d
	run -2 --separate-stderr pisb docker
	run -2 --separate-stderr pisb docker BAD ps
	run -2 pisb docker d ps extra
	# --json errors are JSON on stdout too (pisb action's contract)
	run -3 --separate-stderr pisb docker nosuch ps --json-errors
	jq -e '.error.exit == 3' <<<"$output"
	run -0 pisb create box --driver sbx
	run -5 --separate-stderr env PATH=/usr/bin:/bin "$PISB_BIN_DIR/pisb" docker box ps
	[[ $stderr == *"the sbx CLI is not on PATH"* ]]
	sbx rm --force pi-sbx-0-1
	run -5 --separate-stderr pisb docker box ps
	[[ $stderr == *"sandbox 'box': 'sbx exec pi-sbx-0-1' failed"* ]]
	run -5 --separate-stderr pisb docker box images
	[[ $stderr == *"no longer exists"* ]]
}

@test "the host's docker is never touched: no docker process, DOCKER_HOST and the host socket ignored" {
	fake_record d local
	run -0 pisb create box --driver sbx
	# a "daemon" on DOCKER_HOST that records every connection
	sock=$BATS_TEST_TMPDIR/docker.sock
	python3 -c '
import os, socket, sys
s = socket.socket(socket.AF_UNIX)
s.bind(sys.argv[1]); s.listen(8)
open(sys.argv[1] + ".ready", "w").close()
while True:
    c, _ = s.accept()
    open(sys.argv[2], "a").write("connect\n")
    c.close()
' "$sock" "$BATS_TEST_TMPDIR/daemon-hit" 3>&- &
	LISTENER=$!
	for i in $(seq 100); do [ -e "$sock.ready" ] && break; sleep 0.05; done
	for v in $VERBS; do
		run -1 env DOCKER_HOST="unix://$sock" DOCKER_CONTEXT=evil pisb docker d "$v"
	done
	for v in status verify resources ps images prune; do
		env DOCKER_HOST="unix://$sock" DOCKER_CONTEXT=evil COMPOSE_FILE=/x pisb docker box "$v" >/dev/null 2>&1 || true
	done
	env DOCKER_HOST="unix://$sock" pisb docker box pull -- alpine >/dev/null
	[ ! -e "$BATS_TEST_TMPDIR/docker-ran" ]
	[ ! -e "$BATS_TEST_TMPDIR/daemon-hit" ]
	# nothing of DOCKER_*/COMPOSE_* reached sbx
	run -0 jq -s -e 'all(.[]; .env | keys | map(select(test("^(DOCKER_|COMPOSE_)"))) | length == 0)' "$SBXS/calls.log"
	# no code reads DOCKER_HOST or DOCKER_CONTEXT
	run -1 grep -n -e 'getenv("DOCKER' -e 'getenv("COMPOSE' "$TOP"/common/*.c "$TOP"/drivers/*/*.c "$TOP"/cmd/*.c
}
