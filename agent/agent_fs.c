/* agent_fs.c - the guest side of the vm driver's file verbs:
 * `/run/pisb/agent fs VERB ARGS...`, run by the host through the agent's
 * EXEC like any command.  It runs the local driver's file core (common/fs.c,
 * edit.c, search.c, ignore.c, glob.c: linked in, not copied) on the guest's
 * own "/" as root of the guest, so confinement, messages and exit codes
 * are the local driver's, and the host never touches the guest's disk.
 *
 * Paths are absolute (the host resolves relative ones against the
 * workspace).  The reply on stdout is a sequence of fields, each a u32le
 * length and that many bytes (numbers and booleans in decimal); see
 * drivers/vm/vm_fs.c for the records of each verb.  A failure writes the
 * message on stderr and exits with its pisb exit code.
 */
#include "agent_fs.h"
#include "vm_proto.h"
#include "err.h"
#include "fs.h"
#include "util.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static struct pisb_buf out = PISB_BUF_INIT;

static void put(const void *p, size_t n)
{
	unsigned char l[4];

	pisb_vm_put32(l, (uint32_t)n);
	pisb_buf_add(&out, l, 4);
	pisb_buf_add(&out, p, n);
	/* keep memory small on long listings */
	if (out.len >= 65536) {
		if (pisb_write_all(1, out.s, out.len) < 0)
			_exit(PISB_EXIT_BACKEND);
		pisb_buf_reset(&out);
	}
}

static void puts_(const char *s)
{
	put(s, strlen(s));
}

static void puti(long long v)
{
	char b[32];

	put(b, (size_t)snprintf(b, sizeof(b), "%lld", v));
}

static int flush(void)
{
	int r = pisb_write_all(1, out.s, out.len) < 0 ? -1 : 0;

	pisb_buf_reset(&out);
	return r;
}

static long long num(const char *s)
{
	long long v = 0;

	if (pisb_parse_ll(s, -1, (1LL << 62), &v) < 0)
		v = -2;
	return v;
}

static void put_info(const struct pisb_fs_info *i)
{
	puts_(i->name ? i->name : "");
	puts_(i->type);
	puti(i->size);
	puti(i->mode);
	puti(i->mtime);
	puti(i->target != NULL);
	puts_(i->target ? i->target : "");
	puti(i->readable);
	puti(i->writable);
}

static void find_fn(void *arg, const char *rel)
{
	(void)arg;
	puts_("p");
	puts_(rel);
}

static void grep_fn(void *arg, const struct pisb_fs_grep_line *l)
{
	(void)arg;
	puts_("l");
	puts_(l->path);
	puti(l->line);
	put(l->text, l->len);
	puti(l->cut);
	puti(l->context);
}

/* edit's pairs from stdin: u32le old length, old, u32le new length, new */
static int read_edits(struct pisb_buf *in, struct pisb_fs_edit **ed, size_t *n,
		      struct pisb_err *e)
{
	size_t off = 0, cap = 0;

	if (pisb_read_fd(0, in, (size_t)PISB_VM_FS_EDIT_MAX) < 0)
		return pisb_err_set(e, PISB_EXIT_USAGE, "the edits exceed %d MiB", PISB_VM_FS_EDIT_MAX >> 20);
	*ed = NULL;
	*n = 0;
	while (off < in->len) {
		struct pisb_fs_edit x;
		uint32_t l;

		if (in->len - off < 4 || (l = pisb_vm_get32((unsigned char *)in->s + off)) > in->len - off - 4)
			return pisb_err_set(e, PISB_EXIT_USAGE, "malformed edits");
		x.old = in->s + off + 4;
		x.oldn = l;
		off += 4 + l;
		if (in->len - off < 4 || (l = pisb_vm_get32((unsigned char *)in->s + off)) > in->len - off - 4)
			return pisb_err_set(e, PISB_EXIT_USAGE, "malformed edits");
		x.new_ = in->s + off + 4;
		x.newn = l;
		off += 4 + l;
		*ed = pisb_grow(*ed, *n + 1, &cap, sizeof(**ed), 8);
		(*ed)[(*n)++] = x;
	}
	return 0;
}

static int run(struct pisb_fs *fs, int argc, char **argv, struct pisb_err *e)
{
	const char *verb = argv[0];

#define NEED(k) do { if (argc != (k)) return pisb_err_set(e, PISB_EXIT_USAGE, "fs %s: %d arguments expected", verb, (k) - 1); } while (0)
	if (!strcmp(verb, "read")) {
		struct pisb_fs_text t;

		NEED(5);
		memset(&t, 0, sizeof(t));
		if (pisb_fs_read_text(fs, argv[1], num(argv[2]), num(argv[3]), (size_t)num(argv[4]), &t, e) < 0)
			return -1;
		puti(t.bytes);
		puti(t.offset);
		puti(t.lines);
		puti(t.next_offset);
		puti(t.truncated);
		put(t.content.s, t.content.len);
		pisb_fs_text_release(&t);
		return 0;
	}
	if (!strcmp(verb, "raw")) {
		long long bytes = 0;

		NEED(2);
		return pisb_fs_read_raw(fs, argv[1], 1, &bytes, e);
	}
	if (!strcmp(verb, "write")) {
		struct pisb_fs_src src = { 0, NULL, 0 };
		long long bytes = 0;

		NEED(4);
		if (pisb_fs_write(fs, argv[1], &src, (int)num(argv[2]), num(argv[3]) == 1, &bytes, e) < 0)
			return -1;
		puti(bytes);
		return 0;
	}
	if (!strcmp(verb, "edit")) {
		_cleanup_buf_ struct pisb_buf in = PISB_BUF_INIT;
		_cleanup_free_ struct pisb_fs_edit *ed = NULL;
		long long bytes = 0;
		size_t n = 0;

		NEED(2);
		if (read_edits(&in, &ed, &n, e) < 0 || pisb_fs_edit(fs, argv[1], ed, n, &bytes, e) < 0)
			return -1;
		puti(bytes);
		return 0;
	}
	if (!strcmp(verb, "ls")) {
		struct pisb_fs_info *v = NULL;
		size_t n = 0;

		NEED(2);
		if (pisb_fs_ls(fs, argv[1], &v, &n, e) < 0)
			return -1;
		for (size_t i = 0; i < n; i++)
			put_info(&v[i]);
		pisb_fs_infos_free(v, n);
		return 0;
	}
	if (!strcmp(verb, "stat")) {
		struct pisb_fs_info i;

		NEED(2);
		memset(&i, 0, sizeof(i));
		if (pisb_fs_stat(fs, argv[1], &i, e) < 0)
			return -1;
		put_info(&i);
		pisb_fs_info_release(&i);
		return 0;
	}
	if (!strcmp(verb, "mkdir")) {
		bool created = false;

		NEED(2);
		if (pisb_fs_mkdir(fs, argv[1], &created, e) < 0)
			return -1;
		puti(created);
		return 0;
	}
	if (!strcmp(verb, "find")) {
		struct pisb_fs_find f;
		bool truncated = false;

		NEED(5);
		f = (struct pisb_fs_find){ argv[1], argv[2], num(argv[3]), num(argv[4]) == 1 };
		if (pisb_fs_find(fs, &f, find_fn, NULL, &truncated, e) < 0)
			return -1;
		puts_("e");
		puti(truncated);
		return 0;
	}
	if (!strcmp(verb, "grep")) {
		struct pisb_fs_grep g;
		struct pisb_fs_grep_result r;

		/* path pattern hasglob glob icase literal no_ignore context limit */
		NEED(10);
		memset(&r, 0, sizeof(r));
		g = (struct pisb_fs_grep){ argv[1], argv[2], num(argv[3]) == 1 ? argv[4] : NULL,
					   num(argv[5]) == 1, num(argv[6]) == 1, num(argv[7]) == 1,
					   (int)num(argv[8]), num(argv[9]) };
		if (pisb_fs_grep(fs, &g, grep_fn, NULL, &r, e) < 0)
			return -1;
		puts_("e");
		puti(r.matches);
		puti(r.limit_reached);
		puti(r.lines_truncated);
		return 0;
	}
	return pisb_err_set(e, PISB_EXIT_USAGE, "fs: unknown verb '%s'", verb);
#undef NEED
}

int agent_fs_main(int argc, char **argv)
{
	struct pisb_fs fs = PISB_FS_INIT;
	struct pisb_err e = PISB_ERR_INIT;

	if (argc < 1) {
		fprintf(stderr, "fs: a verb expected\n");
		return PISB_EXIT_USAGE;
	}
	fs.root = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	fs.workspace = xstrdup("/");
	if (fs.root < 0) {
		fprintf(stderr, "fs: open '/': %m\n");
		return PISB_EXIT_FAIL;
	}
	if (run(&fs, argc, argv, &e) < 0) {
		fprintf(stderr, "%s\n", e.msg);
		return e.code > 0 ? e.code : PISB_EXIT_FAIL;
	}
	if (flush() < 0)
		return PISB_EXIT_BACKEND;
	pisb_fs_release(&fs);
	return 0;
}
