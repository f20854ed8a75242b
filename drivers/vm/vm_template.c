/* vm_template.c - templates of the vm driver: a copy's disk, and
 * destroy --template.
 *
 * A template is templates/NAME/ with its record and disk.img: the raw
 * ext4 disk of a VM that ran setup and powered off (vm.c's prepare),
 * made read-only (0400).  A sandbox made from it has no disk.img of its
 * own but disk.qcow2, a qcow2 overlay whose backing file is the
 * template's disk, by the relative name ../../templates/NAME/disk.img
 * (so the state directory may move) and format raw: QEMU opens the
 * template's disk read-only, every write of the sandbox's goes to its
 * overlay, and no two sandboxes share anything writable.  Formats are
 * always named, never probed: the template's disk is bytes its guest
 * wrote, and its first sector could hold any image header.
 *
 * The template's op.lock orders copies against removal: a create holds
 * it from before its overlay exists until the sandbox is published
 * (its record names the template); destroy --template holds it while
 * it looks for sandboxes that use the template and refuses (4) while
 * there is one.
 */
#include "vm.h"
#include "vm_internal.h"
#include "config.h"
#include "driver.h"
#include "err.h"
#include "instance.h"
#include "lock.h"
#include "proc.h"
#include "state.h"
#include "util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define GIB (1024LL * 1024 * 1024)

int vm_template_hold(struct pisb_state *st, const char *tname, const struct pisb_config *cfg,
		     int wait_ms, struct pisb_err *e)
{
	_cleanup_close_ int tdir = pisb_instance_open(st, "templates", tname, e);
	_cleanup_close_ int lock = -1;
	struct pisb_record rec;
	struct stat sb;
	char what[96];
	bool vm;

	if (tdir < 0)
		return -1;
	if (pisb_record_load(tdir, &rec, e) < 0)
		return pisb_err_prefix(e, "template '%s'", tname);
	vm = !strcmp(rec.driver, "vm");
	pisb_record_release(&rec);
	if (!vm)
		return pisb_err_set(e, PISB_EXIT_USAGE, "--template: template '%s' was not prepared by the vm driver",
				    tname);
	snprintf(what, sizeof(what), "template '%s'", tname);
	lock = pisb_lock_acquire(tdir, "op.lock", true, wait_ms, what, e);
	if (lock < 0)
		return -1;
	if (fstatat(tdir, "disk.img", &sb, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(sb.st_mode))
		return pisb_err_set(e, PISB_EXIT_FAIL, "template '%s' has no disk (disk.img)", tname);
	if (cfg->disk_explicit && sb.st_size != cfg->disk_gib * GIB)
		return pisb_err_set(e, PISB_EXIT_USAGE,
				    "diskGiB: %d, but template '%s' has a disk of %lld GiB (a copy has its template's size; omit diskGiB)",
				    cfg->disk_gib, tname, (long long)(sb.st_size / GIB));
	{
		int held = lock;
		lock = -1;
		return held;
	}
}

int vm_template_overlay(struct pisb_state *st, int sdir, const char *stg, const char *tname,
			const char *qemu_img, struct pisb_err *e)
{
	_cleanup_free_ char *img = xasprintf("%s/%s/disk.qcow2", st->path, stg);
	_cleanup_free_ char *backing = xasprintf("../../templates/%s/disk.img", tname);
	_cleanup_buf_ struct pisb_buf out = PISB_BUF_INIT;
	char *argv[] = { (char *)qemu_img, "create", "-q", "-f", "qcow2", "-b", backing, "-F", "raw",
			 img, NULL };
	int xe = 0, code;

	/* stg is staging/NAME.RND: as deep as instances/NAME */
	if (strchr(stg, '/') != strrchr(stg, '/'))
		return pisb_err_set(e, PISB_EXIT_PISB, "staging dir '%s' is not two levels deep", stg);
	code = pisb_run_capture(argv, NULL, true, 8192, 120000, &out, &xe);
	if (code != 0)
		return pisb_err_set(e, PISB_EXIT_BACKEND, "make the copy-on-write disk on template '%s' with qemu-img: %s",
				    tname, out.s && out.len ? out.s : code == -1 ? strerror(xe) : "failed");
	if (fchmodat(sdir, "disk.qcow2", 0600, 0) < 0)
		return pisb_err_sys(e, PISB_EXIT_FAIL, "chmod '%s'", img);
	/* a template of image: PATH: its copies boot the same root */
	{
		_cleanup_free_ char *root = xasprintf("templates/%s/root.img", tname);
		if (faccessat(st->fd, root, F_OK, AT_SYMLINK_NOFOLLOW) == 0 &&
		    linkat(st->fd, root, sdir, "root.img", 0) < 0)
			return pisb_err_sys(e, PISB_EXIT_FAIL, "link template '%s''s root.img", tname);
	}
	return 0;
}

static int cmp_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The sandboxes whose disk is an overlay on template tname, into users:
 * each instance whose record names it, and (to be safe) each instance
 * with an overlay whose record does not load. */
static void template_users(struct pisb_state *st, const char *tname, struct pisb_strv *users)
{
	DIR *d = pisb_opendirat(st->fd, "instances");
	struct dirent *de;

	if (!d)
		return;
	while ((de = readdir(d))) {
		struct pisb_err ig = PISB_ERR_INIT;
		_cleanup_close_ int idir = -1;
		struct pisb_record rec;
		if (!pisb_name_valid(de->d_name))
			continue;
		idir = openat(dirfd(d), de->d_name, O_PATH | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
		if (idir < 0 || faccessat(idir, "disk.qcow2", F_OK, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		if (pisb_record_load(idir, &rec, &ig) < 0) {
			pisb_strv_push(users, de->d_name);
			continue;
		}
		if (!strcmp(rec.driver, "vm") && rec.template_ && !strcmp(rec.template_, tname))
			pisb_strv_push(users, de->d_name);
		pisb_record_release(&rec);
	}
	closedir(d);
	if (users->n)
		qsort(users->v, users->n, sizeof(char *), cmp_name);
}

int pisb_vm_destroy_template(struct pisb_sandbox *sb, const struct pisb_lc_opts *o,
			     struct pisb_err *e)
{
	_cleanup_strv_ struct pisb_strv users = PISB_STRV_INIT;
	_cleanup_close_ int lock = -1;
	char what[96];

	snprintf(what, sizeof(what), "template '%s'", sb->name);
	lock = pisb_lock_acquire(sb->idir, "op.lock", true, o ? o->wait_ms : 0, what, e);
	if (lock < 0)
		return -1;
	template_users(sb->st, sb->name, &users);
	if (users.n) {
		_cleanup_buf_ struct pisb_buf names = PISB_BUF_INIT;
		for (size_t i = 0; i < users.n; i++)
			pisb_buf_addf(&names, "%s'%s'", i ? ", " : "", users.v[i]);
		return pisb_err_set(e, PISB_EXIT_BUSY,
				    "template '%s' is in use by sandbox%s %s (their disks are copy-on-write overlays on its disk): destroy %s first",
				    sb->name, users.n > 1 ? "es" : "", names.s, users.n > 1 ? "them" : "it");
	}
	/* the lock keeps copies out until the rename into the trash */
	return pisb_state_trash(sb->st, "templates", sb->name, e);
}
