/* pisb-svc - services, previews, and the controller; see man/pisb-svc.1 */
#include "front.h"
#include "svc_cmd.h"
#include "driver.h"
#include "instance.h"
#include "json.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* One shell string: a single word as given, several quoted and joined. */
static void command_string(struct pisb_buf *b, char **argv, size_t n)
{
	if (n == 1) {
		pisb_buf_adds(b, argv[0]);
		return;
	}
	for (size_t i = 0; i < n; i++) {
		if (i)
			pisb_buf_addc(b, ' ');
		pisb_buf_addc(b, '\'');
		for (const char *p = argv[i]; *p; p++) {
			if (*p == '\'')
				pisb_buf_adds(b, "'\\''");
			else
				pisb_buf_addc(b, *p);
		}
		pisb_buf_addc(b, '\'');
	}
}

/* The request line, or -1 with c->err for a usage error. */
static int build_request(struct pisb_ctx *c, const char *op, const char *svc,
			 struct pisb_buf *b, int *timeout_ms)
{
	bool start = !strcmp(op, "start"), preview = !strcmp(op, "preview");
	bool remove = !strcmp(op, "remove");
	struct pisb_jw w;
	long long port = 0, deadline = 0;
	const char *title = pisb_args_get(&c->a, "title"), *desc = pisb_args_get(&c->a, "description");

	if (strcmp(op, "ensure") && strcmp(op, "status") && strcmp(op, "restart") &&
	    strcmp(op, "stop") && !start && !preview && !remove)
		return pisb_err_set(&c->err, PISB_EXIT_USAGE,
				    "svc: unknown operation '%s' (ensure, status, restart, stop, start, preview, remove)", op);
	if (!start && (c->a.ncmd || pisb_args_has(&c->a, "port") || pisb_args_has(&c->a, "preview") ||
		       pisb_args_has(&c->a, "timeout-ms")))
		return pisb_err_set(&c->err, PISB_EXIT_USAGE,
				    "svc %s: --port, --preview, --timeout-ms and -- CMD go with 'start' only", op);
	if (!start && !preview && (title || desc))
		return pisb_err_set(&c->err, PISB_EXIT_USAGE,
				    "svc %s: --title and --description go with 'start' and 'preview'", op);
	if ((start || preview || remove) && !svc)
		return pisb_err_set(&c->err, PISB_EXIT_USAGE, start
				    ? "svc start: SERVICE is required: pisb svc NAME start SERVICE -- CMD..."
				    : remove ? "svc remove: SERVICE is required: pisb svc NAME remove SERVICE|PORT"
				    : "svc preview: PORT is required: pisb svc NAME preview PORT");
	if (start && !c->a.ncmd)
		return pisb_err_set(&c->err, PISB_EXIT_USAGE,
				    "svc start: the command is required: pisb svc NAME start %s -- CMD...", svc);
	if (pisb_args_int(&c->a, "port", 1, 65535, 0, &port, &c->err) < 0 ||
	    pisb_args_int(&c->a, "timeout-ms", 100, 120000, 0, &deadline, &c->err) < 0)
		return -1;
	if (preview && pisb_parse_ll(svc, 1, 65535, &port) < 0)
		return pisb_err_set(&c->err, PISB_EXIT_USAGE, "svc preview: PORT must be 1-65535, not '%s'", svc);
	pisb_jw_init(&w, b);
	pisb_jw_obj(&w);
	{
		char full[32];
		snprintf(full, sizeof(full), "svc.%s", op);
		pisb_jw_kstr(&w, "op", full);
	}
	if (!preview && svc)
		pisb_jw_kstr(&w, "service", svc);
	if (start) {
		struct pisb_buf cmd = PISB_BUF_INIT;
		command_string(&cmd, c->a.cmd, c->a.ncmd);
		pisb_jw_kstr(&w, "command", cmd.s);
		pisb_buf_release(&cmd);
		pisb_jw_kbool(&w, "preview", pisb_args_has(&c->a, "preview"));
	}
	if (port)
		pisb_jw_kint(&w, "port", port);
	if (deadline)
		pisb_jw_kint(&w, "timeoutMs", deadline);
	if (title)
		pisb_jw_kstr(&w, "title", title);
	if (desc)
		pisb_jw_kstr(&w, "description", desc);
	pisb_jw_obj_end(&w);
	/* the controller answers when readiness is decided: timeoutMs is at
	 * most 120 s per service, ad-hoc services wait 60 s unless told */
	*timeout_ms = start ? (int)(deadline ? deadline : 60000) + 15000
		    : !strcmp(op, "ensure") || !strcmp(op, "restart") ? 15 * 60000 : 30000;
	return 0;
}

static void print_human(const char *op, const struct pisb_json *j)
{
	int arr = pisb_json_get(j, 0, "services");
	int n = arr >= 0 ? j->tok[arr].size : 0;

	if (!strcmp(op, "remove")) {
		_cleanup_free_ char *gone = pisb_json_str(j, pisb_json_get(j, 0, "removed"));
		printf("removed %s\n", gone ? gone : "");
		return;
	}
	if (!strcmp(op, "preview")) {
		int pv = pisb_json_get(j, 0, "previews");
		_cleanup_free_ char *svc = n ? pisb_json_str(j, pisb_json_get(j, pisb_json_at(j, arr, 0), "name")) : NULL;
		for (int i = 0; pv >= 0 && i < j->tok[pv].size; i++) {
			int o = pisb_json_at(j, pv, i);
			_cleanup_free_ char *s = pisb_json_str(j, pisb_json_get(j, o, "service"));
			_cleanup_free_ char *u = pisb_json_str(j, pisb_json_get(j, o, "url"));
			if (s && svc && !strcmp(s, svc))
				printf("%s\n", u ? u : "");
		}
		return;
	}
	if (!strcmp(op, "status") && n)
		printf("%-20s %-11s %-7s %-6s %-8s %-8s %s\n", "SERVICE", "STATE", "PID", "PORT",
		       "READY", "RESTARTS", "URL");
	if (!strcmp(op, "status") && !n)
		printf("no services\n");
	for (int i = 0; i < n; i++) {
		int o = pisb_json_at(j, arr, i);
		_cleanup_free_ char *name = pisb_json_str(j, pisb_json_get(j, o, "name"));
		_cleanup_free_ char *state = pisb_json_str(j, pisb_json_get(j, o, "state"));
		_cleanup_free_ char *url = pisb_json_str(j, pisb_json_get(j, o, "url"));
		_cleanup_free_ char *rd = pisb_json_str(j, pisb_json_get(j, o, "readiness"));
		_cleanup_free_ char *err = pisb_json_str(j, pisb_json_get(j, o, "error"));
		long long pid = 0, port = 0, restarts = 0;

		pisb_json_int(j, pisb_json_get(j, o, "pid"), &pid);
		pisb_json_int(j, pisb_json_get(j, o, "port"), &port);
		pisb_json_int(j, pisb_json_get(j, o, "restarts"), &restarts);
		if (!strcmp(op, "status")) {
			char ps[16] = "-", pp[16] = "-";
			if (pid)
				snprintf(ps, sizeof(ps), "%lld", pid);
			if (port)
				snprintf(pp, sizeof(pp), "%lld", port);
			printf("%-20s %-11s %-7s %-6s %-8s %-8lld %s\n", name ? name : "", state ? state : "",
			       ps, pp, rd ? rd : "-", restarts, url ? url : "-");
			if (err)
				printf("  %s\n", err);
		} else if (!strcmp(op, "stop")) {
			printf("%s: %s\n", name ? name : "", state ? state : "");
		} else {
			printf("%s: %s%s%s, port %lld%s%s\n", name ? name : "", state ? state : "",
			       rd && strcmp(rd, "ready") ? ", readiness " : "", rd && strcmp(rd, "ready") ? rd : "",
			       port, url ? ", " : "", url ? url : "");
		}
	}
}

static int cmd_svc(struct pisb_ctx *c)
{
	const char *name = c->a.pos[0], *op = c->a.pos[1];
	const char *svc = c->a.npos > 2 ? c->a.pos[2] : NULL;
	_cleanup_buf_ struct pisb_buf req = PISB_BUF_INIT, rep = PISB_BUF_INIT;
	_cleanup_sandbox_ struct pisb_sandbox sb = PISB_SANDBOX_INIT;
	bool preview = !strcmp(op, "preview");
	struct pisb_json j;
	bool ok = false;
	long long code = PISB_EXIT_FAIL;
	int timeout = 30000;

	if (build_request(c, op, svc, &req, &timeout) < 0)
		return -1;
	if (pisb_sandbox_open(&sb, &c->st, name, &c->err) < 0)
		return -1;
	if (!(preview ? sb.drv->preview : sb.drv->svc))
		return pisb_driver_refuse(&sb, preview ? PISB_V_PREVIEW : PISB_V_SVC, &c->err);
	if ((preview ? sb.drv->preview : sb.drv->svc)(&sb, req.s, &rep, timeout, &c->err) < 0) {
		enum pisb_status st = sb.drv->status(&sb);
		if (st != PISB_ST_RUNNING)
			return pisb_err_set(&c->err, PISB_EXIT_FAIL,
					    "sandbox '%s' is %s: services run only while it runs (pisb start %s)",
					    name, pisb_status_name(st), name);
		return pisb_err_prefix(&c->err, "svc %s '%s'", op, name);
	}
	if (pisb_json_parse(&j, rep.s, strcspn(rep.s, "\n"), &c->err) < 0)
		return pisb_err_prefix(&c->err, "svc %s: bad reply from the controller", op);
	pisb_json_bool(&j, pisb_json_get(&j, 0, "ok"), &ok);
	pisb_json_int(&j, pisb_json_get(&j, 0, "code"), &code);
	if (c->a.json) {
		rep.len = strcspn(rep.s, "\n");
		pisb_front_out(&rep);
	} else if (pisb_json_get(&j, 0, "services") >= 0) {
		print_human(op, &j);
	}
	fflush(stdout);
	if (!ok) {
		_cleanup_free_ char *msg = pisb_json_str(&j, pisb_json_get(&j, 0, "error"));
		pisb_err_set(&c->err, code > 0 && code < 126 ? (int)code : PISB_EXIT_FAIL, "%s",
			     msg ? msg : "the controller refused the request");
		pisb_json_release(&j);
		if (c->a.json) {
			/* the JSON is out already: only the message on stderr */
			fprintf(stderr, "fatal: %s\n", c->err.msg);
			return c->err.code;
		}
		return -1;
	}
	pisb_json_release(&j);
	return 0;
}

static const struct pisb_handler handlers[] = {
	{ "supervise", svc_cmd_supervise, true },
	{ "svc", cmd_svc, true },
	{ NULL, NULL, false },
};

int main(int argc, char **argv)
{
	return pisb_front_main("pisb-svc", handlers, argc, argv);
}
