// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * refusal.c - a memserver's refusal to open a pool, in words (refusal.h).
 * The sentences are the ones rmemfs(8) lists under "Named pools".
 */
#define G_LOG_DOMAIN "rmemfs-xport"

#include "refusal.h"

#include <errno.h>
#include <netdb.h>

#include <glib.h>

#include "net.h"
#include "poolctl.h"
#include "units.h"

/* "HOST:PORT has no room for a SIZE pool", with the free capacity if the server says it */
static char *refusal_nospace(const struct xport_params *p, const char *addr)
{
	int timeout = p->connect_timeout_ms > 0 ? p->connect_timeout_ms : 5000;
	struct proto_pool_list l = { 0 };
	char size[32], free_s[32], cap[32];
	char *text;
	int fd, rc;

	units_format_size(p->pool_create_size, size, sizeof(size));
	rc = poolctl_open(p->host, p->port, p->token_hash, timeout, &fd);
	if (rc == 0) {
		rc = poolctl_list(fd, timeout, &l);
		poolctl_close(fd);
	}
	if (rc < 0) {
		g_debug("%s: POOL_LIST for the free capacity: %s", addr, g_strerror(-rc));
		return g_strdup_printf("%s has no room for a %s pool", addr, size);
	}
	units_format_size(l.free, free_s, sizeof(free_s));
	units_format_size(l.capacity, cap, sizeof(cap));
	if (l.free >= p->pool_create_size)
		text = g_strdup_printf("%s has no room for another pool (it serves as many as it "
				       "can); %s free of %s", addr, free_s, cap);
	else
		text = g_strdup_printf("%s has no room for a %s pool: %s free of %s", addr, size,
				       free_s, cap);
	proto_pool_list_clear(&l);
	return text;
}

/* -ENOENT from connecting: a name that does not resolve, or a server without that pool */
static bool refusal_resolves(const struct xport_params *p)
{
	struct addrinfo *res;

	if (net_resolve(p->host, p->port, false, &res) < 0)
		return false;
	freeaddrinfo(res);
	return true;
}

char *refusal_text(const struct xport_params *p, int rc, const char *create_how)
{
	const char *pool = p->pool && *p->pool ? p->pool : NULL;
	char addr[112];

	net_format_server_pool(addr, sizeof(addr), p->host, p->port, NULL);
	switch (rc) {
	case -ENOSPC:
		return pool && p->pool_create_size ? refusal_nospace(p, addr) : NULL;
	case -EEXIST:
		return pool ? g_strdup_printf("pool %s on %s is another tenant's (name taken)", pool,
					      addr) : NULL;
	case -EKEYREJECTED:
		if (pool)
			return g_strdup_printf("the token may not reach pool %s on %s", pool, addr);
		return g_strdup_printf("the token may not reach the default pool of %s (a tenant "
				       "names one of its pools, as %s/NAME)", addr, addr);
	case -ENOENT:
		if (!refusal_resolves(p))
			return NULL;
		if (pool && create_how)
			return g_strdup_printf("%s has no pool %s (create it with %s)", addr, pool,
					       create_how);
		if (pool)
			return g_strdup_printf("%s has no pool %s", addr, pool);
		return g_strdup_printf("%s serves named pools only: name one, as %s/NAME", addr,
				       addr);
	case -EBADMSG:
		return pool ? g_strdup_printf("%s does not serve named pools (an older memserver?)",
					      addr) : NULL;
	default:
		return NULL;
	}
}
