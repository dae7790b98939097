/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * remote_int.h - what remote.c (opening a member set, its records and
 * states) and remote_io.c (the data path over the members) share.
 *
 * Locking: the members' runtime state (up, recorded) changes only under
 * set_lock, which is also held while the records are written; the data
 * path reads it with atomics and takes set_lock only to wait for a loss to
 * be recorded. Nothing else is taken under set_lock but the members' own
 * locks (member.h), through the record writes.
 */
#ifndef RMEM_REMOTE_INT_H
#define RMEM_REMOTE_INT_H

#include <pthread.h>
#include <stdatomic.h>

#include "layout.h"
#include "place.h"
#include "remote.h"

struct remote_member {
	struct member *m; /* NULL: never reached */
	char name[LAYOUT_SET_ADDR_LEN]; /* "host:port" */
	atomic_bool up; /* connected and in sync: read and written */
	atomic_bool recorded; /* not up, and the records say so */
	atomic_uint inflight; /* requests on it now: reads go to the least busy copy */
};

struct remote {
	bool set; /* false: a plain pool, mem[0] only, offsets unchanged */
	bool fresh; /* a blank set not claimed yet: block 0 reads as zeros */
	bool claimed; /* the records are ours to write (lease held) */
	bool degraded; /* -o degraded */
	unsigned int n; /* members */
	struct remote_member mem[LAYOUT_SET_MAX];
	struct layout_set_info info; /* the records' truth; under set_lock */
	struct place place;
	uint64_t unit; /* bytes per unit */
	uint64_t size;
	uint64_t client_id;
	char *name; /* the servers as given, for messages */
	atomic_bool failed;
	atomic_uint unrecorded; /* members down whose loss the records do not show yet */
	pthread_mutex_t set_lock;
	char *failure; /* under set_lock */
};

/* a member request failed with rc: is the member gone (drop it), not the request wrong? */
bool remote_member_gone(struct remote *r, unsigned int i, int rc);
/* after a write: wait until every member that is down is recorded lost */
void remote_wait_recorded(struct remote *r);

#endif /* RMEM_REMOTE_INT_H */
