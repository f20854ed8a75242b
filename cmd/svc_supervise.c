/* svc_supervise.c - the process that stays with a running sandbox (the
 * local driver's controller): pisb-svc supervise, and the static
 * dispatcher's own (cmd/pisb_serve.c).  A create or start that the static
 * pisb runs forks its controller instead, for a sandbox of the host image
 * (drivers/local/local.c: no exec, issue #21); what it runs is this. */
#include "svc_cmd.h"
#include "driver.h"

int svc_cmd_supervise(struct pisb_ctx *c)
{
	long long notify;

	if (pisb_args_int(&c->a, "notify-fd", 3, 1 << 20, -1, &notify, &c->err) < 0)
		return -1;
	return pisb_driver_supervise(&c->st, pisb_args_get(&c->a, "driver"), c->a.pos[0], (int)notify,
				     pisb_args_has(&c->a, "own-namespaces"), &c->err) < 0 ? -1 : 0;
}
