/* pisb-fs's verbs of the tree: ls, stat, mkdir, find, grep */
#include "fs_cmd.h"

#include <stdio.h>

int fs_cmd_ls(struct pisb_ctx *c)
{
	_cleanup_sandbox_ struct pisb_sandbox sb = PISB_SANDBOX_INIT;
	_cleanup_free_ char *abs = NULL;
	_cleanup_buf_ struct pisb_buf b = PISB_BUF_INIT;
	struct pisb_fs_info *v = NULL;
	size_t n = 0;
	int ret = -1;

	if (fs_sandbox(c, &sb, PISB_V_LS) < 0 ||
	    sb.drv->ls(&sb, c->a.npos > 1 ? c->a.pos[1] : NULL, &abs, &v, &n, &c->err) < 0)
		goto out;
	if (c->a.json) {
		FS_OUT_JSON(pisb_fs_ls_json(&w, abs, v, n));
	} else {
		pisb_fs_ls_text(&b, v, n);
		fs_out_text(&b);
	}
	ret = 0;
out:
	pisb_fs_infos_free(v, n);
	return ret;
}

int fs_cmd_stat(struct pisb_ctx *c)
{
	_cleanup_sandbox_ struct pisb_sandbox sb = PISB_SANDBOX_INIT;
	struct pisb_fs_info i = { 0 };
	_cleanup_free_ char *abs = NULL;
	_cleanup_buf_ struct pisb_buf b = PISB_BUF_INIT;
	int ret = -1;

	if (fs_sandbox(c, &sb, PISB_V_STAT) < 0 ||
	    sb.drv->stat(&sb, c->a.pos[1], &abs, &i, &c->err) < 0)
		goto out;
	if (c->a.json) {
		FS_OUT_JSON(pisb_fs_stat_json(&w, &i));
	} else {
		pisb_fs_stat_text(&b, &i);
		fs_out_text(&b);
	}
	ret = 0;
out:
	pisb_fs_info_release(&i);
	return ret;
}

int fs_cmd_mkdir(struct pisb_ctx *c)
{
	_cleanup_sandbox_ struct pisb_sandbox sb = PISB_SANDBOX_INIT;
	_cleanup_free_ char *abs = NULL;
	bool created = false;

	if (fs_sandbox(c, &sb, PISB_V_MKDIR) < 0 ||
	    sb.drv->mkdir(&sb, c->a.pos[1], &abs, &created, &c->err) < 0)
		return -1;
	if (c->a.json)
		FS_OUT_JSON(pisb_fs_mkdir_json(&w, abs, created));
	return 0;
}

int fs_cmd_find(struct pisb_ctx *c)
{
	_cleanup_sandbox_ struct pisb_sandbox sb = PISB_SANDBOX_INIT;
	struct pisb_fs_find f = { 0 };
	struct pisb_fs_lines o;
	_cleanup_buf_ struct pisb_buf out = PISB_BUF_INIT;
	_cleanup_free_ char *dir = NULL;
	bool truncated = false;
	int ret = -1;

	if (pisb_args_int(&c->a, "limit", 1, 1LL << 40, 1000, &f.limit, &c->err) < 0)
		return -1;
	if (fs_sandbox(c, &sb, PISB_V_FIND) < 0)
		return -1;
	f.dir = pisb_args_get(&c->a, "path");
	f.pattern = c->a.pos[1];
	f.no_ignore = pisb_args_has(&c->a, "no-ignore");
	pisb_fs_lines_init(&o, c->a.json, false, 1);
	if (sb.drv->find(&sb, &f, &dir, pisb_fs_find_line, &o, &truncated, &c->err) < 0)
		goto out;
	if (c->a.json) {
		pisb_fs_find_json(&o, dir, truncated, &out);
		pisb_front_out(&out);
	} else {
		pisb_fs_lines_end_text(&o);
		if (truncated)
			fprintf(stderr, "[pisb: stopped at %lld results; raise --limit for more]\n", f.limit);
	}
	ret = 0;
out:
	pisb_fs_lines_release(&o);
	return ret;
}

int fs_cmd_grep(struct pisb_ctx *c)
{
	_cleanup_sandbox_ struct pisb_sandbox sb = PISB_SANDBOX_INIT;
	_cleanup_buf_ struct pisb_buf out = PISB_BUF_INIT;
	struct pisb_fs_grep g = { 0 };
	struct pisb_fs_grep_result r;
	struct pisb_fs_lines o;
	_cleanup_free_ char *path = NULL;
	long long ctx;
	int ret = -1;

	if (pisb_args_int(&c->a, "limit", 1, 1LL << 40, 100, &g.limit, &c->err) < 0 ||
	    pisb_args_int(&c->a, "context", 0, 1000, 0, &ctx, &c->err) < 0)
		return -1;
	if (fs_sandbox(c, &sb, PISB_V_GREP) < 0)
		return -1;
	g.path = pisb_args_get(&c->a, "path");
	g.pattern = c->a.pos[1];
	g.glob = pisb_args_get(&c->a, "glob");
	g.icase = pisb_args_has(&c->a, "ignore-case");
	g.literal = pisb_args_has(&c->a, "literal");
	g.no_ignore = pisb_args_has(&c->a, "no-ignore");
	g.context = (int)ctx;
	pisb_fs_lines_init(&o, c->a.json, ctx > 0, 1);
	if (sb.drv->grep(&sb, &g, &path, pisb_fs_grep_line, &o, &r, &c->err) < 0)
		goto out;
	if (c->a.json) {
		pisb_fs_grep_json(&o, path, &r, &out);
		pisb_front_out(&out);
		ret = 0;
	} else {
		pisb_fs_lines_end_text(&o);
		if (r.limit_reached)
			fprintf(stderr, "[pisb: stopped at %lld matches; raise --limit for more]\n", g.limit);
		ret = r.matches ? 0 : 1;   /* like grep: 1 when nothing matched */
	}
out:
	pisb_fs_lines_release(&o);
	return ret;
}
