/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * pool.c - the memserver's memory pool: map it (anonymous, huge pages, or a
 * backing file with a trailer that keeps the pool_id), cut it into regions
 * with random keys, and check every TCP one-sided access against them.
 * See pool.h for the layout and the rules.
 */
#define G_LOG_DOMAIN "rmemfs-pool"

#include "pool.h"

#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "units.h"
#include "why.h"

#define POOL_TRAILER_MAGIC "RMEMPOOL"
#define POOL_TRAILER_VERSION 2U /* 2 added name and owner; 1 reads as "" for both */

/* the backing file's trailer, little-endian on disk, at offset pool size */
struct pool_trailer {
	char magic[8]; /* POOL_TRAILER_MAGIC, not NUL-terminated */
	uint32_t version; /* POOL_TRAILER_VERSION */
	uint32_t reserved;
	uint64_t size; /* pool bytes before the trailer */
	uint64_t pool_id;
	uint64_t created; /* unix time of creation, for humans */
	char name[PROTO_POOL_NAME_MAX]; /* NUL-padded; "" for a default pool */
	char owner[PROTO_POOL_NAME_MAX]; /* the tenant; "" for the admin */
};

struct pool {
	uint8_t *base; /* the mapping: size bytes */
	uint64_t size;
	uint64_t chunk_size;
	uint64_t pool_id;
	uint32_t flags;
	char name[PROTO_POOL_NAME_MAX];
	char owner[PROTO_POOL_NAME_MAX];
	int fd; /* backing file, -1 when anonymous */
	char *path; /* backing file name, for messages */
	uint32_t key_mask; /* low key bits that hold the region index */
	unsigned int nregions;
	struct pool_region *regions;
};

static int pool_random(void *buf, size_t len)
{
	size_t off;

	/* getentropy: at most 256 bytes a call, never short, never EINTR */
	for (off = 0; off < len; off += 256)
		if (getentropy((uint8_t *)buf + off, MIN(len - off, 256)))
			return -errno;
	return 0;
}

/* the default huge page size in bytes, from /proc/meminfo; 2 MiB if unknown */
static uint64_t pool_hugepage_size(uint64_t *free_pages)
{
	uint64_t size = 2ULL << 20;
	char line[256];
	FILE *f;

	*free_pages = 0;
	f = fopen("/proc/meminfo", "re");
	if (!f)
		return size;
	while (fgets(line, sizeof(line), f)) {
		unsigned long long v;

		if (sscanf(line, "Hugepagesize: %llu kB", &v) == 1)
			size = (uint64_t)v << 10;
		else if (sscanf(line, "HugePages_Free: %llu", &v) == 1)
			*free_pages = v;
	}
	fclose(f);
	return size;
}

static int pool_check_params(const struct pool_params *p, uint64_t chunk, uint64_t page,
			     char *why, size_t why_len)
{
	char a[32], b[32];

	if (p->size < POOL_MIN_SIZE) {
		units_format_size(POOL_MIN_SIZE, a, sizeof(a));
		why_set(why, why_len, "pool size %" PRIu64 " is too small: the minimum is %s",
			 p->size, a);
		return -EINVAL;
	}
	if (p->size % page) {
		units_format_size(page, a, sizeof(a));
		why_set(why, why_len,
			 "pool size %" PRIu64 " is not a multiple of the %spage size (%s)", p->size,
			 p->hugepages ? "huge " : "", a);
		return -EINVAL;
	}
	if (chunk < POOL_MIN_CHUNK || (chunk & (chunk - 1))) {
		why_set(why, why_len,
			 "chunk size %" PRIu64 " must be a power of two of at least 1 MiB", chunk);
		return -EINVAL;
	}
	if ((p->size - 1) / chunk + 1 > PROTO_MAX_REGIONS) {
		units_format_size(p->size, a, sizeof(a));
		units_format_size(chunk, b, sizeof(b));
		why_set(why, why_len,
			 "a pool of %s in chunks of %s makes more than %u regions; "
			 "use a larger chunk size",
			 a, b, PROTO_MAX_REGIONS);
		return -EINVAL;
	}
	if (p->hugepages && p->backing_file) {
		why_set(why, why_len,
			 "huge pages and a backing file cannot be combined (the backing file is "
			 "mapped with normal pages)");
		return -EINVAL;
	}
	return 0;
}

/* cut the mapping into regions and give each a random key holding its index */
static int pool_make_regions(struct pool *pool)
{
	unsigned int i, bits = 0;
	uint32_t *rnd;
	int rc;

	pool->nregions = (pool->size - 1) / pool->chunk_size + 1;
	while ((1U << bits) < pool->nregions)
		bits++;
	pool->key_mask = (1U << bits) - 1;
	pool->regions = g_try_new0(struct pool_region, pool->nregions);
	rnd = g_try_new(uint32_t, pool->nregions);
	if (!pool->regions || !rnd) {
		g_free(rnd);
		return -ENOMEM;
	}
	rc = pool_random(rnd, pool->nregions * sizeof(*rnd));
	if (rc) {
		g_free(rnd);
		return rc;
	}
	for (i = 0; i < pool->nregions; i++) {
		struct pool_region *r = &pool->regions[i];

		r->offset = (uint64_t)i * pool->chunk_size;
		r->base = pool->base + r->offset;
		r->len = MIN(pool->chunk_size, pool->size - r->offset);
		r->key = (rnd[i] & ~pool->key_mask) | i;
	}
	g_free(rnd);
	return 0;
}

static int pool_map_anon(struct pool *pool, bool hugepages, uint64_t hpage, uint64_t hfree,
			 char *why, size_t why_len)
{
	int flags = MAP_PRIVATE | MAP_ANONYMOUS;
	char a[32], b[32];
	void *p;

	/*
	 * Huge pages are reserved at mmap time (no MAP_NORESERVE), so a
	 * shortage shows up here rather than as SIGBUS on first touch.
	 */
	flags |= hugepages ? MAP_HUGETLB : MAP_NORESERVE;
	p = mmap(NULL, pool->size, PROT_READ | PROT_WRITE, flags, -1, 0);
	if (p == MAP_FAILED) {
		int err = errno;

		units_format_size(pool->size, a, sizeof(a));
		if (hugepages) {
			uint64_t need = pool->size / hpage;

			units_format_size(hpage, b, sizeof(b));
			why_set(why, why_len,
				 "cannot map %s of huge pages (mmap MAP_HUGETLB: %s): %" PRIu64
				 " pages of %s are needed and %" PRIu64
				 " are free; reserve them as root with "
				 "'echo %" PRIu64 " > /proc/sys/vm/nr_hugepages' "
				 "(or sysctl vm.nr_hugepages)",
				 a, g_strerror(err), need, b, hfree, need);
		} else {
			why_set(why, why_len, "cannot map %s of memory (mmap: %s)", a,
				 g_strerror(err));
		}
		return -err;
	}
	pool->base = p;
	if (hugepages)
		pool->flags |= PROTO_POOL_HUGEPAGES;
	/* transparent huge pages where the system allows them (advice only) */
	else if (madvise(p, pool->size, MADV_HUGEPAGE) && errno != EINVAL)
		g_message("madvise(MADV_HUGEPAGE) on the pool: %s", g_strerror(errno));
	/*
	 * Make the pool resident now, as RDMA registration does anyway: the
	 * kernel zeroes its pages at start, not on the data path of a client's
	 * first writes. Advice only (before Linux 5.14, or short of memory,
	 * pages are still faulted in as they are first used).
	 */
	if (madvise(p, pool->size, MADV_POPULATE_WRITE) && errno != EINVAL)
		g_message("prefaulting the pool (madvise MADV_POPULATE_WRITE): %s; its pages "
			  "will be allocated as they are first used",
			  g_strerror(errno));
	return 0;
}

static void pool_trailer_init(struct pool_trailer *t, const struct pool *pool)
{
	memset(t, 0, sizeof(*t));
	memcpy(t->magic, POOL_TRAILER_MAGIC, sizeof(t->magic));
	t->version = htole32(POOL_TRAILER_VERSION);
	t->size = htole64(pool->size);
	t->pool_id = htole64(pool->pool_id);
	t->created = htole64((uint64_t)time(NULL));
	memcpy(t->name, pool->name, sizeof(t->name));
	memcpy(t->owner, pool->owner, sizeof(t->owner));
}

/* read the trailer at @off: 0 valid, -EBADMSG not a trailer, -errno */
static int pool_trailer_read(int fd, uint64_t off, struct pool_trailer *t)
{
	ssize_t n = pread(fd, t, sizeof(*t), off);

	if (n < 0)
		return -errno;
	if ((size_t)n != sizeof(*t) || memcmp(t->magic, POOL_TRAILER_MAGIC, sizeof(t->magic)))
		return -EBADMSG;
	t->version = le32toh(t->version);
	t->size = le64toh(t->size);
	t->pool_id = le64toh(t->pool_id);
	t->created = le64toh(t->created);
	/* version 1 left these bytes zero; a name without its NUL is no name */
	if (t->version < 2 || !memchr(t->name, 0, sizeof(t->name)) ||
	    !memchr(t->owner, 0, sizeof(t->owner))) {
		memset(t->name, 0, sizeof(t->name));
		memset(t->owner, 0, sizeof(t->owner));
	}
	return 0;
}

static int pool_write_full(int fd, const void *buf, size_t len, uint64_t off)
{
	const uint8_t *p = buf;

	while (len) {
		ssize_t n = pwrite(fd, p, len, off);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += n;
		len -= n;
		off += n;
	}
	return 0;
}

/*
 * Reserve the blocks of the pool's bytes in the backing file. Through a
 * shared mapping, a client WRITE into a hole that the file system has no room
 * for raises SIGBUS and kills the memserver with every client on it;
 * reserving up front turns that into a start-up error. A file system without
 * fallocate keeps the file sparse, and the risk is logged.
 */
static int pool_file_reserve(struct pool *pool, char *why, size_t why_len)
{
	char a[32];
	int rc;

	do
		rc = fallocate(pool->fd, 0, 0, (off_t)pool->size);
	while (rc < 0 && errno == EINTR);
	if (rc == 0)
		return 0;
	rc = -errno;
	if (rc == -EOPNOTSUPP) {
		g_message("%s: fallocate is not supported on this file system; the file stays "
			  "sparse and a write it has no room for will stop the memserver (SIGBUS)",
			  pool->path);
		return 0;
	}
	units_format_size(pool->size, a, sizeof(a));
	if (rc == -ENOSPC)
		why_set(why, why_len,
			 "not enough space for a %s pool in %s (fallocate: %s); free some space, "
			 "or pick a smaller --size or another file system",
			 a, pool->path, g_strerror(-rc));
	else
		why_set(why, why_len, "cannot reserve %s in %s (fallocate: %s)", a, pool->path,
			 g_strerror(-rc));
	return rc;
}

/*
 * Create a fresh backing file: the pool's bytes (reserved, reading as zero),
 * then the trailer. On failure the file is cut back to empty, so that a retry
 * creates it again instead of refusing it as "not a memserver pool file".
 */
static int pool_file_create(struct pool *pool, char *why, size_t why_len)
{
	uint8_t page[POOL_TRAILER_SIZE] = { 0 };
	struct pool_trailer t;
	int rc;

	rc = pool_random(&pool->pool_id, sizeof(pool->pool_id));
	if (rc) {
		why_set(why, why_len, "getrandom: %s", g_strerror(-rc));
		return rc;
	}
	if (ftruncate(pool->fd, pool->size + POOL_TRAILER_SIZE) < 0) {
		rc = -errno;
		why_set(why, why_len, "cannot extend backing file %s (ftruncate: %s)", pool->path,
			 g_strerror(-rc));
		goto err_truncate;
	}
	rc = pool_file_reserve(pool, why, why_len);
	if (rc)
		goto err_truncate;
	pool_trailer_init(&t, pool);
	memcpy(page, &t, sizeof(t));
	rc = pool_write_full(pool->fd, page, sizeof(page), pool->size);
	if (!rc && fsync(pool->fd) < 0)
		rc = -errno;
	if (rc) {
		why_set(why, why_len, "cannot write the pool trailer of %s: %s", pool->path,
			 g_strerror(-rc));
		goto err_truncate;
	}
	g_message("created pool file %s, pool_id %016" PRIx64, pool->path, pool->pool_id);
	return 0;

err_truncate:
	if (ftruncate(pool->fd, 0) < 0)
		g_message("%s: ftruncate back to empty after a failed creation: %s", pool->path,
			  g_strerror(errno));
	return rc;
}

/* a size as a --size argument: "8G", "512M", or plain bytes */
static void pool_size_arg(uint64_t size, char *buf, size_t cap)
{
	static const char units[] = "TGMK";
	unsigned int i;

	for (i = 0; i < 4; i++) {
		unsigned int shift = 40 - 10 * i;

		if (size >= (1ULL << shift) && !(size & ((1ULL << shift) - 1))) {
			snprintf(buf, cap, "%" PRIu64 "%c", size >> shift, units[i]);
			return;
		}
	}
	snprintf(buf, cap, "%" PRIu64, size);
}

/*
 * Adopt an existing backing file if its trailer matches the requested size
 * (pool->size 0: whatever size the trailer records).
 */
static int pool_file_adopt(struct pool *pool, uint64_t file_len, char *why, size_t why_len)
{
	struct pool_trailer t;
	char a[32], b[32], c[32];
	int rc = -EBADMSG;

	if (file_len >= POOL_TRAILER_SIZE)
		rc = pool_trailer_read(pool->fd, file_len - POOL_TRAILER_SIZE, &t);
	if (rc == -EBADMSG || (!rc && t.size != file_len - POOL_TRAILER_SIZE)) {
		why_set(why, why_len,
			 "%s exists (%" PRIu64 " bytes) and is not a memserver pool file; "
			 "refusing to overwrite it (remove it or pick another --backing-file)",
			 pool->path, file_len);
		return -EEXIST;
	}
	if (rc) {
		why_set(why, why_len, "cannot read %s: %s", pool->path, g_strerror(-rc));
		return rc;
	}
	if (t.version < 1 || t.version > POOL_TRAILER_VERSION) {
		why_set(why, why_len,
			 "%s has pool file version %u; this memserver knows version %u",
			 pool->path, t.version, POOL_TRAILER_VERSION);
		return -EEXIST;
	}
	if (!pool->size) {
		pool->size = t.size;
		if (!t.size || t.size % POOL_MIN_SIZE) {
			why_set(why, why_len, "%s records a pool of %" PRIu64 " bytes, not a "
				 "whole number of MiB", pool->path, t.size);
			return -EEXIST;
		}
	}
	if (t.size != pool->size) {
		units_format_size(t.size, a, sizeof(a));
		units_format_size(pool->size, b, sizeof(b));
		pool_size_arg(t.size, c, sizeof(c));
		why_set(why, why_len,
			 "%s holds a pool of %s (%" PRIu64 " bytes) but --size asks for %s "
			 "(%" PRIu64 " bytes); start with --size %s to reuse it, "
			 "or pick another file",
			 pool->path, a, t.size, b, pool->size, c);
		return -EEXIST;
	}
	/* an older file may be sparse; the data in it is left alone either way */
	rc = pool_file_reserve(pool, why, why_len);
	if (rc)
		return rc;
	pool->pool_id = t.pool_id;
	memcpy(pool->name, t.name, sizeof(pool->name));
	memcpy(pool->owner, t.owner, sizeof(pool->owner));
	g_message("reusing pool file %s, pool_id %016" PRIx64, pool->path, pool->pool_id);
	return 0;
}

static int pool_map_file(struct pool *pool, const char *path, bool adopt, char *why,
			 size_t why_len)
{
	struct stat st;
	void *p;
	int rc;

	pool->path = g_strdup(path);
	pool->fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (pool->fd < 0) {
		rc = -errno;
		why_set(why, why_len, "cannot open backing file %s: %s", path, g_strerror(-rc));
		return rc;
	}
	/* two memservers sharing one file would corrupt each other's clients */
	if (flock(pool->fd, LOCK_EX | LOCK_NB) < 0) {
		rc = -errno;
		if (rc == -EWOULDBLOCK) {
			why_set(why, why_len, "%s is in use by another memserver", path);
			return -EBUSY;
		}
		why_set(why, why_len, "flock %s: %s", path, g_strerror(-rc));
		return rc;
	}
	if (fstat(pool->fd, &st) < 0) {
		rc = -errno;
		why_set(why, why_len, "fstat %s: %s", path, g_strerror(-rc));
		return rc;
	}
	if (!S_ISREG(st.st_mode)) {
		why_set(why, why_len, "%s is not a regular file", path);
		return -EINVAL;
	}
	if (st.st_size == 0 && adopt) {
		why_set(why, why_len, "%s is empty, not a pool file", path);
		return -EEXIST;
	}
	if (st.st_size == 0)
		rc = pool_file_create(pool, why, why_len);
	else
		rc = pool_file_adopt(pool, st.st_size, why, why_len);
	if (rc)
		return rc;

	p = mmap(NULL, pool->size, PROT_READ | PROT_WRITE, MAP_SHARED, pool->fd, 0);
	if (p == MAP_FAILED) {
		rc = -errno;
		why_set(why, why_len, "cannot map backing file %s (mmap: %s)", path,
			 g_strerror(-rc));
		return rc;
	}
	pool->base = p;
	pool->flags |= PROTO_POOL_PERSISTENT;
	return 0;
}

int pool_open(const struct pool_params *params, struct pool **out, char *why, size_t why_len)
{
	uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE), hfree = 0, hpage = 0;
	uint64_t chunk = params->chunk_size ? params->chunk_size : POOL_DEFAULT_CHUNK;
	struct pool *pool;
	int rc;

	if (why && why_len)
		why[0] = '\0';
	if (params->hugepages) {
		hpage = pool_hugepage_size(&hfree);
		page = hpage;
	}
	if (params->adopt && !params->backing_file) {
		why_set(why, why_len, "only a backing file can be adopted");
		return -EINVAL;
	}
	/* an adopted file's size is checked once its trailer told it */
	rc = params->adopt ? 0 : pool_check_params(params, chunk, page, why, why_len);
	if (rc)
		return rc;

	pool = g_try_new0(struct pool, 1);
	if (!pool) {
		why_set(why, why_len, "out of memory");
		return -ENOMEM;
	}
	pool->fd = -1;
	pool->size = params->adopt ? 0 : params->size;
	pool->chunk_size = chunk;
	if (params->name)
		g_strlcpy(pool->name, params->name, sizeof(pool->name));
	if (params->owner)
		g_strlcpy(pool->owner, params->owner, sizeof(pool->owner));

	if (params->backing_file) {
		rc = pool_map_file(pool, params->backing_file, params->adopt, why, why_len);
	} else {
		rc = pool_map_anon(pool, params->hugepages, hpage, hfree, why, why_len);
		if (!rc)
			rc = pool_random(&pool->pool_id, sizeof(pool->pool_id));
	}
	if (rc)
		goto err_close;

	if (params->adopt) {
		struct pool_params checked = *params;

		/* what the trailer recorded, checked as if it had been asked for */
		checked.size = pool->size;
		checked.adopt = false;
		while ((checked.size - 1) / chunk + 1 > PROTO_MAX_REGIONS)
			chunk <<= 1;
		pool->chunk_size = chunk;
		rc = pool_check_params(&checked, chunk, page, why, why_len);
		if (rc)
			goto err_close;
	}
	rc = pool_make_regions(pool);
	if (rc) {
		why_set(why, why_len, "cannot set up %u regions: %s", pool->nregions,
			 g_strerror(-rc));
		goto err_close;
	}
	*out = pool;
	return 0;

err_close:
	pool_close(pool);
	return rc;
}

void pool_close(struct pool *pool)
{
	if (!pool)
		return;
	if (pool->base) {
		if (pool_flush(pool))
			g_warning("flushing %s failed; its last writes may be lost", pool->path);
		if (munmap(pool->base, pool->size) < 0)
			g_warning("munmap pool: %s", g_strerror(errno));
	}
	if (pool->fd >= 0) {
		if (fsync(pool->fd) < 0)
			g_warning("fsync %s: %s", pool->path, g_strerror(errno));
		close(pool->fd); /* also drops the flock */
	}
	g_free(pool->regions);
	g_free(pool->path);
	g_free(pool);
}

enum proto_status pool_check(const struct pool *pool, uint64_t addr, uint32_t rkey, uint64_t len,
			     bool is_atomic, void **ptr)
{
	uint32_t idx = rkey & pool->key_mask;
	const struct pool_region *r;
	uint64_t base, off;

	if (idx >= pool->nregions || pool->regions[idx].key != rkey)
		return PROTO_E_KEY;
	r = &pool->regions[idx];
	base = (uintptr_t)r->base;
	/* written so that no expression can wrap: addr - base only when addr >= base */
	if (addr < base || len > r->len)
		return PROTO_E_RANGE;
	off = addr - base;
	if (off > r->len - len)
		return PROTO_E_RANGE;
	if (is_atomic && (addr & 7))
		return PROTO_E_ALIGN;
	*ptr = (uint8_t *)r->base + off;
	return PROTO_OK;
}

int pool_describe(const struct pool *pool, struct proto_pool *out)
{
	unsigned int i;

	memset(out, 0, sizeof(*out));
	out->regions = g_try_new0(struct proto_region, pool->nregions);
	if (!out->regions)
		return -ENOMEM;
	out->size = pool->size;
	out->pool_id = pool->pool_id;
	out->flags = pool->flags;
	out->nregions = pool->nregions;
	for (i = 0; i < pool->nregions; i++) {
		out->regions[i].addr = (uintptr_t)pool->regions[i].base;
		out->regions[i].len = pool->regions[i].len;
		out->regions[i].rkey = pool->regions[i].key;
	}
	return 0;
}

int pool_flush(struct pool *pool)
{
	if (pool->fd < 0 || !pool->base)
		return 0;
	if (msync(pool->base, pool->size, MS_SYNC) < 0) {
		int rc = -errno;

		g_warning("msync %s: %s", pool->path, g_strerror(-rc));
		return rc;
	}
	return 0;
}

uint64_t pool_page_size(bool hugepages)
{
	uint64_t hfree;

	return hugepages ? pool_hugepage_size(&hfree) : (uint64_t)sysconf(_SC_PAGESIZE);
}

uint64_t pool_resident(const struct pool *pool)
{
	/*
	 * mincore fills one byte per base page even over huge pages (the kernel's
	 * hugetlb walk steps by PAGE_SIZE), so the vector is sized in base pages
	 */
	uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
	uint64_t off, n = 0, step = 1ULL << 30;
	unsigned char *vec;
	size_t i;

	/* a GiB at a time: the vector stays small for any pool */
	vec = g_try_malloc(step / page);
	if (!vec)
		return 0;
	for (off = 0; off < pool->size; off += step) {
		uint64_t len = MIN(step, pool->size - off);

		if (mincore(pool->base + off, len, vec) < 0)
			break;
		for (i = 0; i < len / page; i++)
			n += vec[i] & 1;
	}
	g_free(vec);
	return n * page;
}

const char *pool_name(const struct pool *pool)
{
	return pool->name;
}

const char *pool_owner(const struct pool *pool)
{
	return pool->owner;
}

uint64_t pool_size(const struct pool *pool)
{
	return pool->size;
}

uint64_t pool_id(const struct pool *pool)
{
	return pool->pool_id;
}

uint32_t pool_flags(const struct pool *pool)
{
	return pool->flags;
}

void *pool_base(const struct pool *pool)
{
	return pool->base;
}

uint64_t pool_chunk_size(const struct pool *pool)
{
	return pool->chunk_size;
}

unsigned int pool_region_count(const struct pool *pool)
{
	return pool->nregions;
}

const struct pool_region *pool_region_get(const struct pool *pool, unsigned int index)
{
	if (index >= pool->nregions)
		return NULL;
	return &pool->regions[index];
}
