/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * ec_codec.h - the erasure code of erasure-coded member sets (-o ec=K+M):
 * systematic Reed-Solomon over GF(2^8), all of its arithmetic from ISA-L.
 *
 * A stripe is k data fragments and m parity fragments of one length, each on
 * its own member. Fragments are numbered data 0..k-1, then parity k..k+m-1,
 * and a fragment set is a bitmask with bit i for fragment i. The data
 * fragments hold the data itself, so a healthy read decodes nothing; any k
 * of the k + m fragments rebuild the others, because the parity rows of the
 * generator form a Cauchy matrix, every square submatrix of which is
 * invertible (ISA-L's Vandermonde-style gf_gen_rs_matrix does not promise
 * that).
 *
 * Bytes are coded column by column: byte j of a parity fragment depends on
 * byte j of each data fragment alone. So any range [off, off + len) of a
 * stripe is coded on its own - pass every fragment's pointer advanced by
 * off - and a small write or a degraded read touches only its range.
 * Lengths may be any size (0 does nothing) and buffers need no alignment:
 * ISA-L loads unaligned and codes short tails with its portable loop.
 * 64-byte aligned multiples of 64 bytes are merely the fastest.
 *
 * A codec is immutable once made: share it between threads freely. The
 * coding calls keep their state on the stack and never allocate or fail
 * except as stated.
 */
#ifndef RMEM_EC_CODEC_H
#define RMEM_EC_CODEC_H

#include <stddef.h>
#include <stdint.h>

#define EC_MIN_K 2U
#define EC_MAX_K 8U
#define EC_MIN_M 1U
#define EC_MAX_M 3U
#define EC_MAX_FRAGS (EC_MAX_K + EC_MAX_M) /* 11 members at most */

struct ec_codec;

/*
 * A codec for k data and m parity fragments: -EINVAL unless k and m are
 * within the limits above (-EIO if ISA-L found its generator singular, which
 * a Cauchy matrix never is). It inverts every set of k fragments up front:
 * make one per set and keep it (13 KiB; 0.7 ms for 8+3).
 */
int ec_codec_new(unsigned int k, unsigned int m, struct ec_codec **out);
void ec_codec_free(struct ec_codec *c); /* NULL-tolerant */
unsigned int ec_codec_k(const struct ec_codec *c);
unsigned int ec_codec_m(const struct ec_codec *c);

/* parity[0..m) from data[0..k), every buffer len bytes; the data is only read */
void ec_codec_encode(const struct ec_codec *c, size_t len, uint8_t *const data[],
		     uint8_t *const parity[]);

/*
 * Data fragment idx (< k) changes from old_data to new_data: parity[0..m) is
 * brought up to date in place from the change alone, without reading the
 * other data fragments. scratch holds len bytes (it receives old ^ new).
 * The caller writes new_data into the fragment itself.
 */
void ec_codec_update(const struct ec_codec *c, unsigned int idx, size_t len,
		     const uint8_t *old_data, const uint8_t *new_data, uint8_t *const parity[],
		     uint8_t *scratch);

/*
 * Rebuild fragments from the others: frags[0..k+m) point at every
 * fragment's buffer (len bytes each), present says which hold valid data,
 * and each fragment in want but not in present is rebuilt into its buffer
 * from the first k present ones (the data fragments where they are). No
 * other buffer is read or written, so a fragment neither among those nor
 * wanted needs no real buffer (NULL is fine): with k + 1 reads in flight,
 * the first k to answer are enough. Bits past k + m in present and want are
 * ignored: want = UINT32_MAX rebuilds all that is missing. Returns 0, or
 * -EIO (nothing written) when fewer than k fragments are present.
 */
int ec_codec_decode(const struct ec_codec *c, size_t len, uint8_t *const frags[], uint32_t present,
		    uint32_t want);

#endif /* RMEM_EC_CODEC_H */
