/* create_lc.c - pisb-create's verbs that make and start sandboxes:
 * create, prepare, connect, start, stop.  Linked into pisb as well, which
 * runs create, start and stop itself (cmd/pisb_serve.c): a driver whose
 * lifecycle may load a library hands them over first (PISB_DRV_NO_LOADER). */
#include "create_cmd.h"
#include "config.h"
#include "inspect.h"
#include "driver.h"
#include "lifecycle.h"
#include "json.h"

#include <stdlib.h>
#include <string.h>

/* The lifecycle options, from the parsed flags. */
int create_lc_opts(struct pisb_ctx *c, const char *name, struct pisb_lc_opts *o)
{
	long long owner = 0, fd = -1;

	memset(o, 0, sizeof(*o));
	if (pisb_args_int(&c->a, "owner-pid", 1, 4194304, 0, &owner, &c->err) < 0 ||
	    pisb_args_int(&c->a, "events-fd", 0, 65535, -1, &fd, &c->err) < 0)
		return -1;
	o->name = name;
	o->owner_pid = (pid_t)owner;
	o->session_id = pisb_args_get(&c->a, "session-id");
	o->on_ready = pisb_args_get(&c->a, "on-ready");
	o->events_fd = (int)fd;
	o->json = c->a.json;
	o->wait_ms = c->a.wait_ms;
	return 0;
}

/* --json: the one result rule (pisb_lifecycle_result) */
int create_print_result(struct pisb_ctx *c, const char *name, const char *gone)
{
	_cleanup_buf_ struct pisb_buf b = PISB_BUF_INIT;
	struct pisb_jw w;

	pisb_jw_init(&w, &b);
	if (pisb_lifecycle_result(&c->st, name, gone, &w, &c->err) < 0)
		return -1;
	pisb_front_out(&b);
	return 0;
}

/* create, prepare, connect */
int create_cmd_make(struct pisb_ctx *c)
{
	const char *verb = c->a.verb->name, *name = c->a.pos[0], *f = pisb_args_get(&c->a, "file");
	bool prepare = !strcmp(verb, "prepare"), connect = !strcmp(verb, "connect");
	struct pisb_lc_opts o;
	struct pisb_config *cfg = NULL;
	_cleanup_buf_ struct pisb_buf text = PISB_BUF_INIT, js = PISB_BUF_INIT;
	_cleanup_strv_ struct pisb_strv unready = PISB_STRV_INIT;
	_cleanup_free_ char *pdir = NULL;
	int ret = -1;

	pisb_trace("create: arguments parsed");
	if (create_lc_opts(c, name, &o) < 0 ||
	    pisb_lc_config(name, f, prepare ? "prepare: -f FILE is required"
				  : connect ? "connect: -f FILE (with opensandbox.sandboxId) is required" : NULL,
			   pisb_args_get(&c->a, "driver"), &cfg, &text, &js, &c->err) < 0)
		return -1;
	pisb_trace("create: config parsed");
	if (pisb_args_has(&c->a, "dry-run")) {
		pisb_front_out(&js);
		ret = 0;
		goto out;
	}
	o.template_ = pisb_args_get(&c->a, "template");
	if (pisb_lc_project_dir(cfg, pisb_args_get(&c->a, "project"), &pdir, &c->err) < 0)
		goto out;
	o.project = pdir;
	o.config_text = text.len ? text.s : js.s;
	o.config_len = text.len ? text.len : js.len;
	o.prepare = prepare;
	if (pisb_lifecycle_make(&c->st, prepare ? PISB_LC_PREPARE : connect ? PISB_LC_CONNECT : PISB_LC_CREATE,
				cfg, js.s, &o, &c->err) < 0)
		goto out;
	ret = 0;
	if (o.setup_error)
		pisb_front_warn("sandbox '%s': setup failed: %s (the sandbox runs anyway; see 'pisb logs %s')",
				name, o.setup_error, name);
	if (prepare) {
		pisb_front_info(c, "prepared template '%s'", name);
		goto out;
	}
	if (o.note)
		pisb_front_info(c, "note: sandbox '%s': %s", name, o.note);
	/* services the sandbox may run: those of its config, or of a guest
	 * config that a template, project or image brought (an inspect of
	 * the sandbox, ~0.3 ms: not when there can be none) */
	if (cfg->nservices || cfg->docker || o.template_ || o.project || !cfg->image || strcmp(cfg->image, "host"))
		pisb_inspect_unready(&c->st, name, &unready);
	for (size_t i = 0; i < unready.n; i++)
		pisb_front_warn("%s", unready.v[i]);
	if (c->a.json)
		ret = create_print_result(c, name, NULL);
	else
		pisb_front_info(c, "%s sandbox '%s' (%s)", connect ? "connected" : "created", name, cfg->driver);
	pisb_trace("create: reported");
out:
	free(o.setup_error);
	free(o.note);
	pisb_config_free(cfg);
	return ret;
}

int create_cmd_start_stop(struct pisb_ctx *c)
{
	const char *name = c->a.pos[0];
	bool start = !strcmp(c->a.verb->name, "start");
	struct pisb_lc_opts o;
	_cleanup_free_ char *note = NULL;

	if (create_lc_opts(c, name, &o) < 0 ||
	    pisb_lifecycle(&c->st, start ? PISB_LC_START : PISB_LC_STOP, name, &o, &note, &c->err) < 0)
		return -1;
	if (note)
		pisb_front_info(c, "note: sandbox '%s': %s", name, note);
	if (c->a.json)
		/* stopping a connected sandbox disconnects it */
		return create_print_result(c, name, start ? NULL : "disconnected");
	pisb_front_info(c, "%s sandbox '%s'", start ? "started" : "stopped", name);
	return 0;
}

/* pool [N] [-f FILE]: keep N spares of the config; without N, list the
 * pools */
int create_cmd_pool(struct pisb_ctx *c)
{
	_cleanup_buf_ struct pisb_buf b = PISB_BUF_INIT;
	const char *f = pisb_args_get(&c->a, "file"), *n_arg = c->a.pos[0];
	bool refill = pisb_args_has(&c->a, "refill");
	struct pisb_jw w;
	char key[17];
	long long n = -1;

	if (n_arg && pisb_parse_ll(n_arg, 0, PISB_POOL_MAX, &n) < 0)
		return pisb_err_set(&c->err, PISB_EXIT_USAGE, "pool: N must be a number from 0 to %d, not '%s'",
				    PISB_POOL_MAX, n_arg);
	if (n_arg || refill) {
		if (refill && n_arg)
			return pisb_err_set(&c->err, PISB_EXIT_USAGE, "pool: --refill takes no N");
		if (pisb_pool(&c->st, f, pisb_args_get(&c->a, "driver"), refill ? -1 : (int)n, key, &c->err) < 0)
			return -1;
		if (!c->a.json) {
			if (!refill)
				pisb_front_info(c, n ? "pool %s: %lld spare sandbox%s of %s booted" : "pool %s: ended",
						key, n, n == 1 ? "" : "es", f ? f : "the default config");
			return 0;
		}
	}
	pisb_jw_init(&w, &b);
	pisb_pools_json(&c->st, &w);
	if (c->a.json) {
		pisb_front_out(&b);
		return 0;
	}
	{
		_cleanup_buf_ struct pisb_buf t = PISB_BUF_INIT;
		if (pisb_pools_table(b.s, b.len, c->a.quiet, &t, &c->err) < 0)
			return -1;
		pisb_write_all(1, t.s ? t.s : "", t.len);
	}
	return 0;
}
