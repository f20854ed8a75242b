/* pisb-fs's verbs that move files between the host and the sandbox: push,
 * pull, and the project's diff, apply and sync (project.h) */
#include "fs_cmd.h"
#include "archive.h"
#include "project.h"

#include <limits.h>
#include <string.h>

static void print_xfer(struct pisb_ctx *c, const struct pisb_xfer *x, bool push)
{
	if (x->left_out_git)
		pisb_front_warn("left out %lld entries under .git (pass --include-git to pull them)",
				x->left_out_git);
	if (!c->a.json) {
		pisb_front_info(c, "%s %lld files (%lld bytes) %s '%s', sha256 %s", push ? "pushed" : "pulled",
				x->files, x->bytes, push ? "to" : "into", x->where, x->sha256);
		return;
	}
	FS_OUT_JSON(pisb_fs_xfer_json(&w, x, push));
}

int fs_cmd_push_pull(struct pisb_ctx *c)
{
	_cleanup_sandbox_ struct pisb_sandbox sb = PISB_SANDBOX_INIT;
	struct pisb_xfer x = { 0 };
	bool push = !strcmp(c->a.verb->name, "push");
	struct pisb_pull_opts po = { pisb_args_has(&c->a, "include-git"), 0 };
	int ret = -1;

	if (!push && pisb_args_int(&c->a, "max-bytes", 1, LLONG_MAX, PISB_PULL_MAX_BYTES, &po.max_bytes, &c->err) < 0)
		return -1;
	if (fs_sandbox(c, &sb, push ? PISB_V_PUSH : PISB_V_PULL) < 0)
		return -1;
	if (push ? sb.drv->push(&sb, c->a.pos[1], pisb_args_get(&c->a, "to"), pisb_args_has(&c->a, "all"), &x, &c->err)
		 : sb.drv->pull(&sb, c->a.pos[1], c->a.pos[2], &po, &x, &c->err))
		goto out;
	print_xfer(c, &x, push);
	ret = 0;
out:
	pisb_xfer_release(&x);
	return ret;
}

/* PATH and -- PATH...: the paths of diff and apply. */
static size_t paths_of(struct pisb_ctx *c, char **v, size_t max)
{
	size_t n = 0;

	if (c->a.npos > 1 && n < max)
		v[n++] = (char *)c->a.pos[1];
	for (size_t i = 0; i < c->a.ncmd && n < max; i++)
		v[n++] = c->a.cmd[i];
	return n;
}

int fs_cmd_diff(struct pisb_ctx *c)
{
	_cleanup_sandbox_ struct pisb_sandbox sb = PISB_SANDBOX_INIT;
	_cleanup_pdiff_ struct pisb_pdiff d = PISB_PDIFF_INIT;
	_cleanup_buf_ struct pisb_buf b = PISB_BUF_INIT;
	char *paths[256];
	struct pisb_pdiff_opts o = { paths, paths_of(c, paths, 256), pisb_args_has(&c->a, "all") };
	struct pisb_jw w;

	if (fs_sandbox(c, &sb, PISB_V_DIFF) < 0 || pisb_project_diff(&sb, &o, &d, &c->err) < 0)
		return -1;
	if (c->a.json) {
		pisb_jw_init(&w, &b);
		if (pisb_pdiff_json(&d, !pisb_args_has(&c->a, "stat"), &w, &c->err) < 0)
			return -1;
		pisb_buf_addc(&b, '\n');
	} else if (pisb_pdiff_text(&d, pisb_args_has(&c->a, "stat"), &b, &c->err) < 0) {
		return -1;
	}
	for (size_t i = 0; i < d.n && !c->a.json; i++)
		if (d.v[i].conflict)
			pisb_front_warn("'%s' changed in the host project since the base too (apply refuses it without --force)",
					d.v[i].path);
	if (b.len && pisb_write_all(1, b.s, b.len) < 0)
		return pisb_err_sys(&c->err, PISB_EXIT_FAIL, "write the diff");
	return 0;
}

int fs_cmd_apply(struct pisb_ctx *c)
{
	_cleanup_sandbox_ struct pisb_sandbox sb = PISB_SANDBOX_INIT;
	_cleanup_pdiff_ struct pisb_pdiff d = PISB_PDIFF_INIT;
	char *paths[256];
	struct pisb_apply_opts o = { paths, paths_of(c, paths, 256), pisb_args_has(&c->a, "dry-run"),
				     pisb_args_has(&c->a, "force") };
	struct pisb_apply_result r;

	if (fs_sandbox(c, &sb, PISB_V_DIFF) < 0 || pisb_project_apply(&sb, &o, &d, &r, &c->err) < 0)
		return -1;
	if (c->a.json) {
		FS_OUT_JSON(pisb_fs_apply_json(&w, &d, o.dry_run, &r));
		return 0;
	}
	for (size_t i = 0; i < d.n; i++)
		pisb_front_info(c, "%s %s", d.v[i].ntype ? (d.v[i].status == 'A' ? "add" : "write") : "delete",
				d.v[i].path);
	pisb_front_info(c, "%s %lld file%s, deleted %lld in '%s'", o.dry_run ? "would write" : "wrote",
			r.written, r.written == 1 ? "" : "s", r.deleted, d.dir);
	return 0;
}

int fs_cmd_sync(struct pisb_ctx *c)
{
	_cleanup_sandbox_ struct pisb_sandbox sb = PISB_SANDBOX_INIT;
	struct pisb_sync_result r;
	int ret;

	if (fs_sandbox(c, &sb, PISB_V_DIFF) < 0)
		return -1;
	ret = pisb_project_sync(&sb, &r, &c->err);
	if (ret < 0 && c->err.code != PISB_EXIT_BUSY) {
		pisb_sync_result_release(&r);
		return -1;
	}
	if (c->a.json) {
		FS_OUT_JSON(pisb_fs_sync_json(&w, &r));
	} else {
		for (size_t i = 0; i < r.conflicts.n; i++)
			pisb_front_warn("'%s' changed in the sandbox and on the host: left alone", r.conflicts.v[i]);
		pisb_front_info(c, "brought %lld file%s in, deleted %lld", r.written, r.written == 1 ? "" : "s",
				r.deleted);
	}
	pisb_sync_result_release(&r);
	return ret;
}
