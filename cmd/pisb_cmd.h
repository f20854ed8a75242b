/* pisb_cmd.h - what the files of the dispatcher share: pisb.c (main: find
 * the verb, exec the binary that owns it), pisb_serve.c (the verbs it runs
 * in its own process) and pisb_static.c (what its static build cannot
 * load). */
#ifndef PISB_DISPATCH_CMD_H
#define PISB_DISPATCH_CMD_H

#include "front.h"

/* Exec the binary bin (searched in $PISB_EXEC_PATH, the libexec dir, next
 * to pisb, $PATH) with argv, argv[0] replaced by bin.  Returns only on
 * failure, having said so on stderr, with the exit status to return. */
int pisb_dispatch_exec(const char *bin, char **argv);

/* If pisb serves verb v itself, run it in this process and return its exit
 * status, as its own binary would; else return -1 (exec the binary). */
int pisb_serve(const struct pisb_verb *v, int argc, char **argv);
/* Whether pisb serves verb v itself (a hidden verb is reached through
 * pisb only then: supervise, the controller its create and start spawn) */
bool pisb_serve_has(const struct pisb_verb *v);

/* Hand the command being served, from its start, to the binary that owns
 * its verb: this process cannot do what it needs (why: "libcurl.so.4"...).
 * Does not return. */
void pisb_serve_handoff(const char *why) __attribute__((noreturn));

#endif
