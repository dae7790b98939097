/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * xport.c - the transport-independent half of xport.h: checks arguments
 * (every op of a post is validated here, so both transports refuse the same
 * malformed ops with -EINVAL before anything is posted) and dispatches to
 * the ops table (xport_connect.c chooses the table). The synchronous
 * helpers (xport_run and the one-op wrappers), xport_stats and xport_fence are
 * built only from the dispatchers, so they behave the same over every transport.
 */
#define G_LOG_DOMAIN "rmemfs-xport"

#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <glib.h>

#include "xport.h"

#define XPORT_RUN_CQES 64
/* xport_run copies at most this many ops at once when it must clear UNSIGNALED */
#define XPORT_RUN_COPY 64

void xport_params_hello(const struct xport_params *params, struct proto_hello *hello)
{
	memset(hello, 0, sizeof(*hello));
	memcpy(hello->token_hash, params->token_hash, sizeof(hello->token_hash));
	hello->client_id = params->client_id;
	if (params->pool)
		g_strlcpy(hello->pool, params->pool, sizeof(hello->pool));
	hello->create_size = params->pool_create_size;
}

void xport_close(struct xport *x)
{
	if (!x)
		return;
	x->ops->close(x);
}

const char *xport_name(const struct xport *x)
{
	return x ? x->ops->name : "none";
}

int xport_reg_mr(struct xport *x, void *addr, size_t len, struct xport_mr **out)
{
	if (!x || !addr || !len || !out)
		return -EINVAL;
	if ((uintptr_t)addr + len < (uintptr_t)addr)
		return -EINVAL;
	return x->ops->reg_mr(x, addr, len, out);
}

void xport_dereg_mr(struct xport *x, struct xport_mr *mr)
{
	if (!x || !mr)
		return;
	x->ops->dereg_mr(x, mr);
}

/* the checks every transport shares: known type, sane length, local bytes inside op->mr */
static int xport_op_check(const struct xport_op *op)
{
	uintptr_t lo, hi, p;
	size_t len;

	if (!op->mr || !op->local)
		return -EINVAL;
	switch (op->type) {
	case XPORT_READ:
	case XPORT_WRITE:
		if (op->len == 0 || op->len > PROTO_MAX_IO)
			return -EINVAL;
		len = op->len;
		break;
	case XPORT_CAS:
	case XPORT_FETCH_ADD:
		len = sizeof(uint64_t);
		break;
	default:
		return -EINVAL;
	}
	lo = (uintptr_t)op->mr->addr;
	hi = lo + op->mr->len;
	p = (uintptr_t)op->local;
	if (p < lo || p > hi || hi - p < len)
		return -EINVAL;
	return 0;
}

/* n above the queue depth could never be posted: -EINVAL rather than -EAGAIN forever */
int xport_post(struct xport *x, const struct xport_op *ops, unsigned int n)
{
	unsigned int i;
	int rc;

	if (!x || (n && !ops))
		return -EINVAL;
	if (n == 0)
		return 0;
	if (n > x->depth)
		return -EINVAL;
	for (i = 0; i < n; i++) {
		rc = xport_op_check(&ops[i]);
		if (rc)
			return rc;
	}
	return x->ops->post(x, ops, n);
}

int xport_poll(struct xport *x, struct xport_cqe *cqes, unsigned int max, int timeout_ms)
{
	if (!x || !cqes || !max)
		return -EINVAL;
	return x->ops->poll(x, cqes, max, timeout_ms);
}

unsigned int xport_inflight(const struct xport *x)
{
	return x ? x->ops->inflight(x) : 0;
}

int xport_call(struct xport *x, uint16_t type, const void *req, uint32_t req_len, void *resp,
	       uint32_t resp_cap, uint32_t *resp_len)
{
	uint32_t dummy;

	if (!x || (req_len && !req) || (resp_cap && !resp))
		return -EINVAL;
	if (type != PROTO_PING && type != PROTO_STATS && type != PROTO_FENCE)
		return -EINVAL;
	if (req_len > PROTO_MAX_CTRL)
		return -EMSGSIZE;
	return x->ops->call(x, type, req, req_len, resp, resp_cap, resp_len ? resp_len : &dummy);
}

/*
 * Post ops[0..n) in chunks that fit the free slots, all signalled, and reap
 * until every posted op has completed. After the first failure nothing more is
 * posted, but what is in flight is still reaped, so no op is left running.
 * Every op is checked first, as xport_post() would: the chunks below go to the
 * ops table directly, and a malformed op must be -EINVAL with nothing posted.
 */
int xport_run(struct xport *x, const struct xport_op *ops, unsigned int n)
{
	struct xport_op copy[XPORT_RUN_COPY];
	struct xport_cqe cqes[XPORT_RUN_CQES];
	unsigned int posted = 0, done = 0, i;
	int first_err = 0;

	if (!x || (n && !ops))
		return -EINVAL;
	for (i = 0; i < n; i++) {
		int rc = xport_op_check(&ops[i]);

		if (rc)
			return rc;
	}
	if (x->ops->inflight(x))
		return -EBUSY;

	while (done < posted || (posted < n && !first_err)) {
		unsigned int room = x->depth - x->ops->inflight(x);
		int rc;

		if (posted < n && !first_err && room > 0) {
			const struct xport_op *batch = ops + posted;
			unsigned int chunk = MIN(room, n - posted);

			for (i = 0; i < chunk; i++) {
				if (batch[i].flags & XPORT_OP_UNSIGNALED)
					break;
			}
			if (i < chunk) {
				chunk = MIN(chunk, XPORT_RUN_COPY);
				memcpy(copy, batch, chunk * sizeof(*batch));
				for (i = 0; i < chunk; i++)
					copy[i].flags &= ~XPORT_OP_UNSIGNALED;
				batch = copy;
			}
			rc = x->ops->post(x, batch, chunk);
			if (rc == 0) {
				posted += chunk;
				continue;
			}
			if (rc != -EAGAIN || done == posted)
				first_err = rc;
			if (done == posted)
				break;
		}

		rc = x->ops->poll(x, cqes, MIN(XPORT_RUN_CQES, posted - done), -1);
		if (rc < 0 || (rc == 0 && x->ops->inflight(x) == 0)) {
			/* connection lost, or (never expected) signalled ops vanished */
			if (!first_err)
				first_err = rc < 0 ? rc : -EIO;
			break;
		}
		for (i = 0; i < (unsigned int)rc; i++) {
			if (cqes[i].status && !first_err)
				first_err = cqes[i].status;
		}
		done += rc;
	}
	return first_err;
}

int xport_read(struct xport *x, struct xport_mr *mr, void *local, uint32_t len, uint64_t raddr,
	       uint32_t rkey)
{
	struct xport_op op = {
		.type = XPORT_READ,
		.mr = mr,
		.local = local,
		.len = len,
		.raddr = raddr,
		.rkey = rkey,
	};

	return xport_run(x, &op, 1);
}

int xport_write(struct xport *x, struct xport_mr *mr, const void *local, uint32_t len,
		uint64_t raddr, uint32_t rkey)
{
	struct xport_op op = {
		.type = XPORT_WRITE,
		.mr = mr,
		.local = (void *)local,
		.len = len,
		.raddr = raddr,
		.rkey = rkey,
	};

	return xport_run(x, &op, 1);
}

static int xport_atomic(struct xport *x, enum xport_op_type type, struct xport_mr *mr,
			uint64_t *old, uint64_t raddr, uint32_t rkey, uint64_t compare_add,
			uint64_t swap)
{
	struct xport_op op = {
		.type = type,
		.mr = mr,
		.local = old,
		.len = sizeof(*old),
		.raddr = raddr,
		.rkey = rkey,
		.compare_add = compare_add,
		.swap = swap,
	};

	return xport_run(x, &op, 1);
}

int xport_cas(struct xport *x, struct xport_mr *mr, uint64_t *old, uint64_t raddr, uint32_t rkey,
	      uint64_t compare, uint64_t swap)
{
	return xport_atomic(x, XPORT_CAS, mr, old, raddr, rkey, compare, swap);
}

int xport_fetch_add(struct xport *x, struct xport_mr *mr, uint64_t *old, uint64_t raddr,
		    uint32_t rkey, uint64_t add)
{
	return xport_atomic(x, XPORT_FETCH_ADD, mr, old, raddr, rkey, add, 0);
}

int xport_stats(struct xport *x, struct proto_stats *stats)
{
	struct proto_stats_wire w;
	uint32_t len = 0;
	int rc;

	if (!stats)
		return -EINVAL;
	rc = xport_call(x, PROTO_STATS, NULL, 0, &w, sizeof(w), &len);
	if (rc)
		return rc;
	return proto_stats_unpack(&w, len, stats);
}

int xport_fence(struct xport *x, uint64_t client_id)
{
	struct proto_fence_wire w;
	uint32_t len = 0;

	proto_fence_pack(&w, client_id);
	return xport_call(x, PROTO_FENCE, &w, sizeof(w), NULL, 0, &len);
}

const char *xport_op_type_str(enum xport_op_type type)
{
	static const char *const names[] = {
		[XPORT_READ] = "READ", [XPORT_WRITE] = "WRITE", [XPORT_CAS] = "CAS",
		[XPORT_FETCH_ADD] = "FETCH_ADD",
	};

	return (unsigned int)type < G_N_ELEMENTS(names) && names[type] ? names[type] : "unknown";
}

int xport_poll_mode_parse(const char *s, enum xport_poll_mode *mode)
{
	if (!s)
		return -EINVAL;
	if (strcmp(s, "busy") == 0)
		*mode = XPORT_POLL_BUSY;
	else if (strcmp(s, "event") == 0)
		*mode = XPORT_POLL_EVENT;
	else if (strcmp(s, "hybrid") == 0)
		*mode = XPORT_POLL_HYBRID;
	else
		return -EINVAL;
	return 0;
}
