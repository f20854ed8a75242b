/* vm_fs.c - the vm driver's file verbs: each is one command in the guest,
 * `/run/pisb/agent fs VERB ARGS...` (agent/agent_fs.c), which runs the
 * local driver's file core on the guest's own "/".  The host never opens
 * the guest's disk or files: it sends a request through the agent's EXEC
 * and reads a reply, which is hostile input (bounded, checked field by
 * field).  Results use fs.h's types so pisb-fs prints them one way.
 *
 * The reply is a sequence of fields, each a u32le length and its bytes;
 * numbers and booleans are decimal text.  Per verb:
 *   read   bytes offset lines next_offset truncated content
 *   write, edit   bytes
 *   ls     an info per entry;  stat  one info
 *          info = name type size mode mtime has_target target readable writable
 *   mkdir  created
 *   find   ("p" rel)* "e" truncated
 *   grep   ("l" path line text cut context)* "e" matches limit_reached lines_truncated
 *   raw    (read --raw) the file's bytes, copied as they come
 * pull runs tar in the guest (its own tools, through /bin/sh) and gets a
 * tar archive, which the host unpacks with the hardened rules of
 * archive.h's pisb_pull_archive, as for a remote sandbox; the project's
 * archive (diff, apply) is the same tar of the workspace, read by the
 * host as data only.  push sends the host's archive to the guest's tar.
 * A failure is the guest's exit status (pisb's codes 1-6) and its message
 * on stderr.
 */
#include "vm_fs.h"
#include "vm.h"
#include "vm_internal.h"
#include "vm_proto.h"
#include "config.h"
#include "driver.h"
#include "err.h"
#include "archive.h"
#include "fs.h"
#include "instance.h"
#include "proc.h"
#include "sha256.h"
#include "state.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define REPLY_MAX (64u << 20)     /* a reply held in memory, at most */
#define MSG_MAX 1024              /* of the guest's error message */

struct reply {
	const char *verb;
	struct pisb_buf out, err;
	size_t max;
	int outfd;                /* >= 0: stdout is copied there (raw, pull) */
	long long outbytes;
	struct pisb_sha256 *sha;  /* pull: the archive's digest, max its cap */
};

static int sink(void *arg, int type, const void *p, size_t n, struct pisb_err *e)
{
	struct reply *r = arg;

	if (type == PISB_VM_STDERR) {
		if (r->err.len < MSG_MAX)
			pisb_buf_add(&r->err, p, n < MSG_MAX - r->err.len ? n : MSG_MAX - r->err.len);
		return 0;
	}
	if (r->outfd >= 0) {
		if (r->sha && (unsigned long long)r->outbytes + n > r->max)
			return pisb_err_set(e, PISB_EXIT_FAIL,
					    "the guest's archive for '%s' exceeds %llu bytes: refused",
					    r->verb, (unsigned long long)r->max);
		if (pisb_write_all(r->outfd, p, n) < 0)
			return pisb_err_sys(e, PISB_EXIT_FAIL, "write the file's bytes");
		if (r->sha)
			pisb_sha256_update(r->sha, p, n);
		r->outbytes += (long long)n;
		return 0;
	}
	if (n > r->max - r->out.len)
		return pisb_err_set(e, PISB_EXIT_BACKEND,
				    "the guest's reply to '%s' exceeds %zu KiB: refused", r->verb,
				    r->max >> 10);
	pisb_buf_add(&r->out, p, n);
	return 0;
}

/* The guest's message, printable: control characters become '?', the
 * trailing newline goes. */
static void guest_msg(struct pisb_buf *b)
{
	while (b->len && (b->s[b->len - 1] == '\n' || b->s[b->len - 1] == '\r'))
		b->len--;
	for (size_t i = 0; i < b->len; i++)
		if ((unsigned char)b->s[i] < 0x20 || b->s[i] == 0x7f)
			b->s[i] = '?';
	pisb_buf_addc(b, '\0');
}

/* sb's workspace when it runs; else the local driver's message (exit 5),
 * or, not named (project_archive: its caller names the sandbox), the same
 * without the sandbox's name in front. */
static const char *running_ws_named(struct pisb_sandbox *sb, bool named, struct pisb_err *e)
{
	const struct pisb_config *cfg = pisb_sandbox_config(sb, e);
	const struct pisb_runtime *rt;

	if (!cfg || !(rt = pisb_sandbox_runtime(sb, e)))
		return NULL;
	if (pisb_vm_status(sb->idir, rt) != PISB_ST_RUNNING) {
		if (named)
			pisb_err_set(e, PISB_EXIT_BACKEND, "sandbox '%s' is not running (start it with 'pisb start %s')",
				     sb->name, sb->name);
		else
			pisb_err_set(e, PISB_EXIT_BACKEND, "not running (start it with 'pisb start %s')", sb->name);
		return NULL;
	}
	return cfg->workspace && cfg->workspace[0] == '/' ? cfg->workspace : "/workspace";
}

static const char *running_ws(struct pisb_sandbox *sb, struct pisb_err *e)
{
	return running_ws_named(sb, true, e);
}

/* Run argv in the guest (env: PATH, then env) with stdin from in_fd (-1:
 * none), the reply into rp; *code the guest's exit status.  named: errors
 * start with the sandbox's name. */
static int run_in_named(struct pisb_sandbox *sb, bool named, char *const *argv, const char *env1,
			int in_fd, struct reply *rp, int *code, struct pisb_err *e)
{
	char *env[] = { "PATH=/usr/sbin:/usr/bin:/sbin:/bin", (char *)env1, NULL };
	struct vm_run run = { argv, env, "/", in_fd, -1, -1, true, false, 0, false, false, NULL };

	if (!rp->max)
		rp->max = REPLY_MAX;
	if (vm_run_sink(sb->idir, &run, sink, rp, code, e) < 0)
		return named ? pisb_err_prefix(e, "sandbox '%s'", sb->name) : -1;
	guest_msg(&rp->err);
	return 0;
}

static int run_in(struct pisb_sandbox *sb, char *const *argv, const char *env1, int in_fd,
		  struct reply *rp, int *code, struct pisb_err *e)
{
	return run_in_named(sb, true, argv, env1, in_fd, rp, code, e);
}

/* Run `agent fs ARGS` in the guest with stdin from in_fd (-1: none). */
static int call(struct pisb_sandbox *sb, char *const *args, int in_fd, struct reply *rp,
		struct pisb_err *e)
{
	_cleanup_strv_ struct pisb_strv argv = PISB_STRV_INIT;
	int code = -1;

	pisb_strv_push(&argv, PISB_VM_FS_AGENT);
	pisb_strv_push(&argv, "fs");
	for (size_t i = 0; args[i]; i++)
		pisb_strv_push(&argv, args[i]);
	rp->verb = args[0];
	if (run_in(sb, argv.v, NULL, in_fd, rp, &code, e) < 0)
		return -1;
	if (code == 0)
		return 0;
	if (code >= PISB_EXIT_FAIL && code <= PISB_EXIT_TIMEOUT && rp->err.len > 1)
		return pisb_err_set(e, code, "%s", rp->err.s);
	return pisb_err_set(e, PISB_EXIT_BACKEND,
			    "sandbox '%s': the guest agent's '%s' failed (exit %d)%s%s", sb->name,
			    args[0], code, rp->err.len > 1 ? ": " : "", rp->err.len > 1 ? rp->err.s : "");
}

static void reply_release(struct reply *r)
{
	pisb_buf_release(&r->out);
	pisb_buf_release(&r->err);
}
#define REPLY_INIT { NULL, PISB_BUF_INIT, PISB_BUF_INIT, 0, -1, 0, NULL }
#define _cleanup_reply_ __attribute__((cleanup(reply_release)))

/* ---- reading a reply ---- */

struct rd {
	const char *p;
	size_t n, off;
	bool bad;
};

static bool more(const struct rd *r)
{
	return !r->bad && r->off < r->n;
}

static const char *field(struct rd *r, size_t *len)
{
	uint32_t l;
	const char *s;

	if (r->bad || r->n - r->off < 4) {
		r->bad = true;
		return NULL;
	}
	l = pisb_vm_get32((const unsigned char *)r->p + r->off);
	if (l > r->n - r->off - 4) {
		r->bad = true;
		return NULL;
	}
	s = r->p + r->off + 4;
	r->off += 4 + (size_t)l;
	*len = l;
	return s;
}

static long long fnum(struct rd *r, long long lo, long long hi)
{
	char b[32];
	size_t n;
	const char *s = field(r, &n);
	long long v = 0;

	if (!s || n == 0 || n >= sizeof(b)) {
		r->bad = true;
		return 0;
	}
	memcpy(b, s, n);
	b[n] = '\0';
	if (pisb_parse_ll(b, lo, hi, &v) < 0)
		r->bad = true;
	return v;
}

static bool fbool(struct rd *r)
{
	return fnum(r, 0, 1) == 1;
}

/* a field as a string (caller frees); NUL bytes make it bad */
static char *fstr(struct rd *r, size_t max)
{
	size_t n;
	const char *s = field(r, &n);

	if (!s || n > max || memchr(s, '\0', n)) {
		r->bad = true;
		return NULL;
	}
	return xstrndup(s, n);
}

static bool ftag(struct rd *r, const char *tag)
{
	size_t n, off = r->off;
	const char *s = field(r, &n);

	if (s && n == strlen(tag) && memcmp(s, tag, n) == 0)
		return true;
	if (s)
		r->off = off;   /* not this tag: read it again as another */
	return false;
}

static int bad_reply(struct pisb_sandbox *sb, const char *verb, struct pisb_err *e)
{
	return pisb_err_set(e, PISB_EXIT_BACKEND, "sandbox '%s': the guest agent's reply to '%s' is malformed",
			    sb->name, verb);
}

#define LL_MAX (1LL << 62)

static const char *type_of(struct rd *r)
{
	static const char *const types[] = { "file", "dir", "symlink", "other" };
	size_t n;
	const char *s = field(r, &n);

	for (size_t i = 0; s && i < 4; i++)
		if (n == strlen(types[i]) && memcmp(s, types[i], n) == 0)
			return types[i];
	r->bad = true;
	return "other";
}

static void info_read(struct rd *r, struct pisb_fs_info *i)
{
	bool has_target;
	char *target;

	memset(i, 0, sizeof(*i));
	i->name = fstr(r, 65536);
	i->type = type_of(r);
	i->size = fnum(r, 0, LL_MAX);
	i->mode = (unsigned)fnum(r, 0, 07777);
	i->mtime = fnum(r, -LL_MAX, LL_MAX);
	has_target = fbool(r);
	target = fstr(r, 65536);
	if (has_target)
		i->target = target;
	else
		free(target);
	i->readable = fbool(r);
	i->writable = fbool(r);
}

/* ---- the verbs ---- */

static char *num_s(long long v)
{
	return xasprintf("%lld", v);
}

int pisb_vm_fs_read_text(struct pisb_sandbox *sb, const char *path, long long offset,
			 long long limit, size_t cap, char **abs, struct pisb_fs_text *t,
			 struct pisb_err *e)
{
	_cleanup_reply_ struct reply rp = REPLY_INIT;
	_cleanup_free_ char *o = num_s(offset), *l = num_s(limit), *c = num_s((long long)cap);
	const char *ws = running_ws(sb, e);
	struct rd r;
	size_t n;
	const char *s;

	memset(t, 0, sizeof(*t));
	if (!ws)
		return -1;
	*abs = pisb_path_in(ws, path ? path : ws);
	rp.max = cap + 4096;
	if (call(sb, (char *[]){ "read", *abs, o, l, c, NULL }, -1, &rp, e) < 0)
		return -1;
	r = (struct rd){ rp.out.s, rp.out.len, 0, false };
	t->bytes = fnum(&r, 0, LL_MAX);
	t->offset = fnum(&r, 0, LL_MAX);
	t->lines = fnum(&r, 0, LL_MAX);
	t->next_offset = fnum(&r, 0, LL_MAX);
	t->truncated = fbool(&r);
	s = field(&r, &n);
	if (r.bad || r.off != r.n || n > cap)
		return bad_reply(sb, "read", e);
	pisb_buf_add(&t->content, s, n);
	return 0;
}

int pisb_vm_fs_read_raw(struct pisb_sandbox *sb, const char *path, int outfd, long long *bytes,
			struct pisb_err *e)
{
	_cleanup_reply_ struct reply rp = REPLY_INIT;
	_cleanup_free_ char *abs = NULL;
	const char *ws = running_ws(sb, e);

	if (!ws)
		return -1;
	abs = pisb_path_in(ws, path ? path : ws);
	rp.outfd = outfd;
	if (call(sb, (char *[]){ "raw", abs, NULL }, -1, &rp, e) < 0)
		return -1;
	*bytes = rp.outbytes;
	return 0;
}

/* data/n as an fd to read from (a sealed memfd), or -1 with e */
static int data_fd(const void *data, size_t n, struct pisb_err *e)
{
	int fd = memfd_create("pisb-vm-fs", MFD_CLOEXEC);

	if (fd < 0)
		return pisb_err_sys(e, PISB_EXIT_PISB, "memfd_create");
	if (pisb_write_all(fd, data, n) < 0 || lseek(fd, 0, SEEK_SET) < 0) {
		close(fd);
		return pisb_err_sys(e, PISB_EXIT_PISB, "memfd");
	}
	return fd;
}

static int one_number(struct pisb_sandbox *sb, const char *verb, const struct reply *rp,
		      long long *v, struct pisb_err *e)
{
	struct rd r = { rp->out.s, rp->out.len, 0, false };

	*v = fnum(&r, 0, LL_MAX);
	if (r.bad || r.off != r.n)
		return bad_reply(sb, verb, e);
	return 0;
}

int pisb_vm_fs_write(struct pisb_sandbox *sb, const char *path, const struct pisb_fs_src *src,
		     int mode, bool mkdirs, char **abs, long long *bytes, struct pisb_err *e)
{
	_cleanup_reply_ struct reply rp = REPLY_INIT;
	_cleanup_free_ char *m = num_s(mode < 0 ? -1 : mode);
	_cleanup_close_ int mfd = -1;
	const char *ws = running_ws(sb, e);
	int in = src->fd;

	if (!ws)
		return -1;
	*abs = pisb_path_in(ws, path ? path : ws);
	if (in < 0 && (in = mfd = data_fd(src->data, src->n, e)) < 0)
		return -1;
	if (call(sb, (char *[]){ "write", *abs, m, mkdirs ? "1" : "0", NULL }, in, &rp, e) < 0)
		return -1;
	return one_number(sb, "write", &rp, bytes, e);
}

int pisb_vm_fs_edit(struct pisb_sandbox *sb, const char *path, const struct pisb_fs_edit *ed,
		    size_t n, char **abs, long long *bytes, struct pisb_err *e)
{
	_cleanup_reply_ struct reply rp = REPLY_INIT;
	_cleanup_buf_ struct pisb_buf req = PISB_BUF_INIT;
	_cleanup_close_ int mfd = -1;
	const char *ws = running_ws(sb, e);
	unsigned char l[4];

	if (!ws)
		return -1;
	*abs = pisb_path_in(ws, path ? path : ws);
	for (size_t i = 0; i < n; i++) {
		if (ed[i].oldn > PISB_VM_FS_EDIT_MAX || ed[i].newn > PISB_VM_FS_EDIT_MAX ||
		    req.len > PISB_VM_FS_EDIT_MAX)
			return pisb_err_set(e, PISB_EXIT_USAGE, "the edits of '%s' exceed %d MiB", *abs,
					    PISB_VM_FS_EDIT_MAX >> 20);
		pisb_vm_put32(l, (uint32_t)ed[i].oldn);
		pisb_buf_add(&req, l, 4);
		pisb_buf_add(&req, ed[i].old, ed[i].oldn);
		pisb_vm_put32(l, (uint32_t)ed[i].newn);
		pisb_buf_add(&req, l, 4);
		pisb_buf_add(&req, ed[i].new_, ed[i].newn);
	}
	if (req.len > PISB_VM_FS_EDIT_MAX)
		return pisb_err_set(e, PISB_EXIT_USAGE, "the edits of '%s' exceed %d MiB", *abs,
				    PISB_VM_FS_EDIT_MAX >> 20);
	if ((mfd = data_fd(req.s, req.len, e)) < 0)
		return -1;
	if (call(sb, (char *[]){ "edit", *abs, NULL }, mfd, &rp, e) < 0)
		return -1;
	return one_number(sb, "edit", &rp, bytes, e);
}

int pisb_vm_fs_ls(struct pisb_sandbox *sb, const char *path, char **abs,
		  struct pisb_fs_info **out, size_t *n, struct pisb_err *e)
{
	_cleanup_reply_ struct reply rp = REPLY_INIT;
	const char *ws = running_ws(sb, e);
	struct pisb_fs_info *v = NULL;
	size_t cap = 0, k = 0;
	struct rd r;

	if (!ws)
		return -1;
	*abs = pisb_path_in(ws, path ? path : ws);
	if (call(sb, (char *[]){ "ls", *abs, NULL }, -1, &rp, e) < 0)
		return -1;
	r = (struct rd){ rp.out.s, rp.out.len, 0, false };
	while (more(&r)) {
		v = pisb_grow(v, k + 1, &cap, sizeof(*v), 16);
		info_read(&r, &v[k++]);
	}
	if (r.bad) {
		pisb_fs_infos_free(v, k);
		return bad_reply(sb, "ls", e);
	}
	*out = v;
	*n = k;
	return 0;
}

int pisb_vm_fs_stat(struct pisb_sandbox *sb, const char *path, char **abs,
		    struct pisb_fs_info *out, struct pisb_err *e)
{
	_cleanup_reply_ struct reply rp = REPLY_INIT;
	const char *ws = running_ws(sb, e);
	struct rd r;

	if (!ws)
		return -1;
	*abs = pisb_path_in(ws, path ? path : ws);
	if (call(sb, (char *[]){ "stat", *abs, NULL }, -1, &rp, e) < 0)
		return -1;
	r = (struct rd){ rp.out.s, rp.out.len, 0, false };
	info_read(&r, out);
	if (r.bad || r.off != r.n) {
		pisb_fs_info_release(out);
		return bad_reply(sb, "stat", e);
	}
	/* stat names the path asked for, as the local driver does */
	free(out->name);
	out->name = xstrdup(*abs);
	return 0;
}

int pisb_vm_fs_mkdir(struct pisb_sandbox *sb, const char *path, char **abs, bool *created,
		     struct pisb_err *e)
{
	_cleanup_reply_ struct reply rp = REPLY_INIT;
	const char *ws = running_ws(sb, e);
	long long v = 0;

	if (!ws)
		return -1;
	*abs = pisb_path_in(ws, path ? path : ws);
	if (call(sb, (char *[]){ "mkdir", *abs, NULL }, -1, &rp, e) < 0 ||
	    one_number(sb, "mkdir", &rp, &v, e) < 0)
		return -1;
	if (v > 1)
		return bad_reply(sb, "mkdir", e);
	*created = v == 1;
	return 0;
}

/* find's records; with fn NULL only checked */
static bool find_records(const struct reply *rp, pisb_fs_find_fn fn, void *arg, bool *truncated)
{
	struct rd r = { rp->out.s, rp->out.len, 0, false };

	while (ftag(&r, "p")) {
		_cleanup_free_ char *rel = fstr(&r, 65536);
		if (rel && fn)
			fn(arg, rel);
	}
	if (!ftag(&r, "e"))
		return false;
	*truncated = fbool(&r);
	return !r.bad && r.off == r.n;
}

int pisb_vm_fs_find(struct pisb_sandbox *sb, const struct pisb_fs_find *o, char **abs,
		    pisb_fs_find_fn fn, void *arg, bool *truncated, struct pisb_err *e)
{
	_cleanup_reply_ struct reply rp = REPLY_INIT;
	_cleanup_free_ char *lim = num_s(o->limit);
	const char *ws = running_ws(sb, e);

	if (!ws)
		return -1;
	*abs = pisb_path_in(ws, o->dir ? o->dir : ws);
	if (call(sb, (char *[]){ "find", *abs, (char *)o->pattern, lim, o->no_ignore ? "1" : "0", NULL },
		 -1, &rp, e) < 0)
		return -1;
	if (!find_records(&rp, NULL, NULL, truncated))
		return bad_reply(sb, "find", e);
	find_records(&rp, fn, arg, truncated);
	return 0;
}

static bool grep_records(const struct reply *rp, pisb_fs_grep_fn fn, void *arg,
			 struct pisb_fs_grep_result *res)
{
	struct rd r = { rp->out.s, rp->out.len, 0, false };

	while (ftag(&r, "l")) {
		_cleanup_free_ char *path = fstr(&r, 65536);
		struct pisb_fs_grep_line l = { path, 0, NULL, 0, false, false };

		l.line = fnum(&r, 0, LL_MAX);
		l.text = field(&r, &l.len);
		l.cut = fbool(&r);
		l.context = fbool(&r);
		if (l.len > 4 * PISB_FS_LINE_CAP + 4)
			r.bad = true;
		if (!r.bad && fn)
			fn(arg, &l);
	}
	if (!ftag(&r, "e"))
		return false;
	res->matches = fnum(&r, 0, LL_MAX);
	res->limit_reached = fbool(&r);
	res->lines_truncated = fbool(&r);
	return !r.bad && r.off == r.n;
}

int pisb_vm_fs_grep(struct pisb_sandbox *sb, const struct pisb_fs_grep *o, char **abs,
		    pisb_fs_grep_fn fn, void *arg, struct pisb_fs_grep_result *res,
		    struct pisb_err *e)
{
	_cleanup_reply_ struct reply rp = REPLY_INIT;
	_cleanup_free_ char *ctx = num_s(o->context), *lim = num_s(o->limit);
	const char *ws = running_ws(sb, e);

	if (!ws)
		return -1;
	*abs = pisb_path_in(ws, o->path ? o->path : ws);
	if (call(sb, (char *[]){ "grep", *abs, (char *)o->pattern, o->glob ? "1" : "0",
				 (char *)(o->glob ? o->glob : ""), o->icase ? "1" : "0",
				 o->literal ? "1" : "0", o->no_ignore ? "1" : "0", ctx, lim, NULL },
		 -1, &rp, e) < 0)
		return -1;
	if (!grep_records(&rp, NULL, NULL, res))
		return bad_reply(sb, "grep", e);
	grep_records(&rp, fn, arg, res);
	return 0;
}

/* pull: the guest's tar of Q on stdout (G 1: ./.git left out, for the
 * project's archive); messages and statuses as the local driver's (3
 * missing, 1 not a file or directory) */
static const char pull_script[] =
	"Q=$1 G=$2\n"
	"if [ -d \"$Q\" ]; then\n"
	"  if [ \"$G\" = 1 ]; then exec tar -c -f - -C \"$Q\" --exclude=./.git .; fi\n"
	"  exec tar -c -f - -C \"$Q\" .\n"
	"elif [ -f \"$Q\" ]; then D=${Q%/*}; exec tar -c -h -f - -C \"${D:-/}\" \"./${Q##*/}\"\n"
	"elif [ -e \"$Q\" ]; then echo \"'$Q' is not a file or directory\" >&2; exit 1\n"
	"else echo \"open '$Q': No such file or directory\" >&2; exit 3; fi\n";

/* the archive's cap: the data cap and room for headers */
#define PULL_SLACK (1LL << 30)

/* The guest's tar of abs onto fd, at most max bytes; hex its SHA-256 as
 * the host received it.  no_git: for the project's archive, whose errors
 * do not name the sandbox (driver.h: diff does). */
static int guest_tar(struct pisb_sandbox *sb, const char *abs, bool no_git, long long max,
		     int fd, char hex[65], struct pisb_err *e)
{
	_cleanup_reply_ struct reply rp = REPLY_INIT;
	struct pisb_sha256 sha;
	unsigned char d[32];
	int code = -1;

	pisb_sha256_init(&sha);
	rp.verb = "pull";
	rp.outfd = fd;
	rp.sha = &sha;
	rp.max = (size_t)(max + PULL_SLACK);
	if (run_in_named(sb, !no_git, (char *[]){ "/bin/sh", "-c", (char *)pull_script, "sh", (char *)abs,
						   no_git ? "1" : "0", NULL }, NULL, -1, &rp, &code, e) < 0)
		return -1;
	if (code == PISB_EXIT_FAIL || code == PISB_EXIT_NOTFOUND)
		return pisb_err_set(e, code, "%s", rp.err.len > 1 ? rp.err.s : "pull failed in the guest");
	if (code != 0)
		return no_git ? pisb_err_set(e, PISB_EXIT_FAIL, "archiving '%s' failed (exit %d)%s%s", abs, code,
					     rp.err.len > 1 ? ": " : "", rp.err.len > 1 ? rp.err.s : "")
			      : pisb_err_set(e, PISB_EXIT_FAIL, "archiving '%s' in sandbox '%s' failed (exit %d)%s%s",
					     abs, sb->name, code, rp.err.len > 1 ? ": " : "",
					     rp.err.len > 1 ? rp.err.s : "");
	pisb_sha256_final(&sha, d);
	pisb_sha256_hex(d, hex);
	if (lseek(fd, 0, SEEK_SET) < 0)
		return pisb_err_sys(e, PISB_EXIT_FAIL, "rewind the archive");
	return 0;
}

int pisb_vm_fs_pull(struct pisb_sandbox *sb, const char *path, const char *hostdir,
		    const struct pisb_pull_opts *o, struct pisb_xfer *x, struct pisb_err *e)
{
	_cleanup_free_ char *abs = NULL;
	_cleanup_close_ int fd = -1;
	const char *ws = running_ws(sb, e);
	char hex[65];
	long long max = o && o->max_bytes > 0 ? o->max_bytes : PISB_PULL_MAX_BYTES;

	memset(x, 0, sizeof(*x));
	if (!ws)
		return -1;
	abs = pisb_path_in(ws, path ? path : ws);
	if (pisb_pull_check(abs, hostdir, o, e) < 0 || pisb_mkdirs_at(AT_FDCWD, hostdir, 0755, e) < 0)
		return -1;
	/* the archive waits in an unnamed file inside HOSTDIR */
	fd = open(hostdir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (fd < 0)
		return pisb_err_sys(e, PISB_EXIT_FAIL, "create a temporary file in '%s'", hostdir);
	if (guest_tar(sb, abs, false, max, fd, hex, e) < 0)
		return -1;
	return pisb_pull_archive(fd, hex, hostdir, o, x, e);
}

/* the project's reader (project_remote.c) parses it as data, ./.git left
 * out; the digest is the host's of what it received */
int pisb_vm_fs_project_archive(struct pisb_sandbox *sb, int fd, char sha[65], struct pisb_err *e)
{
	const char *ws = running_ws_named(sb, false, e);

	if (!ws)
		return pisb_err_prefix(e, "read the workspace");
	if (guest_tar(sb, ws, true, PISB_PULL_MAX_BYTES, fd, sha, e) < 0)
		return pisb_err_prefix(e, "read the workspace");
	return 0;
}

/* push: the host makes the archive (archive.h: push's file selection and
 * digest) into an unlinked temp file; the guest gets it on the agent's
 * stdin, writes it next to the target and runs archive.h's push script
 * with its own tar and sha256sum (the opensandbox driver's, shared):
 * digest compared, unpacked into a fresh directory, trees swapped.  The
 * host never reads anything back but the script's "pisb-ok KEPT" line and
 * its message (both bounded). */
static const char push_head[] =
	"A=$1 T=$2 W=$3 H=$4 K=$5 S=\n"
	"umask 077\n";
static const char push_recv[] =
	"mkdir -p -- \"${A%/*}\" 2>/dev/null\n"
	"cat > \"$A\" || fail 1 \"cannot write the archive next to '$T' in the guest; nothing was replaced\"\n"
	"umask 022\n";

int pisb_vm_fs_push(struct pisb_sandbox *sb, const char *hostdir, const char *to, bool all,
		    struct pisb_xfer *x, struct pisb_err *e)
{
	_cleanup_reply_ struct reply rp = REPLY_INIT;
	_cleanup_buf_ struct pisb_buf script = PISB_BUF_INIT;
	_cleanup_free_ char *abs = NULL, *arch = NULL, *dir = NULL;
	_cleanup_close_ int fd = -1;
	const char *tmp = getenv("TMPDIR"), *ws, *p;
	char *where;
	char hex[17];
	int code = -1, r;
	struct stat st;

	memset(x, 0, sizeof(*x));
	/* the host side first: a missing HOSTDIR needs no sandbox */
	if (stat(hostdir, &st) < 0)
		return pisb_err_sys(e, errno == ENOENT ? PISB_EXIT_NOTFOUND : PISB_EXIT_FAIL,
				    "open host directory '%s'", hostdir);
	if (!S_ISDIR(st.st_mode))
		return pisb_err_set(e, PISB_EXIT_FAIL, "open host directory '%s': Not a directory", hostdir);
	if (!(ws = running_ws(sb, e)))
		return -1;
	abs = pisb_path_in(ws, to ? to : ws);
	x->where = pisb_push_target(abs);
	if (!strcmp(x->where, "/"))
		return pisb_err_set(e, PISB_EXIT_USAGE, "refusing to replace the sandbox's root directory");
	if (!tmp || !*tmp)
		tmp = "/tmp";
	fd = open(tmp, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (fd < 0 && (errno == EOPNOTSUPP || errno == EISDIR || errno == EINVAL)) {
		/* no O_TMPFILE there: a named one, unlinked at once */
		_cleanup_free_ char *t = xasprintf("%s/.pisb-push-XXXXXX", tmp);
		if ((fd = mkostemp(t, O_CLOEXEC)) >= 0)
			unlink(t);
	}
	if (fd < 0)
		return pisb_err_sys(e, PISB_EXIT_FAIL, "create a temporary file in '%s'", tmp);
	where = x->where;
	x->where = NULL;
	r = pisb_push_archive(hostdir, all, fd, x, e);
	x->where = where;
	if (r < 0)
		return pisb_err_prefix(e, "push");
	if (lseek(fd, 0, SEEK_SET) < 0)
		return pisb_err_sys(e, PISB_EXIT_FAIL, "rewind the archive");
	pisb_random_hex(hex, 16);
	dir = xstrndup(x->where, (size_t)(strrchr(x->where, '/') - x->where));
	arch = xasprintf("%s/.%s.pisb-push-%s.tar", dir, strrchr(x->where, '/') + 1, hex);
	pisb_buf_adds(&script, push_head);
	pisb_buf_adds(&script, pisb_xfer_sh_prelude);
	pisb_buf_adds(&script, push_recv);
	pisb_buf_adds(&script, pisb_push_sh);
	rp.verb = "push";
	rp.max = 4096;
	if (run_in(sb, (char *[]){ "/bin/sh", "-c", script.s, "sh", arch, x->where, x->sha256, hex,
				   !strcmp(x->where, ws) ? "1" : "0", NULL },
		   NULL, fd, &rp, &code, e) < 0)
		return -1;
	if (code == 127)
		return pisb_err_set(e, PISB_EXIT_BACKEND, "push: %s (push needs tar and sha256sum in the guest); nothing was changed",
				    rp.err.len > 1 ? rp.err.s : "a tool is missing in the guest");
	if (code != 0)
		return pisb_err_set(e, code == PISB_EXIT_NOTFOUND ? PISB_EXIT_NOTFOUND : PISB_EXIT_FAIL,
				    "push: %s", rp.err.len > 1 ? rp.err.s : "the command in the guest failed");
	pisb_buf_addc(&rp.out, '\0');
	p = strstr(rp.out.s, "pisb-ok ");
	if (!p || (p[8] != '0' && p[8] != '1'))
		return pisb_err_set(e, PISB_EXIT_BACKEND, "push: sandbox '%s' did not confirm the transfer", sb->name);
	x->kept_config = p[8] == '1';
	return 0;
}
