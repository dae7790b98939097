/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * perf_engine.h - inside the rmem-perf worker: the per-slot and per-target
 * state, and the post/poll engine that runs one phase of a row (perf_engine.c).
 * Only perf_worker.c and perf_engine.c include this.
 */
#ifndef RMEM_PERF_ENGINE_H
#define RMEM_PERF_ENGINE_H

#include <stdbool.h>
#include <stdint.h>

#include <glib.h>

#include "perf_worker.h"

enum perf_phase {
	PHASE_FILL, /* READ verify: write the pattern the reads will check */
	PHASE_WARMUP,
	PHASE_MEASURE,
	PHASE_CHECK, /* WRITE verify: read every written target back */
};

struct perf_target {
	uint64_t off; /* pool offset */
	uint64_t raddr;
	uint32_t rkey;
};

struct perf_slot {
	bool busy;
	uint64_t n_job; /* warm-up + measured ops posted by this slot in this row */
	uint64_t n_phase; /* ops posted in the current phase */
	uint64_t quota; /* ops it may post in this phase; UINT64_MAX: until the deadline */
	/* the op in flight */
	uint64_t t_post;
	uint64_t off;
	uint32_t len;
	uint64_t iter; /* pattern pass expected (READ / CHECK) */
	uint64_t expect; /* CAS: the old value a successful link returns */
	bool check_data; /* compare the slot's bytes at completion */
};

/*
 * Run one phase of the row to its end: until every slot posted its quota (or,
 * with deadline_ns != 0, until that CLOCK_MONOTONIC time passed) and every
 * posted op completed. 0; -ECANCELED when another worker aborted the run; the
 * -errno of a failed post, poll or completion (printed, run aborted).
 */
int perf_engine_run(struct perf_worker *w, const struct perf_job *job, enum perf_phase phase,
		    uint64_t deadline_ns);

/* true once some worker failed */
bool perf_worker_aborted(const struct perf_worker *w);
/*
 * Print "thread N: <what>: <strerror> (errno E)", abort the run, return rc.
 * Silent for -ECANCELED once the run is aborted (somebody else already spoke).
 */
int perf_worker_fail(struct perf_worker *w, int rc, const char *fmt, ...) G_GNUC_PRINTF(3, 4);
/* print one verify mismatch (the first PERF_MAX_REPORTS per thread and row) */
void perf_worker_mismatch(struct perf_worker *w, const char *fmt, ...) G_GNUC_PRINTF(2, 3);

#endif /* RMEM_PERF_ENGINE_H */
