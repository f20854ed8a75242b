/* docker_init.c - the templates of `pisb docker NAME init` and the script
 * that writes them inside the sandbox (docker_init.h). */
#include "docker_init.h"
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A starting Dockerfile per language (the seed's: node with npm or pnpm,
 * python, go, rust, a generic alpine base); ports avoid 80 (the seed:
 * sbx's port proxy resets it).  @CRATE@ is the rust package's name. */
static const struct tpl {
	const char *lang;
	int port;
	const char *dockerfile;
} tpls[] = {
	{ "node", 3000, "FROM node:22-alpine\nWORKDIR /app\nCOPY package*.json ./\nRUN npm install\nCOPY . .\nENV PORT=3000\nEXPOSE 3000\nCMD [\"npm\", \"start\"]" },
	{ "pnpm", 3000, "FROM node:22-alpine\nRUN corepack enable\nWORKDIR /app\nCOPY package.json pnpm-lock.yaml ./\nRUN pnpm install --frozen-lockfile\nCOPY . .\nENV PORT=3000\nEXPOSE 3000\nCMD [\"pnpm\", \"start\"]" },
	{ "python", 8000, "FROM python:3.12-slim\nWORKDIR /app\nCOPY . .\nRUN if [ -f requirements.txt ]; then pip install --no-cache-dir -r requirements.txt; elif [ -f pyproject.toml ]; then pip install --no-cache-dir .; fi\nEXPOSE 8000\nCMD [\"python\", \"main.py\"]" },
	{ "go", 8080, "FROM golang:1.23-alpine AS build\nWORKDIR /src\nCOPY . .\nRUN go build -o /app .\nFROM alpine:3\nCOPY --from=build /app /app\nEXPOSE 8080\nCMD [\"/app\"]" },
	{ "rust", 8080, "FROM rust:1-slim AS build\nWORKDIR /src\nCOPY . .\nRUN cargo build --release\nFROM debian:bookworm-slim\nCOPY --from=build /src/target/release/@CRATE@ /usr/local/bin/app\nEXPOSE 8080\nCMD [\"/usr/local/bin/app\"]" },
	{ "generic", 8080, "FROM alpine:3\nWORKDIR /app\nCOPY . .\nEXPOSE 8080\nCMD [\"sh\"]" },
	{ NULL, 0, NULL },
};

static const char ignore[] = ".git\nnode_modules\ntarget\n__pycache__\n.venv\n.env\n.env.*\n*.pem\n*.key\n.sandbox.yaml";
static const char compose[] = "services:\n  app:\n    build: .\n    ports:\n      - \"@PORT@:@PORT@\"\n    restart: unless-stopped";

/* $1 the workspace, $2 DIR, $3 LANG ("" picks), $4 force (0/1), $5 compose (0/1), $6 the
 * .dockerignore, $7 the compose file, then LANG PORT DOCKERFILE triples.
 * Texts come without their last newline (printf adds it).  Prints "lang
 * L", "port P", then "written F" or "kept F EXISTING" a file.  DIR,
 * symlinks resolved, must be in the workspace (a link out is not
 * followed: __NODIR__, status 3); a file is written to a new name
 * (noclobber: never through a link planted there) and renamed over. */
const char PISB_DOCKER_INIT_SH[] =
	"set -C; ws=$1 d=$2 lang=$3 force=$4 comp=$5 ign=$6 ctpl=$7; shift 7; "
	"w=$(cd -P -- \"$ws\" && pwd -P) && cd -P -- \"$d\" 2>/dev/null || { echo __NODIR__; exit 3; }; "
	"case $(pwd -P)/ in \"${w%/}\"/*) ;; *) echo __NODIR__; exit 3;; esac; "
	"has() { [ -e \"$1\" ] || [ -L \"$1\" ]; }; "
	"sub() { r= s=$1; while :; do case $s in *\"$2\"*) r=$r${s%%\"$2\"*}$3; s=${s#*\"$2\"};; *) break;; esac; done; printf '%s' \"$r$s\"; }; "
	"if [ -z \"$lang\" ]; then "
	"if has pnpm-lock.yaml; then lang=pnpm; elif has package.json; then lang=node; elif has go.mod; then lang=go; "
	"elif has Cargo.toml; then lang=rust; elif has requirements.txt || has pyproject.toml; then lang=python; else lang=generic; fi; fi; "
	"crate=app; if [ \"$lang\" = rust ] && [ -f Cargo.toml ]; then "
	"c=$(sed -n 's/^[[:space:]]*name[[:space:]]*=[[:space:]]*\"\\([A-Za-z0-9_-]\\{1,64\\}\\)\".*/\\1/p' Cargo.toml | head -n 1); "
	"[ -n \"$c\" ] && crate=$c; fi; "
	"tpl= port=; while [ $# -ge 3 ]; do [ \"$1\" = \"$lang\" ] && { port=$2; tpl=$3; }; shift 3; done; "
	"[ -n \"$tpl\" ] || { echo \"no template for '$lang'\"; exit 1; }; "
	"echo \"lang $lang\"; echo \"port $port\"; "
	"put() { f=$1 t=$2; shift 2; for x in \"$f\" \"$@\"; do "
	"if has \"$x\" && [ \"$force\" != 1 ]; then echo \"kept $f $x\"; return 0; fi; done; "
	"[ ! -d \"$f\" ] || { echo \"'$f' is a directory\"; exit 1; }; "
	"printf '%s\\n' \"$t\" > \"$f.pisb-init.$$\" && mv -f \"$f.pisb-init.$$\" \"$f\" || exit 1; echo \"written $f\"; }; "
	"put Dockerfile \"$(sub \"$tpl\" @CRATE@ \"$crate\")\"; "
	"put .dockerignore \"$ign\"; "
	"if [ \"$comp\" = 1 ]; then put compose.yaml \"$(sub \"$ctpl\" @PORT@ \"$port\")\" compose.yml docker-compose.yml docker-compose.yaml; fi";

static bool lang_known(const char *l)
{
	for (const struct tpl *t = tpls; t->lang; t++)
		if (!strcmp(t->lang, l))
			return true;
	return false;
}

/* the files the script writes, and the names that keep compose.yaml */
static bool file_known(const char *f)
{
	static const char *const known[] = { "Dockerfile", ".dockerignore", "compose.yaml", "compose.yml",
					     "docker-compose.yml", "docker-compose.yaml", NULL };

	for (int i = 0; known[i]; i++)
		if (!strcmp(known[i], f))
			return true;
	return false;
}

/* printable ASCII only (a message of the script's goes to a terminal) */
static bool plain_ascii(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || (unsigned char)*s > 0x7e)
			return false;
	return true;
}

int pisb_docker_init_parse(char *const *args, size_t n, struct pisb_docker_init *o, struct pisb_err *e)
{
	bool opts = true;

	memset(o, 0, sizeof(*o));
	for (size_t i = 0; i < n; i++) {
		const char *a = args[i];
		if (opts && !strcmp(a, "--")) {
			opts = false;
		} else if (opts && !strcmp(a, "--force")) {
			o->force = true;
		} else if (opts && !strcmp(a, "--compose")) {
			o->compose = true;
		} else if (opts && (!strcmp(a, "--lang") || pisb_str_starts(a, "--lang="))) {
			if (a[6] == '=')
				o->lang = a + 7;
			else if (i + 1 < n)
				o->lang = args[++i];
			else
				return pisb_err_set(e, PISB_EXIT_USAGE, "docker init: '--lang' needs a value");
			if (!lang_known(o->lang))
				return pisb_err_set(e, PISB_EXIT_USAGE,
						    "docker init: '--lang %s': not one of node, pnpm, python, go, rust, generic",
						    o->lang);
		} else if (opts && a[0] == '-' && a[1]) {
			return pisb_err_set(e, PISB_EXIT_USAGE,
					    "docker init: unknown option '%s' (--lang LANG, --force, --compose, DIR)", a);
		} else if (o->dir) {
			return pisb_err_set(e, PISB_EXIT_USAGE, "docker init: at most one DIR (relative to the workspace)");
		} else {
			o->dir = a;
		}
	}
	return 0;
}

void pisb_docker_init_args(const struct pisb_docker_init *o, const char *ws, const char *dir,
			   struct pisb_strv *av)
{
	pisb_strv_push(av, ws);
	pisb_strv_push(av, dir);
	pisb_strv_push(av, o->lang ? o->lang : "");
	pisb_strv_push(av, o->force ? "1" : "0");
	pisb_strv_push(av, o->compose ? "1" : "0");
	pisb_strv_push(av, ignore);
	pisb_strv_push(av, compose);
	for (const struct tpl *t = tpls; t->lang; t++) {
		pisb_strv_push(av, t->lang);
		pisb_strv_pushf(av, "%d", t->port);
		pisb_strv_push(av, t->dockerfile);
	}
}

int pisb_docker_init_report(const char *name, const char *dir, const char *out, int code,
			    struct pisb_jw *w, struct pisb_strv *notes, int *exit_code, struct pisb_err *e)
{
	_cleanup_free_ char *text = xstrdup(out ? out : "");
	char lang[32] = "", last[256] = "";
	long long port = 0;
	bool kept_df = false, first = true;

	if (code == 3 && strstr(text, "__NODIR__"))
		return pisb_err_set(e, PISB_EXIT_NOTFOUND, "docker init: '%s' is not a directory in the sandbox", dir);
	for (char *l = text, *nl; l && *l; l = nl ? nl + 1 : NULL) {
		if ((nl = strchr(l, '\n')))
			*nl = '\0';
		if (sscanf(l, "lang %31s", lang) == 1 || sscanf(l, "port %lld", &port) == 1)
			continue;
		if (*l)
			snprintf(last, sizeof(last), "%s", l);
	}
	if (code != 0 || !lang[0])
		return pisb_err_set(e, PISB_EXIT_FAIL, "docker init in '%s': %s", dir,
				    last[0] && plain_ascii(last) ? last : "the script inside the sandbox failed");
	/* the script's output is the sandbox's: only names of our own pass */
	if (!lang_known(lang) || port < 1 || port > 65535)
		return pisb_err_set(e, PISB_EXIT_FAIL, "docker init in '%s': the script inside the sandbox answered nonsense", dir);
	pisb_jw_obj(w);
	pisb_jw_kstr(w, "name", name);
	pisb_jw_kstr(w, "dir", dir);
	pisb_jw_kstr(w, "lang", lang);
	pisb_jw_kint(w, "port", port);
	pisb_jw_key(w, "files");
	pisb_jw_arr(w);
	memcpy(text, out, strlen(out) + 1);
	for (char *l = text, *nl; l && *l; l = nl ? nl + 1 : NULL) {
		char f[64] = "", x[64] = "";
		if ((nl = strchr(l, '\n')))
			*nl = '\0';
		if (sscanf(l, "written %63s", f) == 1 && file_known(f)) {
			pisb_jw_obj(w);
			pisb_jw_kstr(w, "file", f);
			pisb_jw_kstr(w, "status", "written");
			pisb_jw_obj_end(w);
			pisb_strv_pushf(notes, "%s %s/%s", first ? "wrote" : "     ", dir, f);
			first = false;
		} else if (sscanf(l, "kept %63s %63s", f, x) == 2 && file_known(f) && file_known(x)) {
			pisb_jw_obj(w);
			pisb_jw_kstr(w, "file", f);
			pisb_jw_kstr(w, "status", "kept");
			pisb_jw_kstr(w, "existing", x);
			pisb_jw_obj_end(w);
			pisb_strv_pushf(notes, "kept %s/%s (it exists; --force overwrites it)", dir, x);
			kept_df |= !strcmp(f, "Dockerfile");
		}
	}
	pisb_jw_arr_end(w);
	pisb_jw_obj_end(w);
	if (!kept_df)
		pisb_strv_pushf(notes, "%s: build it with 'pisb docker %s build -- -t IMAGE %s', run it with -p %lld:%lld",
				lang, name, dir, port, port);
	*exit_code = kept_df ? PISB_EXIT_BUSY : 0;
	return 0;
}

const char PISB_DOCKERD_SH[] =
	"mkdir -p /run/pisb-docker && "
	"rm -f " PISB_DOCKER_SOCK " /run/pisb-docker/dockerd.pid && "
	/* BuildKit by default; a daemon.json of the sandbox's own is kept
	 * (and one that cannot be written does not keep the daemon down) */
	"{ [ -e /etc/docker/daemon.json ] || { printf '{\"features\": {\"buildkit\": true}}\\n' > /etc/docker/daemon.json.pisb && "
	"mv -f /etc/docker/daemon.json.pisb /etc/docker/daemon.json; }; } 2>/dev/null; "
	"XDG_RUNTIME_DIR=/run/pisb-docker "
	/* delegated cgroups (ours to write): runc makes the containers' */
	"R=--rootless; [ -w /sys/fs/cgroup/memory ] && [ -w /sys/fs/cgroup/cpuset ] && R=; "
	"[ -w /sys/fs/cgroup/cgroup.procs ] && R=; "
	/* a vm guest (its agent at /run/pisb/agent): the agent loads the
	 * bridge's modules and says so in /run/pisb/docker.ready; the guest
	 * has no network interface, so there is nothing to NAT (published
	 * ports go through docker-proxy); with a pids limit the containers
	 * go under the guest's limited cgroup */
	"if [ -e /run/pisb/agent ]; then i=0; while [ ! -e /run/pisb/docker.ready ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done; "
	"r=$(cat /run/pisb/docker.ready 2>/dev/null); [ \"$r\" = ok ] || { echo \"pisb: ${r:-the guest agent did not prepare the daemon (no /run/pisb/docker.ready after 60 s)}\" >&2; exit 1; }; "
	"R=\"$R --iptables=false --ip6tables=false\"; [ -d /sys/fs/cgroup/pisb/cmd ] && R=\"$R --cgroup-parent=/pisb/docker\"; fi; "
	"exec dockerd $R --host unix://" PISB_DOCKER_SOCK " --group root --data-root /var/lib/docker "
	"--exec-root /run/pisb-docker/exec --pidfile /run/pisb-docker/dockerd.pid";
