/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * cache.h - the client block cache.
 *
 * ops.c moves file data only through these functions; io.c (io.h) below
 * them reaches the pool. Blocks of block_size bytes live in slots of one
 * arena registered with the transport (fetches land there, write-back
 * leaves from there, without copies), indexed by (inode, block), evicted by
 * CLOCK. Reads fetch what is missing in one batch (one in flight per block;
 * others wait for it) and read ahead of sequential streams. With writeback
 * on, writes are accepted into the cache (their blocks allocated at once, so
 * a full pool is an error of the write) and write-back threads write dirty
 * ranges back by age and by dirty ratio; otherwise they go through to the
 * pool. docs/ARCHITECTURE.md ("The block cache") describes the design.
 *
 * Contract for ops.c:
 *  - fsync / fdatasync: cache_flush(ino), then commit_sync;
 *  - FUSE flush (close): cache_close(ino) - reports (once) a write-back
 *    error remembered for the inode and starts writing it back;
 *  - anything that reads or changes the inode's data in the pool without
 *    going through this header (truncate, fallocate, copy_file_range) runs
 *    between cache_begin_exclusive and cache_end_exclusive;
 *  - SEEK_DATA/SEEK_HOLE: cache_flush first (cached writes are data);
 *  - cache_forget(ino) once the inode is freed.
 *
 * Functions return 0 / a byte count or -errno, and are thread-safe.
 */
#ifndef RMEM_CACHE_H
#define RMEM_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

struct io;
struct cache;
struct cache_block;

struct cache_config {
	uint64_t size; /* bytes of cache (-o cache_size); at least 16 blocks */
	uint32_t block_size; /* cache block (-o block_size), power of two 4K..1M */
	uint64_t readahead; /* largest readahead window in bytes (-o readahead); 0: none */
	bool writeback; /* -o writeback=on: writes are flushed later by the write-back thread */
	/* tuning; 0 means the default */
	unsigned int dirty_expire_ms; /* dirty data older than this is written back (1000) */
	unsigned int dirty_bg_pct; /* write back regardless of age above this % dirty (5) */
	unsigned int dirty_max_pct; /* writers wait above this % dirty (40) */
	unsigned int flush_interval_ms; /* the write-back thread's period (100) */
	unsigned int ra_threads; /* readahead threads (2) */
	unsigned int writeback_threads; /* write-back threads (2): batches go out in parallel */
	/* after this long without a read or write, all but the first chunk go back (-o cache_idle); 0: never */
	unsigned int idle_ms;
	/*
	 * All of it resident and registered from the start, never given back
	 * (-o swap: a swap-out must not fault memory in)
	 */
	bool resident;
};

int cache_create(const struct cache_config *cfg, struct io *io, struct cache **out);
/* stops the threads and frees; writes nothing back: cache_flush_all first. NULL-tolerant */
void cache_destroy(struct cache *c);

/* read up to len bytes at off into buf (fewer at EOF); returns the bytes read */
ssize_t cache_read(struct cache *c, uint64_t ino, uint64_t off, size_t len, void *buf);

/*
 * The same without a copy: on success ref->iov[0..ref->niov) describe the
 * bytes read, pointing into cache slots that stay pinned (or, for a request
 * too large to pin, into a buffer) until cache_read_done(ref), which must
 * follow every successful call, quickly (the reply).
 */
struct cache_read_ref {
	struct iovec *iov;
	int niov;
	struct cache_block **pinned;
	unsigned int npinned;
	void *buf;
	struct iovec one; /* storage when a single iovec suffices */
};
ssize_t cache_read_pin(struct cache *c, uint64_t ino, uint64_t off, size_t len,
		       struct cache_read_ref *ref);
void cache_read_done(struct cache *c, struct cache_read_ref *ref);

/* write len bytes at off; returns len (-ENOSPC when the pool is full, nothing written) */
/* set_times: false for page-cache write-back (fi->writepage): see extent_write_accept */
ssize_t cache_write(struct cache *c, uint64_t ino, uint64_t off, const void *buf, size_t len,
		    bool set_times);

/*
 * fsync: write back the inode's dirty data now (its metadata: commit_sync
 * after this). Returns the error of this write-back, else a write-back
 * error remembered since the last report (then forgotten), else 0.
 */
int cache_flush(struct cache *c, uint64_t ino);
/* close (FUSE flush): the remembered write-back error if any (forgotten then); starts write-back */
int cache_close(struct cache *c, uint64_t ino);
/* every inode's dirty data to the pool (unmount): 0 or the first error */
int cache_flush_all(struct cache *c);

/*
 * An exclusive section on ino, for operations that change the file's data
 * in the pool themselves: waits for the inode's fetches and write-backs in
 * flight, throws away cached writes at or beyond discard_from (a truncate:
 * the new size; else UINT64_MAX), writes the rest back, and keeps readers,
 * writers and the write-back thread off the inode until cache_end_exclusive, which
 * drops the cached blocks overlapping [off, off+len) (len UINT64_MAX: to
 * the end). On error (the write-back failed) the section was not entered.
 * Two inodes: enter them in ascending inode order.
 */
int cache_begin_exclusive(struct cache *c, uint64_t ino, uint64_t discard_from);
void cache_end_exclusive(struct cache *c, uint64_t ino, uint64_t off, uint64_t len);

/* the inode is gone: drop all of it (dirty data included) */
void cache_forget(struct cache *c, uint64_t ino);

/* ---- statistics ---- */

enum cache_op {
	CACHE_OP_READ,
	CACHE_OP_WRITE,
	CACHE_OP_FSYNC,
	CACHE_OP_N,
};

/* ops.c reports how long a FUSE operation took (ns) */
void cache_note_latency(struct cache *c, enum cache_op op, uint64_t ns);

/*
 * Everything counted, as "name value" lines (latencies in microseconds as
 * percentiles), NUL-terminated in buf; returns the length (without the NUL)
 * or -ERANGE when cap is too small. Served as the virtual xattr
 * CACHE_STATS_XATTR of the root directory (not listed by listxattr).
 */
#define CACHE_STATS_XATTR "user.rmemfs.stats"
#define CACHE_STATS_MAX 8192 /* the text (and the pool state before it) never exceeds this */
ssize_t cache_stats_text(struct cache *c, char *buf, size_t cap);

/* a one-line summary for `rmemfs -d` at unmount into buf */
void cache_describe(struct cache *c, char *buf, size_t cap);

#endif /* RMEM_CACHE_H */
