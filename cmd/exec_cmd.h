/* exec_cmd.h - the verbs of pisb-exec (cmd/exec_verbs.c), named by the
 * table of cmd/pisb-exec.c and by the dispatcher's (cmd/pisb_serve.c). */
#ifndef PISB_EXEC_CMD_H
#define PISB_EXEC_CMD_H

#include "front.h"

int exec_cmd_exec(struct pisb_ctx *c);
/* exec-status and exec-kill */
int exec_cmd_status_kill(struct pisb_ctx *c);
int exec_cmd_shell(struct pisb_ctx *c);

#endif
