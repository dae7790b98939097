// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * remote_state.c - the members' states in a set (remote_int.h): dropping a
 * member, the records that say so, the map of what it missed, the quorum,
 * and the failed state. Everything above it (the data path, the rebuild,
 * the write-intent map, scrub, opening the set) changes states through here.
 *
 * Which record is the truth. Every membership change (a set formed, a
 * member lost, a mount) raises the event count and writes the record to
 * every member that is up, in the slot of its parity and nowhere else, so
 * the other slot keeps the previous record if the write tears. At open, the
 * newest valid record among the members reached is the truth: a member it
 * marks lost is stale (it missed writes) and is never read, even if its own
 * older record says it is in sync. A loss is written before any write the
 * lost member missed completes (remote_wait_recorded), so a later mount
 * that reaches a majority always sees at least one record that knows.
 */
#define G_LOG_DOMAIN "rmemfs-remote"

#include "remote_int.h"

#include <errno.h>
#include <stdarg.h>
#include <string.h>

#include <glib.h>

#include "clock.h"

/*
 * Raise the event count and write the record to every member that is up or
 * being rebuilt (set_lock held). A member that is up and fails the write is
 * down too, and the next round records that. -EIO when no member took it.
 */
int remote_write_records(struct remote *r)
{
	struct layout_set *rec = g_malloc0(LAYOUT_SET_REC_SIZE);
	unsigned int i, written;
	bool again = true;
	int rc;

	while (again) {
		again = false;
		written = 0;
		r->info.events++;
		for (i = 0; i < r->n; i++)
			if (!atomic_load(&r->mem[i].up) &&
			    r->info.m[i].state == LAYOUT_MEMBER_IN_SYNC)
				r->info.m[i].state = LAYOUT_MEMBER_LOST;
		for (i = 0; i < r->n && !again; i++) {
			struct remote_member *rm = &r->mem[i];
			bool up = atomic_load(&rm->up);

			if (!up && atomic_load(&r->rb_member) != (int)i)
				continue;
			layout_set_pack(&r->info, i, rec);
			rc = member_write(rm->m, LAYOUT_SET_REC_OFF +
					  (r->info.events & 1) * LAYOUT_SET_REC_SIZE,
					  rec, LAYOUT_SET_REC_SIZE);
			if (rc < 0) {
				g_message("writing the member record to %s: %s", rm->name,
					  g_strerror(-rc));
			} else if (up) {
				written++;
				continue;
			}
			if (rc < 0 && up) {
				atomic_store(&rm->up, false);
				atomic_fetch_add(&r->unrecorded, 1);
				again = true;
			}
		}
	}
	g_free(rec);
	for (i = 0; i < r->n; i++) {
		if (!atomic_load(&r->mem[i].up) && !atomic_load(&r->mem[i].recorded)) {
			atomic_store(&r->mem[i].recorded, true);
			atomic_fetch_sub(&r->unrecorded, 1);
		}
	}
	return written ? 0 : -EIO;
}

/* a unit with no copy on a member that is up (set_lock held) */
static bool copies_lost(struct remote *r)
{
	struct place_copy c[PLACE_MAX_REPLICAS];
	uint64_t u;
	uint32_t k;

	for (u = 0; u < r->place.ncomb; u++) {
		bool any = false;

		place_unit(&r->place, u, c);
		for (k = 0; k < r->place.r; k++)
			any = any || atomic_load(&r->mem[c[k].member].up);
		if (!any)
			return true;
	}
	return false;
}

int remote_member_lost(struct remote *r, unsigned int i, const char *why)
{
	struct remote_member *rm = &r->mem[i];
	int rc = 0;

	if (!r->set) {
		remote_fail(r, "%s", why);
		return -EIO;
	}
	pthread_mutex_lock(&r->set_lock);
	if (atomic_load(&rm->up)) {
		if (r->claimed)
			remote_track_loss(r, i); /* before anyone can skip it */
		atomic_store(&rm->up, false);
		atomic_fetch_add(&r->unrecorded, 1);
		g_message("member %u (%s) is lost: %s; the others carry on without it", i, rm->name,
			  why);
	}
	if (copies_lost(r)) {
		pthread_mutex_unlock(&r->set_lock);
		remote_fail(r, "lost %s too: some units have no copy left", rm->name);
		return -EIO;
	}
	if (r->claimed && !atomic_load(&rm->recorded))
		rc = remote_write_records(r);
	pthread_mutex_unlock(&r->set_lock);
	if (rc < 0) {
		remote_fail(r, "no member took the membership record");
		return -EIO;
	}
	return 0;
}

void remote_wait_recorded(struct remote *r)
{
	if (!atomic_load(&r->unrecorded) || !r->claimed)
		return;
	pthread_mutex_lock(&r->set_lock);
	pthread_mutex_unlock(&r->set_lock);
}

bool remote_member_gone(struct remote *r, unsigned int i, int rc)
{
	struct member *m = r->mem[i].m;

	if (member_fenced(m)) {
		remote_fail(r, "LEASE LOST: %s fenced this client off its pool", r->mem[i].name);
		return false;
	}
	if (rc == -EHOSTDOWN || (rc == -EIO && member_failed(m))) {
		remote_member_lost(r, i, rc == -EHOSTDOWN ? "it stopped answering" :
							  "its pool is lost");
		return !atomic_load(&r->failed);
	}
	return false;
}

unsigned int remote_quorum_up(struct remote *r)
{
	unsigned int i, up = 0;

	for (i = 0; i < r->n; i++)
		up += atomic_load(&r->mem[i].up);
	return up;
}

void remote_fail(struct remote *r, const char *fmt, ...)
{
	va_list ap;
	char *why;

	va_start(ap, fmt);
	why = g_strdup_vprintf(fmt, ap);
	va_end(ap);
	if (!r->set) {
		member_fail(r->mem[0].m, "%s", why);
		g_free(why);
		return;
	}
	member_fail_once(&r->set_lock, &r->failure, &r->failed, why);
}

bool remote_failed(const struct remote *r)
{
	if (!r->set)
		return member_failed(r->mem[0].m);
	return atomic_load(&((struct remote *)r)->failed);
}

void remote_track_loss(struct remote *r, unsigned int i)
{
	uint64_t words = (remote_units(r) + 63) / 64;

	r->lost_ns[i] = clock_now_ns();
	if (!atomic_load(&r->dirty[i]))
		atomic_store(&r->dirty[i], g_new0(uint64_t, words));
}

void remote_note_write(struct remote *r, uint32_t m, uint64_t u)
{
	uint64_t *map = atomic_load(&r->dirty[m]);

	if (map)
		__atomic_fetch_or(&map[u / 64], 1ULL << (u % 64), __ATOMIC_SEQ_CST);
}
