// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * cache_write.c - writes into the block cache (cache_write, see cache.h and
 * cache_int.h).
 *
 * writeback=on: allocate the blocks the write needs (io_reserve: ENOSPC is
 * the write's error, not a surprise at write-back; the block remembers
 * which of its sub-blocks have pool blocks, so that is done once), move the size and times
 * (extent_write_accept), then copy into the blocks - creating them without
 * reading the pool when the write covers them or they lie past EOF, or as
 * partly valid blocks otherwise (a later read or a write that would leave a
 * gap fills them) - and mark the written sub-blocks dirty. Writers wait
 * while too much is dirty (dirty_max) for the write-back threads.
 * writeback=off: the write goes through io_write and refreshes cached copies.
 *
 * Ordered mode is kept: blocks reserved for a write are fresh (no record
 * names them) until a write-back thread has written their data and committed them
 * (io_writeback_files). A crash loses unflushed writes and nothing else: their
 * sizes may be durable, so the tail of a file can read as zeros, never as
 * stale data (docs/ARCHITECTURE.md, "Ordered mode and crash consistency").
 */
#define G_LOG_DOMAIN "rmemfs-cache"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include <glib.h>

#include "cache_int.h"
#include "extent.h"
#include "io.h"

/* are the pool blocks of [off, end) known to exist (so no reservation is needed)? */
static bool range_allocated(struct cache *c, struct cache_inode *ci, uint64_t off, uint64_t end)
{
	uint64_t blk;
	bool all = true;

	pthread_mutex_lock(&c->lock);
	for (blk = off >> c->shift; all && cache_blk_off(c, blk) < end; blk++) {
		struct cache_block *b = cache_lookup(c, ci->ino, blk);
		uint32_t s, e;

		if (!b) {
			all = false;
			break;
		}
		cache_block_span(c, blk, off, end, &s, &e);
		all = cache_mask_all(b->alloc, s / CACHE_SUB, (e + CACHE_SUB - 1) / CACHE_SUB);
	}
	pthread_mutex_unlock(&c->lock);
	return all;
}

/*
 * Reserve the pool blocks of [off, end). A write inside one cache block
 * learns in the same step which sub-blocks of that block have pool blocks
 * (*learned: their mask, for learn_alloc once the block is in the cache):
 * later writes to the block then need no reservation. 0 or -errno.
 */
static int reserve(struct cache *c, uint64_t ino, uint64_t off, uint64_t end, uint64_t *mask,
		   bool *learned)
{
	uint64_t blk = off >> c->shift;

	*learned = false;
	if ((end - 1) >> c->shift != blk)
		return io_reserve(c->io, ino, off, end - off);
	memset(mask, 0, CACHE_MASK_WORDS * sizeof(*mask));
	*learned = true;
	return io_reserve_window(c->io, ino, off, end - off, cache_blk_off(c, blk), c->bs, mask,
				 CACHE_MASK_WORDS);
}

/*
 * The block of off has the pool blocks of mask (from reserve). Nothing frees
 * them meanwhile: that takes an exclusive section, which drops the block.
 */
static void learn_alloc(struct cache *c, struct cache_inode *ci, uint64_t off,
			const uint64_t *mask)
{
	struct cache_block *b;
	unsigned int w;

	pthread_mutex_lock(&c->lock);
	b = cache_lookup(c, ci->ino, off >> c->shift);
	for (w = 0; b && w < CACHE_MASK_WORDS; w++)
		b->alloc[w] |= mask[w];
	pthread_mutex_unlock(&c->lock);
}

/*
 * The sub-blocks of x that a write of [s, e) covers only partly and that
 * must be fetched first: not valid, and holding file bytes (starting below
 * size0, the size before the write; past it they read as zeros). With set,
 * x->want becomes them (the caller is about to fetch x). False: none.
 */
static bool edges_to_fill(struct cache *c, struct cache_block *x, uint32_t s, uint32_t e,
			  uint64_t size0, bool set)
{
	uint64_t bo = cache_blk_off(c, x->blk);
	unsigned int first = cache_sub_of(s), last = cache_sub_end(e) - 1;
	bool head = s % CACHE_SUB && !cache_valid(x, s, s + 1) &&
		    bo + (uint64_t)first * CACHE_SUB < size0;
	bool tail = e % CACHE_SUB && !cache_valid(x, e - 1, e) &&
		    bo + (uint64_t)last * CACHE_SUB < size0;

	if (!set || (!head && !tail))
		return head || tail;
	memset(x->want, 0, sizeof(x->want));
	if (head)
		cache_mask_set(x->want, first, first + 1);
	if (tail)
		cache_mask_set(x->want, last, last + 1);
	return true;
}

/*
 * After the copy of [s, e) into x: the covered sub-blocks are valid; a
 * partly covered one that was not valid lies past the old EOF (else it was
 * filled first), so the rest of it is zeros.
 */
static void write_done(struct cache *c, struct cache_block *x, uint32_t s, uint32_t e)
{
	unsigned int first = cache_sub_of(s), last = cache_sub_end(e) - 1;

	if (s % CACHE_SUB && !cache_valid(x, s, s + 1))
		memset(x->data + first * CACHE_SUB, 0, s - first * CACHE_SUB);
	if (e % CACHE_SUB && !cache_valid(x, e - 1, e))
		memset(x->data + e, 0, MIN((last + 1) * CACHE_SUB, c->bs) - e);
	cache_mask_set(x->valid, first, last + 1);
	cache_mask_set(x->alloc, first, last + 1);
	cache_mark_dirty(c, x, s, e);
}

/*
 * Copy [off, end) into blocks b[0..n) of file blocks first.. (src, or zeros
 * when NULL), marked busy meanwhile, then mark it dirty. c->lock held; it is
 * dropped for the copy.
 */
static void copy_in(struct cache *c, struct cache_block **b, uint64_t first, uint64_t n,
		    uint64_t off, uint64_t end, const char *src)
{
	uint64_t k;
	uint32_t s, e;

	for (k = 0; k < n; k++) {
		b[k]->busy = true;
		b[k]->ref = true;
	}
	pthread_mutex_unlock(&c->lock);
	for (k = 0; k < n; k++) {
		cache_block_span(c, first + k, off, end, &s, &e);
		if (src)
			memcpy(b[k]->data + s, src + (cache_blk_off(c, first + k) + s - off), e - s);
		else
			memset(b[k]->data + s, 0, e - s);
	}
	pthread_mutex_lock(&c->lock);
	for (k = 0; k < n; k++) {
		cache_block_span(c, first + k, off, end, &s, &e);
		write_done(c, b[k], s, e);
		cache_block_unbusy(c, b[k]);
	}
}

/* fetch the partly covered edges of fills[0..nfill) first (c->lock held, dropped meanwhile) */
static int fill_edges(struct cache *c, struct cache_inode *ci, struct cache_block **fills,
		      unsigned int nfill, uint64_t off, uint64_t end, uint64_t size0)
{
	unsigned int k;
	int rc;

	for (k = 0; k < nfill; k++) {
		uint32_t s, e;

		cache_block_span(c, fills[k]->blk, off, end, &s, &e);
		edges_to_fill(c, fills[k], s, e, size0, true);
		cache_set_state(c, fills[k], CACHE_FETCHING);
	}
	pthread_mutex_unlock(&c->lock);
	rc = cache_fetch(c, ci, fills, nfill);
	pthread_mutex_lock(&c->lock);
	return rc;
}

/*
 * Put [off, end) (at most max_req blocks) into the cache as dirty data:
 * src, or zeros when src is NULL. size0 is the file size before this write
 * (sub-blocks past it need no fill: they read as zeros). The pool blocks
 * are already reserved. 0 or -errno (a fill that failed).
 */
static int write_blocks(struct cache *c, struct cache_inode *ci, uint64_t off, uint64_t end,
			const char *src, uint64_t size0)
{
	uint64_t first = off >> c->shift, n = ((end - 1) >> c->shift) - first + 1;
	struct cache_block *stack[3 * 16], **b = stack, **slots, **fills;
	unsigned int k, need, got, nfill;
	int rc = 0;

	if (n > 16)
		b = g_new(struct cache_block *, 3 * n);
	slots = b + n;
	fills = b + 2 * n;
	pthread_mutex_lock(&c->lock);
again:
	need = 0;
	nfill = 0;
	for (k = 0; k < n; k++) {
		struct cache_block *x = cache_lookup(c, ci->ino, first + k);
		uint32_t s, e;

		b[k] = x;
		if (!x) {
			need++;
			continue;
		}
		if (x->state == CACHE_FETCHING || x->state == CACHE_WRITEBACK || x->busy)
			goto wait;
		cache_block_span(c, first + k, off, end, &s, &e);
		if (edges_to_fill(c, x, s, e, size0, false))
			fills[nfill++] = x;
	}
	if (nfill)
		goto fetch;
	if (!cache_slots_take_all(c, b, n, slots, need))
		goto wait; /* k == n: for a slot */
	for (k = 0; k < n; k++)
		if (b[k])
			cache_block_unpin(c, b[k]); /* pinned only while the slots were taken */
	/* new blocks go into the index; those with edges to fill are fetched first */
	for (k = 0, got = 0; k < n; k++) {
		uint32_t s, e;

		if (b[k])
			continue;
		b[k] = slots[got++];
		cache_block_insert(c, b[k], ci, first + k, CACHE_CLEAN);
		cache_block_span(c, first + k, off, end, &s, &e);
		if (edges_to_fill(c, b[k], s, e, size0, false))
			fills[nfill++] = b[k];
	}
	if (nfill)
		goto fetch;
	copy_in(c, b, first, n, off, end, src);
out:
	pthread_mutex_unlock(&c->lock);
	if (b != stack)
		g_free(b);
	return rc;
wait:
	cache_wait_for(c, k < n ? b[k] : NULL);
	goto again;
fetch:
	rc = fill_edges(c, ci, fills, nfill, off, end, size0);
	if (rc < 0)
		goto out;
	goto again;
}

/* writeback=off: through io_write, then refresh the cached copies */
static ssize_t write_through(struct cache *c, struct cache_inode *ci, uint64_t off,
			     const char *buf, size_t len)
{
	ssize_t n = io_write(c->io, ci->ino, off, buf, len);
	uint64_t end, blk;

	if (n <= 0)
		return n;
	end = off + (uint64_t)n;
	for (blk = off >> c->shift; cache_blk_off(c, blk) < end; blk++) {
		struct cache_block *x;
		uint32_t s, e;

		pthread_mutex_lock(&c->lock);
		for (;;) {
			x = cache_lookup(c, ci->ino, blk);
			if (!x || (x->state != CACHE_FETCHING && !x->busy))
				break;
			cache_wait_block(c, x);
		}
		if (!x) {
			pthread_mutex_unlock(&c->lock);
			continue;
		}
		cache_block_span(c, blk, off, end, &s, &e);
		x->busy = true;
		pthread_mutex_unlock(&c->lock);
		memcpy(x->data + s, buf + (cache_blk_off(c, blk) + s - off), e - s);
		pthread_mutex_lock(&c->lock);
		/*
		 * Sub-blocks the write covered are valid now; one it covered only
		 * partly stays as it was (valid: updated; not: the pool has it).
		 */
		cache_mask_set(x->valid, cache_sub_end(s), e == c->bs ? c->subs : e / CACHE_SUB);
		x->ref = true;
		cache_block_unbusy(c, x);
		pthread_mutex_unlock(&c->lock);
	}
	return n;
}

ssize_t cache_write(struct cache *c, uint64_t ino, uint64_t off, const void *buf, size_t len,
		    bool set_times)
{
	uint64_t end = off + len, o, mask[CACHE_MASK_WORDS];
	struct cache_inode *ci;
	struct meta_attr attr;
	ssize_t n = (ssize_t)len;
	bool learned = false;
	int rc;

	if (len == 0)
		return 0;
	if (end < off || end > (uint64_t)INT64_MAX)
		return -EFBIG;
	ci = cache_inode_ref(c, ino);
	pthread_rwlock_rdlock(&ci->rw);
	if (!c->cfg.writeback) {
		n = write_through(c, ci, off, buf, len);
		goto out;
	}

	/* too much dirty: let the write-back thread catch up first */
	pthread_mutex_lock(&c->lock);
	if (c->ndirty >= c->dirty_max)
		cache_count(&c->st.throttled, 1);
	while (c->ndirty >= c->dirty_max && !c->stopping)
		cache_wait_dirty(c);
	pthread_mutex_unlock(&c->lock);

	rc = meta_getattr(c->meta, ino, &attr);
	if (rc == 0 && !S_ISREG(attr.mode))
		rc = -EINVAL;
	if (rc == 0 && !range_allocated(c, ci, off, end))
		rc = reserve(c, ino, off, end, mask, &learned); /* -ENOSPC: nothing was written */
	if (rc == 0)
		rc = extent_write_accept(c->meta, ino, end, set_times);
	if (rc < 0) {
		n = rc;
		goto out;
	}
	/*
	 * Bytes between the old EOF and the write read as zeros. A written
	 * block across the old EOF may hold stale bytes past it (a crash
	 * between a write-back and its commit): zero them like io_write does.
	 */
	if (off > attr.size && attr.size % CACHE_SUB) {
		uint64_t zend = MIN(off, (attr.size + CACHE_SUB - 1) & ~(uint64_t)(CACHE_SUB - 1));

		rc = io_block_written(c->io, ino, attr.size);
		if (rc == 1)
			rc = write_blocks(c, ci, attr.size, zend, NULL, attr.size);
		if (rc < 0) {
			n = rc;
			goto out;
		}
	}
	for (o = off; o < end;) {
		uint64_t stop = MIN(end, cache_blk_off(c, (o >> c->shift) + c->max_req));

		rc = write_blocks(c, ci, o, stop, (const char *)buf + (o - off), attr.size);
		if (rc < 0) {
			n = o > off ? (ssize_t)(o - off) : rc;
			break;
		}
		o = stop;
	}
	if (n > 0)
		cache_count(&c->st.bytes_written, (uint64_t)n);
	if (n > 0 && learned)
		learn_alloc(c, ci, off, mask);
out:
	pthread_rwlock_unlock(&ci->rw);
	cache_inode_unref(c, ci);
	return n;
}

