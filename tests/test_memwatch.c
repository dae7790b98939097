// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test_memwatch.c - memwatch.h against made-up /proc and cgroup trees: the
 * headroom with no cgroup limit, under a v1 and a cgroup2 limit (the lowest
 * on the way up), and after the process moves to another cgroup.
 */
#include <errno.h>

#include <glib.h>
#include <glib/gstdio.h>

#include "memwatch.h"

#define MIB (1ULL << 20)

struct fx {
	char *root;
};

static void put(const struct fx *f, const char *rel, const char *text)
{
	char *path = g_build_filename(f->root, rel, NULL);
	char *dir = g_path_get_dirname(path);

	g_assert_cmpint(g_mkdir_with_parents(dir, 0755), ==, 0);
	g_assert_true(g_file_set_contents(path, text, -1, NULL));
	g_free(dir);
	g_free(path);
}

/* 8 GiB of RAM, 6 GiB available */
static void meminfo(const struct fx *f)
{
	put(f, "proc/meminfo", "MemTotal:        8388608 kB\nMemFree:  100 kB\n"
			       "MemAvailable:    6291456 kB\nBuffers: 1 kB\n");
}

static void setup(struct fx *f, gconstpointer data)
{
	f->root = g_dir_make_tmp("memwatch-XXXXXX", NULL);
	g_assert_nonnull(f->root);
	meminfo(f);
}

static void rm_tree(const char *path)
{
	GDir *d = g_dir_open(path, 0, NULL);
	const char *name;

	while (d && (name = g_dir_read_name(d))) {
		char *p = g_build_filename(path, name, NULL);

		if (g_file_test(p, G_FILE_TEST_IS_DIR))
			rm_tree(p);
		else
			g_unlink(p);
		g_free(p);
	}
	if (d)
		g_dir_close(d);
	g_rmdir(path);
}

static void teardown(struct fx *f, gconstpointer data)
{
	rm_tree(f->root);
	g_free(f->root);
}

static struct memwatch_reading reading(const struct fx *f)
{
	struct memwatch_reading r;
	struct memwatch *w;

	g_assert_cmpint(memwatch_open(f->root, &w), ==, 0);
	g_assert_cmpint(memwatch_read(w, &r), ==, 0);
	memwatch_close(w);
	return r;
}

static void test_field(struct fx *f, gconstpointer data)
{
	uint64_t v = 0;

	g_assert_cmpint(memwatch_field("a 1\nab: 22\nabc\t333\n", "ab", &v), ==, 0);
	g_assert_cmpuint(v, ==, 22);
	g_assert_cmpint(memwatch_field("a 1\nab: 22\nabc\t333\n", "abc", &v), ==, 0);
	g_assert_cmpuint(v, ==, 333);
	g_assert_cmpint(memwatch_field("a 1\n", "b", &v), ==, -ENOENT);
	g_assert_cmpint(memwatch_field("b x\n", "b", &v), ==, -EINVAL);
}

static void test_no_cgroup(struct fx *f, gconstpointer data)
{
	struct memwatch_reading r;

	put(f, "proc/self/cgroup", "0::/\n");
	r = reading(f);
	g_assert_cmpuint(r.limit, ==, 8192 * MIB);
	g_assert_cmpuint(r.headroom, ==, 6144 * MIB);
	g_assert_cmpuint(r.used, ==, 2048 * MIB);
}

static void v1_group(const struct fx *f, const char *name, uint64_t limit, uint64_t usage,
		     uint64_t inactive)
{
	char *stat = g_strdup_printf("cache 1\nrss 2\nhierarchical_memory_limit %" G_GUINT64_FORMAT
				     "\ntotal_rss 5\ntotal_inactive_file %" G_GUINT64_FORMAT "\n",
				     limit, inactive);
	char *use = g_strdup_printf("%" G_GUINT64_FORMAT "\n", usage);
	char *p1 = g_strdup_printf("sys/fs/cgroup/memory/%s/memory.stat", name);
	char *p2 = g_strdup_printf("sys/fs/cgroup/memory/%s/memory.usage_in_bytes", name);

	put(f, p1, stat);
	put(f, p2, use);
	g_free(stat);
	g_free(use);
	g_free(p1);
	g_free(p2);
}

static void test_v1(struct fx *f, gconstpointer data)
{
	struct memwatch_reading r;
	struct memwatch *w;

	/* 1 GiB limit, 900 MiB used of which 100 MiB inactive page cache */
	v1_group(f, "a/b", 1024 * MIB, 900 * MIB, 100 * MIB);
	/* a limit above RAM is no limit */
	v1_group(f, "big", 9223372036854771712ULL, 900 * MIB, 0);
	put(f, "proc/self/cgroup", "5:cpu:/\n4:memory:/a/b\n0::/\n");
	r = reading(f);
	g_assert_cmpuint(r.limit, ==, 1024 * MIB);
	g_assert_cmpuint(r.headroom, ==, 224 * MIB);
	/* over the limit with nothing to drop: no headroom */
	v1_group(f, "a/b", 1024 * MIB, 1100 * MIB, 10 * MIB);
	g_assert_cmpuint(reading(f).headroom, ==, 0);

	/* one handle across a move to another cgroup */
	v1_group(f, "a/b", 1024 * MIB, 900 * MIB, 100 * MIB);
	g_assert_cmpint(memwatch_open(f->root, &w), ==, 0);
	g_assert_cmpint(memwatch_read(w, &r), ==, 0);
	g_assert_cmpuint(r.headroom, ==, 224 * MIB);
	put(f, "proc/self/cgroup", "4:memory,cpu:/big\n");
	g_assert_cmpint(memwatch_read(w, &r), ==, 0);
	g_assert_cmpuint(r.limit, ==, 8192 * MIB);
	g_assert_cmpuint(r.headroom, ==, 6144 * MIB);
	memwatch_close(w);
}

static void test_v2(struct fx *f, gconstpointer data)
{
	struct memwatch_reading r;
	char *mountinfo = g_strdup_printf("22 1 0:20 / /proc rw - proc proc rw\n"
					  "30 22 0:26 / /sys/fs/cgroup/unified rw,nosuid - cgroup2 cgroup2 rw\n");

	put(f, "proc/self/mountinfo", mountinfo);
	put(f, "proc/self/cgroup", "0::/svc/job\n");
	/* the parent's 512 MiB is the tighter limit */
	put(f, "sys/fs/cgroup/unified/svc/memory.max", "536870912\n");
	put(f, "sys/fs/cgroup/unified/svc/memory.current", "419430400\n"); /* 400 MiB */
	put(f, "sys/fs/cgroup/unified/svc/memory.stat", "anon 1\ninactive_file 52428800\n");
	put(f, "sys/fs/cgroup/unified/svc/job/memory.max", "max\n");
	put(f, "sys/fs/cgroup/unified/svc/job/memory.current", "1\n");
	put(f, "sys/fs/cgroup/unified/svc/job/memory.stat", "inactive_file 0\n");
	r = reading(f);
	g_assert_cmpuint(r.limit, ==, 512 * MIB);
	g_assert_cmpuint(r.headroom, ==, 162 * MIB);
	g_free(mountinfo);
}

int main(int argc, char **argv)
{
	g_test_init(&argc, &argv, NULL);
#define ADD(name, fn) g_test_add(name, struct fx, NULL, setup, fn, teardown)
	ADD("/memwatch/field", test_field);
	ADD("/memwatch/no-cgroup", test_no_cgroup);
	ADD("/memwatch/v1", test_v1);
	ADD("/memwatch/v2", test_v2);
#undef ADD
	return g_test_run();
}
