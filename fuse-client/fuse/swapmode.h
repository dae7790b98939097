/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * swapmode.h - `-o swap`: make the rmemfs daemon fit to serve a swap device.
 *
 * A daemon that serves swap must never need memory that only a swap-out could
 * free; docs/ARCHITECTURE.md ("Serving swap") says why these steps are enough
 * and what they leave uncovered.
 */
#ifndef RMEM_SWAPMODE_H
#define RMEM_SWAPMODE_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/*
 * every thread's stack (libfuse's workers included): what is locked per
 * thread; the deepest seen after a hog at 4x its limit used 16 KiB (release
 * build)
 */
#define SWAPMODE_THREAD_STACK (128U << 10)
/* heap kept locked and never trimmed, for the allocations a request makes */
#define SWAPMODE_HEAP_RESERVE (1U << 20)

/* what swapmode_enter() achieved */
struct swapmode {
	bool io_flusher; /* PR_SET_IO_FLUSHER took */
	bool oom_protected; /* oom_score_adj is -1000 */
};

/*
 * Call in the daemon process before it starts any thread and before it
 * allocates its cache: makes every later thread's stack
 * SWAPMODE_THREAD_STACK, reserves SWAPMODE_HEAP_RESERVE of heap, locks all
 * present and future memory (mlockall), marks the process PR_SET_IO_FLUSHER
 * and sets its oom_score_adj to -1000. The last two need CAP_SYS_RESOURCE,
 * which some containers withhold from root: each that fails is said once
 * (what it leaves open) and shown in swapmode_text(), and the daemon goes
 * on. Returns 0, or -errno when memory cannot be locked (said on stderr).
 */
int swapmode_enter(struct swapmode *sm);

/*
 * "swap on|off" lines for the stats xattr (rmemfs-swap looks for "swap on"),
 * with what is protected when on. sm NULL: off. Returns the length written
 * or -ERANGE.
 */
ssize_t swapmode_text(const struct swapmode *sm, char *buf, size_t cap);

#endif /* RMEM_SWAPMODE_H */
