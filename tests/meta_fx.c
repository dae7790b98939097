// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * meta_fx.c - helpers for the metadata tests (see meta_fx.h).
 */
#include "meta_fx.h"

#include <sys/stat.h>

#include <glib.h>

#include "meta.h"

static const struct meta_cred root_cred = { .uid = 0, .gid = 0 };

uint64_t tfx_mk(struct meta *m, uint64_t parent, const char *name, uint32_t mode)
{
	struct meta_attr a;
	int rc;

	if (S_ISDIR(mode))
		rc = meta_mkdir(m, parent, name, mode & 07777, &root_cred, &a);
	else
		rc = meta_mknod(m, parent, name, mode, 0, &root_cred, &a);
	g_assert_cmpint(rc, ==, 0);
	meta_forget(m, a.ino, 1);
	return a.ino;
}

uint64_t tfx_lookup(struct meta *m, uint64_t parent, const char *name)
{
	struct meta_attr a;

	if (meta_lookup(m, parent, name, &a) < 0)
		return 0;
	meta_forget(m, a.ino, 1);
	return a.ino;
}
