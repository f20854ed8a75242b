/* pisb-docker - docker inside a sandbox's own daemon; see man/pisb-docker.1
 *
 * Only a sandbox of the sbx driver (a microVM with a private dockerd) has a
 * daemon of its own, and that driver is not in this build.  So every verb
 * refuses, naming the driver, after checking the sandbox exists.  This
 * binary never runs docker and never looks at DOCKER_HOST or the host's
 * docker socket: docker for a sandbox must never reach the host's daemon.
 */
#include "front.h"
#include "../common/instance.h"

#include <string.h>

static const char *const verbs[] = {
	"status", "verify", "resources", "prune", "ps", "images", "pull", "load",
	"run", "logs", "exec", "build", "init", "compose", "stop", "start", "rm",
	"curl", NULL,
};

static int cmd_docker(struct pisb_ctx *c)
{
	const char *name = c->a.pos[0], *verb = c->a.pos[1];
	_cleanup_close_ int idir = -1;
	struct pisb_record rec;
	int i;

	for (i = 0; verbs[i] && strcmp(verbs[i], verb); i++)
		;
	if (!verbs[i])
		return pisb_err_set(&c->err, PISB_EXIT_USAGE,
				    "docker: unknown verb '%s' (status, verify, resources, prune, ps, images, pull, load, run, logs, exec, build, init, compose, stop, start, rm, curl)",
				    verb);
	idir = pisb_instance_open(&c->st, "instances", name, &c->err);
	if (idir < 0)
		return -1;
	if (pisb_record_load(idir, &rec, &c->err) < 0)
		return pisb_err_prefix(&c->err, "sandbox '%s'", name);
	if (!strcmp(rec.driver, "sbx"))
		pisb_err_set(&c->err, PISB_EXIT_FAIL,
			     "sandbox '%s' uses driver sbx, which this build does not provide yet; pisb docker will not fall back to the host's docker daemon",
			     name);
	else
		pisb_err_set(&c->err, PISB_EXIT_FAIL,
			     "sandbox '%s' (driver %s) has no docker daemon of its own; pisb docker needs a sbx sandbox (driver: sbx), which this build does not provide yet",
			     name, rec.driver);
	pisb_record_release(&rec);
	return -1;
}

static const struct pisb_handler handlers[] = {
	{ "docker", cmd_docker, true },
	{ NULL, NULL, false },
};

int main(int argc, char **argv)
{
	return pisb_front_main("pisb-docker", handlers, argc, argv);
}
