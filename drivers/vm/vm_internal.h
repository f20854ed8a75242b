/* vm_internal.h - shared inside the vm driver (vm.c, vm_exec.c); not a
 * public interface. */
#ifndef PISB_VM_INTERNAL_H
#define PISB_VM_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct pisb_err;
struct pisb_buf;

/* A connection to one agent port: the socket, and port N's lock.
 * Everything read from the guest is hostile input: buf has a fixed size
 * (two whole frames), buf[off..have) are the bytes not yet framed, and
 * every byte is looked at a bounded number of times however the guest
 * mixes frames and noise (resync searches for the next magic, frames are
 * consumed by moving off, the unread tail is moved to the front at most
 * once per frame's worth of input). */
struct vm_conn {
	int fd;
	int lock;
	unsigned char *buf;
	size_t off, have, cap;
	uint64_t skipped;         /* noise bytes dropped while resyncing */
};
#define VM_CONN_INIT { -1, -1, NULL, 0, 0, 0, 0 }

/* Connect to agentN.sock holding agentN.lock.  port < 0: the first free
 * command port (1..PISB_VM_EXEC_PORTS), else wait for one.  wait_ms as
 * pisb_lock_acquire. */
/* A connection to the agent's port (its socket agentN.sock in idir, the
 * one QEMU's chardev listens on): the fd, or -1 with errno. */
int vm_agent_connect(int idir, int port);
/* port VM_PORT_SERVICE: the first free service port (PISB_VM_SVC_PORT..),
 * exit 4 when none is. */
#define VM_PORT_SERVICE (-2)
int vm_conn_open(int idir, int port, int wait_ms, struct vm_conn *c, struct pisb_err *e);
void vm_conn_close(struct vm_conn *c);
int vm_send(struct vm_conn *c, int type, uint32_t sid, const void *data, size_t len);
/* Read available bytes (one read); 1 data, 0 EOF, -1 error (errno). */
int vm_fill(struct vm_conn *c);
/* Next complete frame of session sid (others dropped): 1 and the frame
 * (payload points into c->buf, valid until vm_take), 0 none yet. */
int vm_next(struct vm_conn *c, uint32_t sid, int *type, const unsigned char **payload,
	    uint32_t *len);
void vm_take(struct vm_conn *c, uint32_t len);
/* True when a frame has begun (its magic is in) but is not complete. */
bool vm_partial(const struct vm_conn *c);
uint32_t vm_sid(void);

/* PING port 0 and wait for PONG: 0, or -1 (no agent yet). */
int vm_ping(int idir, int timeout_ms);
/* POWEROFF through port 0: 0 when the agent acknowledged. */
int vm_poweroff(int idir, int timeout_ms);
/* BOOT through port 0 to a guest restored from the boot snapshot (args:
 * "pisb.KEY=VALUE ..."), in two steps: the frame is sent while the VM is
 * still paused (it waits in QEMU's socket, then in the port, for the
 * guest to run), vm_boot_wait waits for the agent's PONG; both close c
 * on failure, vm_boot_wait always.  0, or -1. */
int vm_boot_send(int idir, const char *args, struct vm_conn *c, uint32_t *sid);
int vm_boot_wait(struct vm_conn *c, uint32_t sid, int timeout_ms);

/* Run argv in the guest: stdin from in_fd (-1: none), output to out_fd
 * and err_fd, signals forwarded when forward; *code the exit status. */
struct vm_run {
	char *const *argv;
	char *const *env;
	const char *cwd;
	int in_fd, out_fd, err_fd;
	bool forward;
	bool kill_on_usr2;        /* SIGUSR2 sends SIGKILL (exec handles) */
	int64_t deadline;         /* pisb_mono_ms(): SIGKILL then, exit 6; 0 none */
	bool winch;               /* on SIGWINCH, fd 0's terminal size goes to the
				   * guest (WINSZ: the command's pty, vm_proto.h) */
	bool service;             /* on a service port (vm_svc.c), never waits for one */
	const char *pid_file;     /* in the instance dir: the command's pid in the
				   * guest (STARTED), as the guest says it */
};
int vm_run(int idir, const struct vm_run *r, int *code, struct pisb_err *e);
/* The same with the output (type PISB_VM_STDOUT/STDERR) going to sink
 * instead of out_fd/err_fd; a sink that returns -1 (e filled) ends the
 * run: the command is killed and vm_run_sink fails with e. */
typedef int (*vm_sink_fn)(void *arg, int type, const void *p, size_t n, struct pisb_err *e);
int vm_run_sink(int idir, const struct vm_run *r, vm_sink_fn sink, void *arg, int *code,
		struct pisb_err *e);

struct pisb_state;
struct pisb_config;
struct pisb_exec_req;
struct pisb_strv;
/* A running vm sandbox: its instance dir fd and *cfg (both sb's,
 * borrowed); -1 with exit 5 when it is not running. */
struct pisb_sandbox;
int vm_open_running(struct pisb_sandbox *sb, const struct pisb_config **cfg, struct pisb_err *e);
/* The guest environment, argv and cwd of a request. */
void vm_build(const struct pisb_config *cfg, const struct pisb_exec_req *r, struct pisb_strv *env,
	      struct pisb_strv *argv, char **cwd);

/* vm_hooks.c.  Setup: setup[] lines, then <workspace>/.agents/setup when
 * executable, all within one 20-minute deadline (PISB_VM_SETUP_MS); the
 * first failure is kept in status.json's setupError; nothing they start
 * outlives them (the agent ends each command's process group).
 * Resume: the resume lines (each through /bin/sh -lc; a failing one is
 * logged, the next runs), then <workspace>/.agents/resume when
 * executable, as one script in a session of its own (what it leaves
 * running stays), run by a detached host-side runner; waits at most 10 s
 * for it: still running then, *bg is the runner (status.json's resume,
 * inspect's resumePid), else zero.  Output: setup.log (bounded, see
 * vm_hooks.c).  -1 only when the runner could not start. */
/* vm_template.c.  hold: template tname is a vm template with a disk the
 * size cfg asks for (an explicit diskGiB must match it: else 2), its
 * op.lock taken (wait_ms as pisb_lock_acquire): the lock's fd, or -1
 * (3: no such template).  overlay: disk.qcow2 in the staging dir sdir
 * (stg under the state), on the template's disk. */
int vm_template_hold(struct pisb_state *st, const char *tname, const struct pisb_config *cfg,
		     int wait_ms, struct pisb_err *e);
int vm_template_overlay(struct pisb_state *st, int sdir, const char *stg, const char *tname,
			const char *qemu_img, struct pisb_err *e);

/* vm_image.c.  image: PATH: the rootfs (image.h's cache: a tarball
 * unpacked as data by libarchive, or a directory) made once into a
 * read-only ext4 file images/KEY-0/root.ext4 with mke2fs, then linked into
 * the staging dir sdir as root.img (the guest's lower layer, read-only;
 * its writes go to the instance's own disk).  *cache: the cache's name
 * (the record's imageCache, so that gc keeps it; caller frees). */
int vm_image_root(struct pisb_state *st, int sdir, const char *image, const char *mke2fs,
		  char **cache, struct pisb_err *e);

struct pisb_proc_id;
/* look: look for the workspace's .agents/setup too (false: the
 * workspace is new and nothing in it can be one, see vm.c) */
void vm_run_setup(int idir, const struct pisb_config *cfg, bool look);
int vm_run_resume(int idir, const struct pisb_config *cfg, struct pisb_proc_id *bg,
		  struct pisb_err *e);

/* vm_project.c.  project.mode bind / bind-ro: the project served by a
 * virtiofsd of its own (tag PISB_PROJECT_TAG, socket VM_PROJECT_SOCK,
 * log VM_PROJECT_LOG, its view under <instance>/pview in its own mount
 * namespace), mounted by the agent at the workspace (pisb.proj=rw|ro).
 * The guest's root is the project's owner on the host (an idmapped
 * mount), so bind refuses a project owned by uid or gid 0. */
#define VM_PROJECT_SOCK "project.sock"
#define VM_PROJECT_LOG "project-virtiofsd.log"
struct vm_project {
	char *dir;                /* the host project, NULL: none bound */
	bool ro;
	unsigned uid, gid;        /* its owner, at boot */
};
void vm_project_release(struct vm_project *p);
/* create: checked, then project/info.json in the staging dir sdir. */
int vm_project_record(int sdir, const char *dir, const struct pisb_config *cfg, struct pisb_err *e);
/* boot: the project recorded for instance idir, checked again; p->dir
 * NULL when none. */
int vm_project_load(int idir, struct vm_project *p, struct pisb_err *e);
/* virtiofsd for p on the listening socket sock (the instance at path inst,
 * fd idir): its pid, or -1. */
struct pisb_project_config;
/* virtiofsd serving source on sock (the listening socket QEMU connects
 * to), its output in idir/log, killed with its parent; prep runs first in
 * the child (the share's mounts), its failure message on the log.  project:
 * a bound project's share (no device nodes, no file capabilities).  The
 * child's pid, or -1. */
pid_t vm_virtiofsd(const char *virtiofsd, int idir, const char *log, int sock, const char *source,
		   bool project, int (*prep)(void *arg, struct pisb_err *e), void *arg);
pid_t vm_project_virtiofsd(const char *virtiofsd, const char *inst, int idir, int sock,
			   const struct vm_project *p, const struct pisb_project_config *pc);
/* QEMU's arguments for the device (a cold boot; a restore hot-plugs it) */
void vm_project_qemu_args(struct pisb_strv *av, const char *bus);

#endif
