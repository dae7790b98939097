/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * reqstats.h - how many FUSE requests of each kind the daemon served and how
 * long it took over them, for the stats xattr (user.rmemfs.stats).
 *
 * devio.c sees every request and reply (devio.h): reqstats_read notes a
 * request on the thread that read it, reqstats_reply adds the time from that
 * read to its reply when the reply is written on the same thread, which is
 * how libfuse serves every request that is not answered later from another
 * thread (a direct write waiting for an invalidation, inval.h): those count,
 * but their time does not. Requests without a reply (FORGET) count only.
 * The time is the daemon's: from the read() that returned the request to
 * the writev() of its reply, not the kernel's queueing before it.
 */
#ifndef RMEM_REQSTATS_H
#define RMEM_REQSTATS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#define REQSTATS_OPCODES 64 /* FUSE opcodes below this are counted (52 in FUSE 7.40) */

/* all zero: nothing counted yet */
struct reqstats {
	uint64_t count[REQSTATS_OPCODES]; /* requests read (atomic) */
	uint64_t timed[REQSTATS_OPCODES]; /* of them, replied on the reading thread (atomic) */
	uint64_t ns[REQSTATS_OPCODES]; /* the sum of their times (atomic) */
	uint64_t ring; /* of all requests, those that came over the FUSE ring (atomic, ring.h) */
};

/* a request of n bytes was read into buf on this thread */
void reqstats_read(struct reqstats *s, const void *buf, size_t n);

/* the request just noted came over the FUSE ring, not /dev/fuse */
void reqstats_ring(struct reqstats *s);

/* this thread writes the reply iov[0..count) (a notification, unique 0, is ignored) */
void reqstats_reply(struct reqstats *s, const struct iovec *iov, int count);

/*
 * "fuse_NAME COUNT\nfuse_NAME_us MEAN\n" per kind of request seen (MEAN:
 * the mean time of the timed ones, in us, one decimal), then
 * "fuse_ring_requests N\n", into buf; its length, or -ERANGE when cap is too
 * small
 */
ssize_t reqstats_text(const struct reqstats *s, char *buf, size_t cap);

#endif /* RMEM_REQSTATS_H */
