// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * super.c - superblock probe/format and the lease (super.h; the protocol:
 * docs/ARCHITECTURE.md, "Lease protocol and timing").
 *
 * The lease words are touched only with atomics (never plain reads/writes:
 * a NIC may keep atomic words in its own byte order); the heartbeat runs on
 * a worker thread (worker.h).
 *
 * The owner value is the remote's client id, which every connection presents
 * to the memserver: after taking the word from a previous holder X we send
 * FENCE(X), and only once the memserver confirmed that none of X's writes can
 * land any more is the lease ours. Conversely, when the memserver refuses us
 * (-EKEYREVOKED), member.c fails the mount with "LEASE LOST" (a member of a
 * set: remote_state.c fails the whole set).
 *
 * Each member keeps its own lease words; every step below takes a member
 * index, and the protocol runs on each member that is up, in order.
 * super_read_ckpt_gen reconciles the members' copies of the checkpoint
 * generation (see there).
 *
 * Test knob: RMEM_TEST_NO_SELF_FENCE=1 in the environment turns the holder's
 * own fencing off - no write deadline, no owner-word check in the heartbeat -
 * so that only the memserver's fence can stop a holder that lost its lease
 * (tests/fs/test_durability.py proves the server fence with it). Never for
 * real use.
 */
#define G_LOG_DOMAIN "rmemfs-super"

#include "super.h"
#include "clock.h"

#include <endian.h>
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include <glib.h>

#include "remote.h"
#include "worker.h"

struct super {
	struct remote *r;
	struct layout_geom g;
	uint64_t my_id; /* lease owner value while we hold it, else 0 */
	bool held[LAYOUT_SET_MAX]; /* the members whose lease word is ours */
	char holder[LAYOUT_SB_LEASE_HOLDER_LEN]; /* what the lease area says of us */
	int takeover_ms;
	int hb_interval_ms;
	struct worker hb; /* the heartbeat thread */
	bool self_fence; /* write deadline and owner check (off: RMEM_TEST_NO_SELF_FENCE) */
};

static void random_bytes(void *buf, size_t len)
{
	uint8_t *p = buf;
	size_t i;

	if (getrandom(buf, len, 0) == (ssize_t)len)
		return;
	for (i = 0; i < len; i++)
		p[i] = (uint8_t)g_random_int();
}

struct super *super_new(struct remote *r)
{
	struct super *s = g_new0(struct super, 1);

	s->r = r;
	s->takeover_ms = SUPER_DEFAULT_TAKEOVER_MS;
	s->self_fence = g_strcmp0(g_getenv("RMEM_TEST_NO_SELF_FENCE"), "1") != 0;
	if (!s->self_fence)
		g_message("RMEM_TEST_NO_SELF_FENCE=1: no write deadline, no owner check "
			  "(test knob)");
	return s;
}

void super_destroy(struct super *s)
{
	if (s)
		super_heartbeat_stop(s);
	g_free(s);
}

const struct layout_geom *super_geom(const struct super *s)
{
	return &s->g;
}

/*
 * An erasure-coded set's superblock: the journal in the replicated zone,
 * the checkpoint slots and the data on stripes (layout_geometry_zoned).
 */
static bool fits_zones(const struct super *s)
{
	const struct layout_geom *g = &s->g;
	uint64_t zone_end, stripe;

	if (!remote_zone(s->r, &zone_end, &stripe))
		return true;
	return g->journal_off + g->journal_len <= zone_end && g->slot_off[0] >= zone_end &&
	       (g->slot_off[0] - zone_end) % stripe == 0 &&
	       (g->slot_off[1] - zone_end) % stripe == 0 && (g->data_off - zone_end) % stripe == 0;
}

int super_probe(struct super *s, enum layout_sb_kind *kind, uint32_t *version, const char **why)
{
	uint8_t *blk = g_malloc(LAYOUT_SB_SIZE);
	int rc;

	rc = remote_read(s->r, 0, blk, LAYOUT_SB_SIZE);
	if (rc < 0) {
		g_message("reading the superblock: %s", g_strerror(-rc));
		g_free(blk);
		return rc;
	}
	*kind = layout_sb_classify(blk, remote_size(s->r), &s->g, version, why);
	g_free(blk);
	if (*kind == LAYOUT_SB_RMEMFS && !fits_zones(s)) {
		*kind = LAYOUT_SB_CORRUPT;
		if (why)
			*why = "geometry does not fit the member set";
	}
	return 0;
}

/* ---- lease ---- */

static char *read_holder(struct super *s, unsigned int i)
{
	char buf[LAYOUT_SB_LEASE_HOLDER_LEN + 1];
	size_t k;

	if (remote_member_read(s->r, i, LAYOUT_SB_LEASE_HOLDER, buf, LAYOUT_SB_LEASE_HOLDER_LEN) < 0)
		return g_strdup("an unknown client");
	buf[LAYOUT_SB_LEASE_HOLDER_LEN] = 0;
	for (k = 0; buf[k]; k++)
		if (!g_ascii_isprint(buf[k]))
			buf[k] = '?';
	return g_strdup(buf[0] ? buf : "an unnamed client");
}

static int read_heartbeat(struct super *s, unsigned int i, uint64_t *hb)
{
	return remote_member_fetch_add(s->r, i, LAYOUT_SB_LEASE_HEARTBEAT, 0, hb);
}

static int owner_cas(struct super *s, unsigned int i, uint64_t compare, uint64_t swap,
		     uint64_t *old)
{
	return remote_member_cas(s->r, i, LAYOUT_SB_LEASE_OWNER, compare, swap, old);
}

static void set_timing(struct super *s, int takeover_ms)
{
	s->takeover_ms = takeover_ms > 0 ? takeover_ms : SUPER_DEFAULT_TAKEOVER_MS;
	s->hb_interval_ms = CLAMP(s->takeover_ms / 8, 20, 1000);
}

static void push_deadline(struct super *s)
{
	if (!s->self_fence)
		return;
	remote_set_write_deadline(s->r, clock_now_ns() + (uint64_t)s->takeover_ms * 500000ULL);
}

static int write_holder(struct super *s, unsigned int i, const char *holder)
{
	char buf[LAYOUT_SB_LEASE_HOLDER_LEN];

	memset(buf, 0, sizeof(buf));
	g_strlcpy(buf, holder ? holder : "", sizeof(buf));
	return remote_member_write(s->r, i, LAYOUT_SB_LEASE_HOLDER, buf, sizeof(buf));
}

static int acquired(struct super *s, unsigned int i, uint64_t me, const char *holder)
{
	int rc;

	push_deadline(s);
	rc = write_holder(s, i, holder);
	if (rc < 0) {
		g_message("writing the lease holder on %s: %s", remote_member_name(s->r, i),
			  g_strerror(-rc));
		owner_cas(s, i, me, 0, NULL);
		return rc;
	}
	s->held[i] = true;
	return 0;
}

/*
 * We took member i's lease word from x: the memserver must fence x before
 * anything is read under the lease (a write x had queued could land
 * afterwards). If it cannot, give the word back to x and fail.
 */
static int taken_over(struct super *s, unsigned int i, uint64_t me, uint64_t x,
		      const char *holder, char **err_msg)
{
	int rc = 0;

	/*
	 * x == me: a lease of this very remote that was never released (an
	 * abandoned mount in the same process): its connections are ours.
	 */
	if (x != me)
		rc = remote_member_fence(s->r, i, x);
	if (rc < 0) {
		if (owner_cas(s, i, me, x, NULL) < 0)
			g_message("giving the lease word back failed");
		if (err_msg && rc != -EHOSTDOWN)
			*err_msg = g_strdup_printf("the memserver did not fence the previous lease "
						   "holder (FENCE: %s); not taking the lease",
						   g_strerror(-rc));
		return rc;
	}
	return acquired(s, i, me, holder);
}

static int cas_failed(int rc, char **err_msg)
{
	if (err_msg && rc != -EHOSTDOWN)
		*err_msg = g_strdup_printf("lease compare-and-swap on the superblock: %s",
					   g_strerror(-rc));
	return rc;
}

/* CAS(owner, x, me), as how says (WAIT: x fell silent); -EAGAIN: someone else has it now */
static int take_from(struct super *s, unsigned int i, uint64_t me, uint64_t x,
		     enum super_lease_how how, const char *holder, char **err_msg)
{
	char *who = read_holder(s, i);
	uint64_t old;
	int rc;

	rc = owner_cas(s, i, x, me, &old);
	if (!rc && old != x && old != me)
		rc = -EAGAIN;
	if (!rc && how == SUPER_LEASE_FORCE)
		g_message("lease forcibly taken from %s", who);
	else if (!rc && how == SUPER_LEASE_FOREIGN)
		g_message("the lease word held foreign bytes (no rmemfs lease): taken for the "
			  "format");
	else if (!rc)
		g_message("taking over the lease of %s (silent for %d ms)", who, s->takeover_ms);
	g_free(who);
	if (rc == -EAGAIN)
		return rc;
	return rc < 0 ? cas_failed(rc, err_msg) : taken_over(s, i, me, x, holder, err_msg);
}

/*
 * SUPER_LEASE_WAIT: a member whose lease word another holder keeps, watched
 * until the word is free (ours), the holder falls silent for takeover_ms
 * (take it), or its heartbeat moves (it is alive: -EBUSY). The members of a
 * set are watched side by side, so a crashed holder costs one takeover
 * window, not one per member; each member still needs its own silent window,
 * so a holder cut off from some members but beating others is never taken.
 */
struct watch {
	bool on;
	uint64_t x; /* the holder watched; 0: none yet (the next step looks) */
	uint64_t hb0, since;
	int rounds; /* holders watched on this member */
};

/* start watching holder x on member i: 1, or -errno */
static int watch_start(struct super *s, unsigned int i, struct watch *w, uint64_t x,
		       char **err_msg)
{
	int rc;

	if (++w->rounds > 16) {
		if (err_msg)
			*err_msg = g_strdup("pool lease keeps changing hands; try again");
		return -EBUSY;
	}
	rc = read_heartbeat(s, i, &w->hb0);
	if (rc < 0)
		return cas_failed(rc, err_msg);
	w->x = x;
	w->since = clock_now_ms();
	return 1;
}

/* one look at member i: 1 while it is still watched, 0 once ours, -errno */
static int watch_step(struct super *s, unsigned int i, struct watch *w, uint64_t me,
		      const char *holder, char **err_msg)
{
	uint64_t old, hb;
	int rc;

	rc = owner_cas(s, i, 0, me, &old);
	if (rc < 0)
		return cas_failed(rc, err_msg);
	if (old == 0)
		return acquired(s, i, me, holder);
	/*
	 * old == me is another mount of this remote (tests do that), or our
	 * own CAS applied with its reply lost: either way a holder to watch,
	 * and a silent one is taken over (no FENCE: our id).
	 */
	if (old != w->x)
		return watch_start(s, i, w, old, err_msg);
	rc = read_heartbeat(s, i, &hb);
	if (rc < 0)
		return cas_failed(rc, err_msg);
	if (hb != w->hb0) {
		char *who = read_holder(s, i);

		if (err_msg)
			*err_msg = g_strdup_printf("pool is in use: mounted read-write by %s", who);
		g_free(who);
		return -EBUSY;
	}
	if (clock_now_ms() - w->since < (uint64_t)s->takeover_ms)
		return 1;
	rc = take_from(s, i, me, w->x, SUPER_LEASE_WAIT, holder, err_msg);
	if (rc != -EAGAIN)
		return rc;
	w->x = 0; /* someone else took it meanwhile: watch the new holder */
	return 1;
}

/* take the lease of every member up, waiting out silent holders side by side */
static int lease_wait_all(struct super *s, uint64_t me, const char *holder, char **err_msg)
{
	struct watch w[LAYOUT_SET_MAX] = { 0 };
	unsigned int i, n = remote_nmembers(s->r), pending;
	int rc;

	for (i = 0; i < n; i++)
		w[i].on = remote_member_up(s->r, i);
	for (;;) {
		pending = 0;
		for (i = 0; i < n; i++) {
			if (!w[i].on)
				continue;
			rc = watch_step(s, i, &w[i], me, holder, err_msg);
			if (rc == -EHOSTDOWN && remote_is_set(s->r))
				rc = 0; /* gone meanwhile: the quorum counts without it */
			if (rc < 0)
				return rc;
			w[i].on = rc > 0;
			pending += rc > 0;
		}
		if (!pending)
			return 0;
		g_usleep((gulong)CLAMP(s->takeover_ms / 20, 10, 250) * 1000);
	}
}

/* take member i's lease by force, or a foreign word (see super_lease_acquire) */
static int lease_one(struct super *s, unsigned int i, uint64_t me, const char *holder,
		     enum super_lease_how how, char **err_msg)
{
	uint64_t old;
	int rounds, rc;

	for (rounds = 0; rounds < 16; rounds++) {
		rc = owner_cas(s, i, 0, me, &old);
		if (rc < 0)
			return cas_failed(rc, err_msg);
		if (old == 0)
			return acquired(s, i, me, holder);
		rc = take_from(s, i, me, old, how, holder, err_msg);
		if (rc != -EAGAIN)
			return rc;
	}
	if (err_msg)
		*err_msg = g_strdup("pool lease keeps changing hands; try again");
	return -EBUSY;
}

/* CAS(owner, me, 0) on every member we hold; 0, or the first failure */
static int release_held(struct super *s)
{
	unsigned int i;
	uint64_t old;
	int rc, ret = 0;

	for (i = 0; i < remote_nmembers(s->r); i++) {
		if (!s->held[i])
			continue;
		s->held[i] = false;
		if (!remote_member_up(s->r, i))
			continue; /* the set dropped it: its word is no longer the lease */
		rc = owner_cas(s, i, s->my_id, 0, &old);
		if (rc < 0) {
			g_message("releasing the lease on %s: %s", remote_member_name(s->r, i),
				  g_strerror(-rc));
			ret = ret ? ret : rc;
		} else if (old != s->my_id && old != 0) { /* 0: a retry after a lost reply */
			g_message("lease on %s was no longer ours at release",
				  remote_member_name(s->r, i));
			ret = ret ? ret : -ESTALE;
		}
	}
	s->my_id = 0;
	return ret;
}

int super_lease_acquire(struct super *s, const char *holder, int takeover_ms,
			enum super_lease_how how, char **err_msg)
{
	unsigned int i, held = 0;
	int rc = 0;

	set_timing(s, takeover_ms);
	s->my_id = remote_client_id(s->r);
	g_strlcpy(s->holder, holder ? holder : "", sizeof(s->holder));
	if (how == SUPER_LEASE_WAIT)
		rc = lease_wait_all(s, s->my_id, holder, err_msg);
	for (i = 0; i < remote_nmembers(s->r) && rc >= 0 && how != SUPER_LEASE_WAIT; i++) {
		if (!remote_member_up(s->r, i))
			continue;
		rc = lease_one(s, i, s->my_id, holder, how, err_msg);
		if (rc == -EHOSTDOWN && remote_is_set(s->r))
			rc = 0; /* gone meanwhile: the quorum below counts without it */
	}
	for (i = 0; i < remote_nmembers(s->r); i++)
		held += s->held[i];
	if (rc >= 0)
		rc = remote_quorum(s->r, held, err_msg);
	/* the claim may take long (a resync after a crash): the beats keep the deadline ahead */
	if (rc >= 0)
		rc = super_heartbeat_start(s);
	if (rc >= 0) {
		rc = remote_claim(s->r);
		if (rc < 0 && err_msg && !*err_msg)
			*err_msg = g_strdup_printf("writing the membership records: %s",
						   g_strerror(-rc));
	}
	if (rc < 0) {
		super_heartbeat_stop(s);
		release_held(s);
	}
	return rc < 0 ? rc : 0;
}

int super_lease_probe(struct super *s, int watch_ms, bool *alive, char **holder)
{
	uint64_t owner = 0, hb0, hb, since;
	unsigned int i;
	int rc = -EHOSTDOWN;

	*alive = false;
	if (holder)
		*holder = NULL;
	for (i = 0; i < remote_nmembers(s->r) && !owner; i++)
		if (remote_member_up(s->r, i))
			rc = owner_cas(s, i, 0, 0, &owner);
	if (rc < 0 || !owner)
		return rc < 0 ? rc : 0;
	i--;
	if (holder)
		*holder = read_holder(s, i);
	rc = read_heartbeat(s, i, &hb0);
	if (rc < 0)
		return rc;
	since = clock_now_ms();
	while (clock_now_ms() - since < (uint64_t)watch_ms) {
		g_usleep(100 * 1000);
		rc = read_heartbeat(s, i, &hb);
		if (rc < 0)
			return rc;
		if (hb != hb0) {
			*alive = true;
			return 0;
		}
	}
	return 0;
}

/* one beat on member i; false if the owner word names someone else (the mount fails) */
static bool beat(struct super *s, unsigned int i)
{
	uint64_t owner;
	char *who;
	int rc;

	rc = remote_member_fetch_add(s->r, i, LAYOUT_SB_LEASE_HEARTBEAT, 1, NULL);
	if (rc == 0 && s->self_fence)
		rc = owner_cas(s, i, s->my_id, s->my_id, &owner);
	if (rc == -EHOSTDOWN && remote_is_set(s->r))
		s->held[i] = false; /* the set dropped it */
	if (rc < 0) {
		g_debug("heartbeat on %s: %s", remote_member_name(s->r, i), g_strerror(-rc));
		return rc != -EHOSTDOWN;
	}
	if (!s->self_fence || owner == s->my_id)
		return true;
	/*
	 * A blank word on a set member: the member was lost and a blank
	 * replacement took its place between two beats (nobody clears our
	 * word but us). join() takes it like any member let in.
	 */
	if (!owner && remote_is_set(s->r)) {
		s->held[i] = false;
		return true;
	}
	who = read_holder(s, i);
	remote_fail(s->r, "LEASE LOST: the pool is now held by %s", who);
	g_free(who);
	return false;
}

/*
 * A member let into the set since the lease was taken (one being rebuilt or
 * resynced: it is written to) holds no lease word of ours: take it, so the
 * lease covers every member written. A word left by an earlier holder is
 * taken over after FENCE: we hold the majority, so that holder is dead or
 * cut off, and none of its writes may land on the member any more.
 */
static void join(struct super *s, unsigned int i)
{
	uint64_t old, seen;

	if (owner_cas(s, i, 0, s->my_id, &old) < 0)
		return;
	if (old && old != s->my_id) {
		if (remote_member_fence(s->r, i, old) < 0)
			return;
		if (owner_cas(s, i, old, s->my_id, &seen) < 0 || (seen != old && seen != s->my_id))
			return;
	}
	s->held[i] = write_holder(s, i, s->holder) == 0;
}

static void heartbeat_once(struct super *s)
{
	unsigned int i;
	bool ok = true;

	for (i = 0; i < remote_nmembers(s->r); i++) {
		if (!s->held[i] && (remote_member_up(s->r, i) || remote_member_joining(s->r, i)))
			join(s, i);
		if (s->held[i])
			ok = beat(s, i) && ok;
	}
	if (ok && s->self_fence)
		push_deadline(s);
}

static void *heartbeat_main(void *arg)
{
	struct super *s = arg;

	while (worker_wait(&s->hb, s->hb_interval_ms) == 0)
		if (!remote_failed(s->r))
			heartbeat_once(s);
	return NULL;
}

int super_heartbeat_start(struct super *s)
{
	if (s->hb.running || !s->my_id)
		return -EINVAL;
	return worker_start(&s->hb, "heartbeat", heartbeat_main, s);
}

void super_heartbeat_stop(struct super *s)
{
	worker_stop(&s->hb);
}

int super_lease_release(struct super *s)
{
	super_heartbeat_stop(s);
	remote_quiesce(s->r);
	return release_held(s);
}

/* ---- format and words ---- */

int super_format(struct super *s)
{
	uint64_t zone_end, stripe;
	struct layout_sb sb;
	uint8_t *tail;
	int rc;

	if (remote_zone(s->r, &zone_end, &stripe))
		rc = layout_geometry_zoned(remote_size(s->r), zone_end, stripe, &s->g);
	else
		rc = layout_geometry(remote_size(s->r), &s->g);
	if (rc < 0)
		return rc;
	random_bytes(s->g.uuid, sizeof(s->g.uuid));
	memcpy(&s->g.fs_id, s->g.uuid, 8);
	s->g.fs_id = le64toh(s->g.fs_id);
	s->g.format_time = (uint64_t)time(NULL);
	layout_sb_pack(&s->g, &sb);
	/* static part, ckpt_gen 0 and clean 0; [192, 320) is the lease */
	rc = remote_write(s->r, 0, &sb, LAYOUT_SB_LEASE_OWNER);
	if (rc < 0)
		return rc;
	tail = g_malloc0(LAYOUT_SB_SIZE - LAYOUT_SB_LEASE_END);
	rc = remote_write(s->r, LAYOUT_SB_LEASE_END, tail, LAYOUT_SB_SIZE - LAYOUT_SB_LEASE_END);
	g_free(tail);
	return rc;
}

int super_upgrade(struct super *s)
{
	struct layout_geom g = s->g;
	struct layout_sb sb;
	int rc;

	g.version = LAYOUT_VERSION;
	layout_sb_pack(&g, &sb);
	rc = remote_write(s->r, 0, &sb, LAYOUT_SB_STATIC_LEN);
	if (rc == 0)
		s->g = g;
	return rc;
}

/*
 * Every member keeps the word; a client that died while switching it left
 * the members before some point with the new generation (remote_cas goes in
 * member order) and the rest with the old one. Both name a complete
 * checkpoint: the newer one stands, and under the lease every member is
 * brought to it.
 */
int super_read_ckpt_gen(struct super *s, uint64_t *gen)
{
	uint64_t v[LAYOUT_SET_MAX], max = 0;
	unsigned int i, n = remote_nmembers(s->r);
	bool read = false;
	int rc;

	for (i = 0; i < n; i++) {
		rc = remote_member_fetch_add(s->r, i, LAYOUT_SB_CKPT_GEN, 0, &v[i]);
		if (rc == -EHOSTDOWN && remote_is_set(s->r))
			continue;
		if (rc < 0)
			return rc;
		max = read ? MAX(max, v[i]) : v[i];
		read = true;
	}
	if (!read)
		return -EIO;
	for (i = 0; i < n && s->my_id; i++) {
		if (!remote_member_up(s->r, i) || v[i] == max)
			continue;
		g_message("%s names checkpoint %" G_GUINT64_FORMAT ", the others %" G_GUINT64_FORMAT
			  ": taking the newer", remote_member_name(s->r, i), (guint64)v[i],
			  (guint64)max);
		rc = remote_member_cas(s->r, i, LAYOUT_SB_CKPT_GEN, v[i], max, NULL);
		if (rc < 0 && rc != -EHOSTDOWN)
			return rc;
	}
	*gen = max;
	return 0;
}

int super_commit_ckpt_gen(struct super *s, uint64_t old, uint64_t new)
{
	uint64_t seen;
	int rc;

	rc = remote_cas(s->r, LAYOUT_SB_CKPT_GEN, old, new, &seen);
	if (rc < 0)
		return rc;
	/*
	 * seen == new: an earlier attempt of ours switched it and its reply was
	 * lost (a retry writes the same generation's slot with a newer state,
	 * so the word already names the right slot).
	 */
	if (seen != old && seen != new) {
		remote_fail(s->r,
			    "checkpoint generation is %" G_GUINT64_FORMAT ", expected %"
			    G_GUINT64_FORMAT ": someone else writes this pool",
			    (guint64)seen, (guint64)old);
		return -ESTALE;
	}
	return 0;
}

int super_read_clean(struct super *s, bool *clean)
{
	__le64 v;
	int rc;

	rc = remote_read(s->r, LAYOUT_SB_CLEAN, &v, sizeof(v));
	if (rc < 0)
		return rc;
	*clean = le64toh(v) == 1;
	return 0;
}

int super_write_clean(struct super *s, bool clean)
{
	__le64 v = htole64(clean ? 1 : 0);

	return remote_write(s->r, LAYOUT_SB_CLEAN, &v, sizeof(v));
}
