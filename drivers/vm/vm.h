/* vm.h - the vm driver: a QEMU virtual machine per sandbox, with our own
 * guest agent (agent/pisb-agent.c) on virtio-serial ports.
 *
 * Assets, found at every boot (nothing is downloaded by pisb itself):
 *   kernel   $PISB_VM_KERNEL (modules: $PISB_VM_MODULES, else the
 *            lib/modules/VER beside its boot/ dir, else /lib/modules/VER),
 *            else /boot/vmlinuz-$(uname -r) with /lib/modules/$(uname -r),
 *            else the newest boot/vmlinuz-VER in a kernel cache:
 *            $PISB_VM_CACHE, $XDG_CACHE_HOME/pisb/vm, ~/.cache/pisb/vm,
 *            /var/cache/pisb/vm (`make vm-kernel` fills one from Debian's
 *            linux-image-cloud-amd64 package, extracted, not installed)
 *   qemu     $PISB_VM_QEMU, else qemu-system-x86_64 on PATH
 *   agent    pisb-agent beside the pisb binaries (static)
 *   virtiofsd $PISB_VM_VIRTIOFSD, else /usr/lib/qemu/virtiofsd (root only)
 *   mke2fs   for the disk, at create
 *   qemu-img for the disk of a template's copy (create --template)
 *
 * Files in instances/NAME/ (besides record.json, status.json, op.lock;
 * a template, templates/NAME/, keeps only disk.img, record.json and
 * setup.log):
 *   disk.img         a sparse raw ext4 image of diskGiB, made at create
 *                    (mke2fs -d): upper/ and work/ of the guest's overlay
 *                    root, upper/<workspace>/.sandbox.yaml; or, for a
 *                    template's copy, disk.qcow2 (vm_template.c)
 *   initrd.cpio      the initramfs, rebuilt at every start (agent,
 *                    modules)
 *   virtiofs.sock    (0600) virtiofsd's vhost-user socket; share/ the
 *                    mount point of its read-only view of the host's
 *                    /usr /bin /lib* /sbin /etc (secrets masked), in
 *                    virtiofsd's own mount namespace; virtiofsd.log
 *   project.sock     (0600) with project.mode bind/bind-ro: the
 *                    project's virtiofsd socket; pview/ the mount point
 *                    of its view (vm_project.c), in that virtiofsd's own
 *                    mount namespace; project-virtiofsd.log
 *   controller.lock  held by the host-side supervisor (and QEMU) while
 *                    the VM lives: running = held
 *   agentN.sock      (0600) host ends of the virtio-serial ports, N 0..9:
 *                    0 lifecycle (ping, poweroff), 1..4 one command each,
 *                    5 the net port (previews' and checks' streams,
 *                    vm_mux.h), 6..9 one service's command each
 *   control.sock, services.json, logs/, net.log  the relay (services
 *                    and previews), a child of the supervisor while the
 *                    VM runs (vm_net.h)
 *   agentN.lock      held by the pisb process using port N
 *   console.log      the guest's serial console;  qemu.log  QEMU's stderr
 *   qmp.sock         (0600) QEMU's QMP socket (used by a restore)
 *   setup.log        output of setup[] at create and of the resume
 *                    hooks at every later boot, bounded (vm_hooks.c:
 *                    setup.log.1 the one before)
 *   exec/vm-XXXXXXXX/ exec handles (vm_handle.c)
 *
 * status.json: state starting|running|stopping|stopped (a VM that died
 * otherwise shows "interrupted"); controller = the supervisor, init = QEMU;
 * extra (inspect: "vm") {"accel","machine","accelNote","boot","bootNote",
 * "kernel","qemu","memoryMiB","cpus"}; boot "snapshot" or "cold".
 *
 * The boot snapshot (vm.c, <state>/vmsnap/): a template VM booted to the
 * agent's stage 1 with no share and a placeholder behind its disk's
 * device, saved once per (kernel, initramfs, QEMU binary, memory, vCPUs,
 * accelerator) and restored by every boot with the instance's disk behind
 * that device (resized to its size), the shares then hot-plugged (q35:
 * PCIe root ports, the third for a bound project's share).  Any failure boots cold with a note; PISB_VM_SNAPSHOT=0
 * turns it off.
 *
 * The machine is q35 (PCI virtio devices) with KVM and under TCG;
 * PISB_VM_MACHINE=microvm asks for microvm (virtio-mmio), untested.
 * There is no network device: the guest has loopback only; previews reach
 * its 127.0.0.1 through the net port (vm_net.h).
 */
#ifndef PISB_VM_H
#define PISB_VM_H

#include <stdbool.h>

#include "instance.h"

struct pisb_err;
struct pisb_state;
struct pisb_config;
struct pisb_lc_opts;
struct pisb_exec_req;


/* create: refuse what a VM without a network device cannot do yet
 * (services) and what the host
 * cannot honour (more vCPUs or memory than it has: exit 2), find the
 * assets, make the disk, publish the instance, boot, run setup[] and
 * .agents/setup within 20 minutes (a failure is kept in setupError),
 * "ready" event and --on-ready.  Any failure before ready removes the
 * instance.
 * prepare (o->prepare) is the same under staging/NAME.prep, then (setup
 * passed) a clean poweroff and the disk published read-only as
 * templates/NAME.  create --template: the disk a qcow2 overlay on the
 * template's (vm_template.c), the config written into the running
 * guest, the resume hooks instead of setup.  The create and prepare
 * slots. */
int pisb_vm_create(struct pisb_state *st, const struct pisb_config *cfg,
		   const char *config_json, const struct pisb_lc_opts *o,
		   struct pisb_err *e);
/* destroy --template: refused (4) while a sandbox's disk is an overlay
 * on it. */
struct pisb_sandbox;
int pisb_vm_destroy_template(struct pisb_sandbox *sb, const struct pisb_lc_opts *o,
			     struct pisb_err *e);
/* start: boot again from the disk (no-op when running), then the resume
 * hooks (vm_hooks.c). */
int pisb_vm_start(struct pisb_sandbox *sb, const struct pisb_lc_opts *o, struct pisb_err *e);
/* stop and destroy, as lifecycle.h's pisb_lifecycle_end runs them: stop:
 * the agent syncs and powers off; QEMU is killed if it has not exited
 * after PISB_VM_STOP_MS (default 20000).  destroy: QEMU killed if running
 * (the core then removes the instance). */
struct pisb_ready;
int pisb_vm_end(struct pisb_sandbox *sb, const struct pisb_lc_opts *o, bool destroy,
		struct pisb_ready *ev, struct pisb_err *e);

/* For list and inspect: the lock, then status.json's state. */
enum pisb_status pisb_vm_status(int idir, const struct pisb_runtime *rt);
/* The accelerator note of the last boot ("KVM is not usable ...: TCG"),
 * or NULL when KVM was used (caller frees). */
char *pisb_vm_accel_note(struct pisb_state *st, const char *name);
/* /dev/kvm is PVM (module kvm_pvm loaded, no vmx/svm in the CPU flags):
 * it boots only guest kernels built with CONFIG_PVM_GUEST, so the driver
 * runs a stock kernel under TCG at once (doctor's kvm check says so). */
bool pisb_vm_kvm_is_pvm(void);
/* vm_doctor.c: the driver's doctor slot */
struct pisb_doctor;
void pisb_vm_doctor(struct pisb_doctor *d);
/* pisb verify (vm_verify.c): host canaries (files, env) unseen in the
 * guest, no NIC but lo, the host's userland share read-only; driver.h's
 * verify slot */
int pisb_vm_verify(struct pisb_sandbox *sb, bool json, struct pisb_buf *out, struct pisb_err *e);

/* exec attached through the agent: argv (or /bin/sh -lc STRING), cwd
 * (relative: under the workspace; default the workspace), env (PATH,
 * HOME, TERM, the config's env, r->env), stdio streamed, SIGINT SIGTERM
 * SIGHUP SIGQUIT sent to the command's process group in the guest;
 * *code its status (128+N for a signal, 127 not found, 126 cannot run).
 * A sandbox that is not running, or an agent that goes away: -1, exit 5. */
int pisb_vm_exec_attached(struct pisb_sandbox *sb, const struct pisb_exec_req *r,
			  int *code, struct pisb_err *e);
/* Handles (exec --timeout-ms, exec-status, exec-kill): the contract and
 * JSON of exec.h.  A handle "vm-XXXXXXXX" is a host-side supervisor that
 * runs the command through the agent (stdin empty, output merged into
 * instances/NAME/exec/HANDLE/); kill: SIGTERM to the command's process
 * group in the guest, SIGKILL after 2 s.  Each running handle holds one
 * of the agent's 4 command ports. */
struct pisb_jw;
int pisb_vm_exec_handle(struct pisb_sandbox *sb, const struct pisb_exec_req *r,
			struct pisb_jw *w, int *code, bool *running, struct pisb_err *e);
int pisb_vm_exec_status(struct pisb_sandbox *sb, const char *handle, int timeout_ms,
			struct pisb_jw *w, int *code, bool *running, struct pisb_err *e);
int pisb_vm_exec_kill(struct pisb_sandbox *sb, const char *handle, struct pisb_jw *w,
		      int *code, struct pisb_err *e);

#endif
