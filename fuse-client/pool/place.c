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
