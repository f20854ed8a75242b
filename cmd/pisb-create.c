/* pisb-create - lifecycle of every driver; see man/pisb-create.1 */
#include "front.h"

static const struct pisb_handler handlers[] = {
	{ NULL, NULL, false },
};

int main(int argc, char **argv)
{
	return pisb_front_main("pisb-create", handlers, argc, argv);
}
