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
 * request.
 *
 * A plain pool passes everything straight to its member.
 */
#define G_LOG_DOMAIN "rmemfs-remote"

#include "remote_int.h"

#include <errno.h>
#include <stdarg.h>
#include <string.h>

#include <glib.h>

struct seg {
	uint64_t off; /* address space offset */
	uint8_t *buf; /* NULL: zeroes */
	size_t len;
	uint32_t tried; /* reads: members that failed it */
	uint32_t copies; /* writes: copies that took it */
	bool done;
};

/* the request, cut into segments, and the scratch to send one member's share */
struct req {
	struct remote *r;
	GArray *segs; /* struct seg */
	GArray *offs; /* uint64_t, one member's share */
	GArray *iov; /* struct iovec */
	GArray *idx; /* guint: which segment each iov entry is */
};

static struct seg *seg_at(struct req *q, guint i)
{
	return &g_array_index(q->segs, struct seg, i);
}

static void req_init(struct req *q, struct remote *r, const uint64_t *offs,
		     const struct iovec *iov, int cnt)
{
	int i;

	q->r = r;
	q->segs = g_array_new(FALSE, FALSE, sizeof(struct seg));
	q->offs = g_array_new(FALSE, FALSE, sizeof(uint64_t));
	q->iov = g_array_new(FALSE, FALSE, sizeof(struct iovec));
	q->idx = g_array_new(FALSE, FALSE, sizeof(guint));
	for (i = 0; i < cnt; i++) {
		size_t pos = 0;

		while (pos < iov[i].iov_len) {
			struct seg s = { .off = offs[i] + pos };
			uint64_t end = s.off < LAYOUT_SB_SIZE ? LAYOUT_SB_SIZE :
								(s.off / r->unit + 1) * r->unit;

			s.len = (size_t)MIN((uint64_t)(iov[i].iov_len - pos), end - s.off);
			s.buf = iov[i].iov_base ? (uint8_t *)iov[i].iov_base + pos : NULL;
			g_array_append_val(q->segs, s);
			pos += s.len;
		}
	}
}

static void req_clear(struct req *q)
{
	g_array_free(q->segs, TRUE);
	g_array_free(q->offs, TRUE);
	g_array_free(q->iov, TRUE);
	g_array_free(q->idx, TRUE);
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
	*moff = LAYOUT_SET_DATA_OFF + slot * r->unit + s->off % r->unit;
	return true;
}

static void share_add(struct req *q, guint i, uint64_t moff)
{
	struct seg *s = seg_at(q, i);
	struct iovec v = { .iov_base = s->buf, .iov_len = s->len };

	g_array_append_val(q->offs, moff);
	g_array_append_val(q->iov, v);
	g_array_append_val(q->idx, i);
}

static void share_reset(struct req *q)
{
	g_array_set_size(q->offs, 0);
	g_array_set_size(q->iov, 0);
	g_array_set_size(q->idx, 0);
}

/* send member m its share (q->offs/iov) as one request */
static int share_send(struct req *q, uint32_t m, enum xport_op_type type)
{
	struct remote_member *rm = &q->r->mem[m];
	const uint64_t *offs = (const uint64_t *)q->offs->data;
	const struct iovec *iov = (const struct iovec *)q->iov->data;
	int n = (int)q->offs->len, rc = 0, k;

	atomic_fetch_add(&rm->inflight, 1);
	if (type == XPORT_READ)
		rc = member_readv(rm->m, offs, iov, n);
	else if (iov[0].iov_base)
		rc = member_writev(rm->m, offs, iov, n);
	else
		for (k = 0; k < n && !rc; k++)
			rc = member_zero(rm->m, offs[k], iov[k].iov_len);
	atomic_fetch_sub(&rm->inflight, 1);
	return rc;
}

/* the member that is up, holds a copy of s, has not failed it, and is least busy */
static int pick_copy(struct remote *r, const struct seg *s, unsigned int first)
{
	unsigned int best_load = UINT_MAX, k, m;
	uint64_t moff;
	int best = -1;

	for (k = 0; k < r->n; k++) {
		m = (first + k) % r->n;
		if (!atomic_load(&r->mem[m].up) || (s->tried & (1U << m)) || !seg_on(r, s, m, &moff))
			continue;
		if (atomic_load(&r->mem[m].inflight) < best_load) {
			best_load = atomic_load(&r->mem[m].inflight);
			best = (int)m;
		}
	}
	return best;
}

/* one member's share of a read: the segments picked for m, not done */
static int read_share(struct req *q, uint32_t m, const int *pick)
{
	uint64_t moff;
	guint i;
	int rc;

	share_reset(q);
	for (i = 0; i < q->segs->len; i++)
		if (pick[i] == (int)m && seg_on(q->r, seg_at(q, i), m, &moff))
			share_add(q, i, moff);
	if (!q->offs->len)
		return 0;
	rc = share_send(q, m, XPORT_READ);
	for (i = 0; i < q->idx->len; i++) {
		struct seg *s = seg_at(q, g_array_index(q->idx, guint, i));

		if (!rc)
			s->done = true;
		else
			s->tried |= 1U << m;
	}
	if (rc < 0 && remote_member_gone(q->r, m, rc))
		return 0; /* its segments go to another copy */
	return rc;
}

static int set_read(struct remote *r, struct req *q)
{
	int *pick = g_new(int, q->segs->len);
	bool left = true;
	uint32_t m;
	guint i;
	int rc = 0;

	while (left && !rc) {
		left = false;
		for (i = 0; i < q->segs->len && !rc; i++) {
			struct seg *s = seg_at(q, i);

			pick[i] = -1;
			if (s->done)
				continue;
			if (r->fresh && s->off < LAYOUT_SB_SIZE) { /* no superblock yet */
				memset(s->buf, 0, s->len);
				s->done = true;
				continue;
			}
			pick[i] = pick_copy(r, s, (unsigned int)(s->off / r->unit));
			left = true;
			if (pick[i] < 0)
				rc = -EIO;
		}
		for (m = 0; m < r->n && !rc && left; m++)
			rc = read_share(q, m, pick);
		if (!rc && atomic_load(&r->failed))
			rc = -EIO;
	}
	g_free(pick);
	return rc;
}

/* does segment s go to member m: up, or being rebuilt and past the unit (not block 0)? */
static bool write_to(struct remote *r, const struct seg *s, uint32_t m, bool up, uint64_t *moff)
{
	if (!up && (s->off < LAYOUT_SB_SIZE || !rebuild_takes(r, m, s->off / r->unit)))
		return false;
	return seg_on(r, s, m, moff);
}

/* send member m its copies of the segments (rb_lock held for reading) */
static int write_share(struct req *q, uint32_t m)
{
	struct remote *r = q->r;
	bool up = atomic_load(&r->mem[m].up);
	uint64_t moff;
	guint i;
	int rc;

	if (!up && atomic_load(&r->rb_member) != (int)m)
		return 0;
	share_reset(q);
	for (i = 0; i < q->segs->len; i++)
		if (write_to(r, seg_at(q, i), m, up, &moff))
			share_add(q, i, moff);
	if (!q->offs->len)
		return 0;
	rc = share_send(q, m, XPORT_WRITE);
	if (!rc && up)
		for (i = 0; i < q->idx->len; i++)
			seg_at(q, g_array_index(q->idx, guint, i))->copies++;
	if (rc < 0 && up && remote_member_gone(r, m, rc))
		rc = 0;
	if (rc < 0 && !up)
		rc = 0; /* the rebuild's own copy fails on it and stops */
	return rc;
}

static int set_write(struct remote *r, struct req *q)
{
	uint32_t m;
	guint i;
	int rc = 0;

	pthread_rwlock_rdlock(&r->rb_lock);
	for (m = 0; m < r->n && !rc; m++)
		rc = write_share(q, m);
	pthread_rwlock_unlock(&r->rb_lock);
	for (i = 0; i < q->segs->len && !rc; i++)
		if (!seg_at(q, i)->copies)
			rc = -EIO;
	if (!rc)
		remote_wait_recorded(r);
	return rc;
}

static int do_rw(struct remote *r, enum xport_op_type type, const uint64_t *offs,
		 const struct iovec *iov, int cnt)
{
	struct req q;
	int i, rc;

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
	req_init(&q, r, offs, iov, cnt);
	rc = type == XPORT_READ ? set_read(r, &q) : set_write(r, &q);
	req_clear(&q);
	return rc;
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

/* ---- each member's own block 0 ---- */

/* member i for a request: -EHOSTDOWN if it is not up */
static struct member *member_at(struct remote *r, unsigned int i)
{
	return i < r->n && atomic_load(&r->mem[i].up) ? r->mem[i].m : NULL;
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

const char *remote_member_name(const struct remote *r, unsigned int i)
{
	return i < r->n ? r->mem[i].name : "?";
}
