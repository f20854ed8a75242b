/* lifecycle.c - the lifecycle verbs through the driver tables; see
 * lifecycle.h. */
#include "lifecycle.h"
#include "config.h"
#include "driver.h"
#include "err.h"
#include "events.h"

#include <stddef.h>
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
	fn = verb == PISB_LC_CREATE ? d->create : verb == PISB_LC_PREPARE ? d->prepare : d->connect;
	if (!fn)
		return pisb_driver_refuse_name(o->name, d, ids[verb], e);
	if (o->template_ && !(d->caps & PISB_DRV_TEMPLATES)) {
		const char *why = pisb_driver_why(d, PISB_V_PREPARE);
		return pisb_err_set(e, PISB_EXIT_USAGE, "--template: driver %s has no pisb templates%s%s",
				    d->name, why ? ": " : "", why ? why : "");
	}
	if (fn(st, cfg, config_json, o, e) < 0)
		return -1;
	if (verb == PISB_LC_CREATE && d->start_note) {
		_cleanup_sandbox_ struct pisb_sandbox sb = PISB_SANDBOX_INIT;
		struct pisb_err ig = PISB_ERR_INIT;
		if (pisb_sandbox_open(&sb, st, o->name, &ig) == 0)
			o->note = d->start_note(&sb);
	}
	return 0;
}

int pisb_lifecycle(struct pisb_state *st, enum pisb_lc_verb verb, const char *name,
		   const struct pisb_lc_opts *o, char **note, struct pisb_err *e)
{
	_cleanup_sandbox_ struct pisb_sandbox sb = PISB_SANDBOX_INIT;

	if (note)
		*note = NULL;
	if (pisb_sandbox_open(&sb, st, name, e) < 0)
		return -1;
	switch (verb) {
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
		return sb.drv->release(&sb, o, e);
	}
	return -1;
}
