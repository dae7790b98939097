// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * ops.c - FUSE lowlevel operations (see ops.h).
 *
 * Every handler replies exactly once: the reply call is the last statement
 * of each path, errors as fuse_reply_err(req, -rc). Handlers hold no locks of
 * their own; meta serialises metadata inside, io takes the per-inode data
 * locks. Data moves only through cache.h; operations that touch the pool
 * directly (truncate, fallocate, copy_file_range, SEEK_DATA/HOLE) run in
 * the cache's exclusive section of their inode(s).
 *
 * Kernel caching: keep_cache and the writeback cache are on by default (this
 * client is the pool's only writer, so the kernel's pages never go stale
 * behind its back; reads racing a direct write are the exception, inval.h).
 * With the writeback cache the kernel owns size, mtime and ctime of open
 * files and handles O_APPEND itself; writes arrive as page write-back, and
 * their errors reach the application at fsync/close.
 * READ replies are sent straight from the cache slots (fuse_reply_iov).
 *
 * Lookup references: meta counts one per successful lookup/create/mknod/
 * mkdir/symlink/link (and readdirplus entry); when the kernel never receives
 * such a reply (the request was interrupted, fuse_reply_* says -ENOENT) the
 * reference is given back at once with meta_forget.
 */
#define G_LOG_DOMAIN "rmemfs-ops"

#include "ops.h"
#include "clock.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/fs.h>
#include <linux/fuse.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include <glib.h>

#include "cache.h"
#include "commit.h"
#include "extent.h"
#include "inval.h"
#include "io.h"
#include "meta.h"
#include "ops_xattr.h"
#include "verify.h"
#include "remote.h"
#include "swapmode.h"

#ifndef FUSE_DIRECT_IO_ALLOW_MMAP /* FUSE 7.39; <linux/fuse.h> may be older */
#define FUSE_DIRECT_IO_ALLOW_MMAP (1ULL << 36)
#endif

#define OPS_MAX_WRITE (1U << 20)
/* -o swap: a loop device's requests are split into this (a smaller daemon) */
#define OPS_SWAP_MAX_WRITE (128U << 10)
#define OPS_BLKSIZE (64U << 10) /* st_blksize: the I/O size we like */

static struct ops_ctx *req_ctx(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

/* who asks; with default_permissions the kernel checked the request already */
static struct meta_cred req_cred(fuse_req_t req)
{
	const struct fuse_ctx *c = fuse_req_ctx(req);
	struct meta_cred cred = { .uid = c->uid, .gid = c->gid };

	cred.kernel_checked = req_ctx(req)->default_permissions;
	return cred;
}

#define OPS_MAX_GROUPS 64

/* adds the caller's supplementary groups (buf: OPS_MAX_GROUPS) to cred */
static void req_groups(fuse_req_t req, gid_t *buf, struct meta_cred *cred)
{
	int n = fuse_req_getgroups(req, OPS_MAX_GROUPS, buf);

	if (n < 0) {
		g_debug("fuse_req_getgroups: %s", g_strerror(-n));
		return; /* the primary group only */
	}
	cred->groups = buf;
	cred->ngroups = MIN(n, OPS_MAX_GROUPS);
}

static void attr_to_stat(const struct meta_attr *a, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = a->ino;
	st->st_mode = a->mode;
	st->st_nlink = a->nlink;
	st->st_uid = a->uid;
	st->st_gid = a->gid;
	st->st_rdev = a->rdev;
	st->st_size = a->size;
	st->st_blocks = a->blocks * (META_BLOCK_SIZE / 512);
	st->st_blksize = OPS_BLKSIZE;
	st->st_atim = a->atime;
	st->st_mtim = a->mtime;
	st->st_ctim = a->ctime;
}

static void fill_entry(struct ops_ctx *ctx, const struct meta_attr *a, struct fuse_entry_param *e)
{
	memset(e, 0, sizeof(*e));
	e->ino = a->ino;
	e->generation = a->generation;
	attr_to_stat(a, &e->attr);
	e->attr_timeout = ctx->attr_timeout;
	e->entry_timeout = ctx->entry_timeout;
}

/* reply to lookup/mknod/mkdir/symlink/link; gives the reference back if the reply is lost */
static void reply_entry(fuse_req_t req, int rc, const struct meta_attr *a)
{
	struct ops_ctx *ctx = req_ctx(req);
	struct fuse_entry_param e;

	if (rc < 0) {
		fuse_reply_err(req, -rc);
		return;
	}
	fill_entry(ctx, a, &e);
	if (fuse_reply_entry(req, &e) == -ENOENT)
		meta_forget(ctx->meta, a->ino, 1);
}

static void want(struct fuse_conn_info *conn, unsigned int cap)
{
	if (conn->capable & cap)
		conn->want |= cap;
}

static void ops_init(void *userdata, struct fuse_conn_info *conn)
{
	struct ops_ctx *ctx = userdata;

	/* libfuse derives max_pages from it */
	conn->max_write = ctx->swap ? OPS_SWAP_MAX_WRITE : OPS_MAX_WRITE;
	conn->time_gran = 1;
	want(conn, FUSE_CAP_ASYNC_READ);
	want(conn, FUSE_CAP_READDIRPLUS | FUSE_CAP_READDIRPLUS_AUTO);
	want(conn, FUSE_CAP_PARALLEL_DIROPS);
	want(conn, FUSE_CAP_ASYNC_DIO);
	want(conn, FUSE_CAP_CACHE_SYMLINKS); /* a symlink never changes */
	/* pages cached across opens are refreshed when mtime/size change */
	want(conn, FUSE_CAP_AUTO_INVAL_DATA);
	/*
	 * The kernel's writeback cache (see the top of the file), unless every
	 * file bypasses the page cache anyway (direct_io). Splice buys nothing
	 * here: the data is copied into the transport anyway.
	 */
	conn->want &= ~(FUSE_CAP_WRITEBACK_CACHE | FUSE_CAP_SPLICE_READ | FUSE_CAP_SPLICE_WRITE |
			FUSE_CAP_SPLICE_MOVE);
	if (ctx->writeback_cache && !ctx->direct_io)
		want(conn, FUSE_CAP_WRITEBACK_CACHE);
	/*
	 * File handles (open_by_handle_at, NFS export): a handle is the node id
	 * and generation 0; node ids are inode numbers, never given out twice
	 * (mount.c), so a handle outlives remounts and never opens another file.
	 * For an inode the kernel no longer holds it looks up "." and ".." by
	 * node id (meta_lookup).
	 */
	want(conn, FUSE_CAP_EXPORT_SUPPORT);
	/*
	 * The kernel clears set-id bits on write, truncate and chown itself and
	 * sends the result as a mode change (see ops_setattr); with killpriv it
	 * would leave that to us, and a write-back WRITE does not tell who wrote.
	 */
	conn->want &= ~FUSE_CAP_HANDLE_KILLPRIV;
	/*
	 * Nor atomic O_TRUNC: the kernel then truncates with a SETATTR that
	 * carries the set-id bits to clear; when OPEN truncated, it drops them.
	 */
	conn->want &= ~FUSE_CAP_ATOMIC_O_TRUNC;
	/*
	 * Direct opens (see reply_open) rely on the kernel dropping cached
	 * pages of a direct write's range, and may be mmap(MAP_SHARED)ed only
	 * with FUSE_DIRECT_IO_ALLOW_MMAP, which libfuse 3.14 cannot ask for:
	 * devio adds it to the INIT reply. Both came with FUSE 7.39 (Linux
	 * 6.6); a kernel without them, or a libfuse without custom I/O, sends
	 * every O_DIRECT open the kernel's way (mappable, writers serialised).
	 */
	if (conn->proto_minor >= 39 && devio_offered(&ctx->devio, FUSE_DIRECT_IO_ALLOW_MMAP)) {
		devio_ask(&ctx->devio, FUSE_DIRECT_IO_ALLOW_MMAP);
	} else if (ctx->odirect_uncached || ctx->direct_io) {
		g_message("FUSE_DIRECT_IO_ALLOW_MMAP: %s (FUSE %u.%u); O_DIRECT opens take the "
			  "kernel's O_DIRECT path%s",
			  devio_attached(&ctx->devio) ? "the kernel does not offer it" :
							"libfuse cannot ask for it",
			  conn->proto_major, conn->proto_minor,
			  ctx->direct_io ? ", and with -o direct_io mmap(MAP_SHARED) fails" : "");
		ctx->odirect_uncached = false;
	}
	/*
	 * Background requests (async direct I/O, readahead, write-back) in flight
	 * at once: the kernel's default of 12 made a QD32 submitter sleep for a
	 * slot and be woken per completion (fuse_request_bg_finish). 64 covers
	 * QD32 with room for the write-back; the cache bounds the work anyway.
	 */
	conn->max_background = 64;
	conn->congestion_threshold = 48;
	/* what the kernel will really do decides how setattr and lseek behave */
	ctx->writeback_cache = (conn->want & FUSE_CAP_WRITEBACK_CACHE) != 0;
	g_debug("init: kernel protocol %u.%u, max_write %u, max_readahead %u, want 0x%x",
		conn->proto_major, conn->proto_minor, conn->max_write, conn->max_readahead,
		conn->want);
}

static void ops_destroy(void *userdata)
{
	struct ops_ctx *ctx = userdata;
	int rc;

	/* mount_close (main.c) flushes metadata; the data has to be there first */
	rc = cache_flush_all(ctx->cache);
	if (rc < 0)
		g_message("cache_flush_all at unmount: %s", g_strerror(-rc));
}

static void ops_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct ops_ctx *ctx = req_ctx(req);
	struct meta_attr a;
	int rc;

	rc = meta_lookup(ctx->meta, parent, name, &a);
	if (rc == -ENOENT && ctx->entry_timeout > 0) {
		struct fuse_entry_param e;

		/* a negative entry: the kernel may remember the absence */
		memset(&e, 0, sizeof(e));
		e.entry_timeout = ctx->entry_timeout;
		fuse_reply_entry(req, &e);
		return;
	}
	reply_entry(req, rc, &a);
}

/* after dropping references: if the inode is gone, so is any cached data of it */
static void forget_one(struct ops_ctx *ctx, fuse_ino_t ino, uint64_t nlookup)
{
	struct meta_attr a;

	meta_forget(ctx->meta, ino, nlookup);
	if (meta_getattr(ctx->meta, ino, &a) == -ENOENT)
		cache_forget(ctx->cache, ino);
}

static void ops_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	forget_one(req_ctx(req), ino, nlookup);
	fuse_reply_none(req);
}

static void ops_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets)
{
	struct ops_ctx *ctx = req_ctx(req);
	size_t i;

	for (i = 0; i < count; i++)
		forget_one(ctx, forgets[i].ino, forgets[i].nlookup);
	fuse_reply_none(req);
}

static void ops_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct ops_ctx *ctx = req_ctx(req);
	struct meta_attr a;
	struct stat st;
	int rc;

	rc = meta_getattr(ctx->meta, ino, &a);
	if (rc < 0) {
		fuse_reply_err(req, -rc);
		return;
	}
	attr_to_stat(&a, &st);
	fuse_reply_attr(req, &st, ctx->attr_timeout);
}

/*
 * truncate through io (it zeroes partial blocks), in the cache's exclusive
 * section: cached writes past the new size are dropped, the rest written
 * back first, and cached blocks from the new size on dropped after
 */
static int do_truncate(struct ops_ctx *ctx, fuse_ino_t ino, const struct meta_setattr *sa,
		       const struct meta_cred *cred, struct meta_attr *out)
{
	int rc;

	rc = cache_begin_exclusive(ctx->cache, ino, sa->size);
	if (rc < 0)
		return rc;
	rc = io_truncate(ctx->io, ino, sa, cred, out);
	cache_end_exclusive(ctx->cache, ino, sa->size, UINT64_MAX);
	return rc;
}

/*
 * With default_permissions the kernel checked every SETATTR (chown/chgrp
 * with the caller's supplementary groups and capabilities, chmod, explicit
 * times); the ones it sends on its own authority come with FATTR_FORCE
 * semantics and need no check: clearing set-id bits after a write or
 * truncate by anyone allowed to write (a mode change, possibly by a
 * non-owner), and the times below. So req_cred says kernel_checked and meta
 * applies what is asked. Without default_permissions (a mount of one user)
 * meta checks the ownership rules with the caller's groups.
 *
 * With the writeback cache the kernel keeps mtime/ctime itself and sends
 * them as explicit times: after writes (by anyone allowed to write) and for
 * utimes(NULL) (where atime comes as "now"). An explicit mtime without an
 * explicit atime is that - a user's own utimensat with explicit times comes
 * from the only user of the mount. meta would refuse explicit times from a
 * non-owner, so such a request is applied with this credential.
 */
static const struct meta_cred kernel_cred = { .kernel_checked = true };

static bool kernel_times(const struct ops_ctx *ctx, int to_set)
{
	return ctx->writeback_cache && !ctx->direct_io && (to_set & FUSE_SET_ATTR_MTIME) &&
	       !(to_set & (FUSE_SET_ATTR_MTIME_NOW | FUSE_SET_ATTR_MODE | FUSE_SET_ATTR_UID |
			   FUSE_SET_ATTR_GID | FUSE_SET_ATTR_SIZE)) &&
	       (!(to_set & FUSE_SET_ATTR_ATIME) || (to_set & FUSE_SET_ATTR_ATIME_NOW));
}

static void ops_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
			struct fuse_file_info *fi)
{
	struct ops_ctx *ctx = req_ctx(req);
	struct meta_cred cred = req_cred(req);
	gid_t groups[OPS_MAX_GROUPS];
	struct meta_setattr sa;
	struct meta_attr a;
	struct stat st;
	int rc;

	if (!cred.kernel_checked && (to_set & (FUSE_SET_ATTR_MODE | FUSE_SET_ATTR_GID)))
		req_groups(req, groups, &cred);
	memset(&sa, 0, sizeof(sa));
	if (to_set & FUSE_SET_ATTR_MODE) {
		sa.valid |= META_SET_MODE;
		sa.mode = attr->st_mode;
	}
	if (to_set & FUSE_SET_ATTR_UID) {
		sa.valid |= META_SET_UID;
		sa.uid = attr->st_uid;
	}
	if (to_set & FUSE_SET_ATTR_GID) {
		sa.valid |= META_SET_GID;
		sa.gid = attr->st_gid;
	}
	/* utimensat(UTIME_NOW) arrives as *_NOW; UTIME_OMIT as neither bit */
	if (to_set & FUSE_SET_ATTR_ATIME_NOW) {
		sa.valid |= META_SET_ATIME_NOW;
	} else if (to_set & FUSE_SET_ATTR_ATIME) {
		sa.valid |= META_SET_ATIME;
		sa.atime = attr->st_atim;
	}
	if (to_set & FUSE_SET_ATTR_MTIME_NOW) {
		sa.valid |= META_SET_MTIME_NOW;
	} else if (to_set & FUSE_SET_ATTR_MTIME) {
		sa.valid |= META_SET_MTIME;
		sa.mtime = attr->st_mtim;
	}
	if (to_set & FUSE_SET_ATTR_CTIME) {
		sa.valid |= META_SET_CTIME;
		sa.ctime = attr->st_ctim;
	}
	if (to_set & FUSE_SET_ATTR_SIZE) {
		if (attr->st_size < 0) {
			fuse_reply_err(req, EINVAL);
			return;
		}
		sa.valid |= META_SET_SIZE;
		sa.size = attr->st_size;
		rc = do_truncate(ctx, ino, &sa, &cred, &a);
	} else {
		rc = meta_setattr(ctx->meta, ino, &sa, kernel_times(ctx, to_set) ? &kernel_cred : &cred,
				  &a);
	}
	if (rc < 0) {
		fuse_reply_err(req, -rc);
		return;
	}
	attr_to_stat(&a, &st);
	fuse_reply_attr(req, &st, ctx->attr_timeout);
}

static void ops_readlink(fuse_req_t req, fuse_ino_t ino)
{
	struct ops_ctx *ctx = req_ctx(req);
	char buf[PATH_MAX + 1];
	int rc;

	rc = meta_readlink(ctx->meta, ino, buf, sizeof(buf));
	if (rc < 0) {
		fuse_reply_err(req, -rc);
		return;
	}
	fuse_reply_readlink(req, buf);
}

static void ops_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		      dev_t rdev)
{
	struct ops_ctx *ctx = req_ctx(req);
	struct meta_cred cred = req_cred(req);
	struct meta_attr a;
	int rc;

	if (!(mode & S_IFMT))
		mode |= S_IFREG; /* mknod(path, 0644, 0) makes a regular file */
	rc = meta_mknod(ctx->meta, parent, name, mode, rdev, &cred, &a);
	reply_entry(req, rc, &a);
}

static void ops_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	struct ops_ctx *ctx = req_ctx(req);
	struct meta_cred cred = req_cred(req);
	struct meta_attr a;
	int rc;

	rc = meta_mkdir(ctx->meta, parent, name, mode & 07777, &cred, &a);
	reply_entry(req, rc, &a);
}

static void ops_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	fuse_reply_err(req, -meta_unlink(req_ctx(req)->meta, parent, name));
}

static void ops_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	fuse_reply_err(req, -meta_rmdir(req_ctx(req)->meta, parent, name));
}

static void ops_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name)
{
	struct ops_ctx *ctx = req_ctx(req);
	struct meta_cred cred = req_cred(req);
	struct meta_attr a;
	int rc;

	rc = meta_symlink(ctx->meta, parent, name, link, &cred, &a);
	reply_entry(req, rc, &a);
}

static void ops_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
		       const char *newname, unsigned int flags)
{
	if (flags & ~(RENAME_NOREPLACE | RENAME_EXCHANGE)) {
		fuse_reply_err(req, EINVAL); /* RENAME_WHITEOUT is for overlay filesystems */
		return;
	}
	fuse_reply_err(req, -meta_rename(req_ctx(req)->meta, parent, name, newparent, newname,
					 flags));
}

static void ops_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname)
{
	struct ops_ctx *ctx = req_ctx(req);
	struct meta_attr a;
	int rc;

	rc = meta_link(ctx->meta, ino, newparent, newname, &a);
	reply_entry(req, rc, &a);
}

/*
 * O_TRUNC at create, of a file another opener created since the kernel's
 * lookup (an open truncates by SETATTR, see ops_init): size 0, and
 * mtime/ctime move even if it was empty (as Linux does)
 */
static int open_truncate(fuse_req_t req, fuse_ino_t ino)
{
	struct ops_ctx *ctx = req_ctx(req);
	struct meta_cred cred = req_cred(req);
	struct meta_setattr sa;
	struct meta_attr a;

	memset(&sa, 0, sizeof(sa));
	sa.valid = META_SET_SIZE | META_SET_MTIME_NOW | META_SET_CTIME;
	sa.size = 0;
	clock_file_time(&sa.ctime);
	return do_truncate(ctx, ino, &sa, &cred, &a);
}

/*
 * Page cache or not, per open (meta_open_file decides). Cached opens share
 * the kernel's page cache, kept across opens (keep_cache: this client is the
 * pool's only writer; a direct open drops the pages, and the kernel drops
 * the range of each direct write).
 *
 * An O_DIRECT open (every open with -o direct_io) of a file without cached
 * opens is direct: FOPEN_DIRECT_IO and, from OPEN, FOPEN_PARALLEL_DIRECT_WRITES,
 * so writers of one file do not queue on the inode lock (the kernel still
 * takes it exclusively for a write past EOF); the cache takes its per-inode
 * lock shared for writes, so they run in parallel here too. An O_DIRECT open
 * of a file that has cached opens takes the kernel's own O_DIRECT path, which
 * writes back and drops the cached pages of its range: coherent with them.
 *
 * A cached open that comes while direct ones exist stays cached: the kernel
 * writes back its dirty pages before a direct read of the range and drops
 * its pages of a direct write's range (seen on 6.18; test_odirect.py mixes
 * both orders and checks it by hand). A direct open can be mapped with
 * MAP_SHARED because ops_init asked for FUSE_DIRECT_IO_ALLOW_MMAP (devio.h);
 * the kernel then writes a mapping's dirty pages back before direct I/O of
 * their range. -o odirect=kernel sends every O_DIRECT open the kernel's way.
 * The kernel drops every page of the file after a direct OPEN (no
 * keep_cache), which meta_pagecache counts on (see direct_write).
 */
static int reply_open(fuse_req_t req, bool direct)
{
	/* libfuse 3.14's fuse_file_info has no FOPEN_PARALLEL_DIRECT_WRITES: the reply by hand */
	struct fuse_open_out out = {
		.fh = direct,
		.open_flags = direct ? FOPEN_DIRECT_IO | FOPEN_PARALLEL_DIRECT_WRITES :
				       FOPEN_KEEP_CACHE,
	};

	return fuse_reply_buf(req, (const char *)&out, sizeof(out));
}

static bool want_direct(struct ops_ctx *ctx, const struct fuse_file_info *fi)
{
	return ctx->direct_io || (ctx->odirect_uncached && (fi->flags & O_DIRECT));
}

static void ops_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct ops_ctx *ctx = req_ctx(req);
	int direct;

	direct = meta_open_file(ctx->meta, ino, want_direct(ctx, fi), true);
	if (direct < 0) {
		fuse_reply_err(req, -direct);
		return;
	}
	if (reply_open(req, direct) == -ENOENT)
		meta_release_file(ctx->meta, ino, direct); /* interrupted: no release will come */
}

static void ops_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		       struct fuse_file_info *fi)
{
	struct ops_ctx *ctx = req_ctx(req);
	struct meta_cred cred = req_cred(req);
	struct fuse_entry_param e;
	bool existed = false;
	struct meta_attr a;
	int rc, how;

	rc = meta_mknod(ctx->meta, parent, name, S_IFREG | (mode & 07777), 0, &cred, &a);
	if (rc == -EEXIST && !(fi->flags & O_EXCL)) {
		/* another opener created it since the kernel's lookup: open that one */
		rc = meta_lookup(ctx->meta, parent, name, &a);
		if (rc == 0 && !S_ISREG(a.mode)) {
			meta_forget(ctx->meta, a.ino, 1);
			rc = S_ISDIR(a.mode) ? -EISDIR : -EEXIST;
		}
		existed = true;
	}
	if (rc < 0) {
		fuse_reply_err(req, -rc);
		return;
	}
	how = meta_open_file(ctx->meta, a.ino, want_direct(ctx, fi), false);
	rc = how < 0 ? how : 0;
	if (rc == 0 && existed && (fi->flags & O_TRUNC)) {
		rc = open_truncate(req, a.ino);
		if (rc == 0)
			rc = meta_getattr(ctx->meta, a.ino, &a);
		if (rc < 0)
			meta_release_file(ctx->meta, a.ino, how);
	}
	if (rc < 0) {
		meta_forget(ctx->meta, a.ino, 1);
		fuse_reply_err(req, -rc);
		return;
	}
	/* fuse_reply_create cannot say FOPEN_PARALLEL_DIRECT_WRITES (see reply_open) */
	fi->fh = how;
	fi->direct_io = how;
	fi->keep_cache = !how;
	fill_entry(ctx, &a, &e);
	if (fuse_reply_create(req, &e, fi) == -ENOENT) {
		meta_release_file(ctx->meta, a.ino, how);
		meta_forget(ctx->meta, a.ino, 1);
	}
}

/* the reply goes out of the pinned cache slots: no copy here */
static void ops_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		     struct fuse_file_info *fi)
{
	struct ops_ctx *ctx = req_ctx(req);
	struct cache_read_ref ref;
	uint64_t t0 = clock_now_ns();
	ssize_t n;

	if (off < 0) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	if (fi->fh && !fi->lock_owner)
		meta_note_pagecache(ctx->meta, ino); /* a mapping's fault (see direct_write) */
	n = cache_read_pin(ctx->cache, ino, off, size, &ref);
	if (n < 0) {
		fuse_reply_err(req, -n);
	} else if (n == 0) {
		fuse_reply_buf(req, NULL, 0);
	} else {
		fuse_reply_iov(req, ref.iov, ref.niov);
		cache_read_done(ctx->cache, &ref);
	}
	cache_note_latency(ctx->cache, CACHE_OP_READ, clock_now_ns() - t0);
}

/*
 * A write that did not go through the page cache: one of a direct open
 * (fh, see reply_open) or the kernel's O_DIRECT path of a cached open. Its
 * reply waits until the kernel dropped the range's pages (inval.h) when
 * the kernel may be filling pages of the file meanwhile (meta_pagecache):
 * a cached open exists or existed, or a read came through a direct open
 * without a lock owner - the kernel names the caller's lock owner in every
 * direct read (fuse_direct_io) and none in the reads that fill pages
 * (fuse_read_args_fill: readahead, a mapping's fault).
 */
static bool direct_write(const struct fuse_file_info *fi)
{
	return !fi->writepage && (fi->fh || (fi->flags & O_DIRECT));
}

static void ops_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
		      struct fuse_file_info *fi)
{
	struct ops_ctx *ctx = req_ctx(req);
	uint64_t t0 = clock_now_ns();
	ssize_t n;

	if (off < 0) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	n = cache_write(ctx->cache, ino, off, buf, size, !fi->writepage);
	if (n < 0)
		fuse_reply_err(req, -n);
	else if (n > 0 && direct_write(fi) && meta_pagecache(ctx->meta, ino))
		inval_reply_write(ctx->inval, req, ino, off, n);
	else
		fuse_reply_write(req, n);
	cache_note_latency(ctx->cache, CACHE_OP_WRITE, clock_now_ns() - t0);
}

/* close: a write-back error of this file not reported yet is reported here */
static void ops_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	fuse_reply_err(req, -cache_close(req_ctx(req)->cache, ino));
}

static void ops_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct ops_ctx *ctx = req_ctx(req);
	struct meta_attr a;

	meta_release_file(ctx->meta, ino, fi->fh);
	/* the last close of an unlinked file freed it: so is its cached data */
	if (meta_getattr(ctx->meta, ino, &a) == -ENOENT)
		cache_forget(ctx->cache, ino);
	fuse_reply_err(req, 0);
}

static void ops_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	struct ops_ctx *ctx = req_ctx(req);
	uint64_t t0 = clock_now_ns();
	int rc;

	/* data first (ordered mode), then every journal transaction so far */
	rc = cache_flush(ctx->cache, ino);
	if (rc == 0)
		rc = commit_sync(ctx->meta);
	fuse_reply_err(req, -rc);
	cache_note_latency(ctx->cache, CACHE_OP_FSYNC, clock_now_ns() - t0);
}

/*
 * An open directory (fi->fh): where its listing ends, set when a listing
 * starts (meta_readdir). The kernel sends one READDIR of a handle at a time
 * (getdents64 holds the file's position lock). No FOPEN_CACHE_DIR: every
 * getdents64 reaches meta.
 */
struct ops_dir {
	uint64_t end;
};

static void ops_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct ops_ctx *ctx = req_ctx(req);
	struct ops_dir *od;
	struct meta_attr a;
	int rc;

	rc = meta_getattr(ctx->meta, ino, &a);
	if (rc == 0 && !S_ISDIR(a.mode))
		rc = -ENOTDIR;
	if (rc < 0) {
		fuse_reply_err(req, -rc);
		return;
	}
	od = g_new0(struct ops_dir, 1);
	fi->fh = (uintptr_t)od;
	if (fuse_reply_open(req, fi) == -ENOENT)
		g_free(od); /* interrupted: no releasedir will come */
}

struct dir_fill {
	fuse_req_t req;
	struct ops_ctx *ctx;
	bool plus;
	char *buf;
	size_t size;
	size_t pos;
};

static int dir_fill(void *opaque, const char *name, const struct meta_attr *attr,
		    uint64_t next_cookie)
{
	struct dir_fill *d = opaque;
	size_t need, room = d->size - d->pos;

	if (d->plus) {
		struct fuse_entry_param e;

		fill_entry(d->ctx, attr, &e);
		need = fuse_add_direntry_plus(d->req, d->buf + d->pos, room, name, &e, next_cookie);
	} else {
		struct stat st;

		memset(&st, 0, sizeof(st));
		st.st_ino = attr->ino;
		st.st_mode = attr->mode;
		need = fuse_add_direntry(d->req, d->buf + d->pos, room, name, &st, next_cookie);
	}
	if (need > room)
		return 1; /* full: meta keeps this entry for the next call */
	d->pos += need;
	return 0;
}

static void do_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi, bool plus)
{
	struct ops_dir *od = (struct ops_dir *)(uintptr_t)fi->fh;
	struct ops_ctx *ctx = req_ctx(req);
	struct dir_fill d = { .req = req, .ctx = ctx, .plus = plus, .size = size };
	int rc;

	d.buf = g_try_malloc(size ? size : 1);
	if (!d.buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	rc = meta_readdir(ctx->meta, ino, off, &od->end, plus, dir_fill, &d);
	if (rc < 0 && d.pos == 0)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_buf(req, d.buf, d.pos); /* 0 bytes: end of directory */
	g_free(d.buf);
}

static void ops_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			struct fuse_file_info *fi)
{
	do_readdir(req, ino, size, off, fi, false);
}

static void ops_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			    struct fuse_file_info *fi)
{
	do_readdir(req, ino, size, off, fi, true);
}

static void ops_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	g_free((struct ops_dir *)(uintptr_t)fi->fh);
	fuse_reply_err(req, 0);
}

static void ops_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	fuse_reply_err(req, -commit_sync(req_ctx(req)->meta));
}

static void ops_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct ops_ctx *ctx = req_ctx(req);
	struct meta_statfs s;
	struct statvfs sv;
	int rc;

	rc = meta_statfs(ctx->meta, &s);
	if (rc < 0) {
		fuse_reply_err(req, -rc);
		return;
	}
	memset(&sv, 0, sizeof(sv));
	sv.f_bsize = META_BLOCK_SIZE;
	sv.f_frsize = META_BLOCK_SIZE;
	sv.f_blocks = s.blocks;
	sv.f_bfree = s.bfree;
	sv.f_bavail = s.bfree;
	sv.f_files = s.files;
	sv.f_ffree = s.ffree;
	sv.f_favail = s.ffree;
	sv.f_namemax = META_NAME_MAX;
	fuse_reply_statfs(req, &sv);
}

/* the statistics are a read-only xattr of the root that listxattr does not show */
static bool is_stats_xattr(fuse_ino_t ino, const char *name)
{
	return ino == META_ROOT_INO && strcmp(name, CACHE_STATS_XATTR) == 0;
}

/* the daemon's pid for umount.fuse.rmemfs (ops_xattr.h): read-only and not listed either */
static bool is_pid_xattr(fuse_ino_t ino, const char *name)
{
	return ino == META_ROOT_INO && strcmp(name, OPS_PID_XATTR) == 0;
}

/* "DAEMON_PID CALLER_PID\n" (ops_xattr.h) */
static void reply_pid(fuse_req_t req, size_t size)
{
	char buf[OPS_PID_MAX + 1];
	int n;

	n = g_snprintf(buf, sizeof(buf), "%d %d\n", (int)getpid(), (int)fuse_req_ctx(req)->pid);
	if (size == 0)
		fuse_reply_xattr(req, (size_t)n);
	else if ((size_t)n > size)
		fuse_reply_err(req, ERANGE);
	else
		fuse_reply_buf(req, buf, (size_t)n);
}

/* n bytes of stats text so far, plus a part's length or error */
static ssize_t stats_add(ssize_t n, ssize_t part)
{
	return part < 0 ? part : n + part;
}

static void reply_stats(fuse_req_t req, size_t size)
{
	struct ops_ctx *ctx = req_ctx(req);
	char *buf = g_malloc(CACHE_STATS_MAX);
	ssize_t n = 0;

	/* the pool's state first: "state up|away|failed" is what a user looks for */
	if (ctx->remote)
		n = remote_state_text(ctx->remote, buf, CACHE_STATS_MAX);
	if (n >= 0 && ctx->meta)
		n += (ssize_t)meta_sharing_text(ctx->meta, buf + n, CACHE_STATS_MAX - (size_t)n);
	if (n >= 0)
		n = stats_add(n, swapmode_text(ctx->swap, buf + n, CACHE_STATS_MAX - (size_t)n));
	if (n >= 0)
		n = stats_add(n, cache_stats_text(ctx->cache, buf + n, CACHE_STATS_MAX - (size_t)n));
	if (n >= 0)
		n = stats_add(n, io_stats_text(ctx->io, buf + n, CACHE_STATS_MAX - (size_t)n));
	if (n >= 0)
		n = stats_add(n, reqstats_text(&ctx->devio.req, buf + n,
					       CACHE_STATS_MAX - (size_t)n));
	if (n < 0)
		fuse_reply_err(req, -n);
	else if (size == 0)
		fuse_reply_xattr(req, CACHE_STATS_MAX); /* an upper bound: the text changes */
	else if ((size_t)n > size)
		fuse_reply_err(req, ERANGE);
	else
		fuse_reply_buf(req, buf, n);
	g_free(buf);
}

/*
 * rmemfs-ctl's replace: "OLD NEW" set as REMOTE_REPLACE_XATTR on the root,
 * by root or by whoever runs the daemon; the message of a failure goes to
 * the stats text (remote.h).
 */
static void ctl_replace(fuse_req_t req, const char *value, size_t size)
{
	const struct fuse_ctx *fc = fuse_req_ctx(req);
	char *text, **words;
	int rc = -EINVAL;

	if (fc->uid != 0 && fc->uid != getuid()) {
		fuse_reply_err(req, EPERM);
		return;
	}
	text = g_strndup(value, size);
	words = g_strsplit_set(g_strstrip(text), " \t", -1);
	if (g_strv_length(words) == 2 && *words[0] && *words[1])
		rc = remote_replace(req_ctx(req)->remote, words[0], words[1], NULL);
	g_strfreev(words);
	g_free(text);
	fuse_reply_err(req, -rc);
}

/* rmemfs-ctl's scrub: VERIFY_SCRUB_XATTR set on the root, by root or by whoever runs the daemon */
static void ctl_scrub(fuse_req_t req)
{
	const struct fuse_ctx *fc = fuse_req_ctx(req);

	if (fc->uid != 0 && fc->uid != getuid())
		fuse_reply_err(req, EPERM);
	else
		fuse_reply_err(req, -io_scrub_start(req_ctx(req)->io));
}

static void ops_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value,
			 size_t size, int flags)
{
	if (is_stats_xattr(ino, name) || is_pid_xattr(ino, name)) {
		fuse_reply_err(req, EPERM);
		return;
	}
	if (ino == META_ROOT_INO && strcmp(name, REMOTE_REPLACE_XATTR) == 0) {
		ctl_replace(req, value, size);
		return;
	}
	if (ino == META_ROOT_INO && strcmp(name, VERIFY_SCRUB_XATTR) == 0) {
		ctl_scrub(req);
		return;
	}
	fuse_reply_err(req, -meta_setxattr(req_ctx(req)->meta, ino, name, value, size, flags));
}

static void ops_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	struct ops_ctx *ctx = req_ctx(req);
	ssize_t n;
	char *buf;

	if (is_stats_xattr(ino, name)) {
		reply_stats(req, size);
		return;
	}
	if (is_pid_xattr(ino, name)) {
		reply_pid(req, size);
		return;
	}
	if (size == 0) {
		n = meta_getxattr(ctx->meta, ino, name, NULL, 0);
		if (n < 0)
			fuse_reply_err(req, -n);
		else
			fuse_reply_xattr(req, n);
		return;
	}
	buf = g_try_malloc(size);
	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	n = meta_getxattr(ctx->meta, ino, name, buf, size);
	if (n < 0)
		fuse_reply_err(req, -n);
	else
		fuse_reply_buf(req, buf, n);
	g_free(buf);
}

/*
 * trusted.* names are listed only to root (CAP_SYS_ADMIN), as on local
 * filesystems: the kernel filters getxattr/setxattr of them, but leaves
 * listxattr to the filesystem. Filters buf (n bytes) in place; returns the
 * new length.
 */
static size_t filter_trusted(char *buf, size_t n)
{
	size_t in = 0, out = 0;

	while (in < n) {
		size_t len = strnlen(buf + in, n - in) + 1;

		if (!g_str_has_prefix(buf + in, "trusted.")) {
			memmove(buf + out, buf + in, len);
			out += len;
		}
		in += len;
	}
	return out;
}

static void ops_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	struct ops_ctx *ctx = req_ctx(req);
	bool privileged = fuse_req_ctx(req)->uid == 0;
	ssize_t n, need;
	char *buf;

	do { /* the list may grow between asking its length and fetching it */
		need = meta_listxattr(ctx->meta, ino, NULL, 0);
		if (need < 0) {
			fuse_reply_err(req, -need);
			return;
		}
		if (privileged && size == 0) {
			fuse_reply_xattr(req, need);
			return;
		}
		buf = g_try_malloc(need ? need : 1);
		if (!buf) {
			fuse_reply_err(req, ENOMEM);
			return;
		}
		n = need ? meta_listxattr(ctx->meta, ino, buf, need) : 0;
		if (n == -ERANGE)
			g_free(buf);
	} while (n == -ERANGE);
	if (n >= 0 && !privileged)
		n = filter_trusted(buf, n);
	if (n < 0)
		fuse_reply_err(req, -n);
	else if (size == 0)
		fuse_reply_xattr(req, n);
	else if ((size_t)n > size)
		fuse_reply_err(req, ERANGE);
	else
		fuse_reply_buf(req, buf, n);
	g_free(buf);
}

static void ops_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	if (is_stats_xattr(ino, name) || is_pid_xattr(ino, name)) {
		fuse_reply_err(req, EPERM);
		return;
	}
	fuse_reply_err(req, -meta_removexattr(req_ctx(req)->meta, ino, name));
}

/* only asked without default_permissions (a mount of one user, by that user) */
static void ops_access(fuse_req_t req, fuse_ino_t ino, int mask)
{
	struct ops_ctx *ctx = req_ctx(req);
	struct meta_cred cred = req_cred(req);
	gid_t groups[OPS_MAX_GROUPS];
	struct meta_attr a;
	unsigned int bits;
	int rc;

	rc = meta_getattr(ctx->meta, ino, &a);
	if (rc < 0 || mask == F_OK || ctx->default_permissions) {
		fuse_reply_err(req, rc < 0 ? -rc : 0);
		return;
	}
	if (cred.uid == 0) {
		/* root may do anything but execute a file nobody may execute */
		bool x_denied = (mask & X_OK) && !S_ISDIR(a.mode) && !(a.mode & 0111);

		fuse_reply_err(req, x_denied ? EACCES : 0);
		return;
	}
	req_groups(req, groups, &cred);
	if (cred.uid == a.uid)
		bits = (a.mode >> 6) & 7;
	else if (meta_cred_in_group(&cred, a.gid))
		bits = (a.mode >> 3) & 7;
	else
		bits = a.mode & 7;
	fuse_reply_err(req, ((unsigned int)mask & bits) == (unsigned int)mask ? 0 : EACCES);
}

static void ops_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off, off_t len,
			  struct fuse_file_info *fi)
{
	struct ops_ctx *ctx = req_ctx(req);
	int rc;

	if (off < 0 || len <= 0) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	rc = cache_begin_exclusive(ctx->cache, ino, UINT64_MAX);
	if (rc == 0) {
		rc = io_fallocate(ctx->io, ino, mode, off, len);
		cache_end_exclusive(ctx->cache, ino, off, len);
	}
	fuse_reply_err(req, -rc);
}

static void ops_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence,
		      struct fuse_file_info *fi)
{
	struct ops_ctx *ctx = req_ctx(req);
	uint64_t result;
	int rc;

	if ((whence != SEEK_DATA && whence != SEEK_HOLE) || off < 0) {
		fuse_reply_err(req, EINVAL); /* the kernel does SEEK_SET/CUR/END itself */
		return;
	}
	/*
	 * Written data is data: the kernel's dirty pages (writeback cache: it
	 * does not write them back for FUSE_LSEEK) reach us through this
	 * invalidation, which writes them back and waits; then our cached
	 * writes go to the pool.
	 */
	if (ctx->writeback_cache && !ctx->direct_io && ctx->se) {
		rc = fuse_lowlevel_notify_inval_inode(ctx->se, ino, off, 0);
		if (rc < 0 && rc != -ENOSYS && rc != -ENOENT)
			g_message("lseek: fuse_lowlevel_notify_inval_inode: %s", g_strerror(-rc));
	}
	rc = cache_begin_exclusive(ctx->cache, ino, UINT64_MAX);
	if (rc == 0) {
		rc = extent_seek(ctx->meta, ino, off, whence, &result);
		cache_end_exclusive(ctx->cache, ino, 0, 0);
	}
	if (rc < 0)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_lseek(req, result);
}

static void ops_copy_file_range(fuse_req_t req, fuse_ino_t ino_in, off_t off_in,
				struct fuse_file_info *fi_in, fuse_ino_t ino_out, off_t off_out,
				struct fuse_file_info *fi_out, size_t len, int flags)
{
	struct ops_ctx *ctx = req_ctx(req);
	fuse_ino_t lo, hi;
	ssize_t n;
	int rc;

	if (flags != 0 || off_in < 0 || off_out < 0) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	/* both inodes exclusive, in ascending order (cache.h) */
	lo = MIN(ino_in, ino_out);
	hi = MAX(ino_in, ino_out);
	rc = cache_begin_exclusive(ctx->cache, lo, UINT64_MAX);
	if (rc == 0 && hi != lo) {
		rc = cache_begin_exclusive(ctx->cache, hi, UINT64_MAX);
		if (rc < 0)
			cache_end_exclusive(ctx->cache, lo, 0, 0);
	}
	if (rc < 0) {
		fuse_reply_err(req, -rc);
		return;
	}
	n = io_copy_range(ctx->io, ino_in, off_in, ino_out, off_out, len);
	if (hi != lo)
		cache_end_exclusive(ctx->cache, hi, hi == ino_out ? (uint64_t)off_out : 0,
				    hi == ino_out ? len : 0);
	cache_end_exclusive(ctx->cache, lo, lo == ino_out ? (uint64_t)off_out : 0,
			    lo == ino_out ? len : 0);
	if (n < 0)
		fuse_reply_err(req, -n);
	else
		fuse_reply_write(req, n);
}

const struct fuse_lowlevel_ops ops_lowlevel = {
	.init = ops_init,
	.destroy = ops_destroy,
	.lookup = ops_lookup,
	.forget = ops_forget,
	.forget_multi = ops_forget_multi,
	.getattr = ops_getattr,
	.setattr = ops_setattr,
	.readlink = ops_readlink,
	.mknod = ops_mknod,
	.mkdir = ops_mkdir,
	.unlink = ops_unlink,
	.rmdir = ops_rmdir,
	.symlink = ops_symlink,
	.rename = ops_rename,
	.link = ops_link,
	.open = ops_open,
	.read = ops_read,
	.write = ops_write,
	.flush = ops_flush,
	.release = ops_release,
	.fsync = ops_fsync,
	.opendir = ops_opendir,
	.readdir = ops_readdir,
	.readdirplus = ops_readdirplus,
	.releasedir = ops_releasedir,
	.fsyncdir = ops_fsyncdir,
	.statfs = ops_statfs,
	.setxattr = ops_setxattr,
	.getxattr = ops_getxattr,
	.listxattr = ops_listxattr,
	.removexattr = ops_removexattr,
	.access = ops_access,
	.create = ops_create,
	.fallocate = ops_fallocate,
	.lseek = ops_lseek,
	.copy_file_range = ops_copy_file_range,
};
