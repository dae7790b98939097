/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * tenant.h - who a client is: the admin (--token-file, or anyone when no
 * token is configured at all) or a tenant (one token file per tenant in
 * --token-dir; the file name is the tenant's name). The admin reaches every
 * pool; a tenant only the pools it owns (pool owner == its name). The set is
 * loaded once at start and read-only afterwards, so lookups need no lock.
 */
#ifndef RMEM_MEMSERVER_TENANT_H
#define RMEM_MEMSERVER_TENANT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto.h"

struct tenant {
	char name[PROTO_POOL_NAME_MAX];
	uint8_t token_hash[PROTO_TOKEN_HASH_LEN];
};

struct tenant_set {
	bool have_admin; /* --token-file given */
	uint8_t admin_hash[PROTO_TOKEN_HASH_LEN];
	struct tenant *tenants; /* from --token-dir */
	unsigned int ntenants;
};

/* an authenticated client */
struct tenant_who {
	bool admin;
	char name[PROTO_POOL_NAME_MAX]; /* the tenant; "" for the admin */
};

/*
 * Load --token-dir: every entry must be a readable token file whose name is a
 * valid pool name (proto_pool_name_valid), and no two tokens (the admin's
 * included, so set it first) may be equal. 0, or -errno with a one-line
 * explanation in @why.
 */
int tenant_load_dir(struct tenant_set *ts, const char *dir, char *why, size_t why_len);

/* no token configured at all: every client is the admin */
bool tenant_open_to_all(const struct tenant_set *ts);

/* the client presenting @hash: 0 and *who, or -EPERM when it matches nobody */
int tenant_identify(const struct tenant_set *ts, const uint8_t hash[PROTO_TOKEN_HASH_LEN],
		    struct tenant_who *who);

/* may @who reach a pool owned by @owner ("" = the admin's)? */
bool tenant_may_reach(const struct tenant_who *who, const char *owner);

/* is @name a tenant of the set? */
bool tenant_known(const struct tenant_set *ts, const char *name);

/* free the tenants; NULL-tolerant */
void tenant_set_clear(struct tenant_set *ts);

#endif /* RMEM_MEMSERVER_TENANT_H */
