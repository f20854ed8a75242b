/* pisb-renew - renew the TTLs of remote sandboxes that are due; see
 * man/pisb-renew.1.  One pass (for cron), or --watch: a pass every
 * --interval seconds until SIGINT/SIGTERM, or NAME: that one, now. */
#include "front.h"
#include "driver.h"
#include "json.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static volatile sig_atomic_t stop;
static void on_stop(int sig) { (void)sig; stop = 1; }

/* Diagnostics on stderr (also with --json): one line per failure; the
 * skips with -v; the counts unless -q or --json. */
static void summary(struct pisb_ctx *c, struct pisb_buf *b)
{
	struct pisb_json j;
	struct pisb_err ig = PISB_ERR_INIT;
	int rn, fl, sk;

	if (pisb_json_parse(&j, b->s, b->len, &ig) < 0)
		return;
	rn = pisb_json_get(&j, 0, "renewed");
	fl = pisb_json_get(&j, 0, "failed");
	sk = pisb_json_get(&j, 0, "skipped");
	for (int i = 0; i < j.tok[fl].size; i++) {
		int o = pisb_json_at(&j, fl, i);
		_cleanup_free_ char *n = pisb_json_str(&j, pisb_json_get(&j, o, "name"));
		_cleanup_free_ char *m = pisb_json_str(&j, pisb_json_get(&j, o, "error"));
		fprintf(stderr, "renew '%s' failed: %s\n", n ? n : "?", m ? m : "?");
	}
	if (c->a.verbose)
		for (int i = 0; i < j.tok[sk].size; i++) {
			int o = pisb_json_at(&j, sk, i);
			_cleanup_free_ char *n = pisb_json_str(&j, pisb_json_get(&j, o, "name"));
			_cleanup_free_ char *m = pisb_json_str(&j, pisb_json_get(&j, o, "reason"));
			fprintf(stderr, "skipped '%s': %s\n", n ? n : "?", m ? m : "?");
		}
	if (!c->a.json)
		pisb_front_info(c, "renewed %d, failed %d, skipped %d", j.tok[rn].size, j.tok[fl].size,
				j.tok[sk].size);
	pisb_json_release(&j);
}

static int pass(struct pisb_ctx *c)
{
	_cleanup_buf_ struct pisb_buf b = PISB_BUF_INIT;
	struct pisb_jw w;
	int failed;

	struct pisb_renew_opts o = { 0 };

	if (c->a.npos) {
		o.names = (char *const *)c->a.pos;
		o.nnames = c->a.npos;
	}
	pisb_jw_init(&w, &b);
	failed = pisb_drivers_renew(&c->st, &o, &w, &c->err);
	if (failed < 0)
		return -1;
	if (c->a.json)
		pisb_front_out(&b);
	summary(c, &b);
	fflush(stdout);
	return failed;
}

static int cmd_renew(struct pisb_ctx *c)
{
	long long interval = 30;
	int failed;

	if (pisb_args_int(&c->a, "interval", 1, 86400, 30, &interval, &c->err) < 0)
		return -1;
	if (pisb_args_has(&c->a, "interval") && !pisb_args_has(&c->a, "watch"))
		return pisb_err_set(&c->err, PISB_EXIT_USAGE, "--interval needs --watch");
	if (c->a.npos && pisb_args_has(&c->a, "watch"))
		return pisb_err_set(&c->err, PISB_EXIT_USAGE, "renew NAME renews it once: no --watch");
	/* -v is renew's own progress, -vv adds the HTTP exchanges */
	pisb_set_verbose(c->a.verbose > 1 ? c->a.verbose - 1 : 0);
	if (!pisb_args_has(&c->a, "watch")) {
		failed = pass(c);
		if (failed < 0)
			return -1;
		return failed ? PISB_EXIT_BACKEND : 0;
	}
	{
		struct sigaction sa;
		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = on_stop;
		sigaction(SIGINT, &sa, NULL);
		sigaction(SIGTERM, &sa, NULL);
		sigaction(SIGHUP, &sa, NULL);
	}
	while (!stop) {
		struct timespec ts = { (time_t)interval, 0 };
		/* a failed pass is retried at the next one; only a broken
		 * state directory ends the loop */
		if (pass(c) < 0)
			return -1;
		while (!stop && nanosleep(&ts, &ts) < 0 && errno == EINTR)
			;
	}
	return 0;
}

static const struct pisb_handler handlers[] = {
	{ "renew", cmd_renew, true },
	{ NULL, NULL, false },
};

int main(int argc, char **argv)
{
	return pisb_front_main("pisb-renew", handlers, argc, argv);
}
