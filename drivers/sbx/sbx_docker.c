/* sbx_docker.c - pisb docker for sbx sandboxes: every docker command runs
 * inside the sandbox (`sbx exec SBX -- docker -H unix:///var/run/docker.sock
 * ...`), against the sandbox's own daemon.  Nothing here reads
 * DOCKER_HOST or opens a docker socket on the host; the only host-side
 * network access is `curl`, to 127.0.0.1 on a port this sandbox
 * published (checked with `sbx ports`).
 */
#include "sbx.h"
#include "sbx_internal.h"
#include "driver.h"
#include "config.h"
#include "docker_policy.h"
#include "docker_init.h"
#include "docker_verbs.h"
#include "err.h"
#include "instance.h"
#include "json.h"
#include "lock.h"
#include "proc.h"
#include "state.h"
#include "util.h"

#include <sys/syscall.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* sbx exec [-i] -w WS [-e K=V]... SBX -- */
static void exec_prefix(const struct sbx_inst *t, bool in, struct pisb_strv *av)
{
	pisb_strv_push(av, "sbx");
	pisb_strv_push(av, "exec");
	if (in)
		pisb_strv_push(av, "-i");
	/* a terminal on both ends: docker run -it / exec -it need one */
	if (in && isatty(0) && isatty(1))
		pisb_strv_push(av, "-t");
	pisb_strv_push(av, "-w");
	pisb_strv_push(av, t->ws);
	sbx_exec_env(t->cfg, av);
	pisb_strv_push(av, t->sbx);
	pisb_strv_push(av, "--");
}

/* Run av collecting stdout+stderr; *code its status.  -1 + e (exit 5)
 * when sbx itself failed. */
static int capture(struct sbx_inst *t, char *const *av, struct pisb_buf *out, int *code,
		   struct pisb_err *e)
{
	_cleanup_buf_ struct pisb_buf err = PISB_BUF_INIT;
	struct sbx_run o = { .in_fd = -1, .out_fd = -1, .merge = true, .out = out, .err = &err,
			     .timeout_ms = SBX_LC_TIMEOUT_MS };

	/* a probe may be retried when sbx could not start the VM (nothing
	 * ran): after 250 ms and 1 s */
	for (int i = 0; i < 3; i++) {
		if (i) {
			struct timespec ts = { i == 1 ? 0 : 1, i == 1 ? 250000000L : 0 };
			nanosleep(&ts, NULL);
			pisb_buf_reset(&err);
			pisb_buf_reset(out);
		}
		if (sbx_run(t->bin, av, t->env.v, &o, code, e) < 0)
			return pisb_err_prefix(e, "sandbox '%s'", t->name);
		if (*code == 0 || !sbx_transient(err.s))
			break;
	}
	if (*code != 0 && sbx_failed_itself(err.s, t->sbx)) {
		if (strstr(err.s, "not found"))
			sbx_mark(t, "gone", NULL);
		return pisb_err_set(e, PISB_EXIT_BACKEND, "sandbox '%s': 'sbx exec %s' failed: %s",
				    t->name, t->sbx, sbx_last_line(err.s));
	}
	return 0;
}

/* ---- sbx ports ---- */

/* The sandbox's published ports: `sbx ports SBX --json`, else the text
 * table (lines "IP HOST SANDBOX PROTO"). */
static int ports_list(struct sbx_inst *t, struct pisb_docker_pub **out, size_t *n, struct pisb_err *e)
{
	_cleanup_buf_ struct pisb_buf b = PISB_BUF_INIT, err = PISB_BUF_INIT;
	char *argv[] = { "sbx", "ports", t->sbx, NULL };
	struct sbx_run o = { .in_fd = -1, .out_fd = -1, .out = &b, .err = &err,
			     .timeout_ms = SBX_LS_TIMEOUT_MS };
	int code = 0;

	*out = NULL;
	*n = 0;
	if (sbx_run(t->bin, argv, t->env.v, &o, &code, e) < 0)
		return -1;
	if (code != 0)
		return pisb_err_set(e, PISB_EXIT_BACKEND, "'sbx ports %s' failed with status %d: %s",
				    t->sbx, code, sbx_last_line(err.s));
	for (char *line = b.s; line && *line;) {
		char *nl = strchr(line, '\n');
		struct pisb_docker_pub p;
		if (nl)
			*nl = '\0';
		memset(&p, 0, sizeof(p));
		if (sscanf(line, "%63s %d %d %7s", p.ip, &p.host, &p.cport, p.proto) == 4 &&
		    p.host > 0 && p.cport > 0) {
			*out = xrealloc(*out, (*n + 1) * sizeof(**out));
			(*out)[(*n)++] = p;
		}
		line = nl ? nl + 1 : NULL;
	}
	return 0;
}

/* `sbx ports SBX OP SPEC`, OP --publish or --unpublish: sbx_run's
 * answer, *CODE its status, its stderr in ERR. */
static int ports_op(struct sbx_inst *t, const char *op, const char *spec, int *code, struct pisb_buf *err,
		    struct pisb_err *e)
{
	char *argv[] = { "sbx", "ports", t->sbx, (char *)op, (char *)spec, NULL };
	_cleanup_buf_ struct pisb_buf out = PISB_BUF_INIT;
	struct sbx_run o = { .in_fd = -1, .out_fd = -1, .out = &out, .err = err,
			     .timeout_ms = SBX_LS_TIMEOUT_MS };

	*code = 0;
	return sbx_run(t->bin, argv, t->env.v, &o, code, e);
}

/* After `docker run -p H:C[/proto]`: publish each on the host's loopback
 * (sbx does not forward docker's own -p).  The ports are the policy's
 * parse of the arguments (docker_policy.h); a host IP is dropped, as sbx
 * publishes on loopback only. */
static void publish(struct sbx_inst *t, char *const *args, size_t n, struct pisb_strv *notes)
{
	struct pisb_docker_port *p = NULL;
	size_t np = 0;

	pisb_docker_run_ports(args, n, &p, &np);
	for (size_t i = 0; i < np; i++) {
		_cleanup_free_ char *s = NULL;
		if (!p[i].host) {
			pisb_strv_pushf(notes, "warning: -p %d: no host port given, so not published (publish HOST:%d)",
					p[i].cport, p[i].cport);
			continue;
		}
		if (!strcmp(p[i].proto, "sctp")) {
			pisb_strv_pushf(notes, "warning: -p %d:%d/sctp: sbx publishes tcp and udp only",
					p[i].host, p[i].cport);
			continue;
		}
		s = strcmp(p[i].proto, "tcp") ? xasprintf("%d:%d/%s", p[i].host, p[i].cport, p[i].proto) :
		    xasprintf("%d:%d", p[i].host, p[i].cport);
		struct pisb_err e = PISB_ERR_INIT;
		_cleanup_buf_ struct pisb_buf err = PISB_BUF_INIT;
		int code = 0;
		if (ports_op(t, "--publish", s, &code, &err, &e) < 0)
			pisb_strv_pushf(notes, "warning: could not publish %s: %s", s, e.msg);
		else if (code)
			pisb_strv_pushf(notes, "warning: 'sbx ports %s --publish %s' failed: %s",
					t->sbx, s, sbx_last_line(err.s));
		else
			pisb_strv_pushf(notes, "published %s on 127.0.0.1 (see 'pisb docker %s status')",
					s, t->name);
	}
	free(p);
}

/* Before `docker rm`: the host ports the containers named in args
 * publish (`docker port REF`: "3000/tcp -> 0.0.0.0:8080"), as
 * "HOST:CONTAINER/PROTO" specs for `sbx ports --unpublish`. */
static void ports_of(struct sbx_inst *t, char *const *args, size_t n, struct pisb_strv *specs)
{
	for (size_t i = 0; i < n; i++) {
		_cleanup_strv_ struct pisb_strv av = PISB_STRV_INIT;
		_cleanup_buf_ struct pisb_buf out = PISB_BUF_INIT;
		struct pisb_err ig = PISB_ERR_INIT;
		_cleanup_free_ struct pisb_docker_pub *p = NULL;
		size_t np = 0;
		int code = 0;

		if (args[i][0] == '-')
			continue;
		exec_prefix(t, false, &av);
		pisb_strv_push(&av, "docker");
		pisb_strv_push(&av, "-H");
		pisb_strv_push(&av, SBX_DOCKER_SOCK);
		pisb_strv_push(&av, "port");
		pisb_strv_push(&av, args[i]);
		if (capture(t, av.v, &out, &code, &ig) < 0 || code != 0)
			continue;
		pisb_docker_port_lines(out.s, &p, &np);
		for (size_t j = 0; j < np; j++) {
			bool dup = false;
			char spec[64];
			if (!p[j].proto[0])
				continue;
			snprintf(spec, sizeof(spec), "%d:%d/%s", p[j].host, p[j].cport, p[j].proto);
			for (size_t k = 0; k < specs->n; k++)
				dup |= !strcmp(specs->v[k], spec);
			if (!dup)
				pisb_strv_push(specs, spec);
		}
	}
}

static void unpublish(struct sbx_inst *t, const struct pisb_strv *specs, struct pisb_strv *notes)
{
	for (size_t i = 0; i < specs->n; i++) {
		_cleanup_buf_ struct pisb_buf err = PISB_BUF_INIT;
		struct pisb_err e = PISB_ERR_INIT;
		int code = 0;

		if (ports_op(t, "--unpublish", specs->v[i], &code, &err, &e) < 0 || code)
			pisb_strv_pushf(notes, "warning: 'sbx ports %s --unpublish %s' failed: %s", t->sbx,
					specs->v[i], code ? sbx_last_line(err.s) : e.msg);
		else
			pisb_strv_pushf(notes, "unpublished %s", specs->v[i]);
	}
}

/* The ports a compose project publishes (`docker compose OPTS ps --format
 * json`: JSON lines, or one array from older compose; Publishers
 * [{PublishedPort, TargetPort, Protocol}]) as HOST:CONTAINER/PROTO specs. */
static void compose_ports(struct sbx_inst *t, char *const *args, size_t nopts, struct pisb_strv *specs)
{
	_cleanup_strv_ struct pisb_strv av = PISB_STRV_INIT;
	_cleanup_buf_ struct pisb_buf out = PISB_BUF_INIT;
	struct pisb_err ig = PISB_ERR_INIT;
	int code = 0;

	exec_prefix(t, false, &av);
	pisb_strv_push(&av, "docker");
	pisb_strv_push(&av, "-H");
	pisb_strv_push(&av, SBX_DOCKER_SOCK);
	pisb_strv_push(&av, "compose");
	for (size_t i = 0; i < nopts; i++)
		pisb_strv_push(&av, args[i]);
	pisb_strv_push(&av, "ps");
	pisb_strv_push(&av, "--format");
	pisb_strv_push(&av, "json");
	if (capture(t, av.v, &out, &code, &ig) < 0 || code != 0 || !out.s)
		return;
	for (char *line = out.s; line && *line;) {
		char *nl = strchr(line, '\n');
		struct pisb_json j;
		if (nl)
			*nl = '\0';
		if (*line && pisb_json_parse(&j, line, strlen(line), &ig) == 0) {
			bool arr = j.tok[0].type == JSMN_ARRAY;
			int nobj = arr ? j.tok[0].size : 1;
			for (int k = 0; k < nobj; k++) {
				int o = arr ? pisb_json_at(&j, 0, k) : 0;
				int pubs = pisb_json_get(&j, o, "Publishers");
				for (int p = 0; pubs >= 0 && p < j.tok[pubs].size; p++) {
					int q = pisb_json_at(&j, pubs, p);
					long long hp = 0, cp = 0;
					_cleanup_free_ char *proto = pisb_json_str(&j, pisb_json_get(&j, q, "Protocol"));
					char spec[64];
					bool dup = false;
					pisb_json_int(&j, pisb_json_get(&j, q, "PublishedPort"), &hp);
					pisb_json_int(&j, pisb_json_get(&j, q, "TargetPort"), &cp);
					if (hp <= 0 || cp <= 0)
						continue;
					snprintf(spec, sizeof(spec), "%lld:%lld/%s", hp, cp,
						 proto && !strcmp(proto, "udp") ? "udp" : "tcp");
					for (size_t s2 = 0; s2 < specs->n; s2++)
						dup |= !strcmp(specs->v[s2], spec);
					if (!dup)
						pisb_strv_push(specs, spec);
				}
			}
			pisb_json_release(&j);
		}
		line = nl ? nl + 1 : NULL;
	}
}

static void publish_specs(struct sbx_inst *t, const struct pisb_strv *specs, struct pisb_strv *notes)
{
	struct pisb_docker_pub *have = NULL;
	size_t nh = 0;
	struct pisb_err ig = PISB_ERR_INIT;

	ports_list(t, &have, &nh, &ig);
	for (size_t i = 0; i < specs->n; i++) {
		_cleanup_buf_ struct pisb_buf err = PISB_BUF_INIT;
		struct pisb_err e = PISB_ERR_INIT;
		int hp = atoi(specs->v[i]), cp = atoi(strchr(specs->v[i], ':') + 1), code = 0;
		bool dup = false;

		/* already published (compose up again) */
		for (size_t k = 0; k < nh; k++)
			dup |= have[k].host == hp && have[k].cport == cp;
		if (dup)
			continue;
		if (ports_op(t, "--publish", specs->v[i], &code, &err, &e) < 0 || code)
			pisb_strv_pushf(notes, "warning: 'sbx ports %s --publish %s' failed: %s", t->sbx,
					specs->v[i], code ? sbx_last_line(err.s) : e.msg);
		else
			pisb_strv_pushf(notes, "published %s on 127.0.0.1", specs->v[i]);
	}
	free(have);
}

/* ---- status / verify / resources ---- */

static int do_status(struct sbx_inst *t, struct pisb_jw *w, struct pisb_err *e)
{
	_cleanup_free_ char *word = NULL;
	_cleanup_buf_ struct pisb_buf out = PISB_BUF_INIT;
	_cleanup_strv_ struct pisb_strv av = PISB_STRV_INIT;
	struct pisb_docker_pub *ports = NULL;
	struct pisb_docker_status s = { .error = NULL };
	char id[256] = "", ver[128] = "";
	size_t np = 0;
	int code = -1;
	bool up;

	{
		char *argv[] = { "sbx", "ls", "--json", NULL };
		_cleanup_buf_ struct pisb_buf ls = PISB_BUF_INIT, err = PISB_BUF_INIT;
		struct sbx_run o = { .in_fd = -1, .out_fd = -1, .out = &ls, .err = &err,
				     .timeout_ms = SBX_LS_TIMEOUT_MS };
		struct pisb_json j;
		int rc = 0, arr;
		if (sbx_run(t->bin, argv, t->env.v, &o, &rc, e) < 0)
			return -1;
		if (rc != 0)
			return pisb_err_set(e, PISB_EXIT_BACKEND, "sandbox '%s': 'sbx ls --json' failed with status %d: %s",
					    t->name, rc, sbx_last_line(err.s));
		if (pisb_json_parse(&j, ls.s, ls.len, e) < 0)
			return pisb_err_prefix(e, "'sbx ls --json'");
		arr = j.tok[0].type == JSMN_ARRAY ? 0 : pisb_json_get(&j, 0, "sandboxes");
		for (int i = 0; arr >= 0 && i < j.tok[arr].size && !word; i++) {
			int o2 = pisb_json_at(&j, arr, i);
			if (pisb_json_eq(&j, pisb_json_get(&j, o2, "name"), t->sbx)) {
				word = pisb_json_str(&j, pisb_json_get(&j, o2, "status"));
				if (!word)
					word = xstrdup("unknown");
			}
		}
		pisb_json_release(&j);
	}
	if (!word)
		sbx_mark(t, "gone", NULL);
	else
		sbx_mark(t, !strcasecmp(word, "running") ? "running" : "stopped", word);
	up = word && !strcasecmp(word, "running");
	/* a stopped sandbox is not started just to be looked at */
	if (up) {
		exec_prefix(t, false, &av);
		pisb_strv_push(&av, "docker");
		pisb_strv_push(&av, "-H");
		pisb_strv_push(&av, SBX_DOCKER_SOCK);
		pisb_strv_push(&av, "info");
		pisb_strv_push(&av, "--format");
		pisb_strv_push(&av, "{{.ID}} {{.ServerVersion}}");
		if (capture(t, av.v, &out, &code, e) < 0)
			return -1;
		ports_list(t, &ports, &np, e);
	}
	if (up && code == 0)
		sscanf(out.s ? out.s : "", "%255s %127s", id, ver);
	if (up && code != 0)
		s.error = sbx_last_line(out.s);
	else if (!up)
		s.error = word ? "the sandbox is not running (pisb start, or any pisb exec, starts it)"
			       : "sbx no longer lists the sandbox";
	s.status = word ? word : "gone";
	s.workspace = t->ws;
	s.socket = SBX_DOCKER_SOCK " (inside the sandbox)";
	s.reachable = up && code == 0;
	s.id = id[0] ? id : NULL;
	s.version = ver[0] ? ver : NULL;
	s.ports = ports;
	s.nports = np;
	s.env = t->cfg->sbx.nenv_allowlist ? "allowlist" : "strict";
	pisb_jw_obj(w);
	pisb_jw_kstr(w, "name", t->name);
	pisb_jw_kstr(w, "driver", "sbx");
	pisb_jw_kstr(w, "sbxName", t->sbx);
	pisb_docker_status(w, &s);
	free(ports);
	return 0;
}

/* port-binds' evidence for a port sbx published: its IP a loopback one */
static bool port_loopback(const struct pisb_docker_pub *p, struct pisb_buf *b)
{
	pisb_buf_addf(b, "%s:%d->%d", p->ip, p->host, p->cport);
	return !strcmp(p->ip, "127.0.0.1") || !strcmp(p->ip, "::1") || !strcmp(p->ip, "[::1]");
}

static int do_verify(struct sbx_inst *t, struct pisb_jw *w, int *code, struct pisb_err *e)
{
	static const char script[] =
		"echo __ENV__; env | grep -E '^(DOCKER_|COMPOSE_|PISB_VERIFY_PROBE_)'; "
		"echo __MOUNTS__; ls -d \"$1\" \"$2\" 2>/dev/null; "
		"echo __DAEMON__; docker -H " SBX_DOCKER_SOCK " info --format '{{.ID}}' 2>&1; rc=$?; echo __RC__; echo $rc; "
		"echo __CONTEXTS__; docker -H " SBX_DOCKER_SOCK " context ls --format '{{.Name}}' 2>&1; "
		"echo __END__";
	_cleanup_strv_ struct pisb_strv av = PISB_STRV_INIT;
	_cleanup_buf_ struct pisb_buf out = PISB_BUF_INIT;
	_cleanup_free_ char *hd = NULL, *hs = NULL, *ev = NULL;
	const char *home = getenv("HOME");
	struct pisb_docker_canary cn;
	struct pisb_docker_pub *ports = NULL;
	size_t np = 0;
	bool all = true;
	int rc = 0;

	/* canaries in our own environment: the scrub must keep them out */
	pisb_docker_canary_set(&cn, true);
	pisb_strv_release(&t->env);
	sbx_env(&t->cfg->sbx, &t->env);
	hd = xasprintf("%s/.docker", home ? home : "/nonexistent");
	hs = xasprintf("%s/.ssh", home ? home : "/nonexistent");
	exec_prefix(t, false, &av);
	pisb_strv_push(&av, "/bin/sh");
	pisb_strv_push(&av, "-c");
	pisb_strv_push(&av, script);
	pisb_strv_push(&av, "sh");
	pisb_strv_push(&av, hd);
	pisb_strv_push(&av, hs);
	rc = capture(t, av.v, &out, code, e);
	pisb_docker_canary_unset(&cn);
	if (rc < 0 || pisb_docker_probe_end(out.s, *code == 0, "verify", t->name, *code, sbx_last_line(out.s), e) < 0)
		return -1;
	pisb_jw_obj(w);
	pisb_jw_kstr(w, "name", t->name);
	pisb_jw_kstr(w, "sbxName", t->sbx);
	pisb_jw_key(w, "checks");
	pisb_jw_arr(w);
	pisb_docker_check(w, "transport", true,
	      "pisb runs only the sbx CLI (posix_spawn, argv arrays); it has no docker client and opens no docker socket on the host",
	      &all);
	pisb_docker_verify_env(w, &cn, out.s, " (not allowlisted)", &all);
	pisb_docker_verify_daemon(w, SBX_DOCKER_SOCK, out.s, &all);
	ev = xasprintf("%s and %s", hd, hs);
	pisb_docker_verify_mounts(w, ev, out.s, &all);
	pisb_docker_verify_contexts(w, out.s, &all);
	rc = ports_list(t, &ports, &np, e);
	pisb_docker_verify_ports(w, ports, np, rc < 0 ? e->msg : NULL, port_loopback, &all);
	free(ports);
	pisb_docker_verify_end(w, all, code);
	return 0;
}

static int do_resources(struct sbx_inst *t, struct pisb_jw *w, struct pisb_err *e)
{
	static const char script[] =
		"echo __CPUS__; nproc 2>&1; echo __MEMORY__; free -m 2>&1; echo __DISK__; df -h / 2>&1; "
		"echo __DOCKER__; docker -H " SBX_DOCKER_SOCK " system df 2>&1; echo __END__";
	_cleanup_strv_ struct pisb_strv av = PISB_STRV_INIT;
	_cleanup_buf_ struct pisb_buf out = PISB_BUF_INIT;
	int code = 0;

	exec_prefix(t, false, &av);
	pisb_strv_push(&av, "/bin/sh");
	pisb_strv_push(&av, "-c");
	pisb_strv_push(&av, script);
	if (capture(t, av.v, &out, &code, e) < 0 ||
	    pisb_docker_probe_end(out.s, true, "resources", t->name, code, sbx_last_line(out.s), e) < 0)
		return -1;
	pisb_jw_obj(w);
	pisb_jw_kstr(w, "name", t->name);
	pisb_jw_kstr(w, "sbxName", t->sbx);
	pisb_docker_resources(w, out.s);
	pisb_jw_obj_end(w);
	return 0;
}

/* ---- init: the templates of docker_init.h, written inside the microVM
 * (its view of the shared workspace, with its rights) ---- */

static int do_init(struct sbx_inst *t, char *const *args, size_t n, struct pisb_jw *w, int *code,
		   struct pisb_strv *notes, struct pisb_err *e)
{
	_cleanup_strv_ struct pisb_strv av = PISB_STRV_INIT;
	_cleanup_buf_ struct pisb_buf out = PISB_BUF_INIT;
	struct pisb_docker_init o;
	const char *dir;
	int rc = 0;

	if (pisb_docker_init_parse(args, n, &o, e) < 0)
		return -1;
	dir = o.dir ? o.dir : t->ws;
	exec_prefix(t, false, &av);
	pisb_strv_push(&av, "/bin/sh");
	pisb_strv_push(&av, "-c");
	pisb_strv_push(&av, PISB_DOCKER_INIT_SH);
	pisb_strv_push(&av, "sh");
	pisb_docker_init_args(&o, t->ws, dir, &av);
	if (capture(t, av.v, &out, &rc, e) < 0)
		return -1;
	return pisb_docker_init_report(t->name, dir, out.s, rc, w, notes, code, e);
}

/* ---- curl: host side, loopback, only this sandbox's published ports ---- */

/* PORT itself, where this sandbox published it on 127.0.0.1 (tcp);
 * no token. */
static int curl_serve(void *ctx, long long port, int *hport, struct pisb_buf *tok, struct pisb_err *e)
{
	struct sbx_inst *t = ctx;
	_cleanup_free_ struct pisb_docker_pub *ports = NULL;
	size_t np = 0;
	bool ok = false;

	(void)tok;
	if (ports_list(t, &ports, &np, e) < 0)
		return pisb_err_prefix(e, "docker curl");
	for (size_t i = 0; i < np; i++)
		ok |= ports[i].host == port && !strcmp(ports[i].ip, "127.0.0.1") && !pisb_str_starts(ports[i].proto, "udp");
	if (!ok)
		return pisb_err_set(e, PISB_EXIT_FAIL,
				    "docker curl: 127.0.0.1:%lld is not a port sandbox '%s' published (see 'pisb docker %s status')",
				    port, t->name, t->name);
	*hport = (int)port;
	return 0;
}

static const struct pisb_docker_curl_ops curl_ops = {
	.target = "PORT[/PATH] or http://127.0.0.1:PORT/PATH",
	.only = "http://127.0.0.1:PORT/ or localhost (the sandbox's published ports)",
	.serve = curl_serve,
};

static int do_curl(struct sbx_inst *t, char *const *args, size_t n, int *code, struct pisb_err *e)
{
	_cleanup_buf_ struct pisb_buf body = PISB_BUF_INIT;

	if (pisb_docker_curl(&curl_ops, t, args, n, &body, code, e) < 0)
		return -1;
	pisb_write_all(1, body.s, body.len);
	return 0;
}

/* ---- the verbs ---- */

static int stream(struct sbx_inst *t, const char *verb, char *const *args, size_t n, int *code,
		  struct pisb_strv *notes, struct pisb_err *e)
{
	_cleanup_strv_ struct pisb_strv av = PISB_STRV_INIT;
	_cleanup_buf_ struct pisb_buf err = PISB_BUF_INIT;
	struct sbx_run o = { .in_fd = 0, .out_fd = 1, .tee_err = true, .err = &err, .forward = true };
	_cleanup_strv_ struct pisb_strv specs = PISB_STRV_INIT;

	size_t copts = !strcmp(verb, "compose") ? pisb_docker_compose_sub(args, n) : 0;
	const char *csub = !strcmp(verb, "compose") && copts < n ? args[copts] : "";

	/* sbx leaves stale mappings behind a removed container */
	if (!strcmp(verb, "rm"))
		ports_of(t, args, n, &specs);
	if (!strcmp(csub, "down"))
		compose_ports(t, args, copts, &specs);
	exec_prefix(t, true, &av);
	pisb_strv_push(&av, "docker");
	pisb_strv_push(&av, "-H");
	pisb_strv_push(&av, SBX_DOCKER_SOCK);
	pisb_docker_verb_argv(&av, verb, args, n);
	if (sbx_run(t->bin, av.v, t->env.v, &o, code, e) < 0)
		return pisb_err_prefix(e, "sandbox '%s'", t->name);
	if (*code != 0 && sbx_failed_itself(err.s, t->sbx)) {
		if (strstr(err.s, "not found"))
			sbx_mark(t, "gone", NULL);
		return pisb_err_set(e, PISB_EXIT_BACKEND, "sandbox '%s': 'sbx exec %s' failed: %s",
				    t->name, t->sbx, sbx_last_line(err.s));
	}
	if (strcmp(t->rt.state, "running"))
		sbx_mark(t, "running", "running");
	if (*code == 0 && !strcmp(verb, "run"))
		publish(t, args, n, notes);
	if (*code == 0 && specs.n)
		unpublish(t, &specs, notes);
	if (*code == 0 && !strcmp(csub, "up")) {
		/* sbx does not forward what compose publishes either */
		_cleanup_strv_ struct pisb_strv up = PISB_STRV_INIT;
		compose_ports(t, args, copts, &up);
		publish_specs(t, &up, notes);
	}
	return 0;
}

int pisb_sbx_docker(struct pisb_sandbox *sb, const char *verb, char *const *args, size_t nargs,
		    struct pisb_jw *w, bool *json_out, int *code, struct pisb_strv *notes,
		    struct pisb_err *e)
{
	const char *name = sb->name;
	struct sbx_inst t;
	int ret = -1;

	*json_out = false;
	*code = 0;
	/* a sandbox of another driver never gets here: its driver has no
	 * docker slot (see driver.h) */
	if (sbx_inst_of(sb, &t, e) < 0)
		return -1;
	if (!strcmp(t.rt.state, "gone")) {
		pisb_err_set(e, PISB_EXIT_BACKEND,
			     "sandbox '%s': its sbx sandbox '%s' no longer exists (destroy it with 'pisb destroy %s --confirm %s')",
			     name, t.sbx, name, name);
		goto out;
	}
	if (!strcmp(t.rt.state, "creating") && pisb_lock_is_held(t.idir, "op.lock")) {
		pisb_err_set(e, PISB_EXIT_BUSY, "sandbox '%s' is still being created", name);
		goto out;
	}
	if (!strcmp(verb, "status")) {
		*json_out = true;
		ret = do_status(&t, w, e);
	} else if (!strcmp(verb, "verify")) {
		*json_out = true;
		ret = do_verify(&t, w, code, e);
	} else if (!strcmp(verb, "resources")) {
		*json_out = true;
		ret = do_resources(&t, w, e);
	} else if (!strcmp(verb, "init")) {
		*json_out = true;
		ret = do_init(&t, args, nargs, w, code, notes, e);
	} else if (!strcmp(verb, "curl")) {
		ret = do_curl(&t, args, nargs, code, e);
	} else {
		ret = stream(&t, verb, args, nargs, code, notes, e);
	}
out:
	sbx_inst_release(&t);
	return ret;
}
