// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * cache_wait.c - the cache's waits, each on its own condition, and the
 * wake-ups that end them. Every function here runs with c->lock held
 * (cache_wake_writeback with or without it); a waker broadcasts only where
 * a counter says somebody waits.
 */
#define G_LOG_DOMAIN "rmemfs-cache"

#include <errno.h>
#include <unistd.h>

#include "cache_int.h"

static pthread_cond_t *block_cond(struct cache *c, const struct cache_block *b)
{
	return &c->block_cond[(size_t)(b - c->blocks) % CACHE_BLOCK_CONDS];
}

void cache_wait_block(struct cache *c, struct cache_block *b)
{
	b->waiters++;
	pthread_cond_wait(block_cond(c, b), &c->lock);
	b->waiters--;
}

void cache_wait_inode(struct cache *c, struct cache_inode *ci)
{
	ci->waiters++;
	pthread_cond_wait(&ci->cond, &c->lock);
	ci->waiters--;
}

void cache_wait_slot(struct cache *c)
{
	cache_wake_writeback(c); /* it makes dirty blocks clean, so evictable */
	c->slot_waiters++;
	pthread_cond_wait(&c->slot_cond, &c->lock);
	c->slot_waiters--;
}

void cache_wait_dirty(struct cache *c)
{
	cache_wake_writeback(c);
	if (cache_grow_free(c))
		cache_grow_wanted(c); /* a grown cache allows more dirty blocks (cache_set_limits) */
	c->dirty_waiters++;
	pthread_cond_wait(&c->dirty_cond, &c->lock);
	c->dirty_waiters--;
}

void cache_wait_for(struct cache *c, struct cache_block *b)
{
	if (b)
		cache_wait_block(c, b);
	else
		cache_wait_slot(c);
}

static bool evictable(const struct cache_block *b)
{
	return b->state == CACHE_CLEAN && !b->pins && !b->busy;
}

void cache_wake_block(struct cache *c, struct cache_block *b)
{
	if (b->waiters)
		pthread_cond_broadcast(block_cond(c, b));
	if (b->ci && b->ci->waiters)
		pthread_cond_broadcast(&b->ci->cond);
	if (c->slot_waiters && evictable(b))
		pthread_cond_broadcast(&c->slot_cond);
}

void cache_wake_writeback(struct cache *c)
{
	uint64_t one = 1;

	if (c->wb_efd >= 0 && write(c->wb_efd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		g_message("waking the write-back threads: write(eventfd): %s", g_strerror(errno));
}

void cache_wake_inode(struct cache *c, struct cache_inode *ci)
{
	if (ci->waiters)
		pthread_cond_broadcast(&ci->cond);
}

void cache_wake_slot(struct cache *c)
{
	if (c->slot_waiters)
		pthread_cond_broadcast(&c->slot_cond);
}

void cache_wake_dirty(struct cache *c)
{
	if (c->dirty_waiters && (c->ndirty < c->dirty_max || c->stopping))
		pthread_cond_broadcast(&c->dirty_cond);
}

void cache_wait_init(struct cache *c)
{
	unsigned int i;

	for (i = 0; i < CACHE_BLOCK_CONDS; i++)
		pthread_cond_init(&c->block_cond[i], NULL);
	pthread_cond_init(&c->slot_cond, NULL);
	pthread_cond_init(&c->dirty_cond, NULL);
}

void cache_wait_destroy(struct cache *c)
{
	unsigned int i;

	for (i = 0; i < CACHE_BLOCK_CONDS; i++)
		pthread_cond_destroy(&c->block_cond[i]);
	pthread_cond_destroy(&c->slot_cond);
	pthread_cond_destroy(&c->dirty_cond);
}

void cache_grow_kick(struct cache *c)
{
	uint64_t one = 1;

	if (c->trim_efd >= 0 && write(c->trim_efd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		g_message("waking the cache trim thread: write(eventfd): %s", g_strerror(errno));
}

bool cache_grow_free(const struct cache *c)
{
	return (uint64_t)c->nactive * c->chunk_slots * c->bs < CACHE_GROW_FREE;
}

bool cache_grow_wanted(struct cache *c)
{
	if (c->nactive == c->nchunks || c->grow_blocked || c->stopping)
		return false;
	if (!c->grow_wanted) {
		c->grow_wanted = true;
		cache_grow_kick(c);
	}
	return true;
}
