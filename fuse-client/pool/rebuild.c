// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * rebuild.c - filling a member that holds nothing trustworthy (a blank
 * replacement, or a member that came back stale) from the others
 * (remote_int.h).
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
 */
#define G_LOG_DOMAIN "rmemfs-remote"

#include "remote_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <glib.h>

#include "clock.h"

#define REBUILD_RECORD_MS 1000

/* read unit u (unit bytes) from a member that is up and holds it; 0 or -EIO */
static int read_unit(struct remote *r, unsigned int target, uint64_t u, uint8_t *buf)
{
	struct place_copy c[PLACE_MAX_REPLICAS];
	uint32_t k;
	int rc = -EIO;

	place_unit(&r->place, u, c);
	for (k = 0; k < r->place.r; k++) {
		uint32_t m = c[k].member;

		if (m == target || !atomic_load(&r->mem[m].up))
			continue;
		rc = member_read(r->mem[m].m, LAYOUT_SET_DATA_OFF + c[k].slot * r->unit, buf,
				 r->unit);
		if (rc == 0 || !remote_member_gone(r, m, rc))
			return rc;
	}
	return rc < 0 ? rc : -EIO;
}

/* copy unit u to member i's slot (rb_lock held for writing) */
static int copy_unit(struct remote *r, unsigned int i, uint64_t u, uint64_t slot, uint8_t *buf)
{
	int rc = read_unit(r, i, u, buf);

	if (rc < 0)
		return rc;
	return member_write(r->mem[i].m, LAYOUT_SET_DATA_OFF + slot * r->unit, buf, r->unit);
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
	if (!rc)
		rc = member_write(r->mem[i].m, LAYOUT_SB_LEASE_END, buf + LAYOUT_SB_LEASE_END,
				  LAYOUT_SB_SIZE - LAYOUT_SB_LEASE_END);
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
	r->info.m[i].state = LAYOUT_MEMBER_IN_SYNC;
	r->info.m[i].rebuilt = 0;
	atomic_store(&r->mem[i].up, true);
	atomic_store(&r->mem[i].recorded, false);
	atomic_store(&r->rb_member, -1);
	rc = remote_write_records(r);
	pthread_mutex_unlock(&r->set_lock);
	g_message("member %u (%s) is rebuilt and in sync", i, r->mem[i].name);
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

static void *rebuild_main(void *arg)
{
	struct remote *r = arg;
	unsigned int i = (unsigned int)atomic_load(&r->rb_member);
	uint64_t u, slot, total = place_units(&r->place), t0, last = clock_now_ms();
	uint8_t *buf = g_malloc(r->unit);
	int rc = 0;

	for (u = atomic_load(&r->rb_cursor); u < total && !rc; u++) {
		if (!place_unit_on(&r->place, u, i, &slot))
			continue;
		t0 = clock_now_us();
		pthread_rwlock_wrlock(&r->rb_lock);
		rc = copy_unit(r, i, u, slot, buf);
		if (!rc)
			atomic_store(&r->rb_cursor, u + 1);
		pthread_rwlock_unlock(&r->rb_lock);
		r->rb_done_units++;
		if (!rc && clock_now_ms() - last >= REBUILD_RECORD_MS) {
			record_progress(r, i, u + 1);
			last = clock_now_ms();
		}
		/* throttle: as long idle as busy */
		if (!rc && worker_wait(&r->rb_worker, (int)((clock_now_us() - t0) / 1000)) < 0)
			rc = -ECANCELED;
	}
	if (!rc) {
		atomic_store(&r->rb_cursor, total);
		pthread_rwlock_wrlock(&r->rb_lock);
		rc = finish(r, i, buf);
		pthread_rwlock_unlock(&r->rb_lock);
	}
	if (rc == -ECANCELED)
		record_progress(r, i, atomic_load(&r->rb_cursor));
	if (rc < 0)
		give_up(r, i, rc);
	g_free(buf);
	return NULL;
}

int rebuild_start(struct remote *r, unsigned int i, uint64_t from)
{
	uint64_t u, slot, total = place_units(&r->place);
	int rc;

	if (atomic_load(&r->rb_member) >= 0)
		return -EBUSY;
	r->rb_done_units = r->rb_total_units = 0;
	for (u = 0; u < total; u++) {
		if (place_unit_on(&r->place, u, i, &slot)) {
			r->rb_total_units++;
			r->rb_done_units += u < from;
		}
	}
	atomic_store(&r->rb_cursor, from);
	atomic_store(&r->rb_member, (int)i);
	worker_stop(&r->rb_worker); /* a finished one's thread */
	rc = worker_start(&r->rb_worker, "rebuild", rebuild_main, r);
	if (rc < 0) {
		atomic_store(&r->rb_member, -1);
		return rc;
	}
	g_message("rebuilding member %u (%s): %u units%s", i, r->mem[i].name, r->rb_total_units,
		  from ? ", going on where it stopped" : "");
	return 0;
}

void rebuild_stop(struct remote *r)
{
	worker_stop(&r->rb_worker);
}
