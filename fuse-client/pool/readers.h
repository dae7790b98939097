/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * readers.h - the reader slots of a pool (block 0 of every member,
 * LAYOUT_SB_READERS_OFF): how read-only mounts following the writer tell it
 * how far they applied its journal, so that it reuses freed space only
 * behind the slowest one, and how it expires one that went silent.
 * Protocol and timing: docs/ARCHITECTURE.md, "Readers beside the writer".
 *
 * Functions return 0 or -errno. Thread-safe.
 */
#ifndef RMEM_READERS_H
#define RMEM_READERS_H

#include <stdint.h>

#include "layout.h"

struct remote;
struct readers;

/* a reader silent this long is expired (the lease takeover's time) */
#define READERS_TIMEOUT_MS 10000

struct readers *readers_new(struct remote *r);
void readers_destroy(struct readers *rd); /* NULL-tolerant; does not leave */
/* the expiry timeout in use (READERS_TIMEOUT_MS, or the test knob RMEM_TEST_READERS_TIMEOUT_MS) */
unsigned int readers_timeout_ms(const struct readers *rd);

/* ---- a reader ---- */

/*
 * Take the first slot free on every member that is up and write our record
 * (applied 0: the writer holds all freed space until the first beat). Only
 * after this may the caller read metadata. -ENOSPC with *err_msg when all
 * slots are taken.
 */
int readers_join(struct readers *rd, const char *host, char **err_msg);
/*
 * Beat: write the record {beat + 1, applied, gen, lag_ms}, then check with
 * CAS(owner, id, id) that the slot is still ours; that pushes the read
 * deadline to the time the record was written + half the timeout. -ESTALE
 * once the writer expired us, or the memserver fenced us (the pool then
 * fails), for good.
 */
int readers_beat(struct readers *rd, uint64_t applied, uint64_t gen, uint64_t lag_ms);
/*
 * After a data READ completed: may its bytes be trusted? 0 before the read
 * deadline, else once the slot proves still ours now; -ESTALE if expired,
 * another -errno if that could not be asked.
 */
int readers_read_ok(struct readers *rd);
/* unmount: give the slot back */
void readers_leave(struct readers *rd);

/* ---- the writer ---- */

struct reader_info {
	uint64_t id;
	unsigned int slot;
	char host[LAYOUT_READER_HOST_LEN + 1];
	uint64_t applied, gen, lag_ms;
	uint64_t silent_ms; /* since its beat last changed, on the writer's clock */
};

/*
 * Read every member's slots (one READ each), expire the readers silent for
 * the timeout (owner word cleared, FENCE of their id, record zeroed).
 * Returns the number of live readers and *min_applied, the smallest seq
 * they applied (UINT64_MAX when none), or -errno.
 */
int readers_scan(struct readers *rd, uint64_t *min_applied);
/* the live readers as of the last scan: fills up to max, returns the count */
int readers_list(struct readers *rd, struct reader_info *out, int max);

#endif /* RMEM_READERS_H */
