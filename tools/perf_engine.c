// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * perf_engine.c - the post/poll loop of an rmem-perf worker (see
 * perf_worker.h for how targets and slots are laid out).
 *
 * The engine keeps up to qd ops in flight: every free slot that still has
 * quota in the current phase gets an op, all of them go out in one
 * xport_post() batch (one timestamp), then xport_poll() reaps completions (one
 * timestamp per reap). Latency is reap time minus post time of the op, so it
 * includes the queueing a real client sees at that depth. Only completed ops
 * are counted; measured and warm-up ops are counted apart. Free slots wait in
 * a FIFO ring, so targets are visited in order whatever the completion order.
 *
 * Waits are bounded: xport_poll() gets POLL_TIMEOUT_MS at a time, after which
 * the abort flag and the deadline are looked at again, and an engine that sees
 * no completion for the transport's op timeout plus STALL_EXTRA_MS gives up
 * with -ETIMEDOUT even if the transport never reports anything.
 */
#define G_LOG_DOMAIN "rmemfs-perf"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <string.h>
#include <time.h>

#include <glib.h>

#include "clock.h"
#include "perf_engine.h"
#include "perf_pattern.h"

#define POLL_TIMEOUT_MS 100 /* longest wait in xport_poll before checking abort/deadline */
#define STALL_EXTRA_MS 5000 /* own watchdog on top of the transport's op timeout */

bool perf_worker_aborted(const struct perf_worker *w)
{
	return __atomic_load_n(w->cfg->abort, __ATOMIC_RELAXED) != 0;
}

int perf_worker_fail(struct perf_worker *w, int rc, const char *fmt, ...)
{
	va_list ap;
	char *what;

	if (rc == -ECANCELED && perf_worker_aborted(w))
		return rc;
	va_start(ap, fmt);
	what = g_strdup_vprintf(fmt, ap);
	va_end(ap);
	g_printerr("rmem-perf: thread %u: %s: %s (errno %d)\n", w->id, what, g_strerror(-rc), -rc);
	g_free(what);
	__atomic_store_n(w->cfg->abort, 1, __ATOMIC_RELAXED);
	return rc;
}

void perf_worker_mismatch(struct perf_worker *w, const char *fmt, ...)
{
	va_list ap;
	char *what;

	if (w->reports++ >= PERF_MAX_REPORTS) {
		if (w->reports == PERF_MAX_REPORTS + 1)
			g_printerr("rmem-perf: thread %u: verify: further mismatches not shown\n",
				   w->id);
		return;
	}
	va_start(ap, fmt);
	what = g_strdup_vprintf(fmt, ap);
	va_end(ap);
	g_printerr("rmem-perf: thread %u: verify: %s\n", w->id, what);
	g_free(what);
}

static uint8_t *slot_buf(struct perf_worker *w, unsigned int s)
{
	return w->buf + (size_t)s * w->slot_stride;
}

/* build slot s's next op of this phase into op (nothing is committed yet) */
static void build_op(struct perf_worker *w, const struct perf_job *job, enum perf_phase phase,
		     unsigned int s, struct xport_op *op)
{
	struct perf_slot *sl = &w->slots[s];
	const struct perf_target *t;
	unsigned int qd = w->cfg->qd;
	uint64_t m, iter = 0;

	memset(op, 0, sizeof(*op));
	op->wr_id = s;
	op->mr = w->mr;
	op->local = slot_buf(w, s);
	sl->check_data = false;

	if (job->op == XPORT_CAS || job->op == XPORT_FETCH_ADD) {
		t = &w->targets[job->op == XPORT_CAS ? s : 0];
		op->type = job->op;
		op->len = 8;
		op->raddr = t->raddr;
		op->rkey = t->rkey;
		if (job->op == XPORT_CAS) {
			op->compare_add = sl->n_job;
			op->swap = sl->n_job + 1;
			sl->expect = sl->n_job;
		} else {
			op->compare_add = w->fadd_addend;
		}
		sl->off = t->off;
		sl->len = 8;
		return;
	}

	switch (phase) {
	case PHASE_FILL:
	case PHASE_CHECK:
		m = sl->n_phase;
		if (phase == PHASE_CHECK)
			iter = (sl->n_job - 1 - m) / w->per_slot; /* the last pass that wrote it */
		break;
	default:
		m = sl->n_job % w->per_slot;
		iter = sl->n_job / w->per_slot;
		break;
	}
	t = &w->targets[s + (uint64_t)qd * m];
	op->len = job->size;
	op->raddr = t->raddr;
	op->rkey = t->rkey;
	sl->off = t->off;
	sl->len = job->size;

	if (phase == PHASE_FILL || (job->op == XPORT_WRITE && phase != PHASE_CHECK)) {
		op->type = XPORT_WRITE;
		if (w->cfg->verify)
			perf_pattern_fill(op->local, t->off, job->size, iter, job->seed);
		if (job->size <= 64)
			op->flags |= XPORT_OP_INLINE;
		return;
	}
	op->type = XPORT_READ;
	/* reads of a READ row check against the fill pattern (pass 0) */
	sl->iter = phase == PHASE_CHECK ? iter : 0;
	sl->check_data = w->cfg->verify;
}

/* account and check one completion of slot s */
static int complete_op(struct perf_worker *w, const struct perf_job *job, enum perf_phase phase,
		       unsigned int s, const struct xport_cqe *cqe, uint64_t t_done)
{
	struct perf_slot *sl = &w->slots[s];
	const uint8_t *data = slot_buf(w, s);
	uint32_t first = 0, bad;
	uint64_t old;

	if (cqe->status)
		return perf_worker_fail(w, cqe->status,
					"%s of %" PRIu32 " bytes at pool offset 0x%" PRIx64
					" completed with an error",
					xport_op_type_str(cqe->type), sl->len, sl->off);

	if (phase == PHASE_MEASURE) {
		perf_hist_add(&w->hist, t_done - sl->t_post);
		w->ops++;
		w->bytes += sl->len;
	} else if (phase == PHASE_WARMUP) {
		w->warmup_ops++;
	}

	if (job->op == XPORT_FETCH_ADD) {
		memcpy(&old, data, 8);
		w->fadd_done++;
		w->fadd_sum += old;
		if (w->cfg->verify) {
			w->verify_checked++;
			if (old % w->fadd_addend) {
				w->verify_mismatches++;
				perf_worker_mismatch(w,
						     "fadd at pool offset 0x%" PRIx64
						     " returned 0x%" PRIx64
						     ", not a multiple of the addend 0x%" PRIx64,
						     sl->off, old, w->fadd_addend);
			}
		}
	} else if (job->op == XPORT_CAS && w->cfg->verify) {
		memcpy(&old, data, 8);
		w->verify_checked++;
		if (old != sl->expect) {
			w->verify_mismatches++;
			perf_worker_mismatch(w,
					     "cas at pool offset 0x%" PRIx64
					     " expected old value %" PRIu64 ", got %" PRIu64,
					     sl->off, sl->expect, old);
		}
	} else if (sl->check_data) {
		w->verify_checked += sl->len;
		bad = perf_pattern_check(data, sl->off, sl->len, sl->iter, job->seed, &first);
		if (bad) {
			w->verify_mismatches += bad;
			perf_worker_mismatch(
			    w,
			    "%s of %" PRIu32 " bytes at pool offset 0x%" PRIx64 ": %" PRIu32
			    " byte(s) differ, first at 0x%" PRIx64 " (expected 0x%02x, got 0x%02x)",
			    phase == PHASE_CHECK ? "read-back of the write" : "read", sl->len,
			    sl->off, bad, sl->off + first,
			    perf_pattern_byte(job->seed, sl->iter, sl->off + first), data[first]);
		}
	}
	return 0;
}

/* give every slot with quota a place in the free ring */
static void reset_ring(struct perf_worker *w)
{
	unsigned int s;

	w->free_head = 0;
	w->free_count = 0;
	for (s = 0; s < w->cfg->qd; s++) {
		w->slots[s].n_phase = 0;
		if (w->slots[s].quota)
			w->free_ring[w->free_count++] = s;
	}
}

/* an op posted for every free slot; how many (0: the transport's queue is full), or -errno */
static int post_free_slots(struct perf_worker *w, const struct perf_job *job,
			   enum perf_phase phase, unsigned int inflight)
{
	unsigned int qd = w->cfg->qd, nb = 0, i;
	uint64_t t;
	int rc;

	for (i = 0; i < w->free_count; i++)
		build_op(w, job, phase, w->free_ring[(w->free_head + i) % qd], &w->batch[nb++]);
	if (!nb)
		return 0;
	t = clock_now_ns();
	rc = xport_post(w->x, w->batch, nb);
	if (rc == -EAGAIN && !inflight)
		return perf_worker_fail(w, rc, "xport_post with nothing in flight");
	if (rc == -EAGAIN)
		return 0;
	if (rc)
		return perf_worker_fail(w, rc, "xport_post(%u x %s of %" PRIu32 " bytes)", nb,
					xport_op_type_str(w->batch[0].type), w->batch[0].len);
	for (i = 0; i < nb; i++) {
		struct perf_slot *sl = &w->slots[w->batch[i].wr_id];

		sl->busy = true;
		sl->t_post = t;
		sl->n_phase++;
		if (phase == PHASE_WARMUP || phase == PHASE_MEASURE)
			sl->n_job++;
	}
	w->free_head = (w->free_head + nb) % qd;
	w->free_count -= nb;
	return (int)nb;
}

/* the n completions in w->cqes, at time t: slots with quota left back in the ring; 0 or -errno */
static int reap(struct perf_worker *w, const struct perf_job *job, enum perf_phase phase, int n,
		uint64_t t, unsigned int *inflight)
{
	unsigned int qd = w->cfg->qd, i;
	int rc;

	for (i = 0; i < (unsigned int)n; i++) {
		uint64_t s = w->cqes[i].wr_id;
		struct perf_slot *sl;

		if (s >= qd || !w->slots[s].busy)
			return perf_worker_fail(w, -EPROTO,
						"xport_poll returned an unknown wr_id %" PRIu64, s);
		sl = &w->slots[s];
		sl->busy = false;
		(*inflight)--;
		rc = complete_op(w, job, phase, (unsigned int)s, &w->cqes[i], t);
		if (rc)
			return rc;
		if (sl->n_phase < sl->quota)
			w->free_ring[(w->free_head + w->free_count++) % qd] = (unsigned int)s;
	}
	return 0;
}

int perf_engine_run(struct perf_worker *w, const struct perf_job *job, enum perf_phase phase,
		    uint64_t deadline_ns)
{
	unsigned int qd = w->cfg->qd, inflight = 0;
	int stall_ms = (w->x->op_timeout_ms > 0 ? w->x->op_timeout_ms : 10000) + STALL_EXTRA_MS;
	uint64_t t, last_progress = clock_now_ns();
	bool posting = true;
	int n, rc;

	reset_ring(w);
	for (;;) {
		if (perf_worker_aborted(w))
			return -ECANCELED;
		if (posting && deadline_ns && clock_now_ns() >= deadline_ns)
			posting = false;
		if (posting) {
			rc = post_free_slots(w, job, phase, inflight);
			if (rc < 0)
				return rc;
			inflight += (unsigned int)rc;
		}
		if (!inflight) {
			if (!w->free_count || !posting)
				return 0;
			continue;
		}

		n = xport_poll(w->x, w->cqes, qd, POLL_TIMEOUT_MS);
		if (n < 0)
			return perf_worker_fail(w, n, "xport_poll with %u op(s) in flight",
						inflight);
		t = clock_now_ns();
		if (!n) {
			if (t - last_progress > (uint64_t)stall_ms * 1000000ULL)
				return perf_worker_fail(
				    w, -ETIMEDOUT,
				    "no completion for %d ms with %u op(s) in flight", stall_ms,
				    inflight);
			continue;
		}
		last_progress = t;
		rc = reap(w, job, phase, n, t, &inflight);
		if (rc)
			return rc;
		if (phase == PHASE_MEASURE)
			w->t_end_ns = t;
	}
}
