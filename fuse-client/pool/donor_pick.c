// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * donor_pick.c - power of two choices over the candidates' free capacity
 * (donor_pick.h).
 */
#include "donor_pick.h"

#include <errno.h>

int donor_pick(const uint64_t *free_bytes, unsigned int n, uint64_t need, unsigned int want,
	       donor_rand_fn rand_below, void *ctx, unsigned int *out)
{
	unsigned int left[DONOR_PICK_MAX];
	unsigned int m = 0, i, k;

	if (!want || n > DONOR_PICK_MAX)
		return -EINVAL;
	for (i = 0; i < n; i++)
		if (free_bytes[i] >= need)
			left[m++] = i;
	if (m < want)
		return -ENOSPC;
	for (k = 0; k < want; k++) {
		unsigned int a = 0, b;

		if (m > 1) {
			a = rand_below(ctx, m);
			b = rand_below(ctx, m - 1);
			b += b >= a; /* distinct from a */
			if (free_bytes[left[b]] > free_bytes[left[a]])
				a = b;
		}
		out[k] = left[a];
		left[a] = left[--m]; /* chosen: not drawn again */
	}
	return 0;
}
