// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * remote_arena.c - the block cache's arena on every member of the set: its
 * place (remote_arena_set), its chunks offered and withdrawn as the cache
 * grows and gives memory back, and a member that joins the set later
 * (rebuild, replace: remote_arena_join). member.c registers a chunk with
 * each channel on first use.
 */
#define G_LOG_DOMAIN "rmemfs-remote"

#include <errno.h>

#include <glib.h>

#include "member.h"
#include "remote_int.h"

int remote_arena_set(struct remote *r, void *base, size_t len, size_t chunk)
{
	unsigned int i, k;
	int rc;

	pthread_mutex_lock(&r->set_lock);
	for (i = 0; i < r->n; i++) {
		if (!r->mem[i].m)
			continue;
		rc = member_arena_set(r->mem[i].m, base, len, chunk);
		if (rc < 0) {
			for (k = 0; k < i; k++)
				member_arena_clear(r->mem[k].m);
			pthread_mutex_unlock(&r->set_lock);
			return rc;
		}
	}
	r->arena = base;
	r->arena_len = len;
	r->arena_chunk = chunk;
	r->arena_on = g_new0(bool, (len + chunk - 1) / chunk);
	pthread_mutex_unlock(&r->set_lock);
	return 0;
}

int remote_arena_add(struct remote *r, unsigned int chunk)
{
	unsigned int i, k;
	int rc = 0;

	pthread_mutex_lock(&r->set_lock);
	for (i = 0; i < r->n; i++) {
		if (!r->mem[i].m)
			continue;
		rc = member_arena_add(r->mem[i].m, chunk);
		if (rc < 0) {
			for (k = 0; k < i; k++)
				member_arena_remove(r->mem[k].m, chunk);
			break;
		}
	}
	if (rc == 0)
		r->arena_on[chunk] = true;
	pthread_mutex_unlock(&r->set_lock);
	return rc;
}

void remote_arena_remove(struct remote *r, unsigned int chunk)
{
	unsigned int i;

	pthread_mutex_lock(&r->set_lock);
	for (i = 0; i < r->n; i++)
		member_arena_remove(r->mem[i].m, chunk);
	r->arena_on[chunk] = false;
	pthread_mutex_unlock(&r->set_lock);
}

void remote_arena_clear(struct remote *r)
{
	unsigned int i;

	if (!r || !r->arena)
		return;
	pthread_mutex_lock(&r->set_lock);
	for (i = 0; i < r->n; i++)
		member_arena_clear(r->mem[i].m);
	g_free(r->arena_on);
	r->arena_on = NULL;
	r->arena = NULL;
	r->arena_len = r->arena_chunk = 0;
	pthread_mutex_unlock(&r->set_lock);
}

void remote_arena_join(struct remote *r, struct member *m, const char *name)
{
	size_t i, n;

	if (!r->arena)
		return;
	n = (r->arena_len + r->arena_chunk - 1) / r->arena_chunk;
	if (member_arena_set(m, r->arena, r->arena_len, r->arena_chunk) < 0)
		goto fail;
	for (i = 0; i < n; i++)
		if (r->arena_on[i] && member_arena_add(m, (unsigned int)i) < 0)
			goto fail;
	return;
fail:
	g_message("%s: the cache arena is not registered: its transfers are copied", name);
}
