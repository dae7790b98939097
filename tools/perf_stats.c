// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * perf_stats.c - the log-linear latency histogram of rmem-perf (see perf_stats.h).
 *
 * Bucket layout: with S = PERF_HIST_SUB_BITS, values v < 2^(S+1) have a bucket
 * each (index v). A larger v with highest set bit b is shifted right by
 * b - S, which leaves a mantissa in [2^S, 2^(S+1)); its index is
 * (b - S + 1) * 2^S + (mantissa - 2^S). Buckets of that group are 2^(b-S)
 * wide, i.e. 1/2^S of the value.
 */
#include <string.h>
#include <time.h>

#include "perf_stats.h"

void perf_hist_reset(struct perf_hist *h)
{
	memset(h, 0, sizeof(*h));
	h->min_ns = UINT64_MAX;
}

unsigned int perf_hist_bucket(uint64_t ns)
{
	unsigned int msb, shift;

	if (ns < 2 * PERF_HIST_SUB)
		return (unsigned int)ns;
	msb = 63 - (unsigned int)__builtin_clzll(ns);
	shift = msb - PERF_HIST_SUB_BITS;
	return (shift + 1) * PERF_HIST_SUB + (unsigned int)((ns >> shift) - PERF_HIST_SUB);
}

uint64_t perf_hist_bucket_low(unsigned int idx)
{
	unsigned int shift;
	uint64_t mant;

	if (idx < 2 * PERF_HIST_SUB)
		return idx;
	shift = idx / PERF_HIST_SUB - 1;
	mant = idx % PERF_HIST_SUB + PERF_HIST_SUB;
	return mant << shift;
}

uint64_t perf_hist_bucket_width(unsigned int idx)
{
	if (idx < 2 * PERF_HIST_SUB)
		return 1;
	return 1ULL << (idx / PERF_HIST_SUB - 1);
}

void perf_hist_add(struct perf_hist *h, uint64_t ns)
{
	h->buckets[perf_hist_bucket(ns)]++;
	h->count++;
	h->sum_ns += ns;
	if (ns < h->min_ns)
		h->min_ns = ns;
	if (ns > h->max_ns)
		h->max_ns = ns;
}

void perf_hist_merge(struct perf_hist *dst, const struct perf_hist *src)
{
	unsigned int i;

	if (!src->count)
		return;
	for (i = 0; i < PERF_HIST_BUCKETS; i++)
		dst->buckets[i] += src->buckets[i];
	dst->count += src->count;
	dst->sum_ns += src->sum_ns;
	if (src->min_ns < dst->min_ns)
		dst->min_ns = src->min_ns;
	if (src->max_ns > dst->max_ns)
		dst->max_ns = src->max_ns;
}

uint64_t perf_hist_percentile(const struct perf_hist *h, double pct)
{
	uint64_t rank, seen = 0, v;
	double exact;
	unsigned int i;

	if (!h->count)
		return 0;
	if (pct >= 100.0)
		return h->max_ns;
	exact = pct / 100.0 * (double)h->count;
	rank = (uint64_t)exact;
	if ((double)rank < exact)
		rank++;
	if (rank < 1)
		rank = 1;
	for (i = 0; i < PERF_HIST_BUCKETS; i++) {
		seen += h->buckets[i];
		if (seen >= rank)
			break;
	}
	if (i == PERF_HIST_BUCKETS)
		return h->max_ns;
	v = perf_hist_bucket_low(i) + perf_hist_bucket_width(i) / 2;
	if (v < h->min_ns)
		v = h->min_ns;
	if (v > h->max_ns)
		v = h->max_ns;
	return v;
}

double perf_hist_mean(const struct perf_hist *h)
{
	if (!h->count)
		return 0.0;
	return (double)h->sum_ns / (double)h->count;
}
