/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * poolctl.c - control sessions with a memserver (see poolctl.h): HELLO with
 * PROTO_HELLO_CONTROL, then POOL_LIST/POOL_CREATE/POOL_DELETE/STATS as plain
 * request/response pairs over net_io_full() with a deadline. Requests go one
 * at a time, so the response to read is always the one just asked for; its
 * type and id are checked all the same.
 */
#define G_LOG_DOMAIN "rmemfs-poolctl"

#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include <glib.h>

#include "clock.h"
#include "net.h"
#include "poolctl.h"

/* request ids: unique in this process, never 0 */
static uint64_t poolctl_next_id(void)
{
	static uint64_t next;

	return __atomic_add_fetch(&next, 1, __ATOMIC_RELAXED);
}

int poolctl_call(int fd, uint16_t type, const void *req, uint32_t req_len, int timeout_ms,
		 void **resp, uint32_t *resp_len)
{
	int64_t deadline = clock_now_us() + (int64_t)timeout_ms * 1000;
	uint64_t id = poolctl_next_id();
	struct proto_hdr hdr;
	struct proto_msg m;
	struct iovec iov[2];
	void *buf;
	int rc;

	*resp = NULL;
	*resp_len = 0;
	if (req_len > PROTO_MAX_CTRL)
		return -EMSGSIZE;
	rc = net_io_full(fd, iov, proto_request_iov(&hdr, iov, type, req, req_len, id), true,
			 deadline);
	if (rc)
		return rc;
	iov[0].iov_base = &hdr;
	iov[0].iov_len = sizeof(hdr);
	rc = net_io_full(fd, iov, 1, false, deadline);
	if (rc)
		return rc;
	rc = proto_hdr_unpack(&hdr, &m);
	if (rc)
		return rc == -EBADMSG ? -EBADE : rc;
	if (m.type != (type | PROTO_RESPONSE) || m.id != id ||
	    (m.status != PROTO_OK && m.len)) {
		g_debug("%s: unexpected response (type %#x id %" G_GUINT64_FORMAT " len %u)",
			proto_type_str(type), m.type, m.id, m.len);
		return -EBADE;
	}
	if (m.status != PROTO_OK)
		return proto_status_to_errno(m.status);
	if (!m.len)
		return 0;
	buf = malloc(m.len);
	if (!buf)
		return -ENOMEM;
	iov[0].iov_base = buf;
	iov[0].iov_len = m.len;
	rc = net_io_full(fd, iov, 1, false, deadline);
	if (rc) {
		free(buf);
		return rc;
	}
	*resp = buf;
	*resp_len = m.len;
	return 0;
}

/* a call whose answer must be empty */
static int poolctl_call_empty(int fd, uint16_t type, const void *req, uint32_t req_len,
			      int timeout_ms)
{
	uint32_t len;
	void *resp;
	int rc;

	rc = poolctl_call(fd, type, req, req_len, timeout_ms, &resp, &len);
	free(resp);
	return rc == 0 && len ? -EBADE : rc;
}

int poolctl_open(const char *host, uint16_t port, const uint8_t token_hash[PROTO_TOKEN_HASH_LEN],
		 int timeout_ms, int *fd)
{
	struct proto_hello_pool_wire w;
	struct proto_hello h = { .control = true };
	size_t len;
	int rc, s;

	if (token_hash)
		memcpy(h.token_hash, token_hash, PROTO_TOKEN_HASH_LEN);
	s = net_connect(host, port, timeout_ms);
	if (s < 0)
		return s;
	len = proto_hello_pack(&w, &h);
	rc = poolctl_call_empty(s, PROTO_HELLO, &w, (uint32_t)len, timeout_ms);
	/*
	 * A memserver without control sessions refuses the flag as malformed
	 * (-EBADMSG already) or serves its pool (a descriptor: -EBADE); a peer
	 * that is no memserver answers something else (-EBADE) too.
	 */
	if (rc == -EBADE)
		rc = -EBADMSG;
	if (rc) {
		close(s);
		return rc;
	}
	*fd = s;
	return 0;
}

void poolctl_close(int fd)
{
	if (fd >= 0 && close(fd) < 0)
		g_debug("close: %s", g_strerror(errno));
}

int poolctl_list(int fd, int timeout_ms, struct proto_pool_list *out)
{
	uint32_t len;
	void *resp;
	int rc;

	memset(out, 0, sizeof(*out));
	rc = poolctl_call(fd, PROTO_POOL_LIST, NULL, 0, timeout_ms, &resp, &len);
	if (rc)
		return rc;
	rc = proto_pool_list_unpack(resp, len, out);
	free(resp);
	return rc == -EBADMSG ? -EBADE : rc;
}

int poolctl_create(int fd, int timeout_ms, const char *name, uint64_t size)
{
	struct proto_pool_sel_wire w;

	if (!proto_pool_name_valid(name) || !size)
		return -EINVAL;
	proto_pool_sel_pack(&w, name, size);
	return poolctl_call_empty(fd, PROTO_POOL_CREATE, &w, sizeof(w), timeout_ms);
}

int poolctl_delete(int fd, int timeout_ms, const char *name, bool force)
{
	struct proto_pool_delete_wire w;

	if (!proto_pool_name_valid(name))
		return -EINVAL;
	proto_pool_delete_pack(&w, name, force ? PROTO_POOL_DELETE_FORCE : 0);
	return poolctl_call_empty(fd, PROTO_POOL_DELETE, &w, sizeof(w), timeout_ms);
}

int poolctl_stats(int fd, int timeout_ms, struct proto_stats *out)
{
	uint32_t len;
	void *resp;
	int rc;

	memset(out, 0, sizeof(*out));
	rc = poolctl_call(fd, PROTO_STATS, NULL, 0, timeout_ms, &resp, &len);
	if (rc)
		return rc;
	rc = proto_stats_unpack(resp, len, out);
	free(resp);
	return rc == -EBADMSG ? -EBADE : rc;
}
