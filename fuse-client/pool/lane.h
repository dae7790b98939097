/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * lane.h - threads that run one member's share of a request, so that a
 * request spread over several members moves on all of them at once (a
 * member's own calls are synchronous: member.h).
 *
 * Each member has LANE_PER_MEMBER threads waiting on its queue. lanes_run
 * runs the first job on the calling thread and hands the others to their
 * members' lanes, then waits for all of them: the caller sees one
 * synchronous call. Functions return 0 or -errno.
 */
#ifndef RMEM_LANE_H
#define RMEM_LANE_H

#include <stdint.h>

#define LANE_PER_MEMBER 2U

struct lanes;
struct lane_wait;

struct lane_job {
	uint32_t member; /* whose lanes run it */
	int (*fn)(void *arg); /* the work; its result goes to rc */
	void *arg;
	int rc;
	/* lanes_run's own */
	struct lane_job *next;
	struct lane_wait *wait;
};

/* lanes for members [0, n); -ENOMEM/-errno of pthread_create (nothing left running) */
int lanes_new(unsigned int n, struct lanes **out);
void lanes_free(struct lanes *l); /* stops and joins every lane; NULL-tolerant */
/* run jobs[0..n) (one per member at most is the idea, not a rule) and wait for all */
void lanes_run(struct lanes *l, struct lane_job *jobs, unsigned int n);

#endif /* RMEM_LANE_H */
