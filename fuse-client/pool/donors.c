// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * donors.c - the member set of a pool among candidate memservers
 * (donors.h): reading the candidates, asking each for its pools and free
 * capacity, and either choosing new members (donor_pick.c) or finding the
 * ones that hold the pool.
 */
#define G_LOG_DOMAIN "rmemfs-remote"

#include "donors.h"

#include <errno.h>
#include <string.h>

#include <glib.h>

#include "donor_pick.h"
#include "net.h"
#include "poolctl.h"
#include "units.h"

#define DONORS_MIB (1ULL << 20)

struct donor {
	char *host;
	uint16_t port;
	char addr[80]; /* "host:port", for messages */
	bool reached;
	uint64_t free_bytes; /* 0 when not reached */
	bool holds; /* it has pool NAME (one the token reaches) */
};

/* the candidates of file into *out (g_free each host, then the array); 0 or -errno */
static int donors_read(const char *file, struct donor **out, unsigned int *n, char **err_msg)
{
	GError *gerr = NULL;
	struct donor *d;
	char *text, **lines;
	unsigned int i, k = 0;
	int rc = 0;

	*out = NULL;
	*n = 0;
	if (!g_file_get_contents(file, &text, NULL, &gerr)) {
		*err_msg = g_strdup_printf("donors=%s: %s", file, gerr->message);
		g_error_free(gerr);
		return -EINVAL;
	}
	lines = g_strsplit(text, "\n", -1);
	g_free(text);
	d = g_new0(struct donor, g_strv_length(lines) + 1);
	for (i = 0; lines[i] && !rc; i++) {
		char *line = lines[i], *hash = strchr(line, '#');

		if (hash)
			*hash = 0;
		g_strstrip(line);
		if (!*line)
			continue;
		if (k == DONOR_PICK_MAX || strchr(line, '/') ||
		    net_parse_server(line, &d[k].host, &d[k].port) < 0) {
			*err_msg = g_strdup_printf("donors=%s, line %u: %s", file, i + 1,
						   k == DONOR_PICK_MAX ? "more than 256 candidates" :
						   "expected one HOST[:PORT] (the pool's name is the source "
						   "argument)");
			rc = -EINVAL;
			break;
		}
		net_format_server_pool(d[k].addr, sizeof(d[k].addr), d[k].host, d[k].port, NULL);
		k++;
	}
	g_strfreev(lines);
	if (!rc && !k) {
		*err_msg = g_strdup_printf("donors=%s names no memserver", file);
		rc = -EINVAL;
	}
	*out = d;
	*n = k;
	return rc;
}

/* ask candidate d for its free capacity and whether it holds pool name */
static void donors_ask(struct donor *d, const struct donors_request *rq)
{
	int timeout = rq->params->connect_timeout_ms > 0 ? rq->params->connect_timeout_ms : 5000;
	struct proto_pool_list l = { 0 };
	unsigned int i;
	int fd, rc;

	rc = poolctl_open(d->host, d->port, rq->params->token_hash, timeout, &fd);
	if (rc == 0) {
		rc = poolctl_list(fd, timeout, &l);
		poolctl_close(fd);
	}
	if (rc < 0) {
		g_message("donors: %s: %s (skipped)", d->addr, g_strerror(-rc));
		return;
	}
	d->reached = true;
	d->free_bytes = l.free;
	for (i = 0; i < l.npools; i++)
		if (!strcmp(l.pools[i].name, rq->name))
			d->holds = true;
	proto_pool_list_clear(&l);
}

/* "h1:p1 8.0 GiB free, h2:p2 unreachable, ..." */
static char *donors_describe(const struct donor *d, unsigned int n)
{
	GString *s = g_string_new(NULL);
	unsigned int i;
	char sz[32];

	for (i = 0; i < n; i++) {
		units_format_size(d[i].free_bytes, sz, sizeof(sz));
		g_string_append_printf(s, "%s%s %s%s", i ? ", " : "", d[i].addr,
				       d[i].reached ? sz : "unreachable", d[i].reached ? " free" : "");
	}
	return g_string_free(s, FALSE);
}

static uint32_t donors_rand(void *ctx, uint32_t bound)
{
	return (uint32_t)g_random_int_range(0, (gint32)bound);
}

static void donors_add(struct remote_server *out, unsigned int *n, const struct donor *d,
		       const char *name)
{
	out[*n].host = g_strdup(d->host);
	out[*n].port = d->port;
	out[*n].pool = g_strdup(name);
	(*n)++;
}

/* a new set: want members with room for the pool, by power of two choices */
static int donors_choose(const struct donors_request *rq, struct donor *d, unsigned int nd,
			 struct remote_server *out, unsigned int *n, char **err_msg)
{
	uint64_t need = (rq->size + DONORS_MIB - 1) & ~(DONORS_MIB - 1);
	uint64_t *free_bytes = g_new0(uint64_t, nd);
	unsigned int *pick = g_new0(unsigned int, rq->want);
	char sz[32], *list;
	unsigned int i;
	int rc;

	units_format_size(need, sz, sizeof(sz));
	for (i = 0; i < nd; i++) {
		if (d[i].holds) {
			*err_msg = g_strdup_printf("%s already holds a pool %s: mount the set without "
						   "format (or choose another name)", d[i].addr,
						   rq->name);
			rc = -EEXIST;
			goto out;
		}
		free_bytes[i] = d[i].reached ? d[i].free_bytes : 0;
	}
	rc = donor_pick(free_bytes, nd, need, rq->want, donors_rand, NULL, pick);
	if (rc < 0) {
		list = donors_describe(d, nd);
		*err_msg = g_strdup_printf("fewer than %u of the candidates in %s have room for a %s "
					   "pool: %s", rq->want, rq->file, sz, list);
		g_free(list);
		goto out;
	}
	for (i = 0; i < rq->want; i++) {
		char fr[32];

		units_format_size(d[pick[i]].free_bytes, fr, sizeof(fr));
		g_message("donors: pool %s of %s on %s (%s free)", rq->name, sz, d[pick[i]].addr, fr);
		donors_add(out, n, &d[pick[i]], rq->name);
	}
out:
	g_free(free_bytes);
	g_free(pick);
	return rc;
}

int donors_resolve(const struct donors_request *rq, struct remote_server *out, unsigned int max,
		   unsigned int *n, char **err_msg)
{
	struct donor *d = NULL;
	unsigned int nd = 0, i, held = 0;
	int rc;

	*n = 0;
	*err_msg = NULL;
	if (rq->create && rq->want > max) {
		*err_msg = g_strdup_printf("a member set has at most %u members", max);
		return -EINVAL;
	}
	rc = donors_read(rq->file, &d, &nd, err_msg);
	if (rc < 0)
		goto out;
	for (i = 0; i < nd; i++) {
		donors_ask(&d[i], rq);
		held += d[i].holds;
	}
	if (rq->create) {
		rc = donors_choose(rq, d, nd, out, n, err_msg);
	} else if (!held) {
		*err_msg = g_strdup_printf("no candidate in %s holds a pool %s the token reaches "
					   "(create the set with -o format,size=SIZE and replicas=R "
					   "or ec=K+M)", rq->file, rq->name);
		rc = -ENOENT;
	} else if (held > max) {
		*err_msg = g_strdup_printf("%u candidates in %s hold a pool %s: a member set has at "
					   "most %u", held, rq->file, rq->name, max);
		rc = -E2BIG;
	} else {
		for (i = 0; i < nd; i++)
			if (d[i].holds)
				donors_add(out, n, &d[i], rq->name);
	}
out:
	if (rc < 0) {
		remote_servers_free(out, *n);
		*n = 0;
	}
	for (i = 0; d && i < nd; i++)
		g_free(d[i].host);
	g_free(d);
	return rc;
}
