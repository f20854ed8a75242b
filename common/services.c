/* services.c - placeholder until services land: nothing to supervise. */
#include "services.h"

struct pisb_services *pisb_services_new(struct pisb_state *st, int idir,
					const char *name,
					const struct pisb_config *cfg,
					const struct pisb_runtime *rt)
{
	(void)st; (void)idir; (void)name; (void)cfg; (void)rt;
	return NULL;
}
void pisb_services_free(struct pisb_services *s) { (void)s; }
int pisb_services_start_all(struct pisb_services *s, struct pisb_err *e) { (void)s; (void)e; return 0; }
void pisb_services_stop_all(struct pisb_services *s) { (void)s; }
void pisb_services_reaped(struct pisb_services *s, pid_t pid, int status) { (void)s; (void)pid; (void)status; }
int pisb_services_pollfds(struct pisb_services *s, struct pollfd *p, int max, int *t)
{ (void)s; (void)p; (void)max; (void)t; return 0; }
void pisb_services_poll(struct pisb_services *s, struct pollfd *p, size_t n) { (void)s; (void)p; (void)n; }
void pisb_services_request(struct pisb_services *s, const char *op,
			   const struct pisb_json *req, struct pisb_buf *reply)
{ (void)s; (void)op; (void)req; (void)reply; }
char *pisb_services_status_json(struct pisb_services *s) { (void)s; return 0; }
char *pisb_services_previews_json(struct pisb_services *s) { (void)s; return 0; }
