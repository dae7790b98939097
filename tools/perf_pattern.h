/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * perf_pattern.h - the data pattern rmem-perf writes and checks in --verify.
 *
 * Byte p of the pool, written in pass i of a row with seed s, holds byte
 * (p mod 8) of the little-endian word mix(s, i, floor(p / 8)), a
 * splitmix64-style hash: every position, pass and row gets different bytes, so
 * a stale, misplaced, torn or foreign transfer shows. Offsets given to fill and
 * check are pool offsets (8-byte aligned: partitions and strides are).
 */
#ifndef RMEM_PERF_PATTERN_H
#define RMEM_PERF_PATTERN_H

#include <stdint.h>

/* the pattern byte at pool offset off */
uint8_t perf_pattern_byte(uint64_t seed, uint64_t iter, uint64_t off);
/* write the pattern of [off, off+len) into buf */
void perf_pattern_fill(uint8_t *buf, uint64_t off, uint32_t len, uint64_t iter, uint64_t seed);
/* the number of bytes of buf that differ from the pattern; *first: index of the first one */
uint32_t perf_pattern_check(const uint8_t *buf, uint64_t off, uint32_t len, uint64_t iter,
			    uint64_t seed, uint32_t *first);

#endif /* RMEM_PERF_PATTERN_H */
