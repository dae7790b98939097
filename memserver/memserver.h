/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * memserver.h - state shared by the memserver's parts: the pools (registry.h),
 * the tenants and their tokens (tenant.h), the counters, the hooks the TCP
 * server calls for the RDMA out-of-band QP exchange, and fencing (fence.c:
 * the fenced client ids of each pool, and revoking a pool's connections).
 * main.c owns it; tcp_server.c and rdma_server.c read it.
 */
#ifndef RMEM_MEMSERVER_H
#define RMEM_MEMSERVER_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto.h"
#include "registry.h"
#include "tenant.h"

/* the transport servers whose connections a FENCE revokes */
enum memserver_side {
	MEMSERVER_SIDE_TCP,
	MEMSERVER_SIDE_RDMA,
	MEMSERVER_SIDES
};

/*
 * A server's revoke hook: make sure no WRITE/CAS/FETCH_ADD of a connection
 * bound to pool @p presenting @client_id (0: every connection of @p) is
 * applied after it returns, and cut those connections. Returns how many it
 * revoked. Called without any lock of the caller's held but with the hooks'
 * read lock (fence.c).
 */
typedef unsigned int (*memserver_revoke_fn)(void *ctx, struct registry_pool *p,
					    uint64_t client_id);

struct memserver {
	struct registry reg;
	struct tenant_set tenants;
	bool verbose;
	/* counters, bumped with memserver_count() (relaxed atomics), read for PROTO_STATS */
	struct proto_stats stats;

	/*
	 * Out-of-band RDMA QP setup (PROTO_QP_EXCHANGE over TCP), installed by
	 * rdma_server_start(); NULL when RDMA is not serving. oob_accept brings
	 * up a server QP in pool @p's protection domain facing @client
	 * (presenting @client_id), fills @server and the RDMA pool descriptor
	 * @pool (caller clears it), and returns an opaque handle that oob_release
	 * frees when the TCP connection ends (the connection keeps its reference
	 * to @p until then). 0, -EKEYREVOKED (the client id is fenced), -ENOENT
	 * (the pool was deleted) or -errno.
	 */
	void *oob_ctx;
	int (*oob_accept)(void *oob_ctx, struct registry_pool *p, uint64_t client_id,
			  const struct proto_qp_info *client, struct proto_qp_info *server,
			  struct proto_pool *pool, void **handle);
	void (*oob_release)(void *oob_ctx, void *handle);

	/*
	 * Fencing (fence.c). Each pool's fenced[] (struct registry_pool): the
	 * client ids PROTO_FENCE named on that pool, refused at every later
	 * connect to it; protected by fence_lock, a leaf lock (taken inside a
	 * server's own lock, never around one). revoke[]: each server's hook,
	 * protected by revoke_lock (read while called, written when a server
	 * installs or removes its hook).
	 */
	pthread_mutex_t fence_lock;
	pthread_rwlock_t revoke_lock;
	memserver_revoke_fn revoke[MEMSERVER_SIDES];
	void *revoke_ctx[MEMSERVER_SIDES];
};

static inline void memserver_count(uint64_t *counter, uint64_t n)
{
	__atomic_add_fetch(counter, n, __ATOMIC_RELAXED);
}

/* snapshot the counters into the wire form's host struct */
void memserver_stats_snapshot(const struct memserver *ms, struct proto_stats *out);

/* ---- fencing (fence.c) ---- */

void memserver_fence_init(struct memserver *ms);
void memserver_fence_destroy(struct memserver *ms);
/* install (fn != NULL) or remove a server's revoke hook; removal waits for running fences */
void memserver_set_revoke(struct memserver *ms, enum memserver_side side, memserver_revoke_fn fn,
			  void *ctx);
/*
 * May a connection to @p presenting @client_id be admitted? 0; -EKEYREVOKED
 * when the id is fenced on @p (never for 0); -ENOENT when @p was deleted. A
 * server calls this at connect with its own lock held, after which the new
 * connection is in the list its revoke hook walks: a fence (or a forced
 * delete) then either finds the connection or the connect finds the id (or
 * the deletion); fence.c says why.
 */
int memserver_admit(struct memserver *ms, struct registry_pool *p, uint64_t client_id);
/*
 * PROTO_FENCE on pool @p: refuse @client_id on @p from now on and revoke its
 * connections to @p on every side. Returns once no write of theirs can land
 * any more: 0, or -ENOMEM (nothing changed).
 */
int memserver_fence(struct memserver *ms, struct registry_pool *p, uint64_t client_id);
/* PROTO_POOL_DELETE (force): revoke every connection of the deleted pool @p */
unsigned int memserver_revoke_pool(struct memserver *ms, struct registry_pool *p);

#endif /* RMEM_MEMSERVER_H */
