/* lifecycle.c - the lifecycle verbs through the driver tables; see
 * lifecycle.h. */
#include "lifecycle.h"
#include "config.h"
#include "dl.h"
#include "driver.h"
#include "err.h"
#include "events.h"
#include "inspect.h"
#include "instance.h"
#include "json.h"
#include "project.h"
#include "sha256.h"
#include "state.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int pisb_lifecycle_event(const struct pisb_lc_opts *o, const struct pisb_event *ev,
			 struct pisb_err *e)
{
	if (!o)
		return 0;
	if (o->events_fd >= 0 && pisb_event_write(o->events_fd, ev, e) < 0)
		return -1;
	if (!strcmp(ev->event, "ready") && o->on_ready && pisb_event_hook(o->on_ready, ev, e) < 0)
		return -1;
	return 0;
}

/* create / connect, then "ready" and --on-ready; what a consumer that
 * cannot take the sandbox refused is destroyed again (a connected one is
 * only disconnected: its driver's destroy never kills what it did not
 * create) */
static int make_ready(struct pisb_state *st, const struct pisb_driver *d, enum pisb_lc_make verb,
		      int (*fn)(struct pisb_state *, const struct pisb_config *, const char *,
				struct pisb_lc_opts *, struct pisb_err *),
		      const struct pisb_config *cfg, const char *config_json,
		      struct pisb_lc_opts *o, struct pisb_err *e)
{
	struct pisb_ready rd = { NULL, NULL, false };
	struct pisb_ready *saved = o->ready;
	int ret;

	o->ready = &rd;
	ret = fn(st, cfg, config_json, o, e);
	o->ready = saved;
	if (ret == 0) {
		struct pisb_event ev = { "ready", o->name, d->name, rd.sandbox_id, rd.workspace,
					 verb == PISB_LC_CREATE, rd.resumed, NULL };
		if (pisb_lifecycle_event(o, &ev, e) < 0) {
			_cleanup_sandbox_ struct pisb_sandbox sb = PISB_SANDBOX_INIT;
			struct pisb_lc_opts quiet = { .events_fd = -1, .wait_ms = o->wait_ms };
			struct pisb_err de = PISB_ERR_INIT;
			if (pisb_sandbox_open(&sb, st, o->name, &de) < 0 || sb.drv->destroy(&sb, &quiet, &de) < 0) {
				char was[sizeof(e->msg)];
				snprintf(was, sizeof(was), "%s", e->msg);
				pisb_err_set(e, e->code, "%s (and removing '%s' failed too: %s)", was, o->name, de.msg);
			} else if (verb == PISB_LC_CONNECT)
				pisb_err_prefix(e, "connect '%s' (disconnected again)", o->name);
			else
				pisb_err_prefix(e, "create '%s' (the sandbox was killed and the instance removed)",
						o->name);
			ret = -1;
		}
	}
	free(rd.sandbox_id);
	free(rd.workspace);
	return ret;
}

int pisb_lifecycle_make(struct pisb_state *st, enum pisb_lc_make verb,
			const struct pisb_config *cfg, const char *config_json,
			struct pisb_lc_opts *o, struct pisb_err *e)
{
	static const enum pisb_verb_id ids[] = {
		[PISB_LC_CREATE] = PISB_V_CREATE, [PISB_LC_PREPARE] = PISB_V_PREPARE,
		[PISB_LC_CONNECT] = PISB_V_CONNECT,
	};
	const struct pisb_driver *d = pisb_driver_find(cfg->driver);
	int (*fn)(struct pisb_state *, const struct pisb_config *, const char *,
		  struct pisb_lc_opts *, struct pisb_err *);

	if (!d)
		return pisb_err_set(e, PISB_EXIT_FAIL, "driver '%s' is not in this build (see pisb drivers)",
				    cfg->driver);
	if (!(d->caps & PISB_DRV_NO_LOADER))
		pisb_dl_needed("the libraries of its driver");
	fn = verb == PISB_LC_CREATE ? d->create : verb == PISB_LC_PREPARE ? d->prepare : d->connect;
	if (!fn)
		return pisb_driver_refuse_name(o->name, d, ids[verb], e);
	if (o->template_ && !(d->caps & PISB_DRV_TEMPLATES)) {
		const char *why = pisb_driver_why(d, PISB_V_PREPARE);
		return pisb_err_set(e, PISB_EXIT_USAGE, "--template: driver %s has no pisb templates%s%s",
				    d->name, why ? ": " : "", why ? why : "");
	}
	if (o->template_) {
		/* a template is its driver's (a local one is a tree, a vm one a
		 * disk image): another driver cannot start from it */
		_cleanup_sandbox_ struct pisb_sandbox t = PISB_SANDBOX_INIT;
		const struct pisb_record *rec;
		if (pisb_sandbox_open_kind(&t, st, "templates", o->template_, e) < 0)
			return -1;
		if (!(rec = pisb_sandbox_record(&t, e)))
			return pisb_err_prefix(e, "template '%s'", o->template_);
		if (pisb_driver_find(rec->driver) != d)
			return pisb_err_set(e, PISB_EXIT_USAGE,
					    "--template: template '%s' was prepared by driver %s, not %s (create with --driver %s, or driver: %s in the file)",
					    o->template_, rec->driver, d->name, rec->driver, rec->driver);
	}
	if (o->project && verb != PISB_LC_CONNECT && !pisb_driver_has(d, PISB_V_DIFF))
		return pisb_driver_refuse_name(o->name, d, PISB_V_DIFF, e);
	if (o->project && verb == PISB_LC_PREPARE)
		return pisb_err_set(e, PISB_EXIT_USAGE, "--project: a template holds no project");
	if (verb == PISB_LC_PREPARE)
		return fn(st, cfg, config_json, o, e);
	if (make_ready(st, d, verb, fn, cfg, config_json, o, e) < 0)
		return -1;
	if (verb == PISB_LC_CREATE && o->project) {
		/* the copy is there since before the first boot; git, inside */
		_cleanup_sandbox_ struct pisb_sandbox sb = PISB_SANDBOX_INIT;
		_cleanup_free_ char *gnote = NULL;
		struct pisb_err ig = PISB_ERR_INIT;
		if (pisb_sandbox_open(&sb, st, o->name, &ig) == 0 &&
		    pisb_project_git_init(&sb, &gnote, &ig) < 0)
			gnote = xasprintf("%s", ig.msg);
		if (gnote)
			o->note = PISB_STEAL(gnote);
	}
	if (verb == PISB_LC_CREATE && d->start_note) {
		_cleanup_sandbox_ struct pisb_sandbox sb = PISB_SANDBOX_INIT;
		struct pisb_err ig = PISB_ERR_INIT;
		if (!o->note && pisb_sandbox_open(&sb, st, o->name, &ig) == 0)
			o->note = d->start_note(&sb);
	}
	return 0;
}

int pisb_lifecycle_end(struct pisb_sandbox *sb, const struct pisb_lc_opts *o, bool destroy,
		       pisb_lc_end_fn end, struct pisb_err *e)
{
	struct pisb_ready ev = { NULL, NULL, false };
	int ret = end(sb, o, destroy, &ev, e);

	if (ret == 0 && destroy)
		ret = pisb_state_trash(sb->st, "instances", sb->name, e);
	if (ret == 0) {
		struct pisb_event r = { "released", sb->name, sb->drv->name, ev.sandbox_id, ev.workspace,
					true, false, destroy ? "remove" : "stop" };
		ret = pisb_lifecycle_event(o, &r, e);
	}
	if (ret < 0)
		pisb_err_prefix(e, "%s '%s'", destroy ? "destroy" : "stop", sb->name);
	free(ev.sandbox_id);
	free(ev.workspace);
	return ret;
}

/* release --policy's words, as pisb_policy */
static const char *const policy_words[] = {
	[PISB_POLICY_KILL] = "remove", [PISB_POLICY_PAUSE] = "stop", [PISB_POLICY_KEEP] = "keep",
};

static int policy_of(const char *w)
{
	for (size_t i = 0; i < sizeof(policy_words) / sizeof(policy_words[0]); i++)
		if (!strcmp(w, policy_words[i]))
			return (int)i;
	return -1;
}

enum pisb_policy pisb_lc_policy(const struct pisb_lc_opts *o, enum pisb_policy own)
{
	int p = o && o->policy ? policy_of(o->policy) : -1;

	return p < 0 ? own : (enum pisb_policy)p;
}

int pisb_lifecycle_release_as(struct pisb_sandbox *sb, const struct pisb_lc_opts *o,
			      enum pisb_policy p, struct pisb_err *e)
{
	struct pisb_event ev = { "released", sb->name, sb->drv->name, NULL, NULL, true, false, "keep" };

	switch (p) {
	case PISB_POLICY_KILL:
		return sb->drv->destroy(sb, o, e);
	case PISB_POLICY_PAUSE:
		return sb->drv->stop(sb, o, e);
	case PISB_POLICY_KEEP:
		break;
	}
	return pisb_lifecycle_event(o, &ev, e);
}

int pisb_lifecycle(struct pisb_state *st, enum pisb_lc_verb verb, const char *name,
		   const struct pisb_lc_opts *o, char **note, struct pisb_err *e)
{
	_cleanup_sandbox_ struct pisb_sandbox sb = PISB_SANDBOX_INIT;

	if (note)
		*note = NULL;
	if (pisb_sandbox_open_kind(&sb, st, verb == PISB_LC_DESTROY_TEMPLATE ? "templates" : "instances",
				   name, e) < 0)
		return -1;
	if (!(sb.drv->caps & PISB_DRV_NO_LOADER))
		pisb_dl_needed("the libraries of its driver");
	switch (verb) {
	case PISB_LC_DESTROY_TEMPLATE:
		if (!sb.drv->destroy_template)
			return pisb_driver_refuse(&sb, PISB_V_PREPARE, e);
		return sb.drv->destroy_template(&sb, o, e);
	case PISB_LC_START:
		if (sb.drv->start(&sb, o, e) < 0)
			return -1;
		if (note && sb.drv->start_note)
			*note = sb.drv->start_note(&sb);
		/* start --events-fd: "ready" once it runs (a remote driver writes
		 * its own, with its sandbox id and whether it resumed) */
		if (!(sb.drv->caps & PISB_DRV_REMOTE) && o && o->events_fd >= 0) {
			struct pisb_event ev = { "ready", name, sb.drv->name, NULL, NULL, false, false, NULL };
			return pisb_lifecycle_event(o, &ev, e);
		}
		return 0;
	case PISB_LC_STOP:
		return sb.drv->stop(&sb, o, e);
	case PISB_LC_DESTROY:
		return sb.drv->destroy(&sb, o, e);
	case PISB_LC_RELEASE:
		if (!sb.drv->release)
			return pisb_driver_refuse(&sb, PISB_V_RELEASE, e);
		if (o && o->policy && policy_of(o->policy) < 0)
			return pisb_err_set(e, PISB_EXIT_USAGE, "--policy: '%s' is not one of remove, stop, keep",
					    o->policy);
		return sb.drv->release(&sb, o, e);
	}
	return -1;
}

int pisb_lc_config(const char *name, const char *file, const char *need_file, const char *driver,
		   struct pisb_config **cfg, struct pisb_buf *text, struct pisb_buf *json,
		   struct pisb_err *e)
{
	struct pisb_jw w;

	*cfg = NULL;
	if (!pisb_name_valid(name))
		return pisb_err_set(e, PISB_EXIT_USAGE,
				    "invalid name '%s' (lowercase letter, then up to 39 of a-z 0-9 -)", name);
	if (need_file && !file)
		return pisb_err_set(e, PISB_EXIT_USAGE, "%s", need_file);
	if (driver && !pisb_driver_find(driver)) {
		_cleanup_buf_ struct pisb_buf names = PISB_BUF_INIT;
		pisb_driver_names(&names, ", ");
		return pisb_err_set(e, PISB_EXIT_USAGE, "--driver: unknown driver '%s' (%s)", driver, names.s);
	}
	if (file) {
		if (pisb_config_load(file, cfg, e) < 0)
			return -1;
		if (text && pisb_read_file_at(AT_FDCWD, file, text, 1 << 20) < 0) {
			pisb_config_free(*cfg);
			*cfg = NULL;
			return pisb_err_sys(e, PISB_EXIT_USAGE, "read '%s'", file);
		}
	} else {
		*cfg = pisb_config_default();
	}
	if (driver) {
		free((*cfg)->driver);
		(*cfg)->driver = xstrdup(driver);
	}
	pisb_jw_init(&w, json);
	pisb_config_json(*cfg, &w);
	return 0;
}

int pisb_lc_project_dir(const struct pisb_config *cfg, const char *arg, char **out,
			struct pisb_err *e)
{
	const char *d = arg ? arg : cfg->project.dir;

	*out = NULL;
	if (!d || cfg->project.mode == PISB_PROJECT_NONE)
		return 0;
	if (cfg->project.mode != PISB_PROJECT_COPY && !pisb_driver_can(cfg->driver, PISB_DRV_PROJECT_BIND)) {
		_cleanup_buf_ struct pisb_buf b = PISB_BUF_INIT;
		pisb_driver_names_with(&b, PISB_DRV_PROJECT_BIND);
		return pisb_err_set(e, PISB_EXIT_USAGE, "project.mode: %s is built for %s only; use copy",
				    cfg->project.mode == PISB_PROJECT_BIND ? "bind" : "bind-ro", b.s);
	}
	if (!(*out = realpath(d, NULL)))
		return pisb_err_sys(e, errno == ENOENT ? PISB_EXIT_NOTFOUND : PISB_EXIT_USAGE,
				    "--project '%s'", d);
	return 0;
}


/* ---- pisb pool ---- */

void pisb_config_key(const char *config_json, const char *text, size_t len, char out[17])
{
	struct pisb_sha256 c;
	unsigned char d[32];
	char hex[65];

	pisb_sha256_init(&c);
	pisb_sha256_update(&c, config_json, strlen(config_json) + 1);
	pisb_sha256_update(&c, text ? text : "", text ? len : 0);
	pisb_sha256_final(&c, d);
	pisb_sha256_hex(d, hex);
	memcpy(out, hex, 16);
	out[16] = '\0';
}

int pisb_pool(struct pisb_state *st, const char *file, const char *driver, int n,
	      char *key, struct pisb_err *e)
{
	struct pisb_config *cfg = NULL;
	_cleanup_buf_ struct pisb_buf text = PISB_BUF_INIT, js = PISB_BUF_INIT;
	_cleanup_free_ char *abs = NULL;
	const struct pisb_driver *d;
	const char *t;
	size_t len;
	int ret = -1;

	if (pisb_lc_config("pool", file, NULL, driver, &cfg, &text, &js, e) < 0)
		return -1;
	d = pisb_driver_find(cfg->driver);
	if (!d || !pisb_driver_has(d, PISB_V_POOL)) {
		const char *why = d ? pisb_driver_why(d, PISB_V_POOL) : NULL;
		pisb_err_set(e, PISB_EXIT_FAIL, "the %s driver cannot 'pool'%s%s; see pisb drivers",
			     cfg->driver, why ? ": " : "", why ? why : "");
		goto out;
	}
	/* the text a create of this config would give its guest */
	t = text.len ? text.s : js.s;
	len = text.len ? text.len : js.len;
	if (file && !(abs = realpath(file, NULL))) {
		pisb_err_sys(e, PISB_EXIT_USAGE, "-f '%s'", file);
		goto out;
	}
	if (key)
		pisb_config_key(js.s, t, len, key);
	ret = d->pool(st, cfg, js.s, t, len, abs, n, e);
out:
	pisb_config_free(cfg);
	return ret;
}

void pisb_pools_json(struct pisb_state *st, struct pisb_jw *w)
{
	pisb_jw_arr(w);
	for (const struct pisb_driver *const *d = pisb_drivers; *d; d++)
		if (pisb_driver_has(*d, PISB_V_POOL))
			(*d)->pool_list(st, w);
	pisb_jw_arr_end(w);
}

int pisb_pools_table(const char *json, size_t len, bool quiet, struct pisb_buf *out,
		     struct pisb_err *e)
{
	static const struct pisb_table_col cols[] = {
		{ "key", "POOL", 16, "" }, { "driver", "DRIVER", 8, "-" }, { "spares", "SPARES", 7, "0" },
		{ "ready", "READY", 6, "0" }, { "file", "FILE", 0, "(the default config)" }, { NULL, NULL, 0, NULL },
	};
	return pisb_json_table(json, len, quiet, cols, out, e);
}
