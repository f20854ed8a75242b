/* vm_net.h - a vm sandbox's services and previews: the relay process
 * (vm_net.c) that its supervisor (vm.c) starts once the guest answers and
 * stops with QEMU.
 *
 * Files in instances/NAME/ (besides vm.h's):
 *   control.sock   (0600) requests as the local controller's
 *                  (pisb_control_call): ping, svc.* (services.h), and
 *                  from vm.c svc.boot, svc.halt
 *   services.json, logs/SERVICE.log  as a local sandbox's (services.c)
 *   net.log        the relay's own messages (start, listeners, what the
 *                  guest sent that was dropped), a line per event, the
 *                  drops said at most every 5 s
 *   agent9.lock    held by the relay: the net port (PISB_VM_NET_PORT) is
 *                  its alone
 */
#ifndef PISB_VM_NET_H
#define PISB_VM_NET_H

#include <stdbool.h>
#include <sys/types.h>

struct pisb_config;

/* Fork the relay (a child of the caller, which must reap it); returns
 * once status.json shows the previews (at most 10 s), its pid, or -1. */
pid_t vm_net_start(int idir, const char *name, const struct pisb_config *cfg, bool boot);
/* SIGTERM and reap. */
void vm_net_stop(pid_t pid);
/* The services (svc.boot): started after the hooks; 0 once each is
 * ready, else -1 naming those that failed (they go on being supervised). */
struct pisb_err;
int vm_net_boot(int idir, struct pisb_err *e);
/* Stop the services (svc.halt) before the guest powers off. */
void vm_net_halt(int idir);

#endif
