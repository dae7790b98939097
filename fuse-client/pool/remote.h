/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * remote.h - the filesystem's view of the pool: byte offsets in one flat
 * remote address space, reached through a small set of transport connections.
 *
 * It hides the transport (xport.h): pool offsets become (raddr, rkey) through
 * the pool descriptor, requests crossing a region boundary are split, and a
 * channel (one xport + a registered bounce area) is taken from a pool of
 * `qps` channels for each request so FUSE worker threads proceed in parallel.
 * Memory inside the registered cache arena moves without the bounce copy.
 * When the server goes away, requests wait for it (reconnect_timeout) and
 * retry; when it stays away, or comes back with another pool, or the lease
 * is lost, the remote *fails*: every request fails with -EIO at once, for good.
 *
 * All functions return 0 or -errno and are thread-safe. Memory, in the whole
 * pool layer: GLib allocation failure aborts (g_new); only the registered
 * bounce buffers (posix_memalign) fail with -ENOMEM.
 */
#ifndef RMEM_REMOTE_H
#define RMEM_REMOTE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "xport.h"

struct remote;

struct remote_config {
	const char *transport; /* "auto" | "tcp" | "rdma" */
	/* host, port, token hash, poll mode...; client_id 0: remote_open picks a random one */
	struct xport_params params;
	unsigned int qps; /* channels (connections), >= 1 */
	size_t bounce_size; /* registered bytes per channel (>= 1 MiB) */
	/* how long requests wait for a server that went away: 0 fails at once, -1 forever */
	int reconnect_timeout_ms;
};

int remote_open(const struct remote_config *cfg, struct remote **out);
void remote_close(struct remote *r); /* NULL-tolerant */

uint64_t remote_size(const struct remote *r); /* pool bytes */
uint64_t remote_pool_id(const struct remote *r);
/*
 * The non-zero client id every channel presents at connect and reconnect; the
 * lease (super.c) uses it as its owner value, so the memserver knows which
 * connections belong to the lease holder.
 */
uint64_t remote_client_id(const struct remote *r);
const char *remote_transport(const struct remote *r); /* "tcp" / "rdma" */

/* copy [off, off+len) of the pool into buf / from buf into the pool (any size) */
int remote_read(struct remote *r, uint64_t off, void *buf, size_t len);
int remote_write(struct remote *r, uint64_t off, const void *buf, size_t len);
/* vectored forms: one request per iovec entry, posted as one batch per channel */
int remote_readv(struct remote *r, const uint64_t *offs, const struct iovec *iov, int cnt);
int remote_writev(struct remote *r, const uint64_t *offs, const struct iovec *iov, int cnt);
/* write len zero bytes at off */
int remote_zero(struct remote *r, uint64_t off, uint64_t len);
/* 64-bit atomics on an 8-byte aligned pool offset; *old receives the prior value */
int remote_cas(struct remote *r, uint64_t off, uint64_t compare, uint64_t swap, uint64_t *old);
int remote_fetch_add(struct remote *r, uint64_t off, uint64_t add, uint64_t *old);

/*
 * The block cache's arena: register [addr, addr+len) with every channel's
 * transport (now, and again after each reconnect). readv/writev pieces that
 * lie inside it move straight between the pool and that memory, with no
 * bounce copy (RDMA READs land in cache slots). One arena at a time: -EINVAL
 * if one is registered; other -errno from xport_reg_mr (nothing registered).
 * Unregister only when no request can be using it. NULL-tolerant.
 */
int remote_register_arena(struct remote *r, void *addr, size_t len);
void remote_unregister_arena(struct remote *r);

/*
 * The failed state. remote_fail() records why the pool can no longer be used
 * (logged once; later calls are ignored) and from then on every request
 * fails with -EIO at once; remote_failed() says whether that happened.
 * remote_state_text() renders "name value" lines for the stats xattr: state
 * up|away|failed, server, outages, away_ms and, once failed, the failure;
 * bytes written, or -ERANGE if cap is too small.
 */
void remote_fail(struct remote *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
bool remote_failed(const struct remote *r);
ssize_t remote_state_text(struct remote *r, char *buf, size_t cap);

/*
 * Write fencing, driven by the lease (super.c). Once CLOCK_MONOTONIC passes
 * the deadline (ns; 0 = none), every write, zero, CAS and FETCH_ADD waits for
 * the deadline to be pushed again (the heartbeat proving the lease), at most
 * reconnect_timeout; then the remote fails. A client that may have lost its
 * lease must not touch the pool. The *_unfenced atomics below are exempt;
 * only the lease protocol itself uses them.
 *
 * The memserver fences too: once a new lease holder sent FENCE with our
 * client id, our requests fail with -EKEYREVOKED and reconnecting is refused.
 * The first such failure fails the remote ("LEASE LOST"); nothing is retried.
 */
void remote_set_write_deadline(struct remote *r, uint64_t deadline_ns);
int remote_cas_unfenced(struct remote *r, uint64_t off, uint64_t compare, uint64_t swap,
			uint64_t *old);
int remote_fetch_add_unfenced(struct remote *r, uint64_t off, uint64_t add, uint64_t *old);

/*
 * After taking the lease over from @victim: have the memserver revoke every
 * connection presenting that client id and refuse it from now on (PROTO_FENCE).
 * Waits out an outage like any request. Returns once none of its writes can
 * land any more: 0 or -errno.
 */
int remote_fence_client(struct remote *r, uint64_t victim);

#endif /* RMEM_REMOTE_H */
