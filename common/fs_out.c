#include "fs_out.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void pisb_fs_text_json(struct pisb_jw *w, const char *abs, const struct pisb_fs_text *t)
{
	pisb_jw_obj(w);
	pisb_jw_kstr(w, "path", abs);
	pisb_jw_key(w, "content");
	pisb_jw_strn(w, t->content.s, t->content.len);
	pisb_jw_kbool(w, "truncated", t->truncated);
	pisb_jw_kint(w, "bytes", t->bytes);
	pisb_jw_kint(w, "offset", t->offset);
	pisb_jw_kint(w, "lines", t->lines);
	pisb_jw_key(w, "nextOffset");
	if (t->next_offset)
		pisb_jw_int(w, t->next_offset);
	else
		pisb_jw_null(w);
	pisb_jw_obj_end(w);
}

void pisb_fs_written_json(struct pisb_jw *w, const char *abs, long long bytes, long long edits)
{
	pisb_jw_obj(w);
	pisb_jw_kstr(w, "path", abs);
	pisb_jw_kint(w, "bytes", bytes);
	if (edits >= 0)
		pisb_jw_kint(w, "edits", edits);
	pisb_jw_obj_end(w);
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

/* the keys ls and stat share; namekey: "name" (ls) or "path" (stat) */
static void info_keys(struct pisb_jw *w, const struct pisb_fs_info *i, const char *namekey)
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

void pisb_fs_ls_json(struct pisb_jw *w, const char *abs, const struct pisb_fs_info *v, size_t n)
{
	pisb_jw_obj(w);
	pisb_jw_kstr(w, "path", abs);
	pisb_jw_key(w, "entries");
	pisb_jw_arr(w);
	for (size_t i = 0; i < n; i++) {
		pisb_jw_obj(w);
		info_keys(w, &v[i], "name");
		pisb_jw_obj_end(w);
	}
	pisb_jw_arr_end(w);
	pisb_jw_obj_end(w);
}

void pisb_fs_ls_text(struct pisb_buf *b, const struct pisb_fs_info *v, size_t n)
{
	for (size_t k = 0; k < n; k++) {
		const struct pisb_fs_info *i = &v[k];
		char ms[11], ts[32];

		mode_string(i, ms);
		pisb_time_rfc3339(i->mtime, ts);
		pisb_buf_addf(b, "%s %12lld %s %s", ms, i->size, ts, i->name);
		if (i->target)
			pisb_buf_addf(b, " -> %s", i->target);
		pisb_buf_addc(b, '\n');
	}
}

void pisb_fs_stat_json(struct pisb_jw *w, const struct pisb_fs_info *i)
{
	pisb_jw_obj(w);
	info_keys(w, i, "path");
	pisb_jw_kbool(w, "readable", i->readable);
	pisb_jw_kbool(w, "writable", i->writable);
	pisb_jw_obj_end(w);
}

void pisb_fs_stat_text(struct pisb_buf *b, const struct pisb_fs_info *i)
{
	char ts[32];

	pisb_time_rfc3339(i->mtime, ts);
	pisb_buf_addf(b, "path: %s\ntype: %s\nsize: %lld\nmode: %04o\nmtime: %s\n", i->name, i->type,
		      i->size, i->mode, ts);
	if (i->target)
		pisb_buf_addf(b, "target: %s\n", i->target);
	pisb_buf_addf(b, "readable: %s\nwritable: %s\n", i->readable ? "yes" : "no", i->writable ? "yes" : "no");
}

void pisb_fs_mkdir_json(struct pisb_jw *w, const char *abs, bool created)
{
	pisb_jw_obj(w);
	pisb_jw_kstr(w, "path", abs);
	pisb_jw_kbool(w, "created", created);
	pisb_jw_obj_end(w);
}

void pisb_fs_logs_json(struct pisb_jw *w, const char *service, const struct pisb_buf *text,
		       long long lines, bool truncated)
{
	pisb_jw_obj(w);
	pisb_jw_kstr(w, "service", service);
	pisb_jw_key(w, "content");
	pisb_jw_strn(w, text->s ? text->s : "", text->len);
	pisb_jw_kint(w, "lines", lines);
	pisb_jw_kbool(w, "truncated", truncated);
	pisb_jw_obj_end(w);
}

void pisb_fs_xfer_json(struct pisb_jw *w, const struct pisb_xfer *x, bool push)
{
	pisb_jw_obj(w);
	pisb_jw_kint(w, "files", x->files);
	pisb_jw_kint(w, "bytes", x->bytes);
	pisb_jw_kstr(w, "sha256", x->sha256);
	pisb_jw_kint(w, "archiveBytes", x->archive_bytes);
	pisb_jw_kstr(w, "to", x->where);
	if (push)
		pisb_jw_kbool(w, "keptConfig", x->kept_config);
	pisb_jw_obj_end(w);
}

void pisb_fs_apply_json(struct pisb_jw *w, const struct pisb_pdiff *d, bool dry_run,
			const struct pisb_apply_result *r)
{
	pisb_jw_obj(w);
	pisb_jw_kstr(w, "project", d->dir);
	pisb_jw_kbool(w, "dryRun", dry_run);
	pisb_jw_kint(w, "written", r->written);
	pisb_jw_kint(w, "deleted", r->deleted);
	pisb_jw_key(w, "paths");
	pisb_jw_arr(w);
	for (size_t i = 0; i < d->n; i++)
		pisb_jw_str(w, d->v[i].path);
	pisb_jw_arr_end(w);
	pisb_jw_obj_end(w);
}

void pisb_fs_sync_json(struct pisb_jw *w, const struct pisb_sync_result *r)
{
	pisb_jw_obj(w);
	pisb_jw_kint(w, "written", r->written);
	pisb_jw_kint(w, "deleted", r->deleted);
	pisb_jw_kint(w, "unchangedBoth", r->based);
	pisb_jw_key(w, "conflicts");
	pisb_jw_arr(w);
	for (size_t i = 0; i < r->conflicts.n; i++)
		pisb_jw_str(w, r->conflicts.v[i]);
	pisb_jw_arr_end(w);
	pisb_jw_obj_end(w);
}

/* ---- find and grep ---- */

/* Text goes out in big pieces; FORCE: all that is there. */
static void flush(struct pisb_fs_lines *o, bool force)
{
	if (o->b.len && (force || o->b.len >= 64 * 1024)) {
		if (pisb_write_all(o->fd, o->b.s, o->b.len) < 0) {
			/* the reader left: nothing to tell */
		}
		pisb_buf_reset(&o->b);
	}
}

void pisb_fs_lines_init(struct pisb_fs_lines *o, bool json, bool context, int fd)
{
	memset(o, 0, sizeof(*o));
	o->b = (struct pisb_buf)PISB_BUF_INIT;
	o->json = json;
	o->context = context;
	o->fd = fd;
	if (json) {
		pisb_jw_init(&o->w, &o->b);
		pisb_jw_arr(&o->w);
	}
}

void pisb_fs_lines_release(struct pisb_fs_lines *o)
{
	free(o->last_path);
	o->last_path = NULL;
	pisb_buf_release(&o->b);
}

void pisb_fs_find_line(void *arg, const char *rel)
{
	struct pisb_fs_lines *o = arg;

	if (o->json) {
		pisb_jw_str(&o->w, rel);
		return;
	}
	pisb_buf_adds(&o->b, rel);
	pisb_buf_addc(&o->b, '\n');
	flush(o, false);
}

void pisb_fs_grep_line(void *arg, const struct pisb_fs_grep_line *l)
{
	struct pisb_fs_lines *o = arg;
	char num[24], *q = num + sizeof(num);
	unsigned long long v = (unsigned long long)l->line;
	char sep = l->context ? '-' : ':';

	if (o->json) {
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
			free(o->last_path);
			o->last_path = xstrdup(l->path);
		}
		o->last_line = l->line;
		o->any = true;
	}
	do
		*--q = (char)('0' + v % 10);
	while ((v /= 10));
	pisb_buf_adds(&o->b, l->path);
	pisb_buf_addc(&o->b, sep);
	pisb_buf_add(&o->b, q, (size_t)(num + sizeof(num) - q));
	pisb_buf_addc(&o->b, sep);
	pisb_buf_add(&o->b, l->text, l->len);
	if (l->cut)
		pisb_buf_adds(&o->b, " [truncated]");
	pisb_buf_addc(&o->b, '\n');
	flush(o, false);
}

void pisb_fs_lines_end_text(struct pisb_fs_lines *o)
{
	flush(o, true);
}

/* {"path": abs, "matches": [the lines o collected], ...: left open */
static void matches_begin(struct pisb_fs_lines *o, const char *abs, struct pisb_jw *w,
			  struct pisb_buf *out)
{
	pisb_jw_arr_end(&o->w);
	pisb_jw_init(w, out);
	pisb_jw_obj(w);
	pisb_jw_kstr(w, "path", abs);
	pisb_jw_key(w, "matches");
	pisb_jw_raw(w, o->b.s ? o->b.s : "[]", o->b.s ? o->b.len : 2);
}

void pisb_fs_find_json(struct pisb_fs_lines *o, const char *abs, bool truncated, struct pisb_buf *out)
{
	struct pisb_jw w;

	matches_begin(o, abs, &w, out);
	pisb_jw_kbool(&w, "truncated", truncated);
	pisb_jw_obj_end(&w);
}

void pisb_fs_grep_json(struct pisb_fs_lines *o, const char *abs, const struct pisb_fs_grep_result *r,
		       struct pisb_buf *out)
{
	struct pisb_jw w;

	matches_begin(o, abs, &w, out);
	pisb_jw_kint(&w, "matchCount", r->matches);
	pisb_jw_kbool(&w, "limitReached", r->limit_reached);
	pisb_jw_kbool(&w, "linesTruncated", r->lines_truncated);
	pisb_jw_obj_end(&w);
}
