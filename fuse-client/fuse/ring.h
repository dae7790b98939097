/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * ring.h - FUSE over io_uring (Linux 6.14, FUSE 7.42): the kernel hands
 * requests to per-CPU ring queues instead of /dev/fuse, and each reply goes
 * back with the command that fetches the next request - one system call a
 * request instead of a read() and a writev(), on the CPU that asked.
 *
 * libfuse 3.14 knows nothing of it, so this module does the ring itself and
 * serves what arrives through libfuse all the same: each request is laid out
 * as /dev/fuse would have delivered it and handed to fuse_session_process_buf;
 * its reply, which libfuse writes through devio (devio.h), comes back here
 * (ring_reply) and goes into the ring entry the request came in. A reply sent
 * later from another thread (inval.h) finds its entry by the request id and
 * wakes the entry's thread, the only one that submits on its io_uring.
 *
 * What still comes over /dev/fuse - INIT, FORGET, INTERRUPT, and everything
 * before the ring is registered - is served by libfuse's loop as before;
 * notifications are written there too. docs/ARCHITECTURE.md ("The FUSE
 * ring") has the threads, the memory and the teardown.
 */
#ifndef RMEM_RING_H
#define RMEM_RING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include <fuse_lowlevel.h>

#include "reqstats.h"

#define RING_DEFAULT_POLL_US 50 /* -o uring_poll= */

/* the INIT flag (flags2 bit 9) that asks for it; <linux/fuse.h> of Debian 12 predates it */
#define RING_INIT_FLAG (1ULL << 41)

/* -o uring= */
enum ring_mode {
	RING_AUTO, /* the ring where the kernel offers it, else /dev/fuse */
	RING_ON,   /* the ring or no mount */
	RING_OFF,  /* /dev/fuse only (the default for now: ARCHITECTURE, "The FUSE ring") */
};

/* "auto", "on", "off" -> *mode; -EINVAL for anything else */
int ring_mode_parse(const char *s, enum ring_mode *mode);

/*
 * Before mounting: does this kernel let a daemon serve FUSE over io_uring?
 * 0, or -errno with *why a sentence saying what is missing (static)
 */
int ring_kernel_check(const char **why);

struct ring;

/*
 * The INIT reply went out with RING_INIT_FLAG: register a queue per possible
 * CPU on fd (the session's /dev/fuse, mounted on mountpoint), each entry with payload bytes of room
 * (the kernel's max(8 KiB, max_write, max_pages pages)), and serve them
 * through se, counting in stats; a thread that answered looks for the next
 * request for up to poll_us before it sleeps (0: never). *out is set
 * (atomically) before the first request can come. Returns once every
 * entry is registered or one failed: 0, or -errno with why filled in and
 * *out NULL again; on failure the kernel has been made to fall back to
 * /dev/fuse.
 */
int ring_start(struct fuse_session *se, int fd, const char *mountpoint, size_t payload,
	       unsigned int poll_us, struct reqstats *stats, struct ring **out, char *why,
	       size_t cap);

/*
 * devio's writev of a reply: when it answers a request that came over r, it
 * is copied into that request's entry and sent from there (true); else false
 * and the caller writes it to /dev/fuse. r may be NULL.
 */
bool ring_reply(struct ring *r, const struct iovec *iov, int count);

/* "Q queues x T threads, entries of N KiB, polling U us" for the log */
void ring_describe(const struct ring *r, char *buf, size_t cap);

/* stop serving, join the threads, free everything; NULL-tolerant */
void ring_stop(struct ring *r);

#endif /* RMEM_RING_H */
