// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test_ec.c - the erasure codec (fuse-client/pool/ec_codec.c), for every k
 * and m: stripes of random data are encoded, and their fragments erased in
 * every pattern of up to m fragments (6174 patterns in all) and decoded
 * byte-exact, fragments not wanted left as they were. More than m erased is
 * -EIO with nothing written. ec_codec_update over whole fragments and over ranges
 * gives the parity of a fresh encode; a range decodes on its own, with
 * NULL for the buffers it has no need of; one codec serves several threads
 * at once; bad k and m are refused. Erased fragments hold the complement of
 * their true bytes, so a byte left unwritten never passes for a rebuilt one.
 * RMEMFS_EC_SEED replays a seed (printed).
 */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include <glib.h>

#include "ec_codec.h"

/* lengths across ISA-L's paths: its portable loop (< 16, 32 or 64 bytes), vectors, odd tails */
static const size_t lens[] = { 1, 31, 100, 4096, 4097, 65536 };
#define TOO_MANY_TRIES 24
#define UPDATE_ROUNDS 12
#define RANGE_ROUNDS 400
#define THREADS 4
#define THREAD_ROUNDS 300

static guint32 seed;

struct stripe {
	struct ec_codec *c;
	unsigned int k, m, n;
	size_t len;
	uint32_t all; /* every fragment's bit */
	uint8_t *frag[EC_MAX_FRAGS]; /* what the codec works on */
	uint8_t *ref[EC_MAX_FRAGS]; /* the truth: the data, and its parity as first encoded */
	uint8_t *fresh[EC_MAX_M]; /* the parity of a fresh encode, to compare against */
	uint8_t *scratch;
};

#define FAIL(s, fmt, ...)                                                                          \
	g_error("ec %u+%u, %zu bytes (seed %u): " fmt, (s)->k, (s)->m, (s)->len, seed,             \
		##__VA_ARGS__)

static void fill_random(GRand *rng, uint8_t *p, size_t len)
{
	guint32 v;
	size_t j;

	for (j = 0; j < len; j += sizeof(v)) {
		v = g_rand_int(rng);
		memcpy(p + j, &v, MIN(sizeof(v), len - j));
	}
}

static struct ec_codec *codec(unsigned int k, unsigned int m)
{
	struct ec_codec *c = NULL;

	g_assert_cmpint(ec_codec_new(k, m, &c), ==, 0);
	g_assert_cmpuint(ec_codec_k(c), ==, k);
	g_assert_cmpuint(ec_codec_m(c), ==, m);
	return c;
}

/* a stripe of random data, encoded; ref holds a copy of every fragment */
static struct stripe *stripe_new(struct ec_codec *c, size_t len, GRand *rng)
{
	struct stripe *s = g_new0(struct stripe, 1);
	unsigned int f;

	s->c = c;
	s->k = ec_codec_k(c);
	s->m = ec_codec_m(c);
	s->n = s->k + s->m;
	s->len = len;
	s->all = (1U << s->n) - 1;
	/* each buffer its own allocation of exactly len bytes, for ASan */
	for (f = 0; f < s->n; f++) {
		s->frag[f] = g_malloc(len);
		s->ref[f] = g_malloc(len);
	}
	for (f = 0; f < s->m; f++)
		s->fresh[f] = g_malloc(len);
	s->scratch = g_malloc(len);
	for (f = 0; f < s->k; f++) {
		fill_random(rng, s->frag[f], len);
		memcpy(s->ref[f], s->frag[f], len);
	}
	ec_codec_encode(c, len, s->frag, &s->frag[s->k]);
	for (f = 0; f < s->k; f++)
		if (memcmp(s->frag[f], s->ref[f], len))
			FAIL(s, "encode wrote data fragment %u", f);
	for (f = s->k; f < s->n; f++)
		memcpy(s->ref[f], s->frag[f], len);
	return s;
}

static void stripe_free(struct stripe *s)
{
	unsigned int f;

	for (f = 0; f < s->n; f++) {
		g_free(s->frag[f]);
		g_free(s->ref[f]);
	}
	for (f = 0; f < s->m; f++)
		g_free(s->fresh[f]);
	g_free(s->scratch);
	g_free(s);
}

/* the first byte in [from, to) where have differs from want (~want if flipped), or to */
static size_t first_diff(const uint8_t *have, const uint8_t *want, size_t from, size_t to,
			 bool flipped)
{
	uint8_t x = flipped ? 0xff : 0;
	size_t j;

	for (j = from; j < to; j++)
		if (have[j] != (uint8_t)(want[j] ^ x))
			break;
	return j;
}

/* fragment f holds its true bytes in [from, to) (or their complement, flipped) */
static void expect_frag(const struct stripe *s, unsigned int f, size_t from, size_t to,
			bool flipped, uint32_t lost, uint32_t want)
{
	size_t j;

	if (!flipped && !memcmp(s->frag[f] + from, s->ref[f] + from, to - from))
		return;
	j = first_diff(s->frag[f], s->ref[f], from, to, flipped);
	if (j < to)
		FAIL(s, "lost %#x, wanted %#x: fragment %u byte %zu is %#x, not %s%#x", lost, want,
		     f, j, s->frag[f][j], flipped ? "the untouched " : "",
		     (uint8_t)(flipped ? ~s->ref[f][j] : s->ref[f][j]));
}

/* the fragments in mask lose their bytes: each becomes its complement */
static void erase(struct stripe *s, uint32_t mask)
{
	unsigned int f;
	size_t j;

	for (f = 0; f < s->n; f++)
		if (mask & (1U << f))
			for (j = 0; j < s->len; j++)
				s->frag[f][j] = (uint8_t)~s->ref[f][j];
}

static void restore(struct stripe *s, uint32_t mask)
{
	unsigned int f;

	for (f = 0; f < s->n; f++)
		if (mask & (1U << f))
			memcpy(s->frag[f], s->ref[f], s->len);
}

/* what to ask a decode for when lost is lost: all of it, some, or with present bits mixed in */
static uint32_t pick_want(const struct stripe *s, uint32_t lost, GRand *rng)
{
	switch (g_rand_int_range(rng, 0, 4)) {
	case 0:
		return UINT32_MAX;
	case 1:
		return lost;
	case 2:
		return lost | (g_rand_int(rng) & s->all);
	default:
		return lost & g_rand_int(rng);
	}
}

/* erase lost, decode, check every fragment, restore */
static void decode_check(struct stripe *s, uint32_t lost, GRand *rng)
{
	uint32_t want = pick_want(s, lost, rng), present = s->all & ~lost;
	unsigned int f;
	int rc;

	if (g_rand_boolean(rng))
		present |= ~s->all; /* bits past the last fragment are ignored */
	erase(s, lost);
	rc = ec_codec_decode(s->c, s->len, s->frag, present, want);
	if (rc)
		FAIL(s, "lost %#x, wanted %#x: decode returned %d", lost, want, rc);
	for (f = 0; f < s->n; f++)
		expect_frag(s, f, 0, s->len, (lost & ~want) & (1U << f), lost, want);
	restore(s, lost);
}

/* fn on a fresh stripe of every k, every m and every length */
static void each_stripe(GRand *rng, void (*fn)(struct stripe *s, GRand *rng, void *arg), void *arg)
{
	unsigned int k, m, i;

	for (k = EC_MIN_K; k <= EC_MAX_K; k++) {
		for (m = EC_MIN_M; m <= EC_MAX_M; m++) {
			struct ec_codec *c = codec(k, m);

			for (i = 0; i < G_N_ELEMENTS(lens); i++) {
				struct stripe *s = stripe_new(c, lens[i], rng);

				fn(s, rng, arg);
				stripe_free(s);
			}
			ec_codec_free(c);
		}
	}
}

/* every pattern of up to m lost fragments: so every k of the k + m fragments as sources */
static void decode_all(struct stripe *s, GRand *rng, void *arg)
{
	unsigned int *patterns = arg;
	uint32_t lost;

	for (lost = 0; lost <= s->all; lost++) {
		if ((unsigned int)__builtin_popcount(lost) > s->m)
			continue;
		decode_check(s, lost, rng);
		(*patterns)++;
	}
}

static void test_decode(void)
{
	GRand *rng = g_rand_new_with_seed(seed);
	unsigned int patterns = 0;

	g_test_message("seed %u (RMEMFS_EC_SEED=%u replays it)", seed, seed);
	each_stripe(rng, decode_all, &patterns);
	g_test_message("%u patterns decoded", patterns);
	g_rand_free(rng);
}

/* more than m lost: -EIO, and not a byte written anywhere */
static void too_many(struct stripe *s, uint32_t lost)
{
	uint8_t *before[EC_MAX_FRAGS];
	unsigned int f;
	int rc;

	erase(s, lost);
	for (f = 0; f < s->n; f++)
		before[f] = g_memdup2(s->frag[f], s->len);
	/* bits past the last fragment count for nothing */
	rc = ec_codec_decode(s->c, s->len, s->frag, ~lost, UINT32_MAX);
	if (rc != -EIO)
		FAIL(s, "lost %#x: decode returned %d, not -EIO", lost, rc);
	for (f = 0; f < s->n; f++) {
		if (memcmp(before[f], s->frag[f], s->len))
			FAIL(s, "lost %#x: a failed decode wrote fragment %u", lost, f);
		g_free(before[f]);
	}
	restore(s, lost);
}

static void test_too_many(void)
{
	GRand *rng = g_rand_new_with_seed(seed);
	unsigned int k, m, i;

	g_test_message("seed %u (RMEMFS_EC_SEED=%u replays it)", seed, seed);
	for (k = EC_MIN_K; k <= EC_MAX_K; k++) {
		for (m = EC_MIN_M; m <= EC_MAX_M; m++) {
			struct ec_codec *c = codec(k, m);
			struct stripe *s = stripe_new(c, 4097, rng);

			too_many(s, s->all);
			too_many(s, (1U << (m + 1)) - 1); /* the first m + 1 */
			for (i = 0; i < TOO_MANY_TRIES; i++) {
				uint32_t lost = g_rand_int(rng) & s->all;

				if ((unsigned int)__builtin_popcount(lost) > m)
					too_many(s, lost);
			}
			stripe_free(s);
			ec_codec_free(c);
		}
	}
	g_rand_free(rng);
}

/* [off, off + len) of data fragment idx becomes new bytes through ec_update */
static void update_range(struct stripe *s, unsigned int idx, size_t off, size_t len, GRand *rng)
{
	uint8_t *parity[EC_MAX_M], *bytes = g_malloc(MAX(len, 1));
	unsigned int f;

	fill_random(rng, bytes, len);
	for (f = 0; f < s->m; f++)
		parity[f] = s->frag[s->k + f] + off;
	ec_codec_update(s->c, idx, len, s->frag[idx] + off, bytes, parity, s->scratch);
	memcpy(s->frag[idx] + off, bytes, len);
	memcpy(s->ref[idx] + off, bytes, len);
	g_free(bytes);
}

/* the parity as updated is the parity of a fresh encode; it becomes the truth */
static void expect_fresh_parity(struct stripe *s, const char *what, unsigned int round)
{
	unsigned int f;
	size_t j;

	ec_codec_encode(s->c, s->len, s->frag, s->fresh);
	for (f = 0; f < s->m; f++) {
		j = first_diff(s->frag[s->k + f], s->fresh[f], 0, s->len, false);
		if (j < s->len)
			FAIL(s, "%s update %u: parity %u byte %zu is %#x, a fresh encode %#x", what,
			     round, f, j, s->frag[s->k + f][j], s->fresh[f][j]);
		memcpy(s->ref[s->k + f], s->fresh[f], s->len);
	}
}

/* whole-fragment and range updates of random data fragments, then decodes */
static void update_rounds(struct stripe *s, GRand *rng, void *arg)
{
	unsigned int r, idx;
	size_t off, len;

	(void)arg;
	for (r = 0; r < UPDATE_ROUNDS; r++) {
		idx = (unsigned int)g_rand_int_range(rng, 0, (gint32)s->k);
		update_range(s, idx, 0, s->len, rng);
		expect_fresh_parity(s, "whole-fragment", r);
		/* a small write: a range, parity advanced alike */
		off = (size_t)g_rand_int_range(rng, 0, (gint32)s->len);
		len = (size_t)g_rand_int_range(rng, 0, (gint32)(s->len - off) + 1);
		update_range(s, idx, off, len, rng);
		expect_fresh_parity(s, "range", r);
	}
	/* the updated stripe still decodes */
	decode_check(s, s->all & ~((1U << s->k) - 1), rng);
	decode_check(s, (1U << s->m) - 1, rng);
}

static void test_update(void)
{
	GRand *rng = g_rand_new_with_seed(seed);

	g_test_message("seed %u (RMEMFS_EC_SEED=%u replays it)", seed, seed);
	each_stripe(rng, update_rounds, NULL);
	g_rand_free(rng);
}

/*
 * A range of lost fragments rebuilt on its own: nothing outside it is
 * written, and the buffers the decode has no need of are NULL
 */
static void test_range(void)
{
	GRand *rng = g_rand_new_with_seed(seed);
	uint8_t *frags[EC_MAX_FRAGS];
	unsigned int r, f, used;
	uint32_t lost, want;
	size_t off, len;
	int rc;

	g_test_message("seed %u (RMEMFS_EC_SEED=%u replays it)", seed, seed);
	for (r = 0; r < RANGE_ROUNDS; r++) {
		unsigned int k = (unsigned int)g_rand_int_range(rng, EC_MIN_K, EC_MAX_K + 1);
		unsigned int m = (unsigned int)g_rand_int_range(rng, EC_MIN_M, EC_MAX_M + 1);
		struct ec_codec *c = codec(k, m);
		struct stripe *s = stripe_new(c, 8192, rng);

		do
			lost = g_rand_int(rng) & s->all;
		while ((unsigned int)__builtin_popcount(lost) > m);
		want = pick_want(s, lost, rng);
		off = (size_t)g_rand_int_range(rng, 0, (gint32)s->len);
		len = (size_t)g_rand_int_range(rng, 0, (gint32)(s->len - off) + 1);
		erase(s, lost);
		/* the decode may touch only the first k present and the lost it rebuilds */
		for (f = 0, used = 0; f < s->n; f++) {
			frags[f] = NULL;
			if ((used < k && !(lost & (1U << f))) || (lost & want & (1U << f)))
				frags[f] = s->frag[f] + off;
			used += !(lost & (1U << f));
		}
		rc = ec_codec_decode(c, len, frags, s->all & ~lost, want);
		if (rc)
			FAIL(s, "range [%zu, +%zu) lost %#x: decode returned %d", off, len, lost,
			     rc);
		for (f = 0; f < s->n; f++) {
			bool rebuilt = (lost & want) & (1U << f), kept = !(lost & (1U << f));

			expect_frag(s, f, 0, off, !kept, lost, want);
			expect_frag(s, f, off, off + len, !kept && !rebuilt, lost, want);
			expect_frag(s, f, off + len, s->len, !kept, lost, want);
		}
		stripe_free(s);
		ec_codec_free(c);
	}
	g_rand_free(rng);
}

struct worker {
	struct ec_codec *c;
	guint32 seed;
};

static gpointer decode_worker(gpointer arg)
{
	struct worker *w = arg;
	GRand *rng = g_rand_new_with_seed(w->seed);
	struct stripe *s = stripe_new(w->c, 4096 + g_rand_int_range(rng, 0, 64), rng);
	unsigned int r;
	uint32_t lost;

	for (r = 0; r < THREAD_ROUNDS; r++) {
		do
			lost = g_rand_int(rng) & s->all;
		while ((unsigned int)__builtin_popcount(lost) > s->m);
		decode_check(s, lost, rng);
		if (r % 16 == 0) {
			update_range(s, (unsigned int)g_rand_int_range(rng, 0, (gint32)s->k), 0,
				     s->len, rng);
			expect_fresh_parity(s, "threaded", r);
		}
	}
	stripe_free(s);
	g_rand_free(rng);
	return NULL;
}

/* one codec, several threads coding with it at once */
static void test_threads(void)
{
	struct ec_codec *c = codec(6, 3);
	struct worker w[THREADS];
	GThread *t[THREADS];
	unsigned int i;

	g_test_message("seed %u (RMEMFS_EC_SEED=%u replays it)", seed, seed);
	for (i = 0; i < THREADS; i++) {
		w[i].c = c;
		w[i].seed = seed + i;
		t[i] = g_thread_new("ec", decode_worker, &w[i]);
	}
	for (i = 0; i < THREADS; i++)
		g_thread_join(t[i]);
	ec_codec_free(c);
}

static void test_limits(void)
{
	uint8_t *none[EC_MAX_FRAGS] = { NULL };
	struct ec_codec *c;
	unsigned int k, m;
	int rc;

	for (k = 0; k <= EC_MAX_K + 3; k++) {
		for (m = 0; m <= EC_MAX_M + 3; m++) {
			bool ok = k >= EC_MIN_K && k <= EC_MAX_K && m >= EC_MIN_M && m <= EC_MAX_M;

			c = (struct ec_codec *)&rc; /* left alone on failure */
			rc = ec_codec_new(k, m, &c);
			if (!ok) {
				g_assert_cmpint(rc, ==, -EINVAL);
				g_assert_true(c == (struct ec_codec *)&rc);
				continue;
			}
			g_assert_cmpint(rc, ==, 0);
			/* no bytes: no buffer touched, but the count of present ones still holds */
			ec_codec_encode(c, 0, none, none);
			g_assert_cmpint(ec_codec_decode(c, 0, none, (1U << k) - 1, UINT32_MAX), ==, 0);
			g_assert_cmpint(ec_codec_decode(c, 0, none, (1U << (k - 1)) - 1, UINT32_MAX), ==,
					-EIO);
			ec_codec_free(c);
		}
	}
	ec_codec_free(NULL);
}

int main(int argc, char **argv)
{
	const char *env;

	g_test_init(&argc, &argv, NULL);
	env = g_getenv("RMEMFS_EC_SEED");
	seed = env && *env ? (guint32)g_ascii_strtoull(env, NULL, 0) : g_test_rand_int();
	g_test_add_func("/ec/limits", test_limits);
	g_test_add_func("/ec/decode", test_decode);
	g_test_add_func("/ec/too-many", test_too_many);
	g_test_add_func("/ec/update", test_update);
	g_test_add_func("/ec/range", test_range);
	g_test_add_func("/ec/threads", test_threads);
	return g_test_run();
}
