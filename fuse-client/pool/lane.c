// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * lane.c - per-member worker threads for requests spread over members (lane.h).
 *
 * A job is queued on its member's list and one of that member's threads
 * takes it; the caller waits on its own condition until the last of its
 * jobs is done. Threads stop through the stop flag under the queue lock
 * plus pthread_join (they only ever wait on the queue).
 */
#define G_LOG_DOMAIN "rmemfs-remote"

#include "lane.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>

#include <glib.h>

struct lane_wait {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	unsigned int pending; /* jobs not done yet; under lock */
};

struct lane_queue {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct lane_job *head, *tail; /* under lock */
	bool stop; /* under lock */
	pthread_t threads[LANE_PER_MEMBER];
	unsigned int nthreads;
};

struct lanes {
	unsigned int n;
	struct lane_queue *q;
};

static void job_done(struct lane_job *j)
{
	struct lane_wait *w = j->wait;

	pthread_mutex_lock(&w->lock);
	if (--w->pending == 0)
		pthread_cond_signal(&w->cond);
	pthread_mutex_unlock(&w->lock);
}

static void *lane_main(void *arg)
{
	struct lane_queue *q = arg;
	struct lane_job *j;

	for (;;) {
		pthread_mutex_lock(&q->lock);
		while (!q->head && !q->stop)
			pthread_cond_wait(&q->cond, &q->lock);
		j = q->head;
		if (j) {
			q->head = j->next;
			if (!q->head)
				q->tail = NULL;
		}
		pthread_mutex_unlock(&q->lock);
		if (!j)
			return NULL; /* stopping, nothing left */
		j->rc = j->fn(j->arg);
		job_done(j);
	}
}

int lanes_new(unsigned int n, struct lanes **out)
{
	struct lanes *l = g_new0(struct lanes, 1);
	unsigned int i, k;
	int rc;

	l->n = n;
	l->q = g_new0(struct lane_queue, n);
	for (i = 0; i < n; i++) {
		pthread_mutex_init(&l->q[i].lock, NULL);
		pthread_cond_init(&l->q[i].cond, NULL);
	}
	for (i = 0; i < n; i++) {
		for (k = 0; k < LANE_PER_MEMBER; k++) {
			rc = pthread_create(&l->q[i].threads[k], NULL, lane_main, &l->q[i]);
			if (rc) {
				g_message("pthread_create(lane): %s", g_strerror(rc));
				lanes_free(l);
				return -rc;
			}
			l->q[i].nthreads++;
		}
	}
	*out = l;
	return 0;
}

void lanes_free(struct lanes *l)
{
	unsigned int i, k;

	if (!l)
		return;
	for (i = 0; i < l->n; i++) {
		pthread_mutex_lock(&l->q[i].lock);
		l->q[i].stop = true;
		pthread_cond_broadcast(&l->q[i].cond);
		pthread_mutex_unlock(&l->q[i].lock);
		for (k = 0; k < l->q[i].nthreads; k++)
			pthread_join(l->q[i].threads[k], NULL);
		pthread_cond_destroy(&l->q[i].cond);
		pthread_mutex_destroy(&l->q[i].lock);
	}
	g_free(l->q);
	g_free(l);
}

void lanes_run(struct lanes *l, struct lane_job *jobs, unsigned int n)
{
	struct lane_wait w = { .pending = n ? n - 1 : 0 };
	unsigned int i;

	if (!n)
		return;
	pthread_mutex_init(&w.lock, NULL);
	pthread_cond_init(&w.cond, NULL);
	for (i = 1; i < n; i++) {
		struct lane_queue *q = &l->q[jobs[i].member];

		jobs[i].wait = &w;
		jobs[i].next = NULL;
		pthread_mutex_lock(&q->lock);
		if (q->tail)
			q->tail->next = &jobs[i];
		else
			q->head = &jobs[i];
		q->tail = &jobs[i];
		pthread_cond_signal(&q->cond);
		pthread_mutex_unlock(&q->lock);
	}
	jobs[0].rc = jobs[0].fn(jobs[0].arg);
	pthread_mutex_lock(&w.lock);
	while (w.pending)
		pthread_cond_wait(&w.cond, &w.lock);
	pthread_mutex_unlock(&w.lock);
	pthread_cond_destroy(&w.cond);
	pthread_mutex_destroy(&w.lock);
}
