/* docker_policy.c - the argument policy of pisb docker; see docker_policy.h
 * and pisb-docker(1), "ARGUMENT POLICY".
 */
#include "docker_policy.h"
#include "docker_init.h"
#include "config.h"
#include "driver.h"
#include "err.h"
#include "fs.h"
#include "instance.h"
#include "json.h"
#include "proc.h"
#include "util.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <unistd.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <errno.h>

/* ---- option tables ---- */

struct dopt {
	const char *name;       /* long name */
	char shrt;              /* 0: none */
	bool val;               /* takes a value */
};

#define B(n, s) { n, s, false }
#define V(n, s) { n, s, true }

/* docker run / docker create (docker 27, plus 28's --use-api-socket) */
static const struct dopt run_opts[] = {
	B("detach", 'd'), B("disable-content-trust", 0), B("help", 0), B("init", 0),
	B("interactive", 'i'), B("no-healthcheck", 0), B("oom-kill-disable", 0),
	B("privileged", 0), B("publish-all", 'P'), B("quiet", 'q'), B("read-only", 0),
	B("rm", 0), B("sig-proxy", 0), B("tty", 't'), B("use-api-socket", 0),
	V("add-host", 0), V("annotation", 0), V("attach", 'a'), V("blkio-weight", 0),
	V("blkio-weight-device", 0), V("cap-add", 0), V("cap-drop", 0), V("cgroup-parent", 0),
	V("cgroupns", 0), V("cidfile", 0), V("cpu-count", 0), V("cpu-percent", 0),
	V("cpu-period", 0), V("cpu-quota", 0), V("cpu-rt-period", 0), V("cpu-rt-runtime", 0),
	V("cpu-shares", 'c'), V("cpus", 0), V("cpuset-cpus", 0), V("cpuset-mems", 0),
	V("detach-keys", 0), V("device", 0), V("device-cgroup-rule", 0),
	V("device-read-bps", 0), V("device-read-iops", 0), V("device-write-bps", 0),
	V("device-write-iops", 0), V("dns", 0), V("dns-opt", 0), V("dns-option", 0),
	V("dns-search", 0), V("domainname", 0), V("entrypoint", 0), V("env", 'e'),
	V("env-file", 0), V("expose", 0), V("gpus", 0), V("group-add", 0), V("health-cmd", 0),
	V("health-interval", 0), V("health-retries", 0), V("health-start-interval", 0),
	V("health-start-period", 0), V("health-timeout", 0), V("hostname", 'h'),
	V("io-maxbandwidth", 0), V("io-maxiops", 0), V("ip", 0), V("ip6", 0), V("ipc", 0),
	V("isolation", 0), V("kernel-memory", 0), V("label", 'l'), V("label-file", 0),
	V("link", 0), V("link-local-ip", 0), V("log-driver", 0), V("log-opt", 0),
	V("mac-address", 0), V("memory", 'm'), V("memory-reservation", 0), V("memory-swap", 0),
	V("memory-swappiness", 0), V("mount", 0), V("name", 0), V("net", 0), V("net-alias", 0),
	V("network", 0), V("network-alias", 0), V("oom-score-adj", 0), V("pid", 0),
	V("pids-limit", 0), V("platform", 0), V("publish", 'p'), V("pull", 0), V("restart", 0),
	V("runtime", 0), V("security-opt", 0), V("shm-size", 0), V("stop-signal", 0),
	V("stop-timeout", 0), V("storage-opt", 0), V("sysctl", 0), V("tmpfs", 0), V("ulimit", 0),
	V("user", 'u'), V("userns", 0), V("uts", 0), V("volume", 'v'), V("volume-driver", 0),
	V("volumes-from", 0), V("workdir", 'w'),
	{ NULL, 0, false },
};

static const struct dopt exec_opts[] = {
	B("detach", 'd'), B("help", 0), B("interactive", 'i'), B("privileged", 0), B("tty", 't'),
	V("detach-keys", 0), V("env", 'e'), V("env-file", 0), V("user", 'u'), V("workdir", 'w'),
	{ NULL, 0, false },
};

/* docker build (buildx and the classic builder) */
static const struct dopt build_opts[] = {
	B("check", 0), B("compress", 0), B("disable-content-trust", 0), B("force-rm", 0),
	B("help", 0), B("load", 0), B("no-cache", 0), B("pull", 0), B("push", 0),
	B("quiet", 'q'), B("rm", 0), B("squash", 0),
	V("add-host", 0), V("allow", 0), V("annotation", 0), V("attest", 0), V("build-arg", 0),
	V("build-context", 0), V("builder", 0), V("cache-from", 0), V("cache-to", 0),
	V("call", 0), V("cgroup-parent", 0), V("cpu-period", 0), V("cpu-quota", 0),
	V("cpu-shares", 'c'), V("cpuset-cpus", 0), V("cpuset-mems", 0), V("file", 'f'),
	V("iidfile", 0), V("isolation", 0), V("label", 0), V("memory", 'm'),
	V("memory-swap", 0), V("metadata-file", 0), V("network", 0), V("no-cache-filter", 0),
	V("output", 'o'), V("platform", 0), V("progress", 0), V("provenance", 0), V("sbom", 0),
	V("secret", 0), V("security-opt", 0), V("shm-size", 0), V("ssh", 0), V("tag", 't'),
	V("target", 0), V("ulimit", 0),
	{ NULL, 0, false },
};

/* docker compose, before its subcommand (and docker-compose v1's
 * --verbose, --no-ansi and --log-level) */
static const struct dopt compose_opts[] = {
	B("all-resources", 0), B("compatibility", 0), B("dry-run", 0), B("help", 0),
	B("no-ansi", 0), B("verbose", 0), B("version", 'v'),
	V("ansi", 0), V("env-file", 0), V("file", 'f'), V("log-level", 0), V("parallel", 0),
	V("profile", 0), V("progress", 0), V("project-directory", 0), V("project-name", 'p'),
	V("workdir", 0),
	{ NULL, 0, false },
};

/* docker compose run / exec (plus compose's file options, which cobra
 * lets a subcommand take too) */
static const struct dopt compose_run_opts[] = {
	B("build", 0), B("detach", 'd'), B("help", 0), B("interactive", 'i'), B("no-TTY", 'T'),
	B("no-deps", 0), B("quiet", 'q'), B("quiet-build", 0), B("quiet-pull", 0),
	B("remove-orphans", 0), B("rm", 0), B("service-ports", 0), B("tty", 't'),
	B("use-aliases", 0), B("dry-run", 0),
	V("cap-add", 0), V("cap-drop", 0), V("entrypoint", 0), V("env", 'e'),
	V("env-from-file", 0), V("label", 'l'), V("name", 0), V("publish", 'p'), V("pull", 0),
	V("user", 'u'), V("volume", 'v'), V("workdir", 'w'),
	V("env-file", 0), V("file", 'f'), V("project-directory", 0), V("profile", 0),
	V("ansi", 0), V("progress", 0), V("parallel", 0),
	{ NULL, 0, false },
};

static const struct dopt compose_exec_opts[] = {
	B("detach", 'd'), B("help", 0), B("interactive", 'i'), B("no-TTY", 'T'),
	B("privileged", 0), B("tty", 't'), B("dry-run", 0),
	V("env", 'e'), V("index", 0), V("user", 'u'), V("workdir", 'w'),
	V("env-file", 0), V("file", 'f'), V("project-directory", 0), V("profile", 0),
	V("ansi", 0), V("progress", 0), V("parallel", 0), V("project-name", 'p'),
	{ NULL, 0, false },
};

/* docker import */
static const struct dopt import_opts[] = {
	B("help", 0), V("change", 'c'), V("message", 'm'), V("platform", 0),
	{ NULL, 0, false },
};

#undef B
#undef V

/* docker's default capabilities: the only ones --cap-add may name (it
 * re-adds what a --cap-drop took away). */
static const char *const safe_caps[] = {
	"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD",
	"NET_BIND_SERVICE", "NET_RAW", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT",
	NULL,
};

/* ---- the parse ---- */

struct pctx {
	const struct pisb_docker_scope *s;
	const char *what;               /* "docker run", for messages */
	struct pisb_docker_args *out;
	struct pisb_err *e;
	bool has_restart, rm;
};

static int refuse(struct pctx *c, const char *opt, const char *why)
{
	return pisb_err_set(c->e, PISB_EXIT_USAGE, "%s: '%s' is refused: %s (see pisb-docker(1))",
			    c->what, opt, why);
}

static const struct dopt *find_long(const struct dopt *t, const char *name, size_t n)
{
	for (; t->name; t++)
		if (strlen(t->name) == n && !strncmp(t->name, name, n))
			return t;
	return NULL;
}

static const struct dopt *find_short(const struct dopt *t, char c)
{
	for (; t->name; t++)
		if (t->shrt == c)
			return t;
	return NULL;
}

static bool is_host_opt(const char *a)
{
	size_t n = strcspn(a, "=");

	return !strcmp(a, "-H") || pisb_str_starts(a, "-H") ||
	       (n == 6 && !strncmp(a, "--host", 6)) || (n == 9 && !strncmp(a, "--context", 9));
}

static int refuse_host(struct pctx *c, const char *a)
{
	char opt[16];

	snprintf(opt, sizeof(opt), "%.*s", (int)strcspn(a, "="), a);
	if (pisb_str_starts(a, "-H"))
		strcpy(opt, "-H");
	return refuse(c, opt, "the client stays pinned to the sandbox's own daemon");
}

/* path lexically absolute under the workspace: "." and ".." folded; the
 * result (caller frees) or NULL when it leaves the workspace. */
static char *confined(const struct pisb_docker_scope *s, const char *path)
{
	_cleanup_free_ char *full = path[0] == '/' ? xstrdup(path) : xasprintf("%s/%s", s->workspace, path);
	_cleanup_free_ char *ws = NULL;
	struct pisb_buf b = PISB_BUF_INIT;
	size_t wl;

	for (const char *p = full; *p;) {
		size_t n = strcspn(p, "/");
		if (n == 2 && p[0] == '.' && p[1] == '.') {
			while (b.len && b.s[b.len - 1] != '/')
				b.len--;
			if (b.len)
				b.len--;
			if (b.s)
				b.s[b.len] = '\0';
		} else if (n && !(n == 1 && p[0] == '.')) {
			pisb_buf_addc(&b, '/');
			pisb_buf_add(&b, p, n);
		}
		p += n;
		while (*p == '/')
			p++;
	}
	if (!b.len)
		pisb_buf_addc(&b, '/');
	ws = pisb_path_in("/", s->workspace);
	wl = strlen(ws);
	if (!strcmp(ws, "/") || (!strncmp(b.s, ws, wl) && (b.s[wl] == '/' || !b.s[wl])))
		return pisb_buf_detach(&b);
	pisb_buf_release(&b);
	return NULL;
}

static int need_inside(struct pctx *c, const char *opt, const char *kind, const char *path)
{
	_cleanup_free_ char *p = confined(c->s, path);

	if (p)
		return 0;
	if (!opt)
		return pisb_err_set(c->e, PISB_EXIT_USAGE,
				    "%s: %s '%s' is outside the workspace '%s' (see pisb-docker(1))",
				    c->what, kind, path, c->s->workspace);
	return pisb_err_set(c->e, PISB_EXIT_USAGE,
			    "%s: '%s': %s '%s' is outside the workspace '%s' (see pisb-docker(1))",
			    c->what, opt, kind, path, c->s->workspace);
}

static bool bool_true(const char *v)
{
	return !v || !strcmp(v, "true") || !strcmp(v, "1") || !strcmp(v, "t") || !strcmp(v, "T") ||
	       !strcmp(v, "TRUE") || !strcmp(v, "True");
}

static bool bool_word(const char *v)
{
	static const char *const w[] = { "1", "t", "T", "TRUE", "true", "True", "0", "f", "F",
					 "FALSE", "false", "False", NULL };
	for (int i = 0; w[i]; i++)
		if (!strcmp(v, w[i]))
			return true;
	return false;
}

/* host, or name=host in the CSV form of --network */
static bool names_host(const char *v)
{
	if (!strcmp(v, "host"))
		return true;
	for (const char *p = v; p && *p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
		if (pisb_str_starts(p, "name=host") && (p[9] == ',' || !p[9]))
			return true;
	return false;
}

static int check_caps(struct pctx *c, const char *v)
{
	_cleanup_free_ char *dup = xstrdup(v);
	char *save = NULL;

	for (char *t = strtok_r(dup, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		_cleanup_free_ char *opt = xasprintf("--cap-add %s", t);
		char up[64];
		size_t k = 0;
		const char *p = t;
		bool ok = false;

		if (!strncasecmp(p, "CAP_", 4))
			p += 4;
		for (; *p && k + 1 < sizeof(up); p++)
			up[k++] = (char)toupper((unsigned char)*p);
		up[k] = '\0';
		for (int i = 0; safe_caps[i] && !*p; i++)
			ok |= !strcmp(up, safe_caps[i]);
		if (!ok)
			return refuse(c, opt, "only docker's default capabilities may be added");
	}
	return 0;
}

static int check_secopt(struct pctx *c, const char *v)
{
	size_t k = strcspn(v, "=:");
	const char *val = v[k] ? v + k + 1 : "";
	_cleanup_free_ char *opt = xasprintf("--security-opt %s", v);

	if (k == 7 && !strncmp(v, "seccomp", 7))
		return refuse(c, opt, strcmp(val, "unconfined") ?
			      "a seccomp profile of the caller's could allow anything; docker's default stays" :
			      "containers keep docker's seccomp filter");
	if (k == 8 && !strncmp(v, "apparmor", 8) && !strcmp(val, "unconfined"))
		return refuse(c, opt, "containers keep their AppArmor profile");
	if (k == 5 && !strncmp(v, "label", 5) && !strcmp(val, "disable"))
		return refuse(c, opt, "containers keep their SELinux labels");
	if (k == 11 && !strncmp(v, "systempaths", 11) && !strcmp(val, "unconfined"))
		return refuse(c, opt, "/proc and /sys stay masked in containers");
	if (k == 16 && !strncmp(v, "writable-cgroups", 16) && bool_true(val))
		return refuse(c, opt, "the cgroup tree stays read-only in containers");
	return 0;
}

/* "ro" replaces "rw" in a -v options field, or joins it. */
static char *ro_opts(const char *o)
{
	struct pisb_buf b = PISB_BUF_INIT;
	_cleanup_free_ char *dup = xstrdup(o ? o : "");
	char *save = NULL;

	for (char *t = strtok_r(dup, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		if (!strcmp(t, "rw") || !strcmp(t, "ro"))
			continue;
		pisb_buf_adds(&b, t);
		pisb_buf_addc(&b, ',');
	}
	pisb_buf_adds(&b, "ro");
	return pisb_buf_detach(&b);
}

/* -v SRC:DST[:OPTS] or -v DST (an anonymous volume).  SRC with a '/' or
 * starting with '.' or '~' is a bind; else it names a volume. */
static int check_volume(struct pctx *c, const char *opt, const char *v, char **rewrite)
{
	const char *c1 = strchr(v, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
	_cleanup_free_ char *src = NULL;

	if (!c1)
		return 0;
	if (c2 && strchr(c2 + 1, ':'))
		return pisb_err_set(c->e, PISB_EXIT_USAGE, "%s: '%s %s': not SRC:DST[:OPTIONS]",
				    c->what, opt, v);
	src = xstrndup(v, (size_t)(c1 - v));
	if (!strchr(src, '/') && src[0] != '.' && src[0] != '~')
		return 0;
	if (need_inside(c, opt, "bind source", src) < 0)
		return -1;
	if (c->s->read_only) {
		_cleanup_free_ char *o = ro_opts(c2 ? c2 + 1 : NULL);
		*rewrite = xasprintf("%.*s:%s", (int)(c2 ? c2 - v : (ptrdiff_t)strlen(v)), v, o);
	}
	return 0;
}

/* docker's CSV (encoding/csv): fields split on ',', a field in double
 * quotes may hold ',' and "" for '"'.  Into f (owned strings). */
static void csv_split(const char *v, struct pisb_strv *f)
{
	struct pisb_buf b = PISB_BUF_INIT;
	const char *p = v;

	for (;;) {
		pisb_buf_reset(&b);
		pisb_buf_adds(&b, "");
		if (*p == '"') {
			for (p++; *p; p++) {
				if (*p == '"' && p[1] == '"')
					pisb_buf_addc(&b, *++p);
				else if (*p == '"') {
					p++;
					break;
				} else
					pisb_buf_addc(&b, *p);
			}
		}
		for (; *p && *p != ','; p++)
			pisb_buf_addc(&b, *p);
		pisb_strv_push(f, b.s);
		if (!*p)
			break;
		p++;
	}
	pisb_buf_release(&b);
}

static const char *field_val(const char *f, const char *const *keys)
{
	for (int i = 0; keys[i]; i++) {
		size_t n = strlen(keys[i]);
		if (!strncmp(f, keys[i], n) && f[n] == '=')
			return f + n + 1;
	}
	return NULL;
}

/* --mount type=bind,source=...,target=...[,readonly] */
static int check_mount(struct pctx *c, const char *v, char **rewrite)
{
	static const char *const srck[] = { "source", "src", NULL };
	static const char *const typek[] = { "type", NULL };
	static const char *const rok[] = { "readonly", "ro", NULL };
	_cleanup_strv_ struct pisb_strv f = PISB_STRV_INIT;
	const char *type = "volume", *src = NULL, *x;
	struct pisb_buf b = PISB_BUF_INIT;

	csv_split(v, &f);
	for (size_t i = 0; i < f.n; i++) {
		if ((x = field_val(f.v[i], typek)))
			type = x;
		else if ((x = field_val(f.v[i], srck)))
			src = x;
		else if (pisb_str_starts(f.v[i], "volume-opt=") && strstr(f.v[i], "device"))
			return refuse(c, "--mount volume-opt=device",
				      "a volume over a path or device is a bind by another name");
	}
	if (strcmp(type, "bind"))
		return 0;
	if (!src)
		return 0;   /* docker refuses it */
	if (need_inside(c, "--mount", "bind source", src) < 0)
		return -1;
	if (!c->s->read_only)
		return 0;
	for (size_t i = 0; i < f.n; i++) {
		if (!strcmp(f.v[i], "readonly") || !strcmp(f.v[i], "ro") || field_val(f.v[i], rok))
			continue;
		if (b.len)
			pisb_buf_addc(&b, ',');
		if (strchr(f.v[i], ',') || strchr(f.v[i], '"')) {
			pisb_buf_addc(&b, '"');
			for (const char *p = f.v[i]; *p; p++) {
				if (*p == '"')
					pisb_buf_addc(&b, '"');
				pisb_buf_addc(&b, *p);
			}
			pisb_buf_addc(&b, '"');
		} else
			pisb_buf_adds(&b, f.v[i]);
	}
	pisb_buf_adds(&b, ",readonly");
	*rewrite = pisb_buf_detach(&b);
	return 0;
}

static bool is_remote_ctx(const char *v)
{
	return pisb_str_starts(v, "http://") || pisb_str_starts(v, "https://") ||
	       pisb_str_starts(v, "git://") || pisb_str_starts(v, "git@") ||
	       pisb_str_starts(v, "github.com/") || pisb_str_starts(v, "docker-image://") ||
	       pisb_str_starts(v, "target:");
}

/* Fields KEY=PATH of a CSV value (--secret src=, --output dest=, --ssh
 * id=PATH) inside the workspace. */
static int check_csv_paths(struct pctx *c, const char *opt, const char *v,
			   const char *const *keys, bool bare_is_path)
{
	_cleanup_strv_ struct pisb_strv f = PISB_STRV_INIT;
	const char *x;

	csv_split(v, &f);
	for (size_t i = 0; i < f.n; i++) {
		if ((x = field_val(f.v[i], keys))) {
			if (need_inside(c, opt, "path", x) < 0)
				return -1;
		} else if (bare_is_path && f.n == 1 && !strchr(f.v[i], '=') && strcmp(f.v[i], "-")) {
			if (need_inside(c, opt, "path", f.v[i]) < 0)
				return -1;
		}
	}
	return 0;
}

/* the files and project directory a compose command names */
static void compose_note(struct pctx *c, const char *name, const char *v)
{
	if (!strcmp(name, "file")) {
		pisb_strv_push(&c->out->compose_files, v);
		c->out->compose_late |= c->out->compose_sub != NULL;
	}
	else if (!strcmp(name, "project-directory")) {
		free(c->out->compose_dir);
		c->out->compose_dir = xstrdup(v);
	}
}

/* One option with its value (NULL for a boolean given bare): refuse, or
 * leave *rewrite NULL to keep v, or set it. */
static int check_opt(struct pctx *c, const char *name, const char *v, char **rewrite)
{
	_cleanup_free_ char *opt = xasprintf("--%s%s%s", name, v ? " " : "", v ? v : "");

	if (!strcmp(name, "privileged") && bool_true(v))
		return refuse(c, "--privileged", "it hands containers every device and capability of the sandbox");
	if (!strcmp(name, "use-api-socket") && bool_true(v))
		return refuse(c, "--use-api-socket", "the daemon's socket stays out of containers");
	if (!strcmp(name, "device") || !strcmp(name, "device-cgroup-rule") || !strcmp(name, "gpus"))
		return refuse(c, opt, "containers get no device of the sandbox");
	if (!strcmp(name, "cgroup-parent"))
		return refuse(c, opt, "containers stay in the cgroup the daemon gives them");
	if ((!strcmp(name, "pid") || !strcmp(name, "ipc") || !strcmp(name, "uts") ||
	     !strcmp(name, "userns") || !strcmp(name, "cgroupns")) && !strcmp(v, "host"))
		return refuse(c, opt, "containers keep namespaces of their own");
	if ((!strcmp(name, "network") || !strcmp(name, "net")) && names_host(v))
		return refuse(c, opt, "containers keep a network namespace of their own");
	if (!strcmp(name, "cap-add"))
		return check_caps(c, v);
	if (!strcmp(name, "security-opt"))
		return check_secopt(c, v);
	if (!strcmp(name, "volume"))
		return check_volume(c, "-v", v, rewrite);
	if (!strcmp(name, "mount"))
		return check_mount(c, v, rewrite);
	if (!strcmp(name, "allow"))
		return refuse(c, opt, "builds get no extra privilege");
	if (!strcmp(name, "file") || !strcmp(name, "project-directory") ||
	    (!strcmp(name, "env-file") && pisb_str_starts(c->what, "docker compose"))) {
		if (strcmp(v, "-") && need_inside(c, opt, "path", v) < 0)
			return -1;
		if (pisb_str_starts(c->what, "docker compose"))
			compose_note(c, name, v);
		return 0;
	}
	if (!strcmp(name, "build-context")) {
		const char *eq = strchr(v, '=');
		const char *src = eq ? eq + 1 : v;
		if (pisb_str_starts(src, "oci-layout://"))
			src += 13;
		else if (is_remote_ctx(src))
			return 0;
		return need_inside(c, opt, "build context", src);
	}
	if (!strcmp(name, "secret")) {
		static const char *const k[] = { "src", "source", NULL };
		return check_csv_paths(c, opt, v, k, false);
	}
	if (!strcmp(name, "output")) {
		static const char *const k[] = { "dest", NULL };
		return check_csv_paths(c, opt, v, k, true);
	}
	if (!strcmp(name, "ssh")) {
		const char *eq = strchr(v, '=');
		if (eq)
			for (const char *p = eq + 1; p && *p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL) {
				_cleanup_free_ char *one = xstrndup(p, strcspn(p, ","));
				if (need_inside(c, opt, "path", one) < 0)
					return -1;
			}
		return 0;
	}
	if (!strcmp(name, "restart"))
		c->has_restart = true;
	if (!strcmp(name, "rm"))
		c->rm = bool_true(v);
	if (!strcmp(name, "detach"))
		c->out->detached = bool_true(v);
	if (!strcmp(name, "publish") &&
	    pisb_docker_port_parse(v, &c->out->ports, &c->out->nports, c->e) < 0)
		return pisb_err_prefix(c->e, "%s: '--publish %s'", c->what, v);
	return 0;
}

/* One option out, spelled as the caller spelled it (a cluster split,
 * one option a word): flag is "--name" or "-c"; joined: the value was
 * given after '=' (long) and stays so; else a value is the next word. */
static int emit(struct pctx *c, const struct dopt *o, const char *flag, bool joined,
		const char *v)
{
	_cleanup_free_ char *rw = NULL;

	if (!o->val && v && !bool_word(v))
		return pisb_err_set(c->e, PISB_EXIT_USAGE, "%s: '%s=%s': not a boolean",
				    c->what, flag, v);
	if (check_opt(c, o->name, v, &rw) < 0)
		return -1;
	if (rw)
		v = rw;
	if (!v)
		pisb_strv_push(&c->out->argv, flag);
	else if (joined || !o->val)
		pisb_strv_pushf(&c->out->argv, "%s=%s", flag, v);
	else {
		pisb_strv_push(&c->out->argv, flag);
		pisb_strv_push(&c->out->argv, v);
	}
	return 0;
}

/* Parse options from args[*i] up to "--" or a positional word (left at
 * *i, not consumed). */
static int parse_opts(struct pctx *c, const struct dopt *t, char *const *args, size_t n,
		      size_t *i)
{
	for (; *i < n; (*i)++) {
		const char *a = args[*i];

		if (!strcmp(a, "--") || a[0] != '-' || !a[1])
			return 0;
		if (is_host_opt(a))
			return refuse_host(c, a);
		if (a[1] == '-') {
			size_t k = strcspn(a + 2, "=");
			const struct dopt *o = find_long(t, a + 2, k);
			const char *v = a[2 + k] ? a + 3 + k : NULL;

			if (!o)
				return pisb_err_set(c->e, PISB_EXIT_USAGE,
						    "%s: unknown option '%.*s' (refused: see pisb-docker(1))",
						    c->what, (int)(k + 2), a);
			_cleanup_free_ char *flag = xstrndup(a, k + 2);
			bool joined = v != NULL;
			if (o->val && !v) {
				if (*i + 1 >= n)
					return pisb_err_set(c->e, PISB_EXIT_USAGE,
							    "%s: '--%s' needs a value", c->what, o->name);
				v = args[++*i];
			}
			if (emit(c, o, flag, joined, v) < 0)
				return -1;
			continue;
		}
		for (size_t j = 1; a[j]; j++) {
			const struct dopt *o = find_short(t, a[j]);
			const char *v = NULL;
			char flag[3] = { '-', a[j], '\0' };

			if (!o)
				return pisb_err_set(c->e, PISB_EXIT_USAGE,
						    "%s: unknown option '-%c' (refused: see pisb-docker(1))",
						    c->what, a[j]);
			if (o->val) {
				v = a + j + 1;
				if (*v == '=')
					v++;
				if (!a[j + 1]) {
					if (*i + 1 >= n)
						return pisb_err_set(c->e, PISB_EXIT_USAGE,
								    "%s: '-%c' needs a value", c->what, a[j]);
					v = args[++*i];
				}
				if (emit(c, o, flag, false, v) < 0)
					return -1;
				break;
			}
			if (a[j + 1] == '=') {
				if (emit(c, o, flag, false, a + j + 2) < 0)
					return -1;
				break;
			}
			if (emit(c, o, flag, false, NULL) < 0)
				return -1;
		}
	}
	return 0;
}

static void push_rest(struct pctx *c, char *const *args, size_t n, size_t i)
{
	for (; i < n; i++)
		pisb_strv_push(&c->out->argv, args[i]);
}

/* run / create: options, then our label (and restart), then the image
 * and its command untouched. */
static int do_run(struct pctx *c, bool run, char *const *args, size_t n)
{
	size_t i = 0;

	if (parse_opts(c, run_opts, args, n, &i) < 0)
		return -1;
	pisb_strv_push(&c->out->argv, "--label");
	pisb_strv_push(&c->out->argv, "com.pi.sandbox=true");
	if (run && c->out->detached && !c->has_restart && !c->rm) {
		pisb_strv_push(&c->out->argv, "--restart");
		pisb_strv_push(&c->out->argv, "unless-stopped");
	}
	push_rest(c, args, n, i);
	return 0;
}

/* The next operand of a verb whose options go anywhere (pflag
 * intersperses): the options before it parsed by t, a "--" passed on and
 * ending them.  1 with *a, 0 at the end, -1 for a refused option. */
static int next_operand(struct pctx *c, const struct dopt *t, char *const *args, size_t n,
			size_t *i, bool *dashdash, const char **a)
{
	while (!*dashdash) {
		if (parse_opts(c, t, args, n, i) < 0)
			return -1;
		if (*i >= n)
			return 0;
		if (strcmp(args[*i], "--"))
			break;
		*dashdash = true;
		pisb_strv_push(&c->out->argv, args[(*i)++]);
	}
	if (*i >= n)
		return 0;
	*a = args[(*i)++];
	return 1;
}

/* build: options anywhere, one context. */
static int do_build(struct pctx *c, char *const *args, size_t n)
{
	size_t i = 0;
	bool dashdash = false;
	const char *a;
	int r;

	while ((r = next_operand(c, build_opts, args, n, &i, &dashdash, &a)) > 0) {
		if (strcmp(a, "-") && !is_remote_ctx(a) &&
		    need_inside(c, NULL, "build context", a) < 0)
			return -1;
		pisb_strv_push(&c->out->argv, a);
	}
	return r;
}

/* import: options anywhere, then FILE (a tar archive: "-" for standard
 * input, else a path in the workspace, read by the client inside; a URL
 * is refused: the archive comes from the caller, not from a download)
 * and an optional REPOSITORY[:TAG]. */
static int do_import(struct pctx *c, char *const *args, size_t n)
{
	size_t i = 0, pos = 0;
	bool dashdash = false;
	const char *a;
	int r;

	while ((r = next_operand(c, import_opts, args, n, &i, &dashdash, &a)) > 0) {
		if (pos++ == 0 && strcmp(a, "-")) {
			if (strstr(a, "://"))
				return pisb_err_set(c->e, PISB_EXIT_USAGE,
						    "%s: '%s' is refused: a URL (import reads a file in the workspace, or '-' for standard input; see pisb-docker(1))",
						    c->what, a);
			if (need_inside(c, NULL, "file", a) < 0)
				return -1;
		}
		pisb_strv_push(&c->out->argv, a);
	}
	/* no FILE: docker itself says what it needs */
	return r;
}

/* compose: its own options, the subcommand, then run/exec parsed in full
 * and the others searched for what is refused anywhere. */
static int do_compose(struct pctx *c, char *const *args, size_t n)
{
	static const char *const loose_paths[] = { "-f", "--file", "--project-directory",
						   "--env-file", NULL };
	_cleanup_free_ char *what = NULL;
	size_t i = 0;
	const char *sub;

	if (parse_opts(c, compose_opts, args, n, &i) < 0)
		return -1;
	if (i >= n)
		return 0;
	if (!strcmp(args[i], "--"))
		pisb_strv_push(&c->out->argv, args[i++]);
	if (i >= n)
		return 0;
	sub = args[i++];
	c->out->compose_at = c->out->argv.n;
	pisb_strv_push(&c->out->argv, sub);
	free(c->out->compose_sub);
	c->out->compose_sub = xstrdup(sub);
	what = xasprintf("docker compose %s", sub);
	c->what = what;
	if (!strcmp(sub, "run") || !strcmp(sub, "exec")) {
		if (parse_opts(c, !strcmp(sub, "run") ? compose_run_opts : compose_exec_opts,
			       args, n, &i) < 0)
			return -1;
		if (!strcmp(sub, "run")) {
			pisb_strv_push(&c->out->argv, "--label");
			pisb_strv_push(&c->out->argv, "com.pi.sandbox=true");
		}
		push_rest(c, args, n, i);
		return 0;
	}
	for (; i < n && strcmp(args[i], "--"); i++) {
		const char *a = args[i];
		size_t k = strcspn(a, "=");

		if (is_host_opt(a))
			return refuse_host(c, a);
		if (!strncmp(a, "--privileged", k) && k == 12)
			return refuse(c, "--privileged", "it hands containers every device and capability of the sandbox");
		for (int p = 0; loose_paths[p]; p++) {
			const char *v = NULL;
			size_t pl = strlen(loose_paths[p]);
			if (!strcmp(a, loose_paths[p]) && i + 1 < n)
				v = args[i + 1];
			else if (!strncmp(a, loose_paths[p], pl) && a[pl] == '=')
				v = a + pl + 1;
			else if (pl == 2 && !strncmp(a, loose_paths[p], 2) && a[2])
				v = a + 2;
			if (v && strcmp(v, "-") && need_inside(c, loose_paths[p], "path", v) < 0)
				return -1;
			if (v && p < 2)
				compose_note(c, "file", v);
			else if (v && p == 2)
				compose_note(c, "project-directory", v);
		}
		pisb_strv_push(&c->out->argv, a);
	}
	push_rest(c, args, n, i);
	return 0;
}

/* ---- compose files ----
 *
 * The files a compose command loads (its -f, else the default name and
 * its override in the project directory) are read inside the sandbox,
 * through the driver (with the sandbox's rights, never the host's), and
 * checked with run's rules: what a service may not have (privileged,
 * host namespaces, devices, capabilities, security options, cgroup
 * parent), binds, build contexts, env files, secrets and configs inside
 * the workspace, ports that are ports.  What pisb cannot see is refused:
 * include, extends of another file, '-f -', and interpolation ($VAR,
 * ${VAR}: compose fills them from the environment and .env) in any value
 * that is checked. */

struct cctx {
	struct pctx *c;
	const struct pisb_json *j;
	const char *dir;            /* the project directory: relative paths */
};

static const char *tok_str(const struct cctx *x, int t, char *buf, size_t n)
{
	const jsmntok_t *k = &x->j->tok[t];
	size_t len = (size_t)(k->end - k->start);

	if (len >= n)
		len = n - 1;
	memcpy(buf, x->j->js + k->start, len);
	buf[len] = '\0';
	return buf;
}

/* A scalar's text (caller frees), NULL for an object/array.  null, true
 * and false come as their words. */
static char *scalar(const struct cctx *x, int t)
{
	size_t n;
	const char *raw;

	if (t < 0 || x->j->tok[t].type == JSMN_OBJECT || x->j->tok[t].type == JSMN_ARRAY)
		return NULL;
	if (x->j->tok[t].type == JSMN_STRING)
		return pisb_json_str(x->j, t);
	raw = pisb_json_raw(x->j, t, &n);
	return xstrndup(raw, n);
}

/* compose interpolates $VAR and ${VAR} ("$$" is a '$') */
static bool interpolated(const char *s)
{
	for (const char *p = s; (p = strchr(p, '$')); p++) {
		if (p[1] == '$') {
			p++;
			continue;
		}
		return true;
	}
	return false;
}

static int cc_refuse(struct cctx *x, const char *key, const char *why)
{
	return refuse(x->c, key, why);
}

/* a scalar value of key, checked for interpolation (caller frees) */
static int cc_scalar(struct cctx *x, const char *key, int t, char **out)
{
	*out = scalar(x, t);
	if (!*out)
		return pisb_err_set(x->c->e, PISB_EXIT_USAGE, "%s: '%s': not a scalar", x->c->what, key);
	if (interpolated(*out)) {
		free(*out);
		*out = NULL;
		return cc_refuse(x, key, "an interpolated value ($VAR) is not known before compose runs");
	}
	return 0;
}

/* path (relative to the project directory) inside the workspace */
static int cc_path(struct cctx *x, const char *key, const char *kind, const char *p)
{
	_cleanup_free_ char *abs = NULL;

	if (p[0] == '~')
		return pisb_err_set(x->c->e, PISB_EXIT_USAGE,
				    "%s: '%s': %s '%s' is outside the workspace '%s' (see pisb-docker(1))",
				    x->c->what, key, kind, p, x->c->s->workspace);
	abs = p[0] == '/' ? xstrdup(p) : xasprintf("%s/%s", x->dir, p);
	return need_inside(x->c, key, kind, abs);
}

static int cc_path_tok(struct cctx *x, const char *key, const char *kind, int t)
{
	_cleanup_free_ char *v = NULL;

	if (cc_scalar(x, key, t, &v) < 0)
		return -1;
	return cc_path(x, key, kind, v);
}

static bool cc_true(struct cctx *x, int t)
{
	_cleanup_free_ char *v = scalar(x, t);

	return v && (bool_true(v) || !strcmp(v, "yes") || !strcmp(v, "on"));
}

/* each item of a list (or the one scalar) through fn */
static int cc_each(struct cctx *x, const char *key, int t,
		   int (*fn)(struct cctx *, const char *, int))
{
	if (t < 0)
		return 0;
	if (x->j->tok[t].type != JSMN_ARRAY)
		return fn(x, key, t);
	for (int i = 0, k = t + 1; i < x->j->tok[t].size; i++, k = pisb_json_skip(x->j, k)) {
		_cleanup_free_ char *ik = xasprintf("%s[%d]", key, i);
		if (fn(x, ik, k) < 0)
			return -1;
	}
	return 0;
}

static int cc_cap(struct cctx *x, const char *key, int t)
{
	_cleanup_free_ char *v = NULL;

	if (cc_scalar(x, key, t, &v) < 0)
		return -1;
	return check_caps(x->c, v);
}

static int cc_secopt(struct cctx *x, const char *key, int t)
{
	_cleanup_free_ char *v = NULL;

	if (cc_scalar(x, key, t, &v) < 0)
		return -1;
	return check_secopt(x->c, v);
}

static int cc_envfile(struct cctx *x, const char *key, int t)
{
	if (x->j->tok[t].type == JSMN_OBJECT)
		t = pisb_json_get(x->j, t, "path");
	return t < 0 ? 0 : cc_path_tok(x, key, "env file", t);
}

static int cc_port(struct cctx *x, const char *key, int t)
{
	_cleanup_free_ char *v = NULL;
	struct pisb_docker_port *ports = NULL;
	size_t n = 0;
	int r;

	if (x->j->tok[t].type == JSMN_OBJECT)
		return 0;   /* {target, published, host_ip, protocol} */
	if (cc_scalar(x, key, t, &v) < 0)
		return -1;
	r = pisb_docker_port_parse(v, &ports, &n, x->c->e);
	free(ports);
	return r < 0 ? pisb_err_prefix(x->c->e, "%s: '%s'", x->c->what, key) : 0;
}

static int cc_volume(struct cctx *x, const char *key, int t)
{
	if (x->j->tok[t].type == JSMN_OBJECT) {
		_cleanup_free_ char *type = scalar(x, pisb_json_get(x->j, t, "type"));
		int src = pisb_json_get(x->j, t, "source");
		if (type && interpolated(type))
			return cc_refuse(x, key, "an interpolated value ($VAR) is not known before compose runs");
		if (type && strcmp(type, "bind") && strcmp(type, "volume") && strcmp(type, "tmpfs"))
			return cc_refuse(x, key, "only bind, volume and tmpfs mounts are known to pisb");
		if (type && !strcmp(type, "bind") && src >= 0)
			return cc_path_tok(x, key, "bind source", src);
		if (src >= 0) {
			_cleanup_free_ char *v = NULL;
			return cc_scalar(x, key, src, &v);
		}
		return 0;
	}
	_cleanup_free_ char *v = NULL;
	if (cc_scalar(x, key, t, &v) < 0)
		return -1;
	char *colon = strchr(v, ':');
	if (!colon)
		return 0;   /* an anonymous volume */
	*colon = '\0';
	if (v[0] != '.' && v[0] != '/' && v[0] != '~')
		return 0;   /* a named volume */
	return cc_path(x, key, "bind source", v);
}

static int cc_build(struct cctx *x, const char *key, int t)
{
	_cleanup_free_ char *ctx = NULL, *ctxabs = NULL;
	int k;

	if (x->j->tok[t].type != JSMN_OBJECT) {
		if (cc_scalar(x, key, t, &ctx) < 0)
			return -1;
		return is_remote_ctx(ctx) ? 0 : cc_path(x, key, "build context", ctx);
	}
	_cleanup_free_ char *ck = xasprintf("%s.context", key);
	if ((k = pisb_json_get(x->j, t, "context")) >= 0) {
		if (cc_scalar(x, ck, k, &ctx) < 0)
			return -1;
		if (!is_remote_ctx(ctx) && cc_path(x, ck, "build context", ctx) < 0)
			return -1;
	}
	if ((k = pisb_json_get(x->j, t, "dockerfile")) >= 0 && (!ctx || !is_remote_ctx(ctx))) {
		_cleanup_free_ char *df = NULL, *dk = xasprintf("%s.dockerfile", key);
		if (cc_scalar(x, dk, k, &df) < 0)
			return -1;
		ctxabs = df[0] == '/' ? xstrdup(df) : xasprintf("%s/%s", ctx ? ctx : ".", df);
		if (cc_path(x, dk, "Dockerfile", ctxabs) < 0)
			return -1;
	}
	if ((k = pisb_json_get(x->j, t, "additional_contexts")) >= 0) {
		_cleanup_free_ char *ak = xasprintf("%s.additional_contexts", key);
		const jsmntok_t *a = &x->j->tok[k];
		for (int i = 0, m = k + 1; i < a->size; i++) {
			int v = a->type == JSMN_OBJECT ? m + 1 : m;
			_cleanup_free_ char *s = NULL;
			if (cc_scalar(x, ak, v, &s) < 0)
				return -1;
			const char *p = a->type == JSMN_OBJECT ? s : (strchr(s, '=') ? strchr(s, '=') + 1 : s);
			if (pisb_str_starts(p, "oci-layout://"))
				p += 13;
			else if (is_remote_ctx(p))
				p = NULL;
			if (p && cc_path(x, ak, "build context", p) < 0)
				return -1;
			m = pisb_json_skip(x->j, v);
		}
	}
	if (pisb_json_get(x->j, t, "privileged") >= 0 && cc_true(x, pisb_json_get(x->j, t, "privileged")))
		return cc_refuse(x, "build.privileged", "builds get no extra privilege");
	if (pisb_json_get(x->j, t, "entitlements") >= 0)
		return cc_refuse(x, "build.entitlements", "builds get no extra privilege");
	if (pisb_json_get(x->j, t, "network") >= 0) {
		_cleanup_free_ char *v = NULL, *nk = xasprintf("%s.network", key);
		if (cc_scalar(x, nk, pisb_json_get(x->j, t, "network"), &v) < 0)
			return -1;
		if (!strcmp(v, "host"))
			return cc_refuse(x, nk, "builds keep a network namespace of their own");
	}
	return 0;
}

static int cc_service(struct cctx *x, const char *svc, int t)
{
	static const char *const ns_keys[] = { "pid", "ipc", "uts", "userns_mode", "cgroup", NULL };
	static const char *const no_keys[] = { "devices", "device_cgroup_rules", "gpus",
					       "cgroup_parent", NULL };
	char key[256];
	int k;

	if (x->j->tok[t].type != JSMN_OBJECT)
		return 0;   /* compose refuses it */
#define K(name) (snprintf(key, sizeof(key), "services.%s.%s", svc, name), key)
	if ((k = pisb_json_get(x->j, t, "privileged")) >= 0) {
		_cleanup_free_ char *v = NULL;
		if (cc_scalar(x, K("privileged"), k, &v) < 0)
			return -1;
		if (cc_true(x, k))
			return cc_refuse(x, key, "it hands containers every device and capability of the sandbox");
	}
	for (int i = 0; ns_keys[i]; i++)
		if ((k = pisb_json_get(x->j, t, ns_keys[i])) >= 0) {
			_cleanup_free_ char *v = NULL;
			if (cc_scalar(x, K(ns_keys[i]), k, &v) < 0)
				return -1;
			if (!strcmp(v, "host"))
				return cc_refuse(x, key, "containers keep namespaces of their own");
		}
	if ((k = pisb_json_get(x->j, t, "network_mode")) >= 0) {
		_cleanup_free_ char *v = NULL;
		if (cc_scalar(x, K("network_mode"), k, &v) < 0)
			return -1;
		if (!strcmp(v, "host"))
			return cc_refuse(x, key, "containers keep a network namespace of their own");
	}
	for (int i = 0; no_keys[i]; i++)
		if (pisb_json_get(x->j, t, no_keys[i]) >= 0)
			return cc_refuse(x, K(no_keys[i]), !strcmp(no_keys[i], "cgroup_parent") ?
					 "containers stay in the cgroup the daemon gives them" :
					 "containers get no device of the sandbox");
	if ((k = pisb_json_get(x->j, t, "deploy")) >= 0 &&
	    (k = pisb_json_get(x->j, k, "resources")) >= 0 &&
	    (k = pisb_json_get(x->j, k, "reservations")) >= 0 &&
	    pisb_json_get(x->j, k, "devices") >= 0)
		return cc_refuse(x, K("deploy.resources.reservations.devices"),
				 "containers get no device of the sandbox");
	if ((k = pisb_json_get(x->j, t, "extends")) >= 0 &&
	    x->j->tok[k].type == JSMN_OBJECT && pisb_json_get(x->j, k, "file") >= 0)
		return cc_refuse(x, K("extends.file"), "pisb does not inspect another file");
	if (cc_each(x, K("cap_add"), pisb_json_get(x->j, t, "cap_add"), cc_cap) < 0 ||
	    cc_each(x, K("security_opt"), pisb_json_get(x->j, t, "security_opt"), cc_secopt) < 0 ||
	    cc_each(x, K("volumes"), pisb_json_get(x->j, t, "volumes"), cc_volume) < 0 ||
	    cc_each(x, K("env_file"), pisb_json_get(x->j, t, "env_file"), cc_envfile) < 0 ||
	    cc_each(x, K("ports"), pisb_json_get(x->j, t, "ports"), cc_port) < 0)
		return -1;
	if ((k = pisb_json_get(x->j, t, "build")) >= 0 && cc_build(x, K("build"), k) < 0)
		return -1;
#undef K
	return 0;
}

/* the top level: services, and the volumes, networks, secrets and
 * configs they may name */
static int cc_doc(struct cctx *x)
{
	const struct pisb_json *j = x->j;
	char key[256], name[128];
	int t;

	if (j->ntok < 1 || j->tok[0].type != JSMN_OBJECT)
		return 0;   /* compose refuses it */
	/* only the keys of the format whose services are under services:
	 * (compose v1 reads a file with none of services, networks and
	 * volumes, or a version that is a mapping, as its legacy format,
	 * a service a top-level key) */
	for (int i = 0, k = 1; i < j->tok[0].size; i++) {
		static const char *const top[] = { "version", "name", "services", "volumes", "networks",
						   "secrets", "configs", "include", NULL };
		bool known = false;
		tok_str(x, k, name, sizeof(name));
		for (int m = 0; top[m]; m++)
			known |= !strcmp(name, top[m]);
		if (!known && !pisb_str_starts(name, "x-"))
			return cc_refuse(x, name, "not a top-level key of a compose file with services: "
					 "a service at the top level is compose v1's legacy format, which pisb does not inspect");
		k = pisb_json_skip(j, k + 1);
	}
	if ((t = pisb_json_get(j, 0, "version")) >= 0 &&
	    (j->tok[t].type == JSMN_OBJECT || j->tok[t].type == JSMN_ARRAY))
		return cc_refuse(x, "version", "not a string (compose v1 would read the file as its legacy format)");
	if (pisb_json_get(j, 0, "version") < 0 && j->tok[0].size > 0) {
		static const char *const v2[] = { "services", "networks", "volumes", NULL };
		bool any = false;
		for (int m = 0; v2[m]; m++) {
			int v = pisb_json_get(j, 0, v2[m]);
			any |= v >= 0 && j->tok[v].type == JSMN_OBJECT && j->tok[v].size > 0;
		}
		if (!any)
			return cc_refuse(x, "services", "missing or empty, and no version: compose v1 would read the file as its legacy format, which pisb does not inspect");
	}
	if (pisb_json_get(j, 0, "include") >= 0)
		return cc_refuse(x, "include", "pisb does not inspect another file");
	if ((t = pisb_json_get(j, 0, "services")) >= 0 && j->tok[t].type == JSMN_OBJECT)
		for (int i = 0, k = t + 1; i < j->tok[t].size; i++) {
			if (cc_service(x, tok_str(x, k, name, sizeof(name)), k + 1) < 0)
				return -1;
			k = pisb_json_skip(j, k + 1);
		}
	if ((t = pisb_json_get(j, 0, "volumes")) >= 0 && j->tok[t].type == JSMN_OBJECT)
		for (int i = 0, k = t + 1; i < j->tok[t].size; i++) {
			int o = pisb_json_get(j, k + 1, "driver_opts");
			snprintf(key, sizeof(key), "volumes.%s.driver_opts.device", tok_str(x, k, name, sizeof(name)));
			if (o >= 0 && pisb_json_get(j, o, "device") >= 0)
				return cc_refuse(x, key, "a volume over a path or device is a bind by another name");
			k = pisb_json_skip(j, k + 1);
		}
	if ((t = pisb_json_get(j, 0, "networks")) >= 0 && j->tok[t].type == JSMN_OBJECT)
		for (int i = 0, k = t + 1; i < j->tok[t].size; i++) {
			int v = k + 1;
			_cleanup_free_ char *nm = j->tok[v].type == JSMN_OBJECT ?
				scalar(x, pisb_json_get(j, v, "name")) : NULL;
			_cleanup_free_ char *drv = j->tok[v].type == JSMN_OBJECT ?
				scalar(x, pisb_json_get(j, v, "driver")) : NULL;
			snprintf(key, sizeof(key), "networks.%s", tok_str(x, k, name, sizeof(name)));
			if ((nm && (!strcmp(nm, "host") || interpolated(nm))) ||
			    (drv && (!strcmp(drv, "host") || interpolated(drv))) ||
			    (!strcmp(name, "host") && j->tok[v].type == JSMN_OBJECT &&
			     pisb_json_get(j, v, "external") >= 0 && !nm))
				return cc_refuse(x, key, "containers keep a network namespace of their own");
			k = pisb_json_skip(j, v);
		}
	for (int s = 0; s < 2; s++) {
		const char *top = s ? "configs" : "secrets";
		if ((t = pisb_json_get(j, 0, top)) < 0 || j->tok[t].type != JSMN_OBJECT)
			continue;
		for (int i = 0, k = t + 1; i < j->tok[t].size; i++) {
			int f = j->tok[k + 1].type == JSMN_OBJECT ? pisb_json_get(j, k + 1, "file") : -1;
			snprintf(key, sizeof(key), "%s.%s.file", top, tok_str(x, k, name, sizeof(name)));
			if (f >= 0 && cc_path_tok(x, key, "file", f) < 0)
				return -1;
			k = pisb_json_skip(j, k + 1);
		}
	}
	return 0;
}

/* compose subcommands that create containers or build images: their
 * files are inspected */
static bool compose_creates(const char *sub)
{
	static const char *const subs[] = { "up", "run", "create", "build", "scale", "watch", NULL };
	for (int i = 0; subs[i]; i++)
		if (!strcmp(sub, subs[i]))
			return true;
	return false;
}

/* init: pisb's own options (docker_init.h), DIR confined to the workspace
 * and made absolute: `[--lang L] [--force] [--compose] -- DIR`. */
static int do_init(struct pctx *c, char *const *args, size_t n)
{
	struct pisb_docker_init o;
	_cleanup_free_ char *dir = NULL;

	if (pisb_docker_init_parse(args, n, &o, c->e) < 0)
		return -1;
	if (!(dir = confined(c->s, o.dir ? o.dir : ".")))
		return need_inside(c, NULL, "directory", o.dir);
	if (o.lang)
		pisb_strv_pushf(&c->out->argv, "--lang=%s", o.lang);
	if (o.force)
		pisb_strv_push(&c->out->argv, "--force");
	if (o.compose)
		pisb_strv_push(&c->out->argv, "--compose");
	pisb_strv_push(&c->out->argv, "--");
	pisb_strv_push(&c->out->argv, dir);
	return 0;
}

int pisb_docker_policy(const struct pisb_docker_scope *s, const char *verb,
		       char *const *args, size_t n, struct pisb_docker_args *out,
		       struct pisb_err *e)
{
	_cleanup_free_ char *what = xasprintf("docker %s", verb);
	struct pctx c = { .s = s, .what = what, .out = out, .e = e };

	/* a NULL-terminated vector even when it stays empty */
	pisb_strv_push(&out->argv, "");
	free(out->argv.v[--out->argv.n]);
	out->argv.v[out->argv.n] = NULL;
	if (!strcmp(verb, "run") || !strcmp(verb, "create"))
		return do_run(&c, !strcmp(verb, "run"), args, n);
	if (!strcmp(verb, "exec")) {
		size_t i = 0;
		if (parse_opts(&c, exec_opts, args, n, &i) < 0)
			return -1;
		push_rest(&c, args, n, i);
		return 0;
	}
	if (!strcmp(verb, "build"))
		return do_build(&c, args, n);
	if (!strcmp(verb, "compose"))
		return do_compose(&c, args, n);
	if (!strcmp(verb, "init"))
		return do_init(&c, args, n);
	if (!strcmp(verb, "import"))
		return do_import(&c, args, n);
	/* curl and init take pisb's own arguments, not docker's */
	for (size_t i = 0; i < n && strcmp(verb, "curl") && strcmp(verb, "init"); i++) {
		if (!strcmp(args[i], "--"))
			break;
		if (is_host_opt(args[i]))
			return refuse_host(&c, args[i]);
	}
	push_rest(&c, args, n, 0);
	return 0;
}

void pisb_docker_args_release(struct pisb_docker_args *a)
{
	pisb_strv_release(&a->argv);
	pisb_strv_release(&a->compose_files);
	free(a->compose_dir);
	a->compose_dir = NULL;
	free(a->compose_sub);
	a->compose_sub = NULL;
	free(a->ports);
	a->ports = NULL;
	a->nports = 0;
}

/* ---- publish specs ---- */

static int port_range(const char *s, size_t len, int *lo, int *hi)
{
	char buf[32];
	char *dash, *end;
	long a, b;

	if (!len || len >= sizeof(buf))
		return -1;
	memcpy(buf, s, len);
	buf[len] = '\0';
	dash = strchr(buf, '-');
	if (dash)
		*dash = '\0';
	if (!isdigit((unsigned char)buf[0]))
		return -1;
	a = strtol(buf, &end, 10);
	if (*end || a < 1 || a > 65535)
		return -1;
	b = a;
	if (dash) {
		if (!isdigit((unsigned char)dash[1]))
			return -1;
		b = strtol(dash + 1, &end, 10);
		if (*end || b < a || b > 65535)
			return -1;
	}
	*lo = (int)a;
	*hi = (int)b;
	return 0;
}

int pisb_docker_port_parse(const char *spec, struct pisb_docker_port **ports, size_t *n,
			   struct pisb_err *e)
{
	const char *p = spec, *slash, *last;
	char ip[64] = "", proto[8] = "tcp";
	int hlo = 0, hhi = 0, clo, chi;
	size_t plen;

	if (*p == '[') {
		const char *rb = strchr(p, ']');
		if (!rb || rb[1] != ':' || (size_t)(rb - p - 1) >= sizeof(ip))
			goto bad;
		memcpy(ip, p + 1, (size_t)(rb - p - 1));
		ip[rb - p - 1] = '\0';
		p = rb + 2;
	}
	slash = strchr(p, '/');
	if (slash) {
		if (strcmp(slash + 1, "tcp") && strcmp(slash + 1, "udp") && strcmp(slash + 1, "sctp"))
			goto bad;
		snprintf(proto, sizeof(proto), "%s", slash + 1);
	}
	plen = slash ? (size_t)(slash - p) : strlen(p);
	/* CPORT, HOST:CPORT, IP:HOST:CPORT, IP::CPORT (IPv4 or a bare IPv6) */
	last = memrchr(p, ':', plen);
	if (!last) {
		if (port_range(p, plen, &clo, &chi) < 0)
			goto bad;
	} else {
		const char *hs, *prev;
		if (port_range(last + 1, plen - (size_t)(last + 1 - p), &clo, &chi) < 0)
			goto bad;
		prev = last > p ? memrchr(p, ':', (size_t)(last - p)) : NULL;
		hs = prev ? prev + 1 : p;
		if (prev) {
			if (ip[0] || (size_t)(prev - p) >= sizeof(ip) || prev == p)
				goto bad;
			memcpy(ip, p, (size_t)(prev - p));
			ip[prev - p] = '\0';
		}
		if (last > hs && port_range(hs, (size_t)(last - hs), &hlo, &hhi) < 0)
			goto bad;
		if (last == hs && !prev && !ip[0])
			goto bad;   /* ":80" */
	}
	if (hlo && hhi - hlo != chi - clo && hhi != hlo)
		goto bad;
	if (chi - clo >= 1024)
		goto bad;
	for (int k = 0; k <= chi - clo; k++) {
		struct pisb_docker_port *d;
		*ports = xrealloc(*ports, (*n + 1) * sizeof(**ports));
		d = &(*ports)[(*n)++];
		snprintf(d->ip, sizeof(d->ip), "%s", ip);
		d->host = hlo ? (hhi == hlo ? hlo : hlo + k) : 0;
		d->cport = clo + k;
		snprintf(d->proto, sizeof(d->proto), "%s", proto);
	}
	return 0;
bad:
	return pisb_err_set(e, PISB_EXIT_USAGE,
			    "'%s' is not a port to publish ([IP:][HOST:]CONTAINER[/tcp|udp|sctp], IPv6 in [])",
			    spec);
}

void pisb_docker_run_ports(char *const *args, size_t n, struct pisb_docker_port **ports,
			   size_t *np)
{
	/* every path is inside "/": only the grammar matters here */
	struct pisb_docker_scope s = { "/", false };
	struct pisb_docker_args da = PISB_DOCKER_ARGS_INIT;
	struct pisb_err ig = PISB_ERR_INIT;

	pisb_docker_policy(&s, "run", args, n, &da, &ig);
	*ports = da.ports;
	*np = da.nports;
	da.ports = NULL;
	da.nports = 0;
	pisb_docker_args_release(&da);
}

/* How many words compose's global option A takes (after the policy): 2
 * with its value in the next word, else 1. */
static size_t compose_opt_words(const char *a)
{
	const struct dopt *o;

	if (a[1] == '-')
		o = find_long(compose_opts, a + 2, strcspn(a + 2, "="));
	else
		o = a[2] ? NULL : find_short(compose_opts, a[1]);
	return o && o->val && !strchr(a, '=') ? 2 : 1;
}

size_t pisb_docker_compose_sub(char *const *args, size_t n)
{
	size_t i = 0;

	while (i < n && args[i][0] == '-' && args[i][1]) {
		if (!strcmp(args[i], "--"))
			return i + 1;
		i += compose_opt_words(args[i]);
	}
	return i < n ? i : n;
}

bool pisb_docker_compose_run_detached(char *const *args, size_t n)
{
	bool d = false;

	for (size_t i = 0; i < n && args[i][0] == '-' && args[i][1] && strcmp(args[i], "--"); i++) {
		const struct dopt *o;
		const char *a = args[i], *eq = strchr(a, '=');
		if (a[1] == '-')
			o = find_long(compose_run_opts, a + 2, strcspn(a + 2, "="));
		else
			o = a[2] ? NULL : find_short(compose_run_opts, a[1]);
		if (o && !strcmp(o->name, "detach"))
			d = !eq || bool_true(eq + 1);
		if (o && o->val && !eq)
			i++;
	}
	return d;
}

const char *pisb_docker_compose_file(char *const *args, size_t nopts)
{
	for (size_t i = 0; i < nopts && strcmp(args[i], "--"); i += compose_opt_words(args[i])) {
		if ((!strcmp(args[i], "-f") || !strcmp(args[i], "--file")) && i + 1 < nopts)
			return args[i + 1];
		if (pisb_str_starts(args[i], "--file="))
			return args[i] + 7;
	}
	return NULL;
}

bool pisb_docker_env_refused(const char *name)
{
	return pisb_str_starts(name, "DOCKER_") || pisb_str_starts(name, "COMPOSE_");
}

/* ---- compose files, read in the sandbox ---- */

#define COMPOSE_MAX (1 << 20)

/* The driver's read_text in a child process: the file verbs move the
 * process into the sandbox for good (its namespaces, or a root of the
 * shared workspace), and this one goes on to run docker.  The child
 * answers on a pipe: its exit code (1 byte), the error message's length
 * (4 bytes) and message, then the file's text. */
static int in_child(struct pisb_sandbox *sb, const char *path, struct pisb_buf *text,
		    struct pisb_err *e)
{
	int p[2];
	pid_t pid;
	_cleanup_buf_ struct pisb_buf ans = PISB_BUF_INIT;
	int st = 0;

	pid = pisb_fork_piped(p, e);
	if (pid < 0)
		return -1;
	if (pid == 0) {
		struct pisb_err ce = PISB_ERR_INIT;
		struct pisb_fs_text t = { 0 };
		_cleanup_free_ char *abs = NULL;
		int r;
		uint32_t n;
		unsigned char code;

		close(p[0]);
		r = sb->drv->read_text(sb, path, 1, 0, COMPOSE_MAX + 1, &abs, &t, &ce);
		code = r < 0 ? (unsigned char)(ce.code ? ce.code : PISB_EXIT_FAIL) : 0;
		n = r < 0 ? (uint32_t)strlen(ce.msg) : 0;
		if (r == 0 && (t.truncated || t.bytes > COMPOSE_MAX)) {
			code = PISB_EXIT_USAGE;
			snprintf(ce.msg, sizeof(ce.msg), "larger than 1 MiB");
			n = (uint32_t)strlen(ce.msg);
		}
		if (pisb_write_all(p[1], &code, 1) < 0 || pisb_write_all(p[1], &n, 4) < 0 ||
		    pisb_write_all(p[1], ce.msg, n) < 0 ||
		    (!code && pisb_write_all(p[1], t.content.s ? t.content.s : "", t.content.len) < 0))
			_exit(1);
		_exit(0);
	}
	close(p[1]);
	pisb_read_fd(p[0], &ans, COMPOSE_MAX + 4096);
	close(p[0]);
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (ans.len < 5)
		return pisb_err_set(e, PISB_EXIT_FAIL, "'%s': the reader inside the sandbox gave no answer", path);
	{
		uint32_t n;
		memcpy(&n, ans.s + 1, 4);
		if (n > ans.len - 5)
			return pisb_err_set(e, PISB_EXIT_FAIL, "'%s': a short answer from inside the sandbox", path);
		if (ans.s[0])
			return pisb_err_set(e, (unsigned char)ans.s[0], "%.*s", (int)n, ans.s + 5);
		pisb_buf_add(text, ans.s + 5 + n, ans.len - 5 - n);
	}
	return 0;
}

/* path's text read by the driver (inside, with the sandbox's rights);
 * *missing (when given) instead of an error for a file that is not there */
static int compose_read(struct pisb_sandbox *sb, const char *path, struct pisb_buf *text,
			bool *missing, struct pisb_err *e)
{
	if (!sb->drv->read_text)
		return pisb_err_set(e, PISB_EXIT_USAGE,
				    "docker compose: the %s driver cannot read the compose file '%s' to inspect it",
				    sb->drv->name, path);
	if (in_child(sb, path, text, e) == 0)
		return 0;
	if (missing && e->code == PISB_EXIT_NOTFOUND) {
		*missing = true;
		return 0;
	}
	return pisb_err_prefix(e, "docker compose: the compose file '%s'", path);
}

static int compose_check_one(struct pisb_sandbox *sb, const struct pisb_docker_scope *s,
			     const char *file, const char *dir,
			     bool *missing, struct pisb_err *e)
{
	_cleanup_buf_ struct pisb_buf text = PISB_BUF_INIT, json = PISB_BUF_INIT;
	_cleanup_free_ char *what = xasprintf("docker compose: '%s'", file);
	struct pisb_docker_args scratch = PISB_DOCKER_ARGS_INIT;
	struct pctx c = { .s = s, .what = what, .out = &scratch, .e = e };
	struct pisb_json j;
	struct cctx x = { &c, &j, dir };
	int r;

	if (compose_read(sb, file, &text, missing, e) < 0)
		return -1;
	if (missing && *missing)
		return 0;
	if (pisb_yaml_to_json(text.s ? text.s : "", text.len, file, &json, e) < 0)
		return pisb_err_prefix(e, "docker compose: cannot inspect the compose file");
	if (pisb_json_parse(&j, json.s, json.len, e) < 0)
		return pisb_err_prefix(e, "docker compose: '%s'", file);
	r = cc_doc(&x);
	pisb_json_release(&j);
	pisb_docker_args_release(&scratch);
	return r;
}

/* Inspect the files out's compose command loads; name the defaults found
 * with -f (so that COMPOSE_FILE in a .env cannot swap them). */
static int compose_inspect(struct pisb_sandbox *sb, const struct pisb_docker_scope *s,
			   struct pisb_docker_args *out, struct pisb_err *e)
{
	static const char *const defaults[] = { "compose.yaml", "compose.yml", "docker-compose.yaml",
						"docker-compose.yml", NULL };
	static const char *const overrides[] = { "compose.override.yaml", "compose.override.yml",
						 "docker-compose.override.yaml",
						 "docker-compose.override.yml", NULL };
	_cleanup_strv_ struct pisb_strv files = PISB_STRV_INIT;
	_cleanup_strv_ struct pisb_strv argv = PISB_STRV_INIT;
	_cleanup_free_ char *dir = NULL;
	bool given = out->compose_files.n > 0;

	dir = out->compose_dir ? (out->compose_dir[0] == '/' ? xstrdup(out->compose_dir) :
				  xasprintf("%s/%s", s->workspace, out->compose_dir)) :
	      xstrdup(s->workspace);
	for (size_t i = 0; i < out->compose_files.n; i++) {
		const char *f = out->compose_files.v[i];
		if (!strcmp(f, "-"))
			return pisb_err_set(e, PISB_EXIT_USAGE,
					    "docker compose: '-f -' is refused: pisb inspects only compose files it can read (see pisb-docker(1))");
		pisb_strv_push(&files, f);
	}
	if (given && !out->compose_dir) {
		/* the project directory: the first file's */
		_cleanup_free_ char *f0 = out->compose_files.v[0][0] == '/' ?
			xstrdup(out->compose_files.v[0]) :
			xasprintf("%s/%s", s->workspace, out->compose_files.v[0]);
		char *slash = strrchr(f0, '/');
		*slash = '\0';
		free(dir);
		dir = xstrdup(f0[0] ? f0 : "/");
	}
	for (size_t i = 0; !given && i < 2; i++) {
		const char *const *names = i ? overrides : defaults;
		for (int k = 0; names[k]; k++) {
			_cleanup_free_ char *f = out->compose_dir ? xasprintf("%s/%s", out->compose_dir, names[k]) :
						 xstrdup(names[k]);
			bool missing = false;
			if (compose_check_one(sb, s, f, dir, &missing, e) < 0)
				return -1;
			if (missing)
				continue;
			pisb_strv_push(&files, f);
			break;
		}
		if (!files.n)
			return 0;   /* compose says there is no file */
	}
	for (size_t i = 0; given && i < files.n; i++)
		if (compose_check_one(sb, s, files.v[i], dir, NULL, e) < 0)
			return -1;
	/* the files found, named before the subcommand */
	for (size_t i = 0; i < out->compose_at && i < out->argv.n; i++)
		pisb_strv_push(&argv, out->argv.v[i]);
	for (size_t i = 0; !given && i < files.n; i++) {
		pisb_strv_push(&argv, "-f");
		pisb_strv_push(&argv, files.v[i]);
	}
	for (size_t i = out->compose_at; i < out->argv.n; i++)
		pisb_strv_push(&argv, out->argv.v[i]);
	if (!given)
		out->compose_at += 2 * files.n;
	pisb_strv_release(&out->argv);
	out->argv = argv;
	argv = (struct pisb_strv)PISB_STRV_INIT;
	return 0;
}

/* ---- the sandbox's scope ---- */

int pisb_docker_policy_sandbox(struct pisb_sandbox *sb, const char *verb,
			       char *const *args, size_t n, struct pisb_docker_args *out,
			       struct pisb_err *e)
{
	const struct pisb_config *cfg = pisb_sandbox_config(sb, e);
	const struct pisb_record *rec;
	_cleanup_free_ char *ws = NULL;
	struct pisb_docker_scope s = { 0 };

	if (!cfg)
		return -1;
	rec = pisb_sandbox_record(sb, e);
	if (!rec)
		return -1;
	/* a driver whose workspace lives elsewhere inside (sbx: the host
	 * path, shared into the microVM) records it as remote.workspace */
	if (rec->remote_json) {
		struct pisb_json j;
		struct pisb_err ig = PISB_ERR_INIT;
		if (pisb_json_parse(&j, rec->remote_json, strlen(rec->remote_json), &ig) == 0) {
			ws = pisb_json_str(&j, pisb_json_get(&j, 0, "workspace"));
			pisb_json_release(&j);
		}
	}
	s.workspace = ws && ws[0] == '/' ? ws : cfg->workspace;
	s.read_only = cfg->sbx.workspace_read_only;
	if (pisb_docker_policy(&s, verb, args, n, out, e) < 0)
		return pisb_err_prefix(e, "sandbox '%s'", sb->name);
	if (out->compose_sub && compose_creates(out->compose_sub) &&
	    compose_inspect(sb, &s, out, e) < 0)
		return pisb_err_prefix(e, "sandbox '%s'", sb->name);
	return 0;
}
