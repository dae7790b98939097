/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * proto.h - the rmemfs wire format.
 *
 * Every message on a TCP connection, and every control message carried by RDMA
 * SEND/RECV, is a fixed 24-byte header followed by `len` payload bytes. All
 * multi-byte wire fields are big-endian (the __be types below); host code only
 * ever sees the unpacked host structs (struct proto_msg, proto_rw, ...).
 *
 * Requests carry a client-chosen `id` that the response echoes. A response has
 * PROTO_RESPONSE set in its type and a proto_status in `status`; a non-OK
 * response carries no payload. One table (proto.c) maps status codes to errno.
 *
 * The protocol is versioned by PROTO_VERSION in every header and in the RDMA CM
 * private data; a peer speaking another version is refused with
 * PROTO_E_VERSION (-EPROTONOSUPPORT), never misparsed. Version 2 added the
 * client id to HELLO and the CM private data, and PROTO_FENCE: a version 1
 * client could not be fenced, so it is refused rather than served as id 0.
 *
 * Every unpack function validates lengths and returns 0 or -EBADMSG (or the
 * errno named in its comment); none reads beyond the buffer it is given.
 */
#ifndef RMEM_PROTO_H
#define RMEM_PROTO_H

#include <linux/types.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define PROTO_MAGIC 0x524d454dU /* "RMEM" */
#define PROTO_VERSION 2
#define PROTO_DEFAULT_PORT 7471
#define PROTO_MAX_IO (16U << 20) /* largest READ/WRITE payload in one op */
#define PROTO_MAX_CTRL (64U << 10) /* largest control-message payload */
#define PROTO_TOKEN_HASH_LEN 32 /* SHA-256 */
#define PROTO_MAX_REGIONS 1024 /* regions in one pool descriptor */
/*
 * Named pools: a name is 1..31 of [A-Za-z0-9_.-], starting with a letter, digit
 * or '_' (proto_pool_name_valid); on the wire NUL-padded to 32 bytes.
 */
#define PROTO_POOL_NAME_MAX 32
#define PROTO_MAX_POOLS 512 /* pools one memserver serves (a POOL_LIST fits a message) */

/* message types; a response is the request type | PROTO_RESPONSE */
enum proto_type {
	PROTO_HELLO = 1, /* req: proto_hello_wire; resp: proto_pool (pool descriptor) */
	PROTO_READ = 2, /* req: proto_rw_wire; resp: rw.len data bytes */
	PROTO_WRITE = 3, /* req: proto_rw_wire + rw.len data bytes; resp: empty */
	PROTO_CAS = 4, /* req: proto_atomic_wire; resp: proto_atomic_resp_wire */
	PROTO_FETCH_ADD = 5, /* req: proto_atomic_wire; resp: proto_atomic_resp_wire */
	PROTO_PING = 6, /* req: any bytes (<= PROTO_MAX_CTRL); resp: the same bytes */
	PROTO_STATS = 7, /* req: empty; resp: proto_stats_wire */
	PROTO_QP_EXCHANGE = 8, /* req: proto_qp_exchange_wire; resp: proto_qp_info_wire + pool */
	PROTO_FENCE = 9, /* req: proto_fence_wire; resp: empty, once the victim is revoked */
	PROTO_POOL_LIST = 10, /* req: empty; resp: proto_pool_list_wire + its pools */
	PROTO_POOL_CREATE = 11, /* req: proto_pool_sel_wire (create_size > 0); resp: empty */
	PROTO_POOL_DELETE = 12, /* req: proto_pool_delete_wire; resp: empty */
};
#define PROTO_RESPONSE 0x8000U

/*
 * Status codes. The errno each maps to is what a client sees; see
 * proto_status_to_errno(). PROTO_E_KEY and PROTO_E_RANGE are what an RDMA NIC
 * reports as a remote access error.
 */
enum proto_status {
	PROTO_OK = 0,
	PROTO_E_AUTH = 1, /* -EPERM: missing or wrong token */
	PROTO_E_VERSION = 2, /* -EPROTONOSUPPORT: other protocol version */
	PROTO_E_MALFORMED = 3, /* -EBADMSG: bad magic, length, field */
	PROTO_E_KEY = 4, /* -EACCES: rkey names no region */
	PROTO_E_RANGE = 5, /* -EFAULT: [addr, addr+len) not inside the key's region */
	PROTO_E_ALIGN = 6, /* -EINVAL: atomic not 8-byte aligned */
	PROTO_E_TOOBIG = 7, /* -EMSGSIZE: payload above the type's limit */
	PROTO_E_UNSUPPORTED = 8, /* -EOPNOTSUPP: unknown type, or feature absent */
	PROTO_E_NOMEM = 9, /* -ENOMEM */
	PROTO_E_INTERNAL = 10, /* -EIO */
	PROTO_E_STATE = 11, /* -EPROTO: request not valid now (e.g. data op before HELLO) */
	PROTO_E_FENCED = 12, /* -EKEYREVOKED: this client id was fenced (its lease taken over) */
	PROTO_E_NOSPACE = 13, /* -ENOSPC: the pool does not fit the server's free capacity */
	PROTO_E_EXIST = 14, /* -EEXIST: a pool of that name exists (maybe another tenant's) */
	PROTO_E_NOPOOL = 15, /* -ENOENT: no pool of that name */
	PROTO_E_BUSY = 16, /* -EBUSY: the pool has clients (delete without force) */
	PROTO_E_DENIED = 17, /* -EKEYREJECTED: a good token, but not one that may reach that pool */
	PROTO_STATUS_COUNT
};

/* ---- wire structs (big-endian, fixed width, explicit padding) ---- */

struct proto_hdr {
	__be32 magic; /* PROTO_MAGIC */
	__be16 version; /* PROTO_VERSION */
	__be16 type; /* enum proto_type, | PROTO_RESPONSE in responses */
	__be32 status; /* enum proto_status; 0 in requests */
	__be32 len; /* payload bytes that follow */
	__be64 id; /* request id, echoed by the response */
};

/*
 * The client id: a random non-zero 64-bit value a lease holder presents on
 * every connection (its lease owner word); 0 for clients that hold no lease.
 * PROTO_FENCE(id) revokes every connection presenting id and refuses later ones.
 */
struct proto_hello_wire {
	uint8_t token_hash[PROTO_TOKEN_HASH_LEN]; /* SHA-256 of the token; zero if none */
	__be32 flags; /* PROTO_HELLO_* */
	__be32 reserved;
	__be64 client_id;
};
/*
 * A proto_pool_sel_wire follows the hello (HELLO; QP_EXCHANGE after the QP
 * info): the connection is for that named pool. Without it, the server's
 * default pool. A memserver that predates named pools refuses the longer
 * message as malformed, so a named pool is never served by the default one.
 */
#define PROTO_HELLO_POOL 0x1U
/*
 * A control session: authenticate, reach no pool (the HELLO response is
 * empty). For POOL_LIST/CREATE/DELETE, STATS and PING from tools that serve
 * no I/O (memserver-ctl, a client choosing donors), and the only way to talk
 * to a memserver that has no default pool without naming one. Not with
 * PROTO_HELLO_POOL; HELLO only.
 */
#define PROTO_HELLO_CONTROL 0x2U

/* which pool, and whether to create it (HELLO, QP_EXCHANGE, POOL_CREATE) */
struct proto_pool_sel_wire {
	char name[PROTO_POOL_NAME_MAX]; /* NUL-padded; at least one NUL */
	__be64 create_size; /* 0: the pool must exist; else create it this size if absent */
	__be32 flags; /* reserved, 0 */
	__be32 reserved;
};

/* HELLO's payload at its longest */
struct proto_hello_pool_wire {
	struct proto_hello_wire hello;
	struct proto_pool_sel_wire sel;
};

struct proto_region_wire {
	__be64 addr; /* remote virtual address of the region's first byte */
	__be64 len;
	__be32 rkey;
	__be32 reserved;
};

/* pool descriptor: header then nregions proto_region_wire, in pool-offset order */
struct proto_pool_wire {
	__be64 size; /* total bytes = sum of region lengths */
	__be64 pool_id; /* random, chosen when the pool was created (kept with a backing file) */
	__be32 nregions;
	__be32 flags; /* PROTO_POOL_* */
};
#define PROTO_POOL_PERSISTENT 0x1U /* backed by a file: survives a server restart */
#define PROTO_POOL_HUGEPAGES 0x2U

struct proto_rw_wire {
	__be64 addr;
	__be32 rkey;
	__be32 len;
};

struct proto_atomic_wire {
	__be64 addr;
	__be32 rkey;
	__be32 reserved;
	__be64 compare_add; /* CAS: compare value; FETCH_ADD: addend */
	__be64 swap; /* CAS: value stored on match; FETCH_ADD: 0 */
};

struct proto_atomic_resp_wire {
	__be64 old; /* the 64-bit value before the operation */
};

/* RDMA QP parameters, exchanged over TCP for the manual to_init/to_rtr/to_rts path */
struct proto_qp_info_wire {
	__be32 qpn;
	__be32 psn;
	uint8_t gid[16];
	__be16 lid;
	uint8_t mtu; /* enum ibv_mtu */
	uint8_t max_rd_atomic;
	__be32 reserved;
};

struct proto_qp_exchange_wire {
	struct proto_hello_wire hello;
	struct proto_qp_info_wire qp;
};

/* QP_EXCHANGE's payload at its longest (hello.flags has PROTO_HELLO_POOL) */
struct proto_qp_exchange_pool_wire {
	struct proto_qp_exchange_wire ex;
	struct proto_pool_sel_wire sel;
};

struct proto_stats_wire {
	__be64 clients_now;
	__be64 clients_total;
	__be64 auth_failures;
	__be64 bad_requests; /* malformed / refused requests */
	__be64 reads;
	__be64 writes;
	__be64 atomics;
	__be64 bytes_read;
	__be64 bytes_written;
	__be64 rdma_connections;
};

/* rdma_connect() private data: <= 56 bytes for RC */
struct proto_cm_priv_wire {
	__be32 magic;
	__be16 version;
	__be16 flags; /* PROTO_CM_* */
	uint8_t token_hash[PROTO_TOKEN_HASH_LEN];
	__be64 client_id;
};
/*
 * A pool name does not fit the 56 bytes, so a client of a named pool first
 * opens it over TCP (HELLO with the name; that may create it), then connects
 * with the pool_id the descriptor gave, in the 8 bytes after the base form.
 * The server finds the pool by id and checks the token may reach it; the QP is
 * made in that pool's protection domain.
 */
#define PROTO_CM_POOL_ID 0x1U

struct proto_cm_priv_pool_wire {
	struct proto_cm_priv_wire base; /* flags has PROTO_CM_POOL_ID */
	__be64 pool_id;
};

/* PROTO_FENCE request */
struct proto_fence_wire {
	__be64 client_id; /* the victim; never 0 */
};

/* PROTO_POOL_DELETE request */
struct proto_pool_delete_wire {
	char name[PROTO_POOL_NAME_MAX]; /* NUL-padded */
	__be32 flags; /* PROTO_POOL_DELETE_* */
	__be32 reserved;
};
#define PROTO_POOL_DELETE_FORCE 0x1U /* cut the pool's clients off instead of refusing */

/* PROTO_POOL_LIST response: this header, then npools proto_pool_info_wire */
struct proto_pool_list_wire {
	__be64 capacity; /* bytes the server donates, shared by every pool */
	__be64 free; /* capacity not given to a pool */
	__be32 npools; /* the pools the asking token may reach (the admin: all) */
	__be32 reserved;
};

struct proto_pool_info_wire {
	char name[PROTO_POOL_NAME_MAX]; /* "" for the default pool */
	char owner[PROTO_POOL_NAME_MAX]; /* the tenant; "" for the admin */
	__be64 size;
	__be64 resident; /* bytes of the pool this machine's memory holds now */
	__be64 pool_id;
	__be64 client_id; /* a connected client's non-zero id (a lease holder), or 0 */
	__be32 clients; /* connections now */
	__be32 flags; /* PROTO_POOL_* */
};
#define PROTO_POOL_DELETING 0x4U /* deleted; its memory goes when the last client has gone */

/* rdma_reject() private data */
struct proto_cm_reject_wire {
	__be32 magic;
	__be32 status; /* enum proto_status */
};

/* ---- host-side forms ---- */

/* what HELLO, QP_EXCHANGE and the CM private data authenticate a connection with */
struct proto_hello {
	uint8_t token_hash[PROTO_TOKEN_HASH_LEN];
	uint64_t client_id;
	/*
	 * The pool: pool[0] == 0 is the server's default pool. HELLO and
	 * QP_EXCHANGE name it (and may ask to create it, create_size > 0); the
	 * CM private data carries pool_id instead (0: the default pool).
	 */
	char pool[PROTO_POOL_NAME_MAX];
	uint64_t create_size;
	uint64_t pool_id;
	bool control; /* HELLO only: PROTO_HELLO_CONTROL, no pool (pool[0] must be 0) */
};

struct proto_msg {
	uint16_t type; /* with PROTO_RESPONSE if a response */
	uint32_t status;
	uint32_t len;
	uint64_t id;
};

struct proto_region {
	uint64_t addr;
	uint64_t len;
	uint32_t rkey;
};

/* the pool as a client sees it: regions laid end to end in pool-offset space */
struct proto_pool {
	uint64_t size;
	uint64_t pool_id;
	uint32_t flags;
	uint32_t nregions;
	struct proto_region *regions; /* owned; freed by proto_pool_clear() */
};

struct proto_rw {
	uint64_t addr;
	uint32_t rkey;
	uint32_t len;
};

struct proto_atomic {
	uint64_t addr;
	uint32_t rkey;
	uint64_t compare_add;
	uint64_t swap;
};

struct proto_qp_info {
	uint32_t qpn;
	uint32_t psn;
	uint8_t gid[16];
	uint16_t lid;
	uint8_t mtu;
	uint8_t max_rd_atomic;
};

/* one pool of PROTO_POOL_LIST */
struct proto_pool_info {
	char name[PROTO_POOL_NAME_MAX];
	char owner[PROTO_POOL_NAME_MAX];
	uint64_t size;
	uint64_t resident;
	uint64_t pool_id;
	uint64_t client_id;
	uint32_t clients;
	uint32_t flags;
};

struct proto_pool_list {
	uint64_t capacity;
	uint64_t free;
	uint32_t npools;
	struct proto_pool_info *pools; /* owned; freed by proto_pool_list_clear() */
};

struct proto_stats {
	uint64_t clients_now;
	uint64_t clients_total;
	uint64_t auth_failures;
	uint64_t bad_requests;
	uint64_t reads;
	uint64_t writes;
	uint64_t atomics;
	uint64_t bytes_read;
	uint64_t bytes_written;
	uint64_t rdma_connections;
};

/* ---- status and names ---- */

/* PROTO_OK -> 0; known status -> its -errno; unknown -> -EIO */
int proto_status_to_errno(uint32_t status);
/* negative errno -> closest status (0 -> PROTO_OK, unmapped -> PROTO_E_INTERNAL) */
uint32_t proto_errno_to_status(int err);
const char *proto_status_str(uint32_t status);
/* name of a type, ignoring PROTO_RESPONSE; "unknown" for others */
const char *proto_type_str(uint16_t type);

/* ---- header ---- */

void proto_hdr_pack(struct proto_hdr *wire, uint16_t type, uint32_t status, uint32_t len,
		    uint64_t id);
/*
 * A request ready to send: *hdr packed for type/id and req_len bytes of req,
 * as iov[0..1]. Returns the number of iovec entries used (1 without payload).
 */
struct iovec;
int proto_request_iov(struct proto_hdr *hdr, struct iovec *iov, uint16_t type,
		      const void *req, uint32_t req_len, uint64_t id);
/*
 * Validate and unpack a header: -EBADMSG on bad magic, unknown type, or a len
 * above the type's limit (PROTO_MAX_IO + sizeof(proto_rw_wire) for WRITE
 * requests and READ responses, PROTO_MAX_CTRL otherwise); -EPROTONOSUPPORT on
 * another version. @out is filled even on -EPROTONOSUPPORT so the peer can be
 * answered with the right id.
 */
int proto_hdr_unpack(const struct proto_hdr *wire, struct proto_msg *out);
/* the largest payload a message of this type (with or without PROTO_RESPONSE) may carry */
uint32_t proto_max_payload(uint16_t type);

/* ---- tokens ---- */

/* SHA-256 of the token; all zeroes when len == 0 (no token) */
void proto_token_hash(const void *token, size_t len, uint8_t out[PROTO_TOKEN_HASH_LEN]);
/* constant-time comparison */
bool proto_token_equal(const uint8_t a[PROTO_TOKEN_HASH_LEN],
		       const uint8_t b[PROTO_TOKEN_HASH_LEN]);
/*
 * Read a token file (trailing newlines stripped) and hash it. -errno from
 * open/read; -EINVAL if the file holds no token; -EFBIG above 4 KiB.
 */
int proto_token_load(const char *path, uint8_t out[PROTO_TOKEN_HASH_LEN]);

/* ---- payloads: pack writes exactly sizeof(wire); unpack needs len == sizeof(wire) ---- */

/*
 * HELLO: packs the hello, and the pool selection after it when h->pool names
 * one; returns the bytes used (sizeof(proto_hello_wire) or
 * sizeof(proto_hello_pool_wire)). h->control sets PROTO_HELLO_CONTROL.
 */
size_t proto_hello_pack(struct proto_hello_pool_wire *w, const struct proto_hello *h);
/*
 * Either form; -EBADMSG for any other length, a flag and length that
 * disagree, CONTROL with POOL, or an invalid pool name
 * (proto_pool_name_valid). pool_id is 0.
 */
int proto_hello_unpack(const void *buf, size_t len, struct proto_hello *h);

/* QP_EXCHANGE: the hello (with the pool as HELLO packs it), then the QP; bytes used */
size_t proto_qp_exchange_pack(struct proto_qp_exchange_pool_wire *w, const struct proto_hello *h,
			      const struct proto_qp_info *qp);
/* either form; -EBADMSG as proto_hello_unpack, and for PROTO_HELLO_CONTROL */
int proto_qp_exchange_unpack(const void *buf, size_t len, struct proto_hello *h,
			     struct proto_qp_info *qp);

/* 1..31 of [A-Za-z0-9_.-], the first a letter, digit or '_' */
bool proto_pool_name_valid(const char *name);
/*
 * POOL_CREATE's payload (also what HELLO carries): name and size. unpack:
 * -EBADMSG for a bad length or name; create_size is not checked here.
 */
void proto_pool_sel_pack(struct proto_pool_sel_wire *w, const char *name, uint64_t create_size);
int proto_pool_sel_unpack(const void *buf, size_t len, char name[PROTO_POOL_NAME_MAX],
			  uint64_t *create_size);
void proto_pool_delete_pack(struct proto_pool_delete_wire *w, const char *name, uint32_t flags);
/* -EBADMSG for a bad length, name, or unknown flag */
int proto_pool_delete_unpack(const void *buf, size_t len, char name[PROTO_POOL_NAME_MAX],
			     uint32_t *flags);
/* bytes proto_pool_list_pack() writes */
size_t proto_pool_list_wire_size(const struct proto_pool_list *l);
/* bytes written, or -EMSGSIZE if cap is too small (or npools > PROTO_MAX_POOLS) */
ssize_t proto_pool_list_pack(const struct proto_pool_list *l, void *buf, size_t cap);
/*
 * -EBADMSG: npools above PROTO_MAX_POOLS, len not the exact size, a name or
 * owner without its NUL, free above capacity. -ENOMEM. @out owns its pools.
 */
int proto_pool_list_unpack(const void *buf, size_t len, struct proto_pool_list *out);
/* NULL-tolerant */
void proto_pool_list_clear(struct proto_pool_list *l);

void proto_rw_pack(struct proto_rw_wire *w, const struct proto_rw *rw);
/* WRITE requests carry data after the struct: unpack accepts len >= sizeof */
int proto_rw_unpack(const void *buf, size_t len, struct proto_rw *rw);

void proto_atomic_pack(struct proto_atomic_wire *w, const struct proto_atomic *a);
int proto_atomic_unpack(const void *buf, size_t len, struct proto_atomic *a);

void proto_qp_info_pack(struct proto_qp_info_wire *w, const struct proto_qp_info *qp);
int proto_qp_info_unpack(const void *buf, size_t len, struct proto_qp_info *qp);

void proto_stats_pack(struct proto_stats_wire *w, const struct proto_stats *s);
int proto_stats_unpack(const void *buf, size_t len, struct proto_stats *s);

/* with h->pool_id != 0 the pool form (PROTO_CM_POOL_ID); returns the bytes used */
size_t proto_cm_priv_pack(struct proto_cm_priv_pool_wire *w, const struct proto_hello *h);
/*
 * -EBADMSG (short for its flags, bad magic, a pool form with pool_id 0) or
 * -EPROTONOSUPPORT (other version). h->pool is "" and create_size 0.
 */
int proto_cm_priv_unpack(const void *buf, size_t len, struct proto_hello *h);

void proto_fence_pack(struct proto_fence_wire *w, uint64_t client_id);
/* -EBADMSG: wrong length, or client id 0 (which would fence every lease-less client) */
int proto_fence_unpack(const void *buf, size_t len, uint64_t *client_id);
/* a random non-zero client id (getrandom, else GLib's generator) */
uint64_t proto_client_id_new(void);

/* ---- pool descriptor ---- */

/* bytes proto_pool_pack() writes for this pool */
size_t proto_pool_wire_size(const struct proto_pool *pool);
/* returns bytes written, or -EMSGSIZE if cap is too small */
ssize_t proto_pool_pack(const struct proto_pool *pool, void *buf, size_t cap);
/*
 * Validates: nregions in 1..PROTO_MAX_REGIONS, len == exact wire size, no
 * zero-length region, region lengths summing to size (no overflow).
 * On success @out owns a new regions array. -EBADMSG or -ENOMEM.
 */
int proto_pool_unpack(const void *buf, size_t len, struct proto_pool *out);
/* free the regions array and zero the struct; NULL-tolerant */
void proto_pool_clear(struct proto_pool *pool);
/* deep copy; -ENOMEM */
int proto_pool_copy(struct proto_pool *dst, const struct proto_pool *src);
/*
 * Translate a pool offset range into (remote address, rkey). -ERANGE if the
 * range leaves the pool or crosses a region boundary (callers split there;
 * regions are multiples of 1 MiB except possibly the last).
 */
int proto_pool_resolve(const struct proto_pool *pool, uint64_t off, uint64_t len,
		       uint64_t *raddr, uint32_t *rkey);

#endif /* RMEM_PROTO_H */
