// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * csum.c - the data block checksum table and the hot regions, and the
 * checkpoint tail that stores them (csum.h; what is journaled and when:
 * checksum.c; docs/ARCHITECTURE.md "Data checksums").
 */
#define G_LOG_DOMAIN "rmemfs-meta"

#include "csum.h"

#include <endian.h>
#include <errno.h>
#include <pthread.h>
#include <string.h>


#define PAGE_WORDS (CSUM_PAGE / 64)
#define REGION LAYOUT_CSUM_REGION_BLOCKS

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

/* a pending block's value in csum->ahead: its previous CRC, if it had one */
#define ALT_SET (1ULL << 33)
#define ALT_HAD (1ULL << 32)

struct csum {
	pthread_mutex_t lock; /* protects everything below (a leaf lock) */
	GHashTable *pages; /* &page->key -> struct csum_page (owned) */
	uint64_t count;
	GHashTable *hot; /* &hot->region -> struct csum_hot (owned) */
	GHashTable *ahead; /* pb + 1 -> ALT_SET | [ALT_HAD | previous CRC] (pending blocks) */
};

struct csum *csum_new(void)
{
	struct csum *c = g_new0(struct csum, 1);

	pthread_mutex_init(&c->lock, NULL);
	c->pages = g_hash_table_new_full(g_int64_hash, g_int64_equal, NULL, g_free);
	c->hot = g_hash_table_new_full(g_int64_hash, g_int64_equal, NULL, g_free);
	c->ahead = g_hash_table_new(g_direct_hash, g_direct_equal);
	return c;
}

void csum_destroy(struct csum *c)
{
	if (!c)
		return;
	g_hash_table_destroy(c->pages);
	g_hash_table_destroy(c->hot);
	g_hash_table_destroy(c->ahead);
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

static gpointer pb_key(uint64_t pb)
{
	return GSIZE_TO_POINTER((gsize)pb + 1);
}

static void clear_locked(struct csum *c, uint64_t pb)
{
	struct csum_page *pg = page_of(c, pb);
	unsigned int i = pb % CSUM_PAGE;

	if (!pg || !(pg->present[i / 64] & (1ULL << (i % 64))))
		return;
	pg->present[i / 64] &= ~(1ULL << (i % 64));
	pg->n--;
	c->count--;
	if (!pg->n)
		g_hash_table_remove(c->pages, &pg->key);
}

void csum_set(struct csum *c, uint64_t pb, uint32_t crc)
{
	pthread_mutex_lock(&c->lock);
	set_locked(c, pb, crc);
	g_hash_table_remove(c->ahead, pb_key(pb));
	pthread_mutex_unlock(&c->lock);
}

void csum_set_ahead(struct csum *c, uint64_t pb, uint32_t crc)
{
	struct csum_page *pg = NULL;
	uint64_t alt = ALT_SET;
	gpointer v;
	uint32_t old;

	pthread_mutex_lock(&c->lock);
	/* pending on "no CRC before": its bytes from before stay acceptable (unverified) */
	if (g_hash_table_lookup_extended(c->ahead, pb_key(pb), NULL, &v) &&
	    !(GPOINTER_TO_SIZE(v) & ALT_HAD))
		alt = ALT_SET;
	else if (get_locked(c, &pg, pb, &old))
		alt |= ALT_HAD | old;
	g_hash_table_insert(c->ahead, pb_key(pb), GSIZE_TO_POINTER((gsize)alt));
	set_locked(c, pb, crc);
	pthread_mutex_unlock(&c->lock);
}

void csum_settle(struct csum *c, uint64_t pb)
{
	pthread_mutex_lock(&c->lock);
	g_hash_table_remove(c->ahead, pb_key(pb));
	pthread_mutex_unlock(&c->lock);
}

void csum_settle_old(struct csum *c, uint64_t pb)
{
	gpointer v;
	uint64_t alt;

	pthread_mutex_lock(&c->lock);
	if (g_hash_table_lookup_extended(c->ahead, pb_key(pb), NULL, &v)) {
		alt = (uint64_t)GPOINTER_TO_SIZE(v);
		if (alt & ALT_HAD)
			set_locked(c, pb, (uint32_t)alt);
		else
			clear_locked(c, pb);
		g_hash_table_remove(c->ahead, pb_key(pb));
	}
	pthread_mutex_unlock(&c->lock);
}

bool csum_pending(struct csum *c, uint64_t pb, uint32_t *old, bool *had)
{
	gpointer v = NULL;
	bool pending;

	pthread_mutex_lock(&c->lock);
	pending = g_hash_table_size(c->ahead) &&
		  g_hash_table_lookup_extended(c->ahead, pb_key(pb), NULL, &v);
	pthread_mutex_unlock(&c->lock);
	if (pending) {
		*had = (GPOINTER_TO_SIZE(v) & ALT_HAD) != 0;
		*old = (uint32_t)GPOINTER_TO_SIZE(v);
	}
	return pending;
}

bool csum_accepts(struct csum *c, uint64_t pb, uint32_t crc, uint32_t got, bool *old)
{
	uint32_t alt;
	bool had;

	*old = false;
	if (got == crc)
		return true;
	if (!csum_pending(c, pb, &alt, &had))
		return false;
	*old = true;
	return !had || alt == got;
}

/* the size of one of c's tables (the pending blocks, the hot regions), under its lock */
static uint64_t table_size(struct csum *c, GHashTable *const *t)
{
	uint64_t n;

	pthread_mutex_lock(&c->lock);
	n = g_hash_table_size(*t);
	pthread_mutex_unlock(&c->lock);
	return n;
}

uint64_t csum_pending_count(struct csum *c)
{
	return table_size(c, &c->ahead);
}

static gint u64_cmp(gconstpointer a, gconstpointer b);

/* the pending blocks, ascending (c->lock held) */
static GArray *ahead_sorted(struct csum *c)
{
	GArray *a = g_array_sized_new(FALSE, FALSE, sizeof(uint64_t),
				      g_hash_table_size(c->ahead));
	GHashTableIter it;
	gpointer k;

	g_hash_table_iter_init(&it, c->ahead);
	while (g_hash_table_iter_next(&it, &k, NULL)) {
		uint64_t pb = (uint64_t)GPOINTER_TO_SIZE(k) - 1;

		g_array_append_val(a, pb);
	}
	g_array_sort(a, u64_cmp);
	return a;
}

void csum_pending_list(struct csum *c, GArray *out)
{
	GArray *a;

	pthread_mutex_lock(&c->lock);
	a = ahead_sorted(c);
	pthread_mutex_unlock(&c->lock);
	g_array_append_vals(out, a->data, a->len);
	g_array_free(a, TRUE);
}

/* blocks [pb, end) are no longer pending: by key, or by a walk when the table is smaller */
static void ahead_drop_locked(struct csum *c, uint64_t pb, uint64_t end)
{
	GHashTableIter it;
	gpointer k;

	if (end - pb > g_hash_table_size(c->ahead)) {
		g_hash_table_iter_init(&it, c->ahead);
		while (g_hash_table_iter_next(&it, &k, NULL))
			if ((uint64_t)GPOINTER_TO_SIZE(k) - 1 >= pb &&
			    (uint64_t)GPOINTER_TO_SIZE(k) - 1 < end)
				g_hash_table_iter_remove(&it);
		return;
	}
	for (; pb < end; pb++)
		g_hash_table_remove(c->ahead, pb_key(pb));
}

void csum_clear(struct csum *c, uint64_t pb, uint64_t count)
{
	uint64_t end = pb + count;

	pthread_mutex_lock(&c->lock);
	ahead_drop_locked(c, pb, end);
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
	t = a->ahead;
	a->ahead = b->ahead;
	b->ahead = t;
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
	return table_size(c, &c->hot);
}

static bool hot_mark_locked(struct csum *c, uint64_t region, bool hot, uint64_t seq);
static GArray *hot_sorted(struct csum *c);

bool csum_hot_set(struct csum *c, uint64_t region, bool hot, uint64_t seq, uint64_t *bytes)
{
	bool changed;

	pthread_mutex_lock(&c->lock);
	changed = hot_mark_locked(c, region, hot, seq);
	pthread_mutex_unlock(&c->lock);
	if (changed && bytes && hot)
		*bytes += layout_uv_len(region);
	else if (changed && bytes)
		*bytes -= layout_uv_len(region);
	return changed;
}

bool csum_hot_enter(struct csum *c, uint64_t region, uint64_t *seq)
{
	struct csum_hot *h;

	pthread_mutex_lock(&c->lock);
	h = g_hash_table_lookup(c->hot, &region);
	if (h) {
		h->inflight++;
		h->touched = true;
		*seq = h->seq;
	}
	pthread_mutex_unlock(&c->lock);
	return h != NULL;
}

void csum_hot_leave(struct csum *c, uint64_t region)
{
	struct csum_hot *h;

	pthread_mutex_lock(&c->lock);
	h = g_hash_table_lookup(c->hot, &region);
	if (h && h->inflight)
		h->inflight--;
	pthread_mutex_unlock(&c->lock);
}

void csum_hot_cold(struct csum *c, uint64_t durable_seq, bool all, GArray *out, uint64_t *bytes)
{
	GHashTable *held = g_hash_table_new(g_direct_hash, g_direct_equal);
	GHashTableIter it;
	gpointer k, v;

	pthread_mutex_lock(&c->lock);
	/* the regions of pending blocks: what they hold is not known yet (a recovery to come) */
	g_hash_table_iter_init(&it, c->ahead);
	while (g_hash_table_iter_next(&it, &k, NULL))
		g_hash_table_add(held, GSIZE_TO_POINTER((GPOINTER_TO_SIZE(k) - 1) / REGION + 1));
	g_hash_table_iter_init(&it, c->hot);
	while (g_hash_table_iter_next(&it, &k, &v)) {
		struct csum_hot *h = v;
		uint64_t region = h->region;

		/* a write in flight or a block pending; or not durably hot yet, or written
		 * since the last sweep */
		if (h->inflight || g_hash_table_contains(held, GSIZE_TO_POINTER(region + 1)) ||
		    (!all && (h->seq > durable_seq || h->touched))) {
			h->touched = false;
			continue;
		}
		g_array_append_val(out, region);
		*bytes -= layout_uv_len(region);
		g_hash_table_iter_remove(&it);
	}
	pthread_mutex_unlock(&c->lock);
	g_hash_table_destroy(held);
}

void csum_hot_list(struct csum *c, GArray *out)
{
	GArray *a;

	pthread_mutex_lock(&c->lock);
	a = hot_sorted(c);
	pthread_mutex_unlock(&c->lock);
	g_array_append_vals(out, a->data, a->len);
	g_array_free(a, TRUE);
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

uint64_t csum_put_tail(struct csum *c, const uint8_t *bitmap, uint64_t nblocks, bool ahead,
		       GByteArray *b)
{
	struct csum_page *pg = NULL;
	uint64_t pb, nused = 0;
	guint start = b->len, bits, at;
	GArray *hot, *pend = NULL;
	uint32_t crc, n = 0;
	guint i;

	pthread_mutex_lock(&c->lock);
	for (pb = 0; pb < nblocks; pb++)
		if (bitmap[pb / 8] & (1U << (pb % 8))) {
			put_le32(b, get_locked(c, &pg, pb, &crc) ? crc : 0);
			nused++;
		}
	bits = b->len;
	if (nused) {
		g_byte_array_set_size(b, (guint)(bits + (nused + 7) / 8));
		memset(b->data + bits, 0, (nused + 7) / 8);
	}
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
	at = b->len;
	if (ahead) {
		/*
		 * Format 3: the pending blocks in use, each with its previous CRC,
		 * built apart: bitmap may lie in b, whose room the caller sized
		 * without them (appending may move it).
		 */
		GByteArray *sec = g_byte_array_new();

		pend = ahead_sorted(c);
		for (i = 0; i < pend->len; i++) {
			uint64_t alt;

			pb = g_array_index(pend, uint64_t, i);
			if (pb >= nblocks || !(bitmap[pb / 8] & (1U << (pb % 8))) ||
			    !get_locked(c, &pg, pb, &crc))
				continue;
			alt = (uint64_t)GPOINTER_TO_SIZE(g_hash_table_lookup(c->ahead, pb_key(pb)));
			layout_put_uv(sec, pb);
			layout_put_u8(sec, (alt & ALT_HAD) != 0);
			put_le32(sec, (uint32_t)alt);
			n++;
		}
		g_array_free(pend, TRUE);
		put_le32(b, n);
		g_byte_array_append(b, sec->data, sec->len);
		g_byte_array_unref(sec);
	}
	pthread_mutex_unlock(&c->lock);
	return b->len - at;
}

static void hot_add_locked(struct csum *c, uint64_t region, uint64_t seq)
{
	struct csum_hot *h = g_new0(struct csum_hot, 1);

	h->region = region;
	h->seq = seq;
	g_hash_table_insert(c->hot, &h->region, h);
}

static bool hot_mark_locked(struct csum *c, uint64_t region, bool hot, uint64_t seq)
{
	if (hot && !g_hash_table_contains(c->hot, &region)) {
		hot_add_locked(c, region, seq);
		return true;
	}
	if (hot || !g_hash_table_remove(c->hot, &region))
		return false;
	/* a region no write is in flight in: every block's CRC is its data's */
	ahead_drop_locked(c, region * REGION, (region + 1) * REGION);
	return true;
}

/*
 * The pending blocks of a format-3 tail, after its CRCs were set: each a
 * used block with a CRC, ascending. -EBADMSG (and none kept) if not.
 */
static int get_ahead_locked(struct csum *c, struct layout_rd *rd, const uint8_t *bitmap,
			    uint64_t nblocks)
{
	struct csum_page *pg = NULL;
	const uint8_t *p = layout_get_bytes(rd, 4);
	uint64_t pb, last = 0;
	uint32_t n, i, crc;
	__le32 w;

	if (!p)
		return -EBADMSG;
	memcpy(&w, p, 4);
	n = le32toh(w);
	if (n > layout_rd_left(rd) / 6)
		return -EBADMSG;
	for (i = 0; i < n && !rd->err; i++) {
		uint64_t alt = ALT_SET;

		pb = layout_get_uv(rd);
		if (layout_get_u8(rd))
			alt |= ALT_HAD;
		p = layout_get_bytes(rd, 4);
		if (rd->err || !p || pb >= nblocks || (i && pb <= last) ||
		    !(bitmap[pb / 8] & (1U << (pb % 8))) || !get_locked(c, &pg, pb, &crc)) {
			rd->err = -EBADMSG;
			break;
		}
		memcpy(&w, p, 4);
		alt |= le32toh(w);
		g_hash_table_insert(c->ahead, pb_key(pb), GSIZE_TO_POINTER((gsize)alt));
		last = pb;
	}
	if (rd->err) {
		g_hash_table_remove_all(c->ahead);
		return -EBADMSG;
	}
	return 0;
}

int csum_get_tail(struct csum *c, const uint8_t *bitmap, uint64_t nblocks, bool ahead,
		  const uint8_t *buf, size_t len)
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
	if (rd.err || (!ahead && layout_rd_left(&rd)))
		goto bad;
	for (pb = 0, k = 0; pb < nblocks; pb++) {
		if (!(bitmap[pb / 8] & (1U << (pb % 8))))
			continue;
		if (present[k / 8] & (1U << (k % 8))) {
			memcpy(&w, crcs + 4 * k, 4);
			set_locked(c, pb, le32toh(w));
		}
		k++;
	}
	if (ahead && (get_ahead_locked(c, &rd, bitmap, nblocks) < 0 || layout_rd_left(&rd)))
		goto bad;
	pthread_mutex_unlock(&c->lock);
	return 0;
bad:
	g_hash_table_remove_all(c->hot);
	g_hash_table_remove_all(c->ahead);
	g_hash_table_remove_all(c->pages);
	c->count = 0;
	pthread_mutex_unlock(&c->lock);
	return -EBADMSG;
}
