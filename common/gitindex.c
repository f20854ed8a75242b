/* gitindex.c - tracked paths from the git index file; see gitindex.h.
 *
 * The format (git's Documentation/gitformat-index.txt): "DIRC", version,
 * entry count, then the entries: 40 bytes of stat data, the object name
 * (20 or 32 bytes), 16 bits of flags (low 12: name length, capped at
 * 0xfff; 0x4000: extended, version 3 and up, 16 more bits), the name.
 * Versions 2 and 3 end the name with 1-8 NULs (entry length a multiple of
 * 8); version 4 prefixes it with a varint: how many bytes to drop from the
 * end of the previous name before appending this NUL-terminated suffix.
 * Extensions follow the entries; only "link" (split index) changes which
 * entries exist, and it is refused. */
#include "gitindex.h"
#include "err.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define INDEX_MAX ((size_t)1 << 30)
#define DEPTH_MAX 16               /* submodules inside submodules */

static uint32_t be32(const unsigned char *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* git's offset varint; false when it overruns end or overflows. */
static bool varint(const unsigned char **pp, const unsigned char *end, size_t *out)
{
	const unsigned char *p = *pp;
	size_t v;
	unsigned char c;

	if (p >= end)
		return false;
	c = *p++;
	v = c & 127;
	while (c & 128) {
		if (p >= end || v > (SIZE_MAX >> 8))
			return false;
		c = *p++;
		v = ((v + 1) << 7) | (c & 127);
	}
	*pp = p;
	*out = v;
	return true;
}

/* A name git itself would accept: relative, no empty, "." or ".."
 * component, none named .git (any case). */
static bool sane_path(const char *p)
{
	if (!*p || *p == '/')
		return false;
	while (*p) {
		size_t n = strcspn(p, "/");
		if (n == 0 || (n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.') ||
		    (n == 4 && !strncasecmp(p, ".git", 4)))
			return false;
		p += n;
		if (*p == '/' && !*++p)
			return false;
	}
	return true;
}

struct entry {
	const char *name;      /* NUL-terminated, valid until the next entry */
	size_t len;
	uint32_t mode;
};

struct reader {
	const unsigned char *p, *end;
	uint32_t version, left;
	size_t hashsz;
	struct pisb_buf name;  /* version 4: the previous name */
};

/* The next entry into en; 1 done, 0 ok, -1 damaged. */
static int next_entry(struct reader *r, struct entry *en)
{
	const unsigned char *start = r->p, *q;
	size_t fixed = 40 + r->hashsz + 2, nl;
	uint16_t flags;

	if (!r->left)
		return 1;
	r->left--;
	if ((size_t)(r->end - r->p) < fixed)
		return -1;
	en->mode = be32(r->p + 24);
	flags = (uint16_t)(r->p[fixed - 2] << 8 | r->p[fixed - 1]);
	q = r->p + fixed;
	if (flags & 0x4000) {
		if (r->version < 3 || r->end - q < 2)
			return -1;
		q += 2;
	}
	if (r->version == 4) {
		size_t drop;
		const unsigned char *z;
		if (!varint(&q, r->end, &drop) || drop > r->name.len)
			return -1;
		z = memchr(q, 0, (size_t)(r->end - q));
		if (!z)
			return -1;
		r->name.len -= drop;
		pisb_buf_add(&r->name, q, (size_t)(z - q));
		r->p = z + 1;
		en->name = r->name.s ? r->name.s : "";
		en->len = r->name.len;
	} else {
		const unsigned char *z = memchr(q, 0, (size_t)(r->end - q));
		size_t total;
		if (!z)
			return -1;
		nl = (size_t)(z - q);
		total = ((size_t)(q - start) + nl + 8) & ~(size_t)7;
		if ((size_t)(r->end - start) < total)
			return -1;
		pisb_buf_reset(&r->name);
		pisb_buf_add(&r->name, q, nl);
		r->p = start + total;
		en->name = r->name.s ? r->name.s : "";
		en->len = nl;
	}
	/* the length in the flags must agree: how a wrong object-name size
	 * (SHA-1 against SHA-256) shows */
	if ((flags & 0xfff) != (en->len < 0xfff ? en->len : 0xfff))
		return -1;
	return 0;
}

/* After the entries: 1 when a split-index "link" extension is there. */
static bool split_index(const unsigned char *p, const unsigned char *end, size_t hashsz)
{
	while ((size_t)(end - p) >= 8 + hashsz) {
		uint32_t n = be32(p + 4);
		if (!memcmp(p, "link", 4))
			return true;
		if ((size_t)(end - p) - 8 < n)
			break;
		p += 8 + n;
	}
	return false;
}

struct walk {
	const char *prefix;    /* of dir, relative to the top of the checkout, "" or ending in '/' */
	struct pisb_buf *out;
	struct pisb_err *e;
};

static int read_index(const char *top, const char *gitdir, const char *sub, int depth,
		      struct walk *w);

/* The git directory of the checkout at top (its ".git": a directory, or a
 * file "gitdir: PATH"); NULL when there is none.  Caller frees. */
static char *find_gitdir(const char *top)
{
	_cleanup_free_ char *dotgit = xasprintf("%s/.git", strcmp(top, "/") ? top : "");
	_cleanup_buf_ struct pisb_buf b = PISB_BUF_INIT;
	struct stat st;
	char *p, *nl;

	if (stat(dotgit, &st) < 0)
		return NULL;
	if (S_ISDIR(st.st_mode))
		return PISB_STEAL(dotgit);
	if (!S_ISREG(st.st_mode) || pisb_read_file_at(AT_FDCWD, dotgit, &b, 4096) < 0 || !b.s ||
	    !pisb_str_starts(b.s, "gitdir: "))
		return NULL;
	p = b.s + 8;
	nl = strchr(p, '\n');
	if (nl)
		*nl = '\0';
	if (!*p)
		return NULL;
	return p[0] == '/' ? xstrdup(p) : xasprintf("%s/%s", top, p);
}

/* One index: every entry under w->prefix (sub: where this checkout sits
 * in the outer one, "" or ending in '/'). */
static int read_index(const char *top, const char *gitdir, const char *sub, int depth,
		      struct walk *w)
{
	_cleanup_free_ char *path = xasprintf("%s/index", gitdir);
	_cleanup_buf_ struct pisb_buf raw = PISB_BUF_INIT;
	_cleanup_buf_ struct pisb_buf full = PISB_BUF_INIT;
	_cleanup_close_ int fd = open(path, O_RDONLY | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
	static const size_t sizes[] = { 20, 32 };
	size_t plen = strlen(w->prefix);
	struct stat st;

	if (fd < 0) {
		if (errno == ENOENT)
			return 0;   /* nothing added yet: nothing tracked */
		return pisb_err_sys(w->e, PISB_EXIT_FAIL, "open the git index of '%s'", top);
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
		return pisb_err_set(w->e, PISB_EXIT_FAIL, "the git index of '%s' is not a regular file", top);
	if (pisb_read_fd(fd, &raw, INDEX_MAX) < 0)
		return pisb_err_sys(w->e, PISB_EXIT_FAIL, "read the git index of '%s'", top);
	if (raw.len < 12 || memcmp(raw.s, "DIRC", 4))
		return pisb_err_set(w->e, PISB_EXIT_FAIL, "the git index of '%s' is damaged (no DIRC header)", top);
	for (size_t k = 0; k < 2; k++) {
		struct reader r = { (const unsigned char *)raw.s + 12, (const unsigned char *)raw.s + raw.len,
				    be32((const unsigned char *)raw.s + 4), be32((const unsigned char *)raw.s + 8),
				    sizes[k], PISB_BUF_INIT };
		struct entry en;
		size_t before = w->out->len;
		_cleanup_free_ char *last = NULL;
		int n;

		if (r.version < 2 || r.version > 4) {
			pisb_buf_release(&r.name);
			return pisb_err_set(w->e, PISB_EXIT_FAIL,
					    "the git index of '%s' has version %u, which pisb does not read (use --all)",
					    top, r.version);
		}
		while ((n = next_entry(&r, &en)) == 0) {
			uint32_t type = en.mode & 0170000;

			if (last && !strcmp(last, en.name))
				continue;   /* a conflict: one name per stage */
			free(last);
			last = xstrdup(en.name);
			if (!sane_path(en.name)) {
				pisb_buf_release(&r.name);
				w->out->len = before;
				return pisb_err_set(w->e, PISB_EXIT_FAIL,
						    "the git index of '%s' lists an unsafe path; refusing to push", top);
			}
			pisb_buf_reset(&full);
			pisb_buf_adds(&full, sub);
			pisb_buf_adds(&full, en.name);
			if (plen && (full.len <= plen || strncmp(full.s, w->prefix, plen)))
				continue;   /* outside dir */
			if (type == 0100000 || type == 0120000) {
				pisb_buf_add(w->out, full.s + plen, full.len - plen + 1);
			} else if (type == 0160000 && depth < DEPTH_MAX) {
				/* a submodule: its own checkout, when it is there */
				_cleanup_free_ char *stop = xasprintf("%s/%s", top, en.name);
				_cleanup_free_ char *sgit = find_gitdir(stop);
				_cleanup_free_ char *ssub = xasprintf("%s/", full.s);
				if (sgit && read_index(stop, sgit, ssub, depth + 1, w) < 0) {
					pisb_buf_release(&r.name);
					return -1;
				}
			}
			/* else a sparse-index directory: not in the working tree */
		}
		if (n == 1 && split_index(r.p, r.end, r.hashsz)) {
			pisb_buf_release(&r.name);
			return pisb_err_set(w->e, PISB_EXIT_FAIL,
					    "the git index of '%s' is a split index, which pisb does not read (use --all)",
					    top);
		}
		pisb_buf_release(&r.name);
		if (n == 1)
			return 0;
		w->out->len = before;   /* try the other object-name size */
	}
	return pisb_err_set(w->e, PISB_EXIT_FAIL, "the git index of '%s' is damaged", top);
}

int pisb_git_tracked(const char *dir, struct pisb_buf *out, struct pisb_err *e)
{
	_cleanup_free_ char *abs = realpath(dir, NULL);
	_cleanup_free_ char *prefix = NULL;
	struct walk w = { "", out, e };

	if (!abs)
		return pisb_err_sys(e, PISB_EXIT_FAIL, "resolve '%s'", dir);
	/* up from dir to the first directory with a .git, as git looks */
	for (size_t len = strlen(abs);;) {
		_cleanup_free_ char *top = xstrndup(abs, len ? len : 1);
		_cleanup_free_ char *gitdir = find_gitdir(top);
		const char *slash;

		if (gitdir) {
			const char *rest = abs + len + (abs[len] == '/');
			prefix = *rest ? xasprintf("%s/", rest) : xstrdup("");
			w.prefix = prefix;
			return read_index(top, gitdir, "", 0, &w);
		}
		if (len <= 1)
			return 1;
		slash = memrchr(abs, '/', len);
		len = slash && slash != abs ? (size_t)(slash - abs) : 1;
	}
}
