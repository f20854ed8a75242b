/* events.h - lifecycle events as JSON lines (ready, released) for the Pi
 * extension: {"event":"ready","name","driver","sandboxId","workspace",
 * "createdByExtension","resumed"}. */
#ifndef PISB_EVENTS_H
#define PISB_EVENTS_H

#include <stdbool.h>

struct pisb_err;

struct pisb_event {
	const char *event;        /* "ready" | "released" */
	const char *name, *driver, *sandbox_id, *workspace;
	bool created;             /* createdByExtension: pisb created it */
	bool resumed;
	const char *mode;         /* released: kill|pause|keep|stop|remove */
};

/* Write one event line to fd (>= 0).  Returns 0, -1 on write error. */
int pisb_event_write(int fd, const struct pisb_event *ev, struct pisb_err *e);
/* Run sh -c cmd on the host with PISB_EVENT set to the event JSON;
 * non-zero exit is an error naming the command. */
int pisb_event_hook(const char *cmd, const struct pisb_event *ev, struct pisb_err *e);

#endif
