/* pisb-create - lifecycle of every driver; see man/pisb-create.1 */
#include "front.h"
#include "config.h"
#include "doctor.h"
#include "events.h"
#include "inspect.h"
#include "driver.h"
#include "lifecycle.h"
#include "json.h"

#include <fcntl.h>
#include <stdio.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The lifecycle options, from the parsed flags. */
static struct pisb_lc_opts lc_opts(struct pisb_ctx *c, const char *name)
{
	struct pisb_lc_opts o = { 0 };
	long long owner = 0, fd = -1;
	struct pisb_err ig = PISB_ERR_INIT;

	pisb_args_int(&c->a, "owner-pid", 1, 4194304, 0, &owner, &ig);
	pisb_args_int(&c->a, "events-fd", 0, 65535, -1, &fd, &ig);
	o.name = name;
	o.owner_pid = (pid_t)owner;
	o.session_id = pisb_args_get(&c->a, "session-id");
	o.on_ready = pisb_args_get(&c->a, "on-ready");
	o.events_fd = (int)fd;
	o.json = c->a.json;
	o.wait_ms = c->a.wait_ms;
	return o;
}

static int print_inspect(struct pisb_ctx *c, const char *name, bool full)
{
	_cleanup_buf_ struct pisb_buf b = PISB_BUF_INIT;
	struct pisb_jw w;

	pisb_jw_init(&w, &b);
	if (pisb_inspect(&c->st, name, full, &w, &c->err) < 0)
		return -1;
	pisb_front_out(&b);
	return 0;
}

static int cmd_validate(struct pisb_ctx *c)
{
	const char *f = pisb_args_get(&c->a, "file");
	struct pisb_config *cfg = NULL;
	_cleanup_buf_ struct pisb_buf b = PISB_BUF_INIT;
	struct pisb_jw w;

	if (!f)
		return pisb_err_set(&c->err, PISB_EXIT_USAGE, "validate: -f FILE is required");
	if (pisb_config_load(f, &cfg, &c->err) < 0)
		return -1;
	pisb_jw_init(&w, &b);
	pisb_config_json(cfg, &w);
	pisb_config_free(cfg);
	pisb_front_out(&b);
	return 0;
}

/* Say which services did not become ready (the sandbox runs anyway). */
static void warn_unready(struct pisb_ctx *c, const char *name)
{
	_cleanup_buf_ struct pisb_buf b = PISB_BUF_INIT;
	struct pisb_err ig = PISB_ERR_INIT;
	struct pisb_jw w;
	struct pisb_json j;
	int svcs;

	pisb_jw_init(&w, &b);
	if (pisb_inspect(&c->st, name, false, &w, &ig) < 0 || pisb_json_parse(&j, b.s, b.len, &ig) < 0)
		return;
	svcs = pisb_json_get(&j, 0, "services");
	for (int i = 0; svcs >= 0 && i < j.tok[svcs].size; i++) {
		int o = pisb_json_at(&j, svcs, i);
		bool ready = true;
		_cleanup_free_ char *sn = pisb_json_str(&j, pisb_json_get(&j, o, "name"));
		_cleanup_free_ char *why = pisb_json_str(&j, pisb_json_get(&j, o, "error"));
		pisb_json_bool(&j, pisb_json_get(&j, o, "ready"), &ready);
		if (!ready)
			pisb_front_warn("sandbox '%s': service '%s' is not ready%s%s (see 'pisb svc %s status', 'pisb logs %s %s')",
					name, sn ? sn : "?", why ? ": " : "", why ? why : "", name, name, sn ? sn : "");
	}
	pisb_json_release(&j);
}

/* --project DIR, else the config's project.dir (mode none: neither). */
static int project_dir(struct pisb_ctx *c, const struct pisb_config *cfg, char **out)
{
	const char *d = pisb_args_get(&c->a, "project");

	*out = NULL;
	if (!d)
		d = cfg->project.dir;
	if (!d || cfg->project.mode == PISB_PROJECT_NONE)
		return 0;
	if (cfg->project.mode != PISB_PROJECT_COPY && !pisb_driver_can(cfg->driver, PISB_DRV_PROJECT_BIND)) {
		_cleanup_buf_ struct pisb_buf b = PISB_BUF_INIT;
		pisb_driver_names_with(&b, PISB_DRV_PROJECT_BIND);
		return pisb_err_set(&c->err, PISB_EXIT_USAGE, "project.mode: %s is built for %s only; use copy",
				    cfg->project.mode == PISB_PROJECT_BIND ? "bind" : "bind-ro", b.s);
	}
	if (!(*out = realpath(d, NULL)))
		return pisb_err_sys(&c->err, errno == ENOENT ? PISB_EXIT_NOTFOUND : PISB_EXIT_USAGE,
				    "--project '%s'", d);
	return 0;
}

static int cmd_create(struct pisb_ctx *c)
{
	bool prepare = !strcmp(c->a.verb->name, "prepare");
	const char *name = c->a.pos[0], *f = pisb_args_get(&c->a, "file");
	const char *driver = pisb_args_get(&c->a, "driver");
	struct pisb_lc_opts o = { 0 };
	struct pisb_config *cfg = NULL;
	_cleanup_buf_ struct pisb_buf text = PISB_BUF_INIT, js = PISB_BUF_INIT;
	struct pisb_jw w;
	long long owner = 0, events_fd = -1;
	_cleanup_free_ char *pdir = NULL;
	int ret = -1;

	pisb_trace("create: arguments parsed");
	if (!pisb_name_valid(name))
		return pisb_err_set(&c->err, PISB_EXIT_USAGE,
				    "invalid name '%s' (lowercase letter, then up to 39 of a-z 0-9 -)", name);
	if (prepare && !f)
		return pisb_err_set(&c->err, PISB_EXIT_USAGE, "prepare: -f FILE is required");
	if (pisb_args_int(&c->a, "owner-pid", 1, 4194304, 0, &owner, &c->err) < 0 ||
	    pisb_args_int(&c->a, "events-fd", 0, 65535, -1, &events_fd, &c->err) < 0)
		return -1;
	if (driver && !pisb_driver_find(driver)) {
		_cleanup_buf_ struct pisb_buf names = PISB_BUF_INIT;
		pisb_driver_names(&names, ", ");
		return pisb_err_set(&c->err, PISB_EXIT_USAGE, "--driver: unknown driver '%s' (%s)", driver, names.s);
	}
	if (f) {
		if (pisb_config_load(f, &cfg, &c->err) < 0)
			return -1;
		if (pisb_read_file_at(AT_FDCWD, f, &text, 1 << 20) < 0) {
			pisb_config_free(cfg);
			return pisb_err_sys(&c->err, PISB_EXIT_USAGE, "read '%s'", f);
		}
	} else {
		cfg = pisb_config_default();
	}
	if (driver) {
		free(cfg->driver);
		cfg->driver = xstrdup(driver);
	}
	pisb_jw_init(&w, &js);
	pisb_config_json(cfg, &w);
	pisb_trace("create: config parsed");
	if (pisb_args_has(&c->a, "dry-run")) {
		pisb_front_out(&js);
		ret = 0;
		goto out;
	}
	o = lc_opts(c, name);
	o.template_ = pisb_args_get(&c->a, "template");
	if (project_dir(c, cfg, &pdir) < 0)
		goto out;
	o.project = pdir;
	o.config_text = text.len ? text.s : js.s;
	o.config_len = text.len ? text.len : js.len;
	o.prepare = prepare;
	if (pisb_lifecycle_make(&c->st, prepare ? PISB_LC_PREPARE : PISB_LC_CREATE, cfg, js.s, &o,
				&c->err) < 0)
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
	warn_unready(c, name);
	if (c->a.json)
		ret = print_inspect(c, name, false);
	else
		pisb_front_info(c, "created sandbox '%s' (%s)", name, cfg->driver);
	pisb_trace("create: reported");
out:
	free(o.setup_error);
	free(o.note);
	pisb_config_free(cfg);
	return ret;
}

static int cmd_start_stop(struct pisb_ctx *c)
{
	const char *name = c->a.pos[0];
	bool start = !strcmp(c->a.verb->name, "start");
	struct pisb_lc_opts oo = lc_opts(c, name);

	_cleanup_free_ char *note = NULL;

	if (pisb_lifecycle(&c->st, start ? PISB_LC_START : PISB_LC_STOP, name, &oo, &note, &c->err) < 0)
		return -1;
	if (note)
		pisb_front_info(c, "note: sandbox '%s': %s", name, note);
	if (c->a.json) {
		/* stopping a connected sandbox disconnects it: nothing to inspect */
		if (!start && faccessat(c->st.fd, "instances", F_OK, 0) == 0) {
			_cleanup_free_ char *p = xasprintf("instances/%s", name);
			if (faccessat(c->st.fd, p, F_OK, AT_SYMLINK_NOFOLLOW) < 0) {
				_cleanup_buf_ struct pisb_buf b = PISB_BUF_INIT;
				pisb_buf_addf(&b, "{\"name\":\"%s\",\"status\":\"disconnected\"}", name);
				pisb_front_out(&b);
				return 0;
			}
		}
		return print_inspect(c, name, false);
	}
	pisb_front_info(c, "%s sandbox '%s'", start ? "started" : "stopped", name);
	return 0;
}

static int cmd_destroy(struct pisb_ctx *c)
{
	const char *name = c->a.pos[0], *confirm = pisb_args_get(&c->a, "confirm");
	bool tmpl = pisb_args_has(&c->a, "template");
	struct pisb_lc_opts oo = lc_opts(c, name);

	if (!confirm || strcmp(confirm, name))
		return pisb_err_set(&c->err, PISB_EXIT_USAGE,
				    "destroy removes '%s' for good: repeat its name with --confirm %s", name, name);
	if (pisb_lifecycle(&c->st, tmpl ? PISB_LC_DESTROY_TEMPLATE : PISB_LC_DESTROY, name, &oo, NULL, &c->err) < 0)
		return -1;
	if (c->a.json) {
		_cleanup_buf_ struct pisb_buf b = PISB_BUF_INIT;
		pisb_buf_addf(&b, "{\"name\":\"%s\",\"destroyed\":true}", name);
		pisb_front_out(&b);
	} else {
		pisb_front_info(c, "destroyed %s '%s'", tmpl ? "template" : "sandbox", name);
	}
	return 0;
}

/* the session's end: the sandbox's own policy, or --policy */
static int cmd_release(struct pisb_ctx *c)
{
	const char *name = c->a.pos[0];
	struct pisb_lc_opts oo = lc_opts(c, name);
	_cleanup_free_ char *p = xasprintf("instances/%s", name);
	bool gone;

	oo.policy = pisb_args_get(&c->a, "policy");
	if (pisb_lifecycle(&c->st, PISB_LC_RELEASE, name, &oo, NULL, &c->err) < 0)
		return -1;
	gone = faccessat(c->st.fd, p, F_OK, AT_SYMLINK_NOFOLLOW) < 0;
	if (c->a.json) {
		_cleanup_buf_ struct pisb_buf b = PISB_BUF_INIT;
		if (!gone)
			return print_inspect(c, name, false);
		pisb_buf_addf(&b, "{\"name\":\"%s\",\"status\":\"removed\"}", name);
		pisb_front_out(&b);
		return 0;
	}
	pisb_front_info(c, "released sandbox '%s'%s", name, gone ? " (removed)" : "");
	return 0;
}

static int cmd_list(struct pisb_ctx *c)
{
	_cleanup_buf_ struct pisb_buf b = PISB_BUF_INIT;
	struct pisb_jw w;
	struct pisb_json j;
	int n;

	pisb_jw_init(&w, &b);
	/* remote sandboxes: their servers are asked, so a dead one says so */
	if (pisb_list(&c->st, pisb_args_has(&c->a, "templates"), 2000, &w, &c->err) < 0)
		return -1;
	if (c->a.json) {
		pisb_front_out(&b);
		return 0;
	}
	if (pisb_json_parse(&j, b.s, b.len, &c->err) < 0)
		return -1;
	n = j.tok[0].size;
	if (!c->a.quiet && n)
		printf("%-24s %-12s %-12s %s\n", "NAME", "DRIVER", "STATUS", "IMAGE");
	for (int i = 0; i < n; i++) {
		int o = pisb_json_at(&j, 0, i);
		_cleanup_free_ char *nm = pisb_json_str(&j, pisb_json_get(&j, o, "name"));
		_cleanup_free_ char *dr = pisb_json_str(&j, pisb_json_get(&j, o, "driver"));
		_cleanup_free_ char *stt = pisb_json_str(&j, pisb_json_get(&j, o, "status"));
		_cleanup_free_ char *im = pisb_json_str(&j, pisb_json_get(&j, o, "image"));
		if (c->a.quiet)
			printf("%s\n", nm ? nm : "");
		else
			printf("%-24s %-12s %-12s %s\n", nm ? nm : "", dr ? dr : "-", stt ? stt : "-", im ? im : "-");
	}
	pisb_json_release(&j);
	return 0;
}

static int cmd_inspect(struct pisb_ctx *c)
{
	/* inspect always prints JSON: it is the machine-readable view */
	return print_inspect(c, c->a.pos[0], true);
}

static int cmd_verify(struct pisb_ctx *c)
{
	_cleanup_buf_ struct pisb_buf b = PISB_BUF_INIT;
	int r = pisb_verify_sandbox(&c->st, c->a.pos[0], c->a.json, &b, &c->err);

	if (r < 0)
		return -1;
	pisb_write_all(1, b.s ? b.s : "", b.len);
	return r;
}

static int cmd_doctor(struct pisb_ctx *c)
{
	_cleanup_buf_ struct pisb_buf b = PISB_BUF_INIT;
	int r = pisb_doctor(c->a.state_dir, c->a.json, &b, &c->err);

	if (r < 0)
		return -1;
	pisb_write_all(1, b.s ? b.s : "", b.len);
	return r;
}

static int cmd_drivers(struct pisb_ctx *c)
{
	_cleanup_buf_ struct pisb_buf b = PISB_BUF_INIT;
	struct pisb_jw w;

	if (c->a.json) {
		pisb_jw_init(&w, &b);
		pisb_drivers_json(&w);
	} else {
		pisb_drivers_text(&b, c->a.quiet);
	}
	pisb_front_out(&b);
	return 0;
}

static int cmd_connect(struct pisb_ctx *c)
{
	const char *name = c->a.pos[0], *f = pisb_args_get(&c->a, "file");
	struct pisb_config *cfg = NULL;
	_cleanup_buf_ struct pisb_buf js = PISB_BUF_INIT;
	struct pisb_lc_opts oo;
	struct pisb_jw w;
	int r;

	if (!pisb_name_valid(name))
		return pisb_err_set(&c->err, PISB_EXIT_USAGE,
				    "invalid name '%s' (lowercase letter, then up to 39 of a-z 0-9 -)", name);
	if (!f)
		return pisb_err_set(&c->err, PISB_EXIT_USAGE, "connect: -f FILE (with opensandbox.sandboxId) is required");
	if (pisb_config_load(f, &cfg, &c->err) < 0)
		return -1;
	pisb_jw_init(&w, &js);
	pisb_config_json(cfg, &w);
	oo = lc_opts(c, name);
	r = pisb_lifecycle_make(&c->st, PISB_LC_CONNECT, cfg, js.s, &oo, &c->err);
	free(oo.setup_error);
	free(oo.note);
	if (r < 0) {
		pisb_config_free(cfg);
		return -1;
	}
	if (c->a.json)
		r = print_inspect(c, name, false);
	else
		pisb_front_info(c, "connected sandbox '%s' (%s)", name, cfg->driver);
	pisb_config_free(cfg);
	return r;
}

static const struct pisb_handler handlers[] = {
	{ "validate", cmd_validate, false },
	{ "create", cmd_create, true },
	{ "prepare", cmd_create, true },
	{ "start", cmd_start_stop, true },
	{ "stop", cmd_start_stop, true },
	{ "destroy", cmd_destroy, true },
	{ "release", cmd_release, true },
	{ "list", cmd_list, true },
	{ "inspect", cmd_inspect, true },
	{ "connect", cmd_connect, true },
	{ "verify", cmd_verify, true },
	{ "doctor", cmd_doctor, false },
	{ "drivers", cmd_drivers, false },
	{ NULL, NULL, false },
};

int main(int argc, char **argv)
{
	return pisb_front_main("pisb-create", handlers, argc, argv);
}
