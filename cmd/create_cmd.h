/* create_cmd.h - what the files of pisb-create share: pisb-create.c
 * (main, destroy, release), create_lc.c (create, prepare, connect, start,
 * stop) and create_info.c (the verbs that change nothing). */
#ifndef PISB_CREATE_CMD_H
#define PISB_CREATE_CMD_H

#include "front.h"

struct pisb_lc_opts;

/* the lifecycle options, from the parsed flags */
int create_lc_opts(struct pisb_ctx *c, const char *name, struct pisb_lc_opts *o);
/* --json: the one result rule (pisb_lifecycle_result) */
int create_print_result(struct pisb_ctx *c, const char *name, const char *gone);
int create_cmd_make(struct pisb_ctx *c);
int create_cmd_start_stop(struct pisb_ctx *c);
int create_cmd_validate(struct pisb_ctx *c);
int create_cmd_list(struct pisb_ctx *c);
int create_cmd_inspect(struct pisb_ctx *c);
int create_cmd_verify(struct pisb_ctx *c);
int create_cmd_doctor(struct pisb_ctx *c);
int create_cmd_drivers(struct pisb_ctx *c);
int create_cmd_pool(struct pisb_ctx *c);

#endif
