/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * cache.h - the client block cache seam.
 *
 * ops.c moves file data only through these functions; io.c (io.h) below
 * them reaches the pool. This version (cache.c) is a pass-through: reads and
 * writes go straight to io, the kernel page cache does the caching (keep_cache
 * is safe: this client is the pool's only writer), and there is never dirty
 * data here, so flush/invalidate/forget have nothing to do. The block-cache
 * issue replaces cache.c behind this same header: slots in a registered arena
 * indexed by (inode, block), eviction, write-back by a flusher, readahead.
 *
 * Contract for ops.c, which a real cache relies on:
 *  - cache_flush(ino) before anything that reads or changes the inode's data
 *    in the pool without going through this header (fsync, truncate,
 *    fallocate, copy_file_range, SEEK_DATA/SEEK_HOLE);
 *  - cache_invalidate(ino, off, len) after such a change to [off, off+len)
 *    (len UINT64_MAX: to the end of the file);
 *  - cache_forget(ino) once the inode is freed.
 *
 * Functions return 0 / a byte count or -errno, and are thread-safe.
 */
#ifndef RMEM_CACHE_H
#define RMEM_CACHE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct io;
struct cache;

struct cache_config {
	uint64_t size; /* bytes of cache (-o cache_size) */
	uint32_t block_size; /* cache block (-o block_size), power of two 4K..1M */
	uint64_t readahead; /* bytes; 0: none */
	bool writeback; /* -o writeback=on: dirty blocks are flushed later */
};

int cache_create(const struct cache_config *cfg, struct io *io, struct cache **out);
void cache_destroy(struct cache *c); /* flushes nothing: cache_flush_all first. NULL-tolerant */

/* read up to len bytes at off (fewer at EOF); returns the bytes read */
ssize_t cache_read(struct cache *c, uint64_t ino, uint64_t off, size_t len, void *buf);
/* write len bytes at off; returns the bytes accepted (-ENOSPC when the pool is full) */
ssize_t cache_write(struct cache *c, uint64_t ino, uint64_t off, const void *buf, size_t len);

/* make the inode's dirty data reach the pool (its metadata: meta_sync) */
int cache_flush(struct cache *c, uint64_t ino);
/* every inode's dirty data to the pool (unmount, syncfs) */
int cache_flush_all(struct cache *c);
/* the pool changed under [off, off+len) of ino: drop what is cached there */
void cache_invalidate(struct cache *c, uint64_t ino, uint64_t off, uint64_t len);
/* the inode is gone: drop all of it */
void cache_forget(struct cache *c, uint64_t ino);

/* a one-line summary for `rmemfs -d` at unmount into buf */
void cache_describe(struct cache *c, char *buf, size_t cap);

#endif /* RMEM_CACHE_H */
