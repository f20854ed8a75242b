/* opensandbox.c - the opensandbox driver (see opensandbox.h).
 * Stub bodies: the implementation lands in the following commits. */
#include "opensandbox.h"
#include "err.h"
#include "exec.h"
#include "instance.h"
#include "json.h"
#include "state.h"
#include "util.h"

#include <string.h>

static int todo(struct pisb_err *e, const char *what)
{
	return pisb_err_set(e, PISB_EXIT_FAIL, "opensandbox: %s is not implemented yet", what);
}

static int os_verbose;
void pisb_os_set_verbose(int level) { os_verbose = level; }

int pisb_os_owns(struct pisb_state *st, const char *name, struct pisb_err *e)
{
	_cleanup_close_ int idir = pisb_instance_open(st, "instances", name, e);
	struct pisb_record rec;
	int r;

	if (idir < 0)
		return -1;
	if (pisb_record_load(idir, &rec, e) < 0)
		return -1;
	r = !strcmp(rec.driver, "opensandbox");
	pisb_record_release(&rec);
	return r;
}

int pisb_os_create(struct pisb_state *st, const struct pisb_config *cfg, const char *config_json,
		   const struct pisb_os_opts *o, struct pisb_err *e)
{ (void)st; (void)cfg; (void)config_json; (void)o; return todo(e, "create"); }
int pisb_os_connect(struct pisb_state *st, const struct pisb_config *cfg, const char *config_json,
		    const struct pisb_os_opts *o, struct pisb_err *e)
{ (void)st; (void)cfg; (void)config_json; (void)o; return todo(e, "connect"); }
int pisb_os_start(struct pisb_state *st, const char *name, const struct pisb_os_opts *o, struct pisb_err *e)
{ (void)st; (void)name; (void)o; return todo(e, "start"); }
int pisb_os_stop(struct pisb_state *st, const char *name, const struct pisb_os_opts *o, struct pisb_err *e)
{ (void)st; (void)name; (void)o; return todo(e, "stop"); }
int pisb_os_destroy(struct pisb_state *st, const char *name, const struct pisb_os_opts *o, struct pisb_err *e)
{ (void)st; (void)name; (void)o; return todo(e, "destroy"); }
int pisb_os_release(struct pisb_state *st, const char *name, const struct pisb_os_opts *o, struct pisb_err *e)
{ (void)st; (void)name; (void)o; return todo(e, "release"); }
enum pisb_status pisb_os_status(int idir, const struct pisb_record *rec)
{ (void)idir; (void)rec; return PISB_ST_GONE; }
int pisb_os_refresh(struct pisb_state *st, const char *name, int timeout_ms, struct pisb_err *e)
{ (void)st; (void)name; (void)timeout_ms; return todo(e, "refresh"); }
int pisb_os_exec_attached(struct pisb_state *st, const struct pisb_exec_req *r, int *code, struct pisb_err *e)
{ (void)st; (void)r; *code = 0; return todo(e, "exec"); }
int pisb_os_exec_handle(struct pisb_state *st, const struct pisb_exec_req *r, struct pisb_jw *w,
			int *code, bool *running, struct pisb_err *e)
{ (void)st; (void)r; (void)w; *code = 0; *running = false; return todo(e, "exec"); }
int pisb_os_exec_status(struct pisb_state *st, const char *name, const char *handle, int timeout_ms,
			struct pisb_jw *w, int *code, bool *running, struct pisb_err *e)
{ (void)st; (void)name; (void)handle; (void)timeout_ms; (void)w; *code = 0; *running = false; return todo(e, "exec-status"); }
int pisb_os_exec_kill(struct pisb_state *st, const char *name, const char *handle, struct pisb_jw *w,
		      int *code, struct pisb_err *e)
{ (void)st; (void)name; (void)handle; (void)w; *code = 0; return todo(e, "exec-kill"); }
int pisb_os_read(struct pisb_state *st, const char *name, const char *path, long long offset,
		 long long limit, bool raw, struct pisb_buf *out, bool *truncated, long long *size,
		 struct pisb_err *e)
{ (void)st; (void)name; (void)path; (void)offset; (void)limit; (void)raw; (void)out; *truncated = false; *size = 0; return todo(e, "read"); }
int pisb_os_read_json(struct pisb_state *st, const char *name, const char *path, long long offset,
		      long long limit, struct pisb_jw *w, struct pisb_err *e)
{ (void)st; (void)name; (void)path; (void)offset; (void)limit; (void)w; return todo(e, "read"); }
int pisb_os_write(struct pisb_state *st, const char *name, const char *path, const void *data, size_t n,
		  bool mkdir, const char *mode, struct pisb_jw *w, struct pisb_err *e)
{ (void)st; (void)name; (void)path; (void)data; (void)n; (void)mkdir; (void)mode; (void)w; return todo(e, "write"); }
int pisb_os_edit(struct pisb_state *st, const char *name, const char *path, const char *const *olds,
		 const char *const *news, size_t n, struct pisb_jw *w, struct pisb_err *e)
{ (void)st; (void)name; (void)path; (void)olds; (void)news; (void)n; (void)w; return todo(e, "edit"); }
int pisb_os_ls(struct pisb_state *st, const char *name, const char *path, struct pisb_jw *w, struct pisb_err *e)
{ (void)st; (void)name; (void)path; (void)w; return todo(e, "ls"); }
int pisb_os_stat(struct pisb_state *st, const char *name, const char *path, struct pisb_jw *w, struct pisb_err *e)
{ (void)st; (void)name; (void)path; (void)w; return todo(e, "stat"); }
int pisb_os_mkdir(struct pisb_state *st, const char *name, const char *path, struct pisb_err *e)
{ (void)st; (void)name; (void)path; return todo(e, "mkdir"); }
int pisb_os_find(struct pisb_state *st, const char *name, const char *glob, const char *dir, long long limit,
		 bool no_ignore, struct pisb_jw *w, struct pisb_err *e)
{ (void)st; (void)name; (void)glob; (void)dir; (void)limit; (void)no_ignore; (void)w; return todo(e, "find"); }
int pisb_os_grep(struct pisb_state *st, const char *name, const struct pisb_os_grep_req *g,
		 struct pisb_jw *w, struct pisb_err *e)
{ (void)st; (void)name; (void)g; (void)w; return todo(e, "grep"); }
int pisb_os_renew_pass(struct pisb_state *st, const struct pisb_os_renew_opts *o, struct pisb_jw *w,
		       struct pisb_err *e)
{ (void)st; (void)o; (void)w; return todo(e, "renew"); }
