// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * extent.c - file data placement (extent.h): which pool blocks hold a
 * regular file's bytes, allocating them for writes and fallocate.
 *
 * extent_map(alloc) hands out FRESH blocks that are in no journal record or
 * checkpoint; extent_write_done() commits them once the data is in the pool.
 * fallocate allocates UNWRITTEN blocks (read as zeros, no pool writes); a
 * write turns them WRITTEN like fresh ones.
 */
#define G_LOG_DOMAIN "rmemfs-meta"

#include "extent.h"

#include <errno.h>
#include <linux/falloc.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc.h"
#include "clock.h"
#include "commit.h"
#include "csum.h"
#include "hold.h"
#include "inode.h"
#include "journal.h"
#include "meta_int.h"

#define BS ((uint64_t)META_BLOCK_SIZE)
#define FALLOC_TXN_RECS 1024 /* extents per fallocate transaction */

static uint64_t pool_off(struct meta *m, uint64_t pb)
{
	return m->g.data_off + pb * BS;
}

/* where the blocks for file block b would best go: right after its predecessor */
static uint64_t goal_for(struct meta_inode *in, uint64_t b)
{
	struct meta_ext *e, *next;

	if (b) {
		e = inode_ext_find(in, b - 1, NULL);
		if (e)
			return e->pblock + (b - e->fblock);
	}
	inode_ext_find(in, b, &next);
	if (next && next->pblock >= next->fblock - b)
		return next->pblock - (next->fblock - b);
	return UINT64_MAX;
}

/* the hole at file block b (no extent there; next: the extent after it) up to block last */
static uint64_t hole_len(uint64_t b, uint64_t last, const struct meta_ext *next)
{
	return (next ? MIN(next->fblock, last + 1) : last + 1) - b;
}

/* allocate 1..run blocks for the hole at file block b, mapped in state */
static int alloc_run(struct meta *m, struct meta_inode *in, uint64_t b, uint64_t run,
		     uint8_t state, uint64_t *start, uint64_t *got)
{
	int rc = meta_room(m, 64);

	if (!rc)
		rc = alloc_get(m->alloc, goal_for(in, b), run, start, got);
	if (!rc)
		inode_ext_set(m, in, b, *got, *start, state);
	return rc;
}

/*
 * -ENOSPC while blocks freed by a transaction wait for it: make it durable,
 * let the readers catch up (hold.h), and say to try again (once: *retried).
 * True returns with m->lock released.
 */
static bool sync_and_retry(struct meta *m, bool *retried)
{
	if (*retried || !alloc_npending(m->alloc))
		return false;
	*retried = true;
	pthread_mutex_unlock(&m->lock);
	if (commit_sync(m) == 0 && hold_reclaim(m) == 0)
		return true;
	pthread_mutex_lock(&m->lock);
	return false;
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

/* push the mapped blocks of extent e from file block b on; returns how many */
static uint64_t push_mapped(struct meta *m, struct meta_extent *ext, int *n,
			    const struct meta_ext *e, uint64_t b, uint64_t last, bool alloc)
{
	uint64_t pb = e->pblock + (b - e->fblock);
	uint64_t run = MIN(e->fblock + e->count, last + 1) - b;

	if (alloc)
		push_ext(ext, n, b, run, pool_off(m, pb), e->state != META_EXT_WRITTEN);
	else if (e->state == META_EXT_WRITTEN)
		push_ext(ext, n, b, run, pool_off(m, pb), false);
	else
		push_ext(ext, n, b, run, 0, false);
	return run;
}

/* one pass of extent_map under m->lock; undo (alloc only) collects the FRESH runs it allocated */
static int map_locked(struct meta *m, struct meta_inode *in, uint64_t off, uint64_t len,
		      bool alloc, struct meta_extent *ext, int max, GArray *undo)
{
	uint64_t b = off / BS, last = (off + len - 1) / BS;
	int n = 0, rc = 0;

	while (b <= last && n < max) {
		struct meta_ext *e, *next;
		uint64_t run, start, got;

		e = inode_ext_find(in, b, &next);
		if (e) {
			b += push_mapped(m, ext, &n, e, b, last, alloc);
			continue;
		}
		run = hole_len(b, last, next);
		if (!alloc) {
			push_ext(ext, &n, b, run, 0, false);
			b += run;
			continue;
		}
		rc = alloc_run(m, in, b, run, META_EXT_FRESH, &start, &got);
		if (rc < 0)
			return rc;
		g_array_append_vals(undo, ((uint64_t[2]){ b, got }), 1);
		push_ext(ext, &n, b, got, pool_off(m, start), true);
		b += got;
	}
	return n;
}

/* one try of extent_map: -EAGAIN when it should try again (after a sync) */
static int map_try(struct meta *m, uint64_t ino, uint64_t off, uint64_t len, bool alloc,
		   struct meta_extent *ext, int max, GArray *undo, bool *retried)
{
	struct meta_inode *in;
	guint i;
	int rc;

	rc = meta_lock_get(m, ino, META_REG, &in);
	if (rc < 0)
		return rc;
	rc = alloc ? meta_may_change(m, 0) : 0;
	if (!rc)
		rc = map_locked(m, in, off, len, alloc, ext, max, undo);
	if (rc != -ENOSPC)
		return meta_unlock(m, rc);
	for (i = 0; undo && i < undo->len; i++) {
		uint64_t *u = &g_array_index(undo, uint64_t, i * 2);

		inode_ext_clear(m, in, u[0], u[1], true);
	}
	if (undo)
		g_array_set_size(undo, 0);
	if (sync_and_retry(m, retried))
		return -EAGAIN;
	return meta_unlock(m, rc);
}

int extent_map(struct meta *m, uint64_t ino, uint64_t off, uint64_t len, bool alloc,
	       struct meta_extent *ext, int max)
{
	bool retried = false;
	GArray *undo;
	int rc;

	if (!len || max <= 0)
		return 0;
	/* whole blocks: the last one of the largest file (size INT64_MAX) ends at 2^63 */
	if (off + len < off || off + len > (uint64_t)INT64_MAX + 1)
		return -EFBIG;
	undo = alloc ? g_array_new(FALSE, FALSE, sizeof(uint64_t) * 2) : NULL;
	do
		rc = map_try(m, ino, off, len, alloc, ext, max, undo, &retried);
	while (rc == -EAGAIN);
	if (undo)
		g_array_free(undo, TRUE);
	return rc;
}

#define WRITE_COMMIT 0x1 /* the blocks of the range become WRITTEN */
#define WRITE_TIMES 0x2 /* mtime = ctime = now */
#define WRITE_SIZE 0x4 /* size = max(size, end of the range) */

static int write_update(struct meta *m, uint64_t ino, uint64_t off, uint64_t len,
			unsigned int what);

int extent_write_done(struct meta *m, uint64_t ino, uint64_t off, uint64_t len)
{
	return write_update(m, ino, off, len, WRITE_COMMIT | WRITE_TIMES | (len ? WRITE_SIZE : 0));
}

int extent_write_accept(struct meta *m, uint64_t ino, uint64_t end, bool times)
{
	return write_update(m, ino, end, 0, WRITE_SIZE | (times ? WRITE_TIMES : 0));
}

int extent_write_commit(struct meta *m, uint64_t ino, uint64_t off, uint64_t len)
{
	return write_update(m, ino, off, len, WRITE_COMMIT);
}

struct restate {
	uint64_t fb, count, pb;
};

/* the runs of [off, off+len) not WRITTEN yet */
static GArray *unwritten_runs(struct meta_inode *in, uint64_t off, uint64_t len)
{
	GArray *parts = g_array_new(FALSE, FALSE, sizeof(struct restate));
	uint64_t b = off / BS, last = (off + len - 1) / BS;

	while (len && b <= last) {
		struct meta_ext *next, *e = inode_ext_find(in, b, &next);
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
	return parts;
}

/*
 * The CSUM records of pool blocks [pb, pb+count) that have a CRC in the
 * table (inside a transaction): the data path set the CRCs of new blocks
 * in RAM only, and they go to the journal here, after the EXT_SET that
 * makes the blocks part of the file - the same transaction, so neither is
 * durable without the other, and a replay frees nothing after them.
 */
static void log_crcs(struct meta *m, uint64_t pb, uint64_t count)
{
	uint32_t crc[256];
	bool have[256];
	uint64_t done, n, i, start;

	for (done = 0; done < count; done += n) {
		n = MIN(count - done, (uint64_t)G_N_ELEMENTS(crc));
		csum_get_run(m->csum, pb + done, n, crc, have);
		for (start = 0; start < n; start = i) {
			for (i = start; i < n && have[i] == have[start]; i++)
				;
			if (have[start])
				journal_rec_csum(m->j, false, pb + done + start, i - start,
						 crc + start);
		}
	}
}

/* make the blocks of [off, off+len) WRITTEN (inside a transaction); did any change? */
static bool commit_range(struct meta *m, struct meta_inode *in, uint64_t off, uint64_t len)
{
	GArray *parts = unwritten_runs(in, off, len);
	bool changed = parts->len > 0;
	guint i;

	for (i = 0; i < parts->len; i++) {
		struct restate *r = &g_array_index(parts, struct restate, i);

		inode_ext_clear(m, in, r->fb, r->count, false);
		inode_ext_set(m, in, r->fb, r->count, r->pb, META_EXT_WRITTEN);
		journal_rec_ext_set(m->j, in->a.ino, r->fb, r->count, r->pb, META_EXT_WRITTEN);
		log_crcs(m, r->pb, r->count);
	}
	g_array_free(parts, TRUE);
	return changed;
}

/* extent_write_done and its two halves: the WRITE_* parts of it in what */
static int write_update(struct meta *m, uint64_t ino, uint64_t off, uint64_t len,
			unsigned int what)
{
	struct meta_inode *in;
	uint64_t end = off + len;
	bool changed = false;
	int rc;

	rc = meta_lock_get(m, ino, META_REG, &in);
	if (rc < 0)
		return rc;
	rc = meta_may_change(m, 0);
	if (!rc && end < off)
		rc = -EFBIG;
	if (rc < 0)
		return meta_unlock(m, rc);
	meta_txn_begin(m, NULL);
	if (what & WRITE_COMMIT)
		changed = commit_range(m, in, off, len);
	if ((what & WRITE_SIZE) && end > in->a.size) {
		in->a.size = end;
		changed = true;
	}
	if (what & WRITE_TIMES) {
		struct timespec now;

		clock_file_time(&now);
		inode_time_set(&in->a.mtime, &now);
		inode_time_set(&in->a.ctime, &now);
		inode_touch_acct(m, in);
		in->times_unlogged = 1;
	}
	/*
	 * The times of an accepted write that moves no size go to the journal
	 * with the commit of its data (a crash loses both or neither): random
	 * overwrites then log the inode once per write-back, not per write.
	 */
	if (in->times_unlogged && (changed || (what & WRITE_COMMIT)))
		changed = true;
	meta_txn_end(m, changed ? in : NULL);
	return meta_unlock(m, 0);
}

/* blocks of [b, last] not yet allocated */
static uint64_t count_holes(struct meta_inode *in, uint64_t b, uint64_t last)
{
	uint64_t holes = 0;

	while (b <= last) {
		struct meta_ext *next, *e = inode_ext_find(in, b, &next);

		if (e) {
			b = e->fblock + e->count;
			continue;
		}
		holes += hole_len(b, last, next);
		if (!next || next->fblock > last)
			break;
		b = next->fblock;
	}
	return holes;
}

/* allocate UNWRITTEN blocks for the holes of [b, last] (inside a transaction) */
static int fill_holes(struct meta *m, struct meta_inode *in, uint64_t b, uint64_t last)
{
	uint64_t nrec = 0;
	int rc = 0;

	while (b <= last) {
		struct meta_ext *next, *e = inode_ext_find(in, b, &next);
		uint64_t start, got;

		if (e) {
			b = e->fblock + e->count;
			continue;
		}
		rc = alloc_run(m, in, b, hole_len(b, last, next), META_EXT_UNWRITTEN, &start,
			       &got);
		if (rc < 0)
			break;
		journal_rec_ext_set(m->j, in->a.ino, b, got, start, META_EXT_UNWRITTEN);
		b += got;
		if (++nrec % FALLOC_TXN_RECS == 0) {
			meta_txn_end(m, in);
			meta_txn_begin(m, NULL);
		}
	}
	return rc;
}

/* lock and find a regular file ino for a change of [off, off+len); -EFBIG past the limit */
static int lock_range(struct meta *m, uint64_t ino, uint64_t off, uint64_t len,
		      struct meta_inode **in)
{
	int rc;

	if (off + len < off || off + len > (uint64_t)INT64_MAX)
		return -EFBIG;
	rc = meta_lock_get(m, ino, META_REG, in);
	if (rc < 0)
		return rc;
	rc = meta_may_change(m, 0);
	return rc < 0 ? meta_unlock(m, rc) : 0;
}

int extent_fallocate(struct meta *m, uint64_t ino, uint64_t off, uint64_t len, int mode)
{
	struct meta_inode *in;
	struct timespec now;
	uint64_t last = (off + len - 1) / BS;
	bool retried = false;
	int rc;

	if (mode & ~FALLOC_FL_KEEP_SIZE)
		return -EOPNOTSUPP;
	if (!len)
		return -EINVAL;
	do {
		rc = lock_range(m, ino, off, len, &in);
		if (rc < 0)
			return rc;
		if (count_holes(in, off / BS, last) <= alloc_nfree(m->alloc))
			break;
		if (!sync_and_retry(m, &retried))
			return meta_unlock(m, -ENOSPC);
	} while (true);
	meta_txn_begin(m, &now);
	rc = fill_holes(m, in, off / BS, last);
	if (!rc && !(mode & FALLOC_FL_KEEP_SIZE) && off + len > in->a.size) {
		in->a.size = off + len;
		inode_time_set(&in->a.mtime, &now);
	}
	inode_time_set(&in->a.ctime, &now);
	meta_txn_end(m, in);
	return meta_unlock(m, rc);
}

int extent_punch_hole(struct meta *m, uint64_t ino, uint64_t off, uint64_t len)
{
	uint64_t first = (off + BS - 1) / BS, end = (off + len) / BS;
	struct meta_inode *in;
	struct timespec now;
	int rc;

	if (off + len < off)
		return -EINVAL;
	rc = lock_range(m, ino, 0, 0, &in);
	if (rc < 0)
		return rc;
	meta_txn_begin(m, &now);
	if (end > first) {
		inode_ext_clear(m, in, first, end - first, true);
		journal_rec_ext_clear(m->j, ino, first, end - first);
	}
	inode_time_set(&in->a.mtime, &now);
	inode_time_set(&in->a.ctime, &now);
	meta_txn_end(m, in);
	return meta_unlock(m, 0);
}

int extent_seek(struct meta *m, uint64_t ino, uint64_t off, int whence, uint64_t *result)
{
	struct meta_inode *in;
	struct meta_ext *e, *next;
	uint64_t size;
	int rc;

	rc = meta_lock_get(m, ino, META_REG, &in);
	if (rc < 0)
		return rc;
	size = in->a.size;
	if (off >= size)
		return meta_unlock(m, -ENXIO);
	e = inode_ext_find(in, off / BS, &next);
	if (whence == SEEK_DATA) {
		if (e)
			*result = off;
		else if (next && next->fblock * BS < size)
			*result = next->fblock * BS;
		else
			rc = -ENXIO;
	} else if (whence == SEEK_HOLE) {
		uint64_t endb = e ? e->fblock + e->count : 0;

		while (e && (e = inode_ext_find(in, endb, NULL)))
			endb = e->fblock + e->count;
		*result = endb ? MIN(endb * BS, size) : off;
	} else {
		rc = -EINVAL;
	}
	return meta_unlock(m, rc);
}

uint64_t extent_pblock(struct meta *m, uint64_t pool_off)
{
	return (pool_off - m->g.data_off) / BS;
}

uint64_t extent_pool_off(struct meta *m, uint64_t pb)
{
	return m->g.data_off + pb * BS;
}

struct csum *extent_csum(struct meta *m)
{
	return m->csum;
}

uint32_t extent_format(struct meta *m)
{
	return m->g.version;
}

struct written_ctx {
	GArray *out;
	uint64_t ino;
};

static bool add_written(struct meta_ext *e, void *ctx)
{
	struct written_ctx *w = ctx;
	struct extent_run run = { w->ino, e->fblock, e->count, e->pblock };

	if (e->state == META_EXT_WRITTEN)
		g_array_append_val(w->out, run);
	return true;
}

void extent_written(struct meta *m, GArray *out)
{
	struct written_ctx w = { .out = out };
	struct meta_inode **arr;
	guint n, i;

	pthread_mutex_lock(&m->lock);
	arr = inode_table_sorted(m, &n);
	for (i = 0; i < n; i++) {
		if (!S_ISREG(arr[i]->a.mode))
			continue;
		w.ino = arr[i]->a.ino;
		inode_ext_foreach(arr[i], add_written, &w);
	}
	pthread_mutex_unlock(&m->lock);
	g_free(arr);
}
