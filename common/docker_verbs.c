/* docker_verbs.c - what `pisb docker` verbs do the same for every driver
 * (see docker_verbs.h). */
#include "docker_verbs.h"
#include "proc.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <unistd.h>

int pisb_docker_curl_exchange(int port, const char *method, const char *path, const char *body,
			      const char *token, struct pisb_buf *resp, const char **body_out, size_t *body_len, int *code,
			      struct pisb_err *e)
{
	_cleanup_buf_ struct pisb_buf req = PISB_BUF_INIT;
	_cleanup_close_ int s = -1;
	struct sockaddr_in sa;

	pisb_buf_addf(&req, "%s %s HTTP/1.0\r\nHost: 127.0.0.1:%d\r\nUser-Agent: pisb\r\nConnection: close\r\n",
		      method, path, port);
	if (token)
		pisb_buf_addf(&req, "X-Pisb-Token: %s\r\n", token);
	if (body)
		pisb_buf_addf(&req, "Content-Type: application/json\r\nContent-Length: %zu\r\n", strlen(body));
	pisb_buf_adds(&req, "\r\n");
	if (body)
		pisb_buf_adds(&req, body);
	s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_port = htons((uint16_t)port);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (s < 0 || connect(s, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return pisb_err_sys(e, PISB_EXIT_BACKEND, "docker curl: connect 127.0.0.1:%d", port);
	if (pisb_write_all(s, req.s, req.len) < 0)
		return pisb_err_sys(e, PISB_EXIT_BACKEND, "docker curl: send");
	if (pisb_read_until(s, resp, pisb_mono_ms() + 10000, PISB_DOCKER_CURL_CAP) < 0)
		return pisb_err_set(e, PISB_EXIT_TIMEOUT, "docker curl: no complete answer from 127.0.0.1:%d within 10 s", port);
	{
		int status = 0;
		const char *b = resp->s ? strstr(resp->s, "\r\n\r\n") : NULL;
		size_t left;
		if (!resp->s || sscanf(resp->s, "HTTP/%*s %d", &status) != 1)
			return pisb_err_set(e, PISB_EXIT_BACKEND, "docker curl: not an HTTP answer from 127.0.0.1:%d", port);
		b = b ? b + 4 : resp->s + resp->len;
		left = resp->len - (size_t)(b - resp->s);
		*body_out = b;
		*body_len = left > PISB_DOCKER_CURL_CAP ? PISB_DOCKER_CURL_CAP : left;
		*code = status >= 200 && status < 400 ? 0 : PISB_EXIT_FAIL;
	}
	return 0;
}

char *pisb_docker_section(const char *s, const char *marker)
{
	_cleanup_free_ char *m = xasprintf("%s\n", marker);
	const char *p = s ? strstr(s, m) : NULL, *q;

	if (!p)
		return NULL;
	p += strlen(m);
	for (q = p; *q; q = strchr(q, '\n') ? strchr(q, '\n') + 1 : q + strlen(q))
		if (pisb_str_starts(q, "__"))
			break;
	while (q > p && q[-1] == '\n')
		q--;
	return xstrndup(p, (size_t)(q - p));
}

void pisb_docker_check(struct pisb_jw *w, const char *name, bool pass, const char *evidence, bool *all)
{
	pisb_jw_obj(w);
	pisb_jw_kstr(w, "check", name);
	pisb_jw_kbool(w, "pass", pass);
	pisb_jw_kstr(w, "evidence", evidence);
	pisb_jw_obj_end(w);
	*all &= pass;
}

void pisb_docker_resources(struct pisb_jw *w, const char *out)
{
	_cleanup_free_ char *cpus = pisb_docker_section(out, "__CPUS__");
	_cleanup_free_ char *mem = pisb_docker_section(out, "__MEMORY__");
	_cleanup_free_ char *disk = pisb_docker_section(out, "__DISK__");
	_cleanup_free_ char *dock = pisb_docker_section(out, "__DOCKER__");
	long long n = 0;

	pisb_jw_key(w, "cpus");
	if (cpus && pisb_parse_ll(cpus, 1, 1 << 20, &n) == 0)
		pisb_jw_int(w, n);
	else
		pisb_jw_null(w);
	pisb_jw_kstr(w, "memory", mem);
	pisb_jw_kstr(w, "disk", disk);
	pisb_jw_kstr(w, "docker", dock);
}

void pisb_docker_port_lines(const char *out, struct pisb_docker_pub **p, size_t *n)
{
	*p = NULL;
	*n = 0;
	for (const char *line = out; line && *line;) {
		const char *nl = strchr(line, '\n');
		_cleanup_free_ char *l = nl ? xstrndup(line, (size_t)(nl - line)) : xstrdup(line);
		struct pisb_docker_pub d;
		const char *colon = strrchr(l, ':');

		memset(&d, 0, sizeof(d));
		if (sscanf(l, "%d/%7[a-z0-9] ->", &d.cport, d.proto) >= 1 && colon &&
		    sscanf(colon + 1, "%d", &d.host) == 1 && d.host > 0) {
			*p = xrealloc(*p, (*n + 1) * sizeof(**p));
			(*p)[(*n)++] = d;
		}
		line = nl ? nl + 1 : NULL;
	}
}

void pisb_docker_ports_json(struct pisb_jw *w, const struct pisb_docker_pub *p, size_t n)
{
	pisb_jw_key(w, "ports");
	pisb_jw_arr(w);
	for (size_t i = 0; i < n; i++) {
		pisb_jw_obj(w);
		pisb_jw_kstr(w, "hostIp", p[i].ip);
		pisb_jw_kint(w, "hostPort", p[i].host);
		pisb_jw_kint(w, "sandboxPort", p[i].cport);
		pisb_jw_kstr(w, "protocol", p[i].proto);
		pisb_jw_obj_end(w);
	}
	pisb_jw_arr_end(w);
}

void pisb_docker_status(struct pisb_jw *w, const struct pisb_docker_status *s)
{
	pisb_jw_kstr(w, "status", s->status);
	pisb_jw_kstr(w, "workspace", s->workspace);
	pisb_jw_key(w, "daemon");
	pisb_jw_obj(w);
	pisb_jw_kstr(w, "socket", s->socket);
	pisb_jw_kbool(w, "reachable", s->reachable);
	pisb_jw_kstr(w, "id", s->id);
	pisb_jw_kstr(w, "version", s->version);
	if (s->storage)
		pisb_jw_kstr(w, "storageDriver", s->storage_driver);
	if (s->error)
		pisb_jw_kstr(w, "error", s->error);
	pisb_jw_obj_end(w);
	pisb_docker_ports_json(w, s->ports, s->nports);
	pisb_jw_kstr(w, "env", s->env);
	pisb_jw_obj_end(w);
}

void pisb_docker_verb_argv(struct pisb_strv *av, const char *verb, char *const *args, size_t n)
{
	if (!strcmp(verb, "prune")) {
		pisb_strv_push(av, "system");
		pisb_strv_push(av, "prune");
		pisb_strv_push(av, "--all");
		pisb_strv_push(av, "--force");
	} else {
		pisb_strv_push(av, verb);
	}
	for (size_t i = 0; i < n; i++)
		pisb_strv_push(av, args[i]);
}

int pisb_docker_probe_end(const char *out, bool ok, const char *what, const char *name, int code,
			  const char *detail, struct pisb_err *e)
{
	if (ok && strstr(out ? out : "", "__END__"))
		return 0;
	return pisb_err_set(e, PISB_EXIT_BACKEND, "%s '%s': the probe inside the sandbox failed (status %d)%s%s",
			    what, name, code, detail ? ": " : "", detail ? detail : "");
}

void pisb_docker_canary_set(struct pisb_docker_canary *c, bool compose)
{
	pisb_random_hex(c->rnd, 8);
	snprintf(c->sentinel, sizeof(c->sentinel), "unix:///pisb-verify-%s.sock", c->rnd);
	snprintf(c->probe, sizeof(c->probe), "PISB_VERIFY_PROBE_%s", c->rnd);
	c->compose = compose;
	setenv("DOCKER_HOST", c->sentinel, 1);
	if (compose)
		setenv("COMPOSE_PROJECT_NAME", c->rnd, 1);
	setenv(c->probe, "1", 1);
}

void pisb_docker_canary_unset(const struct pisb_docker_canary *c)
{
	unsetenv("DOCKER_HOST");
	if (c->compose)
		unsetenv("COMPOSE_PROJECT_NAME");
	unsetenv(c->probe);
}

void pisb_docker_verify_env(struct pisb_jw *w, const struct pisb_docker_canary *c, const char *out,
			    const char *note, bool *all)
{
	_cleanup_free_ char *envs = pisb_docker_section(out, "__ENV__");
	_cleanup_free_ char *scrub = xasprintf("DOCKER_HOST=%s%s set for pisb; inside: %s", c->sentinel,
					       c->compose ? " and COMPOSE_PROJECT_NAME" : "",
					       envs && *envs ? envs : "no DOCKER_* or COMPOSE_* variable");
	bool leaked = envs && strstr(envs, c->probe);
	_cleanup_free_ char *fwd = xasprintf("%s set for pisb%s: %s inside", c->probe, note,
					     leaked ? "present" : "absent");

	pisb_docker_check(w, "env-scrub", envs && !strstr(envs, "DOCKER_") && !strstr(envs, "COMPOSE_"), scrub, all);
	pisb_docker_check(w, "env-forwarding", !leaked, fwd, all);
}

void pisb_docker_verify_daemon(struct pisb_jw *w, const char *sock, const char *out, bool *all)
{
	_cleanup_free_ char *daemon = pisb_docker_section(out, "__DAEMON__");
	_cleanup_free_ char *drc = pisb_docker_section(out, "__RC__");
	char id[256] = "";
	bool ok = daemon && drc && !strcmp(drc, "0") && sscanf(daemon, "%255s", id) == 1;
	_cleanup_free_ char *ev = ok ? xasprintf("docker -H %s inside answers: daemon %s", sock, id)
				     : xasprintf("docker -H %s inside: %s", sock, daemon ? daemon : "no answer");

	pisb_docker_check(w, "daemon", ok, ev, all);
}

void pisb_docker_verify_mounts(struct pisb_jw *w, const char *what, const char *out, bool *all)
{
	_cleanup_free_ char *mounts = pisb_docker_section(out, "__MOUNTS__");
	_cleanup_free_ char *ev = xasprintf("%s: %s", what, mounts && *mounts ? mounts : "not visible inside");

	pisb_docker_check(w, "host-mounts", !(mounts && *mounts), ev, all);
}

/* one host directory that must not be reachable inside: PATH itself or a
 * directory above it (ABOVE) */
struct guard {
	unsigned long long dev, ino;
	const char *path;
	char *above;            /* NULL: PATH itself */
};

void pisb_docker_verify_host_mounts(struct pisb_jw *w, char *const *paths, size_t n, const char *out,
				    bool *all)
{
	_cleanup_free_ char *mounts = pisb_docker_section(out, "__MOUNTS__");
	_cleanup_buf_ struct pisb_buf bad = PISB_BUF_INIT, ev = PISB_BUF_INIT;
	struct guard *g = NULL;
	size_t ng = 0, nlines = 0;

	for (size_t i = 0; i < n; i++) {
		_cleanup_free_ char *real = realpath(paths[i], NULL);
		struct stat sb;
		if (!real)
			continue;
		/* the path, then each directory above it, up to / */
		for (char *end = real + strlen(real);;) {
			char keep = *end;
			*end = '\0';
			if (stat(*real ? real : "/", &sb) == 0) {
				g = xrealloc(g, (ng + 1) * sizeof(*g));
				g[ng].dev = (unsigned long long)sb.st_dev;
				g[ng].ino = (unsigned long long)sb.st_ino;
				g[ng].path = paths[i];
				g[ng].above = keep ? xstrdup(*real ? real : "/") : NULL;
				ng++;
			}
			*end = keep;
			if (end == real)
				break;
			while (end > real && *--end != '/')
				;
		}
	}
	for (char *l = mounts, *nl; l && *l; l = nl ? nl + 1 : NULL) {
		unsigned long long dev, ino;
		int off = 0;
		if ((nl = strchr(l, '\n')))
			*nl = '\0';
		if (sscanf(l, "%llu %llu %n", &dev, &ino, &off) < 2 || !off)
			continue;
		nlines++;
		for (size_t k = 0; k < ng; k++) {
			if (g[k].dev != dev || g[k].ino != ino)
				continue;
			if (g[k].above)
				pisb_buf_addf(&bad, "%s'%s' inside is the host's '%s', which holds '%s'", bad.len ? "; " : "",
					      l + off, g[k].above, g[k].path);
			else
				pisb_buf_addf(&bad, "%s'%s' inside is the host's '%s'", bad.len ? "; " : "", l + off,
					      g[k].path);
			break;
		}
	}
	if (bad.len)
		pisb_buf_adds(&ev, bad.s);
	else {
		for (size_t i = 0; i < n; i++)
			pisb_buf_addf(&ev, "%s'%s'", i ? ", " : "", paths[i]);
		pisb_buf_addf(&ev, ": neither they nor a directory above them is the same file as any of the %zu paths and mount points inside (device and inode compared)",
			      nlines);
	}
	pisb_docker_check(w, "host-mounts", !bad.len && mounts, ev.s, all);
	for (size_t k = 0; k < ng; k++)
		free(g[k].above);
	free(g);
}

void pisb_docker_verify_contexts(struct pisb_jw *w, const char *out, bool *all)
{
	_cleanup_free_ char *ctx = pisb_docker_section(out, "__CONTEXTS__");
	_cleanup_free_ char *ev = xasprintf("docker contexts inside: %s", ctx && *ctx ? ctx : "(none)");

	pisb_docker_check(w, "contexts", ctx && !strcmp(ctx, "default"), ev, all);
}

void pisb_docker_verify_ports(struct pisb_jw *w, const struct pisb_docker_pub *p, size_t n, const char *err,
			      bool (*loopback)(const struct pisb_docker_pub *p, struct pisb_buf *b), bool *all)
{
	_cleanup_buf_ struct pisb_buf b = PISB_BUF_INIT;
	bool ok = true;

	if (err) {
		pisb_docker_check(w, "port-binds", false, err, all);
		return;
	}
	for (size_t i = 0; i < n; i++) {
		if (i)
			pisb_buf_adds(&b, ", ");
		ok &= loopback(&p[i], &b);
	}
	pisb_docker_check(w, "port-binds", ok, n ? b.s : "no published ports", all);
}

void pisb_docker_verify_end(struct pisb_jw *w, bool all, int *code)
{
	pisb_jw_arr_end(w);
	pisb_jw_kbool(w, "pass", all);
	pisb_jw_obj_end(w);
	*code = all ? 0 : PISB_EXIT_FAIL;
}

int pisb_docker_curl(const struct pisb_docker_curl_ops *ops, void *ctx, char *const *args, size_t n,
		     struct pisb_buf *answer, int *code, struct pisb_err *e)
{
	const char *method = "GET", *body = NULL, *target = NULL, *q, *slash, *b = NULL;
	_cleanup_free_ char *num = NULL, *path = NULL;
	_cleanup_buf_ struct pisb_buf tok = PISB_BUF_INIT, resp = PISB_BUF_INIT;
	long long port = 0;
	size_t len = 0;
	int hport = 0;

	for (size_t i = 0; i < n; i++) {
		if (!strcmp(args[i], "-X") && i + 1 < n)
			method = args[++i];
		else if (!strcmp(args[i], "-d") && i + 1 < n)
			body = args[++i];
		else if (!target && args[i][0] != '-')
			target = args[i];
		else
			return pisb_err_set(e, PISB_EXIT_USAGE, "docker curl: unexpected '%s' (usage: curl -- [-X METHOD] [-d BODY] %s)",
					    args[i], ops->target);
	}
	if (!target)
		return pisb_err_set(e, PISB_EXIT_USAGE, "docker curl: a %s is required", ops->target);
	for (const char *m = method; *m; m++)
		if (!isupper((unsigned char)*m))
			return pisb_err_set(e, PISB_EXIT_USAGE, "docker curl: bad method '%s'", method);
	q = target;
	if (pisb_str_starts(q, "http://"))
		q += 7;
	if (pisb_str_starts(q, "127.0.0.1:") || pisb_str_starts(q, "localhost:"))
		q += 10;
	else if (q != target)
		return pisb_err_set(e, PISB_EXIT_USAGE, "docker curl: only %s, not '%s'", ops->only, target);
	slash = strchr(q, '/');
	num = slash ? xstrndup(q, (size_t)(slash - q)) : xstrdup(q);
	if (pisb_parse_ll(num, 1, 65535, &port) < 0)
		return pisb_err_set(e, PISB_EXIT_USAGE, "docker curl: bad port in '%s'", target);
	path = xstrdup(slash ? slash : "/");
	for (const char *p = path; *p; p++)
		if ((unsigned char)*p <= 0x20 || (unsigned char)*p >= 0x7f)
			return pisb_err_set(e, PISB_EXIT_USAGE,
					    "docker curl: the path may hold no space, control or non-ASCII byte (percent-encode it)");
	if (ops->serve(ctx, port, &hport, &tok, e) < 0)
		return -1;
	if (pisb_docker_curl_exchange(hport, method, path, body, tok.len ? tok.s : NULL, &resp, &b, &len, code, e) < 0)
		return -1;
	pisb_buf_add(answer, b, len);
	return 0;
}

void pisb_docker_verify_text(const char *json, size_t len, struct pisb_buf *out)
{
	struct pisb_json j;
	struct pisb_err ig = PISB_ERR_INIT;
	int arr;
	bool all = false;

	if (pisb_json_parse(&j, json, len, &ig) < 0)
		return;
	arr = pisb_json_get(&j, 0, "checks");
	for (int i = 0; arr >= 0 && i < j.tok[arr].size; i++) {
		int o = pisb_json_at(&j, arr, i);
		bool pass = false;
		_cleanup_free_ char *n = pisb_json_str(&j, pisb_json_get(&j, o, "check"));
		_cleanup_free_ char *ev = pisb_json_str(&j, pisb_json_get(&j, o, "evidence"));
		pisb_json_bool(&j, pisb_json_get(&j, o, "pass"), &pass);
		pisb_buf_addf(out, "[%s] %s\n    %s\n", pass ? "PASS" : "FAIL", n ? n : "?", ev ? ev : "");
	}
	pisb_json_bool(&j, pisb_json_get(&j, 0, "pass"), &all);
	pisb_buf_addf(out, "%s\n", all ? "all checks passed" : "some checks FAILED");
	pisb_json_release(&j);
}
