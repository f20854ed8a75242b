/* pool.c - spare sandboxes booted ahead of their creates (pool.h). */
#include "pool.h"
#include "cgroup.h"
#include "config.h"
#include "err.h"
#include "gc.h"
#include "instance.h"
#include "json.h"
#include "lifecycle.h"
#include "local.h"
#include "lock.h"
#include "ns.h"
#include "proc.h"
#include "state.h"
#include "util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

/* how long a claim waits for the spare's answer, and a retirement for
 * its controller to go */
#define CLAIM_WAIT_MS 2000
#define RETIRE_WAIT_MS 10000

static bool spare_name(const char *n)
{
	return pisb_str_starts(n, "spare-") && pisb_name_valid(n);
}

/* The key of spare pool/NAME, into key (17 bytes); false if it has none. */
static bool spare_key(int pool, const char *name, char key[17])
{
	_cleanup_free_ char *p = xasprintf("%s/pool.key", name);
	_cleanup_buf_ struct pisb_buf b = PISB_BUF_INIT;

	if (pisb_read_file_at(pool, p, &b, 64) < 0 || !b.s || b.len != 16)
		return false;
	memcpy(key, b.s, 16);
	key[16] = '\0';
	return true;
}


/* Wait (at most wait_ms) until the controller of idir is gone: its lock
 * free.  0, or -1. */
static int controller_gone(int idir, int wait_ms)
{
	struct pisb_err ig = PISB_ERR_INIT;
	int l = pisb_lock_acquire(idir, "controller.lock", true, wait_ms, "the spare's controller", &ig);

	if (l < 0)
		return -1;
	close(l);
	return 0;
}

/* Remove spare pool/NAME, whose controller is gone: what a run left (its
 * cgroup), its directory, its host id range. */
static void spare_remove(struct pisb_state *st, const char *dir, const char *name)
{
	_cleanup_free_ char *path = xasprintf("%s/%s", dir, name);
	_cleanup_close_ int idir = openat(st->fd, path, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	struct pisb_err ig = PISB_ERR_INIT;
	struct pisb_runtime rt;
	struct pisb_record rec;
	uid_t base = 0;

	if (idir < 0)
		return;
	if (pisb_runtime_load(idir, &rt, &ig) == 0) {
		pisb_cgroup_remove(rt.cgroup);
		pisb_runtime_release(&rt);
	}
	if (pisb_record_load(idir, &rec, &ig) == 0) {
		base = rec.uid_base;
		pisb_record_release(&rec);
	}
	/* its refill may not have exited yet: the entry goes all the same */
	if (pisb_state_trash(st, dir, name, &ig) == 0 && base)
		pisb_ids_free_owned(st, base, name);
}

/* Retire spare pool/NAME: its controller stops the sandbox and leaves;
 * then it is removed. */
static void spare_retire(struct pisb_state *st, int pool, const char *name)
{
	_cleanup_close_ int idir = openat(pool, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	int fd = idir < 0 ? -1 : pisb_unix_connect_at(idir, "claim.sock");

	if (fd >= 0) {
		char c;
		struct pollfd p = { fd, POLLIN, 0 };
		if (send(fd, "x\n", 2, MSG_NOSIGNAL) == 2)
			/* its end of the socket: the controller is stopping */
			(void)(poll(&p, 1, RETIRE_WAIT_MS) > 0 && read(fd, &c, 1));
		close(fd);
	}
	if (idir >= 0 && controller_gone(idir, RETIRE_WAIT_MS) == 0)
		spare_remove(st, "pool", name);
}

/* The spares of pool (key: only those of that key; NULL: all) into v;
 * those whose controller is gone are removed (and reported into r, when
 * given; dry_run: only reported). */
static void spares_gc(struct pisb_state *st, int pool, const char *key, struct pisb_strv *v,
		      bool dry_run, struct pisb_gc_report *r)
{
	_cleanup_close_ int dfd = openat(pool, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = dfd < 0 ? NULL : fdopendir(dfd);
	struct dirent *de;
	_cleanup_strv_ struct pisb_strv all = PISB_STRV_INIT;

	if (!d)
		return;
	dfd = -1;
	while ((de = readdir(d)))
		if (spare_name(de->d_name))
			pisb_strv_push(&all, de->d_name);
	closedir(d);
	for (size_t i = 0; i < all.n; i++) {
		_cleanup_close_ int idir = openat(pool, all.v[i], O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		char k[17];

		if (idir < 0)
			continue;
		if (!pisb_lock_is_held(idir, "controller.lock")) {
			_cleanup_free_ char *what = xasprintf("pool/%s", all.v[i]);
			if (!dry_run)
				spare_remove(st, "pool", all.v[i]);
			if (r)
				pisb_gc_report_add(&r->cleaned, "spare", what,
						   "a spare of the pool whose controller is gone (a reboot, a kill)");
			continue;
		}
		if (!key || (spare_key(pool, all.v[i], k) && !strcmp(k, key)))
			pisb_strv_push(v, all.v[i]);
	}
}

static void spares(struct pisb_state *st, int pool, const char *key, struct pisb_strv *v)
{
	spares_gc(st, pool, key, v, false, NULL);
}

void pisb_pool_gc(struct pisb_state *st, bool dry_run, struct pisb_gc_report *r)
{
	_cleanup_close_ int pool = openat(st->fd, "pool", O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	_cleanup_strv_ struct pisb_strv live = PISB_STRV_INIT;

	if (pool >= 0)
		spares_gc(st, pool, NULL, &live, dry_run, r);
}

void pisb_pool_refill(struct pisb_state *st, const char *key)
{
	char bin[4096];
	_cleanup_free_ char *f = xasprintf("%s/pool/%s.yaml", st->path, key);
	char *argv[] = { bin, "pool", "--refill", "-f", f, "--state-dir", st->path, "-q", NULL };
	struct pisb_err ig = PISB_ERR_INIT;
	_cleanup_close_ int log = -1;

	/* pisb, which serves it itself (cmd/pisb_serve.c): the spares'
	 * controllers are its, as a create's (local.c spawn_controller) */
	if (pisb_find_binary("pisb", bin, sizeof(bin), &ig) < 0)
		return;
	{
		_cleanup_free_ char *lp = xasprintf("pool/%s.log", key);
		log = openat(st->fd, lp, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0600);
	}
	{
		/* its marks are not this create's (a PISB_TRACE file is one
		 * command's phases), nor its stops */
		static const char *const vars[] = { "PISB_TRACE", "PISB_TRACE_STOP" };
		char *was[2];
		for (int i = 0; i < 2; i++) {
			was[i] = getenv(vars[i]) ? xstrdup(getenv(vars[i])) : NULL;
			unsetenv(vars[i]);
		}
		pisb_spawn_detached(argv, log, -1, &ig);
		for (int i = 0; i < 2; i++) {
			if (was[i])
				setenv(vars[i], was[i], 1);
			free(was[i]);
		}
	}
}

/* Take spare pool/SNAME for create o: 1 done, 0 not ours after all (it
 * went, or another create took it), -1 with e (nothing of it is left). */
static int claim_one(struct pisb_state *st, int pool, const char *sname, const char *key,
		     const struct pisb_create_opts *o, char **setup_error, struct pisb_err *e)
{
	_cleanup_close_ int idir = openat(pool, sname, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	_cleanup_free_ char *dest = xasprintf("instances/%s", o->name);
	_cleanup_free_ char *from = xasprintf("pool/%s", sname);
	_cleanup_free_ char *msg = xasprintf("c%s\n", o->name);
	struct pisb_record rec;
	struct pisb_runtime rt;
	struct pollfd p;
	bool published = false, have_rec = false;
	pid_t ctl = 0;
	int fd, ret = -1;
	char c = 0;

	if (idir < 0 || (fd = pisb_unix_connect_at(idir, "claim.sock")) < 0)
		return 0;
	p = (struct pollfd){ fd, POLLIN, 0 };
	if (pisb_write_all(fd, msg, strlen(msg)) < 0 || poll(&p, 1, CLAIM_WAIT_MS) <= 0 ||
	    read(fd, &c, 1) != 1 || c != 'k') {
		close(fd);
		return 0;   /* taken by another create, or going */
	}
	pisb_trace("create: spare claimed");
	/* ours: the sandbox NAME from here on */
	if (pisb_runtime_load(idir, &rt, e) < 0)
		goto fail;
	ctl = rt.controller.pid;
	pisb_runtime_release(&rt);
	if (pisb_record_load(idir, &rec, e) < 0)
		goto fail;
	have_rec = true;
	free(rec.name);
	rec.name = xstrdup(o->name);
	rec.created_at = pisb_now_ms() / 1000;
	rec.owner.pid = o->owner_pid;
	rec.owner.start = o->owner_pid > 0 ? pisb_proc_start(o->owner_pid) : 0;
	free(rec.session_id);
	rec.session_id = o->session_id ? xstrdup(o->session_id) : NULL;
	/* the record, then the rename that publishes it: in that order in
	 * the journal, and durable (one commit) before the controller begins.
	 * Its host id range's entry still names the spare: the instance's
	 * record claims it (ns.c), and the controller renames the entry */
	pisb_sync_defer();
	if (pisb_record_save(idir, &rec, e) < 0) {
		pisb_sync_discard();
		goto fail;
	}
	if (renameat2(st->fd, from, st->fd, dest, RENAME_NOREPLACE) < 0) {
		pisb_sync_discard();
		if (errno == EEXIST)
			pisb_err_set(e, PISB_EXIT_BUSY, "sandbox '%s' already exists", o->name);
		else
			pisb_err_sys(e, PISB_EXIT_FAIL, "publish the spare '%s' as '%s'", sname, o->name);
		goto fail;
	}
	published = true;
	pisb_trace("create: spare published");
	/* durable before the controller begins: what it writes then in the
	 * directory would take a second journal commit to the flush */
	if (pisb_sync_flush() < 0 || pisb_fsync_parent(st->fd, dest) < 0 || pisb_fsync_parent(st->fd, from) < 0) {
		pisb_sync_discard();
		pisb_err_sys(e, PISB_EXIT_FAIL, "sync the record of '%s'", o->name);
		goto fail;
	}
	pisb_sync_discard();
	pisb_trace("create: spare's record synced");
	if (send(fd, "g", 1, MSG_NOSIGNAL) != 1) {
		pisb_err_set(e, PISB_EXIT_FAIL, "sandbox '%s' failed to start: its controller exited (see 'pisb logs')", o->name);
		goto fail;
	}
	if (pisb_local_wait_controller(idir, o->name, "running", ctl, fd, e) < 0)
		goto fail;
	close(fd);
	fd = -1;
	if (pisb_runtime_load(idir, &rt, e) < 0)
		goto fail;
	if (rt.setup_error)
		*setup_error = xstrdup(rt.setup_error);
	pisb_runtime_release(&rt);
	pisb_record_release(&rec);
	return 1;
fail:
	/* its end of the socket before the word: the controller stops the
	 * sandbox and leaves; then nothing of it stays */
	if (fd >= 0)
		close(fd);
	controller_gone(idir, RETIRE_WAIT_MS);
	if (published)
		spare_remove(st, "instances", o->name);
	else
		spare_remove(st, "pool", sname);
	if (have_rec)
		pisb_record_release(&rec);
	/* a spare less: its replacement (a claimed one's comes from its
	 * controller, once the sandbox has run a while) */
	pisb_pool_refill(st, key);
	return ret;
}

int pisb_pool_claim(struct pisb_state *st, const char *config_json,
		    const struct pisb_create_opts *o, char **setup_error, struct pisb_err *e)
{
	_cleanup_close_ int pool = openat(st->fd, "pool", O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	DIR *d;
	struct dirent *de;
	char key[17];
	int r = 0;

	if (pool < 0)
		return 0;   /* no pool: most creates stop here */
	pisb_config_key(config_json, o->config_text, o->config_len, key);
	{
		_cleanup_free_ char *conf = xasprintf("%s.conf", key);
		if (faccessat(pool, conf, F_OK, 0) < 0)
			return 0;
	}
	{
		_cleanup_free_ char *dest = xasprintf("instances/%s", o->name);
		if (faccessat(st->fd, dest, F_OK, AT_SYMLINK_NOFOLLOW) == 0)
			return 0;   /* the create says it exists */
	}
	d = fdopendir(dup(pool));
	if (!d)
		return 0;
	while (r == 0 && (de = readdir(d))) {
		char k[17];
		if (!spare_name(de->d_name) || !spare_key(pool, de->d_name, k) || strcmp(k, key))
			continue;
		r = claim_one(st, pool, de->d_name, key, o, setup_error, e);
	}
	closedir(d);
	/* none to take: the pool is being refilled (its lock is held), or
	 * its spares are gone (a reboot): a refill, which makes none when the
	 * pool is full */
	if (r == 0) {
		_cleanup_free_ char *lockp = xasprintf("%s.lock", key);
		if (!pisb_lock_is_held(pool, lockp))
			pisb_pool_refill(st, key);
	}
	return r;
}

/* pool/KEY.conf: N, then the file (empty line for the default config) */
static int conf_read(int pool, const char *key, int *n, char **file)
{
	_cleanup_free_ char *p = xasprintf("%s.conf", key);
	_cleanup_buf_ struct pisb_buf b = PISB_BUF_INIT;
	char *nl;

	*n = 0;
	if (file)
		*file = NULL;
	if (pisb_read_file_at(pool, p, &b, 8192) < 0 || !b.s)
		return -1;
	*n = atoi(b.s);
	nl = strchr(b.s, '\n');
	if (file && nl && nl[1] && nl[1] != '\n')
		*file = xstrndup(nl + 1, strcspn(nl + 1, "\n"));
	return 0;
}

/* End the pool of key: its conf and text gone (a replacement then makes
 * nothing), its spares retired. */
static int pool_end(struct pisb_state *st, int pool, const char *key, struct pisb_err *e)
{
	_cleanup_free_ char *lockp = xasprintf("%s.lock", key), *confp = xasprintf("%s.conf", key);
	_cleanup_free_ char *yamlp = xasprintf("%s.yaml", key);
	_cleanup_strv_ struct pisb_strv have = PISB_STRV_INIT;
	_cleanup_close_ int lock = pisb_lock_acquire(pool, lockp, true, 120000, "the pool", e);

	if (lock < 0)
		return -1;
	unlinkat(pool, confp, 0);
	unlinkat(pool, yamlp, 0);
	spares(st, pool, key, &have);
	for (size_t i = 0; i < have.n; i++)
		spare_retire(st, pool, have.v[i]);
	return 0;
}

/* The pools of file (NULL: the default config) under a key other than
 * key: the file was edited since (or pisb's default changed), and no
 * create will match them again.  Ended. */
static int pools_of_file_end(struct pisb_state *st, int pool, const char *key, const char *file,
			     struct pisb_err *e)
{
	_cleanup_strv_ struct pisb_strv old = PISB_STRV_INIT;
	DIR *d = fdopendir(dup(pool));
	struct dirent *de;

	if (!d)
		return 0;
	while ((de = readdir(d))) {
		_cleanup_free_ char *f = NULL;
		char k[17];
		int n;
		if (strlen(de->d_name) != 21 || strcmp(de->d_name + 16, ".conf") || !strncmp(de->d_name, key, 16))
			continue;
		snprintf(k, sizeof(k), "%.16s", de->d_name);
		if (conf_read(pool, k, &n, &f) == 0 && (file ? f && !strcmp(f, file) : !f))
			pisb_strv_push(&old, k);
	}
	closedir(d);
	for (size_t i = 0; i < old.n; i++)
		if (pool_end(st, pool, old.v[i], e) < 0)
			return -1;
	return 0;
}

int pisb_pool_set(struct pisb_state *st, const struct pisb_config *cfg, const char *config_json,
		  const char *text, size_t len, const char *file, int n, struct pisb_err *e)
{
	_cleanup_close_ int pool = -1, lock = -1;
	_cleanup_strv_ struct pisb_strv have = PISB_STRV_INIT;
	_cleanup_free_ char *lockp = NULL, *confp = NULL, *yamlp = NULL;
	char key[17];

	pisb_config_key(config_json, text, len, key);
	if (pisb_mkdirs_at(st->fd, "pool", 0700, e) < 0)
		return -1;
	pool = openat(st->fd, "pool", O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	if (pool < 0)
		return pisb_err_sys(e, PISB_EXIT_FAIL, "open '%s/pool'", st->path);
	/* asked for by a user (not a replacement): the pools this file had
	 * before it was edited go */
	if (n >= 0 && pools_of_file_end(st, pool, key, file, e) < 0)
		return -1;
	if (n == 0)
		return pool_end(st, pool, key, e);
	lockp = xasprintf("%s.lock", key);
	confp = xasprintf("%s.conf", key);
	yamlp = xasprintf("%s.yaml", key);
	/* one filler at a time per config: a replacement waits for the one
	 * before it (each counts what the other made) */
	lock = pisb_lock_acquire(pool, lockp, true, 120000, "the pool", e);
	if (lock < 0)
		return -1;
	if (n < 0) {
		/* a replacement: as many as the pool asks, if there still is one */
		if (conf_read(pool, key, &n, NULL) < 0)
			return 0;
	} else {
		_cleanup_free_ char *conf = xasprintf("%d\n%s\n", n, file ? file : "");
		if (pisb_atomic_write(pool, yamlp, text ? text : "", text ? len : 0, 0600, e) < 0 ||
		    pisb_atomic_write(pool, confp, conf, strlen(conf), 0600, e) < 0)
			return -1;
	}
	spares(st, pool, key, &have);
	/* too many: the newest go (readdir's order: any) */
	for (size_t i = (size_t)n; i < have.n; i++)
		spare_retire(st, pool, have.v[i]);
	for (size_t i = have.n; i < (size_t)n; i++) {
		char hex[17];
		_cleanup_free_ char *name = NULL;
		struct pisb_create_opts co;
		char *setup_error = NULL;

		pisb_random_hex(hex, 16);
		name = xasprintf("spare-%s", hex);
		memset(&co, 0, sizeof(co));
		co.name = name;
		co.config_text = text;
		co.config_len = len;
		co.spare_key = key;
		if (pisb_local_create(st, cfg, config_json, &co, &setup_error, e) < 0)
			return -1;
		free(setup_error);
	}
	return 0;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

void pisb_pool_list(struct pisb_state *st, struct pisb_jw *w)
{
	_cleanup_close_ int pool = openat(st->fd, "pool", O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	_cleanup_strv_ struct pisb_strv keys = PISB_STRV_INIT, live = PISB_STRV_INIT;
	DIR *d;
	struct dirent *de;

	if (pool < 0)
		return;
	d = fdopendir(dup(pool));
	if (!d)
		return;
	while ((de = readdir(d))) {
		size_t l = strlen(de->d_name);
		if (l == 21 && !strcmp(de->d_name + 16, ".conf"))
			pisb_strv_pushf(&keys, "%.16s", de->d_name);
	}
	closedir(d);
	if (keys.n)
		qsort(keys.v, keys.n, sizeof(*keys.v), cmp_str);
	/* spares of a pool that ended (pisb pool 0 interrupted) go too */
	spares(st, pool, NULL, &live);
	for (size_t i = 0; i < live.n; i++) {
		char k[17];
		bool known = false;
		if (spare_key(pool, live.v[i], k))
			for (size_t j = 0; j < keys.n && !known; j++)
				known = !strcmp(keys.v[j], k);
		if (!known)
			spare_retire(st, pool, live.v[i]);
	}
	for (size_t i = 0; i < keys.n; i++) {
		_cleanup_strv_ struct pisb_strv have = PISB_STRV_INIT;
		_cleanup_free_ char *file = NULL;
		int n = 0;

		conf_read(pool, keys.v[i], &n, &file);
		spares(st, pool, keys.v[i], &have);
		pisb_jw_obj(w);
		pisb_jw_kstr(w, "key", keys.v[i]);
		pisb_jw_kstr(w, "driver", "local");
		pisb_jw_kint(w, "spares", n);
		pisb_jw_kint(w, "ready", (long long)have.n);
		pisb_jw_kstr(w, "file", file);
		pisb_jw_obj_end(w);
	}
}
