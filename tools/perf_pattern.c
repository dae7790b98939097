// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * perf_pattern.c - rmem-perf's verify pattern (see perf_pattern.h). Whole
 * words are generated and compared at once; bytes only at a ragged end or
 * where a word differs, to find which byte.
 */
#define G_LOG_DOMAIN "rmemfs-perf"

#include <string.h>

#include <glib.h>

#include "perf_pattern.h"

static inline uint64_t perf_pattern_word(uint64_t seed, uint64_t iter, uint64_t word)
{
	uint64_t z = seed ^ (iter * 0x9e3779b97f4a7c15ULL) ^ (word * 0xd1b54a32d192ed03ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

uint8_t perf_pattern_byte(uint64_t seed, uint64_t iter, uint64_t off)
{
	return (uint8_t)(perf_pattern_word(seed, iter, off / 8) >> (8 * (off % 8)));
}

void perf_pattern_fill(uint8_t *buf, uint64_t off, uint32_t len, uint64_t iter, uint64_t seed)
{
	uint32_t i;

	for (i = 0; i + 8 <= len; i += 8) {
		uint64_t v = GUINT64_TO_LE(perf_pattern_word(seed, iter, (off + i) / 8));

		memcpy(buf + i, &v, 8);
	}
	for (; i < len; i++)
		buf[i] = perf_pattern_byte(seed, iter, off + i);
}

uint32_t perf_pattern_check(const uint8_t *buf, uint64_t off, uint32_t len, uint64_t iter,
			    uint64_t seed, uint32_t *first)
{
	uint32_t i, bad = 0;

	for (i = 0; i + 8 <= len; i += 8) {
		uint64_t v = GUINT64_TO_LE(perf_pattern_word(seed, iter, (off + i) / 8));
		unsigned int b;

		if (!memcmp(buf + i, &v, 8))
			continue;
		for (b = 0; b < 8; b++) {
			if (buf[i + b] != perf_pattern_byte(seed, iter, off + i + b)) {
				if (!bad)
					*first = i + b;
				bad++;
			}
		}
	}
	for (; i < len; i++) {
		if (buf[i] != perf_pattern_byte(seed, iter, off + i)) {
			if (!bad)
				*first = i;
			bad++;
		}
	}
	return bad;
}
