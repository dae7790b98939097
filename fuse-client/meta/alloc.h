/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * alloc.h - the data-block allocator: a bitmap of the pool's data area in
 * client RAM (1 bit per META_BLOCK_SIZE block, 1 = in use), next-fit with a
 * per-request goal so a file's blocks stay contiguous, and a pending-free
 * list.
 *
 * Pending frees: a block freed by journal transaction `seq` must not be
 * handed out again before that transaction is durable, or a crash could
 * bring back a file whose blocks already hold someone else's data. Such
 * blocks wait in the pending list until alloc_release(durable_seq).
 *
 * Not thread-safe: struct meta's lock protects it. Functions return 0 or
 * -errno where they can fail.
 */
#ifndef RMEM_ALLOC_H
#define RMEM_ALLOC_H

#include <stdbool.h>
#include <stdint.h>

struct alloc;

/* -EINVAL for no blocks */
int alloc_new(uint64_t nblocks, struct alloc **out);
void alloc_destroy(struct alloc *a); /* NULL-tolerant */

uint64_t alloc_nfree(const struct alloc *a); /* allocatable now */
uint64_t alloc_npending(const struct alloc *a); /* freed, waiting for durability */
bool alloc_is_used(const struct alloc *a, uint64_t block);

/*
 * Mark [start, start+count) in use (rebuilding from extents). Returns how
 * many of those blocks were already in use (a doubly-used block), or -ERANGE
 * if the range leaves the data area (nothing marked).
 */
int64_t alloc_mark(struct alloc *a, uint64_t start, uint64_t count);

/*
 * Allocate a run of 1..want contiguous blocks, trying goal first, then the
 * next-fit cursor, wrapping once. -ENOSPC when nothing is free.
 */
int alloc_get(struct alloc *a, uint64_t goal, uint64_t want, uint64_t *start, uint64_t *got);

/* free now (blocks nothing durable refers to) */
void alloc_put(struct alloc *a, uint64_t start, uint64_t count);
/* free once transaction seq is durable */
void alloc_put_pending(struct alloc *a, uint64_t start, uint64_t count, uint64_t seq);
/* move every pending free with seq <= durable_seq to the free pool */
void alloc_release(struct alloc *a, uint64_t durable_seq);

/* copy the bitmap (little-endian bit order: block b is bit b%8 of byte b/8) */
void alloc_export(const struct alloc *a, uint8_t *out, uint64_t nbytes);

#endif /* RMEM_ALLOC_H */
