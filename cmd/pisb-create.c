/* pisb-create - lifecycle of every driver: destroy and release here;
 * create, prepare, connect, start and stop in create_lc.c (which the
 * static pisb serves too); the others in create_info.c; see
 * man/pisb-create.1 */
#include "create_cmd.h"
#include "config.h"
#include "inspect.h"
#include "driver.h"
#include "lifecycle.h"
#include "json.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int cmd_destroy(struct pisb_ctx *c)
{
	const char *name = c->a.pos[0], *confirm = pisb_args_get(&c->a, "confirm");
	bool tmpl = pisb_args_has(&c->a, "template");
	struct pisb_lc_opts oo;

	if (create_lc_opts(c, name, &oo) < 0)
		return -1;
	if (!confirm || strcmp(confirm, name))
		return pisb_err_set(&c->err, PISB_EXIT_USAGE,
				    "destroy removes '%s' for good: repeat its name with --confirm %s", name, name);
	if (pisb_lifecycle(&c->st, tmpl ? PISB_LC_DESTROY_TEMPLATE : PISB_LC_DESTROY, name, &oo, NULL, &c->err) < 0)
		return -1;
	if (c->a.json) {
		_cleanup_buf_ struct pisb_buf b = PISB_BUF_INIT;
		pisb_buf_addf(&b, "{\"name\":\"%s\",\"destroyed\":true}", name);
		pisb_front_out(&b);
	} else {
		pisb_front_info(c, "destroyed %s '%s'", tmpl ? "template" : "sandbox", name);
	}
	return 0;
}

/* the session's end: the sandbox's own policy, or --policy */
static int cmd_release(struct pisb_ctx *c)
{
	const char *name = c->a.pos[0];
	struct pisb_lc_opts o;
	_cleanup_free_ char *p = xasprintf("instances/%s", name);

	if (create_lc_opts(c, name, &o) < 0)
		return -1;
	o.policy = pisb_args_get(&c->a, "policy");
	if (pisb_lifecycle(&c->st, PISB_LC_RELEASE, name, &o, NULL, &c->err) < 0)
		return -1;
	if (c->a.json)
		return create_print_result(c, name, "removed");
	pisb_front_info(c, "released sandbox '%s'%s", name,
			faccessat(c->st.fd, p, F_OK, AT_SYMLINK_NOFOLLOW) < 0 ? " (removed)" : "");
	return 0;
}

static const struct pisb_handler handlers[] = {
	{ "validate", create_cmd_validate, false },
	{ "create", create_cmd_make, true },
	{ "prepare", create_cmd_make, true },
	{ "start", create_cmd_start_stop, true },
	{ "stop", create_cmd_start_stop, true },
	{ "destroy", cmd_destroy, true },
	{ "release", cmd_release, true },
	{ "list", create_cmd_list, true },
	{ "inspect", create_cmd_inspect, true },
	{ "connect", create_cmd_make, true },
	{ "verify", create_cmd_verify, true },
	{ "doctor", create_cmd_doctor, false },
	{ "drivers", create_cmd_drivers, false },
	{ "pool", create_cmd_pool, true },
	{ NULL, NULL, false },
};

int main(int argc, char **argv)
{
	return pisb_front_main("pisb-create", handlers, argc, argv);
}
