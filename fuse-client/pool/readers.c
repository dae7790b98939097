// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * readers.c - the reader slots (readers.h).
 *
 * A slot's owner word is taken by the reader with CAS(owner, 0, id) and is
 * only ever touched by atomics (a NIC may keep atomic words in its own byte
 * order), like the lease word; id is the reader's client id, which every
 * connection of it presents, so the memserver can FENCE it. The reader
 * writes the rest - its record: id, beat, applied seq, gen, lag, host,
 * CRC-32C - with plain WRITEs to every member that is up, and the writer
 * reads all 32 records of a member with one READ.
 *
 * Order: a reader writes its record (applied 0) before it reads any
 * metadata, so a writer's scan either sees it, or started before the
 * reader loaded and then everything durable at the scan is in what the
 * reader loads (hold.c).
 *
 * Expiry: the writer expires a reader whose beat has not changed for the
 * timeout on the writer's clock: CAS(owner, id, 0), FENCE(id) (its
 * connections are cut and refused), record zeroed; only then does it stop
 * holding space for it. The reader trusts a data READ that completed
 * before its read deadline - the issue time of its last confirmed beat
 * plus half the timeout: the writer saw that beat no earlier than it was
 * issued, so cannot have expired it yet - and otherwise asks the owner word
 * (CAS(id, id)) after the READ: still ours means not expired, so nothing
 * it mapped was reused before its bytes arrived.
 *
 * A slot claimed but never given a record (a reader that died between the
 * two) is found by reading the owner words of empty slots every
 * READERS_CLAIM_CHECK scans, and expired like a silent reader.
 *
 * Test knob: RMEM_TEST_READERS_TIMEOUT_MS=N in the environment (of the
 * writer and of its readers alike) shortens the timeout, for tests only.
 */
#define G_LOG_DOMAIN "rmemfs-readers"

#include <endian.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include <glib.h>

#include "readers.h"

#include "clock.h"
#include "remote.h"

#define READERS_AREA (LAYOUT_READER_SLOTS * LAYOUT_READER_SLOT_SIZE)
#define READERS_CLAIM_CHECK 10

/* the record of a slot, decoded */
struct rec {
	uint64_t id, beat, applied, gen, lag_ms;
	char host[LAYOUT_READER_HOST_LEN + 1];
};

/* what the writer knows of a slot between scans */
struct seen {
	struct rec rec;
	uint64_t changed_ns; /* when its beat last changed (or the claim was first seen) */
	uint64_t claimed; /* an owner word without a record: the id in it */
	bool live;
};

struct readers {
	struct remote *r;
	uint64_t id;
	unsigned int timeout_ms;
	pthread_mutex_t lock;
	/* a reader */
	int slot; /* -1: none */
	struct rec me;
	_Atomic uint64_t deadline_ns;
	_Atomic bool expired;
	/* the writer */
	struct seen seen[LAYOUT_READER_SLOTS];
	unsigned int scans;
};

static uint64_t owner_off(unsigned int k)
{
	return LAYOUT_SB_READERS_OFF + (uint64_t)k * LAYOUT_READER_SLOT_SIZE;
}

static uint64_t rec_off(unsigned int k)
{
	return owner_off(k) + LAYOUT_READER_REC_OFF;
}

static void rec_pack(const struct rec *r, uint8_t *b)
{
	uint64_t w[5] = { htole64(r->id), htole64(r->beat), htole64(r->applied),
			  htole64(r->gen), htole64(r->lag_ms) };
	uint32_t crc;

	memset(b, 0, LAYOUT_READER_REC_SIZE);
	memcpy(b, w, sizeof(w));
	memcpy(b + 48, r->host, strnlen(r->host, LAYOUT_READER_HOST_LEN));
	crc = htole32(layout_crc(b, LAYOUT_READER_REC_SIZE));
	memcpy(b + 40, &crc, 4);
}

/* 1: a record; 0: an empty slot; -1: bytes that are neither (torn, damaged) */
static int rec_unpack(const uint8_t *b, struct rec *r)
{
	uint8_t copy[LAYOUT_READER_REC_SIZE];
	uint64_t w[5];
	uint32_t crc;
	size_t i;

	for (i = 0; i < LAYOUT_READER_REC_SIZE && !b[i]; i++)
		;
	if (i == LAYOUT_READER_REC_SIZE)
		return 0;
	memcpy(copy, b, sizeof(copy));
	memcpy(&crc, copy + 40, 4);
	memset(copy + 40, 0, 4);
	if (layout_crc(copy, sizeof(copy)) != le32toh(crc))
		return -1;
	memcpy(w, b, sizeof(w));
	r->id = le64toh(w[0]);
	r->beat = le64toh(w[1]);
	r->applied = le64toh(w[2]);
	r->gen = le64toh(w[3]);
	r->lag_ms = le64toh(w[4]);
	memcpy(r->host, b + 48, LAYOUT_READER_HOST_LEN);
	r->host[LAYOUT_READER_HOST_LEN] = 0;
	for (i = 0; r->host[i]; i++)
		if (!g_ascii_isprint(r->host[i]))
			r->host[i] = '?';
	return r->id ? 1 : -1;
}

struct readers *readers_new(struct remote *r)
{
	struct readers *rd = g_new0(struct readers, 1);
	const char *knob = g_getenv("RMEM_TEST_READERS_TIMEOUT_MS");

	rd->r = r;
	rd->id = remote_client_id(r);
	rd->slot = -1;
	rd->timeout_ms = READERS_TIMEOUT_MS;
	if (knob && atoi(knob) > 0) {
		rd->timeout_ms = (unsigned int)atoi(knob);
		g_message("RMEM_TEST_READERS_TIMEOUT_MS=%u: readers expire after %u ms (test knob)",
			  rd->timeout_ms, rd->timeout_ms);
	}
	pthread_mutex_init(&rd->lock, NULL);
	return rd;
}

void readers_destroy(struct readers *rd)
{
	if (!rd)
		return;
	pthread_mutex_destroy(&rd->lock);
	g_free(rd);
}

unsigned int readers_timeout_ms(const struct readers *rd)
{
	return rd->timeout_ms;
}

/* a member that went away meanwhile does not count, in a set */
static bool gone(struct readers *rd, int rc)
{
	return rc == -EHOSTDOWN && remote_is_set(rd->r);
}

/* ---- a reader ---- */

/* CAS(owner_k, from, to) on every member up; 0, -EBUSY (someone else's) or -errno */
static int claim_all(struct readers *rd, unsigned int k, uint64_t from, uint64_t to,
		     unsigned int *done)
{
	unsigned int i;
	uint64_t old;
	int rc;

	for (i = 0; i < remote_nmembers(rd->r); i++) {
		if (!remote_member_up(rd->r, i))
			continue;
		rc = remote_member_cas(rd->r, i, owner_off(k), from, to, &old);
		if (rc < 0 && gone(rd, rc))
			continue;
		if (rc < 0)
			return rc;
		if (old != from && old != to)
			return -EBUSY;
		*done = i + 1;
	}
	return 0;
}

static void unclaim(struct readers *rd, unsigned int k, unsigned int upto)
{
	unsigned int i;

	for (i = 0; i < upto; i++)
		if (remote_member_up(rd->r, i))
			remote_member_cas(rd->r, i, owner_off(k), rd->id, 0, NULL);
}

/* write our record to every member up */
static int write_rec(struct readers *rd)
{
	uint8_t b[LAYOUT_READER_REC_SIZE];
	unsigned int i, ok = 0;
	int rc = 0;

	rec_pack(&rd->me, b);
	for (i = 0; i < remote_nmembers(rd->r); i++) {
		if (!remote_member_up(rd->r, i))
			continue;
		rc = remote_member_write(rd->r, i, rec_off((unsigned int)rd->slot), b, sizeof(b));
		if (rc < 0 && !gone(rd, rc))
			return rc;
		ok += rc == 0;
	}
	return ok ? 0 : -EHOSTDOWN;
}

static void push_deadline(struct readers *rd, uint64_t from_ns)
{
	atomic_store(&rd->deadline_ns, from_ns + (uint64_t)rd->timeout_ms * 500000ULL);
}

/* the hosts holding the slots, for the message of a full table */
static char *holders(struct readers *rd)
{
	uint8_t *b = g_malloc(READERS_AREA);
	GString *s = g_string_new(NULL);
	struct rec r;
	unsigned int k;

	if (remote_member_read(rd->r, 0, LAYOUT_SB_READERS_OFF, b, READERS_AREA) == 0)
		for (k = 0; k < LAYOUT_READER_SLOTS; k++)
			if (rec_unpack(b + k * LAYOUT_READER_SLOT_SIZE + LAYOUT_READER_REC_OFF,
				       &r) > 0)
				g_string_append_printf(s, "%s%s", s->len ? ", " : "", r.host);
	g_free(b);
	return g_string_free(s, FALSE);
}

int readers_join(struct readers *rd, const char *host, char **err_msg)
{
	unsigned int k, done;
	uint64_t t0;
	char *who;
	int rc;

	g_strlcpy(rd->me.host, host ? host : "", sizeof(rd->me.host));
	rd->me.id = rd->id;
	rd->me.applied = rd->me.gen = rd->me.lag_ms = 0;
	rd->me.beat++;
	atomic_store(&rd->expired, false);
	for (k = 0; k < LAYOUT_READER_SLOTS; k++) {
		done = 0;
		rc = claim_all(rd, k, 0, rd->id, &done);
		if (rc == -EBUSY) {
			unclaim(rd, k, done);
			continue;
		}
		if (rc < 0) {
			unclaim(rd, k, done);
			if (err_msg)
				*err_msg = g_strdup_printf("taking a reader slot: %s",
							   g_strerror(-rc));
			return rc;
		}
		rd->slot = (int)k;
		t0 = clock_now_ns();
		rc = write_rec(rd);
		if (rc < 0) {
			unclaim(rd, k, remote_nmembers(rd->r));
			rd->slot = -1;
			if (err_msg)
				*err_msg = g_strdup_printf("writing the reader slot: %s",
							   g_strerror(-rc));
			return rc;
		}
		push_deadline(rd, t0);
		return 0;
	}
	who = holders(rd);
	if (err_msg)
		*err_msg = g_strdup_printf("all %u reader slots of the pool are taken (readers: "
					   "%s); unmount one", LAYOUT_READER_SLOTS, who);
	g_free(who);
	return -ENOSPC;
}

/* is the slot still ours on every member up? 0, -ESTALE, or -errno (rd->lock held) */
static int confirm(struct readers *rd)
{
	unsigned int done = 0;
	int rc;

	if (atomic_load(&rd->expired))
		return -ESTALE;
	rc = claim_all(rd, (unsigned int)rd->slot, rd->id, rd->id, &done);
	if (rc == -EBUSY) {
		atomic_store(&rd->expired, true);
		return -ESTALE;
	}
	return rc;
}

int readers_beat(struct readers *rd, uint64_t applied, uint64_t gen, uint64_t lag_ms)
{
	uint64_t t0 = clock_now_ns();
	int rc;

	if (rd->slot < 0)
		return -EINVAL;
	pthread_mutex_lock(&rd->lock);
	rd->me.beat++;
	rd->me.applied = applied;
	rd->me.gen = gen;
	rd->me.lag_ms = lag_ms;
	rc = atomic_load(&rd->expired) ? -ESTALE : write_rec(rd);
	if (!rc)
		rc = confirm(rd);
	if (rc < 0 && rc != -ESTALE && remote_failed(rd->r)) {
		/* fenced (the memserver refuses us: LEASE LOST), or the pool is lost for good */
		atomic_store(&rd->expired, true);
		rc = -ESTALE;
	}
	if (!rc)
		push_deadline(rd, t0);
	pthread_mutex_unlock(&rd->lock);
	return rc;
}

int readers_read_ok(struct readers *rd)
{
	uint64_t t0 = clock_now_ns();
	int rc;

	if (atomic_load(&rd->expired))
		return -ESTALE;
	if (t0 < atomic_load(&rd->deadline_ns))
		return 0;
	pthread_mutex_lock(&rd->lock);
	rc = confirm(rd);
	if (!rc)
		push_deadline(rd, t0);
	pthread_mutex_unlock(&rd->lock);
	return rc;
}

void readers_leave(struct readers *rd)
{
	uint8_t zero[LAYOUT_READER_REC_SIZE] = { 0 };
	unsigned int i;

	if (rd->slot < 0 || atomic_load(&rd->expired))
		return;
	for (i = 0; i < remote_nmembers(rd->r); i++) {
		if (!remote_member_up(rd->r, i))
			continue;
		remote_member_write(rd->r, i, rec_off((unsigned int)rd->slot), zero, sizeof(zero));
		remote_member_cas(rd->r, i, owner_off((unsigned int)rd->slot), rd->id, 0, NULL);
	}
	rd->slot = -1;
}

/* ---- the writer ---- */

/* the newest record of each slot over the members up (bad bytes: -1 in kind[k]) */
static int read_slots(struct readers *rd, struct rec *recs, int *kind)
{
	uint8_t *b = g_malloc(READERS_AREA);
	unsigned int i, k, ok = 0;
	struct rec r;
	int rc = 0, got;

	for (k = 0; k < LAYOUT_READER_SLOTS; k++)
		kind[k] = 0;
	for (i = 0; i < remote_nmembers(rd->r); i++) {
		if (!remote_member_up(rd->r, i))
			continue;
		rc = remote_member_read(rd->r, i, LAYOUT_SB_READERS_OFF, b, READERS_AREA);
		if (rc < 0 && gone(rd, rc))
			continue;
		if (rc < 0)
			break;
		ok++;
		for (k = 0; k < LAYOUT_READER_SLOTS; k++) {
			got = rec_unpack(b + k * LAYOUT_READER_SLOT_SIZE + LAYOUT_READER_REC_OFF, &r);
			if (got > 0 && (kind[k] <= 0 || r.beat > recs[k].beat)) {
				recs[k] = r;
				kind[k] = 1;
			} else if (got < 0 && kind[k] == 0) {
				kind[k] = -1;
			}
		}
	}
	g_free(b);
	if (rc < 0)
		return rc;
	return ok ? 0 : -EHOSTDOWN;
}

/* expire the reader id of slot k: owner word cleared, fenced, record zeroed */
static void expire(struct readers *rd, unsigned int k, uint64_t id, const char *host,
		   uint64_t silent_ms)
{
	uint8_t zero[LAYOUT_READER_REC_SIZE] = { 0 };
	unsigned int i;

	for (i = 0; i < remote_nmembers(rd->r); i++) {
		if (!remote_member_up(rd->r, i))
			continue;
		remote_member_cas(rd->r, i, owner_off(k), id, 0, NULL);
		if (remote_member_fence(rd->r, i, id) < 0)
			g_message("fencing reader %016" G_GINT64_MODIFIER "x on %s failed",
				  (guint64)id, remote_member_name(rd->r, i));
		remote_member_write(rd->r, i, rec_off(k), zero, sizeof(zero));
	}
	g_message("reader %016" G_GINT64_MODIFIER "x (%s, slot %u) silent for %" G_GUINT64_FORMAT
		  " ms: expired and fenced; freed space is no longer held for it", (guint64)id,
		  host, k, (guint64)silent_ms);
	memset(&rd->seen[k], 0, sizeof(rd->seen[k]));
}

/* an empty slot whose owner word is set: a reader that died before its record */
static void check_claim(struct readers *rd, unsigned int k, uint64_t now)
{
	struct seen *s = &rd->seen[k];
	uint64_t owner = 0;
	unsigned int i;

	for (i = 0; i < remote_nmembers(rd->r) && !owner; i++)
		if (remote_member_up(rd->r, i))
			remote_member_cas(rd->r, i, owner_off(k), 0, 0, &owner);
	if (!owner || owner != s->claimed) {
		s->claimed = owner;
		s->changed_ns = now;
		return;
	}
	if (now - s->changed_ns >= (uint64_t)rd->timeout_ms * 1000000ULL)
		expire(rd, k, owner, "no record", (now - s->changed_ns) / 1000000);
}

/* one slot after a read: live (counted in *min) or not */
static bool scan_slot(struct readers *rd, unsigned int k, const struct rec *r, int kind,
		      uint64_t now, uint64_t *min)
{
	struct seen *s = &rd->seen[k];
	uint64_t silent;

	if (kind == 0) {
		s->live = false;
		if (rd->scans % READERS_CLAIM_CHECK == 0 || s->claimed)
			check_claim(rd, k, now);
		return false;
	}
	if (kind > 0 && (!s->live || s->rec.id != r->id || s->rec.beat != r->beat)) {
		s->changed_ns = now;
		s->rec = *r;
	} else if (kind < 0 && !s->live) {
		/* unreadable bytes and nothing known: hold everything, expire it in time */
		memset(&s->rec, 0, sizeof(s->rec));
		s->changed_ns = now;
	}
	s->live = true;
	s->claimed = 0;
	silent = (now - s->changed_ns) / 1000000;
	if (silent >= rd->timeout_ms) {
		uint64_t id = s->rec.id;

		if (!id) /* the owner word says whose it is */
			remote_member_cas(rd->r, 0, owner_off(k), 0, 0, &id);
		expire(rd, k, id, s->rec.host[0] ? s->rec.host : "?", silent);
		return false;
	}
	*min = MIN(*min, s->rec.applied);
	return true;
}

int readers_scan(struct readers *rd, uint64_t *min_applied)
{
	struct rec recs[LAYOUT_READER_SLOTS];
	int kind[LAYOUT_READER_SLOTS];
	uint64_t now;
	unsigned int k;
	int rc, n = 0;

	*min_applied = UINT64_MAX;
	pthread_mutex_lock(&rd->lock);
	rc = read_slots(rd, recs, kind);
	now = clock_now_ns();
	for (k = 0; k < LAYOUT_READER_SLOTS && !rc; k++)
		n += scan_slot(rd, k, &recs[k], kind[k], now, min_applied);
	rd->scans++;
	pthread_mutex_unlock(&rd->lock);
	return rc < 0 ? rc : n;
}

int readers_list(struct readers *rd, struct reader_info *out, int max)
{
	uint64_t now = clock_now_ns();
	unsigned int k;
	int n = 0;

	pthread_mutex_lock(&rd->lock);
	for (k = 0; k < LAYOUT_READER_SLOTS && n < max; k++) {
		const struct seen *s = &rd->seen[k];

		if (!s->live)
			continue;
		out[n] = (struct reader_info){
			.id = s->rec.id, .slot = k, .applied = s->rec.applied, .gen = s->rec.gen,
			.lag_ms = s->rec.lag_ms, .silent_ms = (now - s->changed_ns) / 1000000,
		};
		memcpy(out[n].host, s->rec.host, sizeof(out[n].host));
		n++;
	}
	pthread_mutex_unlock(&rd->lock);
	return n;
}
