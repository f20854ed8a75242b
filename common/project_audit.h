/* project_audit.h - what `pisb verify`'s project check looks for: the
 * host's secrets in a sandbox's project, by content.
 *
 * The walk runs in a child with the project directory owner's ids (the
 * sandbox may have written a bound tree: nothing in it is read with more
 * rights than that), never follows a symlink, stops at
 * PISB_AUDIT_WALK_MAX entries, and hashes (SHA-256) every file that
 * matches a secret pattern (pisb_project_secret), or lies under a
 * directory that does, up to PISB_AUDIT_SECRET_MAX bytes; it lists every
 * .git directory (not entered).  Each driver then reads the same paths
 * inside: a secret that reads back with the host's content fails.
 */
#ifndef PISB_PROJECT_AUDIT_H
#define PISB_PROJECT_AUDIT_H

#include "config.h"

#include <stdbool.h>
#include <stddef.h>

#define PISB_AUDIT_WALK_MAX 200000
#define PISB_AUDIT_SECRET_MAX (1 << 20)

struct pisb_audit_secret {
	char *rel;             /* its path in the project */
	char hex[65];          /* SHA-256 of its content */
};

struct pisb_project_audit {
	char mode[8];          /* copy, bind or bind-ro (project/info.json) */
	bool secrets_in;       /* project.secrets: include: none are hashed */
	struct pisb_audit_secret *secret;
	size_t nsecret;
	char **git;            /* .git directories, relative */
	size_t ngit;
	int walked;            /* entries the walk saw */
	bool cut;              /* ... and it stopped at the cap */
};

/* The project of the instance idir and its secrets (pc: its config):
 * 1 and *a filled, 0 the sandbox has no project. */
int pisb_project_audit(int idir, const struct pisb_project_config *pc, struct pisb_project_audit *a);
void pisb_project_audit_release(struct pisb_project_audit *a);
/* The SHA-256 of what fd reads (at most PISB_AUDIT_SECRET_MAX + 1
 * bytes), as hex; false on a read error. */
bool pisb_audit_hash_fd(int fd, char hex[65]);

#endif
