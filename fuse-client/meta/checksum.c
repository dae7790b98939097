// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * checksum.c - data block checksums into the journal, the hot regions'
 * records, their recomputation at mount, and rmemfs-fsck's check
 * (checksum.h; the table itself is csum.c).
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
#define RECOMPUTE_BLOCKS 256U /* blocks read per step of checksum_recompute */
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
		journal_rec_csum_runs(m->j, pb, crc, (size_t)n);
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

/* every region of pb[] durably hot already: entered without m->lock (the common case) */
static bool hot_enter_fast(struct meta *m, const uint64_t *pb, int n)
{
	uint64_t seq, last = UINT64_MAX;
	int i, j;

	for (i = 0; i < n; i++) {
		if (pb[i] / REGION == last)
			continue;
		last = pb[i] / REGION;
		if (!csum_hot_enter(m->csum, last, &seq))
			break;
		if (seq) {
			csum_hot_leave(m->csum, last);
			break;
		}
	}
	if (i == n)
		return true;
	/* give back the regions entered before the one that was not ready */
	for (j = 0, last = UINT64_MAX; j < i; j++) {
		if (pb[j] / REGION == last)
			continue;
		last = pb[j] / REGION;
		csum_hot_leave(m->csum, last);
	}
	return false;
}

int checksum_hot_enter(struct meta *m, const uint64_t *pb, int n)
{
	uint64_t need = 0, seq, last = UINT64_MAX;
	bool logged = false;
	int i, rc;

	if (hot_enter_fast(m, pb, n))
		return 0;
	pthread_mutex_lock(&m->lock);
	rc = meta_may_change(m, 0);
	if (rc < 0) {
		pthread_mutex_unlock(&m->lock);
		return rc;
	}
	for (i = 0; i < n; i++) {
		uint64_t region = pb[i] / REGION;

		if (region == last)
			continue;
		last = region;
		if (!csum_hot_enter(m->csum, region, &seq)) {
			if (!logged)
				meta_txn_begin(m, NULL);
			logged = true;
			journal_rec_hot(m->j, region, true);
			seq = journal_next_seq(m->j);
			csum_hot_set(m->csum, region, true, seq, &m->ckpt_bytes);
			csum_hot_enter(m->csum, region, &seq);
		}
		need = MAX(need, seq);
	}
	if (logged)
		meta_txn_end(m, NULL);
	need = need > m->durable_seq;
	pthread_mutex_unlock(&m->lock);
	if (need)
		rc = commit_sync(m);
	if (rc < 0)
		checksum_hot_leave(m, pb, n);
	else
		each_region(m, pb, n, csum_hot_durable);
	return rc;
}

void checksum_hot_leave(struct meta *m, const uint64_t *pb, int n)
{
	each_region(m, pb, n, csum_hot_leave);
}

/* ---- recomputation at mount ---- */

struct recompute {
	struct csum *c;
	GArray *runs; /* pairs (pb, count) of written blocks in hot regions */
};

static bool add_hot_blocks(struct meta_ext *e, void *ctx)
{
	struct recompute *rc = ctx;
	uint64_t pb = e->pblock, end = e->pblock + e->count;

	if (e->state != META_EXT_WRITTEN)
		return true;
	while (pb < end) {
		uint64_t region = pb / REGION, stop = MIN(end, (region + 1) * REGION);
		uint64_t count = stop - pb;

		if (csum_hot(rc->c, region)) {
			g_array_append_val(rc->runs, pb);
			g_array_append_val(rc->runs, count);
		}
		pb = stop;
	}
	return true;
}

/* read blocks [pb, pb+n) and set their CRCs in crc[] */
static int crc_from_pool(struct meta *m, uint64_t pb, uint64_t n, uint8_t *buf, uint32_t *crc)
{
	uint64_t i;
	int rc;

	rc = remote_read(m->r, extent_pool_off(m, pb), buf, n * LAYOUT_BLOCK);
	if (rc < 0)
		return rc;
	for (i = 0; i < n; i++)
		crc[i] = layout_crc(buf + i * LAYOUT_BLOCK, LAYOUT_BLOCK);
	return 0;
}

int checksum_recompute(struct meta *m, uint64_t *blocks, uint64_t *regions)
{
	struct recompute ctx = { .c = m->csum };
	uint8_t *buf = g_malloc(RECOMPUTE_BLOCKS * LAYOUT_BLOCK);
	uint64_t pbs[RECOMPUTE_BLOCKS];
	uint32_t crc[RECOMPUTE_BLOCKS];
	GArray *hot = g_array_new(FALSE, FALSE, sizeof(uint64_t));
	GHashTableIter it;
	gpointer k, v;
	guint i;
	int rc = 0;

	*blocks = 0;
	*regions = 0;
	ctx.runs = g_array_new(FALSE, FALSE, sizeof(uint64_t));
	pthread_mutex_lock(&m->lock);
	csum_hot_list(m->csum, hot);
	if (hot->len) {
		g_hash_table_iter_init(&it, m->inodes);
		while (g_hash_table_iter_next(&it, &k, &v))
			inode_ext_foreach(v, add_hot_blocks, &ctx);
	}
	pthread_mutex_unlock(&m->lock);
	for (i = 0; i + 1 < ctx.runs->len && rc == 0; i += 2) {
		uint64_t pb = g_array_index(ctx.runs, uint64_t, i);
		uint64_t left = g_array_index(ctx.runs, uint64_t, i + 1);

		while (left && rc == 0) {
			uint64_t n = MIN(left, (uint64_t)RECOMPUTE_BLOCKS), j;

			rc = crc_from_pool(m, pb, n, buf, crc);
			for (j = 0; j < n; j++)
				pbs[j] = pb + j;
			if (rc == 0)
				rc = checksum_log(m, pbs, crc, (int)n);
			*blocks += n;
			pb += n;
			left -= n;
		}
	}
	if (rc == 0 && hot->len) {
		pthread_mutex_lock(&m->lock);
		meta_txn_begin(m, NULL);
		for (i = 0; i < hot->len; i++) {
			journal_rec_hot(m->j, g_array_index(hot, uint64_t, i), false);
			csum_hot_set(m->csum, g_array_index(hot, uint64_t, i), false, 0,
				     &m->ckpt_bytes);
		}
		meta_txn_end(m, NULL);
		pthread_mutex_unlock(&m->lock);
		*regions = hot->len;
	}
	g_array_free(hot, TRUE);
	g_array_free(ctx.runs, TRUE);
	g_free(buf);
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

/* block pb (ino at foff) on every copy: 0 or the pool's -errno */
static int check_block(struct check *k, uint64_t ino, uint64_t foff, uint64_t pb, uint32_t crc)
{
	uint64_t off = extent_pool_off(k->m, pb);
	unsigned int n = MIN(remote_copies(k->m->r), LAYOUT_SET_MAX), c, good = n;
	bool hot = csum_hot(k->m->csum, pb / REGION);
	bool lazy = remote_copy_decodes(k->m->r, off); /* decodes: only if the data is bad */
	int rcs[LAYOUT_SET_MAX];

	for (c = 0; c < n && !(lazy && good == 0); c++) {
		rcs[c] = remote_read_copy(k->m->r, off, k->copy[c], LAYOUT_BLOCK, c);
		if (rcs[c] == -EHOSTDOWN)
			continue;
		if (rcs[c] < 0)
			return rcs[c];
		if (good == n && layout_crc(k->copy[c], LAYOUT_BLOCK) == crc)
			good = c;
	}
	if (good == 0 && lazy)
		return 0;
	for (c = 0; c < n; c++) {
		uint32_t got;

		if (rcs[c] || c == good || (got = layout_crc(k->copy[c], LAYOUT_BLOCK)) == crc)
			continue;
		if (hot) {
			say(k, "inode %" G_GUINT64_FORMAT " offset %" G_GUINT64_FORMAT ": in a region "
			    "an interrupted write left (its checksum is recomputed at the next "
			    "read-write mount)", (guint64)ino, (guint64)foff);
			continue;
		}
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
