/* create_info.c - pisb-create's verbs that change nothing: validate, list,
 * inspect, verify, doctor, drivers. */
#include "create_cmd.h"
#include "config.h"
#include "doctor.h"
#include "driver.h"
#include "inspect.h"
#include "json.h"

#include <unistd.h>

int create_cmd_validate(struct pisb_ctx *c)
{
	const char *f = pisb_args_get(&c->a, "file");
	struct pisb_config *cfg = NULL;
	_cleanup_buf_ struct pisb_buf b = PISB_BUF_INIT;
	struct pisb_jw w;

	if (!f)
		return pisb_err_set(&c->err, PISB_EXIT_USAGE, "validate: -f FILE is required");
	if (pisb_config_load(f, &cfg, &c->err) < 0)
		return -1;
	pisb_jw_init(&w, &b);
	pisb_config_json(cfg, &w);
	pisb_config_free(cfg);
	pisb_front_out(&b);
	return 0;
}

int create_cmd_list(struct pisb_ctx *c)
{
	_cleanup_buf_ struct pisb_buf b = PISB_BUF_INIT, t = PISB_BUF_INIT;
	struct pisb_jw w;

	pisb_jw_init(&w, &b);
	/* remote sandboxes: their servers are asked, so a dead one says so */
	if (pisb_list(&c->st, pisb_args_has(&c->a, "templates"), 2000, &w, &c->err) < 0)
		return -1;
	if (c->a.json) {
		pisb_front_out(&b);
		return 0;
	}
	if (pisb_list_table(b.s, b.len, c->a.quiet, &t, &c->err) < 0)
		return -1;
	pisb_write_all(1, t.s ? t.s : "", t.len);
	return 0;
}

int create_cmd_inspect(struct pisb_ctx *c)
{
	_cleanup_buf_ struct pisb_buf b = PISB_BUF_INIT;
	struct pisb_jw w;

	/* inspect always prints JSON: it is the machine-readable view */
	pisb_jw_init(&w, &b);
	if (pisb_inspect(&c->st, c->a.pos[0], true, &w, &c->err) < 0)
		return -1;
	pisb_front_out(&b);
	return 0;
}

int create_cmd_verify(struct pisb_ctx *c)
{
	_cleanup_buf_ struct pisb_buf b = PISB_BUF_INIT;
	int r = pisb_verify_sandbox(&c->st, c->a.pos[0], c->a.json, &b, &c->err);

	if (r < 0)
		return -1;
	pisb_write_all(1, b.s ? b.s : "", b.len);
	return r;
}

int create_cmd_doctor(struct pisb_ctx *c)
{
	_cleanup_buf_ struct pisb_buf b = PISB_BUF_INIT;
	int r = pisb_doctor(c->a.state_dir, c->a.json, &b, &c->err);

	if (r < 0)
		return -1;
	pisb_write_all(1, b.s ? b.s : "", b.len);
	return r;
}

int create_cmd_drivers(struct pisb_ctx *c)
{
	_cleanup_buf_ struct pisb_buf b = PISB_BUF_INIT;
	struct pisb_jw w;

	if (c->a.json) {
		pisb_jw_init(&w, &b);
		pisb_drivers_json(&w);
	} else {
		pisb_drivers_text(&b, c->a.quiet);
	}
	pisb_front_out(&b);
	return 0;
}
