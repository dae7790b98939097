/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * tcp_server.h - the memserver's TCP side: an acceptor thread and one thread
 * per client connection, speaking the proto.h wire format. It emulates a
 * NIC's one-sided operations on the pool (every access checked by
 * pool_check()), answers the control messages (HELLO, PING, STATS) and
 * carries the out-of-band RDMA QP exchange (PROTO_QP_EXCHANGE) through the
 * hooks in struct memserver.
 *
 * Every function returns 0 on success and -errno on failure.
 */
#ifndef RMEM_TCP_SERVER_H
#define RMEM_TCP_SERVER_H

#include <stdint.h>

#define TCP_SERVER_HELLO_TIMEOUT_MS 10000 /* default for tcp_server_set_hello_timeout() */
#define TCP_SERVER_SPIN_US 50 /* default for tcp_server_set_spin() */

struct memserver;
struct tcp_server;

/*
 * Bind and listen on addr:port (port 0: an ephemeral port, see
 * tcp_server_port()); no thread runs yet, so the caller can learn the port
 * and start the RDMA side (which installs the oob hooks in ms) before any
 * client is served. ms must outlive the server. -EADDRINUSE when the port is
 * busy, -EADDRNOTAVAIL for an address this host does not have, -errno.
 */
int tcp_server_create(struct memserver *ms, const char *addr, uint16_t port,
		      struct tcp_server **out);

/* the TCP port actually bound */
uint16_t tcp_server_port(const struct tcp_server *ts);

/*
 * How long a new connection may take to authenticate (a HELLO or QP_EXCHANGE
 * with a good token) before it is closed, in milliseconds (> 0; default
 * TCP_SERVER_HELLO_TIMEOUT_MS). The limit is on the total time since the
 * connection was accepted, so a peer that trickles bytes cannot stretch it.
 * Call before tcp_server_run().
 */
void tcp_server_set_hello_timeout(struct tcp_server *ts, int ms);

/*
 * How long an authenticated connection's thread polls its socket, after
 * the client went quiet, before it sleeps in recvmsg (microseconds; 0:
 * sleep at once). A client at queue depth 1 sends its next request within
 * a few microseconds of its last reply; serving it without a scheduler
 * wake-up takes a large part off the round trip, for at most spin_us of CPU
 * per quiet spell. Call before tcp_server_run().
 */
void tcp_server_set_spin(struct tcp_server *ts, unsigned int us);

/* start the acceptor thread: clients are served from now on. 0 or -errno */
int tcp_server_run(struct tcp_server *ts);

/*
 * Stop accepting, shut down every client connection, join every thread
 * (releasing out-of-band RDMA handles through ms->oob_release), close the
 * listener, free. NULL-tolerant.
 */
void tcp_server_destroy(struct tcp_server *ts);

#endif /* RMEM_TCP_SERVER_H */
