/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * meta.h - the filesystem's metadata: inodes, directories, extent maps,
 * extended attributes and the block allocator, held in client RAM and made
 * durable in the pool by a journal plus checkpoints (see layout.h and
 * docs/ARCHITECTURE.md, "On-pool layout" and "Crash consistency").
 *
 * The FUSE layer (ops.c) calls these functions and never touches the pool's
 * metadata itself; file *data* moves through io.c using the extents that
 * meta_map() hands out.
 *
 * Every mutating call appends its records to the in-RAM journal as one
 * transaction; meta_sync() makes every transaction so far durable (fsync),
 * and a flusher makes them durable within META_COMMIT_INTERVAL_MS anyway.
 *
 * Locking: one mutex inside struct meta serialises metadata; every function
 * takes it itself, so callers hold no lock. Functions return 0 or -errno
 * (POSIX errors for the FUSE reply: -ENOENT, -EEXIST, -ENOTEMPTY,
 * -ENAMETOOLONG, -ENOSPC, -EISDIR, -ENOTDIR, -EINVAL, -EPERM, -ENODATA,
 * -ERANGE, -EIO).
 *
 * Permissions: with default_permissions the kernel checks every request,
 * setattr included (chown/chgrp with the caller's supplementary groups and
 * capabilities, chmod, explicit times), and sends the set-id bits it clears
 * as a mode change; such a credential says kernel_checked and meta applies
 * the change as asked. Without it (a mount of one user) meta applies the
 * ownership rules itself (chown/chmod/utimes by non-owners: -EPERM).
 */
#ifndef RMEM_META_H
#define RMEM_META_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>

struct remote;
struct meta;

#define META_ROOT_INO 1
#define META_BLOCK_SIZE 4096 /* allocation unit of file data in the pool */
#define META_NAME_MAX 255
#define META_COMMIT_INTERVAL_MS 1000

struct meta_attr {
	uint64_t ino;
	uint64_t generation;
	uint32_t mode; /* type and permission bits */
	uint32_t nlink;
	uint32_t uid;
	uint32_t gid;
	uint64_t rdev;
	uint64_t size;
	uint64_t blocks; /* allocated META_BLOCK_SIZE blocks */
	struct timespec atime;
	struct timespec mtime;
	struct timespec ctime;
};

/* who asks: from fuse_req_ctx */
struct meta_cred {
	uint32_t uid;
	uint32_t gid;
	/* optional supplementary groups (fuse_req_getgroups), for chgrp/setgid rules */
	const uint32_t *groups;
	int ngroups;
	/* the kernel already checked the request (default_permissions): no rules here */
	bool kernel_checked;
};

/* is gid the caller's primary or one of its supplementary groups? */
bool meta_cred_in_group(const struct meta_cred *cred, uint32_t gid);

/* setattr: which fields (META_SET_*) and their values */
#define META_SET_MODE (1U << 0)
#define META_SET_UID (1U << 1)
#define META_SET_GID (1U << 2)
#define META_SET_SIZE (1U << 3)
#define META_SET_ATIME (1U << 4)
#define META_SET_MTIME (1U << 5)
#define META_SET_ATIME_NOW (1U << 6)
#define META_SET_MTIME_NOW (1U << 7)
#define META_SET_CTIME (1U << 8)

struct meta_setattr {
	uint32_t valid; /* META_SET_* */
	uint32_t mode;
	uint32_t uid;
	uint32_t gid;
	uint64_t size;
	struct timespec atime;
	struct timespec mtime;
	struct timespec ctime;
};

/* a run of file blocks and where it lives */
struct meta_extent {
	uint64_t file_block; /* first file block (offset / META_BLOCK_SIZE) */
	uint64_t count; /* blocks */
	uint64_t pool_off; /* pool byte offset of the first block; 0 = hole */
	bool fresh; /* just allocated: bytes the caller does not write must be zeroed */
};

struct meta_statfs {
	uint64_t blocks; /* data blocks in the pool */
	uint64_t bfree;
	uint64_t files; /* inode capacity (what the metadata area can hold) */
	uint64_t ffree;
};

/* ---- mount lifecycle ---- */

struct meta_mount_opts {
	bool format; /* format a pool that holds no rmemfs (never an rmemfs pool) */
	bool read_only; /* no lease, no writes (rmemfs-fsck without --repair) */
	bool force_lease; /* take the lease even from a live holder (fsck --force) */
	int lease_takeover_ms; /* a holder silent this long is dead (default 10000) */
	const char *holder_name; /* written next to the lease, e.g. "host:pid" */
};

/*
 * Mount the pool: check the superblock (an all-zero pool is formatted; a
 * foreign or newer format is refused: -EPROTONOSUPPORT / -EMEDIUMTYPE with a
 * message naming what was found), take the lease (-EBUSY naming the holder
 * when it is alive; a holder silent for lease_takeover_ms is taken over),
 * load the newest checkpoint, replay the journal, check consistency
 * (recovering after a crash), and start the lease heartbeat and the journal
 * flusher. *err_msg (if non-NULL) gets a g_malloc'd human-readable reason on
 * failure.
 */
int meta_mount(struct remote *r, const struct meta_mount_opts *opts, struct meta **out,
	       char **err_msg);
/* flush, checkpoint, mark clean, release the lease, free. NULL-tolerant */
int meta_unmount(struct meta *m);
/* release everything WITHOUT writing anything (after the connection died) */
void meta_abandon(struct meta *m);

/* ---- lookups and attributes ---- */

int meta_lookup(struct meta *m, uint64_t parent, const char *name, struct meta_attr *out);
int meta_getattr(struct meta *m, uint64_t ino, struct meta_attr *out);
/*
 * Change attributes. A size change frees whole blocks past the new size; the
 * caller (io.c) zeroes the tail of a partial last block BEFORE shrinking
 * (see io_truncate). Unless cred->kernel_checked, the ownership rules are
 * checked with cred (-EPERM): only root changes uid; the owner may change gid
 * to a group it is in; chmod by the owner drops S_ISGID for a group it is not
 * in; chown by non-root clears S_ISUID, and S_ISGID if group-executable.
 */
int meta_setattr(struct meta *m, uint64_t ino, const struct meta_setattr *sa,
		 const struct meta_cred *cred, struct meta_attr *out);
/* the kernel's lookup count: drop n references; frees unlinked inodes at 0 */
void meta_forget(struct meta *m, uint64_t ino, uint64_t nlookup);
/* every successful lookup/create/mknod/mkdir/symlink/link reply adds one reference */

/* open files: an unlinked inode lives until its last release and forget */
int meta_open(struct meta *m, uint64_t ino);
void meta_release(struct meta *m, uint64_t ino);

/* ---- namespace ---- */

/* mode carries the type: S_IFREG, S_IFIFO, S_IFSOCK, S_IFCHR, S_IFBLK */
int meta_mknod(struct meta *m, uint64_t parent, const char *name, uint32_t mode, uint64_t rdev,
	       const struct meta_cred *cred, struct meta_attr *out);
int meta_mkdir(struct meta *m, uint64_t parent, const char *name, uint32_t mode,
	       const struct meta_cred *cred, struct meta_attr *out);
int meta_symlink(struct meta *m, uint64_t parent, const char *name, const char *target,
		 const struct meta_cred *cred, struct meta_attr *out);
/* copies the target NUL-terminated; -ENAMETOOLONG if cap is too small */
int meta_readlink(struct meta *m, uint64_t ino, char *buf, size_t cap);
int meta_link(struct meta *m, uint64_t ino, uint64_t newparent, const char *newname,
	      struct meta_attr *out);
int meta_unlink(struct meta *m, uint64_t parent, const char *name);
int meta_rmdir(struct meta *m, uint64_t parent, const char *name);
/* flags: 0, RENAME_NOREPLACE, RENAME_EXCHANGE (linux/fs.h values) */
int meta_rename(struct meta *m, uint64_t parent, const char *name, uint64_t newparent,
		const char *newname, unsigned int flags);

/*
 * Directory listing with stable offsets: entries come in cookie order, each
 * with the cookie to resume after it ("." and ".." come first with cookies 1
 * and 2). fill() returns non-zero when the reply buffer is full; the entry it
 * refused is not consumed. With plus, each entry's attr is filled and counts
 * as a lookup reference (except "." and "..").
 * fill() runs under meta's lock: it must not call back into meta.
 */
typedef int (*meta_dirent_fn)(void *ctx, const char *name, const struct meta_attr *attr,
			      uint64_t next_cookie);
int meta_readdir(struct meta *m, uint64_t ino, uint64_t cookie, bool plus, meta_dirent_fn fill,
		 void *ctx);

/* ---- extended attributes (user.*, trusted.*, security.*) ---- */

/* flags: 0, XATTR_CREATE, XATTR_REPLACE */
int meta_setxattr(struct meta *m, uint64_t ino, const char *name, const void *value, size_t size,
		  int flags);
/* size 0: return the value's length; too small: -ERANGE; absent: -ENODATA */
ssize_t meta_getxattr(struct meta *m, uint64_t ino, const char *name, void *buf, size_t size);
/* NUL-separated names; size 0: the length needed */
ssize_t meta_listxattr(struct meta *m, uint64_t ino, char *buf, size_t size);
int meta_removexattr(struct meta *m, uint64_t ino, const char *name);

/* ---- file data placement ---- */

/*
 * Map [off, off+len) of a regular file to extents (at most max; returns the
 * number filled, or -errno). With alloc, holes are filled with newly
 * allocated blocks (marked fresh) placed contiguously where possible;
 * -ENOSPC when the pool is full. Without alloc, holes come back with
 * pool_off 0. Extents cover exactly the blocks of the range, in order.
 * (A range that needs more than max extents gets its first max, covering a
 * prefix of the range. Blocks preallocated by fallocate read as holes
 * without alloc and come back fresh with alloc, like new blocks: the caller
 * zeroes what it does not write and meta_write_done() makes them data.)
 */
int meta_map(struct meta *m, uint64_t ino, uint64_t off, uint64_t len, bool alloc,
	     struct meta_extent *ext, int max);
/*
 * After the data of a write has reached the pool: extend the size to end if
 * larger, set mtime/ctime, and commit the blocks meta_map allocated for this
 * range (until then they are not in any journal record or checkpoint, so a
 * crash before this point leaves nothing pointing at unwritten blocks).
 */
int meta_write_done(struct meta *m, uint64_t ino, uint64_t off, uint64_t len);
/*
 * meta_write_done in two halves, for the write-back block cache (cache.c),
 * which accepts a write long before its data reaches the pool:
 * meta_write_accept() when the write is accepted: size = max(size, end),
 * mtime = ctime = now; no block is committed (blocks meta_map allocated stay
 * fresh: a crash forgets them). meta_write_commit() once the data of
 * [off, off+len) is in the pool: the blocks there become part of the file;
 * size and times are left alone (accept set them), so the time of the
 * write, or a later utimes/setattr, is what stays.
 */
/*
 * times false: leave mtime/ctime alone - a page-cache write-back under the
 * kernel writeback cache, whose times the kernel owns and sends by setattr
 * (such a write can arrive after that setattr, so stamping "now" here would
 * overwrite the time the application's write really had).
 */
int meta_write_accept(struct meta *m, uint64_t ino, uint64_t end, bool times);
int meta_write_commit(struct meta *m, uint64_t ino, uint64_t off, uint64_t len);
/* fallocate: mode 0 or FALLOC_FL_KEEP_SIZE; newly allocated blocks are zeroed by meta */
int meta_fallocate(struct meta *m, uint64_t ino, uint64_t off, uint64_t len, int mode);
/* free the whole blocks inside [off, off+len) (caller zeroes partial edges) */
int meta_punch_hole(struct meta *m, uint64_t ino, uint64_t off, uint64_t len);
/* SEEK_DATA / SEEK_HOLE; -ENXIO past the end */
int meta_seek(struct meta *m, uint64_t ino, uint64_t off, int whence, uint64_t *result);
/* set atime (relatime rules are the kernel's) */
int meta_touch_atime(struct meta *m, uint64_t ino);

/* ---- durability and space ---- */

/* make every transaction so far durable in the pool (fsync/fdatasync/fsyncdir) */
int meta_sync(struct meta *m);
int meta_statfs(struct meta *m, struct meta_statfs *out);

#endif /* RMEM_META_H */
