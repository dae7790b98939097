/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * proto.c - encode and decode the rmemfs wire format (see proto.h).
 *
 * Both programs speak only through these functions: the TCP transport and the
 * memserver frame every message with proto_hdr_pack/unpack, the RDMA side packs
 * its CM private data and QP parameters here. Wire structs are big-endian and
 * may sit at any alignment in a receive buffer, so every unpack first copies
 * the bytes into an aligned wire struct and checks the length it was given;
 * nothing here ever reads past `len`.
 *
 * One table (proto_status_table) maps protocol status codes to errno values and
 * to text, in both directions, like sshfs's sftp_error_to_errno().
 */
#define G_LOG_DOMAIN "rmemfs-proto"

#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <sys/random.h>
#include <unistd.h>

#include <glib.h>

#include "proto.h"

/* the wire format is fixed: any change to these sizes is a protocol change */
_Static_assert(sizeof(struct proto_hdr) == 24, "proto_hdr must be 24 bytes");
_Static_assert(sizeof(struct proto_hello_wire) == 48, "proto_hello_wire must be 48 bytes");
_Static_assert(sizeof(struct proto_region_wire) == 24, "proto_region_wire must be 24 bytes");
_Static_assert(sizeof(struct proto_pool_wire) == 24, "proto_pool_wire must be 24 bytes");
_Static_assert(sizeof(struct proto_rw_wire) == 16, "proto_rw_wire must be 16 bytes");
_Static_assert(sizeof(struct proto_atomic_wire) == 32, "proto_atomic_wire must be 32 bytes");
_Static_assert(sizeof(struct proto_atomic_resp_wire) == 8,
	       "proto_atomic_resp_wire must be 8 bytes");
_Static_assert(sizeof(struct proto_qp_info_wire) == 32, "proto_qp_info_wire must be 32 bytes");
_Static_assert(sizeof(struct proto_qp_exchange_wire) == 80,
	       "proto_qp_exchange_wire must be 80 bytes");
_Static_assert(sizeof(struct proto_stats_wire) == 80, "proto_stats_wire must be 80 bytes");
_Static_assert(sizeof(struct proto_cm_priv_wire) == 48, "proto_cm_priv_wire must be 48 bytes");
_Static_assert(sizeof(struct proto_cm_priv_wire) <= 56,
	       "RC connect private data holds at most 56 bytes");
_Static_assert(sizeof(struct proto_cm_reject_wire) == 8, "proto_cm_reject_wire must be 8 bytes");
_Static_assert(sizeof(struct proto_fence_wire) == 8, "proto_fence_wire must be 8 bytes");
_Static_assert(sizeof(struct proto_pool_sel_wire) == 48, "proto_pool_sel_wire must be 48 bytes");
_Static_assert(sizeof(struct proto_hello_pool_wire) == 96, "a HELLO with a pool is 96 bytes");
_Static_assert(sizeof(struct proto_qp_exchange_pool_wire) == 128,
	       "a QP_EXCHANGE with a pool is 128 bytes");
_Static_assert(sizeof(struct proto_cm_priv_pool_wire) == 56,
	       "the pool form of the connect private data fills RC's 56 bytes");
_Static_assert(sizeof(struct proto_pool_delete_wire) == 40,
	       "proto_pool_delete_wire must be 40 bytes");
_Static_assert(sizeof(struct proto_pool_list_wire) == 24, "proto_pool_list_wire must be 24 bytes");
_Static_assert(sizeof(struct proto_pool_info_wire) == 104,
	       "proto_pool_info_wire must be 104 bytes");
_Static_assert(sizeof(struct proto_pool_list_wire) +
			       PROTO_MAX_POOLS * sizeof(struct proto_pool_info_wire) <=
		       PROTO_MAX_CTRL,
	       "a full pool list must fit in PROTO_MAX_CTRL");
/* the largest pool descriptor must fit a control message */
_Static_assert(sizeof(struct proto_pool_wire) +
			       PROTO_MAX_REGIONS * sizeof(struct proto_region_wire) <=
		       PROTO_MAX_CTRL,
	       "a full pool descriptor must fit in PROTO_MAX_CTRL");

#define PROTO_TOKEN_FILE_MAX 4096

/* ---- status <-> errno <-> text: the one table ---- */

struct proto_status_entry {
	uint32_t status;
	int err; /* positive errno; 0 for PROTO_OK */
	const char *str;
};

static const struct proto_status_entry proto_status_table[] = {
	{ PROTO_OK, 0, "ok" },
	{ PROTO_E_AUTH, EPERM, "authentication failed" },
	{ PROTO_E_VERSION, EPROTONOSUPPORT, "protocol version not supported" },
	{ PROTO_E_MALFORMED, EBADMSG, "malformed message" },
	{ PROTO_E_KEY, EACCES, "invalid remote key" },
	{ PROTO_E_RANGE, EFAULT, "remote range outside region" },
	{ PROTO_E_ALIGN, EINVAL, "misaligned atomic" },
	{ PROTO_E_TOOBIG, EMSGSIZE, "payload too large" },
	{ PROTO_E_UNSUPPORTED, EOPNOTSUPP, "operation not supported" },
	{ PROTO_E_NOMEM, ENOMEM, "out of memory" },
	{ PROTO_E_INTERNAL, EIO, "internal server error" },
	{ PROTO_E_STATE, EPROTO, "request not valid in this state" },
	{ PROTO_E_FENCED, EKEYREVOKED, "client fenced: its lease was taken over" },
	{ PROTO_E_NOSPACE, ENOSPC, "not enough free capacity on the server" },
	{ PROTO_E_EXIST, EEXIST, "a pool of that name exists" },
	{ PROTO_E_NOPOOL, ENOENT, "no pool of that name" },
	{ PROTO_E_BUSY, EBUSY, "the pool has clients" },
	{ PROTO_E_DENIED, EKEYREJECTED, "this token may not reach that pool" },
};

_Static_assert(G_N_ELEMENTS(proto_status_table) == PROTO_STATUS_COUNT,
	       "every proto_status needs a table entry");

static const struct proto_status_entry *proto_status_find(uint32_t status)
{
	size_t i;

	for (i = 0; i < G_N_ELEMENTS(proto_status_table); i++) {
		if (proto_status_table[i].status == status)
			return &proto_status_table[i];
	}
	return NULL;
}

int proto_status_to_errno(uint32_t status)
{
	const struct proto_status_entry *e = proto_status_find(status);

	return e ? -e->err : -EIO;
}

uint32_t proto_errno_to_status(int err)
{
	size_t i;

	if (err < 0)
		err = -err;
	if (err == 0)
		return PROTO_OK;
	for (i = 0; i < G_N_ELEMENTS(proto_status_table); i++) {
		if (proto_status_table[i].err == err)
			return proto_status_table[i].status;
	}
	if (err == ERANGE)
		return PROTO_E_RANGE;
	return PROTO_E_INTERNAL;
}

const char *proto_status_str(uint32_t status)
{
	const struct proto_status_entry *e = proto_status_find(status);

	return e ? e->str : "unknown status";
}

const char *proto_type_str(uint16_t type)
{
	switch (type & ~PROTO_RESPONSE) {
	case PROTO_HELLO:
		return "HELLO";
	case PROTO_READ:
		return "READ";
	case PROTO_WRITE:
		return "WRITE";
	case PROTO_CAS:
		return "CAS";
	case PROTO_FETCH_ADD:
		return "FETCH_ADD";
	case PROTO_PING:
		return "PING";
	case PROTO_STATS:
		return "STATS";
	case PROTO_QP_EXCHANGE:
		return "QP_EXCHANGE";
	case PROTO_FENCE:
		return "FENCE";
	case PROTO_POOL_LIST:
		return "POOL_LIST";
	case PROTO_POOL_CREATE:
		return "POOL_CREATE";
	case PROTO_POOL_DELETE:
		return "POOL_DELETE";
	default:
		return "unknown";
	}
}

static bool proto_type_known(uint16_t type)
{
	uint16_t base = type & ~PROTO_RESPONSE;

	return base >= PROTO_HELLO && base <= PROTO_POOL_DELETE;
}

/* ---- header ---- */

uint32_t proto_max_payload(uint16_t type)
{
	bool resp = type & PROTO_RESPONSE;
	uint16_t base = type & ~PROTO_RESPONSE;

	if ((base == PROTO_WRITE && !resp) || (base == PROTO_READ && resp))
		return PROTO_MAX_IO + sizeof(struct proto_rw_wire);
	return PROTO_MAX_CTRL;
}

void proto_hdr_pack(struct proto_hdr *wire, uint16_t type, uint32_t status, uint32_t len,
		    uint64_t id)
{
	wire->magic = htobe32(PROTO_MAGIC);
	wire->version = htobe16(PROTO_VERSION);
	wire->type = htobe16(type);
	wire->status = htobe32(status);
	wire->len = htobe32(len);
	wire->id = htobe64(id);
}

int proto_request_iov(struct proto_hdr *hdr, struct iovec *iov, uint16_t type,
		      const void *req, uint32_t req_len, uint64_t id)
{
	proto_hdr_pack(hdr, type, PROTO_OK, req_len, id);
	iov[0].iov_base = hdr;
	iov[0].iov_len = sizeof(*hdr);
	iov[1].iov_base = (void *)req;
	iov[1].iov_len = req_len;
	return req_len ? 2 : 1;
}

int proto_hdr_unpack(const struct proto_hdr *wire, struct proto_msg *out)
{
	struct proto_hdr h;

	memcpy(&h, wire, sizeof(h));
	if (be32toh(h.magic) != PROTO_MAGIC)
		return -EBADMSG;
	out->type = be16toh(h.type);
	out->status = be32toh(h.status);
	out->len = be32toh(h.len);
	out->id = be64toh(h.id);
	if (be16toh(h.version) != PROTO_VERSION)
		return -EPROTONOSUPPORT;
	if (!proto_type_known(out->type))
		return -EBADMSG;
	if (out->len > proto_max_payload(out->type))
		return -EBADMSG;
	return 0;
}

/* ---- tokens ---- */

void proto_token_hash(const void *token, size_t len, uint8_t out[PROTO_TOKEN_HASH_LEN])
{
	GChecksum *sum;
	gsize out_len = PROTO_TOKEN_HASH_LEN;

	memset(out, 0, PROTO_TOKEN_HASH_LEN);
	if (len == 0)
		return;
	sum = g_checksum_new(G_CHECKSUM_SHA256);
	g_checksum_update(sum, token, len);
	g_checksum_get_digest(sum, out, &out_len);
	g_checksum_free(sum);
}

bool proto_token_equal(const uint8_t a[PROTO_TOKEN_HASH_LEN],
		       const uint8_t b[PROTO_TOKEN_HASH_LEN])
{
	volatile uint8_t diff = 0;
	size_t i;

	for (i = 0; i < PROTO_TOKEN_HASH_LEN; i++)
		diff |= a[i] ^ b[i];
	return diff == 0;
}

int proto_token_load(const char *path, uint8_t out[PROTO_TOKEN_HASH_LEN])
{
	char buf[PROTO_TOKEN_FILE_MAX + 1];
	size_t got = 0;
	int rc = 0;
	int fd;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	while (got < sizeof(buf)) {
		ssize_t n = read(fd, buf + got, sizeof(buf) - got);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			rc = -errno;
			goto out_close;
		}
		if (n == 0)
			break;
		got += n;
	}
	if (got > PROTO_TOKEN_FILE_MAX) {
		rc = -EFBIG;
		goto out_close;
	}
	while (got > 0 && (buf[got - 1] == '\n' || buf[got - 1] == '\r'))
		got--;
	if (got == 0) {
		rc = -EINVAL;
		goto out_close;
	}
	proto_token_hash(buf, got, out);
out_close:
	explicit_bzero(buf, sizeof(buf));
	close(fd);
	return rc;
}

/* ---- fixed-size payloads ---- */

/* the base hello; the flag says whether a pool selection follows */
static void proto_hello_base_pack(struct proto_hello_wire *w, const struct proto_hello *h)
{
	memset(w, 0, sizeof(*w));
	memcpy(w->token_hash, h->token_hash, PROTO_TOKEN_HASH_LEN);
	w->client_id = htobe64(h->client_id);
	if (h->pool[0])
		w->flags = htobe32(PROTO_HELLO_POOL);
	else if (h->control)
		w->flags = htobe32(PROTO_HELLO_CONTROL);
}

size_t proto_hello_pack(struct proto_hello_pool_wire *w, const struct proto_hello *h)
{
	proto_hello_base_pack(&w->hello, h);
	if (!h->pool[0])
		return sizeof(w->hello);
	proto_pool_sel_pack(&w->sel, h->pool, h->create_size);
	return sizeof(*w);
}

/*
 * The base hello at buf (which holds at least its size); *has_pool: a pool
 * selection must follow. -EBADMSG for an unknown flag or CONTROL with POOL.
 */
static int proto_hello_base_unpack(const void *buf, struct proto_hello *h, bool *has_pool)
{
	const uint32_t both = PROTO_HELLO_POOL | PROTO_HELLO_CONTROL;
	struct proto_hello_wire w;
	uint32_t flags;

	memcpy(&w, buf, sizeof(w));
	flags = be32toh(w.flags);
	if ((flags & ~both) || (flags & both) == both)
		return -EBADMSG;
	memset(h, 0, sizeof(*h));
	memcpy(h->token_hash, w.token_hash, PROTO_TOKEN_HASH_LEN);
	h->client_id = be64toh(w.client_id);
	h->control = flags & PROTO_HELLO_CONTROL;
	*has_pool = flags & PROTO_HELLO_POOL;
	return 0;
}

/* the base at buf, and the selection at buf + base_len if the flag says so; len must fit */
static int proto_hello_sel_unpack(const uint8_t *buf, size_t len, size_t base_len,
				  struct proto_hello *h)
{
	bool has_pool;

	if (len != base_len && len != base_len + sizeof(struct proto_pool_sel_wire))
		return -EBADMSG;
	if (proto_hello_base_unpack(buf, h, &has_pool))
		return -EBADMSG;
	if (has_pool != (len != base_len))
		return -EBADMSG;
	if (!has_pool)
		return 0;
	return proto_pool_sel_unpack(buf + base_len, len - base_len, h->pool, &h->create_size);
}

int proto_hello_unpack(const void *buf, size_t len, struct proto_hello *h)
{
	return proto_hello_sel_unpack(buf, len, sizeof(struct proto_hello_wire), h);
}

size_t proto_qp_exchange_pack(struct proto_qp_exchange_pool_wire *w, const struct proto_hello *h,
			      const struct proto_qp_info *qp)
{
	proto_hello_base_pack(&w->ex.hello, h);
	proto_qp_info_pack(&w->ex.qp, qp);
	if (!h->pool[0])
		return sizeof(w->ex);
	proto_pool_sel_pack(&w->sel, h->pool, h->create_size);
	return sizeof(*w);
}

int proto_qp_exchange_unpack(const void *buf, size_t len, struct proto_hello *h,
			     struct proto_qp_info *qp)
{
	const size_t hello_len = sizeof(struct proto_hello_wire);
	const uint8_t *p = buf;
	int rc;

	rc = proto_hello_sel_unpack(p, len, sizeof(struct proto_qp_exchange_wire), h);
	if (rc)
		return rc;
	if (h->control)
		return -EBADMSG;
	return proto_qp_info_unpack(p + hello_len, sizeof(struct proto_qp_info_wire), qp);
}

/* ---- named pools ---- */

bool proto_pool_name_valid(const char *name)
{
	size_t i, n = name ? strnlen(name, PROTO_POOL_NAME_MAX) : 0;

	if (n == 0 || n >= PROTO_POOL_NAME_MAX)
		return false;
	if (!g_ascii_isalnum(name[0]) && name[0] != '_')
		return false;
	for (i = 0; i < n; i++) {
		if (!g_ascii_isalnum(name[i]) && !strchr("_.-", name[i]))
			return false;
	}
	return true;
}

/* a NUL-padded wire name into name[]: -EBADMSG unless valid (or empty, if allowed) */
static int proto_name_unpack(const char *wire, char name[PROTO_POOL_NAME_MAX], bool empty_ok)
{
	if (!memchr(wire, 0, PROTO_POOL_NAME_MAX))
		return -EBADMSG;
	memcpy(name, wire, PROTO_POOL_NAME_MAX);
	if (empty_ok && !name[0])
		return 0;
	return proto_pool_name_valid(name) ? 0 : -EBADMSG;
}

static void proto_name_pack(char wire[PROTO_POOL_NAME_MAX], const char *name)
{
	memset(wire, 0, PROTO_POOL_NAME_MAX);
	if (name)
		memcpy(wire, name, strnlen(name, PROTO_POOL_NAME_MAX - 1));
}

void proto_pool_sel_pack(struct proto_pool_sel_wire *w, const char *name, uint64_t create_size)
{
	memset(w, 0, sizeof(*w));
	proto_name_pack(w->name, name);
	w->create_size = htobe64(create_size);
}

int proto_pool_sel_unpack(const void *buf, size_t len, char name[PROTO_POOL_NAME_MAX],
			  uint64_t *create_size)
{
	struct proto_pool_sel_wire w;

	if (len != sizeof(w))
		return -EBADMSG;
	memcpy(&w, buf, sizeof(w));
	if (w.flags || proto_name_unpack(w.name, name, false))
		return -EBADMSG;
	*create_size = be64toh(w.create_size);
	return 0;
}

void proto_pool_delete_pack(struct proto_pool_delete_wire *w, const char *name, uint32_t flags)
{
	memset(w, 0, sizeof(*w));
	proto_name_pack(w->name, name);
	w->flags = htobe32(flags);
}

int proto_pool_delete_unpack(const void *buf, size_t len, char name[PROTO_POOL_NAME_MAX],
			     uint32_t *flags)
{
	struct proto_pool_delete_wire w;

	if (len != sizeof(w))
		return -EBADMSG;
	memcpy(&w, buf, sizeof(w));
	*flags = be32toh(w.flags);
	if (*flags & ~PROTO_POOL_DELETE_FORCE)
		return -EBADMSG;
	return proto_name_unpack(w.name, name, false);
}

size_t proto_pool_list_wire_size(const struct proto_pool_list *l)
{
	return sizeof(struct proto_pool_list_wire) +
	       (size_t)l->npools * sizeof(struct proto_pool_info_wire);
}

ssize_t proto_pool_list_pack(const struct proto_pool_list *l, void *buf, size_t cap)
{
	size_t need = proto_pool_list_wire_size(l);
	struct proto_pool_list_wire h;
	uint8_t *p = buf;
	uint32_t i;

	if (l->npools > PROTO_MAX_POOLS || cap < need)
		return -EMSGSIZE;
	memset(&h, 0, sizeof(h));
	h.capacity = htobe64(l->capacity);
	h.free = htobe64(l->free);
	h.npools = htobe32(l->npools);
	memcpy(p, &h, sizeof(h));
	p += sizeof(h);
	for (i = 0; i < l->npools; i++) {
		const struct proto_pool_info *in = &l->pools[i];
		struct proto_pool_info_wire w;

		memset(&w, 0, sizeof(w));
		proto_name_pack(w.name, in->name);
		proto_name_pack(w.owner, in->owner);
		w.size = htobe64(in->size);
		w.resident = htobe64(in->resident);
		w.pool_id = htobe64(in->pool_id);
		w.client_id = htobe64(in->client_id);
		w.clients = htobe32(in->clients);
		w.flags = htobe32(in->flags);
		memcpy(p, &w, sizeof(w));
		p += sizeof(w);
	}
	return (ssize_t)need;
}

static int proto_pool_info_unpack(const uint8_t *p, struct proto_pool_info *out)
{
	struct proto_pool_info_wire w;

	memcpy(&w, p, sizeof(w));
	if (proto_name_unpack(w.name, out->name, true) ||
	    proto_name_unpack(w.owner, out->owner, true))
		return -EBADMSG;
	out->size = be64toh(w.size);
	out->resident = be64toh(w.resident);
	out->pool_id = be64toh(w.pool_id);
	out->client_id = be64toh(w.client_id);
	out->clients = be32toh(w.clients);
	out->flags = be32toh(w.flags);
	return 0;
}

int proto_pool_list_unpack(const void *buf, size_t len, struct proto_pool_list *out)
{
	const uint8_t *p = buf;
	struct proto_pool_list_wire h;
	uint32_t i;

	memset(out, 0, sizeof(*out));
	if (len < sizeof(h))
		return -EBADMSG;
	memcpy(&h, p, sizeof(h));
	out->capacity = be64toh(h.capacity);
	out->free = be64toh(h.free);
	out->npools = be32toh(h.npools);
	if (out->npools > PROTO_MAX_POOLS || out->free > out->capacity ||
	    len != proto_pool_list_wire_size(out)) {
		out->npools = 0;
		return -EBADMSG;
	}
	if (!out->npools)
		return 0;
	out->pools = calloc(out->npools, sizeof(*out->pools));
	if (!out->pools) {
		out->npools = 0;
		return -ENOMEM;
	}
	for (i = 0; i < out->npools; i++) {
		if (proto_pool_info_unpack(p + sizeof(h) + i * sizeof(struct proto_pool_info_wire),
					   &out->pools[i])) {
			proto_pool_list_clear(out);
			return -EBADMSG;
		}
	}
	return 0;
}

void proto_pool_list_clear(struct proto_pool_list *l)
{
	if (!l)
		return;
	free(l->pools);
	memset(l, 0, sizeof(*l));
}

void proto_fence_pack(struct proto_fence_wire *w, uint64_t client_id)
{
	w->client_id = htobe64(client_id);
}

int proto_fence_unpack(const void *buf, size_t len, uint64_t *client_id)
{
	struct proto_fence_wire w;

	if (len != sizeof(w))
		return -EBADMSG;
	memcpy(&w, buf, sizeof(w));
	*client_id = be64toh(w.client_id);
	return *client_id ? 0 : -EBADMSG;
}

uint64_t proto_client_id_new(void)
{
	uint64_t id = 0;

	while (!id) {
		if (getrandom(&id, sizeof(id), 0) != (ssize_t)sizeof(id))
			id = ((uint64_t)g_random_int() << 32) | g_random_int();
	}
	return id;
}

void proto_rw_pack(struct proto_rw_wire *w, const struct proto_rw *rw)
{
	w->addr = htobe64(rw->addr);
	w->rkey = htobe32(rw->rkey);
	w->len = htobe32(rw->len);
}

int proto_rw_unpack(const void *buf, size_t len, struct proto_rw *rw)
{
	struct proto_rw_wire w;

	if (len < sizeof(w))
		return -EBADMSG;
	memcpy(&w, buf, sizeof(w));
	rw->addr = be64toh(w.addr);
	rw->rkey = be32toh(w.rkey);
	rw->len = be32toh(w.len);
	return 0;
}

void proto_atomic_pack(struct proto_atomic_wire *w, const struct proto_atomic *a)
{
	w->addr = htobe64(a->addr);
	w->rkey = htobe32(a->rkey);
	w->reserved = 0;
	w->compare_add = htobe64(a->compare_add);
	w->swap = htobe64(a->swap);
}

int proto_atomic_unpack(const void *buf, size_t len, struct proto_atomic *a)
{
	struct proto_atomic_wire w;

	if (len != sizeof(w))
		return -EBADMSG;
	memcpy(&w, buf, sizeof(w));
	a->addr = be64toh(w.addr);
	a->rkey = be32toh(w.rkey);
	a->compare_add = be64toh(w.compare_add);
	a->swap = be64toh(w.swap);
	return 0;
}

void proto_qp_info_pack(struct proto_qp_info_wire *w, const struct proto_qp_info *qp)
{
	memset(w, 0, sizeof(*w));
	w->qpn = htobe32(qp->qpn);
	w->psn = htobe32(qp->psn);
	memcpy(w->gid, qp->gid, sizeof(w->gid));
	w->lid = htobe16(qp->lid);
	w->mtu = qp->mtu;
	w->max_rd_atomic = qp->max_rd_atomic;
}

int proto_qp_info_unpack(const void *buf, size_t len, struct proto_qp_info *qp)
{
	struct proto_qp_info_wire w;

	if (len != sizeof(w))
		return -EBADMSG;
	memcpy(&w, buf, sizeof(w));
	qp->qpn = be32toh(w.qpn);
	qp->psn = be32toh(w.psn);
	memcpy(qp->gid, w.gid, sizeof(qp->gid));
	qp->lid = be16toh(w.lid);
	qp->mtu = w.mtu;
	qp->max_rd_atomic = w.max_rd_atomic;
	return 0;
}

void proto_stats_pack(struct proto_stats_wire *w, const struct proto_stats *s)
{
	w->clients_now = htobe64(s->clients_now);
	w->clients_total = htobe64(s->clients_total);
	w->auth_failures = htobe64(s->auth_failures);
	w->bad_requests = htobe64(s->bad_requests);
	w->reads = htobe64(s->reads);
	w->writes = htobe64(s->writes);
	w->atomics = htobe64(s->atomics);
	w->bytes_read = htobe64(s->bytes_read);
	w->bytes_written = htobe64(s->bytes_written);
	w->rdma_connections = htobe64(s->rdma_connections);
}

int proto_stats_unpack(const void *buf, size_t len, struct proto_stats *s)
{
	struct proto_stats_wire w;

	if (len != sizeof(w))
		return -EBADMSG;
	memcpy(&w, buf, sizeof(w));
	s->clients_now = be64toh(w.clients_now);
	s->clients_total = be64toh(w.clients_total);
	s->auth_failures = be64toh(w.auth_failures);
	s->bad_requests = be64toh(w.bad_requests);
	s->reads = be64toh(w.reads);
	s->writes = be64toh(w.writes);
	s->atomics = be64toh(w.atomics);
	s->bytes_read = be64toh(w.bytes_read);
	s->bytes_written = be64toh(w.bytes_written);
	s->rdma_connections = be64toh(w.rdma_connections);
	return 0;
}

size_t proto_cm_priv_pack(struct proto_cm_priv_pool_wire *w, const struct proto_hello *h)
{
	memset(w, 0, sizeof(*w));
	w->base.magic = htobe32(PROTO_MAGIC);
	w->base.version = htobe16(PROTO_VERSION);
	memcpy(w->base.token_hash, h->token_hash, PROTO_TOKEN_HASH_LEN);
	w->base.client_id = htobe64(h->client_id);
	if (!h->pool_id)
		return sizeof(w->base);
	w->base.flags = htobe16(PROTO_CM_POOL_ID);
	w->pool_id = htobe64(h->pool_id);
	return sizeof(*w);
}

/* the CM may pad private data up to the transport's maximum, so accept len >= sizeof */
int proto_cm_priv_unpack(const void *buf, size_t len, struct proto_hello *h)
{
	struct proto_cm_priv_pool_wire w;
	uint16_t flags;

	if (!buf || len < sizeof(w.base))
		return -EBADMSG;
	memset(&w, 0, sizeof(w));
	memcpy(&w, buf, MIN(len, sizeof(w)));
	if (be32toh(w.base.magic) != PROTO_MAGIC)
		return -EBADMSG;
	if (be16toh(w.base.version) != PROTO_VERSION)
		return -EPROTONOSUPPORT;
	flags = be16toh(w.base.flags);
	if (flags & ~PROTO_CM_POOL_ID)
		return -EBADMSG;
	memset(h, 0, sizeof(*h));
	memcpy(h->token_hash, w.base.token_hash, PROTO_TOKEN_HASH_LEN);
	h->client_id = be64toh(w.base.client_id);
	if (!(flags & PROTO_CM_POOL_ID))
		return 0;
	if (len < sizeof(w))
		return -EBADMSG;
	h->pool_id = be64toh(w.pool_id);
	return h->pool_id ? 0 : -EBADMSG;
}

/* ---- pool descriptor ---- */

size_t proto_pool_wire_size(const struct proto_pool *pool)
{
	return sizeof(struct proto_pool_wire) +
	       (size_t)pool->nregions * sizeof(struct proto_region_wire);
}

ssize_t proto_pool_pack(const struct proto_pool *pool, void *buf, size_t cap)
{
	size_t need = proto_pool_wire_size(pool);
	struct proto_pool_wire pw;
	uint8_t *p = buf;
	uint32_t i;

	if (cap < need)
		return -EMSGSIZE;
	pw.size = htobe64(pool->size);
	pw.pool_id = htobe64(pool->pool_id);
	pw.nregions = htobe32(pool->nregions);
	pw.flags = htobe32(pool->flags);
	memcpy(p, &pw, sizeof(pw));
	p += sizeof(pw);
	for (i = 0; i < pool->nregions; i++) {
		struct proto_region_wire rw;

		rw.addr = htobe64(pool->regions[i].addr);
		rw.len = htobe64(pool->regions[i].len);
		rw.rkey = htobe32(pool->regions[i].rkey);
		rw.reserved = 0;
		memcpy(p, &rw, sizeof(rw));
		p += sizeof(rw);
	}
	return need;
}

int proto_pool_unpack(const void *buf, size_t len, struct proto_pool *out)
{
	const uint8_t *p = buf;
	struct proto_pool_wire pw;
	struct proto_region *regions;
	uint64_t size, sum = 0;
	uint32_t n, i;

	if (len < sizeof(pw))
		return -EBADMSG;
	memcpy(&pw, p, sizeof(pw));
	size = be64toh(pw.size);
	n = be32toh(pw.nregions);
	if (n < 1 || n > PROTO_MAX_REGIONS)
		return -EBADMSG;
	if (len != sizeof(pw) + (size_t)n * sizeof(struct proto_region_wire))
		return -EBADMSG;
	regions = calloc(n, sizeof(*regions));
	if (!regions)
		return -ENOMEM;
	p += sizeof(pw);
	for (i = 0; i < n; i++) {
		struct proto_region_wire rw;

		memcpy(&rw, p, sizeof(rw));
		p += sizeof(rw);
		regions[i].addr = be64toh(rw.addr);
		regions[i].len = be64toh(rw.len);
		regions[i].rkey = be32toh(rw.rkey);
		if (regions[i].len == 0 || regions[i].addr + regions[i].len < regions[i].addr ||
		    sum + regions[i].len < sum)
			goto err_free;
		sum += regions[i].len;
	}
	if (sum != size)
		goto err_free;
	out->size = size;
	out->pool_id = be64toh(pw.pool_id);
	out->flags = be32toh(pw.flags);
	out->nregions = n;
	out->regions = regions;
	return 0;

err_free:
	free(regions);
	return -EBADMSG;
}

void proto_pool_clear(struct proto_pool *pool)
{
	if (!pool)
		return;
	free(pool->regions);
	memset(pool, 0, sizeof(*pool));
}

int proto_pool_copy(struct proto_pool *dst, const struct proto_pool *src)
{
	struct proto_region *regions = NULL;

	if (src->nregions) {
		regions = calloc(src->nregions, sizeof(*regions));
		if (!regions)
			return -ENOMEM;
		memcpy(regions, src->regions, src->nregions * sizeof(*regions));
	}
	*dst = *src;
	dst->regions = regions;
	return 0;
}

int proto_pool_resolve(const struct proto_pool *pool, uint64_t off, uint64_t len,
		       uint64_t *raddr, uint32_t *rkey)
{
	uint64_t start = 0;
	uint32_t i;

	if (off + len < off || off >= pool->size || off + len > pool->size)
		return -ERANGE;
	for (i = 0; i < pool->nregions; i++) {
		const struct proto_region *r = &pool->regions[i];

		if (off < start + r->len) {
			if (off + len > start + r->len)
				return -ERANGE;
			*raddr = r->addr + (off - start);
			*rkey = r->rkey;
			return 0;
		}
		start += r->len;
	}
	return -ERANGE;
}
