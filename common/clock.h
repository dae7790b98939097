/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * clock.h - the one monotonic clock of every program here. Timeouts,
 * deadlines, latencies and the lease all read CLOCK_MONOTONIC through these,
 * so a deadline set in one file and checked in another compares like with
 * like. Nanoseconds are unsigned (latencies, stamps); micro- and
 * milliseconds are signed, for deadline arithmetic that may go negative.
 */
#ifndef RMEM_CLOCK_H
#define RMEM_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t clock_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static inline int64_t clock_now_us(void)
{
	return (int64_t)(clock_now_ns() / 1000);
}

static inline int64_t clock_now_ms(void)
{
	return (int64_t)(clock_now_ns() / 1000000);
}

#endif /* RMEM_CLOCK_H */
