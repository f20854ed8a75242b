/* sbx.c - the sbx driver: running the sbx CLI, the instance files,
 * create/start/stop/destroy, the watchdog, exec and shell (see sbx.h).
 *
 * Ordering that matters:
 * - create publishes the instance (op.lock held) before `sbx create`, so
 *   that the workspace directory sbx mounts already has its final path,
 *   and a pisb killed meanwhile leaves a record that destroy can use;
 *   every later failure removes the sbx sandbox and the instance again.
 * - the watchdog polls; it never holds op.lock except while it tears the
 *   sandbox down, and it pokes (keepalive) only a running sandbox, since
 *   `sbx exec` starts a stopped one.
 */
#include "sbx.h"
#include "sbx_internal.h"
#include "driver.h"
#include "config.h"
#include "err.h"
#include "lifecycle.h"
#include "exec.h"
#include "instance.h"
#include "json.h"
#include "lock.h"
#include "opensandbox.h"
#include "proc.h"
#include "project.h"
#include "state.h"
#include "util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static const char *const teardown_word[] = { "remove", "stop", "none" };

/* ---- running sbx ---- */

int sbx_find(char *out, size_t n, struct pisb_err *e)
{
	const char *path = getenv("PATH");

	while (path && *path) {
		const char *c = strchr(path, ':');
		size_t len = c ? (size_t)(c - path) : strlen(path);
		if (len && len + 5 < n) {
			snprintf(out, n, "%.*s/sbx", (int)len, path);
			if (access(out, X_OK) == 0)
				return 0;
		}
		path += len + (c ? 1 : 0);
	}
	return pisb_err_set(e, PISB_EXIT_BACKEND,
			    "the sbx CLI is not on PATH: driver sbx needs Docker Sandboxes (install docker-sbx, then 'sbx login'); nothing runs on the host instead");
}

static bool docker_var(const char *kv)
{
	return pisb_str_starts(kv, "DOCKER_") || pisb_str_starts(kv, "COMPOSE_");
}

void sbx_env(const struct pisb_sbx_config *x, struct pisb_strv *out)
{
	static const char *const safe[] = { "HOME", "PATH", "USER", "LOGNAME", "TMPDIR",
		"SHELL", "LANG", "TERM", NULL };

	for (size_t i = 0; safe[i]; i++) {
		const char *v = getenv(safe[i]);
		if (v)
			pisb_strv_pushf(out, "%s=%s", safe[i], v);
	}
	for (size_t i = 0; x && i < x->nenv_allowlist; i++) {
		const char *k = x->env_allowlist[i], *v = getenv(k);
		bool dup = false;
		for (size_t j = 0; safe[j]; j++)
			dup |= !strcmp(safe[j], k);
		/* DOCKER_* and COMPOSE_* never, even when asked for */
		if (v && !dup && !docker_var(k))
			pisb_strv_pushf(out, "%s=%s", k, v);
	}
}

char *sbx_argv_text(char *const *argv)
{
	struct pisb_buf b = PISB_BUF_INIT;

	for (size_t i = 0; argv[i]; i++) {
		if (i)
			pisb_buf_addc(&b, ' ');
		if (i && (!strcmp(argv[i - 1], "-e") || !strcmp(argv[i - 1], "--env")) &&
		    strchr(argv[i], '='))
			pisb_buf_addf(&b, "%.*s=...", (int)(strchr(argv[i], '=') - argv[i]), argv[i]);
		else
			pisb_buf_adds(&b, argv[i]);
	}
	return pisb_buf_detach(&b);
}

const char *sbx_last_line(const char *s)
{
	static char line[512];
	const char *end, *start;

	line[0] = '\0';
	if (!s)
		return line;
	end = s + strlen(s);
	while (end > s && (end[-1] == '\n' || end[-1] == '\r' || end[-1] == ' '))
		end--;
	start = end;
	while (start > s && start[-1] != '\n')
		start--;
	snprintf(line, sizeof(line), "%.*s", (int)(end - start), start);
	return line;
}

bool sbx_failed_itself(const char *err, const char *sbxname)
{
	_cleanup_free_ char *nf1 = xasprintf("sandbox '%s' not found", sbxname);
	_cleanup_free_ char *nf2 = xasprintf("sandbox \"%s\" not found", sbxname);

	if (!err)
		return false;
	return strstr(err, "failed to start sandbox:") || strstr(err, "start runtime: request failed:") ||
	       strstr(err, "docker daemon failed to start inside the sandbox") ||
	       strstr(err, nf1) || strstr(err, nf2);
}

static volatile sig_atomic_t pending_sig;
static void on_sig(int sig) { pending_sig = sig; }

static void keep(struct pisb_buf *b, const char *p, size_t n, size_t cap)
{
	if (!b || b->len >= cap)
		return;
	if (b->len + n > cap)
		n = cap - b->len;
	pisb_buf_add(b, p, n);
}

int sbx_run(const char *bin, char *const *argv, char *const *envp,
	    const struct sbx_run *o, int *code, struct pisb_err *e)
{
	const int sigs[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT };
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t at;
	struct sigaction sa, old[4];
	sigset_t none, def;
	int op[2] = { -1, -1 }, ep[2] = { -1, -1 }, null = -1, status = 0, r;
	int64_t deadline = o->timeout_ms > 0 ? pisb_mono_ms() + o->timeout_ms : 0;
	bool out_open, err_open = true, exited = false, timed_out = false;
	pid_t pid;
	char buf[16384];

	null = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (null < 0 || pipe2(ep, O_CLOEXEC) < 0 || (o->out_fd < 0 && pipe2(op, O_CLOEXEC) < 0)) {
		pisb_err_sys(e, PISB_EXIT_PISB, "run sbx: pipe");
		goto fail_fds;
	}
	posix_spawn_file_actions_init(&fa);
	/* a closed stdin or stdout of ours is /dev/null for it */
	posix_spawn_file_actions_adddup2(&fa, o->in_fd >= 0 && fcntl(o->in_fd, F_GETFD) >= 0 ? o->in_fd : null, 0);
	posix_spawn_file_actions_adddup2(&fa, o->out_fd < 0 ? op[1] : fcntl(o->out_fd, F_GETFD) >= 0 ? o->out_fd : null, 1);
	posix_spawn_file_actions_adddup2(&fa, o->err_fd > 0 ? o->err_fd : ep[1], 2);
	posix_spawn_file_actions_addclosefrom_np(&fa, 3);
	posix_spawnattr_init(&at);
	sigemptyset(&none);
	sigemptyset(&def);
	for (size_t i = 0; i < 4; i++)
		sigaddset(&def, sigs[i]);
	sigaddset(&def, SIGPIPE);
	posix_spawnattr_setsigmask(&at, &none);
	posix_spawnattr_setsigdefault(&at, &def);
	/* its own session: signals reach it only through us, and a timeout
	 * kills its whole group */
	posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSID);
	if (o->forward) {
		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = on_sig;
		for (size_t i = 0; i < 4; i++)
			sigaction(sigs[i], &sa, &old[i]);
	}
	pending_sig = 0;
	r = posix_spawn(&pid, bin, &fa, &at, argv, envp);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&at);
	if (r != 0) {
		errno = r;
		pisb_err_sys(e, PISB_EXIT_BACKEND, "run '%s'", bin);
		goto fail;
	}
	close(ep[1]);
	ep[1] = -1;
	if (op[1] >= 0) {
		close(op[1]);
		op[1] = -1;
	}
	out_open = op[0] >= 0;
	while (out_open || err_open || !exited) {
		struct pollfd pf[2];
		int np = 0, tick = 100;

		if (pending_sig) {
			int sig = pending_sig;
			pending_sig = 0;
			kill(-pid, sig);
		}
		if (deadline && pisb_mono_ms() >= deadline) {
			kill(-pid, SIGKILL);
			kill(pid, SIGKILL);
			timed_out = true;
			deadline = 0;
		}
		if (!exited) {
			pid_t w = waitpid(pid, &status, WNOHANG);
			if (w == pid)
				exited = true;
		}
		if (out_open) {
			pf[np].fd = op[0];
			pf[np++].events = POLLIN;
		}
		if (err_open) {
			pf[np].fd = ep[0];
			pf[np++].events = POLLIN;
		}
		if (!np) {
			if (!exited) {
				struct timespec ts = { 0, 10 * 1000 * 1000 };
				nanosleep(&ts, NULL);
			}
			continue;
		}
		/* once it has exited, only what is already buffered is read: a
		 * process it left behind may hold the pipes open */
		if (poll(pf, (nfds_t)np, exited ? 0 : tick) <= 0) {
			if (exited)
				break;
			continue;
		}
		for (int i = 0; i < np; i++) {
			ssize_t k;
			if (!(pf[i].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			k = read(pf[i].fd, buf, sizeof(buf));
			if (k < 0 && errno == EINTR)
				continue;
			if (k <= 0) {
				if (pf[i].fd == op[0])
					out_open = false;
				else
					err_open = false;
				continue;
			}
			if (pf[i].fd == op[0]) {
				keep(o->out, buf, (size_t)k, 8u << 20);
			} else {
				if (o->tee_err)
					pisb_write_all(2, buf, (size_t)k);
				if (o->merge)
					keep(o->out, buf, (size_t)k, 8u << 20);
				keep(o->err, buf, (size_t)k, 64 * 1024);
			}
		}
	}
	while (!exited) {
		pid_t w = waitpid(pid, &status, 0);
		if (w == pid)
			exited = true;
		else if (w < 0 && errno != EINTR)
			break;
		if (pending_sig) {
			int sig = pending_sig;
			pending_sig = 0;
			kill(-pid, sig);
		}
	}
	if (o->forward)
		for (size_t i = 0; i < 4; i++)
			sigaction(sigs[i], &old[i], NULL);
	close(null);
	if (op[0] >= 0)
		close(op[0]);
	close(ep[0]);
	if (timed_out)
		return pisb_err_set(e, PISB_EXIT_TIMEOUT, "'sbx %s' did not finish within %d s (killed)",
				    argv[1] ? argv[1] : "", o->timeout_ms / 1000);
	*code = pisb_wait_code(status);
	return 0;
fail:
	if (o->forward)
		for (size_t i = 0; i < 4; i++)
			sigaction(sigs[i], &old[i], NULL);
fail_fds:
	if (null >= 0)
		close(null);
	for (int i = 0; i < 2; i++) {
		if (op[i] >= 0)
			close(op[i]);
		if (ep[i] >= 0)
			close(ep[i]);
	}
	return -1;
}

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

bool sbx_transient(const char *err)
{
	return err && (strstr(err, "failed to start sandbox: start runtime:") ||
		       strstr(err, "start runtime: request failed: 5"));
}

/* Run an sbx command whose output pisb reads; a non-zero status is an
 * error (exit 5) naming the sandbox and the command.  Returns 0, or -1. */
int sbx_call(const char *bin, char *const *argv, char *const *envp, int timeout_ms,
	     struct pisb_buf *out, int idir, struct pisb_err *e)
{
	_cleanup_buf_ struct pisb_buf err = PISB_BUF_INIT;
	_cleanup_free_ char *text = sbx_argv_text(argv);
	/* forward: a Ctrl-C ends sbx too, and the caller cleans up */
	struct sbx_run o = { .in_fd = -1, .out_fd = -1, .out = out, .err = &err,
			     .timeout_ms = timeout_ms, .forward = true };
	int code = 0, rr = 0;

	/* `sbx exec ... true` and the probes may be retried when sbx could not
	 * start the VM (nothing ran then): after 250 ms and 1 s */
	for (int i = 0; i < 3; i++) {
		if (i) {
			if (idir >= 0)
				sbx_log(idir, "%s -> %d: %s (retrying)", text, code, sbx_last_line(err.s));
			sleep_ms(i == 1 ? 250 : 1000);
			pisb_buf_reset(&err);
			if (out)
				pisb_buf_reset(out);
		}
		rr = sbx_run(bin, argv, envp, &o, &code, e);
		if (rr < 0 || code == 0 || strcmp(argv[1], "exec") || !sbx_transient(err.s))
			break;
	}
	if (rr < 0) {
		if (idir >= 0)
			sbx_log(idir, "%s: %s", text, e->msg);
		return pisb_err_prefix(e, "'%s'", text);
	}
	if (idir >= 0)
		sbx_log(idir, "%s -> %d%s%s", text, code, code ? ": " : "", code ? sbx_last_line(err.s) : "");
	if (code != 0)
		return pisb_err_set(e, PISB_EXIT_BACKEND, "'%s' failed with status %d%s%s", text, code,
				    err.len ? ": " : "", sbx_last_line(err.s));
	return 0;
}

/* ---- instance files ---- */

void sbx_log(int idir, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	pisb_log_vappend(idir, "sbx.log", fmt, ap);
	va_end(ap);
}

static char *remote_json(const char *sbxname, const char *ws, const struct pisb_sbx_config *x)
{
	struct pisb_buf b = PISB_BUF_INIT;
	struct pisb_jw w;

	pisb_jw_init(&w, &b);
	pisb_jw_obj(&w);
	pisb_jw_kstr(&w, "sbxName", sbxname);
	pisb_jw_kbool(&w, "createdByPisb", true);
	pisb_jw_kstr(&w, "workspace", ws);
	pisb_jw_kstr(&w, "teardown", teardown_word[x->teardown]);
	pisb_jw_kbool(&w, "keepalive", x->keepalive);
	pisb_jw_obj_end(&w);
	return pisb_buf_detach(&b);
}

static char *remote_get(const char *json, const char *key)
{
	struct pisb_json j;
	struct pisb_err ig = PISB_ERR_INIT;
	char *v;

	if (!json || pisb_json_parse(&j, json, strlen(json), &ig) < 0)
		return NULL;
	v = pisb_json_str(&j, pisb_json_get(&j, 0, key));
	pisb_json_release(&j);
	return v;
}

char *pisb_sbx_workspace(const struct pisb_record *rec)
{
	return remote_get(rec->remote_json, "workspace");
}

char *pisb_sbx_name(const struct pisb_record *rec)
{
	return remote_get(rec->remote_json, "sbxName");
}

static void status_save(int idir, struct pisb_runtime *rt, const char *state, const char *sbxname,
			const char *word)
{
	struct pisb_buf b = PISB_BUF_INIT;
	struct pisb_jw w;
	struct pisb_err ig = PISB_ERR_INIT;

	snprintf(rt->state, sizeof(rt->state), "%s", state);
	pisb_jw_init(&w, &b);
	pisb_jw_obj(&w);
	pisb_jw_kstr(&w, "sbxName", sbxname);
	pisb_jw_kstr(&w, "state", word);
	pisb_jw_kint(&w, "checkedAt", pisb_now_ms() / 1000);
	pisb_jw_obj_end(&w);
	free(rt->extra_json);
	rt->extra_json = pisb_buf_detach(&b);
	pisb_runtime_save(idir, rt, &ig);
}

void sbx_mark(struct sbx_inst *t, const char *state, const char *word)
{
	struct pisb_err ig = PISB_ERR_INIT;

	pisb_runtime_release(&t->rt);
	if (pisb_runtime_load(t->idir, &t->rt, &ig) < 0)
		memset(&t->rt, 0, sizeof(t->rt));
	if (!strcmp(state, "running") && strcmp(t->rt.state, "running"))
		t->rt.started_at = pisb_now_ms() / 1000;
	if (!strcmp(state, "stopped"))
		t->rt.stopped_at = pisb_now_ms() / 1000;
	status_save(t->idir, &t->rt, state, t->sbx, word);
}

void sbx_inst_release(struct sbx_inst *t)
{
	if (t->poke > 0)
		close(t->poke);
	if (!t->borrowed) {
		if (t->idir >= 0)
			close(t->idir);
		pisb_record_release(&t->rec);
		if (t->cfg)
			pisb_config_free(t->cfg);
	}
	pisb_runtime_release(&t->rt);
	free(t->sbx);
	free(t->ws);
	free(t->name);
	pisb_strv_release(&t->env);
	memset(t, 0, sizeof(*t));
	t->idir = -1;
}

static int inst_finish(struct sbx_inst *t, struct pisb_err *e);

int sbx_inst_open(struct pisb_state *st, const char *name, struct sbx_inst *t,
		  struct pisb_err *e)
{
	memset(t, 0, sizeof(*t));
	t->idir = pisb_instance_open(st, "instances", name, e);
	if (t->idir < 0)
		return -1;
	t->name = xstrdup(name);
	if (pisb_record_load(t->idir, &t->rec, e) < 0 || pisb_runtime_load(t->idir, &t->rt, e) < 0)
		goto fail;
	if (strcmp(t->rec.driver, "sbx")) {
		pisb_err_set(e, PISB_EXIT_FAIL, "sandbox '%s' uses driver '%s', not sbx", name, t->rec.driver);
		goto fail;
	}
	if (pisb_record_config(&t->rec, &t->cfg, e) < 0)
		goto fail;
	if (inst_finish(t, e) < 0)
		goto fail;
	return 0;
fail:
	sbx_inst_release(t);
	return -1;
}

int sbx_inst_of(struct pisb_sandbox *sb, struct sbx_inst *t, struct pisb_err *e)
{
	memset(t, 0, sizeof(*t));
	t->borrowed = true;
	t->idir = sb->idir;
	t->name = xstrdup(sb->name);
	if (pisb_sandbox_borrow(sb, &t->rec, &t->cfg, &t->rt, e) < 0 || inst_finish(t, e) < 0) {
		sbx_inst_release(t);
		return -1;
	}
	return 0;
}

/* what both opens derive from the record and the config */
static int inst_finish(struct sbx_inst *t, struct pisb_err *e)
{
	const char *name = t->name;

	t->sbx = pisb_sbx_name(&t->rec);
	t->ws = remote_get(t->rec.remote_json, "workspace");
	if (!t->sbx || !t->ws) {
		pisb_err_set(e, PISB_EXIT_FAIL, "sandbox '%s': its record names no sbx sandbox", name);
		return -1;
	}
	if (sbx_find(t->bin, sizeof(t->bin), e) < 0)
		return pisb_err_prefix(e, "sandbox '%s'", name);
	sbx_env(&t->cfg->sbx, &t->env);
	return 0;
}

void sbx_exec_env(const struct pisb_config *cfg, struct pisb_strv *av)
{
	for (size_t i = 0; i < cfg->env.n; i++) {
		pisb_strv_push(av, "-e");
		pisb_strv_pushf(av, "%s=%s", cfg->env.v[i].key, cfg->env.v[i].val);
	}
	for (size_t i = 0; i < cfg->sbx.nenv_passthrough; i++) {
		const char *k = cfg->sbx.env_passthrough[i], *v = getenv(k);
		if (v && !docker_var(k)) {
			pisb_strv_push(av, "-e");
			pisb_strv_pushf(av, "%s=%s", k, v);
		}
	}
}

/* ---- sbx ls --json ---- */

/* sbx's word for sandbox sbxname ("running", "stopped"...), NULL when
 * it is not listed.  -1 + e when sbx ls fails. */
static int sbx_state(const char *bin, char *const *envp, const char *sbxname, char **word,
		     struct pisb_strv *names, struct pisb_err *e)
{
	_cleanup_buf_ struct pisb_buf out = PISB_BUF_INIT;
	char *argv[] = { "sbx", "ls", "--json", NULL };
	struct pisb_json j;
	int arr;

	*word = NULL;
	if (sbx_call(bin, argv, envp, SBX_LS_TIMEOUT_MS, &out, -1, e) < 0)
		return -1;
	if (!out.len || pisb_json_parse(&j, out.s, out.len, e) < 0)
		return pisb_err_set(e, PISB_EXIT_BACKEND, "'sbx ls --json': unreadable output");
	/* {"sandboxes":[...]} (current) or a bare array (older CLIs) */
	arr = j.tok[0].type == JSMN_ARRAY ? 0 : pisb_json_get(&j, 0, "sandboxes");
	for (int i = 0; arr >= 0 && i < j.tok[arr].size; i++) {
		int o = pisb_json_at(&j, arr, i);
		_cleanup_free_ char *n = pisb_json_str(&j, pisb_json_get(&j, o, "name"));
		if (!n)
			continue;
		if (names)
			pisb_strv_push(names, n);
		if (sbxname && !strcmp(n, sbxname) && !*word) {
			char *s = pisb_json_str(&j, pisb_json_get(&j, o, "status"));
			*word = s ? s : xstrdup("unknown");
			for (char *p = *word; *p; p++)
				*p = (char)(*p >= 'A' && *p <= 'Z' ? *p + 32 : *p);
		}
	}
	pisb_json_release(&j);
	return 0;
}

/* ---- the watchdog ---- */

static int env_ms(const char *var, int dflt)
{
	const char *v = getenv(var);
	long long n;

	return v && pisb_parse_ll(v, 10, 3600000, &n) == 0 ? (int)n : dflt;
}


/* The owner is gone: apply the teardown policy, 5 tries 2 s apart. */
static void watch_teardown(struct pisb_state *st, struct sbx_inst *t)
{
	enum pisb_teardown td = t->cfg->sbx.teardown;
	struct pisb_err e = PISB_ERR_INIT;
	_cleanup_close_ int lk = -1;
	char what[96];

	sbx_log(t->idir, "owner pid %d is gone: teardown %s", (int)t->rec.owner.pid, teardown_word[td]);
	if (td == PISB_TEARDOWN_NONE)
		return;
	snprintf(what, sizeof(what), "sandbox '%s'", t->name);
	lk = pisb_lock_acquire(t->idir, "op.lock", true, 60000, what, &e);
	if (lk < 0)
		return;
	for (int i = 0; i < 5; i++) {
		char *rm[] = { "sbx", "rm", "--force", t->sbx, NULL };
		char *stop[] = { "sbx", "stop", t->sbx, NULL };
		struct pisb_err ce = PISB_ERR_INIT;
		int r = sbx_call(t->bin, td == PISB_TEARDOWN_REMOVE ? rm : stop, t->env.v,
				 SBX_LC_TIMEOUT_MS, NULL, t->idir, &ce);
		if (r == 0 || strstr(ce.msg, "not found")) {
			if (td == PISB_TEARDOWN_REMOVE) {
				close(lk);
				lk = -1;
				pisb_state_trash(st, "instances", t->name, &e);
			} else {
				sbx_mark(t, "stopped", "stopped");
			}
			return;
		}
		sleep_ms(2000);
	}
}

static void __attribute__((noreturn)) watch_loop(struct pisb_state *st, const char *name,
						 const char *sbxname, int owner, const char *td,
						 bool keepalive)
{
	int poll_ms = env_ms("PISB_SBX_POLL_MS", 5000);
	int keep_ms = env_ms("PISB_SBX_KEEPALIVE_MS", 60000);
	int64_t next_poke = pisb_mono_ms() + keep_ms;
	_cleanup_close_ int wl = -1;

	{
		struct pisb_err e = PISB_ERR_INIT;
		_cleanup_close_ int idir = pisb_instance_open(st, "instances", name, &e);
		if (idir < 0)
			_exit(0);
		wl = pisb_lock_acquire(idir, "watch.lock", true, 0, "watchdog", &e);
		if (wl < 0)
			_exit(0);
		sbx_log(idir, "watchdog %d armed (owner pid %d, teardown %s, keepalive %s)",
			(int)getpid(), owner, td, keepalive ? "on" : "off");
	}
	for (;;) {
		struct sbx_inst t;
		struct pisb_err e = PISB_ERR_INIT;

		sleep_ms(poll_ms);
		if (sbx_inst_open(st, name, &t, &e) < 0) {
			if (e.code == PISB_EXIT_NOTFOUND)
				_exit(0);
			continue;
		}
		/* destroyed and made again under the same name: not ours */
		if (strcmp(t.sbx, sbxname)) {
			sbx_inst_release(&t);
			_exit(0);
		}
		if (t.rec.owner.pid > 0 && !pisb_proc_id_alive(&t.rec.owner)) {
			watch_teardown(st, &t);
			sbx_inst_release(&t);
			_exit(0);
		}
		if (t.cfg->sbx.keepalive && pisb_mono_ms() >= next_poke) {
			next_poke = pisb_mono_ms() + keep_ms;
			/* only a running sandbox: exec would start a stopped one.
			 * poke.lock: stop/destroy wait for a poke in flight, and
			 * the state is read again under it */
			struct pisb_err ig = PISB_ERR_INIT;
			_cleanup_close_ int pk = pisb_lock_acquire(t.idir, "poke.lock", true, 0, "keepalive", &ig);
			struct pisb_runtime rt;
			if (pk >= 0 && pisb_runtime_load(t.idir, &rt, &ig) == 0) {
				if (!strcmp(rt.state, "running")) {
					char *argv[] = { "sbx", "exec", t.sbx, "--", "true", NULL };
					sbx_call(t.bin, argv, t.env.v, SBX_LC_TIMEOUT_MS, NULL, -1, &ig);
				}
				pisb_runtime_release(&rt);
			}
		} else if (!t.cfg->sbx.keepalive && t.rec.owner.pid <= 0) {
			sbx_inst_release(&t);
			_exit(0);
		}
		sbx_inst_release(&t);
	}
}

/* A detached watchdog (double fork, own session, no inherited fds but
 * the state dir), unless one already holds watch.lock. */
static void watch_arm(struct pisb_state *st, struct sbx_inst *t)
{
	pid_t pid;

	if (!(t->rec.owner.pid > 0 || t->cfg->sbx.keepalive))
		return;
	if (pisb_lock_is_held(t->idir, "watch.lock"))
		return;
	pid = fork();
	if (pid < 0)
		return;
	if (pid == 0) {
		pisb_detach_here();
		pisb_close_from(3, st->fd);
		watch_loop(st, t->name, t->sbx, (int)t->rec.owner.pid,
			   teardown_word[t->cfg->sbx.teardown], t->cfg->sbx.keepalive);
	}
	waitpid(pid, NULL, 0);
}

/* ---- create ---- */

/* pi-sbx-<pid>-<n>, n the first number that neither sbx nor this state
 * dir uses. */
static char *pick_name(struct pisb_state *st, pid_t owner, struct pisb_strv *taken)
{
	DIR *d = pisb_opendirat(st->fd, "instances");
	struct dirent *de;

	if (d) {
		while ((de = readdir(d))) {
			_cleanup_close_ int idir = -1;
			struct pisb_record rec;
			struct pisb_err ig = PISB_ERR_INIT;
			if (!pisb_name_valid(de->d_name))
				continue;
			idir = pisb_instance_open(st, "instances", de->d_name, &ig);
			if (idir >= 0 && pisb_record_load(idir, &rec, &ig) == 0) {
				char *n = remote_get(rec.remote_json, "sbxName");
				if (n)
					pisb_strv_push(taken, n);
				free(n);
				pisb_record_release(&rec);
			}
		}
		closedir(d);
	}
	for (int n = 1;; n++) {
		char *cand = xasprintf("pi-sbx-%d-%d", (int)owner, n);
		bool used = false;
		for (size_t i = 0; i < taken->n && !used; i++)
			used = !strcmp(taken->v[i], cand);
		if (!used)
			return cand;
		free(cand);
	}
}

static int refuse_unsupported(const struct pisb_config *cfg, const char *name, struct pisb_err *e)
{
	if (cfg->nservices)
		return pisb_err_set(e, PISB_EXIT_FAIL,
				    "create '%s': driver sbx does not run services (services: %s%s); remove them or use driver local",
				    name, cfg->services[0].name, cfg->nservices > 1 ? ", ..." : "");
	if (cfg->disk_explicit)
		return pisb_err_set(e, PISB_EXIT_FAIL,
				    "create '%s': driver sbx cannot enforce diskGiB (sbx sizes its disks itself); remove it",
				    name);
	if (cfg->image && strcmp(cfg->image, "host"))
		return pisb_err_set(e, PISB_EXIT_FAIL,
				    "create '%s': driver sbx does not use image (%s); its sandboxes start from sbx.template",
				    name, cfg->image);
	if (cfg->nallowed_hosts)
		return pisb_err_set(e, PISB_EXIT_FAIL,
				    "create '%s': driver sbx cannot apply network.allowedHosts: its egress follows the host's 'sbx policy' rules",
				    name);
	return 0;
}

static void run_setup(struct sbx_inst *t)
{
	char *failed = NULL;

	for (size_t i = 0; i < t->cfg->nsetup && !failed; i++) {
		_cleanup_strv_ struct pisb_strv av = PISB_STRV_INIT;
		_cleanup_buf_ struct pisb_buf out = PISB_BUF_INIT;
		_cleanup_close_ int log = -1;
		struct sbx_run o = { .in_fd = -1, .out_fd = -1, .merge = true, .out = &out,
				     .timeout_ms = 20 * 60 * 1000 };
		struct pisb_err e = PISB_ERR_INIT;
		int code = 0;

		pisb_strv_push(&av, "sbx");
		pisb_strv_push(&av, "exec");
		pisb_strv_push(&av, "-w");
		pisb_strv_push(&av, t->ws);
		sbx_exec_env(t->cfg, &av);
		pisb_strv_push(&av, t->sbx);
		pisb_strv_push(&av, "--");
		pisb_strv_push(&av, "/bin/sh");
		pisb_strv_push(&av, "-lc");
		pisb_strv_push(&av, t->cfg->setup[i]);
		sbx_log(t->idir, "setup[%zu]: %s", i, t->cfg->setup[i]);
		if (sbx_run(t->bin, av.v, t->env.v, &o, &code, &e) < 0)
			failed = xasprintf("setup[%zu] '%s': %s", i, t->cfg->setup[i], e.msg);
		else if (code != 0)
			failed = xasprintf("setup[%zu] '%s' exited with %d", i, t->cfg->setup[i], code);
		log = openat(t->idir, "sbx.log", O_WRONLY | O_APPEND | O_CLOEXEC | O_NOFOLLOW);
		if (log >= 0 && out.len)
			pisb_write_all(log, out.s, out.len);
	}
	if (failed) {
		struct pisb_err ig = PISB_ERR_INIT;
		sbx_log(t->idir, "setup failed: %s (the sandbox runs anyway)", failed);
		pisb_runtime_release(&t->rt);
		if (pisb_runtime_load(t->idir, &t->rt, &ig) == 0) {
			free(t->rt.setup_error);
			t->rt.setup_error = failed;
			failed = NULL;
			pisb_runtime_save(t->idir, &t->rt, &ig);
		}
		free(failed);
	}
}

/* create --project: the project's files into the workspace before sbx
 * mounts it (project.h's copy, its base kept in sdir), owned by us as the
 * rest of the workspace is */
static int seed_project(int sdir, struct pisb_state *st, const char *dest,
			const struct pisb_config *cfg, const char *dir, struct pisb_err *e)
{
	_cleanup_free_ char *w = xasprintf("%s/workspace", dest);
	_cleanup_close_ int wsfd = pisb_open_beneath(st->fd, w, O_RDONLY | O_DIRECTORY);
	struct pisb_project_stats s;

	if (wsfd < 0)
		return pisb_err_sys(e, PISB_EXIT_FAIL, "open the workspace '%s'", w);
	return pisb_project_seed(sdir, wsfd, dir, &cfg->project, geteuid(), getegid(), 1, &s, e);
}

int pisb_sbx_create(struct pisb_state *st, const struct pisb_config *cfg,
		    const char *config_json, const struct pisb_lc_opts *o,
		    struct pisb_err *e)
{
	const struct pisb_sbx_config *x = &cfg->sbx;
	char bin[4096];
	_cleanup_strv_ struct pisb_strv env = PISB_STRV_INIT, taken = PISB_STRV_INIT, av = PISB_STRV_INIT;
	_cleanup_free_ char *sbxname = NULL, *ws = NULL, *scratch = NULL, *stg = NULL, *dest = NULL;
	_cleanup_free_ char *word = NULL, *rj = NULL;
	_cleanup_close_ int sdir = -1, lock = -1;
	struct pisb_record rec;
	struct pisb_runtime rt;
	struct sbx_inst t;
	bool published = false, made = false;
	int ret = -1;

	memset(&t, 0, sizeof(t));
	t.idir = -1;
	if (!pisb_name_valid(o->name))
		return pisb_err_set(e, PISB_EXIT_USAGE,
				    "invalid name '%s' (lowercase letter, then up to 39 of a-z 0-9 -)", o->name);
	if (refuse_unsupported(cfg, o->name, e) < 0)
		return -1;
	if (sbx_find(bin, sizeof(bin), e) < 0)
		return pisb_err_prefix(e, "create '%s'", o->name);
	sbx_env(x, &env);
	dest = xasprintf("instances/%s", o->name);
	if (faccessat(st->fd, dest, F_OK, AT_SYMLINK_NOFOLLOW) == 0)
		return pisb_err_set(e, PISB_EXIT_BUSY, "sandbox '%s' already exists", o->name);
	if (sbx_state(bin, env.v, NULL, &word, &taken, e) < 0)
		return pisb_err_prefix(e, "create '%s'", o->name);
	sbxname = pick_name(st, o->owner_pid, &taken);

	/* stage the record, then publish it at once: the workspace that sbx
	 * mounts must have its final path */
	sdir = pisb_instance_stage(st, o->name, &stg, &lock, e);
	if (sdir < 0)
		return pisb_err_prefix(e, "create '%s'", o->name);
	ws = xasprintf("%s/instances/%s/workspace", st->path, o->name);
	memset(&rec, 0, sizeof(rec));
	rec.name = (char *)o->name;
	rec.driver = "sbx";
	rec.created_at = pisb_now_ms() / 1000;
	rec.config_json = (char *)config_json;
	rec.owner.pid = o->owner_pid;
	rec.owner.start = o->owner_pid > 0 ? pisb_proc_start(o->owner_pid) : 0;
	rec.session_id = (char *)o->session_id;
	rj = remote_json(sbxname, ws, x);
	rec.remote_json = rj;
	if (pisb_record_save(sdir, &rec, e) < 0)
		goto out;
	memset(&rt, 0, sizeof(rt));
	rt.started_at = rec.created_at;
	status_save(sdir, &rt, "creating", sbxname, NULL);
	pisb_runtime_release(&rt);
	if (renameat2(st->fd, stg, st->fd, dest, RENAME_NOREPLACE) < 0) {
		if (errno == EEXIST)
			pisb_err_set(e, PISB_EXIT_BUSY, "sandbox '%s' already exists", o->name);
		else
			pisb_err_sys(e, PISB_EXIT_FAIL, "publish sandbox '%s'", o->name);
		goto out;
	}
	pisb_fsync_parent(st->fd, dest);
	published = true;
	{
		_cleanup_free_ char *w = xasprintf("%s/workspace", dest);
		_cleanup_free_ char *s = xasprintf("%s/scratch", dest);
		if (pisb_mkdirs_at(st->fd, w, 0755, e) < 0 ||
		    (x->workspace_read_only && pisb_mkdirs_at(st->fd, s, 0755, e) < 0))
			goto out;
		scratch = xasprintf("%s/instances/%s/scratch", st->path, o->name);
	}
	if (o->project && seed_project(sdir, st, dest, cfg, o->project, e) < 0)
		goto out;

	pisb_strv_push(&av, "sbx");
	pisb_strv_push(&av, "create");
	pisb_strv_push(&av, "--quiet");
	pisb_strv_push(&av, "--name");
	pisb_strv_push(&av, sbxname);
	if (x->cpus || cfg->resources_explicit || cfg->profile_explicit) {
		pisb_strv_push(&av, "--cpus");
		pisb_strv_pushf(&av, "%d", x->cpus ? x->cpus : cfg->cpus);
	}
	if (x->memory || cfg->resources_explicit || cfg->profile_explicit) {
		pisb_strv_push(&av, "--memory");
		if (x->memory)
			pisb_strv_push(&av, x->memory);
		else
			pisb_strv_pushf(&av, "%dg", cfg->memory_gib);
	}
	if (x->template_) {
		pisb_strv_push(&av, "--template");
		pisb_strv_push(&av, x->template_);
	}
	pisb_strv_push(&av, "shell");
	if (x->workspace_read_only) {
		/* sbx needs a writable primary workspace */
		pisb_strv_push(&av, scratch);
		pisb_strv_pushf(&av, "%s:ro", ws);
	} else {
		pisb_strv_push(&av, ws);
	}
	if (sbx_call(bin, av.v, env.v, SBX_CREATE_TIMEOUT_MS, NULL, sdir, e) < 0) {
		/* another create took the name since sbx ls: sbx said so and made
		 * nothing; the record names it, so fail rather than guess */
		if (strstr(e->msg, "already exists"))
			pisb_err_set(e, PISB_EXIT_BUSY, "%s (another sandbox took the name '%s' meanwhile: try again)",
				     e->msg, sbxname);
		else
			made = true;   /* interrupted or failed half-way: remove what may exist */
		goto out;
	}
	made = true;
	free(word);
	word = NULL;
	if (sbx_state(bin, env.v, sbxname, &word, NULL, e) < 0)
		goto out;
	if (!word) {
		pisb_err_set(e, PISB_EXIT_BACKEND, "'sbx create' succeeded but 'sbx ls' does not list '%s'", sbxname);
		goto out;
	}
	if (sbx_inst_open(st, o->name, &t, e) < 0)
		goto out;
	sbx_log(t.idir, "created sbx sandbox %s (%s)", sbxname, word);
	sbx_mark(&t, "running", word);
	run_setup(&t);
	watch_arm(st, &t);
	/* complete: other commands may use it from here on */
	close(lock);
	lock = -1;
	if (o->ready) {
		o->ready->sandbox_id = xstrdup(sbxname);
		o->ready->workspace = xstrdup(ws);
	}
	ret = 0;
out:
	if (ret < 0) {
		struct pisb_err ig = PISB_ERR_INIT;
		if (made) {
			char *rm[] = { "sbx", "rm", "--force", sbxname, NULL };
			struct pisb_err re = PISB_ERR_INIT;
			if (sbx_call(bin, rm, env.v, SBX_LC_TIMEOUT_MS, NULL, -1, &re) < 0 &&
			    !strstr(re.msg, "not found"))
				pisb_err_set(e, e->code, "%s (and removing '%s' failed too: %s)", e->msg, sbxname, re.msg);
		}
		if (lock >= 0) {
			close(lock);
			lock = -1;
		}
		if (published)
			pisb_state_trash(st, "instances", o->name, &ig);
		else if (stg)
			pisb_rm_rf_at(st->fd, stg, &ig);
		pisb_err_prefix(e, "create '%s'", o->name);
	}
	sbx_inst_release(&t);
	return ret;
}

/* ---- start / stop / destroy ---- */

/* op.lock, then poke.lock (a keepalive poke in flight finishes first;
 * none starts until the state is written).  *lk holds both: closing the
 * op.lock fd is what callers do; the poke lock goes with t. */
static int open_locked(struct pisb_sandbox *sb, const struct pisb_lc_opts *o,
		       struct sbx_inst *t, int *lk, struct pisb_err *e)
{
	char what[96];

	*lk = -1;
	if (sbx_inst_of(sb, t, e) < 0)
		return -1;
	snprintf(what, sizeof(what), "sandbox '%s'", sb->name);
	*lk = pisb_lock_acquire(t->idir, "op.lock", true, o ? o->wait_ms : 0, what, e);
	if (*lk >= 0)
		t->poke = pisb_lock_acquire(t->idir, "poke.lock", true, SBX_LC_TIMEOUT_MS, "keepalive", e);
	if (*lk < 0 || t->poke < 0) {
		if (*lk >= 0)
			close(*lk);
		*lk = -1;
		sbx_inst_release(t);
		return -1;
	}
	return 0;
}

int pisb_sbx_start(struct pisb_sandbox *sb, const struct pisb_lc_opts *o, struct pisb_err *e)
{
	struct pisb_state *st = sb->st;
	const char *name = sb->name;
	struct sbx_inst t;
	int lk, ret = -1;

	if (open_locked(sb, o, &t, &lk, e) < 0)
		return pisb_err_prefix(e, "start '%s'", name);
	{
		char *argv[] = { "sbx", "exec", t.sbx, "--", "true", NULL };
		if (sbx_call(t.bin, argv, t.env.v, SBX_CREATE_TIMEOUT_MS, NULL, t.idir, e) < 0) {
			if (sbx_failed_itself(e->msg, t.sbx) && strstr(e->msg, "not found"))
				sbx_mark(&t, "gone", NULL);
			goto out;
		}
	}
	sbx_mark(&t, "running", "running");
	watch_arm(st, &t);
	ret = 0;
out:
	close(lk);
	if (ret < 0)
		pisb_err_prefix(e, "start '%s'", name);
	sbx_inst_release(&t);
	return ret;
}

int pisb_sbx_end(struct pisb_sandbox *sb, const struct pisb_lc_opts *o, bool destroy,
		 struct pisb_ready *ev, struct pisb_err *e)
{
	struct sbx_inst t;
	int lk, ret = -1;

	if (open_locked(sb, o, &t, &lk, e) < 0)
		return -1;
	if (destroy) {
		char *argv[] = { "sbx", "rm", "--force", t.sbx, NULL };
		struct pisb_err ce = PISB_ERR_INIT;
		/* already gone from sbx is fine: the instance goes too */
		if (sbx_call(t.bin, argv, t.env.v, SBX_LC_TIMEOUT_MS, NULL, t.idir, &ce) < 0 &&
		    !strstr(ce.msg, "not found")) {
			*e = ce;
			goto out;
		}
	} else {
		char *argv[] = { "sbx", "stop", t.sbx, NULL };
		if (sbx_call(t.bin, argv, t.env.v, SBX_LC_TIMEOUT_MS, NULL, t.idir, e) < 0) {
			if (strstr(e->msg, "not found"))
				sbx_mark(&t, "gone", NULL);
			goto out;
		}
		sbx_mark(&t, "stopped", "stopped");
	}
	ev->sandbox_id = xstrdup(t.sbx);
	ev->workspace = xstrdup(t.ws);
	ret = 0;
out:
	close(lk);
	sbx_inst_release(&t);
	return ret;
}

/* ---- list / inspect ---- */

int pisb_sbx_refresh(struct pisb_sandbox *sb, struct pisb_err *e)
{
	struct sbx_inst t;
	_cleanup_free_ char *word = NULL;
	int ret = -1;

	if (sbx_inst_of(sb, &t, e) < 0)
		return -1;
	if (!strcmp(t.rt.state, "creating"))
		ret = 0;
	else if (sbx_state(t.bin, t.env.v, t.sbx, &word, NULL, e) == 0) {
		ret = 0;
		if (!word)
			sbx_mark(&t, "gone", NULL);
		else
			sbx_mark(&t, !strcmp(word, "running") ? "running" : "stopped", word);
	}
	sbx_inst_release(&t);
	return ret;
}

/* ---- exec ---- */

static int gone_check(struct sbx_inst *t, struct pisb_err *e)
{
	if (!strcmp(t->rt.state, "gone"))
		return pisb_err_set(e, PISB_EXIT_BACKEND,
				    "sandbox '%s': its sbx sandbox '%s' no longer exists (destroy it with 'pisb destroy %s --confirm %s')",
				    t->name, t->sbx, t->name, t->name);
	if (!strcmp(t->rt.state, "creating") && pisb_lock_is_held(t->idir, "op.lock"))
		return pisb_err_set(e, PISB_EXIT_BUSY, "sandbox '%s' is still being created", t->name);
	return 0;
}

/* Run av attached (stdio ours, signals forwarded); classify the result. */
static int attached(struct sbx_inst *t, char *const *av, int *code, struct pisb_err *e)
{
	_cleanup_buf_ struct pisb_buf err = PISB_BUF_INIT;
	struct sbx_run o = { .in_fd = 0, .out_fd = 1, .tee_err = true, .err = &err, .forward = true };

	/* a caller that dies takes the command with it */
	prctl(PR_SET_PDEATHSIG, SIGTERM);
	if (sbx_run(t->bin, av, t->env.v, &o, code, e) < 0)
		return pisb_err_prefix(e, "sandbox '%s'", t->name);
	if (*code != 0 && sbx_failed_itself(err.s, t->sbx)) {
		if (strstr(err.s, "not found"))
			sbx_mark(t, "gone", NULL);
		return pisb_err_set(e, PISB_EXIT_BACKEND, "sandbox '%s': 'sbx exec %s' failed: %s",
				    t->name, t->sbx, sbx_last_line(err.s));
	}
	/* sbx exec starts a stopped sandbox */
	if (strcmp(t->rt.state, "running"))
		sbx_mark(t, "running", "running");
	return 0;
}

void sbx_exec_argv(const struct sbx_inst *t, const struct pisb_exec_req *r, bool stdin_too,
		   const char *pidfile, struct pisb_strv *av)
{
	_cleanup_free_ char *cwd = pisb_path_in(t->ws, r->cwd);

	pisb_strv_push(av, "sbx");
	pisb_strv_push(av, "exec");
	if (stdin_too)
		pisb_strv_push(av, "-i");
	pisb_strv_push(av, "-w");
	pisb_strv_push(av, cwd);
	sbx_exec_env(t->cfg, av);
	for (size_t i = 0; i < r->nenv; i++) {
		pisb_strv_push(av, "-e");
		pisb_strv_push(av, r->env[i]);
	}
	pisb_strv_push(av, t->sbx);
	pisb_strv_push(av, "--");
	if (pidfile) {
		pisb_strv_push(av, "/bin/sh");
		pisb_strv_push(av, "-c");
		pisb_strv_push(av, "echo $$ > \"$0\"; exec \"$@\"");
		pisb_strv_push(av, pidfile);
	}
	if (r->sh) {
		pisb_strv_push(av, "/bin/sh");
		pisb_strv_push(av, "-lc");
		pisb_strv_push(av, r->sh);
	} else {
		for (size_t i = 0; i < r->argc; i++)
			pisb_strv_push(av, r->argv[i]);
	}
}

int pisb_sbx_exec_attached(struct pisb_sandbox *sb, const struct pisb_exec_req *r,
			   int *code, struct pisb_err *e)
{
	struct sbx_inst t;
	_cleanup_strv_ struct pisb_strv av = PISB_STRV_INIT;
	int ret;

	if (sbx_inst_of(sb, &t, e) < 0)
		return -1;
	if (gone_check(&t, e) < 0) {
		sbx_inst_release(&t);
		return -1;
	}
	sbx_exec_argv(&t, r, true, NULL, &av);
	ret = attached(&t, av.v, code, e);
	sbx_inst_release(&t);
	return ret;
}

int pisb_sbx_shell(struct pisb_sandbox *sb, const char *user, int *code, struct pisb_err *e)
{
	struct sbx_inst t;
	_cleanup_strv_ struct pisb_strv av = PISB_STRV_INIT;
	int ret;

	if (sbx_inst_of(sb, &t, e) < 0)
		return -1;
	if (gone_check(&t, e) < 0) {
		sbx_inst_release(&t);
		return -1;
	}
	pisb_strv_push(&av, "sbx");
	pisb_strv_push(&av, "exec");
	pisb_strv_push(&av, "-i");
	if (isatty(0))
		pisb_strv_push(&av, "-t");
	pisb_strv_push(&av, "-w");
	pisb_strv_push(&av, t.ws);
	if (user) {
		pisb_strv_push(&av, "-u");
		pisb_strv_push(&av, user);
	}
	sbx_exec_env(t.cfg, &av);
	pisb_strv_push(&av, t.sbx);
	pisb_strv_push(&av, "--");
	pisb_strv_push(&av, "/bin/bash");
	pisb_strv_push(&av, "-l");
	ret = attached(&t, av.v, code, e);
	sbx_inst_release(&t);
	return ret;
}

/* ---- files ---- */

char *pisb_sbx_fs_workspace(int idir, struct pisb_err *e)
{
	struct pisb_record rec;
	char *ws;

	if (pisb_record_load(idir, &rec, e) < 0)
		return NULL;
	ws = remote_get(rec.remote_json, "workspace");
	pisb_record_release(&rec);
	if (!ws || ws[0] != '/') {
		free(ws);
		pisb_err_set(e, PISB_EXIT_FAIL, "the sandbox's record names no sbx workspace");
		return NULL;
	}
	return ws;
}

static int write_proc(const char *file, const char *text)
{
	_cleanup_close_ int fd = open(file, O_WRONLY | O_CLOEXEC);
	return fd < 0 || pisb_write_all(fd, text, strlen(text)) < 0 ? -1 : 0;
}

int pisb_sbx_fs_enter(const char *ws, struct pisb_err *e)
{
	uid_t uid = geteuid();
	gid_t gid = getegid();
	_cleanup_close_ int wfd = -1;
	char map[64], src[64];
	_cleanup_free_ char *dst = NULL;

	if (access(ws, F_OK) < 0)
		return pisb_err_sys(e, PISB_EXIT_BACKEND, "the sbx workspace '%s'", ws);
	/* our own user namespace (root inside = us outside) and mount
	 * namespace: the tmpfs root below exists for this process only */
	if (unshare(CLONE_NEWUSER | CLONE_NEWNS) < 0)
		return pisb_err_sys(e, PISB_EXIT_BACKEND, "files of an sbx sandbox need a user namespace: unshare");
	snprintf(map, sizeof(map), "0 %u 1", (unsigned)uid);
	if (write_proc("/proc/self/setgroups", "deny") < 0 && errno != ENOENT)
		return pisb_err_sys(e, PISB_EXIT_BACKEND, "write /proc/self/setgroups");
	if (write_proc("/proc/self/uid_map", map) < 0)
		return pisb_err_sys(e, PISB_EXIT_BACKEND, "write /proc/self/uid_map");
	snprintf(map, sizeof(map), "0 %u 1", (unsigned)gid);
	if (write_proc("/proc/self/gid_map", map) < 0)
		return pisb_err_sys(e, PISB_EXIT_BACKEND, "write /proc/self/gid_map");
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		return pisb_err_sys(e, PISB_EXIT_BACKEND, "make mounts private");
	/* opened in the new namespace: a bind source must be one of its mounts */
	wfd = open(ws, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (wfd < 0)
		return pisb_err_sys(e, PISB_EXIT_BACKEND, "open the sbx workspace '%s'", ws);
	/* a tmpfs over the workspace's own path (we hold it open) becomes the
	 * root; the workspace is bound back at its path inside it */
	if (mount("pisb-sbx-root", ws, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755") < 0)
		return pisb_err_sys(e, PISB_EXIT_BACKEND, "mount a tmpfs root");
	dst = xasprintf("%s%s", ws, ws);
	{
		_cleanup_close_ int top = open(ws, O_PATH | O_DIRECTORY | O_CLOEXEC);
		if (top < 0 || pisb_mkdirs_at(top, ws + 1, 0755, e) < 0)
			return pisb_err_sys(e, PISB_EXIT_BACKEND, "make '%s' in the tmpfs root", ws);
	}
	snprintf(src, sizeof(src), "/proc/self/fd/%d", wfd);
	/* not recursive: the tmpfs now on top of it would come along */
	if (mount(src, dst, NULL, MS_BIND, NULL) < 0)
		return pisb_err_sys(e, PISB_EXIT_BACKEND, "bind the workspace");
	if (chdir(ws) < 0 || chroot(".") < 0 || chdir("/") < 0)
		return pisb_err_sys(e, PISB_EXIT_BACKEND, "chroot into the workspace's root");
	return 0;
}
