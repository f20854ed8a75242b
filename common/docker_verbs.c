/* docker_verbs.c - what `pisb docker` verbs do the same for every driver
 * (see docker_verbs.h). */
#include "docker_verbs.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int pisb_docker_curl_exchange(int port, const char *method, const char *path, const char *body,
			      const char *token, struct pisb_buf *resp, const char **body_out, size_t *body_len, int *code,
			      struct pisb_err *e)
{
	_cleanup_buf_ struct pisb_buf req = PISB_BUF_INIT;
	_cleanup_close_ int s = -1;
	struct sockaddr_in sa;
	int64_t deadline;

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
	deadline = pisb_mono_ms() + 10000;
	for (;;) {
		struct pollfd pf = { s, POLLIN, 0 };
		int64_t left = deadline - pisb_mono_ms();
		ssize_t k;
		if (left <= 0 || poll(&pf, 1, (int)left) <= 0)
			return pisb_err_set(e, PISB_EXIT_TIMEOUT, "docker curl: no complete answer from 127.0.0.1:%d within 10 s", port);
		pisb_buf_grow(resp, 4096);
		k = read(s, resp->s + resp->len, resp->cap - resp->len - 1);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			break;
		resp->len += (size_t)k;
		resp->s[resp->len] = '\0';
		if (resp->len > PISB_DOCKER_CURL_CAP)
			break;
	}
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
