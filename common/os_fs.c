/* os_fs.c - files in an OpenSandbox sandbox through execd's file API
 * (download, upload, info, directories) and, where the API has no verb,
 * through commands (the rename of an atomic write, grep).
 *
 * execd's FileInfo: {path, type: file|directory|symlink|other, size,
 * modified_at (RFC 3339), mode: an integer whose decimal digits spell the
 * octal mode (644 = 0644)}.  pisb's JSON says "dir" for a directory and
 * gives the mode as an octal string, as the local driver does.
 */
#include "opensandbox.h"
#include "os_internal.h"
#include "err.h"
#include "json.h"
#include "proc.h"
#include "util.h"

#include <ctype.h>
#include <errno.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define LINE_CAP 500             /* grep: characters kept of a line */
#define FIND_DEPTH 64            /* directories/list depth for find/grep */

/* ---- small helpers ---- */

static int open_ready(struct pisb_state *st, const char *name, struct os_inst *t,
		      struct pisb_err *e)
{
	if (os_inst_open(st, name, t, e) < 0)
		return -1;
	if (os_inst_ready(t, e) < 0) {
		os_inst_release(t);
		return -1;
	}
	return 0;
}

static void add_path_query(struct pisb_buf *b, const char *route, const char *path)
{
	pisb_buf_adds(b, route);
	pisb_buf_adds(b, strchr(route, '?') ? "&path=" : "?path=");
	pisb_http_escape(b, path);
}

/* RFC 3339 -> unix seconds (0 if unparsable). */
static int64_t parse_time(const char *s)
{
	struct tm tm;
	const char *p;
	int64_t t;

	if (!s)
		return 0;
	memset(&tm, 0, sizeof(tm));
	p = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
	if (!p)
		return 0;
	t = (int64_t)timegm(&tm);
	if (*p == '.')
		for (p++; isdigit((unsigned char)*p); p++)
			;
	if ((*p == '+' || *p == '-') && isdigit((unsigned char)p[1])) {
		int hh = 0, mm = 0;
		if (sscanf(p + 1, "%2d:%2d", &hh, &mm) >= 1)
			t -= (*p == '+' ? 1 : -1) * (int64_t)(hh * 3600 + mm * 60);
	}
	return t;
}

/* execd's mode (decimal digits spelling octal) -> permission bits */
static unsigned mode_bits(long long m)
{
	unsigned v = 0, mul = 1;

	while (m > 0) {
		v += (unsigned)(m % 10 & 7) * mul;
		mul *= 8;
		m /= 10;
	}
	return v & 07777;
}

static const char *type_word(const char *execd_type)
{
	if (!execd_type)
		return "other";
	if (!strcmp(execd_type, "directory"))
		return "dir";
	if (!strcmp(execd_type, "file") || !strcmp(execd_type, "symlink"))
		return execd_type;
	return "other";
}

struct finfo {
	char *path;
	const char *type;
	long long size;
	unsigned mode;
	int64_t mtime;
};

static void finfo_release(struct finfo *f)
{
	free(f->path);
	memset(f, 0, sizeof(*f));
}

static void finfo_parse(struct pisb_json *j, int o, struct finfo *f)
{
	long long v;
	_cleanup_free_ char *ty = pisb_json_str(j, pisb_json_get(j, o, "type"));
	_cleanup_free_ char *mt = pisb_json_str(j, pisb_json_get(j, o, "modified_at"));

	memset(f, 0, sizeof(*f));
	f->path = pisb_json_str(j, pisb_json_get(j, o, "path"));
	f->type = type_word(ty);
	if (pisb_json_int(j, pisb_json_get(j, o, "size"), &v) == 0)
		f->size = v;
	if (pisb_json_int(j, pisb_json_get(j, o, "mode"), &v) == 0)
		f->mode = mode_bits(v);
	f->mtime = parse_time(mt);
}

static void jw_mode(struct pisb_jw *w, unsigned mode)
{
	char m[8];
	snprintf(m, sizeof(m), "%04o", mode);
	pisb_jw_kstr(w, "mode", m);
}

static const char *base_name(const char *p)
{
	const char *s = strrchr(p, '/');
	return s && s[1] ? s + 1 : p;
}

static char *dir_name(const char *p)
{
	const char *s = strrchr(p, '/');
	if (!s || s == p)
		return xstrdup("/");
	return xstrndup(p, (size_t)(s - p));
}

/* GET /files/info for one path: 0 (f filled), 1 missing, -1 error. */
static int info(struct os_inst *t, const char *abs, struct finfo *f, struct pisb_err *e)
{
	_cleanup_buf_ struct pisb_buf q = PISB_BUF_INIT;
	struct pisb_http_resp r;
	struct pisb_json j;
	int ret = -1;

	memset(f, 0, sizeof(*f));
	add_path_query(&q, "/files/info", abs);
	pisb_http_resp_init(&r);
	if (os_execd(&t->c, "GET", q.s, NULL, NULL, 0, 30000, &r, e) < 0)
		goto out;
	if (r.status == 404) {
		ret = 1;
		goto out;
	}
	if (r.status != 200) {
		os_fail(&t->c, &r, "file info", e);
		goto out;
	}
	if (pisb_json_parse(&j, r.body.s, r.body.len, e) < 0)
		goto out;
	if (j.ntok < 3 || j.tok[0].type != JSMN_OBJECT || j.tok[0].size < 1) {
		pisb_json_release(&j);
		pisb_err_set(e, PISB_EXIT_BACKEND, "file info: unexpected answer");
		goto out;
	}
	finfo_parse(&j, 2, f);
	pisb_json_release(&j);
	ret = 0;
out:
	pisb_http_resp_release(&r);
	return ret;
}

static int not_found(const char *abs, struct pisb_err *e)
{
	return pisb_err_set(e, PISB_EXIT_NOTFOUND, "'%s': no such file or directory", abs);
}

/* ---- read ---- */

/* Download abs (whole file, or the first `first` bytes when > 0).
 * *size gets the file's size when the answer says it. */
static int download(struct os_inst *t, const char *abs, long long first, struct pisb_buf *out,
		    long long *size, struct pisb_err *e)
{
	_cleanup_buf_ struct pisb_buf q = PISB_BUF_INIT;
	_cleanup_free_ char *url = NULL, *range = NULL;
	struct curl_slist *h = NULL;
	struct pisb_http_call call = { 0 };
	struct pisb_http_resp r;
	int ret = -1;

	add_path_query(&q, "/files/download", abs);
	url = xasprintf("%s%s", t->c.execd, q.s);
	for (struct curl_slist *x = t->c.ex_hdrs; x; x = x->next)
		h = curl_slist_append(h, x->data);
	if (first > 0) {
		range = xasprintf("Range: bytes=0-%lld", first - 1);
		h = curl_slist_append(h, range);
	}
	call.method = "GET";
	call.url = url;
	call.headers = h;
	call.stall_ms = 120000;
	call.want_header = first > 0 ? "Content-Range" : NULL;
	pisb_http_resp_init(&r);
	if (pisb_http_run(t->c.h, &call, &r, "the sandbox's execd", e) < 0)
		goto out;
	if (r.status == 404) {
		not_found(abs, e);
		goto out;
	}
	if (r.status == 416) {
		/* an empty file has no byte 0 */
		*size = 0;
		ret = 0;
		goto out;
	}
	if (r.status != 200 && r.status != 206) {
		struct finfo f;
		struct pisb_err ig = PISB_ERR_INIT;
		if (info(t, abs, &f, &ig) == 0 && !strcmp(f.type, "dir")) {
			pisb_err_set(e, PISB_EXIT_FAIL, "'%s': is a directory", abs);
			finfo_release(&f);
			goto out;
		}
		finfo_release(&f);
		os_fail(&t->c, &r, "read", e);
		goto out;
	}
	*size = (long long)r.body.len;
	if (r.status == 206 && r.want_value) {
		const char *sl = strrchr(r.want_value, '/');
		if (sl && isdigit((unsigned char)sl[1]))
			*size = atoll(sl + 1);
	}
	pisb_buf_add(out, r.body.s ? r.body.s : "", r.body.len);
	ret = 0;
out:
	curl_slist_free_all(h);
	pisb_http_resp_release(&r);
	return ret;
}

/* Cut n back so that a UTF-8 sequence is not split. */
static size_t utf8_cut(const char *s, size_t n)
{
	size_t k = n, back = 0;

	while (k > 0 && back < 4 && ((unsigned char)s[k - 1] & 0xc0) == 0x80) {
		k--;
		back++;
	}
	if (k > 0 && ((unsigned char)s[k - 1] & 0xc0) == 0xc0) {
		unsigned char lead = (unsigned char)s[k - 1];
		size_t need = lead >= 0xf0 ? 4 : lead >= 0xe0 ? 3 : 2;
		if (back + 1 < need)
			return k - 1;
	}
	return n;
}

int pisb_os_read(struct pisb_state *st, const char *name, const char *path,
		 long long offset, long long limit, bool raw,
		 struct pisb_buf *out, bool *truncated, long long *size,
		 struct pisb_err *e)
{
	struct os_inst t;
	_cleanup_free_ char *abs = NULL;
	_cleanup_buf_ struct pisb_buf all = PISB_BUF_INIT;
	bool lines = offset > 1 || limit > 0;
	int ret = -1;

	*truncated = false;
	*size = 0;
	if (open_ready(st, name, &t, e) < 0)
		return -1;
	abs = os_path(&t, path);
	if (raw) {
		ret = download(&t, abs, 0, out, size, e);
		goto out;
	}
	if (download(&t, abs, lines ? 0 : OS_CAP + 1, &all, size, e) < 0)
		goto out;
	{
		const char *p = all.s ? all.s : "", *end = p + all.len;
		long long ln = 1;
		size_t n;

		if (lines) {
			while (ln < offset && p < end) {
				const char *nl = memchr(p, '\n', (size_t)(end - p));
				p = nl ? nl + 1 : end;
				ln++;
			}
			if (limit > 0) {
				const char *q = p;
				for (long long k = 0; k < limit && q < end; k++) {
					const char *nl = memchr(q, '\n', (size_t)(end - q));
					q = nl ? nl + 1 : end;
				}
				end = q;
			}
		}
		n = (size_t)(end - p);
		if (n > OS_CAP) {
			n = utf8_cut(p, OS_CAP);
			*truncated = true;
		} else if (!lines && *size > (long long)n) {
			*truncated = true;
			n = utf8_cut(p, n);
		}
		pisb_buf_add(out, p, n);
	}
	ret = 0;
out:
	if (ret < 0)
		pisb_err_prefix(e, "read in sandbox '%s'", name);
	os_inst_release(&t);
	return ret;
}

int pisb_os_read_json(struct pisb_state *st, const char *name, const char *path,
		      long long offset, long long limit, struct pisb_jw *w,
		      struct pisb_err *e)
{
	_cleanup_buf_ struct pisb_buf b = PISB_BUF_INIT;
	bool truncated;
	long long size;

	if (pisb_os_read(st, name, path, offset, limit, false, &b, &truncated, &size, e) < 0)
		return -1;
	pisb_jw_obj(w);
	pisb_jw_key(w, "content");
	pisb_jw_strn(w, b.s ? b.s : "", b.len);
	pisb_jw_kbool(w, "truncated", truncated);
	pisb_jw_kint(w, "bytes", size);
	pisb_jw_obj_end(w);
	return 0;
}

/* ---- write / edit ---- */

static int upload(struct os_inst *t, const char *abs, const void *data, size_t n,
		  unsigned mode, struct pisb_err *e)
{
	_cleanup_free_ char *url = xasprintf("%s/files/upload", t->c.execd);
	_cleanup_buf_ struct pisb_buf meta = PISB_BUF_INIT;
	struct curl_slist *h = NULL;
	struct pisb_http_call call = { 0 };
	struct pisb_http_resp r;
	struct pisb_jw w;
	curl_mime *mime;
	curl_mimepart *part;
	char digits[16];
	int ret = -1;

	/* execd's mode: the octal digits read as a decimal number */
	snprintf(digits, sizeof(digits), "%o", mode);
	pisb_jw_init(&w, &meta);
	pisb_jw_obj(&w);
	pisb_jw_kstr(&w, "path", abs);
	pisb_jw_kint(&w, "mode", atoll(digits));
	pisb_jw_obj_end(&w);
	mime = curl_mime_init(t->c.h);
	part = curl_mime_addpart(mime);
	curl_mime_name(part, "metadata");
	curl_mime_filename(part, "metadata");
	curl_mime_type(part, "application/json");
	curl_mime_data(part, meta.s, meta.len);
	part = curl_mime_addpart(mime);
	curl_mime_name(part, "file");
	curl_mime_filename(part, base_name(abs));
	curl_mime_type(part, "application/octet-stream");
	curl_mime_data(part, n ? data : "", n);
	for (struct curl_slist *x = t->c.ex_hdrs; x; x = x->next)
		h = curl_slist_append(h, x->data);
	h = curl_slist_append(h, "Expect:");
	call.method = "POST";
	call.url = url;
	call.headers = h;
	call.mime = mime;
	call.stall_ms = 120000;
	pisb_http_resp_init(&r);
	if (pisb_http_run(t->c.h, &call, &r, "the sandbox's execd", e) < 0)
		goto out;
	if (r.status != 200) {
		os_fail(&t->c, &r, "upload", e);
		goto out;
	}
	ret = 0;
out:
	curl_mime_free(mime);
	curl_slist_free_all(h);
	pisb_http_resp_release(&r);
	return ret;
}

static int delete_file(struct os_inst *t, const char *abs)
{
	_cleanup_buf_ struct pisb_buf q = PISB_BUF_INIT;
	struct pisb_http_resp r;
	struct pisb_err ig = PISB_ERR_INIT;

	add_path_query(&q, "/files", abs);
	pisb_http_resp_init(&r);
	os_execd(&t->c, "DELETE", q.s, NULL, NULL, 0, 30000, &r, &ig);
	pisb_http_resp_release(&r);
	return 0;
}

/* Run a short command; its stderr becomes the error message. */
static int small_cmd(struct os_inst *t, const char *cmd, const char *what, struct pisb_err *e)
{
	_cleanup_buf_ struct pisb_buf err = PISB_BUF_INIT;
	struct os_run o = { .out_fd = -1, .err_fd = -1, .err = &err, .cap = 4096, .timeout_ms = 120000 };
	int code = 0;

	if (os_run_cmd(&t->c, cmd, "/", NULL, 0, &o, &code, e) < 0)
		return -1;
	if (code != 0) {
		while (err.len && err.s[err.len - 1] == '\n')
			err.s[--err.len] = '\0';
		return pisb_err_set(e, PISB_EXIT_FAIL, "%s: %s", what,
				    err.len ? err.s : "the command failed");
	}
	return 0;
}

/* Replace abs with data: upload beside it, then rename inside. */
static int replace(struct os_inst *t, const char *abs, const void *data, size_t n,
		   unsigned mode, struct pisb_err *e)
{
	_cleanup_free_ char *dir = dir_name(abs), *tmp = NULL;
	_cleanup_buf_ struct pisb_buf cmd = PISB_BUF_INIT;
	char rnd[9];

	pisb_random_hex(rnd, 8);
	tmp = xasprintf("%s%s.%s.pisb-%s", dir, strcmp(dir, "/") ? "/" : "", base_name(abs), rnd);
	if (upload(t, tmp, data, n, mode, e) < 0)
		return -1;
	pisb_buf_adds(&cmd, "exec mv -f -- ");
	os_sq(&cmd, tmp);
	pisb_buf_addc(&cmd, ' ');
	os_sq(&cmd, abs);
	if (small_cmd(t, cmd.s, "rename into place", e) < 0) {
		delete_file(t, tmp);
		return -1;
	}
	return 0;
}

/* "0644", "644", "755" -> bits; -1 if not octal */
static int parse_mode(const char *s)
{
	long v = 0;

	if (!s || !*s || strlen(s) > 5)
		return -1;
	for (const char *p = s; *p; p++) {
		if (*p < '0' || *p > '7')
			return -1;
		v = v * 8 + (*p - '0');
	}
	return v <= 07777 ? (int)v : -1;
}

static int write_in(struct os_inst *t, const char *abs, const void *data, size_t n,
		    bool mkdir, int mode, struct pisb_err *e)
{
	struct finfo f;
	int r = info(t, abs, &f, e);

	if (r < 0)
		return -1;
	if (r == 0) {
		if (!strcmp(f.type, "dir")) {
			finfo_release(&f);
			return pisb_err_set(e, PISB_EXIT_FAIL, "'%s': is a directory", abs);
		}
		if (mode < 0)
			mode = (int)f.mode;
		finfo_release(&f);
	} else {
		if (!mkdir) {
			_cleanup_free_ char *dir = dir_name(abs);
			struct finfo d;
			int dr = info(t, dir, &d, e);
			if (dr < 0)
				return -1;
			if (dr == 1)
				return pisb_err_set(e, PISB_EXIT_NOTFOUND,
						    "'%s': no such directory (pass --mkdir to create it)", dir);
			if (strcmp(d.type, "dir")) {
				finfo_release(&d);
				return pisb_err_set(e, PISB_EXIT_FAIL, "'%s': not a directory", dir);
			}
			finfo_release(&d);
		}
		if (mode < 0)
			mode = 0644;
	}
	return replace(t, abs, data, n, (unsigned)mode, e);
}

int pisb_os_write(struct pisb_state *st, const char *name, const char *path,
		  const void *data, size_t n, bool mkdir, const char *mode,
		  struct pisb_jw *w, struct pisb_err *e)
{
	struct os_inst t;
	_cleanup_free_ char *abs = NULL;
	int m = -1, ret;

	if (mode && (m = parse_mode(mode)) < 0)
		return pisb_err_set(e, PISB_EXIT_USAGE, "--mode '%s': expected an octal mode such as 0644", mode);
	if (open_ready(st, name, &t, e) < 0)
		return -1;
	abs = os_path(&t, path);
	ret = write_in(&t, abs, data, n, mkdir, m, e);
	if (ret < 0)
		pisb_err_prefix(e, "write in sandbox '%s'", name);
	else if (w) {
		pisb_jw_obj(w);
		pisb_jw_kstr(w, "path", abs);
		pisb_jw_kint(w, "bytes", (long long)n);
		pisb_jw_obj_end(w);
	}
	os_inst_release(&t);
	return ret;
}

struct span {
	size_t at, oldn;
	const char *new_;
	size_t newn;
	size_t idx;
};

static int cmp_span(const void *a, const void *b)
{
	const struct span *x = a, *y = b;
	return x->at < y->at ? -1 : x->at > y->at;
}

int pisb_os_edit(struct pisb_state *st, const char *name, const char *path,
		 const char *const *olds, const char *const *news, size_t n,
		 struct pisb_jw *w, struct pisb_err *e)
{
	struct os_inst t;
	_cleanup_free_ char *abs = NULL;
	_cleanup_free_ struct span *sp = NULL;
	_cleanup_buf_ struct pisb_buf cur = PISB_BUF_INIT, out = PISB_BUF_INIT;
	struct finfo f;
	long long size;
	int r, ret = -1;

	if (n == 0)
		return pisb_err_set(e, PISB_EXIT_USAGE, "edit: give at least one --old TEXT --new TEXT");
	for (size_t i = 0; i < n; i++)
		if (!olds[i][0])
			return pisb_err_set(e, PISB_EXIT_USAGE, "edit %zu: --old must not be empty", i + 1);
	if (open_ready(st, name, &t, e) < 0)
		return -1;
	abs = os_path(&t, path);
	r = info(&t, abs, &f, e);
	if (r != 0) {
		if (r == 1)
			not_found(abs, e);
		goto out;
	}
	if (strcmp(f.type, "file")) {
		pisb_err_set(e, PISB_EXIT_FAIL, "'%s': %s", abs,
			     !strcmp(f.type, "dir") ? "is a directory" : "not a regular file");
		finfo_release(&f);
		goto out;
	}
	if (download(&t, abs, 0, &cur, &size, e) < 0) {
		finfo_release(&f);
		goto out;
	}
	sp = xcalloc(n, sizeof(*sp));
	for (size_t i = 0; i < n; i++) {
		size_t on = strlen(olds[i]), count = 0;
		const char *s = cur.s ? cur.s : "", *end = s + cur.len, *p = s, *hit = NULL;
		while (p < end && (p = memmem(p, (size_t)(end - p), olds[i], on))) {
			if (!count)
				hit = p;
			count++;
			p++;
		}
		if (count != 1) {
			pisb_err_set(e, PISB_EXIT_FAIL, "edit %zu: the old text %s in '%s'", i + 1,
				     count ? "occurs more than once" : "does not occur", abs);
			finfo_release(&f);
			goto out;
		}
		sp[i] = (struct span){ (size_t)(hit - s), on, news[i], strlen(news[i]), i };
	}
	qsort(sp, n, sizeof(*sp), cmp_span);
	for (size_t i = 1; i < n; i++)
		if (sp[i].at < sp[i - 1].at + sp[i - 1].oldn) {
			pisb_err_set(e, PISB_EXIT_FAIL, "edits %zu and %zu overlap in '%s'",
				     sp[i - 1].idx + 1, sp[i].idx + 1, abs);
			finfo_release(&f);
			goto out;
		}
	{
		size_t pos = 0;
		for (size_t i = 0; i < n; i++) {
			pisb_buf_add(&out, cur.s + pos, sp[i].at - pos);
			pisb_buf_add(&out, sp[i].new_, sp[i].newn);
			pos = sp[i].at + sp[i].oldn;
		}
		pisb_buf_add(&out, cur.s ? cur.s + pos : "", cur.len - pos);
	}
	ret = replace(&t, abs, out.s ? out.s : "", out.len, f.mode, e);
	finfo_release(&f);
	if (ret == 0 && w) {
		pisb_jw_obj(w);
		pisb_jw_kstr(w, "path", abs);
		pisb_jw_kint(w, "replacements", (long long)n);
		pisb_jw_kint(w, "bytes", (long long)out.len);
		pisb_jw_obj_end(w);
	}
out:
	if (ret < 0)
		pisb_err_prefix(e, "edit in sandbox '%s'", name);
	os_inst_release(&t);
	return ret;
}

/* ---- ls / stat / mkdir ---- */

/* GET /directories/list: 0 with the parsed JSON (array) in j/b, 1
 * missing, 2 not a directory, -1 error. */
static int list_dir(struct os_inst *t, const char *abs, int depth, struct pisb_buf *b,
		    struct pisb_json *j, struct pisb_err *e)
{
	_cleanup_buf_ struct pisb_buf q = PISB_BUF_INIT;
	struct pisb_http_resp r;
	int ret = -1;

	add_path_query(&q, "/directories/list", abs);
	pisb_buf_addf(&q, "&depth=%d", depth);
	pisb_http_resp_init(&r);
	if (os_execd(&t->c, "GET", q.s, NULL, NULL, 0, 0, &r, e) < 0)
		goto out;
	if (r.status == 404) {
		ret = 1;
		goto out;
	}
	if (r.status == 400) {
		struct finfo f;
		int k = info(t, abs, &f, e);
		if (k == 0 && !strcmp(f.type, "symlink")) {
			/* execd refuses to list through a link: say what it is */
			pisb_err_set(e, PISB_EXIT_FAIL, "'%s': is a symbolic link", abs);
			k = -1;
		}
		finfo_release(&f);
		ret = k == 1 ? 1 : k == 0 ? 2 : -1;
		goto out;
	}
	if (r.status != 200) {
		os_fail(&t->c, &r, "list", e);
		goto out;
	}
	*b = r.body;
	memset(&r.body, 0, sizeof(r.body));
	if (pisb_json_parse(j, b->s, b->len, e) < 0 || j->tok[0].type != JSMN_ARRAY) {
		if (j->tok)
			pisb_json_release(j);
		pisb_err_set(e, PISB_EXIT_BACKEND, "list: unexpected answer");
		goto out;
	}
	ret = 0;
out:
	pisb_http_resp_release(&r);
	return ret;
}

struct entry {
	char *name;
	struct finfo f;
};

static int cmp_entry(const void *a, const void *b)
{
	return strcmp(((const struct entry *)a)->name, ((const struct entry *)b)->name);
}

int pisb_os_ls(struct pisb_state *st, const char *name, const char *path,
	       struct pisb_jw *w, struct pisb_err *e)
{
	struct os_inst t;
	_cleanup_free_ char *abs = NULL;
	_cleanup_buf_ struct pisb_buf b = PISB_BUF_INIT;
	struct pisb_json j;
	struct entry *v = NULL;
	size_t n = 0;
	int r, ret = -1;

	if (open_ready(st, name, &t, e) < 0)
		return -1;
	abs = os_path(&t, path);
	r = list_dir(&t, abs, 1, &b, &j, e);
	if (r == 1) {
		not_found(abs, e);
		goto out;
	}
	if (r == 2) {
		pisb_err_set(e, PISB_EXIT_FAIL, "'%s': not a directory", abs);
		goto out;
	}
	if (r < 0)
		goto out;
	v = xcalloc((size_t)j.tok[0].size + 1, sizeof(*v));
	for (int i = 0; i < j.tok[0].size; i++) {
		struct finfo f;
		finfo_parse(&j, pisb_json_at(&j, 0, i), &f);
		if (!f.path) {
			finfo_release(&f);
			continue;
		}
		v[n].name = xstrdup(base_name(f.path));
		v[n++].f = f;
	}
	pisb_json_release(&j);
	qsort(v, n, sizeof(*v), cmp_entry);
	pisb_jw_obj(w);
	pisb_jw_kstr(w, "path", abs);
	pisb_jw_key(w, "entries");
	pisb_jw_arr(w);
	for (size_t i = 0; i < n; i++) {
		pisb_jw_obj(w);
		pisb_jw_kstr(w, "name", v[i].name);
		pisb_jw_kstr(w, "type", v[i].f.type);
		pisb_jw_kint(w, "size", v[i].f.size);
		jw_mode(w, v[i].f.mode);
		pisb_jw_kint(w, "mtime", v[i].f.mtime);
		pisb_jw_obj_end(w);
	}
	pisb_jw_arr_end(w);
	pisb_jw_obj_end(w);
	ret = 0;
out:
	for (size_t i = 0; i < n; i++) {
		free(v[i].name);
		finfo_release(&v[i].f);
	}
	free(v);
	if (ret < 0)
		pisb_err_prefix(e, "ls in sandbox '%s'", name);
	os_inst_release(&t);
	return ret;
}

int pisb_os_stat(struct pisb_state *st, const char *name, const char *path,
		 struct pisb_jw *w, struct pisb_err *e)
{
	struct os_inst t;
	_cleanup_free_ char *abs = NULL;
	struct finfo f;
	int r, ret = -1;

	if (open_ready(st, name, &t, e) < 0)
		return -1;
	abs = os_path(&t, path);
	r = info(&t, abs, &f, e);
	if (r == 1)
		not_found(abs, e);
	if (r != 0)
		goto out;
	pisb_jw_obj(w);
	pisb_jw_kstr(w, "path", abs);
	pisb_jw_kstr(w, "type", f.type);
	pisb_jw_kint(w, "size", f.size);
	jw_mode(w, f.mode);
	pisb_jw_kint(w, "mtime", f.mtime);
	/* execd acts as root: the mode bits are what limits it */
	pisb_jw_kbool(w, "readable", (f.mode & 0444) != 0 || !strcmp(f.type, "dir"));
	pisb_jw_kbool(w, "writable", (f.mode & 0222) != 0);
	pisb_jw_obj_end(w);
	finfo_release(&f);
	ret = 0;
out:
	if (ret < 0)
		pisb_err_prefix(e, "stat in sandbox '%s'", name);
	os_inst_release(&t);
	return ret;
}

int pisb_os_mkdir(struct pisb_state *st, const char *name, const char *path,
		  struct pisb_err *e)
{
	struct os_inst t;
	_cleanup_free_ char *abs = NULL;
	_cleanup_buf_ struct pisb_buf body = PISB_BUF_INIT;
	struct pisb_http_resp r;
	struct pisb_jw w;
	struct finfo f;
	int k, ret = -1;

	if (open_ready(st, name, &t, e) < 0)
		return -1;
	abs = os_path(&t, path);
	pisb_http_resp_init(&r);
	k = info(&t, abs, &f, e);
	if (k < 0)
		goto out;
	if (k == 0) {
		bool dir = !strcmp(f.type, "dir");
		finfo_release(&f);
		if (!dir) {
			pisb_err_set(e, PISB_EXIT_FAIL, "'%s': exists and is not a directory", abs);
			goto out;
		}
		ret = 0;
		goto out;
	}
	pisb_jw_init(&w, &body);
	pisb_jw_obj(&w);
	pisb_jw_key(&w, abs);
	pisb_jw_obj(&w);
	pisb_jw_kint(&w, "mode", 755);
	pisb_jw_obj_end(&w);
	pisb_jw_obj_end(&w);
	if (os_execd(&t.c, "POST", "/directories", "application/json", body.s, body.len, 30000, &r, e) < 0)
		goto out;
	if (r.status != 200) {
		os_fail(&t.c, &r, "mkdir", e);
		goto out;
	}
	ret = 0;
out:
	if (ret < 0)
		pisb_err_prefix(e, "mkdir in sandbox '%s'", name);
	pisb_http_resp_release(&r);
	os_inst_release(&t);
	return ret;
}

/* ---- globs (find, grep --glob) ----
 *
 * As the local driver: '*' and '?' never match '/', [..] sets, '**' as a
 * whole component matches any number of components; a pattern without
 * '/' is matched against the base name at any depth; with one, against
 * the path relative to the search directory (a leading '/' anchors it
 * there, otherwise it may also match deeper down). */

static bool class_match(const char **pp, char c)
{
	const char *p = *pp + 1;
	bool neg = false, hit = false;

	if (*p == '!' || *p == '^') {
		neg = true;
		p++;
	}
	if (*p == ']') {
		hit = c == ']';
		p++;
	}
	while (*p && *p != ']') {
		char lo = *p, hi = lo;
		if (p[1] == '-' && p[2] && p[2] != ']') {
			hi = p[2];
			p += 3;
		} else {
			p++;
		}
		if (c >= lo && c <= hi)
			hit = true;
	}
	if (*p != ']')
		return false;
	*pp = p + 1;
	return c != '/' && hit != neg;
}

static bool gmatch(const char *p, const char *s)
{
	while (*p) {
		if (p[0] == '*' && p[1] == '*' && (p[2] == '/' || !p[2])) {
			/* "**" component: zero or more whole components */
			const char *rest = p[2] == '/' ? p + 3 : p + 2;
			if (!*rest)
				return true;
			for (const char *q = s;; q++) {
				if ((q == s || q[-1] == '/') && gmatch(rest, q))
					return true;
				if (!*q)
					return false;
			}
		}
		switch (*p) {
		case '*':
			p++;
			for (const char *q = s;; q++) {
				if (gmatch(p, q))
					return true;
				if (!*q || *q == '/')
					return false;
			}
		case '?':
			if (!*s || *s == '/')
				return false;
			p++;
			s++;
			break;
		case '[':
			if (!*s || !class_match(&p, *s))
				return false;
			s++;
			break;
		case '\\':
			if (p[1])
				p++;
			/* fall through */
		default:
			if (*p != *s)
				return false;
			p++;
			s++;
		}
	}
	return !*s;
}

static bool path_glob(const char *pat, const char *rel)
{
	if (!strchr(pat, '/'))
		return gmatch(pat, base_name(rel));
	if (pat[0] == '/')
		return gmatch(pat + 1, rel);
	if (gmatch(pat, rel))
		return true;
	for (const char *q = rel; (q = strchr(q, '/')); q++)
		if (gmatch(pat, q + 1))
			return true;
	return false;
}

static bool ignored(const char *rel)
{
	for (const char *p = rel; p && *p; ) {
		const char *sl = strchr(p, '/');
		size_t n = sl ? (size_t)(sl - p) : strlen(p);
		if ((n == 4 && !strncmp(p, ".git", 4)) || (n == 12 && !strncmp(p, "node_modules", 12)))
			return true;
		p = sl ? sl + 1 : NULL;
	}
	return false;
}

/* The tree under dir: relative paths (directories with a trailing '/')
 * and their types, sorted. */
struct tree {
	struct pisb_strv rel;
	struct pisb_strv abs;
	char *types;            /* 'f', 'd', 'l', 'o' per entry */
};

static void tree_release(struct tree *tr)
{
	pisb_strv_release(&tr->rel);
	pisb_strv_release(&tr->abs);
	free(tr->types);
}

static int list_tree(struct os_inst *t, const char *dir, bool no_ignore, struct tree *tr,
		     struct pisb_err *e)
{
	_cleanup_buf_ struct pisb_buf b = PISB_BUF_INIT;
	struct pisb_json j;
	size_t dl = strlen(dir);
	int r;

	memset(tr, 0, sizeof(*tr));
	r = list_dir(t, dir, FIND_DEPTH, &b, &j, e);
	if (r == 1)
		return not_found(dir, e);
	if (r == 2)
		return pisb_err_set(e, PISB_EXIT_FAIL, "'%s': not a directory", dir);
	if (r < 0)
		return -1;
	tr->types = xmalloc((size_t)j.tok[0].size + 1);
	for (int i = 0; i < j.tok[0].size; i++) {
		struct finfo f;
		const char *rel;
		finfo_parse(&j, pisb_json_at(&j, 0, i), &f);
		if (!f.path || strncmp(f.path, dir, dl) || (dl > 1 && f.path[dl] != '/')) {
			finfo_release(&f);
			continue;
		}
		rel = dl == 1 ? f.path + 1 : f.path + dl + 1;
		if (!*rel || (!no_ignore && ignored(rel))) {
			finfo_release(&f);
			continue;
		}
		tr->types[tr->rel.n] = f.type[0] == 'd' ? 'd' : f.type[0] == 's' ? 'l' :
				       f.type[0] == 'f' ? 'f' : 'o';
		if (tr->types[tr->rel.n] == 'd')
			pisb_strv_pushf(&tr->rel, "%s/", rel);
		else
			pisb_strv_push(&tr->rel, rel);
		pisb_strv_push(&tr->abs, f.path);
		finfo_release(&f);
	}
	pisb_json_release(&j);
	return 0;
}

int pisb_os_find(struct pisb_state *st, const char *name, const char *glob,
		 const char *dir, long long limit, bool no_ignore,
		 struct pisb_jw *w, struct pisb_err *e)
{
	struct os_inst t;
	_cleanup_free_ char *abs = NULL;
	_cleanup_strv_ struct pisb_strv hits = PISB_STRV_INIT;
	struct tree tr;
	bool truncated = false;

	if (!glob || !*glob)
		return pisb_err_set(e, PISB_EXIT_USAGE, "find: the glob is empty");
	if (limit <= 0)
		limit = 1000;
	if (open_ready(st, name, &t, e) < 0)
		return -1;
	abs = os_path(&t, dir);
	while (strlen(abs) > 1 && abs[strlen(abs) - 1] == '/')
		abs[strlen(abs) - 1] = '\0';
	if (list_tree(&t, abs, no_ignore, &tr, e) < 0) {
		pisb_err_prefix(e, "find in sandbox '%s'", name);
		os_inst_release(&t);
		return -1;
	}
	for (size_t i = 0; i < tr.rel.n; i++) {
		char *rel = tr.rel.v[i];
		size_t n = strlen(rel);
		bool m;
		if (tr.types[i] == 'd') {
			rel[n - 1] = '\0';
			m = path_glob(glob, rel);
			rel[n - 1] = '/';
		} else {
			m = path_glob(glob, rel);
		}
		if (!m)
			continue;
		if ((long long)hits.n >= limit) {
			truncated = true;
			break;
		}
		pisb_strv_push(&hits, rel);
	}
	pisb_jw_obj(w);
	pisb_jw_key(w, "matches");
	pisb_jw_arr(w);
	for (size_t i = 0; i < hits.n; i++)
		pisb_jw_str(w, hits.v[i]);
	pisb_jw_arr_end(w);
	pisb_jw_kbool(w, "truncated", truncated);
	pisb_jw_obj_end(w);
	tree_release(&tr);
	os_inst_release(&t);
	return 0;
}

/* ---- grep ----
 *
 * The files are listed as find lists them (same ignores, same --glob
 * rules); grep -E (or -F) runs inside the sandbox on batches of them,
 * with -n -H so that every output line is "PATH:LINE:TEXT" (a match) or
 * "PATH-LINE-TEXT" (context); PATH is one of the names we passed, which
 * is how ':' and '-' inside names are told apart. */

struct gline {
	size_t file;            /* index in the batch */
	long long line;
	bool context;
	const char *text;
	size_t len;
};

/* Parse "PATH(:|-)N(:|-)TEXT" against the batch's paths. */
static bool parse_gline(const char *s, size_t n, char **paths, size_t np, size_t *hint,
			struct gline *g)
{
	for (size_t k = 0; k < np; k++) {
		size_t i = (*hint + k) % np;
		size_t pl = strlen(paths[i]);
		const char *p;
		char sep;
		long long v = 0;

		if (pl + 2 >= n || memcmp(s, paths[i], pl) || (s[pl] != ':' && s[pl] != '-'))
			continue;
		sep = s[pl];
		p = s + pl + 1;
		if (!isdigit((unsigned char)*p))
			continue;
		while (p < s + n && isdigit((unsigned char)*p))
			v = v * 10 + (*p++ - '0');
		if (p >= s + n + 1 || (p < s + n && *p != sep) || (p == s + n))
			continue;
		g->file = i;
		g->line = v;
		g->context = sep == '-';
		g->text = p + 1;
		g->len = (size_t)(s + n - p - 1);
		*hint = i;
		return true;
	}
	return false;
}

/* Cut text to LINE_CAP characters (UTF-8). */
static size_t cut_chars(const char *s, size_t n, bool *cut)
{
	size_t chars = 0;

	for (size_t i = 0; i < n; i++) {
		if (((unsigned char)s[i] & 0xc0) != 0x80) {
			if (chars == LINE_CAP) {
				*cut = true;
				return i;
			}
			chars++;
		}
	}
	return n;
}

struct gstate {
	struct pisb_jw *w;
	long long limit, count;
	bool limit_reached, lines_cut, stop;
};

static void grep_output(struct gstate *gs, const struct pisb_buf *out, char **paths,
			char **rels, size_t np)
{
	size_t hint = 0;
	const char *p = out->s ? out->s : "", *end = p + out->len;

	while (p < end && !gs->stop) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
		struct gline g;

		if (parse_gline(p, n, paths, np, &hint, &g)) {
			bool cut = false;
			size_t k;
			if (!g.context) {
				if (gs->count >= gs->limit) {
					gs->limit_reached = true;
					gs->stop = true;
					break;
				}
				gs->count++;
			}
			k = cut_chars(g.text, g.len, &cut);
			if (cut)
				gs->lines_cut = true;
			pisb_jw_obj(gs->w);
			pisb_jw_kstr(gs->w, "path", rels[g.file]);
			pisb_jw_kint(gs->w, "line", g.line);
			pisb_jw_key(gs->w, "text");
			pisb_jw_strn(gs->w, g.text, k);
			pisb_jw_kstr(gs->w, "kind", g.context ? "context" : "match");
			pisb_jw_obj_end(gs->w);
		}
		p = nl ? nl + 1 : end;
	}
}

static int grep_batch(struct os_inst *t, const struct pisb_os_grep_req *g, struct gstate *gs,
		      char **paths, char **rels, size_t np, struct pisb_err *e)
{
	_cleanup_buf_ struct pisb_buf cmd = PISB_BUF_INIT, out = PISB_BUF_INIT, err = PISB_BUF_INIT;
	struct os_run o = { .out_fd = -1, .err_fd = -1, .out = &out, .err = &err,
			    .cap = 64u << 20, .timeout_ms = 600000 };
	long long left = gs->limit - gs->count + 1;
	long long maxlines = left * (2LL * g->context + 2) + 1;
	int code = 0;

	pisb_buf_adds(&cmd, "command -v grep >/dev/null 2>&1 || { echo 'grep: not installed in the sandbox' >&2; exit 127; }; ");
	pisb_buf_adds(&cmd, "LC_ALL=C grep -n -H ");
	pisb_buf_adds(&cmd, g->literal ? "-F " : "-E ");
	if (g->ignore_case)
		pisb_buf_adds(&cmd, "-i ");
	if (g->context > 0)
		pisb_buf_addf(&cmd, "-C %d ", g->context);
	pisb_buf_adds(&cmd, "-e ");
	os_sq(&cmd, g->pattern);
	pisb_buf_adds(&cmd, " --");
	for (size_t i = 0; i < np; i++) {
		pisb_buf_addc(&cmd, ' ');
		os_sq(&cmd, paths[i]);
	}
	pisb_buf_addf(&cmd, " 2>/dev/null | head -n %lld", maxlines);
	if (os_run_cmd(&t->c, cmd.s, "/", NULL, 0, &o, &code, e) < 0)
		return -1;
	if (code == 127)
		return pisb_err_set(e, PISB_EXIT_BACKEND, "grep: %s",
				    err.len ? err.s : "grep is not installed in the sandbox");
	grep_output(gs, &out, paths, rels, np);
	return 0;
}

int pisb_os_grep(struct pisb_state *st, const char *name,
		 const struct pisb_os_grep_req *g, struct pisb_jw *w,
		 struct pisb_err *e)
{
	struct os_inst t;
	_cleanup_free_ char *abs = NULL;
	struct tree tr;
	struct gstate gs = { 0 };
	struct finfo f;
	bool single = false;
	int r, ret = -1;

	memset(&tr, 0, sizeof(tr));
	if (!g->pattern || !*g->pattern)
		return pisb_err_set(e, PISB_EXIT_USAGE, "grep: the pattern is empty");
	if (!g->literal) {
		/* check the expression here: a bad one is a usage error, not
		 * an empty result */
		regex_t re;
		int rc = regcomp(&re, g->pattern, REG_EXTENDED | REG_NOSUB | (g->ignore_case ? REG_ICASE : 0));
		if (rc != 0) {
			char msg[256];
			regerror(rc, &re, msg, sizeof(msg));
			return pisb_err_set(e, PISB_EXIT_USAGE, "grep: invalid regular expression '%s': %s",
					    g->pattern, msg);
		}
		regfree(&re);
	}
	if (open_ready(st, name, &t, e) < 0)
		return -1;
	abs = os_path(&t, g->path);
	while (strlen(abs) > 1 && abs[strlen(abs) - 1] == '/')
		abs[strlen(abs) - 1] = '\0';
	gs.w = w;
	gs.limit = g->limit > 0 ? g->limit : 100;
	r = info(&t, abs, &f, e);
	if (r == 1)
		not_found(abs, e);
	if (r != 0)
		goto out;
	single = strcmp(f.type, "dir") != 0;
	finfo_release(&f);
	if (single) {
		pisb_strv_push(&tr.abs, abs);
		pisb_strv_push(&tr.rel, base_name(abs));
		tr.types = xstrdup("f");
	} else if (list_tree(&t, abs, g->no_ignore, &tr, e) < 0) {
		goto out;
	}
	pisb_jw_obj(w);
	pisb_jw_key(w, "matches");
	pisb_jw_arr(w);
	{
		size_t i = 0;
		while (i < tr.rel.n && !gs.stop) {
			char *paths[4096], *rels[4096];
			size_t np = 0, bytes = 0;
			for (; i < tr.rel.n && np < 4096 && bytes < 96 * 1024; i++) {
				if (tr.types[i] != 'f')
					continue;
				if (g->glob && !single && !path_glob(g->glob, tr.rel.v[i]))
					continue;
				paths[np] = tr.abs.v[i];
				rels[np++] = tr.rel.v[i];
				bytes += strlen(tr.abs.v[i]) * 2 + 4;
			}
			if (np && grep_batch(&t, g, &gs, paths, rels, np, e) < 0)
				goto out;
		}
	}
	pisb_jw_arr_end(w);
	pisb_jw_kint(w, "matchCount", gs.count);
	pisb_jw_kbool(w, "limitReached", gs.limit_reached);
	pisb_jw_kbool(w, "linesTruncated", gs.lines_cut);
	pisb_jw_obj_end(w);
	ret = 0;
out:
	tree_release(&tr);
	if (ret < 0)
		pisb_err_prefix(e, "grep in sandbox '%s'", name);
	os_inst_release(&t);
	return ret;
}
