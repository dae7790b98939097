/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * clock.h - the one monotonic clock of every program here, and the time
 * files are stamped with. Timeouts, deadlines, latencies and the lease all
 * read CLOCK_MONOTONIC through these, so a deadline set in one file and
 * checked in another compares like with like. Nanoseconds are unsigned
 * (latencies, stamps); micro- and milliseconds are signed, for deadline
 * arithmetic that may go negative.
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

/*
 * The time files are stamped with: the wall clock at the kernel's own grain,
 * the coarse clock its current_time() reads (a tick, 1-4 ms), as local
 * filesystems stamp theirs. Under the writeback cache the kernel compares a
 * write's "now" with the mtime and ctime we gave the inode: equal, as they
 * are when a file is written in the tick it was created, it does not mark
 * the times dirty, so close sends no SETATTR of them (one FUSE round trip of
 * each small file's create, write and close).
 */
static inline void clock_file_time(struct timespec *ts)
{
	clock_gettime(CLOCK_REALTIME_COARSE, ts);
}

#endif /* RMEM_CLOCK_H */
