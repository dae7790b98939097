// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * scrub.c - comparing the copies of a member set (remote_scrub, remote.h):
 * rmemfs-fsck's check of the members themselves.
 *
 * Every unit is read from each member that is up and holds a copy, and the
 * copies are compared byte for byte; so is the static part of block 0,
 * which every member keeps. Copies differ only where a client died between
 * writing one copy and the next (writes it never acknowledged), or where
 * a member's memory was damaged. With three copies the majority is the
 * truth; with two, which is right cannot be told from the copies alone, and
 * the repair makes the first copy in placement order the truth - the copies
 * agree again, and every read returns the same bytes. (rmemfs-fsck checks
 * the data blocks against their checksums before this, and rewrites a bad
 * copy from a good one: what differs here is then what no checksum covers.)
 *
 * An erasure-coded set's stripes: the parity is coded from the data
 * fragments and compared with the parity fragments; the repair writes it
 * over one that differs (the data is the truth: the checksums vouched for
 * it first). With a data fragment down, its decode from the first parities
 * is checked against the parities left over, if any.
 */
#define G_LOG_DOMAIN "rmemfs-remote"

#include "remote_int.h"

#include <errno.h>
#include <stdarg.h>
#include <string.h>

#include <glib.h>

#include "ec_codec.h"

static void say(struct remote_scrub *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void say(struct remote_scrub *s, const char *fmt, ...)
{
	va_list ap;
	char *line;

	if (!s->report)
		return;
	va_start(ap, fmt);
	line = g_strdup_vprintf(fmt, ap);
	va_end(ap);
	s->report(s->ctx, line);
	g_free(line);
}

/*
 * Block by block, where the copies of unit u differ: the first copy the
 * judge calls right (none: the reference's block) goes into truth, which
 * starts as the reference. true if truth took a block of another copy.
 */
static bool judge_blocks(struct remote *r, const struct remote_judge *j, uint64_t u,
			 uint8_t **bufs, const bool *have, int ref, uint8_t *truth)
{
	uint64_t b, nb = r->unit / LAYOUT_BLOCK;
	bool mixed = false;
	uint32_t k;

	memcpy(truth, bufs[ref], r->unit);
	for (b = 0; b < nb; b++) {
		uint64_t at = b * LAYOUT_BLOCK;
		bool differ = false;

		for (k = 0; k < r->place.r && !differ; k++)
			differ = have[k] && memcmp(bufs[k] + at, bufs[ref] + at, LAYOUT_BLOCK);
		if (!differ || j->block(j->ctx, u * r->unit + at, bufs[ref] + at) != 0)
			continue;
		for (k = 0; k < r->place.r; k++) {
			if (!have[k] || (int)k == ref ||
			    j->block(j->ctx, u * r->unit + at, bufs[k] + at) != 1)
				continue;
			memcpy(truth + at, bufs[k] + at, LAYOUT_BLOCK);
			mixed = true;
			break;
		}
	}
	return mixed;
}

/*
 * Compare unit u's copies (bufs: one unit each). The reference is the copy
 * most others agree with (three copies: a majority), ties going to the
 * first in placement order; where the copies differ, a block of it the
 * judge calls wrong is taken from the first copy it calls right.
 */
int scrub_unit(struct remote *r, struct remote_scrub *s, uint64_t u, uint8_t **bufs)
{
	struct place_copy c[PLACE_MAX_REPLICAS];
	unsigned int agree[PLACE_MAX_REPLICAS] = { 0 }, nhave = 0;
	bool have[PLACE_MAX_REPLICAS] = { false }, mixed = false;
	uint8_t *truth;
	uint32_t k, j;
	int ref = -1, rc;

	place_unit(&r->place, u, c);
	for (k = 0; k < r->place.r; k++) {
		if (!atomic_load(&r->mem[c[k].member].up))
			continue;
		rc = member_read(r->mem[c[k].member].m, remote_slot_off(r, c[k].slot),
				 bufs[k], r->unit);
		if (rc < 0)
			return rc;
		have[k] = true;
		nhave++;
		for (j = 0; j < k; j++) {
			if (have[j] && !memcmp(bufs[j], bufs[k], r->unit)) {
				agree[j]++;
				agree[k]++;
			}
		}
	}
	for (k = 0; k < r->place.r; k++)
		if (have[k] && (ref < 0 || agree[k] > agree[ref]))
			ref = (int)k;
	if (ref < 0)
		return 0;
	truth = bufs[ref];
	/* the judge, where some copy differs from the reference */
	if (s->judge && agree[ref] + 1 < nhave) {
		truth = scrub_spare(r, bufs);
		mixed = judge_blocks(r, s->judge, u, bufs, have, ref, truth);
	}
	for (k = 0; k < r->place.r; k++) {
		if (!have[k] || !memcmp(truth, bufs[k], r->unit))
			continue;
		s->differ++;
		say(s, "unit %" G_GUINT64_FORMAT " (bytes %" G_GUINT64_FORMAT "..): the copy on %s "
		    "differs from the one on %s%s%s", (guint64)u, (guint64)(u * r->unit),
		    r->mem[c[k].member].name, r->mem[c[ref].member].name,
		    mixed ? " (blocks that fail their checksum there taken from another copy)" : "",
		    s->repair ? ": rewritten from it" : "");
		if (!s->repair)
			continue;
		rc = member_write(r->mem[c[k].member].m, remote_slot_off(r, c[k].slot), truth,
				  r->unit);
		if (rc < 0)
			return rc;
		s->repaired++;
	}
	return 0;
}

/* the static part of block 0 is the same on every member */
static int scrub_block0(struct remote *r, struct remote_scrub *s, uint8_t *ref, uint8_t *buf)
{
	bool have = false;
	unsigned int i;
	int rc;

	for (i = 0; i < r->n; i++) {
		if (!atomic_load(&r->mem[i].up))
			continue;
		rc = member_read(r->mem[i].m, 0, have ? buf : ref, LAYOUT_SB_STATIC_LEN);
		if (rc < 0)
			return rc;
		if (have && memcmp(ref, buf, LAYOUT_SB_STATIC_LEN)) {
			s->differ++;
			say(s, "the superblock on %s differs from the first member's", r->mem[i].name);
		}
		have = true;
	}
	return 0;
}

/* the buffer past the copies and fragments: a unit for scrub_unit's truth, scrub_stripe's keep */
static unsigned int room_units(const struct remote *r)
{
	return MAX(PLACE_MAX_REPLICAS, r->ec_k + 2 * r->ec_m);
}

uint8_t *scrub_spare(struct remote *r, uint8_t **bufs)
{
	return bufs[room_units(r)];
}

uint8_t **scrub_room(struct remote *r)
{
	unsigned int k, n = room_units(r) + 1;
	uint8_t **bufs = g_new0(uint8_t *, n + 1);

	for (k = 0; k < n; k++)
		bufs[k] = g_malloc(r->unit);
	return bufs;
}

void scrub_room_free(uint8_t **bufs)
{
	unsigned int k;

	for (k = 0; bufs && bufs[k]; k++)
		g_free(bufs[k]);
	g_free(bufs);
}

/* the fragments of stripe st on members up, into bufs (a unit each); *got: which */
static int read_frags(struct remote *r, uint64_t st, uint8_t **bufs, uint32_t *got)
{
	unsigned int i, w = r->ec_k + r->ec_m;
	uint64_t moff;
	uint32_t m;
	int rc;

	*got = 0;
	for (i = 0; i < w; i++) {
		ec_frag(r, st, i, &m, &moff);
		if (!atomic_load(&r->mem[m].up))
			continue;
		rc = member_read(r->mem[m].m, moff, bufs[i], r->unit);
		if (rc < 0)
			return rc;
		*got |= 1U << i;
	}
	return 0;
}

/* the member holding fragment i of stripe st, for messages */
static const char *frag_host(struct remote *r, uint64_t st, unsigned int i)
{
	uint64_t moff;
	uint32_t m;

	ec_frag(r, st, i, &m, &moff);
	return r->mem[m].name;
}

#define STRIPE_FMT \
	"stripe %" G_GUINT64_FORMAT " (bytes %" G_GUINT64_FORMAT "..%" G_GUINT64_FORMAT ")"
#define STRIPE_ARGS(r, st) (guint64)(st), (guint64)(ec_stripe_unit(r, st) * (r)->unit), \
	(guint64)(ec_stripe_unit(r, (st) + 1) * (r)->unit - 1)

/* is the block at b of data fragment i of stripe st (in bufs[i]) right? (remote_judge) */
static int judge_frag(struct remote *r, const struct remote_judge *j, uint64_t st, unsigned int i,
		      const uint8_t *frag, uint64_t b)
{
	return j->block(j->ctx, (ec_stripe_unit(r, st) + i) * r->unit + b, frag + b);
}

/*
 * A data fragment of stripe st was not read (its member is down): decode
 * it from the data read and the first parities read, code the parity from
 * that, and compare it with the parities left over. None left: it cannot
 * be verified. A parity that disagrees: which side is right cannot be told.
 */
static int check_decode(struct remote *r, struct remote_scrub *s, uint64_t st, uint8_t **bufs,
			uint32_t got, bool *doubt)
{
	unsigned int k = r->ec_k, m = r->ec_m, q, down, checked = 0;
	uint32_t data = (1U << k) - 1, src = got & data;
	uint64_t b;
	uint8_t **coded = bufs + k + m;
	int rc;

	for (q = 0; q < m && (unsigned int)__builtin_popcount(src) < k; q++)
		src |= got & (1U << (k + q));
	rc = ec_codec_decode(r->codec, r->unit, bufs, src, data);
	if (rc < 0)
		return rc;
	ec_codec_encode(r->codec, r->unit, bufs, coded);
	down = (unsigned int)__builtin_ctz(data & ~got);
	for (b = 0; s->judge && b < r->unit; b += LAYOUT_BLOCK) {
		if (judge_frag(r, s->judge, st, down, bufs[down], b) != 0)
			continue;
		s->differ += !*doubt; /* a stripe once */
		*doubt = true;
		say(s, STRIPE_FMT ": the data fragment on %s is down, and its decode fails the "
		    "checksum of the block at byte %" G_GUINT64_FORMAT " (a torn write): it reads "
		    "as an error", STRIPE_ARGS(r, st), frag_host(r, st, down),
		    (guint64)((ec_stripe_unit(r, st) + down) * r->unit + b));
	}
	for (q = 0; q < m; q++) {
		if (!(got & ~src & (1U << (k + q))))
			continue;
		checked++;
		if (!memcmp(bufs[k + q], coded[q], r->unit))
			continue;
		*doubt = true;
		s->differ++;
		say(s, STRIPE_FMT ": the data fragment on %s is down, and the parity on %s "
		    "disagrees with its decode from the others: which is right cannot be told",
		    STRIPE_ARGS(r, st), frag_host(r, st, down), frag_host(r, st, k + q));
	}
	if (!checked) {
		*doubt = true;
		s->unverified++;
	}
	return 0;
}

/*
 * Every data fragment up (got): a block the judge calls wrong is decoded
 * from the other data and each parity up in turn, and the first decode it
 * calls right takes its place, in bufs[i] and (repair) on the member - so
 * the parity coded next from the data does not make a bad block stick.
 */
static int judge_data(struct remote *r, struct remote_scrub *s, uint64_t st, uint8_t **bufs,
		      uint32_t got)
{
	unsigned int k = r->ec_k, i, q;
	uint32_t data = (1U << k) - 1, member;
	uint8_t *keep = scrub_spare(r, bufs);
	uint64_t b, moff;
	bool bad, fixed;
	int rc;

	for (i = 0; i < k; i++) {
		for (b = 0, bad = false; b < r->unit && !bad; b += LAYOUT_BLOCK)
			bad = judge_frag(r, s->judge, st, i, bufs[i], b) == 0;
		if (!bad)
			continue;
		memcpy(keep, bufs[i], r->unit);
		fixed = false;
		for (q = 0; q < r->ec_m; q++) {
			if (!(got & (1U << (k + q))))
				continue;
			rc = ec_codec_decode(r->codec, r->unit, bufs, (data & ~(1U << i)) |
					     (1U << (k + q)), 1U << i);
			if (rc < 0)
				return rc;
			for (b = 0; b < r->unit; b += LAYOUT_BLOCK) {
				if (judge_frag(r, s->judge, st, i, keep, b) != 0 ||
				    judge_frag(r, s->judge, st, i, bufs[i], b) != 1)
					continue;
				memcpy(keep + b, bufs[i] + b, LAYOUT_BLOCK);
				fixed = true;
			}
			memcpy(bufs[i], keep, r->unit);
		}
		if (!fixed)
			continue;
		s->differ++;
		say(s, STRIPE_FMT ": the data fragment on %s fails its checksum where a decode with "
		    "the parity passes%s", STRIPE_ARGS(r, st), frag_host(r, st, i),
		    s->repair ? ": rewritten from the decode" : "");
		if (!s->repair)
			continue;
		ec_frag(r, st, i, &member, &moff);
		rc = member_write(r->mem[member].m, moff, keep, r->unit);
		if (rc < 0)
			return rc;
		s->repaired++;
	}
	return 0;
}

int scrub_stripe(struct remote *r, struct remote_scrub *s, uint64_t st, uint8_t **bufs,
		 bool *doubt)
{
	unsigned int k = r->ec_k, m = r->ec_m, q;
	uint32_t data = (1U << k) - 1, got, member;
	uint8_t **coded = bufs + k + m;
	uint64_t moff;
	int rc;

	*doubt = false;
	rc = read_frags(r, st, bufs, &got);
	if (rc < 0)
		return rc;
	if ((unsigned int)__builtin_popcount(got) < k)
		return -EIO; /* more than m members lost: the set has failed */
	if ((got & data) != data)
		return check_decode(r, s, st, bufs, got, doubt);
	if (s->judge && (got & ~data)) {
		rc = judge_data(r, s, st, bufs, got);
		if (rc < 0)
			return rc;
	}
	if (!(got & ~data))
		s->unverified++; /* no parity up to compare (it is rebuilt from the data) */
	ec_codec_encode(r->codec, r->unit, bufs, coded);
	for (q = 0; q < m; q++) {
		if (!(got & (1U << (k + q))) || !memcmp(bufs[k + q], coded[q], r->unit))
			continue;
		s->differ++;
		say(s, STRIPE_FMT ": the parity on %s differs from the data%s", STRIPE_ARGS(r, st),
		    frag_host(r, st, k + q), s->repair ? ": coded anew from it" : "");
		if (!s->repair)
			continue;
		ec_frag(r, st, k + q, &member, &moff);
		rc = member_write(r->mem[member].m, moff, coded[q], r->unit);
		if (rc < 0)
			return rc;
		s->repaired++;
	}
	return 0;
}

/* the last line: what was compared */
static void summary(struct remote *r, struct remote_scrub *s, uint64_t units)
{
	if (!r->ec_k) {
		say(s, "member set: %u members (%u up), replicas %u, %" G_GUINT64_FORMAT
		    " units of %" G_GUINT64_FORMAT " KiB compared: %u differ", r->n,
		    remote_quorum_up(r), r->place.r, (guint64)units, (guint64)(r->unit >> 10),
		    s->differ);
		return;
	}
	say(s, "member set: %u members (%u up), replicas %u, %" G_GUINT64_FORMAT " units of %"
	    G_GUINT64_FORMAT " KiB, ec %u+%u, %" G_GUINT64_FORMAT " stripes of %" G_GUINT64_FORMAT
	    " KiB compared: %u differ", r->n, remote_quorum_up(r), r->place.r, (guint64)units,
	    (guint64)(r->unit >> 10), r->ec_k, r->ec_m, (guint64)ec_stripes(r),
	    (guint64)((r->unit * r->ec_k) >> 10), s->differ);
	if (s->unverified)
		say(s, "%u stripes could not be verified: too few of their fragments are on members "
		    "that are up", s->unverified);
}

int remote_scrub(struct remote *r, struct remote_scrub *s)
{
	uint64_t u, st, total;
	uint8_t **bufs;
	bool doubt;
	int rc = 0;

	s->differ = s->repaired = s->unverified = 0;
	if (!r->set)
		return 0;
	total = remote_rep_units(r);
	bufs = scrub_room(r);
	if (s->repair)
		pthread_rwlock_rdlock(&r->rb_lock);
	rc = scrub_block0(r, s, bufs[0], bufs[1]);
	for (u = 0; u < total && !rc; u++)
		rc = scrub_unit(r, s, u, bufs);
	/* a stripe's lock keeps this process's writers out of it (another's it cannot) */
	for (st = 0; st < ec_stripes(r) && !rc; st++) {
		ec_lock(r, st);
		rc = scrub_stripe(r, s, st, bufs, &doubt);
		ec_unlock(r, st);
	}
	if (s->repair)
		pthread_rwlock_unlock(&r->rb_lock);
	scrub_room_free(bufs);
	if (rc == 0)
		summary(r, s, total);
	return rc;
}
