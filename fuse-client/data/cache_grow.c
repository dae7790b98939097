// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * cache_grow.c - the cache's memory: grown in chunks as it is used, given
 * back when the machine (or the process's memory cgroup) runs short and
 * when the mount is idle.
 *
 * The arena is reserved whole at mount (address space only) and used in
 * chunks of CACHE_CHUNK bytes, [0, nactive) of them; only chunk 0 is in use
 * after mount. Up to CACHE_GROW_FREE, a slot taker that finds no free slot
 * while chunks remain and memory is plentiful does not evict: it asks the
 * trim thread to grow (grow(): doubling while blocks are filled whole), as
 * do takers when free slots run low and writers held at the dirty limit.
 * Beyond it the cache grows when a block it evicted is taken in again, or
 * when no block can be evicted (cache_index.c: "Evict or grow"). The trim
 * thread offers the new chunks to every member (a channel registers a
 * chunk when it first moves bytes of it: RDMA needs memory registered
 * before a transfer lands in it) and puts their slots on the free list.
 *
 * Whether new chunks are faulted in by the trim thread
 * (MADV_POPULATE_WRITE: it zeroes the pages, off the data path): over RDMA,
 * whose registration pins a chunk anyway, each before it is used; over TCP,
 * when the blocks in the cache hold valid data in more than half their
 * bytes, after they are put in use, from the far end while takers use the
 * near one, so a writer faster than the zeroing faults its own pages in
 * rather than waiting. Otherwise slots fault in page by page as bytes land
 * in them: a 4 KiB random miss makes 4 KiB resident, not a 64 KiB slot
 * (populating cost a random-read job more CPU than its misses). Pages are
 * 4 KiB: asking for 2 MiB pages (MADV_HUGEPAGE) made the kernel compact
 * memory in the middle of a first sequential write where free huge pages
 * were short, with writes stalled for 40-100 ms.
 *
 * Giving back takes the highest chunk: its slots leave the free list and
 * the index (clean blocks are dropped; dirty ones are written back first, so
 * the chunk may take a few ticks to drain), then it is deregistered and
 * MADV_DONTNEED returns its pages. Chunk 0 is never given back. The trim
 * thread ticks every TRIM_TICK_MS while there is something to give back
 * or growth is held back, reading memwatch.h's headroom: below the low
 * watermark (1/32 of the limit, at least 64 MiB) it gives back enough
 * chunks to come back above twice that, and nothing grows until headroom
 * exceeds twice the watermark plus a chunk. After cache_idle seconds
 * without a read or a write it gives back every chunk but the first.
 *
 * Growing and giving back both run on the trim thread only, so a chunk is
 * never registered and deregistered at once. A resident cache (-o swap) is
 * whole from the start and has no trim thread.
 */
#define G_LOG_DOMAIN "rmemfs-cache"

#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include <glib.h>

#include "cache_int.h"
#include "clock.h"
#include "memwatch.h"
#include "remote.h"

#define TRIM_TICK_MS 250
#define TRIM_LOW_MIN (64ULL << 20)
#define TRIM_LOW_DIV 32

static size_t chunk_bytes(const struct cache *c, unsigned int k)
{
	size_t off = (size_t)k * c->chunk_slots * c->bs;

	return MIN((size_t)c->chunk_slots * c->bs, c->arena_len - off);
}

static uint8_t *chunk_addr(const struct cache *c, unsigned int k)
{
	return c->arena + (size_t)k * c->chunk_slots * c->bs;
}

static unsigned int chunk_end(const struct cache *c, unsigned int k)
{
	return MIN((k + 1) * c->chunk_slots, c->nslots);
}

/* put slots [from, to) on the free list, lowest first out (c->lock held) */
static void free_list_push(struct cache *c, unsigned int from, unsigned int to)
{
	unsigned int i;

	for (i = to; i-- > from;) {
		struct cache_block *b = &c->blocks[i];

		if (b->state != CACHE_EMPTY)
			continue;
		b->hnext = c->free_list;
		c->free_list = b;
		c->nfree++;
	}
}

/* take slots at or above c->live off the free list (c->lock held) */
static void free_list_trim(struct cache *c)
{
	struct cache_block **pp = &c->free_list;

	while (*pp) {
		if ((unsigned int)(*pp - c->blocks) >= c->live) {
			struct cache_block *b = *pp;

			*pp = b->hnext;
			b->hnext = NULL;
			c->nfree--;
		} else {
			pp = &(*pp)->hnext;
		}
	}
}

/* slots in use changed to live (c->lock held) */
static void set_live(struct cache *c, unsigned int live)
{
	unsigned int old = c->live;

	c->live = live;
	if (live > old)
		free_list_push(c, old, live);
	else
		free_list_trim(c);
	if (c->hand >= live)
		c->hand = 0;
	cache_set_limits(c);
	cache_wake_slot(c);
	cache_wake_dirty(c);
}

bool cache_pins_chunks(const struct cache *c)
{
	return c->cfg.resident || !strcmp(remote_transport(c->remote), "rdma");
}

/* do the blocks in the cache hold valid data in more than half their bytes (c->lock NOT held)? */
static bool slots_filled(struct cache *c)
{
	unsigned int i, w, used = 0;
	uint64_t valid = 0;

	pthread_mutex_lock(&c->lock);
	for (i = 0; i < c->live; i++) {
		if (c->blocks[i].state == CACHE_EMPTY)
			continue;
		used++;
		for (w = 0; w < CACHE_MASK_WORDS; w++)
			valid += (unsigned int)__builtin_popcountll(c->blocks[i].valid[w]);
	}
	pthread_mutex_unlock(&c->lock);
	return used && valid > (uint64_t)used * c->subs / 2;
}

/*
 * Fault new chunks in where their registration pins them anyway, and where
 * the blocks in the cache hold valid data in more than half their bytes:
 * slots used whole (zeroed here, off the data path) rather than by narrow
 * random misses, which make 4 KiB of a slot resident (c->lock NOT held).
 */
static bool chunk_wants_populate(struct cache *c)
{
	return cache_pins_chunks(c) || slots_filled(c);
}

static void chunk_populate(struct cache *c, unsigned int k)
{
	if (madvise(chunk_addr(c, k), chunk_bytes(c, k), MADV_POPULATE_WRITE) < 0)
		g_debug("madvise(cache chunk %u, MADV_POPULATE_WRITE): %s", k, g_strerror(errno));
	else
		cache_count(&c->st.chunks_populated, 1);
}

/* fault chunk k in if populate and offer it for registration (c->lock NOT held) */
static void chunk_activate(struct cache *c, unsigned int k, bool populate)
{
	int rc;

	if (populate)
		chunk_populate(c, k);
	if (!c->arena_registered)
		return;
	rc = remote_arena_add(c->remote, k);
	if (rc < 0 && !c->reg_warned) {
		c->reg_warned = true;
		g_message("cache chunk %u could not be registered (%s): its transfers are copied",
			  k, g_strerror(-rc));
	}
}

static void chunk_release(struct cache *c, unsigned int k)
{
	if (c->arena_registered)
		remote_arena_remove(c->remote, k);
	if (madvise(chunk_addr(c, k), chunk_bytes(c, k), MADV_DONTNEED) < 0)
		g_message("madvise(cache chunk %u, MADV_DONTNEED): %s", k, g_strerror(errno));
}

void cache_grow_first(struct cache *c)
{
	unsigned int k;
	int rc = 0;

	for (k = 0; c->arena_registered && k < c->nactive && rc == 0; k++)
		rc = remote_arena_add(c->remote, k);
	if (rc < 0) {
		g_message("the cache arena could not be registered (%s): data moves through bounce buffers",
			  g_strerror(-rc));
		remote_arena_clear(c->remote);
		c->arena_registered = false;
	}
	for (k = 0; k < c->nactive && cache_pins_chunks(c); k++)
		chunk_populate(c, k);
}

size_t cache_resident_bytes(struct cache *c, unsigned int nactive)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE), len, off, done = 0, n = 0;
	unsigned char vec[4096];

	len = MIN((size_t)nactive * c->chunk_slots * c->bs, c->arena_len);
	for (off = 0; off < len; off += done) {
		size_t i;

		done = MIN(len - off, sizeof(vec) * page);
		if (mincore(c->arena + off, done, vec) < 0)
			return 0;
		for (i = 0; i < (done + page - 1) / page; i++)
			n += vec[i] & 1;
	}
	return n * page;
}

/* chunks the cache grows to on any need (CACHE_GROW_FREE), at least one */
static unsigned int grow_free_chunks(const struct cache *c)
{
	uint64_t n = CACHE_GROW_FREE / ((uint64_t)c->chunk_slots * c->bs);

	return (unsigned int)MIN((uint64_t)c->nchunks, MAX(1ULL, n));
}

/* chunks [0, nactive) in use now (trim thread; c->lock NOT held) */
static void publish(struct cache *c, unsigned int nactive)
{
	pthread_mutex_lock(&c->lock);
	cache_count(&c->st.chunks_grown, nactive - c->nactive);
	c->nactive = nactive;
	set_live(c, chunk_end(c, nactive - 1));
	pthread_mutex_unlock(&c->lock);
}

/*
 * More chunks in use (a draining one back first): as many again as are in
 * use when its blocks are filled whole, half as many when not, at least
 * one - a cache being filled reaches its size in a few steps, each of which
 * may stall takers. Trim thread.
 */
static void grow(struct cache *c)
{
	unsigned int k, n, i, limit;
	bool populate;

	pthread_mutex_lock(&c->lock);
	c->grow_wanted = false;
	if (c->live < chunk_end(c, c->nactive - 1)) {
		set_live(c, chunk_end(c, c->nactive - 1));
		pthread_mutex_unlock(&c->lock);
		return;
	}
	k = c->nactive;
	/* unproven asks (takers below CACHE_GROW_FREE, maybe stale) stop there */
	limit = c->grow_proven ? c->nchunks : grow_free_chunks(c);
	c->grow_proven = false;
	pthread_mutex_unlock(&c->lock);
	if (k >= limit)
		return;

	/* a cache filled whole doubles; one of narrow misses grows by half again */
	populate = chunk_wants_populate(c);
	n = MIN(limit - k, MAX(1U, populate ? k : k / 2));
	if (cache_pins_chunks(c)) {
		/* registration on first use pins: fault each chunk in before it is used */
		for (i = 0; i < n; i++) {
			chunk_activate(c, k + i, true);
			publish(c, k + i + 1);
		}
		return;
	}
	/*
	 * Else all at once, then faulted in from the far end while takers
	 * use the near one: a writer faster than the zeroing is never held
	 * back by it (it faults its own pages in), and the two meet once.
	 */
	for (i = 0; i < n; i++)
		chunk_activate(c, k + i, false);
	publish(c, k + n);
	for (i = n; populate && i-- > 0;)
		chunk_populate(c, k + i);
}

/*
 * Give the highest chunk back: 0, -EAGAIN (only chunk 0 is left) or -EBUSY
 * (blocks in it are dirty or in use: it drains, and is retried next tick).
 * Trim thread.
 */
static int shrink_one(struct cache *c)
{
	unsigned int k, i, busy = 0;

	pthread_mutex_lock(&c->lock);
	if (c->nactive <= 1) {
		pthread_mutex_unlock(&c->lock);
		return -EAGAIN;
	}
	k = c->nactive - 1;
	if (c->live > k * c->chunk_slots)
		set_live(c, k * c->chunk_slots);
	for (i = k * c->chunk_slots; i < chunk_end(c, k); i++) {
		struct cache_block *b = &c->blocks[i];

		if (b->state == CACHE_EMPTY)
			continue;
		if (b->state == CACHE_CLEAN && !b->pins && !b->busy) {
			cache_count(&c->st.released_blocks, 1);
			cache_ghost_add(c, b);
			cache_block_drop(c, b);
			continue;
		}
		busy++;
	}
	if (busy) {
		cache_wake_writeback(c);
		pthread_mutex_unlock(&c->lock);
		return -EBUSY;
	}
	pthread_mutex_unlock(&c->lock);

	chunk_release(c, k);

	pthread_mutex_lock(&c->lock);
	c->nactive = k;
	cache_count(&c->st.chunks_released, 1);
	pthread_mutex_unlock(&c->lock);
	return 0;
}

static uint64_t activity(struct cache *c)
{
	return __atomic_load_n(&c->st.bytes_read, __ATOMIC_RELAXED) +
	       __atomic_load_n(&c->st.bytes_written, __ATOMIC_RELAXED) +
	       __atomic_load_n(&c->st.misses, __ATOMIC_RELAXED);
}

/* chunks to give back for memory's sake (0: none), and whether growing is allowed */
static unsigned int pressure(struct cache *c, bool *may_grow)
{
	struct memwatch_reading m;
	uint64_t low, chunk = (uint64_t)c->chunk_slots * c->bs;

	*may_grow = true;
	if (!c->mw || memwatch_read(c->mw, &m) < 0)
		return 0;
	low = MAX(TRIM_LOW_MIN, m.limit / TRIM_LOW_DIV);
	c->headroom = m.headroom;
	*may_grow = m.headroom >= 2 * low + chunk;
	if (m.headroom >= low)
		return 0;
	return (unsigned int)((2 * low - m.headroom + chunk - 1) / chunk);
}

static void shrink(struct cache *c, unsigned int n, uint64_t *counter)
{
	unsigned int k;

	for (k = 0; k < n; k++)
		if (shrink_one(c) < 0)
			break;
	if (k)
		cache_count(counter, 1);
}

static void trim_tick(struct cache *c)
{
	uint64_t now = clock_now_ns(), seen = activity(c);
	unsigned int give;
	bool may_grow, wanted;

	give = pressure(c, &may_grow);
	pthread_mutex_lock(&c->lock);
	c->grow_blocked = !may_grow;
	wanted = c->grow_wanted;
	if (c->grow_blocked) {
		c->grow_wanted = false;
		cache_wake_slot(c); /* takers waiting for growth evict instead */
	}
	pthread_mutex_unlock(&c->lock);

	if (seen != c->seen_activity || wanted) {
		c->seen_activity = seen;
		c->idle_since_ns = now;
	}
	if (give)
		shrink(c, give, &c->st.pressure_releases);
	else if (c->cfg.idle_ms && now - c->idle_since_ns >= (uint64_t)c->cfg.idle_ms * 1000000ULL)
		shrink(c, c->nchunks, &c->st.idle_releases);
	else if (wanted && may_grow)
		grow(c);
}

static void *trim_main(void *arg)
{
	struct cache *c = arg;

	for (;;) {
		struct pollfd pfd = { .fd = c->trim_efd, .events = POLLIN };
		uint64_t v;
		int timeout;

		/* something to give back, or growth held back until memory is plentiful again */
		pthread_mutex_lock(&c->lock);
		timeout = c->nactive > 1 || c->grow_blocked ? TRIM_TICK_MS : -1;
		pthread_mutex_unlock(&c->lock);
		if (poll(&pfd, 1, timeout) > 0 && read(c->trim_efd, &v, sizeof(v)) < 0 &&
		    errno != EAGAIN)
			g_message("cache trim thread: read(eventfd): %s", g_strerror(errno));
		if (__atomic_load_n(&c->trim_stop, __ATOMIC_ACQUIRE))
			break;
		trim_tick(c);
	}
	return NULL;
}

int cache_grow_start(struct cache *c)
{
	int rc;

	if (c->cfg.resident || c->nchunks == 1)
		return 0; /* nothing to grow, nothing to give back */
	if (memwatch_open("", &c->mw) < 0)
		g_message("/proc/meminfo cannot be read: the cache will not give memory back under pressure");
	c->idle_since_ns = clock_now_ns();
	c->trim_efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (c->trim_efd < 0) {
		rc = -errno;
		g_message("eventfd (cache trim thread): %s", g_strerror(-rc));
		return rc;
	}
	rc = -pthread_create(&c->trim_thread, NULL, trim_main, c);
	if (rc < 0) {
		g_message("starting the cache trim thread: %s", g_strerror(-rc));
		close(c->trim_efd);
		c->trim_efd = -1;
		return rc;
	}
	c->trim_started = true;
	return 0;
}

void cache_grow_stop(struct cache *c)
{
	if (c->trim_started) {
		__atomic_store_n(&c->trim_stop, true, __ATOMIC_RELEASE);
		cache_grow_kick(c);
		pthread_join(c->trim_thread, NULL);
		c->trim_started = false;
	}
	if (c->trim_efd >= 0)
		close(c->trim_efd);
	c->trim_efd = -1;
	memwatch_close(c->mw);
	c->mw = NULL;
}
