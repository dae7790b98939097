// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * member.c - one memserver's pool as one flat byte range, over a small set
 * of channels.
 *
 * A channel is one transport connection (struct xport) with a registered
 * bounce buffer and a mutex (an xport is single-threaded by contract). A
 * request takes any free channel (the one released last if free, else
 * the next free one, else waits for that first one),
 * turns its iovec into READ/WRITE ops - split at region boundaries, at
 * PROTO_MAX_IO and at the bounce buffer's size - posts them as one batch with
 * xport_run() (which chunks by queue depth and reaps every completion), and
 * copies between the bounce buffer and the caller's memory. Requests bigger
 * than the bounce buffer loop.
 *
 * The arena. The block cache offers its slot memory chunk by chunk as it
 * grows (member_arena_add); each channel registers a chunk with its xport
 * the first time it moves bytes of it (again after a reconnect), under its
 * own lock, so growing the cache never waits for the channels' requests in
 * flight. An iovec piece that lies inside one registered chunk is posted
 * straight from / into that memory (RDMA READs land in cache slots, WRITEs
 * go out of them, TCP receives into them): no bounce copy, and such pieces
 * do not count against the bounce size, so a whole multi-block request is
 * one batch.
 *
 * Outages. A connection-level failure (-ENOTCONN, -EIO, -ETIMEDOUT...)
 * closes the channel's xport and the request is tried again at once on a
 * fresh connection. If that fails too the server is *away*: the request
 * waits and retries with backoff (20 ms doubling to 1 s), as does every
 * other request meanwhile, until the server answers again or
 * reconnect_timeout has passed since it went away. One message when it
 * goes, one when it is back. Each channel addresses the pool with its own
 * connection's descriptor (a restarted memserver registers the same pool
 * under new keys and addresses); the pool must be the same one (pool_id,
 * size, region lengths).
 *
 * Failure. When the timeout passes, or the server serves another pool, or
 * the lease is lost (member_fail), the member is *failed* for good: the
 * reason is logged once, and every request from then on fails with -EIO at
 * once, so nothing above ever waits on a lost pool. READ, WRITE and the
 * atomics are all retried after an outage: READ and WRITE are idempotent; a
 * retried atomic may find its own earlier effect (a CAS whose reply was
 * lost), which its callers recognise (super.c).
 *
 * Fencing: super.c sets a write deadline that its lease heartbeat keeps
 * pushing forward. A write or fenced atomic past the deadline waits for the
 * heartbeat to prove the lease again (after an outage) rather than fail;
 * the heartbeat's own atomics are exempt. Every channel presents the
 * member's client id (the lease owner value) at connect; a memserver that
 * answers -EKEYREVOKED has fenced that id for a new lease holder: the member
 * fails ("LEASE LOST"), nothing is retried.
 *
 * Lock order: one channel lock at a time, never held while taking another
 * or while waiting out an outage; state_lock is taken with or without a
 * channel lock, and nothing is taken under it.
 */
#define G_LOG_DOMAIN "rmemfs-member"

#include "member.h"
#include "clock.h"
#include "net.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <glib.h>

#define MEMBER_MIN_BOUNCE (64U << 10)
#define MEMBER_DEFAULT_BOUNCE (2U << 20)
#define MEMBER_BACKOFF_MIN_MS 20U
#define MEMBER_BACKOFF_MAX_MS 1000U

struct member_chan {
	pthread_mutex_t lock;
	unsigned int idx;
	struct xport *x; /* NULL: not connected (reconnect on next use); under lock */
	struct xport_mr *mr; /* bounce registration with x; under lock */
	/* the cache arena's chunks registered with x (NULL: not yet); under lock */
	struct xport_mr **arena_mr;
	uint8_t *bounce; /* bounce_len bytes, page aligned, lives as long as the member */
	struct xport_op *ops; /* scratch, MEMBER_MAX_BATCH entries; under lock */
	uint8_t **dst; /* READ: where each op's bytes go; under lock */
};

#define MEMBER_MAX_BATCH 256U

struct member {
	char *host;
	char *pool_name; /* params.pool: the named pool, or NULL */
	char server[112]; /* "host:port[/pool]", for messages */
	char *transport_req; /* what the caller asked for ("auto"...) */
	char transport[16]; /* what the first connection used */
	struct xport_params params;
	struct proto_pool pool;
	uint64_t *region_start; /* pool offset of each region's first byte */
	/*
	 * The cache arena (member_arena_set): chunk i is [arena + i * arena_chunk,
	 * + arena_chunk), the last one shorter; arena_on[i]: offered (channels
	 * register it on first use). The geometry is written under every channel
	 * lock.
	 */
	uint8_t *arena;
	size_t arena_len, arena_chunk;
	unsigned int arena_nchunks;
	atomic_bool *arena_on;
	atomic_bool reg_warned; /* a chunk's registration failed: said once */
	size_t bounce_len;
	unsigned int nchan;
	struct member_chan *chan;
	atomic_uint next; /* the channel released last: the next request starts there */
	int reconnect_ms; /* how long an absent server is waited for; -1: forever */
	atomic_bool nowait; /* an absent server is not waited for: -EHOSTDOWN */
	atomic_bool fenced; /* the server fenced our client id (LEASE LOST) */
	_Atomic uint64_t deadline_ns; /* lease write deadline (CLOCK_MONOTONIC ns), 0: none */
	atomic_bool failed; /* set once, never cleared: every request fails */
	_Atomic uint64_t down_since_ns; /* when the server went away; 0: it answers */
	/* the state below (and waiting for it to change): under state_lock */
	pthread_mutex_t state_lock;
	pthread_cond_t state_cond; /* broadcast: server back, failed, deadline pushed */
	char *failure; /* why the member failed, or NULL */
	unsigned int outages;
	uint64_t away_ns; /* total time the server was away (ended outages) */
};

static bool conn_error(int rc)
{
	return rc == -ENOTCONN || rc == -EIO || rc == -ETIMEDOUT || rc == -ECONNRESET ||
	       rc == -EPIPE || rc == -ECONNABORTED || rc == -ESHUTDOWN;
}

/* bytes of arena chunk i */
static size_t arena_chunk_len(const struct member *r, unsigned int i)
{
	return MIN(r->arena_chunk, r->arena_len - (size_t)i * r->arena_chunk);
}

/* register chunk i with channel c's transport (lock held, connected) */
static int chan_arena_reg(struct member *r, struct member_chan *c, unsigned int i)
{
	size_t len = arena_chunk_len(r, i);
	int rc;

	rc = xport_reg_mr(c->x, r->arena + (size_t)i * r->arena_chunk, len, &c->arena_mr[i]);
	if (rc < 0 && !atomic_exchange(&r->reg_warned, true))
		g_message("%s: xport_reg_mr(cache arena chunk %u, %zu bytes) on channel %u: %s; "
			  "its transfers are copied", r->server, i, len, c->idx, g_strerror(-rc));
	return rc;
}

static void chan_arena_dereg(struct member_chan *c, unsigned int i)
{
	if (c->x)
		xport_dereg_mr(c->x, c->arena_mr[i]);
	c->arena_mr[i] = NULL;
}

static void chan_arena_dereg_all(struct member *r, struct member_chan *c)
{
	unsigned int i;

	for (i = 0; c->arena_mr && i < r->arena_nchunks; i++)
		chan_arena_dereg(c, i);
}

static void chan_disconnect(struct member *r, struct member_chan *c)
{
	if (!c->x)
		return;
	chan_arena_dereg_all(r, c);
	xport_dereg_mr(c->x, c->mr);
	c->mr = NULL;
	xport_close(c->x);
	c->x = NULL;
}

static bool same_pool(const struct proto_pool *a, const struct proto_pool *b)
{
	uint32_t i;

	if (a->size != b->size || a->pool_id != b->pool_id || a->nregions != b->nregions)
		return false;
	for (i = 0; i < a->nregions; i++)
		if (a->regions[i].len != b->regions[i].len)
			return false;
	return true;
}

/*
 * Connect channel c (lock held). first: adopt the pool descriptor and the
 * transport "auto" chose; later connections use that transport, quietly,
 * and must find the same pool (else the member fails: -EIO).
 */
static int chan_connect(struct member *r, struct member_chan *c, bool first)
{
	struct xport_params p = r->params;
	struct xport *x;
	int rc;

	if (!first)
		p.quiet = true;
	rc = xport_connect(first ? r->transport_req : r->transport, &p, &x);
	if (rc < 0)
		return rc;
	if (first) {
		rc = proto_pool_copy(&r->pool, &x->pool);
		if (rc < 0)
			goto err_close;
		g_strlcpy(r->transport, xport_name(x), sizeof(r->transport));
		/* created now if it was to be: a reconnect must find this pool, never a new one */
		r->params.pool_create_size = 0;
	} else if (!same_pool(&x->pool, &r->pool)) {
		member_fail(r,
			    "%s now serves another pool (id %016" G_GINT64_MODIFIER "x, %"
			    G_GUINT64_FORMAT " bytes) where this filesystem's pool was (id %016"
			    G_GINT64_MODIFIER "x, %" G_GUINT64_FORMAT " bytes): the pool is lost",
			    r->server, (guint64)x->pool.pool_id, (guint64)x->pool.size,
			    (guint64)r->pool.pool_id, (guint64)r->pool.size);
		rc = -EIO;
		goto err_close;
	}
	rc = xport_reg_mr(x, c->bounce, r->bounce_len, &c->mr);
	if (rc < 0) {
		g_message("xport_reg_mr(%zu bytes): %s", r->bounce_len, g_strerror(-rc));
		goto err_close;
	}
	c->x = x;
	return 0;

err_close:
	xport_close(x);
	return rc;
}

/*
 * A request starts at the channel released last and moves on only when
 * that one is busy: one request after another (whatever FUSE thread serves
 * them) keep one connection hot, and the memserver thread serving it is
 * still polling when the next request comes (tcp_server_set_spin) instead
 * of being woken for every request. Concurrent requests spread over the
 * others.
 */
static struct member_chan *chan_get(struct member *r)
{
	unsigned int start = atomic_load(&r->next) % r->nchan, k;
	struct member_chan *c;

	for (k = 0; k < r->nchan; k++) {
		c = &r->chan[(start + k) % r->nchan];
		if (pthread_mutex_trylock(&c->lock) == 0)
			return c;
	}
	c = &r->chan[start];
	pthread_mutex_lock(&c->lock);
	return c;
}

static void chan_put(struct member *r, struct member_chan *c)
{
	atomic_store(&r->next, c->idx);
	pthread_mutex_unlock(&c->lock);
}

/* wait on state_cond for at most ms (state_lock held) */
static void state_wait_ms(struct member *r, uint64_t ms)
{
	uint64_t t = clock_now_ns() + ms * 1000000ULL;
	struct timespec ts = { .tv_sec = (time_t)(t / 1000000000ULL),
			       .tv_nsec = (long)(t % 1000000000ULL) };

	pthread_cond_timedwait(&r->state_cond, &r->state_lock, &ts);
}

static int usable(struct member *r)
{
	return atomic_load(&r->failed) ? -EIO : 0;
}

/*
 * May a write go out? Not once failed. Past the lease deadline the
 * heartbeat has not proved the lease lately (the server was away, say):
 * wait until it does, at most reconnect_timeout, then fail the member.
 */
static int write_allowed(struct member *r)
{
	uint64_t dl = atomic_load(&r->deadline_ns), t0, now;
	bool expired = false;

	if (atomic_load(&r->failed))
		return -EIO;
	if (!dl || clock_now_ns() <= dl)
		return 0;
	if (atomic_load(&r->nowait))
		return -EHOSTDOWN;
	pthread_mutex_lock(&r->state_lock);
	t0 = clock_now_ns();
	for (;;) {
		now = clock_now_ns();
		dl = atomic_load(&r->deadline_ns);
		if (r->failure || !dl || now <= dl)
			break;
		if (r->reconnect_ms >= 0 && now - t0 >= (uint64_t)r->reconnect_ms * 1000000ULL) {
			expired = true;
			break;
		}
		state_wait_ms(r, 100);
	}
	pthread_mutex_unlock(&r->state_lock);
	if (expired)
		member_fail(r, "the lease could not be renewed for %d s (reconnect_timeout)",
			    r->reconnect_ms / 1000);
	return usable(r);
}

/* make sure c is connected (lock held); -EIO once failed, else why it cannot connect */
static int chan_ready(struct member *r, struct member_chan *c)
{
	int rc;

	if (atomic_load(&r->failed))
		return -EIO;
	if (c->x)
		return 0;
	rc = chan_connect(r, c, false);
	if (rc < 0) {
		g_debug("reconnecting channel %u: %s", c->idx, g_strerror(-rc));
		return atomic_load(&r->failed) ? -EIO : rc;
	}
	g_debug("channel %u reconnected to %s", c->idx, c->x->peer);
	return 0;
}

/* the server answered: end an outage (says how long it lasted) */
static void server_answers(struct member *r)
{
	uint64_t since;

	if (!atomic_load(&r->down_since_ns))
		return;
	pthread_mutex_lock(&r->state_lock);
	since = atomic_load(&r->down_since_ns);
	if (since) {
		uint64_t away = clock_now_ns() - since;

		atomic_store(&r->down_since_ns, 0);
		r->away_ns += away;
		g_message("%s is back after %.1f s away", r->server, (double)away / 1e9);
		pthread_cond_broadcast(&r->state_cond);
	}
	pthread_mutex_unlock(&r->state_lock);
}

/*
 * A request on channel c (lock held) ended with rc: close a dead connection,
 * release c, note what the answer says about the server. Returns rc.
 */
static int chan_done(struct member *r, struct member_chan *c, enum xport_op_type type, int rc)
{
	if (rc >= 0) {
		chan_put(r, c);
		server_answers(r);
		return rc;
	}
	if (conn_error(rc) && c->x) {
		g_debug("channel %u: %s %s: %s; reconnecting", c->idx, c->x->peer,
			xport_op_type_str(type), g_strerror(-rc));
		chan_disconnect(r, c);
	}
	chan_put(r, c);
	if (rc == -EKEYREVOKED) {
		atomic_store(&r->fenced, true);
		member_fail(r, "LEASE LOST: %s fenced this client off the pool (another client "
			    "took the lease over, or, for a -o ro mount, the writer expired this "
			    "silent reader)", r->server);
		rc = -EIO;
	}
	return rc;
}

/*
 * No connection to the server could be had (err), or a fresh one died: the
 * server is away - the first request to see it says so - and requests wait
 * out a backoff (woken early when it is back or the member failed) until
 * reconnect_timeout has passed since it went away. Returns 0 (try again),
 * -EIO (failed) or, nowait, -EHOSTDOWN at once.
 */
static int outage_wait(struct member *r, int err, unsigned int attempt)
{
	uint64_t now, since, limit_ns, ms;
	bool expired = false;

	limit_ns = (uint64_t)r->reconnect_ms * 1000000ULL;
	pthread_mutex_lock(&r->state_lock);
	now = clock_now_ns();
	since = atomic_load(&r->down_since_ns);
	if (!since && !r->failure) {
		since = now;
		atomic_store(&r->down_since_ns, since);
		r->outages++;
		if (atomic_load(&r->nowait))
			g_message("lost %s (%s)", r->server, g_strerror(-err));
		else if (r->reconnect_ms < 0)
			g_message("lost %s (%s); waiting for it to come back", r->server,
				  g_strerror(-err));
		else if (r->reconnect_ms > 0)
			g_message("lost %s (%s); waiting up to %d s for it to come back", r->server,
				  g_strerror(-err), r->reconnect_ms / 1000);
	}
	if (atomic_load(&r->nowait)) {
		pthread_mutex_unlock(&r->state_lock);
		return r->failure ? -EIO : -EHOSTDOWN;
	}
	if (!r->failure) {
		if (r->reconnect_ms >= 0 && now - since >= limit_ns) {
			expired = true;
		} else {
			ms = MIN((uint64_t)MEMBER_BACKOFF_MIN_MS << MIN(attempt, 6U),
				 (uint64_t)MEMBER_BACKOFF_MAX_MS);
			if (r->reconnect_ms >= 0)
				ms = MIN(ms, (limit_ns - (now - since)) / 1000000ULL + 1);
			state_wait_ms(r, ms);
		}
	}
	pthread_mutex_unlock(&r->state_lock);
	if (expired)
		member_fail(r, "%s unreachable for %.1f s (%s; reconnect_timeout=%d s)", r->server,
			    (double)(now - since) / 1e9, g_strerror(-err), r->reconnect_ms / 1000);
	return usable(r);
}

/* region index holding pool offset off (binary search) */
static int region_of(const struct member *r, uint64_t off)
{
	unsigned int lo = 0, hi = r->pool.nregions;

	while (hi - lo > 1) {
		unsigned int mid = (lo + hi) / 2;

		if (r->region_start[mid] <= off)
			lo = mid;
		else
			hi = mid;
	}
	return (int)lo;
}

/*
 * The registration on channel c (lock held, connected) of the arena chunk
 * [p, p+len) lies in, made now if the chunk is offered and c has not yet;
 * NULL: not in one offered chunk, or it cannot be registered (copied then).
 */
static struct xport_mr *arena_mr_of(struct member *r, struct member_chan *c, const uint8_t *p,
				    size_t len)
{
	size_t off;
	unsigned int i;

	if (!c->arena_mr || p < r->arena || (size_t)(p - r->arena) >= r->arena_len)
		return NULL;
	off = (size_t)(p - r->arena);
	if (len > r->arena_chunk - off % r->arena_chunk)
		return NULL; /* crosses into the next chunk */
	i = (unsigned int)(off / r->arena_chunk);
	if (!c->arena_mr[i] && atomic_load(&r->arena_on[i]))
		chan_arena_reg(r, c, i);
	return c->arena_mr[i];
}

/*
 * Move the bytes of iov[] to/from the pool on channel c (lock held, connected).
 * zero: WRITE zeroes (iov_base ignored). Returns 0 or -errno.
 */
static int chan_rw(struct member *r, struct member_chan *c, enum xport_op_type type, bool zero,
		   const uint64_t *offs, const struct iovec *iov, int cnt)
{
	const unsigned int max_batch = MEMBER_MAX_BATCH;
	int i = 0;
	size_t pos = 0;
	int rc;

	if (zero)
		memset(c->bounce, 0, r->bounce_len);
	while (i < cnt) {
		unsigned int n = 0, k;
		size_t used = 0;

		while (i < cnt && n < max_batch && (zero || used < r->bounce_len)) {
			uint64_t off, rem;
			struct xport_mr *direct;
			size_t len;
			int reg;
			struct xport_op *op = &c->ops[n];

			if (pos >= iov[i].iov_len) {
				i++;
				pos = 0;
				continue;
			}
			off = offs[i] + pos;
			if (off < offs[i] || off >= r->pool.size)
				return -ERANGE;
			len = iov[i].iov_len - pos;
			direct = zero ? NULL :
					arena_mr_of(r, c, (uint8_t *)iov[i].iov_base + pos, len);
			if (zero)
				len = MIN(len, r->bounce_len);
			else if (!direct)
				len = MIN(len, r->bounce_len - used);
			len = MIN(len, (size_t)PROTO_MAX_IO);
			reg = region_of(r, off);
			rem = r->region_start[reg] + r->pool.regions[reg].len - off;
			len = (size_t)MIN((uint64_t)len, rem);
			memset(op, 0, sizeof(*op));
			op->type = type;
			op->wr_id = n;
			op->mr = c->mr;
			op->len = (uint32_t)len;
			op->raddr = c->x->pool.regions[reg].addr + (off - r->region_start[reg]);
			op->rkey = c->x->pool.regions[reg].rkey;
			if (zero) {
				op->local = c->bounce;
			} else if (direct) {
				/* cache arena: straight from / into the slot */
				op->mr = direct;
				op->local = (uint8_t *)iov[i].iov_base + pos;
				c->dst[n] = NULL;
			} else {
				op->local = c->bounce + used;
				if (type == XPORT_WRITE)
					memcpy(op->local, (uint8_t *)iov[i].iov_base + pos, len);
				else
					c->dst[n] = (uint8_t *)iov[i].iov_base + pos;
				used += len;
			}
			pos += len;
			n++;
		}
		if (!n)
			break;
		rc = xport_run(c->x, c->ops, n);
		if (rc < 0)
			return rc;
		if (type == XPORT_READ)
			for (k = 0; k < n; k++)
				if (c->dst[k])
					memcpy(c->dst[k], c->ops[k].local, c->ops[k].len);
	}
	return 0;
}

/* one request on channel c (lock held, connected); 0 or -errno */
typedef int (*chan_fn)(struct member *r, struct member_chan *c, void *arg);

/*
 * Run fn on a connected channel until it succeeds, fails for a reason of its
 * own, or the member fails. fenced: a write (write_allowed). A connection
 * that had died is replaced at once (every channel may hold one after a
 * server restart); when no connection can be had, or a fresh one dies too,
 * the server is away (outage_wait).
 */
static int run(struct member *r, bool fenced, enum xport_op_type type, chan_fn fn, void *arg)
{
	unsigned int attempt = 0;
	int rc;

	for (;;) {
		struct member_chan *c;
		bool fresh, connected;

		rc = fenced ? write_allowed(r) : usable(r);
		if (rc < 0)
			return rc;
		c = chan_get(r);
		fresh = !c->x;
		rc = chan_ready(r, c);
		connected = rc == 0;
		if (connected)
			rc = fn(r, c, arg);
		rc = chan_done(r, c, type, rc);
		if (rc >= 0 || atomic_load(&r->failed))
			return rc;
		if (connected && !conn_error(rc))
			return rc;
		if (connected && !fresh)
			continue;
		rc = outage_wait(r, rc, attempt++);
		if (rc < 0)
			return rc;
	}
}

struct rw_req {
	enum xport_op_type type;
	bool zero;
	const uint64_t *offs;
	const struct iovec *iov;
	int cnt;
};

static int rw_fn(struct member *r, struct member_chan *c, void *arg)
{
	struct rw_req *q = arg;

	return chan_rw(r, c, q->type, q->zero, q->offs, q->iov, q->cnt);
}

static int do_rw(struct member *r, enum xport_op_type type, bool zero, const uint64_t *offs,
		 const struct iovec *iov, int cnt)
{
	struct rw_req q = { .type = type, .zero = zero, .offs = offs, .iov = iov, .cnt = cnt };
	int i;

	for (i = 0; i < cnt; i++)
		if (offs[i] + iov[i].iov_len < offs[i] || offs[i] + iov[i].iov_len > r->pool.size)
			return -ERANGE;
	return run(r, type == XPORT_WRITE, type, rw_fn, &q);
}

static int fence_fn(struct member *r, struct member_chan *c, void *arg)
{
	return xport_fence(c->x, *(uint64_t *)arg);
}

int member_fence_client(struct member *r, uint64_t victim)
{
	return run(r, false, XPORT_WRITE, fence_fn, &victim);
}

struct atomic_req {
	enum xport_op_type type;
	uint64_t off, compare_add, swap;
	uint64_t *old;
};

/* one atomic on channel c (lock held, connected); the old value to *old */
static int atomic_fn(struct member *r, struct member_chan *c, void *arg)
{
	struct atomic_req *q = arg;
	uint64_t raddr, *res = (uint64_t *)c->bounce;
	uint32_t rkey;
	int rc;

	rc = proto_pool_resolve(&c->x->pool, q->off, 8, &raddr, &rkey);
	if (rc < 0)
		return rc;
	if (q->type == XPORT_CAS)
		rc = xport_cas(c->x, c->mr, res, raddr, rkey, q->compare_add, q->swap);
	else
		rc = xport_fetch_add(c->x, c->mr, res, raddr, rkey, q->compare_add);
	if (rc >= 0 && q->old)
		*q->old = *res;
	return rc;
}

static int do_atomic(struct member *r, enum xport_op_type type, bool fenced, uint64_t off,
		     uint64_t compare_add, uint64_t swap, uint64_t *old)
{
	struct atomic_req q = {
		.type = type, .off = off, .compare_add = compare_add, .swap = swap, .old = old
	};

	if (off % 8 || off + 8 > r->pool.size)
		return -EINVAL;
	return run(r, fenced, type, atomic_fn, &q);
}

/* ---- public API ---- */

int member_open(const struct member_config *cfg, struct member **out)
{
	pthread_condattr_t ca;
	struct member *r;
	unsigned int i;
	uint64_t start = 0;
	int rc;

	*out = NULL;
	if (!cfg->params.host || !cfg->qps)
		return -EINVAL;
	r = g_new0(struct member, 1);
	r->host = g_strdup(cfg->params.host);
	r->transport_req = g_strdup(cfg->transport ? cfg->transport : "auto");
	r->params = cfg->params;
	r->params.host = r->host;
	r->pool_name = cfg->params.pool && *cfg->params.pool ? g_strdup(cfg->params.pool) : NULL;
	r->params.pool = r->pool_name;
	if (!r->params.client_id)
		r->params.client_id = proto_client_id_new();
	r->bounce_len = cfg->bounce_size ? cfg->bounce_size : MEMBER_DEFAULT_BOUNCE;
	r->bounce_len = MAX(r->bounce_len, (size_t)MEMBER_MIN_BOUNCE);
	r->bounce_len = (r->bounce_len + 4095) & ~(size_t)4095;
	r->reconnect_ms = cfg->reconnect_timeout_ms;
	net_format_server_pool(r->server, sizeof(r->server), r->host, r->params.port, r->pool_name);
	pthread_mutex_init(&r->state_lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&r->state_cond, &ca);
	pthread_condattr_destroy(&ca);
	r->nchan = cfg->qps;
	r->chan = g_new0(struct member_chan, r->nchan);
	for (i = 0; i < r->nchan; i++) {
		struct member_chan *c = &r->chan[i];

		pthread_mutex_init(&c->lock, NULL);
		c->idx = i;
		c->ops = g_new0(struct xport_op, MEMBER_MAX_BATCH);
		c->dst = g_new0(uint8_t *, MEMBER_MAX_BATCH);
		if (posix_memalign((void **)&c->bounce, 4096, r->bounce_len)) {
			c->bounce = NULL;
			rc = -ENOMEM;
			goto err_close;
		}
		memset(c->bounce, 0, r->bounce_len);
	}
	for (i = 0; i < r->nchan; i++) {
		rc = chan_connect(r, &r->chan[i], i == 0);
		if (rc < 0)
			goto err_close;
	}
	r->region_start = g_new0(uint64_t, r->pool.nregions);
	for (i = 0; i < r->pool.nregions; i++) {
		r->region_start[i] = start;
		start += r->pool.regions[i].len;
	}
	*out = r;
	return 0;

err_close:
	member_close(r);
	return rc;
}

void member_close(struct member *r)
{
	unsigned int i;

	if (!r)
		return;
	for (i = 0; i < r->nchan; i++) {
		struct member_chan *c = &r->chan[i];

		chan_disconnect(r, c);
		g_free(c->arena_mr);
		free(c->bounce);
		g_free(c->ops);
		g_free(c->dst);
		pthread_mutex_destroy(&c->lock);
	}
	g_free(r->chan);
	g_free(r->arena_on);
	g_free(r->region_start);
	proto_pool_clear(&r->pool);
	g_free(r->host);
	g_free(r->pool_name);
	g_free(r->transport_req);
	g_free(r->failure);
	pthread_cond_destroy(&r->state_cond);
	pthread_mutex_destroy(&r->state_lock);
	g_free(r);
}

uint64_t member_size(const struct member *r)
{
	return r->pool.size;
}

uint64_t member_pool_id(const struct member *r)
{
	return r->pool.pool_id;
}

uint64_t member_client_id(const struct member *r)
{
	return r->params.client_id;
}

const char *member_transport(const struct member *r)
{
	return r->transport;
}

const char *member_server(const struct member *r)
{
	return r->server;
}

void member_set_nowait(struct member *r, bool nowait)
{
	atomic_store(&r->nowait, nowait);
}

int member_read(struct member *r, uint64_t off, void *buf, size_t len)
{
	struct iovec iov = { .iov_base = buf, .iov_len = len };

	return len ? do_rw(r, XPORT_READ, false, &off, &iov, 1) : 0;
}

int member_write(struct member *r, uint64_t off, const void *buf, size_t len)
{
	struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };

	return len ? do_rw(r, XPORT_WRITE, false, &off, &iov, 1) : 0;
}

int member_readv(struct member *r, const uint64_t *offs, const struct iovec *iov, int cnt)
{
	return cnt > 0 ? do_rw(r, XPORT_READ, false, offs, iov, cnt) : 0;
}

int member_writev(struct member *r, const uint64_t *offs, const struct iovec *iov, int cnt)
{
	return cnt > 0 ? do_rw(r, XPORT_WRITE, false, offs, iov, cnt) : 0;
}

int member_zero(struct member *r, uint64_t off, uint64_t len)
{
	struct iovec iov = { .iov_base = NULL, .iov_len = (size_t)len };

	if (len != (size_t)len)
		return -EINVAL;
	return len ? do_rw(r, XPORT_WRITE, true, &off, &iov, 1) : 0;
}

int member_cas(struct member *r, uint64_t off, uint64_t compare, uint64_t swap, uint64_t *old)
{
	return do_atomic(r, XPORT_CAS, true, off, compare, swap, old);
}

int member_fetch_add(struct member *r, uint64_t off, uint64_t add, uint64_t *old)
{
	return do_atomic(r, XPORT_FETCH_ADD, true, off, add, 0, old);
}

int member_cas_unfenced(struct member *r, uint64_t off, uint64_t compare, uint64_t swap,
			uint64_t *old)
{
	return do_atomic(r, XPORT_CAS, false, off, compare, swap, old);
}

int member_fetch_add_unfenced(struct member *r, uint64_t off, uint64_t add, uint64_t *old)
{
	return do_atomic(r, XPORT_FETCH_ADD, false, off, add, 0, old);
}

static void lock_all(struct member *r)
{
	unsigned int i;

	for (i = 0; i < r->nchan; i++)
		pthread_mutex_lock(&r->chan[i].lock);
}

static void unlock_all(struct member *r)
{
	unsigned int i;

	for (i = 0; i < r->nchan; i++)
		pthread_mutex_unlock(&r->chan[i].lock);
}

int member_arena_set(struct member *r, void *base, size_t len, size_t chunk)
{
	unsigned int i;

	if (!base || !len || !chunk || r->arena)
		return -EINVAL;
	lock_all(r);
	r->arena_nchunks = (unsigned int)((len + chunk - 1) / chunk);
	r->arena_on = g_new0(atomic_bool, r->arena_nchunks);
	for (i = 0; i < r->nchan; i++)
		r->chan[i].arena_mr = g_new0(struct xport_mr *, r->arena_nchunks);
	r->arena = base;
	r->arena_len = len;
	r->arena_chunk = chunk;
	unlock_all(r);
	return 0;
}

int member_arena_add(struct member *r, unsigned int i)
{
	if (!r->arena || i >= r->arena_nchunks)
		return -EINVAL;
	atomic_store(&r->arena_on[i], true);
	return 0;
}

void member_arena_remove(struct member *r, unsigned int i)
{
	unsigned int n;

	if (!r || !r->arena || i >= r->arena_nchunks)
		return;
	atomic_store(&r->arena_on[i], false);
	for (n = 0; n < r->nchan; n++) {
		pthread_mutex_lock(&r->chan[n].lock);
		chan_arena_dereg(&r->chan[n], i);
		pthread_mutex_unlock(&r->chan[n].lock);
	}
}

void member_arena_clear(struct member *r)
{
	unsigned int n;

	if (!r || !r->arena)
		return;
	lock_all(r);
	for (n = 0; n < r->nchan; n++) {
		chan_arena_dereg_all(r, &r->chan[n]);
		g_free(r->chan[n].arena_mr);
		r->chan[n].arena_mr = NULL;
	}
	g_free(r->arena_on);
	r->arena_on = NULL;
	r->arena = NULL;
	r->arena_len = r->arena_chunk = 0;
	r->arena_nchunks = 0;
	unlock_all(r);
}

bool member_fail_once(pthread_mutex_t *lock, char **failure, atomic_bool *failed, char *why)
{
	bool first;

	pthread_mutex_lock(lock);
	first = !*failure;
	if (first) {
		*failure = why;
		why = NULL;
		atomic_store(failed, true);
		g_message("FILESYSTEM FAILED: %s. From now on every change and every pool access "
			  "fails with EIO; unmount it.",
			  *failure);
	}
	pthread_mutex_unlock(lock);
	g_free(why);
	return first;
}

void member_fail(struct member *r, const char *fmt, ...)
{
	va_list ap;
	char *why;

	va_start(ap, fmt);
	why = g_strdup_vprintf(fmt, ap);
	va_end(ap);
	if (member_fail_once(&r->state_lock, &r->failure, &r->failed, why))
		pthread_cond_broadcast(&r->state_cond); /* waiters see failed and give up */
}

bool member_failed(const struct member *r)
{
	return atomic_load(&((struct member *)r)->failed);
}

bool member_fenced(const struct member *r)
{
	return atomic_load(&((struct member *)r)->fenced);
}

ssize_t member_state_text(struct member *r, char *buf, size_t cap)
{
	uint64_t now = clock_now_ns(), since, away;
	const char *state;
	unsigned int outages;
	char *failure;
	int n;

	pthread_mutex_lock(&r->state_lock);
	since = atomic_load(&r->down_since_ns);
	state = r->failure ? "failed" : since ? "away" : "up";
	away = r->away_ns + (since ? now - since : 0);
	outages = r->outages;
	failure = g_strdup(r->failure ? r->failure : "");
	pthread_mutex_unlock(&r->state_lock);
	/* (a reason is one line: messages never hold a newline) */
	n = snprintf(buf, cap, "state %s\nserver %s\noutages %u\naway_ms %" G_GUINT64_FORMAT
		     "\n%s%s%s",
		     state, r->server, outages, (guint64)(away / 1000000ULL),
		     *failure ? "failure " : "", failure, *failure ? "\n" : "");
	g_free(failure);
	if (n < 0 || (size_t)n >= cap)
		return -ERANGE;
	return n;
}

void member_set_write_deadline(struct member *r, uint64_t deadline_ns)
{
	pthread_mutex_lock(&r->state_lock);
	atomic_store(&r->deadline_ns, deadline_ns);
	pthread_cond_broadcast(&r->state_cond);
	pthread_mutex_unlock(&r->state_lock);
}
