// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * cache_fetch.c - filling cache slots from the pool.
 *
 * The caller (a reader, a writer that needs a fill, or a readahead thread)
 * owns a set of blocks of one inode in state FETCHING, each with want[]
 * saying which sub-blocks it needs: every run of wanted sub-blocks that are
 * not valid yet, of every block, goes to io_readv() at once - one batch of
 * pool reads, straight into the slots - and bytes at or past the file's
 * size are zeroed (what a read of a hole or past EOF returns). Valid
 * sub-blocks (dirty ones among them) are never overwritten. Nobody else
 * touches FETCHING blocks: readers and writers that need them wait for the
 * block (cache_wait_block): a fetch is the only one in flight for its block.
 */
#define G_LOG_DOMAIN "rmemfs-cache"

#include <errno.h>
#include <string.h>

#include <glib.h>

#include "cache_int.h"
#include "clock.h"
#include "io.h"

/* runs of wanted, not yet valid sub-blocks of x: an upper bound of its pieces */
static unsigned int fetch_runs(struct cache *c, const struct cache_block *x)
{
	unsigned int i = 0, j, n = 0;

	for (; cache_mask_next_run(x->want, x->valid, c->subs, &i, &j); i = j)
		n++;
	return n;
}

/* pieces for the wanted, not yet valid sub-blocks of x; zeroes what lies past lim */
static unsigned int fetch_pieces(struct cache *c, struct cache_block *x, uint32_t lim,
				 struct io_piece *p)
{
	uint64_t bo = cache_blk_off(c, x->blk);
	unsigned int i = 0, j, np = 0;

	for (; cache_mask_next_run(x->want, x->valid, c->subs, &i, &j); i = j) {
		uint32_t s = i * CACHE_SUB, e = MIN(j * CACHE_SUB, MAX(lim, s));

		if (e > s) {
			p[np].off = bo + s;
			p[np].len = e - s;
			p[np].buf = x->data + s;
			/* the written bits count from the block's start */
			p[np].written = x->alloc;
			p[np].written_base = bo;
			np++;
		}
		if (e < j * CACHE_SUB)
			memset(x->data + e, 0, j * CACHE_SUB - e);
	}
	return np;
}

int cache_fetch(struct cache *c, struct cache_inode *ci, struct cache_block **b, unsigned int n)
{
	struct io_piece *p;
	struct meta_attr attr;
	uint64_t t0;
	unsigned int i, np = 0, nfill = 0;
	size_t runs = 0;
	int rc;

	for (i = 0; i < n; i++)
		runs += fetch_runs(c, b[i]);
	p = g_new0(struct io_piece, MAX(runs, (size_t)1));
	rc = meta_getattr(c->meta, ci->ino, &attr);
	if (rc == 0) {
		for (i = 0; i < n; i++) {
			uint64_t bo = cache_blk_off(c, b[i]->blk);
			uint32_t lim = attr.size > bo ? (uint32_t)MIN(attr.size - bo, (uint64_t)c->bs) : 0;

			if (!cache_none_valid(b[i]))
				nfill++;
			np += fetch_pieces(c, b[i], lim, p + np);
		}
		t0 = clock_now_ns();
		if (np)
			rc = io_readv(c->io, ci->ino, p, (int)np);
		if (np && rc == 0) {
			cache_hist_add(&c->lat[CACHE_LAT_FETCH], clock_now_ns() - t0);
			cache_count(&c->st.fetch_batches, 1);
		}
	}
	g_free(p);

	pthread_mutex_lock(&c->lock);
	for (i = 0; i < n; i++) {
		struct cache_block *x = b[i];
		unsigned int w;

		if (rc == 0) {
			for (w = 0; w < CACHE_MASK_WORDS; w++)
				x->valid[w] |= x->want[w];
		} else if (cache_none_valid(x) && !x->pins) {
			cache_block_drop(c, x); /* nobody needs the empty block */
			continue;
		}
		/* after a failure the block keeps what was valid; a reader holding it sees the error */
		cache_set_state(c, x, cache_has_dirty(x) ? CACHE_DIRTY : CACHE_CLEAN);
		cache_want(x, 0, c->bs);
	}
	if (rc == 0)
		cache_count(&c->st.fills, nfill);
	pthread_mutex_unlock(&c->lock);
	if (rc < 0)
		g_message("fetching %u blocks of ino %" G_GUINT64_FORMAT ": %s", n, ci->ino,
			  g_strerror(-rc));
	return rc;
}
