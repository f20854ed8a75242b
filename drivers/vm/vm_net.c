/* vm_net.c - a vm sandbox's services and previews: the host-side relay
 * (vm_net.h).
 *
 * One process per running VM, a child of its supervisor (vm.c), that
 *  - supervises the sandbox's services with the local driver's code
 *    (services.h: state, restart policy, readiness, logs, sticky ports,
 *    previews, the same JSON), through operations of its own: a service's
 *    process is a host-side child running `/bin/sh -lc COMMAND` in the
 *    guest through the agent (vm_run, on a service port of its own), its
 *    exit the command's, a signal to it forwarded; a check or a preview
 *    connection is a stream on the agent's net port (vm_mux.h), which the
 *    agent connects to 127.0.0.1:PORT in the guest,
 *  - answers requests on control.sock (pisb_control_call: ping, svc.*,
 *    as the local driver's controller does; svc.boot and svc.halt from
 *    vm.c start the services after the hooks and stop them before the
 *    guest powers off),
 *  - with network.allowedHosts, holds the services' egress proxy (the
 *    local driver's, proxy.h) from its start, so that setup reaches it
 *    too: each stream the guest opens (a connection to the agent's
 *    127.0.0.1:3128, the guest's HTTP(S)_PROXY) becomes one end of a
 *    socketpair whose other end the proxy takes as a client, exactly as
 *    the local controller takes one accepted in the sandbox's namespace;
 *    the allowlist is checked here, never in the guest.
 * Why here and not in the guest agent: the agent is libc-only and the
 * guest's (hostile: it would report whatever it liked), so supervision
 * there would be a second copy of services.c in a second dialect, its
 * state and logs behind the guest's word.  Host-side, services.c runs
 * unchanged beside the previews it already served, the logs and sticky
 * ports land in the instance dir as on local, and the guest only runs
 * commands and answers streams, as it does for exec and previews.
 * Everything the guest writes is hostile: vm_mux.c bounds the net port
 * (PISB_MUX_MAX_PEER_STREAMS guest-opened streams at once, and what the
 * guest opens reaches the proxy and nothing else: another port, or any
 * open without allowedHosts, is refused);
 * on a service's port the guest says only its output and its exit
 * (vm_run bounds them), which the supervision takes as the local driver
 * takes a process's.  The guest names no host address, path or command.
 * The relay ends when QEMU closes the net port.
 */
#include "vm_internal.h"
#include "vm_net.h"
#include "vm_mux.h"
#include "vm_proto.h"
#include "config.h"
#include "driver.h"
#include "err.h"
#include "exec.h"
#include "instance.h"
#include "json.h"
#include "lock.h"
#include "proc.h"
#include "proxy.h"
#include "services.h"
#include "state.h"
#include "util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#define NET_MAX_CLIENTS 8
#define NET_REQ_MAX 65536
#define NET_MAX_PROBES 64
#define NET_LOG_MAX (1024 * 1024)   /* net.log, then net.log.1 */
#define NET_EGRESS_LINES 20
/* a service's pid in the guest, by its runner's host pid (op_inner_pid) */
#define SVC_PID_FILE "svc-%d.gpid"  /* egress lines a second in net.log; the rest counted */

_Static_assert(PISB_VM_EGRESS_PORT == PISB_PROXY_PORT, "the guest's proxy port is the local sandbox's");
#define NET_POLL_MAX (1 + 1 + NET_MAX_CLIENTS + PISB_SVC_MAX_FDS + PISB_MUX_MAX_STREAMS + 1)

struct client {
	int fd;
	struct pisb_buf in;
};

/* a health check's connection: the supervision's end of a socketpair
 * whose other end is a stream; state 0 once the guest connected,
 * EINPROGRESS, or ECONNREFUSED */
struct probe {
	int fd, mux_fd;
	dev_t dev;
	ino_t ino;
	int state;
};

struct net {
	int idir;
	const char *name;
	const struct pisb_config *cfg;
	int log;
	int ctl;                    /* control.sock */
	int sigr, sigw;             /* SIGCHLD, SIGTERM */
	struct client cl[NET_MAX_CLIENTS];
	struct probe pr[NET_MAX_PROBES];
	struct pisb_services *svc;
	struct pisb_mux mux;
	uint64_t said_dropped, said_resets, said_refused, said_quiet;
	int64_t said_at;
	long long log_size;
	int64_t egress_sec;         /* the second egress lines are counted in */
	int egress_lines;
	uint64_t egress_quiet;      /* egress lines not written (over the rate) */
};

static void logf_(struct net *n, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void logf_(struct net *n, const char *fmt, ...)
{
	char line[1024];
	va_list ap;
	int k;

	if (n->log < 0)
		return;
	va_start(ap, fmt);
	k = vsnprintf(line, sizeof(line) - 1, fmt, ap);
	va_end(ap);
	if (k < 0)
		return;
	if ((size_t)k > sizeof(line) - 2)
		k = (int)sizeof(line) - 2;
	line[k++] = '\n';
	/* bounded: what the guest makes us say goes on at most
	 * 2 * NET_LOG_MAX bytes (net.log and net.log.1) */
	if (n->log_size + k > NET_LOG_MAX && n->log_size > 0) {
		int fd;
		renameat(n->idir, "net.log", n->idir, "net.log.1");
		fd = openat(n->idir, "net.log", O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
		if (fd >= 0) {
			dup3(fd, n->log, O_CLOEXEC);
			dup2(fd, 2);   /* pisb_svc_log's */
			close(fd);
		}
		n->log_size = 0;
	}
	if (pisb_write_all(n->log, line, (size_t)k) == (ssize_t)k)
		n->log_size += k;
}

/* the proxy's "egress: ..." lines, NET_EGRESS_LINES a second at most */
static void egress_log(void *arg, const char *line)
{
	struct net *n = arg;
	int64_t sec = pisb_mono_ms() / 1000;

	if (sec != n->egress_sec) {
		n->egress_sec = sec;
		n->egress_lines = 0;
	}
	if (n->egress_lines++ >= NET_EGRESS_LINES) {
		n->egress_quiet++;
		return;
	}
	logf_(n, "%s", line);
}

/* ---- the supervision's operations (services.h's pisb_svc_ops) ---- */

/* A service: a host-side child, in a session of its own, that runs the
 * command through the agent on a service port (vm_run), its output on
 * out_fd, and exits with the command's status; a TERM to its process
 * group is forwarded to the command's, a KILL ends the child, whose
 * hang-up makes the agent kill the command's process group. */
static pid_t op_spawn(void *ctx, const char *command, char *const *extra, size_t nextra,
		      const char *cwd0, int out_fd, int *exec_err, struct pisb_err *e)
{
	struct net *n = ctx;
	_cleanup_strv_ struct pisb_strv env = PISB_STRV_INIT, argv = PISB_STRV_INIT;
	_cleanup_free_ char *cwd = NULL;
	struct pisb_exec_req r;
	pid_t pid;

	*exec_err = 0;
	memset(&r, 0, sizeof(r));
	r.sh = command;
	r.env = (char **)extra;
	r.nenv = nextra;
	r.cwd = cwd0;
	vm_build(n->cfg, &r, &env, &argv, &cwd);
	pid = fork();
	if (pid < 0)
		return pisb_err_sys(e, PISB_EXIT_PISB, "fork");
	if (pid == 0) {
		struct pisb_err ce = PISB_ERR_INIT;
		struct vm_run run;
		int code = 255;
		sigset_t none;
		char pid_file[32];

		snprintf(pid_file, sizeof(pid_file), SVC_PID_FILE, (int)getpid());

		setsid();
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		signal(SIGTERM, SIG_DFL);
		signal(SIGCHLD, SIG_DFL);
		/* only the instance dir (3) and the output (4) */
		int o = fcntl(out_fd, F_DUPFD_CLOEXEC, 10);
		if (o < 0 || (n->idir != 3 && dup3(n->idir, 3, O_CLOEXEC) < 0) || dup3(o, 4, O_CLOEXEC) < 0)
			_exit(255);
		pisb_close_from(5, -1);
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		memset(&run, 0, sizeof(run));
		run.argv = argv.v;
		run.env = env.v;
		run.cwd = cwd;
		run.in_fd = -1;
		run.out_fd = 4;
		run.err_fd = 4;
		run.forward = true;
		run.service = true;
		run.pid_file = pid_file;
		if (vm_run(3, &run, &code, &ce) < 0) {
			dprintf(4, "pisb: %s\n", ce.msg);
			_exit(ce.code == PISB_EXIT_BUSY ? 126 : 255);
		}
		_exit(code & 0xff);
	}
	return pid;
}

static void probe_gc(struct net *n)
{
	for (size_t i = 0; i < NET_MAX_PROBES; i++) {
		struct probe *p = &n->pr[i];
		struct stat sb;
		if (p->fd >= 0 && (fstat(p->fd, &sb) < 0 || sb.st_dev != p->dev || sb.st_ino != p->ino))
			p->fd = -1;
	}
}

/* A check's connection: a socketpair, its other end a stream to the
 * guest's 127.0.0.1:port; connected when the guest says so (opened). */
static int op_connect(void *ctx, int family, int port, bool *pending, int *family_out,
		      struct pisb_err *e)
{
	struct net *n = ctx;
	struct probe *slot = NULL;
	struct stat sb;
	int sp[2];

	(void)family;
	probe_gc(n);
	for (size_t i = 0; i < NET_MAX_PROBES && !slot; i++)
		if (n->pr[i].fd < 0)
			slot = &n->pr[i];
	if (!slot || pisb_mux_full(&n->mux))
		return pisb_err_set(e, PISB_EXIT_BUSY, "too many connections into the VM at once");
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sp) < 0)
		return pisb_err_sys(e, PISB_EXIT_PISB, "socketpair");
	if (!pisb_mux_open(&n->mux, sp[1], (unsigned)port, NULL, 0)) {
		close(sp[0]);
		close(sp[1]);
		return pisb_err_set(e, PISB_EXIT_BUSY, "too many connections into the VM at once");
	}
	/* a stream's fd number, reused: the older record is stale */
	for (size_t i = 0; i < NET_MAX_PROBES; i++)
		if (n->pr[i].mux_fd == sp[1])
			n->pr[i].mux_fd = -1;
	fstat(sp[0], &sb);
	*slot = (struct probe){ sp[0], sp[1], sb.st_dev, sb.st_ino, EINPROGRESS };
	*pending = true;
	if (family_out)
		*family_out = AF_INET;
	return sp[0];
}

static struct probe *probe_of(struct net *n, int fd, bool mux_side)
{
	if (fd < 0)
		return NULL;
	for (size_t i = 0; i < NET_MAX_PROBES; i++)
		if ((mux_side ? n->pr[i].mux_fd : n->pr[i].fd) == fd && n->pr[i].fd >= 0)
			return &n->pr[i];
	return NULL;
}

static int op_connect_done(void *ctx, int fd)
{
	struct probe *p = probe_of(ctx, fd, false);

	return p ? p->state : ECONNRESET;
}

/* A preview's client: straight onto a stream (no hop through a pair). */
static int op_stream(void *ctx, int fd, int port, const char *head, size_t hlen)
{
	struct net *n = ctx;

	return pisb_mux_open(&n->mux, fd, (unsigned)port, head, hlen) ? 0 : -1;
}

/* A service's pid in the guest, as its runner (host pid PID) wrote it
 * from the agent's STARTED frame; 0 (null) until then */
static long op_inner_pid(void *ctx, pid_t pid)
{
	struct net *n = ctx;
	char f[32], b[16] = "";
	long long v = 0;
	int fd, k;

	snprintf(f, sizeof(f), SVC_PID_FILE, (int)pid);
	fd = openat(n->idir, f, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return 0;
	k = (int)read(fd, b, sizeof(b) - 1);
	close(fd);
	if (k <= 0)
		return 0;
	b[k] = '\0';
	b[strcspn(b, "\n")] = '\0';
	return pisb_parse_ll(b, 1, 1 << 22, &v) == 0 ? (long)v : 0;
}

/* The runners' pid files: gone with the runner, and all of them at the
 * relay's start (a relay killed left them) */
static void pid_file_drop(int idir, pid_t pid)
{
	char f[32];

	snprintf(f, sizeof(f), SVC_PID_FILE, (int)pid);
	unlinkat(idir, f, 0);
}

static void pid_files_clear(int idir)
{
	int fd = openat(idir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = fd < 0 ? NULL : fdopendir(fd);
	struct dirent *de;

	if (!d) {
		if (fd >= 0)
			close(fd);
		return;
	}
	while ((de = readdir(d)))
		if (!strncmp(de->d_name, "svc-", 4) && pisb_str_ends(de->d_name, ".gpid"))
			unlinkat(idir, de->d_name, 0);
	closedir(d);
}

/* The guest's ports are its own: the supervision's choice stands, and a
 * clash shows as the service's failure, as anything else it does. */
static int op_port_free(void *ctx, int port, struct pisb_err *e)
{
	(void)ctx;
	(void)port;
	(void)e;
	return 1;
}

static const struct pisb_svc_ops vm_svc_ops = {
	.spawn = op_spawn,
	.connect = op_connect,
	.connect_done = op_connect_done,
	.connect_events = POLLIN,
	.stream = op_stream,
	.port_free = op_port_free,
	.inner_pid = op_inner_pid,
};

/* ---- status.json ---- */

/* The services and previews on the record (before a reply says so). */
static void publish(void *arg)
{
	struct net *n = arg;
	struct pisb_runtime rt;
	struct pisb_err e = PISB_ERR_INIT;

	if (pisb_runtime_load(n->idir, &rt, &e) < 0) {
		logf_(n, "status.json: %s", e.msg);
		return;
	}
	free(rt.services_json);
	free(rt.previews_json);
	rt.services_json = pisb_services_status_json(n->svc);
	rt.previews_json = pisb_services_previews_json(n->svc);
	if (pisb_runtime_save_volatile(n->idir, &rt, &e) < 0)
		logf_(n, "status.json: %s", e.msg);
	pisb_runtime_release(&rt);
}

/* ---- control.sock ---- */

static void reply_error(int fd, int code, const char *msg)
{
	struct pisb_buf b = PISB_BUF_INIT;
	struct pisb_jw w;

	pisb_jw_init(&w, &b);
	pisb_jw_obj(&w);
	pisb_jw_kbool(&w, "ok", false);
	pisb_jw_kint(&w, "code", code);
	pisb_jw_kstr(&w, "error", msg);
	pisb_jw_obj_end(&w);
	pisb_buf_addc(&b, '\n');
	pisb_write_all(fd, b.s, b.len);
	pisb_buf_release(&b);
}

static void request(struct net *n, struct client *c)
{
	struct pisb_err e = PISB_ERR_INIT;
	struct pisb_json j;
	_cleanup_free_ char *op = NULL;
	size_t len = strcspn(c->in.s, "\n");

	if (pisb_json_parse(&j, c->in.s, len, &e) < 0) {
		reply_error(c->fd, PISB_EXIT_USAGE, e.msg);
		return;
	}
	op = pisb_json_str(&j, pisb_json_get(&j, 0, "op"));
	if (op && !strcmp(op, "ping")) {
		pisb_write_all(c->fd, "{\"ok\":true}\n", 12);
	} else if (op && !strcmp(op, "svc.boot")) {
		/* vm.c, after the setup or resume hooks */
		logf_(n, "services: starting");
		pisb_services_begin(n->svc, c->fd);
	} else if (op && !strcmp(op, "svc.halt")) {
		/* vm.c, before the guest powers off */
		pisb_services_stop_all(n->svc);
		publish(n);
		pisb_write_all(c->fd, "{\"ok\":true}\n", 12);
	} else if (op && !strncmp(op, "svc.", 4)) {
		pisb_services_request(n->svc, op, &j, c->fd);
	} else {
		char msg[160];
		snprintf(msg, sizeof(msg), "unknown op '%.80s'", op ? op : "");
		reply_error(c->fd, PISB_EXIT_USAGE, msg);
	}
	pisb_json_release(&j);
}

static void client_close(struct client *c)
{
	close(c->fd);
	c->fd = -1;
	pisb_buf_release(&c->in);
}

static void client_read(struct net *n, struct client *c)
{
	ssize_t r;

	pisb_buf_grow(&c->in, 4096);
	r = read(c->fd, c->in.s + c->in.len, c->in.cap - c->in.len - 1);
	if (r < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (r <= 0) {
		client_close(c);
		return;
	}
	c->in.len += (size_t)r;
	c->in.s[c->in.len] = '\0';
	if (memchr(c->in.s, '\n', c->in.len)) {
		request(n, c);
		client_close(c);
	} else if (c->in.len > NET_REQ_MAX) {
		reply_error(c->fd, PISB_EXIT_USAGE, "request too long");
		client_close(c);
	}
}

static void accept_client(struct net *n)
{
	int fd = accept4(n->ctl, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

	if (fd < 0)
		return;
	for (size_t i = 0; i < NET_MAX_CLIENTS; i++)
		if (n->cl[i].fd < 0) {
			n->cl[i].fd = fd;
			return;
		}
	close(fd);
}

/* ---- streams ---- */

/* the guest refused a stream before any answer: nothing listens there */
static void refused(void *arg, struct pisb_mux_stream *s, int why)
{
	struct net *n = arg;
	struct probe *p = probe_of(n, s->fd, true);
	char body[256], msg[512];
	int k;

	if (p) {
		/* a check's: its end reads EOF, and the state says why */
		p->state = ECONNREFUSED;
		return;
	}
	if (why != PISB_MUX_RST_REFUSED)
		return;
	snprintf(body, sizeof(body), "pisb: nothing accepts connections on that port in sandbox '%s' "
		 "(see 'pisb inspect %s')\n", n->name, n->name);
	k = snprintf(msg, sizeof(msg), "HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/plain; charset=utf-8\r\n"
		     "Connection: close\r\nContent-Length: %zu\r\n\r\n%s", strlen(body), body);
	if (k > 0)
		(void)!send(s->fd, msg, (size_t)k, MSG_NOSIGNAL | MSG_DONTWAIT);
}

/* the guest connected a stream: a check's connect is done */
static void opened(void *arg, struct pisb_mux_stream *s)
{
	struct probe *p = probe_of(arg, s->fd, true);

	if (p && p->state == EINPROGRESS)
		p->state = 0;
}

/* A stream the guest opened (vm_mux.h): to the proxy's port, with
 * network.allowedHosts, a socketpair whose other end the services' proxy
 * takes as a client; anything else is refused (-1). */
static int egress_accept(void *arg, unsigned port)
{
	struct net *n = arg;
	struct pisb_proxy *p = pisb_services_proxy(n->svc);
	int sv[2];

	if (!p || port != PISB_PROXY_PORT)
		return -1;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) < 0)
		return -1;
	pisb_proxy_set_log(p, egress_log, n);
	pisb_proxy_take(p, sv[1]);
	return sv[0];
}

/* What the guest sent that the mux dropped, said at most every 5 s. */
static void say_drops(struct net *n)
{
	int64_t now = pisb_mono_ms();

	if ((n->mux.dropped == n->said_dropped && n->mux.resets == n->said_resets &&
	     n->mux.refused_opens == n->said_refused && n->egress_quiet == n->said_quiet) ||
	    now - n->said_at < 5000)
		return;
	logf_(n, "net: dropped from the guest: %llu bytes of noise and frames for streams it was not given, "
	      "%llu streams reset for breaking the window, %llu streams it opened refused (not the proxy's "
	      "port, no network.allowedHosts, or more than %d at once); %llu egress lines not logged",
	      (unsigned long long)n->mux.dropped, (unsigned long long)n->mux.resets,
	      (unsigned long long)n->mux.refused_opens, PISB_MUX_MAX_PEER_STREAMS,
	      (unsigned long long)n->egress_quiet);
	n->said_dropped = n->mux.dropped;
	n->said_resets = n->mux.resets;
	n->said_refused = n->mux.refused_opens;
	n->said_quiet = n->egress_quiet;
	n->said_at = now;
}

/* ---- the process ---- */

static int sig_w = -1;

static void on_signal(int sig)
{
	unsigned char c = (unsigned char)sig;
	int saved = errno;

	if (write(sig_w, &c, 1) < 0) {
	}
	errno = saved;
}

/* SIGCHLD: the services' processes that ended; SIGTERM: stop them, end. */
static bool signals(struct net *n)
{
	unsigned char c;
	bool term = false;
	int status;
	pid_t w;

	while (read(n->sigr, &c, 1) == 1)
		term |= c == SIGTERM;
	while ((w = waitpid(-1, &status, WNOHANG)) > 0) {
		pid_file_drop(n->idir, w);
		pisb_services_reaped(n->svc, w, status);
	}
	return term;
}

static int net_loop(struct net *n)
{
	static struct pollfd p[NET_POLL_MAX];

	for (;;) {
		int k = 0, tmo = 1000, ctl_at, sig_at, cl_at, svc_at, mux_at, r;

		ctl_at = k;
		p[k++] = (struct pollfd){ n->ctl, POLLIN, 0 };
		sig_at = k;
		p[k++] = (struct pollfd){ n->sigr, POLLIN, 0 };
		cl_at = k;
		for (size_t i = 0; i < NET_MAX_CLIENTS; i++)
			p[k++] = (struct pollfd){ n->cl[i].fd, POLLIN, 0 };
		svc_at = k;
		k += pisb_services_pollfds(n->svc, p + k, PISB_SVC_MAX_FDS, &tmo);
		mux_at = k;
		k += pisb_mux_pollfds(&n->mux, p + k, NET_POLL_MAX - k);
		r = poll(p, (nfds_t)k, tmo);
		if (r < 0 && errno != EINTR)
			return -1;
		if (r > 0 && pisb_mux_poll(&n->mux, p + mux_at, k - mux_at) < 0) {
			logf_(n, "net: the VM closed the net port: the relay ends");
			pisb_services_stop_all(n->svc);
			return 0;
		}
		if (r > 0 && (p[sig_at].revents & POLLIN) && signals(n)) {
			logf_(n, "net: stopping (TERM)");
			pisb_services_stop_all(n->svc);
			return 0;
		}
		/* the timers run even when nothing came */
		pisb_services_poll(n->svc, p + svc_at, r > 0 ? (size_t)(mux_at - svc_at) : 0);
		if (pisb_services_changed(n->svc))
			publish(n);
		if (r > 0) {
			for (size_t i = 0; i < NET_MAX_CLIENTS; i++)
				if (n->cl[i].fd >= 0 && p[cl_at + (int)i].revents)
					client_read(n, &n->cl[i]);
			if (p[ctl_at].revents & POLLIN)
				accept_client(n);
		}
		say_drops(n);
	}
}

/* The child: its own fds only (idir, the log, the ready pipe). */
static void __attribute__((noreturn)) net_main(int idir, const char *name, const struct pisb_config *cfg,
					       int ready, bool boot)
{
	static struct net n;
	int port = -1, lock, sp[2];
	struct pisb_err e = PISB_ERR_INIT;
	struct sigaction sa;
	struct stat st;

	signal(SIGPIPE, SIG_IGN);
	memset(&n, 0, sizeof(n));
	n.idir = idir;
	n.name = name;
	n.cfg = cfg;
	n.log = openat(idir, "net.log", O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (n.log >= 0 && fstat(n.log, &st) == 0)
		n.log_size = st.st_size;
	/* the supervision's own lines (pisb_svc_log) go to fd 2: net.log */
	if (n.log >= 0)
		dup2(n.log, 2);
	for (size_t i = 0; i < NET_MAX_CLIENTS; i++)
		n.cl[i].fd = -1;
	for (size_t i = 0; i < NET_MAX_PROBES; i++)
		n.pr[i].fd = n.pr[i].mux_fd = -1;
	if (pipe2(sp, O_CLOEXEC | O_NONBLOCK) < 0)
		_exit(1);
	n.sigr = sp[0];
	n.sigw = sig_w = sp[1];
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sa.sa_flags = SA_RESTART;
	sigaction(SIGCHLD, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	/* the net port is ours alone while the VM runs */
	{
		char lk[32];
		snprintf(lk, sizeof(lk), "agent%d.lock", PISB_VM_NET_PORT);
		lock = pisb_lock_acquire(idir, lk, true, 5000, "the VM's net port", &e);
	}
	for (int tries = 0; lock >= 0 && port < 0 && tries < 50; tries++) {
		port = vm_agent_connect(idir, PISB_VM_NET_PORT);
		if (port < 0)
			pisb_sleep_ms(100);
	}
	if (lock < 0 || port < 0 || (n.ctl = pisb_control_listen(idir, 16)) < 0) {
		logf_(&n, "net: cannot start: %s", lock < 0 ? e.msg : strerror(errno));
		_exit(1);
	}
	pisb_mux_init(&n.mux, port, true);
	n.mux.refused = refused;
	n.mux.opened = opened;
	n.mux.accept = egress_accept;
	n.mux.arg = &n;
	pisb_mux_hello(&n.mux);
	pid_files_clear(idir);
	n.svc = pisb_services_new_ops(NULL, idir, name, cfg, &vm_svc_ops, &n);
	pisb_services_on_change(n.svc, publish, &n);
	/* the egress proxy from now on: setup and the hooks reach it too */
	pisb_services_start_proxy(n.svc);
	if (boot) {
		/* a relay started again: what the one before ran comes back */
		int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
		pisb_services_begin(n.svc, null >= 0 ? null : 2);
		if (null >= 0)
			close(null);
	}
	publish(&n);
	(void)!write(ready, "r", 1);
	close(ready);
	logf_(&n, "net: relay up%s",
	      pisb_services_proxy(n.svc) ? ", the egress proxy on the guest's 127.0.0.1:3128" : "");
	_exit(net_loop(&n) < 0 ? 1 : 0);
}

pid_t vm_net_start(int idir, const char *name, const struct pisb_config *cfg, bool boot)
{
	int p[2];
	pid_t pid, parent = getpid();
	char c;

	if (pipe2(p, O_CLOEXEC) < 0)
		return -1;
	pid = fork();
	if (pid < 0) {
		close(p[0]);
		close(p[1]);
		return -1;
	}
	if (pid == 0) {
		/* only the instance dir and the pipe: the supervisor's
		 * controller.lock and QEMU's sockets stay the supervisor's */
		int d = fcntl(idir, F_DUPFD_CLOEXEC, 3);
		if (d != 3) {
			dup3(d, 3, O_CLOEXEC);
			close(d);
		}
		dup3(p[1], 4, O_CLOEXEC);
		pisb_close_from(5, -1);
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		if (getppid() != parent)
			_exit(1);
		net_main(3, name, cfg, 4, boot);
	}
	close(p[1]);
	/* ready once status.json shows the previews (or it died) */
	{
		struct pollfd w = { p[0], POLLIN, 0 };
		if (poll(&w, 1, 10000) == 1)
			(void)!read(p[0], &c, 1);
	}
	close(p[0]);
	return pid;
}

void vm_net_stop(pid_t pid)
{
	if (pid <= 0)
		return;
	kill(pid, SIGTERM);
	waitpid(pid, NULL, 0);
}

/* The services of a running vm sandbox, after its hooks (create, start):
 * started by its relay; 0 once each is ready, or -1 naming those that
 * failed (the sandbox runs on, as the local driver's). */
int vm_net_boot(int idir, struct pisb_err *e)
{
	_cleanup_buf_ struct pisb_buf reply = PISB_BUF_INIT;
	struct pisb_json j;
	bool ok = false;
	int r = 0;

	if (pisb_control_call(idir, "{\"op\":\"svc.boot\"}", &reply, 150000, e) < 0)
		return -1;
	if (pisb_json_parse(&j, reply.s ? reply.s : "", reply.len, e) < 0)
		return -1;
	pisb_json_bool(&j, pisb_json_get(&j, 0, "ok"), &ok);
	if (!ok) {
		_cleanup_free_ char *msg = pisb_json_str(&j, pisb_json_get(&j, 0, "error"));
		r = pisb_err_set(e, PISB_EXIT_FAIL, "%s", msg ? msg : "the services did not start");
	}
	pisb_json_release(&j);
	return r;
}

/* Stop the services before the guest powers off (their stop lines in
 * their logs, TERM first); quietly nothing when no relay answers. */
void vm_net_halt(int idir)
{
	_cleanup_buf_ struct pisb_buf reply = PISB_BUF_INIT;
	struct pisb_err ig = PISB_ERR_INIT;

	pisb_control_call(idir, "{\"op\":\"svc.halt\"}", &reply, 10000, &ig);
}
