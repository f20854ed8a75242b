/* doctor.h - `pisb doctor` (host readiness) and `pisb verify` (a live
 * isolation audit of a running sandbox).  These print their report: they
 * are reports, the one place in common/ that writes to stdout. */
#ifndef PISB_DOCTOR_H
#define PISB_DOCTOR_H

#include <stdbool.h>

struct pisb_err;
struct pisb_state;

/* Returns the exit status (0 all PASS/WARN, 1 a FAIL), or -1 with e. */
int pisb_doctor_cmd(const char *state_dir, bool json, struct pisb_err *e);
int pisb_verify_cmd(struct pisb_state *st, const char *name, bool json,
		    struct pisb_err *e);

#endif
