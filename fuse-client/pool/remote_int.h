/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * remote_int.h - what remote.c (opening a member set, its records and
 * states) and remote_io.c (the data path over the members) share.
 *
 * Locking: the members' runtime state (up, recorded, the rebuild's member
 * and cursor) changes only under set_lock, which is also held while the
 * records are written; the data path reads it with atomics and takes
 * set_lock only to wait for a loss to be recorded. Every write to a set
 * holds rb_lock for reading; the rebuild holds it for writing while it
 * copies one unit (or decodes one stripe's fragment) and when it lets the
 * member in, so no write lands on a unit between the copy's read and its
 * write. Lock order: rb_lock, then intent_lock, then the stripe locks
 * (remote_ec.c, ascending), then set_lock, then the members' own locks
 * (member.h).
 */
#ifndef RMEM_REMOTE_INT_H
#define RMEM_REMOTE_INT_H

#include <pthread.h>
#include <stdatomic.h>

#include "lane.h"
#include "layout.h"
#include "place.h"
#include "remote.h"
#include "worker.h"

struct ec_codec;

#define EC_SPARES 2U /* an erasure-coded set's write scratch buffers kept (remote_ec.c) */
/* how a missing named pool is made, for refusal_text: the mount that formats it */
#define REMOTE_CREATE_HOW "-o format,size=SIZE"

struct remote_member {
	struct member *m; /* NULL: never reached */
	char name[LAYOUT_SET_ADDR_LEN]; /* "host:port" */
	atomic_bool up; /* connected and in sync: read and written */
	atomic_bool recorded; /* not up, and the records say so */
	atomic_uint inflight; /* requests on it now: reads go to the least busy copy */
	/* an erasure-coded set: the time of a small read, averaged (ns), and a probe count */
	_Atomic uint64_t read_ns;
	atomic_uint probe;
};

struct remote {
	bool set; /* false: a plain pool, mem[0] only, offsets unchanged */
	bool fresh; /* a blank set not claimed yet: block 0 reads as zeros */
	bool claimed; /* the records are ours to write (lease held) */
	bool degraded; /* -o degraded */
	unsigned int n; /* members */
	struct remote_member mem[LAYOUT_SET_MAX];
	struct layout_set_info info; /* the records' truth; under set_lock */
	struct place place;
	uint64_t unit; /* bytes per unit */
	uint64_t size;
	uint64_t client_id;
	char *name; /* the servers as given, for messages */
	atomic_bool failed;
	atomic_uint unrecorded; /* members down whose loss the records do not show yet */
	pthread_mutex_t set_lock;
	char *failure; /* under set_lock */
	char *replace_error; /* the last failed replace's message; under set_lock */
	struct lanes *lanes; /* a set's per-member threads (remote_io.c), or NULL */
	struct member_config mcfg; /* how members are reached (a replacement too) */
	/* the cache arena every member knows (remote_arena_set), or NULL; under set_lock */
	void *arena;
	size_t arena_len, arena_chunk;
	bool *arena_on; /* its chunks registered on every member */
	char *transport; /* mcfg.transport, owned */
	/* the rebuild (rebuild.c): one member at a time, on the keeper thread */
	pthread_rwlock_t rb_lock;
	atomic_int rb_member; /* the member being rebuilt, or -1 */
	atomic_bool rb_resync; /* only its dirty units (a member that came back), else all */
	_Atomic uint64_t rb_cursor; /* units below it are done: writes go there too */
	struct worker keeper; /* runs rebuilds, and looks for members coming back */
	unsigned int rb_done_units, rb_total_units; /* progress, for status */
	/*
	 * Units written while member i was away (one bit each; set with atomics),
	 * from the moment this mount lost it: NULL when it is not being tracked.
	 * lost_ns: when it was lost (CLOCK_MONOTONIC).
	 */
	_Atomic(uint64_t *) dirty[LAYOUT_SET_MAX];
	uint64_t lost_ns[LAYOUT_SET_MAX];
	int reconnect_ms; /* a member back within this is resynced, later rebuilt (-1: always) */
	/* the write-intent map (intent.c); lock order: rb_lock, intent_lock, set_lock */
	pthread_mutex_t intent_lock;
	uint64_t intent_region; /* units per bit */
	uint8_t *intent_map; /* the bits on the members; set under intent_lock */
	uint8_t *intent_recent; /* regions written since the last sweep (atomic or) */
	uint8_t *intent_found; /* marked by a dead client, not resynced yet (intent_lock) */
	/* the layer above's judge of data blocks (remote.h), from remote_recover on */
	struct remote_judge judge;
	/*
	 * An erasure-coded set (info.ec_k > 0; remote_ec.c). The address space
	 * [0, zone_end) is replicated by place, ec_m + 1 copies (block 0 and
	 * the journal); [zone_end, size) is stripes of ec_k data fragments of
	 * one unit each plus ec_m parity fragments, placed by *stripes in the
	 * members' slots from ec_slot0 on. Unit numbers stay offset / unit in
	 * both zones (the intent map, the dirty maps, the rebuild's cursor):
	 * stripe s holds units zone_end / unit + s * ec_k and the ec_k - 1
	 * after it. A replicated set has ec_k 0, zone_end = size.
	 */
	unsigned int ec_k, ec_m;
	uint64_t zone_end;
	uint64_t ec_slot0;
	struct place_stripes *stripes; /* g_new0: 50 KiB */
	struct ec_codec *codec;
	pthread_mutex_t *ec_locks; /* EC_LOCKS stripe locks, by stripe number (remote_ec.c) */
	uint8_t *ec_zero; /* a unit of zeroes: what a zero write writes */
	/* big write scratch kept between batches (remote_ec.c scratch_get); under the lock */
	pthread_mutex_t ec_spare_lock;
	uint8_t *ec_spare[EC_SPARES];
	atomic_ulong ec_decoded; /* reads decoded: a member down, or slow (remote_ec.c) */
};

/* where a member keeps the unit in slot `slot` (place.h) */
static inline uint64_t remote_slot_off(const struct remote *r, uint64_t slot)
{
	return LAYOUT_SET_DATA_OFF + slot * r->unit;
}

/* units in the whole address space (both zones of an erasure-coded set) */
static inline uint64_t remote_units(const struct remote *r)
{
	return r->size / r->unit;
}

/* does losing a member leave the data readable: copies, or parity? */
static inline bool remote_redundant(const struct remote *r)
{
	return r->set && r->place.r > 1;
}

/* units of the replicated zone [0, zone_end): all of a replicated set's */
static inline uint64_t remote_rep_units(const struct remote *r)
{
	return r->ec_k ? r->zone_end / r->unit : place_units(&r->place);
}

/* ---- remote.c, for the rest of the set's code ---- */

/* what one server's record slots hold */
struct remote_found {
	int kind; /* 0: a record; -ENODATA: none; -EBADMSG / -EPROTONOSUPPORT: unusable */
	struct layout_set_info info;
	uint32_t place;
	bool block0_zero; /* its block 0 is all zero */
};

/* read a server's block 0 and both record slots; the newer valid record wins */
int remote_read_records(struct member *m, struct remote_found *f);
/* unit slots of 2^shift bytes a member pool of pool_size bytes holds */
uint64_t remote_usable_units(uint64_t pool_size, unsigned int shift);
/* *err_msg (if err_msg and not set yet) = the message */
void remote_set_msg(char **err_msg, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- remote_state.c ---- */

/* write the records (set_lock held): events + 1, to every member up or being rebuilt */
int remote_write_records(struct remote *r);
/* a member request failed with rc: is the member gone (dropped now), not the request wrong? */
bool remote_member_gone(struct remote *r, unsigned int i, int rc);
/* members up now */
unsigned int remote_quorum_up(struct remote *r);
/* after a write: wait until every member that is down is recorded lost */
void remote_wait_recorded(struct remote *r);
/* member i is lost now (set_lock held): note the units written from here on */
void remote_track_loss(struct remote *r, unsigned int i);
/* a write of unit u did not reach member m (down, or not rebuilt that far yet) */
void remote_note_write(struct remote *r, uint32_t m, uint64_t u);
/*
 * set_lock held: does every unit keep a copy on a member that is up, and
 * (an erasure-coded set) every stripe ec_k fragments? 0, else -EIO with
 * *why (g_malloc'd) saying which.
 */
int remote_loss_check(struct remote *r, char **why);

/* ---- scrub.c ---- */

/* room for scrub_unit and scrub_stripe: one unit per copy or fragment, and coded parity */
uint8_t **scrub_room(struct remote *r);
void scrub_room_free(uint8_t **bufs);
/* the room's spare unit, past the copies, fragments and coded parity */
uint8_t *scrub_spare(struct remote *r, uint8_t **bufs);
/* make unit u's copies agree (s->repair) or count where they differ */
int scrub_unit(struct remote *r, struct remote_scrub *s, uint64_t u, uint8_t **bufs);
/*
 * Compare stripe st's parity with its data (the caller excludes its
 * writers); with s->repair rewrite a parity that differs. With a data
 * fragment down the decode from the first parities is checked against the
 * others; *doubt: it could not be, or they disagree - if a write was cut
 * short there, the stripe may be torn.
 */
int scrub_stripe(struct remote *r, struct remote_scrub *s, uint64_t st, uint8_t **bufs,
		 bool *doubt);

/* ---- intent.c ---- */

void intent_init(struct remote *r); /* a set's map, all clear */
void intent_free(struct remote *r);
/* before a write to unit u goes out: its region's bit is on the members (0 or -errno) */
int intent_mark(struct remote *r, uint64_t u);
/* clear the bits of regions not written since the last sweep (all: every bit) */
int intent_sweep(struct remote *r, bool all);
/* at claim: the regions a dead client marked, or'ed over the members (r->intent_found) */
int intent_load(struct remote *r);
/* make the copies of the regions intent_load found agree (judge: remote.h), then clear them */
int intent_recover(struct remote *r, const struct remote_judge *j);

/* ---- rebuild.c ---- */

/*
 * Start the keeper thread of a claimed set (remote_claim): it runs the
 * rebuilds rebuild_start asks for, and once a second looks for lost members
 * that answer again. Stopped by rebuild_stop (unmount: the records keep a
 * rebuild's progress, and the next mount goes on from there).
 */
int rebuild_keeper_start(struct remote *r);
void rebuild_stop(struct remote *r);
/*
 * Fill member i (connected; set_lock held) from units `from` on: every unit
 * placed on it, or with resync only the units its dirty map names; then
 * block 0, and it is in sync. -EBUSY while another rebuild runs.
 */
int rebuild_start(struct remote *r, unsigned int i, uint64_t from, bool resync);
/* does a write of unit u go to member m, which is being rebuilt? */
static inline bool rebuild_takes(struct remote *r, uint32_t m, uint64_t u)
{
	return atomic_load(&r->rb_member) == (int)m && u < atomic_load(&r->rb_cursor);
}

/* ---- remote_ec.c: the stripes of an erasure-coded set ---- */

/* the codec and the stripe locks, once open_set placed the stripes (0 or -errno) */
int ec_init(struct remote *r);
void ec_free(struct remote *r); /* a replicated set too */
/*
 * Reads and writes of [zone_end, size): the whole request lies there
 * (remote_io.c cuts it). Reads go to the data fragments, decoding from
 * parity where a member is down; writes keep the stripes' parity current,
 * under the stripe locks, with the intent map marked first.
 */
int ec_rw(struct remote *r, enum xport_op_type type, const uint64_t *offs,
	  const struct iovec *iov, int cnt);
/*
 * The stripes' geometry and locks are inline: scrub.c, intent.c and
 * remote_state.c use them, and remote_ec.c calls all three: no file cycle.
 */
#define EC_LOCKS 1024U

/* stripes in the EC zone, and the stripe holding unit u (u >= zone_end / unit) */
static inline uint64_t ec_stripes(const struct remote *r)
{
	return r->stripes ? r->stripes->stripes : 0;
}

static inline uint64_t ec_stripe_of(const struct remote *r, uint64_t u)
{
	return (u - r->zone_end / r->unit) / r->ec_k;
}

/* fragment i of stripe s (data i < ec_k, then parity): its member and offset there */
static inline void ec_frag(const struct remote *r, uint64_t s, unsigned int i, uint32_t *member,
			   uint64_t *moff)
{
	struct place_copy f[PLACE_STRIPE_MAX_WIDTH];

	place_stripe(r->stripes, s, f);
	*member = f[i].member;
	*moff = remote_slot_off(r, r->ec_slot0 + f[i].slot);
}

/* the stripe lock of stripe s (every writer of a stripe's fragments holds it) */
static inline void ec_lock(struct remote *r, uint64_t s)
{
	pthread_mutex_lock(&r->ec_locks[s % EC_LOCKS]);
}

static inline void ec_unlock(struct remote *r, uint64_t s)
{
	pthread_mutex_unlock(&r->ec_locks[s % EC_LOCKS]);
}

/* set_lock held: does every stripe keep at least ec_k fragments on members up? */
static inline bool ec_loss_ok(struct remote *r)
{
	struct place_copy f[PLACE_STRIPE_MAX_WIDTH];
	uint64_t s, cycle = r->stripes ? (uint64_t)r->stripes->ncomb * r->stripes->w : 0;
	unsigned int i, down;

	/* one cycle shows every combination of members */
	for (s = 0; s < cycle && s < ec_stripes(r); s++) {
		place_stripe(r->stripes, s, f);
		for (i = 0, down = 0; i < r->stripes->w; i++)
			down += !atomic_load(&r->mem[f[i].member].up);
		if (down > r->ec_m)
			return false;
	}
	return true;
}

/* the first unit of stripe s: its dirty bit, its intent mark, the rebuild's cursor past it */
static inline uint64_t ec_stripe_unit(const struct remote *r, uint64_t s)
{
	return r->zone_end / r->unit + s * r->ec_k;
}

/* where offset off (>= zone_end) lies: stripe *s, data fragment *j, *o bytes into it */
void ec_locate(const struct remote *r, uint64_t off, uint64_t *s, uint32_t *j, uint32_t *o);
/* the intent map marked for stripe s (its units may lie in two regions): 0 or -errno */
int ec_intent_mark(struct remote *r, uint64_t s);
/*
 * Whole fragments, for the rebuild and the checksums' alternatives (the
 * rounds of the data path); the caller holds what excludes the writers of
 * stripe s (its stripe lock, or rb_lock for writing). Fragment masks have
 * bit i for fragment i, col[i] is fragment i's buffer (len bytes).
 *
 * ec_frags_up: the fragments on members that are up.
 * ec_frags_read: [off, off + len) of the fragments in want that are up, the
 * members at once; *got: those read (a member that failed is dropped and
 * its fragment left out). 0 or -errno.
 * ec_frags_write: the same range of the fragments in which, to those whose
 * members are up (or being rebuilt past s); a fragment not written goes to
 * its member's dirty map. 0 or -errno.
 */
uint32_t ec_frags_up(struct remote *r, uint64_t s);
int ec_frags_read(struct remote *r, uint64_t s, uint32_t want, uint32_t off, uint32_t len,
		  uint8_t *const col[], uint32_t *got);
int ec_frags_write(struct remote *r, uint64_t s, uint32_t which, uint32_t off, uint32_t len,
		   uint8_t *const col[]);

/* give member m (joining the set; set_lock held) the arena's registered chunks */
void remote_arena_join(struct remote *r, struct member *m, const char *name);

#endif /* RMEM_REMOTE_INT_H */
