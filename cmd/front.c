#include "front.h"
#include "json.h"

#include <stdarg.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void pisb_front_out(struct pisb_buf *b)
{
	pisb_buf_addc(b, '\n');
	if (pisb_write_all(1, b->s, b->len) < 0) {
		/* stdout gone (EPIPE): nothing useful to report */
	}
}

void pisb_front_info(struct pisb_ctx *c, const char *fmt, ...)
{
	va_list ap;

	if (c->a.quiet)
		return;
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

void pisb_front_warn(const char *fmt, ...)
{
	va_list ap;

	fputs("warning: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

int pisb_front_error(int code, const char *msg, bool json)
{
	if (json) {
		struct pisb_buf b = PISB_BUF_INIT;
		struct pisb_jw w;

		pisb_jw_init(&w, &b);
		pisb_jw_obj(&w);
		pisb_jw_key(&w, "error");
		pisb_jw_obj(&w);
		pisb_jw_kstr(&w, "code", pisb_exit_name(code));
		pisb_jw_kint(&w, "exit", code);
		pisb_jw_kstr(&w, "message", msg);
		pisb_jw_obj_end(&w);
		pisb_jw_obj_end(&w);
		pisb_front_out(&b);
		pisb_buf_release(&b);
	}
	fprintf(stderr, "fatal: %s\n", msg);
	return code;
}

static int report(struct pisb_ctx *c, int code)
{
	if (code == 0)
		code = c->err.code ? c->err.code : PISB_EXIT_FAIL;
	return pisb_front_error(code, c->err.msg, c->json_errors);
}

static bool want_json_errors(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--"))
			break;
		if (!strcmp(argv[i], "--json-errors"))
			return true;
	}
	return false;
}

int pisb_front_main(const char *binary, const struct pisb_handler *h,
		    int argc, char **argv)
{
	struct pisb_ctx c;
	const struct pisb_handler *hh;
	const struct pisb_verb *v;
	struct pisb_buf b = PISB_BUF_INIT;
	int ret;

	/* a stream the caller closed is /dev/null before anything is opened:
	 * else the next open takes its number, and a command given "stdin"
	 * would get that file (a directory of the state, say) */
	for (int i = 0; i < 3; i++)
		if (fcntl(i, F_GETFD) < 0 && open("/dev/null", O_RDWR) != i)
			return PISB_EXIT_PISB;
	memset(&c, 0, sizeof(c));
	c.binary = binary;
	c.st.fd = -1;
	c.json_errors = want_json_errors(argc, argv);

	if (argc < 2 || argv[1][0] == '-') {
		if (argc >= 2 && !strcmp(argv[1], "--version")) {
			printf("%s %s\n", binary, PISB_VERSION);
			return 0;
		}
		pisb_usage(&b, NULL, binary);
		fputs(b.s, argc < 2 ? stderr : stdout);
		pisb_buf_release(&b);
		return argc < 2 || strcmp(argv[1], "--help") ? PISB_EXIT_USAGE : 0;
	}
	for (hh = h; hh->verb; hh++)
		if (!strcmp(hh->verb, argv[1]))
			break;
	v = pisb_verb_find(argv[1]);
	if (!hh->verb || !v || strcmp(v->binary, binary)) {
		pisb_err_set(&c.err, PISB_EXIT_USAGE, "%s: unknown verb '%s' (see '%s --help')",
			     binary, argv[1], binary);
		return report(&c, PISB_EXIT_USAGE);
	}
	if (pisb_args_parse(&c.a, v, argc - 1, argv + 1, &c.err) < 0) {
		ret = report(&c, PISB_EXIT_USAGE);
		goto out;
	}
	if (c.a.help) {
		pisb_usage(&b, v, binary);
		fputs(b.s, stdout);
		ret = 0;
		goto out;
	}
	if (c.a.version) {
		printf("%s %s\n", binary, PISB_VERSION);
		ret = 0;
		goto out;
	}
	/* -v: the HTTP exchanges of a remote driver, on stderr (http.h) */
	pisb_set_verbose(c.a.verbose);
	if (hh->needs_state && pisb_state_open(&c.st, c.a.state_dir, &c.err) < 0) {
		ret = report(&c, 0);
		goto out;
	}
	ret = hh->fn(&c);
	if (ret < 0)
		ret = report(&c, 0);
out:
	fflush(stdout);
	pisb_buf_release(&b);
	pisb_args_release(&c.a);
	pisb_state_release(&c.st);
	return ret;
}
