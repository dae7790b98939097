// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * swap_on.c - rmemfs-swap on MOUNTPOINT SIZE [--priority N].
 *
 * First the checks, which change nothing: the mount's daemon runs with
 * `-o swap` (its stats xattr says "swap on"), this mount has no swap on yet,
 * the pool has room. Then, under the swap lock (swap_lock.h), the steps, each
 * undone in reverse order when a later one fails: create MOUNT/.rmemfs-swap,
 * allocate and write it whole, attach it to a loop device with direct I/O
 * (swap_loop.h says why), mkswap, swapon(2). SIGINT, SIGTERM and SIGHUP do
 * not kill the command half-way: they make it stop at the next step and undo.
 */
#define G_LOG_DOMAIN "rmemfs-swap"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <sys/swap.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "swap_cmd.h"
#include "swap_lock.h"
#include "swap_loop.h"
#include "units.h"

#define FILL_CHUNK (1U << 20) /* bytes per write of zeros */
#define MKSWAP_LABEL "rmemfs"

static volatile sig_atomic_t interrupted;

static void on_signal(int sig)
{
	interrupted = sig;
}

static void catch_signals(void)
{
	static const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
	struct sigaction sa;
	unsigned int i;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal; /* no SA_RESTART: a long write returns early */
	sigemptyset(&sa.sa_mask);
	for (i = 0; i < G_N_ELEMENTS(sigs); i++)
		sigaction(sigs[i], &sa, NULL);
}

/* 0, or -EINTR with a message once a signal came */
static int check_interrupted(const char *before)
{
	if (!interrupted)
		return 0;
	SWAP_ERR("%s: stopped before %s, undoing what was done", strsignal(interrupted), before);
	return -EINTR;
}

/* the stats xattr of the mount root; its counters move, so leave room for growth */
static int read_stats(const char *mnt, char **out)
{
	ssize_t len;
	int tries, rc;
	char *buf;

	for (tries = 0; tries < 3; tries++) {
		len = getxattr(mnt, SWAP_STATS_XATTR, NULL, 0);
		if (len < 0)
			return -errno;
		buf = g_malloc((size_t)len + 4096);
		len = getxattr(mnt, SWAP_STATS_XATTR, buf, (size_t)len + 4095);
		if (len >= 0) {
			buf[len] = '\0';
			*out = buf;
			return 0;
		}
		rc = -errno;
		g_free(buf);
		if (rc != -ERANGE)
			return rc;
	}
	return -ERANGE;
}

/* was the daemon started with -o swap (a stats line "swap on")? */
static int check_swap_mode(const char *mnt)
{
	char *stats = NULL;
	gchar **lines;
	bool on = false;
	int i, rc;

	rc = read_stats(mnt, &stats);
	if (rc < 0 && rc != -ENODATA && rc != -ENOTSUP) {
		SWAP_ERR("getxattr %s %s: %s", mnt, SWAP_STATS_XATTR, g_strerror(-rc));
		return rc;
	}
	lines = g_strsplit(stats ? stats : "", "\n", -1);
	for (i = 0; lines[i]; i++) {
		on = on || strcmp(lines[i], "swap on") == 0;
		/* what the daemon could not do (no CAP_SYS_RESOURCE): said, not refused */
		if (strcmp(lines[i], "swap_io_flusher no") == 0)
			fprintf(stderr, "rmemfs-swap: warning: the daemon of %s is not PR_SET_IO_FLUSHER: under memory pressure its allocations may wait for swap I/O\n",
				mnt);
		if (strcmp(lines[i], "swap_oom_protected no") == 0)
			fprintf(stderr, "rmemfs-swap: warning: the daemon of %s is not protected from the OOM killer (oom_score_adj)\n",
				mnt);
	}
	g_strfreev(lines);
	g_free(stats);
	if (on)
		return 0;
	SWAP_ERR("%s: the rmemfs daemon was not started with -o swap; remount with -o swap (a "
		 "daemon that does not lock its memory can deadlock serving swap: a swap-out may "
		 "wait for memory that only a swap-out frees)",
		 mnt);
	return -EPERM;
}

static int check_not_on(GPtrArray *mounts, const char *mnt)
{
	const struct swap_device *d;
	GPtrArray *devices;
	int rc;

	rc = swap_find_devices(mounts, mnt, 0, &devices);
	if (rc < 0)
		return rc;
	if (devices->len) {
		d = g_ptr_array_index(devices, 0);
		SWAP_ERR("swap is already on for %s: %s (rmemfs-swap off %s turns it off)", mnt,
			 d->device, mnt);
		rc = -EEXIST;
	}
	g_ptr_array_unref(devices);
	return rc;
}

static int check_room(const char *mnt, uint64_t size)
{
	char have[32], want[32];
	struct statvfs sv;
	uint64_t avail;

	if (statvfs(mnt, &sv) < 0) {
		int rc = -errno;

		SWAP_ERR("statvfs %s: %s", mnt, g_strerror(-rc));
		return rc;
	}
	avail = (uint64_t)sv.f_bavail * sv.f_frsize;
	if (avail >= size)
		return 0;
	units_format_size(avail, have, sizeof(have));
	units_format_size(size, want, sizeof(want));
	SWAP_ERR("not enough free space in the pool of %s: %s free, %s asked for", mnt, have, want);
	return -ENOSPC;
}

/*
 * Allocate the file and write zeros over every byte, then fsync. fallocate alone leaves
 * blocks that were reserved but never written; writing them all now means a swap-out later
 * only overwrites blocks the daemon already has, and never makes it allocate: the daemon
 * serving swap must not need anything it could have to wait for.
 */
static int fill(int fd, const char *file, uint64_t size)
{
	uint64_t off = 0;
	void *zeros;
	ssize_t n;
	int rc = 0;

	if (fallocate(fd, 0, 0, (off_t)size) < 0) {
		rc = -errno;
		SWAP_ERR("fallocate %s: %s", file, g_strerror(-rc));
		return rc;
	}
	if (posix_memalign(&zeros, (size_t)sysconf(_SC_PAGESIZE), FILL_CHUNK) != 0) {
		SWAP_ERR("no memory for a buffer of zeros");
		return -ENOMEM;
	}
	memset(zeros, 0, FILL_CHUNK);
	while (off < size && rc == 0) {
		size_t len = (size_t)MIN((uint64_t)FILL_CHUNK, size - off);

		n = pwrite(fd, zeros, len, (off_t)off);
		if (n > 0)
			off += (uint64_t)n;
		else if (n < 0 && errno != EINTR)
			rc = -errno;
		else if (n == 0)
			rc = -EIO;
		if (rc == 0)
			rc = check_interrupted("the file was written");
		else if (rc != -EINTR)
			SWAP_ERR("write %s at %llu: %s", file, (unsigned long long)off,
				 g_strerror(-rc));
	}
	free(zeros);
	if (rc == 0 && fsync(fd) < 0) {
		rc = -errno;
		SWAP_ERR("fsync %s: %s", file, g_strerror(-rc));
	}
	return rc;
}

/* mkswap -L rmemfs DEVICE: /sbin/mkswap, else mkswap from PATH */
static int run_mkswap(const char *device)
{
	const char *prog = access("/sbin/mkswap", X_OK) == 0 ? "/sbin/mkswap" : "mkswap";
	const char *argv[] = {prog, "-L", MKSWAP_LABEL, device, NULL};
	char *out = NULL, *err = NULL;
	GError *error = NULL;
	int status, rc = 0;

	if (!g_spawn_sync(NULL, (char **)argv, NULL, G_SPAWN_SEARCH_PATH, NULL, NULL, &out, &err,
			  &status, &error)) {
		SWAP_ERR("cannot run mkswap: %s", error->message);
		g_error_free(error);
		return -ENOENT;
	}
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		g_strdelimit(g_strstrip(err), "\n", ' ');
		SWAP_ERR("mkswap %s failed (status %d): %s", device,
			 WIFEXITED(status) ? WEXITSTATUS(status) : -1, err[0] ? err : "no message");
		rc = -EIO;
	}
	g_free(out);
	g_free(err);
	return rc;
}

static int do_swapon(const char *device, int priority)
{
	int flags = 0, rc;

	if (priority >= 0)
		flags =
		    SWAP_FLAG_PREFER | ((priority << SWAP_FLAG_PRIO_SHIFT) & SWAP_FLAG_PRIO_MASK);
	if (swapon(device, flags) == 0)
		return 0;
	rc = -errno;
	SWAP_ERR("swapon %s: %s", device, g_strerror(-rc));
	return rc;
}

/* the success line, with the priority the kernel gave when none was asked for */
static void report(GPtrArray *mounts, const struct swap_mount *m, dev_t rdev, const char *device,
		   uint64_t size)
{
	char size_text[32], prio[16] = "?";
	GPtrArray *devices;

	if (swap_find_devices(mounts, NULL, rdev, &devices) == 0) {
		if (devices->len)
			snprintf(prio, sizeof(prio), "%d",
				 ((struct swap_device *)g_ptr_array_index(devices, 0))->priority);
		g_ptr_array_unref(devices);
	}
	units_format_size(size, size_text, sizeof(size_text));
	printf("rmemfs-swap: %s: %s of swap on %s (%s), priority %s\n", device, size_text,
	       m->mount_point, m->source, prio);
}

int swap_on(const struct swap_on_args *a)
{
	const struct swap_mount *m;
	GPtrArray *mounts;
	char device[32], *file = NULL;
	int lock_fd = -1, fd, rc;
	dev_t rdev = 0;

	rc = swap_cmd_mount(a->mountpoint, &mounts, &m);
	if (rc < 0)
		goto out;
	rc = check_swap_mode(m->mount_point);
	if (rc < 0)
		goto out;
	rc = swap_lock_take(a->lock_wait_s, &lock_fd);
	if (rc < 0)
		goto out;
	rc = check_not_on(mounts, m->mount_point);
	if (rc == 0)
		rc = check_room(m->mount_point, a->size);
	if (rc < 0)
		goto out_unlock;

	catch_signals();
	file = swap_cmd_file(m->mount_point);
	fd = open(file, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0) {
		rc = -errno;
		if (rc == -EEXIST)
			SWAP_ERR("%s exists already (left by an earlier run? rmemfs-swap off %s "
				 "removes it)",
				 file, m->mount_point);
		else
			SWAP_ERR("create %s: %s", file, g_strerror(-rc));
		goto out_unlock;
	}
	close(fd);
	/* direct I/O from here on: the zeros and later the loop device bypass the page cache */
	fd = open(file, O_RDWR | O_DIRECT | O_CLOEXEC);
	if (fd < 0) {
		rc = -errno;
		SWAP_ERR("open %s with O_DIRECT: %s", file, g_strerror(-rc));
		goto out_unlink;
	}
	rc = fill(fd, file, a->size);
	if (rc == 0)
		rc = check_interrupted("the loop device was attached");
	if (rc == 0)
		rc = swap_loop_attach(fd, file, device, sizeof(device), &rdev);
	close(fd); /* the loop device holds the file now */
	if (rc < 0)
		goto out_unlink;

	rc = check_interrupted("mkswap");
	if (rc == 0)
		rc = run_mkswap(device);
	if (rc == 0)
		rc = check_interrupted("swapon");
	if (rc == 0)
		rc = do_swapon(device, a->priority);
	if (rc < 0)
		goto out_detach;
	report(mounts, m, rdev, device, a->size);
	goto out_unlock;

out_detach:
	swap_loop_detach(device, rdev);
out_unlink:
	swap_cmd_unlink(file);
out_unlock:
	swap_lock_release(lock_fd);
out:
	g_free(file);
	if (mounts)
		g_ptr_array_unref(mounts);
	return rc;
}
