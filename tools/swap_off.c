// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * swap_off.c - rmemfs-swap off MOUNTPOINT|DEVICE.
 *
 * For each rmemfs-backed swap area of the mount (or the one device named):
 * swapoff(2), detach the loop device, remove the file if it is the one
 * rmemfs-swap on made (MOUNT/.rmemfs-swap; a loop swap over another file is
 * turned off and detached, its file left alone). swapoff has to read every
 * swapped-out page back, and fails with ENOMEM when they do not fit: then
 * everything stays as it was.
 *
 * Given a mount, off also clears what an interrupted `on` may have left: a
 * loop device still attached to MOUNT/.rmemfs-swap that is not swap, and the
 * file itself.
 */
#define G_LOG_DOMAIN "rmemfs-swap"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "swap_cmd.h"
#include "swap_lock.h"
#include "swap_loop.h"

/* a loop device's node, from its number */
static void device_path(dev_t rdev, char *buf, size_t cap)
{
	char link[64], *target;

	snprintf(link, sizeof(link), "/sys/dev/block/%u:%u", major(rdev), minor(rdev));
	target = g_file_read_link(link, NULL);
	snprintf(buf, cap, "/dev/%s", target ? strrchr(target, '/') + 1 : "loop?");
	g_free(target);
}

static int turn_off(const struct swap_device *d)
{
	char *file = swap_cmd_file(d->mount_point);
	bool ours = strcmp(d->backing_file, file) == 0;
	int rc;

	rc = swap_cmd_swapoff(d->device);
	if (rc == 0)
		rc = swap_loop_detach(d->device, d->rdev);
	if (rc == 0 && ours)
		rc = swap_cmd_unlink(file);
	if (rc == 0)
		printf("rmemfs-swap: %s: swap off on %s (%s)%s%s\n", d->device, d->mount_point,
		       d->server, ours ? "" : ", kept ", ours ? "" : d->backing_file);
	g_free(file);
	return rc;
}

/* what an interrupted `on` may leave: loop devices on the file, not swap; the file. Counts. */
static int clear_leftovers(const char *mount_point, unsigned int *count)
{
	char *file = swap_cmd_file(mount_point), device[64];
	struct stat st;
	GArray *loops;
	unsigned int i;
	int rc;

	rc = swap_find_loops_of(file, &loops);
	if (rc < 0)
		goto out;
	for (i = 0; i < loops->len && rc == 0; i++) {
		dev_t rdev = g_array_index(loops, dev_t, i);

		device_path(rdev, device, sizeof(device));
		rc = swap_loop_detach(device, rdev);
		if (rc == 0)
			printf("rmemfs-swap: %s: detached from %s (it was not swap)\n", device,
			       file);
		(*count)++;
	}
	g_array_unref(loops);
	if (rc == 0 && lstat(file, &st) == 0) {
		rc = swap_cmd_unlink(file);
		if (rc == 0)
			printf("rmemfs-swap: removed %s\n", file);
		(*count)++;
	}
out:
	g_free(file);
	return rc;
}

/* the mount target names, or (NULL) the device it is: checked before taking the lock */
static int resolve_target(const char *target, GPtrArray **mounts, const struct swap_mount **mount,
			  dev_t *rdev)
{
	struct stat st;

	*mount = NULL;
	if (stat(target, &st) < 0 || !S_ISBLK(st.st_mode))
		return swap_cmd_mount(target, mounts, mount);
	*rdev = st.st_rdev;
	return swap_find_mounts(mounts);
}

/* the rmemfs-backed swap areas of the mount, or the device if it is one */
static int select_devices(const char *target, GPtrArray *mounts, const struct swap_mount *mount,
			  dev_t rdev, GPtrArray **out)
{
	GPtrArray *devices;
	int rc;

	rc = swap_find_devices(mounts, mount ? mount->mount_point : NULL, mount ? 0 : rdev,
			       &devices);
	if (rc < 0)
		return rc;
	if (!mount && devices->len == 0) {
		SWAP_ERR("%s is not an rmemfs-backed swap device (rmemfs-swap status lists them)",
			 target);
		g_ptr_array_unref(devices);
		return -EINVAL;
	}
	*out = devices;
	return 0;
}

int swap_off(const char *target, unsigned int lock_wait_s)
{
	const struct swap_mount *mount;
	GPtrArray *mounts = NULL, *devices = NULL;
	unsigned int i, count;
	int lock_fd = -1, rc;
	dev_t rdev = 0;

	rc = resolve_target(target, &mounts, &mount, &rdev);
	if (rc < 0)
		goto out;
	rc = swap_lock_take(lock_wait_s, &lock_fd);
	if (rc < 0)
		goto out;
	rc = select_devices(target, mounts, mount, rdev, &devices);
	if (rc < 0)
		goto out_unlock;
	for (i = 0; i < devices->len && rc == 0; i++)
		rc = turn_off(g_ptr_array_index(devices, i));
	count = devices->len;
	if (rc == 0 && mount)
		rc = clear_leftovers(mount->mount_point, &count);
	if (rc == 0 && mount && count == 0) {
		SWAP_ERR("nothing to turn off on %s: no swap, loop device or %s there",
			 mount->mount_point, SWAP_FILE_NAME);
		rc = -ENOENT;
	}
	g_ptr_array_unref(devices);
out_unlock:
	swap_lock_release(lock_fd);
out:
	if (mounts)
		g_ptr_array_unref(mounts);
	return rc;
}
