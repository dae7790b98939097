/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * csum.h - the checksum of every written data block (format 2), kept in the
 * metadata: a sparse table pool block -> CRC-32C in RAM, LAYOUT_REC_CSUM
 * records in the journal, a section of the checkpoint; and the HOT regions
 * that cover the crash window of an in-place overwrite.
 *
 * The table: pages of CSUM_PAGE entries (the CRCs and a presence bitmap),
 * allocated on first set and freed when their last entry goes; about 4.1
 * bytes per block with a checksum. Its own mutex (a leaf lock, taken after
 * m->lock when both are held) lets the data path look CRCs up without
 * m->lock.
 *
 * A block gets its CRC after its data reached the pool and before the
 * transaction that makes it part of a file (io.c queues the CSUM
 * transaction first: the journal's prefix property then gives "a durable
 * EXT_SET(written) has a durable CSUM"). A freed block loses its CRC.
 *
 * An in-place overwrite of a written block changes data whose CRC is
 * durable; until its new CRC is durable a crash would leave them
 * disagreeing. So before the first such write into a region, HOT(region, 1)
 * is made durable; the committer's sweep (csum_sweep) clears a region no
 * write touched since its previous sweep, with a HOT(region, 0) queued
 * after the region's CSUM records. A mount that finds hot regions
 * recomputes their blocks' CRCs from the pool (csum_recompute): what an
 * unacknowledged write left is the truth.
 *
 * Functions return 0 or -errno.
 */
#ifndef RMEM_CSUM_H
#define RMEM_CSUM_H

#include <stdbool.h>
#include <stdint.h>

#include <glib.h>

#include "layout.h"

struct csum;
struct journal_rec;
struct meta;

#define CSUM_PAGE 1024U /* entries per table page */
#define CSUM_SWEEP_MS 5000 /* how often the committer sweeps the hot regions */

/* ---- the table (no struct meta needed) ---- */

struct csum *csum_new(void);
void csum_destroy(struct csum *c); /* NULL-tolerant */

/* the CRC of block pb: true with *crc set, false if it has none */
bool csum_get(struct csum *c, uint64_t pb, uint32_t *crc);
/* the CRCs of blocks [pb, pb+n): have[i] says whether crc[i] was found */
void csum_get_run(struct csum *c, uint64_t pb, uint64_t n, uint32_t *crc, bool *have);
void csum_set(struct csum *c, uint64_t pb, uint32_t crc);
void csum_clear(struct csum *c, uint64_t pb, uint64_t count);
uint64_t csum_count(struct csum *c); /* blocks with a checksum */
/* exchange the contents of a and b (a reader taking a freshly loaded state) */
void csum_swap(struct csum *a, struct csum *b);

/* is region hot? (region = pb / LAYOUT_CSUM_REGION_BLOCKS) */
bool csum_hot(struct csum *c, uint64_t region);
/* make region hot or not in RAM alone; true if that changed it (the meta functions log it) */
bool csum_hot_mark(struct csum *c, uint64_t region, bool hot);
uint64_t csum_hot_count(struct csum *c);

/*
 * The checkpoint's tail (format 2), after the allocation bitmap of nblocks
 * bits: for every used block in bitmap order its le32 CRC (0 if none), a
 * presence bitmap over the used blocks, then le32 n and n uv hot regions in
 * ascending order. csum_tail_len is its exact size.
 */
uint64_t csum_tail_len(struct csum *c, uint64_t nused);
void csum_put_tail(struct csum *c, const uint8_t *bitmap, uint64_t nblocks, GByteArray *b);
/*
 * Read a tail written by csum_put_tail into an empty table: -EBADMSG (and
 * nothing kept) if it does not parse exactly, or names a region past
 * nregions.
 */
int csum_get_tail(struct csum *c, const uint8_t *bitmap, uint64_t nblocks, const uint8_t *buf,
		  size_t len);

/* ---- the metadata's checksums (m->lock not held unless said) ---- */

/* set the CRCs of n blocks (pb[i] -> crc[i]) and journal them as one transaction */
int csum_log(struct meta *m, const uint64_t *pb, const uint32_t *crc, int n);
/* a CSUM or HOT record (journal replay and a reader's follower; m->lock held) */
int csum_apply(struct meta *m, const struct journal_rec *r);
/* blocks freed from a file lose their CRC (inode.c; m->lock held) */
void csum_freed(struct meta *m, uint64_t pb, uint64_t count);
/* the checkpoint's tail bytes the blocks in use (m->blocks_mapped) and hot regions need */
uint64_t csum_ckpt_bytes(struct meta *m, uint64_t nused);

/*
 * Before in-place writes to the n written blocks pb[]: every region they
 * touch is hot and that is durable when this returns; they count as in
 * flight until csum_hot_leave with the same blocks.
 */
int csum_hot_enter(struct meta *m, const uint64_t *pb, int n);
void csum_hot_leave(struct meta *m, const uint64_t *pb, int n);
/*
 * The committer, every CSUM_SWEEP_MS: clear the regions no write touched
 * since the last sweep. all (unmount, nothing in flight): every region.
 */
void csum_sweep(struct meta *m, bool all);
/*
 * Mount (read-write) after loading: recompute from the pool the CRC of every
 * written block of each hot region, journal them and clear the regions.
 * *blocks, *regions: how many.
 */
int csum_recompute(struct meta *m, uint64_t *blocks, uint64_t *regions);

#endif /* RMEM_CSUM_H */
