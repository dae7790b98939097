/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * verbs.c - the libibverbs wrappers declared in verbs.h.
 *
 * This is the one place where rdma-core's three error conventions (NULL +
 * errno, -1 + errno, a positive errno return) become 0/-errno, and the one
 * place that knows the attribute masks each QP state transition needs for RC
 * and UD (ibv_modify_qp(3); libibverbs/examples/rc_pingpong.c and
 * ud_pingpong.c). Every failure is logged once here, naming the verb and the
 * errno; callers only propagate the code.
 *
 * Completion channels are made non-blocking so that their fd can sit in an
 * epoll set next to other fds; verbs_cq_wait() does its own poll() and copes
 * with wake-ups that find no event. Events are acked in batches of
 * VERBS_ACK_BATCH, and every pending one is acked before the CQ is destroyed
 * (ibv_destroy_cq() waits for the acks, see ibv_get_cq_event(3)).
 */
#define G_LOG_DOMAIN "rmemfs-verbs"

#include "verbs.h"
#include "clock.h"

#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define VERBS_ACK_BATCH 16
#define VERBS_WC_CAP_DEFAULT 32
#define VERBS_RD_ATOMIC_DEFAULT 16
#define VERBS_MIN_RNR_TIMER_DEFAULT 12 /* 0.64 ms */
#define VERBS_TIMEOUT_DEFAULT 14       /* 4.096 us * 2^14 = 67 ms */
#define VERBS_RETRY_DEFAULT 7
#define VERBS_RNR_RETRY_DEFAULT 7 /* infinite */
#define VERBS_HOP_LIMIT 64
#define VERBS_PKEY_INDEX 0

/* errno captured right after a verb that reports failure through errno */
static int verbs_errno(void)
{
	return errno > 0 ? -errno : -EIO;
}

/*
 * A verb that returns an int: 0 is success; a positive value is an errno
 * (ibv_modify_qp, ibv_post_send, ibv_destroy_*); -1 means "see errno"; some
 * providers return a negative errno directly.
 */
static int verbs_ret(int ret)
{
	if (ret == 0)
		return 0;
	if (ret > 0)
		return -ret;
	if (ret == -1)
		return verbs_errno();
	return ret;
}

/* ---- device list ---- */

int verbs_device_list_get(struct verbs_device_list *list)
{
	struct ibv_device **devs;
	int num = 0;
	int rc;

	list->devs = NULL;
	list->num = 0;

	errno = 0;
	devs = ibv_get_device_list(&num);
	if (!devs) {
		rc = verbs_errno();
		/* ENOSYS: the kernel has no RDMA support (no uverbs) */
		if (rc == -ENOSYS || rc == -ENOENT || rc == -ENODEV) {
			g_debug("ibv_get_device_list: %s: no RDMA device", g_strerror(-rc));
			return -ENODEV;
		}
		g_warning("ibv_get_device_list failed: %s", g_strerror(-rc));
		return rc;
	}
	if (num <= 0) {
		ibv_free_device_list(devs);
		g_debug("ibv_get_device_list: no RDMA device");
		return -ENODEV;
	}
	list->devs = devs;
	list->num = num;
	return 0;
}

void verbs_device_list_free(struct verbs_device_list *list)
{
	if (!list || !list->devs)
		return;
	ibv_free_device_list(list->devs);
	list->devs = NULL;
	list->num = 0;
}

/* ---- context ---- */

int verbs_open(struct ibv_device *dev, struct ibv_context **out)
{
	struct ibv_context *ctx;
	int rc;

	*out = NULL;
	if (!dev)
		return -EINVAL;
	errno = 0;
	ctx = ibv_open_device(dev);
	if (!ctx) {
		rc = verbs_errno();
		g_warning("ibv_open_device(%s) failed: %s", ibv_get_device_name(dev),
			  g_strerror(-rc));
		return rc;
	}
	*out = ctx;
	return 0;
}

/* true if one of ctx's ports is ACTIVE */
static bool verbs_has_active_port(struct ibv_context *ctx)
{
	struct ibv_device_attr dattr;
	struct ibv_port_attr pattr;
	int port;

	if (ibv_query_device(ctx, &dattr))
		return false;
	for (port = 1; port <= dattr.phys_port_cnt; port++) {
		if (ibv_query_port(ctx, port, &pattr))
			continue;
		if (pattr.state == IBV_PORT_ACTIVE)
			return true;
	}
	return false;
}

int verbs_open_by_name(const char *name, struct ibv_context **out)
{
	struct verbs_device_list list;
	struct ibv_context *ctx;
	int rc;
	int i;

	*out = NULL;
	rc = verbs_device_list_get(&list);
	if (rc)
		return rc;

	rc = -ENODEV;
	for (i = 0; i < list.num; i++) {
		const char *dev_name = ibv_get_device_name(list.devs[i]);

		if (name && strcmp(name, dev_name) != 0)
			continue;
		rc = verbs_open(list.devs[i], &ctx);
		if (rc) {
			if (name)
				break;
			continue;
		}
		if (!name && !verbs_has_active_port(ctx)) {
			g_debug("%s: no ACTIVE port, skipped", dev_name);
			verbs_close(ctx);
			rc = -ENODEV;
			continue;
		}
		*out = ctx;
		rc = 0;
		break;
	}
	/* the context keeps its device alive; the list can go */
	verbs_device_list_free(&list);
	if (rc == -ENODEV)
		g_message("no RDMA device %s%s", name ? "named " : "with an ACTIVE port",
			  name ? name : "");
	return rc;
}

void verbs_close(struct ibv_context *ctx)
{
	int rc;

	if (!ctx)
		return;
	rc = verbs_ret(ibv_close_device(ctx));
	if (rc)
		g_warning("ibv_close_device failed: %s", g_strerror(-rc));
}

int verbs_query_device(struct ibv_context *ctx, struct verbs_device_attr *out)
{
	struct ibv_device_attr attr;
	int rc;

	memset(out, 0, sizeof(*out));
	rc = verbs_ret(ibv_query_device(ctx, &attr));
	if (rc) {
		g_warning("ibv_query_device failed: %s", g_strerror(-rc));
		return rc;
	}
	g_strlcpy(out->name, ibv_get_device_name(ctx->device), sizeof(out->name));
	g_strlcpy(out->fw_ver, attr.fw_ver, sizeof(out->fw_ver));
	out->max_mr_size = attr.max_mr_size;
	out->max_qp = attr.max_qp;
	out->max_qp_wr = attr.max_qp_wr;
	out->max_cq = attr.max_cq;
	out->max_cqe = attr.max_cqe;
	out->max_mr = attr.max_mr;
	out->max_sge = attr.max_sge;
	out->max_qp_rd_atom = attr.max_qp_rd_atom;
	out->max_qp_init_rd_atom = attr.max_qp_init_rd_atom;
	out->phys_port_cnt = attr.phys_port_cnt;
	out->atomic_cap = attr.atomic_cap;
	out->atomics = attr.atomic_cap != IBV_ATOMIC_NONE;
	return 0;
}

int verbs_query_port(struct ibv_context *ctx, uint8_t port, struct verbs_port_attr *out)
{
	struct ibv_port_attr attr;
	int rc;

	memset(out, 0, sizeof(*out));
	rc = verbs_ret(ibv_query_port(ctx, port, &attr));
	if (rc) {
		g_warning("ibv_query_port(%u) failed: %s", port, g_strerror(-rc));
		return rc;
	}
	out->state = attr.state;
	out->active_mtu = attr.active_mtu;
	out->max_mtu = attr.max_mtu;
	out->lid = attr.lid;
	out->link_layer = attr.link_layer;
	out->gid_tbl_len = attr.gid_tbl_len;
	return 0;
}

int verbs_query_gid(struct ibv_context *ctx, uint8_t port, int index, union ibv_gid *gid)
{
	int rc;

	errno = 0;
	rc = verbs_ret(ibv_query_gid(ctx, port, index, gid));
	if (rc) {
		g_warning("ibv_query_gid(port %u, index %d) failed: %s", port, index,
			  g_strerror(-rc));
		return rc;
	}
	return 0;
}

static bool verbs_gid_is_zero(const union ibv_gid *gid)
{
	static const union ibv_gid zero;

	return memcmp(gid->raw, zero.raw, sizeof(zero.raw)) == 0;
}

/* ::ffff:a.b.c.d */
static bool verbs_gid_is_ipv4_mapped(const union ibv_gid *gid)
{
	static const uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

	return memcmp(gid->raw, prefix, sizeof(prefix)) == 0;
}

/* best effort: the entry's RoCE version, or -1 when the kernel does not say */
static int verbs_gid_type(struct ibv_context *ctx, uint8_t port, int index)
{
	struct ibv_gid_entry entry;

	if (ibv_query_gid_ex(ctx, port, index, &entry, 0))
		return -1;
	return (int)entry.gid_type;
}

/* IPv4-mapped RoCE v2 (3) > IPv4-mapped (2) > any other non-zero GID (1) */
static int verbs_gid_score(const union ibv_gid *gid, int gid_type)
{
	if (verbs_gid_is_zero(gid))
		return 0;
	if (!verbs_gid_is_ipv4_mapped(gid))
		return 1;
	return gid_type == IBV_GID_TYPE_ROCE_V2 ? 3 : 2;
}

/* one call for the whole table (rdma-core >= 32); -errno if the kernel cannot */
static int verbs_find_gid_table(struct ibv_context *ctx, uint8_t port, int tbl_len, int *index,
				union ibv_gid *gid)
{
	struct ibv_gid_entry *entries;
	ssize_t n;
	int best = -1, best_score = 0;
	ssize_t i;

	entries = calloc((size_t)tbl_len, sizeof(*entries));
	if (!entries)
		return -ENOMEM;
	n = ibv_query_gid_table(ctx, entries, (size_t)tbl_len, 0);
	if (n < 0) {
		free(entries);
		return (int)n;
	}
	for (i = 0; i < n; i++) {
		int score;

		if (entries[i].port_num != port)
			continue;
		score = verbs_gid_score(&entries[i].gid, (int)entries[i].gid_type);
		if (score > best_score ||
		    (score == best_score && best >= 0 && (int)entries[i].gid_index < best)) {
			best = (int)entries[i].gid_index;
			best_score = score;
			*gid = entries[i].gid;
		}
	}
	free(entries);
	if (best < 0)
		return -ENOENT;
	*index = best;
	return 0;
}

int verbs_find_gid(struct ibv_context *ctx, uint8_t port, int *index, union ibv_gid *gid)
{
	struct verbs_port_attr pattr;
	union ibv_gid cand;
	int best = -1;
	int best_score = 0;
	int rc;
	int i;

	rc = verbs_query_port(ctx, port, &pattr);
	if (rc)
		return rc;
	if (pattr.gid_tbl_len <= 0)
		goto none;

	rc = verbs_find_gid_table(ctx, port, pattr.gid_tbl_len, index, gid);
	if (rc == 0)
		return 0;
	if (rc == -ENOENT)
		goto none;
	g_debug("ibv_query_gid_table: %s; reading the GID table entry by entry", g_strerror(-rc));

	for (i = 0; i < pattr.gid_tbl_len; i++) {
		int score;

		if (ibv_query_gid(ctx, port, i, &cand))
			continue;
		score = verbs_gid_score(
		    &cand, verbs_gid_is_ipv4_mapped(&cand) ? verbs_gid_type(ctx, port, i) : -1);
		if (score > best_score) {
			best = i;
			best_score = score;
			*gid = cand;
			if (score == 3)
				break;
		}
	}
	if (best >= 0) {
		*index = best;
		return 0;
	}
none:
	g_message("port %u: GID table (%d entries) has no usable GID", port, pattr.gid_tbl_len);
	return -ENOENT;
}

const char *verbs_port_state_str(enum ibv_port_state state)
{
	return ibv_port_state_str(state);
}

int verbs_mtu_to_bytes(enum ibv_mtu mtu)
{
	switch (mtu) {
	case IBV_MTU_256:
		return 256;
	case IBV_MTU_512:
		return 512;
	case IBV_MTU_1024:
		return 1024;
	case IBV_MTU_2048:
		return 2048;
	case IBV_MTU_4096:
		return 4096;
	}
	return -EINVAL;
}

void verbs_gid_to_str(const union ibv_gid *gid, char *buf, size_t cap)
{
	if (!cap)
		return;
	if (!inet_ntop(AF_INET6, gid->raw, buf, cap))
		buf[0] = '\0';
}

/* ---- protection domain ---- */

int verbs_pd_alloc(struct ibv_context *ctx, struct ibv_pd **out)
{
	struct ibv_pd *pd;
	int rc;

	errno = 0;
	pd = ibv_alloc_pd(ctx);
	if (!pd) {
		rc = verbs_errno();
		g_warning("ibv_alloc_pd failed: %s", g_strerror(-rc));
		*out = NULL;
		return rc;
	}
	*out = pd;
	return 0;
}

void verbs_pd_free(struct ibv_pd *pd)
{
	int rc;

	if (!pd)
		return;
	rc = verbs_ret(ibv_dealloc_pd(pd));
	if (rc)
		g_warning("ibv_dealloc_pd failed: %s", g_strerror(-rc));
}

/* ---- memory regions ---- */

int verbs_mr_reg(struct ibv_pd *pd, void *addr, size_t len, int access, struct verbs_mr *out)
{
	struct ibv_mr *mr;
	int rc;

	memset(out, 0, sizeof(*out));
	if (!addr || !len)
		return -EINVAL;
	errno = 0;
	mr = ibv_reg_mr(pd, addr, len, access);
	if (!mr) {
		rc = verbs_errno();
		g_warning("ibv_reg_mr(%zu bytes, access 0x%x) failed: %s", len, access,
			  g_strerror(-rc));
		return rc;
	}
	out->mr = mr;
	out->addr = addr;
	out->len = len;
	out->lkey = mr->lkey;
	out->rkey = mr->rkey;
	out->owned = false;
	return 0;
}

int verbs_mr_alloc(struct ibv_pd *pd, size_t len, int access, struct verbs_mr *out)
{
	long page = sysconf(_SC_PAGESIZE);
	void *buf = NULL;
	int rc;

	memset(out, 0, sizeof(*out));
	if (!len)
		return -EINVAL;
	if (page <= 0)
		page = 4096;
	rc = posix_memalign(&buf, (size_t)page, len);
	if (rc) {
		g_warning("posix_memalign(%zu bytes) failed: %s", len, g_strerror(rc));
		return -rc;
	}
	memset(buf, 0, len);
	rc = verbs_mr_reg(pd, buf, len, access, out);
	if (rc)
		goto free_buf;
	out->owned = true;
	return 0;

free_buf:
	free(buf);
	return rc;
}

void verbs_mr_dereg(struct verbs_mr *mr)
{
	int rc;

	if (!mr)
		return;
	if (mr->mr) {
		rc = verbs_ret(ibv_dereg_mr(mr->mr));
		if (rc)
			g_warning("ibv_dereg_mr failed: %s", g_strerror(-rc));
	}
	if (mr->owned)
		free(mr->addr);
	memset(mr, 0, sizeof(*mr));
}

/* ---- completion queues ---- */

int verbs_cq_create(struct ibv_context *ctx, int cqe, bool with_channel, int wc_cap,
		    struct verbs_cq *out)
{
	int flags;
	int rc;

	memset(out, 0, sizeof(*out));
	if (cqe <= 0)
		return -EINVAL;
	if (wc_cap <= 0)
		wc_cap = VERBS_WC_CAP_DEFAULT;

	if (with_channel) {
		errno = 0;
		out->channel = ibv_create_comp_channel(ctx);
		if (!out->channel) {
			rc = verbs_errno();
			g_warning("ibv_create_comp_channel failed: %s", g_strerror(-rc));
			return rc;
		}
		flags = fcntl(out->channel->fd, F_GETFL);
		if (flags < 0 || fcntl(out->channel->fd, F_SETFL, flags | O_NONBLOCK) < 0) {
			rc = -errno;
			g_warning("fcntl(O_NONBLOCK) on the completion channel failed: %s",
				  g_strerror(-rc));
			goto destroy_channel;
		}
	}

	errno = 0;
	out->cq = ibv_create_cq(ctx, cqe, NULL, out->channel, 0);
	if (!out->cq) {
		rc = verbs_errno();
		g_warning("ibv_create_cq(%d entries) failed: %s", cqe, g_strerror(-rc));
		goto destroy_channel;
	}

	out->wc = calloc((size_t)wc_cap, sizeof(*out->wc));
	if (!out->wc) {
		rc = -ENOMEM;
		goto destroy_cq;
	}
	out->wc_cap = wc_cap;

	if (out->channel) {
		rc = verbs_cq_arm(out, false);
		if (rc)
			goto free_wc;
	}
	return 0;

free_wc:
	free(out->wc);
destroy_cq:
	ibv_destroy_cq(out->cq);
destroy_channel:
	if (out->channel)
		ibv_destroy_comp_channel(out->channel);
	memset(out, 0, sizeof(*out));
	return rc;
}

void verbs_cq_destroy(struct verbs_cq *cq)
{
	int rc;

	if (!cq)
		return;
	if (cq->cq) {
		verbs_cq_ack(cq);
		rc = verbs_ret(ibv_destroy_cq(cq->cq));
		if (rc)
			g_warning("ibv_destroy_cq failed: %s", g_strerror(-rc));
	}
	if (cq->channel) {
		rc = verbs_ret(ibv_destroy_comp_channel(cq->channel));
		if (rc)
			g_warning("ibv_destroy_comp_channel failed: %s", g_strerror(-rc));
	}
	free(cq->wc);
	memset(cq, 0, sizeof(*cq));
}

int verbs_cq_arm(struct verbs_cq *cq, bool solicited_only)
{
	int rc;

	rc = verbs_ret(ibv_req_notify_cq(cq->cq, solicited_only ? 1 : 0));
	if (rc)
		g_warning("ibv_req_notify_cq failed: %s", g_strerror(-rc));
	return rc;
}

int verbs_cq_wait(struct verbs_cq *cq, int timeout_ms)
{
	int64_t deadline = timeout_ms >= 0 ? clock_now_ms() + timeout_ms : -1;
	struct pollfd pfd;
	struct ibv_cq *ev_cq;
	void *ev_ctx;
	int wait_ms;
	int rc;

	if (!cq || !cq->channel)
		return -EINVAL;

	pfd.fd = cq->channel->fd;
	pfd.events = POLLIN;
	for (;;) {
		wait_ms = -1;
		if (deadline >= 0) {
			int64_t left = deadline - clock_now_ms();

			wait_ms = left > 0 ? (int)left : 0;
		}
		pfd.revents = 0;
		rc = poll(&pfd, 1, wait_ms);
		if (rc < 0) {
			if (errno == EINTR)
				continue;
			rc = -errno;
			g_warning("poll on the completion channel failed: %s", g_strerror(-rc));
			return rc;
		}
		if (rc == 0)
			return -ETIMEDOUT;

		if (ibv_get_cq_event(cq->channel, &ev_cq, &ev_ctx) == 0)
			break;
		rc = verbs_errno();
		/* the fd is non-blocking: a wake-up without an event */
		if (rc == -EAGAIN || rc == -EINTR)
			continue;
		g_warning("ibv_get_cq_event failed: %s", g_strerror(-rc));
		return rc;
	}

	if (ev_cq != cq->cq) {
		/* one channel per CQ here; an event for another CQ is a caller bug */
		g_warning("ibv_get_cq_event: event for CQ %p, waited on %p", (void *)ev_cq,
			  (void *)cq->cq);
		ibv_ack_cq_events(ev_cq, 1);
		return -EINVAL;
	}
	cq->unacked++;
	if (cq->unacked >= VERBS_ACK_BATCH)
		verbs_cq_ack(cq);
	return verbs_cq_arm(cq, false);
}

int verbs_cq_fd(const struct verbs_cq *cq)
{
	if (!cq || !cq->channel)
		return -EINVAL;
	return cq->channel->fd;
}

void verbs_cq_ack(struct verbs_cq *cq)
{
	if (!cq || !cq->cq || !cq->unacked)
		return;
	ibv_ack_cq_events(cq->cq, cq->unacked);
	cq->unacked = 0;
}

int verbs_cq_poll(struct verbs_cq *cq, int max)
{
	int n;

	if (!cq || !cq->cq || !cq->wc)
		return -EINVAL;
	if (max <= 0 || max > cq->wc_cap)
		max = cq->wc_cap;
	n = ibv_poll_cq(cq->cq, max, cq->wc);
	if (n < 0) {
		g_warning("ibv_poll_cq failed: %d", n);
		return -EIO;
	}
	return n;
}

int verbs_wc_status_to_errno(enum ibv_wc_status status)
{
	switch (status) {
	case IBV_WC_SUCCESS:
		return 0;
	case IBV_WC_LOC_LEN_ERR: /* message longer than the receive buffer */
		return -EMSGSIZE;
	case IBV_WC_LOC_QP_OP_ERR: /* malformed WR / QP inconsistency */
	case IBV_WC_LOC_EEC_OP_ERR:
		return -EPROTO;
	case IBV_WC_LOC_PROT_ERR: /* local SGE outside its MR or wrong lkey */
	case IBV_WC_LOC_ACCESS_ERR:
		return -EFAULT;
	case IBV_WC_WR_FLUSH_ERR: /* the QP went to ERR before this WR ran */
		return -ECANCELED;
	case IBV_WC_MW_BIND_ERR:
	case IBV_WC_LOC_RDD_VIOL_ERR:
		return -EPERM;
	case IBV_WC_BAD_RESP_ERR:
		return -EPROTO;
	case IBV_WC_REM_INV_REQ_ERR: /* e.g. op not supported by the remote QP */
	case IBV_WC_REM_INV_RD_REQ_ERR:
		return -EINVAL;
	case IBV_WC_REM_ACCESS_ERR: /* bad rkey, range outside the remote MR, no right */
		return -EACCES;
	case IBV_WC_REM_OP_ERR: /* the responder could not complete the op */
		return -EREMOTEIO;
	case IBV_WC_RETRY_EXC_ERR: /* no ACK from the peer: gone or unreachable */
	case IBV_WC_RESP_TIMEOUT_ERR:
		return -ETIMEDOUT;
	case IBV_WC_RNR_RETRY_EXC_ERR: /* the peer never had a receive posted */
		return -ENOBUFS;
	case IBV_WC_REM_ABORT_ERR:
		return -ECONNABORTED;
	case IBV_WC_INV_EECN_ERR:
	case IBV_WC_INV_EEC_STATE_ERR:
		return -EINVAL;
	case IBV_WC_FATAL_ERR:
	case IBV_WC_GENERAL_ERR:
		return -EIO;
	case IBV_WC_TM_ERR:
	case IBV_WC_TM_RNDV_INCOMPLETE:
		return -EPROTO;
	}
	return -EIO;
}

const char *verbs_wc_status_str(enum ibv_wc_status status)
{
	return ibv_wc_status_str(status);
}

uint32_t verbs_wc_imm(const struct ibv_wc *wc)
{
	return be32toh((uint32_t)wc->imm_data);
}

/* ---- queue pairs ---- */

void verbs_qp_caps_default(struct verbs_qp_caps *caps)
{
	caps->max_send_wr = 256;
	caps->max_recv_wr = 256;
	caps->max_send_sge = 4;
	caps->max_recv_sge = 1;
	caps->max_inline_data = 64;
}

int verbs_qp_create(struct ibv_pd *pd, enum ibv_qp_type type, struct verbs_cq *send_cq,
		    struct verbs_cq *recv_cq, struct verbs_qp_caps *caps, struct ibv_qp **out)
{
	struct ibv_qp_init_attr init;
	struct verbs_qp_caps def;
	struct ibv_qp *qp;
	int rc;

	*out = NULL;
	if (type != IBV_QPT_RC && type != IBV_QPT_UD)
		return -EINVAL;
	if (!send_cq || !send_cq->cq || !recv_cq || !recv_cq->cq)
		return -EINVAL;
	if (!caps) {
		verbs_qp_caps_default(&def);
		caps = &def;
	}

	memset(&init, 0, sizeof(init));
	init.send_cq = send_cq->cq;
	init.recv_cq = recv_cq->cq;
	init.qp_type = type;
	init.sq_sig_all = 0;
	init.cap.max_send_wr = caps->max_send_wr;
	init.cap.max_recv_wr = caps->max_recv_wr;
	init.cap.max_send_sge = caps->max_send_sge;
	init.cap.max_recv_sge = caps->max_recv_sge;
	init.cap.max_inline_data = caps->max_inline_data;

	errno = 0;
	qp = ibv_create_qp(pd, &init);
	if (!qp) {
		rc = verbs_errno();
		g_warning("ibv_create_qp(%s, send_wr %u, recv_wr %u, sge %u/%u, inline %u) "
			  "failed: %s",
			  type == IBV_QPT_RC ? "RC" : "UD", caps->max_send_wr, caps->max_recv_wr,
			  caps->max_send_sge, caps->max_recv_sge, caps->max_inline_data,
			  g_strerror(-rc));
		return rc;
	}
	/* ibv_create_qp wrote back what the device granted */
	caps->max_send_wr = init.cap.max_send_wr;
	caps->max_recv_wr = init.cap.max_recv_wr;
	caps->max_send_sge = init.cap.max_send_sge;
	caps->max_recv_sge = init.cap.max_recv_sge;
	caps->max_inline_data = init.cap.max_inline_data;
	*out = qp;
	return 0;
}

void verbs_qp_destroy(struct ibv_qp *qp)
{
	int rc;

	if (!qp)
		return;
	rc = verbs_ret(ibv_destroy_qp(qp));
	if (rc)
		g_warning("ibv_destroy_qp failed: %s", g_strerror(-rc));
}

static int verbs_modify(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask, const char *what)
{
	int rc;

	errno = 0;
	rc = verbs_ret(ibv_modify_qp(qp, attr, mask));
	if (rc)
		g_warning("ibv_modify_qp(QP 0x%x %s, mask 0x%x) failed: %s", qp->qp_num, what, mask,
			  g_strerror(-rc));
	return rc;
}

int verbs_qp_to_init(struct ibv_qp *qp, uint8_t port, int access, uint32_t qkey)
{
	struct ibv_qp_attr attr;
	int mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;

	memset(&attr, 0, sizeof(attr));
	attr.qp_state = IBV_QPS_INIT;
	attr.pkey_index = VERBS_PKEY_INDEX;
	attr.port_num = port;
	switch (qp->qp_type) {
	case IBV_QPT_RC:
		attr.qp_access_flags = access;
		mask |= IBV_QP_ACCESS_FLAGS;
		break;
	case IBV_QPT_UD:
		attr.qkey = qkey;
		mask |= IBV_QP_QKEY;
		break;
	default:
		return -EINVAL;
	}
	return verbs_modify(qp, &attr, mask, "RESET->INIT");
}

/* the device's limit for an outstanding READ/atomic depth, or def if unknown */
static uint8_t verbs_rd_atomic_limit(struct ibv_qp *qp, bool initiator, uint8_t def)
{
	struct ibv_device_attr dattr;
	int lim;

	if (ibv_query_device(qp->context, &dattr))
		return def;
	lim = initiator ? dattr.max_qp_init_rd_atom : dattr.max_qp_rd_atom;
	if (lim <= 0)
		return def;
	return lim < def ? (uint8_t)lim : def;
}

static void verbs_fill_ah_attr(struct ibv_ah_attr *ah, const struct verbs_peer *peer)
{
	memset(ah, 0, sizeof(*ah));
	ah->dlid = peer->lid;
	ah->sl = 0;
	ah->src_path_bits = 0;
	ah->port_num = peer->port ? peer->port : 1;
	if (peer->global) {
		ah->is_global = 1;
		ah->grh.dgid = peer->gid;
		ah->grh.sgid_index = (uint8_t)peer->sgid_index;
		ah->grh.hop_limit = VERBS_HOP_LIMIT;
		ah->grh.traffic_class = 0;
		ah->grh.flow_label = 0;
	}
}

int verbs_qp_to_rtr(struct ibv_qp *qp, const struct verbs_peer *peer)
{
	struct ibv_qp_attr attr;
	int mask;

	memset(&attr, 0, sizeof(attr));
	attr.qp_state = IBV_QPS_RTR;
	switch (qp->qp_type) {
	case IBV_QPT_UD:
		return verbs_modify(qp, &attr, IBV_QP_STATE, "INIT->RTR");
	case IBV_QPT_RC:
		break;
	default:
		return -EINVAL;
	}
	if (!peer)
		return -EINVAL;

	attr.path_mtu = peer->mtu;
	if (!attr.path_mtu) {
		struct ibv_port_attr pattr;
		uint8_t port = peer->port ? peer->port : 1;

		if (ibv_query_port(qp->context, port, &pattr) == 0)
			attr.path_mtu = pattr.active_mtu;
		else
			attr.path_mtu = IBV_MTU_1024;
	}
	attr.dest_qp_num = peer->qpn;
	attr.rq_psn = peer->psn;
	attr.max_dest_rd_atomic = peer->max_dest_rd_atomic
				      ? peer->max_dest_rd_atomic
				      : verbs_rd_atomic_limit(qp, false, VERBS_RD_ATOMIC_DEFAULT);
	attr.min_rnr_timer =
	    peer->min_rnr_timer ? peer->min_rnr_timer : VERBS_MIN_RNR_TIMER_DEFAULT;
	verbs_fill_ah_attr(&attr.ah_attr, peer);
	mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
	       IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
	return verbs_modify(qp, &attr, mask, "INIT->RTR");
}

int verbs_qp_to_rts(struct ibv_qp *qp, const struct verbs_rts_params *params)
{
	struct verbs_rts_params def = {0};
	struct ibv_qp_attr attr;
	int mask;

	if (!params)
		params = &def;
	memset(&attr, 0, sizeof(attr));
	attr.qp_state = IBV_QPS_RTS;
	attr.sq_psn = params->psn;
	switch (qp->qp_type) {
	case IBV_QPT_UD:
		return verbs_modify(qp, &attr, IBV_QP_STATE | IBV_QP_SQ_PSN, "RTR->RTS");
	case IBV_QPT_RC:
		break;
	default:
		return -EINVAL;
	}
	attr.timeout = params->timeout ? params->timeout : VERBS_TIMEOUT_DEFAULT;
	attr.retry_cnt = params->retry_cnt ? params->retry_cnt : VERBS_RETRY_DEFAULT;
	attr.rnr_retry = params->rnr_retry ? params->rnr_retry : VERBS_RNR_RETRY_DEFAULT;
	attr.max_rd_atomic = params->max_rd_atomic
				 ? params->max_rd_atomic
				 : verbs_rd_atomic_limit(qp, true, VERBS_RD_ATOMIC_DEFAULT);
	mask = IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
	       IBV_QP_MAX_QP_RD_ATOMIC;
	return verbs_modify(qp, &attr, mask, "RTR->RTS");
}

void verbs_rts_init(struct verbs_rts_params *rts, uint32_t psn, uint8_t max_rd_atomic)
{
	*rts = (struct verbs_rts_params){
		.psn = psn,
		.timeout = VERBS_RMEM_ACK_TIMEOUT,
		.retry_cnt = VERBS_RMEM_RETRY_CNT,
		.rnr_retry = VERBS_RMEM_RNR_RETRY,
		.max_rd_atomic = max_rd_atomic,
	};
}

int verbs_cm_channel_open(struct rdma_event_channel **out)
{
	int rc;

	errno = 0;
	*out = rdma_create_event_channel();
	if (!*out) {
		rc = errno ? -errno : -ENODEV;
		/* no /dev/infiniband/rdma_cm: no RDMA here */
		return rc == -ENOENT || rc == -ENXIO ? -ENODEV : rc;
	}
	rc = fcntl((*out)->fd, F_SETFL, fcntl((*out)->fd, F_GETFL) | O_NONBLOCK) < 0 ? -errno : 0;
	if (rc) {
		rdma_destroy_event_channel(*out);
		*out = NULL;
	}
	return rc;
}

/* the attributes rdma_cm chose for the QP state */
static int verbs_cm_qp_attr(struct rdma_cm_id *id, enum ibv_qp_state state,
			    struct ibv_qp_attr *attr)
{
	int mask = 0;

	memset(attr, 0, sizeof(*attr));
	attr->qp_state = state;
	if (rdma_init_qp_attr(id, attr, &mask)) {
		int rc = -errno;

		g_message("rdma_init_qp_attr(%s): %s", verbs_qp_state_str(state), g_strerror(-rc));
		return rc;
	}
	return 0;
}

int verbs_cm_qp_params(struct rdma_cm_id *id, uint8_t port, struct verbs_peer *peer,
		       struct verbs_rts_params *rts)
{
	struct ibv_qp_attr attr;
	int rc;

	rc = verbs_cm_qp_attr(id, IBV_QPS_RTR, &attr);
	if (rc)
		return rc;
	memset(peer, 0, sizeof(*peer));
	peer->qpn = attr.dest_qp_num;
	peer->psn = attr.rq_psn;
	peer->lid = attr.ah_attr.dlid;
	peer->gid = attr.ah_attr.grh.dgid;
	peer->global = attr.ah_attr.is_global;
	peer->sgid_index = attr.ah_attr.grh.sgid_index;
	peer->port = attr.ah_attr.port_num ? attr.ah_attr.port_num : port;
	peer->mtu = attr.path_mtu;
	peer->max_dest_rd_atomic = attr.max_dest_rd_atomic ? attr.max_dest_rd_atomic : 1;
	peer->min_rnr_timer = attr.min_rnr_timer;
	rc = verbs_cm_qp_attr(id, IBV_QPS_RTS, &attr);
	if (rc)
		return rc;
	verbs_rts_init(rts, attr.sq_psn, attr.max_rd_atomic ? attr.max_rd_atomic : 1);
	return 0;
}

int verbs_qp_up(struct ibv_qp *qp, const struct verbs_peer *peer,
		const struct verbs_rts_params *rts)
{
	int rc = verbs_qp_to_rtr(qp, peer);

	return rc ? rc : verbs_qp_to_rts(qp, rts);
}

int verbs_rd_atomic_depth(uint32_t dev_limit, uint32_t peer_limit, uint32_t cap)
{
	uint32_t v = dev_limit ? dev_limit : 1;

	if (v > cap)
		v = cap;
	if (peer_limit && peer_limit < v)
		v = peer_limit;
	return v ? (int)v : 1;
}

int verbs_qp_to_err(struct ibv_qp *qp)
{
	struct ibv_qp_attr attr;

	memset(&attr, 0, sizeof(attr));
	attr.qp_state = IBV_QPS_ERR;
	return verbs_modify(qp, &attr, IBV_QP_STATE, "->ERR");
}

int verbs_qp_state(struct ibv_qp *qp, enum ibv_qp_state *state)
{
	struct ibv_qp_init_attr init;
	struct ibv_qp_attr attr;
	int rc;

	errno = 0;
	rc = verbs_ret(ibv_query_qp(qp, &attr, IBV_QP_STATE, &init));
	if (rc) {
		g_warning("ibv_query_qp(QP 0x%x) failed: %s", qp->qp_num, g_strerror(-rc));
		return rc;
	}
	*state = attr.qp_state;
	return 0;
}

const char *verbs_qp_state_str(enum ibv_qp_state state)
{
	static const char *const names[] = {
		[IBV_QPS_RESET] = "RESET", [IBV_QPS_INIT] = "INIT", [IBV_QPS_RTR] = "RTR",
		[IBV_QPS_RTS] = "RTS",	   [IBV_QPS_SQD] = "SQD",   [IBV_QPS_SQE] = "SQE",
		[IBV_QPS_ERR] = "ERR",
	};

	return (unsigned int)state < G_N_ELEMENTS(names) && names[state] ? names[state] : "UNKNOWN";
}

/* ---- address handles (UD) ---- */

int verbs_ah_create(struct ibv_pd *pd, const struct verbs_peer *peer, struct ibv_ah **out)
{
	struct ibv_ah_attr attr;
	struct ibv_ah *ah;
	int rc;

	*out = NULL;
	if (!peer)
		return -EINVAL;
	verbs_fill_ah_attr(&attr, peer);
	errno = 0;
	ah = ibv_create_ah(pd, &attr);
	if (!ah) {
		rc = verbs_errno();
		g_warning("ibv_create_ah(port %u, lid %u, global %d) failed: %s", peer->port,
			  peer->lid, peer->global, g_strerror(-rc));
		return rc;
	}
	*out = ah;
	return 0;
}

void verbs_ah_destroy(struct ibv_ah *ah)
{
	int rc;

	if (!ah)
		return;
	rc = verbs_ret(ibv_destroy_ah(ah));
	if (rc)
		g_warning("ibv_destroy_ah failed: %s", g_strerror(-rc));
}

/* ---- scatter/gather entries and work requests ---- */

int verbs_sge(struct ibv_sge *sge, const struct verbs_mr *mr, void *addr, uint32_t len)
{
	uintptr_t base = (uintptr_t)mr->addr;
	uintptr_t a = (uintptr_t)addr;

	if (!mr->mr || a < base || a - base > mr->len || len > mr->len - (a - base))
		return -EFAULT;
	sge->addr = (uint64_t)a;
	sge->length = len;
	sge->lkey = mr->lkey;
	return 0;
}

static void verbs_wr_init(struct ibv_send_wr *wr, uint64_t wr_id, enum ibv_wr_opcode opcode,
			  struct ibv_sge *sge, int nsge, unsigned int flags)
{
	memset(wr, 0, sizeof(*wr));
	wr->wr_id = wr_id;
	wr->opcode = opcode;
	wr->sg_list = sge;
	wr->num_sge = nsge;
	wr->send_flags = flags;
}

void verbs_wr_send(struct ibv_send_wr *wr, uint64_t wr_id, struct ibv_sge *sge, int nsge,
		   unsigned int flags)
{
	verbs_wr_init(wr, wr_id, IBV_WR_SEND, sge, nsge, flags);
}

void verbs_wr_send_imm(struct ibv_send_wr *wr, uint64_t wr_id, struct ibv_sge *sge, int nsge,
		       uint32_t imm, unsigned int flags)
{
	verbs_wr_init(wr, wr_id, IBV_WR_SEND_WITH_IMM, sge, nsge, flags);
	wr->imm_data = htobe32(imm);
}

void verbs_wr_write(struct ibv_send_wr *wr, uint64_t wr_id, struct ibv_sge *sge, int nsge,
		    uint64_t raddr, uint32_t rkey, unsigned int flags)
{
	verbs_wr_init(wr, wr_id, IBV_WR_RDMA_WRITE, sge, nsge, flags);
	wr->wr.rdma.remote_addr = raddr;
	wr->wr.rdma.rkey = rkey;
}

void verbs_wr_write_imm(struct ibv_send_wr *wr, uint64_t wr_id, struct ibv_sge *sge, int nsge,
			uint64_t raddr, uint32_t rkey, uint32_t imm, unsigned int flags)
{
	verbs_wr_init(wr, wr_id, IBV_WR_RDMA_WRITE_WITH_IMM, sge, nsge, flags);
	wr->wr.rdma.remote_addr = raddr;
	wr->wr.rdma.rkey = rkey;
	wr->imm_data = htobe32(imm);
}

void verbs_wr_read(struct ibv_send_wr *wr, uint64_t wr_id, struct ibv_sge *sge, int nsge,
		   uint64_t raddr, uint32_t rkey, unsigned int flags)
{
	verbs_wr_init(wr, wr_id, IBV_WR_RDMA_READ, sge, nsge, flags);
	wr->wr.rdma.remote_addr = raddr;
	wr->wr.rdma.rkey = rkey;
}

void verbs_wr_cas(struct ibv_send_wr *wr, uint64_t wr_id, struct ibv_sge *sge, uint64_t raddr,
		  uint32_t rkey, uint64_t compare, uint64_t swap, unsigned int flags)
{
	verbs_wr_init(wr, wr_id, IBV_WR_ATOMIC_CMP_AND_SWP, sge, 1, flags);
	wr->wr.atomic.remote_addr = raddr;
	wr->wr.atomic.rkey = rkey;
	wr->wr.atomic.compare_add = compare;
	wr->wr.atomic.swap = swap;
}

void verbs_wr_fetch_add(struct ibv_send_wr *wr, uint64_t wr_id, struct ibv_sge *sge, uint64_t raddr,
			uint32_t rkey, uint64_t add, unsigned int flags)
{
	verbs_wr_init(wr, wr_id, IBV_WR_ATOMIC_FETCH_AND_ADD, sge, 1, flags);
	wr->wr.atomic.remote_addr = raddr;
	wr->wr.atomic.rkey = rkey;
	wr->wr.atomic.compare_add = add;
}

void verbs_wr_set_ud(struct ibv_send_wr *wr, struct ibv_ah *ah, uint32_t remote_qpn,
		     uint32_t remote_qkey)
{
	wr->wr.ud.ah = ah;
	wr->wr.ud.remote_qpn = remote_qpn;
	wr->wr.ud.remote_qkey = remote_qkey;
}

void verbs_wr_chain(struct ibv_send_wr *wrs, int n)
{
	int i;

	for (i = 0; i < n; i++)
		wrs[i].next = i + 1 < n ? &wrs[i + 1] : NULL;
}

int verbs_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
	struct ibv_send_wr *bad_wr = NULL;
	int rc;

	errno = 0;
	rc = verbs_ret(ibv_post_send(qp, wr, &bad_wr));
	if (bad)
		*bad = rc ? bad_wr : NULL;
	if (rc)
		/* expected when the QP has gone to ERR or the queue is full */
		g_message("ibv_post_send(QP 0x%x, wr_id %" G_GUINT64_FORMAT ") failed: %s",
			  qp->qp_num, bad_wr ? (guint64)bad_wr->wr_id : (guint64)0,
			  g_strerror(-rc));
	return rc;
}

void verbs_wr_recv(struct ibv_recv_wr *wr, uint64_t wr_id, struct ibv_sge *sge, int nsge)
{
	memset(wr, 0, sizeof(*wr));
	wr->wr_id = wr_id;
	wr->sg_list = sge;
	wr->num_sge = nsge;
}

void verbs_wr_recv_chain(struct ibv_recv_wr *wrs, int n)
{
	int i;

	for (i = 0; i < n; i++)
		wrs[i].next = i + 1 < n ? &wrs[i + 1] : NULL;
}

int verbs_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	struct ibv_recv_wr *bad_wr = NULL;
	int rc;

	errno = 0;
	rc = verbs_ret(ibv_post_recv(qp, wr, &bad_wr));
	if (bad)
		*bad = rc ? bad_wr : NULL;
	if (rc)
		g_message("ibv_post_recv(QP 0x%x, wr_id %" G_GUINT64_FORMAT ") failed: %s",
			  qp->qp_num, bad_wr ? (guint64)bad_wr->wr_id : (guint64)0,
			  g_strerror(-rc));
	return rc;
}

int verbs_post_recv_buf(struct ibv_qp *qp, const struct verbs_mr *mr, void *buf, uint32_t len,
			uint64_t wr_id)
{
	struct ibv_recv_wr wr;
	struct ibv_sge sge;
	int rc;

	rc = verbs_sge(&sge, mr, buf, len);
	if (rc)
		return rc;
	verbs_wr_recv(&wr, wr_id, &sge, 1);
	return verbs_post_recv(qp, &wr, NULL);
}
