/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * swap_find.h - rmemfs-swap's view of the machine, read from the kernel's own
 * tables and never from a file of ours: the mounts (/proc/self/mountinfo), the
 * active swap areas (/proc/swaps) and what each loop device is attached to
 * (/sys/dev/block/MAJ:MIN/loop/backing_file). Everything here is read-only
 * and works for any user.
 *
 * A swap area is "rmemfs-backed" when it is a loop device whose backing file
 * lies on an rmemfs mount (fstype fuse.rmemfs), whoever set it up.
 *
 * Every function returns 0 or -errno. The ones that read a whole table say
 * on stderr which one they could not read; the others say nothing.
 */
#ifndef RMEM_SWAP_FIND_H
#define RMEM_SWAP_FIND_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <glib.h>

#define SWAP_FIND_FSTYPE "fuse.rmemfs"

/* one line of /proc/self/mountinfo (octal escapes undone) */
struct swap_mount {
	char *mount_point;
	char *fstype;
	char *source; /* for rmemfs: the server, "127.0.0.1:7471" */
};

/* one rmemfs-backed swap area */
struct swap_device {
	char *device; /* as /proc/swaps names it: "/dev/loop3" */
	dev_t rdev;
	uint64_t size; /* bytes */
	uint64_t used; /* bytes */
	int priority;
	char *backing_file; /* as the loop driver names it */
	char *mount_point;  /* of the rmemfs mount holding backing_file */
	char *server;
};

/* every mount, in mountinfo order (later entries cover earlier ones); a GPtrArray that frees */
int swap_find_mounts(GPtrArray **out);

/* the mount path lies on (the longest mount point that is a prefix of it; of equal ones the
 * latest), or NULL; path absolute and canonical, a trailing " (deleted)" ignored */
const struct swap_mount *swap_find_mount_of(GPtrArray *mounts, const char *path);

/* the rmemfs mount whose root is exactly path (absolute, canonical), or NULL */
const struct swap_mount *swap_find_rmemfs_root(GPtrArray *mounts, const char *path);

/* the active rmemfs-backed swap areas, in /proc/swaps order (struct swap_device): all of them,
 * or only those on the mount at mount_point, or only device rdev */
int swap_find_devices(GPtrArray *mounts, const char *mount_point, dev_t rdev, GPtrArray **out);

/* the file loop device rdev is attached to; -ENOENT when it is not attached (or not a loop
 * device). *out is g_free'd by the caller. */
int swap_find_loop_backing(dev_t rdev, char **out);

/* the loop devices attached to file (absolute, canonical), as dev_t in a GArray */
int swap_find_loops_of(const char *file, GArray **out);

#endif /* RMEM_SWAP_FIND_H */
