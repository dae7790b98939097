// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test_place.c - the placement of units over a member set (place.h) and
 * the membership record (layout.h): every copy on a distinct member, no
 * two copies in one slot, every member equally full, and the copies of a
 * lost member's units spread evenly over all survivors.
 */
#include <endian.h>
#include <string.h>

#include <glib.h>

#include "layout.h"
#include "place.h"

#define CYCLES 5

static void check_set(uint32_t n, uint32_t r)
{
	struct place p;
	struct place_copy c[PLACE_MAX_REPLICAS];
	uint64_t u, units, slots;
	uint32_t k, j, lost, fill[PLACE_MAX_MEMBERS] = { 0 };
	GHashTable *used = g_hash_table_new(g_int64_hash, g_int64_equal);
	gint64 *keys;

	g_assert_cmpint(place_init(&p, n, r, 1000), ==, 0);
	units = place_units(&p);
	slots = p.cycles * p.per_cycle;
	g_assert_cmpuint(slots, <=, 1000);
	g_assert_cmpuint(units * r, ==, slots * n); /* nothing wasted within the cycles */
	keys = g_new(gint64, units * r);
	for (u = 0; u < units; u++) {
		place_unit(&p, u, c);
		for (k = 0; k < r; k++) {
			uint64_t slot;

			g_assert_cmpuint(c[k].member, <, n);
			g_assert_cmpuint(c[k].slot, <, slots);
			for (j = 0; j < k; j++)
				g_assert_cmpuint(c[j].member, !=, c[k].member);
			keys[u * r + k] = (gint64)(c[k].slot * PLACE_MAX_MEMBERS + c[k].member);
			g_assert_false(g_hash_table_contains(used, &keys[u * r + k]));
			g_hash_table_add(used, &keys[u * r + k]);
			g_assert_true(place_unit_on(&p, u, c[k].member, &slot));
			g_assert_cmpuint(slot, ==, c[k].slot);
			fill[c[k].member]++;
		}
	}
	for (k = 1; k < n; k++)
		g_assert_cmpuint(fill[k], ==, fill[0]);
	/* declustered: a lost member's units have their other copies on every survivor alike */
	for (lost = 0; lost < n && r > 1; lost++) {
		uint32_t share[PLACE_MAX_MEMBERS] = { 0 };

		for (u = 0; u < units; u++) {
			uint64_t slot;

			if (!place_unit_on(&p, u, lost, &slot))
				continue;
			place_unit(&p, u, c);
			for (k = 0; k < r; k++)
				share[c[k].member] += c[k].member != lost;
		}
		for (k = 0; k < n; k++)
			if (k != lost)
				g_assert_cmpuint(share[k], ==, share[lost == 0 ? 1 : 0]);
		g_assert_cmpuint(share[lost], ==, 0);
	}
	g_hash_table_destroy(used);
	g_free(keys);
}

static void test_placement(void)
{
	uint32_t n, r;

	for (n = 1; n <= PLACE_MAX_MEMBERS; n++)
		for (r = 1; r <= MIN(n, PLACE_MAX_REPLICAS); r++)
			check_set(n, r);
}

static void test_limits(void)
{
	struct place p;

	g_assert_cmpint(place_init(&p, 2, 3, 100), ==, -EINVAL);
	g_assert_cmpint(place_init(&p, PLACE_MAX_MEMBERS + 1, 2, 100), ==, -EINVAL);
	g_assert_cmpint(place_init(&p, 9, 2, 100), ==, 0);
	g_assert_cmpint(place_init(&p, 5, 5, 100), ==, -EINVAL); /* more than 4 copies */
	g_assert_cmpint(place_init(&p, 12, 4, 164), ==, -ENOSPC); /* a cycle needs C(11, 3) */
	g_assert_cmpint(place_init(&p, 12, 4, 165), ==, 0);
	g_assert_cmpuint(place_units(&p), ==, 495);
	g_assert_cmpint(place_init(&p, 3, 0, 100), ==, -EINVAL);
	g_assert_cmpint(place_init(&p, 8, 3, 20), ==, -ENOSPC); /* a cycle needs 21 */
	g_assert_cmpint(place_init(&p, 8, 3, 21), ==, 0);
	g_assert_cmpuint(place_units(&p), ==, 56);
}

/* every fragment of stripes [from, to): on distinct members, in distinct slots that exist */
static void stripes_walk(const struct place_stripes *p, uint64_t from, uint64_t to,
			 uint64_t member_units, GHashTable *used, gint64 *keys)
{
	struct place_copy f[PLACE_STRIPE_MAX_WIDTH];
	uint64_t s;
	uint32_t i, j;

	for (s = from; s < to; s++) {
		place_stripe(p, s, f);
		for (i = 0; i < p->w; i++) {
			g_assert_cmpuint(f[i].member, <, p->n);
			g_assert_cmpuint(f[i].slot, <, member_units);
			for (j = 0; j < i; j++)
				g_assert_cmpuint(f[j].member, !=, f[i].member);
			keys[s * p->w + i] = (gint64)(f[i].slot * PLACE_MAX_MEMBERS + f[i].member);
			g_assert_false(g_hash_table_contains(used, &keys[s * p->w + i]));
			g_hash_table_add(used, &keys[s * p->w + i]);
		}
	}
}

/*
 * Over whole cycles: each member holds as many data and parity fragments as
 * any other, for every split of w into k data + m parity, and a lost
 * member's stripes lie on every survivor alike.
 */
static void stripes_balance(const struct place_stripes *p, uint64_t stripes)
{
	struct place_copy f[PLACE_STRIPE_MAX_WIDTH];
	uint32_t k, i, lost, data[PLACE_MAX_MEMBERS], share[PLACE_MAX_MEMBERS];
	uint64_t s;

	for (k = 1; k < p->w; k++) {
		memset(data, 0, sizeof(data));
		for (s = 0; s < stripes; s++) {
			place_stripe(p, s, f);
			for (i = 0; i < k; i++)
				data[f[i].member]++;
		}
		for (i = 1; i < p->n; i++)
			g_assert_cmpuint(data[i], ==, data[0]);
	}
	for (lost = 0; lost < p->n && p->n > p->w; lost++) {
		memset(share, 0, sizeof(share));
		for (s = 0; s < stripes; s++) {
			bool has = false;

			place_stripe(p, s, f);
			for (i = 0; i < p->w; i++)
				has |= f[i].member == lost;
			for (i = 0; has && i < p->w; i++)
				share[f[i].member] += f[i].member != lost;
		}
		for (i = 0; i < p->n; i++)
			if (i != lost)
				g_assert_cmpuint(share[i], ==, share[lost == 0 ? 1 : 0]);
	}
}

/*
 * A member fills its slots in stripe order, none skipped: so the partial
 * last cycle is a prefix of the stripes, and no slot is left between them.
 */
static void stripes_in_order(const struct place_stripes *p, uint64_t stripes)
{
	struct place_copy f[PLACE_STRIPE_MAX_WIDTH];
	uint64_t next[PLACE_MAX_MEMBERS] = { 0 }, s;
	uint32_t i;

	for (s = 0; s < stripes; s++) {
		place_stripe(p, s, f);
		for (i = 0; i < p->w; i++)
			g_assert_cmpuint(f[i].slot, ==, next[f[i].member]++);
	}
}

static void check_stripes(uint32_t n, uint32_t w)
{
	struct place_stripes p;
	uint64_t units, cycle_stripes;
	GHashTable *used = g_hash_table_new(g_int64_hash, g_int64_equal);
	gint64 *keys;

	g_assert_cmpint(place_stripes_init(&p, n, w, UINT32_MAX), ==, 0);
	/* three whole cycles and most of a fourth */
	units = p.per_cycle * 3ULL + p.per_cycle * 2 / 3;
	g_assert_cmpint(place_stripes_init(&p, n, w, units), ==, 0);
	cycle_stripes = (uint64_t)p.ncomb * w;
	g_assert_cmpuint(p.per_cycle * n, ==, cycle_stripes * w); /* nothing wasted in a cycle */
	g_assert_cmpuint(p.stripes, >=, 3 * cycle_stripes);
	g_assert_cmpuint(p.stripes, <, 4 * cycle_stripes);
	keys = g_new(gint64, p.stripes * w);
	stripes_walk(&p, 0, p.stripes, units, used, keys);
	stripes_balance(&p, 3 * cycle_stripes);
	stripes_in_order(&p, p.stripes);
	g_assert_true(p.ncomb <= 2 || p.stride != 1);
	/* the partial cycle is all that fits: the next stripe does not */
	if (p.stripes % cycle_stripes) {
		struct place_copy f[PLACE_STRIPE_MAX_WIDTH];
		bool over = false;
		uint32_t i;

		place_stripe(&p, p.stripes, f);
		for (i = 0; i < w; i++)
			over |= f[i].slot >= units;
		g_assert_true(over);
	}
	g_hash_table_destroy(used);
	g_free(keys);
}

static void test_stripes(void)
{
	uint32_t n, w;

	for (n = 2; n <= PLACE_MAX_MEMBERS; n++)
		for (w = 2; w <= MIN(n, PLACE_STRIPE_MAX_WIDTH); w++)
			check_stripes(n, w);
}

/*
 * A rebuild of lost member `lost` over `stripes` stripes: each survivor's
 * reads (place_stripe_sources) into reads[]; k of the others, never the lost
 * fragment, only fragments up.
 */
static void sources_walk(const struct place_stripes *p, uint32_t k, uint32_t lost,
			 uint64_t stripes, uint64_t *reads)
{
	struct place_copy f[PLACE_STRIPE_MAX_WIDTH];
	uint32_t i, fl, all = (1U << p->w) - 1, src;
	uint64_t s;

	for (s = 0; s < stripes; s++) {
		place_stripe(p, s, f);
		for (fl = 0; fl < p->w && f[fl].member != lost; fl++)
			;
		if (fl == p->w)
			continue;
		src = place_stripe_sources(p, s, fl, k, all & ~(1U << fl));
		g_assert_cmpint(__builtin_popcount(src), ==, k);
		g_assert_false(src & (1U << fl));
		for (i = 0; i < p->w; i++)
			if (src & (1U << i))
				reads[f[i].member]++;
		/* another fragment down too: still k, from those up */
		if (p->w - 2 >= k) {
			uint32_t up = all & ~(1U << fl) & ~(1U << ((fl + 1) % p->w));

			src = place_stripe_sources(p, s, fl, k, up);
			g_assert_cmpint(__builtin_popcount(src), ==, k);
			g_assert_cmpuint(src & ~up, ==, 0);
		}
	}
}

/* every survivor of a lost member reads about as much as another (data first would not) */
static void check_sources(uint32_t n, uint32_t w, uint32_t k)
{
	struct place_stripes p;
	uint64_t reads[PLACE_MAX_MEMBERS], lo, hi, cycle;
	uint32_t lost, i;

	g_assert_cmpint(place_stripes_init(&p, n, w, UINT32_MAX), ==, 0);
	cycle = (uint64_t)p.ncomb * w;
	for (lost = 0; lost < n; lost++) {
		memset(reads, 0, sizeof(reads));
		/* whole cycles, at least four and 4096 stripes */
		sources_walk(&p, k, lost, MAX(4, (4096 + cycle - 1) / cycle) * cycle, reads);
		lo = UINT64_MAX;
		hi = 0;
		for (i = 0; i < n; i++) {
			if (i == lost)
				continue;
			lo = MIN(lo, reads[i]);
			hi = MAX(hi, reads[i]);
		}
		g_assert_cmpuint(lo, >, 0);
		g_assert_cmpuint(hi - lo, <=, hi / 6);
	}
	g_assert_cmpuint(place_stripe_sources(&p, 0, 0, k, 1U << 1), ==, 0); /* one up: too few */
}

static void test_stripe_sources(void)
{
	uint32_t n, w, k;

	for (n = 3; n <= PLACE_MAX_MEMBERS; n++)
		for (w = 3; w <= MIN(n, PLACE_STRIPE_MAX_WIDTH); w++)
			for (k = MAX(2, w - 3); k < w && k <= 8; k++)
				check_sources(n, w, k);
}

static void test_stripe_limits(void)
{
	struct place_stripes p;

	g_assert_cmpint(place_stripes_init(&p, 4, 1, 100), ==, -EINVAL);
	g_assert_cmpint(place_stripes_init(&p, 3, 4, 100), ==, -EINVAL);
	g_assert_cmpint(place_stripes_init(&p, PLACE_MAX_MEMBERS + 1, 3, 100), ==, -EINVAL);
	/* 6 members, 4+2: one combination, six rotations; a stripe needs one slot on each */
	g_assert_cmpint(place_stripes_init(&p, 6, 6, 0), ==, -ENOSPC);
	g_assert_cmpint(place_stripes_init(&p, 6, 6, 1), ==, 0);
	g_assert_cmpuint(p.stripes, ==, 1);
	g_assert_cmpint(place_stripes_init(&p, 6, 6, 100), ==, 0);
	g_assert_cmpuint(p.stripes, ==, 100);
}

static void test_record(void)
{
	struct layout_set_info in, out;
	uint8_t blk[LAYOUT_SET_REC_SIZE];
	uint32_t place;

	memset(&in, 0, sizeof(in));
	memset(blk, 0, sizeof(blk));
	g_assert_cmpint(layout_set_unpack(blk, &out, &place), ==, -ENODATA);
	memset(in.set_uuid, 0xab, 16);
	in.events = 42;
	in.nmembers = 3;
	in.replicas = 2;
	in.unit_shift = 18;
	in.member_units = 255;
	in.m[1].pool_id = 0x1234;
	in.m[1].state = LAYOUT_MEMBER_REBUILDING;
	in.m[1].rebuilt = 7;
	g_strlcpy(in.m[1].addr, "10.0.0.2:7471", LAYOUT_SET_ADDR_LEN);
	layout_set_pack(&in, 1, (struct layout_set *)blk);
	g_assert_cmpint(layout_set_unpack(blk, &out, &place), ==, 0);
	g_assert_cmpuint(place, ==, 1);
	g_assert_cmpuint(out.events, ==, 42);
	g_assert_cmpuint(out.m[1].pool_id, ==, 0x1234);
	g_assert_cmpint(out.m[1].state, ==, LAYOUT_MEMBER_REBUILDING);
	g_assert_cmpuint(out.m[1].rebuilt, ==, 7);
	g_assert_cmpstr(out.m[1].addr, ==, "10.0.0.2:7471");
	blk[100] ^= 1; /* a torn or damaged record */
	g_assert_cmpint(layout_set_unpack(blk, &out, &place), ==, -EBADMSG);
	blk[100] ^= 1;
	in.replicas = 4; /* more copies than members */
	layout_set_pack(&in, 1, (struct layout_set *)blk);
	g_assert_cmpint(layout_set_unpack(blk, &out, &place), ==, -EBADMSG);
}

/* a record of n members for the version tests */
static void set_info(struct layout_set_info *in, uint32_t n, uint32_t replicas)
{
	uint32_t i;

	memset(in, 0, sizeof(*in));
	memset(in->set_uuid, 0xcd, 16);
	in->events = 7;
	in->nmembers = n;
	in->replicas = replicas;
	in->unit_shift = 16;
	in->member_units = 1000;
	for (i = 0; i < n; i++) {
		in->m[i].pool_id = 0x100 + i;
		g_snprintf(in->m[i].addr, LAYOUT_SET_ADDR_LEN, "10.0.0.%u:7471", i + 1);
	}
}

static int pack_unpack(const struct layout_set_info *in, uint8_t *blk, struct layout_set_info *out)
{
	uint32_t place;

	memset(blk, 0, LAYOUT_SET_REC_SIZE);
	layout_set_pack(in, 0, (struct layout_set *)blk);
	return layout_set_unpack(blk, out, &place);
}

static uint32_t rec_version(const uint8_t *blk)
{
	uint32_t v;

	memcpy(&v, blk + 8, 4);
	return le32toh(v);
}

/* replicated sets of up to 8 members keep version 1, byte for byte; larger and coded ones are 2 */
static void test_record_versions(void)
{
	static uint8_t blk[LAYOUT_SET_REC_SIZE];
	struct layout_set_info in, out;
	uint32_t crc, v;

	set_info(&in, 8, 3);
	g_assert_cmpint(pack_unpack(&in, blk, &out), ==, 0);
	g_assert_cmpuint(rec_version(blk), ==, 1);
	memcpy(&crc, blk + 12, 4);
	memset(blk + 12, 0, 4);
	g_assert_cmpuint(layout_crc(blk, LAYOUT_SET_V1_LEN), ==, le32toh(crc)); /* v1's span */
	set_info(&in, 9, 3);
	g_assert_cmpint(pack_unpack(&in, blk, &out), ==, 0);
	g_assert_cmpuint(rec_version(blk), ==, 2);
	set_info(&in, LAYOUT_SET_MAX, 3);
	g_assert_cmpint(pack_unpack(&in, blk, &out), ==, 0);
	g_assert_cmpuint(out.m[LAYOUT_SET_MAX - 1].pool_id, ==, 0x100 + LAYOUT_SET_MAX - 1);
	g_assert_cmpstr(out.m[LAYOUT_SET_MAX - 1].addr, ==, "10.0.0.12:7471");
	blk[LAYOUT_SET_V1_LEN + 8] ^= 1; /* a member only version 2 covers */
	g_assert_cmpint(layout_set_unpack(blk, &out, &v), ==, -EBADMSG);
	/* erasure-coded: 4+2 on 6 members, the replicated zone with 3 copies */
	set_info(&in, 6, 3);
	in.ec_k = 4;
	in.ec_m = 2;
	in.rep_units = 330;
	g_assert_cmpint(pack_unpack(&in, blk, &out), ==, 0);
	g_assert_cmpuint(rec_version(blk), ==, 2);
	g_assert_cmpuint(out.ec_k, ==, 4);
	g_assert_cmpuint(out.ec_m, ==, 2);
	g_assert_cmpuint(out.rep_units, ==, 330);
	g_assert_cmpuint(out.m[5].pool_id, ==, 0x105);
	/* a newer version is refused as such, before its crc */
	v = htole32(3);
	memcpy(blk + 8, &v, 4);
	g_assert_cmpint(layout_set_unpack(blk, &out, &crc), ==, -EPROTONOSUPPORT);
}

/* codes this rmemfs cannot hold, and counts a version cannot have, are damage */
static void test_record_refusals(void)
{
	static uint8_t blk[LAYOUT_SET_REC_SIZE];
	struct layout_set_info in, out;
	static const struct {
		uint32_t n, replicas, k, m;
		uint64_t rep_units;
	} bad[] = {
		{ 6, 2, 1, 1, 10 }, /* k below 2 */
		{ 12, 2, 9, 1, 10 }, /* k above 8 */
		{ 6, 1, 4, 0, 10 }, /* no parity */
		{ 8, 5, 4, 4, 10 }, /* m above 3 */
		{ 5, 3, 4, 2, 10 }, /* 4+2 on 5 members */
		{ 6, 2, 4, 2, 10 }, /* the replicated zone keeps m + 1 copies */
		{ 6, 3, 4, 2, 0 }, /* no replicated zone */
		{ 6, 3, 4, 2, 2001 }, /* a zone larger than the members: 2001 x 3 > 6 x 1000 */
		{ 9, 2, 0, 1, 0 }, /* parity without data (9 members: version 2) */
		{ 10, 4, 0, 0, 0 }, /* four copies of a replicated set */
	};
	size_t i;

	for (i = 0; i < G_N_ELEMENTS(bad); i++) {
		set_info(&in, bad[i].n, bad[i].replicas);
		in.ec_k = bad[i].k;
		in.ec_m = bad[i].m;
		in.rep_units = bad[i].rep_units;
		g_test_message("case %zu", i);
		g_assert_cmpint(pack_unpack(&in, blk, &out), ==, -EBADMSG);
	}
}

/* ---- the zoned geometry of an erasure-coded set (layout_geometry_zoned) ---- */

#define EC_UNIT (64ULL << 10)
#define MIB (1ULL << 20)

/*
 * An ec=k+m set of n members of pool bytes each, as remote.c's new_set and
 * open_set lay it out (a mirror of them): its zone_end and size.
 */
static void ec_set(uint32_t n, uint32_t k, uint32_t m, uint64_t pool, uint64_t *zone_end,
		   uint64_t *size)
{
	struct place_stripes *ps = g_new0(struct place_stripes, 1);
	uint64_t units = (pool - LAYOUT_SET_DATA_OFF) / EC_UNIT, cycles;
	struct place p;

	g_assert_cmpint(place_init(&p, n, m + 1, units), ==, 0);
	cycles = layout_zone_min(n * units * EC_UNIT, k, m);
	cycles = (cycles + p.ncomb * EC_UNIT - 1) / (p.ncomb * EC_UNIT);
	g_assert_cmpuint(cycles * p.per_cycle, <, units);
	g_assert_cmpint(place_stripes_init(ps, n, k + m, units - cycles * p.per_cycle), ==, 0);
	*zone_end = cycles * p.ncomb * EC_UNIT;
	*size = *zone_end + ps->stripes * k * EC_UNIT;
	g_free(ps);
}

/* that set's geometry: the journal is the replicated zone, the rest lies on stripes */
static double check_zoned(uint32_t n, uint32_t k, uint32_t m, uint64_t pool)
{
	uint64_t zone_end, size, stripe = k * EC_UNIT;
	struct layout_geom g, back;
	struct layout_sb sb;
	uint8_t blk[LAYOUT_SB_SIZE] = { 0 };
	uint32_t version;

	ec_set(n, k, m, pool, &zone_end, &size);
	g_test_message("%u members of %" G_GUINT64_FORMAT " MiB, ec=%u+%u: zone %" G_GUINT64_FORMAT
		       " KiB, size %" G_GUINT64_FORMAT " MiB", n, (guint64)(pool / MIB), k, m,
		       (guint64)(zone_end >> 10), (guint64)(size / MIB));
	g_assert_cmpint(layout_geometry_zoned(size, zone_end, stripe, &g), ==, 0);
	g_assert_cmpuint(g.journal_off, ==, LAYOUT_SB_SIZE);
	g_assert_cmpuint(g.journal_off + g.journal_len, ==, zone_end);
	g_assert_cmpuint(g.journal_len, >=, MIB);
	g_assert_cmpuint(g.slot_off[0], ==, zone_end);
	g_assert_cmpuint(g.slot_len % stripe, ==, 0);
	g_assert_cmpuint(g.slot_off[1], ==, g.slot_off[0] + g.slot_len);
	g_assert_cmpuint(g.data_off, ==, g.slot_off[1] + g.slot_len);
	g_assert_cmpuint(g.data_off + g.data_blocks * LAYOUT_BLOCK, <=, size);
	/* room for the checkpoint's checksums of every data block */
	g_assert_cmpuint(g.slot_len, >, layout_csum_section_len(g.data_blocks));
	/* the superblock reads back as written */
	layout_sb_pack(&g, &sb);
	memcpy(blk, &sb, sizeof(sb));
	g_assert_cmpint(layout_sb_classify(blk, size, &back, &version, NULL), ==, LAYOUT_SB_RMEMFS);
	g_assert_cmpuint(back.data_off, ==, g.data_off);
	g_assert_cmpuint(back.data_blocks, ==, g.data_blocks);
	return (double)g.data_blocks * LAYOUT_BLOCK / ((double)n * (double)pool);
}

static void test_geometry_zoned(void)
{
	static const struct {
		uint32_t n, k, m;
	} sets[] = { { 3, 2, 1 }, { 4, 3, 1 }, { 4, 2, 2 }, { 6, 4, 2 }, { 8, 5, 3 },
		     { 11, 8, 3 }, { 12, 8, 3 }, { 12, 2, 1 } };
	struct layout_geom g;
	double ratio, ideal;
	size_t i;

	/* the bench, 6 x 1280 MiB at 4+2: at least 0.65 of the raw memory (R=3: 0.33) */
	ratio = check_zoned(6, 4, 2, 1280 * MIB);
	g_test_message("6 x 1280 MiB, ec=4+2: %.3f of raw", ratio);
	g_assert_cmpfloat(ratio, >=, 0.65);
	/*
	 * small members: below K/(K+M), by the metadata and the zone - whole
	 * cycles of C(n, M+1) units, 31 MiB at 12 members and M = 3
	 */
	for (i = 0; i < G_N_ELEMENTS(sets); i++) {
		ideal = (double)sets[i].k / (sets[i].k + sets[i].m);
		ratio = check_zoned(sets[i].n, sets[i].k, sets[i].m, 64 * MIB);
		g_test_message("ratio %.3f of %.3f", ratio, ideal);
		g_assert_cmpfloat(ratio, <, ideal);
		g_assert_cmpfloat(ratio, >, 0.8 * ideal);
	}
	/* a journal under 1 MiB, a zone past the end, no room for data, too small a pool */
	g_assert_cmpint(layout_geometry_zoned(64 * MIB, LAYOUT_SB_SIZE + MIB / 2, 256 << 10, &g), ==,
			-ENOSPC);
	g_assert_cmpint(layout_geometry_zoned(64 * MIB, 64 * MIB, 256 << 10, &g), ==, -ENOSPC);
	g_assert_cmpint(layout_geometry_zoned(8 * MIB, 5 * MIB, 512 << 10, &g), ==, -ENOSPC);
	g_assert_cmpint(layout_geometry_zoned(4 * MIB, 2 * MIB, 128 << 10, &g), ==, -ENOSPC);
	/* a stripe or zone that is not whole blocks */
	g_assert_cmpint(layout_geometry_zoned(64 * MIB, 2 * MIB, 0, &g), ==, -EINVAL);
	g_assert_cmpint(layout_geometry_zoned(64 * MIB, 2 * MIB, 1000, &g), ==, -EINVAL);
	g_assert_cmpint(layout_geometry_zoned(64 * MIB, 2 * MIB + 512, 128 << 10, &g), ==, -EINVAL);
	/* a checkpoint past 4 GiB, as layout_geometry */
	g_assert_cmpint(layout_geometry_zoned(8ULL << 40, 64 * MIB, 512 << 10, &g), ==, -EFBIG);
	g_assert_cmpint(layout_geometry(8ULL << 40, &g), ==, -EFBIG);
}

int main(int argc, char **argv)
{
	g_test_init(&argc, &argv, NULL);
	g_test_add_func("/place/placement", test_placement);
	g_test_add_func("/place/limits", test_limits);
	g_test_add_func("/place/stripes", test_stripes);
	g_test_add_func("/place/stripe-limits", test_stripe_limits);
	g_test_add_func("/place/stripe-sources", test_stripe_sources);
	g_test_add_func("/place/record", test_record);
	g_test_add_func("/place/record-versions", test_record_versions);
	g_test_add_func("/place/record-refusals", test_record_refusals);
	g_test_add_func("/place/geometry-zoned", test_geometry_zoned);
	return g_test_run();
}
