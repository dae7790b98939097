// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test_csum.c - the checksum table (fuse-client/meta/csum.c) against a model:
 * seeded random set / clear / get / hot marks and the pending blocks of
 * write-ahead checksums (set ahead, settle on the new or the old CRC, what
 * a read accepts) checked against GHashTables, and at intervals the table
 * serialised into a checkpoint tail (format 2, or 3 with its pending blocks)
 * over a random allocation bitmap and parsed back into a new table, which
 * must hold exactly the model's checksums of the used blocks, the model's
 * hot regions and (format 3) its pending blocks in use. Damaged tails (cut,
 * a byte added, the other format) must be refused.
 * layout_crc32c's two paths (small buffers, ISA-L) agree with a bitwise CRC.
 * RMEMFS_CSUM_SEED replays a seed (printed).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <glib.h>

#include "csum.h"
#include "layout.h"

#define NBLOCKS (5 * CSUM_PAGE + 77) /* pages, and a last one partly used */
#define NREGIONS ((NBLOCKS + LAYOUT_CSUM_REGION_BLOCKS - 1) / LAYOUT_CSUM_REGION_BLOCKS)
#define OPS 20000
#define ROUND_TRIP_EVERY 997

struct model {
	GHashTable *crc; /* pb -> crc (both as pointers: pb + 1, crc + 1) */
	GHashTable *alt; /* pb + 1 -> alt_val(): the pending blocks */
	GHashTable *hot; /* region + 1 */
	guint32 seed;
	unsigned int op;
};

#define MFAIL(md, fmt, ...)                                                               \
	g_error("csum model (seed %u, op %u): " fmt, (md)->seed, (md)->op, ##__VA_ARGS__)

static gpointer key(uint64_t v)
{
	return GSIZE_TO_POINTER((gsize)v + 1);
}

/* a pending block's value in the model: bit 33 set, bit 32 if it had a CRC, the CRC */
static gpointer alt_val(bool had, uint32_t old)
{
	return GSIZE_TO_POINTER((gsize)((1ULL << 33) | (had ? (1ULL << 32) | old : 0)));
}

/* the model's pending state of pb: true with *had, *old */
static bool model_pending(struct model *md, uint64_t pb, bool *had, uint32_t *old)
{
	gpointer v;

	if (!g_hash_table_lookup_extended(md->alt, key(pb), NULL, &v))
		return false;
	*had = (GPOINTER_TO_SIZE(v) >> 32) & 1;
	*old = (uint32_t)GPOINTER_TO_SIZE(v);
	return true;
}

/* used: compare only the blocks in use (a parsed tail); pending: its pending blocks too */
static void check_same(struct model *md, struct csum *c, const uint8_t *used, bool pending)
{
	uint64_t pb, n = 0, np = 0;
	uint32_t crc, old, mold = 0;
	bool had, mhad = false;

	for (pb = 0; pb < NBLOCKS; pb++) {
		gpointer v;
		bool want = g_hash_table_lookup_extended(md->crc, key(pb), NULL, &v);
		bool have = csum_get(c, pb, &crc);
		bool wantp = want && pending && model_pending(md, pb, &mhad, &mold);
		bool havep = csum_pending(c, pb, &old, &had);

		if (used && !(used[pb / 8] & (1U << (pb % 8))))
			want = wantp = false;
		if (want != have)
			MFAIL(md, "block %" G_GUINT64_FORMAT ": %s, the model %s", pb,
			      have ? "present" : "absent", want ? "has it" : "has none");
		if (want && crc != (uint32_t)(GPOINTER_TO_SIZE(v) - 1))
			MFAIL(md, "block %" G_GUINT64_FORMAT ": crc %08x, the model %08x", pb, crc,
			      (uint32_t)(GPOINTER_TO_SIZE(v) - 1));
		if (wantp != havep || (wantp && (had != mhad || (had && old != mold))))
			MFAIL(md, "block %" G_GUINT64_FORMAT ": pending %d (had %d, %08x), the model "
			      "%d", pb, havep, havep && had, havep ? old : 0, wantp);
		n += want;
		np += wantp;
	}
	if (csum_count(c) != n)
		MFAIL(md, "count %" G_GUINT64_FORMAT ", the model %" G_GUINT64_FORMAT,
		      csum_count(c), n);
	if (csum_pending_count(c) != np)
		MFAIL(md, "%" G_GUINT64_FORMAT " pending, the model %" G_GUINT64_FORMAT,
		      csum_pending_count(c), np);
	for (pb = 0; pb < NREGIONS; pb++)
		if (csum_hot(c, pb) != g_hash_table_contains(md->hot, key(pb)))
			MFAIL(md, "region %" G_GUINT64_FORMAT " hot %d", pb, csum_hot(c, pb));
	if (csum_hot_count(c) != g_hash_table_size(md->hot))
		MFAIL(md, "%" G_GUINT64_FORMAT " hot regions, the model %u", csum_hot_count(c),
		      g_hash_table_size(md->hot));
}

/* what a read accepts: the CRC, a pending block's previous one, anything if it had none */
static void check_accepts(struct model *md, struct csum *c, uint64_t pb, uint32_t got)
{
	gpointer v;
	uint32_t crc, mold;
	bool old, mhad, want;

	if (!g_hash_table_lookup_extended(md->crc, key(pb), NULL, &v))
		return;
	crc = (uint32_t)(GPOINTER_TO_SIZE(v) - 1);
	want = got == crc ||
	       (model_pending(md, pb, &mhad, &mold) && (!mhad || mold == got));
	if (csum_accepts(c, pb, crc, got, &old) != want)
		MFAIL(md, "block %" G_GUINT64_FORMAT ": %08x accepted %d, the model %d", pb, got,
		      !want, want);
}

/* serialise over a random bitmap, parse back, compare; damaged copies must be refused */
static void round_trip(struct model *md, struct csum *c, GRand *rng)
{
	uint8_t used[(NBLOCKS + 7) / 8];
	GByteArray *b = g_byte_array_new();
	struct csum *back = csum_new(), *bad;
	uint64_t pb, nused = 0;
	guint density = g_rand_int_range(rng, 0, 101);
	bool ahead = g_rand_boolean(rng);
	uint64_t extra;
	uint8_t *cut;

	memset(used, 0, sizeof(used));
	for (pb = 0; pb < NBLOCKS; pb++)
		if ((guint)g_rand_int_range(rng, 0, 100) < density) {
			used[pb / 8] |= (uint8_t)(1U << (pb % 8));
			nused++;
		}
	extra = csum_put_tail(c, used, NBLOCKS, ahead, b);
	if (b->len != csum_tail_len(c, nused) + extra || (!ahead && extra))
		MFAIL(md, "tail of %u bytes, csum_tail_len says %" G_GUINT64_FORMAT " + %"
		      G_GUINT64_FORMAT, b->len, csum_tail_len(c, nused), extra);
	if (csum_get_tail(back, used, NBLOCKS, ahead, b->data, b->len) < 0)
		MFAIL(md, "the tail written (format %d) does not parse", ahead ? 3 : 2);
	check_same(md, back, used, ahead);
	csum_destroy(back);

	/* one byte short, one byte too many, the other format: refused, nothing kept */
	bad = csum_new();
	g_assert_cmpint(csum_get_tail(bad, used, NBLOCKS, ahead, b->data, b->len - 1), ==,
			-EBADMSG);
	cut = g_malloc0(b->len + 1);
	memcpy(cut, b->data, b->len);
	g_assert_cmpint(csum_get_tail(bad, used, NBLOCKS, ahead, cut, b->len + 1), ==, -EBADMSG);
	g_assert_cmpint(csum_get_tail(bad, used, NBLOCKS, !ahead, b->data, b->len), ==, -EBADMSG);
	g_assert_cmpuint(csum_count(bad), ==, 0);
	g_assert_cmpuint(csum_hot_count(bad), ==, 0);
	g_assert_cmpuint(csum_pending_count(bad), ==, 0);
	g_free(cut);
	csum_destroy(bad);
	g_byte_array_unref(b);
}

static void test_model(void)
{
	const char *env = g_getenv("RMEMFS_CSUM_SEED");
	struct model md = { 0 };
	struct csum *c = csum_new();
	GRand *rng;

	md.seed = env ? (guint32)strtoul(env, NULL, 0) : g_test_rand_int();
	g_test_message("csum model seed %u (RMEMFS_CSUM_SEED=%u replays it)", md.seed, md.seed);
	rng = g_rand_new_with_seed(md.seed);
	md.crc = g_hash_table_new(g_direct_hash, g_direct_equal);
	md.hot = g_hash_table_new(g_direct_hash, g_direct_equal);
	md.alt = g_hash_table_new(g_direct_hash, g_direct_equal);
	for (md.op = 0; md.op < OPS; md.op++) {
		uint64_t pb = (uint64_t)g_rand_int_range(rng, 0, NBLOCKS);
		uint64_t n = (uint64_t)g_rand_int_range(rng, 1, 3 * CSUM_PAGE / 2);
		uint32_t crc = g_rand_int(rng), got;
		uint64_t region = pb % NREGIONS, i;
		gpointer v;

		switch (g_rand_int_range(rng, 0, 10)) {
		case 8: { /* an in-place write's CRC, ahead of its data: the old one its alternative */
			bool had = g_hash_table_lookup_extended(md.crc, key(pb), NULL, &v), mh;
			uint32_t mo;

			if (model_pending(&md, pb, &mh, &mo) && !mh)
				had = false; /* pending on "none before": stays so */

			csum_set_ahead(c, pb, crc);
			g_hash_table_insert(md.alt, key(pb),
					    alt_val(had, had ? (uint32_t)(GPOINTER_TO_SIZE(v) - 1) : 0));
			g_hash_table_insert(md.crc, key(pb), GSIZE_TO_POINTER((gsize)crc + 1));
			check_accepts(&md, c, pb, crc);
			check_accepts(&md, c, pb, crc ^ 1);
			if (had)
				check_accepts(&md, c, pb, (uint32_t)(GPOINTER_TO_SIZE(v) - 1));
			break;
		}
		case 9: { /* the write landed, or did not: settle on the new or the old CRC */
			bool had;
			uint32_t old;

			if (g_rand_boolean(rng)) {
				csum_settle(c, pb);
			} else {
				csum_settle_old(c, pb);
				if (model_pending(&md, pb, &had, &old) && had)
					g_hash_table_insert(md.crc, key(pb),
							    GSIZE_TO_POINTER((gsize)old + 1));
				else if (model_pending(&md, pb, &had, &old))
					g_hash_table_remove(md.crc, key(pb));
			}
			g_hash_table_remove(md.alt, key(pb));
			break;
		}
		case 0: /* clear a run, across pages */
			n = MIN(n, (uint64_t)NBLOCKS - pb);
			csum_clear(c, pb, n);
			for (i = 0; i < n; i++) {
				g_hash_table_remove(md.crc, key(pb + i));
				g_hash_table_remove(md.alt, key(pb + i));
			}
			break;
		case 1: /* hot mark */
		case 2: {
			bool hot = g_rand_boolean(rng);
			bool was = g_hash_table_contains(md.hot, key(region));

			if (csum_hot_set(c, region, hot, 0, NULL) != (hot != was))
				MFAIL(&md, "hot mark of region %" G_GUINT64_FORMAT " to %d", region,
				      hot);
			if (hot) {
				g_hash_table_add(md.hot, key(region));
				break;
			}
			if (was) /* no write in flight there: its pending blocks settle */
				for (i = region * LAYOUT_CSUM_REGION_BLOCKS;
				     i < (region + 1) * LAYOUT_CSUM_REGION_BLOCKS; i++)
					g_hash_table_remove(md.alt, key(i));
			g_hash_table_remove(md.hot, key(region));
			break;
		}
		case 3: { /* get a run */
			uint32_t crcs[64];
			bool have[64];

			n = MIN((uint64_t)64, (uint64_t)NBLOCKS - pb);
			csum_get_run(c, pb, n, crcs, have);
			for (i = 0; i < n; i++) {
				bool want = g_hash_table_lookup_extended(md.crc, key(pb + i), NULL,
									 &v);

				if (have[i] != want ||
				    (want && crcs[i] != (uint32_t)(GPOINTER_TO_SIZE(v) - 1)))
					MFAIL(&md, "get_run at %" G_GUINT64_FORMAT, pb + i);
			}
			break;
		}
		default: /* set, get one */
			csum_set(c, pb, crc);
			g_hash_table_insert(md.crc, key(pb), GSIZE_TO_POINTER((gsize)crc + 1));
			g_hash_table_remove(md.alt, key(pb));
			if (!csum_get(c, pb, &got) || got != crc)
				MFAIL(&md, "block %" G_GUINT64_FORMAT " lost its crc", pb);
			break;
		}
		if (md.op % ROUND_TRIP_EVERY == 0) {
			check_same(&md, c, NULL, true);
			round_trip(&md, c, rng);
		}
	}
	check_same(&md, c, NULL, true);
	round_trip(&md, c, rng);
	csum_destroy(c);
	g_hash_table_destroy(md.crc);
	g_hash_table_destroy(md.hot);
	g_hash_table_destroy(md.alt);
	g_rand_free(rng);
}

/* a tail naming a region past the data area, or the same region twice, is refused */
static void test_bad_regions(void)
{
	uint8_t used[(NBLOCKS + 7) / 8] = { 0 };
	uint8_t buf[16];
	struct csum *c = csum_new();
	size_t len = 0;

	/* no used block: an empty section, then le32 n and the regions */
	buf[len++] = 1;
	buf[len++] = 0;
	buf[len++] = 0;
	buf[len++] = 0;
	buf[len++] = (uint8_t)NREGIONS; /* uv: one past the last region */
	g_assert_cmpint(csum_get_tail(c, used, NBLOCKS, false, buf, len), ==, -EBADMSG);
	buf[0] = 2;
	buf[4] = 0;
	buf[5] = 0; /* region 0 twice */
	g_assert_cmpint(csum_get_tail(c, used, NBLOCKS, false, buf, len + 1), ==, -EBADMSG);
	g_assert_cmpuint(csum_hot_count(c), ==, 0);
	buf[5] = 1;
	g_assert_cmpint(csum_get_tail(c, used, NBLOCKS, false, buf, len + 1), ==, 0);
	g_assert_cmpuint(csum_hot_count(c), ==, 2);
	csum_destroy(c);
}

/*
 * A region holding a pending block never goes cold, even in an unmount's
 * sweep of every region: a recovery has yet to tell what the block holds
 * (a failed rmemfs-fsck --repair must not drop the old CRC). Settled, it
 * goes.
 */
static void test_pending_keeps_hot(void)
{
	GArray *cold = g_array_new(FALSE, FALSE, sizeof(uint64_t));
	struct csum *c = csum_new();
	uint64_t bytes = 1000, pb = LAYOUT_CSUM_REGION_BLOCKS + 5;
	uint32_t old;
	bool had;

	csum_set(c, pb, 0x1234);
	csum_hot_set(c, 1, true, 0, &bytes);
	csum_hot_set(c, 0, true, 0, &bytes);
	csum_set_ahead(c, pb, 0x5678);
	csum_hot_cold(c, UINT64_MAX, true, cold, &bytes);
	g_assert_cmpuint(cold->len, ==, 1); /* region 0 only */
	g_assert_cmpuint(g_array_index(cold, uint64_t, 0), ==, 0);
	g_assert_true(csum_hot(c, 1));
	g_assert_true(csum_pending(c, pb, &old, &had) && had && old == 0x1234);
	csum_settle(c, pb);
	g_array_set_size(cold, 0);
	csum_hot_cold(c, UINT64_MAX, true, cold, &bytes);
	g_assert_cmpuint(cold->len, ==, 1);
	g_assert_false(csum_hot(c, 1));
	g_assert_cmpuint(bytes, ==, 1000);
	g_array_free(cold, TRUE);
	csum_destroy(c);
}

/* the geometry keeps room for the CRCs, and refuses what a checkpoint cannot hold */
static void test_geometry(void)
{
	const uint64_t gib = 1ULL << 30;
	struct layout_geom g;

	g_assert_cmpint(layout_geometry(LAYOUT_MIN_POOL - 4096, &g), ==, -ENOSPC);
	g_assert_cmpint(layout_geometry(LAYOUT_MIN_POOL, &g), ==, 0);
	g_assert_cmpint(layout_geometry(16 * gib, &g), ==, 0);
	/* 256 MiB of metadata as in format 1, plus 4.125 bytes for each data block */
	g_assert_cmpuint(g.slot_len, >=, (256ULL << 20) + layout_csum_section_len(g.data_blocks));
	g_assert_cmpint(layout_geometry(3 * 1024 * gib, &g), ==, 0);
	g_assert_cmpuint(g.slot_len, <=, LAYOUT_SLOT_MAX);
	g_assert_cmpint(layout_geometry(4 * 1024 * gib, &g), ==, -EFBIG);
}

/* CRC-32C one bit at a time: what both of layout_crc32c's paths must give */
static uint32_t crc_bitwise(uint32_t crc, const uint8_t *p, size_t len)
{
	int k;

	while (len--) {
		crc ^= *p++;
		for (k = 0; k < 8; k++)
			crc = crc & 1 ? (crc >> 1) ^ 0x82f63b78U : crc >> 1;
	}
	return crc;
}

/* every length around the small/large boundary, odd offsets, chained calls */
static void test_crc32c(void)
{
	const size_t max = 3 * 4096 + 9;
	uint8_t *buf = g_malloc(max + 8);
	GRand *rng = g_rand_new_with_seed(7);
	size_t i, len;

	g_assert_cmphex(layout_crc("123456789", 9), ==, 0xe3069283U);
	for (i = 0; i < max + 8; i++)
		buf[i] = (uint8_t)g_rand_int(rng);
	for (len = 0; len <= max; len += len < 4200 ? 1 : 97) {
		const uint8_t *p = buf + len % 8;
		uint32_t want = crc_bitwise(~0U, p, len);
		size_t cut = len ? g_rand_int_range(rng, 0, (gint32)len) : 0;

		g_assert_cmphex(layout_crc32c(~0U, p, len), ==, want);
		g_assert_cmphex(layout_crc32c(layout_crc32c(~0U, p, cut), p + cut, len - cut), ==,
				want);
	}
	g_rand_free(rng);
	g_free(buf);
}

int main(int argc, char **argv)
{
	g_test_init(&argc, &argv, NULL);
	g_test_add_func("/csum/model", test_model);
	g_test_add_func("/csum/bad-regions", test_bad_regions);
	g_test_add_func("/csum/pending-keeps-hot", test_pending_keeps_hot);
	g_test_add_func("/csum/geometry", test_geometry);
	g_test_add_func("/csum/crc32c", test_crc32c);
	return g_test_run();
}
