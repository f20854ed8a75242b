/* project.c - the base copy of a project and its manifest; see project.h.
 * (diff and apply: project_diff.c) */
#include "project.h"
#include "project_internal.h"
#include "config.h"
#include "driver.h"
#include "err.h"
#include "exec.h"
#include "gitindex.h"
#include "glob.h"
#include "ignore.h"
#include "json.h"
#include "sha256.h"
#include "state.h"
#include "util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ---- the manifest ---- */

void pisb_manifest_release(struct pisb_manifest *m)
{
	for (size_t i = 0; i < m->n; i++) {
		free(m->v[i].path);
		free(m->v[i].target);
	}
	free(m->v);
	m->v = NULL;
	m->n = m->cap = 0;
}

static struct pisb_pentry *manifest_add(struct pisb_manifest *m)
{
	m->v = pisb_grow(m->v, m->n, &m->cap, sizeof(*m->v), 256);
	memset(&m->v[m->n], 0, sizeof(m->v[0]));
	return &m->v[m->n++];
}

static int cmp_entry(const void *a, const void *b)
{
	return strcmp(((const struct pisb_pentry *)a)->path, ((const struct pisb_pentry *)b)->path);
}

const struct pisb_pentry *pisb_manifest_find(const struct pisb_manifest *m, const char *path)
{
	struct pisb_pentry key = { .path = (char *)path };

	return m->n ? bsearch(&key, m->v, m->n, sizeof(key), cmp_entry) : NULL;
}

int pisb_manifest_save(int idir, const struct pisb_manifest *m, struct pisb_err *e)
{
	_cleanup_buf_ struct pisb_buf b = PISB_BUF_INIT;

	pisb_buf_adds(&b, "pisb-base 1\n");
	for (size_t i = 0; i < m->n; i++) {
		const struct pisb_pentry *p = &m->v[i];
		pisb_buf_addf(&b, "%c %o %lld %lld %lld %lld %s", p->type, p->mode, p->size,
			      (long long)p->mtime, p->hsize, (long long)p->hmtime, p->sha);
		pisb_buf_addc(&b, '\0');
		pisb_buf_add(&b, p->path, strlen(p->path) + 1);
		pisb_buf_add(&b, p->target ? p->target : "", (p->target ? strlen(p->target) : 0) + 1);
	}
	if (pisb_mkdirs_at(idir, "project", 0700, e) < 0 ||
	    pisb_atomic_write(idir, "project/base", b.s, b.len, 0600, e) < 0)
		return pisb_err_prefix(e, "save the project's base");
	return 0;
}

/* One decimal (octal: base 8) number and the space after it, at *p. */
static int parse_num(const char **p, int base, long long *out)
{
	const char *s = *p;
	bool neg = *s == '-';
	/* no division per digit (it was most of the base's loading) */
	const long long lim = base == 8 ? (LLONG_MAX - 9) / 8 : (LLONG_MAX - 9) / 10;
	long long v = 0;

	if (neg)
		s++;
	if (*s < '0' || *s >= '0' + base)
		return -1;
	for (; *s >= '0' && *s < '0' + base; s++) {
		if (v > lim)
			return -1;
		v = v * base + (*s - '0');
	}
	if (*s != ' ')
		return -1;
	*out = neg ? -v : v;
	*p = s + 1;
	return 0;
}

/* "T MODE SIZE MTIME HSIZE HMTIME SHA256" (sscanf was a fifth of diff's time) */
static int parse_hdr(const char *h, char *type, unsigned *mode, long long *size, long long *mtime,
		     long long *hsize, long long *hmtime, char sha[65])
{
	long long md;

	if (!h[0] || h[1] != ' ')
		return -1;
	*type = h[0];
	h += 2;
	if (parse_num(&h, 8, &md) < 0 || md < 0 || md > 07777 || parse_num(&h, 10, size) < 0 ||
	    parse_num(&h, 10, mtime) < 0 || parse_num(&h, 10, hsize) < 0 ||
	    parse_num(&h, 10, hmtime) < 0 || strlen(h) != 64 || strspn(h, "0123456789abcdef") != 64)
		return -1;
	*mode = (unsigned)md;
	memcpy(sha, h, 65);
	return 0;
}

int pisb_manifest_load(int idir, struct pisb_manifest *m, struct pisb_err *e)
{
	_cleanup_buf_ struct pisb_buf b = PISB_BUF_INIT;
	size_t off;

	if (pisb_read_file_at(idir, "project/base", &b, 1u << 30) < 0)
		return pisb_err_sys(e, errno == ENOENT ? PISB_EXIT_NOTFOUND : PISB_EXIT_FAIL,
				    "read the project's base");
	if (b.len < 12 || memcmp(b.s, "pisb-base 1\n", 12))
		return pisb_err_set(e, PISB_EXIT_FAIL, "the project's base is damaged");
	for (off = 12; off < b.len;) {
		const char *hdr = b.s + off, *path, *target;
		size_t hl = strnlen(hdr, b.len - off), pl, tl;
		struct pisb_pentry *p;
		char type;
		unsigned mode;
		long long size, mtime, hsize, hmtime;
		char sha[65];

		if (off + hl >= b.len)
			goto damaged;
		path = hdr + hl + 1;
		pl = strnlen(path, b.len - (size_t)(path - b.s));
		if ((size_t)(path - b.s) + pl >= b.len)
			goto damaged;
		target = path + pl + 1;
		tl = strnlen(target, b.len - (size_t)(target - b.s));
		if ((size_t)(target - b.s) + tl >= b.len)
			goto damaged;
		if (parse_hdr(hdr, &type, &mode, &size, &mtime, &hsize, &hmtime, sha) < 0 ||
		    (type != 'f' && type != 'l') || !pl)
			goto damaged;
		p = manifest_add(m);
		p->type = type;
		p->mode = mode & 07777;
		p->size = size;
		p->mtime = mtime;
		p->hsize = hsize;
		p->hmtime = hmtime;
		memcpy(p->sha, sha, 65);
		p->path = xstrdup(path);
		p->target = type == 'l' ? xstrdup(target) : NULL;
		off = (size_t)(target - b.s) + tl + 1;
	}
	for (size_t i = 1; i < m->n; i++)   /* saved sorted: sort only a base that is not */
		if (strcmp(m->v[i - 1].path, m->v[i].path) >= 0) {
			qsort(m->v, m->n, sizeof(*m->v), cmp_entry);
			break;
		}
	return 0;
damaged:
	return pisb_err_set(e, PISB_EXIT_FAIL, "the project's base is damaged");
}

/* ---- secrets ---- */

const char *const pisb_project_secret_patterns[] = {
	".env", ".env.*", "*.pem", "*.key", "*.p12", "*.pfx", "id_rsa*", "id_dsa*", "id_ecdsa*",
	"id_ed25519*", ".netrc", ".npmrc", ".pypirc", ".git-credentials", ".pgpass", NULL,
};

bool pisb_project_secret(const char *rel, const char *name, char *const *extra, size_t nextra)
{
	for (size_t i = 0; pisb_project_secret_patterns[i]; i++) {
		const char *p = pisb_project_secret_patterns[i];
		if (pisb_glob_match(p, name) && !(!strncmp(p, "id_", 3) && pisb_str_ends(name, ".pub")))
			return true;
	}
	for (size_t i = 0; i < nextra; i++) {
		struct pisb_pathglob g;
		bool hit;
		pisb_pathglob_init(&g, extra[i]);
		hit = pisb_pathglob_match(&g, rel, name);
		pisb_pathglob_release(&g);
		if (hit)
			return true;
	}
	return false;
}

/* ---- which files: tracked + untracked that are not ignored ---- */

struct pick {
	struct pisb_strv *out;
	struct pisb_ignore exclude;   /* .git/info/exclude, based at the project */
	const char *dir;
};

/* Does .git/info/exclude ignore rel (or a directory on its way), as git
 * ignores untracked files by it? */
static bool excluded(const struct pick *p, const char *rel)
{
	_cleanup_buf_ struct pisb_buf abs = PISB_BUF_INIT;

	if (!p->exclude.n)
		return false;
	pisb_buf_adds(&abs, p->dir);
	for (const char *s = rel;;) {
		size_t n = strcspn(s, "/");
		pisb_buf_addc(&abs, '/');
		pisb_buf_add(&abs, s, n);
		if (pisb_ignore_match(&p->exclude, abs.s, s[n] == '/'))
			return true;
		if (!s[n])
			return false;
		s += n + 1;
	}
}

static int pick_cb(void *arg, const struct pisb_walk_entry *en)
{
	struct pick *p = arg;

	if ((en->type == DT_REG || en->type == DT_LNK) && !excluded(p, en->rel))
		pisb_strv_push(p->out, en->rel);
	return PISB_WALK_CONTINUE;
}

/* The project's own .git/info/exclude (a regular file, read as text; a
 * .git that is a file, a worktree's, has none here) into p->exclude. */
static void load_exclude(struct pick *p, int dirfd)
{
	_cleanup_buf_ struct pisb_buf b = PISB_BUF_INIT;
	_cleanup_close_ int fd = pisb_open_beneath(dirfd, ".git/info/exclude",
						   O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
	struct stat st;

	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || pisb_read_fd(fd, &b, 4 << 20) < 0)
		return;
	pisb_ignore_push(&p->exclude, p->dir, b.s ? b.s : "", b.len);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static bool any_glob(char *const *v, size_t n, const char *rel)
{
	const char *name = strrchr(rel, '/');

	name = name ? name + 1 : rel;
	for (size_t i = 0; i < n; i++) {
		struct pisb_pathglob g;
		bool hit;
		pisb_pathglob_init(&g, v[i]);
		hit = pisb_pathglob_match(&g, rel, name);
		pisb_pathglob_release(&g);
		if (hit)
			return true;
	}
	return false;
}

/* Whether rel has a component named .git (any case). */
static bool has_git(const char *rel)
{
	for (const char *p = rel; p; p = strchr(p, '/')) {
		if (*p == '/')
			p++;
		if (!strncasecmp(p, ".git", 4) && (p[4] == '/' || !p[4]))
			return true;
	}
	return false;
}

/* The sorted, unique selection under dir into out. */
/* rel or a directory above it is a secret (bind hides a secret directory
 * whole: a copy leaves out everything under one too) */
static bool secret_path(const char *rel, const struct pisb_project_config *pc)
{
	char buf[4096];
	size_t n = strlen(rel);

	if (n >= sizeof(buf))
		return false;
	memcpy(buf, rel, n + 1);
	for (char *slash = buf + n;; ) {
		char *name;
		*slash = '\0';
		name = strrchr(buf, '/');
		name = name ? name + 1 : buf;
		if (pisb_project_secret(buf, name, pc ? pc->secret_patterns : NULL, pc ? pc->nsecret_patterns : 0))
			return true;
		if (name == buf)
			return false;
		slash = name - 1;
	}
}

int pisb_project_select(const char *dir, int dirfd, const struct pisb_project_config *pc,
			struct pisb_strv *out, long long *hidden, struct pisb_err *e)
{
	_cleanup_buf_ struct pisb_buf list = PISB_BUF_INIT;
	_cleanup_strv_ struct pisb_strv all = PISB_STRV_INIT;
	_cleanup_close_ int rootfd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	struct pick p = { &all, PISB_IGNORE_INIT, dir };
	struct pisb_walk_opts wo = { rootfd, dirfd, dir, true };
	int g, w;

	if ((g = pisb_git_tracked(dir, &list, e)) < 0)
		return pisb_err_prefix(e, "project '%s'", dir);
	for (size_t off = 0; g == 0 && off < list.len;) {
		const char *rel = list.s + off;
		off += strlen(rel) + 1;
		pisb_strv_push(&all, rel);
	}
	load_exclude(&p, dirfd);
	w = pisb_walk(&wo, pick_cb, &p, e);
	pisb_ignore_release(&p.exclude);
	if (w < 0)
		return pisb_err_prefix(e, "project '%s'", dir);
	if (all.n)
		qsort(all.v, all.n, sizeof(char *), cmp_str);
	for (size_t i = 0; i < all.n; i++) {
		const char *rel = all.v[i];
		if (i && !strcmp(rel, all.v[i - 1]))
			continue;
		if (has_git(rel) || !strcmp(rel, ".sandbox.yaml"))
			continue;   /* the guest config is pisb's own */
		if (pc && pc->ninclude && !any_glob(pc->include, pc->ninclude, rel))
			continue;
		if (pc && any_glob(pc->exclude, pc->nexclude, rel))
			continue;
		if (!(pc && pc->secrets_include) && secret_path(rel, pc)) {
			(*hidden)++;
			continue;
		}
		pisb_strv_push(out, rel);
	}
	return 0;
}

/* ---- the copy ---- */

/* The directory rel (made if missing, each level owned by uid/gid) under
 * wsfd, never through a symlink. */
static int dest_dir(int wsfd, const char *rel, bool own, uid_t uid, gid_t gid, struct pisb_err *e)
{
	_cleanup_free_ char *p = xstrdup(rel);
	int fd = fcntl(wsfd, F_DUPFD_CLOEXEC, 3);

	for (char *s = p, *slash; fd >= 0 && s && *s; s = slash ? slash + 1 : NULL) {
		int sub;
		slash = strchr(s, '/');
		if (slash)
			*slash = '\0';
		if (mkdirat(fd, s, 0755) == 0) {
			if (own && fchownat(fd, s, uid, gid, AT_SYMLINK_NOFOLLOW) < 0) {
				close(fd);
				return pisb_err_sys(e, PISB_EXIT_FAIL, "chown '%s'", rel);
			}
		} else if (errno != EEXIST) {
			close(fd);
			return pisb_err_sys(e, PISB_EXIT_FAIL, "mkdir '%s' in the workspace", rel);
		}
		sub = openat(fd, s, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		close(fd);
		fd = sub;
	}
	if (fd < 0)
		return pisb_err_sys(e, PISB_EXIT_FAIL, "open '%s' in the workspace", rel);
	return fd;
}

/* The copier's read buffer: one per thread, on the heap.  Not a
 * _Thread_local array: that is a TLS segment every pisb process (the idle
 * controller too) would carry and zero at start. */
#define COPY_BUF (1 << 17)

static int hash_fd(int fd, char *buf, char out[65], long long *size)
{
	struct pisb_sha256 c;
	unsigned char d[32];
	long long n = 0;
	off_t off = 0;

	pisb_sha256_init(&c);
	for (;;) {
		ssize_t r = pread(fd, buf, COPY_BUF, off);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -1;
		if (r == 0)
			break;
		pisb_sha256_update(&c, buf, (size_t)r);
		off += r;
		n += r;
	}
	pisb_sha256_final(&c, d);
	pisb_sha256_hex(d, out);
	if (size)
		*size = n;
	return 0;
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

/* The kernel copies (reflink or in-kernel where it can), else read/write. */
static int copy_data(int in, int out, char *buf, long long size)
{
	long long done = 0;
	off_t ioff = 0, ooff = 0;

	while (done < size) {
		ssize_t r = copy_file_range(in, &ioff, out, &ooff, (size_t)(size - done), 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 && (errno == EXDEV || errno == EINVAL || errno == ENOSYS ||
			      errno == EOPNOTSUPP || errno == EPERM))
			break;
		if (r < 0)
			return -1;
		if (r == 0)
			return 0;  /* the file shrank: the digests will tell */
		done += r;
	}
	while (done < size) {
		ssize_t r = pread(in, buf, COPY_BUF, ioff);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return r < 0 ? -1 : 0;
		if (pisb_write_all(out, buf, (size_t)r) < 0)
			return -1;
		ioff += r;
		done += r;
	}
	return 0;
}

static int64_t ns_of(const struct timespec *t)
{
	return (int64_t)t->tv_sec * 1000000000LL + t->tv_nsec;
}

struct copier {
	const char *dir;
	int hostfd, wsfd;
	bool own;
	uid_t uid;
	gid_t gid;
	/* the last parent directory, host and workspace side */
	char *parent;
	int hpfd, wpfd;
	char *buf;                /* COPY_BUF bytes, this thread's */
};

static void copier_release(struct copier *c)
{
	free(c->parent);
	free(c->buf);
	if (c->hpfd >= 0)
		close(c->hpfd);
	if (c->wpfd >= 0)
		close(c->wpfd);
}

/* Open the parent of rel on both sides; 1 when the host side is not
 * reachable without a symlink (left out, as git never tracks such a path). */
static int open_parents(struct copier *c, const char *rel, struct pisb_err *e)
{
	const char *slash = strrchr(rel, '/');
	_cleanup_free_ char *parent = slash ? xstrndup(rel, (size_t)(slash - rel)) : xstrdup("");

	if (c->parent && !strcmp(c->parent, parent))
		return c->hpfd >= 0 ? 0 : 1;
	if (c->hpfd >= 0)
		close(c->hpfd);
	if (c->wpfd >= 0)
		close(c->wpfd);
	c->hpfd = c->wpfd = -1;
	free(c->parent);
	c->parent = PISB_STEAL(parent);
	c->hpfd = *c->parent ? pisb_open_beneath(c->hostfd, c->parent, O_PATH | O_DIRECTORY)
			     : fcntl(c->hostfd, F_DUPFD_CLOEXEC, 3);
	if (c->hpfd < 0)
		return errno == ENOENT || errno == ENOTDIR || errno == ELOOP || errno == EXDEV
		       ? 1 : pisb_err_sys(e, PISB_EXIT_FAIL, "open '%s/%s'", c->dir, c->parent);
	c->wpfd = dest_dir(c->wsfd, c->parent, c->own, c->uid, c->gid, e);
	return c->wpfd < 0 ? -1 : 0;
}

static int copy_one(struct copier *c, const char *rel, struct pisb_manifest *m,
		    struct pisb_project_stats *s, struct pisb_err *e)
{
	const char *name = strrchr(rel, '/');
	struct stat st, st2;
	struct pisb_pentry *p;
	int r;

	name = name ? name + 1 : rel;
	if ((r = open_parents(c, rel, e)) != 0)
		return r < 0 ? -1 : 0;
	if (fstatat(c->hpfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return 0;   /* deleted in the working tree */
	if (!S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode))
		return 0;   /* a submodule not checked out, a fifo ... */
	/* whatever is in the way (a template's file) goes */
	if (unlinkat(c->wpfd, name, 0) < 0 && errno != ENOENT)
		return pisb_err_sys(e, PISB_EXIT_FAIL, "replace '%s' in the workspace", rel);
	if (S_ISLNK(st.st_mode)) {
		char t[4097];
		ssize_t n = readlinkat(c->hpfd, name, t, sizeof(t) - 1);
		struct timespec ts[2] = { st.st_atim, st.st_mtim };
		if (n < 0)
			return pisb_err_sys(e, PISB_EXIT_FAIL, "readlink '%s/%s'", c->dir, rel);
		t[n] = '\0';
		if (symlinkat(t, c->wpfd, name) < 0)
			return pisb_err_sys(e, PISB_EXIT_FAIL, "symlink '%s' in the workspace", rel);
		if (c->own)
			fchownat(c->wpfd, name, c->uid, c->gid, AT_SYMLINK_NOFOLLOW);
		utimensat(c->wpfd, name, ts, AT_SYMLINK_NOFOLLOW);
		p = manifest_add(m);
		p->path = xstrdup(rel);
		p->type = 'l';
		p->mode = 0777;
		p->size = p->hsize = n;
		p->mtime = p->hmtime = ns_of(&st.st_mtim);
		p->target = xstrdup(t);
		hash_mem(t, (size_t)n, p->sha);
		s->files++;
		return 0;
	}
	{
		_cleanup_close_ int in = openat(c->hpfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
		_cleanup_close_ int out = -1;
		char hs[65], ws[65];
		long long hn, wn;
		unsigned mode = st.st_mode & 0777;
		struct timespec ts[2];

		if (in < 0 || fstat(in, &st2) < 0 || !S_ISREG(st2.st_mode))
			return pisb_err_sys(e, PISB_EXIT_FAIL, "open '%s/%s'", c->dir, rel);
		out = openat(c->wpfd, name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (out < 0)
			return pisb_err_sys(e, PISB_EXIT_FAIL, "create '%s' in the workspace", rel);
		if (copy_data(in, out, c->buf, st2.st_size) < 0)
			return pisb_err_sys(e, PISB_EXIT_FAIL, "copy '%s'", rel);
		/* verified: the digest of what is now in the workspace is the
		 * digest of what the host file holds */
		if (hash_fd(in, c->buf, hs, &hn) < 0 || hash_fd(out, c->buf, ws, &wn) < 0)
			return pisb_err_sys(e, PISB_EXIT_FAIL, "read back '%s'", rel);
		if (strcmp(hs, ws) || hn != wn)
			return pisb_err_set(e, PISB_EXIT_FAIL,
					    "copy of '%s' does not match the host file (sha256 %s, copied %s): "
					    "did it change during the copy?", rel, hs, ws);
		if (fchmod(out, mode) < 0 || (c->own && fchown(out, c->uid, c->gid) < 0))
			return pisb_err_sys(e, PISB_EXIT_FAIL, "set the mode of '%s'", rel);
		/* the mtime of the copy is the host file's, as cp -a keeps it */
		if (fstat(in, &st2) < 0)
			return pisb_err_sys(e, PISB_EXIT_FAIL, "stat '%s/%s'", c->dir, rel);
		ts[0] = st2.st_atim;
		ts[1] = st2.st_mtim;
		if (futimens(out, ts) < 0)
			return pisb_err_sys(e, PISB_EXIT_FAIL, "set the times of '%s'", rel);
		p = manifest_add(m);
		p->path = xstrdup(rel);
		p->type = 'f';
		p->mode = mode;
		p->size = p->hsize = hn;
		p->mtime = p->hmtime = ns_of(&st2.st_mtim);
		memcpy(p->sha, hs, 65);
		s->files++;
		s->bytes += hn;
	}
	return 0;
}

/* project.git: host: every file of the project's own .git directory (not
 * a .git file: a worktree's repository lives elsewhere), relative to the
 * project, sorted.  They go into the workspace but never into the base:
 * diff and apply leave .git alone. */
struct gpick {
	struct pisb_strv *out;
};

static int gpick_cb(void *arg, const struct pisb_walk_entry *en)
{
	struct gpick *g = arg;

	if (en->type == DT_REG || en->type == DT_LNK)
		pisb_strv_pushf(g->out, ".git/%s", en->rel);
	return PISB_WALK_CONTINUE;
}

static int select_git(const char *dir, int dirfd, struct pisb_strv *out, struct pisb_err *e)
{
	_cleanup_close_ int gfd = openat(dirfd, ".git", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	_cleanup_close_ int rootfd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	_cleanup_free_ char *gpath = xasprintf("%s/.git", dir);
	struct pisb_walk_opts wo = { rootfd, gfd, gpath, false };
	struct gpick g = { out };

	if (gfd < 0)
		return pisb_err_sys(e, PISB_EXIT_FAIL,
				    "project.git: host: '%s' has no .git directory of its own", dir);
	if (pisb_walk(&wo, gpick_cb, &g, e) < 0)
		return pisb_err_prefix(e, "project.git: host: '%s'", gpath);
	if (out->n)
		qsort(out->v, out->n, sizeof(char *), cmp_str);
	return 0;
}

/* ---- the copy, in up to PISB_PROJECT_THREADS threads ----
 * Each thread takes the next run of COPY_CHUNK names (sorted, so a run
 * shares its directories and the copier's parent cache keeps working),
 * with its own copier, manifest, stats and error; the first error stops
 * the others.  The manifests are merged and sorted after the join. */
#define PISB_PROJECT_THREADS 4
#define COPY_CHUNK 64

struct copy_job {
	const struct copier *proto;
	char *const *files;
	size_t n;
	size_t next;              /* atomic: the next name to take */
	int failed;               /* atomic: a thread failed */
};
struct copy_worker {
	struct copy_job *job;
	struct pisb_manifest m;
	struct pisb_project_stats s;
	struct pisb_err e;
	int r;
};

static void *copy_thread(void *arg)
{
	struct copy_worker *w = arg;
	struct copy_job *j = w->job;
	struct copier c = *j->proto;

	c.parent = NULL;
	c.hpfd = c.wpfd = -1;
	c.buf = xmalloc(COPY_BUF);
	while (!__atomic_load_n(&j->failed, __ATOMIC_RELAXED)) {
		size_t i = __atomic_fetch_add(&j->next, COPY_CHUNK, __ATOMIC_RELAXED);
		if (i >= j->n)
			break;
		for (size_t k = i; k < i + COPY_CHUNK && k < j->n; k++)
			if ((w->r = copy_one(&c, j->files[k], &w->m, &w->s, &w->e)) < 0) {
				__atomic_store_n(&j->failed, 1, __ATOMIC_RELAXED);
				break;
			}
	}
	copier_release(&c);
	return NULL;
}

/* Copy files (sorted) with c's settings; manifest entries into m (unsorted). */
static int copy_files(const struct copier *c, char *const *files, size_t n, struct pisb_manifest *m,
		      struct pisb_project_stats *s, struct pisb_err *e)
{
	struct copy_job j = { c, files, n, 0, 0 };
	struct copy_worker w[PISB_PROJECT_THREADS];
	pthread_t tid[PISB_PROJECT_THREADS];
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	size_t nt = n / (2 * COPY_CHUNK) + 1, started = 0;
	int r = 0;

	if (nt > PISB_PROJECT_THREADS)
		nt = PISB_PROJECT_THREADS;
	if (cpus > 0 && nt > (size_t)cpus * 2)
		nt = (size_t)cpus * 2;   /* the kernel's work, half of it waiting on the disk */
	memset(w, 0, sizeof(w));
	for (size_t i = 0; i < nt; i++) {
		w[i].job = &j;
		w[i].e = (struct pisb_err)PISB_ERR_INIT;
		/* the first runs here; the others in threads while they start */
		if (i && pthread_create(&tid[i], NULL, copy_thread, &w[i]) != 0)
			break;
		started = i + 1;
	}
	copy_thread(&w[0]);
	for (size_t i = 1; i < started; i++)
		pthread_join(tid[i], NULL);
	for (size_t i = 0; i < started; i++) {
		if (w[i].r < 0 && r == 0) {
			*e = w[i].e;
			r = -1;
		}
		s->files += w[i].s.files;
		s->bytes += w[i].s.bytes;
		for (size_t k = 0; k < w[i].m.n; k++) {
			*manifest_add(m) = w[i].m.v[k];
		}
		free(w[i].m.v);
	}
	return r;
}

int pisb_project_copy(const char *dir, const struct pisb_project_config *pc, int wsfd,
		      bool own, uid_t uid, gid_t gid, struct pisb_manifest *m,
		      struct pisb_project_stats *s, struct pisb_err *e)
{
	_cleanup_strv_ struct pisb_strv files = PISB_STRV_INIT;
	_cleanup_close_ int hostfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct copier c = { dir, -1, wsfd, own, uid, gid, NULL, -1, -1, NULL };
	int r = 0;

	memset(s, 0, sizeof(*s));
	if (hostfd < 0)
		return pisb_err_sys(e, errno == ENOENT ? PISB_EXIT_NOTFOUND : PISB_EXIT_FAIL,
				    "project '%s'", dir);
	c.hostfd = hostfd;
	if (pisb_project_select(dir, hostfd, pc, &files, &s->secrets_hidden, e) < 0)
		return -1;
	r = copy_files(&c, files.v, files.n, m, s, e);
	if (r == 0 && pc && pc->git_host) {
		_cleanup_strv_ struct pisb_strv git = PISB_STRV_INIT;
		_cleanup_manifest_ struct pisb_manifest gm = PISB_MANIFEST_INIT;
		struct pisb_project_stats gs = { 0, 0, 0 };
		r = select_git(dir, hostfd, &git, e);
		if (r == 0)
			r = copy_files(&c, git.v, git.n, &gm, &gs, e);
	}
	if (r < 0)
		return pisb_err_prefix(e, "copy project '%s'", dir);
	qsort(m->v, m->n, sizeof(*m->v), cmp_entry);
	return 0;
}

int pisb_project_seed(int idir, int wsfd, const char *dir, const struct pisb_project_config *pc,
		      uid_t uid, gid_t gid, unsigned idcount, struct pisb_project_stats *s,
		      struct pisb_err *e)
{
	_cleanup_manifest_ struct pisb_manifest m = PISB_MANIFEST_INIT;
	bool own = geteuid() == 0;

	if (pisb_project_copy(dir, pc, wsfd, own, uid, gid, &m, s, e) < 0 ||
	    pisb_manifest_save(idir, &m, e) < 0)
		return -1;
	if (!(pc && pc->git_host)) {
		/* what git inside commits as the base (pisb_project_git_init) */
		_cleanup_buf_ struct pisb_buf l = PISB_BUF_INIT;
		_cleanup_close_ int g = dest_dir(wsfd, ".git", own, uid, gid, e);
		if (g < 0)
			return -1;
		for (size_t i = 0; i < m.n; i++)
			pisb_buf_add(&l, m.v[i].path, strlen(m.v[i].path) + 1);
		if (pisb_atomic_write(g, "pisb-base", l.s ? l.s : "", l.len, 0644, e) < 0)
			return -1;
		if (own && fchownat(g, "pisb-base", uid, gid, AT_SYMLINK_NOFOLLOW) < 0)
			return pisb_err_sys(e, PISB_EXIT_FAIL, "chown .git/pisb-base");
		/* and its blobs, for git inside to index rather than write
		 * one loose object per file (project_git.c) */
		if (m.n) {
			_cleanup_close_ int pd = dest_dir(wsfd, ".git/objects/pack", own, uid, gid, e);
			char name[64];
			if (pd < 0 || pisb_project_pack(wsfd, pd, &m, own, uid, gid, name, e) < 0)
				return pisb_err_prefix(e, "copy project '%s'", dir);
		}
	}
	return pisb_project_info_save(idir, dir, s, uid, gid, idcount, e);
}

int pisb_project_info_save(int idir, const char *dir, const struct pisb_project_stats *s,
			   uid_t uid, gid_t gid, unsigned idcount, struct pisb_err *e)
{
	_cleanup_buf_ struct pisb_buf js = PISB_BUF_INIT;
	struct pisb_jw w;

	pisb_jw_init(&w, &js);
	pisb_jw_obj(&w);
	pisb_jw_kstr(&w, "dir", dir);
	pisb_jw_kstr(&w, "mode", "copy");
	pisb_jw_kint(&w, "files", s->files);
	pisb_jw_kint(&w, "bytes", s->bytes);
	pisb_jw_kint(&w, "secretsHidden", s->secrets_hidden);
	pisb_jw_kint(&w, "uidBase", uid);
	pisb_jw_kint(&w, "gidBase", gid);
	pisb_jw_kint(&w, "idCount", idcount);
	pisb_jw_kint(&w, "createdAt", pisb_now_ms() / 1000);
	pisb_jw_obj_end(&w);
	pisb_buf_addc(&js, '\n');
	return pisb_atomic_write(idir, "project/info.json", js.s, js.len, 0600, e);
}

int pisb_project_bind_owner(const char *dir, bool ro, unsigned *uid, unsigned *gid,
			    struct pisb_err *e)
{
	struct stat sb;

	if (stat(dir, &sb) < 0)
		return pisb_err_sys(e, errno == ENOENT ? PISB_EXIT_NOTFOUND : PISB_EXIT_FAIL,
				    "project '%s'", dir);
	if (!S_ISDIR(sb.st_mode))
		return pisb_err_set(e, PISB_EXIT_USAGE, "project '%s': not a directory", dir);
	if (!ro && (sb.st_uid == 0 || sb.st_gid == 0))
		return pisb_err_set(e, PISB_EXIT_USAGE,
				    "project.mode bind: '%s' is owned by root (uid %u, gid %u); the sandbox's root writes the project as its owner, never as host root: chown it to a user, or use bind-ro or copy",
				    dir, (unsigned)sb.st_uid, (unsigned)sb.st_gid);
	*uid = sb.st_uid;
	*gid = sb.st_gid;
	return 0;
}

int pisb_project_bind_record(int idir, const char *dir, bool ro, struct pisb_err *e)
{
	_cleanup_buf_ struct pisb_buf js = PISB_BUF_INIT;
	struct pisb_jw w;

	pisb_jw_init(&w, &js);
	pisb_jw_obj(&w);
	pisb_jw_kstr(&w, "dir", dir);
	pisb_jw_kstr(&w, "mode", ro ? "bind-ro" : "bind");
	pisb_jw_kint(&w, "createdAt", pisb_now_ms() / 1000);
	pisb_jw_obj_end(&w);
	pisb_buf_addc(&js, '\n');
	if (mkdirat(idir, "project", 0700) < 0 && errno != EEXIST)
		return pisb_err_sys(e, PISB_EXIT_FAIL, "mkdir project");
	return pisb_atomic_write(idir, "project/info.json", js.s, js.len, 0600, e);
}

int pisb_project_bound(int idir, char **dir, bool *ro)
{
	_cleanup_buf_ struct pisb_buf b = PISB_BUF_INIT;
	_cleanup_free_ char *mode = NULL;
	struct pisb_err ig = PISB_ERR_INIT;
	struct pisb_json j;

	*dir = NULL;
	*ro = false;
	if (pisb_read_file_at(idir, "project/info.json", &b, 1 << 20) < 0 ||
	    pisb_json_parse(&j, b.s, b.len, &ig) < 0)
		return 0;
	mode = pisb_json_str(&j, pisb_json_get(&j, 0, "mode"));
	if (mode && (!strcmp(mode, "bind") || !strcmp(mode, "bind-ro")))
		*dir = pisb_json_str(&j, pisb_json_get(&j, 0, "dir"));
	pisb_json_release(&j);
	if (!*dir || (*dir)[0] != '/') {
		free(*dir);
		*dir = NULL;
		return 0;
	}
	*ro = !strcmp(mode, "bind-ro");
	return 1;
}

char *pisb_project_dir(int idir, struct pisb_err *e)
{
	_cleanup_buf_ struct pisb_buf b = PISB_BUF_INIT;
	struct pisb_json j;
	char *dir = NULL;
	bool ro;

	if (pisb_project_bound(idir, &dir, &ro) > 0) {
		pisb_err_set(e, PISB_EXIT_FAIL,
			     "nothing to apply (%s mode): the sandbox %s the project '%s' in place",
			     ro ? "bind-ro" : "bind", ro ? "reads" : "writes", dir);
		free(dir);
		return NULL;
	}

	if (pisb_read_file_at(idir, "project/info.json", &b, 1 << 20) < 0) {
		if (errno == ENOENT)
			pisb_err_set(e, PISB_EXIT_NOTFOUND,
				     "it has no project (create it with '--project DIR')");
		else
			pisb_err_sys(e, PISB_EXIT_FAIL, "read project/info.json");
		return NULL;
	}
	if (pisb_json_parse(&j, b.s, b.len, e) < 0)
		return NULL;
	dir = pisb_json_str(&j, pisb_json_get(&j, 0, "dir"));
	pisb_json_release(&j);
	if (!dir || dir[0] != '/') {
		free(dir);
		pisb_err_set(e, PISB_EXIT_FAIL, "project/info.json names no project directory");
		return NULL;
	}
	return dir;
}

/* ---- git inside the sandbox ---- */

/* Runs inside: the base list is .git/pisb-base (NUL-separated, written
 * before the first boot), so only the base is committed whatever setup
 * added since; its blobs are in the pack the host wrote (project_git.c),
 * indexed first so that update-index writes no object (a pack git does
 * not accept goes, and update-index writes the objects itself). */
static const char git_script[] =
	"command -v git >/dev/null 2>&1 || { rm -f .git/objects/pack/pack-*.pack; exit 127; }\n"
	"git init -q . || exit 1\n"
	"printf '/.sandbox.yaml\\n' >> .git/info/exclude\n"
	"for p in .git/objects/pack/pack-*.pack; do\n"
	"  [ -f \"$p\" ] && [ ! -f \"${p%.pack}.idx\" ] || continue\n"
	"  git index-pack \"$p\" >/dev/null 2>&1 || rm -f \"$p\"\n"
	"done\n"
	"if [ -s .git/pisb-base ]; then\n"
	"  git update-index --add -z --stdin < .git/pisb-base || exit 1\n"
	"fi\n"
	"rm -f .git/pisb-base\n"
	"git -c user.name=pisb -c user.email=pisb@sandbox.invalid -c commit.gpgsign=false "
	"commit -q --no-verify --allow-empty -m 'pisb: the project as copied from the host' || exit 1\n";

int pisb_project_git_init(struct pisb_sandbox *sb, char **note, struct pisb_err *e)
{
	_cleanup_buf_ struct pisb_buf out = PISB_BUF_INIT;
	struct pisb_exec_req r = { 0 };
	struct pisb_jw w;
	struct pisb_json j;
	int code = 0;
	bool running = false;
	long long ec = -1;

	*note = NULL;
	{
		/* bind: the host's own checkout is the workspace; no git here */
		_cleanup_free_ char *dir = NULL;
		bool ro;
		if (pisb_project_bound(sb->idir, &dir, &ro) > 0)
			return 0;
	}
	{
		/* git: host: the workspace holds the host's own repository */
		struct pisb_err ig = PISB_ERR_INIT;
		const struct pisb_config *cfg = pisb_sandbox_config(sb, &ig);
		if (cfg && cfg->project.git_host)
			return 0;
	}
	if (!sb->drv->exec_handle) {
		*note = xstrdup("the workspace is no git repository (the driver cannot run commands)");
		return 0;
	}
	r.name = sb->name;
	r.sh = git_script;
	r.timeout_ms = 60000;
	pisb_jw_init(&w, &out);
	if (sb->drv->exec_handle(sb, &r, &w, &code, &running, e) < 0)
		return pisb_err_prefix(e, "make the workspace a git repository");
	if (pisb_json_parse(&j, out.s, out.len, e) < 0)
		return -1;
	pisb_json_int(&j, pisb_json_get(&j, 0, "exitCode"), &ec);
	if (ec != 0) {
		_cleanup_free_ char *o = pisb_json_str(&j, pisb_json_get(&j, 0, "output"));
		size_t n = o ? strcspn(o, "\n") : 0;
		*note = ec == 127 ? xstrdup("git is not in the image: the workspace is no git repository "
					    "(pisb diff works without it)")
			: running ? xstrdup("git init in the workspace did not finish within 60 s")
			: xasprintf("git init in the workspace failed (exit %lld): %.*s", ec, (int)n, o ? o : "");
	}
	pisb_json_release(&j);
	return 0;
}
