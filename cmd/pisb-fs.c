/* pisb-fs - files inside a sandbox: read, write, edit, ls, stat, mkdir,
 * find, grep, logs, push, pull; see man/pisb-fs.1 */
#include "front.h"
#include "project.h"
#include "archive.h"
#include "driver.h"
#include "fs.h"
#include "json.h"
#include "opensandbox.h"

#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Human output goes out in big pieces. */
static void out_flush(struct pisb_buf *b, bool force)
{
	if (b->len && (force || b->len >= 64 * 1024)) {
		if (pisb_write_all(1, b->s, b->len) < 0) {
			/* stdout closed: nothing to tell */
		}
		pisb_buf_reset(b);
	}
}

/* Open sandbox NAME (pos[0]) whose driver must have verb v. */
static int sandbox(struct pisb_ctx *c, struct pisb_sandbox *sb, enum pisb_verb_id v)
{
	pisb_os_set_verbose(c->a.verbose);
	if (pisb_sandbox_open(sb, &c->st, c->a.pos[0], &c->err) < 0)
		return -1;
	return pisb_driver_has(sb->drv, v) ? 0 : pisb_driver_refuse(sb, v, &c->err);
}

static int cmd_read(struct pisb_ctx *c)
{
	_cleanup_sandbox_ struct pisb_sandbox sb = PISB_SANDBOX_INIT;
	struct pisb_fs_text t;
	_cleanup_free_ char *abs = NULL;
	_cleanup_buf_ struct pisb_buf b = PISB_BUF_INIT;
	long long off, lim, bytes;
	struct pisb_jw w;

	if (pisb_args_int(&c->a, "offset", 1, 1LL << 40, 1, &off, &c->err) < 0 ||
	    pisb_args_int(&c->a, "limit", 1, 1LL << 40, 0, &lim, &c->err) < 0)
		return -1;
	if (pisb_args_has(&c->a, "raw") && (pisb_args_has(&c->a, "offset") || pisb_args_has(&c->a, "limit")))
		return pisb_err_set(&c->err, PISB_EXIT_USAGE, "--raw streams the whole file: drop --offset and --limit");
	if (sandbox(c, &sb, PISB_V_READ) < 0)
		return -1;
	if (pisb_args_has(&c->a, "raw"))
		return sb.drv->read_raw(&sb, c->a.pos[1], 1, &bytes, &c->err) < 0 ? -1 : 0;
	if (sb.drv->read_text(&sb, c->a.pos[1], off, lim, PISB_FS_READ_CAP, &abs, &t, &c->err) < 0)
		return -1;
	if (c->a.json) {
		pisb_jw_init(&w, &b);
		pisb_jw_obj(&w);
		pisb_jw_kstr(&w, "path", abs);
		pisb_jw_key(&w, "content");
		pisb_jw_strn(&w, t.content.s, t.content.len);
		pisb_jw_kbool(&w, "truncated", t.truncated);
		pisb_jw_kint(&w, "bytes", t.bytes);
		pisb_jw_kint(&w, "offset", t.offset);
		pisb_jw_kint(&w, "lines", t.lines);
		pisb_jw_key(&w, "nextOffset");
		if (t.next_offset)
			pisb_jw_int(&w, t.next_offset);
		else
			pisb_jw_null(&w);
		pisb_jw_obj_end(&w);
		pisb_front_out(&b);
	} else {
		pisb_write_all(1, t.content.s, t.content.len);
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
	_cleanup_buf_ struct pisb_buf b = PISB_BUF_INIT;
	struct pisb_jw w;

	if (!c->a.json) {
		if (edits >= 0)
			pisb_front_info(c, "%s '%s': %lld edit%s, %lld bytes", verb, abs, edits, edits == 1 ? "" : "s", bytes);
		else
			pisb_front_info(c, "%s '%s': %lld bytes", verb, abs, bytes);
		return;
	}
	pisb_jw_init(&w, &b);
	pisb_jw_obj(&w);
	pisb_jw_kstr(&w, "path", abs);
	pisb_jw_kint(&w, "bytes", bytes);
	if (edits >= 0)
		pisb_jw_kint(&w, "edits", edits);
	pisb_jw_obj_end(&w);
	pisb_front_out(&b);
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
	if (sandbox(c, &sb, PISB_V_WRITE) < 0)
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
	if (sandbox(c, &sb, PISB_V_EDIT) < 0 ||
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

static void mode_string(const struct pisb_fs_info *i, char out[11])
{
	static const char rwx[] = "rwxrwxrwx";

	out[0] = !strcmp(i->type, "dir") ? 'd' : !strcmp(i->type, "symlink") ? 'l' :
		 !strcmp(i->type, "file") ? '-' : '?';
	for (int k = 0; k < 9; k++)
		out[k + 1] = (i->mode & (0400 >> k)) ? rwx[k] : '-';
	out[10] = '\0';
}

static void info_json(struct pisb_jw *w, const struct pisb_fs_info *i, const char *namekey)
{
	char mode[8], ts[32];

	snprintf(mode, sizeof(mode), "%04o", i->mode);
	pisb_time_rfc3339(i->mtime, ts);
	pisb_jw_kstr(w, namekey, i->name);
	pisb_jw_kstr(w, "type", i->type);
	pisb_jw_kint(w, "size", i->size);
	pisb_jw_kstr(w, "mode", mode);
	pisb_jw_kstr(w, "mtime", ts);
	if (i->target)
		pisb_jw_kstr(w, "target", i->target);
}

static void info_line(struct pisb_buf *b, const struct pisb_fs_info *i)
{
	char ms[11], ts[32];

	mode_string(i, ms);
	pisb_time_rfc3339(i->mtime, ts);
	pisb_buf_addf(b, "%s %12lld %s %s", ms, i->size, ts, i->name);
	if (i->target)
		pisb_buf_addf(b, " -> %s", i->target);
	pisb_buf_addc(b, '\n');
}

static int cmd_ls(struct pisb_ctx *c)
{
	_cleanup_sandbox_ struct pisb_sandbox sb = PISB_SANDBOX_INIT;
	_cleanup_free_ char *abs = NULL;
	_cleanup_buf_ struct pisb_buf b = PISB_BUF_INIT;
	struct pisb_fs_info *v = NULL;
	size_t n = 0;
	struct pisb_jw w;
	int ret = -1;

	if (sandbox(c, &sb, PISB_V_LS) < 0 ||
	    sb.drv->ls(&sb, c->a.npos > 1 ? c->a.pos[1] : NULL, &abs, &v, &n, &c->err) < 0)
		goto out;
	if (c->a.json) {
		pisb_jw_init(&w, &b);
		pisb_jw_obj(&w);
		pisb_jw_kstr(&w, "path", abs);
		pisb_jw_key(&w, "entries");
		pisb_jw_arr(&w);
		for (size_t i = 0; i < n; i++) {
			pisb_jw_obj(&w);
			info_json(&w, &v[i], "name");
			pisb_jw_obj_end(&w);
		}
		pisb_jw_arr_end(&w);
		pisb_jw_obj_end(&w);
		pisb_front_out(&b);
	} else {
		for (size_t i = 0; i < n; i++)
			info_line(&b, &v[i]);
		out_flush(&b, true);
	}
	ret = 0;
out:
	pisb_fs_infos_free(v, n);
	return ret;
}

static int cmd_stat(struct pisb_ctx *c)
{
	_cleanup_sandbox_ struct pisb_sandbox sb = PISB_SANDBOX_INIT;
	struct pisb_fs_info i = { 0 };
	_cleanup_free_ char *abs = NULL;
	_cleanup_buf_ struct pisb_buf b = PISB_BUF_INIT;
	struct pisb_jw w;
	int ret = -1;

	if (sandbox(c, &sb, PISB_V_STAT) < 0 ||
	    sb.drv->stat(&sb, c->a.pos[1], &abs, &i, &c->err) < 0)
		goto out;
	if (c->a.json) {
		pisb_jw_init(&w, &b);
		pisb_jw_obj(&w);
		info_json(&w, &i, "path");
		pisb_jw_kbool(&w, "readable", i.readable);
		pisb_jw_kbool(&w, "writable", i.writable);
		pisb_jw_obj_end(&w);
		pisb_front_out(&b);
	} else {
		char ts[32];
		pisb_time_rfc3339(i.mtime, ts);
		pisb_buf_addf(&b, "path: %s\ntype: %s\nsize: %lld\nmode: %04o\nmtime: %s\n", i.name, i.type,
			      i.size, i.mode, ts);
		if (i.target)
			pisb_buf_addf(&b, "target: %s\n", i.target);
		pisb_buf_addf(&b, "readable: %s\nwritable: %s\n", i.readable ? "yes" : "no", i.writable ? "yes" : "no");
		out_flush(&b, true);
	}
	ret = 0;
out:
	pisb_fs_info_release(&i);
	return ret;
}

static int cmd_mkdir(struct pisb_ctx *c)
{
	_cleanup_sandbox_ struct pisb_sandbox sb = PISB_SANDBOX_INIT;
	_cleanup_free_ char *abs = NULL;
	_cleanup_buf_ struct pisb_buf b = PISB_BUF_INIT;
	struct pisb_jw w;
	bool created = false;
	int ret = -1;

	if (sandbox(c, &sb, PISB_V_MKDIR) < 0 ||
	    sb.drv->mkdir(&sb, c->a.pos[1], &abs, &created, &c->err) < 0)
		goto out;
	if (c->a.json) {
		pisb_jw_init(&w, &b);
		pisb_jw_obj(&w);
		pisb_jw_kstr(&w, "path", abs);
		pisb_jw_kbool(&w, "created", created);
		pisb_jw_obj_end(&w);
		pisb_front_out(&b);
	}
	ret = 0;
out:
	return ret;
}

struct lines_out {
	struct pisb_ctx *c;
	struct pisb_buf b;
	struct pisb_jw w;
	const char *last_path;   /* grep: for the "--" group separator */
	long long last_line;
	bool any;
	bool context;            /* grep -C given: separators wanted */
};

static void find_line(void *arg, const char *rel)
{
	struct lines_out *o = arg;

	if (o->c->a.json) {
		pisb_jw_str(&o->w, rel);
	} else {
		pisb_buf_adds(&o->b, rel);
		pisb_buf_addc(&o->b, '\n');
		out_flush(&o->b, false);
	}
}

/* The JSON of find and grep: {"path": abs, "matches": [the lines o->w
 * collected], ...}, opened here (the path is known after the call). */
static void matches_begin(struct pisb_jw *w, struct pisb_buf *b, const char *abs,
			  struct lines_out *o)
{
	pisb_jw_arr_end(&o->w);
	pisb_jw_init(w, b);
	pisb_jw_obj(w);
	pisb_jw_kstr(w, "path", abs);
	pisb_jw_key(w, "matches");
	pisb_jw_raw(w, o->b.s ? o->b.s : "[]", o->b.s ? o->b.len : 2);
}

static int cmd_find(struct pisb_ctx *c)
{
	_cleanup_sandbox_ struct pisb_sandbox sb = PISB_SANDBOX_INIT;
	struct pisb_fs_find f = { 0 };
	struct lines_out o = { c, PISB_BUF_INIT, { 0 }, NULL, 0, false, false };
	_cleanup_buf_ struct pisb_buf out = PISB_BUF_INIT;
	_cleanup_free_ char *dir = NULL;
	struct pisb_jw w;
	bool truncated = false;
	int ret = -1;

	if (pisb_args_int(&c->a, "limit", 1, 1LL << 40, 1000, &f.limit, &c->err) < 0)
		return -1;
	if (sandbox(c, &sb, PISB_V_FIND) < 0)
		return -1;
	f.dir = pisb_args_get(&c->a, "path");
	f.pattern = c->a.pos[1];
	f.no_ignore = pisb_args_has(&c->a, "no-ignore");
	if (c->a.json) {
		pisb_jw_init(&o.w, &o.b);
		pisb_jw_arr(&o.w);
	}
	if (sb.drv->find(&sb, &f, &dir, find_line, &o, &truncated, &c->err) < 0)
		goto out;
	if (c->a.json) {
		matches_begin(&w, &out, dir, &o);
		pisb_jw_kbool(&w, "truncated", truncated);
		pisb_jw_obj_end(&w);
		pisb_front_out(&out);
	} else {
		out_flush(&o.b, true);
		if (truncated)
			fprintf(stderr, "[pisb: stopped at %lld results; raise --limit for more]\n", f.limit);
	}
	ret = 0;
out:
	pisb_buf_release(&o.b);
	return ret;
}

static void grep_line(void *arg, const struct pisb_fs_grep_line *l)
{
	struct lines_out *o = arg;

	if (o->c->a.json) {
		pisb_jw_obj(&o->w);
		pisb_jw_kstr(&o->w, "path", l->path);
		pisb_jw_kint(&o->w, "line", l->line);
		pisb_jw_key(&o->w, "text");
		if (l->cut) {
			_cleanup_buf_ struct pisb_buf t = PISB_BUF_INIT;
			pisb_buf_add(&t, l->text, l->len);
			pisb_buf_adds(&t, " [truncated]");
			pisb_jw_strn(&o->w, t.s, t.len);
		} else {
			pisb_jw_strn(&o->w, l->text, l->len);
		}
		pisb_jw_kstr(&o->w, "kind", l->context ? "context" : "match");
		pisb_jw_obj_end(&o->w);
		return;
	}
	/* like grep: "--" between groups that are not adjacent */
	if (o->context) {
		bool same = o->last_path && !strcmp(o->last_path, l->path);
		if (o->any && (!same || l->line != o->last_line + 1))
			pisb_buf_adds(&o->b, "--\n");
		if (!same) {
			free((char *)o->last_path);
			o->last_path = xstrdup(l->path);
		}
		o->last_line = l->line;
		o->any = true;
	}
	{
		char num[24], *q = num + sizeof(num);
		unsigned long long v = (unsigned long long)l->line;
		char sep = l->context ? '-' : ':';
		do
			*--q = (char)('0' + v % 10);
		while ((v /= 10));
		pisb_buf_adds(&o->b, l->path);
		pisb_buf_addc(&o->b, sep);
		pisb_buf_add(&o->b, q, (size_t)(num + sizeof(num) - q));
		pisb_buf_addc(&o->b, sep);
	}
	pisb_buf_add(&o->b, l->text, l->len);
	if (l->cut)
		pisb_buf_adds(&o->b, " [truncated]");
	pisb_buf_addc(&o->b, '\n');
	out_flush(&o->b, false);
}

static int cmd_grep(struct pisb_ctx *c)
{
	_cleanup_sandbox_ struct pisb_sandbox sb = PISB_SANDBOX_INIT;
	_cleanup_buf_ struct pisb_buf out = PISB_BUF_INIT;
	struct pisb_jw w;
	struct pisb_fs_grep g = { 0 };
	struct pisb_fs_grep_result r;
	struct lines_out o = { c, PISB_BUF_INIT, { 0 }, NULL, 0, false, false };
	_cleanup_free_ char *path = NULL;
	long long ctx;
	int ret = -1;

	if (pisb_args_int(&c->a, "limit", 1, 1LL << 40, 100, &g.limit, &c->err) < 0 ||
	    pisb_args_int(&c->a, "context", 0, 1000, 0, &ctx, &c->err) < 0)
		return -1;
	if (sandbox(c, &sb, PISB_V_GREP) < 0)
		return -1;
	g.path = pisb_args_get(&c->a, "path");
	g.pattern = c->a.pos[1];
	g.glob = pisb_args_get(&c->a, "glob");
	g.icase = pisb_args_has(&c->a, "ignore-case");
	g.literal = pisb_args_has(&c->a, "literal");
	g.no_ignore = pisb_args_has(&c->a, "no-ignore");
	g.context = (int)ctx;
	o.context = ctx > 0;
	if (c->a.json) {
		pisb_jw_init(&o.w, &o.b);
		pisb_jw_arr(&o.w);
	}
	if (sb.drv->grep(&sb, &g, &path, grep_line, &o, &r, &c->err) < 0)
		goto out;
	if (c->a.json) {
		matches_begin(&w, &out, path, &o);
		pisb_jw_kint(&w, "matchCount", r.matches);
		pisb_jw_kbool(&w, "limitReached", r.limit_reached);
		pisb_jw_kbool(&w, "linesTruncated", r.lines_truncated);
		pisb_jw_obj_end(&w);
		pisb_front_out(&out);
		ret = 0;
	} else {
		out_flush(&o.b, true);
		if (r.limit_reached)
			fprintf(stderr, "[pisb: stopped at %lld matches; raise --limit for more]\n", g.limit);
		ret = r.matches ? 0 : 1;   /* like grep: 1 when nothing matched */
	}
out:
	free((char *)o.last_path);
	pisb_buf_release(&o.b);
	return ret;
}

static int cmd_logs(struct pisb_ctx *c)
{
	_cleanup_sandbox_ struct pisb_sandbox sb = PISB_SANDBOX_INIT;
	const char *svc = c->a.npos > 1 ? c->a.pos[1] : NULL;
	_cleanup_buf_ struct pisb_buf text = PISB_BUF_INIT, b = PISB_BUF_INIT;
	long long lines, got = 0;
	bool truncated = false;
	struct pisb_jw w;
	int ret = -1;

	if (pisb_args_int(&c->a, "lines", 1, 500, 100, &lines, &c->err) < 0)
		return -1;
	if (sandbox(c, &sb, PISB_V_LOGS) < 0 ||
	    sb.drv->logs(&sb, svc, lines, PISB_FS_READ_CAP, &text, &got, &truncated, &c->err) < 0)
		goto out;
	if (c->a.json) {
		pisb_jw_init(&w, &b);
		pisb_jw_obj(&w);
		pisb_jw_kstr(&w, "service", svc);
		pisb_jw_key(&w, "content");
		pisb_jw_strn(&w, text.s ? text.s : "", text.len);
		pisb_jw_kint(&w, "lines", got);
		pisb_jw_kbool(&w, "truncated", truncated);
		pisb_jw_obj_end(&w);
		pisb_front_out(&b);
	} else {
		out_flush(&text, true);
		if (truncated)
			fprintf(stderr, "[pisb: truncated at %d KiB]\n", PISB_FS_READ_CAP / 1024);
	}
	ret = 0;
out:
	return ret;
}

static void print_xfer(struct pisb_ctx *c, const struct pisb_xfer *x, bool push)
{
	_cleanup_buf_ struct pisb_buf b = PISB_BUF_INIT;
	struct pisb_jw w;

	if (x->left_out_git)
		pisb_front_warn("left out %lld entries under .git (pass --include-git to pull them)",
				x->left_out_git);
	if (!c->a.json) {
		pisb_front_info(c, "%s %lld files (%lld bytes) %s '%s', sha256 %s", push ? "pushed" : "pulled",
				x->files, x->bytes, push ? "to" : "into", x->where, x->sha256);
		return;
	}
	pisb_jw_init(&w, &b);
	pisb_jw_obj(&w);
	pisb_jw_kint(&w, "files", x->files);
	pisb_jw_kint(&w, "bytes", x->bytes);
	pisb_jw_kstr(&w, "sha256", x->sha256);
	pisb_jw_kint(&w, "archiveBytes", x->archive_bytes);
	pisb_jw_kstr(&w, "to", x->where);
	if (push)
		pisb_jw_kbool(&w, "keptConfig", x->kept_config);
	pisb_jw_obj_end(&w);
	pisb_front_out(&b);
}

static int cmd_push_pull(struct pisb_ctx *c)
{
	_cleanup_sandbox_ struct pisb_sandbox sb = PISB_SANDBOX_INIT;
	struct pisb_xfer x = { 0 };
	bool push = !strcmp(c->a.verb->name, "push");
	struct pisb_pull_opts po = { pisb_args_has(&c->a, "include-git"), 0 };
	int ret = -1;

	if (!push && pisb_args_int(&c->a, "max-bytes", 1, LLONG_MAX, PISB_PULL_MAX_BYTES, &po.max_bytes, &c->err) < 0)
		return -1;
	if (sandbox(c, &sb, push ? PISB_V_PUSH : PISB_V_PULL) < 0)
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

static int cmd_diff(struct pisb_ctx *c)
{
	_cleanup_sandbox_ struct pisb_sandbox sb = PISB_SANDBOX_INIT;
	_cleanup_pdiff_ struct pisb_pdiff d = PISB_PDIFF_INIT;
	_cleanup_buf_ struct pisb_buf b = PISB_BUF_INIT;
	char *paths[256];
	struct pisb_pdiff_opts o = { paths, paths_of(c, paths, 256), pisb_args_has(&c->a, "all") };
	struct pisb_jw w;

	if (sandbox(c, &sb, PISB_V_DIFF) < 0 || pisb_project_diff(&sb, &o, &d, &c->err) < 0)
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

static int cmd_apply(struct pisb_ctx *c)
{
	_cleanup_sandbox_ struct pisb_sandbox sb = PISB_SANDBOX_INIT;
	_cleanup_pdiff_ struct pisb_pdiff d = PISB_PDIFF_INIT;
	_cleanup_buf_ struct pisb_buf b = PISB_BUF_INIT;
	char *paths[256];
	struct pisb_apply_opts o = { paths, paths_of(c, paths, 256), pisb_args_has(&c->a, "dry-run"),
				     pisb_args_has(&c->a, "force") };
	struct pisb_apply_result r;
	struct pisb_jw w;

	if (sandbox(c, &sb, PISB_V_DIFF) < 0 || pisb_project_apply(&sb, &o, &d, &r, &c->err) < 0)
		return -1;
	if (c->a.json) {
		pisb_jw_init(&w, &b);
		pisb_jw_obj(&w);
		pisb_jw_kstr(&w, "project", d.dir);
		pisb_jw_kbool(&w, "dryRun", o.dry_run);
		pisb_jw_kint(&w, "written", r.written);
		pisb_jw_kint(&w, "deleted", r.deleted);
		pisb_jw_key(&w, "paths");
		pisb_jw_arr(&w);
		for (size_t i = 0; i < d.n; i++)
			pisb_jw_str(&w, d.v[i].path);
		pisb_jw_arr_end(&w);
		pisb_jw_obj_end(&w);
		pisb_buf_addc(&b, '\n');
		pisb_front_out(&b);
		return 0;
	}
	for (size_t i = 0; i < d.n; i++)
		pisb_front_info(c, "%s %s", d.v[i].ntype ? (d.v[i].status == 'A' ? "add" : "write") : "delete",
				d.v[i].path);
	pisb_front_info(c, "%s %lld file%s, deleted %lld in '%s'", o.dry_run ? "would write" : "wrote",
			r.written, r.written == 1 ? "" : "s", r.deleted, d.dir);
	return 0;
}

static int cmd_sync(struct pisb_ctx *c)
{
	_cleanup_sandbox_ struct pisb_sandbox sb = PISB_SANDBOX_INIT;
	_cleanup_buf_ struct pisb_buf b = PISB_BUF_INIT;
	struct pisb_sync_result r;
	struct pisb_jw w;
	int ret;

	if (sandbox(c, &sb, PISB_V_DIFF) < 0)
		return -1;
	ret = pisb_project_sync(&sb, &r, &c->err);
	if (ret < 0 && c->err.code != PISB_EXIT_BUSY) {
		pisb_sync_result_release(&r);
		return -1;
	}
	if (c->a.json) {
		pisb_jw_init(&w, &b);
		pisb_jw_obj(&w);
		pisb_jw_kint(&w, "written", r.written);
		pisb_jw_kint(&w, "deleted", r.deleted);
		pisb_jw_kint(&w, "unchangedBoth", r.based);
		pisb_jw_key(&w, "conflicts");
		pisb_jw_arr(&w);
		for (size_t i = 0; i < r.conflicts.n; i++)
			pisb_jw_str(&w, r.conflicts.v[i]);
		pisb_jw_arr_end(&w);
		pisb_jw_obj_end(&w);
		pisb_buf_addc(&b, '\n');
		pisb_front_out(&b);
	} else {
		for (size_t i = 0; i < r.conflicts.n; i++)
			pisb_front_warn("'%s' changed in the sandbox and on the host: left alone", r.conflicts.v[i]);
		pisb_front_info(c, "brought %lld file%s in, deleted %lld", r.written, r.written == 1 ? "" : "s",
				r.deleted);
	}
	pisb_sync_result_release(&r);
	return ret;
}

static const struct pisb_handler handlers[] = {
	{ "read", cmd_read, true },
	{ "write", cmd_write, true },
	{ "edit", cmd_edit, true },
	{ "ls", cmd_ls, true },
	{ "stat", cmd_stat, true },
	{ "mkdir", cmd_mkdir, true },
	{ "find", cmd_find, true },
	{ "grep", cmd_grep, true },
	{ "logs", cmd_logs, true },
	{ "push", cmd_push_pull, true },
	{ "pull", cmd_push_pull, true },
	{ "diff", cmd_diff, true },
	{ "apply", cmd_apply, true },
	{ "sync", cmd_sync, true },
	{ NULL, NULL, false },
};

int main(int argc, char **argv)
{
	return pisb_front_main("pisb-fs", handlers, argc, argv);
}
