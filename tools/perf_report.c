// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * perf_report.c - rmem-perf's table and JSON output (see perf_report.h).
 *
 * Column names carry their unit, as perftest's do; JSON keys carry it as a
 * suffix (size_B, bw_MiB_s, lat_p99_us). Rates divide by the measured wall
 * time of the row; a row with no time or no operations reports zeros, never
 * NaN or infinity, so the JSON always parses.
 */
#include <inttypes.h>

#include "json.h"
#include "perf_report.h"
#include "units.h"

#define ROW_FMT_HDR "%-5s %10s %4s %3s %10s %10s %9s %11s %11s %11s %13s %11s\n"
#define ROW_FMT                                                                                    \
	"%-5s %10" PRIu32 " %4u %3u %10" PRIu64 " %10.2f %9.4f %11.2f %11.2f %11.2f %13.2f "       \
						"%11.2f\n"

const char *perf_op_name(enum xport_op_type op)
{
	static const char *const names[] = {
		[XPORT_READ] = "read", [XPORT_WRITE] = "write", [XPORT_CAS] = "cas",
		[XPORT_FETCH_ADD] = "fadd",
	};

	return (unsigned int)op < sizeof(names) / sizeof(names[0]) && names[op] ? names[op] : "unknown";
}

void perf_row_finish(struct perf_row *row, const struct perf_hist *hist)
{
	row->mib_s = 0.0;
	row->mops = 0.0;
	if (row->elapsed_s > 0.0) {
		row->mib_s = (double)row->bytes / row->elapsed_s / (1024.0 * 1024.0);
		row->mops = (double)row->ops / row->elapsed_s / 1e6;
	}
	row->lat_min_us = hist->count ? (double)hist->min_ns / 1e3 : 0.0;
	row->lat_med_us = (double)perf_hist_percentile(hist, 50.0) / 1e3;
	row->lat_p99_us = (double)perf_hist_percentile(hist, 99.0) / 1e3;
	row->lat_p999_us = (double)perf_hist_percentile(hist, 99.9) / 1e3;
	row->lat_max_us = (double)hist->max_ns / 1e3;
	row->lat_mean_us = perf_hist_mean(hist) / 1e3;
}

void perf_report_table_header(FILE *f, const struct perf_run_info *info)
{
	char pool[32], region[32];

	units_format_size(info->pool_bytes, pool, sizeof(pool));
	units_format_size(info->region_bytes, region, sizeof(region));
	fprintf(f, "# rmem-perf: transport %s, server %s\n", info->transport, info->server);
	fprintf(f,
		"# pool %s in %" PRIu32
		" region(s), using %s of it; %u thread(s) x qd %u, poll %s\n",
		pool, info->pool_regions, region, info->threads, info->qd, info->poll);
	if (info->duration_s > 0.0)
		fprintf(f, "# each row: %.3f s per thread", info->duration_s);
	else
		fprintf(f, "# each row: %" PRIu64 " ops per thread", info->iters_per_thread);
	fprintf(f, " after %" PRIu64 " warm-up ops per thread (excluded from every figure)\n",
		info->warmup_per_thread);
	if (info->verify)
		fprintf(f,
			"# verify on, seed %" PRIu64 " (data checked end to end; checking time "
			"is inside the rates)\n",
			info->seed);
	else
		fprintf(f, "# verify off\n");
	fprintf(f, "# latency: post to completion; iters: measured ops completed, all threads\n");
	fprintf(f, ROW_FMT_HDR, "op", "size(B)", "qd", "thr", "iters", "MiB/s", "Mops",
		"lat_min(us)", "lat_med(us)", "lat_p99(us)", "lat_p99.9(us)", "lat_max(us)");
	fflush(f);
}

void perf_report_table_row(FILE *f, const struct perf_row *row)
{
	fprintf(f, ROW_FMT, perf_op_name(row->op), row->size, row->qd, row->threads, row->ops,
		row->mib_s, row->mops, row->lat_min_us, row->lat_med_us, row->lat_p99_us,
		row->lat_p999_us, row->lat_max_us);
	fflush(f);
}

void perf_report_json(FILE *f, const struct perf_run_info *info, const struct perf_row *rows,
		      unsigned int nrows)
{
	unsigned int i;

	fprintf(f, "{\n  \"tool\": \"rmem-perf\",\n  \"timestamp\": ");
	json_write_string(f, info->timestamp);
	fprintf(f, ",\n  \"transport\": ");
	json_write_string(f, info->transport);
	fprintf(f, ",\n  \"server\": ");
	json_write_string(f, info->server);
	fprintf(f,
		",\n  \"pool_B\": %" PRIu64 ",\n  \"pool_regions\": %" PRIu32
		",\n  \"region_B\": %" PRIu64 ",\n",
		info->pool_bytes, info->pool_regions, info->region_bytes);
	fprintf(f, "  \"threads\": %u,\n  \"qd\": %u,\n  \"poll\": ", info->threads, info->qd);
	json_write_string(f, info->poll);
	fprintf(f, ",\n  \"verify\": %s,\n  \"seed\": %" PRIu64 ",\n",
		info->verify ? "true" : "false", info->seed);
	fprintf(f, "  \"warmup_ops_per_thread\": %" PRIu64 ",\n", info->warmup_per_thread);
	fprintf(f, "  \"iters_per_thread\": %" PRIu64 ",\n  \"duration_s\": %.3f,\n",
		info->iters_per_thread, info->duration_s);
	fprintf(f, "  \"results\": [");
	for (i = 0; i < nrows; i++) {
		const struct perf_row *r = &rows[i];

		fprintf(f,
			"%s\n    {\"op\": \"%s\", \"size_B\": %" PRIu32 ", \"qd\": %u, "
			"\"threads\": %u, \"ops\": %" PRIu64 ", \"warmup_ops\": %" PRIu64 ", "
			"\"bytes_B\": %" PRIu64 ", \"elapsed_s\": %.6f, ",
			i ? "," : "", perf_op_name(r->op), r->size, r->qd, r->threads, r->ops,
			r->warmup_ops, r->bytes, r->elapsed_s);
		fprintf(f, "\"bw_MiB_s\": %.3f, \"rate_Mops\": %.6f, ", r->mib_s, r->mops);
		fprintf(f,
			"\"lat_min_us\": %.3f, \"lat_med_us\": %.3f, \"lat_p99_us\": %.3f, "
			"\"lat_p99_9_us\": %.3f, \"lat_max_us\": %.3f, \"lat_mean_us\": %.3f, ",
			r->lat_min_us, r->lat_med_us, r->lat_p99_us, r->lat_p999_us, r->lat_max_us,
			r->lat_mean_us);
		fprintf(f, "\"verify_checked\": %" PRIu64 ", \"verify_mismatches\": %" PRIu64 "}",
			r->verify_checked, r->verify_mismatches);
	}
	fprintf(f, "%s]\n}\n", nrows ? "\n  " : "");
	fflush(f);
}
