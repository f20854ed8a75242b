/* lifecycle.h - start, stop and destroy, whatever the sandbox's driver.
 * Local sandboxes also report a "released" event on o->events_fd once a
 * stop (mode "stop") or destroy (mode "remove") has happened; the remote
 * driver emits its own. */
#ifndef PISB_LIFECYCLE_H
#define PISB_LIFECYCLE_H

struct pisb_err;
struct pisb_state;
struct pisb_os_opts;

enum pisb_lc_verb { PISB_LC_START, PISB_LC_STOP, PISB_LC_DESTROY };

int pisb_lifecycle(struct pisb_state *st, enum pisb_lc_verb verb, const char *name,
		   const struct pisb_os_opts *o, struct pisb_err *e);

#endif
