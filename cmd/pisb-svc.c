/* pisb-svc - services, previews, and the controller; see man/pisb-svc.1 */
#include "front.h"
#include "../common/local.h"

static int cmd_supervise(struct pisb_ctx *c)
{
	return pisb_controller_run(&c->st, c->a.pos[0], &c->err) < 0 ? -1 : 0;
}

static int cmd_svc(struct pisb_ctx *c)
{
	return pisb_err_set(&c->err, PISB_EXIT_FAIL, "svc: not implemented yet");
}

static const struct pisb_handler handlers[] = {
	{ "supervise", cmd_supervise, true },
	{ "svc", cmd_svc, true },
	{ NULL, NULL, false },
};

int main(int argc, char **argv)
{
	return pisb_front_main("pisb-svc", handlers, argc, argv);
}
