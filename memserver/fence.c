/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * fence.c - the memserver's fenced client ids (PROTO_FENCE).
 *
 * A lease holder presents its lease owner value as its client id on every
 * connection (HELLO, QP_EXCHANGE, the RDMA CM private data). A client that
 * took the lease over sends FENCE(old id) on its connection to a pool: the id
 * goes into that pool's set, which every later connect to the pool is
 * checked against, and each transport server's revoke hook cuts the
 * connections to that pool presenting it, returning only when none of their
 * writes can land any more. The FENCE reply waits for that. Fencing is per
 * pool: another pool's clients, even presenting the same id, are untouched.
 * A forced POOL_DELETE revokes every connection of the pool the same way.
 *
 * Why no connection escapes. A server publishes a new connection's id in its
 * own list and checks the set under its own lock (memserver_admit inside
 * it); a fence adds to the set first, then walks each list under that lock.
 * If the connect's check came first, the connection was listed before the
 * walk took the lock, so the walk revokes it; otherwise the check sees the
 * id and refuses the connect. A deletion marks the pool deleting (registry
 * lock) before its walk, and the connect checks that mark the same way.
 *
 * The set lives in memory only: a restarted memserver has forgotten it. That
 * is acceptable: a restart drops every connection, a pool without a backing
 * file comes back blank (clients refuse another pool_id), and with one the
 * old holder is still bound by its time-based write deadline (super.c): it
 * renews that deadline only after reading its own id in the owner word, which
 * now names the new holder. A silent holder's deadline passed before anyone
 * could take over; a live one forced out (fsck --force) may write until its
 * current deadline or next heartbeat, as before server fencing existed.
 *
 * Lock order: revoke_lock (read) -> a server's lock -> fence_lock or the
 * registry lock.
 */
#define G_LOG_DOMAIN "rmemfs-memserver"

#include <errno.h>
#include <glib.h>
#include <inttypes.h>
#include <stdlib.h>

#include "memserver.h"

void memserver_fence_init(struct memserver *ms)
{
	pthread_mutex_init(&ms->fence_lock, NULL);
	pthread_rwlock_init(&ms->revoke_lock, NULL);
}

void memserver_fence_destroy(struct memserver *ms)
{
	pthread_rwlock_destroy(&ms->revoke_lock);
	pthread_mutex_destroy(&ms->fence_lock);
}

void memserver_set_revoke(struct memserver *ms, enum memserver_side side, memserver_revoke_fn fn,
			  void *ctx)
{
	pthread_rwlock_wrlock(&ms->revoke_lock);
	ms->revoke[side] = fn;
	ms->revoke_ctx[side] = fn ? ctx : NULL;
	pthread_rwlock_unlock(&ms->revoke_lock);
}

/* fence_lock held */
static bool fence_find(const struct registry_pool *p, uint64_t client_id)
{
	size_t i;

	for (i = 0; i < p->nfenced; i++) {
		if (p->fenced[i] == client_id)
			return true;
	}
	return false;
}

int memserver_admit(struct memserver *ms, struct registry_pool *p, uint64_t client_id)
{
	bool found = false, deleting;

	if (client_id) {
		pthread_mutex_lock(&ms->fence_lock);
		found = fence_find(p, client_id);
		pthread_mutex_unlock(&ms->fence_lock);
	}
	if (found)
		return -EKEYREVOKED;
	pthread_mutex_lock(&ms->reg.lock);
	deleting = p->deleting;
	pthread_mutex_unlock(&ms->reg.lock);
	return deleting ? -ENOENT : 0;
}

/* add to the pool's set (a takeover is rare: a linear array is plenty). 0 or -ENOMEM */
static int fence_add(struct memserver *ms, struct registry_pool *p, uint64_t client_id)
{
	int rc = 0;

	pthread_mutex_lock(&ms->fence_lock);
	if (fence_find(p, client_id))
		goto unlock;
	if (p->nfenced == p->fenced_cap) {
		size_t cap = p->fenced_cap ? 2 * p->fenced_cap : 16;
		uint64_t *ids = realloc(p->fenced, cap * sizeof(*ids));

		if (!ids) {
			rc = -ENOMEM;
			goto unlock;
		}
		p->fenced = ids;
		p->fenced_cap = cap;
	}
	p->fenced[p->nfenced++] = client_id;
unlock:
	pthread_mutex_unlock(&ms->fence_lock);
	return rc;
}

/* every side's hook for (p, client_id); the number of connections revoked */
static unsigned int fence_revoke(struct memserver *ms, struct registry_pool *p,
				 uint64_t client_id)
{
	unsigned int revoked = 0;
	int side;

	pthread_rwlock_rdlock(&ms->revoke_lock);
	for (side = 0; side < MEMSERVER_SIDES; side++) {
		if (ms->revoke[side])
			revoked += ms->revoke[side](ms->revoke_ctx[side], p, client_id);
	}
	pthread_rwlock_unlock(&ms->revoke_lock);
	return revoked;
}

int memserver_fence(struct memserver *ms, struct registry_pool *p, uint64_t client_id)
{
	unsigned int revoked;
	int rc;

	if (!client_id)
		return -EINVAL;
	rc = fence_add(ms, p, client_id);
	if (rc)
		return rc;
	revoked = fence_revoke(ms, p, client_id);
	g_message("client %016" PRIx64 " fenced: %u connection(s) revoked, later ones refused "
		  "(pool '%s')", client_id, revoked, p->name);
	return 0;
}

unsigned int memserver_revoke_pool(struct memserver *ms, struct registry_pool *p)
{
	return fence_revoke(ms, p, 0);
}
