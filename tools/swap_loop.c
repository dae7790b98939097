// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * swap_loop.c - a file on a loop device with direct I/O, and off again (see
 * swap_loop.h).
 *
 * LOOP_CTL_GET_FREE only names a free device; another losetup may configure
 * it first, and LOOP_CONFIGURE then fails with EBUSY: ask again (util-linux
 * does the same). Detaching is deferred by the kernel while anyone else has
 * the device open (LOOP_CLR_FD then only marks it to be cleared at the last
 * close), so "detached" means: sysfs no longer shows a backing file.
 */
#define G_LOG_DOMAIN "rmemfs-swap"

#include <errno.h>
#include <fcntl.h>
#include <linux/loop.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <glib.h>

#include "swap_find.h"
#include "swap_loop.h"

#define CONFIGURE_TRIES 10 /* LOOP_CONFIGURE losing the race for a free device */
#define NODE_WAIT_MS 1000  /* for a new device's /dev node */
#define POLL_MS 20

static int fail(const char *what, const char *dev_path, int rc)
{
	g_printerr("rmemfs-swap: %s %s: %s\n", what, dev_path, g_strerror(-rc));
	return rc;
}

/* open a loop device whose node devtmpfs may be creating right now */
static int open_device(const char *dev_path, int flags, int *out)
{
	int waited = 0, fd;

	*out = -1;
	while ((fd = open(dev_path, flags | O_CLOEXEC)) < 0) {
		if (errno != ENOENT || waited >= NODE_WAIT_MS)
			return fail("open", dev_path, -errno);
		g_usleep(POLL_MS * 1000);
		waited += POLL_MS;
	}
	*out = fd;
	return 0;
}

/* LOOP_CTL_GET_FREE + LOOP_CONFIGURE until a device is ours; the device stays open in *dev */
static int configure_free(int file_fd, const char *file_name, char *dev_path, size_t cap, int *dev)
{
	struct loop_config cfg;
	int ctl, nr, rc, tries;

	ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
	if (ctl < 0)
		return fail("open", "/dev/loop-control", -errno);
	for (tries = 1;; tries++) {
		nr = ioctl(ctl, LOOP_CTL_GET_FREE);
		if (nr < 0) {
			rc = fail("LOOP_CTL_GET_FREE on", "/dev/loop-control", -errno);
			break;
		}
		snprintf(dev_path, cap, "/dev/loop%d", nr);
		rc = open_device(dev_path, O_RDWR, dev);
		if (rc < 0)
			break;
		memset(&cfg, 0, sizeof(cfg));
		cfg.fd = (__u32)file_fd;
		cfg.info.lo_flags = LO_FLAGS_DIRECT_IO;
		g_strlcpy((char *)cfg.info.lo_file_name, file_name, sizeof(cfg.info.lo_file_name));
		if (ioctl(*dev, LOOP_CONFIGURE, &cfg) == 0) {
			rc = 0;
			break;
		}
		rc = -errno;
		close(*dev);
		*dev = -1;
		if (rc != -EBUSY || tries == CONFIGURE_TRIES) {
			fail("LOOP_CONFIGURE on", dev_path, rc);
			break;
		}
	}
	close(ctl);
	return rc;
}

int swap_loop_attach(int file_fd, const char *file_name, char *dev_path, size_t cap, dev_t *rdev)
{
	struct loop_info64 info;
	struct stat st;
	int dev = -1, rc;

	rc = configure_free(file_fd, file_name, dev_path, cap, &dev);
	if (rc < 0)
		return rc;
	if (fstat(dev, &st) < 0) {
		rc = fail("fstat", dev_path, -errno);
		goto out_clear;
	}
	*rdev = st.st_rdev;
	if (ioctl(dev, LOOP_GET_STATUS64, &info) < 0) {
		rc = fail("LOOP_GET_STATUS64 on", dev_path, -errno);
		goto out_clear;
	}
	if (!(info.lo_flags & LO_FLAGS_DIRECT_IO)) {
		g_printerr("rmemfs-swap: %s: the kernel attached %s but did not enable direct I/O "
			   "on it; swapping through the page cache of a FUSE file can deadlock\n",
			   dev_path, file_name);
		rc = -EOPNOTSUPP;
		goto out_clear;
	}
	close(dev);
	return 0;

out_clear:
	if (ioctl(dev, LOOP_CLR_FD) < 0)
		fail("LOOP_CLR_FD on", dev_path, -errno);
	close(dev);
	return rc;
}

int swap_loop_detach(const char *dev_path, dev_t rdev)
{
	char *backing = NULL;
	int fd, rc, waited;

	rc = open_device(dev_path, O_RDONLY, &fd);
	if (rc < 0)
		return rc;
	rc = ioctl(fd, LOOP_CLR_FD) < 0 ? -errno : 0;
	close(fd);
	if (rc == -ENXIO) /* not attached (any more) */
		return 0;
	if (rc < 0)
		return fail("LOOP_CLR_FD on", dev_path, rc);
	for (waited = 0; swap_find_loop_backing(rdev, &backing) == 0; waited += POLL_MS) {
		if (waited >= SWAP_LOOP_DETACH_TIMEOUT_MS) {
			g_printerr("rmemfs-swap: %s still has %s attached %d s after LOOP_CLR_FD "
				   "(something holds the device open)\n",
				   dev_path, backing, SWAP_LOOP_DETACH_TIMEOUT_MS / 1000);
			g_free(backing);
			return -ETIMEDOUT;
		}
		g_clear_pointer(&backing, g_free);
		g_usleep(POLL_MS * 1000);
	}
	return 0;
}
