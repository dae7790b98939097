/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * mount.h - opening the filesystem of a pool as a struct meta, closing it,
 * and checking it offline (rmemfs-fsck). Functions return 0 or -errno;
 * *err_msg (if non-NULL) gets a g_malloc'd human-readable reason on failure.
 */
#ifndef RMEM_MOUNT_H
#define RMEM_MOUNT_H

#include <stdbool.h>

#include "fsck.h"

struct meta;
struct remote;

struct mount_opts {
	bool format; /* format a pool that holds no rmemfs (never an rmemfs pool) */
	bool read_only; /* no lease, no writes (rmemfs-fsck without --repair) */
	bool force_lease; /* take the lease even from a live holder (fsck --force) */
	int lease_takeover_ms; /* a holder silent this long is dead (default 10000) */
	const char *holder_name; /* written next to the lease, e.g. "host:pid" */
	/*
	 * read_only, following a writer (rmemfs -o ro): take a reader slot
	 * before loading (the writer then keeps freed space for us), and let
	 * follow.h keep the metadata current
	 */
	bool follow;
};

/*
 * Mount the pool: check the superblock (an all-zero pool is formatted; a
 * foreign or newer format is refused: -EPROTONOSUPPORT / -EMEDIUMTYPE with a
 * message naming what was found), take the lease (-EBUSY naming the holder
 * when it is alive; a holder silent for lease_takeover_ms is taken over),
 * load the newest checkpoint, replay the journal, check consistency and
 * repair what is safe (-EUCLEAN when more is damaged, or the error of a
 * repair that failed), and start the lease heartbeat and the committer.
 */
int mount_open(struct remote *r, const struct mount_opts *opts, struct meta **out,
	       char **err_msg);
/* commit, checkpoint, mark clean, release the lease, free. NULL-tolerant */
int mount_close(struct meta *m);
/* release everything WITHOUT writing anything (after the connection died) */
void mount_abandon(struct meta *m);

/*
 * rmemfs-fsck: load the pool's filesystem (read-only, or with the lease for
 * --repair), check it into rep, and with --repair repair it and write a
 * checkpoint. 0 once checked (rep->problems says what was found) or -errno.
 */
int mount_fsck(struct remote *r, const struct fsck_opts *o, struct fsck_report *rep,
	       char **err_msg);

#endif /* RMEM_MOUNT_H */
