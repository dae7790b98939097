/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * verbs.h - thin wrappers over libibverbs, mirroring rdma-core's object model
 * (device list, context, PD, MR, CQ + completion channel, QP, AH, work
 * requests) one call per verb.
 *
 * Why it exists: rdma-core reports failure three ways (NULL + errno, -1 +
 * errno, a positive errno return). These wrappers normalise all of it, once:
 * every function here returns 0 (or a count) on success and -errno on failure,
 * and logs the failed verb with its errno under G_LOG_DOMAIN "rmemfs-verbs".
 * Destroy functions are NULL-tolerant, log failures and keep releasing.
 *
 * The rdma-core types (struct ibv_qp, IBV_ACCESS_*, IBV_SEND_*, ...) are used
 * as they are; the wrappers add only what rdma-core lacks: defaults, checked
 * state transitions, a reused completion array, batched event acks, typed WR
 * builders.
 */
#ifndef RMEM_VERBS_H
#define RMEM_VERBS_H

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define VERBS_ACCESS_REMOTE_ALL                                                                    \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |               \
	 IBV_ACCESS_REMOTE_ATOMIC)

/* ---- device list ---- */

struct verbs_device_list {
	struct ibv_device **devs;
	int num;
};

/* 0 with list->num >= 1; -ENODEV when there is no RDMA device; -errno */
int verbs_device_list_get(struct verbs_device_list *list);
void verbs_device_list_free(struct verbs_device_list *list);

/* ---- context ---- */

int verbs_open(struct ibv_device *dev, struct ibv_context **out);
/* name NULL: the first device with an ACTIVE port. -ENODEV if none matches */
int verbs_open_by_name(const char *name, struct ibv_context **out);
void verbs_close(struct ibv_context *ctx);

struct verbs_device_attr {
	char name[64];
	char fw_ver[64];
	uint64_t max_mr_size;
	uint32_t max_qp;
	uint32_t max_qp_wr;
	uint32_t max_cq;
	uint32_t max_cqe;
	uint32_t max_mr;
	uint32_t max_sge;
	uint32_t max_qp_rd_atom; /* outstanding READ/atomic as target */
	uint32_t max_qp_init_rd_atom; /* as initiator */
	uint8_t phys_port_cnt;
	enum ibv_atomic_cap atomic_cap;
	bool atomics; /* atomic_cap != IBV_ATOMIC_NONE */
};
int verbs_query_device(struct ibv_context *ctx, struct verbs_device_attr *out);

struct verbs_port_attr {
	enum ibv_port_state state;
	enum ibv_mtu active_mtu;
	enum ibv_mtu max_mtu;
	uint16_t lid;
	uint8_t link_layer; /* IBV_LINK_LAYER_* */
	int gid_tbl_len;
};
int verbs_query_port(struct ibv_context *ctx, uint8_t port, struct verbs_port_attr *out);
int verbs_query_gid(struct ibv_context *ctx, uint8_t port, int index, union ibv_gid *gid);
/*
 * Pick a GID index to use: an IPv4-mapped (RoCE v2) entry if there is one,
 * else the first non-zero entry. -ENOENT if the table is empty.
 */
int verbs_find_gid(struct ibv_context *ctx, uint8_t port, int *index, union ibv_gid *gid);

const char *verbs_port_state_str(enum ibv_port_state state);
int verbs_mtu_to_bytes(enum ibv_mtu mtu);
void verbs_gid_to_str(const union ibv_gid *gid, char *buf, size_t cap);

/* ---- protection domain ---- */

int verbs_pd_alloc(struct ibv_context *ctx, struct ibv_pd **out);
void verbs_pd_free(struct ibv_pd *pd);

/* ---- memory regions ---- */

struct verbs_mr {
	struct ibv_mr *mr;
	void *addr;
	size_t len;
	uint32_t lkey;
	uint32_t rkey;
	bool owned; /* buffer allocated by verbs_mr_alloc, freed by dereg */
};
/* register the caller's buffer; access: IBV_ACCESS_* (e.g. VERBS_ACCESS_REMOTE_ALL) */
int verbs_mr_reg(struct ibv_pd *pd, void *addr, size_t len, int access, struct verbs_mr *out);
/* allocate a zeroed, page-aligned buffer and register it */
int verbs_mr_alloc(struct ibv_pd *pd, size_t len, int access, struct verbs_mr *out);
/* deregister (and free an owned buffer); zeroes *mr; NULL/empty-tolerant */
void verbs_mr_dereg(struct verbs_mr *mr);

/* ---- completion queues ---- */

struct verbs_cq {
	struct ibv_cq *cq;
	struct ibv_comp_channel *channel; /* NULL in polling-only mode */
	unsigned int unacked; /* events received and not yet acked */
	struct ibv_wc *wc; /* reused completion array, wc_cap entries */
	int wc_cap;
};
/*
 * cqe: CQ depth; with_channel: create and attach a completion channel (its fd
 * is made non-blocking and the CQ is armed once, so the first verbs_cq_wait or
 * epoll wake-up sees the first completion); wc_cap <= 0: 32.
 */
int verbs_cq_create(struct ibv_context *ctx, int cqe, bool with_channel, int wc_cap,
		    struct verbs_cq *out);
/* acks every pending event, destroys CQ then channel; NULL/empty-tolerant */
void verbs_cq_destroy(struct verbs_cq *cq);
/* request a notification for the next completion */
int verbs_cq_arm(struct verbs_cq *cq, bool solicited_only);
/*
 * Wait for a completion event (timeout_ms -1: forever), acking in batches.
 * Re-arms the CQ before returning. 0, -ETIMEDOUT, -EINVAL (no channel), -errno.
 */
int verbs_cq_wait(struct verbs_cq *cq, int timeout_ms);
/* the channel's fd (for poll/epoll), or -EINVAL without a channel */
int verbs_cq_fd(const struct verbs_cq *cq);
/* ack events received so far (also done by wait in batches and by destroy) */
void verbs_cq_ack(struct verbs_cq *cq);
/* poll up to min(max, wc_cap) completions into cq->wc; returns count >= 0 or -errno */
int verbs_cq_poll(struct verbs_cq *cq, int max);

/* IBV_WC_SUCCESS -> 0; others -> a fitting -errno (REM_ACCESS_ERR -> -EACCES, ...) */
int verbs_wc_status_to_errno(enum ibv_wc_status status);
const char *verbs_wc_status_str(enum ibv_wc_status status);
/* the immediate of a completion with IBV_WC_WITH_IMM, in host byte order */
uint32_t verbs_wc_imm(const struct ibv_wc *wc);

/* ---- queue pairs ---- */

struct verbs_qp_caps {
	uint32_t max_send_wr; /* defaults: 256 */
	uint32_t max_recv_wr; /* 256 */
	uint32_t max_send_sge; /* 4 */
	uint32_t max_recv_sge; /* 1 */
	uint32_t max_inline_data; /* 64 (what the device grants is written back) */
};
void verbs_qp_caps_default(struct verbs_qp_caps *caps);
/* type: IBV_QPT_RC or IBV_QPT_UD; caps NULL: defaults (granted caps written back if non-NULL) */
int verbs_qp_create(struct ibv_pd *pd, enum ibv_qp_type type, struct verbs_cq *send_cq,
		    struct verbs_cq *recv_cq, struct verbs_qp_caps *caps, struct ibv_qp **out);
void verbs_qp_destroy(struct ibv_qp *qp);

/* RESET -> INIT. RC: access flags; UD: qkey (access ignored) */
int verbs_qp_to_init(struct ibv_qp *qp, uint8_t port, int access, uint32_t qkey);

/* what the other side of an RC QP (or the target of a UD AH) is */
struct verbs_peer {
	uint32_t qpn;
	uint32_t psn;
	uint16_t lid;
	union ibv_gid gid;
	bool global; /* route by GID (RoCE: always) */
	int sgid_index; /* local GID index to send from */
	uint8_t port; /* local port (0: 1) */
	enum ibv_mtu mtu; /* path MTU (0: the local port's active MTU) */
	uint8_t max_dest_rd_atomic; /* 0: 16, capped at the device's max_qp_rd_atom */
	uint8_t min_rnr_timer; /* 0: 12 */
};
/* INIT -> RTR. RC: needs the full peer; UD: peer may be NULL */
int verbs_qp_to_rtr(struct ibv_qp *qp, const struct verbs_peer *peer);

struct verbs_rts_params {
	uint32_t psn;
	uint8_t timeout; /* local ACK timeout: 4.096us * 2^timeout (0: 14, ~67 ms) */
	uint8_t retry_cnt; /* 0: 7 */
	uint8_t rnr_retry; /* 0: 7 (infinite) */
	uint8_t max_rd_atomic; /* 0: 16, capped at the device's max_qp_init_rd_atom */
};
/* RTR -> RTS. params NULL: defaults with psn 0 */
int verbs_qp_to_rts(struct ibv_qp *qp, const struct verbs_rts_params *params);
/*
 * Outstanding READ/atomic depth to use: the device's limit (at least 1),
 * capped at cap, and at the peer's limit when it is non-zero.
 */
int verbs_rd_atomic_depth(uint32_t dev_limit, uint32_t peer_limit, uint32_t cap);
/*
 * The retransmission settings of every rmemfs RC QP, client and memserver
 * alike: a try lasts 4.096 us * 2^16 = 268 ms, 5 retries, so a vanished peer
 * is noticed in about 1.6 s; RNR retries are infinite, as both sides always
 * re-post their receives. Fills *rts with them, psn and max_rd_atomic.
 */
#define VERBS_RMEM_ACK_TIMEOUT 16
#define VERBS_RMEM_RETRY_CNT 5
#define VERBS_RMEM_RNR_RETRY 7
void verbs_rts_init(struct verbs_rts_params *rts, uint32_t psn, uint8_t max_rd_atomic);
/* a non-blocking rdma_cm event channel; 0, -ENODEV where this host has no rdma_cm, or -errno */
int verbs_cm_channel_open(struct rdma_event_channel **out);
/*
 * What rdma_cm negotiated for id's QP (rdma_init_qp_attr for RTR and RTS):
 * the peer (port: used when rdma_cm names none) and the RTS parameters, with
 * verbs_rts_init's settings. Either side's rd_atomic depth is rdma_cm's
 * value or 1; callers adjust them before verbs_qp_up. 0 or -errno.
 */
int verbs_cm_qp_params(struct rdma_cm_id *id, uint8_t port, struct verbs_peer *peer,
		       struct verbs_rts_params *rts);
/* INIT -> RTR -> RTS; 0 or -errno */
int verbs_qp_up(struct ibv_qp *qp, const struct verbs_peer *peer,
		const struct verbs_rts_params *rts);
/* move to ERR (flushes outstanding WRs with IBV_WC_WR_FLUSH_ERR) */
int verbs_qp_to_err(struct ibv_qp *qp);
int verbs_qp_state(struct ibv_qp *qp, enum ibv_qp_state *state);
const char *verbs_qp_state_str(enum ibv_qp_state state);

/* ---- address handles (UD) ---- */

int verbs_ah_create(struct ibv_pd *pd, const struct verbs_peer *peer, struct ibv_ah **out);
void verbs_ah_destroy(struct ibv_ah *ah);

/* ---- scatter/gather entries and work requests ---- */

/* an SGE for [addr, addr+len) inside mr; -EFAULT if outside */
int verbs_sge(struct ibv_sge *sge, const struct verbs_mr *mr, void *addr, uint32_t len);

/* flags: IBV_SEND_SIGNALED | IBV_SEND_INLINE | IBV_SEND_FENCE | IBV_SEND_SOLICITED */
void verbs_wr_send(struct ibv_send_wr *wr, uint64_t wr_id, struct ibv_sge *sge, int nsge,
		   unsigned int flags);
void verbs_wr_send_imm(struct ibv_send_wr *wr, uint64_t wr_id, struct ibv_sge *sge, int nsge,
		       uint32_t imm, unsigned int flags);
void verbs_wr_write(struct ibv_send_wr *wr, uint64_t wr_id, struct ibv_sge *sge, int nsge,
		    uint64_t raddr, uint32_t rkey, unsigned int flags);
void verbs_wr_write_imm(struct ibv_send_wr *wr, uint64_t wr_id, struct ibv_sge *sge, int nsge,
			uint64_t raddr, uint32_t rkey, uint32_t imm, unsigned int flags);
void verbs_wr_read(struct ibv_send_wr *wr, uint64_t wr_id, struct ibv_sge *sge, int nsge,
		   uint64_t raddr, uint32_t rkey, unsigned int flags);
/* sge: 8 bytes receiving the old value */
void verbs_wr_cas(struct ibv_send_wr *wr, uint64_t wr_id, struct ibv_sge *sge, uint64_t raddr,
		  uint32_t rkey, uint64_t compare, uint64_t swap, unsigned int flags);
void verbs_wr_fetch_add(struct ibv_send_wr *wr, uint64_t wr_id, struct ibv_sge *sge,
			uint64_t raddr, uint32_t rkey, uint64_t add, unsigned int flags);
/* address a SEND to a UD QP */
void verbs_wr_set_ud(struct ibv_send_wr *wr, struct ibv_ah *ah, uint32_t remote_qpn,
		     uint32_t remote_qkey);
/* link wrs[0..n-1] into one list (wrs[n-1].next = NULL) for one doorbell */
void verbs_wr_chain(struct ibv_send_wr *wrs, int n);
/* post a WR list; on failure *bad (if non-NULL) names the first WR not posted */
int verbs_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad);

void verbs_wr_recv(struct ibv_recv_wr *wr, uint64_t wr_id, struct ibv_sge *sge, int nsge);
void verbs_wr_recv_chain(struct ibv_recv_wr *wrs, int n);
int verbs_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad);
/* post one receive of [buf, buf+len) inside mr as wr_id; 0 or -errno */
int verbs_post_recv_buf(struct ibv_qp *qp, const struct verbs_mr *mr, void *buf, uint32_t len,
			uint64_t wr_id);

#endif /* RMEM_VERBS_H */
