/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * poolctl.h - a control session with a memserver: a TCP connection whose
 * HELLO carries PROTO_HELLO_CONTROL, so it authenticates and reaches no pool,
 * then one request/response at a time (POOL_LIST, POOL_CREATE, POOL_DELETE,
 * STATS, PING). memserver-ctl and a client choosing its donors speak through
 * it; nothing here serves I/O.
 *
 * Every call returns 0 or -errno. A status the server answered with comes
 * back as proto_status_to_errno() of it (-EPERM wrong token, -ENOSPC no room,
 * -EEXIST, -ENOENT no such pool, -EBUSY, -EKEYREJECTED, ...) and leaves the
 * session usable. A failure of the connection itself (-ETIMEDOUT,
 * -ECONNRESET, or -EBADE for a response that is not the answer to the
 * request; no status maps to -EBADE) leaves the stream out of step: close
 * the session.
 */
#ifndef RMEM_POOLCTL_H
#define RMEM_POOLCTL_H

#include <stdbool.h>
#include <stdint.h>

#include "proto.h"

/*
 * A control session (TCP, PROTO_HELLO_CONTROL): 0 and *fd, or -errno (-EPERM
 * wrong token, -ECONNREFUSED, -ETIMEDOUT, -EBADMSG: not a memserver that knows
 * control sessions). token_hash NULL: no token (all zeroes).
 */
int poolctl_open(const char *host, uint16_t port, const uint8_t token_hash[PROTO_TOKEN_HASH_LEN],
		 int timeout_ms, int *fd);
/* NULL-tolerant in spirit: fd < 0 is ignored */
void poolctl_close(int fd);

/*
 * One request/response on a control session (or any connection with nothing
 * in flight): send type with req_len bytes of req, wait at most timeout_ms for
 * the answer. 0 with *resp (malloc'd, NULL when empty; the caller frees it)
 * and *resp_len, or -errno as the header says.
 */
int poolctl_call(int fd, uint16_t type, const void *req, uint32_t req_len, int timeout_ms,
		 void **resp, uint32_t *resp_len);

/* capacity, free and the pools the token may reach; @out owns its pools (proto_pool_list_clear) */
int poolctl_list(int fd, int timeout_ms, struct proto_pool_list *out);
/* create pool name of size bytes (the server rounds up to a MiB) owned by the caller's tenant */
int poolctl_create(int fd, int timeout_ms, const char *name, uint64_t size);
/* delete pool name; force: cut its clients off instead of -EBUSY */
int poolctl_delete(int fd, int timeout_ms, const char *name, bool force);
int poolctl_stats(int fd, int timeout_ms, struct proto_stats *out);

#endif /* RMEM_POOLCTL_H */
