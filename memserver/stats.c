/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * stats.c - the memserver's counters as a client sees them (PROTO_STATS).
 * The counters in memserver.stats (a struct proto_stats) are bumped with relaxed atomics by
 * every connection thread; a snapshot reads each one atomically (the set as a
 * whole is not a consistent cut, which is fine for statistics).
 */
#include <string.h>

#include "memserver.h"

static uint64_t stats_load(const uint64_t *counter)
{
	return __atomic_load_n(counter, __ATOMIC_RELAXED);
}

void memserver_stats_snapshot(const struct memserver *ms, struct proto_stats *out)
{
	const struct proto_stats *s = &ms->stats;

	memset(out, 0, sizeof(*out));
	out->clients_now = stats_load(&s->clients_now);
	out->clients_total = stats_load(&s->clients_total);
	out->auth_failures = stats_load(&s->auth_failures);
	out->bad_requests = stats_load(&s->bad_requests);
	out->reads = stats_load(&s->reads);
	out->writes = stats_load(&s->writes);
	out->atomics = stats_load(&s->atomics);
	out->bytes_read = stats_load(&s->bytes_read);
	out->bytes_written = stats_load(&s->bytes_written);
	out->rdma_connections = stats_load(&s->rdma_connections);
}
