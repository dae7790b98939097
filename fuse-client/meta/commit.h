/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * commit.h - making metadata durable: journal writes, checkpoints, and the
 * committer thread that writes committed transactions within
 * META_COMMIT_INTERVAL_MS. Functions return 0 or -errno.
 */
#ifndef RMEM_COMMIT_H
#define RMEM_COMMIT_H

#include <stdbool.h>

struct meta;

/* make every transaction so far durable in the pool (fsync/fdatasync/fsyncdir) */
int commit_sync(struct meta *m);

/* write every committed txn (or a checkpoint when due or forced); no lock held */
int commit_write(struct meta *m, bool force_ckpt);
/* start / stop the committer thread (stop: safe when never started, and twice) */
int commit_start(struct meta *m);
void commit_stop(struct meta *m);
/* after journal_commit (m->lock held): wake the committer early if much is pending */
void commit_kick(struct meta *m);
/*
 * Clear the hot regions (csum.h, checksum.h) no write touched since the
 * previous sweep, with HOT(region, 0) records queued; all (unmount, nothing
 * in flight): every region without a write in flight. The committer sweeps
 * every COMMIT_SWEEP_MS.
 */
#define COMMIT_SWEEP_MS 5000
void commit_sweep_hot(struct meta *m, bool all);

#endif /* RMEM_COMMIT_H */
