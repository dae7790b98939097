/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * io.h - file data: moves bytes between FUSE buffers and the pool.
 *
 * io.c asks meta (meta.h) where a range of a file lives (extent_map), moves the
 * bytes with remote_readv / remote_writev (remote.h), and tells meta when the
 * data of a write has landed (extent_write_done: ordered mode, so no durable
 * extent ever points at unwritten blocks). Holes read as zeros; the parts of
 * freshly allocated blocks that a write does not cover are zeroed in the same
 * batch. Every block read is checked against its checksum and every block
 * written gets one, before its extent commits (verify.h).
 *
 * Invariant kept here: bytes of an allocated block that lie past the file's
 * size are zero. A shrinking truncate zeroes the tail of the new last block
 * before meta frees the blocks past it; anything that grows the size (write
 * past EOF, truncate up, fallocate) first zeroes the allocated bytes between
 * the old size and the new data, so stale bytes (e.g. of a write whose
 * extent_write_done was lost in a crash) never become visible.
 *
 * Concurrency: one rwlock per inode (a refcounted table ino -> lock). Reads
 * take it shared; writes, truncates, fallocate and the destination of a copy
 * take it exclusive, so a reader never sees half-zeroed fresh blocks nor
 * blocks that a truncate is freeing. The cache's fetches and write-backs run
 * outside any request of the inode, so these locks, not the cache's, keep
 * them apart from a truncate. The lock order is stated in cache_int.h.
 *
 * The block cache (cache.h) sits above this module: it fetches with
 * io_readv, reserves blocks with io_reserve when it accepts a write, and
 * writes back with io_writeback_files (data first, then extent_write_commit:
 * the ordered-mode rule holds for cached writes too). All functions are
 * thread-safe and return 0 / a byte count or -errno.
 */
#ifndef RMEM_IO_H
#define RMEM_IO_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "meta.h"

struct remote;
struct io;

struct io_stats {
	uint64_t reads;
	uint64_t writes;
	uint64_t bytes_read;
	uint64_t bytes_written;
	uint64_t bytes_zeroed; /* fresh-block padding, truncate tails, punched edges */
	uint64_t hole_bytes_read; /* bytes served as zeros without touching the pool */
	uint64_t copies;
	uint64_t bytes_copied;
};

/*
 * update_atime: keep atime with relatime rules (off for read-only mounts).
 * Allocation failure aborts (GLib), as in the layers below.
 */
struct io *io_create(struct meta *m, struct remote *r, bool update_atime);
/*
 * A read-only mount following the writer (follow.h): data reads pass a gate
 * that io_drain waits on, and a read is returned only while the writer
 * still holds space for this reader (follow_read_ok), else it is -EIO.
 */
void io_follow(struct io *io);
/* return once no read that entered before this call is in flight */
void io_drain(struct io *io);
void io_destroy(struct io *io); /* NULL-tolerant */

/* write len bytes at off; returns len, or -errno (-ENOSPC when the pool is full) */
ssize_t io_write(struct io *io, uint64_t ino, uint64_t off, const void *buf, size_t len);

/*
 * A setattr that changes the size (sa->valid has META_SET_SIZE), applied in
 * one meta_setattr together with the other fields of sa. Zeroes the tail of
 * a partial last block before shrinking, and the allocated bytes between the
 * old and the new size before growing. When the size changes and sa sets no
 * mtime, mtime and ctime become now (truncate(2) semantics).
 */
int io_truncate(struct io *io, uint64_t ino, const struct meta_setattr *sa,
		const struct meta_cred *cred, struct meta_attr *out);

/*
 * fallocate: mode 0 or FALLOC_FL_KEEP_SIZE (allocate, zeroed), or
 * FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE (partial edges zeroed, whole
 * blocks freed). Other modes: -EOPNOTSUPP.
 */
int io_fallocate(struct io *io, uint64_t ino, int mode, uint64_t off, uint64_t len);

/*
 * Copy len bytes from (ino_in, off_in) to (ino_out, off_out) inside the pool
 * (through a client buffer, not through the kernel). The source range is
 * clamped at its EOF. Overlapping ranges of one file behave as if the whole
 * source had been read before anything was written. Returns bytes copied.
 */
ssize_t io_copy_range(struct io *io, uint64_t ino_in, uint64_t off_in, uint64_t ino_out,
		      uint64_t off_out, size_t len);

void io_get_stats(struct io *io, struct io_stats *out);
/* the pool traffic as "key value" lines for the stats xattr; bytes or -ERANGE */
ssize_t io_stats_text(struct io *io, char *buf, size_t cap);
/* one line for the unmount summary */
void io_describe(struct io *io, char *buf, size_t cap);

/* ---- for the block cache (cache.c) ---- */

struct meta *io_meta(struct io *io);
struct remote *io_remote(struct io *io);

/* a piece of one file: [off, off+len) of the file <-> len bytes at buf */
struct io_piece {
	uint64_t off;
	size_t len;
	void *buf;
	/*
	 * io_readv only, optional: bit i (of word i / 64) is set when the
	 * META_BLOCK_SIZE block at written_base + i * META_BLOCK_SIZE, one
	 * of the piece's, holds written data in the pool (written_base is
	 * block aligned, at most off). Bits are only ever set.
	 */
	uint64_t *written;
	uint64_t written_base;
};

/*
 * Read n pieces of one file, all inside its size (the caller clamps), as one
 * batch of pool reads (straight into the cache arena when buf lies there).
 * Holes, unwritten and not yet committed blocks read as zeros.
 */
int io_readv(struct io *io, uint64_t ino, const struct io_piece *p, int n);

/*
 * Allocate the blocks [off, off+len) will need without writing them (they
 * stay fresh: nothing durable points at them until write-back commits
 * them). The block cache calls it when it accepts a write, so that a full
 * pool is -ENOSPC for that write, not a surprise at write-back.
 */
int io_reserve(struct io *io, uint64_t ino, uint64_t off, uint64_t len);

/*
 * io_reserve for a write [off, off+len) that lies inside the window [woff,
 * woff+wlen) (META_BLOCK_SIZE aligned, at most 64 * nwords blocks), and
 * what the window's blocks are: bit i of mask[] (nwords words, set, never
 * cleared) for block woff / META_BLOCK_SIZE + i when it holds written data
 * or was reserved here. One lookup when the range is written already: the
 * block cache remembers the mask, so that later writes to the window need
 * none.
 */
int io_reserve_window(struct io *io, uint64_t ino, uint64_t off, uint64_t len, uint64_t woff,
		      uint64_t wlen, uint64_t *mask, unsigned int nwords);

/* 1 if the META_BLOCK_SIZE block holding off holds written data, 0 if not, or -errno */
int io_block_written(struct io *io, uint64_t ino, uint64_t off);

/*
 * Write back several files in ONE batch of pool writes. f[] is sorted by
 * ascending, distinct inode; each file's pieces are sorted by offset and no
 * two share a META_BLOCK_SIZE block. The parts of fresh blocks outside the
 * pieces are zeroed in the same batch. Once all of it is in the pool, each
 * piece is committed (extent_write_commit: the times stay those of the
 * write). An open reference on each inode is held meanwhile, so its blocks
 * cannot be freed (and reused) under a write in flight. Per file: rc is 0,
 * -ENOENT (the inode no longer exists: nothing written) or the error; gone
 * is set when dropping the reference freed the inode (unlinked meanwhile).
 * A file whose mapping failed is skipped, the others still go. Returns 0,
 * or the error of the batch itself (then every file not failed before has it).
 */
struct io_wb_file {
	uint64_t ino;
	const struct io_piece *p;
	int n;
	int rc; /* out */
	bool gone; /* out */
};
int io_writeback_files(struct io *io, struct io_wb_file *f, int nf);

/*
 * Start the scrub on its own thread: every written block of every file is
 * read and checked against its checksum (on a member set every copy, a bad
 * one rewritten from a good one), and the blocks without one (from a
 * version-1 pool) get one; throttled like a rebuild. Progress and results
 * are lines of io_stats_text (scrub idle|running|done|failed, scrub_done,
 * scrub_total, scrub_errors, scrub_repaired, scrub_filled). -EBUSY while
 * one runs, -EROFS on a reader.
 *
 * rmemfs-ctl asks for it by setting VERIFY_SCRUB_XATTR (verify.h) on the
 * mount's root (the FUSE front end: root or the mount's owner only).
 */
int io_scrub_start(struct io *io);

/* a per-inode data lock: an rwlock that prefers writers (io's table and the cache's records) */
void io_rwlock_init(pthread_rwlock_t *rw);

/* relatime: after a read of ino served from anywhere, move atime if due (best effort) */
void io_note_read(struct io *io, uint64_t ino, const struct meta_attr *attr);

#endif /* RMEM_IO_H */
