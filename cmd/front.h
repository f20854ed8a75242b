/* front.h - what every pisb binary's main() shares: pick the verb, parse its
 * options from the table, open the state directory, run the handler, and
 * report.  This is the only place (with cmd/ mains) that prints and exits.
 */
#ifndef PISB_FRONT_H
#define PISB_FRONT_H

#include <stdbool.h>

#include "cli.h"
#include "err.h"
#include "state.h"
#include "util.h"

#define PISB_VERSION "0.1.0"

struct pisb_ctx {
	const char *binary;
	struct pisb_args a;
	struct pisb_state st;
	bool json_errors;
	struct pisb_err err;
};

/* A handler returns an exit status >= 0, or -1 with c->err filled. */
typedef int (*pisb_verb_fn)(struct pisb_ctx *c);

struct pisb_handler {
	const char *verb;
	pisb_verb_fn fn;
	bool needs_state;
};

int pisb_front_main(const char *binary, const struct pisb_handler *h,
		    int argc, char **argv);

/* Report an error: "fatal: msg" on stderr, and with json also
 * {"error":{"code","exit","message"}} on stdout.  Returns code. */
int pisb_front_error(int code, const char *msg, bool json);
/* Print data on stdout: b's content plus a newline. */
void pisb_front_out(struct pisb_buf *b);
/* Diagnostics on stderr, unless -q.  */
void pisb_front_info(struct pisb_ctx *c, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void pisb_front_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
