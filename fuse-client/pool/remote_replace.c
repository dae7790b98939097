// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * remote_replace.c - rmemfs-ctl's replace (remote.h): a blank memserver in
 * a lost member's place, rebuilt in the background (rebuild.c).
 */
#define G_LOG_DOMAIN "rmemfs-remote"

#include "remote_int.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include <glib.h>

#include "net.h"
#include "refusal.h"

/* which member OLD names: its index, "memberN", its address or its pool id */
static int find_member(struct remote *r, const char *old)
{
	unsigned int i;
	char id[20];

	for (i = 0; i < r->n; i++) {
		g_snprintf(id, sizeof(id), "%016" G_GINT64_MODIFIER "x",
			   (guint64)r->info.m[i].pool_id);
		if (!strcmp(old, r->mem[i].name) || !strcmp(old, id))
			return (int)i;
		if (g_str_has_prefix(old, "member") && g_ascii_isdigit(old[6])) {
			char *end;

			if (strtoul(old + 6, &end, 10) == i && !*end)
				return (int)i;
		}
	}
	return -1;
}

/*
 * Connect to the replacement and check that it is blank and big enough. A
 * named pool that does not exist yet is created the size of the member it
 * replaces (create_size).
 */
static int open_blank(struct remote *r, const char *addr, uint64_t create_size,
		      struct member **out, char **err_msg)
{
	struct remote_server srv = { 0 };
	struct xport_params p;
	struct remote_found f;
	unsigned int n;
	char *why;
	int rc;

	*out = NULL;
	if (remote_parse_servers(addr, &srv, 1, &n, &why) < 0) {
		remote_set_msg(err_msg, "%s", why ? why : "not one HOST[:PORT][/NAME]");
		g_free(why);
		return -EINVAL;
	}
	if (net_format_server_pool(NULL, 0, srv.host, srv.port, srv.pool) >= LAYOUT_SET_ADDR_LEN) {
		remote_set_msg(err_msg, "'%s': a member's address must fit %d characters (the member "
			       "record keeps it)", addr, LAYOUT_SET_ADDR_LEN - 1);
		remote_servers_free(&srv, 1);
		return -ENAMETOOLONG;
	}
	p = r->mcfg.params;
	r->mcfg.params.host = srv.host;
	r->mcfg.params.port = srv.port;
	r->mcfg.params.pool = srv.pool;
	r->mcfg.params.pool_create_size = srv.pool ? create_size : 0;
	r->mcfg.params.client_id = r->client_id;
	rc = member_open(&r->mcfg, out);
	if (rc < 0) {
		why = refusal_text(&r->mcfg.params, rc, REMOTE_CREATE_HOW);
		if (why)
			remote_set_msg(err_msg, "%s", why);
		else
			remote_set_msg(err_msg, "%s: %s", addr, g_strerror(-rc));
		g_free(why);
	}
	r->mcfg.params = p;
	r->mcfg.params.host = NULL;
	remote_servers_free(&srv, 1);
	if (rc < 0)
		return rc;
	rc = remote_read_records(*out, &f);
	if (!rc && (f.kind != -ENODATA || !f.block0_zero)) {
		remote_set_msg(err_msg, "%s is not blank (%s): only a memserver with an empty pool can "
			"take a member's place", addr, f.kind == 0 ? "it holds a member record" :
			"it holds data");
		rc = -EEXIST;
	} else if (!rc && remote_usable_units(member_size(*out), r->info.unit_shift) <
				  r->info.member_units) {
		remote_set_msg(err_msg, "%s's pool is too small: a member needs %" G_GUINT64_FORMAT
			" bytes", addr, (guint64)remote_slot_off(r, r->info.member_units));
		rc = -ENOSPC;
	}
	if (rc < 0) {
		member_close(*out);
		*out = NULL;
	}
	return rc;
}

static int replace(struct remote *r, const char *old, const char *addr, char **err_msg)
{
	struct member *m;
	int i, rc;

	if (!r->set || !r->claimed) {
		remote_set_msg(err_msg, "this mount is %s", r->set ? "read-only" : "a single server");
		return -EINVAL;
	}
	i = find_member(r, old);
	if (i < 0) {
		remote_set_msg(err_msg, "%s names no member (use an address, a pool id or memberN as "
			"status shows them)", old);
		return -ENOENT;
	}
	if (atomic_load(&r->mem[i].up) || atomic_load(&r->rb_member) == i) {
		remote_set_msg(err_msg, "member %d (%s) is %s: only a lost member can be replaced", i,
			r->mem[i].name, atomic_load(&r->mem[i].up) ? "in sync" : "being rebuilt");
		return -EBUSY;
	}
	if (atomic_load(&r->rb_member) >= 0) {
		remote_set_msg(err_msg, "another member is being rebuilt; replace this one when it is done");
		return -EBUSY;
	}
	rc = open_blank(r, addr, r->info.m[i].pool_size, &m, err_msg);
	if (rc < 0)
		return rc;
	member_set_nowait(m, remote_redundant(r));
	pthread_mutex_lock(&r->set_lock);
	remote_arena_join(r, m, addr);
	member_close(r->mem[i].m);
	r->mem[i].m = m;
	g_strlcpy(r->mem[i].name, member_server(m), sizeof(r->mem[i].name));
	r->info.m[i].pool_id = member_pool_id(m);
	r->info.m[i].pool_size = member_size(m);
	r->info.m[i].state = LAYOUT_MEMBER_REBUILDING;
	r->info.m[i].rebuilt = 0;
	g_strlcpy(r->info.m[i].addr, r->mem[i].name, LAYOUT_SET_ADDR_LEN);
	rc = rebuild_start(r, (unsigned int)i, 0, false);
	if (!rc)
		rc = remote_write_records(r);
	pthread_mutex_unlock(&r->set_lock);
	if (rc < 0)
		remote_set_msg(err_msg, "starting the rebuild: %s", g_strerror(-rc));
	else
		g_message("member %d: %s replaces %s", i, r->mem[i].name, old);
	return rc;
}

int remote_replace(struct remote *r, const char *old, const char *addr, char **err_msg)
{
	char *msg = NULL;
	int rc = replace(r, old, addr, &msg);

	pthread_mutex_lock(&r->set_lock);
	g_free(r->replace_error);
	r->replace_error = rc < 0 ? g_strdup(msg ? msg : g_strerror(-rc)) : NULL;
	pthread_mutex_unlock(&r->set_lock);
	if (rc < 0)
		g_message("replace %s by %s: %s", old, addr, msg ? msg : g_strerror(-rc));
	if (err_msg)
		*err_msg = msg;
	else
		g_free(msg);
	return rc;
}
