/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * memserver.h - state shared by the memserver's parts: the pool, the token,
 * the counters, and the hooks the TCP server calls for the RDMA out-of-band
 * QP exchange. main.c owns it; tcp_server.c and rdma_server.c read it.
 */
#ifndef RMEM_MEMSERVER_H
#define RMEM_MEMSERVER_H

#include <stdbool.h>
#include <stdint.h>

#include "proto.h"

struct pool;

struct memserver {
	struct pool *pool;
	bool have_token;
	uint8_t token_hash[PROTO_TOKEN_HASH_LEN];
	bool verbose;
	/* counters, bumped with memserver_count() (relaxed atomics), read for PROTO_STATS */
	struct proto_stats stats;

	/*
	 * Out-of-band RDMA QP setup (PROTO_QP_EXCHANGE over TCP), installed by
	 * rdma_server_start(); NULL when RDMA is not serving. oob_accept brings
	 * up a server QP facing @client, fills @server and the RDMA pool
	 * descriptor @pool (caller clears it), and returns an opaque handle that
	 * oob_release frees when the TCP connection ends. 0 or -errno.
	 */
	void *oob_ctx;
	int (*oob_accept)(void *oob_ctx, const struct proto_qp_info *client,
			  struct proto_qp_info *server, struct proto_pool *pool, void **handle);
	void (*oob_release)(void *oob_ctx, void *handle);
};

static inline void memserver_count(uint64_t *counter, uint64_t n)
{
	__atomic_add_fetch(counter, n, __ATOMIC_RELAXED);
}

/* snapshot the counters into the wire form's host struct */
void memserver_stats_snapshot(const struct memserver *ms, struct proto_stats *out);

#endif /* RMEM_MEMSERVER_H */
