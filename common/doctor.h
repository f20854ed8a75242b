/* doctor.h - `pisb doctor` (host readiness) and `pisb verify` (a live
 * isolation audit of a running local sandbox).  Both write their report
 * (text, or JSON with json) into out for the caller to print. */
#ifndef PISB_DOCTOR_H
#define PISB_DOCTOR_H

#include <stdbool.h>

struct pisb_err;
struct pisb_state;
struct pisb_buf;

/* Returns the exit status (0 all PASS/WARN, 1 a FAIL), or -1 with e. */
int pisb_doctor(const char *state_dir, bool json, struct pisb_buf *out, struct pisb_err *e);
/* The local driver's audit (its verify slot): 0 every check passed, 1 one
 * failed, or -1 with e. */
int pisb_verify(struct pisb_state *st, const char *name, bool json, struct pisb_buf *out,
		struct pisb_err *e);

#endif
