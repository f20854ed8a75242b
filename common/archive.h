/* archive.h - push and pull: a tree copied between the host and a sandbox
 * as one pax archive (libarchive) through a pipe.
 *
 * Both ends hash every archive byte they write or read (SHA-256); the
 * receiving end compares the two digests before anything it extracted is
 * put in place:
 *
 *   push  the host (parent) writes the archive; a child enters the sandbox,
 *         extracts into a fresh directory next to the target, checks the
 *         digest the parent sends after the data, then swaps the new tree in
 *         (RENAME_EXCHANGE, else two renames) and removes the old one.
 *   pull  a child enters the sandbox and writes the archive; the host
 *         (parent) extracts it into a staging directory inside HOSTDIR,
 *         checks the child's digest, then moves the files into HOSTDIR.
 *         Existing host files are replaced by rename; a directory is never
 *         replaced by a file or the reverse, and no host symlink is
 *         followed.
 *
 * Extraction refuses, and then writes nothing in place, any entry with an
 * absolute name, a ".." component, a hard link that points outside the
 * tree, or a type other than file, directory, symlink or hard link, and
 * never writes through a symlink.  On the host (pull) a symlink that points
 * outside the tree (absolute, or climbing above its root) is refused too;
 * inside a sandbox (push) symlinks may point anywhere, since anywhere is
 * still the sandbox.  Sparse files keep their holes both ways (local
 * sandboxes).  Set-user/group-id bits are dropped.  Owners are not restored (files belong to the receiving user:
 * root inside the sandbox, the caller on the host).
 */
#ifndef PISB_ARCHIVE_H
#define PISB_ARCHIVE_H

#include <stdbool.h>
#include <sys/types.h>
#include "sha256.h"

struct archive;
struct pisb_err;
struct pisb_fs;

/* An archive read from a file descriptor: libarchive's read callback
 * (archive_read_open with this as ctx) hashes every byte it hands out
 * and counts them. */
struct pisb_archive_src {
	int fd;
	struct pisb_sha256 sha;   /* pisb_sha256_init before the first read */
	long long n;
	char buf[64 * 1024];
};
ssize_t pisb_archive_src_read(struct archive *a, void *ctx, const void **out);

/* Whether relative path p has a component named .git, in any case (a
 * case-insensitive host file system takes .GIT for it). */
bool pisb_path_in_git_dir(const char *p);

/* What one pull may do on the host. */
#define PISB_PULL_MAX_BYTES (10LL << 30)   /* default cap of file data written */
struct pisb_pull_opts {
	bool include_git;         /* entries under a .git directory (else left out) */
	long long max_bytes;      /* file data written at most (holes are free); 0: the default */
};

struct pisb_xfer {
	long long files;          /* entries that are not directories */
	long long bytes;          /* bytes of file content */
	long long archive_bytes;  /* bytes of the archive itself */
	char sha256[65];          /* of the archive bytes */
	char *where;              /* owned: push: target inside; pull: HOSTDIR */
	bool kept_config;         /* push: <workspace>/.sandbox.yaml carried over */
	long long left_out_git;   /* pull: entries under .git left out */
};
void pisb_xfer_release(struct pisb_xfer *x);

/* Files sent by push: git's tracked files (as they are in the working
 * tree; deleted ones skipped) when hostdir is in a git checkout and all is
 * false, else every file under hostdir.  The tracked files come from the
 * index file read by pisb (gitindex.h): no git runs, so nothing of the
 * checkout's config, hooks or attributes executes; a tracked path is
 * opened without following any symlink on the way (one through a symlink
 * is left out, as git would never track it). */
int pisb_push(struct pisb_fs *fs, const char *hostdir, const char *to, bool all,
	      struct pisb_xfer *x, struct pisb_err *e);
/* The directory push replaces, for an absolute path: ".." components
 * resolved by name ("/a/b/.." is "/a", never above "/"), so "--to .."
 * names the directory it will replace (and "/" is refused as such).
 * Caller frees. */
char *pisb_push_target(const char *abs);
/* path: a directory (its contents land in hostdir) or a file (it lands as
 * hostdir/NAME).  hostdir is created if missing.
 * Test hook: with $PISB_TEST_PULL_ARCHIVE set to a file, that archive is
 * extracted instead of one made in the sandbox (no sandbox is entered and
 * no digest compared), so the refusal rules can be tried on crafted
 * archives. */
/* Without o->include_git, archive entries under a directory named .git
 * are left out (counted in x->left_out_git), and a PATH or HOSTDIR with a
 * .git component is refused (exit 2): a tree out of a sandbox must not
 * bring git config or hooks that git on the host would run.  Holes of
 * sparse files stay holes; more than o->max_bytes of file data fails the
 * pull (exit 1) with nothing moved into HOSTDIR.  A host symlink where an
 * entry lands is a conflict (exit 4, nothing changed). */
int pisb_pull(struct pisb_fs *fs, const char *path, const char *hostdir,
	      const struct pisb_pull_opts *o, struct pisb_xfer *x, struct pisb_err *e);
/* The .git rule above for a PATH inside (NULL: not checked) and HOSTDIR
 * (o NULL: the defaults). */
int pisb_pull_check(const char *path, const char *hostdir, const struct pisb_pull_opts *o,
		    struct pisb_err *e);

/* The two halves a remote driver needs (opensandbox: the archive travels
 * over HTTP, made or unpacked by tar inside the sandbox).
 * pisb_push_archive: push's archive of hostdir (the same file selection)
 * onto fd; x gets files, bytes, archive_bytes and sha256.
 * pisb_pull_archive: pull's host side for the archive on fd: extracted
 * into a staging directory inside hostdir by the rules above (devices,
 * fifos and sockets are left out, as the local side leaves them out), its
 * digest compared with want (64 hex) before anything is moved into place. */
int pisb_push_archive(const char *hostdir, bool all, int fd, struct pisb_xfer *x,
		      struct pisb_err *e);
int pisb_pull_archive(int fd, const char *want, const char *hostdir,
		      const struct pisb_pull_opts *o, struct pisb_xfer *x, struct pisb_err *e);

/* The sandbox side of a remote push (opensandbox, vm), as POSIX shell run
 * there with tar and sha256sum (or busybox, shasum, openssl) of its own:
 * pisb_xfer_sh_prelude defines fail CODE MSG (removes $A and the staging
 * dir $S), have, TAR, SUM and digest (of $A into $d; exit 127 when a tool
 * is missing).  pisb_push_sh then, with A the archive, T the target, W the
 * host's digest, H random hex, K 1 when T is the workspace (its
 * .sandbox.yaml kept unless the tree has one), S empty: checks the digest,
 * unpacks into a fresh directory next to T (inside it when T is a mount
 * point) and swaps the trees, so T holds the old tree or the new one,
 * never a mix; prints "pisb-ok KEPT" (KEPT 1 when .sandbox.yaml was kept).
 * A target that is a symlink or not a directory: exit 1, nothing changed. */
extern const char pisb_xfer_sh_prelude[];
extern const char pisb_push_sh[];

#endif
