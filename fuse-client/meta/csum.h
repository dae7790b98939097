/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * csum.h - the checksum of every written data block (format 2), in RAM: a
 * sparse table pool block -> CRC-32C, the HOT regions (LAYOUT_CSUM_REGION_BLOCKS
 * data blocks where in-place overwrites may be in flight), and the
 * checkpoint's tail that stores both. What is journaled when, and why,
 * is checksum.h; the design: docs/ARCHITECTURE.md, "Data checksums".
 *
 * The table: pages of CSUM_PAGE entries (the CRCs and a presence bitmap),
 * allocated on first set and freed when their last entry goes; about 4.1
 * bytes per block with a checksum. Its own mutex (a leaf lock, taken after
 * m->lock when both are held) lets the data path look CRCs up without
 * m->lock. No pool access, no other module: a leaf of the metadata layer.
 *
 * Functions return 0 or -errno where they can fail.
 */
#ifndef RMEM_CSUM_H
#define RMEM_CSUM_H

#include <stdbool.h>
#include <stdint.h>

#include <glib.h>

#include "layout.h"

struct csum;

#define CSUM_PAGE 1024U /* entries per table page */

struct csum *csum_new(void);
void csum_destroy(struct csum *c); /* NULL-tolerant */

/* the CRC of block pb: true with *crc set, false if it has none */
bool csum_get(struct csum *c, uint64_t pb, uint32_t *crc);
/* the CRCs of blocks [pb, pb+n): have[i] says whether crc[i] was found */
void csum_get_run(struct csum *c, uint64_t pb, uint64_t n, uint32_t *crc, bool *have);
void csum_set(struct csum *c, uint64_t pb, uint32_t crc);
void csum_clear(struct csum *c, uint64_t pb, uint64_t count);
uint64_t csum_count(struct csum *c); /* blocks with a checksum */
/*
 * An in-place write's CRC: set now, journaled later - the committer takes
 * the blocks set this way (csum_take_unlogged) into one transaction before
 * each journal write and before a sweep clears a region (commit.c). The HOT
 * record of the block's region, durable before the write, covers the crash
 * window meanwhile.
 */
void csum_set_unlogged(struct csum *c, uint64_t pb, uint32_t crc);
/* the blocks csum_set_unlogged set since the last take, ascending, with their CRCs now
 * (into empty arrays: uint64_t, uint32_t) */
void csum_take_unlogged(struct csum *c, GArray *pbs, GArray *crcs);
/* exchange the contents of a and b (a reader taking a freshly loaded state) */
void csum_swap(struct csum *a, struct csum *b);

/* ---- hot regions (region = pb / LAYOUT_CSUM_REGION_BLOCKS) ---- */

bool csum_hot(struct csum *c, uint64_t region);
uint64_t csum_hot_count(struct csum *c);
/*
 * Make region hot (seq: the transaction that says so) or not; true if that
 * changed it. *bytes (may be NULL: the checkpoint's size, m->ckpt_bytes)
 * follows the tail's size.
 */
bool csum_hot_set(struct csum *c, uint64_t region, bool hot, uint64_t seq, uint64_t *bytes);
/*
 * A write into hot region begins: true with *seq (the transaction that made
 * it hot; 0 once that is known durable), false if it is not hot.
 */
bool csum_hot_enter(struct csum *c, uint64_t region, uint64_t *seq);
/* region's HOT transaction is durable: later writes need not ask */
void csum_hot_durable(struct csum *c, uint64_t region);
void csum_hot_leave(struct csum *c, uint64_t region);
/*
 * A sweep: the regions with no write in flight and (unless all) hot durably
 * (seq <= durable_seq) and not written since the previous sweep stop being
 * hot - removed under the table's lock, so no write can enter one between
 * the choice and the removal - and are appended to out (uint64_t), *bytes
 * less their size in the checkpoint; the others are marked not written.
 */
void csum_hot_cold(struct csum *c, uint64_t durable_seq, bool all, GArray *out, uint64_t *bytes);
/* every hot region, ascending, appended to out (uint64_t) */
void csum_hot_list(struct csum *c, GArray *out);

/* ---- the checkpoint's tail ---- */

/*
 * After the allocation bitmap of nblocks bits: for every used block in
 * bitmap order its le32 CRC (0 if none), a presence bitmap over the used
 * blocks, then le32 n and n uv hot regions in ascending order.
 * csum_tail_len is its exact size for nused used blocks.
 */
uint64_t csum_tail_len(struct csum *c, uint64_t nused);
void csum_put_tail(struct csum *c, const uint8_t *bitmap, uint64_t nblocks, GByteArray *b);
/*
 * Read a tail written by csum_put_tail into an empty table: -EBADMSG (and
 * nothing kept) if it does not parse exactly, or names a region past the
 * data area or one twice.
 */
int csum_get_tail(struct csum *c, const uint8_t *bitmap, uint64_t nblocks, const uint8_t *buf,
		  size_t len);

#endif /* RMEM_CSUM_H */
