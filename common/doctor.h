/* doctor.h - `pisb doctor` (host readiness for every driver of this
 * build), and what a driver's doctor slot uses to add its own checks.
 * The report goes into out for the caller to print. */
#ifndef PISB_DOCTOR_H
#define PISB_DOCTOR_H

#include <stdbool.h>
#include <stddef.h>

struct pisb_err;
struct pisb_buf;

/* Returns the exit status (0 all PASS/WARN, 1 a FAIL), or -1 with e. */
int pisb_doctor(const char *state_dir, bool json, struct pisb_buf *out, struct pisb_err *e);

/* ---- for the drivers' doctor slots ---- */

enum { PISB_DOC_PASS, PISB_DOC_WARN, PISB_DOC_FAIL };

struct pisb_doctor {
	struct {
		const char *name;     /* static: the check's name */
		int status;           /* PISB_DOC_* */
		char *detail;
		char *fix;            /* NULL when it passed */
	} v[24];
	size_t n;
	char base[4096];          /* where throwaway probe directories go (on
				   * the state directory's filesystem when it
				   * exists) */
	char svc_bin[4096];       /* the controller binary, or "" */
	const char *state_dir;    /* --state-dir, or NULL */
};

/* One check: its name, PISB_DOC_*, the fix (ignored when it passed), and
 * what was found. */
void pisb_doctor_add(struct pisb_doctor *d, const char *name, int status, const char *fix,
		     const char *fmt, ...) __attribute__((format(printf, 5, 6)));
/* An optional tool: argv (a version query) answers within 10 s, else a
 * WARN with fix; what: which driver needs it. */
void pisb_doctor_tool(struct pisb_doctor *d, const char *name, char *const *argv,
		      const char *what, const char *fix);
/* Run argv (PATH lookup) with stdout+stderr collected (64 KiB at most),
 * at most timeout_ms: its exit code, -1 if it could not be run, -2 on
 * timeout. */
int pisb_doctor_run(char *const *argv, struct pisb_buf *out, int timeout_ms);
/* The first line of s, cut in place ("" for NULL). */
char *pisb_doctor_first_line(char *s);
/* The kind of filesystem path is on: "ext4", "tmpfs", ..., "other". */
const char *pisb_doctor_fs_name(const char *path);

#endif
