/* doctor.c - `pisb doctor`: is this host ready for each driver, and the
 * exact fix when not.  The core checks what every driver needs (the state
 * directory, pisb's own binaries); each driver's doctor slot adds the
 * probes of its own (local: a user namespace, an overlay in it, a
 * throwaway sandbox; vm: a vCPU run to HLT; ...), in the registry's order.
 * The report is built in memory and returned, human or JSON.
 */
#include "doctor.h"
#include "driver.h"
#include "err.h"
#include "json.h"
#include "proc.h"
#include "state.h"
#include "util.h"

#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

/* Run argv (PATH lookup) with stdout+stderr collected (64 KiB at most),
 * at most timeout_ms.  Returns the exit code, -1 if it could not be run
 * (not found), -2 on timeout. */
int pisb_doctor_run(char *const *argv, struct pisb_buf *out, int timeout_ms)
{
	int en;

	return pisb_run_capture(argv, NULL, true, 64 << 10, timeout_ms, out, &en);
}

char *pisb_doctor_first_line(char *s)
{
	char *nl;
	if (!s)
		return "";
	while (*s == '\n' || *s == ' ')
		s++;
	nl = strchr(s, '\n');
	if (nl)
		*nl = '\0';
	return s;
}

static const char *const st_name[] = { "pass", "warn", "fail" };
static const char *const st_word[] = { "PASS", "WARN", "FAIL" };

void pisb_doctor_add(struct pisb_doctor *d, const char *name, int status, const char *fix,
		     const char *fmt, ...)
{
	va_list ap;

	if (d->n >= sizeof(d->v) / sizeof(d->v[0]))
		return;
	va_start(ap, fmt);
	d->v[d->n].detail = xvasprintf(fmt, ap);
	va_end(ap);
	d->v[d->n].name = name;
	d->v[d->n].status = status;
	d->v[d->n].fix = status == PISB_DOC_PASS || !fix ? NULL : xstrdup(fix);
	d->n++;
}

const char *pisb_doctor_fs_name(const char *path)
{
	struct statfs sf;

	if (statfs(path, &sf) < 0)
		return "unknown";
	switch ((unsigned long)sf.f_type) {
	case 0xEF53: return "ext4";
	case 0x58465342: return "xfs";
	case 0x9123683E: return "btrfs";
	case 0x01021994: return "tmpfs";
	case 0x794c7630: return "overlayfs";
	case 0x2FC12FC1: return "zfs";
	case 0x6969: return "nfs";
	case 0x65735546: return "fuse";
	default: return "other";
	}
}


/* --- optional tools --- */

void pisb_doctor_tool(struct pisb_doctor *d, const char *name, char *const *argv,
		       const char *what, const char *fix)
{
	_cleanup_buf_ struct pisb_buf out = PISB_BUF_INIT;
	int r = pisb_doctor_run(argv, &out, 10000);

	if (r == 0)
		pisb_doctor_add(d, name, PISB_DOC_PASS, NULL, "%s (%s)", pisb_doctor_first_line(out.s), what);
	else if (r == -1)
		pisb_doctor_add(d, name, PISB_DOC_WARN, fix, "'%s' not found on PATH (optional: %s)", argv[0], what);
	else if (r == -2)
		pisb_doctor_add(d, name, PISB_DOC_WARN, fix, "'%s %s' did not answer within 10 s (optional: %s)", argv[0], argv[1], what);
	else
		pisb_doctor_add(d, name, PISB_DOC_WARN, fix, "'%s %s' exited with %d: %s (optional: %s)", argv[0], argv[1], r,
		     pisb_doctor_first_line(out.s), what);
}

static void check_state(struct pisb_doctor *d)
{
	struct pisb_err e = PISB_ERR_INIT;
	_cleanup_free_ char *path = pisb_state_path(d->state_dir, &e);
	const char *tmp = getenv("TMPDIR");
	struct stat sb;

	snprintf(d->base, sizeof(d->base), "%s", tmp && tmp[0] == '/' ? tmp : "/tmp");
	if (!path) {
		pisb_doctor_add(d, "state-dir", PISB_DOC_FAIL, "set PI_SANDBOX_HOME or HOME", "%s", e.msg);
		return;
	}
	if (stat(path, &sb) < 0) {
		pisb_doctor_add(d, "state-dir", PISB_DOC_PASS, NULL, "'%s' does not exist yet; it is created mode 0700 on first use", path);
		return;
	}
	if (!S_ISDIR(sb.st_mode) || sb.st_uid != geteuid()) {
		char fix[4200];
		snprintf(fix, sizeof(fix), "use a directory of your own: --state-dir DIR or PI_SANDBOX_HOME=DIR");
		pisb_doctor_add(d, "state-dir", PISB_DOC_FAIL, fix, "'%s' is not a directory owned by uid %u", path, (unsigned)geteuid());
		return;
	}
	if (sb.st_mode & 077) {
		char fix[4200];
		snprintf(fix, sizeof(fix), "chmod 700 '%s'", path);
		pisb_doctor_add(d, "state-dir", PISB_DOC_FAIL, fix, "'%s' is accessible by group or others (mode %04o): pisb refuses it",
		     path, (unsigned)(sb.st_mode & 07777));
		return;
	}
	/* probes run where sandbox disks will live: same filesystem */
	{
		_cleanup_free_ char *stg = xasprintf("%s/staging", path);
		if (pisb_mkdirs_at(AT_FDCWD, stg, 0700, &e) == 0)
			snprintf(d->base, sizeof(d->base), "%s", stg);
	}
	pisb_doctor_add(d, "state-dir", PISB_DOC_PASS, NULL, "'%s' (mode 0700, on %s)", path, pisb_doctor_fs_name(path));
}

static void check_binaries(struct pisb_doctor *d)
{
	struct pisb_err e = PISB_ERR_INIT;

	if (pisb_find_binary("pisb-svc", d->svc_bin, sizeof(d->svc_bin), &e) < 0) {
		d->svc_bin[0] = '\0';
		pisb_doctor_add(d, "binaries", PISB_DOC_FAIL, "install pisb (make install), or set PISB_EXEC_PATH to the directory of the pisb-* binaries",
		     "%s: a sandbox's controller is pisb-svc", e.msg);
		return;
	}
	pisb_doctor_add(d, "binaries", PISB_DOC_PASS, NULL, "controller '%s'", d->svc_bin);
}

int pisb_doctor(const char *state_dir, bool json, struct pisb_buf *out, struct pisb_err *e)
{
	struct pisb_doctor d;
	bool ok = true;

	(void)e;
	memset(&d, 0, sizeof(d));
	d.state_dir = state_dir;
	check_state(&d);
	check_binaries(&d);
	for (size_t i = 0; pisb_drivers[i]; i++)
		if (pisb_drivers[i]->doctor)
			pisb_drivers[i]->doctor(&d);
	{
		_cleanup_buf_ struct pisb_buf names = PISB_BUF_INIT;
		pisb_driver_names(&names, ", ");
		pisb_doctor_add(&d, "drivers", PISB_DOC_PASS, NULL, "this build has the drivers %s (what each can do: pisb drivers)",
		     names.s);
	}
	for (size_t i = 0; i < d.n; i++)
		if (d.v[i].status == PISB_DOC_FAIL)
			ok = false;
	if (json) {
		struct pisb_jw w;
		pisb_jw_init(&w, out);
		pisb_jw_obj(&w);
		pisb_jw_key(&w, "checks");
		pisb_jw_arr(&w);
		for (size_t i = 0; i < d.n; i++) {
			pisb_jw_obj(&w);
			pisb_jw_kstr(&w, "check", d.v[i].name);
			pisb_jw_kstr(&w, "status", st_name[d.v[i].status]);
			pisb_jw_kstr(&w, "detail", d.v[i].detail);
			pisb_jw_kstr(&w, "fix", d.v[i].fix);
			pisb_jw_obj_end(&w);
		}
		pisb_jw_arr_end(&w);
		pisb_jw_kbool(&w, "ok", ok);
		pisb_jw_obj_end(&w);
		pisb_buf_addc(out, '\n');
	} else {
		for (size_t i = 0; i < d.n; i++) {
			pisb_buf_addf(out, "%s  %-10s  %s\n", st_word[d.v[i].status], d.v[i].name, d.v[i].detail);
			if (d.v[i].fix)
				pisb_buf_addf(out, "      %-10s  fix: %s\n", "", d.v[i].fix);
		}
	}
	for (size_t i = 0; i < d.n; i++) {
		free(d.v[i].detail);
		free(d.v[i].fix);
	}
	return ok ? 0 : PISB_EXIT_FAIL;
}

