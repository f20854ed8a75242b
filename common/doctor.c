#include "doctor.h"
#include "err.h"

int pisb_doctor_cmd(bool json, struct pisb_err *e)
{
	(void)json;
	return pisb_err_set(e, PISB_EXIT_FAIL, "doctor: not implemented yet");
}

int pisb_verify_cmd(struct pisb_state *st, const char *name, bool json,
		    struct pisb_err *e)
{
	(void)st; (void)json;
	return pisb_err_set(e, PISB_EXIT_FAIL, "verify '%s': not implemented yet", name);
}
