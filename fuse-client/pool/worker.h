/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * worker.h - a background thread that sleeps until kicked or until its
 * interval passes, and stops through an eventfd plus pthread_join (the lease
 * heartbeat, the metadata committer). Functions return 0 or -errno.
 */
#ifndef RMEM_WORKER_H
#define RMEM_WORKER_H

#include <pthread.h>
#include <stdbool.h>

/* all zero: not started */
struct worker {
	const char *name; /* for messages */
	bool running;
	int efd;
	pthread_t thread;
	bool stop; /* set by worker_stop (atomic) */
};

/* run fn(arg) on a new thread; fn loops on worker_wait. w->name names it in messages */
int worker_start(struct worker *w, const char *name, void *(*fn)(void *), void *arg);
/* wake the thread now (its worker_wait returns). Safe when not started */
void worker_kick(struct worker *w);
/* on the thread: sleep until kicked or timeout_ms; -ECANCELED once it should end */
int worker_wait(struct worker *w, int timeout_ms);
/* end the thread and wait for it. Safe when not started, and twice */
void worker_stop(struct worker *w);

#endif /* RMEM_WORKER_H */
