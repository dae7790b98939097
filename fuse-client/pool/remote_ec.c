// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * remote_ec.c - the stripes of an erasure-coded member set (remote_int.h).
 *
 * A request on the EC zone is cut into pieces, each inside one data
 * fragment. A read sends each piece to its fragment's member, straight into
 * the caller's buffer; a piece whose member is down is decoded, under the
 * stripe's lock, from k fragments that are up. A write takes rb_lock for
 * reading, marks the intent map, takes the stripe locks in ascending order
 * and, per stripe, chooses how to bring the parity along:
 *
 *   full    the pieces cover the stripe's column range in every data
 *           fragment: code the parity from them, read nothing;
 *   rmw     read the old bytes under the pieces and the parity's range,
 *           and update the parity by the difference (ec_codec_update);
 *   rcw     read the rest of the range from the data fragments not
 *           covered, and code the parity anew;
 *   decode  a fragment the write needs to read is on a member that is not
 *           up (or one being rebuilt must get parity it cannot update):
 *           read any k fragments of the range, decode the data, code anew.
 *
 * rmw and rcw take whichever reads fewer fragments (a tie goes to rcw,
 * which rewrites the parity from the data). The reads of a round go out
 * to all members at once; a member that fails is dropped and the round is
 * planned again. Then the pieces and the parity go out in one round, and a
 * fragment on a member that is down is left to its dirty map. Stripes are
 * taken a batch at a time, so the scratch stays bounded.
 *
 * The stripe locks make a stripe's read-modify-write whole against every
 * other writer of it (two write-backs on different blocks of one stripe
 * would otherwise both update the old parity) and against degraded reads,
 * which decode from fragments that must agree. Healthy reads take none.
 *
 * The rebuild and the checksums' alternatives work on whole fragments of
 * one stripe at a time: they read and write through ec_frags_read and
 * ec_frags_write, the same rounds. (scrub.c reads a stripe member by member
 * as it does copies: it may not call this file, which calls intent.c.)
 */
#define G_LOG_DOMAIN "rmemfs-remote"

#include "remote_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <glib.h>

#include "clock.h"
#include "ec_codec.h"

/* scratch per batch of stripes: about this much, but always one stripe */
#define EC_BATCH_SCRATCH (4U << 20)
/* smaller scratch comes from the heap; bigger is kept (EC_SPARES buffers) */
#define EC_SPARE_MIN (256U << 10)
/* rounds of reads a stripe may need when members drop out under it */
#define EC_MAX_ROUNDS (EC_MAX_M + 2U)
/*
 * A slow member: reads of its fragments are decoded from k others instead.
 * Reads up to EC_SMALL_READ feed each member's average; a member whose
 * average is EC_SLOW_TIMES the typical member's (the median), and at least
 * EC_SLOW_NS more, is slow; one read in EC_SLOW_PROBE still goes to it, so
 * that the average sees it recover.
 */
#define EC_SMALL_READ (64U << 10)
#define EC_SLOW_TIMES 4U
#define EC_SLOW_NS 500000U
#define EC_SLOW_PROBE 64U

enum ec_how { EC_FULL, EC_RMW, EC_RCW, EC_DECODE };

/* one piece of a request, inside one data fragment */
struct ec_piece {
	uint64_t s; /* stripe */
	uint32_t j; /* data fragment */
	uint32_t o, len; /* within the fragment */
	uint8_t *buf; /* the caller's bytes (writes: the zero page for zeroes) */
	uint8_t *old; /* rmw: the old bytes under it */
	bool done; /* reads: arrived */
};

/* one stripe of a batch */
struct ec_stripe {
	uint64_t s;
	unsigned int first, n; /* its pieces */
	uint32_t lo, hi; /* the column range the pieces span */
	struct place_copy f[EC_MAX_FRAGS];
	uint32_t up, writable; /* fragments whose members are up / take writes */
	uint32_t touched, full; /* data fragments with pieces / covered over [lo, hi) */
	uint32_t want, got; /* fragments to read this round / read */
	bool short_read; /* a read of this round did not arrive */
	enum ec_how how;
	/* [lo, hi) of each fragment, then two spares: a parity not kept, a difference */
	uint8_t *col[EC_MAX_FRAGS + 2];
};

/* one entry of a round: a range on a member */
struct ec_io {
	uint32_t m;
	uint64_t moff;
	struct iovec iov;
	unsigned int st; /* the stripe (or piece, for reads) it serves */
	unsigned int frag; /* the fragment; EC_MAX_FRAGS: a piece's old bytes */
};

struct ec_round;

struct ec_share {
	struct ec_round *rd;
	uint32_t m;
	unsigned int first, n;
};

/* a round: entries sorted by member, one vectored request per member */
struct ec_round {
	struct remote *r;
	enum xport_op_type type;
	struct ec_io *io;
	unsigned int n, cap;
	uint64_t *offs;
	struct iovec *iov;
	struct ec_share sh[LAYOUT_SET_MAX];
	struct lane_job jobs[LAYOUT_SET_MAX];
	unsigned int nsh;
};

/* ---- placement ---- */

void ec_locate(const struct remote *r, uint64_t off, uint64_t *s, uint32_t *j, uint32_t *o)
{
	uint64_t d = off - r->zone_end, fu = d / r->unit;

	*s = fu / r->ec_k;
	*j = (uint32_t)(fu % r->ec_k);
	*o = (uint32_t)(d % r->unit);
}

static uint64_t frag_moff(const struct remote *r, const struct ec_stripe *st, unsigned int i)
{
	return remote_slot_off(r, r->ec_slot0 + st->f[i].slot);
}

/* ---- locks ---- */

/* the locks of stripes st[0..n) (ascending, each once): whole stripes are ours */
static void lock_stripes(struct remote *r, const struct ec_stripe *st, unsigned int n, bool on)
{
	bool seen[EC_LOCKS] = { 0 };
	unsigned int k, i;

	/* stripes are ascending, but their locks wrap around: walk the lock numbers */
	for (k = 0; k < n; k++)
		seen[st[k].s % EC_LOCKS] = true;
	for (i = 0; i < EC_LOCKS; i++) {
		if (!seen[i])
			continue;
		if (on)
			pthread_mutex_lock(&r->ec_locks[i]);
		else
			pthread_mutex_unlock(&r->ec_locks[i]);
	}
}

/* ---- slow members ---- */

/* average in a small read's time (racy updates lose a sample, no more) */
static void note_read_time(struct remote_member *rm, uint64_t ns)
{
	uint64_t avg = atomic_load(&rm->read_ns);

	atomic_store(&rm->read_ns, avg ? avg - avg / 8 + ns / 8 : ns);
}

static int u64_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* the members up whose reads are slow against the typical member's */
static uint32_t slow_members(struct remote *r)
{
	uint64_t ns[LAYOUT_SET_MAX], typical;
	unsigned int i, n = 0;
	uint32_t slow = 0;

	for (i = 0; i < r->n; i++)
		if (atomic_load(&r->mem[i].up) && atomic_load(&r->mem[i].read_ns))
			ns[n++] = atomic_load(&r->mem[i].read_ns);
	if (n < 2)
		return 0;
	qsort(ns, n, sizeof(ns[0]), u64_cmp);
	typical = ns[(n - 1) / 2];
	for (i = 0; i < r->n; i++) {
		uint64_t t = atomic_load(&r->mem[i].read_ns);

		if (atomic_load(&r->mem[i].up) && t > EC_SLOW_TIMES * typical &&
		    t > typical + EC_SLOW_NS)
			slow |= 1U << i;
	}
	return slow;
}

/* does a read of a fragment on member m go there, or is it decoded from others? */
static bool read_there(struct remote *r, uint32_t m, uint32_t slow)
{
	if (!atomic_load(&r->mem[m].up))
		return false;
	return !(slow & (1U << m)) || atomic_fetch_add(&r->mem[m].probe, 1) % EC_SLOW_PROBE == 0;
}

/* ---- rounds ---- */

static void round_init(struct ec_round *rd, struct remote *r, enum xport_op_type type,
		       unsigned int cap)
{
	memset(rd, 0, sizeof(*rd));
	rd->r = r;
	rd->type = type;
	rd->cap = cap;
	rd->io = g_new(struct ec_io, cap);
	rd->offs = g_new(uint64_t, cap);
	rd->iov = g_new(struct iovec, cap);
}

static void round_clear(struct ec_round *rd)
{
	g_free(rd->io);
	g_free(rd->offs);
	g_free(rd->iov);
}

static void round_add(struct ec_round *rd, uint32_t m, uint64_t moff, void *buf, size_t len,
		      unsigned int st, unsigned int frag)
{
	g_assert(rd->n < rd->cap);
	rd->io[rd->n++] = (struct ec_io){ .m = m, .moff = moff, .iov = { buf, len }, .st = st,
					  .frag = frag };
}

static int io_cmp(const void *a, const void *b)
{
	const struct ec_io *x = a, *y = b;

	if (x->m != y->m)
		return x->m < y->m ? -1 : 1;
	return x->moff < y->moff ? -1 : x->moff > y->moff;
}

static int share_run(void *arg)
{
	struct ec_share *sh = arg;
	struct ec_round *rd = sh->rd;
	struct remote_member *rm = &rd->r->mem[sh->m];
	uint64_t t0 = clock_now_ns();
	size_t bytes = 0;
	unsigned int e;
	int rc;

	atomic_fetch_add(&rm->inflight, 1);
	if (rd->type == XPORT_READ)
		rc = member_readv(rm->m, rd->offs + sh->first, rd->iov + sh->first, (int)sh->n);
	else
		rc = member_writev(rm->m, rd->offs + sh->first, rd->iov + sh->first, (int)sh->n);
	atomic_fetch_sub(&rm->inflight, 1);
	for (e = sh->first; e < sh->first + sh->n; e++)
		bytes += rd->iov[e].iov_len;
	if (rd->type == XPORT_READ && !rc && bytes <= EC_SMALL_READ)
		note_read_time(rm, clock_now_ns() - t0);
	return rc;
}

/* send the round: one request per member, the members at once */
static void round_send(struct ec_round *rd)
{
	unsigned int e, k;

	qsort(rd->io, rd->n, sizeof(*rd->io), io_cmp);
	rd->nsh = 0;
	for (e = 0; e < rd->n; e++) {
		if (!e || rd->io[e].m != rd->io[e - 1].m)
			rd->sh[rd->nsh++] = (struct ec_share){ .rd = rd, .m = rd->io[e].m, .first = e };
		rd->sh[rd->nsh - 1].n++;
		rd->offs[e] = rd->io[e].moff;
		rd->iov[e] = rd->io[e].iov;
	}
	for (k = 0; k < rd->nsh; k++)
		rd->jobs[k] = (struct lane_job){ .member = rd->sh[k].m, .fn = share_run,
						 .arg = &rd->sh[k] };
	if (rd->nsh > 1 && rd->r->lanes) {
		lanes_run(rd->r->lanes, rd->jobs, rd->nsh);
		return;
	}
	for (k = 0; k < rd->nsh; k++)
		rd->jobs[k].rc = share_run(&rd->sh[k]);
}

/*
 * The shares that failed: a member gone is dropped (its loss recorded) and
 * its entries go to gone(), anything else is the round's error.
 */
static int round_result(struct ec_round *rd, void (*gone)(struct ec_round *, struct ec_io *,
							    void *), void *ctx)
{
	struct remote *r = rd->r;
	unsigned int k, e;
	int rc = 0;

	for (k = 0; k < rd->nsh; k++) {
		struct ec_share *sh = &rd->sh[k];
		int src = rd->jobs[k].rc;

		if (!src)
			continue;
		if (src > 0 || !remote_member_gone(r, sh->m, src)) {
			rc = rc ? rc : (src > 0 ? -EIO : src);
			continue;
		}
		for (e = sh->first; e < sh->first + sh->n; e++)
			gone(rd, &rd->io[e], ctx);
	}
	if (!rc && atomic_load(&r->failed))
		rc = -EIO;
	return rc;
}

/* ---- cutting a request ---- */

static int piece_cmp(const void *a, const void *b)
{
	const struct ec_piece *x = a, *y = b;

	if (x->s != y->s)
		return x->s < y->s ? -1 : 1;
	if (x->j != y->j)
		return x->j < y->j ? -1 : 1;
	return x->o < y->o ? -1 : x->o > y->o;
}

/* the request's pieces, in stripe, fragment and offset order; *np: how many */
static struct ec_piece *cut(struct remote *r, const uint64_t *offs, const struct iovec *iov,
			    int cnt, uint8_t *zero, unsigned int *np)
{
	unsigned int n = 0;
	struct ec_piece *p;
	int i;

	for (i = 0; i < cnt; i++)
		n += (unsigned int)(iov[i].iov_len / r->unit) + 2;
	p = g_new0(struct ec_piece, n);
	n = 0;
	for (i = 0; i < cnt; i++) {
		size_t pos = 0;

		while (pos < iov[i].iov_len) {
			struct ec_piece *q = &p[n++];

			ec_locate(r, offs[i] + pos, &q->s, &q->j, &q->o);
			q->len = (uint32_t)MIN((uint64_t)(iov[i].iov_len - pos), r->unit - q->o);
			q->buf = iov[i].iov_base ? (uint8_t *)iov[i].iov_base + pos : zero + q->o;
			pos += q->len;
		}
	}
	qsort(p, n, sizeof(*p), piece_cmp);
	*np = n;
	return p;
}

/* bytes of the columns of t: every fragment's range and the spares */
static size_t cols_bytes(const struct remote *r, const struct ec_stripe *t)
{
	return (size_t)(t->hi - t->lo) * (r->ec_k + r->ec_m + 2);
}

/* a write's scratch for stripe t: its columns and the old bytes under its pieces */
static size_t stripe_bytes(const struct remote *r, const struct ec_stripe *t,
			   const struct ec_piece *p)
{
	size_t bytes = cols_bytes(r, t);
	unsigned int i;

	for (i = t->first; i < t->first + t->n; i++)
		bytes += p[i].len;
	return bytes;
}

/* group pieces [*next, np) into stripes, no more than the scratch allows; the count */
static unsigned int take_stripes(struct remote *r, struct ec_piece *p, unsigned int np,
				 unsigned int *next, struct ec_stripe *st, unsigned int max)
{
	unsigned int n = 0;
	size_t scratch = 0;

	while (*next < np && n < max) {
		struct ec_stripe *t = &st[n];
		unsigned int i = *next;

		memset(t, 0, sizeof(*t));
		t->s = p[i].s;
		t->first = i;
		t->lo = UINT32_MAX;
		for (; i < np && p[i].s == t->s; i++) {
			t->lo = MIN(t->lo, p[i].o);
			t->hi = MAX(t->hi, p[i].o + p[i].len);
		}
		t->n = i - t->first;
		if (n && scratch + stripe_bytes(r, t, p) > EC_BATCH_SCRATCH)
			break;
		scratch += stripe_bytes(r, t, p);
		*next = i;
		n++;
	}
	return n;
}

/* ---- reads ---- */

static void read_gone(struct ec_round *rd, struct ec_io *io, void *ctx)
{
	struct ec_piece *p = ctx;

	(void)rd;
	p[io->st].done = false;
}

static void gather_gone(struct ec_round *rd, struct ec_io *io, void *ctx)
{
	struct ec_stripe *st = ctx;

	(void)rd;
	st[io->st].short_read = true;
	if (io->frag < EC_MAX_FRAGS)
		st[io->st].got &= ~(1U << io->frag);
}

/*
 * Read [lo, hi) of the fragments in want into col (and for rmw the old
 * bytes under the pieces), for every stripe of st[0..n): one round, the
 * members at once. A fragment whose member went away is left out of got,
 * and the stripe's read is short.
 */
static int gather(struct remote *r, struct ec_stripe *st, unsigned int n, struct ec_piece *p)
{
	unsigned int k, i, cap = 0, w = r->ec_k + r->ec_m;
	struct ec_round rd;
	int rc;

	for (k = 0; k < n; k++)
		cap += w + (st[k].how == EC_RMW ? st[k].n : 0);
	if (!cap)
		return 0;
	round_init(&rd, r, XPORT_READ, cap);
	for (k = 0; k < n; k++) {
		struct ec_stripe *t = &st[k];

		t->got = 0;
		t->short_read = false;
		for (i = 0; i < w; i++) {
			if (!(t->want & (1U << i)))
				continue;
			round_add(&rd, t->f[i].member, frag_moff(r, t, i) + t->lo, t->col[i],
				  t->hi - t->lo, k, i);
			t->got |= 1U << i;
		}
		for (i = t->first; t->how == EC_RMW && i < t->first + t->n; i++) {
			struct ec_piece *q = &p[i];

			round_add(&rd, t->f[q->j].member, frag_moff(r, t, q->j) + q->o, q->old, q->len,
				  k, EC_MAX_FRAGS);
		}
	}
	if (!rd.n) {
		round_clear(&rd);
		return 0;
	}
	round_send(&rd);
	rc = round_result(&rd, gather_gone, st);
	round_clear(&rd);
	return rc;
}

/* which fragments of stripe t are on members up, and take writes */
static void stripe_members(struct remote *r, struct ec_stripe *t)
{
	uint64_t u = ec_stripe_unit(r, t->s);
	unsigned int i, w = r->ec_k + r->ec_m;

	place_stripe(r->stripes, t->s, t->f);
	t->up = t->writable = 0;
	for (i = 0; i < w; i++) {
		uint32_t m = t->f[i].member;

		if (atomic_load(&r->mem[m].up))
			t->up |= 1U << i;
		if (atomic_load(&r->mem[m].up) || rebuild_takes(r, m, u))
			t->writable |= 1U << i;
	}
}

/* k fragments of t that are up, the data ones first, none of those in skip */
static uint32_t pick_sources(const struct remote *r, const struct ec_stripe *t, uint32_t skip)
{
	unsigned int i, w = r->ec_k + r->ec_m, have = 0;
	uint32_t src = 0;

	for (i = 0; i < w && have < r->ec_k; i++) {
		if (!(t->up & (1U << i)) || (skip & (1U << i)))
			continue;
		src |= 1U << i;
		have++;
	}
	return have == r->ec_k ? src : 0;
}

static int no_fragments(struct remote *r, const struct ec_stripe *t)
{
	remote_fail(r, "stripe %" G_GUINT64_FORMAT " has fewer than %u fragments on members that "
		    "are up (ec=%u+%u)", (guint64)t->s, r->ec_k, r->ec_k, r->ec_m);
	return -EIO;
}

/* t's columns from *pool on */
static void stripe_scratch(struct remote *r, struct ec_stripe *t, uint8_t **pool)
{
	unsigned int i, w = r->ec_k + r->ec_m;

	for (i = 0; i < w + 2; i++) {
		t->col[i] = *pool;
		*pool += t->hi - t->lo;
	}
}

static size_t batch_scratch(struct remote *r, const struct ec_stripe *st, unsigned int n,
			    const struct ec_piece *p)
{
	size_t bytes = 0;
	unsigned int k;

	for (k = 0; k < n; k++)
		bytes += stripe_bytes(r, &st[k], p);
	return bytes;
}

/* the fragments of t on the members in mask */
static uint32_t frags_on(const struct remote *r, const struct ec_stripe *t, uint32_t mask)
{
	unsigned int i, w = r->ec_k + r->ec_m;
	uint32_t f = 0;

	for (i = 0; i < w; i++)
		if (mask & (1U << t->f[i].member))
			f |= 1U << i;
	return f;
}

/*
 * Decode the pieces of t not read yet (their data members are down, or
 * slow) from k fragments that are up, none on a slow member if it can be.
 */
static int decode_pieces(struct remote *r, struct ec_stripe *t, struct ec_piece *p,
			 uint32_t slow)
{
	uint8_t *scratch = g_malloc(cols_bytes(r, t));
	uint8_t *pool = scratch;
	unsigned int round, i;
	uint32_t want = 0;
	int rc = 0;

	stripe_scratch(r, t, &pool);
	t->how = EC_DECODE;
	for (i = t->first; i < t->first + t->n; i++)
		if (!p[i].done)
			want |= 1U << p[i].j;
	ec_lock(r, t->s);
	atomic_fetch_add(&r->ec_decoded, 1);
	for (round = 0;; round++) {
		stripe_members(r, t);
		t->want = pick_sources(r, t, frags_on(r, t, slow));
		if (!t->want)
			t->want = pick_sources(r, t, 0);
		if (!t->want || round == EC_MAX_ROUNDS) {
			rc = no_fragments(r, t);
			break;
		}
		rc = gather(r, t, 1, p);
		if (rc < 0 || !t->short_read)
			break;
	}
	if (!rc)
		rc = ec_codec_decode(r->codec, t->hi - t->lo, t->col, t->got, want);
	ec_unlock(r, t->s);
	for (i = t->first; !rc && i < t->first + t->n; i++) {
		if (p[i].done)
			continue;
		memcpy(p[i].buf, t->col[p[i].j] + (p[i].o - t->lo), p[i].len);
		p[i].done = true;
	}
	g_free(scratch);
	return rc;
}

/* the direct reads: every piece whose data member is up and not slow, into its buffer */
static int read_direct(struct remote *r, struct ec_piece *p, unsigned int np, uint32_t slow)
{
	struct ec_round rd;
	unsigned int i;
	uint32_t m;
	uint64_t moff;
	int rc;

	round_init(&rd, r, XPORT_READ, np);
	for (i = 0; i < np; i++) {
		ec_frag(r, p[i].s, p[i].j, &m, &moff);
		if (!read_there(r, m, slow))
			continue;
		round_add(&rd, m, moff + p[i].o, p[i].buf, p[i].len, i, p[i].j);
		p[i].done = true;
	}
	round_send(&rd);
	rc = round_result(&rd, read_gone, p);
	round_clear(&rd);
	return rc;
}

static int ec_read(struct remote *r, struct ec_piece *p, unsigned int np)
{
	uint32_t slow = slow_members(r);
	struct ec_stripe t;
	unsigned int i = 0, n;
	int rc;

	rc = read_direct(r, p, np, slow);
	while (!rc && i < np) {
		/* the pieces of one stripe, and whether any is left to decode */
		bool left = false;

		n = take_stripes(r, p, np, &i, &t, 1);
		g_assert(n == 1);
		for (n = t.first; n < t.first + t.n; n++)
			left = left || !p[n].done;
		if (!left)
			continue;
		t.lo = UINT32_MAX;
		t.hi = 0;
		for (n = t.first; n < t.first + t.n; n++) {
			if (p[n].done)
				continue;
			t.lo = MIN(t.lo, p[n].o);
			t.hi = MAX(t.hi, p[n].o + p[n].len);
		}
		rc = decode_pieces(r, &t, p, slow);
	}
	return rc;
}

/* ---- writes ---- */

/* how stripe t brings its parity along, from what is up now */
static void plan_stripe(struct remote *r, struct ec_stripe *t, const struct ec_piece *p)
{
	unsigned int i, k = r->ec_k, w = k + r->ec_m, rmw = 0, rcw = 0;
	uint32_t parity = ((1U << w) - 1) & ~((1U << k) - 1), data = (1U << k) - 1;
	uint32_t covered[EC_MAX_K] = { 0 };

	stripe_members(r, t);
	t->touched = t->full = 0;
	/* pieces of one fragment are sorted and do not overlap */
	for (i = t->first; i < t->first + t->n; i++) {
		t->touched |= 1U << p[i].j;
		covered[p[i].j] += p[i].len;
	}
	for (i = 0; i < k; i++)
		if (covered[i] == t->hi - t->lo)
			t->full |= 1U << i;
	if (t->full == data) {
		t->how = EC_FULL;
		t->want = 0;
		return;
	}
	rmw = (unsigned int)__builtin_popcount(t->touched) +
	      (unsigned int)__builtin_popcount(t->writable & parity);
	rcw = (unsigned int)__builtin_popcount(data & ~t->full);
	/* rmw reads the old data and every parity it writes; rcw reads the uncovered data */
	if (rmw < rcw && (t->touched & t->up) == t->touched &&
	    (t->writable & parity & t->up) == (t->writable & parity)) {
		t->how = EC_RMW;
		t->want = t->writable & parity;
	} else if ((data & ~t->full & t->up) == (data & ~t->full)) {
		t->how = EC_RCW;
		t->want = data & ~t->full;
	} else {
		t->how = EC_DECODE;
		t->want = pick_sources(r, t, 0);
	}
}

/*
 * The data of t over [lo, hi) for the encoder: a piece that covers a
 * fragment's whole range is coded where it is (a sequential write's
 * pieces, in the cache's arena: no copy); others are copied over the
 * fragment's column.
 */
static void data_columns(struct remote *r, struct ec_stripe *t, const struct ec_piece *p,
			 uint8_t **data)
{
	unsigned int i;

	for (i = 0; i < r->ec_k; i++)
		data[i] = t->col[i];
	for (i = t->first; i < t->first + t->n; i++) {
		if (p[i].o == t->lo && p[i].len == t->hi - t->lo)
			data[p[i].j] = p[i].buf;
		else
			memcpy(t->col[p[i].j] + (p[i].o - t->lo), p[i].buf, p[i].len);
	}
}

/* the new parity of t into its parity columns */
static int code_parity(struct remote *r, struct ec_stripe *t, const struct ec_piece *p)
{
	unsigned int i, k = r->ec_k, w = k + r->ec_m;
	uint8_t *par[EC_MAX_M], *data[EC_MAX_K];
	size_t len = t->hi - t->lo;
	int rc;

	if (t->how == EC_RMW) {
		/* parity not written (its member is down) is updated into a spare */
		for (i = 0; i < r->ec_m; i++)
			par[i] = t->col[(t->want & (1U << (k + i))) ? k + i : w];
		for (i = t->first; i < t->first + t->n; i++) {
			size_t at = p[i].o - t->lo;
			uint8_t *dst[EC_MAX_M];
			unsigned int q;

			for (q = 0; q < r->ec_m; q++)
				dst[q] = par[q] + at;
			ec_codec_update(r->codec, p[i].j, p[i].len, p[i].old, p[i].buf, dst,
					t->col[w + 1] + at);
		}
		return 0;
	}
	if (t->how == EC_DECODE) {
		rc = ec_codec_decode(r->codec, len, t->col, t->got, (1U << k) - 1);
		if (rc < 0)
			return rc;
	}
	data_columns(r, t, p, data);
	ec_codec_encode(r->codec, len, data, t->col + k);
	return 0;
}

/*
 * Plan the stripes and read what their parity needs, again when a member
 * goes away under a round.
 */
static int write_reads(struct remote *r, struct ec_stripe *st, unsigned int n, struct ec_piece *p)
{
	unsigned int k, round;
	bool again = true;
	int rc = 0;

	for (round = 0; again && !rc; round++) {
		again = false;
		for (k = 0; k < n; k++) {
			plan_stripe(r, &st[k], p);
			if (st[k].how == EC_DECODE && !st[k].want)
				return no_fragments(r, &st[k]);
		}
		if (round == EC_MAX_ROUNDS)
			return -EIO;
		rc = gather(r, st, n, p);
		for (k = 0; k < n && !rc; k++)
			again = again || st[k].short_read;
	}
	return rc;
}

struct write_ctx {
	struct remote *r;
	struct ec_stripe *st;
};

static void write_gone(struct ec_round *rd, struct ec_io *io, void *ctx)
{
	struct write_ctx *c = ctx;

	(void)rd;
	remote_note_write(c->r, io->m, ec_stripe_unit(c->r, c->st[io->st].s));
}

/* test knob: the Nth write round sends its data but not its parity, and the client dies */
static atomic_long tear_left;

static bool tear_now(void)
{
	return atomic_load(&tear_left) > 0 && atomic_fetch_sub(&tear_left, 1) == 1;
}

/* the pieces and the parity out; fragments on members that are down go to their dirty maps */
static int write_out(struct remote *r, struct ec_stripe *st, unsigned int n, struct ec_piece *p)
{
	unsigned int k, i, cap = 0, w = r->ec_k + r->ec_m;
	struct write_ctx ctx = { .r = r, .st = st };
	bool tear = tear_now();
	struct ec_round rd;
	int rc;

	for (k = 0; k < n; k++)
		cap += st[k].n + r->ec_m;
	round_init(&rd, r, XPORT_WRITE, cap);
	for (k = 0; k < n; k++) {
		struct ec_stripe *t = &st[k];

		for (i = t->first; i < t->first + t->n; i++)
			if (t->writable & (1U << p[i].j))
				round_add(&rd, t->f[p[i].j].member, frag_moff(r, t, p[i].j) + p[i].o,
					  p[i].buf, p[i].len, k, p[i].j);
		for (i = r->ec_k; i < w && !tear; i++)
			if (t->writable & (1U << i))
				round_add(&rd, t->f[i].member, frag_moff(r, t, i) + t->lo, t->col[i],
					  t->hi - t->lo, k, i);
		for (i = 0; i < w; i++)
			if (!(t->writable & (1U << i)) && (i >= r->ec_k || (t->touched & (1U << i))))
				remote_note_write(r, t->f[i].member, ec_stripe_unit(r, t->s));
	}
	round_send(&rd);
	rc = round_result(&rd, write_gone, &ctx);
	if (tear) {
		/* the data landed (its round completed): the tear is certain, not a race */
		g_message("RMEM_TEST_EC_TEAR: the data of stripe %" G_GUINT64_FORMAT " landed, "
			  "its parity was not sent (%s): exiting", (guint64)st[0].s,
			  rc ? g_strerror(-rc) : "data written");
		_exit(9);
	}
	round_clear(&rd);
	return rc;
}

int ec_intent_mark(struct remote *r, uint64_t s)
{
	int rc = intent_mark(r, ec_stripe_unit(r, s));

	return rc ? rc : intent_mark(r, ec_stripe_unit(r, s) + r->ec_k - 1);
}

/* mark the intent map for every stripe of the request */
static int mark_intent(struct remote *r, const struct ec_piece *p, unsigned int np)
{
	unsigned int i;
	int rc = 0;

	for (i = 0; i < np && !rc; i++)
		if (!i || p[i].s != p[i - 1].s)
			rc = ec_intent_mark(r, p[i].s);
	return rc;
}

/*
 * A batch's scratch: a kept buffer of EC_BATCH_SCRATCH when the batch is
 * big (the daemon's fixed mmap threshold would map and fault in every big
 * one afresh: a fifth of a sequential write's CPU), else the heap's.
 */
static uint8_t *scratch_get(struct remote *r, size_t len)
{
	uint8_t *buf = NULL;
	unsigned int i;

	if (len < EC_SPARE_MIN)
		return g_malloc(len);
	g_assert(len <= EC_BATCH_SCRATCH); /* take_stripes' bound; one stripe is at most 1.3 MiB */
	pthread_mutex_lock(&r->ec_spare_lock);
	for (i = 0; i < EC_SPARES && !buf; i++) {
		buf = r->ec_spare[i];
		r->ec_spare[i] = NULL;
	}
	pthread_mutex_unlock(&r->ec_spare_lock);
	return buf ? buf : g_malloc(EC_BATCH_SCRATCH);
}

static void scratch_put(struct remote *r, uint8_t *buf, size_t len)
{
	unsigned int i;

	if (len >= EC_SPARE_MIN) {
		pthread_mutex_lock(&r->ec_spare_lock);
		for (i = 0; i < EC_SPARES && buf; i++) {
			if (!r->ec_spare[i]) {
				r->ec_spare[i] = buf;
				buf = NULL;
			}
		}
		pthread_mutex_unlock(&r->ec_spare_lock);
	}
	g_free(buf);
}

static int write_batch(struct remote *r, struct ec_stripe *st, unsigned int n, struct ec_piece *p)
{
	size_t len = batch_scratch(r, st, n, p);
	uint8_t *scratch = scratch_get(r, len), *pool = scratch;
	unsigned int k, i;
	int rc;

	for (k = 0; k < n; k++) {
		stripe_scratch(r, &st[k], &pool);
		for (i = st[k].first; i < st[k].first + st[k].n; i++) {
			p[i].old = pool;
			pool += p[i].len;
		}
	}
	lock_stripes(r, st, n, true);
	rc = write_reads(r, st, n, p);
	for (k = 0; k < n && !rc; k++)
		rc = code_parity(r, &st[k], p);
	if (!rc)
		rc = write_out(r, st, n, p);
	lock_stripes(r, st, n, false);
	scratch_put(r, scratch, len);
	return rc;
}

static int ec_write(struct remote *r, struct ec_piece *p, unsigned int np)
{
	struct ec_stripe *st = g_new(struct ec_stripe, np);
	unsigned int next = 0, n;
	int rc;

	pthread_rwlock_rdlock(&r->rb_lock);
	rc = mark_intent(r, p, np);
	while (!rc && next < np) {
		n = take_stripes(r, p, np, &next, st, np);
		rc = write_batch(r, st, n, p);
	}
	pthread_rwlock_unlock(&r->rb_lock);
	g_free(st);
	if (!rc)
		remote_wait_recorded(r);
	return rc;
}

int ec_rw(struct remote *r, enum xport_op_type type, const uint64_t *offs,
	  const struct iovec *iov, int cnt)
{
	struct ec_piece *p;
	unsigned int np;
	int rc;

	p = cut(r, offs, iov, cnt, r->ec_zero, &np);
	rc = type == XPORT_READ ? ec_read(r, p, np) : ec_write(r, p, np);
	g_free(p);
	return rc;
}

/* ---- whole fragments: the rebuild, the checksums' alternatives ---- */

uint32_t ec_frags_up(struct remote *r, uint64_t s)
{
	struct ec_stripe t = { .s = s };

	stripe_members(r, &t);
	return t.up;
}

int ec_frags_read(struct remote *r, uint64_t s, uint32_t want, uint32_t off, uint32_t len,
		  uint8_t *const col[], uint32_t *got)
{
	struct ec_stripe t = { .s = s, .lo = off, .hi = off + len, .how = EC_DECODE };
	int rc;

	stripe_members(r, &t);
	t.want = want & t.up;
	memcpy(t.col, col, (r->ec_k + r->ec_m) * sizeof(*col));
	rc = gather(r, &t, 1, NULL);
	*got = rc ? 0 : t.got;
	return rc;
}

int ec_frags_write(struct remote *r, uint64_t s, uint32_t which, uint32_t off, uint32_t len,
		   uint8_t *const col[])
{
	struct ec_stripe t = { .s = s };
	struct write_ctx ctx = { .r = r, .st = &t };
	unsigned int i, w = r->ec_k + r->ec_m;
	struct ec_round rd;
	int rc;

	stripe_members(r, &t);
	round_init(&rd, r, XPORT_WRITE, w);
	for (i = 0; i < w; i++) {
		if (!(which & (1U << i)))
			continue;
		if (t.writable & (1U << i))
			round_add(&rd, t.f[i].member, frag_moff(r, &t, i) + off, col[i], len, 0, i);
		else
			remote_note_write(r, t.f[i].member, ec_stripe_unit(r, s));
	}
	round_send(&rd);
	rc = round_result(&rd, write_gone, &ctx);
	round_clear(&rd);
	return rc;
}

/* ---- setting up ---- */

int ec_init(struct remote *r)
{
	const char *tear = getenv("RMEM_TEST_EC_TEAR");
	unsigned int i;
	int rc;

	rc = ec_codec_new(r->ec_k, r->ec_m, &r->codec);
	if (rc < 0)
		return rc;
	r->ec_locks = g_new(pthread_mutex_t, EC_LOCKS);
	for (i = 0; i < EC_LOCKS; i++)
		pthread_mutex_init(&r->ec_locks[i], NULL);
	pthread_mutex_init(&r->ec_spare_lock, NULL);
	r->ec_zero = g_malloc0(r->unit);
	if (tear && *tear)
		atomic_store(&tear_left, strtol(tear, NULL, 10));
	return 0;
}

void ec_free(struct remote *r)
{
	unsigned int i;

	if (r->ec_locks) {
		for (i = 0; i < EC_LOCKS; i++)
			pthread_mutex_destroy(&r->ec_locks[i]);
		pthread_mutex_destroy(&r->ec_spare_lock);
	}
	for (i = 0; i < EC_SPARES; i++) {
		g_free(r->ec_spare[i]);
		r->ec_spare[i] = NULL;
	}
	g_free(r->ec_locks);
	r->ec_locks = NULL;
	ec_codec_free(r->codec);
	r->codec = NULL;
	g_free(r->ec_zero);
	r->ec_zero = NULL;
}
