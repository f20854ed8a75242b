/* pisb-exec - run commands in a sandbox; see man/pisb-exec.1 (the verbs
 * are in exec_verbs.c) */
#include "exec_cmd.h"

static const struct pisb_handler handlers[] = {
	{ "exec", exec_cmd_exec, true },
	{ "exec-status", exec_cmd_status_kill, true },
	{ "exec-kill", exec_cmd_status_kill, true },
	{ "shell", exec_cmd_shell, true },
	{ NULL, NULL, false },
};

int main(int argc, char **argv)
{
	return pisb_front_main("pisb-exec", handlers, argc, argv);
}
