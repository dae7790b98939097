// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * fsck.c - the checks and repairs listed in fsck.h.
 *
 * The namespace is walked breadth-first from the root over the directory
 * entries (in cookie order, so the result is deterministic): a directory
 * reached a second time has a second name, anything never reached is
 * unreachable. Repairs of unreachable inodes link the top of each detached
 * subtree into /lost+found and walk again, until everything is reached.
 */
#define G_LOG_DOMAIN "rmemfs-fsck"

#include "fsck.h"

#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc.h"
#include "clock.h"
#include "csum.h"
#include "meta_int.h"
#include "remote.h"
#include "super.h"

struct fsck_ctx {
	struct meta *m;
	enum fsck_mode mode;
	struct fsck_report *rep;
	/* the inode table in ino order, sorted once (a million inodes: 0.2 s a sort); sorted
	 * again after an inode is created or destroyed (by ensure_root, lost_found) */
	struct meta_inode **arr;
	guint n;
};

static void sort_inodes(struct fsck_ctx *c)
{
	g_free(c->arr);
	c->arr = inode_table_sorted(c->m, &c->n);
}

void fsck_report_init(struct fsck_report *rep)
{
	memset(rep, 0, sizeof(*rep));
	rep->lines = g_ptr_array_new_with_free_func(g_free);
}

void fsck_report_clear(struct fsck_report *rep)
{
	if (rep->lines)
		g_ptr_array_free(rep->lines, TRUE);
	g_free(rep->first_unsafe);
	memset(rep, 0, sizeof(*rep));
}

static void note(struct fsck_ctx *c, const char *fmt, ...) G_GNUC_PRINTF(2, 3);
static void note(struct fsck_ctx *c, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	g_ptr_array_add(c->rep->lines, g_strdup_vprintf(fmt, ap));
	va_end(ap);
}

/*
 * Record a problem. Returns true when the caller shall repair it now (mode
 * REPAIR, or MOUNT and the repair is safe).
 */
static bool finding(struct fsck_ctx *c, bool safe, const char *fmt, ...) G_GNUC_PRINTF(3, 4);
static bool finding(struct fsck_ctx *c, bool safe, const char *fmt, ...)
{
	bool fix = c->mode == FSCK_REPAIR || (c->mode == FSCK_MOUNT && safe);
	va_list ap;
	char *msg;

	va_start(ap, fmt);
	msg = g_strdup_vprintf(fmt, ap);
	va_end(ap);
	c->rep->problems++;
	if (fix) {
		c->rep->repaired++;
	} else if (c->mode != FSCK_CHECK || !safe) {
		c->rep->unsafe += !safe;
		if (!safe && !c->rep->first_unsafe)
			c->rep->first_unsafe = g_strdup(msg);
	}
	g_ptr_array_add(c->rep->lines,
			g_strdup_printf("%s%s", msg,
					fix ? " [repaired]" :
					c->mode == FSCK_CHECK ? "" :
								" [needs rmemfs-fsck --repair]"));
	if (c->mode == FSCK_MOUNT)
		g_message("check: %s%s", msg, fix ? " (repaired)" : "");
	g_free(msg);
	return fix;
}

static const char *type_name(uint32_t mode)
{
	switch (mode & S_IFMT) {
	case S_IFREG:
		return "file";
	case S_IFDIR:
		return "directory";
	case S_IFLNK:
		return "symlink";
	case S_IFIFO:
		return "fifo";
	case S_IFSOCK:
		return "socket";
	case S_IFCHR:
		return "char device";
	case S_IFBLK:
		return "block device";
	}
	return "?";
}

/* ---- shared blocks ---- */

struct conflict {
	uint64_t ino, fblock, pblock, count;
	uint8_t state;
};

struct dup_scan {
	struct alloc *seen;
	GArray *conflicts;
	uint64_t ino;
	uint64_t extents;
	uint64_t blocks;
};

static bool scan_ext(struct meta_ext *e, void *ctx)
{
	struct dup_scan *s = ctx;
	uint64_t i = 0;

	s->extents++;
	s->blocks += e->count;
	while (i < e->count) {
		struct conflict cf;

		if (!alloc_is_used(s->seen, e->pblock + i)) {
			i++;
			continue;
		}
		cf.ino = s->ino;
		cf.fblock = e->fblock + i;
		cf.pblock = e->pblock + i;
		cf.state = e->state;
		cf.count = 0;
		while (i < e->count && alloc_is_used(s->seen, e->pblock + i)) {
			cf.count++;
			i++;
		}
		g_array_append_val(s->conflicts, cf);
	}
	alloc_mark(s->seen, e->pblock, e->count);
	return true;
}

/*
 * The CRCs of [from, +n) become those of [to, +n): a copy checks like its
 * source, pending like it (an interrupted in-place write: it holds the new
 * bytes or the old, and the recovery that follows settles the copy as it
 * settles the source), its region hot like the source's.
 */
static void copy_crcs(struct meta *m, uint64_t from, uint64_t to, uint64_t n)
{
	const uint64_t region = LAYOUT_CSUM_REGION_BLOCKS;
	uint32_t crc[256], old;
	bool have[256], had;
	uint64_t i;

	csum_get_run(m->csum, from, n, crc, have);
	csum_clear(m->csum, to, n);
	for (i = 0; i < n; i++) {
		bool pending = have[i] && csum_pending(m->csum, from + i, &old, &had);

		if (pending && had)
			csum_set(m->csum, to + i, old);
		if (pending)
			csum_set_ahead(m->csum, to + i, crc[i]);
		else if (have[i])
			csum_set(m->csum, to + i, crc[i]);
		if (csum_hot(m->csum, (from + i) / region))
			csum_hot_set(m->csum, (to + i) / region, true, 0, &m->ckpt_bytes);
	}
}

static int copy_blocks(struct meta *m, uint64_t from, uint64_t to, uint64_t count)
{
	const uint64_t chunk = 256;
	uint8_t *buf = g_malloc(chunk * META_BLOCK_SIZE);
	int rc = 0;

	while (count && !rc) {
		uint64_t n = MIN(count, chunk);
		size_t bytes = (size_t)(n * META_BLOCK_SIZE);

		rc = remote_read(m->r, m->g.data_off + from * META_BLOCK_SIZE, buf, bytes);
		if (!rc)
			rc = remote_write(m->r, m->g.data_off + to * META_BLOCK_SIZE, buf, bytes);
		if (!rc)
			copy_crcs(m, from, to, n);
		from += n;
		to += n;
		count -= n;
	}
	g_free(buf);
	return rc;
}

/* give the file its own copy of the shared blocks (or a hole if the pool is full) */
static int unshare_blocks(struct fsck_ctx *c, struct meta_inode *in, const struct conflict *cf)
{
	struct meta *m = c->m;
	uint64_t done = 0;
	int rc;

	while (done < cf->count) {
		uint64_t start, got;

		rc = m->alloc ? alloc_get(m->alloc, UINT64_MAX, cf->count - done, &start, &got) :
				-ENOSPC;
		if (rc == -ENOSPC) {
			inode_ext_clear(m, in, cf->fblock + done, cf->count - done, false);
			note(c, "inode %" G_GUINT64_FORMAT ": no free space to copy %"
			     G_GUINT64_FORMAT " shared blocks: they are a hole now",
			     (guint64)in->a.ino, (guint64)(cf->count - done));
			return 0;
		}
		rc = copy_blocks(m, cf->pblock + done, start, got);
		if (rc < 0) {
			alloc_put(m->alloc, start, got);
			return rc;
		}
		inode_ext_clear(m, in, cf->fblock + done, got, false);
		inode_ext_set(m, in, cf->fblock + done, got, start, cf->state);
		done += got;
	}
	return 0;
}

static int check_blocks(struct fsck_ctx *c)
{
	struct meta *m = c->m;
	struct dup_scan s = { 0 };
	guint i;
	int rc = 0;

	rc = alloc_new(m->g.data_blocks, &s.seen);
	if (rc < 0)
		return rc;
	s.conflicts = g_array_new(FALSE, FALSE, sizeof(struct conflict));
	for (i = 0; i < c->n; i++) {
		s.ino = c->arr[i]->a.ino;
		inode_ext_foreach(c->arr[i], scan_ext, &s);
	}
	c->rep->blocks_used = s.blocks;
	for (i = 0; i < s.conflicts->len && !rc; i++) {
		struct conflict *cf = &g_array_index(s.conflicts, struct conflict, i);
		struct meta_inode *in = inode_get(m, cf->ino);

		if (finding(c, false,
			    "inode %" G_GUINT64_FORMAT ": %" G_GUINT64_FORMAT
			    " blocks at file block %" G_GUINT64_FORMAT " (pool block %"
			    G_GUINT64_FORMAT ") are also used by another file",
			    (guint64)cf->ino, (guint64)cf->count, (guint64)cf->fblock,
			    (guint64)cf->pblock) && in)
			rc = unshare_blocks(c, in, cf);
	}
	g_array_free(s.conflicts, TRUE);
	alloc_destroy(s.seen);
	return rc;
}

/* ---- namespace ---- */

struct walk {
	GHashTable *reached; /* ino -> count of names (non-dirs) or 1 (dirs) */
	GHashTable *subdirs; /* dir ino -> subdirectories */
};

static void walk_free(struct walk *w)
{
	if (w->reached)
		g_hash_table_destroy(w->reached);
	if (w->subdirs)
		g_hash_table_destroy(w->subdirs);
	memset(w, 0, sizeof(*w));
}

static void bump(GHashTable *h, uint64_t ino)
{
	gpointer key = GSIZE_TO_POINTER(ino);
	gsize n = GPOINTER_TO_SIZE(g_hash_table_lookup(h, key));

	g_hash_table_insert(h, key, GSIZE_TO_POINTER(n + 1));
}

static uint64_t count_of(GHashTable *h, uint64_t ino)
{
	return GPOINTER_TO_SIZE(g_hash_table_lookup(h, GSIZE_TO_POINTER(ino)));
}

struct entry_ref {
	char *name;
	uint64_t ino;
};

/*
 * The entry after d in cookie order. The walk checks that cookies ascend, so
 * that a cookie index gone wrong (a bug) ends the walk of that directory
 * instead of going round forever.
 */
static struct meta_dirent *entry_after(const struct meta_inode *dir, const struct meta_dirent *d)
{
	struct meta_dirent *n = inode_dir_next(dir, d->cookie);

	if (n && n->cookie <= d->cookie) {
		g_warning("directory %" G_GUINT64_FORMAT ": its cookie index goes back from %"
			  G_GUINT64_FORMAT " to %" G_GUINT64_FORMAT, (guint64)dir->a.ino,
			  (guint64)d->cookie, (guint64)n->cookie);
		return NULL;
	}
	return n;
}

/* walk from the root; report (first walk) and repair entries per mode */
static void walk_tree(struct fsck_ctx *c, struct walk *w, bool report)
{
	struct meta *m = c->m;
	GQueue queue = G_QUEUE_INIT;
	struct meta_inode *root = inode_get(m, META_ROOT_INO);

	walk_free(w);
	w->reached = g_hash_table_new(g_direct_hash, g_direct_equal);
	w->subdirs = g_hash_table_new(g_direct_hash, g_direct_equal);
	if (!root || !inode_dir(root))
		return;
	bump(w->reached, META_ROOT_INO);
	root->dir->parent = META_ROOT_INO;
	g_queue_push_tail(&queue, root);
	while (!g_queue_is_empty(&queue)) {
		struct meta_inode *dir = g_queue_pop_head(&queue);
		GPtrArray *drop = g_ptr_array_new();
		struct meta_dirent *d;
		guint i;

		for (d = inode_dir_next(dir, 0); d; d = entry_after(dir, d)) {
			struct meta_inode *t = inode_get(m, d->ino);
			bool fix;

			if (!t) {
				fix = c->mode == FSCK_REPAIR;
				if (report)
					fix = finding(c, false, "directory %" G_GUINT64_FORMAT
						      ": entry \"%.*s\" names missing inode %"
						      G_GUINT64_FORMAT, (guint64)dir->a.ino,
						      (int)d->nlen, d->name, (guint64)d->ino);
				if (fix)
					g_ptr_array_add(drop, d);
				continue;
			}
			if (d->type != inode_dtype(t->a.mode)) {
				fix = report ? finding(c, true,
						       "directory %" G_GUINT64_FORMAT
						       ": entry \"%.*s\" says type %u, inode %"
						       G_GUINT64_FORMAT " is a %s",
						       (guint64)dir->a.ino, (int)d->nlen, d->name,
						       (unsigned int)d->type,
						       (guint64)t->a.ino, type_name(t->a.mode)) :
					       c->mode != FSCK_CHECK;
				if (fix)
					d->type = inode_dtype(t->a.mode);
			}
			if (inode_dir(t)) {
				if (t->a.ino == META_ROOT_INO || count_of(w->reached, t->a.ino)) {
					fix = report ? finding(c, false,
							       "directory %" G_GUINT64_FORMAT
							       " has a second name \"%.*s\" in %"
							       G_GUINT64_FORMAT,
							       (guint64)t->a.ino,
							       (int)d->nlen, d->name,
							       (guint64)dir->a.ino) :
						       c->mode == FSCK_REPAIR;
					if (fix)
						g_ptr_array_add(drop, d);
					continue;
				}
				bump(w->reached, t->a.ino);
				bump(w->subdirs, dir->a.ino);
				t->dir->parent = dir->a.ino;
				g_queue_push_tail(&queue, t);
			} else {
				bump(w->reached, t->a.ino);
			}
		}
		for (i = 0; i < drop->len; i++)
			inode_dir_del(m, dir, g_ptr_array_index(drop, i));
		g_ptr_array_free(drop, TRUE);
	}
}

/*
 * The directory to link lost inodes into: /lost+found, or, when that name is
 * taken by something else, /lost+found.1 and so on (created as needed).
 * NULL if none can be had.
 */
static struct meta_inode *lost_found(struct meta *m)
{
	struct meta_inode *root = inode_get(m, META_ROOT_INO);
	struct meta_inode *lf;
	struct layout_inode a;
	char name[32];
	unsigned int i;

	for (i = 0; root && inode_dir(root) && i < 100; i++) {
		struct meta_dirent *d;

		if (i)
			g_snprintf(name, sizeof(name), "lost+found.%u", i);
		else
			g_strlcpy(name, "lost+found", sizeof(name));
		d = inode_dir_lookup(root, name);
		if (!d)
			break;
		lf = inode_get(m, d->ino);
		if (lf && inode_dir(lf))
			return lf;
	}
	if (!root || !inode_dir(root) || i == 100)
		return NULL;
	memset(&a, 0, sizeof(a));
	a.ino = m->next_ino;
	a.mode = S_IFDIR | 0700;
	a.nlink = 2;
	clock_file_time(&a.mtime);
	a.atime = a.ctime = a.mtime;
	lf = inode_create(m, &a);
	if (lf)
		inode_dir_add(m, root, name, strlen(name), lf->a.ino, DT_DIR, 0);
	return lf;
}

static void ensure_root(struct fsck_ctx *c)
{
	struct meta *m = c->m;
	struct meta_inode *root = inode_get(m, META_ROOT_INO);
	struct layout_inode a;

	if (root && inode_dir(root))
		return;
	if (!finding(c, false, "the root directory is %s", root ? "not a directory" : "missing"))
		return;
	if (root)
		inode_destroy(m, root);
	memset(&a, 0, sizeof(a));
	a.ino = META_ROOT_INO;
	a.mode = S_IFDIR | 0755;
	a.nlink = 2;
	clock_file_time(&a.mtime);
	a.atime = a.ctime = a.mtime;
	inode_create(m, &a);
}

/* the inodes the walk did not reach, each reported */
static GHashTable *find_unreachable(struct fsck_ctx *c, struct walk *w)
{
	GHashTable *unreachable = g_hash_table_new(g_direct_hash, g_direct_equal);
	guint i;

	for (i = 0; i < c->n; i++) {
		struct meta_inode *in = c->arr[i];

		if (count_of(w->reached, in->a.ino))
			continue;
		g_hash_table_add(unreachable, GSIZE_TO_POINTER(in->a.ino));
		finding(c, false, "inode %" G_GUINT64_FORMAT " (%s, %u links) is not reachable "
			"from the root",
			(guint64)in->a.ino, type_name(in->a.mode), in->a.nlink);
	}
	return unreachable;
}

/* name ino "#<ino>" in lf (with a suffix should that name be taken) */
static void attach_one(struct meta *m, struct meta_inode *lf, struct meta_inode *in)
{
	char name[48];
	unsigned int i;

	g_snprintf(name, sizeof(name), "#%" G_GUINT64_FORMAT, (guint64)in->a.ino);
	for (i = 1; inode_dir_lookup(lf, name); i++)
		g_snprintf(name, sizeof(name), "#%" G_GUINT64_FORMAT ".%u", (guint64)in->a.ino, i);
	inode_dir_add(m, lf, name, strlen(name), in->a.ino, inode_dtype(in->a.mode), 0);
	if (!in->a.nlink)
		in->a.nlink = 1;
}

/* mark ino and every unreachable inode below it covered */
static void cover(struct meta *m, GHashTable *unreachable, GHashTable *covered, uint64_t ino)
{
	GQueue queue = G_QUEUE_INIT;

	g_hash_table_add(covered, GSIZE_TO_POINTER(ino));
	g_queue_push_tail(&queue, GSIZE_TO_POINTER(ino));
	while (!g_queue_is_empty(&queue)) {
		struct meta_inode *in = inode_get(m, GPOINTER_TO_SIZE(g_queue_pop_head(&queue)));
		GHashTableIter it;
		gpointer k, v;

		if (!in || !inode_dir(in))
			continue;
		g_hash_table_iter_init(&it, in->dir->by_name);
		while (g_hash_table_iter_next(&it, &k, &v)) {
			gpointer key = GSIZE_TO_POINTER(((struct meta_dirent *)k)->ino);

			if (g_hash_table_contains(unreachable, key) &&
			    !g_hash_table_contains(covered, key)) {
				g_hash_table_add(covered, key);
				g_queue_push_tail(&queue, key);
			}
		}
	}
}

static gint ino_key_cmp(gconstpointer a, gconstpointer b)
{
	uint64_t x = GPOINTER_TO_SIZE(*(const gpointer *)a);
	uint64_t y = GPOINTER_TO_SIZE(*(const gpointer *)b);

	return x < y ? -1 : x > y;
}

/*
 * Link the unreachable inodes into lf: first the tops of detached subtrees
 * (inodes no unreachable directory names), then, for what hangs in loops of
 * directories, one member of each loop; all below an attached inode counts
 * as covered. In ino order, so repairs are deterministic.
 */
static void attach_unreachable(struct meta *m, GHashTable *unreachable, struct meta_inode *lf)
{
	GHashTable *named = g_hash_table_new(g_direct_hash, g_direct_equal);
	GHashTable *covered = g_hash_table_new(g_direct_hash, g_direct_equal);
	GPtrArray *order = g_ptr_array_new();
	GHashTableIter it;
	gpointer k, v;
	guint i, pass;

	g_hash_table_iter_init(&it, unreachable);
	while (g_hash_table_iter_next(&it, &k, &v)) {
		struct meta_inode *in = inode_get(m, GPOINTER_TO_SIZE(k));
		GHashTableIter dit;
		gpointer dk, dv;

		g_ptr_array_add(order, k);
		if (!in || !inode_dir(in))
			continue;
		g_hash_table_iter_init(&dit, in->dir->by_name);
		while (g_hash_table_iter_next(&dit, &dk, &dv))
			g_hash_table_add(named, GSIZE_TO_POINTER(((struct meta_dirent *)dk)->ino));
	}
	g_ptr_array_sort(order, ino_key_cmp);
	for (pass = 0; pass < 2; pass++) {
		for (i = 0; i < order->len; i++) {
			gpointer key = g_ptr_array_index(order, i);
			struct meta_inode *in = inode_get(m, GPOINTER_TO_SIZE(key));

			if (!in || in == lf || g_hash_table_contains(covered, key) ||
			    (pass == 0 && g_hash_table_contains(named, key)))
				continue;
			attach_one(m, lf, in);
			cover(m, unreachable, covered, in->a.ino);
		}
	}
	g_ptr_array_free(order, TRUE);
	g_hash_table_destroy(covered);
	g_hash_table_destroy(named);
}

/* link counts of everything reached */
static void check_links(struct fsck_ctx *c, struct walk *w)
{
	guint i;

	for (i = 0; i < c->n; i++) {
		struct meta_inode *in = c->arr[i];
		uint64_t want;

		if (!count_of(w->reached, in->a.ino))
			continue;
		want = inode_dir(in) ? 2 + count_of(w->subdirs, in->a.ino) :
				 count_of(w->reached, in->a.ino);
		if (in->a.nlink == want)
			continue;
		if (finding(c, true,
			    "inode %" G_GUINT64_FORMAT " (%s): link count %u, should be %"
			    G_GUINT64_FORMAT, (guint64)in->a.ino, type_name(in->a.mode),
			    in->a.nlink, (guint64)want)) {
			in->a.nlink = (uint32_t)want;
			inode_touch_acct(c->m, in);
		}
	}
}

static void check_namespace(struct fsck_ctx *c)
{
	struct walk w = { 0 };
	GHashTable *unreachable;
	GHashTableIter it;
	gpointer k, v;
	guint round;

	walk_tree(c, &w, true);
	unreachable = find_unreachable(c, &w);
	/* link the detached subtrees into /lost+found (one round does; a few, to be sure) */
	for (round = 0; c->mode == FSCK_REPAIR && g_hash_table_size(unreachable) && round < 4;
	     round++) {
		struct meta_inode *lf = lost_found(c->m);

		if (!lf) {
			note(c, "no lost+found directory could be made: %u inodes stay unreachable",
			     g_hash_table_size(unreachable));
			break;
		}
		attach_unreachable(c->m, unreachable, lf);
		sort_inodes(c); /* lost_found may have made a directory */
		walk_tree(c, &w, false);
		g_hash_table_iter_init(&it, unreachable);
		while (g_hash_table_iter_next(&it, &k, &v))
			if (count_of(w.reached, GPOINTER_TO_SIZE(k)))
				g_hash_table_iter_remove(&it);
	}
	check_links(c, &w);
	g_hash_table_destroy(unreachable);
	walk_free(&w);
}

static void check_inodes(struct fsck_ctx *c)
{
	struct meta *m = c->m;
	uint64_t max_ino = 0;
	guint i;

	for (i = 0; i < c->n; i++) {
		struct meta_inode *in = c->arr[i];

		max_ino = MAX(max_ino, in->a.ino);
		c->rep->inodes++;
		if (S_ISDIR(in->a.mode))
			c->rep->dirs++;
		else if (S_ISREG(in->a.mode))
			c->rep->files++;
		else if (S_ISLNK(in->a.mode))
			c->rep->symlinks++;
		else
			c->rep->others++;
		if (S_ISLNK(in->a.mode) && (!in->symlink || !in->symlink[0]) &&
		    finding(c, false, "symlink %" G_GUINT64_FORMAT " has no target",
			    (guint64)in->a.ino))
			inode_symlink_set(m, in, "?", 1);
	}
	if (max_ino >= m->next_ino &&
	    finding(c, true, "next inode number %" G_GUINT64_FORMAT " is not above inode %"
		    G_GUINT64_FORMAT, (guint64)m->next_ino, (guint64)max_ino))
		m->next_ino = max_ino + 1;
}

int fsck_check(struct meta *m, enum fsck_mode mode, struct fsck_report *rep)
{
	struct fsck_ctx c = { .m = m, .mode = mode, .rep = rep };
	guint i;
	int rc;

	pthread_mutex_lock(&m->lock);
	rep->data_blocks = m->g.data_blocks;
	if (m->load.replayed || !m->load.was_clean)
		note(&c, "journal: %s; %" G_GUINT64_FORMAT " transactions replayed%s",
		     m->load.was_clean ? "clean" : "not cleanly unmounted",
		     (guint64)m->load.replayed, m->load.torn_tail ? ", torn tail discarded" : "");
	if (m->load.orphans)
		note(&c, "%" G_GUINT64_FORMAT " orphaned inodes (unlinked while open) freed",
		     (guint64)m->load.orphans);
	for (i = 0; i < m->load.problems->len; i++)
		finding(&c, false, "%s", (char *)g_ptr_array_index(m->load.problems, i));
	if (m->load.bitmap_leaked || m->load.bitmap_missing)
		finding(&c, true,
			"allocation bitmap of checkpoint %" G_GUINT64_FORMAT ": %" G_GUINT64_FORMAT
			" blocks marked used that no file uses, %" G_GUINT64_FORMAT
			" blocks in use marked free",
			(guint64)m->load.ckpt_gen, (guint64)m->load.bitmap_leaked,
			(guint64)m->load.bitmap_missing);
	ensure_root(&c);
	sort_inodes(&c);
	rc = check_blocks(&c);
	check_namespace(&c);
	check_inodes(&c);
	g_free(c.arr);
	if (mode != FSCK_CHECK && rep->repaired) {
		uint64_t dups = 0;
		int brc = inode_build_alloc(m, &dups);

		if (!rc && brc < 0 && brc != -ERANGE)
			rc = brc;
	}
	pthread_mutex_unlock(&m->lock);
	return rc;
}
