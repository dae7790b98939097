/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * inode.h - the in-RAM metadata objects (inodes, extents, directory entries,
 * xattrs, symlink targets) and the primitives that change them, for the
 * metadata layer only. A regular file with one extent keeps it in the inode
 * record; with more, they sit in a GTree keyed by first file block. A
 * directory's entries sit in a hash set by name plus an array sorted by
 * cookie (the stable readdir offset).
 *
 * Primitives change RAM only (m->lock held) and never journal; they keep
 * three derived things right: the exact byte size of the next checkpoint
 * (m->ckpt_bytes), per-inode block counts, and - when the allocator exists -
 * block frees (pending until the freeing transaction is durable). Replay and
 * checkpoint loading call them with m->alloc NULL (the allocator is rebuilt
 * from the extents after).
 */
#ifndef RMEM_INODE_H
#define RMEM_INODE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <time.h>

#include <glib.h>

#include "layout.h"

struct meta;

/* directory cookies are below this (struct meta_dirent) */
#define INODE_COOKIE_LIMIT (1ULL << 48)

enum meta_ext_state {
	META_EXT_WRITTEN = LAYOUT_EXT_WRITTEN,
	META_EXT_UNWRITTEN = LAYOUT_EXT_UNWRITTEN,
	META_EXT_FRESH = 2, /* allocated by extent_map, not committed: never on the pool */
};

/*
 * An extent: 24 bytes. Bit-fields: arithmetic on them alone (count + count,
 * count - 1) is done at their width by GCC and wraps there; with a uint64_t
 * operand it is 64-bit.
 */
struct meta_ext {
	uint64_t fblock; /* tree key */
	uint64_t pblock; /* data-area block index */
	/* at most data_blocks (< 2^30: layout.h LAYOUT_SLOT_MAX), so 62 bits hold it */
	uint64_t count : 62;
	uint64_t state : 2; /* enum meta_ext_state */
};

/*
 * A directory entry: 16 bytes and the name without a NUL (nlen says where it
 * ends; inode_dirent_name makes a C string), so an entry named in up to 8
 * bytes takes 24 bytes of its slab (inode.c). Cookies are below 2^48
 * (inode_dir_add), which leaves room for the type and the name length beside
 * the cookie (a bit-field: shift it as a uint64_t, see struct meta_ext).
 */
struct meta_dirent {
	uint64_t ino;
	uint64_t cookie : 48;
	uint64_t type : 8; /* DT_* */
	uint64_t nlen : 8;
	char name[];
};

struct meta_dir {
	GHashTable *by_name; /* set of dirents, hashed by name; owns them */
	GPtrArray *by_cookie; /* dirents by ascending cookie; removed ones leave a tagged cookie */
	guint holes; /* removed ones in by_cookie (compacted when they are half) */
	uint64_t next_cookie; /* >= 3 (1 and 2 are "." and "..") */
	uint64_t parent; /* containing directory (root: itself); derived */
};

struct meta_xattr {
	char *name;
	size_t len;
	uint8_t *value;
};

/*
 * A timestamp in 12 bytes: every time_t (utimensat(2) takes any), where a
 * struct timespec takes 16.
 */
struct inode_time {
	int64_t sec;
	uint32_t nsec; /* < 10^9 */
} __attribute__((packed));

/*
 * The persistent attributes but rdev, packed: struct layout_inode is their
 * decoded form (inode_attr_get/set convert). Every inode's mode passed
 * layout_mode_ok(), so it fits 16 bits. A device's rdev is in the union of
 * struct meta_inode; other inodes have none.
 */
struct inode_attr {
	uint64_t ino;
	uint64_t size; /* unused for dirs */
	struct inode_time atime;
	struct inode_time mtime;
	struct inode_time ctime;
	uint32_t nlink;
	uint32_t uid;
	uint32_t gid;
	uint16_t mode;
} __attribute__((packed));

/*
 * One per inode, and so per small file: kept small (a million-file mount
 * holds a million of them; docs/PERFORMANCE.md, "Client RAM per small file":
 * 96 bytes from a slab). What few inodes have (xattrs, opens) sits beside
 * the records, in tables of struct meta keyed by the record. What belongs
 * to one file type shares the union; a.mode says which member is live
 * (inode_dir, inode_rdev).
 */
struct meta_inode {
	struct inode_attr a; /* persistent attributes (with rdev in the union) */
	uint8_t hdr_bytes; /* layout_inode_len of the attributes as counted in ckpt_bytes */
	uint8_t ext_inline : 1; /* REG: ext1 is live (else exts) */
	/* REG: the kernel may be filling page-cache pages (meta_pagecache) */
	uint8_t pagecache : 1;
	/* REG: mtime/ctime of cached writes not journaled yet (extent.c write_update) */
	uint8_t times_unlogged : 1;
	uint8_t has_xattrs : 1; /* it has an entry in m->xattrs (inode_xattrs) */
	uint8_t is_open : 1; /* it has an entry in m->opens (inode_opens_get) */
	uint32_t nlookup; /* kernel references (lookup count); sticks at UINT32_MAX */
	union {
		struct meta_ext ext1; /* REG with ext_inline: the file's only extent */
		struct {
			GTree *tree; /* REG: &ext->fblock -> meta_ext; NULL when none */
			uint64_t nblocks; /* blocks in the tree's extents, every state */
		} exts;
		char *symlink; /* LNK */
		struct meta_dir *dir; /* DIR (never NULL); read it through inode_dir */
		uint64_t rdev; /* CHR, BLK */
	};
};

/* the kernel's opens of an inode, in m->opens for the few open (inode_opens_get) */
struct inode_opens {
	uint32_t nopen; /* kernel opens and internal pins */
	uint32_t ncached; /* kernel opens that use the page cache (meta_open_file) */
};

/* one more kernel reference (a lookup reply); saturates rather than wraps */
static inline void inode_ref(struct meta_inode *in)
{
	if (in->nlookup < UINT32_MAX)
		in->nlookup++;
}

/* the directory's entries, NULL for other inodes */
static inline struct meta_dir *inode_dir(const struct meta_inode *in)
{
	return S_ISDIR(in->a.mode) ? in->dir : NULL;
}

/* a device's number, 0 for other inodes */
static inline uint64_t inode_rdev(const struct meta_inode *in)
{
	return S_ISCHR(in->a.mode) || S_ISBLK(in->a.mode) ? in->rdev : 0;
}

static inline struct timespec inode_time_get(const struct inode_time *t)
{
	return (struct timespec){ .tv_sec = (time_t)t->sec, .tv_nsec = (long)t->nsec };
}

static inline void inode_time_set(struct inode_time *t, const struct timespec *ts)
{
	t->sec = ts->tv_sec;
	t->nsec = (uint32_t)ts->tv_nsec;
}

/* the attributes in their decoded form (what journal and checkpoint write) */
void inode_attr_get(const struct meta_inode *in, struct layout_inode *a);
/* set them from a (same file type; then inode_touch_acct to keep ckpt_bytes right) */
void inode_attr_set(struct meta_inode *in, const struct layout_inode *a);
/* the same attributes (rdev included)? */
bool inode_attr_equal(const struct meta_inode *x, const struct meta_inode *y);
/* in's xattrs (struct meta_xattr *), NULL when none; m->xattrs holds them (few inodes have any) */
GPtrArray *inode_xattrs(struct meta *m, const struct meta_inode *in);
/* an empty xattr table: inode record -> GPtrArray of struct meta_xattr, which it owns */
GHashTable *inode_xattr_table_new(void);
/* an empty open table: inode record -> struct inode_opens, which it owns */
GHashTable *inode_opens_table_new(void);
/* in's opens (zeros when it has none) */
struct inode_opens inode_opens_get(struct meta *m, const struct meta_inode *in);
/* set in's opens (zeros: it has none) */
void inode_opens_set(struct meta *m, struct meta_inode *in, struct inode_opens o);
/* copy a name of d into buf (NAME_MAX + 1 bytes), NUL-terminated; returns buf */
char *inode_dirent_name(const struct meta_dirent *d, char *buf);

/* blocks in a file's extents, every state (0 for other inodes) */
uint64_t inode_nblocks(const struct meta_inode *in);

struct meta_inode *inode_get(struct meta *m, uint64_t ino);
/* create an inode (attributes from a), or NULL if ino exists */
struct meta_inode *inode_create(struct meta *m, const struct layout_inode *a);
/* recount the attributes' bytes (after changing in->a: keeps ckpt_bytes right) */
void inode_touch_acct(struct meta *m, struct meta_inode *in);
/* drop an inode with everything it owns (frees its blocks) */
void inode_destroy(struct meta *m, struct meta_inode *in);
uint8_t inode_dtype(uint32_t mode);

int inode_symlink_set(struct meta *m, struct meta_inode *in, const char *target, size_t len);

struct meta_dirent *inode_dir_lookup(struct meta_inode *dir, const char *name);
/* add (replacing an entry of the same name); cookie 0 = allocate one */
struct meta_dirent *inode_dir_add(struct meta *m, struct meta_inode *dir, const char *name,
				  size_t nlen, uint64_t ino, uint8_t type, uint64_t cookie);
void inode_dir_del(struct meta *m, struct meta_inode *dir, struct meta_dirent *d);
guint inode_dir_count(const struct meta_inode *dir);
/* the entry with the smallest cookie above after (NULL: none); for cookie-order walks */
struct meta_dirent *inode_dir_next(const struct meta_inode *dir, uint64_t after);

struct meta_xattr *inode_xattr_find(struct meta *m, struct meta_inode *in, const char *name,
				    guint *idx);
void inode_xattr_set(struct meta *m, struct meta_inode *in, const char *name, const void *value,
		     size_t len);
void inode_xattr_del(struct meta *m, struct meta_inode *in, const char *name);

/* extent containing fb (or NULL); *next (may be NULL) gets the first extent starting after fb */
struct meta_ext *inode_ext_find(struct meta_inode *in, uint64_t fb, struct meta_ext **next);
/* remove the mapping of [fb, fb+count); free_blocks: give the blocks back */
void inode_ext_clear(struct meta *m, struct meta_inode *in, uint64_t fb, uint64_t count,
		     bool free_blocks);
/* map [fb, fb+count) to [pb, pb+count) in state (clearing what was there, freeing it) */
void inode_ext_set(struct meta *m, struct meta_inode *in, uint64_t fb, uint64_t count,
		   uint64_t pb, uint8_t state);
/* visit every extent in order (stop when fn returns false) */
void inode_ext_foreach(struct meta_inode *in, bool (*fn)(struct meta_ext *e, void *ctx),
		       void *ctx);

/* serialised sizes, as counted in ckpt_bytes */
size_t inode_ext_bytes(const struct meta_ext *e);
size_t inode_dirent_bytes(uint64_t ino, uint64_t cookie, size_t nlen);
size_t inode_xattr_bytes(size_t nlen, size_t vlen);
size_t inode_fixed_bytes(const struct meta_inode *in);

/* an empty inode table: a set of struct meta_inode hashed by a.ino, which it owns */
GHashTable *inode_table_new(void);
/* the inode table sorted by ino (g_free the array) */
struct meta_inode **inode_table_sorted(struct meta *m, guint *n);

/* recompute directory parent pointers from the entries */
void inode_derive_parents(struct meta *m);
/* build m->alloc from the extents; returns doubly-used blocks (FRESH excluded: none exist) */
int inode_build_alloc(struct meta *m, uint64_t *dups);

void inode_load_problem(struct meta *m, const char *fmt, ...) G_GNUC_PRINTF(2, 3);

#endif /* RMEM_INODE_H */
