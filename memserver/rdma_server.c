/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * rdma_server.c - the memserver's RDMA side (rdma_server.h).
 *
 * An rdma_cm listener accepts RC connections; the token hash, protocol
 * version and (PROTO_CM_POOL_ID) the pool_id of a named pool arrive in the
 * connect private data and a refusal goes back as a REJECT carrying struct
 * proto_cm_reject_wire.
 *
 * Isolation. Every pool has its own protection domain on each device (struct
 * rs_pd), made when a client of that pool first arrives on the device: the
 * pool is registered in it once (local write + remote read/write/atomic), in
 * pieces no larger than the device's max MR size; those pieces are the regions
 * of that (device, pool) RDMA descriptor (env RMEM_RDMA_MAX_MR_SIZE lowers that
 * limit, so tests can exercise the split on devices with no real limit). A
 * client's QP is made in its pool's PD, so the NIC itself refuses another
 * pool's rkey (a remote access error), whatever the client forges. When a
 * pool's last reference drops (registry.h), its PDs and MRs are freed through
 * the registry's release hook, before its memory is unmapped.
 *
 * One-sided READ/WRITE/atomics then need no server CPU at all; the server only
 * answers control SENDs (HELLO -> the bound pool's descriptor, PING, STATS,
 * FENCE).
 *
 * As in the client (xport_rdma.c), a QP is never attached to its cm_id: it is
 * created with the verbs wrappers and brought to RTS with the parameters
 * rdma_cm negotiated (rdma_init_qp_attr) before rdma_accept. Every verbs object
 * lives on a device context this file opens itself, so nothing depends on the
 * lifetime of librdmacm's internal contexts.
 *
 * The out-of-band path (ms->oob_accept / oob_release, called from the TCP
 * server's connection threads for PROTO_QP_EXCHANGE) brings a QP up by hand
 * toward the client's parameters on the same per-device state.
 *
 * References. An rdma_cm client holds a reference to its pool (registry_open_id)
 * until it is destroyed; an out-of-band client uses the reference of the TCP
 * connection that carried its QP_EXCHANGE (which releases the client first).
 * Dropping a reference may run the release hook, which takes rs->lock, so a
 * destroyed client that holds one is parked on rs->closing and its reference
 * dropped by rs_unlock() after rs->lock is let go.
 *
 * Threads. The cm thread polls the event channel and a stop eventfd; the
 * completion thread waits in epoll on every cm client's completion channel and
 * the same eventfd. Both stop through the eventfd and are joined. rs->lock
 * (the only lock here) protects the device list, both client lists and each
 * client's verbs objects; it is held while a client's completions are
 * processed, so the cm thread can never free a client under the completion
 * thread. The completion thread names clients by serial number (epoll data),
 * never by pointer, so an event that races with a client's teardown finds
 * nothing instead of freed memory.
 *
 * Fencing. The client id arrives in the CM private data (QP_EXCHANGE's hello
 * on the out-of-band path; the id in a later HELLO SEND is not what counts).
 * A connect is checked against its pool's fenced set (and the pool's deletion)
 * and the client listed under rs->lock (fence.c: no gap). The revoke hook
 * moves every QP of the victim on that pool (or of a deleted pool, every QP
 * of it) to ERR (ibv_modify_qp through verbs.c) and disconnects it, under
 * rs->lock:
 * from then on the QP accepts no packet, so none of the victim's one-sided
 * WRITEs or atomics lands. rxe moves the QP synchronously; a hardware NIC may
 * still complete a WRITE whose data it was already placing in memory when
 * the modify arrived. A FENCE that arrives as a control SEND is carried out
 * by the completion thread after it let go of rs->lock (the hook takes it),
 * and answered then, if its sender is still there.
 */
#define G_LOG_DOMAIN "rmemfs-rdma-server"

#include "config.h"

#include "rdma_server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <unistd.h>

#include <glib.h>
#include <rdma/rdma_cma.h>

#include "memserver.h"
#include "net.h"
#include "pool.h"
#include "proto.h"
#include "units.h"
#include "verbs.h"

#define RS_NRECV 2 /* control receives per client; send buffer i answers receive i */
#define RS_CTRL_BUF (sizeof(struct proto_hdr) + PROTO_MAX_CTRL)
#define RS_BACKLOG 64
#define RS_MAX_RD_ATOMIC 16
#define RS_MR_ALIGN (1ULL << 20) /* RDMA region pieces are whole MiBs (proto_pool_resolve) */
#define RS_GID_SCAN_GAP 8 /* stop scanning a GID table after this many empty entries */
#define RS_EPOLL_STOP 0 /* epoll data of the stop eventfd; clients have serials >= 1 */

#define RS_WRID_RECV 0x100U
#define RS_WRID_SEND 0x200U

/* one RDMA device clients arrive on */
struct rs_dev {
	struct rs_dev *next;
	struct ibv_context *ctx; /* our own */
	struct verbs_device_attr attr;
	/* the out-of-band path's port, filled when that path first uses the device */
	bool oob_ready;
	uint8_t oob_port;
	int oob_gid_index;
	union ibv_gid oob_gid;
	struct verbs_port_attr oob_pattr;
};

/* one pool on one device: its own protection domain and the pool registered in it */
struct rs_pd {
	struct rs_pd *next;
	struct rs_dev *dev;
	struct registry_pool *rp; /* no reference: freed by the release hook before rp goes */
	struct ibv_pd *pd;
	struct verbs_mr *mrs;
	unsigned int nmrs;
	struct proto_pool pool; /* the descriptor with this PD's rkeys */
	void *pool_wire; /* packed once for every HELLO */
	size_t pool_wire_len;
};

struct rs_client {
	struct rs_client *next;
	uint64_t serial;
	struct rs_dev *dev;
	struct rs_pd *pd; /* its pool's PD on dev: the QP and control buffers live in it */
	struct registry_pool *rp; /* the pool it is bound to */
	bool holds_ref; /* an rdma_cm client's own reference to rp (registry_close) */
	struct rdma_cm_id *id; /* NULL on the out-of-band path */
	struct verbs_cq cq;
	struct ibv_qp *qp;
	struct verbs_mr ctrl; /* RS_NRECV receive buffers, then RS_NRECV send buffers */
	bool in_epoll;
	bool established; /* ESTABLISHED seen: disconnect at stop */
	bool counted; /* in stats.clients_now (from rdma_accept on) */
	bool revoked; /* fenced: QP in ERR, disconnected */
	uint64_t client_id; /* from the CM private data / QP_EXCHANGE */
	char peer[64];
};

/* a FENCE request the completion thread carries out after releasing rs->lock */
struct rs_fence_req {
	bool pending;
	uint64_t serial; /* the requesting client */
	unsigned int i; /* its receive (and send) buffer */
	uint64_t id; /* request id */
	uint64_t victim;
	struct registry_pool *rp; /* the fencer's pool, with a reference (registry_hold) */
};

struct rdma_server {
	struct memserver *ms;
	struct rdma_event_channel *ec;
	struct rdma_cm_id *listen_id;
	int stop_fd;
	int epfd;
	pthread_t cm_thread;
	pthread_t comp_thread;
	bool cm_running;
	bool comp_running;
	char devices[256];

	pthread_mutex_t lock; /* protects everything below */
	struct rs_dev *devs;
	struct rs_pd *pds;
	struct rs_client *closing; /* destroyed clients whose pool reference rs_unlock drops */
	struct rs_client *clients; /* rdma_cm clients */
	struct rs_client *oob_clients;
	uint64_t next_serial;
};

static void rs_uncount(uint64_t *counter)
{
	__atomic_sub_fetch(counter, 1, __ATOMIC_RELAXED);
}

static void rs_client_revoke(struct rs_client *c);

/* let go of rs->lock, then drop the pool references of the clients destroyed under it */
static void rs_unlock(struct rdma_server *rs)
{
	struct rs_client *c = rs->closing;

	rs->closing = NULL;
	pthread_mutex_unlock(&rs->lock);
	while (c) {
		struct rs_client *next = c->next;

		registry_close(&rs->ms->reg, c->rp, c->client_id);
		free(c);
		c = next;
	}
}

/* ---- per-device state, and per (device, pool) the PD with the registered pool ---- */

static void rs_dev_free(struct rs_dev *d)
{
	if (!d)
		return;
	verbs_close(d->ctx);
	free(d);
}

static void rs_pd_free(struct rs_pd *d)
{
	unsigned int i;

	if (!d)
		return;
	for (i = 0; i < d->nmrs; i++)
		verbs_mr_dereg(&d->mrs[i]);
	free(d->mrs);
	free(d->pool_wire);
	proto_pool_clear(&d->pool);
	verbs_pd_free(d->pd);
	free(d);
}

static void rs_explain_memlock(size_t len, int rc)
{
	struct rlimit rl;
	char cur[32] = "unknown";

	if (getrlimit(RLIMIT_MEMLOCK, &rl) == 0) {
		if (rl.rlim_cur == RLIM_INFINITY)
			snprintf(cur, sizeof(cur), "unlimited");
		else
			snprintf(cur, sizeof(cur), "%llu KiB",
				 (unsigned long long)rl.rlim_cur / 1024);
	}
	g_message("registering %zu bytes of the pool with the RDMA device failed: %s. The "
		  "locked-memory limit (RLIMIT_MEMLOCK, now %s) must cover the whole pool: raise "
		  "it with 'ulimit -l unlimited' (or a memlock line in "
		  "/etc/security/limits.conf, or LimitMEMLOCK=infinity in a systemd unit), or "
		  "run the memserver with CAP_IPC_LOCK",
		  len, g_strerror(-rc), cur);
}

/*
 * Register every pool region, split into pieces of at most the device's max
 * MR size (rounded down to whole MiBs), and describe the pieces as the
 * regions of this device's pool descriptor.
 */
static int rs_pd_register_pool(struct rs_pd *d, const struct pool *pool)
{
	const char *cap = getenv("RMEM_RDMA_MAX_MR_SIZE");
	const struct verbs_device_attr *attr = &d->dev->attr;
	uint64_t piece = attr->max_mr_size;
	unsigned int nreg = pool_region_count(pool);
	unsigned int n = 0, i, k = 0;
	uint64_t v;
	ssize_t packed;
	int rc;

	/* a smaller cap than the device's, so tests can exercise the split on any device */
	if (cap && *cap && units_parse_size(cap, &v) == 0 && v && v < piece)
		piece = v;
	piece &= ~(RS_MR_ALIGN - 1);

	if (!piece) {
		g_message("%s: max MR size %" PRIu64 " is below 1 MiB", attr->name,
			  attr->max_mr_size);
		return -EINVAL;
	}
	for (i = 0; i < nreg; i++) {
		const struct pool_region *r = pool_region_get(pool, i);

		n += (unsigned int)(r->len / piece + (r->len % piece != 0));
	}
	if (n == 0 || n > PROTO_MAX_REGIONS) {
		g_message("%s: the pool needs %u memory regions (max MR size %" PRIu64
			  "), more than a descriptor holds (%u)",
			  attr->name, n, attr->max_mr_size, PROTO_MAX_REGIONS);
		return -E2BIG;
	}
	d->mrs = calloc(n, sizeof(*d->mrs));
	d->pool.regions = calloc(n, sizeof(*d->pool.regions));
	if (!d->mrs || !d->pool.regions)
		return -ENOMEM;

	for (i = 0; i < nreg; i++) {
		const struct pool_region *r = pool_region_get(pool, i);
		uint64_t off;

		/* piece may be UINT64_MAX (no limit): never compute off + piece */
		for (off = 0; off < r->len;) {
			uint64_t len = MIN(piece, r->len - off);
			char *addr = (char *)r->base + off;

			rc = verbs_mr_reg(d->pd, addr, len, VERBS_ACCESS_REMOTE_ALL, &d->mrs[k]);
			if (rc) {
				if (rc == -ENOMEM || rc == -EPERM || rc == -EAGAIN)
					rs_explain_memlock(len, rc);
				return rc;
			}
			d->nmrs = k + 1;
			d->pool.regions[k].addr = (uint64_t)(uintptr_t)addr;
			d->pool.regions[k].len = len;
			d->pool.regions[k].rkey = d->mrs[k].rkey;
			k++;
			off += len;
		}
	}
	d->pool.nregions = k;
	d->pool.size = pool_size(pool);
	d->pool.pool_id = pool_id(pool);
	d->pool.flags = pool_flags(pool);

	d->pool_wire_len = proto_pool_wire_size(&d->pool);
	d->pool_wire = malloc(d->pool_wire_len);
	if (!d->pool_wire)
		return -ENOMEM;
	packed = proto_pool_pack(&d->pool, d->pool_wire, d->pool_wire_len);
	if (packed < 0)
		return (int)packed;
	if (d->pool_wire_len + sizeof(struct proto_hdr) > RS_CTRL_BUF)
		return -EMSGSIZE;
	return 0;
}

/* the state for device @name (NULL: the first with an ACTIVE port), made on first use */
static int rs_dev_get(struct rdma_server *rs, const char *name, struct rs_dev **out)
{
	struct ibv_context *ctx = NULL;
	struct rs_dev *d;
	const char *dev_name;
	int rc;

	for (d = rs->devs; name && d; d = d->next) {
		if (strcmp(d->attr.name, name) == 0) {
			*out = d;
			return 0;
		}
	}
	rc = verbs_open_by_name(name, &ctx);
	if (rc)
		return rc;
	dev_name = ibv_get_device_name(ctx->device);
	for (d = rs->devs; d; d = d->next) {
		if (strcmp(d->attr.name, dev_name) == 0) {
			verbs_close(ctx);
			*out = d;
			return 0;
		}
	}

	d = calloc(1, sizeof(*d));
	if (!d) {
		verbs_close(ctx);
		return -ENOMEM;
	}
	d->ctx = ctx;
	rc = verbs_query_device(ctx, &d->attr);
	if (rc)
		goto free_dev;
	d->next = rs->devs;
	rs->devs = d;
	*out = d;
	return 0;

free_dev:
	rs_dev_free(d);
	return rc;
}

/* pool @rp's PD on device @d, made (and the pool registered in it) on first use */
static int rs_pd_get(struct rdma_server *rs, struct rs_dev *dev, struct registry_pool *rp,
		     struct rs_pd **out)
{
	struct rs_pd *d;
	int rc;

	for (d = rs->pds; d; d = d->next) {
		if (d->dev == dev && d->rp == rp) {
			*out = d;
			return 0;
		}
	}
	d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	d->dev = dev;
	d->rp = rp;
	rc = verbs_pd_alloc(dev->ctx, &d->pd);
	if (rc)
		goto free_pd;
	rc = rs_pd_register_pool(d, rp->pool);
	if (rc)
		goto free_pd;
	g_debug("%s: pool '%s' registered in its own PD as %u region(s), atomics %s",
		dev->attr.name, rp->name, d->pool.nregions, dev->attr.atomics ? "yes" : "no");
	d->next = rs->pds;
	rs->pds = d;
	*out = d;
	return 0;

free_pd:
	rs_pd_free(d);
	return rc;
}

/* the registry's release hook: pool @rp is going, free its PDs (no client uses them) */
static void rdma_server_pool_release(void *ctx, struct registry_pool *rp)
{
	struct rdma_server *rs = ctx;
	struct rs_pd **pp = &rs->pds, *d;

	pthread_mutex_lock(&rs->lock);
	while ((d = *pp)) {
		if (d->rp != rp) {
			pp = &d->next;
			continue;
		}
		*pp = d->next;
		g_debug("%s: pool '%s' gone, its PD freed", d->dev->attr.name, rp->name);
		rs_pd_free(d);
	}
	rs_unlock(rs);
}

/* ---- clients ---- */

static void *rs_client_recv_buf(struct rs_client *c, unsigned int i)
{
	return (char *)c->ctrl.addr + (size_t)i * RS_CTRL_BUF;
}

static void *rs_client_send_buf(struct rs_client *c, unsigned int i)
{
	return (char *)c->ctrl.addr + (size_t)(RS_NRECV + i) * RS_CTRL_BUF;
}

static int rs_client_post_recv(struct rs_client *c, unsigned int i)
{
	return verbs_post_recv_buf(c->qp, &c->ctrl, rs_client_recv_buf(c, i), RS_CTRL_BUF,
				   RS_WRID_RECV | i);
}

/* NULL-tolerant; the caller holds rs->lock (let go with rs_unlock) and has unlinked c */
static void rs_client_destroy(struct rdma_server *rs, struct rs_client *c)
{
	if (!c)
		return;
	if (c->in_epoll && epoll_ctl(rs->epfd, EPOLL_CTL_DEL, verbs_cq_fd(&c->cq), NULL))
		g_warning("epoll_ctl(DEL) failed: %s", g_strerror(errno));
	if (c->id && c->established && rdma_disconnect(c->id))
		g_debug("%s: rdma_disconnect: %s", c->peer, g_strerror(errno));
	if (c->counted)
		rs_uncount(&rs->ms->stats.clients_now);
	if (c->cq.cq)
		verbs_cq_ack(&c->cq);
	verbs_qp_destroy(c->qp);
	verbs_mr_dereg(&c->ctrl);
	verbs_cq_destroy(&c->cq);
	if (c->id)
		rdma_destroy_id(c->id);
	if (c->holds_ref) {
		/* its reference goes in rs_unlock, once rs->lock is free */
		c->next = rs->closing;
		rs->closing = c;
		return;
	}
	free(c);
}

static void rs_client_unlink(struct rs_client **list, struct rs_client *c)
{
	struct rs_client **pp;

	for (pp = list; *pp; pp = &(*pp)->next) {
		if (*pp == c) {
			*pp = c->next;
			return;
		}
	}
}

/* CQ, QP (RESET) and, with @ctrl, the control buffers */
static int rs_client_setup(struct rs_client *c, bool ctrl)
{
	struct verbs_qp_caps caps;
	int rc;

	rc = verbs_cq_create(c->dev->ctx, 2 * RS_NRECV + 2, ctrl, 2 * RS_NRECV + 2, &c->cq);
	if (rc)
		return rc;
	verbs_qp_caps_default(&caps);
	caps.max_send_wr = RS_NRECV + 1;
	caps.max_recv_wr = RS_NRECV;
	caps.max_send_sge = 1;
	caps.max_recv_sge = 1;
	caps.max_inline_data = 0;
	rc = verbs_qp_create(c->pd->pd, IBV_QPT_RC, &c->cq, &c->cq, &caps, &c->qp);
	if (rc)
		return rc;
	if (ctrl) {
		rc = verbs_mr_alloc(c->pd->pd, 2 * RS_NRECV * RS_CTRL_BUF, IBV_ACCESS_LOCAL_WRITE,
				    &c->ctrl);
		if (rc)
			return rc;
	}
	return 0;
}

/* ---- control messages (completion thread, rs->lock held) ---- */

static void rs_client_respond(struct rs_client *c, unsigned int i, uint16_t type,
				uint32_t status, uint64_t id, const void *payload, uint32_t len)
{
	struct proto_hdr *hdr = rs_client_send_buf(c, i);
	struct ibv_send_wr wr;
	struct ibv_sge sge;

	if (status != PROTO_OK)
		len = 0;
	proto_hdr_pack(hdr, type | PROTO_RESPONSE, status, len, id);
	if (len)
		memmove(hdr + 1, payload, len);
	if (verbs_sge(&sge, &c->ctrl, hdr, (uint32_t)(sizeof(*hdr) + len)))
		return;
	verbs_wr_send(&wr, RS_WRID_SEND | i, &sge, 1, IBV_SEND_SIGNALED);
	if (verbs_post_send(c->qp, &wr, NULL) == 0)
		return;
	/* no SEND completion will re-post the receive: do it now */
	if (rs_client_post_recv(c, i))
		g_message("%s: control receive not re-posted", c->peer);
}

/* note a FENCE for the completion thread; answer it at once if it cannot be carried out */
static void rs_client_fence_request(struct rdma_server *rs, struct rs_client *c,
				      unsigned int i, const struct proto_msg *m,
				      const void *payload, struct rs_fence_req *req)
{
	uint32_t status = PROTO_OK;
	uint64_t victim;

	if (proto_fence_unpack(payload, m->len, &victim)) {
		g_message("%s: malformed FENCE (%u bytes; wants a non-zero 8-byte client id)",
			  c->peer, m->len);
		status = PROTO_E_MALFORMED;
	} else if (victim == c->client_id || req->pending) {
		g_message("%s: FENCE %s refused", c->peer,
			  req->pending ? "while another is pending" : "of its own client id");
		status = PROTO_E_STATE;
	}
	if (status != PROTO_OK) {
		memserver_count(&rs->ms->stats.bad_requests, 1);
		rs_client_respond(c, i, m->type, status, m->id, NULL, 0);
		return;
	}
	req->pending = true;
	req->rp = c->rp;
	registry_hold(&rs->ms->reg, c->rp);
	req->serial = c->serial;
	req->i = i;
	req->id = m->id;
	req->victim = victim;
}

static void rs_client_request(struct rdma_server *rs, struct rs_client *c, unsigned int i,
				uint32_t len, struct rs_fence_req *fence)
{
	struct memserver *ms = rs->ms;
	const struct proto_hdr *hdr = rs_client_recv_buf(c, i);
	const void *payload = hdr + 1;
	struct proto_hello hello;
	struct tenant_who who;
	struct proto_stats_wire sw;
	struct proto_stats st;
	struct proto_msg m;
	int rc;

	memset(&m, 0, sizeof(m));
	rc = len >= sizeof(*hdr) ? proto_hdr_unpack(hdr, &m) : -EBADMSG;
	if (rc == 0 && ((m.type & PROTO_RESPONSE) || m.len != len - sizeof(*hdr)))
		rc = -EBADMSG;
	if (rc) {
		g_message("%s: malformed control message (%u bytes): %s", c->peer, len,
			  g_strerror(-rc));
		memserver_count(&ms->stats.bad_requests, 1);
		rs_client_respond(c, i, m.type & ~PROTO_RESPONSE,
				    rc == -EPROTONOSUPPORT ? PROTO_E_VERSION : PROTO_E_MALFORMED,
				    m.id, NULL, 0);
		return;
	}

	switch (m.type) {
	case PROTO_HELLO:
		if (proto_hello_unpack(payload, m.len, &hello)) {
			memserver_count(&ms->stats.bad_requests, 1);
			rs_client_respond(c, i, m.type, PROTO_E_MALFORMED, m.id, NULL, 0);
			return;
		}
		if (tenant_identify(&ms->tenants, hello.token_hash, &who) ||
		    !tenant_may_reach(&who, c->rp->owner)) {
			g_message("%s: HELLO with a wrong token, refused", c->peer);
			memserver_count(&ms->stats.auth_failures, 1);
			rs_client_respond(c, i, m.type, PROTO_E_AUTH, m.id, NULL, 0);
			return;
		}
		/* the QP is bound to its pool: a HELLO may name only that one */
		if (hello.control || (hello.pool[0] && strcmp(hello.pool, c->rp->name))) {
			g_message("%s: HELLO for pool '%s' on a QP of pool '%s', refused", c->peer,
				  hello.pool, c->rp->name);
			memserver_count(&ms->stats.bad_requests, 1);
			rs_client_respond(c, i, m.type, PROTO_E_STATE, m.id, NULL, 0);
			return;
		}
		rs_client_respond(c, i, m.type, PROTO_OK, m.id, c->pd->pool_wire,
				    (uint32_t)c->pd->pool_wire_len);
		return;
	case PROTO_PING:
		rs_client_respond(c, i, m.type, PROTO_OK, m.id, payload, m.len);
		return;
	case PROTO_FENCE:
		rs_client_fence_request(rs, c, i, &m, payload, fence);
		return;
	case PROTO_STATS:
		memserver_stats_snapshot(ms, &st);
		proto_stats_pack(&sw, &st);
		rs_client_respond(c, i, m.type, PROTO_OK, m.id, &sw, sizeof(sw));
		return;
	default:
		/* data travels one-sided; the TCP emulation's messages have no place here */
		g_message("%s: %s over RDMA SEND is not supported", c->peer,
			  proto_type_str(m.type));
		memserver_count(&ms->stats.bad_requests, 1);
		rs_client_respond(c, i, m.type, PROTO_E_UNSUPPORTED, m.id, NULL, 0);
		return;
	}
}

static void rs_client_service(struct rdma_server *rs, struct rs_client *c,
				struct rs_fence_req *fence)
{
	int rc, n, k;

	/* consume the event and re-arm before draining, so no completion is missed */
	rc = verbs_cq_wait(&c->cq, 0);
	if (rc && rc != -ETIMEDOUT)
		g_message("%s: completion channel: %s", c->peer, g_strerror(-rc));
	do {
		n = verbs_cq_poll(&c->cq, 0);
		for (k = 0; k < n; k++) {
			const struct ibv_wc *wc = &c->cq.wc[k];
			unsigned int i = (unsigned int)(wc->wr_id & 0xff);

			if (i >= RS_NRECV)
				continue;
			if (wc->status != IBV_WC_SUCCESS) {
				if (wc->status != IBV_WC_WR_FLUSH_ERR)
					g_message("%s: control %s failed: %s", c->peer,
						  (wc->wr_id & RS_WRID_RECV) ? "receive" : "send",
						  verbs_wc_status_str(wc->status));
				continue;
			}
			if (wc->wr_id & RS_WRID_RECV) {
				rs_client_request(rs, c, i, wc->byte_len, fence);
			} else if (rs_client_post_recv(c, i)) {
				g_message("%s: control receive not re-posted", c->peer);
			}
		}
	} while (n == c->cq.wc_cap);
}

/* the cm client with this serial, or NULL (rs->lock held) */
static struct rs_client *rs_client_find(struct rdma_server *rs, uint64_t serial)
{
	struct rs_client *c;

	for (c = rs->clients; c; c = c->next) {
		if (c->serial == serial)
			break;
	}
	return c;
}

/* carry out a FENCE that arrived as a SEND (rs->lock not held), then answer it */
static void rdma_server_fence(struct rdma_server *rs, const struct rs_fence_req *req)
{
	int rc = memserver_fence(rs->ms, req->rp, req->victim);
	struct rs_client *c;

	pthread_mutex_lock(&rs->lock);
	c = rs_client_find(rs, req->serial);
	if (c)
		rs_client_respond(c, req->i, PROTO_FENCE, proto_errno_to_status(rc), req->id,
				    NULL, 0);
	rs_unlock(rs);
	registry_put(&rs->ms->reg, req->rp);
}

static void *rdma_server_comp_thread(void *arg)
{
	struct rdma_server *rs = arg;
	struct epoll_event evs[16];

	for (;;) {
		int n = epoll_wait(rs->epfd, evs, G_N_ELEMENTS(evs), -1);
		int i;

		if (n < 0) {
			if (errno == EINTR)
				continue;
			g_warning("epoll_wait failed: %s", g_strerror(errno));
			return NULL;
		}
		for (i = 0; i < n; i++) {
			struct rs_fence_req fence = { .pending = false };
			struct rs_client *c;

			if (evs[i].data.u64 == RS_EPOLL_STOP)
				return NULL;
			pthread_mutex_lock(&rs->lock);
			c = rs_client_find(rs, evs[i].data.u64);
			if (c)
				rs_client_service(rs, c, &fence);
			rs_unlock(rs);
			if (fence.pending)
				rdma_server_fence(rs, &fence);
		}
	}
}

/* ---- rdma_cm: connection requests (cm thread) ---- */

/* INIT -> RTR -> RTS before rdma_accept, with what the REQ negotiated */
static int rs_client_cm_qp_up(struct rs_client *c, uint8_t resp_res, uint8_t init_depth)
{
	struct verbs_rts_params rts;
	struct verbs_peer peer;
	int rc;

	rc = verbs_qp_to_init(c->qp, c->id->port_num, VERBS_ACCESS_REMOTE_ALL, 0);
	if (rc)
		return rc;
	rc = verbs_cm_qp_params(c->id, c->id->port_num, &peer, &rts);
	if (rc)
		return rc;
	peer.max_dest_rd_atomic = resp_res;
	rts.max_rd_atomic = init_depth;
	return verbs_qp_up(c->qp, &peer, &rts);
}

static void rs_peer_str(struct rdma_cm_id *id, char *buf, size_t cap)
{
	struct sockaddr *sa = rdma_get_peer_addr(id);
	char host[INET6_ADDRSTRLEN] = "?";

	if (sa && getnameinfo(sa, sa->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) :
							      sizeof(struct sockaddr_in),
			      host, sizeof(host), NULL, 0, NI_NUMERICHOST) == 0)
		snprintf(buf, cap, "rdma %s:%u", host, ntohs(rdma_get_dst_port(id)));
	else
		snprintf(buf, cap, "rdma ?");
}

/*
 * Accept a client of pool @rp (rs->lock held); fills *status for the REJECT
 * on failure. On success the client owns the caller's reference to @rp.
 */
static int rdma_server_accept(struct rdma_server *rs, struct rdma_cm_event *ev, const char *peer,
			      struct registry_pool *rp, uint64_t client_id, uint32_t *status)
{
	struct rdma_cm_id *id = ev->id;
	struct rdma_conn_param param;
	struct rs_client *c;
	struct rs_dev *d;
	struct rs_pd *pd;
	struct epoll_event pev;
	uint8_t resp_res, init_depth;
	unsigned int i;
	int rc;

	rc = memserver_admit(rs->ms, rp, client_id);
	if (rc) {
		*status = rc == -ENOENT ? PROTO_E_NOPOOL : PROTO_E_FENCED;
		return rc;
	}
	*status = PROTO_E_INTERNAL;
	rc = rs_dev_get(rs, ibv_get_device_name(id->verbs->device), &d);
	if (!rc)
		rc = rs_pd_get(rs, d, rp, &pd);
	if (rc) {
		*status = rc == -ENOMEM ? PROTO_E_NOMEM : PROTO_E_INTERNAL;
		return rc;
	}
	c = calloc(1, sizeof(*c));
	if (!c) {
		*status = PROTO_E_NOMEM;
		return -ENOMEM;
	}
	c->dev = d;
	c->pd = pd;
	c->rp = rp;
	c->id = id;
	c->serial = ++rs->next_serial;
	c->client_id = client_id;
	g_strlcpy(c->peer, peer, sizeof(c->peer));

	rc = rs_client_setup(c, true);
	if (rc)
		goto destroy_client;
	/* what the client may have outstanding against us, and we against it */
	resp_res = (uint8_t)verbs_rd_atomic_depth(d->attr.max_qp_rd_atom,
						  ev->param.conn.initiator_depth, RS_MAX_RD_ATOMIC);
	init_depth = (uint8_t)verbs_rd_atomic_depth(
	    d->attr.max_qp_init_rd_atom, ev->param.conn.responder_resources, RS_MAX_RD_ATOMIC);
	rc = rs_client_cm_qp_up(c, resp_res, init_depth);
	if (rc)
		goto destroy_client;
	for (i = 0; i < RS_NRECV; i++) {
		rc = rs_client_post_recv(c, i);
		if (rc)
			goto destroy_client;
	}
	memset(&pev, 0, sizeof(pev));
	pev.events = EPOLLIN;
	pev.data.u64 = c->serial;
	if (epoll_ctl(rs->epfd, EPOLL_CTL_ADD, verbs_cq_fd(&c->cq), &pev)) {
		rc = -errno;
		g_warning("epoll_ctl(ADD) failed: %s", g_strerror(-rc));
		goto destroy_client;
	}
	c->in_epoll = true;

	memset(&param, 0, sizeof(param));
	param.responder_resources = resp_res;
	param.initiator_depth = init_depth;
	param.rnr_retry_count = VERBS_RMEM_RNR_RETRY;
	param.qp_num = c->qp->qp_num;
	if (rdma_accept(id, &param)) {
		rc = -errno;
		g_message("%s: rdma_accept failed: %s", peer, g_strerror(-rc));
		goto destroy_client;
	}
	id->context = c;
	c->holds_ref = true;
	c->next = rs->clients;
	rs->clients = c;
	/*
	 * Counted here, not at ESTABLISHED: the client's first control SEND may
	 * be served before the cm thread sees the RTU, and must see itself.
	 */
	c->counted = true;
	memserver_count(&rs->ms->stats.clients_now, 1);
	memserver_count(&rs->ms->stats.clients_total, 1);
	memserver_count(&rs->ms->stats.rdma_connections, 1);
	g_debug("%s: accepted on %s for pool '%s', QP 0x%x", peer, d->attr.name, rp->name,
		c->qp->qp_num);
	return 0;

destroy_client:
	c->id = NULL; /* the caller rejects and destroys the id */
	rs_client_destroy(rs, c);
	return rc;
}

/* returns true when the event's id must be destroyed (after the ack) */
static bool rdma_server_on_request(struct rdma_server *rs, struct rdma_cm_event *ev)
{
	struct memserver *ms = rs->ms;
	const struct rdma_conn_param *cp = &ev->param.conn;
	struct proto_cm_reject_wire rej;
	struct registry_pool *rp = NULL;
	struct tenant_who who;
	struct proto_hello h;
	uint32_t status = PROTO_OK;
	char peer[64];
	size_t len;
	int rc;

	rs_peer_str(ev->id, peer, sizeof(peer));
	/* the CM pads private data; the base form's flags say whether a pool_id follows */
	len = cp->private_data_len;
	if (len > sizeof(struct proto_cm_priv_pool_wire))
		len = sizeof(struct proto_cm_priv_pool_wire);
	rc = cp->private_data ? proto_cm_priv_unpack(cp->private_data, len, &h) : -EBADMSG;
	if (rc == -EPROTONOSUPPORT) {
		g_message("%s: other protocol version, refused", peer);
		memserver_count(&ms->stats.bad_requests, 1);
		status = PROTO_E_VERSION;
	} else if (rc) {
		g_message("%s: malformed connect private data, refused", peer);
		memserver_count(&ms->stats.bad_requests, 1);
		status = PROTO_E_MALFORMED;
	} else if (tenant_identify(&ms->tenants, h.token_hash, &who)) {
		g_message("%s: wrong or missing token, refused", peer);
		memserver_count(&ms->stats.auth_failures, 1);
		status = PROTO_E_AUTH;
	} else if ((status = registry_open_id(&ms->reg, &who, h.pool_id, h.client_id, &rp))) {
		g_message("%s: pool %016" PRIx64 " refused: %s", peer, h.pool_id,
			  proto_status_str(status));
		memserver_count(&ms->stats.bad_requests, 1);
	} else {
		pthread_mutex_lock(&rs->lock);
		rc = rdma_server_accept(rs, ev, peer, rp, h.client_id, &status);
		rs_unlock(rs);
		if (rc == 0)
			return false;
		registry_close(&ms->reg, rp, h.client_id);
		if (rc == -EKEYREVOKED)
			g_message("%s: client %016" PRIx64 " is fenced, refused", peer,
				  h.client_id);
		else
			g_message("%s: cannot accept: %s", peer, g_strerror(-rc));
	}

	rej.magic = htonl(PROTO_MAGIC);
	rej.status = htonl(status);
	if (rdma_reject(ev->id, &rej, sizeof(rej)))
		g_message("%s: rdma_reject failed: %s", peer, g_strerror(errno));
	return true;
}

static void rdma_server_cm_event(struct rdma_server *rs, struct rdma_cm_event *ev)
{
	struct rs_client *c = ev->id && ev->id != rs->listen_id ? ev->id->context : NULL;
	struct rs_client *doomed = NULL;
	struct rdma_cm_id *doomed_id = NULL;

	switch (ev->event) {
	case RDMA_CM_EVENT_CONNECT_REQUEST:
		if (rdma_server_on_request(rs, ev))
			doomed_id = ev->id;
		break;
	case RDMA_CM_EVENT_ESTABLISHED:
		if (!c)
			break;
		pthread_mutex_lock(&rs->lock);
		c->established = true;
		/*
		 * revoked (fenced, or its pool deleted) before it was established:
		 * disconnect now, or the client would keep the connection, and its
		 * deleted pool's memory and capacity, as long as it likes
		 */
		if (c->revoked)
			rs_client_revoke(c);
		rs_unlock(rs);
		g_debug("%s: connected", c->peer);
		break;
	case RDMA_CM_EVENT_DISCONNECTED:
	case RDMA_CM_EVENT_CONNECT_ERROR:
	case RDMA_CM_EVENT_UNREACHABLE:
	case RDMA_CM_EVENT_REJECTED:
	case RDMA_CM_EVENT_DEVICE_REMOVAL:
		if (!c) {
			if (ev->event == RDMA_CM_EVENT_DEVICE_REMOVAL)
				g_message("RDMA device of the listener removed");
			break;
		}
		g_debug("%s: %s", c->peer, rdma_event_str(ev->event));
		pthread_mutex_lock(&rs->lock);
		rs_client_unlink(&rs->clients, c);
		rs_unlock(rs);
		doomed = c;
		break;
	default:
		g_debug("cm event %s (status %d)", rdma_event_str(ev->event), ev->status);
		break;
	}
	/* rdma_destroy_id waits for the acks of its events: ack first */
	rdma_ack_cm_event(ev);
	if (doomed) {
		pthread_mutex_lock(&rs->lock);
		/* the peer is gone (or never came): no DREQ back */
		doomed->established = false;
		rs_client_destroy(rs, doomed);
		rs_unlock(rs);
	}
	if (doomed_id)
		rdma_destroy_id(doomed_id);
}

static void *rdma_server_cm_thread(void *arg)
{
	struct rdma_server *rs = arg;
	struct pollfd pfd[2];
	struct rdma_cm_event *ev;

	pfd[0].fd = rs->ec->fd;
	pfd[0].events = POLLIN;
	pfd[1].fd = rs->stop_fd;
	pfd[1].events = POLLIN;
	for (;;) {
		if (poll(pfd, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			g_warning("poll on the rdma_cm channel failed: %s", g_strerror(errno));
			return NULL;
		}
		if (pfd[1].revents)
			return NULL;
		while (rdma_get_cm_event(rs->ec, &ev) == 0)
			rdma_server_cm_event(rs, ev);
		if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
			g_warning("rdma_get_cm_event failed: %s", g_strerror(errno));
			return NULL;
		}
	}
}

/* ---- the out-of-band path (TCP connection threads) ---- */

static bool rs_ctx_has_gid(struct ibv_context *ctx, const uint8_t gid[16])
{
	struct verbs_device_attr attr;
	struct verbs_port_attr pattr;
	union ibv_gid g;
	uint8_t port;
	int i, gap;

	if (verbs_query_device(ctx, &attr))
		return false;
	for (port = 1; port <= attr.phys_port_cnt; port++) {
		if (verbs_query_port(ctx, port, &pattr) || pattr.state != IBV_PORT_ACTIVE)
			continue;
		for (i = 0, gap = 0; i < pattr.gid_tbl_len && gap < RS_GID_SCAN_GAP; i++) {
			static const uint8_t zero[16];

			if (verbs_query_gid(ctx, port, i, &g))
				break;
			if (memcmp(g.raw, zero, sizeof(zero)) == 0) {
				gap++;
				continue;
			}
			gap = 0;
			if (memcmp(g.raw, gid, 16) == 0)
				return true;
		}
	}
	return false;
}

/*
 * Which device faces this client: $RMEM_RDMA_DEV if set; else the device
 * whose GID table holds the client's GID (client on this host); else NULL,
 * the first device with an ACTIVE port. @buf receives a name.
 */
static const char *rs_oob_pick_device(const struct proto_qp_info *client, char *buf,
					size_t cap)
{
	const char *env = getenv("RMEM_RDMA_DEV");
	struct verbs_device_list list;
	const char *found = NULL;
	int i;

	if (env && *env)
		return env;
	if (verbs_device_list_get(&list))
		return NULL;
	for (i = 0; i < list.num && !found; i++) {
		struct ibv_context *ctx;

		if (verbs_open(list.devs[i], &ctx))
			continue;
		if (rs_ctx_has_gid(ctx, client->gid)) {
			g_strlcpy(buf, ibv_get_device_name(list.devs[i]), cap);
			found = buf;
		}
		verbs_close(ctx);
	}
	verbs_device_list_free(&list);
	return found;
}

static int rs_dev_oob_prepare(struct rs_dev *d)
{
	uint8_t port;
	int rc;

	if (d->oob_ready)
		return 0;
	for (port = 1; port <= d->attr.phys_port_cnt; port++) {
		if (verbs_query_port(d->ctx, port, &d->oob_pattr) == 0 &&
		    d->oob_pattr.state == IBV_PORT_ACTIVE)
			break;
	}
	if (port > d->attr.phys_port_cnt) {
		g_message("%s has no ACTIVE port", d->attr.name);
		return -ENODEV;
	}
	rc = verbs_find_gid(d->ctx, port, &d->oob_gid_index, &d->oob_gid);
	if (rc)
		return rc == -ENOENT ? -ENODEV : rc;
	d->oob_port = port;
	d->oob_ready = true;
	return 0;
}

static int rdma_server_oob_accept(void *oob_ctx, struct registry_pool *rp, uint64_t client_id,
				  const struct proto_qp_info *client, struct proto_qp_info *server,
				  struct proto_pool *pool, void **handle)
{
	struct rdma_server *rs = oob_ctx;
	struct verbs_rts_params rts;
	struct verbs_peer peer;
	struct rs_client *c;
	struct rs_dev *d;
	struct rs_pd *pd;
	const char *name;
	char buf[64];
	int rc;

	*handle = NULL;
	name = rs_oob_pick_device(client, buf, sizeof(buf));
	pthread_mutex_lock(&rs->lock);
	rc = memserver_admit(rs->ms, rp, client_id);
	if (rc)
		goto unlock;
	rc = rs_dev_get(rs, name, &d);
	if (rc)
		goto unlock;
	rc = rs_pd_get(rs, d, rp, &pd);
	if (rc)
		goto unlock;
	rc = rs_dev_oob_prepare(d);
	if (rc)
		goto unlock;
	c = calloc(1, sizeof(*c));
	if (!c) {
		rc = -ENOMEM;
		goto unlock;
	}
	c->dev = d;
	c->pd = pd;
	c->rp = rp;
	c->serial = ++rs->next_serial;
	c->client_id = client_id;
	snprintf(c->peer, sizeof(c->peer), "rdma-oob QP 0x%x", client->qpn);
	rc = rs_client_setup(c, false);
	if (rc)
		goto destroy_client;
	rc = verbs_qp_to_init(c->qp, d->oob_port, VERBS_ACCESS_REMOTE_ALL, 0);
	if (rc)
		goto destroy_client;

	memset(server, 0, sizeof(*server));
	server->qpn = c->qp->qp_num;
	server->psn = g_random_int() & 0xffffff;
	memcpy(server->gid, d->oob_gid.raw, sizeof(server->gid));
	server->lid = d->oob_pattr.lid;
	server->mtu = (uint8_t)MIN(d->oob_pattr.active_mtu, (enum ibv_mtu)client->mtu);
	server->max_rd_atomic =
	    (uint8_t)verbs_rd_atomic_depth(d->attr.max_qp_rd_atom, 0, RS_MAX_RD_ATOMIC);

	memset(&peer, 0, sizeof(peer));
	peer.qpn = client->qpn;
	peer.psn = client->psn;
	peer.lid = client->lid;
	memcpy(peer.gid.raw, client->gid, sizeof(peer.gid.raw));
	peer.global = d->oob_pattr.link_layer == IBV_LINK_LAYER_ETHERNET || client->lid == 0;
	peer.sgid_index = d->oob_gid_index;
	peer.port = d->oob_port;
	peer.mtu = (enum ibv_mtu)server->mtu;
	peer.max_dest_rd_atomic = server->max_rd_atomic;
	verbs_rts_init(&rts, server->psn,
		       (uint8_t)verbs_rd_atomic_depth(d->attr.max_qp_init_rd_atom,
						      client->max_rd_atomic, RS_MAX_RD_ATOMIC));
	rc = verbs_qp_up(c->qp, &peer, &rts);
	if (rc)
		goto destroy_client;
	rc = proto_pool_copy(pool, &pd->pool);
	if (rc)
		goto destroy_client;

	c->next = rs->oob_clients;
	rs->oob_clients = c;
	*handle = c;
	g_debug("out-of-band QP 0x%x on %s faces client QP 0x%x (pool '%s')", c->qp->qp_num,
		d->attr.name, client->qpn, rp->name);
	rs_unlock(rs);
	return 0;

destroy_client:
	rs_client_destroy(rs, c);
unlock:
	rs_unlock(rs);
	return rc;
}

static void rdma_server_oob_release(void *oob_ctx, void *handle)
{
	struct rdma_server *rs = oob_ctx;
	struct rs_client *c = handle;

	if (!c)
		return;
	pthread_mutex_lock(&rs->lock);
	rs_client_unlink(&rs->oob_clients, c);
	g_debug("out-of-band QP 0x%x released", c->qp ? c->qp->qp_num : 0);
	rs_client_destroy(rs, c);
	rs_unlock(rs);
}

/* ---- fencing ---- */

/* QP to ERR (nothing of the client lands from now on), then disconnect (rs->lock held) */
static void rs_client_revoke(struct rs_client *c)
{
	int rc = verbs_qp_to_err(c->qp);

	if (rc)
		g_message("%s: moving the fenced client's QP to ERR: %s", c->peer, g_strerror(-rc));
	if (c->id && c->established) {
		if (rdma_disconnect(c->id))
			g_debug("%s: rdma_disconnect: %s", c->peer, g_strerror(errno));
		c->established = false;
	}
	c->revoked = true;
}

/* the clients of pool rp presenting client_id (0: every client of rp) */
static unsigned int rs_revoke_list(struct rs_client *list, struct registry_pool *rp,
				   uint64_t client_id)
{
	unsigned int n = 0;
	struct rs_client *c;

	for (c = list; c; c = c->next) {
		if (c->revoked || c->rp != rp || (client_id && c->client_id != client_id))
			continue;
		rs_client_revoke(c);
		n++;
	}
	return n;
}

/* the revoke hook (memserver.h) */
static unsigned int rdma_server_revoke(void *ctx, struct registry_pool *rp, uint64_t client_id)
{
	struct rdma_server *rs = ctx;
	unsigned int n;

	pthread_mutex_lock(&rs->lock);
	n = rs_revoke_list(rs->clients, rp, client_id);
	n += rs_revoke_list(rs->oob_clients, rp, client_id);
	rs_unlock(rs);
	return n;
}

/* ---- start / stop ---- */

static int rdma_server_bind(struct rdma_server *rs, const char *addr, uint16_t port)
{
	struct addrinfo *res;
	int rc;

	rc = net_resolve(addr, port, true, &res);
	if (rc) {
		g_message("cannot resolve %s: %s", addr ? addr : "127.0.0.1", g_strerror(-rc));
		return rc == -ENOENT ? -EADDRNOTAVAIL : rc;
	}
	rc = rdma_bind_addr(rs->listen_id, res->ai_addr);
	freeaddrinfo(res);
	if (rc) {
		rc = -errno;
		g_message("rdma_bind_addr(%s port %u) failed: %s", addr, port, g_strerror(-rc));
		return rc;
	}
	if (rdma_listen(rs->listen_id, RS_BACKLOG)) {
		rc = -errno;
		g_message("rdma_listen(%s port %u) failed: %s", addr, port, g_strerror(-rc));
		return rc;
	}
	return 0;
}

static void rdma_server_name_devices(struct rdma_server *rs)
{
	struct verbs_device_list list;
	size_t used = 0;
	int i;

	rs->devices[0] = '\0';
	if (rs->listen_id->verbs) {
		g_strlcpy(rs->devices, ibv_get_device_name(rs->listen_id->verbs->device),
			  sizeof(rs->devices));
		return;
	}
	/* a wildcard listener serves every device */
	if (verbs_device_list_get(&list))
		return;
	for (i = 0; i < list.num && used < sizeof(rs->devices); i++)
		used += (size_t)snprintf(rs->devices + used, sizeof(rs->devices) - used, "%s%s",
					 i ? "," : "", ibv_get_device_name(list.devs[i]));
	verbs_device_list_free(&list);
}

static void rdma_server_release_all(struct rdma_server *rs)
{
	pthread_mutex_lock(&rs->lock);
	while (rs->clients) {
		struct rs_client *c = rs->clients;

		rs->clients = c->next;
		rs_client_destroy(rs, c);
	}
	while (rs->oob_clients) {
		struct rs_client *c = rs->oob_clients;

		rs->oob_clients = c->next;
		g_message("out-of-band QP 0x%x still up at stop, released", c->qp->qp_num);
		rs_client_destroy(rs, c);
	}
	while (rs->pds) {
		struct rs_pd *d = rs->pds;

		rs->pds = d->next;
		rs_pd_free(d);
	}
	while (rs->devs) {
		struct rs_dev *d = rs->devs;

		rs->devs = d->next;
		rs_dev_free(d);
	}
	rs_unlock(rs);
}

/* the event channel and the listening id, bound; nothing is left behind on failure */
static int rdma_server_listen(struct rdma_server *rs, const char *addr, uint16_t port)
{
	int rc;

	rc = verbs_cm_channel_open(&rs->ec);
	if (rc) {
		g_message("rdma_cm event channel: %s", g_strerror(-rc));
		return rc;
	}
	if (rdma_create_id(rs->ec, &rs->listen_id, NULL, RDMA_PS_TCP)) {
		rc = -errno;
		g_message("rdma_create_id failed: %s", g_strerror(-rc));
		goto destroy_channel;
	}
	rc = rdma_server_bind(rs, addr, port);
	if (rc)
		goto destroy_listen_id;
	return 0;

destroy_listen_id:
	rdma_destroy_id(rs->listen_id);
	rs->listen_id = NULL;
destroy_channel:
	rdma_destroy_event_channel(rs->ec);
	rs->ec = NULL;
	return rc;
}

/* the stop eventfd and the epoll set the completion thread waits in */
static int rdma_server_epoll(struct rdma_server *rs)
{
	struct epoll_event pev;
	int rc;

	rs->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (rs->stop_fd < 0)
		return -errno;
	rs->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (rs->epfd < 0) {
		rc = -errno;
		goto close_stop_fd;
	}
	memset(&pev, 0, sizeof(pev));
	pev.events = EPOLLIN;
	pev.data.u64 = RS_EPOLL_STOP;
	if (epoll_ctl(rs->epfd, EPOLL_CTL_ADD, rs->stop_fd, &pev)) {
		rc = -errno;
		goto close_epfd;
	}
	return 0;

close_epfd:
	close(rs->epfd);
	rs->epfd = -1;
close_stop_fd:
	close(rs->stop_fd);
	rs->stop_fd = -1;
	return rc;
}

int rdma_server_start(struct memserver *ms, const char *addr, uint16_t port,
		      struct rdma_server **out)
{
	struct verbs_device_list list;
	struct rdma_server *rs;
	struct rs_dev *d;
	struct rs_pd *pd;
	int rc;

	*out = NULL;
	rc = verbs_device_list_get(&list);
	if (rc)
		return rc;
	verbs_device_list_free(&list);

	rs = calloc(1, sizeof(*rs));
	if (!rs)
		return -ENOMEM;
	rs->ms = ms;
	rs->stop_fd = -1;
	rs->epfd = -1;
	pthread_mutex_init(&rs->lock, NULL);
	rc = rdma_server_listen(rs, addr, port);
	if (rc)
		goto free_rs;
	rdma_server_name_devices(rs);

	/* pin the default pool now on the listener's device: a memlock problem shows at start */
	if (rs->listen_id->verbs) {
		rc = rs_dev_get(rs, ibv_get_device_name(rs->listen_id->verbs->device), &d);
		if (!rc && ms->reg.deflt)
			rc = rs_pd_get(rs, d, ms->reg.deflt, &pd);
		if (rc)
			goto free_devs;
	}
	rc = rdma_server_epoll(rs);
	if (rc)
		goto free_devs;
	rc = -pthread_create(&rs->comp_thread, NULL, rdma_server_comp_thread, rs);
	if (rc)
		goto close_epoll;
	rs->comp_running = true;
	/* before the first client can make a pool's PD: each PD must go with its pool */
	registry_set_release(&ms->reg, rdma_server_pool_release, rs);
	rc = -pthread_create(&rs->cm_thread, NULL, rdma_server_cm_thread, rs);
	if (rc)
		goto stop_threads;
	rs->cm_running = true;

	ms->oob_ctx = rs;
	ms->oob_accept = rdma_server_oob_accept;
	ms->oob_release = rdma_server_oob_release;
	memserver_set_revoke(ms, MEMSERVER_SIDE_RDMA, rdma_server_revoke, rs);
	*out = rs;
	return 0;

stop_threads:
	rdma_server_stop(rs);
	return rc;
close_epoll:
	close(rs->epfd);
	close(rs->stop_fd);
free_devs:
	rdma_server_release_all(rs);
	rdma_destroy_id(rs->listen_id);
	rdma_destroy_event_channel(rs->ec);
free_rs:
	pthread_mutex_destroy(&rs->lock);
	free(rs);
	return rc;
}

void rdma_server_stop(struct rdma_server *rs)
{
	uint64_t one = 1;

	if (!rs)
		return;
	if (rs->ms->oob_ctx == rs) {
		rs->ms->oob_accept = NULL;
		rs->ms->oob_release = NULL;
		rs->ms->oob_ctx = NULL;
	}
	if (rs->ms->revoke_ctx[MEMSERVER_SIDE_RDMA] == rs)
		memserver_set_revoke(rs->ms, MEMSERVER_SIDE_RDMA, NULL, NULL);
	if (write(rs->stop_fd, &one, sizeof(one)) != sizeof(one))
		g_warning("waking the RDMA threads failed: %s", g_strerror(errno));
	if (rs->cm_running)
		pthread_join(rs->cm_thread, NULL);
	if (rs->comp_running)
		pthread_join(rs->comp_thread, NULL);
	/* disconnect, ack, QP, MRs, CQ, channel, PD, ids, event channel */
	rdma_server_release_all(rs);
	if (rs->ms->reg.release_ctx == rs)
		registry_set_release(&rs->ms->reg, NULL, NULL);
	rdma_destroy_id(rs->listen_id);
	rdma_destroy_event_channel(rs->ec);
	close(rs->epfd);
	close(rs->stop_fd);
	pthread_mutex_destroy(&rs->lock);
	free(rs);
}

const char *rdma_server_devices(const struct rdma_server *rs)
{
	return rs && rs->devices[0] ? rs->devices : "none";
}
