/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * swap_cmd.h - the commands of rmemfs-swap (swap_on.c, swap_off.c,
 * swap_status.c) and the steps they share (swap_cmd.c).
 *
 * Each command writes its own messages, one line each on stderr, prefixed
 * "rmemfs-swap: ", and returns 0 or -errno; the caller only turns that into
 * the exit status. Checking root and the command line is the caller's job
 * (swap_main.c), done before a command runs.
 */
#ifndef RMEM_SWAP_CMD_H
#define RMEM_SWAP_CMD_H

#include <stdbool.h>
#include <stdint.h>

#include <glib.h>

#include "swap_find.h"

#define SWAP_FILE_NAME ".rmemfs-swap" /* in the root of the mount */
#define SWAP_MIN_SIZE (1ULL << 20)
#define SWAP_PRIORITY_MAX 32767 /* SWAP_FLAG_PRIO_MASK */
#define SWAP_STATS_XATTR "user.rmemfs.stats"

#define SWAP_ERR(fmt, ...) g_printerr("rmemfs-swap: " fmt "\n", ##__VA_ARGS__)

struct swap_on_args {
	const char *mountpoint;	  /* as given */
	uint64_t size;		  /* bytes, a multiple of the page size, >= SWAP_MIN_SIZE */
	int priority;		  /* 0..SWAP_PRIORITY_MAX, or -1: the kernel's choice */
	unsigned int lock_wait_s; /* for the swap lock (swap_lock.h) */
};

/* rmemfs-swap on: create, fill, attach, mkswap, swapon; a failure undoes what was done */
int swap_on(const struct swap_on_args *a);

/* rmemfs-swap off: target is the root of an rmemfs mount or an rmemfs-backed swap device;
 * waits up to lock_wait_s for the swap lock */
int swap_off(const char *target, unsigned int lock_wait_s);

/* rmemfs-swap status: every rmemfs-backed swap area, as a table or JSON on stdout */
int swap_status(bool json);

/*
 * The rmemfs mount whose root path (as given on the command line) is: *mounts holds every
 * mount (the caller frees it, also on error), *out points into it. Says why not.
 */
int swap_cmd_mount(const char *path, GPtrArray **mounts, const struct swap_mount **out);

/* the path of the swap file of the mount at mount_point (g_free) */
char *swap_cmd_file(const char *mount_point);

/* swapoff(2), saying what an error means (ENOMEM: the pages do not fit back in memory) */
int swap_cmd_swapoff(const char *device);

/* unlink(2) of the swap file, with a message on error */
int swap_cmd_unlink(const char *file);

#endif /* RMEM_SWAP_CMD_H */
