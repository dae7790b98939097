/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * net.c - socket helpers (see net.h) for the TCP transport, the memserver's
 * listeners and the RDMA out-of-band QP exchange.
 *
 * Conventions: descriptors are close-on-exec; connected sockets have
 * TCP_NODELAY (the transport pipelines small request frames and must not wait
 * for Nagle); writes use MSG_NOSIGNAL so a dead peer is -ECONNRESET, never
 * SIGPIPE. The *_full helpers also work on non-blocking descriptors: on EAGAIN
 * they wait in poll() for the descriptor to become ready.
 */
#define G_LOG_DOMAIN "rmemfs-net"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <glib.h>

#include "net.h"
#include "clock.h"
#include "proto.h"

static int net_gai_errno(int gai)
{
	switch (gai) {
	case EAI_NONAME:
#ifdef EAI_NODATA
	case EAI_NODATA:
#endif
	case EAI_FAIL:
		return -ENOENT;
	case EAI_AGAIN:
		return -EAGAIN;
	case EAI_MEMORY:
		return -ENOMEM;
	case EAI_FAMILY:
#ifdef EAI_ADDRFAMILY
	case EAI_ADDRFAMILY:
#endif
		return -EAFNOSUPPORT;
	case EAI_SYSTEM:
		return errno ? -errno : -EIO;
	default:
		return -EINVAL;
	}
}

int net_set_nonblock(int fd, bool on)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0)
		return -errno;
	fl = on ? (fl | O_NONBLOCK) : (fl & ~O_NONBLOCK);
	if (fcntl(fd, F_SETFL, fl) < 0)
		return -errno;
	return 0;
}

/* connect one resolved address before the deadline (-1: none); fd or -errno */
static int net_connect_one(const struct addrinfo *ai, int64_t deadline)
{
	int one = 1;
	int fd, rc;

	fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
		    ai->ai_protocol);
	if (fd < 0)
		return -errno;
	if (connect(fd, ai->ai_addr, ai->ai_addrlen) < 0) {
		struct pollfd pfd = { .fd = fd, .events = POLLOUT };
		socklen_t sl = sizeof(rc);

		if (errno != EINPROGRESS) {
			rc = -errno;
			goto err_close;
		}
		for (;;) {
			int wait = -1;

			if (deadline >= 0) {
				int64_t left = deadline - clock_now_ms();

				if (left <= 0) {
					rc = -ETIMEDOUT;
					goto err_close;
				}
				wait = left > INT_MAX ? INT_MAX : (int)left;
			}
			rc = poll(&pfd, 1, wait);
			if (rc < 0 && errno == EINTR)
				continue;
			if (rc < 0) {
				rc = -errno;
				goto err_close;
			}
			if (rc > 0)
				break;
		}
		if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &rc, &sl) < 0) {
			rc = -errno;
			goto err_close;
		}
		if (rc) {
			rc = -rc;
			goto err_close;
		}
	}
	rc = net_set_nonblock(fd, false);
	if (rc)
		goto err_close;
	if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) < 0) {
		rc = -errno;
		goto err_close;
	}
	return fd;

err_close:
	close(fd);
	return rc;
}

int net_resolve(const char *host, uint16_t port, bool passive, struct addrinfo **out)
{
	struct addrinfo hints = {
		.ai_family = AF_UNSPEC,
		.ai_socktype = SOCK_STREAM,
		.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0),
	};
	char portstr[8];
	int rc;

	snprintf(portstr, sizeof(portstr), "%u", port);
	errno = 0;
	rc = getaddrinfo(host ? host : "127.0.0.1", portstr, &hints, out);
	if (rc) {
		*out = NULL;
		return net_gai_errno(rc);
	}
	return 0;
}

/* timeout_ms <= 0: no limit beyond the kernel's own connect timeout */
int net_connect(const char *host, uint16_t port, int timeout_ms)
{
	int64_t deadline = timeout_ms > 0 ? clock_now_ms() + timeout_ms : -1;
	struct addrinfo *res, *ai;
	int rc, fd = -ENOENT;

	rc = net_resolve(host, port, false, &res);
	if (rc)
		return rc;
	for (ai = res; ai; ai = ai->ai_next) {
		fd = net_connect_one(ai, deadline);
		if (fd >= 0 || fd == -ETIMEDOUT)
			break;
	}
	freeaddrinfo(res);
	return fd;
}

int net_listen(const char *addr, uint16_t port, int backlog)
{
	struct addrinfo *res, *ai;
	int one = 1;
	int rc, fd = -EADDRNOTAVAIL;

	rc = net_resolve(addr, port, true, &res);
	if (rc)
		return rc;
	for (ai = res; ai; ai = ai->ai_next) {
		fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
		if (fd < 0) {
			fd = -errno;
			continue;
		}
		if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
		    bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, backlog) < 0) {
			rc = -errno;
			close(fd);
			fd = rc;
			continue;
		}
		break;
	}
	freeaddrinfo(res);
	return fd;
}

int net_local_port(int fd)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);

	if (getsockname(fd, (struct sockaddr *)&ss, &sl) < 0)
		return -errno;
	switch (ss.ss_family) {
	case AF_INET:
		return ntohs(((struct sockaddr_in *)&ss)->sin_port);
	case AF_INET6:
		return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
	default:
		return -EAFNOSUPPORT;
	}
}

static bool net_sockaddr_is_loopback(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)sa;

		return (ntohl(in->sin_addr.s_addr) >> 24) == 127;
	}
	if (sa->sa_family == AF_INET6) {
		const struct in6_addr *a6 = &((const struct sockaddr_in6 *)sa)->sin6_addr;

		if (IN6_IS_ADDR_LOOPBACK(a6))
			return true;
		return IN6_IS_ADDR_V4MAPPED(a6) && a6->s6_addr[12] == 127;
	}
	return false;
}

/* every address the name resolves to must be a loopback address */
bool net_is_loopback(const char *addr)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM };
	struct addrinfo *res, *ai;
	bool loop = true;

	if (!addr)
		return true;
	if (getaddrinfo(addr, NULL, &hints, &res))
		return false;
	for (ai = res; ai; ai = ai->ai_next) {
		if (!net_sockaddr_is_loopback(ai->ai_addr))
			loop = false;
	}
	freeaddrinfo(res);
	return loop;
}

int net_ms_until(int64_t deadline_us)
{
	int64_t left;

	if (deadline_us < 0)
		return -1;
	left = deadline_us - clock_now_us();
	if (left <= 0)
		return 0;
	return left / 1000 + 1 > INT_MAX ? INT_MAX : (int)(left / 1000 + 1);
}

/* drop the first n bytes of *iov (consumed entries get length 0), and empty entries */
static void net_iov_advance(struct iovec **iov, int *iovcnt, size_t n)
{
	while (*iovcnt > 0 && n >= (*iov)->iov_len) {
		n -= (*iov)->iov_len;
		(*iov)->iov_len = 0;
		(*iov)++;
		(*iovcnt)--;
	}
	if (*iovcnt > 0 && n) {
		(*iov)->iov_base = (char *)(*iov)->iov_base + n;
		(*iov)->iov_len -= n;
	}
}

/* one transfer, never blocking on a socket; a descriptor that is not one falls back */
static ssize_t net_io_once(int fd, struct iovec *iov, int iovcnt, bool write, bool *is_sock)
{
	struct msghdr msg = { .msg_iov = iov, .msg_iovlen = iovcnt > IOV_MAX ? IOV_MAX : iovcnt };
	ssize_t n;

	if (*is_sock) {
		n = write ? sendmsg(fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT) :
			    recvmsg(fd, &msg, MSG_DONTWAIT);
		if (n >= 0 || errno != ENOTSOCK)
			return n;
		*is_sock = false;
	}
	return write ? writev(fd, iov, (int)msg.msg_iovlen) : readv(fd, iov, (int)msg.msg_iovlen);
}

int net_io_full(int fd, struct iovec *iov, int iovcnt, bool write, int64_t deadline_us)
{
	bool is_sock = true;

	net_iov_advance(&iov, &iovcnt, 0);
	while (iovcnt > 0) {
		struct pollfd pfd = { .fd = fd, .events = write ? POLLOUT : POLLIN };
		ssize_t n = net_io_once(fd, iov, iovcnt, write, &is_sock);

		if (n > 0) {
			net_iov_advance(&iov, &iovcnt, (size_t)n);
			continue;
		}
		if (n == 0)
			return -ECONNRESET;
		if (errno == EINTR)
			continue;
		if (errno == EPIPE || errno == ECONNRESET)
			return -ECONNRESET;
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			return -errno;
		if (deadline_us >= 0 && clock_now_us() >= deadline_us)
			return -ETIMEDOUT;
		if (poll(&pfd, 1, net_ms_until(deadline_us)) < 0 && errno != EINTR)
			return -errno;
	}
	return 0;
}

int net_read_full(int fd, void *buf, size_t len)
{
	struct iovec iov = { .iov_base = buf, .iov_len = len };

	return net_io_full(fd, &iov, 1, false, -1);
}

int net_write_full(int fd, const void *buf, size_t len)
{
	struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };

	return net_io_full(fd, &iov, 1, true, -1);
}

int net_writev_full(int fd, struct iovec *iov, int iovcnt)
{
	return net_io_full(fd, iov, iovcnt, true, -1);
}

static int net_parse_port(const char *s, uint16_t *port)
{
	char *end;
	unsigned long v;

	if (!*s || !g_ascii_isdigit(*s))
		return -EINVAL;
	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || *end || v == 0 || v > 65535)
		return -EINVAL;
	*port = (uint16_t)v;
	return 0;
}

int net_parse_server(const char *s, char **host, uint16_t *port)
{
	const char *colon;

	*host = NULL;
	*port = 0;
	if (!s || !*s)
		return -EINVAL;

	if (s[0] == '[') {
		const char *close = strchr(s, ']');

		if (!close || close == s + 1)
			return -EINVAL;
		if (close[1] != '\0') {
			if (close[1] != ':' || net_parse_port(close + 2, port) < 0)
				return -EINVAL;
		}
		*host = g_strndup(s + 1, close - s - 1);
		return 0;
	}

	colon = strchr(s, ':');
	if (colon && strchr(colon + 1, ':')) {
		/* two or more colons and no brackets: a bare IPv6 literal */
		*host = g_strdup(s);
		return 0;
	}
	if (colon) {
		if (colon == s || net_parse_port(colon + 1, port) < 0)
			return -EINVAL;
		*host = g_strndup(s, colon - s);
		return 0;
	}
	*host = g_strdup(s);
	return 0;
}

int net_parse_server_pool(const char *s, char **host, uint16_t *port, char **pool,
			  const char **why)
{
	const char *slash = s ? strchr(s, '/') : NULL;
	char *addr;
	int rc;

	*pool = NULL;
	if (why)
		*why = NULL;
	if (slash && !proto_pool_name_valid(slash + 1)) {
		*host = NULL;
		*port = 0;
		if (why)
			*why = "not a pool name after the '/' (1 to 31 of A-Z a-z 0-9 _ . -, beginning "
			       "with a letter, a digit or _)";
		return -EINVAL;
	}
	addr = slash ? g_strndup(s, slash - s) : g_strdup(s);
	rc = net_parse_server(addr, host, port);
	g_free(addr);
	if (rc < 0) {
		if (why)
			*why = "not SERVER[:PORT][/NAME] (ports are 1..65535; write IPv6 as "
			       "[addr]:port)";
		return rc;
	}
	if (slash)
		*pool = g_strdup(slash + 1);
	return 0;
}

int net_format_server_pool(char *buf, size_t cap, const char *host, uint16_t port,
			   const char *pool)
{
	bool v6 = strchr(host, ':') != NULL;

	return snprintf(buf, cap, "%s%s%s:%u%s%s", v6 ? "[" : "", host, v6 ? "]" : "",
			port ? port : PROTO_DEFAULT_PORT, pool && *pool ? "/" : "", pool ? pool : "");
}
