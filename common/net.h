/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * net.h - small socket helpers shared by the TCP transport, the memserver and
 * the RDMA out-of-band exchange. Every function returns 0 (or a descriptor)
 * on success and -errno on failure; short reads/writes and EINTR are handled
 * inside. A peer that closes mid-message gives -ECONNRESET.
 */
#ifndef RMEM_NET_H
#define RMEM_NET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/uio.h>

/*
 * Resolve host:port and connect a TCP socket (TCP_NODELAY set, close-on-exec).
 * Waits at most timeout_ms. Returns the fd or -errno (-ECONNREFUSED,
 * -ETIMEDOUT, -EHOSTUNREACH, -ENOENT when the name does not resolve).
 */
int net_connect(const char *host, uint16_t port, int timeout_ms);
/*
 * The addresses of host (NULL: 127.0.0.1) and port, for a stream socket
 * (passive: to bind). 0 with *out to freeaddrinfo, or -errno (-ENOENT: no
 * such name).
 */
struct addrinfo;
int net_resolve(const char *host, uint16_t port, bool passive, struct addrinfo **out);

/*
 * Bind and listen on addr:port (addr NULL = 127.0.0.1), SO_REUSEADDR,
 * close-on-exec. Returns the fd or -errno (-EADDRINUSE when the port is busy,
 * -EADDRNOTAVAIL for an address this host does not have).
 */
int net_listen(const char *addr, uint16_t port, int backlog);

/* the port a listening socket is bound to (for port 0), or -errno */
int net_local_port(int fd);

/* true if addr (numeric or name) is a loopback address */
bool net_is_loopback(const char *addr);

/* set or clear O_NONBLOCK; 0 or -errno from fcntl */
int net_set_nonblock(int fd, bool on);

/*
 * The one full-transfer loop: move every byte of iov (modified in place:
 * consumed entries end with length 0) from fd (write false) or to it (write
 * true). A socket is never blocked on: when it is not ready the loop waits
 * in poll() until deadline_us (clock_now_us(); < 0: no limit). Returns 0,
 * -ECONNRESET on EOF (before the first byte too) or a peer that has gone
 * away, -ETIMEDOUT at the deadline, or -errno. Works on pipes as well.
 */
int net_io_full(int fd, struct iovec *iov, int iovcnt, bool write, int64_t deadline_us);
/* what poll() may wait until deadline_us, in ms: -1 without one (< 0), rounded up, <= INT_MAX */
int net_ms_until(int64_t deadline_us);
/* the same without a deadline */
int net_read_full(int fd, void *buf, size_t len);
int net_write_full(int fd, const void *buf, size_t len);
int net_writev_full(int fd, struct iovec *iov, int iovcnt);

/*
 * SERVER[:PORT] of every client program: "host", "host:port", "[v6]",
 * "[v6]:port" or a bare IPv6 literal. *host is g_malloc'd; *port is 0 when
 * absent. -EINVAL on a malformed string or a port outside 1..65535.
 */
int net_parse_server(const char *s, char **host, uint16_t *port);
/*
 * SERVER[:PORT][/NAME]: net_parse_server's forms, optionally followed by '/'
 * and the name of one of the server's pools (proto_pool_name_valid). *pool
 * is g_malloc'd, or NULL without "/NAME" (the server's default pool). On
 * -EINVAL, *why (if why is not NULL) says what is wrong, for a message
 * "'S' is WHY": "not SERVER[:PORT][/NAME] (...)" or "not a pool name ...".
 */
int net_parse_server_pool(const char *s, char **host, uint16_t *port, char **pool,
			  const char **why);
/*
 * The other way: "host:port", "[v6]:port", with "/pool" after it when pool
 * is neither NULL nor "" (port 0: PROTO_DEFAULT_PORT). Returns what
 * snprintf does: the length the whole address needs, so >= cap means it
 * was cut short.
 */
int net_format_server_pool(char *buf, size_t cap, const char *host, uint16_t port,
			   const char *pool);

#endif /* RMEM_NET_H */
