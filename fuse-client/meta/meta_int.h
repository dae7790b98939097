/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * meta_int.h - metadata internals shared by meta.c (the POSIX operations),
 * inode.c (in-RAM objects and their primitives), journal.c, ckpt.c,
 * commit.c (flush/checkpoint pipeline), mount.c and fsck.c. Not for the
 * FUSE layer: it uses meta.h only.
 *
 * In RAM: a hash table ino -> struct meta_inode. A regular file's extents
 * sit in a GTree keyed by first file block; a directory's entries in a hash
 * table by name plus a GTree by cookie (the stable readdir offset).
 *
 * Primitives (inode.c) change RAM state only and keep three derived things
 * right: the exact byte size the next checkpoint will have (ckpt_bytes, used
 * to refuse growth with -ENOSPC before a checkpoint could overflow its
 * slot), per-inode block counts, and - when the allocator exists - block
 * frees (pending until the freeing transaction is durable). Operations
 * (meta.c) validate first, then call primitives and log the matching
 * journal records; replay and checkpoint loading call the same primitives
 * with m->alloc == NULL (the allocator is rebuilt from the extents after).
 *
 * Locking: m->lock protects everything in struct meta except the fields
 * marked [flush], which belong to whoever holds m->flush_lock. Lock order:
 * flush_lock, then lock.
 */
#ifndef RMEM_META_INT_H
#define RMEM_META_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include <glib.h>

#include "layout.h"
#include "meta.h"

struct alloc;
struct journal;
struct remote;
struct super;

enum meta_ext_state {
	META_EXT_WRITTEN = LAYOUT_EXT_WRITTEN,
	META_EXT_UNWRITTEN = LAYOUT_EXT_UNWRITTEN,
	META_EXT_FRESH = 2, /* allocated by meta_map, not committed: never on the pool */
};

struct meta_ext {
	uint64_t fblock; /* tree key */
	uint64_t count;
	uint64_t pblock; /* data-area block index */
	uint8_t state; /* enum meta_ext_state */
};

struct meta_dirent {
	uint64_t ino;
	uint64_t cookie;
	uint8_t type; /* DT_* */
	uint8_t nlen;
	char name[]; /* NUL-terminated */
};

struct meta_dir {
	GHashTable *by_name; /* dirent->name -> dirent; owns the dirents */
	GTree *by_cookie; /* &dirent->cookie -> dirent */
	uint64_t next_cookie; /* >= 3 (1 and 2 are "." and "..") */
};

struct meta_xattr {
	char *name;
	size_t len;
	uint8_t *value;
};

struct meta_inode {
	struct layout_inode a; /* persistent attributes (a.size unused for dirs) */
	uint64_t parent; /* directories: containing directory (root: itself); derived */
	uint64_t nblocks; /* blocks in extents, every state */
	GTree *ext; /* regular files: &ext->fblock -> meta_ext; NULL when empty */
	struct meta_dir *dir; /* directories */
	char *symlink; /* symlinks */
	GPtrArray *xattrs; /* struct meta_xattr *, NULL when none */
	uint64_t nlookup; /* kernel references (lookup count) */
	uint32_t nopen;
	uint32_t hdr_bytes; /* layout_inode_len(&a) as counted in ckpt_bytes */
};

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
	bool stopping;

	GHashTable *inodes; /* &inode->a.ino -> meta_inode (owned) */
	uint64_t next_ino;
	struct alloc *alloc; /* NULL while loading */
	uint64_t ckpt_bytes; /* exact size of the next checkpoint (header+payload) */
	uint64_t nfresh; /* FRESH extents */
	struct journal *j;

	/* commit pipeline (commit.c) */
	pthread_mutex_t flush_lock;
	uint64_t durable_gen; /* the generation committed in the superblock */
	bool need_ckpt; /* journal writes wait for a checkpoint (after a failed one) */
	uint64_t durable_seq; /* every txn <= this is durable [lock] */
	uint64_t ckpts; /* checkpoints written by this mount */
	int flusher_efd;
	pthread_t flusher;
	bool flusher_running;

	struct meta_load_info load;
};

/* ---- inode.c: objects and primitives (m->lock held) ---- */

struct meta_inode *meta_inode_get(struct meta *m, uint64_t ino);
/* create an inode (attributes from a), or NULL if ino exists */
struct meta_inode *meta_inode_create(struct meta *m, const struct layout_inode *a);
/* set attributes (after changing in->a: call this to keep ckpt_bytes right) */
void meta_inode_touch_acct(struct meta *m, struct meta_inode *in);
/* drop an inode with everything it owns (frees its blocks) */
void meta_inode_destroy(struct meta *m, struct meta_inode *in);
uint8_t meta_mode_dtype(uint32_t mode);

int meta_symlink_set(struct meta *m, struct meta_inode *in, const char *target, size_t len);

struct meta_dirent *meta_dir_lookup(struct meta_inode *dir, const char *name);
/* add (replacing an entry of the same name); cookie 0 = allocate one */
struct meta_dirent *meta_dir_add(struct meta *m, struct meta_inode *dir, const char *name,
				 size_t nlen, uint64_t ino, uint8_t type, uint64_t cookie);
void meta_dir_del(struct meta *m, struct meta_inode *dir, struct meta_dirent *d);
guint meta_dir_count(const struct meta_inode *dir);

struct meta_xattr *meta_xattr_find(struct meta_inode *in, const char *name, guint *idx);
void meta_xattr_set(struct meta *m, struct meta_inode *in, const char *name, const void *value,
		    size_t len);
void meta_xattr_del(struct meta *m, struct meta_inode *in, const char *name);

/* extent containing fb (or NULL); *next (may be NULL) gets the first extent starting after fb */
struct meta_ext *meta_ext_find(struct meta_inode *in, uint64_t fb, struct meta_ext **next);
/* remove the mapping of [fb, fb+count); free_blocks: give the blocks back */
void meta_ext_clear(struct meta *m, struct meta_inode *in, uint64_t fb, uint64_t count,
		    bool free_blocks);
/* map [fb, fb+count) to [pb, pb+count) in state (clearing what was there, freeing it) */
void meta_ext_set(struct meta *m, struct meta_inode *in, uint64_t fb, uint64_t count,
		  uint64_t pb, uint8_t state);
/* visit every extent in order (stop when fn returns false) */
void meta_ext_foreach(struct meta_inode *in, bool (*fn)(struct meta_ext *e, void *ctx),
		      void *ctx);

/* serialised sizes, as counted in ckpt_bytes */
size_t meta_ext_bytes(const struct meta_ext *e);
size_t meta_dirent_bytes(uint64_t ino, uint64_t cookie, size_t nlen);
size_t meta_xattr_bytes(size_t nlen, size_t vlen);
size_t meta_inode_fixed_bytes(const struct meta_inode *in);

/* the inode table sorted by ino (g_free the array) */
struct meta_inode **meta_inodes_sorted(struct meta *m, guint *n);

/* recompute directory parent pointers from the entries */
void meta_derive_parents(struct meta *m);
/* build m->alloc from the extents; returns doubly-used blocks (FRESH excluded: none exist) */
int meta_build_alloc(struct meta *m, uint64_t *dups);

void meta_now(struct timespec *ts);
void meta_load_problem(struct meta *m, const char *fmt, ...) G_GNUC_PRINTF(2, 3);

struct meta *meta_new_empty(struct remote *r, struct super *sb, const struct layout_geom *g);
void meta_free(struct meta *m);

/* ---- commit.c ---- */

/* write every committed txn (or a checkpoint when due/forced); flush_lock NOT held */
int meta_commit(struct meta *m, bool force_ckpt);
int meta_flusher_start(struct meta *m);
void meta_flusher_stop(struct meta *m);
/* after journal_commit: wake the flusher early if the pending buffer grows */
void meta_commit_kick(struct meta *m);

/* ---- mount.c ---- */

#define META_LOAD_NO_CHECK 0x1 /* fsck: load and replay, do not check or repair */
#define META_LOAD_FALLBACK 0x2 /* fsck --repair: a damaged checkpoint -> use the older slot */

int meta_load(struct remote *r, const struct meta_mount_opts *opts, unsigned int flags,
	      struct meta **out, char **err_msg);
/* free every unlinked inode nothing refers to any more (at load: all of them) */
uint64_t meta_free_orphans(struct meta *m, bool log);

#endif /* RMEM_META_INT_H */
