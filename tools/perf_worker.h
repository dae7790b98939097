/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * perf_worker.h - one rmem-perf worker: a connection of its own, a registered
 * local buffer of qd slots, and the post/poll loop that keeps qd operations in
 * flight against the worker's own part of the pool.
 *
 * Layout. The pool range [0, region) is cut into one partition per thread;
 * workers never touch each other's bytes, so verification needs no locking.
 * For READ/WRITE a partition holds up to PERF_MAX_TARGETS targets of the row's
 * size at a stride of the size rounded up to 8 bytes (a target never crosses a
 * region boundary). Local slot s owns targets s, s+qd, s+2qd, ... and has at
 * most one op in flight, so two in-flight ops never hit the same bytes and the
 * last value written to each target is known whatever order completions come
 * back in. FETCH_ADD hits one counter per thread (all slots at once); CAS
 * runs one chain per slot (counter s: compare n, swap n+1).
 *
 * Slot and target state and the post/poll loop live in perf_engine.[ch]; the
 * verify data pattern in perf_pattern.[ch].
 *
 * Per row: perf_worker_prepare() (targets, initial remote state, warm-up),
 * perf_worker_measure() (the timed part), perf_worker_check() (verify
 * read-back). Every function returns 0 or -errno; failures are printed (with
 * the failed call and errno) and set the run's shared abort flag, which makes
 * the other workers stop with -ECANCELED at their next loop turn.
 */
#ifndef RMEM_PERF_WORKER_H
#define RMEM_PERF_WORKER_H

#include <stdbool.h>
#include <stdint.h>

#include "perf_stats.h"
#include "xport.h"

#define PERF_MAX_TARGETS 65536U /* per thread and row */
#define PERF_MAX_REPORTS 5 /* mismatch lines printed per thread and row */

/* the run's parameters, shared read-only by every worker */
struct perf_config {
	unsigned int qd;
	unsigned int threads;
	uint64_t iters; /* measured ops per thread; 0 in duration mode */
	double duration_s; /* measured time per thread; 0 in iters mode */
	uint64_t warmup; /* warm-up ops per thread per row */
	bool verify;
	uint32_t max_size; /* largest op of the run: sizes the local slots */
	uint64_t part_len; /* bytes of pool per thread; thread i starts at i * part_len */
	int *abort; /* shared; set (atomically) by a failing worker */
};

/* one result row being measured */
struct perf_job {
	enum xport_op_type op;
	uint32_t size; /* bytes per op; 8 for atomics */
	uint64_t seed; /* data pattern seed for this row */
};

struct perf_slot;
struct perf_target;

struct perf_worker {
	unsigned int id;
	const struct perf_config *cfg;
	struct xport *x; /* owned */
	uint8_t *buf; /* qd slots of slot_stride bytes */
	size_t buf_len;
	size_t slot_stride;
	struct xport_mr *mr;
	uint64_t part_base; /* first pool offset of this worker's partition */

	struct perf_slot *slots; /* qd */
	struct xport_op *batch; /* qd */
	struct xport_cqe *cqes; /* qd */
	unsigned int *free_ring; /* qd: free slots, FIFO */
	unsigned int free_head, free_count;
	struct perf_target *targets; /* targets of the current row */
	unsigned int ntargets;
	unsigned int per_slot; /* targets per slot: ntargets / qd */
	uint64_t fadd_addend;

	/* results of the current row; read by the main thread between rows */
	struct perf_hist hist; /* measured ops only */
	uint64_t ops; /* measured ops completed */
	uint64_t bytes;
	uint64_t warmup_ops;
	uint64_t t_start_ns, t_end_ns; /* CLOCK_MONOTONIC */
	uint64_t verify_checked;
	uint64_t verify_mismatches;
	unsigned int reports; /* mismatch lines printed this row */
	uint64_t fadd_done; /* FETCH_ADDs completed (warm-up + measured) */
	uint64_t fadd_sum; /* sum of their old values, mod 2^64 */
};

/*
 * Set up worker id over the connection x (taken over: closed by destroy, or
 * here on failure): slot buffer, its registration, the queues. 0, -ENOMEM, or
 * xport_reg_mr's -errno.
 */
int perf_worker_init(struct perf_worker *w, unsigned int id, const struct perf_config *cfg,
		     struct xport *x);
/* NULL-tolerant; releases everything, including the connection */
void perf_worker_destroy(struct perf_worker *w);

/* targets, initial remote state (zeroed counters, the READ-verify pattern), warm-up */
int perf_worker_prepare(struct perf_worker *w, const struct perf_job *job);
/* the measured part; t_start_ns/t_end_ns bracket it */
int perf_worker_measure(struct perf_worker *w, const struct perf_job *job);
/* verify mode: read back what was written / the counters and compare; else 0 */
int perf_worker_check(struct perf_worker *w, const struct perf_job *job);

#endif /* RMEM_PERF_WORKER_H */
