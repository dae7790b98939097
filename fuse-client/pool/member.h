/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * member.h - one memserver's pool: byte offsets in its flat address space,
 * reached through a small set of transport connections. The filesystem sees
 * the member set through remote.h, which places its bytes on the members.
 *
 * It hides the transport (xport.h): pool offsets become (raddr, rkey) through
 * the pool descriptor, requests crossing a region boundary are split, and a
 * channel (one xport + a registered bounce area) is taken from a pool of
 * `qps` channels for each request so FUSE worker threads proceed in parallel.
 * Memory inside the registered cache arena moves without the bounce copy.
 * When the server goes away, requests wait for it (reconnect_timeout) and
 * retry; when it stays away, or comes back with another pool, or the lease
 * is lost, the member *fails*: every request fails with -EIO at once, for good.
 * A member set with other copies does not wait (member_set_nowait).
 *
 * All functions return 0 or -errno and are thread-safe. Memory, in the whole
 * pool layer: GLib allocation failure aborts (g_new); only the registered
 * bounce buffers (posix_memalign) fail with -ENOMEM.
 */
#ifndef RMEM_MEMBER_H
#define RMEM_MEMBER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "xport.h"

struct member;

struct member_config {
	const char *transport; /* "auto" | "tcp" | "rdma" */
	/* host, port, token hash, poll mode...; client_id 0: member_open picks a random one */
	struct xport_params params;
	unsigned int qps; /* channels (connections), >= 1 */
	size_t bounce_size; /* registered bytes per channel (>= 64 KiB) */
	/* how long requests wait for a server that went away: 0 fails at once, -1 forever */
	int reconnect_timeout_ms;
};

int member_open(const struct member_config *cfg, struct member **out);
void member_close(struct member *r); /* NULL-tolerant */

uint64_t member_size(const struct member *r); /* pool bytes */
uint64_t member_pool_id(const struct member *r);
/*
 * The non-zero client id every channel presents at connect and reconnect; the
 * lease (super.c) uses it as its owner value, so the memserver knows which
 * connections belong to the lease holder.
 */
uint64_t member_client_id(const struct member *r);
const char *member_transport(const struct member *r); /* "tcp" / "rdma" */
const char *member_server(const struct member *r); /* "host:port[/pool]", for messages */

/*
 * nowait: a request that finds the server away returns -EHOSTDOWN at once
 * (after one attempt on a fresh connection) instead of waiting for it: the
 * member set has other copies and drops this member instead. Also no
 * waiting for the lease deadline (-EHOSTDOWN too). Default off.
 */
void member_set_nowait(struct member *r, bool nowait);


/* copy [off, off+len) of the pool into buf / from buf into the pool (any size) */
int member_read(struct member *r, uint64_t off, void *buf, size_t len);
int member_write(struct member *r, uint64_t off, const void *buf, size_t len);
/* vectored forms: one request per iovec entry, posted as one batch per channel */
int member_readv(struct member *r, const uint64_t *offs, const struct iovec *iov, int cnt);
int member_writev(struct member *r, const uint64_t *offs, const struct iovec *iov, int cnt);
/* write len zero bytes at off */
int member_zero(struct member *r, uint64_t off, uint64_t len);
/* 64-bit atomics on an 8-byte aligned pool offset; *old receives the prior value */
int member_cas(struct member *r, uint64_t off, uint64_t compare, uint64_t swap, uint64_t *old);
int member_fetch_add(struct member *r, uint64_t off, uint64_t add, uint64_t *old);

/*
 * The block cache's arena, offered chunk by chunk as the cache grows:
 * member_arena_set gives its place ([base, base+len) in chunks of chunk
 * bytes, the last one shorter; nothing offered yet; -EINVAL if an arena is
 * set); member_arena_add offers chunk i (-EINVAL outside the arena): each
 * channel registers it with its transport when it first moves bytes of it,
 * and again after a reconnect; member_arena_remove and member_arena_clear
 * withdraw and deregister, only when no request can be using those bytes.
 * readv/writev pieces inside one registered chunk move straight between the
 * pool and that memory, with no bounce copy (RDMA READs land in cache
 * slots); where a registration fails they are copied (said once).
 * NULL-tolerant undo.
 */
int member_arena_set(struct member *r, void *base, size_t len, size_t chunk);
int member_arena_add(struct member *r, unsigned int i);
void member_arena_remove(struct member *r, unsigned int i);
void member_arena_clear(struct member *r);

/*
 * The failed state. member_fail() records why the pool can no longer be used
 * (logged once; later calls are ignored) and from then on every request
 * fails with -EIO at once; member_failed() says whether that happened.
 * member_state_text() renders "name value" lines for the stats xattr: state
 * up|away|failed, server, outages, away_ms and, once failed, the failure;
 * bytes written, or -ERANGE if cap is too small.
 */
void member_fail(struct member *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
bool member_failed(const struct member *r);
/*
 * The one "FILESYSTEM FAILED" transition, for a member and for a member set
 * (remote.h): under lock, the first reason is kept in *failure (why, a
 * g_malloc'd string, is taken over or freed), *failed is set and the
 * failure said once. True if this call failed it.
 */
bool member_fail_once(pthread_mutex_t *lock, char **failure, atomic_bool *failed, char *why);
/* did the server fence this client off (failed with "LEASE LOST")? */
bool member_fenced(const struct member *r);
ssize_t member_state_text(struct member *r, char *buf, size_t cap);

/*
 * Write fencing, driven by the lease (super.c). Once CLOCK_MONOTONIC passes
 * the deadline (ns; 0 = none), every write, zero, CAS and FETCH_ADD waits for
 * the deadline to be pushed again (the heartbeat proving the lease), at most
 * reconnect_timeout; then the member fails. A client that may have lost its
 * lease must not touch the pool. The *_unfenced atomics below are exempt;
 * only the lease protocol itself uses them.
 *
 * The memserver fences too: once a new lease holder sent FENCE with our
 * client id, our requests fail with -EKEYREVOKED and reconnecting is refused.
 * The first such failure fails the member ("LEASE LOST"); nothing is retried.
 */
void member_set_write_deadline(struct member *r, uint64_t deadline_ns);
int member_cas_unfenced(struct member *r, uint64_t off, uint64_t compare, uint64_t swap,
			uint64_t *old);
int member_fetch_add_unfenced(struct member *r, uint64_t off, uint64_t add, uint64_t *old);

/*
 * After taking the lease over from @victim: have the memserver revoke every
 * connection presenting that client id and refuse it from now on (PROTO_FENCE).
 * Waits out an outage like any request. Returns once none of its writes can
 * land any more: 0 or -errno.
 */
int member_fence_client(struct member *r, uint64_t victim);

#endif /* RMEM_MEMBER_H */
