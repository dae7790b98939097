// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * cache_stats.c - what the cache counts, and how it is shown.
 *
 * Counters are relaxed atomics bumped where things happen. Latencies go
 * into log-linear histograms (4 buckets per power of two: percentiles are
 * exact to within 25%, reported as the bucket's upper bound, capped by the
 * largest value seen) without locks. cache_stats_text() renders everything
 * as "name value" lines for the `user.rmemfs.stats` xattr of the root
 * directory; cache_describe() is the one-line summary `rmemfs -d` prints at
 * unmount.
 */
#define G_LOG_DOMAIN "rmemfs-cache"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <glib.h>

#include "cache_int.h"
#include "units.h"

static unsigned int bucket_of(uint64_t ns)
{
	unsigned int msb;

	if (ns < 4)
		return (unsigned int)ns;
	msb = 63U - (unsigned int)__builtin_clzll(ns);
	return msb * 4 + (unsigned int)((ns >> (msb - 2)) & 3);
}

static uint64_t bucket_top(unsigned int i)
{
	unsigned int msb = i / 4, sub = i % 4;

	if (i < 4)
		return i;
	if (msb >= 62)
		return UINT64_MAX;
	return ((uint64_t)(4 + sub + 1) << (msb - 2)) - 1;
}

void cache_hist_add(struct cache_hist *h, uint64_t ns)
{
	uint64_t max = __atomic_load_n(&h->max_ns, __ATOMIC_RELAXED);

	__atomic_add_fetch(&h->count, 1, __ATOMIC_RELAXED);
	__atomic_add_fetch(&h->sum_ns, ns, __ATOMIC_RELAXED);
	__atomic_add_fetch(&h->b[bucket_of(ns)], 1, __ATOMIC_RELAXED);
	while (ns > max && !__atomic_compare_exchange_n(&h->max_ns, &max, ns, true,
							__ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
}

void cache_note_latency(struct cache *c, enum cache_op op, uint64_t ns)
{
	if (c && op < CACHE_OP_N)
		cache_hist_add(&c->op_lat[op], ns);
}

/* a snapshot's percentile p (0..1) in ns */
static uint64_t hist_pct(const uint64_t *b, uint64_t count, uint64_t max, double p)
{
	uint64_t want = (uint64_t)(p * (double)count + 0.999999), seen = 0;
	unsigned int i;

	if (!count)
		return 0;
	if (want < 1)
		want = 1;
	for (i = 0; i < CACHE_HIST_BUCKETS; i++) {
		seen += b[i];
		if (seen >= want)
			return MIN(bucket_top(i), max);
	}
	return max;
}

struct text {
	char *buf;
	size_t cap, len;
	bool overflow;
};

static void G_GNUC_PRINTF(2, 3) put(struct text *t, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (t->overflow)
		return;
	va_start(ap, fmt);
	n = vsnprintf(t->buf + t->len, t->cap - t->len, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= t->cap - t->len)
		t->overflow = true;
	else
		t->len += (size_t)n;
}

static uint64_t ld(const uint64_t *p)
{
	return __atomic_load_n(p, __ATOMIC_RELAXED);
}

static void put_hist(struct text *t, const char *name, const struct cache_hist *h)
{
	uint64_t b[CACHE_HIST_BUCKETS], count = 0, max = ld(&h->max_ns), sum = ld(&h->sum_ns);
	unsigned int i;

	for (i = 0; i < CACHE_HIST_BUCKETS; i++) {
		b[i] = ld(&h->b[i]);
		count += b[i];
	}
	put(t, "lat_%s_us count %" G_GUINT64_FORMAT " mean %.1f p50 %.1f p90 %.1f p99 %.1f p99.9 %.1f max %.1f\n",
	    name, count, count ? (double)sum / (double)count / 1e3 : 0.0,
	    hist_pct(b, count, max, 0.50) / 1e3, hist_pct(b, count, max, 0.90) / 1e3,
	    hist_pct(b, count, max, 0.99) / 1e3, hist_pct(b, count, max, 0.999) / 1e3,
	    max / 1e3);
}

ssize_t cache_stats_text(struct cache *c, char *buf, size_t cap)
{
	static const char *const op_names[CACHE_OP_N] = { "read", "write", "fsync" };
	struct text t = { .buf = buf, .cap = cap };
	unsigned int nblocks, nclean, ndirty, nfree, nactive, live, resident, i;
	uint64_t headroom;

	if (!cap)
		return -ERANGE;
	buf[0] = 0;
	pthread_mutex_lock(&c->lock);
	nactive = c->nactive;
	live = c->live;
	resident = MIN(nactive * c->chunk_slots, c->nslots);
	nblocks = live - c->nfree;
	for (i = live; i < resident; i++) /* a chunk being given back */
		nblocks += c->blocks[i].state != CACHE_EMPTY;
	nclean = c->nclean;
	ndirty = c->ndirty;
	nfree = c->nfree;
	headroom = c->headroom;
	pthread_mutex_unlock(&c->lock);

	put(&t, "block_size %u\n", c->bs);
	put(&t, "slots %u\n", c->nslots);
	put(&t, "cache_bytes %zu\n", c->arena_len);
	put(&t, "cache_inuse_bytes %zu\n", (size_t)resident * c->bs);
	put(&t, "cache_resident_bytes %zu\n", cache_resident_bytes(c, nactive));
	put(&t, "cache_chunks %u\n", nactive);
	put(&t, "cache_chunks_max %u\n", c->nchunks);
	put(&t, "cache_idle_s %u\n", c->cfg.idle_ms / 1000);
	put(&t, "memory_headroom %" G_GUINT64_FORMAT "\n", headroom);
	put(&t, "chunks_grown %" G_GUINT64_FORMAT "\n", ld(&c->st.chunks_grown));
	put(&t, "chunks_populated %" G_GUINT64_FORMAT "\n", ld(&c->st.chunks_populated));
	put(&t, "chunks_released %" G_GUINT64_FORMAT "\n", ld(&c->st.chunks_released));
	put(&t, "released_blocks %" G_GUINT64_FORMAT "\n", ld(&c->st.released_blocks));
	put(&t, "pressure_releases %" G_GUINT64_FORMAT "\n", ld(&c->st.pressure_releases));
	put(&t, "idle_releases %" G_GUINT64_FORMAT "\n", ld(&c->st.idle_releases));
	put(&t, "zero_copy %s\n", c->arena_registered ? "yes" : "no");
	put(&t, "writeback %s\n", c->cfg.writeback ? "on" : "off");
	put(&t, "readahead_max %" G_GUINT64_FORMAT "\n", c->cfg.readahead);
	put(&t, "blocks_cached %u\n", nblocks);
	put(&t, "blocks_clean %u\n", nclean);
	put(&t, "blocks_dirty %u\n", ndirty);
	put(&t, "blocks_free %u\n", nfree);
	put(&t, "hits %" G_GUINT64_FORMAT "\n", ld(&c->st.hits));
	put(&t, "misses %" G_GUINT64_FORMAT "\n", ld(&c->st.misses));
	put(&t, "readahead_blocks %" G_GUINT64_FORMAT "\n", ld(&c->st.ra_blocks));
	put(&t, "readahead_hits %" G_GUINT64_FORMAT "\n", ld(&c->st.ra_hits));
	put(&t, "fills %" G_GUINT64_FORMAT "\n", ld(&c->st.fills));
	put(&t, "evictions %" G_GUINT64_FORMAT "\n", ld(&c->st.evictions));
	put(&t, "ghost_hits %" G_GUINT64_FORMAT "\n", ld(&c->st.ghost_hits));
	put(&t, "fetch_batches %" G_GUINT64_FORMAT "\n", ld(&c->st.fetch_batches));
	put(&t, "bytes_read %" G_GUINT64_FORMAT "\n", ld(&c->st.bytes_read));
	put(&t, "bytes_written %" G_GUINT64_FORMAT "\n", ld(&c->st.bytes_written));
	put(&t, "flushes %" G_GUINT64_FORMAT "\n", ld(&c->st.wb_batches));
	put(&t, "flushed_blocks %" G_GUINT64_FORMAT "\n", ld(&c->st.wb_blocks));
	put(&t, "flush_errors %" G_GUINT64_FORMAT "\n", ld(&c->st.wb_errors));
	put(&t, "dirty_discarded %" G_GUINT64_FORMAT "\n", ld(&c->st.discarded));
	put(&t, "throttled_writes %" G_GUINT64_FORMAT "\n", ld(&c->st.throttled));
	put(&t, "fsyncs %" G_GUINT64_FORMAT "\n", ld(&c->st.fsyncs));
	for (i = 0; i < CACHE_OP_N; i++)
		put_hist(&t, op_names[i], &c->op_lat[i]);
	put_hist(&t, "fetch", &c->lat[CACHE_LAT_FETCH]);
	put_hist(&t, "writeback", &c->lat[CACHE_LAT_WRITEBACK]);
	if (t.overflow)
		return -ERANGE;
	return (ssize_t)t.len;
}

void cache_describe(struct cache *c, char *buf, size_t cap)
{
	uint64_t rb[CACHE_HIST_BUCKETS], wb[CACHE_HIST_BUCKETS], rn = 0, wn = 0;
	const struct cache_hist *rh = &c->op_lat[CACHE_OP_READ], *wh = &c->op_lat[CACHE_OP_WRITE];
	char size[32];
	unsigned int i;

	for (i = 0; i < CACHE_HIST_BUCKETS; i++) {
		rb[i] = ld(&rh->b[i]);
		wb[i] = ld(&wh->b[i]);
		rn += rb[i];
		wn += wb[i];
	}
	units_format_size(c->arena_len, size, sizeof(size));
	snprintf(buf, cap,
		 "cache %s in %u KiB blocks: %" G_GUINT64_FORMAT " hits, %" G_GUINT64_FORMAT
		 " misses, %" G_GUINT64_FORMAT " readahead (%" G_GUINT64_FORMAT " hit), %"
		 G_GUINT64_FORMAT " evictions, %" G_GUINT64_FORMAT " flushes (%" G_GUINT64_FORMAT
		 " errors); read us p50/p99 %.0f/%.0f, write %.0f/%.0f",
		 size, c->bs / 1024, ld(&c->st.hits), ld(&c->st.misses), ld(&c->st.ra_blocks),
		 ld(&c->st.ra_hits), ld(&c->st.evictions), ld(&c->st.wb_batches),
		 ld(&c->st.wb_errors),
		 hist_pct(rb, rn, ld(&rh->max_ns), 0.5) / 1e3,
		 hist_pct(rb, rn, ld(&rh->max_ns), 0.99) / 1e3,
		 hist_pct(wb, wn, ld(&wh->max_ns), 0.5) / 1e3,
		 hist_pct(wb, wn, ld(&wh->max_ns), 0.99) / 1e3);
}
