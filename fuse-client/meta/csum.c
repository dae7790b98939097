// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * csum.c - data block checksums in the metadata: the sparse table, its
 * journal records and checkpoint tail, and the HOT regions (csum.h says
 * why each exists; docs/ARCHITECTURE.md "Data checksums").
 */
#define G_LOG_DOMAIN "rmemfs-meta"

#include "csum.h"

#include <endian.h>
#include <errno.h>
#include <pthread.h>
#include <string.h>

#include "commit.h"
#include "inode.h"
#include "journal.h"
#include "meta_int.h"
#include "remote.h"

#define PAGE_WORDS (CSUM_PAGE / 64)
#define REGION LAYOUT_CSUM_REGION_BLOCKS
#define RECOMPUTE_BLOCKS 256U /* blocks read per step of csum_recompute */

struct csum_page {
	uint64_t key; /* pb / CSUM_PAGE */
	unsigned int n; /* entries present */
	uint64_t present[PAGE_WORDS];
	uint32_t crc[CSUM_PAGE];
};

/* a hot region */
struct csum_hot {
	uint64_t region;
	uint64_t seq; /* the transaction that made it hot */
	unsigned int inflight; /* in-place writes between csum_hot_enter and _leave */
	bool touched; /* written since the last sweep */
};

struct csum {
	pthread_mutex_t lock; /* protects everything below (a leaf lock) */
	GHashTable *pages; /* &page->key -> struct csum_page (owned) */
	uint64_t count;
	GHashTable *hot; /* &hot->region -> struct csum_hot (owned) */
};

struct csum *csum_new(void)
{
	struct csum *c = g_new0(struct csum, 1);

	pthread_mutex_init(&c->lock, NULL);
	c->pages = g_hash_table_new_full(g_int64_hash, g_int64_equal, NULL, g_free);
	c->hot = g_hash_table_new_full(g_int64_hash, g_int64_equal, NULL, g_free);
	return c;
}

void csum_destroy(struct csum *c)
{
	if (!c)
		return;
	g_hash_table_destroy(c->pages);
	g_hash_table_destroy(c->hot);
	pthread_mutex_destroy(&c->lock);
	g_free(c);
}

/* ---- the table (c->lock held) ---- */

static struct csum_page *page_of(struct csum *c, uint64_t pb)
{
	uint64_t key = pb / CSUM_PAGE;

	return g_hash_table_lookup(c->pages, &key);
}

static bool get_locked(struct csum *c, struct csum_page **pg, uint64_t pb, uint32_t *crc)
{
	unsigned int i = pb % CSUM_PAGE;

	if (!*pg || (*pg)->key != pb / CSUM_PAGE)
		*pg = page_of(c, pb);
	if (!*pg || !((*pg)->present[i / 64] & (1ULL << (i % 64))))
		return false;
	*crc = (*pg)->crc[i];
	return true;
}

static void set_locked(struct csum *c, uint64_t pb, uint32_t crc)
{
	struct csum_page *pg = page_of(c, pb);
	unsigned int i = pb % CSUM_PAGE;

	if (!pg) {
		pg = g_new0(struct csum_page, 1);
		pg->key = pb / CSUM_PAGE;
		g_hash_table_insert(c->pages, &pg->key, pg);
	}
	if (!(pg->present[i / 64] & (1ULL << (i % 64)))) {
		pg->present[i / 64] |= 1ULL << (i % 64);
		pg->n++;
		c->count++;
	}
	pg->crc[i] = crc;
}

bool csum_get(struct csum *c, uint64_t pb, uint32_t *crc)
{
	struct csum_page *pg = NULL;
	bool have;

	pthread_mutex_lock(&c->lock);
	have = get_locked(c, &pg, pb, crc);
	pthread_mutex_unlock(&c->lock);
	return have;
}

void csum_get_run(struct csum *c, uint64_t pb, uint64_t n, uint32_t *crc, bool *have)
{
	struct csum_page *pg = NULL;
	uint64_t i;

	pthread_mutex_lock(&c->lock);
	for (i = 0; i < n; i++)
		have[i] = get_locked(c, &pg, pb + i, &crc[i]);
	pthread_mutex_unlock(&c->lock);
}

void csum_set(struct csum *c, uint64_t pb, uint32_t crc)
{
	pthread_mutex_lock(&c->lock);
	set_locked(c, pb, crc);
	pthread_mutex_unlock(&c->lock);
}

void csum_clear(struct csum *c, uint64_t pb, uint64_t count)
{
	uint64_t end = pb + count;

	pthread_mutex_lock(&c->lock);
	while (pb < end && g_hash_table_size(c->pages)) {
		struct csum_page *pg = page_of(c, pb);
		uint64_t stop = MIN(end, (pb / CSUM_PAGE + 1) * CSUM_PAGE);

		for (; pg && pb < stop; pb++) {
			unsigned int i = pb % CSUM_PAGE;

			if (!(pg->present[i / 64] & (1ULL << (i % 64))))
				continue;
			pg->present[i / 64] &= ~(1ULL << (i % 64));
			pg->n--;
			c->count--;
		}
		if (pg && !pg->n)
			g_hash_table_remove(c->pages, &pg->key);
		pb = stop;
	}
	pthread_mutex_unlock(&c->lock);
}

uint64_t csum_count(struct csum *c)
{
	uint64_t n;

	pthread_mutex_lock(&c->lock);
	n = c->count;
	pthread_mutex_unlock(&c->lock);
	return n;
}

void csum_swap(struct csum *a, struct csum *b)
{
	GHashTable *t;
	uint64_t n;

	pthread_mutex_lock(&a->lock);
	pthread_mutex_lock(&b->lock);
	t = a->pages;
	a->pages = b->pages;
	b->pages = t;
	t = a->hot;
	a->hot = b->hot;
	b->hot = t;
	n = a->count;
	a->count = b->count;
	b->count = n;
	pthread_mutex_unlock(&b->lock);
	pthread_mutex_unlock(&a->lock);
}

bool csum_hot(struct csum *c, uint64_t region)
{
	bool hot;

	pthread_mutex_lock(&c->lock);
	hot = g_hash_table_contains(c->hot, &region);
	pthread_mutex_unlock(&c->lock);
	return hot;
}

uint64_t csum_hot_count(struct csum *c)
{
	uint64_t n;

	pthread_mutex_lock(&c->lock);
	n = g_hash_table_size(c->hot);
	pthread_mutex_unlock(&c->lock);
	return n;
}

/* ---- the checkpoint's tail ---- */

static gint u64_cmp(gconstpointer a, gconstpointer b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* the hot regions, ascending (c->lock held) */
static GArray *hot_sorted(struct csum *c)
{
	GArray *a = g_array_sized_new(FALSE, FALSE, sizeof(uint64_t), g_hash_table_size(c->hot));
	GHashTableIter it;
	gpointer k, v;

	g_hash_table_iter_init(&it, c->hot);
	while (g_hash_table_iter_next(&it, &k, &v))
		g_array_append_val(a, ((struct csum_hot *)v)->region);
	g_array_sort(a, u64_cmp);
	return a;
}

uint64_t csum_tail_len(struct csum *c, uint64_t nused)
{
	uint64_t len = layout_csum_section_len(nused) + 4;
	GHashTableIter it;
	gpointer k, v;

	pthread_mutex_lock(&c->lock);
	g_hash_table_iter_init(&it, c->hot);
	while (g_hash_table_iter_next(&it, &k, &v))
		len += layout_uv_len(((struct csum_hot *)v)->region);
	pthread_mutex_unlock(&c->lock);
	return len;
}

static void put_le32(GByteArray *b, uint32_t v)
{
	__le32 w = htole32(v);

	layout_put_bytes(b, &w, 4);
}

void csum_put_tail(struct csum *c, const uint8_t *bitmap, uint64_t nblocks, GByteArray *b)
{
	struct csum_page *pg = NULL;
	uint64_t pb, nused = 0;
	guint start = b->len, bits;
	GArray *hot;
	uint32_t crc;
	guint i;

	pthread_mutex_lock(&c->lock);
	for (pb = 0; pb < nblocks; pb++)
		if (bitmap[pb / 8] & (1U << (pb % 8))) {
			put_le32(b, get_locked(c, &pg, pb, &crc) ? crc : 0);
			nused++;
		}
	bits = b->len;
	g_byte_array_set_size(b, (guint)(bits + (nused + 7) / 8));
	memset(b->data + bits, 0, (nused + 7) / 8);
	for (pb = 0, nused = 0; pb < nblocks; pb++)
		if (bitmap[pb / 8] & (1U << (pb % 8))) {
			if (get_locked(c, &pg, pb, &crc))
				b->data[bits + nused / 8] |= (uint8_t)(1U << (nused % 8));
			nused++;
		}
	g_assert(b->len - start == layout_csum_section_len(nused));
	hot = hot_sorted(c);
	put_le32(b, hot->len);
	for (i = 0; i < hot->len; i++)
		layout_put_uv(b, g_array_index(hot, uint64_t, i));
	g_array_free(hot, TRUE);
	pthread_mutex_unlock(&c->lock);
}

static void hot_add_locked(struct csum *c, uint64_t region, uint64_t seq)
{
	struct csum_hot *h = g_new0(struct csum_hot, 1);

	h->region = region;
	h->seq = seq;
	g_hash_table_insert(c->hot, &h->region, h);
}

int csum_get_tail(struct csum *c, const uint8_t *bitmap, uint64_t nblocks, const uint8_t *buf,
		  size_t len)
{
	uint64_t nregions = (nblocks + REGION - 1) / REGION, nused = 0, pb, k;
	const uint8_t *crcs, *present, *p;
	struct layout_rd rd;
	uint32_t nhot, i;
	__le32 w;

	for (pb = 0; pb < nblocks; pb++)
		nused += !!(bitmap[pb / 8] & (1U << (pb % 8)));
	layout_rd_init(&rd, buf, len);
	crcs = layout_get_bytes(&rd, 4 * nused);
	present = layout_get_bytes(&rd, (nused + 7) / 8);
	p = layout_get_bytes(&rd, 4);
	if (!p)
		return -EBADMSG;
	memcpy(&w, p, 4);
	nhot = le32toh(w);
	if (nhot > layout_rd_left(&rd) || nhot > nregions)
		return -EBADMSG;
	pthread_mutex_lock(&c->lock);
	for (i = 0; i < nhot && !rd.err; i++) {
		uint64_t region = layout_get_uv(&rd);

		if (!rd.err && (region >= nregions || g_hash_table_contains(c->hot, &region)))
			rd.err = -EBADMSG;
		if (!rd.err)
			hot_add_locked(c, region, 0);
	}
	if (rd.err || layout_rd_left(&rd)) {
		g_hash_table_remove_all(c->hot);
		pthread_mutex_unlock(&c->lock);
		return -EBADMSG;
	}
	for (pb = 0, k = 0; pb < nblocks; pb++) {
		if (!(bitmap[pb / 8] & (1U << (pb % 8))))
			continue;
		if (present[k / 8] & (1U << (k % 8))) {
			memcpy(&w, crcs + 4 * k, 4);
			set_locked(c, pb, le32toh(w));
		}
		k++;
	}
	pthread_mutex_unlock(&c->lock);
	return 0;
}

/* ---- the metadata's checksums ---- */

/* the CSUM records of n blocks: one per run of consecutive blocks (m->lock held, in a txn) */
static void log_runs(struct meta *m, const uint64_t *pb, const uint32_t *crc, int n)
{
	int i, start = 0;

	for (i = 1; i <= n; i++) {
		if (i < n && pb[i] == pb[i - 1] + 1)
			continue;
		journal_rec_csum(m->j, pb[start], (uint64_t)(i - start), crc + start);
		start = i;
	}
}

int csum_log(struct meta *m, const uint64_t *pb, const uint32_t *crc, int n)
{
	int i, rc;

	if (!n)
		return 0;
	pthread_mutex_lock(&m->lock);
	rc = meta_may_change(m, 0);
	if (rc == 0) {
		pthread_mutex_lock(&m->csum->lock);
		for (i = 0; i < n; i++)
			set_locked(m->csum, pb[i], crc[i]);
		pthread_mutex_unlock(&m->csum->lock);
		meta_txn_begin(m, NULL);
		log_runs(m, pb, crc, n);
		meta_txn_end(m, NULL);
	}
	pthread_mutex_unlock(&m->lock);
	return rc;
}

static bool hot_mark_locked(struct csum *c, uint64_t region, bool hot, uint64_t seq)
{
	if (hot && !g_hash_table_contains(c->hot, &region)) {
		hot_add_locked(c, region, seq);
		return true;
	}
	return !hot && g_hash_table_remove(c->hot, &region);
}

bool csum_hot_mark(struct csum *c, uint64_t region, bool hot)
{
	bool changed;

	pthread_mutex_lock(&c->lock);
	changed = hot_mark_locked(c, region, hot, 0);
	pthread_mutex_unlock(&c->lock);
	return changed;
}

/* the hot set changes (m->lock held): the checkpoint's tail changes with it */
static void hot_set(struct meta *m, uint64_t region, bool hot, uint64_t seq)
{
	bool changed;

	pthread_mutex_lock(&m->csum->lock);
	changed = hot_mark_locked(m->csum, region, hot, seq);
	pthread_mutex_unlock(&m->csum->lock);
	if (changed && hot)
		m->ckpt_bytes += layout_uv_len(region);
	else if (changed)
		m->ckpt_bytes -= layout_uv_len(region);
}

int csum_apply(struct meta *m, const struct journal_rec *r)
{
	uint64_t i;
	__le32 w;

	if (r->type == LAYOUT_REC_HOT) {
		if (r->pblock >= (m->g.data_blocks + REGION - 1) / REGION || r->state > 1) {
			inode_load_problem(m, "journal: invalid hot region %" G_GUINT64_FORMAT
					   " (record dropped)", (guint64)r->pblock);
			return 0;
		}
		hot_set(m, r->pblock, r->state, 0);
		return 0;
	}
	if (!r->count || r->pblock >= m->g.data_blocks ||
	    r->count > m->g.data_blocks - r->pblock || r->vlen != 4 * r->count) {
		inode_load_problem(m, "journal: checksums of invalid blocks %" G_GUINT64_FORMAT
				   "+%" G_GUINT64_FORMAT " (record dropped)",
				   (guint64)r->pblock, (guint64)r->count);
		return 0;
	}
	pthread_mutex_lock(&m->csum->lock);
	for (i = 0; i < r->count; i++) {
		memcpy(&w, r->value + 4 * i, 4);
		set_locked(m->csum, r->pblock + i, le32toh(w));
	}
	pthread_mutex_unlock(&m->csum->lock);
	return 0;
}

void csum_freed(struct meta *m, uint64_t pb, uint64_t count)
{
	csum_clear(m->csum, pb, count);
}

/* call fn(m, region, ctx) for each region the n blocks pb[] touch, once per run */
static void each_region(const uint64_t *pb, int n, void (*fn)(struct csum_hot *h, void *ctx),
			struct csum *c, void *ctx)
{
	uint64_t last = UINT64_MAX;
	int i;

	for (i = 0; i < n; i++) {
		uint64_t region = pb[i] / REGION;
		struct csum_hot *h;

		if (region == last)
			continue;
		last = region;
		h = g_hash_table_lookup(c->hot, &region);
		if (h)
			fn(h, ctx);
	}
}

static void enter_one(struct csum_hot *h, void *ctx)
{
	uint64_t *need = ctx;

	h->inflight++;
	h->touched = true;
	*need = MAX(*need, h->seq);
}

int csum_hot_enter(struct meta *m, const uint64_t *pb, int n)
{
	struct csum *c = m->csum;
	uint64_t need = 0, last = UINT64_MAX;
	bool logged = false;
	int i, rc;

	pthread_mutex_lock(&m->lock);
	rc = meta_may_change(m, 0);
	if (rc < 0) {
		pthread_mutex_unlock(&m->lock);
		return rc;
	}
	for (i = 0; i < n; i++) {
		uint64_t region = pb[i] / REGION;

		if (region == last || csum_hot(c, region))
			continue;
		last = region;
		if (!logged)
			meta_txn_begin(m, NULL);
		logged = true;
		journal_rec_hot(m->j, region, true);
		hot_set(m, region, true, journal_next_seq(m->j));
	}
	if (logged)
		meta_txn_end(m, NULL);
	pthread_mutex_lock(&c->lock);
	each_region(pb, n, enter_one, c, &need);
	pthread_mutex_unlock(&c->lock);
	need = need > m->durable_seq;
	pthread_mutex_unlock(&m->lock);
	if (need) {
		rc = commit_sync(m);
		if (rc < 0)
			csum_hot_leave(m, pb, n);
	}
	return rc;
}

static void leave_one(struct csum_hot *h, void *ctx)
{
	if (h->inflight)
		h->inflight--;
}

void csum_hot_leave(struct meta *m, const uint64_t *pb, int n)
{
	pthread_mutex_lock(&m->csum->lock);
	each_region(pb, n, leave_one, m->csum, NULL);
	pthread_mutex_unlock(&m->csum->lock);
}

void csum_sweep(struct meta *m, bool all)
{
	struct csum *c = m->csum;
	GArray *cold = g_array_new(FALSE, FALSE, sizeof(uint64_t));
	GHashTableIter it;
	gpointer k, v;
	guint i;

	pthread_mutex_lock(&m->lock);
	if (meta_may_change(m, 0) < 0)
		goto out;
	pthread_mutex_lock(&c->lock);
	g_hash_table_iter_init(&it, c->hot);
	while (g_hash_table_iter_next(&it, &k, &v)) {
		struct csum_hot *h = v;

		/* not durably hot yet, written since the last sweep, or a write in flight */
		if (h->inflight || (!all && (h->seq > m->durable_seq || h->touched)))
			h->touched = false;
		else
			g_array_append_val(cold, h->region);
	}
	pthread_mutex_unlock(&c->lock);
	if (!cold->len)
		goto out;
	meta_txn_begin(m, NULL);
	for (i = 0; i < cold->len; i++) {
		journal_rec_hot(m->j, g_array_index(cold, uint64_t, i), false);
		hot_set(m, g_array_index(cold, uint64_t, i), false, 0);
	}
	meta_txn_end(m, NULL);
out:
	pthread_mutex_unlock(&m->lock);
	g_array_free(cold, TRUE);
}

/* ---- recomputation at mount ---- */

struct recompute {
	struct csum *c;
	GArray *runs; /* pairs (pb, count) of written blocks in hot regions */
};

static bool add_hot_blocks(struct meta_ext *e, void *ctx)
{
	struct recompute *rc = ctx;
	uint64_t pb = e->pblock, end = e->pblock + e->count;

	if (e->state != META_EXT_WRITTEN)
		return true;
	while (pb < end) {
		uint64_t region = pb / REGION, stop = MIN(end, (region + 1) * REGION);
		uint64_t count = stop - pb;

		if (g_hash_table_contains(rc->c->hot, &region)) {
			g_array_append_val(rc->runs, pb);
			g_array_append_val(rc->runs, count);
		}
		pb = stop;
	}
	return true;
}

/* read blocks [pb, pb+n) and set their CRCs in crc[] */
static int crc_from_pool(struct meta *m, uint64_t pb, uint64_t n, uint8_t *buf, uint32_t *crc)
{
	uint64_t i;
	int rc;

	rc = remote_read(m->r, m->g.data_off + pb * LAYOUT_BLOCK, buf, n * LAYOUT_BLOCK);
	if (rc < 0)
		return rc;
	for (i = 0; i < n; i++)
		crc[i] = layout_crc(buf + i * LAYOUT_BLOCK, LAYOUT_BLOCK);
	return 0;
}

int csum_recompute(struct meta *m, uint64_t *blocks, uint64_t *regions)
{
	struct recompute ctx = { .c = m->csum };
	uint8_t *buf = g_malloc(RECOMPUTE_BLOCKS * LAYOUT_BLOCK);
	uint64_t pbs[RECOMPUTE_BLOCKS];
	uint32_t crc[RECOMPUTE_BLOCKS];
	GHashTableIter it;
	gpointer k, v;
	GArray *hot;
	guint i;
	int rc = 0;

	*blocks = 0;
	*regions = 0;
	ctx.runs = g_array_new(FALSE, FALSE, sizeof(uint64_t));
	pthread_mutex_lock(&m->lock);
	pthread_mutex_lock(&m->csum->lock);
	hot = hot_sorted(m->csum);
	if (hot->len) {
		g_hash_table_iter_init(&it, m->inodes);
		while (g_hash_table_iter_next(&it, &k, &v))
			inode_ext_foreach(v, add_hot_blocks, &ctx);
	}
	pthread_mutex_unlock(&m->csum->lock);
	pthread_mutex_unlock(&m->lock);
	for (i = 0; i + 1 < ctx.runs->len && rc == 0; i += 2) {
		uint64_t pb = g_array_index(ctx.runs, uint64_t, i);
		uint64_t left = g_array_index(ctx.runs, uint64_t, i + 1);

		while (left && rc == 0) {
			uint64_t n = MIN(left, (uint64_t)RECOMPUTE_BLOCKS), j;

			rc = crc_from_pool(m, pb, n, buf, crc);
			for (j = 0; j < n; j++)
				pbs[j] = pb + j;
			if (rc == 0)
				rc = csum_log(m, pbs, crc, (int)n);
			*blocks += n;
			pb += n;
			left -= n;
		}
	}
	if (rc == 0 && hot->len) {
		pthread_mutex_lock(&m->lock);
		meta_txn_begin(m, NULL);
		for (i = 0; i < hot->len; i++) {
			journal_rec_hot(m->j, g_array_index(hot, uint64_t, i), false);
			hot_set(m, g_array_index(hot, uint64_t, i), false, 0);
		}
		meta_txn_end(m, NULL);
		pthread_mutex_unlock(&m->lock);
		*regions = hot->len;
	}
	g_array_free(hot, TRUE);
	g_array_free(ctx.runs, TRUE);
	g_free(buf);
	return rc;
}
