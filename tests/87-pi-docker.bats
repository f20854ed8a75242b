#!/usr/bin/env bats
# The docker seed's docker_* tools in Pi (issue 15): real Pi with the scripted
# model, the session's sandbox of driver sbx against the fake sbx CLI
# (tests/fakes/sbx, whose "in-VM" docker keeps a tiny fake daemon state).
# The model builds, runs with a port, probes it with docker_curl and removes
# the container; every host path, option or host address it slips into a
# parameter is refused before pisb runs. A sandbox without a daemon of its
# own (local) gets no docker tools.
load helpers
load pi/helpers
load docker_local

setup_file() {
	require_cmd python3
	require_cmd jq
	if [ "$PI_FLAVOR" = current ]; then pi_install_current; else pi_install_legacy; fi
	pi_env "$BATS_FILE_TMPDIR"
	printf 'version: 1\ndriver: sbx\n' > "$PROJ/.pi/sandbox.yaml"
	export HOME=$BATS_FILE_TMPDIR/home
	export SBXS=$HOME/.local/share/docker-sandboxes-fake
	mkdir -p "$HOME" "$BATS_FILE_TMPDIR/hostbin"
	# a host docker that would leave a mark, on PATH after the fakes
	printf '#!/bin/sh\necho "$0 $*" >> %s/host-docker-ran\nexit 99\n' "$BATS_FILE_TMPDIR" > "$BATS_FILE_TMPDIR/hostbin/docker"
	chmod +x "$BATS_FILE_TMPDIR/hostbin/docker"
	export PATH="$TOP/tests/fakes:$PATH:$BATS_FILE_TMPDIR/hostbin"
	export PISB_SBX_POLL_MS=100 PISB_SBX_KEEPALIVE_MS=300
	export SB; SB=$(pi_name dock)
	export PISB_SANDBOX=$SB PISB_LIFECYCLE=keep
	export OUT="$BATS_FILE_TMPDIR/run.jsonl"
	export SECRET_DIR="$BATS_FILE_TMPDIR/host-secret"
	mkdir -p "$SECRET_DIR" && echo HOST-SECRET > "$SECRET_DIR/key"

	# the fake publishes nothing: a host web server stands in for the container's port
	export PORT
	PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
	mkdir -p "$BATS_FILE_TMPDIR/www" && echo served-by-web > "$BATS_FILE_TMPDIR/www/index.html"
	python3 -m http.server "$PORT" --bind 127.0.0.1 --directory "$BATS_FILE_TMPDIR/www" >/dev/null 2>&1 3>&- &
	echo $! > "$BATS_FILE_TMPDIR/web.pid"
	local _
	for _ in $(seq 100); do curl -s "http://127.0.0.1:$PORT/" >/dev/null 2>&1 && break; sleep 0.1; done

	local script
	export PORT2
	PORT2=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
	# stopped sandboxes of this state directory for docker_gc: a stale Pi
	# session's (removed) and one made by hand (kept)
	export STALE FOREIGN
	STALE=$(pi_name stale) FOREIGN=$(pi_name foreign)
	if unshare -Ur true 2>/dev/null; then
		printf '{"version":1,"driver":"local","metadata":{"pisb.pi/role":"session"}}' > "$BATS_FILE_TMPDIR/stale.json"
		pisb create "$STALE" -f "$BATS_FILE_TMPDIR/stale.json" >/dev/null && pisb stop "$STALE" >/dev/null
		pisb create "$FOREIGN" --driver local >/dev/null && pisb stop "$FOREIGN" >/dev/null
	fi
	# the same for sbx, which pisb gc leaves to its driver: the extension judges them by pisb inspect
	export STALE_SBX FOREIGN_SBX
	STALE_SBX=$(pi_name stalesbx) FOREIGN_SBX=$(pi_name foreignsbx)
	printf '{"version":1,"driver":"sbx","metadata":{"pisb.pi/role":"session"}}' > "$BATS_FILE_TMPDIR/stale-sbx.json"
	pisb create "$STALE_SBX" -f "$BATS_FILE_TMPDIR/stale-sbx.json" >/dev/null && pisb stop "$STALE_SBX" >/dev/null
	pisb create "$FOREIGN_SBX" --driver sbx >/dev/null && pisb stop "$FOREIGN_SBX" >/dev/null

	script=$(jq -nc --arg port "$PORT" --arg port2 "$PORT2" --arg secret "$SECRET_DIR" --arg proj "$PROJ" '
	 def t($n; $a): {tools:[{name:$n,args:$a}]};
	 [
	 t("write"; {path:"app/Dockerfile",content:"FROM busybox\nCMD [\"httpd\",\"-f\",\"-p\",\"3000\"]\n"}),
	 t("docker_status"; {}),
	 t("docker_build"; {context:"/workspace/app",tag:"myapp:1"}),
	 t("docker_images"; {}),
	 t("docker_run"; {image:"myapp:1",name:"web",ports:[($port + ":3000")],env:["MODE=demo"]}),
	 t("docker_ps"; {}),
	 t("docker_curl"; {url:("http://127.0.0.1:" + $port + "/index.html")}),
	 t("docker_rm"; {id:"web"}),
	 t("docker_curl"; {url:("http://127.0.0.1:" + $port + "/index.html")}),
	 t("docker_run"; {image:"busybox",volumes:["/:/host"]}),
	 t("docker_run"; {image:"busybox",volumes:["app/../../..:/host"]}),
	 t("docker_run"; {image:"busybox",volumes:[($secret + ":/s:ro")]}),
	 t("docker_build"; {context:"/etc",tag:"x:1"}),
	 t("docker_build"; {context:"app",tag:"x:1",dockerfile:"../../../../etc/passwd"}),
	 t("docker_run"; {image:"--privileged"}),
	 t("docker_run"; {image:"busybox",name:"-v"}),
	 t("docker_run"; {image:"busybox",ports:["0.0.0.0:9999:80"]}),
	 t("docker_run"; {image:"busybox",env:["-v=/:/host"]}),
	 t("docker_compose"; {extraArgs:["-f","/etc/compose.yaml"]}),
	 t("docker_compose"; {file:"/etc/compose.yaml"}),
	 t("docker_compose"; {action:"up",extraArgs:["--project-directory=/"]}),
	 t("docker_exec"; {id:"--privileged",command:"id"}),
	 t("docker_curl"; {url:"http://example.com/"}),
	 t("docker_init"; {context:($proj + "/../host-secret")}),
	 t("docker_build"; {context:($proj + "/app"),tag:"again:1"}),
	 t("docker_verify"; {}),
	 t("write"; {path:"compose.yaml",content:("services:\n  web:\n    image: nginx\n    ports:\n      - \"" + $port2 + ":3000\"\n")}),
	 t("docker_compose"; {}),
	 t("docker_compose"; {action:"down"}),
	 t("docker_pull"; {image:"alpine:3.20"}),
	 t("docker_run"; {image:"alpine:3.20",name:"bg",command:"sleep 1000"}),
	 t("docker_logs"; {id:"bg",tail:10}),
	 t("docker_exec"; {id:"bg",command:["echo","hi-from-exec"]}),
	 t("docker_stop"; {id:"bg"}),
	 t("docker_start"; {id:"bg"}),
	 t("docker_ps"; {all:true}),
	 t("docker_resources"; {}),
	 t("docker_prune"; {}),
	 t("write"; {path:"newapp/package.json",content:"{}\n"}),
	 t("docker_init"; {context:"/workspace/newapp"}),
	 t("read"; {path:"newapp/Dockerfile"}),
	 t("docker_init"; {context:"newapp"}),
	 t("docker_gc"; {hours:0}),
	 t("docker_run"; {image:"busybox -v /:/host"}),
	 t("docker_sandbox_rm"; {}),
	 t("bash"; {command:"echo after-rm"}),
	 t("docker_ps"; {}),
	 t("write"; {path:"rs/Cargo.toml",content:"[package]\nname = \"hello-rs\"\nversion = \"0.1.0\"\n"}),
	 t("docker_init"; {context:"/workspace/rs",compose:true}),
	 t("read"; {path:"rs/Dockerfile"}),
	 t("read"; {path:"rs/compose.yaml"}),
	 t("docker_init"; {context:"rs",lang:"python",force:true}),
	 t("read"; {path:"rs/Dockerfile"}),
	 t("docker_init"; {context:"rs",lang:"cobol"}),
	 t("docker_init"; {context:"nosuchdir"}),
	 {text:"done"}]')
	run_pi_json "$script" "$OUT" || true
}

teardown() {
	if [ -n "${LOCAL_SB:-}" ]; then pisb destroy "$LOCAL_SB" --confirm "$LOCAL_SB" >/dev/null 2>&1 || true; fi
}

teardown_file() {
	kill "$(cat "$BATS_FILE_TMPDIR/web.pid")" 2>/dev/null || true
	pi_destroy "$SB" "$STALE" "$FOREIGN" "$STALE_SBX" "$FOREIGN_SBX"
}

# the docker argv the fake daemon got inside the sandbox, one JSON array a line
docker_calls() { jq -c '.argv' "$SBXS/docker.log"; }
sbx_calls() { jq -c '.argv[1:]' "$SBXS/calls.log"; }

# refused N TEXT: tool result N is an error naming TEXT, saying nothing ran
refused() {
	tool_result "$OUT" "$1"
	[ "$tool_err" = true ]
	[[ $tool_text == *"$2"* ]]
	[[ $tool_text == *"nothing was run"* ]]
}

@test "pi played the whole script with the docker tools of a sbx sandbox" {
	cat "$OUT.stderr"
	[ "$(jq -s '[.[] | select(.type=="tool_execution_end")] | length' "$OUT")" -eq 55 ]
}

@test "docker_status: the sandbox's own daemon answers" {
	tool_result "$OUT" 1
	[ "$tool_name" = docker_status ]
	[ "$tool_err" = false ]
	jq -e '.daemon.reachable == true and .driver == "sbx"' <<<"$tool_text"
}

@test "docker_build: a /workspace context builds inside the sandbox, from its workspace" {
	tool_result "$OUT" 2
	[ "$tool_err" = false ]
	docker_calls | grep -Fx '["-H","unix:///var/run/docker.sock","build","-t","myapp:1","app"]'
	[[ $(jq -r 'select(.argv[2] == "build") | .cwd' "$SBXS/docker.log" | head -1) == "$PI_SANDBOX_HOME/instances/$SB/workspace" ]]
	tool_result "$OUT" 3
	[[ $tool_text == *myapp* ]]
	# the host project path names the same workspace directory
	tool_result "$OUT" 24
	[ "$tool_err" = false ]
	docker_calls | grep -Fx '["-H","unix:///var/run/docker.sock","build","-t","again:1","app"]'
}

@test "docker_run: detached with a label, restart policy and a port published on loopback" {
	tool_result "$OUT" 4
	[ "$tool_err" = false ]
	[[ $tool_text == *"published $PORT:3000 on 127.0.0.1"* ]]
	[[ $tool_text == *"restart=unless-stopped"* ]]
	docker_calls | grep -F '"run"' | grep -F '"--name","web"' | grep -F "\"-p\",\"$PORT:3000\"" | grep -F '"--label","com.pi.sandbox=true"' |
		grep -F '"-d"' | grep -F '"--restart","unless-stopped"' | grep -F '"-e","MODE=demo"' | grep -F '"myapp:1"'
	sbx_calls | grep -F '"--publish"' | grep -F "\"$PORT:3000\""
	tool_result "$OUT" 5
	[[ $tool_text == *web* ]]
}

@test "docker_curl reaches the published port from the host; after docker_rm it is refused" {
	tool_result "$OUT" 6
	[ "$tool_err" = false ]
	[ "$tool_text" = served-by-web ]
	tool_result "$OUT" 7
	[ "$tool_err" = false ]
	[[ $tool_text == *"unpublished $PORT:3000/tcp"* ]]
	sbx_calls | grep -F '"--unpublish"' | grep -F "\"$PORT:3000/tcp\""
	tool_result "$OUT" 8
	[ "$tool_err" = true ]
	[[ $tool_text == *"is not a port sandbox '$SB' published"* ]]
	[[ $tool_text != *served-by-web* ]]
}

@test "host paths in volumes, build contexts, Dockerfiles, compose files and init are refused" {
	refused 9 "volume source '/' is outside the workspace"
	refused 10 "leaves the workspace"
	refused 11 "volume source '$SECRET_DIR' is outside the workspace"
	refused 12 "context '/etc' is outside the workspace"
	refused 13 "dockerfile"
	refused 18 "'-f' is not accepted in extraArgs"
	refused 19 "file '/etc/compose.yaml' is outside the workspace"
	refused 20 "'--project-directory=/' is not accepted"
	refused 23 "context '$PROJ/../host-secret' is outside the workspace"
	# none of them reached the sandbox's docker
	! docker_calls | grep -F '/host'
	! docker_calls | grep -F '/etc'
	! docker_calls | grep -F "$SECRET_DIR"
	! docker_calls | grep -F 'project-directory'
	[ ! -e "$SECRET_DIR/Dockerfile" ]
}

@test "option-shaped values and non-loopback publishing are refused" {
	refused 14 "image '--privileged' starts with '-'"
	refused 15 "'-v' starts with '-'"
	refused 16 "port '0.0.0.0:9999:80' is not HOST:CONTAINER"
	refused 17 "'-v=/:/host' starts with '-'"
	refused 21 "id '--privileged' starts with '-'"
	refused 43 "image 'busybox -v /:/host' contains white space"
	! docker_calls | grep -F -- '--privileged'
	! docker_calls | grep -F '9999'
	# the only runs that reached docker are the two the script meant
	[ "$(docker_calls | grep -F '"run"' | grep -vcF -e '"web"' -e '"bg"')" -eq 0 ]
}

@test "docker_curl to another host is refused by pisb" {
	tool_result "$OUT" 22
	[ "$tool_err" = true ]
	[[ $tool_text == *"only http://127.0.0.1:PORT/"* ]]
}

@test "docker_verify audits the sandbox and no host docker ever ran" {
	tool_result "$OUT" 25
	[ "$tool_name" = docker_verify ]
	[[ $tool_text == *"PASS"*"transport"* ]]
	[ ! -e "$BATS_FILE_TMPDIR/host-docker-ran" ]
}

@test "a sandbox without a docker daemon of its own (local) gets no docker tools" {
	pi_require_local_driver
	local proj=$BATS_TEST_TMPDIR/p2
	mkdir -p "$proj/.pi"
	printf 'version: 1\ndriver: local\n' > "$proj/.pi/sandbox.yaml"
	local name; name=$(pi_name nodock)
	PROJ=$proj PISB_SANDBOX=$name run_pi_json '[{"tools":[{"name":"docker_ps","args":{}}]},{"tools":[{"name":"bash","args":{"command":"echo local-ok"}}]},{"text":"done"}]' "$BATS_TEST_TMPDIR/nodock.jsonl" || true
	pi_destroy "$name"
	tool_result "$BATS_TEST_TMPDIR/nodock.jsonl" 0
	[ "$tool_err" = true ]
	[[ $tool_text == *"docker_ps"*"not found"* ]]
	tool_result "$BATS_TEST_TMPDIR/nodock.jsonl" 1
	[ "$tool_err" = false ]
	[[ $tool_text == *local-ok* ]]
}

@test "docker_compose up publishes the project's ports, down unpublishes them" {
	tool_result "$OUT" 27
	[ "$tool_err" = false ]
	[[ $tool_text == *"published $PORT2:3000/tcp on 127.0.0.1"* ]]
	# the policy names the default file it checked (-f), so compose cannot pick another
	docker_calls | grep -Fx '["-H","unix:///var/run/docker.sock","compose","-f","compose.yaml","up","-d","--build"]'
	tool_result "$OUT" 28
	[ "$tool_err" = false ]
	[[ $tool_text == *"unpublished $PORT2:3000/tcp"* ]]
}

@test "pull, logs, exec, stop, start, ps, resources, prune" {
	local i
	for i in 29 30 31 32 33 34 35 36 37; do
		tool_result "$OUT" $i
		[ "$tool_err" = false ]
	done
	docker_calls | grep -Fx '["-H","unix:///var/run/docker.sock","pull","alpine:3.20"]'
	docker_calls | grep -F '"--name","bg"' | grep -F '"alpine:3.20","sleep","1000"'
	docker_calls | grep -Fx '["-H","unix:///var/run/docker.sock","logs","--tail=10","bg"]'
	tool_result "$OUT" 32
	[ "$tool_text" = hi-from-exec ]
	docker_calls | grep -Fx '["-H","unix:///var/run/docker.sock","stop","--time=10","bg"]'
	docker_calls | grep -Fx '["-H","unix:///var/run/docker.sock","ps","-a"]'
	tool_result "$OUT" 36
	[[ $tool_text == *Images* ]]
	docker_calls | grep -F '"system","prune"'
}

@test "docker_init scaffolds a Dockerfile in a workspace directory and keeps an existing one" {
	tool_result "$OUT" 39
	[ "$tool_err" = false ]
	tool_result "$OUT" 40
	[ "$tool_err" = false ]
	[[ $tool_text == *"FROM node"* ]]
	tool_result "$OUT" 41
	[ "$tool_err" = false ]
	[[ $tool_text == *"is kept"* ]]
}

@test "docker_gc removes a stale stopped session sandbox, never one made by hand" {
	pi_require_local_driver
	tool_result "$OUT" 42
	[ "$tool_err" = false ]
	[[ $tool_text == *"removed: "*"$STALE"* ]]
	run -3 pisb inspect "$STALE" --json
	run -0 pisb inspect "$FOREIGN" --json
	jq -e '.status == "stopped"' <<<"$output"
}

@test "docker_gc covers sbx session sandboxes through pisb (inspect, destroy), never one made by hand, never a host docker" {
	tool_result "$OUT" 42
	[ "$tool_err" = false ]
	[[ $tool_text == *"removed: "*"$STALE_SBX"* ]]
	[[ $tool_text != *"$FOREIGN_SBX"* ]]
	run -3 pisb inspect "$STALE_SBX" --json
	run -0 pisb inspect "$FOREIGN_SBX" --json
	jq -e '.status == "stopped"' <<<"$output"
	# the fake sbx's own record of that microVM is gone too (pisb destroy tore it down)
	sbx_calls | grep -F '"rm"'
	[ ! -e "$BATS_FILE_TMPDIR/host-docker-ran" ]
}

@test "docker_sandbox_rm destroys the session's sandbox; the next tool call gets a fresh one" {
	tool_result "$OUT" 44
	[ "$tool_err" = false ]
	[[ $tool_text == *"sandbox '$SB' removed"* ]]
	[[ $tool_text == *"the next tool call makes a fresh sandbox"* ]]
	# the old one's files went with it: a fresh sandbox of the same (pinned) name, no app/Dockerfile
	tool_result "$OUT" 45
	[ "$tool_err" = false ]
	[[ $tool_text == *after-rm* ]]
	# the first result after it says again where the project is
	[[ $tool_note == "[pisb] "*"'$SB'"* ]]
	tool_result "$OUT" 46
	[ "$tool_err" = false ]
	run -0 pisb inspect "$SB" --json
	jq -e '.status == "running" and .driver == "sbx"' <<<"$output"
	[ ! -e "$PI_SANDBOX_HOME/instances/$SB/workspace/app/Dockerfile" ]
	# two sbx microVMs were created for $SB: the first and the fresh one
	[ "$(sbx_calls | grep -c '^\["create"')" -ge 2 ]
}

@test "docker_init: detection (rust), compose.yaml, lang and force, all through pisb's file verbs in the workspace" {
	tool_result "$OUT" 48
	[ "$tool_err" = false ]
	[[ $tool_text == *"docker_init rust in /workspace/rs"* ]]
	[[ $tool_text == *"compose.yaml: written"* ]]
	grep -Fx '.env' "$PI_SANDBOX_HOME/instances/$SB/workspace/rs/.dockerignore"
	tool_result "$OUT" 49
	[[ $tool_text == "FROM rust:"* ]]
	[[ $tool_text == *"COPY --from=build /src/target/release/hello-rs /usr/local/bin/app"* ]]
	tool_result "$OUT" 50
	[[ $tool_text == *'- "8080:8080"'* ]]
	tool_result "$OUT" 51
	[ "$tool_err" = false ]
	[[ $tool_text == *"Dockerfile: written"* ]]
	tool_result "$OUT" 52
	[[ $tool_text == "FROM python:3.12-slim"* ]]
	refused 53 "lang must be one of node, pnpm, python, go, rust, generic"
	refused 54 "context 'nosuchdir' is not a directory in the workspace"
	[ ! -e "$PROJ/rs" ]
}

@test "through Pi on a local sandbox with docker: true: docker_compose up builds and publishes a preview, docker_curl reaches it, down unpublishes it; docker_build, docker_run with a port, docker_curl, docker_rm" {
	why=$(docker_lacks)
	[ -z "$why" ] || skip "machine lacks: $why"
	docker compose version >/dev/null 2>&1 || command -v docker-compose >/dev/null ||
		skip "machine lacks: docker-compose (make deps installs it)"
	pi_env "$BATS_TEST_TMPDIR"
	printf 'version: 1\ndocker: true\n' > "$PROJ/.pi/sandbox.yaml"
	export PISB_SANDBOX PISB_LIFECYCLE=keep
	PISB_SANDBOX=$(pi_name dkc)
	LOCAL_SB=$PISB_SANDBOX
	# the daemon of the sandbox the session adopts, with a busybox image
	# (no registry is reachable)
	make_image "$BATS_TEST_TMPDIR/bb"
	run -0 pisb create "$PISB_SANDBOX" -f "$PROJ/.pi/sandbox.yaml"
	wait_daemon "$PISB_SANDBOX"
	run -0 pisb docker "$PISB_SANDBOX" load < "$BATS_TEST_TMPDIR/bb/busybox.tar"
	out=$BATS_TEST_TMPDIR/local.jsonl
	script=$(jq -nc '
	 def t($n; $a): {tools:[{name:$n,args:$a}]};
	 [
	 t("write"; {path:"app/Dockerfile",content:"FROM busybox\nRUN mkdir /www && echo served-via-pi > /www/index.html\nCMD [\"/bin/httpd\",\"-f\",\"-p\",\"80\",\"-h\",\"/www\"]\n"}),
	 t("write"; {path:"compose.yaml",content:"services:\n  web:\n    build: ./app\n    ports:\n      - \"18095:80\"\n"}),
	 t("docker_compose"; {}),
	 t("docker_compose"; {action:"ps"}),
	 t("docker_curl"; {url:"http://127.0.0.1:18095/index.html"}),
	 t("docker_compose"; {action:"down"}),
	 t("docker_curl"; {url:"http://127.0.0.1:18095/index.html"}),
	 t("docker_build"; {context:"/workspace/app",tag:"pi-web:1"}),
	 t("docker_run"; {image:"pi-web:1",name:"piweb",ports:["18096:80"]}),
	 t("docker_curl"; {url:"http://127.0.0.1:18096/index.html"}),
	 t("docker_rm"; {id:"piweb"}),
	 t("docker_curl"; {url:"http://127.0.0.1:18096/index.html"}),
	 {text:"done"}]')
	run_pi_json "$script" "$out" || true
	cat "$out.stderr"
	tool_result "$out" 2
	[ "$tool_name" = docker_compose ]
	[ "$tool_err" = false ]
	[[ $tool_text == *"published 18095 on http://127.0.0.1:"* ]]
	tool_result "$out" 3
	[ "$tool_err" = false ]
	[[ $tool_text == *web* ]]
	tool_result "$out" 4
	[ "$tool_err" = false ]
	[ "$tool_text" = served-via-pi ]
	tool_result "$out" 5
	[ "$tool_err" = false ]
	[[ $tool_text == *"unpublished 18095"* ]]
	tool_result "$out" 6
	[ "$tool_err" = true ]
	[[ $tool_text == *"18095 is not a port sandbox '$PISB_SANDBOX' published"* ]]
	# the same image by hand: docker_build, docker_run with a port, docker_curl, docker_rm
	tool_result "$out" 7
	[ "$tool_name" = docker_build ]
	[ "$tool_err" = false ]
	tool_result "$out" 8
	[ "$tool_err" = false ]
	[[ $tool_text == *"published 18096 on http://127.0.0.1:"* ]]
	tool_result "$out" 9
	[ "$tool_err" = false ]
	[ "$tool_text" = served-via-pi ]
	tool_result "$out" 10
	[ "$tool_name" = docker_rm ]
	[ "$tool_err" = false ]
	[[ $tool_text == *"unpublished 18096"* ]]
	tool_result "$out" 11
	[ "$tool_err" = true ]
	[[ $tool_text == *"18096 is not a port sandbox '$PISB_SANDBOX' published"* ]]
	run -0 pisb docker "$PISB_SANDBOX" ps -- -a --format '{{.Names}}'
	[ -z "$output" ]
}
