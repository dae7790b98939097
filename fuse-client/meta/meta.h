/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * meta.h - the filesystem's metadata operations: lookups, attributes, the
 * namespace and extended attributes, on a struct meta that mount.h opens.
 * File data placement is extent.h; durability (fsync) is commit.h.
 * docs/ARCHITECTURE.md tells how metadata lives in client RAM and is made
 * durable by a journal plus checkpoints.
 *
 * Every function takes struct meta's lock itself (callers hold no lock) and
 * returns 0 or -errno, the POSIX error for the FUSE reply (-ENOENT, -EEXIST,
 * -ENOTEMPTY, -ENAMETOOLONG, -ENOSPC, -EISDIR, -ENOTDIR, -EINVAL, -EPERM,
 * -ENODATA, -ERANGE, -EIO...). Memory: allocation failure aborts (GLib's
 * g_new), in every file of the metadata layer; no function returns -ENOMEM.
 *
 * Permissions: a credential with kernel_checked (default_permissions) is
 * applied as asked: the kernel checked it and sends the set-id bits it
 * clears as a mode change. Without it (a mount of one user) meta applies the
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

struct meta_statfs {
	uint64_t blocks; /* data blocks in the pool */
	uint64_t bfree;
	uint64_t files; /* inode capacity (what the metadata area can hold) */
	uint64_t ffree;
};

/* ---- lookups and attributes ---- */

/*
 * name in directory parent. "." (inode parent itself, of any type) and ".."
 * (the parent of directory parent) are the kernel's lookups by node id: it
 * sends them to turn a file handle into an inode it no longer holds and to
 * reconnect a directory to its parent. An inode without a name is gone for
 * them: -ENOENT, which the handle's user gets as ESTALE.
 */
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

/*
 * The kernel's opens of a file (each also a meta_open reference), and whether
 * one may bypass the page cache (direct, FOPEN_DIRECT_IO): only when it wants
 * to (an O_DIRECT open, or -o direct_io) and no page-cached open of the inode
 * exists. Returns 1 for direct, 0 for cached, or -errno; release with the
 * same kind. drops_pages: the kernel drops every page of the file after this
 * open if it is direct (FUSE_OPEN without keep_cache; see meta_pagecache).
 */
int meta_open_file(struct meta *m, uint64_t ino, bool want_direct, bool drops_pages);
void meta_release_file(struct meta *m, uint64_t ino, bool direct);

/*
 * May the kernel be filling page-cache pages of ino with what it reads from
 * us? From a page-cached open on (meta_open_file), or from a page-cache read
 * through a direct open (a mapping of it: meta_note_pagecache), until a
 * direct open, with no cached one left, after which the kernel drops the
 * file's pages (drops_pages): pages filled before it are gone then, and a
 * mapping that faults again says so again. False for an inode that is gone.
 */
bool meta_pagecache(struct meta *m, uint64_t ino);
void meta_note_pagecache(struct meta *m, uint64_t ino);

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
/* flags: 0, META_RENAME_NOREPLACE, META_RENAME_EXCHANGE (renameat2's values) */
#define META_RENAME_NOREPLACE (1 << 0)
#define META_RENAME_EXCHANGE (1 << 1)
int meta_rename(struct meta *m, uint64_t parent, const char *name, uint64_t newparent,
		const char *newname, unsigned int flags);

/*
 * Directory listing with stable offsets: entries come in cookie order, each
 * with the cookie to resume after it ("." and ".." come first with cookies 1
 * and 2). fill() returns non-zero when the reply buffer is full; the entry it
 * refused is not consumed. With plus, each entry's attr is filled and counts
 * as a lookup reference (except "." and "..").
 * *end (NULL: none) is where one listing ends: the directory's next cookie
 * when it began, set by a call from cookie 0 or with *end 0; entries added
 * since are not listed (docs/ARCHITECTURE.md, "Listings during changes").
 * fill() runs under meta's lock: it must not call back into meta.
 */
typedef int (*meta_dirent_fn)(void *ctx, const char *name, const struct meta_attr *attr,
			      uint64_t next_cookie);
int meta_readdir(struct meta *m, uint64_t ino, uint64_t cookie, uint64_t *end, bool plus,
		 meta_dirent_fn fill, void *ctx);

/* ---- extended attributes (user.*, trusted.*, security.*) ---- */

/* flags: 0, XATTR_CREATE, XATTR_REPLACE */
int meta_setxattr(struct meta *m, uint64_t ino, const char *name, const void *value, size_t size,
		  int flags);
/* size 0: return the value's length; too small: -ERANGE; absent: -ENODATA */
ssize_t meta_getxattr(struct meta *m, uint64_t ino, const char *name, void *buf, size_t size);
/* NUL-separated names; size 0: the length needed */
ssize_t meta_listxattr(struct meta *m, uint64_t ino, char *buf, size_t size);
int meta_removexattr(struct meta *m, uint64_t ino, const char *name);

/* ---- times and space ---- */

/* set atime (relatime rules are the kernel's) */
int meta_touch_atime(struct meta *m, uint64_t ino);

int meta_statfs(struct meta *m, struct meta_statfs *out);

/*
 * The pool's sharing, as "key value" lines for the stats xattr: on a reader
 * its state and lag, on the writer its readers (docs/ARCHITECTURE.md,
 * "Readers beside the writer"). Bytes written, at most cap - 1.
 */
size_t meta_sharing_text(struct meta *m, char *buf, size_t cap);

#endif /* RMEM_META_H */
