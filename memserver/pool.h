/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * pool.h - the memserver's memory pool: one contiguous mapping (anonymous
 * memory, huge pages, or a shared mapping of a backing file) split into
 * regions ("chunks") of a power-of-two chunk size. Each region carries a
 * random 32-bit key that TCP clients name it by, the way an RDMA client names
 * a memory region by its rkey. Remote addresses are the regions' real virtual
 * addresses in this process, as with RDMA.
 *
 * pool_check() is the one gate every TCP data operation passes: it plays the
 * NIC's part (key, bounds, atomic alignment) and is the only way tcp_server.c
 * gets a pointer into pool memory. The RDMA side (rdma_server.c) walks the
 * region table with pool_region_get() to register memory; it may split a
 * region further if the device's max MR size is smaller.
 *
 * Backing file layout: the pool's bytes at offset 0..size, followed by one
 * 4 KiB trailer (struct pool_trailer in pool.c: magic "RMEMPOOL", version,
 * pool size, pool_id, and the name and owner of a named pool). The trailer is
 * what lets the pool keep its pool_id (and a named pool its name and owner)
 * across restarts and lets a size mismatch be refused with a clear message;
 * it lives past the mapped range, so clients can never overwrite it.
 *
 * Every int-returning function returns 0 on success and -errno on failure.
 * A pool is immutable after pool_open() (the memory it maps is not), so all
 * accessors and pool_check() are safe from any thread without locking.
 */
#ifndef RMEM_POOL_H
#define RMEM_POOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto.h"

#define POOL_DEFAULT_CHUNK (1ULL << 30) /* 1 GiB */
#define POOL_MIN_CHUNK (1ULL << 20) /* 1 MiB */
#define POOL_MIN_SIZE (1ULL << 20)
#define POOL_TRAILER_SIZE 4096U /* bytes after the pool in a backing file */

struct pool;

struct pool_params {
	uint64_t size; /* bytes; multiple of the page (huge page) size, >= POOL_MIN_SIZE */
	uint64_t chunk_size; /* region size; power of two >= POOL_MIN_CHUNK; 0: default */
	bool hugepages; /* MAP_HUGETLB (not with backing_file) */
	const char *backing_file; /* NULL: anonymous memory */
	/*
	 * adopt: backing_file must exist and be a pool file; size is what its
	 * trailer records (params->size is ignored) and the chunk size grows
	 * as needed to stay within PROTO_MAX_REGIONS.
	 */
	bool adopt;
	/* recorded in a new backing file's trailer (NULL: ""); an adopted file's win */
	const char *name;
	const char *owner;
};

/* one region of the pool; regions lie end to end in pool-offset order */
struct pool_region {
	void *base; /* its first byte in this process; the remote address clients use */
	uint64_t len; /* chunk_size, except possibly the last region */
	uint64_t offset; /* offset of base within the pool */
	uint32_t key; /* the TCP transport's rkey for this region */
};

/*
 * Map a pool as @params says. On failure also writes a one-line explanation
 * for humans into @why (may be NULL): what went wrong and what to do about it
 * (reserve huge pages, pick another --size, ...).
 * -EINVAL (bad size/chunk/combination), -ENOMEM (no huge pages, no memory),
 * -EEXIST (backing file of another size or not a pool file), -EBUSY (backing
 * file in use by another memserver), -ENOSPC (no room to reserve the backing
 * file's blocks: they are allocated up front, so that a client WRITE can never
 * hit a full file system through the mapping), other -errno from
 * open/mmap/fallocate/getrandom.
 */
int pool_open(const struct pool_params *params, struct pool **out, char *why, size_t why_len);

/* flush a backing file, unmap, free. NULL-tolerant; logs and keeps going on failure */
void pool_close(struct pool *pool);

/*
 * The NIC's check for a one-sided operation on [addr, addr+len) with key
 * @rkey: PROTO_E_KEY if @rkey names no region, PROTO_E_RANGE if the range is
 * not wholly inside that region (overflow-safe for any addr/len; len 0 is in
 * range when addr lies in [base, base+len]), PROTO_E_ALIGN if @is_atomic and
 * addr is not 8-byte aligned; else PROTO_OK with *ptr = the host pointer.
 * *ptr is set only on PROTO_OK.
 */
enum proto_status pool_check(const struct pool *pool, uint64_t addr, uint32_t rkey, uint64_t len,
			     bool is_atomic, void **ptr);

/* the TCP descriptor (regions with their TCP keys) a client gets at HELLO. 0 or -ENOMEM */
int pool_describe(const struct pool *pool, struct proto_pool *out);

/* msync a backing file's mapping (MS_SYNC). 0 for anonymous pools; -errno */
int pool_flush(struct pool *pool);

/* the page size a pool's size must be a multiple of */
uint64_t pool_page_size(bool hugepages);
/* bytes of the pool this machine's memory holds now (mincore); 0 if unknown */
uint64_t pool_resident(const struct pool *pool);

/* accessors */
const char *pool_name(const struct pool *pool); /* from params or the trailer; "" if none */
const char *pool_owner(const struct pool *pool);
uint64_t pool_size(const struct pool *pool);
uint64_t pool_id(const struct pool *pool);
uint32_t pool_flags(const struct pool *pool); /* PROTO_POOL_PERSISTENT / PROTO_POOL_HUGEPAGES */
void *pool_base(const struct pool *pool); /* first byte of the whole mapping */
uint64_t pool_chunk_size(const struct pool *pool);
unsigned int pool_region_count(const struct pool *pool);
/* region @index (0..count-1) or NULL */
const struct pool_region *pool_region_get(const struct pool *pool, unsigned int index);

#endif /* RMEM_POOL_H */
