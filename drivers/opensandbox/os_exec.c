/* os_exec.c - commands in an OpenSandbox sandbox through execd.
 *
 * POST /command answers a stream of JSON events separated by blank lines
 * (no "data:" prefix on real execd; accepted when present): init (the
 * command id), ping, stdout/stderr (one event per line, terminator
 * stripped, an empty line sent as "\n"), then exactly one of
 * execution_complete (exit 0) or error (evalue = the exit code).  A stream
 * that ends without either leaves the exit status unknown: that is an
 * error (exit 5), never 0.  Dropping the connection does not stop the
 * command: an interrupt is DELETE /command?id=ID.
 *
 * Detached commands (handles) run as execd background commands: their
 * output (stdout and stderr merged) is read with GET /command/ID/logs from
 * a byte cursor kept in instances/NAME/exec/ID.
 */
#include "opensandbox.h"
#include "os_internal.h"
#include "err.h"
#include "exec.h"
#include "json.h"
#include "state.h"
#include "util.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/ioctl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

void os_sq(struct pisb_buf *b, const char *s)
{
	pisb_buf_addc(b, '\'');
	for (; *s; s++) {
		if (*s == '\'')
			pisb_buf_adds(b, "'\\''");
		else
			pisb_buf_addc(b, *s);
	}
	pisb_buf_addc(b, '\'');
}

/* ---- the event stream ---- */

struct sse {
	CURL *h;
	const struct os_run *o;
	struct pisb_buf line;
	struct pisb_buf raw;          /* first bytes, for an error answer */
	char id[80];
	bool checked, is_stream;
	bool done;                    /* a terminal event came */
	int code;
	bool write_failed;
};

static void emit(struct sse *s, bool err, const char *p, size_t n)
{
	int fd = err ? s->o->err_fd : s->o->out_fd;
	struct pisb_buf *b = err ? s->o->err : s->o->out;
	size_t cap = s->o->cap ? s->o->cap : (8u << 20);

	if (fd >= 0) {
		if (pisb_write_all(fd, p, n) < 0)
			s->write_failed = true;
	} else if (b && b->len < cap) {
		pisb_buf_add(b, p, n < cap - b->len ? n : cap - b->len);
	}
}

static volatile sig_atomic_t got_sig;   /* an interrupt we were sent */

/* Exit status from an error event's evalue and traceback. */
static int error_code(struct pisb_json *j, int err, struct sse *s)
{
	_cleanup_free_ char *ev = pisb_json_str(j, pisb_json_get(j, err, "evalue"));
	_cleanup_free_ char *tb = pisb_json_str(j, pisb_json_at(j, pisb_json_get(j, err, "traceback"), 0));
	long long v;

	if (ev && pisb_parse_ll(ev, -1000000, 1000000, &v) == 0) {
		int sig = SIGKILL;

		if (v >= 0)
			return (int)(v & 0xff) == v ? (int)v : 255;
		/* killed by a signal: Go reports -1, the traceback names it */
		if (tb && strstr(tb, "terminated"))
			sig = SIGTERM;
		else if (tb && strstr(tb, "interrupt"))
			sig = SIGINT;
		else if (tb && strstr(tb, "hangup"))
			sig = SIGHUP;
		if (!got_sig && !os_stop_sig) {
			/* not our interrupt: say who, or the 137 is a mystery */
			_cleanup_buf_ struct pisb_buf m = PISB_BUF_INIT;
			pisb_buf_addf(&m, "pisb: the command was killed inside the sandbox (%s): %s\n",
				      tb ? tb : "signal", s->o->timeout_ms > 0 ? "its timeout passed, or the sandbox was stopped or removed"
				      : "the sandbox was stopped, paused or removed, or its server shut down");
			emit(s, true, m.s, m.len);
		}
		return 128 + sig;
	}
	/* the process could not start: evalue is the error text */
	{
		_cleanup_buf_ struct pisb_buf m = PISB_BUF_INIT;
		pisb_buf_addf(&m, "pisb: cannot run the command: %s\n", ev ? ev : "unknown error");
		emit(s, true, m.s, m.len);
	}
	if (ev && (strstr(ev, "not found") || strstr(ev, "no such file")))
		return PISB_EXIT_NOCMD;
	return PISB_EXIT_NOEXEC;
}

static void event(struct sse *s, const char *p, size_t n)
{
	struct pisb_json j;
	struct pisb_err ig = PISB_ERR_INIT;
	int t;

	while (n && (*p == ' ' || *p == '\t')) {
		p++;
		n--;
	}
	if (!n || *p == ':')
		return;
	if (n >= 5 && !strncmp(p, "data:", 5)) {
		p += 5;
		n -= 5;
		if (n && *p == ' ') {
			p++;
			n--;
		}
	} else if ((n >= 6 && !strncmp(p, "event:", 6)) || (n >= 3 && !strncmp(p, "id:", 3)) ||
		   (n >= 6 && !strncmp(p, "retry:", 6))) {
		return;
	}
	if (pisb_json_parse(&j, p, n, &ig) < 0)
		return;
	t = pisb_json_get(&j, 0, "type");
	if (pisb_json_eq(&j, t, "init")) {
		_cleanup_free_ char *id = pisb_json_str(&j, pisb_json_get(&j, 0, "text"));
		if (id)
			snprintf(s->id, sizeof(s->id), "%s", id);
	} else if (pisb_json_eq(&j, t, "stdout") || pisb_json_eq(&j, t, "stderr")) {
		_cleanup_buf_ struct pisb_buf txt = PISB_BUF_INIT;
		bool err = pisb_json_eq(&j, t, "stderr");
		pisb_json_str_buf(&j, pisb_json_get(&j, 0, "text"), &txt);
		/* a line without its terminator; an empty line comes as "\n" */
		if (!(txt.len == 1 && txt.s[0] == '\n'))
			pisb_buf_addc(&txt, '\n');
		emit(s, err, txt.s, txt.len);
	} else if (pisb_json_eq(&j, t, "execution_complete")) {
		if (!s->done) {
			s->done = true;
			s->code = 0;
		}
	} else if (pisb_json_eq(&j, t, "error")) {
		if (!s->done) {
			s->done = true;
			s->code = error_code(&j, pisb_json_get(&j, 0, "error"), s);
		}
	}
	pisb_json_release(&j);
}

static bool sink(const char *p, size_t n, void *arg)
{
	struct sse *s = arg;

	if (!s->checked) {
		long st = 0;
		curl_easy_getinfo(s->h, CURLINFO_RESPONSE_CODE, &st);
		s->checked = true;
		s->is_stream = st == 200;
	}
	if (!s->is_stream) {
		if (s->raw.len < 8192)
			pisb_buf_add(&s->raw, p, n);
		return true;
	}
	pisb_buf_add(&s->line, p, n);
	for (;;) {
		char *nl = memchr(s->line.s, '\n', s->line.len);
		size_t k;
		if (!nl)
			break;
		k = (size_t)(nl - s->line.s);
		event(s, s->line.s, k && s->line.s[k - 1] == '\r' ? k - 1 : k);
		memmove(s->line.s, nl + 1, s->line.len - k - 1);
		s->line.len -= k + 1;
		s->line.s[s->line.len] = '\0';
		if (s->done)
			return false; /* nothing after the terminal event matters */
	}
	return true;
}

/* ---- signals ---- */

static void on_sig(int sig) { got_sig = sig; }

struct sigsave {
	struct sigaction old[3];
	bool on;
};
static const int isigs[3] = { SIGINT, SIGTERM, SIGHUP };

static void sig_catch(struct sigsave *sv)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_sig;
	sigemptyset(&sa.sa_mask);
	got_sig = 0;
	for (int i = 0; i < 3; i++)
		sigaction(isigs[i], &sa, &sv->old[i]);
	sv->on = true;
}

static void sig_restore(struct sigsave *sv)
{
	if (!sv->on)
		return;
	for (int i = 0; i < 3; i++)
		sigaction(isigs[i], &sv->old[i], NULL);
	sv->on = false;
}

static void interrupt_cmd(struct os_conn *c, const char *id)
{
	struct pisb_http_resp r;
	struct pisb_err ig = PISB_ERR_INIT;
	_cleanup_buf_ struct pisb_buf path = PISB_BUF_INIT;

	pisb_buf_adds(&path, "/command?id=");
	pisb_http_escape(&path, id);
	pisb_http_resp_init(&r);
	os_execd(c, "DELETE", path.s, NULL, NULL, 0, 10000, &r, &ig);
	pisb_http_resp_release(&r);
}

/* ---- one command ---- */

static void json_env(struct pisb_jw *w, char *const *env, size_t nenv)
{
	pisb_jw_key(w, "envs");
	pisb_jw_obj(w);
	for (size_t i = 0; i < nenv; i++) {
		const char *eq = strchr(env[i], '=');
		_cleanup_free_ char *k = NULL;
		if (!eq || eq == env[i])
			continue;
		k = xstrndup(env[i], (size_t)(eq - env[i]));
		pisb_jw_kstr(w, k, eq + 1);
	}
	pisb_jw_obj_end(w);
}

/* POST /command and follow its stream.  id (80 bytes) gets the command
 * id.  Returns 0 with *code, or -1. */
static int command(struct os_conn *c, const char *cmdline, const char *cwd,
		   char *const *env, size_t nenv, bool background,
		   const struct os_run *o, int *code, char id[80], struct pisb_err *e)
{
	_cleanup_buf_ struct pisb_buf body = PISB_BUF_INIT;
	_cleanup_free_ char *url = xasprintf("%s/command", c->execd);
	struct curl_slist *hdrs = NULL;
	struct pisb_http_call call = { 0 };
	struct pisb_http_resp r;
	struct sse s;
	struct sigsave sv = { .on = false };
	struct pisb_jw w;
	CURLM *m = NULL;
	CURLcode rc = CURLE_OK;
	bool finished = false, interrupted = false;
	int64_t give_up = 0;
	int ret = -1;

	pisb_jw_init(&w, &body);
	pisb_jw_obj(&w);
	pisb_jw_kstr(&w, "command", cmdline);
	if (cwd)
		pisb_jw_kstr(&w, "cwd", cwd);
	pisb_jw_kbool(&w, "background", background);
	if (o->timeout_ms > 0)
		pisb_jw_kint(&w, "timeout", o->timeout_ms);
	json_env(&w, env, nenv);
	pisb_jw_obj_end(&w);

	for (struct curl_slist *x = c->ex_hdrs; x; x = x->next)
		hdrs = curl_slist_append(hdrs, x->data);
	hdrs = curl_slist_append(hdrs, "Content-Type: application/json");
	hdrs = curl_slist_append(hdrs, "Accept: text/event-stream");
	hdrs = curl_slist_append(hdrs, "Expect:");

	memset(&s, 0, sizeof(s));
	s.o = o;
	s.h = curl_easy_init();
	pisb_http_resp_init(&r);
	call.method = "POST";
	call.url = url;
	call.headers = hdrs;
	call.body = body.s;
	call.nbody = body.len;
	call.sink = sink;
	call.sink_arg = &s;
	/* no read timeout on a stream: a command may be quiet for hours */
	m = curl_multi_init();
	if (!s.h || !m) {
		pisb_err_set(e, PISB_EXIT_PISB, "curl init failed");
		goto out;
	}
	pisb_http_setup(s.h, &call, &r);
	curl_multi_add_handle(m, s.h);
	if (o->interruptible)
		sig_catch(&sv);
	for (;;) {
		int running = 0, q;
		CURLMsg *msg;

		curl_multi_perform(m, &running);
		while ((msg = curl_multi_info_read(m, &q)))
			if (msg->msg == CURLMSG_DONE) {
				rc = msg->data.result;
				finished = true;
			}
		if (finished || s.done)
			break;
		if ((got_sig || os_stop_sig) && !interrupted) {
			interrupted = true;
			if (!got_sig)
				got_sig = os_stop_sig;
			give_up = pisb_mono_ms() + 8000;
			if (s.id[0])
				interrupt_cmd(c, s.id);
			else
				break;
		}
		if (interrupted && pisb_mono_ms() > give_up)
			break;
		curl_multi_poll(m, NULL, 0, 200, NULL);
	}
	curl_multi_remove_handle(m, s.h);
	if (!finished)
		rc = s.done ? CURLE_OK : CURLE_ABORTED_BY_CALLBACK;
	{
		struct pisb_err te = PISB_ERR_INIT;
		int tr = pisb_http_done(s.h, rc == CURLE_WRITE_ERROR && s.done ? CURLE_OK : rc, &r,
					"the sandbox's execd", &te);
		snprintf(id, 80, "%s", s.id);
		if (interrupted) {
			*code = 128 + got_sig;
			ret = 0;
			goto out;
		}
		if (s.done) {
			*code = s.code;
			ret = 0;
			goto out;
		}
		if (r.status && r.status != 200) {
			struct pisb_http_resp er;
			pisb_http_resp_init(&er);
			er.status = r.status;
			pisb_buf_add(&er.body, s.raw.s ? s.raw.s : "", s.raw.len);
			os_fail(c, &er, "run the command", e);
			pisb_http_resp_release(&er);
			if (r.status == 400)
				e->code = PISB_EXIT_NOEXEC;
			goto out;
		}
		if (tr < 0 && !s.id[0]) {
			*e = te;
			goto out;
		}
		if (s.line.len)
			event(&s, s.line.s, s.line.len);
		if (s.done) {
			*code = s.code;
			ret = 0;
			goto out;
		}
		if (background && s.id[0]) {
			*code = 0;
			ret = 0;
			goto out;
		}
		{
			/* why: a sandbox removed or paused under the command
			 * (or a server going down) is worth saying */
			char st[32], ex[64];
			struct pisb_err ge = PISB_ERR_INIT;
			int g = c->sid ? os_get(c, st, ex, 5000, &ge) : -1;
			const char *why = g == 1 ? "; the sandbox no longer exists on the server (deleted or expired): the command is gone"
					: g < 0 ? "; the server cannot be asked either"
					: strcmp(st, "Running") ? "; the sandbox is no longer running" : "";
			pisb_err_set(e, PISB_EXIT_BACKEND,
				     "the command's stream ended without an exit status (%s): its exit status is unknown%s%s",
				     tr < 0 ? te.msg : "the connection to the sandbox was closed",
				     g == 1 ? "" : " and it may still be running", why);
		}
	}
out:
	sig_restore(&sv);
	if (m)
		curl_multi_cleanup(m);
	if (s.h)
		curl_easy_cleanup(s.h);
	curl_slist_free_all(hdrs);
	pisb_http_resp_release(&r);
	pisb_buf_release(&s.line);
	pisb_buf_release(&s.raw);
	/* s.write_failed: our stdout went away; the command ran even so, and
	 * its status is still the answer */
	return ret;
}

int os_run_cmd(struct os_conn *c, const char *cmdline, const char *cwd,
	       char *const *env, size_t nenv, const struct os_run *o,
	       int *code, struct pisb_err *e)
{
	char id[80];
	return command(c, cmdline, cwd, env, nenv, false, o, code, id, e);
}

/* ---- exec verbs ---- */

static char *command_line(const struct pisb_exec_req *r)
{
	struct pisb_buf b = PISB_BUF_INIT;

	pisb_buf_adds(&b, "exec ");
	if (r->sh) {
		pisb_buf_adds(&b, "/bin/sh -lc ");
		os_sq(&b, r->sh);
	} else {
		for (size_t i = 0; i < r->argc; i++) {
			if (i)
				pisb_buf_addc(&b, ' ');
			os_sq(&b, r->argv[i]);
		}
	}
	return pisb_buf_detach(&b);
}

/* execd has no stdin for commands (execd-api.yaml: RunCommandRequest
 * has none; background ones get /dev/null): never drop what the caller
 * pipes in.  Refused when fd 0 is a file with bytes left or a pipe or
 * socket holding data (looked at for up to 50 ms, so `echo x | pisb exec`
 * is caught); a tty, /dev/null, a closed fd or a pipe at its end are
 * fine, as is a pipe that stays quiet (it is never read). */
static int check_stdin(const char *name, struct pisb_err *e)
{
	struct stat sb;
	bool data = false;

	if (fstat(0, &sb) < 0)
		return 0;
	if (S_ISREG(sb.st_mode)) {
		off_t at = lseek(0, 0, SEEK_CUR);
		data = sb.st_size > (at < 0 ? 0 : at);
	} else if (S_ISFIFO(sb.st_mode) || S_ISSOCK(sb.st_mode)) {
		struct pollfd p = { 0, POLLIN, 0 };
		int n = 0;

		if (poll(&p, 1, 50) > 0 && (p.revents & POLLIN) && ioctl(0, FIONREAD, &n) == 0)
			data = n > 0;
	}
	if (!data)
		return 0;
	return pisb_err_set(e, PISB_EXIT_USAGE,
			    "stdin has data, but a command in opensandbox sandbox '%s' cannot read it (execd takes no stdin): "
			    "write it into the sandbox first ('pisb write %s /tmp/in < FILE', then --sh 'CMD < /tmp/in'), "
			    "or run with stdin from /dev/null",
			    name, name);
}

static int check_env(const struct pisb_exec_req *r, struct pisb_err *e)
{
	for (size_t i = 0; i < r->nenv; i++)
		if (!strchr(r->env[i], '=') || r->env[i][0] == '=')
			return pisb_err_set(e, PISB_EXIT_USAGE, "--env '%s': expected K=V", r->env[i]);
	if (!r->sh && !r->argc)
		return pisb_err_set(e, PISB_EXIT_USAGE, "exec: no command");
	return check_stdin(r->name, e);
}

int pisb_os_exec_attached(struct pisb_sandbox *sb, const struct pisb_exec_req *r,
			  int *code, struct pisb_err *e)
{
	struct os_inst t;
	struct os_run o = { .out_fd = 1, .err_fd = 2, .interruptible = true };
	_cleanup_free_ char *cmd = NULL, *cwd = NULL;
	char id[80];
	int ret;

	*code = 0;
	if (check_env(r, e) < 0)
		return -1;
	if (os_inst_of(sb, &t, e) < 0)
		return -1;
	if (os_inst_ready(&t, e) < 0) {
		os_inst_release(&t);
		return -1;
	}
	cmd = command_line(r);
	cwd = os_path(&t, r->cwd);
	ret = command(&t.c, cmd, cwd, r->env, r->nenv, false, &o, code, id, e);
	if (ret < 0)
		pisb_err_prefix(e, "exec in sandbox '%s'", r->name);
	os_inst_release(&t);
	return ret;
}

/* ---- handles ---- */

static bool handle_ok(const char *h)
{
	size_t n = strlen(h);

	if (n == 0 || n > 64)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char)h[i]) && h[i] != '-' && h[i] != '_')
			return false;
	return true;
}

static int cursor_load(int idir, const char *h, long long *cur)
{
	_cleanup_buf_ struct pisb_buf b = PISB_BUF_INIT;
	_cleanup_free_ char *p = xasprintf("exec/%s", h);

	*cur = 0;
	if (pisb_read_file_at(idir, p, &b, 64) < 0)
		return -1;
	*cur = b.s ? atoll(b.s) : 0;
	return 0;
}

static int cursor_save(int idir, const char *h, long long cur, struct pisb_err *e)
{
	_cleanup_free_ char *p = xasprintf("exec/%s", h);
	char num[32];

	snprintf(num, sizeof(num), "%lld", cur);
	if (pisb_mkdirs_at(idir, "exec", 0700, e) < 0)
		return -1;
	return pisb_atomic_write(idir, p, num, strlen(num), 0600, e);
}

/* Exit status of a finished background command (status JSON). */
static int status_code(struct pisb_json *j, bool *known)
{
	long long v;
	_cleanup_free_ char *err = pisb_json_str(j, pisb_json_get(j, 0, "error"));

	*known = false;
	if (pisb_json_int(j, pisb_json_get(j, 0, "exit_code"), &v) < 0)
		return 0;
	*known = true;
	if (v >= 0)
		return v <= 255 ? (int)v : 255;
	if (err && strstr(err, "terminated"))
		return 128 + SIGTERM;
	if (err && strstr(err, "interrupt"))
		return 128 + SIGINT;
	if (err && strstr(err, "hangup"))
		return 128 + SIGHUP;
	return 128 + SIGKILL;
}

static void nap(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

/* Wait up to timeout_ms, then return new output and the status. */
static int collect(struct os_inst *t, const char *h, int timeout_ms, struct pisb_jw *w,
		   int *code, bool *running, struct pisb_err *e)
{
	int64_t deadline = pisb_mono_ms() + (timeout_ms > 0 ? timeout_ms : 0);
	_cleanup_free_ char *spath = xasprintf("/command/status/%s", h);
	struct pisb_http_resp r;
	long long cur = 0;
	bool done = false, known = false, lost = false, truncated = false;
	size_t n = 0;
	int ec = 0, ret = -1;

	pisb_http_resp_init(&r);
	cursor_load(t->idir, h, &cur);
	for (;;) {
		struct pisb_json j;
		if (os_execd(&t->c, "GET", spath, NULL, NULL, 0, 30000, &r, e) < 0)
			goto out;
		if (r.status == 404) {
			lost = true;
			break;
		}
		if (r.status != 200) {
			os_fail(&t->c, &r, "command status", e);
			e->code = PISB_EXIT_BACKEND;
			goto out;
		}
		if (pisb_json_parse(&j, r.body.s, r.body.len, e) < 0)
			goto out;
		{
			bool b = true;
			pisb_json_bool(&j, pisb_json_get(&j, 0, "running"), &b);
			done = !b;
			if (done)
				ec = status_code(&j, &known);
		}
		pisb_json_release(&j);
		if (done || pisb_mono_ms() >= deadline)
			break;
		{
			int64_t left = deadline - pisb_mono_ms();
			nap(left < 100 ? (int)left : 100);
		}
	}
	if (!lost) {
		_cleanup_buf_ struct pisb_buf p = PISB_BUF_INIT;
		pisb_buf_addf(&p, "/command/%s/logs?cursor=%lld", h, cur);
		if (os_execd(&t->c, "GET", p.s, NULL, NULL, 0, 60000, &r, e) < 0)
			goto out;
		if (r.status != 200) {
			os_fail(&t->c, &r, "command output", e);
			e->code = PISB_EXIT_BACKEND;
			goto out;
		}
		n = r.body.len;
		if (n > OS_CAP) {
			n = OS_CAP;
			truncated = true;
		}
		/* never split a UTF-8 sequence while more follows */
		if ((truncated || !done) && n > 0) {
			size_t k = n, back = 0;
			while (k > 0 && back < 4 && ((unsigned char)r.body.s[k - 1] & 0xc0) == 0x80) {
				k--;
				back++;
			}
			if (k > 0 && ((unsigned char)r.body.s[k - 1] & 0xc0) == 0xc0) {
				unsigned char lead = (unsigned char)r.body.s[k - 1];
				size_t need = lead >= 0xf0 ? 4 : lead >= 0xe0 ? 3 : 2;
				if (back + 1 < need)
					n = k - 1;
			}
		}
		if (n && cursor_save(t->idir, h, cur + (long long)n, e) < 0)
			goto out;
	}
	pisb_jw_obj(w);
	pisb_jw_kstr(w, "pid", h);
	pisb_jw_kbool(w, "running", !done && !lost);
	pisb_jw_key(w, "output");
	pisb_jw_strn(w, r.body.s ? r.body.s : "", n);
	pisb_jw_key(w, "exitCode");
	if (done && known)
		pisb_jw_int(w, ec);
	else
		pisb_jw_null(w);
	pisb_jw_kbool(w, "truncated", truncated);
	pisb_jw_obj_end(w);
	*running = !done && !lost;
	*code = done && known ? ec : 0;
	if (lost || (done && !known)) {
		*code = PISB_EXIT_BACKEND;
		pisb_err_set(e, PISB_EXIT_BACKEND,
			     lost ? "sandbox '%s' no longer knows command '%s' (the sandbox was restarted or replaced): its exit status is unknown"
				  : "sandbox '%s': command '%s' ended without an exit status: it is unknown",
			     t->name, h);
	}
	ret = 0;
out:
	pisb_http_resp_release(&r);
	return ret;
}

int pisb_os_exec_handle(struct pisb_sandbox *sb, const struct pisb_exec_req *r,
			struct pisb_jw *w, int *code, bool *running,
			struct pisb_err *e)
{
	struct os_inst t;
	struct os_run o = { .out_fd = -1, .err_fd = -1 };
	_cleanup_free_ char *cmd = NULL, *cwd = NULL;
	char id[80];
	int c2 = 0, ret = -1;

	*code = 0;
	*running = false;
	if (check_env(r, e) < 0)
		return -1;
	if (os_inst_of(sb, &t, e) < 0)
		return -1;
	if (os_inst_ready(&t, e) < 0)
		goto out;
	cmd = command_line(r);
	cwd = os_path(&t, r->cwd);
	if (command(&t.c, cmd, cwd, r->env, r->nenv, true, &o, &c2, id, e) < 0) {
		pisb_err_prefix(e, "exec in sandbox '%s'", r->name);
		goto out;
	}
	if (!id[0] || !handle_ok(id)) {
		pisb_err_set(e, PISB_EXIT_BACKEND, "exec in sandbox '%s': execd gave no command id", r->name);
		goto out;
	}
	if (cursor_save(t.idir, id, 0, e) < 0)
		goto out;
	ret = collect(&t, id, r->timeout_ms, w, code, running, e);
out:
	os_inst_release(&t);
	return ret;
}

static int open_handle(struct pisb_sandbox *sb, const char *handle, struct os_inst *t,
		       struct pisb_err *e)
{
	const char *name = sb->name;
	_cleanup_free_ char *p = NULL;

	if (!handle_ok(handle))
		return pisb_err_set(e, PISB_EXIT_USAGE, "invalid handle '%s'", handle);
	if (os_inst_of(sb, t, e) < 0)
		return -1;
	p = xasprintf("exec/%s", handle);
	if (faccessat(t->idir, p, F_OK, 0) < 0) {
		os_inst_release(t);
		return pisb_err_set(e, PISB_EXIT_NOTFOUND, "no handle '%s' in sandbox '%s'", handle, name);
	}
	if (os_inst_ready(t, e) < 0) {
		os_inst_release(t);
		return -1;
	}
	return 0;
}

int pisb_os_exec_status(struct pisb_sandbox *sb, const char *handle, int timeout_ms,
			struct pisb_jw *w, int *code, bool *running, struct pisb_err *e)
{
	struct os_inst t;
	int ret;

	*code = 0;
	*running = false;
	if (open_handle(sb, handle, &t, e) < 0)
		return -1;
	ret = collect(&t, handle, timeout_ms, w, code, running, e);
	os_inst_release(&t);
	return ret;
}

int pisb_os_exec_kill(struct pisb_sandbox *sb, const char *handle, struct pisb_jw *w,
		      int *code, struct pisb_err *e)
{
	struct os_inst t;
	bool running;
	int ret;

	*code = 0;
	if (open_handle(sb, handle, &t, e) < 0)
		return -1;
	/* execd: SIGTERM to the group, SIGKILL after 3 s; answers when done
	 * (a finished command gives 500: nothing to do) */
	interrupt_cmd(&t.c, handle);
	ret = collect(&t, handle, 5000, w, code, &running, e);
	os_inst_release(&t);
	return ret;
}
