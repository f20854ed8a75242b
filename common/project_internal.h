/* project_internal.h - what project.c, project_diff.c and project_remote.c
 * share (not part of the library's interface). */
#ifndef PISB_PROJECT_INTERNAL_H
#define PISB_PROJECT_INTERNAL_H

#include "project.h"

/* A name the sandbox reported: relative, no ".", ".." or empty component,
 * none named .git (any case). */
bool pisb_project_name_ok(const char *rel);
/* Does rel fall under one of the paths o asks for? */
bool pisb_pdiff_wanted(const struct pisb_pdiff_opts *o, const char *rel);
/* A new zeroed change at the end of d. */
struct pisb_pchange *pisb_pdiff_add(struct pisb_pdiff *d);

/* project/info.json of a copy: {"dir","mode":"copy","files","bytes",
 * "secretsHidden","uidBase","gidBase","idCount","createdAt"}. */
int pisb_project_info_save(int idir, const char *dir, const struct pisb_project_stats *s,
			   uid_t uid, gid_t gid, unsigned idcount, struct pisb_err *e);

/* project_archive drivers (project_remote.c): the changes of sb's
 * workspace against m, from its archive, into d. */
int pisb_project_remote_scan(struct pisb_sandbox *sb, const struct pisb_manifest *m,
			     const struct pisb_pdiff_opts *o, struct pisb_pdiff *d,
			     struct pisb_err *e);
/* One path of sync written inside sb (type 'f' with mode, 'l' with the
 * target in content, 0: deleted) through the driver's write and exec. */
int pisb_project_remote_put(struct pisb_sandbox *sb, const char *path, char type, unsigned mode,
			    const struct pisb_buf *content, struct pisb_err *e);

/* project_git.c: the blobs of base m (files read from the fresh
 * workspace wsfd, no link followed; links from m's targets; files up to
 * 1 MiB, 256 MiB in all) as one git pack in packdir, owned by uid/gid when own, named into name
 * ("pack-<SHA-1>.pack"), for git inside to index (project.c). */
int pisb_project_pack(int wsfd, int packdir, const struct pisb_manifest *m, bool own, uid_t uid,
		      gid_t gid, char name[64], struct pisb_err *e);

#endif
