// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test_meta.c - the metadata core (fuse-client/meta, over fuse-client/pool) against a real
 * memserver: format, remount equality, journal replay after a simulated
 * crash, torn journal tails, checkpoint rollover, the lease, format rules,
 * ENOSPC, a 100,000-entry directory, fsck detection and repair, rename and
 * xattr rules, sparse files, ownership rules, a seeded model of directory
 * churn (creates, unlinks, renames over names, links, chunked listings)
 * across remounts and crashes, and the lookups by node id of file handles.
 *
 * Each test spawns its own memserver on an ephemeral port (found through
 * RMEM_BUILD_DIR) and kills it in teardown. A "crash" is mount_abandon():
 * it frees everything and writes nothing, leaving the lease held.
 */
#define G_LOG_DOMAIN "rmemfs-test-meta"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <endian.h>
#include <linux/falloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <glib.h>

#include "checksum.h"
#include "clock.h"
#include "ckpt.h"
#include "commit.h"
#include "csum.h"
#include "extent.h"
#include "fsck.h"
#include "inode.h"
#include "journal.h"
#include "layout.h"
#include "meta.h"
#include "meta_int.h"
#include "memserver_fx.h"
#include "meta_fx.h"
#include "mount.h"
#include "remote.h"
#include "super.h"

#define BS META_BLOCK_SIZE
#define ROOT META_ROOT_INO

static const struct meta_cred root_cred = { .uid = 0, .gid = 0 };

struct fx {
	GPid pid;
	struct remote *r;
};

/* ---- memserver ---- */

static void fx_start(struct fx *f, const char *size)
{
	memset(f, 0, sizeof(*f));
	f->r = tfx_memserver_start(size, 0, &f->pid);
}

static void fx_stop(struct fx *f)
{
	tfx_memserver_stop(&f->r, &f->pid);
}

static void setup_64m(struct fx *f, gconstpointer d)
{
	fx_start(f, "64M");
}

static void setup_16m(struct fx *f, gconstpointer d)
{
	fx_start(f, "16M");
}

static void setup_512m(struct fx *f, gconstpointer d)
{
	fx_start(f, "512M");
}

static void teardown(struct fx *f, gconstpointer d)
{
	fx_stop(f);
}

/* ---- helpers ---- */

static struct meta *do_mount_opts(struct fx *f, const struct mount_opts *o, int expect,
				  char **msg_out)
{
	struct meta *m = NULL;
	char *msg = NULL;
	int rc = mount_open(f->r, o, &m, &msg);

	if (rc != expect)
		g_error("mount_open: %d (%s), expected %d", rc, msg ? msg : "-", expect);
	if (msg_out)
		*msg_out = msg;
	else
		g_free(msg);
	return m;
}

static struct meta *do_mount(struct fx *f)
{
	struct mount_opts o = { .holder_name = "test-meta" };

	return do_mount_opts(f, &o, 0, NULL);
}

static struct meta_attr attr_of(struct meta *m, uint64_t ino)
{
	struct meta_attr a;

	g_assert_cmpint(meta_getattr(m, ino, &a), ==, 0);
	return a;
}

/* write through extent_map/remote like io.c does: zero fresh padding, data, write_done */
static int write_data(struct meta *m, struct remote *r, uint64_t ino, uint64_t off,
		      const void *buf, size_t len)
{
	struct meta_extent ext[300];
	static const uint8_t zero[BS];
	int n, i, rc;

	n = extent_map(m, ino, off, len, true, ext, G_N_ELEMENTS(ext));
	if (n < 0)
		return n;
	for (i = 0; i < n; i++) {
		uint64_t es = ext[i].file_block * BS, ee = es + ext[i].count * BS;
		uint64_t s = MAX(es, off), e = MIN(ee, off + len);

		g_assert_cmpuint(ext[i].pool_off, !=, 0);
		if (ext[i].fresh && es < s)
			g_assert_cmpint(remote_write(r, ext[i].pool_off, zero, s - es), ==, 0);
		rc = remote_write(r, ext[i].pool_off + (s - es), (const uint8_t *)buf + (s - off),
				  e - s);
		g_assert_cmpint(rc, ==, 0);
		if (ext[i].fresh && e < ee)
			g_assert_cmpint(remote_write(r, ext[i].pool_off + (e - es), zero, ee - e), ==,
					0);
	}
	return extent_write_done(m, ino, off, len);
}

static void read_data(struct meta *m, struct remote *r, uint64_t ino, uint64_t off, void *buf,
		      size_t len)
{
	struct meta_extent ext[300];
	int n, i;

	n = extent_map(m, ino, off, len, false, ext, G_N_ELEMENTS(ext));
	g_assert_cmpint(n, >, 0);
	for (i = 0; i < n; i++) {
		uint64_t es = ext[i].file_block * BS, ee = es + ext[i].count * BS;
		uint64_t s = MAX(es, off), e = MIN(ee, off + len);

		if (!ext[i].pool_off)
			memset((uint8_t *)buf + (s - off), 0, e - s);
		else
			g_assert_cmpint(remote_read(r, ext[i].pool_off + (s - es),
						    (uint8_t *)buf + (s - off), e - s),
					==, 0);
	}
}

static void fill_pattern(uint8_t *buf, size_t len, unsigned int seed)
{
	size_t i;

	for (i = 0; i < len; i++)
		buf[i] = (uint8_t)(seed * 31 + i * 7 + (i >> 9));
}

/*
 * until the clock files are stamped from (clock_file_time: coarse, a tick of
 * 1-4 ms) has moved past t, so that the next change stamps a later time
 */
static void wait_clock_past(const struct timespec *t)
{
	struct timespec now;
	int i;

	for (i = 0; i < 1000; i++) {
		clock_file_time(&now);
		if (now.tv_sec > t->tv_sec || (now.tv_sec == t->tv_sec && now.tv_nsec > t->tv_nsec))
			return;
		g_usleep(1000);
	}
	g_error("the file clock stood still for a second");
}

/* ---- tree dump: everything a remount must preserve ---- */

struct dir_list {
	GPtrArray *names;
	GArray *cookies;
	int limit; /* stop after this many (0: no limit) */
};

static int collect(void *ctx, const char *name, const struct meta_attr *attr, uint64_t next)
{
	struct dir_list *l = ctx;

	if (l->limit && (int)l->names->len >= l->limit)
		return 1;
	g_ptr_array_add(l->names, g_strdup(name));
	g_array_append_val(l->cookies, next);
	return 0;
}

static void dump_ino(struct meta *m, struct remote *r, uint64_t ino, const char *path,
		     GString *out)
{
	struct meta_attr a = attr_of(m, ino);
	char xl[4096], val[256], target[4096];
	ssize_t n, k;

	g_string_append_printf(out, "%s ino=%" G_GUINT64_FORMAT " mode=%o nlink=%u uid=%u gid=%u "
			       "rdev=%" G_GUINT64_FORMAT " size=%" G_GUINT64_FORMAT " blocks=%"
			       G_GUINT64_FORMAT " mtime=%ld.%09ld ctime=%ld.%09ld atime=%ld.%09ld",
			       path, (guint64)a.ino, a.mode, a.nlink, a.uid, a.gid, (guint64)a.rdev,
			       (guint64)a.size, (guint64)a.blocks, (long)a.mtime.tv_sec,
			       a.mtime.tv_nsec, (long)a.ctime.tv_sec, a.ctime.tv_nsec,
			       (long)a.atime.tv_sec, a.atime.tv_nsec);
	n = meta_listxattr(m, ino, xl, sizeof(xl));
	g_assert_cmpint(n, >=, 0);
	for (k = 0; k < n; k += (ssize_t)strlen(xl + k) + 1) {
		ssize_t vl = meta_getxattr(m, ino, xl + k, val, sizeof(val));

		g_assert_cmpint(vl, >=, 0);
		g_string_append_printf(out, " xattr[%s]=%.*s", xl + k, (int)vl, val);
	}
	if (S_ISLNK(a.mode)) {
		g_assert_cmpint(meta_readlink(m, ino, target, sizeof(target)), ==, 0);
		g_string_append_printf(out, " -> %s", target);
	}
	if (S_ISREG(a.mode) && a.size) {
		uint8_t *buf = g_malloc(a.size);
		char *sum;

		read_data(m, r, ino, 0, buf, a.size);
		sum = g_compute_checksum_for_data(G_CHECKSUM_SHA256, buf, a.size);
		g_string_append_printf(out, " sha256=%s", sum);
		g_free(sum);
		g_free(buf);
	}
	g_string_append_c(out, '\n');
	if (S_ISDIR(a.mode)) {
		struct dir_list l = { g_ptr_array_new_with_free_func(g_free),
				      g_array_new(FALSE, FALSE, sizeof(uint64_t)), 0 };
		guint i;

		g_assert_cmpint(meta_readdir(m, ino, 0, NULL, false, collect, &l), ==, 0);
		for (i = 2; i < l.names->len; i++) {
			const char *name = g_ptr_array_index(l.names, i);
			char *sub = g_strdup_printf("%s/%s", path, name);

			dump_ino(m, r, tfx_lookup(m, ino, name), sub, out);
			g_free(sub);
		}
		g_ptr_array_free(l.names, TRUE);
		g_array_free(l.cookies, TRUE);
	}
}

static char *dump(struct meta *m, struct remote *r)
{
	GString *s = g_string_new(NULL);

	dump_ino(m, r, ROOT, "", s);
	return g_string_free(s, FALSE);
}

/* a tree with a bit of everything */
static void build_tree(struct meta *m, struct remote *r)
{
	struct meta_setattr sa = { 0 };
	struct meta_attr a;
	uint64_t d1, d2, f1, f2, big;
	uint8_t *buf = g_malloc(300000);

	d1 = tfx_mk(m, ROOT, "dir1", S_IFDIR | 0755);
	d2 = tfx_mk(m, d1, "sub", S_IFDIR | 0700);
	f1 = tfx_mk(m, d1, "file1", S_IFREG | 0644);
	fill_pattern(buf, 5000, 1);
	g_assert_cmpint(write_data(m, r, f1, 0, buf, 5000), ==, 0);
	f2 = tfx_mk(m, d2, "sparse", S_IFREG | 0600);
	fill_pattern(buf, 100, 2);
	g_assert_cmpint(write_data(m, r, f2, 10 * 1024 * 1024, buf, 100), ==, 0);
	big = tfx_mk(m, ROOT, "big", S_IFREG | 0644);
	fill_pattern(buf, 300000, 3);
	g_assert_cmpint(write_data(m, r, big, 0, buf, 300000), ==, 0);
	g_assert_cmpint(write_data(m, r, big, 123, buf, 7777), ==, 0);
	tfx_mk(m, ROOT, "fifo", S_IFIFO | 0644);
	g_assert_cmpint(meta_symlink(m, d1, "link", "../big", &root_cred, &a), ==, 0);
	meta_forget(m, a.ino, 1);
	g_assert_cmpint(meta_link(m, f1, ROOT, "hardlink", &a), ==, 0);
	meta_forget(m, a.ino, 1);
	g_assert_cmpint(meta_setxattr(m, f1, "user.color", "blue", 4, 0), ==, 0);
	g_assert_cmpint(meta_setxattr(m, d1, "trusted.t", "x", 1, 0), ==, 0);
	g_assert_cmpint(extent_fallocate(m, big, 1 << 20, 1 << 20, FALLOC_FL_KEEP_SIZE), ==, 0);
	/* a device's number, and times at both ends of time_t (packed in RAM: inode.h) */
	g_assert_cmpint(meta_mknod(m, d1, "tty", S_IFCHR | 0620, makedev(4, 64), &root_cred, &a),
			==, 0);
	g_assert_cmpuint(a.rdev, ==, makedev(4, 64));
	meta_forget(m, a.ino, 1);
	sa.valid = META_SET_ATIME | META_SET_MTIME;
	sa.atime.tv_sec = INT64_MIN;
	sa.atime.tv_nsec = 1;
	sa.mtime.tv_sec = INT64_MAX;
	sa.mtime.tv_nsec = 999999999;
	g_assert_cmpint(meta_setattr(m, f2, &sa, &root_cred, &a), ==, 0);
	g_assert_cmpint(a.atime.tv_sec, ==, INT64_MIN);
	g_assert_cmpint(a.mtime.tv_sec, ==, INT64_MAX);
	g_assert_cmpint(a.mtime.tv_nsec, ==, 999999999);
	g_free(buf);
}

/* ---- tests ---- */

static void test_remount(struct fx *f, gconstpointer d)
{
	struct meta *m = do_mount(f);
	char *before, *after;
	struct meta_attr a;

	build_tree(m, f->r);
	a = attr_of(m, ROOT);
	g_assert_cmpuint(a.nlink, ==, 3); /* . and dir1 */
	a = attr_of(m, tfx_lookup(m, ROOT, "dir1"));
	g_assert_cmpuint(a.nlink, ==, 3);
	a = attr_of(m, tfx_lookup(m, ROOT, "hardlink"));
	g_assert_cmpuint(a.nlink, ==, 2);
	before = dump(m, f->r);
	g_assert_cmpint(mount_close(m), ==, 0);

	m = do_mount(f);
	g_assert_true(m->load.was_clean);
	g_assert_cmpuint(m->load.replayed, ==, 0);
	after = dump(m, f->r);
	g_assert_cmpstr(before, ==, after);
	g_free(after);
	g_assert_cmpint(mount_close(m), ==, 0);

	/* a third time, after a mount that changed nothing */
	m = do_mount(f);
	after = dump(m, f->r);
	g_assert_cmpstr(before, ==, after);
	g_assert_cmpint(mount_close(m), ==, 0);
	g_free(before);
	g_free(after);
}

static void test_replay(struct fx *f, gconstpointer d)
{
	struct meta *m = do_mount(f);
	char *before, *after;
	uint64_t ckpts_before;

	build_tree(m, f->r);
	g_assert_cmpint(commit_sync(m), ==, 0);
	before = dump(m, f->r);
	ckpts_before = m->ckpts;
	mount_abandon(m); /* crash: nothing written, lease still held */

	{
		struct mount_opts o = { .holder_name = "test-meta", .lease_takeover_ms = 2000 };

		m = do_mount_opts(f, &o, 0, NULL);
	}
	g_assert_false(m->load.was_clean);
	g_assert_cmpuint(m->load.replayed + ckpts_before, >, 0);
	after = dump(m, f->r);
	g_assert_cmpstr(before, ==, after);
	g_free(after);
	/* recovery wrote a checkpoint: a second crash right now loses nothing either */
	mount_abandon(m);
	{
		struct mount_opts o = { .holder_name = "test-meta", .lease_takeover_ms = 2000 };

		m = do_mount_opts(f, &o, 0, NULL);
	}
	g_assert_cmpuint(m->load.replayed, ==, 0);
	after = dump(m, f->r);
	g_assert_cmpstr(before, ==, after);
	g_assert_cmpint(mount_close(m), ==, 0);
	g_free(before);
	g_free(after);
}

static uint64_t tail_of(struct meta *m)
{
	uint64_t t;

	pthread_mutex_lock(&m->lock);
	t = journal_tail(m->j);
	g_assert_cmpuint(journal_pending_bytes(m->j), ==, 0);
	pthread_mutex_unlock(&m->lock);
	return t;
}

static void test_torn_tail(struct fx *f, gconstpointer d)
{
	struct mount_opts o = { .holder_name = "test-meta", .lease_takeover_ms = 2000 };
	struct meta *m = do_mount(f);
	uint64_t t0, t1, joff = m->g.journal_off;
	uint8_t junk[16];
	struct fsck_report rep;
	struct fsck_opts fo = { .lease_takeover_ms = 2000 };
	char *msg = NULL;

	tfx_mk(m, ROOT, "a", S_IFREG | 0644);
	g_assert_cmpint(commit_sync(m), ==, 0);
	tfx_mk(m, ROOT, "b", S_IFREG | 0644);
	g_assert_cmpint(commit_sync(m), ==, 0);
	t0 = tail_of(m);
	tfx_mk(m, ROOT, "c", S_IFREG | 0644);
	g_assert_cmpint(commit_sync(m), ==, 0);
	t1 = tail_of(m);
	g_assert_cmpuint(t1, >, t0);
	mount_abandon(m);

	/* tear the last transaction: garbage in its middle */
	memset(junk, 0xa5, sizeof(junk));
	g_assert_cmpint(remote_write(f->r, joff + (t0 + t1) / 2, junk, sizeof(junk)), ==, 0);

	/* fsck (read-only) sees a consistent filesystem with a torn tail */
	fsck_report_init(&rep);
	g_assert_cmpint(mount_fsck(f->r, &fo, &rep, &msg), ==, 0);
	g_assert_cmpuint(rep.problems, ==, 0);
	g_assert_null(msg);
	fsck_report_clear(&rep);

	m = do_mount_opts(f, &o, 0, NULL);
	g_assert_true(m->load.torn_tail);
	g_assert_cmpuint(m->load.replayed, ==, 2);
	g_assert_cmpuint(tfx_lookup(m, ROOT, "a"), !=, 0);
	g_assert_cmpuint(tfx_lookup(m, ROOT, "b"), !=, 0);
	g_assert_cmpuint(tfx_lookup(m, ROOT, "c"), ==, 0);
	/* and the filesystem goes on normally */
	tfx_mk(m, ROOT, "c", S_IFREG | 0644);
	g_assert_cmpint(mount_close(m), ==, 0);
	m = do_mount(f);
	g_assert_cmpuint(tfx_lookup(m, ROOT, "c"), !=, 0);
	g_assert_cmpint(mount_close(m), ==, 0);
}

static void test_rollover(struct fx *f, gconstpointer d)
{
	struct mount_opts o = { .holder_name = "test-meta", .lease_takeover_ms = 2000 };
	struct meta *m = do_mount(f);
	uint64_t dir = tfx_mk(m, ROOT, "many", S_IFDIR | 0755);
	struct dir_list l;
	int i, n = 15000;

	/* 64 MiB pool: 1 MiB journal; ~15000 creates write several MiB of journal */
	for (i = 0; i < n; i++) {
		char name[64];

		g_snprintf(name, sizeof(name), "file-with-a-longish-name-%06d", i);
		tfx_mk(m, dir, name, S_IFREG | 0644);
		if (i % 3000 == 0)
			g_assert_cmpint(commit_sync(m), ==, 0);
	}
	for (i = 0; i < n; i += 2) {
		char name[64];

		g_snprintf(name, sizeof(name), "file-with-a-longish-name-%06d", i);
		g_assert_cmpint(meta_unlink(m, dir, name), ==, 0);
	}
	g_assert_cmpint(commit_sync(m), ==, 0);
	g_assert_cmpuint(m->ckpts, >=, 3);
	g_test_message("%" G_GUINT64_FORMAT " checkpoints", (guint64)m->ckpts);
	mount_abandon(m);

	m = do_mount_opts(f, &o, 0, NULL);
	l.names = g_ptr_array_new_with_free_func(g_free);
	l.cookies = g_array_new(FALSE, FALSE, sizeof(uint64_t));
	l.limit = 0;
	g_assert_cmpint(meta_readdir(m, dir, 0, NULL, false, collect, &l), ==, 0);
	g_assert_cmpuint(l.names->len, ==, 2 + n / 2);
	g_assert_cmpuint(tfx_lookup(m, dir, "file-with-a-longish-name-000001"), !=, 0);
	g_assert_cmpuint(tfx_lookup(m, dir, "file-with-a-longish-name-000002"), ==, 0);
	g_ptr_array_free(l.names, TRUE);
	g_array_free(l.cookies, TRUE);
	g_assert_cmpint(mount_close(m), ==, 0);
}

static void test_lease(struct fx *f, gconstpointer d)
{
	struct mount_opts oa = { .holder_name = "holder-A on testhost",
				      .lease_takeover_ms = 1000 };
	struct mount_opts ob = { .holder_name = "holder-B", .lease_takeover_ms = 1500 };
	struct meta *a, *b;
	char *msg = NULL;
	gint64 t;

	a = do_mount_opts(f, &oa, 0, NULL);
	tfx_mk(a, ROOT, "from-a", S_IFREG | 0644);
	g_assert_cmpint(commit_sync(a), ==, 0);

	/* the holder is alive: refused, naming the holder */
	t = g_get_monotonic_time();
	b = do_mount_opts(f, &ob, -EBUSY, &msg);
	g_assert_null(b);
	g_assert_nonnull(msg);
	g_assert_nonnull(strstr(msg, "holder-A on testhost"));
	g_test_message("second mount: %s (after %" G_GINT64_FORMAT " ms)", msg,
		       (g_get_monotonic_time() - t) / 1000);
	g_free(msg);

	/* fsck refuses to check a live mount (unless forced), naming the holder */
	{
		struct fsck_opts fo = { 0 };
		struct fsck_report rep;

		fsck_report_init(&rep);
		g_assert_cmpint(mount_fsck(f->r, &fo, &rep, &msg), ==, -EBUSY);
		g_assert_nonnull(strstr(msg, "holder-A on testhost"));
		g_free(msg);
		msg = NULL;
		fsck_report_clear(&rep);
		fo.force = true;
		fsck_report_init(&rep);
		g_assert_cmpint(mount_fsck(f->r, &fo, &rep, &msg), ==, 0);
		g_assert_cmpuint(rep.problems, ==, 0);
		g_assert_null(msg);
		fsck_report_clear(&rep);
		/* a read-only mount takes no lease */
		b = do_mount_opts(f, &(struct mount_opts){ .read_only = true }, 0, NULL);
		g_assert_cmpuint(tfx_lookup(b, ROOT, "from-a"), !=, 0);
		g_assert_cmpint(meta_mknod(b, ROOT, "x", S_IFREG | 0644, 0, &root_cred,
					   &(struct meta_attr){ 0 }),
				==, -EROFS);
		g_assert_cmpint(mount_close(b), ==, 0);
	}

	/* the holder dies (heartbeat stops, lease word stays): taken over */
	mount_abandon(a);
	t = g_get_monotonic_time();
	b = do_mount_opts(f, &ob, 0, NULL);
	t = (g_get_monotonic_time() - t) / 1000;
	g_test_message("takeover after %" G_GINT64_FORMAT " ms", t);
	g_assert_cmpint(t, >=, 1400);
	g_assert_cmpint(t, <, 15000);
	g_assert_cmpuint(tfx_lookup(b, ROOT, "from-a"), !=, 0);
	g_assert_cmpint(mount_close(b), ==, 0);

	/* released cleanly: the next mount is immediate */
	t = g_get_monotonic_time();
	a = do_mount_opts(f, &oa, 0, NULL);
	g_assert_cmpint((g_get_monotonic_time() - t) / 1000, <, 1000);
	g_assert_cmpint(mount_close(a), ==, 0);
}

static void test_lease_default_timing(struct fx *f, gconstpointer d)
{
	struct mount_opts o = { .holder_name = "crashed-holder" };
	struct meta *a, *b;
	gint64 t;

	/* default timing: a crashed holder is taken over within 15 s */
	a = do_mount_opts(f, &o, 0, NULL);
	mount_abandon(a);
	t = g_get_monotonic_time();
	b = do_mount_opts(f, &o, 0, NULL);
	t = (g_get_monotonic_time() - t) / 1000;
	g_test_message("default takeover after %" G_GINT64_FORMAT " ms", t);
	g_assert_cmpint(t, <, 15000);
	g_assert_cmpint(mount_close(b), ==, 0);
}

static void test_format_rules(struct fx *f, gconstpointer d)
{
	struct mount_opts o = { .holder_name = "test-meta" };
	struct mount_opts of = { .holder_name = "test-meta", .format = true };
	struct meta *m;
	uint8_t junk[512];
	char *msg = NULL;
	__le32 v2 = htole32(LAYOUT_VERSION + 1);

	/* foreign data in block 0: refused, and -o format formats it */
	memset(junk, 0x5a, sizeof(junk));
	g_assert_cmpint(remote_write(f->r, 0, junk, sizeof(junk)), ==, 0);
	m = do_mount_opts(f, &o, -EMEDIUMTYPE, &msg);
	g_assert_nonnull(strstr(msg, "no rmemfs filesystem"));
	g_assert_nonnull(strstr(msg, "-o format"));
	g_free(msg);
	m = do_mount_opts(f, &of, 0, NULL);
	tfx_mk(m, ROOT, "kept", S_IFREG | 0644);
	g_assert_cmpint(mount_close(m), ==, 0);

	/* -o format never formats an rmemfs pool */
	m = do_mount_opts(f, &of, 0, NULL);
	g_assert_cmpuint(tfx_lookup(m, ROOT, "kept"), !=, 0);
	g_assert_cmpint(mount_close(m), ==, 0);

	/* a newer format version: refused even with -o format */
	g_assert_cmpint(remote_write(f->r, 8, &v2, sizeof(v2)), ==, 0);
	m = do_mount_opts(f, &of, -EPROTONOSUPPORT, &msg);
	g_assert_nonnull(strstr(msg, "newer rmemfs"));
	g_free(msg);

	/* a damaged superblock: refused without -o format */
	v2 = htole32(LAYOUT_VERSION);
	g_assert_cmpint(remote_write(f->r, 8, &v2, sizeof(v2)), ==, 0);
	g_assert_cmpint(remote_write(f->r, 20, junk, 4), ==, 0); /* inside fs_size */
	m = do_mount_opts(f, &o, -EUCLEAN, &msg);
	g_assert_nonnull(strstr(msg, "damaged"));
	g_free(msg);
}

static void test_fresh_format(struct fx *f, gconstpointer d)
{
	struct meta *m = do_mount(f); /* all-zero pool: formatted */
	struct meta_statfs st;

	g_assert_cmpint(meta_statfs(m, &st), ==, 0);
	g_assert_cmpuint(st.blocks, ==, m->g.data_blocks);
	g_assert_cmpuint(st.bfree, ==, st.blocks);
	g_assert_cmpuint(st.files, >, 10000);
	g_assert_cmpint(mount_close(m), ==, 0);
}

static void test_enospc(struct fx *f, gconstpointer d)
{
	struct meta *m = do_mount(f);
	struct meta_statfs st;
	uint8_t *buf = g_malloc(1 << 20);
	uint64_t ino, off = 0, ino2;
	int rc, rounds;

	memset(buf, 0x77, 1 << 20);
	ino = tfx_mk(m, ROOT, "filler", S_IFREG | 0644);
	for (;;) {
		rc = write_data(m, f->r, ino, off, buf, 1 << 20);
		if (rc < 0)
			break;
		off += 1 << 20;
	}
	g_assert_cmpint(rc, ==, -ENOSPC);
	/* fill the remainder block by block */
	for (;;) {
		rc = write_data(m, f->r, ino, off, buf, BS);
		if (rc < 0)
			break;
		off += BS;
	}
	g_assert_cmpint(rc, ==, -ENOSPC);
	g_assert_cmpint(meta_statfs(m, &st), ==, 0);
	g_assert_cmpuint(st.bfree, ==, 0);
	g_assert_cmpuint(off, ==, st.blocks * BS);
	g_test_message("filled %" G_GUINT64_FORMAT " bytes", (guint64)off);
	/* still usable: metadata works, the data written reads back */
	ino2 = tfx_mk(m, ROOT, "small", S_IFREG | 0644);
	g_assert_cmpint(write_data(m, f->r, ino2, 0, buf, 10), ==, -ENOSPC);
	read_data(m, f->r, ino, off - BS, buf, BS);
	g_assert_cmpuint(buf[BS - 1], ==, 0x77);

	/* delete: the space comes back (freed blocks wait for their txn to be durable) */
	for (rounds = 0; rounds < 3; rounds++) {
		g_assert_cmpint(meta_unlink(m, ROOT, "filler"), ==, 0);
		g_assert_cmpint(meta_statfs(m, &st), ==, 0);
		g_assert_cmpuint(st.bfree, ==, st.blocks);
		g_assert_cmpint(write_data(m, f->r, ino2, 0, buf, 1 << 20), ==, 0);
		g_assert_cmpint(meta_setattr(m, ino2, &(struct meta_setattr){ .valid = META_SET_SIZE,
									     .size = 0 },
					     &root_cred, &(struct meta_attr){ 0 }),
				==, 0);
		ino = tfx_mk(m, ROOT, "filler", S_IFREG | 0644);
		for (off = 0;; off += 1 << 20)
			if (write_data(m, f->r, ino, off, buf, 1 << 20) < 0)
				break;
	}
	g_assert_cmpint(mount_close(m), ==, 0);
	m = do_mount(f);
	g_assert_cmpint(meta_statfs(m, &st), ==, 0);
	g_assert_cmpuint(st.bfree, <, 256);
	g_assert_cmpint(mount_close(m), ==, 0);
	g_free(buf);
}

static void test_bigdir(struct fx *f, gconstpointer d)
{
	struct mount_opts o = { .holder_name = "test-meta", .lease_takeover_ms = 2000 };
	struct meta *m = do_mount(f);
	const int n = 100000;
	uint64_t dir = tfx_mk(m, ROOT, "big", S_IFDIR | 0755);
	GHashTable *seen = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
	struct dir_list l;
	uint64_t cookie = 0;
	gint64 t0, t;
	int i, removed = 0, added = 0;
	guint k;

	t0 = g_get_monotonic_time();
	for (i = 0; i < n; i++) {
		char name[32];

		g_snprintf(name, sizeof(name), "entry%06d", i);
		tfx_mk(m, dir, name, S_IFREG | 0644);
	}
	g_assert_cmpint(commit_sync(m), ==, 0);
	t = g_get_monotonic_time() - t0;
	g_test_message("100000 creates + sync: %" G_GINT64_FORMAT " ms", t / 1000);
	g_assert_cmpint(t, <, 30 * G_USEC_PER_SEC);
	g_assert_cmpuint(attr_of(m, dir).nlink, ==, 2);

	t0 = g_get_monotonic_time();
	for (i = 0; i < n; i += 7) {
		char name[32];

		g_snprintf(name, sizeof(name), "entry%06d", i);
		g_assert_cmpuint(tfx_lookup(m, dir, name), !=, 0);
	}
	t = g_get_monotonic_time() - t0;
	g_test_message("%d lookups: %" G_GINT64_FORMAT " ms", n / 7, t / 1000);
	g_assert_cmpint(t, <, 5 * G_USEC_PER_SEC);

	/* readdir in chunks while entries come and go: no duplicates, nothing stable missed */
	l.names = g_ptr_array_new_with_free_func(g_free);
	l.cookies = g_array_new(FALSE, FALSE, sizeof(uint64_t));
	for (;;) {
		l.limit = 1000;
		g_ptr_array_set_size(l.names, 0);
		g_array_set_size(l.cookies, 0);
		g_assert_cmpint(meta_readdir(m, dir, cookie, NULL, false, collect, &l), ==, 0);
		if (!l.names->len)
			break;
		for (k = 0; k < l.names->len; k++) {
			char *name = g_ptr_array_index(l.names, k);

			g_assert_false(g_hash_table_contains(seen, name));
			g_hash_table_add(seen, g_strdup(name));
		}
		cookie = g_array_index(l.cookies, uint64_t, l.cookies->len - 1);
		/* remove an entry further on, add a new one */
		if (removed < 50) {
			char name[32];

			g_snprintf(name, sizeof(name), "entry%06d", n - 1 - removed * 13);
			if (!g_hash_table_contains(seen, name) &&
			    meta_unlink(m, dir, name) == 0)
				removed++;
			g_snprintf(name, sizeof(name), "new%04d", added++);
			tfx_mk(m, dir, name, S_IFREG | 0644);
		}
	}
	for (i = 0; i < n; i++) {
		char name[32];

		g_snprintf(name, sizeof(name), "entry%06d", i);
		if (!g_hash_table_contains(seen, name))
			g_assert_cmpuint(tfx_lookup(m, dir, name), ==, 0); /* only removed ones */
	}
	g_assert_cmpuint(g_hash_table_size(seen), >=, 2 + n - removed);
	g_ptr_array_free(l.names, TRUE);
	g_array_free(l.cookies, TRUE);
	g_hash_table_destroy(seen);

	t0 = g_get_monotonic_time();
	g_assert_cmpint(mount_close(m), ==, 0);
	m = do_mount_opts(f, &o, 0, NULL);
	t = g_get_monotonic_time() - t0;
	g_test_message("unmount + mount with 100000 entries: %" G_GINT64_FORMAT " ms", t / 1000);
	g_assert_cmpint(t, <, 10 * G_USEC_PER_SEC);
	g_assert_cmpuint(tfx_lookup(m, dir, "entry000003"), !=, 0);
	g_assert_cmpuint(tfx_lookup(m, dir, "new0001"), !=, 0);
	g_assert_cmpint(mount_close(m), ==, 0);
}

/* the pool block of file block fb of ino */
static uint64_t pblock_of(struct meta *m, uint64_t ino, uint64_t fb)
{
	struct meta_extent e;

	g_assert_cmpint(extent_map(m, ino, fb * BS, BS, false, &e, 1), ==, 1);
	g_assert_cmpuint(e.pool_off, !=, 0);
	return (e.pool_off - m->g.data_off) / BS;
}

/* corrupt the metadata in RAM and commit it as a checkpoint, behind meta's back */
static void corrupt_and_crash(struct fx *f, uint64_t *fa, uint64_t *fb, uint64_t *fc)
{
	struct meta *m = do_mount(f);
	struct meta_inode *a, *b, *c, *root;
	struct meta_ext *ea, *eb;
	uint8_t buf[2 * BS];
	uint64_t pa;
	uint32_t crc;

	*fa = tfx_mk(m, ROOT, "a", S_IFREG | 0644);
	*fb = tfx_mk(m, ROOT, "b", S_IFREG | 0644);
	*fc = tfx_mk(m, ROOT, "c", S_IFREG | 0644);
	fill_pattern(buf, sizeof(buf), 11);
	g_assert_cmpint(write_data(m, f->r, *fa, 0, buf, sizeof(buf)), ==, 0);
	/* a's first block carries its CRC (the block b will be made to share) */
	pa = pblock_of(m, *fa, 0);
	crc = layout_crc(buf, BS);
	g_assert_cmpint(checksum_log(m, &pa, &crc, 1), ==, 0);
	fill_pattern(buf, sizeof(buf), 22);
	g_assert_cmpint(write_data(m, f->r, *fb, 0, buf, sizeof(buf)), ==, 0);
	g_assert_cmpint(commit_sync(m), ==, 0);

	pthread_mutex_lock(&m->lock);
	a = inode_get(m, *fa);
	b = inode_get(m, *fb);
	c = inode_get(m, *fc);
	root = inode_get(m, ROOT);
	/* 1: an entry naming an inode that does not exist */
	inode_dir_add(m, root, "dangling", 8, 999999, DT_REG, 0);
	/* 2: a wrong link count */
	c->a.nlink = 5;
	inode_touch_acct(m, c);
	/* 3: b's second block is a's first block */
	ea = inode_ext_find(a, 0, NULL);
	eb = inode_ext_find(b, 1, NULL);
	g_assert_nonnull(ea);
	g_assert_nonnull(eb);
	inode_ext_clear(m, b, 1, 1, false);
	inode_ext_set(m, b, 1, 1, ea->pblock, META_EXT_WRITTEN);
	pthread_mutex_unlock(&m->lock);
	g_assert_cmpint(commit_write(m, true), ==, 0);
	mount_abandon(m);
}

/* run mount_fsck with o, which must find problems or not; returns the report as one string */
static char *fsck_text(struct fx *f, const struct fsck_opts *o, bool found, struct fsck_report *rep)
{
	char *msg = NULL, *all;

	fsck_report_init(rep);
	g_assert_cmpint(mount_fsck(f->r, o, rep, &msg), ==, 0);
	g_assert_cmpint(rep->problems > 0, ==, found);
	g_assert_null(msg);
	g_ptr_array_add(rep->lines, NULL);
	all = g_strjoinv("\n", (char **)rep->lines->pdata);
	g_ptr_array_remove_index(rep->lines, rep->lines->len - 1);
	g_test_message("fsck%s:\n%s", o->repair ? " --repair" : "", all);
	return all;
}

static void test_fsck(struct fx *f, gconstpointer d)
{
	struct mount_opts o = { .holder_name = "test-meta", .lease_takeover_ms = 2000 };
	struct fsck_opts ro = { .lease_takeover_ms = 2000 };
	struct fsck_opts rw = { .repair = true, .lease_takeover_ms = 2000 };
	struct fsck_report rep;
	uint64_t fa, fb, fc;
	char *msg = NULL, *all;
	uint8_t want[2 * BS], got[2 * BS];
	struct meta *m;
	struct meta_extent ea[4], eb[4];
	uint32_t crc_a, crc_b;
	guint i;
	int rc;

	corrupt_and_crash(f, &fa, &fb, &fc);

	/* a mount refuses: this is not something a crash explains */
	m = do_mount_opts(f, &o, -EUCLEAN, &msg);
	g_assert_nonnull(strstr(msg, "rmemfs-fsck --repair"));
	g_test_message("mount: %s", msg);
	g_free(msg);
	msg = NULL;

	/* fsck finds all three */
	all = fsck_text(f, &ro, true, &rep);
	g_assert_nonnull(strstr(all, "missing inode 999999"));
	g_assert_nonnull(strstr(all, "link count 5, should be 1"));
	g_assert_nonnull(strstr(all, "also used by another file"));
	g_assert_cmpuint(rep.repaired, ==, 0);
	g_free(all);
	fsck_report_clear(&rep);

	/* --repair fixes them */
	fsck_report_init(&rep);
	rc = mount_fsck(f->r, &rw, &rep, &msg);
	g_assert_null(msg);
	g_assert_cmpint(rc, ==, 0);
	g_assert_cmpuint(rep.repaired, ==, rep.problems);
	g_assert_cmpuint(rep.problems, >=, 3);
	fsck_report_clear(&rep);

	/* clean now */
	fsck_report_init(&rep);
	rc = mount_fsck(f->r, &ro, &rep, &msg);
	g_assert_null(msg);
	g_assert_cmpint(rc, ==, 0);
	g_assert_cmpuint(rep.problems, ==, 0);
	fsck_report_clear(&rep);

	m = do_mount_opts(f, &o, 0, NULL);
	g_assert_cmpuint(tfx_lookup(m, ROOT, "dangling"), ==, 0);
	g_assert_cmpuint(attr_of(m, fc).nlink, ==, 1);
	/* a kept its data; b got its own copy of the block it shared */
	fill_pattern(want, sizeof(want), 11);
	read_data(m, f->r, fa, 0, got, sizeof(got));
	g_assert_cmpmem(got, sizeof(got), want, sizeof(want));
	read_data(m, f->r, fb, 0, got, sizeof(got));
	fill_pattern(want, sizeof(want), 22);
	g_assert_cmpmem(got, BS, want, BS);
	fill_pattern(want, sizeof(want), 11);
	g_assert_cmpmem(got + BS, BS, want, BS);
	/* b's copy of the block it shared checks like its source */
	g_assert_true(csum_get(m->csum, pblock_of(m, fa, 0), &crc_a));
	g_assert_true(csum_get(m->csum, pblock_of(m, fb, 1), &crc_b));
	g_assert_cmphex(crc_a, ==, crc_b);
	/* and no block is shared any more */
	for (i = 0; i < 2; i++) {
		g_assert_cmpint(extent_map(m, fa, i * BS, BS, false, ea, 4), ==, 1);
		g_assert_cmpint(extent_map(m, fb, 0, BS, false, eb, 4), ==, 1);
		g_assert_cmpuint(ea[0].pool_off, !=, eb[0].pool_off);
		g_assert_cmpint(extent_map(m, fb, BS, BS, false, eb, 4), ==, 1);
		g_assert_cmpuint(ea[0].pool_off, !=, eb[0].pool_off);
	}
	g_assert_cmpint(mount_close(m), ==, 0);
}

/* a subtree cut off from the root: fsck --repair links it into /lost+found, data intact */
static void test_fsck_lost_found(struct fx *f, gconstpointer d)
{
	struct mount_opts o = { .holder_name = "test-meta", .lease_takeover_ms = 2000 };
	struct fsck_opts ro = { .lease_takeover_ms = 2000 };
	struct fsck_opts rw = { .repair = true, .lease_takeover_ms = 2000 };
	struct meta *m = do_mount(f);
	struct meta_inode *root;
	struct fsck_report rep;
	uint64_t dd, sub, file, lf;
	uint8_t want[BS], got[BS];
	char *msg = NULL, *all, name[32];

	dd = tfx_mk(m, ROOT, "d", S_IFDIR | 0755);
	sub = tfx_mk(m, dd, "sub", S_IFDIR | 0755);
	file = tfx_mk(m, sub, "file", S_IFREG | 0644);
	fill_pattern(want, sizeof(want), 33);
	g_assert_cmpint(write_data(m, f->r, file, 0, want, sizeof(want)), ==, 0);
	g_assert_cmpint(commit_sync(m), ==, 0);
	pthread_mutex_lock(&m->lock);
	root = inode_get(m, ROOT);
	inode_dir_del(m, root, inode_dir_lookup(root, "d"));
	pthread_mutex_unlock(&m->lock);
	g_assert_cmpint(commit_write(m, true), ==, 0);
	mount_abandon(m);

	all = fsck_text(f, &ro, true, &rep);
	g_snprintf(name, sizeof(name), "inode %" G_GUINT64_FORMAT " (directory", (guint64)dd);
	g_assert_nonnull(strstr(all, name));
	g_assert_nonnull(strstr(all, "is not reachable from the root"));
	g_free(all);
	fsck_report_clear(&rep);

	fsck_report_init(&rep);
	g_assert_cmpint(mount_fsck(f->r, &rw, &rep, &msg), ==, 0);
	g_assert_cmpuint(rep.problems, >, 0);
	g_assert_null(msg);
	g_assert_cmpuint(rep.repaired, ==, rep.problems);
	fsck_report_clear(&rep);
	fsck_report_init(&rep);
	g_assert_cmpint(mount_fsck(f->r, &ro, &rep, &msg), ==, 0);
	g_assert_cmpuint(rep.problems, ==, 0);
	fsck_report_clear(&rep);

	/* the top of the detached subtree is /lost+found/#<ino>; below it nothing moved */
	m = do_mount_opts(f, &o, 0, NULL);
	lf = tfx_lookup(m, ROOT, "lost+found");
	g_assert_cmpuint(lf, !=, 0);
	g_assert_true(S_ISDIR(attr_of(m, lf).mode));
	g_snprintf(name, sizeof(name), "#%" G_GUINT64_FORMAT, (guint64)dd);
	g_assert_cmpuint(tfx_lookup(m, lf, name), ==, dd);
	g_assert_cmpuint(tfx_lookup(m, dd, "sub"), ==, sub);
	g_assert_cmpuint(tfx_lookup(m, sub, "file"), ==, file);
	g_assert_cmpuint(attr_of(m, dd).nlink, ==, 3);
	read_data(m, f->r, file, 0, got, sizeof(got));
	g_assert_cmpmem(got, sizeof(got), want, sizeof(want));
	g_assert_cmpint(mount_close(m), ==, 0);
}

/*
 * The newest checkpoint slot damaged: a mount refuses, fsck --repair falls
 * back to the previous checkpoint in the other slot (what came after it is
 * lost, and said so), and the pool mounts again with that state.
 */
static void test_fsck_older_slot(struct fx *f, gconstpointer d)
{
	struct mount_opts o = { .holder_name = "test-meta", .lease_takeover_ms = 2000 };
	struct fsck_opts rw = { .repair = true, .lease_takeover_ms = 2000 };
	struct meta *m = do_mount(f);
	struct fsck_report rep;
	uint8_t junk[4096];
	uint64_t gen, a, slot;
	char *msg = NULL, *all;

	a = tfx_mk(m, ROOT, "kept", S_IFREG | 0644);
	g_assert_cmpint(commit_write(m, true), ==, 0); /* checkpoint G holds "kept" */
	tfx_mk(m, ROOT, "after", S_IFREG | 0644);
	g_assert_cmpint(commit_write(m, true), ==, 0); /* checkpoint G + 1, the other slot */
	g_assert_cmpint(super_read_ckpt_gen(m->sb, &gen), ==, 0);
	g_assert_cmpuint(gen, >, 1);
	slot = m->g.slot_off[gen & 1];
	mount_abandon(m);

	memset(junk, 0x5a, sizeof(junk));
	g_assert_cmpint(remote_write(f->r, slot + 64, junk, sizeof(junk)), ==, 0);

	m = do_mount_opts(f, &o, -EUCLEAN, &msg);
	g_assert_nonnull(strstr(msg, "rmemfs-fsck --repair"));
	g_free(msg);
	msg = NULL;

	all = fsck_text(f, &rw, true, &rep);
	g_assert_nonnull(strstr(all, "using the previous checkpoint"));
	g_free(all);
	fsck_report_clear(&rep);

	m = do_mount_opts(f, &o, 0, NULL);
	g_assert_cmpuint(tfx_lookup(m, ROOT, "kept"), ==, a);
	g_assert_cmpint(mount_close(m), ==, 0);
}

/*
 * ---- directory model: seeded random churn checked against a hash table ----
 *
 * Two directories, names from a small space so that creates, unlinks, renames
 * over existing names (within and across the directories) and links keep
 * hitting live entries and holes: the cookie array's holes, its compaction
 * and cookie reuse by rename all happen many times. Listings go in chunks of
 * a few entries, some with changes between the chunks, checked against the
 * rules of ARCHITECTURE.md ("Listings during changes"): every entry present
 * through the whole listing comes exactly once; a file whose only name stays
 * in the directory comes once however often it is renamed there, or at most
 * once when one of its renames replaced a name; a name comes twice only if it
 * left the directory and came back; an entry added during the listing comes
 * only if a rename gave it an older entry's cookie. Remounts and a crash after
 * a sync must give back the model, every entry at its cookie.
 * RMEMFS_DIRMODEL_SEED replays a seed.
 */
#define DM_NAMES 3000
#define DM_DIRS 2

struct dir_model {
	struct meta *m;
	GRand *rng;
	uint64_t dir[DM_DIRS];
	GHashTable *names[DM_DIRS]; /* name -> ino (GUINT_TO_POINTER-free: g_new'd u64) */
	GHashTable *nlink; /* ino -> links (u64 keys and values, g_new'd) */
	guint32 seed;
	guint op;
	/* what the last dm_one did, for the listing checks (dm_list) */
	char left[16]; /* a name that left directory left_dir ("" if none) */
	guint left_dir;
	uint64_t moved; /* the inode a rename gave a name in directory moved_to (0 if none) */
	guint moved_to;
	bool over; /* and that name existed */
};

static uint64_t *u64_dup(uint64_t v)
{
	return g_memdup2(&v, sizeof(v));
}

static void dm_links(struct dir_model *dm, uint64_t ino, int delta)
{
	uint64_t *n = g_hash_table_lookup(dm->nlink, &ino);

	if (!n) {
		g_hash_table_insert(dm->nlink, u64_dup(ino), u64_dup(0));
		n = g_hash_table_lookup(dm->nlink, &ino);
	}
	*n += (uint64_t)(int64_t)delta;
	if (!*n)
		g_hash_table_remove(dm->nlink, &ino);
}

static void dm_name(struct dir_model *dm, char *buf, size_t len)
{
	g_snprintf(buf, len, "f%u", g_rand_int_range(dm->rng, 0, DM_NAMES));
}

/* a random live name of directory d (NULL: none); walks from a random start */
static const char *dm_pick(struct dir_model *dm, guint d)
{
	char name[16];
	guint i;

	if (!g_hash_table_size(dm->names[d]))
		return NULL;
	for (i = 0; i < 64; i++) {
		gpointer k;

		dm_name(dm, name, sizeof(name));
		if (g_hash_table_lookup_extended(dm->names[d], name, &k, NULL))
			return k;
	}
	{
		GHashTableIter it;
		gpointer k;

		g_hash_table_iter_init(&it, dm->names[d]);
		g_hash_table_iter_next(&it, &k, NULL);
		return k;
	}
}

static void dm_set(struct dir_model *dm, guint d, const char *name, uint64_t ino)
{
	uint64_t *old = g_hash_table_lookup(dm->names[d], name);

	if (old)
		dm_links(dm, *old, -1);
	g_hash_table_insert(dm->names[d], g_strdup(name), u64_dup(ino));
	dm_links(dm, ino, 1);
}

static void dm_del(struct dir_model *dm, guint d, const char *name)
{
	uint64_t *ino = g_hash_table_lookup(dm->names[d], name);

	dm_links(dm, *ino, -1);
	g_strlcpy(dm->left, name, sizeof(dm->left));
	dm->left_dir = d;
	g_hash_table_remove(dm->names[d], name);
}

#define DM_CHECK(dm, cond, fmt, ...)                                                     \
	do {                                                                             \
		if (!(cond))                                                             \
			g_error("dir model (seed %u, op %u): " fmt, (dm)->seed, (dm)->op, \
				##__VA_ARGS__);                                          \
	} while (0)

static void dm_one(struct dir_model *dm)
{
	guint d = g_rand_int_range(dm->rng, 0, DM_DIRS), d2 = g_rand_int_range(dm->rng, 0, DM_DIRS);
	guint r = g_rand_int_range(dm->rng, 0, 100);
	const char *src = dm_pick(dm, d);
	char name[16], *s;
	struct meta_attr a;
	int rc;

	dm->left[0] = 0;
	dm->moved = 0;
	dm_name(dm, name, sizeof(name));
	if (r < 45 || !src) { /* create */
		bool exists = g_hash_table_contains(dm->names[d2], name);

		rc = meta_mknod(dm->m, dm->dir[d2], name, S_IFREG | 0644, 0, &root_cred, &a);
		DM_CHECK(dm, rc == (exists ? -EEXIST : 0), "create %s: %d", name, rc);
		if (!rc) {
			meta_forget(dm->m, a.ino, 1);
			dm_set(dm, d2, name, a.ino);
		}
		return;
	}
	s = g_strdup(src);
	if (r < 70) { /* unlink */
		rc = meta_unlink(dm->m, dm->dir[d], s);
		DM_CHECK(dm, rc == 0, "unlink %s: %d", s, rc);
		dm_del(dm, d, s);
	} else if (r < 93) { /* rename, over an existing name when it is taken */
		uint64_t ino = *(uint64_t *)g_hash_table_lookup(dm->names[d], s);
		uint64_t *dst = g_hash_table_lookup(dm->names[d2], name);

		rc = meta_rename(dm->m, dm->dir[d], s, dm->dir[d2], name, 0);
		DM_CHECK(dm, rc == 0, "rename %s -> %s: %d", s, name, rc);
		if (!dst || *dst != ino) { /* two links of one inode: rename does nothing */
			dm->moved = ino;
			dm->moved_to = d2;
			dm->over = dst != NULL;
			dm_set(dm, d2, name, ino);
			dm_del(dm, d, s);
		}
	} else { /* a hard link, unless the name is taken */
		uint64_t ino = *(uint64_t *)g_hash_table_lookup(dm->names[d], s);
		bool exists = g_hash_table_contains(dm->names[d2], name);

		rc = meta_link(dm->m, ino, dm->dir[d2], name, &a);
		DM_CHECK(dm, rc == (exists ? -EEXIST : 0), "link %s -> %s: %d", s, name, rc);
		if (!rc) {
			meta_forget(dm->m, a.ino, 1);
			dm_set(dm, d2, name, ino);
		}
	}
	g_free(s);
}

/* one listing of directory d and what happened to d meanwhile (sets by name or by ino) */
struct dm_listing {
	struct dir_model *dm;
	guint d;
	uint64_t cookie; /* where the next chunk starts */
	uint64_t end; /* where the listing ends (meta_readdir) */
	int left; /* entries this chunk still takes */
	GHashTable *seen; /* names listed */
	GHashTable *twice; /* names listed more than once */
	GHashTable *times; /* ino -> how often listed (u64 keys and values, g_new'd) */
	GHashTable *before; /* name -> ino in d when the listing began */
	GHashTable *ever; /* names d had at some time during the listing */
	GHashTable *gone; /* names that left d during the listing */
	GHashTable *came; /* inodes a rename gave a name in d during the listing */
	GHashTable *over; /* those of them whose name existed */
	GHashTable *single; /* inodes whose only name was in d throughout */
};

static GHashTable *dm_names_new(void)
{
	return g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
}

static GHashTable *dm_inos_new(void)
{
	return g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, NULL);
}

static int dm_collect(void *ctx, const char *name, const struct meta_attr *attr, uint64_t next)
{
	struct dm_listing *l = ctx;
	uint64_t *times, *was;

	if (!l->left--)
		return 1;
	l->cookie = next;
	if (!strcmp(name, ".") || !strcmp(name, ".."))
		return 0;
	was = g_hash_table_lookup(l->before, name);
	DM_CHECK(l->dm, (was && *was == attr->ino) || g_hash_table_contains(l->came, &attr->ino),
		 "\"%s\" (inode %" G_GUINT64_FORMAT ") listed, added during the listing", name,
		 (guint64)attr->ino);
	times = g_hash_table_lookup(l->times, &attr->ino);
	if (times)
		++*times;
	else
		g_hash_table_insert(l->times, u64_dup(attr->ino), u64_dup(1));
	if (g_hash_table_contains(l->seen, name))
		g_hash_table_add(l->twice, g_strdup(name));
	else
		g_hash_table_add(l->seen, g_strdup(name));
	return 0;
}

/* the inodes whose one and only name is in directory d */
static GHashTable *dm_single(struct dir_model *dm, guint d)
{
	GHashTable *set = dm_inos_new();
	GHashTableIter it;
	gpointer v;

	g_hash_table_iter_init(&it, dm->names[d]);
	while (g_hash_table_iter_next(&it, NULL, &v))
		if (*(uint64_t *)g_hash_table_lookup(dm->nlink, v) == 1)
			g_hash_table_add(set, u64_dup(*(uint64_t *)v));
	return set;
}

static gboolean dm_not_in(gpointer key, gpointer value, gpointer set)
{
	return !g_hash_table_contains(set, key);
}

/* one churn op during listing l, noted in l */
static void dm_churn(struct dm_listing *l)
{
	struct dir_model *dm = l->dm;
	GHashTableIter it;
	GHashTable *now;
	gpointer k;

	dm_one(dm);
	g_hash_table_iter_init(&it, dm->names[l->d]);
	while (g_hash_table_iter_next(&it, &k, NULL))
		if (!g_hash_table_contains(l->ever, k))
			g_hash_table_add(l->ever, g_strdup(k));
	if (dm->left[0] && dm->left_dir == l->d)
		g_hash_table_add(l->gone, g_strdup(dm->left));
	if (dm->moved && dm->moved_to == l->d) {
		g_hash_table_add(l->came, u64_dup(dm->moved));
		if (dm->over)
			g_hash_table_add(l->over, u64_dup(dm->moved));
	}
	now = dm_single(dm, l->d);
	g_hash_table_foreach_remove(l->single, dm_not_in, now);
	g_hash_table_destroy(now);
}

/*
 * List directory d in chunks of a few entries as the FUSE layer does (one end
 * for the listing), with churn ops between the chunks, and check the listing
 * against the rules (see the top): stable entries once, a file that kept its
 * only name in d once (at most once if it was renamed over a name), a name
 * twice only if it was gone in between, nothing added during the listing but
 * by a rename that kept or took a cookie, and nothing that was never there.
 */
static void dm_list(struct dir_model *dm, guint d, guint churn)
{
	struct dm_listing l = {
		.dm = dm, .d = d, .seen = dm_names_new(), .twice = dm_names_new(),
		.times = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, g_free),
		.before = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free),
		.ever = dm_names_new(), .gone = dm_names_new(), .came = dm_inos_new(),
		.over = dm_inos_new(), .single = dm_single(dm, d),
	};
	GHashTableIter it;
	gpointer k, v;

	g_hash_table_iter_init(&it, dm->names[d]);
	while (g_hash_table_iter_next(&it, &k, &v)) {
		g_hash_table_insert(l.before, g_strdup(k), u64_dup(*(uint64_t *)v));
		g_hash_table_add(l.ever, g_strdup(k));
	}
	do {
		l.left = 1 + g_rand_int_range(dm->rng, 0, 40);
		g_assert_cmpint(meta_readdir(dm->m, dm->dir[d], l.cookie, &l.end, false, dm_collect,
					     &l), ==, 0);
		if (churn && l.left < 0) {
			guint i, n = g_rand_int_range(dm->rng, 0, churn);

			for (i = 0; i < n; i++, dm->op++)
				dm_churn(&l);
		}
	} while (l.left < 0);
	/* stable: in the directory before and after, as the same inode */
	g_hash_table_iter_init(&it, l.before);
	while (g_hash_table_iter_next(&it, &k, &v)) {
		uint64_t *now = g_hash_table_lookup(dm->names[d], k);

		if (!now || *now != *(uint64_t *)v)
			continue;
		DM_CHECK(dm, g_hash_table_contains(l.seen, k),
			 "\"%s\" (in the directory throughout) not listed", (char *)k);
		DM_CHECK(dm, !g_hash_table_contains(l.twice, k),
			 "\"%s\" (in the directory throughout) listed twice", (char *)k);
	}
	g_hash_table_iter_init(&it, l.single);
	while (g_hash_table_iter_next(&it, &k, NULL)) {
		uint64_t *times = g_hash_table_lookup(l.times, k), n = times ? *times : 0;
		bool over = g_hash_table_contains(l.over, k);

		DM_CHECK(dm, n == 1 || (n == 0 && over),
			 "inode %" G_GUINT64_FORMAT " (its only name in the directory "
			 "throughout%s) listed %" G_GUINT64_FORMAT " times",
			 (guint64) * (uint64_t *)k, over ? ", renamed over a name" : "",
			 (guint64)n);
	}
	g_hash_table_iter_init(&it, l.twice);
	while (g_hash_table_iter_next(&it, &k, NULL))
		DM_CHECK(dm, g_hash_table_contains(l.gone, k),
			 "\"%s\" listed twice, never gone from the directory", (char *)k);
	g_hash_table_iter_init(&it, l.seen);
	while (g_hash_table_iter_next(&it, &k, NULL))
		DM_CHECK(dm, g_hash_table_contains(l.ever, k), "\"%s\" listed, never there",
			 (char *)k);
	if (!churn)
		DM_CHECK(dm, !g_hash_table_size(l.twice) &&
			     g_hash_table_size(l.seen) == g_hash_table_size(dm->names[d]),
			 "directory %u lists %u entries, the model has %u", d,
			 g_hash_table_size(l.seen), g_hash_table_size(dm->names[d]));
	g_hash_table_destroy(l.seen);
	g_hash_table_destroy(l.twice);
	g_hash_table_destroy(l.times);
	g_hash_table_destroy(l.before);
	g_hash_table_destroy(l.ever);
	g_hash_table_destroy(l.gone);
	g_hash_table_destroy(l.came);
	g_hash_table_destroy(l.over);
	g_hash_table_destroy(l.single);
}

/* listings, lookups and link counts against the model */
static void dm_verify(struct dir_model *dm)
{
	GHashTableIter it;
	gpointer k, v;
	guint d;

	for (d = 0; d < DM_DIRS; d++) {
		dm_list(dm, d, 0);
		g_hash_table_iter_init(&it, dm->names[d]);
		while (g_hash_table_iter_next(&it, &k, &v)) {
			uint64_t ino = tfx_lookup(dm->m, dm->dir[d], k);

			DM_CHECK(dm, ino == *(uint64_t *)v, "lookup %s: ino %" G_GUINT64_FORMAT
				 ", the model has %" G_GUINT64_FORMAT, (char *)k, (guint64)ino,
				 (guint64) * (uint64_t *)v);
		}
	}
	g_hash_table_iter_init(&it, dm->nlink);
	while (g_hash_table_iter_next(&it, &k, &v))
		DM_CHECK(dm, attr_of(dm->m, *(uint64_t *)k).nlink == *(uint64_t *)v,
			 "inode %" G_GUINT64_FORMAT ": link count %u, the model has %"
			 G_GUINT64_FORMAT, (guint64) * (uint64_t *)k,
			 attr_of(dm->m, *(uint64_t *)k).nlink, (guint64) * (uint64_t *)v);
}

static int dm_cookie_of(void *ctx, const char *name, const struct meta_attr *attr,
			uint64_t next)
{
	g_string_append_printf(ctx, "%s %" G_GUINT64_FORMAT "\n", name, (guint64)next);
	return 0;
}

/* every entry of both directories with its cookie, in cookie order (g_free it) */
static char *dm_cookies(struct dir_model *dm)
{
	GString *out = g_string_new(NULL);
	guint d;

	for (d = 0; d < DM_DIRS; d++)
		g_assert_cmpint(meta_readdir(dm->m, dm->dir[d], 0, NULL, false, dm_cookie_of, out),
				==, 0);
	return g_string_free(out, FALSE);
}

/* after a remount: the model, and every entry at the cookie it had (the journal carries them) */
static void dm_verify_remount(struct dir_model *dm, const char *cookies)
{
	char *now = dm_cookies(dm);

	DM_CHECK(dm, !strcmp(now, cookies), "entries or cookies differ after the mount");
	g_free(now);
	dm_verify(dm);
}

static void dm_fsck_clean(struct fx *f)
{
	struct fsck_opts ro = { .lease_takeover_ms = 2000 };
	struct fsck_report rep;
	char *all = fsck_text(f, &ro, false, &rep);

	fsck_report_clear(&rep);
	g_free(all);
}

static void test_dir_model(struct fx *f, gconstpointer data)
{
	struct mount_opts o = { .holder_name = "test-meta", .lease_takeover_ms = 2000 };
	const char *env = g_getenv("RMEMFS_DIRMODEL_SEED");
	struct dir_model dm = { 0 };
	const guint rounds = 12, per_round = 2500;
	guint round, d;

	dm.seed = env ? (guint32)strtoul(env, NULL, 0) : g_test_rand_int();
	g_test_message("dir model seed %u (RMEMFS_DIRMODEL_SEED=%u replays it)", dm.seed, dm.seed);
	dm.rng = g_rand_new_with_seed(dm.seed);
	dm.nlink = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, g_free);
	dm.m = do_mount(f);
	for (d = 0; d < DM_DIRS; d++) {
		char name[8];

		g_snprintf(name, sizeof(name), "d%u", d);
		dm.dir[d] = tfx_mk(dm.m, ROOT, name, S_IFDIR | 0755);
		dm.names[d] = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
	}
	for (round = 0; round < rounds; round++) {
		guint i;

		for (i = 0; i < per_round; i++, dm.op++) {
			dm_one(&dm);
			if (!g_rand_int_range(dm.rng, 0, 500))
				dm_list(&dm, g_rand_int_range(dm.rng, 0, DM_DIRS), 8);
		}
		char *cookies;

		dm_verify(&dm);
		cookies = dm_cookies(&dm);
		if (round % 4 == 1) { /* clean remount */
			g_assert_cmpint(mount_close(dm.m), ==, 0);
			dm_fsck_clean(f);
			dm.m = do_mount(f);
			dm_verify_remount(&dm, cookies);
		} else if (round % 4 == 3) { /* crash after a sync: the journal is replayed */
			g_assert_cmpint(commit_sync(dm.m), ==, 0);
			mount_abandon(dm.m);
			dm.m = do_mount_opts(f, &o, 0, NULL);
			dm_verify_remount(&dm, cookies);
		}
		g_free(cookies);
	}
	g_test_message("dir model: %u ops, %u + %u entries at the end", dm.op,
		       g_hash_table_size(dm.names[0]), g_hash_table_size(dm.names[1]));
	g_assert_cmpint(mount_close(dm.m), ==, 0);
	dm_fsck_clean(f);
	for (d = 0; d < DM_DIRS; d++)
		g_hash_table_destroy(dm.names[d]);
	g_hash_table_destroy(dm.nlink);
	g_rand_free(dm.rng);
}

static void test_rename(struct fx *f, gconstpointer d)
{
	struct meta *m = do_mount(f);
	uint64_t d1, d2, d3, sub, x, y, e1, z;
	struct meta_attr a, b;

	d1 = tfx_mk(m, ROOT, "d1", S_IFDIR | 0755);
	d2 = tfx_mk(m, ROOT, "d2", S_IFDIR | 0755);
	sub = tfx_mk(m, d1, "sub", S_IFDIR | 0755);
	x = tfx_mk(m, d1, "x", S_IFREG | 0644);
	y = tfx_mk(m, d2, "y", S_IFREG | 0644);
	e1 = tfx_mk(m, d2, "empty", S_IFDIR | 0755);
	d3 = tfx_mk(m, sub, "deeper", S_IFDIR | 0755);

	/* a directory never moves into its own subtree */
	g_assert_cmpint(meta_rename(m, ROOT, "d1", sub, "d1", 0), ==, -EINVAL);
	g_assert_cmpint(meta_rename(m, ROOT, "d1", d3, "x", 0), ==, -EINVAL);
	g_assert_cmpint(meta_rename(m, ROOT, "d1", d1, "self", 0), ==, -EINVAL);
	/* type rules */
	g_assert_cmpint(meta_rename(m, d1, "x", d2, "empty", 0), ==, -EISDIR);
	g_assert_cmpint(meta_rename(m, d1, "sub", d2, "y", 0), ==, -ENOTDIR);
	g_assert_cmpint(meta_rename(m, d2, "empty", ROOT, "d1", 0), ==, -ENOTEMPTY);
	g_assert_cmpint(meta_rename(m, d1, "missing", d2, "q", 0), ==, -ENOENT);
	/* META_RENAME_NOREPLACE */
	g_assert_cmpint(meta_rename(m, d1, "x", d2, "y", META_RENAME_NOREPLACE), ==, -EEXIST);
	g_assert_cmpint(meta_rename(m, d1, "x", d2, "x2", META_RENAME_NOREPLACE), ==, 0);
	g_assert_cmpint(meta_rename(m, d2, "x2", d1, "x", META_RENAME_NOREPLACE), ==, 0);
	g_assert_cmpint(meta_rename(m, d1, "x", d2, "y", META_RENAME_NOREPLACE | META_RENAME_EXCHANGE), ==,
			-EINVAL);

	/* over an existing file: the old one is gone (its last name) */
	a = attr_of(m, d2);
	wait_clock_past(&a.mtime);
	g_assert_cmpint(meta_rename(m, d1, "x", d2, "y", 0), ==, 0);
	g_assert_cmpuint(tfx_lookup(m, d2, "y"), ==, x);
	g_assert_cmpuint(tfx_lookup(m, d1, "x"), ==, 0);
	g_assert_cmpint(meta_getattr(m, y, &b), ==, -ENOENT);
	b = attr_of(m, d2);
	g_assert_true(b.mtime.tv_sec > a.mtime.tv_sec ||
		      (b.mtime.tv_sec == a.mtime.tv_sec && b.mtime.tv_nsec > a.mtime.tv_nsec));

	/* a directory over an empty directory, across parents: link counts follow */
	g_assert_cmpuint(attr_of(m, d1).nlink, ==, 3);
	g_assert_cmpuint(attr_of(m, d2).nlink, ==, 3);
	g_assert_cmpint(meta_rename(m, d1, "sub", d2, "empty", 0), ==, 0);
	g_assert_cmpuint(attr_of(m, d1).nlink, ==, 2);
	g_assert_cmpuint(attr_of(m, d2).nlink, ==, 3);
	g_assert_cmpint(meta_getattr(m, e1, &b), ==, -ENOENT);
	g_assert_cmpuint(tfx_lookup(m, d2, "empty"), ==, sub);
	/* ".." of the moved directory is its new parent */
	g_assert_cmpuint(tfx_lookup(m, sub, ".."), ==, d2);

	/* META_RENAME_EXCHANGE of a file and a directory across parents */
	z = tfx_mk(m, d1, "z", S_IFREG | 0644);
	g_assert_cmpint(meta_rename(m, d1, "z", d2, "empty", META_RENAME_EXCHANGE), ==, 0);
	g_assert_cmpuint(tfx_lookup(m, d1, "z"), ==, sub);
	g_assert_cmpuint(tfx_lookup(m, d2, "empty"), ==, z);
	g_assert_cmpuint(attr_of(m, d1).nlink, ==, 3);
	g_assert_cmpuint(attr_of(m, d2).nlink, ==, 2);
	g_assert_cmpuint(tfx_lookup(m, sub, ".."), ==, d1);
	g_assert_cmpint(meta_rename(m, d1, "z", d2, "nothere", META_RENAME_EXCHANGE), ==, -ENOENT);
	/* exchanging a directory with something inside itself */
	tfx_mk(m, d3, "inner", S_IFREG | 0644);
	g_assert_cmpint(meta_rename(m, ROOT, "d1", d3, "inner", META_RENAME_EXCHANGE), ==, -EINVAL);
	g_assert_cmpint(meta_rename(m, d3, "inner", ROOT, "d1", META_RENAME_EXCHANGE), ==, -EINVAL);

	/* hard links of one file: rename is a no-op */
	g_assert_cmpint(meta_link(m, z, d2, "z2", &a), ==, 0);
	meta_forget(m, a.ino, 1);
	g_assert_cmpint(meta_rename(m, d2, "empty", d2, "z2", 0), ==, 0);
	g_assert_cmpuint(tfx_lookup(m, d2, "empty"), ==, z);
	g_assert_cmpuint(attr_of(m, z).nlink, ==, 2);

	/* everything survives a remount, and fsck agrees with the link counts */
	{
		char *before = dump(m, f->r), *after;
		struct fsck_report rep;
		struct fsck_opts ro = { 0 };
		char *msg = NULL;

		g_assert_cmpint(mount_close(m), ==, 0);
		fsck_report_init(&rep);
		g_assert_cmpint(mount_fsck(f->r, &ro, &rep, &msg), ==, 0);
		g_assert_cmpuint(rep.problems, ==, 0);
		fsck_report_clear(&rep);
		m = do_mount(f);
		after = dump(m, f->r);
		g_assert_cmpstr(before, ==, after);
		g_free(before);
		g_free(after);
	}
	g_assert_cmpint(mount_close(m), ==, 0);
}

static void test_xattr(struct fx *f, gconstpointer d)
{
	struct meta *m = do_mount(f);
	uint64_t x = tfx_mk(m, ROOT, "x", S_IFREG | 0644);
	char buf[256];
	struct meta_attr a, b;
	char big[70000];

	g_assert_cmpint(meta_setxattr(m, x, "os2.foo", "v", 1, 0), ==, -EOPNOTSUPP);
	g_assert_cmpint(meta_setxattr(m, x, "system.posix_acl_access", "v", 1, 0), ==,
			-EOPNOTSUPP);
	g_assert_cmpint(meta_getxattr(m, x, "user.none", buf, sizeof(buf)), ==, -ENODATA);
	g_assert_cmpint(meta_setxattr(m, x, "user.a", "v", 1, XATTR_REPLACE), ==, -ENODATA);
	a = attr_of(m, x);
	wait_clock_past(&a.ctime);
	g_assert_cmpint(meta_setxattr(m, x, "user.a", "value-a", 7, XATTR_CREATE), ==, 0);
	b = attr_of(m, x);
	g_assert_true(b.ctime.tv_sec > a.ctime.tv_sec ||
		      (b.ctime.tv_sec == a.ctime.tv_sec && b.ctime.tv_nsec > a.ctime.tv_nsec));
	g_assert_cmpint(meta_setxattr(m, x, "user.a", "v", 1, XATTR_CREATE), ==, -EEXIST);
	g_assert_cmpint(meta_setxattr(m, x, "trusted.b", "", 0, 0), ==, 0);
	g_assert_cmpint(meta_setxattr(m, x, "security.c", "ccc", 3, 0), ==, 0);
	g_assert_cmpint(meta_getxattr(m, x, "user.a", NULL, 0), ==, 7);
	g_assert_cmpint(meta_getxattr(m, x, "user.a", buf, 3), ==, -ERANGE);
	g_assert_cmpint(meta_getxattr(m, x, "user.a", buf, sizeof(buf)), ==, 7);
	g_assert_cmpmem(buf, 7, "value-a", 7);
	g_assert_cmpint(meta_getxattr(m, x, "trusted.b", buf, sizeof(buf)), ==, 0);
	g_assert_cmpint(meta_listxattr(m, x, NULL, 0), ==, 7 + 10 + 11);
	g_assert_cmpint(meta_listxattr(m, x, buf, 5), ==, -ERANGE);
	g_assert_cmpint(meta_setxattr(m, x, "user.a", "new", 3, XATTR_REPLACE), ==, 0);
	memset(big, 'q', sizeof(big));
	g_assert_cmpint(meta_setxattr(m, x, "user.big", big, sizeof(big), 0), ==, -E2BIG);
	g_assert_cmpint(meta_setxattr(m, x, "user.big", big, 65536, 0), ==, 0);
	g_assert_cmpint(meta_removexattr(m, x, "user.none"), ==, -ENODATA);
	g_assert_cmpint(meta_removexattr(m, x, "security.c"), ==, 0);
	g_assert_cmpint(commit_sync(m), ==, 0);
	mount_abandon(m);
	{
		struct mount_opts o = { .holder_name = "test-meta", .lease_takeover_ms = 2000 };

		m = do_mount_opts(f, &o, 0, NULL);
	}
	g_assert_cmpint(meta_getxattr(m, x, "user.a", buf, sizeof(buf)), ==, 3);
	g_assert_cmpmem(buf, 3, "new", 3);
	g_assert_cmpint(meta_getxattr(m, x, "user.big", NULL, 0), ==, 65536);
	g_assert_cmpint(meta_getxattr(m, x, "security.c", buf, sizeof(buf)), ==, -ENODATA);
	g_assert_cmpint(meta_listxattr(m, x, buf, sizeof(buf)), ==, 7 + 10 + 9);
	g_assert_cmpint(mount_close(m), ==, 0);
}

static void test_names(struct fx *f, gconstpointer d)
{
	struct meta *m = do_mount(f);
	char name[300];
	struct meta_attr a;

	memset(name, 'n', sizeof(name));
	name[255] = 0;
	g_assert_cmpint(meta_mknod(m, ROOT, name, S_IFREG | 0644, 0, &root_cred, &a), ==, 0);
	meta_forget(m, a.ino, 1);
	g_assert_cmpuint(tfx_lookup(m, ROOT, name), ==, a.ino);
	name[255] = 'n';
	name[256] = 0;
	g_assert_cmpint(meta_mknod(m, ROOT, name, S_IFREG | 0644, 0, &root_cred, &a), ==,
			-ENAMETOOLONG);
	g_assert_cmpint(meta_mkdir(m, ROOT, name, 0755, &root_cred, &a), ==, -ENAMETOOLONG);
	g_assert_cmpint(meta_lookup(m, ROOT, name, &a), ==, -ENAMETOOLONG);
	name[255] = 0;
	g_assert_cmpint(mount_close(m), ==, 0);
	m = do_mount(f);
	g_assert_cmpuint(tfx_lookup(m, ROOT, name), !=, 0);
	g_assert_cmpint(mount_close(m), ==, 0);
}

static void test_sparse(struct fx *f, gconstpointer d)
{
	struct meta *m = do_mount(f); /* 16 MiB pool */
	const uint64_t four_g = 4ULL << 30;
	uint64_t ino = tfx_mk(m, ROOT, "sparse", S_IFREG | 0644), res;
	uint8_t buf[BS], zero[BS] = { 0 };
	struct meta_statfs st0, st;
	struct meta_attr a;

	g_assert_cmpint(meta_statfs(m, &st0), ==, 0);
	memset(buf, 0xee, sizeof(buf));
	g_assert_cmpint(write_data(m, f->r, ino, four_g - BS, buf, BS), ==, 0);
	g_assert_cmpint(write_data(m, f->r, ino, 0, buf, 100), ==, 0);
	a = attr_of(m, ino);
	g_assert_cmpuint(a.size, ==, four_g);
	g_assert_cmpuint(a.blocks, ==, 2);
	g_assert_cmpint(meta_statfs(m, &st), ==, 0);
	g_assert_cmpuint(st0.bfree - st.bfree, ==, 2);
	read_data(m, f->r, ino, 1ULL << 31, buf, BS);
	g_assert_cmpmem(buf, BS, zero, BS);
	g_assert_cmpint(extent_seek(m, ino, 200, SEEK_DATA, &res), ==, 0);
	g_assert_cmpuint(res, ==, 200); /* inside the block written at 0 */
	g_assert_cmpint(extent_seek(m, ino, BS + 200, SEEK_DATA, &res), ==, 0);
	g_assert_cmpuint(res, ==, four_g - BS);
	g_assert_cmpint(extent_seek(m, ino, four_g - 10, SEEK_HOLE, &res), ==, 0);
	g_assert_cmpuint(res, ==, four_g);
	g_assert_cmpint(extent_seek(m, ino, 0, SEEK_HOLE, &res), ==, 0);
	g_assert_cmpuint(res, ==, BS);
	g_assert_cmpint(extent_seek(m, ino, four_g, SEEK_DATA, &res), ==, -ENXIO);
	/* fallocate KEEP_SIZE: allocated, reads zero, size unchanged */
	g_assert_cmpint(extent_fallocate(m, ino, 1 << 20, 8 * BS, FALLOC_FL_KEEP_SIZE), ==, 0);
	a = attr_of(m, ino);
	g_assert_cmpuint(a.size, ==, four_g);
	g_assert_cmpuint(a.blocks, ==, 10);
	read_data(m, f->r, ino, 1 << 20, buf, BS);
	g_assert_cmpmem(buf, BS, zero, BS);
	/* punch the last block */
	g_assert_cmpint(extent_punch_hole(m, ino, four_g - BS, BS), ==, 0);
	g_assert_cmpuint(attr_of(m, ino).blocks, ==, 9);
	g_assert_cmpint(mount_close(m), ==, 0);
	m = do_mount(f);
	a = attr_of(m, ino);
	g_assert_cmpuint(a.size, ==, four_g);
	g_assert_cmpuint(a.blocks, ==, 9);
	read_data(m, f->r, ino, 0, buf, BS);
	g_assert_cmpuint(buf[99], ==, 0xee);
	g_assert_cmpuint(buf[100], ==, 0);
	g_assert_cmpint(mount_close(m), ==, 0);
}

/* setattr of one field (valid: META_SET_MODE, _UID or _GID) to value, as cred */
static int set1(struct meta *m, uint64_t ino, uint32_t valid, uint32_t value,
		const struct meta_cred *cred, struct meta_attr *a)
{
	struct meta_setattr sa = { .valid = valid, .mode = value, .uid = value, .gid = value };

	return meta_setattr(m, ino, &sa, cred, a);
}

static void test_setattr(struct fx *f, gconstpointer d)
{
	struct meta *m = do_mount(f);
	uint32_t groups[] = { 300, 301 };
	struct meta_cred owner = { .uid = 1000, .gid = 100, .groups = groups, .ngroups = 2 };
	struct meta_cred other = { .uid = 1001, .gid = 100 };
	struct meta_setattr sa;
	struct meta_attr a;
	uint64_t ino = tfx_mk(m, ROOT, "f", S_IFREG | 0644);
	uint8_t buf[3 * BS];

	memset(&sa, 0, sizeof(sa));
	sa.valid = META_SET_UID | META_SET_GID;
	sa.uid = 1000;
	sa.gid = 100;
	g_assert_cmpint(meta_setattr(m, ino, &sa, &root_cred, &a), ==, 0);
	g_assert_cmpint(set1(m, ino, META_SET_MODE, 06755, &owner, &a), ==, 0);
	g_assert_cmpuint(a.mode & 07777, ==, 06755);
	g_assert_cmpint(set1(m, ino, META_SET_MODE, 06755, &other, &a), ==, -EPERM);
	/* chown only by root */
	g_assert_cmpint(set1(m, ino, META_SET_UID, 1001, &owner, &a), ==, -EPERM);
	/* chgrp by the owner to a group it is in; setuid/setgid cleared */
	g_assert_cmpint(set1(m, ino, META_SET_GID, 555, &owner, &a), ==, -EPERM);
	g_assert_cmpint(set1(m, ino, META_SET_GID, 301, &owner, &a), ==, 0);
	g_assert_cmpuint(a.gid, ==, 301);
	g_assert_cmpuint(a.mode & 07777, ==, 0755);
	g_assert_cmpint(set1(m, ino, META_SET_GID, 301, &other, &a), ==, -EPERM);
	/* chown by root clears them too, as Linux does */
	g_assert_cmpint(set1(m, ino, META_SET_MODE, 06755, &root_cred, &a), ==, 0);
	g_assert_cmpint(set1(m, ino, META_SET_UID, 1000, &root_cred, &a), ==, 0);
	g_assert_cmpuint(a.mode & 07777, ==, 0755);
	/* what the kernel checked (default_permissions) is applied as asked */
	other.kernel_checked = true;
	sa.valid = META_SET_MODE | META_SET_GID;
	sa.mode = 02755;
	sa.gid = 555;
	g_assert_cmpint(meta_setattr(m, ino, &sa, &other, &a), ==, 0);
	g_assert_cmpuint(a.mode & 07777, ==, 02755);
	g_assert_cmpuint(a.gid, ==, 555);
	other.kernel_checked = false;
	/* explicit times only by the owner */
	sa.valid = META_SET_MTIME;
	sa.mtime.tv_sec = 12345;
	g_assert_cmpint(meta_setattr(m, ino, &sa, &other, &a), ==, -EPERM);
	g_assert_cmpint(meta_setattr(m, ino, &sa, &owner, &a), ==, 0);
	g_assert_cmpint(a.mtime.tv_sec, ==, 12345);
	/* truncate both ways frees and reads zeros */
	memset(buf, 1, sizeof(buf));
	g_assert_cmpint(write_data(m, f->r, ino, 0, buf, sizeof(buf)), ==, 0);
	g_assert_cmpuint(attr_of(m, ino).blocks, ==, 3);
	sa.valid = META_SET_SIZE;
	sa.size = BS;
	g_assert_cmpint(meta_setattr(m, ino, &sa, &owner, &a), ==, 0);
	g_assert_cmpuint(a.blocks, ==, 1);
	sa.size = 3 * BS;
	g_assert_cmpint(meta_setattr(m, ino, &sa, &owner, &a), ==, 0);
	read_data(m, f->r, ino, 0, buf, sizeof(buf));
	g_assert_cmpuint(buf[BS - 1], ==, 1);
	g_assert_cmpuint(buf[BS], ==, 0);
	g_assert_cmpuint(buf[3 * BS - 1], ==, 0);
	sa.valid = META_SET_SIZE;
	g_assert_cmpint(meta_setattr(m, ROOT, &sa, &root_cred, &a), ==, -EISDIR);
	/* unlink while open: the inode lives until release and forget */
	g_assert_cmpint(meta_lookup(m, ROOT, "f", &a), ==, 0);
	g_assert_cmpint(meta_open(m, ino), ==, 0);
	g_assert_cmpint(meta_unlink(m, ROOT, "f"), ==, 0);
	g_assert_cmpuint(attr_of(m, ino).nlink, ==, 0);
	meta_release(m, ino);
	g_assert_cmpint(meta_getattr(m, ino, &a), ==, 0);
	meta_forget(m, ino, 1);
	g_assert_cmpint(meta_getattr(m, ino, &a), ==, -ENOENT);
	g_assert_cmpint(mount_close(m), ==, 0);
}

static void test_orphan_recovery(struct fx *f, gconstpointer d)
{
	struct mount_opts o = { .holder_name = "test-meta", .lease_takeover_ms = 2000 };
	struct meta *m = do_mount(f);
	uint8_t buf[8 * BS];
	struct meta_statfs st0, st;
	struct meta_attr a;
	uint64_t ino;

	g_assert_cmpint(meta_statfs(m, &st0), ==, 0);
	g_assert_cmpint(meta_mknod(m, ROOT, "open-unlinked", S_IFREG | 0644, 0, &root_cred, &a),
			==, 0);
	ino = a.ino;
	g_assert_cmpint(meta_open(m, ino), ==, 0);
	memset(buf, 3, sizeof(buf));
	g_assert_cmpint(write_data(m, f->r, ino, 0, buf, sizeof(buf)), ==, 0);
	g_assert_cmpint(meta_unlink(m, ROOT, "open-unlinked"), ==, 0);
	g_assert_cmpint(commit_sync(m), ==, 0);
	mount_abandon(m); /* crash while the file is open */
	m = do_mount_opts(f, &o, 0, NULL);
	g_assert_cmpuint(m->load.orphans, ==, 1);
	g_assert_cmpint(meta_getattr(m, ino, &a), ==, -ENOENT);
	g_assert_cmpint(meta_statfs(m, &st), ==, 0);
	g_assert_cmpuint(st.bfree, ==, st0.bfree);
	g_assert_cmpint(mount_close(m), ==, 0);
}

/* the checkpoint m would write now is exactly m->ckpt_bytes long */
/*
 * The checkpoint is as long as the running count says, plus (format 3) its
 * pending blocks, which the count leaves out (csum.h): le32 n, then uv pb,
 * u8 had, le32 CRC each.
 */
static void assert_ckpt_bytes_exact(struct meta *m)
{
	GArray *pend = g_array_new(FALSE, FALSE, sizeof(uint64_t));
	uint64_t extra = m->g.version >= LAYOUT_VERSION_AHEAD ? 4 : 0;
	GByteArray *buf;
	guint i;

	csum_pending_list(m->csum, pend);
	for (i = 0; extra && i < pend->len; i++)
		extra += layout_uv_len(g_array_index(pend, uint64_t, i)) + 1 + 4;
	pthread_mutex_lock(&m->lock);
	g_assert_cmpint(ckpt_serialize(m, m->durable_gen + 1, 1, &buf), ==, 0);
	g_assert_cmpuint(buf->len, ==, m->ckpt_bytes + extra);
	pthread_mutex_unlock(&m->lock);
	g_byte_array_unref(buf);
	g_array_free(pend, TRUE);
}

/* fallocate, then a write: the EXT_SET that makes the blocks WRITTEN keeps their CRCs in replay */
static void test_csum_unwritten(struct fx *f, gconstpointer d)
{
	struct mount_opts ro = { .read_only = true };
	struct meta *m = do_mount(f);
	struct meta_extent ext[4];
	uint8_t buf[4 * BS];
	uint64_t pb[4], ino;
	uint32_t crc[4], got;
	int i;

	ino = tfx_mk(m, ROOT, "falloc", S_IFREG | 0644);
	g_assert_cmpint(extent_fallocate(m, ino, 0, sizeof(buf), 0), ==, 0);
	g_assert_cmpint(extent_map(m, ino, 0, sizeof(buf), true, ext, 4), ==, 1);
	fill_pattern(buf, sizeof(buf), 9);
	for (i = 0; i < 4; i++) {
		pb[i] = (ext[0].pool_off - m->g.data_off) / BS + (uint64_t)i;
		crc[i] = layout_crc(buf + i * BS, BS);
	}
	g_assert_cmpint(checksum_log(m, pb, crc, 4), ==, 0); /* as the data path does: first */
	g_assert_cmpint(write_data(m, f->r, ino, 0, buf, sizeof(buf)), ==, 0);
	g_assert_cmpint(commit_sync(m), ==, 0);
	for (i = 0; i < 4; i++)
		g_assert_true(csum_get(m->csum, pb[i], &got));
	mount_abandon(m); /* crash: the next mount replays both transactions */

	m = do_mount_opts(f, &ro, 0, NULL);
	g_assert_cmpuint(m->load.replayed, >, 0);
	for (i = 0; i < 4; i++) {
		g_assert_true(csum_get(m->csum, pb[i], &got));
		g_assert_cmphex(got, ==, crc[i]);
	}
	g_assert_cmpint(mount_close(m), ==, 0);
}

#define CUT_SHORT "): a write to it was cut short by the crash, and no copy holds"

/* the warning of a block a torn write left: expected, counted, not fatal */
static gboolean cut_short_not_fatal(const gchar *domain, GLogLevelFlags level, const gchar *msg,
				    gpointer data)
{
	return !strstr(msg, CUT_SHORT);
}

static void count_cut_short(const gchar *domain, GLogLevelFlags level, const gchar *msg,
			    gpointer data)
{
	if (strstr(msg, CUT_SHORT))
		(*(unsigned int *)data)++;
	else
		g_log_default_handler(domain, level, msg, NULL);
}

/*
 * CSUM, CSUM_AHEAD and HOT records through replay: a reader sees what was
 * journaled (a hot region and its pending blocks, also through a
 * checkpoint); a read-write mount after the crash settles each pending
 * block on what the pool holds - the old bytes, the new, or neither (kept
 * on its new CRC: it reads as an error) - recomputes nothing (a damaged
 * block of the hot region keeps failing its CRC) and clears the region; a
 * clean remount keeps the checksums through the checkpoint, and freed
 * blocks lose theirs.
 */
static void test_csum_replay(struct fx *f, gconstpointer d)
{
	struct mount_opts o = { .holder_name = "test-meta", .lease_takeover_ms = 2000 };
	struct mount_opts ro = { .read_only = true };
	struct meta *m = do_mount(f);
	struct meta_extent ext[8];
	uint8_t buf[8 * BS], blk[BS];
	uint64_t pb[8], ino, region;
	uint32_t crc[8], new4, new5, new7, got, old;
	unsigned int cut = 0;
	bool entered, had;
	guint h;
	int i, n;

	ino = tfx_mk(m, ROOT, "data", S_IFREG | 0644);
	fill_pattern(buf, sizeof(buf), 7);
	g_assert_cmpint(write_data(m, f->r, ino, 0, buf, sizeof(buf)), ==, 0);
	n = extent_map(m, ino, 0, sizeof(buf), false, ext, G_N_ELEMENTS(ext));
	g_assert_cmpint(n, ==, 1);
	for (i = 0; i < 8; i++) {
		pb[i] = (ext[0].pool_off - m->g.data_off) / BS + (uint64_t)i;
		crc[i] = layout_crc(buf + i * BS, BS);
	}
	region = pb[4] / LAYOUT_CSUM_REGION_BLOCKS;
	g_assert_cmpint(checksum_log(m, pb, crc, 8), ==, 0);
	/*
	 * In-place writes whose CRCs went to the journal ahead of their data:
	 * block 4's data never went out, block 5's landed, block 7's was torn.
	 * Block 6, written by nobody, is damaged behind the filesystem's back.
	 */
	new4 = crc[4] ^ 1;
	g_assert_cmpint(checksum_ahead(m, &pb[4], &new4, 1, &entered), ==, 0);
	g_assert_true(entered);
	g_assert_true(csum_hot(m->csum, region));
	g_assert_true(csum_pending(m->csum, pb[4], &old, &had) && had && old == crc[4]);
	assert_ckpt_bytes_exact(m);
	g_assert_cmpint(commit_write(m, true), ==, 0); /* the pending block is in the checkpoint */
	memcpy(blk, buf + 5 * BS, BS);
	blk[100] ^= 0xff;
	new5 = layout_crc(blk, BS);
	g_assert_cmpint(checksum_ahead(m, &pb[5], &new5, 1, &entered), ==, 0); /* and after it */
	g_assert_cmpint(remote_write(f->r, ext[0].pool_off + 5 * BS, blk, BS), ==, 0);
	blk[200] ^= 0xff;
	new7 = layout_crc(blk, BS);
	g_assert_cmpint(checksum_ahead(m, &pb[7], &new7, 1, &entered), ==, 0);
	blk[300] ^= 0xff; /* what a torn write left: neither the old bytes nor the new */
	g_assert_cmpint(remote_write(f->r, ext[0].pool_off + 7 * BS, blk, BS), ==, 0);
	memcpy(blk, buf + 6 * BS, BS);
	blk[9] ^= 0x5a;
	g_assert_cmpint(remote_write(f->r, ext[0].pool_off + 6 * BS, blk, BS), ==, 0);
	mount_abandon(m); /* crash */

	m = do_mount_opts(f, &ro, 0, NULL);
	g_assert_true(csum_get(m->csum, pb[4], &got));
	g_assert_cmphex(got, ==, new4);
	g_assert_true(csum_pending(m->csum, pb[4], &old, &had) && had && old == crc[4]);
	g_assert_true(csum_pending(m->csum, pb[5], &old, &had) && had && old == crc[5]);
	g_assert_false(csum_pending(m->csum, pb[6], &old, &had));
	g_assert_true(csum_hot(m->csum, region));
	assert_ckpt_bytes_exact(m);
	g_assert_cmpint(mount_close(m), ==, 0);

	/* recovery: each pending block settles on what it holds; nothing is recomputed */
	g_test_log_set_fatal_handler(cut_short_not_fatal, NULL);
	h = g_log_set_handler("rmemfs-meta", G_LOG_LEVEL_WARNING | G_LOG_FLAG_FATAL, count_cut_short,
			      &cut);
	m = do_mount_opts(f, &o, 0, NULL);
	g_log_remove_handler("rmemfs-meta", h);
	g_test_log_set_fatal_handler(NULL, NULL);
	g_assert_cmpuint(cut, ==, 1); /* block 7 */
	g_assert_false(csum_hot(m->csum, region));
	g_assert_cmpuint(csum_pending_count(m->csum), ==, 0);
	for (i = 0; i < 8; i++) {
		uint32_t want = i == 5 ? new5 : i == 7 ? new7 : crc[i];

		g_assert_true(csum_get(m->csum, pb[i], &got));
		g_assert_cmphex(got, ==, want);
	}
	assert_ckpt_bytes_exact(m);
	g_assert_cmpint(mount_close(m), ==, 0);

	m = do_mount(f);
	g_assert_cmpuint(m->load.replayed, ==, 0);
	g_assert_true(csum_get(m->csum, pb[6], &got));
	g_assert_cmphex(got, ==, crc[6]); /* the damage stays damage */
	g_assert_cmpint(extent_punch_hole(m, ino, 0, 4 * BS), ==, 0);
	g_assert_false(csum_get(m->csum, pb[0], &got));
	g_assert_true(csum_get(m->csum, pb[4], &got));
	assert_ckpt_bytes_exact(m);
	g_assert_cmpint(commit_sync(m), ==, 0);
	mount_abandon(m);
	m = do_mount_opts(f, &o, 0, NULL); /* replays the punch over the checkpoint */
	g_assert_false(csum_get(m->csum, pb[3], &got));
	g_assert_true(csum_get(m->csum, pb[7], &got));
	g_assert_cmpint(mount_close(m), ==, 0);
}

/* the format versions of the superblock and of the committed checkpoint */
static void pool_versions(struct fx *f, uint32_t *sb_version, uint32_t *ckpt_version)
{
	struct layout_ckpt_hdr h;
	struct layout_geom g;
	uint8_t blk[LAYOUT_SB_SIZE];
	uint64_t gen;

	g_assert_cmpint(remote_read(f->r, 0, blk, sizeof(blk)), ==, 0);
	g_assert_cmpint(layout_sb_classify(blk, remote_size(f->r), &g, sb_version, NULL), ==,
			LAYOUT_SB_RMEMFS);
	g_assert_cmpint(remote_fetch_add(f->r, LAYOUT_SB_CKPT_GEN, 0, &gen), ==, 0);
	g_assert_cmpint(remote_read(f->r, g.slot_off[gen & 1], &h, sizeof(h)), ==, 0);
	*ckpt_version = le32toh(h.version);
}

/*
 * A version-1 pool (its last checkpoint and superblock written as format 1
 * wrote them): a reader and rmemfs-fsck take it as it is, a read-write
 * mount upgrades it (a version-2 checkpoint, then the superblock), its old
 * blocks have no checksum and new writes get one.
 */
static void test_v1_upgrade(struct fx *f, gconstpointer d)
{
	struct mount_opts ro = { .read_only = true };
	struct fsck_opts fo = { .lease_takeover_ms = 2000 };
	struct meta *m = do_mount(f);
	struct fsck_report rep;
	struct layout_geom g;
	struct layout_sb sb;
	char *before, *after, *msg = NULL;
	uint32_t sbv, ckv, got;
	uint64_t ino, pb;
	struct meta_extent e;
	uint8_t buf[2 * BS];

	build_tree(m, f->r);
	before = dump(m, f->r);
	g_assert_cmpuint(csum_count(m->csum), ==, 0); /* build_tree writes no checksums */
	/* make it a version-1 pool: the unmount's checkpoint, and the superblock */
	m->g.version = 1;
	g = m->g;
	g_assert_cmpint(mount_close(m), ==, 0);
	layout_sb_pack(&g, &sb);
	g_assert_cmpint(remote_write(f->r, 0, &sb, LAYOUT_SB_STATIC_LEN), ==, 0);
	pool_versions(f, &sbv, &ckv);
	g_assert_cmpuint(sbv, ==, 1);
	g_assert_cmpuint(ckv, ==, 1);

	m = do_mount_opts(f, &ro, 0, NULL);
	after = dump(m, f->r);
	g_assert_cmpstr(before, ==, after);
	g_free(after);
	g_assert_cmpint(mount_close(m), ==, 0);
	fsck_report_init(&rep);
	g_assert_cmpint(mount_fsck(f->r, &fo, &rep, &msg), ==, 0);
	g_assert_cmpuint(rep.problems, ==, 0);
	fsck_report_clear(&rep);
	pool_versions(f, &sbv, &ckv);
	g_assert_cmpuint(sbv, ==, 1);

	m = do_mount(f); /* read-write: upgrades */
	pool_versions(f, &sbv, &ckv);
	g_assert_cmpuint(sbv, ==, LAYOUT_VERSION);
	g_assert_cmpuint(ckv, ==, LAYOUT_VERSION);
	after = dump(m, f->r);
	g_assert_cmpstr(before, ==, after);
	g_free(after);
	ino = tfx_mk(m, ROOT, "new", S_IFREG | 0644);
	fill_pattern(buf, sizeof(buf), 3);
	g_assert_cmpint(write_data(m, f->r, ino, 0, buf, sizeof(buf)), ==, 0);
	g_assert_cmpint(extent_map(m, ino, 0, BS, false, &e, 1), ==, 1);
	pb = extent_pblock(m, e.pool_off);
	g_assert_cmpint(checksum_log(m, &pb, &(uint32_t){ layout_crc(buf, BS) }, 1), ==, 0);
	assert_ckpt_bytes_exact(m);
	g_assert_cmpint(mount_close(m), ==, 0);
	m = do_mount(f);
	g_assert_true(csum_get(m->csum, pb, &got));
	g_assert_cmphex(got, ==, layout_crc(buf, BS));
	g_assert_cmpint(mount_close(m), ==, 0);
	g_free(before);
}

/*
 * A format-2 client died in the middle of in-place overwrites: its CRCs
 * followed the data into the journal, so a block of the hot region that
 * fails its CRC may hold an acknowledged write or damage. The format-3
 * mount drops that block's CRC (said, not recomputed), keeps the others,
 * and upgrades the pool.
 */
static void test_v2_upgrade(struct fx *f, gconstpointer d)
{
	struct mount_opts o = { .holder_name = "test-meta", .lease_takeover_ms = 2000 };
	struct meta *m = do_mount(f);
	struct meta_extent e;
	struct layout_sb sb;
	uint8_t buf[4 * BS];
	uint64_t ino, pb[4], region;
	uint32_t crc[4], sbv, ckv, got;
	int i;

	ino = tfx_mk(m, ROOT, "old", S_IFREG | 0644);
	fill_pattern(buf, sizeof(buf), 5);
	g_assert_cmpint(write_data(m, f->r, ino, 0, buf, sizeof(buf)), ==, 0);
	g_assert_cmpint(extent_map(m, ino, 0, sizeof(buf), false, &e, 1), ==, 1);
	for (i = 0; i < 4; i++) {
		pb[i] = extent_pblock(m, e.pool_off) + (uint64_t)i;
		crc[i] = layout_crc(buf + i * BS, BS);
	}
	g_assert_cmpint(checksum_log(m, pb, crc, 4), ==, 0);
	m->g.version = 2; /* a format-2 pool: its checkpoint, superblock and HOT record */
	g_assert_cmpint(commit_write(m, true), ==, 0);
	layout_sb_pack(&m->g, &sb);
	g_assert_cmpint(remote_write(f->r, 0, &sb, LAYOUT_SB_STATIC_LEN), ==, 0);
	region = pb[0] / LAYOUT_CSUM_REGION_BLOCKS;
	pthread_mutex_lock(&m->lock);
	meta_txn_begin(m, NULL);
	journal_rec_hot(m->j, region, true);
	csum_hot_set(m->csum, region, true, 0, &m->ckpt_bytes);
	meta_txn_end(m, NULL);
	pthread_mutex_unlock(&m->lock);
	g_assert_cmpint(commit_sync(m), ==, 0);
	buf[BS + 10] ^= 0xff; /* block 1 overwritten in place; its CRC never journaled */
	g_assert_cmpint(remote_write(f->r, e.pool_off + BS, buf + BS, BS), ==, 0);
	mount_abandon(m);
	pool_versions(f, &sbv, &ckv);
	g_assert_cmpuint(sbv, ==, 2);
	g_assert_cmpuint(ckv, ==, 2);

	m = do_mount_opts(f, &o, 0, NULL);
	pool_versions(f, &sbv, &ckv);
	g_assert_cmpuint(sbv, ==, LAYOUT_VERSION);
	g_assert_cmpuint(ckv, ==, LAYOUT_VERSION);
	g_assert_false(csum_hot(m->csum, region));
	g_assert_false(csum_get(m->csum, pb[1], &got));
	for (i = 0; i < 4; i += i == 0 ? 2 : 1) {
		g_assert_true(csum_get(m->csum, pb[i], &got));
		g_assert_cmphex(got, ==, crc[i]);
	}
	assert_ckpt_bytes_exact(m);
	g_assert_cmpint(mount_close(m), ==, 0);
}

/*
 * The lookups by node id behind file handles: "." of any inode and ".." of a
 * directory, each a kernel reference like any lookup; -ENOENT once the inode
 * has no name. After a crash no new inode gets a number the crashed client
 * gave out.
 */
static void test_dot_lookups(struct fx *f, gconstpointer d)
{
	struct mount_opts o = { .holder_name = "test-meta", .lease_takeover_ms = 2000 };
	struct meta *m = do_mount(f);
	struct meta_attr a;
	uint64_t file, dir, sub, lost;

	file = tfx_mk(m, ROOT, "f", S_IFREG | 0644);
	dir = tfx_mk(m, ROOT, "d", S_IFDIR | 0755);
	sub = tfx_mk(m, dir, "e", S_IFDIR | 0755);
	g_assert_cmpuint(tfx_lookup(m, file, "."), ==, file);
	g_assert_cmpuint(tfx_lookup(m, sub, "."), ==, sub);
	g_assert_cmpuint(tfx_lookup(m, sub, ".."), ==, dir);
	g_assert_cmpuint(tfx_lookup(m, dir, ".."), ==, ROOT);
	g_assert_cmpuint(tfx_lookup(m, ROOT, ".."), ==, ROOT);
	g_assert_cmpint(meta_lookup(m, file, "..", &a), ==, -ENOTDIR);
	g_assert_cmpint(meta_lookup(m, file + 1000, ".", &a), ==, -ENOENT);

	/* a reference from "." keeps an unlinked file, which "." no longer finds */
	g_assert_cmpint(meta_lookup(m, file, ".", &a), ==, 0);
	g_assert_cmpint(meta_unlink(m, ROOT, "f"), ==, 0);
	g_assert_cmpint(meta_lookup(m, file, ".", &a), ==, -ENOENT);
	g_assert_cmpint(meta_getattr(m, file, &a), ==, 0);
	meta_forget(m, file, 1);
	g_assert_cmpint(meta_getattr(m, file, &a), ==, -ENOENT);
	/* the same for a removed directory and its ".." */
	g_assert_cmpint(meta_lookup(m, sub, "..", &a), ==, 0);
	meta_forget(m, a.ino, 1);
	g_assert_cmpint(meta_lookup(m, sub, ".", &a), ==, 0);
	g_assert_cmpint(meta_rmdir(m, dir, "e"), ==, 0);
	g_assert_cmpint(meta_lookup(m, sub, ".", &a), ==, -ENOENT);
	g_assert_cmpint(meta_lookup(m, sub, "..", &a), ==, -ENOENT);
	meta_forget(m, sub, 1);

	/* a crash loses a file that never became durable: its number stays unused */
	g_assert_cmpint(commit_sync(m), ==, 0);
	commit_stop(m);
	lost = tfx_mk(m, dir, "lost", S_IFREG | 0644);
	mount_abandon(m);
	m = do_mount_opts(f, &o, 0, NULL);
	g_assert_false(m->load.was_clean);
	g_assert_cmpint(meta_lookup(m, lost, ".", &a), ==, -ENOENT);
	g_assert_cmpuint(tfx_mk(m, dir, "new", S_IFREG | 0644), >, lost);
	g_assert_cmpint(mount_close(m), ==, 0);
}

/*
 * The mount-time repair, made to fail: the test links with
 * -Wl,--wrap=fsck_check, so mount.c's call lands here.
 */
int __real_fsck_check(struct meta *m, enum fsck_mode mode, struct fsck_report *rep);
int __wrap_fsck_check(struct meta *m, enum fsck_mode mode, struct fsck_report *rep);
static int fsck_check_fail; /* -errno: what the next FSCK_MOUNT check returns */

int __wrap_fsck_check(struct meta *m, enum fsck_mode mode, struct fsck_report *rep)
{
	int rc = __real_fsck_check(m, mode, rep);

	if (mode == FSCK_MOUNT && fsck_check_fail && !rc)
		rc = fsck_check_fail;
	return rc;
}

static void test_repair_fails(struct fx *f, gconstpointer d)
{
	struct mount_opts o = { .holder_name = "test-meta", .lease_takeover_ms = 2000 };
	struct meta_inode *in;
	struct meta *m = do_mount(f);
	char *msg = NULL;
	uint64_t ino;

	/* a wrong link count: a mount repairs it */
	ino = tfx_mk(m, ROOT, "f", S_IFREG | 0644);
	pthread_mutex_lock(&m->lock);
	in = inode_get(m, ino);
	in->a.nlink = 5;
	inode_touch_acct(m, in);
	pthread_mutex_unlock(&m->lock);
	g_assert_cmpint(commit_write(m, true), ==, 0);
	mount_abandon(m);

	/* the repair fails: so does the mount, saying why */
	fsck_check_fail = -EIO;
	m = do_mount_opts(f, &o, -EIO, &msg);
	fsck_check_fail = 0;
	g_assert_null(m);
	g_test_message("mount: %s", msg);
	g_assert_nonnull(strstr(msg, "repairing the filesystem while mounting"));
	g_free(msg);

	/* the next mount repairs it */
	m = do_mount_opts(f, &o, 0, NULL);
	g_assert_cmpuint(m->load.repaired, ==, 1);
	g_assert_cmpuint(attr_of(m, ino).nlink, ==, 1);
	g_assert_cmpint(mount_close(m), ==, 0);
}

int main(int argc, char **argv)
{
	g_test_init(&argc, &argv, NULL);

#define ADD(path, setup, fn) g_test_add(path, struct fx, NULL, setup, fn, teardown)
	ADD("/meta/fresh-format", setup_64m, test_fresh_format);
	ADD("/meta/remount", setup_64m, test_remount);
	ADD("/meta/replay", setup_64m, test_replay);
	ADD("/meta/torn-tail", setup_64m, test_torn_tail);
	ADD("/meta/rollover", setup_64m, test_rollover);
	ADD("/meta/lease", setup_64m, test_lease);
	ADD("/meta/lease-default-timing", setup_64m, test_lease_default_timing);
	ADD("/meta/format-rules", setup_64m, test_format_rules);
	ADD("/meta/enospc", setup_16m, test_enospc);
	ADD("/meta/bigdir", setup_512m, test_bigdir);
	ADD("/meta/fsck", setup_64m, test_fsck);
	ADD("/meta/fsck-lost-found", setup_64m, test_fsck_lost_found);
	ADD("/meta/fsck-older-slot", setup_64m, test_fsck_older_slot);
	ADD("/meta/repair-fails", setup_64m, test_repair_fails);
	ADD("/meta/rename", setup_64m, test_rename);
	ADD("/meta/dir-model", setup_64m, test_dir_model);
	ADD("/meta/xattr", setup_64m, test_xattr);
	ADD("/meta/names", setup_64m, test_names);
	ADD("/meta/sparse", setup_16m, test_sparse);
	ADD("/meta/setattr", setup_64m, test_setattr);
	ADD("/meta/orphans", setup_64m, test_orphan_recovery);
	ADD("/meta/dot-lookups", setup_64m, test_dot_lookups);
	ADD("/meta/csum-replay", setup_64m, test_csum_replay);
	ADD("/meta/csum-unwritten", setup_64m, test_csum_unwritten);
	ADD("/meta/v1-upgrade", setup_64m, test_v1_upgrade);
	ADD("/meta/v2-upgrade", setup_64m, test_v2_upgrade);
#undef ADD
	return g_test_run();
}
