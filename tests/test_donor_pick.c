// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test_donor_pick.c - choosing donors by power of two choices (donor_pick.h),
 * with a seeded random source (the seed is printed; RMEM_TEST_SEED=N replays
 * one): emptier candidates are chosen more often, a candidate without room
 * never, no candidate twice, and fewer candidates with room than wanted is
 * -ENOSPC with nothing chosen.
 */
#include <errno.h>
#include <stdlib.h>

#include <glib.h>

#include "donor_pick.h"

#define GIB (1ULL << 30)
#define DRAWS 20000U

static guint32 test_seed;

static uint32_t rand_below(void *ctx, uint32_t bound)
{
	return (uint32_t)g_rand_int_range(ctx, 0, (gint32)bound);
}

static GRand *seeded(void)
{
	return g_rand_new_with_seed(test_seed);
}

/* one member out of five: chosen about as often as two draws make it the emptier */
static void test_prefers_empty(void)
{
	const uint64_t free_bytes[] = { 3 * GIB, 1 * GIB, 5 * GIB, 2 * GIB, 4 * GIB };
	unsigned int count[5] = { 0 }, i, out;
	GRand *r = seeded();

	for (i = 0; i < DRAWS; i++) {
		g_assert_cmpint(donor_pick(free_bytes, 5, GIB, 1, rand_below, r, &out), ==, 0);
		g_assert_cmpuint(out, <, 5);
		count[out]++;
	}
	/* rank k of 5 (0: fullest) wins a random pair with probability k / 10 */
	g_assert_cmpuint(count[1], ==, 0); /* the fullest always meets an emptier one */
	g_assert_cmpuint(count[3], <, count[0]);
	g_assert_cmpuint(count[0], <, count[4]);
	g_assert_cmpuint(count[4], <, count[2]);
	for (i = 0; i < 5; i++) {
		static const unsigned int rank[5] = { 2, 0, 4, 1, 3 };
		double want = DRAWS * rank[i] / 10.0;

		g_assert_cmpfloat(count[i], >=, want * 0.9);
		g_assert_cmpfloat(count[i], <=, want * 1.1 + 1);
	}
	g_rand_free(r);
}

/* several members: distinct, all with room, and every one with room sometimes */
static void test_distinct_with_room(void)
{
	const uint64_t free_bytes[] = { 8 * GIB, GIB / 2, 6 * GIB, 0, 7 * GIB, 4 * GIB - 1,
					4 * GIB, 9 * GIB };
	const unsigned int n = G_N_ELEMENTS(free_bytes);
	unsigned int seen[G_N_ELEMENTS(free_bytes)] = { 0 }, out[5], i, k, j;
	GRand *r = seeded();

	for (i = 0; i < DRAWS / 10; i++) {
		unsigned int want = 1 + i % 5;

		g_assert_cmpint(donor_pick(free_bytes, n, 4 * GIB, want, rand_below, r, out), ==, 0);
		for (k = 0; k < want; k++) {
			g_assert_cmpuint(free_bytes[out[k]], >=, 4 * GIB);
			for (j = 0; j < k; j++)
				g_assert_cmpuint(out[j], !=, out[k]);
			seen[out[k]]++;
		}
	}
	for (i = 0; i < n; i++) {
		if (free_bytes[i] >= 4 * GIB)
			g_assert_cmpuint(seen[i], >, 0);
		else
			g_assert_cmpuint(seen[i], ==, 0);
	}
	g_rand_free(r);
}

/* as many wanted as have room: all of them; one more: -ENOSPC, nothing written */
static void test_too_few(void)
{
	const uint64_t free_bytes[] = { 2 * GIB, GIB, 3 * GIB, 0 };
	unsigned int out[4] = { 77, 77, 77, 77 }, k, mask = 0;
	GRand *r = seeded();

	g_assert_cmpint(donor_pick(free_bytes, 4, 2 * GIB, 3, rand_below, r, out), ==, -ENOSPC);
	for (k = 0; k < 4; k++)
		g_assert_cmpuint(out[k], ==, 77);
	g_assert_cmpint(donor_pick(free_bytes, 4, 2 * GIB, 2, rand_below, r, out), ==, 0);
	for (k = 0; k < 2; k++)
		mask |= 1U << out[k];
	g_assert_cmpuint(mask, ==, (1U << 0) | (1U << 2));
	/* no candidate, or none wanted */
	g_assert_cmpint(donor_pick(free_bytes, 0, 1, 1, rand_below, r, out), ==, -ENOSPC);
	g_assert_cmpint(donor_pick(free_bytes, 4, 1, 0, rand_below, r, out), ==, -EINVAL);
	g_rand_free(r);
}

int main(int argc, char **argv)
{
	const char *env = getenv("RMEM_TEST_SEED");

	g_test_init(&argc, &argv, NULL);
	test_seed = env ? (guint32)strtoul(env, NULL, 0) : g_random_int();
	g_test_message("seed %u (RMEM_TEST_SEED=%u replays it)", test_seed, test_seed);
	g_test_add_func("/donor-pick/prefers-empty", test_prefers_empty);
	g_test_add_func("/donor-pick/distinct-with-room", test_distinct_with_room);
	g_test_add_func("/donor-pick/too-few", test_too_few);
	return g_test_run();
}
