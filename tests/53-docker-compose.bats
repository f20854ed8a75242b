#!/usr/bin/env bats
# pisb docker NAME compose on the local driver: a real compose (the docker
# CLI's plugin where the host image has one, else Debian 12's docker-compose
# v1) against the sandbox's own dockerd.  The project builds from a
# Dockerfile in the workspace FROM a busybox image made here (no registry
# is reachable).  Nothing here is a mock.
load helpers
load docker_local

lacks() {
	local why
	why=$(docker_lacks)
	if [ -n "$why" ]; then
		echo "$why"
		return
	fi
	docker compose version >/dev/null 2>&1 || command -v docker-compose >/dev/null ||
		echo "docker-compose (make deps installs it)"
}

setup_file() {
	export PI_SANDBOX_HOME="$BATS_FILE_TMPDIR/state"
	[ -z "$(lacks)" ] || return 0
	make_image "$BATS_FILE_TMPDIR/bb"
	printf 'version: 1\ndocker: true\n' > "$BATS_FILE_TMPDIR/docker.yaml"
	pisb create cmp -f "$BATS_FILE_TMPDIR/docker.yaml" >/dev/null
	wait_daemon cmp
	pisb docker cmp load < "$BATS_FILE_TMPDIR/bb/busybox.tar" >/dev/null
	pisb write cmp app/Dockerfile --mkdir --content 'FROM busybox
RUN mkdir /www && echo served-by-compose > /www/index.html
CMD ["/bin/httpd", "-f", "-p", "80", "-h", "/www"]
' >/dev/null
	pisb write cmp compose.yaml --content 'services:
  web:
    build: ./app
    image: cmp-web:1
    ports:
      - "18090:80"
' >/dev/null
}

teardown_file() {
	pisb destroy cmp --confirm cmp >/dev/null 2>&1 || true
}

setup() {
	export PI_SANDBOX_HOME="$BATS_FILE_TMPDIR/state"
	local why
	why=$(lacks)
	[ -z "$why" ] || skip "machine lacks: $why"
	wait_daemon cmp
}

# the host port of the preview of sandbox port $1 ("" when there is none)
preview_port() {
	pisb docker cmp status --json | jq -r --argjson p "$1" '.ports[] | select(.sandboxPort == $p) | .hostPort'
}

@test "compose up builds from the workspace's Dockerfile, ps lists the service, its port is a preview on 127.0.0.1; down removes both" {
	run -0 --separate-stderr pisb docker cmp compose -- up -d --build
	[[ $stderr == *"published 18090 on http://127.0.0.1:"* ]] || { echo "$stderr"; false; }
	run -0 pisb docker cmp compose -- ps
	[[ $output == *web* ]]
	[[ $output == *Up* ]]
	run -0 pisb docker cmp ps -- --format '{{.Image}} {{.Ports}}'
	[[ $output == *"cmp-web:1 "*"18090->80/tcp"* ]]
	# labelled through the file pisb adds (compose has no option for it)
	run -0 pisb docker cmp ps -- --filter label=com.pi.sandbox=true --format '{{.Image}}'
	[ "$output" = cmp-web:1 ]
	hp=$(preview_port 18090)
	[ -n "$hp" ]
	run -0 pisb inspect cmp --json
	jq -e --arg u "http://127.0.0.1:$hp/" '.previews[] | select(.service == "port-18090") | .url == $u' <<<"$output"
	# from the host, through the preview
	out=""
	for i in $(seq 100); do out=$(curl -fsS "http://127.0.0.1:$hp/" 2>/dev/null) && break; sleep 0.2; done
	[ "$out" = served-by-compose ]
	run -0 pisb docker cmp curl -- 18090/index.html
	[ "$output" = served-by-compose ]
	# up again: the preview is kept, not published twice
	run -0 --separate-stderr pisb docker cmp compose -- up -d
	[[ $stderr != *published* ]]
	[ "$(preview_port 18090)" = "$hp" ]
	run -0 --separate-stderr pisb docker cmp compose -- down
	[[ $stderr == *"unpublished 18090"* ]] || { echo "$stderr"; false; }
	run -0 pisb docker cmp ps -- -a --format '{{.Image}}'
	[[ $output != *cmp-web* ]]
	run -0 pisb inspect cmp --json
	jq -e '[.previews[] | select(.service == "port-18090")] | length == 0' <<<"$output"
	[ -z "$(preview_port 18090)" ]
	run -7 curl -sS --max-time 5 "http://127.0.0.1:$hp/"
	run -1 --separate-stderr pisb docker cmp curl -- 18090/
	[[ $stderr == *"18090 is not a port sandbox 'cmp' published"* ]]
}

@test "compose stop, kill and rm unpublish the service's port; start, restart and run -d publish it" {
	run -0 --separate-stderr pisb docker cmp compose -- up -d --build
	[ -n "$(preview_port 18090)" ]
	run -0 --separate-stderr pisb docker cmp compose -- stop
	[[ $stderr == *"unpublished 18090"* ]] || { echo "$stderr"; false; }
	[ -z "$(preview_port 18090)" ]
	run -0 --separate-stderr pisb docker cmp compose -- start web
	[[ $stderr == *"published 18090 on http://127.0.0.1:"* ]] || { echo "$stderr"; false; }
	hp=$(preview_port 18090)
	[ -n "$hp" ]
	run -0 pisb docker cmp curl -- 18090/index.html
	[ "$output" = served-by-compose ]
	run -0 --separate-stderr pisb docker cmp compose -- kill
	[[ $stderr == *"unpublished 18090"* ]] || { echo "$stderr"; false; }
	[ -z "$(preview_port 18090)" ]
	run -0 --separate-stderr pisb docker cmp compose -- restart
	[[ $stderr == *"published 18090 on http://127.0.0.1:"* ]] || { echo "$stderr"; false; }
	[ -n "$(preview_port 18090)" ]
	# restart of a running service keeps its preview, published once
	run -0 --separate-stderr pisb docker cmp compose -- restart
	[[ $stderr != *published* ]]
	[ -n "$(preview_port 18090)" ]
	run -0 --separate-stderr pisb docker cmp compose -- rm -s -f
	[[ $stderr == *"unpublished 18090"* ]] || { echo "$stderr"; false; }
	[ -z "$(preview_port 18090)" ]
	# a one-off container of run -d publishes its -p; removing it unpublishes it
	run -0 --separate-stderr pisb docker cmp compose -- run -d --name cmp-oneoff -p 18091:80 web
	[[ $stderr == *"published 18091 on http://127.0.0.1:"* ]] || { echo "$stderr"; false; }
	run -0 pisb docker cmp curl -- 18091/index.html
	[ "$output" = served-by-compose ]
	# an attached run publishes nothing
	run -0 --separate-stderr pisb docker cmp compose -- run --rm -T web true
	[[ $stderr != *published* ]]
	run -0 --separate-stderr pisb docker cmp rm -- -f cmp-oneoff
	[[ $stderr == *"unpublished 18091"* ]] || { echo "$stderr"; false; }
	[ -z "$(preview_port 18091)" ]
	run -0 pisb docker cmp compose -- down
}

@test "compose logs, exec and run --rm reach the project's containers; run's container is labelled com.pi.sandbox=true" {
	run -0 pisb docker cmp compose -- up -d --build
	run -0 pisb docker cmp compose -- exec -T web cat /www/index.html
	[ "$output" = served-by-compose ]
	run -0 pisb docker cmp compose -- run --rm -T web sh -c 'echo one-off; cat /www/index.html'
	[[ $output == *"one-off"*"served-by-compose"* ]]
	run -3 pisb docker cmp compose -- run --rm -T web sh -c 'exit 3'
	# a file of another version: the label file takes its version (v1
	# refuses a mix), and a list of labels merges with it
	pisb write cmp v2/compose.yml --mkdir --content "version: '2.4'
services:
  b:
    image: busybox
    command: [sleep, '1000']
    labels: [mine=kept]
" >/dev/null
	run -0 pisb docker cmp compose -- -f v2/compose.yml -- up -d
	run -0 pisb docker cmp ps -- --filter label=mine=kept --format '{{.Label "com.pi.sandbox"}}'
	[ "$output" = true ]
	run -0 pisb docker cmp compose -- -f v2/compose.yml down
	run -0 pisb docker cmp compose -- run -d --name cmp-oneoff web sleep 1000
	run -0 pisb docker cmp ps -- --filter label=com.pi.sandbox=true --format '{{.Names}}'
	[[ $output == *cmp-oneoff* ]]
	run -0 pisb docker cmp rm -- -f cmp-oneoff
	run -0 pisb docker cmp compose -- exec -T web sh -c 'echo to-the-log > /proc/1/fd/1'
	run -0 pisb docker cmp compose -- logs web
	[[ $output == *to-the-log* ]]
	run -0 pisb docker cmp compose -- down
}

@test "a compose file or option that reaches a host file is refused before compose runs, naming it" {
	pisb write cmp evil/compose.yaml --mkdir --content 'services:
  evil:
    image: busybox
    command: ["/bin/cat", "/host/etc/shadow"]
    volumes:
      - /etc:/host/etc
' >/dev/null
	run -2 --separate-stderr pisb docker cmp compose -- -f evil/compose.yaml up -d
	[[ $stderr == *"'services.evil.volumes[0]': bind source '/etc' is outside the workspace '/workspace'"* ]] || { echo "$stderr"; false; }
	# nothing of it was created
	run -0 pisb docker cmp ps -- -a --format '{{.Names}}'
	[[ $output != *evil* ]]
	# compose v1 reads a file without services: as its legacy format (each
	# top-level key a service): refused, not passed uninspected
	pisb write cmp legacy/docker-compose.yml --mkdir --content 'evil:
  image: busybox
  privileged: true
  volumes:
    - /etc:/host/etc
' >/dev/null
	run -2 --separate-stderr pisb docker cmp compose -- -f legacy/docker-compose.yml run --rm evil true
	[[ $stderr == *"'evil' is refused: not a top-level key of a compose file with services"* ]] || { echo "$stderr"; false; }
	run -2 --separate-stderr pisb docker cmp compose -- -f /etc/compose.yaml up -d
	[[ $stderr == *"'--file /etc/compose.yaml': path '/etc/compose.yaml' is outside the workspace"* ]]
	run -2 --separate-stderr pisb docker cmp compose -- --project-directory / up -d
	[[ $stderr == *"'--project-directory /': path '/' is outside the workspace"* ]]
	run -2 --separate-stderr pisb docker cmp compose -- run --rm -v /etc:/host web true
	[[ $stderr == *"docker compose run: '-v': bind source '/etc' is outside the workspace"* ]]
	run -2 --separate-stderr pisb docker cmp compose -- exec --privileged web true
	[[ $stderr == *"docker compose exec: '--privileged' is refused"* ]]
	run -2 --separate-stderr pisb docker cmp compose -- -H unix:///var/run/docker.sock ps
	[[ $stderr == *"'-H' is refused: the client stays pinned to the sandbox's own daemon"* ]]
}
