/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * perf_stats.h - latency histogram and clock of rmem-perf and rmem-touch.
 *
 * Every completed operation's latency (post -> completion, in nanoseconds) goes
 * into a log-linear histogram in the style of HdrHistogram: values below 256 ns
 * are counted exactly, larger ones in buckets 1/128 of their power of two wide,
 * so any percentile read back is within 0.8% of the true sample. Memory is
 * fixed (about 58 KiB) however many operations are recorded. Minimum, maximum
 * and sum are kept exactly. Each worker thread fills its own histogram; the
 * main thread merges them per result row.
 */
#ifndef RMEM_PERF_STATS_H
#define RMEM_PERF_STATS_H

#include <stdint.h>

#define PERF_HIST_SUB_BITS 7
#define PERF_HIST_SUB (1U << PERF_HIST_SUB_BITS)
#define PERF_HIST_BUCKETS ((64 - PERF_HIST_SUB_BITS + 1) * PERF_HIST_SUB)

struct perf_hist {
	uint64_t count;
	uint64_t min_ns; /* UINT64_MAX while empty */
	uint64_t max_ns;
	long double sum_ns;
	uint64_t buckets[PERF_HIST_BUCKETS];
};

/* empty the histogram */
void perf_hist_reset(struct perf_hist *h);
void perf_hist_add(struct perf_hist *h, uint64_t ns);
/* dst += src */
void perf_hist_merge(struct perf_hist *dst, const struct perf_hist *src);
/*
 * The value at percentile pct (0 < pct <= 100) in ns: the middle of the bucket
 * holding the ceil(pct/100 * count)-th smallest sample, clamped to [min, max].
 * 0 for an empty histogram.
 */
uint64_t perf_hist_percentile(const struct perf_hist *h, double pct);
/* mean in ns, 0 for an empty histogram */
double perf_hist_mean(const struct perf_hist *h);

/* bucket index of a value, and the lowest value / width of a bucket (exposed for tests) */
unsigned int perf_hist_bucket(uint64_t ns);
uint64_t perf_hist_bucket_low(unsigned int idx);
uint64_t perf_hist_bucket_width(unsigned int idx);

#endif /* RMEM_PERF_STATS_H */
