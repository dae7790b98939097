/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * units.h - byte sizes for humans: parse "64K"/"1G" options, print "1.5 GiB".
 */
#ifndef RMEM_UNITS_H
#define RMEM_UNITS_H

#include <stddef.h>
#include <stdint.h>

/* parse "512", "64K", "1M", "1G", "1T" (binary units, optional trailing "iB"/"B"); -EINVAL / -ERANGE */
int units_parse_size(const char *s, uint64_t *out);
/* "1.0 GiB", "512 B", "64.0 KiB" into buf */
void units_format_size(uint64_t bytes, char *buf, size_t cap);
/*
 * A decimal whole number in [min, max]: digits only (no sign, no suffix).
 * 0, -EINVAL (not such a number) or -ERANGE (outside [min, max]).
 */
int units_parse_uint(const char *s, uint64_t min, uint64_t max, uint64_t *out);

#endif /* RMEM_UNITS_H */
