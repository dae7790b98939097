// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * meta.c - the metadata operations of meta.h: lookups, attributes, the
 * namespace and xattrs, and the steps every operation shares (meta_int.h).
 *
 * Every operation takes m->lock, validates everything first (so it cannot
 * fail half-way), then changes RAM through the primitives of inode.c and
 * logs the resulting states as one journal transaction. meta owns the time
 * updates of namespace operations (POSIX): a created/removed/renamed entry
 * sets the parent's mtime and ctime; link count and attribute changes set
 * the inode's ctime; writes set mtime and ctime.
 *
 * Capacity: growth of the metadata is refused with -ENOSPC while the next
 * checkpoint would not fit its slot with some slack (meta_room()); removals
 * are always allowed, so a full filesystem can be cleaned up.
 */
#define G_LOG_DOMAIN "rmemfs-meta"

#include "meta.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "alloc.h"
#include "clock.h"
#include "commit.h"
#include "inode.h"
#include "journal.h"
#include "follow.h"
#include "hold.h"
#include "meta_int.h"
#include "remote.h"

#define BS ((uint64_t)META_BLOCK_SIZE)
#define XATTR_VALUE_MAX 65536
#define SYMLINK_MAX 4095
#define DIR_SIZE 4096

/* ---- the steps every operation shares (m->lock held unless said) ---- */

int meta_get(struct meta *m, uint64_t ino, enum meta_kind kind, struct meta_inode **out)
{
	struct meta_inode *in = inode_get(m, ino);

	if (!in)
		return -ENOENT;
	if (kind == META_DIR && !inode_dir(in))
		return -ENOTDIR;
	if (kind == META_REG && inode_dir(in))
		return -EISDIR;
	if (kind == META_REG && !S_ISREG(in->a.mode))
		return -EINVAL;
	*out = in;
	return 0;
}

int meta_lock_get(struct meta *m, uint64_t ino, enum meta_kind kind, struct meta_inode **out)
{
	int rc;

	pthread_mutex_lock(&m->lock);
	rc = meta_get(m, ino, kind, out);
	if (rc < 0)
		pthread_mutex_unlock(&m->lock);
	return rc;
}

int meta_unlock(struct meta *m, int rc)
{
	pthread_mutex_unlock(&m->lock);
	return rc;
}

/* growth is refused while the next checkpoint would not fit its slot with this slack */
static uint64_t ckpt_slack(const struct meta *m)
{
	return 4096 + m->g.slot_len / 128;
}

int meta_room(struct meta *m, uint64_t grow)
{
	if (m->ckpt_bytes + grow + ckpt_slack(m) > m->g.slot_len)
		return -ENOSPC;
	return 0;
}

int meta_may_change(struct meta *m, uint64_t grow)
{
	if (m->read_only)
		return -EROFS;
	if (remote_failed(m->r)) /* the pool is lost, or the lease */
		return -EIO;
	return grow ? meta_room(m, grow) : 0;
}

void meta_txn_begin(struct meta *m, struct timespec *now)
{
	if (now)
		clock_file_time(now);
	journal_begin(m->j);
}

void meta_log_inode(struct meta *m, struct meta_inode *in)
{
	struct layout_inode a;

	inode_touch_acct(m, in);
	inode_attr_get(in, &a);
	journal_rec_inode(m->j, &a);
	in->times_unlogged = 0;
}

void meta_txn_end(struct meta *m, struct meta_inode *in)
{
	if (in)
		meta_log_inode(m, in);
	journal_commit(m->j);
	commit_kick(m);
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
	out->rdev = inode_rdev(in);
	out->size = S_ISDIR(in->a.mode) ? DIR_SIZE : in->a.size;
	out->blocks = inode_nblocks(in);
	out->atime = inode_time_get(&in->a.atime);
	out->mtime = inode_time_get(&in->a.mtime);
	out->ctime = inode_time_get(&in->a.ctime);
}

/* a name an entry may have; *nlen gets its length */
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

/* check name (*nlen: its length), then take m->lock and find ino, of kind */
static int name_lock_get(struct meta *m, const char *name, size_t *nlen, uint64_t ino,
			 enum meta_kind kind, struct meta_inode **out)
{
	int rc = name_check(name, nlen);

	return rc < 0 ? rc : meta_lock_get(m, ino, kind, out);
}

/*
 * Take m->lock and find the entry name of directory parent: *p, *d and its
 * inode *in (NULL when the entry names a missing inode). On error m->lock is
 * released again.
 */
static int lock_entry(struct meta *m, uint64_t parent, const char *name, struct meta_inode **p,
		      struct meta_dirent **d, struct meta_inode **in)
{
	int rc;

	if (strnlen(name, META_NAME_MAX + 1) > META_NAME_MAX)
		return -ENAMETOOLONG;
	rc = meta_lock_get(m, parent, META_DIR, p);
	if (rc < 0)
		return rc;
	*d = inode_dir_lookup(*p, name);
	if (!*d)
		return meta_unlock(m, -ENOENT);
	*in = inode_get(m, (*d)->ino);
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
	if (in->a.nlink || in->nlookup || in->is_open || in->a.ino == META_ROOT_INO)
		return false;
	journal_rec_inode_free(m->j, in->a.ino);
	inode_destroy(m, in);
	return true;
}

/* after a reference went away: free the inode in a transaction of its own if unused */
static void free_if_unused(struct meta *m, struct meta_inode *in)
{
	if (in->a.nlink || in->nlookup || in->is_open || meta_may_change(m, 0) < 0)
		return;
	meta_txn_begin(m, NULL);
	maybe_free(m, in);
	meta_txn_end(m, NULL);
}

/* in lost a name (inside a transaction): log it, or free it if nothing refers to it */
static void name_dropped(struct meta *m, struct meta_inode *in, const struct timespec *now)
{
	inode_time_set(&in->a.ctime, now);
	if (!maybe_free(m, in))
		meta_log_inode(m, in);
}

/* directory p's entries changed (inside a transaction) */
static void dir_changed(struct meta *m, struct meta_inode *p, const struct timespec *now)
{
	inode_time_set(&p->a.mtime, now);
	inode_time_set(&p->a.ctime, now);
	meta_log_inode(m, p);
}

/* ---- lookups and attributes ---- */

/* take m->lock and find the inode "." or ".." of ino names (meta_lookup, meta.h) */
static int lock_dot(struct meta *m, uint64_t ino, const char *name, struct meta_inode **in)
{
	bool dotdot = name[1] != '\0';
	struct meta_inode *p;
	int rc;

	rc = meta_lock_get(m, ino, dotdot ? META_DIR : META_ANY, &p);
	if (rc < 0)
		return rc;
	if (!p->a.nlink)
		return meta_unlock(m, -ENOENT);
	*in = dotdot ? inode_get(m, p->dir->parent ? p->dir->parent : META_ROOT_INO) : p;
	return 0;
}

int meta_lookup(struct meta *m, uint64_t parent, const char *name, struct meta_attr *out)
{
	struct meta_inode *p, *in;
	struct meta_dirent *d;
	int rc;

	if (strcmp(name, ".") && strcmp(name, ".."))
		rc = lock_entry(m, parent, name, &p, &d, &in);
	else
		rc = lock_dot(m, parent, name, &in);
	if (rc < 0)
		return rc;
	if (!in)
		return meta_unlock(m, -EIO);
	inode_ref(in);
	fill_attr(in, out);
	return meta_unlock(m, 0);
}

int meta_getattr(struct meta *m, uint64_t ino, struct meta_attr *out)
{
	struct meta_inode *in;
	int rc;

	rc = meta_lock_get(m, ino, META_ANY, &in);
	if (rc < 0)
		return rc;
	fill_attr(in, out);
	return meta_unlock(m, 0);
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

/* apply sa to in (inside a transaction) */
static void setattr_apply(struct meta *m, struct meta_inode *in, const struct meta_setattr *sa,
			  const struct meta_cred *cred, const struct timespec *now)
{
	uint32_t v = sa->valid;

	if (v & META_SET_SIZE) {
		if (sa->size < in->a.size) {
			uint64_t nb = (sa->size + BS - 1) / BS;

			inode_ext_clear(m, in, nb, UINT64_MAX - nb, true);
			journal_rec_ext_clear(m->j, in->a.ino, nb, UINT64_MAX - nb);
		}
		in->a.size = sa->size;
		inode_time_set(&in->a.mtime, now);
	}
	if (v & META_SET_MODE)
		in->a.mode = (in->a.mode & S_IFMT) | (sa->mode & 07777);
	in->a.mode = setattr_mode(in, sa, cred, in->a.mode);
	if (v & META_SET_UID)
		in->a.uid = sa->uid;
	if (v & META_SET_GID)
		in->a.gid = sa->gid;
	if (v & META_SET_ATIME_NOW)
		inode_time_set(&in->a.atime, now);
	else if (v & META_SET_ATIME)
		inode_time_set(&in->a.atime, &sa->atime);
	if (v & META_SET_MTIME_NOW)
		inode_time_set(&in->a.mtime, now);
	else if (v & META_SET_MTIME)
		inode_time_set(&in->a.mtime, &sa->mtime);
	inode_time_set(&in->a.ctime, (v & META_SET_CTIME) ? &sa->ctime : now);
}

int meta_setattr(struct meta *m, uint64_t ino, const struct meta_setattr *sa,
		 const struct meta_cred *cred, struct meta_attr *out)
{
	struct meta_inode *in;
	struct timespec now;
	int rc;

	rc = meta_lock_get(m, ino, META_ANY, &in);
	if (rc < 0)
		return rc;
	rc = setattr_check(in, sa, cred);
	if (!rc)
		rc = meta_may_change(m, 0);
	if (rc < 0)
		return meta_unlock(m, rc);
	meta_txn_begin(m, &now);
	setattr_apply(m, in, sa, cred, &now);
	meta_txn_end(m, in);
	fill_attr(in, out);
	return meta_unlock(m, 0);
}

/*
 * The kernel's references to ino: open +1 / -1 (release), cached -1 with the
 * release of a page-cached open, forget lookups dropped.
 */
static int change_refs(struct meta *m, uint64_t ino, int open, int cached, uint64_t forget)
{
	struct inode_opens o;
	struct meta_inode *in;
	int rc = meta_lock_get(m, ino, META_ANY, &in);

	if (rc < 0)
		return rc;
	o = inode_opens_get(m, in);
	if (cached < 0 && o.ncached)
		o.ncached--;
	if (open < 0 && !o.nopen) {
		inode_opens_set(m, in, o);
		return meta_unlock(m, 0);
	}
	o.nopen += open;
	inode_opens_set(m, in, o);
	if (in->nlookup != UINT32_MAX) /* saturated: the count is lost, keep the inode */
		in->nlookup = forget > in->nlookup ? 0 : in->nlookup - (uint32_t)forget;
	free_if_unused(m, in);
	return meta_unlock(m, 0);
}

void meta_forget(struct meta *m, uint64_t ino, uint64_t nlookup)
{
	change_refs(m, ino, 0, 0, nlookup);
}

int meta_open(struct meta *m, uint64_t ino)
{
	return change_refs(m, ino, 1, 0, 0);
}

void meta_release(struct meta *m, uint64_t ino)
{
	change_refs(m, ino, -1, 0, 0);
}

int meta_open_file(struct meta *m, uint64_t ino, bool want_direct, bool drops_pages)
{
	struct inode_opens o;
	struct meta_inode *in;
	int rc = meta_lock_get(m, ino, META_ANY, &in);

	if (rc < 0)
		return rc;
	o = inode_opens_get(m, in);
	rc = want_direct && !o.ncached;
	if (!rc) {
		o.ncached++;
		in->pagecache = true;
	} else if (drops_pages) {
		in->pagecache = false;
	}
	o.nopen++;
	inode_opens_set(m, in, o);
	return meta_unlock(m, rc);
}

bool meta_pagecache(struct meta *m, uint64_t ino)
{
	struct meta_inode *in;
	bool maybe;

	if (meta_lock_get(m, ino, META_ANY, &in) < 0)
		return false;
	maybe = in->pagecache;
	meta_unlock(m, 0);
	return maybe;
}

void meta_note_pagecache(struct meta *m, uint64_t ino)
{
	struct meta_inode *in;

	if (meta_lock_get(m, ino, META_ANY, &in) < 0)
		return;
	in->pagecache = true;
	meta_unlock(m, 0);
}

void meta_release_file(struct meta *m, uint64_t ino, bool direct)
{
	change_refs(m, ino, -1, direct ? 0 : -1, 0);
}

/* ---- namespace ---- */

/* the attributes of a new inode of mode in directory p */
static void new_inode_attr(struct meta *m, struct meta_inode *p, uint32_t mode, uint64_t rdev,
			   size_t size, const struct meta_cred *cred, struct layout_inode *a)
{
	memset(a, 0, sizeof(*a));
	a->ino = m->next_ino;
	a->mode = mode;
	a->nlink = S_ISDIR(mode) ? 2 : 1;
	a->uid = cred->uid;
	a->gid = cred->gid;
	if (p->a.mode & S_ISGID) {
		a->gid = p->a.gid;
		if (S_ISDIR(mode))
			a->mode |= S_ISGID;
	}
	if (S_ISCHR(mode) || S_ISBLK(mode))
		a->rdev = rdev;
	a->size = size;
	clock_file_time(&a->mtime);
	a->atime = a->ctime = a->mtime;
}

/* may directory p get a new entry name for in (in: NULL for a new inode of mode)? */
static int add_check(struct meta *m, struct meta_inode *p, const char *name, uint32_t mode,
		     struct meta_inode *in, uint64_t grow)
{
	if (!p->a.nlink || (in && !in->a.nlink))
		return -ENOENT; /* removed directory or file */
	if (inode_dir_lookup(p, name))
		return -EEXIST;
	if (S_ISDIR(mode) && p->a.nlink >= UINT32_MAX - 1)
		return -EMLINK;
	if (in && in->a.nlink >= UINT32_MAX - 1)
		return -EMLINK;
	return meta_may_change(m, grow);
}

/* add entry name -> in (logged already) to directory p (inside a transaction) */
static void add_entry(struct meta *m, struct meta_inode *p, const char *name, size_t nlen,
		      struct meta_inode *in, const struct timespec *now)
{
	struct meta_dirent *d;

	d = inode_dir_add(m, p, name, nlen, in->a.ino, inode_dtype(in->a.mode), 0);
	journal_rec_dirent_add(m->j, p->a.ino, name, nlen, in->a.ino, d->type, d->cookie);
	if (S_ISDIR(in->a.mode)) {
		in->dir->parent = p->a.ino;
		p->a.nlink++;
	}
	dir_changed(m, p, now);
	inode_ref(in);
}

static int create_node(struct meta *m, uint64_t parent, const char *name, uint32_t mode,
		       uint64_t rdev, const char *target, const struct meta_cred *cred,
		       struct meta_attr *out)
{
	struct meta_inode *p, *in;
	struct layout_inode a;
	size_t nlen, tlen = target ? strlen(target) : 0;
	int rc;

	rc = name_lock_get(m, name, &nlen, parent, META_DIR, &p);
	if (rc < 0)
		return rc;
	rc = add_check(m, p, name, mode, NULL, 128 + nlen + tlen);
	if (rc < 0)
		return meta_unlock(m, rc);
	new_inode_attr(m, p, mode, rdev, tlen, cred, &a);
	meta_txn_begin(m, NULL);
	in = inode_create(m, &a);
	meta_log_inode(m, in);
	if (target) {
		inode_symlink_set(m, in, target, tlen);
		journal_rec_symlink(m->j, in->a.ino, target, tlen);
	}
	add_entry(m, p, name, nlen, in, &a.ctime);
	meta_txn_end(m, NULL);
	fill_attr(in, out);
	return meta_unlock(m, 0);
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
	int rc;

	rc = meta_lock_get(m, ino, META_ANY, &in);
	if (rc < 0)
		return rc;
	if (!S_ISLNK(in->a.mode) || !in->symlink)
		rc = -EINVAL;
	else if (strlen(in->symlink) + 1 > cap)
		rc = -ENAMETOOLONG;
	else
		memcpy(buf, in->symlink, strlen(in->symlink) + 1);
	return meta_unlock(m, rc);
}

int meta_link(struct meta *m, uint64_t ino, uint64_t newparent, const char *newname,
	      struct meta_attr *out)
{
	struct meta_inode *p, *in;
	struct timespec now;
	size_t nlen;
	int rc;

	rc = name_lock_get(m, newname, &nlen, ino, META_ANY, &in);
	if (rc < 0)
		return rc;
	rc = inode_dir(in) ? -EPERM : meta_get(m, newparent, META_DIR, &p);
	if (!rc)
		rc = add_check(m, p, newname, in->a.mode, in, 64 + nlen);
	if (rc < 0)
		return meta_unlock(m, rc);
	meta_txn_begin(m, &now);
	in->a.nlink++;
	inode_time_set(&in->a.ctime, &now);
	meta_log_inode(m, in);
	add_entry(m, p, newname, nlen, in, &now);
	meta_txn_end(m, NULL);
	fill_attr(in, out);
	return meta_unlock(m, 0);
}

/* the link counts after in (NULL if missing) lost a name in directory p */
static void name_removed(struct meta_inode *p, struct meta_inode *in, bool dir)
{
	if (dir) {
		if (p->a.nlink > 2)
			p->a.nlink--;
		if (in)
			in->a.nlink = 0;
	} else if (in && in->a.nlink) {
		in->a.nlink--;
	}
}

/* remove entry d of directory p, of inode in (NULL if missing), in a transaction of its own */
static void remove_entry(struct meta *m, struct meta_inode *p, struct meta_dirent *d,
			 struct meta_inode *in, bool dir)
{
	struct timespec now;

	meta_txn_begin(m, &now);
	journal_rec_dirent_del(m->j, p->a.ino, d->name, d->nlen);
	inode_dir_del(m, p, d);
	name_removed(p, in, dir);
	dir_changed(m, p, &now);
	if (in)
		name_dropped(m, in, &now);
	meta_txn_end(m, NULL);
}

int meta_unlink(struct meta *m, uint64_t parent, const char *name)
{
	struct meta_inode *p, *in;
	struct meta_dirent *d;
	int rc;

	rc = lock_entry(m, parent, name, &p, &d, &in);
	if (rc < 0)
		return rc;
	rc = in && inode_dir(in) ? -EISDIR : meta_may_change(m, 0);
	if (!rc)
		remove_entry(m, p, d, in, false);
	return meta_unlock(m, rc);
}

int meta_rmdir(struct meta *m, uint64_t parent, const char *name)
{
	struct meta_inode *p, *in;
	struct meta_dirent *d;
	int rc;

	if (strcmp(name, ".") == 0)
		return -EINVAL;
	if (strcmp(name, "..") == 0)
		return -ENOTEMPTY;
	rc = lock_entry(m, parent, name, &p, &d, &in);
	if (rc < 0)
		return rc;
	if (in && !inode_dir(in))
		rc = -ENOTDIR;
	else if (in && inode_dir_count(in))
		rc = -ENOTEMPTY;
	else if (in && in->a.ino == META_ROOT_INO)
		rc = -EBUSY;
	else
		rc = meta_may_change(m, 0);
	if (!rc)
		remove_entry(m, p, d, in, true);
	return meta_unlock(m, rc);
}

/* ---- rename ---- */

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
		in = inode_get(m, ino);
		if (!in || !inode_dir(in))
			return false;
		ino = in->dir->parent;
	}
	return false;
}

/* both ends of a rename: the directories, their entries and the inodes they name */
struct rename_ends {
	struct meta_inode *sp, *dp, *src, *dst;
	struct meta_dirent *sd, *dd;
};

static int rename_check(struct meta *m, const struct rename_ends *e, unsigned int flags)
{
	struct meta_inode *src = e->src, *dst = e->dst;

	if (inode_dir(src) &&
	    (src->a.ino == META_ROOT_INO || is_ancestor(m, src->a.ino, e->dp->a.ino)))
		return -EINVAL;
	if (flags & META_RENAME_EXCHANGE) {
		if (inode_dir(dst) &&
		    (dst->a.ino == META_ROOT_INO || is_ancestor(m, dst->a.ino, e->sp->a.ino)))
			return -EINVAL;
		return 0;
	}
	if (!dst)
		return 0;
	if (inode_dir(src) && !inode_dir(dst))
		return -ENOTDIR;
	if (!inode_dir(src) && inode_dir(dst))
		return -EISDIR;
	if (inode_dir(dst) && inode_dir_count(dst))
		return -ENOTEMPTY;
	if (dst->a.ino == META_ROOT_INO)
		return -EBUSY;
	return 0;
}

/* directory in moves from directory from to directory to */
static void dir_moved(struct meta_inode *in, struct meta_inode *from, struct meta_inode *to)
{
	if (!inode_dir(in) || from == to)
		return;
	from->a.nlink--;
	to->a.nlink++;
	in->dir->parent = to->a.ino;
}

static void rename_exchange(struct meta *m, struct rename_ends *e, const struct timespec *now)
{
	struct meta_dirent *sd = e->sd, *dd = e->dd;
	uint8_t st = sd->type, dt = dd->type;

	sd->ino = e->dst->a.ino;
	sd->type = dt;
	dd->ino = e->src->a.ino;
	dd->type = st;
	/* same names and cookies, other inodes: the record replaces the entry as a whole */
	journal_rec_dirent_add(m->j, e->sp->a.ino, sd->name, sd->nlen, sd->ino, sd->type,
			       sd->cookie);
	journal_rec_dirent_add(m->j, e->dp->a.ino, dd->name, dd->nlen, dd->ino, dd->type,
			       dd->cookie);
	/* the byte counts of both entries may change with the inode numbers */
	m->ckpt_bytes -= inode_dirent_bytes(e->src->a.ino, sd->cookie, sd->nlen) +
			 inode_dirent_bytes(e->dst->a.ino, dd->cookie, dd->nlen);
	m->ckpt_bytes += inode_dirent_bytes(sd->ino, sd->cookie, sd->nlen) +
			 inode_dirent_bytes(dd->ino, dd->cookie, dd->nlen);
	dir_moved(e->src, e->sp, e->dp);
	dir_moved(e->dst, e->dp, e->sp);
	inode_time_set(&e->src->a.ctime, now);
	inode_time_set(&e->dst->a.ctime, now);
	meta_log_inode(m, e->src);
	meta_log_inode(m, e->dst);
}

/*
 * The cookie the renamed entry gets (0: a new one), which decides what a
 * listing that is under way sees (ARCHITECTURE.md, "Listings during
 * changes"). Within one directory the entry keeps its place: its own cookie
 * for a new name, over a name the lower of the two cookies, whose slot a
 * listing has either passed already (it saw the old entry there and sees
 * nothing at the other, now a hole) or will reach (it sees the new entry
 * there once). Into another directory it takes the replaced entry's cookie,
 * else a new one, which the listing does not reach (it ends where the
 * directory's next cookie was when it began). An existing name never moves
 * to a higher cookie, nor does a file within its directory, so a listing sees
 * neither twice through a rename.
 */
static uint64_t rename_cookie(const struct rename_ends *e)
{
	if (e->sp != e->dp)
		return e->dd ? e->dd->cookie : 0;
	return e->dd ? MIN(e->dd->cookie, e->sd->cookie) : e->sd->cookie;
}

static void rename_replace(struct meta *m, struct rename_ends *e, const char *newname,
			   size_t nlen, const struct timespec *now)
{
	uint64_t cookie = rename_cookie(e);
	struct meta_dirent *nd;

	journal_rec_dirent_del(m->j, e->sp->a.ino, e->sd->name, e->sd->nlen);
	inode_dir_del(m, e->sp, e->sd);
	if (e->dd)
		inode_dir_del(m, e->dp, e->dd);
	nd = inode_dir_add(m, e->dp, newname, nlen, e->src->a.ino, inode_dtype(e->src->a.mode),
			   cookie);
	journal_rec_dirent_add(m->j, e->dp->a.ino, newname, nlen, e->src->a.ino, nd->type,
			       nd->cookie);
	dir_moved(e->src, e->sp, e->dp);
	inode_time_set(&e->src->a.ctime, now);
	meta_log_inode(m, e->src);
	if (e->dst) {
		name_removed(e->dp, e->dst, inode_dir(e->dst) != NULL);
		name_dropped(m, e->dst, now);
	}
}

/* take m->lock, find both ends and check them against flags; on error m->lock is released */
static int rename_lock(struct meta *m, uint64_t parent, const char *name, uint64_t newparent,
		       const char *newname, unsigned int flags, struct rename_ends *e)
{
	int rc;

	rc = meta_lock_get(m, parent, META_DIR, &e->sp);
	if (rc < 0)
		return rc;
	rc = meta_get(m, newparent, META_DIR, &e->dp);
	if (!rc) {
		e->sd = inode_dir_lookup(e->sp, name);
		rc = e->sd ? 0 : -ENOENT;
	}
	if (rc < 0)
		return meta_unlock(m, rc);
	e->src = inode_get(m, e->sd->ino);
	e->dd = inode_dir_lookup(e->dp, newname);
	e->dst = e->dd ? inode_get(m, e->dd->ino) : NULL;
	if (!e->src || (e->dd && !e->dst))
		rc = -EIO;
	else if (!e->dp->a.nlink)
		rc = -ENOENT;
	else if ((flags & META_RENAME_NOREPLACE) && e->dd)
		rc = -EEXIST;
	else if ((flags & META_RENAME_EXCHANGE) && !e->dd)
		rc = -ENOENT;
	return rc < 0 ? meta_unlock(m, rc) : 0;
}

int meta_rename(struct meta *m, uint64_t parent, const char *name, uint64_t newparent,
		const char *newname, unsigned int flags)
{
	struct rename_ends e;
	struct timespec now;
	size_t nlen;
	int rc;

	if (flags & ~(unsigned int)(META_RENAME_NOREPLACE | META_RENAME_EXCHANGE))
		return -EINVAL;
	if ((flags & META_RENAME_NOREPLACE) && (flags & META_RENAME_EXCHANGE))
		return -EINVAL;
	if (strnlen(name, META_NAME_MAX + 1) > META_NAME_MAX)
		return -ENAMETOOLONG;
	rc = name_check(newname, &nlen);
	if (rc < 0)
		return rc;
	rc = rename_lock(m, parent, name, newparent, newname, flags, &e);
	if (rc < 0)
		return rc;
	if (e.dd && e.dd->ino == e.sd->ino) /* the same file (hard links or the same entry) */
		return meta_unlock(m, 0);
	rc = rename_check(m, &e, flags);
	if (!rc)
		rc = meta_may_change(m, 128 + nlen);
	if (rc < 0)
		return meta_unlock(m, rc);
	meta_txn_begin(m, &now);
	if (flags & META_RENAME_EXCHANGE)
		rename_exchange(m, &e, &now);
	else
		rename_replace(m, &e, newname, nlen, &now);
	dir_changed(m, e.sp, &now);
	if (e.dp != e.sp)
		dir_changed(m, e.dp, &now);
	meta_txn_end(m, NULL);
	return meta_unlock(m, 0);
}

/* ---- listing ---- */

int meta_readdir(struct meta *m, uint64_t ino, uint64_t cookie, uint64_t *end, bool plus,
		 meta_dirent_fn fill, void *ctx)
{
	struct meta_inode *dir, *child;
	struct meta_attr attr;
	struct meta_dirent *d;
	char name[NAME_MAX + 1];
	uint64_t from;
	int rc;

	rc = meta_lock_get(m, ino, META_DIR, &dir);
	if (rc < 0)
		return rc;
	if (end && (cookie < 1 || !*end))
		*end = dir->dir->next_cookie;
	if (cookie < 1) {
		fill_attr(dir, &attr);
		if (fill(ctx, ".", &attr, 1))
			return meta_unlock(m, 0);
	}
	if (cookie < 2) {
		child = inode_get(m, dir->dir->parent ? dir->dir->parent : META_ROOT_INO);
		fill_attr(child ? child : dir, &attr);
		if (fill(ctx, "..", &attr, 2))
			return meta_unlock(m, 0);
	}
	from = MAX(cookie, 2);
	for (d = inode_dir_next(dir, from); d && (!end || d->cookie < *end);
	     d = inode_dir_next(dir, d->cookie)) {
		child = inode_get(m, d->ino);
		if (!child)
			continue;
		fill_attr(child, &attr);
		if (fill(ctx, inode_dirent_name(d, name), &attr, d->cookie))
			break;
		if (plus)
			inode_ref(child);
	}
	return meta_unlock(m, 0);
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

/* take m->lock and find ino and its xattr name (*x NULL when absent) */
static int xattr_lock(struct meta *m, uint64_t ino, const char *name, struct meta_inode **in,
		      struct meta_xattr **x)
{
	int rc;

	rc = xattr_name_check(name);
	if (!rc)
		rc = meta_lock_get(m, ino, META_ANY, in);
	if (!rc)
		*x = inode_xattr_find(m, *in, name, NULL);
	return rc;
}

/* set (value) or remove (value NULL) xattr name of in, in a transaction of its own */
static void xattr_change(struct meta *m, struct meta_inode *in, const char *name,
			 const void *value, size_t size)
{
	struct timespec now;

	meta_txn_begin(m, &now);
	inode_time_set(&in->a.ctime, &now);
	if (value) {
		inode_xattr_set(m, in, name, value, size);
		journal_rec_xattr_set(m->j, in->a.ino, name, value, size);
	} else {
		inode_xattr_del(m, in, name);
		journal_rec_xattr_del(m->j, in->a.ino, name);
	}
	meta_txn_end(m, in);
}

int meta_setxattr(struct meta *m, uint64_t ino, const char *name, const void *value, size_t size,
		  int flags)
{
	struct meta_inode *in;
	struct meta_xattr *x = NULL;
	int rc;

	rc = xattr_name_check(name);
	if (!rc && size > XATTR_VALUE_MAX)
		rc = -E2BIG;
	if (!rc && (flags & ~(XATTR_CREATE | XATTR_REPLACE)))
		rc = -EINVAL;
	if (!rc)
		rc = xattr_lock(m, ino, name, &in, &x);
	if (rc < 0)
		return rc;
	if ((flags & XATTR_CREATE) && x)
		rc = -EEXIST;
	else if ((flags & XATTR_REPLACE) && !x)
		rc = -ENODATA;
	else
		rc = meta_may_change(m, (!x || size > x->len) ?
					     inode_xattr_bytes(strlen(name), size) : 0);
	if (!rc)
		xattr_change(m, in, name, value ? value : "", size);
	return meta_unlock(m, rc);
}

/* the xattr reply rule: size 0 asks for the length; too small: -ERANGE; else copy */
static ssize_t xattr_reply(void *buf, size_t size, const void *data, size_t len)
{
	if (size && size < len)
		return -ERANGE;
	if (size && len)
		memcpy(buf, data, len);
	return (ssize_t)len;
}

ssize_t meta_getxattr(struct meta *m, uint64_t ino, const char *name, void *buf, size_t size)
{
	struct meta_inode *in;
	struct meta_xattr *x = NULL;
	ssize_t rc;

	rc = xattr_lock(m, ino, name, &in, &x);
	if (!rc) {
		rc = x ? xattr_reply(buf, size, x->value, x->len) : -ENODATA;
		pthread_mutex_unlock(&m->lock);
	}
	return rc;
}

ssize_t meta_listxattr(struct meta *m, uint64_t ino, char *buf, size_t size)
{
	GString *names = g_string_new(NULL);
	struct meta_inode *in;
	GPtrArray *xattrs;
	ssize_t rc;
	guint i;

	rc = meta_lock_get(m, ino, META_ANY, &in);
	xattrs = rc ? NULL : inode_xattrs(m, in);
	for (i = 0; xattrs && i < xattrs->len; i++) {
		struct meta_xattr *x = g_ptr_array_index(xattrs, i);

		g_string_append_len(names, x->name, (gssize)strlen(x->name) + 1);
	}
	if (!rc) {
		rc = xattr_reply(buf, size, names->str, names->len);
		pthread_mutex_unlock(&m->lock);
	}
	g_string_free(names, TRUE);
	return rc;
}

int meta_removexattr(struct meta *m, uint64_t ino, const char *name)
{
	struct meta_inode *in;
	struct meta_xattr *x = NULL;
	int rc;

	rc = xattr_lock(m, ino, name, &in, &x);
	if (rc < 0)
		return rc;
	rc = x ? meta_may_change(m, 0) : -ENODATA;
	if (!rc)
		xattr_change(m, in, name, NULL, 0);
	return meta_unlock(m, rc);
}

/* ---- times and space ---- */

int meta_touch_atime(struct meta *m, uint64_t ino)
{
	struct meta_inode *in;
	struct timespec now;
	int rc;

	rc = meta_lock_get(m, ino, META_ANY, &in);
	if (rc < 0)
		return rc;
	rc = meta_may_change(m, 0);
	if (!rc) {
		meta_txn_begin(m, &now);
		inode_time_set(&in->a.atime, &now);
		meta_txn_end(m, in);
	}
	return meta_unlock(m, rc);
}

int meta_statfs(struct meta *m, struct meta_statfs *out)
{
	uint64_t slack, free_bytes;

	pthread_mutex_lock(&m->lock);
	memset(out, 0, sizeof(*out));
	out->blocks = m->g.data_blocks;
	/* (a reader has no allocator: what the extents it follows leave) */
	out->bfree = m->alloc ? alloc_nfree(m->alloc) + alloc_npending(m->alloc) :
				m->g.data_blocks - MIN(m->blocks_mapped, m->g.data_blocks);
	slack = ckpt_slack(m);
	free_bytes = m->ckpt_bytes + slack < m->g.slot_len ?
			     m->g.slot_len - slack - m->ckpt_bytes : 0;
	/* an empty file with a short name costs about 64 bytes of checkpoint */
	out->ffree = free_bytes / 64;
	out->files = g_hash_table_size(m->inodes) + out->ffree;
	pthread_mutex_unlock(&m->lock);
	return 0;
}

size_t meta_sharing_text(struct meta *m, char *buf, size_t cap)
{
	return m->follow ? follow_stats_text(m, buf, cap) : hold_stats_text(m, buf, cap);
}
