/* services.c - services, readiness, previews and the egress proxy inside
 * the controller's loop (services.h).
 *
 * Each service is a small state machine:
 *
 *   stopped -> waiting (for the services its env references) -> running
 *   running -> (exit) -> restarting (1 s) -> running
 *   running -> stopping (TERM, KILL after 2 s) -> stopped
 *
 * and, independently, a readiness: pending (probing) -> ready | failed
 * (deadline timeoutMs).  Probes go through the netns helper: a TCP connect
 * to the service's port inside the sandbox, then for `health: /path` one
 * HTTP GET that must answer 2xx or 3xx.
 *
 * Requests that wait (ensure, restart, start, stop) keep the client's fd
 * in a waiter and answer when their services settle, so the loop never
 * blocks: previews and the proxy keep relaying meanwhile.
 */
#include "services.h"
#include "config.h"
#include "ctllog.h"
#include "docker_init.h"
#include "local.h"
#include "err.h"
#include "fs.h"
#include "gate.h"
#include "instance.h"
#include "json.h"
#include "netns.h"
#include "proc.h"
#include "proxy.h"
#include "relay.h"
#include "sbexec.h"
#include "state.h"
#include "util.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define RESTART_DELAY_MS 1000
#define STOP_GRACE_MS 2000
#define LOG_MAX (1024 * 1024)      /* SERVICE.log, then SERVICE.log.1: 2 MiB at most */
#define LOG_RATE (256 * 1024)      /* bytes kept per second, after a burst of */
#define LOG_BURST (1024 * 1024)    /* this; the rest is dropped */
#define ADHOC_TIMEOUT_MS 60000
#define PROBE_FAST_MS 10        /* the first 2 s after a start */
#define PROBE_MS 100
#define PROBE_FAILED_MS 500     /* after the deadline: keep watching, slowly */
#define PROBE_HTTP_MS 200       /* between HTTP checks that got an answer */
#define PROBE_TIMEOUT_MS 5000
#define PORT_LO 20000           /* allocated ports: below the ephemeral range */
#define PORT_HI 32767

enum kind { K_YAML, K_ADHOC, K_LINK };
enum pstate { PS_STOPPED, PS_WAITING, PS_RUNNING, PS_BACKOFF, PS_STOPPING };
enum rstate { RS_NONE, RS_PENDING, RS_READY, RS_FAILED };
enum { PR_IDLE, PR_CONNECTING, PR_READING };
enum { W_READY, W_STOPPED, W_REMOVED };

struct svc {
	char *name;
	enum kind kind;
	bool declared;          /* K_YAML: in the config last read */
	bool removed;           /* svc remove: forgotten once its process is gone */
	/* the definition */
	char *command, *cwd;
	struct pisb_map env;
	enum pisb_health health;
	char *health_path;
	int timeout_ms;
	int fixed_port;         /* 0: allocate */
	bool preview;           /* has a preview URL of its own */
	struct pisb_link *links;
	size_t nlinks;
	char **depends;
	size_t ndepends;
	bool enabled;           /* its platforms include linux */
	/* ports */
	int port, host_port;
	int lfd, lidx;
	char *lerr;             /* why the preview does not listen */
	int family;             /* what the service listens on: AF_INET, AF_INET6 */
	/* the process */
	enum pstate ps;
	bool want, restart_now;
	pid_t pid;
	int64_t started, restart_at, kill_at;
	int restarts, exits, last_code;
	char *spawn_err;
	int log_fd;
	long long log_size;     /* bytes in log_fd */
	bool log_midline;       /* its last byte is not a newline */
	int out_r, out_w, oidx; /* the pipe the service writes its output into */
	struct pisb_bucket out_bucket;  /* what of its output the log keeps */
	/* readiness */
	enum rstate rs;
	int64_t rdeadline, probe_at;
	char *why;              /* the last probe's failure */
	char *rerr;             /* set when readiness failed */
	int pfd, pidx, pphase;
	char pbuf[256];
	size_t plen;
	int64_t pdeadline;
};

struct waiter {
	int fd;
	int mode;
	char **names;
	size_t n;
	struct waiter *next;
};

struct pisb_services {
	struct pisb_state *st;
	int idir;
	char *name;
	const struct pisb_config *cfg;
	const struct pisb_runtime *rt;
	struct svc **v;
	size_t n;
	struct pisb_netns ns;      /* the local driver's (local_ops) */
	const struct pisb_svc_ops *ops;
	void *ctx;
	struct pisb_relay *relay;
	struct pisb_proxy *proxy;
	struct pisb_gate *gate;  /* preview.auth: token */
	char *token;             /* that token, or NULL */
	char *proxy_err;
	struct waiter *waiters;
	bool changed;
	void (*on_change)(void *arg);   /* saves what changed (the controller's status.json) */
	void *on_change_arg;
	int64_t accept_pause_until;
	int proxy_off, gate_off, relay_off, nfds;
	bool started;
	bool guest_given;          /* pisb_services_guest_config: */
	int guest_err;             /*   errno of its read, or 0 */
	struct pisb_buf guest_text;
};

void pisb_svc_log(const char *fmt, ...)
{
	char ts[32], buf[4096];
	va_list ap;
	int n, m;

	pisb_time_rfc3339(pisb_now_ms() / 1000, ts);
	n = snprintf(buf, sizeof(buf), "%s controller[%d]: ", ts, (int)getpid());
	va_start(ap, fmt);
	m = vsnprintf(buf + n, sizeof(buf) - (size_t)n - 1, fmt, ap);
	va_end(ap);
	n = m < 0 ? n : n + m;
	/* a line at most: what a message quotes of the sandbox is cut here */
	if (n > (int)sizeof(buf) - 2)
		n = (int)sizeof(buf) - 2;
	buf[n++] = '\n';
	pisb_ctllog_write(buf, (size_t)n);
}

/* ---------- small helpers ---------- */

static void set_str(char **dst, const char *src)
{
	if (*dst && src && !strcmp(*dst, src))
		return;
	free(*dst);
	*dst = src ? xstrdup(src) : NULL;
}

static void map_release(struct pisb_map *m)
{
	for (size_t i = 0; i < m->n; i++) {
		free(m->v[i].key);
		free(m->v[i].val);
	}
	free(m->v);
	m->v = NULL;
	m->n = 0;
}

static void map_copy(struct pisb_map *dst, const struct pisb_map *src)
{
	map_release(dst);
	dst->v = xcalloc(src->n ? src->n : 1, sizeof(*dst->v));
	for (size_t i = 0; i < src->n; i++) {
		dst->v[i].key = xstrdup(src->v[i].key);
		dst->v[i].val = xstrdup(src->v[i].val);
	}
	dst->n = src->n;
}

static void links_release(struct svc *v)
{
	for (size_t i = 0; i < v->nlinks; i++) {
		free(v->links[i].url);
		free(v->links[i].title);
		free(v->links[i].description);
		free(v->links[i].folder);
	}
	free(v->links);
	v->links = NULL;
	v->nlinks = 0;
}

static char *dup0(const char *s)
{
	return s ? xstrdup(s) : NULL;
}

static void add_link(struct svc *v, const char *url, const char *title,
		     const char *desc, const char *folder)
{
	struct pisb_link *l;

	v->links = xrealloc(v->links, (v->nlinks + 1) * sizeof(*v->links));
	l = &v->links[v->nlinks++];
	l->url = dup0(url);
	l->title = dup0(title);
	l->description = dup0(desc);
	l->folder = dup0(folder);
}

static void strv_free(char **v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

static struct svc *find(const struct pisb_services *s, const char *name)
{
	for (size_t i = 0; i < s->n; i++)
		if (!strcmp(s->v[i]->name, name))
			return s->v[i];
	return NULL;
}

static struct svc *svc_new(struct pisb_services *s, const char *name, enum kind k)
{
	struct svc *v = xcalloc(1, sizeof(*v));

	v->name = xstrdup(name);
	v->kind = k;
	v->enabled = true;
	v->timeout_ms = 30000;
	v->lfd = v->pfd = v->log_fd = v->out_r = v->out_w = -1;
	v->out_bucket = (struct pisb_bucket){ .rate = LOG_RATE, .burst = LOG_BURST };
	v->family = AF_INET;
	v->lidx = v->pidx = v->oidx = -1;
	s->v = xrealloc(s->v, (s->n + 1) * sizeof(*s->v));
	s->v[s->n++] = v;
	return v;
}

static void probe_end(struct svc *v)
{
	if (v->pfd >= 0)
		close(v->pfd);
	v->pfd = -1;
	v->pphase = PR_IDLE;
	v->plen = 0;
}

static void svc_free(struct svc *v)
{
	probe_end(v);
	if (v->lfd >= 0)
		close(v->lfd);
	if (v->log_fd >= 0)
		close(v->log_fd);
	if (v->out_r >= 0)
		close(v->out_r);
	if (v->out_w >= 0)
		close(v->out_w);
	free(v->name);
	free(v->command);
	free(v->cwd);
	map_release(&v->env);
	free(v->health_path);
	links_release(v);
	strv_free(v->depends, v->ndepends);
	free(v->lerr);
	free(v->spawn_err);
	free(v->why);
	free(v->rerr);
	free(v);
}

static const char *health_name(enum pisb_health h)
{
	return h == PISB_HEALTH_HTTP ? "http" : h == PISB_HEALTH_PROCESS ? "process" : "tcp";
}

/* ---------- services.json: sticky ports, ad-hoc services, links ---------- */

static void persist(struct pisb_services *s)
{
	struct pisb_buf b = PISB_BUF_INIT;
	struct pisb_err e = PISB_ERR_INIT;
	struct pisb_jw w;

	pisb_jw_init(&w, &b);
	pisb_jw_obj(&w);
	for (size_t i = 0; i < s->n; i++) {
		struct svc *v = s->v[i];

		if ((!v->port && !v->host_port) || v->removed)
			continue;
		pisb_jw_key(&w, v->name);
		pisb_jw_obj(&w);
		pisb_jw_kint(&w, "port", v->port);
		pisb_jw_kint(&w, "hostPort", v->host_port);
		if (v->kind == K_ADHOC) {
			pisb_jw_key(&w, "adhoc");
			pisb_jw_obj(&w);
			pisb_jw_kstr(&w, "command", v->command);
			pisb_jw_kbool(&w, "fixedPort", v->fixed_port != 0);
			pisb_jw_kbool(&w, "preview", v->preview);
			pisb_jw_kstr(&w, "title", v->nlinks ? v->links[0].title : NULL);
			pisb_jw_kstr(&w, "description", v->nlinks ? v->links[0].description : NULL);
			pisb_jw_kbool(&w, "stopped", !v->want);
			pisb_jw_kint(&w, "timeoutMs", v->timeout_ms);
			pisb_jw_obj_end(&w);
		} else if (v->kind == K_LINK) {
			pisb_jw_key(&w, "link");
			pisb_jw_obj(&w);
			pisb_jw_kstr(&w, "title", v->nlinks ? v->links[0].title : NULL);
			pisb_jw_kstr(&w, "description", v->nlinks ? v->links[0].description : NULL);
			pisb_jw_obj_end(&w);
		}
		pisb_jw_obj_end(&w);
	}
	pisb_jw_obj_end(&w);
	pisb_buf_addc(&b, '\n');
	if (pisb_atomic_write(s->idir, "services.json", b.s, b.len, 0600, &e) < 0)
		pisb_svc_log("services: %s", e.msg);
	pisb_buf_release(&b);
}

static char *jstr(const struct pisb_json *j, int obj, const char *key)
{
	int t = obj >= 0 ? pisb_json_get(j, obj, key) : -1;
	return t >= 0 ? pisb_json_str(j, t) : NULL;
}

static long long jint(const struct pisb_json *j, int obj, const char *key, long long def)
{
	int t = obj >= 0 ? pisb_json_get(j, obj, key) : -1;
	long long v;
	return t >= 0 && pisb_json_int(j, t, &v) == 0 ? v : def;
}

static bool jbool(const struct pisb_json *j, int obj, const char *key)
{
	int t = obj >= 0 ? pisb_json_get(j, obj, key) : -1;
	bool b = false;
	return t >= 0 && pisb_json_bool(j, t, &b) == 0 && b;
}

static void load_persisted(struct pisb_services *s)
{
	struct pisb_buf b = PISB_BUF_INIT;
	struct pisb_err e = PISB_ERR_INIT;
	struct pisb_json j;

	if (pisb_read_file_at(s->idir, "services.json", &b, 1 << 20) < 0 || !b.len) {
		pisb_buf_release(&b);
		return;
	}
	if (pisb_json_parse(&j, b.s, b.len, &e) < 0 || j.ntok < 1 || j.tok[0].type != JSMN_OBJECT) {
		pisb_svc_log("services: ignoring a broken services.json");
		if (j.ntok >= 0)
			pisb_json_release(&j);
		pisb_buf_release(&b);
		return;
	}
	for (int i = 0, k = 1; i < j.tok[0].size; i++) {
		_cleanup_free_ char *name = pisb_json_str(&j, k);
		int o = k + 1;
		int ad = pisb_json_get(&j, o, "adhoc"), ln = pisb_json_get(&j, o, "link");
		struct svc *v;

		k = pisb_json_skip(&j, o);
		if (!name || j.tok[o].type != JSMN_OBJECT || find(s, name))
			continue;
		v = svc_new(s, name, ad >= 0 ? K_ADHOC : ln >= 0 ? K_LINK : K_YAML);
		v->port = (int)jint(&j, o, "port", 0);
		v->host_port = (int)jint(&j, o, "hostPort", 0);
		if (v->kind == K_ADHOC) {
			_cleanup_free_ char *t = jstr(&j, ad, "title"), *d = jstr(&j, ad, "description");
			v->command = jstr(&j, ad, "command");
			v->fixed_port = jbool(&j, ad, "fixedPort") ? v->port : 0;
			v->preview = jbool(&j, ad, "preview");
			v->timeout_ms = (int)jint(&j, ad, "timeoutMs", ADHOC_TIMEOUT_MS);
			if (v->timeout_ms < 100 || v->timeout_ms > 120000)
				v->timeout_ms = ADHOC_TIMEOUT_MS;
			v->want = !jbool(&j, ad, "stopped");
			if (v->preview)
				add_link(v, NULL, t ? t : name, d, NULL);
			if (!v->command) {
				v->kind = K_YAML;   /* unusable: only its ports stay known */
				v->want = false;
			}
		} else if (v->kind == K_LINK) {
			_cleanup_free_ char *t = jstr(&j, ln, "title"), *d = jstr(&j, ln, "description");
			v->preview = true;
			v->fixed_port = v->port;
			add_link(v, NULL, t, d, NULL);
		}
	}
	pisb_json_release(&j);
	pisb_buf_release(&b);
}

/* ---------- the guest's .sandbox.yaml ---------- */

static int open_in_root(int rootfd, const char *rel)
{
	struct open_how how;

	memset(&how, 0, sizeof(how));
	how.flags = O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY;
	how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
	return (int)syscall(SYS_openat2, rootfd, rel, &how, sizeof(how));
}

/* Read <workspace>/.sandbox.yaml as the sandbox sees it and with its
 * root's rights only (we are host root, or the user: a guest symlink to
 * /etc/shadow must find what root inside finds, which is nothing it may
 * read): from inside its namespaces (pisb_local_read_guest); when it is not
 * running, from the disk's upper layer, which holds only what the sandbox
 * wrote, symlinks resolved inside it.  *out NULL + 0 when it is missing. */
static int load_guest(void *ctx, struct pisb_config **out, struct pisb_err *e)
{
	struct pisb_services *s = ctx;
	_cleanup_free_ char *rel = xasprintf("%s/.sandbox.yaml", s->cfg->workspace + 1);
	_cleanup_free_ char *shown = xasprintf("%s/.sandbox.yaml", s->cfg->workspace);
	_cleanup_buf_ struct pisb_buf b = PISB_BUF_INIT;
	int r = -1;

	*out = NULL;
	if (s->guest_given) {
		/* read at the boot (pisb_services_guest_config), once */
		s->guest_given = false;
		b = s->guest_text;
		s->guest_text = (struct pisb_buf)PISB_BUF_INIT;
		r = s->guest_err ? -1 : 0;
		errno = s->guest_err;
	} else if (pisb_proc_start(s->rt->init.pid) == s->rt->init.start) {
		r = pisb_local_read_guest(s->rt->init.pid, s->rt->init.start, shown, PISB_CONFIG_MAX, &b);
	} else {
		errno = ESRCH;
	}
	if (r < 0 && errno == ESRCH) {
		_cleanup_close_ int up = openat(s->idir, "disk/upper", O_PATH | O_DIRECTORY | O_CLOEXEC);
		_cleanup_close_ int fd = up < 0 ? -1 : open_in_root(up, rel);
		struct stat sb;
		if (fd < 0)
			r = -1;
		else if (fstat(fd, &sb) < 0)
			r = -1;
		else if (!S_ISREG(sb.st_mode))
			r = -1, errno = EISDIR;
		else if (sb.st_size > PISB_CONFIG_MAX)
			r = -1, errno = EFBIG;
		else
			r = pisb_read_fd(fd, &b, PISB_CONFIG_MAX) < 0 ? (errno = EFBIG, -1) : 0;
	}
	if (r < 0) {
		if (errno == ENOENT)
			return 0;
		if (errno == EISDIR)
			return pisb_err_set(e, PISB_EXIT_USAGE, "'%s' is not a regular file", shown);
		if (errno == EFBIG)
			return pisb_err_set(e, PISB_EXIT_USAGE, "'%s' is larger than 1 MiB", shown);
		return pisb_err_sys(e, PISB_EXIT_FAIL, "read '%s' inside the sandbox", shown);
	}
	return pisb_config_load_buf(b.s ? b.s : "", b.len, shown, s->cfg->workspace, out, e);
}

/* Take a config's services as the declared ones.  Processes that run go
 * on running: their next start uses the new definition. */
/* docker: true - the sandbox's own docker daemon, a service like the
 * others (supervised, restarted, its log under logs/), started with the
 * sandbox.  dockerd runs as the sandbox's root; when the sandbox's cgroups
 * were handed to that root (pisb_cgroup_delegate) runc makes each
 * container's below them, else it runs in rootless mode (containers
 * without cgroups of their own, inside the sandbox's); its
 * data root on the instance disk (ns.c binds <disk>/docker there), its
 * socket on the sandbox's /run, its registry traffic through the egress
 * proxy (HTTP(S)_PROXY of the sandbox's environment).  Its command is
 * docker_init.h's PISB_DOCKERD_SH. */
static void builtin_docker(struct pisb_services *s)
{
	struct svc *v = find(s, PISB_DOCKER_SERVICE);

	if (!v)
		v = svc_new(s, PISB_DOCKER_SERVICE, K_YAML);
	if (v->kind == K_LINK && v->lfd >= 0) {
		close(v->lfd);
		v->lfd = -1;
	}
	v->kind = K_YAML;
	v->declared = true;
	set_str(&v->command, PISB_DOCKERD_SH);
	set_str(&v->cwd, NULL);
	map_release(&v->env);
	v->health = PISB_HEALTH_PROCESS;
	set_str(&v->health_path, NULL);
	v->timeout_ms = 30000;
	v->fixed_port = 0;
	v->preview = false;
	links_release(v);
	strv_free(v->depends, v->ndepends);
	v->depends = xcalloc(1, sizeof(char *));
	v->ndepends = 0;
	v->enabled = true;
}

static void apply_config(struct pisb_services *s, const struct pisb_config *c)
{
	for (size_t i = 0; i < s->n; i++)
		if (s->v[i]->kind == K_YAML)
			s->v[i]->declared = false;
	for (size_t i = 0; i < c->nservices; i++) {
		const struct pisb_service *cs = &c->services[i];
		struct svc *v = find(s, cs->name);

		if (!v)
			v = svc_new(s, cs->name, K_YAML);
		if (v->kind == K_LINK && v->lfd >= 0) {
			close(v->lfd);
			v->lfd = -1;
		}
		v->kind = K_YAML;
		v->declared = true;
		set_str(&v->command, cs->command);
		set_str(&v->cwd, cs->cwd);
		map_copy(&v->env, &cs->env);
		v->health = cs->health;
		set_str(&v->health_path, cs->health_path);
		v->timeout_ms = cs->timeout_ms > 0 ? cs->timeout_ms : 30000;
		v->fixed_port = cs->port;
		v->preview = cs->preview;
		links_release(v);
		for (size_t k = 0; k < cs->nlinks; k++)
			add_link(v, cs->links[k].url, cs->links[k].title,
				 cs->links[k].description, cs->links[k].folder);
		strv_free(v->depends, v->ndepends);
		v->depends = xcalloc(cs->ndepends + 1, sizeof(char *));
		for (size_t k = 0; k < cs->ndepends; k++)
			v->depends[k] = xstrdup(cs->depends[k]);
		v->ndepends = cs->ndepends;
		v->enabled = pisb_service_enabled(cs);
	}
	/* the record's config, not the guest's, says whether the sandbox has
	 * its docker daemon: editing .sandbox.yaml inside cannot change it */
	if (s->cfg->docker)
		builtin_docker(s);
	s->changed = true;
}

/* ---------- ports ---------- */

static bool port_taken(const struct pisb_services *s, const struct svc *self, int port)
{
	if (s->cfg->nallowed_hosts && port == PISB_PROXY_PORT)
		return true;
	for (size_t i = 0; i < s->n; i++) {
		const struct svc *o = s->v[i];
		if (o != self && o->port == port && (o->fixed_port || o->kind != K_YAML || o->declared))
			return true;
	}
	return false;
}

static unsigned rnd(void)
{
	static unsigned state;
	if (!state)
		state = (unsigned)getpid() ^ (unsigned)pisb_now_ms() ^ 0x9e3779b9u;
	state ^= state << 13;
	state ^= state >> 17;
	state ^= state << 5;
	return state;
}

/* The service's guest port: fixed, kept, or a new free one. */
static int assign_port(struct pisb_services *s, struct svc *v, struct pisb_err *e)
{
	int old = v->port;

	if (v->fixed_port) {
		for (size_t i = 0; i < s->n; i++) {
			const struct svc *o = s->v[i];
			if (o != v && o->port == v->fixed_port && o->want)
				return pisb_err_set(e, PISB_EXIT_BUSY, "port %d is also the port of service '%s'",
						    v->fixed_port, o->name);
		}
		if (s->cfg->nallowed_hosts && v->fixed_port == PISB_PROXY_PORT)
			return pisb_err_set(e, PISB_EXIT_BUSY, "port %d is the egress proxy's", PISB_PROXY_PORT);
		v->port = v->fixed_port;
	} else if (!v->port || port_taken(s, v, v->port)) {
		v->port = 0;
		for (int tries = 0; tries < 64 && !v->port; tries++) {
			int p = PORT_LO + (int)(rnd() % (PORT_HI - PORT_LO + 1));
			struct pisb_err ie = PISB_ERR_INIT;
			if (port_taken(s, v, p))
				continue;
			if (s->ops->port_free(s->ctx, p, &ie) == 1)
				v->port = p;
		}
		if (!v->port)
			return pisb_err_set(e, PISB_EXIT_FAIL, "no free port for service '%s'", v->name);
	}
	if (v->port != old)
		persist(s);
	return 0;
}

int pisb_preview_listen(int port)
{
	struct sockaddr_in a;
	int fd, one = 1;

	fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	/* previews are for this machine only: never another address */
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	a.sin_port = htons((uint16_t)port);
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(fd, 511) < 0) {
		int en = errno;
		close(fd);
		errno = en;
		return -1;
	}
	return fd;
}

/* The preview listener on host 127.0.0.1:host_port (allocated once). */
static void open_listener(struct pisb_services *s, struct svc *v)
{
	if (!v->preview) {
		if (v->lfd >= 0) {
			close(v->lfd);
			v->lfd = -1;
		}
		return;
	}
	if (v->lfd >= 0)
		return;
	if (!v->host_port) {
		for (int tries = 0; tries < 64 && v->lfd < 0; tries++) {
			int p = PORT_LO + (int)(rnd() % (PORT_HI - PORT_LO + 1));
			bool used = false;
			for (size_t i = 0; i < s->n; i++)
				used |= s->v[i]->host_port == p;
			if (!used && (v->lfd = pisb_preview_listen(p)) >= 0)
				v->host_port = p;
		}
		if (v->lfd < 0 && (v->lfd = pisb_preview_listen(0)) >= 0) {
			struct sockaddr_in a;
			socklen_t l = sizeof(a);
			getsockname(v->lfd, (struct sockaddr *)&a, &l);
			v->host_port = ntohs(a.sin_port);
		}
		if (v->lfd >= 0)
			persist(s);
	} else {
		v->lfd = pisb_preview_listen(v->host_port);
	}
	if (v->lfd < 0) {
		char *msg = v->host_port
			? xasprintf("preview port 127.0.0.1:%d of service '%s' is taken by another process (%s); "
				    "free it, then run 'pisb svc %s ensure'", v->host_port, v->name,
				    strerror(errno), s->name)
			: xasprintf("no preview port for service '%s': %s", v->name, strerror(errno));
		if (!v->lerr || strcmp(v->lerr, msg))
			pisb_svc_log("previews: %s", msg);
		free(v->lerr);
		v->lerr = msg;
	} else if (v->lerr) {
		free(v->lerr);
		v->lerr = NULL;
	}
	s->changed = true;
}

static char *public_url(const struct svc *v)
{
	return v->preview && v->host_port ? xasprintf("http://127.0.0.1:%d", v->host_port) : NULL;
}

/* The URL a person opens: with the preview token when there is one
 * (PUBLIC_URL, what the service itself sees, never carries it). */
static char *user_url(const struct pisb_services *s, char *url)
{
	char *u;

	if (!url || !s->token)
		return url;
	u = xasprintf("%s%s%spisb_token=%s", url, strchr(url + 7, '/') ? "" : "/",
		      strchr(url, '?') ? "&" : "?", s->token);
	free(url);
	return u;
}

/* ---------- processes ---------- */

/* Logs: only the controller writes them.  A service writes into a pipe
 * (out_r/out_w) that the loop drains into logs/SERVICE.log: a token bucket
 * keeps a burst of LOG_BURST bytes, then LOG_RATE bytes a second, and drops
 * the rest (one line a second says how much); past LOG_MAX the log is
 * renamed to SERVICE.log.1, so a service holds at most 2 * LOG_MAX on the
 * host.  While it drops, the loop reads once per PISB_HOOKLOG_PAUSE_MS: a flood
 * costs the controller little and the service waits at most that long. */
static void rotate(struct pisb_services *s, struct svc *v);

static void log_write(struct pisb_services *s, struct svc *v, const char *b, size_t n)
{
	if (v->log_fd >= 0 && v->log_size + (long long)n > LOG_MAX && v->log_size > 0)
		rotate(s, v);
	if (v->log_fd < 0)
		return;
	if (pisb_write_all(v->log_fd, b, n) == (ssize_t)n) {
		v->log_size += (long long)n;
		if (n)
			v->log_midline = b[n - 1] != '\n';
	}
}

static void log_line(struct pisb_services *s, struct svc *v, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void log_line(struct pisb_services *s, struct svc *v, const char *fmt, ...)
{
	char ts[32], buf[1024];
	va_list ap;
	int n;

	if (v->log_fd < 0)
		return;
	pisb_time_rfc3339(pisb_now_ms() / 1000, ts);
	/* on a line of its own, after output that ended without a newline */
	n = snprintf(buf, sizeof(buf), "%s[pisb %s] ", v->log_midline ? "\n" : "", ts);
	va_start(ap, fmt);
	n += vsnprintf(buf + n, sizeof(buf) - (size_t)n - 1, fmt, ap);
	va_end(ap);
	if (n > (int)sizeof(buf) - 2)
		n = (int)sizeof(buf) - 2;
	buf[n++] = '\n';
	log_write(s, v, buf, (size_t)n);
}

/* Move whatever is at logs/SERVICE.log aside to SERVICE.log.1 (a file, or
 * what someone put there instead: a directory, a link, a FIFO). */
static void move_aside(struct pisb_services *s, const char *p, const char *p1)
{
	struct pisb_err e = PISB_ERR_INIT;

	if (renameat(s->idir, p, s->idir, p1) < 0 && errno != ENOENT) {
		pisb_rm_rf_at(s->idir, p1, &e);
		if (renameat(s->idir, p, s->idir, p1) < 0)
			pisb_rm_rf_at(s->idir, p, &e);
	}
}

/* Open logs/SERVICE.log for appending, whatever state it is in: a log that
 * is not a regular file or is past LOG_MAX is moved aside first (never
 * read: the controller must not depend on a log's size). */
static int open_log(struct pisb_services *s, struct svc *v)
{
	_cleanup_free_ char *p = xasprintf("logs/%s.log", v->name);
	_cleanup_free_ char *p1 = xasprintf("logs/%s.log.1", v->name);
	struct pisb_err e = PISB_ERR_INIT;
	struct stat sb;

	if (v->log_fd >= 0)
		return 0;
	if (pisb_mkdirs_at(s->idir, "logs", 0700, &e) < 0)
		return -1;
	for (int tries = 0; tries < 2; tries++) {
		int fd = openat(s->idir, p, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW |
				O_NONBLOCK | O_NOCTTY, 0600);
		if (fd >= 0 && fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size <= LOG_MAX) {
			fcntl(fd, F_SETFL, O_APPEND);
			v->log_fd = fd;
			v->log_size = sb.st_size;
			v->log_midline = false;
			return 0;
		}
		if (fd >= 0)
			close(fd);
		move_aside(s, p, p1);
	}
	return -1;
}

/* Rename the log to SERVICE.log.1 and go on in a new one. */
static void rotate(struct pisb_services *s, struct svc *v)
{
	_cleanup_free_ char *p = xasprintf("logs/%s.log", v->name);
	_cleanup_free_ char *p1 = xasprintf("logs/%s.log.1", v->name);

	if (v->log_fd >= 0)
		close(v->log_fd);
	v->log_fd = -1;
	move_aside(s, p, p1);
	if (open_log(s, v) == 0)
		log_line(s, v, "log rotated: the earlier output is in %s.log.1", v->name);
}

/* The pipe the service's stdout and stderr go to, made once: a restarted
 * service (and what it left running) writes into the same one. */
static int open_out(struct svc *v)
{
	int p[2];

	if (v->out_r >= 0)
		return 0;
	/* only the service's side blocks */
	if (pisb_pipe_nb_reader(p) < 0)
		return -1;
	v->out_r = p[0];
	v->out_w = p[1];
	return 0;
}

static void note_dropped(struct pisb_services *s, struct svc *v)
{
	if (!v->out_bucket.dropped)
		return;
	log_line(s, v, "dropped %lld bytes of output: '%s' wrote more than its log keeps (%d KiB a second after a burst of %d KiB)",
		 v->out_bucket.dropped, v->name, LOG_RATE / 1024, LOG_BURST / 1024);
	v->out_bucket.dropped = 0;
	v->out_bucket.noted = pisb_mono_ms();
}

struct out_sink {
	struct pisb_services *s;
	struct svc *v;
};

static void out_keep(void *arg, const char *bytes, size_t n)
{
	struct out_sink *o = arg;

	log_write(o->s, o->v, bytes, n);
}

/* The service's pipe is readable: keep what the bucket allows, drop the rest. */
static void drain_out(struct pisb_services *s, struct svc *v)
{
	struct out_sink o = { s, v };

	pisb_bucket_drain(&v->out_bucket, v->out_r, out_keep, &o);
	if (pisb_bucket_note_due(&v->out_bucket))
		note_dropped(s, v);
}

static char *subst_refs(struct pisb_services *s, const char *val)
{
	static const char pre[] = "${services.", suf[] = ".publicURL}";
	struct pisb_buf b = PISB_BUF_INIT;
	const char *p = val, *q;

	while ((q = strstr(p, pre))) {
		const char *name = q + sizeof(pre) - 1, *end = strstr(name, suf);
		if (!end)
			break;
		pisb_buf_add(&b, p, (size_t)(q - p));
		{
			_cleanup_free_ char *n = xstrndup(name, (size_t)(end - name));
			struct svc *d = find(s, n);
			_cleanup_free_ char *url = d ? public_url(d) : NULL;
			pisb_buf_adds(&b, url ? url : "");
		}
		p = end + sizeof(suf) - 1;
	}
	pisb_buf_adds(&b, p);
	return pisb_buf_detach(&b);
}

static void set_why(struct svc *v, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void set_why(struct svc *v, const char *fmt, ...)
{
	va_list ap;
	char buf[512];

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	set_str(&v->why, buf);
}

static void spawn(struct pisb_services *s, struct svc *v)
{
	_cleanup_strv_ struct pisb_strv extra = PISB_STRV_INIT;
	_cleanup_free_ char *url = public_url(v);
	struct pisb_err e = PISB_ERR_INIT;
	int exec_err = 0;
	pid_t pid;
	int64_t now = pisb_mono_ms();

	for (size_t i = 0; i < v->env.n; i++) {
		_cleanup_free_ char *val = subst_refs(s, v->env.v[i].val);
		pisb_strv_pushf(&extra, "%s=%s", v->env.v[i].key, val);
	}
	/* last: nothing replaces them */
	pisb_strv_pushf(&extra, "PORT=%d", v->port);
	if (url)
		pisb_strv_pushf(&extra, "PUBLIC_URL=%s", url);
	if (open_log(s, v) < 0)
		pisb_svc_log("service '%s': cannot open its log: %s", v->name, strerror(errno));
	if (open_out(v) < 0)
		pisb_svc_log("service '%s': no pipe for its output: %s", v->name, strerror(errno));
	log_line(s, v, "starting '%s': %s (port %d%s%s)", v->name, v->command, v->port,
		 url ? ", preview " : "", url ? url : "");
	pid = s->ops->spawn(s->ctx, v->command, extra.v, extra.n, v->cwd, v->out_w, &exec_err, &e);
	s->changed = true;
	if (pid < 0) {
		set_str(&v->spawn_err, e.msg);
		log_line(s, v, "cannot start: %s", e.msg);
		pisb_svc_log("service '%s': cannot start: %s", v->name, e.msg);
		v->ps = PS_BACKOFF;
		v->restart_at = now + RESTART_DELAY_MS;
		return;
	}
	set_str(&v->spawn_err, NULL);
	v->pid = pid;
	v->started = now;
	v->ps = PS_RUNNING;
	v->probe_at = now;
	if (v->rs == RS_NONE) {
		v->rs = RS_PENDING;
		v->rdeadline = now + v->timeout_ms;
	}
	if (v->health == PISB_HEALTH_PROCESS && !exec_err && v->rs != RS_READY) {
		v->rs = RS_READY;
		free(v->rerr);
		v->rerr = NULL;
	}
}

/* Ask for the service to run (again): ensure, start, restart. */
static void want_start(struct pisb_services *s, struct svc *v, int timeout_ms)
{
	int64_t now = pisb_mono_ms();

	v->want = true;
	if (v->ps == PS_RUNNING || v->ps == PS_BACKOFF || v->ps == PS_WAITING) {
		/* ensure: never replace a live process */
		if (v->rs == RS_FAILED) {
			/* watch it again, with a fresh deadline */
			v->rs = RS_PENDING;
			v->rdeadline = now + timeout_ms;
		}
		return;
	}
	v->rs = RS_PENDING;
	v->rdeadline = now + timeout_ms;
	free(v->rerr);
	v->rerr = NULL;
	set_str(&v->why, NULL);
	if (v->ps == PS_STOPPING) {
		v->restart_now = true;
		return;
	}
	v->ps = PS_WAITING;
	s->changed = true;
}

static void stop_svc(struct pisb_services *s, struct svc *v, bool keep_wanted)
{
	v->want = keep_wanted;
	v->restart_now = keep_wanted;
	probe_end(v);
	if (v->pid > 0) {
		if (v->ps != PS_STOPPING) {
			kill(-v->pid, SIGTERM);
			log_line(s, v, "stopping '%s' (TERM to process group %d)", v->name, (int)v->pid);
			v->ps = PS_STOPPING;
			v->kill_at = pisb_mono_ms() + STOP_GRACE_MS;
		}
	} else {
		v->ps = keep_wanted ? PS_WAITING : PS_STOPPED;
	}
	v->rs = keep_wanted ? RS_PENDING : RS_NONE;
	if (keep_wanted)
		v->rdeadline = pisb_mono_ms() + v->timeout_ms;
	free(v->rerr);
	v->rerr = NULL;
	s->changed = true;
}

void pisb_services_reaped(struct pisb_services *s, pid_t pid, int status)
{
	int64_t now = pisb_mono_ms();

	if (pid == pisb_netns_pid(&s->ns)) {
		pisb_netns_reaped(&s->ns, pid);
		return;
	}
	for (size_t i = 0; i < s->n; i++) {
		struct svc *v = s->v[i];
		int code;

		if (v->pid != pid)
			continue;
		/* a foreground command: what it left behind goes with it */
		kill(-pid, SIGKILL);
		code = pisb_wait_code(status);
		v->pid = 0;
		v->exits++;
		v->last_code = code;
		probe_end(v);
		/* what it wrote before it ended comes before the line saying so */
		if (v->out_r >= 0)
			drain_out(s, v);
		if (v->ps == PS_STOPPING) {
			log_line(s, v, "'%s' stopped (status %d)", v->name, code);
			v->ps = PS_STOPPED;
			if (v->restart_now) {
				v->restart_now = false;
				v->ps = PS_WAITING;
			}
		} else if (v->want) {
			log_line(s, v, "'%s' exited with status %d; restarting in 1 s", v->name, code);
			if (v->rs == RS_READY) {
				v->rs = RS_PENDING;
				v->rdeadline = now + v->timeout_ms;
			}
			set_why(v, "it exited with status %d", code);
			v->ps = PS_BACKOFF;
			v->restart_at = now + RESTART_DELAY_MS;
			v->restarts++;
		} else {
			v->ps = PS_STOPPED;
		}
		s->changed = true;
		return;
	}
}

/* ---------- readiness ---------- */

static void set_ready(struct pisb_services *s, struct svc *v)
{
	probe_end(v);
	if (v->rs == RS_READY)
		return;
	v->rs = RS_READY;
	free(v->rerr);
	v->rerr = NULL;
	set_str(&v->why, NULL);
	log_line(s, v, "'%s' is ready (%s check, %lld ms after start)", v->name, health_name(v->health),
		 (long long)(pisb_mono_ms() - v->started));
	s->changed = true;
}

static int64_t probe_interval(const struct svc *v, int64_t now)
{
	if (v->rs == RS_FAILED)
		return PROBE_FAILED_MS;
	return now - v->started < 2000 ? PROBE_FAST_MS : PROBE_MS;
}

static void probe_connected(struct pisb_services *s, struct svc *v)
{
	char req[512];
	int n;

	if (v->health != PISB_HEALTH_HTTP) {
		set_ready(s, v);
		return;
	}
	n = snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nUser-Agent: pisb-health\r\n"
		     "Accept: */*\r\nConnection: close\r\n\r\n", v->health_path, v->port);
	if (n >= (int)sizeof(req) || send(v->pfd, req, (size_t)n, MSG_NOSIGNAL) != n) {
		set_why(v, "could not send the health check GET %s", v->health_path);
		probe_end(v);
		v->probe_at = pisb_mono_ms() + PROBE_HTTP_MS;
		return;
	}
	v->pphase = PR_READING;
	v->plen = 0;
	v->pdeadline = pisb_mono_ms() + PROBE_TIMEOUT_MS;
}

static void probe_start(struct pisb_services *s, struct svc *v)
{
	struct pisb_err e = PISB_ERR_INIT;
	bool pending = false;
	int64_t now = pisb_mono_ms();

	/* previews connect the same way (127.0.0.1, else ::1) */
	v->pfd = s->ops->connect(s->ctx, 0, v->port, &pending, &v->family, &e);
	if (v->pfd < 0) {
		set_why(v, "nothing accepts connections on port %d", v->port);
		v->probe_at = now + probe_interval(v, now);
		return;
	}
	if (pending) {
		v->pphase = PR_CONNECTING;
		v->pdeadline = now + PROBE_TIMEOUT_MS;
		return;
	}
	probe_connected(s, v);
}

static void probe_event(struct pisb_services *s, struct svc *v)
{
	int64_t now = pisb_mono_ms();

	if (v->pphase == PR_CONNECTING) {
		int err = s->ops->connect_done(s->ctx, v->pfd);
		if (err == EINPROGRESS)
			return;
		if (err) {
			set_why(v, "connecting to port %d: %s", v->port, strerror(err));
			probe_end(v);
			v->probe_at = now + probe_interval(v, now);
			return;
		}
		probe_connected(s, v);
		return;
	}
	for (;;) {
		ssize_t r = read(v->pfd, v->pbuf + v->plen, sizeof(v->pbuf) - 1 - v->plen);
		char *eol;
		int code;

		if (r < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		if (r > 0)
			v->plen += (size_t)r;
		v->pbuf[v->plen] = '\0';
		eol = strchr(v->pbuf, '\n');
		if (!eol && r > 0 && v->plen < sizeof(v->pbuf) - 1)
			continue;
		if (sscanf(v->pbuf, "HTTP/1.%*d %d", &code) == 1 && code >= 100) {
			if (code >= 200 && code < 400) {
				set_ready(s, v);
				return;
			}
			set_why(v, "the health check GET %s answered %d", v->health_path, code);
		} else {
			set_why(v, "the health check GET %s got no HTTP answer", v->health_path);
		}
		probe_end(v);
		v->probe_at = now + PROBE_HTTP_MS;
		return;
	}
}

/* ---------- status JSON ---------- */

static const char *state_name(const struct svc *v)
{
	if (v->kind == K_LINK)
		return "linked";
	if (!v->enabled)
		return "disabled";
	switch (v->ps) {
	case PS_WAITING: return "waiting";
	case PS_RUNNING: return v->rs == RS_READY ? "running" : "starting";
	case PS_BACKOFF: return "restarting";
	case PS_STOPPING: return "stopping";
	default: return "stopped";
	}
}

static const char *ready_name(const struct svc *v)
{
	switch (v->rs) {
	case RS_PENDING: return "pending";
	case RS_READY: return "ready";
	case RS_FAILED: return "failed";
	default: return NULL;
	}
}

/* pid inside the sandbox (NSpid's last field) */
static long inner_pid(void *ctx, pid_t pid)
{
	(void)ctx;
	char path[64];
	_cleanup_buf_ struct pisb_buf b = PISB_BUF_INIT;
	const char *l;
	long last = -1;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	if (pisb_read_file_at(AT_FDCWD, path, &b, 65536) < 0 || !(l = strstr(b.s, "\nNSpid:")))
		return -1;
	l += 7;
	while (*l && *l != '\n') {
		char *end;
		long v = strtol(l, &end, 10);
		if (end == l)
			break;
		last = v;
		l = end;
	}
	return last;
}

/* Ports of services no longer declared stay in services.json (sticky if
 * they come back), but such a service is not shown unless it still runs. */
static bool visible(const struct svc *v)
{
	return v->kind != K_YAML || v->declared || v->pid > 0 || v->ps != PS_STOPPED;
}

static const char *svc_error(const struct svc *v)
{
	return v->rerr ? v->rerr : v->spawn_err ? v->spawn_err : v->lerr;
}

static void svc_json(const struct pisb_services *s, const struct svc *v, struct pisb_jw *w)
{
	_cleanup_free_ char *url = user_url(s, public_url(v));
	_cleanup_free_ char *log = xasprintf("logs/%s.log", v->name);

	pisb_jw_obj(w);
	pisb_jw_kstr(w, "name", v->name);
	pisb_jw_kstr(w, "kind", v->kind == K_YAML ? "yaml" : v->kind == K_ADHOC ? "adhoc" : "link");
	pisb_jw_kstr(w, "state", state_name(v));
	pisb_jw_key(w, "pid");
	if (v->pid > 0) {
		long ip = s->ops->inner_pid ? s->ops->inner_pid(s->ctx, v->pid) : 0;
		if (ip > 0)
			pisb_jw_int(w, ip);
		else if (ip < 0)
			pisb_jw_int(w, v->pid);
		else   /* not known (yet) */
			pisb_jw_null(w);
	} else {
		pisb_jw_null(w);
	}
	pisb_jw_key(w, "hostPid");
	if (v->pid > 0)
		pisb_jw_int(w, v->pid);
	else
		pisb_jw_null(w);
	pisb_jw_key(w, "port");
	if (v->port)
		pisb_jw_int(w, v->port);
	else
		pisb_jw_null(w);
	pisb_jw_key(w, "hostPort");
	if (v->preview && v->host_port)
		pisb_jw_int(w, v->host_port);
	else
		pisb_jw_null(w);
	pisb_jw_kstr(w, "url", url);
	pisb_jw_kint(w, "restarts", v->restarts);
	pisb_jw_kbool(w, "ready", v->rs == RS_READY);
	pisb_jw_kstr(w, "readiness", ready_name(v));
	pisb_jw_kstr(w, "health", health_name(v->health));
	if (v->health == PISB_HEALTH_HTTP)
		pisb_jw_kstr(w, "healthPath", v->health_path);
	pisb_jw_kstr(w, "command", v->command);
	pisb_jw_kbool(w, "declared", v->kind != K_YAML || v->declared);
	pisb_jw_kstr(w, "error", svc_error(v));
	pisb_jw_kstr(w, "log", v->kind == K_LINK ? NULL : log);
	pisb_jw_obj_end(w);
}

static void previews_json(const struct pisb_services *s, struct pisb_jw *w)
{
	pisb_jw_arr(w);
	for (size_t i = 0; i < s->n; i++) {
		const struct svc *v = s->v[i];
		_cleanup_free_ char *base = public_url(v);

		if (!v->preview || !v->enabled || !visible(v))
			continue;
		for (size_t k = 0; k < v->nlinks; k++) {
			const struct pisb_link *l = &v->links[k];
			_cleanup_free_ char *url = NULL;
			bool own = !l->url || l->url[0] == '/';

			if (!l->url)
				url = user_url(s, xasprintf("%s/", base));
			else if (l->url[0] == '/')
				url = user_url(s, xasprintf("%s%s", base, l->url));
			else
				url = xstrdup(l->url);
			pisb_jw_obj(w);
			pisb_jw_kstr(w, "service", v->name);
			pisb_jw_kstr(w, "url", url);
			pisb_jw_kstr(w, "title", l->title ? l->title : v->name);
			pisb_jw_kstr(w, "description", l->description);
			pisb_jw_kstr(w, "folder", l->folder);
			pisb_jw_key(w, "hostPort");
			if (own)
				pisb_jw_int(w, v->host_port);
			else
				pisb_jw_null(w);
			pisb_jw_kstr(w, "error", own ? v->lerr : NULL);
			pisb_jw_obj_end(w);
		}
	}
	pisb_jw_arr_end(w);
}

char *pisb_services_status_json(struct pisb_services *s)
{
	struct pisb_buf b = PISB_BUF_INIT;
	struct pisb_jw w;

	pisb_jw_init(&w, &b);
	pisb_jw_arr(&w);
	for (size_t i = 0; i < s->n; i++)
		if (visible(s->v[i]))
			svc_json(s, s->v[i], &w);
	pisb_jw_arr_end(&w);
	return pisb_buf_detach(&b);
}

char *pisb_services_previews_json(struct pisb_services *s)
{
	struct pisb_buf b = PISB_BUF_INIT;
	struct pisb_jw w;

	pisb_jw_init(&w, &b);
	previews_json(s, &w);
	return pisb_buf_detach(&b);
}

void pisb_services_guest_config(struct pisb_services *s, struct pisb_buf *text, int err)
{
	pisb_buf_release(&s->guest_text);
	s->guest_text = *text;
	*text = (struct pisb_buf)PISB_BUF_INIT;
	s->guest_err = err;
	s->guest_given = true;
}

void pisb_services_on_change(struct pisb_services *s, void (*fn)(void *arg), void *arg)
{
	s->on_change = fn;
	s->on_change_arg = arg;
}

PISB_IDLE_PATH bool pisb_services_changed(struct pisb_services *s)
{
	bool c = s->changed;
	s->changed = false;
	return c;
}

/* ---------- waiters: deferred replies ---------- */

static void reply_line(int fd, struct pisb_buf *b)
{
	pisb_buf_addc(b, '\n');
	pisb_write_all(fd, b->s, b->len);
}

/* {"ok":..,"services":[names..],"previews":[..]}; after a removal
 * {"ok":true,"removed":NAME,"services":[],"previews":[..]} */
static void reply_list(struct pisb_services *s, int fd, char **names, size_t n,
		       int code, const char *err, const char *removed)
{
	struct pisb_buf b = PISB_BUF_INIT;
	struct pisb_jw w;

	/* what the reply says is done is on the record first: a client that
	 * reads status.json (pisb inspect) right after sees it */
	if (s->changed && s->on_change) {
		s->changed = false;
		s->on_change(s->on_change_arg);
	}

	pisb_jw_init(&w, &b);
	pisb_jw_obj(&w);
	pisb_jw_kbool(&w, "ok", !err);
	if (err) {
		pisb_jw_kint(&w, "code", code);
		pisb_jw_kstr(&w, "error", err);
	}
	if (removed)
		pisb_jw_kstr(&w, "removed", removed);
	pisb_jw_key(&w, "services");
	pisb_jw_arr(&w);
	for (size_t i = 0; i < n && !removed; i++) {
		struct svc *v = find(s, names[i]);
		if (v)
			svc_json(s, v, &w);
	}
	pisb_jw_arr_end(&w);
	pisb_jw_key(&w, "previews");
	previews_json(s, &w);
	pisb_jw_obj_end(&w);
	reply_line(fd, &b);
	pisb_buf_release(&b);
}

static void reply_services(struct pisb_services *s, int fd, char **names, size_t n,
			   int code, const char *err)
{
	reply_list(s, fd, names, n, code, err, NULL);
}

static void reply_error(int fd, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void reply_error(int fd, int code, const char *fmt, ...)
{
	struct pisb_buf b = PISB_BUF_INIT;
	struct pisb_jw w;
	char msg[2048];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	pisb_jw_init(&w, &b);
	pisb_jw_obj(&w);
	pisb_jw_kbool(&w, "ok", false);
	pisb_jw_kint(&w, "code", code);
	pisb_jw_kstr(&w, "error", msg);
	pisb_jw_obj_end(&w);
	reply_line(fd, &b);
	pisb_buf_release(&b);
}

static bool settled(const struct svc *v, int mode)
{
	if (mode == W_REMOVED)
		return false;   /* until it is forgotten: find() fails */
	if (mode == W_STOPPED)
		return v->ps == PS_STOPPED;
	if (v->kind == K_LINK || !v->enabled || !v->want)
		return true;
	return v->rs == RS_READY || v->rs == RS_FAILED;
}

static char *failure_of(const struct pisb_services *s, const struct svc *v)
{
	if (v->rs == RS_FAILED)
		return xasprintf("service '%s' is not ready: %s (see 'pisb logs %s %s')", v->name,
				 v->rerr ? v->rerr : "readiness failed", s->name, v->name);
	return NULL;
}

static void check_waiters(struct pisb_services *s)
{
	struct waiter **pw = &s->waiters, *w;

	while ((w = *pw)) {
		bool done = true;
		struct pisb_buf err = PISB_BUF_INIT;

		for (size_t i = 0; i < w->n && done; i++) {
			struct svc *v = find(s, w->names[i]);
			done = !v || settled(v, w->mode);
		}
		if (!done) {
			pw = &w->next;
			continue;
		}
		for (size_t i = 0; i < w->n && w->mode == W_READY; i++) {
			struct svc *v = find(s, w->names[i]);
			_cleanup_free_ char *f = v ? failure_of(s, v) : NULL;
			if (f) {
				if (err.len)
					pisb_buf_adds(&err, "; ");
				pisb_buf_adds(&err, f);
			}
		}
		reply_list(s, w->fd, w->names, w->n, PISB_EXIT_FAIL, err.len ? err.s : NULL,
			   w->mode == W_REMOVED ? w->names[0] : NULL);
		pisb_buf_release(&err);
		close(w->fd);
		strv_free(w->names, w->n);
		*pw = w->next;
		free(w);
	}
}

static void add_waiter(struct pisb_services *s, int fd, int mode, struct svc **list, size_t n)
{
	struct waiter *w = xcalloc(1, sizeof(*w));

	w->fd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
	w->mode = mode;
	w->names = xcalloc(n + 1, sizeof(char *));
	for (size_t i = 0; i < n; i++)
		w->names[i] = xstrdup(list[i]->name);
	w->n = n;
	if (w->fd < 0) {
		strv_free(w->names, w->n);
		free(w);
		reply_error(fd, PISB_EXIT_FAIL, "out of file descriptors");
		return;
	}
	w->next = s->waiters;
	s->waiters = w;
	check_waiters(s);
}

/* ---------- the timers ---------- */

static bool deps_settled(struct pisb_services *s, const struct svc *v)
{
	for (size_t i = 0; i < v->ndepends; i++) {
		const struct svc *d = find(s, v->depends[i]);
		if (d && d->want && d->enabled && d->rs != RS_READY && d->rs != RS_FAILED)
			return false;
	}
	return true;
}

/* Forget the removed services whose process is gone. */
static void sweep_removed(struct pisb_services *s)
{
	size_t k = 0;

	for (size_t i = 0; i < s->n; i++) {
		struct svc *v = s->v[i];

		if (v->removed && v->pid <= 0) {
			pisb_svc_log("services: '%s' removed", v->name);
			pisb_relay_close_tag(s->relay, v);
			if (s->gate)
				pisb_gate_drop_tag(s->gate, v);
			svc_free(v);
			s->changed = true;
		} else {
			s->v[k++] = v;
		}
	}
	s->n = k;
}

static void tick(struct pisb_services *s)
{
	int64_t now = pisb_mono_ms();

	sweep_removed(s);
	for (size_t i = 0; i < s->n; i++) {
		struct svc *v = s->v[i];

		if (v->kind == K_LINK)
			continue;
		if (v->ps == PS_WAITING && deps_settled(s, v)) {
			struct pisb_err e = PISB_ERR_INIT;
			if (assign_port(s, v, &e) < 0) {
				v->ps = PS_STOPPED;
				v->want = false;
				v->rs = RS_FAILED;
				set_str(&v->rerr, e.msg);
				pisb_svc_log("service '%s': %s", v->name, e.msg);
				s->changed = true;
				continue;
			}
			open_listener(s, v);
			spawn(s, v);
		} else if (v->ps == PS_BACKOFF && now >= v->restart_at) {
			spawn(s, v);
		} else if (v->ps == PS_STOPPING && v->kill_at && now >= v->kill_at && v->pid > 0) {
			kill(-v->pid, SIGKILL);
			kill(v->pid, SIGKILL);
			v->kill_at = 0;
		}
		if (v->ps == PS_RUNNING && v->rs != RS_READY && v->pfd < 0 && now >= v->probe_at &&
		    v->health != PISB_HEALTH_PROCESS)
			probe_start(s, v);
		if (v->pfd >= 0 && now >= v->pdeadline) {
			set_why(v, "the health check got no answer within %d ms", PROBE_TIMEOUT_MS);
			probe_end(v);
			v->probe_at = now + PROBE_HTTP_MS;
		}
		if (v->rs == RS_PENDING && now >= v->rdeadline) {
			v->rs = RS_FAILED;
			free(v->rerr);
			if (v->exits && v->pid <= 0)
				v->rerr = xasprintf("not ready within %d ms: it exited %d time%s, last with status %d",
						    v->timeout_ms, v->exits, v->exits == 1 ? "" : "s", v->last_code);
			else
				v->rerr = xasprintf("not ready within %d ms: %s", v->timeout_ms,
						    v->why ? v->why : v->spawn_err ? v->spawn_err : "no answer");
			pisb_svc_log("service '%s' is %s", v->name, v->rerr);
			log_line(s, v, "'%s' is %s", v->name, v->rerr);
			s->changed = true;
		}
	}
	for (size_t i = 0; i < s->n; i++) {
		struct svc *v = s->v[i];
		/* drops are said even when nothing more comes */
		if (pisb_bucket_note_due(&v->out_bucket))
			note_dropped(s, v);
	}
	check_waiters(s);
}

static void lower(int *timeout, int64_t at, int64_t now)
{
	int64_t left = at - now;
	if (left < 0)
		left = 0;
	if (*timeout < 0 || left < *timeout)
		*timeout = (int)left;
}

/* ---------- previews: accepting ---------- */

/* A preview's connect failed: maybe the server moved from 127.0.0.1 to
 * ::1 or back; find out, for the next connection. */
static void redetect_family(void *arg, const void *tag)
{
	struct pisb_services *s = arg;
	struct pisb_err e = PISB_ERR_INIT;
	bool pending;

	for (size_t i = 0; i < s->n; i++) {
		struct svc *v = s->v[i];
		int fd;

		if (v != tag || !v->port)
			continue;
		fd = s->ops->connect(s->ctx, 0, v->port, &pending, &v->family, &e);
		if (fd >= 0)
			close(fd);
		return;
	}
}

/* Relay a (accepted on v's preview port) to the service; head: bytes
 * already read from a (the gate's), sent to the service first. */
static void relay_preview(struct pisb_services *s, struct svc *v, int a, const char *head, size_t hlen)
{
	struct pisb_err e = PISB_ERR_INIT;
	struct pisb_relay_opts o;
	bool pending = false;
	int b;
	_cleanup_free_ char *body = NULL, *msg = NULL;

	body = xasprintf("pisb: nothing accepts connections on port %d in sandbox '%s' "
			 "(service '%s' is %s; see 'pisb logs %s %s')\n", v->port, s->name, v->name,
			 state_name(v), s->name, v->name);
	msg = xasprintf("HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/plain; charset=utf-8\r\n"
			"Connection: close\r\nContent-Length: %zu\r\n\r\n%s", strlen(body), body);
	if (v->port && s->ops->stream && s->ops->stream(s->ctx, a, v->port, head, hlen) == 0)
		return;
	b = v->port ? s->ops->connect(s->ctx, v->family, v->port, &pending, NULL, &e) : -1;
	if (b < 0 && v->port) {
		redetect_family(s, v);
		b = s->ops->connect(s->ctx, v->family, v->port, &pending, NULL, &e);
	}
	if (b < 0) {
		pisb_relay_reject(s->relay, a, msg, strlen(msg), v);
		return;
	}
	memset(&o, 0, sizeof(o));
	o.b_connecting = pending;
	o.fail = msg;
	o.tag = v;
	o.on_fail = redetect_family;
	o.arg = s;
	o.to_b = head;
	o.to_b_len = hlen;
	pisb_relay_add(s->relay, a, b, &o);
}

static void gate_admit(void *arg, void *tag, int fd, const char *head, size_t len)
{
	struct pisb_services *s = arg;

	for (size_t i = 0; i < s->n; i++)
		if (s->v[i] == tag) {
			relay_preview(s, s->v[i], fd, head, len);
			return;
		}
	close(fd);
}

static void accept_preview(struct pisb_services *s, struct svc *v)
{
	for (int k = 0; k < 64; k++) {
		int a = accept4(v->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		int one = 1;

		if (a < 0) {
			if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
				s->accept_pause_until = pisb_mono_ms() + 100;
			return;
		}
		setsockopt(a, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		if (s->gate)
			/* the token first: nothing reaches the service before it */
			pisb_gate_add(s->gate, a, s->token, v->host_port, v);
		else
			relay_preview(s, v, a, NULL, 0);
	}
}

PISB_IDLE_PATH
int pisb_services_pollfds(struct pisb_services *s, struct pollfd *p, int max,
			  int *timeout_ms)
{
	int n = 0;
	/* the clock, where something may be due: a controller with no
	 * service and no pause (idle) reads none, nor faults in the C
	 * library's page of clock_gettime after its idle trim (ctllog.c) */
	int64_t now = s->n || s->accept_pause_until ? pisb_mono_ms() : 0;
	bool paused = now < s->accept_pause_until;

	if (paused)
		lower(timeout_ms, s->accept_pause_until, now);
	for (size_t i = 0; i < s->n; i++) {
		struct svc *v = s->v[i];

		v->lidx = v->pidx = v->oidx = -1;
		/* (also lowers the timeout for a note of drops still due) */
		bool out_ready = pisb_bucket_poll(&v->out_bucket, timeout_ms);

		if (v->out_r >= 0 && n < max && out_ready) {
			p[n] = (struct pollfd){ v->out_r, POLLIN, 0 };
			v->oidx = n++;
		}
		if (v->lfd >= 0 && !paused && n < max) {
			p[n] = (struct pollfd){ v->lfd, POLLIN, 0 };
			v->lidx = n++;
		}
		if (v->pfd >= 0 && n < max) {
			p[n] = (struct pollfd){ v->pfd, v->pphase == PR_CONNECTING ? s->ops->connect_events : POLLIN, 0 };
			v->pidx = n++;
			lower(timeout_ms, v->pdeadline, now);
		}
		if (v->kind == K_LINK)
			continue;
		if (v->ps == PS_BACKOFF)
			lower(timeout_ms, v->restart_at, now);
		if (v->ps == PS_STOPPING && v->kill_at)
			lower(timeout_ms, v->kill_at, now);
		if (v->ps == PS_RUNNING && v->rs != RS_READY && v->pfd < 0 &&
		    v->health != PISB_HEALTH_PROCESS)
			lower(timeout_ms, v->probe_at, now);
		if (v->rs == RS_PENDING)
			lower(timeout_ms, v->rdeadline, now);
		if (v->ps == PS_WAITING)
			lower(timeout_ms, now + 50, now);
	}
	s->proxy_off = n;
	if (s->proxy)
		n += pisb_proxy_pollfds(s->proxy, p + n, max - n, timeout_ms);
	s->gate_off = n;
	if (s->gate)
		n += pisb_gate_pollfds(s->gate, p + n, max - n, timeout_ms);
	s->relay_off = n;
	n += pisb_relay_pollfds(s->relay, p + n, max - n, timeout_ms);
	s->nfds = n;
	return n;
}

PISB_IDLE_PATH void pisb_services_poll(struct pisb_services *s, struct pollfd *p, size_t n)
{
	if ((int)n > s->nfds)
		n = (size_t)s->nfds;
	/* relays first: they have bytes waiting */
	if ((int)n > s->relay_off)
		pisb_relay_poll(s->relay, p + s->relay_off, (int)n - s->relay_off);
	if (s->proxy && (int)n > s->proxy_off)
		pisb_proxy_poll(s->proxy, p + s->proxy_off, s->gate_off - s->proxy_off);
	if (s->gate && (int)n > s->gate_off)
		pisb_gate_poll(s->gate, p + s->gate_off, s->relay_off - s->gate_off);
	for (size_t i = 0; i < s->n; i++) {
		struct svc *v = s->v[i];

		if (v->oidx >= 0 && (size_t)v->oidx < n && p[v->oidx].fd == v->out_r && p[v->oidx].revents)
			drain_out(s, v);
		if (v->pidx >= 0 && (size_t)v->pidx < n && p[v->pidx].fd == v->pfd &&
		    (p[v->pidx].revents || v->pphase == PR_CONNECTING))
			probe_event(s, v);
		if (v->lidx >= 0 && (size_t)v->lidx < n && p[v->lidx].fd == v->lfd && p[v->lidx].revents)
			accept_preview(s, v);
	}
	tick(s);
}

/* ---------- lifecycle ---------- */

char *pisb_preview_token(int idir)
{
	struct pisb_buf b = PISB_BUF_INIT;
	struct pisb_err ig = PISB_ERR_INIT;
	char hex[33];

	if (pisb_read_file_at(idir, "preview.token", &b, 128) == 0 && b.len >= 32) {
		char *t = xstrndup(b.s, 32);
		pisb_buf_release(&b);
		return t;
	}
	pisb_buf_release(&b);
	pisb_random_hex(hex, 32);
	if (pisb_atomic_write(idir, "preview.token", hex, 32, 0600, &ig) < 0) {
		errno = ig.errnum ? ig.errnum : EIO;
		return NULL;
	}
	return xstrdup(hex);
}

/* ---------- the local driver's operations (namespaces) ---------- */

static pid_t local_spawn(void *ctx, const char *command, char *const *extra, size_t nextra,
			 const char *cwd0, int out_fd, int *exec_err, struct pisb_err *e)
{
	struct pisb_services *s = ctx;
	_cleanup_strv_ struct pisb_strv env = PISB_STRV_INIT;
	_cleanup_free_ char *cwd = pisb_sandbox_cwd(s->cfg, cwd0);
	char *argv[] = { "/bin/sh", "-lc", (char *)command, NULL };
	struct pisb_spawn sp;

	pisb_sandbox_env(s->cfg, NULL, (char **)extra, nextra, &env);
	memset(&sp, 0, sizeof(sp));
	sp.rt = s->rt;
	sp.argv = argv;
	sp.envp = env.v;
	sp.cwd = cwd;
	sp.stdin_fd = -1;
	sp.stdout_fd = out_fd;
	sp.stderr_fd = out_fd;
	sp.new_session = true;
	return pisb_local_spawn(&sp, exec_err, e);
}

static int local_connect(void *ctx, int family, int port, bool *pending, int *family_out,
			 struct pisb_err *e)
{
	struct pisb_services *s = ctx;
	int fd;

	if (family)
		return pisb_netns_connect_fast(&s->ns, family, port, pending, e);
	fd = pisb_netns_connect(&s->ns, port, pending, e);
	if (fd >= 0 && family_out)
		*family_out = pisb_netns_last_family(&s->ns);
	return fd;
}

static int local_connect_done(void *ctx, int fd)
{
	int err = 0;
	socklen_t l = sizeof(err);

	(void)ctx;
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &l) < 0)
		err = errno;
	return err;
}

static int local_port_free(void *ctx, int port, struct pisb_err *e)
{
	return pisb_netns_port_free(&((struct pisb_services *)ctx)->ns, port, e);
}

static int local_proxy_listen(void *ctx, int port, struct pisb_err *e)
{
	return pisb_netns_listen(&((struct pisb_services *)ctx)->ns, port, e);
}

static const struct pisb_svc_ops local_ops = {
	.spawn = local_spawn,
	.connect = local_connect,
	.connect_done = local_connect_done,
	.connect_events = POLLOUT,
	.port_free = local_port_free,
	.inner_pid = inner_pid,
	.read_config = load_guest,
	.proxy_listen = local_proxy_listen,
};

struct pisb_services *pisb_services_new(struct pisb_state *st, int idir,
					const char *name,
					const struct pisb_config *cfg,
					const struct pisb_runtime *rt)
{
	struct pisb_services *s = pisb_services_new_ops(st, idir, name, cfg, &local_ops, NULL);

	s->ctx = s;
	s->rt = rt;
	pisb_netns_init(&s->ns, rt->init.pid, rt->init.start);
	return s;
}

struct pisb_services *pisb_services_new_ops(struct pisb_state *st, int idir, const char *name,
					    const struct pisb_config *cfg,
					    const struct pisb_svc_ops *ops, void *ctx)
{
	struct pisb_services *s = xcalloc(1, sizeof(*s));
	struct rlimit rl;

	/* a peer that goes away must not kill the controller */
	signal(SIGPIPE, SIG_IGN);
	/* every relayed connection takes six fds (two sockets, two pipes) */
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max > 16384 ? 16384 : rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	s->st = st;
	s->idir = idir;
	s->name = xstrdup(name);
	s->cfg = cfg;
	s->ops = ops;
	s->ctx = ctx;
	s->relay = pisb_relay_new();
	if (cfg->preview_token) {
		s->token = pisb_preview_token(idir);
		if (s->token)
			s->gate = pisb_gate_new(s->relay, gate_admit, s);
		else   /* fail closed: previews stay shut */
			pisb_svc_log("previews: no token (preview.auth: token): %s; previews are off", strerror(errno));
	}
	load_persisted(s);
	return s;
}

static void start_proxy(struct pisb_services *s)
{
	struct pisb_err e = PISB_ERR_INIT;
	int lfd;

	if (!s->cfg->nallowed_hosts || s->proxy)
		return;
	/* a driver without a listener of its own hands the sandbox's
	 * connections in (pisb_services_proxy, pisb_proxy_take: vm) */
	lfd = s->ops->proxy_listen ? s->ops->proxy_listen(s->ctx, PISB_PROXY_PORT, &e) : -1;
	if (s->ops->proxy_listen && lfd < 0) {
		set_str(&s->proxy_err, e.msg);
		pisb_svc_log("egress: no proxy: %s", e.msg);
		return;
	}
	s->proxy = pisb_proxy_new(lfd, s->cfg->allowed_hosts, s->cfg->nallowed_hosts, s->name, s->relay);
	pisb_svc_log("egress: proxy on 127.0.0.1:%d in the sandbox for %zu allowed host%s",
		     PISB_PROXY_PORT, s->cfg->nallowed_hosts, s->cfg->nallowed_hosts == 1 ? "" : "s");
}

void pisb_services_start_proxy(struct pisb_services *s)
{
	start_proxy(s);
}

struct pisb_proxy *pisb_services_proxy(struct pisb_services *s)
{
	return s->proxy;
}

/* The services to act on: one by name, or the declared ones. */
static size_t targets(struct pisb_services *s, const char *name, bool with_adhoc,
		      struct svc ***out)
{
	size_t n = 0;

	*out = xcalloc(s->n + 1, sizeof(struct svc *));
	for (size_t i = 0; i < s->n; i++) {
		struct svc *v = s->v[i];
		if (v->removed)
			continue;
		if (name ? !strcmp(v->name, name)
			 : (v->kind == K_YAML && v->declared && v->enabled) ||
			   (with_adhoc && v->kind == K_ADHOC && v->want))
			(*out)[n++] = v;
	}
	return n;
}

/* Load the guest's config (falling back to the record's) and apply it. */
static int refresh_config(struct pisb_services *s, struct pisb_err *e)
{
	struct pisb_config *g = NULL;

	if (s->ops->read_config && s->ops->read_config(s->ctx, &g, e) < 0)
		return -1;
	apply_config(s, g ? g : s->cfg);
	if (g)
		pisb_config_free(g);
	return 0;
}

/* What a start of the sandbox starts: the proxy, the previews, the
 * declared services and the ad-hoc ones wanted; the targets in *t. */
static size_t begin_all(struct pisb_services *s, struct svc ***t)
{
	struct pisb_err ce = PISB_ERR_INIT;
	size_t n;

	s->started = true;
	if (refresh_config(s, &ce) < 0) {
		pisb_svc_log("services: %s; using the services of the sandbox's creation config", ce.msg);
		apply_config(s, s->cfg);
	}
	start_proxy(s);
	/* previews of links and ad-hoc services come back too */
	for (size_t i = 0; i < s->n; i++) {
		struct svc *v = s->v[i];
		if (v->kind == K_LINK)
			open_listener(s, v);
		else if (v->kind == K_ADHOC && v->want)
			want_start(s, v, v->timeout_ms);
	}
	n = targets(s, NULL, true, t);
	for (size_t i = 0; i < n; i++)
		open_listener(s, (*t)[i]);
	for (size_t i = 0; i < n; i++)
		want_start(s, (*t)[i], (*t)[i]->timeout_ms);
	if (n)
		pisb_svc_log("services: starting %zu service%s", n, n == 1 ? "" : "s");
	tick(s);
	return n;
}

void pisb_services_begin(struct pisb_services *s, int fd)
{
	_cleanup_free_ struct svc **t = NULL;
	size_t n = begin_all(s, &t);

	add_waiter(s, fd, W_READY, t, n);
}

bool pisb_services_owns(const struct pisb_services *s, pid_t pid)
{
	for (size_t i = 0; i < s->n; i++)
		if (pid > 0 && s->v[i]->pid == pid)
			return true;
	return false;
}

int pisb_services_start_all(struct pisb_services *s, struct pisb_err *e)
{
	_cleanup_free_ struct svc **t = NULL;
	struct pisb_buf err = PISB_BUF_INIT;
	size_t n = begin_all(s, &t);
	int64_t give_up;

	/* wait here until each is ready or failed: no client yet, and
	 * SIGCHLD is ours to watch for the services */
	give_up = pisb_mono_ms() + 130000;
	for (;;) {
		static struct pollfd p[PISB_SVC_MAX_FDS];
		bool all = true;
		int np, timeout = 50;

		for (size_t i = 0; i < n; i++)
			all &= settled(t[i], W_READY);
		if (all || pisb_mono_ms() > give_up)
			break;
		np = pisb_services_pollfds(s, p, PISB_SVC_MAX_FDS, &timeout);
		if (timeout > 50 || timeout < 0)
			timeout = 50;
		if (poll(p, (nfds_t)np, timeout) < 0 && errno != EINTR)
			break;
		for (size_t i = 0; i < s->n; i++) {
			int status;
			pid_t pid = s->v[i]->pid;
			if (pid > 0 && waitpid(pid, &status, WNOHANG) == pid)
				pisb_services_reaped(s, pid, status);
		}
		pisb_services_poll(s, p, (size_t)np);
	}
	for (size_t i = 0; i < n; i++) {
		_cleanup_free_ char *f = failure_of(s, t[i]);
		if (f) {
			if (err.len)
				pisb_buf_adds(&err, "; ");
			pisb_buf_adds(&err, f);
		}
	}
	s->changed = true;
	if (err.len) {
		pisb_err_set(e, PISB_EXIT_FAIL, "%s", err.s);
		pisb_buf_release(&err);
		return -1;
	}
	return 0;
}

bool pisb_services_any_process(const struct pisb_services *s)
{
	for (size_t i = 0; s && i < s->n; i++)
		if (s->v[i]->pid > 0)
			return true;
	return false;
}

void pisb_services_stop_all(struct pisb_services *s)
{
	int64_t deadline = pisb_mono_ms() + STOP_GRACE_MS;
	bool any = false;

	for (size_t i = 0; i < s->n; i++) {
		struct svc *v = s->v[i];
		probe_end(v);
		if (v->pid > 0) {
			kill(-v->pid, SIGTERM);
			log_line(s, v, "stopping '%s': the sandbox stops", v->name);
			any = true;
		}
	}
	while (any && pisb_mono_ms() < deadline) {
		struct timespec ts = { 0, 10 * 1000 * 1000 };
		any = false;
		for (size_t i = 0; i < s->n; i++) {
			struct svc *v = s->v[i];
			int status;
			if (v->pid > 0 && waitpid(v->pid, &status, WNOHANG) == v->pid) {
				kill(-v->pid, SIGKILL);
				v->pid = 0;
			}
			any |= v->pid > 0;
		}
		if (any)
			nanosleep(&ts, NULL);
	}
	for (size_t i = 0; i < s->n; i++) {
		struct svc *v = s->v[i];
		if (v->pid > 0) {
			kill(-v->pid, SIGKILL);
			kill(v->pid, SIGKILL);
			waitpid(v->pid, NULL, 0);
			v->pid = 0;
		}
		v->ps = PS_STOPPED;
		v->rs = RS_NONE;
		if (v->lfd >= 0)
			close(v->lfd);
		v->lfd = -1;
	}
	while (s->waiters) {
		struct waiter *w = s->waiters;
		s->waiters = w->next;
		reply_error(w->fd, PISB_EXIT_FAIL, "the sandbox is stopping");
		close(w->fd);
		strv_free(w->names, w->n);
		free(w);
	}
	pisb_proxy_free(s->proxy);
	s->proxy = NULL;
	pisb_relay_free(s->relay);
	s->relay = pisb_relay_new();
	pisb_netns_release(&s->ns);
	s->changed = true;
}

void pisb_services_free(struct pisb_services *s)
{
	if (!s)
		return;
	pisb_buf_release(&s->guest_text);
	for (size_t i = 0; i < s->n; i++)
		if (s->v[i]->pid > 0)
			kill(-s->v[i]->pid, SIGKILL);
	while (s->waiters) {
		struct waiter *w = s->waiters;
		s->waiters = w->next;
		close(w->fd);
		strv_free(w->names, w->n);
		free(w);
	}
	pisb_proxy_free(s->proxy);
	pisb_gate_free(s->gate);
	free(s->token);
	pisb_relay_free(s->relay);
	pisb_netns_release(&s->ns);
	for (size_t i = 0; i < s->n; i++)
		svc_free(s->v[i]);
	free(s->v);
	free(s->proxy_err);
	free(s->name);
	free(s);
}

/* ---------- requests ---------- */

static void op_status(struct pisb_services *s, const char *name, int fd)
{
	_cleanup_free_ struct svc **t = NULL;
	size_t n;

	if (name && !find(s, name)) {
		reply_error(fd, PISB_EXIT_NOTFOUND, "no service '%s' in sandbox '%s'", name, s->name);
		return;
	}
	t = xcalloc(s->n + 1, sizeof(*t));
	n = 0;
	for (size_t i = 0; i < s->n; i++)
		if (name ? !strcmp(s->v[i]->name, name) : visible(s->v[i]))
			t[n++] = s->v[i];
	{
		char **names = xcalloc(n + 1, sizeof(char *));
		for (size_t i = 0; i < n; i++)
			names[i] = t[i]->name;
		reply_services(s, fd, names, n, 0, NULL);
		free(names);
	}
}

static void op_ensure(struct pisb_services *s, const char *name, bool restart, int fd)
{
	struct pisb_err e = PISB_ERR_INIT;
	_cleanup_free_ struct svc **t = NULL;
	size_t n;

	if (refresh_config(s, &e) < 0) {
		reply_error(fd, e.code ? e.code : PISB_EXIT_FAIL, "%s", e.msg);
		return;
	}
	start_proxy(s);
	n = targets(s, name, restart, &t);
	if (name && !n) {
		reply_error(fd, PISB_EXIT_NOTFOUND, "no service '%s' in %s/.sandbox.yaml of sandbox '%s'",
			    name, s->cfg->workspace, s->name);
		return;
	}
	for (size_t i = 0; i < n; i++) {
		struct svc *v = t[i];

		if (v->kind == K_LINK || !v->enabled) {
			open_listener(s, v);
			continue;
		}
		/* previews first (their URLs go into other services' env); one
		 * that could not listen (its port was taken) tries again */
		open_listener(s, v);
		if (restart) {
			stop_svc(s, v, true);
			v->rs = RS_PENDING;
			v->rdeadline = pisb_mono_ms() + v->timeout_ms;
		} else {
			want_start(s, v, v->timeout_ms);
		}
	}
	persist(s);
	tick(s);
	add_waiter(s, fd, W_READY, t, n);
}

static void op_stop(struct pisb_services *s, const char *name, int fd)
{
	_cleanup_free_ struct svc **t = NULL;
	size_t n = targets(s, name, true, &t);

	if (name && !n) {
		reply_error(fd, PISB_EXIT_NOTFOUND, "no service '%s' in sandbox '%s'", name, s->name);
		return;
	}
	for (size_t i = 0; i < n; i++)
		if (t[i]->kind != K_LINK)
			stop_svc(s, t[i], false);
	persist(s);
	tick(s);
	add_waiter(s, fd, W_STOPPED, t, n);
}

static void op_start(struct pisb_services *s, const struct pisb_json *j, int fd)
{
	_cleanup_free_ char *name = jstr(j, 0, "service"), *cmd = jstr(j, 0, "command");
	_cleanup_free_ char *title = jstr(j, 0, "title"), *desc = jstr(j, 0, "description");
	long long port = jint(j, 0, "port", 0);
	long long deadline = jint(j, 0, "timeoutMs", ADHOC_TIMEOUT_MS);
	bool preview = jbool(j, 0, "preview");
	struct pisb_err e = PISB_ERR_INIT;
	struct svc *v;

	if (!name || !pisb_service_name_valid(name)) {
		reply_error(fd, PISB_EXIT_USAGE, "invalid service name '%s' (a-z 0-9 -, at most 32, not starting with -)",
			    name ? name : "");
		return;
	}
	if (!cmd || !*cmd) {
		reply_error(fd, PISB_EXIT_USAGE, "svc start %s: a command is required after --", name);
		return;
	}
	if (port < 0 || port > 65535) {
		reply_error(fd, PISB_EXIT_USAGE, "--port: must be 1-65535");
		return;
	}
	if (deadline < 100 || deadline > 120000) {
		reply_error(fd, PISB_EXIT_USAGE, "--timeout-ms: must be 100-120000");
		return;
	}
	{
		struct pisb_err ce = PISB_ERR_INIT;
		/* (a config it cannot read changes nothing here) */
		(void)refresh_config(s, &ce);
	}
	v = find(s, name);
	if (v && v->kind == K_YAML && v->declared) {
		reply_error(fd, PISB_EXIT_BUSY, "service '%s' is declared in %s/.sandbox.yaml: use 'pisb svc %s ensure|restart %s' "
			    "(ad-hoc services need a name of their own)", name, s->cfg->workspace, s->name, name);
		return;
	}
	if (v && v->kind == K_LINK) {
		reply_error(fd, PISB_EXIT_BUSY, "'%s' is a preview link, not a service", name);
		return;
	}
	if (v && v->removed) {
		reply_error(fd, PISB_EXIT_BUSY, "service '%s' is being removed; try again in a moment", name);
		return;
	}
	if (port) {
		for (size_t i = 0; i < s->n; i++) {
			struct svc *o = s->v[i];
			if (o != v && o->port == port && o->kind != K_LINK && (o->want || o->fixed_port)) {
				reply_error(fd, PISB_EXIT_BUSY, "port %lld is already the port of service '%s'", port, o->name);
				return;
			}
		}
	}
	if (!v)
		v = svc_new(s, name, K_ADHOC);
	v->kind = K_ADHOC;
	set_str(&v->command, cmd);
	v->health = PISB_HEALTH_TCP;
	v->timeout_ms = (int)deadline;
	if (port) {
		v->fixed_port = (int)port;
	} else if (v->fixed_port) {
		v->fixed_port = 0;
		v->port = 0;
	}
	v->preview = preview || v->preview;
	if (v->preview && (title || desc || !v->nlinks)) {
		links_release(v);
		add_link(v, NULL, title ? title : name, desc, NULL);
	}
	if (assign_port(s, v, &e) < 0) {
		reply_error(fd, e.code, "%s", e.msg);
		return;
	}
	open_listener(s, v);
	if (v->pid > 0 || v->ps != PS_STOPPED)
		stop_svc(s, v, true);
	else
		want_start(s, v, v->timeout_ms);
	persist(s);
	pisb_svc_log("services: ad-hoc '%s' on port %d: %s", name, v->port, cmd);
	tick(s);
	add_waiter(s, fd, W_READY, &v, 1);
}

static void op_preview(struct pisb_services *s, const struct pisb_json *j, int fd)
{
	long long port = jint(j, 0, "port", 0);
	_cleanup_free_ char *title = jstr(j, 0, "title"), *desc = jstr(j, 0, "description");
	char name[32];
	struct svc *v;

	if (port < 1 || port > 65535) {
		reply_error(fd, PISB_EXIT_USAGE, "preview: PORT must be 1-65535");
		return;
	}
	snprintf(name, sizeof(name), "port-%lld", port);
	v = find(s, name);
	if (v && v->kind != K_LINK) {
		reply_error(fd, PISB_EXIT_BUSY, "'%s' is the name of a service", name);
		return;
	}
	if (!v) {
		char t[32];
		snprintf(t, sizeof(t), "Port %lld", port);
		v = svc_new(s, name, K_LINK);
		v->port = v->fixed_port = (int)port;
		v->preview = true;
		add_link(v, NULL, title ? title : t, desc, NULL);
	} else {
		if (title)
			set_str(&v->links[0].title, title);
		if (desc)
			set_str(&v->links[0].description, desc);
	}
	open_listener(s, v);
	persist(s);
	redetect_family(s, v);
	{
		char *names[] = { v->name };
		reply_services(s, fd, names, 1, PISB_EXIT_FAIL, v->lerr);
	}
}

/* Forget an ad-hoc service or a preview link: stop its process, close its
 * preview and that preview's connections, free its ports.  Services the
 * YAML declares are the YAML's to remove. */
static void op_remove(struct pisb_services *s, const char *name, int fd)
{
	struct pisb_err e = PISB_ERR_INIT;
	struct svc *v;

	if (!name) {
		reply_error(fd, PISB_EXIT_USAGE, "svc remove: SERVICE is required");
		return;
	}
	if (refresh_config(s, &e) < 0) {
		reply_error(fd, e.code ? e.code : PISB_EXIT_FAIL, "%s", e.msg);
		return;
	}
	v = find(s, name);
	if (!v && strspn(name, "0123456789") == strlen(name)) {
		char link[32];
		snprintf(link, sizeof(link), "port-%.20s", name);
		v = find(s, link);
	}
	if (!v || v->removed) {
		reply_error(fd, PISB_EXIT_NOTFOUND, "no service or preview link '%s' in sandbox '%s'", name, s->name);
		return;
	}
	if (v->kind == K_YAML && v->declared) {
		reply_error(fd, PISB_EXIT_BUSY, "service '%s' is declared in %s/.sandbox.yaml: delete it there first "
			    "(then 'pisb svc %s remove %s' forgets it)", v->name, s->cfg->workspace, s->name, v->name);
		return;
	}
	v->removed = true;
	v->preview = false;
	open_listener(s, v);
	pisb_relay_close_tag(s->relay, v);
	if (s->gate)
		pisb_gate_drop_tag(s->gate, v);
	if (v->kind != K_LINK)
		stop_svc(s, v, false);
	persist(s);
	/* answered once it is forgotten: when its process group is gone */
	add_waiter(s, fd, W_REMOVED, &v, 1);
	tick(s);
}

void pisb_services_request(struct pisb_services *s, const char *op,
			   const struct pisb_json *req, int fd)
{
	_cleanup_free_ char *name = jstr(req, 0, "service");

	if (name && !*name) {
		free(name);
		name = NULL;
	}
	if (!strcmp(op, "svc.status"))
		op_status(s, name, fd);
	else if (!strcmp(op, "svc.ensure"))
		op_ensure(s, name, false, fd);
	else if (!strcmp(op, "svc.restart"))
		op_ensure(s, name, true, fd);
	else if (!strcmp(op, "svc.stop"))
		op_stop(s, name, fd);
	else if (!strcmp(op, "svc.start"))
		op_start(s, req, fd);
	else if (!strcmp(op, "svc.preview"))
		op_preview(s, req, fd);
	else if (!strcmp(op, "svc.remove"))
		op_remove(s, name, fd);
	else
		reply_error(fd, PISB_EXIT_USAGE, "unknown op '%s'", op);
}
