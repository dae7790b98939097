/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * memwatch.h - how much more memory this process can take before the
 * kernel has to reclaim memory it cannot simply drop: the block cache's
 * signal to give memory back (cache_grow.c).
 *
 * headroom = the smaller of MemAvailable (/proc/meminfo) and, when the
 * process is in a memory cgroup with a limit below RAM (the v1 memory
 * controller, or cgroup2), limit - usage + the cgroup's inactive file pages
 * (page cache the kernel drops first). The cgroup is looked up again when
 * /proc/self/cgroup changes (a service manager may move the process).
 * Reads use descriptors opened beforehand and the caller's stack: nothing
 * is allocated on the way, so it works when memory is tight.
 */
#ifndef RMEM_MEMWATCH_H
#define RMEM_MEMWATCH_H

#include <stdint.h>

struct memwatch;

/* root: "" for the real system; tests pass a directory holding proc/ and sys/fs/cgroup/ */
int memwatch_open(const char *root, struct memwatch **out);
void memwatch_close(struct memwatch *w); /* NULL-tolerant */

struct memwatch_reading {
	uint64_t headroom; /* bytes */
	uint64_t limit; /* RAM, or the cgroup's limit when lower */
	uint64_t used; /* limit - headroom */
};

/* 0, or -errno when /proc/meminfo cannot be read */
int memwatch_read(struct memwatch *w, struct memwatch_reading *out);

/* "name value" lines: the value of name in text (a meminfo or memory.stat file), or -ENOENT */
int memwatch_field(const char *text, const char *name, uint64_t *value);

#endif /* RMEM_MEMWATCH_H */
