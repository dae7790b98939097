/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * cache_int.h - internals of the block cache, shared by its files:
 *
 *   cache.c            lifecycle, reads, fsync/close, exclusive sections, forget
 *   cache_write.c      writes (write-back and write-through)
 *   cache_index.c      slots, the (inode, block) index, per-inode records, CLOCK eviction
 *   cache_fetch.c      filling slots from the pool (demand fetches and fills, in one batch)
 *   cache_writeback.c  the write-back threads and synchronous write-back (fsync)
 *   cache_readahead.c  sequential detection and the readahead threads
 *   cache_wait.c       the waits, each on its own condition, and their wake-ups
 *                      (the trim thread's too)
 *   cache_thread.c     starting the background threads
 *   cache_grow.c       the arena's chunks: growth with use, giving memory back
 *   cache_stats.c      counters, latency histograms, the stats text
 *
 * docs/ARCHITECTURE.md ("The block cache") describes the model: the arena,
 * sub-block validity, fills, write-back and readahead. The block states are
 * written down once, at enum cache_state below.
 *
 * Locking, the one statement of the order:
 *
 *   ci->rw (one inode; two in ascending inode order)
 *     -> io's inode lock (io.c) -> meta's locks (meta_int.h)
 *   c->lock: a leaf; nothing is taken and nothing calls io, meta or remote
 *     under it. It protects every field of every block and inode record;
 *     the slot bytes follow the block states instead.
 *
 * Per inode (struct cache_inode, created on demand): the blocks, the
 * remembered write-back error (reported to the next fsync/flush/close), the
 * readahead state, and rw: data operations hold it shared; truncate,
 * fallocate, copy_file_range hold it exclusive (cache_begin_exclusive), with
 * every fetch and write-back of the inode finished before they proceed.
 */
#ifndef RMEM_CACHE_INT_H
#define RMEM_CACHE_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include <glib.h>

#include "cache.h"
#include "meta.h"

#define CACHE_SUB META_BLOCK_SIZE /* dirty/allocation tracking unit */
#define CACHE_MASK_WORDS 4 /* 1 MiB / 4 KiB = 256 sub-blocks */
#define CACHE_BLOCK_CONDS 64 /* block waits hash to this many conditions */

/*
 * A block's states. cache_set_state is the one place a state changes, and it
 * wakes whoever waits on the block (cache_wait.c).
 *
 *   EMPTY -> FETCHING         a reader or readahead took a free slot for a miss
 *   EMPTY -> CLEAN            a writer took a free slot (it fills the edges it needs)
 *   CLEAN|DIRTY -> FETCHING   a fill: sub-blocks somebody needs are not valid
 *   FETCHING -> CLEAN|DIRTY   the fetch is done (or failed: valid bytes kept)
 *   CLEAN -> DIRTY            a write (cache_mark_dirty)
 *   DIRTY -> WRITEBACK        a write-back batch took it
 *   WRITEBACK -> CLEAN        written (writers waited, so nothing is newer)
 *   WRITEBACK -> DIRTY        the write failed: retried later
 *   any -> EMPTY              dropped (evicted, truncated, forgotten): its slot is free
 *
 * Besides its state a block has busy (a writer copies into it: other writers,
 * the write-back threads, fills and eviction keep off; readers of valid bytes
 * do not) and pins (readers copying out of it: no eviction, no drop). A block
 * with dirty bits is on the dirty list, oldest first, whatever its state.
 */
enum cache_state {
	CACHE_EMPTY = 0,	/* a free slot, on the free list; not in the index */
	CACHE_FETCHING,		/* one fetch or fill in flight (exactly one per block);
				 * whoever needs its bytes waits on the block */
	CACHE_CLEAN,		/* valid bytes equal the pool's: can be evicted */
	CACHE_DIRTY,		/* some valid bytes are newer than the pool */
	CACHE_WRITEBACK,	/* being written to the pool: the bytes in flight are stable,
				 * writers wait on the block */
};

struct cache_inode;

struct cache_block {
	uint64_t ino; /* key, with blk */
	uint64_t blk;
	struct cache_block *hnext; /* index chain; free list link while EMPTY */
	struct cache_block *iprev, *inext; /* the inode's blocks */
	struct cache_block *dprev, *dnext; /* the dirty list */
	struct cache_inode *ci;
	uint8_t *data; /* the slot, bs bytes of the arena */
	uint8_t state; /* enum cache_state */
	bool ref; /* CLOCK: used since the hand last passed */
	bool busy; /* a writer copies into it */
	bool ra; /* brought in by readahead and not read yet */
	bool on_dirty_list;
	uint16_t waiters; /* threads in cache_wait_block on this block */
	uint32_t pins;
	uint32_t failures; /* write-back attempts that failed in a row */
	uint64_t valid[CACHE_MASK_WORDS]; /* sub-blocks whose bytes the slot holds */
	uint64_t dirty[CACHE_MASK_WORDS]; /* sub-blocks newer than the pool (all valid) */
	/*
	 * What the block's next fetch brings in: the sub-blocks set here that
	 * are not valid yet (all of them normally; a random read's own range:
	 * see cache_ra_is_seq; a write's partly covered edges). Set by the
	 * thread that puts the block in state FETCHING; all again after.
	 */
	uint64_t want[CACHE_MASK_WORDS];
	uint64_t alloc[CACHE_MASK_WORDS]; /* sub-blocks known to have pool blocks */
	uint64_t dirty_ns; /* when it became dirty (CLOCK_MONOTONIC) */
	uint64_t dirty_seq; /* c->dirty_seq when it became dirty */
};

struct cache_inode {
	uint64_t ino;
	unsigned int refs; /* threads using the record (it outlives them only with blocks/error) */
	unsigned int nblocks;
	unsigned int ndirty; /* blocks with dirty bits */
	struct cache_block *blocks; /* list head (iprev/inext) */
	pthread_rwlock_t rw; /* shared: data ops; exclusive: truncate & co */
	pthread_cond_t cond; /* cache_wait_inode: any block of the inode changed */
	unsigned int waiters;
	unsigned int exclusive; /* an exclusive section runs: the write-back thread leaves the inode alone */
	unsigned int urgent; /* fsyncs in progress: the write-back threads help, whatever the age */
	int wb_err; /* a write-back error not reported yet (0: none) */
	uint64_t retry_ns; /* the write-back thread retries the inode's failed blocks after this */
	/* readahead (cache_readahead.c) */
	uint64_t ra_prev; /* offset of the last read */
	uint64_t ra_next; /* where a sequential reader goes next */
	uint64_t ra_end; /* end of what readahead has issued */
	uint64_t ra_win; /* current window, bytes */
	unsigned int ra_streak; /* sequential reads in a row */
};

enum cache_lat {
	CACHE_LAT_FETCH, /* one batch of pool reads */
	CACHE_LAT_WRITEBACK, /* one batch of pool writes + commit */
	CACHE_LAT_NCACHE,
};

#define CACHE_HIST_BUCKETS 256

struct cache_hist {
	uint64_t count;
	uint64_t sum_ns;
	uint64_t max_ns;
	uint64_t b[CACHE_HIST_BUCKETS];
};

/* counters, updated with relaxed atomics (cache_stats.c) */
struct cache_counters {
	uint64_t hits; /* blocks read that were valid in the cache */
	uint64_t misses; /* blocks a reader had to fetch (or fill, or wait for) */
	uint64_t ra_blocks; /* blocks fetched by readahead */
	uint64_t ra_hits; /* of those, read afterwards */
	uint64_t fills; /* partly valid blocks completed from the pool */
	uint64_t fetch_batches;
	uint64_t evictions;
	uint64_t bytes_read; /* served to readers */
	uint64_t bytes_written; /* accepted from writers */
	uint64_t wb_batches; /* write-back batches (one post each) */
	uint64_t wb_blocks;
	uint64_t wb_errors;
	uint64_t discarded; /* dirty blocks given up (inode gone, or errors) */
	uint64_t throttled; /* writers that waited for the write-back thread */
	uint64_t fsyncs;
	uint64_t chunks_grown; /* cache_grow.c */
	uint64_t chunks_populated; /* of those, faulted in whole when they came */
	uint64_t chunks_released;
	uint64_t released_blocks; /* clean blocks dropped to give a chunk back */
	uint64_t pressure_releases; /* ticks that gave memory back because it ran short */
	uint64_t idle_releases; /* ... because the mount was idle */
	uint64_t ghost_hits; /* blocks taken in again soon after their eviction */
};

struct cache_ra_job;

struct cache {
	struct cache_config cfg;
	struct io *io;
	struct meta *meta;
	struct remote *remote;
	uint32_t bs; /* block size */
	unsigned int shift; /* log2(bs) */
	unsigned int subs; /* sub-blocks per block */
	unsigned int max_req; /* blocks one request may hold at once */

	uint8_t *arena; /* nslots * bs bytes reserved; chunks [0, nactive) in use */
	size_t arena_len;
	bool arena_registered; /* remote_arena_set done: chunks are registered as they come */
	bool reg_warned;

	/* growth and giving back (cache_grow.c); under lock, written by the trim thread */
	unsigned int chunk_slots; /* slots per chunk */
	unsigned int nchunks, nactive;
	unsigned int live; /* slots below it are in use; above: a chunk draining, or not in use */
	bool grow_blocked; /* memory is short: takers evict instead of asking for growth */
	bool grow_wanted; /* a taker asked the trim thread for a chunk */
	bool grow_proven; /* ... past CACHE_GROW_FREE: ghost hits, or nothing to evict */
	bool trim_stop;
	bool trim_started;
	pthread_t trim_thread;
	int trim_efd; /* kick and stop */
	struct memwatch *mw; /* NULL: no pressure signal */
	uint64_t headroom; /* memwatch's last reading (stats) */
	uint64_t seen_activity, idle_since_ns; /* trim thread only */

	pthread_mutex_t lock;
	/* the waits of cache_wait.c, each with its own condition and waiter count */
	pthread_cond_t block_cond[CACHE_BLOCK_CONDS]; /* by slot: a block changed */
	pthread_cond_t slot_cond; /* a slot became free or evictable */
	pthread_cond_t dirty_cond; /* dirty blocks fell below dirty_max */
	unsigned int slot_waiters, dirty_waiters;

	struct cache_block *blocks; /* nslots descriptors */
	unsigned int nslots;
	struct cache_block **hash;
	unsigned int hmask;
	uint64_t *ghosts; /* by hash bucket: tags of evicted blocks (cache_index.c) */
	unsigned int ghosts_pending; /* ghost hits since the last growth step they asked for */
	struct cache_block *free_list;
	unsigned int nfree, nclean, ndirty; /* ndirty: blocks with dirty bits */
	unsigned int hand; /* CLOCK */
	struct cache_block *dirty_head, *dirty_tail;
	uint64_t dirty_seq;
	GHashTable *inodes; /* &ci->ino -> struct cache_inode */
	bool stopping;

	/* write-back policy */
	unsigned int dirty_bg; /* the write-back thread writes back regardless of age above this */
	unsigned int dirty_max; /* writers wait above this */
	uint64_t expire_ns; /* dirty data older than this is written back */

	/* write-back threads (cache_writeback.c) */
	pthread_t *wb_threads;
	unsigned int nwb_threads;
	int wb_efd; /* kick and stop */

	/* readahead (cache_readahead.c) */
	pthread_t *ra_threads;
	unsigned int nra_threads;
	int ra_efd; /* semaphore: queued jobs */
	int ra_stop_efd;
	GQueue ra_queue; /* struct cache_ra_job *, under lock */

	struct cache_counters st;
	struct cache_hist lat[CACHE_LAT_NCACHE];
	struct cache_hist op_lat[CACHE_OP_N];
};

static inline uint64_t cache_blk_off(const struct cache *c, uint64_t blk)
{
	return blk << c->shift;
}

static inline void cache_count(uint64_t *counter, uint64_t n)
{
	__atomic_add_fetch(counter, n, __ATOMIC_RELAXED);
}

/* set bits [from, to) of a sub-block mask; test that all are set */
bool cache_mask_all(const uint64_t *mask, unsigned int from, unsigned int to);
void cache_mask_set(uint64_t *mask, unsigned int from, unsigned int to);
/*
 * The next run of sub-blocks at or after *i (below subs) whose bits are set
 * in set and clear in clear (NULL: no such mask), as [*i, *j). False when
 * there is none.
 */
bool cache_mask_next_run(const uint64_t *set, const uint64_t *clear, unsigned int subs,
			 unsigned int *i, unsigned int *j);

/* the sub-blocks [s / CACHE_SUB, ceil(e / CACHE_SUB)) of bytes [s, e) */
static inline unsigned int cache_sub_of(uint32_t s)
{
	return s / CACHE_SUB;
}

static inline unsigned int cache_sub_end(uint32_t e)
{
	return (e + CACHE_SUB - 1) / CACHE_SUB;
}

/* does the slot hold bytes [s, e) of the block? */
static inline bool cache_valid(const struct cache_block *b, uint32_t s, uint32_t e)
{
	return cache_mask_all(b->valid, cache_sub_of(s), cache_sub_end(e));
}

static inline bool cache_full_valid(const struct cache *c, const struct cache_block *b)
{
	return cache_mask_all(b->valid, 0, c->subs);
}

static inline bool cache_none_valid(const struct cache_block *b)
{
	return !(b->valid[0] | b->valid[1] | b->valid[2] | b->valid[3]);
}

/* the next fetch of b brings bytes [s, e) (sub-block aligned outwards) */
static inline void cache_want(struct cache_block *b, uint32_t s, uint32_t e)
{
	memset(b->want, 0, sizeof(b->want));
	cache_mask_set(b->want, cache_sub_of(s), cache_sub_end(e));
}

static inline bool cache_has_dirty(const struct cache_block *b)
{
	return b->dirty[0] | b->dirty[1] | b->dirty[2] | b->dirty[3];
}



/* bytes of block blk that [off, end) covers, as [*s, *e) inside the block */
static inline void cache_block_span(const struct cache *c, uint64_t blk, uint64_t off,
				    uint64_t end, uint32_t *s, uint32_t *e)
{
	uint64_t bo = cache_blk_off(c, blk);

	*s = off > bo ? (uint32_t)(off - bo) : 0;
	*e = end < bo + c->bs ? (uint32_t)(end - bo) : c->bs;
}


/* ---- cache_grow.c ---- */

#define CACHE_CHUNK (16U << 20) /* bytes the arena grows and shrinks by (at least a block) */
/* the cache grows to this with use; beyond it, only when evicted blocks come back */
#define CACHE_GROW_FREE (64ULL << 20)
/* ghost hits a growth step takes: chunk_slots / this */
#define CACHE_GHOSTS_PER_GROW 8

/* register and fault in the first chunk, or all of a resident cache (at create) */
void cache_grow_first(struct cache *c);
int cache_grow_start(struct cache *c);
void cache_grow_stop(struct cache *c); /* NULL-tolerant parts; before the arena goes */
/* does registering a chunk pin its memory (RDMA, or a resident cache)? */
bool cache_pins_chunks(const struct cache *c);
/* bytes of the first nactive chunks resident now (mincore); 0 if it cannot tell */
size_t cache_resident_bytes(struct cache *c, unsigned int nactive);

/* ---- cache_index.c (c->lock held unless said otherwise) ---- */

/* dirty thresholds from the slots in use (c->lock held, or before threads start) */
void cache_set_limits(struct cache *c);

int cache_index_init(struct cache *c);
void cache_index_free(struct cache *c); /* no lock; NULL-tolerant parts */
struct cache_block *cache_lookup(struct cache *c, uint64_t ino, uint64_t blk);
/* a free slot (evicting a clean block if needed), or NULL: none can be had now */
struct cache_block *cache_slot_take(struct cache *c);
/*
 * All or nothing, for a request over blocks b[0..n-1] (NULL: not cached):
 * pin the blocks it found (so taking slots cannot evict them), then take
 * need free slots into slots[]. On failure give back every slot taken,
 * unpin and return false: the caller kicks write-back, waits for a slot
 * (cache_wait_slot) and retries, so no thread ever holds some slots while
 * waiting for others.
 */
bool cache_slots_take_all(struct cache *c, struct cache_block **b, unsigned int n,
			  struct cache_block **slots, unsigned int need);
/* remember b's (inode, block) as evicted, so its coming back asks for growth */
void cache_ghost_add(struct cache *c, const struct cache_block *b);
/* give an unused slot from cache_slot_take back */
void cache_slot_return(struct cache *c, struct cache_block *b);
/* put slot b (from cache_slot_take) in the index as (ci, blk) in state */
void cache_block_insert(struct cache *c, struct cache_block *b, struct cache_inode *ci,
			uint64_t blk, enum cache_state state);
/* take b out of the index (dirty data is lost: callers decide) and free its slot */
void cache_block_drop(struct cache *c, struct cache_block *b);
/* state changes that keep the counters and the dirty list right */
void cache_set_state(struct cache *c, struct cache_block *b, enum cache_state state);
void cache_mark_dirty(struct cache *c, struct cache_block *b, uint32_t from, uint32_t to);
void cache_clear_dirty(struct cache *c, struct cache_block *b);
/* the inode record of ino, created if needed, with a reference */
struct cache_inode *cache_inode_get(struct cache *c, uint64_t ino);
struct cache_inode *cache_inode_find(struct cache *c, uint64_t ino); /* no reference */
void cache_inode_put(struct cache *c, struct cache_inode *ci);
/* the same two taking c->lock themselves */
struct cache_inode *cache_inode_ref(struct cache *c, uint64_t ino);
void cache_inode_unref(struct cache *c, struct cache_inode *ci);
/* free the record if nothing needs it any more */
void cache_inode_maybe_free(struct cache *c, struct cache_inode *ci);
/* drop a pin taken on b (waking whoever waits for it) */
void cache_block_unpin(struct cache *c, struct cache_block *b);
/* a writer is done copying into b */
void cache_block_unbusy(struct cache *c, struct cache_block *b);

/* ---- cache_wait.c (c->lock held) ---- */

void cache_wait_init(struct cache *c);
void cache_wait_destroy(struct cache *c);
/* until b changes: its state, busy or pins (a waiter rescans what it needs) */
void cache_wait_block(struct cache *c, struct cache_block *b);
/* until a block of ci changes, or ci's exclusive section ends */
void cache_wait_inode(struct cache *c, struct cache_inode *ci);
/* until a slot is freed or a block becomes evictable (write-back is woken first) */
void cache_wait_slot(struct cache *c);
/* cache_wait_block on b, or cache_wait_slot when b is NULL */
void cache_wait_for(struct cache *c, struct cache_block *b);
/* until fewer than dirty_max blocks are dirty, or the cache stops (write-back is woken first) */
void cache_wait_dirty(struct cache *c);
void cache_wake_block(struct cache *c, struct cache_block *b);
void cache_wake_inode(struct cache *c, struct cache_inode *ci);
void cache_wake_slot(struct cache *c);
void cache_wake_dirty(struct cache *c);
/* the write-back threads, now rather than at their next period (any lock state) */
void cache_wake_writeback(struct cache *c);
/*
 * A taker found too few free slots: true (the trim thread, cache_grow.c,
 * was asked for chunks: wait for a slot) when the cache may grow, false
 * (evict) when it may not. c->lock held.
 */
bool cache_grow_wanted(struct cache *c);
/* is the cache in use below CACHE_GROW_FREE, where it grows on any need? */
bool cache_grow_free(const struct cache *c);
/* the trim thread, now (any lock state) */
void cache_grow_kick(struct cache *c);

/* ---- cache_fetch.c ---- */

/*
 * Fetch blocks b[0..n) of ci (all FETCHING, owned by the caller): new
 * blocks completely, blocks that were partly valid (fills) outside their
 * valid bytes, as one batch. Bytes past the file's size become zeros. On
 * success they are valid entirely (CLEAN, or DIRTY if they had dirty bits);
 * on failure new blocks are dropped and fills go back to what they were.
 * Wakes waiters. c->lock NOT held. Returns 0 or -errno.
 */
int cache_fetch(struct cache *c, struct cache_inode *ci, struct cache_block **b, unsigned int n);

/* ---- cache_writeback.c ---- */

int cache_writeback_start(struct cache *c);
void cache_writeback_stop(struct cache *c);
/*
 * Write back the dirty blocks of ci that became dirty at or before seq
 * (UINT64_MAX: all), waiting for those in flight; returns 0 or the first
 * error of this call. Waits while another thread holds an exclusive
 * section on ci, unless the caller is that thread (exclusive_holder).
 * c->lock NOT held.
 */
int cache_writeback_inode(struct cache *c, struct cache_inode *ci, uint64_t seq,
			  bool exclusive_holder);

/* ---- cache_thread.c ---- */

/*
 * Start n threads running fn(c): *threads is allocated, *started counts
 * those running. 0, or -errno after saying so (the started ones run on:
 * the caller stops them as usual).
 */
int cache_threads_start(struct cache *c, void *(*fn)(void *), unsigned int n,
			pthread_t **threads, unsigned int *started, const char *what);

/* ---- cache_readahead.c ---- */

int cache_ra_start(struct cache *c);
void cache_ra_stop(struct cache *c);
/*
 * A read of [off, off+len) of ci (file size size) is being served: update
 * the sequential streak and queue readahead beyond it if due. c->lock held.
 */
void cache_ra_note_read(struct cache *c, struct cache_inode *ci, uint64_t off, uint64_t len,
			uint64_t size);
/*
 * Does a read of [off, off+len) continue ci's sequential stream (give or
 * take a request)? A read that does not is random: its missing blocks are
 * fetched for its own range only (sub-block aligned) rather than whole, so
 * a 4 KiB random read moves 4 KiB, not block_size. c->lock held.
 */
bool cache_ra_is_seq(const struct cache *c, const struct cache_inode *ci, uint64_t off,
		     uint64_t len);

/* ---- cache_stats.c ---- */

void cache_hist_add(struct cache_hist *h, uint64_t ns);

#endif /* RMEM_CACHE_INT_H */
