/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * tenant.c - the memserver's tenants and their tokens (tenant.h): loading
 * --token-dir, telling a token's owner, and the rule of who reaches what.
 */
#define G_LOG_DOMAIN "rmemfs-memserver"

#include "tenant.h"

#include <dirent.h>
#include <errno.h>
#include <glib.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "why.h"

/* the holder of a token equal to @hash among the admin and tenants[0, n), or NULL */
static const char *tenant_dup(const struct tenant_set *ts, unsigned int n,
			      const uint8_t hash[PROTO_TOKEN_HASH_LEN])
{
	unsigned int i;

	if (ts->have_admin && proto_token_equal(ts->admin_hash, hash))
		return "the admin (--token-file)";
	for (i = 0; i < n; i++) {
		if (proto_token_equal(ts->tenants[i].token_hash, hash))
			return ts->tenants[i].name;
	}
	return NULL;
}

static int tenant_add(struct tenant_set *ts, const char *dir, const char *name, char *why,
		      size_t why_len)
{
	struct tenant *t, *grown;
	char *path;
	const char *dup;
	int rc;

	if (!proto_pool_name_valid(name)) {
		why_set(why, why_len,
			   "--token-dir %s: '%s' is not a tenant name (1-31 of A-Z a-z 0-9 _ . -, "
			   "starting with a letter, digit or _)", dir, name);
		return -EINVAL;
	}
	grown = realloc(ts->tenants, (ts->ntenants + 1) * sizeof(*ts->tenants));
	if (!grown) {
		why_set(why, why_len, "out of memory");
		return -ENOMEM;
	}
	ts->tenants = grown;
	t = &ts->tenants[ts->ntenants];
	memset(t, 0, sizeof(*t));
	g_strlcpy(t->name, name, sizeof(t->name));
	path = g_build_filename(dir, name, NULL);
	rc = proto_token_load(path, t->token_hash);
	if (rc == -EINVAL)
		why_set(why, why_len, "--token-dir: %s holds no token (it is empty)", path);
	else if (rc == -EFBIG)
		why_set(why, why_len, "--token-dir: %s is larger than 4 KiB; a token is a "
			   "short secret", path);
	else if (rc)
		why_set(why, why_len, "--token-dir: cannot read %s: %s", path, g_strerror(-rc));
	g_free(path);
	if (rc)
		return rc;
	dup = tenant_dup(ts, ts->ntenants, t->token_hash);
	if (dup) {
		why_set(why, why_len,
			   "--token-dir %s: tenant %s has the same token as %s; every tenant needs "
			   "its own", dir, name, dup);
		return -EINVAL;
	}
	ts->ntenants++;
	return 0;
}

static int tenant_cmp(const void *a, const void *b)
{
	return strcmp(((const struct tenant *)a)->name, ((const struct tenant *)b)->name);
}

int tenant_load_dir(struct tenant_set *ts, const char *dir, char *why, size_t why_len)
{
	struct dirent *e;
	DIR *d;
	int rc = 0;

	d = opendir(dir);
	if (!d) {
		rc = -errno;
		why_set(why, why_len, "cannot read --token-dir %s: %s", dir, g_strerror(-rc));
		return rc;
	}
	errno = 0;
	while (!rc && (e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		rc = tenant_add(ts, dir, e->d_name, why, why_len);
		errno = 0;
	}
	if (!rc && errno) {
		rc = -errno;
		why_set(why, why_len, "cannot read --token-dir %s: %s", dir, g_strerror(-rc));
	}
	closedir(d);
	if (!rc && ts->ntenants)
		qsort(ts->tenants, ts->ntenants, sizeof(*ts->tenants), tenant_cmp);
	return rc;
}

bool tenant_open_to_all(const struct tenant_set *ts)
{
	return !ts->have_admin && !ts->ntenants;
}

int tenant_identify(const struct tenant_set *ts, const uint8_t hash[PROTO_TOKEN_HASH_LEN],
		    struct tenant_who *who)
{
	unsigned int i;

	memset(who, 0, sizeof(*who));
	if (tenant_open_to_all(ts) ||
	    (ts->have_admin && proto_token_equal(ts->admin_hash, hash))) {
		who->admin = true;
		return 0;
	}
	for (i = 0; i < ts->ntenants; i++) {
		if (proto_token_equal(ts->tenants[i].token_hash, hash)) {
			g_strlcpy(who->name, ts->tenants[i].name, sizeof(who->name));
			return 0;
		}
	}
	return -EPERM;
}

bool tenant_may_reach(const struct tenant_who *who, const char *owner)
{
	return who->admin || (who->name[0] && !strcmp(who->name, owner));
}

bool tenant_known(const struct tenant_set *ts, const char *name)
{
	unsigned int i;

	for (i = 0; i < ts->ntenants; i++) {
		if (!strcmp(ts->tenants[i].name, name))
			return true;
	}
	return false;
}

void tenant_set_clear(struct tenant_set *ts)
{
	if (!ts)
		return;
	free(ts->tenants);
	ts->tenants = NULL;
	ts->ntenants = 0;
}
