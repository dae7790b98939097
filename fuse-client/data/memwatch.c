// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * memwatch.c - memory headroom of this process (memwatch.h).
 */
#define G_LOG_DOMAIN "rmemfs-cache"

#include "memwatch.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <glib.h>

#define MW_TEXT 8192 /* the largest file read (a v1 memory.stat is ~3 KiB) */

enum mw_kind {
	MW_NONE, /* no memory cgroup with a limit below RAM */
	MW_V1,
	MW_V2,
};

struct memwatch {
	char *root;
	int meminfo_fd;
	enum mw_kind kind;
	int usage_fd; /* v1 memory.usage_in_bytes, v2 memory.current */
	int stat_fd; /* memory.stat */
	uint64_t cg_limit; /* v2: the lowest memory.max on the way up; v1: read each time */
	char cgroup[1024]; /* /proc/self/cgroup as last resolved */
};

int memwatch_field(const char *text, const char *name, uint64_t *value)
{
	size_t n = strlen(name);
	const char *p = text;

	while (p && *p) {
		if (!strncmp(p, name, n) && (p[n] == ':' || p[n] == ' ' || p[n] == '\t')) {
			char *end;

			p += n + 1;
			while (*p == ' ' || *p == '\t')
				p++;
			errno = 0;
			*value = strtoull(p, &end, 10);
			return end == p || errno ? -EINVAL : 0;
		}
		p = strchr(p, '\n');
		if (p)
			p++;
	}
	return -ENOENT;
}

/* the whole of fd (from offset 0) as a NUL-terminated string in buf */
static int read_fd(int fd, char *buf, size_t cap)
{
	ssize_t n = pread(fd, buf, cap - 1, 0);

	if (n < 0)
		return -errno;
	buf[n] = '\0';
	return 0;
}

static int read_path(const char *path, char *buf, size_t cap)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	int rc;

	if (fd < 0)
		return -errno;
	rc = read_fd(fd, buf, cap);
	close(fd);
	return rc;
}

/* a number file ("max" is UINT64_MAX) */
static int read_number(const char *path, uint64_t *v)
{
	char buf[64];
	int rc = read_path(path, buf, sizeof(buf));

	if (rc < 0)
		return rc;
	if (!strncmp(buf, "max", 3)) {
		*v = UINT64_MAX;
		return 0;
	}
	*v = strtoull(buf, NULL, 10);
	return 0;
}

static void cg_close(struct memwatch *w)
{
	if (w->usage_fd >= 0)
		close(w->usage_fd);
	if (w->stat_fd >= 0)
		close(w->stat_fd);
	w->usage_fd = w->stat_fd = -1;
	w->kind = MW_NONE;
}

static int cg_open_files(struct memwatch *w, const char *dir, const char *usage)
{
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/%s", dir, usage);
	w->usage_fd = open(path, O_RDONLY | O_CLOEXEC);
	snprintf(path, sizeof(path), "%s/memory.stat", dir);
	w->stat_fd = open(path, O_RDONLY | O_CLOEXEC);
	if (w->usage_fd < 0 || w->stat_fd < 0) {
		cg_close(w);
		return -ENOENT;
	}
	return 0;
}

/* the cgroup2 mount point, from mountinfo (field 5; the fstype after " - ") */
static int cg2_mount(struct memwatch *w, char *out, size_t cap)
{
	char path[PATH_MAX], *text = NULL, *line, *save = NULL;
	int rc = -ENOENT;

	snprintf(path, sizeof(path), "%s/proc/self/mountinfo", w->root);
	if (!g_file_get_contents(path, &text, NULL, NULL))
		return -ENOENT;
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char mnt[512];
		const char *sep = strstr(line, " - ");

		if (!sep || strncmp(sep + 3, "cgroup2 ", 8))
			continue;
		if (sscanf(line, "%*s %*s %*s %*s %511s", mnt) != 1)
			continue;
		snprintf(out, cap, "%s%s", w->root, mnt);
		rc = 0;
		break;
	}
	g_free(text);
	return rc;
}

/* cgroup2 at rel: the lowest memory.max from there up to the root, and its files */
static void cg2_resolve(struct memwatch *w, const char *rel)
{
	char mnt[PATH_MAX], dir[PATH_MAX], best[PATH_MAX], path[PATH_MAX + 16];
	uint64_t limit = UINT64_MAX, v;
	char *slash;

	if (cg2_mount(w, mnt, sizeof(mnt)) < 0)
		return;
	snprintf(dir, sizeof(dir), "%s%s", mnt, rel);
	while (strlen(dir) > strlen(mnt)) {
		snprintf(path, sizeof(path), "%s/memory.max", dir);
		if (read_number(path, &v) == 0 && v < limit) {
			limit = v;
			g_strlcpy(best, dir, sizeof(best));
		}
		slash = strrchr(dir, '/');
		if (!slash)
			break;
		*slash = '\0';
	}
	if (limit == UINT64_MAX || cg_open_files(w, best, "memory.current") < 0)
		return;
	w->cg_limit = limit;
	w->kind = MW_V2;
}

/* read /proc/self/cgroup; on a change, find the memory cgroup again */
static void cg_refresh(struct memwatch *w)
{
	char path[PATH_MAX], text[sizeof(w->cgroup)], *line, *save = NULL;
	char v2[512] = "";

	snprintf(path, sizeof(path), "%s/proc/self/cgroup", w->root);
	if (read_path(path, text, sizeof(text)) < 0 || !strcmp(text, w->cgroup))
		return;
	g_strlcpy(w->cgroup, text, sizeof(w->cgroup));
	cg_close(w);
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *ctl = strchr(line, ':'), *rel;

		if (!ctl || !(rel = strchr(ctl + 1, ':')))
			continue;
		*rel++ = '\0';
		ctl++;
		if (!*ctl) {
			g_strlcpy(v2, rel, sizeof(v2));
			continue;
		}
		if (strcmp(ctl, "memory") && !strstr(ctl, "memory,") && !strstr(ctl, ",memory"))
			continue;
		snprintf(path, sizeof(path), "%s/sys/fs/cgroup/memory%s", w->root, rel);
		if (cg_open_files(w, path, "memory.usage_in_bytes") == 0)
			w->kind = MW_V1;
		return; /* the v1 memory controller: cgroup2 has no memory there */
	}
	if (*v2)
		cg2_resolve(w, v2);
}

int memwatch_open(const char *root, struct memwatch **out)
{
	struct memwatch *w = g_new0(struct memwatch, 1);
	char path[PATH_MAX];

	w->root = g_strdup(root ? root : "");
	w->usage_fd = w->stat_fd = -1;
	snprintf(path, sizeof(path), "%s/proc/meminfo", w->root);
	w->meminfo_fd = open(path, O_RDONLY | O_CLOEXEC);
	if (w->meminfo_fd < 0) {
		int rc = -errno;

		g_free(w->root);
		g_free(w);
		return rc;
	}
	cg_refresh(w);
	*out = w;
	return 0;
}

void memwatch_close(struct memwatch *w)
{
	if (!w)
		return;
	cg_close(w);
	close(w->meminfo_fd);
	g_free(w->root);
	g_free(w);
}

/* the cgroup's limit and headroom; false when there is none to go by */
static bool cg_read(struct memwatch *w, uint64_t *limit, uint64_t *headroom)
{
	char text[MW_TEXT];
	uint64_t usage, inactive = 0;

	if (w->kind == MW_NONE || read_fd(w->usage_fd, text, sizeof(text)) < 0)
		return false;
	usage = strtoull(text, NULL, 10);
	if (read_fd(w->stat_fd, text, sizeof(text)) < 0)
		return false;
	if (w->kind == MW_V1) {
		if (memwatch_field(text, "hierarchical_memory_limit", limit) < 0)
			return false;
		memwatch_field(text, "total_inactive_file", &inactive);
	} else {
		*limit = w->cg_limit;
		memwatch_field(text, "inactive_file", &inactive);
	}
	*headroom = usage - MIN(usage, inactive) >= *limit ? 0 : *limit - (usage - MIN(usage, inactive));
	return true;
}

int memwatch_read(struct memwatch *w, struct memwatch_reading *out)
{
	char text[MW_TEXT];
	uint64_t total, avail, limit, headroom;
	int rc;

	rc = read_fd(w->meminfo_fd, text, sizeof(text));
	if (rc < 0)
		return rc;
	if (memwatch_field(text, "MemTotal", &total) < 0 ||
	    memwatch_field(text, "MemAvailable", &avail) < 0)
		return -EINVAL;
	out->limit = total * 1024;
	out->headroom = avail * 1024;
	cg_refresh(w);
	if (cg_read(w, &limit, &headroom) && limit < out->limit) {
		out->limit = limit;
		out->headroom = MIN(out->headroom, headroom);
	}
	out->used = out->limit - MIN(out->limit, out->headroom);
	return 0;
}
