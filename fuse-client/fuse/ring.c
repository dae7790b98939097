// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * ring.c - FUSE over io_uring (ring.h).
 *
 * Threads: RING_PER_QUEUE threads for each queue (the kernel has one per
 * possible CPU and picks the queue of the CPU that asks), each with its own
 * io_uring, starting with one ring entry. A thread serves one request at a
 * time to the end, as a libfuse worker does with /dev/fuse: rmemfs's
 * handlers block on the pool, so a queue serves as many requests at once as
 * it has threads; the kernel queues the rest until an entry comes back.
 * Only the thread that owns an io_uring submits on it (the kernel runs the
 * copy of the next request into the entry in that thread), so a reply
 * written by another thread is left in the entry and the owner is woken
 * through its eventfd to commit it. An entry whose reply waits makes its
 * thread register another and the kicker make one request on the queue
 * (defer(); not airtight: docs/ARCHITECTURE.md, "The FUSE ring").
 *
 * An entry's buffer is one mapping: RING_HEAD_ROOM bytes, then the payload
 * the kernel fills. The kernel gives the request's in-header and op header
 * apart from its payload; they are copied in front of the payload, so libfuse
 * gets the request in one piece, as /dev/fuse lays it out, without moving the
 * payload (a write's data).
 */
#define G_LOG_DOMAIN "rmemfs-ops"

#include "ring.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/fuse.h>
#include <pthread.h>
#include <sched.h>
#include <sys/stat.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <glib.h>
#include <liburing.h>

#include "clock.h"

/* the uapi of FUSE 7.42 (Linux 6.14), which Debian 12's <linux/fuse.h> (7.38) lacks */
#ifndef FUSE_URING_IN_OUT_HEADER_SZ
#define FUSE_URING_IN_OUT_HEADER_SZ 128
#define FUSE_URING_OP_IN_OUT_SZ 128

struct fuse_uring_ent_in_out {
	uint64_t flags;
	uint64_t commit_id;  /* the request's unique id */
	uint32_t payload_sz; /* payload bytes: the kernel's on fetch, ours on commit */
	uint32_t padding;
	uint64_t reserved;
};

struct fuse_uring_req_header {
	char in_out[FUSE_URING_IN_OUT_HEADER_SZ]; /* fuse_in_header / fuse_out_header */
	char op_in[FUSE_URING_OP_IN_OUT_SZ];	  /* the op's own header (in_args[0]) */
	struct fuse_uring_ent_in_out ring_ent_in_out;
};

enum fuse_uring_cmd {
	FUSE_IO_URING_CMD_INVALID = 0,
	FUSE_IO_URING_CMD_REGISTER = 1,
	FUSE_IO_URING_CMD_COMMIT_AND_FETCH = 2,
};

struct fuse_uring_cmd_req {
	uint64_t flags;
	uint64_t commit_id;
	uint16_t qid;
	uint8_t padding[6];
};
#endif

#define RING_MAX_THREADS 32 /* all queues together: a machine with many CPUs gets 1 a queue */
#define RING_PER_QUEUE 4    /* threads a queue, at most */
#define RING_MAX_ENTS 64    /* entries a thread, at most: one, plus one for each reply it awaits */
#define RING_HEAD_ROOM 4096 /* before the payload: where a request's headers are put back */
#define RING_SQES 4	    /* a commit (or the registration) and the eventfd's read */
#define RING_START_TIMEOUT_MS 10000
#define RING_BACKLOG_QUIET_NS 2000000ULL /* no polling this long after a backlog */
#define RING_EFD_TAG 0 /* user_data of the eventfd read; entries' is their address */
#define RING_ENABLE_PARAM "/sys/module/fuse/parameters/enable_uring"

/* the life of a ring entry; only ent_move changes it */
enum ent_state {
	ENT_FETCHING, /* with the kernel: registered or committed, waiting for a request */
	ENT_SERVING,  /* a request arrived; its thread is serving it through libfuse */
	ENT_WAITING,  /* served without a reply yet: another thread will answer (inval.h) */
	ENT_ANSWERED, /* the reply is in the entry; its thread commits it */
	ENT_DEAD,     /* the kernel ended it (unmount, abort): nothing more comes */
};

struct ring_thread;

struct ring_ent {
	struct ring_thread *thread;
	struct fuse_uring_req_header *hdr; /* at the start of base */
	char *base;			   /* the mapping: headers, head room, payload */
	char *payload;			   /* base + RING_HEAD_ROOM: ring->payload bytes */
	size_t map_len;
	struct iovec iov[2]; /* what REGISTER hands the kernel: the header, the payload */
	uint64_t unique;     /* the request being served (atomic: other threads' replies read it) */
	int state;	     /* enum ent_state (atomic) */
};

struct ring_thread {
	struct ring *ring;
	unsigned int qid;
	pthread_t tid;
	bool joinable;
	struct io_uring uring;
	bool have_uring;
	int efd;	    /* written by ring_reply (a reply from another thread) and ring_stop */
	uint64_t efd_value; /* the eventfd read's buffer */
	struct ring_ent *ents[RING_MAX_ENTS]; /* added by the thread, read by ring_reply */
	unsigned int nents; /* ents in use (atomic: release after the pointer is stored) */
	unsigned int live;  /* entries not DEAD (the thread's own) */
};

struct ring {
	struct fuse_session *se;
	int fd;
	size_t payload;
	struct reqstats *stats;
	unsigned int nqueues;
	unsigned int per_queue;
	unsigned int nthreads;
	struct ring_thread *threads;
	uint64_t poll_ns; /* how long a thread looks for the next request before it sleeps */
	struct ring_thread
	    *poller;	      /* the one thread that may poll: the latest to commit (atomic) */
	unsigned int serving; /* requests being served now (atomic) */
	uint64_t backlog_ns;  /* when requests last overlapped or waited in the kernel (atomic) */
	bool stopping;	      /* atomic */
	pthread_mutex_t lock; /* the registration's outcome: */
	pthread_cond_t cond;
	unsigned int reported;	/* threads that registered or failed (lock) */
	int error;		/* the first failure, -errno (lock) */
	char why[160];		/* what failed (lock) */
	const char *mountpoint; /* the kicker stats its root */
	pthread_t kicker;
	bool have_kicker;
	uint64_t kicks; /* queues to kick, one bit each below 64 (lock) */
};

/* the entry this thread is serving a request of, if any: its replies go there */
static __thread struct ring_ent *serving;

int ring_mode_parse(const char *s, enum ring_mode *mode)
{
	if (!strcmp(s, "auto"))
		*mode = RING_AUTO;
	else if (!strcmp(s, "on"))
		*mode = RING_ON;
	else if (!strcmp(s, "off"))
		*mode = RING_OFF;
	else
		return -EINVAL;
	return 0;
}

/* ---- entry states ---- */

/* from -> to if the entry is in from; false (and the entry unchanged) if not */
static bool ent_try_move(struct ring_ent *e, enum ent_state from, enum ent_state to)
{
	int expect = from;

	return __atomic_compare_exchange_n(&e->state, &expect, to, false, __ATOMIC_ACQ_REL,
					   __ATOMIC_ACQUIRE);
}

/* from -> to, where nothing else can have moved it: a wrong prior state is a bug */
static void ent_move(struct ring_ent *e, enum ent_state from, enum ent_state to)
{
	if (!ent_try_move(e, from, to))
		g_critical("ring entry of queue %u: state %d, expected %d (to %d)", e->thread->qid,
			   __atomic_load_n(&e->state, __ATOMIC_ACQUIRE), from, to);
}

static enum ent_state ent_state(const struct ring_ent *e)
{
	return __atomic_load_n(&e->state, __ATOMIC_ACQUIRE);
}

/* ---- the kernel ---- */

int ring_kernel_check(const char **why)
{
	struct io_uring probe;
	char c = 'N';
	int fd, rc;

	fd = open(RING_ENABLE_PARAM, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		*why = "this kernel has no FUSE over io_uring (no " RING_ENABLE_PARAM
		       "; it needs Linux 6.14 with CONFIG_FUSE_IO_URING)";
		return -EOPNOTSUPP;
	}
	rc = read(fd, &c, 1);
	close(fd);
	if (rc != 1 || c != 'Y') {
		*why =
		    "FUSE over io_uring is off in this kernel (as root: echo Y > " RING_ENABLE_PARAM
		    ")";
		return -EOPNOTSUPP;
	}
	rc = io_uring_queue_init(RING_SQES, &probe, IORING_SETUP_SQE128);
	if (rc < 0) {
		*why =
		    "io_uring_setup failed (io_uring disabled by kernel.io_uring_disabled, or no "
		    "memory)";
		return rc;
	}
	io_uring_queue_exit(&probe);
	return 0;
}

/* the highest possible CPU + 1: the kernel's number of queues (num_possible_cpus) */
static unsigned int possible_cpus(void)
{
	unsigned int n = 0, hi;
	char buf[256], *p;
	FILE *f = fopen("/sys/devices/system/cpu/possible", "re");

	if (f && fgets(buf, sizeof(buf), f)) {
		/* "0-3" or "0,2-5": the last number is the highest */
		for (p = buf; *p; p++) {
			if (*p >= '0' && *p <= '9') {
				hi = (unsigned int)strtoul(p, &p, 10);
				n = hi + 1 > n ? hi + 1 : n;
				p--;
			}
		}
	}
	if (f)
		fclose(f);
	if (!n) {
		long k = sysconf(_SC_NPROCESSORS_CONF);

		n = k > 0 ? (unsigned int)k : 1;
	}
	return n;
}

/* the 128-byte SQE of a FUSE ring command on e */
static void prep_cmd(struct ring_thread *t, struct ring_ent *e, struct io_uring_sqe *sqe,
		     uint32_t op, uint64_t commit_id)
{
	struct fuse_uring_cmd_req *req = (struct fuse_uring_cmd_req *)sqe->cmd;

	memset(sqe, 0, 128);
	sqe->opcode = IORING_OP_URING_CMD;
	sqe->fd = t->ring->fd;
	sqe->cmd_op = op;
	sqe->addr = (uintptr_t)e->iov;
	sqe->len = 2;
	sqe->user_data = (uintptr_t)e;
	req->commit_id = commit_id;
	req->qid = (uint16_t)t->qid;
}

/* an SQE of t's ring, submitting what is queued when it is full */
static struct io_uring_sqe *get_sqe(struct ring_thread *t)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&t->uring);

	if (!sqe) {
		io_uring_submit(&t->uring);
		sqe = io_uring_get_sqe(&t->uring);
	}
	if (!sqe) /* RING_SQES is more than a thread ever queues */
		g_error("FUSE ring queue %u: no free submission entry", t->qid);
	return sqe;
}

static void arm_efd(struct ring_thread *t)
{
	struct io_uring_sqe *sqe = get_sqe(t);

	io_uring_prep_read(sqe, t->efd, &t->efd_value, sizeof(t->efd_value), 0);
	io_uring_sqe_set_data64(sqe, RING_EFD_TAG);
}

static void wake(struct ring_thread *t)
{
	uint64_t one = 1;

	if (write(t->efd, &one, sizeof(one)) != sizeof(one))
		g_message("waking ring thread of queue %u: %s", t->qid, g_strerror(errno));
}

/* ---- entries ---- */

static int ent_map(struct ring *r, struct ring_ent *e)
{
	e->map_len = RING_HEAD_ROOM + r->payload;
	e->base =
	    mmap(NULL, e->map_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (e->base == MAP_FAILED) {
		e->base = NULL;
		return -errno;
	}
	G_STATIC_ASSERT(sizeof(struct fuse_uring_req_header) + sizeof(struct fuse_in_header) +
			    FUSE_URING_OP_IN_OUT_SZ <=
			RING_HEAD_ROOM);
	e->hdr = (struct fuse_uring_req_header *)e->base;
	e->payload = e->base + RING_HEAD_ROOM;
	e->iov[0] = (struct iovec){e->hdr, sizeof(*e->hdr)};
	e->iov[1] = (struct iovec){e->payload, r->payload};
	return 0;
}

/* one more entry of t, registered with the kernel by the next submission; NULL if none */
static struct ring_ent *add_ent(struct ring_thread *t)
{
	struct ring_ent *e;

	if (t->nents == RING_MAX_ENTS) {
		g_message("FUSE ring queue %u: a thread holds %u entries, all awaiting replies",
			  t->qid, RING_MAX_ENTS);
		return NULL;
	}
	e = g_new0(struct ring_ent, 1);
	e->thread = t;
	e->state = ENT_FETCHING;
	if (ent_map(t->ring, e) < 0) {
		g_message("FUSE ring queue %u: mapping an entry: %s", t->qid, g_strerror(errno));
		g_free(e);
		return NULL;
	}
	t->ents[t->nents] = e;
	__atomic_store_n(&t->nents, t->nents + 1, __ATOMIC_RELEASE);
	t->live++;
	prep_cmd(t, e, get_sqe(t), FUSE_IO_URING_CMD_REGISTER, 0);
	return e;
}

/* can the kernel hand t a request? */
static bool has_fetching(const struct ring_thread *t)
{
	unsigned int k;

	for (k = 0; k < t->nents; k++)
		if (ent_state(t->ents[k]) == ENT_FETCHING)
			return true;
	return false;
}

/* ---- replies ---- */

/* the reply iov[0..count) into e's buffers, as the kernel reads a commit */
static void put_reply(struct ring *r, struct ring_ent *e, const struct iovec *iov, int count)
{
	struct fuse_out_header oh;
	size_t n = 0;
	int i;

	memcpy(&oh, iov[0].iov_base, sizeof(oh));
	for (i = 1; i < count; i++) {
		if (iov[i].iov_len > r->payload - n) {
			g_critical("a reply of more than %zu bytes to request %" G_GUINT64_FORMAT,
				   r->payload, (guint64)oh.unique);
			oh.error = -EIO;
			n = 0;
			break;
		}
		/* memmove: a reply may point into the request it answers */
		memmove(e->payload + n, iov[i].iov_base, iov[i].iov_len);
		n += iov[i].iov_len;
	}
	oh.len = (uint32_t)(sizeof(oh) + n);
	memcpy(e->hdr->in_out, &oh, sizeof(oh));
	e->hdr->ring_ent_in_out.payload_sz = (uint32_t)n;
}

/* the entry serving or waiting on request unique, or NULL */
static struct ring_ent *find_ent(struct ring *r, uint64_t unique)
{
	unsigned int i, k, n;

	for (i = 0; i < r->nthreads; i++) {
		struct ring_thread *t = &r->threads[i];

		n = __atomic_load_n(&t->nents, __ATOMIC_ACQUIRE);
		for (k = 0; k < n; k++) {
			struct ring_ent *e = t->ents[k];
			enum ent_state s = ent_state(e);

			if ((s == ENT_SERVING || s == ENT_WAITING) &&
			    __atomic_load_n(&e->unique, __ATOMIC_ACQUIRE) == unique)
				return e;
		}
	}
	return NULL;
}

bool ring_reply(struct ring *r, const struct iovec *iov, int count)
{
	const struct fuse_out_header *oh;
	struct ring_ent *e = serving;

	if (count < 1 || iov[0].iov_len < sizeof(*oh))
		return false;
	oh = iov[0].iov_base;
	if (!oh->unique)
		return false; /* a notification: /dev/fuse */
	if (e && e->unique == oh->unique && ent_state(e) == ENT_SERVING) {
		put_reply(r, e, iov, count);
		ent_move(e, ENT_SERVING, ENT_ANSWERED); /* committed when the handler returns */
		return true;
	}
	e = r ? find_ent(r, oh->unique) : NULL;
	if (!e)
		return false; /* a request read from /dev/fuse */
	put_reply(r, e, iov, count);
	for (;;) {
		enum ent_state s = ent_state(e);

		if (s == ENT_SERVING && ent_try_move(e, ENT_SERVING, ENT_ANSWERED))
			return true; /* its thread commits it when the handler returns */
		if (s == ENT_WAITING && ent_try_move(e, ENT_WAITING, ENT_ANSWERED)) {
			wake(e->thread);
			return true;
		}
		if (s != ENT_SERVING && s != ENT_WAITING) {
			g_critical("a second reply to request %" G_GUINT64_FORMAT,
				   (guint64)oh->unique);
			return true;
		}
	}
}

/* ---- a thread ---- */

/* e's reply goes back and the entry fetches the next request (submitted by the loop) */
static void commit(struct ring_thread *t, struct ring_ent *e)
{
	prep_cmd(t, e, get_sqe(t), FUSE_IO_URING_CMD_COMMIT_AND_FETCH, e->unique);
	ent_move(e, ENT_ANSWERED, ENT_FETCHING);
}

/*
 * e's reply is left to another thread. The kernel hands a request that
 * found no free entry of its queue to an entry only when one commits - not
 * when one registers - so a request queued while every entry of this queue
 * was waiting for a reply (the READ filling a page that the invalidation
 * before those replies waits on) would wait for ever. So: keep an entry of
 * this thread free (registered now, not with the next submission), and have
 * the kicker make one request on this queue, whose commit fetches whatever
 * is queued there.
 */
static void defer(struct ring_thread *t)
{
	struct ring *r = t->ring;

	if (!has_fetching(t) && add_ent(t))
		io_uring_submit(&t->uring);
	pthread_mutex_lock(&r->lock);
	r->kicks |= 1ULL << MIN(t->qid, 63U);
	pthread_cond_broadcast(&r->cond); /* (ring_start waits on it too) */
	pthread_mutex_unlock(&r->lock);
}

/* a reply that libfuse cannot give: the request's header is not what the kernel sends */
static void answer_error(struct ring_thread *t, struct ring_ent *e, uint64_t unique, int err)
{
	struct fuse_out_header oh = {.len = sizeof(oh), .error = -err, .unique = unique};
	struct iovec v = {&oh, sizeof(oh)};

	e->unique = unique;
	ent_move(e, ENT_FETCHING, ENT_SERVING);
	put_reply(t->ring, e, &v, 1);
	ent_move(e, ENT_SERVING, ENT_ANSWERED);
	commit(t, e);
}

/*
 * A request arrived in e: put its headers in front of its payload, where
 * /dev/fuse would have them, and serve it through libfuse
 */
static void serve(struct ring_thread *t, struct ring_ent *e)
{
	struct ring *r = t->ring;
	uint32_t payload_sz = e->hdr->ring_ent_in_out.payload_sz;
	struct fuse_in_header h;
	struct fuse_buf buf;
	size_t op_sz;
	char *start;

	memcpy(&h, e->hdr->in_out, sizeof(h));
	if (payload_sz > r->payload || h.len < sizeof(h) + payload_sz ||
	    h.len - sizeof(h) - payload_sz > FUSE_URING_OP_IN_OUT_SZ) {
		g_critical("ring request %" G_GUINT64_FORMAT " (opcode %u): length %u with a "
			   "payload of %u bytes",
			   (guint64)h.unique, h.opcode, h.len, payload_sz);
		answer_error(t, e, h.unique, EIO);
		return;
	}
	op_sz = h.len - sizeof(h) - payload_sz;
	start = e->payload - sizeof(h) - op_sz;
	memcpy(start, &h, sizeof(h));
	memcpy(start + sizeof(h), e->hdr->op_in, op_sz);
	buf = (struct fuse_buf){.mem = start, .size = h.len};

	__atomic_store_n(&e->unique, h.unique, __ATOMIC_RELEASE);
	ent_move(e, ENT_FETCHING, ENT_SERVING);
	reqstats_read(r->stats, start, h.len);
	reqstats_ring(r->stats);
	if (__atomic_add_fetch(&r->serving, 1, __ATOMIC_RELAXED) > 1)
		__atomic_store_n(&r->backlog_ns, clock_now_ns(), __ATOMIC_RELAXED);
	serving = e;
	fuse_session_process_buf(r->se, &buf);
	serving = NULL;
	__atomic_sub_fetch(&r->serving, 1, __ATOMIC_RELAXED);
	/* answered on this thread or another already: commit; else wait for the reply */
	if (!ent_try_move(e, ENT_SERVING, ENT_WAITING))
		commit(t, e);
	else
		defer(t);
}

static void on_cqe(struct ring_thread *t, const struct io_uring_cqe *cqe)
{
	struct ring_ent *e = (struct ring_ent *)(uintptr_t)io_uring_cqe_get_data64(cqe);
	unsigned int k;

	if ((uintptr_t)e == RING_EFD_TAG) { /* the eventfd: replies from elsewhere, or the stop */
		if (!__atomic_load_n(&t->ring->stopping, __ATOMIC_ACQUIRE))
			arm_efd(t);
		for (k = 0; k < t->nents; k++)
			if (ent_state(t->ents[k]) == ENT_ANSWERED)
				commit(t, t->ents[k]);
		return;
	}
	if (cqe->res < 0) {
		/* -ENOTCONN/-ECONNABORTED: unmounted or aborted; -ECANCELED: we are going */
		if (cqe->res != -ENOTCONN && cqe->res != -ECONNABORTED && cqe->res != -ECANCELED)
			g_message("FUSE ring queue %u: %s", t->qid, g_strerror(-cqe->res));
		ent_move(e, ENT_FETCHING, ENT_DEAD);
		t->live--;
		return;
	}
	serve(t, e);
}

/*
 * Before sleeping: look for the next request for up to poll_ns while no
 * request is being served anywhere and none has lately been waiting in the
 * kernel or served beside another - a lone requester (QD1) then finds this
 * thread awake, which saves the wakeup of a sleeping one (4-5 us a request
 * here). With a backlog
 * (a commit fetched a waiting request at once) the requests keep the
 * threads busy anyway and the CPU is theirs and the requesters'. The kernel
 * hands a request to the entry that came back last, so only the latest
 * thread to commit polls. What it costs in CPU: docs/PERFORMANCE.md.
 */
static void poll_next(struct ring_thread *t)
{
	struct ring *r = t->ring;
	uint64_t now, until;

	if (!r->poll_ns || !has_fetching(t))
		return;
	io_uring_submit(&t->uring);
	now = clock_now_ns();
	if (io_uring_cq_ready(&t->uring)) {
		__atomic_store_n(&r->backlog_ns, now, __ATOMIC_RELAXED);
		return;
	}
	if (now - __atomic_load_n(&r->backlog_ns, __ATOMIC_RELAXED) < RING_BACKLOG_QUIET_NS)
		return;
	__atomic_store_n(&r->poller, t, __ATOMIC_RELEASE);
	until = now + r->poll_ns;
	while (!io_uring_cq_ready(&t->uring) &&
	       __atomic_load_n(&r->poller, __ATOMIC_ACQUIRE) == t &&
	       !__atomic_load_n(&r->serving, __ATOMIC_RELAXED) && clock_now_ns() < until) {
		io_uring_get_events(&t->uring);
		sched_yield(); /* a runnable requester on this CPU goes first */
	}
}

static void serve_loop(struct ring_thread *t)
{
	struct io_uring_cqe *cqe;
	int rc;

	while (!__atomic_load_n(&t->ring->stopping, __ATOMIC_ACQUIRE) && t->live) {
		poll_next(t);
		rc = io_uring_submit_and_wait(&t->uring, 1);
		if (rc < 0 && rc != -EINTR && rc != -EAGAIN && rc != -EBUSY) {
			g_message("FUSE ring queue %u: io_uring_submit_and_wait: %s", t->qid,
				  g_strerror(-rc));
			break;
		}
		while (io_uring_peek_cqe(&t->uring, &cqe) == 0) {
			on_cqe(t, cqe);
			io_uring_cqe_seen(&t->uring, cqe);
		}
	}
}

static void report(struct ring *r, int rc, const char *what)
{
	pthread_mutex_lock(&r->lock);
	if (rc < 0 && !r->error) {
		r->error = rc;
		snprintf(r->why, sizeof(r->why), "%s: %s", what, g_strerror(-rc));
	}
	r->reported++;
	pthread_cond_broadcast(&r->cond);
	pthread_mutex_unlock(&r->lock);
}

/* t's io_uring, in t's own thread (its single issuer) */
static int setup_uring(struct ring_thread *t)
{
	struct io_uring_params p;
	int rc;

	memset(&p, 0, sizeof(p));
	/* the kernel's work for this ring (a request's copy into the entry) runs when we wait */
	p.flags = IORING_SETUP_SQE128 | IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN;
	rc = io_uring_queue_init_params(RING_SQES, &t->uring, &p);
	if (rc == -EINVAL) {
		memset(&p, 0, sizeof(p));
		p.flags = IORING_SETUP_SQE128;
		rc = io_uring_queue_init_params(RING_SQES, &t->uring, &p);
	}
	t->have_uring = rc == 0;
	return rc;
}

/* register t's entry; 0 once the kernel holds it, or -errno (the kernel's refusal) */
static int register_ent(struct ring_thread *t)
{
	struct io_uring_cqe *cqe;
	int rc;

	arm_efd(t);
	if (!add_ent(t))
		return -ENOMEM;
	rc = io_uring_submit_and_get_events(&t->uring);
	if (rc < 0)
		return rc;
	/* a refusal completes at once; an accepted entry completes with its first request */
	if (io_uring_peek_cqe(&t->uring, &cqe) == 0 &&
	    io_uring_cqe_get_data64(cqe) != RING_EFD_TAG && cqe->res < 0) {
		rc = cqe->res;
		io_uring_cqe_seen(&t->uring, cqe);
		return rc;
	}
	return 0;
}

static void *thread_main(void *arg)
{
	struct ring_thread *t = arg;
	int rc;

	rc = setup_uring(t);
	if (rc < 0) {
		report(t->ring, rc, "io_uring_setup");
		return NULL;
	}
	rc = register_ent(t);
	report(t->ring, rc, "FUSE_IO_URING_CMD_REGISTER");
	if (rc == 0)
		serve_loop(t);
	return NULL;
}

/* ---- the ring ---- */

/*
 * The kernel left FUSE over io_uring on but not every queue registered: a
 * refused REGISTER (an empty payload) is what makes it fall back to /dev/fuse
 */
static void force_fallback(struct ring *r)
{
	struct ring_thread t = {.ring = r, .efd = -1};
	struct ring_ent none = {.thread = &t};
	struct io_uring_sqe *sqe;

	if (io_uring_queue_init(RING_SQES, &t.uring, IORING_SETUP_SQE128) < 0) {
		g_critical("cannot make the kernel fall back to /dev/fuse: requests will hang");
		return;
	}
	sqe = get_sqe(&t);
	prep_cmd(&t, &none, sqe, FUSE_IO_URING_CMD_REGISTER, 0);
	io_uring_submit_and_get_events(&t.uring);
	io_uring_queue_exit(&t.uring);
}

static int start_threads(struct ring *r)
{
	unsigned int i;
	int rc;

	for (i = 0; i < r->nthreads; i++) {
		struct ring_thread *t = &r->threads[i];

		t->ring = r;
		t->qid = i / r->per_queue;
		t->efd = eventfd(0, EFD_CLOEXEC);
		if (t->efd < 0)
			return -errno;
		rc = pthread_create(&t->tid, NULL, thread_main, t);
		if (rc)
			return -rc;
		t->joinable = true;
	}
	return 0;
}

/* until every started thread said how its registration went; the first failure */
static int wait_registered(struct ring *r, unsigned int started)
{
	struct timespec until;
	int rc = 0;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += RING_START_TIMEOUT_MS / 1000;
	pthread_mutex_lock(&r->lock);
	while (r->reported < started && rc == 0)
		rc = pthread_cond_timedwait(&r->cond, &r->lock, &until);
	if (r->reported < started && !r->error) {
		r->error = -ETIMEDOUT;
		snprintf(r->why, sizeof(r->why), "the queues did not register within %d s",
			 RING_START_TIMEOUT_MS / 1000);
	}
	rc = r->error;
	pthread_mutex_unlock(&r->lock);
	return rc;
}

/*
 * One request (a GETATTR of the root) made from a CPU of queue qid: see
 * defer(). The root is opened for each kick: a descriptor held open would
 * make the mount busy.
 */
static void kick(struct ring *r, unsigned int qid)
{
	struct statx stx;
	cpu_set_t cpus;
	int root;

	CPU_ZERO(&cpus);
	CPU_SET(qid, &cpus);
	if (sched_setaffinity(0, sizeof(cpus), &cpus) < 0)
		return; /* a CPU that is not online sends no requests either */
	root = open(r->mountpoint, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (root < 0 ||
	    (statx(root, "", AT_EMPTY_PATH | AT_STATX_FORCE_SYNC, STATX_MODE, &stx) < 0 &&
	     errno != ENOTCONN && errno != ECONNABORTED))
		g_message("kicking FUSE ring queue %u: %s: %s", qid, r->mountpoint,
			  g_strerror(errno));
	if (root >= 0)
		close(root);
}

static void *kicker_main(void *arg)
{
	struct ring *r = arg;
	unsigned int qid;
	uint64_t kicks;

	pthread_mutex_lock(&r->lock);
	while (!__atomic_load_n(&r->stopping, __ATOMIC_ACQUIRE)) {
		if (!r->kicks) {
			pthread_cond_wait(&r->cond, &r->lock);
			continue;
		}
		kicks = r->kicks;
		r->kicks = 0;
		pthread_mutex_unlock(&r->lock);
		for (qid = 0; qid < 64; qid++)
			if (kicks & (1ULL << qid))
				kick(r, qid);
		pthread_mutex_lock(&r->lock);
	}
	pthread_mutex_unlock(&r->lock);
	return NULL;
}

int ring_start(struct fuse_session *se, int fd, const char *mountpoint, size_t payload,
	       unsigned int poll_us, struct reqstats *stats, struct ring **out, char *why,
	       size_t cap)
{
	struct ring *r = g_new0(struct ring, 1);
	unsigned int started;
	int rc;

	r->se = se;
	r->fd = fd;
	r->mountpoint = mountpoint;
	r->payload = payload;
	r->stats = stats;
	r->poll_ns = poll_us * 1000;
	r->nqueues = possible_cpus();
	r->per_queue = MAX(1U, MIN(RING_PER_QUEUE, RING_MAX_THREADS / r->nqueues));
	r->nthreads = r->nqueues * r->per_queue;
	r->threads = g_new0(struct ring_thread, r->nthreads);
	for (started = 0; started < r->nthreads; started++)
		r->threads[started].efd = -1;
	pthread_mutex_init(&r->lock, NULL);
	pthread_cond_init(&r->cond, NULL);

	/* published first: a request may be served (and answered) before the last registration */
	__atomic_store_n(out, r, __ATOMIC_RELEASE);
	rc = -pthread_create(&r->kicker, NULL, kicker_main, r);
	r->have_kicker = rc == 0;
	if (rc == 0)
		rc = start_threads(r);
	for (started = 0; started < r->nthreads && r->threads[started].joinable; started++)
		;
	if (rc < 0)
		report(r, rc, "starting the ring threads");
	rc = wait_registered(r, started);
	if (rc < 0) {
		snprintf(why, cap, "%s", r->why);
		__atomic_store_n(out, NULL, __ATOMIC_RELEASE);
		force_fallback(r);
		ring_stop(r);
		return rc;
	}
	return 0;
}

void ring_describe(const struct ring *r, char *buf, size_t cap)
{
	snprintf(buf, cap, "%u queues x %u threads, entries of %zu KiB, polling %u us", r->nqueues,
		 r->per_queue, r->payload >> 10, (unsigned int)(r->poll_ns / 1000));
}

void ring_stop(struct ring *r)
{
	unsigned int i, k;

	if (!r)
		return;
	__atomic_store_n(&r->stopping, true, __ATOMIC_RELEASE);
	if (r->have_kicker) {
		pthread_mutex_lock(&r->lock);
		pthread_cond_broadcast(&r->cond);
		pthread_mutex_unlock(&r->lock);
		pthread_join(r->kicker, NULL);
	}
	for (i = 0; i < r->nthreads; i++) {
		struct ring_thread *t = &r->threads[i];

		if (t->joinable) {
			wake(t);
			pthread_join(t->tid, NULL);
		}
	}
	/* the threads are gone: closing their rings cancels what the kernel still holds */
	for (i = 0; i < r->nthreads; i++) {
		struct ring_thread *t = &r->threads[i];

		if (t->have_uring)
			io_uring_queue_exit(&t->uring);
		if (t->efd >= 0)
			close(t->efd);
		for (k = 0; k < t->nents; k++) {
			munmap(t->ents[k]->base, t->ents[k]->map_len);
			g_free(t->ents[k]);
		}
	}
	pthread_cond_destroy(&r->cond);
	pthread_mutex_destroy(&r->lock);
	g_free(r->threads);
	g_free(r);
}
