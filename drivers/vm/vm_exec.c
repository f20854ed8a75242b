/* vm_exec.c - the host side of the agent protocol (vm_proto.h): ports,
 * frames, ping/poweroff, and running commands in the guest. */
#include "vm.h"
#include "vm_internal.h"
#include "vm_proto.h"
#include "config.h"
#include "driver.h"
#include "err.h"
#include "exec.h"
#include "instance.h"
#include "lock.h"
#include "proc.h"
#include "state.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

/* ---- connections and frames ---- */

int vm_agent_connect(int idir, int port)
{
	struct sockaddr_un sa;
	int fd;

	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	/* a short path whatever the state dir's length */
	snprintf(sa.sun_path, sizeof(sa.sun_path), "/proc/self/fd/%d/agent%d.sock", idir, port);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int saved = errno;
		close(fd);
		errno = saved;
		return -1;
	}
	return fd;
}

/* A command port answers a PING before it gets a command: a port whose
 * agent still holds part of a frame from a client that died mid-write
 * would take the next client's bytes as the rest of it, and that client
 * would wait for ever.  No PONG within VM_PORT_PING_MS: hang up and stay
 * away VM_PORT_REST_MS (the agent drops a half-read frame once a hang-up
 * lasts 1.5 s, agent/pisb-agent.c), then try again, until
 * PISB_VM_PORT_MS (default VM_PORT_MS) has passed. */
#define VM_PORT_PING_MS 5000
#define VM_PORT_REST_MS 2000
#define VM_PORT_MS 30000

/* The reset between two tries: a new buffer and socket. */
static void conn_hang_up(struct vm_conn *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	c->off = c->have = 0;
}

/* Wait until deadline for the PONG of session sid on c: 0, or -1. */
static int await_pong(struct vm_conn *c, uint32_t sid, int64_t deadline)
{
	for (;;) {
		int t;
		const unsigned char *p;
		uint32_t len;
		int64_t left = deadline - pisb_mono_ms();
		struct pollfd pf = { c->fd, POLLIN, 0 };
		if (vm_next(c, sid, &t, &p, &len) == 1) {
			vm_take(c, len);
			if (t == PISB_VM_PONG)
				return 0;
			continue;
		}
		if (left <= 0)
			return -1;
		if (poll(&pf, 1, (int)left) < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		if (pf.revents && vm_fill(c) <= 0)
			return -1;
	}
}

/* A port that did not answer, for whoever looks into a hang later: one
 * line in the instance's ports.log (host-owned; the guest cannot write it). */
static void port_note(int idir, int port, int tries)
{
	char t[32], line[128];
	int fd = openat(idir, "ports.log", O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	int n;

	if (fd < 0)
		return;
	pisb_time_rfc3339(pisb_now_ms() / 1000, t);
	n = snprintf(line, sizeof(line), "%s command port %d: no answer to PING within %d ms (try %d)\n", t,
		     port, VM_PORT_PING_MS, tries);
	if (pisb_write_all(fd, line, (size_t)n) < 0) {
	}
	close(fd);
}

int vm_conn_open(int idir, int port, int wait_ms, struct vm_conn *c, struct pisb_err *e)
{
	char lk[32];
	int limit_ms = pisb_env_ms("PISB_VM_PORT_MS", VM_PORT_MS), tries = 0;
	int64_t give_up;

	*c = (struct vm_conn)VM_CONN_INIT;
	if (port == VM_PORT_SERVICE) {
		/* a service's: the first free service port, or none */
		for (int i = PISB_VM_SVC_PORT; i < PISB_VM_SVC_PORT + PISB_VM_SVC_PORTS && c->lock < 0; i++) {
			struct pisb_err ig = PISB_ERR_INIT;
			snprintf(lk, sizeof(lk), "agent%d.lock", i);
			c->lock = pisb_lock_acquire(idir, lk, true, 0, "agent port", &ig);
			if (c->lock >= 0)
				port = i;
		}
		if (c->lock < 0)
			return pisb_err_set(e, PISB_EXIT_BUSY,
					    "the VM's %d service ports are all taken: a vm sandbox runs at most %d services at once",
					    PISB_VM_SVC_PORTS, PISB_VM_SVC_PORTS);
	} else if (port < 0) {
		/* the first free command port, else wait for a random one */
		for (int i = 1; i <= PISB_VM_EXEC_PORTS && c->lock < 0; i++) {
			struct pisb_err ig = PISB_ERR_INIT;
			snprintf(lk, sizeof(lk), "agent%d.lock", i);
			c->lock = pisb_lock_acquire(idir, lk, true, 0, "agent port", &ig);
			if (c->lock >= 0)
				port = i;
		}
		if (c->lock < 0) {
			port = 1 + (int)(vm_sid() % PISB_VM_EXEC_PORTS);
			snprintf(lk, sizeof(lk), "agent%d.lock", port);
			c->lock = pisb_lock_acquire(idir, lk, true, wait_ms, "every agent port", e);
		}
	} else {
		snprintf(lk, sizeof(lk), "agent%d.lock", port);
		c->lock = pisb_lock_acquire(idir, lk, true, wait_ms, "the agent's lifecycle port", e);
	}
	if (c->lock < 0)
		return -1;
	give_up = pisb_mono_ms() + limit_ms;
	for (;;) {
		uint32_t sid = vm_sid();
		int64_t until = pisb_mono_ms() + VM_PORT_PING_MS;
		c->fd = vm_agent_connect(idir, port);
		if (c->fd < 0) {
			pisb_err_sys(e, PISB_EXIT_BACKEND, "connect to the guest agent (agent%d.sock)", port);
			vm_conn_close(c);
			return -1;
		}
		/* port 0's callers wait for their own answer */
		if (port == 0)
			return 0;
		tries++;
		if (vm_send(c, PISB_VM_PING, sid, NULL, 0) == 0 &&
		    await_pong(c, sid, until < give_up ? until : give_up) == 0)
			return 0;
		conn_hang_up(c);
		port_note(idir, port, tries);
		if (pisb_mono_ms() + VM_PORT_REST_MS >= give_up) {
			pisb_err_set(e, PISB_EXIT_BACKEND,
				     "the guest agent did not answer on its command port %d (%d tries in %d s); the VM may be overloaded or its agent gone",
				     port, tries, limit_ms / 1000);
			vm_conn_close(c);
			return -1;
		}
		pisb_sleep_ms(VM_PORT_REST_MS);
	}
}

void vm_conn_close(struct vm_conn *c)
{
	if (c->fd >= 0)
		close(c->fd);
	if (c->lock >= 0)
		close(c->lock);
	free(c->buf);
	c->fd = c->lock = -1;
	c->buf = NULL;
	c->off = c->have = c->cap = 0;
}

int vm_send(struct vm_conn *c, int type, uint32_t sid, const void *data, size_t len)
{
	unsigned char h[PISB_VM_HDR];

	pisb_vm_hdr(h, type, sid, (uint32_t)len);
	if (pisb_write_all(c->fd, h, sizeof(h)) < 0)
		return -1;
	return len && pisb_write_all(c->fd, data, len) < 0 ? -1 : 0;
}

int vm_fill(struct vm_conn *c)
{
	ssize_t r;

	if (!c->buf) {
		c->cap = 2 * (PISB_VM_HDR + PISB_VM_MAX_FRAME);
		c->buf = xmalloc(c->cap);
	}
	if (c->cap - c->have < 65536 && c->off) {
		/* the unread tail (less than one frame: see vm_next) to the front */
		memmove(c->buf, c->buf + c->off, c->have - c->off);
		c->have -= c->off;
		c->off = 0;
	}
	do
		r = read(c->fd, c->buf + c->have, c->cap - c->have);
	while (r < 0 && errno == EINTR);
	if (r > 0)
		c->have += (size_t)r;
	return r > 0 ? 1 : r == 0 ? 0 : -1;
}

void vm_take(struct vm_conn *c, uint32_t len)
{
	c->off += PISB_VM_HDR + len;
	if (c->off >= c->have)
		c->off = c->have = 0;
}

/* Drop noise up to the next magic (or keep the last 3 bytes, which may
 * be the start of one). */
static void resync(struct vm_conn *c)
{
	unsigned char *from = c->buf + c->off + 1, *end = c->buf + c->have;
	unsigned char *m = memmem(from, (size_t)(end - from), PISB_VM_MAGIC, 4);
	size_t to = m ? (size_t)(m - c->buf) : c->have > c->off + 3 ? c->have - 3 : c->off + 1;

	if (to > c->have)
		to = c->have;
	c->skipped += to - c->off;
	c->off = to;
	if (c->off == c->have)
		c->off = c->have = 0;
}

int vm_next(struct vm_conn *c, uint32_t sid, int *type, const unsigned char **payload,
	    uint32_t *len)
{
	for (;;) {
		unsigned char *h = c->buf + c->off;
		size_t avail = c->have - c->off;

		if (avail < 4)
			return 0;
		if (memcmp(h, PISB_VM_MAGIC, 4) != 0) {
			resync(c);
			continue;
		}
		if (avail < PISB_VM_HDR)
			return 0;
		if (pisb_vm_get32(h + 12) > PISB_VM_MAX_FRAME) {
			resync(c);
			continue;
		}
		*len = pisb_vm_get32(h + 12);
		if (avail < PISB_VM_HDR + *len)
			return 0;
		if (pisb_vm_get32(h + 8) != sid) {
			vm_take(c, *len);   /* a frame of an earlier client */
			continue;
		}
		*type = h[4];
		*payload = h + PISB_VM_HDR;
		return 1;
	}
}

bool vm_partial(const struct vm_conn *c)
{
	return c->have - c->off >= 4 && memcmp(c->buf + c->off, PISB_VM_MAGIC, 4) == 0;
}

uint32_t vm_sid(void)
{
	char hex[9];
	pisb_random_hex(hex, 8);
	return (uint32_t)strtoul(hex, NULL, 16) | 1u;
}

/* Send one frame on port 0, wait for PONG. */
static int lifecycle_call(int idir, int type, const void *data, size_t len0, int timeout_ms)
{
	struct vm_conn c = VM_CONN_INIT;
	struct pisb_err ig = PISB_ERR_INIT;
	uint32_t sid = vm_sid();
	int64_t deadline = pisb_mono_ms() + timeout_ms;
	int ret = -1;

	if (vm_conn_open(idir, 0, timeout_ms, &c, &ig) < 0)
		return -1;
	if (vm_send(&c, type, sid, data, len0) == 0)
		ret = await_pong(&c, sid, deadline);
	vm_conn_close(&c);
	return ret;
}

int vm_ping(int idir, int timeout_ms)
{
	return lifecycle_call(idir, PISB_VM_PING, NULL, 0, timeout_ms);
}

int vm_poweroff(int idir, int timeout_ms)
{
	return lifecycle_call(idir, PISB_VM_POWEROFF, NULL, 0, timeout_ms);
}

int vm_boot_send(int idir, const char *args, struct vm_conn *c, uint32_t *sid)
{
	struct pisb_err ig = PISB_ERR_INIT;

	*sid = vm_sid();
	if (vm_conn_open(idir, 0, 5000, c, &ig) < 0)
		return -1;
	if (vm_send(c, PISB_VM_BOOT, *sid, args, strlen(args)) < 0) {
		vm_conn_close(c);
		return -1;
	}
	return 0;
}

int vm_boot_wait(struct vm_conn *c, uint32_t sid, int timeout_ms)
{
	int ret = await_pong(c, sid, pisb_mono_ms() + timeout_ms);

	vm_conn_close(c);
	return ret;
}

/* ---- running a command ---- */

static int sigpipe_fds[2] = { -1, -1 };

static void on_signal(int sig)
{
	unsigned char s = (unsigned char)sig;
	int saved = errno;
	if (sigpipe_fds[1] >= 0 && write(sigpipe_fds[1], &s, 1) < 0) {
	}
	errno = saved;
}

static void exec_payload(struct pisb_buf *b, const struct vm_run *r)
{
	unsigned char n[4];
	size_t argc = 0, envc = 0;

	while (r->argv[argc])
		argc++;
	while (r->env && r->env[envc])
		envc++;
	pisb_vm_put32(n, (uint32_t)argc);
	pisb_buf_add(b, n, 4);
	pisb_vm_put32(n, (uint32_t)envc);
	pisb_buf_add(b, n, 4);
	pisb_buf_add(b, r->cwd ? r->cwd : "", strlen(r->cwd ? r->cwd : "") + 1);
	for (size_t i = 0; i < argc; i++)
		pisb_buf_add(b, r->argv[i], strlen(r->argv[i]) + 1);
	for (size_t i = 0; i < envc; i++)
		pisb_buf_add(b, r->env[i], strlen(r->env[i]) + 1);
}

/* How long the host waits for a guest that has started a frame to finish
 * it, and for the command's end after pisb has forwarded a signal: the
 * guest is hostile input, and the caller that sends SIGTERM wants pisb to
 * end even when the guest never answers.  A second signal of the same
 * kind gives up at once. */
#define VM_FRAME_STALL_MS 10000
#define VM_SIGNAL_GRACE_MS 10000

/* The guest's word for its command's pid, into FILE of the instance dir
 * (a number in 1..2^22, else nothing: it is only shown) */
static void note_pid(int idir, const char *file, uint32_t pid)
{
	char b[16];
	int n, fd;

	if (pid == 0 || pid > (1u << 22))
		return;
	n = snprintf(b, sizeof(b), "%u\n", pid);
	fd = openat(idir, file, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return;
	if (pisb_write_all(fd, b, (size_t)n) < 0) {
	}
	close(fd);
}

int vm_run(int idir, const struct vm_run *r, int *code, struct pisb_err *e)
{
	return vm_run_sink(idir, r, NULL, NULL, code, e);
}

int vm_run_sink(int idir, const struct vm_run *r, vm_sink_fn sink, void *arg, int *code,
		struct pisb_err *e)
{
	static const int sigs[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR2 };
	struct sigaction sa, old[5], oldpipe, oldwinch;
	size_t nsigs = r->kill_on_usr2 ? 5 : 4;
	struct vm_conn c = VM_CONN_INIT;
	_cleanup_buf_ struct pisb_buf req = PISB_BUF_INIT;
	uint32_t sid = vm_sid();
	bool in_open = r->in_fd >= 0, done = false;
	int64_t stall_at = 0, give_up_at = 0;
	int last_sig = 0;
	bool timed_out = false;
	int ret = -1;

	if (vm_conn_open(idir, r->service ? VM_PORT_SERVICE : -1, -1, &c, e) < 0)
		return -1;
	exec_payload(&req, r);
	if (req.len > PISB_VM_MAX_FRAME) {
		vm_conn_close(&c);
		return pisb_err_set(e, PISB_EXIT_USAGE, "the command and its environment exceed 1 MiB");
	}
	if (pipe2(sigpipe_fds, O_CLOEXEC | O_NONBLOCK) < 0) {
		vm_conn_close(&c);
		return pisb_err_sys(e, PISB_EXIT_PISB, "pipe");
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	if (r->forward)
		for (size_t i = 0; i < nsigs; i++)
			sigaction(sigs[i], &sa, &old[i]);
	if (r->winch)
		sigaction(SIGWINCH, &sa, &oldwinch);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = SIG_IGN;
	sigaction(SIGPIPE, &sa, &oldpipe);
	if (vm_send(&c, PISB_VM_EXEC, sid, req.s, req.len) < 0 ||
	    (!in_open && vm_send(&c, PISB_VM_STDIN, sid, NULL, 0) < 0)) {
		pisb_err_sys(e, PISB_EXIT_BACKEND, "send the command to the guest agent");
		goto out;
	}
	while (!done) {
		struct pollfd pf[3] = { { c.fd, POLLIN, 0 }, { sigpipe_fds[0], POLLIN, 0 },
					{ in_open ? r->in_fd : -1, POLLIN, 0 } };
		int t, n, wait = -1;
		const unsigned char *p;
		uint32_t len;
		int64_t now;

		while (vm_next(&c, sid, &t, &p, &len) == 1) {
			if (sink && (t == PISB_VM_STDOUT || t == PISB_VM_STDERR)) {
				if (sink(arg, t, p, len, e) < 0) {
					unsigned char k = SIGKILL;
					vm_send(&c, PISB_VM_KILL, sid, &k, 1);
					goto out;
				}
			} else if (t == PISB_VM_STDOUT || t == PISB_VM_STDERR) {
				/* a closed stdout is not our failure: the command
				 * sees nothing of it and finishes */
				if (pisb_write_all(t == PISB_VM_STDOUT ? r->out_fd : r->err_fd, p, len) < 0) {
				}
			} else if (t == PISB_VM_EXIT && len >= 4) {
				*code = (int)pisb_vm_get32(p);
				done = true;
			} else if (t == PISB_VM_STARTED && len >= 4 && r->pid_file) {
				note_pid(idir, r->pid_file, pisb_vm_get32(p));
			}
			vm_take(&c, len);
			if (done)
				break;
		}
		if (done)
			break;
		now = pisb_mono_ms();
		if (!vm_partial(&c))
			stall_at = 0;
		else if (!stall_at)
			stall_at = now + VM_FRAME_STALL_MS;
		if (stall_at && now >= stall_at) {
			pisb_err_set(e, PISB_EXIT_BACKEND,
				     "the guest agent began a frame and did not finish it within %d s; giving up (the command may still run in the VM)",
				     VM_FRAME_STALL_MS / 1000);
			goto out;
		}
		if (give_up_at && now >= give_up_at) {
			pisb_err_set(e, 128 + last_sig,
				     "the guest did not report the command's end within %d s of signal %d; giving up (it may still run in the VM)",
				     VM_SIGNAL_GRACE_MS / 1000, last_sig);
			goto out;
		}
		if (r->deadline && !timed_out && now >= r->deadline) {
			unsigned char k = SIGKILL;
			timed_out = true;
			last_sig = SIGKILL;
			give_up_at = now + VM_SIGNAL_GRACE_MS;
			if (vm_send(&c, PISB_VM_KILL, sid, &k, 1) < 0) {
				pisb_err_set(e, PISB_EXIT_TIMEOUT, "the deadline passed and the guest agent is gone");
				goto out;
			}
		}
		if (stall_at || give_up_at) {
			int64_t until = stall_at && (!give_up_at || stall_at < give_up_at) ? stall_at : give_up_at;
			wait = (int)(until - now);
		}
		if (r->deadline && !timed_out && (wait < 0 || r->deadline - now < wait))
			wait = (int)(r->deadline - now);
		n = poll(pf, 3, wait);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			pisb_err_sys(e, PISB_EXIT_PISB, "poll");
			goto out;
		}
		if (pf[1].revents & POLLIN) {
			unsigned char s;
			while (read(sigpipe_fds[0], &s, 1) == 1) {
				int sig = s;
				if (sig == SIGWINCH) {
					/* the terminal's new size, for the guest's pty */
					struct winsize ws;
					unsigned char w[4];
					if (ioctl(0, TIOCGWINSZ, &ws) < 0 || !ws.ws_row || !ws.ws_col)
						continue;
					w[0] = (unsigned char)ws.ws_row;
					w[1] = (unsigned char)(ws.ws_row >> 8);
					w[2] = (unsigned char)ws.ws_col;
					w[3] = (unsigned char)(ws.ws_col >> 8);
					vm_send(&c, PISB_VM_WINSZ, sid, w, 4);
					continue;
				}
				if (s == SIGUSR2)   /* exec-kill's second step */
					s = SIGKILL;
				if (give_up_at && sig == last_sig)
					give_up_at = pisb_mono_ms();   /* asked twice: now */
				else if (!give_up_at)
					give_up_at = pisb_mono_ms() + VM_SIGNAL_GRACE_MS;
				last_sig = s;
				if (vm_send(&c, PISB_VM_KILL, sid, &s, 1) < 0)
					break;
			}
		}
		if (pf[2].revents) {
			char buf[65536];
			ssize_t got = read(r->in_fd, buf, sizeof(buf));
			if (got > 0) {
				if (vm_send(&c, PISB_VM_STDIN, sid, buf, (size_t)got) < 0)
					in_open = false;
			} else if (got == 0 || (errno != EINTR && errno != EAGAIN)) {
				in_open = false;
				vm_send(&c, PISB_VM_STDIN, sid, NULL, 0);
			}
		}
		if (pf[0].revents) {
			int f = vm_fill(&c);
			if (f <= 0) {
				pisb_err_set(e, PISB_EXIT_BACKEND,
					     "the connection to the guest agent was lost before the command finished (the VM stopped?)");
				goto out;
			}
			if (vm_partial(&c))
				stall_at = 0;   /* bytes came: measure the stall from now */
		}
	}
	ret = 0;
	if (timed_out)
		ret = pisb_err_set(e, PISB_EXIT_TIMEOUT, "the deadline passed: the command was killed");
out:
	if (r->forward)
		for (size_t i = 0; i < nsigs; i++)
			sigaction(sigs[i], &old[i], NULL);
	if (r->winch)
		sigaction(SIGWINCH, &oldwinch, NULL);
	sigaction(SIGPIPE, &oldpipe, NULL);
	close(sigpipe_fds[0]);
	close(sigpipe_fds[1]);
	sigpipe_fds[0] = sigpipe_fds[1] = -1;
	vm_conn_close(&c);
	return ret;
}

/* ---- pisb exec ---- */

int vm_open_running(struct pisb_sandbox *sb, const struct pisb_config **cfgp, struct pisb_err *e)
{
	const struct pisb_runtime *rt;
	enum pisb_status s;

	*cfgp = pisb_sandbox_config(sb, e);
	if (!*cfgp)
		return pisb_err_prefix(e, "sandbox '%s'", sb->name);
	rt = pisb_sandbox_runtime(sb, e);
	if (!rt)
		return -1;
	s = pisb_vm_status(sb->idir, rt);
	if (s != PISB_ST_RUNNING)
		return pisb_err_set(e, PISB_EXIT_BACKEND, "sandbox '%s' is %s (driver vm): run 'pisb start %s'; nothing runs on the host instead",
				    sb->name, pisb_status_name(s), sb->name);
	return sb->idir;
}

void vm_build(const struct pisb_config *cfg, const struct pisb_exec_req *r, struct pisb_strv *env,
	      struct pisb_strv *argv, char **cwd)
{
	const char *term = getenv("TERM");

	pisb_strv_push(env, "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
	pisb_strv_push(env, "HOME=/root");
	pisb_strv_push(env, "USER=root");
	pisb_strv_push(env, "LOGNAME=root");
	pisb_strv_push(env, "SHELL=/bin/sh");
	pisb_strv_pushf(env, "TERM=%s", term && *term ? term : "dumb");
	pisb_config_proxy_env(cfg, env);
	for (size_t i = 0; i < cfg->env.n; i++)
		pisb_strv_pushf(env, "%s=%s", cfg->env.v[i].key, cfg->env.v[i].val);
	for (size_t i = 0; i < r->nenv; i++)
		pisb_strv_push(env, r->env[i]);
	if (r->sh) {
		pisb_strv_push(argv, "/bin/sh");
		pisb_strv_push(argv, "-lc");
		pisb_strv_push(argv, r->sh);
	} else {
		for (size_t i = 0; i < r->argc; i++)
			pisb_strv_push(argv, r->argv[i]);
	}
	if (!r->cwd || !*r->cwd)
		*cwd = xstrdup(cfg->workspace);
	else if (r->cwd[0] == '/')
		*cwd = xstrdup(r->cwd);
	else
		*cwd = xasprintf("%s/%s", cfg->workspace, r->cwd);
}

int pisb_vm_exec_attached(struct pisb_sandbox *sb, const struct pisb_exec_req *r,
			  int *code, struct pisb_err *e)
{
	_cleanup_strv_ struct pisb_strv env = PISB_STRV_INIT, argv = PISB_STRV_INIT;
	_cleanup_free_ char *cwd = NULL;
	const struct pisb_config *cfg;
	struct vm_run run;
	int idir = vm_open_running(sb, &cfg, e), ret;

	if (idir < 0)
		return -1;
	vm_build(cfg, r, &env, &argv, &cwd);
	run = (struct vm_run){ argv.v, env.v, cwd, 0, 1, 2, true, false, 0, false, false, NULL };
	if (fcntl(0, F_GETFD) < 0)
		run.in_fd = -1;
	ret = vm_run(idir, &run, code, e);
	if (ret < 0)
		pisb_err_prefix(e, "exec in sandbox '%s'", r->name);
	return ret;
}
