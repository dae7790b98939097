/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * refusal.h - a memserver's refusal to open a pool, in words. Connecting
 * to a named pool (HOST:PORT/NAME) may meet statuses a default pool never
 * did: no room for the pool to be created, the name taken by another
 * tenant, a token that may not reach the pool, no pool of that name, a
 * memserver that serves named pools only, or one that predates them. The
 * transport turns each into an errno (proto_status_to_errno); this turns
 * the errno back into the sentence a user can act on. rmemfs (one server
 * or a member set), rmemfs-fsck, rmemfs-ctl replace and rmem-perf say them
 * alike.
 */
#ifndef RMEM_REFUSAL_H
#define RMEM_REFUSAL_H

#include "xport.h"

/*
 * The words for rc, what connecting with p (host, port, pool,
 * pool_create_size, token) failed with, when rc is such a refusal:
 * g_malloc'd. NULL for any other error (the caller says it as it did).
 * create_how: how this program creates a missing pool ("-o format,size=SIZE"),
 * for the no-such-pool sentence; NULL: it does not.
 * For no room it asks the server for its free capacity (POOL_LIST on a
 * control session, poolctl.h); for no such pool it checks that the host
 * name resolves (-ENOENT is also what a name that does not resolve gives).
 */
char *refusal_text(const struct xport_params *p, int rc, const char *create_how);

#endif /* RMEM_REFUSAL_H */
