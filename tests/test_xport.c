/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * test_xport.c - integration tests of the transport contract (common/xport.h)
 * against a real memserver.
 *
 * Each test case starts its own memserver ($RMEM_BUILD_DIR/memserver/memserver
 * --port 0, G_DEBUG=fatal-warnings) and reads the real port from its ready
 * line; teardown stops it and checks that it exited cleanly. The server is
 * spawned with PR_SET_PDEATHSIG, so it dies with this process even when an
 * assertion aborts the test before teardown runs.
 *
 * Environment: RMEM_TEST_TRANSPORT picks the transport ("tcp" by default;
 * "rdma" and "auto" run the same cases), RMEM_TEST_HOST the address the server
 * listens on and clients connect to (127.0.0.1 by default), RMEM_TEST_RDMA_OOB=1
 * the RDMA out-of-band QP path (xport_params.rdma_oob_qp); that path differs
 * only in how a QP comes up and goes down, so under it only the cases that
 * connect, authenticate, fence or lose the server run (the data-path cases
 * are the same verbs once the QP is up and are reported skipped). Expectations that
 * only hold for the TCP emulation (exact errno of a remote error, server-side
 * counters of one-sided ops, a stopped server process stalling I/O) are
 * checked only there.
 */
#define G_LOG_DOMAIN "rmemfs-test-xport"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <glib.h>
#include <glib/gstdio.h>

#include "clock.h"
#include "memserver_launch.h"
#include "net.h"
#include "proto.h"
#include "xport.h"

#define POOL_SIZE (64ULL << 20)
#define BUF_SIZE (48U << 20) /* registered local buffer of the fixture's client */
#define WAIT_MS 20000 /* upper bound of every wait in this file */
#define TOKEN "correct horse battery staple"

static char *build_dir;

struct server {
	GPid pid;
	bool running;
	bool stopped; /* SIGSTOPped by the test */
	bool killed; /* SIGKILLed by the test: no clean exit expected */
	uint16_t tcp_port;
	uint16_t rdma_port;
	char *dir; /* the token's */
	char *token_path;
};

struct fx_cfg {
	bool token;
};

struct fx {
	struct server srv;
	struct xport *x;
	struct xport_mr *mr;
	uint8_t *buf;
	uint64_t rng;
};

static const struct fx_cfg cfg_plain = { .token = false };
static const struct fx_cfg cfg_token = { .token = true };

/* ---- environment ---- */

static const char *test_transport(void)
{
	const char *t = g_getenv("RMEM_TEST_TRANSPORT");

	return t && *t ? t : "tcp";
}


static const char *test_host(void)
{
	const char *h = g_getenv("RMEM_TEST_HOST");

	return h && *h ? h : "127.0.0.1";
}

/* ---- random data ---- */

static uint64_t rng_next(uint64_t *s)
{
	/* xorshift64*: fast enough to fill megabytes, seeded from g_test_rand */
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 0x2545f4914f6cdd1dULL;
}

static uint64_t rng_range(uint64_t *s, uint64_t lo, uint64_t hi)
{
	return lo + rng_next(s) % (hi - lo + 1);
}

static void fill_random(uint64_t *s, void *buf, size_t len)
{
	uint8_t *p = buf;

	while (len >= 8) {
		uint64_t v = rng_next(s);

		memcpy(p, &v, 8);
		p += 8;
		len -= 8;
	}
	while (len--)
		*p++ = (uint8_t)rng_next(s);
}

/* ---- the memserver ---- */

static bool server_exited(struct server *srv, int *status)
{
	pid_t r = waitpid(srv->pid, status, WNOHANG);

	return r == srv->pid;
}

static void server_start(struct server *srv, bool token)
{
	const char *transport = test_transport();
	const char *args[12] = { "--size", "64M", "--listen", test_host(), "--port", "0",
				 "--transport" };
	struct memserver_proc ms;
	int n = 7;

	memset(srv, 0, sizeof(*srv));
	args[n++] = strcmp(transport, "rdma") == 0 ? "rdma" :
		    strcmp(transport, "tcp") == 0 ? "tcp" : "auto";
	if (token) {
		srv->dir = g_dir_make_tmp("rmem-test-xport-XXXXXX", NULL);
		g_assert_nonnull(srv->dir);
		srv->token_path = g_build_filename(srv->dir, "token", NULL);
		g_assert_true(g_file_set_contents(srv->token_path, TOKEN "\n", -1, NULL));
		args[n++] = "--token-file";
		args[n++] = srv->token_path;
	} else if (!net_is_loopback(test_host())) {
		args[n++] = "--insecure";
	}
	args[n] = NULL;
	memserver_launch(args, &ms);
	srv->pid = ms.pid;
	srv->tcp_port = ms.tcp_port;
	srv->rdma_port = ms.rdma_port;
	srv->running = true;
}

static void server_signal(struct server *srv, int sig)
{
	int status;

	g_assert_true(srv->running);
	g_assert_cmpint(kill(srv->pid, sig), ==, 0);
	if (sig == SIGSTOP) {
		/* wait until every thread has stopped */
		g_assert_cmpint(waitpid(srv->pid, &status, WUNTRACED), ==, srv->pid);
		g_assert_true(WIFSTOPPED(status));
		srv->stopped = true;
	}
	if (sig == SIGCONT)
		srv->stopped = false;
}

static void server_kill(struct server *srv)
{
	int status;

	server_signal(srv, SIGKILL);
	srv->killed = true;
	g_assert_cmpint(waitpid(srv->pid, &status, 0), ==, srv->pid);
	srv->running = false;
}

/* SIGTERM, wait; returns the wait status (SIGKILL after WAIT_MS) */
static int server_stop(struct server *srv)
{
	int64_t deadline = clock_now_ms() + WAIT_MS;
	int status = 0;

	if (!srv->running)
		return 0;
	if (srv->stopped)
		kill(srv->pid, SIGCONT);
	kill(srv->pid, SIGTERM);
	while (!server_exited(srv, &status)) {
		if (clock_now_ms() > deadline) {
			kill(srv->pid, SIGKILL);
			waitpid(srv->pid, &status, 0);
			status = -1;
			break;
		}
		g_usleep(2000);
	}
	srv->running = false;
	return status;
}

static void server_cleanup(struct server *srv)
{
	if (srv->token_path)
		g_unlink(srv->token_path);
	if (srv->dir)
		g_rmdir(srv->dir);
	g_free(srv->token_path);
	g_free(srv->dir);
	g_spawn_close_pid(srv->pid);
}

/* ---- clients ---- */

/* the fixture's client speaks TCP (also when "auto" picked it) */
static bool fx_is_tcp(const struct fx *f)
{
	return strcmp(xport_name(f->x), "tcp") == 0;
}

struct client_opts {
	const char *token; /* NULL: the fixture's token if it has one */
	bool no_token;
	unsigned int depth;
	enum xport_poll_mode mode;
	bool mode_set;
	int op_timeout_ms;
	uint64_t client_id;
};

/* RMEM_TEST_RDMA_OOB=1: bring RDMA QPs up by hand, parameters over TCP */
static bool oob_run(void)
{
	return g_strcmp0(g_getenv("RMEM_TEST_RDMA_OOB"), "1") == 0;
}

static int client_connect(struct fx *f, const struct client_opts *o, struct xport **out)
{
	struct xport_params p;
	const char *token = NULL;

	xport_params_init(&p);
	p.host = test_host();
	p.port = strcmp(test_transport(), "rdma") == 0 ? f->srv.rdma_port : f->srv.tcp_port;
	p.quiet = true;
	p.rdma_oob_qp = oob_run();
	if (o && o->token)
		token = o->token;
	else if (f->srv.token_path && !(o && o->no_token))
		token = TOKEN;
	if (token)
		proto_token_hash(token, strlen(token), p.token_hash);
	if (o && o->depth)
		p.queue_depth = o->depth;
	if (o && o->mode_set)
		p.poll_mode = o->mode;
	else
		p.poll_mode = XPORT_POLL_EVENT; /* 2 shared cores: do not spin */
	if (o && o->op_timeout_ms)
		p.op_timeout_ms = o->op_timeout_ms;
	if (o)
		p.client_id = o->client_id;
	return xport_connect(test_transport(), &p, out);
}

/* pool offset -> (raddr, rkey); the range must lie inside one region */
static void remote(struct xport *x, uint64_t off, uint64_t len, uint64_t *raddr, uint32_t *rkey)
{
	g_assert_cmpint(proto_pool_resolve(&x->pool, off, len, raddr, rkey), ==, 0);
}

/* a random offset for len bytes that resolves inside one region, 8-aligned if asked */
static uint64_t random_off(struct fx *f, struct xport *x, uint64_t lo, uint64_t hi, uint64_t len,
			   bool align8)
{
	for (int tries = 0; tries < 1000; tries++) {
		uint64_t off = rng_range(&f->rng, lo, hi - len);
		uint64_t raddr;
		uint32_t rkey;

		if (align8)
			off &= ~7ULL;
		if (proto_pool_resolve(&x->pool, off, len, &raddr, &rkey) == 0)
			return off;
	}
	g_assert_not_reached();
}

static struct xport_op op_rw(enum xport_op_type type, struct xport *x, struct xport_mr *mr,
			     void *local, uint32_t len, uint64_t off, uint64_t wr_id)
{
	struct xport_op op = {
		.type = type,
		.wr_id = wr_id,
		.mr = mr,
		.local = local,
		.len = len,
	};

	remote(x, off, len, &op.raddr, &op.rkey);
	return op;
}

/* reap exactly want completions (or fail the test after WAIT_MS) */
static void reap(struct xport *x, struct xport_cqe *cqes, unsigned int want)
{
	int64_t deadline = clock_now_ms() + WAIT_MS;
	unsigned int got = 0;

	while (got < want) {
		int n = xport_poll(x, cqes + got, want - got, 1000);

		g_assert_cmpint(n, >=, 0);
		got += n;
		g_assert_cmpint(clock_now_ms(), <, deadline);
	}
}

static void sync_write(struct xport *x, struct xport_mr *mr, const void *local, uint32_t len,
		       uint64_t off)
{
	uint64_t raddr;
	uint32_t rkey;

	remote(x, off, len, &raddr, &rkey);
	g_assert_cmpint(xport_write(x, mr, local, len, raddr, rkey), ==, 0);
}

static void sync_read(struct xport *x, struct xport_mr *mr, void *local, uint32_t len,
		      uint64_t off)
{
	uint64_t raddr;
	uint32_t rkey;

	remote(x, off, len, &raddr, &rkey);
	g_assert_cmpint(xport_read(x, mr, local, len, raddr, rkey), ==, 0);
}

static uint64_t remote_u64(struct xport *x, struct xport_mr *mr, uint64_t *scratch, uint64_t off)
{
	sync_read(x, mr, scratch, sizeof(*scratch), off);
	return *scratch;
}

/* ---- fixture ---- */

static void fx_setup(struct fx *f, gconstpointer data)
{
	const struct fx_cfg *cfg = data;
	int rc;

	memset(f, 0, sizeof(*f));
	f->rng = ((uint64_t)g_test_rand_int() << 32) | g_test_rand_int() | 1;
	server_start(&f->srv, cfg->token);
	rc = client_connect(f, NULL, &f->x);
	if (rc)
		g_error("connecting to the memserver: %s", g_strerror(-rc));
	g_assert_cmpuint(f->x->pool.size, ==, POOL_SIZE);
	g_assert_cmpuint(f->x->pool.nregions, >=, 1);
	f->buf = g_malloc(BUF_SIZE);
	g_assert_cmpint(xport_reg_mr(f->x, f->buf, BUF_SIZE, &f->mr), ==, 0);
}

static void fx_teardown(struct fx *f, gconstpointer data)
{
	int status;

	xport_dereg_mr(f->x, f->mr);
	xport_close(f->x);
	g_free(f->buf);
	if (f->srv.running) {
		status = server_stop(&f->srv);
		/* G_DEBUG=fatal-warnings: any g_warning in the server would show here */
		g_assert_true(WIFEXITED(status));
		g_assert_cmpint(WEXITSTATUS(status), ==, 0);
	}
	server_cleanup(&f->srv);
}

/* ---- cases ---- */

static void test_connect(struct fx *f, gconstpointer data)
{
	struct xport_params p;
	struct xport *x = NULL;
	uint64_t sum = 0;

	if (strcmp(test_transport(), "auto") != 0)
		g_assert_cmpstr(xport_name(f->x), ==, test_transport());
	for (uint32_t i = 0; i < f->x->pool.nregions; i++) {
		g_assert_cmpuint(f->x->pool.regions[i].len, >, 0);
		sum += f->x->pool.regions[i].len;
	}
	g_assert_cmpuint(sum, ==, POOL_SIZE);
	g_assert_cmpuint(xport_inflight(f->x), ==, 0);
	g_assert_true(xport_available("tcp"));
	g_assert_true(xport_available("auto"));
	g_assert_false(xport_available("carrier-pigeon"));

	xport_params_init(&p);
	p.host = test_host();
	p.port = f->srv.tcp_port;
	p.quiet = true;
	g_assert_cmpint(xport_connect("carrier-pigeon", &p, &x), ==, -EINVAL);
	if (!xport_available("rdma"))
		g_assert_cmpint(xport_connect("rdma", &p, &x), ==, -EPROTONOSUPPORT);
	p.host = NULL;
	g_assert_cmpint(xport_connect("tcp", &p, &x), ==, -EINVAL);
	g_assert_null(x);

	/* auto always finds a way to this server */
	p.host = test_host();
	g_assert_cmpint(xport_connect("auto", &p, &x), ==, 0);
	g_assert_cmpuint(x->pool.size, ==, POOL_SIZE);
	xport_close(x);
	xport_close(NULL);

	/* nobody listening */
	if (fx_is_tcp(f)) {
		int fd = net_listen(test_host(), 0, 1);

		g_assert_cmpint(fd, >=, 0);
		p.port = net_local_port(fd);
		close(fd);
		x = NULL;
		g_assert_cmpint(xport_connect("tcp", &p, &x), ==, -ECONNREFUSED);
		g_assert_null(x);
	}
}

/* verified WRITE then READ at many sizes and offsets, with guard bytes around each */
static void test_rw_sizes(struct fx *f, gconstpointer data)
{
	static const uint32_t fixed[] = {
		1, 2, 3, 7, 8, 9, 63, 64, 65, 511, 512, 4095, 4096, 4097, 65535, 65536,
		(1 << 20) - 1, 1 << 20, (1 << 20) + 1, 3 << 20, 4 << 20,
	};
	uint8_t *src = f->buf;
	uint8_t *dst = f->buf + (8 << 20);
	uint8_t *win = f->buf + (16 << 20);
	const unsigned int nrandom = 24;

	for (unsigned int i = 0; i < G_N_ELEMENTS(fixed) + nrandom; i++) {
		uint32_t len = i < G_N_ELEMENTS(fixed) ? fixed[i] :
							 (uint32_t)rng_range(&f->rng, 1, 4 << 20);
		uint64_t off = random_off(f, f->x, 64, POOL_SIZE - 64, len, false);
		uint32_t soff = (uint32_t)rng_range(&f->rng, 0, 4095);
		uint32_t doff = (uint32_t)rng_range(&f->rng, 0, 4095);
		uint64_t woff = off - 64;
		uint32_t wlen = len + 128;
		uint8_t before[64], after[64];

		/* the guard bytes as they are now */
		sync_read(f->x, f->mr, win, wlen, woff);
		memcpy(before, win, 64);
		memcpy(after, win + 64 + len, 64);

		fill_random(&f->rng, src + soff, len);
		sync_write(f->x, f->mr, src + soff, len, off);
		memset(dst + doff, 0, len);
		sync_read(f->x, f->mr, dst + doff, len, off);
		g_assert_cmpmem(dst + doff, len, src + soff, len);

		sync_read(f->x, f->mr, win, wlen, woff);
		g_assert_cmpmem(win, 64, before, 64);
		g_assert_cmpmem(win + 64, len, src + soff, len);
		g_assert_cmpmem(win + 64 + len, 64, after, 64);
	}

	/* the largest single op */
	fill_random(&f->rng, src, PROTO_MAX_IO);
	sync_write(f->x, f->mr, src, PROTO_MAX_IO, POOL_SIZE - PROTO_MAX_IO);
	memset(f->buf + (20 << 20), 0, PROTO_MAX_IO);
	sync_read(f->x, f->mr, f->buf + (20 << 20), PROTO_MAX_IO, POOL_SIZE - PROTO_MAX_IO);
	g_assert_true(memcmp(f->buf + (20 << 20), src, PROTO_MAX_IO) == 0);
}

/* one post of a full queue of WRITEs, then of READs; every wr_id completes once */
static void test_batch(struct fx *f, gconstpointer data)
{
	const unsigned int n = f->x->depth;
	const uint32_t slot = 64 << 10;
	struct xport_op *ops = g_new0(struct xport_op, n);
	struct xport_cqe *cqes = g_new0(struct xport_cqe, n);
	uint32_t *lens = g_new(uint32_t, n);
	bool *seen = g_new0(bool, n);
	uint8_t *src = f->buf, *dst = f->buf + (16 << 20);
	uint64_t *olds = (uint64_t *)(f->buf + (40 << 20));
	uint64_t counter_off = POOL_SIZE - 4096;
	uint64_t *scratch = (uint64_t *)(f->buf + (44 << 20));

	g_assert_cmpuint((uint64_t)n * slot, <=, 16 << 20);
	fill_random(&f->rng, src, (size_t)n * slot);
	for (unsigned int i = 0; i < n; i++) {
		lens[i] = (uint32_t)rng_range(&f->rng, 1, slot);
		ops[i] = op_rw(XPORT_WRITE, f->x, f->mr, src + i * slot, lens[i],
			       (uint64_t)i * slot, 1000 + i);
	}
	g_assert_cmpint(xport_post(f->x, ops, n), ==, 0);
	g_assert_cmpuint(xport_inflight(f->x), ==, n);
	/* the queue is full: one more is refused, and nothing is posted */
	g_assert_cmpint(xport_post(f->x, ops, 1), ==, -EAGAIN);
	reap(f->x, cqes, n);
	for (unsigned int i = 0; i < n; i++) {
		g_assert_cmpint(cqes[i].status, ==, 0);
		g_assert_cmpint(cqes[i].type, ==, XPORT_WRITE);
		g_assert_cmpuint(cqes[i].wr_id, >=, 1000);
		g_assert_cmpuint(cqes[i].wr_id, <, 1000 + n);
		g_assert_false(seen[cqes[i].wr_id - 1000]);
		seen[cqes[i].wr_id - 1000] = true;
	}
	g_assert_cmpuint(xport_inflight(f->x), ==, 0);
	g_assert_cmpint(xport_poll(f->x, cqes, n, 0), ==, 0);

	memset(dst, 0, (size_t)n * slot);
	memset(seen, 0, n * sizeof(*seen));
	for (unsigned int i = 0; i < n; i++)
		ops[i] = op_rw(XPORT_READ, f->x, f->mr, dst + i * slot, lens[i],
			       (uint64_t)i * slot, i);
	g_assert_cmpint(xport_post(f->x, ops, n), ==, 0);
	reap(f->x, cqes, n);
	for (unsigned int i = 0; i < n; i++) {
		g_assert_cmpint(cqes[i].status, ==, 0);
		g_assert_cmpint(cqes[i].type, ==, XPORT_READ);
		g_assert_false(seen[cqes[i].wr_id]);
		seen[cqes[i].wr_id] = true;
	}
	for (unsigned int i = 0; i < n; i++)
		g_assert_cmpmem(dst + i * slot, lens[i], src + i * slot, lens[i]);

	/* a batch of FETCH_ADDs on one word: every old value 0..k-1 exactly once */
	*scratch = 0;
	sync_write(f->x, f->mr, scratch, 8, counter_off);
	memset(seen, 0, n * sizeof(*seen));
	for (unsigned int i = 0; i < n; i++) {
		ops[i] = (struct xport_op){ .type = XPORT_FETCH_ADD, .wr_id = i, .mr = f->mr,
					    .local = &olds[i], .compare_add = 1 };
		remote(f->x, counter_off, 8, &ops[i].raddr, &ops[i].rkey);
	}
	g_assert_cmpint(xport_post(f->x, ops, n), ==, 0);
	reap(f->x, cqes, n);
	for (unsigned int i = 0; i < n; i++) {
		g_assert_cmpint(cqes[i].status, ==, 0);
		g_assert_cmpint(cqes[i].type, ==, XPORT_FETCH_ADD);
		g_assert_cmpuint(olds[i], <, n);
		g_assert_false(seen[olds[i]]);
		seen[olds[i]] = true;
	}
	g_assert_cmpuint(remote_u64(f->x, f->mr, scratch, counter_off), ==, n);

	/* n ops through the synchronous helper with a small queue: posted in chunks */
	{
		struct client_opts o = { .depth = 4 };
		struct xport *x2;
		struct xport_mr *mr2;

		g_assert_cmpint(client_connect(f, &o, &x2), ==, 0);
		g_assert_cmpint(xport_reg_mr(x2, f->buf, BUF_SIZE, &mr2), ==, 0);
		memset(dst, 0, (size_t)n * slot);
		for (unsigned int i = 0; i < n; i++) {
			ops[i] = op_rw(XPORT_READ, x2, mr2, dst + i * slot, lens[i],
				       (uint64_t)i * slot, i);
			ops[i].flags = i % 2 ? XPORT_OP_UNSIGNALED : 0;
		}
		g_assert_cmpint(xport_post(x2, ops, 5), ==, -EINVAL); /* above its depth */
		g_assert_cmpint(xport_run(x2, ops, n), ==, 0);
		g_assert_cmpuint(xport_inflight(x2), ==, 0);
		for (unsigned int i = 0; i < n; i++)
			g_assert_cmpmem(dst + i * slot, lens[i], src + i * slot, lens[i]);
		xport_dereg_mr(x2, mr2);
		xport_close(x2);
	}

	g_free(seen);
	g_free(lens);
	g_free(cqes);
	g_free(ops);
}

struct pipe_rec {
	uint64_t off;
	uint32_t len;
	uint8_t *local;
	enum xport_op_type type;
};

/*
 * Keep the queue full: post small random batches until -EAGAIN, reap, repeat.
 * Phase 1 WRITEs random chunks covering area A; phase 2 READs random ranges of
 * A (verified against the shadow) while WRITing area B; then B is verified.
 */
static void test_pipeline(struct fx *f, gconstpointer data)
{
	enum { depth = 32, total = 3000 };
	const uint64_t area = 16 << 20, b_base = 32 << 20;
	const uint32_t slot = 128 << 10;
	struct client_opts o = { .depth = depth };
	uint8_t *shadow_a = f->buf, *shadow_b = f->buf + area;
	uint8_t *slots = f->buf + 2 * area;
	struct pipe_rec recs[depth];
	bool busy[depth];
	struct xport_cqe cqes[depth];
	struct xport *x;
	struct xport_mr *mr;
	unsigned int eagain = 0, max_inflight = 0;
	uint64_t pos = 0, b_pos = 0;
	unsigned int done = 0, issued = 0;
	int64_t deadline = clock_now_ms() + WAIT_MS * 3;
	uint64_t raddr;
	uint32_t rkey;

	g_assert_cmpint(client_connect(f, &o, &x), ==, 0);
	g_assert_cmpint(xport_reg_mr(x, f->buf, BUF_SIZE, &mr), ==, 0);
	fill_random(&f->rng, shadow_a, area);
	fill_random(&f->rng, shadow_b, area);

	/* phase 1: write A in random-sized chunks, pipelined */
	while (pos < area || xport_inflight(x)) {
		struct xport_op ops[8];
		unsigned int k = 0, want = (unsigned int)rng_range(&f->rng, 1, 8);
		int rc;

		while (k < want && pos < area) {
			uint32_t len = (uint32_t)MIN(rng_range(&f->rng, 1, 256 << 10), area - pos);

			/* keep each chunk inside one region */
			while (proto_pool_resolve(&x->pool, pos, len, &raddr, &rkey))
				len /= 2;
			ops[k] = op_rw(XPORT_WRITE, x, mr, shadow_a + pos, len, pos, pos);
			pos += len;
			k++;
		}
		rc = k ? xport_post(x, ops, k) : -EAGAIN;
		if (rc == -EAGAIN) {
			unsigned int room = depth - xport_inflight(x);

			if (k) {
				/* nothing was posted: fill exactly the free slots instead */
				g_assert_cmpuint(room, <, k);
				eagain++;
				for (unsigned int i = room; i < k; i++)
					pos -= ops[i].len;
				if (room)
					g_assert_cmpint(xport_post(x, ops, room), ==, 0);
			}
			max_inflight = MAX(max_inflight, xport_inflight(x));
			rc = xport_poll(x, cqes, depth, 1000);
			g_assert_cmpint(rc, >=, 0);
			for (int i = 0; i < rc; i++)
				g_assert_cmpint(cqes[i].status, ==, 0);
		} else {
			g_assert_cmpint(rc, ==, 0);
		}
		g_assert_cmpint(clock_now_ms(), <, deadline);
	}
	g_assert_cmpuint(eagain, >, 0);
	g_assert_cmpuint(max_inflight, ==, depth);

	/* phase 2: verified READs of A mixed with WRITEs of B */
	memset(busy, 0, sizeof(busy));
	while (done < total) {
		int rc;

		if (issued < total) {
			struct xport_op ops[8];
			unsigned int free_slots[8];
			unsigned int k = 0, want = (unsigned int)rng_range(&f->rng, 1, 8);

			for (unsigned int s = 0; s < depth && k < want && issued + k < total; s++) {
				struct pipe_rec *r = &recs[s];
				bool taken = busy[s];

				for (unsigned int j = 0; j < k; j++)
					taken = taken || free_slots[j] == s;
				if (taken)
					continue;
				if (b_pos < area && rng_range(&f->rng, 0, 3) == 0) {
					r->type = XPORT_WRITE;
					r->len = (uint32_t)MIN(rng_range(&f->rng, 1, 64 << 10),
							       area - b_pos);
					r->off = b_base + b_pos;
					r->local = shadow_b + b_pos;
				} else {
					r->type = XPORT_READ;
					r->len = (uint32_t)rng_range(&f->rng, 1, slot);
					r->off = random_off(f, x, 0, area, r->len, false);
					r->local = slots + (size_t)s * slot;
				}
				ops[k] = op_rw(r->type, x, mr, r->local, r->len, r->off, s);
				free_slots[k] = s;
				if (r->type == XPORT_WRITE)
					b_pos += r->len;
				k++;
			}
			rc = k ? xport_post(x, ops, k) : -EAGAIN;
			if (rc == 0) {
				for (unsigned int j = 0; j < k; j++)
					busy[free_slots[j]] = true;
				issued += k;
				continue;
			}
			g_assert_cmpint(rc, ==, -EAGAIN);
			/* undo the B cursor for writes that were not posted */
			for (unsigned int j = 0; j < k; j++) {
				if (recs[free_slots[j]].type == XPORT_WRITE)
					b_pos -= recs[free_slots[j]].len;
			}
			if (k)
				eagain++;
		}
		rc = xport_poll(x, cqes, depth, 1000);
		g_assert_cmpint(rc, >=, 0);
		for (int i = 0; i < rc; i++) {
			struct pipe_rec *r = &recs[cqes[i].wr_id];

			g_assert_cmpint(cqes[i].status, ==, 0);
			g_assert_true(busy[cqes[i].wr_id]);
			g_assert_cmpint(cqes[i].type, ==, r->type);
			if (r->type == XPORT_READ)
				g_assert_cmpmem(r->local, r->len, shadow_a + r->off, r->len);
			busy[cqes[i].wr_id] = false;
			done++;
		}
		g_assert_cmpint(clock_now_ms(), <, deadline);
	}
	g_assert_cmpuint(xport_inflight(x), ==, 0);

	/* what phase 2 wrote to B */
	for (uint64_t o2 = 0; o2 < b_pos; o2 += slot) {
		uint32_t len = (uint32_t)MIN(slot, b_pos - o2);

		sync_read(x, mr, slots, len, b_base + o2);
		g_assert_cmpmem(slots, len, shadow_b + o2, len);
	}
	xport_dereg_mr(x, mr);
	xport_close(x);
}

/*
 * Big READs and big WRITEs in one post: the server's READ responses fill our
 * receive buffer while we are still sending WRITE data, so post() must drain
 * responses while it waits for room to send (or the two sides deadlock).
 */
static void test_bulk_mix(struct fx *f, gconstpointer data)
{
	enum { half = 16 };
	const uint32_t mib = 1 << 20;
	const uint64_t b_off = 24ULL << 20;
	struct client_opts o = { .depth = 2 * half };
	struct xport_op ops[2 * half];
	struct xport_cqe cqes[2 * half];
	uint8_t *a = f->buf, *b = f->buf + half * mib, *shadow = f->buf + 2 * half * mib;
	struct xport *x;
	struct xport_mr *mr;

	g_assert_cmpint(client_connect(f, &o, &x), ==, 0);
	g_assert_cmpint(xport_reg_mr(x, f->buf, BUF_SIZE, &mr), ==, 0);
	fill_random(&f->rng, shadow, (size_t)half * mib);
	for (unsigned int i = 0; i < half; i++)
		sync_write(x, mr, shadow + i * mib, mib, (uint64_t)i * mib);

	for (int round = 0; round < 3; round++) {
		memset(a, 0, (size_t)half * mib);
		fill_random(&f->rng, b, (size_t)half * mib);
		for (unsigned int i = 0; i < half; i++) {
			ops[i] = op_rw(XPORT_READ, x, mr, a + i * mib, mib, (uint64_t)i * mib, i);
			ops[half + i] = op_rw(XPORT_WRITE, x, mr, b + i * mib, mib,
					      b_off + (uint64_t)i * mib, half + i);
		}
		g_assert_cmpint(xport_post(x, ops, 2 * half), ==, 0);
		reap(x, cqes, 2 * half);
		for (unsigned int i = 0; i < 2 * half; i++)
			g_assert_cmpint(cqes[i].status, ==, 0);
		g_assert_true(memcmp(a, shadow, (size_t)half * mib) == 0);
		/* what was written, read back into a */
		for (unsigned int i = 0; i < half; i++)
			sync_read(x, mr, a + i * mib, mib, b_off + (uint64_t)i * mib);
		g_assert_true(memcmp(a, b, (size_t)half * mib) == 0);
	}
	xport_dereg_mr(x, mr);
	xport_close(x);
}

/* unsignalled WRITEs report nothing; the signalled READ after them sees their data */
static void test_unsignaled(struct fx *f, gconstpointer data)
{
	const unsigned int n = 16;
	const uint32_t chunk = 4096;
	struct xport_op ops[17];
	struct xport_cqe cqes[17];
	uint8_t *src = f->buf, *dst = f->buf + (1 << 20);
	const uint64_t base = 5 << 20;

	fill_random(&f->rng, src, n * chunk);
	memset(dst, 0, n * chunk);
	for (unsigned int i = 0; i < n; i++) {
		ops[i] = op_rw(XPORT_WRITE, f->x, f->mr, src + i * chunk, chunk,
			       base + (uint64_t)i * chunk, 100 + i);
		ops[i].flags = XPORT_OP_UNSIGNALED | (i % 2 ? XPORT_OP_INLINE : 0);
	}
	ops[n] = op_rw(XPORT_READ, f->x, f->mr, dst, n * chunk, base, 4242);
	g_assert_cmpint(xport_post(f->x, ops, n + 1), ==, 0);
	g_assert_cmpuint(xport_inflight(f->x), ==, n + 1);
	reap(f->x, cqes, 1);
	g_assert_cmpuint(cqes[0].wr_id, ==, 4242);
	g_assert_cmpint(cqes[0].status, ==, 0);
	g_assert_cmpint(cqes[0].type, ==, XPORT_READ);
	g_assert_cmpmem(dst, n * chunk, src, n * chunk);
	g_assert_cmpint(xport_poll(f->x, cqes, 17, 50), ==, 0);
	g_assert_cmpuint(xport_inflight(f->x), ==, 0);

	/* only unsignalled ops in flight: poll returns 0 once they are all done */
	for (unsigned int i = 0; i < n; i++)
		src[i * chunk] ^= 0xff;
	g_assert_cmpint(xport_post(f->x, ops, n), ==, 0);
	{
		int64_t deadline = clock_now_ms() + WAIT_MS;

		while (xport_inflight(f->x)) {
			g_assert_cmpint(xport_poll(f->x, cqes, 17, 100), ==, 0);
			g_assert_cmpint(clock_now_ms(), <, deadline);
		}
	}
	sync_read(f->x, f->mr, dst, n * chunk, base);
	g_assert_cmpmem(dst, n * chunk, src, n * chunk);
}

static void test_atomics(struct fx *f, gconstpointer data)
{
	uint64_t *old = (uint64_t *)f->buf, *val = (uint64_t *)(f->buf + 64);
	const uint64_t off = 3 << 20;
	uint64_t raddr;
	uint32_t rkey;

	remote(f->x, off, 8, &raddr, &rkey);
	*val = 0x1122334455667788ULL;
	sync_write(f->x, f->mr, val, 8, off);

	/* CAS miss: old value back, memory unchanged */
	g_assert_cmpint(xport_cas(f->x, f->mr, old, raddr, rkey, 5, 6), ==, 0);
	g_assert_cmpuint(*old, ==, 0x1122334455667788ULL);
	g_assert_cmpuint(remote_u64(f->x, f->mr, val, off), ==, 0x1122334455667788ULL);

	/* CAS hit (the host-endian value written above is what CAS compares) */
	g_assert_cmpint(xport_cas(f->x, f->mr, old, raddr, rkey, 0x1122334455667788ULL, 42), ==,
			0);
	g_assert_cmpuint(*old, ==, 0x1122334455667788ULL);
	g_assert_cmpuint(remote_u64(f->x, f->mr, val, off), ==, 42);

	g_assert_cmpint(xport_fetch_add(f->x, f->mr, old, raddr, rkey, 5), ==, 0);
	g_assert_cmpuint(*old, ==, 42);
	g_assert_cmpint(xport_fetch_add(f->x, f->mr, old, raddr, rkey, UINT64_MAX), ==, 0);
	g_assert_cmpuint(*old, ==, 47);
	g_assert_cmpuint(remote_u64(f->x, f->mr, val, off), ==, 46);

	/* wrap-around */
	*val = UINT64_MAX;
	sync_write(f->x, f->mr, val, 8, off);
	g_assert_cmpint(xport_fetch_add(f->x, f->mr, old, raddr, rkey, 2), ==, 0);
	g_assert_cmpuint(*old, ==, UINT64_MAX);
	g_assert_cmpuint(remote_u64(f->x, f->mr, val, off), ==, 1);

	/* neighbours untouched */
	memset(f->buf + 4096, 0xab, 24);
	sync_write(f->x, f->mr, f->buf + 4096, 24, off - 8);
	g_assert_cmpint(xport_cas(f->x, f->mr, old, raddr, rkey, 0xababababababababULL, 0), ==,
			0);
	sync_read(f->x, f->mr, f->buf + 8192, 24, off - 8);
	g_assert_cmpmem(f->buf + 8192, 8, f->buf + 4096, 8);
	g_assert_cmpuint(*(uint64_t *)(f->buf + 8192 + 8), ==, 0);
	g_assert_cmpmem(f->buf + 8192 + 16, 8, f->buf + 4096, 8);

	/* the result slot may be unaligned in local memory */
	g_assert_cmpint(xport_fetch_add(f->x, f->mr, (uint64_t *)(f->buf + 1001), raddr, rkey, 7),
			==, 0);
	{
		uint64_t v;

		memcpy(&v, f->buf + 1001, 8);
		g_assert_cmpuint(v, ==, 0);
	}
}

#define THREADS 8
#define FA_PER_THREAD 1000
#define CAS_PER_THREAD 150
#define LOCK_PER_THREAD 60

struct atomic_thread {
	struct fx *f;
	unsigned int id;
	uint64_t olds[FA_PER_THREAD];
	uint64_t fa_off, cas_off, lock_off, data_off;
};

static gpointer atomic_thread_main(gpointer arg)
{
	struct atomic_thread *t = arg;
	uint64_t *scratch = g_malloc0(64);
	struct xport_mr *mr;
	struct xport *x;
	uint64_t raddr;
	uint32_t rkey;
	uint64_t guess = 0;

	g_assert_cmpint(client_connect(t->f, NULL, &x), ==, 0);
	g_assert_cmpint(xport_reg_mr(x, scratch, 64, &mr), ==, 0);

	remote(x, t->fa_off, 8, &raddr, &rkey);
	for (unsigned int i = 0; i < FA_PER_THREAD; i++) {
		g_assert_cmpint(xport_fetch_add(x, mr, &scratch[0], raddr, rkey, 1), ==, 0);
		t->olds[i] = scratch[0];
	}

	/* CAS-based counter: retry with the value CAS returned */
	remote(x, t->cas_off, 8, &raddr, &rkey);
	for (unsigned int i = 0; i < CAS_PER_THREAD; i++) {
		for (;;) {
			g_assert_cmpint(xport_cas(x, mr, &scratch[0], raddr, rkey, guess,
						  guess + 1),
					==, 0);
			if (scratch[0] == guess)
				break;
			guess = scratch[0];
		}
		guess++;
	}

	/* CAS spin lock around a READ-modify-WRITE of a plain word */
	for (unsigned int i = 0; i < LOCK_PER_THREAD; i++) {
		uint64_t lock_addr, data_addr;
		uint32_t lock_key, data_key;

		remote(x, t->lock_off, 8, &lock_addr, &lock_key);
		remote(x, t->data_off, 8, &data_addr, &data_key);
		for (;;) {
			g_assert_cmpint(xport_cas(x, mr, &scratch[0], lock_addr, lock_key, 0,
						  t->id + 1),
					==, 0);
			if (scratch[0] == 0)
				break;
			g_thread_yield();
		}
		g_assert_cmpint(xport_read(x, mr, &scratch[1], 8, data_addr, data_key), ==, 0);
		scratch[1]++;
		g_assert_cmpint(xport_write(x, mr, &scratch[1], 8, data_addr, data_key), ==, 0);
		g_assert_cmpint(xport_cas(x, mr, &scratch[0], lock_addr, lock_key, t->id + 1, 0),
				==, 0);
		g_assert_cmpuint(scratch[0], ==, t->id + 1);
	}

	xport_dereg_mr(x, mr);
	xport_close(x);
	g_free(scratch);
	return NULL;
}

static void test_atomics_concurrent(struct fx *f, gconstpointer data)
{
	struct atomic_thread *t = g_new0(struct atomic_thread, THREADS);
	GThread *th[THREADS];
	uint8_t *seen = g_malloc0(THREADS * FA_PER_THREAD);
	uint64_t *zero = (uint64_t *)f->buf;
	uint64_t base = 7 << 20;

	memset(zero, 0, 64);
	sync_write(f->x, f->mr, zero, 64, base);
	for (unsigned int i = 0; i < THREADS; i++) {
		t[i].f = f;
		t[i].id = i;
		t[i].fa_off = base;
		t[i].cas_off = base + 8;
		t[i].lock_off = base + 16;
		t[i].data_off = base + 24;
		th[i] = g_thread_new("atomics", atomic_thread_main, &t[i]);
	}
	for (unsigned int i = 0; i < THREADS; i++)
		g_thread_join(th[i]);

	sync_read(f->x, f->mr, f->buf + 64, 32, base);
	g_assert_cmpuint(((uint64_t *)(f->buf + 64))[0], ==, THREADS * FA_PER_THREAD);
	g_assert_cmpuint(((uint64_t *)(f->buf + 64))[1], ==, THREADS * CAS_PER_THREAD);
	g_assert_cmpuint(((uint64_t *)(f->buf + 64))[2], ==, 0);
	g_assert_cmpuint(((uint64_t *)(f->buf + 64))[3], ==, THREADS * LOCK_PER_THREAD);
	/* every FETCH_ADD saw a distinct old value: exactly 0 .. N-1 */
	for (unsigned int i = 0; i < THREADS; i++) {
		for (unsigned int j = 0; j < FA_PER_THREAD; j++) {
			uint64_t v = t[i].olds[j];

			g_assert_cmpuint(v, <, THREADS * FA_PER_THREAD);
			g_assert_cmpuint(seen[v], ==, 0);
			seen[v] = 1;
		}
	}
	g_free(seen);
	g_free(t);
}

/* 50 clients connected at once, each doing verified I/O on its own slice */
static void test_many_clients(struct fx *f, gconstpointer data)
{
	enum { N = 50 };
	const uint32_t slice = 64 << 10;
	struct xport *xs[N];
	struct xport_mr *wmr[N], *rmr[N];
	struct xport_cqe cqe;
	uint8_t *src = f->buf, *dst = f->buf + (8 << 20);
	const uint64_t base = 10 << 20;

	for (int i = 0; i < N; i++) {
		int rc = client_connect(f, NULL, &xs[i]);

		if (rc)
			g_error("client %d of %d: %s", i, N, g_strerror(-rc));
		g_assert_cmpint(xport_reg_mr(xs[i], src + (size_t)i * slice, slice, &wmr[i]), ==,
				0);
		g_assert_cmpint(xport_reg_mr(xs[i], dst + (size_t)i * slice, slice, &rmr[i]), ==,
				0);
	}
	if (fx_is_tcp(f)) {
		struct proto_stats st;

		g_assert_cmpint(xport_stats(f->x, &st), ==, 0);
		g_assert_cmpuint(st.clients_now, >=, N + 1);
	}
	fill_random(&f->rng, src, (size_t)N * slice);
	memset(dst, 0, (size_t)N * slice);
	/* all WRITEs in flight at once, one per client */
	for (int i = 0; i < N; i++) {
		struct xport_op op = op_rw(XPORT_WRITE, xs[i], wmr[i], src + (size_t)i * slice,
					   slice, base + (uint64_t)i * slice, i);

		g_assert_cmpint(xport_post(xs[i], &op, 1), ==, 0);
	}
	for (int i = 0; i < N; i++) {
		reap(xs[i], &cqe, 1);
		g_assert_cmpint(cqe.status, ==, 0);
		g_assert_cmpuint(cqe.wr_id, ==, (uint64_t)i);
	}
	/* then every client READs another client's slice */
	for (int i = 0; i < N; i++) {
		int j = (i + 7) % N;
		struct xport_op op = op_rw(XPORT_READ, xs[i], rmr[i], dst + (size_t)i * slice,
					   slice, base + (uint64_t)j * slice, j);

		g_assert_cmpint(xport_post(xs[i], &op, 1), ==, 0);
	}
	for (int i = 0; i < N; i++) {
		int j = (i + 7) % N;

		reap(xs[i], &cqe, 1);
		g_assert_cmpint(cqe.status, ==, 0);
		g_assert_cmpmem(dst + (size_t)i * slice, slice, src + (size_t)j * slice, slice);
	}
	for (int i = 0; i < N; i++) {
		xport_dereg_mr(xs[i], wmr[i]);
		xport_dereg_mr(xs[i], rmr[i]);
		xport_close(xs[i]);
	}
}

static void test_auth(struct fx *f, gconstpointer data)
{
	struct client_opts wrong = { .token = "incorrect horse" };
	struct client_opts none = { .no_token = true };
	struct xport *x = NULL;
	struct proto_stats st;

	g_assert_cmpint(client_connect(f, &wrong, &x), ==, -EPERM);
	g_assert_null(x);
	g_assert_cmpint(client_connect(f, &none, &x), ==, -EPERM);
	g_assert_null(x);
	/* the right token still works, and the server counted the refusals */
	g_assert_cmpint(client_connect(f, NULL, &x), ==, 0);
	g_assert_cmpint(xport_stats(x, &st), ==, 0);
	g_assert_cmpuint(st.auth_failures, >=, 2);
	xport_close(x);
}

/* after an error completion the connection may be dead (RDMA); reconnect if so */
static void ensure_usable(struct fx *f)
{
	struct xport_cqe cqe;
	int rc;

	while ((rc = xport_poll(f->x, &cqe, 1, 0)) > 0)
		;
	if (rc == 0 && xport_inflight(f->x) == 0 && fx_is_tcp(f))
		return;
	if (fx_is_tcp(f))
		g_assert_not_reached(); /* TCP survives error completions */
	xport_dereg_mr(f->x, f->mr);
	xport_close(f->x);
	g_assert_cmpint(client_connect(f, NULL, &f->x), ==, 0);
	g_assert_cmpint(xport_reg_mr(f->x, f->buf, BUF_SIZE, &f->mr), ==, 0);
}

/* post one op that the server must refuse; returns the completion status */
static int bad_remote_op(struct fx *f, struct xport_op op)
{
	struct xport_cqe cqe;
	int rc;

	op.wr_id = 777;
	rc = xport_post(f->x, &op, 1);
	g_assert_cmpint(rc, ==, 0);
	reap(f->x, &cqe, 1);
	g_assert_cmpuint(cqe.wr_id, ==, 777);
	g_assert_cmpint(cqe.status, <, 0);
	rc = cqe.status;
	ensure_usable(f);
	return rc;
}

static void check_still_works(struct fx *f)
{
	uint8_t *a = f->buf + (30 << 20), *b = f->buf + (31 << 20);

	fill_random(&f->rng, a, 1000);
	sync_write(f->x, f->mr, a, 1000, 12345);
	sync_read(f->x, f->mr, b, 1000, 12345);
	g_assert_cmpmem(a, 1000, b, 1000);
}

static void test_bad_access(struct fx *f, gconstpointer data)
{
	/* copies: ensure_usable() may reconnect, which frees f->x->pool (same regions after) */
	const struct proto_region r0_copy = f->x->pool.regions[0];
	const struct proto_region rl_copy = f->x->pool.regions[f->x->pool.nregions - 1];
	const struct proto_region *r0 = &r0_copy, *rl = &rl_copy;
	uint64_t end = rl->addr + rl->len;
	bool tcp = fx_is_tcp(f);
	uint8_t *tail = f->buf + (40 << 20), *chk = f->buf + (41 << 20);
	struct xport_op op;
	int st;

	/* the last 4 KiB of the pool: must survive the refused ops below */
	fill_random(&f->rng, tail, 4096);
	sync_write(f->x, f->mr, tail, 4096, POOL_SIZE - 4096);

	/* READ starting at the end of the last region */
	op = (struct xport_op){ .type = XPORT_READ, .mr = f->mr, .local = f->buf, .len = 8,
				.raddr = end, .rkey = rl->rkey };
	st = bad_remote_op(f, op);
	if (tcp)
		g_assert_cmpint(st, ==, -EFAULT);

	/* WRITE crossing the end (the whole op is refused: nothing written) */
	op = (struct xport_op){ .type = XPORT_WRITE, .mr = f->mr, .local = f->buf,
				.len = 8192, .raddr = end - 4096, .rkey = rl->rkey };
	memset(f->buf, 0x5a, 8192);
	st = bad_remote_op(f, op);
	if (tcp)
		g_assert_cmpint(st, ==, -EFAULT);
	sync_read(f->x, f->mr, chk, 4096, POOL_SIZE - 4096);
	g_assert_cmpmem(chk, 4096, tail, 4096);

	/* the largest op, mostly past the end (ensure_usable may have replaced f->mr) */
	op.mr = f->mr;
	op.len = PROTO_MAX_IO;
	st = bad_remote_op(f, op);
	sync_read(f->x, f->mr, chk, 4096, POOL_SIZE - 4096);
	g_assert_cmpmem(chk, 4096, tail, 4096);

	/* below the first region */
	op = (struct xport_op){ .type = XPORT_WRITE, .mr = f->mr, .local = f->buf, .len = 8,
				.raddr = r0->addr - 8, .rkey = r0->rkey };
	st = bad_remote_op(f, op);
	if (tcp)
		g_assert_cmpint(st, ==, -EFAULT);

	/* an address range that wraps */
	op = (struct xport_op){ .type = XPORT_READ, .mr = f->mr, .local = f->buf, .len = 16,
				.raddr = UINT64_MAX - 7, .rkey = r0->rkey };
	st = bad_remote_op(f, op);

	/* wrong rkey */
	op = (struct xport_op){ .type = XPORT_READ, .mr = f->mr, .local = f->buf, .len = 8,
				.raddr = r0->addr, .rkey = r0->rkey ^ 0x5a5a5a5a };
	st = bad_remote_op(f, op);
	if (tcp)
		g_assert_cmpint(st, ==, -EACCES);

	/* atomics: misaligned, out of range, wrong key */
	op = (struct xport_op){ .type = XPORT_FETCH_ADD, .mr = f->mr, .local = f->buf,
				.raddr = r0->addr + 4, .rkey = r0->rkey, .compare_add = 1 };
	st = bad_remote_op(f, op);
	if (tcp)
		g_assert_cmpint(st, ==, -EINVAL);
	op = (struct xport_op){ .type = XPORT_CAS, .mr = f->mr, .local = f->buf,
				.raddr = end, .rkey = rl->rkey, .compare_add = 0, .swap = 1 };
	st = bad_remote_op(f, op);
	if (tcp)
		g_assert_cmpint(st, ==, -EFAULT);
	op.mr = f->mr;
	op.raddr = r0->addr;
	op.rkey = r0->rkey + 1000;
	st = bad_remote_op(f, op);
	if (tcp)
		g_assert_cmpint(st, ==, -EACCES);

	/* an unsignalled op still reports its failure */
	op = (struct xport_op){ .type = XPORT_WRITE, .flags = XPORT_OP_UNSIGNALED, .mr = f->mr,
				.local = f->buf, .len = 8, .raddr = end, .rkey = rl->rkey };
	st = bad_remote_op(f, op);

	/*
	 * TCP: errors in the middle of a batch fail only those ops. A failed
	 * atomic's response is shorter than a successful one: the READ data
	 * after it must still land intact.
	 */
	if (tcp) {
		enum { n = 6 };
		static const int want[n] = { 0, -EINVAL, 0, 0, -EFAULT, 0 };
		struct xport_op ops[n];
		struct xport_cqe cqes[n];
		uint64_t *res = (uint64_t *)(f->buf + (42 << 20));

		memset(chk, 0, 2 * 4096);
		ops[0] = op_rw(XPORT_WRITE, f->x, f->mr, tail, 4096, 4096, 0);
		ops[1] = (struct xport_op){ .type = XPORT_FETCH_ADD, .wr_id = 1, .mr = f->mr,
					    .local = &res[0], .raddr = r0->addr + 4,
					    .rkey = r0->rkey, .compare_add = 1 };
		ops[2] = op_rw(XPORT_READ, f->x, f->mr, chk, 4096, 4096, 2);
		ops[3] = (struct xport_op){ .type = XPORT_CAS, .wr_id = 3, .mr = f->mr,
					    .local = &res[1], .raddr = r0->addr + 4096,
					    .rkey = r0->rkey, .compare_add = 1, .swap = 2 };
		ops[4] = (struct xport_op){ .type = XPORT_READ, .wr_id = 4, .mr = f->mr,
					    .local = f->buf, .len = 8, .raddr = end,
					    .rkey = rl->rkey };
		ops[5] = op_rw(XPORT_READ, f->x, f->mr, chk + 4096, 4096, 4096, 5);
		g_assert_cmpint(xport_post(f->x, ops, n), ==, 0);
		reap(f->x, cqes, n);
		for (int i = 0; i < n; i++)
			g_assert_cmpint(cqes[i].status, ==, want[cqes[i].wr_id]);
		g_assert_cmpmem(chk, 4096, tail, 4096);
		g_assert_cmpmem(chk + 4096, 4096, tail, 4096);
		memcpy(&res[2], tail, 8);
		g_assert_cmpuint(res[1], ==, res[2]); /* CAS returned the word written by op 0 */
	}

	check_still_works(f);
	/* and the server is alive for new clients */
	{
		struct xport *x2;

		g_assert_cmpint(client_connect(f, NULL, &x2), ==, 0);
		xport_close(x2);
	}
}

/* malformed ops are refused by post with -EINVAL, and nothing is posted */
static void test_bad_post(struct fx *f, gconstpointer data)
{
	struct xport_op good = op_rw(XPORT_READ, f->x, f->mr, f->buf, 64, 0, 1);
	struct xport_op bad[12];
	struct xport_mr *other_mr;
	struct xport *x2;
	int k = 0;

	g_assert_cmpint(client_connect(f, NULL, &x2), ==, 0);
	g_assert_cmpint(xport_reg_mr(x2, f->buf, 4096, &other_mr), ==, 0);

	bad[k] = good;
	bad[k++].len = 0;
	bad[k] = good;
	bad[k++].len = PROTO_MAX_IO + 1;
	bad[k] = good; /* local runs past the end of its region */
	bad[k].local = f->buf + BUF_SIZE - 10;
	bad[k++].len = 20;
	bad[k] = good; /* local before its region */
	bad[k++].local = f->buf - 1;
	bad[k] = good;
	bad[k++].mr = NULL;
	bad[k] = good;
	bad[k++].local = NULL;
	bad[k] = good;
	bad[k++].type = (enum xport_op_type)99;
	if (fx_is_tcp(f)) {
		bad[k] = good; /* another connection's region (RDMA: the lkey decides) */
		bad[k++].mr = other_mr;
	}
	bad[k] = good; /* an atomic's 8 result bytes must fit */
	bad[k].type = XPORT_CAS;
	bad[k++].local = f->buf + BUF_SIZE - 4;

	for (int i = 0; i < k; i++) {
		struct xport_op two[2] = { good, bad[i] };

		g_assert_cmpint(xport_post(f->x, &bad[i], 1), ==, -EINVAL);
		/* all or nothing: the good op in front is not posted either */
		g_assert_cmpint(xport_post(f->x, two, 2), ==, -EINVAL);
		g_assert_cmpuint(xport_inflight(f->x), ==, 0);
		/* the synchronous helper refuses the same ops, before anything is posted */
		g_assert_cmpint(xport_run(f->x, &bad[i], 1), ==, -EINVAL);
		g_assert_cmpint(xport_run(f->x, two, 2), ==, -EINVAL);
		g_assert_cmpuint(xport_inflight(f->x), ==, 0);
	}
	g_assert_cmpint(xport_read(f->x, f->mr, f->buf + BUF_SIZE - 10, 20, good.raddr, good.rkey),
			==, -EINVAL);
	g_assert_cmpint(xport_write(f->x, NULL, f->buf, 64, good.raddr, good.rkey), ==, -EINVAL);
	g_assert_cmpint(xport_post(f->x, &good, f->x->depth + 1), ==, -EINVAL);
	g_assert_cmpint(xport_post(f->x, NULL, 1), ==, -EINVAL);
	g_assert_cmpint(xport_post(f->x, &good, 0), ==, 0);
	g_assert_cmpint(xport_reg_mr(f->x, NULL, 10, &other_mr), ==, -EINVAL);
	g_assert_cmpint(xport_reg_mr(f->x, f->buf, 0, &other_mr), ==, -EINVAL);
	g_assert_cmpuint(xport_inflight(f->x), ==, 0);
	xport_close(x2);
	check_still_works(f);
}

static void test_ping_stats(struct fx *f, gconstpointer data)
{
	static const uint32_t sizes[] = { 0, 1, 100, 4096, PROTO_MAX_CTRL };
	uint8_t *req = g_malloc(PROTO_MAX_CTRL + 1), *resp = g_malloc(PROTO_MAX_CTRL);
	struct proto_stats s0, s1;
	struct xport_op op;
	struct xport_cqe cqe;
	uint32_t len;

	for (size_t i = 0; i < G_N_ELEMENTS(sizes); i++) {
		fill_random(&f->rng, req, sizes[i]);
		memset(resp, 0, PROTO_MAX_CTRL);
		len = 12345;
		g_assert_cmpint(xport_call(f->x, PROTO_PING, req, sizes[i], resp, PROTO_MAX_CTRL,
					   &len),
				==, 0);
		g_assert_cmpuint(len, ==, sizes[i]);
		g_assert_cmpmem(resp, len, req, sizes[i]);
	}
	/* a response larger than the buffer: the start, the full length, -EMSGSIZE */
	fill_random(&f->rng, req, 1000);
	g_assert_cmpint(xport_call(f->x, PROTO_PING, req, 1000, resp, 10, &len), ==, -EMSGSIZE);
	g_assert_cmpuint(len, ==, 1000);
	g_assert_cmpmem(resp, 10, req, 10);
	g_assert_cmpint(xport_call(f->x, PROTO_PING, req, PROTO_MAX_CTRL + 1, resp, 10, &len), ==,
			-EMSGSIZE);
	g_assert_cmpint(xport_call(f->x, PROTO_READ, req, 16, resp, 10, &len), ==, -EINVAL);
	g_assert_cmpint(xport_call(f->x, PROTO_PING, req, 7, resp, 7, &len), ==, 0);
	g_assert_cmpmem(resp, 7, req, 7);
	/* no response buffer at all: allowed, the payload is dropped */
	g_assert_cmpint(xport_call(f->x, PROTO_PING, NULL, 0, NULL, 0, &len), ==, 0);
	g_assert_cmpuint(len, ==, 0);
	g_assert_cmpint(xport_call(f->x, PROTO_PING, req, 100, NULL, 0, &len), ==, -EMSGSIZE);
	g_assert_cmpuint(len, ==, 100);
	g_assert_cmpint(xport_call(f->x, PROTO_PING, req, 7, resp, 7, &len), ==, 0);
	g_assert_cmpmem(resp, 7, req, 7);

	/* no control call while data ops are in flight */
	op = op_rw(XPORT_READ, f->x, f->mr, f->buf, 4096, 0, 9);
	g_assert_cmpint(xport_post(f->x, &op, 1), ==, 0);
	g_assert_cmpint(xport_call(f->x, PROTO_PING, req, 7, resp, 7, &len), ==, -EBUSY);
	g_assert_cmpint(xport_run(f->x, &op, 1), ==, -EBUSY);
	reap(f->x, &cqe, 1);
	g_assert_cmpint(cqe.status, ==, 0);

	g_assert_cmpint(xport_stats(f->x, &s0), ==, 0);
	g_assert_cmpuint(s0.clients_now, >=, 1);
	g_assert_cmpuint(s0.clients_total, >=, 1);
	for (int i = 0; i < 3; i++)
		sync_write(f->x, f->mr, f->buf, 1000, 4096 * (i + 1));
	for (int i = 0; i < 2; i++)
		sync_read(f->x, f->mr, f->buf + 8192, 500, 4096 * (i + 1));
	{
		uint64_t raddr;
		uint32_t rkey;

		remote(f->x, 0, 8, &raddr, &rkey);
		for (int i = 0; i < 4; i++)
			g_assert_cmpint(xport_fetch_add(f->x, f->mr, (uint64_t *)f->buf, raddr,
							rkey, 1),
					==, 0);
	}
	g_assert_cmpint(xport_stats(f->x, &s1), ==, 0);
	if (fx_is_tcp(f)) {
		/* one-sided RDMA ops never reach the server's CPU: TCP only */
		g_assert_cmpuint(s1.writes - s0.writes, >=, 3);
		g_assert_cmpuint(s1.bytes_written - s0.bytes_written, >=, 3000);
		g_assert_cmpuint(s1.reads - s0.reads, >=, 2);
		g_assert_cmpuint(s1.bytes_read - s0.bytes_read, >=, 1000);
		g_assert_cmpuint(s1.atomics - s0.atomics, >=, 4);
	}
	g_assert_cmpuint(s1.clients_total, >=, s0.clients_total);
	g_free(req);
	g_free(resp);
}

/*
 * FENCE(A) from B: A's writes and atomics stop landing (TCP: -EKEYREVOKED on
 * every connection of A; RDMA: its QPs are in ERR, so they fail as on a lost
 * connection), A cannot connect again, B and a client without an id go on, and
 * malformed FENCEs get a clear error.
 */
static void test_fence(struct fx *f, gconstpointer data)
{
	const uint64_t id_a = 0xa11ce00000000001ULL, id_b = 0xb0b0000000000002ULL;
	const struct client_opts oa = { .client_id = id_a }, ob = { .client_id = id_b };
	const uint64_t off = 5 << 20, word = 6 << 20;
	uint8_t *abuf = g_malloc0(8192), *bbuf = g_malloc0(8192);
	struct xport *a, *a2, *b, *again = NULL;
	struct xport_mr *amr, *a2mr, *bmr;
	uint64_t raddr, *res;
	uint32_t rkey, len;
	int rc;

	g_assert_cmpint(client_connect(f, &oa, &a), ==, 0);
	g_assert_cmpint(client_connect(f, &oa, &a2), ==, 0);
	g_assert_cmpint(client_connect(f, &ob, &b), ==, 0);
	g_assert_cmpint(xport_reg_mr(a, abuf, 8192, &amr), ==, 0);
	g_assert_cmpint(xport_reg_mr(a2, abuf, 8192, &a2mr), ==, 0);
	g_assert_cmpint(xport_reg_mr(b, bbuf, 8192, &bmr), ==, 0);
	memset(abuf, 'A', 4096);
	sync_write(a, amr, abuf, 4096, off); /* before the fence: lands */

	g_assert_cmpint(xport_fence(b, id_a), ==, 0);

	memset(abuf, 'X', 4096);
	remote(a, off, 4096, &raddr, &rkey);
	rc = xport_write(a, amr, abuf, 4096, raddr, rkey);
	if (fx_is_tcp(f))
		g_assert_cmpint(rc, ==, -EKEYREVOKED);
	else
		g_assert_cmpint(rc, <, 0);
	res = (uint64_t *)(abuf + 4096);
	remote(a2, word, 8, &raddr, &rkey);
	rc = xport_cas(a2, a2mr, res, raddr, rkey, 0, 0x5a5a);
	if (fx_is_tcp(f))
		g_assert_cmpint(rc, ==, -EKEYREVOKED);
	else
		g_assert_cmpint(rc, <, 0);

	/* nothing of A's landed */
	sync_read(b, bmr, bbuf, 4096, off);
	memset(abuf, 'A', 4096);
	g_assert_cmpmem(bbuf, 4096, abuf, 4096);
	g_assert_cmpuint(remote_u64(b, bmr, (uint64_t *)bbuf, word), ==, 0);

	/* A is refused from now on; B and the fixture's client (id 0) go on */
	g_assert_cmpint(client_connect(f, &oa, &again), ==, -EKEYREVOKED);
	g_assert_null(again);
	memset(bbuf, 'B', 4096);
	sync_write(b, bmr, bbuf, 4096, off);
	remote(b, word, 8, &raddr, &rkey);
	g_assert_cmpint(xport_cas(b, bmr, (uint64_t *)(bbuf + 4096), raddr, rkey, 0, 7), ==, 0);
	check_still_works(f);

	/* malformed: a clear error, and the connection stays usable */
	g_assert_cmpint(xport_call(b, PROTO_FENCE, bbuf, 3, NULL, 0, &len), ==, -EBADMSG);
	g_assert_cmpint(xport_fence(b, 0), ==, -EBADMSG);
	g_assert_cmpint(xport_fence(b, id_b), ==, -EPROTO);
	g_assert_cmpuint(remote_u64(b, bmr, (uint64_t *)bbuf, word), ==, 7);

	xport_dereg_mr(a, amr);
	xport_dereg_mr(a2, a2mr);
	xport_dereg_mr(b, bmr);
	xport_close(a);
	xport_close(a2);
	xport_close(b);
	g_free(abuf);
	g_free(bbuf);
}

/* each poll mode moves verified data and honours timeouts */
static void test_poll_modes(struct fx *f, gconstpointer data)
{
	static const enum xport_poll_mode modes[] = { XPORT_POLL_BUSY, XPORT_POLL_EVENT,
						      XPORT_POLL_HYBRID };
	enum xport_poll_mode m;

	g_assert_cmpint(xport_poll_mode_parse("busy", &m), ==, 0);
	g_assert_cmpint(m, ==, XPORT_POLL_BUSY);
	g_assert_cmpint(xport_poll_mode_parse("event", &m), ==, 0);
	g_assert_cmpint(m, ==, XPORT_POLL_EVENT);
	g_assert_cmpint(xport_poll_mode_parse("hybrid", &m), ==, 0);
	g_assert_cmpint(m, ==, XPORT_POLL_HYBRID);
	g_assert_cmpint(xport_poll_mode_parse("spin", &m), ==, -EINVAL);

	for (size_t i = 0; i < G_N_ELEMENTS(modes); i++) {
		struct client_opts o = { .mode = modes[i], .mode_set = true, .depth = 16 };
		struct xport_op ops[16];
		struct xport_cqe cqes[16];
		struct xport *x;
		struct xport_mr *mr;
		uint8_t *src = f->buf, *dst = f->buf + (1 << 20);
		int64_t t0;

		g_assert_cmpint(client_connect(f, &o, &x), ==, 0);
		g_assert_cmpint(xport_reg_mr(x, f->buf, 4 << 20, &mr), ==, 0);

		/* nothing in flight: poll returns at once whatever the timeout */
		t0 = clock_now_ms();
		g_assert_cmpint(xport_poll(x, cqes, 16, 5000), ==, 0);
		g_assert_cmpint(clock_now_ms() - t0, <, 1000);

		fill_random(&f->rng, src, 16 * 4096);
		for (int k = 0; k < 16; k++)
			ops[k] = op_rw(XPORT_WRITE, x, mr, src + k * 4096, 4096,
				       (20 << 20) + (uint64_t)k * 4096, k);
		g_assert_cmpint(xport_post(x, ops, 16), ==, 0);
		reap(x, cqes, 16);
		memset(dst, 0, 16 * 4096);
		for (int k = 0; k < 16; k++)
			ops[k] = op_rw(XPORT_READ, x, mr, dst + k * 4096, 4096,
				       (20 << 20) + (uint64_t)k * 4096, k);
		for (int round = 0; round < 16; round++) {
			g_assert_cmpint(xport_post(x, &ops[round], 1), ==, 0);
			reap(x, cqes, 1);
			g_assert_cmpint(cqes[0].status, ==, 0);
			g_assert_cmpuint(cqes[0].wr_id, ==, (uint64_t)round);
		}
		g_assert_cmpmem(dst, 16 * 4096, src, 16 * 4096);
		xport_dereg_mr(x, mr);
		xport_close(x);
	}
}

/* a server that stops answering: ops fail with -ETIMEDOUT after op_timeout_ms */
static void test_op_timeout(struct fx *f, gconstpointer data)
{
	struct client_opts o = { .op_timeout_ms = 400 };
	struct xport_op ops[4];
	struct xport_cqe cqes[4];
	struct xport *x;
	struct xport_mr *mr;
	int64_t t0, dt;

	if (!fx_is_tcp(f)) {
		/* a stopped process does not stop an RDMA NIC from serving one-sided ops */
		g_test_skip("a stopped memserver only stalls the TCP transport");
		return;
	}
	g_assert_cmpint(client_connect(f, &o, &x), ==, 0);
	g_assert_cmpint(xport_reg_mr(x, f->buf, 1 << 20, &mr), ==, 0);
	server_signal(&f->srv, SIGSTOP);
	for (int i = 0; i < 4; i++)
		ops[i] = op_rw(XPORT_READ, x, mr, f->buf + i * 4096, 4096, (uint64_t)i * 4096, i);
	t0 = clock_now_ms();
	g_assert_cmpint(xport_post(x, ops, 4), ==, 0);
	/* a short poll times out without failing anything */
	g_assert_cmpint(xport_poll(x, cqes, 4, 100), ==, 0);
	g_assert_cmpuint(xport_inflight(x), ==, 4);
	reap(x, cqes, 4);
	dt = clock_now_ms() - t0;
	for (int i = 0; i < 4; i++)
		g_assert_cmpint(cqes[i].status, ==, -ETIMEDOUT);
	g_assert_cmpint(dt, >=, 350);
	g_assert_cmpint(dt, <, 3000);
	g_assert_cmpint(xport_poll(x, cqes, 4, 100), ==, -ENOTCONN);
	g_assert_cmpint(xport_post(x, ops, 1), ==, -ENOTCONN);
	server_signal(&f->srv, SIGCONT);
	xport_close(x);
	check_still_works(f);
}

/* SIGKILL of a stopped server with a full queue: every op fails at once */
static void test_server_killed_stalled(struct fx *f, gconstpointer data)
{
	enum { n = 64 };
	struct client_opts o = { .depth = n, .op_timeout_ms = 10000 };
	struct xport_op ops[n];
	struct xport_cqe cqes[n];
	struct xport *x;
	struct xport_mr *mr;
	uint32_t len;
	int64_t t0, dt;

	if (!fx_is_tcp(f)) {
		g_test_skip("a stopped memserver only stalls the TCP transport");
		return;
	}
	g_assert_cmpint(client_connect(f, &o, &x), ==, 0);
	g_assert_cmpint(xport_reg_mr(x, f->buf, BUF_SIZE, &mr), ==, 0);
	server_signal(&f->srv, SIGSTOP);
	/* mostly big READs; the WRITEs are small so the whole post fits the socket buffers */
	for (unsigned int i = 0; i < n; i++)
		ops[i] = op_rw(i % 4 ? XPORT_READ : XPORT_WRITE, x, mr, f->buf + i * (256 << 10),
			       i % 4 ? 256 << 10 : 4096, (uint64_t)i * (256 << 10), i);
	g_assert_cmpint(xport_post(x, ops, n), ==, 0);
	g_assert_cmpint(xport_poll(x, cqes, n, 50), ==, 0);
	t0 = clock_now_ms();
	server_kill(&f->srv);
	reap(x, cqes, n);
	dt = clock_now_ms() - t0;
	for (unsigned int i = 0; i < n; i++)
		g_assert_cmpint(cqes[i].status, ==, -EIO);
	g_assert_cmpint(dt, <, 2000);
	g_assert_cmpint(xport_poll(x, cqes, n, 100), ==, -ENOTCONN);
	g_assert_cmpint(xport_post(x, ops, 1), ==, -ENOTCONN);
	g_assert_cmpint(xport_call(x, PROTO_PING, NULL, 0, NULL, 0, &len), ==, -ENOTCONN);
	g_assert_cmpuint(xport_inflight(x), ==, 0);
	xport_close(x);
}

/* SIGKILL of a server in the middle of a stream of I/O */
static void test_server_killed_busy(struct fx *f, gconstpointer data)
{
	const unsigned int depth = 32;
	const uint32_t len = 1 << 20;
	struct client_opts o = { .depth = depth, .op_timeout_ms = 10000 };
	struct xport_cqe cqes[32];
	struct xport *x;
	struct xport_mr *mr;
	unsigned int posted = 0, ok = 0, failed = 0;
	int64_t t_kill = 0, deadline = clock_now_ms() + WAIT_MS;
	bool dead = false;
	int rc;

	g_assert_cmpint(client_connect(f, &o, &x), ==, 0);
	g_assert_cmpint(xport_reg_mr(x, f->buf, BUF_SIZE, &mr), ==, 0);
	for (;;) {
		while (!dead && xport_inflight(x) < depth) {
			unsigned int s = posted % depth;
			struct xport_op op = op_rw(XPORT_READ, x, mr, f->buf + (size_t)s * len,
						   len, (uint64_t)s * len, posted);

			rc = xport_post(x, &op, 1);
			if (rc == -ENOTCONN) {
				dead = true;
				break;
			}
			g_assert_cmpint(rc, ==, 0);
			posted++;
		}
		rc = xport_poll(x, cqes, depth, 1000);
		if (rc == -ENOTCONN)
			break;
		g_assert_cmpint(rc, >=, 0);
		for (int i = 0; i < rc; i++) {
			if (cqes[i].status == 0) {
				g_assert_cmpuint(failed, ==, 0); /* no success after a failure */
				ok++;
			} else {
				failed++;
			}
		}
		if (!t_kill && ok >= 100) {
			t_kill = clock_now_ms();
			server_kill(&f->srv);
		}
		g_assert_cmpint(clock_now_ms(), <, deadline);
	}
	g_assert_cmpint(t_kill, >, 0);
	g_assert_cmpuint(ok + failed, ==, posted);
	g_assert_cmpuint(failed, >=, 1);
	g_assert_cmpint(clock_now_ms() - t_kill, <, fx_is_tcp(f) ? 2000 : 9000);
	{
		struct xport_op op = op_rw(XPORT_READ, x, mr, f->buf, 8, 0, 0);

		g_assert_cmpint(xport_post(x, &op, 1), ==, -ENOTCONN);
	}
	g_assert_cmpint(xport_poll(x, cqes, depth, 0), ==, -ENOTCONN);
	xport_close(x);
}

static char *skip_reason;

static void test_skipped(void)
{
	g_test_skip(skip_reason);
}

static void test_oob_skipped(void)
{
	g_test_skip("the data path after an out-of-band bring-up is the same verbs");
}

/* bringup: the case exercises how a QP comes up or goes down (see the header) */
static void add_case(const char *name, const struct fx_cfg *cfg,
		     void (*fn)(struct fx *, gconstpointer), bool bringup)
{
	if (oob_run() && !bringup)
		g_test_add_func(name, test_oob_skipped);
	else
		g_test_add(name, struct fx, cfg, fx_setup, fn, fx_teardown);
}

static void add(const char *name, const struct fx_cfg *cfg,
		void (*fn)(struct fx *, gconstpointer))
{
	add_case(name, cfg, fn, false);
}

static void add_bringup(const char *name, const struct fx_cfg *cfg,
			void (*fn)(struct fx *, gconstpointer))
{
	add_case(name, cfg, fn, true);
}

int main(int argc, char **argv)
{
	char *memserver;

	g_test_init(&argc, &argv, NULL);
	if (g_getenv("RMEM_BUILD_DIR")) {
		build_dir = g_strdup(g_getenv("RMEM_BUILD_DIR"));
	} else {
		char *self = g_canonicalize_filename(argv[0], NULL);
		char *tests = g_path_get_dirname(self);

		build_dir = g_path_get_dirname(tests);
		g_free(tests);
		g_free(self);
	}
	memserver = g_build_filename(build_dir, "memserver", "memserver", NULL);
	if (!g_file_test(memserver, G_FILE_TEST_IS_EXECUTABLE))
		skip_reason = g_strdup_printf("no memserver at %s", memserver);
	else if (!xport_available(test_transport()))
		skip_reason = g_strdup_printf("transport %s is not built", test_transport());
	else if (strcmp(test_transport(), "rdma") == 0 && !xport_rdma_device_present())
		skip_reason = g_strdup("no RDMA device on this host");
	g_free(memserver);
	if (skip_reason) {
		/* one skipped case, so TAP reports a skip rather than nothing */
		g_test_add_func("/xport/skipped", test_skipped);
		return g_test_run();
	}

	add_bringup("/xport/connect", &cfg_plain, test_connect);
	add_bringup("/xport/rw-sizes", &cfg_plain, test_rw_sizes);
	add("/xport/batch", &cfg_plain, test_batch);
	add("/xport/pipeline", &cfg_plain, test_pipeline);
	add("/xport/bulk-mix", &cfg_plain, test_bulk_mix);
	add("/xport/unsignaled", &cfg_plain, test_unsignaled);
	add_bringup("/xport/atomics", &cfg_plain, test_atomics);
	add("/xport/atomics-concurrent", &cfg_plain, test_atomics_concurrent);
	add_bringup("/xport/many-clients", &cfg_plain, test_many_clients);
	add_bringup("/xport/auth", &cfg_token, test_auth);
	add("/xport/bad-access", &cfg_plain, test_bad_access);
	add("/xport/bad-post", &cfg_plain, test_bad_post);
	add("/xport/ping-stats", &cfg_plain, test_ping_stats);
	add_bringup("/xport/fence", &cfg_plain, test_fence);
	add("/xport/poll-modes", &cfg_plain, test_poll_modes);
	add("/xport/op-timeout", &cfg_plain, test_op_timeout);
	add_bringup("/xport/server-killed-stalled", &cfg_plain, test_server_killed_stalled);
	add_bringup("/xport/server-killed-busy", &cfg_plain, test_server_killed_busy);
	return g_test_run();
}
