// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * memserver-ctl.c - look at and manage the pools of a memserver.
 *
 *   memserver-ctl HOST[:PORT] [--token-file FILE] [--json] [--timeout SECS] COMMAND
 *   COMMAND: list | create NAME SIZE | delete NAME [--force] | stats
 *
 * One control session (common/poolctl.h: TCP, PROTO_HELLO_CONTROL) per run.
 * The server answers with statuses; this file turns them into sentences, and
 * for the two that want numbers (no room, a pool in use) asks POOL_LIST on
 * the same session for them. Exit 0 done, 1 refused or failed, 2 usage.
 */
#define G_LOG_DOMAIN "rmemfs-memserver-ctl"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <glib.h>

#include "json.h"
#include "net.h"
#include "poolctl.h"
#include "proto.h"
#include "units.h"
#include "xport.h"

#define PROG "memserver-ctl"
#define EXIT_FAIL 1
#define EXIT_USAGE 2
#define CTL_DEFAULT_TIMEOUT_S 10
#define CTL_MAX_TIMEOUT_S 3600
#define CTL_SIZE_LEN 32

struct ctl {
	char addr[300]; /* HOST:PORT as messages name it */
	int fd;
	int timeout_ms;
	bool json;
	bool token; /* --token-file given */
};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: " PROG " HOST[:PORT] [OPTIONS] list\n"
		"       " PROG " HOST[:PORT] [OPTIONS] create NAME SIZE\n"
		"       " PROG " HOST[:PORT] [OPTIONS] delete NAME [--force]\n"
		"       " PROG " HOST[:PORT] [OPTIONS] stats\n"
		"\n"
		"list    the capacity, the free capacity, and every pool the token may reach:\n"
		"        name, owner, size, resident bytes, clients, a client's id, flags\n"
		"create  create pool NAME of SIZE bytes (K, M, G, T suffixes; rounded up to\n"
		"        a MiB), owned by the token's tenant\n"
		"delete  delete pool NAME; refused while it has clients unless --force,\n"
		"        which cuts them off\n"
		"stats   the memserver's counters\n"
		"\n"
		"options:\n"
		"  --token-file FILE  the token to present (the admin's reaches every pool,\n"
		"                     a tenant's only its own)\n"
		"  --json             list and stats as one JSON document\n"
		"  --timeout SECS     wait at most SECS for each answer (default %d)\n"
		"  --force            delete: cut the pool's clients off\n"
		"  -h, --help         this help\n",
		CTL_DEFAULT_TIMEOUT_S);
}

static int usage_error(const char *fmt, ...) G_GNUC_PRINTF(1, 2);
static int usage_error(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, PROG ": ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, " (see " PROG " --help)\n");
	return EXIT_USAGE;
}

/* "memserver-ctl: HOST:PORT: ..." on stderr; returns EXIT_FAIL */
static int fail(const struct ctl *c, const char *fmt, ...) G_GNUC_PRINTF(2, 3);
static int fail(const struct ctl *c, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, PROG ": %s: ", c->addr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return EXIT_FAIL;
}

/* the words for a failure every command may meet */
static int fail_errno(const struct ctl *c, const char *what, int rc)
{
	switch (rc) {
	case -EPERM:
		return fail(c, c->token ? "wrong token" :
					  "the memserver wants a token (--token-file FILE)");
	case -ECONNREFUSED:
		return fail(c, "%s: connection refused (no memserver listening?)", what);
	case -ETIMEDOUT:
		return fail(c, "%s: no answer within %d s", what, c->timeout_ms / 1000);
	case -EBADMSG:
		return fail(c, "%s: not a memserver that knows control sessions "
			    "(an older memserver?)", what);
	case -EBADE:
		return fail(c, "%s: the answer is not one (not a memserver?)", what);
	case -ENOENT:
		if (!strcmp(what, "connect"))
			return fail(c, "no such host");
		break;
	}
	return fail(c, "%s: %s", what, g_strerror(-rc));
}

static const char *size_str(uint64_t bytes, char buf[CTL_SIZE_LEN])
{
	units_format_size(bytes, buf, CTL_SIZE_LEN);
	return buf;
}

/* "persistent,hugepages,deleting" or "-" */
static void flags_str(uint32_t flags, char *buf, size_t cap)
{
	static const struct {
		uint32_t bit;
		const char *name;
	} names[] = {
		{ PROTO_POOL_PERSISTENT, "persistent" },
		{ PROTO_POOL_HUGEPAGES, "hugepages" },
		{ PROTO_POOL_DELETING, "deleting" },
	};
	size_t i;

	buf[0] = 0;
	for (i = 0; i < G_N_ELEMENTS(names); i++) {
		if (flags & names[i].bit)
			g_snprintf(buf + strlen(buf), cap - strlen(buf), "%s%s", buf[0] ? "," : "",
				   names[i].name);
	}
	if (!buf[0])
		g_strlcpy(buf, "-", cap);
}

static void print_list_json(const struct proto_pool_list *l)
{
	uint32_t i;

	printf("{\"capacity\": %" PRIu64 ", \"free\": %" PRIu64 ", \"pools\": [", l->capacity,
	       l->free);
	for (i = 0; i < l->npools; i++) {
		const struct proto_pool_info *p = &l->pools[i];

		printf("%s{\"name\": ", i ? ", " : "");
		json_write_string(stdout, p->name);
		printf(", \"default\": %s, \"owner\": ", p->name[0] ? "false" : "true");
		json_write_string(stdout, p->owner);
		printf(", \"size\": %" PRIu64 ", \"resident\": %" PRIu64 ", \"pool_id\": \"%016" PRIx64
		       "\", \"clients\": %u, \"client_id\": ",
		       p->size, p->resident, p->pool_id, p->clients);
		if (p->client_id)
			printf("\"%016" PRIx64 "\"", p->client_id);
		else
			printf("null");
		printf(", \"persistent\": %s, \"hugepages\": %s, \"deleting\": %s}",
		       p->flags & PROTO_POOL_PERSISTENT ? "true" : "false",
		       p->flags & PROTO_POOL_HUGEPAGES ? "true" : "false",
		       p->flags & PROTO_POOL_DELETING ? "true" : "false");
	}
	printf("]}\n");
}

static void print_list_text(const struct proto_pool_list *l)
{
	int wname = (int)strlen("(default)"), wowner = (int)strlen("(admin)");
	char cap[CTL_SIZE_LEN], fr[CTL_SIZE_LEN], sz[CTL_SIZE_LEN], res[CTL_SIZE_LEN];
	uint32_t i;

	for (i = 0; i < l->npools; i++) {
		wname = MAX(wname, (int)strlen(l->pools[i].name));
		wowner = MAX(wowner, (int)strlen(l->pools[i].owner));
	}
	printf("capacity %s, free %s, %u pool%s\n", size_str(l->capacity, cap),
	       size_str(l->free, fr), l->npools, l->npools == 1 ? "" : "s");
	if (!l->npools)
		return;
	printf("%-*s  %-*s  %10s  %10s  %7s  %-16s  %s\n", wname, "NAME", wowner, "OWNER", "SIZE",
	       "RESIDENT", "CLIENTS", "CLIENT ID", "FLAGS");
	for (i = 0; i < l->npools; i++) {
		const struct proto_pool_info *p = &l->pools[i];
		char id[20], flags[64];

		if (p->client_id)
			g_snprintf(id, sizeof(id), "%016" PRIx64, p->client_id);
		else
			g_strlcpy(id, "-", sizeof(id));
		flags_str(p->flags, flags, sizeof(flags));
		printf("%-*s  %-*s  %10s  %10s  %7u  %-16s  %s\n", wname,
		       p->name[0] ? p->name : "(default)", wowner,
		       p->owner[0] ? p->owner : "(admin)", size_str(p->size, sz),
		       size_str(p->resident, res), p->clients, id, flags);
	}
}

static int cmd_list(struct ctl *c)
{
	struct proto_pool_list l;
	int rc;

	rc = poolctl_list(c->fd, c->timeout_ms, &l);
	if (rc)
		return fail_errno(c, "list", rc);
	if (c->json)
		print_list_json(&l);
	else
		print_list_text(&l);
	proto_pool_list_clear(&l);
	return 0;
}

/* pool name of the list, or NULL */
static const struct proto_pool_info *list_find(const struct proto_pool_list *l, const char *name)
{
	uint32_t i;

	for (i = 0; i < l->npools; i++) {
		if (!strcmp(l->pools[i].name, name))
			return &l->pools[i];
	}
	return NULL;
}

/* -ENOSPC: say how much is free, or that the server holds as many pools as it may */
static int fail_nospace(struct ctl *c, uint64_t size)
{
	char want[CTL_SIZE_LEN], fr[CTL_SIZE_LEN], cap[CTL_SIZE_LEN];
	uint64_t rounded = (size + (1ULL << 20) - 1) & ~((1ULL << 20) - 1);
	struct proto_pool_list l;
	int rc;

	size_str(size, want);
	rc = poolctl_list(c->fd, c->timeout_ms, &l);
	if (rc)
		return fail(c, "no room for a %s pool", want);
	if (rounded <= l.free)
		rc = fail(c, "no room for another pool (it serves as many as it may, %d)",
			  PROTO_MAX_POOLS);
	else
		rc = fail(c, "no room for a %s pool (%s free of %s)", want, size_str(l.free, fr),
			  size_str(l.capacity, cap));
	proto_pool_list_clear(&l);
	return rc;
}

static int cmd_create(struct ctl *c, const char *name, uint64_t size)
{
	char sz[CTL_SIZE_LEN];
	int rc;

	rc = poolctl_create(c->fd, c->timeout_ms, name, size);
	switch (rc) {
	case 0:
		printf("created pool %s of %s on %s\n", name, size_str(size, sz), c->addr);
		return 0;
	case -ENOSPC:
		return fail_nospace(c, size);
	case -EEXIST:
		return fail(c, "pool %s exists", name);
	case -EKEYREJECTED:
		return fail(c, "the token may not create pool %s", name);
	case -EBADMSG:
		return fail(c, "the server refused to create pool %s of %s", name,
			    size_str(size, sz));
	}
	return fail_errno(c, "create", rc);
}

/* -EBUSY: how many clients the pool has now */
static int fail_busy(struct ctl *c, const char *name)
{
	const struct proto_pool_info *p;
	struct proto_pool_list l;
	int rc;

	if (poolctl_list(c->fd, c->timeout_ms, &l))
		return fail(c, "pool %s has clients: use --force to cut them off", name);
	p = list_find(&l, name);
	if (p && p->clients)
		rc = fail(c, "pool %s has %u client%s: use --force to cut %s off", name,
			  p->clients, p->clients == 1 ? "" : "s", p->clients == 1 ? "it" : "them");
	else
		rc = fail(c, "pool %s has clients: use --force to cut them off", name);
	proto_pool_list_clear(&l);
	return rc;
}

static int cmd_delete(struct ctl *c, const char *name, bool force)
{
	int rc;

	rc = poolctl_delete(c->fd, c->timeout_ms, name, force);
	switch (rc) {
	case 0:
		printf("deleted pool %s on %s\n", name, c->addr);
		return 0;
	case -ENOENT:
		return fail(c, "no pool %s", name);
	case -EBUSY:
		return fail_busy(c, name);
	case -EPROTO:
		return fail(c, "pool %s cannot be deleted", name);
	}
	return fail_errno(c, "delete", rc);
}

static int cmd_stats(struct ctl *c)
{
	struct proto_stats s;
	int rc;
	const struct {
		const char *name;
		uint64_t *v;
	} rows[] = {
		{ "clients_now", &s.clients_now },	 { "clients_total", &s.clients_total },
		{ "auth_failures", &s.auth_failures },	 { "bad_requests", &s.bad_requests },
		{ "reads", &s.reads },			 { "writes", &s.writes },
		{ "atomics", &s.atomics },		 { "bytes_read", &s.bytes_read },
		{ "bytes_written", &s.bytes_written },	 { "rdma_connections", &s.rdma_connections },
	};
	size_t i;

	rc = poolctl_stats(c->fd, c->timeout_ms, &s);
	if (rc)
		return fail_errno(c, "stats", rc);
	if (c->json)
		printf("{");
	for (i = 0; i < G_N_ELEMENTS(rows); i++) {
		if (c->json)
			printf("%s\"%s\": %" PRIu64, i ? ", " : "", rows[i].name, *rows[i].v);
		else
			printf("%-17s %" PRIu64 "\n", rows[i].name, *rows[i].v);
	}
	if (c->json)
		printf("}\n");
	return 0;
}

enum { OPT_TOKEN_FILE = 256, OPT_JSON, OPT_TIMEOUT, OPT_FORCE };

static const struct option ctl_options[] = {
	{ "token-file", required_argument, NULL, OPT_TOKEN_FILE },
	{ "json", no_argument, NULL, OPT_JSON },
	{ "timeout", required_argument, NULL, OPT_TIMEOUT },
	{ "force", no_argument, NULL, OPT_FORCE },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

/* what the command line asks for */
struct ctl_args {
	const char *server, *token_file, *cmd, *name;
	uint64_t size, timeout_s;
	bool json, force;
};

/* 0, or the exit code of a usage error (or of --help: -1) */
static int parse_args(int argc, char **argv, struct ctl_args *a)
{
	char **pos;
	int opt, n;

	memset(a, 0, sizeof(*a));
	a->timeout_s = CTL_DEFAULT_TIMEOUT_S;
	while ((opt = getopt_long(argc, argv, "h", ctl_options, NULL)) != -1) {
		switch (opt) {
		case OPT_TOKEN_FILE:
			a->token_file = optarg;
			break;
		case OPT_JSON:
			a->json = true;
			break;
		case OPT_TIMEOUT:
			if (units_parse_uint(optarg, 1, CTL_MAX_TIMEOUT_S, &a->timeout_s))
				return usage_error("--timeout %s: expected whole seconds, 1..%d",
						   optarg, CTL_MAX_TIMEOUT_S);
			break;
		case OPT_FORCE:
			a->force = true;
			break;
		case 'h':
			usage(stdout);
			return -1;
		default:
			fprintf(stderr, "(see " PROG " --help)\n");
			return EXIT_USAGE;
		}
	}
	pos = argv + optind;
	n = argc - optind;
	if (n < 2)
		return usage_error("expected HOST[:PORT] and a command");
	a->server = pos[0];
	a->cmd = pos[1];
	if (!strcmp(a->cmd, "list") || !strcmp(a->cmd, "stats")) {
		if (n != 2)
			return usage_error("%s takes no arguments", a->cmd);
	} else if (!strcmp(a->cmd, "create")) {
		if (n != 4)
			return usage_error("usage: create NAME SIZE");
		if (units_parse_size(pos[3], &a->size) || a->size < (1ULL << 20))
			return usage_error("create: SIZE '%s': expected a size of at least 1M "
					   "(K, M, G, T suffixes)", pos[3]);
	} else if (!strcmp(a->cmd, "delete")) {
		if (n != 3)
			return usage_error("usage: delete NAME [--force]");
	} else {
		return usage_error("unknown command '%s'", a->cmd);
	}
	if (n > 2) {
		a->name = pos[2];
		if (!proto_pool_name_valid(a->name))
			return usage_error("pool name '%s': expected 1 to %d of A-Z a-z 0-9 _ . -, "
					   "not starting with . or -", a->name,
					   PROTO_POOL_NAME_MAX - 1);
		if (a->json)
			return usage_error("--json goes with list and stats");
	}
	if (a->force && strcmp(a->cmd, "delete"))
		return usage_error("--force goes with delete");
	return 0;
}

static int run(const struct ctl_args *a)
{
	struct xport_params params;
	struct ctl c = { .fd = -1, .json = a->json, .token = a->token_file != NULL,
			 .timeout_ms = (int)a->timeout_s * 1000 };
	uint16_t port;
	char *host;
	int rc;

	/* a server, not a pool: HOST:PORT/NAME is the clients' form */
	if (strchr(a->server, '/') || net_parse_server(a->server, &host, &port))
		return usage_error("server '%s': expected HOST or HOST:PORT ([ADDRESS]:PORT for "
				   "IPv6, ports 1..65535)", a->server);
	if (xport_params_client(&params, host, port, a->token_file, PROG, "--token-file ")) {
		rc = EXIT_FAIL;
		goto out;
	}
	g_snprintf(c.addr, sizeof(c.addr), strchr(host, ':') ? "[%s]:%u" : "%s:%u", host,
		   params.port);
	rc = poolctl_open(host, params.port, params.token_hash, c.timeout_ms, &c.fd);
	if (rc) {
		rc = fail_errno(&c, "connect", rc);
		goto out;
	}
	if (!strcmp(a->cmd, "list"))
		rc = cmd_list(&c);
	else if (!strcmp(a->cmd, "stats"))
		rc = cmd_stats(&c);
	else if (!strcmp(a->cmd, "create"))
		rc = cmd_create(&c, a->name, a->size);
	else
		rc = cmd_delete(&c, a->name, a->force);
	poolctl_close(c.fd);
out:
	g_free(host);
	return rc;
}

int main(int argc, char **argv)
{
	struct ctl_args a;
	int rc;

	rc = parse_args(argc, argv, &a);
	if (rc)
		return rc < 0 ? 0 : rc;
	return run(&a);
}
