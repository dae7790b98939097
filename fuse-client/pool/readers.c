// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * readers.c - the reader slots (readers.h): how the read-only mounts that
 * follow a writer's journal tell it how far they applied it, so that it
 * reuses space freed by transaction s only once every live reader applied
 * s, and how the writer gets rid of a reader that went silent.
 *
 * Format (layout.h LAYOUT_SB_READERS_OFF; docs/ARCHITECTURE.md, "Reader
 * slots"): 32 slots of 96 bytes in [1024, 4096) of block 0 of every member.
 * A slot's first word is its owner - 0, or the reader's client id - and is
 * only ever touched by atomics (a NIC may keep an atomic word in its own byte
 * order), like the lease word. The rest is the record the reader writes with
 * one plain WRITE per member: id, beat, applied seq, gen, lag, CRC-32C, host.
 * A plain record, because the writer reads all 32 of a member with one READ
 * and a torn one fails its CRC; an atomic owner, because two readers must
 * never both think a slot theirs and the writer must be able to take it back.
 * The owner value is the client id that every connection of the reader
 * presents, so that the memserver can FENCE exactly that reader.
 *
 * Join before load: a reader writes its record (applied 0) before it reads
 * any metadata. A writer's scan then either sees it (and holds everything
 * freed since seq 0), or started before the record was visible - and then the
 * writer releases only what was freed by transactions durable when the scan
 * started, which the state the reader is about to load already has.
 *
 * Expiry: the writer expires a reader whose beat did not change for the
 * timeout on the writer's own clock: it FENCEs the reader's id on every
 * member (its connections are cut, new ones refused), zeroes its record and
 * only then clears its owner word (so that no new reader can take the slot
 * and have its fresh record zeroed), and stops holding space for it only
 * after all that. The reader checks every data READ after it completed
 * (readers_read_ok): the bytes stand if the READ completed before its read
 * deadline - the issue time of its last confirmed beat plus half the
 * timeout: the writer saw that beat no earlier than it was issued, so it
 * cannot have expired the reader before the deadline, even with the clocks
 * running a little apart - or, past the deadline, if the owner word still
 * names it once the READ completed (CAS(owner, id, id)): the writer clears it
 * before it reuses anything. Two independent fences, then: the server's
 * (a READ after the FENCE fails) and the reader's own (by the clock and the
 * owner word, which holds when the memserver forgot its fences in a restart).
 *
 * A reader writes only to the members that are up; a set member that goes
 * away meanwhile (-EHOSTDOWN: remote_member_gone dropped it) is skipped, as
 * super.c does with the lease. The writer takes the union over the members
 * it can read, by reader id, the newest beat winning; a record that fails its
 * CRC keeps the last good values of its slot, or counts as a reader at seq 0
 * (conservative) until it checks again or times out. A slot claimed but
 * never given a record (a reader that died between the two) is found by
 * reading the owner words of empty slots every READERS_CLAIM_CHECK scans.
 *
 * Test knob: RMEM_TEST_READERS_TIMEOUT_MS=N in the environment (of the
 * writer and of its readers alike: the reader's deadline is half of it)
 * shortens the timeout, read by readers_new. For tests only (tests/
 * test_readers.c and the fs tests); never for real use.
 *
 * Locking: rd->lock serializes the calls on one struct readers (one scan at a
 * time; a beat, a read_ok check past the deadline, a join, a leave); it is
 * held across pool requests. readers_read_ok's fast path takes no lock
 * (deadline_ns and expired are atomics).
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
#define READERS_CLAIM_CHECK 10 /* scans between looks at the owner words of empty slots */

static_assert(LAYOUT_SB_READERS_OFF >= LAYOUT_SB_LEASE_END, "reader slots after the lease");
static_assert(LAYOUT_SB_READERS_OFF + READERS_AREA <= LAYOUT_SB_SIZE, "reader slots in block 0");
static_assert(LAYOUT_SB_READERS_OFF % 8 == 0 && LAYOUT_READER_SLOT_SIZE % 8 == 0,
	      "owner words 8-byte aligned");

/* a slot's record on the pool (little-endian), at LAYOUT_READER_REC_OFF of the slot */
struct readers_rec_wire {
	__le64 id; /* = the owner word */
	__le64 beat; /* +1 per heartbeat */
	__le64 applied; /* the last journal seq the reader applied */
	__le64 gen; /* the checkpoint generation it is on (informative) */
	__le64 lag_ms; /* its own staleness estimate (informative) */
	__le32 crc; /* CRC-32C of the 80 bytes with this field 0 */
	__le32 zero;
	char host[LAYOUT_READER_HOST_LEN]; /* "host pid N", NUL-padded */
};

static_assert(sizeof(struct readers_rec_wire) == LAYOUT_READER_REC_SIZE, "record size");
static_assert(offsetof(struct readers_rec_wire, host) == 48, "record host offset");
static_assert(LAYOUT_READER_REC_OFF + LAYOUT_READER_REC_SIZE == LAYOUT_READER_SLOT_SIZE,
	      "record fills the slot");

/* a record, decoded */
struct rec {
	uint64_t id, beat, applied, gen, lag_ms;
	char host[LAYOUT_READER_HOST_LEN + 1];
};

/* a reader the writer knows of, by id (in rd->seen) */
struct seen {
	uint64_t id; /* the key */
	struct rec rec; /* its newest good record (applied 0 while none was read) */
	unsigned int slot;
	uint64_t changed_ns; /* when its beat last changed; its first sighting */
	unsigned int scan; /* the scan that last saw it */
};

/* what the writer knows of a slot between scans */
struct slot_state {
	struct rec good; /* the last good record read from it */
	bool has_good;
	uint64_t anon_ns; /* damaged bytes that name no one: since when (0: not) */
	uint64_t claimed; /* an owner word without a record: its value */
	uint64_t claim_ns; /* since when */
};

struct readers {
	struct remote *r;
	uint64_t id; /* remote_client_id */
	unsigned int timeout_ms;
	pthread_mutex_t lock; /* the calls; held across pool requests */
	/* a reader [lock] */
	int slot; /* -1: none */
	bool joined_before; /* a rejoin counts its beat on from where it was */
	struct rec me;
	_Atomic uint64_t deadline_ns; /* reads completed before it stand; 0: none */
	_Atomic bool expired; /* the slot was taken from us: for good */
	/* the writer [lock] */
	GHashTable *seen; /* id -> struct seen: the live readers of the last scan */
	struct slot_state slots[LAYOUT_READER_SLOTS];
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

static void rec_pack(const struct rec *r, struct readers_rec_wire *w)
{
	memset(w, 0, sizeof(*w));
	w->id = htole64(r->id);
	w->beat = htole64(r->beat);
	w->applied = htole64(r->applied);
	w->gen = htole64(r->gen);
	w->lag_ms = htole64(r->lag_ms);
	memcpy(w->host, r->host, strnlen(r->host, LAYOUT_READER_HOST_LEN));
	w->crc = htole32(layout_crc(w, sizeof(*w)));
}

/* 1: a record; 0: an empty slot (all zero); -1: bytes that are neither (torn, damaged) */
static int rec_unpack(const uint8_t *b, struct rec *r)
{
	struct readers_rec_wire w;
	uint32_t crc;
	size_t i;

	for (i = 0; i < sizeof(w) && !b[i]; i++)
		;
	if (i == sizeof(w))
		return 0;
	memcpy(&w, b, sizeof(w));
	crc = le32toh(w.crc);
	w.crc = 0;
	if (layout_crc(&w, sizeof(w)) != crc || !w.id || w.zero)
		return -1;
	r->id = le64toh(w.id);
	r->beat = le64toh(w.beat);
	r->applied = le64toh(w.applied);
	r->gen = le64toh(w.gen);
	r->lag_ms = le64toh(w.lag_ms);
	memcpy(r->host, w.host, LAYOUT_READER_HOST_LEN);
	r->host[LAYOUT_READER_HOST_LEN] = 0;
	for (i = 0; r->host[i]; i++)
		if (!g_ascii_isprint(r->host[i]))
			r->host[i] = '?';
	return 1;
}

struct readers *readers_new(struct remote *r)
{
	struct readers *rd = g_new0(struct readers, 1);
	const char *knob = g_getenv("RMEM_TEST_READERS_TIMEOUT_MS");
	guint64 ms;

	rd->r = r;
	rd->id = remote_client_id(r);
	rd->slot = -1;
	rd->timeout_ms = READERS_TIMEOUT_MS;
	if (knob && g_ascii_string_to_unsigned(knob, 10, 1, 3600000, &ms, NULL)) {
		rd->timeout_ms = (unsigned int)ms;
		g_message("RMEM_TEST_READERS_TIMEOUT_MS=%u: readers expire after %u ms (test knob)",
			  rd->timeout_ms, rd->timeout_ms);
	}
	rd->seen = g_hash_table_new_full(g_int64_hash, g_int64_equal, NULL, g_free);
	pthread_mutex_init(&rd->lock, NULL);
	return rd;
}

void readers_destroy(struct readers *rd)
{
	if (!rd)
		return;
	pthread_mutex_destroy(&rd->lock);
	g_hash_table_destroy(rd->seen);
	g_free(rd);
}

unsigned int readers_timeout_ms(const struct readers *rd)
{
	return rd->timeout_ms;
}

/* a set member that went away meanwhile (remote_member_gone dropped it) does not count */
static bool gone(struct readers *rd, int rc)
{
	return rc == -EHOSTDOWN && remote_is_set(rd->r);
}

/* the owner word of slot k on member i (an atomic read: CAS(0, 0)) */
static int owner_read(struct readers *rd, unsigned int i, unsigned int k, uint64_t *owner)
{
	return remote_member_cas(rd->r, i, owner_off(k), 0, 0, owner);
}

/* ---- a reader ---- */

/*
 * CAS(owner_k, from, to) on every member up, in member order. 0; -EBUSY when
 * a member's word is neither (someone else's); or -errno. *done: one past
 * the last member that took it.
 */
static int cas_all(struct readers *rd, unsigned int k, uint64_t from, uint64_t to,
		   unsigned int *done)
{
	unsigned int i;
	uint64_t old;
	int rc;

	*done = 0;
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

/* give slot k back on the members before upto (a join that did not complete) */
static void unclaim(struct readers *rd, unsigned int k, unsigned int upto)
{
	unsigned int i;

	for (i = 0; i < upto; i++)
		if (remote_member_up(rd->r, i))
			remote_member_cas(rd->r, i, owner_off(k), rd->id, 0, NULL);
}

/* write our record to every member up: 0 once at least one took it, else -errno */
static int write_rec(struct readers *rd)
{
	struct readers_rec_wire w;
	unsigned int i, ok = 0;
	int rc;

	rec_pack(&rd->me, &w);
	for (i = 0; i < remote_nmembers(rd->r); i++) {
		if (!remote_member_up(rd->r, i))
			continue;
		rc = remote_member_write(rd->r, i, rec_off((unsigned int)rd->slot), &w, sizeof(w));
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

/*
 * A request of ours failed with rc: once the pool failed - the memserver
 * fenced us (the writer expired us: "LEASE LOST"), or no member is left -
 * nothing read from it can be trusted again: -ESTALE for good.
 */
static int failed_rc(struct readers *rd, int rc)
{
	if (rc < 0 && rc != -ESTALE && remote_failed(rd->r)) {
		atomic_store(&rd->expired, true);
		return -ESTALE;
	}
	return rc;
}

/* is the slot still ours on every member up? 0, -ESTALE, or -errno (lock held) */
static int confirm(struct readers *rd)
{
	unsigned int done;
	int rc;

	if (atomic_load(&rd->expired))
		return -ESTALE;
	if (rd->slot < 0)
		return -ESTALE; /* left: nothing holds space for us */
	rc = cas_all(rd, (unsigned int)rd->slot, rd->id, rd->id, &done);
	if (rc == -EBUSY) {
		atomic_store(&rd->expired, true);
		return -ESTALE;
	}
	return failed_rc(rd, rc);
}

/* the hosts of the records in the slots, for the message of a full table */
static char *holders(struct readers *rd)
{
	uint8_t *b = g_malloc(READERS_AREA);
	GString *s = g_string_new(NULL);
	unsigned int i, k;
	struct rec r;
	int rc = -EHOSTDOWN;

	for (i = 0; i < remote_nmembers(rd->r) && rc < 0; i++)
		if (remote_member_up(rd->r, i))
			rc = remote_member_read(rd->r, i, LAYOUT_SB_READERS_OFF, b, READERS_AREA);
	for (k = 0; k < LAYOUT_READER_SLOTS && !rc; k++)
		if (rec_unpack(b + k * LAYOUT_READER_SLOT_SIZE + LAYOUT_READER_REC_OFF, &r) > 0)
			g_string_append_printf(s, "%s%s", s->len ? ", " : "",
					       r.host[0] ? r.host : "?");
	g_free(b);
	if (!s->len)
		g_string_append(s, "unknown");
	return g_string_free(s, FALSE);
}

int readers_join(struct readers *rd, const char *host, char **err_msg)
{
	unsigned int k, done;
	uint64_t t0, beat;
	char *who;
	int rc;

	pthread_mutex_lock(&rd->lock);
	if (rd->slot >= 0 && !atomic_load(&rd->expired)) {
		rc = -EALREADY;
		if (err_msg)
			*err_msg = g_strdup_printf("this client holds reader slot %d already",
						   rd->slot);
		goto out;
	}
	/* a rejoin beats on from where it was: the writer may not have seen it leave */
	beat = rd->joined_before ? rd->me.beat + 1 : 0;
	rd->slot = -1;
	memset(&rd->me, 0, sizeof(rd->me));
	g_strlcpy(rd->me.host, host ? host : "", sizeof(rd->me.host));
	rd->me.id = rd->id;
	rd->me.beat = beat;
	atomic_store(&rd->deadline_ns, 0);
	atomic_store(&rd->expired, false);
	for (k = 0; k < LAYOUT_READER_SLOTS; k++) {
		rc = cas_all(rd, k, 0, rd->id, &done);
		if (rc == -EBUSY) {
			unclaim(rd, k, done);
			continue;
		}
		if (rc < 0) {
			unclaim(rd, k, done);
			if (err_msg)
				*err_msg = g_strdup_printf("taking a reader slot: %s",
							   g_strerror(-rc));
			goto out;
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
			goto out;
		}
		rd->joined_before = true;
		push_deadline(rd, t0);
		g_debug("reader %016" G_GINT64_MODIFIER "x joined in slot %u", (guint64)rd->id, k);
		goto out;
	}
	rc = -ENOSPC;
	who = holders(rd);
	if (err_msg)
		*err_msg = g_strdup_printf("all %u reader slots of the pool are taken (readers: "
					   "%s)", LAYOUT_READER_SLOTS, who);
	g_free(who);
out:
	pthread_mutex_unlock(&rd->lock);
	return rc;
}

int readers_beat(struct readers *rd, uint64_t applied, uint64_t gen, uint64_t lag_ms)
{
	uint64_t t0 = clock_now_ns();
	int rc;

	pthread_mutex_lock(&rd->lock);
	if (atomic_load(&rd->expired)) {
		rc = -ESTALE;
		goto out;
	}
	if (rd->slot < 0) {
		rc = -EINVAL;
		goto out;
	}
	rd->me.beat++;
	rd->me.applied = applied;
	rd->me.gen = gen;
	rd->me.lag_ms = lag_ms;
	rc = failed_rc(rd, write_rec(rd));
	if (!rc)
		rc = confirm(rd);
	if (!rc)
		push_deadline(rd, t0);
out:
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
	struct readers_rec_wire zero = { 0 };
	unsigned int i, k;
	uint64_t old;

	pthread_mutex_lock(&rd->lock);
	atomic_store(&rd->deadline_ns, 0);
	if (rd->slot < 0 || atomic_load(&rd->expired))
		goto out;
	k = (unsigned int)rd->slot;
	for (i = 0; i < remote_nmembers(rd->r); i++) {
		if (!remote_member_up(rd->r, i))
			continue;
		/* the record goes first, while the slot is ours: no new reader's is zeroed */
		if (remote_member_cas(rd->r, i, owner_off(k), rd->id, rd->id, &old) < 0 ||
		    old != rd->id)
			continue;
		if (remote_member_write(rd->r, i, rec_off(k), &zero, sizeof(zero)) < 0)
			g_debug("zeroing reader slot %u on %s failed", k,
				remote_member_name(rd->r, i));
		remote_member_cas(rd->r, i, owner_off(k), rd->id, 0, NULL);
	}
	g_debug("reader %016" G_GINT64_MODIFIER "x left slot %u", (guint64)rd->id, k);
out:
	rd->slot = -1;
	pthread_mutex_unlock(&rd->lock);
}

/* ---- the writer ---- */

/* one reader found in a scan: its id, slot and record (fresh: read with a good CRC now) */
struct cand {
	struct rec rec;
	unsigned int slot;
	bool fresh;
};

/* add c to the scan's candidates, one per id: the newest beat, a fresh record first */
static void cand_add(GArray *cands, const struct cand *c)
{
	struct cand *o;
	guint j;

	for (j = 0; j < cands->len; j++) {
		o = &g_array_index(cands, struct cand, j);
		if (o->rec.id != c->rec.id)
			continue;
		if ((c->fresh && !o->fresh) || (c->fresh == o->fresh && c->rec.beat > o->rec.beat))
			*o = *c;
		return;
	}
	g_array_append_val(cands, *c);
}

/*
 * Expire the reader id in slot k (id 0: damaged bytes that name no one).
 * FENCE first, on every member up (no request of its can land or be served
 * after), then on each member where the slot is its or free: hold the owner
 * word (CAS(0, holder)), zero the record, and free the word. A member where
 * someone else owns the slot by now keeps that reader's record.
 */
static void expire(struct readers *rd, unsigned int k, uint64_t id, const char *host,
		   uint64_t silent_ms, bool fence)
{
	struct readers_rec_wire zero = { 0 };
	uint64_t holder = id ? id : rd->id, old;
	unsigned int i;
	int rc;

	for (i = 0; i < remote_nmembers(rd->r) && fence && id && id != rd->id; i++) {
		if (!remote_member_up(rd->r, i))
			continue;
		rc = remote_member_fence(rd->r, i, id);
		if (rc < 0 && !gone(rd, rc))
			g_message("fencing reader %016" G_GINT64_MODIFIER "x on %s: %s (its own "
				  "deadline still stops it)", (guint64)id,
				  remote_member_name(rd->r, i), g_strerror(-rc));
	}
	for (i = 0; i < remote_nmembers(rd->r); i++) {
		if (!remote_member_up(rd->r, i))
			continue;
		if (remote_member_cas(rd->r, i, owner_off(k), 0, holder, &old) < 0)
			continue;
		if (old != 0 && old != holder)
			continue;
		rc = remote_member_write(rd->r, i, rec_off(k), &zero, sizeof(zero));
		if (rc < 0 && !gone(rd, rc))
			g_message("zeroing reader slot %u on %s: %s", k,
				  remote_member_name(rd->r, i), g_strerror(-rc));
		remote_member_cas(rd->r, i, owner_off(k), holder, 0, NULL);
	}
	if (id && fence)
		g_message("reader %016" G_GINT64_MODIFIER "x (%s, slot %u) silent for %.1f s: "
			  "expired and fenced; freed space is no longer held for it", (guint64)id,
			  host, k, (double)silent_ms / 1000);
	else
		g_message("reader slot %u held bytes that name no reader for %.1f s: cleared", k,
			  (double)silent_ms / 1000);
	memset(&rd->slots[k], 0, sizeof(rd->slots[k]));
}

/*
 * Read every member's slots (one READ each) into the scan's candidates; a
 * slot with damaged bytes only goes in as its last good record, or as its
 * owner at seq 0; *anon gets the damaged slots that name no one. 0 or -errno.
 */
static int read_slots(struct readers *rd, GArray *cands, bool *anon, bool *empty)
{
	uint8_t *b = g_malloc((size_t)remote_nmembers(rd->r) * READERS_AREA);
	bool good[LAYOUT_READER_SLOTS] = { false }, bad[LAYOUT_READER_SLOTS] = { false };
	unsigned int i, k, first = 0, nread = 0;
	bool read[REMOTE_MAX_SERVERS] = { false };
	struct cand c;
	uint64_t owner;
	int rc = 0, got;

	for (i = 0; i < remote_nmembers(rd->r) && i < REMOTE_MAX_SERVERS; i++) {
		if (!remote_member_up(rd->r, i))
			continue;
		rc = remote_member_read(rd->r, i, LAYOUT_SB_READERS_OFF, b + i * READERS_AREA,
					READERS_AREA);
		if (rc < 0 && gone(rd, rc)) {
			rc = 0;
			continue;
		}
		if (rc < 0)
			goto out;
		if (!nread++)
			first = i;
		read[i] = true;
	}
	if (!nread) {
		rc = -EHOSTDOWN;
		goto out;
	}
	for (i = 0; i < REMOTE_MAX_SERVERS; i++) {
		for (k = 0; k < LAYOUT_READER_SLOTS && read[i]; k++) {
			memset(&c, 0, sizeof(c));
			got = rec_unpack(b + i * READERS_AREA + k * LAYOUT_READER_SLOT_SIZE +
						 LAYOUT_READER_REC_OFF, &c.rec);
			bad[k] |= got < 0;
			if (got <= 0)
				continue;
			c.slot = k;
			c.fresh = true;
			cand_add(cands, &c);
			if (!rd->slots[k].has_good || !good[k] ||
			    c.rec.beat > rd->slots[k].good.beat) {
				rd->slots[k].good = c.rec;
				rd->slots[k].has_good = true;
			}
			good[k] = true;
		}
	}
	for (k = 0; k < LAYOUT_READER_SLOTS; k++) {
		anon[k] = false;
		empty[k] = !good[k] && !bad[k];
		if (good[k] || !bad[k])
			continue;
		/* damaged everywhere it was read: hold everything for whoever it is */
		memset(&c, 0, sizeof(c));
		c.slot = k;
		if (rd->slots[k].has_good) {
			c.rec = rd->slots[k].good;
		} else if (owner_read(rd, first, k, &owner) == 0 && owner) {
			c.rec.id = owner;
			g_strlcpy(c.rec.host, "?", sizeof(c.rec.host));
		} else {
			anon[k] = true;
			continue;
		}
		cand_add(cands, &c);
	}
out:
	g_free(b);
	return rc;
}

/* an empty slot whose owner word is set: a reader that died before its record */
static void check_claim(struct readers *rd, unsigned int k, uint64_t now)
{
	struct slot_state *s = &rd->slots[k];
	uint64_t owner = 0;
	unsigned int i;

	for (i = 0; i < remote_nmembers(rd->r) && !owner; i++)
		if (remote_member_up(rd->r, i))
			owner_read(rd, i, k, &owner);
	if (!owner || owner != s->claimed) {
		s->claimed = owner;
		s->claim_ns = now;
		return;
	}
	if (now - s->claim_ns >= (uint64_t)rd->timeout_ms * 1000000ULL)
		expire(rd, k, owner, "no record", (now - s->claim_ns) / 1000000, true);
}

/* the slots without a reader in them this scan: damaged bytes of no one, claims */
static int scan_empty(struct readers *rd, const bool *anon, const bool *empty, uint64_t now,
		      uint64_t *min)
{
	struct slot_state *s;
	unsigned int k;
	int n = 0;

	for (k = 0; k < LAYOUT_READER_SLOTS; k++) {
		s = &rd->slots[k];
		if (!anon[k]) {
			s->anon_ns = 0;
		} else {
			if (!s->anon_ns)
				s->anon_ns = now;
			if (now - s->anon_ns >= (uint64_t)rd->timeout_ms * 1000000ULL) {
				expire(rd, k, 0, "?", (now - s->anon_ns) / 1000000, false);
				continue;
			}
			n++; /* someone's torn record, perhaps: seq 0 */
			*min = 0;
		}
		if (!empty[k]) {
			s->claimed = 0;
			continue;
		}
		s->has_good = false;
		if (rd->scans % READERS_CLAIM_CHECK == 0 || s->claimed)
			check_claim(rd, k, now);
	}
	return n;
}

/* the readers found: silent ones expired, the rest counted; forget the ones gone */
static int scan_readers(struct readers *rd, GArray *cands, uint64_t now, uint64_t *min)
{
	GHashTableIter it;
	struct seen *s;
	guint j;
	int n = 0;

	for (j = 0; j < cands->len; j++) {
		const struct cand *c = &g_array_index(cands, struct cand, j);
		uint64_t silent;

		s = g_hash_table_lookup(rd->seen, &c->rec.id);
		if (!s) {
			s = g_new0(struct seen, 1);
			s->id = c->rec.id;
			s->rec = c->rec; /* (not fresh: the last good values, or seq 0) */
			s->changed_ns = now;
			g_hash_table_insert(rd->seen, &s->id, s);
		} else if (c->fresh) {
			if (c->rec.beat != s->rec.beat)
				s->changed_ns = now;
			s->rec = c->rec;
		}
		s->slot = c->slot;
		s->scan = rd->scans;
		silent = (now - s->changed_ns) / 1000000;
		if (silent >= rd->timeout_ms) {
			expire(rd, s->slot, s->id, s->rec.host[0] ? s->rec.host : "?", silent,
			       true);
			g_hash_table_remove(rd->seen, &c->rec.id);
			continue;
		}
		*min = MIN(*min, s->rec.applied);
		n++;
	}
	g_hash_table_iter_init(&it, rd->seen);
	while (g_hash_table_iter_next(&it, NULL, (gpointer *)&s))
		if (s->scan != rd->scans)
			g_hash_table_iter_remove(&it); /* left (or expired by another writer) */
	return n;
}

int readers_scan(struct readers *rd, uint64_t *min_applied)
{
	bool anon[LAYOUT_READER_SLOTS], empty[LAYOUT_READER_SLOTS];
	GArray *cands = g_array_new(FALSE, FALSE, sizeof(struct cand));
	uint64_t now;
	int rc;

	*min_applied = UINT64_MAX;
	pthread_mutex_lock(&rd->lock);
	rd->scans++;
	rc = read_slots(rd, cands, anon, empty);
	if (rc < 0)
		goto out;
	now = clock_now_ns();
	rc = scan_readers(rd, cands, now, min_applied);
	rc += scan_empty(rd, anon, empty, now, min_applied);
out:
	pthread_mutex_unlock(&rd->lock);
	g_array_free(cands, TRUE);
	return rc;
}

static gint info_by_slot(gconstpointer a, gconstpointer b)
{
	const struct reader_info *x = a, *y = b;

	return (x->slot > y->slot) - (x->slot < y->slot);
}

int readers_list(struct readers *rd, struct reader_info *out, int max)
{
	uint64_t now = clock_now_ns();
	GArray *all = g_array_new(FALSE, FALSE, sizeof(struct reader_info));
	struct reader_info info;
	GHashTableIter it;
	struct seen *s;
	unsigned int k;
	int n;

	pthread_mutex_lock(&rd->lock);
	g_hash_table_iter_init(&it, rd->seen);
	while (g_hash_table_iter_next(&it, NULL, (gpointer *)&s)) {
		info = (struct reader_info){
			.id = s->id, .slot = s->slot, .applied = s->rec.applied,
			.gen = s->rec.gen, .lag_ms = s->rec.lag_ms,
			.silent_ms = (now - s->changed_ns) / 1000000,
		};
		memcpy(info.host, s->rec.host, sizeof(info.host));
		g_array_append_val(all, info);
	}
	for (k = 0; k < LAYOUT_READER_SLOTS; k++) {
		if (!rd->slots[k].anon_ns)
			continue;
		info = (struct reader_info){
			.slot = k, .silent_ms = (now - rd->slots[k].anon_ns) / 1000000,
		};
		g_strlcpy(info.host, "(damaged record)", sizeof(info.host));
		g_array_append_val(all, info);
	}
	pthread_mutex_unlock(&rd->lock);
	g_array_sort(all, info_by_slot);
	n = (int)MIN(all->len, (guint)MAX(max, 0));
	if (n)
		memcpy(out, all->data, (size_t)n * sizeof(info));
	g_array_free(all, TRUE);
	return n;
}
