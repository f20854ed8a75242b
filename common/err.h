/* err.h - the error model shared by every pisb module.
 *
 * Library code never prints and never exits: it fills a struct pisb_err and
 * returns a negative value.  Only main() turns an error into a message and
 * an exit status.  Context is added on the way up with pisb_err_prefix().
 */
#ifndef PISB_ERR_H
#define PISB_ERR_H

#include <stdarg.h>

/* Exit statuses (DESIGN §8). */
enum {
	PISB_EXIT_OK = 0,
	PISB_EXIT_FAIL = 1,      /* failed, or predicate false */
	PISB_EXIT_USAGE = 2,     /* bad arguments or invalid config */
	PISB_EXIT_NOTFOUND = 3,  /* no such sandbox, template, file */
	PISB_EXIT_BUSY = 4,      /* conflict: name taken, lock held */
	PISB_EXIT_BACKEND = 5,   /* backend unreachable: fail closed */
	PISB_EXIT_TIMEOUT = 6,
	/* Payload-running commands (exec) */
	PISB_EXIT_PISB = 125,    /* pisb itself failed */
	PISB_EXIT_NOEXEC = 126,  /* command cannot run */
	PISB_EXIT_NOCMD = 127,   /* command not found */
};

struct pisb_err {
	int code;       /* PISB_EXIT_* */
	int errnum;     /* errno at the failure, 0 if none */
	char msg[2048];
};

#define PISB_ERR_INIT { 0, 0, "" }

/* Set the message; returns -1 so callers can `return pisb_err_set(...)`. */
int pisb_err_set(struct pisb_err *e, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Like pisb_err_set, appending ": strerror(errno)". */
int pisb_err_sys(struct pisb_err *e, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Prepend "context: " to the message already there. */
int pisb_err_prefix(struct pisb_err *e, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

const char *pisb_exit_name(int code);

#endif
