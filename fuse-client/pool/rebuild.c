// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * rebuild.c - bringing a member back into the set (remote_int.h): a blank
 * replacement, a stale member found at mount, or a member that this mount
 * lost and that answers again. All of it runs on one keeper thread.
 *
 * Units are copied in order. Each copy reads the unit from a member that is
 * up and holds it (another copy if that one fails) and writes it to the
 * same unit's slot on the member being rebuilt, under rb_lock held for
 * writing, then moves the cursor past it; from then on every write of that
 * unit goes to the rebuilt member too (remote_io.c), so a unit once copied
 * stays current. Between units the thread sleeps as long as the copy took,
 * so the filesystem keeps at least half of the members' time. The progress
 * goes into the records every second: a rebuild cut short by an unmount or
 * a crash goes on from there at the next mount. Last, block 0 (superblock,
 * checkpoint generation; not the lease words) is copied and the member is
 * let in, still under rb_lock, and the records say it is in sync.
 *
 * On an erasure-coded set the stripes follow the replicated zone: the
 * member's fragment of each is decoded from k others that are up (every
 * survivor reads an equal share: place_stripe_sources) and written to its
 * slot, under rb_lock held for writing, which keeps every writer out of the
 * stripes. The cursor stays in units: past stripe s it is the first unit of
 * stripe s + 1, the unit rebuild_takes and the dirty maps use for s.
 *
 * Resync: from the moment this mount loses a member it notes every unit
 * written without it (the dirty map, in RAM: writes it skipped, and the
 * shares that failed on it). If the member answers again within
 * reconnect_timeout with the same pool, only those units are copied -
 * writes during the resync to units past the cursor mark them too. This
 * trusts the member to have kept every write it acknowledged: true across a
 * network outage and across a restart of its memserver over a backing file
 * (the memserver's writes reach the file's page cache), not across a crash
 * of its host; a member back later than reconnect_timeout, or found stale
 * by another mount (no map), is rebuilt whole.
 */
#define G_LOG_DOMAIN "rmemfs-remote"

#include "remote_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <glib.h>

#include "clock.h"
#include "ec_codec.h"
#include "net.h"

#define REBUILD_RECORD_MS 1000
#define KEEPER_POLL_MS 1000
#define INTENT_SWEEP_MS 5000 /* a region not written this long is clean again */

/* read unit u (unit bytes) from a member that is up and holds it, from copy *k on; 0 or -EIO */
static int read_unit(struct remote *r, unsigned int target, uint64_t u, uint8_t *buf,
		     uint32_t *k)
{
	struct place_copy c[PLACE_MAX_REPLICAS];
	int rc = -EIO;

	place_unit(&r->place, u, c);
	for (; *k < r->place.r; (*k)++) {
		uint32_t m = c[*k].member;

		if (m == target || !atomic_load(&r->mem[m].up))
			continue;
		rc = member_read(r->mem[m].m, remote_slot_off(r, c[*k].slot), buf, r->unit);
		if (rc == 0 || !remote_member_gone(r, m, rc))
			return rc;
	}
	return rc < 0 ? rc : -EIO;
}

/*
 * Blocks of unit u (in buf) that fail their checksum (r->judge) taken from
 * the next copy up where they pass: a copy that fails is not spread while
 * one that passes is left (three copies). The first copy read was k.
 */
static void judge_unit(struct remote *r, unsigned int target, uint64_t u, uint8_t *buf,
		       uint32_t k, uint8_t *other)
{
	const struct remote_judge *j = &r->judge;
	uint64_t b;
	bool read = false;

	for (b = 0; j->block && b < r->unit; b += LAYOUT_BLOCK) {
		if (j->block(j->ctx, u * r->unit + b, buf + b) != 0)
			continue;
		while (!read) {
			k++;
			if (read_unit(r, target, u, other, &k) < 0)
				return;
			read = true;
		}
		if (j->block(j->ctx, u * r->unit + b, other + b) == 1)
			memcpy(buf + b, other + b, LAYOUT_BLOCK);
	}
}

/* copy unit u to member i's slot (rb_lock held for writing); other: a unit of room */
static int copy_unit(struct remote *r, unsigned int i, uint64_t u, uint64_t slot, uint8_t *buf,
		     uint8_t *other)
{
	uint32_t k = 0;
	int rc = read_unit(r, i, u, buf, &k);

	if (rc < 0)
		return rc;
	judge_unit(r, i, u, buf, k, other);
	return member_write(r->mem[i].m, remote_slot_off(r, slot), buf, r->unit);
}

/* block 0 but the lease words, from a member that is up, to member i */
static int copy_block0(struct remote *r, unsigned int i, uint8_t *buf)
{
	unsigned int m;
	uint64_t gen;
	int rc = -EIO;

	for (m = 0; m < r->n; m++) {
		if (!atomic_load(&r->mem[m].up))
			continue;
		rc = member_read(r->mem[m].m, 0, buf, LAYOUT_SB_SIZE);
		if (!rc)
			rc = member_fetch_add(r->mem[m].m, LAYOUT_SB_CKPT_GEN, 0, &gen);
		if (!rc || !remote_member_gone(r, m, rc))
			break;
	}
	if (rc < 0)
		return rc;
	rc = member_write(r->mem[i].m, 0, buf, LAYOUT_SB_CKPT_GEN);
	if (!rc)
		rc = member_write(r->mem[i].m, LAYOUT_SB_CLEAN, buf + LAYOUT_SB_CLEAN,
				  LAYOUT_SB_LEASE_OWNER - LAYOUT_SB_CLEAN);
	/* (not the reader slots: their owner words are atomics only, and readers keep them) */
	if (!rc)
		rc = member_write(r->mem[i].m, LAYOUT_SB_LEASE_END, buf + LAYOUT_SB_LEASE_END,
				  LAYOUT_SB_READERS_OFF - LAYOUT_SB_LEASE_END);
	if (!rc) {
		uint64_t old;

		/* the word is only ever touched with atomics (layout.h) */
		rc = member_fetch_add(r->mem[i].m, LAYOUT_SB_CKPT_GEN, 0, &old);
		if (!rc && old != gen)
			rc = member_cas(r->mem[i].m, LAYOUT_SB_CKPT_GEN, old, gen, NULL);
	}
	return rc;
}

/* the member is whole: let it in (rb_lock held for writing) */
static int finish(struct remote *r, unsigned int i, uint8_t *buf)
{
	int rc = copy_block0(r, i, buf);

	if (rc < 0)
		return rc;
	pthread_mutex_lock(&r->set_lock);
	g_free(atomic_exchange(&r->dirty[i], NULL));
	r->info.m[i].state = LAYOUT_MEMBER_IN_SYNC;
	r->info.m[i].rebuilt = 0;
	atomic_store(&r->mem[i].up, true);
	atomic_store(&r->mem[i].recorded, false);
	atomic_store(&r->rb_member, -1);
	rc = remote_write_records(r);
	pthread_mutex_unlock(&r->set_lock);
	g_message("member %u (%s) is in sync again", i, r->mem[i].name);
	return rc;
}

/* the rebuild failed: the member stays out (the record keeps it rebuilding, from its cursor) */
static void give_up(struct remote *r, unsigned int i, int rc)
{
	g_message("rebuilding member %u (%s) stopped: %s", i, r->mem[i].name, g_strerror(-rc));
	pthread_mutex_lock(&r->set_lock);
	atomic_store(&r->rb_member, -1);
	pthread_mutex_unlock(&r->set_lock);
}

static void record_progress(struct remote *r, unsigned int i, uint64_t cursor)
{
	pthread_mutex_lock(&r->set_lock);
	r->info.m[i].rebuilt = cursor;
	remote_write_records(r);
	pthread_mutex_unlock(&r->set_lock);
}

static bool dirty_bit(struct remote *r, unsigned int i, uint64_t u)
{
	uint64_t *map = atomic_load(&r->dirty[i]);

	return !map || (__atomic_load_n(&map[u / 64], __ATOMIC_SEQ_CST) >> (u % 64)) & 1;
}

/* member i's fragment of stripe s, or -1 */
static int frag_on(const struct remote *r, uint64_t s, unsigned int i)
{
	struct place_copy f[EC_MAX_FRAGS];
	unsigned int j;

	place_stripe(r->stripes, s, f);
	for (j = 0; j < r->ec_k + r->ec_m; j++)
		if (f[j].member == i)
			return (int)j;
	return -1;
}

/* the first stripe the cursor has not passed (0 on a replicated set) */
static uint64_t stripe_from(const struct remote *r, uint64_t cursor)
{
	uint64_t rep = remote_rep_units(r);

	return r->ec_k && cursor > rep ? (cursor - rep + r->ec_k - 1) / r->ec_k : 0;
}

/*
 * Decode member i's fragment f of stripe s from k fragments that are up
 * (place_stripe_sources: every survivor reads its share) and write it to
 * its slot (rb_lock held for writing: no writer is in the stripe). A source
 * that fails is dropped and others are picked; fewer than k: -EIO.
 */
static int rebuild_frag(struct remote *r, unsigned int i, uint64_t s, uint32_t f,
			uint8_t *const col[])
{
	unsigned int round;
	uint32_t src, got, m;
	uint64_t moff;
	int rc;

	for (round = 0;; round++) {
		src = place_stripe_sources(r->stripes, s, f, r->ec_k, ec_frags_up(r, s));
		if (!src || round > r->ec_m)
			return -EIO;
		rc = ec_frags_read(r, s, src, 0, (uint32_t)r->unit, col, &got);
		if (rc < 0)
			return rc;
		if (got == src)
			break;
	}
	rc = ec_codec_decode(r->codec, r->unit, col, got, 1U << f);
	if (rc < 0)
		return rc;
	ec_frag(r, s, f, &m, &moff);
	return member_write(r->mem[i].m, moff, col[f], r->unit);
}

/* one rebuild's state between its steps */
struct rebuild_pass {
	unsigned int i; /* the member */
	bool resync;
	uint64_t last; /* when the progress was recorded last (ms) */
	/* a unit each: col[0] for a copy (col[1] another), a stripe's fragments */
	uint8_t *col[EC_MAX_FRAGS];
};

/*
 * One step, under rb_lock held for writing: unit u's copy into member
 * pb->i's slot (frag < 0), or its fragment frag of the stripe starting at
 * unit u. Then the cursor moves to next, the progress is recorded once a
 * second, and the thread rests as long as the step took.
 */
static int rebuild_step(struct remote *r, struct rebuild_pass *pb, uint64_t u, uint64_t next,
			uint64_t slot, int frag)
{
	uint64_t t0 = clock_now_us();
	int rc = 0;

	pthread_rwlock_wrlock(&r->rb_lock);
	if (!pb->resync || dirty_bit(r, pb->i, u)) {
		rc = frag < 0 ? copy_unit(r, pb->i, u, slot, pb->col[0], pb->col[1]) :
				rebuild_frag(r, pb->i, ec_stripe_of(r, u), (uint32_t)frag, pb->col);
		if (++r->rb_done_units > r->rb_total_units)
			r->rb_total_units = r->rb_done_units; /* written meanwhile */
	}
	if (!rc)
		atomic_store(&r->rb_cursor, next);
	pthread_rwlock_unlock(&r->rb_lock);
	if (!rc && clock_now_ms() - pb->last >= REBUILD_RECORD_MS) {
		record_progress(r, pb->i, next);
		pb->last = clock_now_ms();
	}
	/* throttle: as long idle as busy */
	if (!rc && worker_wait(&r->keeper, (int)((clock_now_us() - t0) / 1000)) < 0)
		rc = -ECANCELED;
	return rc;
}

/*
 * Rebuild member r->rb_member: the replicated zone unit by unit, then the
 * stripes (cursor past stripe s: its next stripe's first unit); 0,
 * -ECANCELED (stopping) or why it failed.
 */
static int rebuild_run(struct remote *r)
{
	struct rebuild_pass pb = { .i = (unsigned int)atomic_load(&r->rb_member),
				   .resync = atomic_load(&r->rb_resync), .last = clock_now_ms() };
	uint64_t u, s, slot, cursor = atomic_load(&r->rb_cursor), rep = remote_rep_units(r);
	unsigned int j, cols = MAX(r->ec_k + r->ec_m, 2U);
	uint8_t *buf = g_malloc(r->unit * cols);
	int f, rc = 0;

	for (j = 0; j < cols; j++)
		pb.col[j] = buf + j * r->unit;
	for (u = cursor; u < rep && !rc; u++)
		if (place_unit_on(&r->place, u, pb.i, &slot))
			rc = rebuild_step(r, &pb, u, u + 1, slot, -1);
	for (s = stripe_from(r, cursor); s < ec_stripes(r) && !rc; s++) {
		u = ec_stripe_unit(r, s);
		f = frag_on(r, s, pb.i);
		if (f >= 0)
			rc = rebuild_step(r, &pb, u, ec_stripe_unit(r, s + 1), 0, f);
	}
	if (!rc) {
		atomic_store(&r->rb_cursor, remote_units(r));
		pthread_rwlock_wrlock(&r->rb_lock);
		rc = finish(r, pb.i, buf);
		pthread_rwlock_unlock(&r->rb_lock);
	}
	if (rc == -ECANCELED && !pb.resync)
		record_progress(r, pb.i, atomic_load(&r->rb_cursor));
	if (rc < 0)
		give_up(r, pb.i, rc);
	g_free(buf);
	return rc;
}

/*
 * Connect to lost member i at its recorded address (this mount never
 * reached it): 0 when it serves the member's pool (then r->mem[i].m is it).
 */
static int reconnect(struct remote *r, unsigned int i)
{
	struct member *m;
	char *host, *pool;
	uint16_t port;
	int rc;

	if (net_parse_server_pool(r->info.m[i].addr, &host, &port, &pool, NULL) < 0)
		return -EINVAL;
	r->mcfg.params.host = host;
	r->mcfg.params.port = port;
	r->mcfg.params.pool = pool;
	r->mcfg.params.pool_create_size = 0; /* its pool, or none: never a new one */
	r->mcfg.params.client_id = r->client_id;
	r->mcfg.params.quiet = true;
	rc = member_open(&r->mcfg, &m);
	r->mcfg.params.host = NULL;
	r->mcfg.params.pool = NULL;
	g_free(host);
	g_free(pool);
	if (rc < 0)
		return rc;
	if (member_pool_id(m) != r->info.m[i].pool_id) {
		member_close(m);
		return -ESTALE;
	}
	member_set_nowait(m, remote_redundant(r));
	pthread_mutex_lock(&r->set_lock);
	remote_arena_join(r, m, r->info.m[i].addr);
	r->mem[i].m = m;
	g_strlcpy(r->mem[i].name, r->info.m[i].addr, sizeof(r->mem[i].name));
	pthread_mutex_unlock(&r->set_lock);
	return 0;
}

/*
 * Is lost member i answering again with its pool? A member that was never
 * reached is opened at its recorded address (a blank or foreign server
 * there is left alone: rmemfs-ctl replace is for that).
 */
static bool member_back(struct remote *r, unsigned int i)
{
	struct member *m = r->mem[i].m;
	uint64_t v;

	if (m)
		return !member_failed(m) && member_fetch_add_unfenced(m, 0, 0, &v) == 0;
	if (reconnect(r, i) < 0)
		return false;
	return true;
}

/* start bringing back the first lost member that answers (keeper thread) */
static void look_for_returns(struct remote *r)
{
	unsigned int i;
	bool resync;

	for (i = 0; i < r->n; i++) {
		if (atomic_load(&r->mem[i].up) || r->info.m[i].state == LAYOUT_MEMBER_REBUILDING ||
		    !member_back(r, i))
			continue;
		resync = atomic_load(&r->dirty[i]) &&
			 (r->reconnect_ms < 0 ||
			  clock_now_ns() - r->lost_ns[i] <= (uint64_t)r->reconnect_ms * 1000000ULL);
		pthread_mutex_lock(&r->set_lock);
		g_message("member %u (%s) answers again: %s", i, r->mem[i].name,
			  resync ? "resyncing the units written without it" :
				   "rebuilding it whole (away too long, or lost before this mount)");
		r->info.m[i].state = LAYOUT_MEMBER_REBUILDING;
		r->info.m[i].rebuilt = 0;
		if (rebuild_start(r, i, 0, resync) == 0)
			remote_write_records(r);
		pthread_mutex_unlock(&r->set_lock);
		return;
	}
}

static void *keeper_main(void *arg)
{
	struct remote *r = arg;
	uint64_t swept = clock_now_ms();

	while (worker_wait(&r->keeper, KEEPER_POLL_MS) == 0) {
		if (atomic_load(&r->failed))
			continue;
		if (clock_now_ms() - swept >= INTENT_SWEEP_MS) {
			if (intent_sweep(r, false) < 0)
				g_debug("write-intent sweep failed");
			swept = clock_now_ms();
		}
		if (atomic_load(&r->rb_member) >= 0) {
			if (rebuild_run(r) == -ECANCELED)
				break;
			continue;
		}
		look_for_returns(r);
	}
	return NULL;
}

int rebuild_keeper_start(struct remote *r)
{
	return worker_start(&r->keeper, "keeper", keeper_main, r);
}

/* a unit (or stripe, from unit u) the rebuild of member i from unit from on has to do */
static void count_todo(struct remote *r, unsigned int i, uint64_t u, uint64_t from)
{
	if (dirty_bit(r, i, u)) {
		r->rb_total_units++;
		r->rb_done_units += u < from;
	}
}

int rebuild_start(struct remote *r, unsigned int i, uint64_t from, bool resync)
{
	uint64_t u, s, slot, rep = remote_rep_units(r);

	if (atomic_load(&r->rb_member) >= 0)
		return -EBUSY;
	if (!resync)
		g_free(atomic_exchange(&r->dirty[i], NULL));
	r->rb_done_units = r->rb_total_units = 0;
	for (u = 0; u < rep; u++)
		if (place_unit_on(&r->place, u, i, &slot))
			count_todo(r, i, u, from);
	for (s = 0; s < ec_stripes(r); s++)
		if (frag_on(r, s, i) >= 0)
			count_todo(r, i, ec_stripe_unit(r, s), from);
	atomic_store(&r->rb_resync, resync);
	atomic_store(&r->rb_cursor, from);
	atomic_store(&r->rb_member, (int)i);
	worker_kick(&r->keeper);
	g_message("%s member %u (%s): %u units%s", resync ? "resyncing" : "rebuilding", i,
		  r->mem[i].name, r->rb_total_units, from ? ", going on where it stopped" : "");
	return 0;
}

void rebuild_stop(struct remote *r)
{
	worker_stop(&r->keeper);
}
