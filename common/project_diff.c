/* project_diff.c - what the agent changed (diff) and those changes back
 * into the project (apply); see project.h. */
#include "project.h"
#include "project_internal.h"
#include "config.h"
#include "driver.h"
#include "err.h"
#include "exec.h"
#include "fs.h"
#include "ignore.h"
#include "json.h"
#include "lock.h"
#include "proc.h"
#include "sha256.h"
#include "state.h"
#include "util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define NAME_MAX_LEN 4096

void pisb_pdiff_release(struct pisb_pdiff *d)
{
	for (size_t i = 0; i < d->n; i++) {
		free(d->v[i].path);
		free(d->v[i].ntarget);
		pisb_buf_release(&d->v[i].content);
		pisb_buf_release(&d->v[i].base);
	}
	free(d->v);
	free(d->dir);
	memset(d, 0, sizeof(*d));
}

static void hash_mem(const void *p, size_t n, char out[65])
{
	struct pisb_sha256 c;
	unsigned char d[32];

	pisb_sha256_init(&c);
	pisb_sha256_update(&c, p, n);
	pisb_sha256_final(&c, d);
	pisb_sha256_hex(d, out);
}

static int64_t ns_of(const struct timespec *t)
{
	return (int64_t)t->tv_sec * 1000000000LL + t->tv_nsec;
}

/* What is at rel under dirfd, never through a symlink: type 'f', 'l', 'o'
 * (anything else, or a parent that is no directory) or 0 (absent); with
 * want_content, a file's bytes (at most PISB_PROJECT_FILE_MAX, else
 * *too_large) or a link's target into content, and its sha. */
struct look {
	char type;
	struct stat st;
	struct pisb_buf content;
	char sha[65];
	bool too_large;
};

static void look_release(struct look *l)
{
	pisb_buf_release(&l->content);
}

static int look_at(int dirfd, const char *rel, bool want_content, struct look *l)
{
	const char *slash = strrchr(rel, '/');
	_cleanup_close_ int pfd = -1;
	const char *name = slash ? slash + 1 : rel;

	memset(l, 0, sizeof(*l));
	if (slash) {
		_cleanup_free_ char *parent = xstrndup(rel, (size_t)(slash - rel));
		pfd = pisb_open_beneath(dirfd, parent, O_PATH | O_DIRECTORY);
		if (pfd < 0)
			return errno == ENOENT || errno == ENOTDIR || errno == ELOOP || errno == EXDEV ? 0 : -1;
	}
	if (fstatat(slash ? pfd : dirfd, name, &l->st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT || errno == ENOTDIR ? 0 : -1;
	l->type = S_ISREG(l->st.st_mode) ? 'f' : S_ISLNK(l->st.st_mode) ? 'l' : 'o';
	if (!want_content || l->type == 'o')
		return 0;
	if (l->type == 'l') {
		char t[NAME_MAX_LEN + 1];
		ssize_t n = readlinkat(slash ? pfd : dirfd, name, t, sizeof(t) - 1);
		if (n < 0)
			return -1;
		pisb_buf_add(&l->content, t, (size_t)n);
		hash_mem(t, (size_t)n, l->sha);
		return 0;
	}
	if (l->st.st_size > PISB_PROJECT_FILE_MAX) {
		l->too_large = true;
		return 0;
	}
	{
		_cleanup_close_ int fd = openat(slash ? pfd : dirfd, name,
						O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
		struct stat st;
		if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
			return -1;
		if (pisb_read_fd(fd, &l->content, PISB_PROJECT_FILE_MAX) < 0) {
			if (errno != E2BIG)
				return -1;
			l->too_large = true;
			pisb_buf_release(&l->content);
			return 0;
		}
		l->st = st;
		l->st.st_size = (off_t)l->content.len;
		hash_mem(l->content.s ? l->content.s : "", l->content.len, l->sha);
	}
	return 0;
}

/* Does rel fall under one of the paths asked for? */
bool pisb_pdiff_wanted(const struct pisb_pdiff_opts *o, const char *rel)
{
	if (!o || !o->npaths)
		return true;
	for (size_t i = 0; i < o->npaths; i++) {
		const char *p = o->paths[i];
		size_t n = strlen(p);
		while (n > 1 && p[n - 1] == '/')
			n--;
		if (n == 1 && p[0] == '.')
			return true;
		if (!strncmp(rel, p, n) && (rel[n] == '\0' || rel[n] == '/'))
			return true;
	}
	return false;
}

/* A name the sandbox reported: relative, no ".", ".." or empty component,
 * none named .git (any case). */
bool pisb_project_name_ok(const char *rel)
{
	if (!*rel || rel[0] == '/')
		return false;
	for (const char *p = rel; *p;) {
		size_t n = strcspn(p, "/");
		if (!n || (n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.') ||
		    (n == 4 && !strncasecmp(p, ".git", 4)))
			return false;
		p += n;
		if (*p == '/')
			p++;
		else
			break;
	}
	return rel[strlen(rel) - 1] != '/';
}

/* ---- the reader, inside: records on a pipe ---- */

struct wire {
	char tag;                 /* 'R' a change, 'E' the end, 'X' an error */
	char status, otype, ntype;
	uint32_t omode, nmode;
	int64_t nsize, nmtime;
	uint32_t pathlen, targetlen;
	int64_t contentlen;       /* -1: none */
	uint8_t too_large;
	char sha[65];
};

/* The base is checked by SCAN_THREADS threads taking runs of SCAN_CHUNK
 * entries (sorted: a run shares its directories, so each thread's parent
 * cache keeps working), while the first also walks the tree for added
 * files; records go out whole under the lock. */
#define SCAN_THREADS 2
#define SCAN_CHUNK 256

/* The base's paths hashed, for the walk's one question per file (is it
 * the base's?): open addressing, slots hold index + 1. */
struct pset {
	uint32_t *slot;
	size_t mask;
};

static uint64_t path_hash(const char *p)
{
	uint64_t h = 14695981039346656037ULL;   /* FNV-1a */

	for (; *p; p++)
		h = (h ^ (unsigned char)*p) * 1099511628211ULL;
	return h;
}

static void pset_build(struct pset *ps, const struct pisb_manifest *m)
{
	size_t cap = 16;

	while (cap < 2 * m->n)
		cap <<= 1;
	ps->slot = xcalloc(cap, sizeof(*ps->slot));
	ps->mask = cap - 1;
	for (size_t i = 0; i < m->n; i++) {
		size_t k = path_hash(m->v[i].path) & ps->mask;
		while (ps->slot[k])
			k = (k + 1) & ps->mask;
		ps->slot[k] = (uint32_t)(i + 1);
	}
}

static bool pset_has(const struct pset *ps, const struct pisb_manifest *m, const char *path)
{
	for (size_t k = path_hash(path) & ps->mask; ps->slot[k]; k = (k + 1) & ps->mask)
		if (!strcmp(m->v[ps->slot[k] - 1].path, path))
			return true;
	return false;
}

struct scan {
	int fd;                   /* the pipe */
	int wsfd;
	const struct pisb_manifest *m;
	struct pset base;
	const struct pisb_pdiff_opts *o;
	long long unchanged;      /* atomic */
	size_t next;              /* atomic: the next base entry to take */
	pthread_mutex_t lock;     /* one record at a time on fd */
};

static int send_change(struct scan *s, const char *rel, char status, const struct pisb_pentry *old,
		       const struct look *l)
{
	struct wire w;
	int r = 0;

	memset(&w, 0, sizeof(w));
	w.tag = 'R';
	w.status = status;
	w.otype = old ? old->type : 0;
	w.omode = old ? old->mode : 0;
	w.ntype = l ? l->type : 0;
	w.nmode = l && l->type == 'f' ? (uint32_t)(l->st.st_mode & 0777) : l && l->type == 'l' ? 0777 : 0;
	w.nsize = l ? (int64_t)l->st.st_size : 0;
	w.nmtime = l ? ns_of(&l->st.st_mtim) : 0;
	w.pathlen = (uint32_t)strlen(rel);
	w.contentlen = l && (l->type == 'f' || l->type == 'l') && !l->too_large ? (int64_t)l->content.len : -1;
	w.targetlen = 0;
	w.too_large = l && l->too_large;
	if (l)
		memcpy(w.sha, l->sha, 65);
	pthread_mutex_lock(&s->lock);
	if (pisb_write_all(s->fd, &w, sizeof(w)) < 0 || pisb_write_all(s->fd, rel, w.pathlen) < 0 ||
	    (w.contentlen > 0 && pisb_write_all(s->fd, l->content.s, l->content.len) < 0))
		r = -1;
	pthread_mutex_unlock(&s->lock);
	return r;
}

static void __attribute__((noreturn)) scan_fail(struct scan *s, const char *what);

/* Base entry p, found as l (its lstat only): unchanged when size, mtime
 * and mode still match (the file is not read), else hashed and compared. */
static int check_base(struct scan *s, const struct pisb_pentry *p, struct look *l)
{
	bool same;
	int r = 0;

	if (l->type == 'o')
		l->type = 0;   /* a directory (or a fifo) where the file was */
	if (!l->type)
		return send_change(s, p->path, PISB_P_DELETED, p, NULL);
	if (l->type == p->type && l->st.st_size == p->size && ns_of(&l->st.st_mtim) == p->mtime &&
	    (p->type == 'l' || (unsigned)(l->st.st_mode & 0777) == p->mode)) {
		__atomic_fetch_add(&s->unchanged, 1, __ATOMIC_RELAXED);
		return 0;
	}
	if (look_at(s->wsfd, p->path, true, l) < 0)
		scan_fail(s, p->path);
	same = l->type == p->type && !l->too_large && !strcmp(l->sha, p->sha) &&
	       (p->type == 'l' || (unsigned)(l->st.st_mode & 0777) == p->mode);
	if (same)
		__atomic_fetch_add(&s->unchanged, 1, __ATOMIC_RELAXED);
	else
		r = send_change(s, p->path, l->type ? PISB_P_MODIFIED : PISB_P_DELETED, p,
				l->type ? l : NULL);
	look_release(l);
	return r;
}

/* The last parent directory a thread opened (never through a symlink):
 * fd -1 with its name set when it is not there as a directory. */
struct pcache {
	char *parent;
	int fd;
};

static void pcache_release(struct pcache *c)
{
	free(c->parent);
	if (c->fd >= 0)
		close(c->fd);
}

/* The lstat of base entry rel into l->st and its type into l->type (0:
 * absent, or not reachable without a symlink), as look_at without content. */
static int stat_base(struct scan *s, struct pcache *c, const char *rel, struct look *l)
{
	const char *slash = strrchr(rel, '/');
	size_t plen = slash ? (size_t)(slash - rel) : 0;
	int dfd = s->wsfd;

	memset(l, 0, sizeof(*l));
	if (slash) {
		if (!c->parent || strlen(c->parent) != plen || memcmp(c->parent, rel, plen)) {
			free(c->parent);
			if (c->fd >= 0)
				close(c->fd);
			c->parent = xstrndup(rel, plen);
			c->fd = pisb_open_beneath(s->wsfd, c->parent, O_PATH | O_DIRECTORY);
			if (c->fd < 0 && errno != ENOENT && errno != ENOTDIR && errno != ELOOP && errno != EXDEV)
				return -1;
		}
		if (c->fd < 0)
			return 0;
		dfd = c->fd;
	}
	if (fstatat(dfd, slash ? slash + 1 : rel, &l->st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT || errno == ENOTDIR ? 0 : -1;
	l->type = S_ISREG(l->st.st_mode) ? 'f' : S_ISLNK(l->st.st_mode) ? 'l' : 'o';
	return 0;
}

/* Check runs of the base until none is left. */
static void *check_thread(void *arg)
{
	struct scan *s = arg;
	const struct pisb_manifest *m = s->m;
	struct pcache c = { NULL, -1 };

	for (;;) {
		size_t i = __atomic_fetch_add(&s->next, SCAN_CHUNK, __ATOMIC_RELAXED);
		if (i >= m->n)
			break;
		for (size_t k = i; k < i + SCAN_CHUNK && k < m->n; k++) {
			struct look l;
			if (!pisb_pdiff_wanted(s->o, m->v[k].path))
				continue;
			if (stat_base(s, &c, m->v[k].path, &l) < 0)
				scan_fail(s, m->v[k].path);
			if (check_base(s, &m->v[k], &l) < 0)
				_exit(1);
		}
	}
	pcache_release(&c);
	return NULL;
}

/* The walk: the files that are not in the base (added). */
static int scan_cb(void *arg, const struct pisb_walk_entry *en)
{
	struct scan *s = arg;
	struct look l;
	int r;

	if (en->type == DT_DIR)
		return !strcasecmp(en->name, ".git") ? PISB_WALK_SKIP : PISB_WALK_CONTINUE;
	if (en->type != DT_REG && en->type != DT_LNK)
		return PISB_WALK_CONTINUE;
	if (pset_has(&s->base, s->m, en->rel))
		return PISB_WALK_CONTINUE;   /* the base's: check_thread's */
	if (!s->o->all && !strcmp(en->rel, ".sandbox.yaml"))
		return PISB_WALK_CONTINUE;
	if (!pisb_pdiff_wanted(s->o, en->rel) || !pisb_project_name_ok(en->rel))
		return PISB_WALK_CONTINUE;
	if (look_at(s->wsfd, en->rel, true, &l) < 0 || !l.type) {
		look_release(&l);
		return PISB_WALK_CONTINUE;   /* gone meanwhile */
	}
	r = send_change(s, en->rel, PISB_P_ADDED, NULL, &l);
	look_release(&l);
	return r < 0 ? -1 : PISB_WALK_CONTINUE;
}

static void __attribute__((noreturn)) scan_fail(struct scan *s, const char *what)
{
	struct wire w;
	char msg[512];
	int n = snprintf(msg, sizeof(msg), "%s: %s", what, strerror(errno));

	memset(&w, 0, sizeof(w));
	w.tag = 'X';
	w.pathlen = (uint32_t)(n < 0 ? 0 : n >= (int)sizeof(msg) ? (int)sizeof(msg) - 1 : n);
	if (s->fd >= 0)
		pthread_mutex_lock(&s->lock);   /* held until _exit: no record after */
	pisb_write_all(s->fd, &w, sizeof(w));
	pisb_write_all(s->fd, msg, w.pathlen);
	_exit(1);
}

static void __attribute__((noreturn)) scan_child(struct pisb_sandbox *sb, int fd,
						  const struct pisb_manifest *m,
						  const struct pisb_pdiff_opts *o)
{
	struct pisb_err e = PISB_ERR_INIT;
	_cleanup_free_ char *ws = NULL;
	int root = -1;
	struct scan s = { fd, -1, m, { NULL, 0 }, o, 0, 0, PTHREAD_MUTEX_INITIALIZER };
	pthread_t tid[SCAN_THREADS];
	size_t started = 1;
	struct wire w;

	signal(SIGPIPE, SIG_DFL);
	if ((sb->drv->project_view ? sb->drv->project_view : sb->drv->project_enter)(sb, &root, &ws, &e) < 0) {
		errno = e.errnum ? e.errnum : EIO;
		scan_fail(&s, e.msg);
	}
	s.wsfd = pisb_fs_resolve(root, ws, O_RDONLY | O_DIRECTORY, 0);
	if (s.wsfd < 0)
		scan_fail(&s, "open the workspace");
	/* every base entry is looked at by its path (its parent opened
	 * without a symlink, once a run): a file whose lstat still matches
	 * is unchanged, unread; meanwhile the walk finds the files the base
	 * does not have */
	pset_build(&s.base, m);
	for (; started < SCAN_THREADS && m->n > SCAN_CHUNK; started++)
		if (pthread_create(&tid[started], NULL, check_thread, &s) != 0)
			break;
	{
		struct pisb_walk_opts wo = { root, s.wsfd, ws, !o->all };
		if (pisb_walk(&wo, scan_cb, &s, &e) < 0) {
			errno = e.errnum ? e.errnum : EIO;
			scan_fail(&s, "walk the workspace");
		}
	}
	check_thread(&s);
	for (size_t i = 1; i < started; i++)
		pthread_join(tid[i], NULL);
	memset(&w, 0, sizeof(w));
	w.tag = 'E';
	w.nsize = s.unchanged;
	pisb_write_all(fd, &w, sizeof(w));
	_exit(0);
}

/* ---- the host side ---- */

struct pisb_pchange *pisb_pdiff_add(struct pisb_pdiff *d)
{
	d->v = pisb_grow(d->v, d->n, &d->cap, sizeof(*d->v), 32);
	memset(&d->v[d->n], 0, sizeof(d->v[0]));
	return &d->v[d->n++];
}

static int cmp_change(const void *a, const void *b)
{
	return strcmp(((const struct pisb_pchange *)a)->path, ((const struct pisb_pchange *)b)->path);
}

/* Read the child's records (hostile: every length bounded). */
static int read_records(int fd, struct pisb_pdiff *d, struct pisb_err *e)
{
	long long total = 0;

	for (;;) {
		struct wire w;
		ssize_t r = pisb_read_all(fd, &w, sizeof(w));
		struct pisb_pchange *c;
		_cleanup_free_ char *path = NULL;

		if (r != (ssize_t)sizeof(w))
			return pisb_err_set(e, PISB_EXIT_FAIL, "the workspace reader ended early");
		if (w.tag == 'E') {
			d->unchanged = w.nsize;
			return 0;
		}
		if (w.pathlen == 0 || w.pathlen > NAME_MAX_LEN)
			return pisb_err_set(e, PISB_EXIT_FAIL, "the workspace reader sent a bad record");
		path = xmalloc(w.pathlen + 1);
		if (pisb_read_all(fd, path, w.pathlen) != (ssize_t)w.pathlen)
			return pisb_err_set(e, PISB_EXIT_FAIL, "the workspace reader ended early");
		path[w.pathlen] = '\0';
		if (w.tag == 'X')
			return pisb_err_set(e, PISB_EXIT_FAIL, "read the workspace: %s", path);
		if (w.tag != 'R' || strlen(path) != w.pathlen || !pisb_project_name_ok(path) ||
		    (w.status != 'A' && w.status != 'M' && w.status != 'D') ||
		    w.contentlen > PISB_PROJECT_FILE_MAX || w.contentlen < -1)
			return pisb_err_set(e, PISB_EXIT_FAIL, "the workspace reader sent a bad record");
		total += w.contentlen > 0 ? w.contentlen : 0;
		if (total > PISB_PROJECT_TOTAL_MAX)
			return pisb_err_set(e, PISB_EXIT_FAIL,
					    "the changed files hold more than %lld bytes; name PATHs to see fewer",
					    (long long)PISB_PROJECT_TOTAL_MAX);
		c = pisb_pdiff_add(d);
		c->path = PISB_STEAL(path);
		c->status = w.status;
		c->otype = w.otype;
		c->ntype = w.ntype;
		c->omode = w.omode & 0777;
		c->nmode = w.nmode & 0777;
		c->nsize = w.nsize;
		c->nmtime = w.nmtime;
		c->too_large = w.too_large;
		w.sha[64] = '\0';
		memcpy(c->nsha, w.sha, 65);
		if (w.contentlen >= 0) {
			pisb_buf_grow(&c->content, (size_t)w.contentlen + 1);
			if (pisb_read_all(fd, c->content.s, (size_t)w.contentlen) != (ssize_t)w.contentlen)
				return pisb_err_set(e, PISB_EXIT_FAIL, "the workspace reader ended early");
			c->content.len = (size_t)w.contentlen;
			c->content.s[c->content.len] = '\0';
			{
				char sha[65];
				hash_mem(c->content.s, c->content.len, sha);
				if (strcmp(sha, c->nsha))
					return pisb_err_set(e, PISB_EXIT_FAIL, "'%s': content and digest disagree",
							    c->path);
			}
			if (c->ntype == 'l') {
				if (memchr(c->content.s, 0, c->content.len))
					return pisb_err_set(e, PISB_EXIT_FAIL, "the workspace reader sent a bad record");
				c->ntarget = xstrndup(c->content.s, c->content.len);
			}
		}
	}
}

static bool is_binary(const struct pisb_buf *b)
{
	return b->len && memchr(b->s, 0, b->len < 8000 ? b->len : 8000);
}

/* ---- the base content of a conflict ---- */

/* Kept when apply or sync moves a file's base (best effort: without it a
 * later conflict's patch starts from the host file). */
static void base_keep(int idir, const char *sha, const struct pisb_buf *content)
{
	struct pisb_err ig = PISB_ERR_INIT;
	char name[96];

	snprintf(name, sizeof(name), "project/objects/%s", sha);
	if (faccessat(idir, name, F_OK, AT_SYMLINK_NOFOLLOW) == 0)
		return;
	if (pisb_mkdirs_at(idir, "project/objects", 0700, &ig) == 0)
		pisb_atomic_write(idir, name, content->s ? content->s : "", content->len, 0600, &ig);
}

static bool sha_is(const struct pisb_buf *b, const char *want)
{
	char sha[65];

	hash_mem(b->s ? b->s : "", b->len, sha);
	return !strcmp(sha, want);
}

/* The first commit of the sandbox's own git holds the base as create
 * copied it: git runs inside (the sandbox's rights), its output is data,
 * used only when its SHA-256 is the base's. */
static bool base_from_git(struct pisb_sandbox *sb, const struct pisb_pentry *p, struct pisb_buf *b)
{
	static const char script[] =
		"c=$(git rev-list --max-parents=0 HEAD 2>/dev/null | tail -n 1) && [ -n \"$c\" ] && "
		"exec git cat-file blob \"$c:$1\" 2>/dev/null";
	char *const argv[] = { "sh", "-c", (char *)script, "sh", p->path, NULL };
	_cleanup_buf_ struct pisb_buf out = PISB_BUF_INIT;
	struct pisb_exec_req r = { 0 };
	struct pisb_err ig = PISB_ERR_INIT;
	struct pisb_jw w;
	struct pisb_json j;
	long long ec = -1;
	bool running = false, ok = false;
	int code = 0;
	char *o;

	if (!sb->drv->exec_handle || sb->drv->status(sb) != PISB_ST_RUNNING || p->size > PISB_PROJECT_FILE_MAX)
		return false;
	r.name = sb->name;
	r.argv = argv;
	r.argc = 5;
	r.timeout_ms = 30000;
	pisb_jw_init(&w, &out);
	if (sb->drv->exec_handle(sb, &r, &w, &code, &running, &ig) < 0 || running ||
	    pisb_json_parse(&j, out.s, out.len, &ig) < 0)
		return false;
	pisb_json_int(&j, pisb_json_get(&j, 0, "exitCode"), &ec);
	o = ec == 0 ? pisb_json_str(&j, pisb_json_get(&j, 0, "output")) : NULL;
	pisb_json_release(&j);
	if (o) {
		pisb_buf_adds(b, o);
		ok = sha_is(b, p->sha);
		if (!ok)
			pisb_buf_release(b);
		free(o);
	}
	return ok;
}

/* c's base content into c->base when it can be had and verified. */
static void conflict_base(struct pisb_sandbox *sb, const struct pisb_manifest *m,
			  struct pisb_pchange *c)
{
	const struct pisb_pentry *p = pisb_manifest_find(m, c->path);
	char name[96];

	if (!p)
		return;
	if (p->type == 'l') {
		pisb_buf_adds(&c->base, p->target ? p->target : "");
		c->has_base = sha_is(&c->base, p->sha);
		return;
	}
	snprintf(name, sizeof(name), "project/objects/%s", p->sha);
	if (pisb_read_file_at(sb->idir, name, &c->base, PISB_PROJECT_FILE_MAX) == 0 && sha_is(&c->base, p->sha)) {
		c->has_base = true;
		return;
	}
	pisb_buf_release(&c->base);
	c->has_base = base_from_git(sb, p, &c->base);
}

/* The host's side of a change: whether it moved since the base. */
static int host_state(const struct pisb_pdiff *d, int hostfd, const struct pisb_manifest *m,
		      struct pisb_pchange *c, struct look *h)
{
	const struct pisb_pentry *p = pisb_manifest_find(m, c->path);

	if (look_at(hostfd, c->path, true, h) < 0)
		return -1;
	(void)d;
	c->hseen.type = h->type;
	if (h->type) {
		c->hseen.dev = h->st.st_dev;
		c->hseen.ino = h->st.st_ino;
		c->hseen.size = (long long)h->st.st_size;
		c->hseen.mtime = ns_of(&h->st.st_mtim);
		c->hseen.ctime = ns_of(&h->st.st_ctim);
		c->hseen.mode = h->st.st_mode;
	}
	if (!p) {
		/* added in the sandbox: anything at that path on the host (a
		 * hidden secret, a file made since) that differs is a conflict */
		c->conflict = h->type && !(h->type == c->ntype && !strcmp(h->sha, c->nsha));
		return 0;
	}
	c->conflict = h->type != p->type || h->too_large || strcmp(h->sha, p->sha) ||
		      (p->type == 'f' && (unsigned)(h->st.st_mode & 0777) != p->mode);
	/* both sides made the same change: nothing to decide */
	if (c->conflict && h->type == c->ntype && h->type && !strcmp(h->sha, c->nsha) &&
	    (h->type == 'l' || (unsigned)(h->st.st_mode & 0777) == c->nmode))
		c->conflict = false;
	if (c->conflict && !h->type && !c->ntype)
		c->conflict = false;
	return 0;
}

int pisb_project_diff(struct pisb_sandbox *sb, const struct pisb_pdiff_opts *o,
		      struct pisb_pdiff *d, struct pisb_err *e)
{
	_cleanup_manifest_ struct pisb_manifest m = PISB_MANIFEST_INIT;
	_cleanup_close_ int hostfd = -1;
	int p[2], st;
	pid_t pid;
	int r;

	if (!pisb_driver_has(sb->drv, PISB_V_DIFF))
		return pisb_driver_refuse(sb, PISB_V_DIFF, e);
	if (!pisb_sandbox_record(sb, e))
		return -1;
	if (!(d->dir = pisb_project_dir(sb->idir, e)) || pisb_manifest_load(sb->idir, &m, e) < 0)
		return pisb_err_prefix(e, "sandbox '%s'", sb->name);
	hostfd = open(d->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (hostfd < 0)
		return pisb_err_sys(e, errno == ENOENT ? PISB_EXIT_NOTFOUND : PISB_EXIT_FAIL,
				    "project '%s'", d->dir);
	for (size_t i = 0; o && i < o->npaths; i++)
		if (strcmp(o->paths[i], ".") && !pisb_project_name_ok(o->paths[i]) &&
		    !(pisb_str_ends(o->paths[i], "/") && o->paths[i][0] != '/' && !strstr(o->paths[i], "..")))
			return pisb_err_set(e, PISB_EXIT_USAGE,
					    "'%s': a PATH is relative to the project, without '..' or .git",
					    o->paths[i]);
	if (!sb->drv->project_enter) {
		/* a remote workspace: its archive, read as data; it is made
		 * inside, and diff starts nothing (nor does the driver resume
		 * a sandbox its server paused: it refuses, exit 5); the scan's
		 * errors do not name the sandbox (driver.h): named here */
		if (sb->drv->status(sb) != PISB_ST_RUNNING)
			return pisb_err_set(e, PISB_EXIT_BACKEND,
					    "sandbox '%s' is not running (driver %s: its workspace is read from inside it, "
					    "and diff starts nothing; start it with 'pisb start %s')",
					    sb->name, sb->drv->name, sb->name);
		if (pisb_project_remote_scan(sb, &m, o, d, e) < 0)
			return pisb_err_prefix(e, "sandbox '%s'", sb->name);
		goto host;
	}
	pid = pisb_fork_piped(p, e);
	if (pid < 0)
		return -1;
	if (pid == 0) {
		close(p[0]);
		scan_child(sb, p[1], &m, o);
	}
	close(p[1]);
	r = read_records(p[0], d, e);
	close(p[0]);
	if (r < 0)
		kill(pid, SIGKILL);
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (r < 0)
		return pisb_err_prefix(e, "sandbox '%s'", sb->name);
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		return pisb_err_set(e, PISB_EXIT_FAIL, "sandbox '%s': the workspace reader failed", sb->name);
host:
	if (d->n)
		qsort(d->v, d->n, sizeof(*d->v), cmp_change);
	for (size_t i = 0; i < d->n; i++) {
		struct pisb_pchange *c = &d->v[i];
		struct look h;
		if (host_state(d, hostfd, &m, c, &h) < 0) {
			look_release(&h);
			return pisb_err_sys(e, PISB_EXIT_FAIL, "project '%s': '%s'", d->dir, c->path);
		}
		c->binary = is_binary(&c->content) || (h.type == 'f' && is_binary(&h.content)) ||
			    c->too_large || h.too_large;
		if (c->conflict && c->otype)
			conflict_base(sb, &m, c);
		if (c->has_base) {
			c->binary = c->binary || is_binary(&c->base);
			if (!c->binary)
				pisb_udiff(c->base.s ? c->base.s : "", c->base.len,
					   c->ntype ? (c->content.s ? c->content.s : "") : "",
					   c->ntype ? c->content.len : 0, NULL, &c->added, &c->removed);
		} else if (!c->binary) {
			const char *os = h.type ? h.content.s : NULL;
			size_t on = h.type ? h.content.len : 0;
			if (c->otype && h.type != c->otype)
				os = NULL, on = 0;
			pisb_udiff(os ? os : "", on, c->ntype ? (c->content.s ? c->content.s : "") : "",
				   c->ntype ? c->content.len : 0, NULL, &c->added, &c->removed);
		}
		look_release(&h);
	}
	return 0;
}

/* ---- patches ---- */

/* A name as git prints it: quoted, with C escapes, when it has control
 * characters, '"', '\\' or bytes past ASCII (core.quotePath). */
static void put_name(struct pisb_buf *b, const char *pfx, const char *path)
{
	bool q = false;

	for (const unsigned char *p = (const unsigned char *)path; *p; p++)
		if (*p < 0x20 || *p == '"' || *p == '\\' || *p >= 0x7f)
			q = true;
	if (!q) {
		pisb_buf_adds(b, pfx);
		pisb_buf_adds(b, path);
		return;
	}
	pisb_buf_addc(b, '"');
	pisb_buf_adds(b, pfx);
	for (const unsigned char *p = (const unsigned char *)path; *p; p++) {
		static const char esc[] = "\a\b\t\n\v\f\r";
		static const char let[] = "abtnvfr";
		const char *x = *p ? strchr(esc, *p) : NULL;
		if (x)
			pisb_buf_addf(b, "\\%c", let[x - esc]);
		else if (*p == '"' || *p == '\\')
			pisb_buf_addf(b, "\\%c", *p);
		else if (*p < 0x20 || *p >= 0x7f)
			pisb_buf_addf(b, "\\%03o", *p);
		else
			pisb_buf_addc(b, (char)*p);
	}
	pisb_buf_addc(b, '"');
}

/* One side of a patch header: the quoted name, or /dev/null where that
 * side has no file. */
static void put_side(struct pisb_buf *b, char type, const char *pfx, const char *path)
{
	if (type)
		put_name(b, pfx, path);
	else
		pisb_buf_adds(b, "/dev/null");
}

static unsigned git_mode(char type, unsigned mode)
{
	return type == 'l' ? 0120000 : (mode & 0111) ? 0100755 : 0100644;
}

static void one_patch_as(struct pisb_buf *out, const char *npfx, const char *path, char otype,
			 unsigned omode, const char *os, size_t on, char ntype, unsigned nmode,
			 const char *ns, size_t nn, bool binary)
{
	int a, r;

	pisb_buf_adds(out, "diff --git ");
	put_name(out, "a/", path);
	pisb_buf_addc(out, ' ');
	put_name(out, npfx, path);
	pisb_buf_addc(out, '\n');
	if (!otype)
		pisb_buf_addf(out, "new file mode %o\n", git_mode(ntype, nmode));
	else if (!ntype)
		pisb_buf_addf(out, "deleted file mode %o\n", git_mode(otype, omode));
	else if (git_mode(otype, omode) != git_mode(ntype, nmode))
		pisb_buf_addf(out, "old mode %o\nnew mode %o\n", git_mode(otype, omode),
			      git_mode(ntype, nmode));
	if (otype && ntype && on == nn && (!on || !memcmp(os, ns, on)))
		return;   /* the mode alone */
	if (binary) {
		pisb_buf_adds(out, "Binary files ");
		put_side(out, otype, "a/", path);
		pisb_buf_adds(out, " and ");
		put_side(out, ntype, npfx, path);
		pisb_buf_adds(out, " differ\n");
		return;
	}
	if (!on && !nn)
		return;
	pisb_buf_adds(out, "--- ");
	put_side(out, otype, "a/", path);
	pisb_buf_adds(out, "\n+++ ");
	put_side(out, ntype, npfx, path);
	pisb_buf_addc(out, '\n');
	pisb_udiff(os ? os : "", on, ns ? ns : "", nn, out, &a, &r);
}

static void one_patch(struct pisb_buf *out, const char *path, char otype, unsigned omode,
		      const char *os, size_t on, char ntype, unsigned nmode, const char *ns,
		      size_t nn, bool binary)
{
	one_patch_as(out, "b/", path, otype, omode, os, on, ntype, nmode, ns, nn, binary);
}

int pisb_pchange_patch(const struct pisb_pdiff *d, const struct pisb_pchange *c,
		       struct pisb_buf *out, struct pisb_err *e)
{
	_cleanup_close_ int hostfd = open(d->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct look h;
	char otype;
	unsigned omode;

	if (hostfd < 0)
		return pisb_err_sys(e, PISB_EXIT_FAIL, "project '%s'", d->dir);
	if (look_at(hostfd, c->path, true, &h) < 0) {
		look_release(&h);
		return pisb_err_sys(e, PISB_EXIT_FAIL, "project '%s': '%s'", d->dir, c->path);
	}
	if (c->has_base) {
		/* a conflict: the sandbox's change from the base */
		one_patch(out, c->path, c->otype, c->omode, c->base.s, c->base.len, c->ntype,
			  c->nmode, c->content.s, c->content.len, c->binary);
		look_release(&h);
		return 0;
	}
	/* the old side: the host file (the base while it did not change) */
	otype = h.type == 'o' ? 0 : h.type;
	if (c->status == PISB_P_ADDED && !c->conflict)
		otype = 0;
	omode = otype == 'f' ? (unsigned)(h.st.st_mode & 0777) : c->omode;
	if (otype && c->ntype && otype != c->ntype) {
		/* a type change is a deletion and an addition, as git shows it */
		one_patch(out, c->path, otype, omode, h.content.s, h.content.len, 0, 0, NULL, 0,
			  c->binary);
		one_patch(out, c->path, 0, 0, NULL, 0, c->ntype, c->nmode, c->content.s,
			  c->content.len, c->binary);
	} else {
		one_patch(out, c->path, otype, omode, h.content.s, h.content.len, c->ntype,
			  c->nmode, c->content.s, c->content.len, c->binary);
	}
	look_release(&h);
	return 0;
}

int pisb_pchange_host_patch(const struct pisb_pdiff *d, const struct pisb_pchange *c,
			    struct pisb_buf *out, struct pisb_err *e)
{
	_cleanup_close_ int hostfd = -1;
	struct look h;
	char htype;

	if (!c->conflict || !c->has_base)
		return 0;
	hostfd = open(d->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (hostfd < 0)
		return pisb_err_sys(e, PISB_EXIT_FAIL, "project '%s'", d->dir);
	if (look_at(hostfd, c->path, true, &h) < 0) {
		look_release(&h);
		return pisb_err_sys(e, PISB_EXIT_FAIL, "project '%s': '%s'", d->dir, c->path);
	}
	htype = h.type == 'o' ? 0 : h.type;
	one_patch_as(out, "host/", c->path, c->otype, c->omode, c->base.s, c->base.len, htype,
		     htype == 'f' ? (unsigned)(h.st.st_mode & 0777) : 0777, h.content.s, h.content.len,
		     c->binary || h.too_large || (htype == 'f' && is_binary(&h.content)));
	look_release(&h);
	return 0;
}

static const char *type_word(char t)
{
	return t == 'f' ? "file" : t == 'l' ? "symlink" : t == 'o' ? "other" : NULL;
}

int pisb_pdiff_json(const struct pisb_pdiff *d, bool patches, struct pisb_jw *w,
		    struct pisb_err *e)
{
	pisb_jw_obj(w);
	pisb_jw_kstr(w, "project", d->dir);
	pisb_jw_key(w, "changes");
	pisb_jw_arr(w);
	for (size_t i = 0; i < d->n; i++) {
		const struct pisb_pchange *c = &d->v[i];
		const char *st = c->status == 'A' ? "added" : c->status == 'D' ? "deleted" : "modified";
		pisb_jw_obj(w);
		pisb_jw_kstr(w, "path", c->path);
		pisb_jw_kstr(w, "status", st);
		pisb_jw_kstr(w, "oldType", type_word(c->otype));
		pisb_jw_kstr(w, "newType", type_word(c->ntype));
		if (c->otype)
			pisb_jw_kint(w, "oldMode", git_mode(c->otype, c->omode));
		else
			pisb_jw_kstr(w, "oldMode", NULL);
		if (c->ntype)
			pisb_jw_kint(w, "newMode", git_mode(c->ntype, c->nmode));
		else
			pisb_jw_kstr(w, "newMode", NULL);
		pisb_jw_kbool(w, "binary", c->binary);
		pisb_jw_kbool(w, "conflict", c->conflict);
		pisb_jw_kint(w, "added", c->added);
		pisb_jw_kint(w, "removed", c->removed);
		if (patches) {
			_cleanup_buf_ struct pisb_buf p = PISB_BUF_INIT;
			_cleanup_buf_ struct pisb_buf hp = PISB_BUF_INIT;
			if (pisb_pchange_patch(d, c, &p, e) < 0 || pisb_pchange_host_patch(d, c, &hp, e) < 0)
				return -1;
			pisb_jw_kstr(w, "patch", p.s ? p.s : "");
			pisb_jw_kstr(w, "hostPatch", c->has_base ? (hp.s ? hp.s : "") : NULL);
		}
		pisb_jw_obj_end(w);
	}
	pisb_jw_arr_end(w);
	pisb_jw_kint(w, "unchanged", d->unchanged);
	pisb_jw_obj_end(w);
	return 0;
}

int pisb_pdiff_text(const struct pisb_pdiff *d, bool stat, struct pisb_buf *out,
		    struct pisb_err *e)
{
	long long add = 0, rem = 0;
	int wn = 0, wc = 1;

	for (size_t i = 0; stat && i < d->n; i++) {
		_cleanup_buf_ struct pisb_buf nb = PISB_BUF_INIT;
		char num[32];
		put_name(&nb, "", d->v[i].path);
		if ((int)nb.len > wn)
			wn = (int)nb.len;
		if (snprintf(num, sizeof(num), "%d", d->v[i].added + d->v[i].removed) > wc)
			wc = (int)strlen(num);
	}
	if (stat && d->n && wc < 3)
		for (size_t i = 0; i < d->n; i++)
			if (d->v[i].binary)
				wc = 3;
	for (size_t i = 0; i < d->n; i++) {
		const struct pisb_pchange *c = &d->v[i];
		_cleanup_buf_ struct pisb_buf nb = PISB_BUF_INIT;
		if (!stat) {
			if (pisb_pchange_patch(d, c, out, e) < 0 || pisb_pchange_host_patch(d, c, out, e) < 0)
				return -1;
			continue;
		}
		put_name(&nb, "", c->path);
		pisb_buf_addf(out, " %-*s", wn, nb.s);
		if (c->binary)
			pisb_buf_addf(out, " | %*s", wc, "Bin");
		else
			pisb_buf_addf(out, " | %*d %.*s%.*s", wc, c->added + c->removed,
				      c->added > 50 ? 50 : c->added, "++++++++++++++++++++++++++++++++++++++++++++++++++",
				      c->removed > 50 ? 50 : c->removed, "--------------------------------------------------");
		if (c->conflict)
			pisb_buf_adds(out, " (conflict: changed on the host too)");
		pisb_buf_addc(out, '\n');
		add += c->added;
		rem += c->removed;
	}
	if (stat && d->n)
		pisb_buf_addf(out, " %zu file%s changed, %lld insertion%s(+), %lld deletion%s(-)\n", d->n,
			      d->n == 1 ? "" : "s", add, add == 1 ? "" : "s", rem, rem == 1 ? "" : "s");
	return 0;
}

/* ---- apply ---- */

/* A symlink target that stays inside the project from rel's directory. */
static bool link_inside(const char *rel, const char *t)
{
	int depth = 0;

	if (!*t || t[0] == '/')
		return false;
	for (const char *p = rel; (p = strchr(p, '/')); p++)
		depth++;
	for (const char *p = t; *p;) {
		size_t n = strcspn(p, "/");
		if (n == 2 && p[0] == '.' && p[1] == '.') {
			if (--depth < 0)
				return false;
		} else if (n && !(n == 1 && p[0] == '.')) {
			if (n == 4 && !strncasecmp(p, ".git", 4))
				return false;
			depth++;
		}
		p += n;
		if (*p == '/')
			p++;
	}
	return true;
}

/* The parent directory of rel in the project, made if missing (mkdirs;
 * each directory made is pushed on made, relative to the project), never
 * through a symlink; 1 when something that is no directory is in the way. */
static int project_parent(int hostfd, const char *rel, bool mkdirs, struct pisb_strv *made, int *out)
{
	const char *slash = strrchr(rel, '/');
	_cleanup_free_ char *p = slash ? xstrndup(rel, (size_t)(slash - rel)) : NULL;
	int fd = fcntl(hostfd, F_DUPFD_CLOEXEC, 3);

	for (char *s = p, *sl; fd >= 0 && s && *s; s = sl ? sl + 1 : NULL) {
		int sub;
		struct stat st;
		sl = strchr(s, '/');
		if (sl)
			*sl = '\0';
		if (fstatat(fd, s, &st, AT_SYMLINK_NOFOLLOW) == 0) {
			if (!S_ISDIR(st.st_mode)) {
				close(fd);
				return 1;
			}
		} else if (errno == ENOENT && mkdirs) {
			if (mkdirat(fd, s, 0755) == 0) {
				if (made)
					pisb_strv_push(made, p);   /* p ends at s: the path so far */
			} else if (errno != EEXIST) {
				close(fd);
				return -1;
			}
		} else if (errno == ENOENT) {
			close(fd);
			*out = -1;
			return 0;   /* would be made */
		} else {
			close(fd);
			return -1;
		}
		sub = openat(fd, s, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		close(fd);
		if (sub < 0)
			return errno == ENOTDIR || errno == ELOOP ? 1 : -1;
		fd = sub;
		if (sl)
			*sl = '/';
	}
	if (fd < 0)
		return -1;
	*out = fd;
	return 0;
}

/* Check one change against the project: 0 fine, -1 with e. */
static int apply_check(const struct pisb_pdiff *d, int hostfd, const struct pisb_pchange *c,
		       bool force, struct pisb_err *e)
{
	_cleanup_close_ int pfd = -1;
	const char *name = strrchr(c->path, '/');
	struct stat st;
	int r;

	name = name ? name + 1 : c->path;
	if (!pisb_project_name_ok(c->path))
		return pisb_err_set(e, PISB_EXIT_FAIL, "'%s': a name that leaves the project", c->path);
	if (c->conflict && !force)
		return pisb_err_set(e, PISB_EXIT_BUSY,
				    "'%s' changed in '%s' since the base too: a conflict (see 'pisb diff'; "
				    "--force overwrites it)", c->path, d->dir);
	if (c->ntype == 'o')
		return pisb_err_set(e, PISB_EXIT_FAIL, "'%s': not a file or a symlink in the sandbox", c->path);
	if (c->ntype == 'f' && (c->too_large || c->content.len != (size_t)c->nsize))
		return pisb_err_set(e, PISB_EXIT_FAIL, "'%s' is larger than %lld bytes: apply copies no such file",
				    c->path, (long long)PISB_PROJECT_FILE_MAX);
	if (c->ntype == 'l' && (!c->ntarget || !link_inside(c->path, c->ntarget)))
		return pisb_err_set(e, PISB_EXIT_FAIL, "'%s': a symlink that points outside the project ('%s')",
				    c->path, c->ntarget ? c->ntarget : "");
	r = project_parent(hostfd, c->path, false, NULL, &pfd);
	if (r == 1)
		return pisb_err_set(e, PISB_EXIT_FAIL,
				    "'%s': something on its way in the project is no directory (a symlink or a file)",
				    c->path);
	if (r < 0)
		return pisb_err_sys(e, PISB_EXIT_FAIL, "'%s' in '%s'", c->path, d->dir);
	if (pfd >= 0 && fstatat(pfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode))
		return pisb_err_set(e, PISB_EXIT_FAIL, "'%s' is a directory in the project: apply replaces no directory",
				    c->path);
	return 0;
}

/* ---- apply: stage everything, then rename everything, or nothing ----
 *
 * 1. stage: each new file or symlink is written in full (fsync) under a
 *    temp name, .pisb-apply.HEX, in its own directory (made if missing);
 * 2. commit: each staged name is renamed over its target, the target's
 *    old version kept under .pisb-apply.HEX.old (an exchange where the
 *    filesystem has RENAME_EXCHANGE, else a hard link, then the rename);
 *    a deletion renames the target to its .old name;
 * 3. done: the .old names go.
 * A failure in 1 or 2 undoes what was done in reverse (old versions
 * renamed back, new files and made directories removed): the checkout is
 * as it was.  A kill -9 leaves each file old or new, never partial (and
 * maybe a .pisb-apply.* name beside it). */
struct stage {
	char tmp[48];     /* the staged new version, while it is not renamed */
	char old[56];     /* where the old version is kept, when kept */
	bool staged, committed, kept;
	struct stat st;   /* the new version, once committed */
};

static void stage_names(struct stage *s)
{
	uint64_t rnd = 0;

	(void)!getrandom(&rnd, sizeof(rnd), 0);
	snprintf(s->tmp, sizeof(s->tmp), ".pisb-apply.%016llx", (unsigned long long)rnd);
	snprintf(s->old, sizeof(s->old), ".pisb-apply.%016llx.old", (unsigned long long)rnd);
}

static const char *base_name(const char *rel)
{
	const char *name = strrchr(rel, '/');

	return name ? name + 1 : rel;
}

/* Write c's new version under s->tmp in its directory. */
static int stage_one(int hostfd, const struct pisb_pchange *c, struct stage *s,
		     struct pisb_strv *made, struct pisb_err *e)
{
	_cleanup_close_ int pfd = -1;
	_cleanup_close_ int fd = -1;

	if (project_parent(hostfd, c->path, true, made, &pfd) != 0 || pfd < 0)
		return pisb_err_sys(e, PISB_EXIT_FAIL, "'%s': make its directory", c->path);
	if (c->ntype == 'l') {
		if (symlinkat(c->ntarget, pfd, s->tmp) < 0)
			return pisb_err_sys(e, PISB_EXIT_FAIL, "stage '%s'", c->path);
		s->staged = true;
		return 0;
	}
	fd = openat(pfd, s->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return pisb_err_sys(e, PISB_EXIT_FAIL, "stage '%s'", c->path);
	s->staged = true;
	if (pisb_write_all(fd, c->content.s ? c->content.s : "", c->content.len) < 0 ||
	    fchmod(fd, c->nmode & 0777) < 0 || fsync(fd) < 0)
		return pisb_err_sys(e, PISB_EXIT_FAIL, "stage '%s'", c->path);
	return 0;
}

/* Is st (NULL: nothing there) still the host file diff's check saw?
 * Before a rename: all of it, ctime too (a chmod, a write that put the
 * mtime back); after it (a rename sets the ctime): the same inode, size
 * and mtime. */
static bool still_seen(const struct pisb_pchange *c, const struct stat *st, bool ctime)
{
	const struct pisb_pseen *h = &c->hseen;
	char t;

	if (!st)
		return !h->type;
	t = S_ISREG(st->st_mode) ? 'f' : S_ISLNK(st->st_mode) ? 'l' : 'o';
	return h->type == t && h->dev == st->st_dev && h->ino == st->st_ino &&
	       h->size == (long long)st->st_size && h->mtime == ns_of(&st->st_mtim) &&
	       h->mode == st->st_mode && (!ctime || h->ctime == ns_of(&st->st_ctim));
}

/* The old version kept under s->old right after the rename that put it
 * there: the file the check saw? */
static bool kept_is_seen(int pfd, const struct pisb_pchange *c, const struct stage *s)
{
	struct stat st;

	return fstatat(pfd, s->old, &st, AT_SYMLINK_NOFOLLOW) == 0 && still_seen(c, &st, false);
}

static int changed_meanwhile(const struct pisb_pchange *c, struct pisb_err *e)
{
	return pisb_err_set(e, PISB_EXIT_BUSY,
			    "'%s' changed in the project while apply ran (after its check): a conflict "
			    "(see 'pisb diff', then apply again)", c->path);
}

/* Put c's staged version (or its deletion) in place, keeping the old one;
 * only over the host file the check saw (still_seen), else a conflict. */
static int commit_one(int hostfd, const struct pisb_pchange *c, struct stage *s, struct pisb_err *e)
{
	_cleanup_close_ int pfd = -1;
	const char *name = base_name(c->path);
	struct stat st;
	bool there;

	if (project_parent(hostfd, c->path, false, NULL, &pfd) != 0)
		return pisb_err_set(e, PISB_EXIT_FAIL,
				    "'%s': something on its way in the project is no directory", c->path);
	if (pfd < 0) {
		if (c->ntype)
			return pisb_err_set(e, PISB_EXIT_FAIL, "'%s': its directory went away", c->path);
		return 0;   /* deleted, and so is its directory */
	}
	there = fstatat(pfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0;
	if (there && S_ISDIR(st.st_mode))
		return pisb_err_set(e, PISB_EXIT_FAIL,
				    "'%s' is a directory in the project: apply replaces no directory", c->path);
	if (!c->ntype) {
		if (!there)
			return 0;
		if (!still_seen(c, &st, true))
			return changed_meanwhile(c, e);
		if (renameat2(pfd, name, pfd, s->old, RENAME_NOREPLACE) < 0)
			return pisb_err_sys(e, PISB_EXIT_FAIL, "delete '%s'", c->path);
		s->kept = s->committed = true;
		if (!kept_is_seen(pfd, c, s))
			return changed_meanwhile(c, e);   /* undo_one puts it back */
		pisb_fsync_dir(pfd);
		return 0;
	}
	if (!still_seen(c, there ? &st : NULL, true))
		return changed_meanwhile(c, e);
	if (!there) {
		/* no replacing: a file made since the stat is a conflict too */
		if (renameat2(pfd, s->tmp, pfd, name, RENAME_NOREPLACE) < 0) {
			if (errno == EEXIST)
				return changed_meanwhile(c, e);
			if (errno != EINVAL || renameat(pfd, s->tmp, pfd, name) < 0)
				return pisb_err_sys(e, PISB_EXIT_FAIL, "write '%s'", c->path);
		}
	} else if (renameat2(pfd, s->tmp, pfd, name, RENAME_EXCHANGE) == 0) {
		/* one step: name is the new version, tmp the old */
		memcpy(s->old, s->tmp, sizeof(s->tmp));
		s->kept = s->committed = true;
		s->staged = false;
		/* the very file displaced is checked: one renamed in between
		 * the stat and the exchange is caught here */
		if (!kept_is_seen(pfd, c, s))
			return changed_meanwhile(c, e);   /* undo_one exchanges back */
	} else {
		if (errno != EINVAL || linkat(pfd, name, pfd, s->old, 0) < 0)
			return pisb_err_sys(e, PISB_EXIT_FAIL, "write '%s'", c->path);
		s->kept = true;
		if (!kept_is_seen(pfd, c, s)) {
			unlinkat(pfd, s->old, 0);
			s->kept = false;
			return changed_meanwhile(c, e);
		}
		/* rename replaces the name (a symlink itself, never what it
		 * points to) in one step: the file is old or new, never half */
		if (renameat(pfd, s->tmp, pfd, name) < 0) {
			int err = errno;
			unlinkat(pfd, s->old, 0);
			s->kept = false;
			errno = err;
			return pisb_err_sys(e, PISB_EXIT_FAIL, "write '%s'", c->path);
		}
	}
	s->staged = false;
	s->committed = true;
	pisb_fsync_dir(pfd);
	if (fstatat(pfd, name, &s->st, AT_SYMLINK_NOFOLLOW) < 0)
		return pisb_err_sys(e, PISB_EXIT_FAIL, "stat '%s'", c->path);
	return 0;
}

/* Undo one change's commit and staging (best effort, each step on its own). */
static void undo_one(int hostfd, const struct pisb_pchange *c, struct stage *s)
{
	_cleanup_close_ int pfd = -1;
	const char *name = base_name(c->path);

	if (project_parent(hostfd, c->path, false, NULL, &pfd) != 0 || pfd < 0)
		return;
	if (s->committed && s->kept)
		renameat(pfd, s->old, pfd, name);   /* the old version back */
	else if (s->committed && c->ntype)
		unlinkat(pfd, name, 0);              /* it was not there before */
	if (s->staged)
		unlinkat(pfd, s->tmp, 0);
	s->staged = s->committed = s->kept = false;
	pisb_fsync_dir(pfd);
}

/* After the last commit: the old versions go. */
static void finish_one(int hostfd, const struct pisb_pchange *c, struct stage *s)
{
	_cleanup_close_ int pfd = -1;

	if (!s->kept || project_parent(hostfd, c->path, false, NULL, &pfd) != 0 || pfd < 0)
		return;
	unlinkat(pfd, s->old, 0);
}

/* Apply d's changes to the project at hostfd, all or none. */
static int apply_all(int hostfd, struct pisb_pdiff *d, struct stage *sv, struct pisb_err *e)
{
	_cleanup_strv_ struct pisb_strv made = PISB_STRV_INIT;
	size_t i = 0;
	int r = 0;

	for (i = 0; i < d->n; i++)
		stage_names(&sv[i]);
	for (i = 0; i < d->n && r == 0; i++)
		if (d->v[i].ntype)
			r = stage_one(hostfd, &d->v[i], &sv[i], &made, e);
	for (i = 0; i < d->n && r == 0; i++)
		r = commit_one(hostfd, &d->v[i], &sv[i], e);
	if (r == 0) {
		for (i = 0; i < d->n; i++)
			finish_one(hostfd, &d->v[i], &sv[i]);
		return 0;
	}
	for (i = d->n; i-- > 0;)
		undo_one(hostfd, &d->v[i], &sv[i]);
	for (i = made.n; i-- > 0;)
		unlinkat(hostfd, made.v[i], AT_REMOVEDIR);
	return pisb_err_prefix(e, "apply (nothing was written: the project is as it was)");
}

static int cmp_pentry(const void *a, const void *b)
{
	return strcmp(((const struct pisb_pentry *)a)->path, ((const struct pisb_pentry *)b)->path);
}

/* Record what apply wrote: deletions marked (type 0) in m, new paths in
 * add (m stays sorted for lookups until base_merge). */
static void base_update(struct pisb_manifest *m, struct pisb_manifest *add,
			const struct pisb_pchange *c, const struct stat *st)
{
	struct pisb_pentry *q = (struct pisb_pentry *)pisb_manifest_find(m, c->path);

	if (!c->ntype) {
		if (q)
			q->type = 0;
		return;
	}
	if (!q) {
		add->v = pisb_grow(add->v, add->n, &add->cap, sizeof(*add->v), 64);
		q = &add->v[add->n++];
		memset(q, 0, sizeof(*q));
		q->path = xstrdup(c->path);
	}
	free(q->target);
	q->target = c->ntype == 'l' ? xstrdup(c->ntarget) : NULL;
	q->type = c->ntype;
	q->mode = c->ntype == 'l' ? 0777 : c->nmode;
	q->size = c->nsize;
	q->mtime = c->nmtime;
	q->hsize = (long long)st->st_size;
	q->hmtime = ns_of(&st->st_mtim);
	memcpy(q->sha, c->nsha, 65);
}

static void base_merge(struct pisb_manifest *m, struct pisb_manifest *add)
{
	size_t k = 0;

	for (size_t i = 0; i < m->n; i++) {
		if (m->v[i].type) {
			m->v[k++] = m->v[i];
			continue;
		}
		free(m->v[i].path);
		free(m->v[i].target);
	}
	m->n = k;
	for (size_t i = 0; i < add->n; i++) {
		m->v = pisb_grow(m->v, m->n, &m->cap, sizeof(*m->v), 64);
		m->v[m->n++] = add->v[i];
	}
	free(add->v);
	add->v = NULL;
	add->n = add->cap = 0;
	if (m->n)
		qsort(m->v, m->n, sizeof(*m->v), cmp_pentry);
}

int pisb_project_apply(struct pisb_sandbox *sb, const struct pisb_apply_opts *o,
		       struct pisb_pdiff *d, struct pisb_apply_result *r, struct pisb_err *e)
{
	struct pisb_pdiff_opts dopt = { o->paths, o->npaths, false };
	_cleanup_manifest_ struct pisb_manifest m = PISB_MANIFEST_INIT;
	_cleanup_manifest_ struct pisb_manifest add = PISB_MANIFEST_INIT;
	_cleanup_close_ int hostfd = -1, lock = -1;
	_cleanup_free_ struct stage *sv = NULL;
	char what[96];

	memset(r, 0, sizeof(*r));
	snprintf(what, sizeof(what), "the project of sandbox '%s'", sb->name);
	/* one apply at a time per sandbox: the base is read, then written */
	if ((lock = pisb_lock_acquire(sb->idir, "project.lock", true, 0, what, e)) < 0)
		return -1;
	if (pisb_project_diff(sb, &dopt, d, e) < 0 || pisb_manifest_load(sb->idir, &m, e) < 0)
		return -1;
	hostfd = open(d->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (hostfd < 0)
		return pisb_err_sys(e, PISB_EXIT_FAIL, "project '%s'", d->dir);
	/* every check before the first write: a refusal writes nothing */
	for (size_t i = 0; i < d->n; i++)
		if (apply_check(d, hostfd, &d->v[i], o->force, e) < 0)
			return pisb_err_prefix(e, "apply");
	if (o->dry_run) {
		for (size_t i = 0; i < d->n; i++)
			d->v[i].ntype ? r->written++ : r->deleted++;
		return 0;
	}
	sv = xcalloc(d->n ? d->n : 1, sizeof(*sv));
	if (apply_all(hostfd, d, sv, e) < 0)
		return -1;
	for (size_t i = 0; i < d->n; i++) {
		struct pisb_pchange *c = &d->v[i];

		c->ntype ? r->written++ : r->deleted++;
		/* the base moves forward for this path */
		base_update(&m, &add, c, &sv[i].st);
		if (c->ntype == 'f' && !c->too_large)
			base_keep(sb->idir, c->nsha, &c->content);
	}
	base_merge(&m, &add);
	{
		struct pisb_err se = PISB_ERR_INIT;
		if (pisb_manifest_save(sb->idir, &m, &se) < 0) {
			*e = se;
			return pisb_err_prefix(e, "apply: the files were written, but the base was not moved");
		}
	}
	return 0;
}

/* ---- sync ---- */

static int strcmp_p(const char *const *a, const char *const *b)
{
	return strcmp(*a, *b);
}

void pisb_sync_result_release(struct pisb_sync_result *r)
{
	pisb_strv_release(&r->conflicts);
}

/* One host change to bring in. */
struct bring {
	char *path;
	char type;                /* 'f', 'l', or 0: delete */
	unsigned mode;
	struct pisb_buf content;  /* file content or link target */
	char sha[65];
	struct stat hst;          /* the host file's */
	int64_t wmtime;           /* out: the workspace copy's mtime */
	long long wsize;
	bool ok;
};

/* Inside: write (or delete) one path under wsfd, never through a symlink. */
static int bring_one(int wsfd, struct bring *b)
{
	const char *slash = strrchr(b->path, '/');
	const char *name = slash ? slash + 1 : b->path;
	_cleanup_close_ int pfd = -1;
	char tmp[64];
	uint64_t rnd = 0;
	struct stat st;

	if (slash) {
		_cleanup_free_ char *parent = xstrndup(b->path, (size_t)(slash - b->path));
		int fd = fcntl(wsfd, F_DUPFD_CLOEXEC, 3);
		for (char *s = parent, *sl; fd >= 0 && s && *s; s = sl ? sl + 1 : NULL) {
			int sub;
			sl = strchr(s, '/');
			if (sl)
				*sl = '\0';
			if (b->type && mkdirat(fd, s, 0755) < 0 && errno != EEXIST) {
				close(fd);
				return -1;
			}
			sub = openat(fd, s, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			close(fd);
			fd = sub;
		}
		if (fd < 0)
			return b->type ? -1 : 0;
		pfd = fd;
	} else {
		pfd = fcntl(wsfd, F_DUPFD_CLOEXEC, 3);
	}
	if (!b->type)
		return unlinkat(pfd, name, 0) < 0 && errno != ENOENT ? -1 : 0;
	if (fstatat(pfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode))
		return -1;
	(void)!getrandom(&rnd, sizeof(rnd), 0);
	snprintf(tmp, sizeof(tmp), ".pisb-sync.%016llx", (unsigned long long)rnd);
	if (b->type == 'l') {
		_cleanup_free_ char *t = xstrndup(b->content.s ? b->content.s : "", b->content.len);
		if (symlinkat(t, pfd, tmp) < 0)
			return -1;
	} else {
		_cleanup_close_ int fd = openat(pfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
						0600);
		if (fd < 0)
			return -1;
		if (pisb_write_all(fd, b->content.s ? b->content.s : "", b->content.len) < 0 ||
		    fchmod(fd, b->mode & 0777) < 0) {
			unlinkat(pfd, tmp, 0);
			return -1;
		}
	}
	if (renameat(pfd, tmp, pfd, name) < 0) {
		unlinkat(pfd, tmp, 0);
		return -1;
	}
	if (fstatat(pfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return -1;
	b->wmtime = ns_of(&st.st_mtim);
	b->wsize = (long long)st.st_size;
	return 0;
}

/* The child: into the sandbox, each change, one result record each. */
static void __attribute__((noreturn)) sync_child(struct pisb_sandbox *sb, int fd, struct bring *v,
						  size_t n)
{
	struct pisb_err e = PISB_ERR_INIT;
	_cleanup_free_ char *ws = NULL;
	int root = -1, wsfd;

	signal(SIGPIPE, SIG_DFL);
	if (sb->drv->project_enter(sb, &root, &ws, &e) < 0)
		_exit(2);
	wsfd = pisb_fs_resolve(root, ws, O_RDONLY | O_DIRECTORY, 0);
	if (wsfd < 0)
		_exit(2);
	for (size_t i = 0; i < n; i++) {
		struct { uint8_t ok; int64_t mtime, size; } rec = { 0, 0, 0 };
		if (bring_one(wsfd, &v[i]) == 0) {
			rec.ok = 1;
			rec.mtime = v[i].wmtime;
			rec.size = v[i].wsize;
		}
		if (pisb_write_all(fd, &rec, sizeof(rec)) < 0)
			_exit(1);
	}
	_exit(0);
}

int pisb_project_sync(struct pisb_sandbox *sb, struct pisb_sync_result *r, struct pisb_err *e)
{
	struct pisb_pdiff_opts dopt = { NULL, 0, false };
	_cleanup_pdiff_ struct pisb_pdiff d = PISB_PDIFF_INIT;
	_cleanup_manifest_ struct pisb_manifest m = PISB_MANIFEST_INIT;
	_cleanup_manifest_ struct pisb_manifest add = PISB_MANIFEST_INIT;
	_cleanup_strv_ struct pisb_strv sel = PISB_STRV_INIT;
	_cleanup_close_ int hostfd = -1, lock = -1;
	const struct pisb_config *cfg;
	struct bring *v = NULL;
	size_t n = 0, cap = 0;
	long long hidden = 0;
	char what[96];
	int ret = 0, p[2], st;
	pid_t pid;

	memset(r, 0, sizeof(*r));
	if (!pisb_driver_has(sb->drv, PISB_V_DIFF))
		return pisb_driver_refuse(sb, PISB_V_DIFF, e);
	if (sb->drv->status(sb) != PISB_ST_RUNNING)
		return pisb_err_set(e, PISB_EXIT_BACKEND,
				    "sandbox '%s' is not running (start it with 'pisb start %s')", sb->name, sb->name);
	snprintf(what, sizeof(what), "the project of sandbox '%s'", sb->name);
	if ((lock = pisb_lock_acquire(sb->idir, "project.lock", true, 0, what, e)) < 0)
		return -1;
	if (!(cfg = pisb_sandbox_config(sb, e)) || pisb_project_diff(sb, &dopt, &d, e) < 0 ||
	    pisb_manifest_load(sb->idir, &m, e) < 0)
		return -1;
	hostfd = open(d.dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (hostfd < 0 || pisb_project_select(d.dir, hostfd, &cfg->project, &sel, &hidden, e) < 0)
		return hostfd < 0 ? pisb_err_sys(e, PISB_EXIT_FAIL, "project '%s'", d.dir) : -1;
	/* every path of the base or of the host's selection, once */
	for (size_t i = 0; i < m.n; i++)
		pisb_strv_push(&sel, m.v[i].path);
	if (sel.n)
		qsort(sel.v, sel.n, sizeof(char *), (int (*)(const void *, const void *))strcmp_p);
	for (size_t i = 0; i < sel.n; i++) {
		const char *path = sel.v[i];
		const struct pisb_pentry *b = pisb_manifest_find(&m, path);
		const struct pisb_pchange *sc = NULL;
		struct look h;
		bool changed;

		if (i && !strcmp(path, sel.v[i - 1]))
			continue;
		if (look_at(hostfd, path, true, &h) < 0) {
			look_release(&h);
			ret = pisb_err_sys(e, PISB_EXIT_FAIL, "project '%s': '%s'", d.dir, path);
			goto out;
		}
		if (h.type == 'o' || h.too_large)
			h.type = h.type == 'o' ? 0 : h.type;
		changed = b ? (h.type != b->type || (h.type && strcmp(h.sha, b->sha)) ||
			       (h.type == 'f' && (unsigned)(h.st.st_mode & 0777) != b->mode))
			    : h.type != 0;
		if (!changed || h.too_large) {
			look_release(&h);
			continue;
		}
		for (size_t k = 0; k < d.n; k++)
			if (!strcmp(d.v[k].path, path))
				sc = &d.v[k];
		if (sc) {
			bool same = sc->ntype == h.type &&
				    (!h.type || (!strcmp(sc->nsha, h.sha) &&
						 (h.type == 'l' || sc->nmode == (unsigned)(h.st.st_mode & 0777))));
			if (!same) {
				pisb_strv_push(&r->conflicts, path);
				look_release(&h);
				continue;
			}
		}
		if (n == cap)
			v = xrealloc(v, (cap = cap ? 2 * cap : 32) * sizeof(*v));
		memset(&v[n], 0, sizeof(v[n]));
		v[n].path = xstrdup(path);
		v[n].type = h.type;
		v[n].mode = h.type == 'f' ? (unsigned)(h.st.st_mode & 0777) : 0777;
		v[n].content = h.content;
		h.content = (struct pisb_buf)PISB_BUF_INIT;
		memcpy(v[n].sha, h.sha, 65);
		v[n].hst = h.st;
		if (sc) {
			/* the same on both sides: the base alone moves */
			v[n].ok = true;
			v[n].wmtime = sc->nmtime;
			v[n].wsize = sc->nsize;
			r->based++;
		}
		n++;
		look_release(&h);
	}
	if (pipe2(p, O_CLOEXEC) < 0) {
		ret = pisb_err_sys(e, PISB_EXIT_FAIL, "pipe");
		goto out;
	}
	{
		/* only what is to be written goes to the child */
		_cleanup_free_ struct bring *todo = xcalloc(n + 1, sizeof(*todo));
		_cleanup_free_ size_t *idx = xcalloc(n + 1, sizeof(*idx));
		size_t nt = 0;
		for (size_t i = 0; i < n; i++)
			if (!v[i].ok) {
				idx[nt] = i;
				todo[nt++] = v[i];
			}
		if (!sb->drv->project_enter) {
			/* a remote workspace: the driver's write and exec */
			close(p[0]);
			close(p[1]);
			for (size_t i = 0; i < nt; i++) {
				struct bring *b = &v[idx[i]];
				struct pisb_err pe = PISB_ERR_INIT;
				if (pisb_project_remote_put(sb, b->path, b->type, b->mode, &b->content, &pe) < 0) {
					pisb_strv_push(&r->conflicts, b->path);
					continue;
				}
				b->ok = true;
				b->wmtime = 0;   /* unknown: the next diff hashes it */
				b->wsize = (long long)b->content.len;
				b->type ? r->written++ : r->deleted++;
			}
			goto moved;
		}
		pid = fork();
		if (pid < 0) {
			close(p[0]);
			close(p[1]);
			ret = pisb_err_sys(e, PISB_EXIT_FAIL, "fork");
			goto out;
		}
		if (pid == 0) {
			close(p[0]);
			sync_child(sb, p[1], todo, nt);
		}
		close(p[1]);
		for (size_t i = 0; i < nt; i++) {
			struct { uint8_t ok; int64_t mtime, size; } rec;
			if (pisb_read_all(p[0], &rec, sizeof(rec)) != (ssize_t)sizeof(rec))
				break;
			if (!rec.ok) {
				pisb_strv_push(&r->conflicts, v[idx[i]].path);
				continue;
			}
			v[idx[i]].ok = true;
			v[idx[i]].wmtime = rec.mtime;
			v[idx[i]].wsize = rec.size;
			v[idx[i]].type ? r->written++ : r->deleted++;
		}
		close(p[0]);
		while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
			;
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
			pisb_err_set(e, PISB_EXIT_FAIL, "sandbox '%s': the workspace writer failed", sb->name);
	}
moved:
	/* the base moves forward for what now matches on both sides */
	for (size_t i = 0; i < n; i++) {
		struct pisb_pchange c;
		struct stat hs = v[i].hst;
		if (!v[i].ok)
			continue;
		memset(&c, 0, sizeof(c));
		c.path = v[i].path;
		c.ntype = v[i].type;
		c.nmode = v[i].mode;
		c.nsize = v[i].wsize;
		c.nmtime = v[i].wmtime;
		c.ntarget = v[i].type == 'l' ? xstrndup(v[i].content.s ? v[i].content.s : "", v[i].content.len) : NULL;
		memcpy(c.nsha, v[i].sha, 65);
		base_update(&m, &add, &c, &hs);
		if (v[i].type == 'f')
			base_keep(sb->idir, v[i].sha, &v[i].content);
		free(c.ntarget);
	}
	base_merge(&m, &add);
	if (pisb_manifest_save(sb->idir, &m, e) < 0)
		ret = -1;
	else if (e->msg[0])
		ret = -1;
	else if (r->conflicts.n)
		ret = pisb_err_set(e, PISB_EXIT_BUSY, "sync '%s': %zu file%s changed on both sides (left alone)",
				   sb->name, r->conflicts.n, r->conflicts.n == 1 ? "" : "s");
out:
	for (size_t i = 0; i < n; i++) {
		free(v[i].path);
		pisb_buf_release(&v[i].content);
	}
	free(v);
	return ret;
}
