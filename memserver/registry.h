/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * registry.h - the pools one memserver serves: the default pool (name "",
 * the admin's) and named pools created on demand, all sharing one capacity.
 *
 * A struct registry_pool is one served pool: its mapping (struct pool, from
 * pool.c), name, owner, the TCP descriptor packed once, its connections and
 * its fenced client ids. It is reference counted: the registry holds one
 * while the pool is listed, each connection bound to it one (registry_open
 * .. registry_close), and a caller that looked it up for a moment one
 * (registry_put). A deleted pool leaves the name table at once (its name is
 * free again) but keeps its memory, and its share of the capacity, until the
 * last reference drops; then the release hook runs (the RDMA side frees the
 * pool's protection domains and memory regions), the memory is unmapped, and
 * only then is its size given back to the free capacity.
 *
 * Capacity. `used` counts every pool whose memory is mapped or being mapped;
 * a creation reserves its size under the lock before mapping, so the sum of
 * sizes never exceeds the capacity, whatever creations and deletions race.
 * A creation in progress holds its name (lookups of it wait until it is done).
 *
 * Lock order: a server's own lock -> registry lock -> nothing (the release
 * hook and pool_open/pool_close run with no registry lock held). Nobody may
 * drop a reference while holding a lock the release hook takes (rdma_server.c
 * defers its puts until it let go of its lock).
 *
 * Functions returning uint32_t return a proto_status for the client.
 */
#ifndef RMEM_MEMSERVER_REGISTRY_H
#define RMEM_MEMSERVER_REGISTRY_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto.h"
#include "tenant.h"

struct pool;

struct registry_pool {
	/* immutable while the pool is reachable */
	struct pool *pool;
	char name[PROTO_POOL_NAME_MAX]; /* "" for the default pool */
	char owner[PROTO_POOL_NAME_MAX]; /* the tenant; "" for the admin */
	uint64_t size;
	uint64_t pool_id;
	uint8_t *tcp_wire; /* the TCP descriptor, packed once for every HELLO */
	size_t tcp_wire_len;
	char *path; /* its file in --backing-dir (removed at delete), or NULL */

	/* protected by the registry lock */
	struct registry_pool *next; /* every pool with memory */
	unsigned int refs;
	unsigned int conns; /* connections bound now */
	unsigned int nlease; /* of them, those presenting a non-zero client id */
	uint64_t client_id; /* the last non-zero client id bound; 0 when nlease is 0 */
	bool creating; /* being mapped: lookups wait */
	bool deleting; /* out of the name table; memory goes with the last reference */

	/* fenced client ids (fence.c), protected by the memserver's fence_lock */
	uint64_t *fenced;
	size_t nfenced;
	size_t fenced_cap;
};

/* called when a pool's last reference dropped, before its memory is unmapped */
typedef void (*registry_release_fn)(void *ctx, struct registry_pool *p);

struct registry {
	/* set by registry_init, read-only afterwards */
	uint64_t capacity;
	uint64_t chunk_size; /* named pools' region size (grown to fit PROTO_MAX_REGIONS) */
	bool hugepages;
	const char *backing_dir; /* NULL: named pools in anonymous memory */
	const struct tenant_set *tenants;

	pthread_mutex_t lock; /* protects everything below and each pool's counters */
	pthread_cond_t created; /* a creation finished (or failed) */
	struct registry_pool *pools;
	struct registry_pool *deflt; /* the default pool, or NULL */
	unsigned int npools; /* pools with memory, deleting ones included */
	uint64_t used; /* capacity held by pools with memory or being mapped */

	pthread_rwlock_t hook_lock; /* read while the hook runs, written to change it */
	registry_release_fn release;
	void *release_ctx;
};

void registry_init(struct registry *reg, uint64_t capacity, uint64_t chunk_size,
		   bool hugepages, const char *backing_dir, const struct tenant_set *tenants);
/* close every pool (no hook runs: the servers are gone); NULL-tolerant */
void registry_destroy(struct registry *reg);

/*
 * Serve @pool (opened by the caller, who gives it up even on failure) as the
 * default pool (@is_default) or a named one, at start. -ENOSPC when it does
 * not fit the capacity left, -EEXIST for a name already served, -ENOMEM.
 */
int registry_add(struct registry *reg, struct pool *pool, bool is_default, const char *path);

/*
 * Adopt every DIR/NAME.pool of the backing dir. 0, or -errno with a one-line
 * explanation in @why (a file that is not a pool, whose trailer names another
 * pool, or that does not fit the capacity left: which one and why).
 */
int registry_adopt_dir(struct registry *reg, char *why, size_t why_len);

/*
 * A connection's pool for HELLO / QP_EXCHANGE: @name "" is the default pool;
 * @create_size > 0 creates an absent pool for @who. PROTO_OK and *out (a
 * connection's reference: registry_close), or the refusal (see the contract:
 * NOPOOL, DENIED, EXIST, NOSPACE, MALFORMED, NOMEM, INTERNAL).
 */
uint32_t registry_open(struct registry *reg, const struct tenant_who *who, const char *name,
		       uint64_t create_size, uint64_t client_id, struct registry_pool **out);
/* the same by pool_id (the RDMA CM private data); 0 is the default pool; no creation */
uint32_t registry_open_id(struct registry *reg, const struct tenant_who *who, uint64_t pool_id,
			  uint64_t client_id, struct registry_pool **out);
/* a connection bound by registry_open(_id) ended; NULL-tolerant */
void registry_close(struct registry *reg, struct registry_pool *p, uint64_t client_id);

/* POOL_CREATE: PROTO_OK, or EXIST (even for its owner), NOSPACE, MALFORMED, ... */
uint32_t registry_create(struct registry *reg, const struct tenant_who *who, const char *name,
			 uint64_t size);
/*
 * POOL_DELETE: NOPOOL (absent, or not @who's), STATE (the default pool),
 * BUSY (connections, without @force). On PROTO_OK the pool is out of the name
 * table and *victim holds a reference: revoke its connections, then put it.
 */
uint32_t registry_delete(struct registry *reg, const struct tenant_who *who, const char *name,
			 bool force, struct registry_pool **victim);

/* POOL_LIST for @who (the admin: every pool). 0 or -ENOMEM; clear @out after */
int registry_list(struct registry *reg, const struct tenant_who *who,
		  struct proto_pool_list *out);

/* take one more reference to a pool the caller already holds one to */
void registry_hold(struct registry *reg, struct registry_pool *p);
/* drop a reference taken by a lookup; NULL-tolerant */
void registry_put(struct registry *reg, struct registry_pool *p);

/* install (fn != NULL) or remove the release hook */
void registry_set_release(struct registry *reg, registry_release_fn fn, void *ctx);

/* for the ready line: pools served (the default pool included) */
unsigned int registry_named_count(struct registry *reg);

#endif /* RMEM_MEMSERVER_REGISTRY_H */
