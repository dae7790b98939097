/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * xport_tcp.c - the TCP transport: one-sided RDMA semantics emulated over a
 * TCP connection to the memserver, which checks every request against its
 * registered regions exactly as a NIC would (see xport.h for the contract).
 *
 * Each posted op becomes one request frame: proto_hdr + proto_rw_wire (or
 * proto_atomic_wire), followed by the data for a WRITE. A whole post goes out
 * in as few sendmsg() calls as possible: headers are packed back to back in
 * sbuf and WRITE data is sent straight from the caller's registered memory.
 * Many requests are in flight at once; the server answers in request order,
 * so the in-flight records form a ring and the oldest one is always the next
 * response.
 *
 * Receive path. Because responses arrive in order, the client knows what the
 * next bytes must be when every op succeeds: a READ's data goes directly into
 * op->local (no bounce copy) with one recvmsg() that also collects the headers
 * that follow into a small staging buffer (rbuf). The staging read is limited
 * to the predicted headers and small payloads up to and including the next
 * READ's header, so READ data never passes through rbuf (except a few bytes
 * after a failed atomic, whose error response is 8 bytes shorter than
 * predicted). Small responses (WRITE acks, atomics) are batched: one recvmsg
 * can carry a whole queue of them.
 *
 * Deadlock. A post of large WRITEs may fill the socket send buffer while the
 * server, blocked sending us responses, stops reading. post() therefore never
 * blocks on POLLOUT alone: it waits for POLLOUT|POLLIN and drains responses
 * into the completion queue (cq) while it waits. Completions waiting in cq
 * still count as in flight until poll() reports them, so the ring plus cq
 * never hold more than the queue depth.
 *
 * Failure. EOF, a reset, a protocol violation, or op_timeout_ms without any
 * progress fails every in-flight op at once (-EIO, or -ETIMEDOUT) and marks
 * the connection dead: later posts return -ENOTCONN, and poll() returns
 * -ENOTCONN once those failures have been reported.
 *
 * An xport is used by one thread at a time (xport.h), so nothing here locks.
 */
#define G_LOG_DOMAIN "rmemfs-xport-tcp"

#include "config.h"

#include <endian.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <glib.h>

#include "clock.h"
#include "list.h"
#include "net.h"
#include "proto.h"
#include "xport.h"

#define TCP_HDR_LEN sizeof(struct proto_hdr)
#define TCP_FRAME_MAX (sizeof(struct proto_hdr) + sizeof(struct proto_atomic_wire))
#define TCP_ATOMIC_RESP_LEN sizeof(struct proto_atomic_resp_wire)
#define TCP_RBUF_MIN 4096U

/* one in-flight op, in request (= response) order */
struct tcp_slot {
	uint64_t wr_id;
	uint64_t id; /* request id the response must echo */
	void *local;
	uint32_t len;
	uint16_t type; /* enum xport_op_type */
	bool signaled;
};

struct tcp_mr {
	struct xport_mr base;
	struct xport_tcp *owner;
	struct tcp_mr *prev, *next;
};

enum tcp_rx_state {
	TCP_RX_HDR, /* expecting the header of the oldest in-flight op's response */
	TCP_RX_DATA, /* expecting its payload into rx_dst */
};

struct xport_tcp {
	struct xport base;
	int fd;
	bool dead;
	uint64_t next_id;
	uint32_t next_lkey;
	int64_t last_progress_us; /* last time bytes moved while ops were in flight */

	/* in-flight ring: ring[head .. head+count) modulo base.depth */
	struct tcp_slot *ring;
	unsigned int head, count;

	/* completions not yet reported: cq[cq_head .. cq_head+cq_count) modulo depth */
	struct xport_cqe *cq;
	unsigned int cq_head, cq_count;

	/* receive state of the oldest in-flight op's response */
	enum tcp_rx_state rx_state;
	uint8_t *rx_dst;
	uint32_t rx_need, rx_got;
	bool rx_direct; /* rx_dst is op->local (READ data): received without staging */
	uint64_t rx_atomic; /* big-endian old value of an atomic response */

	/* staging buffer for headers and small payloads: rbuf[rpos .. rend) is unparsed */
	uint8_t *rbuf;
	size_t rcap, rpos, rend;

	/* send staging: request headers of one post, and the iovec describing it */
	uint8_t *sbuf;
	struct iovec *iov;

	struct tcp_mr *mrs; /* registered regions, for owner checks and cleanup */
};

static uint16_t tcp_proto_type(uint16_t op_type)
{
	switch (op_type) {
	case XPORT_READ:
		return PROTO_READ;
	case XPORT_WRITE:
		return PROTO_WRITE;
	case XPORT_CAS:
		return PROTO_CAS;
	case XPORT_FETCH_ADD:
		return PROTO_FETCH_ADD;
	}
	return 0;
}

static void tcp_cq_push(struct xport_tcp *xt, const struct tcp_slot *s, int status)
{
	struct xport_cqe *c = &xt->cq[(xt->cq_head + xt->cq_count) % xt->base.depth];

	c->wr_id = s->wr_id;
	c->status = status;
	c->type = s->type;
	xt->cq_count++;
}

static unsigned int tcp_cq_pop(struct xport_tcp *xt, struct xport_cqe *cqes, unsigned int max)
{
	unsigned int n = MIN(max, xt->cq_count);
	unsigned int i;

	for (i = 0; i < n; i++) {
		cqes[i] = xt->cq[xt->cq_head];
		xt->cq_head = (xt->cq_head + 1) % xt->base.depth;
	}
	xt->cq_count -= n;
	return n;
}

/* retire the oldest in-flight op; successful unsignalled ops leave no completion */
static void tcp_complete_head(struct xport_tcp *xt, int status)
{
	const struct tcp_slot *s = &xt->ring[xt->head];

	if (status || s->signaled)
		tcp_cq_push(xt, s, status);
	xt->head = (xt->head + 1) % xt->base.depth;
	xt->count--;
	xt->rx_state = TCP_RX_HDR;
}

/*
 * The connection is unusable (what: the failed step, cause: its -errno): fail
 * everything in flight with err and mark the connection dead.
 */
static void tcp_fail_all(struct xport_tcp *xt, int err, const char *what, int cause)
{
	if (xt->dead)
		return;
	if (xt->count)
		g_debug("%s: %s: %s; failing %u operations in flight with %s", xt->base.peer, what,
			g_strerror(-cause), xt->count, g_strerror(-err));
	else
		g_debug("%s: %s: %s", xt->base.peer, what, g_strerror(-cause));
	while (xt->count) {
		tcp_cq_push(xt, &xt->ring[xt->head], err);
		xt->head = (xt->head + 1) % xt->base.depth;
		xt->count--;
	}
	xt->dead = true;
	xt->rx_state = TCP_RX_HDR;
	xt->rpos = xt->rend = 0;
	shutdown(xt->fd, SHUT_RDWR);
}

/*
 * Parse everything staged in rbuf against the in-flight ring, completing ops
 * in order. Returns 0, or -EPROTO when the server broke the protocol.
 */
static int tcp_rx_process(struct xport_tcp *xt)
{
	while (xt->count) {
		struct tcp_slot *s = &xt->ring[xt->head];
		size_t avail = xt->rend - xt->rpos;
		size_t take;

		if (xt->rx_state == TCP_RX_HDR) {
			struct proto_hdr h;
			struct proto_msg m = { 0 };
			uint32_t want = 0;

			if (avail < TCP_HDR_LEN)
				break;
			memcpy(&h, xt->rbuf + xt->rpos, sizeof(h));
			xt->rpos += TCP_HDR_LEN;
			if (proto_hdr_unpack(&h, &m) ||
			    m.type != (tcp_proto_type(s->type) | PROTO_RESPONSE) || m.id != s->id) {
				g_warning("%s: unexpected response (type %#x id %" PRIu64
					  ", expected %s id %" PRIu64 ")",
					  xt->base.peer, m.type, m.id, xport_op_type_str(s->type),
					  s->id);
				return -EPROTO;
			}
			if (m.status != PROTO_OK) {
				if (m.len) {
					g_warning("%s: error response with payload", xt->base.peer);
					return -EPROTO;
				}
				tcp_complete_head(xt, proto_status_to_errno(m.status));
				continue;
			}
			switch (s->type) {
			case XPORT_READ:
				want = s->len;
				xt->rx_dst = s->local;
				xt->rx_direct = true;
				break;
			case XPORT_WRITE:
				want = 0;
				break;
			default:
				want = TCP_ATOMIC_RESP_LEN;
				xt->rx_dst = (uint8_t *)&xt->rx_atomic;
				xt->rx_direct = false;
				break;
			}
			if (m.len != want) {
				g_warning("%s: %s response of %u bytes, expected %u", xt->base.peer,
					  xport_op_type_str(s->type), m.len, want);
				return -EPROTO;
			}
			if (want == 0) {
				tcp_complete_head(xt, 0);
				continue;
			}
			xt->rx_need = want;
			xt->rx_got = 0;
			xt->rx_state = TCP_RX_DATA;
			avail = xt->rend - xt->rpos;
		}

		take = MIN(avail, (size_t)(xt->rx_need - xt->rx_got));
		if (take) {
			memcpy(xt->rx_dst + xt->rx_got, xt->rbuf + xt->rpos, take);
			xt->rpos += take;
			xt->rx_got += take;
		}
		if (xt->rx_got < xt->rx_need)
			break;
		if (s->type == XPORT_CAS || s->type == XPORT_FETCH_ADD) {
			uint64_t old = be64toh(xt->rx_atomic);

			memcpy(s->local, &old, sizeof(old));
		}
		tcp_complete_head(xt, 0);
	}
	if (xt->rpos == xt->rend)
		xt->rpos = xt->rend = 0;
	return 0;
}

/*
 * Bytes to stage in rbuf on the next receive: the headers and small payloads
 * predicted for the responses after the current payload, stopping after the
 * next READ's header (its data must land in op->local instead).
 */
static size_t tcp_rx_prefetch(const struct xport_tcp *xt)
{
	size_t space = xt->rcap - xt->rend;
	size_t buffered = xt->rend - xt->rpos;
	size_t sum = 0;
	unsigned int i = 0;

	if (xt->rx_state == TCP_RX_DATA) {
		if (!xt->rx_direct)
			sum += xt->rx_need - xt->rx_got;
		i = 1;
	}
	for (; i < xt->count && sum < space + buffered; i++) {
		const struct tcp_slot *s = &xt->ring[(xt->head + i) % xt->base.depth];

		sum += TCP_HDR_LEN;
		if (s->type == XPORT_READ)
			break;
		if (s->type != XPORT_WRITE)
			sum += TCP_ATOMIC_RESP_LEN;
	}
	sum = sum > buffered ? sum - buffered : 0;
	return MIN(sum, space);
}

/*
 * One non-blocking receive into the current READ destination and/or rbuf.
 * Returns bytes received, 0 if nothing was ready, -ECONNRESET on EOF, -errno.
 */
static ssize_t tcp_rx_recv(struct xport_tcp *xt)
{
	struct iovec iov[2];
	struct msghdr msg = { .msg_iov = iov };
	size_t direct = 0, pf;
	ssize_t n;

	if (xt->rpos) {
		memmove(xt->rbuf, xt->rbuf + xt->rpos, xt->rend - xt->rpos);
		xt->rend -= xt->rpos;
		xt->rpos = 0;
	}
	if (xt->rx_state == TCP_RX_DATA && xt->rx_direct) {
		direct = xt->rx_need - xt->rx_got;
		iov[msg.msg_iovlen].iov_base = xt->rx_dst + xt->rx_got;
		iov[msg.msg_iovlen].iov_len = direct;
		msg.msg_iovlen++;
	}
	pf = tcp_rx_prefetch(xt);
	if (pf) {
		iov[msg.msg_iovlen].iov_base = xt->rbuf + xt->rend;
		iov[msg.msg_iovlen].iov_len = pf;
		msg.msg_iovlen++;
	}
	if (!msg.msg_iovlen)
		return 0;
	do {
		n = recvmsg(xt->fd, &msg, MSG_DONTWAIT);
	} while (n < 0 && errno == EINTR);
	if (n < 0)
		return (errno == EAGAIN || errno == EWOULDBLOCK) ? 0 : -errno;
	if (n == 0)
		return -ECONNRESET;
	if (direct) {
		size_t d = MIN((size_t)n, direct);

		xt->rx_got += d;
		xt->rend += n - d;
	} else {
		xt->rend += n;
	}
	xt->last_progress_us = clock_now_us();
	return n;
}

/*
 * Receive and process every response that is ready, without blocking.
 * Returns 0, or -ENOTCONN if the connection is (now) dead.
 */
static int tcp_progress(struct xport_tcp *xt)
{
	while (!xt->dead && xt->count) {
		ssize_t n = tcp_rx_recv(xt);

		if (n < 0) {
			tcp_fail_all(xt, -EIO, "receive", (int)n);
			break;
		}
		if (tcp_rx_process(xt)) {
			tcp_fail_all(xt, -EIO, "response", -EPROTO);
			break;
		}
		if (n == 0)
			break;
	}
	return xt->dead ? -ENOTCONN : 0;
}

/*
 * Send every byte of iov (modified in place). While the socket is full, wait
 * for POLLOUT or POLLIN and drain responses, so a server blocked on sending
 * to us can go on reading. Fails (and kills the connection) after timeout_ms
 * without progress either way. Returns 0 or -errno.
 */
static int tcp_send_all(struct xport_tcp *xt, struct iovec *iov, int niov, int timeout_ms)
{
	int64_t last = clock_now_us();

	while (niov > 0) {
		struct msghdr msg = { .msg_iov = iov, .msg_iovlen = MIN(niov, IOV_MAX) };
		ssize_t n = sendmsg(xt->fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);

		if (n > 0) {
			last = clock_now_us();
			if (xt->count)
				xt->last_progress_us = last;
			while (n > 0) {
				if ((size_t)n >= iov->iov_len) {
					n -= iov->iov_len;
					iov++;
					niov--;
				} else {
					iov->iov_base = (uint8_t *)iov->iov_base + n;
					iov->iov_len -= n;
					n = 0;
				}
			}
			while (niov > 0 && iov->iov_len == 0) {
				iov++;
				niov--;
			}
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			struct pollfd pfd = { .fd = xt->fd, .events = POLLOUT };
			int64_t now = clock_now_us();
			int64_t deadline;

			if (xt->count) {
				pfd.events |= POLLIN;
				last = MAX(last, xt->last_progress_us);
			}
			deadline = last + (int64_t)timeout_ms * 1000;
			if (now >= deadline) {
				tcp_fail_all(xt, -ETIMEDOUT, "send", -ETIMEDOUT);
				return -ETIMEDOUT;
			}
			if (poll(&pfd, 1, net_ms_until(deadline)) < 0 && errno != EINTR) {
				int rc = -errno;

				tcp_fail_all(xt, -EIO, "poll", rc);
				return rc;
			}
			if ((pfd.revents & (POLLIN | POLLHUP | POLLERR)) && xt->count &&
			    tcp_progress(xt))
				return -ENOTCONN;
			continue;
		}
		n = n < 0 ? -errno : -EIO;
		tcp_fail_all(xt, -EIO, "send", (int)n);
		return n;
	}
	return 0;
}

/*
 * Blocking receive of exactly len bytes (control path: connect and call, with
 * nothing in flight), rbuf first. 0, -ECONNRESET on EOF, -ETIMEDOUT, -errno.
 */
static int tcp_recv_exact(struct xport_tcp *xt, void *buf, size_t len, int64_t deadline)
{
	size_t got = MIN(len, xt->rend - xt->rpos);
	struct iovec iov;

	if (got) /* buf may be NULL when len is 0 (xport_call without a response buffer) */
		memcpy(buf, xt->rbuf + xt->rpos, got);
	xt->rpos += got;
	if (xt->rpos == xt->rend)
		xt->rpos = xt->rend = 0;
	if (got == len)
		return 0;
	iov.iov_base = (uint8_t *)buf + got;
	iov.iov_len = len - got;
	return net_io_full(xt->fd, &iov, 1, false, deadline);
}

/* receive and drop len payload bytes */
static int tcp_recv_discard(struct xport_tcp *xt, size_t len, int64_t deadline)
{
	uint8_t scratch[4096];

	while (len) {
		size_t chunk = MIN(len, sizeof(scratch));
		int rc = tcp_recv_exact(xt, scratch, chunk, deadline);

		if (rc)
			return rc;
		len -= chunk;
	}
	return 0;
}

/*
 * One control request/response with nothing in flight: send hdr + req, read
 * the response header into *m (checked against type and id) and return its
 * status as 0/-errno. The payload is left for the caller. Transport failures
 * kill the connection.
 */
static int tcp_request(struct xport_tcp *xt, uint16_t type, const void *req, uint32_t req_len,
		       int timeout_ms, struct proto_msg *m)
{
	struct proto_hdr h;
	struct iovec iov[2];
	uint64_t id = xt->next_id++;
	int64_t deadline;
	int rc;

	rc = tcp_send_all(xt, iov, proto_request_iov(&h, iov, type, req, req_len, id), timeout_ms);
	if (rc)
		return rc;
	deadline = clock_now_us() + (int64_t)timeout_ms * 1000;
	rc = tcp_recv_exact(xt, &h, sizeof(h), deadline);
	if (rc) {
		tcp_fail_all(xt, rc == -ETIMEDOUT ? rc : -EIO, "response", rc);
		return rc;
	}
	rc = proto_hdr_unpack(&h, m);
	if (rc == 0 && (m->type != (type | PROTO_RESPONSE) || m->id != id))
		rc = -EPROTO;
	if (rc == 0 && m->status != PROTO_OK && m->len)
		rc = -EPROTO;
	if (rc) {
		tcp_fail_all(xt, -EIO, proto_type_str(type), rc);
		return rc;
	}
	return proto_status_to_errno(m->status);
}

static void tcp_free(struct xport_tcp *xt)
{
	free(xt->iov);
	free(xt->sbuf);
	free(xt->rbuf);
	free(xt->cq);
	free(xt->ring);
	free(xt);
}

static int tcp_connect(const struct xport_params *p, struct xport **out)
{
	struct xport_tcp *xt;
	struct proto_hello_pool_wire hello;
	struct proto_hello h;
	size_t hello_len;
	struct proto_msg m;
	unsigned int depth = p->queue_depth ? p->queue_depth : 128;
	void *payload;
	int rc;

	xt = calloc(1, sizeof(*xt));
	if (!xt)
		return -ENOMEM;
	xt->base.ops = &xport_tcp_ops;
	xt->base.poll_mode = p->poll_mode;
	xt->base.spin_us = p->spin_us;
	xt->base.depth = depth;
	xt->base.op_timeout_ms = p->op_timeout_ms > 0 ? p->op_timeout_ms : 10000;
	snprintf(xt->base.peer, sizeof(xt->base.peer), "tcp %s:%u", p->host, p->port);
	xt->fd = -1;
	xt->next_id = 1;
	xt->rcap = MAX(TCP_RBUF_MIN, depth * (TCP_HDR_LEN + TCP_ATOMIC_RESP_LEN) + TCP_HDR_LEN);
	xt->ring = calloc(depth, sizeof(*xt->ring));
	xt->cq = calloc(depth, sizeof(*xt->cq));
	xt->rbuf = malloc(xt->rcap);
	xt->sbuf = malloc((size_t)depth * TCP_FRAME_MAX);
	xt->iov = calloc(2 * (size_t)depth + 1, sizeof(*xt->iov));
	if (!xt->ring || !xt->cq || !xt->rbuf || !xt->sbuf || !xt->iov) {
		rc = -ENOMEM;
		goto err_free;
	}

	rc = net_connect(p->host, p->port, p->connect_timeout_ms);
	if (rc < 0) {
		g_debug("%s: net_connect: %s", xt->base.peer, g_strerror(-rc));
		goto err_free;
	}
	xt->fd = rc;
	rc = net_set_nonblock(xt->fd, true);
	if (rc) {
		g_debug("%s: fcntl O_NONBLOCK: %s", xt->base.peer, g_strerror(-rc));
		goto err_close;
	}

	xport_params_hello(p, &h);
	hello_len = proto_hello_pack(&hello, &h);
	rc = tcp_request(xt, PROTO_HELLO, &hello, (uint32_t)hello_len, p->connect_timeout_ms, &m);
	if (rc) {
		g_debug("%s: hello: %s", xt->base.peer, g_strerror(-rc));
		goto err_close;
	}
	payload = malloc(m.len ? m.len : 1);
	if (!payload) {
		rc = -ENOMEM;
		goto err_close;
	}
	rc = tcp_recv_exact(xt, payload, m.len,
			    clock_now_us() + (int64_t)p->connect_timeout_ms * 1000);
	if (rc == 0)
		rc = proto_pool_unpack(payload, m.len, &xt->base.pool);
	free(payload);
	if (rc) {
		g_debug("%s: pool descriptor: %s", xt->base.peer, g_strerror(-rc));
		goto err_close;
	}
	g_debug("%s: connected, pool of %" PRIu64 " bytes in %u regions",
		xt->base.peer, xt->base.pool.size, xt->base.pool.nregions);
	*out = &xt->base;
	return 0;

err_close:
	close(xt->fd);
err_free:
	tcp_free(xt);
	return rc;
}

static void tcp_close(struct xport *x)
{
	struct xport_tcp *xt = container_of(x, struct xport_tcp, base);

	if (close(xt->fd) < 0)
		g_debug("%s: close: %s", x->peer, g_strerror(errno));
	while (xt->mrs) {
		struct tcp_mr *mr = xt->mrs;

		xt->mrs = mr->next;
		free(mr);
	}
	proto_pool_clear(&x->pool);
	tcp_free(xt);
}

static int tcp_reg_mr(struct xport *x, void *addr, size_t len, struct xport_mr **out)
{
	struct xport_tcp *xt = container_of(x, struct xport_tcp, base);
	struct tcp_mr *mr;

	mr = calloc(1, sizeof(*mr));
	if (!mr)
		return -ENOMEM;
	mr->base.addr = addr;
	mr->base.len = len;
	mr->base.lkey = ++xt->next_lkey;
	mr->owner = xt;
	mr->next = xt->mrs;
	if (xt->mrs)
		xt->mrs->prev = mr;
	xt->mrs = mr;
	*out = &mr->base;
	return 0;
}

static void tcp_dereg_mr(struct xport *x, struct xport_mr *xmr)
{
	struct xport_tcp *xt = container_of(x, struct xport_tcp, base);
	struct tcp_mr *mr;

	if (!xmr)
		return;
	mr = container_of(xmr, struct tcp_mr, base);
	if (mr->owner != xt) {
		g_warning("%s: dereg_mr of a region registered elsewhere", x->peer);
		return;
	}
	LIST_UNLINK(xt->mrs, mr, prev, next);
	free(mr);
}

/*
 * -EINVAL unless op's memory region was registered on this connection.
 * xport_post() has already checked the op's shape and that its local bytes
 * lie inside op->mr; the ops table is only reached through it.
 */
static int tcp_op_check(const struct xport_tcp *xt, const struct xport_op *op)
{
	const struct tcp_mr *mr = container_of(op->mr, struct tcp_mr, base);

	return mr->owner == xt ? 0 : -EINVAL;
}

/* write op's request frame (header + body, not WRITE data) at f; returns its length */
static size_t tcp_pack_frame(const struct xport_op *op, uint64_t id, uint8_t *f)
{
	struct proto_hdr h;
	size_t body;

	if (op->type == XPORT_READ || op->type == XPORT_WRITE) {
		struct proto_rw rw = { .addr = op->raddr, .rkey = op->rkey, .len = op->len };
		struct proto_rw_wire w;

		proto_rw_pack(&w, &rw);
		body = sizeof(w);
		memcpy(f + TCP_HDR_LEN, &w, sizeof(w));
		proto_hdr_pack(&h, tcp_proto_type(op->type), PROTO_OK,
			       body + (op->type == XPORT_WRITE ? op->len : 0), id);
	} else {
		struct proto_atomic a = {
			.addr = op->raddr,
			.rkey = op->rkey,
			.compare_add = op->compare_add,
			.swap = op->type == XPORT_CAS ? op->swap : 0,
		};
		struct proto_atomic_wire w;

		proto_atomic_pack(&w, &a);
		body = sizeof(w);
		memcpy(f + TCP_HDR_LEN, &w, sizeof(w));
		proto_hdr_pack(&h, tcp_proto_type(op->type), PROTO_OK, body, id);
	}
	memcpy(f, &h, sizeof(h));
	return TCP_HDR_LEN + body;
}

static int tcp_post(struct xport *x, const struct xport_op *ops, unsigned int n)
{
	struct xport_tcp *xt = container_of(x, struct xport_tcp, base);
	uint8_t *f = xt->sbuf;
	int niov = 0;
	unsigned int i;
	int rc;

	if (xt->dead)
		return -ENOTCONN;
	for (i = 0; i < n; i++) {
		rc = tcp_op_check(xt, &ops[i]);
		if (rc)
			return rc;
	}
	if (n > x->depth - xt->count - xt->cq_count) {
		/* reaping finished unsignalled ops may free enough slots */
		if (tcp_progress(xt))
			return -ENOTCONN;
		if (n > x->depth - xt->count - xt->cq_count)
			return -EAGAIN;
	}
	if (xt->count == 0)
		xt->last_progress_us = clock_now_us();

	for (i = 0; i < n; i++) {
		const struct xport_op *op = &ops[i];
		struct tcp_slot *s = &xt->ring[(xt->head + xt->count) % x->depth];
		struct iovec *last;
		size_t flen;

		s->wr_id = op->wr_id;
		s->id = xt->next_id++;
		s->local = op->local;
		s->len = op->len;
		s->type = op->type;
		s->signaled = !(op->flags & XPORT_OP_UNSIGNALED);
		xt->count++;

		flen = tcp_pack_frame(op, s->id, f);
		last = niov ? &xt->iov[niov - 1] : NULL;
		if (last && (uint8_t *)last->iov_base + last->iov_len == f) {
			last->iov_len += flen;
		} else {
			xt->iov[niov].iov_base = f;
			xt->iov[niov].iov_len = flen;
			niov++;
		}
		f += flen;
		if (op->type == XPORT_WRITE) {
			xt->iov[niov].iov_base = op->local;
			xt->iov[niov].iov_len = op->len;
			niov++;
		}
	}
	/*
	 * The ops are committed: a failure while sending has already failed
	 * them (and every other op in flight), and poll() reports that.
	 */
	tcp_send_all(xt, xt->iov, niov, x->op_timeout_ms);
	return 0;
}

static int tcp_poll(struct xport *x, struct xport_cqe *cqes, unsigned int max, int timeout_ms)
{
	struct xport_tcp *xt = container_of(x, struct xport_tcp, base);
	int64_t start = clock_now_us();
	int64_t deadline = timeout_ms >= 0 ? start + (int64_t)timeout_ms * 1000 : INT64_MAX;
	int64_t op_timeout_us = (int64_t)x->op_timeout_ms * 1000;

	for (;;) {
		struct pollfd pfd = { .fd = xt->fd, .events = POLLIN };
		int64_t now, wake;

		if (xt->cq_count < max)
			tcp_progress(xt);
		if (xt->cq_count)
			return tcp_cq_pop(xt, cqes, max);
		if (!xt->count)
			return xt->dead ? -ENOTCONN : 0;

		now = clock_now_us();
		if (now - xt->last_progress_us >= op_timeout_us) {
			tcp_fail_all(xt, -ETIMEDOUT, "waiting for responses", -ETIMEDOUT);
			continue;
		}
		if (now >= deadline)
			return 0;
		if (x->poll_mode == XPORT_POLL_BUSY ||
		    (x->poll_mode == XPORT_POLL_HYBRID && now - start < (int64_t)x->spin_us))
			continue;
		wake = MIN(deadline, xt->last_progress_us + op_timeout_us);
		if (poll(&pfd, 1, net_ms_until(wake)) < 0 && errno != EINTR)
			tcp_fail_all(xt, -EIO, "poll", -errno);
	}
}

static unsigned int tcp_inflight(const struct xport *x)
{
	const struct xport_tcp *xt = container_of(x, const struct xport_tcp, base);

	return xt->count + xt->cq_count;
}

static int tcp_call(struct xport *x, uint16_t type, const void *req, uint32_t req_len, void *resp,
		    uint32_t resp_cap, uint32_t *resp_len)
{
	struct xport_tcp *xt = container_of(x, struct xport_tcp, base);
	struct proto_msg m;
	int64_t deadline;
	uint32_t copy;
	int rc;

	if (xt->dead)
		return -ENOTCONN;
	if (xt->count || xt->cq_count)
		return -EBUSY;
	*resp_len = 0;
	rc = tcp_request(xt, type, req, req_len, x->op_timeout_ms, &m);
	if (rc)
		return rc;
	*resp_len = m.len;
	copy = MIN(m.len, resp_cap);
	deadline = clock_now_us() + (int64_t)x->op_timeout_ms * 1000;
	rc = tcp_recv_exact(xt, resp, copy, deadline);
	if (rc == 0)
		rc = tcp_recv_discard(xt, m.len - copy, deadline);
	if (rc) {
		tcp_fail_all(xt, rc == -ETIMEDOUT ? rc : -EIO, "response payload", rc);
		return rc;
	}
	return m.len > resp_cap ? -EMSGSIZE : 0;
}

const struct xport_ops xport_tcp_ops = {
	.name = "tcp",
	.connect = tcp_connect,
	.close = tcp_close,
	.reg_mr = tcp_reg_mr,
	.dereg_mr = tcp_dereg_mr,
	.post = tcp_post,
	.poll = tcp_poll,
	.inflight = tcp_inflight,
	.call = tcp_call,
};
