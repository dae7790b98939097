// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * rmem-perf.c - the transport benchmark: perftest's ib_read_bw / ib_read_lat
 * against a memserver, over the transport contract of common/xport.h only.
 *
 * main() parses the options, connects one xport per thread (the first picks
 * the transport, the others reuse its choice), cuts the used part of the pool
 * into per-thread partitions, and builds the list of result rows (op x size).
 * The worker threads (perf_worker.c) run every row in lock step with the main
 * thread through one barrier: prepare + warm-up, measure, verify read-back,
 * then the main thread merges their counters and histograms into a row and
 * prints it (perf_report.c). A failing worker sets the shared abort flag; the
 * others notice it within one bounded poll (100 ms), every thread still
 * passes the remaining barriers without doing work, and the run exits 1.
 */
#define G_LOG_DOMAIN "rmemfs-perf"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <glib.h>

#include "perf_opts.h"
#include "perf_report.h"
#include "perf_stats.h"
#include "perf_worker.h"
#include "proto.h"
#include "refusal.h"
#include "units.h"
#include "xport.h"

#define DEFAULT_REGION (256ULL << 20)
#define MAX_LOCAL_BYTES (4ULL << 30) /* all threads' slot buffers together */

struct perf_run {
	struct perf_config cfg;
	struct perf_job *jobs;
	unsigned int njobs;
	struct perf_worker *workers;
	pthread_barrier_t barrier; /* threads + main, passed 4 times per row */
	pthread_mutex_t gate_lock;
	pthread_cond_t gate_cond;
	int gate; /* under gate_lock: 0 wait, 1 run the rows, -1 quit (a thread failed to start) */
	int abort;
};

struct perf_thread {
	struct perf_run *run;
	struct perf_worker *w;
	pthread_t tid;
	bool started;
};

/* rows: for each op in order, every size (atomics: one row of 8 bytes) */
static void build_jobs(const struct perf_opts *o, struct perf_run *run)
{
	uint32_t sizes[32];
	unsigned int i, k, nsizes = perf_opts_sizes(o, sizes, G_N_ELEMENTS(sizes));

	run->jobs = g_new0(struct perf_job, o->nops * nsizes);
	run->njobs = 0;
	for (i = 0; i < o->nops; i++) {
		for (k = 0; k < (perf_op_is_atomic(o->ops[i]) ? 1 : nsizes); k++) {
			struct perf_job *job = &run->jobs[run->njobs];

			job->op = o->ops[i];
			job->size = perf_op_is_atomic(job->op) ? 8 : sizes[k];
			job->seed = o->seed ^ (0x9e3779b97f4a7c15ULL * (run->njobs + 1));
			run->njobs++;
		}
	}
}

static int connect_one(const struct perf_opts *o, const char *transport,
		       const struct xport_params *params, unsigned int thread, struct xport **out)
{
	int rc = xport_connect(transport, params, out);
	char *why;

	if (!rc)
		return 0;
	g_printerr("rmem-perf: xport_connect(%s, %s:%u%s%s) for thread %u: %s (errno %d)\n",
		   transport, o->host, o->port ? o->port : PROTO_DEFAULT_PORT, o->pool ? "/" : "",
		   o->pool ? o->pool : "", thread, g_strerror(-rc), -rc);
	why = refusal_text(params, rc, "memserver-ctl create");
	if (why) {
		g_printerr("rmem-perf: %s\n", why);
		g_free(why);
		return rc;
	}
	if (rc == -EPERM)
		g_printerr("rmem-perf: the server refused the token: give the token file the "
			   "memserver was started with (--token-file)\n");
	else if (rc == -ECONNREFUSED)
		g_printerr("rmem-perf: is a memserver listening there?\n");
	else if (rc == -ENODEV)
		g_printerr("rmem-perf: no RDMA device reaches the server (--transport tcp works "
			   "without one)\n");
	else if (rc == -EPROTONOSUPPORT)
		g_printerr("rmem-perf: protocol version mismatch, or transport '%s' not built in\n",
			   transport);
	return rc;
}

static void *worker_thread(void *arg)
{
	struct perf_thread *t = arg;
	struct perf_run *run = t->run;
	unsigned int j;
	int gate;

	/* nobody touches the barrier before every thread exists */
	pthread_mutex_lock(&run->gate_lock);
	while (!run->gate)
		pthread_cond_wait(&run->gate_cond, &run->gate_lock);
	gate = run->gate;
	pthread_mutex_unlock(&run->gate_lock);
	if (gate < 0)
		return NULL;

	for (j = 0; j < run->njobs; j++) {
		const struct perf_job *job = &run->jobs[j];

		if (!__atomic_load_n(&run->abort, __ATOMIC_RELAXED))
			perf_worker_prepare(t->w, job);
		pthread_barrier_wait(&run->barrier);
		if (!__atomic_load_n(&run->abort, __ATOMIC_RELAXED))
			perf_worker_measure(t->w, job);
		pthread_barrier_wait(&run->barrier);
		if (!__atomic_load_n(&run->abort, __ATOMIC_RELAXED))
			perf_worker_check(t->w, job);
		pthread_barrier_wait(&run->barrier); /* main collects the row */
		pthread_barrier_wait(&run->barrier); /* ... and is done with it */
	}
	return NULL;
}

/* merge the workers' counters of the row just finished */
static void collect_row(struct perf_run *run, const struct perf_job *job, struct perf_hist *hist,
			struct perf_row *row)
{
	uint64_t t0 = UINT64_MAX, t1 = 0;
	unsigned int i;

	memset(row, 0, sizeof(*row));
	perf_hist_reset(hist);
	row->op = job->op;
	row->size = job->size;
	row->qd = run->cfg.qd;
	row->threads = run->cfg.threads;
	for (i = 0; i < run->cfg.threads; i++) {
		const struct perf_worker *w = &run->workers[i];

		perf_hist_merge(hist, &w->hist);
		row->ops += w->ops;
		row->bytes += w->bytes;
		row->warmup_ops += w->warmup_ops;
		row->verify_checked += w->verify_checked;
		row->verify_mismatches += w->verify_mismatches;
		t0 = MIN(t0, w->t_start_ns);
		t1 = MAX(t1, w->t_end_ns);
	}
	row->elapsed_s = t1 > t0 ? (double)(t1 - t0) / 1e9 : 0.0;
	perf_row_finish(row, hist);
}

static void format_timestamp(char *buf, size_t cap)
{
	GDateTime *now = g_date_time_new_now_utc();
	char *s = g_date_time_format_iso8601(now);

	g_strlcpy(buf, s, cap);
	g_free(s);
	g_date_time_unref(now);
}

/* one thread a worker, let through the gate (or told to leave); 0, or 1 after saying why */
static int start_threads(struct perf_run *run, struct perf_thread *threads)
{
	unsigned int i;
	int rc, ret = 0;

	pthread_mutex_init(&run->gate_lock, NULL);
	pthread_cond_init(&run->gate_cond, NULL);
	for (i = 0; i < run->cfg.threads; i++) {
		threads[i].run = run;
		threads[i].w = &run->workers[i];
		rc = -pthread_create(&threads[i].tid, NULL, worker_thread, &threads[i]);
		if (rc) {
			g_printerr("rmem-perf: pthread_create(thread %u): %s\n", i,
				   g_strerror(-rc));
			ret = 1;
			break;
		}
		threads[i].started = true;
	}
	pthread_mutex_lock(&run->gate_lock);
	run->gate = ret ? -1 : 1;
	pthread_cond_broadcast(&run->gate_cond);
	pthread_mutex_unlock(&run->gate_lock);
	return ret;
}

static void join_threads(struct perf_run *run, struct perf_thread *threads)
{
	unsigned int i;

	for (i = 0; i < run->cfg.threads; i++)
		if (threads[i].started)
			pthread_join(threads[i].tid, NULL);
	pthread_cond_destroy(&run->gate_cond);
	pthread_mutex_destroy(&run->gate_lock);
}

/* a measured row, in the table (unless --json) and on stderr when it failed to verify */
static void print_row(const struct perf_opts *o, const struct perf_row *row)
{
	if (!o->json)
		perf_report_table_row(stdout, row);
	if (row->verify_mismatches)
		g_printerr("rmem-perf: verify FAILED for %s of %" PRIu32 " bytes: %" PRIu64
			   " mismatching %s\n",
			   perf_op_name(row->op), row->size, row->verify_mismatches,
			   perf_op_is_atomic(row->op) ? "value(s)" : "byte(s)");
}

/* the run proper, once every worker is connected; 0, or 1 for failures / mismatches */
static int run_rows(const struct perf_opts *o, struct perf_run *run, struct perf_run_info *info)
{
	struct perf_thread *threads = g_new0(struct perf_thread, run->cfg.threads);
	struct perf_row *rows = g_new0(struct perf_row, run->njobs);
	struct perf_hist *hist = g_new0(struct perf_hist, 1);
	uint64_t mismatches = 0, checked = 0;
	unsigned int j, nrows = 0;
	int rc, ret;

	rc = -pthread_barrier_init(&run->barrier, NULL, run->cfg.threads + 1);
	if (rc) {
		g_printerr("rmem-perf: pthread_barrier_init: %s\n", g_strerror(-rc));
		ret = 1;
		goto free_mem;
	}
	ret = start_threads(run, threads);
	if (ret)
		goto join;

	if (!o->json)
		perf_report_table_header(stdout, info);
	for (j = 0; j < run->njobs; j++) {
		pthread_barrier_wait(&run->barrier); /* prepared and warmed up */
		pthread_barrier_wait(&run->barrier); /* measured */
		pthread_barrier_wait(&run->barrier); /* checked */
		if (!__atomic_load_n(&run->abort, __ATOMIC_RELAXED)) {
			collect_row(run, &run->jobs[j], hist, &rows[nrows]);
			print_row(o, &rows[nrows]);
			mismatches += rows[nrows].verify_mismatches;
			checked += rows[nrows].verify_checked;
			nrows++;
		}
		pthread_barrier_wait(&run->barrier);
	}

	if (__atomic_load_n(&run->abort, __ATOMIC_RELAXED)) {
		g_printerr("rmem-perf: run aborted after %u of %u row(s)\n", nrows, run->njobs);
		ret = 1;
	} else if (o->json) {
		/* mismatches included: verify_mismatches says where */
		perf_report_json(stdout, info, rows, nrows);
	} else if (o->verify && !mismatches) {
		printf("# verify: ok, %" PRIu64 " bytes / atomic results checked, no mismatch\n",
		       checked);
	}
	if (mismatches)
		ret = 1;

join:
	join_threads(run, threads);
	pthread_barrier_destroy(&run->barrier);
free_mem:
	g_free(hist);
	g_free(rows);
	g_free(threads);
	return ret;
}

static int setup_partitions(const struct perf_opts *o, const struct proto_pool *pool,
			    uint32_t max_rw_size, struct perf_config *cfg, uint64_t *region)
{
	char have[32], want[32];
	uint64_t part, largest = 0;
	uint32_t i;

	for (i = 0; i < pool->nregions; i++)
		largest = MAX(largest, pool->regions[i].len);
	if (max_rw_size > largest) {
		units_format_size(largest, have, sizeof(have));
		g_printerr(
		    "rmem-perf: an op of %" PRIu32 " bytes does not fit in one region of the "
		    "pool (the largest is %s) and ops cannot cross regions: lower the size\n",
		    max_rw_size, have);
		return -EINVAL;
	}

	if (o->region && o->region > pool->size) {
		units_format_size(o->region, want, sizeof(want));
		units_format_size(pool->size, have, sizeof(have));
		g_printerr("rmem-perf: --region %s is larger than the server's pool (%s)\n", want,
			   have);
		return -EINVAL;
	}
	*region = o->region ? o->region : MIN(pool->size, DEFAULT_REGION);
	part = *region / o->threads;
	part = part >= (1ULL << 20) ? part & ~((1ULL << 20) - 1) : part & ~4095ULL;
	units_format_size(*region, want, sizeof(want));
	if (!part) {
		g_printerr("rmem-perf: --region %s leaves less than 4 KiB for each of %u threads\n",
			   want, o->threads);
		return -EINVAL;
	}
	if (max_rw_size && part / (((uint64_t)max_rw_size + 7) & ~7ULL) < o->qd) {
		units_format_size(part, have, sizeof(have));
		g_printerr("rmem-perf: --region %s is too small: each of %u thread(s) gets %s, "
			   "which holds fewer than --qd %u ops of %" PRIu32 " bytes\n",
			   want, o->threads, have, o->qd, max_rw_size);
		return -EINVAL;
	}
	if ((uint64_t)o->qd * 8 > part) {
		g_printerr("rmem-perf: --region %s cannot hold %u CAS counters per thread\n", want,
			   o->qd);
		return -EINVAL;
	}
	cfg->part_len = part;
	return 0;
}

/* the connection parameters the options ask for; -errno after saying why */
static int make_params(const struct perf_opts *o, struct xport_params *params)
{
	if (xport_params_client(params, o->host, o->port, o->token_file, "rmem-perf",
				"--token-file ") < 0)
		return -EINVAL;
	params->pool = o->pool;
	params->poll_mode = o->poll;
	params->queue_depth = o->qd;
	params->quiet = o->json;
	if (o->timeout_ms) {
		params->op_timeout_ms = o->timeout_ms;
		params->connect_timeout_ms = o->timeout_ms;
	}
	if (!strcmp(o->transport, "rdma") && !xport_available("rdma")) {
		g_printerr("rmem-perf: --transport rdma: this build has no RDMA transport "
			   "(rdma-core was not found when it was built)\n");
		return -EPROTONOSUPPORT;
	}
	return 0;
}

static void fill_cfg(const struct perf_opts *o, uint32_t max_rw_size, struct perf_run *run)
{
	run->cfg.qd = o->qd;
	run->cfg.threads = o->threads;
	run->cfg.iters = o->iters;
	run->cfg.duration_s = o->iters ? 0.0 : o->duration_s;
	run->cfg.warmup = (uint64_t)o->warmup;
	run->cfg.verify = o->verify;
	run->cfg.max_size = MAX(max_rw_size, 8U);
	run->cfg.abort = &run->abort;
}

/* what the report says about the run */
static void fill_info(const struct perf_opts *o, const struct perf_run *run, uint64_t region,
		      struct perf_run_info *info)
{
	const struct xport *x = run->workers[0].x;

	info->transport = xport_name(x);
	info->server = x->peer;
	info->pool_bytes = x->pool.size;
	info->pool_regions = x->pool.nregions;
	info->region_bytes = region;
	info->threads = o->threads;
	info->qd = o->qd;
	info->poll = o->poll_name;
	info->verify = o->verify;
	info->warmup_per_thread = run->cfg.warmup;
	info->iters_per_thread = o->iters;
	info->duration_s = run->cfg.duration_s;
	info->seed = o->seed;
	format_timestamp(info->timestamp, sizeof(info->timestamp));
}

int main(int argc, char **argv)
{
	struct perf_run_info info = {0};
	struct xport_params params;
	struct perf_run run = {0};
	struct perf_opts o;
	struct xport *x = NULL;
	uint32_t max_rw_size = 0;
	unsigned int i, nworkers = 0;
	uint64_t region, local;
	int rc, ret = 1;

	signal(SIGPIPE, SIG_IGN); /* a dead server is an -EPIPE, not a silent exit */

	rc = perf_opts_parse(argc, argv, &o);
	if (rc) {
		perf_opts_clear(&o);
		return rc > 0 ? 0 : 1;
	}
	if (!o.seed_set)
		o.seed = ((uint64_t)g_random_int() << 32) ^ g_random_int() ^ (uint64_t)getpid();
	for (i = 0; i < o.nops; i++)
		if (!perf_op_is_atomic(o.ops[i]))
			max_rw_size = o.size_max;

	local = (uint64_t)o.threads * o.qd * ((MAX(max_rw_size, 8U) + 63ULL) & ~63ULL);
	if (local > MAX_LOCAL_BYTES) {
		char buf[32];

		units_format_size(local, buf, sizeof(buf));
		g_printerr("rmem-perf: threads x qd x size needs %s of local buffers, above the "
			   "4 GiB limit: lower --qd, --threads or the size\n",
			   buf);
		goto free_opts;
	}

	if (make_params(&o, &params) < 0)
		goto free_opts;
	rc = connect_one(&o, o.transport, &params, 0, &x);
	if (rc)
		goto free_opts;
	if (setup_partitions(&o, &x->pool, max_rw_size, &run.cfg, &region)) {
		xport_close(x);
		goto free_opts;
	}

	fill_cfg(&o, max_rw_size, &run);
	run.workers = g_new0(struct perf_worker, o.threads);

	/* the first connection chose the transport; the others follow it */
	for (i = 0; i < o.threads; i++) {
		if (i) {
			rc = connect_one(&o, xport_name(run.workers[0].x), &params, i, &x);
			if (rc)
				goto destroy_workers;
		}
		rc = perf_worker_init(&run.workers[i], i, &run.cfg, x);
		if (rc)
			goto destroy_workers;
		nworkers++;
	}
	build_jobs(&o, &run);

	fill_info(&o, &run, region, &info);

	ret = run_rows(&o, &run, &info);

destroy_workers:
	for (i = 0; i < nworkers; i++)
		perf_worker_destroy(&run.workers[i]);
	g_free(run.workers);
	g_free(run.jobs);
free_opts:
	perf_opts_clear(&o);
	return ret;
}
