/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * xport.h - the transport contract.
 *
 * One ops table, implemented twice: xport_rdma.c (librdmacm + verbs, one-sided
 * RDMA READ/WRITE/atomics) and xport_tcp.c (the same one-sided semantics
 * emulated over TCP by the memserver). Generic code (xport.c) only dispatches;
 * xport_connect.c picks an implementation by name ("rdma", "tcp", or "auto":
 * RDMA when a verbs device can reach the server, else TCP).
 *
 * Model. A client connects with a token and receives the pool descriptors
 * (struct proto_pool: regions of remote memory, each an address range and an
 * rkey). It registers local memory (xport_reg_mr) and posts batches of
 * operations that move bytes between registered local memory and (remote
 * address, rkey), then reaps completions. A synchronous helper (xport_run) sits
 * on top. A small two-sided request/response (xport_call) carries control
 * messages (PROTO_PING, PROTO_STATS).
 *
 * Errors follow the NIC: a wrong rkey or a range outside the key's region is
 * an error *completion* of that operation (-EACCES / -EFAULT over TCP; RDMA
 * reports both as -EACCES), never a crash and never an access outside the
 * pool. After an error completion the connection may be unusable (an RDMA QP
 * enters the error state): later posts return -ENOTCONN and callers reconnect.
 *
 * Connection loss. When the peer dies or stops answering, every operation in
 * flight completes at once with -EIO (or -ETIMEDOUT when op_timeout_ms passed
 * without progress); later posts return -ENOTCONN. Nothing waits forever.
 *
 * Fencing. Once another client sent PROTO_FENCE with this connection's
 * client id, no WRITE/CAS/FETCH_ADD of it lands any more: over TCP its next
 * request completes with -EKEYREVOKED and the server closes the connection;
 * over RDMA the server moves its QP to the error state and disconnects, so
 * ops fail as on a lost connection (-EIO). Connecting again with that id
 * fails with -EKEYREVOKED.
 *
 * Threads. An xport is a single connection used by one thread at a time: the
 * caller serialises post/poll/call on one xport (one xport per worker, or a
 * lock around it). Different xports are independent.
 *
 * Every function returns 0 (or a count) on success and -errno on failure.
 */
#ifndef RMEM_XPORT_H
#define RMEM_XPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto.h"

#ifndef container_of
#define container_of(ptr, type, member) ((type *)((char *)(ptr) - offsetof(type, member)))
#endif

enum xport_op_type {
	XPORT_READ = 1, /* remote -> local, len bytes */
	XPORT_WRITE = 2, /* local -> remote, len bytes */
	XPORT_CAS = 3, /* 64-bit compare-and-swap; old value -> local (8 bytes) */
	XPORT_FETCH_ADD = 4, /* 64-bit fetch-and-add; old value -> local (8 bytes) */
};

/* op flags */
#define XPORT_OP_UNSIGNALED (1U << 0) /* report a completion only if it fails */
#define XPORT_OP_INLINE (1U << 1) /* hint: small WRITE, source may be reused after post */

enum xport_poll_mode {
	XPORT_POLL_BUSY = 0, /* spin on the completion queue / socket */
	XPORT_POLL_EVENT = 1, /* block on the completion channel / socket */
	XPORT_POLL_HYBRID = 2, /* spin for spin_us, then block */
};

/* registered local memory; lkey is what an RDMA SGE carries (TCP: a cookie) */
struct xport_mr {
	void *addr;
	size_t len;
	uint32_t lkey;
};

/* one work item of a batch */
struct xport_op {
	enum xport_op_type type;
	uint32_t flags; /* XPORT_OP_* */
	uint64_t wr_id; /* caller's cookie, returned in the completion */
	struct xport_mr *mr; /* registered memory that holds [local, local+len) */
	void *local; /* READ: destination; WRITE: source; atomics: 8-byte result */
	uint32_t len; /* READ/WRITE: 1..PROTO_MAX_IO bytes; atomics: ignored (8) */
	uint64_t raddr; /* remote address (atomics: 8-byte aligned) */
	uint32_t rkey;
	uint64_t compare_add; /* CAS: expected value; FETCH_ADD: addend */
	uint64_t swap; /* CAS: value stored when *raddr == compare_add */
};

struct xport_cqe {
	uint64_t wr_id;
	int status; /* 0 or -errno */
	enum xport_op_type type;
};

struct xport_params {
	const char *host; /* server name or address */
	uint16_t port; /* 0: PROTO_DEFAULT_PORT */
	/* SHA-256 of the token (proto_token_hash/_load); all zero: no token */
	uint8_t token_hash[PROTO_TOKEN_HASH_LEN];
	/*
	 * Presented at connect (HELLO / CM private data): a lease holder's owner
	 * value, so PROTO_FENCE can revoke its connections. 0: holds no lease.
	 */
	uint64_t client_id;
	enum xport_poll_mode poll_mode;
	unsigned int spin_us; /* hybrid: spin this long before blocking (0: 50) */
	unsigned int queue_depth; /* max ops in flight (0: 128) */
	int connect_timeout_ms; /* 0: 5000 */
	int op_timeout_ms; /* in-flight ops with no progress this long fail (0: 10000) */
	bool rdma_oob_qp; /* rdma: bring the QP up by hand, parameters over TCP */
	const char *rdma_dev; /* rdma: device name for the oob path (NULL: first active) */
	bool quiet; /* log neither what auto picked nor set-up trouble: the caller reports */
	/*
	 * The server's named pool to connect to (proto_pool_name_valid); NULL
	 * or "": its default pool. pool_create_size > 0: create the pool with
	 * that size if it does not exist (the token's tenant owns it).
	 */
	const char *pool;
	uint64_t pool_create_size;
};

struct xport;

/*
 * The ops table. Each implementation fills one const instance; the generic
 * xport_* functions below dispatch to it and add nothing but argument checks.
 */
struct xport_ops {
	const char *name; /* "tcp", "rdma" */

	/*
	 * Connect, authenticate with params->token_hash, present
	 * params->client_id, and fetch the pool descriptors into (*out)->pool.
	 * Returns 0, or -EPERM (token refused), -EKEYREVOKED (the client id was
	 * fenced), -EPROTONOSUPPORT (version), -ECONNREFUSED, -ETIMEDOUT,
	 * -ENODEV (rdma: no device reaches the host), -ENOMEM, other -errno.
	 */
	int (*connect)(const struct xport_params *params, struct xport **out);

	/*
	 * Disconnect and free everything; operations still in flight are
	 * abandoned (their buffers may still be written until close returns).
	 * NULL-tolerant at the xport_close() level.
	 */
	void (*close)(struct xport *x);

	/* register [addr, addr+len) for use as op->local. -ENOMEM, -EFAULT, -EINVAL */
	int (*reg_mr)(struct xport *x, void *addr, size_t len, struct xport_mr **out);
	/* deregister; no op using it may be in flight. NULL-tolerant */
	void (*dereg_mr)(struct xport *x, struct xport_mr *mr);

	/*
	 * Post n ops as one batch (RDMA: one chained post, one doorbell).
	 * All-or-nothing: 0 when all were posted; -EAGAIN if fewer than n slots
	 * are free (nothing posted: reap, then retry); -EINVAL for a malformed
	 * op (local outside mr, len 0 or > PROTO_MAX_IO, unknown type; nothing
	 * posted); -ENOTCONN once the connection is lost.
	 */
	int (*post)(struct xport *x, const struct xport_op *ops, unsigned int n);

	/*
	 * Reap up to max completions. Waits up to timeout_ms (-1: until one
	 * arrives; 0: no wait) for at least one, according to the poll mode.
	 * Returns the number of cqes filled (0 on timeout, and at once when
	 * nothing is in flight), or -ENOTCONN when the connection is lost and
	 * every in-flight op has already been reported.
	 */
	int (*poll)(struct xport *x, struct xport_cqe *cqes, unsigned int max, int timeout_ms);

	/* ops posted and not yet reaped (signalled or not) */
	unsigned int (*inflight)(const struct xport *x);

	/*
	 * Two-sided control request/response (type: PROTO_PING, PROTO_STATS,
	 * PROTO_FENCE).
	 * Requires nothing in flight (-EBUSY). Copies at most resp_cap bytes of
	 * the response payload into resp and sets *resp_len to the full length
	 * (-EMSGSIZE if it did not fit). Server errors come back as their errno.
	 */
	int (*call)(struct xport *x, uint16_t type, const void *req, uint32_t req_len, void *resp,
		    uint32_t resp_cap, uint32_t *resp_len);
};

/*
 * The base every implementation embeds first (struct xport_tcp { struct xport
 * base; ... }) and recovers itself from with container_of().
 */
struct xport {
	const struct xport_ops *ops;
	struct proto_pool pool; /* descriptors received at connect */
	enum xport_poll_mode poll_mode;
	unsigned int spin_us;
	unsigned int depth; /* queue depth */
	int op_timeout_ms;
	char peer[96]; /* "tcp 127.0.0.1:7471", for messages */
};

extern const struct xport_ops xport_tcp_ops;
#ifdef RMEM_HAVE_RDMA
extern const struct xport_ops xport_rdma_ops;
#endif

/* fill params with the defaults above (host NULL, no token, client id 0) */
void xport_params_init(struct xport_params *params);
/*
 * What every client program does first: the defaults, host and port (0:
 * the default port), and the hash of the token in token_file (NULL: no
 * token). A token file that cannot be read, or holds no token, is reported
 * on stderr as "PROG: TOKEN_OPT FILE: why" (token_opt: how the program's
 * option is spelled, e.g. "token_file=") and returns -errno.
 */
int xport_params_client(struct xport_params *params, const char *host, uint16_t port,
			const char *token_file, const char *prog, const char *token_opt);
/* what a connection authenticates with (HELLO, CM private data): token hash and client id */
void xport_params_hello(const struct xport_params *params, struct proto_hello *hello);

/*
 * Connect with the named transport: "tcp", "rdma" or "auto" (NULL = "auto").
 * auto tries RDMA when a verbs device exists and falls back to TCP on
 * -ENODEV/-ECONNREFUSED/-EADDRNOTAVAIL/-ETIMEDOUT/-ENETUNREACH, logging which
 * it picked.
 * -EINVAL for an unknown name; -EPROTONOSUPPORT for "rdma" in a build without it.
 */
int xport_connect(const char *name, const struct xport_params *params, struct xport **out);
void xport_close(struct xport *x); /* NULL-tolerant */
const char *xport_name(const struct xport *x);
/* true if this build has the named transport */
bool xport_available(const char *name);
/* true if this build has RDMA and at least one verbs device exists (what "auto" checks first) */
bool xport_rdma_device_present(void);

int xport_reg_mr(struct xport *x, void *addr, size_t len, struct xport_mr **out);
void xport_dereg_mr(struct xport *x, struct xport_mr *mr);
int xport_post(struct xport *x, const struct xport_op *ops, unsigned int n);
int xport_poll(struct xport *x, struct xport_cqe *cqes, unsigned int max, int timeout_ms);
unsigned int xport_inflight(const struct xport *x);
int xport_call(struct xport *x, uint16_t type, const void *req, uint32_t req_len, void *resp,
	       uint32_t resp_cap, uint32_t *resp_len);

/*
 * Synchronous helper: run n ops (any n; posted in chunks of the queue depth,
 * all signalled) and wait for every completion. Every op is checked as
 * xport_post() checks it (-EINVAL, nothing posted). Requires nothing else in
 * flight on x (-EBUSY). Returns 0 or the first failure's -errno; every op has
 * finished (or the connection is dead) when it returns.
 */
int xport_run(struct xport *x, const struct xport_op *ops, unsigned int n);

/* convenience wrappers over xport_run() for one op */
int xport_read(struct xport *x, struct xport_mr *mr, void *local, uint32_t len, uint64_t raddr,
	       uint32_t rkey);
int xport_write(struct xport *x, struct xport_mr *mr, const void *local, uint32_t len,
		uint64_t raddr, uint32_t rkey);
/* *old receives the previous value; result buffer must lie in mr */
int xport_cas(struct xport *x, struct xport_mr *mr, uint64_t *old, uint64_t raddr, uint32_t rkey,
	      uint64_t compare, uint64_t swap);
int xport_fetch_add(struct xport *x, struct xport_mr *mr, uint64_t *old, uint64_t raddr,
		    uint32_t rkey, uint64_t add);

/* statistics from the server (PROTO_STATS) */
int xport_stats(struct xport *x, struct proto_stats *stats);
/*
 * PROTO_FENCE: make the server revoke every connection presenting
 * client_id and refuse it from now on; returns once no write of those
 * connections can land any more. -EBADMSG for client id 0, -EPROTO for
 * one's own id, other -errno as xport_call.
 */
int xport_fence(struct xport *x, uint64_t client_id);

const char *xport_op_type_str(enum xport_op_type type);
/* parse "busy" | "event" | "hybrid"; -EINVAL otherwise */
int xport_poll_mode_parse(const char *s, enum xport_poll_mode *mode);

#endif /* RMEM_XPORT_H */
