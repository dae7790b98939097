// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * swap_cmd.c - steps rmemfs-swap on and off share (see swap_cmd.h): finding
 * the mount named on the command line, and the two teardown steps that are
 * not the loop device's (swapoff, unlink). `on` uses them to undo a failed
 * start, `off` to stop.
 */
#define G_LOG_DOMAIN "rmemfs-swap"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/swap.h>
#include <unistd.h>

#include "swap_cmd.h"

int swap_cmd_mount(const char *path, GPtrArray **mounts, const struct swap_mount **out)
{
	char *real;
	int rc;

	*mounts = NULL;
	real = realpath(path, NULL);
	if (!real) {
		rc = -errno;
		SWAP_ERR("%s: %s", path, g_strerror(-rc));
		return rc;
	}
	rc = swap_find_mounts(mounts);
	if (rc < 0)
		goto out;
	*out = swap_find_rmemfs_root(*mounts, real);
	if (!*out) {
		SWAP_ERR("%s is not the root of an rmemfs mount (no %s mount at %s)", path,
			 SWAP_FIND_FSTYPE, real);
		rc = -EINVAL;
	}
out:
	free(real);
	return rc;
}

char *swap_cmd_file(const char *mount_point)
{
	return g_build_filename(mount_point, SWAP_FILE_NAME, NULL);
}

int swap_cmd_swapoff(const char *device)
{
	int rc;

	if (swapoff(device) == 0)
		return 0;
	rc = -errno;
	if (rc == -ENOMEM)
		SWAP_ERR("swapoff %s: %s: the pages swapped out to it do not fit back in memory; "
			 "it is still on, nothing was changed",
			 device, g_strerror(-rc));
	else
		SWAP_ERR("swapoff %s: %s", device, g_strerror(-rc));
	return rc;
}

int swap_cmd_unlink(const char *file)
{
	int rc;

	if (unlink(file) == 0)
		return 0;
	rc = -errno;
	SWAP_ERR("unlink %s: %s", file, g_strerror(-rc));
	return rc;
}
