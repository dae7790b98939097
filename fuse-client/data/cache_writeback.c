// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * cache_writeback.c - write-back of dirty blocks.
 *
 * The write-back threads wake every flush_interval_ms (or when kicked: a
 * writer found too much dirty, no free slot, or an fsync wants help) and
 * write back, oldest first, the inodes whose dirty data is older than
 * dirty_expire_ms - or any dirty data while more than dirty_bg blocks are
 * dirty, or an inode someone fsyncs. An inode's dirty blocks go together,
 * sorted, as one io_writeback_files(): one batch of pool writes (chained WRs on
 * RDMA) straight out of the slots, then the commit of the blocks they
 * filled. Batches are taken under the lock (their blocks become WRITEBACK),
 * so several threads - the write-back threads, an fsync - write disjoint batches of
 * one file at once over different channels. fsync (cache_flush) and
 * exclusive sections run the same write-back synchronously for one inode.
 *
 * While blocks are WRITEBACK, writers wait for them (the bytes in flight are
 * stable). Errors: the first one is remembered in the inode record and
 * reported to the next fsync/flush/close of the file (cache_flush,
 * cache_close); the blocks stay dirty and are retried after a pause -
 * unless the error is permanent (no space, read-only, lease lost) or they
 * failed WB_MAX_FAILURES times, when they are given up: their cached copy
 * is invalidated so that reads show what the pool holds. An inode that no
 * longer exists (unlinked and released meanwhile) simply drops its blocks.
 */
#define G_LOG_DOMAIN "rmemfs-cache"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <glib.h>

#include "cache_int.h"
#include "clock.h"
#include "io.h"
#include "remote.h"

#define WB_MAX_BLOCKS 256U /* blocks per write-back batch */
#define WB_MAX_BYTES (16U << 20) /* bytes per write-back batch */
#define WB_MAX_FAILURES 3U
#define WB_RETRY_NS (250ULL * 1000000ULL) /* first pause after a failure; doubles */

static int blk_cmp(const void *a, const void *b)
{
	const struct cache_block *x = *(struct cache_block *const *)a;
	const struct cache_block *y = *(struct cache_block *const *)b;

	return x->blk < y->blk ? -1 : x->blk > y->blk;
}

static int ino_blk_cmp(const void *a, const void *b)
{
	const struct cache_block *x = *(struct cache_block *const *)a;
	const struct cache_block *y = *(struct cache_block *const *)b;

	if (x->ino != y->ino)
		return x->ino < y->ino ? -1 : 1;
	return blk_cmp(a, b);
}

static unsigned int batch_max(const struct cache *c)
{
	return MAX(1U, MIN(WB_MAX_BLOCKS, WB_MAX_BYTES / c->bs));
}

/* take ci's idle dirty blocks (dirty at or before seq) for write-back, sorted (c->lock held) */
static unsigned int collect(struct cache *c, struct cache_inode *ci, uint64_t seq,
			    struct cache_block **out)
{
	unsigned int n = 0, max = batch_max(c);
	struct cache_block *b;

	for (b = ci->blocks; b && n < max; b = b->inext) {
		if (b->state != CACHE_DIRTY || b->busy || b->dirty_seq > seq)
			continue;
		cache_set_state(c, b, CACHE_WRITEBACK);
		out[n++] = b;
	}
	qsort(out, n, sizeof(*out), blk_cmp);
	return n;
}

/*
 * The pool pieces of blocks b[0..n): each run of dirty sub-blocks, whole
 * (dirty sub-blocks are valid whole: a write fills the edges it needs).
 */
static unsigned int build_pieces(struct cache *c, struct cache_block **b, unsigned int n,
				 struct io_piece *p)
{
	unsigned int k, np = 0;

	for (k = 0; k < n; k++) {
		uint64_t bo = cache_blk_off(c, b[k]->blk);
		unsigned int i = 0, j;

		for (; cache_mask_next_run(b[k]->dirty, NULL, c->subs, &i, &j); i = j) {
			p[np].off = bo + i * CACHE_SUB;
			p[np].len = (j - i) * CACHE_SUB;
			p[np].buf = b[k]->data + i * CACHE_SUB;
			p[np].written = NULL;
			np++;
		}
	}
	return np;
}

static bool permanent_error(struct cache *c, int rc)
{
	return rc == -ENOSPC || rc == -EROFS || rc == -EFBIG || rc == -EINVAL || rc == -EDQUOT ||
	       remote_failed(c->remote);
}

/* drop ci's blocks nobody uses (the inode is gone); c->lock held */
static void drop_idle(struct cache *c, struct cache_inode *ci)
{
	struct cache_block *b, *next;

	for (b = ci->blocks; b; b = next) {
		next = b->inext;
		if (b->pins || b->busy || b->state == CACHE_FETCHING || b->state == CACHE_WRITEBACK)
			continue;
		if (b->on_dirty_list)
			cache_count(&c->st.discarded, 1);
		cache_block_drop(c, b);
	}
}

/* after a write-back of b[0..n) of ci ended with rc: new states, errors (c->lock held) */
static unsigned int finish(struct cache *c, struct cache_inode *ci, struct cache_block **b,
			   unsigned int n, int rc, bool gone)
{
	unsigned int k, failures = 0, given_up = 0;

	for (k = 0; k < n; k++) {
		struct cache_block *x = b[k];

		if (rc == 0 || rc == -ENOENT) {
			x->failures = 0;
			cache_clear_dirty(c, x);
			continue;
		}
		x->failures++;
		failures = MAX(failures, x->failures);
		if (permanent_error(c, rc) || x->failures >= WB_MAX_FAILURES) {
			/* given up: the cached copy no longer matches the pool */
			cache_clear_dirty(c, x);
			memset(x->valid, 0, sizeof(x->valid));
			cache_count(&c->st.discarded, 1);
			given_up++;
		} else {
			cache_set_state(c, x, CACHE_DIRTY);
		}
	}
	if (rc < 0 && rc != -ENOENT) {
		cache_count(&c->st.wb_errors, 1);
		if (!ci->wb_err)
			ci->wb_err = rc;
		ci->retry_ns = clock_now_ns() + (WB_RETRY_NS << MIN(failures, 4U));
	}
	if (gone || rc == -ENOENT)
		drop_idle(c, ci);
	return given_up;
}

/*
 * Write back b[0..n) (all WRITEBACK, sorted by inode then block; the
 * caller holds a reference on each of their inodes) as one batch.
 * c->lock NOT held. Returns 0 or the first error (-ENOENT: not an error).
 */
static int write_back(struct cache *c, struct cache_block **b, unsigned int n)
{
	struct io_piece *p = g_new(struct io_piece, (size_t)n * (c->subs / 2 + 1));
	struct io_wb_file *f = g_new0(struct io_wb_file, n);
	struct cache_inode **gci = g_new(struct cache_inode *, n);
	unsigned int *gfirst = g_new(unsigned int, n + 1);
	unsigned int np = 0, nf = 0, k, start, *given_up = g_new0(unsigned int, n);
	int rc = 0;
	uint64_t t0;

	/* one io_wb_file per inode: its blocks are consecutive in b[] */
	for (k = 0; k < n; k = start) {
		unsigned int m;

		for (start = k + 1; start < n && b[start]->ci == b[k]->ci; start++)
			;
		m = build_pieces(c, b + k, start - k, p + np);
		f[nf].ino = b[k]->ino;
		f[nf].p = p + np;
		f[nf].n = (int)m;
		gci[nf] = b[k]->ci;
		gfirst[nf] = k;
		np += m;
		nf++;
	}
	gfirst[nf] = n;
	t0 = clock_now_ns();
	io_writeback_files(c->io, f, (int)nf);
	cache_hist_add(&c->lat[CACHE_LAT_WRITEBACK], clock_now_ns() - t0);
	cache_count(&c->st.wb_batches, 1);

	/* (finish may drop a vanished inode's blocks: from here on only gci/gfirst) */
	pthread_mutex_lock(&c->lock);
	for (k = 0; k < nf; k++) {
		unsigned int cnt = gfirst[k + 1] - gfirst[k];

		if (f[k].rc == 0)
			cache_count(&c->st.wb_blocks, cnt);
		given_up[k] = finish(c, gci[k], b + gfirst[k], cnt, f[k].rc, f[k].gone);
		if (f[k].rc < 0 && f[k].rc != -ENOENT && !rc)
			rc = f[k].rc;
	}
	pthread_mutex_unlock(&c->lock);
	for (k = 0; k < nf; k++) {
		if (f[k].rc >= 0 || f[k].rc == -ENOENT)
			continue;
		if (given_up[k])
			g_message("write-back of ino %" G_GUINT64_FORMAT ": %s: given up, %u dirty "
				  "blocks not written (that data is lost)",
				  f[k].ino, g_strerror(-f[k].rc), given_up[k]);
		else
			g_message("write-back of ino %" G_GUINT64_FORMAT ": %s (will retry)",
				  f[k].ino, g_strerror(-f[k].rc));
	}
	g_free(given_up);
	g_free(gfirst);
	g_free(gci);
	g_free(f);
	g_free(p);
	return rc;
}

/*
 * The write-back thread's batch: due blocks of any inodes, oldest first, up to a
 * batch, sorted by inode and block; each inode gets a reference and goes
 * into cis[*ncis] (c->lock held)
 */
static unsigned int collect_due(struct cache *c, struct cache_block **out,
				struct cache_inode **cis, unsigned int *ncis)
{
	unsigned int n = 0, max = batch_max(c), k;
	uint64_t now = clock_now_ns();
	bool pressure = c->ndirty > c->dirty_bg;
	struct cache_block *x;

	for (x = c->dirty_head; x && n < max; x = x->dnext) {
		bool due = pressure || now - x->dirty_ns >= c->expire_ns;

		if (x->state != CACHE_DIRTY || x->busy || x->ci->exclusive ||
		    x->ci->retry_ns > now || !(due || x->ci->urgent))
			continue;
		cache_set_state(c, x, CACHE_WRITEBACK);
		out[n++] = x;
	}
	qsort(out, n, sizeof(*out), ino_blk_cmp);
	*ncis = 0;
	for (k = 0; k < n; k++) {
		if (k && out[k]->ci == out[k - 1]->ci)
			continue;
		out[k]->ci->refs++;
		cis[(*ncis)++] = out[k]->ci;
	}
	return n;
}

/*
 * the references collect_due took (c->lock held); not through the blocks:
 * after the write-back those of a vanished inode may be dropped and reused
 */
static void release_inodes(struct cache *c, struct cache_inode **cis, unsigned int n)
{
	while (n--)
		cache_inode_put(c, cis[n]);
}

int cache_writeback_inode(struct cache *c, struct cache_inode *ci, uint64_t seq,
			  bool exclusive_holder)
{
	struct cache_block **b = g_new(struct cache_block *, batch_max(c));
	unsigned int n;
	int rc = 0;

	pthread_mutex_lock(&c->lock);
	for (;;) {
		struct cache_block *x;
		bool pending = false;

		while (!exclusive_holder && ci->exclusive)
			cache_wait_inode(c, ci);
		n = collect(c, ci, seq, b);
		if (n) {
			pthread_mutex_unlock(&c->lock);
			rc = write_back(c, b, n);
			pthread_mutex_lock(&c->lock);
			if (rc < 0)
				break;
			continue;
		}
		/* what is left of ours is in flight elsewhere (the write-back thread, a writer): wait for it */
		for (x = ci->blocks; x && !pending; x = x->inext)
			pending = x->on_dirty_list && x->dirty_seq <= seq &&
				  (x->state != CACHE_DIRTY || x->busy);
		if (!pending)
			break;
		cache_wait_inode(c, ci);
	}
	pthread_mutex_unlock(&c->lock);
	g_free(b);
	return rc;
}

/* one round of the write-back thread: write back what is due (c->lock NOT held) */
static void flush_pass(struct cache *c)
{
	struct cache_block **b = g_new(struct cache_block *, batch_max(c));
	struct cache_inode **cis = g_new(struct cache_inode *, batch_max(c));
	unsigned int n, ncis;

	pthread_mutex_lock(&c->lock);
	while (!c->stopping) {
		n = collect_due(c, b, cis, &ncis);
		if (!n)
			break;
		pthread_mutex_unlock(&c->lock);
		write_back(c, b, n);
		pthread_mutex_lock(&c->lock);
		release_inodes(c, cis, ncis);
	}
	pthread_mutex_unlock(&c->lock);
	g_free(cis);
	g_free(b);
}

static void *writeback_main(void *arg)
{
	struct cache *c = arg;
	struct pollfd pfd = { .fd = c->wb_efd, .events = POLLIN };

	for (;;) {
		uint64_t v;
		bool stop;
		int n;

		/* a kick wakes every write-back thread; one of them resets the counter */
		n = poll(&pfd, 1, (int)c->cfg.flush_interval_ms);
		if (n > 0 && (pfd.revents & POLLIN) && read(c->wb_efd, &v, sizeof(v)) < 0 &&
		    errno != EAGAIN)
			g_message("write-back thread: read(eventfd): %s", g_strerror(errno));
		pthread_mutex_lock(&c->lock);
		stop = c->stopping;
		pthread_mutex_unlock(&c->lock);
		if (stop)
			break;
		flush_pass(c);
	}
	return NULL;
}

int cache_writeback_start(struct cache *c)
{
	int rc;

	c->wb_efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (c->wb_efd < 0) {
		rc = -errno;
		g_message("eventfd: %s", g_strerror(-rc));
		return rc;
	}
	rc = cache_threads_start(c, writeback_main, c->cfg.writeback_threads, &c->wb_threads,
				 &c->nwb_threads, "write-back thread");
	if (rc < 0)
		cache_writeback_stop(c);
	return rc;
}

void cache_writeback_stop(struct cache *c)
{
	unsigned int i;

	pthread_mutex_lock(&c->lock);
	c->stopping = true;
	cache_wake_dirty(c);
	pthread_mutex_unlock(&c->lock);
	if (c->nwb_threads)
		cache_wake_writeback(c);
	for (i = 0; i < c->nwb_threads; i++)
		pthread_join(c->wb_threads[i], NULL);
	c->nwb_threads = 0;
	g_free(c->wb_threads);
	c->wb_threads = NULL;
	if (c->wb_efd >= 0) {
		close(c->wb_efd);
		c->wb_efd = -1;
	}
}
