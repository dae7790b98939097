// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * ec_codec.c - systematic Reed-Solomon over ISA-L (ec_codec.h).
 *
 * The generator is ISA-L's (k + m) x k Cauchy matrix: the identity on top
 * (the data fragments are the data), and parity row i, column j holding
 * 1 / (i ^ j) for i in [k, k + m), j in [0, k). Those two index sets are
 * disjoint, so the parity rows form a true Cauchy matrix, all of whose
 * square submatrices are invertible; hence any k rows of the generator are
 * too, and every pattern of up to m lost fragments decodes (the field has
 * room for 256 such indices, far beyond EC_MAX_FRAGS; tests/test_ec.c
 * decodes every pattern of every k and m).
 *
 * Decoding takes the first k present fragments as its sources and the
 * inverse of their k rows of the generator (which maps the sources back to
 * the data), and derives one row per fragment to rebuild: a data fragment's
 * row of the inverse as it is, a parity fragment's generator row times the
 * inverse. The inverses are all made up front, one per set of k sources
 * (at most C(11, 3) = 165 of 64 bytes; 0.7 ms for 8+3), because
 * gf_invert_matrix is slow next to a small decode: about 4 us for 8 x 8,
 * where rebuilding one 4 KiB fragment from 8 others takes about 1 us. The
 * rest is cheap enough to do per call (under 1 us for 8+3 with three
 * fragments lost), so a decode keeps its state on the stack, and the codec,
 * read-only after ec_codec_new, needs no lock and no cache.
 *
 * ISA-L's prototypes lack const, but it only reads its tables and sources:
 * the casts below drop a const that ISA-L honours.
 */
#include "ec_codec.h"

#include <errno.h>
#include <string.h>

#include <glib.h>
#include <isa-l/erasure_code.h>

/* ISA-L expands each coefficient to 32 bytes of lookup tables */
#define EC_TBL_BYTES 32U
/* ISA-L counts bytes in an int: longer calls go in pieces (columns are independent) */
#define EC_PIECE ((size_t)1 << 30)
/* C(11, 3): the most sets of k sources among k + m fragments the limits allow */
#define EC_MAX_SOURCE_SETS 165U
/* (inv_slot holds an index into inv in a byte) */
G_STATIC_ASSERT(EC_MAX_SOURCE_SETS <= 256);

struct ec_codec {
	unsigned int k, m;
	/* (k + m) x k, row-major: the identity, then the Cauchy parity rows */
	uint8_t gen[EC_MAX_FRAGS * EC_MAX_K];
	/* the parity rows expanded by ec_init_tables, for encode and update */
	uint8_t enc_tbls[EC_TBL_BYTES * EC_MAX_K * EC_MAX_M];
	/* a set of k sources (a fragment bitmask) -> its inverse in inv */
	uint8_t inv_slot[1U << EC_MAX_FRAGS];
	/* the inverse of a source set's k rows of gen, k x k: the sources -> the data */
	uint8_t inv[EC_MAX_SOURCE_SETS][EC_MAX_K * EC_MAX_K];
};

/* the inverse for every set of k sources, so that no decode inverts */
static int invert_all(struct ec_codec *c)
{
	uint8_t sub[EC_MAX_K * EC_MAX_K];
	unsigned int k = c->k, f, i, n = 0;
	uint32_t set;

	for (set = 0; set < 1U << (k + c->m); set++) {
		if ((unsigned int)__builtin_popcount(set) != k)
			continue;
		for (f = 0, i = 0; i < k; f++)
			if (set & (1U << f))
				memcpy(&sub[i++ * k], &c->gen[f * k], k);
		/* cannot fail for a Cauchy generator (the head of this file) */
		g_assert(n < EC_MAX_SOURCE_SETS);
		if (gf_invert_matrix(sub, c->inv[n], (int)k))
			return -EIO;
		c->inv_slot[set] = (uint8_t)n++;
	}
	return 0;
}

int ec_codec_new(unsigned int k, unsigned int m, struct ec_codec **out)
{
	struct ec_codec *c;
	int rc;

	if (k < EC_MIN_K || k > EC_MAX_K || m < EC_MIN_M || m > EC_MAX_M)
		return -EINVAL;
	c = g_new0(struct ec_codec, 1);
	c->k = k;
	c->m = m;
	gf_gen_cauchy1_matrix(c->gen, (int)(k + m), (int)k);
	ec_init_tables((int)k, (int)m, &c->gen[k * k], c->enc_tbls);
	rc = invert_all(c);
	if (rc < 0)
		goto free_codec;
	*out = c;
	return 0;

free_codec:
	g_free(c);
	return rc;
}

void ec_codec_free(struct ec_codec *c)
{
	g_free(c);
}

unsigned int ec_codec_k(const struct ec_codec *c)
{
	return c->k;
}

unsigned int ec_codec_m(const struct ec_codec *c)
{
	return c->m;
}

/* dst[0..rows) = the rows expanded in tbls applied to src[0..k), len bytes each */
static void code(size_t len, unsigned int k, unsigned int rows, const uint8_t *tbls,
		 uint8_t *const src[], uint8_t *const dst[])
{
	uint8_t *s[EC_MAX_K], *d[EC_MAX_M];
	size_t off, n;
	unsigned int i;

	for (off = 0; off < len; off += n) {
		n = MIN(len - off, EC_PIECE);
		for (i = 0; i < k; i++)
			s[i] = src[i] + off;
		for (i = 0; i < rows; i++)
			d[i] = dst[i] + off;
		ec_encode_data((int)n, (int)k, (int)rows, (uint8_t *)tbls, s, d);
	}
}

void ec_codec_encode(const struct ec_codec *c, size_t len, uint8_t *const data[],
		     uint8_t *const parity[])
{
	code(len, c->k, c->m, c->enc_tbls, data, parity);
}

/* dst = a ^ b, eight bytes a step (GCC does not vectorize the plain loop at -O2) */
static void xor_bytes(uint8_t *dst, const uint8_t *a, const uint8_t *b, size_t len)
{
	uint64_t x, y;
	size_t j;

	for (j = 0; j + sizeof(x) <= len; j += sizeof(x)) {
		memcpy(&x, a + j, sizeof(x));
		memcpy(&y, b + j, sizeof(y));
		x ^= y;
		memcpy(dst + j, &x, sizeof(x));
	}
	for (; j < len; j++)
		dst[j] = a[j] ^ b[j];
}

/*
 * Parity is linear in the data and addition is XOR: parity row i gains
 * gen[i][idx] * (old ^ new) when fragment idx goes from old to new, which is
 * what ec_encode_data_update adds in.
 */
void ec_codec_update(const struct ec_codec *c, unsigned int idx, size_t len,
		     const uint8_t *old_data, const uint8_t *new_data, uint8_t *const parity[],
		     uint8_t *scratch)
{
	uint8_t *p[EC_MAX_M];
	size_t off, n;
	unsigned int i;

	g_assert(idx < c->k);
	xor_bytes(scratch, old_data, new_data, len);
	for (off = 0; off < len; off += n) {
		n = MIN(len - off, EC_PIECE);
		for (i = 0; i < c->m; i++)
			p[i] = parity[i] + off;
		ec_encode_data_update((int)n, (int)c->k, (int)c->m, (int)idx,
				      (uint8_t *)c->enc_tbls, scratch + off, p);
	}
}

/*
 * One row of k coefficients per fragment in want (ascending), each giving
 * that fragment from the sources whose inverse is inv. Returns the number
 * of rows.
 */
static unsigned int decode_rows(const struct ec_codec *c, const uint8_t *inv, uint32_t want,
				uint8_t *rows)
{
	unsigned int k = c->k, f, i, j, n = 0;
	uint8_t *row;

	for (f = 0; f < k + c->m; f++) {
		if (!(want & (1U << f)))
			continue;
		row = &rows[n++ * k];
		if (f < k) {
			memcpy(row, &inv[f * k], k);
			continue;
		}
		for (j = 0; j < k; j++) {
			row[j] = 0;
			for (i = 0; i < k; i++)
				row[j] ^= gf_mul(c->gen[f * k + i], inv[i * k + j]);
		}
	}
	return n;
}

int ec_codec_decode(const struct ec_codec *c, size_t len, uint8_t *const frags[], uint32_t present,
		    uint32_t want)
{
	uint8_t rows[EC_MAX_M * EC_MAX_K], tbls[EC_TBL_BYTES * EC_MAX_K * EC_MAX_M];
	uint32_t all = (1U << (c->k + c->m)) - 1, sources = 0;
	uint8_t *src[EC_MAX_K], *dst[EC_MAX_M];
	unsigned int f, n = 0, nrows;

	present &= all;
	want &= all & ~present; /* at most m fragments, as at least k are present */
	if ((unsigned int)__builtin_popcount(present) < c->k)
		return -EIO;
	if (!want)
		return 0;
	/* the first k present: the data fragments themselves where they are */
	for (f = 0; n < c->k; f++) {
		if (!(present & (1U << f)))
			continue;
		sources |= 1U << f;
		src[n++] = frags[f];
	}
	nrows = decode_rows(c, c->inv[c->inv_slot[sources]], want, rows);
	for (f = 0, n = 0; f < c->k + c->m; f++)
		if (want & (1U << f))
			dst[n++] = frags[f];
	ec_init_tables((int)c->k, (int)nrows, rows, tbls);
	code(len, c->k, nrows, tbls, src, dst);
	return 0;
}
