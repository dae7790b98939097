/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * super.h - the superblock (block 0 of the pool) and the lease that makes a
 * pool single-writer.
 *
 * The superblock holds the format (layout.h), the generation of the newest
 * checkpoint, a clean flag, and the lease: a 64-bit owner word taken with
 * RDMA compare-and-swap, a heartbeat word the holder increments, and a
 * holder string for messages. Protocol (docs/ARCHITECTURE.md, "Lease protocol and timing"):
 *
 *   acquire: CAS(owner, 0, me), me = remote_client_id(). If the word holds
 *   X, watch the heartbeat: it moves -> X is alive -> -EBUSY naming the
 *   holder; it stays still for takeover_ms -> CAS(owner, X, me) (two takers:
 *   the CAS decides), then FENCE(X) at the memserver before the lease counts.
 *   hold: a thread adds 1 to the heartbeat every takeover_ms/8 (at most 1 s)
 *   and checks the owner word still says me. Each success pushes the pool's
 *   write deadline (remote_set_write_deadline) to now + takeover_ms/2, so a
 *   holder that cannot prove its lease stops writing before anyone may take
 *   it over; an owner word that names someone else fences the pool for good.
 *   release: CAS(owner, me, 0).
 *
 * All functions return 0 or -errno; messages for the user go to *err_msg
 * (g_malloc'd) where the prototype has one.
 */
#ifndef RMEM_SUPER_H
#define RMEM_SUPER_H

#include <stdbool.h>
#include <stdint.h>

#include "layout.h"

struct remote;
struct super;

#define SUPER_DEFAULT_TAKEOVER_MS 10000

int super_new(struct remote *r, struct super **out);
/* stops the heartbeat; does NOT release the lease (see super_lease_release). NULL-tolerant */
void super_destroy(struct super *s);

/*
 * Read block 0 and classify it. Fills the geometry for LAYOUT_SB_RMEMFS.
 * Returns 0 with *kind set, or -errno of the read.
 */
int super_probe(struct super *s, enum layout_sb_kind *kind, uint32_t *version, const char **why);
const struct layout_geom *super_geom(const struct super *s);

enum super_lease_how {
	SUPER_LEASE_WAIT, /* wait out a silent holder; a live one is -EBUSY */
	SUPER_LEASE_FORCE, /* take it even from a live holder (-o force_lease) */
	SUPER_LEASE_FOREIGN, /* the pool holds no rmemfs: whatever is in the word is no lease */
};

/*
 * Take the lease (see above), as how says.
 * -EBUSY with *err_msg "pool is in use by <holder> ..." when it is held.
 */
int super_lease_acquire(struct super *s, const char *holder, int takeover_ms,
			enum super_lease_how how, char **err_msg);
/*
 * Is the lease held by a live client? Watches the heartbeat for up to
 * watch_ms. *holder (may be NULL) gets the g_malloc'd holder string or NULL.
 */
int super_lease_probe(struct super *s, int watch_ms, bool *alive, char **holder);
/* start/stop the heartbeat thread (lease held) */
int super_heartbeat_start(struct super *s);
void super_heartbeat_stop(struct super *s);
/* CAS(owner, me, 0); stops the heartbeat first */
int super_lease_release(struct super *s);

/*
 * Write a fresh superblock for the whole pool (lease held): new uuid,
 * ckpt_gen 0 (the caller writes checkpoint 1 and commits it), clean 0. The
 * lease area is left alone.
 */
int super_format(struct super *s);

/* the committed checkpoint generation (atomic read) */
int super_read_ckpt_gen(struct super *s, uint64_t *gen);
/* switch it from old to new with CAS; -ESTALE if it was neither (someone else writes) */
int super_commit_ckpt_gen(struct super *s, uint64_t old, uint64_t new);
int super_read_clean(struct super *s, bool *clean);
int super_write_clean(struct super *s, bool clean);

#endif /* RMEM_SUPER_H */
