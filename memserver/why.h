/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * why.h - the one-line explanation for humans that memserver's setup
 * functions (pool.c, registry.c, tenant.c) leave in a caller's buffer.
 */
#ifndef RMEM_MEMSERVER_WHY_H
#define RMEM_MEMSERVER_WHY_H

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

#include <glib.h>

/* printf into why[why_len]; nothing when why is NULL or why_len 0 */
static inline void why_set(char *why, size_t why_len, const char *fmt, ...) G_GNUC_PRINTF(3, 4);

static inline void why_set(char *why, size_t why_len, const char *fmt, ...)
{
	va_list ap;

	if (!why || !why_len)
		return;
	va_start(ap, fmt);
	vsnprintf(why, why_len, fmt, ap);
	va_end(ap);
}

#endif /* RMEM_MEMSERVER_WHY_H */
