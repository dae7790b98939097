// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * devio.c - /dev/fuse reads and writes through libfuse's custom I/O (devio.h).
 *
 * The kernel sends INIT first and nothing else until it has the reply, and
 * libfuse answers it on the thread that read it, calling ops_init in
 * between; so the INIT request is read, ops_init decides and the reply is
 * written one after another on one thread. The INIT reply is told from the
 * rest by the request id. libfuse builds it as two pieces, the header and
 * struct fuse_init_out; the flags are added to a copy of the second, after
 * libfuse set FUSE_INIT_EXT and flags2 there (it does when the kernel sent
 * FUSE_INIT_EXT, which a kernel with any flag past bit 31 does).
 */
#define G_LOG_DOMAIN "rmemfs-ops"

#include "devio.h"

#include <errno.h>
#include <linux/fuse.h>
#include <stddef.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include <glib.h>

#include "config.h"
#include "ops.h"

#ifdef RMEM_HAVE_FUSE_CUSTOM_IO
#define DEVIO_DEFAULT_MAX_PAGES 32 /* the kernel's max_pages without FUSE_MAX_PAGES */
/*
 * With the ring, background requests (readahead, async direct I/O,
 * write-back) wait in per-queue lists that a completion flushes only on its
 * own queue while the connection is at max_background: a direct write whose
 * reply waits for a READ (inval.h) on the same queue then waits for ever. No
 * limit of our own: the cache bounds the work (and max_background is 16 bits).
 */
#define DEVIO_RING_MAX_BACKGROUND UINT16_MAX

static size_t iov_length(const struct iovec *iov, int count)
{
	size_t n = 0;
	int i;

	for (i = 0; i < count; i++)
		n += iov[i].iov_len;
	return n;
}

static struct devio *devio_of(void *userdata)
{
	return &((struct ops_ctx *)userdata)->devio;
}

/* a request read before the INIT reply: if it is INIT, note its id and the flags offered */
static void note_init(struct devio *d, const void *buf, size_t n)
{
	const struct fuse_in_header *h = buf;
	const struct fuse_init_in *in = (const void *)(h + 1);
	uint64_t flags;

	if (h->opcode != FUSE_INIT || n < sizeof(*h) + offsetof(struct fuse_init_in, flags2))
		return;
	flags = in->flags;
	if ((flags & FUSE_INIT_EXT) && n >= sizeof(*h) + offsetof(struct fuse_init_in, unused))
		flags |= (uint64_t)in->flags2 << 32;
	d->offered = flags;
	__atomic_store_n(&d->init_unique, h->unique, __ATOMIC_RELEASE);
}

static ssize_t devio_read(int fd, void *buf, size_t len, void *userdata)
{
	struct devio *d = devio_of(userdata);
	ssize_t n = read(fd, buf, len);

	if (n < (ssize_t)sizeof(struct fuse_in_header))
		return n;
	if (!__atomic_load_n(&d->replied, __ATOMIC_ACQUIRE))
		note_init(d, buf, n);
	reqstats_read(&d->req, buf, n);
	return n;
}

/* the payload room the kernel asks of a ring entry for this INIT reply */
static size_t ring_payload(const struct fuse_init_out *out)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	size_t pages = (out->flags & FUSE_MAX_PAGES) ? out->max_pages : DEVIO_DEFAULT_MAX_PAGES;
	size_t n = MAX((size_t)FUSE_MIN_READ_BUFFER, (size_t)out->max_write);

	return MAX(n, pages * page);
}

/* before the INIT reply: ask for the ring where it may and the kernel offers it */
static bool want_ring(struct devio *d)
{
	if (d->ring_mode == RING_OFF) {
		g_message("FUSE channel: /dev/fuse (-o uring=off)");
		return false;
	}
	if (!devio_offered(d, RING_INIT_FLAG)) {
		const char *why = "the kernel did not offer it in INIT";

		ring_kernel_check(&why);
		g_message("FUSE channel: /dev/fuse (no FUSE over io_uring: %s)", why);
		if (d->ring_mode == RING_ON) {
			g_critical("-o uring=on, and the kernel did not offer FUSE over io_uring: "
				   "unmounting");
			fuse_session_exit(d->se);
		}
		return false;
	}
	d->ask |= RING_INIT_FLAG;
	return true;
}

/* the INIT reply asking for the ring went out: register its queues */
static void start_ring(struct devio *d, int fd, const struct fuse_init_out *out)
{
	char why[200], what[120];
	struct ring *r;
	int rc;

	rc = ring_start(d->se, fd, d->mountpoint, ring_payload(out), d->ring_poll_us, &d->req,
			&d->ring, why, sizeof(why));
	if (rc < 0) {
		g_message("FUSE channel: /dev/fuse (registering the io_uring queues failed: %s)",
			  why);
		if (d->ring_mode == RING_ON) {
			g_critical("-o uring=on, and the FUSE ring could not start: unmounting");
			fuse_session_exit(d->se);
		}
		return;
	}
	r = __atomic_load_n(&d->ring, __ATOMIC_ACQUIRE);
	ring_describe(r, what, sizeof(what));
	g_message("FUSE channel: io_uring (%s)", what);
}

/* iov is libfuse's INIT reply (header, struct fuse_init_out): write it with d->ask added */
static ssize_t write_init_reply(struct devio *d, int fd, const struct iovec *iov)
{
	/* a copy as long as libfuse's reply, which may be longer than our fuse_init_out */
	union {
		struct fuse_init_out out;
		uint8_t bytes[512];
	} u;
	struct iovec v[2] = { iov[0], { &u, iov[1].iov_len } };
	bool ring;
	ssize_t n;

	if (iov[1].iov_len > sizeof(u))
		return writev(fd, iov, 2); /* not a reply we know: as it is (mmap then fails) */
	memcpy(&u, iov[1].iov_base, iov[1].iov_len);
	ring = want_ring(d);
	if (ring)
		u.out.max_background = DEVIO_RING_MAX_BACKGROUND;
	u.out.flags |= (uint32_t)d->ask;
	if (d->ask >> 32) {
		u.out.flags |= FUSE_INIT_EXT;
		u.out.flags2 |= (uint32_t)(d->ask >> 32);
	}
	__atomic_store_n(&d->replied, true, __ATOMIC_RELEASE);
	n = writev(fd, v, 2);
	/* the kernel took the reply (it is initialized) and holds every request until then */
	if (ring && n >= 0)
		start_ring(d, fd, &u.out);
	return n;
}

static bool is_init_reply(const struct devio *d, const struct iovec *iov, int count)
{
	const struct fuse_out_header *h = iov[0].iov_base;
	uint64_t unique = __atomic_load_n(&d->init_unique, __ATOMIC_ACQUIRE);

	/* a reply shorter than flags2 is to a kernel older than FUSE 7.23: nothing to add */
	return unique && count == 2 && iov[0].iov_len == sizeof(*h) && h->unique == unique &&
	       h->error == 0 && iov[1].iov_len >= offsetof(struct fuse_init_out, unused);
}

static ssize_t devio_writev(int fd, struct iovec *iov, int count, void *userdata)
{
	struct devio *d = devio_of(userdata);

	reqstats_reply(&d->req, iov, count);
	if (ring_reply(__atomic_load_n(&d->ring, __ATOMIC_ACQUIRE), iov, count))
		return (ssize_t)iov_length(iov, count);
	if (!__atomic_load_n(&d->replied, __ATOMIC_ACQUIRE) && is_init_reply(d, iov, count))
		return write_init_reply(d, fd, iov);
	return writev(fd, iov, count);
}
#endif

int devio_attach(struct fuse_session *se, struct devio *d)
{
#ifdef RMEM_HAVE_FUSE_CUSTOM_IO
	const struct fuse_custom_io io = { .read = devio_read, .writev = devio_writev };

	d->se = se;
	/* no splice: libfuse then leaves it out of the capabilities (ops_init does anyway) */
	return fuse_session_custom_io(se, &io, fuse_session_fd(se));
#else
	return -ENOSYS;
#endif
}

void devio_detach(struct devio *d)
{
	ring_stop(__atomic_exchange_n(&d->ring, NULL, __ATOMIC_ACQ_REL));
}

bool devio_ring_active(const struct devio *d)
{
	return __atomic_load_n(&d->ring, __ATOMIC_ACQUIRE) != NULL;
}

bool devio_attached(const struct devio *d)
{
	return __atomic_load_n(&d->init_unique, __ATOMIC_ACQUIRE) != 0;
}

bool devio_offered(const struct devio *d, uint64_t flag)
{
	return (d->offered & flag) == flag;
}

void devio_ask(struct devio *d, uint64_t flag)
{
	d->ask |= flag;
}
