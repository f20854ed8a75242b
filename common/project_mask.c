/* project_mask.c - project.mode bind / bind-ro: the project's secrets and
 * its .git covered by mounts the sandbox cannot remove (project.h,
 * pisb_project_mask).  Used by the local driver (drivers/local/ns.c, in
 * the project's own mount namespace) and the vm driver (vm_project.c, in
 * virtiofsd's). */
#include "project.h"
#include "config.h"
#include "err.h"
#include "util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define MASK_DEPTH 64

struct mask_walk {
	int srcdir;                             /* holds the empty file and dir */
	const struct pisb_project_config *pc;
	struct pisb_err *e;
};

/* Cover the entry name of dfd (t: its O_PATH fd, sb its stat): a secret
 * by the empty file or directory of w->srcdir, a .git by itself; then the
 * new mount, found by name again (t is the one below), read-only,
 * nosuid, nodev. */
static int cover(const struct mask_walk *w, int dfd, const char *name, int t,
		 const struct stat *sb, bool secret, const char *rel)
{
	char src[64], tgt[64];
	int m, r;

	if (secret)
		snprintf(src, sizeof(src), "/proc/self/fd/%d/%s", w->srcdir,
			 S_ISDIR(sb->st_mode) ? PISB_PROJECT_HIDDEN_DIR : PISB_PROJECT_HIDDEN_FILE);
	else
		snprintf(src, sizeof(src), "/proc/self/fd/%d", t);
	snprintf(tgt, sizeof(tgt), "/proc/self/fd/%d", t);
	if (mount(src, tgt, NULL, MS_BIND | (secret ? 0 : MS_REC), NULL) < 0)
		return pisb_err_sys(w->e, PISB_EXIT_FAIL, secret ? "hide the secret '%s' of the project"
								 : "bind the project's '%s' read-only", rel);
	m = openat(dfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (m < 0)
		return pisb_err_sys(w->e, PISB_EXIT_FAIL, "open the mask on '%s'", rel);
	snprintf(tgt, sizeof(tgt), "/proc/self/fd/%d", m);
	r = mount(NULL, tgt, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL);
	close(m);
	if (r < 0)
		return pisb_err_sys(w->e, PISB_EXIT_FAIL, "make the mask on '%s' read-only", rel);
	return 0;
}

/* dfd: a directory of the project's mount, rel its path in the project.
 * Nothing is followed: each entry is opened O_NOFOLLOW and mounted on
 * through its fd.  A directory that cannot be read is left as it is (the
 * sandbox cannot read it either). */
static int walk(const struct mask_walk *w, int dfd, const char *rel, int depth)
{
	DIR *d;
	struct dirent *de;
	int fd = dup(dfd), ret = 0;

	if (fd < 0 || !(d = fdopendir(fd))) {
		if (fd >= 0)
			close(fd);
		return 0;
	}
	while (ret == 0 && (de = readdir(d))) {
		char r[4096];
		struct stat sb;
		bool git, secret;
		int t;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		snprintf(r, sizeof(r), "%s%s%s", rel, *rel ? "/" : "", de->d_name);
		git = !strcmp(de->d_name, ".git");
		secret = !w->pc || !w->pc->secrets_include
			? pisb_project_secret(r, de->d_name, w->pc ? w->pc->secret_patterns : NULL,
					      w->pc ? w->pc->nsecret_patterns : 0)
			: false;
		if (!git && !secret && de->d_type != DT_DIR && de->d_type != DT_UNKNOWN)
			continue;
		t = openat(dfd, de->d_name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
		if (t < 0 || fstat(t, &sb) < 0 || !(S_ISREG(sb.st_mode) || S_ISDIR(sb.st_mode))) {
			if (t >= 0)
				close(t);
			continue;   /* a symlink resolves inside the sandbox's view */
		}
		if (secret || git) {
			ret = cover(w, dfd, de->d_name, t, &sb, secret, r);
		} else if (depth < MASK_DEPTH) {
			int sub = openat(dfd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (sub >= 0) {
				ret = walk(w, sub, r, depth + 1);
				close(sub);
			}
		}
		close(t);
	}
	closedir(d);
	return ret;
}

int pisb_project_mask(int top, int srcdir, const struct pisb_project_config *pc,
		      struct pisb_err *e)
{
	struct mask_walk w = { srcdir, pc, e };

	return walk(&w, top, "", 0);
}

int pisb_project_mask_sources(int dir, struct pisb_err *e)
{
	int fd = openat(dir, PISB_PROJECT_HIDDEN_FILE, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0444);

	if (fd < 0 || ftruncate(fd, 0) < 0) {
		pisb_err_sys(e, PISB_EXIT_FAIL, "make the empty file secrets are hidden under");
		if (fd >= 0)
			close(fd);
		return -1;
	}
	close(fd);
	if (mkdirat(dir, PISB_PROJECT_HIDDEN_DIR, 0555) < 0 && errno != EEXIST)
		return pisb_err_sys(e, PISB_EXIT_FAIL, "make the empty directory secrets are hidden under");
	return 0;
}

static int write_str(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	int r;

	if (fd < 0)
		return -1;
	r = pisb_write_all(fd, s, strlen(s)) < 0 ? -1 : 0;
	close(fd);
	return r;
}

int pisb_idmap_userns(const char *uid_map, const char *gid_map)
{
	int p[2], fd = -1;
	char path[64], c;
	pid_t h;

	if (pipe2(p, O_CLOEXEC) < 0)
		return -1;
	h = fork();
	if (h == 0) {
		close(p[1]);
		if (unshare(CLONE_NEWUSER) < 0)
			_exit(1);
		(void)!read(p[0], &c, 1);   /* until the parent is done */
		_exit(0);
	}
	close(p[0]);
	if (h < 0)
		goto out;
	for (int i = 0; i < 2000; i++) {   /* until it has its own user ns */
		struct stat a, b;
		snprintf(path, sizeof(path), "/proc/%d/ns/user", (int)h);
		if (stat(path, &a) == 0 && stat("/proc/self/ns/user", &b) == 0 && a.st_ino != b.st_ino)
			break;
		usleep(1000);
	}
	snprintf(path, sizeof(path), "/proc/%d/uid_map", (int)h);
	if (write_str(path, uid_map) < 0)
		goto out;
	snprintf(path, sizeof(path), "/proc/%d/setgroups", (int)h);
	write_str(path, "deny");
	snprintf(path, sizeof(path), "/proc/%d/gid_map", (int)h);
	if (write_str(path, gid_map) < 0)
		goto out;
	snprintf(path, sizeof(path), "/proc/%d/ns/user", (int)h);
	fd = open(path, O_RDONLY | O_CLOEXEC);
out:
	close(p[1]);
	if (h > 0)
		while (waitpid(h, NULL, 0) < 0 && errno == EINTR) {
		}
	return fd;
}
