/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * hold.h - the writer's side of readers beside it: space freed by a
 * transaction is reused only once every live reader has applied that
 * transaction (readers.h publishes how far each got), so a reader never
 * maps blocks that hold another file's bytes. A scan of the reader slots
 * counts only for transactions durable before it started: a reader that
 * joined after that loads a state that already has them.
 *
 * Functions marked [lock] want m->lock held; the others take what they need.
 */
#ifndef RMEM_HOLD_H
#define RMEM_HOLD_H

#include <stddef.h>
#include <stdint.h>

struct meta;

/*
 * The read-write mount goes live: find the readers, and wait until each has
 * applied the state just loaded (the allocator built from it already
 * counts every block freed in it as free), or was expired. 0 or -errno.
 */
int hold_start(struct meta *m, char **err_msg);
void hold_free(struct meta *m); /* NULL-tolerant */
/* read the reader slots (expiring silent readers), then release what they allow */
void hold_scan(struct meta *m);
/* [lock] give the allocator the blocks freed by transactions every reader has applied */
void hold_release(struct meta *m);
/* [lock] transactions up to last_seq are durable now (for how far behind readers are) */
void hold_note_durable(struct meta *m, uint64_t last_seq);
/*
 * The pool is full but freed blocks wait (no lock held): scan until every
 * live reader has applied what is durable now (the slow ones are expired
 * meanwhile: at most the reader timeout and a scan), so that all of it
 * came free. 0, or -ENOSPC past that.
 */
int hold_reclaim(struct meta *m);
/* "key value" lines for the stats xattr (role writer, readers, one line each) */
size_t hold_stats_text(struct meta *m, char *buf, size_t cap);

#endif /* RMEM_HOLD_H */
