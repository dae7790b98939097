/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * test_xport_pools.c - pools of one memserver are isolated, seen through the
 * transport (common/xport.h) against a real memserver with two tenants:
 * a client of tenant A's pool that forges tenant B's rkey and address (taken
 * from a connection to B's pool) gets a remote access error (-EACCES) for a
 * READ and a WRITE, and B's bytes stay as they were. Over TCP that is the
 * server's PROTO_E_KEY; over RDMA the NIC's own refusal, since every pool is
 * registered in its own protection domain and A's QP lives in A's. Also: a
 * token reaches only its tenant's pools, and two clients on two pools
 * verify their data concurrently.
 *
 * Environment as test_xport.c: RMEM_TEST_TRANSPORT (tcp by default, rdma),
 * RMEM_TEST_HOST, RMEM_TEST_RDMA_OOB=1. Over rdma_cm a named pool is opened
 * over TCP first and the connect carries its pool_id; over the out-of-band
 * path the QP_EXCHANGE carries the pool selection; the QP is made in the
 * selected pool's PD either way (scripts/test-rdma.sh runs both).
 */
#define G_LOG_DOMAIN "rmemfs-test-xport-pools"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <glib.h>
#include <glib/gstdio.h>

#include "memserver_launch.h"
#include "net.h"
#include "proto.h"
#include "xport.h"

#define POOL_SIZE (8ULL << 20)
#define BUF_SIZE (2U << 20)
#define WAIT_MS 20000
#define TOKEN_A "alice's token"
#define TOKEN_B "bob's token"

struct fx {
	GPid pid;
	uint16_t port;
	char *dir; /* token dir */
	uint8_t *buf;
};

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

static bool is_rdma(void)
{
	return strcmp(test_transport(), "rdma") == 0;
}

static void write_token(const char *dir, const char *tenant, const char *token)
{
	char *path = g_build_filename(dir, tenant, NULL);

	g_assert_true(g_file_set_contents(path, token, -1, NULL));
	g_free(path);
}

static void fx_setup(struct fx *f, gconstpointer data)
{
	const char *args[] = { "--capacity", "64M", "--token-dir", NULL, "--listen", test_host(),
			       "--port", "0", "--transport", is_rdma() ? "rdma" : "tcp", NULL };
	struct memserver_proc ms;

	(void)data;
	f->dir = g_dir_make_tmp("rmem-test-pools-XXXXXX", NULL);
	g_assert_nonnull(f->dir);
	write_token(f->dir, "alice", TOKEN_A);
	write_token(f->dir, "bob", TOKEN_B);
	args[3] = f->dir;
	memserver_launch(args, &ms);
	f->pid = ms.pid;
	f->port = is_rdma() ? ms.rdma_port : ms.tcp_port;
	f->buf = g_malloc0(BUF_SIZE);
}

static void fx_teardown(struct fx *f, gconstpointer data)
{
	gint64 deadline = g_get_monotonic_time() + (gint64)WAIT_MS * 1000;
	int status = -1;
	pid_t r;

	(void)data;
	kill(f->pid, SIGTERM);
	while ((r = waitpid(f->pid, &status, WNOHANG)) == 0 && g_get_monotonic_time() < deadline)
		g_usleep(2000);
	if (r == 0) {
		kill(f->pid, SIGKILL);
		waitpid(f->pid, &status, 0);
	}
	g_spawn_close_pid(f->pid);
	for (const char *t = "alice"; t; t = strcmp(t, "alice") ? NULL : "bob") {
		char *path = g_build_filename(f->dir, t, NULL);

		g_unlink(path);
		g_free(path);
	}
	g_rmdir(f->dir);
	g_free(f->dir);
	g_free(f->buf);
	/* the memserver exits cleanly: no warning (fatal), no crash */
	g_assert_true(WIFEXITED(status));
	g_assert_cmpint(WEXITSTATUS(status), ==, 0);
}

/* connect with @token to pool @name (creating it with POOL_SIZE if @create); 0 or -errno */
static int pool_connect(struct fx *f, const char *token, const char *name, bool create,
			struct xport **out)
{
	struct xport_params p;

	xport_params_init(&p);
	p.host = test_host();
	p.port = f->port;
	p.quiet = true;
	p.rdma_oob_qp = g_strcmp0(g_getenv("RMEM_TEST_RDMA_OOB"), "1") == 0;
	p.poll_mode = XPORT_POLL_EVENT;
	p.pool = name;
	p.pool_create_size = create ? POOL_SIZE : 0;
	proto_token_hash(token, strlen(token), p.token_hash);
	return xport_connect(test_transport(), &p, out);
}

static struct xport *must_connect(struct fx *f, const char *token, const char *name,
				  bool create)
{
	struct xport *x = NULL;
	int rc = pool_connect(f, token, name, create, &x);

	if (rc)
		g_error("connecting to pool %s: %s", name, g_strerror(-rc));
	return x;
}

static void fill(uint8_t *p, size_t n, uint8_t seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(seed + i * 131 + (i >> 9));
}

/* the region of x's pool at offset off: address and rkey */
static void resolve(struct xport *x, uint64_t off, uint64_t len, uint64_t *raddr, uint32_t *rkey)
{
	g_assert_cmpint(proto_pool_resolve(&x->pool, off, len, raddr, rkey), ==, 0);
}

static void test_forged_rkey(struct fx *f, gconstpointer data)
{
	const uint32_t len = 64 << 10;
	uint8_t *pattern = f->buf, *back = f->buf + (1 << 20);
	struct xport *b, *a;
	struct xport_mr *bmr, *amr;
	uint64_t raddr;
	uint32_t rkey;

	(void)data;
	b = must_connect(f, TOKEN_B, "bobs", true);
	a = must_connect(f, TOKEN_A, "alices", true);
	g_assert_cmpuint(a->pool.pool_id, !=, b->pool.pool_id);
	g_assert_cmpuint(a->pool.size, ==, POOL_SIZE);
	g_assert_cmpint(xport_reg_mr(b, f->buf, BUF_SIZE, &bmr), ==, 0);
	fill(pattern, len, 7);
	resolve(b, 4096, len, &raddr, &rkey);
	g_assert_cmpint(xport_write(b, bmr, pattern, len, raddr, rkey), ==, 0);

	/* A forges B's rkey and address: a READ is refused */
	g_assert_cmpint(xport_reg_mr(a, f->buf, BUF_SIZE, &amr), ==, 0);
	memset(back, 0xee, len);
	g_assert_cmpint(xport_read(a, amr, back, len, raddr, rkey), ==, -EACCES);
	g_assert_cmpuint(back[0], ==, 0xee);
	xport_dereg_mr(a, amr);
	xport_close(a);

	/* and a WRITE (a fresh connection: over RDMA the error moved the QP to ERR) */
	a = must_connect(f, TOKEN_A, "alices", false);
	g_assert_cmpint(xport_reg_mr(a, f->buf, BUF_SIZE, &amr), ==, 0);
	memset(back, 0x5a, len);
	g_assert_cmpint(xport_write(a, amr, back, len, raddr, rkey), ==, -EACCES);
	xport_dereg_mr(a, amr);
	xport_close(a);

	/* B's bytes are as B wrote them */
	memset(back, 0, len);
	g_assert_cmpint(xport_read(b, bmr, back, len, raddr, rkey), ==, 0);
	g_assert_cmpmem(back, len, pattern, len);
	xport_dereg_mr(b, bmr);
	xport_close(b);
}

static void test_tokens(struct fx *f, gconstpointer data)
{
	struct xport *b = must_connect(f, TOKEN_B, "bobs", true), *x = NULL;

	(void)data;
	/* another tenant's pool: not reachable, and its name is taken */
	g_assert_cmpint(pool_connect(f, TOKEN_A, "bobs", false, &x), ==, -EKEYREJECTED);
	g_assert_cmpint(pool_connect(f, TOKEN_A, "bobs", true, &x), ==, -EEXIST);
	/* absent without creation; a token that is nobody's */
	g_assert_cmpint(pool_connect(f, TOKEN_A, "nothere", false, &x), ==, -ENOENT);
	g_assert_cmpint(pool_connect(f, "mallory", "bobs", false, &x), ==, -EPERM);
	/* no default pool with --capacity alone */
	g_assert_cmpint(pool_connect(f, TOKEN_A, NULL, false, &x), !=, 0);
	g_assert_null(x);
	xport_close(b);
}

struct verifier {
	struct fx *f;
	const char *token;
	const char *pool;
	uint8_t seed;
	uint8_t *buf;
	int rounds;
};

/* write a pattern, read it back, compare; the pool is the thread's own */
static gpointer verifier_main(gpointer arg)
{
	struct verifier *v = arg;
	struct xport *x = must_connect(v->f, v->token, v->pool, true);
	uint8_t *w = v->buf, *r = v->buf + (512 << 10);
	const uint32_t len = 256 << 10;
	struct xport_mr *mr;

	g_assert_cmpint(xport_reg_mr(x, v->buf, 1 << 20, &mr), ==, 0);
	for (int i = 0; i < v->rounds; i++) {
		uint64_t off = (uint64_t)(i % 16) * len, raddr;
		uint32_t rkey;

		fill(w, len, (uint8_t)(v->seed + i));
		resolve(x, off, len, &raddr, &rkey);
		g_assert_cmpint(xport_write(x, mr, w, len, raddr, rkey), ==, 0);
		memset(r, 0, len);
		g_assert_cmpint(xport_read(x, mr, r, len, raddr, rkey), ==, 0);
		g_assert_cmpmem(r, len, w, len);
	}
	xport_dereg_mr(x, mr);
	xport_close(x);
	return NULL;
}

static void test_two_clients(struct fx *f, gconstpointer data)
{
	struct verifier v[2] = {
		{ .f = f, .token = TOKEN_A, .pool = "alices", .seed = 1, .rounds = 64 },
		{ .f = f, .token = TOKEN_B, .pool = "bobs", .seed = 2, .rounds = 64 },
	};
	GThread *t[2];

	(void)data;
	for (int i = 0; i < 2; i++) {
		v[i].buf = g_malloc0(1 << 20);
		t[i] = g_thread_new("verifier", verifier_main, &v[i]);
	}
	for (int i = 0; i < 2; i++) {
		g_thread_join(t[i]);
		g_free(v[i].buf);
	}
}

static void test_skipped(gconstpointer reason)
{
	g_test_skip(reason);
}

int main(int argc, char **argv)
{
	const char *skip = NULL;

	g_test_init(&argc, &argv, NULL);
	if (!xport_available(test_transport()))
		skip = "transport not built";
	else if (is_rdma() && !xport_rdma_device_present())
		skip = "no RDMA device on this host";
	if (skip) {
		g_test_add_data_func("/xport-pools/skipped", skip, test_skipped);
		return g_test_run();
	}
	g_test_add("/xport-pools/forged-rkey", struct fx, NULL, fx_setup, test_forged_rkey,
		   fx_teardown);
	g_test_add("/xport-pools/tokens", struct fx, NULL, fx_setup, test_tokens, fx_teardown);
	g_test_add("/xport-pools/two-clients", struct fx, NULL, fx_setup, test_two_clients,
		   fx_teardown);
	return g_test_run();
}
