/* vm_image.c - `image: PATH` for the vm driver: the rootfs as a read-only
 * ext4 disk (see vm_internal.h).
 *
 * The rootfs comes from image.h's cache, keyed as for the local driver: a
 * tarball by the SHA-256 of its bytes, a directory by its identity (path,
 * device, inode, change time of its top level).  A tarball is unpacked as
 * data by libarchive (no host tool runs on it, and its symlinks are never
 * followed); a directory is streamed through tar without -h.  Owners stay
 * as the image has them (ids base 0): root in the guest is the guest
 * kernel's.  Beside it, made once and never written again:
 *
 *   images/KEY-0/root.ext4   0444, mke2fs -d of rootfs/, no journal
 *
 * It is published with link(2), which never replaces: two creates racing
 * both build, one wins, the other's copy goes, and a file a guest has open
 * is never swapped under it.  Each instance gets a hard link, root.img, so
 * it keeps its root whatever happens to the cache (gc, a changed image);
 * QEMU opens it read-only, and the guest's writes go to the instance's own
 * disk (the overlay's upper), never to the shared file.
 */
#include "vm_internal.h"
#include "vm_proto.h"
#include "err.h"
#include "image.h"
#include "ns.h"
#include "proc.h"
#include "state.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static long long walk_bytes, walk_files;

static int walk_one(const char *path, const struct stat *st, int flag, struct FTW *f)
{
	(void)path, (void)flag, (void)f;
	walk_bytes += (long long)st->st_blocks * 512 + 4096;
	walk_files++;
	return 0;
}

static int sync_file(int dirfd, const char *rel)
{
	_cleanup_close_ int fd = openat(dirfd, rel, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);

	return fd < 0 ? -1 : fsync(fd);
}

/* images/CACHE/root.ext4 from rootfs, published without replacing */
static int build_base(struct pisb_state *st, const char *cache, const char *rootfs,
		      const char *mke2fs, struct pisb_err *e)
{
	_cleanup_free_ char *rel = xasprintf("images/%s/.root.ext4.%d", cache, (int)getpid());
	_cleanup_free_ char *tmp = xasprintf("%s/%s", st->path, rel);
	_cleanup_free_ char *base = xasprintf("images/%s/root.ext4", cache);
	_cleanup_buf_ struct pisb_buf out = PISB_BUF_INIT;
	char size[32], inodes[32];
	int xe = 0, code;
	long long kib;

	walk_bytes = walk_files = 0;
	if (nftw(rootfs, walk_one, 32, FTW_PHYS) < 0)
		return pisb_err_sys(e, PISB_EXIT_FAIL, "measure the image's rootfs '%s'", rootfs);
	/* room for the file system's own metadata; it is never written */
	kib = (walk_bytes + walk_bytes / 4) / 1024 + 16384;
	snprintf(size, sizeof(size), "%lldk", kib);
	snprintf(inodes, sizeof(inodes), "%lld", walk_files + 256);
	unlinkat(st->fd, rel, 0);
	{
		char *argv[] = { (char *)mke2fs, "-q", "-F", "-t", "ext4", "-O", "^has_journal", "-L", "pisb-image",
				 "-m", "0", "-N", inodes, "-d", (char *)rootfs, tmp, size, NULL };
		code = pisb_run_capture(argv, NULL, true, 8192, 600000, &out, &xe);
	}
	if (code != 0) {
		unlinkat(st->fd, rel, 0);
		return pisb_err_set(e, PISB_EXIT_BACKEND, "make the image's disk with mke2fs: %s",
				    out.s && out.len ? out.s : code == -1 ? strerror(xe) : "failed");
	}
	if (fchmodat(st->fd, rel, 0444, 0) < 0 || sync_file(st->fd, rel) < 0 ||
	    (linkat(st->fd, rel, st->fd, base, 0) < 0 && errno != EEXIST)) {
		pisb_err_sys(e, PISB_EXIT_FAIL, "publish '%s'", base);
		unlinkat(st->fd, rel, 0);
		return -1;
	}
	unlinkat(st->fd, rel, 0);
	return 0;
}

int vm_image_root(struct pisb_state *st, int sdir, const char *image, const char *mke2fs,
		  char **cachep, struct pisb_err *e)
{
	struct pisb_ids ids = { 0, 0, 65536 };
	_cleanup_free_ char *cache = NULL, *rootfs = NULL, *base = NULL;

	if (!(rootfs = pisb_image_get(st, image, &ids, &cache, e)))
		return -1;
	base = xasprintf("images/%s/root.ext4", cache);
	if (faccessat(st->fd, base, F_OK, AT_SYMLINK_NOFOLLOW) < 0 &&
	    build_base(st, cache, rootfs, mke2fs, e) < 0)
		return pisb_err_prefix(e, "image '%s'", image);
	if (linkat(st->fd, base, sdir, "root.img", 0) < 0)
		return pisb_err_sys(e, PISB_EXIT_FAIL, "image '%s': link '%s' into the sandbox", image, base);
	*cachep = PISB_STEAL(cache);
	return 0;
}
