#include "err.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static void vset(struct pisb_err *e, int code, int errnum, const char *fmt,
		 va_list ap)
{
	int n;

	e->code = code;
	e->errnum = errnum;
	n = vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
	if (n < 0)
		e->msg[0] = '\0';
	if (errnum && n >= 0 && (size_t)n < sizeof(e->msg))
		snprintf(e->msg + n, sizeof(e->msg) - n, ": %s", strerror(errnum));
}

int pisb_err_set(struct pisb_err *e, int code, const char *fmt, ...)
{
	va_list ap;

	if (!e)
		return -1;
	va_start(ap, fmt);
	vset(e, code, 0, fmt, ap);
	va_end(ap);
	return -1;
}

int pisb_err_sys(struct pisb_err *e, int code, const char *fmt, ...)
{
	int saved = errno;
	va_list ap;

	if (!e)
		return -1;
	va_start(ap, fmt);
	vset(e, code, saved, fmt, ap);
	va_end(ap);
	errno = saved;
	return -1;
}

int pisb_err_prefix(struct pisb_err *e, const char *fmt, ...)
{
	char head[512], old[sizeof(e->msg)];
	va_list ap;

	if (!e)
		return -1;
	va_start(ap, fmt);
	vsnprintf(head, sizeof(head), fmt, ap);
	va_end(ap);
	memcpy(old, e->msg, sizeof(old));
	{
		size_t h = strlen(head);
		if (h > sizeof(e->msg) - 3)
			h = sizeof(e->msg) - 3;
		memcpy(e->msg, head, h);
		memcpy(e->msg + h, ": ", 2);
		h += 2;
		size_t o = strnlen(old, sizeof(old));
		if (o > sizeof(e->msg) - 1 - h)
			o = sizeof(e->msg) - 1 - h;
		memcpy(e->msg + h, old, o);
		e->msg[h + o] = '\0';
	}
	return -1;
}

const char *pisb_exit_name(int code)
{
	switch (code) {
	case PISB_EXIT_OK: return "ok";
	case PISB_EXIT_FAIL: return "failed";
	case PISB_EXIT_USAGE: return "usage";
	case PISB_EXIT_NOTFOUND: return "not-found";
	case PISB_EXIT_BUSY: return "busy";
	case PISB_EXIT_BACKEND: return "backend";
	case PISB_EXIT_TIMEOUT: return "timeout";
	case PISB_EXIT_NOEXEC: return "cannot-run";
	case PISB_EXIT_NOCMD: return "command-not-found";
	default: return "internal";
	}
}
