/* svc_cmd.h - pisb-svc's supervise verb (cmd/svc_supervise.c), named by the
 * table of cmd/pisb-svc.c and by the dispatcher's (cmd/pisb_serve.c). */
#ifndef PISB_SVC_CMD_H
#define PISB_SVC_CMD_H

#include "front.h"

/* pisb-svc supervise NAME: the driver's supervise slot (internal) */
int svc_cmd_supervise(struct pisb_ctx *c);

#endif
