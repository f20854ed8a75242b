/* compat.h - what glibc 2.36 declares and musl 1.2.3 does not.
 *
 * The static dispatcher, pisb, is built with musl where musl-gcc is
 * installed (Makefile): musl's start costs 0.08 ms where glibc's costs
 * 0.6 on a machine that traps the CPU-feature probes glibc runs at each
 * start (issue #21).  Every other binary is built with glibc.  The musl
 * build includes this header first in every file (-include); a glibc
 * build never sees it.  Each shim makes the system call that glibc's
 * wrapper makes.  The musl build has its own malloc too (malloc.c).
 */
#ifndef PISB_COMPAT_H
#define PISB_COMPAT_H

#include <features.h>   /* __GLIBC__, or not */

#ifndef __GLIBC__
#include <fcntl.h>
#include <linux/close_range.h>
#include <linux/mount.h>
#include <spawn.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0)
#define RENAME_EXCHANGE (1 << 1)
#endif

static inline int renameat2(int olddfd, const char *oldname, int newdfd, const char *newname,
			    unsigned int flags)
{
	return (int)syscall(SYS_renameat2, olddfd, oldname, newdfd, newname, flags);
}

static inline int close_range(unsigned int first, unsigned int last, int flags)
{
	return (int)syscall(SYS_close_range, first, last, flags);
}

/* struct statx as the kernel's uapi defines it (<linux/stat.h> would
 * define the S_IF* macros again, differently spelt) */
#define STATX_MNT_ID 0x00001000U
struct statx_timestamp {
	int64_t tv_sec;
	uint32_t tv_nsec;
	int32_t reserved;
};
struct statx {
	uint32_t stx_mask, stx_blksize;
	uint64_t stx_attributes;
	uint32_t stx_nlink, stx_uid, stx_gid;
	uint16_t stx_mode, spare0;
	uint64_t stx_ino, stx_size, stx_blocks, stx_attributes_mask;
	struct statx_timestamp stx_atime, stx_btime, stx_ctime, stx_mtime;
	uint32_t stx_rdev_major, stx_rdev_minor, stx_dev_major, stx_dev_minor;
	uint64_t stx_mnt_id;
	uint64_t spare2[13];
};

static inline int statx(int dfd, const char *name, int flags, unsigned int mask, struct statx *sx)
{
	return (int)syscall(SYS_statx, dfd, name, flags, mask, sx);
}

/* musl's posix_spawn has no action that closes every descriptor from
 * one on: each one open now is closed (those the spawn opens after are
 * close-on-exec, as the callers' are) */
int posix_spawn_file_actions_addclosefrom_np(posix_spawn_file_actions_t *fa, int from);
#endif

#endif
