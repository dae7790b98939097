// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * remote.c - the pool as one flat byte range, over a small set of channels.
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
 * The arena. The block cache registers its slot memory once
 * (remote_register_arena); every channel registers it with its xport, also
 * after a reconnect. An iovec piece that lies inside the arena is posted
 * straight from / into that memory (RDMA READs land in cache slots, WRITEs
 * go out of them, TCP receives into them): no bounce copy, and such pieces
 * do not count against the bounce size, so a whole multi-block request is
 * one batch.
 *
 * A connection-level failure (-ENOTCONN, -EIO, -ETIMEDOUT...) closes the
 * channel's xport; the next request on it reconnects first and checks that the
 * server still serves the same pool (pool_id and size), so a restarted server
 * with a blank pool is never written to. READ and WRITE are retried once on
 * a fresh connection (both are idempotent); atomics are not (a lost reply may
 * hide an applied CAS), the caller decides.
 *
 * Fencing: super.c sets a write deadline that its lease heartbeat keeps
 * pushing forward, and fences the pool for good when the lease was taken by
 * someone else; writes and atomics check both before posting. Every channel
 * presents the remote's client id (the lease owner value) at connect; once
 * the memserver answers -EKEYREVOKED (a new holder fenced us), the channel is
 * closed, the remote fenced and marked revoked for the heartbeat, and the
 * error becomes -EIO like any other fenced write (chan_revoked).
 *
 * Lock order: one channel lock at a time, never held while taking another.
 */
#define G_LOG_DOMAIN "rmemfs-remote"

#include "remote.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <glib.h>

#define REMOTE_MIN_BOUNCE (1U << 20)
#define REMOTE_DEFAULT_BOUNCE (2U << 20)

struct remote_chan {
	pthread_mutex_t lock;
	unsigned int idx;
	struct xport *x; /* NULL: not connected (reconnect on next use); under lock */
	struct xport_mr *mr; /* bounce registration with x; under lock */
	struct xport_mr *arena_mr; /* the cache arena's registration with x, or NULL; under lock */
	uint8_t *arena; /* the arena this channel posts from (NULL: none); under lock */
	size_t arena_len;
	uint8_t *bounce; /* bounce_len bytes, page aligned, lives as long as the remote */
	struct xport_op *ops; /* scratch, REMOTE_MAX_BATCH entries; under lock */
	uint8_t **dst; /* READ: where each op's bytes go; under lock */
};

#define REMOTE_MAX_BATCH 256U

struct remote {
	char *host;
	char *transport_req; /* what the caller asked for ("auto"...) */
	char transport[16]; /* what the first connection used */
	struct xport_params params;
	struct proto_pool pool;
	uint64_t *region_start; /* pool offset of each region's first byte */
	/* the registered cache arena (remote_register_arena); changed with every channel lock held */
	uint8_t *arena;
	size_t arena_len;
	size_t bounce_len;
	unsigned int nchan;
	struct remote_chan *chan;
	atomic_uint next; /* the channel released last: the next request starts there */
	atomic_bool fenced;
	atomic_bool revoked; /* the memserver fenced our client id */
	_Atomic uint64_t deadline_ns;
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static bool conn_error(int rc)
{
	return rc == -ENOTCONN || rc == -EIO || rc == -ETIMEDOUT || rc == -ECONNRESET ||
	       rc == -EPIPE || rc == -ECONNABORTED || rc == -ESHUTDOWN;
}

static void chan_disconnect(struct remote_chan *c)
{
	if (!c->x)
		return;
	xport_dereg_mr(c->x, c->arena_mr);
	c->arena_mr = NULL;
	xport_dereg_mr(c->x, c->mr);
	c->mr = NULL;
	xport_close(c->x);
	c->x = NULL;
}

/* connect channel c (lock held); first: adopt the pool descriptor, else compare */
static int chan_connect(struct remote *r, struct remote_chan *c, bool first)
{
	struct xport *x;
	int rc;

	rc = xport_connect(r->transport_req, &r->params, &x);
	if (rc < 0)
		return rc;
	if (first) {
		rc = proto_pool_copy(&r->pool, &x->pool);
		if (rc < 0)
			goto err_close;
		g_strlcpy(r->transport, xport_name(x), sizeof(r->transport));
	} else if (x->pool.size != r->pool.size || x->pool.pool_id != r->pool.pool_id ||
		   x->pool.nregions != r->pool.nregions) {
		g_message("%s now serves another pool (id %016" G_GINT64_MODIFIER
			  "x, was %016" G_GINT64_MODIFIER "x): refusing to use it",
			  x->peer, (guint64)x->pool.pool_id, (guint64)r->pool.pool_id);
		rc = -EIO;
		goto err_close;
	}
	rc = xport_reg_mr(x, c->bounce, r->bounce_len, &c->mr);
	if (rc < 0) {
		g_message("xport_reg_mr(%zu bytes): %s", r->bounce_len, g_strerror(-rc));
		goto err_close;
	}
	if (r->arena) {
		rc = xport_reg_mr(x, r->arena, r->arena_len, &c->arena_mr);
		if (rc < 0) {
			g_message("xport_reg_mr(cache arena, %zu bytes): %s", r->arena_len,
				  g_strerror(-rc));
			goto err_dereg_bounce;
		}
	}
	c->x = x;
	return 0;

err_dereg_bounce:
	xport_dereg_mr(x, c->mr);
	c->mr = NULL;
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
static struct remote_chan *chan_get(struct remote *r)
{
	unsigned int start = atomic_load(&r->next) % r->nchan, k;
	struct remote_chan *c;

	for (k = 0; k < r->nchan; k++) {
		c = &r->chan[(start + k) % r->nchan];
		if (pthread_mutex_trylock(&c->lock) == 0)
			return c;
	}
	c = &r->chan[start];
	pthread_mutex_lock(&c->lock);
	return c;
}

static void chan_put(struct remote *r, struct remote_chan *c)
{
	atomic_store(&r->next, c->idx);
	pthread_mutex_unlock(&c->lock);
}

/* make sure c is connected (lock held) */
static int chan_ready(struct remote *r, struct remote_chan *c)
{
	int rc;

	if (c->x)
		return 0;
	rc = chan_connect(r, c, false);
	if (rc < 0) {
		g_debug("reconnecting channel %u: %s", c->idx, g_strerror(-rc));
		return conn_error(rc) || rc == -ECONNREFUSED ? -EIO : rc;
	}
	g_message("channel %u reconnected to %s", c->idx, c->x->peer);
	return 0;
}

/* region index holding pool offset off (binary search) */
static int region_of(const struct remote *r, uint64_t off)
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

/* does [p, p+len) lie in the channel's registered arena? */
static bool in_arena(const struct remote_chan *c, const uint8_t *p, size_t len)
{
	return c->arena_mr && p >= c->arena && len <= c->arena_len &&
	       (size_t)(p - c->arena) <= c->arena_len - len;
}

static int check_fence(struct remote *r)
{
	uint64_t dl;

	if (atomic_load(&r->fenced))
		return -EIO;
	dl = atomic_load(&r->deadline_ns);
	if (dl && now_ns() > dl)
		return -EIO;
	return 0;
}

/*
 * The memserver fenced our client id (a request or reconnect of channel c
 * failed with -EKEYREVOKED; lock held): close the channel, fence the remote
 * for good and tell the heartbeat (remote_revoked). Returns rc, -EIO for that.
 */
static int chan_revoked(struct remote *r, struct remote_chan *c, int rc)
{
	if (rc != -EKEYREVOKED)
		return rc;
	if (!atomic_exchange(&r->revoked, true))
		g_message("the memserver fenced this client (another client took the lease over): "
			  "no further write reaches the pool");
	atomic_store(&r->fenced, true);
	chan_disconnect(c);
	return -EIO;
}

/*
 * Move the bytes of iov[] to/from the pool on channel c (lock held, connected).
 * zero: WRITE zeroes (iov_base ignored). Returns 0 or -errno.
 */
static int chan_rw(struct remote *r, struct remote_chan *c, enum xport_op_type type, bool zero,
		   const uint64_t *offs, const struct iovec *iov, int cnt)
{
	const unsigned int max_batch = REMOTE_MAX_BATCH;
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
			bool direct;
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
			direct = !zero && in_arena(c, (uint8_t *)iov[i].iov_base + pos, len);
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
			op->raddr = r->pool.regions[reg].addr + (off - r->region_start[reg]);
			op->rkey = r->pool.regions[reg].rkey;
			if (zero) {
				op->local = c->bounce;
			} else if (direct) {
				/* cache arena: straight from / into the slot */
				op->mr = c->arena_mr;
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

static int do_rw(struct remote *r, enum xport_op_type type, bool zero, const uint64_t *offs,
		 const struct iovec *iov, int cnt)
{
	struct remote_chan *c;
	int attempt, rc = 0, i;

	for (i = 0; i < cnt; i++)
		if (offs[i] + iov[i].iov_len < offs[i] || offs[i] + iov[i].iov_len > r->pool.size)
			return -ERANGE;
	if (type == XPORT_WRITE) {
		rc = check_fence(r);
		if (rc < 0)
			return rc;
	}
	c = chan_get(r);
	for (attempt = 0; attempt < 2; attempt++) {
		rc = chan_ready(r, c);
		if (rc < 0)
			break;
		rc = chan_rw(r, c, type, zero, offs, iov, cnt);
		if (rc >= 0 || !conn_error(rc))
			break;
		g_message("channel %u: %s %s: %s; reconnecting", c->idx, c->x->peer,
			  xport_op_type_str(type), g_strerror(-rc));
		chan_disconnect(c);
		rc = -EIO;
	}
	rc = chan_revoked(r, c, rc);
	chan_put(r, c);
	return rc;
}

static int do_atomic(struct remote *r, enum xport_op_type type, bool fenced, uint64_t off,
		     uint64_t compare_add, uint64_t swap, uint64_t *old)
{
	struct remote_chan *c;
	uint64_t raddr;
	uint32_t rkey;
	uint64_t *res;
	int rc;

	if (off % 8 || off + 8 > r->pool.size)
		return -EINVAL;
	if (fenced) {
		rc = check_fence(r);
		if (rc < 0)
			return rc;
	}
	rc = proto_pool_resolve(&r->pool, off, 8, &raddr, &rkey);
	if (rc < 0)
		return rc;
	c = chan_get(r);
	rc = chan_ready(r, c);
	if (rc < 0)
		goto out;
	res = (uint64_t *)c->bounce;
	if (type == XPORT_CAS)
		rc = xport_cas(c->x, c->mr, res, raddr, rkey, compare_add, swap);
	else
		rc = xport_fetch_add(c->x, c->mr, res, raddr, rkey, compare_add);
	if (rc < 0) {
		if (conn_error(rc)) {
			g_message("channel %u: %s %s: %s", c->idx, c->x->peer,
				  xport_op_type_str(type), g_strerror(-rc));
			chan_disconnect(c);
			rc = -EIO;
		}
		goto out;
	}
	if (old)
		*old = *res;
out:
	rc = chan_revoked(r, c, rc);
	chan_put(r, c);
	return rc;
}

/* ---- public API ---- */

int remote_open(const struct remote_config *cfg, struct remote **out)
{
	struct remote *r;
	unsigned int i;
	uint64_t start = 0;
	int rc;

	*out = NULL;
	if (!cfg->params.host || !cfg->qps)
		return -EINVAL;
	r = g_new0(struct remote, 1);
	r->host = g_strdup(cfg->params.host);
	r->transport_req = g_strdup(cfg->transport ? cfg->transport : "auto");
	r->params = cfg->params;
	r->params.host = r->host;
	if (!r->params.client_id)
		r->params.client_id = proto_client_id_new();
	r->bounce_len = cfg->bounce_size ? cfg->bounce_size : REMOTE_DEFAULT_BOUNCE;
	r->bounce_len = MAX(r->bounce_len, (size_t)REMOTE_MIN_BOUNCE);
	r->bounce_len = (r->bounce_len + 4095) & ~(size_t)4095;
	r->nchan = cfg->qps;
	r->chan = g_new0(struct remote_chan, r->nchan);
	for (i = 0; i < r->nchan; i++) {
		struct remote_chan *c = &r->chan[i];

		pthread_mutex_init(&c->lock, NULL);
		c->idx = i;
		c->ops = g_new0(struct xport_op, REMOTE_MAX_BATCH);
		c->dst = g_new0(uint8_t *, REMOTE_MAX_BATCH);
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
	remote_close(r);
	return rc;
}

void remote_close(struct remote *r)
{
	unsigned int i;

	if (!r)
		return;
	for (i = 0; i < r->nchan; i++) {
		struct remote_chan *c = &r->chan[i];

		chan_disconnect(c);
		free(c->bounce);
		g_free(c->ops);
		g_free(c->dst);
		pthread_mutex_destroy(&c->lock);
	}
	g_free(r->chan);
	g_free(r->region_start);
	proto_pool_clear(&r->pool);
	g_free(r->host);
	g_free(r->transport_req);
	g_free(r);
}

uint64_t remote_size(const struct remote *r)
{
	return r->pool.size;
}

uint64_t remote_pool_id(const struct remote *r)
{
	return r->pool.pool_id;
}

uint64_t remote_client_id(const struct remote *r)
{
	return r->params.client_id;
}

const char *remote_transport(const struct remote *r)
{
	return r->transport;
}

int remote_read(struct remote *r, uint64_t off, void *buf, size_t len)
{
	struct iovec iov = { .iov_base = buf, .iov_len = len };

	return len ? do_rw(r, XPORT_READ, false, &off, &iov, 1) : 0;
}

int remote_write(struct remote *r, uint64_t off, const void *buf, size_t len)
{
	struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };

	return len ? do_rw(r, XPORT_WRITE, false, &off, &iov, 1) : 0;
}

int remote_readv(struct remote *r, const uint64_t *offs, const struct iovec *iov, int cnt)
{
	return cnt > 0 ? do_rw(r, XPORT_READ, false, offs, iov, cnt) : 0;
}

int remote_writev(struct remote *r, const uint64_t *offs, const struct iovec *iov, int cnt)
{
	return cnt > 0 ? do_rw(r, XPORT_WRITE, false, offs, iov, cnt) : 0;
}

int remote_zero(struct remote *r, uint64_t off, uint64_t len)
{
	struct iovec iov = { .iov_base = NULL, .iov_len = (size_t)len };

	if (len != (size_t)len)
		return -EINVAL;
	return len ? do_rw(r, XPORT_WRITE, true, &off, &iov, 1) : 0;
}

int remote_cas(struct remote *r, uint64_t off, uint64_t compare, uint64_t swap, uint64_t *old)
{
	return do_atomic(r, XPORT_CAS, true, off, compare, swap, old);
}

int remote_fetch_add(struct remote *r, uint64_t off, uint64_t add, uint64_t *old)
{
	return do_atomic(r, XPORT_FETCH_ADD, true, off, add, 0, old);
}

int remote_cas_unfenced(struct remote *r, uint64_t off, uint64_t compare, uint64_t swap,
			uint64_t *old)
{
	return do_atomic(r, XPORT_CAS, false, off, compare, swap, old);
}

int remote_fetch_add_unfenced(struct remote *r, uint64_t off, uint64_t add, uint64_t *old)
{
	return do_atomic(r, XPORT_FETCH_ADD, false, off, add, 0, old);
}

int remote_register_arena(struct remote *r, void *addr, size_t len)
{
	unsigned int i, k;
	int rc = 0;

	if (!addr || !len || r->arena)
		return -EINVAL;
	for (i = 0; i < r->nchan; i++)
		pthread_mutex_lock(&r->chan[i].lock);
	for (i = 0; i < r->nchan; i++) {
		struct remote_chan *c = &r->chan[i];

		if (!c->x)
			continue; /* registered when it reconnects */
		rc = xport_reg_mr(c->x, addr, len, &c->arena_mr);
		if (rc < 0) {
			g_message("xport_reg_mr(cache arena, %zu bytes) on channel %u: %s", len, i,
				  g_strerror(-rc));
			break;
		}
	}
	if (rc < 0) {
		for (k = 0; k < i; k++) {
			xport_dereg_mr(r->chan[k].x, r->chan[k].arena_mr);
			r->chan[k].arena_mr = NULL;
		}
	} else {
		r->arena = addr;
		r->arena_len = len;
		for (i = 0; i < r->nchan; i++) {
			r->chan[i].arena = addr;
			r->chan[i].arena_len = len;
		}
	}
	for (i = 0; i < r->nchan; i++)
		pthread_mutex_unlock(&r->chan[i].lock);
	return rc;
}

void remote_unregister_arena(struct remote *r)
{
	unsigned int i;

	if (!r || !r->arena)
		return;
	for (i = 0; i < r->nchan; i++)
		pthread_mutex_lock(&r->chan[i].lock);
	for (i = 0; i < r->nchan; i++) {
		struct remote_chan *c = &r->chan[i];

		if (c->x)
			xport_dereg_mr(c->x, c->arena_mr);
		c->arena_mr = NULL;
		c->arena = NULL;
		c->arena_len = 0;
	}
	r->arena = NULL;
	r->arena_len = 0;
	for (i = 0; i < r->nchan; i++)
		pthread_mutex_unlock(&r->chan[i].lock);
}

void remote_fence(struct remote *r)
{
	atomic_store(&r->fenced, true);
}

bool remote_fenced(const struct remote *r)
{
	return atomic_load(&((struct remote *)r)->fenced);
}

bool remote_revoked(const struct remote *r)
{
	return atomic_load(&((struct remote *)r)->revoked);
}

int remote_fence_client(struct remote *r, uint64_t victim)
{
	struct remote_chan *c = chan_get(r);
	int rc;

	rc = chan_ready(r, c);
	if (rc == 0) {
		rc = xport_fence(c->x, victim);
		if (conn_error(rc))
			chan_disconnect(c);
	}
	rc = chan_revoked(r, c, rc);
	chan_put(r, c);
	return rc;
}

void remote_set_write_deadline(struct remote *r, uint64_t deadline_ns)
{
	atomic_store(&r->deadline_ns, deadline_ns);
}
