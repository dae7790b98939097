// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * cache.c - the block cache's public operations (see cache.h, and
 * cache_int.h for the states and the locking).
 *
 * Read: take every block of the request at once (all-or-nothing under
 * c->lock, so that no thread holds some slots while waiting for others):
 * valid blocks are pinned, missing ones are created FETCHING (this thread
 * fetches them, in one batch), blocks that another thread is fetching are
 * waited for. Readahead is queued in the same critical section, so it runs
 * while this thread fetches. The reply is made straight from the pinned
 * slots (cache_read_pin) or copied (cache_read).
 *
 * Writes are in cache_write.c. fsync writes the file's dirty blocks back
 * (cache_writeback.c); close reports a remembered write-back error. Exclusive
 * sections keep everything else off an inode while truncate & co change its
 * data in the pool behind the cache.
 */
#define G_LOG_DOMAIN "rmemfs-cache"

#include "cache.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include <glib.h>

#include "cache_int.h"
#include "io.h"
#include "remote.h"
#include "units.h"

#define CACHE_DEFAULT_EXPIRE_MS 1000
#define CACHE_DEFAULT_BG_PCT 5
#define CACHE_DEFAULT_MAX_PCT 40
#define CACHE_DEFAULT_FLUSH_MS 100
#define CACHE_DEFAULT_RA_THREADS 2
#define CACHE_DEFAULT_WRITEBACK_THREADS 2

/* ---- lifecycle ---- */

static void config_defaults(struct cache_config *cfg)
{
#define CACHE_DEFAULT(field, value) (cfg->field = cfg->field ? cfg->field : (value))
	CACHE_DEFAULT(dirty_expire_ms, CACHE_DEFAULT_EXPIRE_MS);
	CACHE_DEFAULT(dirty_bg_pct, CACHE_DEFAULT_BG_PCT);
	CACHE_DEFAULT(dirty_max_pct, CACHE_DEFAULT_MAX_PCT);
	CACHE_DEFAULT(flush_interval_ms, CACHE_DEFAULT_FLUSH_MS);
	CACHE_DEFAULT(ra_threads, CACHE_DEFAULT_RA_THREADS);
	CACHE_DEFAULT(writeback_threads, CACHE_DEFAULT_WRITEBACK_THREADS);
#undef CACHE_DEFAULT
}

/* slots, chunks, request size and the dirty thresholds from the configuration */
static void geometry(struct cache *c, unsigned int nslots)
{
	c->bs = c->cfg.block_size;
	c->shift = (unsigned int)__builtin_ctz(c->bs);
	c->subs = c->bs / CACHE_SUB;
	c->nslots = nslots;
	c->chunk_slots = MIN(nslots, MAX(16U, CACHE_CHUNK / c->bs));
	c->nchunks = (nslots + c->chunk_slots - 1) / c->chunk_slots;
	c->nactive = c->cfg.resident ? c->nchunks : 1;
	c->live = c->cfg.resident ? nslots : c->chunk_slots;
	/* what one request holds must fit the smallest cache: one chunk */
	c->max_req = MAX(1U, c->chunk_slots / 4);
	cache_set_limits(c);
	c->expire_ns = (uint64_t)c->cfg.dirty_expire_ms * 1000000ULL;
}

/*
 * Address space for the whole cache; cache_grow.c makes it resident a chunk
 * at a time, as it is used.
 */
static int arena_map(struct cache *c)
{
	int rc;

	c->arena_len = (size_t)c->nslots * c->bs;
	c->arena = mmap(NULL, c->arena_len, PROT_READ | PROT_WRITE,
			MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (c->arena == MAP_FAILED) {
		rc = -errno;
		c->arena = NULL;
		g_message("mmap(cache arena, %zu bytes): %s", c->arena_len, g_strerror(-rc));
		return rc;
	}
	return 0; /* its chunks are faulted in as cache_grow.c decides */
}

static void arena_register(struct cache *c)
{
	int rc = remote_arena_set(c->remote, c->arena, c->arena_len,
				  (size_t)c->chunk_slots * c->bs);

	if (rc == 0)
		c->arena_registered = true;
	else
		g_message("the cache arena could not be registered (%s): data moves through bounce buffers",
			  g_strerror(-rc));
	cache_grow_first(c);
}

int cache_create(const struct cache_config *cfg, struct io *io, struct cache **out)
{
	struct cache *c;
	uint64_t nslots;
	int rc;

	*out = NULL;
	if (cfg->block_size < CACHE_SUB || cfg->block_size > (1U << 20) ||
	    (cfg->block_size & (cfg->block_size - 1)))
		return -EINVAL;
	nslots = cfg->size / cfg->block_size;
	if (nslots < 16 || nslots > UINT32_MAX / 2)
		return -EINVAL;

	c = g_new0(struct cache, 1);
	c->cfg = *cfg;
	config_defaults(&c->cfg);
	c->io = io;
	c->meta = io_meta(io);
	c->remote = io_remote(io);
	geometry(c, (unsigned int)nslots);
	c->wb_efd = -1;
	c->trim_efd = -1;
	c->ra_efd = -1;
	c->ra_stop_efd = -1;
	pthread_mutex_init(&c->lock, NULL);
	cache_wait_init(c);
	g_queue_init(&c->ra_queue);

	rc = arena_map(c);
	if (rc < 0)
		goto err_free;
	rc = cache_index_init(c);
	if (rc < 0)
		goto err_unmap;
	arena_register(c);
	rc = cache_grow_start(c);
	if (rc < 0)
		goto err_grow;
	if (c->cfg.writeback) {
		rc = cache_writeback_start(c);
		if (rc < 0)
			goto err_grow;
	}
	if (c->cfg.readahead) {
		rc = cache_ra_start(c);
		if (rc < 0)
			goto err_writeback;
	}
	g_debug("cache: %u blocks of %u bytes, readahead up to %" G_GUINT64_FORMAT
		", write-%s (dirty: background %u, max %u blocks, expire %u ms)",
		c->nslots, c->bs, c->cfg.readahead, c->cfg.writeback ? "back" : "through",
		c->dirty_bg, c->dirty_max, c->cfg.dirty_expire_ms);
	*out = c;
	return 0;

err_writeback:
	cache_writeback_stop(c);
err_grow:
	cache_grow_stop(c);
	if (c->arena_registered)
		remote_arena_clear(c->remote);
	cache_index_free(c);
err_unmap:
	munmap(c->arena, c->arena_len);
err_free:
	cache_wait_destroy(c);
	pthread_mutex_destroy(&c->lock);
	g_free(c);
	return rc;
}

void cache_destroy(struct cache *c)
{
	if (!c)
		return;
	cache_grow_stop(c);
	cache_writeback_stop(c);
	cache_ra_stop(c);
	if (c->ndirty)
		g_message("cache_destroy: %u dirty blocks were never written back", c->ndirty);
	if (c->arena_registered)
		remote_arena_clear(c->remote);
	cache_index_free(c);
	if (c->arena)
		munmap(c->arena, c->arena_len);
	cache_wait_destroy(c);
	pthread_mutex_destroy(&c->lock);
	g_free(c);
}

/* ---- read ---- */

/*
 * Take blocks of [off, end) (at most c->max_req) for reading: on return
 * (c->lock held throughout, dropped only while waiting) every one is
 * pinned in b[], and those this thread must fetch are in fetch[0..*nfetch)
 * in state FETCHING. narrow: fetch only the read's own sub-blocks, even
 * for a sequential read.
 */
static void acquire_read(struct cache *c, struct cache_inode *ci, uint64_t off, uint64_t end,
			 struct cache_block **b, struct cache_block **fetch, unsigned int *nfetch,
			 bool *fill, bool narrow)
{
	narrow = narrow || !cache_ra_is_seq(c, ci, off, end - off);
	uint64_t first = off >> c->shift, n = ((end - 1) >> c->shift) - first + 1;
	struct cache_block *slot_stack[16], **slots = slot_stack;
	unsigned int k, need, got;

	if (n > G_N_ELEMENTS(slot_stack))
		slots = g_new(struct cache_block *, n);
again:
	need = 0;
	for (k = 0; k < n; k++) {
		struct cache_block *x = cache_lookup(c, ci->ino, first + k);
		uint32_t s, e;

		b[k] = x;
		fill[k] = false;
		if (!x) {
			need++;
			continue;
		}
		if (x->state == CACHE_FETCHING)
			goto wait;
		cache_block_span(c, first + k, off, end, &s, &e);
		if (cache_valid(x, s, e))
			continue;
		/* not valid where we need it: fetch the sub-blocks that are not (a fill) */
		if (x->busy || x->state == CACHE_WRITEBACK)
			goto wait;
		fill[k] = true;
	}
	if (!cache_slots_take_all(c, b, n, slots, need))
		goto wait; /* k == n: for a slot */
	*nfetch = 0;
	for (k = 0, got = 0; k < n; k++) {
		struct cache_block *x = b[k];
		uint32_t s, e;

		cache_block_span(c, first + k, off, end, &s, &e);
		if (!x) {
			x = slots[got++];
			cache_block_insert(c, x, ci, first + k, CACHE_FETCHING);
			cache_want(x, narrow ? s : 0, narrow ? e : c->bs);
			b[k] = x;
			fetch[(*nfetch)++] = x;
			x->pins++;
			cache_count(&c->st.misses, 1);
		} else if (fill[k]) {
			cache_set_state(c, x, CACHE_FETCHING);
			cache_want(x, narrow ? s : 0, narrow ? e : c->bs);
			fetch[(*nfetch)++] = x;
			cache_count(&c->st.misses, 1);
		} else {
			cache_count(&c->st.hits, 1);
			if (x->ra) {
				x->ra = false;
				cache_count(&c->st.ra_hits, 1);
			}
		}
		x->ref = true;
	}
	if (slots != slot_stack)
		g_free(slots);
	return;
wait:
	cache_wait_for(c, k < n ? b[k] : NULL);
	goto again;
}

static void unpin(struct cache *c, struct cache_block **b, unsigned int n)
{
	unsigned int k;

	pthread_mutex_lock(&c->lock);
	for (k = 0; k < n; k++)
		cache_block_unpin(c, b[k]);
	pthread_mutex_unlock(&c->lock);
}

/* pin the blocks of [off, end) (n of them, n <= max_req) with valid data; 0 or -errno */
static int get_blocks(struct cache *c, struct cache_inode *ci, uint64_t off, uint64_t end,
		      uint64_t size, struct cache_block **b, unsigned int n)
{
	struct cache_block *fetch_stack[16], **fetch = fetch_stack;
	bool fill_stack[16], *fill = fill_stack;
	unsigned int nfetch = 0;
	int rc = 0;

	if (n > G_N_ELEMENTS(fetch_stack)) {
		fetch = g_new(struct cache_block *, n);
		fill = g_new(bool, n);
	}
	pthread_mutex_lock(&c->lock);
	acquire_read(c, ci, off, end, b, fetch, &nfetch, fill, false);
	cache_ra_note_read(c, ci, off, end - off, size);
	pthread_mutex_unlock(&c->lock);
	if (nfetch) {
		rc = cache_fetch(c, ci, fetch, nfetch);
		if (rc < 0)
			unpin(c, b, n);
	}
	/*
	 * A whole-block fetch failed (a block whose checksum does not match,
	 * say): the read's own range may still be good, and must not fail
	 * for its neighbour's sake.
	 */
	if (rc == -EIO && nfetch) {
		pthread_mutex_lock(&c->lock);
		acquire_read(c, ci, off, end, b, fetch, &nfetch, fill, true);
		pthread_mutex_unlock(&c->lock);
		rc = nfetch ? cache_fetch(c, ci, fetch, nfetch) : 0;
		if (rc < 0)
			unpin(c, b, n);
	}
	if (fetch != fetch_stack) {
		g_free(fetch);
		g_free(fill);
	}
	return rc;
}

/* start of a read: the inode record (shared), the size; 0 = nothing to read */
static ssize_t read_begin(struct cache *c, uint64_t ino, uint64_t off, size_t len,
			  struct cache_inode **ci_out, struct meta_attr *attr)
{
	struct cache_inode *ci;
	int rc;

	*ci_out = NULL;
	if (len == 0)
		return 0;
	ci = cache_inode_ref(c, ino);
	pthread_rwlock_rdlock(&ci->rw);
	rc = meta_getattr(c->meta, ino, attr);
	if (rc == 0 && !S_ISREG(attr->mode))
		rc = -EINVAL;
	if (rc < 0 || off >= attr->size) {
		pthread_rwlock_unlock(&ci->rw);
		cache_inode_unref(c, ci);
		return rc;
	}
	*ci_out = ci;
	return (ssize_t)MIN((uint64_t)len, attr->size - off);
}

static void read_end(struct cache *c, struct cache_inode *ci, const struct meta_attr *attr,
		     ssize_t n)
{
	pthread_rwlock_unlock(&ci->rw);
	if (n > 0) {
		io_note_read(c->io, ci->ino, attr);
		cache_count(&c->st.bytes_read, (uint64_t)n);
	}
	cache_inode_unref(c, ci);
}

/* read [off, off+len) (inside the file) into dst, max_req blocks at a time */
static int read_copy(struct cache *c, struct cache_inode *ci, uint64_t off, size_t len,
		     uint64_t size, char *dst)
{
	struct cache_block **b = g_new(struct cache_block *, MIN(c->max_req, (unsigned int)((len >> c->shift) + 2)));
	uint64_t end = off + len;
	int rc = 0;

	while (off < end) {
		uint64_t first = off >> c->shift;
		uint64_t stop = MIN(end, cache_blk_off(c, first + c->max_req));
		unsigned int n = (unsigned int)(((stop - 1) >> c->shift) - first + 1), k;

		rc = get_blocks(c, ci, off, stop, size, b, n);
		if (rc < 0)
			break;
		for (k = 0; k < n; k++) {
			uint32_t s, e;

			cache_block_span(c, first + k, off, stop, &s, &e);
			memcpy(dst, b[k]->data + s, e - s);
			dst += e - s;
		}
		unpin(c, b, n);
		off = stop;
	}
	g_free(b);
	return rc;
}

ssize_t cache_read(struct cache *c, uint64_t ino, uint64_t off, size_t len, void *buf)
{
	struct cache_inode *ci;
	struct meta_attr attr;
	ssize_t n;
	int rc;

	n = read_begin(c, ino, off, len, &ci, &attr);
	if (n <= 0)
		return n;
	rc = read_copy(c, ci, off, (size_t)n, attr.size, buf);
	if (rc < 0)
		n = rc;
	read_end(c, ci, &attr, n);
	return n;
}

ssize_t cache_read_pin(struct cache *c, uint64_t ino, uint64_t off, size_t len,
		       struct cache_read_ref *ref)
{
	struct cache_inode *ci;
	struct meta_attr attr;
	uint64_t first, end;
	unsigned int nb, k;
	ssize_t n;
	int rc;

	memset(ref, 0, sizeof(*ref));
	n = read_begin(c, ino, off, len, &ci, &attr);
	if (n <= 0)
		return n;
	end = off + (uint64_t)n;
	first = off >> c->shift;
	nb = (unsigned int)(((end - 1) >> c->shift) - first + 1);
	if (nb > c->max_req) {
		/* too big to hold at once in this cache: copy in parts */
		ref->buf = g_try_malloc((size_t)n);
		if (!ref->buf) {
			n = -ENOMEM;
			goto out;
		}
		rc = read_copy(c, ci, off, (size_t)n, attr.size, ref->buf);
		if (rc < 0) {
			g_free(ref->buf);
			ref->buf = NULL;
			n = rc;
			goto out;
		}
		ref->one.iov_base = ref->buf;
		ref->one.iov_len = (size_t)n;
		ref->iov = &ref->one;
		ref->niov = 1;
		goto out;
	}
	ref->pinned = g_new(struct cache_block *, nb);
	rc = get_blocks(c, ci, off, end, attr.size, ref->pinned, nb);
	if (rc < 0) {
		g_free(ref->pinned);
		ref->pinned = NULL;
		n = rc;
		goto out;
	}
	ref->npinned = nb;
	ref->iov = nb == 1 ? &ref->one : g_new(struct iovec, nb);
	for (k = 0; k < nb; k++) {
		uint32_t s, e;
		uint8_t *p;

		cache_block_span(c, first + k, off, end, &s, &e);
		p = ref->pinned[k]->data + s;
		if (ref->niov && (uint8_t *)ref->iov[ref->niov - 1].iov_base +
					 ref->iov[ref->niov - 1].iov_len == p) {
			ref->iov[ref->niov - 1].iov_len += e - s; /* neighbouring slots */
			continue;
		}
		ref->iov[ref->niov].iov_base = p;
		ref->iov[ref->niov].iov_len = e - s;
		ref->niov++;
	}
out:
	read_end(c, ci, &attr, n);
	return n;
}

void cache_read_done(struct cache *c, struct cache_read_ref *ref)
{
	if (ref->npinned)
		unpin(c, ref->pinned, ref->npinned);
	if (ref->iov && ref->iov != &ref->one)
		g_free(ref->iov);
	g_free(ref->pinned);
	g_free(ref->buf);
	memset(ref, 0, sizeof(*ref));
}

/* ---- flush, close ---- */

int cache_flush(struct cache *c, uint64_t ino)
{
	struct cache_inode *ci;
	uint64_t seq;
	int rc, err;

	pthread_mutex_lock(&c->lock);
	ci = cache_inode_find(c, ino);
	if (!ci) {
		pthread_mutex_unlock(&c->lock);
		return 0;
	}
	ci->refs++;
	ci->urgent++; /* the write-back threads write this inode's blocks too, in parallel with us */
	seq = c->dirty_seq;
	if (ci->ndirty > 1)
		cache_wake_writeback(c);
	pthread_mutex_unlock(&c->lock);

	rc = cache_writeback_inode(c, ci, seq, false);

	pthread_mutex_lock(&c->lock);
	ci->urgent--;
	err = ci->wb_err;
	ci->wb_err = 0;
	cache_inode_put(c, ci);
	pthread_mutex_unlock(&c->lock);
	cache_count(&c->st.fsyncs, 1);
	return rc < 0 ? rc : err;
}

int cache_close(struct cache *c, uint64_t ino)
{
	struct cache_inode *ci;
	int err = 0;

	pthread_mutex_lock(&c->lock);
	ci = cache_inode_find(c, ino);
	if (ci) {
		err = ci->wb_err;
		ci->wb_err = 0;
		cache_inode_maybe_free(c, ci);
	}
	pthread_mutex_unlock(&c->lock);
	return err;
}

int cache_flush_all(struct cache *c)
{
	GPtrArray *list = g_ptr_array_new();
	GHashTableIter it;
	gpointer k, v;
	int rc = 0, rc1;
	guint i;

	pthread_mutex_lock(&c->lock);
	g_hash_table_iter_init(&it, c->inodes);
	while (g_hash_table_iter_next(&it, &k, &v)) {
		struct cache_inode *ci = v;

		if (ci->ndirty) {
			ci->refs++;
			g_ptr_array_add(list, ci);
		}
	}
	pthread_mutex_unlock(&c->lock);
	for (i = 0; i < list->len; i++) {
		struct cache_inode *ci = g_ptr_array_index(list, i);

		rc1 = cache_writeback_inode(c, ci, UINT64_MAX, false);
		if (rc1 < 0 && !rc)
			rc = rc1;
		cache_inode_unref(c, ci);
	}
	g_ptr_array_free(list, TRUE);
	return rc;
}

/* ---- exclusive sections, invalidation, forget ---- */

static bool inode_in_flight(struct cache_inode *ci, bool pins)
{
	struct cache_block *b;

	for (b = ci->blocks; b; b = b->inext)
		if (b->state == CACHE_FETCHING || b->state == CACHE_WRITEBACK || b->busy ||
		    (pins && b->pins))
			return true;
	return false;
}

/* drop ci's blocks that overlap [off, end) (c->lock held; waits for pins) */
static void drop_range(struct cache *c, struct cache_inode *ci, uint64_t off, uint64_t end)
{
	struct cache_block *b, *next;

again:
	for (b = ci->blocks; b; b = next) {
		uint64_t bo = cache_blk_off(c, b->blk);

		next = b->inext;
		if (bo + c->bs <= off || bo >= end)
			continue;
		if (b->pins || b->busy || b->state == CACHE_FETCHING ||
		    b->state == CACHE_WRITEBACK) {
			cache_wait_block(c, b);
			goto again;
		}
		if (b->on_dirty_list)
			cache_count(&c->st.discarded, 1);
		cache_block_drop(c, b);
	}
}

/* a truncate to size: cached writes at or past it are not written back (c->lock held) */
static void discard_from(struct cache *c, struct cache_inode *ci, uint64_t size)
{
	struct cache_block *b, *next;

	drop_range(c, ci, (size + c->bs - 1) & ~(uint64_t)(c->bs - 1), UINT64_MAX);
	for (b = ci->blocks; b; b = next) {
		uint64_t bo = cache_blk_off(c, b->blk);
		uint32_t cut;
		unsigned int i;

		next = b->inext;
		if (bo >= size || bo + c->bs <= size)
			continue;
		cut = (uint32_t)(size - bo);
		for (i = cache_sub_end(cut); i < c->subs; i++)
			b->dirty[i / 64] &= ~(1ULL << (i % 64));
		/* past the new EOF the file reads as zeros (valid sub-blocks stay valid) */
		memset(b->data + cut, 0, c->bs - cut);
		if (!cache_has_dirty(b) && b->on_dirty_list) {
			cache_count(&c->st.discarded, 1);
			cache_clear_dirty(c, b);
		}
	}
}

int cache_begin_exclusive(struct cache *c, uint64_t ino, uint64_t discard)
{
	struct cache_inode *ci = cache_inode_ref(c, ino);
	int rc;

	pthread_rwlock_wrlock(&ci->rw);
	pthread_mutex_lock(&c->lock);
	ci->exclusive++;
	while (inode_in_flight(ci, false))
		cache_wait_inode(c, ci);
	if (discard != UINT64_MAX)
		discard_from(c, ci, discard);
	pthread_mutex_unlock(&c->lock);

	rc = cache_writeback_inode(c, ci, UINT64_MAX, true);
	if (rc < 0) {
		pthread_mutex_lock(&c->lock);
		ci->exclusive--;
		pthread_mutex_unlock(&c->lock);
		pthread_rwlock_unlock(&ci->rw);
		cache_inode_unref(c, ci);
	}
	return rc;
}

void cache_end_exclusive(struct cache *c, uint64_t ino, uint64_t off, uint64_t len)
{
	struct cache_inode *ci;

	pthread_mutex_lock(&c->lock);
	ci = cache_inode_find(c, ino);
	if (!ci) {
		pthread_mutex_unlock(&c->lock);
		g_warning("cache_end_exclusive(ino %" G_GUINT64_FORMAT "): no exclusive section",
			  ino);
		return;
	}
	drop_range(c, ci, off, off + len < off ? UINT64_MAX : off + len);
	ci->ra_end = 0;
	ci->exclusive--;
	cache_wake_inode(c, ci);
	pthread_mutex_unlock(&c->lock);
	pthread_rwlock_unlock(&ci->rw);
	cache_inode_unref(c, ci);
}

void cache_forget(struct cache *c, uint64_t ino)
{
	struct cache_inode *ci;

	pthread_mutex_lock(&c->lock);
	ci = cache_inode_find(c, ino);
	if (ci) {
		ci->refs++;
		while (inode_in_flight(ci, true))
			cache_wait_inode(c, ci);
		drop_range(c, ci, 0, UINT64_MAX);
		ci->wb_err = 0;
		cache_inode_put(c, ci);
	}
	pthread_mutex_unlock(&c->lock);
}
