/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * remote.h - the filesystem's view of the pool: byte offsets in one flat
 * address space, over one memserver or a set of them.
 *
 * One server whose pool holds no membership record is a plain pool: offsets
 * go straight to it (member.h), as they always did. Several servers (or one
 * that is a member of a set) form a member set (layout.h "member sets"):
 * block 0 - the superblock - is kept on every member; the rest of the
 * address space is cut into units whose copies place.h spreads over the
 * members. A write completes once every in-sync copy took it; a read goes to
 * one in-sync copy, the least busy, and moves to another on error. A member
 * that fails is marked lost in the records of the others before any write it
 * missed completes, so no later mount reads it (docs/ARCHITECTURE.md,
 * "Member sets").
 *
 * All functions return 0 or -errno and are thread-safe. Memory, in the whole
 * pool layer: GLib allocation failure aborts (g_new); only the registered
 * bounce buffers (posix_memalign) fail with -ENOMEM.
 */
#ifndef RMEM_REMOTE_H
#define RMEM_REMOTE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "member.h"

struct remote;
struct remote_judge;

#define REMOTE_MAX_SERVERS 12 /* members of a set (LAYOUT_SET_MAX) */
#define REMOTE_MAX_REPLICAS 3U /* replicas= (the replicated zone of an ec= set may keep 4) */

struct remote_server {
	char *host;
	uint16_t port; /* 0: PROTO_DEFAULT_PORT */
	char *pool; /* the server's named pool; NULL: its default pool */
};

/*
 * Parse "HOST[:PORT][/NAME][,HOST[:PORT][/NAME]...]" (IPv6 as [addr]:port)
 * into out[] (g_malloc'd: remote_servers_free). -EINVAL for a bad address
 * or pool name (*why, if why is not NULL, says which and what is wrong, as
 * "'ADDR' is not ...") or more than max servers (*why NULL).
 */
int remote_parse_servers(const char *list, struct remote_server *out, unsigned int max,
			 unsigned int *n, char **why);
void remote_servers_free(struct remote_server *s, unsigned int n);

struct remote_config {
	/* transport, token, qps, bounce size, reconnect_timeout: the same for every member */
	struct member_config member;
	const struct remote_server *servers; /* member.params.host/port are ignored */
	unsigned int nservers;
	/* copies of each unit for a new set: 0 = 2 with two or more servers, else 1 */
	unsigned int replicas;
	/*
	 * ec_k > 0: an erasure-coded set (-o ec=K+M, instead of replicas):
	 * stripes of ec_k data and ec_m parity fragments; a new set is
	 * formatted so, an existing one must be so
	 */
	unsigned int ec_k, ec_m;
	/* mount read-write with no majority of the members (risks split brain) */
	bool degraded;
	/* a new set may take servers whose block 0 holds something (-o format) */
	bool format;
	/* read-only: no majority needed, nothing is written */
	bool read_only;
};

/*
 * Connect to every server and work out what they hold: a plain pool, a
 * blank set (all blank: placed in the order given), or the members of a set
 * (matched to their places by pool id, in any order). A server that is no
 * member, a member that is missing, a read-write mount without a majority:
 * -EINVAL / -ENOENT / -EHOSTDOWN with *err_msg (g_malloc'd) saying which.
 * Nothing is written until remote_claim.
 */
int remote_open(const struct remote_config *cfg, struct remote **out, char **err_msg);
void remote_close(struct remote *r); /* NULL-tolerant */

uint64_t remote_size(const struct remote *r); /* bytes of the address space */
/*
 * An erasure-coded set: true, with the end of its replicated zone (block 0
 * and the journal live below it) and the bytes of a stripe's data, where
 * the coded zone [zone_end, size) is cut into stripes (super.c lays the
 * checkpoints and the data on them). False for a plain pool or copies.
 */
bool remote_zone(const struct remote *r, uint64_t *zone_end, uint64_t *stripe_bytes);
/* the non-zero client id every member's connections present (the lease owner value) */
uint64_t remote_client_id(const struct remote *r);
const char *remote_transport(const struct remote *r); /* "tcp" / "rdma" */
const char *remote_name(const struct remote *r); /* the servers, for messages */
bool remote_is_set(const struct remote *r);

/*
 * The lease is taken on every member that is up (super.c): once held,
 * remote_claim writes the membership records - a blank set's first ones,
 * or the members found missing or stale marked lost - raising the event
 * count, and reads the write-intent maps a client that died left. Plain
 * pool: nothing to do.
 */
int remote_claim(struct remote *r);
/*
 * After remote_claim, once the layer above can judge data blocks (its
 * metadata loaded, nothing written to the data yet): the copies of every
 * region the dead client's intent map marked are made to agree (block by
 * block the first copy j calls right, else the majority or first copy;
 * the stripes' parity coded anew from data j does not call wrong), the
 * marks cleared, the keeper thread started (intent map sweeps, lost members
 * that answer again) and a stale member's rebuild started: none of them
 * runs before. Every read-write mount of a set calls it once, a new set
 * too. j is kept: a rebuild takes a block that fails it from another copy
 * where it passes, until remote_judge_drop. 0 or -errno.
 */
int remote_recover(struct remote *r, const struct remote_judge *j);
/* the judge remote_recover was given is going away: a later rebuild copies without it */
void remote_judge_drop(struct remote *r);

/* copy [off, off+len) of the pool into buf / from buf into the pool (any size) */
int remote_read(struct remote *r, uint64_t off, void *buf, size_t len);
int remote_write(struct remote *r, uint64_t off, const void *buf, size_t len);
/* vectored forms: one request per iovec entry */
int remote_readv(struct remote *r, const uint64_t *offs, const struct iovec *iov, int cnt);
int remote_writev(struct remote *r, const uint64_t *offs, const struct iovec *iov, int cnt);
/* write len zero bytes at off */
int remote_zero(struct remote *r, uint64_t off, uint64_t len);
/*
 * One copy of a range inside one unit (data checksums: a block that does
 * not match is read from each copy, and the good one written over the bad).
 * Copy k < remote_copies() is the k-th in placement order; a plain pool has
 * one, the pool. -EHOSTDOWN when that copy's member is not up, -EINVAL for
 * a range outside one unit or block 0. remote_write_copy notes the write in
 * the intent map first, as every write to a set does.
 *
 * In an erasure-coded set's stripes (remote_copy_decodes) the copies are
 * alternatives: 0 is the data fragment, k >= 1 the range decoded from the
 * other data fragments and parity k - 1 alone (so a bad parity shows as the
 * one alternative that does not match). Each decode reads ec_k fragments:
 * read 0 first, and the others only if it is bad. remote_write_copy(0)
 * writes the data fragment; k >= 1 codes parity k - 1 anew over the range
 * from the bytes given and the other data fragments.
 */
unsigned int remote_copies(const struct remote *r);
bool remote_copy_decodes(const struct remote *r, uint64_t off);
int remote_read_copy(struct remote *r, uint64_t off, void *buf, size_t len, unsigned int k);
int remote_write_copy(struct remote *r, uint64_t off, const void *buf, size_t len, unsigned int k);
/*
 * What copy k of off is, for messages: "copy on HOST", in the stripes "data
 * fragment on HOST" or "decode with the parity on HOST" (a string that stays).
 */
const char *remote_copy_name(struct remote *r, uint64_t off, unsigned int k);

/*
 * 64-bit atomics on an 8-byte aligned offset in block 0 (a plain pool: any
 * offset); on a set they apply to every in-sync member, and a member whose
 * old value differs from the first's is -ESTALE. *old: the first member's.
 */
int remote_cas(struct remote *r, uint64_t off, uint64_t compare, uint64_t swap, uint64_t *old);
int remote_fetch_add(struct remote *r, uint64_t off, uint64_t add, uint64_t *old);

/*
 * Each member's own block 0: the lease lives there, one per member
 * (super.c). i < remote_nmembers(); a member that is neither up nor being
 * rebuilt is -EHOSTDOWN. Connection failures on a set member drop it
 * (remote_member_lost) and return -EHOSTDOWN.
 */
unsigned int remote_nmembers(const struct remote *r);
bool remote_member_up(const struct remote *r, unsigned int i); /* connected, in sync */
/* being rebuilt: written to, not read yet (the remote_member_* calls reach it too) */
bool remote_member_joining(const struct remote *r, unsigned int i);
const char *remote_member_name(const struct remote *r, unsigned int i);
int remote_member_read(struct remote *r, unsigned int i, uint64_t off, void *buf, size_t len);
int remote_member_write(struct remote *r, unsigned int i, uint64_t off, const void *buf,
			size_t len);
int remote_member_cas(struct remote *r, unsigned int i, uint64_t off, uint64_t compare,
		      uint64_t swap, uint64_t *old); /* unfenced (member.h) */
int remote_member_fetch_add(struct remote *r, unsigned int i, uint64_t off, uint64_t add,
			    uint64_t *old); /* unfenced */
int remote_member_fence(struct remote *r, unsigned int i, uint64_t victim);
/*
 * Take member i out of the set (why: for the log): its record state
 * becomes lost on every member still in sync. Returns once that is
 * written (or the filesystem failed: some unit has no copy left, or the
 * records could not be written). -EIO when failed.
 */
int remote_member_lost(struct remote *r, unsigned int i, const char *why);
/*
 * Put blank memserver addr ("host:port") in the place of member old (its
 * address, pool id or "memberN"), which must be lost, and rebuild it in the
 * background; -errno with *err_msg. The state text shows the progress, and
 * the message of the last replace that failed ("replace_error ...").
 *
 * rmemfs-ctl asks for it by setting REMOTE_REPLACE_XATTR on the mount's root
 * to "OLD NEW" (the FUSE front end: root or the mount's owner only).
 */
#define REMOTE_REPLACE_XATTR "user.rmemfs.replace"
int remote_replace(struct remote *r, const char *old, const char *addr, char **err_msg);
/* stop background work that writes (the rebuild) before the lease goes */
void remote_quiesce(struct remote *r);
/*
 * What the layer above knows of a data block's bytes (the data checksums):
 * block(ctx, off, blk) is 1 when the LAYOUT_BLOCK bytes at blk are right
 * for the block at address off, 0 when they are not, -1 when it cannot
 * tell (not a data block, or one without a checksum). Called from the
 * thread of remote_recover or remote_scrub, with no lock of this layer
 * held that the caller's writers take.
 */
struct remote_judge {
	int (*block)(void *ctx, uint64_t off, const void *blk);
	void *ctx;
};

/*
 * rmemfs-fsck's check of a member set: every unit's copies (and the
 * superblock) compared across the members that are up; with repair the
 * reference copy (the majority of three, else the first in placement
 * order) is written over a differing one - block by block the first copy
 * the judge (if any) calls right, so a copy that fails its checksum is
 * never written over one that passes. On an erasure-coded set every
 * stripe's parity is compared with its data too, and with repair coded
 * anew from it, after a data block the judge calls wrong was decoded from
 * a parity, where that decode is right. One line per finding through
 * report. A plain pool has nothing to compare: 0.
 */
struct remote_scrub {
	const struct remote_judge *judge; /* NULL: the copies alone decide */
	bool repair;
	void (*report)(void *ctx, const char *line);
	void *ctx;
	unsigned int differ, repaired; /* out */
	/* out: stripes not checked: a data fragment down and no spare parity, or no parity up */
	unsigned int unverified;
};
int remote_scrub(struct remote *r, struct remote_scrub *s);
/* a read-write mount's rule: enough members up (majority, or -o degraded)? *why if not */
int remote_quorum(struct remote *r, unsigned int held, char **why);

/*
 * The block cache's arena, chunk by chunk, on every member (member.h
 * member_arena_set and the rest; a member that joins later gets the same:
 * remote_arena_join, under set_lock, with the message naming it).
 */
int remote_arena_set(struct remote *r, void *base, size_t len, size_t chunk);
int remote_arena_add(struct remote *r, unsigned int chunk);
void remote_arena_remove(struct remote *r, unsigned int chunk);
void remote_arena_clear(struct remote *r);

/*
 * The failed state (member.h member_fail): every request fails with -EIO
 * from now on. remote_state_text renders "name value" lines for the stats
 * xattr: the plain pool's member lines, or for a set its state
 * (up|degraded|failed), replicas (of an erasure-coded set: the replicated
 * zone's copies, and a line "ec K+M"), and one line per member.
 */
void remote_fail(struct remote *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
bool remote_failed(const struct remote *r);
ssize_t remote_state_text(struct remote *r, char *buf, size_t cap);

/* write fencing (member.h): on every member */
void remote_set_write_deadline(struct remote *r, uint64_t deadline_ns);

#endif /* RMEM_REMOTE_H */
