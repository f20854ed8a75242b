/* image.c - `image: PATH` rootfs images, imported once into a cache.
 *
 * images/<KEY>-<UIDBASE>/rootfs/ with a `complete` marker beside it.  KEY is
 * the SHA-256 of a tarball's bytes (content-addressed: the same tarball
 * under another name is not imported twice); for a directory it is the hash
 * of its identity (path, device, inode, change time), so editing the
 * directory's top level re-imports it.  When pisb runs as root, owners are
 * shifted into the sandbox's id range (root inside = the range's base);
 * unprivileged, every file belongs to the caller, who is root inside.
 *
 * images/KEY-UIDBASE.lock: exclusive while that cache is imported (or
 * removed by gc), shared by every process that resolved it, for its whole
 * life (the pins below), so a mounted cache is never removed under a
 * sandbox.
 */
#include "image.h"
#include "err.h"
#include "lock.h"
#include "ns.h"
#include "sha256.h"
#include "state.h"
#include "util.h"

#include "archive_lazy.h"  /* libarchive: loaded on first use */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static int hash_file(const char *path, char hex[65], struct pisb_err *e)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	_cleanup_free_ char *buf = xmalloc(1 << 20);
	struct pisb_sha256 c;
	unsigned char d[32];
	ssize_t n;

	if (fd < 0)
		return pisb_err_sys(e, PISB_EXIT_NOTFOUND, "image '%s'", path);
	pisb_sha256_init(&c);
	while ((n = read(fd, buf, 1 << 20)) > 0)
		pisb_sha256_update(&c, buf, (size_t)n);
	if (n < 0)
		return pisb_err_sys(e, PISB_EXIT_FAIL, "read image '%s'", path);
	pisb_sha256_final(&c, d);
	pisb_sha256_hex(d, hex);
	return 0;
}

static void hash_identity(const char *real, const struct stat *sb, char hex[65])
{
	struct pisb_sha256 c;
	unsigned char d[32];
	char id[PATH_MAX + 128];
	int n = snprintf(id, sizeof(id), "dir\n%s\n%llu\n%llu\n%lld.%09ld", real,
			 (unsigned long long)sb->st_dev, (unsigned long long)sb->st_ino,
			 (long long)sb->st_ctim.tv_sec, sb->st_ctim.tv_nsec);
	pisb_sha256_init(&c);
	pisb_sha256_update(&c, id, (size_t)n);
	pisb_sha256_final(&c, d);
	pisb_sha256_hex(d, hex);
}

static void progress(bool tty, long long files, long long bytes, bool done)
{
	if (!tty)
		return;
	fprintf(stderr, "\rimporting image: %lld files, %.1f MiB%s", files,
		(double)bytes / (1 << 20), done ? "\n" : "");
	fflush(stderr);
}

/* Copy entries from src into the current directory. */
static int extract(struct archive *src, const struct pisb_ids *ids, const char *what,
		   struct pisb_err *e)
{
	struct archive *dst = archive_write_disk_new();
	struct archive_entry *ent;
	bool root = geteuid() == 0, tty = isatty(2);
	long long files = 0, bytes = 0;
	int flags = ARCHIVE_EXTRACT_PERM | ARCHIVE_EXTRACT_TIME | ARCHIVE_EXTRACT_SECURE_NODOTDOT |
		    ARCHIVE_EXTRACT_SECURE_SYMLINKS | ARCHIVE_EXTRACT_SECURE_NOABSOLUTEPATHS |
		    ARCHIVE_EXTRACT_UNLINK;
	int r, ret = -1;

	if (root)
		flags |= ARCHIVE_EXTRACT_OWNER;
	archive_write_disk_set_options(dst, flags);
	archive_write_disk_set_standard_lookup(dst);
	for (;;) {
		const char *name;
		mode_t type;

		r = archive_read_next_header(src, &ent);
		if (r == ARCHIVE_EOF)
			break;
		if (r < ARCHIVE_WARN) {
			pisb_err_set(e, PISB_EXIT_FAIL, "image '%s': %s", what, archive_error_string(src));
			goto out;
		}
		name = archive_entry_pathname(ent);
		while (name && name[0] == '.' && name[1] == '/')
			name += 2;
		if (!name || !*name || !strcmp(name, "."))
			continue;
		archive_entry_set_pathname(ent, name);
		type = archive_entry_filetype(ent);
		/* the sandbox gets its own /dev: device nodes are not needed */
		if (type == AE_IFCHR || type == AE_IFBLK)
			continue;
		if (root) {
			la_int64_t u = archive_entry_uid(ent), g = archive_entry_gid(ent);
			archive_entry_set_uid(ent, (u >= 0 && u < (la_int64_t)ids->count ? u : 65534) + ids->uid_base);
			archive_entry_set_gid(ent, (g >= 0 && g < (la_int64_t)ids->count ? g : 65534) + ids->gid_base);
			archive_entry_set_uname(ent, NULL);
			archive_entry_set_gname(ent, NULL);
		}
		r = archive_write_header(dst, ent);
		if (r < ARCHIVE_WARN) {
			pisb_err_set(e, PISB_EXIT_FAIL, "image '%s': '%s': %s", what, name,
				     archive_error_string(dst));
			goto out;
		}
		if (archive_entry_size(ent) > 0) {
			const void *buf;
			size_t size;
			la_int64_t off;
			while ((r = archive_read_data_block(src, &buf, &size, &off)) == ARCHIVE_OK) {
				if (archive_write_data_block(dst, buf, size, off) < ARCHIVE_WARN) {
					pisb_err_set(e, PISB_EXIT_FAIL, "image '%s': write '%s': %s", what,
						     name, archive_error_string(dst));
					goto out;
				}
				bytes += (long long)size;
			}
			if (r < ARCHIVE_WARN) {
				pisb_err_set(e, PISB_EXIT_FAIL, "image '%s': %s", what, archive_error_string(src));
				goto out;
			}
		}
		archive_write_finish_entry(dst);
		if (++files % 512 == 0)
			progress(tty, files, bytes, false);
	}
	if (archive_write_close(dst) < ARCHIVE_WARN) {
		pisb_err_set(e, PISB_EXIT_FAIL, "image '%s': %s", what, archive_error_string(dst));
		goto out;
	}
	progress(tty, files, bytes, true);
	ret = 0;
out:
	archive_write_free(dst);
	return ret;
}

/* Import a tarball, or a directory (streamed through tar), into `into`. */
/* tar ended badly: say why, with the first of what it wrote on stderr */
static int tar_failed(const char *path, int errfd, int st, struct pisb_err *e)
{
	char msg[512];
	ssize_t n = errfd >= 0 ? pread(errfd, msg, sizeof(msg) - 1, 0) : -1;

	msg[n > 0 ? n : 0] = 0;
	msg[strcspn(msg, "\n")] = 0;
	if (*msg)
		return pisb_err_set(e, PISB_EXIT_FAIL, "image '%s': tar could not read the directory: %s",
				    path, msg);
	return pisb_err_set(e, PISB_EXIT_FAIL, "image '%s': tar could not read the directory (%s %d)",
			    path, WIFEXITED(st) ? "exit" : "signal", WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
}

static int import(const char *path, bool dir, const struct pisb_ids *ids, int into,
		  struct pisb_err *e)
{
	struct archive *src = archive_read_new();
	_cleanup_close_ int cwd = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC);
	_cleanup_close_ int errfd = -1;
	int p[2] = { -1, -1 }, r = -1, st = 0;
	pid_t tar = -1;

	archive_read_support_filter_all(src);
	archive_read_support_format_all(src);
	if (dir) {
		/* tar's complaints, to name them if it fails */
		errfd = memfd_create("pisb-tar-stderr", MFD_CLOEXEC);
		if (errfd < 0 || pipe2(p, O_CLOEXEC) < 0) {
			pisb_err_sys(e, PISB_EXIT_FAIL, "pipe");
			goto out;
		}
		tar = fork();
		if (tar < 0) {
			pisb_err_sys(e, PISB_EXIT_FAIL, "fork");
			goto out;
		}
		if (tar == 0) {
			dup2(p[1], 1);
			dup2(errfd, 2);
			execlp("tar", "tar", "--numeric-owner", "-C", path, "-cf", "-", ".", (char *)NULL);
			_exit(127);
		}
		close(p[1]);
		p[1] = -1;
		if (archive_read_open_fd(src, p[0], 1 << 16) != ARCHIVE_OK) {
			pisb_err_set(e, PISB_EXIT_FAIL, "image '%s': %s", path, archive_error_string(src));
			goto out;
		}
	} else if (archive_read_open_filename(src, path, 1 << 16) != ARCHIVE_OK) {
		pisb_err_set(e, PISB_EXIT_FAIL, "image '%s': %s", path, archive_error_string(src));
		goto out;
	}
	if (fchdir(into) < 0) {
		pisb_err_sys(e, PISB_EXIT_FAIL, "enter the image cache");
		goto out;
	}
	r = extract(src, ids, path, e);
	if (cwd >= 0 && fchdir(cwd) < 0 && r == 0)
		r = pisb_err_sys(e, PISB_EXIT_FAIL, "return to the working directory");
out:
	archive_read_free(src);
	if (p[0] >= 0)
		close(p[0]);
	if (p[1] >= 0)
		close(p[1]);
	if (tar > 0 && (waitpid(tar, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st)) && r == 0)
		r = tar_failed(path, errfd, st, e);
	return r;
}

/* The caches this process resolved, each pinned by a shared lock on
 * images/KEY-UIDBASE.lock that stays held until the process exits (see
 * image.h). */
struct pin {
	char name[96];
	int fd;
};
static struct pin *pins;
static size_t npins;

static struct pin *pin_find(const char *name)
{
	for (size_t i = 0; i < npins; i++)
		if (!strcmp(pins[i].name, name))
			return &pins[i];
	return NULL;
}

static void pin_add(const char *name, int fd)
{
	pins = xrealloc(pins, (npins + 1) * sizeof(*pins));
	snprintf(pins[npins].name, sizeof(pins[npins].name), "%s", name);
	pins[npins].fd = fd;
	npins++;
}

/* Drop our own pin on a cache: flock(2) locks belong to open files, so an
 * exclusive lock taken through another fd would wait for it forever. */
static void pin_drop(const char *name)
{
	struct pin *p = pin_find(name);

	if (!p)
		return;
	close(p->fd);
	*p = pins[--npins];
}

/* Build images/<dir> from path, under its exclusive lock. */
static int import_cache(struct pisb_state *st, const char *real, bool isdir,
			const struct pisb_ids *ids, const char *key, const char *dir,
			const char *marker, struct pisb_err *e)
{
	_cleanup_free_ char *tmp = NULL, *r = NULL;
	_cleanup_close_ int tfd = -1;

	/* extract beside, publish with a rename */
	{
		char rnd[9];
		struct pisb_err ig = PISB_ERR_INIT;
		snprintf(rnd, sizeof(rnd), "%08x", (unsigned)getpid());
		tmp = xasprintf("images/.import-%s-%s", key, rnd);
		pisb_rm_rf_at(st->fd, tmp, &ig);
		pisb_rm_rf_at(st->fd, dir, &ig);
	}
	r = xasprintf("%s/rootfs", tmp);
	if (pisb_mkdirs_at(st->fd, r, 0755, e) < 0)
		goto fail;
	tfd = openat(st->fd, r, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (tfd < 0) {
		pisb_err_sys(e, PISB_EXIT_FAIL, "open '%s'", r);
		goto fail;
	}
	if (geteuid() == 0)
		fchownat(st->fd, r, ids->uid_base, ids->gid_base, 0);
	if (pisb_archive_load(e) < 0 || import(real, isdir, ids, tfd, e) < 0)
		goto fail;
	if (renameat(st->fd, tmp, st->fd, dir) < 0) {
		pisb_err_sys(e, PISB_EXIT_FAIL, "publish image '%s'", real);
		goto fail;
	}
	/* without the marker, the next user imports it again */
	if (pisb_atomic_write(st->fd, marker, "ok\n", 3, 0600, e) < 0)
		return pisb_err_prefix(e, "publish image '%s'", real);
	return 0;
fail:
	{
		struct pisb_err ig = PISB_ERR_INIT;
		pisb_rm_rf_at(st->fd, tmp, &ig);
	}
	return -1;
}

char *pisb_image_get(struct pisb_state *st, const char *path,
		     const struct pisb_ids *ids, char **cache, struct pisb_err *e)
{
	struct stat sb;
	char key[65], real[PATH_MAX];
	_cleanup_free_ char *name = NULL, *dir = NULL, *marker = NULL, *rootfs = NULL, *lk = NULL;
	bool isdir;
	int lock = -1;

	if (cache)
		*cache = NULL;
	if (stat(path, &sb) < 0 || !realpath(path, real)) {
		pisb_err_sys(e, PISB_EXIT_NOTFOUND, "image '%s'", path);
		return NULL;
	}
	isdir = S_ISDIR(sb.st_mode);
	if (!isdir && !S_ISREG(sb.st_mode)) {
		pisb_err_set(e, PISB_EXIT_USAGE, "image '%s': not a directory or a tarball", path);
		return NULL;
	}
	if (isdir)
		hash_identity(real, &sb, key);
	else if (hash_file(real, key, e) < 0)
		return NULL;
	name = xasprintf("%s-%u", key, (unsigned)ids->uid_base);
	dir = xasprintf("images/%s", name);
	marker = xasprintf("%s/complete", dir);
	rootfs = xasprintf("%s/%s/rootfs", st->path, dir);
	lk = pisb_image_lock_path(name);
	if (pin_find(name) && faccessat(st->fd, marker, F_OK, 0) == 0)
		goto done;
	pin_drop(name);
	if (pisb_mkdirs_at(st->fd, "images", 0700, e) < 0)
		return NULL;
	for (int tries = 0;; tries++) {
		/* shared: waits out an import or a gc removal; under it the
		 * marker can be trusted, and nobody can remove the cache */
		lock = pisb_lock_acquire(st->fd, lk, false, -1, "the image cache", e);
		if (lock < 0)
			return NULL;
		if (faccessat(st->fd, marker, F_OK, 0) == 0)
			break;
		close(lock);
		if (tries == 3) {
			pisb_err_set(e, PISB_EXIT_FAIL,
				     "image '%s': its cache in '%s' keeps disappearing (is a pisb gc removing it?)",
				     path, dir);
			return NULL;
		}
		lock = pisb_lock_acquire(st->fd, lk, true, -1, "the image cache", e);
		if (lock < 0)
			return NULL;
		if (faccessat(st->fd, marker, F_OK, 0) < 0 &&
		    import_cache(st, real, isdir, ids, key, dir, marker, e) < 0) {
			close(lock);
			return NULL;
		}
		/* flock cannot turn exclusive into shared atomically: let go
		 * and take it shared, then check again */
		close(lock);
	}
	pin_add(name, lock);
done:
	if (cache)
		*cache = PISB_STEAL(name);
	return PISB_STEAL(rootfs);
}

char *pisb_image_cached(struct pisb_state *st, const char *cache, struct pisb_err *e)
{
	_cleanup_free_ char *marker = NULL, *lk = NULL;
	int lock;

	if (!*cache || strchr(cache, '/') || cache[0] == '.') {
		pisb_err_set(e, PISB_EXIT_USAGE, "image cache '%s': not a cache name", cache);
		return NULL;
	}
	marker = xasprintf("images/%s/complete", cache);
	if (!pin_find(cache)) {
		lk = pisb_image_lock_path(cache);
		/* shared, as for a resolved path: gc cannot remove it now */
		if (faccessat(st->fd, marker, F_OK, 0) < 0 ||
		    (lock = pisb_lock_acquire(st->fd, lk, false, -1, "the image cache", e)) < 0) {
			if (!e->code)
				pisb_err_set(e, PISB_EXIT_NOTFOUND, "image cache 'images/%s' is gone", cache);
			return NULL;
		}
		if (faccessat(st->fd, marker, F_OK, 0) < 0) {
			close(lock);
			pisb_err_set(e, PISB_EXIT_NOTFOUND, "image cache 'images/%s' is gone", cache);
			return NULL;
		}
		pin_add(cache, lock);
	}
	return xasprintf("%s/images/%s/rootfs", st->path, cache);
}

char *pisb_image_path(struct pisb_state *st, const char *path,
		      const struct pisb_ids *ids, struct pisb_err *e)
{
	return pisb_image_get(st, path, ids, NULL, e);
}
