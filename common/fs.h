/* fs.h - files inside a local sandbox (pisb-fs: read, write, edit, ls, stat,
 * mkdir, find, grep, logs).
 *
 * Confinement: the process first moves into the sandbox's user and mount
 * namespaces and chroots into its root (pisb_fs_enter), so the whole file
 * system it can name is the sandbox's.  On top of that every path is
 * resolved with openat2(RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS) from the
 * sandbox's "/": "..", absolute symlinks and /proc magic links stay inside.
 * Entering is irreversible, so everything needed from the host (stdin,
 * --from FILE, --old-file ...) is opened or read before.
 *
 * A relative PATH means relative to the sandbox's workspace.
 */
#ifndef PISB_FS_H
#define PISB_FS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "util.h"

struct pisb_err;
struct pisb_state;

#define PISB_FS_READ_CAP (64 * 1024)    /* read and logs: text cap */
#define PISB_FS_LINE_CAP 500            /* grep: characters kept of a line */

struct pisb_fs {
	int idir;                 /* instances/NAME, O_PATH (owned) */
	char *name;               /* owned */
	char *workspace;          /* absolute, inside the sandbox (owned) */
	pid_t init_pid;           /* the sandbox's pid 1 ... */
	unsigned long long init_start;   /* ... and its start time */
	int root;                 /* after pisb_fs_enter: O_PATH fd of "/" */
	/* the driver's way in (fs_how's enter) */
	int (*enter)(const struct pisb_fs *fs, struct pisb_err *e);
	const char *log;          /* what logs shows without SERVICE: the
	                           * controller's log, sbx.log, or a vm's
	                           * setup.log (NULL: controller.log) */
	bool services;            /* logs NAME SERVICE reads logs/SERVICE.log */
};
#define PISB_FS_INIT { -1, NULL, NULL, 0, 0, -1, NULL, NULL, false }

/* How a driver's files are reached. */
struct pisb_fs_how {
	const char *log;          /* what logs shows without SERVICE (NULL:
	                           * controller.log) */
	bool services;            /* with log set: it runs services too, whose
	                           * logs are logs/SERVICE.log (vm) */
	/* a workspace shared with this host (caller frees), found whatever
	 * the sandbox's state; NULL: the config's workspace, inside the
	 * running sandbox (fs->init_pid, fs->init_start) */
	char *(*workspace)(int idir, struct pisb_err *e);
	/* move the calling process to where it sees the sandbox's files with
	 * the sandbox's rights, as root of them (local: its user and mount
	 * namespaces; sbx: a root of its own holding only the shared
	 * workspace); NULL: the driver's files are not reached from this
	 * host, pisb_fs_enter refuses */
	int (*enter)(const struct pisb_fs *fs, struct pisb_err *e);
};
/* The files of opened sandbox sb: with running, not running -> 5
 * ("sandbox 'NAME' is not running (start it with 'pisb start NAME')"). */
struct pisb_sandbox;
int pisb_fs_open(struct pisb_fs *fs, struct pisb_sandbox *sb, const struct pisb_fs_how *how,
		 bool running, struct pisb_err *e);
void pisb_fs_release(struct pisb_fs *fs);
/* Enter the sandbox as root inside; the calling process must be
 * single-threaded and never comes back to the host's view. */
int pisb_fs_enter(struct pisb_fs *fs, struct pisb_err *e);
/* The absolute path inside for PATH (relative: under the workspace), with
 * duplicate and trailing slashes and "." components removed.  Caller frees. */
char *pisb_fs_abspath(const struct pisb_fs *fs, const char *path);
/* openat2(rootfd, path, flags | O_CLOEXEC, RESOLVE_IN_ROOT |
 * RESOLVE_NO_MAGICLINKS): an fd, or -1 with errno. */
int pisb_fs_resolve(int rootfd, const char *path, int flags, mode_t mode);

/* read: text mode.  Lines from offset (1-based) on, at most limit lines (0:
 * no limit), at most cap bytes of content. */
struct pisb_fs_text {
	struct pisb_buf content;
	long long bytes;          /* size of the file */
	long long offset;         /* first line returned */
	long long lines;          /* lines returned (a cut last line counts) */
	long long next_offset;    /* line to continue from, 0 if none left */
	bool truncated;           /* the cap cut the content */
};
int pisb_fs_read_text(const struct pisb_fs *fs, const char *abs, long long offset,
		      long long limit, size_t cap, struct pisb_fs_text *t,
		      struct pisb_err *e);
void pisb_fs_text_release(struct pisb_fs_text *t);
/* read's line window over a file's bytes fed in pieces, the one rule both
 * drivers use (the local one feeds the file, opensandbox a download):
 * whole lines from offset on, at most limit lines, at most cap bytes, a
 * lone first line cut to the cap (never inside a UTF-8 sequence). */
struct pisb_fs_window {
	struct pisb_fs_text *t;   /* borrowed: filled as bytes come */
	long long offset, limit, line, taken;
	size_t cap, line_start;
	bool collecting, done, ended_nl;
};
/* t zeroed by the caller (t->bytes is the caller's to set). */
void pisb_fs_window_init(struct pisb_fs_window *w, struct pisb_fs_text *t,
			 long long offset, long long limit, size_t cap);
/* The next n bytes; true once the window needs no more. */
bool pisb_fs_window_feed(struct pisb_fs_window *w, const char *p, size_t n);
/* After the last piece: t->lines set; an offset past the end is an error
 * (code 1) naming abs. */
int pisb_fs_window_end(struct pisb_fs_window *w, const char *abs, struct pisb_err *e);
/* read --raw: copy the whole file to outfd. */
int pisb_fs_read_raw(const struct pisb_fs *fs, const char *abs, int outfd,
		     long long *bytes, struct pisb_err *e);

/* write: the content comes from fd (when >= 0, read to EOF) or data/n.
 * The file is replaced atomically: a temp file in the same directory,
 * renamed over the target (a symlink is followed to the file it names).
 * mode < 0 keeps the existing file's mode (else 0644); its owner is kept. */
struct pisb_fs_src {
	int fd;
	const void *data;
	size_t n;
};
int pisb_fs_write(const struct pisb_fs *fs, const char *abs,
		  const struct pisb_fs_src *src, int mode, bool mkdirs,
		  long long *bytes, struct pisb_err *e);

/* edit: every old text must occur exactly once in the original, the
 * matches must not overlap; else nothing is written (code 1, the message
 * names the edit, 1-based). */
struct pisb_fs_edit {
	const char *old;
	size_t oldn;
	const char *new_;
	size_t newn;
};
int pisb_fs_edit(const struct pisb_fs *fs, const char *abs,
		 const struct pisb_fs_edit *ed, size_t n, long long *bytes,
		 struct pisb_err *e);

/* ls / stat */
struct pisb_fs_info {
	char *name;               /* owned: entry name (ls) or the path (stat) */
	const char *type;         /* "file", "dir", "symlink", "other" */
	long long size;
	unsigned mode;            /* permission bits, st_mode & 07777 */
	int64_t mtime;
	char *target;             /* owned: a symlink's target, else NULL */
	bool readable, writable;  /* stat only: for root inside */
};
void pisb_fs_info_release(struct pisb_fs_info *i);
/* Entries of a directory (missing -> 3, not a directory -> 1), by name. */
int pisb_fs_ls(const struct pisb_fs *fs, const char *abs,
	       struct pisb_fs_info **out, size_t *n, struct pisb_err *e);
void pisb_fs_infos_free(struct pisb_fs_info *v, size_t n);
/* The path itself (a final symlink is not followed; readable and writable
 * are those of what it points to). */
int pisb_fs_stat(const struct pisb_fs *fs, const char *abs,
		 struct pisb_fs_info *out, struct pisb_err *e);
/* mkdir -p; *created: whether the last component was made. */
int pisb_fs_mkdir(const struct pisb_fs *fs, const char *abs, bool *created,
		  struct pisb_err *e);

/* find: entries under dir whose path matches pattern (glob.h's
 * pisb_pathglob rules); directories are reported with a trailing '/'. */
typedef void (*pisb_fs_find_fn)(void *arg, const char *rel);
struct pisb_fs_find {
	const char *dir;          /* absolute */
	const char *pattern;
	long long limit;
	bool no_ignore;
};
int pisb_fs_find(const struct pisb_fs *fs, const struct pisb_fs_find *o,
		 pisb_fs_find_fn fn, void *arg, bool *truncated,
		 struct pisb_err *e);

/* grep: POSIX extended regex (or a fixed string) over the files under
 * path (or path itself when it is a file), lines reported in order. */
struct pisb_fs_grep {
	const char *path;         /* absolute */
	const char *pattern;
	const char *glob;         /* NULL: every file */
	bool icase, literal, no_ignore;
	int context;
	long long limit;
};
struct pisb_fs_grep_line {
	const char *path;         /* relative to the search directory */
	long long line;
	const char *text;         /* not NUL-terminated; cut to PISB_FS_LINE_CAP characters */
	size_t len;
	bool cut;                 /* text was cut */
	bool context;             /* a context line, not a match */
};
struct pisb_fs_grep_result {
	long long matches;
	bool limit_reached;       /* more matches exist than were reported */
	bool lines_truncated;
};
typedef void (*pisb_fs_grep_fn)(void *arg, const struct pisb_fs_grep_line *l);
int pisb_fs_grep(const struct pisb_fs *fs, const struct pisb_fs_grep *o,
		 pisb_fs_grep_fn fn, void *arg, struct pisb_fs_grep_result *r,
		 struct pisb_err *e);

/* logs (host side, nothing entered): the last `lines` lines of the
 * instance's controller.log (service NULL) or logs/SERVICE.log, at most
 * cap bytes.  A missing service log is code 3. */
int pisb_fs_logs(const struct pisb_fs *fs, const char *service, long long lines,
		 size_t cap, struct pisb_buf *out, long long *nlines,
		 bool *truncated, struct pisb_err *e);

#endif
