/* cli.h - the one table of verbs and options.
 *
 * Every verb pisb knows, the binary that owns it, its positional arguments
 * and its options live in pisb_verbs[] (cli_table.c).  The argument parser,
 * --help, `pisb action` (JSON keys), the completions and the man-page tests
 * all read this table, so they cannot drift apart.
 */
#ifndef PISB_CLI_H
#define PISB_CLI_H

#include <stdbool.h>
#include <stddef.h>

struct pisb_err;
struct pisb_buf;

enum { PISB_ARG_NONE, PISB_ARG_REQ, PISB_ARG_OPT };

enum {
	PISB_OPT_MULTI = 1 << 0,  /* may be repeated; all values kept */
	PISB_OPT_INT = 1 << 1,    /* value is a non-negative integer */
	PISB_OPT_HIDDEN = 1 << 2, /* internal: not in help or completions */
};

struct pisb_opt {
	const char *name;     /* long name, without "--" */
	char shrt;            /* short letter, or 0 */
	int arg;              /* PISB_ARG_* */
	const char *metavar;  /* "FILE" */
	unsigned flags;
	const char *help;
};

struct pisb_verb {
	const char *name;        /* "exec" */
	const char *binary;      /* "pisb-exec" */
	const char *synopsis;    /* "NAME [--cwd DIR] -- CMD [ARG]..." */
	const char *pos[4];      /* JSON keys of positionals, in order */
	int npos_min, npos_max;
	bool dashdash;           /* takes "-- CMD [ARG]..." */
	bool hidden;
	const char *summary;
	const struct pisb_opt *opts;  /* terminated by { NULL } */
};

extern const struct pisb_verb pisb_verbs[];   /* terminated by { NULL } */
extern const struct pisb_opt pisb_global_opts[];
extern const char *const pisb_binaries[];     /* terminated by NULL */

const struct pisb_verb *pisb_verb_find(const char *name);
const struct pisb_opt *pisb_verb_opt(const struct pisb_verb *v, const char *name);

struct pisb_argval {
	const struct pisb_opt *opt;
	const char *val;      /* NULL for flags */
};

struct pisb_args {
	const struct pisb_verb *verb;
	struct pisb_argval *set;
	size_t nset;
	const char **pos;
	size_t npos;
	char **cmd;           /* after "--" (borrowed from argv) */
	size_t ncmd;
	/* global options */
	const char *state_dir;
	bool json, quiet, help, version;
	int verbose;
	int wait_ms;          /* 0 = no wait, -1 = forever */
};

/* Parse argv (argv[0] is the verb name).  Borrowed pointers into argv. */
int pisb_args_parse(struct pisb_args *a, const struct pisb_verb *v, int argc,
		    char **argv, struct pisb_err *e);
void pisb_args_release(struct pisb_args *a);
const char *pisb_args_get(const struct pisb_args *a, const char *name);
bool pisb_args_has(const struct pisb_args *a, const char *name);
/* All values of a repeatable option, in order; returns the count. */
size_t pisb_args_all(const struct pisb_args *a, const char *name,
		     const char **out, size_t max);
/* Integer option within [lo,hi]; def if absent; -1 + e on bad value. */
int pisb_args_int(const struct pisb_args *a, const char *name, long long lo,
		  long long hi, long long def, long long *out, struct pisb_err *e);

/* Usage text for a verb (or for the whole binary when v is NULL). */
void pisb_usage(struct pisb_buf *b, const struct pisb_verb *v, const char *binary);
/* camelCase JSON key of an option: "timeout-ms" -> "timeoutMs". */
void pisb_opt_json_key(const char *name, char *out, size_t n);
/* Completion scripts generated from the table. */
int pisb_completion(struct pisb_buf *b, const char *shell, struct pisb_err *e);

#endif
