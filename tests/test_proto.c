/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * test_proto.c - unit tests for common/proto.c (wire format, status table,
 * tokens, pool descriptors), common/units.c and the loopback behaviour of
 * common/net.c.
 *
 * Every unpack function is fed each prefix of a valid message in a heap
 * buffer of exactly that length, so a sanitizer build also proves that no
 * decoder reads past the bytes it was given.
 */
#define G_LOG_DOMAIN "rmemfs-test-proto"

#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <glib.h>
#include <glib/gstdio.h>

#include "net.h"
#include "proto.h"
#include "units.h"

typedef int (*unpack_fn)(const void *buf, size_t len, void *out);

/* every strict prefix of msg (in an exact-size heap copy) must be refused with -EBADMSG */
static void check_prefixes(const void *msg, size_t len, unpack_fn fn, size_t out_size)
{
	void *out = g_malloc0(out_size);

	for (size_t k = 0; k < len; k++) {
		void *copy = g_malloc(k ? k : 1);

		memcpy(copy, msg, k);
		g_assert_cmpint(fn(copy, k, out), ==, -EBADMSG);
		g_free(copy);
	}
	g_free(out);
}

/* the same message with one byte more must be refused too (exact-length payloads) */
static void check_too_long(const void *msg, size_t len, unpack_fn fn, size_t out_size)
{
	uint8_t *copy = g_malloc0(len + 1);
	void *out = g_malloc0(out_size);

	memcpy(copy, msg, len);
	g_assert_cmpint(fn(copy, len + 1, out), ==, -EBADMSG);
	g_free(out);
	g_free(copy);
}

/* adapters so every decoder fits unpack_fn */
static int hello_unpack_any(const void *buf, size_t len, void *out)
{
	return proto_hello_unpack(buf, len, out);
}

static int fence_unpack_any(const void *buf, size_t len, void *out)
{
	return proto_fence_unpack(buf, len, out);
}

static int rw_unpack_any(const void *buf, size_t len, void *out)
{
	return proto_rw_unpack(buf, len, out);
}

static int atomic_unpack_any(const void *buf, size_t len, void *out)
{
	return proto_atomic_unpack(buf, len, out);
}

static int qp_info_unpack_any(const void *buf, size_t len, void *out)
{
	return proto_qp_info_unpack(buf, len, out);
}

static int stats_unpack_any(const void *buf, size_t len, void *out)
{
	return proto_stats_unpack(buf, len, out);
}

static int cm_priv_unpack_any(const void *buf, size_t len, void *out)
{
	return proto_cm_priv_unpack(buf, len, out);
}

static int pool_unpack_any(const void *buf, size_t len, void *out)
{
	int rc = proto_pool_unpack(buf, len, out);

	if (rc == 0)
		proto_pool_clear(out);
	return rc;
}

static void test_wire_sizes(void)
{
	g_assert_cmpuint(sizeof(struct proto_hdr), ==, 24);
	g_assert_cmpuint(sizeof(struct proto_hello_wire), ==, 48);
	g_assert_cmpuint(sizeof(struct proto_region_wire), ==, 24);
	g_assert_cmpuint(sizeof(struct proto_pool_wire), ==, 24);
	g_assert_cmpuint(sizeof(struct proto_rw_wire), ==, 16);
	g_assert_cmpuint(sizeof(struct proto_atomic_wire), ==, 32);
	g_assert_cmpuint(sizeof(struct proto_atomic_resp_wire), ==, 8);
	g_assert_cmpuint(sizeof(struct proto_qp_info_wire), ==, 32);
	g_assert_cmpuint(sizeof(struct proto_stats_wire), ==, 80);
	g_assert_cmpuint(sizeof(struct proto_cm_priv_wire), ==, 48);
	g_assert_cmpuint(sizeof(struct proto_cm_reject_wire), ==, 8);
	g_assert_cmpuint(sizeof(struct proto_fence_wire), ==, 8);
	g_assert_cmpuint(sizeof(struct proto_qp_exchange_wire), ==, 80);
}

static void test_hdr_roundtrip(void)
{
	static const uint16_t types[] = { PROTO_HELLO, PROTO_READ, PROTO_WRITE, PROTO_CAS,
					  PROTO_FETCH_ADD, PROTO_PING, PROTO_STATS,
					  PROTO_QP_EXCHANGE, PROTO_FENCE };
	struct proto_hdr h;
	struct proto_msg m;

	for (size_t i = 0; i < G_N_ELEMENTS(types); i++) {
		for (int resp = 0; resp < 2; resp++) {
			uint16_t t = types[i] | (resp ? PROTO_RESPONSE : 0);
			uint32_t len = proto_max_payload(t);

			proto_hdr_pack(&h, t, PROTO_E_RANGE, len, 0x0102030405060708ULL + i);
			memset(&m, 0xa5, sizeof(m));
			g_assert_cmpint(proto_hdr_unpack(&h, &m), ==, 0);
			g_assert_cmpuint(m.type, ==, t);
			g_assert_cmpuint(m.status, ==, PROTO_E_RANGE);
			g_assert_cmpuint(m.len, ==, len);
			g_assert_cmpuint(m.id, ==, 0x0102030405060708ULL + i);

			/* one byte above the type's limit */
			proto_hdr_pack(&h, t, 0, len + 1, 1);
			g_assert_cmpint(proto_hdr_unpack(&h, &m), ==, -EBADMSG);
		}
	}

	/* big-endian on the wire */
	proto_hdr_pack(&h, PROTO_READ, 0, 16, 42);
	g_assert_cmpuint(((uint8_t *)&h)[0], ==, 'R');
	g_assert_cmpuint(((uint8_t *)&h)[3], ==, 'M');
	g_assert_cmpuint(be16toh(h.version), ==, PROTO_VERSION);
	g_assert_cmpuint(be64toh(h.id), ==, 42);
}

static void test_hdr_limits(void)
{
	const uint32_t io = PROTO_MAX_IO + sizeof(struct proto_rw_wire);

	g_assert_cmpuint(proto_max_payload(PROTO_WRITE), ==, io);
	g_assert_cmpuint(proto_max_payload(PROTO_READ | PROTO_RESPONSE), ==, io);
	g_assert_cmpuint(proto_max_payload(PROTO_READ), ==, PROTO_MAX_CTRL);
	g_assert_cmpuint(proto_max_payload(PROTO_WRITE | PROTO_RESPONSE), ==, PROTO_MAX_CTRL);
	g_assert_cmpuint(proto_max_payload(PROTO_HELLO | PROTO_RESPONSE), ==, PROTO_MAX_CTRL);
	g_assert_cmpuint(proto_max_payload(PROTO_PING), ==, PROTO_MAX_CTRL);
}

static void test_hdr_malformed(void)
{
	static const uint16_t bad_types[] = { 0, 13, 0x7fff, PROTO_RESPONSE, PROTO_RESPONSE | 13,
					      0x4002, 0x0102, 0xffff };
	struct proto_hdr h;
	struct proto_msg m;

	proto_hdr_pack(&h, PROTO_PING, 0, 0, 7);
	h.magic = htobe32(PROTO_MAGIC ^ 1);
	g_assert_cmpint(proto_hdr_unpack(&h, &m), ==, -EBADMSG);
	h.magic = 0;
	g_assert_cmpint(proto_hdr_unpack(&h, &m), ==, -EBADMSG);

	/* another version: refused, but the id is there for the error response */
	proto_hdr_pack(&h, PROTO_HELLO, 0, 48, 1234);
	h.version = htobe16(PROTO_VERSION + 1);
	memset(&m, 0, sizeof(m));
	g_assert_cmpint(proto_hdr_unpack(&h, &m), ==, -EPROTONOSUPPORT);
	g_assert_cmpuint(m.id, ==, 1234);
	g_assert_cmpuint(m.type, ==, PROTO_HELLO);
	h.version = 0;
	g_assert_cmpint(proto_hdr_unpack(&h, &m), ==, -EPROTONOSUPPORT);

	for (size_t i = 0; i < G_N_ELEMENTS(bad_types); i++) {
		proto_hdr_pack(&h, bad_types[i], 0, 0, 1);
		g_assert_cmpint(proto_hdr_unpack(&h, &m), ==, -EBADMSG);
	}

	proto_hdr_pack(&h, PROTO_WRITE, 0, UINT32_MAX, 1);
	g_assert_cmpint(proto_hdr_unpack(&h, &m), ==, -EBADMSG);
	proto_hdr_pack(&h, PROTO_READ, 0, PROTO_MAX_CTRL + 1, 1);
	g_assert_cmpint(proto_hdr_unpack(&h, &m), ==, -EBADMSG);

	/* an unaligned header inside a receive buffer */
	{
		uint8_t raw[sizeof(h) + 1];

		proto_hdr_pack(&h, PROTO_STATS, 0, 0, 99);
		memcpy(raw + 1, &h, sizeof(h));
		g_assert_cmpint(proto_hdr_unpack((const void *)(raw + 1), &m), ==, 0);
		g_assert_cmpuint(m.id, ==, 99);
	}
}

static void test_status_table(void)
{
	GHashTable *seen = g_hash_table_new(g_str_hash, g_str_equal);

	g_assert_cmpint(proto_status_to_errno(PROTO_OK), ==, 0);
	g_assert_cmpuint(proto_errno_to_status(0), ==, PROTO_OK);
	for (uint32_t s = 0; s < PROTO_STATUS_COUNT; s++) {
		int err = proto_status_to_errno(s);
		const char *str = proto_status_str(s);

		g_assert_cmpint(err, <=, 0);
		g_assert_true(s == PROTO_OK || err < 0);
		g_assert_cmpuint(proto_errno_to_status(err), ==, s);
		g_assert_nonnull(str);
		g_assert_false(g_hash_table_contains(seen, str));
		g_hash_table_add(seen, (gpointer)str);
	}
	g_hash_table_destroy(seen);

	g_assert_cmpint(proto_status_to_errno(PROTO_E_AUTH), ==, -EPERM);
	g_assert_cmpint(proto_status_to_errno(PROTO_E_VERSION), ==, -EPROTONOSUPPORT);
	g_assert_cmpint(proto_status_to_errno(PROTO_E_MALFORMED), ==, -EBADMSG);
	g_assert_cmpint(proto_status_to_errno(PROTO_E_KEY), ==, -EACCES);
	g_assert_cmpint(proto_status_to_errno(PROTO_E_RANGE), ==, -EFAULT);
	g_assert_cmpint(proto_status_to_errno(PROTO_E_ALIGN), ==, -EINVAL);
	g_assert_cmpint(proto_status_to_errno(PROTO_E_TOOBIG), ==, -EMSGSIZE);
	g_assert_cmpint(proto_status_to_errno(PROTO_E_UNSUPPORTED), ==, -EOPNOTSUPP);
	g_assert_cmpint(proto_status_to_errno(PROTO_E_NOMEM), ==, -ENOMEM);
	g_assert_cmpint(proto_status_to_errno(PROTO_E_INTERNAL), ==, -EIO);
	g_assert_cmpint(proto_status_to_errno(PROTO_E_STATE), ==, -EPROTO);
	g_assert_cmpint(proto_status_to_errno(PROTO_E_FENCED), ==, -EKEYREVOKED);
	g_assert_cmpuint(proto_errno_to_status(-EKEYREVOKED), ==, PROTO_E_FENCED);

	/* unknown status codes and unmapped errnos */
	g_assert_cmpint(proto_status_to_errno(PROTO_STATUS_COUNT), ==, -EIO);
	g_assert_cmpint(proto_status_to_errno(UINT32_MAX), ==, -EIO);
	g_assert_cmpstr(proto_status_str(UINT32_MAX), ==, "unknown status");
	g_assert_cmpuint(proto_errno_to_status(-EXDEV), ==, PROTO_E_INTERNAL);
	g_assert_cmpuint(proto_errno_to_status(-ERANGE), ==, PROTO_E_RANGE);
	g_assert_cmpuint(proto_errno_to_status(EPERM), ==, PROTO_E_AUTH);
}

static void test_type_str(void)
{
	g_assert_cmpstr(proto_type_str(PROTO_HELLO), ==, "HELLO");
	g_assert_cmpstr(proto_type_str(PROTO_READ | PROTO_RESPONSE), ==, "READ");
	g_assert_cmpstr(proto_type_str(PROTO_FETCH_ADD), ==, "FETCH_ADD");
	g_assert_cmpstr(proto_type_str(PROTO_QP_EXCHANGE), ==, "QP_EXCHANGE");
	g_assert_cmpstr(proto_type_str(PROTO_FENCE | PROTO_RESPONSE), ==, "FENCE");
	g_assert_cmpstr(proto_type_str(0), ==, "unknown");
	g_assert_cmpstr(proto_type_str(99), ==, "unknown");
}

static void test_hello(void)
{
	struct proto_hello in = { .client_id = 0x0102030405060708ULL }, out;
	struct proto_hello_pool_wire w;

	for (int i = 0; i < PROTO_TOKEN_HASH_LEN; i++)
		in.token_hash[i] = i * 7 + 1;
	g_assert_cmpuint(proto_hello_pack(&w, &in), ==, sizeof(w.hello));
	g_assert_cmpuint(w.hello.flags, ==, 0);
	g_assert_cmpuint(w.hello.reserved, ==, 0);
	g_assert_cmpuint(be64toh(w.hello.client_id), ==, in.client_id);
	g_assert_cmpint(proto_hello_unpack(&w, sizeof(w.hello), &out), ==, 0);
	g_assert_cmpmem(&out, sizeof(out), &in, sizeof(in));
	/* a version 1 HELLO (40 bytes, no client id) is refused, never read as id 0 */
	check_prefixes(&w, sizeof(w.hello), hello_unpack_any, sizeof(out));
	check_too_long(&w, sizeof(w.hello), hello_unpack_any, sizeof(out));
	/* the full-length form without the flag is not a pool selection */
	g_assert_cmpint(proto_hello_unpack(&w, sizeof(w), &out), ==, -EBADMSG);
	/* a control session: the flag, no pool */
	in.control = true;
	g_assert_cmpuint(proto_hello_pack(&w, &in), ==, sizeof(w.hello));
	g_assert_cmpuint(be32toh(w.hello.flags), ==, PROTO_HELLO_CONTROL);
	g_assert_cmpint(proto_hello_unpack(&w, sizeof(w.hello), &out), ==, 0);
	g_assert_true(out.control);
	g_assert_cmpint(proto_hello_unpack(&w, sizeof(w), &out), ==, -EBADMSG);
}

static void test_hello_pool(void)
{
	struct proto_hello in = { .client_id = 7, .create_size = 3ULL << 30 }, out;
	struct proto_hello_pool_wire w;

	g_strlcpy(in.pool, "tenant-a.pool_1", sizeof(in.pool));
	g_assert_cmpuint(proto_hello_pack(&w, &in), ==, sizeof(w));
	g_assert_cmpuint(be32toh(w.hello.flags), ==, PROTO_HELLO_POOL);
	g_assert_cmpint(proto_hello_unpack(&w, sizeof(w), &out), ==, 0);
	g_assert_cmpmem(&out, sizeof(out), &in, sizeof(in));
	check_prefixes(&w, sizeof(w), hello_unpack_any, sizeof(out));
	check_too_long(&w, sizeof(w), hello_unpack_any, sizeof(out));
	/* the flag without the selection */
	g_assert_cmpint(proto_hello_unpack(&w, sizeof(w.hello), &out), ==, -EBADMSG);
	/* an unknown flag; CONTROL with a pool */
	w.hello.flags = htobe32(PROTO_HELLO_POOL | 0x80);
	g_assert_cmpint(proto_hello_unpack(&w, sizeof(w), &out), ==, -EBADMSG);
	w.hello.flags = htobe32(PROTO_HELLO_POOL | PROTO_HELLO_CONTROL);
	g_assert_cmpint(proto_hello_unpack(&w, sizeof(w), &out), ==, -EBADMSG);
	w.hello.flags = htobe32(PROTO_HELLO_POOL);
	/* a name with no NUL, an empty name, a bad character */
	memset(w.sel.name, 'a', sizeof(w.sel.name));
	g_assert_cmpint(proto_hello_unpack(&w, sizeof(w), &out), ==, -EBADMSG);
	memset(w.sel.name, 0, sizeof(w.sel.name));
	g_assert_cmpint(proto_hello_unpack(&w, sizeof(w), &out), ==, -EBADMSG);
	memcpy(w.sel.name, "a/b", 3);
	g_assert_cmpint(proto_hello_unpack(&w, sizeof(w), &out), ==, -EBADMSG);
}

static void test_pool_names(void)
{
	static const char *const good[] = { "a", "_x", "9lives", "pool.v2-b_c",
					    "abcdefghijklmnopqrstuvwxyz01234" };
	static const char *const bad[] = { "", ".hidden", "-opt", "a/b", "a b", "caf\xc3\xa9",
					   "abcdefghijklmnopqrstuvwxyz012345", "x:1" };

	for (size_t i = 0; i < G_N_ELEMENTS(good); i++)
		g_assert_true(proto_pool_name_valid(good[i]));
	for (size_t i = 0; i < G_N_ELEMENTS(bad); i++)
		g_assert_false(proto_pool_name_valid(bad[i]));
	g_assert_false(proto_pool_name_valid(NULL));
}

static void test_qp_exchange(void)
{
	struct proto_qp_info qp = { .qpn = 0x123456, .psn = 0xabcdef, .lid = 3, .mtu = 4,
				    .max_rd_atomic = 16 }, qout;
	struct proto_hello in = { .client_id = 99 }, out;
	struct proto_qp_exchange_pool_wire w;

	memset(qp.gid, 0xfe, sizeof(qp.gid));
	g_assert_cmpuint(proto_qp_exchange_pack(&w, &in, &qp), ==, sizeof(w.ex));
	g_assert_cmpint(proto_qp_exchange_unpack(&w, sizeof(w.ex), &out, &qout), ==, 0);
	g_assert_cmpmem(&out, sizeof(out), &in, sizeof(in));
	g_assert_cmpmem(&qout, sizeof(qout), &qp, sizeof(qp));
	g_assert_cmpint(proto_qp_exchange_unpack(&w, sizeof(w), &out, &qout), ==, -EBADMSG);

	g_strlcpy(in.pool, "p", sizeof(in.pool));
	g_assert_cmpuint(proto_qp_exchange_pack(&w, &in, &qp), ==, sizeof(w));
	g_assert_cmpint(proto_qp_exchange_unpack(&w, sizeof(w), &out, &qout), ==, 0);
	g_assert_cmpmem(&out, sizeof(out), &in, sizeof(in));
	g_assert_cmpmem(&qout, sizeof(qout), &qp, sizeof(qp));
	g_assert_cmpint(proto_qp_exchange_unpack(&w, sizeof(w.ex), &out, &qout), ==, -EBADMSG);
	g_assert_cmpint(proto_qp_exchange_unpack(&w, sizeof(w) - 1, &out, &qout), ==, -EBADMSG);
}

static int pool_sel_unpack_any(const void *buf, size_t len, void *out)
{
	uint64_t size;

	return proto_pool_sel_unpack(buf, len, out, &size);
}

static int pool_delete_unpack_any(const void *buf, size_t len, void *out)
{
	uint32_t flags;

	return proto_pool_delete_unpack(buf, len, out, &flags);
}

static void test_pool_admin(void)
{
	struct proto_pool_sel_wire sw;
	struct proto_pool_delete_wire dw;
	char name[PROTO_POOL_NAME_MAX];
	uint64_t size = 0;
	uint32_t flags = 0;

	proto_pool_sel_pack(&sw, "scratch", 1ULL << 40);
	g_assert_cmpint(proto_pool_sel_unpack(&sw, sizeof(sw), name, &size), ==, 0);
	g_assert_cmpstr(name, ==, "scratch");
	g_assert_cmpuint(size, ==, 1ULL << 40);
	check_prefixes(&sw, sizeof(sw), pool_sel_unpack_any, PROTO_POOL_NAME_MAX);
	check_too_long(&sw, sizeof(sw), pool_sel_unpack_any, PROTO_POOL_NAME_MAX);
	sw.flags = htobe32(1);
	g_assert_cmpint(proto_pool_sel_unpack(&sw, sizeof(sw), name, &size), ==, -EBADMSG);

	proto_pool_delete_pack(&dw, "scratch", PROTO_POOL_DELETE_FORCE);
	g_assert_cmpint(proto_pool_delete_unpack(&dw, sizeof(dw), name, &flags), ==, 0);
	g_assert_cmpstr(name, ==, "scratch");
	g_assert_cmpuint(flags, ==, PROTO_POOL_DELETE_FORCE);
	check_prefixes(&dw, sizeof(dw), pool_delete_unpack_any, PROTO_POOL_NAME_MAX);
	check_too_long(&dw, sizeof(dw), pool_delete_unpack_any, PROTO_POOL_NAME_MAX);
	dw.flags = htobe32(2);
	g_assert_cmpint(proto_pool_delete_unpack(&dw, sizeof(dw), name, &flags), ==, -EBADMSG);
	proto_pool_delete_pack(&dw, "../etc", 0);
	g_assert_cmpint(proto_pool_delete_unpack(&dw, sizeof(dw), name, &flags), ==, -EBADMSG);
}

static int pool_list_unpack_any(const void *buf, size_t len, void *out)
{
	int rc = proto_pool_list_unpack(buf, len, out);

	if (rc == 0)
		proto_pool_list_clear(out);
	return rc;
}

static void test_pool_list(void)
{
	struct proto_pool_info pools[3] = {
		{ .name = "", .owner = "", .size = 1ULL << 30, .pool_id = 1, .clients = 2 },
		{ .name = "a", .owner = "alice", .size = 64ULL << 20, .resident = 4096,
		  .pool_id = 0xfeedULL, .client_id = 42, .clients = 1, .flags = PROTO_POOL_PERSISTENT },
		{ .name = "b", .owner = "bob", .size = 1ULL << 20, .flags = PROTO_POOL_DELETING },
	};
	struct proto_pool_list in = { .capacity = 4ULL << 30, .free = 1ULL << 30, .npools = 3,
				      .pools = pools }, out;
	size_t len = proto_pool_list_wire_size(&in);
	uint8_t *buf = g_malloc(len);
	struct proto_pool_list_wire *h = (void *)buf;

	g_assert_cmpint(proto_pool_list_pack(&in, buf, len - 1), ==, -EMSGSIZE);
	g_assert_cmpint(proto_pool_list_pack(&in, buf, len), ==, (ssize_t)len);
	g_assert_cmpint(proto_pool_list_unpack(buf, len, &out), ==, 0);
	g_assert_cmpuint(out.capacity, ==, in.capacity);
	g_assert_cmpuint(out.free, ==, in.free);
	g_assert_cmpuint(out.npools, ==, 3);
	g_assert_cmpmem(out.pools, 3 * sizeof(pools[0]), pools, sizeof(pools));
	proto_pool_list_clear(&out);
	proto_pool_list_clear(NULL);
	check_prefixes(buf, len, pool_list_unpack_any, sizeof(out));
	check_too_long(buf, len, pool_list_unpack_any, sizeof(out));
	/* free above capacity; more pools than the limit */
	h->free = htobe64(8ULL << 30);
	g_assert_cmpint(proto_pool_list_unpack(buf, len, &out), ==, -EBADMSG);
	h->free = htobe64(0);
	h->npools = htobe32(PROTO_MAX_POOLS + 1);
	g_assert_cmpint(proto_pool_list_unpack(buf, len, &out), ==, -EBADMSG);
	h->npools = htobe32(3);
	/* an owner with no NUL */
	memset(buf + sizeof(*h) + sizeof(struct proto_pool_info_wire) + PROTO_POOL_NAME_MAX, 'x',
	       PROTO_POOL_NAME_MAX);
	g_assert_cmpint(proto_pool_list_unpack(buf, len, &out), ==, -EBADMSG);
	g_free(buf);
	in.npools = PROTO_MAX_POOLS + 1;
	g_assert_cmpint(proto_pool_list_pack(&in, NULL, 0), ==, -EMSGSIZE);
}

static void test_fence(void)
{
	struct proto_fence_wire w;
	uint64_t id = 0;

	proto_fence_pack(&w, 0xfedcba9876543210ULL);
	g_assert_cmpuint(be64toh(w.client_id), ==, 0xfedcba9876543210ULL);
	g_assert_cmpint(proto_fence_unpack(&w, sizeof(w), &id), ==, 0);
	g_assert_cmpuint(id, ==, 0xfedcba9876543210ULL);
	check_prefixes(&w, sizeof(w), fence_unpack_any, sizeof(id));
	check_too_long(&w, sizeof(w), fence_unpack_any, sizeof(id));
	/* id 0 is "no lease holder": fencing it would lock out every lease-less client */
	proto_fence_pack(&w, 0);
	g_assert_cmpint(proto_fence_unpack(&w, sizeof(w), &id), ==, -EBADMSG);

	for (int i = 0; i < 100; i++)
		g_assert_cmpuint(proto_client_id_new(), !=, 0);
	g_assert_cmpuint(proto_client_id_new(), !=, proto_client_id_new());
}

static void test_rw(void)
{
	struct proto_rw in = { .addr = 0xfedcba9876543210ULL, .rkey = 0xdeadbeef,
			       .len = PROTO_MAX_IO };
	struct proto_rw out;
	struct proto_rw_wire w;
	uint8_t with_data[sizeof(w) + 5];

	proto_rw_pack(&w, &in);
	g_assert_cmpuint(be64toh(w.addr), ==, in.addr);
	g_assert_cmpint(proto_rw_unpack(&w, sizeof(w), &out), ==, 0);
	g_assert_cmpuint(out.addr, ==, in.addr);
	g_assert_cmpuint(out.rkey, ==, in.rkey);
	g_assert_cmpuint(out.len, ==, in.len);

	/* WRITE requests carry data after the struct */
	memcpy(with_data, &w, sizeof(w));
	memset(with_data + sizeof(w), 0x77, 5);
	memset(&out, 0, sizeof(out));
	g_assert_cmpint(proto_rw_unpack(with_data, sizeof(with_data), &out), ==, 0);
	g_assert_cmpuint(out.rkey, ==, in.rkey);
	check_prefixes(&w, sizeof(w), rw_unpack_any, sizeof(struct proto_rw));
}

static void test_atomic(void)
{
	struct proto_atomic in = { .addr = 0x1000, .rkey = 77,
				   .compare_add = 0x8000000000000001ULL,
				   .swap = UINT64_MAX };
	struct proto_atomic out;
	struct proto_atomic_wire w;

	memset(&w, 0xff, sizeof(w));
	proto_atomic_pack(&w, &in);
	g_assert_cmpuint(w.reserved, ==, 0);
	g_assert_cmpint(proto_atomic_unpack(&w, sizeof(w), &out), ==, 0);
	g_assert_cmpuint(out.addr, ==, in.addr);
	g_assert_cmpuint(out.rkey, ==, in.rkey);
	g_assert_cmpuint(out.compare_add, ==, in.compare_add);
	g_assert_cmpuint(out.swap, ==, in.swap);
	check_prefixes(&w, sizeof(w), atomic_unpack_any, sizeof(out));
	check_too_long(&w, sizeof(w), atomic_unpack_any, sizeof(out));
}

static void test_qp_info(void)
{
	struct proto_qp_info in = { .qpn = 0x123456, .psn = 0xabcdef, .lid = 0x1234, .mtu = 5,
				    .max_rd_atomic = 16 };
	struct proto_qp_info out;
	struct proto_qp_info_wire w;

	for (int i = 0; i < 16; i++)
		in.gid[i] = 0xf0 + i;
	proto_qp_info_pack(&w, &in);
	g_assert_cmpint(proto_qp_info_unpack(&w, sizeof(w), &out), ==, 0);
	g_assert_cmpuint(out.qpn, ==, in.qpn);
	g_assert_cmpuint(out.psn, ==, in.psn);
	g_assert_cmpmem(out.gid, 16, in.gid, 16);
	g_assert_cmpuint(out.lid, ==, in.lid);
	g_assert_cmpuint(out.mtu, ==, in.mtu);
	g_assert_cmpuint(out.max_rd_atomic, ==, in.max_rd_atomic);
	check_prefixes(&w, sizeof(w), qp_info_unpack_any, sizeof(out));
	check_too_long(&w, sizeof(w), qp_info_unpack_any, sizeof(out));
}

static void test_stats(void)
{
	struct proto_stats in, out;
	struct proto_stats_wire w;
	uint64_t *f = (uint64_t *)&in;

	/* a different value in every field catches swapped fields */
	for (size_t i = 0; i < sizeof(in) / sizeof(uint64_t); i++)
		f[i] = 0x1111111111111111ULL * (i + 1) + i;
	proto_stats_pack(&w, &in);
	g_assert_cmpint(proto_stats_unpack(&w, sizeof(w), &out), ==, 0);
	g_assert_cmpmem(&out, sizeof(out), &in, sizeof(in));
	g_assert_cmpuint(be64toh(w.rdma_connections), ==, in.rdma_connections);
	g_assert_cmpuint(be64toh(w.clients_now), ==, in.clients_now);
	check_prefixes(&w, sizeof(w), stats_unpack_any, sizeof(out));
	check_too_long(&w, sizeof(w), stats_unpack_any, sizeof(out));
}

static void test_cm_priv(void)
{
	struct proto_hello in = { .client_id = 0xa5a5000011112222ULL }, out;
	struct proto_cm_priv_pool_wire pw;
	struct proto_cm_priv_wire w;
	uint8_t padded[56];

	proto_token_hash("token", 5, in.token_hash);
	g_assert_cmpuint(proto_cm_priv_pack(&pw, &in), ==, sizeof(w));
	memcpy(&w, &pw.base, sizeof(w));
	g_assert_cmpint(proto_cm_priv_unpack(&w, sizeof(w), &out), ==, 0);
	g_assert_cmpmem(&out, sizeof(out), &in, sizeof(in));

	/* the CM pads private data: longer buffers are fine */
	memset(padded, 0, sizeof(padded));
	memcpy(padded, &w, sizeof(w));
	memset(&out, 0, sizeof(out));
	g_assert_cmpint(proto_cm_priv_unpack(padded, sizeof(padded), &out), ==, 0);
	g_assert_cmpmem(&out, sizeof(out), &in, sizeof(in));

	g_assert_cmpint(proto_cm_priv_unpack(NULL, 0, &out), ==, -EBADMSG);
	check_prefixes(&w, sizeof(w), cm_priv_unpack_any, sizeof(out));

	w.version = htobe16(PROTO_VERSION - 1);
	g_assert_cmpint(proto_cm_priv_unpack(&w, sizeof(w), &out), ==, -EPROTONOSUPPORT);
	w.version = htobe16(PROTO_VERSION + 1);
	g_assert_cmpint(proto_cm_priv_unpack(&w, sizeof(w), &out), ==, -EPROTONOSUPPORT);
	w.version = htobe16(PROTO_VERSION);
	w.magic = htobe32(0x12345678);
	g_assert_cmpint(proto_cm_priv_unpack(&w, sizeof(w), &out), ==, -EBADMSG);

	/* the pool form: 56 bytes, the id after the base; id 0 or a short form refused */
	in.pool_id = 0x1122334455667788ULL;
	g_assert_cmpuint(proto_cm_priv_pack(&pw, &in), ==, sizeof(pw));
	g_assert_cmpint(proto_cm_priv_unpack(&pw, sizeof(pw), &out), ==, 0);
	g_assert_cmpmem(&out, sizeof(out), &in, sizeof(in));
	g_assert_cmpint(proto_cm_priv_unpack(&pw, sizeof(pw.base), &out), ==, -EBADMSG);
	pw.pool_id = 0;
	g_assert_cmpint(proto_cm_priv_unpack(&pw, sizeof(pw), &out), ==, -EBADMSG);
	pw.base.flags = htobe16(0x2);
	g_assert_cmpint(proto_cm_priv_unpack(&pw, sizeof(pw), &out), ==, -EBADMSG);
}

/* a pool descriptor in wire form, built by hand so malformed ones can be made */
static uint8_t *pool_wire(uint64_t size, uint32_t nregions_field, const uint64_t *lens,
			  const uint64_t *addrs, uint32_t nregions, size_t *len)
{
	struct proto_pool_wire pw = { .size = htobe64(size), .pool_id = htobe64(0xabc),
				      .nregions = htobe32(nregions_field),
				      .flags = htobe32(PROTO_POOL_PERSISTENT) };
	uint8_t *buf;

	*len = sizeof(pw) + nregions * sizeof(struct proto_region_wire);
	buf = g_malloc0(*len);
	memcpy(buf, &pw, sizeof(pw));
	for (uint32_t i = 0; i < nregions; i++) {
		struct proto_region_wire rw = { .addr = htobe64(addrs ? addrs[i] : 0x100000 * i),
						.len = htobe64(lens[i]), .rkey = htobe32(i + 1) };

		memcpy(buf + sizeof(pw) + i * sizeof(rw), &rw, sizeof(rw));
	}
	return buf;
}

static void test_pool_roundtrip(void)
{
	struct proto_region regions[3] = {
		{ .addr = 0x7f0000000000ULL, .len = 1 << 20, .rkey = 11 },
		{ .addr = 0x7f1000000000ULL, .len = 2 << 20, .rkey = 22 },
		{ .addr = 0x10, .len = 12345, .rkey = 33 },
	};
	struct proto_pool in = { .size = (3 << 20) + 12345, .pool_id = 0x1122334455667788ULL,
				 .flags = PROTO_POOL_HUGEPAGES, .nregions = 3,
				 .regions = regions };
	struct proto_pool out, copy;
	size_t wire_len = proto_pool_wire_size(&in);
	uint8_t *buf = g_malloc(wire_len);

	g_assert_cmpuint(wire_len, ==, 24 + 3 * 24);
	g_assert_cmpint(proto_pool_pack(&in, buf, wire_len - 1), ==, -EMSGSIZE);
	g_assert_cmpint(proto_pool_pack(&in, buf, wire_len), ==, (ssize_t)wire_len);
	g_assert_cmpint(proto_pool_unpack(buf, wire_len, &out), ==, 0);
	g_assert_cmpuint(out.size, ==, in.size);
	g_assert_cmpuint(out.pool_id, ==, in.pool_id);
	g_assert_cmpuint(out.flags, ==, in.flags);
	g_assert_cmpuint(out.nregions, ==, 3);
	for (int i = 0; i < 3; i++) {
		g_assert_cmpuint(out.regions[i].addr, ==, regions[i].addr);
		g_assert_cmpuint(out.regions[i].len, ==, regions[i].len);
		g_assert_cmpuint(out.regions[i].rkey, ==, regions[i].rkey);
	}

	g_assert_cmpint(proto_pool_copy(&copy, &out), ==, 0);
	g_assert_true(copy.regions != out.regions);
	proto_pool_clear(&out);
	g_assert_null(out.regions);
	g_assert_cmpuint(out.nregions, ==, 0);
	g_assert_cmpuint(copy.regions[2].rkey, ==, 33);
	proto_pool_clear(&copy);
	proto_pool_clear(NULL);

	check_prefixes(buf, wire_len, pool_unpack_any, sizeof(struct proto_pool));
	check_too_long(buf, wire_len, pool_unpack_any, sizeof(struct proto_pool));
	g_free(buf);
}

static void test_pool_max_regions(void)
{
	uint64_t *lens = g_new(uint64_t, PROTO_MAX_REGIONS + 1);
	struct proto_pool out;
	uint8_t *buf;
	size_t len;

	for (int i = 0; i <= PROTO_MAX_REGIONS; i++)
		lens[i] = 1 << 20;
	buf = pool_wire((uint64_t)PROTO_MAX_REGIONS << 20, PROTO_MAX_REGIONS, lens, NULL,
			PROTO_MAX_REGIONS, &len);
	g_assert_cmpint(proto_pool_unpack(buf, len, &out), ==, 0);
	g_assert_cmpuint(out.nregions, ==, PROTO_MAX_REGIONS);
	proto_pool_clear(&out);
	g_free(buf);

	buf = pool_wire((uint64_t)(PROTO_MAX_REGIONS + 1) << 20, PROTO_MAX_REGIONS + 1, lens, NULL,
			PROTO_MAX_REGIONS + 1, &len);
	g_assert_cmpint(proto_pool_unpack(buf, len, &out), ==, -EBADMSG);
	g_free(buf);
	g_free(lens);
}

static void test_pool_malformed(void)
{
	const uint64_t one_mib[2] = { 1 << 20, 1 << 20 };
	const uint64_t with_zero[2] = { 1 << 20, 0 };
	const uint64_t huge[2] = { 1ULL << 63, 1ULL << 63 };
	const uint64_t wrap_addr[1] = { UINT64_MAX - 10 };
	struct proto_pool out;
	uint8_t *buf;
	size_t len;

	/* nregions 0 */
	buf = pool_wire(0, 0, one_mib, NULL, 0, &len);
	g_assert_cmpint(proto_pool_unpack(buf, len, &out), ==, -EBADMSG);
	g_free(buf);

	/* nregions says 2, one region present */
	buf = pool_wire(2 << 20, 2, one_mib, NULL, 1, &len);
	g_assert_cmpint(proto_pool_unpack(buf, len, &out), ==, -EBADMSG);
	g_free(buf);

	/* nregions says 1, two regions present */
	buf = pool_wire(1 << 20, 1, one_mib, NULL, 2, &len);
	g_assert_cmpint(proto_pool_unpack(buf, len, &out), ==, -EBADMSG);
	g_free(buf);

	/* sum of region lengths != size, either way */
	buf = pool_wire((2 << 20) + 1, 2, one_mib, NULL, 2, &len);
	g_assert_cmpint(proto_pool_unpack(buf, len, &out), ==, -EBADMSG);
	g_free(buf);
	buf = pool_wire((2 << 20) - 1, 2, one_mib, NULL, 2, &len);
	g_assert_cmpint(proto_pool_unpack(buf, len, &out), ==, -EBADMSG);
	g_free(buf);

	/* a zero-length region */
	buf = pool_wire(1 << 20, 2, with_zero, NULL, 2, &len);
	g_assert_cmpint(proto_pool_unpack(buf, len, &out), ==, -EBADMSG);
	g_free(buf);

	/* lengths that overflow: 2^63 + 2^63 wraps to 0 */
	buf = pool_wire(0, 2, huge, NULL, 2, &len);
	g_assert_cmpint(proto_pool_unpack(buf, len, &out), ==, -EBADMSG);
	g_free(buf);

	/* a region whose address range wraps */
	buf = pool_wire(1 << 20, 1, one_mib, wrap_addr, 1, &len);
	g_assert_cmpint(proto_pool_unpack(buf, len, &out), ==, -EBADMSG);
	g_free(buf);

	/* nregions huge: the length check must not overflow */
	buf = pool_wire(1 << 20, UINT32_MAX, one_mib, NULL, 1, &len);
	g_assert_cmpint(proto_pool_unpack(buf, len, &out), ==, -EBADMSG);
	g_free(buf);
}

static void test_pool_resolve(void)
{
	struct proto_region regions[3] = {
		{ .addr = 0x10000, .len = 1 << 20, .rkey = 1 },
		{ .addr = 0x900000, .len = 1 << 20, .rkey = 2 },
		{ .addr = 0x5000000, .len = 512 << 10, .rkey = 3 },
	};
	struct proto_pool pool = { .size = (2 << 20) + (512 << 10), .nregions = 3,
				   .regions = regions };
	uint64_t raddr = 0;
	uint32_t rkey = 0;

	g_assert_cmpint(proto_pool_resolve(&pool, 0, 1, &raddr, &rkey), ==, 0);
	g_assert_cmpuint(raddr, ==, 0x10000);
	g_assert_cmpuint(rkey, ==, 1);
	g_assert_cmpint(proto_pool_resolve(&pool, (1 << 20) - 8, 8, &raddr, &rkey), ==, 0);
	g_assert_cmpuint(raddr, ==, 0x10000 + (1 << 20) - 8);
	g_assert_cmpint(proto_pool_resolve(&pool, 0, 1 << 20, &raddr, &rkey), ==, 0);

	/* crossing a region boundary */
	g_assert_cmpint(proto_pool_resolve(&pool, (1 << 20) - 8, 16, &raddr, &rkey), ==, -ERANGE);
	g_assert_cmpint(proto_pool_resolve(&pool, 0, (1 << 20) + 1, &raddr, &rkey), ==, -ERANGE);

	g_assert_cmpint(proto_pool_resolve(&pool, 1 << 20, 4096, &raddr, &rkey), ==, 0);
	g_assert_cmpuint(raddr, ==, 0x900000);
	g_assert_cmpuint(rkey, ==, 2);
	g_assert_cmpint(proto_pool_resolve(&pool, (2 << 20) + 100, 8, &raddr, &rkey), ==, 0);
	g_assert_cmpuint(raddr, ==, 0x5000000 + 100);
	g_assert_cmpuint(rkey, ==, 3);
	g_assert_cmpint(proto_pool_resolve(&pool, pool.size - 1, 1, &raddr, &rkey), ==, 0);
	g_assert_cmpuint(raddr, ==, 0x5000000 + (512 << 10) - 1);

	/* past the end, and off + len overflowing */
	g_assert_cmpint(proto_pool_resolve(&pool, pool.size, 1, &raddr, &rkey), ==, -ERANGE);
	g_assert_cmpint(proto_pool_resolve(&pool, pool.size - 1, 2, &raddr, &rkey), ==, -ERANGE);
	g_assert_cmpint(proto_pool_resolve(&pool, UINT64_MAX - 1, 4, &raddr, &rkey), ==, -ERANGE);
	g_assert_cmpint(proto_pool_resolve(&pool, 8, UINT64_MAX, &raddr, &rkey), ==, -ERANGE);
	g_assert_cmpint(proto_pool_resolve(&pool, UINT64_MAX, 1, &raddr, &rkey), ==, -ERANGE);
}

static void test_token_hash(void)
{
	static const uint8_t abc_sha256[32] = {
		0xba, 0x78, 0x16, 0xbf, 0x8f, 0x01, 0xcf, 0xea, 0x41, 0x41, 0x40,
		0xde, 0x5d, 0xae, 0x22, 0x23, 0xb0, 0x03, 0x61, 0xa3, 0x96, 0x17,
		0x7a, 0x9c, 0xb4, 0x10, 0xff, 0x61, 0xf2, 0x00, 0x15, 0xad,
	};
	uint8_t zero[PROTO_TOKEN_HASH_LEN] = { 0 };
	uint8_t a[PROTO_TOKEN_HASH_LEN], b[PROTO_TOKEN_HASH_LEN];

	memset(a, 0xff, sizeof(a));
	proto_token_hash("", 0, a);
	g_assert_cmpmem(a, sizeof(a), zero, sizeof(zero));
	proto_token_hash("abc", 3, a);
	g_assert_cmpmem(a, sizeof(a), abc_sha256, sizeof(abc_sha256));
	proto_token_hash("abd", 3, b);
	g_assert_false(proto_token_equal(a, b));
	g_assert_true(proto_token_equal(a, a));

	for (int i = 0; i < PROTO_TOKEN_HASH_LEN; i++) {
		memcpy(b, a, sizeof(a));
		b[i] ^= 0x80;
		g_assert_false(proto_token_equal(a, b));
	}
}

static char *write_tmp(const char *dir, const char *name, const void *data, size_t len)
{
	char *path = g_build_filename(dir, name, NULL);

	g_assert_true(g_file_set_contents(path, data, len, NULL));
	return path;
}

static void test_token_load(void)
{
	char *dir = g_dir_make_tmp("rmem-test-token-XXXXXX", NULL);
	uint8_t want[PROTO_TOKEN_HASH_LEN], got[PROTO_TOKEN_HASH_LEN];
	char big[4097];
	char *path;

	g_assert_nonnull(dir);
	proto_token_hash("s3cret", 6, want);

	path = write_tmp(dir, "plain", "s3cret", 6);
	g_assert_cmpint(proto_token_load(path, got), ==, 0);
	g_assert_cmpmem(got, sizeof(got), want, sizeof(want));
	g_unlink(path);
	g_free(path);

	path = write_tmp(dir, "newline", "s3cret\n", 7);
	memset(got, 0, sizeof(got));
	g_assert_cmpint(proto_token_load(path, got), ==, 0);
	g_assert_cmpmem(got, sizeof(got), want, sizeof(want));
	g_unlink(path);
	g_free(path);

	path = write_tmp(dir, "crlf", "s3cret\r\n\n", 9);
	memset(got, 0, sizeof(got));
	g_assert_cmpint(proto_token_load(path, got), ==, 0);
	g_assert_cmpmem(got, sizeof(got), want, sizeof(want));
	g_unlink(path);
	g_free(path);

	/* inner whitespace is part of the token */
	path = write_tmp(dir, "inner", "s3 cret\n", 8);
	g_assert_cmpint(proto_token_load(path, got), ==, 0);
	g_assert_false(proto_token_equal(got, want));
	g_unlink(path);
	g_free(path);

	path = write_tmp(dir, "empty", "", 0);
	g_assert_cmpint(proto_token_load(path, got), ==, -EINVAL);
	g_unlink(path);
	g_free(path);

	path = write_tmp(dir, "only-newlines", "\n\n", 2);
	g_assert_cmpint(proto_token_load(path, got), ==, -EINVAL);
	g_unlink(path);
	g_free(path);

	memset(big, 'x', sizeof(big));
	path = write_tmp(dir, "max", big, 4096);
	g_assert_cmpint(proto_token_load(path, got), ==, 0);
	g_unlink(path);
	g_free(path);
	path = write_tmp(dir, "big", big, 4097);
	g_assert_cmpint(proto_token_load(path, got), ==, -EFBIG);
	g_unlink(path);
	g_free(path);

	path = g_build_filename(dir, "missing", NULL);
	g_assert_cmpint(proto_token_load(path, got), ==, -ENOENT);
	g_free(path);

	g_assert_cmpint(proto_token_load(dir, got), ==, -EISDIR);
	g_rmdir(dir);
	g_free(dir);
}

static void test_units_parse(void)
{
	static const struct {
		const char *s;
		uint64_t v;
	} ok[] = {
		{ "0", 0 },
		{ "512", 512 },
		{ "512B", 512 },
		{ "64K", 64 << 10 },
		{ "64k", 64 << 10 },
		{ "64KiB", 64 << 10 },
		{ "64KB", 64 << 10 },
		{ "64kib", 64 << 10 },
		{ "1M", 1 << 20 },
		{ "1G", 1ULL << 30 },
		{ "3g", 3ULL << 30 },
		{ "1T", 1ULL << 40 },
		{ "2P", 2ULL << 50 },
		{ "15E", 15ULL << 60 },
		{ "18446744073709551615", UINT64_MAX },
		{ "16777215T", 16777215ULL << 40 },
	};
	static const char *const invalid[] = {
		"", "abc", "-1", "+1", " 1", "1 ", "1 K", "K", "1X", "1.5G", "64iB", "1KiBB", "1KK",
		"0x10", "1Gi",
	};
	static const char *const range[] = {
		"16E", "18446744073709551616", "99999999999999999999999", "16777216T",
		"17179869184G",
	};
	uint64_t v;

	for (size_t i = 0; i < G_N_ELEMENTS(ok); i++) {
		v = 12345;
		g_assert_cmpint(units_parse_size(ok[i].s, &v), ==, 0);
		g_assert_cmpuint(v, ==, ok[i].v);
	}
	for (size_t i = 0; i < G_N_ELEMENTS(invalid); i++) {
		v = 12345;
		g_assert_cmpint(units_parse_size(invalid[i], &v), ==, -EINVAL);
		g_assert_cmpuint(v, ==, 12345);
	}
	for (size_t i = 0; i < G_N_ELEMENTS(range); i++)
		g_assert_cmpint(units_parse_size(range[i], &v), ==, -ERANGE);
	g_assert_cmpint(units_parse_size(NULL, &v), ==, -EINVAL);
}

static void test_units_format(void)
{
	static const struct {
		uint64_t v;
		const char *s;
	} cases[] = {
		{ 0, "0 B" },
		{ 1, "1 B" },
		{ 512, "512 B" },
		{ 1023, "1023 B" },
		{ 1024, "1.0 KiB" },
		{ 1536, "1.5 KiB" },
		{ 64 << 10, "64.0 KiB" },
		{ (1 << 20) - 1, "1.0 MiB" },
		{ 1 << 20, "1.0 MiB" },
		{ 64 << 20, "64.0 MiB" },
		{ 1ULL << 30, "1.0 GiB" },
		{ 3ULL << 29, "1.5 GiB" },
		{ 1ULL << 40, "1.0 TiB" },
		{ 1ULL << 60, "1.0 EiB" },
		{ UINT64_MAX, "16.0 EiB" },
	};
	char buf[32];

	for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
		units_format_size(cases[i].v, buf, sizeof(buf));
		g_assert_cmpstr(buf, ==, cases[i].s);
	}
	/* a small buffer truncates, never overflows */
	memset(buf, 'z', sizeof(buf));
	units_format_size(64 << 20, buf, 4);
	g_assert_cmpstr(buf, ==, "64.");
	g_assert_cmpint(buf[4], ==, 'z');
}

static void test_net_loopback(void)
{
	g_assert_true(net_is_loopback("127.0.0.1"));
	g_assert_true(net_is_loopback("127.1.2.3"));
	g_assert_true(net_is_loopback("::1"));
	g_assert_true(net_is_loopback("localhost"));
	g_assert_true(net_is_loopback(NULL));
	g_assert_false(net_is_loopback("10.77.0.1"));
	g_assert_false(net_is_loopback("0.0.0.0"));
	g_assert_false(net_is_loopback("192.0.2.1"));
}

/* one case of net_parse_server_pool: host, port and pool it gives, or rc < 0 and why */
static void check_server_pool(const char *s, const char *host, uint16_t port, const char *pool)
{
	const char *why = "unset";
	char *h = NULL, *p = NULL;
	uint16_t pt = 1;
	int rc;

	rc = net_parse_server_pool(s, &h, &pt, &p, &why);
	if (!host) {
		g_assert_cmpint(rc, ==, -EINVAL);
		g_assert_nonnull(why);
		g_assert_cmpstr(why, !=, "unset");
		g_assert_null(h);
		g_assert_null(p);
		return;
	}
	g_assert_cmpint(rc, ==, 0);
	g_assert_null(why);
	g_assert_cmpstr(h, ==, host);
	g_assert_cmpuint(pt, ==, port);
	g_assert_cmpstr(p, ==, pool);
	g_free(h);
	g_free(p);
}

static void test_net_parse_server_pool(void)
{
	const char *why = NULL;
	char *h, *p;
	uint16_t pt;

	check_server_pool("host", "host", 0, NULL);
	check_server_pool("host:7471", "host", 7471, NULL);
	check_server_pool("host:7471/tenant-a.1", "host", 7471, "tenant-a.1");
	check_server_pool("10.0.0.2/_p", "10.0.0.2", 0, "_p");
	check_server_pool("[::1]:9000/db", "::1", 9000, "db");
	check_server_pool("fe80::1/db", "fe80::1", 0, "db");
	check_server_pool("h/0123456789012345678901234567890", "h", 0,
			  "0123456789012345678901234567890");
	/* the name: empty, too long, a bad first character, a bad character */
	check_server_pool("host:7471/", NULL, 0, NULL);
	check_server_pool("h/01234567890123456789012345678901", NULL, 0, NULL);
	check_server_pool("host/-x", NULL, 0, NULL);
	check_server_pool("host/.x", NULL, 0, NULL);
	check_server_pool("host/a b", NULL, 0, NULL);
	check_server_pool("host/a/b", NULL, 0, NULL);
	/* the address */
	check_server_pool("/name", NULL, 0, NULL);
	check_server_pool("host:0/name", NULL, 0, NULL);
	check_server_pool("host:99999", NULL, 0, NULL);
	check_server_pool("", NULL, 0, NULL);
	/* the two kinds of mistake say different things */
	g_assert_cmpint(net_parse_server_pool("host:x/p", &h, &pt, &p, &why), ==, -EINVAL);
	g_assert_nonnull(strstr(why, "PORT"));
	g_assert_cmpint(net_parse_server_pool("host/p!", &h, &pt, &p, &why), ==, -EINVAL);
	g_assert_nonnull(strstr(why, "not a pool name"));
	/* why may be NULL */
	g_assert_cmpint(net_parse_server_pool("host/p!", &h, &pt, &p, NULL), ==, -EINVAL);
}

static void test_net_format_server_pool(void)
{
	char buf[32];

	g_assert_cmpint(net_format_server_pool(buf, sizeof(buf), "h", 9, NULL), ==, 3);
	g_assert_cmpstr(buf, ==, "h:9");
	net_format_server_pool(buf, sizeof(buf), "h", 0, "");
	g_assert_cmpstr(buf, ==, "h:" G_STRINGIFY(PROTO_DEFAULT_PORT));
	net_format_server_pool(buf, sizeof(buf), "::1", 7471, "db");
	g_assert_cmpstr(buf, ==, "[::1]:7471/db");
	/* cut short: the length it needed */
	g_assert_cmpint(net_format_server_pool(buf, 8, "host", 7471, "pool"), ==, 14);
	g_assert_cmpstr(buf, ==, "host:74");
}

static void test_net_connect(void)
{
	char msg[] = "hello, rmemfs";
	char buf[sizeof(msg)];
	struct iovec iov[3];
	int lfd, cfd, sfd, port, busy;

	lfd = net_listen(NULL, 0, 4);
	g_assert_cmpint(lfd, >=, 0);
	g_assert_cmpint(fcntl(lfd, F_GETFD) & FD_CLOEXEC, !=, 0);
	port = net_local_port(lfd);
	g_assert_cmpint(port, >, 0);

	/* the same port again: busy */
	busy = net_listen("127.0.0.1", port, 4);
	g_assert_cmpint(busy, ==, -EADDRINUSE);
	/* an address this host does not have */
	busy = net_listen("192.0.2.1", 0, 4);
	g_assert_cmpint(busy, ==, -EADDRNOTAVAIL);

	cfd = net_connect("127.0.0.1", port, 2000);
	g_assert_cmpint(cfd, >=, 0);
	g_assert_cmpint(fcntl(cfd, F_GETFD) & FD_CLOEXEC, !=, 0);
	sfd = accept(lfd, NULL, NULL);
	g_assert_cmpint(sfd, >=, 0);

	g_assert_cmpint(net_write_full(cfd, msg, sizeof(msg)), ==, 0);
	g_assert_cmpint(net_read_full(sfd, buf, sizeof(buf)), ==, 0);
	g_assert_cmpstr(buf, ==, msg);

	iov[0] = (struct iovec){ .iov_base = msg, .iov_len = 5 };
	iov[1] = (struct iovec){ .iov_base = NULL, .iov_len = 0 };
	iov[2] = (struct iovec){ .iov_base = msg + 5, .iov_len = sizeof(msg) - 5 };
	memset(buf, 0, sizeof(buf));
	g_assert_cmpint(net_writev_full(sfd, iov, 3), ==, 0);
	g_assert_cmpint(net_read_full(cfd, buf, sizeof(buf)), ==, 0);
	g_assert_cmpstr(buf, ==, msg);

	/* EOF in the middle of a message */
	g_assert_cmpint(net_write_full(sfd, msg, 3), ==, 0);
	close(sfd);
	g_assert_cmpint(net_read_full(cfd, buf, sizeof(buf)), ==, -ECONNRESET);
	close(cfd);
	close(lfd);

	/* nobody listens there any more */
	cfd = net_connect("127.0.0.1", port, 2000);
	g_assert_cmpint(cfd, ==, -ECONNREFUSED);
	cfd = net_connect("no-such-host.invalid", port, 2000);
	g_assert_cmpint(cfd, <, 0);
}

int main(int argc, char **argv)
{
	g_test_init(&argc, &argv, NULL);
	g_test_add_func("/proto/wire-sizes", test_wire_sizes);
	g_test_add_func("/proto/hdr/roundtrip", test_hdr_roundtrip);
	g_test_add_func("/proto/hdr/limits", test_hdr_limits);
	g_test_add_func("/proto/hdr/malformed", test_hdr_malformed);
	g_test_add_func("/proto/status-table", test_status_table);
	g_test_add_func("/proto/type-str", test_type_str);
	g_test_add_func("/proto/hello", test_hello);
	g_test_add_func("/proto/hello-pool", test_hello_pool);
	g_test_add_func("/proto/pool-names", test_pool_names);
	g_test_add_func("/proto/qp-exchange", test_qp_exchange);
	g_test_add_func("/proto/pool-admin", test_pool_admin);
	g_test_add_func("/proto/pool-list", test_pool_list);
	g_test_add_func("/proto/fence", test_fence);
	g_test_add_func("/proto/rw", test_rw);
	g_test_add_func("/proto/atomic", test_atomic);
	g_test_add_func("/proto/qp-info", test_qp_info);
	g_test_add_func("/proto/stats", test_stats);
	g_test_add_func("/proto/cm-priv", test_cm_priv);
	g_test_add_func("/proto/pool/roundtrip", test_pool_roundtrip);
	g_test_add_func("/proto/pool/max-regions", test_pool_max_regions);
	g_test_add_func("/proto/pool/malformed", test_pool_malformed);
	g_test_add_func("/proto/pool/resolve", test_pool_resolve);
	g_test_add_func("/proto/token/hash", test_token_hash);
	g_test_add_func("/proto/token/load", test_token_load);
	g_test_add_func("/units/parse", test_units_parse);
	g_test_add_func("/units/format", test_units_format);
	g_test_add_func("/net/loopback", test_net_loopback);
	g_test_add_func("/net/connect", test_net_connect);
	g_test_add_func("/net/parse-server-pool", test_net_parse_server_pool);
	g_test_add_func("/net/format-server-pool", test_net_format_server_pool);
	return g_test_run();
}
