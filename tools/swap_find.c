// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * swap_find.c - the mounts, swap areas and loop devices of the machine (see
 * swap_find.h).
 *
 * Paths in /proc/self/mountinfo and /proc/swaps escape blanks, tabs, newlines
 * and backslashes as \ooo; unescape() undoes that. A loop device's backing
 * file is named by the kernel's d_path(), which appends " (deleted)" once the
 * file is unlinked; such a file still lies on its mount, so the suffix is
 * ignored when looking for the mount.
 */
#define G_LOG_DOMAIN "rmemfs-swap"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "swap_find.h"

#define DELETED_SUFFIX " (deleted)"

/* a whole (small, procfs or sysfs) text file */
static int read_text(const char *path, char **out)
{
	GString *s = g_string_new(NULL);
	char buf[4096];
	ssize_t n;
	int fd, rc = 0;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		g_string_free(s, TRUE);
		return -errno;
	}
	while ((n = read(fd, buf, sizeof(buf))) != 0) {
		if (n < 0) {
			if (errno == EINTR)
				continue;
			rc = -errno;
			break;
		}
		g_string_append_len(s, buf, n);
	}
	close(fd);
	if (rc < 0) {
		g_string_free(s, TRUE);
		return rc;
	}
	*out = g_string_free(s, FALSE);
	return 0;
}

static int read_failed(const char *what, int rc)
{
	g_printerr("rmemfs-swap: read %s: %s\n", what, g_strerror(-rc));
	return rc;
}

/* one line of a table into an element, or NULL to leave the line out */
typedef void *(*table_parse_fn)(const char *line, void *ctx);

/*
 * A kernel table's elements (its lines after the first skip, parsed) in a GPtrArray that frees
 * them with free_fn; 0, or -errno after saying which table could not be read.
 */
static int read_table(const char *path, unsigned int skip, table_parse_fn parse, void *ctx,
		      GDestroyNotify free_fn, GPtrArray **out)
{
	gchar **lines;
	char *text;
	void *e;
	int rc;
	unsigned int i;

	rc = read_text(path, &text);
	if (rc < 0)
		return read_failed(path, rc);
	lines = g_strsplit(text, "\n", -1);
	g_free(text);
	*out = g_ptr_array_new_with_free_func(free_fn);
	for (i = 0; lines[i]; i++) {
		e = i >= skip ? parse(lines[i], ctx) : NULL;
		if (e)
			g_ptr_array_add(*out, e);
	}
	g_strfreev(lines);
	return 0;
}

static char *unescape(const char *s)
{
	GString *out = g_string_sized_new(strlen(s));

	for (; *s; s++) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' &&
		    s[3] >= '0' && s[3] <= '7') {
			g_string_append_c(
			    out, (char)((s[1] - '0') << 6 | (s[2] - '0') << 3 | (s[3] - '0')));
			s += 3;
		} else {
			g_string_append_c(out, *s);
		}
	}
	return g_string_free(out, FALSE);
}

static void mount_free(gpointer p)
{
	struct swap_mount *m = p;

	g_free(m->mount_point);
	g_free(m->fstype);
	g_free(m->source);
	g_free(m);
}

/* "36 35 98:0 /root /mnt rw,noatime master:1 - ext3 /dev/root rw" (proc(5)) */
static void *mount_parse(const char *line, void *ctx G_GNUC_UNUSED)
{
	gchar **f = g_strsplit(line, " ", -1);
	struct swap_mount *m = NULL;
	unsigned int n = g_strv_length(f), sep;

	for (sep = 6; sep < n && strcmp(f[sep], "-") != 0; sep++)
		;
	if (n >= 5 && sep + 2 < n) {
		m = g_new0(struct swap_mount, 1);
		m->mount_point = unescape(f[4]);
		m->fstype = unescape(f[sep + 1]);
		m->source = unescape(f[sep + 2]);
	}
	g_strfreev(f);
	return m;
}

int swap_find_mounts(GPtrArray **out)
{
	return read_table("/proc/self/mountinfo", 0, mount_parse, NULL, mount_free, out);
}

/* is the first len bytes of path inside mount point mp? */
static bool path_under(const char *path, size_t len, const char *mp)
{
	size_t mlen = strlen(mp);

	if (strcmp(mp, "/") == 0)
		return path[0] == '/';
	return mlen <= len && memcmp(path, mp, mlen) == 0 && (mlen == len || path[mlen] == '/');
}

const struct swap_mount *swap_find_mount_of(GPtrArray *mounts, const char *path)
{
	const struct swap_mount *best = NULL;
	size_t len = strlen(path), best_len = 0;
	unsigned int i;

	if (g_str_has_suffix(path, DELETED_SUFFIX))
		len -= strlen(DELETED_SUFFIX);
	for (i = 0; i < mounts->len; i++) {
		const struct swap_mount *m = g_ptr_array_index(mounts, i);
		size_t mlen = strlen(m->mount_point);

		if (path_under(path, len, m->mount_point) && mlen >= best_len) {
			best = m;
			best_len = mlen;
		}
	}
	return best;
}

const struct swap_mount *swap_find_rmemfs_root(GPtrArray *mounts, const char *path)
{
	const struct swap_mount *m = swap_find_mount_of(mounts, path);

	if (!m || strcmp(m->mount_point, path) != 0 || strcmp(m->fstype, SWAP_FIND_FSTYPE) != 0)
		return NULL;
	return m;
}

int swap_find_loop_backing(dev_t rdev, char **out)
{
	char path[96], *text;
	int rc;

	snprintf(path, sizeof(path), "/sys/dev/block/%u:%u/loop/backing_file", major(rdev),
		 minor(rdev));
	rc = read_text(path, &text);
	if (rc < 0)
		return rc == -ENOTDIR ? -ENOENT : rc;
	g_strchomp(text);
	if (!text[0]) {
		g_free(text);
		return -ENOENT;
	}
	*out = text;
	return 0;
}

static void device_free(gpointer p)
{
	struct swap_device *d = p;

	g_free(d->device);
	g_free(d->backing_file);
	g_free(d->mount_point);
	g_free(d->server);
	g_free(d);
}

/* "/dev/loop3  partition  1048572  0  -2" (sizes in KiB); NULL when not rmemfs-backed */
static struct swap_device *device_parse(GPtrArray *mounts, const char *line)
{
	gchar **f = g_strsplit_set(line, " \t", -1);
	const struct swap_mount *m;
	struct swap_device *d = NULL;
	char *fields[5], *backing = NULL, *device;
	unsigned int i, n = 0;
	struct stat st;

	for (i = 0; f[i] && n < G_N_ELEMENTS(fields); i++) {
		if (f[i][0])
			fields[n++] = f[i];
	}
	if (n < G_N_ELEMENTS(fields)) {
		g_strfreev(f);
		return NULL;
	}
	device = unescape(fields[0]);
	if (stat(device, &st) < 0 || !S_ISBLK(st.st_mode) ||
	    swap_find_loop_backing(st.st_rdev, &backing) < 0)
		goto out;
	m = swap_find_mount_of(mounts, backing);
	if (!m || strcmp(m->fstype, SWAP_FIND_FSTYPE) != 0)
		goto out;
	d = g_new0(struct swap_device, 1);
	d->device = g_steal_pointer(&device);
	d->rdev = st.st_rdev;
	d->size = g_ascii_strtoull(fields[2], NULL, 10) << 10;
	d->used = g_ascii_strtoull(fields[3], NULL, 10) << 10;
	d->priority = (int)g_ascii_strtoll(fields[4], NULL, 10);
	d->backing_file = g_steal_pointer(&backing);
	d->mount_point = g_strdup(m->mount_point);
	d->server = g_strdup(m->source);
out:
	g_free(backing);
	g_free(device);
	g_strfreev(f);
	return d;
}

/* which of the rmemfs-backed swap areas swap_find_devices keeps */
struct device_filter {
	GPtrArray *mounts;
	const char *mount_point; /* NULL: any */
	dev_t rdev; /* 0: any */
};

static void *device_parse_kept(const char *line, void *ctx)
{
	const struct device_filter *f = ctx;
	struct swap_device *d = device_parse(f->mounts, line);

	if (d && ((f->mount_point && strcmp(d->mount_point, f->mount_point) != 0) ||
		  (f->rdev && d->rdev != f->rdev))) {
		device_free(d);
		return NULL;
	}
	return d;
}

int swap_find_devices(GPtrArray *mounts, const char *mount_point, dev_t rdev, GPtrArray **out)
{
	struct device_filter f = { .mounts = mounts, .mount_point = mount_point, .rdev = rdev };

	/* line 0 is the header */
	return read_table("/proc/swaps", 1, device_parse_kept, &f, device_free, out);
}

int swap_find_loops_of(const char *file, GArray **out)
{
	GArray *found;
	struct dirent *e;
	DIR *dir;

	dir = opendir("/sys/block");
	if (!dir)
		return read_failed("/sys/block", -errno);
	found = g_array_new(FALSE, FALSE, sizeof(dev_t));
	while ((e = readdir(dir))) {
		char path[300], *text = NULL, *backing = NULL;
		unsigned int maj, min;
		dev_t rdev;

		if (strncmp(e->d_name, "loop", 4) != 0)
			continue;
		snprintf(path, sizeof(path), "/sys/block/%s/dev", e->d_name);
		if (read_text(path, &text) < 0)
			continue;
		if (sscanf(text, "%u:%u", &maj, &min) == 2) {
			rdev = makedev(maj, min);
			if (swap_find_loop_backing(rdev, &backing) == 0 &&
			    strcmp(backing, file) == 0)
				g_array_append_val(found, rdev);
		}
		g_free(backing);
		g_free(text);
	}
	closedir(dir);
	*out = found;
	return 0;
}
