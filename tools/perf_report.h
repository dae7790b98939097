/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * perf_report.h - rmem-perf output: the perftest-style table (fixed columns,
 * units in the header, one row per (op, size)) and its JSON twin.
 *
 * A row holds only figures of completed, measured operations: warm-up
 * operations are counted separately (warmup_ops) and never enter the rates or
 * the latency distribution. The table is printed as rows complete; the JSON
 * document once at the end.
 */
#ifndef RMEM_PERF_REPORT_H
#define RMEM_PERF_REPORT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "perf_stats.h"
#include "xport.h"

/* what was measured against what; printed once */
struct perf_run_info {
	const char *transport; /* "tcp" / "rdma" */
	const char *server; /* the transport's peer string, e.g. "tcp 127.0.0.1:7471" */
	uint64_t pool_bytes;
	uint32_t pool_regions;
	uint64_t region_bytes; /* how much of the pool the run uses */
	unsigned int threads;
	unsigned int qd;
	const char *poll; /* "busy" / "event" / "hybrid" */
	bool verify;
	uint64_t seed; /* data pattern seed (--seed reproduces a run's bytes) */
	uint64_t warmup_per_thread; /* warm-up ops per thread before each row */
	uint64_t iters_per_thread; /* 0 in --duration mode */
	double duration_s; /* 0 in --iters mode */
	char timestamp[64]; /* ISO 8601, UTC, when the run started */
};

/* one result row */
struct perf_row {
	enum xport_op_type op;
	uint32_t size; /* bytes per op (8 for atomics) */
	unsigned int qd;
	unsigned int threads;
	uint64_t ops; /* measured ops completed, all threads */
	uint64_t warmup_ops; /* warm-up ops completed, all threads (excluded) */
	uint64_t bytes; /* payload bytes of the measured ops */
	double elapsed_s; /* first thread's measured start to last thread's last completion */
	double mib_s;
	double mops;
	double lat_min_us, lat_med_us, lat_p99_us, lat_p999_us, lat_max_us, lat_mean_us;
	uint64_t verify_checked; /* bytes (read/write) or values (atomics) checked */
	uint64_t verify_mismatches; /* in the same units */
};

/* "read", "write", "cas", "fadd" */
const char *perf_op_name(enum xport_op_type op);

/* fill the derived fields of row (rates, latencies) from the merged histogram */
void perf_row_finish(struct perf_row *row, const struct perf_hist *hist);

/* "# ..." lines describing the run, then the column header */
void perf_report_table_header(FILE *f, const struct perf_run_info *info);
void perf_report_table_row(FILE *f, const struct perf_row *row);
/* the whole run as one JSON document */
void perf_report_json(FILE *f, const struct perf_run_info *info, const struct perf_row *rows,
		      unsigned int nrows);

#endif /* RMEM_PERF_REPORT_H */
