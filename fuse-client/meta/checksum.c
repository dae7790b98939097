// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * checksum.c - data block checksums into the journal, the write-ahead
 * records of in-place writes and the hot regions', the recovery after a
 * crash, and rmemfs-fsck's check (checksum.h; the table itself is csum.c).
 */
#define G_LOG_DOMAIN "rmemfs-meta"

#include "checksum.h"

#include <errno.h>
#include <stdarg.h>
#include <string.h>

#include "commit.h"
#include "csum.h"
#include "extent.h"
#include "inode.h"
#include "journal.h"
#include "meta_int.h"
#include "remote.h"

#define REGION LAYOUT_CSUM_REGION_BLOCKS
#define LEGACY_BLOCKS 256U /* blocks read per step of the format-2 hot regions' check */
#define SETTLE_BATCH 256U /* pending blocks read in one remote_readv after a crash */
#define CHECK_BATCH 64 /* blocks rmemfs-fsck reads in one go where a block has one copy */

int checksum_log(struct meta *m, const uint64_t *pb, const uint32_t *crc, int n)
{
	int i, rc;

	if (!n)
		return 0;
	pthread_mutex_lock(&m->lock);
	rc = meta_may_change(m, 0);
	if (rc == 0) {
		for (i = 0; i < n; i++)
			csum_set(m->csum, pb[i], crc[i]);
		meta_txn_begin(m, NULL);
		journal_rec_csum_runs(m->j, false, pb, crc, (size_t)n);
		meta_txn_end(m, NULL);
	}
	pthread_mutex_unlock(&m->lock);
	return rc;
}

/* the regions of the n blocks pb[], each once per run */
static void each_region(struct meta *m, const uint64_t *pb, int n,
			void (*fn)(struct csum *c, uint64_t region))
{
	uint64_t last = UINT64_MAX;
	int i;

	for (i = 0; i < n; i++) {
		if (pb[i] / REGION == last)
			continue;
		last = pb[i] / REGION;
		fn(m->csum, last);
	}
}

int checksum_ahead(struct meta *m, const uint64_t *pb, const uint32_t *crc, int n, bool *entered)
{
	uint64_t seq, last = UINT64_MAX;
	int i, rc;

	*entered = false;
	pthread_mutex_lock(&m->lock);
	rc = meta_may_change(m, 0);
	if (rc < 0) {
		pthread_mutex_unlock(&m->lock);
		return rc;
	}
	meta_txn_begin(m, NULL);
	for (i = 0; i < n; i++) {
		uint64_t region = pb[i] / REGION;

		if (region == last)
			continue;
		last = region;
		if (csum_hot_enter(m->csum, region, &seq))
			continue;
		journal_rec_hot(m->j, region, true);
		csum_hot_set(m->csum, region, true, journal_next_seq(m->j), &m->ckpt_bytes);
		csum_hot_enter(m->csum, region, &seq);
	}
	for (i = 0; i < n; i++)
		csum_set_ahead(m->csum, pb[i], crc[i]);
	journal_rec_csum_runs(m->j, true, pb, crc, (size_t)n);
	meta_txn_end(m, NULL);
	pthread_mutex_unlock(&m->lock);
	*entered = true;
	/* the records before the data: a crash between leaves the block new or old */
	return commit_sync(m);
}

void checksum_hot_leave(struct meta *m, const uint64_t *pb, int n)
{
	each_region(m, pb, n, csum_hot_leave);
}

/* ---- recovery after a crash ---- */

static int judge_block(void *ctx, uint64_t off, const void *blk)
{
	struct meta *m = ctx;
	uint64_t pb;
	uint32_t crc;
	bool old;

	if (off < m->g.data_off || (off - m->g.data_off) % LAYOUT_BLOCK)
		return -1;
	pb = extent_pblock(m, off);
	if (pb >= m->g.data_blocks || !csum_get(m->csum, pb, &crc))
		return -1;
	return csum_accepts(m->csum, pb, crc, layout_crc(blk, LAYOUT_BLOCK), &old);
}

void checksum_judge(struct meta *m, struct remote_judge *j)
{
	j->block = judge_block;
	j->ctx = m;
}

/* a written block's file and offset, for messages */
struct owner {
	uint64_t ino, foff;
};

/* the files and offsets of the blocks pbs[] (ascending); 0, 0 where none */
static struct owner *owners_of(struct meta *m, const GArray *pbs)
{
	struct owner *own = g_new0(struct owner, pbs->len ? pbs->len : 1);
	GArray *runs = g_array_new(FALSE, FALSE, sizeof(struct extent_run));
	guint i, lo, hi;

	extent_written(m, runs);
	for (i = 0; i < runs->len; i++) {
		const struct extent_run *run = &g_array_index(runs, struct extent_run, i);

		/* the first pending block at or past the run's start */
		for (lo = 0, hi = pbs->len; lo < hi;) {
			guint mid = (lo + hi) / 2;

			if (g_array_index(pbs, uint64_t, mid) < run->pblock)
				lo = mid + 1;
			else
				hi = mid;
		}
		for (; lo < pbs->len && g_array_index(pbs, uint64_t, lo) < run->pblock + run->count;
		     lo++) {
			uint64_t pb = g_array_index(pbs, uint64_t, lo);

			own[lo].ino = run->ino;
			own[lo].foff = (run->file_block + pb - run->pblock) * LAYOUT_BLOCK;
		}
	}
	g_array_free(runs, TRUE);
	return own;
}

/* pending block pb settles on its new CRC (new) or its old one, counted */
static void settle_on(struct meta *m, uint64_t pb, bool new, struct checksum_recovery *out)
{
	if (new) {
		csum_settle(m->csum, pb);
		out->kept_new++;
	} else {
		csum_settle_old(m->csum, pb);
		out->kept_old++;
	}
}

enum held {
	HELD_NOTHING, /* no copy answered, or none matches */
	HELD_OLD, /* the bytes from before the write (or, without a CRC then, unverified) */
	HELD_NEW, /* the write's bytes */
};

/*
 * Pending block pb: every copy read, the block settled on what the best
 * holds (new before old), the copies that differ rewritten from it; none
 * matching: kept on its new CRC, and said. copy[]: a block each.
 */
static int settle_block(struct meta *m, uint64_t pb, const struct owner *own, uint8_t **copy,
			struct checksum_recovery *out)
{
	uint64_t off = extent_pool_off(m, pb);
	unsigned int n = MIN(remote_copies(m->r), LAYOUT_SET_MAX), c, pick = 0;
	enum held best = HELD_NOTHING, got;
	int rcs[LAYOUT_SET_MAX];
	uint32_t crc = 0, old = 0, x;
	bool had = false, answered = false;

	csum_get(m->csum, pb, &crc);
	csum_pending(m->csum, pb, &old, &had);
	for (c = 0; c < n; c++) {
		rcs[c] = remote_read_copy(m->r, off, copy[c], LAYOUT_BLOCK, c);
		if (rcs[c] == -EHOSTDOWN)
			continue;
		if (rcs[c] < 0)
			return rcs[c];
		answered = true;
		x = layout_crc(copy[c], LAYOUT_BLOCK);
		got = x == crc ? HELD_NEW : (!had || x == old) ? HELD_OLD : HELD_NOTHING;
		if (got > best) {
			best = got;
			pick = c;
		}
	}
	if (best == HELD_NOTHING && !answered)
		return -EIO; /* no copy to tell: the set has failed (the mount says so) */
	out->pending++;
	if (best == HELD_NOTHING) {
		csum_settle(m->csum, pb);
		out->bad++;
		g_warning("inode %" G_GUINT64_FORMAT " offset %" G_GUINT64_FORMAT " (pool block %"
			  G_GUINT64_FORMAT "): a write to it was cut short by the crash, and no "
			  "copy holds either its new bytes (checksum %08x) or its old ones (%08x): "
			  "reads of it fail (Input/output error) until it is rewritten",
			  (guint64)own->ino, (guint64)own->foff, (guint64)pb, crc, old);
		return 0;
	}
	settle_on(m, pb, best == HELD_NEW, out);
	for (c = 0; n > 1 && c < n; c++) {
		if (c == pick || rcs[c] || !memcmp(copy[c], copy[pick], LAYOUT_BLOCK))
			continue;
		if (remote_write_copy(m->r, off, copy[pick], LAYOUT_BLOCK, c) == 0)
			out->rewritten++;
	}
	return 0;
}

/*
 * Pending block pb read as blk (one copy: after remote_recover the copies
 * of a set agree): settled on the new CRC or the old one when its bytes
 * pass either; false when they pass neither (settle_block then looks at
 * every copy).
 */
static bool settle_bytes(struct meta *m, uint64_t pb, const void *blk,
			 struct checksum_recovery *out)
{
	uint32_t crc, old, x = layout_crc(blk, LAYOUT_BLOCK);
	bool had;

	if (!csum_get(m->csum, pb, &crc) || !csum_pending(m->csum, pb, &old, &had))
		return true;
	if (x != crc && had && x != old)
		return false;
	out->pending++;
	settle_on(m, pb, x == crc, out);
	return true;
}

/*
 * The pending blocks, SETTLE_BATCH at a time in one remote_readv (a round
 * trip each cost a mount 1.6 s for 65536 blocks over loopback TCP); those
 * that pass neither CRC, one at a time through every copy.
 */
static int settle_pending(struct meta *m, struct checksum_recovery *out)
{
	GArray *pbs = g_array_new(FALSE, FALSE, sizeof(uint64_t));
	GArray *slow = g_array_new(FALSE, FALSE, sizeof(uint64_t));
	uint8_t *buf = g_malloc((size_t)SETTLE_BATCH * LAYOUT_BLOCK), *copy[LAYOUT_SET_MAX];
	uint64_t offs[SETTLE_BATCH];
	struct iovec iov[SETTLE_BATCH];
	struct owner *own = NULL;
	unsigned int c;
	guint i, j, n;
	int rc = 0;

	csum_pending_list(m->csum, pbs);
	for (i = 0; i < pbs->len && rc == 0; i += n) {
		int k = -1; /* the last piece: consecutive blocks are one */

		n = MIN(pbs->len - i, SETTLE_BATCH);
		for (j = 0; j < n; j++) {
			uint64_t off = extent_pool_off(m, g_array_index(pbs, uint64_t, i + j));

			if (k >= 0 && offs[k] + iov[k].iov_len == off) {
				iov[k].iov_len += LAYOUT_BLOCK;
				continue;
			}
			offs[++k] = off;
			iov[k] = (struct iovec){ .iov_base = buf + (size_t)j * LAYOUT_BLOCK,
						 .iov_len = LAYOUT_BLOCK };
		}
		rc = remote_readv(m->r, offs, iov, k + 1);
		for (j = 0; j < n && rc == 0; j++) {
			uint64_t pb = g_array_index(pbs, uint64_t, i + j);

			if (!settle_bytes(m, pb, buf + (size_t)j * LAYOUT_BLOCK, out))
				g_array_append_val(slow, pb);
		}
	}
	if (rc == 0 && slow->len)
		own = owners_of(m, slow);
	for (c = 0; c < LAYOUT_SET_MAX; c++)
		copy[c] = g_malloc(LAYOUT_BLOCK);
	for (i = 0; i < slow->len && rc == 0; i++)
		rc = settle_block(m, g_array_index(slow, uint64_t, i), &own[i], copy, out);
	for (c = 0; c < LAYOUT_SET_MAX; c++)
		g_free(copy[c]);
	g_free(own);
	g_free(buf);
	g_array_free(slow, TRUE);
	g_array_free(pbs, TRUE);
	return rc;
}

/* format 2: the written blocks of the hot regions, as runs (pb, count) */
static bool add_hot_blocks(struct meta_ext *e, void *ctx)
{
	void **a = ctx;
	struct csum *c = a[0];
	GArray *runs = a[1];
	uint64_t pb = e->pblock, end = e->pblock + e->count;

	if (e->state != META_EXT_WRITTEN)
		return true;
	while (pb < end) {
		uint64_t region = pb / REGION, stop = MIN(end, (region + 1) * REGION);
		uint64_t count = stop - pb;

		if (csum_hot(c, region)) {
			g_array_append_val(runs, pb);
			g_array_append_val(runs, count);
		}
		pb = stop;
	}
	return true;
}

/*
 * Format 2 wrote an in-place write's CRC after its data: a block of a hot
 * region that fails its CRC may hold an acknowledged write whose CRC was
 * never journaled, or damage - which, nothing can tell. Its CRC is dropped
 * (it reads unverified until rewritten or scrubbed), once, and said.
 */
static int drop_legacy(struct meta *m, struct checksum_recovery *out)
{
	uint8_t *buf = g_malloc(LEGACY_BLOCKS * LAYOUT_BLOCK);
	GArray *runs = g_array_new(FALSE, FALSE, sizeof(uint64_t));
	void *ctx[2] = { m->csum, runs };
	GHashTableIter it;
	gpointer k, v;
	uint32_t crc;
	guint i;
	int rc = 0;

	pthread_mutex_lock(&m->lock);
	g_hash_table_iter_init(&it, m->inodes);
	while (g_hash_table_iter_next(&it, &k, &v))
		inode_ext_foreach(v, add_hot_blocks, ctx);
	pthread_mutex_unlock(&m->lock);
	for (i = 0; i + 1 < runs->len && rc == 0; i += 2) {
		uint64_t pb = g_array_index(runs, uint64_t, i);
		uint64_t left = g_array_index(runs, uint64_t, i + 1), n, j;

		for (; left && rc == 0; pb += n, left -= n) {
			n = MIN(left, (uint64_t)LEGACY_BLOCKS);
			rc = remote_read(m->r, extent_pool_off(m, pb), buf, n * LAYOUT_BLOCK);
			for (j = 0; j < n && rc == 0; j++) {
				if (!csum_get(m->csum, pb + j, &crc) ||
				    layout_crc(buf + j * LAYOUT_BLOCK, LAYOUT_BLOCK) == crc)
					continue;
				csum_clear(m->csum, pb + j, 1);
				out->dropped++;
			}
		}
	}
	if (out->dropped)
		g_message("format 2: %" G_GUINT64_FORMAT " blocks of regions an interrupted write "
			  "left do not match their checksums, which that client wrote after the "
			  "data: their checksums are dropped (rmemfs-ctl scrub gives them new ones)",
			  (guint64)out->dropped);
	g_array_free(runs, TRUE);
	g_free(buf);
	return rc;
}

int checksum_recover(struct meta *m, struct checksum_recovery *out)
{
	struct remote_judge j;
	GArray *hot = g_array_new(FALSE, FALSE, sizeof(uint64_t));
	guint i;
	int rc;

	memset(out, 0, sizeof(*out));
	checksum_judge(m, &j);
	rc = remote_recover(m->r, &j);
	if (rc == 0)
		rc = settle_pending(m, out);
	csum_hot_list(m->csum, hot);
	if (rc == 0 && hot->len && m->g.version < LAYOUT_VERSION_AHEAD)
		rc = drop_legacy(m, out);
	if (rc == 0) {
		pthread_mutex_lock(&m->lock);
		for (i = 0; i < hot->len; i++)
			csum_hot_set(m->csum, g_array_index(hot, uint64_t, i), false, 0,
				     &m->ckpt_bytes);
		pthread_mutex_unlock(&m->lock);
		out->regions = hot->len;
	}
	g_array_free(hot, TRUE);
	return rc;
}

/* ---- rmemfs-fsck ---- */

/* a block waiting in the batch: where it is and what its checksum says */
struct check_item {
	uint64_t ino, foff, pb;
	uint32_t crc;
};

struct check {
	struct meta *m;
	bool repair;
	void (*report)(void *ctx, const char *line);
	void *ctx;
	unsigned int bad, repaired;
	uint8_t *copy[LAYOUT_SET_MAX];
	/* one copy: CHECK_BATCH blocks read at once, not one round trip each */
	struct check_item item[CHECK_BATCH];
	uint64_t off[CHECK_BATCH];
	struct iovec iov[CHECK_BATCH];
	uint8_t *batch;
	int nbatch;
};

static void G_GNUC_PRINTF(2, 3) say(struct check *k, const char *fmt, ...)
{
	va_list ap;
	char *line;

	va_start(ap, fmt);
	line = g_strdup_vprintf(fmt, ap);
	va_end(ap);
	k->report(k->ctx, line);
	g_free(line);
}

/* do a copy's bytes pass block pb? (its new or, pending, its old CRC) */
static bool passes(struct check *k, uint64_t pb, uint32_t crc, const void *blk, uint32_t *got)
{
	bool old;

	*got = layout_crc(blk, LAYOUT_BLOCK);
	return csum_accepts(k->m->csum, pb, crc, *got, &old);
}

/* block pb (ino at foff) on every copy: 0 or the pool's -errno */
static int check_block(struct check *k, uint64_t ino, uint64_t foff, uint64_t pb, uint32_t crc)
{
	uint64_t off = extent_pool_off(k->m, pb);
	unsigned int n = MIN(remote_copies(k->m->r), LAYOUT_SET_MAX), c, good = n;
	bool lazy = remote_copy_decodes(k->m->r, off); /* decodes: only if the data is bad */
	int rcs[LAYOUT_SET_MAX];
	uint32_t got;

	for (c = 0; c < n && !(lazy && good == 0); c++) {
		rcs[c] = remote_read_copy(k->m->r, off, k->copy[c], LAYOUT_BLOCK, c);
		if (rcs[c] == -EHOSTDOWN)
			continue;
		if (rcs[c] < 0)
			return rcs[c];
		if (good == n && passes(k, pb, crc, k->copy[c], &got))
			good = c;
	}
	if (good == 0 && lazy)
		return 0;
	for (c = 0; c < n; c++) {
		if (rcs[c] || c == good || passes(k, pb, crc, k->copy[c], &got))
			continue;
		k->bad++;
		if (good == n) {
			say(k, "inode %" G_GUINT64_FORMAT " offset %" G_GUINT64_FORMAT " (data block %"
			    G_GUINT64_FORMAT "%s%s): does not match its checksum (stored %08x, "
			    "computed %08x)%s", (guint64)ino, (guint64)foff, (guint64)pb,
			    n > 1 ? ", " : "", n > 1 ? remote_copy_name(k->m->r, off, c) : "",
			    crc, got, n > 1 ? "; no copy matches" : "");
			continue;
		}
		if (k->repair && remote_write_copy(k->m->r, off, k->copy[good], LAYOUT_BLOCK, c) == 0)
			k->repaired++;
		say(k, "inode %" G_GUINT64_FORMAT " offset %" G_GUINT64_FORMAT " (data block %"
		    G_GUINT64_FORMAT "): the %s does not match its checksum (stored %08x, "
		    "computed %08x)%s%s", (guint64)ino, (guint64)foff, (guint64)pb,
		    remote_copy_name(k->m->r, off, c), crc, got,
		    k->repair ? "; rewritten from the " : "",
		    k->repair ? remote_copy_name(k->m->r, off, good) : "");
	}
	return 0;
}

/*
 * The batch's blocks in one remote_readv. A block that does not match its
 * checksum, and every block when the read fails (a member down), goes
 * through check_block, which reads it again and reports it exactly as an
 * unbatched check would. 0 or the pool's -errno.
 */
static int check_batch(struct check *k)
{
	int i, n = k->nbatch, rc = 0;
	bool read = remote_readv(k->m->r, k->off, k->iov, n) == 0;

	k->nbatch = 0;
	for (i = 0; i < n && rc == 0; i++) {
		const struct check_item *it = &k->item[i];

		if (!read || layout_crc(k->iov[i].iov_base, LAYOUT_BLOCK) != it->crc)
			rc = check_block(k, it->ino, it->foff, it->pb, it->crc);
	}
	return rc;
}

/* check block pb (ino at foff) now, or (one copy) add it to the batch; 0 or -errno */
static int check_add(struct check *k, uint64_t ino, uint64_t foff, uint64_t pb, uint32_t crc)
{
	int i = k->nbatch;

	if (!k->batch)
		return check_block(k, ino, foff, pb, crc);
	k->item[i] = (struct check_item){ .ino = ino, .foff = foff, .pb = pb, .crc = crc };
	k->off[i] = extent_pool_off(k->m, pb);
	k->iov[i] = (struct iovec){ .iov_base = k->batch + (size_t)i * LAYOUT_BLOCK,
				    .iov_len = LAYOUT_BLOCK };
	return ++k->nbatch == CHECK_BATCH ? check_batch(k) : 0;
}

int checksum_check(struct meta *m, bool repair, void (*report)(void *ctx, const char *line),
		   void *ctx, unsigned int *bad, unsigned int *repaired)
{
	struct check k = { .m = m, .repair = repair, .report = report, .ctx = ctx };
	GArray *runs = g_array_new(FALSE, FALSE, sizeof(struct extent_run));
	unsigned int c;
	guint i;
	int rc = 0;

	for (c = 0; c < LAYOUT_SET_MAX; c++)
		k.copy[c] = g_malloc(LAYOUT_BLOCK);
	if (remote_copies(m->r) == 1)
		k.batch = g_malloc((size_t)CHECK_BATCH * LAYOUT_BLOCK);
	extent_written(m, runs);
	for (i = 0; i < runs->len && rc == 0; i++) {
		struct extent_run *run = &g_array_index(runs, struct extent_run, i);
		uint64_t b;
		uint32_t crc;

		for (b = 0; b < run->count && rc == 0; b++)
			if (csum_get(m->csum, run->pblock + b, &crc))
				rc = check_add(&k, run->ino, (run->file_block + b) * LAYOUT_BLOCK,
					       run->pblock + b, crc);
	}
	if (rc == 0 && k.nbatch)
		rc = check_batch(&k);
	for (c = 0; c < LAYOUT_SET_MAX; c++)
		g_free(k.copy[c]);
	g_free(k.batch);
	g_array_free(runs, TRUE);
	*bad = k.bad;
	*repaired = k.repaired;
	return rc;
}
