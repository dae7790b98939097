// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * intent.c - the write-intent map of a member set (remote_int.h), as Linux
 * md keeps one: after a client crash, the copies of a unit may differ (it
 * died between writing one copy and the next), and the map says where.
 *
 * One bit per region of units, kept on every member at LAYOUT_SET_INTENT_OFF.
 * Before a write to a region whose bit is clear goes out, the bit is set and
 * the 4 KiB page of the map that holds it is written to every member that is
 * up (the writer waits for that; later writes to the region do not). Once a
 * few seconds the keeper clears the bits of regions not written since the
 * last sweep, holding rb_lock for writing so no write is between its mark
 * and its end; a clean unmount clears them all. A mount that finds bits set
 * (the client before it died) keeps them until the copies of those regions
 * agree (intent_recover, called once the metadata is loaded so that the data
 * checksums can judge a block, before anything reads or writes the data):
 * block by block the first copy whose checksum passes (old or new, for a
 * block a write was changing), else the majority with three copies, else
 * the first in placement order (scrub.c's rule) - either is a state some
 * write left, and none of them was acknowledged; a copy that fails its
 * checksum is never written over one that passes.
 *
 * An erasure-coded set's stripes in marked regions get their parity coded
 * anew from the data (a data block whose checksum fails is first decoded
 * from a parity, where that decode passes). A client that died between a stripe's data and its
 * parity left the other data fragments untouched, so parity that agrees
 * with the data keeps every acknowledged byte decodable; the torn
 * fragment's own bytes were never acknowledged. With a data fragment down
 * that repair is impossible (the RAID-5 write hole): such a stripe is
 * logged, and a block a torn write left there fails its checksum.
 */
#define G_LOG_DOMAIN "rmemfs-remote"

#include "remote_int.h"

#include <errno.h>
#include <string.h>

#include <glib.h>

#define INTENT_MAP_BYTES (LAYOUT_SET_DATA_OFF - LAYOUT_SET_INTENT_OFF)
#define INTENT_PAGE 4096U
#define INTENT_MIN_REGION_UNITS 64U /* 16 MiB of 256 KiB units: few marks per stream */

void intent_init(struct remote *r)
{
	uint64_t units = remote_units(r), bits = INTENT_MAP_BYTES * 8;

	r->intent_region = MAX((uint64_t)INTENT_MIN_REGION_UNITS, (units + bits - 1) / bits);
	r->intent_map = g_malloc0(INTENT_MAP_BYTES);
	r->intent_recent = g_malloc0(INTENT_MAP_BYTES);
	r->intent_found = g_malloc0(INTENT_MAP_BYTES);
	pthread_mutex_init(&r->intent_lock, NULL);
}

void intent_free(struct remote *r)
{
	g_free(r->intent_map);
	g_free(r->intent_recent);
	g_free(r->intent_found);
	r->intent_map = r->intent_recent = r->intent_found = NULL;
	pthread_mutex_destroy(&r->intent_lock);
}

/* write [off, off+len) of the map to every member that is up or being rebuilt */
static int write_map(struct remote *r, size_t off, size_t len)
{
	unsigned int i, ok = 0;
	int rc;

	for (i = 0; i < r->n; i++) {
		bool up = atomic_load(&r->mem[i].up);

		if (!up && atomic_load(&r->rb_member) != (int)i)
			continue;
		rc = member_write(r->mem[i].m, LAYOUT_SET_INTENT_OFF + off, r->intent_map + off, len);
		if (rc < 0 && up && remote_member_gone(r, i, rc))
			continue;
		if (rc < 0 && up)
			return rc;
		ok += up;
	}
	return ok ? 0 : -EIO;
}

static bool bit(const uint8_t *map, uint64_t b)
{
	return (__atomic_load_n(&map[b / 8], __ATOMIC_SEQ_CST) >> (b % 8)) & 1;
}

int intent_mark(struct remote *r, uint64_t u)
{
	uint64_t b = u / r->intent_region;
	size_t page;
	int rc = 0;

	if (!r->intent_map || !remote_redundant(r))
		return 0;
	__atomic_fetch_or(&r->intent_recent[b / 8], (uint8_t)(1U << (b % 8)), __ATOMIC_SEQ_CST);
	if (bit(r->intent_map, b))
		return 0;
	pthread_mutex_lock(&r->intent_lock);
	if (!bit(r->intent_map, b)) {
		__atomic_fetch_or(&r->intent_map[b / 8], (uint8_t)(1U << (b % 8)),
				  __ATOMIC_SEQ_CST);
		page = (size_t)(b / 8) / INTENT_PAGE * INTENT_PAGE;
		rc = write_map(r, page, INTENT_PAGE);
	}
	pthread_mutex_unlock(&r->intent_lock);
	return rc;
}

int intent_sweep(struct remote *r, bool all)
{
	bool changed = false;
	size_t k;
	int rc = 0;

	if (!r->intent_map || !remote_redundant(r))
		return 0;
	pthread_rwlock_wrlock(&r->rb_lock);
	pthread_mutex_lock(&r->intent_lock);
	for (k = 0; k < INTENT_MAP_BYTES; k++) {
		/* a dead client's marks stay until intent_recover made their copies agree */
		uint8_t keep = all ? r->intent_found[k] :
				     r->intent_map[k] & (r->intent_recent[k] | r->intent_found[k]);

		changed = changed || keep != r->intent_map[k];
		r->intent_map[k] = keep;
		r->intent_recent[k] = 0;
	}
	if (changed)
		rc = write_map(r, 0, INTENT_MAP_BYTES);
	pthread_mutex_unlock(&r->intent_lock);
	pthread_rwlock_unlock(&r->rb_lock);
	return rc;
}

/* the maps of every member that is up, or'ed (the writer may have died between members) */
static int read_maps(struct remote *r, uint8_t *map)
{
	uint8_t *one = g_malloc(INTENT_MAP_BYTES);
	unsigned int i;
	size_t k;
	int rc = 0;

	memset(map, 0, INTENT_MAP_BYTES);
	for (i = 0; i < r->n && !rc; i++) {
		if (!atomic_load(&r->mem[i].up))
			continue;
		rc = member_read(r->mem[i].m, LAYOUT_SET_INTENT_OFF, one, INTENT_MAP_BYTES);
		if (rc < 0 && remote_member_gone(r, i, rc))
			rc = 0;
		for (k = 0; k < INTENT_MAP_BYTES && !rc; k++)
			map[k] |= one[k];
	}
	g_free(one);
	return rc;
}

/*
 * The stripes of the units [u, end) of the EC zone, from *next on (a stripe
 * may lie in two regions: once is enough), made to agree: the parity coded
 * anew from the data where it differs, and a stripe with a data fragment
 * down that cannot be checked is said to be possibly torn. *fixed: stripes
 * rewritten. No stripe lock: this runs under rb_lock held for writing (which
 * excludes every stripe writer), before any writer of this client is up.
 */
static int recover_stripes(struct remote *r, const struct remote_judge *j, uint64_t u,
			   uint64_t end, uint64_t *next, uint8_t **bufs, unsigned int *fixed)
{
	struct remote_scrub es = { .judge = j, .repair = true, .report = NULL };
	uint64_t st, stop = MIN(ec_stripe_of(r, end - 1) + 1, ec_stripes(r));
	unsigned int before;
	bool doubt;
	int rc = 0;

	for (st = MAX(*next, ec_stripe_of(r, u)); st < stop && !rc; st++) {
		before = es.repaired;
		rc = scrub_stripe(r, &es, st, bufs, &doubt);
		*fixed += es.repaired != before;
		if (!rc && doubt)
			g_message("STRIPE %" G_GUINT64_FORMAT " MAY BE TORN: the last client "
				  "was writing it when it stopped, and with a data fragment down "
				  "its parity cannot be checked against the data (the RAID-5 write "
				  "hole): a block there that a torn write left fails its checksum "
				  "(EIO), never reads as other bytes",
				  (guint64)st);
	}
	*next = st;
	return rc;
}

int intent_load(struct remote *r)
{
	size_t k;
	int rc;

	if (!remote_redundant(r))
		return 0;
	pthread_mutex_lock(&r->intent_lock);
	rc = read_maps(r, r->intent_found);
	for (k = 0; k < INTENT_MAP_BYTES && !rc; k++)
		r->intent_map[k] |= r->intent_found[k];
	pthread_mutex_unlock(&r->intent_lock);
	return rc;
}

int intent_recover(struct remote *r, const struct remote_judge *j)
{
	struct remote_scrub s = { .judge = j, .repair = true, .report = NULL };
	uint64_t b, u, end, units = remote_units(r), rep = remote_rep_units(r), marked = 0;
	uint64_t next = 0;
	unsigned int fixed = 0;
	uint8_t **bufs;
	int rc = 0;

	if (!remote_redundant(r))
		return 0;
	bufs = scrub_room(r);
	for (b = 0; b < INTENT_MAP_BYTES * 8 && !rc; b++) {
		if (!bit(r->intent_found, b))
			continue;
		marked++;
		end = MIN(units, (b + 1) * r->intent_region);
		for (u = b * r->intent_region; u < MIN(end, rep) && !rc; u++)
			rc = scrub_unit(r, &s, u, bufs);
		if (!rc && end > MAX(u, rep))
			rc = recover_stripes(r, j, MAX(u, rep), end, &next, bufs, &fixed);
	}
	scrub_room_free(bufs);
	if (!rc && marked)
		g_message("the last client stopped with writes in flight: %" G_GUINT64_FORMAT
			  " regions compared, %u units had copies that differed, now rewritten",
			  (guint64)marked, s.repaired);
	if (!rc && marked && r->ec_k)
		g_message("%u stripes had parity that differed from their data, recomputed", fixed);
	if (!rc && marked) {
		/* the next sweep clears the marks on the members unless written again */
		pthread_mutex_lock(&r->intent_lock);
		memset(r->intent_found, 0, INTENT_MAP_BYTES);
		pthread_mutex_unlock(&r->intent_lock);
	}
	return rc;
}
