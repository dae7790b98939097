// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * verify.c - data block checksums on the data path (see verify.h; the
 * table and its journal records are meta/csum.c).
 */
#define G_LOG_DOMAIN "rmemfs-io"

#include "verify.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "checksum.h"
#include "csum.h"
#include "extent.h"
#include "follow.h"
#include "remote.h"

#define BS ((uint64_t)META_BLOCK_SIZE)
#define STRIPE_SHIFT 4 /* 16 blocks (64 KiB) share a stripe: a large batch takes few */

struct verify {
	struct meta *m;
	struct remote *r;
	bool follower;
	pthread_mutex_t stripe[VERIFY_STRIPES];
	struct verify_stats st; /* __atomic builtins */
	pthread_mutex_t bad_lock; /* protects bad */
	GHashTable *bad; /* pb -> the CRC its bytes had when reported: one line per damage */
};

/* one block a read checks */
struct verify_rblk {
	uint64_t pb;
	uint64_t foff; /* file offset of the block */
	uint32_t crc; /* the table's, at the time of the read */
	char *blk; /* the whole block as read (in the caller's buffer, or a bounce buffer) */
	char *dst; /* bounce: where the read's part of it goes */
	uint32_t in_off, len; /* bounce: that part */
};

/* one block a write writes: zeros(head) | data[len] | zeros to the end, or rmw */
struct verify_wblk {
	uint64_t pb;
	uint64_t ino, foff;
	const char *data; /* NULL: zeros */
	uint32_t head, len;
	char *rmw; /* written in part: the whole block is read here, merged, written from here */
	bool inplace; /* a written block: hot region, stripe */
	uint32_t crc;
};

static char zero_block[META_BLOCK_SIZE];

static inline void count(uint64_t *c, uint64_t n)
{
	__atomic_add_fetch(c, n, __ATOMIC_RELAXED);
}

struct verify *verify_new(struct meta *m, struct remote *r, bool follower)
{
	struct verify *v = g_new0(struct verify, 1);
	unsigned int i;

	v->m = m;
	v->r = r;
	v->follower = follower;
	for (i = 0; i < VERIFY_STRIPES; i++)
		pthread_mutex_init(&v->stripe[i], NULL);
	pthread_mutex_init(&v->bad_lock, NULL);
	v->bad = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, NULL);
	return v;
}

void verify_destroy(struct verify *v)
{
	unsigned int i;

	if (!v)
		return;
	for (i = 0; i < VERIFY_STRIPES; i++)
		pthread_mutex_destroy(&v->stripe[i]);
	g_hash_table_destroy(v->bad);
	pthread_mutex_destroy(&v->bad_lock);
	g_free(v);
}

void verify_get_stats(struct verify *v, struct verify_stats *out)
{
	out->verified = __atomic_load_n(&v->st.verified, __ATOMIC_RELAXED);
	out->errors = __atomic_load_n(&v->st.errors, __ATOMIC_RELAXED);
	out->repaired = __atomic_load_n(&v->st.repaired, __ATOMIC_RELAXED);
	out->unverified = __atomic_load_n(&v->st.unverified, __ATOMIC_RELAXED);
}

ssize_t verify_stats_text(struct verify *v, char *buf, size_t cap)
{
	struct csum *c = extent_csum(v->m);
	struct verify_stats st;
	int n;

	verify_get_stats(v, &st);
	n = snprintf(buf, cap,
		     "csum_blocks %" G_GUINT64_FORMAT "\ncsum_verified %" G_GUINT64_FORMAT
		     "\ncsum_errors %" G_GUINT64_FORMAT "\ncsum_repaired %" G_GUINT64_FORMAT
		     "\ncsum_unverified %" G_GUINT64_FORMAT "\nhot_regions %" G_GUINT64_FORMAT "\n",
		     csum_count(c), st.verified, st.errors, st.repaired, st.unverified,
		     csum_hot_count(c));
	return n < 0 || (size_t)n >= cap ? -ERANGE : n;
}

/* ---- batches ---- */

void verify_batch_add(struct verify_batch *b, uint64_t off, void *buf, size_t len)
{
	if (b->cnt && b->offs[b->cnt - 1] + b->iov[b->cnt - 1].iov_len == off &&
	    (char *)b->iov[b->cnt - 1].iov_base + b->iov[b->cnt - 1].iov_len == buf) {
		b->iov[b->cnt - 1].iov_len += len; /* contiguous in both: one piece */
		return;
	}
	if (b->cnt == b->cap) {
		b->cap = b->cap ? b->cap * 2 : 32;
		b->offs = g_renew(uint64_t, b->offs, b->cap);
		b->iov = g_renew(struct iovec, b->iov, b->cap);
	}
	b->offs[b->cnt] = off;
	b->iov[b->cnt].iov_base = buf;
	b->iov[b->cnt].iov_len = len;
	b->cnt++;
}

void verify_batch_free(struct verify_batch *b)
{
	g_free(b->offs);
	g_free(b->iov);
	memset(b, 0, sizeof(*b));
}

/* ---- stripes ---- */

struct stripes {
	uint64_t bits[VERIFY_STRIPES / 64];
};

static unsigned int stripe_of(uint64_t pb)
{
	return (unsigned int)((pb >> STRIPE_SHIFT) % VERIFY_STRIPES);
}

static void stripes_add(struct stripes *s, uint64_t pb)
{
	unsigned int i = stripe_of(pb);

	s->bits[i / 64] |= 1ULL << (i % 64);
}

/* ascending, each once: two requests never wait for each other in a cycle */
static void stripes_lock(struct verify *v, const struct stripes *s)
{
	unsigned int i;

	for (i = 0; i < VERIFY_STRIPES; i++)
		if (s->bits[i / 64] & (1ULL << (i % 64)))
			pthread_mutex_lock(&v->stripe[i]);
}

static void stripes_unlock(struct verify *v, const struct stripes *s)
{
	unsigned int i;

	for (i = VERIFY_STRIPES; i-- > 0;)
		if (s->bits[i / 64] & (1ULL << (i % 64)))
			pthread_mutex_unlock(&v->stripe[i]);
}

/* ---- a bad block ---- */

static uint32_t block_crc(const void *blk)
{
	return layout_crc(blk, BS);
}

/*
 * Do the bytes at blk pass block pb, whose CRC is crc? Its CRC, or while
 * an in-place write is pending on it the previous one (csum.h csum_accepts).
 */
static bool passes(struct verify *v, uint64_t pb, uint32_t crc, const void *blk)
{
	bool old;

	return csum_accepts(extent_csum(v->m), pb, crc, block_crc(blk), &old);
}

/*
 * Block pb (file ino at foff) does not match crc, confirmed, and no copy
 * does: one line and one count per damage (the kernel may ask again for
 * what failed), and -EIO.
 */
static int bad_block(struct verify *v, uint64_t ino, uint64_t foff, uint64_t pb, uint32_t crc,
		     const char *blk)
{
	uint32_t got = block_crc(blk);
	gpointer seen;
	bool again;

	pthread_mutex_lock(&v->bad_lock);
	again = g_hash_table_lookup_extended(v->bad, &pb, NULL, &seen) &&
		GPOINTER_TO_UINT(seen) == got;
	if (!again)
		g_hash_table_insert(v->bad, g_memdup2(&pb, sizeof(pb)), GUINT_TO_POINTER(got));
	pthread_mutex_unlock(&v->bad_lock);
	if (again)
		return -EIO;
	count(&v->st.errors, 1);
	g_warning("checksum mismatch: inode %" G_GUINT64_FORMAT " offset %" G_GUINT64_FORMAT
		  " (pool block %" G_GUINT64_FORMAT "): stored %08x, computed %08x: "
		  "Input/output error",
		  (guint64)ino, (guint64)foff, (guint64)pb, crc, got);
	return -EIO;
}

/*
 * Read block pb (file ino at foff) into blk and check it against crc, under
 * its stripe (no write of this client is in flight on it). On a member set
 * every copy is read: the first that matches is the data, and each copy
 * that does not is rewritten from it (counted in *fixed, if not NULL). In
 * an erasure-coded set's stripes the alternatives past the first are
 * decodes of ec_k reads each: they are read only when the first is bad. 0,
 * or -EIO when no copy matches.
 */
static int check_copies(struct verify *v, uint64_t ino, uint64_t foff, uint64_t pb, uint32_t crc,
			char *blk, uint64_t *fixed)
{
	uint64_t off = extent_pool_off(v->m, pb);
	char *copy[REMOTE_MAX_SERVERS] = { NULL };
	int rcs[REMOTE_MAX_SERVERS] = { 0 }, rc = 0;
	unsigned int n = v->follower ? 1 : MIN(remote_copies(v->r), REMOTE_MAX_SERVERS), k;
	unsigned int good = n;
	bool lazy = remote_copy_decodes(v->r, off);

	if (n == 1) {
		rc = remote_read(v->r, off, blk, BS);
		if (rc == 0 && !passes(v, pb, crc, blk))
			rc = bad_block(v, ino, foff, pb, crc, blk);
		return rc;
	}
	for (k = 0; k < n && !(lazy && good == 0); k++) {
		copy[k] = g_malloc(BS);
		rcs[k] = remote_read_copy(v->r, off, copy[k], BS, k);
		if (rcs[k] == 0 && good == n && passes(v, pb, crc, copy[k]))
			good = k;
	}
	if (good == 0 && lazy)
		n = 1; /* the data fragment is good: the decodes were not read */
	if (good == n) {
		/* what the first copy that answered holds, for the line */
		for (k = 0; k < n && rcs[k]; k++)
			;
		/* no copy answered: the application sees EIO, whatever the pool said */
		rc = k < n ? bad_block(v, ino, foff, pb, crc, copy[k]) : -EIO;
		goto out;
	}
	memcpy(blk, copy[good], BS);
	for (k = 0; k < n; k++) {
		if (k == good || rcs[k] || passes(v, pb, crc, copy[k]))
			continue;
		if (remote_write_copy(v->r, off, copy[good], BS, k) < 0)
			continue; /* (that member is being dropped: the set says so) */
		count(&v->st.repaired, 1);
		if (fixed)
			(*fixed)++;
		g_message("checksum mismatch: inode %" G_GUINT64_FORMAT " offset %" G_GUINT64_FORMAT
			  " (pool block %" G_GUINT64_FORMAT "): the %s was bad (computed "
			  "%08x, stored %08x); rewritten from the %s",
			  (guint64)ino, (guint64)foff, (guint64)pb,
			  remote_copy_name(v->r, off, k), block_crc(copy[k]), crc,
			  remote_copy_name(v->r, off, good));
	}
out:
	for (k = 0; k < n; k++)
		g_free(copy[k]);
	return rc;
}

/* ---- reads ---- */

void verify_read_init(struct verify_read *vr, uint64_t ino)
{
	memset(vr, 0, sizeof(*vr));
	vr->ino = ino;
	vr->blks = g_array_new(FALSE, FALSE, sizeof(struct verify_rblk));
	vr->bounce = g_ptr_array_new_with_free_func(g_free);
}

void verify_read_clear(struct verify_read *vr)
{
	verify_batch_free(&vr->b);
	if (vr->blks)
		g_array_free(vr->blks, TRUE);
	if (vr->bounce)
		g_ptr_array_free(vr->bounce, TRUE);
	vr->blks = NULL;
	vr->bounce = NULL;
}

void verify_read_add(struct verify *v, struct verify_read *vr, uint64_t es, uint64_t pool_off,
		     uint64_t s, uint64_t t, char *dst)
{
	uint64_t b0 = (s - es) / BS, b1 = (t - es + BS - 1) / BS, n = b1 - b0, i;
	uint64_t pb0 = extent_pblock(v->m, pool_off) + b0;
	uint32_t crcs[64];
	bool have[64];

	vr->bytes += t - s;
	for (i = 0; i < n; i++) {
		uint64_t bs = es + (b0 + i) * BS, be = bs + BS;
		uint64_t x = MAX(bs, s), y = MIN(be, t);
		uint64_t po = pool_off + (b0 + i) * BS;
		struct verify_rblk rb;

		if (i % 64 == 0)
			csum_get_run(extent_csum(v->m), pb0 + i, MIN(n - i, (uint64_t)64), crcs,
				     have);
		if (!have[i % 64]) {
			count(&v->st.unverified, 1);
			verify_batch_add(&vr->b, po + (x - bs), dst + (x - s), y - x);
			continue;
		}
		rb.pb = pb0 + i;
		rb.foff = bs;
		rb.crc = crcs[i % 64];
		if (x == bs && y == be) {
			rb.blk = dst + (x - s);
			rb.dst = NULL;
			rb.in_off = rb.len = 0;
		} else {
			rb.blk = g_malloc(BS);
			g_ptr_array_add(vr->bounce, rb.blk);
			rb.dst = dst + (x - s);
			rb.in_off = (uint32_t)(x - bs);
			rb.len = (uint32_t)(y - x);
		}
		verify_batch_add(&vr->b, po, rb.blk, BS);
		g_array_append_val(vr->blks, rb);
	}
}

/*
 * The writer: read block rb again under its stripe, mapped again (no write
 * of this client is in flight on it then). 0 when it matches now.
 */
static int confirm(struct verify *v, uint64_t ino, struct verify_rblk *rb)
{
	struct meta_extent e;
	struct stripes s = { 0 };
	int n, rc;

	stripes_add(&s, rb->pb);
	stripes_lock(v, &s);
	n = extent_map(v->m, ino, rb->foff, BS, false, &e, 1);
	rc = n < 0 ? n : 0;
	if (rc == 0 && (n != 1 || !e.pool_off)) {
		/* no longer written: it reads as zeros (only a bug gets here under our locks) */
		memset(rb->blk, 0, BS);
	} else if (rc == 0) {
		rb->pb = extent_pblock(v->m, e.pool_off);
		if (!csum_get(extent_csum(v->m), rb->pb, &rb->crc))
			rc = remote_read(v->r, e.pool_off, rb->blk, BS);
		else
			rc = check_copies(v, ino, rb->foff, rb->pb, rb->crc, rb->blk, NULL);
	}
	stripes_unlock(v, &s);
	return rc;
}

int verify_read_run(struct verify *v, struct verify_read *vr, bool last)
{
	struct csum *c = extent_csum(v->m);
	guint i;
	int rc;

	if (!vr->b.cnt)
		return 0;
	rc = remote_readv(v->r, vr->b.offs, vr->b.iov, vr->b.cnt);
	if (rc < 0)
		return rc;
	for (i = 0; i < vr->blks->len; i++) {
		struct verify_rblk *rb = &g_array_index(vr->blks, struct verify_rblk, i);
		uint64_t *counter = &v->st.verified;

		if (!passes(v, rb->pb, rb->crc, rb->blk)) {
			if (!v->follower) {
				rc = confirm(v, vr->ino, rb);
			} else if (extent_format(v->m) < LAYOUT_VERSION_AHEAD &&
				   csum_hot(c, rb->pb / LAYOUT_CSUM_REGION_BLOCKS)) {
				/* a format-2 writer journals an overwrite's checksum after it */
				counter = &v->st.unverified;
				rc = 0;
			} else if (!last) {
				/* the writer's CRC is ahead of its data: ours may lag, or the read
				 * met a write in flight */
				return -EAGAIN;
			} else {
				/* (a reader writes nothing: no repair) */
				rc = bad_block(v, vr->ino, rb->foff, rb->pb, rb->crc, rb->blk);
			}
			if (rc < 0)
				return rc;
		}
		count(counter, 1);
		if (rb->dst)
			memcpy(rb->dst, rb->blk + rb->in_off, rb->len);
	}
	return 0;
}

/* ---- writes ---- */

void verify_write_init(struct verify_write *vw)
{
	memset(vw, 0, sizeof(*vw));
	vw->blks = g_array_new(FALSE, FALSE, sizeof(struct verify_wblk));
	vw->bounce = g_ptr_array_new_with_free_func(g_free);
}

void verify_write_clear(struct verify_write *vw)
{
	verify_batch_free(&vw->b);
	if (vw->blks)
		g_array_free(vw->blks, TRUE);
	if (vw->bounce)
		g_ptr_array_free(vw->bounce, TRUE);
	vw->blks = NULL;
	vw->bounce = NULL;
}

uint64_t verify_write_add(struct verify *v, struct verify_write *vw, uint64_t ino, uint64_t es,
			  uint64_t ee, uint64_t pool_off, bool fresh, uint64_t s, uint64_t t,
			  const char *src)
{
	uint64_t b0 = fresh ? 0 : (s - es) / BS, b1 = fresh ? (ee - es) / BS : (t - es + BS - 1) / BS;
	uint64_t pb0 = extent_pblock(v->m, pool_off), b, zeroed = 0;

	for (b = b0; b < b1; b++) {
		uint64_t bs = es + b * BS, be = bs + BS;
		uint64_t x = MIN(MAX(bs, s), be), y = MAX(MIN(be, t), x);
		struct verify_wblk w = { .pb = pb0 + b, .ino = ino, .foff = bs };
		char *data = src ? (char *)src + (x - s) : zero_block;

		w.data = y > x ? data : NULL;
		w.head = (uint32_t)(x - bs);
		w.len = (uint32_t)(y - x);
		if (fresh) {
			/* the bytes the write does not cover become zeros, in the same batch */
			if (x > bs)
				verify_batch_add(&vw->b, pool_off + b * BS, zero_block, x - bs);
			if (y > x)
				verify_batch_add(&vw->b, pool_off + (x - es), data, y - x);
			if (be > y)
				verify_batch_add(&vw->b, pool_off + (y - es), zero_block, be - y);
			zeroed += BS - (y - x);
		} else if (x == bs && y == be) {
			w.inplace = true;
			verify_batch_add(&vw->b, pool_off + b * BS, data, BS);
		} else {
			w.inplace = true;
			w.rmw = g_malloc(BS);
			g_ptr_array_add(vw->bounce, w.rmw);
			verify_batch_add(&vw->b, pool_off + b * BS, w.rmw, BS);
		}
		g_array_append_val(vw->blks, w);
	}
	return zeroed;
}

/* a block written in part: read it whole (checked), merge the new bytes in */
static int rmw_read(struct verify *v, struct verify_wblk *w)
{
	uint32_t crc;
	int rc;

	rc = remote_read(v->r, extent_pool_off(v->m, w->pb), w->rmw, BS);
	if (rc < 0)
		return rc;
	if (!csum_get(extent_csum(v->m), w->pb, &crc))
		count(&v->st.unverified, 1);
	else if (!passes(v, w->pb, crc, w->rmw)) /* (its stripe is held) */
		rc = check_copies(v, w->ino, w->foff, w->pb, crc, w->rmw, NULL);
	else
		count(&v->st.verified, 1);
	if (rc < 0)
		return rc;
	if (w->len)
		memcpy(w->rmw + w->head, w->data, w->len);
	w->data = w->rmw;
	w->head = 0;
	w->len = BS;
	return 0;
}

static uint32_t wblk_crc(const struct verify_wblk *w)
{
	uint32_t crc = ~0U;

	if (w->head)
		crc = layout_crc32c(crc, zero_block, w->head);
	if (w->len)
		crc = layout_crc32c(crc, w->data, w->len);
	if (w->head + w->len < BS)
		crc = layout_crc32c(crc, zero_block, BS - w->head - w->len);
	return ~crc;
}

/*
 * Pending block pb (an in-place write of it failed, or never went out:
 * !sent) settled on what the pool holds: the new bytes (the write landed),
 * or the old ones, journaled so a replay drops the new CRC too. 0 when it
 * is settled; 1 when it stays pending, safely (it held no CRC before, or
 * its bytes match neither CRC: it is damaged whatever comes next); -EIO
 * when what it holds cannot be told (the read, or the journal record,
 * failed). Not settled, it keeps its region hot until the next mount,
 * which settles it.
 */
static int settle_after(struct verify *v, uint64_t pb, bool sent, char *buf)
{
	struct csum *c = extent_csum(v->m);
	uint32_t crc, old, got;
	bool had;

	if (!csum_pending(c, pb, &old, &had))
		return 0;
	if (!had || !csum_get(c, pb, &crc))
		return 1;
	if (sent) {
		if (remote_read(v->r, extent_pool_off(v->m, pb), buf, BS) < 0)
			return -EIO;
		got = block_crc(buf);
		if (got == crc) {
			csum_settle(c, pb);
			return 0;
		}
		if (got != old)
			return 1;
	}
	csum_settle_old(c, pb);
	return checksum_log(v->m, &pb, &old, 1) == 0 ? 0 : -EIO;
}

/* each in-place block of vw settled (settle_after): the worst of their results */
static int settle_all(struct verify *v, struct verify_write *vw, bool sent)
{
	char *buf = g_malloc(BS);
	int worst = 0, rc;
	guint i;

	for (i = 0; i < vw->blks->len; i++) {
		struct verify_wblk *w = &g_array_index(vw->blks, struct verify_wblk, i);

		rc = w->inplace ? settle_after(v, w->pb, sent, buf) : 0;
		worst = rc < 0 ? rc : MAX(worst, rc);
		if (worst < 0)
			break;
	}
	g_free(buf);
	return worst;
}

/*
 * An in-place write, step by step (its blocks' stripes held throughout):
 * blocks still pending from a write that failed are settled first (two
 * writes in doubt would leave three contents to choose from: one that
 * cannot be told fails this write with EIO); the partly
 * written ones are read and merged; the new CRCs are made durable in the
 * journal (checksum_ahead: from then on each block passes with its new or
 * its old CRC); the data goes out; the blocks settle on the new CRCs. A
 * write that fails settles each block on what the pool holds where that
 * can be told; a block where it cannot stays pending and keeps its region
 * hot until the next mount.
 */
int verify_write_run(struct verify *v, struct verify_write *vw)
{
	GArray *inplace = g_array_new(FALSE, FALSE, sizeof(uint64_t));
	uint32_t *crcs = g_new(uint32_t, vw->blks->len);
	struct stripes s = { 0 };
	bool ahead = false, sent = false;
	guint i;
	int rc = 0, n = 0;

	for (i = 0; i < vw->blks->len; i++) {
		struct verify_wblk *w = &g_array_index(vw->blks, struct verify_wblk, i);

		if (w->inplace) {
			g_array_append_val(inplace, w->pb);
			stripes_add(&s, w->pb);
		}
	}
	if (inplace->len) {
		stripes_lock(v, &s);
		rc = MIN(settle_all(v, vw, true), 0);
	}
	for (i = 0; i < vw->blks->len && rc == 0; i++) {
		struct verify_wblk *w = &g_array_index(vw->blks, struct verify_wblk, i);

		if (w->rmw)
			rc = rmw_read(v, w);
		if (w->inplace)
			crcs[n++] = wblk_crc(w);
	}
	if (rc == 0 && n)
		rc = checksum_ahead(v->m, (uint64_t *)(void *)inplace->data, crcs, n, &ahead);
	if (rc == 0 && vw->b.cnt) {
		rc = remote_writev(v->r, vw->b.offs, vw->b.iov, vw->b.cnt);
		sent = true;
	}
	/*
	 * New blocks: their CRCs go into the table now and into the journal with
	 * the EXT_SET that makes them part of the file (extent.c commit_range).
	 */
	for (i = 0; i < vw->blks->len && rc == 0; i++) {
		struct verify_wblk *w = &g_array_index(vw->blks, struct verify_wblk, i);

		if (w->inplace)
			csum_settle(extent_csum(v->m), w->pb);
		else
			csum_set(extent_csum(v->m), w->pb, wblk_crc(w));
	}
	if (ahead && (rc == 0 || settle_all(v, vw, sent) == 0))
		checksum_hot_leave(v->m, (uint64_t *)(void *)inplace->data, (int)inplace->len);
	if (inplace->len)
		stripes_unlock(v, &s);
	g_array_free(inplace, TRUE);
	g_free(crcs);
	return rc;
}

/* ---- scrub ---- */

int verify_scrub(struct verify *v, uint64_t ino, uint64_t es, uint64_t pool_off, uint64_t n,
		 struct verify_scrub *res)
{
	uint64_t pb0 = extent_pblock(v->m, pool_off), i, nfill = 0;
	bool set = remote_copies(v->r) > 1;
	uint64_t *pbs = g_new(uint64_t, n);
	uint32_t *crc = g_new(uint32_t, n), *fill = g_new(uint32_t, n);
	bool *have = g_new(bool, n);
	char *buf = g_malloc(n * BS);
	struct stripes s = { 0 };
	int rc = 0;

	for (i = 0; i < n; i++)
		stripes_add(&s, pb0 + i);
	stripes_lock(v, &s);
	csum_get_run(extent_csum(v->m), pb0, n, crc, have);
	/* a plain pool: one read; a set: each block's copies below */
	if (!set)
		rc = remote_read(v->r, pool_off, buf, n * BS);
	for (i = 0; i < n && rc == 0; i++) {
		char *blk = buf + i * BS;
		int brc = 0;

		if (set && have[i])
			brc = check_copies(v, ino, es + i * BS, pb0 + i, crc[i], blk, &res->repaired);
		else if (set)
			rc = remote_read(v->r, pool_off + i * BS, blk, BS);
		else if (have[i] && block_crc(blk) != crc[i])
			brc = bad_block(v, ino, es + i * BS, pb0 + i, crc[i], blk);
		if (brc == -EIO)
			res->errors++;
		else if (brc < 0)
			rc = brc;
		else if (rc == 0 && !have[i]) {
			pbs[nfill] = pb0 + i;
			fill[nfill++] = block_crc(blk);
		} else if (rc == 0) {
			count(&v->st.verified, 1);
		}
	}
	if (rc == 0 && nfill) {
		rc = checksum_log(v->m, pbs, fill, (int)nfill);
		if (rc == 0)
			res->filled += nfill;
	}
	stripes_unlock(v, &s);
	g_free(pbs);
	g_free(crc);
	g_free(fill);
	g_free(have);
	g_free(buf);
	return rc;
}
