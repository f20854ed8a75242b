/* action.h - `pisb action JSON`: one JSON action object -> the flag form.
 *
 * {"action":"exec","name":"demo","command":["ls","-l"],"timeoutMs":500}
 * becomes argv {"exec", "demo", "--timeout-ms", "500", "--json",
 * "--json-errors", "--", "ls", "-l"}, which the dispatcher then execs, so the
 * action runs exactly the code path of the flag form.  Keys are the
 * positional names and the camelCase option names of cli_table.c.
 */
#ifndef PISB_ACTION_H
#define PISB_ACTION_H

#include <stddef.h>

struct pisb_err;
struct pisb_buf;
struct pisb_strv;
struct pisb_verb;

int pisb_action_argv(const char *json, size_t len, struct pisb_strv *argv,
		     const struct pisb_verb **verb, struct pisb_err *e);
/* {"actions":[{"action","summary","args":{key:type}}...]} */
void pisb_action_help(struct pisb_buf *b);

#endif
