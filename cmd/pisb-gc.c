/* pisb-gc - sweep dead-owner sandboxes, interrupted controllers, stale
 * sandboxes, orphaned handles, caches and leftovers; see man/pisb-gc.1 */
#include "front.h"
#include "gc.h"
#include "json.h"

#include <stdio.h>

/* "removed sandbox 'x': why", or with --dry-run "would remove …" */
static void print_list(const struct pisb_gc_list *l, const char *done,
		       const char *would, bool dry)
{
	for (size_t i = 0; i < l->n; i++)
		printf("%s %s '%s': %s\n", dry ? would : done,
		       l->v[i].kind, l->v[i].name, l->v[i].reason);
}

static int cmd_gc(struct pisb_ctx *c)
{
	struct pisb_gc_opts o = { -1, false };
	struct pisb_gc_report r;
	long long hours;
	int ret;

	if (pisb_args_int(&c->a, "hours", 0, 1000000, -1, &hours, &c->err) < 0)
		return -1;
	o.hours = (int)hours;
	o.dry_run = pisb_args_has(&c->a, "dry-run");
	/* -v is gc's own report of what it kept, -vv adds the HTTP exchanges */
	pisb_set_verbose(c->a.verbose > 1 ? c->a.verbose - 1 : 0);
	if (pisb_gc_run(&c->st, &o, &r, &c->err) < 0)
		return -1;
	ret = r.failed.n ? PISB_EXIT_FAIL : 0;
	if (c->a.json) {
		_cleanup_buf_ struct pisb_buf b = PISB_BUF_INIT;
		struct pisb_jw w;
		pisb_jw_init(&w, &b);
		pisb_gc_report_json(&r, &w);
		pisb_front_out(&b);
	} else if (!c->a.quiet) {
		print_list(&r.removed, "removed", "would remove", o.dry_run);
		print_list(&r.cleaned, "cleaned", "would clean", o.dry_run);
		fflush(stdout);
	}
	if (r.busy)
		pisb_front_info(c, "another pisb gc is running (locks/gc.lock is held): nothing done");
	for (size_t i = 0; i < r.failed.n; i++)
		pisb_front_warn("could not clean %s '%s': %s", r.failed.v[i].kind,
				r.failed.v[i].name, r.failed.v[i].reason);
	if (c->a.verbose && !c->a.quiet) {
		for (size_t i = 0; i < r.kept.n; i++)
			fprintf(stderr, "kept %s '%s': %s\n", r.kept.v[i].kind,
				r.kept.v[i].name, r.kept.v[i].reason);
		if (r.note)
			fprintf(stderr, "%s\n", r.note);
	}
	pisb_gc_report_release(&r);
	return ret;
}

static const struct pisb_handler handlers[] = {
	{ "gc", cmd_gc, true },
	{ NULL, NULL, false },
};

int main(int argc, char **argv)
{
	return pisb_front_main("pisb-gc", handlers, argc, argv);
}
