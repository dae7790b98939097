/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * test_poolctl.c - unit tests for common/poolctl.c against a fake memserver:
 * a thread on a loopback port that reads each request, checks it, and
 * answers what the test scripted (a status, a payload, a wrong id, silence,
 * or a close). What a real memserver does with the messages is
 * tests/test_memserver_ctl.py's job; here it is the client side: what goes on
 * the wire, and how every kind of answer comes back.
 */
#define G_LOG_DOMAIN "rmemfs-test-poolctl"

#include <endian.h>
#include <errno.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include <glib.h>

#include "clock.h"
#include "net.h"
#include "poolctl.h"
#include "proto.h"

#define T_TIMEOUT_MS 5000

enum fake_action {
	FAKE_ANSWER, /* status and payload as given */
	FAKE_WRONG_ID, /* an OK answer with another id */
	FAKE_SILENT, /* read the request, answer nothing, keep the socket open */
	FAKE_CLOSE, /* read the request, close */
};

/* one scripted step: what the fake expects and what it answers */
struct fake_step {
	uint16_t type; /* the request type it expects */
	enum fake_action action;
	uint32_t status;
	const void *payload;
	uint32_t len;
};

struct fake {
	int lfd;
	uint16_t port;
	GThread *thread;
	const struct fake_step *steps;
	unsigned int nsteps;
	/* what the requests carried, for the test to look at after the join */
	struct proto_hello hello;
	char name[PROTO_POOL_NAME_MAX];
	uint64_t create_size;
	uint32_t delete_flags;
	unsigned int served;
	bool bad; /* a request was not what the step expected */
};

static void fake_check(struct fake *f, uint16_t type, const void *buf, uint32_t len)
{
	int rc = 0;

	switch (type) {
	case PROTO_HELLO:
		rc = proto_hello_unpack(buf, len, &f->hello);
		break;
	case PROTO_POOL_CREATE:
		rc = proto_pool_sel_unpack(buf, len, f->name, &f->create_size);
		break;
	case PROTO_POOL_DELETE:
		rc = proto_pool_delete_unpack(buf, len, f->name, &f->delete_flags);
		break;
	default:
		rc = len ? -EBADMSG : 0;
		break;
	}
	if (rc)
		f->bad = true;
}

static gpointer fake_thread(gpointer data)
{
	struct fake *f = data;
	int64_t deadline = clock_now_us() + 2 * T_TIMEOUT_MS * 1000LL;
	int fd = accept(f->lfd, NULL, NULL);
	unsigned int i;

	if (fd < 0) {
		f->bad = true;
		return NULL;
	}
	for (i = 0; i < f->nsteps; i++) {
		const struct fake_step *s = &f->steps[i];
		struct proto_hdr h;
		struct proto_msg m;
		struct iovec iov[2];
		uint8_t buf[512];

		iov[0] = (struct iovec){ .iov_base = &h, .iov_len = sizeof(h) };
		if (net_io_full(fd, iov, 1, false, deadline) || proto_hdr_unpack(&h, &m) ||
		    m.type != s->type || m.len > sizeof(buf)) {
			f->bad = true;
			break;
		}
		iov[0] = (struct iovec){ .iov_base = buf, .iov_len = m.len };
		if (net_io_full(fd, iov, 1, false, deadline)) {
			f->bad = true;
			break;
		}
		fake_check(f, m.type, buf, m.len);
		f->served++;
		if (s->action == FAKE_CLOSE)
			break;
		if (s->action == FAKE_SILENT) {
			/* until the client gives up and closes */
			iov[0] = (struct iovec){ .iov_base = buf, .iov_len = 1 };
			net_io_full(fd, iov, 1, false, deadline);
			break;
		}
		proto_hdr_pack(&h, m.type | PROTO_RESPONSE, s->status, s->len,
			       s->action == FAKE_WRONG_ID ? m.id + 1 : m.id);
		iov[0] = (struct iovec){ .iov_base = &h, .iov_len = sizeof(h) };
		iov[1] = (struct iovec){ .iov_base = (void *)s->payload, .iov_len = s->len };
		if (net_io_full(fd, iov, 2, true, deadline)) {
			f->bad = true;
			break;
		}
	}
	close(fd);
	return NULL;
}

static void fake_start(struct fake *f, const struct fake_step *steps, unsigned int nsteps)
{
	int rc;

	memset(f, 0, sizeof(*f));
	f->lfd = net_listen("127.0.0.1", 0, 4);
	g_assert_cmpint(f->lfd, >=, 0);
	rc = net_local_port(f->lfd);
	g_assert_cmpint(rc, >, 0);
	f->port = (uint16_t)rc;
	f->steps = steps;
	f->nsteps = nsteps;
	f->thread = g_thread_new("fake-memserver", fake_thread, f);
}

/* join the fake; it must have served `served` requests, each as expected */
static void fake_stop(struct fake *f, unsigned int served)
{
	g_thread_join(f->thread);
	close(f->lfd);
	g_assert_false(f->bad);
	g_assert_cmpuint(f->served, ==, served);
}

static const struct fake_step hello_ok = { PROTO_HELLO, FAKE_ANSWER, PROTO_OK, NULL, 0 };

/* HELLO carries the control flag and the token; then every call and its wire form */
static void test_session(void)
{
	static const struct proto_pool_info pools[2] = {
		{ .name = "", .owner = "", .size = 1 << 30, .resident = 4096, .pool_id = 7,
		  .clients = 1, .flags = PROTO_POOL_PERSISTENT },
		{ .name = "alpha", .owner = "tenant1", .size = 64 << 20, .pool_id = 9,
		  .client_id = 0x1234, .clients = 2, .flags = PROTO_POOL_DELETING },
	};
	struct proto_pool_list l = { .capacity = 8ULL << 30, .free = 3ULL << 30, .npools = 2,
				     .pools = (struct proto_pool_info *)pools };
	struct proto_stats st = { .clients_now = 3, .reads = 11, .bytes_written = 99 };
	struct proto_stats_wire stw;
	uint8_t lbuf[1024];
	ssize_t llen = proto_pool_list_pack(&l, lbuf, sizeof(lbuf));
	uint8_t token[PROTO_TOKEN_HASH_LEN];
	struct proto_pool_list got;
	struct proto_stats gst;
	struct fake f;
	int fd = -1;

	g_assert_cmpint(llen, >, 0);
	proto_stats_pack(&stw, &st);
	proto_token_hash("secret", 6, token);
	{
		const struct fake_step steps[] = {
			hello_ok,
			{ PROTO_POOL_LIST, FAKE_ANSWER, PROTO_OK, lbuf, (uint32_t)llen },
			{ PROTO_POOL_CREATE, FAKE_ANSWER, PROTO_OK, NULL, 0 },
			{ PROTO_POOL_DELETE, FAKE_ANSWER, PROTO_OK, NULL, 0 },
			{ PROTO_STATS, FAKE_ANSWER, PROTO_OK, &stw, sizeof(stw) },
		};

		fake_start(&f, steps, G_N_ELEMENTS(steps));
		g_assert_cmpint(poolctl_open("127.0.0.1", f.port, token, T_TIMEOUT_MS, &fd), ==, 0);
		g_assert_cmpint(poolctl_list(fd, T_TIMEOUT_MS, &got), ==, 0);
		g_assert_cmpuint(got.capacity, ==, 8ULL << 30);
		g_assert_cmpuint(got.free, ==, 3ULL << 30);
		g_assert_cmpuint(got.npools, ==, 2);
		g_assert_cmpstr(got.pools[0].name, ==, "");
		g_assert_cmpuint(got.pools[0].resident, ==, 4096);
		g_assert_cmpstr(got.pools[1].name, ==, "alpha");
		g_assert_cmpstr(got.pools[1].owner, ==, "tenant1");
		g_assert_cmpuint(got.pools[1].client_id, ==, 0x1234);
		g_assert_cmpuint(got.pools[1].clients, ==, 2);
		g_assert_cmpuint(got.pools[1].flags, ==, PROTO_POOL_DELETING);
		proto_pool_list_clear(&got);
		g_assert_cmpint(poolctl_create(fd, T_TIMEOUT_MS, "beta", 5 << 20), ==, 0);
		g_assert_cmpint(poolctl_delete(fd, T_TIMEOUT_MS, "gamma", true), ==, 0);
		g_assert_cmpint(poolctl_stats(fd, T_TIMEOUT_MS, &gst), ==, 0);
		g_assert_cmpmem(&gst, sizeof(gst), &st, sizeof(st));
		poolctl_close(fd);
		fake_stop(&f, G_N_ELEMENTS(steps));
	}
	g_assert_true(f.hello.control);
	g_assert_cmpstr(f.hello.pool, ==, "");
	g_assert_cmpmem(f.hello.token_hash, PROTO_TOKEN_HASH_LEN, token, PROTO_TOKEN_HASH_LEN);
	/* the last named pool the fake saw is the delete's; create's size came before it */
	g_assert_cmpstr(f.name, ==, "gamma");
	g_assert_cmpuint(f.create_size, ==, 5 << 20);
	g_assert_cmpuint(f.delete_flags, ==, PROTO_POOL_DELETE_FORCE);
}

/* no token: the hash is all zeroes; delete without force sends no flag */
static void test_no_token(void)
{
	const struct fake_step steps[] = {
		hello_ok,
		{ PROTO_POOL_DELETE, FAKE_ANSWER, PROTO_OK, NULL, 0 },
	};
	static const uint8_t zero[PROTO_TOKEN_HASH_LEN];
	struct fake f;
	int fd = -1;

	fake_start(&f, steps, G_N_ELEMENTS(steps));
	g_assert_cmpint(poolctl_open("127.0.0.1", f.port, NULL, T_TIMEOUT_MS, &fd), ==, 0);
	g_assert_cmpint(poolctl_delete(fd, T_TIMEOUT_MS, "p", false), ==, 0);
	poolctl_close(fd);
	fake_stop(&f, 2);
	g_assert_cmpmem(f.hello.token_hash, PROTO_TOKEN_HASH_LEN, zero, PROTO_TOKEN_HASH_LEN);
	g_assert_cmpuint(f.delete_flags, ==, 0);
}

/* how HELLO's refusals come back from poolctl_open */
static void test_open_refused(void)
{
	static const struct {
		struct fake_step step;
		int want;
	} cases[] = {
		{ { PROTO_HELLO, FAKE_ANSWER, PROTO_E_AUTH, NULL, 0 }, -EPERM },
		/* a memserver that refuses the control flag */
		{ { PROTO_HELLO, FAKE_ANSWER, PROTO_E_MALFORMED, NULL, 0 }, -EBADMSG },
		/* one that ignores it and serves a pool: a descriptor where nothing belongs */
		{ { PROTO_HELLO, FAKE_ANSWER, PROTO_OK, "descriptor", 10 }, -EBADMSG },
		{ { PROTO_HELLO, FAKE_WRONG_ID, PROTO_OK, NULL, 0 }, -EBADMSG },
		{ { PROTO_HELLO, FAKE_CLOSE, 0, NULL, 0 }, -ECONNRESET },
	};

	for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
		struct fake f;
		int fd = -1;

		fake_start(&f, &cases[i].step, 1);
		g_assert_cmpint(poolctl_open("127.0.0.1", f.port, NULL, T_TIMEOUT_MS, &fd), ==,
				cases[i].want);
		g_assert_cmpint(fd, ==, -1);
		fake_stop(&f, 1);
	}
}

/* a status is the call's -errno and the session stays usable */
static void test_status(void)
{
	static const struct {
		uint32_t status;
		int want;
	} cases[] = {
		{ PROTO_E_NOSPACE, -ENOSPC }, { PROTO_E_EXIST, -EEXIST },
		{ PROTO_E_NOPOOL, -ENOENT },  { PROTO_E_BUSY, -EBUSY },
		{ PROTO_E_DENIED, -EKEYREJECTED }, { PROTO_E_STATE, -EPROTO },
	};
	struct fake_step steps[G_N_ELEMENTS(cases) + 2];
	struct proto_pool_list l = { .capacity = 1 << 20, .free = 1 << 20 };
	uint8_t lbuf[64];
	ssize_t llen = proto_pool_list_pack(&l, lbuf, sizeof(lbuf));
	struct proto_pool_list got;
	struct fake f;
	int fd = -1;
	size_t i;

	steps[0] = hello_ok;
	for (i = 0; i < G_N_ELEMENTS(cases); i++)
		steps[i + 1] = (struct fake_step){ PROTO_POOL_CREATE, FAKE_ANSWER, cases[i].status,
						   NULL, 0 };
	steps[i + 1] = (struct fake_step){ PROTO_POOL_LIST, FAKE_ANSWER, PROTO_OK, lbuf,
					   (uint32_t)llen };
	fake_start(&f, steps, G_N_ELEMENTS(steps));
	g_assert_cmpint(poolctl_open("127.0.0.1", f.port, NULL, T_TIMEOUT_MS, &fd), ==, 0);
	for (i = 0; i < G_N_ELEMENTS(cases); i++)
		g_assert_cmpint(poolctl_create(fd, T_TIMEOUT_MS, "p", 1 << 20), ==, cases[i].want);
	g_assert_cmpint(poolctl_list(fd, T_TIMEOUT_MS, &got), ==, 0);
	g_assert_cmpuint(got.npools, ==, 0);
	g_assert_cmpuint(got.capacity, ==, 1 << 20);
	proto_pool_list_clear(&got);
	poolctl_close(fd);
	fake_stop(&f, G_N_ELEMENTS(steps));
}

/* answers that do not answer: wrong id, payload on an empty answer, a bad list */
static void test_bad_answers(void)
{
	static const char junk[] = "not a pool list";
	static const struct {
		struct fake_step step;
		int want;
	} cases[] = {
		{ { PROTO_POOL_CREATE, FAKE_WRONG_ID, PROTO_OK, NULL, 0 }, -EBADE },
		{ { PROTO_POOL_CREATE, FAKE_ANSWER, PROTO_OK, "x", 1 }, -EBADE },
		{ { PROTO_POOL_LIST, FAKE_ANSWER, PROTO_OK, junk, sizeof(junk) }, -EBADE },
		{ { PROTO_STATS, FAKE_ANSWER, PROTO_OK, junk, sizeof(junk) }, -EBADE },
		{ { PROTO_POOL_CREATE, FAKE_CLOSE, 0, NULL, 0 }, -ECONNRESET },
	};

	for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
		const struct fake_step steps[] = { hello_ok, cases[i].step };
		struct proto_pool_list l;
		struct proto_stats st;
		struct fake f;
		int fd = -1, rc;

		fake_start(&f, steps, 2);
		g_assert_cmpint(poolctl_open("127.0.0.1", f.port, NULL, T_TIMEOUT_MS, &fd), ==, 0);
		switch (cases[i].step.type) {
		case PROTO_POOL_LIST:
			rc = poolctl_list(fd, T_TIMEOUT_MS, &l);
			g_assert_cmpuint(l.npools, ==, 0);
			g_assert_null(l.pools);
			break;
		case PROTO_STATS:
			rc = poolctl_stats(fd, T_TIMEOUT_MS, &st);
			break;
		default:
			rc = poolctl_create(fd, T_TIMEOUT_MS, "p", 1 << 20);
			break;
		}
		g_assert_cmpint(rc, ==, cases[i].want);
		poolctl_close(fd);
		fake_stop(&f, 2);
	}
}

/* a server that stops answering: the call gives up at its timeout, not later */
static void test_timeout(void)
{
	const struct fake_step steps[] = {
		hello_ok,
		{ PROTO_STATS, FAKE_SILENT, 0, NULL, 0 },
	};
	struct proto_stats st;
	struct fake f;
	int64_t t0;
	int fd = -1;

	fake_start(&f, steps, 2);
	g_assert_cmpint(poolctl_open("127.0.0.1", f.port, NULL, T_TIMEOUT_MS, &fd), ==, 0);
	t0 = clock_now_ms();
	g_assert_cmpint(poolctl_stats(fd, 200, &st), ==, -ETIMEDOUT);
	g_assert_cmpint(clock_now_ms() - t0, >=, 190);
	g_assert_cmpint(clock_now_ms() - t0, <, 3000);
	poolctl_close(fd);
	fake_stop(&f, 2);
}

/* bad arguments never reach the wire; nobody listening is -ECONNREFUSED */
static void test_local_refusals(void)
{
	const struct fake_step steps[] = { hello_ok };
	struct fake f;
	int fd = -1, port;

	fake_start(&f, steps, 1);
	g_assert_cmpint(poolctl_open("127.0.0.1", f.port, NULL, T_TIMEOUT_MS, &fd), ==, 0);
	g_assert_cmpint(poolctl_create(fd, T_TIMEOUT_MS, "", 1 << 20), ==, -EINVAL);
	g_assert_cmpint(poolctl_create(fd, T_TIMEOUT_MS, "-x", 1 << 20), ==, -EINVAL);
	g_assert_cmpint(poolctl_create(fd, T_TIMEOUT_MS, "ok", 0), ==, -EINVAL);
	g_assert_cmpint(poolctl_create(fd, T_TIMEOUT_MS, "a-name-of-thirty-two-characterss", 1),
			==, -EINVAL);
	g_assert_cmpint(poolctl_delete(fd, T_TIMEOUT_MS, "a/b", false), ==, -EINVAL);
	poolctl_close(fd);
	port = f.port;
	fake_stop(&f, 1); /* the fake saw the HELLO only */
	g_assert_cmpint(poolctl_open("127.0.0.1", (uint16_t)port, NULL, T_TIMEOUT_MS, &fd), ==,
			-ECONNREFUSED);
	poolctl_close(-1);
}

int main(int argc, char **argv)
{
	g_test_init(&argc, &argv, NULL);
	g_test_add_func("/poolctl/session", test_session);
	g_test_add_func("/poolctl/no-token", test_no_token);
	g_test_add_func("/poolctl/open-refused", test_open_refused);
	g_test_add_func("/poolctl/status", test_status);
	g_test_add_func("/poolctl/bad-answers", test_bad_answers);
	g_test_add_func("/poolctl/timeout", test_timeout);
	g_test_add_func("/poolctl/local-refusals", test_local_refusals);
	return g_test_run();
}
