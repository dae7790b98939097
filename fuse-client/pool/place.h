/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * place.h - where the copies of each unit of the filesystem's address space
 * live in a member set (declustered replication).
 *
 * The address space is cut into units. Each unit has r copies on r distinct
 * members of n. Units walk through all C(n, r) r-member combinations in
 * turn, one cycle after another, so every two members share the same number
 * of units: when a member is lost, each survivor holds copies of an equal
 * share of its units and a rebuild reads from all of them, and every member
 * holds the same number of units. Within a cycle a member holds
 * C(n, r) * r / n units; the copy of a unit on member m goes to slot
 * cycle * that + (the combination's rank among those that contain m).
 *
 * Pure arithmetic, no allocation after place_init; thread-safe to read.
 */
#ifndef RMEM_PLACE_H
#define RMEM_PLACE_H

#include <stdbool.h>
#include <stdint.h>

#define PLACE_MAX_MEMBERS 12U
#define PLACE_MAX_REPLICAS 4U /* an erasure-coded set's replicated zone: M + 1 */
#define PLACE_MAX_COMBS 495U /* C(12, 4), the most combinations the limits allow */

struct place_copy {
	uint32_t member;
	uint64_t slot; /* unit slot on that member */
};

struct place {
	uint32_t n, r;
	uint32_t ncomb; /* C(n, r) */
	uint32_t per_cycle; /* slots each member fills per cycle: ncomb * r / n */
	uint64_t cycles;
	uint8_t comb[PLACE_MAX_COMBS][PLACE_MAX_REPLICAS]; /* members of each combination */
	uint32_t rank[PLACE_MAX_COMBS][PLACE_MAX_REPLICAS]; /* slot within the cycle */
};

/*
 * Lay out n members holding member_units unit slots each, r copies per
 * unit. -EINVAL unless 1 <= r <= n <= PLACE_MAX_MEMBERS and r <= PLACE_MAX_REPLICAS;
 * -ENOSPC if not even one cycle fits.
 */
int place_init(struct place *p, uint32_t n, uint32_t r, uint64_t member_units);
/* units in the address space */
uint64_t place_units(const struct place *p);
/* the r copies of unit u (u < place_units), in combination order */
void place_unit(const struct place *p, uint64_t u, struct place_copy *copies);
/* does unit u have a copy on member m? Its slot to *slot */
bool place_unit_on(const struct place *p, uint64_t u, uint32_t m, uint64_t *slot);

/*
 * Erasure-coded stripes (-o ec=K+M): a stripe is w = K + M fragments of one
 * unit each, on w distinct members; fragment i is data for i < K, parity
 * after. Stripes walk through all C(n, w) w-member combinations, each taken
 * w times in a row with its roles rotated one position each time (the
 * stripe's rotation), so that within a cycle every member holds as many
 * data fragments as every other, and as many parity fragments: no member is
 * a parity member that every small write visits. The combinations are
 * visited in a strided order rather than the lexicographic one, so that
 * consecutive stripes do not keep to the lowest members. A lost member's
 * fragments have their stripes' other fragments on every survivor alike.
 * A member holds C(n - 1, w - 1) * w fragments per cycle; the last cycle
 * may be partial (the stripes, in order, whose every fragment fits).
 */
#define PLACE_STRIPE_MAX_WIDTH 11U /* K + M: 8 + 3 */
/* C(12, 6): the most w-combinations of 12 members (50 KiB of tables: not on a thread stack) */
#define PLACE_STRIPE_MAX_COMBS 924U

struct place_stripes {
	uint32_t n, w;
	uint32_t ncomb; /* C(n, w) */
	uint32_t stride; /* the j-th combination visited is comb[j * stride % ncomb] */
	uint32_t per_cycle; /* fragment slots each member fills per cycle */
	uint64_t stripes; /* stripes in the address space */
	uint8_t comb[PLACE_STRIPE_MAX_COMBS][PLACE_STRIPE_MAX_WIDTH];
	/* the combination's place among those with that member, in visiting order */
	uint32_t rank[PLACE_STRIPE_MAX_COMBS][PLACE_STRIPE_MAX_WIDTH];
};

/*
 * Lay out n members holding member_units fragment slots each, stripes of w
 * fragments. -EINVAL unless 2 <= w <= n <= PLACE_MAX_MEMBERS and w <=
 * PLACE_STRIPE_MAX_WIDTH; -ENOSPC if not even one stripe fits.
 */
int place_stripes_init(struct place_stripes *p, uint32_t n, uint32_t w, uint64_t member_units);
/* the w fragments of stripe s (s < p->stripes): fragment i in frags[i] */
void place_stripe(const struct place_stripes *p, uint64_t s, struct place_copy *frags);
/*
 * The k fragments a rebuild of fragment f of stripe s reads, among those in
 * up (bit i: fragment i): the first k up in turn after f, starting one
 * further along with each stripe. As the stripes of a combination rotate
 * their roles, every survivor of a lost member reads an equal share (within
 * one fragment per combination visited). 0 if fewer than k are up.
 */
uint32_t place_stripe_sources(const struct place_stripes *p, uint64_t s, uint32_t f, uint32_t k,
			      uint32_t up);

#endif /* RMEM_PLACE_H */
