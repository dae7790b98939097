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
 * Pending blocks (format 3, write-ahead checksums): an in-place write's new
 * CRC is set (and journaled, checksum.h) before its data goes out, and the
 * block keeps its previous CRC beside it until the write is known to have
 * landed: a block may then hold the bytes of either. csum_set and
 * csum_clear end it too, and so does the region's going cold (hot_set
 * false, hot_cold): no write is in flight there any more.
 */
/*
 * The write of crc into pb is about to go out: crc is the CRC, the old one
 * its alternative - none if it had none, or if it is pending already on
 * having had none (what it held before is still unverified).
 */
void csum_set_ahead(struct csum *c, uint64_t pb, uint32_t crc);
/* pb's write landed: its CRC alone stands */
void csum_settle(struct csum *c, uint64_t pb);
/* pb holds the bytes from before its write: the previous CRC (or none) stands again */
void csum_settle_old(struct csum *c, uint64_t pb);
/* pb is pending: true, *old its previous CRC (*had false: it had none) */
bool csum_pending(struct csum *c, uint64_t pb, uint32_t *old, bool *had);
/*
 * Do bytes whose CRC is got pass block pb, whose CRC is crc? They do when
 * got is crc, or pb is pending and got is the previous CRC (*old true),
 * or pb had none before its write (*old true: they are unverified).
 */
bool csum_accepts(struct csum *c, uint64_t pb, uint32_t crc, uint32_t got, bool *old);
uint64_t csum_pending_count(struct csum *c);
/* every pending block, ascending, appended to out (uint64_t) */
void csum_pending_list(struct csum *c, GArray *out);
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
 * it hot), false if it is not hot.
 */
bool csum_hot_enter(struct csum *c, uint64_t region, uint64_t *seq);
void csum_hot_leave(struct csum *c, uint64_t region);
/*
 * A sweep: the regions with no write in flight, no pending block (one a
 * recovery has yet to settle) and (unless all) hot durably
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
 * blocks, then le32 n and n uv hot regions in ascending order; format 3
 * (ahead) adds le32 n and n pending blocks in use, ascending: uv pb, u8
 * had, le32 previous CRC. csum_tail_len is the exact size for nused used
 * blocks without the pending blocks, whose bytes csum_put_tail returns (the
 * data path adds and settles them without m->lock: they are counted when
 * written, and the slot's slack holds them).
 */
uint64_t csum_tail_len(struct csum *c, uint64_t nused);
uint64_t csum_put_tail(struct csum *c, const uint8_t *bitmap, uint64_t nblocks, bool ahead,
		       GByteArray *b);
/*
 * Read a tail written by csum_put_tail into an empty table: -EBADMSG (and
 * nothing kept) if it does not parse exactly, or names a region past the
 * data area or one twice, or a pending block not in use or without a CRC.
 */
int csum_get_tail(struct csum *c, const uint8_t *bitmap, uint64_t nblocks, bool ahead,
		  const uint8_t *buf, size_t len);

#endif /* RMEM_CSUM_H */
