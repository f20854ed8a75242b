/* verify.c - `pisb verify` on the local driver: a live audit of one
 * running sandbox's isolation.  It plants canaries on the host (a file, an
 * environment variable, a loopback listener, unix sockets) and looks for
 * them from inside the sandbox, entering it the way `pisb exec` does; the
 * report is built in memory and returned, human or JSON.
 */
#include "local.h"
#include "driver.h"
#include "cgroup.h"
#include "config.h"
#include "err.h"
#include "instance.h"
#include "json.h"
#include "lock.h"
#include "ns.h"
#include "proc.h"
#include "project_audit.h"
#include "sbexec.h"
#include "state.h"
#include "util.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

#define VERIFY_PROBE_MS 15000
#define MAX_OBJS 512

/* Something of the host's that must not be reachable from inside. */
struct hobj {
	char path[512];
	dev_t dev;
	ino_t ino;
};

struct hproc {
	pid_t pid;
	unsigned long long start;
	char what[64];
};

struct verify {
	/* what the probe looks for (a forked child inherits all of it) */
	char tok[33];                  /* canary content / variable value */
	char envname[64];              /* PISB_CANARY_… */
	char canaries[2][512];         /* planted canary files */
	int ncanaries;
	char sockpath[108];            /* planted canary unix socket */
	char abstract[64];             /* abstract unix socket name (without \0) */
	struct hobj objs[MAX_OBJS];    /* host dirs and files: /, /root, /home… */
	int nobjs;
	struct hobj socks[MAX_OBJS];   /* host unix sockets */
	int nsocks;
	char ssh_sock[512];
	int lport;                     /* host 127.0.0.1 listener */
	struct hproc hp[4];
	int nhp;
	unsigned long ns_ino[7];       /* the host's namespaces */
	bool on_host;                  /* PISB_VERIFY_ON_HOST=1: test hook */
	/* the project, for the check "project" (project_audit.h) */
	bool project;                  /* there is one: the check runs */
	char pws[512];                 /* the workspace inside */
	struct pisb_project_audit pa;
	/* the report */
	struct { const char *name; bool pass; char *evidence; } c[16];
	int nc;
};

static const char *const ns_names[7] = { "user", "mnt", "pid", "net", "ipc", "uts", "cgroup" };

static void vadd(struct verify *v, const char *name, bool pass, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static void vadd(struct verify *v, const char *name, bool pass, const char *fmt, ...)
{
	va_list ap;

	if (v->nc >= 16)
		return;
	va_start(ap, fmt);
	v->c[v->nc].evidence = xvasprintf(fmt, ap);
	va_end(ap);
	v->c[v->nc].name = name;
	v->c[v->nc].pass = pass;
	v->nc++;
}

static void add_obj(struct hobj *v, int *n, const char *path)
{
	struct stat sb;

	if (*n >= MAX_OBJS || lstat(path, &sb) < 0)
		return;
	snprintf(v[*n].path, sizeof(v[*n].path), "%s", path);
	v[*n].dev = sb.st_dev;
	v[*n].ino = sb.st_ino;
	(*n)++;
}

/* A directory and its entries (one level). */
static void add_tree(struct verify *v, const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;

	add_obj(v->objs, &v->nobjs, dir);
	if (!d)
		return;
	while ((de = readdir(d))) {
		char p[512];
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		snprintf(p, sizeof(p), "%s/%s", strcmp(dir, "/") ? dir : "", de->d_name);
		add_obj(v->objs, &v->nobjs, p);
	}
	closedir(d);
}

/* Unix sockets under dir (a few levels deep). */
static void find_socks(struct hobj *out, int *n, const char *dir, int depth, int *budget)
{
	DIR *d;
	struct dirent *de;

	if (depth > 3 || *budget <= 0 || !(d = opendir(dir)))
		return;
	while ((de = readdir(d)) && *budget > 0 && *n < MAX_OBJS) {
		char p[512];
		struct stat sb;
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		(*budget)--;
		snprintf(p, sizeof(p), "%s/%s", dir, de->d_name);
		if (lstat(p, &sb) < 0)
			continue;
		if (S_ISSOCK(sb.st_mode)) {
			bool dup = false;
			for (int i = 0; i < *n; i++)
				dup = dup || (out[i].dev == sb.st_dev && out[i].ino == sb.st_ino);
			if (dup)
				continue;
			snprintf(out[*n].path, sizeof(out[*n].path), "%s", p);
			out[*n].dev = sb.st_dev;
			out[*n].ino = sb.st_ino;
			(*n)++;
		} else if (S_ISDIR(sb.st_mode)) {
			find_socks(out, n, p, depth + 1, budget);
		}
	}
	closedir(d);
}

static unsigned long ns_inode(const char *pid, const char *name)
{
	char path[64];
	struct stat sb;

	snprintf(path, sizeof(path), "/proc/%s/ns/%s", pid, name);
	return stat(path, &sb) == 0 ? (unsigned long)sb.st_ino : 0;
}

/* comm and start time of /proc/PID/stat; false if gone. */
static bool proc_stat(const char *pid, char *comm, size_t n, unsigned long long *start)
{
	char path[64], buf[1024], *l, *r, *p;
	int fd;
	ssize_t k;

	snprintf(path, sizeof(path), "/proc/%s/stat", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	k = pisb_read_all(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (k <= 0)
		return false;
	buf[k] = '\0';
	l = strchr(buf, '(');
	r = strrchr(buf, ')');
	if (!l || !r || r < l)
		return false;
	snprintf(comm, n, "%.*s", (int)(r - l - 1), l + 1);
	p = r + 2;
	for (int f = 3; f < 22 && p; f++) {
		p = strchr(p, ' ');
		if (p)
			p++;
	}
	*start = p ? strtoull(p, NULL, 10) : 0;
	return true;
}

/* --- the probes, run inside the sandbox (or, as a test hook, here) --- */

static void out_line(int fd, const char *check, bool pass, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static void out_line(int fd, const char *check, bool pass, const char *fmt, ...)
{
	char ev[3000];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(ev, sizeof(ev), fmt, ap);
	va_end(ap);
	for (char *p = ev; *p; p++)
		if (*p == '\n' || *p == '\t')
			*p = ' ';
	dprintf(fd, "%s\t%d\t%s\n", check, pass ? 1 : 0, ev);
}

/* Failures found by a probe: the first few spelled out, then a count. */
struct findings {
	struct pisb_buf b;
	int n;
};

static void finding(struct findings *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void finding(struct findings *f, const char *fmt, ...)
{
	char tmp[1024];
	va_list ap;

	if (f->n++ >= 6)
		return;
	va_start(ap, fmt);
	vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	pisb_buf_addf(&f->b, "%s%s", f->b.len ? "; " : "", tmp);
}

static void findings_end(struct findings *f)
{
	if (f->n > 6)
		pisb_buf_addf(&f->b, "; and %d more", f->n - 6);
}

static void probe_files(const struct verify *v, int fd)
{
	struct findings bad = { PISB_BUF_INIT, 0 };
	struct stat sb;

	for (int i = 0; i < v->ncanaries; i++) {
		char buf[64];
		int f = open(v->canaries[i], O_RDONLY | O_CLOEXEC);
		ssize_t n;
		if (f < 0)
			continue;
		n = read(f, buf, sizeof(buf) - 1);
		close(f);
		buf[n > 0 ? n : 0] = '\0';
		if (!strcmp(buf, v->tok))
			finding(&bad, "canary '%s' planted on the host is readable",
				      v->canaries[i]);
	}
	for (int i = 0; i < v->nobjs; i++) {
		if (lstat(v->objs[i].path, &sb) == 0 && sb.st_dev == v->objs[i].dev &&
		    sb.st_ino == v->objs[i].ino)
			finding(&bad, "the host's '%s' is visible (same device and inode)",
				      v->objs[i].path);
			}
	if (bad.n) {
		findings_end(&bad);
		out_line(fd, "host-files", false, "%s", bad.b.s);
	} else {
		out_line(fd, "host-files", true,
			 "canar%s %s%s%s not found; none of %d host paths (/, /root, /home and their entries, the current directory) visible",
			 v->ncanaries > 1 ? "ies" : "y", v->canaries[0], v->ncanaries > 1 ? ", " : "",
			 v->ncanaries > 1 ? v->canaries[1] : "", v->nobjs);
	}
	pisb_buf_release(&bad.b);
}

static void probe_idmap(int fd)
{
	_cleanup_free_ char *um = pisb_read_small("/proc/self/uid_map");
	_cleanup_free_ char *gm = pisb_read_small("/proc/self/gid_map");
	long long root_out = -1;
	bool host_root = false;
	const char *p;

	for (int k = 0; k < 2; k++) {
		for (p = k ? gm : um; p && *p; ) {
			unsigned long long in, out, cnt;
			if (sscanf(p, "%llu %llu %llu", &in, &out, &cnt) == 3) {
				if (out == 0 && cnt > 0)
					host_root = true;
				if (!k && in == 0 && cnt > 0)
					root_out = (long long)out;
			}
			p = strchr(p, '\n');
			if (p)
				p++;
		}
	}
	/* "         0 1000000000      65536\n…" -> "0 1000000000 65536; …" */
	if (um) {
		char *w = um;
		bool space = true;
		for (char *q = um; *q; q++) {
			char ch = *q == '\n' ? ';' : *q == '\t' ? ' ' : *q;
			if (ch == ' ' && space)
				continue;
			space = ch == ' ' || ch == ';';
			*w++ = ch;
			if (ch == ';')
				*w++ = ' ';
		}
		*w = '\0';
	}
	if (host_root || root_out <= 0)
		out_line(fd, "root-mapping", false, "uid_map '%s': %s", um ? um : "?",
			 root_out == 0 ? "root inside is root outside" : "the host's root is mapped in");
	else
		out_line(fd, "root-mapping", true, "uid_map '%s': root inside is uid %lld outside",
			 um, root_out);
}

/* A route lookup only: connect(2) on a UDP socket sends nothing. */
static int route_errno(int family, const char *addr)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int s, r;

	memset(&ss, 0, sizeof(ss));
	if (family == AF_INET) {
		struct sockaddr_in *a = (struct sockaddr_in *)&ss;
		a->sin_family = AF_INET;
		a->sin_port = htons(80);
		inet_pton(AF_INET, addr, &a->sin_addr);
		len = sizeof(*a);
	} else {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
		a->sin6_family = AF_INET6;
		a->sin6_port = htons(80);
		inet_pton(AF_INET6, addr, &a->sin6_addr);
		len = sizeof(*a);
	}
	s = socket(family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return errno;
	r = connect(s, (struct sockaddr *)&ss, len);
	r = r < 0 ? errno : 0;
	close(s);
	return r;
}

/* TCP connect with a deadline: 0 connected, else the errno. */
static int tcp_connect(const char *ip, int port, int timeout_ms)
{
	struct sockaddr_in a;
	int s, r, err = 0;
	socklen_t el = sizeof(err);

	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	a.sin_port = htons((uint16_t)port);
	inet_pton(AF_INET, ip, &a.sin_addr);
	s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (s < 0)
		return errno;
	r = connect(s, (struct sockaddr *)&a, sizeof(a));
	if (r < 0 && errno == EINPROGRESS) {
		struct pollfd p = { s, POLLOUT, 0 };
		if (poll(&p, 1, timeout_ms) <= 0) {
			close(s);
			return ETIMEDOUT;
		}
		getsockopt(s, SOL_SOCKET, SO_ERROR, &err, &el);
	} else if (r < 0) {
		err = errno;
	}
	close(s);
	return err;
}

static void probe_network(const struct verify *v, int fd)
{
	struct if_nameindex *ifs = if_nameindex();
	char names[256] = "";
	int e4 = route_errno(AF_INET, "192.0.2.1");
	int e6 = route_errno(AF_INET6, "2001:db8::1");
	bool ok4 = e4 == ENETUNREACH || e4 == EHOSTUNREACH;
	bool ok6 = e6 == ENETUNREACH || e6 == EHOSTUNREACH || e6 == EAFNOSUPPORT || e6 == EADDRNOTAVAIL;
	int tcp = -1, lo;

	for (struct if_nameindex *i = ifs; i && i->if_name; i++)
		snprintf(names + strlen(names), sizeof(names) - strlen(names), "%s%s",
			 names[0] ? "," : "", i->if_name);
	if (ifs)
		if_freenameindex(ifs);
	/* with no route, a TCP connect fails before any packet exists */
	if (ok4)
		tcp = tcp_connect("192.0.2.1", 80, 1000);
	if (!ok4 || !ok6 || (tcp != ENETUNREACH && tcp != EHOSTUNREACH))
		out_line(fd, "network", false,
			 "interfaces %s; a route out exists: 192.0.2.1:80 %s, [2001:db8::1]:80 %s%s",
			 names[0] ? names : "none",
			 e4 ? strerror(e4) : "routable (route lookup succeeded; nothing sent)",
			 e6 ? strerror(e6) : "routable (route lookup succeeded; nothing sent)",
			 ok4 && tcp != ENETUNREACH && tcp != EHOSTUNREACH ? "; TCP connect did not fail at once" : "");
	else
		out_line(fd, "network", true,
			 "interfaces %s; 192.0.2.1:80: %s (TCP connect: %s, no packet sent); [2001:db8::1]:80: %s",
			 names, strerror(e4), strerror(tcp), strerror(e6));
	lo = tcp_connect("127.0.0.1", v->lport, 1000);
	if (lo == 0)
		out_line(fd, "host-loopback", false, "connected to the host's listener on 127.0.0.1:%d", v->lport);
	else
		out_line(fd, "host-loopback", true,
			 "127.0.0.1:%d (a listener on the host's loopback): %s; the sandbox's loopback is its own",
			 v->lport, strerror(lo));
}

static bool sock_connects_abstract(const char *name)
{
	struct sockaddr_un sa;
	socklen_t len;
	int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0), r;

	if (s < 0)
		return false;
	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	memcpy(sa.sun_path + 1, name, strlen(name));
	len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + strlen(name));
	r = connect(s, (struct sockaddr *)&sa, len);
	close(s);
	return r == 0;
}

/* A docker socket inside that is the sandbox's own daemon's (docker:
 * true): a socket that none of the host's sockets is (device and inode)
 * and whose listener is a process of the sandbox: connected to, its peer
 * has a pid in the sandbox's pid namespace (a listener outside it shows
 * as pid 0, whatever path it is bound or mounted at). */
static bool own_docker_sock(const char *path, const struct verify *v)
{
	struct sockaddr_un sa;
	struct ucred cr;
	socklen_t len = sizeof(cr);
	struct stat sb;
	int s, r;

	if (stat(path, &sb) < 0 || !S_ISSOCK(sb.st_mode))
		return false;
	for (int i = 0; i < v->nsocks; i++)
		if (sb.st_dev == v->socks[i].dev && sb.st_ino == v->socks[i].ino)
			return false;
	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	if ((s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
		return false;
	r = connect(s, (struct sockaddr *)&sa, sizeof(sa));
	if (r == 0)
		r = getsockopt(s, SOL_SOCKET, SO_PEERCRED, &cr, &len);
	close(s);
	return r == 0 && cr.pid > 0;
}

static void probe_sockets(const struct verify *v, int fd)
{
	static const char *const docker[] = { "/var/run/docker.sock", "/run/docker.sock", NULL };
	struct findings bad = { PISB_BUF_INIT, 0 };
	struct hobj inside[MAX_OBJS];
	int nin = 0, budget = 4000, seen = 0;
	bool own_docker = false;
	struct stat sb;

	for (int i = 0; docker[i]; i++)
		if (lstat(docker[i], &sb) == 0) {
			if (own_docker_sock(docker[i], v))
				own_docker = true;
			else
				finding(&bad, "'%s' exists", docker[i]);
		}
	if (v->ssh_sock[0] && lstat(v->ssh_sock, &sb) == 0)
		finding(&bad, "the caller's SSH_AUTH_SOCK '%s' exists", v->ssh_sock);
	for (int i = 0; i < v->nsocks; i++)
		if (lstat(v->socks[i].path, &sb) == 0 && sb.st_dev == v->socks[i].dev &&
		    sb.st_ino == v->socks[i].ino)
			finding(&bad, "the host's socket '%s' is visible", v->socks[i].path);
	find_socks(inside, &nin, "/run", 0, &budget);
	find_socks(inside, &nin, "/var/run", 0, &budget);
	find_socks(inside, &nin, "/tmp", 0, &budget);
	for (int i = 0; i < nin; i++)
		for (int k = 0; k < v->nsocks; k++) {
			if (inside[i].dev != v->socks[k].dev || inside[i].ino != v->socks[k].ino)
				continue;
			seen++;
			if (strcmp(inside[i].path, v->socks[k].path)) /* else reported above */
				finding(&bad, "the host's socket '%s' is visible as '%s'",
					v->socks[k].path, inside[i].path);
			break;
		}
	if (sock_connects_abstract(v->abstract))
		finding(&bad, "connected to the host's abstract socket '@%s'", v->abstract);
	if (bad.n) {
		findings_end(&bad);
		out_line(fd, "host-sockets", false, "%s", bad.b.s);
	} else {
		out_line(fd, "host-sockets", true,
			 "%s; %s; none of the host's %d unix sockets under /run, /var/run, /tmp (canary '%s' included) visible, %d sockets inside are the sandbox's own; host abstract socket '@%s' unreachable",
			 own_docker ? "the docker socket is the sandbox's own daemon's (docker: true: its listener is a process of the sandbox, SO_PEERCRED; not one of the host's sockets)"
				    : "no docker socket",
			 v->ssh_sock[0] ? "the caller's SSH_AUTH_SOCK absent" : "SSH_AUTH_SOCK not set by the caller",
			 v->nsocks, v->sockpath, nin - seen, v->abstract);
	}
	pisb_buf_release(&bad.b);
}

static void probe_procs(const struct verify *v, int fd)
{
	struct findings bad = { PISB_BUF_INIT, 0 };
	struct pisb_buf names = PISB_BUF_INIT;
	DIR *d = opendir("/proc");
	struct dirent *de;
	char comm1[64] = "?";
	unsigned long long st;
	int count = 0;

	proc_stat("1", comm1, sizeof(comm1), &st);
	if (strcmp(comm1, "pisb-init"))
		finding(&bad, "pid 1 is '%s', not pisb-init", comm1);
	while (d && (de = readdir(d))) {
		char comm[64];
		if (de->d_name[0] < '0' || de->d_name[0] > '9' || !proc_stat(de->d_name, comm, sizeof(comm), &st))
			continue;
		count++;
		if (names.len < 300)
			pisb_buf_addf(&names, "%s%s", names.len ? "," : "", comm);
		if (!strcmp(comm, "pisb-svc"))
			finding(&bad, "a pisb-svc (controller) process is visible as pid %s",
				      de->d_name);
		for (int i = 0; i < v->nhp; i++) {
			char pid[16];
			snprintf(pid, sizeof(pid), "%d", (int)v->hp[i].pid);
			if (!strcmp(pid, de->d_name) && st == v->hp[i].start)
				finding(&bad, "%s (host pid %s) is visible", v->hp[i].what, pid);
		}
			}
	if (d)
		closedir(d);
	if (bad.n) {
		findings_end(&bad);
		out_line(fd, "host-processes", false, "%s", bad.b.s);
	} else {
		out_line(fd, "host-processes", true,
			 "pid 1 is pisb-init; %d processes visible (%s); none of the host's (pisb verify, its parent, the controller, host init) is",
			 count, names.s ? names.s : "");
	}
	pisb_buf_release(&bad.b);
	pisb_buf_release(&names);
}

static void probe_ns(const struct verify *v, int fd)
{
	struct pisb_buf same = PISB_BUF_INIT, list = PISB_BUF_INIT;

	for (int i = 0; i < 7; i++) {
		unsigned long in = ns_inode("self", ns_names[i]);
		pisb_buf_addf(&list, "%s%s:[%lu]", list.len ? " " : "", ns_names[i], in);
		if (!in || in == v->ns_ino[i])
			pisb_buf_addf(&same, "%s%s", same.len ? "," : "", ns_names[i]);
	}
	if (same.len)
		out_line(fd, "namespaces", false, "shared with the host: %s (%s)", same.s, list.s);
	else
		out_line(fd, "namespaces", true, "all 7 differ from the host's: %s", list.s);
	pisb_buf_release(&same);
	pisb_buf_release(&list);
}

/* Inside: no secret of the host's project reads back with the host's
 * content (bind: they are covered; copy: they were never copied), every
 * .git of a bound project is read-only, and a bind-ro project takes no
 * write. */
static void probe_project(const struct verify *v, int fd)
{
	struct findings bad = { PISB_BUF_INIT, 0 };
	char probe[64];
	int ws = open(v->pws, O_RDONLY | O_DIRECTORY | O_CLOEXEC), ro_git = 0;

	if (ws < 0) {
		out_line(fd, "project", false, "cannot open the workspace '%s' inside: %s", v->pws, strerror(errno));
		return;
	}
	snprintf(probe, sizeof(probe), ".pisb-verify-%.12s", v->tok);
	for (int i = 0; i < (int)v->pa.nsecret; i++) {
		char hex[65];
		int f = openat(ws, v->pa.secret[i].rel, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
		if (f < 0)
			continue;
		if (pisb_audit_hash_fd(f, hex) && !strcmp(hex, v->pa.secret[i].hex))
			finding(&bad, "the host's secret '%s' reads inside with its content", v->pa.secret[i].rel);
		close(f);
	}
	for (int i = 0; i < (int)v->pa.ngit && !strcmp(v->pa.mode, "bind"); i++) {
		int g = openat(ws, v->pa.git[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC), f;
		if (g < 0)
			continue;
		f = openat(g, probe, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (f >= 0) {
			close(f);
			unlinkat(g, probe, 0);
			finding(&bad, "the project's '%s' takes writes inside", v->pa.git[i]);
		} else {
			ro_git++;
		}
		close(g);
	}
	if (!strcmp(v->pa.mode, "bind-ro")) {
		int f = openat(ws, probe, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (f >= 0) {
			close(f);
			unlinkat(ws, probe, 0);
			finding(&bad, "the project, bound read-only, takes writes inside");
		}
	}
	close(ws);
	if (bad.n) {
		findings_end(&bad);
		out_line(fd, "project", false, "%s", bad.b.s);
	} else {
		const char *how = !strcmp(v->pa.mode, "bind") ? (ro_git ? "every .git read-only" : "no .git")
				  : !strcmp(v->pa.mode, "bind-ro") ? "the project read-only" : "a copy";
		if (v->pa.secrets_in)
			out_line(fd, "project", true, "%s: %s; project.secrets: include (the secrets are inside by choice); %d host entries walked%s",
				 v->pa.mode, how, v->pa.walked, v->pa.cut ? " (the walk stopped at its cap)" : "");
		else
			out_line(fd, "project", true, "%s: %d secret file%s of the host's project (%s%s) not readable inside; %s; %d host entries walked%s",
				 v->pa.mode, (int)v->pa.nsecret, (int)v->pa.nsecret == 1 ? "" : "s", (int)v->pa.nsecret ? v->pa.secret[0].rel : "none",
				 (int)v->pa.nsecret > 1 ? ", ..." : "", how, v->pa.walked,
				 v->pa.cut ? " (the walk stopped at its cap)" : "");
	}
	pisb_buf_release(&bad.b);
}

static void run_probes(const struct verify *v, int fd)
{
	probe_files(v, fd);
	probe_idmap(fd);
	probe_network(v, fd);
	probe_sockets(v, fd);
	probe_procs(v, fd);
	probe_ns(v, fd);
	if (v->project)
		probe_project(v, fd);
}

/* --- host side --- */

struct target {
	int idir;
	struct pisb_record rec;
	struct pisb_runtime rt;
	struct pisb_config *cfg;
};


/* Probe A: C probes in a child inside the sandbox (entered like pisb exec
 * enters it).  Lines "check\t0|1\tevidence" land in out. */
static void probe_inside(struct verify *v, const struct target *t, int *close_fds,
			 struct pisb_buf *out)
{
	int p[2], status;
	pid_t pid;
	bool privileged = geteuid() == 0;

	if (pipe2(p, O_CLOEXEC) < 0)
		return;
	pid = fork();
	if (pid < 0) {
		close(p[0]);
		close(p[1]);
		return;
	}
	if (pid == 0) {
		struct pisb_err ce = PISB_ERR_INIT;
		pid_t inner;

		close(p[0]);
		for (int i = 0; close_fds[i] >= 0; i++)
			close(close_fds[i]);
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		prctl(PR_SET_NAME, "pisb-verify");
		if (v->on_host) {
			run_probes(v, p[1]);
			_exit(0);
		}
		if (pisb_sandbox_enter(t->rt.init.pid, t->rt.init.start, &ce) < 0) {
			out_line(p[1], "!enter", false, "%s", ce.msg);
			_exit(1);
		}
		/* a pid namespace applies to children: fork once more */
		inner = fork();
		if (inner < 0)
			_exit(1);
		if (inner > 0) {
			close(p[1]);
			while (waitpid(inner, &status, 0) < 0 && errno == EINTR)
				;
			_exit(0);
		}
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (pisb_sandbox_become_root(privileged, &ce) < 0) {
			out_line(p[1], "!enter", false, "%s", ce.msg);
			_exit(1);
		}
		prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
		run_probes(v, p[1]);
		_exit(0);
	}
	close(p[1]);
	pisb_read_until(p[0], out, pisb_mono_ms() + VERIFY_PROBE_MS, 1 << 20);
	close(p[0]);
	if (pisb_wait_timeout(pid, &status, 2000) == 0) {
		kill(pid, SIGKILL);
		waitpid(pid, &status, 0);
	}
}

/* Probe B: a real command started the way every sandbox command starts
 * (pisb_local_spawn, the sandbox environment), reporting its environment
 * and its privilege flags. */
static const char probe_sh[] =
	"export -p; echo '--pisb-status--'; "
	"while IFS= read -r l; do case $l in NoNewPrivs*|CapEff*|CapBnd*) echo \"$l\";; esac; done < /proc/self/status";

static int probe_spawn(struct verify *v, const struct target *t, struct pisb_buf *out,
		       char *err, size_t errn)
{
	_cleanup_strv_ struct pisb_strv env = PISB_STRV_INIT;
	char *argv[] = { "/bin/sh", "-c", (char *)probe_sh, NULL };
	struct pisb_err e = PISB_ERR_INIT;
	int p[2], status, xe = 0;
	pid_t pid;

	if (pipe2(p, O_CLOEXEC) < 0) {
		snprintf(err, errn, "pipe: %s", strerror(errno));
		return -1;
	}
	if (v->on_host) {
		pid = fork();
		if (pid == 0) {
			dup2(p[1], 1);
			execve(argv[0], argv, environ);
			_exit(127);
		}
	} else {
		struct pisb_spawn s;
		pisb_sandbox_env(t->cfg, NULL, NULL, 0, &env);
		memset(&s, 0, sizeof(s));
		s.rt = &t->rt;
		s.argv = argv;
		s.envp = env.v;
		s.cwd = "/";
		s.stdin_fd = -1;
		s.stdout_fd = p[1];
		s.stderr_fd = -1;
		s.new_session = true;
		/* not s.pdeathsig: with pisb_local_spawn the command's parent is
		 * the short-lived joining process, whose exit would kill it */
		pid = pisb_local_spawn(&s, &xe, &e);
	}
	close(p[1]);
	if (pid < 0 || xe) {
		close(p[0]);
		snprintf(err, errn, "cannot run /bin/sh inside: %s", pid < 0 ? e.msg : strerror(xe));
		if (pid > 0)
			waitpid(pid, &status, 0);
		return -1;
	}
	pisb_read_until(p[0], out, pisb_mono_ms() + VERIFY_PROBE_MS, 1 << 20);
	close(p[0]);
	if (pisb_wait_timeout(pid, &status, 2000) == 0) {
		kill(pid, SIGKILL);
		waitpid(pid, &status, 0);
	}
	return 0;
}

static void check_env(struct verify *v, const char *out, const char *err)
{
	const char *sep = out ? strstr(out, "--pisb-status--") : NULL;
	struct pisb_buf names = PISB_BUF_INIT;
	int n = 0;

	if (!sep) {
		vadd(v, "host-env", false, "could not read the environment inside: %s",
		     err && *err ? err : "no output");
		vadd(v, "no-new-privs", false, "could not read /proc/self/status inside: %s",
		     err && *err ? err : "no output");
		return;
	}
	for (const char *p = out; p < sep; ) {
		const char *nl = strchr(p, '\n');
		const char *s = p, *eq;
		if (!nl || nl > sep)
			nl = sep;
		if (!strncmp(s, "export ", 7))
			s += 7;
		eq = memchr(s, '=', (size_t)(nl - s));
		if (eq && names.len < 400 && !memchr(s, ' ', (size_t)(eq - s))) {
			pisb_buf_addf(&names, "%s%.*s", names.len ? " " : "", (int)(eq - s), s);
			n++;
		}
		p = nl + 1;
	}
	if (memmem(out, (size_t)(sep - out), v->envname, strlen(v->envname)) ||
	    memmem(out, (size_t)(sep - out), v->tok, strlen(v->tok)))
		vadd(v, "host-env", false, "the canary %s from pisb's own environment is visible inside (%d variables: %s)",
		     v->envname, n, names.s ? names.s : "");
	else
		vadd(v, "host-env", true,
		     "the canary %s set in pisb's environment is absent; a fresh command sees %d variables: %s",
		     v->envname, n, names.s ? names.s : "");
	{
		const char *nnp = strstr(sep, "NoNewPrivs:");
		const char *bnd = strstr(sep, "CapBnd:");
		long val = nnp ? strtol(nnp + 11, NULL, 10) : -1;
		char b[64] = "?";
		if (bnd)
			sscanf(bnd + 7, "%63s", b);
		if (val == 1)
			vadd(v, "no-new-privs", true,
			     "NoNewPrivs 1 for sandbox commands (setuid binaries cannot gain privileges); CapBnd %s within the sandbox's own user namespace",
			     b);
		else
			vadd(v, "no-new-privs", false, "NoNewPrivs is %ld for a sandbox command", val);
	}
	pisb_buf_release(&names);
}

/* The path of pid's cgroup for a controller (v1) or the unified one. */
static bool cgroup_of(pid_t pid, const char *ctrl, int ver, char *out, size_t n)
{
	char path[64];
	_cleanup_free_ char *s = NULL;

	snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)pid);
	s = pisb_read_small(path);
	for (char *l = s, *nl; l && *l; l = nl) {
		char *c1, *c2;
		nl = strchr(l, '\n');
		if (nl)
			*nl++ = '\0';
		c1 = strchr(l, ':');
		c2 = c1 ? strchr(c1 + 1, ':') : NULL;
		if (!c2)
			continue;
		*c2 = '\0';
		if (ver == 2) {
			if (!strcmp(c1 + 1, "")) {
				snprintf(out, n, "%s", c2 + 1);
				return true;
			}
			continue;
		}
		for (char *tok = strtok(c1 + 1, ","); tok; tok = strtok(NULL, ","))
			if (!strcmp(tok, ctrl)) {
				snprintf(out, n, "%s", c2 + 1);
				return true;
			}
	}
	return false;
}

/* -1 no limit or unreadable, else the value (cpu: quota in µs/100 ms). */
static long long cg_limit(pid_t pid, const char *what, int ver, char *where, size_t wn)
{
	const char *file;
	char cg[512], path[1024];
	_cleanup_free_ char *s = NULL;

	if (!strcmp(what, "memory"))
		file = ver == 2 ? "memory.max" : "memory.limit_in_bytes";
	else if (!strcmp(what, "pids"))
		file = "pids.max";
	else
		file = ver == 2 ? "cpu.max" : "cpu.cfs_quota_us";
	if (!cgroup_of(pid, what, ver, cg, sizeof(cg))) {
		snprintf(where, wn, "?");
		return -1;
	}
	snprintf(where, wn, "%s", cg);
	if (ver == 2)
		snprintf(path, sizeof(path), "/sys/fs/cgroup%s/%s", cg, file);
	else
		snprintf(path, sizeof(path), "/sys/fs/cgroup/%s%s/%s", what, cg, file);
	s = pisb_read_small(path);
	if (!s || !strncmp(s, "max", 3))
		return -1;
	{
		long long v = strtoll(s, NULL, 10);
		/* v1 "unlimited" is a huge number (or -1 for a cpu quota) */
		if (v <= 0 || v >= (1LL << 62))
			return -1;
		return v;
	}
}

static void check_limits(struct verify *v, const struct target *t)
{
	int ver = pisb_cgroup_version();
	pid_t pid = v->on_host ? getpid() : t->rt.init.pid;
	bool explicit_ = t->cfg->profile_explicit || t->cfg->resources_explicit;
	long long want_mem = (long long)t->cfg->memory_gib << 30, want_pids = t->cfg->pids,
		  want_cpu = (long long)t->cfg->cpus * 100000;
	char wm[512], wp[512], wc[512];
	long long mem = cg_limit(pid, "memory", ver, wm, sizeof(wm));
	long long pids = cg_limit(pid, "pids", ver, wp, sizeof(wp));
	long long cpu = cg_limit(pid, "cpu", ver, wc, sizeof(wc));
	bool ok_mem = mem > 0 && mem <= want_mem, ok_pids = pids > 0 && pids <= want_pids,
	     ok_cpu = cpu > 0 && cpu <= want_cpu;
	char asked[128];

	snprintf(asked, sizeof(asked), "%s: %d cpus, %d GiB, %d pids",
		 explicit_ ? "asked for in the config" : "the default profile's, not asked for explicitly",
		 t->cfg->cpus, t->cfg->memory_gib, t->cfg->pids);
	if (ok_mem && ok_pids && ok_cpu) {
		vadd(v, "limits", true,
		     "in force on %s (cgroup v%d %s): memory %lld bytes, pids %lld, cpu quota %lld us per 100 ms (%s)",
		     v->on_host ? "pisb verify itself" : "the sandbox init", ver, wm, mem, pids, cpu, asked);
		return;
	}
	vadd(v, "limits", false,
	     "not all in force on %s (cgroup v%d): memory %s, pids %s, cpus %s (%s)%s%s; unenforced default limits count as a failure too (see 'pisb doctor')",
	     v->on_host ? "pisb verify itself" : "the sandbox init", ver,
	     ok_mem ? "ok" : mem < 0 ? "unlimited" : "above the limit asked",
	     ok_pids ? "ok" : pids < 0 ? "unlimited" : "above the limit asked",
	     ok_cpu ? "ok" : cpu < 0 ? "unlimited" : "above the limit asked", asked,
	     t->rt.limits_note ? ": " : "", t->rt.limits_note ? t->rt.limits_note : "");
}

static bool check_init_uid(struct verify *v, const struct target *t, char *ev, size_t n)
{
	char path[64];
	_cleanup_free_ char *s = NULL;
	pid_t pid = v->on_host ? 1 : t->rt.init.pid;
	const char *u;
	unsigned r = 0, e = 0, sv = 0, f = 0;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	s = pisb_read_small(path);
	u = s ? strstr(s, "\nUid:") : NULL;
	if (!u || sscanf(u + 5, "%u %u %u %u", &r, &e, &sv, &f) != 4) {
		snprintf(ev, n, "cannot read the uid of %s %d", v->on_host ? "host init" : "the sandbox init", (int)pid);
		return false;
	}
	snprintf(ev, n, "%s (pid %d) runs as host uid %u%s", v->on_host ? "host init" : "the sandbox init",
		 (int)pid, e, r && e && sv && f ? "" : " (root)");
	return r && e && sv && f;
}

/* The sandbox's project and the host's secrets in it. */
static void project_collect(struct verify *v, const struct target *t)
{
	if (!t->cfg->workspace || pisb_project_audit(t->idir, &t->cfg->project, &v->pa) <= 0)
		return;
	v->project = true;
	snprintf(v->pws, sizeof(v->pws), "%s", t->cfg->workspace);
}

static void free_verify(struct verify *v)
{
	pisb_project_audit_release(&v->pa);
	for (int i = 0; i < v->nc; i++)
		free(v->c[i].evidence);
	if (v->sockpath[0])
		unlink(v->sockpath);
	for (int i = 0; i < v->ncanaries; i++)
		unlink(v->canaries[i]);
}

static void plant_canary(struct verify *v, const char *dir)
{
	char path[512];
	int fd;

	if (!dir || dir[0] != '/' || v->ncanaries >= 2 || access(dir, W_OK) < 0)
		return;
	snprintf(path, sizeof(path), "%s/.pisb-canary-XXXXXX", strcmp(dir, "/") ? dir : "");
	fd = mkostemp(path, O_CLOEXEC);
	if (fd < 0)
		return;
	pisb_write_all(fd, v->tok, strlen(v->tok));
	close(fd);
	snprintf(v->canaries[v->ncanaries++], sizeof(v->canaries[0]), "%s", path);
}

/* sb's record and config (borrowed), status.json read now */
static int load_target(struct pisb_sandbox *sb, struct target *t, struct pisb_err *e)
{
	memset(t, 0, sizeof(*t));
	t->idir = sb->idir;
	if (pisb_sandbox_borrow(sb, &t->rec, &t->cfg, &t->rt, e) < 0)
		return pisb_err_prefix(e, "sandbox '%s'", sb->name);
	if (!pisb_lock_is_held(t->idir, "controller.lock") || strcmp(t->rt.state, "running"))
		return pisb_err_set(e, PISB_EXIT_BACKEND,
				    "sandbox '%s' is not running (start it with 'pisb start %s')",
				    sb->name, sb->name);
	return 0;
}

static void release_target(struct target *t)
{
	pisb_runtime_release(&t->rt);
}

static const char *const order[] = {
	"host-files", "host-env", "root-mapping", "network", "host-loopback", "limits",
	"host-sockets", "host-processes", "namespaces", "no-new-privs", "project", NULL,
};

int pisb_local_verify(struct pisb_sandbox *sb, bool json, struct pisb_buf *out, struct pisb_err *e)
{
	const char *name = sb->name;
	struct target t;
	struct verify *v = NULL;
	_cleanup_close_ int lsock = -1, asock = -1, csock = -1;
	_cleanup_buf_ struct pisb_buf a = PISB_BUF_INIT, bout = PISB_BUF_INIT, rep = PISB_BUF_INIT;
	char berr[1024] = "", uidev[256];
	int ret = -1, nfail = 0;

	if (load_target(sb, &t, e) < 0)
		goto out;
	v = xcalloc(1, sizeof(*v));
	{
		const char *h = getenv("PISB_VERIFY_ON_HOST");
		v->on_host = h && !strcmp(h, "1");
	}
	pisb_random_hex(v->tok, 32);
	snprintf(v->envname, sizeof(v->envname), "PISB_CANARY_%.12s", v->tok);
	/* the caller's environment, as every pisb command inherits it */
	setenv(v->envname, v->tok, 1);

	/* canaries: files in /tmp and $HOME, a unix socket, listeners */
	plant_canary(v, "/tmp");
	plant_canary(v, getenv("HOME"));
	if (!v->ncanaries) {
		pisb_err_set(e, PISB_EXIT_FAIL, "verify: cannot plant a canary file in /tmp or $HOME");
		goto out;
	}
	{
		struct sockaddr_un sa;
		memset(&sa, 0, sizeof(sa));
		sa.sun_family = AF_UNIX;
		snprintf(v->sockpath, sizeof(v->sockpath), "/tmp/.pisb-canary-%.12s.sock", v->tok);
		snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", v->sockpath);
		csock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (csock < 0 || bind(csock, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(csock, 4) < 0) {
			pisb_err_sys(e, PISB_EXIT_FAIL, "verify: canary socket '%s'", v->sockpath);
			v->sockpath[0] = '\0';
			goto out;
		}
		snprintf(v->abstract, sizeof(v->abstract), "pisb-verify-%.12s", v->tok);
		memset(&sa, 0, sizeof(sa));
		sa.sun_family = AF_UNIX;
		memcpy(sa.sun_path + 1, v->abstract, strlen(v->abstract));
		asock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (asock < 0 || bind(asock, (struct sockaddr *)&sa,
				      (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + strlen(v->abstract))) < 0 ||
		    listen(asock, 4) < 0) {
			pisb_err_sys(e, PISB_EXIT_FAIL, "verify: abstract canary socket");
			goto out;
		}
	}
	{
		struct sockaddr_in sa;
		socklen_t l = sizeof(sa);
		memset(&sa, 0, sizeof(sa));
		sa.sin_family = AF_INET;
		sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		lsock = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
		if (lsock < 0 || bind(lsock, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(lsock, 4) < 0 ||
		    getsockname(lsock, (struct sockaddr *)&sa, &l) < 0) {
			pisb_err_sys(e, PISB_EXIT_FAIL, "verify: listen on 127.0.0.1");
			goto out;
		}
		v->lport = ntohs(sa.sin_port);
	}
	/* host paths that must stay out of sight */
	add_obj(v->objs, &v->nobjs, "/");
	add_tree(v, "/root");
	add_tree(v, "/home");
	{
		_cleanup_free_ char *cwd = getcwd(NULL, 0);
		const char *home = getenv("HOME");
		if (cwd && strcmp(cwd, "/"))
			add_obj(v->objs, &v->nobjs, cwd);
		if (home && home[0] == '/' && strcmp(home, "/") && strcmp(home, "/root") &&
		    !pisb_str_starts(home, "/home/"))
			add_obj(v->objs, &v->nobjs, home);
	}
	{
		int budget = 4000;
		/* the planted one first: it must be looked for whatever else is */
		add_obj(v->socks, &v->nsocks, v->sockpath);
		find_socks(v->socks, &v->nsocks, "/run", 0, &budget);
		find_socks(v->socks, &v->nsocks, "/var/run", 0, &budget);
		find_socks(v->socks, &v->nsocks, "/tmp", 0, &budget);
		const char *ssh = getenv("SSH_AUTH_SOCK");
		if (ssh)
			snprintf(v->ssh_sock, sizeof(v->ssh_sock), "%s", ssh);
	}
	/* host processes, by pid and start time */
	{
		struct { pid_t pid; const char *what; } hp[] = {
			{ getpid(), "pisb verify" }, { getppid(), "pisb verify's parent" },
			{ t.rt.controller.pid, "the controller" }, { 1, "host init" },
		};
		for (size_t i = 0; i < 4; i++) {
			char pid[16], comm[64];
			snprintf(pid, sizeof(pid), "%d", (int)hp[i].pid);
			if (hp[i].pid > 0 && proc_stat(pid, comm, sizeof(comm), &v->hp[v->nhp].start)) {
				v->hp[v->nhp].pid = hp[i].pid;
				snprintf(v->hp[v->nhp].what, sizeof(v->hp[0].what), "%s", hp[i].what);
				v->nhp++;
			}
		}
	}
	for (int i = 0; i < 7; i++)
		v->ns_ino[i] = ns_inode("self", ns_names[i]);
	project_collect(v, &t);

	/* probe A: C probes inside */
	{
		int close_fds[] = { lsock, asock, csock, t.idir, -1 };
		probe_inside(v, &t, close_fds, &a);
	}
	/* probe B: a real sandbox command */
	probe_spawn(v, &t, &bout, berr, sizeof(berr));

	/* collect */
	for (char *l = a.s, *nl; l && *l; l = nl) {
		char *t1, *t2;
		nl = strchr(l, '\n');
		if (nl)
			*nl++ = '\0';
		t1 = strchr(l, '\t');
		t2 = t1 ? strchr(t1 + 1, '\t') : NULL;
		if (!t2)
			continue;
		*t1 = *t2 = '\0';
		if (!strcmp(l, "!enter")) {
			pisb_err_set(e, PISB_EXIT_BACKEND, "verify '%s': cannot enter the sandbox: %s", name, t2 + 1);
			goto out;
		}
		for (int k = 0; order[k]; k++)
			if (!strcmp(order[k], l))
				vadd(v, order[k], t1[1] == '1', "%s", t2 + 1);
	}
	check_env(v, bout.s, berr);
	check_limits(v, &t);
	/* root-mapping: add the host's view of the init's uid */
	{
		bool init_ok = check_init_uid(v, &t, uidev, sizeof(uidev));
		struct pisb_ids shared;
		/* a sandbox from before per-sandbox ranges: its root is the
		 * base every such sandbox shares (see pisb doctor, id-ranges) */
		pisb_ids_for_caller(&shared);
		bool own = !(geteuid() == 0 && !t.rec.uid_base && t.rt.uid_base == shared.uid_base);
		for (int i = 0; i < v->nc; i++) {
			if (strcmp(v->c[i].name, "root-mapping"))
				continue;
			char *ev = own ? xasprintf("%s; %s", v->c[i].evidence, uidev)
				: xasprintf("%s; %s, the host id range shared by every sandbox made before ranges were per sandbox: recreate it to get one of its own (see 'pisb doctor')",
					    v->c[i].evidence, uidev);
			init_ok = init_ok && own;
			free(v->c[i].evidence);
			v->c[i].evidence = ev;
			v->c[i].pass = v->c[i].pass && init_ok;
		}
	}
	/* host-loopback: nothing may have reached the listener */
	{
		int c = accept4(lsock, NULL, NULL, SOCK_CLOEXEC);
		if (c >= 0) {
			close(c);
			for (int i = 0; i < v->nc; i++)
				if (!strcmp(v->c[i].name, "host-loopback") && v->c[i].pass) {
					v->c[i].pass = false;
					free(v->c[i].evidence);
					v->c[i].evidence = xasprintf("the host's listener on 127.0.0.1:%d accepted a connection during the probe", v->lport);
				}
		}
	}
	/* a check the probe could not report is a failure, not a pass */
	for (int k = 0; order[k]; k++) {
		bool found = false;
		for (int i = 0; i < v->nc; i++)
			if (!strcmp(v->c[i].name, order[k]))
				found = true;
		if (!found && !strcmp(order[k], "project") && !v->project)
			continue;   /* no project, no check */
		if (!found)
			vadd(v, order[k], false, "the probe did not report (it died or timed out)");
	}

	/* report, in the fixed order */
	{
		int idx[16], n = 0;
		struct pisb_jw w;

		for (int k = 0; order[k]; k++)
			for (int i = 0; i < v->nc; i++)
				if (!strcmp(v->c[i].name, order[k])) {
					idx[n++] = i;
					nfail += !v->c[i].pass;
					break;
				}
		if (json) {
			pisb_jw_init(&w, &rep);
			pisb_jw_obj(&w);
			pisb_jw_kstr(&w, "name", name);
			pisb_jw_kbool(&w, "onHost", v->on_host);
			pisb_jw_key(&w, "checks");
			pisb_jw_arr(&w);
			for (int i = 0; i < n; i++) {
				pisb_jw_obj(&w);
				pisb_jw_kstr(&w, "check", v->c[idx[i]].name);
				pisb_jw_kbool(&w, "pass", v->c[idx[i]].pass);
				pisb_jw_kstr(&w, "evidence", v->c[idx[i]].evidence);
				pisb_jw_obj_end(&w);
			}
			pisb_jw_arr_end(&w);
			pisb_jw_kbool(&w, "pass", nfail == 0);
			pisb_jw_obj_end(&w);
			pisb_buf_addc(&rep, '\n');
		} else {
			for (int i = 0; i < n; i++)
				pisb_buf_addf(&rep, "%s  %-14s  %s\n", v->c[idx[i]].pass ? "PASS" : "FAIL",
					      v->c[idx[i]].name, v->c[idx[i]].evidence);
			if (v->on_host)
				pisb_buf_adds(&rep, "(PISB_VERIFY_ON_HOST=1: a test hook; the probes ran on the host, where every check should fail)\n");
		}
	}
	pisb_buf_add(out, rep.s ? rep.s : "", rep.len);
	ret = nfail ? PISB_EXIT_FAIL : 0;
out:
	if (v) {
		unsetenv(v->envname);
		free_verify(v);
		free(v);
	}
	release_target(&t);
	return ret;
}
