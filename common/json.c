// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * json.c - JSON string literals (see json.h), for rmem-perf's and
 * rmemfs-swap's --json output. Paths and names may hold anything but NUL, so
 * quotes, backslashes and control characters are escaped; other bytes pass
 * through (UTF-8 stays UTF-8).
 */
#include "json.h"

void json_write_string(FILE *f, const char *s)
{
	fputc('"', f);
	for (; s && *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c < 0x20)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}
