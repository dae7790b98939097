// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * alloc.c - data-block bitmap allocator with pending frees (see alloc.h).
 *
 * The bitmap is an array of 64-bit words, bit set = block in use; the bits
 * past the last block are set so they are never handed out. Searches skip
 * full words, so finding free space costs O(used/64) in the worst case.
 */
#define G_LOG_DOMAIN "rmemfs-alloc"

#include "alloc.h"

#include <errno.h>
#include <string.h>

#include <glib.h>

struct pending_free {
	uint64_t start;
	uint64_t count;
	uint64_t seq;
};

struct alloc {
	uint64_t nblocks;
	uint64_t nwords;
	uint64_t *bits;
	uint64_t nfree;
	uint64_t npending;
	uint64_t cursor; /* next-fit position */
	GArray *pending; /* struct pending_free, seq non-decreasing from pending_head */
	guint pending_head;
};

int alloc_new(uint64_t nblocks, struct alloc **out)
{
	struct alloc *a;
	uint64_t b;

	if (!nblocks)
		return -EINVAL;
	a = g_new0(struct alloc, 1);
	a->nblocks = nblocks;
	a->nwords = (nblocks + 63) / 64;
	a->bits = g_new0(uint64_t, a->nwords);
	for (b = nblocks; b < a->nwords * 64; b++)
		a->bits[b / 64] |= 1ULL << (b % 64);
	a->nfree = nblocks;
	a->pending = g_array_new(FALSE, FALSE, sizeof(struct pending_free));
	*out = a;
	return 0;
}

void alloc_destroy(struct alloc *a)
{
	if (!a)
		return;
	g_array_free(a->pending, TRUE);
	g_free(a->bits);
	g_free(a);
}

uint64_t alloc_nfree(const struct alloc *a)
{
	return a->nfree;
}

uint64_t alloc_npending(const struct alloc *a)
{
	return a->npending;
}

bool alloc_is_used(const struct alloc *a, uint64_t block)
{
	return block >= a->nblocks || (a->bits[block / 64] >> (block % 64)) & 1;
}

/* mask of bits [lo, hi) within one word, 0 <= lo < hi <= 64 */
static uint64_t word_mask(unsigned int lo, unsigned int hi)
{
	uint64_t m = hi == 64 ? ~0ULL : (1ULL << hi) - 1;

	return m & ~((1ULL << lo) - 1);
}

/* set (used) or clear bits [start, start+count); returns bits that already had that value */
static uint64_t set_range(struct alloc *a, uint64_t start, uint64_t count, bool used)
{
	uint64_t same = 0, b = start, end = start + count;

	while (b < end) {
		unsigned int lo = b % 64;
		unsigned int hi = (end - (b - lo)) >= 64 ? 64 : (unsigned int)(end - (b - lo));
		uint64_t m = word_mask(lo, hi);
		uint64_t *w = &a->bits[b / 64];

		if (used) {
			same += (uint64_t)__builtin_popcountll(*w & m);
			*w |= m;
		} else {
			same += (uint64_t)__builtin_popcountll(~*w & m);
			*w &= ~m;
		}
		b += hi - lo;
	}
	return same;
}

int64_t alloc_mark(struct alloc *a, uint64_t start, uint64_t count)
{
	uint64_t dup;

	if (start >= a->nblocks || count > a->nblocks - start)
		return -ERANGE;
	dup = set_range(a, start, count, true);
	a->nfree -= count - dup;
	return (int64_t)dup;
}

/* first free block in [from, a->nblocks), or nblocks */
static uint64_t find_free(const struct alloc *a, uint64_t from)
{
	uint64_t wi;
	uint64_t w;

	if (from >= a->nblocks)
		return a->nblocks;
	wi = from / 64;
	w = a->bits[wi] | ((1ULL << (from % 64)) - 1);
	for (;;) {
		if (~w)
			return MIN(wi * 64 + (uint64_t)__builtin_ctzll(~w), a->nblocks);
		if (++wi >= a->nwords)
			return a->nblocks;
		w = a->bits[wi];
	}
}

/* length of the free run at b, at most max */
static uint64_t run_len(const struct alloc *a, uint64_t b, uint64_t max)
{
	uint64_t n = 0;

	while (n < max && b + n < a->nblocks) {
		uint64_t wi = (b + n) / 64;
		unsigned int bit = (b + n) % 64;
		uint64_t w = a->bits[wi] >> bit;
		unsigned int freebits = w ? (unsigned int)__builtin_ctzll(w) : 64 - bit;

		n += freebits;
		if (bit + freebits < 64)
			break;
	}
	return MIN(n, MIN(max, a->nblocks - b));
}

int alloc_get(struct alloc *a, uint64_t goal, uint64_t want, uint64_t *start, uint64_t *got)
{
	uint64_t b;

	if (!want)
		return -EINVAL;
	if (!a->nfree)
		return -ENOSPC;
	if (goal < a->nblocks && !alloc_is_used(a, goal)) {
		b = goal;
	} else {
		b = find_free(a, a->cursor);
		if (b >= a->nblocks)
			b = find_free(a, 0);
		if (b >= a->nblocks) {
			g_warning("allocator: nfree %" G_GUINT64_FORMAT " but no free bit",
				  (guint64)a->nfree);
			return -ENOSPC;
		}
	}
	*start = b;
	*got = run_len(a, b, want);
	set_range(a, b, *got, true);
	a->nfree -= *got;
	a->cursor = b + *got;
	return 0;
}

void alloc_put(struct alloc *a, uint64_t start, uint64_t count)
{
	uint64_t already;

	if (start >= a->nblocks || count > a->nblocks - start) {
		g_warning("allocator: freeing [%" G_GUINT64_FORMAT ", +%" G_GUINT64_FORMAT
			  ") outside the data area",
			  (guint64)start, (guint64)count);
		return;
	}
	already = set_range(a, start, count, false);
	if (already)
		g_warning("allocator: %" G_GUINT64_FORMAT " blocks at %" G_GUINT64_FORMAT
			  " freed twice",
			  (guint64)already, (guint64)start);
	a->nfree += count - already;
}

void alloc_put_pending(struct alloc *a, uint64_t start, uint64_t count, uint64_t seq)
{
	struct pending_free p = { .start = start, .count = count, .seq = seq };

	if (!count)
		return;
	g_array_append_val(a->pending, p);
	a->npending += count;
}

void alloc_release(struct alloc *a, uint64_t durable_seq)
{
	while (a->pending_head < a->pending->len) {
		struct pending_free *p =
			&g_array_index(a->pending, struct pending_free, a->pending_head);

		if (p->seq > durable_seq)
			break;
		a->npending -= p->count;
		alloc_put(a, p->start, p->count);
		a->pending_head++;
	}
	if (a->pending_head == a->pending->len) {
		g_array_set_size(a->pending, 0);
		a->pending_head = 0;
	} else if (a->pending_head > 1024 && a->pending_head * 2 > a->pending->len) {
		g_array_remove_range(a->pending, 0, a->pending_head);
		a->pending_head = 0;
	}
}

void alloc_export(const struct alloc *a, uint8_t *out, uint64_t nbytes)
{
	uint64_t i;

	for (i = 0; i < nbytes; i++) {
		uint64_t w = i / 8 < a->nwords ? a->bits[i / 8] : 0;

		out[i] = (uint8_t)(w >> ((i % 8) * 8));
	}
	/* bits past nblocks are 0 on the pool */
	if (a->nblocks % 8 && a->nblocks / 8 < nbytes)
		out[a->nblocks / 8] &= (uint8_t)((1U << (a->nblocks % 8)) - 1);
}
