/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * tcp_server.c - the memserver's TCP side: the NIC emulation that TCP clients
 * (common/xport_tcp.c) do their one-sided READ/WRITE/CAS/FETCH_ADD against.
 *
 * Threads. One acceptor thread polls the listening socket, a stop eventfd and
 * a reap eventfd; each accepted client gets its own connection thread. A
 * connection thread that finishes marks itself done and pokes the reap
 * eventfd; the acceptor joins it and closes its socket (the socket is closed
 * only after the join, so shutdown() at stop time can never hit a reused fd).
 * At stop the acceptor is woken through the stop eventfd and joined, every
 * remaining socket is shut down (which unblocks its thread), and every
 * connection thread is joined. srv->lock protects the connection list and
 * each conn->done; everything else in a tcp_conn belongs to its thread.
 *
 * Data path. Requests are processed strictly in order per connection, the way
 * an RC QP executes them. Input goes through a per-connection buffer (one
 * recvmsg() usually brings in many pipelined headers); WRITE data already in the
 * buffer is copied to the pool, the rest is received straight into pool
 * memory with one recvmsg() (whose second vector refills the buffer with what
 * follows). Responses are queued as an iovec list (headers and small payloads
 * in a per-connection output buffer, READ data pointing straight into pool
 * memory) and written with one sendmsg() when the input runs dry, when the
 * list fills, or before an operation that modifies pool memory while queued
 * READ data still points at it (so a READ never sees a later WRITE).
 *
 * Pools. A HELLO (or QP_EXCHANGE) binds the connection to one pool (the
 * default pool, or the named pool it selects, created on demand), or with
 * PROTO_HELLO_CONTROL to none: a control session, for POOL_LIST,
 * POOL_CREATE, POOL_DELETE, STATS and PING. The connection holds a reference
 * to its pool (registry.h) until it ends, and every data operation of it
 * goes through pool_check() on that pool alone: another pool's key is
 * PROTO_E_KEY, exactly as a wrong key. A refused selection closes a
 * connection that was not bound yet (so an unauthenticated peer never has
 * more than one small response queued); a bound connection cannot switch
 * pools (PROTO_E_STATE).
 *
 * Robustness. Every access goes through pool_check(); nothing here computes a
 * pool pointer itself. A malformed message is answered with an error status
 * or by closing the connection (after sending the error, the connection is
 * drained briefly so the peer gets to read it instead of a reset); it is
 * counted in stats.bad_requests and logged with g_message (expected events,
 * never g_warning). Other clients are unaffected.
 *
 * Unauthenticated peers. Until a HELLO (or QP_EXCHANGE) with a good token,
 * a connection may only authenticate: anything else, including an unknown
 * message type, is answered with an error and the connection closed, so an
 * unauthenticated peer never has more than one small response queued and the
 * thread never blocks writing to it. Every read before authentication waits
 * in poll() against a deadline counted from accept (hello_timeout_ms), so a
 * peer that connects and stays silent, or trickles bytes, is closed in
 * bounded time and cannot hold a thread and a connection slot for ever.
 *
 * Fencing. HELLO (and QP_EXCHANGE) carry the client id; it is published in
 * conn->client_id (with the pool in conn->pool) and checked against the
 * pool's fenced set under srv->lock (see fence.c for why that order leaves no
 * gap). A FENCE reaches the connections of the fencer's pool only; a forced
 * POOL_DELETE revokes every connection of that pool and shuts its socket. Every pool modification (a
 * WRITE's payload landing in the pool, a CAS, a FETCH_ADD) happens inside
 * conn->apply_lock after checking conn->revoked; the revoke hook sets
 * revoked under that lock. So once the hook returned, any write of the
 * connection has either landed completely or will never start, and the FENCE
 * reply can go out. A WRITE whose client stalls mid-payload would hold
 * apply_lock indefinitely: after TCP_REVOKE_WAIT_MS the hook shuts the socket
 * down, which ends that receive (whatever of the payload already arrived has
 * landed, like a write torn by a crash; nothing lands after). A revoked
 * connection's next request is answered PROTO_E_FENCED and the connection is
 * closed. Lock order: srv->lock -> conn->apply_lock; srv->lock -> the
 * registry's and the fence lock (memserver_admit).
 */
#define G_LOG_DOMAIN "rmemfs-tcp-server"

#include "tcp_server.h"

#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <glib.h>
#include <inttypes.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "memserver.h"
#include "net.h"
#include "pool.h"
#include "proto.h"

#define TCP_IN_CAP (128U << 10) /* holds a header plus the largest control payload */
#define TCP_OUT_CAP (128U << 10) /* headers and small payloads of queued responses */
#define TCP_IOV_MAX 64 /* queued response vectors before a forced writev */
#define TCP_PENDING_MAX (2U << 20) /* queued response bytes before a forced writev */
#define TCP_MAX_CONNS 4096
#define TCP_THREAD_STACK (512U << 10)
#define TCP_LINGER_MS 500 /* drain a refused peer this long so it reads our error */
#define TCP_LINGER_BYTES (64U << 20)
#define TCP_BACKLOG 512
#define TCP_REVOKE_WAIT_MS 100 /* a revoked write stalled mid-payload this long is cut off */

G_STATIC_ASSERT(TCP_IN_CAP >= sizeof(struct proto_hdr) + PROTO_MAX_CTRL);
G_STATIC_ASSERT(TCP_OUT_CAP >= sizeof(struct proto_hdr) + PROTO_MAX_CTRL);

struct tcp_server;

struct tcp_conn {
	struct tcp_server *srv;
	struct memserver *ms;
	int fd;
	pthread_t thread;
	char peer[64]; /* "127.0.0.1:40000" for messages */
	struct tcp_conn *next; /* srv->conns; protected by srv->lock */
	bool done; /* the thread has finished; protected by srv->lock */
	uint64_t client_id; /* from HELLO; written under srv->lock by the thread */
	struct registry_pool *pool; /* bound pool (a reference); written under srv->lock */
	pthread_mutex_t apply_lock; /* held while a request modifies pool memory */
	bool revoked; /* fenced: set under apply_lock, read atomically anywhere */

	/* the rest belongs to the connection thread */
	uint8_t *in; /* unparsed input is in[in_head, in_tail) */
	size_t in_head;
	size_t in_tail;
	uint8_t *out; /* response bytes out[0, out_used) referenced by iov */
	size_t out_used;
	struct iovec iov[TCP_IOV_MAX]; /* queued response */
	int iovcnt;
	size_t pending; /* bytes queued in iov */
	bool pool_queued; /* some iov points into pool memory */
	bool authed; /* bound to a pool, or a control session */
	bool control; /* a control session: no pool */
	struct tenant_who who; /* who the token said the client is */
	gint64 hello_deadline; /* monotonic us: close if still !authed by then */
	void *oob_handle; /* from ms->oob_accept; released when the connection ends */
};

struct tcp_server {
	struct memserver *ms;
	int listen_fd;
	int stop_fd; /* eventfd: the acceptor returns */
	int reap_fd; /* eventfd: a connection thread finished */
	uint16_t port;
	int hello_timeout_ms; /* set before run, read-only afterwards */
	unsigned int spin_us; /* set before run: poll a quiet socket this long before blocking */
	pthread_t acceptor;
	bool acceptor_running;
	bool revoke_set; /* our hook is installed in ms */

	pthread_mutex_t lock; /* protects conns, nconns and every conn->done */
	struct tcp_conn *conns;
	unsigned int nconns;
};

/* ---- output: queue responses, write them in batches ---- */

static int tcp_flush(struct tcp_conn *c)
{
	int rc = 0;

	if (c->iovcnt)
		rc = net_writev_full(c->fd, c->iov, c->iovcnt);
	c->iovcnt = 0;
	c->out_used = 0;
	c->pending = 0;
	c->pool_queued = false;
	return rc;
}

/* room for n bytes in the output buffer and two more vectors, flushing if needed */
static int tcp_out_room(struct tcp_conn *c, size_t n)
{
	if (c->out_used + n > TCP_OUT_CAP || c->iovcnt + 2 > TCP_IOV_MAX ||
	    c->pending >= TCP_PENDING_MAX)
		return tcp_flush(c);
	return 0;
}

/* queue n bytes that were just written at out + out_used */
static void tcp_out_commit(struct tcp_conn *c, size_t n)
{
	uint8_t *p = c->out + c->out_used;
	struct iovec *last = c->iovcnt ? &c->iov[c->iovcnt - 1] : NULL;

	if (last && (uint8_t *)last->iov_base + last->iov_len == p)
		last->iov_len += n;
	else
		c->iov[c->iovcnt++] = (struct iovec){ .iov_base = p, .iov_len = n };
	c->out_used += n;
	c->pending += n;
}

/*
 * Queue a response: header, then @len bytes of @payload copied into the
 * output buffer (payload NULL: the caller queues the bytes itself).
 */
static int tcp_respond(struct tcp_conn *c, uint16_t type, uint32_t status, uint64_t id,
		       const void *payload, uint32_t len)
{
	size_t n = sizeof(struct proto_hdr) + (payload ? len : 0);
	struct proto_hdr hdr;
	int rc;

	rc = tcp_out_room(c, n);
	if (rc)
		return rc;
	proto_hdr_pack(&hdr, type | PROTO_RESPONSE, status, len, id);
	memcpy(c->out + c->out_used, &hdr, sizeof(hdr));
	if (payload)
		memcpy(c->out + c->out_used + sizeof(hdr), payload, len);
	tcp_out_commit(c, n);
	return 0;
}

static int tcp_respond_status(struct tcp_conn *c, uint16_t type, uint32_t status, uint64_t id)
{
	return tcp_respond(c, type, status, id, NULL, 0);
}

/* ---- input: buffered reads; blocking only after the queued output is out ---- */

/*
 * Before authentication: wait until the socket is readable or the HELLO
 * deadline passes. 0, -ETIMEDOUT, or -errno from poll().
 */
static int tcp_wait_hello(struct tcp_conn *c)
{
	struct pollfd pfd = { .fd = c->fd, .events = POLLIN };

	for (;;) {
		gint64 left_ms = (c->hello_deadline - clock_now_us() + 999) / 1000;
		int n;

		if (left_ms <= 0)
			return -ETIMEDOUT;
		n = poll(&pfd, 1, (int)MIN(left_ms, (gint64)INT_MAX));
		if (n > 0)
			return 0;
		if (n < 0 && errno != EINTR)
			return -errno;
	}
}

/*
 * An authenticated client that just went quiet usually sends again within
 * microseconds (a QD1 reader's next request): poll the socket for up to
 * spin_us before sleeping in recvmsg, so the reply to that request does not
 * wait for this thread to be woken. Bytes read, 0 on EOF, -EAGAIN when
 * nothing came, -errno.
 */
static ssize_t tcp_spin_recv(struct tcp_conn *c, struct msghdr *msg)
{
	gint64 until = clock_now_us() + c->srv->spin_us;
	unsigned int i = 0;
	ssize_t n;

	do {
		n = recvmsg(c->fd, msg, MSG_DONTWAIT);
		if (n >= 0)
			return n;
		if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
			return -errno;
	} while ((++i & 15) || clock_now_us() < until);
	return -EAGAIN;
}

/*
 * recvmsg() on the socket. While responses are queued it first tries without
 * blocking; only when nothing is there does it write the queue out (the
 * client may be waiting for it) and block (before authentication, no longer
 * than the HELLO deadline: -ETIMEDOUT). Returns bytes read, 0 on EOF.
 */
static ssize_t tcp_readv(struct tcp_conn *c, struct iovec *iov, int cnt)
{
	struct msghdr msg = { .msg_iov = iov, .msg_iovlen = cnt };
	ssize_t n;
	int rc;

	if (c->iovcnt) {
		do
			n = recvmsg(c->fd, &msg, MSG_DONTWAIT);
		while (n < 0 && errno == EINTR);
		if (n >= 0)
			return n;
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			return -errno;
		rc = tcp_flush(c);
		if (rc)
			return rc;
	}
	if (!c->authed) {
		rc = tcp_wait_hello(c);
		if (rc)
			return rc;
	} else if (c->srv->spin_us) {
		n = tcp_spin_recv(c, &msg);
		if (n != -EAGAIN)
			return n;
	}
	do
		n = recvmsg(c->fd, &msg, 0);
	while (n < 0 && errno == EINTR);
	return n < 0 ? -errno : n;
}

/*
 * Make n bytes available at in + in_head. 0; -ENODATA on EOF before the
 * first byte of a message (a clean close); -EBADMSG on EOF mid-message.
 */
static int tcp_need(struct tcp_conn *c, size_t n, bool at_boundary)
{
	while (c->in_tail - c->in_head < n) {
		struct iovec v;
		ssize_t got;

		if (c->in_head == c->in_tail) {
			c->in_head = 0;
			c->in_tail = 0;
		} else if (n > TCP_IN_CAP - c->in_head) {
			memmove(c->in, c->in + c->in_head, c->in_tail - c->in_head);
			c->in_tail -= c->in_head;
			c->in_head = 0;
		}
		v.iov_base = c->in + c->in_tail;
		v.iov_len = TCP_IN_CAP - c->in_tail;
		got = tcp_readv(c, &v, 1);
		if (got < 0)
			return got;
		if (got == 0)
			return at_boundary && c->in_tail == c->in_head ? -ENODATA : -EBADMSG;
		c->in_tail += got;
	}
	return 0;
}

/* read and drop n payload bytes */
static int tcp_discard(struct tcp_conn *c, uint64_t n)
{
	while (n) {
		size_t have = c->in_tail - c->in_head;
		size_t take = MIN((uint64_t)have, n);
		int rc;

		c->in_head += take;
		n -= take;
		if (!n)
			break;
		rc = tcp_need(c, 1, false);
		if (rc)
			return rc;
	}
	return 0;
}

/* receive n bytes into pool memory at dst: first what is buffered, then straight from the socket */
static int tcp_recv_into(struct tcp_conn *c, uint8_t *dst, size_t n)
{
	size_t have = MIN(c->in_tail - c->in_head, n);

	memcpy(dst, c->in + c->in_head, have);
	c->in_head += have;
	dst += have;
	n -= have;
	if (!n)
		return 0;
	/* the buffer is empty now: refill it with whatever follows the data */
	c->in_head = 0;
	c->in_tail = 0;
	while (n) {
		struct iovec v[2] = {
			{ .iov_base = dst, .iov_len = n },
			{ .iov_base = c->in, .iov_len = TCP_IN_CAP },
		};
		ssize_t got = tcp_readv(c, v, 2);

		if (got < 0)
			return got;
		if (got == 0)
			return -EBADMSG; /* EOF in the middle of the data */
		if ((size_t)got <= n) {
			dst += got;
			n -= got;
		} else {
			c->in_tail = got - n;
			n = 0;
		}
	}
	return 0;
}

/* ---- request handlers: 0 to go on, -EPROTO to close after the response, -errno to close ---- */

static int tcp_bad(struct tcp_conn *c)
{
	memserver_count(&c->ms->stats.bad_requests, 1);
	return 0;
}

/* an error answered with a status; the payload was consumed; the connection goes on */
static int tcp_refuse(struct tcp_conn *c, const struct proto_msg *m, uint32_t status)
{
	g_debug("%s: %s id %" PRIu64 " refused: %s", c->peer, proto_type_str(m->type), m->id,
		proto_status_str(status));
	tcp_bad(c);
	return tcp_respond_status(c, m->type, status, m->id);
}

/* an error after which the connection is closed */
static int tcp_refuse_close(struct tcp_conn *c, const struct proto_msg *m, uint32_t status,
			    const char *why)
{
	int rc;

	g_message("%s: %s (%s id %" PRIu64 "), closing the connection", c->peer, why,
		  proto_type_str(m->type), m->id);
	tcp_bad(c);
	rc = tcp_respond_status(c, m->type, status, m->id);
	return rc ? rc : -EPROTO;
}

static bool tcp_revoked(struct tcp_conn *c)
{
	return __atomic_load_n(&c->revoked, __ATOMIC_ACQUIRE);
}

/* a request of a fenced client: PROTO_E_FENCED, then close */
static int tcp_fenced(struct tcp_conn *c, const struct proto_msg *m)
{
	return tcp_refuse_close(c, m, PROTO_E_FENCED, "client fenced (its lease was taken over)");
}

/*
 * Enter the section that modifies pool memory: -EKEYREVOKED (lock not held)
 * once the connection was revoked, else 0 with apply_lock held until
 * tcp_apply_end.
 */
static int tcp_apply_begin(struct tcp_conn *c)
{
	pthread_mutex_lock(&c->apply_lock);
	if (c->revoked) {
		pthread_mutex_unlock(&c->apply_lock);
		return -EKEYREVOKED;
	}
	return 0;
}

static void tcp_apply_end(struct tcp_conn *c)
{
	pthread_mutex_unlock(&c->apply_lock);
}

/*
 * Publish the pool and client id the peer authenticated with, unless the id
 * is fenced on that pool (then PROTO_E_FENCED and close) or the pool was
 * deleted meanwhile (PROTO_E_NOPOOL and close). Under srv->lock: see
 * fence.c. On refusal the connection's reference to @p is dropped here.
 */
static int tcp_admit(struct tcp_conn *c, const struct proto_msg *m, struct registry_pool *p,
		     uint64_t client_id)
{
	int rc;

	pthread_mutex_lock(&c->srv->lock);
	rc = memserver_admit(c->ms, p, client_id);
	if (!rc) {
		c->client_id = client_id;
		c->pool = p;
	}
	pthread_mutex_unlock(&c->srv->lock);
	if (!rc) {
		c->authed = true;
		return 0;
	}
	registry_close(&c->ms->reg, p, client_id);
	if (rc == -ENOENT)
		return tcp_refuse_close(c, m, PROTO_E_NOPOOL, "pool deleted while connecting");
	g_message("%s: client %016" PRIx64 " is fenced, refused", c->peer, client_id);
	return tcp_fenced(c, m);
}

/* check a token; who it is into c->who; on failure answer PROTO_E_AUTH and close */
static int tcp_auth(struct tcp_conn *c, const struct proto_msg *m, const uint8_t *hash)
{
	int rc;

	if (tenant_identify(&c->ms->tenants, hash, &c->who) == 0) {
		if (!c->authed)
			g_debug("%s: authenticated as %s%s", c->peer,
				c->who.admin ? "the admin" : "tenant ", c->who.name);
		return 0;
	}
	g_message("%s: wrong or missing token, refused", c->peer);
	memserver_count(&c->ms->stats.auth_failures, 1);
	c->authed = false;
	rc = tcp_respond_status(c, m->type, PROTO_E_AUTH, m->id);
	return rc ? rc : -EPROTO;
}

/*
 * The token, then the pool: an unbound connection is bound to the pool @h
 * selects (tcp_admit); a bound one may only name its own pool again. 0 (bound),
 * 1 (refused and answered, the connection goes on), or what refusing returned.
 */
static int tcp_bind(struct tcp_conn *c, const struct proto_msg *m, const struct proto_hello *h)
{
	struct registry_pool *p;
	uint32_t st;
	int rc = tcp_auth(c, m, h->token_hash);

	if (rc)
		return rc;
	if (c->control || c->pool) {
		if (!c->control && !h->control && !strcmp(h->pool, c->pool->name))
			return 0;
		g_message("%s: %s on a connection already bound, refused", c->peer,
			  proto_type_str(m->type));
		rc = tcp_refuse(c, m, PROTO_E_STATE);
		return rc ? rc : 1;
	}
	st = registry_open(&c->ms->reg, &c->who, h->pool, h->create_size, h->client_id, &p);
	if (st != PROTO_OK) {
		char why[96];

		snprintf(why, sizeof(why), "pool '%s' refused: %s", h->pool, proto_status_str(st));
		return tcp_refuse_close(c, m, st, why);
	}
	return tcp_admit(c, m, p, h->client_id);
}

static int tcp_on_hello(struct tcp_conn *c, const struct proto_msg *m, const void *p)
{
	struct proto_hello h;
	int rc;

	if (proto_hello_unpack(p, m->len, &h))
		return tcp_refuse_close(c, m, PROTO_E_MALFORMED, "malformed HELLO");
	if (h.control) {
		rc = tcp_auth(c, m, h.token_hash);
		if (rc)
			return rc;
		if (c->pool)
			return tcp_refuse(c, m, PROTO_E_STATE);
		c->control = true;
		c->authed = true;
		return tcp_respond_status(c, m->type, PROTO_OK, m->id);
	}
	rc = tcp_bind(c, m, &h);
	if (rc)
		return rc < 0 ? rc : 0;
	return tcp_respond(c, m->type, PROTO_OK, m->id, c->pool->tcp_wire,
			   (uint32_t)c->pool->tcp_wire_len);
}

static int tcp_on_qp_exchange(struct tcp_conn *c, const struct proto_msg *m, const uint8_t *p)
{
	struct memserver *ms = c->ms;
	struct proto_hello h;
	struct proto_qp_info client, server;
	struct proto_qp_info_wire qw;
	struct proto_pool rpool;
	struct proto_hdr hdr;
	void *handle = NULL;
	ssize_t packed = 0;
	uint8_t *o = NULL;
	size_t n;
	int rc;

	if (proto_qp_exchange_unpack(p, m->len, &h, &client))
		return tcp_refuse_close(c, m, PROTO_E_MALFORMED, "malformed QP_EXCHANGE");
	rc = tcp_bind(c, m, &h);
	if (rc)
		return rc < 0 ? rc : 0;
	if (!ms->oob_accept)
		return tcp_refuse(c, m, PROTO_E_UNSUPPORTED);
	if (c->oob_handle)
		return tcp_refuse(c, m, PROTO_E_STATE);

	memset(&server, 0, sizeof(server));
	memset(&rpool, 0, sizeof(rpool));
	rc = ms->oob_accept(ms->oob_ctx, c->pool, h.client_id, &client, &server, &rpool, &handle);
	if (rc) {
		g_message("%s: out-of-band QP setup failed: %s", c->peer, g_strerror(-rc));
		proto_pool_clear(&rpool);
		return tcp_refuse(c, m, rc == -ENOENT ? PROTO_E_NOPOOL : proto_errno_to_status(rc));
	}
	c->oob_handle = handle;
	proto_qp_info_pack(&qw, &server);
	n = sizeof(hdr) + sizeof(qw) + proto_pool_wire_size(&rpool);
	rc = n <= TCP_OUT_CAP ? tcp_out_room(c, n) : -EMSGSIZE;
	if (!rc) {
		o = c->out + c->out_used;
		packed = proto_pool_pack(&rpool, o + sizeof(hdr) + sizeof(qw),
					 n - sizeof(hdr) - sizeof(qw));
		rc = packed < 0 ? (int)packed : 0;
	}
	proto_pool_clear(&rpool);
	if (rc == -EMSGSIZE)
		return tcp_refuse(c, m, PROTO_E_INTERNAL);
	if (rc)
		return rc;
	proto_hdr_pack(&hdr, m->type | PROTO_RESPONSE, PROTO_OK, sizeof(qw) + packed, m->id);
	memcpy(o, &hdr, sizeof(hdr));
	memcpy(o + sizeof(hdr), &qw, sizeof(qw));
	tcp_out_commit(c, sizeof(hdr) + sizeof(qw) + packed);
	memserver_count(&ms->stats.rdma_connections, 1);
	g_debug("%s: out-of-band QP %u up", c->peer, server.qpn);
	return 0;
}

static int tcp_on_read(struct tcp_conn *c, const struct proto_msg *m, const void *p)
{
	struct proto_hdr hdr;
	struct proto_rw rw;
	uint32_t st;
	void *ptr;
	int rc;

	if (m->len != sizeof(struct proto_rw_wire) || proto_rw_unpack(p, m->len, &rw))
		return tcp_refuse(c, m, PROTO_E_MALFORMED);
	if (rw.len > PROTO_MAX_IO)
		return tcp_refuse(c, m, PROTO_E_TOOBIG);
	st = pool_check(c->pool->pool, rw.addr, rw.rkey, rw.len, false, &ptr);
	if (st != PROTO_OK)
		return tcp_refuse(c, m, st);

	rc = tcp_out_room(c, sizeof(hdr));
	if (rc)
		return rc;
	proto_hdr_pack(&hdr, m->type | PROTO_RESPONSE, PROTO_OK, rw.len, m->id);
	memcpy(c->out + c->out_used, &hdr, sizeof(hdr));
	tcp_out_commit(c, sizeof(hdr));
	if (rw.len) {
		c->iov[c->iovcnt++] = (struct iovec){ .iov_base = ptr, .iov_len = rw.len };
		c->pending += rw.len;
		c->pool_queued = true;
	}
	memserver_count(&c->ms->stats.reads, 1);
	memserver_count(&c->ms->stats.bytes_read, rw.len);
	return 0;
}

/* WRITE: the header is consumed; its payload (rw + data) is still on the wire or in the buffer */
static int tcp_on_write(struct tcp_conn *c, const struct proto_msg *m)
{
	const size_t rw_len = sizeof(struct proto_rw_wire);
	struct proto_rw rw;
	uint32_t st, data;
	void *ptr;
	int rc;

	if (m->len < rw_len) {
		rc = tcp_discard(c, m->len);
		return rc ? rc : tcp_refuse(c, m, PROTO_E_MALFORMED);
	}
	rc = tcp_need(c, rw_len, false);
	if (rc)
		return rc;
	rc = proto_rw_unpack(c->in + c->in_head, rw_len, &rw);
	c->in_head += rw_len;
	data = m->len - rw_len;
	if (rc || rw.len != data) {
		rc = tcp_discard(c, data);
		return rc ? rc : tcp_refuse(c, m, PROTO_E_MALFORMED);
	}
	st = pool_check(c->pool->pool, rw.addr, rw.rkey, rw.len, false, &ptr);
	if (st != PROTO_OK) {
		rc = tcp_discard(c, data);
		return rc ? rc : tcp_refuse(c, m, st);
	}
	/* queued READ data may point at what this WRITE overwrites: send it first */
	if (c->pool_queued) {
		rc = tcp_flush(c);
		if (rc)
			return rc;
	}
	if (tcp_apply_begin(c)) {
		rc = tcp_discard(c, data);
		return rc ? rc : tcp_fenced(c, m);
	}
	rc = tcp_recv_into(c, ptr, data);
	tcp_apply_end(c);
	if (rc)
		return rc;
	memserver_count(&c->ms->stats.writes, 1);
	memserver_count(&c->ms->stats.bytes_written, data);
	return tcp_respond_status(c, m->type, PROTO_OK, m->id);
}

static int tcp_on_atomic(struct tcp_conn *c, const struct proto_msg *m, const void *p)
{
	struct proto_atomic_resp_wire resp;
	struct proto_atomic a;
	uint64_t *word, old;
	uint32_t st;
	void *ptr;
	int rc;

	if (m->len != sizeof(struct proto_atomic_wire) || proto_atomic_unpack(p, m->len, &a))
		return tcp_refuse(c, m, PROTO_E_MALFORMED);
	st = pool_check(c->pool->pool, a.addr, a.rkey, sizeof(uint64_t), true, &ptr);
	if (st != PROTO_OK)
		return tcp_refuse(c, m, st);
	if (c->pool_queued) {
		rc = tcp_flush(c);
		if (rc)
			return rc;
	}
	if (tcp_apply_begin(c))
		return tcp_fenced(c, m);
	word = ptr;
	if (m->type == PROTO_CAS) {
		old = a.compare_add;
		/* on a mismatch, old receives the current value; on a match it already is */
		__atomic_compare_exchange_n(word, &old, a.swap, false, __ATOMIC_SEQ_CST,
					    __ATOMIC_SEQ_CST);
	} else {
		old = __atomic_fetch_add(word, a.compare_add, __ATOMIC_SEQ_CST);
	}
	tcp_apply_end(c);
	memserver_count(&c->ms->stats.atomics, 1);
	resp.old = htobe64(old);
	return tcp_respond(c, m->type, PROTO_OK, m->id, &resp, sizeof(resp));
}

static int tcp_on_stats(struct tcp_conn *c, const struct proto_msg *m)
{
	struct proto_stats_wire w;
	struct proto_stats s;

	memserver_stats_snapshot(c->ms, &s);
	proto_stats_pack(&w, &s);
	return tcp_respond(c, m->type, PROTO_OK, m->id, &w, sizeof(w));
}

/* FENCE: answered only once every connection of the victim is revoked */
static int tcp_on_fence(struct tcp_conn *c, const struct proto_msg *m, const void *p)
{
	uint64_t victim;
	int rc;

	if (proto_fence_unpack(p, m->len, &victim)) {
		g_message("%s: malformed FENCE (%u bytes; wants a non-zero 8-byte client id)",
			  c->peer, m->len);
		return tcp_refuse(c, m, PROTO_E_MALFORMED);
	}
	if (victim == c->client_id) {
		g_message("%s: FENCE of its own client id refused", c->peer);
		return tcp_refuse(c, m, PROTO_E_STATE);
	}
	rc = memserver_fence(c->ms, c->pool, victim);
	if (rc)
		return tcp_refuse(c, m, proto_errno_to_status(rc));
	return tcp_respond_status(c, m->type, PROTO_OK, m->id);
}

static int tcp_on_pool_list(struct tcp_conn *c, const struct proto_msg *m)
{
	struct proto_pool_list l;
	size_t n = sizeof(struct proto_hdr);
	struct proto_hdr hdr;
	ssize_t packed;
	int rc;

	if (m->len)
		return tcp_refuse(c, m, PROTO_E_MALFORMED);
	if (registry_list(&c->ms->reg, &c->who, &l))
		return tcp_refuse(c, m, PROTO_E_NOMEM);
	n += proto_pool_list_wire_size(&l);
	rc = tcp_out_room(c, n);
	if (!rc) {
		packed = proto_pool_list_pack(&l, c->out + c->out_used + sizeof(hdr),
					      TCP_OUT_CAP - c->out_used - sizeof(hdr));
		rc = packed < 0 ? (int)packed : 0;
	}
	proto_pool_list_clear(&l);
	if (rc == -EMSGSIZE)
		return tcp_refuse(c, m, PROTO_E_INTERNAL);
	if (rc)
		return rc;
	proto_hdr_pack(&hdr, m->type | PROTO_RESPONSE, PROTO_OK, (uint32_t)packed, m->id);
	memcpy(c->out + c->out_used, &hdr, sizeof(hdr));
	tcp_out_commit(c, sizeof(hdr) + packed);
	return 0;
}

static int tcp_on_pool_create(struct tcp_conn *c, const struct proto_msg *m, const void *p)
{
	char name[PROTO_POOL_NAME_MAX];
	uint64_t size;
	uint32_t st;

	if (proto_pool_sel_unpack(p, m->len, name, &size) || !size) {
		g_message("%s: malformed POOL_CREATE (%u bytes)", c->peer, m->len);
		return tcp_refuse(c, m, PROTO_E_MALFORMED);
	}
	st = registry_create(&c->ms->reg, &c->who, name, size);
	if (st != PROTO_OK)
		return tcp_refuse(c, m, st);
	return tcp_respond_status(c, m->type, PROTO_OK, m->id);
}

/* the default pool's delete: the empty name, otherwise well formed */
static bool tcp_names_default(const void *p, uint32_t len)
{
	const struct proto_pool_delete_wire *w = p;

	return len == sizeof(*w) && !w->name[0] &&
	       !(be32toh(w->flags) & ~PROTO_POOL_DELETE_FORCE);
}

static int tcp_on_pool_delete(struct tcp_conn *c, const struct proto_msg *m, const void *p)
{
	char name[PROTO_POOL_NAME_MAX];
	struct registry_pool *victim;
	uint32_t flags, st;
	unsigned int n;

	if (tcp_names_default(p, m->len)) {
		g_message("%s: POOL_DELETE of the default pool refused", c->peer);
		return tcp_refuse(c, m, PROTO_E_STATE);
	}
	if (proto_pool_delete_unpack(p, m->len, name, &flags)) {
		g_message("%s: malformed POOL_DELETE (%u bytes)", c->peer, m->len);
		return tcp_refuse(c, m, PROTO_E_MALFORMED);
	}
	st = registry_delete(&c->ms->reg, &c->who, name, flags & PROTO_POOL_DELETE_FORCE,
			     &victim);
	if (st != PROTO_OK)
		return tcp_refuse(c, m, st);
	n = memserver_revoke_pool(c->ms, victim);
	if (n)
		g_message("pool '%s': %u connection(s) cut off", name, n);
	registry_put(&c->ms->reg, victim);
	return tcp_respond_status(c, m->type, PROTO_OK, m->id);
}

static bool tcp_type_known(uint16_t type)
{
	return type >= PROTO_HELLO && type <= PROTO_POOL_DELETE;
}

/* the types that need a pool (not valid on a control session) */
static bool tcp_type_needs_pool(uint16_t type)
{
	return type == PROTO_READ || type == PROTO_WRITE || type == PROTO_CAS ||
	       type == PROTO_FETCH_ADD || type == PROTO_FENCE;
}

/* read, check and answer one message */
static int tcp_conn_step(struct tcp_conn *c)
{
	struct proto_hdr wire;
	struct proto_msg m;
	uint16_t version;
	uint32_t magic;
	const uint8_t *p;
	int rc;

	rc = tcp_need(c, sizeof(wire), true);
	if (rc)
		return rc;
	memcpy(&wire, c->in + c->in_head, sizeof(wire));
	magic = be32toh(wire.magic);
	version = be16toh(wire.version);
	m.type = be16toh(wire.type);
	m.status = be32toh(wire.status);
	m.len = be32toh(wire.len);
	m.id = be64toh(wire.id);

	if (magic != PROTO_MAGIC) {
		/* not our protocol at all: nothing sensible to answer */
		g_message("%s: bad magic 0x%08x, closing the connection", c->peer, magic);
		tcp_bad(c);
		return -EPROTO;
	}
	c->in_head += sizeof(wire);
	if (version != PROTO_VERSION) {
		char why[64];

		snprintf(why, sizeof(why), "protocol version %u, this server speaks %u", version,
			 PROTO_VERSION);
		return tcp_refuse_close(c, &m, PROTO_E_VERSION, why);
	}
	if (!tcp_type_known(m.type) || (m.type & PROTO_RESPONSE)) {
		if (m.len > PROTO_MAX_CTRL)
			return tcp_refuse_close(c, &m, PROTO_E_TOOBIG, "oversized message");
		/* only an authenticated peer is worth answering and keeping */
		if (!c->authed)
			return tcp_refuse_close(c, &m, PROTO_E_STATE,
						"unknown message type before HELLO");
		g_message("%s: unknown message type 0x%04x, ignored", c->peer, m.type);
		rc = tcp_discard(c, m.len);
		return rc ? rc : tcp_refuse(c, &m, PROTO_E_UNSUPPORTED);
	}
	if (m.len > proto_max_payload(m.type))
		return tcp_refuse_close(c, &m, PROTO_E_TOOBIG, "oversized message");
	if (!c->authed && m.type != PROTO_HELLO && m.type != PROTO_QP_EXCHANGE)
		return tcp_refuse_close(c, &m, PROTO_E_STATE, "request before HELLO");
	if (tcp_revoked(c)) {
		rc = tcp_discard(c, m.len);
		return rc ? rc : tcp_fenced(c, &m);
	}
	if (c->authed && !c->pool && tcp_type_needs_pool(m.type)) {
		rc = tcp_discard(c, m.len);
		return rc ? rc : tcp_refuse(c, &m, PROTO_E_STATE);
	}

	if (m.type == PROTO_WRITE)
		return tcp_on_write(c, &m);

	/* every other payload is small (<= PROTO_MAX_CTRL): take it whole from the buffer */
	rc = tcp_need(c, m.len, false);
	if (rc)
		return rc;
	p = c->in + c->in_head;
	c->in_head += m.len;
	switch (m.type) {
	case PROTO_HELLO:
		return tcp_on_hello(c, &m, p);
	case PROTO_QP_EXCHANGE:
		return tcp_on_qp_exchange(c, &m, p);
	case PROTO_READ:
		return tcp_on_read(c, &m, p);
	case PROTO_CAS:
	case PROTO_FETCH_ADD:
		return tcp_on_atomic(c, &m, p);
	case PROTO_PING:
		return tcp_respond(c, m.type, PROTO_OK, m.id, p, m.len);
	case PROTO_STATS:
		return tcp_on_stats(c, &m);
	case PROTO_FENCE:
		return tcp_on_fence(c, &m, p);
	case PROTO_POOL_LIST:
		return tcp_on_pool_list(c, &m);
	case PROTO_POOL_CREATE:
		return tcp_on_pool_create(c, &m, p);
	case PROTO_POOL_DELETE:
		return tcp_on_pool_delete(c, &m, p);
	default:
		return tcp_refuse(c, &m, PROTO_E_UNSUPPORTED);
	}
}

/*
 * After the final error response: stop sending, then read and drop what the
 * peer still sends for a moment, so that closing does not reset the
 * connection before the peer has read our answer.
 */
static void tcp_conn_linger(struct tcp_conn *c)
{
	struct pollfd pfd = { .fd = c->fd, .events = POLLIN };
	size_t drained = 0;
	gint64 deadline = clock_now_us() + TCP_LINGER_MS * 1000;

	if (shutdown(c->fd, SHUT_WR) < 0)
		return;
	while (drained < TCP_LINGER_BYTES) {
		gint64 left = (deadline - clock_now_us()) / 1000;
		ssize_t n;

		if (left <= 0 || poll(&pfd, 1, (int)left) <= 0)
			break;
		n = recv(c->fd, c->in, TCP_IN_CAP, MSG_DONTWAIT);
		if (n <= 0 && !(n < 0 && (errno == EINTR || errno == EAGAIN)))
			break;
		if (n > 0)
			drained += n;
	}
}

static void *tcp_conn_main(void *arg)
{
	struct tcp_conn *c = arg;
	struct tcp_server *srv = c->srv;
	int rc;

	g_debug("%s: connected", c->peer);
	do
		rc = tcp_conn_step(c);
	while (!rc);

	if (rc == -EPROTO) {
		if (!tcp_flush(c))
			tcp_conn_linger(c);
	} else if (rc == -ENODATA) {
		g_debug("%s: disconnected", c->peer);
	} else if (rc == -EBADMSG) {
		g_message("%s: connection closed in the middle of a message", c->peer);
		tcp_bad(c);
	} else if (rc == -ETIMEDOUT && !c->authed) {
		g_message("%s: no HELLO within %d ms of connecting, closing the connection",
			  c->peer, srv->hello_timeout_ms);
		memserver_count(&c->ms->stats.auth_failures, 1);
	} else {
		g_debug("%s: connection lost: %s", c->peer, g_strerror(-rc));
	}

	if (c->oob_handle && c->ms->oob_release)
		c->ms->oob_release(c->ms->oob_ctx, c->oob_handle);
	c->oob_handle = NULL;
	shutdown(c->fd, SHUT_RDWR);
	memserver_count(&c->ms->stats.clients_now, (uint64_t)-1);

	pthread_mutex_lock(&srv->lock);
	c->done = true;
	pthread_mutex_unlock(&srv->lock);
	/* done: no revoke walk looks at c->pool any more */
	registry_close(&c->ms->reg, c->pool, c->client_id);
	if (eventfd_write(srv->reap_fd, 1) < 0)
		g_warning("eventfd_write (reap): %s", g_strerror(errno));
	return NULL;
}

static void tcp_conn_free(struct tcp_conn *c)
{
	if (!c)
		return;
	if (c->fd >= 0)
		close(c->fd);
	pthread_mutex_destroy(&c->apply_lock);
	g_free(c->in);
	g_free(c->out);
	g_free(c);
}

/* join and free the finished connections (all of them if @all: at stop) */
static void tcp_reap(struct tcp_server *srv, bool all)
{
	struct tcp_conn *done = NULL, **pp, *c;

	pthread_mutex_lock(&srv->lock);
	pp = &srv->conns;
	while ((c = *pp)) {
		if (all || c->done) {
			*pp = c->next;
			c->next = done;
			done = c;
			srv->nconns--;
		} else {
			pp = &c->next;
		}
	}
	pthread_mutex_unlock(&srv->lock);

	while ((c = done)) {
		done = c->next;
		pthread_join(c->thread, NULL);
		tcp_conn_free(c);
	}
}

/* "host:port" of the peer, from the address accept() returned */
static void tcp_peer_name(const struct sockaddr_storage *ss, char *buf, size_t cap)
{
	char host[INET6_ADDRSTRLEN] = "?";
	unsigned int port = 0;

	if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *sin = (const struct sockaddr_in *)ss;

		inet_ntop(AF_INET, &sin->sin_addr, host, sizeof(host));
		port = ntohs(sin->sin_port);
	} else if (ss->ss_family == AF_INET6) {
		const struct sockaddr_in6 *sin6 = (const struct sockaddr_in6 *)ss;

		inet_ntop(AF_INET6, &sin6->sin6_addr, host, sizeof(host));
		port = ntohs(sin6->sin6_port);
	}
	snprintf(buf, cap, strchr(host, ':') ? "[%s]:%u" : "%s:%u", host, port);
}

static void tcp_accept_one(struct tcp_server *srv, int fd, const struct sockaddr_storage *peer)
{
	struct tcp_conn *c;
	pthread_attr_t attr;
	int one = 1, rc;

	if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) < 0)
		g_debug("setsockopt TCP_NODELAY: %s", g_strerror(errno));

	c = g_try_new0(struct tcp_conn, 1);
	if (c) {
		pthread_mutex_init(&c->apply_lock, NULL);
		c->in = g_try_malloc(TCP_IN_CAP);
		c->out = g_try_malloc(TCP_OUT_CAP);
	}
	if (!c || !c->in || !c->out) {
		g_message("out of memory for a new connection, refusing it");
		close(fd);
		if (c)
			c->fd = -1;
		tcp_conn_free(c);
		return;
	}
	c->srv = srv;
	c->ms = srv->ms;
	c->fd = fd;
	c->hello_deadline = clock_now_us() + (gint64)srv->hello_timeout_ms * 1000;
	tcp_peer_name(peer, c->peer, sizeof(c->peer));

	pthread_mutex_lock(&srv->lock);
	if (srv->nconns >= TCP_MAX_CONNS) {
		pthread_mutex_unlock(&srv->lock);
		g_message("%s: refused, already %u connections", c->peer, TCP_MAX_CONNS);
		tcp_conn_free(c);
		return;
	}
	memserver_count(&srv->ms->stats.clients_now, 1);
	memserver_count(&srv->ms->stats.clients_total, 1);
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, TCP_THREAD_STACK);
	rc = pthread_create(&c->thread, &attr, tcp_conn_main, c);
	pthread_attr_destroy(&attr);
	if (rc) {
		pthread_mutex_unlock(&srv->lock);
		memserver_count(&srv->ms->stats.clients_now, (uint64_t)-1);
		g_message("%s: refused: pthread_create: %s", c->peer, g_strerror(rc));
		tcp_conn_free(c);
		return;
	}
	c->next = srv->conns;
	srv->conns = c;
	srv->nconns++;
	pthread_mutex_unlock(&srv->lock);
}

static void *tcp_acceptor_main(void *arg)
{
	struct tcp_server *srv = arg;
	int backoff_ms = -1;

	for (;;) {
		struct pollfd pfd[3] = {
			{ .fd = srv->stop_fd, .events = POLLIN },
			{ .fd = srv->reap_fd, .events = POLLIN },
			{ .fd = srv->listen_fd, .events = POLLIN },
		};
		struct sockaddr_storage peer;
		socklen_t peer_len = sizeof(peer);
		eventfd_t v;
		int n, fd;

		n = poll(pfd, 3, backoff_ms);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			g_warning("poll (acceptor): %s", g_strerror(errno));
			break;
		}
		if (pfd[0].revents)
			break;
		if (pfd[1].revents) {
			eventfd_read(srv->reap_fd, &v);
			tcp_reap(srv, false);
		}
		if (!(pfd[2].revents & POLLIN) && backoff_ms < 0)
			continue;
		/* the listener is non-blocking; accepted sockets are blocking */
		memset(&peer, 0, sizeof(peer));
		fd = accept4(srv->listen_fd, (struct sockaddr *)&peer, &peer_len, SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
			    errno == ENOMEM) {
				/* try again later rather than spin on a pending connection */
				if (backoff_ms < 0)
					g_message("accept: %s; retrying", g_strerror(errno));
				backoff_ms = 100;
			} else {
				if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED)
					g_message("accept: %s", g_strerror(errno));
				backoff_ms = -1;
			}
			continue;
		}
		backoff_ms = -1;
		tcp_accept_one(srv, fd, &peer);
	}
	return NULL;
}

/*
 * Mark c revoked once no pool modification of it is in progress (srv->lock
 * held, so c cannot be freed). A write stalled mid-payload is cut off.
 */
static void tcp_conn_revoke(struct tcp_conn *c)
{
	struct timespec until;

	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_nsec += TCP_REVOKE_WAIT_MS * 1000000L;
	until.tv_sec += until.tv_nsec / 1000000000L;
	until.tv_nsec %= 1000000000L;
	if (pthread_mutex_clocklock(&c->apply_lock, CLOCK_MONOTONIC, &until)) {
		g_message("%s: a write of the fenced client is stalled mid-payload: "
			  "cutting the connection", c->peer);
		shutdown(c->fd, SHUT_RDWR);
		pthread_mutex_lock(&c->apply_lock);
	}
	__atomic_store_n(&c->revoked, true, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&c->apply_lock);
}

/*
 * The revoke hook (memserver.h): every live connection of pool p presenting
 * client_id, or (client_id 0: the pool was deleted) every one of p, whose
 * socket is also shut down so that its thread ends and lets go of the pool.
 */
static unsigned int tcp_server_revoke(void *ctx, struct registry_pool *p, uint64_t client_id)
{
	struct tcp_server *srv = ctx;
	unsigned int n = 0;
	struct tcp_conn *c;

	pthread_mutex_lock(&srv->lock);
	for (c = srv->conns; c; c = c->next) {
		if (c->done || c->pool != p || (client_id && c->client_id != client_id))
			continue;
		tcp_conn_revoke(c);
		if (!client_id)
			shutdown(c->fd, SHUT_RDWR);
		n++;
	}
	pthread_mutex_unlock(&srv->lock);
	return n;
}

int tcp_server_create(struct memserver *ms, const char *addr, uint16_t port,
		      struct tcp_server **out)
{
	struct tcp_server *srv;
	int rc;

	srv = g_try_new0(struct tcp_server, 1);
	if (!srv)
		return -ENOMEM;
	srv->ms = ms;
	srv->listen_fd = -1;
	srv->stop_fd = -1;
	srv->reap_fd = -1;
	srv->hello_timeout_ms = TCP_SERVER_HELLO_TIMEOUT_MS;
	srv->spin_us = TCP_SERVER_SPIN_US;
	pthread_mutex_init(&srv->lock, NULL);

	srv->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	srv->reap_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (srv->stop_fd < 0 || srv->reap_fd < 0) {
		rc = -errno;
		g_warning("eventfd: %s", g_strerror(-rc));
		goto err_free;
	}
	srv->listen_fd = net_listen(addr, port, TCP_BACKLOG);
	if (srv->listen_fd < 0) {
		rc = srv->listen_fd;
		srv->listen_fd = -1;
		goto err_free;
	}
	rc = net_local_port(srv->listen_fd);
	if (rc < 0)
		goto err_free;
	srv->port = rc;
	rc = net_set_nonblock(srv->listen_fd, true);
	if (rc) {
		g_warning("fcntl O_NONBLOCK (listener): %s", g_strerror(-rc));
		goto err_free;
	}
	memserver_set_revoke(ms, MEMSERVER_SIDE_TCP, tcp_server_revoke, srv);
	srv->revoke_set = true;
	*out = srv;
	return 0;

err_free:
	tcp_server_destroy(srv);
	return rc;
}

uint16_t tcp_server_port(const struct tcp_server *ts)
{
	return ts->port;
}

void tcp_server_set_hello_timeout(struct tcp_server *ts, int ms)
{
	if (ms > 0)
		ts->hello_timeout_ms = ms;
}

void tcp_server_set_spin(struct tcp_server *ts, unsigned int us)
{
	ts->spin_us = us;
}

int tcp_server_run(struct tcp_server *ts)
{
	int rc = pthread_create(&ts->acceptor, NULL, tcp_acceptor_main, ts);

	if (rc) {
		g_warning("pthread_create (acceptor): %s", g_strerror(rc));
		return -rc;
	}
	ts->acceptor_running = true;
	return 0;
}

void tcp_server_destroy(struct tcp_server *ts)
{
	struct tcp_conn *c;

	if (!ts)
		return;
	/* no fence may walk the connections from here on (RDMA threads still run) */
	if (ts->revoke_set)
		memserver_set_revoke(ts->ms, MEMSERVER_SIDE_TCP, NULL, NULL);
	ts->revoke_set = false;
	if (ts->acceptor_running) {
		if (eventfd_write(ts->stop_fd, 1) < 0)
			g_warning("eventfd_write (stop): %s", g_strerror(errno));
		pthread_join(ts->acceptor, NULL);
		ts->acceptor_running = false;
	}
	/* wake every connection thread: its next read or write fails at once */
	pthread_mutex_lock(&ts->lock);
	for (c = ts->conns; c; c = c->next)
		shutdown(c->fd, SHUT_RDWR);
	pthread_mutex_unlock(&ts->lock);
	tcp_reap(ts, true);

	if (ts->listen_fd >= 0)
		close(ts->listen_fd);
	if (ts->stop_fd >= 0)
		close(ts->stop_fd);
	if (ts->reap_fd >= 0)
		close(ts->reap_fd);
	pthread_mutex_destroy(&ts->lock);
	g_free(ts);
}
