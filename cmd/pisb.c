/* pisb - the dispatcher: `pisb VERB ...` execs the binary that owns VERB.
 *
 * It never forks, so signals, the exit status and the terminal pass
 * straight through to the owning binary.  The hottest verbs (list,
 * inspect, exec, exec-status, exec-kill) it runs in its own process
 * instead, as their binary would (pisb_serve.c).  `pisb action JSON` turns
 * one JSON action object into the flag form (common/action.c) and runs
 * that the same way.
 */
#include "pisb_cmd.h"
#include "action.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef PISB_LIBEXECDIR
#define PISB_LIBEXECDIR "/usr/local/libexec/pisb"
#endif
#ifndef PISB_MANDIR
#define PISB_MANDIR "/usr/local/share/man"
#endif

static void try_exec_in(const char *dir, size_t n, const char *bin, char **argv)
{
	char path[PATH_MAX];

	if (n == 0 || n + strlen(bin) + 2 > sizeof(path))
		return;
	memcpy(path, dir, n);
	path[n] = '/';
	strcpy(path + n + 1, bin);
	execv(path, argv);
}

static void try_exec_list(const char *list, const char *bin, char **argv)
{
	while (list && *list) {
		const char *colon = strchr(list, ':');
		size_t n = colon ? (size_t)(colon - list) : strlen(list);
		try_exec_in(list, n, bin, argv);
		list = colon ? colon + 1 : NULL;
	}
}

int pisb_dispatch_exec(const char *bin, char **argv)
{
	char self[PATH_MAX];
	ssize_t n;

	argv[0] = (char *)bin;
	try_exec_list(getenv("PISB_EXEC_PATH"), bin, argv);
	try_exec_in(PISB_LIBEXECDIR, strlen(PISB_LIBEXECDIR), bin, argv);
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n > 0) {
		self[n] = '\0';
		char *slash = strrchr(self, '/');
		if (slash)
			try_exec_in(self, (size_t)(slash - self), bin, argv);
	}
	try_exec_list(getenv("PATH"), bin, argv);
	fprintf(stderr, "fatal: cannot find '%s' (looked in $PISB_EXEC_PATH, %s, next to pisb, $PATH)\n",
		bin, PISB_LIBEXECDIR);
	return PISB_EXIT_PISB;
}

static void list_verbs(FILE *f)
{
	for (const struct pisb_verb *v = pisb_verbs; v->name; v++)
		if (!v->hidden)
			fprintf(f, "%s\n", v->name);
	fputs("action\nhelp\ncompletion\n", f);
}

static int do_help(int argc, char **argv)
{
	const struct pisb_verb *v;
	char page[64];

	if (argc < 3) {
		struct pisb_buf b = PISB_BUF_INIT;
		pisb_usage(&b, NULL, "pisb");
		fputs(b.s, stdout);
		pisb_buf_release(&b);
		return 0;
	}
	v = pisb_verb_find(argv[2]);
	if (!strcmp(argv[2], "action") || !strcmp(argv[2], "pisb"))
		snprintf(page, sizeof(page), "pisb");
	else if (!strcmp(argv[2], "yaml") || !strcmp(argv[2], "config"))
		snprintf(page, sizeof(page), "pisb.yaml");
	else if (!strcmp(argv[2], "state"))
		snprintf(page, sizeof(page), "pisb-state");
	else if (v && !v->hidden)
		snprintf(page, sizeof(page), "%s", v->binary);
	else {
		fprintf(stderr, "fatal: help: unknown verb '%s'; verbs are:\n", argv[2]);
		list_verbs(stderr);
		return PISB_EXIT_USAGE;
	}
	/* Prefer the pages shipped next to the binary (a build tree), then man's own path. */
	char self[PATH_MAX], local[PATH_MAX + 128];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n > 0) {
		self[n] = '\0';
		char *slash = strrchr(self, '/');
		if (slash) {
			*slash = '\0';
			const char *sec = strchr(page, '.') || !strcmp(page, "pisb-state") ? "5" : "1";
			snprintf(local, sizeof(local), "%s/../man/%s.%s", self, page, sec);
			if (access(local, R_OK) == 0)
				execlp("man", "man", "-l", local, (char *)NULL);
		}
	}
	execlp("man", "man", page, (char *)NULL);
	fprintf(stderr, "fatal: cannot run man (%s); try '%s --help'\n", strerror(errno), page);
	return PISB_EXIT_PISB;
}

static int do_action(int argc, char **argv)
{
	struct pisb_err e = PISB_ERR_INIT;
	struct pisb_buf in = PISB_BUF_INIT;
	struct pisb_strv av = PISB_STRV_INIT;
	const struct pisb_verb *v;
	const char *text;
	size_t len;

	if (argc != 3) {
		fprintf(stderr, "usage: pisb action 'JSON' | pisb action -\n");
		return PISB_EXIT_USAGE;
	}
	if (!strcmp(argv[2], "-")) {
		if (pisb_read_fd(0, &in, 8 << 20) < 0) {
			pisb_err_sys(&e, PISB_EXIT_USAGE, "action: read stdin");
			goto fail;
		}
		text = in.s ? in.s : "";
		len = in.len;
	} else {
		text = argv[2];
		len = strlen(text);
	}
	{
		/* {} and "help" list the actions */
		const char *t = text;
		while (*t == ' ' || *t == '\n' || *t == '\t' || *t == '\r')
			t++;
		if (!strcmp(t, "help") || !strncmp(t, "help\n", 5) || !strcmp(t, "") ||
		    (t[0] == '{' && strspn(t + 1, " \t\r\n}") == strlen(t + 1) && strchr(t, '}'))) {
			struct pisb_buf b = PISB_BUF_INIT;
			pisb_action_help(&b);
			pisb_front_out(&b);
			pisb_buf_release(&b);
			pisb_buf_release(&in);
			return 0;
		}
	}
	if (pisb_action_argv(text, len, &av, &v, &e) < 0)
		goto fail;
	/* av.v[0] is the verb: pisb_dispatch_exec wants argv[0] as a slot for the binary */
	{
		char **full = xcalloc(av.n + 2, sizeof(char *));
		int r;
		full[0] = NULL;
		for (size_t i = 0; i < av.n; i++)
			full[i + 1] = av.v[i];
		r = pisb_serve(v, (int)av.n + 1, full);
		return r >= 0 ? r : pisb_dispatch_exec(v->binary, full);
	}
fail:
	pisb_buf_release(&in);
	pisb_strv_release(&av);
	return pisb_front_error(e.code ? e.code : PISB_EXIT_USAGE, e.msg, true);
}

int main(int argc, char **argv)
{
	const struct pisb_verb *v;
	int first = 1;

	/* global options may come before the verb: pisb --state-dir D list */
	while (first < argc && argv[first][0] == '-' && strcmp(argv[first], "--")) {
		const char *o = argv[first];
		if (!strcmp(o, "--version")) {
			printf("pisb %s\n", PISB_VERSION);
			return 0;
		}
		if (!strcmp(o, "--help") || !strcmp(o, "-h")) {
			struct pisb_buf b = PISB_BUF_INIT;
			pisb_usage(&b, NULL, "pisb");
			fputs(b.s, stdout);
			pisb_buf_release(&b);
			return 0;
		}
		if (!strcmp(o, "--list-commands")) {
			list_verbs(stdout);
			return 0;
		}
		if (!strcmp(o, "--state-dir") && first + 1 < argc)
			first++;
		first++;
	}
	if (first >= argc) {
		struct pisb_buf b = PISB_BUF_INIT;
		pisb_usage(&b, NULL, "pisb");
		fputs(b.s, stderr);
		pisb_buf_release(&b);
		return PISB_EXIT_USAGE;
	}
	if (first > 1) {
		/* move the verb to the front, keep the options after it */
		char *verb = argv[first];
		memmove(argv + 2, argv + 1, (size_t)(first - 1) * sizeof(char *));
		argv[1] = verb;
	}
	if (!strcmp(argv[1], "help"))
		return do_help(argc, argv);
	if (!strcmp(argv[1], "action"))
		return do_action(argc, argv);
	if (!strcmp(argv[1], "completion")) {
		struct pisb_err e = PISB_ERR_INIT;
		struct pisb_buf b = PISB_BUF_INIT;
		if (argc != 3) {
			fprintf(stderr, "usage: pisb completion bash|zsh|fish\n");
			return PISB_EXIT_USAGE;
		}
		if (pisb_completion(&b, argv[2], &e) < 0) {
			fprintf(stderr, "fatal: %s\n", e.msg);
			return e.code;
		}
		fputs(b.s, stdout);
		return 0;
	}
	v = pisb_verb_find(argv[1]);
	if (!v || (v->hidden && !pisb_serve_has(v))) {
		fprintf(stderr, "fatal: unknown verb '%s'; the verbs are:\n", argv[1]);
		list_verbs(stderr);
		return PISB_EXIT_USAGE;
	}
	{
		int r = pisb_serve(v, argc, argv);
		if (r >= 0)
			return r;
	}
	return pisb_dispatch_exec(v->binary, argv);
}
