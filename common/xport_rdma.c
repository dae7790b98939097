/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * xport_rdma.c - the RDMA implementation of the transport contract (xport.h).
 *
 * Connection setup. By default librdmacm resolves the address and route and
 * carries the connect handshake; the token hash and protocol version travel in
 * the connect private data (struct proto_cm_priv_wire) and a refusal comes back
 * as a REJECT carrying struct proto_cm_reject_wire. The QP is NOT attached to
 * the cm_id (no rdma_create_qp): it is created with the project's verbs
 * wrappers and brought through to_init / to_rtr / to_rts by this file, with the
 * parameters rdma_cm negotiated (rdma_init_qp_attr), after which
 * rdma_establish() completes the handshake. That keeps one code path for QP
 * state changes (the wrappers), lets us choose our own ACK timeout and retry
 * count (so a vanished peer is noticed in well under two seconds instead of
 * rdma_cm's ~8 s default), and makes the out-of-band path below differ only in
 * where the peer parameters come from. After connecting, a PROTO_HELLO
 * request/response over SEND/RECV (proto_hdr + payload, as over TCP) fetches
 * the pool descriptor whose rkeys are valid for this device. A named pool
 * (params->pool) does not fit the private data: it is opened over TCP first
 * (its HELLO may create it), and the private data carries the pool_id that
 * descriptor gave (PROTO_CM_POOL_ID); the server makes the QP in that pool's
 * protection domain, and the HELLO over SEND/RECV then names the pool.
 *
 * The out-of-band path (params->rdma_oob_qp) opens a device itself, exchanges
 * QP parameters over a TCP connection to the memserver (PROTO_QP_EXCHANGE, as
 * ibv_rc_pingpong does; a named pool travels in it as in HELLO) and brings
 * the QP up by hand. The TCP socket stays open
 * as the control channel (xport_call goes over it) and closing it ends the
 * server's QP.
 *
 * Data path. Each xport_post batch is one chained ibv_post_send (one
 * doorbell). Every posted WR owns a slot in a ring indexed by its sequence
 * number, which is also its verbs wr_id; the caller's wr_id lives in the slot.
 * Invariant: an RC send queue completes in order, so a completion for sequence
 * s retires every older slot as well. That is what makes selective signalling
 * work: XPORT_OP_UNSIGNALED ops are posted without IBV_SEND_SIGNALED and are
 * retired silently by the next signalled completion. So that every batch is
 * retired (and the send queue reclaimed) without the caller's help, the last
 * WR of each batch and at least one WR in every depth/2 are signalled
 * internally; their slots say whether the caller wants to hear about success.
 * Failures are always reported. After an error completion the QP is in ERR:
 * the failed op is reported with its errno and everything behind it with
 * -ECANCELED; a lost peer (DISCONNECTED / DEVICE_REMOVAL cm event, a closed
 * control socket, RETRY_EXC) fails everything in flight with -EIO at once,
 * op_timeout_ms without progress with -ETIMEDOUT. Later posts: -ENOTCONN.
 *
 * Threads: one thread at a time per xport (xport.h); no locks here.
 */
#define G_LOG_DOMAIN "rmemfs-xport-rdma"

#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <glib.h>
#include <rdma/rdma_cma.h>

#include "net.h"
#include "proto.h"
#include "verbs.h"
#include "xport.h"
#include "clock.h"

#define XRDMA_NRECV 2 /* control receive buffers (one request is outstanding at a time) */
#define XRDMA_CTRL_BUF (sizeof(struct proto_hdr) + PROTO_MAX_CTRL)
#define XRDMA_WC_CAP 32
#define XRDMA_MAX_RD_ATOMIC 16
#define XRDMA_CM_RETRY 7 /* RC retransmission: verbs_rts_init */
#define XRDMA_CONN_CHECK_US 1000 /* busy polling looks at the cm channel this often */

/* wr_id space: data WRs carry their sequence number (< 2^62); control WRs a tag bit */
#define XRDMA_WRID_RECV (1ULL << 63)
#define XRDMA_WRID_CTRL_SEND (1ULL << 62)

struct xrdma_mr {
	struct xport_mr base;
	struct verbs_mr vmr;
	struct xrdma_mr *next; /* live registrations, released at close if the caller did not */
};

struct xrdma_slot {
	uint64_t wr_id; /* the caller's */
	enum xport_op_type type;
	bool report; /* the caller wants the successful completion */
};

struct xrdma {
	struct xport base;
	bool oob; /* QP brought up over the TCP exchange */
	bool quiet; /* set-up trouble is the caller's to report (xport_params.quiet) */

	/* rdma_cm path */
	struct rdma_event_channel *ec; /* fd non-blocking */
	struct rdma_cm_id *id;
	bool established;

	/* out-of-band path */
	int ctrl_fd; /* TCP control connection, -1 on the rdma_cm path */
	struct ibv_context *own_ctx; /* opened by us (oob); rdma_cm owns id->verbs */

	struct ibv_context *ctx;
	uint8_t port;
	struct verbs_device_attr dev;
	struct ibv_pd *pd;
	struct verbs_cq cq; /* send and receive completions, with a channel */
	struct ibv_qp *qp;
	uint32_t max_inline;

	/* control messages over SEND/RECV (rdma_cm path) */
	struct verbs_mr ctrl; /* XRDMA_NRECV receive buffers, then one send buffer */
	bool recv_full[XRDMA_NRECV];
	uint32_t recv_len[XRDMA_NRECV];
	bool ctrl_send_busy;
	uint64_t ctrl_id;

	/* data path */
	struct xrdma_slot *slots; /* base.depth entries; sequence s lives in slots[s % depth] */
	uint64_t head; /* next sequence number */
	uint64_t tail; /* oldest sequence number not yet retired */
	unsigned int since_signal; /* WRs posted unsignalled since the last signalled one */
	struct ibv_send_wr *wrs; /* base.depth, reused by every post */
	struct ibv_sge *sges;
	int64_t last_progress_us;
	int64_t next_conn_check_us;

	bool fail_pending; /* fail_seq is a misaligned atomic, see xrdma_atomic_misaligned() */
	uint64_t fail_seq;

	bool dead;
	int dead_errno; /* what ops still in flight complete with once dead */

	struct xrdma_mr *mrs;
};

/*
 * The connection is gone or the QP failed: move the QP to ERR so the device
 * stops touching the caller's buffers, and let poll() report what is in
 * flight with @err.
 */
static void xrdma_mark_dead(struct xrdma *x, int err, const char *why)
{
	if (x->dead)
		return;
	x->dead = true;
	x->dead_errno = err;
	/* (debug: the failed ops carry the news to the caller, who reports it) */
	g_debug("%s: connection unusable (%s), %u op(s) in flight fail with %s", x->base.peer, why,
		(unsigned int)(x->head - x->tail), g_strerror(-err));
	if (x->qp)
		verbs_qp_to_err(x->qp);
}

/* ---- control receive buffers ---- */

static void *xrdma_recv_buf(struct xrdma *x, unsigned int idx)
{
	return (char *)x->ctrl.addr + (size_t)idx * XRDMA_CTRL_BUF;
}

static void *xrdma_send_buf(struct xrdma *x)
{
	return (char *)x->ctrl.addr + (size_t)XRDMA_NRECV * XRDMA_CTRL_BUF;
}

static int xrdma_post_recv(struct xrdma *x, unsigned int idx)
{
	x->recv_full[idx] = false;
	return verbs_post_recv_buf(x->qp, &x->ctrl, xrdma_recv_buf(x, idx), XRDMA_CTRL_BUF,
				   XRDMA_WRID_RECV | idx);
}

/* ---- completions ---- */

/* RETRY_EXC: the peer stopped answering, which the contract reports as connection loss */
static int xrdma_wc_errno(enum ibv_wc_status status)
{
	if (status == IBV_WC_RETRY_EXC_ERR)
		return -EIO;
	return verbs_wc_status_to_errno(status);
}

static void xrdma_handle_wc(struct xrdma *x, const struct ibv_wc *wc, struct xport_cqe *cqes,
			    unsigned int *filled)
{
	struct xrdma_slot *slot;
	uint64_t seq;
	int err;

	if (wc->wr_id & XRDMA_WRID_RECV) {
		unsigned int idx = (unsigned int)(wc->wr_id & ~XRDMA_WRID_RECV);

		if (idx >= XRDMA_NRECV)
			return;
		if (wc->status != IBV_WC_SUCCESS) {
			if (wc->status != IBV_WC_WR_FLUSH_ERR)
				xrdma_mark_dead(x, -EIO, verbs_wc_status_str(wc->status));
			return;
		}
		x->recv_full[idx] = true;
		x->recv_len[idx] = wc->byte_len;
		return;
	}
	if (wc->wr_id == XRDMA_WRID_CTRL_SEND) {
		x->ctrl_send_busy = false;
		if (wc->status != IBV_WC_SUCCESS)
			xrdma_mark_dead(x, xrdma_wc_errno(wc->status),
					verbs_wc_status_str(wc->status));
		return;
	}

	seq = wc->wr_id;
	/* a flush of an op already reported when the connection died */
	if (seq < x->tail || seq >= x->head)
		return;
	/* in-order completion: everything older succeeded (unsignalled) */
	x->tail = seq + 1;
	x->last_progress_us = clock_now_us();
	slot = &x->slots[seq % x->base.depth];
	err = wc->status == IBV_WC_SUCCESS ? 0 : xrdma_wc_errno(wc->status);
	if ((err || slot->report) && cqes) {
		cqes[*filled].wr_id = slot->wr_id;
		cqes[*filled].status = err;
		cqes[*filled].type = slot->type;
		(*filled)++;
	}
	if (err && !x->dead) {
		if (err != -ECANCELED)
			g_message("%s: %s failed: %s (%s)", x->base.peer,
				  xport_op_type_str(slot->type), verbs_wc_status_str(wc->status),
				  g_strerror(-err));
		xrdma_mark_dead(x, err == -EIO ? -EIO : -ECANCELED,
				verbs_wc_status_str(wc->status));
	}
}

/*
 * Reap what the CQ holds, reporting into cqes[*filled..max). Each work
 * completion yields at most one cqe, so never more than max - *filled are
 * taken at once. cqes may be NULL (max 0) when nothing is in flight.
 */
static int xrdma_drain_cq(struct xrdma *x, struct xport_cqe *cqes, unsigned int max,
			  unsigned int *filled)
{
	for (;;) {
		int want = XRDMA_WC_CAP;
		int n, i;

		if (cqes) {
			if (*filled >= max)
				return 0;
			if (max - *filled < (unsigned int)want)
				want = (int)(max - *filled);
		}
		n = verbs_cq_poll(&x->cq, want);
		if (n < 0)
			return n;
		for (i = 0; i < n; i++)
			xrdma_handle_wc(x, &x->cq.wc[i], cqes, filled);
		if (n < want)
			return 0;
	}
}

/* once dead: everything still in flight completes with dead_errno, oldest first */
static unsigned int xrdma_report_dead(struct xrdma *x, struct xport_cqe *cqes, unsigned int max)
{
	unsigned int n = 0;

	while (x->tail < x->head && n < max) {
		struct xrdma_slot *slot = &x->slots[x->tail % x->base.depth];

		cqes[n].wr_id = slot->wr_id;
		cqes[n].status = x->dead_errno;
		cqes[n].type = slot->type;
		n++;
		x->tail++;
	}
	return n;
}

/* ---- connection watch ---- */

static void xrdma_cm_event_after_connect(struct xrdma *x, struct rdma_cm_event *ev)
{
	switch (ev->event) {
	case RDMA_CM_EVENT_DISCONNECTED:
		x->established = false;
		xrdma_mark_dead(x, -EIO, "server disconnected");
		break;
	case RDMA_CM_EVENT_DEVICE_REMOVAL:
		xrdma_mark_dead(x, -EIO, "RDMA device removed");
		break;
	case RDMA_CM_EVENT_TIMEWAIT_EXIT:
	case RDMA_CM_EVENT_ADDR_CHANGE:
	case RDMA_CM_EVENT_ESTABLISHED:
		break;
	default:
		g_debug("%s: cm event %s (status %d) ignored", x->base.peer,
			rdma_event_str(ev->event), ev->status);
		break;
	}
}

/* non-blocking: look for a sign that the peer is gone */
static void xrdma_check_conn(struct xrdma *x)
{
	struct rdma_cm_event *ev;

	x->next_conn_check_us = clock_now_us() + XRDMA_CONN_CHECK_US;
	if (x->ec) {
		while (rdma_get_cm_event(x->ec, &ev) == 0) {
			xrdma_cm_event_after_connect(x, ev);
			rdma_ack_cm_event(ev);
		}
		return;
	}
	if (x->ctrl_fd >= 0 && !x->dead) {
		char c;
		ssize_t n = recv(x->ctrl_fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);

		if (n == 0)
			xrdma_mark_dead(x, -EIO, "server closed the control connection");
		else if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
			xrdma_mark_dead(x, -EIO, g_strerror(errno));
		else if (n > 0)
			xrdma_mark_dead(x, -EIO, "unexpected data on the control connection");
	}
}

/*
 * Block until the completion channel or the connection's fd has something,
 * or timeout_ms passes. A completion event is consumed (and the CQ re-armed)
 * here; the caller then drains the CQ.
 */
static int xrdma_block(struct xrdma *x, int timeout_ms)
{
	struct pollfd pfd[2];
	int nfds = 0;
	int rc;

	pfd[nfds].fd = verbs_cq_fd(&x->cq);
	pfd[nfds].events = POLLIN;
	nfds++;
	if (x->ec || x->ctrl_fd >= 0) {
		pfd[nfds].fd = x->ec ? x->ec->fd : x->ctrl_fd;
		pfd[nfds].events = POLLIN;
		nfds++;
	}
	rc = poll(pfd, nfds, timeout_ms);
	if (rc < 0)
		return errno == EINTR ? 0 : -errno;
	if (rc == 0)
		return 0;
	if (pfd[0].revents) {
		rc = verbs_cq_wait(&x->cq, 0);
		if (rc && rc != -ETIMEDOUT)
			return rc;
	}
	if (nfds > 1 && pfd[1].revents)
		xrdma_check_conn(x);
	return 0;
}

/*
 * Wait for progress as the poll mode says: spin until spin_until_us (checking
 * the connection every XRDMA_CONN_CHECK_US), then block, never past
 * deadline_us (INT64_MAX: no deadline). Returns 0 when the caller should look
 * again, -ETIMEDOUT at the deadline, -errno.
 */
static int xrdma_wait(struct xrdma *x, int64_t deadline_us, int64_t spin_until_us)
{
	int64_t now = clock_now_us();
	int64_t until = deadline_us;

	if (now >= deadline_us)
		return -ETIMEDOUT;
	if (now >= x->next_conn_check_us)
		xrdma_check_conn(x);
	if (now < spin_until_us)
		return 0;
	/* wake up in time for the op timeout */
	if (x->head != x->tail) {
		int64_t op_deadline = x->last_progress_us + (int64_t)x->base.op_timeout_ms * 1000;

		if (op_deadline < until)
			until = op_deadline;
	}
	return xrdma_block(x, until == INT64_MAX ? -1 : net_ms_until(until));
}

static void xrdma_check_op_timeout(struct xrdma *x)
{
	if (x->dead || x->head == x->tail)
		return;
	if (clock_now_us() - x->last_progress_us > (int64_t)x->base.op_timeout_ms * 1000)
		xrdma_mark_dead(x, -ETIMEDOUT, "no progress within the op timeout");
}

/* ---- the data path ---- */

/*
 * Is m one of this transport's live registrations? Compared by address only,
 * so an MR freed by dereg_mr (or another connection's) is refused with
 * -EINVAL instead of being dereferenced.
 */
static bool xrdma_owns_mr(struct xrdma *x, const struct xport_mr *m)
{
	const struct xrdma_mr *p;

	for (p = x->mrs; p; p = p->next) {
		if (&p->base == m)
			return true;
	}
	return false;
}

/* the checks post() makes before anything is posted: 0 or -EINVAL / -EOPNOTSUPP */
static int xrdma_check_op(struct xrdma *x, const struct xport_op *op,
			  const struct xport_mr **last_mr)
{
	struct ibv_sge sge;
	const struct xrdma_mr *mr;

	if (!op->mr || (op->mr != *last_mr && !xrdma_owns_mr(x, op->mr)))
		return -EINVAL;
	*last_mr = op->mr;
	mr = container_of(op->mr, const struct xrdma_mr, base);
	switch (op->type) {
	case XPORT_READ:
	case XPORT_WRITE:
		if (op->len == 0 || op->len > PROTO_MAX_IO)
			return -EINVAL;
		return verbs_sge(&sge, &mr->vmr, op->local, op->len) ? -EINVAL : 0;
	case XPORT_CAS:
	case XPORT_FETCH_ADD:
		if (!x->dev.atomics)
			return -EOPNOTSUPP;
		return verbs_sge(&sge, &mr->vmr, op->local, sizeof(uint64_t)) ? -EINVAL : 0;
	}
	return -EINVAL;
}

static void xrdma_build_wr(struct xrdma *x, const struct xport_op *op, uint64_t seq,
			   struct ibv_send_wr *wr, struct ibv_sge *sge, unsigned int flags)
{
	struct xrdma_mr *mr = container_of(op->mr, struct xrdma_mr, base);
	uint32_t len = op->type == XPORT_READ || op->type == XPORT_WRITE ? op->len : 8;

	verbs_sge(sge, &mr->vmr, op->local, len); /* checked by xrdma_check_op */
	switch (op->type) {
	case XPORT_READ:
		verbs_wr_read(wr, seq, sge, 1, op->raddr, op->rkey, flags);
		break;
	case XPORT_WRITE:
		if ((op->flags & XPORT_OP_INLINE) && op->len <= x->max_inline)
			flags |= IBV_SEND_INLINE;
		verbs_wr_write(wr, seq, sge, 1, op->raddr, op->rkey, flags);
		break;
	case XPORT_CAS:
		verbs_wr_cas(wr, seq, sge, op->raddr, op->rkey, op->compare_add, op->swap, flags);
		break;
	case XPORT_FETCH_ADD:
		verbs_wr_fetch_add(wr, seq, sge, op->raddr, op->rkey, op->compare_add, flags);
		break;
	}
}

/*
 * A misaligned atomic is a remote error on a NIC (the responder NAKs it: an
 * error completion, the QP goes to ERR) but some providers (rxe) refuse it in
 * ibv_post_send. So that every device behaves like the NIC, it is never
 * posted: the ops before it run, it then completes with -EINVAL (poll) and
 * everything after it, in this batch or later ones, is flushed with the
 * connection, exactly as on hardware.
 */
static bool xrdma_atomic_misaligned(const struct xport_op *op)
{
	return (op->type == XPORT_CAS || op->type == XPORT_FETCH_ADD) && (op->raddr & 7);
}

static int xrdma_post(struct xport *xb, const struct xport_op *ops, unsigned int n)
{
	struct xrdma *x = container_of(xb, struct xrdma, base);
	unsigned int depth = x->base.depth;
	unsigned int signal_every = depth / 2 ? depth / 2 : 1;
	unsigned int since = x->since_signal;
	const struct xport_mr *last_mr = NULL;
	struct ibv_send_wr *bad = NULL;
	unsigned int i, limit, posted;
	int rc;

	if (x->dead)
		return -ENOTCONN;
	if (n == 0)
		return 0;
	if (n > depth)
		return -EINVAL;
	if (x->head - x->tail + n > depth)
		return -EAGAIN;

	/* all or nothing: every op is checked before anything is posted */
	limit = x->fail_pending ? 0 : n;
	for (i = 0; i < n; i++) {
		rc = xrdma_check_op(x, &ops[i], &last_mr);
		if (rc)
			return rc;
		if (i < limit && xrdma_atomic_misaligned(&ops[i]))
			limit = i;
	}

	for (i = 0; i < n; i++) {
		const struct xport_op *op = &ops[i];
		struct xrdma_slot *slot = &x->slots[(x->head + i) % depth];
		bool report = !(op->flags & XPORT_OP_UNSIGNALED);
		unsigned int flags = 0;

		slot->wr_id = op->wr_id;
		slot->type = op->type;
		slot->report = report;
		if (i >= limit)
			continue;
		if (report || i == limit - 1 || since + 1 >= signal_every) {
			flags |= IBV_SEND_SIGNALED;
			since = 0;
		} else {
			since++;
		}
		xrdma_build_wr(x, op, x->head + i, &x->wrs[i], &x->sges[i], flags);
	}
	if (x->head == x->tail)
		x->last_progress_us = clock_now_us();
	if (limit < n && !x->fail_pending) {
		x->fail_pending = true;
		x->fail_seq = x->head + limit;
		g_message("%s: %s at a misaligned remote address 0x%" G_GINT64_MODIFIER
			  "x: it fails, and the connection with it",
			  x->base.peer, xport_op_type_str(ops[limit].type),
			  (guint64)ops[limit].raddr);
	}
	if (limit == 0) {
		x->head += n;
		return 0;
	}

	verbs_wr_chain(x->wrs, (int)limit);
	rc = verbs_post_send(x->qp, x->wrs, &bad);
	if (rc == 0) {
		x->head += n;
		x->since_signal = since;
		return 0;
	}
	if (limit < n && x->fail_seq == x->head + limit)
		x->fail_pending = false;
	posted = bad ? (unsigned int)(bad - x->wrs) : 0;
	if (posted == 0 || posted > limit) {
		/* nothing went out: the queue is full (not expected) or the QP broke */
		if (rc == -ENOMEM)
			return -EAGAIN;
		xrdma_mark_dead(x, -EIO, g_strerror(-rc));
		return -ENOTCONN;
	}
	/*
	 * Part of the chain went out. The contract is all-or-nothing, so the
	 * connection cannot go on: what was posted is failed with the rest.
	 */
	x->head += posted;
	xrdma_mark_dead(x, -ECANCELED, "partial post");
	return -EIO;
}

/*
 * A failure post() decided on (misaligned atomic) is due once everything
 * before it has completed: report it, then the connection goes down.
 */
static void xrdma_fail_due(struct xrdma *x, struct xport_cqe *cqes, unsigned int max,
			   unsigned int *filled)
{
	struct xrdma_slot *slot;

	if (!x->fail_pending || x->dead || x->tail != x->fail_seq || *filled >= max)
		return;
	slot = &x->slots[x->tail % x->base.depth];
	cqes[*filled].wr_id = slot->wr_id;
	cqes[*filled].status = -EINVAL;
	cqes[*filled].type = slot->type;
	(*filled)++;
	x->tail++;
	x->fail_pending = false;
	xrdma_mark_dead(x, -ECANCELED, "misaligned atomic");
}

static int xrdma_poll(struct xport *xb, struct xport_cqe *cqes, unsigned int max, int timeout_ms)
{
	struct xrdma *x = container_of(xb, struct xrdma, base);
	int64_t now = clock_now_us();
	int64_t deadline = timeout_ms < 0 ? INT64_MAX : now + (int64_t)timeout_ms * 1000;
	int64_t spin_until = now;
	unsigned int filled = 0;
	int rc;

	if (x->base.poll_mode == XPORT_POLL_BUSY)
		spin_until = deadline;
	else if (x->base.poll_mode == XPORT_POLL_HYBRID)
		spin_until = now + x->base.spin_us;

	for (;;) {
		if (!x->dead) {
			rc = xrdma_drain_cq(x, cqes, max, &filled);
			if (rc)
				xrdma_mark_dead(x, -EIO, "completion queue failure");
			xrdma_fail_due(x, cqes, max, &filled);
		}
		if (x->dead) {
			filled += xrdma_report_dead(x, cqes + filled, max - filled);
			return filled ? (int)filled : -ENOTCONN;
		}
		if (filled)
			return (int)filled;
		if (x->head == x->tail) {
			/* nothing in flight; still notice a lost connection */
			if (clock_now_us() >= x->next_conn_check_us)
				xrdma_check_conn(x);
			return x->dead ? -ENOTCONN : 0;
		}
		xrdma_check_op_timeout(x);
		if (x->dead)
			continue;
		rc = xrdma_wait(x, deadline, spin_until);
		if (rc == -ETIMEDOUT)
			return 0;
		if (rc) {
			xrdma_mark_dead(x, -EIO, g_strerror(-rc));
			continue;
		}
	}
}

static unsigned int xrdma_inflight(const struct xport *xb)
{
	const struct xrdma *x = container_of(xb, const struct xrdma, base);

	return (unsigned int)(x->head - x->tail);
}

/* ---- memory registration ---- */

static int xrdma_reg_mr(struct xport *xb, void *addr, size_t len, struct xport_mr **out)
{
	struct xrdma *x = container_of(xb, struct xrdma, base);
	struct xrdma_mr *m;
	int rc;

	m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	rc = verbs_mr_reg(x->pd, addr, len, IBV_ACCESS_LOCAL_WRITE, &m->vmr);
	if (rc) {
		if (rc == -ENOMEM || rc == -EPERM) {
			g_message("registering %zu bytes failed: %s; the locked-memory limit "
				  "(RLIMIT_MEMLOCK) is probably too low: raise it with 'ulimit -l "
				  "unlimited' or LimitMEMLOCK=infinity, or grant CAP_IPC_LOCK",
				  len, g_strerror(-rc));
			rc = -ENOMEM;
		}
		free(m);
		return rc;
	}
	m->base.addr = addr;
	m->base.len = len;
	m->base.lkey = m->vmr.lkey;
	m->next = x->mrs;
	x->mrs = m;
	*out = &m->base;
	return 0;
}

static void xrdma_mr_free(struct xrdma_mr *m)
{
	verbs_mr_dereg(&m->vmr);
	free(m);
}

static void xrdma_dereg_mr(struct xport *xb, struct xport_mr *mr)
{
	struct xrdma *x = container_of(xb, struct xrdma, base);
	struct xrdma_mr *m = container_of(mr, struct xrdma_mr, base);
	struct xrdma_mr **pp;

	for (pp = &x->mrs; *pp; pp = &(*pp)->next) {
		if (*pp == m) {
			*pp = m->next;
			xrdma_mr_free(m);
			return;
		}
	}
	g_warning("%s: dereg of an MR this transport did not register", x->base.peer);
}

/* ---- control messages ---- */

/*
 * One request/response over SEND/RECV: the rdma_cm path's control channel.
 * Caller guarantees nothing is in flight. The response payload goes to
 * resp[0..resp_cap); *resp_len gets its full length.
 */
/* post the request as one signalled SEND from the send buffer */
static int xrdma_ctrl_send(struct xrdma *x, uint16_t type, const void *req, uint32_t req_len,
			   uint64_t id)
{
	struct proto_hdr *hdr = xrdma_send_buf(x);
	struct ibv_send_wr wr;
	struct ibv_sge sge;
	int rc;

	if (x->ctrl_send_busy)
		return -EBUSY;
	proto_hdr_pack(hdr, type, PROTO_OK, req_len, id);
	if (req_len)
		memcpy(hdr + 1, req, req_len);
	rc = verbs_sge(&sge, &x->ctrl, hdr, (uint32_t)(sizeof(*hdr) + req_len));
	if (rc)
		return rc;
	verbs_wr_send(&wr, XRDMA_WRID_CTRL_SEND, &sge, 1, IBV_SEND_SIGNALED);
	if (verbs_post_send(x->qp, &wr, NULL)) {
		xrdma_mark_dead(x, -EIO, "control SEND could not be posted");
		return -ENOTCONN;
	}
	x->ctrl_send_busy = true;
	return 0;
}

/* re-post receive buffer i; -EIO (the connection is dead) when that fails */
static int xrdma_ctrl_repost(struct xrdma *x, unsigned int i)
{
	if (!xrdma_post_recv(x, i))
		return 0;
	xrdma_mark_dead(x, -EIO, "receive could not be re-posted");
	return -EIO;
}

/*
 * Look in receive buffer i for the response to request id of type. 0:
 * nothing for us (empty, or a late answer to a request that timed out,
 * dropped); 1: the response, its status as 0/-errno in *status, the payload
 * in resp; -EIO: malformed, and the connection is dead.
 */
static int xrdma_ctrl_take(struct xrdma *x, unsigned int i, uint16_t type, uint64_t id,
			   void *resp, uint32_t resp_cap, uint32_t *resp_len, int *status)
{
	const struct proto_hdr *rh = xrdma_recv_buf(x, i);
	uint32_t len = x->recv_len[i];
	struct proto_msg m;
	int rc;

	if (!x->recv_full[i])
		return 0;
	rc = len >= sizeof(*rh) ? proto_hdr_unpack(rh, &m) : -EBADMSG;
	if (rc == 0 && m.len != len - sizeof(*rh))
		rc = -EBADMSG;
	if (rc == 0 && m.id != id) {
		g_debug("%s: stale control response %" G_GUINT64_FORMAT " dropped", x->base.peer,
			(guint64)m.id);
		return xrdma_ctrl_repost(x, i);
	}
	if (rc == 0 && m.type != (type | PROTO_RESPONSE))
		rc = -EBADMSG;
	if (rc) {
		g_message("%s: malformed control response: %s", x->base.peer, g_strerror(-rc));
		xrdma_mark_dead(x, -EIO, "malformed control response");
		return -EIO;
	}
	if (m.status != PROTO_OK) {
		*status = proto_status_to_errno(m.status);
	} else {
		*resp_len = m.len;
		if (resp_cap)
			memcpy(resp, rh + 1, MIN(m.len, resp_cap));
		*status = m.len > resp_cap ? -EMSGSIZE : 0;
	}
	return xrdma_ctrl_repost(x, i) ? -EIO : 1;
}

static int xrdma_call_rdma(struct xrdma *x, uint16_t type, const void *req, uint32_t req_len,
			   void *resp, uint32_t resp_cap, uint32_t *resp_len, int64_t deadline_us)
{
	uint64_t id = ++x->ctrl_id;
	unsigned int filled = 0, i;
	int64_t spin_until;
	int rc, status = 0;

	*resp_len = 0;
	rc = xrdma_ctrl_send(x, type, req, req_len, id);
	if (rc)
		return rc;
	spin_until = x->base.poll_mode == XPORT_POLL_EVENT ? 0 :
		     x->base.poll_mode == XPORT_POLL_BUSY ? deadline_us :
							    clock_now_us() + x->base.spin_us;
	for (;;) {
		if (xrdma_drain_cq(x, NULL, 0, &filled))
			xrdma_mark_dead(x, -EIO, "completion queue failure");
		if (x->dead)
			return -EIO;
		for (i = 0; i < XRDMA_NRECV; i++) {
			rc = xrdma_ctrl_take(x, i, type, id, resp, resp_cap, resp_len, &status);
			if (rc < 0)
				return rc;
			if (rc == 0)
				continue;
			/* the SEND completes before the response can arrive, in practice */
			while (x->ctrl_send_busy && !x->dead) {
				if (xrdma_drain_cq(x, NULL, 0, &filled))
					xrdma_mark_dead(x, -EIO, "completion queue failure");
				if (xrdma_wait(x, deadline_us, spin_until) == -ETIMEDOUT)
					break;
			}
			return status;
		}
		rc = xrdma_wait(x, deadline_us, spin_until);
		if (rc == -ETIMEDOUT) {
			g_message("%s: no response to %s within the timeout", x->base.peer,
				  proto_type_str(type));
			return -ETIMEDOUT;
		}
		if (rc) {
			xrdma_mark_dead(x, -EIO, g_strerror(-rc));
			return -EIO;
		}
	}
}

/* read len bytes of the control socket, or -ETIMEDOUT at deadline_us: a server that stops
 * answering must not hang xport_call */
static int xrdma_sock_read(int fd, void *buf, size_t len, int64_t deadline_us)
{
	struct iovec iov = { .iov_base = buf, .iov_len = len };

	return net_io_full(fd, &iov, 1, false, deadline_us);
}

/* read one response from the TCP control socket */
static int xrdma_tcp_read_response(struct xrdma *x, uint16_t type, uint64_t id,
				   struct proto_msg *m, void **payload, int64_t deadline_us)
{
	struct proto_hdr hdr;
	void *buf = NULL;
	int rc;

	*payload = NULL;
	rc = xrdma_sock_read(x->ctrl_fd, &hdr, sizeof(hdr), deadline_us);
	if (rc == 0)
		rc = proto_hdr_unpack(&hdr, m);
	if (rc == 0 && (m->type != (type | PROTO_RESPONSE) || m->id != id))
		rc = -EBADMSG;
	if (rc == 0 && m->len) {
		buf = malloc(m->len);
		if (!buf)
			return -ENOMEM;
		rc = xrdma_sock_read(x->ctrl_fd, buf, m->len, deadline_us);
	}
	if (rc) {
		free(buf);
		return rc;
	}
	*payload = buf;
	return 0;
}

/* the out-of-band path's control channel: a request/response on the TCP socket */
static int xrdma_call_tcp(struct xrdma *x, uint16_t type, const void *req, uint32_t req_len,
			  void *resp, uint32_t resp_cap, uint32_t *resp_len)
{
	int64_t deadline = clock_now_us() + (int64_t)x->base.op_timeout_ms * 1000;
	struct proto_hdr hdr;
	struct iovec iov[2];
	struct proto_msg m;
	uint64_t id = ++x->ctrl_id;
	void *payload;
	int rc;

	*resp_len = 0;
	rc = net_io_full(x->ctrl_fd, iov, proto_request_iov(&hdr, iov, type, req, req_len, id),
			 true, deadline);
	if (rc == 0)
		rc = xrdma_tcp_read_response(x, type, id, &m, &payload, deadline);
	if (rc) {
		/* the stream is out of step or gone: so is the server's QP */
		xrdma_mark_dead(x, -EIO, "control connection failed");
		return rc == -ETIMEDOUT ? rc : -EIO;
	}
	if (m.status != PROTO_OK) {
		rc = proto_status_to_errno(m.status);
	} else {
		*resp_len = m.len;
		if (resp_cap && m.len)
			memcpy(resp, payload, MIN(m.len, resp_cap));
		rc = m.len > resp_cap ? -EMSGSIZE : 0;
	}
	free(payload);
	return rc;
}

static int xrdma_call(struct xport *xb, uint16_t type, const void *req, uint32_t req_len,
		      void *resp, uint32_t resp_cap, uint32_t *resp_len)
{
	struct xrdma *x = container_of(xb, struct xrdma, base);

	*resp_len = 0;
	if (x->dead)
		return -ENOTCONN;
	if (x->head != x->tail)
		return -EBUSY;
	if (req_len > PROTO_MAX_CTRL)
		return -EMSGSIZE;
	if (x->oob)
		return xrdma_call_tcp(x, type, req, req_len, resp, resp_cap, resp_len);
	return xrdma_call_rdma(x, type, req, req_len, resp, resp_cap, resp_len,
			       clock_now_us() + (int64_t)x->base.op_timeout_ms * 1000);
}

/* ---- setup shared by both paths ---- */

/*
 * PD, CQ (with a completion channel), RC QP, the data-path arrays, and (with
 * @ctrl) the control buffers, on x->ctx. x->base.depth is clamped to what the
 * device allows. Undone by xrdma_destroy().
 */
static int xrdma_setup_verbs(struct xrdma *x, bool ctrl)
{
	struct verbs_qp_caps caps;
	unsigned int depth = x->base.depth;
	int rc;

	rc = verbs_query_device(x->ctx, &x->dev);
	if (rc)
		return rc;
	if (x->dev.max_qp_wr > 0 && depth + 2 > x->dev.max_qp_wr)
		depth = x->dev.max_qp_wr - 2;
	if (x->dev.max_cqe > 0 && depth + XRDMA_NRECV + 2 > x->dev.max_cqe)
		depth = x->dev.max_cqe - XRDMA_NRECV - 2;
	if (depth < 1)
		return -EINVAL;
	x->base.depth = depth;

	x->slots = calloc(depth, sizeof(*x->slots));
	x->wrs = calloc(depth, sizeof(*x->wrs));
	x->sges = calloc(depth, sizeof(*x->sges));
	if (!x->slots || !x->wrs || !x->sges)
		return -ENOMEM;

	rc = verbs_pd_alloc(x->ctx, &x->pd);
	if (rc)
		return rc;
	rc = verbs_cq_create(x->ctx, (int)(depth + XRDMA_NRECV + 2), true, XRDMA_WC_CAP, &x->cq);
	if (rc)
		return rc;

	verbs_qp_caps_default(&caps);
	caps.max_send_wr = depth + 1; /* + the control SEND (only with nothing in flight) */
	caps.max_recv_wr = XRDMA_NRECV;
	caps.max_send_sge = 1;
	caps.max_recv_sge = 1;
	rc = verbs_qp_create(x->pd, IBV_QPT_RC, &x->cq, &x->cq, &caps, &x->qp);
	if (rc)
		return rc;
	x->max_inline = caps.max_inline_data;

	if (ctrl) {
		rc = verbs_mr_alloc(x->pd, (XRDMA_NRECV + 1) * XRDMA_CTRL_BUF,
				    IBV_ACCESS_LOCAL_WRITE, &x->ctrl);
		if (rc)
			return rc;
	}
	return 0;
}

static int xrdma_post_all_recvs(struct xrdma *x)
{
	unsigned int i;
	int rc;

	for (i = 0; i < XRDMA_NRECV; i++) {
		rc = xrdma_post_recv(x, i);
		if (rc)
			return rc;
	}
	return 0;
}

/* ---- the rdma_cm path ---- */

/* the errno a REJECT stands for: the server's proto status if it sent one */
/* connection set-up trouble: a message, or debug output where the caller reports it (quiet) */
#define xrdma_setup_msg(x, ...) \
	g_log(G_LOG_DOMAIN, (x)->quiet ? G_LOG_LEVEL_DEBUG : G_LOG_LEVEL_MESSAGE, __VA_ARGS__)

static int xrdma_reject_errno(const struct rdma_cm_event *ev)
{
	const struct proto_cm_reject_wire *rej = ev->param.conn.private_data;

	if (rej && ev->param.conn.private_data_len >= sizeof(*rej) &&
	    ntohl(rej->magic) == PROTO_MAGIC) {
		uint32_t st = ntohl(rej->status);

		return st == PROTO_OK ? -ECONNREFUSED : proto_status_to_errno(st);
	}
	return -ECONNREFUSED;
}

/*
 * Wait for the next cm event, which must be @want. On success the scalar
 * connection parameters of the event go to *param (its private data pointer
 * is cleared: it dies with the event). Other events become the errno they
 * stand for.
 */
static int xrdma_cm_expect(struct xrdma *x, enum rdma_cm_event_type want, int64_t deadline_us,
			   struct rdma_conn_param *param)
{
	struct rdma_cm_event *ev;
	struct pollfd pfd;
	int rc;

	for (;;) {
		if (rdma_get_cm_event(x->ec, &ev) == 0)
			break;
		if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
			rc = -errno;
			xrdma_setup_msg(x, "rdma_get_cm_event failed: %s", g_strerror(-rc));
			return rc;
		}
		if (clock_now_us() >= deadline_us) {
			xrdma_setup_msg(x, "%s: timed out waiting for %s", x->base.peer,
					   rdma_event_str(want));
			return -ETIMEDOUT;
		}
		pfd.fd = x->ec->fd;
		pfd.events = POLLIN;
		if (poll(&pfd, 1, net_ms_until(deadline_us)) < 0 && errno != EINTR)
			return -errno;
	}

	if (ev->event == want) {
		if (param) {
			*param = ev->param.conn;
			param->private_data = NULL;
			param->private_data_len = 0;
		}
		rdma_ack_cm_event(ev);
		return 0;
	}
	switch (ev->event) {
	case RDMA_CM_EVENT_REJECTED:
		rc = xrdma_reject_errno(ev);
		break;
	case RDMA_CM_EVENT_ADDR_ERROR:
		rc = ev->status < 0 ? ev->status : -EHOSTUNREACH;
		if (rc == -ENODEV || rc == -EADDRNOTAVAIL)
			rc = -ENODEV;
		break;
	case RDMA_CM_EVENT_ROUTE_ERROR:
		rc = ev->status == -ENODEV ? -ENODEV : -ENETUNREACH;
		break;
	case RDMA_CM_EVENT_UNREACHABLE:
	case RDMA_CM_EVENT_CONNECT_ERROR:
		rc = -ECONNREFUSED;
		break;
	case RDMA_CM_EVENT_DEVICE_REMOVAL:
		rc = -ENODEV;
		break;
	default:
		rc = -EPROTO;
		break;
	}
	xrdma_setup_msg(x, "%s: %s (status %d) while waiting for %s: %s", x->base.peer,
			   rdma_event_str(ev->event), ev->status, rdma_event_str(want),
			   g_strerror(-rc));
	rdma_ack_cm_event(ev);
	return rc;
}

static int xrdma_resolve(struct xrdma *x, const struct xport_params *p, int64_t deadline_us)
{
	struct addrinfo *res;
	int rc;

	rc = net_resolve(p->host, p->port, false, &res);
	if (rc) {
		xrdma_setup_msg(x, "cannot resolve %s: %s", p->host, g_strerror(-rc));
		return rc;
	}
	rc = rdma_resolve_addr(x->id, NULL, res->ai_addr, net_ms_until(deadline_us));
	freeaddrinfo(res);
	if (rc) {
		rc = -errno;
		xrdma_setup_msg(x, "rdma_resolve_addr(%s) failed: %s", p->host, g_strerror(-rc));
		return rc == -EADDRNOTAVAIL ? -ENODEV : rc;
	}
	rc = xrdma_cm_expect(x, RDMA_CM_EVENT_ADDR_RESOLVED, deadline_us, NULL);
	if (rc)
		return rc;
	if (rdma_resolve_route(x->id, net_ms_until(deadline_us))) {
		rc = -errno;
		xrdma_setup_msg(x, "rdma_resolve_route(%s) failed: %s", p->host, g_strerror(-rc));
		return rc == -ENODEV ? rc : -ENETUNREACH;
	}
	return xrdma_cm_expect(x, RDMA_CM_EVENT_ROUTE_RESOLVED, deadline_us, NULL);
}

/* INIT -> RTR -> RTS with what rdma_cm negotiated, our READ/atomic depth at most rd_atomic */
static int xrdma_cm_qp_up(struct xrdma *x, unsigned int rd_atomic)
{
	struct verbs_rts_params rts;
	struct verbs_peer peer;
	int rc;

	rc = verbs_cm_qp_params(x->id, x->port, &peer, &rts);
	if (rc) {
		xrdma_setup_msg(x, "rdma_cm QP parameters: %s", g_strerror(-rc));
		return rc;
	}
	if (rts.max_rd_atomic > rd_atomic)
		rts.max_rd_atomic = rd_atomic;
	return verbs_qp_up(x->qp, &peer, &rts);
}

/*
 * A named pool's pool_id for the CM private data, which has no room for a
 * name: the pool is opened over TCP first (a HELLO with the selection,
 * which may create it), its descriptor read, and that connection closed.
 */
static int xrdma_pool_id(struct xrdma *x, const struct xport_params *p, uint64_t *pool_id)
{
	struct xport_params tp = *p;
	struct xport *t = NULL;
	int rc;

	tp.queue_depth = 1;
	rc = xport_tcp_ops.connect(&tp, &t);
	if (rc) {
		xrdma_setup_msg(x, "%s: opening pool %s over TCP: %s", x->base.peer, p->pool,
				g_strerror(-rc));
		return rc;
	}
	*pool_id = t->pool.pool_id;
	xport_close(t);
	if (!*pool_id) {
		xrdma_setup_msg(x, "%s: pool %s came with pool id 0", x->base.peer, p->pool);
		return -EBADMSG;
	}
	return 0;
}

static int xrdma_connect_cm(struct xrdma *x, const struct xport_params *p)
{
	int64_t deadline = clock_now_us() + (int64_t)p->connect_timeout_ms * 1000;
	struct proto_cm_priv_pool_wire priv;
	struct rdma_conn_param param, resp;
	struct proto_hello h;
	unsigned int init_depth;
	int rc;

	xport_params_hello(p, &h);
	if (h.pool[0]) {
		rc = xrdma_pool_id(x, p, &h.pool_id);
		if (rc)
			return rc;
	}
	rc = verbs_cm_channel_open(&x->ec);
	if (rc) {
		xrdma_setup_msg(x, "rdma_cm event channel: %s", g_strerror(-rc));
		return rc;
	}
	if (rdma_create_id(x->ec, &x->id, x, RDMA_PS_TCP)) {
		rc = -errno;
		xrdma_setup_msg(x, "rdma_create_id failed: %s", g_strerror(-rc));
		return rc;
	}
	rc = xrdma_resolve(x, p, deadline);
	if (rc)
		return rc;
	if (!x->id->verbs)
		return -ENODEV;
	x->ctx = x->id->verbs;
	x->port = x->id->port_num;
	snprintf(x->base.peer, sizeof(x->base.peer), "rdma %s:%u (%s)", p->host, p->port,
		 ibv_get_device_name(x->ctx->device));

	rc = xrdma_setup_verbs(x, true);
	if (rc)
		return rc;
	rc = verbs_qp_to_init(x->qp, x->port, IBV_ACCESS_LOCAL_WRITE, 0);
	if (rc)
		return rc;
	rc = xrdma_post_all_recvs(x);
	if (rc)
		return rc;

	init_depth =
	    (unsigned int)verbs_rd_atomic_depth(x->dev.max_qp_init_rd_atom, 0, XRDMA_MAX_RD_ATOMIC);
	memset(&param, 0, sizeof(param));
	param.private_data = &priv;
	param.private_data_len = (uint8_t)proto_cm_priv_pack(&priv, &h);
	param.initiator_depth = (uint8_t)init_depth;
	param.responder_resources =
	    (uint8_t)verbs_rd_atomic_depth(x->dev.max_qp_rd_atom, 0, XRDMA_MAX_RD_ATOMIC);
	param.retry_count = XRDMA_CM_RETRY;
	param.rnr_retry_count = VERBS_RMEM_RNR_RETRY;
	param.qp_num = x->qp->qp_num;
	if (rdma_connect(x->id, &param)) {
		rc = -errno;
		xrdma_setup_msg(x, "rdma_connect(%s) failed: %s", x->base.peer, g_strerror(-rc));
		return rc;
	}
	/* the QP is not attached to the id: rdma_cm hands us the REP to act on */
	rc = xrdma_cm_expect(x, RDMA_CM_EVENT_CONNECT_RESPONSE, deadline, &resp);
	if (rc)
		return rc;
	rc = xrdma_cm_qp_up(x, init_depth);
	if (rc)
		return rc;
	if (rdma_establish(x->id)) {
		rc = -errno;
		xrdma_setup_msg(x, "rdma_establish(%s) failed: %s", x->base.peer, g_strerror(-rc));
		return rc;
	}
	x->established = true;
	x->last_progress_us = clock_now_us();
	g_debug("%s: connected, QP 0x%x, depth %u, inline %u, atomics %s", x->base.peer,
		x->qp->qp_num, x->base.depth, x->max_inline, x->dev.atomics ? "yes" : "no");
	return 0;
}

/*
 * PROTO_HELLO over SEND/RECV: the pool descriptor with this device's rkeys.
 * It names the pool the QP was bound to at connect (xrdma_pool_id created
 * it if it was to be), never asking to create it.
 */
static int xrdma_hello(struct xrdma *x, const struct xport_params *p)
{
	int64_t deadline = clock_now_us() + (int64_t)p->connect_timeout_ms * 1000;
	struct proto_hello_pool_wire hello;
	struct proto_hello h;
	size_t hello_len;
	uint32_t len = 0;
	void *buf;
	int rc;

	buf = malloc(PROTO_MAX_CTRL);
	if (!buf)
		return -ENOMEM;
	xport_params_hello(p, &h);
	h.create_size = 0;
	hello_len = proto_hello_pack(&hello, &h);
	rc = xrdma_call_rdma(x, PROTO_HELLO, &hello, (uint32_t)hello_len, buf, PROTO_MAX_CTRL, &len,
			     deadline);
	if (rc == 0)
		rc = proto_pool_unpack(buf, len, &x->base.pool);
	if (rc)
		xrdma_setup_msg(x, "%s: HELLO failed: %s", x->base.peer, g_strerror(-rc));
	free(buf);
	return rc;
}

/* ---- the out-of-band path ---- */

static int xrdma_first_active_port(struct xrdma *x, struct verbs_port_attr *pattr)
{
	uint8_t port;

	for (port = 1; port <= x->dev.phys_port_cnt; port++) {
		if (verbs_query_port(x->ctx, port, pattr) == 0 && pattr->state == IBV_PORT_ACTIVE) {
			x->port = port;
			return 0;
		}
	}
	xrdma_setup_msg(x, "%s has no ACTIVE port", x->dev.name);
	return -ENODEV;
}

/* the oob path's local half: device, QP in INIT, the port and GID to announce */
static int xrdma_oob_local(struct xrdma *x, const struct xport_params *p,
			   struct verbs_port_attr *pattr, int *gid_index, union ibv_gid *gid)
{
	int rc;

	rc = verbs_open_by_name(p->rdma_dev, &x->own_ctx);
	if (rc)
		return rc;
	x->ctx = x->own_ctx;
	rc = xrdma_setup_verbs(x, false);
	if (rc)
		return rc;
	rc = xrdma_first_active_port(x, pattr);
	if (rc)
		return rc;
	rc = verbs_find_gid(x->ctx, x->port, gid_index, gid);
	if (rc)
		return rc == -ENOENT ? -ENODEV : rc;
	rc = verbs_qp_to_init(x->qp, x->port, IBV_ACCESS_LOCAL_WRITE, 0);
	if (rc)
		return rc;
	snprintf(x->base.peer, sizeof(x->base.peer), "rdma-oob %s:%u (%s)", p->host, p->port,
		 x->dev.name);
	return 0;
}

/*
 * Send HELLO + our QP over a new TCP control connection; the response is
 * the server's QP and the pool (into x->base.pool). 0 or -errno.
 */
static int xrdma_oob_exchange(struct xrdma *x, const struct xport_params *p,
			      const struct proto_qp_info *mine, struct proto_qp_info *theirs,
			      int64_t deadline)
{
	const size_t qp_len = sizeof(struct proto_qp_info_wire);
	struct proto_qp_exchange_pool_wire ex;
	struct proto_hello h;
	size_t ex_len;
	struct proto_hdr hdr;
	struct iovec iov[2];
	struct proto_msg m;
	void *payload = NULL;
	int rc;

	rc = net_connect(p->host, p->port, p->connect_timeout_ms);
	if (rc < 0) {
		xrdma_setup_msg(x, "%s: TCP connect failed: %s", x->base.peer, g_strerror(-rc));
		return rc;
	}
	x->ctrl_fd = rc;
	rc = net_set_nonblock(x->ctrl_fd, true);
	if (rc)
		return rc;
	xport_params_hello(p, &h);
	ex_len = proto_qp_exchange_pack(&ex, &h, mine);
	proto_request_iov(&hdr, iov, PROTO_QP_EXCHANGE, &ex, (uint32_t)ex_len, ++x->ctrl_id);
	rc = net_io_full(x->ctrl_fd, iov, 2, true, deadline);
	if (rc == 0)
		rc = xrdma_tcp_read_response(x, PROTO_QP_EXCHANGE, x->ctrl_id, &m, &payload,
					     deadline);
	if (rc) {
		xrdma_setup_msg(x, "%s: QP exchange failed: %s", x->base.peer, g_strerror(-rc));
		return rc == -ECONNRESET ? -ECONNREFUSED : rc;
	}
	if (m.status != PROTO_OK) {
		rc = proto_status_to_errno(m.status);
		xrdma_setup_msg(x, "%s: server refused the QP exchange: %s", x->base.peer,
				   proto_status_str(m.status));
		/* a memserver that serves no RDMA: the caller may fall back to TCP */
		if (rc == -EOPNOTSUPP)
			rc = -ECONNREFUSED;
		goto free_payload;
	}
	rc = m.len >= qp_len ? proto_qp_info_unpack(payload, qp_len, theirs) : -EBADMSG;
	if (rc == 0)
		rc = proto_pool_unpack((char *)payload + qp_len, m.len - qp_len, &x->base.pool);
	if (rc)
		xrdma_setup_msg(x, "%s: malformed QP exchange response: %s", x->base.peer,
				   g_strerror(-rc));
free_payload:
	free(payload);
	return rc;
}

static int xrdma_connect_oob(struct xrdma *x, const struct xport_params *p)
{
	int64_t deadline = clock_now_us() + (int64_t)p->connect_timeout_ms * 1000;
	struct proto_qp_info mine, theirs;
	struct verbs_port_attr pattr;
	struct verbs_rts_params rts;
	struct verbs_peer peer;
	union ibv_gid gid;
	int gid_index;
	int rc;

	rc = xrdma_oob_local(x, p, &pattr, &gid_index, &gid);
	if (rc)
		return rc;
	memset(&mine, 0, sizeof(mine));
	mine.qpn = x->qp->qp_num;
	mine.psn = g_random_int() & 0xffffff;
	memcpy(mine.gid, gid.raw, sizeof(mine.gid));
	mine.lid = pattr.lid;
	mine.mtu = (uint8_t)pattr.active_mtu;
	mine.max_rd_atomic =
	    (uint8_t)verbs_rd_atomic_depth(x->dev.max_qp_rd_atom, 0, XRDMA_MAX_RD_ATOMIC);
	rc = xrdma_oob_exchange(x, p, &mine, &theirs, deadline);
	if (rc)
		return rc;

	memset(&peer, 0, sizeof(peer));
	peer.qpn = theirs.qpn;
	peer.psn = theirs.psn;
	peer.lid = theirs.lid;
	memcpy(peer.gid.raw, theirs.gid, sizeof(peer.gid.raw));
	peer.global = pattr.link_layer == IBV_LINK_LAYER_ETHERNET || theirs.lid == 0;
	peer.sgid_index = gid_index;
	peer.port = x->port;
	peer.mtu = MIN(pattr.active_mtu, (enum ibv_mtu)theirs.mtu);
	peer.max_dest_rd_atomic = mine.max_rd_atomic;
	verbs_rts_init(&rts, mine.psn,
		       (uint8_t)verbs_rd_atomic_depth(x->dev.max_qp_init_rd_atom, theirs.max_rd_atomic,
						      XRDMA_MAX_RD_ATOMIC));
	rc = verbs_qp_up(x->qp, &peer, &rts);
	if (rc)
		return rc;
	x->last_progress_us = clock_now_us();
	g_debug("%s: QP 0x%x up by hand toward QP 0x%x (psn %u/%u, mtu %d)", x->base.peer,
		x->qp->qp_num, theirs.qpn, mine.psn, theirs.psn, verbs_mtu_to_bytes(peer.mtu));
	return 0;
}

/* ---- teardown, in the order STYLE.md gives ---- */

static void xrdma_destroy(struct xrdma *x)
{
	if (!x)
		return;
	if (x->id && x->established && rdma_disconnect(x->id))
		g_debug("rdma_disconnect: %s", g_strerror(errno));
	if (x->ctrl_fd >= 0)
		close(x->ctrl_fd);
	if (x->cq.cq)
		verbs_cq_ack(&x->cq);
	verbs_qp_destroy(x->qp);
	while (x->mrs) {
		struct xrdma_mr *m = x->mrs;

		x->mrs = m->next;
		g_debug("%s: MR of %zu bytes still registered at close", x->base.peer, m->base.len);
		xrdma_mr_free(m);
	}
	verbs_mr_dereg(&x->ctrl);
	verbs_cq_destroy(&x->cq);
	verbs_pd_free(x->pd);
	if (x->id)
		rdma_destroy_id(x->id);
	if (x->ec)
		rdma_destroy_event_channel(x->ec);
	verbs_close(x->own_ctx);
	free(x->slots);
	free(x->wrs);
	free(x->sges);
	proto_pool_clear(&x->base.pool);
	free(x);
}

static void xrdma_close(struct xport *xb)
{
	if (xb)
		xrdma_destroy(container_of(xb, struct xrdma, base));
}

static int xrdma_connect(const struct xport_params *params, struct xport **out)
{
	struct xport_params pd = *params;
	const struct xport_params *p = &pd;
	struct xrdma *x;
	int rc;

	*out = NULL;
	if (!p->host)
		return -EINVAL;
	/* xport_connect() fills the defaults; be safe when called directly */
	if (!pd.port)
		pd.port = PROTO_DEFAULT_PORT;
	if (pd.connect_timeout_ms <= 0)
		pd.connect_timeout_ms = 5000;
	if (pd.op_timeout_ms <= 0)
		pd.op_timeout_ms = 10000;
	x = calloc(1, sizeof(*x));
	if (!x)
		return -ENOMEM;
	x->ctrl_fd = -1;
	x->oob = p->rdma_oob_qp;
	x->quiet = p->quiet;
	x->base.ops = &xport_rdma_ops;
	x->base.poll_mode = p->poll_mode;
	x->base.spin_us = p->spin_us ? p->spin_us : 50;
	x->base.depth = p->queue_depth ? p->queue_depth : 128;
	x->base.op_timeout_ms = p->op_timeout_ms;
	snprintf(x->base.peer, sizeof(x->base.peer), "rdma %s:%u", p->host, p->port);

	if (x->oob) {
		rc = xrdma_connect_oob(x, p);
	} else {
		rc = xrdma_connect_cm(x, p);
		if (rc == 0)
			rc = xrdma_hello(x, p);
	}
	if (rc)
		goto destroy;
	*out = &x->base;
	return 0;

destroy:
	xrdma_destroy(x);
	return rc;
}

const struct xport_ops xport_rdma_ops = {
	.name = "rdma",
	.connect = xrdma_connect,
	.close = xrdma_close,
	.reg_mr = xrdma_reg_mr,
	.dereg_mr = xrdma_dereg_mr,
	.post = xrdma_post,
	.poll = xrdma_poll,
	.inflight = xrdma_inflight,
	.call = xrdma_call,
};
