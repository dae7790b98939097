// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * place.c - declustered placement of units over a member set (place.h).
 */
#include "place.h"

#include <errno.h>
#include <string.h>

/* the next r-combination of [0, n) after c in lexicographic order; 0 at the end */
static int next_comb(uint8_t *c, uint32_t n, uint32_t r)
{
	int i = (int)r - 1;
	uint32_t k;

	while (i >= 0 && c[i] == n - r + (uint32_t)i)
		i--;
	if (i < 0)
		return 0;
	c[i]++;
	for (k = (uint32_t)i + 1; k < r; k++)
		c[k] = c[k - 1] + 1;
	return 1;
}

int place_init(struct place *p, uint32_t n, uint32_t r, uint64_t member_units)
{
	uint32_t fill[PLACE_MAX_MEMBERS] = { 0 };
	uint8_t c[PLACE_MAX_REPLICAS];
	uint32_t i, k;

	memset(p, 0, sizeof(*p));
	if (r < 1 || r > PLACE_MAX_REPLICAS || n < r || n > PLACE_MAX_MEMBERS)
		return -EINVAL;
	for (k = 0; k < r; k++)
		c[k] = (uint8_t)k;
	i = 0;
	do {
		for (k = 0; k < r; k++) {
			p->comb[i][k] = c[k];
			p->rank[i][k] = fill[c[k]]++;
		}
		i++;
	} while (next_comb(c, n, r));
	p->n = n;
	p->r = r;
	p->ncomb = i;
	p->per_cycle = fill[0]; /* the same for every member: each is in C(n-1, r-1) */
	p->cycles = member_units / p->per_cycle;
	return p->cycles ? 0 : -ENOSPC;
}

uint64_t place_units(const struct place *p)
{
	return p->cycles * p->ncomb;
}

void place_unit(const struct place *p, uint64_t u, struct place_copy *copies)
{
	uint64_t cycle = u / p->ncomb;
	uint32_t j = (uint32_t)(u % p->ncomb), k;

	for (k = 0; k < p->r; k++) {
		copies[k].member = p->comb[j][k];
		copies[k].slot = cycle * p->per_cycle + p->rank[j][k];
	}
}

bool place_unit_on(const struct place *p, uint64_t u, uint32_t m, uint64_t *slot)
{
	struct place_copy c[PLACE_MAX_REPLICAS];
	uint32_t k;

	place_unit(p, u, c);
	for (k = 0; k < p->r; k++) {
		if (c[k].member == m) {
			*slot = c[k].slot;
			return true;
		}
	}
	return false;
}

/* ---- erasure-coded stripes ---- */

static uint32_t gcd(uint32_t a, uint32_t b)
{
	while (b) {
		uint32_t t = a % b;

		a = b;
		b = t;
	}
	return a;
}

/*
 * A stride near ncomb / phi that is prime to ncomb: every combination is
 * visited once per cycle, and consecutive ones are not lexicographic
 * neighbours (which share all members but one).
 */
static uint32_t visit_stride(uint32_t ncomb)
{
	uint32_t s = (uint32_t)(((uint64_t)ncomb * 618 + 500) / 1000);

	if (s < 1)
		s = 1;
	while (gcd(s, ncomb) != 1)
		s++;
	return s;
}

/* the slot, within its cycle, of position pos of combination c taken at rotation t */
static uint64_t stripe_slot(const struct place_stripes *p, uint32_t c, uint32_t t, uint32_t pos)
{
	return (uint64_t)p->rank[c][pos] * p->w + t;
}

/* stripes of a partial cycle of left slots per member: those, in order, that fit whole */
static uint64_t partial_stripes(const struct place_stripes *p, uint64_t left)
{
	uint32_t idx, pos;

	for (idx = 0; idx < p->ncomb * p->w; idx++) {
		uint32_t c = idx / p->w * p->stride % p->ncomb, t = idx % p->w;

		for (pos = 0; pos < p->w; pos++)
			if (stripe_slot(p, c, t, pos) >= left)
				return idx;
	}
	return idx;
}

int place_stripes_init(struct place_stripes *p, uint32_t n, uint32_t w, uint64_t member_units)
{
	uint32_t fill[PLACE_MAX_MEMBERS] = { 0 };
	uint8_t c[PLACE_STRIPE_MAX_WIDTH];
	uint32_t i, j, k;

	memset(p, 0, sizeof(*p));
	if (w < 2 || w > PLACE_STRIPE_MAX_WIDTH || n < w || n > PLACE_MAX_MEMBERS)
		return -EINVAL;
	for (k = 0; k < w; k++)
		c[k] = (uint8_t)k;
	i = 0;
	do {
		memcpy(p->comb[i++], c, w);
	} while (next_comb(c, n, w));
	p->n = n;
	p->w = w;
	p->ncomb = i;
	p->stride = visit_stride(i);
	for (j = 0; j < p->ncomb; j++) {
		uint32_t cj = j * p->stride % p->ncomb;

		for (k = 0; k < w; k++)
			p->rank[cj][k] = fill[p->comb[cj][k]]++;
	}
	/* each member is in C(n - 1, w - 1) combinations, each taken w times */
	p->per_cycle = fill[0] * w;
	p->stripes = member_units / p->per_cycle * p->ncomb * w +
		     partial_stripes(p, member_units % p->per_cycle);
	return p->stripes ? 0 : -ENOSPC;
}

void place_stripe(const struct place_stripes *p, uint64_t s, struct place_copy *frags)
{
	uint64_t cycle = s / ((uint64_t)p->ncomb * p->w);
	uint32_t idx = (uint32_t)(s % ((uint64_t)p->ncomb * p->w));
	uint32_t c = idx / p->w * p->stride % p->ncomb, t = idx % p->w, i, pos;

	for (i = 0; i < p->w; i++) {
		pos = (i + t) % p->w;
		frags[i].member = p->comb[c][pos];
		frags[i].slot = cycle * p->per_cycle + stripe_slot(p, c, t, pos);
	}
}

uint32_t place_stripe_sources(const struct place_stripes *p, uint64_t s, uint32_t f, uint32_t k,
			      uint32_t up)
{
	/* consecutive within a combination's w rotations, scattered between combinations */
	uint64_t mix = s / p->w;
	uint32_t start, src = 0, have = 0, j, i;

	mix = (mix ^ (mix >> 33)) * 0xff51afd7ed558ccdULL; /* MurmurHash3's fmix64 */
	mix = (mix ^ (mix >> 33)) * 0xc4ceb9fe1a85ec53ULL;
	start = (uint32_t)((s + (mix ^ (mix >> 33))) % (p->w - 1));

	/* the others, f + 1 on around: number j of them is fragment (f + 1 + j) % w */
	for (j = 0; j < p->w - 1 && have < k; j++) {
		i = (f + 1 + (start + j) % (p->w - 1)) % p->w;
		if (i != f && (up & (1U << i))) {
			src |= 1U << i;
			have++;
		}
	}
	return have == k ? src : 0;
}
