// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * cache_readahead.c - sequential readahead.
 *
 * Every read of a file updates its streak (cache_ra_note_read, under
 * c->lock, from the reader's critical section): a read that starts where
 * the previous one ended (give or take a request: the kernel issues its own
 * readahead requests in parallel, so they may arrive slightly out of
 * order) extends the streak, anything else ends it. From the second read
 * of a streak on, blocks ahead of the reader are fetched by the readahead
 * threads; the window starts at a few requests and doubles with every read
 * of the streak up to -o readahead. New readahead is queued when less than
 * half a window is left ahead of the reader, so the pool reads overlap the
 * reader's own work.
 *
 * The reader claims the slots itself (without waiting: readahead only uses
 * slots that are free or clean) and creates the blocks in state FETCHING,
 * so a reader arriving before the data waits for that fetch instead of
 * starting its own. A readahead thread then fetches the whole job in one
 * batch. Blocks brought in by readahead carry a flag until first read
 * (the readahead-hit statistic).
 */
#define G_LOG_DOMAIN "rmemfs-cache"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <glib.h>

#include "cache_int.h"

#define RA_MAX_JOB 256U /* blocks per readahead job */

struct cache_ra_job {
	struct cache_inode *ci; /* with a reference */
	unsigned int n;
	struct cache_block *b[];
};

bool cache_ra_is_seq(const struct cache *c, const struct cache_inode *ci, uint64_t off,
		     uint64_t len)
{
	uint64_t slack = MAX(len, (uint64_t)c->bs);

	return off <= ci->ra_next + slack && off + slack >= ci->ra_next;
}

void cache_ra_note_read(struct cache *c, struct cache_inode *ci, uint64_t off, uint64_t len,
			uint64_t size)
{
	uint64_t end = off + len;
	uint64_t win, limit, start, blk, last;
	struct cache_ra_job *job;
	bool seq;
	uint64_t one = 1;

	if (!len)
		return;
	/* the streak is kept without readahead too: it tells random reads apart */
	seq = cache_ra_is_seq(c, ci, off, len);
	if (seq) {
		ci->ra_streak++;
		ci->ra_next = MAX(ci->ra_next, end);
	} else {
		ci->ra_streak = 0;
		ci->ra_win = 0;
		ci->ra_end = 0;
		ci->ra_next = end;
	}
	ci->ra_prev = off;
	if (!c->cfg.readahead || (ci->ra_streak < 2 && !(seq && off == 0)))
		return;

	win = ci->ra_win ? MIN(ci->ra_win * 2, c->cfg.readahead)
			 : MIN(MAX(4 * len, 2 * (uint64_t)c->bs), c->cfg.readahead);
	ci->ra_win = win;
	limit = MIN(ci->ra_next + win, size);
	start = MAX(ci->ra_end, ci->ra_next);
	if (start >= limit || (ci->ra_end > ci->ra_next && ci->ra_end - ci->ra_next >= win / 2))
		return;

	blk = start >> c->shift;
	last = (limit - 1) >> c->shift;
	job = g_malloc(sizeof(*job) + sizeof(job->b[0]) * MIN(RA_MAX_JOB, last - blk + 1));
	job->n = 0;
	for (; blk <= last && job->n < RA_MAX_JOB; blk++) {
		struct cache_block *b;

		if (cache_lookup(c, ci->ino, blk))
			continue;
		b = cache_slot_take(c);
		if (!b)
			break; /* the cache is busy: no readahead now */
		cache_block_insert(c, b, ci, blk, CACHE_FETCHING);
		b->ra = true;
		b->ref = false; /* not used yet: first to go if never read */
		job->b[job->n++] = b;
	}
	ci->ra_end = MIN(cache_blk_off(c, blk), limit);
	if (ci->ra_end < start)
		ci->ra_end = start;
	if (!job->n) {
		g_free(job);
		return;
	}
	ci->refs++;
	job->ci = ci;
	cache_count(&c->st.ra_blocks, job->n);
	g_queue_push_tail(&c->ra_queue, job);
	if (write(c->ra_efd, &one, sizeof(one)) < 0)
		g_message("readahead: write(eventfd): %s", g_strerror(errno));
}

static void *ra_main(void *arg)
{
	struct cache *c = arg;
	struct pollfd pfd[2] = {
		{ .fd = c->ra_stop_efd, .events = POLLIN },
		{ .fd = c->ra_efd, .events = POLLIN },
	};

	for (;;) {
		struct cache_ra_job *job;
		uint64_t v;

		if (poll(pfd, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			g_message("readahead: poll: %s", g_strerror(errno));
			break;
		}
		if (pfd[0].revents & POLLIN)
			break;
		if (!(pfd[1].revents & POLLIN))
			continue;
		/* a semaphore eventfd: one job per successful read; others may take theirs */
		if (read(c->ra_efd, &v, sizeof(v)) < 0)
			continue;
		pthread_mutex_lock(&c->lock);
		job = g_queue_pop_head(&c->ra_queue);
		pthread_mutex_unlock(&c->lock);
		if (!job)
			continue;
		/* errors: the blocks are dropped, a reader that needs them fetches and reports */
		cache_fetch(c, job->ci, job->b, job->n);
		pthread_mutex_lock(&c->lock);
		cache_inode_put(c, job->ci);
		pthread_mutex_unlock(&c->lock);
		g_free(job);
	}
	return NULL;
}

int cache_ra_start(struct cache *c)
{
	int rc;

	c->ra_efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK | EFD_SEMAPHORE);
	c->ra_stop_efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (c->ra_efd < 0 || c->ra_stop_efd < 0) {
		rc = -errno;
		g_message("eventfd: %s", g_strerror(-rc));
		goto err_close;
	}
	rc = cache_threads_start(c, ra_main, c->cfg.ra_threads, &c->ra_threads, &c->nra_threads,
				 "readahead");
	if (rc < 0)
		goto err_stop;
	return 0;

err_stop:
	cache_ra_stop(c);
	return rc;
err_close:
	if (c->ra_efd >= 0)
		close(c->ra_efd);
	if (c->ra_stop_efd >= 0)
		close(c->ra_stop_efd);
	c->ra_efd = c->ra_stop_efd = -1;
	return rc;
}

void cache_ra_stop(struct cache *c)
{
	struct cache_ra_job *job;
	uint64_t one = 1;
	unsigned int i;

	if (c->ra_stop_efd >= 0 && c->nra_threads &&
	    write(c->ra_stop_efd, &one, sizeof(one)) < 0)
		g_message("readahead stop: write(eventfd): %s", g_strerror(errno));
	for (i = 0; i < c->nra_threads; i++)
		pthread_join(c->ra_threads[i], NULL);
	c->nra_threads = 0;
	g_free(c->ra_threads);
	c->ra_threads = NULL;
	/* jobs nobody will run: their blocks never got data */
	pthread_mutex_lock(&c->lock);
	while ((job = g_queue_pop_head(&c->ra_queue))) {
		for (i = 0; i < job->n; i++)
			cache_block_drop(c, job->b[i]);
		cache_inode_put(c, job->ci);
		g_free(job);
	}
	pthread_mutex_unlock(&c->lock);
	if (c->ra_efd >= 0)
		close(c->ra_efd);
	if (c->ra_stop_efd >= 0)
		close(c->ra_stop_efd);
	c->ra_efd = c->ra_stop_efd = -1;
}
