/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * journal.h - the metadata journal: transactions of state records.
 *
 * One metadata operation is one transaction: journal_begin(), records,
 * journal_commit(), all under struct meta's lock. Committed transactions wait
 * in an in-RAM buffer until commit.c writes them, in one batch, after the
 * current tail of the journal area (journal_take / journal_unwrite). Records
 * are states, not operations ("inode 5 now has these attributes", "entry
 * "a" of 1 is inode 5"), so applying one twice gives the same result.
 *
 * Replay reads the area from its start and applies transactions of the
 * current checkpoint generation with consecutive sequence numbers until the
 * first one that fails a check (magic, fs_id, generation, sequence, length,
 * CRC-32C): after a crash that is the torn tail, the normal end. Every
 * record of a transaction is decoded before any is applied, so a
 * transaction is applied whole or not at all.
 *
 * Functions return 0 or -errno.
 */
#ifndef RMEM_JOURNAL_H
#define RMEM_JOURNAL_H

#include <stdbool.h>
#include <stdint.h>

#include <glib.h>

#include "layout.h"

struct remote;
struct journal;

struct journal *journal_new(uint64_t area_off, uint64_t area_len, uint64_t fs_id);
void journal_destroy(struct journal *j); /* NULL-tolerant */

/* set the position after load/replay or a checkpoint */
void journal_reset(struct journal *j, uint64_t gen, uint64_t tail, uint64_t next_seq);
uint64_t journal_tail(const struct journal *j);
uint64_t journal_next_seq(const struct journal *j); /* seq the txn being built will get */
uint64_t journal_pending_bytes(const struct journal *j);

/* ---- building transactions ---- */

void journal_begin(struct journal *j);
/* append the txn to the pending buffer; returns its seq, or 0 if it held no record */
uint64_t journal_commit(struct journal *j);

void journal_rec_inode(struct journal *j, const struct layout_inode *a);
void journal_rec_inode_free(struct journal *j, uint64_t ino);
void journal_rec_dirent_add(struct journal *j, uint64_t dir, const char *name, size_t nlen,
			    uint64_t ino, uint8_t type, uint64_t cookie);
void journal_rec_dirent_del(struct journal *j, uint64_t dir, const char *name, size_t nlen);
void journal_rec_ext_set(struct journal *j, uint64_t ino, uint64_t fb, uint64_t count,
			 uint64_t pb, uint8_t state);
void journal_rec_ext_clear(struct journal *j, uint64_t ino, uint64_t fb, uint64_t count);
void journal_rec_xattr_set(struct journal *j, uint64_t ino, const char *name, const void *value,
			   size_t len);
void journal_rec_xattr_del(struct journal *j, uint64_t ino, const char *name);
void journal_rec_symlink(struct journal *j, uint64_t ino, const char *target, size_t len);
/* format 2: the CRCs of data blocks [pb, pb+count); a region's hot flag */
/* CSUM, or (ahead) CSUM_AHEAD: an in-place write of these CRCs is about to go out */
void journal_rec_csum(struct journal *j, bool ahead, uint64_t pb, uint64_t count,
		      const uint32_t *crc);
/* the records of n blocks pb[i] -> crc[i] (pb ascending): one per run of consecutive blocks */
void journal_rec_csum_runs(struct journal *j, bool ahead, const uint64_t *pb, const uint32_t *crc,
			   size_t n);

/* a record of the data checksums' (CSUM, CSUM_AHEAD, HOT): it names no inode */
static inline bool journal_rec_is_csum(uint8_t type)
{
	return type == LAYOUT_REC_CSUM || type == LAYOUT_REC_CSUM_AHEAD || type == LAYOUT_REC_HOT;
}
void journal_rec_hot(struct journal *j, uint64_t region, bool hot);

/* ---- flushing (commit.c) ---- */

/*
 * Take the pending buffer for writing: returns it (caller owns it; NULL if
 * empty), with the pool offset to write it at and the last seq it holds.
 * The tail advances now; journal_unwrite() undoes it on a failed write.
 * Once written, journal_recycle() hands it back (under struct meta's lock)
 * to be the next pending buffer, so that a commit allocates nothing.
 */
GByteArray *journal_take(struct journal *j, uint64_t *pool_off, uint64_t *last_seq);
void journal_unwrite(struct journal *j, GByteArray *buf);
void journal_recycle(struct journal *j, GByteArray *buf);
/* tail + pending pass 3/4 of the area: time for a checkpoint */
bool journal_needs_ckpt(const struct journal *j);
/* the pending transactions fill a quarter of the area: write them before the interval */
bool journal_write_due(const struct journal *j);
/* drop the pending transactions (a checkpoint now covers them) */
void journal_drop_pending(struct journal *j);

/* ---- replay ---- */

struct journal_rec {
	uint8_t type; /* enum layout_rec */
	struct layout_inode inode; /* INODE */
	uint64_t ino; /* every type but DIRENT_*, INODE */
	uint64_t dir; /* DIRENT_* */
	uint64_t cookie;
	uint8_t dtype;
	uint64_t fblock, count, pblock; /* CSUM: pblock, count; HOT: pblock is the region */
	uint8_t state; /* HOT: 1 hot, 0 not */
	char *name; /* NUL-terminated copies (DIRENT_*, XATTR_*) */
	size_t nlen;
	const uint8_t *value; /* XATTR_SET value / SYMLINK target / CSUM le32 crcs (into the txn) */
	size_t vlen;
	bool untrusted; /* CSUM of a malformed transaction (salvage): drop the CRCs, set none */
};

struct journal_replay_info {
	uint64_t txns;
	uint64_t bytes; /* end of the last applied txn (the new tail) */
	uint64_t last_seq;
	bool torn; /* stopped at a txn with our magic, fs_id and generation that failed */
	char *stop_reason; /* g_malloc'd, why replay stopped */
	GPtrArray *damage; /* salvage: char *, each malformed transaction and what was dropped */
};

/*
 * Replay generation gen from first_seq on: apply(ctx, rec) for every record.
 * A non-zero apply result stops replay and is returned. A transaction whose
 * checksum is right but whose records do not parse (a bug wrote it) stops
 * replay with -EUCLEAN, naming it and its journal offset in stop_reason;
 * with salvage (rmemfs-fsck) the records before the bad one are applied
 * (its CSUM records marked untrusted: they parsed, yet the bytes that made
 * them may be the damage), the damage goes to info->damage and replay goes
 * on. Every length and count in the area is checked against the bytes there
 * before it is used.
 * Release info with journal_replay_info_clear().
 */
int journal_replay(struct journal *j, struct remote *r, uint64_t gen, uint64_t first_seq,
		   bool salvage, int (*apply)(void *ctx, const struct journal_rec *rec), void *ctx,
		   struct journal_replay_info *info);
void journal_replay_info_clear(struct journal_replay_info *info);

/*
 * A reader following the journal (follow.c): apply the transactions of
 * generation gen from first_seq on found in buf, len bytes of the area read
 * from offset pos, as journal_replay would (info->bytes: the area offset
 * after the last one applied). *more: the bytes ran out inside or before a
 * transaction header (read on from info->bytes, with more bytes if nothing
 * was applied); otherwise replay stopped at what is not (yet) a transaction
 * of gen with the next seq, or at a torn one (the writer may be writing it).
 */
int journal_follow(struct journal *j, const uint8_t *buf, size_t len, uint64_t pos, uint64_t gen,
		   uint64_t first_seq, int (*apply)(void *ctx, const struct journal_rec *rec),
		   void *ctx, struct journal_replay_info *info, bool *more);

#endif /* RMEM_JOURNAL_H */
