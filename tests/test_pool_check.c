/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * test_pool_check.c - unit tests of the memserver's pool (memserver/pool.c):
 * the key / bounds / alignment checks the TCP server relies on to act like a
 * NIC (including addresses and lengths chosen to overflow naive arithmetic),
 * the region table, parameter checks, and a backing file that keeps its data
 * and pool_id across close/reopen and refuses a size mismatch.
 */
#define G_LOG_DOMAIN "rmemfs-test-pool"

#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <glib/gstdio.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pool.h"
#include "proto.h"

#define MIB (1ULL << 20)

static struct pool *open_anon(uint64_t size, uint64_t chunk)
{
	struct pool_params pp = { .size = size, .chunk_size = chunk };
	struct pool *pool = NULL;
	char why[256];
	int rc;

	rc = pool_open(&pp, &pool, why, sizeof(why));
	if (rc)
		g_error("pool_open: %s (%s)", g_strerror(-rc), why);
	return pool;
}

static uint64_t region_addr(const struct pool_region *r)
{
	return (uintptr_t)r->base;
}

/* a key that names no region of this pool */
static uint32_t foreign_key(const struct pool *pool)
{
	uint32_t k = 0x12345678;

	for (;;) {
		unsigned int i;
		bool used = false;

		for (i = 0; i < pool_region_count(pool); i++)
			used |= pool_region_get(pool, i)->key == k;
		if (!used)
			return k;
		k = k * 2654435761U + 1;
	}
}

static void test_single_region_bounds(void)
{
	struct pool *pool = open_anon(16 * MIB, 0);
	const struct pool_region *r;
	uint64_t base, len;
	void *ptr = NULL;

	g_assert_cmpuint(pool_region_count(pool), ==, 1);
	r = pool_region_get(pool, 0);
	g_assert_nonnull(r);
	g_assert_null(pool_region_get(pool, 1));
	base = region_addr(r);
	len = r->len;
	g_assert_cmpuint(len, ==, 16 * MIB);
	g_assert_true(r->base == pool_base(pool));
	g_assert_cmpuint(pool_size(pool), ==, 16 * MIB);
	g_assert_cmpuint(pool_flags(pool), ==, 0);

	/* first byte, whole region, last byte */
	g_assert_cmpint(pool_check(pool, base, r->key, 1, false, &ptr), ==, PROTO_OK);
	g_assert_true(ptr == r->base);
	g_assert_cmpint(pool_check(pool, base, r->key, len, false, &ptr), ==, PROTO_OK);
	g_assert_cmpint(pool_check(pool, base + len - 1, r->key, 1, false, &ptr), ==, PROTO_OK);
	g_assert_true(ptr == (uint8_t *)r->base + len - 1);

	/* one past, one before, one too long */
	ptr = NULL;
	g_assert_cmpint(pool_check(pool, base + len, r->key, 1, false, &ptr), ==, PROTO_E_RANGE);
	g_assert_null(ptr);
	g_assert_cmpint(pool_check(pool, base - 1, r->key, 1, false, &ptr), ==, PROTO_E_RANGE);
	g_assert_cmpint(pool_check(pool, base - 1, r->key, 2, false, &ptr), ==, PROTO_E_RANGE);
	g_assert_cmpint(pool_check(pool, base, r->key, len + 1, false, &ptr), ==, PROTO_E_RANGE);
	g_assert_cmpint(pool_check(pool, base + 1, r->key, len, false, &ptr), ==, PROTO_E_RANGE);
	g_assert_cmpint(pool_check(pool, base + len - 1, r->key, 2, false, &ptr), ==,
			PROTO_E_RANGE);
	g_assert_cmpint(pool_check(pool, 0, r->key, 1, false, &ptr), ==, PROTO_E_RANGE);

	/* zero length: in range anywhere in [base, base+len], never outside */
	g_assert_cmpint(pool_check(pool, base, r->key, 0, false, &ptr), ==, PROTO_OK);
	g_assert_cmpint(pool_check(pool, base + len, r->key, 0, false, &ptr), ==, PROTO_OK);
	g_assert_cmpint(pool_check(pool, base + len + 1, r->key, 0, false, &ptr), ==,
			PROTO_E_RANGE);
	g_assert_cmpint(pool_check(pool, base - 1, r->key, 0, false, &ptr), ==, PROTO_E_RANGE);

	/* the pointer really is pool memory */
	g_assert_cmpint(pool_check(pool, base + 4096, r->key, 4, false, &ptr), ==, PROTO_OK);
	memcpy(ptr, "abcd", 4);
	g_assert_cmpmem((uint8_t *)pool_base(pool) + 4096, 4, "abcd", 4);

	pool_close(pool);
}

static void test_wrong_key(void)
{
	struct pool *pool = open_anon(4 * MIB, 0);
	const struct pool_region *r = pool_region_get(pool, 0);
	uint64_t base = region_addr(r);
	void *ptr = NULL;
	unsigned int bit;

	g_assert_cmpint(pool_check(pool, base, foreign_key(pool), 1, false, &ptr), ==, PROTO_E_KEY);
	for (bit = 0; bit < 32; bit++)
		g_assert_cmpint(pool_check(pool, base, r->key ^ (1U << bit), 1, false, &ptr), ==,
				PROTO_E_KEY);
	/* a wrong key is reported as such even when the range is also wrong */
	g_assert_cmpint(pool_check(pool, UINT64_MAX, r->key ^ 1, 8, true, &ptr), ==, PROTO_E_KEY);
	g_assert_null(ptr);
	pool_close(pool);
}

static void test_overflow(void)
{
	struct pool *pool = open_anon(8 * MIB, 0);
	const struct pool_region *r = pool_region_get(pool, 0);
	uint64_t base = region_addr(r), len = r->len;
	uint32_t k = r->key;
	void *ptr = NULL;

	/* addr + len would wrap to something inside the region */
	g_assert_cmpint(pool_check(pool, UINT64_MAX, k, 2, false, &ptr), ==, PROTO_E_RANGE);
	g_assert_cmpint(pool_check(pool, UINT64_MAX - 7, k, 8, true, &ptr), ==, PROTO_E_RANGE);
	g_assert_cmpint(pool_check(pool, UINT64_MAX, k, base + 1, false, &ptr), ==,
			PROTO_E_RANGE);
	g_assert_cmpint(pool_check(pool, base + 1, k, UINT64_MAX, false, &ptr), ==,
			PROTO_E_RANGE);
	g_assert_cmpint(pool_check(pool, base, k, UINT64_MAX, false, &ptr), ==, PROTO_E_RANGE);
	g_assert_cmpint(pool_check(pool, base + len - 1, k, UINT64_MAX - base - len + 2, false,
				   &ptr),
			==, PROTO_E_RANGE);
	/* len - (addr - base) style underflow: addr far above the region, small len */
	g_assert_cmpint(pool_check(pool, base + (1ULL << 63), k, 1, false, &ptr), ==,
			PROTO_E_RANGE);
	g_assert_cmpint(pool_check(pool, base + len, k, UINT64_MAX, false, &ptr), ==,
			PROTO_E_RANGE);
	g_assert_cmpint(pool_check(pool, UINT64_MAX, k, 0, false, &ptr), ==, PROTO_E_RANGE);
	g_assert_null(ptr);
	pool_close(pool);
}

static void test_atomic_alignment(void)
{
	struct pool *pool = open_anon(4 * MIB, 0);
	const struct pool_region *r = pool_region_get(pool, 0);
	uint64_t base = region_addr(r), len = r->len;
	void *ptr = NULL;
	unsigned int i;

	g_assert_cmpuint(base % 8, ==, 0);
	g_assert_cmpint(pool_check(pool, base, r->key, 8, true, &ptr), ==, PROTO_OK);
	g_assert_cmpint(pool_check(pool, base + len - 8, r->key, 8, true, &ptr), ==, PROTO_OK);
	for (i = 1; i < 8; i++) {
		g_assert_cmpint(pool_check(pool, base + 8 + i, r->key, 8, true, &ptr), ==,
				PROTO_E_ALIGN);
		/* the same range is fine for a plain READ/WRITE */
		g_assert_cmpint(pool_check(pool, base + 8 + i, r->key, 8, false, &ptr), ==,
				PROTO_OK);
	}
	/* outside the region the range error wins */
	g_assert_cmpint(pool_check(pool, base + len - 4, r->key, 8, true, &ptr), ==, PROTO_E_RANGE);
	g_assert_cmpint(pool_check(pool, base + len, r->key, 8, true, &ptr), ==, PROTO_E_RANGE);
	pool_close(pool);
}

/* 3.5 MiB in 1 MiB chunks: four regions, the last one half size */
static void test_region_boundaries(void)
{
	struct pool *pool = open_anon(3 * MIB + MIB / 2, MIB);
	struct proto_pool desc;
	unsigned int i, j, n;
	void *ptr;

	n = pool_region_count(pool);
	g_assert_cmpuint(n, ==, 4);
	g_assert_cmpuint(pool_chunk_size(pool), ==, MIB);
	g_assert_cmpint(pool_describe(pool, &desc), ==, 0);
	g_assert_cmpuint(desc.nregions, ==, 4);
	g_assert_cmpuint(desc.size, ==, 3 * MIB + MIB / 2);
	g_assert_cmpuint(desc.pool_id, ==, pool_id(pool));

	for (i = 0; i < n; i++) {
		const struct pool_region *r = pool_region_get(pool, i);
		uint64_t base = region_addr(r);

		g_assert_cmpuint(r->offset, ==, i * MIB);
		g_assert_cmpuint(r->len, ==, i == 3 ? MIB / 2 : MIB);
		g_assert_true(r->base == (uint8_t *)pool_base(pool) + r->offset);
		g_assert_cmpuint(desc.regions[i].addr, ==, base);
		g_assert_cmpuint(desc.regions[i].len, ==, r->len);
		g_assert_cmpuint(desc.regions[i].rkey, ==, r->key);
		for (j = 0; j < i; j++)
			g_assert_cmpuint(pool_region_get(pool, j)->key, !=, r->key);

		g_assert_cmpint(pool_check(pool, base, r->key, r->len, false, &ptr), ==, PROTO_OK);
		g_assert_cmpint(pool_check(pool, base + r->len - 8, r->key, 8, true, &ptr), ==,
				PROTO_OK);
		/* crossing into the next region is out of range even though it is pool memory */
		g_assert_cmpint(pool_check(pool, base + r->len - 4, r->key, 8, false, &ptr), ==,
				PROTO_E_RANGE);
		g_assert_cmpint(pool_check(pool, base + r->len, r->key, 1, false, &ptr), ==,
				PROTO_E_RANGE);
		g_assert_cmpint(pool_check(pool, base - 1, r->key, 1, false, &ptr), ==,
				PROTO_E_RANGE);
		/* another region's key does not cover this region's bytes */
		for (j = 0; j < n; j++) {
			if (j == i)
				continue;
			g_assert_cmpint(pool_check(pool, base, pool_region_get(pool, j)->key, 1,
						   false, &ptr),
					==, PROTO_E_RANGE);
		}
		/* proto_pool_resolve (the client side) agrees with the server */
		{
			uint64_t raddr;
			uint32_t rkey;
			int rc;

			rc = proto_pool_resolve(&desc, r->offset + 16, 64, &raddr, &rkey);
			g_assert_cmpint(rc, ==, 0);
			g_assert_cmpuint(raddr, ==, base + 16);
			g_assert_cmpint(pool_check(pool, raddr, rkey, 64, false, &ptr), ==,
					PROTO_OK);
		}
	}
	proto_pool_clear(&desc);
	pool_close(pool);
}

/* random keys are accepted only when they are one of the pool's keys */
static void test_random_keys(void)
{
	struct pool *pool = open_anon(8 * MIB, MIB);
	GRand *rnd = g_rand_new_with_seed(42);
	unsigned int i, j, hits = 0;
	void *ptr;

	for (i = 0; i < 200000; i++) {
		uint32_t k = g_rand_int(rnd);
		uint64_t addr = region_addr(pool_region_get(pool, i % 8));
		bool known = false;

		for (j = 0; j < pool_region_count(pool); j++)
			known |= pool_region_get(pool, j)->key == k;
		if (pool_check(pool, addr, k, 1, false, &ptr) != PROTO_E_KEY) {
			g_assert_true(known);
			hits++;
		}
	}
	g_assert_cmpuint(hits, <=, 1);
	g_rand_free(rnd);
	pool_close(pool);
}

static void test_bad_params(void)
{
	struct pool_params pp = { 0 };
	struct pool *pool = NULL;
	char why[256];

	pp.size = MIB + 1;
	g_assert_cmpint(pool_open(&pp, &pool, why, sizeof(why)), ==, -EINVAL);
	g_assert_nonnull(strstr(why, "multiple"));
	pp.size = 4096;
	g_assert_cmpint(pool_open(&pp, &pool, why, sizeof(why)), ==, -EINVAL);
	g_assert_nonnull(strstr(why, "too small"));
	pp.size = 4 * MIB;
	pp.chunk_size = 3 * MIB;
	g_assert_cmpint(pool_open(&pp, &pool, why, sizeof(why)), ==, -EINVAL);
	g_assert_nonnull(strstr(why, "power of two"));
	pp.chunk_size = MIB / 2;
	g_assert_cmpint(pool_open(&pp, &pool, why, sizeof(why)), ==, -EINVAL);
	/* more regions than a descriptor can carry (checked before anything is mapped) */
	pp.size = (uint64_t)(PROTO_MAX_REGIONS + 1) * MIB;
	pp.chunk_size = MIB;
	g_assert_cmpint(pool_open(&pp, &pool, why, sizeof(why)), ==, -EINVAL);
	g_assert_nonnull(strstr(why, "regions"));
	pp.size = 4 * MIB;
	pp.chunk_size = 0;
	pp.hugepages = true;
	pp.backing_file = "/nonexistent/x";
	g_assert_cmpint(pool_open(&pp, &pool, why, sizeof(why)), ==, -EINVAL);
	g_assert_null(pool);
	pool_close(NULL);
}

static void test_hugepages(void)
{
	struct pool_params pp = { .size = 4 * MIB, .hugepages = true };
	struct pool *pool = NULL;
	char why[512] = "";
	int rc;

	rc = pool_open(&pp, &pool, why, sizeof(why));
	if (rc == 0) {
		/* this host has huge pages reserved: the pool says so */
		g_assert_cmpuint(pool_flags(pool) & PROTO_POOL_HUGEPAGES, !=, 0);
		pool_close(pool);
		return;
	}
	g_test_message("no huge pages: %s", why);
	g_assert_true(rc == -ENOMEM || rc == -EINVAL);
	if (rc == -ENOMEM)
		g_assert_nonnull(strstr(why, "/proc/sys/vm/nr_hugepages"));
}

static int open_file_pool(const char *path, uint64_t size, struct pool **out, char *why,
			  size_t cap)
{
	struct pool_params pp = { .size = size, .backing_file = path, .chunk_size = 2 * MIB };

	return pool_open(&pp, out, why, cap);
}

/* true if the file system holding dir supports fallocate (the pool then reserves its blocks) */
static bool fallocate_works(const char *dir)
{
	g_autofree char *probe = g_build_filename(dir, "probe", NULL);
	int fd = open(probe, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	bool ok;

	g_assert_cmpint(fd, >=, 0);
	ok = fallocate(fd, 0, 0, 4096) == 0;
	close(fd);
	g_unlink(probe);
	return ok;
}

static void test_backing_file(void)
{
	g_autofree char *dir = g_dir_make_tmp("rmemfs-pool-XXXXXX", NULL);
	g_autofree char *path = g_build_filename(dir, "pool", NULL);
	g_autofree char *junk = g_build_filename(dir, "junk", NULL);
	struct pool *pool = NULL, *again = NULL;
	uint8_t pattern[8192];
	struct stat st;
	uint64_t id;
	char why[512];
	void *ptr;
	unsigned int i;
	int rc;

	g_assert_nonnull(dir);
	for (i = 0; i < sizeof(pattern); i++)
		pattern[i] = (uint8_t)(i * 7 + 3);

	rc = open_file_pool(path, 8 * MIB, &pool, why, sizeof(why));
	g_assert_cmpint(rc, ==, 0);
	g_assert_cmpuint(pool_flags(pool) & PROTO_POOL_PERSISTENT, !=, 0);
	g_assert_cmpuint(pool_region_count(pool), ==, 4);
	id = pool_id(pool);
	g_assert_cmpuint(id, !=, 0);
	/* fresh pools are zero-filled */
	for (i = 0; i < 8 * MIB; i += 4096)
		g_assert_cmpuint(((uint8_t *)pool_base(pool))[i], ==, 0);
	/* and their blocks are reserved: a WRITE cannot meet a full file system (SIGBUS) */
	if (fallocate_works(dir)) {
		g_assert_cmpint(stat(path, &st), ==, 0);
		g_assert_cmpuint((uint64_t)st.st_blocks * 512, >=, 8 * MIB);
	} else {
		g_test_message("no fallocate in %s: block reservation not checked", dir);
	}
	/* write across a region boundary, through the checks, as the server does */
	{
		const struct pool_region *r0 = pool_region_get(pool, 0);
		const struct pool_region *r1 = pool_region_get(pool, 1);

		g_assert_cmpint(pool_check(pool, region_addr(r0) + r0->len - 4096, r0->key, 4096,
					   false, &ptr),
				==, PROTO_OK);
		memcpy(ptr, pattern, 4096);
		g_assert_cmpint(pool_check(pool, region_addr(r1), r1->key, 4096, false, &ptr), ==,
				PROTO_OK);
		memcpy(ptr, pattern + 4096, 4096);
	}
	/* a second server on the same file is refused while the first holds it */
	rc = open_file_pool(path, 8 * MIB, &again, why, sizeof(why));
	g_assert_cmpint(rc, ==, -EBUSY);
	g_assert_nonnull(strstr(why, "in use"));
	g_assert_cmpint(pool_flush(pool), ==, 0);
	pool_close(pool);

	g_assert_cmpint(stat(path, &st), ==, 0);
	g_assert_cmpuint(st.st_size, ==, 8 * MIB + POOL_TRAILER_SIZE);

	/* reopen: same pool_id, same bytes (new keys are fine) */
	pool = NULL;
	rc = open_file_pool(path, 8 * MIB, &pool, why, sizeof(why));
	g_assert_cmpint(rc, ==, 0);
	g_assert_cmpuint(pool_id(pool), ==, id);
	g_assert_cmpmem((uint8_t *)pool_base(pool) + 2 * MIB - 4096, sizeof(pattern), pattern,
			sizeof(pattern));
	pool_close(pool);

	/* size mismatch: refused, nothing changed */
	pool = NULL;
	rc = open_file_pool(path, 16 * MIB, &pool, why, sizeof(why));
	g_assert_cmpint(rc, ==, -EEXIST);
	g_assert_null(pool);
	g_test_message("mismatch: %s", why);
	g_assert_nonnull(strstr(why, "--size"));
	g_assert_nonnull(strstr(why, "8.0 MiB"));
	g_assert_cmpint(stat(path, &st), ==, 0);
	g_assert_cmpuint(st.st_size, ==, 8 * MIB + POOL_TRAILER_SIZE);

	/* a file that is not a pool is never taken over */
	g_assert_true(g_file_set_contents(junk, "precious data\n", -1, NULL));
	rc = open_file_pool(junk, 8 * MIB, &pool, why, sizeof(why));
	g_assert_cmpint(rc, ==, -EEXIST);
	g_assert_nonnull(strstr(why, "not a memserver pool file"));
	g_assert_cmpint(stat(junk, &st), ==, 0);
	g_assert_cmpuint(st.st_size, ==, 14);

	/* the same pool again after all that */
	rc = open_file_pool(path, 8 * MIB, &pool, why, sizeof(why));
	g_assert_cmpint(rc, ==, 0);
	g_assert_cmpuint(pool_id(pool), ==, id);
	pool_close(pool);

	g_unlink(path);
	g_unlink(junk);
	g_rmdir(dir);
}

/* two anonymous pools get different ids and keys */
static void test_fresh_ids(void)
{
	struct pool *a = open_anon(MIB, 0), *b = open_anon(MIB, 0);

	g_assert_cmpuint(pool_id(a), !=, pool_id(b));
	g_assert_cmpuint(pool_region_get(a, 0)->key, !=, pool_region_get(b, 0)->key);
	pool_close(a);
	pool_close(b);
}

int main(int argc, char **argv)
{
	g_test_init(&argc, &argv, NULL);
	g_test_add_func("/pool/single-region-bounds", test_single_region_bounds);
	g_test_add_func("/pool/wrong-key", test_wrong_key);
	g_test_add_func("/pool/overflow", test_overflow);
	g_test_add_func("/pool/atomic-alignment", test_atomic_alignment);
	g_test_add_func("/pool/region-boundaries", test_region_boundaries);
	g_test_add_func("/pool/random-keys", test_random_keys);
	g_test_add_func("/pool/bad-params", test_bad_params);
	g_test_add_func("/pool/hugepages", test_hugepages);
	g_test_add_func("/pool/backing-file", test_backing_file);
	g_test_add_func("/pool/fresh-ids", test_fresh_ids);
	return g_test_run();
}
