/* vm_proto.h - the wire format between pisb (host) and pisb-agent (guest)
 * on a virtio-serial port.  Shared by common/vm*.c and agent/pisb-agent.c;
 * header only, no dependencies.
 *
 * A frame is a 16-byte header then len payload bytes:
 *   u8 magic[4] "PSB1", u8 type, u8 pad[3], u32le sid, u32le len
 * sid is the session id the host picked for one request: the agent tags
 * every reply with it, and the host drops frames of another session (left
 * over from a client that went away).  A reader that loses sync skips
 * bytes up to the next magic.
 *
 * Host to guest:
 *   EXEC     u32le argc, u32le envc, then NUL-terminated strings: cwd,
 *            argv[0..argc), env[0..envc) ("K=V").  The command runs in a
 *            new session (its own process group) as root.
 *   STDIN    bytes for the command's stdin; len 0 = end of input.
 *   KILL     u8 signal: kill(-pgid, signal) on the command's group.
 *   WINSZ    u16le rows, u16le cols: the size of the command's terminal,
 *            the pty whose path the command wrote into /run/pisb/pty.PID
 *            (PID the command's; pisb shell's does); none there: ignored.
 *   PING     the agent answers PONG (payload: its version text).
 *   POWEROFF sync, stop every process, remount / read-only, reboot
 *            (QEMU runs with -no-reboot, so it exits); answers PONG first.
 *   BOOT     only to a guest restored from the boot snapshot, waiting in
 *            stage 1: "pisb.KEY=VALUE ..." (its arguments, pisb.time,
 *            pisb.seed, pisb.disk: the disk's size in bytes, which the
 *            guest waits to see before it mounts the disk); sent while
 *            the restored VM is still paused; answers PONG, then mounts
 *            the disk and the hot-plugged share.
 * Guest to host:
 *   STARTED  u32le the command's pid in the guest, once, before its output,
 *            on a service port only (shown only: a service's "pid");
 *   STDOUT / STDERR  output bytes;  EXIT  i32le exit status (N, 128+signal,
 *   126 cannot run, 127 not found);  PONG.
 *
 * Ports are named org.pisb.agent.N: port 0 is for PING and POWEROFF
 * (lifecycle), ports 1..PISB_VM_EXEC_PORTS run one command at a time each
 * (exec, the hooks), ports PISB_VM_SVC_PORT.. (PISB_VM_SVC_PORTS of them)
 * too, for the supervised services only (vm_svc.c: one each while it runs),
 * port PISB_VM_NET_PORT carries TCP streams (vm_mux.h: sid is the stream
 * id, odd when the host opened the stream, even when the guest did), both
 * ways:
 *   NOPEN    u16le port.  Host to guest: connect to 127.0.0.1:port (a
 *            preview, a service's check).  Guest to host: a connection to
 *            the guest's 127.0.0.1:PISB_VM_EGRESS_PORT, for the host's
 *            egress proxy (only that port is taken, and only with
 *            network.allowedHosts: the guest names a host-side service,
 *            never a host address)
 *   NDATA    bytes (at most PISB_MUX_CHUNK, within the credit window);
 *            empty from the guest on a stream the host opened: its
 *            connect for the stream succeeded (the host's TCP health
 *            checks wait for it)
 *   NEOF     no more data this way (half-close)
 *   NRST     u8 why (vm_mux.h): the stream is gone
 *   NCREDIT  u32le bytes written out on this side: the sender may send
 *            that many more
 */
#ifndef PISB_VM_PROTO_H
#define PISB_VM_PROTO_H

#include <stdint.h>
#include <string.h>

#define PISB_VM_MAGIC "PSB1"
#define PISB_VM_HDR 16
#define PISB_VM_MAX_FRAME (1u << 20)
#define PISB_VM_EXEC_PORTS 8
#define PISB_VM_NET_PORT (PISB_VM_EXEC_PORTS + 1)
#define PISB_VM_SVC_PORT (PISB_VM_NET_PORT + 1)
#define PISB_VM_SVC_PORTS 8
#define PISB_VM_PORTS (PISB_VM_SVC_PORT + PISB_VM_SVC_PORTS)
/* the egress proxy's port, in the guest as in a local sandbox
 * (PISB_PROXY_PORT): the agent listens there with pisb.egress=1 */
#define PISB_VM_EGRESS_PORT 3128
#define PISB_VM_PORT_PREFIX "org.pisb.agent."
#define PISB_VM_AGENT_VERSION "pisb-agent 8"
/* The file verbs run `PISB_VM_FS_AGENT fs VERB ARGS...` in the guest
 * (agent/agent_fs.c; its reply format: drivers/vm/vm_fs.c). */
#define PISB_VM_FS_AGENT "/run/pisb/agent"
#define PISB_VM_FS_EDIT_MAX (64 << 20)
/* the virtiofs tag of the host's read-only userland */
#define PISB_HOST_TAG "pisb-host"
/* the virtiofs tag of a bound project (project.mode bind, bind-ro) */
#define PISB_PROJECT_TAG "pisb-proj"
/* image: PATH: the serial of the read-only rootfs image's virtio-blk disk,
 * and the value of the kernel argument pisb.root that asks for it */
#define PISB_VM_IMAGE_SERIAL "pisb-image"

enum {
	PISB_VM_EXEC = 1,
	PISB_VM_STDIN = 2,
	PISB_VM_KILL = 3,
	PISB_VM_PING = 4,
	PISB_VM_POWEROFF = 5,
	PISB_VM_BOOT = 6,
	PISB_VM_WINSZ = 7,
	PISB_VM_NOPEN = 0x10,
	PISB_VM_NDATA = 0x11,
	PISB_VM_NEOF = 0x12,
	PISB_VM_NRST = 0x13,
	PISB_VM_NCREDIT = 0x14,
	PISB_VM_STDOUT = 0x81,
	PISB_VM_STDERR = 0x82,
	PISB_VM_EXIT = 0x83,
	PISB_VM_PONG = 0x84,
	PISB_VM_STARTED = 0x85,
};

static inline void pisb_vm_put32(unsigned char *p, uint32_t v)
{
	p[0] = (unsigned char)v;
	p[1] = (unsigned char)(v >> 8);
	p[2] = (unsigned char)(v >> 16);
	p[3] = (unsigned char)(v >> 24);
}

static inline uint32_t pisb_vm_get32(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline void pisb_vm_hdr(unsigned char h[PISB_VM_HDR], int type, uint32_t sid, uint32_t len)
{
	memcpy(h, PISB_VM_MAGIC, 4);
	h[4] = (unsigned char)type;
	h[5] = h[6] = h[7] = 0;
	pisb_vm_put32(h + 8, sid);
	pisb_vm_put32(h + 12, len);
}

#endif
