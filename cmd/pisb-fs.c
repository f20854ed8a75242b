/* pisb-fs - files inside a sandbox: read, write, edit, ls, stat, mkdir,
 * find, grep, logs, push, pull, diff, apply, sync; see man/pisb-fs.1.
 * The verbs of the tree are in fs_tree.c, those that move files between
 * the host and the sandbox in fs_project.c. */
#include "fs_cmd.h"
#include "fs.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void fs_out_text(const struct pisb_buf *b)
{
	if (b->len && pisb_write_all(1, b->s, b->len) < 0) {
		/* the reader left */
	}
}

int fs_sandbox(struct pisb_ctx *c, struct pisb_sandbox *sb, enum pisb_verb_id v)
{
	if (pisb_sandbox_open(sb, &c->st, c->a.pos[0], &c->err) < 0)
		return -1;
	return pisb_driver_has(sb->drv, v) ? 0 : pisb_driver_refuse(sb, v, &c->err);
}

static int cmd_read(struct pisb_ctx *c)
{
	_cleanup_sandbox_ struct pisb_sandbox sb = PISB_SANDBOX_INIT;
	struct pisb_fs_text t;
	_cleanup_free_ char *abs = NULL;
	long long off, lim, bytes;

	if (pisb_args_int(&c->a, "offset", 1, 1LL << 40, 1, &off, &c->err) < 0 ||
	    pisb_args_int(&c->a, "limit", 1, 1LL << 40, 0, &lim, &c->err) < 0)
		return -1;
	if (pisb_args_has(&c->a, "raw") && (pisb_args_has(&c->a, "offset") || pisb_args_has(&c->a, "limit")))
		return pisb_err_set(&c->err, PISB_EXIT_USAGE, "--raw streams the whole file: drop --offset and --limit");
	if (fs_sandbox(c, &sb, PISB_V_READ) < 0)
		return -1;
	if (pisb_args_has(&c->a, "raw"))
		return sb.drv->read_raw(&sb, c->a.pos[1], 1, &bytes, &c->err) < 0 ? -1 : 0;
	if (sb.drv->read_text(&sb, c->a.pos[1], off, lim, PISB_FS_READ_CAP, &abs, &t, &c->err) < 0)
		return -1;
	if (c->a.json) {
		FS_OUT_JSON(pisb_fs_text_json(&w, abs, &t));
	} else {
		fs_out_text(&t.content);
		if (t.truncated)
			fprintf(stderr, "[pisb: truncated at %d KiB of %lld bytes; continue with --offset %lld, or use --raw]\n",
				PISB_FS_READ_CAP / 1024, t.bytes, t.next_offset);
	}
	pisb_fs_text_release(&t);
	return 0;
}

static int parse_mode(const char *s, int *mode, struct pisb_err *e)
{
	char *end;
	long v;

	*mode = -1;
	if (!s)
		return 0;
	v = strtol(s, &end, 8);
	if (!*s || *end || v < 0 || v > 07777)
		return pisb_err_set(e, PISB_EXIT_USAGE, "--mode: '%s' is not an octal mode (0000-7777)", s);
	*mode = (int)v;
	return 0;
}

static void print_path_bytes(struct pisb_ctx *c, const char *verb, const char *abs, long long bytes, long long edits)
{
	if (c->a.json)
		FS_OUT_JSON(pisb_fs_written_json(&w, abs, bytes, edits));
	else if (edits >= 0)
		pisb_front_info(c, "%s '%s': %lld edit%s, %lld bytes", verb, abs, edits, edits == 1 ? "" : "s", bytes);
	else
		pisb_front_info(c, "%s '%s': %lld bytes", verb, abs, bytes);
}

static int cmd_write(struct pisb_ctx *c)
{
	_cleanup_sandbox_ struct pisb_sandbox sb = PISB_SANDBOX_INIT;
	const char *from = pisb_args_get(&c->a, "from"), *text = pisb_args_get(&c->a, "content");
	struct pisb_fs_src src = { 0, NULL, 0 };
	_cleanup_free_ char *abs = NULL;
	_cleanup_close_ int ffd = -1;
	long long bytes = 0;
	int mode, ret = -1;

	if (parse_mode(pisb_args_get(&c->a, "mode"), &mode, &c->err) < 0)
		return -1;
	if (from && text)
		return pisb_err_set(&c->err, PISB_EXIT_USAGE, "give the content once: --from or --content");
	if (fs_sandbox(c, &sb, PISB_V_WRITE) < 0)
		return -1;
	/* the host file is opened before entering the sandbox, never after */
	if (from) {
		struct stat st;
		ffd = open(from, O_RDONLY | O_CLOEXEC);
		if (ffd < 0) {
			pisb_err_sys(&c->err, PISB_EXIT_NOTFOUND, "--from '%s'", from);
			goto out;
		}
		if (fstat(ffd, &st) == 0 && S_ISDIR(st.st_mode)) {
			pisb_err_set(&c->err, PISB_EXIT_USAGE, "--from '%s' is a directory", from);
			goto out;
		}
		src.fd = ffd;
	} else if (text) {
		src.fd = -1;
		src.data = text;
		src.n = strlen(text);
	}
	if (sb.drv->write(&sb, c->a.pos[1], &src, mode, pisb_args_has(&c->a, "mkdir"), &abs, &bytes, &c->err) < 0)
		goto out;
	print_path_bytes(c, "wrote", abs, bytes, -1);
	ret = 0;
out:
	return ret;
}

static int cmd_edit(struct pisb_ctx *c)
{
	_cleanup_sandbox_ struct pisb_sandbox sb = PISB_SANDBOX_INIT;
	_cleanup_free_ struct pisb_fs_edit *ed = NULL;
	_cleanup_free_ char *abs = NULL;
	struct pisb_buf *texts = NULL;
	size_t nold = 0, nnew = 0, n = 0;
	long long bytes = 0;
	int ret = -1;

	/* --old/--old-file and --new/--new-file pair up in the order given */
	ed = xcalloc(c->a.nset + 1, sizeof(*ed));
	texts = xcalloc(c->a.nset + 1, sizeof(*texts));
	for (size_t i = 0; i < c->a.nset; i++) {
		const char *name = c->a.set[i].opt->name, *val = c->a.set[i].val;
		bool is_old = !strcmp(name, "old") || !strcmp(name, "old-file");
		bool is_file = pisb_str_ends(name, "-file");
		const char *s = val;
		size_t len = val ? strlen(val) : 0;

		if (!is_old && strcmp(name, "new") && strcmp(name, "new-file"))
			continue;
		if (is_file) {
			if (pisb_read_file_at(AT_FDCWD, val, &texts[i], (size_t)64 << 20) < 0) {
				pisb_err_sys(&c->err, PISB_EXIT_NOTFOUND, "--%s '%s'", name, val);
				goto out;
			}
			s = texts[i].s ? texts[i].s : "";
			len = texts[i].len;
		}
		if (is_old) {
			ed[nold].old = s;
			ed[nold++].oldn = len;
		} else {
			ed[nnew].new_ = s;
			ed[nnew++].newn = len;
		}
	}
	n = nold;
	if (!nold || nold != nnew) {
		pisb_err_set(&c->err, PISB_EXIT_USAGE, "edit: give each --old (or --old-file) with one --new (or --new-file): %zu old, %zu new",
			     nold, nnew);
		goto out;
	}
	if (fs_sandbox(c, &sb, PISB_V_EDIT) < 0 ||
	    sb.drv->edit(&sb, c->a.pos[1], ed, n, &abs, &bytes, &c->err) < 0)
		goto out;
	print_path_bytes(c, "edited", abs, bytes, (long long)n);
	ret = 0;
out:
	for (size_t i = 0; i < c->a.nset + 1; i++)
		pisb_buf_release(&texts[i]);
	free(texts);
	return ret;
}

static int cmd_logs(struct pisb_ctx *c)
{
	_cleanup_sandbox_ struct pisb_sandbox sb = PISB_SANDBOX_INIT;
	const char *svc = c->a.npos > 1 ? c->a.pos[1] : NULL;
	_cleanup_buf_ struct pisb_buf text = PISB_BUF_INIT;
	long long lines, got = 0;
	bool truncated = false;

	if (pisb_args_int(&c->a, "lines", 1, 500, 100, &lines, &c->err) < 0)
		return -1;
	if (fs_sandbox(c, &sb, PISB_V_LOGS) < 0 ||
	    sb.drv->logs(&sb, svc, lines, PISB_FS_READ_CAP, &text, &got, &truncated, &c->err) < 0)
		return -1;
	if (c->a.json) {
		FS_OUT_JSON(pisb_fs_logs_json(&w, svc, &text, got, truncated));
	} else {
		fs_out_text(&text);
		if (truncated)
			fprintf(stderr, "[pisb: truncated at %d KiB]\n", PISB_FS_READ_CAP / 1024);
	}
	return 0;
}

static const struct pisb_handler handlers[] = {
	{ "read", cmd_read, true },
	{ "write", cmd_write, true },
	{ "edit", cmd_edit, true },
	{ "ls", fs_cmd_ls, true },
	{ "stat", fs_cmd_stat, true },
	{ "mkdir", fs_cmd_mkdir, true },
	{ "find", fs_cmd_find, true },
	{ "grep", fs_cmd_grep, true },
	{ "logs", cmd_logs, true },
	{ "push", fs_cmd_push_pull, true },
	{ "pull", fs_cmd_push_pull, true },
	{ "diff", fs_cmd_diff, true },
	{ "apply", fs_cmd_apply, true },
	{ "sync", fs_cmd_sync, true },
	{ NULL, NULL, false },
};

int main(int argc, char **argv)
{
	return pisb_front_main("pisb-fs", handlers, argc, argv);
}
