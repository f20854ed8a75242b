/* pisb_static.c - in the static dispatcher only (with the sanitizers pisb
 * is linked dynamically, and this file is left out).
 *
 * A static process has no dynamic loader: it cannot load libcurl or
 * libarchive (common/curl_lazy.c and common/archive_lazy.c call
 * pisb_dlopen, common/dl.c), and getpwnam() and getaddrinfo() cannot load
 * the NSS modules they consult.  These definitions come before libpisb.a
 * and the C library in the link, so theirs are never linked (nor the
 * linker's warnings): each hands the command that pisb serves to the
 * binary that owns its verb, which is linked dynamically and can
 * (pisb_serve.c).  None returns.
 */
#include "pisb_cmd.h"
#include "dl.h"

#include <netdb.h>
#include <pwd.h>

void *pisb_dlopen(const char *file, int mode)
{
	(void)mode;
	pisb_serve_handoff(file ? file : "a shared library");
}

void pisb_dl_needed(const char *why)
{
	pisb_serve_handoff(why);
}

struct passwd *getpwnam(const char *name)
{
	(void)name;
	pisb_serve_handoff("the user database (getpwnam)");
}

int getaddrinfo(const char *node, const char *service, const struct addrinfo *hints,
		struct addrinfo **res)
{
	(void)node;
	(void)service;
	(void)hints;
	(void)res;
	pisb_serve_handoff("name resolution (getaddrinfo)");
}
