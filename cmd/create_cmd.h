/* create_cmd.h - what the two files of pisb-create share: pisb-create.c
 * (main and the lifecycle verbs) and create_info.c (the verbs that change
 * nothing). */
#ifndef PISB_CREATE_CMD_H
#define PISB_CREATE_CMD_H

#include "front.h"

int create_cmd_validate(struct pisb_ctx *c);
int create_cmd_list(struct pisb_ctx *c);
int create_cmd_inspect(struct pisb_ctx *c);
int create_cmd_verify(struct pisb_ctx *c);
int create_cmd_doctor(struct pisb_ctx *c);
int create_cmd_drivers(struct pisb_ctx *c);

#endif
