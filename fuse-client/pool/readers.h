/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * readers.h - the reader slots of a pool (block 0 of every member,
 * LAYOUT_SB_READERS_OFF): how read-only mounts following the writer tell it
 * how far they applied its journal, so that it reuses freed space only
 * behind the slowest one, and how it expires one that went silent.
 * Format, protocol and timing: readers.c and docs/ARCHITECTURE.md, "Reader
 * slots".
 *
 * Functions return 0 (or a count) or -errno. Thread-safe: one struct readers
 * serializes its calls; readers_read_ok's fast path takes no lock.
 */
#ifndef RMEM_READERS_H
#define RMEM_READERS_H

#include <stdint.h>

#include "layout.h"

struct remote;
struct readers;

/* a reader silent this long is expired (= the lease takeover) */
#define READERS_TIMEOUT_MS 10000

/*
 * Both sides. The timeout is READERS_TIMEOUT_MS, or for tests only the
 * environment's RMEM_TEST_READERS_TIMEOUT_MS (read here; readers.c).
 */
struct readers *readers_new(struct remote *r);
void readers_destroy(struct readers *rd); /* NULL-tolerant; does not leave */
/* the expiry timeout in use (the reader's read deadline is half of it) */
unsigned int readers_timeout_ms(const struct readers *rd);

/* ---- a reader ---- */

/*
 * Take the first slot free on every member that is up (CAS(owner, 0, id),
 * member by member; one that refuses gives the others back), then write the
 * record {id, beat 0, applied 0, gen 0, lag 0, host} to each and set the
 * read deadline. Only after this may the caller read any metadata (the
 * writer counts it from the moment its record is visible). -ENOSPC with
 * *err_msg "all 32 reader slots of the pool are taken (readers: ...)" when
 * none is free; -EALREADY if this one holds a slot; other -errno with
 * *err_msg. *err_msg (may be NULL) is g_malloc'd.
 */
int readers_join(struct readers *rd, const char *host, char **err_msg);
/*
 * Heartbeat: write the record {beat + 1, applied, gen, lag_ms} to every
 * member up, then check with CAS(owner, id, id) on each that the slot is
 * still ours; the read deadline becomes the time the write was issued + half
 * the timeout. -ESTALE once the writer expired us (an owner word that does
 * not name us, or the memserver fenced us and the pool failed): for good,
 * and every later readers_read_ok is -ESTALE too. -EINVAL without a slot;
 * another -errno of the pool (nothing pushed).
 */
int readers_beat(struct readers *rd, uint64_t applied, uint64_t gen, uint64_t lag_ms);
/*
 * After a data READ of the pool completed: may its bytes be trusted? 0 when
 * now is before the read deadline; else once CAS(owner, id, id) proves the
 * slot still ours (the deadline is pushed as by a beat, from when this check
 * began). -ESTALE if expired (or without a slot: left, never joined),
 * another -errno if it could not be asked. Fast path: a clock read and two
 * atomic loads.
 */
int readers_read_ok(struct readers *rd);
/* unmount: zero the record and give the slot back (CAS(owner, id, 0)) on every member up */
void readers_leave(struct readers *rd);

/* ---- the writer ---- */

struct reader_info {
	uint64_t id; /* 0: a slot whose bytes name no reader (damaged), held as one at seq 0 */
	unsigned int slot;
	char host[LAYOUT_READER_HOST_LEN + 1];
	uint64_t applied, gen, lag_ms;
	uint64_t silent_ms; /* since its beat last changed, on the writer's clock */
};

/*
 * Read the slots of every member up (one READ of 3 KiB each) and take the
 * union by reader id, the newest beat winning; a record that fails its CRC
 * keeps the last good values of its slot, or counts as a reader at seq 0.
 * A reader whose beat did not change for the timeout (the writer's clock,
 * first sighting = now) is expired: FENCE of its id on every member up, its
 * record zeroed, its owner word cleared, a message logged. Returns the number
 * of live readers and *min_applied, the smallest seq they applied
 * (UINT64_MAX when none), or -errno. One scan at a time.
 */
int readers_scan(struct readers *rd, uint64_t *min_applied);
/* the live readers as of the last scan, by slot: fills up to max, returns the count */
int readers_list(struct readers *rd, struct reader_info *out, int max);

#endif /* RMEM_READERS_H */
