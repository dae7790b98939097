// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * perf_worker.c - an rmem-perf worker's set-up and the phases of one row:
 * targets and initial remote state, warm-up, the measured part, and the
 * verify read-back (see perf_worker.h for the layout, perf_engine.c for the
 * post/poll loop that runs each phase).
 */
#define G_LOG_DOMAIN "rmemfs-perf"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <glib.h>

#include "clock.h"
#include "perf_engine.h"

/* ---- set-up ---- */

int perf_worker_init(struct perf_worker *w, unsigned int id, const struct perf_config *cfg,
		     struct xport *x)
{
	unsigned int qd = cfg->qd;
	size_t max_targets;
	int rc = -ENOMEM;

	memset(w, 0, sizeof(*w));
	w->id = id;
	w->cfg = cfg;
	w->x = x;
	w->part_base = (uint64_t)id * cfg->part_len;
	w->fadd_addend = 0x9e3779b1ULL + id; /* > 32 bits after two adds */
	w->slot_stride = ((size_t)MAX(cfg->max_size, 8U) + 63) & ~(size_t)63;
	w->buf_len = ((size_t)qd * w->slot_stride + 4095) & ~(size_t)4095;

	w->slots = g_try_new0(struct perf_slot, qd);
	w->batch = g_try_new0(struct xport_op, qd);
	w->cqes = g_try_new0(struct xport_cqe, qd);
	w->free_ring = g_try_new0(unsigned int, qd);
	max_targets = MIN((uint64_t)PERF_MAX_TARGETS, cfg->part_len / 8 + 1);
	w->targets = g_try_new0(struct perf_target, MAX(max_targets, (size_t)qd));
	if (!w->slots || !w->batch || !w->cqes || !w->free_ring || !w->targets) {
		perf_worker_fail(w, rc, "allocating queues for %u slots", qd);
		goto err_destroy;
	}

	rc = -posix_memalign((void **)&w->buf, 4096, w->buf_len);
	if (rc) {
		w->buf = NULL;
		perf_worker_fail(w, rc, "posix_memalign(%zu bytes of slot buffer)", w->buf_len);
		goto err_destroy;
	}
	memset(w->buf, 0, w->buf_len); /* fault every page in before anything is timed */

	rc = xport_reg_mr(x, w->buf, w->buf_len, &w->mr);
	if (rc) {
		w->mr = NULL;
		perf_worker_fail(w, rc, "xport_reg_mr(%zu bytes)", w->buf_len);
		goto err_destroy;
	}
	return 0;

err_destroy:
	/* NULL-tolerant: releases what was set up, and closes x as promised */
	perf_worker_destroy(w);
	return rc;
}

void perf_worker_destroy(struct perf_worker *w)
{
	if (!w)
		return;
	/*
	 * Deregistering needs nothing in flight; after a failure there may be,
	 * and then close (which abandons in-flight ops and frees everything of
	 * the connection) comes first and takes the registration with it.
	 */
	if (w->x && w->mr && !xport_inflight(w->x))
		xport_dereg_mr(w->x, w->mr);
	w->mr = NULL;
	xport_close(w->x);
	w->x = NULL;
	free(w->buf);
	w->buf = NULL;
	g_free(w->targets);
	g_free(w->free_ring);
	g_free(w->cqes);
	g_free(w->batch);
	g_free(w->slots);
	w->targets = NULL;
	w->free_ring = NULL;
	w->cqes = NULL;
	w->batch = NULL;
	w->slots = NULL;
}

/* first pool offset of the region after the one holding off; pool->size if none */
static uint64_t next_region_start(const struct proto_pool *pool, uint64_t off)
{
	uint64_t start = 0;
	uint32_t i;

	for (i = 0; i < pool->nregions; i++) {
		start += pool->regions[i].len;
		if (start > off)
			return start;
	}
	return pool->size;
}

static int add_target(struct perf_worker *w, uint64_t off, uint64_t len)
{
	struct perf_target *t = &w->targets[w->ntargets];
	int rc;

	rc = proto_pool_resolve(&w->x->pool, off, len, &t->raddr, &t->rkey);
	if (rc)
		return rc;
	t->off = off;
	w->ntargets++;
	return 0;
}

/* the row's targets inside this worker's partition */
static int build_targets(struct perf_worker *w, const struct perf_job *job)
{
	const struct perf_config *cfg = w->cfg;
	uint64_t end = w->part_base + cfg->part_len;
	uint64_t stride = ((uint64_t)job->size + 7) & ~7ULL;
	uint64_t cur = w->part_base;
	uint64_t cap = MIN((uint64_t)PERF_MAX_TARGETS, cfg->part_len / 8 + 1);
	int rc;

	w->ntargets = 0;
	w->per_slot = 0;
	if (job->op == XPORT_CAS || job->op == XPORT_FETCH_ADD) {
		/* the counters: one per slot for CAS chains, one per thread for FETCH_ADD */
		unsigned int i, n = job->op == XPORT_CAS ? cfg->qd : 1;

		if ((uint64_t)n * 8 > cfg->part_len)
			return perf_worker_fail(w, -ENOSPC,
						"%u counters do not fit in the thread's %" PRIu64
						" bytes of --region",
						n, cfg->part_len);
		for (i = 0; i < n; i++) {
			rc = add_target(w, w->part_base + (uint64_t)8 * i, 8);
			if (rc)
				return perf_worker_fail(w, rc,
							"proto_pool_resolve(offset %" PRIu64 ")",
							w->part_base + (uint64_t)8 * i);
		}
		return 0;
	}

	while (w->ntargets < cap && cur + job->size <= end) {
		rc = add_target(w, cur, job->size);
		if (rc == -ERANGE) {
			/* would cross a region boundary: start again at the next region */
			uint64_t next = next_region_start(&w->x->pool, cur);

			if (next <= cur)
				break;
			cur = next;
			continue;
		}
		if (rc)
			return perf_worker_fail(
			    w, rc, "proto_pool_resolve(offset %" PRIu64 ", %" PRIu32 " bytes)", cur,
			    job->size);
		cur += stride;
	}
	w->per_slot = w->ntargets / cfg->qd;
	if (!w->per_slot)
		return perf_worker_fail(
		    w, -ENOSPC,
		    "the thread's %" PRIu64 " bytes of --region hold %u target(s) of %" PRIu32
		    " bytes, fewer than --qd %u (raise --region or lower --qd/--threads)",
		    cfg->part_len, w->ntargets, job->size, cfg->qd);
	return 0;
}

/* slot s's share of total ops */
static uint64_t slot_share(uint64_t total, unsigned int qd, unsigned int s)
{
	return total / qd + (s < total % qd ? 1 : 0);
}

/* ---- the row's phases ---- */

static void reset_row(struct perf_worker *w)
{
	unsigned int s;

	perf_hist_reset(&w->hist);
	w->ops = 0;
	w->bytes = 0;
	w->warmup_ops = 0;
	w->t_start_ns = 0;
	w->t_end_ns = 0;
	w->verify_checked = 0;
	w->verify_mismatches = 0;
	w->reports = 0;
	w->fadd_done = 0;
	w->fadd_sum = 0;
	for (s = 0; s < w->cfg->qd; s++)
		memset(&w->slots[s], 0, sizeof(w->slots[s]));
}

/* warm-up + measured ops slot s will post this row (UINT64_MAX: duration mode) */
static uint64_t slot_row_ops(const struct perf_worker *w, unsigned int s)
{
	const struct perf_config *cfg = w->cfg;

	if (!cfg->iters)
		return UINT64_MAX;
	return slot_share(cfg->warmup, cfg->qd, s) + slot_share(cfg->iters, cfg->qd, s);
}

/* the counters (contiguous: one op) between the slot buffer and the pool; 0 or -errno */
static int counters_xfer(struct perf_worker *w, enum xport_op_type type, const char *what)
{
	size_t len = 8ULL * w->ntargets;
	int rc;

	if (type == XPORT_WRITE)
		rc = xport_write(w->x, w->mr, w->buf, len, w->targets[0].raddr,
				 w->targets[0].rkey);
	else
		rc = xport_read(w->x, w->mr, w->buf, len, w->targets[0].raddr,
				w->targets[0].rkey);
	if (rc)
		return perf_worker_fail(w, rc, "%s(%s %u counter(s) at pool offset 0x%" PRIx64 ")",
					xport_op_type_str(type), what, w->ntargets,
					w->targets[0].off);
	return 0;
}

int perf_worker_prepare(struct perf_worker *w, const struct perf_job *job)
{
	const struct perf_config *cfg = w->cfg;
	unsigned int s;
	int rc;

	reset_row(w);
	rc = build_targets(w, job);
	if (rc)
		return rc;

	if (job->op == XPORT_CAS || job->op == XPORT_FETCH_ADD) {
		/* counters start at zero (one WRITE; they are contiguous and resolved) */
		memset(w->buf, 0, 8ULL * w->ntargets);
		rc = counters_xfer(w, XPORT_WRITE, "zero");
		if (rc)
			return rc;
	} else if (job->op == XPORT_READ && cfg->verify) {
		for (s = 0; s < cfg->qd; s++)
			w->slots[s].quota = MIN((uint64_t)w->per_slot, slot_row_ops(w, s));
		rc = perf_engine_run(w, job, PHASE_FILL, 0);
		if (rc)
			return rc;
	}

	for (s = 0; s < cfg->qd; s++)
		w->slots[s].quota = slot_share(cfg->warmup, cfg->qd, s);
	return perf_engine_run(w, job, PHASE_WARMUP, 0);
}

int perf_worker_measure(struct perf_worker *w, const struct perf_job *job)
{
	const struct perf_config *cfg = w->cfg;
	uint64_t deadline = 0;
	unsigned int s;

	for (s = 0; s < cfg->qd; s++)
		w->slots[s].quota = cfg->iters ? slot_share(cfg->iters, cfg->qd, s) : UINT64_MAX;
	w->t_start_ns = clock_now_ns();
	w->t_end_ns = w->t_start_ns;
	if (!cfg->iters)
		deadline = w->t_start_ns + (uint64_t)(cfg->duration_s * 1e9);
	return perf_engine_run(w, job, PHASE_MEASURE, deadline);
}

static int check_cas(struct perf_worker *w)
{
	uint64_t v;
	unsigned int s;
	int rc;

	rc = counters_xfer(w, XPORT_READ, "CAS");
	if (rc)
		return rc;
	for (s = 0; s < w->ntargets; s++) {
		memcpy(&v, w->buf + 8 * s, 8);
		w->verify_checked++;
		if (v != w->slots[s].n_job) {
			w->verify_mismatches++;
			perf_worker_mismatch(w,
					     "cas chain at pool offset 0x%" PRIx64
					     " ends at %" PRIu64 " after %" PRIu64
					     " successful links",
					     w->targets[s].off, v, w->slots[s].n_job);
		}
	}
	return 0;
}

static int check_fadd(struct perf_worker *w)
{
	unsigned __int128 n = w->fadd_done, a = w->fadd_addend;
	uint64_t v, want = (uint64_t)(a * n);
	uint64_t want_sum = (uint64_t)(a * (n * (n - (n ? 1 : 0)) / 2));
	int rc;

	rc = xport_read(w->x, w->mr, w->buf, 8, w->targets[0].raddr, w->targets[0].rkey);
	if (rc)
		return perf_worker_fail(w, rc,
					"xport_read(fadd counter at pool offset 0x%" PRIx64 ")",
					w->targets[0].off);
	memcpy(&v, w->buf, 8);
	w->verify_checked++;
	if (v != want) {
		w->verify_mismatches++;
		perf_worker_mismatch(w,
				     "fadd counter at pool offset 0x%" PRIx64 " is 0x%" PRIx64
				     " after %" PRIu64 " adds of 0x%" PRIx64
				     ", expected 0x%" PRIx64,
				     w->targets[0].off, v, w->fadd_done, w->fadd_addend, want);
	}
	if (w->fadd_sum != want_sum) {
		w->verify_mismatches++;
		perf_worker_mismatch(w,
				     "the %" PRIu64 " old values returned by fadd do not add up to "
				     "0, 1, ..., n-1 times the addend",
				     w->fadd_done);
	}
	return 0;
}

int perf_worker_check(struct perf_worker *w, const struct perf_job *job)
{
	unsigned int s;

	if (!w->cfg->verify)
		return 0;
	switch (job->op) {
	case XPORT_CAS:
		return check_cas(w);
	case XPORT_FETCH_ADD:
		return check_fadd(w);
	case XPORT_WRITE:
		for (s = 0; s < w->cfg->qd; s++)
			w->slots[s].quota = MIN((uint64_t)w->per_slot, w->slots[s].n_job);
		return perf_engine_run(w, job, PHASE_CHECK, 0);
	case XPORT_READ:
		return 0; /* every read was checked as it completed */
	}
	return 0;
}
