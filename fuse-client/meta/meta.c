// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * meta.c - the metadata operations of meta.h: lookups, attributes, the
 * namespace, xattrs and file block placement.
 *
 * Every operation takes m->lock, validates everything first (so it cannot
 * fail half-way), then changes RAM through the primitives of inode.c and
 * logs the resulting states as one journal transaction. meta owns the time
 * updates of namespace operations (POSIX): a created/removed/renamed entry
 * sets the parent's mtime and ctime; link count and attribute changes set
 * the inode's ctime; writes set mtime and ctime.
 *
 * Capacity: growth of the metadata is refused with -ENOSPC while the next
 * checkpoint would not fit its slot with some slack (room()); removals are
 * always allowed, so a full filesystem can be cleaned up.
 *
 * Block placement: meta_map(alloc) hands out FRESH blocks that are in no
 * journal record or checkpoint; meta_write_done() commits them once the data
 * is in the pool. fallocate allocates UNWRITTEN blocks (read as zeros, no
 * pool writes); a write turns them WRITTEN like fresh ones.
 */
#define G_LOG_DOMAIN "rmemfs-meta"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "alloc.h"
#include "journal.h"
#include "meta_int.h"
#include "remote.h"
#include "super.h"

#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0)
#endif
#ifndef RENAME_EXCHANGE
#define RENAME_EXCHANGE (1 << 1)
#endif

#define BS ((uint64_t)META_BLOCK_SIZE)
#define XATTR_VALUE_MAX 65536
#define SYMLINK_MAX 4095
#define FALLOC_TXN_RECS 1024 /* extents per fallocate transaction */
#define DIR_SIZE 4096

/* ---- helpers (m->lock held) ---- */

static int writable(struct meta *m)
{
	if (m->read_only)
		return -EROFS;
	if (remote_failed(m->r)) /* the pool is lost, or the lease */
		return -EIO;
	return 0;
}

static void txn_begin(struct meta *m)
{
	journal_begin(m->j);
}

static void txn_end(struct meta *m)
{
	journal_commit(m->j);
	meta_commit_kick(m);
}

static void log_inode(struct meta *m, struct meta_inode *in)
{
	meta_inode_touch_acct(m, in);
	journal_rec_inode(m->j, &in->a);
}

/* refuse growth by bytes while the next checkpoint would not fit with slack */
static int room(struct meta *m, uint64_t bytes)
{
	uint64_t slack = 4096 + m->g.slot_len / 128;

	if (m->ckpt_bytes + bytes + slack > m->g.slot_len)
		return -ENOSPC;
	return 0;
}

static uint64_t pool_off(struct meta *m, uint64_t pb)
{
	return m->g.data_off + pb * BS;
}

static void fill_attr(struct meta_inode *in, struct meta_attr *out)
{
	memset(out, 0, sizeof(*out));
	out->ino = in->a.ino;
	out->generation = 0;
	out->mode = in->a.mode;
	out->nlink = in->a.nlink;
	out->uid = in->a.uid;
	out->gid = in->a.gid;
	out->rdev = in->a.rdev;
	out->size = S_ISDIR(in->a.mode) ? DIR_SIZE : in->a.size;
	out->blocks = in->nblocks;
	out->atime = in->a.atime;
	out->mtime = in->a.mtime;
	out->ctime = in->a.ctime;
}

static int name_check(const char *name, size_t *nlen)
{
	*nlen = strnlen(name, META_NAME_MAX + 1);
	if (*nlen > META_NAME_MAX)
		return -ENAMETOOLONG;
	if (!*nlen || strchr(name, '/'))
		return -EINVAL;
	if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
		return -EINVAL;
	return 0;
}

/* parent must be an existing, live directory */
static int get_dir(struct meta *m, uint64_t ino, struct meta_inode **out)
{
	struct meta_inode *in = meta_inode_get(m, ino);

	if (!in)
		return -ENOENT;
	if (!in->dir)
		return -ENOTDIR;
	*out = in;
	return 0;
}

bool meta_cred_in_group(const struct meta_cred *cred, uint32_t gid)
{
	int i;

	if (cred->gid == gid)
		return true;
	for (i = 0; cred->groups && i < cred->ngroups; i++)
		if (cred->groups[i] == gid)
			return true;
	return false;
}

/* free an inode nobody refers to any more (inside a transaction) */
static bool maybe_free(struct meta *m, struct meta_inode *in)
{
	if (in->a.nlink || in->nlookup || in->nopen || in->a.ino == META_ROOT_INO)
		return false;
	journal_rec_inode_free(m->j, in->a.ino);
	meta_inode_destroy(m, in);
	return true;
}

/* ---- lookups and attributes ---- */

int meta_lookup(struct meta *m, uint64_t parent, const char *name, struct meta_attr *out)
{
	struct meta_inode *p, *in;
	struct meta_dirent *d;
	int rc;

	if (strnlen(name, META_NAME_MAX + 1) > META_NAME_MAX)
		return -ENAMETOOLONG;
	pthread_mutex_lock(&m->lock);
	rc = get_dir(m, parent, &p);
	if (rc < 0)
		goto out;
	if (strcmp(name, ".") == 0) {
		in = p;
	} else if (strcmp(name, "..") == 0) {
		in = meta_inode_get(m, p->parent ? p->parent : META_ROOT_INO);
	} else {
		d = meta_dir_lookup(p, name);
		if (!d) {
			rc = -ENOENT;
			goto out;
		}
		in = meta_inode_get(m, d->ino);
	}
	if (!in) {
		rc = -EIO;
		goto out;
	}
	in->nlookup++;
	fill_attr(in, out);
out:
	pthread_mutex_unlock(&m->lock);
	return rc;
}

int meta_getattr(struct meta *m, uint64_t ino, struct meta_attr *out)
{
	struct meta_inode *in;
	int rc = 0;

	pthread_mutex_lock(&m->lock);
	in = meta_inode_get(m, ino);
	if (in)
		fill_attr(in, out);
	else
		rc = -ENOENT;
	pthread_mutex_unlock(&m->lock);
	return rc;
}

/* the ownership rules, where the kernel did not check them (no default_permissions) */
static int setattr_perm(const struct meta_inode *in, const struct meta_setattr *sa,
			const struct meta_cred *cred)
{
	bool owner = cred->uid == in->a.uid;
	uint32_t v = sa->valid;

	if (cred->kernel_checked || cred->uid == 0)
		return 0;
	if ((v & META_SET_MODE) && !owner)
		return -EPERM;
	if ((v & META_SET_UID) && !(owner && sa->uid == in->a.uid))
		return -EPERM;
	if ((v & META_SET_GID) &&
	    !(owner && (sa->gid == in->a.gid || meta_cred_in_group(cred, sa->gid))))
		return -EPERM;
	if ((v & (META_SET_ATIME | META_SET_MTIME | META_SET_CTIME)) && !owner)
		return -EPERM;
	return 0;
}

static int setattr_check(const struct meta_inode *in, const struct meta_setattr *sa,
			 const struct meta_cred *cred)
{
	if (sa->valid & META_SET_SIZE) {
		if (S_ISDIR(in->a.mode))
			return -EISDIR;
		if (!S_ISREG(in->a.mode))
			return -EINVAL;
		if (sa->size > (uint64_t)INT64_MAX)
			return -EFBIG;
	}
	return setattr_perm(in, sa, cred);
}

/*
 * The set-id rules of chmod and chown where the kernel did not apply them
 * (it does with default_permissions, and sends the resulting mode): chmod by
 * a non-root caller drops S_ISGID for a group (the new one, if it changes
 * too) it is not in; chown of a non-directory clears S_ISUID, and S_ISGID if
 * group-executable (by root too, as Linux does).
 */
static uint32_t setattr_mode(const struct meta_inode *in, const struct meta_setattr *sa,
			     const struct meta_cred *cred, uint32_t mode)
{
	uint32_t gid = (sa->valid & META_SET_GID) ? sa->gid : in->a.gid;

	if (cred->kernel_checked)
		return mode;
	if ((sa->valid & META_SET_MODE) && cred->uid != 0 && !meta_cred_in_group(cred, gid))
		mode &= ~(uint32_t)S_ISGID;
	if ((sa->valid & (META_SET_UID | META_SET_GID)) && !S_ISDIR(mode)) {
		mode &= ~(uint32_t)S_ISUID;
		if (mode & S_IXGRP)
			mode &= ~(uint32_t)S_ISGID;
	}
	return mode;
}

int meta_setattr(struct meta *m, uint64_t ino, const struct meta_setattr *sa,
		 const struct meta_cred *cred, struct meta_attr *out)
{
	struct meta_inode *in;
	struct timespec now;
	uint32_t v = sa->valid;
	int rc;

	pthread_mutex_lock(&m->lock);
	in = meta_inode_get(m, ino);
	if (!in) {
		rc = -ENOENT;
		goto out;
	}
	rc = setattr_check(in, sa, cred);
	if (!rc)
		rc = writable(m);
	if (rc < 0)
		goto out;
	meta_now(&now);
	txn_begin(m);
	if (v & META_SET_SIZE) {
		if (sa->size < in->a.size) {
			uint64_t nb = (sa->size + BS - 1) / BS;

			meta_ext_clear(m, in, nb, UINT64_MAX - nb, true);
			journal_rec_ext_clear(m->j, ino, nb, UINT64_MAX - nb);
		}
		in->a.size = sa->size;
		in->a.mtime = now;
	}
	if (v & META_SET_MODE)
		in->a.mode = (in->a.mode & S_IFMT) | (sa->mode & 07777);
	in->a.mode = setattr_mode(in, sa, cred, in->a.mode);
	if (v & META_SET_UID)
		in->a.uid = sa->uid;
	if (v & META_SET_GID)
		in->a.gid = sa->gid;
	if (v & META_SET_ATIME_NOW)
		in->a.atime = now;
	else if (v & META_SET_ATIME)
		in->a.atime = sa->atime;
	if (v & META_SET_MTIME_NOW)
		in->a.mtime = now;
	else if (v & META_SET_MTIME)
		in->a.mtime = sa->mtime;
	in->a.ctime = (v & META_SET_CTIME) ? sa->ctime : now;
	log_inode(m, in);
	txn_end(m);
	fill_attr(in, out);
out:
	pthread_mutex_unlock(&m->lock);
	return rc;
}

void meta_forget(struct meta *m, uint64_t ino, uint64_t nlookup)
{
	struct meta_inode *in;

	pthread_mutex_lock(&m->lock);
	in = meta_inode_get(m, ino);
	if (in) {
		in->nlookup = nlookup > in->nlookup ? 0 : in->nlookup - nlookup;
		if (!in->a.nlink && !in->nlookup && !in->nopen && writable(m) == 0) {
			txn_begin(m);
			maybe_free(m, in);
			txn_end(m);
		}
	}
	pthread_mutex_unlock(&m->lock);
}

int meta_open(struct meta *m, uint64_t ino)
{
	struct meta_inode *in;
	int rc = 0;

	pthread_mutex_lock(&m->lock);
	in = meta_inode_get(m, ino);
	if (in)
		in->nopen++;
	else
		rc = -ENOENT;
	pthread_mutex_unlock(&m->lock);
	return rc;
}

void meta_release(struct meta *m, uint64_t ino)
{
	struct meta_inode *in;

	pthread_mutex_lock(&m->lock);
	in = meta_inode_get(m, ino);
	if (in && in->nopen) {
		in->nopen--;
		if (!in->a.nlink && !in->nlookup && !in->nopen && writable(m) == 0) {
			txn_begin(m);
			maybe_free(m, in);
			txn_end(m);
		}
	}
	pthread_mutex_unlock(&m->lock);
}

/* ---- namespace ---- */

static int create_node(struct meta *m, uint64_t parent, const char *name, uint32_t mode,
		       uint64_t rdev, const char *target, const struct meta_cred *cred,
		       struct meta_attr *out)
{
	struct meta_inode *p, *in;
	struct meta_dirent *d;
	struct layout_inode a;
	struct timespec now;
	size_t nlen, tlen = target ? strlen(target) : 0;
	int rc;

	rc = name_check(name, &nlen);
	if (rc < 0)
		return rc;
	pthread_mutex_lock(&m->lock);
	rc = get_dir(m, parent, &p);
	if (rc < 0)
		goto out;
	if (!p->a.nlink) {
		rc = -ENOENT; /* removed directory */
		goto out;
	}
	if (meta_dir_lookup(p, name)) {
		rc = -EEXIST;
		goto out;
	}
	if (S_ISDIR(mode) && p->a.nlink >= UINT32_MAX - 1) {
		rc = -EMLINK;
		goto out;
	}
	rc = writable(m);
	if (!rc)
		rc = room(m, 128 + nlen + tlen);
	if (rc < 0)
		goto out;

	meta_now(&now);
	memset(&a, 0, sizeof(a));
	a.ino = m->next_ino;
	a.mode = mode;
	a.nlink = S_ISDIR(mode) ? 2 : 1;
	a.uid = cred->uid;
	a.gid = cred->gid;
	if (p->a.mode & S_ISGID) {
		a.gid = p->a.gid;
		if (S_ISDIR(mode))
			a.mode |= S_ISGID;
	}
	if (S_ISCHR(mode) || S_ISBLK(mode))
		a.rdev = rdev;
	a.size = tlen;
	a.atime = a.mtime = a.ctime = now;

	txn_begin(m);
	in = meta_inode_create(m, &a);
	log_inode(m, in);
	if (target) {
		meta_symlink_set(m, in, target, tlen);
		journal_rec_symlink(m->j, in->a.ino, target, tlen);
	}
	d = meta_dir_add(m, p, name, nlen, in->a.ino, meta_mode_dtype(mode), 0);
	journal_rec_dirent_add(m->j, p->a.ino, name, nlen, in->a.ino, d->type, d->cookie);
	if (S_ISDIR(mode)) {
		in->parent = p->a.ino;
		p->a.nlink++;
	}
	p->a.mtime = p->a.ctime = now;
	log_inode(m, p);
	txn_end(m);
	in->nlookup++;
	fill_attr(in, out);
out:
	pthread_mutex_unlock(&m->lock);
	return rc;
}

int meta_mknod(struct meta *m, uint64_t parent, const char *name, uint32_t mode, uint64_t rdev,
	       const struct meta_cred *cred, struct meta_attr *out)
{
	if (!(mode & S_IFMT))
		mode |= S_IFREG;
	switch (mode & S_IFMT) {
	case S_IFREG:
	case S_IFIFO:
	case S_IFSOCK:
	case S_IFCHR:
	case S_IFBLK:
		break;
	default:
		return -EINVAL;
	}
	return create_node(m, parent, name, (mode & S_IFMT) | (mode & 07777), rdev, NULL, cred,
			   out);
}

int meta_mkdir(struct meta *m, uint64_t parent, const char *name, uint32_t mode,
	       const struct meta_cred *cred, struct meta_attr *out)
{
	return create_node(m, parent, name, S_IFDIR | (mode & 07777), 0, NULL, cred, out);
}

int meta_symlink(struct meta *m, uint64_t parent, const char *name, const char *target,
		 const struct meta_cred *cred, struct meta_attr *out)
{
	size_t tlen = strnlen(target, SYMLINK_MAX + 1);

	if (!tlen)
		return -ENOENT;
	if (tlen > SYMLINK_MAX)
		return -ENAMETOOLONG;
	return create_node(m, parent, name, S_IFLNK | 0777, 0, target, cred, out);
}

int meta_readlink(struct meta *m, uint64_t ino, char *buf, size_t cap)
{
	struct meta_inode *in;
	int rc = 0;

	pthread_mutex_lock(&m->lock);
	in = meta_inode_get(m, ino);
	if (!in)
		rc = -ENOENT;
	else if (!S_ISLNK(in->a.mode) || !in->symlink)
		rc = -EINVAL;
	else if (strlen(in->symlink) + 1 > cap)
		rc = -ENAMETOOLONG;
	else
		memcpy(buf, in->symlink, strlen(in->symlink) + 1);
	pthread_mutex_unlock(&m->lock);
	return rc;
}

int meta_link(struct meta *m, uint64_t ino, uint64_t newparent, const char *newname,
	      struct meta_attr *out)
{
	struct meta_inode *p, *in;
	struct meta_dirent *d;
	struct timespec now;
	size_t nlen;
	int rc;

	rc = name_check(newname, &nlen);
	if (rc < 0)
		return rc;
	pthread_mutex_lock(&m->lock);
	in = meta_inode_get(m, ino);
	if (!in) {
		rc = -ENOENT;
		goto out;
	}
	if (in->dir) {
		rc = -EPERM;
		goto out;
	}
	rc = get_dir(m, newparent, &p);
	if (rc < 0)
		goto out;
	if (!p->a.nlink || !in->a.nlink) {
		rc = -ENOENT;
		goto out;
	}
	if (meta_dir_lookup(p, newname)) {
		rc = -EEXIST;
		goto out;
	}
	if (in->a.nlink >= UINT32_MAX - 1) {
		rc = -EMLINK;
		goto out;
	}
	rc = writable(m);
	if (!rc)
		rc = room(m, 64 + nlen);
	if (rc < 0)
		goto out;
	meta_now(&now);
	txn_begin(m);
	in->a.nlink++;
	in->a.ctime = now;
	log_inode(m, in);
	d = meta_dir_add(m, p, newname, nlen, in->a.ino, meta_mode_dtype(in->a.mode), 0);
	journal_rec_dirent_add(m->j, p->a.ino, newname, nlen, in->a.ino, d->type, d->cookie);
	p->a.mtime = p->a.ctime = now;
	log_inode(m, p);
	txn_end(m);
	in->nlookup++;
	fill_attr(in, out);
out:
	pthread_mutex_unlock(&m->lock);
	return rc;
}

static void unlink_entry(struct meta *m, struct meta_inode *p, struct meta_dirent *d)
{
	journal_rec_dirent_del(m->j, p->a.ino, d->name, d->nlen);
	meta_dir_del(m, p, d);
}

int meta_unlink(struct meta *m, uint64_t parent, const char *name)
{
	struct meta_inode *p, *in;
	struct meta_dirent *d;
	struct timespec now;
	int rc;

	if (strnlen(name, META_NAME_MAX + 1) > META_NAME_MAX)
		return -ENAMETOOLONG;
	pthread_mutex_lock(&m->lock);
	rc = get_dir(m, parent, &p);
	if (rc < 0)
		goto out;
	d = meta_dir_lookup(p, name);
	if (!d) {
		rc = -ENOENT;
		goto out;
	}
	in = meta_inode_get(m, d->ino);
	if (in && in->dir) {
		rc = -EISDIR;
		goto out;
	}
	rc = writable(m);
	if (rc < 0)
		goto out;
	meta_now(&now);
	txn_begin(m);
	unlink_entry(m, p, d);
	p->a.mtime = p->a.ctime = now;
	log_inode(m, p);
	if (in) {
		if (in->a.nlink)
			in->a.nlink--;
		in->a.ctime = now;
		if (!maybe_free(m, in))
			log_inode(m, in);
	}
	txn_end(m);
out:
	pthread_mutex_unlock(&m->lock);
	return rc;
}

int meta_rmdir(struct meta *m, uint64_t parent, const char *name)
{
	struct meta_inode *p, *in;
	struct meta_dirent *d;
	struct timespec now;
	int rc;

	if (strnlen(name, META_NAME_MAX + 1) > META_NAME_MAX)
		return -ENAMETOOLONG;
	if (strcmp(name, ".") == 0)
		return -EINVAL;
	if (strcmp(name, "..") == 0)
		return -ENOTEMPTY;
	pthread_mutex_lock(&m->lock);
	rc = get_dir(m, parent, &p);
	if (rc < 0)
		goto out;
	d = meta_dir_lookup(p, name);
	if (!d) {
		rc = -ENOENT;
		goto out;
	}
	in = meta_inode_get(m, d->ino);
	if (in && !in->dir) {
		rc = -ENOTDIR;
		goto out;
	}
	if (in && meta_dir_count(in)) {
		rc = -ENOTEMPTY;
		goto out;
	}
	if (in && in->a.ino == META_ROOT_INO) {
		rc = -EBUSY;
		goto out;
	}
	rc = writable(m);
	if (rc < 0)
		goto out;
	meta_now(&now);
	txn_begin(m);
	unlink_entry(m, p, d);
	if (p->a.nlink > 2)
		p->a.nlink--;
	p->a.mtime = p->a.ctime = now;
	log_inode(m, p);
	if (in) {
		in->a.nlink = 0;
		in->a.ctime = now;
		if (!maybe_free(m, in))
			log_inode(m, in);
	}
	txn_end(m);
out:
	pthread_mutex_unlock(&m->lock);
	return rc;
}

/* is dir `anc` the directory `ino` or one of its ancestors? */
static bool is_ancestor(struct meta *m, uint64_t anc, uint64_t ino)
{
	unsigned int guard = 0;

	while (ino && guard++ < 1000000) {
		struct meta_inode *in;

		if (ino == anc)
			return true;
		if (ino == META_ROOT_INO)
			return false;
		in = meta_inode_get(m, ino);
		if (!in)
			return false;
		ino = in->parent;
	}
	return false;
}

static int rename_check(struct meta *m, struct meta_inode *src, struct meta_inode *dst,
			struct meta_inode *sp, struct meta_inode *dp, unsigned int flags)
{
	if (src->dir && (src->a.ino == META_ROOT_INO || is_ancestor(m, src->a.ino, dp->a.ino)))
		return -EINVAL;
	if (flags & RENAME_EXCHANGE) {
		if (dst->dir &&
		    (dst->a.ino == META_ROOT_INO || is_ancestor(m, dst->a.ino, sp->a.ino)))
			return -EINVAL;
		return 0;
	}
	if (!dst)
		return 0;
	if (src->dir && !dst->dir)
		return -ENOTDIR;
	if (!src->dir && dst->dir)
		return -EISDIR;
	if (dst->dir && meta_dir_count(dst))
		return -ENOTEMPTY;
	if (dst->a.ino == META_ROOT_INO)
		return -EBUSY;
	return 0;
}

static void rename_exchange(struct meta *m, struct meta_inode *sp, struct meta_dirent *sd,
			    struct meta_inode *src, struct meta_inode *dp, struct meta_dirent *dd,
			    struct meta_inode *dst, const struct timespec *now)
{
	uint8_t st = sd->type, dt = dd->type;

	sd->ino = dst->a.ino;
	sd->type = dt;
	dd->ino = src->a.ino;
	dd->type = st;
	/* same names and cookies, other inodes: the record replaces the entry as a whole */
	journal_rec_dirent_add(m->j, sp->a.ino, sd->name, sd->nlen, sd->ino, sd->type, sd->cookie);
	journal_rec_dirent_add(m->j, dp->a.ino, dd->name, dd->nlen, dd->ino, dd->type, dd->cookie);
	/* the byte counts of both entries may change with the inode numbers */
	m->ckpt_bytes -= meta_dirent_bytes(src->a.ino, sd->cookie, sd->nlen) +
			 meta_dirent_bytes(dst->a.ino, dd->cookie, dd->nlen);
	m->ckpt_bytes += meta_dirent_bytes(sd->ino, sd->cookie, sd->nlen) +
			 meta_dirent_bytes(dd->ino, dd->cookie, dd->nlen);
	if (sp != dp) {
		if (src->dir) {
			sp->a.nlink--;
			dp->a.nlink++;
			src->parent = dp->a.ino;
		}
		if (dst->dir) {
			dp->a.nlink--;
			sp->a.nlink++;
			dst->parent = sp->a.ino;
		}
	}
	src->a.ctime = dst->a.ctime = *now;
	log_inode(m, src);
	log_inode(m, dst);
}

int meta_rename(struct meta *m, uint64_t parent, const char *name, uint64_t newparent,
		const char *newname, unsigned int flags)
{
	struct meta_inode *sp, *dp, *src, *dst = NULL;
	struct meta_dirent *sd, *dd;
	struct timespec now;
	size_t nlen;
	int rc;

	if (flags & ~(unsigned int)(RENAME_NOREPLACE | RENAME_EXCHANGE))
		return -EINVAL;
	if ((flags & RENAME_NOREPLACE) && (flags & RENAME_EXCHANGE))
		return -EINVAL;
	if (strnlen(name, META_NAME_MAX + 1) > META_NAME_MAX)
		return -ENAMETOOLONG;
	rc = name_check(newname, &nlen);
	if (rc < 0)
		return rc;
	pthread_mutex_lock(&m->lock);
	rc = get_dir(m, parent, &sp);
	if (!rc)
		rc = get_dir(m, newparent, &dp);
	if (rc < 0)
		goto out;
	sd = meta_dir_lookup(sp, name);
	if (!sd) {
		rc = -ENOENT;
		goto out;
	}
	src = meta_inode_get(m, sd->ino);
	dd = meta_dir_lookup(dp, newname);
	if (dd)
		dst = meta_inode_get(m, dd->ino);
	if (!src || (dd && !dst)) {
		rc = -EIO;
		goto out;
	}
	if (!dp->a.nlink) {
		rc = -ENOENT;
		goto out;
	}
	if ((flags & RENAME_NOREPLACE) && dd) {
		rc = -EEXIST;
		goto out;
	}
	if ((flags & RENAME_EXCHANGE) && !dd) {
		rc = -ENOENT;
		goto out;
	}
	if (dd && dd->ino == sd->ino) {
		rc = 0; /* the same file (hard links or the same entry): nothing to do */
		goto out;
	}
	rc = rename_check(m, src, dst, sp, dp, flags);
	if (!rc)
		rc = writable(m);
	if (!rc)
		rc = room(m, 128 + nlen);
	if (rc < 0)
		goto out;

	meta_now(&now);
	txn_begin(m);
	if (flags & RENAME_EXCHANGE) {
		rename_exchange(m, sp, sd, src, dp, dd, dst, &now);
	} else {
		uint64_t cookie = dd ? dd->cookie : 0;
		struct meta_dirent *nd;

		unlink_entry(m, sp, sd);
		if (dd) /* the new entry takes the replaced one's place (cookie) */
			meta_dir_del(m, dp, dd);
		nd = meta_dir_add(m, dp, newname, nlen, src->a.ino, meta_mode_dtype(src->a.mode),
				  cookie);
		journal_rec_dirent_add(m->j, dp->a.ino, newname, nlen, src->a.ino, nd->type,
				       nd->cookie);
		if (src->dir && sp != dp) {
			sp->a.nlink--;
			dp->a.nlink++;
			src->parent = dp->a.ino;
		}
		src->a.ctime = now;
		log_inode(m, src);
		if (dst) {
			if (dst->dir) {
				dst->a.nlink = 0;
				dp->a.nlink--;
			} else if (dst->a.nlink) {
				dst->a.nlink--;
			}
			dst->a.ctime = now;
			if (!maybe_free(m, dst))
				log_inode(m, dst);
		}
	}
	sp->a.mtime = sp->a.ctime = now;
	log_inode(m, sp);
	if (dp != sp) {
		dp->a.mtime = dp->a.ctime = now;
		log_inode(m, dp);
	}
	txn_end(m);
out:
	pthread_mutex_unlock(&m->lock);
	return rc;
}

int meta_readdir(struct meta *m, uint64_t ino, uint64_t cookie, bool plus, meta_dirent_fn fill,
		 void *ctx)
{
	struct meta_inode *dir, *child;
	struct meta_attr attr;
	GTreeNode *node;
	uint64_t from;
	int rc;

	pthread_mutex_lock(&m->lock);
	rc = get_dir(m, ino, &dir);
	if (rc < 0)
		goto out;
	if (cookie < 1) {
		fill_attr(dir, &attr);
		if (fill(ctx, ".", &attr, 1))
			goto out;
	}
	if (cookie < 2) {
		child = meta_inode_get(m, dir->parent ? dir->parent : META_ROOT_INO);
		fill_attr(child ? child : dir, &attr);
		if (fill(ctx, "..", &attr, 2))
			goto out;
	}
	from = MAX(cookie, 2);
	for (node = g_tree_upper_bound(dir->dir->by_cookie, &from); node;
	     node = g_tree_node_next(node)) {
		struct meta_dirent *d = g_tree_node_value(node);

		child = meta_inode_get(m, d->ino);
		if (!child)
			continue;
		fill_attr(child, &attr);
		if (fill(ctx, d->name, &attr, d->cookie))
			break;
		if (plus)
			child->nlookup++;
	}
out:
	pthread_mutex_unlock(&m->lock);
	return rc;
}

/* ---- xattrs ---- */

static int xattr_name_check(const char *name)
{
	size_t len = strnlen(name, XATTR_NAME_MAX + 1);
	static const char *const ns[] = { "user.", "trusted.", "security." };
	size_t i;

	if (len > XATTR_NAME_MAX)
		return -ERANGE;
	for (i = 0; i < G_N_ELEMENTS(ns); i++) {
		if (g_str_has_prefix(name, ns[i]))
			return len > strlen(ns[i]) ? 0 : -EINVAL;
	}
	return -EOPNOTSUPP;
}

int meta_setxattr(struct meta *m, uint64_t ino, const char *name, const void *value, size_t size,
		  int flags)
{
	struct meta_inode *in;
	struct meta_xattr *x;
	int rc;

	rc = xattr_name_check(name);
	if (rc < 0)
		return rc;
	if (size > XATTR_VALUE_MAX)
		return -E2BIG;
	if (flags & ~(XATTR_CREATE | XATTR_REPLACE))
		return -EINVAL;
	pthread_mutex_lock(&m->lock);
	in = meta_inode_get(m, ino);
	if (!in) {
		rc = -ENOENT;
		goto out;
	}
	x = meta_xattr_find(in, name, NULL);
	if ((flags & XATTR_CREATE) && x) {
		rc = -EEXIST;
		goto out;
	}
	if ((flags & XATTR_REPLACE) && !x) {
		rc = -ENODATA;
		goto out;
	}
	rc = writable(m);
	if (!rc && (!x || size > x->len))
		rc = room(m, meta_xattr_bytes(strlen(name), size));
	if (rc < 0)
		goto out;
	txn_begin(m);
	meta_xattr_set(m, in, name, value, size);
	journal_rec_xattr_set(m->j, ino, name, value, size);
	meta_now(&in->a.ctime);
	log_inode(m, in);
	txn_end(m);
out:
	pthread_mutex_unlock(&m->lock);
	return rc;
}

ssize_t meta_getxattr(struct meta *m, uint64_t ino, const char *name, void *buf, size_t size)
{
	struct meta_inode *in;
	struct meta_xattr *x;
	ssize_t rc;

	rc = xattr_name_check(name);
	if (rc < 0)
		return rc;
	pthread_mutex_lock(&m->lock);
	in = meta_inode_get(m, ino);
	if (!in) {
		rc = -ENOENT;
		goto out;
	}
	x = meta_xattr_find(in, name, NULL);
	if (!x) {
		rc = -ENODATA;
	} else if (size == 0) {
		rc = (ssize_t)x->len;
	} else if (size < x->len) {
		rc = -ERANGE;
	} else {
		if (x->len)
			memcpy(buf, x->value, x->len);
		rc = (ssize_t)x->len;
	}
out:
	pthread_mutex_unlock(&m->lock);
	return rc;
}

ssize_t meta_listxattr(struct meta *m, uint64_t ino, char *buf, size_t size)
{
	struct meta_inode *in;
	size_t need = 0, at = 0;
	ssize_t rc;
	guint i;

	pthread_mutex_lock(&m->lock);
	in = meta_inode_get(m, ino);
	if (!in) {
		rc = -ENOENT;
		goto out;
	}
	for (i = 0; in->xattrs && i < in->xattrs->len; i++)
		need += strlen(((struct meta_xattr *)g_ptr_array_index(in->xattrs, i))->name) + 1;
	if (size == 0) {
		rc = (ssize_t)need;
		goto out;
	}
	if (size < need) {
		rc = -ERANGE;
		goto out;
	}
	for (i = 0; in->xattrs && i < in->xattrs->len; i++) {
		struct meta_xattr *x = g_ptr_array_index(in->xattrs, i);
		size_t l = strlen(x->name) + 1;

		memcpy(buf + at, x->name, l);
		at += l;
	}
	rc = (ssize_t)need;
out:
	pthread_mutex_unlock(&m->lock);
	return rc;
}

int meta_removexattr(struct meta *m, uint64_t ino, const char *name)
{
	struct meta_inode *in;
	int rc;

	rc = xattr_name_check(name);
	if (rc < 0)
		return rc;
	pthread_mutex_lock(&m->lock);
	in = meta_inode_get(m, ino);
	if (!in) {
		rc = -ENOENT;
		goto out;
	}
	if (!meta_xattr_find(in, name, NULL)) {
		rc = -ENODATA;
		goto out;
	}
	rc = writable(m);
	if (rc < 0)
		goto out;
	txn_begin(m);
	meta_xattr_del(m, in, name);
	journal_rec_xattr_del(m->j, ino, name);
	meta_now(&in->a.ctime);
	log_inode(m, in);
	txn_end(m);
out:
	pthread_mutex_unlock(&m->lock);
	return rc;
}

/* ---- file data placement ---- */

static int get_reg(struct meta *m, uint64_t ino, struct meta_inode **out)
{
	struct meta_inode *in = meta_inode_get(m, ino);

	if (!in)
		return -ENOENT;
	if (in->dir)
		return -EISDIR;
	if (!S_ISREG(in->a.mode))
		return -EINVAL;
	*out = in;
	return 0;
}

/* where the blocks for file block b would best go: right after its predecessor */
static uint64_t goal_for(struct meta_inode *in, uint64_t b)
{
	struct meta_ext *e, *next;

	if (b) {
		e = meta_ext_find(in, b - 1, NULL);
		if (e)
			return e->pblock + (b - e->fblock);
	}
	meta_ext_find(in, b, &next);
	if (next && next->pblock >= next->fblock - b)
		return next->pblock - (next->fblock - b);
	return UINT64_MAX;
}

static void push_ext(struct meta_extent *ext, int *n, uint64_t fb, uint64_t count, uint64_t off,
		     bool fresh)
{
	if (*n) {
		struct meta_extent *p = &ext[*n - 1];

		if (p->file_block + p->count == fb && p->fresh == fresh &&
		    ((!p->pool_off && !off) ||
		     (p->pool_off && off && p->pool_off + p->count * BS == off))) {
			p->count += count;
			return;
		}
	}
	ext[*n].file_block = fb;
	ext[*n].count = count;
	ext[*n].pool_off = off;
	ext[*n].fresh = fresh;
	(*n)++;
}

int meta_map(struct meta *m, uint64_t ino, uint64_t off, uint64_t len, bool alloc,
	     struct meta_extent *ext, int max)
{
	struct meta_inode *in;
	GArray *undo = NULL;
	uint64_t b, last;
	bool retried = false;
	int n, rc;

	if (!len || max <= 0)
		return 0;
	if (off + len < off || off + len > (uint64_t)INT64_MAX)
		return -EFBIG;
again:
	n = 0;
	pthread_mutex_lock(&m->lock);
	rc = get_reg(m, ino, &in);
	if (!rc && alloc)
		rc = writable(m);
	if (rc < 0)
		goto out;
	b = off / BS;
	last = (off + len - 1) / BS;
	while (b <= last && n < max) {
		struct meta_ext *e, *next;
		uint64_t run, start, got;

		e = meta_ext_find(in, b, &next);
		if (e) {
			uint64_t pb = e->pblock + (b - e->fblock);

			run = MIN(e->fblock + e->count, last + 1) - b;
			if (alloc)
				push_ext(ext, &n, b, run, pool_off(m, pb),
					 e->state != META_EXT_WRITTEN);
			else if (e->state == META_EXT_WRITTEN)
				push_ext(ext, &n, b, run, pool_off(m, pb), false);
			else
				push_ext(ext, &n, b, run, 0, false);
			b += run;
			continue;
		}
		run = (next ? MIN(next->fblock, last + 1) : last + 1) - b;
		if (!alloc) {
			push_ext(ext, &n, b, run, 0, false);
			b += run;
			continue;
		}
		rc = room(m, 64);
		if (!rc)
			rc = alloc_get(m->alloc, goal_for(in, b), run, &start, &got);
		if (rc < 0)
			break;
		meta_ext_set(m, in, b, got, start, META_EXT_FRESH);
		if (!undo)
			undo = g_array_new(FALSE, FALSE, sizeof(uint64_t) * 2);
		g_array_append_vals(undo, ((uint64_t[2]){ b, got }), 1);
		push_ext(ext, &n, b, got, pool_off(m, start), true);
		b += got;
	}
	if (rc == -ENOSPC && undo) {
		guint i;

		for (i = 0; i < undo->len; i++) {
			uint64_t *u = &g_array_index(undo, uint64_t, i * 2);

			meta_ext_clear(m, in, u[0], u[1], true);
		}
	}
	if (rc == -ENOSPC && !retried && alloc_npending(m->alloc)) {
		/* freed blocks wait for their transaction: make it durable, try again */
		pthread_mutex_unlock(&m->lock);
		if (undo)
			g_array_set_size(undo, 0);
		retried = true;
		if (meta_sync(m) == 0)
			goto again;
		pthread_mutex_lock(&m->lock);
	}
out:
	pthread_mutex_unlock(&m->lock);
	if (undo)
		g_array_free(undo, TRUE);
	return rc < 0 ? rc : n;
}

struct restate {
	uint64_t fb, count, pb;
};

#define WRITE_COMMIT 0x1 /* the blocks of the range become WRITTEN */
#define WRITE_TIMES 0x2 /* mtime = ctime = now */
#define WRITE_SIZE 0x4 /* size = max(size, end of the range) */

static int write_update(struct meta *m, uint64_t ino, uint64_t off, uint64_t len,
			unsigned int what);

int meta_write_done(struct meta *m, uint64_t ino, uint64_t off, uint64_t len)
{
	return write_update(m, ino, off, len, WRITE_COMMIT | WRITE_TIMES | (len ? WRITE_SIZE : 0));
}

int meta_write_accept(struct meta *m, uint64_t ino, uint64_t end, bool times)
{
	return write_update(m, ino, end, 0, WRITE_SIZE | (times ? WRITE_TIMES : 0));
}

int meta_write_commit(struct meta *m, uint64_t ino, uint64_t off, uint64_t len)
{
	return write_update(m, ino, off, len, WRITE_COMMIT);
}

/* meta_write_done and its two halves: the WRITE_* parts of it in what */
static int write_update(struct meta *m, uint64_t ino, uint64_t off, uint64_t len,
			unsigned int what)
{
	struct meta_inode *in;
	GArray *parts;
	uint64_t b, last, end = off + len;
	bool changed;
	guint i;
	int rc;

	pthread_mutex_lock(&m->lock);
	rc = get_reg(m, ino, &in);
	if (!rc)
		rc = writable(m);
	if (rc < 0)
		goto out;
	if (end < off) {
		rc = -EFBIG;
		goto out;
	}
	parts = g_array_new(FALSE, FALSE, sizeof(struct restate));
	if ((what & WRITE_COMMIT) && len) {
		b = off / BS;
		last = (off + len - 1) / BS;
		while (b <= last) {
			struct meta_ext *next, *e = meta_ext_find(in, b, &next);
			struct restate r;

			if (!e) {
				if (!next || next->fblock > last)
					break;
				b = next->fblock;
				continue;
			}
			r.fb = b;
			r.count = MIN(e->fblock + e->count, last + 1) - b;
			r.pb = e->pblock + (b - e->fblock);
			if (e->state != META_EXT_WRITTEN)
				g_array_append_val(parts, r);
			b += r.count;
		}
	}
	txn_begin(m);
	for (i = 0; i < parts->len; i++) {
		struct restate *r = &g_array_index(parts, struct restate, i);

		meta_ext_clear(m, in, r->fb, r->count, false);
		meta_ext_set(m, in, r->fb, r->count, r->pb, META_EXT_WRITTEN);
		journal_rec_ext_set(m->j, ino, r->fb, r->count, r->pb, META_EXT_WRITTEN);
	}
	changed = parts->len > 0;
	g_array_free(parts, TRUE);
	if ((what & WRITE_SIZE) && end > in->a.size) {
		in->a.size = end;
		changed = true;
	}
	if (what & WRITE_TIMES) {
		meta_now(&in->a.mtime);
		in->a.ctime = in->a.mtime;
		changed = true;
	}
	if (changed)
		log_inode(m, in);
	txn_end(m);
out:
	pthread_mutex_unlock(&m->lock);
	return rc;
}

/* blocks of [b, last] not yet allocated */
static uint64_t count_holes(struct meta_inode *in, uint64_t b, uint64_t last)
{
	uint64_t holes = 0;

	while (b <= last) {
		struct meta_ext *next, *e = meta_ext_find(in, b, &next);

		if (e) {
			b = e->fblock + e->count;
			continue;
		}
		if (!next || next->fblock > last) {
			holes += last + 1 - b;
			break;
		}
		holes += next->fblock - b;
		b = next->fblock;
	}
	return holes;
}

int meta_fallocate(struct meta *m, uint64_t ino, uint64_t off, uint64_t len, int mode)
{
	struct meta_inode *in;
	struct timespec now;
	uint64_t b, last, need, nrec = 0;
	bool retried = false, grew = false;
	int rc;

	if (mode & ~FALLOC_FL_KEEP_SIZE)
		return -EOPNOTSUPP;
	if (!len)
		return -EINVAL;
	if (off + len < off || off + len > (uint64_t)INT64_MAX)
		return -EFBIG;
again:
	pthread_mutex_lock(&m->lock);
	rc = get_reg(m, ino, &in);
	if (!rc)
		rc = writable(m);
	if (rc < 0)
		goto out;
	b = off / BS;
	last = (off + len - 1) / BS;
	need = count_holes(in, b, last);
	if (need > alloc_nfree(m->alloc)) {
		if (!retried && alloc_npending(m->alloc)) {
			pthread_mutex_unlock(&m->lock);
			retried = true;
			if (meta_sync(m) == 0)
				goto again;
			pthread_mutex_lock(&m->lock);
		}
		rc = -ENOSPC;
		goto out;
	}
	meta_now(&now);
	txn_begin(m);
	while (b <= last) {
		struct meta_ext *next, *e = meta_ext_find(in, b, &next);
		uint64_t run, start, got;

		if (e) {
			b = e->fblock + e->count;
			continue;
		}
		run = (next ? MIN(next->fblock, last + 1) : last + 1) - b;
		rc = room(m, 64);
		if (!rc)
			rc = alloc_get(m->alloc, goal_for(in, b), run, &start, &got);
		if (rc < 0)
			break;
		meta_ext_set(m, in, b, got, start, META_EXT_UNWRITTEN);
		journal_rec_ext_set(m->j, ino, b, got, start, META_EXT_UNWRITTEN);
		b += got;
		if (++nrec % FALLOC_TXN_RECS == 0) {
			log_inode(m, in);
			txn_end(m);
			txn_begin(m);
		}
	}
	if (!rc && !(mode & FALLOC_FL_KEEP_SIZE) && off + len > in->a.size) {
		in->a.size = off + len;
		grew = true;
	}
	if (grew)
		in->a.mtime = now;
	in->a.ctime = now;
	log_inode(m, in);
	txn_end(m);
out:
	pthread_mutex_unlock(&m->lock);
	return rc;
}

int meta_punch_hole(struct meta *m, uint64_t ino, uint64_t off, uint64_t len)
{
	struct meta_inode *in;
	uint64_t first, end;
	int rc;

	if (off + len < off)
		return -EINVAL;
	pthread_mutex_lock(&m->lock);
	rc = get_reg(m, ino, &in);
	if (!rc)
		rc = writable(m);
	if (rc < 0)
		goto out;
	first = (off + BS - 1) / BS;
	end = (off + len) / BS;
	txn_begin(m);
	if (end > first) {
		meta_ext_clear(m, in, first, end - first, true);
		journal_rec_ext_clear(m->j, ino, first, end - first);
	}
	meta_now(&in->a.mtime);
	in->a.ctime = in->a.mtime;
	log_inode(m, in);
	txn_end(m);
out:
	pthread_mutex_unlock(&m->lock);
	return rc;
}

int meta_seek(struct meta *m, uint64_t ino, uint64_t off, int whence, uint64_t *result)
{
	struct meta_inode *in;
	struct meta_ext *e, *next;
	uint64_t size, b;
	int rc;

	pthread_mutex_lock(&m->lock);
	rc = get_reg(m, ino, &in);
	if (rc < 0)
		goto out;
	size = in->a.size;
	if (off >= size) {
		rc = -ENXIO;
		goto out;
	}
	b = off / BS;
	e = meta_ext_find(in, b, &next);
	if (whence == SEEK_DATA) {
		if (e)
			*result = off;
		else if (next && next->fblock * BS < size)
			*result = next->fblock * BS;
		else
			rc = -ENXIO;
	} else if (whence == SEEK_HOLE) {
		if (!e) {
			*result = off;
		} else {
			uint64_t endb = e->fblock + e->count;

			while ((e = meta_ext_find(in, endb, NULL)))
				endb = e->fblock + e->count;
			*result = MIN(endb * BS, size);
		}
	} else {
		rc = -EINVAL;
	}
out:
	pthread_mutex_unlock(&m->lock);
	return rc;
}

int meta_touch_atime(struct meta *m, uint64_t ino)
{
	struct meta_inode *in;
	int rc;

	pthread_mutex_lock(&m->lock);
	in = meta_inode_get(m, ino);
	rc = in ? writable(m) : -ENOENT;
	if (rc < 0)
		goto out;
	txn_begin(m);
	meta_now(&in->a.atime);
	log_inode(m, in);
	txn_end(m);
out:
	pthread_mutex_unlock(&m->lock);
	return rc;
}

int meta_statfs(struct meta *m, struct meta_statfs *out)
{
	uint64_t slack, free_bytes;

	pthread_mutex_lock(&m->lock);
	memset(out, 0, sizeof(*out));
	out->blocks = m->g.data_blocks;
	out->bfree = m->alloc ? alloc_nfree(m->alloc) + alloc_npending(m->alloc) : 0;
	slack = 4096 + m->g.slot_len / 128;
	free_bytes = m->ckpt_bytes + slack < m->g.slot_len ?
			     m->g.slot_len - slack - m->ckpt_bytes : 0;
	/* an empty file with a short name costs about 64 bytes of checkpoint */
	out->ffree = free_bytes / 64;
	out->files = g_hash_table_size(m->inodes) + out->ffree;
	pthread_mutex_unlock(&m->lock);
	return 0;
}
