/* ignore.c - .gitignore rules and the ignore-aware walk; see ignore.h. */
#include "ignore.h"
#include "err.h"
#include "fs.h"
#include "glob.h"
#include "util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

static void add_rule(struct pisb_ignore_frame *f, size_t *cap, const char *line, size_t len)
{
	unsigned flags = 0;
	char *pat;

	if (len && line[len - 1] == '\r')
		len--;
	/* trailing spaces go unless escaped */
	while (len && line[len - 1] == ' ' && !(len >= 2 && line[len - 2] == '\\'))
		len--;
	if (!len || line[0] == '#')
		return;
	if (line[0] == '!') {
		flags |= PISB_IGN_NEGATE;
		line++;
		len--;
	}
	if (len && line[len - 1] == '/') {
		flags |= PISB_IGN_DIRONLY;
		len--;
	}
	if (!len)
		return;
	if (memchr(line, '/', len))
		flags |= PISB_IGN_ANCHORED;
	if (line[0] == '/') {
		line++;
		len--;
		if (!len)
			return;
	}
	pat = xstrndup(line, len);
	if (f->n == *cap) {
		*cap = *cap ? 2 * *cap : 8;
		f->rules = xrealloc(f->rules, *cap * sizeof(*f->rules));
	}
	f->rules[f->n].pat = pat;
	f->rules[f->n].flags = flags;
	f->n++;
}

void pisb_ignore_push(struct pisb_ignore *ig, const char *base, const char *text, size_t len)
{
	struct pisb_ignore_frame *f;
	size_t cap = 0;
	const char *p = text, *end = text + len;

	if (ig->n == ig->cap) {
		ig->cap = ig->cap ? 2 * ig->cap : 8;
		ig->f = xrealloc(ig->f, ig->cap * sizeof(*ig->f));
	}
	f = &ig->f[ig->n++];
	memset(f, 0, sizeof(*f));
	f->base = xstrdup(strcmp(base, "/") ? base : "");
	f->baselen = strlen(f->base);
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
		add_rule(f, &cap, p, n);
		p += n + 1;
	}
}

void pisb_ignore_pop(struct pisb_ignore *ig)
{
	struct pisb_ignore_frame *f;

	if (!ig->n)
		return;
	f = &ig->f[--ig->n];
	for (size_t i = 0; i < f->n; i++)
		free(f->rules[i].pat);
	free(f->rules);
	free(f->base);
}

void pisb_ignore_release(struct pisb_ignore *ig)
{
	while (ig->n)
		pisb_ignore_pop(ig);
	free(ig->f);
	ig->f = NULL;
	ig->cap = 0;
}

bool pisb_ignore_match(const struct pisb_ignore *ig, const char *abspath, bool is_dir)
{
	const char *name = strrchr(abspath, '/');

	name = name ? name + 1 : abspath;
	for (size_t i = ig->n; i-- > 0;) {
		const struct pisb_ignore_frame *f = &ig->f[i];
		const char *rel;

		if (!f->n || strncmp(abspath, f->base, f->baselen) || abspath[f->baselen] != '/')
			continue;
		rel = abspath + f->baselen + 1;
		for (size_t k = f->n; k-- > 0;) {
			const struct pisb_ignore_rule *r = &f->rules[k];
			if ((r->flags & PISB_IGN_DIRONLY) && !is_dir)
				continue;
			if (pisb_glob_match(r->pat, (r->flags & PISB_IGN_ANCHORED) ? rel : name))
				return !(r->flags & PISB_IGN_NEGATE);
		}
	}
	return false;
}

/* ---- the walk ---- */

struct walker {
	const struct pisb_walk_opts *o;
	pisb_walk_fn fn;
	void *arg;
	struct pisb_err *e;
	struct pisb_ignore ig;
	struct pisb_buf path;
	size_t relofs;
	char *dents;        /* getdents64 buffer, shared by every level */
};

struct linux_dirent64 {
	ino64_t d_ino;
	off64_t d_off;
	unsigned short d_reclen;
	unsigned char d_type;
	char d_name[];
};

struct dent {
	const char *name;
	unsigned char type;
};

static int cmp_dent(const void *a, const void *b)
{
	return strcmp(((const struct dent *)a)->name, ((const struct dent *)b)->name);
}

#define DENTS_SIZE (64 * 1024)

static bool load_gitignore(struct pisb_ignore *ig, int dfd, const char *base)
{
	_cleanup_buf_ struct pisb_buf b = PISB_BUF_INIT;
	_cleanup_close_ int fd = openat(dfd, ".gitignore", O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	struct stat st;

	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || pisb_read_fd(fd, &b, 4 << 20) < 0)
		return false;
	pisb_ignore_push(ig, base, b.s ? b.s : "", b.len);
	return true;
}

static int walk_dir(struct walker *w, int dfd)
{
	_cleanup_buf_ struct pisb_buf names = PISB_BUF_INIT;
	_cleanup_free_ struct dent *ents = NULL;
	_cleanup_free_ size_t *offs = NULL;
	_cleanup_free_ unsigned char *types = NULL;
	size_t n = 0, cap = 0, plen = w->path.len;
	bool has_ignore = false, pushed = false;
	int ret = 0;

	for (;;) {
		long r = syscall(SYS_getdents64, dfd, w->dents, DENTS_SIZE);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return 0;   /* unreadable: skip */
		}
		if (r == 0)
			break;
		for (long pos = 0; pos < r;) {
			struct linux_dirent64 *d = (struct linux_dirent64 *)(w->dents + pos);
			const char *nm = d->d_name;
			pos += d->d_reclen;
			if (nm[0] == '.' && (nm[1] == '\0' || (nm[1] == '.' && nm[2] == '\0')))
				continue;
			if (w->o->ignore && (!strcmp(nm, ".git") || !strcmp(nm, "node_modules")))
				continue;
			if (n == cap) {
				cap = cap ? 2 * cap : 64;
				offs = xrealloc(offs, cap * sizeof(*offs));
				types = xrealloc(types, cap);
			}
			offs[n] = names.len;
			types[n] = d->d_type;
			pisb_buf_add(&names, nm, strlen(nm) + 1);
			if (w->o->ignore && !strcmp(nm, ".gitignore"))
				has_ignore = true;
			n++;
		}
	}
	if (!n)
		return 0;
	ents = xmalloc(n * sizeof(*ents));
	for (size_t i = 0; i < n; i++) {
		ents[i].name = names.s + offs[i];
		ents[i].type = types[i];
	}
	qsort(ents, n, sizeof(*ents), cmp_dent);
	if (has_ignore)
		pushed = load_gitignore(&w->ig, dfd, w->path.s);

	for (size_t i = 0; i < n && ret == 0; i++) {
		struct pisb_walk_entry en;
		unsigned char type = ents[i].type;
		int r;

		if (type == DT_UNKNOWN) {
			struct stat st;
			if (fstatat(dfd, ents[i].name, &st, AT_SYMLINK_NOFOLLOW) < 0)
				continue;
			type = S_ISDIR(st.st_mode) ? DT_DIR : S_ISREG(st.st_mode) ? DT_REG :
			       S_ISLNK(st.st_mode) ? DT_LNK : S_ISFIFO(st.st_mode) ? DT_FIFO :
			       S_ISSOCK(st.st_mode) ? DT_SOCK : S_ISCHR(st.st_mode) ? DT_CHR : DT_BLK;
		}
		w->path.len = plen;
		if (plen != 1)
			pisb_buf_addc(&w->path, '/');
		pisb_buf_adds(&w->path, ents[i].name);
		if (w->o->ignore && w->ig.n && pisb_ignore_match(&w->ig, w->path.s, type == DT_DIR))
			continue;
		en.path = w->path.s;
		en.rel = w->path.s + w->relofs;
		en.name = w->path.s + w->path.len - strlen(ents[i].name);
		en.dirfd = dfd;
		en.type = type;
		r = w->fn(w->arg, &en);
		if (r < 0 || r == PISB_WALK_STOP) {
			ret = r < 0 ? -1 : 1;
			break;
		}
		if (type == DT_DIR && r != PISB_WALK_SKIP) {
			int sub = openat(dfd, ents[i].name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (sub < 0)
				continue;
			ret = walk_dir(w, sub);
			close(sub);
		}
	}
	w->path.len = plen;
	w->path.s[plen] = '\0';
	if (pushed)
		pisb_ignore_pop(&w->ig);
	return ret;
}

/* .gitignore files above the walk's directory, from the enclosing git
 * checkout's top (the nearest ancestor holding .git) down; none when the
 * directory is not inside a checkout. */
static void load_ancestors(struct walker *w, const char *dir)
{
	_cleanup_free_ char *p = xstrdup(dir);
	_cleanup_strv_ struct pisb_strv anc = PISB_STRV_INIT;
	size_t top = 0;
	bool found = false;
	char *s;

	/* dir itself first, then each parent up to "/" */
	for (;;) {
		_cleanup_free_ char *git = xasprintf("%s/.git", strcmp(p, "/") ? p : "");
		int fd = pisb_fs_resolve(w->o->rootfd, git, O_PATH | O_NOFOLLOW, 0);
		pisb_strv_push(&anc, p);
		if (fd >= 0) {
			close(fd);
			found = true;
			top = anc.n - 1;
			break;
		}
		if (!strcmp(p, "/"))
			break;
		s = strrchr(p, '/');
		if (s == p)
			s[1] = '\0';
		else
			*s = '\0';
	}
	if (!found)
		return;
	/* anc[0] is dir itself: its own .gitignore is read by the walk */
	for (size_t i = top; i >= 1; i--) {
		_cleanup_free_ char *gi = xasprintf("%s/.gitignore", strcmp(anc.v[i], "/") ? anc.v[i] : "");
		_cleanup_buf_ struct pisb_buf b = PISB_BUF_INIT;
		_cleanup_close_ int fd = pisb_fs_resolve(w->o->rootfd, gi, O_RDONLY | O_NONBLOCK, 0);
		struct stat st;
		if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && pisb_read_fd(fd, &b, 4 << 20) == 0)
			pisb_ignore_push(&w->ig, anc.v[i], b.s ? b.s : "", b.len);
	}
}

int pisb_walk(const struct pisb_walk_opts *o, pisb_walk_fn fn, void *arg, struct pisb_err *e)
{
	struct walker w = { o, fn, arg, e, PISB_IGNORE_INIT, PISB_BUF_INIT, 0, NULL };
	_cleanup_free_ char *dir = xstrdup(o->path);
	size_t n = strlen(dir);
	int r;

	while (n > 1 && dir[n - 1] == '/')
		dir[--n] = '\0';
	pisb_buf_adds(&w.path, dir);
	w.relofs = n == 1 ? 1 : n + 1;
	w.dents = xmalloc(DENTS_SIZE);
	if (o->ignore && dir[0] == '/')
		load_ancestors(&w, dir);
	r = walk_dir(&w, o->dirfd);
	free(w.dents);
	pisb_buf_release(&w.path);
	pisb_ignore_release(&w.ig);
	return r < 0 ? -1 : 0;
}
