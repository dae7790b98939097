/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * meta_int.h - struct meta, shared inside the metadata layer (not by the
 * FUSE layer or the data path, which see meta.h, extent.h, commit.h and
 * mount.h), and the steps every metadata operation shares (meta.c):
 * validate first, then change RAM through the primitives (inode.h) and log
 * the matching journal records as one transaction.
 *
 * Locking: m->lock protects everything in struct meta except the fields
 * marked [commit], which belong to whoever holds m->commit_lock. Lock
 * order: commit_lock, then lock.
 */
#ifndef RMEM_META_INT_H
#define RMEM_META_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include <glib.h>

#include "inode.h"
#include "layout.h"
#include "meta.h"
#include "worker.h"

struct alloc;
struct csum;
struct follow;
struct hold;
struct journal;
struct journal_rec;
struct readers;
struct remote;
struct super;

/* what loading found, for fsck and the mount-time check */
struct meta_load_info {
	uint64_t ckpt_gen;
	uint64_t replayed; /* journal txns applied */
	uint64_t replay_bytes;
	bool torn_tail; /* replay stopped at a damaged transaction of the right generation */
	bool was_clean;
	uint64_t orphans; /* unlinked inodes freed at load */
	unsigned int repaired; /* problems the mount-time check repaired */
	uint64_t bitmap_leaked; /* stored bitmap: used, but no extent refers to the block */
	uint64_t bitmap_missing; /* stored bitmap: free, but an extent uses the block */
	GPtrArray *problems; /* char *: structural damage found while decoding */
};

struct meta {
	pthread_mutex_t lock;
	struct remote *r;
	struct super *sb;
	struct layout_geom g;
	bool read_only;

	GHashTable *inodes; /* set of struct meta_inode, hashed by a.ino (owned) */
	GHashTable *xattrs; /* inode record -> its xattrs, for those with any (inode_xattrs) */
	GHashTable *opens; /* inode record -> its kernel opens, for those open (inode_opens_get) */
	uint64_t next_ino;
	struct alloc *alloc; /* NULL while loading */
	uint64_t ckpt_bytes; /* exact size of the next checkpoint (header+payload) */
	uint64_t nfresh; /* FRESH extents */
	struct csum *csum; /* data block checksums and hot regions (csum.h; its own lock) */
	struct journal *j;

	/* commit pipeline (commit.c) */
	pthread_mutex_t commit_lock;
	uint64_t durable_gen; /* the generation committed in the superblock */
	bool need_ckpt; /* journal writes wait for a checkpoint (after a failed one) */
	uint64_t durable_seq; /* every txn <= this is durable [lock] */
	uint64_t ckpts; /* checkpoints written by this mount */
	struct worker committer;

	struct meta_load_info load;

	/* sharing the pool with read-only mounts (readers.h) */
	struct readers *readers; /* a reader's slot, or the writer's view of the slots */
	struct follow *follow; /* a reader: follow.c */
	struct hold *hold; /* the writer: hold.c */
	uint64_t blocks_mapped; /* data blocks in durable extents (statfs without an allocator) */
};

/* ---- meta.c: the steps every operation shares ---- */

enum meta_kind {
	META_ANY,
	META_DIR,
	META_REG, /* a regular file */
};

/* the inode ino, of kind: 0, -ENOENT, -ENOTDIR, -EISDIR or -EINVAL (m->lock held) */
int meta_get(struct meta *m, uint64_t ino, enum meta_kind kind, struct meta_inode **out);
/* take m->lock and meta_get; on error m->lock is released again */
int meta_lock_get(struct meta *m, uint64_t ino, enum meta_kind kind, struct meta_inode **out);
/* release m->lock; returns rc */
int meta_unlock(struct meta *m, int rc);
/* may the metadata change, growing the next checkpoint by grow bytes? -EROFS, -EIO, -ENOSPC */
int meta_may_change(struct meta *m, uint64_t grow);
/* -ENOSPC when the next checkpoint could not grow by grow bytes */
int meta_room(struct meta *m, uint64_t grow);
/* start a transaction; now (if non-NULL) gets the time of the change */
void meta_txn_begin(struct meta *m, struct timespec *now);
/* journal the attributes of in (after changing in->a) */
void meta_log_inode(struct meta *m, struct meta_inode *in);
/* log in (if non-NULL), end the transaction and let the committer know */
void meta_txn_end(struct meta *m, struct meta_inode *in);

/* ---- apply.c ---- */

/* apply one journal record to m (replay, and a reader following the journal); ctx is m */
int meta_apply_rec(void *ctx, const struct journal_rec *r);

#endif /* RMEM_META_INT_H */
