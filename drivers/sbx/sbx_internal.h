/* sbx_internal.h - shared inside the sbx driver (sbx.c, sbx_docker.c);
 * not a public interface. */
#ifndef PISB_SBX_INTERNAL_H
#define PISB_SBX_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>

#include "config.h"
#include "instance.h"
#include "util.h"

struct pisb_err;
struct pisb_state;

#define SBX_DOCKER_SOCK "unix:///var/run/docker.sock"
#define SBX_LS_TIMEOUT_MS 30000
#define SBX_CREATE_TIMEOUT_MS 600000
#define SBX_LC_TIMEOUT_MS 120000

/* How one sbx process is run. */
struct sbx_run {
	int in_fd;                /* -1: /dev/null */
	int out_fd;               /* -1: collect into out */
	int err_fd;               /* > 0: stderr goes straight there (not collected) */
	bool tee_err;             /* stderr copied to our fd 2 as it comes */
	bool merge;               /* stderr collected into out too */
	struct pisb_buf *out;     /* collected stdout (may be NULL: dropped) */
	struct pisb_buf *err;     /* collected stderr, first 64 KiB (may be NULL) */
	int timeout_ms;           /* 0: none */
	bool forward;             /* forward SIGINT/TERM/HUP/QUIT to it */
};

/* The sbx binary on PATH; exit 5 naming what to install if missing. */
int sbx_find(char *out, size_t n, struct pisb_err *e);
/* The scrubbed environment (see sbx.h). */
void sbx_env(const struct pisb_sbx_config *x, struct pisb_strv *out);
/* Run bin with argv (argv[0] = "sbx"); *code = exit status (128+N for a
 * signal).  -1 + e when it could not be run or timed out (exit 6). */
int sbx_run(const char *bin, char *const *argv, char *const *envp,
	    const struct sbx_run *o, int *code, struct pisb_err *e);
/* Run an sbx command whose output (stdout into out, may be NULL) pisb
 * reads; a status other than 0 is an error (exit 5) naming the command;
 * `sbx exec` retried when sbx could not start the VM.  Logged to idir's
 * remote log unless idir < 0.  0, or -1 + e. */
int sbx_call(const char *bin, char *const *argv, char *const *envp, int timeout_ms,
	     struct pisb_buf *out, int idir, struct pisb_err *e);
/* "sbx create --name X ..." for messages (values after -e hidden). */
char *sbx_argv_text(char *const *argv);
/* sbx could not start the VM (a 5xx from its runtime): nothing ran. */
bool sbx_transient(const char *err);
/* Does sbx's stderr say the sandbox itself failed (not the command)? */
bool sbx_failed_itself(const char *err, const char *sbxname);
/* The last non-empty line of s (static buffer). */
const char *sbx_last_line(const char *s);

struct sbx_inst {
	int idir;
	char *name;
	struct pisb_record rec;
	struct pisb_runtime rt;
	struct pisb_config *cfg;
	char *sbx;                /* the sbx sandbox name */
	char *ws;                 /* host path of the workspace */
	char bin[4096];
	struct pisb_strv env;     /* for sbx */
	int poke;                 /* poke.lock, when held (> 0) */
	bool borrowed;            /* idir, rec and cfg are a pisb_sandbox's */
};
int sbx_inst_open(struct pisb_state *st, const char *name, struct sbx_inst *t,
		  struct pisb_err *e);
/* The same from a sandbox the command opened: its record and config are
 * borrowed (not read again), status.json is read anew. */
struct pisb_sandbox;
int sbx_inst_of(struct pisb_sandbox *sb, struct sbx_inst *t, struct pisb_err *e);
void sbx_inst_release(struct sbx_inst *t);
/* "-e K=V" for the config's env and the passthrough names. */
void sbx_exec_env(const struct pisb_config *cfg, struct pisb_strv *av);
/* `sbx exec [-i] -w CWD [-e K=V]... SBX -- ` for request r, then, with
 * pidfile, a shell that writes the command's pid there and execs it, then
 * the command itself (r->sh through /bin/sh -lc, else r->argv). */
void sbx_exec_argv(const struct sbx_inst *t, const struct pisb_exec_req *r, bool stdin_too,
		   const char *pidfile, struct pisb_strv *av);
/* Mark the instance's state (running|stopped|gone) in status.json. */
void sbx_mark(struct sbx_inst *t, const char *state, const char *word);
void sbx_log(int idir, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
