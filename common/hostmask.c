/* hostmask.c - see hostmask.h */
#include "hostmask.h"

#include <stddef.h>

const char *const pisb_host_masked_files[] = {
	"/etc/shadow", "/etc/gshadow", "/etc/shadow-", "/etc/gshadow-",
	"/etc/security/opasswd", NULL,
};

const char *const pisb_host_masked_dirs[] = {
	"/etc/ssh", "/etc/ssl/private", "/etc/sudoers.d", "/etc/docker",
	"/etc/pisb", NULL,
};
