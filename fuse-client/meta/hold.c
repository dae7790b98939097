// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * hold.c - freed space held for the readers (hold.h).
 *
 * The allocator keeps the blocks a transaction frees pending until the
 * transaction is durable (alloc.h); here they also wait for the readers.
 * The committer scans the reader slots once a second (one READ of 3 KiB
 * per member); a scan that started when transactions up to D were durable
 * and found the live readers at least at A lets blocks freed up to
 * min(D, A) go back to the allocator. A reader that joins after the scan
 * started loads a state with everything durable by then, so D is safe for
 * it; one that joined before is in the scan. Cost to the writer: that READ,
 * and space freed in the last refresh interval or so not yet reusable; a
 * full pool waits for the readers (hold_reclaim) rather than fail.
 *
 * Lock order: scan_lock, then m->lock.
 */
#define G_LOG_DOMAIN "rmemfs-hold"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "hold.h"

#include "alloc.h"
#include "clock.h"
#include "meta_int.h"
#include "readers.h"

#define HOLD_RING 256 /* journal writes remembered, for how long ago a seq became durable */
#define HOLD_POLL_MS 100

struct durable_mark {
	uint64_t seq; /* transactions up to seq */
	uint64_t t_ns; /* were durable from then on */
};

struct hold {
	pthread_mutex_t scan_lock;
	/* [m->lock] */
	uint64_t bound; /* blocks freed by transactions up to here may be reused */
	struct durable_mark ring[HOLD_RING];
	unsigned int head, n;
	struct reader_info list[LAYOUT_READER_SLOTS];
	int nlist;
};

/* one scan; the number of live readers and their minimum applied seq, or -errno */
static int scan(struct meta *m, uint64_t *min)
{
	struct hold *h = m->hold;
	uint64_t durable;
	int n;

	pthread_mutex_lock(&h->scan_lock);
	pthread_mutex_lock(&m->lock);
	durable = m->durable_seq;
	pthread_mutex_unlock(&m->lock);
	n = readers_scan(m->readers, min);
	if (n >= 0) {
		pthread_mutex_lock(&m->lock);
		h->bound = MIN(durable, *min);
		h->nlist = readers_list(m->readers, h->list, LAYOUT_READER_SLOTS);
		hold_release(m);
		pthread_mutex_unlock(&m->lock);
	}
	pthread_mutex_unlock(&h->scan_lock);
	return n;
}

int hold_start(struct meta *m, char **err_msg)
{
	uint64_t min = 0, deadline;
	bool said = false;
	int n;

	m->readers = readers_new(m->r);
	deadline = clock_now_ns() + 2ULL * readers_timeout_ms(m->readers) * 1000000ULL;
	m->hold = g_new0(struct hold, 1);
	pthread_mutex_init(&m->hold->scan_lock, NULL);
	for (;;) {
		n = scan(m, &min);
		if (n < 0) {
			if (err_msg && !*err_msg)
				*err_msg = g_strdup_printf("reading the reader slots: %s",
							   g_strerror(-n));
			return n;
		}
		if (!n || min >= m->durable_seq)
			return 0;
		if (clock_now_ns() > deadline) /* (the scans expire silent readers before) */
			return 0;
		if (!said)
			g_message("waiting for %d readers to follow the state just loaded (at most "
				  "%u ms: a silent one is expired)", n, readers_timeout_ms(m->readers));
		said = true;
		g_usleep(HOLD_POLL_MS * 1000);
	}
}

void hold_free(struct meta *m)
{
	if (!m || !m->hold)
		return;
	pthread_mutex_destroy(&m->hold->scan_lock);
	g_free(m->hold);
	m->hold = NULL;
}

void hold_scan(struct meta *m)
{
	uint64_t min;

	if (m->hold)
		scan(m, &min);
}

void hold_release(struct meta *m)
{
	if (m->alloc)
		alloc_release(m->alloc, MIN(m->durable_seq, m->hold ? m->hold->bound : UINT64_MAX));
}

void hold_note_durable(struct meta *m, uint64_t last_seq)
{
	struct hold *h = m->hold;

	if (!h)
		return;
	h->ring[h->head] = (struct durable_mark){ .seq = last_seq, .t_ns = clock_now_ns() };
	h->head = (h->head + 1) % HOLD_RING;
	h->n = MIN(h->n + 1, HOLD_RING);
}

int hold_reclaim(struct meta *m)
{
	uint64_t min, deadline, target, bound, pending;

	if (!m->hold)
		return -ENOSPC;
	deadline = clock_now_ns() + (readers_timeout_ms(m->readers) + 2000ULL) * 1000000ULL;
	pthread_mutex_lock(&m->lock);
	target = m->durable_seq;
	pthread_mutex_unlock(&m->lock);
	for (;;) {
		scan(m, &min);
		pthread_mutex_lock(&m->lock);
		bound = m->hold->bound;
		pending = alloc_npending(m->alloc);
		pthread_mutex_unlock(&m->lock);
		if (bound >= target || !pending)
			return 0;
		if (clock_now_ns() > deadline)
			return -ENOSPC;
		g_usleep(HOLD_POLL_MS * 1000 / 2);
	}
}

/* [lock] how long ago the first transaction after seq became durable, in ms (0: none) */
static uint64_t behind_ms(const struct hold *h, uint64_t seq, uint64_t now)
{
	unsigned int k, i;
	uint64_t t = 0;

	for (k = 1; k <= h->n; k++) { /* newest to oldest */
		i = (h->head + HOLD_RING - k) % HOLD_RING;
		if (h->ring[i].seq <= seq)
			break;
		t = h->ring[i].t_ns;
	}
	return t && now > t ? (now - t) / 1000000 : 0;
}

size_t hold_stats_text(struct meta *m, char *buf, size_t cap)
{
	struct hold *h = m->hold;
	uint64_t now = clock_now_ns();
	size_t used = 0;
	int i, n;

	if (!h)
		return 0;
	pthread_mutex_lock(&m->lock);
	n = snprintf(buf, cap, "role writer\nreaders %d\n", h->nlist);
	for (i = 0; i < h->nlist && n >= 0 && (size_t)n < cap - used; i++) {
		const struct reader_info *r = &h->list[i];

		used += (size_t)n;
		n = snprintf(buf + used, cap - used,
			     "reader.%u id=%016" G_GINT64_MODIFIER "x applied=%" G_GUINT64_FORMAT
			     " behind_txns=%" G_GUINT64_FORMAT " behind_ms=%" G_GUINT64_FORMAT
			     " host=%s\n",
			     r->slot, (guint64)r->id, (guint64)r->applied,
			     (guint64)(m->durable_seq > r->applied ? m->durable_seq - r->applied : 0),
			     (guint64)behind_ms(h, r->applied, now), r->host[0] ? r->host : "?");
	}
	pthread_mutex_unlock(&m->lock);
	if (n > 0)
		used += (size_t)n;
	return MIN(used, cap ? cap - 1 : 0);
}
