// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test_fuzz.c - damaged metadata against the loaders (fuse-client/meta
 * ckpt.c, journal.c, mount.c, fsck.c), over a real memserver.
 *
 * /fuzz/damage builds one real pool - a directory of thousands of entries
 * after heavy churn, files with several extents (written and fallocated),
 * symlinks, xattrs up to 60 KiB, a subtree, hard links, and a journal tail
 * after the checkpoint - and snapshots its metadata region. Then, case by
 * case, it writes back a damaged copy: bytes flipped, zeroed or cut out of
 * the checkpoint payload (the checksums recomputed, so the damage gets past
 * them - the dangerous case - and not), of the large directory's entries,
 * and of journal transactions and their headers. Every case must end in a
 * load or a clean refusal with a message, within CASE_SECONDS and a bounded
 * peak RSS, through a read-only mount and rmemfs-fsck's check; a subset is
 * repaired, and the repair must succeed and leave a pool that mounts
 * read-write and checks clean.
 *
 * RMEMFS_FUZZ_SEED=N replays a run (the seed is printed), RMEMFS_FUZZ_CASES=N
 * scales it, RMEMFS_FUZZ_CASE=K runs case K of the seed only.
 *
 * /fuzz/jn-untrusted-csum replays one case the fuzzing found (seed
 * 3307019473, case 1440): a malformed transaction whose first record, made
 * a CSUM by the damage, set wrong CRCs that outlived the repair.
 *
 * /fuzz/bug-shape and /fuzz/bug-shape-empty write the checkpoint issue 27's
 * cookie bug wrote: a directory whose entry count is larger than the
 * entries after it, plus an entry naming freed memory, checksums valid. The
 * mount must refuse it naming the directory, and rmemfs-fsck --repair must
 * bring the filesystem back keeping every other inode.
 */
#define G_LOG_DOMAIN "rmemfs-test-fuzz"

#include <dirent.h>
#include <endian.h>
#include <errno.h>
#include <linux/falloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <glib.h>

#include "checksum.h"
#include "commit.h"
#include "csum.h"
#include "extent.h"
#include "fsck.h"
#include "layout.h"
#include "memserver_fx.h"
#include "meta_fx.h"
#include "meta.h"
#include "meta_int.h"
#include "mount.h"
#include "remote.h"
#include "super.h"

#define ROOT META_ROOT_INO
#define BS META_BLOCK_SIZE
#define POOL_SIZE "32M"
#define CASES_DEFAULT 2000
#define REPAIR_EVERY 5 /* every 5th case is repaired too */
#define CASE_SECONDS 30 /* watchdog per case (ASan included) */
#define PEAK_RSS_MAX_KB (256 * 1024)
#define BIG_NAMES 6000 /* names the churned directory draws from */

#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#else
#define UNDER_ASAN 0
#endif

static const struct meta_cred root_cred = { .uid = 0, .gid = 0 };

struct fx {
	GPid pid;
	struct remote *r;
};

static void setup(struct fx *f, gconstpointer d)
{
	memset(f, 0, sizeof(*f));
	f->r = tfx_memserver_start(POOL_SIZE, 0, &f->pid);
}

static void teardown(struct fx *f, gconstpointer d)
{
	tfx_memserver_stop(&f->r, &f->pid);
}

/* ---- logging and the watchdog ---- */

/* loaders say what they find with g_message: thousands of cases would drown the log */
static void quiet_log(const gchar *domain, GLogLevelFlags level, const gchar *msg, gpointer u)
{
	if (level & (G_LOG_LEVEL_ERROR | G_LOG_LEVEL_CRITICAL | G_LOG_LEVEL_WARNING))
		g_log_default_handler(domain, level, msg, u);
}

static char watchdog_msg[160];

static void watchdog_fired(int sig)
{
	ssize_t n = write(STDERR_FILENO, watchdog_msg, strlen(watchdog_msg));

	(void)n;
	abort();
}

static void watchdog_arm(const char *fmt, ...) G_GNUC_PRINTF(1, 2);
static void watchdog_arm(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	g_vsnprintf(watchdog_msg, sizeof(watchdog_msg), fmt, ap);
	va_end(ap);
	alarm(CASE_SECONDS);
}

static void watchdog_init(void)
{
	struct sigaction sa = { .sa_handler = watchdog_fired };
	struct rlimit rl = { .rlim_cur = 4ULL << 30, .rlim_max = 4ULL << 30 };

	sigaction(SIGALRM, &sa, NULL);
	g_log_set_default_handler(quiet_log, NULL);
	g_log_set_always_fatal(G_LOG_LEVEL_ERROR | G_LOG_LEVEL_CRITICAL | G_LOG_LEVEL_WARNING);
	/* a runaway allocation fails the test instead of the machine (not under ASan) */
	if (!UNDER_ASAN)
		setrlimit(RLIMIT_AS, &rl);
}

/* peak resident set of this process (kB), from /proc/self/status */
static uint64_t peak_rss_kb(void)
{
	char *text = NULL, *p;
	uint64_t kb = 0;

	if (!g_file_get_contents("/proc/self/status", &text, NULL, NULL))
		return 0;
	p = strstr(text, "VmHWM:");
	if (p)
		kb = g_ascii_strtoull(p + 6, NULL, 10);
	g_free(text);
	return kb;
}

static guint32 env_uint(const char *name, guint32 dflt)
{
	const char *v = g_getenv(name);

	return v && *v ? (guint32)g_ascii_strtoull(v, NULL, 0) : dflt;
}

/* ---- a deterministic pool ---- */

/*
 * While the pool is built, the wall clock and the random bytes its metadata
 * keeps (times, the uuid) come from counters, so that one seed builds the
 * very same bytes and a failing case replays exactly. The test is linked
 * with --wrap=clock_gettime,--wrap=getrandom; everything else, and all of
 * the fuzzing, sees the real ones.
 */
static bool fake_clock;
static uint64_t fake_ns;
static uint32_t fake_rand;

int __real_clock_gettime(clockid_t clk, struct timespec *ts);
int __wrap_clock_gettime(clockid_t clk, struct timespec *ts);
int __wrap_clock_gettime(clockid_t clk, struct timespec *ts)
{
	uint64_t ns;

	if (!__atomic_load_n(&fake_clock, __ATOMIC_RELAXED) || clk != CLOCK_REALTIME)
		return __real_clock_gettime(clk, ts);
	ns = __atomic_add_fetch(&fake_ns, 1234567, __ATOMIC_RELAXED);
	ts->tv_sec = (time_t)(ns / 1000000000ULL);
	ts->tv_nsec = (long)(ns % 1000000000ULL);
	return 0;
}

ssize_t __real_getrandom(void *buf, size_t len, unsigned int flags);
ssize_t __wrap_getrandom(void *buf, size_t len, unsigned int flags);
ssize_t __wrap_getrandom(void *buf, size_t len, unsigned int flags)
{
	uint8_t *p = buf;
	size_t i;

	if (!__atomic_load_n(&fake_clock, __ATOMIC_RELAXED))
		return __real_getrandom(buf, len, flags);
	for (i = 0; i < len; i++)
		p[i] = (uint8_t)(__atomic_add_fetch(&fake_rand, 2654435761U, __ATOMIC_RELAXED) >>
				 24);
	return (ssize_t)len;
}

static void fake_clock_set(bool on, guint32 seed)
{
	fake_ns = 1700000000ULL * 1000000000ULL + (uint64_t)seed * 1000;
	fake_rand = seed;
	__atomic_store_n(&fake_clock, on, __ATOMIC_RELEASE);
}

/* ---- building a pool ---- */

/* give [off, off+len) of ino blocks as a write would (their data is not what is tested) */
static void put_blocks(struct meta *m, uint64_t ino, uint64_t off, uint64_t len)
{
	struct meta_extent ext[64];

	g_assert_cmpint(extent_map(m, ino, off, len, true, ext, G_N_ELEMENTS(ext)), >, 0);
	g_assert_cmpint(extent_write_done(m, ino, off, len), ==, 0);
}

static void symlink_to(struct meta *m, uint64_t parent, const char *name, const char *target)
{
	struct meta_attr a;

	g_assert_cmpint(meta_symlink(m, parent, name, target, &root_cred, &a), ==, 0);
	meta_forget(m, a.ino, 1);
}

static void xattr_fill(struct meta *m, uint64_t ino, const char *name, size_t len, int seed)
{
	uint8_t *v = g_malloc(len);
	size_t i;

	for (i = 0; i < len; i++)
		v[i] = (uint8_t)(seed * 7 + i);
	g_assert_cmpint(meta_setxattr(m, ino, name, v, len, 0), ==, 0);
	g_free(v);
}

/* files of every shape: extents written and fallocated, symlinks, xattrs, links, a subtree */
static void build_variety(struct meta *m, GRand *rng)
{
	uint64_t sub, deep, f, ino;
	char name[64], *target;
	int i;

	sub = tfx_mk(m, ROOT, "sub", S_IFDIR | 0755);
	deep = tfx_mk(m, tfx_mk(m, sub, "a", S_IFDIR | 0700), "b", S_IFDIR | 0755);
	for (i = 0; i < 40; i++) {
		g_snprintf(name, sizeof(name), "file%02d", i);
		f = tfx_mk(m, i % 2 ? sub : deep, name, S_IFREG | 0644);
		put_blocks(m, f, 0, (uint64_t)g_rand_int_range(rng, 1, 5) * BS);
		put_blocks(m, f, (uint64_t)g_rand_int_range(rng, 8, 64) * BS, BS);
		if (i % 5 == 0)
			g_assert_cmpint(extent_fallocate(m, f, 200 * BS, 3 * BS,
							 FALLOC_FL_KEEP_SIZE), ==, 0);
		if (i % 3 == 0)
			xattr_fill(m, f, "user.small", (size_t)g_rand_int_range(rng, 1, 80), i);
	}
	ino = tfx_mk(m, ROOT, "bigxattr", S_IFREG | 0600);
	xattr_fill(m, ino, "user.large", 60000, 1);
	xattr_fill(m, ino, "trusted.other", 3000, 2);
	ino = tfx_mk(m, sub, "manyxattrs", S_IFREG | 0600);
	for (i = 0; i < 60; i++) {
		g_snprintf(name, sizeof(name), "user.attr%02d", i);
		xattr_fill(m, ino, name, (size_t)i * 13 + 1, i);
	}
	g_assert_cmpint(meta_link(m, ino, ROOT, "hardlink", &(struct meta_attr){ 0 }), ==, 0);
	meta_forget(m, ino, 1);
	symlink_to(m, ROOT, "short-link", "sub/a/b");
	target = g_strnfill(4000, 'x');
	symlink_to(m, sub, "long-link", target);
	g_free(target);
	tfx_mk(m, sub, "fifo", S_IFIFO | 0644);
	tfx_mk(m, ROOT, "empty-dir", S_IFDIR | 0755);
}

struct big_dir {
	uint64_t ino;
	GHashTable *live; /* names in it */
};

static void churn_name(char *buf, size_t cap, GRand *rng)
{
	g_snprintf(buf, cap, "e%05d", g_rand_int_range(rng, 0, BIG_NAMES));
}

/* creates, unlinks and renames over one directory, like the churn that found issue 27 */
static void churn(struct meta *m, struct big_dir *bd, GRand *rng, int ops)
{
	char a[16], b[16];
	int i;

	for (i = 0; i < ops; i++) {
		double p = g_rand_double(rng);
		GHashTableIter it;
		gpointer k, v;
		guint pick, n = g_hash_table_size(bd->live);

		churn_name(a, sizeof(a), rng);
		if (p < 0.5 || !n) {
			if (!g_hash_table_contains(bd->live, a)) {
				tfx_mk(m, bd->ino, a, S_IFREG | 0644);
				g_hash_table_add(bd->live, g_strdup(a));
			}
			continue;
		}
		pick = (guint)g_rand_int_range(rng, 0, (gint32)n);
		g_hash_table_iter_init(&it, bd->live);
		while (g_hash_table_iter_next(&it, &k, &v) && pick--)
			;
		g_strlcpy(b, k, sizeof(b));
		if (p < 0.8) {
			g_assert_cmpint(meta_unlink(m, bd->ino, b), ==, 0);
			g_hash_table_remove(bd->live, b);
		} else {
			g_assert_cmpint(meta_rename(m, bd->ino, b, bd->ino, a, 0), ==, 0);
			g_hash_table_remove(bd->live, b);
			g_hash_table_add(bd->live, g_strdup(a));
		}
	}
}

static void fill(struct meta *m, struct big_dir *bd, int n)
{
	char name[16];
	int i;

	for (i = 0; i < n; i++) {
		g_snprintf(name, sizeof(name), "e%05d", i * 2);
		tfx_mk(m, bd->ino, name, S_IFREG | 0644);
		g_hash_table_add(bd->live, g_strdup(name));
	}
}

/* ---- the snapshot and what it holds ---- */

struct pool_map {
	struct layout_geom g;
	uint8_t *snap; /* pool bytes [0, data_off) */
	uint64_t gen;
	uint64_t slot; /* pool offset of the committed checkpoint */
	size_t plen; /* its payload length */
	size_t bm_bytes;
	size_t dir_lo, dir_hi; /* payload offsets around the big directory's entries */
	GArray *txns; /* uint64_t journal offsets of the transactions replay applies */
	uint64_t jused; /* journal bytes they fill */
};

static void map_journal(struct pool_map *pm)
{
	const uint8_t *j = pm->snap + pm->g.journal_off;
	uint64_t pos = 0;

	pm->txns = g_array_new(FALSE, FALSE, sizeof(uint64_t));
	while (pos + sizeof(struct layout_txn_hdr) <= pm->g.journal_len) {
		struct layout_txn_hdr h;

		memcpy(&h, j + pos, sizeof(h));
		if (le32toh(h.magic) != LAYOUT_TXN_MAGIC || le64toh(h.gen) != pm->gen ||
		    le32toh(h.len) < sizeof(h) || le32toh(h.len) > pm->g.journal_len - pos)
			break;
		g_array_append_val(pm->txns, pos);
		pos += le32toh(h.len);
	}
	pm->jused = pos;
}

/* the big directory's entries: between the first and the last of its names in the payload */
static void map_dir(struct pool_map *pm, struct big_dir *bd)
{
	const uint8_t *p = pm->snap + pm->slot + LAYOUT_CKPT_HDR_SIZE;
	size_t len = pm->plen - pm->bm_bytes;
	GHashTableIter it;
	gpointer k, v;

	pm->dir_lo = len;
	pm->dir_hi = 0;
	g_hash_table_iter_init(&it, bd->live);
	while (g_hash_table_iter_next(&it, &k, &v)) {
		const uint8_t *at = memmem(p, len, k, strlen(k));

		if (!at)
			continue;
		pm->dir_lo = MIN(pm->dir_lo, (size_t)(at - p));
		pm->dir_hi = MAX(pm->dir_hi, (size_t)(at - p) + strlen(k));
	}
	g_assert_cmpuint(pm->dir_lo, <, pm->dir_hi);
	pm->dir_lo = pm->dir_lo > 12 ? pm->dir_lo - 12 : 0;
}

static void snapshot(struct fx *f, struct pool_map *pm, struct big_dir *bd)
{
	struct layout_ckpt_hdr h;

	pm->snap = g_malloc(pm->g.data_off);
	g_assert_cmpint(remote_read(f->r, 0, pm->snap, pm->g.data_off), ==, 0);
	memset(pm->snap + LAYOUT_SB_LEASE_OWNER, 0, LAYOUT_SB_LEASE_END - LAYOUT_SB_LEASE_OWNER);
	memcpy(&pm->gen, pm->snap + LAYOUT_SB_CKPT_GEN, 8);
	pm->gen = le64toh(pm->gen);
	pm->slot = pm->g.slot_off[pm->gen & 1];
	memcpy(&h, pm->snap + pm->slot, sizeof(h));
	pm->plen = le64toh(h.payload_len);
	pm->bm_bytes = (pm->g.data_blocks + 7) / 8;
	map_journal(pm);
	map_dir(pm, bd);
}

static void pool_map_clear(struct pool_map *pm)
{
	g_free(pm->snap);
	if (pm->txns)
		g_array_free(pm->txns, TRUE);
	memset(pm, 0, sizeof(*pm));
}

/*
 * Write pool bytes behind the back of any lease: the lease deadline of the
 * last holder on this remote (a crashed mount, a repair) must not hold the
 * test's own writes back.
 */
static void raw_write(struct fx *f, uint64_t off, const void *buf, uint64_t len)
{
	remote_set_write_deadline(f->r, 0);
	g_assert_cmpint(remote_write(f->r, off, buf, len), ==, 0);
}

/* write back pool bytes [off, off+len) of the snapshot */
static void restore(struct fx *f, const struct pool_map *pm, uint64_t off, uint64_t len)
{
	raw_write(f, off, pm->snap + off, len);
}

static void restore_all(struct fx *f, const struct pool_map *pm)
{
	restore(f, pm, 0, pm->g.data_off);
}

/*
 * Build the pool: the big directory churned, the variety, a checkpoint,
 * more changes left in the journal only, then a crash (the lease word is
 * cleared in the snapshot, as if the holder had gone long ago).
 */
static void build_pool(struct fx *f, struct pool_map *pm, GRand *rng)
{
	struct mount_opts o = { .holder_name = "test-fuzz" };
	struct big_dir bd = { 0 };
	struct meta *m = NULL;
	char *msg = NULL;
	uint64_t ino;

	bd.live = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
	g_assert_cmpint(mount_open(f->r, &o, &m, &msg), ==, 0);
	pm->g = m->g;
	bd.ino = tfx_mk(m, ROOT, "big", S_IFDIR | 0755);
	fill(m, &bd, BIG_NAMES / 2);
	churn(m, &bd, rng, 4000);
	build_variety(m, rng);
	churn(m, &bd, rng, 3000);
	g_assert_cmpint(commit_write(m, true), ==, 0);
	/* the journal tail: more churn, xattrs set and removed, a file grown */
	churn(m, &bd, rng, 400);
	ino = tfx_lookup(m, ROOT, "bigxattr");
	xattr_fill(m, ino, "user.large", 50000, 3);
	g_assert_cmpint(meta_removexattr(m, ino, "trusted.other"), ==, 0);
	put_blocks(m, ino, 0, 5 * BS);
	tfx_mk(m, ROOT, "after-ckpt", S_IFDIR | 0755);
	symlink_to(m, ROOT, "late-link", "big");
	g_assert_cmpint(commit_sync(m), ==, 0);
	mount_abandon(m);
	snapshot(f, pm, &bd);
	restore(f, pm, 0, LAYOUT_SB_SIZE);
	g_test_message("pool: checkpoint %" G_GUINT64_FORMAT " of %zu bytes, %u journal "
		       "transactions (%" G_GUINT64_FORMAT " bytes), crc %08x; %u entries in /big "
		       "(payload bytes %zu..%zu)",
		       (guint64)pm->gen, pm->plen, pm->txns->len, (guint64)pm->jused,
		       layout_crc32c(layout_crc(pm->snap + pm->slot + LAYOUT_CKPT_HDR_SIZE,
						pm->plen),
				     pm->snap + pm->g.journal_off, pm->jused),
		       g_hash_table_size(bd.live), pm->dir_lo, pm->dir_hi);
	g_assert_cmpuint(pm->txns->len, >, 100);
	g_hash_table_destroy(bd.live);
}

/* ---- damage ---- */

enum damage {
	CK_FLIP_CRC, /* checkpoint payload: 1..8 bytes changed, checksum recomputed */
	CK_FLIP, /* the same, checksum left as it was */
	CK_ZERO_CRC, /* the payload zeroed from some offset on (a record cut short) */
	CK_CUT_CRC, /* a byte range cut out of the payload, the length and checksums fixed */
	DIR_FLIP_CRC, /* bytes changed among the big directory's entries */
	DIR_CUT_CRC, /* entries cut out: the count now larger than the entries written */
	JN_FLIP_CRC, /* a journal transaction's records changed, its checksum recomputed */
	JN_HDR_CRC, /* its header (length, record count...) changed, checksum recomputed */
	JN_FLIP, /* a transaction changed (torn) */
	JN_ZERO, /* the journal zeroed from inside a transaction on */
	DAMAGE_KINDS,
};

static const char *const damage_name[] = {
	"ckpt-flip-crc", "ckpt-flip", "ckpt-zero-crc", "ckpt-cut-crc", "dir-flip-crc",
	"dir-cut-crc",	 "jn-flip-crc", "jn-hdr-crc", "jn-flip", "jn-zero",
};

/* the damaged metadata of one case: a copy of the checkpoint slot and of the journal */
struct victim {
	uint8_t *ck; /* header + payload */
	size_t cklen;
	uint8_t *jn; /* the used journal */
	size_t jnlen;
};

static void flip_bytes(GRand *rng, uint8_t *p, size_t lo, size_t hi)
{
	int n = g_rand_int_range(rng, 1, 9), i;

	for (i = 0; i < n && hi > lo; i++)
		p[lo + (size_t)g_rand_int_range(rng, 0, (gint32)(hi - lo))] ^=
			(uint8_t)g_rand_int_range(rng, 1, 256);
}

/* cut [lo, lo+n) out of the payload: payload_len shrinks */
static void cut_payload(struct victim *v, size_t lo, size_t n)
{
	uint8_t *pl = v->ck + LAYOUT_CKPT_HDR_SIZE;
	size_t plen = v->cklen - LAYOUT_CKPT_HDR_SIZE;
	struct layout_ckpt_hdr h;

	memmove(pl + lo, pl + lo + n, plen - lo - n);
	v->cklen -= n;
	memcpy(&h, v->ck, sizeof(h));
	h.payload_len = htole64(plen - n);
	memcpy(v->ck, &h, sizeof(h));
}

/* recompute the checkpoint's payload and header checksums */
static void ckpt_fix_crc(struct victim *v)
{
	struct layout_ckpt_hdr h;

	memcpy(&h, v->ck, sizeof(h));
	h.payload_crc = htole32(layout_crc(v->ck + LAYOUT_CKPT_HDR_SIZE,
					   v->cklen - LAYOUT_CKPT_HDR_SIZE));
	h.hdr_crc = 0;
	h.hdr_crc = htole32(layout_crc(&h, sizeof(h)));
	memcpy(v->ck, &h, sizeof(h));
}

/* recompute the checksum of the transaction at journal offset pos */
static void txn_fix_crc(struct victim *v, uint64_t pos)
{
	struct layout_txn_hdr h;
	uint32_t len;

	memcpy(&h, v->jn + pos, sizeof(h));
	len = le32toh(h.len);
	if (len < sizeof(h) || len > v->jnlen - pos)
		len = (uint32_t)(v->jnlen - pos);
	h.crc = 0;
	memcpy(v->jn + pos, &h, sizeof(h));
	h.crc = htole32(layout_crc(v->jn + pos, len));
	memcpy(v->jn + pos, &h, sizeof(h));
}

static void damage_ckpt(const struct pool_map *pm, struct victim *v, enum damage kind,
			GRand *rng)
{
	size_t inodes = pm->plen - pm->bm_bytes, lo, n;

	switch (kind) {
	case CK_FLIP_CRC:
	case CK_FLIP:
		/* mostly the inode records, now and then the bitmap */
		flip_bytes(rng, v->ck + LAYOUT_CKPT_HDR_SIZE, 0,
			   g_rand_int_range(rng, 0, 8) ? inodes : pm->plen);
		break;
	case CK_ZERO_CRC:
		lo = (size_t)g_rand_int_range(rng, 0, (gint32)inodes);
		memset(v->ck + LAYOUT_CKPT_HDR_SIZE + lo, 0, inodes - lo);
		break;
	case CK_CUT_CRC:
		lo = (size_t)g_rand_int_range(rng, 0, (gint32)inodes - 1);
		n = MIN((size_t)g_rand_int_range(rng, 1, 300), inodes - lo);
		cut_payload(v, lo, n);
		break;
	case DIR_FLIP_CRC:
		flip_bytes(rng, v->ck + LAYOUT_CKPT_HDR_SIZE, pm->dir_lo, pm->dir_hi);
		break;
	case DIR_CUT_CRC:
		lo = (size_t)g_rand_int_range(rng, (gint32)pm->dir_lo, (gint32)pm->dir_hi);
		n = MIN((size_t)g_rand_int_range(rng, 1, 4000), pm->dir_hi - lo);
		cut_payload(v, lo, n);
		break;
	default:
		g_assert_not_reached();
	}
	if (kind != CK_FLIP)
		ckpt_fix_crc(v);
}

static void damage_journal(const struct pool_map *pm, struct victim *v, enum damage kind,
			   GRand *rng)
{
	guint t = (guint)g_rand_int_range(rng, 0, (gint32)pm->txns->len);
	uint64_t pos = g_array_index(pm->txns, uint64_t, t);
	uint64_t end = t + 1 < pm->txns->len ? g_array_index(pm->txns, uint64_t, t + 1) :
					       pm->jused;
	size_t hdr = sizeof(struct layout_txn_hdr), lo;

	switch (kind) {
	case JN_FLIP_CRC:
	case JN_FLIP:
		flip_bytes(rng, v->jn, pos + hdr, end);
		break;
	case JN_HDR_CRC:
		/* the length, the record count, or anything in the header but the magic */
		lo = (size_t)g_rand_int_range(rng, 4, (gint32)hdr);
		v->jn[pos + lo] ^= (uint8_t)g_rand_int_range(rng, 1, 256);
		break;
	case JN_ZERO:
		lo = (size_t)g_rand_int_range(rng, (gint32)pos, (gint32)end);
		memset(v->jn + lo, 0, v->jnlen - lo);
		break;
	default:
		g_assert_not_reached();
	}
	if (kind != JN_FLIP && kind != JN_ZERO)
		txn_fix_crc(v, pos);
}

/* ---- one case ---- */

struct fuzz_stats {
	guint cases, mounted, refused, fsck_problems, repaired;
	guint per_kind[DAMAGE_KINDS];
	double slowest;
};

static struct fsck_opts check_opts = { .force = true, .lease_takeover_ms = 2000 };
static struct fsck_opts repair_opts = { .repair = true, .force = true, .lease_takeover_ms = 2000 };

/* rmemfs-fsck's path: must return 0 (problems or not) or a clean error with a message */
static int fsck_run(struct fx *f, const struct fsck_opts *o, unsigned int *problems,
		    const char *what)
{
	struct fsck_report rep;
	char *msg = NULL;
	int rc;

	fsck_report_init(&rep);
	rc = mount_fsck(f->r, o, &rep, &msg);
	if (rc < 0)
		g_test_message("%s: %d (%s)", what, rc, msg ? msg : "-");
	g_assert_true(rc == 0 || (rc < 0 && msg && *msg));
	*problems = rep.problems;
	if (problems && *problems && g_test_verbose())
		g_test_message("%s: %u problems, first: %s", what, rep.problems,
			       rep.lines->len ? (char *)g_ptr_array_index(rep.lines, 0) : "-");
	fsck_report_clear(&rep);
	g_free(msg);
	return rc;
}

/* rmemfs-fsck's check, which must report: its lines joined (g_free them), *problems */
static char *fsck_lines(struct fx *f, unsigned int *problems)
{
	struct fsck_report rep;
	char *msg = NULL, *all;

	fsck_report_init(&rep);
	g_assert_cmpint(mount_fsck(f->r, &check_opts, &rep, &msg), ==, 0);
	g_ptr_array_add(rep.lines, NULL);
	all = g_strjoinv("\n", (char **)rep.lines->pdata);
	g_test_message("fsck: %u problems:\n%.2000s", rep.problems, all);
	*problems = rep.problems;
	fsck_report_clear(&rep);
	g_free(msg);
	return all;
}

/* rmemfs-fsck --repair finds problems and leaves none; the pool then mounts read-write */
static struct meta *repair_and_mount(struct fx *f, const struct mount_opts *o)
{
	struct meta *m = NULL;
	unsigned int problems;
	char *msg = NULL;

	g_assert_cmpint(fsck_run(f, &repair_opts, &problems, "fsck --repair"), ==, 0);
	g_assert_cmpuint(problems, >, 0);
	g_assert_cmpint(fsck_run(f, &check_opts, &problems, "fsck after repair"), ==, 0);
	g_assert_cmpuint(problems, ==, 0);
	g_assert_cmpint(mount_open(f->r, o, &m, &msg), ==, 0);
	return m;
}

/* the lease word cleared, as if its holder (an abandoned mount) had gone long ago */
static void lease_clear(struct fx *f)
{
	uint8_t zero[LAYOUT_SB_LEASE_END - LAYOUT_SB_LEASE_OWNER] = { 0 };

	raw_write(f, LAYOUT_SB_LEASE_OWNER, zero, sizeof(zero));
}

/* the read-only mount: it loads, or refuses with a message */
static int try_mount(struct fx *f, bool rw, char **msg_out)
{
	struct mount_opts o = { .read_only = !rw, .holder_name = "test-fuzz",
				.lease_takeover_ms = 2000 };
	struct meta *m = NULL;
	char *msg = NULL;
	int rc = mount_open(f->r, &o, &m, &msg);

	if (rc == 0) {
		g_assert_null(msg);
		g_assert_cmpint(mount_close(m), ==, 0);
	} else {
		g_assert_cmpint(rc, <, 0);
		g_assert_nonnull(msg);
		g_assert_cmpuint(strlen(msg), >, 0);
	}
	if (msg_out)
		*msg_out = msg;
	else
		g_free(msg);
	return rc;
}

static void write_victim(struct fx *f, const struct pool_map *pm, const struct victim *v)
{
	raw_write(f, pm->slot, v->ck, v->cklen);
	raw_write(f, pm->g.journal_off, v->jn, v->jnlen);
}

static void run_case(struct fx *f, const struct pool_map *pm, guint32 seed, guint idx,
		     struct fuzz_stats *st)
{
	GRand *rng = g_rand_new_with_seed(seed ^ (idx * 2654435761U));
	enum damage kind = (enum damage)g_rand_int_range(rng, 0, DAMAGE_KINDS);
	bool repair = idx % REPAIR_EVERY == 0;
	struct victim v;
	unsigned int problems;
	gint64 t0 = g_get_monotonic_time();
	double secs;
	char *msg = NULL;
	int rc;

	v.cklen = LAYOUT_CKPT_HDR_SIZE + pm->plen;
	v.ck = g_memdup2(pm->snap + pm->slot, v.cklen);
	v.jnlen = pm->jused;
	v.jn = g_memdup2(pm->snap + pm->g.journal_off, v.jnlen);
	if (kind < JN_FLIP_CRC)
		damage_ckpt(pm, &v, kind, rng);
	else
		damage_journal(pm, &v, kind, rng);
	write_victim(f, pm, &v);
	watchdog_arm("case %u (%s) of seed %u: over %d s\n", idx, damage_name[kind], seed,
		     CASE_SECONDS);

	rc = try_mount(f, false, &msg);
	if (rc < 0 && g_test_verbose())
		g_test_message("case %u (%s): mount refused: %s", idx, damage_name[kind], msg);
	st->mounted += rc == 0;
	st->refused += rc < 0;
	g_free(msg);
	rc = fsck_run(f, &check_opts, &problems, "fsck");
	g_assert_cmpint(rc, ==, 0); /* the headers are intact: a check always reports */
	st->fsck_problems += problems > 0;
	if (repair) {
		rc = fsck_run(f, &repair_opts, &problems, "fsck --repair");
		if (rc < 0)
			g_error("case %u (%s) of seed %u: the repair failed", idx,
				damage_name[kind], seed);
		rc = try_mount(f, true, &msg);
		if (rc < 0)
			g_error("case %u (%s) of seed %u: the repaired pool does not mount: %s",
				idx, damage_name[kind], seed, msg);
		g_assert_cmpint(fsck_run(f, &check_opts, &problems, "fsck after repair"), ==, 0);
		if (problems)
			g_error("case %u (%s) of seed %u: %u problems after the repair", idx,
				damage_name[kind], seed, problems);
		st->repaired++;
		restore_all(f, pm);
	} else {
		restore(f, pm, pm->slot, v.cklen > LAYOUT_CKPT_HDR_SIZE + pm->plen ?
						 v.cklen : LAYOUT_CKPT_HDR_SIZE + pm->plen);
		restore(f, pm, pm->g.journal_off, pm->jused);
	}
	alarm(0);
	secs = (double)(g_get_monotonic_time() - t0) / 1e6;
	st->slowest = MAX(st->slowest, secs);
	st->per_kind[kind]++;
	st->cases++;
	g_free(v.ck);
	g_free(v.jn);
	g_rand_free(rng);
}

static void test_damage(struct fx *f, gconstpointer d)
{
	guint32 seed = env_uint("RMEMFS_FUZZ_SEED", (guint32)g_test_rand_int());
	guint cases = env_uint("RMEMFS_FUZZ_CASES", CASES_DEFAULT);
	const char *only = g_getenv("RMEMFS_FUZZ_CASE");
	struct fuzz_stats st = { 0 };
	struct pool_map pm = { 0 };
	GRand *rng = g_rand_new_with_seed(seed);
	gint64 t0;
	guint i, k;

	g_test_message("seed %u (replay: RMEMFS_FUZZ_SEED=%u), %u cases", seed, seed, cases);
	g_printerr("# test_fuzz: seed %u (replay: RMEMFS_FUZZ_SEED=%u)\n", seed, seed);
	fake_clock_set(true, seed);
	build_pool(f, &pm, rng);
	fake_clock_set(false, 0);
	g_rand_free(rng);
	t0 = g_get_monotonic_time();
	for (i = 0; i < cases; i++) {
		if (only && *only && i != (guint)atoi(only))
			continue;
		run_case(f, &pm, seed, i, &st);
		if (!UNDER_ASAN && i % 64 == 0)
			g_assert_cmpuint(peak_rss_kb(), <, PEAK_RSS_MAX_KB);
	}
	if (!UNDER_ASAN)
		g_assert_cmpuint(peak_rss_kb(), <, PEAK_RSS_MAX_KB);
	g_test_message("%u cases in %.1f s (slowest %.2f s): %u loaded read-only, %u refused, "
		       "fsck found problems in %u, %u repaired; peak RSS %" G_GUINT64_FORMAT
		       " kB", st.cases, (double)(g_get_monotonic_time() - t0) / 1e6, st.slowest,
		       st.mounted, st.refused, st.fsck_problems, st.repaired,
		       (guint64)peak_rss_kb());
	for (k = 0; k < DAMAGE_KINDS; k++)
		g_test_message("  %-14s %u cases", damage_name[k], st.per_kind[k]);
	pool_map_clear(&pm);
}

/* ---- issue 27's checkpoint ---- */

/* the cookie of every entry of dir, by name */
static int note_cookie(void *ctx, const char *name, const struct meta_attr *attr, uint64_t next)
{
	g_hash_table_insert(ctx, g_strdup(name), GSIZE_TO_POINTER(next));
	return 0;
}

/* payload offset where the entry name (ino, cookie) of the checkpoint's payload begins */
static size_t entry_start(const uint8_t *pl, size_t len, const char *name, uint64_t ino,
			  uint64_t cookie)
{
	const uint8_t *at = memmem(pl, len, name, strlen(name));

	g_assert_nonnull(at);
	return (size_t)(at - pl) - 2 - layout_uv_len(cookie) - layout_uv_len(ino);
}

/*
 * Rewrite the committed checkpoint as the buggy serialiser did: directory
 * dir keeps its count of n entries, but only the first `keep` of them are
 * written, followed by one entry naming freed memory; everything after the
 * directory's record stays. Checksums valid.
 */
static void write_bug_shape(struct fx *f, struct meta *m, uint64_t dir, guint n, guint keep)
{
	GHashTable *cookies = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
	static const uint8_t junk[] = { 0xfc, 0xc2, 0xb0, 0x0d, 0xb0, 0xc7, 0x96, 0x73, 0x98 };
	struct layout_ckpt_hdr h;
	GByteArray *garbage = g_byte_array_new();
	uint8_t *ck, *pl;
	uint64_t gen, slot;
	size_t plen, cut_from, cut_to;
	struct victim v;
	char first[16], last[16];

	g_assert_cmpint(meta_readdir(m, dir, 0, NULL, false, note_cookie, cookies), ==, 0);
	g_assert_cmpint(super_read_ckpt_gen(m->sb, &gen), ==, 0);
	slot = m->g.slot_off[gen & 1];
	g_assert_cmpint(remote_read(f->r, slot, &h, sizeof(h)), ==, 0);
	plen = le64toh(h.payload_len);
	ck = g_malloc(LAYOUT_CKPT_HDR_SIZE + plen);
	g_assert_cmpint(remote_read(f->r, slot, ck, LAYOUT_CKPT_HDR_SIZE + plen), ==, 0);
	pl = ck + LAYOUT_CKPT_HDR_SIZE;
	g_snprintf(first, sizeof(first), "f%04u", keep);
	g_snprintf(last, sizeof(last), "f%04u", n - 1);
	cut_from = entry_start(pl, plen, first, tfx_lookup(m, dir, first),
			       GPOINTER_TO_SIZE(g_hash_table_lookup(cookies, first)));
	cut_to = entry_start(pl, plen, last, tfx_lookup(m, dir, last),
			     GPOINTER_TO_SIZE(g_hash_table_lookup(cookies, last))) +
		 layout_uv_len(tfx_lookup(m, dir, last)) +
		 layout_uv_len(GPOINTER_TO_SIZE(g_hash_table_lookup(cookies, last))) + 2 + 5;
	/* the entry a freed dirent left: a heap address for an inode, a garbage name */
	layout_put_dirent(garbage, 94583018095504ULL, 140697558662784ULL, 0,
			  (const char *)junk, sizeof(junk));
	v.cklen = LAYOUT_CKPT_HDR_SIZE + plen - (cut_to - cut_from) + garbage->len;
	v.ck = g_malloc(v.cklen);
	memcpy(v.ck, ck, LAYOUT_CKPT_HDR_SIZE + cut_from);
	memcpy(v.ck + LAYOUT_CKPT_HDR_SIZE + cut_from, garbage->data, garbage->len);
	memcpy(v.ck + LAYOUT_CKPT_HDR_SIZE + cut_from + garbage->len, pl + cut_to, plen - cut_to);
	h.payload_len = htole64(v.cklen - LAYOUT_CKPT_HDR_SIZE);
	memcpy(v.ck, &h, sizeof(h));
	ckpt_fix_crc(&v);
	raw_write(f, slot, v.ck, v.cklen);
	g_free(v.ck);
	g_free(ck);
	g_byte_array_unref(garbage);
	g_hash_table_destroy(cookies);
}

struct shape_tree {
	uint64_t dir, file, link, sub, subfile;
	uint64_t *files; /* the directory's, in name order */
	guint inodes;
};

/* a directory of n files (names f0000...), and inodes numbered after them */
static void build_shape_tree(struct meta *m, guint n, struct shape_tree *t)
{
	char name[16];
	guint i;

	t->dir = tfx_mk(m, ROOT, "d", S_IFDIR | 0755);
	t->files = g_new(uint64_t, n);
	for (i = 0; i < n; i++) {
		g_snprintf(name, sizeof(name), "f%04u", i);
		t->files[i] = tfx_mk(m, t->dir, name, S_IFREG | 0644);
	}
	t->file = tfx_mk(m, ROOT, "after-file", S_IFREG | 0644);
	put_blocks(m, t->file, 0, 3 * BS);
	put_blocks(m, t->file, 10 * BS, BS);
	xattr_fill(m, t->file, "user.kept", 5000, 9);
	symlink_to(m, ROOT, "after-link", "d/f0001");
	t->link = tfx_lookup(m, ROOT, "after-link");
	t->sub = tfx_mk(m, ROOT, "after-dir", S_IFDIR | 0755);
	t->subfile = tfx_mk(m, t->sub, "inner", S_IFREG | 0600);
	t->inodes = n + 6; /* root, d, after-file, after-link, after-dir, inner */
}

static void check_shape_kept(struct meta *m, const struct shape_tree *t, guint n, guint keep)
{
	struct meta_attr a;
	uint64_t lf;
	char name[16], buf[64];
	guint i;

	for (i = 0; i < keep; i++) {
		g_snprintf(name, sizeof(name), "f%04u", i);
		g_assert_cmpuint(tfx_lookup(m, t->dir, name), !=, 0);
	}
	lf = tfx_lookup(m, ROOT, "lost+found");
	g_assert_cmpuint(lf, !=, 0);
	for (i = keep; i < n; i++) {
		g_snprintf(name, sizeof(name), "#%" G_GUINT64_FORMAT, (guint64)t->files[i]);
		g_assert_cmpuint(tfx_lookup(m, lf, name), ==, t->files[i]);
	}
	g_assert_cmpuint(tfx_lookup(m, ROOT, "after-file"), ==, t->file);
	g_assert_cmpint(meta_getattr(m, t->file, &a), ==, 0);
	g_assert_cmpuint(a.size, ==, 11 * BS);
	g_assert_cmpuint(a.blocks, ==, 4);
	g_assert_cmpint(meta_getxattr(m, t->file, "user.kept", NULL, 0), ==, 5000);
	g_assert_cmpint(meta_readlink(m, t->link, buf, sizeof(buf)), ==, 0);
	g_assert_cmpstr(buf, ==, "d/f0001");
	g_assert_cmpuint(tfx_lookup(m, t->sub, "inner"), ==, t->subfile);
}

static void bug_shape(struct fx *f, guint n, guint keep)
{
	struct mount_opts o = { .holder_name = "test-fuzz", .lease_takeover_ms = 2000 };
	struct meta *m = NULL;
	struct shape_tree t;
	char *msg = NULL, *all, want[64];
	unsigned int problems;

	fake_clock_set(true, n + keep);
	g_assert_cmpint(mount_open(f->r, &o, &m, &msg), ==, 0);
	build_shape_tree(m, n, &t);
	g_assert_cmpint(commit_write(m, true), ==, 0);
	write_bug_shape(f, m, t.dir, n, keep);
	mount_abandon(m);
	fake_clock_set(false, 0);
	lease_clear(f);

	/* the mount refuses, naming the directory */
	m = NULL;
	g_assert_cmpint(mount_open(f->r, &o, &m, &msg), ==, -EUCLEAN);
	g_test_message("mount: %s", msg);
	g_snprintf(want, sizeof(want), "directory %" G_GUINT64_FORMAT, (guint64)t.dir);
	g_assert_nonnull(strstr(msg, want));
	g_assert_nonnull(strstr(msg, "is malformed"));
	g_assert_nonnull(strstr(msg, "run rmemfs-fsck --repair"));
	g_free(msg);
	msg = NULL;

	/* fsck says what is damaged */
	all = fsck_lines(f, &problems);
	g_snprintf(want, sizeof(want), "directory %" G_GUINT64_FORMAT " (payload offset",
		   (guint64)t.dir);
	g_assert_nonnull(strstr(all, want));
	g_assert_nonnull(strstr(all, "is damaged"));
	g_free(all);

	/* the repair brings it back, every other inode kept */
	m = repair_and_mount(f, &o);
	g_assert_cmpuint(g_hash_table_size(m->inodes), ==, t.inodes + 1); /* + lost+found */
	check_shape_kept(m, &t, n, keep);
	g_assert_cmpint(mount_close(m), ==, 0);
	g_free(t.files);
}

/* 1300 files, 700 of them written before the garbage entry */
static void test_bug_shape(struct fx *f, gconstpointer d)
{
	bug_shape(f, 1300, 700);
}

/* the shape issue 27's pool had: not one real entry written, only the garbage one */
static void test_bug_shape_empty(struct fx *f, gconstpointer d)
{
	bug_shape(f, 1300, 0);
}

/* ---- a malformed journal transaction that sets data block CRCs ---- */

/* the pool blocks of ino's [0, nblocks) (one extent) and their CRCs, journaled */
static uint64_t blocks_with_crcs(struct fx *f, struct meta *m, uint64_t ino, guint nblocks,
				 uint32_t *crc)
{
	struct meta_extent ext;
	uint64_t pbs[8];
	uint8_t *buf = g_malloc(BS);
	guint i;

	g_assert_cmpuint(nblocks, <=, G_N_ELEMENTS(pbs));
	put_blocks(m, ino, 0, nblocks * BS);
	g_assert_cmpint(extent_map(m, ino, 0, nblocks * BS, false, &ext, 1), ==, 1);
	g_assert_cmpuint(ext.count, ==, nblocks);
	for (i = 0; i < nblocks; i++) {
		pbs[i] = (ext.pool_off - m->g.data_off) / BS + i;
		g_assert_cmpint(remote_read(f->r, ext.pool_off + i * BS, buf, BS), ==, 0);
		crc[i] = layout_crc(buf, BS);
	}
	g_assert_cmpint(checksum_log(m, pbs, crc, (int)nblocks), ==, 0);
	g_free(buf);
	return pbs[0];
}

/*
 * Rewrite the first journal transaction as seed 3307019473's case 1440 of
 * /fuzz/damage left one (a flipped type byte made a DIRENT_DEL a CSUM): a
 * CSUM record setting wrong CRCs for blocks [pb, pb+n), then a record that
 * does not parse; the record count and length kept, the checksum valid.
 */
static void write_bad_csum_txn(struct fx *f, const struct layout_geom *g, uint64_t pb, guint n,
			       const uint32_t *crc)
{
	struct layout_txn_hdr h;
	GByteArray *recs = g_byte_array_new();
	struct victim v = { 0 };
	guint i;

	g_assert_cmpint(remote_read(f->r, g->journal_off, &h, sizeof(h)), ==, 0);
	g_assert_cmpuint(le32toh(h.magic), ==, LAYOUT_TXN_MAGIC);
	g_assert_cmpuint(le32toh(h.nrec), >=, 2);
	v.jnlen = le32toh(h.len);
	v.jn = g_malloc(v.jnlen);
	g_assert_cmpint(remote_read(f->r, g->journal_off, v.jn, v.jnlen), ==, 0);
	layout_put_u8(recs, LAYOUT_REC_CSUM);
	layout_put_uv(recs, pb);
	layout_put_uv(recs, n);
	for (i = 0; i < n; i++) {
		__le32 w = htole32(~crc[i]);

		layout_put_bytes(recs, &w, sizeof(w));
	}
	layout_put_u8(recs, 131); /* no such record type */
	g_assert_cmpuint(sizeof(h) + recs->len, <=, v.jnlen);
	memcpy(v.jn + sizeof(h), recs->data, recs->len);
	txn_fix_crc(&v, 0);
	raw_write(f, g->journal_off, v.jn, v.jnlen);
	g_free(v.jn);
	g_byte_array_unref(recs);
}

/*
 * The repair of a malformed transaction applies the records before the bad
 * one; a CSUM record among them may be the damage itself, and its wrong
 * CRCs made good data read as corrupt after the repair (3 problems left).
 * The repair must drop those blocks' CRCs and leave the others' alone.
 */
static void test_jn_untrusted_csum(struct fx *f, gconstpointer d)
{
	struct mount_opts o = { .holder_name = "test-fuzz", .lease_takeover_ms = 2000 };
	struct meta *m = NULL;
	struct layout_geom g;
	uint32_t bad_crc[4], kept_crc[2], got;
	uint64_t bad_pb, kept_pb;
	unsigned int problems;
	char *msg = NULL, *all;
	guint i;

	g_assert_cmpint(mount_open(f->r, &o, &m, &msg), ==, 0);
	g = m->g;
	bad_pb = blocks_with_crcs(f, m, tfx_mk(m, ROOT, "f", S_IFREG | 0644), 4, bad_crc);
	kept_pb = blocks_with_crcs(f, m, tfx_mk(m, ROOT, "g", S_IFREG | 0644), 2, kept_crc);
	g_assert_cmpint(commit_write(m, true), ==, 0);
	tfx_mk(m, ROOT, "after-ckpt", S_IFDIR | 0755);
	g_assert_cmpint(commit_sync(m), ==, 0);
	mount_abandon(m);
	lease_clear(f);
	write_bad_csum_txn(f, &g, bad_pb, 4, bad_crc);

	m = NULL;
	g_assert_cmpint(mount_open(f->r, &o, &m, &msg), ==, -EUCLEAN);
	g_assert_nonnull(strstr(msg, "is malformed: record 2 of"));
	g_free(msg);
	msg = NULL;

	all = fsck_lines(f, &problems);
	g_assert_nonnull(strstr(all, "the data block checksums its records set are dropped"));
	g_assert_null(strstr(all, "does not match its checksum"));
	g_free(all);

	m = repair_and_mount(f, &o);
	for (i = 0; i < 4; i++)
		g_assert_false(csum_get(extent_csum(m), bad_pb + i, &got));
	for (i = 0; i < 2; i++) {
		g_assert_true(csum_get(extent_csum(m), kept_pb + i, &got));
		g_assert_cmpuint(got, ==, kept_crc[i]);
	}
	g_assert_cmpint(mount_close(m), ==, 0);
}

int main(int argc, char **argv)
{
	g_test_init(&argc, &argv, NULL);
	watchdog_init();
	g_test_add("/fuzz/bug-shape", struct fx, NULL, setup, test_bug_shape, teardown);
	g_test_add("/fuzz/bug-shape-empty", struct fx, NULL, setup, test_bug_shape_empty,
		   teardown);
	g_test_add("/fuzz/jn-untrusted-csum", struct fx, NULL, setup, test_jn_untrusted_csum,
		   teardown);
	g_test_add("/fuzz/damage", struct fx, NULL, setup, test_damage, teardown);
	return g_test_run();
}
