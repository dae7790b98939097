/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * rdma_server.h - the memserver's RDMA side: an rdma_cm listener that
 * accepts RC connections (token checked in the connect private data),
 * registers the pool with each device a client arrives on (in chunks of the
 * device's max MR size), and answers control SENDs (HELLO, PING, STATS).
 * One-sided READ/WRITE/atomics need no server CPU.
 *
 * It also serves the out-of-band path: a client that exchanged QP parameters
 * over the TCP connection (PROTO_QP_EXCHANGE) gets an RC QP brought up by
 * hand (to_init/to_rtr/to_rts) through ms->oob_accept / ms->oob_release.
 */
#ifndef RMEM_RDMA_SERVER_H
#define RMEM_RDMA_SERVER_H

#include <stdint.h>

struct memserver;
struct rdma_server;

/*
 * Listen on addr:port for rdma_cm connections and install the oob hooks in
 * ms. -ENODEV when this host has no RDMA device (the memserver then serves
 * TCP only and says so); -EADDRINUSE, -EADDRNOTAVAIL, -errno.
 */
int rdma_server_start(struct memserver *ms, const char *addr, uint16_t port,
		      struct rdma_server **out);
/* disconnect every client, release every verbs object; NULL-tolerant */
void rdma_server_stop(struct rdma_server *rs);
/* "rxe0" style list of devices the listener serves, for the ready line */
const char *rdma_server_devices(const struct rdma_server *rs);

#endif /* RMEM_RDMA_SERVER_H */
