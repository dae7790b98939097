/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * units.c - byte sizes for humans (see units.h). Used by option parsing in the
 * memserver, the client and rmem-perf, and by every message that prints a size.
 * Units are binary: K = 1024, M = 1024^2, ... ("64K", "64KiB" and "64KB" all
 * mean 65536 bytes).
 */
#define G_LOG_DOMAIN "rmemfs-units"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include <glib.h>

#include "units.h"

static const char units_suffixes[] = "KMGTPE";

int units_parse_size(const char *s, uint64_t *out)
{
	uint64_t value = 0;
	unsigned int shift = 0;
	const char *p = s;
	const char *u;

	if (!s || !isdigit((unsigned char)*p))
		return -EINVAL;
	while (isdigit((unsigned char)*p)) {
		unsigned int digit = *p - '0';

		if (value > (UINT64_MAX - digit) / 10)
			return -ERANGE;
		value = value * 10 + digit;
		p++;
	}
	if (*p) {
		u = strchr(units_suffixes, toupper((unsigned char)*p));
		if (u) {
			shift = 10 * (unsigned int)(u - units_suffixes + 1);
			p++;
			if (strcasecmp(p, "iB") == 0)
				p += 2;
		}
		if (strcasecmp(p, "B") == 0)
			p++;
		if (*p)
			return -EINVAL;
	}
	if (shift && value > (UINT64_MAX >> shift))
		return -ERANGE;
	*out = value << shift;
	return 0;
}

void units_format_size(uint64_t bytes, char *buf, size_t cap)
{
	static const char *const names[] = { "KiB", "MiB", "GiB", "TiB", "PiB", "EiB" };
	unsigned int i = 0;
	double v;

	if (bytes < 1024) {
		snprintf(buf, cap, "%" PRIu64 " B", bytes);
		return;
	}
	v = (double)bytes / 1024.0;
	/* move up while the value would print as 1024.0 or more */
	while (v >= 1023.95 && i + 1 < G_N_ELEMENTS(names)) {
		v /= 1024.0;
		i++;
	}
	snprintf(buf, cap, "%.1f %s", v, names[i]);
}

int units_parse_uint(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
	char *end;
	uint64_t v;

	if (!s || !g_ascii_isdigit(s[0]))
		return -EINVAL;
	errno = 0;
	v = g_ascii_strtoull(s, &end, 10);
	if (*end)
		return -EINVAL;
	if (errno || v < min || v > max)
		return -ERANGE;
	*out = v;
	return 0;
}
