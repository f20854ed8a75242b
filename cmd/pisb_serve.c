/* pisb_serve.c - the verbs the dispatcher runs in its own process.
 *
 * `pisb list` and `pisb exec NAME -- CMD` are what an agent and its user
 * run most (and create, start and stop what a session's lifecycle runs).  Through a second exec (and the dynamic loader of pisb-create
 * or pisb-exec) `pisb list` took twice the time of /bin/true and each exec
 * round trip ~1 ms more than nsenter (issue #21).  So pisb links their
 * handlers (the same functions, option table and binary name in messages
 * as pisb-create and pisb-exec: output, errors and exit codes are the
 * same) and runs them itself; every other verb still goes to its binary.
 *
 * pisb is linked static: no dynamic loader is the other half of the
 * saving.  What a static process cannot do (dlopen libcurl for a remote
 * driver, or libarchive; the NSS modules behind getpwnam and getaddrinfo)
 * lands in pisb_static.c, which hands the whole command to the owning
 * binary (pisb_serve_handoff).  The verbs served here print nothing and
 * change nothing before they need one of those: a remote driver loads
 * libcurl before its first request, and list and inspect print only once
 * every sandbox has answered.
 */
#include "pisb_cmd.h"
#include "create_cmd.h"
#include "exec_cmd.h"
#include "svc_cmd.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* create, start and stop: a driver that may load a library for them
 * hands them over before it changes anything (PISB_DRV_NO_LOADER);
 * the local driver's run here, without pisb-create's exec and dynamic
 * loader (a third of a stop's time, issue #21) */
static const struct pisb_handler create_verbs[] = {
	{ "list", create_cmd_list, true },
	{ "inspect", create_cmd_inspect, true },
	{ "create", create_cmd_make, true },
	{ "start", create_cmd_start_stop, true },
	{ "stop", create_cmd_start_stop, true },
	/* its spares' controllers are then the static pisb too */
	{ "pool", create_cmd_pool, true },
	{ NULL, NULL, false },
};

/* not shell: its user lookup (getpwnam) is NSS */
static const struct pisb_handler exec_verbs[] = {
	{ "exec", exec_cmd_exec, true },
	{ "exec-status", exec_cmd_status_kill, true },
	{ "exec-kill", exec_cmd_status_kill, true },
	{ NULL, NULL, false },
};

/* the local driver's controller, of a sandbox that needs nothing a static
 * process cannot load (the local driver's spawn_controller picks this
 * binary then): it starts in 0.8 ms where pisb-svc's dynamic loader takes
 * 1.2, and every controller shares its pages.  A sandbox whose image may
 * have to be imported again (libarchive) or whose egress proxy resolves
 * names (getaddrinfo, in a child: no hand-off there) gets pisb-svc's. */
static const struct pisb_handler svc_verbs[] = {
	{ "supervise", svc_cmd_supervise, true },
	{ NULL, NULL, false },
};

static const struct {
	const char *binary;
	const struct pisb_handler *verbs;
} served[] = {
	{ "pisb-create", create_verbs },
	{ "pisb-exec", exec_verbs },
	{ "pisb-svc", svc_verbs },
};

/* the command being served, for the hand-off: its binary, its arguments,
 * and the signal state it came with */
static const char *owner;
static pid_t owner_pid;
static char **owner_argv;
static sigset_t owner_mask;
static struct sigaction owner_pipe;

void pisb_serve_handoff(const char *why)
{
	/* only the process that runs the verb starts it over: never a child
	 * it forked (that would run the command twice) */
	if (!owner || getpid() != owner_pid) {
		fprintf(stderr, "fatal: pisb cannot load %s: it is linked static\n", why);
		_exit(PISB_EXIT_PISB);
	}
	/* exec keeps the signal mask and ignored signals: the owner starts
	 * as pisb did.  What stdio holds (nothing yet, see above) is dropped. */
	sigaction(SIGPIPE, &owner_pipe, NULL);
	sigprocmask(SIG_SETMASK, &owner_mask, NULL);
	_exit(pisb_dispatch_exec(owner, owner_argv));
}

static const struct pisb_handler *served_verbs(const struct pisb_verb *v)
{
	for (size_t i = 0; i < sizeof(served) / sizeof(served[0]); i++) {
		if (strcmp(served[i].binary, v->binary))
			continue;
		for (const struct pisb_handler *h = served[i].verbs; h->verb; h++)
			if (!strcmp(h->verb, v->name))
				return served[i].verbs;
	}
	return NULL;
}

bool pisb_serve_has(const struct pisb_verb *v)
{
	return served_verbs(v) != NULL;
}

int pisb_serve(const struct pisb_verb *v, int argc, char **argv)
{
	const struct pisb_handler *h = served_verbs(v);

	if (!h)
		return -1;
	owner = v->binary;
	owner_pid = getpid();
	owner_argv = xcalloc((size_t)argc + 1, sizeof(char *));
	memcpy(owner_argv, argv, (size_t)argc * sizeof(char *));
	sigprocmask(SIG_SETMASK, NULL, &owner_mask);
	sigaction(SIGPIPE, NULL, &owner_pipe);
	return pisb_front_main(v->binary, h, argc, argv);
}
