/* vm_handle.c - exec handles of vm sandboxes (exec --timeout-ms,
 * exec-status, exec-kill).
 *
 * A handle "vm-XXXXXXXX" is a host-side supervisor (detached, its own
 * session) that runs the command through the guest agent like an
 * attached exec, with stdin empty and stdout and stderr merged into
 * instances/NAME/exec/HANDLE/output.  Beside it: pid (the supervisor),
 * lock (held by the supervisor while it lives), offset (how far
 * exec-status has read) and status.json ({"exitCode": N}, at the end).
 * exec-kill signals the supervisor: SIGTERM, which it sends on to the
 * command's process group in the guest, then SIGUSR2 after 2 s, which it
 * sends on as SIGKILL.  Handles die with the VM (status 5 afterwards).
 */
#include "vm.h"
#include "vm_internal.h"
#include "config.h"
#include "err.h"
#include "exec.h"
#include "json.h"
#include "lock.h"
#include "proc.h"
#include "state.h"
#include "util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void nap(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

static bool handle_ok(const char *h)
{
	if (strlen(h) != 11 || !pisb_str_starts(h, "vm-"))
		return false;
	for (const char *p = h + 3; *p; p++)
		if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
			return false;
	return true;
}

static int handle_dir(int idir, const char *name, const char *handle, struct pisb_err *e)
{
	_cleanup_free_ char *p = xasprintf("exec/%s", handle);
	int fd = handle_ok(handle) ? openat(idir, p, O_PATH | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW) : -1;

	if (fd < 0)
		return pisb_err_set(e, PISB_EXIT_NOTFOUND, "sandbox '%s': no exec handle '%s'", name, handle);
	return fd;
}

/* status.json's exit code; *done false while there is none */
static int final_code(int hdir, bool *done)
{
	_cleanup_buf_ struct pisb_buf b = PISB_BUF_INIT;
	const char *p;

	*done = pisb_read_file_at(hdir, "status.json", &b, 256) == 0 && b.s;
	if (!*done)
		return 0;
	p = strstr(b.s, "\"exitCode\":");
	return p ? atoi(p + 11) : PISB_EXIT_PISB;
}

static void wait_for(int hdir, int timeout_ms)
{
	int64_t deadline = pisb_mono_ms() + timeout_ms;
	bool done;

	for (;;) {
		final_code(hdir, &done);
		if (done || !pisb_lock_is_held(hdir, "lock") || pisb_mono_ms() >= deadline)
			return;
		nap(10);
	}
}

/* The new output (64 KiB at most) and the state, as exec.h's JSON. */
static int report(const char *name, int hdir, const char *handle, struct pisb_jw *w, int *code,
		  bool *running, struct pisb_err *e)
{
	_cleanup_close_ int fd = openat(hdir, "output", O_RDONLY | O_CLOEXEC);
	_cleanup_buf_ struct pisb_buf off = PISB_BUF_INIT;
	_cleanup_free_ char *buf = xmalloc(PISB_EXEC_CAP);
	long long offset = 0;
	struct stat sb;
	ssize_t n = 0;
	bool done, truncated = false, lost;
	int ec = final_code(hdir, &done);

	lost = !done && !pisb_lock_is_held(hdir, "lock");
	if (pisb_read_file_at(hdir, "offset", &off, 64) == 0 && off.s)
		offset = atoll(off.s);
	if (fd < 0 || fstat(fd, &sb) < 0)
		return pisb_err_sys(e, PISB_EXIT_PISB, "output of handle '%s'", handle);
	if (sb.st_size > offset) {
		n = pread(fd, buf, PISB_EXEC_CAP, offset);
		if (n < 0)
			return pisb_err_sys(e, PISB_EXIT_PISB, "read output of handle '%s'", handle);
		truncated = (long long)n < sb.st_size - offset;
		if ((truncated || !done) && n > 0) {
			/* end on a whole UTF-8 sequence: the rest comes next time */
			ssize_t k = n;
			while (k > 0 && n - k < 3 && ((unsigned char)buf[k - 1] & 0xc0) == 0x80)
				k--;
			if (k > 0 && ((unsigned char)buf[k - 1] & 0xc0) == 0xc0) {
				unsigned char lead = (unsigned char)buf[k - 1];
				ssize_t need = lead >= 0xf0 ? 4 : lead >= 0xe0 ? 3 : 2;
				if (n - (k - 1) < need)
					n = k - 1;
			}
		}
		offset += n;
		{
			char num[32];
			snprintf(num, sizeof(num), "%lld", offset);
			if (pisb_atomic_write(hdir, "offset", num, strlen(num), 0600, e) < 0)
				return -1;
		}
	}
	*running = !done && !lost;
	*code = done ? ec : 0;
	pisb_jw_obj(w);
	pisb_jw_kstr(w, "pid", handle);
	pisb_jw_kbool(w, "running", *running);
	pisb_jw_key(w, "output");
	pisb_jw_strn(w, buf, (size_t)n);
	pisb_jw_key(w, "exitCode");
	if (done)
		pisb_jw_int(w, ec);
	else
		pisb_jw_null(w);
	pisb_jw_kbool(w, "truncated", truncated);
	pisb_jw_obj_end(w);
	if (lost) {
		*code = PISB_EXIT_BACKEND;
		pisb_err_set(e, PISB_EXIT_BACKEND,
			     "sandbox '%s': the supervisor of '%s' ended without an exit status (the VM stopped?)",
			     name, handle);
	}
	return 0;
}

/* Keep at most PISB_EXEC_KEEP finished handles. */
static void prune(int idir)
{
	struct ent { char name[NAME_MAX + 1]; time_t t; } *v = NULL;
	size_t n = 0;
	int fd = openat(idir, "exec", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *de;

	if (!d) {
		if (fd >= 0)
			close(fd);
		return;
	}
	while ((de = readdir(d))) {
		_cleanup_free_ char *p = xasprintf("%s/status.json", de->d_name);
		struct stat sb;
		if (!handle_ok(de->d_name) || fstatat(dirfd(d), p, &sb, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		v = xrealloc(v, (n + 1) * sizeof(*v));
		snprintf(v[n].name, sizeof(v[n].name), "%s", de->d_name);
		v[n++].t = sb.st_mtime;
	}
	while (n > PISB_EXEC_KEEP) {
		size_t old = 0;
		struct pisb_err ig = PISB_ERR_INIT;
		for (size_t i = 1; i < n; i++)
			if (v[i].t < v[old].t)
				old = i;
		pisb_rm_rf_at(dirfd(d), v[old].name, &ig);
		v[old] = v[--n];
	}
	closedir(d);
	free(v);
}

int pisb_vm_exec_handle(struct pisb_state *st, const struct pisb_exec_req *r,
			struct pisb_jw *w, int *code, bool *running, struct pisb_err *e)
{
	_cleanup_strv_ struct pisb_strv env = PISB_STRV_INIT, argv = PISB_STRV_INIT;
	_cleanup_free_ char *cwd = NULL, *hpath = NULL;
	struct pisb_config *cfg = NULL;
	char rnd[9], handle[16];
	int idir, hdir = -1, ready[2] = { -1, -1 }, ret = -1;
	pid_t pid;

	if (vm_open_running(st, r->name, &idir, &cfg, e) < 0)
		return -1;
	vm_build(cfg, r, &env, &argv, &cwd);
	prune(idir);
	pisb_random_hex(rnd, 8);
	snprintf(handle, sizeof(handle), "vm-%s", rnd);
	hpath = xasprintf("exec/%s", handle);
	if (pisb_mkdirs_at(idir, hpath, 0700, e) < 0)
		goto out;
	hdir = openat(idir, hpath, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (hdir < 0 || pisb_atomic_write(hdir, "output", "", 0, 0600, e) < 0) {
		pisb_err_sys(e, PISB_EXIT_PISB, "make handle '%s'", handle);
		goto out;
	}
	if (pipe2(ready, O_CLOEXEC) < 0) {
		pisb_err_sys(e, PISB_EXIT_PISB, "pipe");
		goto out;
	}
	pid = fork();
	if (pid < 0) {
		pisb_err_sys(e, PISB_EXIT_PISB, "fork");
		goto out;
	}
	if (pid == 0) {
		/* the supervisor: detached, no fds of the caller's */
		struct pisb_err le = PISB_ERR_INIT;
		int null = open("/dev/null", O_RDWR | O_CLOEXEC), lk, out, c = 0;
		char num[32], st_json[64];
		setsid();
		if (fork() != 0)
			_exit(0);
		dup2(null, 0);
		dup2(null, 1);
		dup2(null, 2);
		lk = pisb_lock_acquire(hdir, "lock", true, 0, "exec handle", &le);
		out = openat(hdir, "output", O_WRONLY | O_APPEND | O_CLOEXEC | O_NOFOLLOW);
		snprintf(num, sizeof(num), "%d", (int)getpid());
		pisb_atomic_write(hdir, "pid", num, strlen(num), 0600, &le);
		for (int fd = 3; fd < 4096; fd++)
			if (fd != hdir && fd != idir && fd != lk && fd != out && fd != ready[1])
				close(fd);
		pisb_write_all(ready[1], "1", 1);
		close(ready[1]);
		{
			struct vm_run run = { argv.v, env.v, cwd, -1, out, out, true, true };
			if (lk < 0 || out < 0 || vm_run(idir, &run, &c, &le) < 0) {
				if (out >= 0 && le.msg[0]) {
					pisb_write_all(out, le.msg, strlen(le.msg));
					pisb_write_all(out, "\n", 1);
				}
				c = PISB_EXIT_BACKEND;
			}
		}
		snprintf(st_json, sizeof(st_json), "{\"exitCode\":%d}\n", c);
		pisb_atomic_write(hdir, "status.json", st_json, strlen(st_json), 0600, &le);
		_exit(0);
	}
	close(ready[1]);
	ready[1] = -1;
	waitpid(pid, NULL, 0);
	{
		char ch;
		if (read(ready[0], &ch, 1) != 1) {
			pisb_err_set(e, PISB_EXIT_PISB, "sandbox '%s': the supervisor of '%s' did not start",
				     r->name, handle);
			goto out;
		}
	}
	wait_for(hdir, r->timeout_ms);
	ret = report(r->name, hdir, handle, w, code, running, e);
out:
	if (ready[0] >= 0)
		close(ready[0]);
	if (ready[1] >= 0)
		close(ready[1]);
	if (hdir >= 0)
		close(hdir);
	pisb_config_free(cfg);
	close(idir);
	return ret;
}

int pisb_vm_exec_status(struct pisb_state *st, const char *name, const char *handle,
			int timeout_ms, struct pisb_jw *w, int *code, bool *running,
			struct pisb_err *e)
{
	_cleanup_close_ int idir = pisb_instance_open(st, "instances", name, e);
	_cleanup_close_ int hdir = -1;

	if (idir < 0 || (hdir = handle_dir(idir, name, handle, e)) < 0)
		return -1;
	wait_for(hdir, timeout_ms);
	return report(name, hdir, handle, w, code, running, e);
}

int pisb_vm_exec_kill(struct pisb_state *st, const char *name, const char *handle,
		      struct pisb_jw *w, int *code, struct pisb_err *e)
{
	_cleanup_close_ int idir = pisb_instance_open(st, "instances", name, e);
	_cleanup_close_ int hdir = -1;
	_cleanup_buf_ struct pisb_buf pb = PISB_BUF_INIT;
	bool running = false;

	if (idir < 0 || (hdir = handle_dir(idir, name, handle, e)) < 0)
		return -1;
	if (pisb_lock_is_held(hdir, "lock") && pisb_read_file_at(hdir, "pid", &pb, 32) == 0 && pb.s &&
	    atoi(pb.s) > 1) {
		pid_t sp = (pid_t)atoi(pb.s);
		/* TERM to the command's group in the guest, KILL after 2 s */
		kill(sp, SIGTERM);
		wait_for(hdir, 2000);
		if (pisb_lock_is_held(hdir, "lock")) {
			kill(sp, SIGUSR2);
			wait_for(hdir, 3000);
		}
		if (pisb_lock_is_held(hdir, "lock"))
			kill(sp, SIGKILL);
		wait_for(hdir, 1000);
	}
	return report(name, hdir, handle, w, code, &running, e);
}
