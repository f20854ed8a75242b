/* docker_init.h - `pisb docker NAME init`: a starting Dockerfile, its
 * .dockerignore and (with --compose) a compose.yaml, written into a
 * workspace directory of the sandbox.
 *
 * One set of templates for every driver and for the Pi extension's
 * docker_init tool (which runs `pisb docker NAME init --json`): they live
 * here and nowhere else.  The files are written by a script that runs
 * inside the sandbox (PISB_DOCKER_INIT_SH, with the sandbox's rights, in
 * its view of the workspace): the host never opens a path of the
 * workspace for it.  The driver runs the script and hands its output to
 * pisb_docker_init_report().
 *
 * Arguments: [--lang LANG] [--force] [--compose] [DIR], DIR relative to
 * the workspace (the policy checks it lexically and makes it absolute,
 * docker_policy.h).  LANG is one of node, pnpm, python, go, rust,
 * generic; without it the directory's files pick it (pnpm-lock.yaml,
 * package.json, go.mod, Cargo.toml, requirements.txt or pyproject.toml,
 * else generic).  A file there already is kept unless --force (for
 * compose.yaml, any of compose.yaml, compose.yml, docker-compose.yml,
 * docker-compose.yaml counts).
 */
#ifndef PISB_DOCKER_INIT_H
#define PISB_DOCKER_INIT_H

#include "err.h"
#include "json.h"
#include "util.h"

#include <stdbool.h>
#include <stddef.h>

struct pisb_docker_init {
	const char *lang;       /* NULL: the directory's files pick it */
	bool force, compose;
	const char *dir;        /* NULL: the workspace */
};

/* Parse ARGS (N words) into O (pointers into ARGS); -1 with E (exit 2)
 * on an unknown option, a LANG not in the table or a second DIR. */
int pisb_docker_init_parse(char *const *args, size_t n, struct pisb_docker_init *o,
			   struct pisb_err *e);

/* The script's arguments for O with DIR (absolute, inside the sandbox)
 * in the workspace WS pushed on AV, after `sh -c PISB_DOCKER_INIT_SH sh`. */
void pisb_docker_init_args(const struct pisb_docker_init *o, const char *ws, const char *dir,
			   struct pisb_strv *av);

/* The script (POSIX sh): `sh -c PISB_DOCKER_INIT_SH sh ARGS...`. */
extern const char PISB_DOCKER_INIT_SH[];

/* From the script's output OUT and status CODE: the report into W
 * ({"name", "dir", "lang", "port", "files": [{"file", "status":
 * "written"|"kept", "existing"}]}), a line for the user in NOTES, and
 * *EXIT: 0, or 4 when a Dockerfile was there already and kept.  -1 with
 * E when the directory is not there (3) or the script failed (1). */
int pisb_docker_init_report(const char *name, const char *dir, const char *out, int code,
			    struct pisb_jw *w, struct pisb_strv *notes, int *exit_code, struct pisb_err *e);

/* The daemon's init inside a sandbox that runs its own dockerd (the
 * local and vm drivers' built-in service PISB_DOCKER_SERVICE): /etc/docker/
 * daemon.json written when the sandbox has none, making BuildKit the
 * default builder (`features.buildkit`: the daemon's ping says
 * Builder-Version 2, which docker build follows); then dockerd on
 * PISB_DOCKER_SOCK, its data root /var/lib/docker, its exec root and pid
 * file in /run/pisb-docker; rootless (--rootless) unless the sandbox's
 * cgroups are its own to write (delegated: runc makes each container's
 * below them).  In a vm guest (the built-in service of the vm driver, the
 * same services.c) it first waits for the agent's word that the bridge's
 * modules are in, and runs without iptables (the guest has no network
 * interface: published ports go through docker-proxy).  A `sh -c`
 * script. */
extern const char PISB_DOCKERD_SH[];

#endif
