/* vm_verify.c - `pisb verify` on the vm driver: the live isolation audit
 * of one running VM, as far as a VM's isolation reaches.  pisb plants
 * canaries on the host (a file in /tmp and in $HOME, a variable in its own
 * environment) and runs one probe script in the guest through the agent,
 * as `pisb exec` does; a fourth check has the guest try to write into the
 * host's userland share after remounting it read-write, and pisb looks on
 * the host for what it tried to write.
 *
 * Checks, in this order:
 *   host-files  the canary files are not visible in the guest
 *   host-env    the canary variable is in no guest process's environment
 *   network     the guest has no network interface but lo
 *   host-share  the share stays read-only: the guest's write failed and
 *               nothing of it is on the host (the host's own evidence)
 *   project     (a sandbox with a project) no secret of the host's project
 *               reads in the guest with the host's content (the host
 *               hashes them, project_audit.h; a second probe hashes the
 *               same paths in the guest), a bound project's .git takes no
 *               write, a bind-ro project none
 *
 * The guest's answer is hostile input: read with a 4 KiB cap and a
 * deadline, parsed line by line, and shown only after its control
 * characters are replaced.  A guest that does not answer a check fails it.
 * The report has the local driver's JSON shape (pisb-create(1)).
 */
#include "vm.h"
#include "vm_internal.h"
#include "vm_proto.h"
#include "config.h"
#include "driver.h"
#include "err.h"
#include "json.h"
#include "proc.h"
#include "project_audit.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define ANSWER_MAX 4096
#define PROBE_MS 120000          /* under TCG a loaded host is slow */

/* $1 the token, then the canary paths.  One line per check. */
static const char probe[] =
	"T=$1; shift\n"
	"printf 'net'; for i in /sys/class/net/*; do [ -e \"$i\" ] && printf ' %s' \"${i##*/}\"; done; echo\n"
	/* one grep over every environment (its own has no $T) */
	"n=$(grep -l -a -F -e \"$T\" /proc/[0-9]*/environ 2>/dev/null | wc -l)\n"
	"echo \"env $((n))\"\n"
	"printf 'files'; for f in \"$@\"; do if [ -e \"$f\" ] || [ -L \"$f\" ]; then printf ' %s' \"$f\"; fi; done; echo\n"
	"mount -o remount,rw " "/run/pisb/host" " 2>/dev/null\n"
	"if ( : > \"/run/pisb/host/usr/.pisb-verify-$T\" ) 2>/dev/null; then echo 'share writable'\n"
	"  rm -f \"/run/pisb/host/usr/.pisb-verify-$T\"\n"
	"else echo 'share readonly'; fi\n"
	/* back to read-only (a remount can be refused while busy: again) */
	"for i in 1 2 3 4 5; do mount -o remount,ro /run/pisb/host 2>/dev/null && break; sleep 1; done\n"
	"echo end\n";

/* $1 the workspace, $2 the mode, $3 the token, then HEX REL pairs, "--",
 * then the .git directories. */
static const char project_probe[] =
	"ws=$1 mode=$2 t=$3; shift 3\n"
	"cd \"$ws\" 2>/dev/null || { echo 'ws missing'; echo end; exit 0; }\n"
	"command -v sha256sum >/dev/null && command -v head >/dev/null || { echo 'tools missing'; echo end; exit 0; }\n"
	"n=0 first=\n"
	"while [ $# -ge 2 ] && [ \"$1\" != -- ]; do h=$1 r=$2; shift 2\n"
	"  if [ -f \"$r\" ] && [ ! -L \"$r\" ]; then\n"
	"    g=$(head -c 1048577 -- \"$r\" 2>/dev/null | sha256sum); g=${g%% *}\n"
	"    if [ \"$g\" = \"$h\" ]; then n=$((n + 1)); [ -n \"$first\" ] || first=$r; fi\n"
	"  fi\n"
	"done\n"
	"echo \"leaks $n $first\"\n"
	"[ \"$1\" = -- ] && shift\n"
	"w=0 ro=0 gfirst=\n"
	"if [ \"$mode\" = bind ]; then for d in \"$@\"; do\n"
	"  [ -d \"$d\" ] && [ ! -L \"$d\" ] || continue\n"
	"  if ( : > \"$d/.pisb-verify-$t\" ) 2>/dev/null; then rm -f \"$d/.pisb-verify-$t\"; w=$((w + 1)); [ -n \"$gfirst\" ] || gfirst=$d\n"
	"  else ro=$((ro + 1)); fi\n"
	"done; fi\n"
	"echo \"git $w $ro $gfirst\"\n"
	"if [ \"$mode\" = bind-ro ] && ( : > \".pisb-verify-$t\" ) 2>/dev/null; then rm -f \".pisb-verify-$t\"; echo 'rw yes'; else echo 'rw no'; fi\n"
	"echo end\n";

/* the most secrets the guest is asked about (the argv of one command) */
#define PROJECT_ARGS_MAX 2000

struct answer {
	struct pisb_buf out;
};

static int sink(void *arg, int type, const void *p, size_t n, struct pisb_err *e)
{
	struct answer *a = arg;

	if (type != PISB_VM_STDOUT)
		return 0;
	if (n > ANSWER_MAX - a->out.len)
		return pisb_err_set(e, PISB_EXIT_BACKEND, "the guest's answer to verify exceeds %d KiB: refused",
				    ANSWER_MAX >> 10);
	pisb_buf_add(&a->out, p, n);
	return 0;
}

/* The line of the answer that starts with "KEY" (then a space or its
 * end), its rest into b printable; false when there is none. */
static bool line_of(const struct pisb_buf *out, const char *key, struct pisb_buf *b)
{
	size_t k = strlen(key);
	const char *s = out->s ? out->s : "", *end = s + out->len;

	while (s < end) {
		const char *nl = memchr(s, '\n', (size_t)(end - s));
		size_t l = nl ? (size_t)(nl - s) : (size_t)(end - s);

		if (l >= k && !memcmp(s, key, k) && (l == k || s[k] == ' ')) {
			const char *v = s + k + (l > k);
			for (size_t i = 0; i < l - k - (l > k); i++)
				pisb_buf_addc(b, (unsigned char)v[i] < 0x20 || v[i] == 0x7f ? '?' : v[i]);
			pisb_buf_addc(b, '\0');
			b->len--;
			return true;
		}
		if (!nl)
			break;
		s = nl + 1;
	}
	return false;
}

struct check {
	const char *name;
	bool pass;
	char *evidence;
};

static void add(struct check *c, int *n, const char *name, bool pass, char *evidence)
{
	c[*n] = (struct check){ name, pass, evidence };
	(*n)++;
}

/* A canary file in dir, holding tok; its path into path (empty: none). */
static void plant(const char *dir, const char *tok, char path[512])
{
	int fd;

	path[0] = '\0';
	if (!dir || dir[0] != '/' || access(dir, W_OK) < 0)
		return;
	snprintf(path, 512, "%s/.pisb-canary-XXXXXX", strcmp(dir, "/") ? dir : "");
	fd = mkostemp(path, O_CLOEXEC);
	if (fd < 0) {
		path[0] = '\0';
		return;
	}
	pisb_write_all(fd, tok, strlen(tok));
	close(fd);
}

/* The project check (a sandbox with a project): its evidence, NULL when
 * there is no project; *pass. */
static char *project_check(struct pisb_sandbox *sb, const struct pisb_config *cfg, const char *tok, bool *pass)
{
	struct pisb_project_audit pa;
	_cleanup_strv_ struct pisb_strv av = PISB_STRV_INIT;
	_cleanup_buf_ struct pisb_buf leaks = PISB_BUF_INIT, git = PISB_BUF_INIT, rw = PISB_BUF_INIT,
				      endl = PISB_BUF_INIT;
	struct answer a = { PISB_BUF_INIT };
	struct pisb_err e = PISB_ERR_INIT;
	char *penv[] = { "PATH=/usr/sbin:/usr/bin:/sbin:/bin", NULL }, *ev = NULL;
	size_t asked;
	int code = -1, nleak = -1, gw = 0, gro = 0;
	char first[512] = "", gfirst[512] = "";

	*pass = false;
	if (!cfg->workspace || pisb_project_audit(sb->idir, &cfg->project, &pa) <= 0)
		return NULL;
	asked = pa.nsecret < PROJECT_ARGS_MAX ? pa.nsecret : PROJECT_ARGS_MAX;
	pisb_strv_push(&av, "/bin/sh");
	pisb_strv_push(&av, "-c");
	pisb_strv_push(&av, project_probe);
	pisb_strv_push(&av, "sh");
	pisb_strv_push(&av, cfg->workspace);
	pisb_strv_push(&av, pa.mode);
	pisb_strv_push(&av, tok);
	for (size_t i = 0; i < asked; i++) {
		pisb_strv_push(&av, pa.secret[i].hex);
		pisb_strv_push(&av, pa.secret[i].rel);
	}
	pisb_strv_push(&av, "--");
	for (size_t i = 0; i < pa.ngit && i < PROJECT_ARGS_MAX; i++)
		pisb_strv_push(&av, pa.git[i]);
	{
		struct vm_run run = { av.v, penv, "/", -1, -1, -1, true, false, pisb_mono_ms() + PROBE_MS, false, false, NULL };
		if (vm_run_sink(sb->idir, &run, sink, &a, &code, &e) < 0)
			ev = xasprintf("the project probe did not run in the guest: %s", e.msg);
	}
	if (!ev && !(code == 0 && line_of(&a.out, "end", &endl)))
		ev = xasprintf("no answer from the guest (exit %d)", code);
	else if (!ev && (line_of(&a.out, "ws", &leaks) || line_of(&a.out, "tools", &leaks)))
		ev = xasprintf("the guest could not look (%s)", line_of(&a.out, "ws", &git) ? "no workspace" : "no sha256sum or head in the guest");
	if (!ev && line_of(&a.out, "leaks", &leaks))
		sscanf(leaks.s, "%d %511[^\n]", &nleak, first);
	if (!ev && line_of(&a.out, "git", &git))
		sscanf(git.s, "%d %d %511[^\n]", &gw, &gro, gfirst);
	if (!ev && nleak < 0)
		ev = xstrdup("no answer from the guest about the secrets");
	if (!ev && nleak > 0)
		ev = xasprintf("%d of the host's secret files read in the guest with their content, the first '%s'", nleak, first);
	else if (!ev && gw > 0)
		ev = xasprintf("%d of the project's .git directories take writes in the guest, the first '%s'", gw, gfirst);
	else if (!ev && line_of(&a.out, "rw", &rw) && !strcmp(rw.s, "yes"))
		ev = xstrdup("the project, bound read-only, takes writes in the guest");
	else if (!ev) {
		*pass = true;
		ev = pa.secrets_in
		     ? xasprintf("%s: project.secrets: include (the secrets are inside by choice); %d host entries walked%s",
				 pa.mode, pa.walked, pa.cut ? " (the walk stopped at its cap)" : "")
		     : xasprintf("%s: %zu secret file%s of the host's project (%s%s) not readable in the guest%s; %s; %d host entries walked%s",
				 pa.mode, pa.nsecret, pa.nsecret == 1 ? "" : "s", pa.nsecret ? pa.secret[0].rel : "none",
				 pa.nsecret > 1 ? ", ..." : "", asked < pa.nsecret ? " (the first 2000 asked)" : "",
				 !strcmp(pa.mode, "bind") ? (gro ? "every .git read-only" : "no .git")
				 : !strcmp(pa.mode, "bind-ro") ? "the project read-only" : "a copy",
				 pa.walked, pa.cut ? " (the walk stopped at its cap)" : "");
	}
	pisb_buf_release(&a.out);
	pisb_project_audit_release(&pa);
	return ev;
}

int pisb_vm_verify(struct pisb_sandbox *sb, bool json, struct pisb_buf *out, struct pisb_err *e)
{
	const struct pisb_config *cfg;
	struct answer a = { PISB_BUF_INIT };
	_cleanup_buf_ struct pisb_buf net = PISB_BUF_INIT, env = PISB_BUF_INIT, files = PISB_BUF_INIT,
				      share = PISB_BUF_INIT, endl = PISB_BUF_INIT;
	struct check c[5];
	char tok[33], envname[32], canary[2][512], probe_path[96];
	char *penv[] = { "PATH=/usr/sbin:/usr/bin:/sbin:/bin", NULL };
	bool complete, host_clean;
	const char *root;
	int code = -1, n = 0, nfail = 0, ret = -1;

	if (vm_open_running(sb, &cfg, e) < 0)
		return -1;
	pisb_random_hex(tok, 32);
	snprintf(envname, sizeof(envname), "PISB_CANARY_%.12s", tok);
	/* the caller's environment, as every pisb command inherits it */
	setenv(envname, tok, 1);
	plant("/tmp", tok, canary[0]);
	plant(getenv("HOME"), tok, canary[1]);
	if (!canary[0][0] && !canary[1][0]) {
		pisb_err_set(e, PISB_EXIT_FAIL, "verify: cannot plant a canary file in /tmp or $HOME");
		goto out;
	}
	snprintf(probe_path, sizeof(probe_path), "/usr/.pisb-verify-%s", tok);
	{
		char *argv[] = { "/bin/sh", "-c", (char *)probe, "sh", tok,
				 canary[0][0] ? canary[0] : canary[1], canary[1][0] ? canary[1] : canary[0], NULL };
		struct vm_run run = { argv, penv, "/", -1, -1, -1, true, false, pisb_mono_ms() + PROBE_MS, false, false, NULL };
		if (vm_run_sink(sb->idir, &run, sink, &a, &code, e) < 0) {
			pisb_err_prefix(e, "verify: sandbox '%s'", sb->name);
			goto out;
		}
	}
	complete = code == 0 && line_of(&a.out, "end", &endl);
	/* what the guest's root stands on: the host's userland over virtiofs,
	 * or an image's read-only disk (image: PATH) */
	root = faccessat(sb->idir, "root.img", F_OK, AT_SYMLINK_NOFOLLOW) == 0
	       ? "the image's read-only root disk" : "the host's userland share";
	/* the host's own look: a share write that got through lands here */
	host_clean = access(probe_path, F_OK) < 0 && errno == ENOENT;
	if (!host_clean)
		unlink(probe_path);

	if (complete && line_of(&a.out, "files", &files))
		add(c, &n, "host-files", files.len == 0,
		    files.len ? xasprintf("the guest sees the host's canary files: %s", files.s)
			      : xasprintf("canary files planted on the host (%s%s%s) are not visible in the guest",
					  canary[0], canary[0][0] && canary[1][0] ? ", " : "", canary[1]));
	else
		add(c, &n, "host-files", false, xasprintf("no answer from the guest (exit %d)", code));
	if (complete && line_of(&a.out, "env", &env))
		add(c, &n, "host-env", !strcmp(env.s, "0"),
		    !strcmp(env.s, "0") ? xasprintf("%s, set in pisb's environment, is in no guest process's environment", envname)
					: xasprintf("%s, set in pisb's environment, is in the environment of guest processes (%s)", envname, env.s));
	else
		add(c, &n, "host-env", false, xasprintf("no answer from the guest (exit %d)", code));
	if (complete && line_of(&a.out, "net", &net))
		add(c, &n, "network", !strcmp(net.s, "lo"),
		    !strcmp(net.s, "lo") ? xstrdup("the guest's only network interface is lo (the VM has no network device)")
					 : xasprintf("the guest has network interfaces besides lo: '%s'", net.s));
	else
		add(c, &n, "network", false, xasprintf("no answer from the guest (exit %d)", code));
	if (!host_clean)
		add(c, &n, "host-share", false,
		    xasprintf("a write from the guest into the host's userland share reached the host ('%s')", probe_path));
	else if (complete && line_of(&a.out, "share", &share))
		add(c, &n, "host-share", !strcmp(share.s, "readonly"),
		    !strcmp(share.s, "readonly")
			    ? xasprintf("%s (/run/pisb/host) stays read-only after the guest remounts it read-write; nothing reached the host", root)
			    : xasprintf("the guest could write into %s ('%s'); nothing of it is on the host", root, share.s));
	else
		add(c, &n, "host-share", false, xasprintf("no answer from the guest (exit %d)", code));
	{
		bool pass;
		char *ev = project_check(sb, cfg, tok, &pass);
		if (ev)
			add(c, &n, "project", pass, ev);
	}

	for (int i = 0; i < n; i++)
		nfail += !c[i].pass;
	if (json) {
		struct pisb_jw w;
		pisb_jw_init(&w, out);
		pisb_jw_obj(&w);
		pisb_jw_kstr(&w, "name", sb->name);
		pisb_jw_kbool(&w, "onHost", false);
		pisb_jw_key(&w, "checks");
		pisb_jw_arr(&w);
		for (int i = 0; i < n; i++) {
			pisb_jw_obj(&w);
			pisb_jw_kstr(&w, "check", c[i].name);
			pisb_jw_kbool(&w, "pass", c[i].pass);
			pisb_jw_kstr(&w, "evidence", c[i].evidence);
			pisb_jw_obj_end(&w);
		}
		pisb_jw_arr_end(&w);
		pisb_jw_kbool(&w, "pass", nfail == 0);
		pisb_jw_obj_end(&w);
		pisb_buf_addc(out, '\n');
	} else {
		for (int i = 0; i < n; i++)
			pisb_buf_addf(out, "%s  %-14s  %s\n", c[i].pass ? "PASS" : "FAIL", c[i].name, c[i].evidence);
	}
	for (int i = 0; i < n; i++)
		free(c[i].evidence);
	ret = nfail ? PISB_EXIT_FAIL : 0;
out:
	unsetenv(envname);
	for (int i = 0; i < 2; i++)
		if (canary[i][0])
			unlink(canary[i]);
	pisb_buf_release(&a.out);
	return ret;
}
