#include "instance.h"
#include "config.h"
#include "err.h"
#include "json.h"
#include "lock.h"
#include "proc.h"
#include "state.h"
#include "util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <unistd.h>

const char *pisb_status_name(enum pisb_status s)
{
	switch (s) {
	case PISB_ST_MISSING: return "missing";
	case PISB_ST_STOPPED: return "stopped";
	case PISB_ST_STARTING: return "starting";
	case PISB_ST_RUNNING: return "running";
	case PISB_ST_STOPPING: return "stopping";
	case PISB_ST_INTERRUPTED: return "interrupted";
	case PISB_ST_UNAVAILABLE: return "unavailable";
	case PISB_ST_CONNECTED: return "connected";
	case PISB_ST_PAUSED: return "paused";
	case PISB_ST_GONE: return "gone";
	case PISB_ST_UNREACHABLE: return "unreachable";
	}
	return "unknown";
}

unsigned long long pisb_proc_start(pid_t pid)
{
	unsigned long long v;

	/* field 22: the start time */
	return pid > 0 && pisb_proc_stat(pid, 22, 1, &v) == 0 ? v : 0;
}

bool pisb_proc_id_alive(const struct pisb_proc_id *p)
{
	return p->pid > 0 && p->start && pisb_proc_start(p->pid) == p->start;
}

void pisb_runtime_release(struct pisb_runtime *r)
{
	free(r->setup_error);
	free(r->cgroup);
	free(r->limits_note);
	free(r->services_json);
	free(r->previews_json);
	free(r->extra_json);
	memset(r, 0, sizeof(*r));
}

/* The full path of file in the instance dir idir, for messages (caller
 * frees); the name alone when /proc cannot say. */
static char *file_path(int idir, const char *file)
{
	char link[64], dir[4096];
	ssize_t n;

	snprintf(link, sizeof(link), "/proc/self/fd/%d", idir);
	n = readlink(link, dir, sizeof(dir) - 1);
	if (n <= 0)
		return xstrdup(file);
	dir[n] = '\0';
	return xasprintf("%s/%s", dir, file);
}

/* Read state file `file` of idir, at most max bytes, into b: -1 with e
 * naming the full path (code 3 when the file is missing and missing_nf). */
static int read_state_file(int idir, const char *file, size_t max, bool missing_nf,
			   struct pisb_buf *b, struct pisb_err *e)
{
	_cleanup_free_ char *path = NULL;
	_cleanup_close_ int fd = openat(idir, file, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	struct stat sb;

	if (fd >= 0 && fstat(fd, &sb) == 0 && !S_ISREG(sb.st_mode)) {
		path = file_path(idir, file);
		return pisb_err_set(e, PISB_EXIT_FAIL, "'%s': not a regular file", path);
	}
	if (fd >= 0 && sb.st_size > (off_t)max) {
		path = file_path(idir, file);
		return pisb_err_set(e, PISB_EXIT_FAIL, "'%s': too large (%lld bytes, at most %zu)",
				    path, (long long)sb.st_size, max);
	}
	if (fd < 0 || pisb_read_fd(fd, b, max) < 0) {
		int en = errno;
		path = file_path(idir, file);
		errno = en;
		if (en == E2BIG)
			return pisb_err_set(e, PISB_EXIT_FAIL, "'%s': too large (more than %zu bytes)", path, max);
		return pisb_err_sys(e, en == ENOENT && missing_nf ? PISB_EXIT_NOTFOUND : PISB_EXIT_FAIL,
				    "read '%s'", path);
	}
	if (b->len && memchr(b->s, '\0', b->len)) {
		path = file_path(idir, file);
		return pisb_err_set(e, PISB_EXIT_FAIL, "'%s': holds a NUL byte (not JSON)", path);
	}
	return 0;
}

/* Parse b (read from idir/file) as one JSON object: -1 with e naming the
 * file's full path, code 1 (the file is bad, not the caller's input). */
static int parse_object(int idir, const char *file, const struct pisb_buf *b,
			struct pisb_json *j, struct pisb_err *e)
{
	_cleanup_free_ char *path = NULL;

	if (pisb_json_parse(j, b->s ? b->s : "", b->len, e) == 0) {
		if (j->tok[0].type == JSMN_OBJECT)
			return 0;
		pisb_json_release(j);
		pisb_err_set(e, PISB_EXIT_FAIL, "not a JSON object");
	}
	path = file_path(idir, file);
	e->code = PISB_EXIT_FAIL;
	return pisb_err_prefix(e, "'%s'", path);
}

/* Atomically write b as idir/file (fsync'ed unless !sync); an error
 * names the full path. */
static int save_state_file_sync(int idir, const char *file, const struct pisb_buf *b,
				bool sync, struct pisb_err *e)
{
	struct pisb_err we = PISB_ERR_INIT;
	_cleanup_free_ char *path = NULL;

	if ((sync ? pisb_atomic_write : pisb_atomic_write_volatile)(idir, file, b->s, b->len,
								     0600, &we) == 0)
		return 0;
	path = file_path(idir, file);
	if (we.errnum)
		return pisb_err_set(e, PISB_EXIT_FAIL, "write '%s': %s", path, strerror(we.errnum));
	*e = we;
	return pisb_err_prefix(e, "'%s'", path);
}

static int save_state_file(int idir, const char *file, const struct pisb_buf *b,
			   struct pisb_err *e)
{
	return save_state_file_sync(idir, file, b, true, e);
}

static void get_pid(struct pisb_json *j, int obj, const char *key,
		    struct pisb_proc_id *p)
{
	int o = pisb_json_get(j, 0, key);
	long long v;

	(void)obj;
	if (o < 0)
		return;
	if (pisb_json_int(j, pisb_json_get(j, o, "pid"), &v) == 0)
		p->pid = (pid_t)v;
	if (pisb_json_int(j, pisb_json_get(j, o, "start"), &v) == 0)
		p->start = (unsigned long long)v;
}

static char *get_raw(struct pisb_json *j, const char *key)
{
	size_t n;
	const char *s;
	int t = pisb_json_get(j, 0, key);

	if (t < 0 || pisb_json_is_null(j, t))
		return NULL;
	s = pisb_json_raw(j, t, &n);
	return s ? xstrndup(s, n) : NULL;
}

static bool get_bool(struct pisb_json *j, int obj, const char *key)
{
	bool b = false;
	pisb_json_bool(j, pisb_json_get(j, obj, key), &b);
	return b;
}

int pisb_runtime_load(int idir, struct pisb_runtime *r, struct pisb_err *e)
{
	_cleanup_buf_ struct pisb_buf b = PISB_BUF_INIT;
	struct pisb_json j;
	long long v;
	char *s;
	int t;

	memset(r, 0, sizeof(*r));
	if (read_state_file(idir, "status.json", 1 << 20, true, &b, e) < 0) {
		if (e->code == PISB_EXIT_NOTFOUND) {
			*e = (struct pisb_err)PISB_ERR_INIT;
			strcpy(r->state, "stopped");
			return 0;
		}
		return -1;
	}
	if (parse_object(idir, "status.json", &b, &j, e) < 0)
		return -1;
	s = pisb_json_str(&j, pisb_json_get(&j, 0, "state"));
	snprintf(r->state, sizeof(r->state), "%s", s ? s : "stopped");
	free(s);
	get_pid(&j, 0, "controller", &r->controller);
	get_pid(&j, 0, "init", &r->init);
	get_pid(&j, 0, "resume", &r->resume);
	s = pisb_json_str(&j, pisb_json_get(&j, 0, "generation"));
	snprintf(r->generation, sizeof(r->generation), "%s", s ? s : "");
	free(s);
	if (pisb_json_int(&j, pisb_json_get(&j, 0, "startedAt"), &v) == 0)
		r->started_at = v;
	if (pisb_json_int(&j, pisb_json_get(&j, 0, "stoppedAt"), &v) == 0)
		r->stopped_at = v;
	if (pisb_json_int(&j, pisb_json_get(&j, 0, "uidBase"), &v) == 0)
		r->uid_base = (uid_t)v;
	if (pisb_json_int(&j, pisb_json_get(&j, 0, "gidBase"), &v) == 0)
		r->gid_base = (gid_t)v;
	r->setup_error = pisb_json_str(&j, pisb_json_get(&j, 0, "setupError"));
	r->cgroup = pisb_json_str(&j, pisb_json_get(&j, 0, "cgroup"));
	t = pisb_json_get(&j, 0, "enforced");
	r->mem_enforced = get_bool(&j, t, "memory");
	r->cpu_enforced = get_bool(&j, t, "cpus");
	r->pids_enforced = get_bool(&j, t, "pids");
	r->disk_enforced = get_bool(&j, t, "disk");
	r->limits_note = pisb_json_str(&j, pisb_json_get(&j, 0, "limitsNote"));
	r->services_json = get_raw(&j, "services");
	r->previews_json = get_raw(&j, "previews");
	r->extra_json = get_raw(&j, "extra");
	pisb_json_release(&j);
	return 0;
}

static void put_pid(struct pisb_jw *w, const char *k, const struct pisb_proc_id *p)
{
	pisb_jw_key(w, k);
	pisb_jw_obj(w);
	pisb_jw_kint(w, "pid", p->pid);
	pisb_jw_kint(w, "start", (long long)p->start);
	pisb_jw_obj_end(w);
}

static void put_raw(struct pisb_jw *w, const char *k, const char *raw)
{
	pisb_jw_key(w, k);
	if (raw)
		pisb_jw_raw(w, raw, strlen(raw));
	else
		pisb_jw_null(w);
}

static int runtime_save(int idir, const struct pisb_runtime *r, bool sync, struct pisb_err *e)
{
	_cleanup_buf_ struct pisb_buf b = PISB_BUF_INIT;
	struct pisb_jw w;

	pisb_jw_init(&w, &b);
	pisb_jw_obj(&w);
	pisb_jw_kstr(&w, "state", r->state);
	put_pid(&w, "controller", &r->controller);
	put_pid(&w, "init", &r->init);
	put_pid(&w, "resume", &r->resume);
	pisb_jw_kstr(&w, "generation", r->generation);
	pisb_jw_kint(&w, "startedAt", r->started_at);
	pisb_jw_kint(&w, "stoppedAt", r->stopped_at);
	pisb_jw_kint(&w, "uidBase", r->uid_base);
	pisb_jw_kint(&w, "gidBase", r->gid_base);
	pisb_jw_kstr(&w, "setupError", r->setup_error);
	pisb_jw_kstr(&w, "cgroup", r->cgroup);
	pisb_jw_key(&w, "enforced");
	pisb_jw_obj(&w);
	pisb_jw_kbool(&w, "memory", r->mem_enforced);
	pisb_jw_kbool(&w, "cpus", r->cpu_enforced);
	pisb_jw_kbool(&w, "pids", r->pids_enforced);
	pisb_jw_kbool(&w, "disk", r->disk_enforced);
	pisb_jw_obj_end(&w);
	pisb_jw_kstr(&w, "limitsNote", r->limits_note);
	put_raw(&w, "services", r->services_json);
	put_raw(&w, "previews", r->previews_json);
	put_raw(&w, "extra", r->extra_json);
	pisb_jw_obj_end(&w);
	pisb_buf_addc(&b, '\n');
	return save_state_file_sync(idir, "status.json", &b, sync, e);
}

int pisb_runtime_save(int idir, const struct pisb_runtime *r, struct pisb_err *e)
{
	return runtime_save(idir, r, true, e);
}

int pisb_runtime_save_volatile(int idir, const struct pisb_runtime *r, struct pisb_err *e)
{
	return runtime_save(idir, r, false, e);
}

int pisb_runtime_note_setup_error(int idir, char *why, struct pisb_err *e)
{
	struct pisb_runtime rt;
	int r;

	if (pisb_runtime_load(idir, &rt, e) < 0) {
		free(why);
		return -1;
	}
	free(rt.setup_error);
	rt.setup_error = why;
	r = pisb_runtime_save(idir, &rt, e);
	pisb_runtime_release(&rt);
	return r;
}

void pisb_record_release(struct pisb_record *r)
{
	free(r->name);
	free(r->driver);
	free(r->template_);
	free(r->config_json);
	free(r->session_id);
	free(r->remote_json);
	free(r->image_cache);
	memset(r, 0, sizeof(*r));
}

int pisb_instance_stage(struct pisb_state *st, const char *name, char **stage, int *lock,
			struct pisb_err *e)
{
	struct pisb_err ig = PISB_ERR_INIT;
	char rnd[9], what[96];
	int sdir;

	*stage = NULL;
	*lock = -1;
	if (pisb_mkdirs_at(st->fd, "instances", 0700, e) < 0 ||
	    pisb_mkdirs_at(st->fd, "staging", 0700, e) < 0)
		return -1;
	pisb_random_hex(rnd, 8);
	*stage = xasprintf("staging/%s.%s", name, rnd);
	if (pisb_mkdirs_at(st->fd, *stage, 0700, e) < 0)
		goto fail;
	sdir = openat(st->fd, *stage, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (sdir < 0) {
		pisb_err_sys(e, PISB_EXIT_FAIL, "open '%s'", *stage);
		goto fail;
	}
	snprintf(what, sizeof(what), "sandbox '%s'", name);
	*lock = pisb_lock_acquire(sdir, "op.lock", true, 0, what, e);
	if (*lock >= 0)
		return sdir;
	close(sdir);
fail:
	pisb_rm_rf_at(st->fd, *stage, &ig);
	free(*stage);
	*stage = NULL;
	return -1;
}

int pisb_instance_lock_holders(int dirfd, const char *file, pid_t *pids, int max)
{
	_cleanup_close_ int fd = openat(dirfd, file, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	_cleanup_buf_ struct pisb_buf b = PISB_BUF_INIT;
	_cleanup_close_ int lf = -1;
	struct stat sb;
	char *line, *save = NULL;
	int n = 0;

	if (fd < 0 || fstat(fd, &sb) < 0)
		return 0;
	lf = open("/proc/locks", O_RDONLY | O_CLOEXEC);
	if (lf < 0 || pisb_read_fd(lf, &b, 16 << 20) < 0 || !b.s)
		return 0;
	/* "1: FLOCK  ADVISORY  WRITE 1234 00:2f:5678 0 EOF"; waiters ("->") are
	 * not holders */
	for (line = strtok_r(b.s, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		unsigned maj, mnr;
		unsigned long long ino;
		char kind[16], mode[16], rw[16];
		int pid;

		if (strstr(line, "->"))
			continue;
		if (sscanf(line, "%*d: %15s %15s %15s %d %x:%x:%llu", kind, mode, rw, &pid, &maj, &mnr, &ino) != 7)
			continue;
		if (ino != (unsigned long long)sb.st_ino || maj != major(sb.st_dev) || mnr != minor(sb.st_dev))
			continue;
		if (pid > 0 && n < max)
			pids[n++] = pid;
	}
	/* /proc/locks names the process that took the lock; a child that
	 * inherited the fd (forked, not exec'd) holds it as well, and may be
	 * all that is left: every process with the file open */
	{
		DIR *pd = opendir("/proc");
		struct dirent *de;

		while (pd && (de = readdir(pd)) && n < max) {
			char fdp[64];
			DIR *fd_d;
			struct dirent *fe;
			int pid = atoi(de->d_name);

			if (pid <= 0 || pid == getpid())
				continue;
			snprintf(fdp, sizeof(fdp), "/proc/%d/fd", pid);
			if (!(fd_d = opendir(fdp)))
				continue;
			while ((fe = readdir(fd_d))) {
				char lp[320], info[4096];
				struct stat fs_;
				_cleanup_close_ int ifd = -1;
				ssize_t il;
				if (fe->d_name[0] == '.')
					continue;
				snprintf(lp, sizeof(lp), "%s/%s", fdp, fe->d_name);
				if (stat(lp, &fs_) < 0 || fs_.st_ino != sb.st_ino || fs_.st_dev != sb.st_dev)
					continue;
				/* an fd that holds the lock says so in its fdinfo; one
				 * that only probes it (pisb list) does not */
				snprintf(lp, sizeof(lp), "/proc/%d/fdinfo/%s", pid, fe->d_name);
				ifd = open(lp, O_RDONLY | O_CLOEXEC);
				il = ifd >= 0 ? pisb_read_all(ifd, info, sizeof(info) - 1) : -1;
				if (il <= 0)
					continue;
				info[il] = '\0';
				if (strstr(info, "FLOCK")) {
					bool seen = false;
					for (int k = 0; k < n; k++)
						seen |= pids[k] == pid;
					if (!seen)
						pids[n++] = pid;
					break;
				}
			}
			closedir(fd_d);
		}
		if (pd)
			closedir(pd);
	}
	return n;
}

int pisb_record_load(int idir, struct pisb_record *r, struct pisb_err *e)
{
	_cleanup_buf_ struct pisb_buf b = PISB_BUF_INIT;
	struct pisb_json j;
	long long v;

	memset(r, 0, sizeof(*r));
	if (read_state_file(idir, "record.json", PISB_RECORD_MAX, true, &b, e) < 0 ||
	    parse_object(idir, "record.json", &b, &j, e) < 0)
		return -1;
	r->name = pisb_json_str(&j, pisb_json_get(&j, 0, "name"));
	r->driver = pisb_json_str(&j, pisb_json_get(&j, 0, "driver"));
	r->template_ = pisb_json_str(&j, pisb_json_get(&j, 0, "template"));
	r->session_id = pisb_json_str(&j, pisb_json_get(&j, 0, "sessionId"));
	if (pisb_json_int(&j, pisb_json_get(&j, 0, "createdAt"), &v) == 0)
		r->created_at = v;
	get_pid(&j, 0, "owner", &r->owner);
	r->config_json = get_raw(&j, "config");
	r->remote_json = get_raw(&j, "remote");
	r->image_cache = pisb_json_str(&j, pisb_json_get(&j, 0, "imageCache"));
	if (pisb_json_int(&j, pisb_json_get(&j, 0, "uidBase"), &v) == 0 && v > 0 && v < 4294967295LL)
		r->uid_base = (uid_t)v;
	pisb_json_release(&j);
	if (!r->name || !r->driver || !r->config_json || r->config_json[0] != '{') {
		_cleanup_free_ char *path = file_path(idir, "record.json");
		const char *what = !r->name ? "name" : !r->driver ? "driver" : "config";
		pisb_record_release(r);
		return pisb_err_set(e, PISB_EXIT_FAIL, "'%s': '%s' is missing or not a %s",
				    path, what, !strcmp(what, "config") ? "JSON object" : "string");
	}
	return 0;
}

int pisb_record_save(int idir, const struct pisb_record *r, struct pisb_err *e)
{
	_cleanup_buf_ struct pisb_buf b = PISB_BUF_INIT;
	struct pisb_jw w;

	pisb_jw_init(&w, &b);
	pisb_jw_obj(&w);
	pisb_jw_kint(&w, "version", 1);
	pisb_jw_kstr(&w, "name", r->name);
	pisb_jw_kstr(&w, "driver", r->driver);
	pisb_jw_kint(&w, "createdAt", r->created_at);
	pisb_jw_kstr(&w, "template", r->template_);
	put_pid(&w, "owner", &r->owner);
	pisb_jw_kstr(&w, "sessionId", r->session_id);
	put_raw(&w, "remote", r->remote_json);
	pisb_jw_kstr(&w, "imageCache", r->image_cache);
	if (r->uid_base)
		pisb_jw_kint(&w, "uidBase", r->uid_base);
	put_raw(&w, "config", r->config_json);
	pisb_jw_obj_end(&w);
	pisb_buf_addc(&b, '\n');
	return save_state_file(idir, "record.json", &b, e);
}

int pisb_record_config(const struct pisb_record *r, struct pisb_config **out,
		       struct pisb_err *e)
{
	if (pisb_config_load_buf(r->config_json, strlen(r->config_json),
				 "record.json config", NULL, out, e) < 0)
		return pisb_err_prefix(e, "sandbox '%s'", r->name);
	return 0;
}

int pisb_instance_open(const struct pisb_state *st, const char *kind,
		       const char *name, struct pisb_err *e)
{
	char path[128];
	int fd;
	const char *what = !strcmp(kind, "templates") ? "template" : "sandbox";

	if (!pisb_name_valid(name))
		return pisb_err_set(e, PISB_EXIT_USAGE,
				    "invalid %s name '%s' (lowercase letter, then up to 39 of a-z 0-9 -)",
				    what, name);
	snprintf(path, sizeof(path), "%s/%s", kind, name);
	fd = openat(st->fd, path, O_PATH | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0) {
		if (errno == ENOENT)
			return pisb_err_set(e, PISB_EXIT_NOTFOUND, "no such %s '%s'", what, name);
		return pisb_err_sys(e, PISB_EXIT_FAIL, "open %s '%s'", what, name);
	}
	return fd;
}

int pisb_control_listen(int idir, int backlog)
{
	return pisb_unix_listen_at(idir, "control.sock", backlog, SOCK_NONBLOCK);
}

int pisb_control_connect(int idir)
{
	return pisb_unix_connect_at(idir, "control.sock");
}

/* One request line on a new connection: its fd, or -1 with e. */
static int control_send(int idir, const char *req, struct pisb_err *e)
{
	int fd = pisb_control_connect(idir);

	if (fd < 0)
		return pisb_err_sys(e, PISB_EXIT_BACKEND, "cannot reach the sandbox controller");
	if (pisb_write_all(fd, req, strlen(req)) < 0 || pisb_write_all(fd, "\n", 1) < 0) {
		pisb_err_sys(e, PISB_EXIT_BACKEND, "send to the sandbox controller");
		close(fd);
		return -1;
	}
	return fd;
}

/* The reply line on fd, within timeout_ms (< 0: no limit). */
static int control_recv(int fd, struct pisb_buf *reply, int timeout_ms, struct pisb_err *e)
{
	int64_t deadline = pisb_mono_ms() + timeout_ms;

	pisb_buf_reset(reply);
	for (;;) {
		struct pollfd p = { fd, POLLIN, 0 };
		int64_t left = deadline - pisb_mono_ms();
		ssize_t n;

		if (timeout_ms >= 0 && left <= 0)
			return pisb_err_set(e, PISB_EXIT_TIMEOUT,
					    "the sandbox controller did not answer within %d ms", timeout_ms);
		int r = poll(&p, 1, timeout_ms < 0 ? -1 : (int)left);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return pisb_err_sys(e, PISB_EXIT_BACKEND, "poll");
		}
		if (r == 0)
			continue;
		pisb_buf_grow(reply, 4096);
		n = read(fd, reply->s + reply->len, reply->cap - reply->len - 1);
		if (n < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			return pisb_err_sys(e, PISB_EXIT_BACKEND, "read from the sandbox controller");
		}
		if (n == 0)
			break;
		reply->len += (size_t)n;
		reply->s[reply->len] = '\0';
		if (memchr(reply->s, '\n', reply->len))
			break;
	}
	if (!reply->len)
		return pisb_err_set(e, PISB_EXIT_BACKEND, "the sandbox controller closed the connection");
	return 0;
}

int pisb_control_call(int idir, const char *req, struct pisb_buf *reply,
		      int timeout_ms, struct pisb_err *e)
{
	_cleanup_close_ int fd = control_send(idir, req, e);

	if (fd < 0)
		return -1;
	return control_recv(fd, reply, timeout_ms, e);
}

/* ---- pings sent ahead ----
 * A status pings the controller: a round trip through its wake-up, one
 * sandbox after the other in a list (2-3 ms for three, issue #21).  The
 * list sends every ping first (pisb_ping_ahead); each status then takes
 * the answer to its own, so the controllers answer side by side.  Keyed
 * by the instance directory's inode: a name deleted and made again in
 * between is another directory, pinged anew. */
static struct ping_ahead {
	dev_t dev;
	ino_t ino;
	int fd;
	int64_t sent_ms;
} *ahead;
static size_t nahead;

static const char ping_req[] = "{\"op\":\"ping\"}";

void pisb_ping_ahead(int idir)
{
	struct pisb_err ig = PISB_ERR_INIT;
	struct stat sb;
	int fd;

	/* a stopped sandbox has no control.sock: one failed connect */
	if ((fd = control_send(idir, ping_req, &ig)) < 0)
		return;
	if (fstat(idir, &sb) < 0) {
		close(fd);
		return;
	}
	ahead = xrealloc(ahead, (nahead + 1) * sizeof(*ahead));
	ahead[nahead++] = (struct ping_ahead){ sb.st_dev, sb.st_ino, fd, pisb_mono_ms() };
}

void pisb_ping_ahead_end(void)
{
	for (size_t i = 0; i < nahead; i++)
		if (ahead[i].fd >= 0)
			close(ahead[i].fd);
	free(ahead);
	ahead = NULL;
	nahead = 0;
}

/* The connection of the ping sent ahead to idir's controller (the
 * caller's to close), or -1; *sent_ms: when it was sent */
static int ping_taken(int idir, int64_t *sent_ms)
{
	struct stat sb;

	if (!nahead || fstat(idir, &sb) < 0)
		return -1;
	for (size_t i = 0; i < nahead; i++)
		if (ahead[i].fd >= 0 && ahead[i].dev == sb.st_dev && ahead[i].ino == sb.st_ino) {
			int fd = ahead[i].fd;
			ahead[i].fd = -1;
			*sent_ms = ahead[i].sent_ms;
			return fd;
		}
	return -1;
}

/* A second to answer, from when it was asked: controllers that do not
 * answer cost a list one second in all, not one each */
static int ping(int idir, struct pisb_buf *reply, struct pisb_err *e)
{
	int64_t sent = 0;
	_cleanup_close_ int fd = ping_taken(idir, &sent);
	int64_t left;

	if (fd < 0)
		return pisb_control_call(idir, ping_req, reply, 1000, e);
	left = 1000 - (pisb_mono_ms() - sent);
	return control_recv(fd, reply, left < 1 ? 1 : (int)left, e);
}

enum pisb_status pisb_instance_status(int idir, const struct pisb_runtime *r)
{
	struct pisb_err e = PISB_ERR_INIT;
	_cleanup_buf_ struct pisb_buf reply = PISB_BUF_INIT;

	if (!pisb_lock_is_held(idir, "controller.lock")) {
		if (!strcmp(r->state, "stopped") || !r->state[0])
			return PISB_ST_STOPPED;
		return PISB_ST_INTERRUPTED;
	}
	/* the lock is held; by the controller status.json names?  A new
	 * controller has not written its own yet while a start (op.lock)
	 * waits for it; a process that outlived its controller with the
	 * lock's fd is not a controller */
	if (!pisb_proc_id_alive(&r->controller))
		return pisb_lock_is_held(idir, "op.lock") ? PISB_ST_STARTING : PISB_ST_UNAVAILABLE;
	if (!strcmp(r->state, "starting"))
		return PISB_ST_STARTING;
	if (!strcmp(r->state, "stopping"))
		return PISB_ST_STOPPING;
	if (strcmp(r->state, "running"))
		return PISB_ST_UNAVAILABLE;
	if (ping(idir, &reply, &e) < 0)
		return PISB_ST_UNAVAILABLE;
	/* running means commands can join it: its init must be there */
	if (!pisb_proc_id_alive(&r->init))
		return PISB_ST_UNAVAILABLE;
	return PISB_ST_RUNNING;
}
