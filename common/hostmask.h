/* hostmask.h - the host files that `image: host` never shows a sandbox,
 * even read-only: password hashes, ssh host keys, TLS private keys, sudo
 * rules, docker's and pisb's own configuration.  One list for every
 * driver that shares the host's /etc (local: drivers/local/ns.c; vm: the
 * virtiofs share, drivers/vm/vm.c).  NULL-terminated, absolute. */
#ifndef PISB_HOSTMASK_H
#define PISB_HOSTMASK_H

extern const char *const pisb_host_masked_files[];
extern const char *const pisb_host_masked_dirs[];

#endif
