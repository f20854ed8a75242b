/* pisb-docker - docker inside a sandbox's own daemon; see man/pisb-docker.1
 *
 * A sandbox with a daemon of its own answers through its driver's docker
 * slot: sbx (a microVM with a private dockerd, `sbx exec`,
 * drivers/sbx/sbx_docker.c) and local with `docker: true` (a dockerd
 * inside the sandbox, drivers/local/docker.c).  Any other sandbox is
 * refused, naming its driver.
 * This binary never runs a docker client on the host and never looks at
 * DOCKER_HOST or the host's docker socket.
 */
#include "front.h"
#include "docker_policy.h"
#include "driver.h"
#include "json.h"
#include "docker_verbs.h"

#include <stdio.h>
#include <string.h>

static const char *const verbs[] = {
	"status", "verify", "resources", "prune", "ps", "images", "pull", "load",
	"import", "run", "logs", "exec", "build", "init", "compose", "stop", "start", "rm",
	"curl", NULL,
};

/* Human form of status, verify and resources. */
static void human(const char *verb, struct pisb_buf *b)
{
	struct pisb_json j;
	struct pisb_err ig = PISB_ERR_INIT;

	if (pisb_json_parse(&j, b->s, b->len, &ig) < 0)
		return;
	if (!strcmp(verb, "verify")) {
		_cleanup_buf_ struct pisb_buf t = PISB_BUF_INIT;
		pisb_docker_verify_text(b->s, b->len, &t);
		pisb_write_all(1, t.s ? t.s : "", t.len);
	} else if (!strcmp(verb, "status")) {
		int d = pisb_json_get(&j, 0, "daemon"), ports = pisb_json_get(&j, 0, "ports");
		bool up = false;
		_cleanup_free_ char *n = pisb_json_str(&j, pisb_json_get(&j, 0, "name"));
		_cleanup_free_ char *sx = pisb_json_str(&j, pisb_json_get(&j, 0, "sbxName"));
		_cleanup_free_ char *stt = pisb_json_str(&j, pisb_json_get(&j, 0, "status"));
		_cleanup_free_ char *ver = pisb_json_str(&j, pisb_json_get(&j, d, "version"));
		_cleanup_free_ char *id = pisb_json_str(&j, pisb_json_get(&j, d, "id"));
		_cleanup_free_ char *err = pisb_json_str(&j, pisb_json_get(&j, d, "error"));
		pisb_json_bool(&j, pisb_json_get(&j, d, "reachable"), &up);
		_cleanup_free_ char *drv = pisb_json_str(&j, pisb_json_get(&j, 0, "driver"));
		if (sx)
			printf("sandbox %s (sbx %s): %s\n", n ? n : "?", sx, stt ? stt : "?");
		else
			printf("sandbox %s (%s): %s\n", n ? n : "?", drv ? drv : "?", stt ? stt : "?");
		if (up)
			printf("docker daemon inside: %s (id %s)\n", ver ? ver : "?", id ? id : "?");
		else
			printf("docker daemon inside: not reachable: %s\n", err ? err : "?");
		for (int i = 0; ports >= 0 && i < j.tok[ports].size; i++) {
			int o = pisb_json_at(&j, ports, i);
			long long h = 0, s = 0;
			pisb_json_int(&j, pisb_json_get(&j, o, "hostPort"), &h);
			pisb_json_int(&j, pisb_json_get(&j, o, "sandboxPort"), &s);
			printf("published: 127.0.0.1:%lld -> %lld\n", h, s);
		}
	} else {
		static const char *const keys[] = { "cpus", "memory", "disk", "docker", NULL };
		for (int k = 0; keys[k]; k++) {
			int t = pisb_json_get(&j, 0, keys[k]);
			size_t n = 0;
			const char *raw = pisb_json_raw(&j, t, &n);
			_cleanup_free_ char *s = pisb_json_str(&j, t);
			if (s)
				printf("%s:\n%s\n", keys[k], s);
			else
				printf("%s: %.*s\n", keys[k], raw ? (int)n : 1, raw ? raw : "-");
		}
	}
	pisb_json_release(&j);
}

static int cmd_docker(struct pisb_ctx *c)
{
	const char *name = c->a.pos[0], *verb = c->a.pos[1];
	_cleanup_buf_ struct pisb_buf b = PISB_BUF_INIT;
	_cleanup_strv_ struct pisb_strv notes = PISB_STRV_INIT;
	_cleanup_sandbox_ struct pisb_sandbox sb = PISB_SANDBOX_INIT;
	_cleanup_docker_args_ struct pisb_docker_args da = PISB_DOCKER_ARGS_INIT;
	struct pisb_jw w;
	bool json = false;
	int i, code = 0;

	for (i = 0; verbs[i] && strcmp(verbs[i], verb); i++)
		;
	if (!verbs[i])
		return pisb_err_set(&c->err, PISB_EXIT_USAGE,
				    "docker: unknown verb '%s' (status, verify, resources, prune, ps, images, pull, load, import, run, logs, exec, build, init, compose, stop, start, rm, curl)",
				    verb);
	if (pisb_sandbox_open(&sb, &c->st, name, &c->err) < 0)
		return -1;
	if (!sb.drv->docker)
		return pisb_driver_refuse(&sb, PISB_V_DOCKER, &c->err);
	/* the argument policy, one for every driver (docker_policy.h) */
	if (pisb_docker_policy_sandbox(&sb, verb, c->a.cmd, c->a.ncmd, &da, &c->err) < 0)
		return -1;
	pisb_jw_init(&w, &b);
	if (sb.drv->docker(&sb, verb, da.argv.v, da.argv.n, &w, &json, &code, &notes, &c->err) < 0)
		return -1;
	for (size_t k = 0; k < notes.n; k++)
		pisb_front_info(c, "%s", notes.v[k]);
	if (json) {
		if (c->a.json)
			pisb_front_out(&b);
		else
			human(verb, &b);
	}
	return code;
}

static const struct pisb_handler handlers[] = {
	{ "docker", cmd_docker, true },
	{ NULL, NULL, false },
};

int main(int argc, char **argv)
{
	return pisb_front_main("pisb-docker", handlers, argc, argv);
}
