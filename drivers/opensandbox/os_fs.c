/* os_fs.c - files in an OpenSandbox sandbox through execd's file API
 * (download, upload, info, directories) and, where the API has no verb,
 * through commands (the rename of an atomic write, grep).  The results
 * use the local driver's types (fs.h) so pisb-fs prints them one way.
 *
 * execd's FileInfo: {path, type: file|directory|symlink|other, size,
 * modified_at (RFC 3339), mode: an integer whose decimal digits spell the
 * octal mode (644 = 0644)}.
 */
#include "opensandbox.h"
#include "os_internal.h"
#include "archive.h"
#include "edit.h"
#include "err.h"
#include "fs.h"
#include "glob.h"
#include "ignore.h"
#include "instance.h"
#include "state.h"
#include "json.h"
#include "proc.h"
#include "util.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define FIND_DEPTH 64            /* directories/list depth for find/grep */
#define MAX_GITIGNORES 256       /* .gitignore files read per walk */

/* ---- small helpers ---- */

static int open_ready(struct pisb_sandbox *sb, struct os_inst *t, struct pisb_err *e)
{
	if (os_inst_of(sb, t, e) < 0)
		return -1;
	if (os_inst_ready(t, e) < 0) {
		os_inst_release(t);
		return -1;
	}
	return 0;
}

/* The absolute path inside: relative = under the workspace; duplicate
 * slashes and "." components dropped (as pisb_fs_abspath). */
static char *abspath(const struct os_inst *t, const char *path)
{
	return pisb_path_in(t->cfg->os.workspace ? t->cfg->os.workspace : "/workspace", path);
}

char *pisb_os_abspath(struct pisb_state *st, const char *name, const char *path,
		      struct pisb_err *e)
{
	_cleanup_close_ int idir = pisb_instance_open(st, "instances", name, e);
	struct pisb_record rec;
	struct os_inst t;
	char *a;

	if (idir < 0 || pisb_record_load(idir, &rec, e) < 0)
		return NULL;
	memset(&t, 0, sizeof(t));
	if (pisb_record_config(&rec, &t.cfg, e) < 0) {
		pisb_record_release(&rec);
		return NULL;
	}
	a = abspath(&t, path);
	pisb_config_free(t.cfg);
	pisb_record_release(&rec);
	return a;
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
	if (!strcmp(execd_type, "file"))
		return "file";
	if (!strcmp(execd_type, "symlink"))
		return "symlink";
	return "other";
}

/* One FileInfo into i (name = its path); false without a path. */
static bool info_parse(struct pisb_json *j, int o, struct pisb_fs_info *i)
{
	long long v;
	_cleanup_free_ char *ty = pisb_json_str(j, pisb_json_get(j, o, "type"));
	_cleanup_free_ char *mt = pisb_json_str(j, pisb_json_get(j, o, "modified_at"));

	memset(i, 0, sizeof(*i));
	i->name = pisb_json_str(j, pisb_json_get(j, o, "path"));
	i->type = type_word(ty);
	if (pisb_json_int(j, pisb_json_get(j, o, "size"), &v) == 0)
		i->size = v;
	if (pisb_json_int(j, pisb_json_get(j, o, "mode"), &v) == 0)
		i->mode = mode_bits(v);
	i->mtime = parse_time(mt);
	/* execd acts as root: only the mode bits stand in its way */
	i->readable = (i->mode & 0444) != 0 || !strcmp(i->type, "dir");
	i->writable = (i->mode & 0222) != 0;
	return i->name != NULL;
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

static int not_found(const char *abs, struct pisb_err *e)
{
	return pisb_err_set(e, PISB_EXIT_NOTFOUND, "no such file or directory '%s'", abs);
}

/* GET /files/info for one path: 0 (i filled), 1 missing, -1 error. */
static int info(struct os_inst *t, const char *abs, struct pisb_fs_info *i, struct pisb_err *e)
{
	_cleanup_buf_ struct pisb_buf q = PISB_BUF_INIT;
	struct pisb_http_resp r;
	struct pisb_json j;
	int ret = -1;

	memset(i, 0, sizeof(*i));
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
		e->code = PISB_EXIT_BACKEND;
		goto out;
	}
	if (pisb_json_parse(&j, r.body.s, r.body.len, e) < 0)
		goto out;
	if (j.ntok < 3 || j.tok[0].type != JSMN_OBJECT || j.tok[0].size < 1 ||
	    !info_parse(&j, 2, i)) {
		pisb_json_release(&j);
		pisb_fs_info_release(i);
		pisb_err_set(e, PISB_EXIT_BACKEND, "file info: unexpected answer");
		goto out;
	}
	pisb_json_release(&j);
	free(i->name);
	i->name = xstrdup(abs);
	ret = 0;
out:
	pisb_http_resp_release(&r);
	return ret;
}

/* ---- read ---- */

/* Where a download goes: a buffer, or straight to an fd. */
struct dl {
	CURL *h;
	int fd;
	struct pisb_buf *out;
	struct pisb_buf err;          /* an error answer's body */
	bool checked, ok, write_failed;
	long long bytes;
};

static bool dl_sink(const char *p, size_t n, void *arg)
{
	struct dl *d = arg;

	if (!d->checked) {
		long st = 0;
		curl_easy_getinfo(d->h, CURLINFO_RESPONSE_CODE, &st);
		d->checked = true;
		d->ok = st == 200 || st == 206;
	}
	if (!d->ok) {
		if (d->err.len < 8192)
			pisb_buf_add(&d->err, p, n);
		return true;
	}
	d->bytes += (long long)n;
	if (d->fd >= 0) {
		if (pisb_write_all(d->fd, p, n) < 0) {
			d->write_failed = true;
			return false;
		}
	} else {
		pisb_buf_add(d->out, p, n);
	}
	return true;
}

/* Download abs, whole or its first `first` bytes (> 0), into out or to
 * fd.  *size: the file's size. */
static int download(struct os_inst *t, const char *abs, long long first, struct pisb_buf *out,
		    int fd, long long *size, struct pisb_err *e)
{
	_cleanup_buf_ struct pisb_buf q = PISB_BUF_INIT;
	_cleanup_free_ char *url = NULL, *range = NULL;
	struct curl_slist *h = NULL;
	struct pisb_http_call call = { 0 };
	struct pisb_http_resp r;
	struct dl d;
	int ret = -1;

	memset(&d, 0, sizeof(d));
	d.h = t->c.h;
	d.fd = fd;
	d.out = out;
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
	call.sink = dl_sink;
	call.sink_arg = &d;
	call.want_header = first > 0 ? "Content-Range" : NULL;
	pisb_http_resp_init(&r);
	if (pisb_http_run(t->c.h, &call, &r, "the sandbox's execd", e) < 0)
		goto out;
	if (d.write_failed) {
		pisb_err_sys(e, PISB_EXIT_FAIL, "write the content of '%s'", abs);
		goto out;
	}
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
		struct pisb_fs_info i;
		struct pisb_err ig = PISB_ERR_INIT;
		if (info(t, abs, &i, &ig) == 0 && !strcmp(i.type, "dir")) {
			pisb_err_set(e, PISB_EXIT_FAIL, "'%s' is a directory", abs);
		} else {
			struct pisb_http_resp er;
			pisb_http_resp_init(&er);
			er.status = r.status;
			pisb_buf_add(&er.body, d.err.s ? d.err.s : "", d.err.len);
			os_fail(&t->c, &er, "read", e);
			e->code = PISB_EXIT_BACKEND;
			pisb_http_resp_release(&er);
		}
		pisb_fs_info_release(&i);
		goto out;
	}
	*size = d.bytes;
	if (r.status == 206 && r.want_value) {
		const char *sl = strrchr(r.want_value, '/');
		if (sl && isdigit((unsigned char)sl[1]))
			*size = atoll(sl + 1);
	}
	ret = 0;
out:
	curl_slist_free_all(h);
	pisb_buf_release(&d.err);
	pisb_http_resp_release(&r);
	return ret;
}

static void set_abs(char **abs, char *v)
{
	if (abs)
		*abs = v;
	else
		free(v);
}

int pisb_os_read_text(struct pisb_sandbox *sb, const char *path,
		      long long offset, long long limit, size_t cap, char **abs,
		      struct pisb_fs_text *t, struct pisb_err *e)
{
	struct os_inst in;
	_cleanup_buf_ struct pisb_buf all = PISB_BUF_INIT;
	struct pisb_fs_window w;
	char *a;
	int ret = -1;

	memset(t, 0, sizeof(*t));
	if (abs)
		*abs = NULL;
	if (open_ready(sb, &in, e) < 0)
		return -1;
	a = abspath(&in, path);
	set_abs(abs, a);
	/* from the first line on, cap+1 bytes tell all there is to tell */
	if (download(&in, a, offset <= 1 ? (long long)cap + 1 : 0, &all, -1, &t->bytes, e) < 0)
		goto out;
	pisb_fs_window_init(&w, t, offset, limit, cap);
	pisb_fs_window_feed(&w, all.s ? all.s : "", all.len);
	if (pisb_fs_window_end(&w, a, e) < 0) {
		pisb_fs_text_release(t);
		goto out;
	}
	ret = 0;
out:
	if (!abs)
		free(a);
	os_inst_release(&in);
	return ret;
}

int pisb_os_read_raw(struct pisb_sandbox *sb, const char *path,
		     int outfd, long long *bytes, struct pisb_err *e)
{
	struct os_inst t;
	_cleanup_free_ char *a = NULL;
	int ret;

	*bytes = 0;
	if (open_ready(sb, &t, e) < 0)
		return -1;
	a = abspath(&t, path);
	ret = download(&t, a, 0, NULL, outfd, bytes, e);
	os_inst_release(&t);
	return ret;
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

	/* execd's mode: the octal digits read as a decimal number; 0 would
	 * mean "leave it", so a mode of 0000 is sent as such and fixed up */
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
		e->code = PISB_EXIT_BACKEND;
		goto out;
	}
	ret = 0;
out:
	curl_mime_free(mime);
	curl_slist_free_all(h);
	pisb_http_resp_release(&r);
	return ret;
}

static void delete_file(struct os_inst *t, const char *abs)
{
	_cleanup_buf_ struct pisb_buf q = PISB_BUF_INIT;
	struct pisb_http_resp r;
	struct pisb_err ig = PISB_ERR_INIT;

	add_path_query(&q, "/files", abs);
	pisb_http_resp_init(&r);
	os_execd(&t->c, "DELETE", q.s, NULL, NULL, 0, 30000, &r, &ig);
	pisb_http_resp_release(&r);
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

/* Replace abs with data: upload beside it, then rename inside (a
 * symlink is followed to the file it names, as the local driver does). */
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
	pisb_buf_adds(&cmd, "t=");
	os_sq(&cmd, abs);
	pisb_buf_adds(&cmd, "; if [ -L \"$t\" ]; then t=$(readlink -f -- \"$t\") || exit 1; fi; ");
	pisb_buf_adds(&cmd, mode ? "" : "chmod 0 -- ");
	if (!mode) {
		os_sq(&cmd, tmp);
		pisb_buf_adds(&cmd, " && ");
	}
	pisb_buf_adds(&cmd, "exec mv -f -- ");
	os_sq(&cmd, tmp);
	pisb_buf_adds(&cmd, " \"$t\"");
	if (small_cmd(t, cmd.s, "rename into place", e) < 0) {
		delete_file(t, tmp);
		return -1;
	}
	return 0;
}

static int write_in(struct os_inst *t, const char *abs, const void *data, size_t n,
		    bool mkdirs, int mode, struct pisb_err *e)
{
	struct pisb_fs_info i;
	int r;

	if (!strcmp(abs, "/"))
		return pisb_err_set(e, PISB_EXIT_FAIL, "'%s' is a directory", abs);
	r = info(t, abs, &i, e);
	if (r < 0)
		return -1;
	if (r == 0) {
		bool dir = !strcmp(i.type, "dir"), reg = !strcmp(i.type, "file");
		bool link = !strcmp(i.type, "symlink");
		unsigned m = i.mode;
		pisb_fs_info_release(&i);
		if (dir)
			return pisb_err_set(e, PISB_EXIT_FAIL, "'%s' is a directory", abs);
		if (!reg && !link)
			return pisb_err_set(e, PISB_EXIT_FAIL, "'%s' is not a regular file", abs);
		if (mode < 0)
			mode = link ? 0644 : (int)m;
	} else {
		_cleanup_free_ char *dir = dir_name(abs);
		struct pisb_fs_info d;
		int dr = info(t, dir, &d, e);
		if (dr < 0)
			return -1;
		if (dr == 1 && !mkdirs)
			return pisb_err_set(e, PISB_EXIT_NOTFOUND,
					    "no such directory '%s' (use --mkdir to create it)", dir);
		if (dr == 0 && strcmp(d.type, "dir")) {
			pisb_fs_info_release(&d);
			return pisb_err_set(e, PISB_EXIT_NOTFOUND, "'%s' is not a directory", dir);
		}
		pisb_fs_info_release(&d);
		if (mode < 0)
			mode = 0644;
	}
	return replace(t, abs, data, n, (unsigned)mode, e);
}

int pisb_os_write(struct pisb_sandbox *sb, const char *path,
		  const struct pisb_fs_src *src, int mode, bool mkdirs, char **abs,
		  long long *bytes, struct pisb_err *e)
{
	struct os_inst t;
	_cleanup_buf_ struct pisb_buf in = PISB_BUF_INIT;
	const void *data = src->data;
	size_t n = src->n;
	char *a;
	int ret;

	*bytes = 0;
	if (abs)
		*abs = NULL;
	if (src->fd >= 0) {
		/* the content first: it is the host's, read before anything
		 * happens in the sandbox */
		if (pisb_read_fd(src->fd, &in, (size_t)1 << 31) < 0)
			return pisb_err_sys(e, PISB_EXIT_FAIL, "read the content");
		data = in.s ? in.s : "";
		n = in.len;
	}
	if (open_ready(sb, &t, e) < 0)
		return -1;
	a = abspath(&t, path);
	ret = write_in(&t, a, data ? data : "", n, mkdirs, mode, e);
	if (ret == 0)
		*bytes = (long long)n;
	set_abs(abs, a);
	os_inst_release(&t);
	return ret;
}

static int edit_in(struct os_inst *t, const char *abs, const struct pisb_fs_edit *ed, size_t n,
		   long long *bytes, struct pisb_err *e)
{
	_cleanup_buf_ struct pisb_buf orig = PISB_BUF_INIT, out = PISB_BUF_INIT;
	struct pisb_fs_info i;
	long long size;
	unsigned mode;
	int r;

	r = info(t, abs, &i, e);
	if (r == 1)
		return not_found(abs, e);
	if (r < 0)
		return -1;
	mode = i.mode;
	if (!strcmp(i.type, "dir")) {
		pisb_fs_info_release(&i);
		return pisb_err_set(e, PISB_EXIT_FAIL, "'%s' is a directory", abs);
	}
	if (!strcmp(i.type, "symlink"))
		mode = 0644;
	pisb_fs_info_release(&i);
	if (download(t, abs, 0, &orig, -1, &size, e) < 0)
		return -1;
	if (pisb_edit_apply(orig.s, orig.len, ed, n, abs, &out, e) < 0)
		return -1;
	if (replace(t, abs, out.s ? out.s : "", out.len, mode, e) < 0)
		return -1;
	*bytes = (long long)out.len;
	return 0;
}

int pisb_os_edit(struct pisb_sandbox *sb, const char *path,
		 const struct pisb_fs_edit *ed, size_t n, char **abs, long long *bytes,
		 struct pisb_err *e)
{
	struct os_inst t;
	char *a;
	int ret;

	*bytes = 0;
	if (abs)
		*abs = NULL;
	if (open_ready(sb, &t, e) < 0)
		return -1;
	a = abspath(&t, path);
	ret = edit_in(&t, a, ed, n, bytes, e);
	set_abs(abs, a);
	os_inst_release(&t);
	return ret;
}

/* ---- ls / stat / mkdir ---- */

/* GET /directories/list: 0 with the JSON array in j (tokens into b), 1
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
		struct pisb_fs_info i;
		int k = info(t, abs, &i, e);
		if (k == 0 && !strcmp(i.type, "dir")) {
			/* a directory execd still refused to list */
			os_fail(&t->c, &r, "list", e);
			e->code = PISB_EXIT_BACKEND;
			k = -1;
		}
		pisb_fs_info_release(&i);
		ret = k == 1 ? 1 : k == 0 ? 2 : -1;
		goto out;
	}
	if (r.status != 200) {
		os_fail(&t->c, &r, "list", e);
		e->code = PISB_EXIT_BACKEND;
		goto out;
	}
	*b = r.body;
	memset(&r.body, 0, sizeof(r.body));
	if (pisb_json_parse(j, b->s ? b->s : "", b->len, e) < 0) {
		pisb_err_set(e, PISB_EXIT_BACKEND, "list: the answer is not JSON");
		goto out;
	}
	if (j->tok[0].type != JSMN_ARRAY) {
		pisb_json_release(j);
		pisb_err_set(e, PISB_EXIT_BACKEND, "list: unexpected answer");
		goto out;
	}
	ret = 0;
out:
	pisb_http_resp_release(&r);
	return ret;
}

static int cmp_info(const void *a, const void *b)
{
	return strcmp(((const struct pisb_fs_info *)a)->name, ((const struct pisb_fs_info *)b)->name);
}

static int ls_in(struct os_inst *t, const char *abs, struct pisb_fs_info **out, size_t *n,
		 struct pisb_err *e)
{
	_cleanup_buf_ struct pisb_buf b = PISB_BUF_INIT;
	struct pisb_json j;
	struct pisb_fs_info *v;
	int r = list_dir(t, abs, 1, &b, &j, e);

	if (r == 1)
		return not_found(abs, e);
	if (r == 2)
		return pisb_err_set(e, PISB_EXIT_FAIL, "'%s' is not a directory", abs);
	if (r < 0)
		return -1;
	v = xcalloc((size_t)j.tok[0].size + 1, sizeof(*v));
	for (int k = 0; k < j.tok[0].size; k++) {
		struct pisb_fs_info i;
		if (!info_parse(&j, pisb_json_at(&j, 0, k), &i)) {
			pisb_fs_info_release(&i);
			continue;
		}
		{
			char *full = i.name;
			i.name = xstrdup(base_name(full));
			free(full);
		}
		v[(*n)++] = i;
	}
	pisb_json_release(&j);
	qsort(v, *n, sizeof(*v), cmp_info);
	*out = v;
	return 0;
}

int pisb_os_ls(struct pisb_sandbox *sb, const char *path, char **abs,
	       struct pisb_fs_info **out, size_t *n, struct pisb_err *e)
{
	struct os_inst t;
	char *a;
	int ret;

	*out = NULL;
	*n = 0;
	if (abs)
		*abs = NULL;
	if (open_ready(sb, &t, e) < 0)
		return -1;
	a = abspath(&t, path);
	ret = ls_in(&t, a, out, n, e);
	set_abs(abs, a);
	os_inst_release(&t);
	return ret;
}

int pisb_os_stat(struct pisb_sandbox *sb, const char *path, char **abs,
		 struct pisb_fs_info *out, struct pisb_err *e)
{
	struct os_inst t;
	char *a;
	int r;

	memset(out, 0, sizeof(*out));
	if (abs)
		*abs = NULL;
	if (open_ready(sb, &t, e) < 0)
		return -1;
	a = abspath(&t, path);
	r = info(&t, a, out, e);
	if (r == 1)
		r = not_found(a, e);
	set_abs(abs, a);
	os_inst_release(&t);
	return r < 0 ? -1 : 0;
}

static int mkdir_in(struct os_inst *t, const char *abs, bool *created, struct pisb_err *e)
{
	_cleanup_buf_ struct pisb_buf body = PISB_BUF_INIT;
	struct pisb_http_resp r;
	struct pisb_jw w;
	struct pisb_fs_info i;
	int k, ret = -1;

	k = info(t, abs, &i, e);
	if (k < 0)
		return -1;
	if (k == 0) {
		bool dir = !strcmp(i.type, "dir");
		pisb_fs_info_release(&i);
		if (!dir)
			return pisb_err_set(e, PISB_EXIT_FAIL, "'%s' exists and is not a directory", abs);
		return 0;
	}
	pisb_jw_init(&w, &body);
	pisb_jw_obj(&w);
	pisb_jw_key(&w, abs);
	pisb_jw_obj(&w);
	pisb_jw_kint(&w, "mode", 755);
	pisb_jw_obj_end(&w);
	pisb_jw_obj_end(&w);
	pisb_http_resp_init(&r);
	if (os_execd(&t->c, "POST", "/directories", "application/json", body.s, body.len, 30000, &r, e) < 0)
		goto out;
	if (r.status != 200) {
		os_fail(&t->c, &r, "mkdir", e);
		e->code = r.status == 500 ? PISB_EXIT_FAIL : PISB_EXIT_BACKEND;
		goto out;
	}
	*created = true;
	ret = 0;
out:
	pisb_http_resp_release(&r);
	return ret;
}

int pisb_os_mkdir(struct pisb_sandbox *sb, const char *path, char **abs,
		  bool *created, struct pisb_err *e)
{
	struct os_inst t;
	char *a;
	int ret;

	*created = false;
	if (abs)
		*abs = NULL;
	if (open_ready(sb, &t, e) < 0)
		return -1;
	a = abspath(&t, path);
	ret = mkdir_in(&t, a, created, e);
	set_abs(abs, a);
	os_inst_release(&t);
	return ret;
}

/* ---- the walk (find, grep) ----
 *
 * One directories/list request with a large depth gives the whole tree in
 * the local walk's order (entries by name, each directory's descendants
 * right after it).  The walk then drops what pisb_walk would not visit:
 * .git and node_modules, and, from the .gitignore files (read with one
 * download each), ignored paths and everything below ignored
 * directories.  The .gitignore files of the enclosing checkout above the
 * search directory apply too, as locally. */

struct went {
	char *path;                 /* absolute */
	const char *rel, *name;     /* into path */
	char type;                  /* 'f' file, 'd' dir, 'l' symlink, 'o' other */
};

struct tree {
	struct went *v;
	size_t n;
};

static void tree_release(struct tree *tr)
{
	for (size_t i = 0; i < tr->n; i++)
		free(tr->v[i].path);
	free(tr->v);
	memset(tr, 0, sizeof(*tr));
}

static bool skipped_name(const char *rel)
{
	for (const char *p = rel; p && *p;) {
		const char *sl = strchr(p, '/');
		size_t n = sl ? (size_t)(sl - p) : strlen(p);
		if ((n == 4 && !strncmp(p, ".git", 4)) || (n == 12 && !strncmp(p, "node_modules", 12)))
			return true;
		p = sl ? sl + 1 : NULL;
	}
	return false;
}

/* Push the .gitignore of dir (if we have its text). */
struct gi {
	char *dir;
	struct pisb_buf text;
};

static const struct gi *gi_find(const struct gi *v, size_t n, const char *dir)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(v[i].dir, dir))
			return &v[i];
	return NULL;
}

/* Is a a directory that contains p (or p itself)? */
static bool is_under(const char *p, const char *a)
{
	size_t n = strlen(a);

	if (!strcmp(a, "/"))
		return true;
	return !strncmp(p, a, n) && (p[n] == '/' || p[n] == '\0');
}

/* The checkout's .gitignore files above dir (exclusive), top first, as
 * load_ancestors reads them: only when an ancestor (or dir) holds .git. */
static void ancestors(struct os_inst *t, const char *dir, bool dir_has_git, struct pisb_ignore *ig)
{
	_cleanup_strv_ struct pisb_strv anc = PISB_STRV_INIT;
	_cleanup_free_ char *p = xstrdup(dir);
	size_t top = 0;
	bool found = dir_has_git;

	if (found)
		return;   /* dir is the checkout's top: nothing above counts */
	while (strcmp(p, "/")) {
		char *s = strrchr(p, '/');
		if (s == p)
			s[1] = '\0';
		else
			*s = '\0';
		pisb_strv_push(&anc, p);
		{
			struct pisb_fs_info i;
			struct pisb_err ig2 = PISB_ERR_INIT;
			_cleanup_free_ char *git = xasprintf("%s/.git", strcmp(p, "/") ? p : "");
			int k = info(t, git, &i, &ig2);
			pisb_fs_info_release(&i);
			if (k == 0) {
				found = true;
				top = anc.n - 1;
				break;
			}
			if (k < 0)
				return;
		}
	}
	if (!found)
		return;
	for (size_t i = top + 1; i-- > 0;) {
		_cleanup_free_ char *f = xasprintf("%s/.gitignore", strcmp(anc.v[i], "/") ? anc.v[i] : "");
		_cleanup_buf_ struct pisb_buf b = PISB_BUF_INIT;
		struct pisb_err ig2 = PISB_ERR_INIT;
		long long size;
		if (download(t, f, 0, &b, -1, &size, &ig2) == 0) {
			pisb_ignore_push(ig, anc.v[i], b.s ? b.s : "", b.len);
		}
	}
}

/* The tree under dir as pisb_walk would visit it (ignore: skip .git,
 * node_modules and .gitignore'd paths). */
static int walk_tree(struct os_inst *t, const char *dir, bool ignore, struct tree *tr,
		     struct pisb_err *e)
{
	_cleanup_buf_ struct pisb_buf b = PISB_BUF_INIT;
	struct pisb_json j;
	struct pisb_ignore ig = PISB_IGNORE_INIT;
	struct gi *gis = NULL;
	size_t ngis = 0, dl = strlen(dir);
	_cleanup_free_ char *ignored_dir = NULL;
	_cleanup_strv_ struct pisb_strv stack = PISB_STRV_INIT;   /* dirs of pushed frames */
	struct went *all = NULL;
	size_t nall = 0;
	bool dir_has_git = false;
	int r;

	memset(tr, 0, sizeof(*tr));
	r = list_dir(t, dir, FIND_DEPTH, &b, &j, e);
	if (r == 1)
		return not_found(dir, e);
	if (r == 2)
		return pisb_err_set(e, PISB_EXIT_FAIL, "'%s' is not a directory", dir);
	if (r < 0)
		return -1;
	all = xcalloc((size_t)j.tok[0].size + 1, sizeof(*all));
	for (int k = 0; k < j.tok[0].size; k++) {
		int o = pisb_json_at(&j, 0, k);
		char *p = pisb_json_str(&j, pisb_json_get(&j, o, "path"));
		_cleanup_free_ char *ty = pisb_json_str(&j, pisb_json_get(&j, o, "type"));
		const char *rel;
		if (!p || strncmp(p, dir, dl) || (dl > 1 && p[dl] != '/') || !p[dl == 1 ? 1 : dl + 1]) {
			free(p);
			continue;
		}
		rel = dl == 1 ? p + 1 : p + dl + 1;
		all[nall].path = p;
		all[nall].rel = rel;
		all[nall].name = base_name(p);
		all[nall].type = !ty ? 'o' : !strcmp(ty, "directory") ? 'd' : !strcmp(ty, "file") ? 'f' :
				 !strcmp(ty, "symlink") ? 'l' : 'o';
		if (!strcmp(rel, ".git"))
			dir_has_git = true;
		nall++;
	}
	pisb_json_release(&j);
	if (ignore) {
		/* the .gitignore texts this walk can meet */
		for (size_t k = 0; k < nall && ngis < MAX_GITIGNORES; k++) {
			struct pisb_err ig2 = PISB_ERR_INIT;
			long long size;
			if (all[k].type != 'f' || strcmp(all[k].name, ".gitignore") || skipped_name(all[k].rel))
				continue;
			gis = xrealloc(gis, (ngis + 1) * sizeof(*gis));
			memset(&gis[ngis], 0, sizeof(*gis));
			if (download(t, all[k].path, 0, &gis[ngis].text, -1, &size, &ig2) < 0) {
				pisb_buf_release(&gis[ngis].text);
				continue;
			}
			gis[ngis++].dir = dir_name(all[k].path);
		}
		ancestors(t, dir, dir_has_git, &ig);
		{
			const struct gi *g = gi_find(gis, ngis, dir);
			if (g) {
				pisb_ignore_push(&ig, dir, g->text.s ? g->text.s : "", g->text.len);
				pisb_strv_push(&stack, dir);
			}
		}
	}
	tr->v = xcalloc(nall + 1, sizeof(*tr->v));
	for (size_t k = 0; k < nall; k++) {
		struct went *w = &all[k];
		_cleanup_free_ char *parent = dir_name(w->path);
		bool drop = false;

		if (ignore) {
			if (skipped_name(w->rel) || (ignored_dir && is_under(w->path, ignored_dir))) {
				drop = true;
			} else {
				/* leave the frames of directories we are no longer in */
				while (stack.n && !is_under(parent, stack.v[stack.n - 1])) {
					pisb_ignore_pop(&ig);
					free(stack.v[--stack.n]);
					stack.v[stack.n] = NULL;
				}
				/* enter parent: its .gitignore applies to its entries */
				if (strcmp(parent, dir) && (!stack.n || strcmp(stack.v[stack.n - 1], parent))) {
					const struct gi *g = gi_find(gis, ngis, parent);
					if (g) {
						pisb_ignore_push(&ig, parent, g->text.s ? g->text.s : "", g->text.len);
						pisb_strv_push(&stack, parent);
					}
				}
				if (ig.n && pisb_ignore_match(&ig, w->path, w->type == 'd')) {
					drop = true;
					if (w->type == 'd') {
						free(ignored_dir);
						ignored_dir = xstrdup(w->path);
					}
				}
			}
		}
		if (drop) {
			free(w->path);
			continue;
		}
		tr->v[tr->n++] = *w;
	}
	free(all);
	for (size_t k = 0; k < ngis; k++) {
		free(gis[k].dir);
		pisb_buf_release(&gis[k].text);
	}
	free(gis);
	pisb_ignore_release(&ig);
	return 0;
}

static int find_in(struct os_inst *t, const char *dir, const struct pisb_fs_find *o,
		   pisb_fs_find_fn fn, void *arg, bool *truncated, struct pisb_err *e)
{
	struct tree tr;
	struct pisb_pathglob g;
	_cleanup_buf_ struct pisb_buf tmp = PISB_BUF_INIT;
	long long count = 0, limit = o->limit > 0 ? o->limit : 1000;

	if (walk_tree(t, dir, !o->no_ignore, &tr, e) < 0)
		return -1;
	pisb_pathglob_init_find(&g, o->pattern);
	for (size_t k = 0; k < tr.n; k++) {
		const struct went *w = &tr.v[k];
		if (!pisb_pathglob_match(&g, w->rel, w->name))
			continue;
		if (count == limit) {
			*truncated = true;
			break;
		}
		count++;
		if (w->type == 'd') {
			pisb_buf_reset(&tmp);
			pisb_buf_adds(&tmp, w->rel);
			pisb_buf_addc(&tmp, '/');
			fn(arg, tmp.s);
		} else {
			fn(arg, w->rel);
		}
	}
	pisb_pathglob_release(&g);
	tree_release(&tr);
	return 0;
}

int pisb_os_find(struct pisb_sandbox *sb, const struct pisb_fs_find *o,
		 char **abs, pisb_fs_find_fn fn, void *arg, bool *truncated,
		 struct pisb_err *e)
{
	struct os_inst t;
	char *a;
	int ret;

	*truncated = false;
	if (abs)
		*abs = NULL;
	if (!o->pattern || !*o->pattern)
		return pisb_err_set(e, PISB_EXIT_USAGE, "find: the pattern is empty");
	if (open_ready(sb, &t, e) < 0)
		return -1;
	a = abspath(&t, o->dir);
	ret = find_in(&t, a, o, fn, arg, truncated, e);
	set_abs(abs, a);
	os_inst_release(&t);
	return ret;
}

/* ---- grep ----
 *
 * grep -n -H runs inside the sandbox on batches of the files the walk
 * keeps; every output line is "PATH:LINE:TEXT" (a match) or
 * "PATH-LINE-TEXT" (context).  PATH is one of the names we passed, which
 * is how ':' and '-' inside names are told apart.  execd sends output line
 * by line, so a line holding a lone '\r' arrives split: the piece after it
 * is lost (the local driver keeps it). */

struct gline {
	size_t file;
	long long line;
	bool context;
	const char *text;
	size_t len;
};

static bool parse_gline(const char *s, size_t n, char **paths, size_t np, size_t *hint,
			struct gline *g)
{
	for (size_t k = 0; k < np; k++) {
		size_t i = (*hint + k) % np;
		size_t pl = strlen(paths[i]);
		const char *p, *end = s + n;
		char sep;
		long long v = 0;

		if (pl + 2 >= n || memcmp(s, paths[i], pl) || (s[pl] != ':' && s[pl] != '-'))
			continue;
		sep = s[pl];
		p = s + pl + 1;
		if (p >= end || !isdigit((unsigned char)*p))
			continue;
		while (p < end && isdigit((unsigned char)*p))
			v = v * 10 + (*p++ - '0');
		if (p >= end || *p != sep)
			continue;
		g->file = i;
		g->line = v;
		g->context = sep == '-';
		g->text = p + 1;
		g->len = (size_t)(end - p - 1);
		*hint = i;
		return true;
	}
	return false;
}

/* Cut to PISB_FS_LINE_CAP characters (UTF-8). */
static size_t cut_chars(const char *s, size_t n, bool *cut)
{
	size_t chars = 0;

	for (size_t i = 0; i < n; i++) {
		if (((unsigned char)s[i] & 0xc0) != 0x80) {
			if (chars == PISB_FS_LINE_CAP) {
				*cut = true;
				return i;
			}
			chars++;
		}
	}
	return n;
}

struct gstate {
	const struct pisb_fs_grep *o;
	pisb_fs_grep_fn fn;
	void *arg;
	struct pisb_fs_grep_result *r;
	bool stop;
};

static void grep_output(struct gstate *gs, const struct pisb_buf *out, char **paths,
			const char **rels, size_t np)
{
	size_t hint = 0;
	const char *p = out->s ? out->s : "", *end = p + out->len;

	while (p < end && !gs->stop) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
		struct gline g;

		if (parse_gline(p, n, paths, np, &hint, &g)) {
			struct pisb_fs_grep_line l;
			bool cut = false;
			if (!g.context) {
				if (gs->r->matches >= gs->o->limit) {
					gs->r->limit_reached = true;
					gs->stop = true;
					break;
				}
				gs->r->matches++;
			}
			l.path = rels[g.file];
			l.line = g.line;
			l.text = g.text;
			l.len = cut_chars(g.text, g.len, &cut);
			l.cut = cut;
			l.context = g.context;
			if (cut)
				gs->r->lines_truncated = true;
			gs->fn(gs->arg, &l);
		}
		p = nl ? nl + 1 : end;
	}
}

static int grep_batch(struct os_inst *t, struct gstate *gs, char **paths, const char **rels,
		      size_t np, struct pisb_err *e)
{
	_cleanup_buf_ struct pisb_buf cmd = PISB_BUF_INIT, out = PISB_BUF_INIT, err = PISB_BUF_INIT;
	struct os_run o = { .out_fd = -1, .err_fd = -1, .out = &out, .err = &err,
			    .cap = 64u << 20, .timeout_ms = 600000 };
	long long left = gs->o->limit - gs->r->matches + 1;
	long long maxlines = left * (2LL * gs->o->context + 2) + 1;
	int code = 0;

	pisb_buf_adds(&cmd, "command -v grep >/dev/null 2>&1 || { echo 'grep is not installed in the sandbox' >&2; exit 127; }; ");
	/* -I (skip binary files, as the local driver does) where grep has it */
	pisb_buf_adds(&cmd, "I=; grep -I -e x /dev/null >/dev/null 2>&1; [ $? -eq 1 ] && I=-I; ");
	pisb_buf_adds(&cmd, "LC_ALL=C grep $I -n -H ");
	pisb_buf_adds(&cmd, gs->o->literal ? "-F " : "-E ");
	if (gs->o->icase)
		pisb_buf_adds(&cmd, "-i ");
	if (gs->o->context > 0)
		pisb_buf_addf(&cmd, "-C %d ", gs->o->context);
	pisb_buf_adds(&cmd, "-e ");
	os_sq(&cmd, gs->o->pattern);
	pisb_buf_adds(&cmd, " --");
	for (size_t i = 0; i < np; i++) {
		pisb_buf_addc(&cmd, ' ');
		os_sq(&cmd, paths[i]);
	}
	pisb_buf_addf(&cmd, " 2>/dev/null | head -n %lld", maxlines);
	if (os_run_cmd(&t->c, cmd.s, "/", NULL, 0, &o, &code, e) < 0)
		return -1;
	if (code == 127) {
		while (err.len && err.s[err.len - 1] == '\n')
			err.s[--err.len] = '\0';
		return pisb_err_set(e, PISB_EXIT_BACKEND, "grep: %s",
				    err.len ? err.s : "grep is not installed in the sandbox");
	}
	grep_output(gs, &out, paths, rels, np);
	return 0;
}

static int grep_in(struct os_inst *t, const char *path, const struct pisb_fs_grep *o,
		   pisb_fs_grep_fn fn, void *arg, struct pisb_fs_grep_result *r, struct pisb_err *e)
{
	struct gstate gs = { o, fn, arg, r, false };
	struct pisb_fs_info i;
	struct pisb_pathglob g;
	struct tree tr;
	bool single, have_glob = o->glob && *o->glob;
	int k, ret = -1;

	memset(&tr, 0, sizeof(tr));
	k = info(t, path, &i, e);
	if (k == 1)
		return not_found(path, e);
	if (k < 0)
		return -1;
	single = strcmp(i.type, "dir") != 0;
	if (single && strcmp(i.type, "file")) {
		pisb_fs_info_release(&i);
		return pisb_err_set(e, PISB_EXIT_FAIL, "'%s' is not a regular file or directory", path);
	}
	pisb_fs_info_release(&i);
	if (single) {
		tr.v = xcalloc(1, sizeof(*tr.v));
		tr.v[0].path = xstrdup(path);
		tr.v[0].rel = tr.v[0].name = base_name(tr.v[0].path);
		tr.v[0].type = 'f';
		tr.n = 1;
	} else if (walk_tree(t, path, !o->no_ignore, &tr, e) < 0) {
		return -1;
	}
	if (have_glob)
		pisb_pathglob_init(&g, o->glob);
	for (size_t x = 0; x < tr.n && !gs.stop;) {
		char *paths[2048];
		const char *rels[2048];
		size_t np = 0, bytes = 0;
		for (; x < tr.n && np < 2048 && bytes < 96 * 1024; x++) {
			const struct went *w = &tr.v[x];
			if (w->type != 'f')
				continue;
			if (have_glob && !single && !pisb_pathglob_match(&g, w->rel, w->name))
				continue;
			paths[np] = w->path;
			rels[np++] = w->rel;
			bytes += strlen(w->path) + 4;
		}
		if (np && grep_batch(t, &gs, paths, rels, np, e) < 0)
			goto out;
	}
	ret = 0;
out:
	if (have_glob)
		pisb_pathglob_release(&g);
	tree_release(&tr);
	return ret;
}

int pisb_os_grep(struct pisb_sandbox *sb, const struct pisb_fs_grep *o,
		 char **abs, pisb_fs_grep_fn fn, void *arg,
		 struct pisb_fs_grep_result *r, struct pisb_err *e)
{
	struct os_inst t;
	char *a;
	int ret;

	memset(r, 0, sizeof(*r));
	if (abs)
		*abs = NULL;
	if (!o->literal) {
		/* a bad expression is a usage error here, as locally, not an
		 * empty result from a failing grep over there */
		regex_t re;
		int rc = regcomp(&re, o->pattern, REG_EXTENDED | REG_NOSUB | (o->icase ? REG_ICASE : 0));
		if (rc != 0) {
			char msg[256];
			regerror(rc, &re, msg, sizeof(msg));
			return pisb_err_set(e, PISB_EXIT_USAGE, "invalid regular expression '%s': %s",
					    o->pattern, msg);
		}
		regfree(&re);
	}
	if (open_ready(sb, &t, e) < 0)
		return -1;
	a = abspath(&t, o->path);
	ret = grep_in(&t, a, o, fn, arg, r, e);
	set_abs(abs, a);
	os_inst_release(&t);
	return ret;
}

/* ---- push / pull ----
 *
 * The tree travels as one tar archive, made and unpacked by libarchive on
 * the host (archive.h: the same file selection, refusal rules and digest
 * as the local driver) and by tar inside the sandbox, with one upload or
 * download and one command:
 *
 *   push  the archive goes up beside the target (/files/upload, streamed
 *         from a host temp file); a script then checks its sha256sum
 *         against the host's digest, unpacks it into a fresh directory
 *         next to the target (inside it when the target is a mount point),
 *         and swaps the trees (two renames, the old one moved back on a
 *         failure; entry by entry when the target cannot move), so the
 *         target holds the old tree or the new one, never a mix.
 *   pull  a script tars PATH into /tmp and prints its sha256sum; the
 *         archive comes down (/files/download) into an unlinked host temp
 *         file, is removed in the sandbox, and goes through pull's host
 *         side: staged, checked, compared with that digest, moved into
 *         place.
 *
 * The sandbox needs tar and sha256sum (or busybox, shasum, openssl); when
 * it lacks them the verb fails (exit 5) saying so, and nothing changed. */

/* pull: Q the path, A the archive to make, G 1 to leave ./.git out
 * where tar can (the project's archive; the reader skips it anyway).
 * Prints "pisb-ok SHA". */
static const char pull_script[] =
	"mkdir -p -- \"${A%/*}\" 2>/dev/null\n"
	"if [ -d \"$Q\" ]; then\n"
	"  X=; case \"$A\" in \"${Q%/}\"/*) X=\"--exclude=${A##*/}\";; esac\n"
	"  XG=; if [ \"$G\" = 1 ]; then case \"$($TAR --version 2>/dev/null)\" in *GNU*|*bsdtar*) XG=--exclude=./.git;; esac; fi\n"
	"  $TAR -c -f \"$A\" -C \"$Q\" $X $XG . || fail 1 \"archiving '$Q' in the sandbox failed\"\n"
	"elif [ -f \"$Q\" ]; then\n"
	"  D=${Q%/*}; [ -n \"$D\" ] || D=/\n"
	"  $TAR -c -h -f \"$A\" -C \"$D\" \"./${Q##*/}\" || fail 1 \"archiving '$Q' in the sandbox failed\"\n"
	"elif [ -e \"$Q\" ]; then fail 1 \"'$Q' is not a file or directory\"\n"
	"else fail 3 \"no such file or directory '$Q'\"; fi\n"
	"digest\n"
	"echo \"pisb-ok $d\"\n";

static void sh_var(struct pisb_buf *b, const char *k, const char *v)
{
	pisb_buf_adds(b, k);
	pisb_buf_addc(b, '=');
	os_sq(b, v);
	pisb_buf_addc(b, '\n');
}

/* Run a transfer script; *ok gets what follows "pisb-ok " on its output.
 * Its exit status picks the error: 3 not found, 127 a missing tool (5),
 * else 1, with the script's stderr as the message. */
static int xfer_run(struct os_inst *t, const char *verb, const char *script, char ok[80],
		    struct pisb_err *e)
{
	_cleanup_buf_ struct pisb_buf out = PISB_BUF_INIT, err = PISB_BUF_INIT;
	struct os_run o = { .out_fd = -1, .err_fd = -1, .out = &out, .err = &err, .cap = 65536 };
	const char *p;
	int code = 0;

	ok[0] = '\0';
	if (os_run_cmd(&t->c, script, "/", NULL, 0, &o, &code, e) < 0)
		return pisb_err_prefix(e, "%s", verb);
	while (err.len && err.s[err.len - 1] == '\n')
		err.s[--err.len] = '\0';
	if (code == 127)
		return pisb_err_set(e, PISB_EXIT_BACKEND, "%s: %s (push and pull need tar and sha256sum inside the sandbox); nothing was changed",
				    verb, err.len ? err.s : "a tool is missing in the sandbox");
	if (code != 0)
		return pisb_err_set(e, code == 3 ? PISB_EXIT_NOTFOUND : PISB_EXIT_FAIL, "%s: %s", verb,
				    err.len ? err.s : "the command in the sandbox failed");
	p = out.s ? strstr(out.s, "pisb-ok ") : NULL;
	if (!p)
		return pisb_err_set(e, PISB_EXIT_BACKEND, "%s: the sandbox did not confirm the transfer", verb);
	p += 8;
	snprintf(ok, 80, "%.*s", (int)strcspn(p, "\r\n"), p);
	return 0;
}

/* An unlinked read-write temp file in dir. */
static int temp_fd(const char *dir, struct pisb_err *e)
{
	_cleanup_free_ char *tmpl = xasprintf("%s/.pisb-xfer-XXXXXX", dir);
	int fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);

	if (fd >= 0)
		return fd;
	fd = mkostemp(tmpl, O_CLOEXEC);
	if (fd < 0)
		return pisb_err_sys(e, PISB_EXIT_FAIL, "create a temporary file in '%s'", dir);
	unlink(tmpl);
	return fd;
}

/* POST /files/upload of fd's body (prefix + file + suffix, as written
 * there), mapped rather than copied. */
static int upload_fd(struct os_inst *t, const char *boundary, int fd, struct pisb_err *e)
{
	_cleanup_free_ char *url = xasprintf("%s/files/upload", t->c.execd);
	_cleanup_free_ char *ct = xasprintf("Content-Type: multipart/form-data; boundary=%s", boundary);
	struct curl_slist *h = NULL;
	struct pisb_http_call call = { 0 };
	struct pisb_http_resp r;
	struct stat st;
	void *map;
	int ret = -1;

	if (fstat(fd, &st) < 0)
		return pisb_err_sys(e, PISB_EXIT_FAIL, "stat the archive");
	map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	if (map == MAP_FAILED)
		return pisb_err_sys(e, PISB_EXIT_FAIL, "map the archive");
	for (struct curl_slist *x = t->c.ex_hdrs; x; x = x->next)
		h = curl_slist_append(h, x->data);
	h = curl_slist_append(h, ct);
	h = curl_slist_append(h, "Expect:");
	call.method = "POST";
	call.url = url;
	call.headers = h;
	call.body = map;
	call.nbody = (size_t)st.st_size;
	call.stall_ms = 120000;
	pisb_http_resp_init(&r);
	if (pisb_http_run(t->c.h, &call, &r, "the sandbox's execd", e) < 0)
		goto out;
	if (r.status != 200) {
		os_fail(&t->c, &r, "upload the archive", e);
		e->code = PISB_EXIT_BACKEND;
		goto out;
	}
	ret = 0;
out:
	munmap(map, (size_t)st.st_size);
	curl_slist_free_all(h);
	pisb_http_resp_release(&r);
	return ret;
}

static int push_in(struct os_inst *t, const char *hostdir, const char *target, bool all,
		   struct pisb_xfer *x, struct pisb_err *e)
{
	_cleanup_close_ int fd = -1;
	_cleanup_buf_ struct pisb_buf head = PISB_BUF_INIT, tail = PISB_BUF_INIT, meta = PISB_BUF_INIT;
	_cleanup_buf_ struct pisb_buf script = PISB_BUF_INIT;
	_cleanup_free_ char *dir = dir_name(target), *arch = NULL;
	const char *tmp = getenv("TMPDIR");
	char hex[17], boundary[48], ok[80];
	struct pisb_jw w;
	char *where = x->where;
	const char *ws = t->cfg->os.workspace ? t->cfg->os.workspace : "/workspace";
	int r;

	pisb_random_hex(hex, 16);
	snprintf(boundary, sizeof(boundary), "pisb-%s-boundary", hex);
	arch = xasprintf("%s/.%s.pisb-push-%s.tar", strcmp(dir, "/") ? dir : "", base_name(target), hex);
	fd = temp_fd(tmp && *tmp ? tmp : "/tmp", e);
	if (fd < 0)
		return -1;
	/* the multipart body is written whole into the temp file: metadata
	 * part, file part head, the archive, the closing boundary */
	pisb_jw_init(&w, &meta);
	pisb_jw_obj(&w);
	pisb_jw_kstr(&w, "path", arch);
	pisb_jw_kint(&w, "mode", 600);
	pisb_jw_obj_end(&w);
	pisb_buf_addf(&head, "--%s\r\nContent-Disposition: form-data; name=\"metadata\"; filename=\"metadata\"\r\n"
		      "Content-Type: application/json\r\n\r\n%s\r\n--%s\r\nContent-Disposition: form-data; "
		      "name=\"file\"; filename=\"archive.tar\"\r\nContent-Type: application/octet-stream\r\n\r\n",
		      boundary, meta.s, boundary);
	pisb_buf_addf(&tail, "\r\n--%s--\r\n", boundary);
	if (pisb_write_all(fd, head.s, head.len) < 0)
		return pisb_err_sys(e, PISB_EXIT_FAIL, "write the archive");
	x->where = NULL;
	r = pisb_push_archive(hostdir, all, fd, x, e);
	x->where = where;
	if (r < 0)
		return -1;
	if (pisb_write_all(fd, tail.s, tail.len) < 0)
		return pisb_err_sys(e, PISB_EXIT_FAIL, "write the archive");
	if (upload_fd(t, boundary, fd, e) < 0) {
		delete_file(t, arch);
		return pisb_err_prefix(e, "push");
	}
	sh_var(&script, "A", arch);
	sh_var(&script, "T", target);
	sh_var(&script, "W", x->sha256);
	sh_var(&script, "H", hex);
	sh_var(&script, "K", !strcmp(target, ws) ? "1" : "0");
	pisb_buf_adds(&script, "S=\n");
	pisb_buf_adds(&script, pisb_xfer_sh_prelude);
	pisb_buf_adds(&script, pisb_push_sh);
	if (xfer_run(t, "push", script.s, ok, e) < 0) {
		delete_file(t, arch);   /* when the script never ran */
		return -1;
	}
	x->kept_config = ok[0] == '1';
	return 0;
}

int pisb_os_push(struct pisb_sandbox *sb, const char *hostdir, const char *to,
		 bool all, struct pisb_xfer *x, struct pisb_err *e)
{
	struct os_inst t;
	int ret;

	memset(x, 0, sizeof(*x));
	{
		/* the host side first: a missing HOSTDIR needs no sandbox */
		struct stat sb;
		if (stat(hostdir, &sb) < 0)
			return pisb_err_sys(e, errno == ENOENT ? PISB_EXIT_NOTFOUND : PISB_EXIT_FAIL,
					    "open host directory '%s'", hostdir);
		if (!S_ISDIR(sb.st_mode))
			return pisb_err_set(e, PISB_EXIT_FAIL, "open host directory '%s': Not a directory", hostdir);
	}
	if (open_ready(sb, &t, e) < 0)
		return -1;
	{
		_cleanup_free_ char *a = abspath(&t, to);
		x->where = pisb_push_target(a);
	}
	if (!strcmp(x->where, "/"))
		ret = pisb_err_set(e, PISB_EXIT_USAGE, "refusing to replace the sandbox's root directory");
	else
		ret = push_in(&t, hostdir, x->where, all, x, e);
	os_inst_release(&t);
	return ret;
}

static int pull_in(struct os_inst *t, const char *path, const char *hostdir,
		   const struct pisb_pull_opts *o, struct pisb_xfer *x, struct pisb_err *e)
{
	_cleanup_buf_ struct pisb_buf script = PISB_BUF_INIT;
	_cleanup_free_ char *arch = NULL;
	_cleanup_close_ int fd = -1;
	char hex[17], ok[80];
	long long size = 0;
	int r;

	pisb_random_hex(hex, 16);
	arch = xasprintf("/tmp/.pisb-pull-%s.tar", hex);
	sh_var(&script, "Q", path);
	sh_var(&script, "A", arch);
	pisb_buf_adds(&script, "S=\n");
	pisb_buf_adds(&script, pisb_xfer_sh_prelude);
	pisb_buf_adds(&script, pull_script);
	if (xfer_run(t, "pull", script.s, ok, e) < 0) {
		delete_file(t, arch);
		return -1;
	}
	if (strlen(ok) != 64) {
		delete_file(t, arch);
		return pisb_err_set(e, PISB_EXIT_BACKEND, "pull: the sandbox's digest '%s' is not a SHA-256", ok);
	}
	if (pisb_mkdirs_at(AT_FDCWD, hostdir, 0755, e) < 0) {
		delete_file(t, arch);
		return -1;
	}
	fd = temp_fd(hostdir, e);
	if (fd < 0) {
		delete_file(t, arch);
		return -1;
	}
	r = download(t, arch, 0, NULL, fd, &size, e);
	delete_file(t, arch);
	if (r < 0)
		return pisb_err_prefix(e, "pull");
	if (lseek(fd, 0, SEEK_SET) < 0)
		return pisb_err_sys(e, PISB_EXIT_FAIL, "rewind the archive");
	return pisb_pull_archive(fd, ok, hostdir, o, x, e);
}

int pisb_os_pull(struct pisb_sandbox *sb, const char *path, const char *hostdir,
		 const struct pisb_pull_opts *o, struct pisb_xfer *x, struct pisb_err *e)
{
	struct os_inst t;
	_cleanup_free_ char *a = NULL;
	int ret;

	memset(x, 0, sizeof(*x));
	if (open_ready(sb, &t, e) < 0)
		return -1;
	a = abspath(&t, path);
	ret = pisb_pull_check(a, hostdir, o, e) < 0 ? -1 : pull_in(&t, a, hostdir, o, x, e);
	os_inst_release(&t);
	return ret;
}

/* The workspace as one tar archive onto fd (the project's reader, in
 * project_diff.c, reads it as data); sha: the digest the sandbox made. */
int pisb_os_project_archive(struct pisb_sandbox *sb, int fd, char sha[65], struct pisb_err *e)
{
	_cleanup_buf_ struct pisb_buf script = PISB_BUF_INIT;
	_cleanup_free_ char *arch = NULL, *ws = NULL;
	struct os_inst t;
	char hex[17], ok[80];
	long long size = 0;
	int r;

	/* diff and apply start nothing: a sandbox paused on the server (by
	 * another client, say) is refused, not resumed */
	if (os_inst_of(sb, &t, e) < 0)
		return -1;
	if (os_inst_running(&t, e) < 0) {
		os_inst_release(&t);
		return -1;
	}
	ws = abspath(&t, NULL);
	pisb_random_hex(hex, 16);
	arch = xasprintf("/tmp/.pisb-pull-%s.tar", hex);
	sh_var(&script, "Q", ws);
	sh_var(&script, "A", arch);
	pisb_buf_adds(&script, "G=1\nS=\n");
	pisb_buf_adds(&script, pisb_xfer_sh_prelude);
	pisb_buf_adds(&script, pull_script);
	r = xfer_run(&t, "read the workspace", script.s, ok, e);
	if (r == 0 && (strlen(ok) != 64 || strspn(ok, "0123456789abcdef") != 64))
		r = pisb_err_set(e, PISB_EXIT_BACKEND, "read the workspace: the sandbox's digest '%s' is not a SHA-256", ok);
	if (r == 0)
		r = download(&t, arch, 0, NULL, fd, &size, e);
	delete_file(&t, arch);
	if (r == 0)
		memcpy(sha, ok, 65);
	os_inst_release(&t);
	return r;
}
