/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * checksum.h - the metadata's side of data block checksums (format 2): the
 * CRCs of written blocks and the HOT regions go into the table (csum.h) and
 * into the journal (LAYOUT_REC_CSUM, LAYOUT_REC_HOT) here.
 *
 * A new block gets its CRC in the table once its data reached the pool, and
 * in the journal inside the transaction that makes it part of the file,
 * after its EXT_SET (extent.c commit_range): neither is durable without the
 * other. A written block changed in place has its CRC set in the table
 * once the data landed and journaled by the committer's next write
 * (csum_set_unlogged); checksum_log journals at once (scrub, a failed
 * write's blocks). A freed block loses its CRC (inode.c).
 *
 * An in-place overwrite of a written block changes data whose CRC is
 * durable; until its new CRC is durable a crash would leave them
 * disagreeing. So before the first such write into a region, HOT(region, 1)
 * is made durable (checksum_hot_enter); the committer clears a region no
 * write touched since its previous sweep, with a HOT(region, 0) queued after
 * the region's CSUM records (commit.c). A mount that finds hot regions
 * recomputes their blocks' CRCs from the pool (checksum_recompute): what an
 * unacknowledged write left is the truth.
 *
 * Functions take m->lock themselves and return 0 or -errno.
 */
#ifndef RMEM_CHECKSUM_H
#define RMEM_CHECKSUM_H

#include <stdbool.h>
#include <stdint.h>

struct meta;

/* set the CRCs of n blocks (pb[i] -> crc[i]) and journal them as one transaction */
int checksum_log(struct meta *m, const uint64_t *pb, const uint32_t *crc, int n);
/*
 * Before in-place writes to the n written blocks pb[]: every region they
 * touch is hot, and that is durable when this returns; they count as in
 * flight until checksum_hot_leave with the same blocks.
 */
int checksum_hot_enter(struct meta *m, const uint64_t *pb, int n);
void checksum_hot_leave(struct meta *m, const uint64_t *pb, int n);
/*
 * A read-write mount after loading: recompute from the pool the CRC of
 * every written block of each hot region, journal them and clear the
 * regions. *blocks, *regions: how many.
 */
int checksum_recompute(struct meta *m, uint64_t *blocks, uint64_t *regions);
/*
 * rmemfs-fsck: read every written block and check it against its checksum
 * (on a member set, every copy). One line per finding through report;
 * with repair a bad copy is rewritten from a copy that matches. A mismatch
 * in a hot region is what an interrupted write left, not damage: noted,
 * not counted (the next read-write mount recomputes it). *bad: blocks or
 * copies that do not match, *repaired: copies rewritten.
 */
int checksum_check(struct meta *m, bool repair, void (*report)(void *ctx, const char *line),
		   void *ctx, unsigned int *bad, unsigned int *repaired);

#endif /* RMEM_CHECKSUM_H */
