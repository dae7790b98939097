// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * cache_fetch.c - filling cache slots from the pool.
 *
 * The caller (a reader, a writer that needs a fill, or a readahead thread)
 * owns a set of blocks of one inode in state FETCHING: new blocks, which get
 * all their bytes, and partly valid blocks, which get the bytes outside
 * their valid range (a fill; dirty bits stay). Every piece of every block
 * goes to io_readv() at once - one batch of pool reads, straight into the
 * slots - and bytes at or past the file's size are zeroed (what a read of a
 * hole or past EOF returns). Nobody else touches FETCHING blocks: readers
 * and writers that need them wait on c->cond, which is what makes a fetch
 * the only one in flight for its block.
 */
#define G_LOG_DOMAIN "rmemfs-cache"

#include <errno.h>
#include <string.h>

#include <glib.h>

#include "cache_int.h"
#include "io.h"

int cache_fetch(struct cache *c, struct cache_inode *ci, struct cache_block **b, unsigned int n)
{
	struct io_piece *p;
	struct meta_attr attr;
	uint64_t t0;
	unsigned int i, np = 0, nfill = 0;
	int rc;

	p = g_new0(struct io_piece, 2 * n);
	rc = meta_getattr(c->meta, ci->ino, &attr);
	if (rc == 0) {
		for (i = 0; i < n; i++) {
			uint64_t bo = cache_blk_off(c, b[i]->blk);
			uint32_t lim = attr.size > bo ? (uint32_t)MIN(attr.size - bo, (uint64_t)c->bs) : 0;
			uint32_t vs = b[i]->vs, ve = b[i]->ve;

			if (vs == ve) { /* nothing valid: [ws, we), normally the whole block */
				uint32_t ws = b[i]->ws, we = b[i]->we, e = MIN(we, MAX(lim, ws));

				if (e > ws) {
					p[np].off = bo + ws;
					p[np].len = e - ws;
					p[np].buf = b[i]->data + ws;
					/* the written bits count from the block's start */
					p[np].written = ws ? NULL : b[i]->alloc;
					np++;
				}
				if (e < we)
					memset(b[i]->data + e, 0, we - e);
				continue;
			}
			nfill++;
			/* a fill: the bytes around [vs, ve) */
			if (vs) {
				uint32_t e = MIN(vs, lim);

				if (e) {
					p[np].off = bo;
					p[np].len = e;
					p[np].buf = b[i]->data;
					np++;
				}
				if (e < vs)
					memset(b[i]->data + e, 0, vs - e);
			}
			if (ve < c->bs) {
				uint32_t s = ve, e = MAX(ve, lim);

				if (e > s) {
					p[np].off = bo + s;
					p[np].len = e - s;
					p[np].buf = b[i]->data + s;
					np++;
				}
				memset(b[i]->data + e, 0, c->bs - e);
			}
		}
		t0 = cache_now_ns();
		if (np)
			rc = io_readv(c->io, ci->ino, p, (int)np);
		if (np && rc == 0) {
			cache_hist_add(&c->lat[CACHE_LAT_FETCH], cache_now_ns() - t0);
			cache_count(&c->st.fetch_batches, 1);
		}
	}
	g_free(p);

	pthread_mutex_lock(&c->lock);
	for (i = 0; i < n; i++) {
		struct cache_block *x = b[i];
		bool fill = x->vs != x->ve;

		if (rc == 0) {
			x->vs = fill ? 0 : x->ws;
			x->ve = fill ? c->bs : x->we;
			cache_set_state(c, x, cache_has_dirty(x) ? CACHE_DIRTY : CACHE_CLEAN);
		} else if (fill) {
			cache_set_state(c, x, cache_has_dirty(x) ? CACHE_DIRTY : CACHE_CLEAN);
		} else if (x->pins) {
			/* a reader holds it (and will see the error): leave it empty and clean */
			x->ve = x->vs = 0;
			cache_set_state(c, x, CACHE_CLEAN);
		} else {
			cache_block_drop(c, x);
			continue;
		}
		x->ws = 0; /* a later fetch of it (after a failure) is whole */
		x->we = c->bs;
	}
	if (rc == 0)
		cache_count(&c->st.fills, nfill);
	cache_wake(c);
	pthread_mutex_unlock(&c->lock);
	if (rc < 0)
		g_message("fetching %u blocks of ino %" G_GUINT64_FORMAT ": %s", n, ci->ino,
			  g_strerror(-rc));
	return rc;
}
