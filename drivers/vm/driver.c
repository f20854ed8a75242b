/* driver.c - the vm driver's table (driver.h): a QEMU virtual machine per
 * sandbox with our own guest agent. */
#include "driver.h"
#include "docker_inside.h"
#include "err.h"
#include "config.h"
#include "exec.h"
#include "fs_verbs.h"
#include "json.h"
#include "lifecycle.h"
#include "vm.h"
#include "vm_fs.h"

static int create(struct pisb_state *st, const struct pisb_config *cfg, const char *config_json,
		  struct pisb_lc_opts *o, struct pisb_err *e)
{
	return pisb_vm_create(st, cfg, config_json, o, e);
}

/* a template: setup run on a VM's disk, kept read-only; create
 * --template gives each copy a copy-on-write overlay on it */
static int prepare(struct pisb_state *st, const struct pisb_config *cfg, const char *config_json,
		   struct pisb_lc_opts *o, struct pisb_err *e)
{
	return pisb_vm_create(st, cfg, config_json, o, e);
}

static int destroy_template(struct pisb_sandbox *sb, const struct pisb_lc_opts *o, struct pisb_err *e)
{
	return pisb_vm_destroy_template(sb, o, e);
}

static int start(struct pisb_sandbox *sb, const struct pisb_lc_opts *o, struct pisb_err *e)
{
	return pisb_vm_start(sb, o, e);
}

static int stop(struct pisb_sandbox *sb, const struct pisb_lc_opts *o, struct pisb_err *e)
{
	return pisb_lifecycle_end(sb, o, false, pisb_vm_end, e);
}

static int destroy(struct pisb_sandbox *sb, const struct pisb_lc_opts *o, struct pisb_err *e)
{
	return pisb_lifecycle_end(sb, o, true, pisb_vm_end, e);
}

/* the session's end: remove, unless release --policy says otherwise */
static int release(struct pisb_sandbox *sb, const struct pisb_lc_opts *o, struct pisb_err *e)
{
	return pisb_lifecycle_release_as(sb, o, pisb_lc_policy(o, PISB_POLICY_KILL), e);
}

/* A vm sandbox that booted without KVM says so (also in inspect: vm.accelNote). */
static char *start_note(struct pisb_sandbox *sb)
{
	return pisb_vm_accel_note(sb->st, sb->name);
}

static enum pisb_status status(struct pisb_sandbox *sb)
{
	struct pisb_err ig = PISB_ERR_INIT;
	const struct pisb_runtime *rt = pisb_sandbox_runtime(sb, &ig);

	return rt ? pisb_vm_status(sb->idir, rt) : PISB_ST_STOPPED;
}

static void describe(struct pisb_sandbox *sb, const struct pisb_config *cfg, struct pisb_jw *w)
{
	(void)sb;
	pisb_jw_kstr(w, "image", cfg->image);
	pisb_jw_kstr(w, "workspace", cfg->workspace);
}

/* the VM's size is the limit; pids are the guest kernel's business */
static void limits(struct pisb_sandbox *sb, const struct pisb_config *cfg, bool running,
		   struct pisb_jw *w)
{
	(void)sb;
	pisb_jw_key(w, "limits");
	pisb_jw_obj(w);
	pisb_jw_kint(w, "cpus", cfg->cpus);
	pisb_jw_kint(w, "memoryGiB", cfg->memory_gib);
	pisb_jw_kint(w, "pids", cfg->pids);
	pisb_jw_kint(w, "diskGiB", cfg->disk_gib);
	pisb_jw_key(w, "enforced");
	pisb_jw_obj(w);
	pisb_jw_kbool(w, "cpus", running);
	pisb_jw_kbool(w, "memory", running);
	pisb_jw_kbool(w, "pids", running);
	pisb_jw_kbool(w, "disk", true);
	pisb_jw_obj_end(w);
	pisb_jw_kstr(w, "note", "the VM's vCPUs, memory and disk image size are the limits; pids is the guest's cgroup pids.max over every command");
	pisb_jw_obj_end(w);
}

static int exec_attached(struct pisb_sandbox *sb, const struct pisb_exec_req *r, int *code,
			 struct pisb_err *e)
{
	return pisb_vm_exec_attached(sb, r, code, e);
}

static int exec_handle(struct pisb_sandbox *sb, const struct pisb_exec_req *r, struct pisb_jw *w,
		       int *code, bool *running, struct pisb_err *e)
{
	return pisb_vm_exec_handle(sb, r, w, code, running, e);
}

static int exec_status(struct pisb_sandbox *sb, const char *handle, int timeout_ms,
		       struct pisb_jw *w, int *code, bool *running, struct pisb_err *e)
{
	return pisb_vm_exec_status(sb, handle, timeout_ms, w, code, running, e);
}

static int exec_kill(struct pisb_sandbox *sb, const char *handle, struct pisb_jw *w, int *code,
		     struct pisb_err *e)
{
	return pisb_vm_exec_kill(sb, handle, w, code, e);
}

/* services and previews: a request to the VM's relay (vm_net.h), which
 * supervises them with the local driver's code, on control.sock as the
 * local controller's */
static int svc(struct pisb_sandbox *sb, const char *req, struct pisb_buf *reply, int timeout_ms,
		   struct pisb_err *e)
{
	return pisb_control_call(sb->idir, req, reply, timeout_ms, e);
}

/* logs: the output of setup and the resume hooks; logs NAME SERVICE: the
 * service's log, written by the relay (logs/SERVICE.log, as local's) */
static const struct pisb_fs_how fs_how = { "setup.log", true, NULL, NULL };

static const struct pisb_refusal refusals[] = {
	{ PISB_V_CONNECT, "connect attaches a sandbox that already runs elsewhere (opensandbox.sandboxId)" },
	{ PISB_V_RENEW, "a vm sandbox does not expire" },
	{ PISB_V_POOL, "not built for the vm driver yet: its creates boot a VM each (a spare would be a VM kept booted)" },
	{ 0, NULL },
};

const struct pisb_driver pisb_driver_vm = {
	.name = "vm",
	.summary = "a QEMU virtual machine per sandbox with pisb's guest agent (KVM, else TCG)",
	.caps = PISB_DRV_TEMPLATES | PISB_DRV_GC_SWEEP | PISB_DRV_PROJECT_BIND | PISB_DRV_DOCKER_OPT |
		PISB_DRV_OWN_KERNEL,
	.refusals = refusals,
	.fs_how = &fs_how,
	.doctor = pisb_vm_doctor,
	.verify = pisb_vm_verify,
	.create = create,
	.prepare = prepare,
	.start = start,
	.stop = stop,
	.destroy = destroy,
	.release = release,
	.destroy_template = destroy_template,
	.start_note = start_note,
	.status = status,
	.describe = describe,
	.limits = limits,
	.extra_key = "vm",
	.exec = exec_attached,
	.exec_handle = exec_handle,
	.exec_status = exec_status,
	.exec_kill = exec_kill,
	.shell = pisb_vm_shell,
	.read_text = pisb_vm_fs_read_text,
	.read_raw = pisb_vm_fs_read_raw,
	.write = pisb_vm_fs_write,
	.edit = pisb_vm_fs_edit,
	.ls = pisb_vm_fs_ls,
	.stat = pisb_vm_fs_stat,
	.mkdir = pisb_vm_fs_mkdir,
	.find = pisb_vm_fs_find,
	.grep = pisb_vm_fs_grep,
	.logs = pisb_fsv_logs,
	.push = pisb_vm_fs_push,
	.pull = pisb_vm_fs_pull,
	.project_archive = pisb_vm_fs_project_archive,
	.svc = svc,
	.preview = svc,
	.docker = pisb_docker_inside,
};
