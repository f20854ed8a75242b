/* project_audit.c - the host side of verify's project check (see
 * project_audit.h). */
#include "project_audit.h"
#include "err.h"
#include "json.h"
#include "proc.h"
#include "project.h"
#include "sha256.h"
#include "state.h"
#include "util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define AUDIT_MS 15000

bool pisb_audit_hash_fd(int fd, char hex[65])
{
	struct pisb_sha256 c;
	unsigned char buf[16384], d[32];
	size_t total = 0;
	ssize_t n;

	pisb_sha256_init(&c);
	while (total <= PISB_AUDIT_SECRET_MAX && (n = read(fd, buf, sizeof(buf))) != 0) {
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return false;
		}
		pisb_sha256_update(&c, buf, (size_t)n);
		total += (size_t)n;
	}
	pisb_sha256_final(&c, d);
	pisb_sha256_hex(d, hex);
	return true;
}

/* The walk (in the child): lines "S\tHEX\tREL", "G\tREL", then
 * "N\tCOUNT\tCUT" on out. */
struct walk {
	const struct pisb_project_config *pc;
	FILE *out;
	int walked;
	bool cut;
};

static void walk(struct walk *w, int dfd, const char *rel, int depth, bool secret_dir)
{
	DIR *d;
	struct dirent *de;
	int dup_fd = dup(dfd);

	if (dup_fd < 0 || !(d = fdopendir(dup_fd))) {
		if (dup_fd >= 0)
			close(dup_fd);
		return;
	}
	while (!w->cut && (de = readdir(d))) {
		char crel[4096];
		struct stat sb;
		bool secret;
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (++w->walked > PISB_AUDIT_WALK_MAX) {
			w->cut = true;
			break;
		}
		if (strpbrk(de->d_name, "\t\n") ||
		    snprintf(crel, sizeof(crel), "%s%s%s", rel, *rel ? "/" : "", de->d_name) >= (int)sizeof(crel) ||
		    fstatat(dfd, de->d_name, &sb, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		secret = secret_dir || pisb_project_secret(crel, de->d_name, w->pc ? w->pc->secret_patterns : NULL,
							     w->pc ? w->pc->nsecret_patterns : 0);
		if (S_ISDIR(sb.st_mode)) {
			int sub;
			if (!strcmp(de->d_name, ".git")) {
				fprintf(w->out, "G\t%s\n", crel);
				continue;
			}
			if (depth >= 64)
				continue;
			sub = openat(dfd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (sub >= 0) {
				walk(w, sub, crel, depth + 1, secret);
				close(sub);
			}
		} else if (secret && S_ISREG(sb.st_mode) && sb.st_size > 0 && sb.st_size <= PISB_AUDIT_SECRET_MAX) {
			char hex[65];
			int f = openat(dfd, de->d_name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
			if (f >= 0 && pisb_audit_hash_fd(f, hex))
				fprintf(w->out, "S\t%s\t%s\n", hex, crel);
			if (f >= 0)
				close(f);
		}
	}
	closedir(d);
}


static void parse(struct pisb_project_audit *a, char *s)
{
	for (char *l = s, *nl; l && *l; l = nl) {
		nl = strchr(l, '\n');
		if (nl)
			*nl++ = '\0';
		if (l[0] == 'S' && l[1] == '\t' && strlen(l) > 67 && l[66] == '\t' && !a->secrets_in) {
			a->secret = xrealloc(a->secret, sizeof(*a->secret) * (a->nsecret + 1));
			memcpy(a->secret[a->nsecret].hex, l + 2, 64);
			a->secret[a->nsecret].hex[64] = '\0';
			a->secret[a->nsecret++].rel = xstrdup(l + 67);
		} else if (l[0] == 'G' && l[1] == '\t' && l[2]) {
			a->git = xrealloc(a->git, sizeof(*a->git) * (a->ngit + 1));
			a->git[a->ngit++] = xstrdup(l + 2);
		} else if (l[0] == 'N' && l[1] == '\t') {
			char *c = strchr(l + 2, '\t');
			a->walked = atoi(l + 2);
			a->cut = c && atoi(c + 1);
		}
	}
}

int pisb_project_audit(int idir, const struct pisb_project_config *pc, struct pisb_project_audit *a)
{
	_cleanup_buf_ struct pisb_buf b = PISB_BUF_INIT, lines = PISB_BUF_INIT;
	_cleanup_free_ char *dir = NULL, *mode = NULL;
	struct pisb_err ig = PISB_ERR_INIT;
	struct pisb_json j;
	struct stat sb;
	int p[2], status;
	pid_t pid;

	memset(a, 0, sizeof(*a));
	if (pisb_read_file_at(idir, "project/info.json", &b, 1 << 20) < 0 ||
	    pisb_json_parse(&j, b.s, b.len, &ig) < 0)
		return 0;
	dir = pisb_json_str(&j, pisb_json_get(&j, 0, "dir"));
	mode = pisb_json_str(&j, pisb_json_get(&j, 0, "mode"));
	pisb_json_release(&j);
	if (!dir || dir[0] != '/' || !mode || strlen(mode) >= sizeof(a->mode))
		return 0;
	snprintf(a->mode, sizeof(a->mode), "%s", mode);
	a->secrets_in = pc && pc->secrets_include;
	if (stat(dir, &sb) < 0 || !S_ISDIR(sb.st_mode) || pipe2(p, O_CLOEXEC) < 0)
		return 1;
	pid = fork();
	if (pid < 0) {
		close(p[0]);
		close(p[1]);
		return 1;
	}
	if (pid == 0) {
		struct walk w = { pc, NULL, 0, false };
		int top;
		close(p[0]);
		/* the path as the caller (the owner may not reach it), the
		 * tree as its owner */
		top = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (top < 0 || (geteuid() == 0 && (setgroups(0, NULL) < 0 || setgid(sb.st_gid) < 0 ||
						  setuid(sb.st_uid) < 0)) ||
		    !(w.out = fdopen(p[1], "w")))
			_exit(1);
		walk(&w, top, "", 0, false);
		fprintf(w.out, "N\t%d\t%d\n", w.walked, w.cut);
		fclose(w.out);
		_exit(0);
	}
	close(p[1]);
	pisb_read_until(p[0], &lines, pisb_mono_ms() + AUDIT_MS, 64u << 20);
	close(p[0]);
	if (pisb_wait_timeout(pid, &status, 2000) == 0) {
		kill(pid, SIGKILL);
		waitpid(pid, &status, 0);
	}
	if (lines.s)
		parse(a, lines.s);
	return 1;
}

void pisb_project_audit_release(struct pisb_project_audit *a)
{
	for (size_t i = 0; i < a->nsecret; i++)
		free(a->secret[i].rel);
	free(a->secret);
	for (size_t i = 0; i < a->ngit; i++)
		free(a->git[i]);
	free(a->git);
	memset(a, 0, sizeof(*a));
}
