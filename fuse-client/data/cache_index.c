// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * cache_index.c - the block cache's bookkeeping: slot descriptors, the
 * (inode, block) -> slot index (open hashing with chains), per-inode
 * records, the dirty list, state counters, and CLOCK eviction.
 *
 * Everything here runs with c->lock held (see cache_int.h) and does no I/O.
 * CLOCK: every block that is read or written gets its reference bit set;
 * the hand sweeps the slots, clears set bits and takes the first clean,
 * unpinned, idle block whose bit was already clear. Dirty blocks are never
 * evicted: the write-back thread makes them clean first.
 *
 * Evict or grow: below CACHE_GROW_FREE a taker that finds no free slot asks
 * the trim thread for a chunk (cache_grow.c); above it, it evicts, and the
 * cache grows only when blocks it evicted come back (ghost hits): only then
 * would a bigger cache have kept them. Readahead blocks evicted before
 * anyone read them are not remembered (a cold 1 GiB read lost 48-84 of its
 * readahead blocks so, and grew by 4 to 12 chunks for it), and a growth
 * step takes an eighth of a chunk's slots of ghost hits. The evicted blocks are
 * remembered as a tag per hash bucket, overwritten by later evictions to
 * the same bucket, so about twice as many as the cache has slots. A first
 * sequential write or a single pass of random misses thus stays in the
 * cache in use, rather than faulting in fresh pages up to cache_size
 * (measured: a first 1 GiB write 375-446 MiB/s growing to 1 GiB, 1,195
 * MiB/s in 64 MiB).
 */
#define G_LOG_DOMAIN "rmemfs-cache"

#include <errno.h>
#include <string.h>
#include <time.h>

#include "cache_int.h"
#include "clock.h"
#include "io.h"
#include "list.h"

static uint64_t key_of(uint64_t ino, uint64_t blk)
{
	return ino * 0x9E3779B97F4A7C15ULL ^ (blk + 0x632BE59BD9B4E019ULL) * 0xC2B2AE3D27D4EB4FULL;
}

static unsigned int hash_of(const struct cache *c, uint64_t ino, uint64_t blk)
{
	uint64_t h = key_of(ino, blk);

	return (unsigned int)(h ^ (h >> 29)) & c->hmask;
}

int cache_index_init(struct cache *c)
{
	unsigned int i, nb = 1;

	while (nb < 2 * c->nslots)
		nb <<= 1;
	c->hash = g_try_new0(struct cache_block *, nb);
	c->ghosts = g_try_new0(uint64_t, nb);
	c->blocks = g_try_new0(struct cache_block, c->nslots);
	if (!c->hash || !c->ghosts || !c->blocks) {
		cache_index_free(c);
		return -ENOMEM;
	}
	c->hmask = nb - 1;
	for (i = c->nslots; i-- > 0;) {
		struct cache_block *b = &c->blocks[i];

		b->data = c->arena + (size_t)i * c->bs;
		if (i >= c->live)
			continue; /* not in use yet (cache_grow.c) */
		b->hnext = c->free_list;
		c->free_list = b;
	}
	c->nfree = c->live;
	c->inodes = g_hash_table_new(g_int64_hash, g_int64_equal);
	return 0;
}

void cache_index_free(struct cache *c)
{
	if (c->inodes) {
		GHashTableIter it;
		gpointer k, v;

		g_hash_table_iter_init(&it, c->inodes);
		while (g_hash_table_iter_next(&it, &k, &v)) {
			struct cache_inode *ci = v;

			pthread_rwlock_destroy(&ci->rw);
			pthread_cond_destroy(&ci->cond);
			g_free(ci);
		}
		g_hash_table_destroy(c->inodes);
		c->inodes = NULL;
	}
	g_free(c->hash);
	g_free(c->ghosts);
	g_free(c->blocks);
	c->hash = NULL;
	c->ghosts = NULL;
	c->blocks = NULL;
}

void cache_set_limits(struct cache *c)
{
	/* shares of the cache in use now: it grows only when blocks come back */
	c->dirty_bg = MAX(1U, (unsigned int)((uint64_t)c->live * c->cfg.dirty_bg_pct / 100));
	c->dirty_max = MAX(c->dirty_bg + 1,
			   (unsigned int)((uint64_t)c->live * c->cfg.dirty_max_pct / 100));
	c->dirty_max = MIN(c->dirty_max, c->live - c->max_req);
	c->dirty_bg = MIN(c->dirty_bg, c->dirty_max - 1);
}

struct cache_block *cache_lookup(struct cache *c, uint64_t ino, uint64_t blk)
{
	struct cache_block *b = c->hash[hash_of(c, ino, blk)];

	while (b && (b->ino != ino || b->blk != blk))
		b = b->hnext;
	return b;
}

static void hash_unlink(struct cache *c, struct cache_block *b)
{
	struct cache_block **pp = &c->hash[hash_of(c, b->ino, b->blk)];

	while (*pp != b)
		pp = &(*pp)->hnext;
	*pp = b->hnext;
	b->hnext = NULL;
}

static void dirty_list_add(struct cache *c, struct cache_block *b)
{
	b->dnext = NULL;
	b->dprev = c->dirty_tail;
	if (c->dirty_tail)
		c->dirty_tail->dnext = b;
	else
		c->dirty_head = b;
	c->dirty_tail = b;
	b->on_dirty_list = true;
	c->ndirty++;
	b->ci->ndirty++;
}

static void dirty_list_del(struct cache *c, struct cache_block *b)
{
	if (!b->dnext)
		c->dirty_tail = b->dprev;
	LIST_UNLINK(c->dirty_head, b, dprev, dnext);
	b->dprev = b->dnext = NULL;
	b->on_dirty_list = false;
	c->ndirty--;
	b->ci->ndirty--;
	cache_wake_dirty(c);
}

void cache_set_state(struct cache *c, struct cache_block *b, enum cache_state state)
{
	if (b->state == CACHE_CLEAN)
		c->nclean--;
	b->state = state;
	if (state == CACHE_CLEAN)
		c->nclean++;
	cache_wake_block(c, b);
}

void cache_block_unpin(struct cache *c, struct cache_block *b)
{
	b->pins--;
	cache_wake_block(c, b);
}

void cache_block_unbusy(struct cache *c, struct cache_block *b)
{
	b->busy = false;
	cache_wake_block(c, b);
}

void cache_mask_set(uint64_t *mask, unsigned int from, unsigned int to)
{
	unsigned int i;

	for (i = from; i < to; i++)
		mask[i / 64] |= 1ULL << (i % 64);
}

bool cache_mask_next_run(const uint64_t *set, const uint64_t *clear, unsigned int subs,
			 unsigned int *i, unsigned int *j)
{
#define IN_RUN(k) ((set[(k) / 64] & ~(clear ? clear[(k) / 64] : 0)) & (1ULL << ((k) % 64)))
	while (*i < subs && !IN_RUN(*i))
		(*i)++;
	if (*i >= subs)
		return false;
	for (*j = *i + 1; *j < subs && IN_RUN(*j); (*j)++)
		;
#undef IN_RUN
	return true;
}

bool cache_mask_all(const uint64_t *mask, unsigned int from, unsigned int to)
{
	unsigned int i;

	for (i = from; i < to; i++)
		if (!(mask[i / 64] & (1ULL << (i % 64))))
			return false;
	return true;
}

void cache_mark_dirty(struct cache *c, struct cache_block *b, uint32_t from, uint32_t to)
{
	cache_mask_set(b->dirty, from / CACHE_SUB, (to + CACHE_SUB - 1) / CACHE_SUB);
	if (!b->on_dirty_list) {
		b->dirty_ns = clock_now_ns();
		b->dirty_seq = ++c->dirty_seq;
		b->failures = 0;
		dirty_list_add(c, b);
	}
	if (b->state == CACHE_CLEAN)
		cache_set_state(c, b, CACHE_DIRTY);
}

void cache_clear_dirty(struct cache *c, struct cache_block *b)
{
	memset(b->dirty, 0, sizeof(b->dirty));
	if (b->on_dirty_list)
		dirty_list_del(c, b);
	if (b->state == CACHE_DIRTY || b->state == CACHE_WRITEBACK)
		cache_set_state(c, b, CACHE_CLEAN);
}

bool cache_slots_take_all(struct cache *c, struct cache_block **b, unsigned int n,
			  struct cache_block **slots, unsigned int need)
{
	unsigned int k, got;

	for (k = 0; k < n; k++)
		if (b[k])
			b[k]->pins++;
	for (got = 0; got < need; got++) {
		slots[got] = cache_slot_take(c);
		if (slots[got])
			continue;
		while (got--)
			cache_slot_return(c, slots[got]);
		for (k = 0; k < n; k++)
			if (b[k])
				cache_block_unpin(c, b[k]);
		return false;
	}
	return true;
}

struct cache_block *cache_slot_take(struct cache *c)
{
	struct cache_block *b;
	unsigned int steps;

	if (c->free_list) {
		b = c->free_list;
		c->free_list = b->hnext;
		b->hnext = NULL;
		c->nfree--;
		if (c->nfree < c->chunk_slots / 4 && cache_grow_free(c))
			cache_grow_wanted(c); /* ahead of need */
		return b;
	}
	if (cache_grow_free(c) && cache_grow_wanted(c))
		return NULL;
	if (!c->nclean) {
		c->grow_proven = true; /* every block dirty or in use */
		cache_grow_wanted(c);
		return NULL;
	}
	for (steps = 0; steps < 2 * c->live; steps++) {
		b = &c->blocks[c->hand];
		c->hand = c->hand + 1 >= c->live ? 0 : c->hand + 1;
		if (b->state != CACHE_CLEAN || b->pins || b->busy)
			continue;
		if (b->ref) {
			b->ref = false;
			continue;
		}
		cache_count(&c->st.evictions, 1);
		if (!b->ra)
			cache_ghost_add(c, b); /* readahead never read: not a block that was used */
		cache_block_drop(c, b);
		/* drop put it on the free list: take it back */
		c->free_list = b->hnext;
		b->hnext = NULL;
		c->nfree--;
		return b;
	}
	return NULL;
}

void cache_ghost_add(struct cache *c, const struct cache_block *b)
{
	c->ghosts[hash_of(c, b->ino, b->blk)] = key_of(b->ino, b->blk) | 1;
}

/* was (ino, blk) evicted lately? It is forgotten, so it counts once */
static bool ghost_take(struct cache *c, uint64_t ino, uint64_t blk)
{
	uint64_t *g = &c->ghosts[hash_of(c, ino, blk)];

	if (*g != (key_of(ino, blk) | 1))
		return false;
	*g = 0;
	return true;
}

void cache_slot_return(struct cache *c, struct cache_block *b)
{
	if ((unsigned int)(b - c->blocks) >= c->live)
		return; /* its chunk is being given back (cache_grow.c) */
	b->hnext = c->free_list;
	c->free_list = b;
	c->nfree++;
	cache_wake_slot(c);
}

void cache_block_insert(struct cache *c, struct cache_block *b, struct cache_inode *ci,
			uint64_t blk, enum cache_state state)
{
	unsigned int h = hash_of(c, ci->ino, blk);

	if (ghost_take(c, ci->ino, blk)) {
		cache_count(&c->st.ghost_hits, 1);
		/* a bigger cache would have kept it: one step per CACHE_GHOSTS_PER_GROW */
		if (!c->free_list && ++c->ghosts_pending >= c->chunk_slots / CACHE_GHOSTS_PER_GROW) {
			c->ghosts_pending = 0;
			c->grow_proven = true;
			cache_grow_wanted(c);
		}
	}
	b->ino = ci->ino;
	b->blk = blk;
	b->ci = ci;
	b->state = CACHE_EMPTY;
	cache_set_state(c, b, state);
	b->ref = true;
	b->busy = false;
	b->ra = false;
	b->pins = 0;
	b->failures = 0;
	memset(b->valid, 0, sizeof(b->valid));
	cache_want(b, 0, c->bs);
	memset(b->dirty, 0, sizeof(b->dirty));
	memset(b->alloc, 0, sizeof(b->alloc));
	b->hnext = c->hash[h];
	c->hash[h] = b;
	b->iprev = NULL;
	b->inext = ci->blocks;
	if (ci->blocks)
		ci->blocks->iprev = b;
	ci->blocks = b;
	ci->nblocks++;
}

void cache_block_drop(struct cache *c, struct cache_block *b)
{
	struct cache_inode *ci = b->ci;

	if (b->on_dirty_list)
		dirty_list_del(c, b);
	hash_unlink(c, b);
	LIST_UNLINK(ci->blocks, b, iprev, inext);
	b->iprev = b->inext = NULL;
	ci->nblocks--;
	cache_set_state(c, b, CACHE_EMPTY);
	b->ci = NULL;
	b->ino = 0;
	b->ra = false;
	cache_slot_return(c, b);
	cache_inode_maybe_free(c, ci);
}

struct cache_inode *cache_inode_find(struct cache *c, uint64_t ino)
{
	return g_hash_table_lookup(c->inodes, &ino);
}

struct cache_inode *cache_inode_get(struct cache *c, uint64_t ino)
{
	struct cache_inode *ci = g_hash_table_lookup(c->inodes, &ino);

	if (!ci) {
		ci = g_new0(struct cache_inode, 1);
		ci->ino = ino;
		io_rwlock_init(&ci->rw);
		pthread_cond_init(&ci->cond, NULL);
		g_hash_table_insert(c->inodes, &ci->ino, ci);
	}
	ci->refs++;
	return ci;
}

void cache_inode_maybe_free(struct cache *c, struct cache_inode *ci)
{
	if (ci->refs || ci->nblocks || ci->wb_err || ci->exclusive || ci->waiters)
		return;
	g_hash_table_remove(c->inodes, &ci->ino);
	pthread_rwlock_destroy(&ci->rw);
	pthread_cond_destroy(&ci->cond);
	g_free(ci);
}

void cache_inode_put(struct cache *c, struct cache_inode *ci)
{
	ci->refs--;
	cache_inode_maybe_free(c, ci);
}

struct cache_inode *cache_inode_ref(struct cache *c, uint64_t ino)
{
	struct cache_inode *ci;

	pthread_mutex_lock(&c->lock);
	ci = cache_inode_get(c, ino);
	pthread_mutex_unlock(&c->lock);
	return ci;
}

void cache_inode_unref(struct cache *c, struct cache_inode *ci)
{
	pthread_mutex_lock(&c->lock);
	cache_inode_put(c, ci);
	pthread_mutex_unlock(&c->lock);
}
