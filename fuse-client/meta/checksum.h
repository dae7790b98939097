/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * checksum.h - the metadata's side of data block checksums (formats 2 and
 * 3): the CRCs of written blocks, the pending blocks of in-place writes and
 * the HOT regions go into the table (csum.h) and into the journal
 * (LAYOUT_REC_CSUM, LAYOUT_REC_CSUM_AHEAD, LAYOUT_REC_HOT) here.
 *
 * A CRC is only ever computed over bytes the writer holds in hand, never
 * derived from what the pool holds. A new block gets its CRC in the table
 * once its data reached the pool, and in the journal inside the
 * transaction that makes it part of the file, after its EXT_SET (extent.c
 * commit_range): neither is durable without the other. A written block
 * changed in place gets its new CRC journaled, durably, before its data
 * goes out (checksum_ahead: write-ahead checksums, as a copy-on-write
 * filesystem keeps its block checksums with its metadata): until that
 * write is known to have landed the block is pending and passes with its
 * new or its old CRC. A freed block loses its CRC (inode.c).
 *
 * The HOT records bound where pending blocks can be: the first in-place
 * write into a region makes it hot in the same durable transaction as its
 * CSUM_AHEAD; the committer clears a region no write touched since its
 * previous sweep (commit.c), which ends its blocks' pending state. A mount
 * after a crash (checksum_recover) makes the copies of a set agree, each
 * block by its checksum, then reads each pending block: it keeps the CRC
 * its bytes match, new or old, and one whose bytes match neither is
 * damage (EIO when read) - nothing is recomputed.
 *
 * Functions take m->lock themselves and return 0 or -errno.
 */
#ifndef RMEM_CHECKSUM_H
#define RMEM_CHECKSUM_H

#include <stdbool.h>
#include <stdint.h>

struct meta;

struct remote_judge;

/* set the CRCs of n blocks (pb[i] -> crc[i]) and journal them as one transaction */
int checksum_log(struct meta *m, const uint64_t *pb, const uint32_t *crc, int n);
/*
 * Before in-place writes of crc[i] into the n written blocks pb[]: every
 * region they touch is hot, the blocks are pending with these CRCs, and
 * that is durable when this returns 0. *entered: they count as in flight
 * (until checksum_hot_leave with the same blocks) and are pending, also
 * when an error follows (whether the records became durable is not known).
 */
int checksum_ahead(struct meta *m, const uint64_t *pb, const uint32_t *crc, int n,
		   bool *entered);
void checksum_hot_leave(struct meta *m, const uint64_t *pb, int n);

/* what checksum_recover found */
struct checksum_recovery {
	uint64_t pending; /* blocks an interrupted in-place write may have torn */
	uint64_t kept_new, kept_old, bad; /* ... holding the new bytes, the old, neither */
	uint64_t rewritten; /* copies of them rewritten from the one kept */
	uint64_t dropped; /* format 2: checksums an interrupted write left unknown, dropped */
	uint64_t regions; /* hot regions cleared */
};
/*
 * A read-write mount (or rmemfs-fsck --repair) after loading, before
 * anything reads or writes data: the member set's copies of the regions a
 * dead client marked made to agree by the checksums (remote_recover), then
 * every pending block read (every copy) and settled on the CRC its bytes
 * match - new before old, the other copies rewritten from it - or, matching
 * neither, kept on its new CRC and reported (reads of it fail with EIO);
 * then the hot regions cleared, in RAM: the caller writes a checkpoint. A
 * pool of format 2 has no pending blocks: a written block of a hot region
 * that fails its CRC (a format-2 client wrote it in place and died before
 * journaling its CRC) loses its CRC, said in the log.
 */
int checksum_recover(struct meta *m, struct checksum_recovery *out);
/* the judge of data blocks by their checksums, for remote_scrub and remote_recover */
void checksum_judge(struct meta *m, struct remote_judge *j);
/*
 * rmemfs-fsck: read every written block and check it against its checksum
 * (on a member set, every copy). One line per finding through report;
 * with repair a bad copy is rewritten from a copy that matches. A pending
 * block (a write a crash interrupted) matches its new or its old CRC.
 * *bad: blocks or copies that match neither, *repaired: copies rewritten.
 */
int checksum_check(struct meta *m, bool repair, void (*report)(void *ctx, const char *line),
		   void *ctx, unsigned int *bad, unsigned int *repaired);

#endif /* RMEM_CHECKSUM_H */
