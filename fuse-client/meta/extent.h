/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * extent.h - file data placement: where a regular file's blocks live in the
 * pool, for the data path (io.c, the cache), which moves the bytes itself.
 * Functions take struct meta's lock and return 0 or -errno, as in meta.h.
 */
#ifndef RMEM_EXTENT_H
#define RMEM_EXTENT_H

#include <stdbool.h>
#include <stdint.h>

#include <glib.h>

#include "meta.h"

struct csum;

/* a run of file blocks and where it lives */
struct meta_extent {
	uint64_t file_block; /* first file block (offset / META_BLOCK_SIZE) */
	uint64_t count; /* blocks */
	uint64_t pool_off; /* pool byte offset of the first block; 0 = hole */
	bool fresh; /* just allocated: bytes the caller does not write must be zeroed */
};

/*
 * Map [off, off+len) of a regular file to extents (at most max; returns the
 * number filled, or -errno). With alloc, holes are filled with newly
 * allocated blocks (marked fresh) placed contiguously where possible;
 * -ENOSPC when the pool is full. Without alloc, holes come back with
 * pool_off 0. Extents cover exactly the blocks of the range, in order.
 * (A range that needs more than max extents gets its first max, covering a
 * prefix of the range. Blocks preallocated by fallocate read as holes
 * without alloc and come back fresh with alloc, like new blocks: the caller
 * zeroes what it does not write and extent_write_done() makes them data.)
 */
int extent_map(struct meta *m, uint64_t ino, uint64_t off, uint64_t len, bool alloc,
	       struct meta_extent *ext, int max);
/*
 * After the data of a write has reached the pool: extend the size to end if
 * larger, set mtime/ctime, and commit the blocks extent_map allocated for
 * this range (until then no journal record or checkpoint names them, so a
 * crash before this point leaves nothing pointing at unwritten blocks).
 */
int extent_write_done(struct meta *m, uint64_t ino, uint64_t off, uint64_t len);
/*
 * extent_write_done in two halves, for the write-back cache, which accepts a
 * write long before its data reaches the pool. accept: size = max(size,
 * end), and with times mtime = ctime = now (times false: a page-cache
 * write-back, whose times the kernel owns and sends by setattr); no block is
 * committed. Times that come without a new size are journaled with the next
 * commit (or anything else that logs the inode), not at once. commit, once
 * the data of [off, off+len) is in the pool: its blocks become part of the
 * file; size and times are left alone (times accepted before are logged).
 */
int extent_write_accept(struct meta *m, uint64_t ino, uint64_t end, bool times);
int extent_write_commit(struct meta *m, uint64_t ino, uint64_t off, uint64_t len);
/* fallocate: mode 0 or FALLOC_FL_KEEP_SIZE; new blocks read as zeros */
int extent_fallocate(struct meta *m, uint64_t ino, uint64_t off, uint64_t len, int mode);
/* free the whole blocks inside [off, off+len) (caller zeroes partial edges) */
int extent_punch_hole(struct meta *m, uint64_t ino, uint64_t off, uint64_t len);
/* a run of written blocks of a file */
struct extent_run {
	uint64_t ino;
	uint64_t file_block;
	uint64_t count;
	uint64_t pblock; /* data block number of the first */
};
/* every written extent of every regular file (a snapshot), into out (struct extent_run) */
void extent_written(struct meta *m, GArray *out);

/* the data block number (the checksums' key, csum.h) of a mapped pool offset */
uint64_t extent_pblock(struct meta *m, uint64_t pool_off);
/* the pool offset of data block pb */
uint64_t extent_pool_off(struct meta *m, uint64_t pb);
/* the metadata's checksum table (csum.h), for the data path */
struct csum *extent_csum(struct meta *m);
/* the filesystem's format version (layout.h LAYOUT_VERSION_*) */
uint32_t extent_format(struct meta *m);

/* SEEK_DATA / SEEK_HOLE; -ENXIO past the end */
int extent_seek(struct meta *m, uint64_t ino, uint64_t off, int whence, uint64_t *result);

#endif /* RMEM_EXTENT_H */
