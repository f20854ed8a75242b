#!/usr/bin/env bats
# pisb docker's argument policy (common/docker_policy.c, pisb-docker(1)
# "Argument policy"): one for every driver, applied before the driver's
# docker slot.  A refused argument exits 2 naming it and never reaches the
# daemon; what passes reaches it rewritten (the fake sbx of tests/fakes/sbx
# logs the argv its fake daemon got).
load helpers

SOCK=unix:///var/run/docker.sock

setup() {
	pisb_test_setup
	require_cmd jq
	require_cmd python3
	mkdir -p "$PI_SANDBOX_HOME"
	chmod 700 "$PI_SANDBOX_HOME"
	export HOME=$BATS_TEST_TMPDIR/home
	mkdir -p "$HOME"
	SBXS=$HOME/.local/share/docker-sandboxes-fake
	export PATH="$TOP/tests/fakes:$PATH"
}

teardown() {
	for n in $(pisb list -q 2>/dev/null); do pisb destroy "$n" --confirm "$n" >/dev/null 2>&1 || true; done
}

# a record of a sbx sandbox (the policy runs before the driver: no VM needed)
fake_record() {
	mkdir -p "$PI_SANDBOX_HOME/instances/$1"
	jq -n --arg n "$1" '{version:1,name:$n,driver:"sbx",createdAt:1,template:null,owner:{pid:0,start:0},sessionId:null,remote:null,config:{version:1}}' \
		> "$PI_SANDBOX_HOME/instances/$1/record.json"
}

# refused VERB NAMED ARG...: exit 2, stderr names NAMED, nothing ran
refused() {
	local verb=$1 named=$2
	shift 2
	run -2 --separate-stderr pisb docker box "$verb" -- "$@"
	if [[ $stderr != *"'$named'"* ]]; then
		printf 'docker %s %s\nwant the message to name: %s\ngot: %s\n' "$verb" "$*" "$named" "$stderr"
		return 1
	fi
	if [ -e "$SBXS/calls.log" ]; then
		echo "sbx ran for: docker $verb $*"
		return 1
	fi
}

# the argv the fake daemon got last, after -H SOCK
last_docker() { jq -c '.argv[2:]' "$SBXS/docker.log" | tail -1; }

@test "run: every sandbox-breaking option is refused, naming it" {
	fake_record box
	refused run --privileged --privileged alpine
	refused run --privileged --privileged=true alpine
	refused run --privileged -it --privileged alpine
	refused run "--pid host" --pid host alpine
	refused run "--pid host" --pid=host alpine
	refused run "--ipc host" --ipc=host alpine
	refused run "--uts host" --uts host alpine
	refused run "--userns host" --userns=host alpine
	refused run "--cgroupns host" --cgroupns=host alpine
	refused run "--network host" --network host alpine
	refused run "--net host" --net=host alpine
	refused run "--network name=host,alias=x" --network name=host,alias=x alpine
	refused run "--device /dev/kvm" --device /dev/kvm alpine
	refused run "--device-cgroup-rule c 1:3 rwm" --device-cgroup-rule "c 1:3 rwm" alpine
	refused run "--gpus all" --gpus all alpine
	refused run "--cgroup-parent /" --cgroup-parent / alpine
	refused run --use-api-socket --use-api-socket alpine
	refused run "--cap-add ALL" --cap-add ALL alpine
	refused run "--cap-add SYS_ADMIN" --cap-add SYS_ADMIN alpine
	refused run "--cap-add cap_sys_ptrace" --cap-add=cap_sys_ptrace alpine
	refused run "--cap-add NET_ADMIN" --cap-add CHOWN,NET_ADMIN alpine
	refused run "--security-opt seccomp=unconfined" --security-opt seccomp=unconfined alpine
	refused run "--security-opt seccomp:unconfined" --security-opt seccomp:unconfined alpine
	refused run "--security-opt seccomp=/workspace/allow-all.json" --security-opt seccomp=/workspace/allow-all.json alpine
	refused run "--security-opt apparmor=unconfined" --security-opt apparmor=unconfined alpine
	refused run "--security-opt label=disable" --security-opt label=disable alpine
	refused run "--security-opt label:disable" --security-opt label:disable alpine
	refused run "--security-opt systempaths=unconfined" --security-opt systempaths=unconfined alpine
	refused run "--security-opt writable-cgroups=true" --security-opt writable-cgroups=true alpine
	refused run -H -H tcp://10.0.0.1:2375 alpine
	refused run --host --host=unix:///host.sock alpine
	refused run --context --context host alpine
	# an option pisb does not know: its arity is unknown, so it is refused
	refused run --frobnicate --frobnicate x alpine
	refused run -Z -Z alpine
	# a value is still a value in a cluster, attached, after '='
	refused run "--pid host" -it --pid host alpine
	refused run "--security-opt seccomp=unconfined" -d --security-opt=seccomp=unconfined alpine
	# a boolean with a value that is not one
	refused run "--privileged=maybe" --privileged=maybe alpine
	# a value missing at the end
	refused run "--network" --network
}

@test "binds and mounts outside the workspace are refused; named volumes are not binds" {
	fake_record box
	refused run -v -v /:/host alpine
	refused run -v -v /etc:/x:ro alpine
	refused run -v -v/var/run/docker.sock:/s alpine
	refused run -v -dv/:/h alpine
	refused run -v -itv /root:/r alpine
	refused run -v --volume=/home:/h alpine
	refused run -v -v ../x:/x alpine
	refused run -v -v /workspace/../etc:/x alpine
	refused run -v -v /workspace2:/x alpine
	refused run -v -v ./a/../../b:/x alpine
	# other spellings of a host path: //, /./, a trailing /., .. through the workspace
	refused run -v -v //etc:/x alpine
	refused run -v -v /./etc/:/x alpine
	refused run -v -v //workspace//..//etc:/x alpine
	refused run -v -v /workspace/./../root/.ssh:/x alpine
	refused run -v -v /workspace/..:/x alpine
	refused run --mount --mount type=bind,src=//workspace/../etc/.,dst=/h alpine
	refused build //workspace/.. //workspace/..
	refused import /workspace/../etc/shadow /workspace/../etc/shadow
	refused run --mount --mount type=bind,source=/,target=/h alpine
	refused run --mount --mount type=bind,src=/etc,dst=/h,readonly alpine
	refused run --mount --mount '"type=bind","source=/etc",target=/h' alpine
	refused run "--mount volume-opt=device" --mount type=volume,target=/h,volume-opt=type=none,volume-opt=o=bind,volume-opt=device=/etc alpine
	run -2 --separate-stderr pisb docker box run -- -v /etc:/x alpine
	[[ $stderr == *"bind source '/etc' is outside the workspace '/workspace'"* ]]
	# a relative anonymous or named volume is not a bind: refused only
	# when it is malformed
	refused run "-v a:b:c:d" -v a:b:c:d alpine
}

@test "build, exec and compose: contexts, files and privileges are confined" {
	fake_record box
	refused build / /
	refused build ../.. ../..
	refused build /etc --no-cache /etc
	run -2 --separate-stderr pisb docker box build -- -t x /srv
	[[ $stderr == *"docker build: build context '/srv' is outside the workspace '/workspace'"* ]]
	refused build "--file /etc/Dockerfile" -f /etc/Dockerfile .
	refused build "--build-context x=/etc" --build-context x=/etc .
	refused build "--build-context x=oci-layout:///srv/img" --build-context x=oci-layout:///srv/img .
	refused build "--secret id=a,src=/etc/shadow" --secret id=a,src=/etc/shadow .
	refused build "--output type=local,dest=/tmp/out" -o type=local,dest=/tmp/out .
	refused build "--output /tmp/out" --output /tmp/out .
	refused build "--allow security.insecure" --allow security.insecure .
	refused build "--network host" --network=host .
	refused build "--cgroup-parent /" --cgroup-parent / .
	refused build -H -H tcp://x .
	refused exec --privileged --privileged web sh
	refused exec --privileged -it --privileged web sh
	refused exec --frobnicate --frobnicate web sh
	refused compose "--file /etc/compose.yml" -f /etc/compose.yml up -d
	refused compose "--project-directory /" --project-directory / up
	refused compose "--env-file /etc/environment" --env-file /etc/environment up
	refused compose "-f" up -f /etc/compose.yml
	refused compose --privileged exec --privileged web sh
	refused compose -v run -v /:/h web sh
	refused compose "--cap-add SYS_ADMIN" run --cap-add SYS_ADMIN web
	# import: a file in the workspace or standard input, never a URL or a host path
	refused import /etc/shadow /etc/shadow img:1
	refused import ../../etc/shadow -c 'CMD ["sh"]' ../../etc/shadow
	refused import http://example.com/rootfs.tar http://example.com/rootfs.tar
	refused import --privileged --privileged - img:1
	# global options are refused on every verb
	refused ps -H -H tcp://x
	refused logs --host --host=tcp://x web
	refused images --context --context=host
}

@test "what passes reaches the daemon: clusters split, label, restart, nothing else changed" {
	run -0 pisb create box --driver sbx
	ws=$PI_SANDBOX_HOME/instances/box/workspace
	mkdir -p "$ws/app" "$ws/data"
	run -0 pisb docker box run -- -dp 18080:80 alpine
	[ "$(last_docker)" = '["run","-d","-p","18080:80","--label","com.pi.sandbox=true","--restart","unless-stopped","alpine"]' ]
	# the image ends the options: the command's own words are untouched
	run -0 pisb docker box run -- --rm -it --cpuset-cpus 0 -e A=b alpine sh -c --privileged
	[ "$(last_docker)" = '["run","--rm","-i","-t","--cpuset-cpus","0","-e","A=b","--label","com.pi.sandbox=true","alpine","sh","-c","--privileged"]' ]
	# '--' ends the options; the label goes before it
	run -0 pisb docker box run -- -d --name web -- alpine sleep 9
	[ "$(last_docker)" = '["run","-d","--name","web","--label","com.pi.sandbox=true","--restart","unless-stopped","--","alpine","sleep","9"]' ]
	# a restart policy of the caller's is kept; --rm gets none
	run -0 pisb docker box run -- -d --restart=no alpine
	[ "$(last_docker)" = '["run","-d","--restart=no","--label","com.pi.sandbox=true","alpine"]' ]
	run -0 pisb docker box run -- -d --rm alpine
	[ "$(last_docker)" = '["run","-d","--rm","--label","com.pi.sandbox=true","alpine"]' ]
	# the caller's own com.pi.sandbox label comes before pisb's, which wins
	run -0 pisb docker box run -- -l com.pi.sandbox=false alpine
	[ "$(last_docker)" = '["run","-l","com.pi.sandbox=false","--label","com.pi.sandbox=true","alpine"]' ]
	# false booleans and docker's default capabilities pass
	run -0 pisb docker box run -- --privileged=false --cap-drop ALL --cap-add CHOWN --cap-add=cap_net_bind_service alpine
	[ "$(last_docker)" = '["run","--privileged=false","--cap-drop","ALL","--cap-add","CHOWN","--cap-add=cap_net_bind_service","--label","com.pi.sandbox=true","alpine"]' ]
	# workspace binds, named volumes, IPv6 and UDP ports pass
	run -0 pisb docker box run -- -v ./data:/data -v "$ws/app:/app:rw" -v cache:/cache -v /anon --mount "type=bind,source=$ws/app,target=/m" -p "[::]:18081:81/udp" -p 127.0.0.1::82 alpine
	[ "$(last_docker)" = "[\"run\",\"-v\",\"./data:/data\",\"-v\",\"$ws/app:/app:rw\",\"-v\",\"cache:/cache\",\"-v\",\"/anon\",\"--mount\",\"type=bind,source=$ws/app,target=/m\",\"-p\",\"[::]:18081:81/udp\",\"-p\",\"127.0.0.1::82\",\"--label\",\"com.pi.sandbox=true\",\"alpine\"]" ]
	# a publish spec that is not one is refused before the daemon
	run -2 --separate-stderr pisb docker box run -- -p 99999:80 alpine
	[[ $stderr == *"'99999:80' is not a port to publish"* ]]
	run -2 --separate-stderr pisb docker box run -- -p '[::1:80' alpine
	[[ $stderr == *"is not a port to publish"* ]]
	# exec, build, compose
	run -0 pisb docker box run -- -d --name web2 alpine sleep 9
	run -0 pisb docker box exec -- -it --user=0 web2 sh -c --privileged
	[ "$(last_docker)" = '["exec","-i","-t","--user=0","web2","sh","-c","--privileged"]' ]
	run -0 pisb docker box build -- -t app:1 app --no-cache
	[ "$(last_docker)" = '["build","-t","app:1","app","--no-cache"]' ]
	run -0 pisb docker box import -- -c 'CMD ["/bin/sh"]' --message=m rootfs.tar img:1
	[ "$(last_docker)" = '["import","-c","CMD [\"/bin/sh\"]","--message=m","rootfs.tar","img:1"]' ]
	printf 'services:\n  web:\n    image: alpine\n' > "$ws/compose.yaml"
	run -0 pisb docker box compose -- -f compose.yaml up -d
	# (the driver asks compose ps for the ports after up)
	[ "$(jq -c '.argv[2:]' "$SBXS/docker.log" | grep '"up"' | tail -1)" = '["compose","-f","compose.yaml","up","-d"]' ]
}

@test "a read-only workspace: every workspace bind gets ro" {
	printf 'driver: sbx\nsbx: {workspaceReadOnly: true}\n' > "$BATS_TEST_TMPDIR/ro.yaml"
	run -0 pisb create box -f "$BATS_TEST_TMPDIR/ro.yaml"
	ws=$PI_SANDBOX_HOME/instances/box/workspace
	run -0 pisb docker box run -- -v "$ws:/w" -v "$ws/a:/a:rw" -v ./b:/b:rw,z -v cache:/cache --mount "type=bind,src=$ws,dst=/m,readonly=false" --mount type=volume,target=/v alpine
	[ "$(last_docker)" = "[\"run\",\"-v\",\"$ws:/w:ro\",\"-v\",\"$ws/a:/a:ro\",\"-v\",\"./b:/b:z,ro\",\"-v\",\"cache:/cache\",\"--mount\",\"type=bind,src=$ws,dst=/m,readonly\",\"--mount\",\"type=volume,target=/v\",\"--label\",\"com.pi.sandbox=true\",\"alpine\"]" ]
	# the sbx workspace lives at its host path inside: /workspace is outside it
	run -2 --separate-stderr pisb docker box run -- -v /workspace:/w alpine
	[[ $stderr == *"bind source '/workspace' is outside the workspace '$ws'"* ]]
}

@test "DOCKER_* and COMPOSE_* are refused in config env and exec --env, naming the key" {
	cd "$BATS_TEST_TMPDIR"
	printf 'env:\n  DOCKER_HOST: tcp://10.0.0.1:2375\n' > a.yaml
	run -2 --separate-stderr pisb validate -f a.yaml
	[[ $stderr == "fatal: "*"env.DOCKER_HOST: docker's and compose's own variables (DOCKER_*, COMPOSE_*) are refused"* ]]
	printf 'services:\n  web:\n    command: sleep 9\n    env:\n      COMPOSE_FILE: /etc/x.yml\n' > b.yaml
	run -2 --separate-stderr pisb validate -f b.yaml
	[[ $stderr == *"services.web.env.COMPOSE_FILE: docker's and compose's own variables"* ]]
	printf 'env:\n  DOCKERISH: ok\n  MY_DOCKER_HOST: ok\n' > c.yaml
	run -0 pisb validate -f c.yaml
	fake_record box
	run -2 --separate-stderr pisb exec box --env DOCKER_HOST=tcp://10.0.0.1:2375 -- true
	[[ $stderr == *"--env 'DOCKER_HOST': docker's and compose's own variables (DOCKER_*, COMPOSE_*) are refused"* ]]
	run -2 --separate-stderr pisb exec box -e COMPOSE_PROJECT_NAME=x -- true
	[[ $stderr == *"--env 'COMPOSE_PROJECT_NAME'"* ]]
	[ ! -e "$SBXS/calls.log" ]
}

@test "compose files: what run refuses is refused in a service, naming the file and key" {
	run -0 pisb create box --driver sbx
	ws=$PI_SANDBOX_HOME/instances/box/workspace
	mkdir -p "$ws/app"
	# cbad KEY YAML-OF-SERVICE-web: compose up refused, naming KEY
	cbad() {
		printf 'services:\n  web:\n    image: alpine\n%s\n' "$2" > "$ws/compose.yaml"
		run -2 --separate-stderr pisb docker box compose -- up -d
		if [[ $stderr != *"'compose.yaml'"*"'$1'"* ]]; then
			printf 'want compose.yaml and %s named in: %s\n' "$1" "$stderr"
			return 1
		fi
	}
	cbad services.web.privileged '    privileged: true'
	cbad services.web.network_mode '    network_mode: host'
	cbad services.web.pid '    pid: "host"'
	cbad services.web.ipc '    ipc: host'
	cbad services.web.userns_mode '    userns_mode: host'
	cbad services.web.devices '    devices: ["/dev/kvm:/dev/kvm"]'
	cbad services.web.cgroup_parent '    cgroup_parent: /'
	cbad "--cap-add SYS_ADMIN" '    cap_add: [CHOWN, SYS_ADMIN]'
	cbad "--security-opt seccomp=unconfined" '    security_opt: ["seccomp=unconfined"]'
	cbad "services.web.volumes[0]" '    volumes: ["/:/host"]'
	cbad "services.web.volumes[1]" '    volumes: ["./app:/app", "../..:/up"]'
	cbad "services.web.volumes[0]" '    volumes: [{type: bind, source: /etc, target: /x}]'
	cbad "services.web.volumes[0]" '    volumes: ["~/.ssh:/s"]'
	cbad services.web.build '    build: /'
	cbad services.web.build.context '    build: {context: ../..}'
	cbad services.web.build.dockerfile '    build: {context: app, dockerfile: /etc/Dockerfile}'
	cbad "services.web.env_file[0]" '    env_file: [/etc/passwd]'
	cbad services.web.extends.file '    extends: {file: /etc/other.yaml, service: x}'
	cbad services.web.privileged '    privileged: ${PRIV}'
	cbad "services.web.volumes[0]" '    volumes: ["${HOME}:/h"]'
	cbad "services.web.ports[0]" '    ports: ["99999:80"]'
	# the top level: include, a volume over a host path, the host network
	printf 'include: [/etc/x.yaml]\nservices:\n  web: {image: alpine}\n' > "$ws/compose.yaml"
	run -2 --separate-stderr pisb docker box compose -- up
	[[ $stderr == *"'include' is refused"* ]]
	printf 'services:\n  web: {image: alpine}\nvolumes:\n  v:\n    driver_opts: {type: none, o: bind, device: /etc}\n' > "$ws/compose.yaml"
	run -2 --separate-stderr pisb docker box compose -- up
	[[ $stderr == *"'volumes.v.driver_opts.device' is refused"* ]]
	printf 'services:\n  web: {image: alpine, networks: [h]}\nnetworks:\n  h: {external: true, name: host}\n' > "$ws/compose.yaml"
	run -2 --separate-stderr pisb docker box compose -- up
	[[ $stderr == *"'networks.h' is refused"* ]]
	printf 'services:\n  web: {image: alpine}\nsecrets:\n  s: {file: /etc/shadow}\n' > "$ws/compose.yaml"
	run -2 --separate-stderr pisb docker box compose -- up
	[[ $stderr == *"'secrets.s.file': file '/etc/shadow' is outside the workspace"* ]]
	# compose v1's legacy format (services at the top level) is not inspected
	printf 'web:\n  image: alpine\n  privileged: true\n' > "$ws/compose.yaml"
	run -2 --separate-stderr pisb docker box compose -- up
	[[ $stderr == *"'web' is refused: not a top-level key of a compose file with services"* ]]
	printf 'version: {image: alpine, privileged: true}\n' > "$ws/compose.yaml"
	run -2 --separate-stderr pisb docker box compose -- up
	[[ $stderr == *"'version' is refused: not a string"* ]]
	printf 'services: {}\nsecrets: {image: alpine, privileged: true}\n' > "$ws/compose.yaml"
	run -2 --separate-stderr pisb docker box compose -- up
	[[ $stderr == *"'services' is refused: missing or empty, and no version"* ]]
	# anchors are refused (pisb reads each key once), YAML errors name the line
	printf 'x: &a {privileged: true}\nservices:\n  web: *a\n' > "$ws/compose.yaml"
	run -2 --separate-stderr pisb docker box compose -- up
	[[ $stderr == *"compose.yaml:1:4: anchors and aliases are not allowed"* ]]
	printf 'services:\n  web:\n    privileged: false\n    privileged: true\n' > "$ws/compose.yaml"
	run -2 --separate-stderr pisb docker box compose -- up
	[[ $stderr == *"duplicate key 'privileged'"* ]]
	# none of it reached the daemon
	run -1 grep -F '"compose"' "$SBXS/calls.log"
}

@test "compose files: -f files, the default's override and --project-directory are inspected; '-f -' is refused" {
	run -0 pisb create box --driver sbx
	ws=$PI_SANDBOX_HOME/instances/box/workspace
	mkdir -p "$ws/sub"
	printf 'services:\n  web: {image: alpine}\n' > "$ws/compose.yaml"
	printf 'services:\n  web: {privileged: true}\n' > "$ws/compose.override.yaml"
	run -2 --separate-stderr pisb docker box compose -- up -d
	[[ $stderr == *"'compose.override.yaml'"*"'services.web.privileged' is refused"* ]]
	rm "$ws/compose.override.yaml"
	printf 'services:\n  db: {image: alpine, network_mode: host}\n' > "$ws/other.yml"
	run -2 --separate-stderr pisb docker box compose -- -f compose.yaml -f other.yml up -d
	[[ $stderr == *"'other.yml'"*"'services.db.network_mode' is refused"* ]]
	run -2 --separate-stderr pisb docker box compose -- --file=other.yml up -d
	[[ $stderr == *"'services.db.network_mode' is refused"* ]]
	printf 'services:\n  s: {image: alpine, volumes: ["..:/ws", "../..:/up"]}\n' > "$ws/sub/compose.yml"
	run -2 --separate-stderr pisb docker box compose -- --project-directory sub up -d
	[[ $stderr == *"'services.s.volumes[1]': bind source '$ws/sub/../..' is outside the workspace"* ]]
	run -2 --separate-stderr pisb docker box compose -- -f - up -d
	[[ $stderr == *"'-f -' is refused"* ]]
	# down, ps, logs do not create anything: not inspected
	run -0 pisb docker box compose -- -f other.yml down
}

@test "compose files: what passes runs, the default file found named with -f" {
	run -0 pisb create box --driver sbx
	ws=$PI_SANDBOX_HOME/instances/box/workspace
	mkdir -p "$ws/app" "$ws/data"
	cat > "$ws/compose.yaml" <<-'EOF2'
	services:
	  web:
	    image: alpine
	    build: {context: app, dockerfile: Dockerfile}
	    volumes: ["./data:/data", "cache:/cache", {type: bind, source: ./app, target: /app}]
	    ports: ["127.0.0.1:18080:3000", "[::]:18081:81/udp"]
	    cap_add: [NET_BIND_SERVICE]
	    privileged: false
	    env_file: .env
	    command: sh -c 'echo $$HOME'
	  db:
	    image: alpine
	    network_mode: "service:web"
	volumes:
	  cache: {}
	EOF2
	run -0 pisb docker box compose -- up -d
	# named, a COMPOSE_FILE in the project's .env cannot swap it
	[ "$(jq -c '.argv[2:]' "$SBXS/docker.log" | grep '"up"' | tail -1)" = '["compose","-f","compose.yaml","up","-d"]' ]
	# the caller's -f files stay as given
	cp "$ws/compose.yaml" "$ws/c2.yml"
	run -0 pisb docker box compose -- --file=c2.yml up -d
	[ "$(jq -c '.argv[2:]' "$SBXS/docker.log" | grep '"up"' | tail -1)" = '["compose","--file=c2.yml","up","-d"]' ]
}

@test "compose files are read inside the sandbox: a link to a host file is not followed on the host" {
	run -0 pisb create box --driver sbx
	ws=$PI_SANDBOX_HOME/instances/box/workspace
	printf 'services:\n  web: {image: alpine, privileged: true}\n' > "$BATS_TEST_TMPDIR/host-only.yaml"
	chmod 600 "$BATS_TEST_TMPDIR/host-only.yaml"
	ln -s "$BATS_TEST_TMPDIR/host-only.yaml" "$ws/compose.yaml"
	# the sandbox cannot see the host file: for pisb there is no compose
	# file (read as the host's root, the link would have been refused)
	run -1 --separate-stderr pisb docker box compose -- up -d
	[[ $stderr != *"privileged"* ]]
	[[ $stderr == *"no configuration file provided"* ]]
}
