/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * super.h - the superblock (block 0 of the pool: format, newest checkpoint
 * generation, clean flag) and the lease that makes a pool single-writer: an
 * owner word taken by compare-and-swap, kept alive by a heartbeat thread
 * that also keeps the pool's write deadline ahead (remote.h). A member set
 * keeps block 0 on every member, and the lease is taken on each member that
 * is up: a read-write mount needs it on a majority (remote_quorum). The
 * protocol and its timing: docs/ARCHITECTURE.md, "Lease protocol and timing"
 * and "Member sets".
 *
 * Functions return 0 or -errno; messages for the user go to *err_msg
 * (g_malloc'd) where the prototype has one. Memory: allocation failure
 * aborts (g_new), as everywhere in the pool layer (remote.h).
 */
#ifndef RMEM_SUPER_H
#define RMEM_SUPER_H

#include <stdbool.h>
#include <stdint.h>

#include "layout.h"

struct remote;
struct super;

#define SUPER_DEFAULT_TAKEOVER_MS 10000

struct super *super_new(struct remote *r);
/* stops the heartbeat; does NOT release the lease (see super_lease_release). NULL-tolerant */
void super_destroy(struct super *s);

/*
 * Read block 0 and classify it. Fills the geometry for LAYOUT_SB_RMEMFS.
 * On an erasure-coded set a geometry off its zones (remote_zone) is
 * LAYOUT_SB_CORRUPT. Returns 0 with *kind set, or -errno of the read.
 */
int super_probe(struct super *s, enum layout_sb_kind *kind, uint32_t *version, const char **why);
const struct layout_geom *super_geom(const struct super *s);

enum super_lease_how {
	SUPER_LEASE_WAIT, /* wait out a silent holder; a live one is -EBUSY */
	SUPER_LEASE_FORCE, /* take it even from a live holder (-o force_lease) */
	SUPER_LEASE_FOREIGN, /* the pool holds no rmemfs: whatever is in the word is no lease */
};

/*
 * Take the lease (see above), as how says, on every member that is up, in
 * member order; then the quorum rule, start the heartbeat, and remote_claim
 * (the set's records, and a resync of what a crashed writer left, which can
 * take longer than the write deadline without beats).
 * -EBUSY with *err_msg "pool is in use by <holder> ..." when it is held
 * (every member taken is given back); -EHOSTDOWN without a majority.
 */
int super_lease_acquire(struct super *s, const char *holder, int takeover_ms,
			enum super_lease_how how, char **err_msg);
/*
 * Is the lease held by a live client? Watches the heartbeat for up to
 * watch_ms. *holder (may be NULL) gets the g_malloc'd holder string or NULL.
 */
int super_lease_probe(struct super *s, int watch_ms, bool *alive, char **holder);
/* start (super_lease_acquire does) / stop the heartbeat thread (lease held) */
int super_heartbeat_start(struct super *s);
void super_heartbeat_stop(struct super *s);
/* CAS(owner, me, 0); stops the heartbeat first */
int super_lease_release(struct super *s);

/*
 * Write a fresh superblock for the whole pool (lease held): new uuid,
 * ckpt_gen 0 (the caller writes checkpoint 1 and commits it), clean 0. The
 * lease area is left alone. An erasure-coded set gets the zoned geometry
 * (layout_geometry_zoned).
 */
int super_format(struct super *s);

/*
 * Rewrite the superblock's static part with format version LAYOUT_VERSION
 * (lease held; a version-1 pool after its first version-2 checkpoint).
 * super_geom then says the new version.
 */
int super_upgrade(struct super *s);

/* the committed checkpoint generation (atomic read) */
int super_read_ckpt_gen(struct super *s, uint64_t *gen);
/* switch it from old to new with CAS; -ESTALE if it was neither (someone else writes) */
int super_commit_ckpt_gen(struct super *s, uint64_t old, uint64_t new);
int super_read_clean(struct super *s, bool *clean);
int super_write_clean(struct super *s, bool clean);

#endif /* RMEM_SUPER_H */
