/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * devio.h - the session's reads and writes of /dev/fuse, done here (libfuse's
 * custom I/O) so that rmemfs sees the kernel's whole INIT offer and can ask
 * for INIT flags that libfuse does not know.
 *
 * libfuse 3.14 keeps 32 capability bits and sets the INIT reply's flags only
 * from the ones it maps; the kernel's flags are 64 bits wide (flags2). Once
 * attached, devio reads every request itself, notes the INIT request's id and
 * the flags the kernel offered in it, and adds what ops_init asked for
 * (devio_ask) to the one INIT reply as it is written. Every other request
 * and reply passes unchanged, with one plain read() or writev() each, and is
 * counted and timed on its way (reqstats.h).
 * docs/ARCHITECTURE.md ("Kernel side") says what is asked and why.
 */
#ifndef RMEM_DEVIO_H
#define RMEM_DEVIO_H

#include <stdbool.h>
#include <stdint.h>

#include <fuse_lowlevel.h>

#include "reqstats.h"
#include "ring.h"

/* all zero: not attached (the kernel then seems to offer nothing) */
struct devio {
	uint64_t init_unique; /* the INIT request's id; 0 before it came (atomic) */
	uint64_t offered; /* the kernel's INIT flags, flags2 as bits 32..63 */
	uint64_t ask; /* flags added to the INIT reply (ops_init, devio_ask) */
	bool replied; /* the INIT reply went out: nothing more to look at (atomic) */
	struct reqstats req; /* every request read and replied to here */
	enum ring_mode ring_mode; /* -o uring=: set before the session loop */
	unsigned int ring_poll_us; /* -o uring_poll= */
	const char *mountpoint; /* where the session is mounted (the ring's kicker stats it) */
	struct fuse_session *se; /* devio_attach's */
	struct ring *ring; /* serving FUSE over io_uring; NULL: /dev/fuse only (atomic) */
};

/*
 * From now on se reads and writes its /dev/fuse descriptor here, recording
 * in d, the devio member of its userdata (struct ops_ctx). Call after
 * fuse_session_mount and before the session loop. 0, or -ENOSYS when this
 * libfuse has no custom I/O (before 3.13), or -errno.
 *
 * INIT decides the channel (d->ring_mode, ring.h): the ring is asked for
 * where the kernel offers it and started once the INIT reply is written;
 * one log line says which channel serves and why. With RING_ON and no ring
 * the session is ended (main.c checked the kernel before mounting).
 */
int devio_attach(struct fuse_session *se, struct devio *d);

/* after the session loop (and the last deferred reply): stop the ring, if any */
void devio_detach(struct devio *d);

/* is the ring serving? */
bool devio_ring_active(const struct devio *d);

/* in ops_init: did INIT come through devio (devio_attach took)? */
bool devio_attached(const struct devio *d);

/* in ops_init: did the kernel offer flag (FUSE_* of <linux/fuse.h>, 64-bit numbering)? */
bool devio_offered(const struct devio *d, uint64_t flag);

/* in ops_init: add flag to the INIT reply (the kernel offered it: devio_offered) */
void devio_ask(struct devio *d, uint64_t flag);

#endif /* RMEM_DEVIO_H */
