#!/usr/bin/env bats
# sandbox.yaml validation (pisb.yaml(5)): one bad file per rule, each with its
# exact message and exit 2; the examples; the normalised JSON and its
# round trip.
load helpers

setup() {
	pisb_test_setup
	cd "$BATS_TEST_TMPDIR"
}

# The file under test, written from stdin.
cfg() { cat > sandbox.yaml; }

# Validate sandbox.yaml; expect exit 2, nothing on stdout and exactly
# "fatal: $1" on stderr.
rejects() {
	run -2 --separate-stderr pisb validate -f sandbox.yaml
	if [ "$stderr" != "fatal: $1" ]; then
		printf 'want: fatal: %s\ngot:  %s\n' "$1" "$stderr"
		return 1
	fi
	[ -z "$output" ]
}

# Validate sandbox.yaml; expect exit 0 and JSON on stdout.
accepts() {
	run -0 --separate-stderr pisb validate -f sandbox.yaml
	jq -e . <<<"$output" >/dev/null
}

# ---- YAML safety and syntax ------------------------------------------------

@test "syntax errors report FILE:LINE:COL and libyaml's problem" {
	cfg <<<$'version: 1\ndriver: local: vm\n'
	rejects "sandbox.yaml:2:14: mapping values are not allowed in this context"
}

@test "a tab in indentation is a syntax error with its position" {
	printf 'services:\n\tweb: {}\n' > sandbox.yaml
	rejects "sandbox.yaml:2:1: found character that cannot start any token"
}

@test "invalid UTF-8 is reported with its position" {
	printf 'version: 1\nenv: {A: "\xff"}\n' > sandbox.yaml
	rejects "sandbox.yaml:2:11: invalid leading UTF-8 octet"
}

@test "a file over 1 MiB is rejected before parsing" {
	{ echo 'setup:'; head -c 1100000 /dev/zero | tr '\0' x | fold -w 100 | sed 's/^/  - /'; } > sandbox.yaml
	rejects "sandbox.yaml: larger than 1 MiB"
}

@test "a file of exactly 1 MiB is still read" {
	{ printf 'version: 1\n#'; head -c $((1048576 - 13)) /dev/zero | tr '\0' x; echo; } > sandbox.yaml
	[ "$(stat -c %s sandbox.yaml)" -eq 1048576 ]
	accepts
}

@test "anchors are rejected" {
	cfg <<'YAML'
env:
  A: &greeting hello
YAML
	rejects "sandbox.yaml:2:6: anchors and aliases are not allowed"
}

@test "aliases (a billion laughs) are rejected at the first anchor" {
	cfg <<'YAML'
setup: [lol]
x: &a [*b, *b, *b, *b, *b, *b, *b, *b, *b]
YAML
	rejects "sandbox.yaml:2:4: anchors and aliases are not allowed"
}

@test "an alias is rejected even without an anchor" {
	cfg <<<'setup: *cmds'
	rejects "sandbox.yaml:1:8: anchors and aliases are not allowed"
}

@test "duplicate keys are rejected with their path" {
	cfg <<'YAML'
version: 1
profile: small
profile: large
YAML
	rejects "sandbox.yaml: profile: duplicate key"
}

@test "duplicate keys deep inside are rejected with their path" {
	cfg <<'YAML'
services:
  web:
    command: x
    env:
      A: "1"
      A: "2"
YAML
	rejects "sandbox.yaml: services.web.env.A: duplicate key"
}

@test "duplicate keys in JSON input are rejected" {
	cfg <<<'{"services": {"web": {"command": "a"}, "web": {"command": "b"}}}'
	rejects "sandbox.yaml: services.web: duplicate key"
}

@test "application tags are rejected" {
	cfg <<<'env: {A: !!python/object:os.system ls}'
	rejects "sandbox.yaml:1:10: tag '!!python/object:os.system' is not allowed"
}

@test "local tags are rejected" {
	cfg <<<'setup: !cmds [a]'
	rejects "sandbox.yaml:1:8: tag '!cmds' is not allowed"
}

@test "a standard tag must fit its value" {
	cfg <<<'diskGiB: !!int lots'
	rejects "sandbox.yaml:1:10: 'lots' does not fit tag '!!int'"
}

@test "standard tags are accepted (!!str makes a string)" {
	cfg <<'YAML'
diskGiB: !!int 10
env: !!map {N: !!str 10}
YAML
	accepts
	jq -e '.diskGiB == 10 and .env.N == "10"' <<<"$output"
}

@test "multiple documents are rejected" {
	cfg <<'YAML'
version: 1
---
version: 1
YAML
	rejects "sandbox.yaml:2:1: multiple documents are not allowed"
}

@test "mapping keys must be scalars" {
	cfg <<'YAML'
? [a, b]
: c
YAML
	rejects "sandbox.yaml:1:3: mapping keys must be scalars"
}

@test "nesting is limited to 64 levels" {
	printf 'env: %s%s\n' "$(printf '[%.0s' {1..70})" "$(printf ']%.0s' {1..70})" > sandbox.yaml
	rejects "sandbox.yaml:1:69: nested deeper than 64 levels"
}

@test "NUL bytes in strings are rejected" {
	cfg <<<'workspace: "/work\0space"'
	rejects "sandbox.yaml: workspace: must not contain NUL bytes"
}

@test "the top level must be a mapping" {
	cfg <<<'- version: 1'
	rejects "sandbox.yaml: the top level must be a mapping"
}

@test "a missing file exits 3" {
	run -3 --separate-stderr pisb validate -f nosuch.yaml
	[ "$stderr" = "fatal: nosuch.yaml: No such file or directory" ]
}

@test "an empty file is the default config" {
	: > sandbox.yaml
	accepts
	jq -e '.driver == "local" and .image == "host" and .workspace == "/workspace"' <<<"$output"
}

@test "JSON is accepted as YAML" {
	cfg <<'YAML'
{"version": 1, "driver": "local", "profile": "large",
 "services": {"web": {"command": "python3 -m http.server $PORT", "port": 8080, "preview": true}}}
YAML
	accepts
	jq -e '.profile == "large" and .services.web.port == 8080' <<<"$output"
}

# ---- top level ---------------------------------------------------------------

@test "unknown top-level key names the expected ones" {
	cfg <<<'profiles: small'
	rejects "sandbox.yaml: profiles: unknown key (expected one of: version, driver, profile, resources, diskGiB, image, workspace, setup, resume, services, network, preview, env, metadata, opensandbox, sbx, docker, project)"
}

@test "version must be 1" {
	cfg <<<'version: 2'
	rejects "sandbox.yaml: version: must be 1"
}

@test "version must be an integer" {
	cfg <<<'version: "1"'
	rejects "sandbox.yaml: version: must be an integer"
}

@test "driver must be local, vm, opensandbox or sbx" {
	cfg <<<'driver: docker'
	rejects "sandbox.yaml: driver: must be one of: local, vm, opensandbox, sbx"
}

@test "a section for another driver is fine when driver is unset" {
	cfg <<'YAML'
sbx: {cpus: 2}
opensandbox: {domain: example.com, image: python:3.12}
YAML
	accepts
	jq -e '.driver == "local" and .sbx.cpus == 2 and .opensandbox.image == "python:3.12"' <<<"$output"
}

@test "profile must be one of the five" {
	cfg <<<'profile: huge'
	rejects "sandbox.yaml: profile: must be one of: tiny, small, medium, large, xlarge"
}

@test "resources.cpus must be 1-64" {
	cfg <<<'resources: {cpus: 65}'
	rejects "sandbox.yaml: resources.cpus: must be 1-64"
}

@test "resources.cpus must be an integer" {
	cfg <<<'resources: {cpus: 1.5}'
	rejects "sandbox.yaml: resources.cpus: must be an integer"
}

@test "resources.memoryGiB must be 1-1024" {
	cfg <<<'resources: {memoryGiB: 0}'
	rejects "sandbox.yaml: resources.memoryGiB: must be 1-1024"
}

@test "resources.pids must be 16-1000000" {
	cfg <<<'resources: {pids: 8}'
	rejects "sandbox.yaml: resources.pids: must be 16-1000000"
}

@test "resources has only cpus, memoryGiB and pids" {
	cfg <<<'resources: {disk: 3}'
	rejects "sandbox.yaml: resources.disk: unknown key (expected one of: cpus, memoryGiB, pids)"
}

@test "resources must be a mapping" {
	cfg <<<'resources: 4'
	rejects "sandbox.yaml: resources: must be a mapping"
}

@test "huge integers are out of range, not wrapped" {
	cfg <<<'resources: {cpus: 99999999999999999999999}'
	rejects "sandbox.yaml: resources.cpus: must be 1-64"
}

@test "diskGiB must be an integer >= 2" {
	cfg <<<'diskGiB: 1'
	rejects "sandbox.yaml: diskGiB: must be an integer >= 2"
}

@test "image must not be empty" {
	cfg <<<'image: ""'
	rejects "sandbox.yaml: image: must not be empty"
}

@test "a relative image is resolved against the YAML file's directory" {
	mkdir -p conf
	echo 'image: ../assets/./img' > conf/sandbox.yaml
	run -0 --separate-stderr pisb validate -f conf/sandbox.yaml
	jq -e --arg want "$BATS_TEST_TMPDIR/assets/img" '.image == $want' <<<"$output"
}

@test "workspace must be absolute" {
	cfg <<<'workspace: work'
	rejects "sandbox.yaml: workspace: must be an absolute path"
}

@test "workspace must not contain .." {
	cfg <<<'workspace: /srv/../etc'
	rejects "sandbox.yaml: workspace: must not contain '..'"
}

@test "workspace must not be /" {
	cfg <<<'workspace: //'
	rejects "sandbox.yaml: workspace: must not be /"
}

@test "workspace is normalised" {
	cfg <<<'workspace: /srv//work/./'
	accepts
	jq -e '.workspace == "/srv/work"' <<<"$output"
}

@test "setup must be a list" {
	cfg <<<'setup: make'
	rejects "sandbox.yaml: setup: must be a list"
}

@test "resume items must be strings" {
	cfg <<'YAML'
resume:
  - echo ok
  - {run: x}
YAML
	rejects "sandbox.yaml: resume[1]: must be a string"
}

@test "env names must be valid variable names" {
	cfg <<<'env: {1BAD: x}'
	rejects "sandbox.yaml: env.1BAD: invalid variable name (must match ^[A-Za-z_][A-Za-z0-9_]*\$)"
}

@test "env values must be scalars" {
	cfg <<<'env: {LIST: [a, b]}'
	rejects "sandbox.yaml: env.LIST: must be a string"
}

@test "env values that are numbers or booleans are kept as their text" {
	cfg <<<'env: {N: 007, B: true, F: 1.50}'
	accepts
	jq -e '.env == {"N": "007", "B": "true", "F": "1.50"}' <<<"$output"
}

@test "env values must not be null" {
	cfg <<<'env: {A: ~}'
	rejects "sandbox.yaml: env.A: must be a string"
}

@test "top-level env cannot use service references" {
	cfg <<<'env: {U: "${services.web.publicURL}"}'
	rejects "sandbox.yaml: env.U: \${services.NAME.publicURL} is only available in services.NAME.env"
}

@test "metadata must be a mapping of strings" {
	cfg <<<'metadata: {team: {a: b}}'
	rejects "sandbox.yaml: metadata.team: must be a string"
}

@test "network has only allowedHosts" {
	cfg <<<'network: {allowed: [a.com]}'
	rejects "sandbox.yaml: network.allowed: unknown key (expected one of: allowedHosts)"
}

@test "allowedHosts rejects URLs" {
	cfg <<<'network: {allowedHosts: [pypi.org, "https://example.com"]}'
	rejects "sandbox.yaml: network.allowedHosts[1]: must be a hostname or *.domain, not a URL"
}

@test "allowedHosts rejects ports out of range (host:port is an entry since ports are restricted)" {
	cfg <<<'network: {allowedHosts: ["example.com:0"]}'
	rejects "sandbox.yaml: network.allowedHosts[0]: the port after ':' must be 1-65535"
}

@test "allowedHosts rejects paths" {
	cfg <<<'network: {allowedHosts: [example.com/simple]}'
	rejects "sandbox.yaml: network.allowedHosts[0]: must be a hostname or *.domain (no path)"
}

@test "allowedHosts rejects a bare *" {
	cfg <<<'network: {allowedHosts: ["*"]}'
	rejects "sandbox.yaml: network.allowedHosts[0]: a bare '*' is not allowed (list hostnames or *.domain)"
}

@test "allowedHosts rejects invalid hostnames" {
	cfg <<<'network: {allowedHosts: [exa_mple.com]}'
	rejects "sandbox.yaml: network.allowedHosts[0]: must be a hostname or *.domain"
}

@test "allowedHosts rejects a wildcard that is not a leading *." {
	cfg <<<'network: {allowedHosts: ["api.*.com"]}'
	rejects "sandbox.yaml: network.allowedHosts[0]: must be a hostname or *.domain"
}

@test "allowedHosts accepts exact names and *.domain, lower-cased" {
	cfg <<<'network: {allowedHosts: [PyPI.org, "*.pythonhosted.org"]}'
	accepts
	jq -e '.network.allowedHosts == ["pypi.org", "*.pythonhosted.org"]' <<<"$output"
}

@test "review is rejected at the top level" {
	cfg <<<'review: true'
	rejects "sandbox.yaml: review: is not supported (Amp review is not available in pisb)"
}

# ---- services ----------------------------------------------------------------

@test "services must be a mapping" {
	cfg <<<'services: [web]'
	rejects "sandbox.yaml: services: must be a mapping"
}

@test "service names must match ^[a-z0-9][a-z0-9-]{0,31}\$" {
	cfg <<<'services: {Web: {command: x}}'
	rejects "sandbox.yaml: services.Web: invalid service name (must match ^[a-z0-9][a-z0-9-]{0,31}\$)"
}

@test "service names are at most 32 characters" {
	long=$(printf 'a%.0s' {1..33})
	cfg <<<"services: {$long: {command: x}}"
	rejects "sandbox.yaml: services.$long: invalid service name (must match ^[a-z0-9][a-z0-9-]{0,31}\$)"
}

@test "unknown service key names the expected ones" {
	cfg <<<'services: {web: {command: x, ports: 80}}'
	rejects "sandbox.yaml: services.web.ports: unknown key (expected one of: command, cwd, port, env, health, timeoutMs, preview, previews, platforms)"
}

@test "service command is required" {
	cfg <<<'services: {web: {port: 8080}}'
	rejects "sandbox.yaml: services.web.command: is required"
}

@test "service command must be a string" {
	cfg <<<'services: {web: {command: [python3, -m, http.server]}}'
	rejects "sandbox.yaml: services.web.command: must be a string"
}

@test "service cwd must be workspace-relative" {
	cfg <<<'services: {web: {command: x, cwd: /srv}}'
	rejects "sandbox.yaml: services.web.cwd: must be relative to the workspace (no leading /)"
}

@test "service cwd must not contain .." {
	cfg <<<'services: {web: {command: x, cwd: app/../../etc}}'
	rejects "sandbox.yaml: services.web.cwd: must not contain '..'"
}

@test "service port must be 1-65535" {
	cfg <<<'services: {web: {command: x, port: 70000}}'
	rejects "sandbox.yaml: services.web.port: must be 1-65535"
}

@test "service port must be an integer" {
	cfg <<<'services: {web: {command: x, port: "8080"}}'
	rejects "sandbox.yaml: services.web.port: must be an integer"
}

@test "fixed ports are unique across services" {
	cfg <<'YAML'
services:
  a: {command: x, port: 8080}
  b: {command: y, port: 8080}
YAML
	rejects "sandbox.yaml: services.b.port: 8080 is already used by services.a"
}

@test "service env cannot replace PORT" {
	cfg <<<'services: {web: {command: x, env: {PORT: "9000"}}}'
	rejects "sandbox.yaml: services.web.env.PORT: is set by pisb and cannot be replaced"
}

@test "service env cannot replace PUBLIC_URL" {
	cfg <<<'services: {web: {command: x, env: {PUBLIC_URL: "http://x"}}}'
	rejects "sandbox.yaml: services.web.env.PUBLIC_URL: is set by pisb and cannot be replaced"
}

@test "a publicURL reference to a missing service is rejected" {
	cfg <<<'services: {web: {command: x, env: {API: "${services.api.publicURL}"}}}'
	rejects "sandbox.yaml: services.web.env.API: references unknown service 'api'"
}

@test "a publicURL reference to a service without a preview is rejected" {
	cfg <<'YAML'
services:
  api: {command: x}
  web: {command: y, env: {API: "${services.api.publicURL}/v1"}}
YAML
	rejects "sandbox.yaml: services.web.env.API: references service 'api', which has no preview"
}

@test "other service references are rejected" {
	cfg <<<'services: {api: {command: x, preview: true}, web: {command: y, env: {P: "${services.api.port}"}}}'
	rejects "sandbox.yaml: services.web.env.P: unsupported reference '\${services.api.port}' (only \${services.NAME.publicURL})"
}

@test "reference cycles are rejected, naming the cycle" {
	cfg <<'YAML'
services:
  a: {command: x, preview: true, env: {B: "${services.b.publicURL}"}}
  b: {command: y, preview: true, env: {C: "${services.c.publicURL}"}}
  c: {command: z, preview: true, env: {A: "${services.a.publicURL}"}}
YAML
	rejects "sandbox.yaml: services: dependency cycle: a -> b -> c -> a"
}

@test "a service referencing itself is a cycle" {
	cfg <<<'services: {a: {command: x, preview: true, env: {SELF: "${services.a.publicURL}"}}}'
	rejects "sandbox.yaml: services: dependency cycle: a -> a"
}

@test "services come out in start order, dependencies first" {
	cfg <<'YAML'
services:
  web: {command: w, env: {API: "${services.api.publicURL}", AUTH: "${services.auth.publicURL}"}}
  api: {command: a, preview: true, env: {AUTH: "${services.auth.publicURL}"}}
  auth: {command: u, preview: true}
  docs: {command: d}
YAML
	accepts
	jq -e '[.services | keys_unsorted[]] == ["auth", "api", "web", "docs"]' <<<"$output"
}

@test "health must be /path, process or omitted" {
	cfg <<<'services: {web: {command: x, health: tcp}}'
	rejects "sandbox.yaml: services.web.health: must be /PATH (HTTP check), process, or omitted (TCP check)"
}

@test "health paths must not contain spaces" {
	cfg <<<'services: {web: {command: x, health: "/a b"}}'
	rejects "sandbox.yaml: services.web.health: must be /PATH (HTTP check), process, or omitted (TCP check)"
}

@test "timeoutMs must be 100-120000" {
	cfg <<<'services: {web: {command: x, timeoutMs: 50}}'
	rejects "sandbox.yaml: services.web.timeoutMs: must be 100-120000"
}

@test "preview must be true, false or a mapping" {
	cfg <<<'services: {web: {command: x, preview: "yes"}}'
	rejects "sandbox.yaml: services.web.preview: must be true, false or a mapping"
}

@test "preview url must be a path or an http(s) URL" {
	cfg <<<'services: {web: {command: x, preview: {url: "ftp://example.com/"}}}'
	rejects "sandbox.yaml: services.web.preview.url: must be a path starting with / or an http(s) URL"
}

@test "preview mapping has only url, title and description" {
	cfg <<<'services: {web: {command: x, preview: {path: /}}}'
	rejects "sandbox.yaml: services.web.preview.path: unknown key (expected one of: url, title, description)"
}

@test "previews links need a title" {
	cfg <<<'services: {web: {command: x, previews: [{url: /docs}]}}'
	rejects "sandbox.yaml: services.web.previews[0].title: is required"
}

@test "previews folders cannot be nested" {
	cfg <<'YAML'
services:
  web:
    command: x
    previews:
      - folder: Admin
        links:
          - folder: Deeper
            links: [{title: t}]
YAML
	rejects "sandbox.yaml: services.web.previews[0].links[0].folder: nested folders are not allowed"
}

@test "previews folder names are unique within a service" {
	cfg <<'YAML'
services:
  web:
    command: x
    previews:
      - {folder: Admin, links: [{title: a}]}
      - {folder: Admin, links: [{title: b}]}
YAML
	rejects "sandbox.yaml: services.web.previews[1].folder: 'Admin' is already used by services.web.previews[0]"
}

@test "previews folders need links" {
	cfg <<<'services: {web: {command: x, previews: [{folder: Admin, links: []}]}}'
	rejects "sandbox.yaml: services.web.previews[0].links: must not be empty"
}

@test "platforms must not be empty" {
	cfg <<<'services: {web: {command: x, platforms: []}}'
	rejects "sandbox.yaml: services.web.platforms: must not be empty"
}

@test "platforms are known operating systems" {
	cfg <<<'services: {web: {command: x, platforms: [linux, beos]}}'
	rejects "sandbox.yaml: services.web.platforms[1]: must be one of: linux, darwin, windows"
}

@test "a reference to a service its platforms exclude is rejected" {
	cfg <<'YAML'
services:
  mac: {command: x, preview: true, platforms: [darwin]}
  web: {command: y, env: {M: "${services.mac.publicURL}"}}
YAML
	rejects "sandbox.yaml: services.web.env.M: references service 'mac', which its platforms exclude (the guest is linux)"
}

@test "fixed ports of excluded services do not clash" {
	cfg <<'YAML'
services:
  mac: {command: x, port: 3000, platforms: [darwin]}
  web: {command: y, port: 3000}
YAML
	accepts
}

@test "review: true on a service is rejected" {
	cfg <<<'services: {web: {command: x, review: true}}'
	rejects "sandbox.yaml: services.web.review: is not supported (Amp review is not available in pisb)"
}

@test "AMP_THREAD_ID env overrides are rejected" {
	cfg <<<'services: {web: {command: x, env: {AMP_THREAD_ID: t-1}}}'
	rejects "sandbox.yaml: services.web.env.AMP_THREAD_ID: is an Amp-only variable and is not supported"
}

@test "Amp placeholders in previews are rejected" {
	cfg <<<'services: {web: {command: x, preview: {title: "Hi $AMP_USER_EMAIL"}}}'
	rejects "sandbox.yaml: services.web.preview.title: Amp placeholder '\$AMP_USER_EMAIL' is not supported"
}

@test "Amp placeholders in env values are rejected" {
	cfg <<<'services: {web: {command: x, env: {WHO: "${AMP_USER_EMAIL}"}}}'
	rejects "sandbox.yaml: services.web.env.WHO: Amp placeholder '\${AMP_USER_EMAIL}' is not supported"
}

# ---- opensandbox: --------------------------------------------------------------

@test "opensandbox.domain is required" {
	cfg <<<'opensandbox: {image: python:3.12}'
	rejects "sandbox.yaml: opensandbox.domain: is required"
}

@test "opensandbox.domain has no scheme" {
	cfg <<<'opensandbox: {domain: "https://os.example.com", image: python:3.12}'
	rejects "sandbox.yaml: opensandbox.domain: must be host[:port] without a scheme (use protocol: https)"
}

@test "opensandbox.domain port must be 1-65535" {
	cfg <<<'opensandbox: {domain: "os.example.com:99999", image: python:3.12}'
	rejects "sandbox.yaml: opensandbox.domain: port must be 1-65535"
}

@test "opensandbox.protocol must be http or https" {
	cfg <<<'opensandbox: {domain: os.example.com, protocol: grpc, image: python:3.12}'
	rejects "sandbox.yaml: opensandbox.protocol: must be http or https"
}

@test "an API key in the file is rejected" {
	cfg <<<'opensandbox: {domain: os.example.com, apiKey: s3cr3t, image: python:3.12}'
	rejects "sandbox.yaml: opensandbox.apiKey: API keys are not allowed in the config file; use apiKeyFile or OPEN_SANDBOX_API_KEY"
}

@test "opensandbox needs a source" {
	cfg <<<'opensandbox: {domain: os.example.com}'
	rejects "sandbox.yaml: opensandbox: needs exactly one of image, snapshotId, sandboxId"
}

@test "opensandbox sources are mutually exclusive" {
	cfg <<<'opensandbox: {domain: os.example.com, image: python:3.12, snapshotId: snap_1}'
	rejects "sandbox.yaml: opensandbox: image and snapshotId are mutually exclusive (give exactly one of image, snapshotId, sandboxId)"
}

@test "connect (sandboxId) rejects create-only fields" {
	cfg <<'YAML'
opensandbox:
  domain: os.example.com
  sandboxId: sbx_1
  volumes: [{name: data, mountPath: /data, pvc: {claimName: data}}]
YAML
	rejects "sandbox.yaml: opensandbox.volumes: is create-only and cannot be used with sandboxId (connect)"
}

@test "connect (sandboxId) rejects a second source" {
	cfg <<<'opensandbox: {domain: os.example.com, sandboxId: sbx_1, image: python:3.12}'
	rejects "sandbox.yaml: opensandbox: image and sandboxId are mutually exclusive (give exactly one of image, snapshotId, sandboxId)"
}

@test "opensandbox.timeoutSeconds must be a safe integer" {
	cfg <<<'opensandbox: {domain: os.example.com, image: x, timeoutSeconds: 9007199254740992}'
	rejects "sandbox.yaml: opensandbox.timeoutSeconds: must be a positive safe integer (1-9007199254740991)"
}

@test "opensandbox.timeoutSeconds must be positive" {
	cfg <<<'opensandbox: {domain: os.example.com, image: x, timeoutSeconds: 0}'
	rejects "sandbox.yaml: opensandbox.timeoutSeconds: must be a positive safe integer (1-9007199254740991)"
}

@test "opensandbox metadata keys under opensandbox.io/ are rejected" {
	cfg <<<'opensandbox: {domain: os.example.com, image: x, metadata: {opensandbox.io/owner: me}}'
	rejects "sandbox.yaml: opensandbox.metadata.opensandbox.io/owner: keys under opensandbox.io/ are reserved"
}

@test "opensandbox metadata cannot set pisb's own keys" {
	cfg <<<'opensandbox: {domain: os.example.com, image: x, metadata: {pi-session-id: abc}}'
	rejects "sandbox.yaml: opensandbox.metadata.pi-session-id: is set by pisb and cannot be replaced"
}

@test "opensandbox metadata values must be Kubernetes label values" {
	cfg <<<'opensandbox: {domain: os.example.com, image: x, metadata: {purpose: "Data Processing Sandbox"}}'
	rejects "sandbox.yaml: opensandbox.metadata.purpose: value must be a Kubernetes label value (at most 63 of A-Z a-z 0-9 - _ ., alphanumeric at both ends)"
}

@test "opensandbox volumes need exactly one of pvc, ossfs" {
	cfg <<<'opensandbox: {domain: os.example.com, image: x, volumes: [{name: data, mountPath: /data}]}'
	rejects "sandbox.yaml: opensandbox.volumes[0]: needs exactly one of pvc, ossfs"
}

@test "opensandbox volumes cannot have both pvc and ossfs" {
	cfg <<'YAML'
opensandbox:
  domain: os.example.com
  image: x
  volumes:
    - name: data
      mountPath: /data
      pvc: {claimName: data}
      ossfs: {bucket: bkt, endpoint: e, accessKeyId: i, accessKeySecret: s}
YAML
	rejects "sandbox.yaml: opensandbox.volumes[0]: pvc and ossfs are mutually exclusive (give exactly one)"
}

@test "opensandbox volume mountPath must be absolute" {
	cfg <<<'opensandbox: {domain: os.example.com, image: x, volumes: [{name: data, mountPath: data, pvc: {claimName: data}}]}'
	rejects "sandbox.yaml: opensandbox.volumes[0].mountPath: must be an absolute path"
}

@test "opensandbox volume names are DNS labels" {
	cfg <<<'opensandbox: {domain: os.example.com, image: x, volumes: [{name: My_Data, mountPath: /d, pvc: {claimName: d}}]}'
	rejects "sandbox.yaml: opensandbox.volumes[0].name: must be a DNS label (at most 63 lowercase letters, digits and '-', alphanumeric at both ends)"
}

@test "opensandbox volume names are unique" {
	cfg <<'YAML'
opensandbox:
  domain: os.example.com
  image: x
  volumes:
    - {name: data, mountPath: /a, pvc: {claimName: a}}
    - {name: data, mountPath: /b, pvc: {claimName: b}}
YAML
	rejects "sandbox.yaml: opensandbox.volumes[1].name: 'data' is already used by opensandbox.volumes[0]"
}

@test "opensandbox pvc needs claimName" {
	cfg <<<'opensandbox: {domain: os.example.com, image: x, volumes: [{name: d, mountPath: /d, pvc: {storage: 1Gi}}]}'
	rejects "sandbox.yaml: opensandbox.volumes[0].pvc.claimName: is required"
}

@test "opensandbox pvc storage is a Kubernetes quantity" {
	cfg <<<'opensandbox: {domain: os.example.com, image: x, volumes: [{name: d, mountPath: /d, pvc: {claimName: d, storage: 10GB}}]}'
	rejects "sandbox.yaml: opensandbox.volumes[0].pvc.storage: must be a size like 10Gi (a number with an optional Ki, Mi, Gi, Ti, Pi or Ei)"
}

@test "opensandbox ossfs needs accessKeySecret" {
	cfg <<<'opensandbox: {domain: os.example.com, image: x, volumes: [{name: d, mountPath: /d, ossfs: {bucket: bkt, endpoint: e, accessKeyId: i}}]}'
	rejects "sandbox.yaml: opensandbox.volumes[0].ossfs.accessKeySecret: is required"
}

@test "opensandbox ossfs options have no leading dash" {
	cfg <<<'opensandbox: {domain: os.example.com, image: x, volumes: [{name: d, mountPath: /d, ossfs: {bucket: bkt, endpoint: e, accessKeyId: i, accessKeySecret: s, options: [-o allow_other]}}]}'
	rejects "sandbox.yaml: opensandbox.volumes[0].ossfs.options[0]: must not start with '-' (give the option without dashes)"
}

@test "opensandbox ossfs version is 1.0 or 2.0" {
	cfg <<<'opensandbox: {domain: os.example.com, image: x, volumes: [{name: d, mountPath: /d, ossfs: {bucket: bkt, endpoint: e, accessKeyId: i, accessKeySecret: s, version: 3.0}}]}'
	rejects "sandbox.yaml: opensandbox.volumes[0].ossfs.version: must be \"1.0\" or \"2.0\""
}

@test "opensandbox networkAllowlist entries are hostnames" {
	cfg <<<'opensandbox: {domain: os.example.com, image: x, networkAllowlist: ["http://pypi.org"]}'
	rejects "sandbox.yaml: opensandbox.networkAllowlist[0]: must be a hostname or *.domain, not a URL"
}

@test "opensandbox lifecycle.onSessionShutdown is kill, pause or keep" {
	cfg <<<'opensandbox: {domain: os.example.com, image: x, lifecycle: {onSessionShutdown: stop}}'
	rejects "sandbox.yaml: opensandbox.lifecycle.onSessionShutdown: must be kill, pause or keep"
}

@test "opensandbox workspace must be absolute" {
	cfg <<<'opensandbox: {domain: os.example.com, image: x, workspace: workspace}'
	rejects "sandbox.yaml: opensandbox.workspace: must be an absolute path"
}

@test "driver opensandbox needs the opensandbox section" {
	cfg <<<'driver: opensandbox'
	rejects "sandbox.yaml: opensandbox: is required when driver is opensandbox"
}

@test "opensandbox apiKeyFile is resolved against the YAML file's directory" {
	cfg <<<'opensandbox: {domain: os.example.com, image: x, apiKeyFile: keys/os.key}'
	accepts
	jq -e --arg want "$BATS_TEST_TMPDIR/keys/os.key" '.opensandbox.apiKeyFile == $want' <<<"$output"
}

@test "opensandbox defaults: http, 3600 s, kill, /workspace" {
	cfg <<<'opensandbox: {domain: os.example.com, snapshotId: snap_1}'
	accepts
	jq -e '.opensandbox | .protocol == "http" and .timeoutSeconds == 3600
		and .lifecycle.onSessionShutdown == "kill" and .workspace == "/workspace"
		and .snapshotId == "snap_1"' <<<"$output"
}

# ---- sbx: ----------------------------------------------------------------------

@test "sbx.cpus must be 1-256" {
	cfg <<<'sbx: {cpus: 0}'
	rejects "sandbox.yaml: sbx.cpus: must be 1-256"
}

@test "sbx.memory is a size like 4g" {
	cfg <<<'sbx: {memory: 4GB}'
	rejects "sandbox.yaml: sbx.memory: must be a size like 4g or 8192m"
}

@test "sbx.memory is at least 1g" {
	cfg <<<'sbx: {memory: 512m}'
	rejects "sandbox.yaml: sbx.memory: must be at least 1g"
}

@test "sbx.teardown is remove, stop or none" {
	cfg <<<'sbx: {teardown: kill}'
	rejects "sandbox.yaml: sbx.teardown: must be remove, stop or none"
}

@test "sbx.keepalive is a boolean" {
	cfg <<<'sbx: {keepalive: yes}'
	rejects "sandbox.yaml: sbx.keepalive: must be true or false"
}

@test "sbx.envAllowlist holds variable names" {
	cfg <<<'sbx: {envAllowlist: ["A=B"]}'
	rejects "sandbox.yaml: sbx.envAllowlist[0]: invalid variable name (must match ^[A-Za-z_][A-Za-z0-9_]*\$)"
}

@test "sbx.envPassthrough never forwards DOCKER_* or COMPOSE_*" {
	cfg <<<'sbx: {envPassthrough: [LANG, DOCKER_HOST]}'
	rejects "sandbox.yaml: sbx.envPassthrough[1]: DOCKER_HOST is never forwarded (DOCKER_* and COMPOSE_* are always stripped)"
}

@test "unknown sbx key names the expected ones" {
	cfg <<<'sbx: {name: x}'
	rejects "sandbox.yaml: sbx.name: unknown key (expected one of: cpus, memory, template, workspaceReadOnly, keepalive, teardown, envAllowlist, envPassthrough)"
}

# ---- valid files, normalised JSON, round trip ------------------------------------

@test "every example validates, with and without --json" {
	for f in "$EXAMPLES"/*.yaml; do
		run -0 --separate-stderr pisb validate -f "$f"
		jq -e 'type == "object"' <<<"$output" >/dev/null
		run -0 --separate-stderr pisb validate -f "$f" --json
		jq -e '.version == 1' <<<"$output" >/dev/null
	done
}

@test "the demo example normalises as documented" {
	run -0 --separate-stderr pisb validate -f "$EXAMPLES/sandbox.yaml"
	jq -e '.driver == "local" and (has("profile") | not) and .workspace == "/workspace"
		and (.setup | length) == 1 and (.resume | length) == 1
		and .env.GREETING == "hello"
		and .network.allowedHosts == ["pypi.org"]
		and .services.web.health == "/" and .services.web.preview.title == "web"
		and .services.web.timeoutMs == 30000
		and (.services.web | has("port") | not)' <<<"$output"
}

@test "the previews example keeps links and folders" {
	run -0 --separate-stderr pisb validate -f "$EXAMPLES/previews.yaml"
	jq -e '.services.api.previews[1].folder == "Admin"
		and (.services.api.previews[1].links | length) == 2
		and .services.web.env.API_URL == "${services.api.publicURL}"
		and .services.web.cwd == "site"' <<<"$output"
}

@test "the remote example fills the OpenSandbox defaults" {
	run -0 --separate-stderr pisb validate -f "$EXAMPLES/remote-opensandbox.yaml"
	jq -e '.opensandbox.volumes[0].pvc.createIfNotExists == true
		and .opensandbox.volumes[0].pvc.deleteOnSandboxTermination == false
		and .opensandbox.volumes[0].readOnly == false
		and .opensandbox.lifecycle.onSessionShutdown == "pause"' <<<"$output"
}

@test "the connect example prints no create-only fields" {
	run -0 --separate-stderr pisb validate -f "$EXAMPLES/connect-opensandbox.yaml"
	jq -e --arg key "$EXAMPLES/opensandbox.key" '.opensandbox.sandboxId == "sbx_123"
		and (.opensandbox | has("volumes") | not)
		and .opensandbox.apiKeyFile == $key' <<<"$output"
}

@test "the sbx example normalises memory and teardown" {
	run -0 --separate-stderr pisb validate -f "$EXAMPLES/sbx.yaml"
	jq -e '.sbx.memory == "4g" and .sbx.teardown == "stop" and .sbx.keepalive == true' <<<"$output"
}

@test "the minimal example is all defaults" {
	run -0 --separate-stderr pisb validate -f "$EXAMPLES/minimal.yaml"
	jq -e '. == {"version": 1, "driver": "local", "image": "host", "workspace": "/workspace",
		"setup": [], "resume": [], "env": {}, "metadata": {},
		"network": {"allowedHosts": []}, "services": {}}' <<<"$output"
}

@test "explicit resources are printed with the profile's other values" {
	cfg <<<'{profile: medium, resources: {cpus: 3}, diskGiB: 8}'
	accepts
	jq -e '.profile == "medium" and .resources == {"cpus": 3, "memoryGiB": 8, "pids": 4096}
		and .diskGiB == 8' <<<"$output"
}

@test "the printed JSON loads back to identical JSON, for every example and fixture" {
	for f in "$EXAMPLES"/*.yaml "$FIXTURES"/config/*.yaml; do
		run -0 --separate-stderr pisb validate -f "$f"
		first=$output
		printf '%s\n' "$first" > again.json
		run -0 --separate-stderr pisb validate -f again.json
		if [ "$output" != "$first" ]; then
			echo "round trip differs for $f"
			diff <(echo "$first") <(echo "$output")
			return 1
		fi
	done
}

@test "a config with every section round-trips in start order" {
	cp "$FIXTURES/config/everything.yaml" sandbox.yaml
	accepts
	first=$output
	printf '%s\n' "$first" > again.json
	run -0 --separate-stderr pisb validate -f again.json
	[ "$output" = "$first" ]
	jq -e '[.services | keys_unsorted[]] == ["db", "api", "web"]
		and .services.web.previews[0].links[0].folder == null
		and .opensandbox.volumes[1].ossfs.version == "2.0"
		and .sbx.envPassthrough == ["TERM"]' <<<"$output"
}

@test "a file whose normalised form exceeds 1 MiB is rejected" {
	# one process writes the lines: a 20000-round loop in the test body pays
	# bats' per-command trap every round (minutes on a loaded machine)
	{ echo 'services:'; seq -f '  s%g: {command: x}' 20000; } > sandbox.yaml
	[ "$(stat -c %s sandbox.yaml)" -lt 1048576 ]
	rejects "sandbox.yaml: larger than 1 MiB once normalised"
}

# ---- the manual ------------------------------------------------------------------

@test "pisb.yaml(5) is clean under groff -man -ww" {
	require_cmd groff
	run -0 --separate-stderr groff -man -ww -z "$TOP/man/pisb.yaml.5"
	[ -z "$output" ]
	[ -z "$stderr" ]
}

@test "pisb.yaml(5) has EXIT STATUS and EXAMPLES, and its examples run" {
	grep -qx '.SH EXIT STATUS' "$TOP/man/pisb.yaml.5"
	grep -qx '.SH EXAMPLES' "$TOP/man/pisb.yaml.5"
	# Each .EX block of EXAMPLES, roff escapes undone, into ex-N.
	awk '/^\.SH EXAMPLES/ { on = 1; next } /^\.SH / { on = 0 }
	     on && /^\.EX/ { n++; f = sprintf("ex-%02d", n); next }
	     on && /^\.EE/ { f = ""; next }
	     f != "" { gsub(/\\-/, "-"); gsub(/\\\(aq/, "\047"); gsub(/\\\(dq/, "\""); gsub(/\\e/, "\\");
		       print > f }' "$TOP/man/pisb.yaml.5"
	ls ex-* >/dev/null
	n=0
	for f in ex-*; do
		if [ "$(head -c 2 "$f")" = '$ ' ]; then
			cmd=$(sed 's/^\$ //' "$f")
			(cd "$TOP" && bash -o pipefail -c "$cmd") >/dev/null || { echo "example failed: $cmd"; return 1; }
		else
			run -0 --separate-stderr pisb validate -f "$f"
		fi
		n=$((n + 1))
	done
	[ "$n" -ge 5 ]
}

@test "pisb.yaml(5) documents every key the loader knows" {
	for k in version driver profile resources cpus memoryGiB pids diskGiB image workspace setup resume \
		env metadata network allowedHosts services command cwd port health timeoutMs preview previews \
		platforms folder links url title description review domain protocol apiKeyFile apiKey snapshotId \
		sandboxId timeoutSeconds resourceLimits entrypoint volumes name mountPath readOnly subPath pvc \
		claimName createIfNotExists deleteOnSandboxTermination storageClass storage accessModes ossfs \
		bucket endpoint options accessKeyId accessKeySecret networkAllowlist lifecycle onSessionShutdown \
		sbx memory template workspaceReadOnly keepalive teardown envAllowlist envPassthrough \
		project dir mode include exclude git secrets secretPatterns; do
		grep -Eq "^\.(B|BR|RB) (\{ )?\"?$k\b" "$TOP/man/pisb.yaml.5" || { echo "undocumented: $k"; return 1; }
	done
}

@test "an ossfs access key secret never appears in the normalised config" {
	cat > "$BATS_TEST_TMPDIR/s.yaml" <<'YAML'
driver: opensandbox
opensandbox:
  domain: os.example.com
  image: x
  volumes:
    - name: data
      mountPath: /data
      ossfs: {bucket: bkt, endpoint: e, accessKeyId: i, accessKeySecret: very-secret-value}
YAML
	run -0 --separate-stderr pisb validate -f "$BATS_TEST_TMPDIR/s.yaml"
	[[ $output != *very-secret-value* ]]
	jq -e '.opensandbox.volumes[0].ossfs.accessKeySecret == "<redacted>"' <<<"$output"
}
