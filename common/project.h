/* project.h - the user's project in a sandbox: the base copy, what the
 * agent changed (diff), and those changes back into the project (apply).
 *
 * `pisb create NAME --project DIR` (mode copy, the default) copies the
 * project's files into the workspace before the sandbox first boots:
 * git's tracked files as they are in the working tree (read from the
 * index by gitindex.h: no git runs on the host) plus the untracked files
 * that .gitignore does not ignore (ignore.h's walk), never .git, never a
 * file that matches a secret pattern (pisb_project_secret) unless the
 * config says `secrets: include`.  Every file is hashed (SHA-256) on both
 * sides of the copy and the two digests compared.  What was copied is the
 * base, kept in the instance directory:
 *
 *   project/info.json   {"dir","mode","files","bytes","secretsHidden",
 *                        "uidBase","gidBase","idCount","createdAt"}
 *   project/base        the manifest: "pisb-base 1\n", then per entry
 *                       "T MODE SIZE MTIME HSIZE HMTIME SHA256\0PATH\0TARGET\0"
 *                       (T 'f' file or 'l' symlink; MODE octal permission
 *                       bits; MTIME/HMTIME nanoseconds of the workspace
 *                       copy and of the host file; SHA256 of the content or
 *                       of the symlink's target), sorted by PATH (bytes)
 *
 * Both are written atomically (state.h) and only by pisb.  Inside the
 * sandbox the workspace becomes a git repository whose one commit is the
 * base (git runs inside the sandbox, never on the host; its blobs come
 * in one pack the host wrote with the copy, project_git.c).
 *
 * diff reads the workspace from a child that holds no more rights than
 * the sandbox (the driver's project_view slot, else project_enter: for
 * the local driver, its disk's upper layer in a user namespace mapped as
 * the sandbox's, running or not) and never follows a symlink there.  The
 * base's entries are looked at by path in two threads while a walk finds
 * the added files.  A file whose
 * size and mtime still match the base is unchanged without being read;
 * the others are hashed.  The child's records are hostile input to the
 * parent: bounded (PISB_PROJECT_FILE_MAX a file, PISB_PROJECT_TOTAL_MAX in
 * all), names checked (relative, no "..", no ".git" component).
 */
#ifndef PISB_PROJECT_H
#define PISB_PROJECT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "util.h"

struct pisb_err;
struct pisb_jw;
struct pisb_sandbox;
struct pisb_project_config;

#define PISB_PROJECT_FILE_MAX (64LL << 20)    /* content of one changed file */
#define PISB_PROJECT_TOTAL_MAX (1LL << 30)    /* content of all changed files */

/* One file of the base. */
struct pisb_pentry {
	char *path;               /* owned: relative to the project */
	char type;                /* 'f' regular file, 'l' symlink */
	unsigned mode;            /* permission bits (files) */
	long long size;
	int64_t mtime;            /* ns: the workspace copy's */
	long long hsize;
	int64_t hmtime;           /* ns: the host file's, at base */
	char sha[65];             /* of the content, or of the link's target */
	char *target;             /* owned: a symlink's target, else NULL */
};
struct pisb_manifest {
	struct pisb_pentry *v;    /* sorted by path */
	size_t n, cap;
};
#define PISB_MANIFEST_INIT { NULL, 0, 0 }
void pisb_manifest_release(struct pisb_manifest *m);
#define _cleanup_manifest_ __attribute__((cleanup(pisb_manifest_release)))
/* The entry for path, or NULL. */
const struct pisb_pentry *pisb_manifest_find(const struct pisb_manifest *m, const char *path);
int pisb_manifest_save(int idir, const struct pisb_manifest *m, struct pisb_err *e);
int pisb_manifest_load(int idir, struct pisb_manifest *m, struct pisb_err *e);

/* Is the file called name (its last component) a secret by the built-in
 * patterns (.env, .env.*, *.pem, *.key, *.p12, *.pfx, id_rsa*, id_dsa*,
 * id_ecdsa*, id_ed25519* but not *.pub, .netrc, .npmrc, .pypirc,
 * .git-credentials, .pgpass) or one of extra (pathglobs on rel)? */
bool pisb_project_secret(const char *rel, const char *name, char *const *extra, size_t nextra);
/* The built-in patterns, NULL-terminated (for docs and doctor). */
extern const char *const pisb_project_secret_patterns[];

/* The files create copies from dir (dirfd open on it): relative names,
 * sorted, unique; *hidden counts the secrets left out. */
int pisb_project_select(const char *dir, int dirfd, const struct pisb_project_config *pc,
			struct pisb_strv *out, long long *hidden, struct pisb_err *e);

/* What create --project copied. */
struct pisb_project_stats {
	long long files, bytes, secrets_hidden;
};

/* The project at dir (absolute) into the directory wsfd (the workspace of
 * a disk no sandbox ran on yet, or a template's: no symlink there is
 * followed), owned by uid/gid when chown; the manifest into m. */
int pisb_project_copy(const char *dir, const struct pisb_project_config *pc, int wsfd,
		      bool chown, uid_t uid, gid_t gid, struct pisb_manifest *m,
		      struct pisb_project_stats *s, struct pisb_err *e);
/* Create's whole step for a staged instance idir whose workspace is
 * wsfd: copy, then save project/base and project/info.json. */
int pisb_project_seed(int idir, int wsfd, const char *dir, const struct pisb_project_config *pc,
		      uid_t uid, gid_t gid, unsigned idcount, struct pisb_project_stats *s,
		      struct pisb_err *e);
/* The same for a driver with project_archive (driver.h), called by its
 * create once the sandbox runs: the copy staged under the instance, then
 * sent with the driver's push (its SHA-256 checked inside), the base's
 * list written with its write. */
int pisb_project_seed_remote(struct pisb_sandbox *sb, const char *dir,
			     const struct pisb_project_config *pc, struct pisb_project_stats *s,
			     struct pisb_err *e);
/* After create: make the workspace a git repository whose one commit is
 * the base, by running git inside the sandbox (its exec slot).  *note
 * (caller frees) says why it did not (git missing in the image), or NULL. */
int pisb_project_git_init(struct pisb_sandbox *sb, char **note, struct pisb_err *e);

/* project.mode bind / bind-ro (the local and vm drivers): nothing is copied;
 * project/info.json {"dir","mode","createdAt"} tells the driver, at each
 * start, to mount dir at the workspace (ns.h).  No base, so diff, apply
 * and sync say "nothing to apply".  Host-side pisb never reads dir's .git
 * or runs git there: the sandbox can write into dir. */
int pisb_project_bind_record(int idir, const char *dir, bool ro, struct pisb_err *e);
/* dir can be bound by a sandbox whose root writes it as its owner (the
 * vm driver's; the local driver's as root): a directory and, for bind,
 * not owned by uid or gid 0 (a setuid or setgid bit set inside would be
 * host root's).  0 and its owner's ids, else -1 (2 root-owned, 3
 * missing). */
int pisb_project_bind_owner(const char *dir, bool ro, unsigned *uid, unsigned *gid,
			    struct pisb_err *e);
/* 1 and *dir (caller frees), *ro when sandbox idir has a bound project,
 * else 0. */
int pisb_project_bound(int idir, char **dir, bool *ro);
/* The covers of a bound project (project_mask.c), privileged (mounts),
 * in a mount namespace that only the sandbox's view of the project lives
 * in: over every secret path (pisb_project_secret, unless pc says
 * secrets: include) the empty file PISB_PROJECT_HIDDEN_FILE or the empty
 * directory PISB_PROJECT_HIDDEN_DIR of srcdir (made by
 * pisb_project_mask_sources), and every .git bound on itself; each cover
 * read-only, nosuid, nodev.  top: the project's mount (a directory fd).
 * Nothing is followed (a symlink resolves in the sandbox's view); a
 * directory the caller cannot read is left as it is.  The sandbox sees an
 * empty read-only file or directory and cannot remove the cover: it is a
 * mount of a namespace it does not own (local: locked by a less
 * privileged user namespace; vm: virtiofsd's, on the host). */
#define PISB_PROJECT_HIDDEN_FILE "pisb-hidden-file"
#define PISB_PROJECT_HIDDEN_DIR "pisb-hidden-dir"
int pisb_project_mask(int top, int srcdir, const struct pisb_project_config *pc,
		      struct pisb_err *e);
int pisb_project_mask_sources(int dir, struct pisb_err *e);
/* The same while the sandbox runs (the local driver): a secret or a .git
 * that appears in the project, on the host or inside, covered as it
 * appears.  In the namespace of pisb_project_mask, after it, with the
 * project's mount (top) shared and the sandbox's view a slave of it, made
 * by a less privileged user namespace: each cover reaches the sandbox by
 * propagation, a locked pair (project_mask.c's cover_live), and is as
 * impossible to remove there as the first ones.  Linux 6.15 or later.
 *
 * _new watches every directory of the project (inotify: a name created,
 * or moved in) and covers what the first walk missed; its fd is readable
 * when names appeared, and _run then covers them (all of the project
 * again when the kernel dropped events).  Both fail (NULL, -1 with e) on
 * a cover that cannot be made or a directory that cannot be watched:
 * the caller must then end the sandbox, whose secrets are no longer
 * hidden.  A name is covered some time after it appears (an open in
 * between succeeds: pisb.yaml(5)).  top and srcdir are borrowed. */
struct pisb_project_watch;
/* Whether this kernel makes the locked pair (srcdir: as above). */
bool pisb_project_watch_supported(int srcdir);
struct pisb_project_watch *pisb_project_watch_new(int top, int srcdir,
						  const struct pisb_project_config *pc,
						  struct pisb_err *e);
int pisb_project_watch_fd(const struct pisb_project_watch *pw);
int pisb_project_watch_run(struct pisb_project_watch *pw, struct pisb_err *e);
/* _run as events come, until stop (an fd; -1: none) is readable: 0, or
 * -1 with e as _run. */
int pisb_project_watch_serve(struct pisb_project_watch *pw, int stop, struct pisb_err *e);
void pisb_project_watch_free(struct pisb_project_watch *pw);
/* A user namespace with these maps ("INSIDE OUTSIDE COUNT\n" lines, as
 * /proc/PID/uid_map takes them; setgroups denied), for an idmapped mount
 * (MOUNT_ATTR_IDMAP): its fd, or -1 (errno).  Needs the rights to write
 * such maps (root, for any map). */
int pisb_idmap_userns(const char *uid_map, const char *gid_map);

/* The project directory recorded for sandbox idir (caller frees), or NULL
 * with e (3: the sandbox has no project; 1: it is bound, nothing to apply). */
char *pisb_project_dir(int idir, struct pisb_err *e);

/* ---- diff ---- */

enum pisb_pstatus { PISB_P_ADDED = 'A', PISB_P_MODIFIED = 'M', PISB_P_DELETED = 'D' };

/* One changed path. */
struct pisb_pchange {
	char *path;               /* owned */
	char status;              /* enum pisb_pstatus */
	char otype, ntype;        /* 'f', 'l', 0 (absent) or 'o' (other: not copied) */
	unsigned omode, nmode;
	long long nsize;
	int64_t nmtime;
	char nsha[65];
	char *ntarget;            /* owned: the new symlink's target */
	struct pisb_buf content;  /* the new file's content (ntype 'f') */
	bool too_large;           /* larger than PISB_PROJECT_FILE_MAX: no content */
	bool binary;              /* old or new content has a NUL in its first 8000 bytes */
	bool conflict;            /* the host file changed since the base */
	struct pisb_buf base;     /* a conflict's base content (or link target),
				   * its SHA-256 the base's: see has_base */
	bool has_base;            /* base is known: patches start from it */
	struct pisb_pseen {       /* the host file as diff's check saw it
				   * (apply replaces it only while it is
				   * still that file, unchanged) */
		char type;        /* 'f', 'l', 'o' or 0 (absent) */
		dev_t dev;
		ino_t ino;
		long long size;
		int64_t mtime, ctime;
		unsigned mode;
	} hseen;
	int added, removed;       /* lines (text) */
};
struct pisb_pdiff {
	struct pisb_pchange *v;   /* sorted by path */
	size_t n, cap;
	char *dir;                /* owned: the host project */
	long long unchanged;
};
#define PISB_PDIFF_INIT { NULL, 0, 0, NULL, 0 }
void pisb_pdiff_release(struct pisb_pdiff *d);
#define _cleanup_pdiff_ __attribute__((cleanup(pisb_pdiff_release)))

struct pisb_pdiff_opts {
	char *const *paths;       /* only these (files or directories), or NULL */
	size_t npaths;
	bool all;                 /* also ignored files and .sandbox.yaml */
};
/* What changed in sandbox sb's workspace against its base. */
int pisb_project_diff(struct pisb_sandbox *sb, const struct pisb_pdiff_opts *o,
		      struct pisb_pdiff *d, struct pisb_err *e);
/* The unified diff of one change (git's format, 3 lines of context), into
 * out; the old side is the host file (the base while it is unchanged), or
 * for a conflict whose base content is known (has_base) the base.
 * The base of a conflict comes from the instance's store of bases that
 * apply and sync moved (project/objects/SHA256), else from the sandbox's
 * own git (its first commit, run inside, while it runs), and is used only
 * when its SHA-256 is the base's. */
int pisb_pchange_patch(const struct pisb_pdiff *d, const struct pisb_pchange *c,
		       struct pisb_buf *out, struct pisb_err *e);
/* A conflict with has_base: what the host changed since the base (old
 * side a/PATH the base, new side host/PATH the host file), into out;
 * nothing for any other change. */
int pisb_pchange_host_patch(const struct pisb_pdiff *d, const struct pisb_pchange *c,
			    struct pisb_buf *out, struct pisb_err *e);
/* --json: {"project","changes":[{"path","status","oldMode","newMode",
 * "oldType","newType","binary","conflict","added","removed","patch",
 * "hostPatch"}], "unchanged"} (patch and hostPatch only with patches;
 * hostPatch null unless a conflict with its base known). */
int pisb_pdiff_json(const struct pisb_pdiff *d, bool patches, struct pisb_jw *w,
		    struct pisb_err *e);

/* The patches (or, with stat, git's --stat lines and summary) into out. */
int pisb_pdiff_text(const struct pisb_pdiff *d, bool stat, struct pisb_buf *out,
		    struct pisb_err *e);

/* A unified diff of two texts (3 lines of context, git's hunk headers
 * with its default function-name lines); *added and *removed count lines. */
void pisb_udiff(const char *a, size_t an, const char *b, size_t bn, struct pisb_buf *out,
		int *added, int *removed);

/* ---- apply ---- */

struct pisb_apply_opts {
	char *const *paths;
	size_t npaths;
	bool dry_run, force;
};
struct pisb_apply_result {
	long long written, deleted, skipped;
};
/* Write the changes of sb's workspace into the host project, each file
 * atomically (temp file, rename), deletions included.  Everything is
 * checked before anything is written: a conflict (exit 4, unless force),
 * and again at each rename: the file it replaces (or deletes) must still
 * be the one the check saw (device, inode, size, mtime, ctime), and where
 * the check saw none, none may have come (else exit 4, all undone),
 * a name that would leave the project, a symlink on the way or pointing
 * out, a directory where a file goes or the reverse (exit 1) write
 * nothing.  All or nothing: every file is staged under a temp name in its
 * directory first, then all are renamed into place, the old versions
 * kept until the last rename; a failure anywhere undoes the rest (the
 * project as it was).  Then the base moves forward. */
int pisb_project_apply(struct pisb_sandbox *sb, const struct pisb_apply_opts *o,
		       struct pisb_pdiff *d, struct pisb_apply_result *r, struct pisb_err *e);

/* ---- sync ---- */

struct pisb_sync_result {
	long long written, deleted, based;   /* based: the same on both sides */
	struct pisb_strv conflicts;          /* changed on both sides, differently */
};
void pisb_sync_result_release(struct pisb_sync_result *r);
/* Bring the host project's changes since the base into the running
 * sandbox sb's workspace (three-way, per file): a file only the host
 * changed is written (or deleted) inside, with the sandbox's rights; one
 * both changed the same way only moves the base; one both changed
 * differently is a conflict, listed and left alone.  The base moves
 * forward for what was brought in.  Returns 0, 4 (PISB_EXIT_BUSY in e)
 * when conflicts remain, or -1. */
int pisb_project_sync(struct pisb_sandbox *sb, struct pisb_sync_result *r, struct pisb_err *e);

#endif
