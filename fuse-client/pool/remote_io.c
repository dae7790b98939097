// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * remote_io.c - the data path over the members (remote.h).
 *
 * A request is cut into segments: block 0, which every member keeps, and
 * pieces of at most one unit, whose copies place.h names. A read sends each
 * segment to one member that is up and holds a copy - the one with the
 * fewest requests in flight - and when a member is gone, sends its segments
 * again to another copy. A write sends each segment to every copy on a
 * member that is up; a member that fails is dropped (remote_member_lost
 * writes that into the other members' records before it returns) and the
 * write completes on the rest; one that was dropped by another request
 * meanwhile is waited for until its loss is recorded (remote_wait_recorded).
 * Only a segment left with no copy at all fails the request (and then the
 * filesystem has failed). The pieces of one member go out as one vectored
 * request, and the members' shares of a big request at the same time, on
 * their lanes (lane.h).
 *
 * A plain pool passes everything straight to its member.
 */
#define G_LOG_DOMAIN "rmemfs-remote"

#include "remote_int.h"

#include <errno.h>
#include <stdarg.h>
#include <string.h>

#include <glib.h>

#include "ec_codec.h"

struct seg {
	uint64_t off; /* address space offset */
	uint8_t *buf; /* NULL: zeroes */
	size_t len;
	uint32_t tried; /* reads: members that failed it */
	uint32_t copies; /* writes: copies that took it */
	int pick; /* reads: the member it goes to this round, or -1 */
	bool done;
};

struct req;

/* one member's part of a request: entries [first, first + n) of the request's arrays */
struct share {
	struct req *q;
	uint32_t m;
	unsigned int first, n;
	bool up; /* writes: the member was up (else it is being rebuilt) */
};

/* the request cut into segments, and the per-member entries of one round */
struct req {
	struct remote *r;
	enum xport_op_type type;
	struct seg *segs;
	unsigned int nsegs;
	uint64_t *offs; /* entries, grouped by member */
	struct iovec *iov;
	unsigned int *idx; /* the segment of each entry */
	unsigned int cap; /* entries the arrays hold */
	struct share shares[LAYOUT_SET_MAX];
	struct lane_job jobs[LAYOUT_SET_MAX];
	unsigned int nshares;
};

/* segments: block 0 alone, else at most one unit each */
static void req_init(struct req *q, struct remote *r, enum xport_op_type type,
		     const uint64_t *offs, const struct iovec *iov, int cnt)
{
	unsigned int n = 0;
	int i;

	memset(q, 0, sizeof(*q));
	q->r = r;
	q->type = type;
	for (i = 0; i < cnt; i++)
		n += (unsigned int)((offs[i] % r->unit + iov[i].iov_len) / r->unit) + 2;
	q->segs = g_new(struct seg, n);
	for (i = 0; i < cnt; i++) {
		size_t pos = 0;

		while (pos < iov[i].iov_len) {
			struct seg *s = &q->segs[q->nsegs++];
			uint64_t end;

			memset(s, 0, sizeof(*s));
			s->off = offs[i] + pos;
			end = s->off < LAYOUT_SB_SIZE ? LAYOUT_SB_SIZE : (s->off / r->unit + 1) * r->unit;
			s->len = (size_t)MIN((uint64_t)(iov[i].iov_len - pos), end - s->off);
			s->buf = iov[i].iov_base ? (uint8_t *)iov[i].iov_base + pos : NULL;
			pos += s->len;
		}
	}
	q->cap = q->nsegs * (type == XPORT_READ ? 1 : r->n);
	q->offs = g_new(uint64_t, q->cap);
	q->iov = g_new(struct iovec, q->cap);
	q->idx = g_new(unsigned int, q->cap);
}

static void req_clear(struct req *q)
{
	g_free(q->segs);
	g_free(q->offs);
	g_free(q->iov);
	g_free(q->idx);
}

/* where segment s lives on member m: its offset there, or false if m holds no copy */
static bool seg_on(const struct remote *r, const struct seg *s, uint32_t m, uint64_t *moff)
{
	uint64_t slot;

	if (s->off < LAYOUT_SB_SIZE) {
		*moff = s->off;
		return true;
	}
	if (!place_unit_on(&r->place, s->off / r->unit, m, &slot))
		return false;
	*moff = remote_slot_off(r, slot) + s->off % r->unit;
	return true;
}

/* does segment s go to member m this round? Reads: picked; writes: a copy to keep current */
static bool seg_goes(struct req *q, const struct seg *s, uint32_t m, bool up, uint64_t *moff)
{
	struct remote *r = q->r;

	if (q->type == XPORT_READ)
		return s->pick == (int)m && seg_on(r, s, m, moff);
	if (!up && (s->off < LAYOUT_SB_SIZE || !rebuild_takes(r, m, s->off / r->unit)))
		return false;
	return seg_on(r, s, m, moff);
}

/* send member m its share as one request */
static int share_send(void *arg)
{
	struct share *sh = arg;
	struct req *q = sh->q;
	struct remote_member *rm = &q->r->mem[sh->m];
	const uint64_t *offs = q->offs + sh->first;
	const struct iovec *iov = q->iov + sh->first;
	int n = (int)sh->n, rc = 0, k;

	atomic_fetch_add(&rm->inflight, 1);
	if (q->type == XPORT_READ)
		rc = member_readv(rm->m, offs, iov, n);
	else if (iov[0].iov_base)
		rc = member_writev(rm->m, offs, iov, n);
	else
		for (k = 0; k < n && !rc; k++)
			rc = member_zero(rm->m, offs[k], iov[k].iov_len);
	atomic_fetch_sub(&rm->inflight, 1);
	return rc;
}

/* group this round's entries by member into shares */
static void plan(struct req *q)
{
	struct remote *r = q->r;
	unsigned int e = 0, i;
	uint64_t moff;
	uint32_t m;

	q->nshares = 0;
	for (m = 0; m < r->n; m++) {
		bool up = atomic_load(&r->mem[m].up);
		struct share *sh = &q->shares[q->nshares];

		if (!up && (q->type == XPORT_READ || atomic_load(&r->rb_member) != (int)m))
			continue;
		sh->q = q;
		sh->m = m;
		sh->up = up;
		sh->first = e;
		for (i = 0; i < q->nsegs && e < q->cap; i++) {
			struct seg *s = &q->segs[i];

			if (s->done || !seg_goes(q, s, m, up, &moff))
				continue;
			q->offs[e] = moff;
			q->iov[e] = (struct iovec){ .iov_base = s->buf, .iov_len = s->len };
			q->idx[e] = i;
			e++;
		}
		sh->n = e - sh->first;
		if (sh->n)
			q->nshares++;
	}
}

/*
 * Send the shares, at once on the members' lanes when there are several and
 * the request is big enough for that to pay (a small one goes member by
 * member: a lane hand-off costs more than it saves).
 */
#define REMOTE_PARALLEL_MIN (64U << 10)

static void send_all(struct req *q)
{
	size_t bytes = 0;
	unsigned int k, e;

	for (k = 0; k < q->nshares; k++) {
		q->jobs[k] = (struct lane_job){ .member = q->shares[k].m, .fn = share_send,
						.arg = &q->shares[k] };
		for (e = 0; e < q->shares[k].n && bytes < REMOTE_PARALLEL_MIN; e++)
			bytes += q->iov[q->shares[k].first + e].iov_len;
	}
	if (q->nshares > 1 && bytes >= REMOTE_PARALLEL_MIN && q->r->lanes) {
		lanes_run(q->r->lanes, q->jobs, q->nshares);
		return;
	}
	for (k = 0; k < q->nshares; k++)
		q->jobs[k].rc = share_send(&q->shares[k]);
}

/*
 * The member that is up, holds a copy of s, has not failed it, and is least
 * busy. Ties go to the unit's preferred copy, which rotates with the unit
 * and its cycle so that a sequential read uses every member alike.
 */
static int pick_copy(struct remote *r, const struct seg *s)
{
	struct place_copy c[PLACE_MAX_REPLICAS];
	unsigned int best_load = UINT_MAX, load, j, k0;
	uint64_t u = s->off / r->unit;
	int best = -1;

	place_unit(&r->place, u, c);
	k0 = (unsigned int)((u % r->place.ncomb + u / r->place.ncomb) % r->place.r);
	for (j = 0; j < (s->off < LAYOUT_SB_SIZE ? r->n : r->place.r); j++) {
		uint32_t m = s->off < LAYOUT_SB_SIZE ? j : c[(k0 + j) % r->place.r].member;

		if (!atomic_load(&r->mem[m].up) || (s->tried & (1U << m)))
			continue;
		load = atomic_load(&r->mem[m].inflight);
		if (load < best_load) {
			best_load = load;
			best = (int)m;
		}
	}
	return best;
}

/* pick a copy for every segment not read yet; false when none is left; -EIO: no copy */
static int pick_round(struct req *q, bool *left)
{
	struct remote *r = q->r;
	unsigned int i;

	*left = false;
	for (i = 0; i < q->nsegs; i++) {
		struct seg *s = &q->segs[i];

		s->pick = -1;
		if (s->done)
			continue;
		if (r->fresh && s->off < LAYOUT_SB_SIZE) { /* no superblock yet */
			memset(s->buf, 0, s->len);
			s->done = true;
			continue;
		}
		s->pick = pick_copy(r, s);
		if (s->pick < 0)
			return -EIO;
		*left = true;
	}
	return 0;
}

static int set_read(struct remote *r, struct req *q)
{
	unsigned int k, e;
	bool left = true;
	int rc = 0;

	while (!rc) {
		rc = pick_round(q, &left);
		if (rc < 0 || !left)
			break;
		plan(q);
		send_all(q);
		for (k = 0; k < q->nshares && !rc; k++) {
			struct share *sh = &q->shares[k];
			int src = q->jobs[k].rc;

			for (e = sh->first; e < sh->first + sh->n; e++) {
				if (!src)
					q->segs[q->idx[e]].done = true;
				else
					q->segs[q->idx[e]].tried |= 1U << sh->m;
			}
			/* a member that is gone: its segments go to another copy next round */
			if (src < 0 && !remote_member_gone(r, sh->m, src))
				rc = src;
		}
		if (!rc && atomic_load(&r->failed))
			rc = -EIO;
	}
	return rc;
}

/*
 * The units this write does not send to a member that holds a copy: one
 * that is down, or being rebuilt and not that far yet. Their dirty maps
 * (rebuild.c) get them, so a resync copies them.
 */
static void note_skipped(struct req *q)
{
	struct remote *r = q->r;
	unsigned int i;
	uint64_t moff;
	uint32_t m;

	for (m = 0; m < r->n; m++) {
		if (atomic_load(&r->mem[m].up) || !atomic_load(&r->dirty[m]))
			continue;
		for (i = 0; i < q->nsegs; i++) {
			struct seg *s = &q->segs[i];
			uint64_t u = s->off / r->unit;

			if (s->off >= LAYOUT_SB_SIZE && !rebuild_takes(r, m, u) &&
			    seg_on(r, s, m, &moff))
				remote_note_write(r, m, u);
		}
	}
}

static int set_write(struct remote *r, struct req *q)
{
	unsigned int i, k, e;
	int rc = 0;

	pthread_rwlock_rdlock(&r->rb_lock);
	for (i = 0; i < q->nsegs && !rc; i++)
		if (q->segs[i].off >= LAYOUT_SB_SIZE)
			rc = intent_mark(r, q->segs[i].off / r->unit);
	if (!rc) {
		plan(q);
		note_skipped(q);
		send_all(q);
	}
	pthread_rwlock_unlock(&r->rb_lock);
	if (rc < 0)
		return rc;
	for (k = 0; k < q->nshares; k++) {
		struct share *sh = &q->shares[k];
		int src = q->jobs[k].rc;

		if (!src && sh->up)
			for (e = sh->first; e < sh->first + sh->n; e++)
				q->segs[q->idx[e]].copies++;
		if (!src)
			continue;
		/* a member being rebuilt that fails: the rebuild's own copy stops on it */
		if (sh->up && !remote_member_gone(r, sh->m, src) && !rc)
			rc = src;
		for (e = sh->first; e < sh->first + sh->n; e++) /* (block 0 is copied anyway) */
			if (q->segs[q->idx[e]].off >= LAYOUT_SB_SIZE)
				remote_note_write(r, sh->m, q->segs[q->idx[e]].off / r->unit);
	}
	for (i = 0; i < q->nsegs && !rc; i++)
		if (!q->segs[i].copies)
			rc = -EIO;
	if (!rc)
		remote_wait_recorded(r);
	return rc;
}

static int set_rw(struct remote *r, enum xport_op_type type, const uint64_t *offs,
		  const struct iovec *iov, int cnt)
{
	struct req q;
	int rc;

	req_init(&q, r, type, offs, iov, cnt);
	rc = type == XPORT_READ ? set_read(r, &q) : set_write(r, &q);
	req_clear(&q);
	return rc;
}

/*
 * An erasure-coded set: the entries below zone_end go to the copies, the
 * rest to the stripes (an entry across the boundary is cut in two).
 */
static int zoned_rw(struct remote *r, enum xport_op_type type, const uint64_t *offs,
		    const struct iovec *iov, int cnt)
{
	uint64_t *o = g_new(uint64_t, 2 * (size_t)cnt);
	struct iovec *v = g_new(struct iovec, 2 * (size_t)cnt);
	int i, lo = 0, hi = cnt, rc = 0;

	for (i = 0; i < cnt; i++) {
		uint64_t end = offs[i] + iov[i].iov_len;
		size_t below = offs[i] >= r->zone_end ? 0 :
			       (size_t)(MIN(end, r->zone_end) - offs[i]);

		if (below) {
			o[lo] = offs[i];
			v[lo++] = (struct iovec){ iov[i].iov_base, below };
		}
		if (below < iov[i].iov_len) {
			o[hi] = offs[i] + below;
			v[hi++] = (struct iovec){ iov[i].iov_base ?
							  (uint8_t *)iov[i].iov_base + below : NULL,
						  iov[i].iov_len - below };
		}
	}
	if (lo)
		rc = set_rw(r, type, o, v, lo);
	if (!rc && hi > cnt)
		rc = ec_rw(r, type, o + cnt, v + cnt, hi - cnt);
	g_free(o);
	g_free(v);
	return rc;
}

static int do_rw(struct remote *r, enum xport_op_type type, const uint64_t *offs,
		 const struct iovec *iov, int cnt)
{
	int i;

	if (!r->set) {
		if (type == XPORT_READ)
			return member_readv(r->mem[0].m, offs, iov, cnt);
		if (iov[0].iov_base || cnt != 1)
			return member_writev(r->mem[0].m, offs, iov, cnt);
		return member_zero(r->mem[0].m, offs[0], iov[0].iov_len);
	}
	if (atomic_load(&r->failed))
		return -EIO;
	for (i = 0; i < cnt; i++)
		if (offs[i] + iov[i].iov_len < offs[i] || offs[i] + iov[i].iov_len > r->size)
			return -ERANGE;
	if (r->ec_k)
		return zoned_rw(r, type, offs, iov, cnt);
	return set_rw(r, type, offs, iov, cnt);
}

int remote_read(struct remote *r, uint64_t off, void *buf, size_t len)
{
	struct iovec iov = { .iov_base = buf, .iov_len = len };

	return len ? do_rw(r, XPORT_READ, &off, &iov, 1) : 0;
}

int remote_write(struct remote *r, uint64_t off, const void *buf, size_t len)
{
	struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };

	return len ? do_rw(r, XPORT_WRITE, &off, &iov, 1) : 0;
}

int remote_readv(struct remote *r, const uint64_t *offs, const struct iovec *iov, int cnt)
{
	return cnt > 0 ? do_rw(r, XPORT_READ, offs, iov, cnt) : 0;
}

int remote_writev(struct remote *r, const uint64_t *offs, const struct iovec *iov, int cnt)
{
	return cnt > 0 ? do_rw(r, XPORT_WRITE, offs, iov, cnt) : 0;
}

int remote_zero(struct remote *r, uint64_t off, uint64_t len)
{
	struct iovec iov = { .iov_base = NULL, .iov_len = (size_t)len };

	if (len != (size_t)len)
		return -EINVAL;
	return len ? do_rw(r, XPORT_WRITE, &off, &iov, 1) : 0;
}

/* ---- atomics on block 0 ---- */

/* the atomic on every member that is up; *v0: the first one's old value */
static int each_atomic(struct remote *r, enum xport_op_type type, uint64_t off, uint64_t cmp_add,
		       uint64_t swap, uint64_t *out)
{
	bool first = true;
	uint64_t v, v0 = 0;
	uint32_t m;
	int rc;

	for (m = 0; m < r->n; m++) {
		if (!atomic_load(&r->mem[m].up))
			continue;
		if (type == XPORT_CAS)
			rc = member_cas(r->mem[m].m, off, cmp_add, swap, &v);
		else
			rc = member_fetch_add(r->mem[m].m, off, cmp_add, &v);
		if (rc < 0 && remote_member_gone(r, m, rc))
			continue;
		if (rc < 0)
			return rc;
		if (first && type == XPORT_CAS && v != cmp_add) {
			v0 = v; /* the first copy refused: nothing changed anywhere */
			break;
		}
		if (!first && v != v0) {
			g_message("members disagree on word %" G_GUINT64_FORMAT " of block 0 (%s: %"
				  G_GUINT64_FORMAT ", expected %" G_GUINT64_FORMAT ")",
				  (guint64)off, r->mem[m].name, (guint64)v, (guint64)v0);
			return -ESTALE;
		}
		if (first)
			v0 = v;
		first = false;
	}
	if (first && !(type == XPORT_CAS && v0 != cmp_add))
		return -EIO; /* no member up */
	*out = v0;
	return 0;
}

static int set_atomic(struct remote *r, enum xport_op_type type, uint64_t off, uint64_t cmp_add,
		      uint64_t swap, uint64_t *old)
{
	uint64_t v0 = 0;
	int rc;

	if (off % 8 || off + 8 > LAYOUT_SB_SIZE)
		return -EINVAL;
	pthread_rwlock_rdlock(&r->rb_lock);
	rc = each_atomic(r, type, off, cmp_add, swap, &v0);
	pthread_rwlock_unlock(&r->rb_lock);
	if (rc < 0)
		return rc;
	if (old)
		*old = v0;
	remote_wait_recorded(r);
	return 0;
}

int remote_cas(struct remote *r, uint64_t off, uint64_t compare, uint64_t swap, uint64_t *old)
{
	if (!r->set)
		return member_cas(r->mem[0].m, off, compare, swap, old);
	return set_atomic(r, XPORT_CAS, off, compare, swap, old);
}

int remote_fetch_add(struct remote *r, uint64_t off, uint64_t add, uint64_t *old)
{
	if (!r->set)
		return member_fetch_add(r->mem[0].m, off, add, old);
	return set_atomic(r, XPORT_FETCH_ADD, off, add, 0, old);
}

static int member_rc(struct remote *r, unsigned int i, int rc);

/* ---- one copy of a range (data checksums: reading the others, repairing one) ---- */

unsigned int remote_copies(const struct remote *r)
{
	return r->set ? r->place.r : 1;
}

bool remote_copy_decodes(const struct remote *r, uint64_t off)
{
	return r->set && r->ec_k && off >= r->zone_end;
}

/*
 * Where copy k of [off, off+len) lives: its member and the offset there;
 * false if it cannot. In the EC zone, alternative 0 is the data fragment
 * and alternative k the decode with parity k - 1: the parity's place.
 */
static bool copy_at(struct remote *r, uint64_t off, size_t len, unsigned int k, unsigned int *m,
		    uint64_t *moff)
{
	struct place_copy c[PLACE_MAX_REPLICAS];
	uint64_t u, s;
	uint32_t j, o;

	if (!r->set) { /* a plain pool: one copy, no units (r->unit is 0) */
		*m = 0;
		*moff = off;
		return k == 0;
	}
	u = off / r->unit;
	if (k >= r->place.r || off < LAYOUT_SB_SIZE || off + len > r->size ||
	    (off + len - 1) / r->unit != u)
		return false;
	if (remote_copy_decodes(r, off)) {
		ec_locate(r, off, &s, &j, &o);
		ec_frag(r, s, k ? r->ec_k + k - 1 : j, m, moff);
		*moff += o;
		return true;
	}
	place_unit(&r->place, u, c);
	*m = c[k].member;
	*moff = remote_slot_off(r, c[k].slot) + off % r->unit;
	return true;
}

const char *remote_copy_name(struct remote *r, uint64_t off, unsigned int k)
{
	const char *name;
	unsigned int m;
	uint64_t moff;
	char *what;

	if (!copy_at(r, off, 1, k, &m, &moff))
		return "?";
	if (!remote_copy_decodes(r, off))
		what = g_strdup_printf("copy on %s", r->mem[m].name);
	else if (k)
		what = g_strdup_printf("decode with the parity on %s", r->mem[m].name);
	else
		what = g_strdup_printf("data fragment on %s", r->mem[m].name);
	/* a string of its own that stays (one per member name and kind) */
	name = g_intern_string(what);
	g_free(what);
	return name;
}

/*
 * Alternative q + 1 of [off, off+len) in the EC zone: decoded from the
 * other data fragments and parity q alone, under the stripe lock (no write
 * is half-way through the stripe). -EHOSTDOWN when one of them is not up.
 */
static int read_decode(struct remote *r, uint64_t off, void *buf, size_t len, unsigned int q)
{
	uint8_t *col[EC_MAX_FRAGS] = { NULL }, *scratch = g_malloc(len * r->ec_k);
	unsigned int i, n = 0;
	uint32_t j, o, want, got;
	uint64_t s;
	int rc;

	ec_locate(r, off, &s, &j, &o);
	want = (((1U << r->ec_k) - 1) & ~(1U << j)) | 1U << (r->ec_k + q);
	for (i = 0; i < r->ec_k + r->ec_m; i++)
		if (want & (1U << i))
			col[i] = scratch + len * n++;
	col[j] = buf;
	ec_lock(r, s);
	rc = ec_frags_read(r, s, want, o, (uint32_t)len, col, &got);
	if (!rc && got != want)
		rc = -EHOSTDOWN;
	if (!rc)
		rc = ec_codec_decode(r->codec, len, col, got, 1U << j);
	ec_unlock(r, s);
	g_free(scratch);
	return rc;
}

int remote_read_copy(struct remote *r, uint64_t off, void *buf, size_t len, unsigned int k)
{
	unsigned int m;
	uint64_t moff;

	if (!copy_at(r, off, len, k, &m, &moff))
		return -EINVAL;
	if (!r->set)
		return member_read(r->mem[0].m, moff, buf, len);
	if (k && remote_copy_decodes(r, off))
		return read_decode(r, off, buf, len, k - 1);
	if (!remote_member_up(r, m))
		return -EHOSTDOWN;
	return member_rc(r, m, member_read(r->mem[m].m, moff, buf, len));
}

/*
 * Alternative k of [off, off+len) in the EC zone (stripe s, data fragment
 * j, o bytes in) from the good bytes buf, with the stripe lock held: k = 0
 * the data fragment itself (the alternative that matched proved that the
 * parity agrees with buf), else parity k - 1 coded anew over the range
 * from buf and the other data fragments.
 */
static int write_coded(struct remote *r, uint64_t s, uint32_t j, uint32_t o, const void *buf,
		       size_t len, unsigned int k)
{
	uint32_t others = ((1U << r->ec_k) - 1) & ~(1U << j), got;
	unsigned int i, w = r->ec_k + r->ec_m;
	uint8_t *col[EC_MAX_FRAGS], *scratch;
	int rc;

	if (!k) {
		col[j] = (uint8_t *)buf;
		return ec_frags_write(r, s, 1U << j, o, (uint32_t)len, col);
	}
	scratch = g_malloc(len * w);
	for (i = 0; i < w; i++)
		col[i] = scratch + len * i;
	col[j] = (uint8_t *)buf;
	rc = ec_frags_read(r, s, others, o, (uint32_t)len, col, &got);
	if (!rc && got != others)
		rc = -EHOSTDOWN;
	if (!rc) {
		ec_codec_encode(r->codec, len, col, col + r->ec_k);
		rc = ec_frags_write(r, s, 1U << (r->ec_k + k - 1), o, (uint32_t)len, col);
	}
	g_free(scratch);
	return rc;
}

int remote_write_copy(struct remote *r, uint64_t off, const void *buf, size_t len, unsigned int k)
{
	unsigned int m;
	uint64_t moff, s;
	uint32_t j, o;
	int rc;

	if (!copy_at(r, off, len, k, &m, &moff))
		return -EINVAL;
	if (!r->set)
		return member_write(r->mem[0].m, moff, buf, len);
	if (!remote_member_up(r, m))
		return -EHOSTDOWN;
	/* like any write to the set: the intent map covers a crash half-way */
	pthread_rwlock_rdlock(&r->rb_lock);
	if (!remote_copy_decodes(r, off)) {
		rc = intent_mark(r, off / r->unit);
		if (!rc)
			rc = member_rc(r, m, member_write(r->mem[m].m, moff, buf, len));
		pthread_rwlock_unlock(&r->rb_lock);
		return rc;
	}
	ec_locate(r, off, &s, &j, &o);
	rc = ec_intent_mark(r, s);
	if (!rc) {
		ec_lock(r, s);
		rc = write_coded(r, s, j, o, buf, len, k);
		ec_unlock(r, s);
	}
	pthread_rwlock_unlock(&r->rb_lock);
	/* a member dropped under the write: its dirty map has it */
	return !rc && !remote_member_up(r, m) ? -EHOSTDOWN : rc;
}

/* ---- each member's own block 0 ---- */

/* member i for a request: NULL (-EHOSTDOWN) unless it is up or being rebuilt */
static struct member *member_at(struct remote *r, unsigned int i)
{
	return remote_member_up(r, i) || remote_member_joining(r, i) ? r->mem[i].m : NULL;
}

/* the end of a request on member i: a set member that is gone is -EHOSTDOWN */
static int member_rc(struct remote *r, unsigned int i, int rc)
{
	if (rc < 0 && r->set && remote_member_gone(r, i, rc))
		return -EHOSTDOWN;
	return rc;
}

int remote_member_read(struct remote *r, unsigned int i, uint64_t off, void *buf, size_t len)
{
	struct member *m = member_at(r, i);

	return m ? member_rc(r, i, member_read(m, off, buf, len)) : -EHOSTDOWN;
}

int remote_member_write(struct remote *r, unsigned int i, uint64_t off, const void *buf,
			size_t len)
{
	struct member *m = member_at(r, i);

	return m ? member_rc(r, i, member_write(m, off, buf, len)) : -EHOSTDOWN;
}

int remote_member_cas(struct remote *r, unsigned int i, uint64_t off, uint64_t compare,
		      uint64_t swap, uint64_t *old)
{
	struct member *m = member_at(r, i);

	return m ? member_rc(r, i, member_cas_unfenced(m, off, compare, swap, old)) : -EHOSTDOWN;
}

int remote_member_fetch_add(struct remote *r, unsigned int i, uint64_t off, uint64_t add,
			    uint64_t *old)
{
	struct member *m = member_at(r, i);

	return m ? member_rc(r, i, member_fetch_add_unfenced(m, off, add, old)) : -EHOSTDOWN;
}

int remote_member_fence(struct remote *r, unsigned int i, uint64_t victim)
{
	struct member *m = member_at(r, i);

	return m ? member_rc(r, i, member_fence_client(m, victim)) : -EHOSTDOWN;
}

unsigned int remote_nmembers(const struct remote *r)
{
	return r->n;
}

bool remote_member_up(const struct remote *r, unsigned int i)
{
	return i < r->n && atomic_load(&((struct remote *)r)->mem[i].up);
}

bool remote_member_joining(const struct remote *r, unsigned int i)
{
	return i < r->n && atomic_load(&((struct remote *)r)->rb_member) == (int)i;
}

const char *remote_member_name(const struct remote *r, unsigned int i)
{
	return i < r->n ? r->mem[i].name : "?";
}
