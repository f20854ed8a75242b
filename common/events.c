#include "events.h"
#include "err.h"
#include "json.h"
#include "proc.h"
#include "util.h"

#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void to_json(const struct pisb_event *ev, struct pisb_buf *b)
{
	struct pisb_jw w;

	pisb_jw_init(&w, b);
	pisb_jw_obj(&w);
	pisb_jw_kstr(&w, "event", ev->event);
	pisb_jw_kstr(&w, "name", ev->name);
	pisb_jw_kstr(&w, "driver", ev->driver);
	pisb_jw_kstr(&w, "sandboxId", ev->sandbox_id ? ev->sandbox_id : ev->name);
	pisb_jw_kstr(&w, "workspace", ev->workspace);
	pisb_jw_kbool(&w, "createdByExtension", ev->created);
	pisb_jw_kbool(&w, "resumed", ev->resumed);
	if (ev->mode)
		pisb_jw_kstr(&w, "mode", ev->mode);
	pisb_jw_obj_end(&w);
}

int pisb_event_write(int fd, const struct pisb_event *ev, struct pisb_err *e)
{
	_cleanup_buf_ struct pisb_buf b = PISB_BUF_INIT;

	to_json(ev, &b);
	pisb_buf_addc(&b, '\n');
	if (pisb_write_all(fd, b.s, b.len) < 0)
		return pisb_err_sys(e, PISB_EXIT_FAIL, "write %s event to fd %d", ev->event, fd);
	return 0;
}

int pisb_event_hook(const char *cmd, const struct pisb_event *ev, struct pisb_err *e)
{
	_cleanup_buf_ struct pisb_buf b = PISB_BUF_INIT;
	pid_t pid;
	int st;

	to_json(ev, &b);
	pid = fork();
	if (pid < 0)
		return pisb_err_sys(e, PISB_EXIT_FAIL, "fork");
	if (pid == 0) {
		setenv("PISB_EVENT", b.s, 1);
		dup2(2, 1); /* keep our stdout for data */
		execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
		_exit(127);
	}
	if (waitpid(pid, &st, 0) < 0)
		return pisb_err_sys(e, PISB_EXIT_FAIL, "wait for --on-ready");
	if (pisb_wait_code(st) != 0)
		return pisb_err_set(e, PISB_EXIT_FAIL, "--on-ready command '%s' exited with %d",
				    cmd, pisb_wait_code(st));
	return 0;
}
