/* pisb-gc - see man/pisb-gc.1 */
#include "front.h"

static int not_yet(struct pisb_ctx *c)
{
	return pisb_err_set(&c->err, PISB_EXIT_FAIL, "%s: not implemented yet", c->a.verb->name);
}

static const struct pisb_handler handlers[] = {
	{ NULL, NULL, false },
};

int main(int argc, char **argv)
{
	(void)not_yet;
	return pisb_front_main("pisb-gc", handlers, argc, argv);
}
