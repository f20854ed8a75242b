#include "lifecycle.h"
#include "err.h"
#include "events.h"
#include "local.h"
#include "opensandbox.h"
#include "sbx.h"
#include "vm.h"

#include <stddef.h>

static int released(const struct pisb_os_opts *o, const char *name, const char *mode,
		    struct pisb_err *e)
{
	struct pisb_event ev = { "released", name, "local", NULL, NULL, true, false, mode };

	return o->events_fd >= 0 ? pisb_event_write(o->events_fd, &ev, e) : 0;
}

static int lifecycle(struct pisb_state *st, int d, enum pisb_lc_verb verb, const char *name,
		     const struct pisb_os_opts *o, struct pisb_err *e);

int pisb_lifecycle(struct pisb_state *st, enum pisb_lc_verb verb, const char *name,
		   const struct pisb_os_opts *o, struct pisb_err *e)
{
	int d = pisb_instance_driver(st, name, e);

	if (d < 0 || lifecycle(st, d, verb, name, o, e) < 0)
		return -1;
	/* start --events-fd: "ready" once it runs (the opensandbox driver
	 * writes its own, with the sandbox id and whether it resumed) */
	if (verb == PISB_LC_START && d != PISB_DRIVER_OPENSANDBOX && o->events_fd >= 0) {
		static const char *const dn[] = { [PISB_DRIVER_LOCAL] = "local", [PISB_DRIVER_VM] = "vm",
						  [PISB_DRIVER_SBX] = "sbx" };
		struct pisb_event ev = { "ready", name, dn[d], NULL, NULL, false, false, NULL };
		return pisb_event_write(o->events_fd, &ev, e);
	}
	return 0;
}

static int lifecycle(struct pisb_state *st, int d, enum pisb_lc_verb verb, const char *name,
		     const struct pisb_os_opts *o, struct pisb_err *e)
{
	if (d == PISB_DRIVER_VM) {
		switch (verb) {
		case PISB_LC_START: return pisb_vm_start(st, name, o, e);
		case PISB_LC_STOP: return pisb_vm_stop(st, name, o, e);
		case PISB_LC_DESTROY: return pisb_vm_destroy(st, name, o, e);
		}
		return -1;
	}
	if (d == PISB_DRIVER_SBX) {
		switch (verb) {
		case PISB_LC_START: return pisb_sbx_start(st, name, o, e);
		case PISB_LC_STOP: return pisb_sbx_stop(st, name, o, e);
		case PISB_LC_DESTROY: return pisb_sbx_destroy(st, name, o, e);
		}
		return -1;
	}
	if (d == PISB_DRIVER_OPENSANDBOX) {
		switch (verb) {
		case PISB_LC_START: return pisb_os_start(st, name, o, e);
		case PISB_LC_STOP: return pisb_os_stop(st, name, o, e);
		case PISB_LC_DESTROY: return pisb_os_destroy(st, name, o, e);
		}
		return -1;
	}
	switch (verb) {
	case PISB_LC_START:
		return pisb_local_start(st, name, o->wait_ms, e);
	case PISB_LC_STOP:
		if (pisb_local_stop(st, name, o->wait_ms, e) < 0)
			return -1;
		return released(o, name, "stop", e);
	case PISB_LC_DESTROY:
		if (pisb_local_destroy(st, "instances", name, o->wait_ms, e) < 0)
			return -1;
		return released(o, name, "remove", e);
	}
	return -1;
}
