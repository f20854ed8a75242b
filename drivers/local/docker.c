/* docker.c - pisb docker for sandboxes with `docker: true` (the local and
 * vm drivers: PISB_DRV_DOCKER_OPT): every docker command runs inside the
 * sandbox through its driver's exec slot (local: its namespaces, its root;
 * vm: the guest's root, through the agent), as the docker client of the
 * host image talking to the sandbox's own daemon on PISB_DOCKER_SOCK (the
 * built-in service PISB_DOCKER_SERVICE, services.c, which both drivers
 * supervise).  Nothing here opens a docker socket on the host or reads
 * DOCKER_HOST.  Ports a container publishes become previews of the
 * sandbox (host 127.0.0.1, the driver's svc slot: the controller's relay,
 * or the VM's) and `rm` takes them away again; `curl` talks to those
 * previews only.
 */
#include "docker_inside.h"
#include "config.h"
#include "docker_init.h"
#include "docker_policy.h"
#include "docker_verbs.h"
#include "driver.h"
#include "err.h"
#include "local_exec.h"
#include "instance.h"
#include "json.h"
#include "proc.h"
#include "sbexec.h"
#include "sha256.h"
#include "state.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define CAPTURE_CAP (256 * 1024)
#define CAPTURE_MS 60000
#define PREVIEW_TITLE "docker"

/* Waits (at most 60 s) for the daemon's socket, then runs docker on it:
 * `sh -c DOCKER_SH sh VERB ARGS...`. */
#define WAIT_SH "i=0; while [ ! -S " PISB_DOCKER_SOCK " ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done; "
#define DOCKER_SH WAIT_SH "exec docker -H unix://" PISB_DOCKER_SOCK " \"$@\""

/* compose inside: the docker CLI's compose plugin where the image has one,
 * else docker-compose (v1, Debian 12's package), both pinned to the
 * sandbox's socket; `compose ARGS...` is a shell function of the script. */
#define COMPOSE_FN \
	"compose() { if docker compose version >/dev/null 2>&1; then docker -H unix://" PISB_DOCKER_SOCK " compose \"$@\"; " \
	"elif command -v docker-compose >/dev/null 2>&1; then docker-compose -H unix://" PISB_DOCKER_SOCK " \"$@\"; " \
	"else echo 'pisb: no compose in the sandbox: its image has neither the docker compose plugin nor docker-compose (make deps installs docker-compose)' >&2; return 127; fi; }; "
#define COMPOSE_SH WAIT_SH COMPOSE_FN "compose \"$@\""
/* The compose file that gives the project's containers the label
 * com.pi.sandbox=true (compose has no option for it): every service
 * `compose OPTS... config --services` lists, with the version of the first
 * file F (v1 refuses files of different versions), written to O.
 * `sh -c COMPOSE_LABEL_SH sh F O OPTS...`. */
#define LABEL_DIR "/run/pisb-docker/compose"
#define COMPOSE_LABEL_SH WAIT_SH COMPOSE_FN \
	"f=$1; o=$2; shift 2; v=$(sed -n 's/^version:[[:space:]]*//p' \"$f\" | head -n 1); " \
	"s=$(compose \"$@\" config --services) || exit; [ -n \"$s\" ] || exit 3; mkdir -p " LABEL_DIR " || exit; " \
	"{ if [ -n \"$v\" ]; then echo \"version: $v\"; fi; echo services:; for n in $s; do " \
	"case $n in *[!A-Za-z0-9._-]*) continue;; esac; " \
	"printf '  \"%s\":\\n    labels:\\n      com.pi.sandbox: \"true\"\\n' \"$n\"; done; } > \"$o.$$\" && mv -f \"$o.$$\" \"$o\""
/* The ports the containers of a compose project publish: `compose OPTS...
 * ps -a -q`, then each container's port bindings (a stopped one's too;
 * with COMPOSE_RUNNING_PORTS_SH a running one's only), in the lines
 * `docker port` prints ("80/tcp -> 0.0.0.0:8080"). */
#define COMPOSE_PORTS_SH_(IF) WAIT_SH COMPOSE_FN \
	"ids=$(compose \"$@\" ps -a -q) || exit; for i in $ids; do docker -H unix://" PISB_DOCKER_SOCK " inspect " \
	"--format '{{if " IF "}}{{range $p, $b := .HostConfig.PortBindings}}{{range $b}}{{$p}} -> {{.HostIp}}:{{.HostPort}}{{println}}{{end}}{{end}}{{end}}' \"$i\"; done"
#define COMPOSE_PORTS_SH COMPOSE_PORTS_SH_("true")
#define COMPOSE_RUNNING_PORTS_SH COMPOSE_PORTS_SH_(".State.Running")

struct dk {
	struct pisb_sandbox *sb;
	const struct pisb_config *cfg;
	bool own_kernel;        /* PISB_DRV_OWN_KERNEL: a VM's guest */
};

/* ---- running inside: the driver's exec slot ---- */

/* The driver's exec slot runs R in a child (the local driver's joins the
 * sandbox's namespaces, and we keep the host's to ask its controller
 * after); with OUT >= 0 the child's stdout and stderr go there, its stdin
 * is /dev/null and it leads a process group of its own.  *EP: the read
 * end of the pipe on which a child whose exec failed writes its error. */
static pid_t exec_child(struct dk *d, const struct pisb_exec_req *r, int out, int *ep, struct pisb_err *e)
{
	int p[2];
	pid_t pid;

	fflush(NULL);
	pid = pisb_fork_piped(p, e);
	if (pid < 0)
		return -1;
	if (pid == 0) {
		struct pisb_err ce = PISB_ERR_INIT;
		int c = 0;
		close(p[0]);
		if (out >= 0) {
			int nul = open("/dev/null", O_RDONLY | O_CLOEXEC);
			setpgid(0, 0);
			if (nul < 0 || dup2(nul, 0) < 0 || dup2(out, 1) < 0 || dup2(out, 2) < 0)
				_exit(127);
		}
		if (d->sb->drv->exec(d->sb, r, &c, &ce) < 0) {
			/* the error, for the parent to report */
			pisb_write_all(p[1], &ce.code, sizeof(ce.code));
			pisb_write_all(p[1], ce.msg, strlen(ce.msg));
			_exit(1);
		}
		_exit(c & 0xff);
	}
	close(p[1]);
	if (out >= 0)
		setpgid(pid, pid);
	*ep = p[0];
	return pid;
}

/* The child of exec_child ended with STATUS: the error it wrote on EP,
 * or its command's exit status in *CODE.  Closes EP. */
static int exec_reaped(struct dk *d, int ep, int status, int *code, struct pisb_err *e)
{
	char buf[sizeof(int) + 1024];
	ssize_t k = pisb_read_all(ep, buf, sizeof(buf) - 1);

	close(ep);
	if (k > (ssize_t)sizeof(int)) {
		int ec;
		memcpy(&ec, buf, sizeof(ec));
		buf[k] = '\0';
		return pisb_err_set(e, ec ? ec : PISB_EXIT_FAIL, "sandbox '%s': %s", d->sb->name,
				    buf + sizeof(int));
	}
	*code = pisb_wait_code(status);
	return 0;
}

/* Run `/bin/sh -c script sh args...` inside, stdout and stderr into out
 * (at most CAPTURE_CAP), *code its status. */
static int capture(struct dk *d, const char *script, char *const *args, size_t n,
		   struct pisb_buf *out, int *code, struct pisb_err *e)
{
	_cleanup_strv_ struct pisb_strv av = PISB_STRV_INIT;
	_cleanup_close_ int r = -1;
	struct pisb_exec_req req;
	int p[2], ep = -1, status = 0;
	int64_t deadline = pisb_mono_ms() + CAPTURE_MS;
	pid_t pid;

	pisb_strv_push(&av, "/bin/sh");
	pisb_strv_push(&av, "-c");
	pisb_strv_push(&av, script);
	pisb_strv_push(&av, "sh");
	for (size_t i = 0; i < n; i++)
		pisb_strv_push(&av, args[i]);
	memset(&req, 0, sizeof(req));
	req.name = d->sb->name;
	req.argv = av.v;
	req.argc = av.n;
	req.cwd = d->cfg->workspace;
	if (pipe2(p, O_CLOEXEC) < 0)
		return pisb_err_sys(e, PISB_EXIT_FAIL, "pipe");
	r = p[0];
	pid = exec_child(d, &req, p[1], &ep, e);
	close(p[1]);
	if (pid < 0)
		return -1;
	for (;;) {
		struct pollfd pf = { r, POLLIN, 0 };
		int64_t left = deadline - pisb_mono_ms();
		char buf[8192];
		ssize_t k;
		int pr;

		if (left <= 0) {
			kill(-pid, SIGKILL);
			waitpid(pid, NULL, 0);
			close(ep);
			return pisb_err_set(e, PISB_EXIT_TIMEOUT, "sandbox '%s': '%s' did not finish within %d s",
					    d->sb->name, args && n ? args[0] : "docker", CAPTURE_MS / 1000);
		}
		pr = poll(&pf, 1, (int)left);
		if (pr < 0 && errno == EINTR)
			continue;
		if (pr <= 0)
			continue;
		k = read(r, buf, sizeof(buf));
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			break;
		if (out->len < CAPTURE_CAP)
			pisb_buf_add(out, buf, (size_t)k);
	}
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	return exec_reaped(d, ep, status, code, e);
}

/* docker ARGS... inside, captured. */
static int docker_capture(struct dk *d, const char *const *args, struct pisb_buf *out, int *code,
			  struct pisb_err *e)
{
	size_t n = 0;

	while (args[n])
		n++;
	return capture(d, DOCKER_SH, (char *const *)args, n, out, code, e);
}

/* ---- previews of published ports ---- */

/* The sandbox's preview links (svc.status): port-N links (with DOCKER,
 * only those docker made: title PREVIEW_TITLE) as ports published on the
 * host's 127.0.0.1 (their host port: 0 while the relay has none). */
static int previews(struct dk *d, bool docker, struct pisb_docker_pub **out, size_t *n, struct pisb_err *e)
{
	_cleanup_buf_ struct pisb_buf rep = PISB_BUF_INIT;
	struct pisb_json j;
	int pv;

	*out = NULL;
	*n = 0;
	if (d->sb->drv->svc(d->sb, "{\"op\":\"svc.status\"}", &rep, 30000, e) < 0)
		return pisb_err_prefix(e, "sandbox '%s': previews", d->sb->name);
	if (pisb_json_parse(&j, rep.s, strcspn(rep.s, "\n"), e) < 0)
		return pisb_err_prefix(e, "sandbox '%s': previews", d->sb->name);
	pv = pisb_json_get(&j, 0, "previews");
	for (int i = 0; pv >= 0 && i < j.tok[pv].size; i++) {
		int o = pisb_json_at(&j, pv, i);
		_cleanup_free_ char *svc = pisb_json_str(&j, pisb_json_get(&j, o, "service"));
		long long hp = 0, port = 0;
		if (!svc || !pisb_str_starts(svc, "port-") || pisb_parse_ll(svc + 5, 1, 65535, &port) < 0)
			continue;
		if (docker && !pisb_json_eq(&j, pisb_json_get(&j, o, "title"), PREVIEW_TITLE))
			continue;
		pisb_json_int(&j, pisb_json_get(&j, o, "hostPort"), &hp);
		*out = xrealloc(*out, (*n + 1) * sizeof(**out));
		memset(&(*out)[*n], 0, sizeof(**out));
		strcpy((*out)[*n].ip, "127.0.0.1");
		strcpy((*out)[*n].proto, "tcp");
		(*out)[*n].cport = (int)port;
		(*out)[*n].host = (int)hp;
		(*n)++;
	}
	pisb_json_release(&j);
	return 0;
}

static void preview_add(struct dk *d, int port, struct pisb_strv *notes)
{
	_cleanup_free_ char *req = xasprintf("{\"op\":\"svc.preview\",\"port\":%d,\"title\":\"" PREVIEW_TITLE
					     "\",\"description\":\"published by docker run\"}", port);
	_cleanup_buf_ struct pisb_buf rep = PISB_BUF_INIT;
	struct pisb_err e = PISB_ERR_INIT;
	struct pisb_docker_pub *p = NULL;
	size_t n = 0;

	if (d->sb->drv->svc(d->sb, req, &rep, 30000, &e) < 0) {
		pisb_strv_pushf(notes, "warning: could not publish port %d as a preview: %s", port, e.msg);
		return;
	}
	if (previews(d, false, &p, &n, &e) == 0)
		for (size_t i = 0; i < n; i++)
			if (p[i].cport == port && p[i].host > 0)
				pisb_strv_pushf(notes, "published %d on http://127.0.0.1:%d/ (see 'pisb docker %s status')",
						port, p[i].host, d->sb->name);
	free(p);
}

static void preview_remove(struct dk *d, int port, struct pisb_strv *notes)
{
	_cleanup_free_ char *req = xasprintf("{\"op\":\"svc.remove\",\"service\":\"port-%d\"}", port);
	_cleanup_buf_ struct pisb_buf rep = PISB_BUF_INIT;
	struct pisb_err e = PISB_ERR_INIT;

	if (d->sb->drv->svc(d->sb, req, &rep, 30000, &e) < 0)
		pisb_strv_pushf(notes, "warning: could not unpublish port %d: %s", port, e.msg);
	else
		pisb_strv_pushf(notes, "unpublished %d", port);
}

/* The host ports (inside the sandbox) of run's -p/--publish options, as
 * the policy parsed them (docker_policy.h): the ones a preview can show
 * (tcp, a host port given). */
static void run_ports(char *const *args, size_t n, int *ports, size_t *np, size_t max,
		      struct pisb_strv *notes)
{
	struct pisb_docker_port *p = NULL;
	size_t k = 0;

	*np = 0;
	pisb_docker_run_ports(args, n, &p, &k);
	for (size_t i = 0; i < k; i++) {
		if (strcmp(p[i].proto, "tcp"))
			pisb_strv_pushf(notes, "warning: -p %d/%s: previews are HTTP, so %s ports get none",
					p[i].cport, p[i].proto, p[i].proto);
		else if (!p[i].host)
			pisb_strv_pushf(notes, "warning: -p %d: no host port given, so no preview (publish HOST:%d)",
					p[i].cport, p[i].cport);
		else if (*np < max)
			ports[(*np)++] = p[i].host;
	}
	free(p);
}

/* PORT into ports[*np] unless it is there already or max are */
static void add_port(int *ports, size_t *np, size_t max, int port)
{
	for (size_t m = 0; m < *np; m++)
		if (ports[m] == port)
			return;
	if (*np < max)
		ports[(*np)++] = port;
}

/* Before rm: the host ports (inside) the named containers publish
 * (`docker port REF`: "80/tcp -> 0.0.0.0:8080"). */
static size_t rm_ports(struct dk *d, char *const *args, size_t n, int *ports, size_t max)
{
	size_t np = 0;

	for (size_t i = 0; i < n; i++) {
		_cleanup_buf_ struct pisb_buf out = PISB_BUF_INIT;
		struct pisb_err ig = PISB_ERR_INIT;
		const char *av[] = { "port", args[i], NULL };
		struct pisb_docker_pub *p = NULL;
		size_t k = 0;
		int code = 0;

		if (args[i][0] == '-')
			continue;
		if (docker_capture(d, av, &out, &code, &ig) < 0 || code != 0)
			continue;
		pisb_docker_port_lines(out.s, &p, &k);
		for (size_t j = 0; j < k; j++)
			add_port(ports, &np, max, p[j].host);
		free(p);
	}
	return np;
}

/* The host ports (inside) the containers of the compose project that
 * compose's global options OPTS (NOPTS words) name publish (RUNNING: the
 * running ones only), tcp ones with a host port (others get a warning in
 * NOTES, when given). */
static size_t compose_ports(struct dk *d, char *const *opts, size_t nopts, bool running, int *ports,
			    size_t max, struct pisb_strv *notes)
{
	_cleanup_buf_ struct pisb_buf out = PISB_BUF_INIT;
	struct pisb_err ig = PISB_ERR_INIT;
	struct pisb_docker_pub *p = NULL;
	size_t k = 0, np = 0;
	int code = 0;

	if (capture(d, running ? COMPOSE_RUNNING_PORTS_SH : COMPOSE_PORTS_SH, opts, nopts, &out, &code, &ig) < 0 ||
	    code != 0)
		return 0;
	pisb_docker_port_lines(out.s, &p, &k);
	for (size_t j = 0; j < k; j++) {
		if (strcmp(p[j].proto, "tcp")) {
			if (notes)
				pisb_strv_pushf(notes, "warning: port %d/%s: previews are HTTP, so %s ports get none",
						p[j].cport, p[j].proto, p[j].proto);
			continue;
		}
		add_port(ports, &np, max, p[j].host);
	}
	free(p);
	return np;
}

/* Before compose up, create, run and scale: the label file for the project
 * the global options OPTS (NOPTS words) name, its path pushed on AV as
 * `-f PATH` (one path a project: a hash of OPTS); nothing where OPTS name
 * no compose file (the policy names the defaults it found) or compose
 * cannot list the services (it will say why itself). */
static void compose_label(struct dk *d, char *const *opts, size_t nopts, struct pisb_strv *av,
			  struct pisb_strv *notes)
{
	const char *first = pisb_docker_compose_file(opts, nopts);
	_cleanup_strv_ struct pisb_strv la = PISB_STRV_INIT;
	_cleanup_buf_ struct pisb_buf key = PISB_BUF_INIT, out = PISB_BUF_INIT;
	struct pisb_err e = PISB_ERR_INIT;
	char hex[65];
	int code = 0;

	if (!first)
		return;
	for (size_t i = 0; i < nopts; i++) {
		pisb_buf_adds(&key, opts[i]);
		pisb_buf_addc(&key, '\0');
	}
	{
		struct pisb_sha256 h;
		unsigned char dg[32];
		pisb_sha256_init(&h);
		pisb_sha256_update(&h, key.s, key.len);
		pisb_sha256_final(&h, dg);
		pisb_sha256_hex(dg, hex);
	}
	pisb_strv_push(&la, first);
	pisb_strv_pushf(&la, LABEL_DIR "/labels-%.16s.yaml", hex);
	for (size_t i = 0; i < nopts; i++)
		pisb_strv_push(&la, opts[i]);
	if (capture(d, COMPOSE_LABEL_SH, la.v, la.n, &out, &code, &e) < 0 || code != 0) {
		if (code != 3)
			pisb_strv_pushf(notes, "warning: the project's containers do not get the label com.pi.sandbox=true: %s",
					code ? "compose could not list its services" : e.msg);
		return;
	}
	pisb_strv_push(av, "-f");
	pisb_strv_push(av, la.v[1]);
}

/* After compose up: a preview for each port the project publishes that
 * has none yet. */
static void compose_publish(struct dk *d, char *const *opts, size_t nopts, struct pisb_strv *notes)
{
	struct pisb_docker_pub *have = NULL;
	struct pisb_err ig = PISB_ERR_INIT;
	size_t nh = 0, np;
	int ports[64];

	np = compose_ports(d, opts, nopts, false, ports, 64, notes);
	if (previews(d, true, &have, &nh, &ig) < 0)
		nh = 0;
	for (size_t i = 0; i < np; i++) {
		bool dup = false;
		for (size_t k = 0; k < nh; k++)
			dup |= have[k].cport == ports[i];
		if (!dup)
			preview_add(d, ports[i], notes);
	}
	free(have);
}

/* Before compose down: the ports of the project that have a preview docker
 * made, for it to remove once the project is down. */
static size_t compose_gone(struct dk *d, char *const *opts, size_t nopts, int *gone, size_t max)
{
	struct pisb_docker_pub *have = NULL;
	struct pisb_err ig = PISB_ERR_INIT;
	int ports[64];
	size_t nh = 0, ng = 0, k = compose_ports(d, opts, nopts, false, ports, 64, NULL);

	if (previews(d, true, &have, &nh, &ig) < 0)
		return 0;
	for (size_t i = 0; i < k; i++)
		for (size_t j = 0; j < nh; j++)
			if (have[j].cport == ports[i] && ng < max) {
				gone[ng++] = ports[i];
				break;
			}
	free(have);
	return ng;
}

/* After compose stop, rm or kill: of GONE (the project's previewed ports
 * before it), the ones no running container of the project publishes
 * any more stay in GONE, the others are kept (a subset of the services
 * was named, or another container publishes the same port). */
static size_t compose_still(struct dk *d, char *const *opts, size_t nopts, int *gone, size_t ng)
{
	int run[64];
	size_t nr = compose_ports(d, opts, nopts, true, run, 64, NULL), k = 0;

	for (size_t i = 0; i < ng; i++) {
		bool up = false;
		for (size_t j = 0; j < nr; j++)
			up |= run[j] == gone[i];
		if (!up)
			gone[k++] = gone[i];
	}
	return k;
}

/* ---- status / verify / resources ---- */

static char *first_line(const char *s)
{
	size_t n = s ? strcspn(s, "\n") : 0;
	return xstrndup(s ? s : "", n);
}

static int do_status(struct dk *d, bool running, struct pisb_jw *w, struct pisb_err *e)
{
	_cleanup_buf_ struct pisb_buf out = PISB_BUF_INIT;
	const char *av[] = { "info", "--format", "{{.ID}} {{.ServerVersion}} {{.Driver}}", NULL };
	_cleanup_free_ char *l = NULL;
	struct pisb_docker_pub *p = NULL;
	struct pisb_docker_status s = { .env = "strict" };
	int code = -1;
	char id[256] = "", ver[128] = "", drv[64] = "";

	if (running) {
		if (capture(d, "[ -S " PISB_DOCKER_SOCK " ] || { echo 'the daemon is not listening yet (see pisb logs NAME " PISB_DOCKER_SERVICE ")'; exit 1; }; "
			    "exec docker -H unix://" PISB_DOCKER_SOCK " \"$@\"",
			    (char *const *)av, 3, &out, &code, e) < 0)
			return -1;
		if (previews(d, true, &p, &s.nports, e) < 0)
			return -1;
		if (code == 0)
			sscanf(out.s ? out.s : "", "%255s %127s %63s", id, ver, drv);
	}
	if (!running)
		s.error = "the sandbox is not running (pisb start starts it and its daemon)";
	else if (code != 0 || !id[0])
		s.error = l = first_line(out.s);
	s.status = running ? "running" : "stopped";
	s.workspace = d->cfg->workspace;
	s.socket = PISB_DOCKER_SOCK " (inside the sandbox)";
	s.reachable = running && code == 0 && id[0];
	s.id = id[0] ? id : NULL;
	s.version = ver[0] ? ver : NULL;
	s.storage = true;
	s.storage_driver = drv[0] ? drv : NULL;
	s.ports = p;
	pisb_jw_obj(w);
	pisb_jw_kstr(w, "name", d->sb->name);
	pisb_jw_kstr(w, "driver", d->sb->drv->name);
	pisb_docker_status(w, &s);
	free(p);
	return 0;
}

/* Whether a TCP listener on host port port is bound to loopback only
 * (/proc/net/tcp and tcp6 of the host: local address and state 0A). */
static int listener_loopback(int port, bool *any)
{
	static const char *const files[] = { "/proc/net/tcp", "/proc/net/tcp6", NULL };
	int verdict = 1;

	*any = false;
	for (int f = 0; files[f]; f++) {
		FILE *fp = fopen(files[f], "re");
		char line[512];
		if (!fp)
			continue;
		while (fgets(line, sizeof(line), fp)) {
			char local[128];
			unsigned lport = 0, st = 0;
			char *colon;
			if (sscanf(line, " %*d: %127s %*s %x", local, &st) != 2 || st != 0x0A)
				continue;
			colon = strrchr(local, ':');
			if (!colon || sscanf(colon + 1, "%x", &lport) != 1 || (int)lport != port)
				continue;
			*colon = '\0';
			*any = true;
			if (strcmp(local, "0100007F") && strcmp(local, "00000000000000000000000001000000"))
				verdict = 0;
		}
		fclose(fp);
	}
	return verdict;
}

/* port-binds' evidence for a preview: its host listener bound on loopback
 * only */
static bool port_loopback(const struct pisb_docker_pub *p, struct pisb_buf *b)
{
	bool any = false;
	int lo = listener_loopback(p->host, &any);

	pisb_buf_addf(b, "%d->%d %s", p->host, p->cport,
		      !any ? "(no host listener)" : lo ? "on 127.0.0.1 only" : "NOT on loopback only");
	return lo == 1;
}

/* verify's probe inside, with MOUNTS (host-mounts' part) */
#define VERIFY_PROBE(MOUNTS) \
	"echo __ENV__; env | grep -E '^(DOCKER_|COMPOSE_|PISB_VERIFY_PROBE_)'; " \
	MOUNTS \
	"echo __SOCKS__; for p in /run/docker.sock /var/run/docker.sock /run/containerd/containerd.sock " \
	"/var/run/containerd/containerd.sock; do [ -e \"$p\" ] && stat -L -c \"$p %d %i %F\" \"$p\"; done; " \
	"echo __OWN__; python3 -c 'import socket,struct,sys; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); " \
	"print(struct.unpack(\"3i\", s.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))[0])' " PISB_DOCKER_SOCK " 2>&1; " \
	"echo __DAEMON__; docker -H unix://" PISB_DOCKER_SOCK " info --format '{{.ID}}' 2>&1; echo __RC__; echo $?; " \
	"echo __CONTEXTS__; docker -H unix://" PISB_DOCKER_SOCK " context ls --format '{{.Name}}' 2>&1; " \
	"echo __END__"

static int do_verify(struct dk *d, struct pisb_jw *w, int *code, struct pisb_err *e)
{
	/* this kernel's: the host's paths by device and inode; a VM's own
	 * kernel numbers its files apart (virtiofs even shows the host's
	 * inode numbers): the paths themselves must not be there */
	static const char script_here[] = VERIFY_PROBE(PISB_DOCKER_MOUNTS_PROBE);
	static const char script_vm[] = VERIFY_PROBE("echo __MOUNTS__; ls -d -- \"$@\" 2>/dev/null; ");
	static const char *const host_socks[] = { "/run/docker.sock", "/var/run/docker.sock",
		"/run/containerd/containerd.sock", "/var/run/containerd/containerd.sock", NULL };
	_cleanup_buf_ struct pisb_buf out = PISB_BUF_INIT, hostinfo = PISB_BUF_INIT;
	_cleanup_free_ char *socks = NULL, *own = NULL, *ev = NULL, *hd = NULL, *hs = NULL, *hl = NULL;
	const char *home = getenv("HOME");
	struct pisb_docker_canary cn;
	struct pisb_docker_pub *p = NULL;
	size_t np = 0;
	bool all = true;
	char *margs[4];
	int rc;

	/* canaries in our own environment: the sandbox must not get them */
	pisb_docker_canary_set(&cn, false);
	hd = xasprintf("%s/.docker", home ? home : "/nonexistent");
	hs = xasprintf("%s/.ssh", home ? home : "/nonexistent");
	hl = xstrdup(d->sb->st->path);
	margs[0] = hd;
	margs[1] = hs;
	margs[2] = hl;
	rc = capture(d, d->own_kernel ? script_vm : script_here, margs, 3, &out, code, e);
	pisb_docker_canary_unset(&cn);
	if (rc < 0 || pisb_docker_probe_end(out.s, true, "verify", d->sb->name, *code, NULL, e) < 0)
		return -1;
	socks = pisb_docker_section(out.s, "__SOCKS__");
	own = pisb_docker_section(out.s, "__OWN__");
	/* the host's sockets at those paths, by device and inode */
	for (int i = 0; host_socks[i]; i++) {
		struct stat sb;
		if (stat(host_socks[i], &sb) == 0)
			pisb_buf_addf(&hostinfo, "%s%s %llu:%llu", hostinfo.len ? ", " : "", host_socks[i],
				      (unsigned long long)sb.st_dev, (unsigned long long)sb.st_ino);
	}
	pisb_jw_obj(w);
	pisb_jw_kstr(w, "name", d->sb->name);
	pisb_jw_kstr(w, "driver", d->sb->drv->name);
	pisb_jw_key(w, "checks");
	pisb_jw_arr(w);
	pisb_docker_check(w, "transport", true,
	      d->own_kernel ? "pisb runs the docker client inside the VM (the guest's root, through its agent) on " PISB_DOCKER_SOCK
			      "; it opens no docker socket on the host"
			    : "pisb runs the docker client inside the sandbox (its namespaces, its root) on " PISB_DOCKER_SOCK
			      "; it opens no docker socket on the host", &all);
	pisb_docker_verify_env(w, &cn, out.s, "", &all);
	pisb_docker_verify_daemon(w, "unix://" PISB_DOCKER_SOCK, out.s, &all);
	{
		/* a socket inside that is the host's (same device and inode), or
		 * that has no listener in the sandbox's network namespace, is
		 * not the sandbox's own */
		struct pisb_buf bad = PISB_BUF_INIT;
		long long nown = 0;
		bool own_ok = own && pisb_parse_ll(own, 1, 1 << 20, &nown) == 0;
		_cleanup_free_ char *lines = xstrdup(socks ? socks : "");
		for (char *line = lines; line && *line;) {
			char *nl = strchr(line, '\n'), path[256];
			unsigned long long dev = 0, ino = 0;
			if (nl)
				*nl = '\0';
			if (sscanf(line, "%255s %llu %llu", path, &dev, &ino) == 3) {
				for (int i = 0; !d->own_kernel && host_socks[i]; i++) {
					struct stat sb;
					if (stat(host_socks[i], &sb) == 0 && sb.st_dev == dev && sb.st_ino == ino)
						pisb_buf_addf(&bad, "%s'%s' is the host's '%s'", bad.len ? "; " : "", path,
							      host_socks[i]);
				}
				if (strcmp(path, PISB_DOCKER_SOCK) && strcmp(path, "/var/run/docker.sock"))
					pisb_buf_addf(&bad, "%s'%s' exists inside", bad.len ? "; " : "", path);
			}
			line = nl ? nl + 1 : NULL;
		}
		if (!own_ok)
				pisb_buf_addf(&bad, "%s'%s': its listener is not a process of the sandbox (peer pid: %s)",
				      bad.len ? "; " : "", PISB_DOCKER_SOCK, own && *own ? own : "none");
		ev = bad.len ? xstrdup(bad.s)
			     : xasprintf("inside: %s; its listener is pid %s of the sandbox (SO_PEERCRED; a listener outside its pid namespace shows as 0); host: %s",
					 socks && *socks ? socks : "no docker socket", own,
					 hostinfo.len ? hostinfo.s : "no docker or containerd socket");
		for (char *q = ev; *q; q++)
			if (*q == '\n')
				*q = ';';
		pisb_docker_check(w, "own-socket", !bad.len, ev, &all);
		pisb_docker_check(w, "host-daemon", !bad.len || !strstr(bad.s, "the host's"),
		      d->own_kernel ? "the VM runs its own kernel and has no network interface: a socket inside is the guest's, never a way to the host's daemon"
		      : hostinfo.len ? "no socket inside is one of the host's docker/containerd sockets (device and inode compared)"
				   : "the host has no docker or containerd socket at the usual paths; none inside is the host's",
		      &all);
		free(ev);
		ev = NULL;
		pisb_buf_release(&bad);
	}
	/* the host's ~/.docker, ~/.ssh and state directory, by device and
	 * inode: the sandbox shares this kernel */
	if (d->own_kernel) {
		_cleanup_free_ char *what = xasprintf("%s, %s and %s", hd, hs, hl);
		pisb_docker_verify_mounts(w, what, out.s, &all);
	} else
		pisb_docker_verify_host_mounts(w, margs, 3, out.s, &all);
	pisb_docker_verify_contexts(w, out.s, &all);
	rc = previews(d, true, &p, &np, e);
	pisb_docker_verify_ports(w, p, np, rc < 0 ? e->msg : NULL, port_loopback, &all);
	free(p);
	pisb_docker_verify_end(w, all, code);
	return 0;
}

static int do_resources(struct dk *d, struct pisb_jw *w, struct pisb_err *e)
{
	static const char script[] =
		"echo __CPUS__; nproc 2>&1; echo __MEMORY__; free -m 2>&1; echo __DISK__; df -h / /var/lib/docker 2>&1; "
		"echo __DOCKER__; " WAIT_SH "docker -H unix://" PISB_DOCKER_SOCK " system df 2>&1; echo __END__";
	_cleanup_buf_ struct pisb_buf out = PISB_BUF_INIT;
	int code = 0;

	if (capture(d, script, NULL, 0, &out, &code, e) < 0 ||
	    pisb_docker_probe_end(out.s, true, "resources", d->sb->name, code, NULL, e) < 0)
		return -1;
	pisb_jw_obj(w);
	pisb_jw_kstr(w, "name", d->sb->name);
	pisb_docker_resources(w, out.s);
	pisb_jw_obj_end(w);
	return 0;
}

/* ---- init: the templates of docker_init.h, written inside ---- */

static int do_init(struct dk *d, char *const *args, size_t n, struct pisb_jw *w, int *code,
		   struct pisb_strv *notes, struct pisb_err *e)
{
	_cleanup_strv_ struct pisb_strv av = PISB_STRV_INIT;
	_cleanup_buf_ struct pisb_buf out = PISB_BUF_INIT;
	struct pisb_docker_init o;
	const char *dir;
	int rc = 0;

	if (pisb_docker_init_parse(args, n, &o, e) < 0)
		return -1;
	dir = o.dir ? o.dir : d->cfg->workspace;
	pisb_docker_init_args(&o, d->cfg->workspace, dir, &av);
	if (capture(d, PISB_DOCKER_INIT_SH, av.v, av.n, &out, &rc, e) < 0)
		return -1;
	return pisb_docker_init_report(d->sb->name, dir, out.s, rc, w, notes, code, e);
}

/* ---- curl: host side, loopback, only the previews docker published ---- */

/* The host port of the preview that serves PORT (the port the container
 * published, or that preview's host port), and the sandbox's token where
 * its previews want one. */
static int curl_serve(void *ctx, long long port, int *hport, struct pisb_buf *tok, struct pisb_err *e)
{
	struct dk *d = ctx;
	_cleanup_free_ struct pisb_docker_pub *p = NULL;
	size_t np = 0;

	if (previews(d, true, &p, &np, e) < 0)
		return pisb_err_prefix(e, "docker curl");
	for (size_t i = 0; i < np && !*hport; i++)
		if (p[i].host > 0 && (p[i].cport == port || p[i].host == port))
			*hport = p[i].host;
	if (!*hport)
		return pisb_err_set(e, PISB_EXIT_FAIL,
				    "docker curl: %lld is not a port sandbox '%s' published with docker run -p (see 'pisb docker %s status')",
				    port, d->sb->name, d->sb->name);
	/* a preview behind preview.auth: token wants the sandbox's token
	 * (the controller's file in the instance directory, host-written) */
	if (d->cfg->preview_token &&
	    (pisb_read_file_at(d->sb->idir, "preview.token", tok, 128) < 0 || tok->len < 32))
		return pisb_err_set(e, PISB_EXIT_BACKEND,
				    "docker curl: sandbox '%s' has preview.auth: token but no token yet", d->sb->name);
	if (tok->len > 32)
		tok->s[32] = '\0';
	return 0;
}

static const struct pisb_docker_curl_ops curl_ops = {
	.target = "PORT[/PATH]",
	.only = "PORT[/PATH] or http://127.0.0.1:PORT/PATH",
	.serve = curl_serve,
};

static int do_curl(struct dk *d, char *const *args, size_t n, int *code, struct pisb_err *e)
{
	_cleanup_buf_ struct pisb_buf body = PISB_BUF_INIT;

	if (pisb_docker_curl(&curl_ops, d, args, n, &body, code, e) < 0)
		return -1;
	pisb_write_all(1, body.s, body.len);
	return 0;
}

/* ---- the streaming verbs ---- */

static volatile sig_atomic_t child_pid;
static void forward(int sig)
{
	if (child_pid > 0)
		kill(child_pid, sig);
}

/* Attached: the command's output is ours; the signals we get reach it
 * through the child. */
static int attached(struct dk *d, const struct pisb_exec_req *r, int *code, struct pisb_err *e)
{
	static const int sigs[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT };
	struct sigaction sa, old[4];
	int ep = -1, status = 0;
	pid_t pid = exec_child(d, r, -1, &ep, e);

	if (pid < 0)
		return -1;
	child_pid = pid;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = forward;
	for (int i = 0; i < 4; i++)
		sigaction(sigs[i], &sa, &old[i]);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	for (int i = 0; i < 4; i++)
		sigaction(sigs[i], &old[i], NULL);
	child_pid = 0;
	return exec_reaped(d, ep, status, code, e);
}

static int stream(struct dk *d, const char *verb, char *const *args, size_t n, int *code,
		  struct pisb_strv *notes, struct pisb_err *e)
{
	_cleanup_strv_ struct pisb_strv av = PISB_STRV_INIT;
	struct pisb_exec_req r;
	int ports[64], gone[64];
	size_t np = 0, ng = 0;

	bool compose = !strcmp(verb, "compose");
	size_t nopts = compose ? pisb_docker_compose_sub(args, n) : 0;
	const char *sub = compose && nopts < n ? args[nopts] : "";

	/* compose: up, start, restart and run -d publish the project's
	 * ports; down, stop, rm and kill unpublish the ones that go */
	bool cpub = !strcmp(sub, "up") || !strcmp(sub, "start") || !strcmp(sub, "restart") ||
		    (!strcmp(sub, "run") && pisb_docker_compose_run_detached(args + nopts + 1, n - nopts - 1));
	bool cunpub = !strcmp(sub, "stop") || !strcmp(sub, "rm") || !strcmp(sub, "kill");

	if (!strcmp(verb, "rm"))
		ng = rm_ports(d, args, n, gone, 64);
	/* the project's ports, read before they go */
	if (!strcmp(sub, "down") || cunpub)
		ng = compose_gone(d, args, nopts, gone, 64);
	pisb_strv_push(&av, "/bin/sh");
	pisb_strv_push(&av, "-c");
	pisb_strv_push(&av, compose ? COMPOSE_SH : DOCKER_SH);
	pisb_strv_push(&av, "sh");
	if (compose) {
		/* the label file's -f goes with the global options (before a
		 * "--" that ends them) */
		size_t g = nopts && !strcmp(args[nopts - 1], "--") ? nopts - 1 : nopts;
		for (size_t i = 0; i < g; i++)
			pisb_strv_push(&av, args[i]);
		if (!strcmp(sub, "up") || !strcmp(sub, "create") || !strcmp(sub, "run") || !strcmp(sub, "scale"))
			compose_label(d, args, g, &av, notes);
		for (size_t i = g; i < n; i++)
			pisb_strv_push(&av, args[i]);
	} else
		pisb_docker_verb_argv(&av, verb, args, n);
	memset(&r, 0, sizeof(r));
	r.name = d->sb->name;
	r.argv = av.v;
	r.argc = av.n;
	r.cwd = d->cfg->workspace;
	if (attached(d, &r, code, e) < 0)
		return -1;
	if (*code == 0 && !strcmp(verb, "run")) {
		run_ports(args, n, ports, &np, 64, notes);
		for (size_t i = 0; i < np; i++)
			preview_add(d, ports[i], notes);
	}
	if (*code == 0 && cpub)
		compose_publish(d, args, nopts, notes);
	if (*code == 0 && cunpub)
		ng = compose_still(d, args, nopts, gone, ng);
	if (*code == 0)
		for (size_t i = 0; i < ng; i++)
			preview_remove(d, gone[i], notes);
	return 0;
}

int pisb_docker_inside(struct pisb_sandbox *sb, const char *verb, char *const *args, size_t nargs,
		       struct pisb_jw *w, bool *json_out, int *code, struct pisb_strv *notes,
		       struct pisb_err *e)
{
	struct dk d = { sb, NULL, (sb->drv->caps & PISB_DRV_OWN_KERNEL) != 0 };
	bool running;

	*json_out = false;
	*code = 0;
	if (!(d.cfg = pisb_sandbox_config(sb, e)))
		return pisb_err_prefix(e, "sandbox '%s'", sb->name);
	if (!d.cfg->docker)
		return pisb_err_set(e, PISB_EXIT_FAIL,
				    "sandbox '%s' (driver %s) has no docker daemon of its own: create it with 'docker: true' in its sandbox.yaml (pisb never uses the host's docker daemon)",
				    sb->name, sb->drv->name);
	running = sb->drv->status(sb) == PISB_ST_RUNNING;
	if (!strcmp(verb, "status")) {
		*json_out = true;
		return do_status(&d, running, w, e);
	}
	if (!running)
		return pisb_err_set(e, PISB_EXIT_FAIL,
				    "sandbox '%s' is %s: its docker daemon runs only while it runs (pisb start %s)",
				    sb->name, pisb_status_name(sb->drv->status(sb)), sb->name);
	if (!strcmp(verb, "verify")) {
		*json_out = true;
		return do_verify(&d, w, code, e);
	}
	if (!strcmp(verb, "resources")) {
		*json_out = true;
		return do_resources(&d, w, e);
	}
	if (!strcmp(verb, "curl"))
		return do_curl(&d, args, nargs, code, e);
	if (!strcmp(verb, "init")) {
		*json_out = true;
		return do_init(&d, args, nargs, w, code, notes, e);
	}
	return stream(&d, verb, args, nargs, code, notes, e);
}
