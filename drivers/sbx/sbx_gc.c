/* sbx_gc.c - pisb gc's sweep of the sbx CLI's own leftovers: `pi-sbx-*`
 * session sandboxes (pi-sbx-<owner pid>-<n>) that are stopped, whose owner
 * is gone and that no pisb sandbox is, removed with `sbx rm --force`.
 * Nothing when the sbx CLI is not on PATH (the report's note says so). */
#include "err.h"
#include "gc.h"
#include "json.h"
#include "sbx.h"
#include "sbx_internal.h"
#include "util.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* pi-sbx-<pid>-<n>: the pid of the session that created it, or 0. */
static pid_t owner_of(const char *name)
{
	const char *p = name + strlen("pi-sbx-");
	const char *d = strchr(p, '-');
	char buf[16];
	long long v;

	if (!d || d == p || d - p >= (long)sizeof(buf))
		return 0;
	snprintf(buf, sizeof(buf), "%.*s", (int)(d - p), p);
	return pisb_parse_ll(buf, 1, 1LL << 31, &v) == 0 ? (pid_t)v : 0;
}

void pisb_sbx_gc_leftovers(struct pisb_state *st, const struct pisb_strv *known, bool dry_run,
			   struct pisb_gc_report *r)
{
	char bin[4096], why[512];
	_cleanup_buf_ struct pisb_buf out = PISB_BUF_INIT;
	/* the scrubbed environment: no DOCKER_*, COMPOSE_* */
	_cleanup_strv_ struct pisb_strv env = PISB_STRV_INIT;
	struct pisb_err e = PISB_ERR_INIT;
	struct pisb_json j;
	int arr;

	(void)st;   /* the sbx CLI's sandboxes are the host's, not a state dir's */
	if (sbx_find(bin, sizeof(bin), &e) < 0) {
		r->note = xstrdup("sbx CLI not found on PATH: pi-sbx-* sweep skipped");
		return;
	}
	sbx_env(NULL, &env);
	{
		char *argv[] = { "sbx", "ls", "--json", NULL };
		if (sbx_call(bin, argv, env.v, SBX_LS_TIMEOUT_MS, &out, -1, &e) < 0) {
			pisb_gc_report_add(&r->failed, "sbx", "sbx ls --json", e.msg);
			return;
		}
	}
	if (!out.len || pisb_json_parse(&j, out.s, out.len, &e) < 0) {
		pisb_gc_report_add(&r->failed, "sbx", "sbx ls --json", "unreadable output");
		return;
	}
	/* {"sandboxes":[…]} (current) or a bare array (older CLIs) */
	arr = j.tok[0].type == JSMN_ARRAY ? 0 : pisb_json_get(&j, 0, "sandboxes");
	for (int i = 0; arr >= 0 && i < j.tok[arr].size; i++) {
		int o = pisb_json_at(&j, arr, i);
		_cleanup_free_ char *name = pisb_json_str(&j, pisb_json_get(&j, o, "name"));
		_cleanup_free_ char *status = pisb_json_str(&j, pisb_json_get(&j, o, "status"));
		pid_t owner;

		if (!name || !pisb_str_starts(name, "pi-sbx-"))
			continue; /* not one of ours */
		if (!status || strcasecmp(status, "stopped")) {
			snprintf(why, sizeof(why), "status '%s'", status ? status : "unknown");
			pisb_gc_report_add(&r->kept, "sbx", name, why);
			continue;
		}
		if (pisb_strv_has(known, name)) {
			pisb_gc_report_add(&r->kept, "sbx", name, "a pisb sandbox is this one: 'pisb destroy' removes it");
			continue;
		}
		owner = owner_of(name);
		if (!owner) {
			pisb_gc_report_add(&r->kept, "sbx", name, "not a session sandbox (no owner pid in its name)");
			continue;
		}
		if (kill(owner, 0) == 0 || errno == EPERM) {
			snprintf(why, sizeof(why), "owner pid %d is alive", (int)owner);
			pisb_gc_report_add(&r->kept, "sbx", name, why);
			continue;
		}
		if (!dry_run) {
			char *argv[] = { "sbx", "rm", "--force", name, NULL };
			if (sbx_call(bin, argv, env.v, SBX_LC_TIMEOUT_MS, NULL, -1, &e) < 0) {
				pisb_gc_report_add(&r->failed, "sbx", name, e.msg);
				e = (struct pisb_err)PISB_ERR_INIT;
				continue;
			}
		}
		snprintf(why, sizeof(why), "stopped, and its owner pid %d is gone", (int)owner);
		pisb_gc_report_add(&r->removed, "sbx", name, why);
	}
	pisb_json_release(&j);
}
