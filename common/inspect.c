#include "inspect.h"
#include "config.h"
#include "driver.h"
#include "err.h"
#include "instance.h"
#include "json.h"
#include "lock.h"
#include "state.h"
#include "util.h"

#include <dirent.h>
#include <stdio.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void pisb_inspect_limits(struct pisb_sandbox *sb, const struct pisb_config *cfg, bool running,
			 struct pisb_jw *w)
{
	struct pisb_err ig = PISB_ERR_INIT;
	const struct pisb_runtime *rt = pisb_sandbox_runtime(sb, &ig);

	running = running && rt;
	pisb_jw_key(w, "limits");
	pisb_jw_obj(w);
	pisb_jw_kint(w, "cpus", cfg->cpus);
	pisb_jw_kint(w, "memoryGiB", cfg->memory_gib);
	pisb_jw_kint(w, "pids", cfg->pids);
	pisb_jw_kint(w, "diskGiB", cfg->disk_gib);
	pisb_jw_key(w, "enforced");
	pisb_jw_obj(w);
	pisb_jw_kbool(w, "cpus", running && rt->cpu_enforced);
	pisb_jw_kbool(w, "memory", running && rt->mem_enforced);
	pisb_jw_kbool(w, "pids", running && rt->pids_enforced);
	pisb_jw_kbool(w, "disk", running && rt->disk_enforced);
	pisb_jw_obj_end(w);
	if (running) {
		_cleanup_buf_ struct pisb_buf note = PISB_BUF_INIT;
		if (rt->limits_note)
			pisb_buf_adds(&note, rt->limits_note);
		if (!rt->disk_enforced) {
			if (note.len)
				pisb_buf_adds(&note, "; ");
			pisb_buf_addf(&note, "disk %d GiB not enforced: the disk is a directory on the host filesystem, without a quota", cfg->disk_gib);
		}
		pisb_jw_kstr(w, "note", note.s);
	} else {
		pisb_jw_kstr(w, "note", "limits are enforced only while the sandbox runs");
	}
	pisb_jw_obj_end(w);
}

/* ports: [{service, port, hostPort}] from the services the controller runs */
static void ports(struct pisb_jw *w, const char *services)
{
	struct pisb_err ig = PISB_ERR_INIT;
	struct pisb_json j;

	pisb_jw_key(w, "ports");
	pisb_jw_arr(w);
	if (services && pisb_json_parse(&j, services, strlen(services), &ig) == 0) {
		for (int i = 0; j.tok[0].type == JSMN_ARRAY && i < j.tok[0].size; i++) {
			int o = pisb_json_at(&j, 0, i);
			_cleanup_free_ char *name = pisb_json_str(&j, pisb_json_get(&j, o, "name"));
			long long port = 0, host = 0;
			if (pisb_json_int(&j, pisb_json_get(&j, o, "port"), &port) < 0 || port <= 0)
				continue;
			pisb_jw_obj(w);
			pisb_jw_kstr(w, "service", name);
			pisb_jw_kint(w, "port", port);
			pisb_jw_key(w, "hostPort");
			if (pisb_json_int(&j, pisb_json_get(&j, o, "hostPort"), &host) == 0 && host > 0)
				pisb_jw_int(w, host);
			else
				pisb_jw_null(w);
			pisb_jw_obj_end(w);
		}
		pisb_json_release(&j);
	}
	pisb_jw_arr_end(w);
}

static void raw_or(struct pisb_jw *w, const char *key, const char *raw, const char *dflt)
{
	pisb_jw_key(w, key);
	if (raw)
		pisb_jw_raw(w, raw, strlen(raw));
	else
		pisb_jw_raw(w, dflt, strlen(dflt));
}

/* A sandbox whose driver keeps its state in status.json (opensandbox,
 * sbx): the state word, and "creating" told apart from a create that died
 * by op.lock, which create holds until the sandbox is ready. */
enum pisb_status pisb_recorded_status(int idir, const struct pisb_runtime *rt)
{
	if (!strcmp(rt->state, "running"))
		return PISB_ST_RUNNING;
	if (!strcmp(rt->state, "paused"))
		return PISB_ST_PAUSED;
	if (!strcmp(rt->state, "gone"))
		return PISB_ST_GONE;
	if (!strcmp(rt->state, "creating"))
		return pisb_lock_is_held(idir, "op.lock") ? PISB_ST_STARTING : PISB_ST_INTERRUPTED;
	return PISB_ST_STOPPED;
}

static int one(struct pisb_state *st, const char *kind, const char *name, bool full,
	       bool brief, struct pisb_jw *w, struct pisb_err *e)
{
	_cleanup_sandbox_ struct pisb_sandbox sb = PISB_SANDBOX_INIT;
	const struct pisb_runtime *rt;
	const struct pisb_config *cfg;
	bool tmpl = !strcmp(kind, "templates");
	enum pisb_status s;
	char ts[32];
	bool running;

	if (pisb_sandbox_open_kind(&sb, st, kind, name, e) < 0)
		return -1;
	if (!pisb_sandbox_record(&sb, e))
		return pisb_err_prefix(e, "sandbox '%s'", name);
	if (full && !tmpl && sb.drv->refresh) {
		/* ask the backend; unreachable leaves the last known status */
		struct pisb_err ig = PISB_ERR_INIT;
		sb.drv->refresh(&sb, 3000, &ig);
	}
	if (!(rt = pisb_sandbox_runtime(&sb, e)) || !(cfg = pisb_sandbox_config(&sb, e)))
		return -1;
	s = tmpl ? PISB_ST_STOPPED : sb.drv->status(&sb);
	running = s == PISB_ST_RUNNING || s == PISB_ST_STARTING || s == PISB_ST_UNAVAILABLE;
	pisb_jw_obj(w);
	pisb_jw_kstr(w, "name", sb.rec.name);
	pisb_jw_kstr(w, "driver", sb.rec.driver);
	pisb_jw_kstr(w, "status", tmpl ? "template" : pisb_status_name(s));
	sb.drv->describe(&sb, cfg, w);
	pisb_time_rfc3339(sb.rec.created_at, ts);
	pisb_jw_kstr(w, "createdAt", ts);
	if (!brief) {
		pisb_jw_kstr(w, "template", sb.rec.template_);
		pisb_jw_key(w, "ownerPid");
		if (sb.rec.owner.pid > 0)
			pisb_jw_int(w, sb.rec.owner.pid);
		else
			pisb_jw_null(w);
		pisb_jw_kbool(w, "ownerAlive", sb.rec.owner.pid > 0 && pisb_proc_id_alive(&sb.rec.owner));
		pisb_jw_kstr(w, "sessionId", sb.rec.session_id);
		sb.drv->limits(&sb, cfg, running, w);
		raw_or(w, "services", running ? rt->services_json : NULL, "[]");
		ports(w, running ? rt->services_json : NULL);
		raw_or(w, "previews", running ? rt->previews_json : NULL, "[]");
		pisb_jw_key(w, "resumePid");
		if (running && pisb_proc_id_alive(&rt->resume))
			pisb_jw_int(w, rt->resume.pid);
		else
			pisb_jw_null(w);
		/* a remote sandbox has no local controller */
		if (sb.drv->caps & PISB_DRV_REMOTE)
			running = false;
		pisb_jw_key(w, "controller");
		pisb_jw_obj(w);
		pisb_jw_key(w, "pid");
		if (running && rt->controller.pid > 0)
			pisb_jw_int(w, rt->controller.pid);
		else
			pisb_jw_null(w);
		pisb_jw_kbool(w, "alive", running);
		pisb_jw_key(w, "initPid");
		if (running && rt->init.pid > 0)
			pisb_jw_int(w, rt->init.pid);
		else
			pisb_jw_null(w);
		pisb_jw_kstr(w, "generation", running ? rt->generation : NULL);
		pisb_jw_obj_end(w);
		if (rt->started_at) {
			pisb_time_rfc3339(rt->started_at, ts);
			pisb_jw_kstr(w, "startedAt", ts);
		}
		if (rt->stopped_at) {
			pisb_time_rfc3339(rt->stopped_at, ts);
			pisb_jw_kstr(w, "stoppedAt", ts);
		}
		pisb_jw_kstr(w, "setupError", rt->setup_error);
		if (rt->extra_json)
			raw_or(w, sb.drv->extra_key ? sb.drv->extra_key : "remote", rt->extra_json, "null");
		if (full) {
			pisb_jw_key(w, "config");
			if (sb.drv->config_out)
				sb.drv->config_out(&sb, w);
			else
				pisb_jw_raw(w, sb.rec.config_json, strlen(sb.rec.config_json));
		}
	}
	pisb_jw_obj_end(w);
	return 0;
}

int pisb_inspect(struct pisb_state *st, const char *name, bool full,
		 struct pisb_jw *w, struct pisb_err *e)
{
	return one(st, "instances", name, full, false, w, e);
}

static int cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int pisb_list(struct pisb_state *st, bool templates, int refresh_ms, struct pisb_jw *w,
	      struct pisb_err *e)
{
	const char *kind = templates ? "templates" : "instances";
	_cleanup_strv_ struct pisb_strv names = PISB_STRV_INIT;
	int fd = openat(st->fd, kind, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d;
	struct dirent *de;

	for (size_t i = 0; !templates && refresh_ms > 0 && pisb_drivers[i]; i++)
		if (pisb_drivers[i]->refresh_all)
			pisb_drivers[i]->refresh_all(st, refresh_ms);
	pisb_jw_arr(w);
	if (fd >= 0 && (d = fdopendir(fd))) {
		while ((de = readdir(d)))
			if (pisb_name_valid(de->d_name))
				pisb_strv_push(&names, de->d_name);
		closedir(d);
	} else if (fd >= 0) {
		close(fd);
	}
	if (names.n)
		qsort(names.v, names.n, sizeof(char *), cmp);
	/* every running controller's ping first (instance.h) */
	for (size_t i = 0; !templates && names.n > 1 && i < names.n; i++) {
		struct pisb_err ig = PISB_ERR_INIT;
		int idir = pisb_instance_open(st, kind, names.v[i], &ig);
		if (idir >= 0) {
			pisb_ping_ahead(idir);
			close(idir);
		}
	}
	for (size_t i = 0; i < names.n; i++) {
		struct pisb_err ie = PISB_ERR_INIT;
		/* a half-deleted or foreign entry must not hide the others */
		if (one(st, kind, names.v[i], false, true, w, &ie) < 0 && ie.code != PISB_EXIT_NOTFOUND) {
			pisb_jw_obj(w);
			pisb_jw_kstr(w, "name", names.v[i]);
			pisb_jw_kstr(w, "status", "broken");
			pisb_jw_kstr(w, "error", ie.msg);
			pisb_jw_obj_end(w);
		}
	}
	pisb_ping_ahead_end();
	pisb_jw_arr_end(w);
	(void)e;
	return 0;
}

const char *pisb_status_of(struct pisb_state *st, const char *name)
{
	struct pisb_err e = PISB_ERR_INIT;
	_cleanup_close_ int idir = pisb_instance_open(st, "instances", name, &e);
	struct pisb_runtime rt;
	enum pisb_status s;

	if (idir < 0)
		return "missing";
	if (pisb_runtime_load(idir, &rt, &e) < 0)
		return "unknown";
	s = pisb_instance_status(idir, &rt);
	pisb_runtime_release(&rt);
	return pisb_status_name(s);
}

int pisb_json_table(const char *json, size_t len, bool quiet, const struct pisb_table_col *cols,
		    struct pisb_buf *out, struct pisb_err *e)
{
	struct pisb_json j;
	int n;

	if (pisb_json_parse(&j, json, len, e) < 0)
		return -1;
	n = j.tok[0].size;
	for (int c = 0; !quiet && n && cols[c].key; c++) {
		bool last = !cols[c + 1].key;
		pisb_buf_addf(out, "%-*s", last ? 0 : cols[c].width, cols[c].header);
		pisb_buf_adds(out, last ? "\n" : " ");
	}
	for (int i = 0; i < n; i++) {
		int o = pisb_json_at(&j, 0, i);
		for (int c = 0; cols[c].key && (c == 0 || !quiet); c++) {
			int t = pisb_json_get(&j, o, cols[c].key);
			_cleanup_free_ char *v = pisb_json_str(&j, t);
			size_t rl = 0;
			const char *raw = !v && t >= 0 && pisb_json_is_num(&j, t) ? pisb_json_raw(&j, t, &rl) : NULL;
			bool last = quiet || !cols[c + 1].key;
			int w = last ? 0 : cols[c].width;
			if (raw)
				pisb_buf_addf(out, "%-*.*s", w, (int)rl, raw);
			else
				pisb_buf_addf(out, "%-*s", w, v ? v : cols[c].none);
			pisb_buf_adds(out, last ? "\n" : " ");
		}
	}
	pisb_json_release(&j);
	return 0;
}

int pisb_list_table(const char *json, size_t len, bool quiet, struct pisb_buf *out,
		    struct pisb_err *e)
{
	static const struct pisb_table_col cols[] = {
		{ "name", "NAME", 24, "" }, { "driver", "DRIVER", 12, "-" },
		{ "status", "STATUS", 12, "-" }, { "image", "IMAGE", 0, "-" }, { NULL, NULL, 0, NULL },
	};
	return pisb_json_table(json, len, quiet, cols, out, e);
}

void pisb_inspect_unready(struct pisb_state *st, const char *name, struct pisb_strv *msgs)
{
	_cleanup_buf_ struct pisb_buf b = PISB_BUF_INIT;
	struct pisb_err ig = PISB_ERR_INIT;
	struct pisb_jw w;
	struct pisb_json j;
	int svcs;

	pisb_jw_init(&w, &b);
	if (pisb_inspect(st, name, false, &w, &ig) < 0 || pisb_json_parse(&j, b.s, b.len, &ig) < 0)
		return;
	svcs = pisb_json_get(&j, 0, "services");
	for (int i = 0; svcs >= 0 && i < j.tok[svcs].size; i++) {
		int o = pisb_json_at(&j, svcs, i);
		bool ready = true;
		_cleanup_free_ char *sn = pisb_json_str(&j, pisb_json_get(&j, o, "name"));
		_cleanup_free_ char *why = pisb_json_str(&j, pisb_json_get(&j, o, "error"));
		pisb_json_bool(&j, pisb_json_get(&j, o, "ready"), &ready);
		if (!ready)
			pisb_strv_pushf(msgs, "sandbox '%s': service '%s' is not ready%s%s (see 'pisb svc %s status', 'pisb logs %s %s')",
					name, sn ? sn : "?", why ? ": " : "", why ? why : "", name, name,
					sn ? sn : "");
	}
	pisb_json_release(&j);
}

int pisb_lifecycle_result(struct pisb_state *st, const char *name, const char *gone,
			  struct pisb_jw *w, struct pisb_err *e)
{
	char path[128];

	snprintf(path, sizeof(path), "instances/%s", name);
	if (!gone || faccessat(st->fd, path, F_OK, AT_SYMLINK_NOFOLLOW) == 0)
		return pisb_inspect(st, name, false, w, e);
	pisb_jw_obj(w);
	pisb_jw_kstr(w, "name", name);
	pisb_jw_kstr(w, "status", gone);
	pisb_jw_obj_end(w);
	return 0;
}

