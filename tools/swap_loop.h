/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * swap_loop.h - attaching a file to a loop device with direct I/O, and taking
 * it off again (loop(4)).
 *
 * Swap needs a block device: a FUSE file has no bmap, so the kernel cannot
 * swap to it directly, but a loop device over it works. Direct I/O is not an
 * option but the point: without it every swapped-out page would first be
 * copied into the page cache of the backing file, under the very memory
 * pressure that made the kernel swap, and written back whenever the flusher
 * gets to it. With it, a swap-out is a write to the rmemfs daemon and nothing
 * else. No LO_FLAGS_AUTOCLEAR: the device lives until rmemfs-swap off.
 *
 * Both functions print one line on stderr naming the failed call and its
 * errno text, and return 0 or -errno.
 */
#ifndef RMEM_SWAP_LOOP_H
#define RMEM_SWAP_LOOP_H

#include <stddef.h>
#include <sys/types.h>

/* how long a detached device may keep its backing file (the last opener, often udev's probe,
 * finishes the detach when it closes the device) */
#define SWAP_LOOP_DETACH_TIMEOUT_MS 10000

/*
 * Attach file_fd (open O_RDWR | O_DIRECT; file_name is what the device records) to a free
 * loop device with direct I/O; on success the device's path ("/dev/loop3") is in dev_path
 * and its number in *rdev. -EOPNOTSUPP when the kernel attached the file but would not
 * enable direct I/O (the device is detached again before returning).
 */
int swap_loop_attach(int file_fd, const char *file_name, char *dev_path, size_t cap, dev_t *rdev);

/* LOOP_CLR_FD on dev_path, then wait up to SWAP_LOOP_DETACH_TIMEOUT_MS until the device
 * rdev has no backing file (-ETIMEDOUT if it still has one) */
int swap_loop_detach(const char *dev_path, dev_t rdev);

#endif /* RMEM_SWAP_LOOP_H */
