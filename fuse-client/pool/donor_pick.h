/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * donor_pick.h - choosing the members of a new member set among candidate
 * memservers by their free capacity: power of two choices, as Infiniswap
 * places its slabs. Picking the emptiest server every time sends every
 * client that asks at about the same moment to the same server; picking at
 * random ignores how full they are. Drawing two at random and keeping the
 * emptier of the two spreads concurrent choosers and still leans to room
 * (Mitzenmacher, "The Power of Two Choices in Randomized Load Balancing").
 * A pure function (donors.c asks the servers), so its test is seeded.
 */
#ifndef RMEM_DONOR_PICK_H
#define RMEM_DONOR_PICK_H

#include <stdint.h>

/* a random source: a uniform value in [0, bound), bound >= 1 */
typedef uint32_t (*donor_rand_fn)(void *ctx, uint32_t bound);

/*
 * Choose want of the n candidates, whose free capacities are free_bytes[],
 * for a pool of need bytes: for each of the want slots, two distinct random
 * candidates not chosen yet that have room (free >= need), the one with
 * more free capacity kept (the first drawn on a tie); the last one with
 * room is taken alone. out[0..want) are the chosen indexes, in the order
 * chosen. 0; -ENOSPC (nothing chosen) if fewer than want candidates have
 * room; -EINVAL for want 0 or n above DONOR_PICK_MAX.
 */
#define DONOR_PICK_MAX 256U
int donor_pick(const uint64_t *free_bytes, unsigned int n, uint64_t need, unsigned int want,
	       donor_rand_fn rand_below, void *ctx, unsigned int *out);

#endif /* RMEM_DONOR_PICK_H */
