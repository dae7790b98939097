// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * inode.c - the in-RAM metadata objects (inodes, extents, directory entries,
 * xattrs, symlink targets) and the primitives that change them. See
 * meta_int.h: primitives keep ckpt_bytes (the exact size of the next
 * checkpoint), block counts and block frees right, and never journal.
 *
 * Checkpoint encoding of one inode, which the byte counts here mirror (ckpt.c
 * writes it):
 *   layout_inode | le32 nxattr | [LNK: uv len, target] | [REG: le32 nextents]
 *   | [DIR: le32 nentries] | xattrs (uv nlen, name, uv vlen, value)...
 *   | REG: extents (uv fblock, uv count, uv pblock, u8 state)...
 *   | DIR: entries (uv ino, uv cookie, u8 type, u8 nlen, name)...
 * FRESH extents are not in checkpoints and not counted.
 */
#define G_LOG_DOMAIN "rmemfs-meta"

#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "alloc.h"
#include "csum.h"
#include "journal.h"
#include "meta_int.h"
#include "slab.h"

/*
 * Inode records and directory entries come from slabs (slab.h): no malloc
 * header. Entries by size, 8 bytes apart: 24 bytes for a name of up to 8.
 */
#define DIRENT_SLABS ((sizeof(struct meta_dirent) + NAME_MAX + 7) / 8 - 2)

static struct slab inode_slab = SLAB_INIT(sizeof(struct meta_inode));
static struct slab dirent_slabs[DIRENT_SLABS];

static_assert(sizeof(struct meta_inode) % 8 == 0, "inode records fill slab slots");
static_assert(sizeof(struct meta_dirent) == 16, "dirent slab classes start at 24 bytes");

static struct slab *dirent_slab(size_t nlen)
{
	static gsize once;
	size_t i;

	if (g_once_init_enter(&once)) {
		for (i = 0; i < DIRENT_SLABS; i++)
			dirent_slabs[i].size = (uint32_t)(8 * (i + 3));
		g_once_init_leave(&once, 1);
	}
	g_assert(nlen >= 1 && nlen <= NAME_MAX);
	return &dirent_slabs[(sizeof(struct meta_dirent) + nlen + 7) / 8 - 3];
}

static void dirent_free(gpointer p)
{
	struct meta_dirent *d = p;

	slab_free(dirent_slab(d->nlen), d);
}

static gint u64_cmp(gconstpointer a, gconstpointer b, gpointer unused)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

uint8_t inode_dtype(uint32_t mode)
{
	return (uint8_t)((mode & S_IFMT) >> 12);
}

void inode_load_problem(struct meta *m, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	g_ptr_array_add(m->load.problems, g_strdup_vprintf(fmt, ap));
	va_end(ap);
}

/* ---- sizes ---- */

size_t inode_ext_bytes(const struct meta_ext *e)
{
	return layout_uv_len(e->fblock) + layout_uv_len(e->count) + layout_uv_len(e->pblock) + 1;
}

size_t inode_dirent_bytes(uint64_t ino, uint64_t cookie, size_t nlen)
{
	return layout_uv_len(ino) + layout_uv_len(cookie) + 2 + nlen;
}

size_t inode_xattr_bytes(size_t nlen, size_t vlen)
{
	return layout_uv_len(nlen) + nlen + layout_uv_len(vlen) + vlen;
}

/* ---- attributes ---- */

void inode_attr_get(const struct meta_inode *in, struct layout_inode *a)
{
	memset(a, 0, sizeof(*a));
	a->ino = in->a.ino;
	a->mode = in->a.mode;
	a->nlink = in->a.nlink;
	a->uid = in->a.uid;
	a->gid = in->a.gid;
	a->rdev = inode_rdev(in);
	a->size = in->a.size;
	a->atime = inode_time_get(&in->a.atime);
	a->mtime = inode_time_get(&in->a.mtime);
	a->ctime = inode_time_get(&in->a.ctime);
}

void inode_attr_set(struct meta_inode *in, const struct layout_inode *a)
{
	g_assert(layout_mode_ok(a->mode));
	in->a.ino = a->ino;
	in->a.mode = (uint16_t)a->mode;
	in->a.nlink = a->nlink;
	in->a.uid = a->uid;
	in->a.gid = a->gid;
	in->a.size = a->size;
	inode_time_set(&in->a.atime, &a->atime);
	inode_time_set(&in->a.mtime, &a->mtime);
	inode_time_set(&in->a.ctime, &a->ctime);
	if (S_ISCHR(a->mode) || S_ISBLK(a->mode))
		in->rdev = a->rdev;
}

bool inode_attr_equal(const struct meta_inode *x, const struct meta_inode *y)
{
	/* packed: no padding bytes to differ */
	return memcmp(&x->a, &y->a, sizeof(x->a)) == 0 && inode_rdev(x) == inode_rdev(y);
}

static size_t attr_bytes(const struct meta_inode *in)
{
	struct layout_inode a;

	inode_attr_get(in, &a);
	return layout_inode_len(&a);
}

size_t inode_fixed_bytes(const struct meta_inode *in)
{
	size_t n = attr_bytes(in) + 4;

	if (S_ISREG(in->a.mode) || S_ISDIR(in->a.mode))
		n += 4;
	return n;
}

/* ---- inode table ---- */

/*
 * The inode table and the name sets are GHashTable sets (key and value the
 * same pointer): a slot is then a 4-byte hash and one pointer, where a map
 * keeps a second pointer array for the values.
 */
static guint inode_hash(gconstpointer p)
{
	uint64_t ino = ((const struct meta_inode *)p)->a.ino;

	return (guint)(ino ^ ino >> 32);
}

static gboolean inode_equal(gconstpointer a, gconstpointer b)
{
	return ((const struct meta_inode *)a)->a.ino == ((const struct meta_inode *)b)->a.ino;
}

/* the names hash as g_str_hash would (djb2), over nlen bytes */
static guint dirent_hash(gconstpointer p)
{
	const struct meta_dirent *d = p;
	guint h = 5381;
	size_t i;

	for (i = 0; i < d->nlen; i++)
		h = (h << 5) + h + (signed char)d->name[i];
	return h;
}

static gboolean dirent_equal(gconstpointer a, gconstpointer b)
{
	const struct meta_dirent *x = a, *y = b;

	return x->nlen == y->nlen && memcmp(x->name, y->name, x->nlen) == 0;
}

char *inode_dirent_name(const struct meta_dirent *d, char *buf)
{
	memcpy(buf, d->name, d->nlen);
	buf[d->nlen] = 0;
	return buf;
}

static void xattr_free(gpointer p)
{
	struct meta_xattr *x = p;

	g_free(x->name);
	g_free(x->value);
	g_free(x);
}

static void dir_free(struct meta_dir *d)
{
	if (!d)
		return;
	g_ptr_array_free(d->by_cookie, TRUE);
	g_hash_table_destroy(d->by_name);
	g_free(d);
}

/* memory only (the table's value destroy); accounting is the caller's */
static void inode_free_mem(gpointer p)
{
	struct meta_inode *in = p;

	if (S_ISREG(in->a.mode) && !in->ext_inline && in->exts.tree)
		g_tree_destroy(in->exts.tree);
	dir_free(inode_dir(in));
	if (S_ISLNK(in->a.mode))
		g_free(in->symlink);
	slab_free(&inode_slab, in); /* (its xattrs are m->xattrs's) */
}

GHashTable *inode_table_new(void)
{
	return g_hash_table_new_full(inode_hash, inode_equal, inode_free_mem, NULL);
}

struct meta_inode *inode_get(struct meta *m, uint64_t ino)
{
	struct meta_inode key;

	key.a.ino = ino;
	return g_hash_table_lookup(m->inodes, &key);
}

struct meta_inode *inode_create(struct meta *m, const struct layout_inode *a)
{
	struct meta_inode *in;

	if (inode_get(m, a->ino))
		return NULL;
	in = slab_alloc(&inode_slab);
	inode_attr_set(in, a);
	if (S_ISDIR(a->mode)) {
		in->dir = g_new0(struct meta_dir, 1);
		in->dir->by_name = g_hash_table_new_full(dirent_hash, dirent_equal, dirent_free,
							 NULL);
		in->dir->by_cookie = g_ptr_array_new();
		in->dir->next_cookie = 3;
		in->dir->parent = a->ino == META_ROOT_INO ? META_ROOT_INO : 0;
	}
	in->hdr_bytes = (uint8_t)attr_bytes(in);
	m->ckpt_bytes += inode_fixed_bytes(in);
	g_hash_table_add(m->inodes, in);
	if (a->ino >= m->next_ino)
		m->next_ino = a->ino + 1;
	return in;
}

void inode_touch_acct(struct meta *m, struct meta_inode *in)
{
	uint8_t now = (uint8_t)attr_bytes(in);

	m->ckpt_bytes = m->ckpt_bytes - in->hdr_bytes + now;
	in->hdr_bytes = now;
}

int inode_symlink_set(struct meta *m, struct meta_inode *in, const char *target, size_t len)
{
	if (!S_ISLNK(in->a.mode))
		return -EINVAL;
	if (in->symlink) {
		size_t old = strlen(in->symlink);

		m->ckpt_bytes -= layout_uv_len(old) + old;
		g_free(in->symlink);
	}
	in->symlink = g_strndup(target, len);
	m->ckpt_bytes += layout_uv_len(len) + len;
	return 0;
}

void inode_destroy(struct meta *m, struct meta_inode *in)
{
	struct inode_opens none = { 0 };
	GPtrArray *xattrs;

	inode_opens_set(m, in, none); /* (a reader's replay may free an inode its kernel holds) */
	inode_ext_clear(m, in, 0, UINT64_MAX, true);
	while ((xattrs = inode_xattrs(m, in))) {
		struct meta_xattr *x = g_ptr_array_index(xattrs, xattrs->len - 1);

		inode_xattr_del(m, in, x->name);
	}
	if (inode_dir(in)) {
		GHashTableIter it;
		gpointer k, v;

		g_hash_table_iter_init(&it, inode_dir(in)->by_name);
		while (g_hash_table_iter_next(&it, &k, &v)) {
			struct meta_dirent *d = v;

			m->ckpt_bytes -= inode_dirent_bytes(d->ino, d->cookie, d->nlen);
		}
	}
	if (S_ISLNK(in->a.mode) && in->symlink) {
		size_t old = strlen(in->symlink);

		m->ckpt_bytes -= layout_uv_len(old) + old;
	}
	/*
	 * The count holds the header as in->hdr_bytes, the length at the last
	 * touch_acct. Callers may change in->a and free the inode without logging
	 * it (unlink, rmdir, rename-over set nlink and ctime, then maybe_free): a
	 * new ctime.tv_nsec can cross a varint length boundary (2^21, 2^28 ns), so
	 * resync the header before taking the fixed bytes out.
	 */
	inode_touch_acct(m, in);
	m->ckpt_bytes -= inode_fixed_bytes(in);
	g_hash_table_remove(m->inodes, in);
}

/* a sort key beside its inode: the compares read the array, not a million inodes */
struct inode_sort_key {
	uint64_t ino;
	struct meta_inode *in;
};

static int inode_sort_key_cmp(const void *a, const void *b)
{
	const struct inode_sort_key *x = a, *y = b;

	return x->ino < y->ino ? -1 : x->ino > y->ino;
}

struct meta_inode **inode_table_sorted(struct meta *m, guint *n)
{
	GHashTableIter it;
	gpointer k, v;
	struct meta_inode **arr;
	struct inode_sort_key *keys;
	guint i = 0;

	*n = g_hash_table_size(m->inodes);
	keys = g_new(struct inode_sort_key, *n + 1);
	g_hash_table_iter_init(&it, m->inodes);
	while (g_hash_table_iter_next(&it, &k, &v)) {
		keys[i].ino = ((struct meta_inode *)v)->a.ino;
		keys[i++].in = v;
	}
	qsort(keys, *n, sizeof(*keys), inode_sort_key_cmp);
	arr = g_new(struct meta_inode *, *n + 1);
	for (i = 0; i < *n; i++)
		arr[i] = keys[i].in;
	g_free(keys);
	return arr;
}

/* ---- directories ---- */

struct meta_dirent *inode_dir_lookup(struct meta_inode *dir, const char *name)
{
	struct {
		struct meta_dirent d;
		char name[NAME_MAX];
	} key;
	size_t len = strlen(name);

	if (!inode_dir(dir) || len > NAME_MAX)
		return NULL;
	key.d.nlen = len;
	memcpy(key.d.name, name, len);
	return g_hash_table_lookup(dir->dir->by_name, &key.d);
}

guint inode_dir_count(const struct meta_inode *dir)
{
	return inode_dir(dir) ? g_hash_table_size(dir->dir->by_name) : 0;
}

/*
 * by_cookie slots: a dirent, or where one was removed its cookie, shifted
 * left and tagged with bit 0 (dirents are aligned), so that a search never
 * walks over holes. Cookies are below 2^48 (inode_dir_add).
 */
static uint64_t slot_cookie(gconstpointer p)
{
	uintptr_t v = (uintptr_t)p;

	return v & 1 ? v >> 1 : ((const struct meta_dirent *)p)->cookie;
}

static struct meta_dirent *slot_dirent(gpointer p)
{
	return (uintptr_t)p & 1 ? NULL : p;
}

/* the index of the first slot whose cookie is above after, or a->len */
static guint cookie_seek(const GPtrArray *a, uint64_t after)
{
	guint lo = 0, hi = a->len;

	while (lo < hi) {
		guint mid = lo + (hi - lo) / 2;

		if (slot_cookie(a->pdata[mid]) > after)
			hi = mid;
		else
			lo = mid + 1;
	}
	return lo;
}

struct meta_dirent *inode_dir_next(const struct meta_inode *dir, uint64_t after)
{
	GPtrArray *a = inode_dir(dir) ? dir->dir->by_cookie : NULL;
	guint i = a ? cookie_seek(a, after) : 0;

	for (; a && i < a->len; i++)
		if (slot_dirent(a->pdata[i]))
			return a->pdata[i];
	return NULL;
}

static bool cookie_used(const struct meta_dir *md, uint64_t cookie)
{
	guint i = cookie_seek(md->by_cookie, cookie - 1);

	return i < md->by_cookie->len && slot_dirent(md->by_cookie->pdata[i]) &&
	       slot_cookie(md->by_cookie->pdata[i]) == cookie;
}

/*
 * A cookie has at most one slot: a live entry, or the hole a removed one left.
 * An entry that takes a removed one's cookie (rename over a name, a journal
 * replay) takes its hole, so cookie_remove finds an entry at the first slot
 * that carries its cookie. New cookies are the largest: an append, but for
 * entries loaded out of order and reused cookies.
 */
static void cookie_insert(struct meta_dir *md, struct meta_dirent *d)
{
	GPtrArray *a = md->by_cookie;
	guint i = a->len;

	while (i && !slot_dirent(a->pdata[i - 1])) /* trailing holes go */
		i--;
	md->holes -= a->len - i;
	g_ptr_array_set_size(a, i);
	if (!i || slot_cookie(a->pdata[i - 1]) < d->cookie) {
		g_ptr_array_add(a, d);
		return;
	}
	i = cookie_seek(a, d->cookie - 1);
	if (i < a->len && slot_cookie(a->pdata[i]) == d->cookie) {
		g_assert(!slot_dirent(a->pdata[i])); /* inode_dir_add checked cookie_used */
		a->pdata[i] = d;
		md->holes--;
		return;
	}
	g_ptr_array_insert(a, (gint)i, d);
}

static void cookie_remove(struct meta_dir *md, const struct meta_dirent *d)
{
	GPtrArray *a = md->by_cookie;
	guint i = cookie_seek(a, d->cookie - 1), j, k;

	g_assert(i < a->len && a->pdata[i] == d); /* every entry has its slot */
	a->pdata[i] = (gpointer)(uintptr_t)((uint64_t)d->cookie << 1 | 1);
	if (++md->holes < 64 || md->holes < a->len / 2)
		return;
	for (j = k = 0; j < a->len; j++)
		if (slot_dirent(a->pdata[j]))
			a->pdata[k++] = a->pdata[j];
	g_ptr_array_set_size(a, k);
	md->holes = 0;
}

struct meta_dirent *inode_dir_add(struct meta *m, struct meta_inode *dir, const char *name,
				  size_t nlen, uint64_t ino, uint8_t type, uint64_t cookie)
{
	struct meta_dir *md = dir->dir;
	struct meta_dirent *d, *old;
	struct meta_inode *child;

	old = inode_dir_lookup(dir, name);
	if (old)
		inode_dir_del(m, dir, old);
	if (cookie < 3 || cookie >= INODE_COOKIE_LIMIT || cookie_used(md, cookie)) {
		if (cookie)
			inode_load_problem(m, "directory %" G_GUINT64_FORMAT
					   ": entry \"%s\" has a duplicate or invalid cookie %"
					   G_GUINT64_FORMAT,
					   (guint64)dir->a.ino, name, (guint64)cookie);
		cookie = md->next_cookie;
	}
	/* 2^48 entries made in one directory: 9 years at a million a second */
	g_assert(cookie < INODE_COOKIE_LIMIT);
	if (cookie >= md->next_cookie)
		md->next_cookie = cookie + 1;
	d = slab_alloc(dirent_slab(nlen));
	d->ino = ino;
	d->cookie = cookie;
	d->type = type;
	d->nlen = (uint8_t)nlen;
	memcpy(d->name, name, nlen);
	g_hash_table_add(md->by_name, d);
	cookie_insert(md, d);
	m->ckpt_bytes += inode_dirent_bytes(ino, cookie, nlen);
	if (type == DT_DIR) {
		child = inode_get(m, ino);
		if (child && inode_dir(child))
			child->dir->parent = dir->a.ino;
	}
	return d;
}

void inode_dir_del(struct meta *m, struct meta_inode *dir, struct meta_dirent *d)
{
	m->ckpt_bytes -= inode_dirent_bytes(d->ino, d->cookie, d->nlen);
	cookie_remove(dir->dir, d);
	g_hash_table_remove(dir->dir->by_name, d);
}

/* ---- opens ---- */

/*
 * The kernel's open counts of the few inodes open, in m->opens keyed by the
 * record (in->is_open says whether it has an entry).
 */
GHashTable *inode_opens_table_new(void)
{
	return g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL, g_free);
}

struct inode_opens inode_opens_get(struct meta *m, const struct meta_inode *in)
{
	struct inode_opens none = { 0 }, *o;

	o = in->is_open ? g_hash_table_lookup(m->opens, in) : NULL;
	return o ? *o : none;
}

void inode_opens_set(struct meta *m, struct meta_inode *in, struct inode_opens o)
{
	struct inode_opens *p;

	if (!o.nopen && !o.ncached) {
		if (in->is_open)
			g_hash_table_remove(m->opens, in);
		in->is_open = 0;
		return;
	}
	p = in->is_open ? g_hash_table_lookup(m->opens, in) : NULL;
	if (!p) {
		p = g_new(struct inode_opens, 1);
		g_hash_table_insert(m->opens, in, p);
		in->is_open = 1;
	}
	*p = o;
}

/* ---- xattrs ---- */

/*
 * Few inodes have xattrs: they sit in m->xattrs, keyed by the inode record,
 * not in a pointer every record would carry. in->has_xattrs spares the
 * lookup for the others (the kernel asks for security.capability before
 * every write). An inode's array is never empty: the last one's removal
 * drops it.
 */
GHashTable *inode_xattr_table_new(void)
{
	return g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL,
				     (GDestroyNotify)g_ptr_array_unref);
}

GPtrArray *inode_xattrs(struct meta *m, const struct meta_inode *in)
{
	return in->has_xattrs ? g_hash_table_lookup(m->xattrs, in) : NULL;
}

struct meta_xattr *inode_xattr_find(struct meta *m, struct meta_inode *in, const char *name,
				    guint *idx)
{
	GPtrArray *xattrs = inode_xattrs(m, in);
	guint i;

	for (i = 0; xattrs && i < xattrs->len; i++) {
		struct meta_xattr *x = g_ptr_array_index(xattrs, i);

		if (strcmp(x->name, name) == 0) {
			if (idx)
				*idx = i;
			return x;
		}
	}
	return NULL;
}

void inode_xattr_set(struct meta *m, struct meta_inode *in, const char *name, const void *value,
		     size_t len)
{
	struct meta_xattr *x = inode_xattr_find(m, in, name, NULL);
	GPtrArray *xattrs;

	if (x) {
		m->ckpt_bytes -= inode_xattr_bytes(strlen(x->name), x->len);
		g_free(x->value);
	} else {
		xattrs = inode_xattrs(m, in);
		if (!xattrs) {
			xattrs = g_ptr_array_new_with_free_func(xattr_free);
			g_hash_table_insert(m->xattrs, in, xattrs);
			in->has_xattrs = 1;
		}
		x = g_new0(struct meta_xattr, 1);
		x->name = g_strdup(name);
		g_ptr_array_add(xattrs, x);
	}
	x->value = g_memdup2(value, len);
	x->len = len;
	m->ckpt_bytes += inode_xattr_bytes(strlen(name), len);
}

void inode_xattr_del(struct meta *m, struct meta_inode *in, const char *name)
{
	guint idx;
	struct meta_xattr *x = inode_xattr_find(m, in, name, &idx);
	GPtrArray *xattrs = inode_xattrs(m, in);

	if (!x)
		return;
	m->ckpt_bytes -= inode_xattr_bytes(strlen(x->name), x->len);
	g_ptr_array_remove_index(xattrs, idx);
	if (!xattrs->len) {
		g_hash_table_remove(m->xattrs, in);
		in->has_xattrs = 0;
	}
}

/* ---- extents ---- */

/*
 * A file's only extent lives in the inode (ext_inline); the primitives that
 * change extents work on the tree: ext_to_tree first, ext_to_inline after.
 * Reads (inode_ext_find, inode_ext_foreach) see either form.
 */
uint64_t inode_nblocks(const struct meta_inode *in)
{
	if (!S_ISREG(in->a.mode))
		return 0;
	return in->ext_inline ? in->ext1.count : in->exts.nblocks;
}

static void ext_to_tree(struct meta_inode *in)
{
	struct meta_ext *e;

	if (!in->ext_inline)
		return;
	e = g_memdup2(&in->ext1, sizeof(*e));
	in->ext_inline = 0;
	in->exts.tree = g_tree_new_full(u64_cmp, NULL, NULL, g_free);
	in->exts.nblocks = e->count;
	g_tree_insert(in->exts.tree, &e->fblock, e);
}

static void ext_to_inline(struct meta_inode *in)
{
	struct meta_ext one;
	guint n;

	if (in->ext_inline || !in->exts.tree)
		return;
	n = g_tree_nnodes(in->exts.tree);
	if (n > 1)
		return;
	if (n)
		one = *(struct meta_ext *)g_tree_node_value(g_tree_node_first(in->exts.tree));
	g_tree_destroy(in->exts.tree);
	in->exts.tree = NULL;
	in->exts.nblocks = 0;
	if (n) {
		in->ext1 = one;
		in->ext_inline = 1;
	}
}

static void ext_acct(struct meta *m, struct meta_inode *in, const struct meta_ext *e, int sign)
{
	if (sign > 0) {
		in->exts.nblocks += e->count;
		if (e->state == META_EXT_FRESH) {
			m->nfresh++;
		} else {
			/* the checkpoint's checksum section grows with the blocks in use */
			m->ckpt_bytes += inode_ext_bytes(e) +
					 layout_csum_section_len(m->blocks_mapped + e->count) -
					 layout_csum_section_len(m->blocks_mapped);
			m->blocks_mapped += e->count;
		}
	} else {
		in->exts.nblocks -= e->count;
		if (e->state == META_EXT_FRESH) {
			m->nfresh--;
		} else {
			m->ckpt_bytes -= inode_ext_bytes(e) +
					 layout_csum_section_len(m->blocks_mapped) -
					 layout_csum_section_len(m->blocks_mapped - e->count);
			m->blocks_mapped -= e->count;
		}
	}
}

static void blocks_freed(struct meta *m, uint64_t pb, uint64_t count, uint8_t state)
{
	if (count)
		csum_clear(m->csum, pb, count); /* (a new owner's write gives it a new one) */
	if (!m->alloc || !count)
		return;
	if (state == META_EXT_FRESH)
		alloc_put(m->alloc, pb, count);
	else
		alloc_put_pending(m->alloc, pb, count, journal_next_seq(m->j));
}

static void ext_insert(struct meta *m, struct meta_inode *in, uint64_t fb, uint64_t count,
		       uint64_t pb, uint8_t state)
{
	struct meta_ext *e = g_new(struct meta_ext, 1);

	e->fblock = fb;
	e->count = count;
	e->pblock = pb;
	e->state = state & 3;
	if (!in->exts.tree)
		in->exts.tree = g_tree_new_full(u64_cmp, NULL, NULL, g_free);
	g_tree_insert(in->exts.tree, &e->fblock, e);
	ext_acct(m, in, e, 1);
}

static void ext_remove(struct meta *m, struct meta_inode *in, struct meta_ext *e)
{
	ext_acct(m, in, e, -1);
	g_tree_remove(in->exts.tree, &e->fblock);
}

struct meta_ext *inode_ext_find(struct meta_inode *in, uint64_t fb, struct meta_ext **next)
{
	GTreeNode *node, *prev;
	struct meta_ext *e;

	if (next)
		*next = NULL;
	if (!S_ISREG(in->a.mode))
		return NULL;
	if (in->ext_inline) {
		e = &in->ext1;
		if (next && e->fblock > fb)
			*next = e;
		return e->fblock <= fb && e->fblock + e->count > fb ? e : NULL;
	}
	if (!in->exts.tree)
		return NULL;
	node = g_tree_upper_bound(in->exts.tree, &fb);
	if (next && node)
		*next = g_tree_node_value(node);
	prev = node ? g_tree_node_previous(node) : g_tree_node_last(in->exts.tree);
	if (!prev)
		return NULL;
	e = g_tree_node_value(prev);
	return e->fblock + e->count > fb ? e : NULL;
}

/* inode_ext_clear on the tree form */
static void ext_clear(struct meta *m, struct meta_inode *in, uint64_t fb, uint64_t count,
		      bool free_blocks)
{
	uint64_t end = count > UINT64_MAX - fb ? UINT64_MAX : fb + count;
	struct meta_ext *e;

	if (!in->exts.tree || !count)
		return;
	e = inode_ext_find(in, fb, NULL);
	if (e && e->fblock < fb) {
		uint64_t eend = e->fblock + e->count;
		uint64_t mid_end = MIN(eend, end);

		ext_acct(m, in, e, -1);
		if (free_blocks)
			blocks_freed(m, e->pblock + (fb - e->fblock), mid_end - fb, e->state);
		e->count = fb - e->fblock;
		ext_acct(m, in, e, 1);
		if (eend > end)
			ext_insert(m, in, end, eend - end, e->pblock + (end - e->fblock), e->state);
	}
	for (;;) {
		GTreeNode *node = g_tree_lower_bound(in->exts.tree, &fb);
		uint64_t eend;

		if (!node)
			break;
		e = g_tree_node_value(node);
		if (e->fblock >= end)
			break;
		eend = e->fblock + e->count;
		if (eend <= end) {
			if (free_blocks)
				blocks_freed(m, e->pblock, e->count, e->state);
			ext_remove(m, in, e);
		} else {
			uint64_t cut = end - e->fblock;
			uint64_t npb = e->pblock + cut;
			uint8_t st = e->state;

			if (free_blocks)
				blocks_freed(m, e->pblock, cut, e->state);
			ext_remove(m, in, e);
			ext_insert(m, in, end, eend - end, npb, st);
			break;
		}
	}
	if (!g_tree_nnodes(in->exts.tree)) {
		g_tree_destroy(in->exts.tree);
		in->exts.tree = NULL;
	}
}

void inode_ext_clear(struct meta *m, struct meta_inode *in, uint64_t fb, uint64_t count,
		     bool free_blocks)
{
	if (!S_ISREG(in->a.mode))
		return;
	ext_to_tree(in);
	ext_clear(m, in, fb, count, free_blocks);
	ext_to_inline(in);
}

static bool ext_adjacent(const struct meta_ext *a, const struct meta_ext *b)
{
	return a->fblock + a->count == b->fblock && a->pblock + a->count == b->pblock &&
	       a->state == b->state;
}

/* merge b into a when b continues a: returns a then, else b */
static struct meta_ext *ext_absorb(struct meta *m, struct meta_inode *in, struct meta_ext *a,
				   struct meta_ext *b)
{
	if (!ext_adjacent(a, b))
		return b;
	ext_acct(m, in, a, -1);
	a->count += b->count;
	ext_remove(m, in, b);
	ext_acct(m, in, a, 1);
	return a;
}

/* merge the extent at fb with its neighbours where they continue each other */
static void ext_merge_at(struct meta *m, struct meta_inode *in, uint64_t fb)
{
	GTreeNode *node = g_tree_lookup_node(in->exts.tree, &fb);
	GTreeNode *prev, *next;
	struct meta_ext *e;

	if (!node)
		return;
	e = g_tree_node_value(node);
	prev = g_tree_node_previous(node);
	if (prev) {
		e = ext_absorb(m, in, g_tree_node_value(prev), e);
		node = g_tree_lookup_node(in->exts.tree, &e->fblock);
	}
	next = g_tree_node_next(node);
	if (next)
		ext_absorb(m, in, e, g_tree_node_value(next));
}

void inode_ext_set(struct meta *m, struct meta_inode *in, uint64_t fb, uint64_t count,
		   uint64_t pb, uint8_t state)
{
	if (!count || !S_ISREG(in->a.mode))
		return;
	ext_to_tree(in);
	ext_clear(m, in, fb, count, true);
	ext_insert(m, in, fb, count, pb, state);
	ext_merge_at(m, in, fb);
	ext_to_inline(in);
}

void inode_ext_foreach(struct meta_inode *in, bool (*fn)(struct meta_ext *e, void *ctx),
		       void *ctx)
{
	GTreeNode *node;

	if (!S_ISREG(in->a.mode))
		return;
	if (in->ext_inline) {
		fn(&in->ext1, ctx);
		return;
	}
	if (!in->exts.tree)
		return;
	for (node = g_tree_node_first(in->exts.tree); node; node = g_tree_node_next(node))
		if (!fn(g_tree_node_value(node), ctx))
			break;
}

/* ---- derived state ---- */

void inode_derive_parents(struct meta *m)
{
	GHashTableIter it, dit;
	gpointer k, v;

	g_hash_table_iter_init(&it, m->inodes);
	while (g_hash_table_iter_next(&it, &k, &v)) {
		struct meta_inode *in = v;

		if (inode_dir(in))
			in->dir->parent = in->a.ino == META_ROOT_INO ? META_ROOT_INO : 0;
	}
	g_hash_table_iter_init(&it, m->inodes);
	while (g_hash_table_iter_next(&it, &k, &v)) {
		struct meta_inode *in = v;

		if (!inode_dir(in))
			continue;
		g_hash_table_iter_init(&dit, in->dir->by_name);
		while (g_hash_table_iter_next(&dit, &k, &v)) {
			struct meta_dirent *d = v;
			struct meta_inode *c;

			if (d->type != DT_DIR)
				continue;
			c = inode_get(m, d->ino);
			if (c && inode_dir(c) && !c->dir->parent && c->a.ino != META_ROOT_INO)
				c->dir->parent = in->a.ino;
		}
	}
}

struct build_ctx {
	struct alloc *a;
	uint64_t dups;
	int err;
};

static bool build_one(struct meta_ext *e, void *ctx)
{
	struct build_ctx *b = ctx;
	int64_t r = alloc_mark(b->a, e->pblock, e->count);

	if (r < 0)
		b->err = (int)r;
	else
		b->dups += (uint64_t)r;
	return true;
}

int inode_build_alloc(struct meta *m, uint64_t *dups)
{
	struct build_ctx b = { 0 };
	GHashTableIter it;
	gpointer k, v;
	int rc;

	rc = alloc_new(m->g.data_blocks, &b.a);
	if (rc < 0)
		return rc;
	g_hash_table_iter_init(&it, m->inodes);
	while (g_hash_table_iter_next(&it, &k, &v))
		inode_ext_foreach(v, build_one, &b);
	alloc_destroy(m->alloc);
	m->alloc = b.a;
	if (dups)
		*dups = b.dups;
	return b.err;
}
