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
 * still the sandbox.  Set-user/group-id bits are dropped.  Owners are not restored (files belong to the receiving user:
 * root inside the sandbox, the caller on the host).
 */
#ifndef PISB_ARCHIVE_H
#define PISB_ARCHIVE_H

#include <stdbool.h>

struct pisb_err;
struct pisb_fs;

struct pisb_xfer {
	long long files;          /* entries that are not directories */
	long long bytes;          /* bytes of file content */
	long long archive_bytes;  /* bytes of the archive itself */
	char sha256[65];          /* of the archive bytes */
	char *where;              /* owned: push: target inside; pull: HOSTDIR */
	bool kept_config;         /* push: <workspace>/.sandbox.yaml carried over */
};
void pisb_xfer_release(struct pisb_xfer *x);

/* Files sent by push: git's tracked files (as they are in the working
 * tree; deleted ones skipped) when hostdir is in a git checkout and all is
 * false, else every file under hostdir. */
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
int pisb_pull(struct pisb_fs *fs, const char *path, const char *hostdir,
	      struct pisb_xfer *x, struct pisb_err *e);

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
		      struct pisb_xfer *x, struct pisb_err *e);

#endif
