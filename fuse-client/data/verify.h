/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * verify.h - data block checksums on the data path (io.c): every pool write
 * of file data covers whole META_BLOCK_SIZE blocks and records their
 * CRC-32Cs in the metadata (csum.h); every read of a block that has one
 * checks it, confirms a mismatch before reporting it, and on a member set
 * serves and rewrites a good copy. The design and its reasons:
 * docs/ARCHITECTURE.md, "Data checksums".
 *
 * Writes into written (non-fresh) blocks hold a striped lock per block
 * (VERIFY_STRIPES mutexes, taken in ascending order, each once) from before
 * the read of a read-modify-write to after the checksum update, so two
 * writes into one block neither lose bytes nor leave a CRC that does not
 * match; reads take none, and a mismatching read is confirmed under the
 * block's stripe (no write of this client is then in flight on it). Lock
 * order: io.c's inode locks, then stripes, then meta's locks.
 *
 * Functions return 0 or -errno; thread-safe.
 */
#ifndef RMEM_VERIFY_H
#define RMEM_VERIFY_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include <glib.h>

struct meta;
struct remote;
struct verify;

#define VERIFY_STRIPES 1024U

/* counters for the stats xattr */
struct verify_stats {
	uint64_t verified; /* blocks read whose checksum matched */
	uint64_t errors; /* mismatches confirmed and not repaired (EIO) */
	uint64_t repaired; /* bad copies rewritten from a good one */
	uint64_t unverified; /* blocks read without a checksum to check */
};

/* follower: a following reader (-o ro), whose checksums may lag the writer's */
struct verify *verify_new(struct meta *m, struct remote *r, bool follower);
void verify_destroy(struct verify *v); /* NULL-tolerant */
void verify_get_stats(struct verify *v, struct verify_stats *out);
/* the counters as "key value" lines; bytes or -ERANGE */
ssize_t verify_stats_text(struct verify *v, char *buf, size_t cap);

/* a growing list of pool pieces for one batch of remote_readv / remote_writev */
struct verify_batch {
	uint64_t *offs;
	struct iovec *iov;
	int cnt, cap;
};
/* add a piece; one contiguous in the pool and in memory with the last is merged into it */
void verify_batch_add(struct verify_batch *b, uint64_t off, void *buf, size_t len);
void verify_batch_free(struct verify_batch *b);

/* ---- reads ---- */

/* the pieces of one read of file ino, and the blocks to check once they arrived */
struct verify_read {
	struct verify_batch b;
	GArray *blks; /* struct verify_rblk (verify.c) */
	GPtrArray *bounce; /* whole-block buffers of blocks the read covers in part */
	uint64_t ino;
	uint64_t bytes; /* bytes of the file the read brings */
};

void verify_read_init(struct verify_read *vr, uint64_t ino);
void verify_read_clear(struct verify_read *vr);
/*
 * File bytes [s, t) lie in written blocks of an extent that starts at file
 * offset es and pool offset pool_off; they go to dst. A block with a
 * checksum that the range covers only in part is read whole into a bounce
 * buffer.
 */
void verify_read_add(struct verify *v, struct verify_read *vr, uint64_t es, uint64_t pool_off,
		     uint64_t s, uint64_t t, char *dst);
/*
 * Read everything added (one batch) and check every block that has a
 * checksum. A mismatch is confirmed (the writer: once more under the
 * block's stripe, the extent mapped again; a reader: returned unverified in
 * a region hot in its view, else -EAGAIN: the caller waits for one refresh
 * and reads again, then with last set), then repaired from another copy on
 * a set; what stays bad is -EIO with one log line naming the file, offset
 * and block.
 */
int verify_read_run(struct verify *v, struct verify_read *vr, bool last);

/* ---- writes ---- */

struct verify_write {
	struct verify_batch b;
	GArray *blks; /* struct verify_wblk (verify.c) */
	GPtrArray *bounce;
};

void verify_write_init(struct verify_write *vw);
void verify_write_clear(struct verify_write *vw);
/*
 * File bytes [s, t) of ino from src (NULL: zeros), inside an extent that
 * spans file bytes [es, ee) at pool offset pool_off. fresh: the extent's
 * blocks are new, the bytes of [es, ee) outside [s, t) are written as zeros
 * (returned: how many); otherwise the blocks are written in place, and a
 * block covered in part is read, merged and written whole.
 */
uint64_t verify_write_add(struct verify *v, struct verify_write *vw, uint64_t ino, uint64_t es,
			  uint64_t ee, uint64_t pool_off, bool fresh, uint64_t s, uint64_t t,
			  const char *src);
/*
 * Write everything added as one batch: the regions of in-place blocks made
 * hot (csum.h), their stripes taken, the read-modify-writes done, one
 * remote_writev, then the CRCs of every block journaled in one transaction
 * (before the caller's extent_write_done / extent_write_commit).
 */
int verify_write_run(struct verify *v, struct verify_write *vw);

/* ---- scrub ---- */

/* the root's xattr rmemfs-ctl sets to start a scrub (io_scrub_start) */
#define VERIFY_SCRUB_XATTR "user.rmemfs.scrub"

/* what a scrub of some blocks found */
struct verify_scrub {
	uint64_t errors; /* blocks no copy of which matches (each reported once) */
	uint64_t repaired; /* bad copies rewritten */
	uint64_t filled; /* blocks that had no checksum and got one */
};

/*
 * Check the n written blocks of file ino at file offset es and pool offset
 * pool_off under their stripes (the caller holds the inode's data lock):
 * on a set every copy, a bad one rewritten from a good one; the blocks
 * without a checksum get one, journaled. Bad blocks are counted in *res,
 * not an error; 0 or the pool's -errno.
 */
int verify_scrub(struct verify *v, uint64_t ino, uint64_t es, uint64_t pool_off, uint64_t n,
		 struct verify_scrub *res);

#endif /* RMEM_VERIFY_H */
