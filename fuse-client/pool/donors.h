/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * donors.h - rmemfs -o donors=FILE: the member set of pool NAME among the
 * candidate memservers FILE lists (one HOST[:PORT] a line, '#' comments).
 * Every candidate is asked for POOL_LIST on a control session (poolctl.h);
 * one that cannot be reached is skipped, with a message.
 *
 * A new set (format): the members are chosen by their free capacity
 * (donor_pick.h: power of two choices), and the set is then formatted there
 * as if "h1:p1/NAME,h2:p2/NAME,..." had been given. A later mount finds the
 * set as the candidates that hold a pool NAME the token reaches; the member
 * records decide from there, as for a set given by hand.
 */
#ifndef RMEM_DONORS_H
#define RMEM_DONORS_H

#include <stdbool.h>
#include <stdint.h>

#include "remote.h"
#include "xport.h"

struct donors_request {
	const char *file; /* the candidates */
	const char *name; /* the pool on each member (proto_pool_name_valid) */
	const struct xport_params *params; /* the token and connect timeout to ask with */
	bool create; /* choose a new set (else find the existing one) */
	uint64_t size; /* create: each pool's size */
	unsigned int want; /* create: how many members (replicas R, or K+M) */
};

/*
 * The set's servers into out[0..*n) (each with pool NAME; free with
 * remote_servers_free). 0, or -errno with *err_msg (g_malloc'd): the file
 * cannot be read or names a bad address (-EINVAL), fewer than want
 * candidates with room, each candidate's free capacity said (-ENOSPC), a
 * pool NAME already on a candidate when creating (-EEXIST), no candidate
 * holding it when not (-ENOENT), more than max holding it (-E2BIG).
 */
int donors_resolve(const struct donors_request *rq, struct remote_server *out, unsigned int max,
		   unsigned int *n, char **err_msg);

#endif /* RMEM_DONORS_H */
