// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test_cache.c - the block cache (fuse-client/data/cache*.c) over io, meta and a
 * real memserver: reads and writes against a mirror under eviction
 * pressure, one fetch in flight per block with concurrent readers, dirty
 * range tracking (what write-back actually sends), readahead, write-back by
 * the write-back thread (waited for with a timeout, never timed), ENOSPC at write
 * time, a server error during write-back reported at fsync and at close
 * (once), truncation of dirty data, write-through mode, and ordered mode
 * across a crash: a block reserved for an unflushed write never shows
 * another file's old bytes.
 *
 * Each test spawns its own memserver on an ephemeral port (RMEM_BUILD_DIR)
 * and kills it in teardown. The cache's counters are read through
 * cache_int.h.
 */
#define G_LOG_DOMAIN "rmemfs-test-cache"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <glib.h>

#include "commit.h"
#include "memserver_fx.h"
#include "cache.h"
#include "cache_int.h"
#include "fsck.h"
#include "io.h"
#include "meta.h"
#include "mount.h"
#include "remote.h"

#define ROOT META_ROOT_INO

static const struct meta_cred root_cred = { .uid = 0, .gid = 0 };

struct fx {
	GPid pid;
	struct remote *r;
	struct meta *m;
	struct io *io;
	struct cache *c;
};

/* ---- memserver and the stack above it ---- */

static void fx_server(struct fx *f, const char *size)
{
	/* a short op timeout: the write-back tests kill the server under the cache */
	f->r = tfx_memserver_start(size, 3000, &f->pid);
}

static void fx_mount(struct fx *f, int takeover_ms)
{
	struct mount_opts o = { .holder_name = "test-cache",
				     .lease_takeover_ms = takeover_ms };
	char *msg = NULL;
	int rc;

	rc = mount_open(f->r, &o, &f->m, &msg);
	if (rc < 0)
		g_error("mount_open: %s (%s)", g_strerror(-rc), msg ? msg : "-");
	f->io = io_create(f->m, f->r, true);
}

static void fx_cache(struct fx *f, const struct cache_config *cfg)
{
	g_assert_cmpint(cache_create(cfg, f->io, &f->c), ==, 0);
}

/* a clean unmount of everything above the remote */
static void fx_unmount(struct fx *f)
{
	if (f->c)
		g_assert_cmpint(cache_flush_all(f->c), ==, 0);
	cache_destroy(f->c);
	f->c = NULL;
	io_destroy(f->io);
	f->io = NULL;
	if (f->m)
		g_assert_cmpint(mount_close(f->m), ==, 0);
	f->m = NULL;
}

/* a crash: nothing more is written (the lease stays held) */
static void fx_crash(struct fx *f)
{
	cache_destroy(f->c);
	f->c = NULL;
	io_destroy(f->io);
	f->io = NULL;
	mount_abandon(f->m);
	f->m = NULL;
}

static void fx_kill_server(struct fx *f)
{
	tfx_memserver_kill(&f->pid);
}

static void fx_stop_server(struct fx *f)
{
	tfx_memserver_stop(&f->r, &f->pid);
}

static void setup_64m(struct fx *f, gconstpointer d)
{
	memset(f, 0, sizeof(*f));
	fx_server(f, "64M");
	fx_mount(f, 10000);
}

static void setup_16m(struct fx *f, gconstpointer d)
{
	memset(f, 0, sizeof(*f));
	fx_server(f, "16M");
	fx_mount(f, 10000);
}

static void teardown(struct fx *f, gconstpointer d)
{
	if (f->m)
		fx_unmount(f);
	fx_stop_server(f);
}

/* ---- helpers ---- */

static struct cache_config config(uint64_t size, uint32_t bs, bool writeback)
{
	struct cache_config cfg = {
		.size = size,
		.block_size = bs,
		.readahead = 0,
		.writeback = writeback,
	};

	return cfg;
}

static uint64_t mkfile(struct fx *f, const char *name)
{
	struct meta_attr a;

	g_assert_cmpint(meta_mknod(f->m, ROOT, name, S_IFREG | 0644, 0, &root_cred, &a), ==, 0);
	return a.ino;
}

static uint64_t file_size(struct fx *f, uint64_t ino)
{
	struct meta_attr a;

	g_assert_cmpint(meta_getattr(f->m, ino, &a), ==, 0);
	return a.size;
}

static void fill_pattern(uint8_t *p, size_t len, uint32_t seed)
{
	GRand *r = g_rand_new_with_seed(seed);
	size_t i;

	for (i = 0; i < len; i++)
		p[i] = (uint8_t)g_rand_int(r);
	g_rand_free(r);
}

static void cwrite(struct fx *f, uint64_t ino, uint64_t off, const void *buf, size_t len)
{
	g_assert_cmpint(cache_write(f->c, ino, off, buf, len, true), ==, (gssize)len);
}

/* the whole file through the cache equals want[0..len) */
static void check_cached(struct fx *f, uint64_t ino, const uint8_t *want, size_t len)
{
	uint8_t *got = g_malloc(len + 1);

	g_assert_cmpint(cache_read(f->c, ino, 0, len + 1, got), ==, (gssize)len);
	g_assert_true(memcmp(got, want, len) == 0);
	g_free(got);
}

/* the first len bytes of a file as the pool has them (io's fetch path, not the cache) */
static void pool_read(struct fx *f, uint64_t ino, size_t len, void *buf)
{
	struct io_piece p = { .off = 0, .len = len, .buf = buf };

	g_assert_cmpint(io_readv(f->io, ino, &p, 1), ==, 0);
}

/* the whole file as the pool has it (io, not the cache) equals want[0..len) */
static void check_pool(struct fx *f, uint64_t ino, const uint8_t *want, size_t len)
{
	uint8_t *got = g_malloc(len + 1);

	g_assert_cmpuint(file_size(f, ino), ==, len);
	pool_read(f, ino, len, got);
	if (memcmp(got, want, len) != 0) {
		size_t i = 0;

		while (got[i] == want[i])
			i++;
		g_error("the pool differs from the mirror at byte %zu of %zu (%02x, want %02x; then %02x/%02x)",
			i, len, got[i], want[i], got[i + 1], want[i + 1]);
	}
	g_free(got);
}

static uint64_t counter(const uint64_t *p)
{
	return __atomic_load_n(p, __ATOMIC_RELAXED);
}

static unsigned int ndirty(struct cache *c)
{
	unsigned int n;

	pthread_mutex_lock(&c->lock);
	n = c->ndirty;
	pthread_mutex_unlock(&c->lock);
	return n;
}

/* truncate through the cache's exclusive section, as ops.c does */
static void ctruncate(struct fx *f, uint64_t ino, uint64_t size)
{
	struct meta_setattr sa = { .valid = META_SET_SIZE, .size = size };
	struct meta_attr a;

	g_assert_cmpint(cache_begin_exclusive(f->c, ino, size), ==, 0);
	g_assert_cmpint(io_truncate(f->io, ino, &sa, &root_cred, &a), ==, 0);
	cache_end_exclusive(f->c, ino, size, UINT64_MAX);
}

/* a file of len pattern bytes written back to the pool, then a new (cold) cache */
static uint64_t mkfile_cold(struct fx *f, const struct cache_config *cfg, const char *name,
			    uint8_t *data, size_t len, uint32_t seed)
{
	uint64_t ino;

	fx_cache(f, cfg);
	ino = mkfile(f, name);
	fill_pattern(data, len, seed);
	cwrite(f, ino, 0, data, len);
	g_assert_cmpint(cache_flush(f->c, ino), ==, 0);
	cache_destroy(f->c);
	f->c = NULL;
	fx_cache(f, cfg);
	return ino;
}

/* ---- tests ---- */

/*
 * Random writes, reads, truncates and flushes against a mirror, in a cache
 * far smaller than the file (eviction all the time), then a remount.
 */
static void run_random(struct fx *f, uint32_t bs, bool writeback, uint32_t seed)
{
	const size_t max = 3U << 20;
	struct cache_config cfg = config(32ULL * bs, bs, writeback);
	uint8_t *mirror = g_malloc0(max), *buf = g_malloc(max);
	GRand *r = g_rand_new_with_seed(seed);
	size_t size = 0;
	uint64_t ino;
	int i;

	cfg.readahead = 8ULL * bs;
	fx_cache(f, &cfg);
	ino = mkfile(f, "random");
	for (i = 0; i < 600; i++) {
		unsigned int op = (unsigned int)g_rand_int_range(r, 0, 100);
		size_t off = (size_t)g_rand_int_range(r, 0, (gint32)(max - 300000));
		size_t len = (size_t)g_rand_int_range(r, 1, 300000);

		if (op < 45) {
			fill_pattern(buf, len, (uint32_t)i);
			cwrite(f, ino, off, buf, len);
			memcpy(mirror + off, buf, len);
			size = MAX(size, off + len);
		} else if (op < 85) {
			gssize want = off >= size ? 0 : (gssize)MIN(len, size - off);

			g_assert_cmpint(cache_read(f->c, ino, off, len, buf), ==, want);
			g_assert_true(memcmp(buf, mirror + off, (size_t)want) == 0);
		} else if (op < 93) {
			size_t to = (size_t)g_rand_int_range(r, 0, (gint32)max);

			ctruncate(f, ino, to);
			if (to < size)
				memset(mirror + to, 0, size - to);
			size = to;
		} else {
			g_assert_cmpint(cache_flush(f->c, ino), ==, 0);
			check_pool(f, ino, mirror, size);
		}
		g_assert_cmpuint(file_size(f, ino), ==, size);
	}
	check_cached(f, ino, mirror, size);
	g_assert_cmpuint(counter(&f->c->st.evictions), >, 0);
	g_assert_cmpuint(f->c->nslots - f->c->nfree, <=, 32);

	/* everything reaches the pool and survives a remount */
	fx_unmount(f);
	fx_mount(f, 10000);
	fx_cache(f, &cfg);
	g_assert_cmpint(meta_lookup(f->m, ROOT, "random", &(struct meta_attr){ 0 }), ==, 0);
	meta_forget(f->m, ino, 1);
	check_pool(f, ino, mirror, size);
	check_cached(f, ino, mirror, size);
	g_rand_free(r);
	g_free(mirror);
	g_free(buf);
}

static void test_random_4k(struct fx *f, gconstpointer d)
{
	run_random(f, 4096, true, 1);
}

static void test_random_64k(struct fx *f, gconstpointer d)
{
	run_random(f, 64 << 10, true, 2);
}

static void test_random_write_through(struct fx *f, gconstpointer d)
{
	run_random(f, 16 << 10, false, 3);
}

struct reader {
	struct fx *f;
	uint64_t ino;
	size_t len;
	const uint8_t *want;
	pthread_barrier_t *start;
	gssize got;
	bool same;
};

static void *reader_main(void *arg)
{
	struct reader *rd = arg;
	uint8_t *buf = g_malloc(rd->len);

	pthread_barrier_wait(rd->start);
	rd->got = cache_read(rd->f->c, rd->ino, 0, rd->len, buf);
	rd->same = rd->got == (gssize)rd->len && memcmp(buf, rd->want, rd->len) == 0;
	g_free(buf);
	return NULL;
}

static uint64_t remote_read_bytes(struct fx *f)
{
	struct io_stats st;

	io_get_stats(f->io, &st);
	return st.bytes_read;
}

/*
 * A random read that misses fetches its own range (sub-block aligned), not
 * the whole block; reading more of such a block later fills it, a write
 * into it keeps both, and the tail block past EOF reads as zeros.
 */
static void test_random_read_narrow(struct fx *f, gconstpointer d)
{
	struct cache_config cfg = config(4U << 20, 64U << 10, true);
	const size_t len = (1U << 20) + 100;
	uint8_t *data = g_malloc(len), *buf = g_malloc(len);
	uint64_t ino, before, fills;

	ino = mkfile_cold(f, &cfg, "narrow", data, len, 21);

	/* 4 KiB in the middle of block 3, not at a stream's start: 4 KiB move */
	before = remote_read_bytes(f);
	g_assert_cmpint(cache_read(f->c, ino, 200000, 4096, buf), ==, 4096);
	g_assert_true(memcmp(buf, data + 200000, 4096) == 0);
	/* 200000..204096 spans two 4 KiB sub-blocks: block 3 (from 196608) holds [0, 8192) */
	g_assert_cmpuint(remote_read_bytes(f) - before, ==, 8192);
	g_assert_cmpuint(counter(&f->c->st.misses), ==, 1);

	/* the same range again is a hit; a range around it fills the block */
	g_assert_cmpint(cache_read(f->c, ino, 200000, 4096, buf), ==, 4096);
	g_assert_cmpuint(counter(&f->c->st.hits), ==, 1);
	g_assert_cmpint(cache_read(f->c, ino, 196608 - 100, 16000, buf), ==, 16000);
	g_assert_true(memcmp(buf, data + 196608 - 100, 16000) == 0);
	g_assert_cmpuint(counter(&f->c->st.fills), >=, 1);

	/* a narrow block gets a write far from its valid range */
	g_assert_cmpint(cache_read(f->c, ino, 700000, 100, buf), ==, 100);
	g_assert_true(memcmp(buf, data + 700000, 100) == 0);
	memset(data + 720000, 0xab, 300);
	cwrite(f, ino, 720000, data + 720000, 300);

	/* a random read elsewhere in a narrow block fetches just its own sub-blocks */
	g_assert_cmpint(cache_read(f->c, ino, 400000, 4096, buf), ==, 4096);
	g_assert_cmpint(cache_read(f->c, ino, 900000, 100, buf), ==, 100);
	fills = counter(&f->c->st.fills);
	before = remote_read_bytes(f);
	g_assert_cmpint(cache_read(f->c, ino, 440000, 4096, buf), ==, 4096);
	g_assert_true(memcmp(buf, data + 440000, 4096) == 0);
	g_assert_cmpuint(remote_read_bytes(f) - before, ==, 8192);
	g_assert_cmpuint(counter(&f->c->st.fills), ==, fills + 1);

	/* the last block holds 100 bytes of the file: a narrow read there */
	g_assert_cmpint(cache_read(f->c, ino, (1U << 20) + 50, 4096, buf), ==, 50);
	g_assert_true(memcmp(buf, data + (1U << 20) + 50, 50) == 0);

	check_cached(f, ino, data, len);
	g_assert_cmpint(cache_flush(f->c, ino), ==, 0);
	check_pool(f, ino, data, len);
	g_free(data);
	g_free(buf);
}

/* eight readers of one cold block: one fetch, seven waits or hits */
static void test_one_fetch_per_block(struct fx *f, gconstpointer d)
{
	const size_t len = 1U << 20;
	struct cache_config cfg = config(32U << 20, 1U << 20, true);
	uint8_t *data = g_malloc(len);
	struct reader rd[8];
	pthread_t th[8];
	pthread_barrier_t start;
	uint64_t ino;
	int round, i;

	fill_pattern(data, len, 7);
	fx_cache(f, &cfg);
	ino = mkfile(f, "shared");
	cwrite(f, ino, 0, data, len);
	fx_unmount(f); /* to the pool, and a cold cache after */
	fx_mount(f, 10000);
	for (round = 0; round < 3; round++) {
		fx_cache(f, &cfg);
		pthread_barrier_init(&start, NULL, G_N_ELEMENTS(th));
		for (i = 0; i < (int)G_N_ELEMENTS(th); i++) {
			rd[i] = (struct reader){ .f = f, .ino = ino, .len = len, .want = data,
						 .start = &start };
			g_assert_cmpint(pthread_create(&th[i], NULL, reader_main, &rd[i]), ==, 0);
		}
		for (i = 0; i < (int)G_N_ELEMENTS(th); i++) {
			pthread_join(th[i], NULL);
			g_assert_true(rd[i].same);
		}
		pthread_barrier_destroy(&start);
		g_assert_cmpuint(counter(&f->c->st.misses), ==, 1);
		g_assert_cmpuint(counter(&f->c->st.fetch_batches), ==, 1);
		g_assert_cmpuint(counter(&f->c->st.hits), ==, G_N_ELEMENTS(th) - 1);
		cache_destroy(f->c);
		f->c = NULL;
	}
	g_free(data);
}

/*
 * What a write reads and what write-back sends: whole 4 KiB sub-blocks; a
 * write reads only the sub-blocks it covers partly inside the file (holes
 * cost nothing), never the rest of a partly valid block, dirty or not.
 */
static void test_dirty_ranges(struct fx *f, gconstpointer d)
{
	struct cache_config cfg = config(4U << 20, 64U << 10, true);
	uint8_t want[200000] = { 0 }, a[100], b[100], page[4096];
	struct io_stats s0, s1;
	uint64_t ino, batches;

	fx_cache(f, &cfg);
	ino = mkfile(f, "ranges");
	fill_pattern(a, sizeof(a), 1);
	fill_pattern(b, sizeof(b), 2);
	fill_pattern(page, sizeof(page), 3);

	/* a sparse file: its blocks are below EOF but not in the pool */
	ctruncate(f, ino, sizeof(want));

	/* 100 bytes into a hole: its sub-block is "read" (zeros, no pool access), 4 KiB go out */
	io_get_stats(f->io, &s0);
	cwrite(f, ino, 1000, a, sizeof(a));
	memcpy(want + 1000, a, sizeof(a));
	g_assert_cmpint(cache_flush(f->c, ino), ==, 0);
	io_get_stats(f->io, &s1);
	g_assert_cmpuint(s1.bytes_read - s0.bytes_read, ==, 0);
	g_assert_cmpuint(s1.bytes_written - s0.bytes_written, ==, 4096);
	check_pool(f, ino, want, sizeof(want));

	/* the same block is now partly valid and clean; an aligned write elsewhere reads nothing */
	batches = counter(&f->c->st.fetch_batches);
	cwrite(f, ino, 40960, page, sizeof(page));
	memcpy(want + 40960, page, sizeof(page));
	g_assert_cmpuint(counter(&f->c->st.fetch_batches), ==, batches);
	/* and while it is dirty, another one: still nothing read, no fill */
	cwrite(f, ino, 12288, page, sizeof(page));
	memcpy(want + 12288, page, sizeof(page));
	g_assert_cmpuint(counter(&f->c->st.fetch_batches), ==, batches);
	g_assert_cmpuint(counter(&f->c->st.fills), ==, 0);
	io_get_stats(f->io, &s0);
	g_assert_cmpint(cache_flush(f->c, ino), ==, 0);
	io_get_stats(f->io, &s1);
	g_assert_cmpuint(s1.bytes_written - s0.bytes_written, ==, 2 * 4096);
	check_pool(f, ino, want, sizeof(want));

	/* an unaligned write over written pool data reads its two edge sub-blocks */
	io_get_stats(f->io, &s0);
	cwrite(f, ino, 40960 + 4000, b, sizeof(b)); /* sub-blocks 10 (valid) and 11 (a hole) */
	memcpy(want + 40960 + 4000, b, sizeof(b));
	cwrite(f, ino, 65536 + 100, a, sizeof(a)); /* block 1: not cached; the pool has zeros */
	memcpy(want + 65536 + 100, a, sizeof(a));
	g_assert_cmpint(cache_flush(f->c, ino), ==, 0);
	io_get_stats(f->io, &s1);
	g_assert_cmpuint(s1.bytes_written - s0.bytes_written, ==, 3 * 4096);
	check_pool(f, ino, want, sizeof(want));

	/* two writes into one sub-block before a flush: still one sub-block */
	cwrite(f, ino, 30000, a, 10);
	cwrite(f, ino, 30050, b, 10);
	memcpy(want + 30000, a, 10);
	memcpy(want + 30050, b, 10);
	io_get_stats(f->io, &s0);
	g_assert_cmpint(cache_flush(f->c, ino), ==, 0);
	io_get_stats(f->io, &s1);
	g_assert_cmpuint(s1.bytes_written - s0.bytes_written, ==, 4096);
	check_pool(f, ino, want, sizeof(want));
	check_cached(f, ino, want, sizeof(want));

	/* past EOF nothing is read: zeros around the write, one whole sub-block goes out */
	batches = counter(&f->c->st.fetch_batches);
	cwrite(f, ino, sizeof(want) + 70000, a, sizeof(a));
	g_assert_cmpuint(counter(&f->c->st.fetch_batches), ==, batches);
	io_get_stats(f->io, &s0);
	g_assert_cmpint(cache_flush(f->c, ino), ==, 0);
	io_get_stats(f->io, &s1);
	g_assert_cmpuint(s1.bytes_written - s0.bytes_written, ==, 4096);
}

/* the write-back thread writes dirty data back by age: waited for, not timed */
static void test_writeback_by_age(struct fx *f, gconstpointer d)
{
	struct cache_config cfg = config(8U << 20, 16U << 10, true);
	const size_t len = 1U << 20;
	uint8_t *data = g_malloc(len);
	gint64 deadline;
	uint64_t ino;

	cfg.dirty_expire_ms = 50;
	cfg.flush_interval_ms = 10;
	fx_cache(f, &cfg);
	ino = mkfile(f, "aged");
	fill_pattern(data, len, 11);
	cwrite(f, ino, 0, data, len);
	g_assert_cmpuint(ndirty(f->c), >, 0);
	deadline = g_get_monotonic_time() + 20 * G_USEC_PER_SEC;
	while (ndirty(f->c) && g_get_monotonic_time() < deadline)
		g_usleep(10000);
	g_assert_cmpuint(ndirty(f->c), ==, 0);
	g_assert_cmpuint(counter(&f->c->st.wb_batches), >, 0);
	check_pool(f, ino, data, len);
	g_free(data);
}

/* above dirty_max writers wait for the write-back thread; nothing is lost */
static void test_dirty_throttle(struct fx *f, gconstpointer d)
{
	struct cache_config cfg = config(64ULL * 4096, 4096, true);
	const size_t len = 2U << 20;
	uint8_t *data = g_malloc(len);
	uint64_t ino;
	size_t off;

	cfg.dirty_expire_ms = 60000; /* only the ratio can start write-back */
	fx_cache(f, &cfg);
	ino = mkfile(f, "throttled");
	fill_pattern(data, len, 12);
	for (off = 0; off < len; off += 8192)
		cwrite(f, ino, off, data + off, 8192);
	g_assert_cmpuint(counter(&f->c->st.throttled), >, 0);
	/* a writer checks before it writes: at most one write (2 blocks) above the mark */
	g_assert_cmpuint(ndirty(f->c), <=, f->c->dirty_max + 2);
	check_cached(f, ino, data, len);
	g_assert_cmpint(cache_flush(f->c, ino), ==, 0);
	check_pool(f, ino, data, len);
	g_free(data);
}

static void test_readahead(struct fx *f, gconstpointer d)
{
	struct cache_config cfg = config(16U << 20, 64U << 10, true);
	const size_t len = 4U << 20, step = 128U << 10;
	uint8_t *data = g_malloc(len), *buf = g_malloc(step);
	uint64_t ino;
	size_t off;

	cfg.readahead = 1U << 20;
	ino = mkfile_cold(f, &cfg, "stream", data, len, 13);
	for (off = 0; off < len; off += step) {
		g_assert_cmpint(cache_read(f->c, ino, off, step, buf), ==, (gssize)step);
		g_assert_true(memcmp(buf, data + off, step) == 0);
	}
	/* after the first read or two, readahead was there first */
	g_assert_cmpuint(counter(&f->c->st.ra_blocks), >=, len / cfg.block_size / 2);
	g_assert_cmpuint(counter(&f->c->st.ra_hits), >=, len / cfg.block_size / 2);
	g_assert_cmpuint(counter(&f->c->st.misses), <=, 4);
	g_free(data);
	g_free(buf);
}

/* a full pool is the write's error; what was written before stays */
static void test_enospc_at_write(struct fx *f, gconstpointer d)
{
	struct cache_config cfg = config(64U << 20, 64U << 10, true);
	uint8_t *chunk = g_malloc(1U << 20);
	uint64_t ino, written = 0;
	gssize n;
	int i;

	fx_cache(f, &cfg);
	ino = mkfile(f, "filler");
	fill_pattern(chunk, 1U << 20, 5);
	for (i = 0; i < 32; i++) {
		n = cache_write(f->c, ino, written, chunk, 1U << 20, true);
		if (n < 0)
			break;
		g_assert_cmpint(n, ==, 1U << 20);
		written += (uint64_t)n;
	}
	g_assert_cmpint(n, ==, -ENOSPC);
	g_assert_cmpuint(written, >=, 8U << 20);
	g_assert_cmpuint(file_size(f, ino), ==, written);
	g_assert_cmpint(cache_flush(f->c, ino), ==, 0);
	g_assert_cmpint(cache_close(f->c, ino), ==, 0);
	g_assert_cmpuint(file_size(f, ino), ==, written);
	g_free(chunk);
}

/*
 * The server dies (reconnect_timeout 0: the pool is lost at once): fsync
 * reports the write-back error; a write-back thread error goes to close, once; the
 * failed remote refuses new writes.
 */
static void test_writeback_error(struct fx *f, gconstpointer d)
{
	struct cache_config cfg = config(8U << 20, 64U << 10, true);
	uint8_t data[65536];
	gint64 deadline;
	uint64_t ino, ino2;
	int rc;

	cfg.dirty_expire_ms = 60000;
	cfg.flush_interval_ms = 10;
	fx_cache(f, &cfg);
	ino = mkfile(f, "doomed");
	ino2 = mkfile(f, "doomed2");
	fill_pattern(data, sizeof(data), 9);
	cwrite(f, ino, 0, data, sizeof(data));
	cwrite(f, ino2, 0, data, sizeof(data));
	fx_kill_server(f);

	rc = cache_flush(f->c, ino);
	g_assert_cmpint(rc, <, 0);
	g_assert_cmpint(cache_close(f->c, ino), ==, 0); /* reported once, by the fsync */
	g_assert_true(remote_failed(f->r));
	g_assert_cmpint(cache_write(f->c, ino, 0, data, sizeof(data), true), ==, -EIO);

	/* the write-back thread meets the error: the next close reports it */
	f->c->expire_ns = 1000000; /* (the test owns the cache: no lock needed for a policy knob) */
	cache_wake_writeback(f->c);
	deadline = g_get_monotonic_time() + 60 * G_USEC_PER_SEC;
	while (counter(&f->c->st.wb_errors) < 2 && g_get_monotonic_time() < deadline)
		g_usleep(10000);
	g_assert_cmpuint(counter(&f->c->st.wb_errors), >=, 2);
	rc = cache_close(f->c, ino2);
	g_assert_cmpint(rc, <, 0);
	g_assert_cmpint(cache_close(f->c, ino2), ==, 0);
	fx_crash(f);
}

/* truncating dirty data: what lies past the new size is never written */
static void test_truncate_dirty(struct fx *f, gconstpointer d)
{
	struct cache_config cfg = config(8U << 20, 64U << 10, true);
	const size_t len = 1U << 20, cut = 100000;
	uint8_t *data = g_malloc(len), *want = g_malloc0(600000);
	struct io_stats s0, s1;
	uint64_t ino;

	cfg.dirty_expire_ms = 60000;
	fx_cache(f, &cfg);
	ino = mkfile(f, "cut");
	fill_pattern(data, len, 21);
	io_get_stats(f->io, &s0);
	cwrite(f, ino, 0, data, len);
	ctruncate(f, ino, cut);
	io_get_stats(f->io, &s1);
	/* only the blocks below the cut went out (the last one whole: it was dirty whole) */
	g_assert_cmpuint(s1.bytes_written - s0.bytes_written, <=, 2 * cfg.block_size);
	memcpy(want, data, cut);
	check_pool(f, ino, want, cut);
	/* grow again: the bytes between are zeros, in the cache and in the pool */
	cwrite(f, ino, 500000, data, 1000);
	memcpy(want + 500000, data, 1000);
	check_cached(f, ino, want, 501000);
	g_assert_cmpint(cache_flush(f->c, ino), ==, 0);
	check_pool(f, ino, want, 501000);
	g_free(data);
	g_free(want);
}

/*
 * Ordered mode across a crash. B's write reserves blocks (very likely the
 * ones A just gave back, full of A's bytes) and its size becomes durable,
 * but its data never reaches the pool: after the crash B reads as zeros
 * (or is empty), never as A's bytes. C was fsync'd: it is intact. fsck
 * finds nothing.
 */
static void test_crash_ordered(struct fx *f, gconstpointer d)
{
	struct cache_config cfg = config(32U << 20, 64U << 10, true);
	const size_t len = 512U << 10;
	uint8_t *a = g_malloc(len), *b = g_malloc(len), *c = g_malloc(len);
	uint8_t *zero = g_malloc0(len), *got;
	struct fsck_opts fo = { 0 };
	struct fsck_report rep;
	struct meta_attr attr;
	uint64_t ia, ib, ic;
	char *msg = NULL;

	/* and far below dirty_bg (of the first chunk): nothing is written back by itself */
	cfg.dirty_expire_ms = 60000;
	cfg.dirty_bg_pct = 25;
	fx_cache(f, &cfg);
	fill_pattern(a, len, 31);
	fill_pattern(b, len, 33);
	fill_pattern(c, len, 32);
	ia = mkfile(f, "a");
	cwrite(f, ia, 0, a, len);
	g_assert_cmpint(cache_flush(f->c, ia), ==, 0);
	g_assert_cmpint(commit_sync(f->m), ==, 0);
	g_assert_cmpint(meta_unlink(f->m, ROOT, "a"), ==, 0);
	cache_forget(f->c, ia);
	g_assert_cmpint(commit_sync(f->m), ==, 0); /* A's blocks are free for good */

	ib = mkfile(f, "b");
	cwrite(f, ib, 0, b, len); /* only in the cache */
	ic = mkfile(f, "c");
	cwrite(f, ic, 0, c, len);
	g_assert_cmpint(cache_flush(f->c, ic), ==, 0);
	g_assert_cmpint(commit_sync(f->m), ==, 0);
	g_assert_cmpuint(ndirty(f->c), ==, len / cfg.block_size); /* B's blocks, still dirty */
	g_assert_cmpuint(counter(&f->c->st.wb_blocks), ==, 2 * len / cfg.block_size); /* A, C */
	fx_crash(f);

	fx_mount(f, 2000); /* a short takeover, but room for a loaded machine's heartbeat */
	g_assert_cmpint(meta_lookup(f->m, ROOT, "b", &attr), ==, 0);
	g_assert_cmpuint(attr.ino, ==, ib);
	got = g_malloc(len);
	if (attr.size) {
		g_assert_cmpuint(attr.size, ==, len);
		pool_read(f, ib, len, got);
		g_assert_true(memcmp(got, zero, len) == 0);
	}
	meta_forget(f->m, ib, 1);
	g_assert_cmpint(meta_lookup(f->m, ROOT, "c", &attr), ==, 0);
	meta_forget(f->m, ic, 1);
	check_pool(f, ic, c, len);
	fx_unmount(f);

	fsck_report_init(&rep);
	g_assert_cmpint(mount_fsck(f->r, &fo, &rep, &msg), ==, 0);
	g_assert_null(msg);
	g_assert_cmpuint(rep.problems, ==, 0);
	fsck_report_clear(&rep);
	g_free(a);
	g_free(b);
	g_free(c);
	g_free(zero);
	g_free(got);
}

/* the stats text has every counter and fits its bound */
static void test_stats_text(struct fx *f, gconstpointer d)
{
	struct cache_config cfg = config(4U << 20, 64U << 10, true);
	char *buf = g_malloc(CACHE_STATS_MAX);
	uint8_t data[5000];
	uint64_t ino;
	gssize n;

	fx_cache(f, &cfg);
	ino = mkfile(f, "s");
	fill_pattern(data, sizeof(data), 3);
	cwrite(f, ino, 0, data, sizeof(data));
	cache_note_latency(f->c, CACHE_OP_WRITE, 12345);
	check_cached(f, ino, data, sizeof(data));
	n = cache_stats_text(f->c, buf, CACHE_STATS_MAX);
	g_assert_cmpint(n, >, 0);
	g_assert_cmpint(n, <, CACHE_STATS_MAX);
	g_assert_nonnull(strstr(buf, "\nhits 1\n"));
	g_assert_nonnull(strstr(buf, "\nbytes_written 5000\n"));
	g_assert_nonnull(strstr(buf, "lat_write_us count 1 "));
	g_assert_nonnull(strstr(buf, "readahead_hits "));
	g_assert_nonnull(strstr(buf, "evictions "));
	g_assert_nonnull(strstr(buf, "flushes "));
	g_assert_cmpint(cache_stats_text(f->c, buf, 100), ==, -ERANGE);
	g_free(buf);
}

int main(int argc, char **argv)
{
	g_test_init(&argc, &argv, NULL);
	signal(SIGPIPE, SIG_IGN);
#define ADD(path, setup, fn) g_test_add("/cache/" path, struct fx, NULL, setup, fn, teardown)
	ADD("random/4k", setup_64m, test_random_4k);
	ADD("random/64k", setup_64m, test_random_64k);
	ADD("random/write-through", setup_64m, test_random_write_through);
	ADD("one-fetch-per-block", setup_64m, test_one_fetch_per_block);
	ADD("random-read-narrow", setup_64m, test_random_read_narrow);
	ADD("dirty-ranges", setup_64m, test_dirty_ranges);
	ADD("writeback-by-age", setup_64m, test_writeback_by_age);
	ADD("dirty-throttle", setup_64m, test_dirty_throttle);
	ADD("readahead", setup_64m, test_readahead);
	ADD("enospc-at-write", setup_16m, test_enospc_at_write);
	ADD("writeback-error", setup_64m, test_writeback_error);
	ADD("truncate-dirty", setup_64m, test_truncate_dirty);
	ADD("crash-ordered", setup_64m, test_crash_ordered);
	ADD("stats-text", setup_64m, test_stats_text);
	return g_test_run();
}
