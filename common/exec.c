/* exec.c - what every driver's exec handles share: the handle
 * directory's status and output as exec.h's JSON, and the pruning of
 * finished handles. */
#include "exec.h"
#include "driver.h"
#include "err.h"
#include "json.h"
#include "state.h"
#include "util.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int pisb_exec_status_code(int hdir, bool *done)
{
	char buf[256];
	_cleanup_close_ int fd = openat(hdir, "status.json", O_RDONLY | O_CLOEXEC);
	ssize_t n;
	char *p;

	*done = false;
	if (fd < 0)
		return 0;
	n = pisb_read_all(fd, buf, sizeof(buf) - 1);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	*done = true;
	p = strstr(buf, "\"exitCode\":");
	return p ? atoi(p + 11) : PISB_EXIT_PISB;
}

/* Bytes dropped past the cap: status.json's count once done, else the
 * runner's running count. */
static long long handle_dropped(int hdir)
{
	_cleanup_buf_ struct pisb_buf b = PISB_BUF_INIT;
	const char *p;

	if (pisb_read_file_at(hdir, "status.json", &b, 256) == 0 && b.s &&
	    (p = strstr(b.s, "\"droppedBytes\":")))
		return atoll(p + 15);
	pisb_buf_release(&b);
	b = (struct pisb_buf)PISB_BUF_INIT;
	if (pisb_read_file_at(hdir, "dropped", &b, 64) == 0 && b.s)
		return atoll(b.s);
	return 0;
}

int pisb_exec_report(int hdir, const char *handle, bool done, int ec, bool running,
		     struct pisb_jw *w, struct pisb_err *e)
{
	_cleanup_close_ int fd = openat(hdir, "output", O_RDONLY | O_CLOEXEC);
	_cleanup_buf_ struct pisb_buf off = PISB_BUF_INIT;
	_cleanup_free_ char *buf = xmalloc(PISB_EXEC_CAP + 4);
	long long offset = 0;
	struct stat sb;
	ssize_t n = 0;
	bool truncated = false;
	long long dropped;

	if (pisb_read_file_at(hdir, "offset", &off, 64) == 0 && off.s)
		offset = atoll(off.s);
	if (fd < 0 || fstat(fd, &sb) < 0)
		return pisb_err_sys(e, PISB_EXIT_PISB, "output of handle '%s'", handle);
	if (sb.st_size > offset) {
		n = pread(fd, buf, PISB_EXEC_CAP, offset);
		if (n < 0)
			return pisb_err_sys(e, PISB_EXIT_PISB, "read output of handle '%s'", handle);
		truncated = (long long)n < sb.st_size - offset;
		/* never split a UTF-8 sequence across two calls while more follows */
		if ((truncated || !done) && n > 0) {
			ssize_t k = n, back = 0;
			while (k > 0 && back < 4 && ((unsigned char)buf[k - 1] & 0xc0) == 0x80) {
				k--;
				back++;
			}
			if (k > 0 && ((unsigned char)buf[k - 1] & 0xc0) == 0xc0) {
				unsigned char lead = (unsigned char)buf[k - 1];
				ssize_t need = lead >= 0xf0 ? 4 : lead >= 0xe0 ? 3 : 2;
				if (back + 1 < need)
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
	/* output past the handle's cap was dropped: every answer from the
	 * one that reaches the end of what was kept says so */
	dropped = handle_dropped(hdir);
	if (dropped > 0 && offset >= (long long)sb.st_size)
		truncated = true;
	pisb_jw_obj(w);
	pisb_jw_kstr(w, "pid", handle);
	pisb_jw_kbool(w, "running", running);
	pisb_jw_key(w, "output");
	pisb_jw_strn(w, buf, (size_t)n);
	pisb_jw_key(w, "exitCode");
	if (done)
		pisb_jw_int(w, ec);
	else
		pisb_jw_null(w);
	pisb_jw_kbool(w, "truncated", truncated);
	if (dropped > 0) {
		pisb_jw_key(w, "droppedBytes");
		pisb_jw_int(w, dropped);
	}
	pisb_jw_obj_end(w);
	return 0;
}

void pisb_exec_prune(int edir, bool (*is_handle)(const char *name))
{
	struct ent { char name[48]; long long t; } *v = NULL;
	size_t n = 0, cap = 0;
	DIR *d = pisb_opendirat(edir, ".");
	struct dirent *de;

	if (!d)
		return;
	while ((de = readdir(d))) {
		char p[320];
		struct stat sb;
		if (de->d_name[0] == '.' || strlen(de->d_name) >= 48 || (is_handle && !is_handle(de->d_name)))
			continue;
		snprintf(p, sizeof(p), "%.200s/status.json", de->d_name);
		if (fstatat(edir, p, &sb, AT_SYMLINK_NOFOLLOW) < 0)
			continue; /* still running: never expired */
		if (n == cap) {
			cap = cap ? cap * 2 : 64;
			v = xrealloc(v, cap * sizeof(*v));
		}
		snprintf(v[n].name, sizeof(v[n].name), "%.47s", de->d_name);
		v[n].t = (long long)sb.st_mtim.tv_sec * 1000000000LL + sb.st_mtim.tv_nsec;
		n++;
	}
	closedir(d);
	while (n >= PISB_EXEC_KEEP) {
		size_t old = 0;
		struct pisb_err ig = PISB_ERR_INIT;
		for (size_t i = 1; i < n; i++)
			if (v[i].t < v[old].t)
				old = i;
		pisb_rm_rf_at(edir, v[old].name, &ig);
		v[old] = v[--n];
	}
	free(v);
}


void pisb_exec_shell_event(const struct pisb_exec_req *r, const char *driver, const char *shell)
{
	_cleanup_buf_ struct pisb_buf b = PISB_BUF_INIT;
	struct pisb_jw w;

	if (!r->events || !r->sh)
		return;
	pisb_jw_init(&w, &b);
	pisb_jw_obj(&w);
	pisb_jw_kstr(&w, "event", "shell");
	pisb_jw_kstr(&w, "name", r->name);
	pisb_jw_kstr(&w, "driver", driver);
	pisb_jw_kstr(&w, "asked", r->bash ? "bash" : "sh");
	pisb_jw_kstr(&w, "shell", shell);
	pisb_jw_obj_end(&w);
	pisb_buf_addc(&b, '\n');
	(void)pisb_write_all(r->events_fd, b.s, b.len);
}

int pisb_exec_shell(struct pisb_sandbox *sb, struct pisb_exec_req *r, char *av[6],
		    struct pisb_err *e)
{
	static char wrapper[] =
		"if [ -x /bin/bash ]; then exec /bin/bash -lc \"$1\"; fi; exec /bin/sh -lc \"$1\"";
	const char *shell = "/bin/sh";

	if (!r->sh || (sb->drv->caps & PISB_DRV_EXEC_BASH))
		return 0;
	if (!r->bash) {
		/* the driver runs /bin/sh -lc itself */
		pisb_exec_shell_event(r, sb->drv->name, shell);
		return 0;
	}
	if (!r->events) {
		av[0] = "/bin/sh", av[1] = "-c", av[2] = wrapper, av[3] = "sh";
		av[4] = (char *)r->sh, av[5] = NULL;
		r->argv = av, r->argc = 5, r->sh = NULL;
		return 0;
	}
	if (sb->drv->exec_handle) {
		/* ask the sandbox, with its own rights: only the exit status is read */
		static char *probe[] = { "/bin/sh", "-c", "[ -x /bin/bash ]", NULL };
		struct pisb_exec_req q = { .name = r->name, .argv = probe, .argc = 3, .timeout_ms = 10000 };
		_cleanup_buf_ struct pisb_buf b = PISB_BUF_INIT;
		struct pisb_jw w;
		bool running = false;
		int code = 1;

		pisb_jw_init(&w, &b);
		if (sb->drv->exec_handle(sb, &q, &w, &code, &running, e) < 0)
			return -1;
		if (running)
			return pisb_err_set(e, PISB_EXIT_TIMEOUT, "sandbox '%s': looking for /bin/bash took over 10 s",
					    r->name);
		if (code == 0)
			shell = "/bin/bash";
	}
	pisb_exec_shell_event(r, sb->drv->name, shell);
	av[0] = (char *)shell, av[1] = "-lc", av[2] = (char *)r->sh, av[3] = NULL;
	r->argv = av, r->argc = 3, r->sh = NULL;
	return 0;
}
