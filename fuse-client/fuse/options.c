// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * options.c - parse and validate the rmemfs command line (see options.h).
 *
 * One fuse_opt table built with offsetof. String-valued options are captured
 * raw and validated afterwards so each bad value gets its own message
 * ("block_size=3000: must be a power of two between 4K and 1M") instead of
 * libfuse's generic one. Whatever this table does not know is kept in
 * o->args for fuse_session_new(), which knows libfuse's options and rejects
 * the rest ("fuse: unknown option(s)").
 */
#define G_LOG_DOMAIN "rmemfs-options"

#include "options.h"

#include "follow.h"
#include "net.h"

#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <glib.h>

#include "config.h"
#include "ec_codec.h"
#include "units.h"

enum {
	KEY_HELP,
	KEY_VERSION,
	KEY_RO,
	KEY_DEFAULT_PERMISSIONS,
};

#define OPT(t, field, v) { t, offsetof(struct options, field), v }

static const struct fuse_opt options_table[] = {
	OPT("transport=%s", transport, 0),
	OPT("token_file=%s", token_file, 0),
	OPT("cache_size=%s", cache_size_str, 0),
	OPT("block_size=%s", block_size_str, 0),
	OPT("qps=%s", qps_str, 0),
	OPT("poll=%s", poll_str, 0),
	OPT("readahead=%s", readahead_str, 0),
	OPT("writeback=%s", writeback_str, 0),
	OPT("writeback_cache=%s", writeback_cache_str, 0),
	OPT("odirect=%s", odirect_str, 0),
	OPT("uring=%s", uring_str, 0),
	OPT("uring_poll=%s", uring_poll_str, 0),
	OPT("entry_timeout=%s", entry_timeout_str, 0),
	OPT("attr_timeout=%s", attr_timeout_str, 0),
	OPT("reconnect_timeout=%s", reconnect_timeout_str, 0),
	OPT("replicas=%s", replicas_str, 0),
	OPT("ec=%s", ec_str, 0),
	OPT("size=%s", size_str, 0),
	OPT("donors=%s", donors, 0),
	OPT("refresh=%s", refresh_str, 0),
	OPT("cache_idle=%s", cache_idle_str, 0),
	OPT("degraded", degraded, 1),
	OPT("direct_io", direct_io, 1),
	OPT("format", format, 1),
	OPT("swap", swap, 1),
	FUSE_OPT_KEY("ro", KEY_RO),
	FUSE_OPT_KEY("default_permissions", KEY_DEFAULT_PERMISSIONS),
	FUSE_OPT_KEY("-h", KEY_HELP),
	FUSE_OPT_KEY("--help", KEY_HELP),
	FUSE_OPT_KEY("-V", KEY_VERSION),
	FUSE_OPT_KEY("--version", KEY_VERSION),
	/* fstab noise: meaningful to mount(8), not to us */
	FUSE_OPT_KEY("_netdev", FUSE_OPT_KEY_DISCARD),
	FUSE_OPT_KEY("defaults", FUSE_OPT_KEY_DISCARD),
	FUSE_OPT_KEY("auto", FUSE_OPT_KEY_DISCARD),
	FUSE_OPT_KEY("noauto", FUSE_OPT_KEY_DISCARD),
	FUSE_OPT_KEY("user", FUSE_OPT_KEY_DISCARD),
	FUSE_OPT_KEY("nouser", FUSE_OPT_KEY_DISCARD),
	FUSE_OPT_KEY("users", FUSE_OPT_KEY_DISCARD),
	FUSE_OPT_KEY("owner", FUSE_OPT_KEY_DISCARD),
	FUSE_OPT_KEY("group", FUSE_OPT_KEY_DISCARD),
	FUSE_OPT_KEY("nofail", FUSE_OPT_KEY_DISCARD),
	FUSE_OPT_KEY("comment=", FUSE_OPT_KEY_DISCARD),
	FUSE_OPT_END
};

static int options_proc(void *data, const char *arg, int key, struct fuse_args *outargs)
{
	struct options *o = data;

	switch (key) {
	case KEY_HELP:
		o->show_help = 1;
		return 0;
	case KEY_VERSION:
		o->show_version = 1;
		return 0;
	case KEY_RO:
		o->read_only = 1;
		return 1; /* libfuse mounts read-only */
	case KEY_DEFAULT_PERMISSIONS:
		o->default_permissions = 1;
		return 1;
	case FUSE_OPT_KEY_OPT:
		/* x-systemd.automount, x-systemd.mount-timeout=30, x-gvfs-hide... */
		if (g_str_has_prefix(arg, "x-"))
			return 0;
		return 1; /* libfuse's own option (or unknown: fuse_session_new says so) */
	case FUSE_OPT_KEY_NONOPT:
		o->nonopt_count++;
		if (o->nonopt_count == 1) {
			o->server = g_strdup(arg);
			return 0;
		}
		if (o->nonopt_count == 2)
			return 1; /* the mountpoint, for fuse_parse_cmdline */
		fprintf(stderr, "rmemfs: unexpected argument '%s' (usage: rmemfs SERVER[:PORT] MOUNTPOINT [options])\n",
			arg);
		return -1;
	default:
		return 1;
	}
}

static int parse_on_off(const char *name, const char *s, bool *out)
{
	if (!s)
		return 0;
	if (!strcmp(s, "on")) {
		*out = true;
	} else if (!strcmp(s, "off")) {
		*out = false;
	} else {
		fprintf(stderr, "rmemfs: %s=%s: expected on or off\n", name, s);
		return -EINVAL;
	}
	return 0;
}

uint64_t options_default_cache_size(void)
{
	long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGESIZE);
	uint64_t ram = pages > 0 && psize > 0 ? (uint64_t)pages * (uint64_t)psize : 0;

	return CLAMP(ram / OPTIONS_CACHE_RAM_DIV, OPTIONS_MIN_DEFAULT_CACHE_SIZE,
		     OPTIONS_MAX_DEFAULT_CACHE_SIZE);
}

/* seconds in [0, 86400]; with allow_inf also "inf" (INFINITY) */
static int parse_timeout(const char *name, const char *s, bool allow_inf, double *out)
{
	char *end;
	double v;

	if (!s)
		return 0;
	if (allow_inf && strcmp(s, "inf") == 0) {
		*out = INFINITY;
		return 0;
	}
	errno = 0;
	v = g_ascii_strtod(s, &end);
	if (!*s || *end || errno || !isfinite(v) || v < 0 || v > 86400) {
		fprintf(stderr, "rmemfs: %s=%s: expected seconds between 0 and 86400 (e.g. 1, 0.5, 0%s)\n",
			name, s, allow_inf ? ", inf" : "");
		return -EINVAL;
	}
	*out = v;
	return 0;
}

/* "K+M": two whole numbers, any size; -EINVAL */
static int parse_code(const char *s, uint64_t *k, uint64_t *m)
{
	const char *plus = strchr(s, '+');
	char *head;
	int rc;

	if (!plus)
		return -EINVAL;
	head = g_strndup(s, (gsize)(plus - s));
	rc = units_parse_uint(head, 0, UINT32_MAX, k);
	g_free(head);
	if (!rc)
		rc = units_parse_uint(plus + 1, 0, UINT32_MAX, m);
	return rc < 0 ? -EINVAL : 0;
}

/* ec=K+M (the servers parsed) */
static int validate_code(struct options *o)
{
	uint64_t k, m;

	if (!o->ec_str)
		return 0;
	if (parse_code(o->ec_str, &k, &m) < 0) {
		fprintf(stderr, "rmemfs: ec=%s: expected K+M, K data and M parity fragments (e.g. 4+2)\n",
			o->ec_str);
		return -EINVAL;
	}
	if (k < EC_MIN_K || k > EC_MAX_K || m < EC_MIN_M || m > EC_MAX_M) {
		fprintf(stderr, "rmemfs: ec=%s: K (data fragments) must be %u..%u and M (parity fragments) %u..%u\n",
			o->ec_str, EC_MIN_K, EC_MAX_K, EC_MIN_M, EC_MAX_M);
		return -EINVAL;
	}
	if (k + m > o->nservers && !o->donors) {
		fprintf(stderr, "rmemfs: ec=%s needs at least %u servers (%u given)\n", o->ec_str,
			(unsigned int)(k + m), o->nservers);
		return -EINVAL;
	}
	o->ec_k = (unsigned int)k;
	o->ec_m = (unsigned int)m;
	return 0;
}

/* replicas= or ec=, for the servers given */
static int validate_redundancy(struct options *o)
{
	uint64_t v;

	if (o->ec_str && o->replicas_str) {
		fprintf(stderr, "rmemfs: ec= and replicas= exclude each other\n");
		return -EINVAL;
	}
	if (o->replicas_str) {
		if (units_parse_uint(o->replicas_str, 1, REMOTE_MAX_REPLICAS, &v) < 0 ||
		    (v > o->nservers && !o->donors)) {
			fprintf(stderr, "rmemfs: replicas=%s: must be 1..3 and at most the number of servers (%u)\n",
				o->replicas_str, o->nservers);
			return -EINVAL;
		}
		o->replicas = (unsigned int)v;
	}
	return validate_code(o);
}

/* true if a server of the set names a pool */
static bool options_names_pool(const struct options *o)
{
	unsigned int i;

	for (i = 0; i < o->nservers; i++)
		if (o->servers[i].pool)
			return true;
	return o->donors != NULL;
}

/* size= and donors=: what they need (the servers parsed) */
static int validate_pools(struct options *o)
{
	if (o->donors && !*o->donors) {
		fprintf(stderr, "rmemfs: donors= needs a file naming the candidate memservers\n");
		return -EINVAL;
	}
	if (o->donors && o->format && (!o->size_str || (!o->replicas_str && !o->ec_str))) {
		fprintf(stderr, "rmemfs: donors= with format creates a member set: give the pools' size= and replicas=R or ec=K+M (how many members to choose)\n");
		return -EINVAL;
	}
	if (!o->size_str)
		return 0;
	if (units_parse_size(o->size_str, &o->pool_size) < 0 || o->pool_size < (1ULL << 20)) {
		fprintf(stderr, "rmemfs: size=%s: expected the size of a pool, at least 1M (e.g. 512M, 4G)\n",
			o->size_str);
		return -EINVAL;
	}
	if (!o->format) {
		fprintf(stderr, "rmemfs: size= is the size of the pools -o format creates: give it with format\n");
		return -EINVAL;
	}
	if (!options_names_pool(o)) {
		fprintf(stderr, "rmemfs: size= creates named pools, and '%s' names none (name one as SERVER[:PORT]/NAME; the default pool's size is the memserver's --size)\n",
			o->server);
		return -EINVAL;
	}
	return 0;
}

/* SERVER[:PORT][/NAME], replicas= or ec=, transport= and token_file= */
static int validate_server(struct options *o)
{
	char *why = NULL;

	if (!o->server) {
		fprintf(stderr, "rmemfs: missing SERVER[:PORT][/NAME] (usage: rmemfs SERVER[:PORT][/NAME] MOUNTPOINT [options]; try --help)\n");
		return -EINVAL;
	}
	if (o->donors) {
		if (!proto_pool_name_valid(o->server)) {
			fprintf(stderr, "rmemfs: with donors= the source is the pool's NAME, not '%s' (1 to 31 of A-Z a-z 0-9 _ . - beginning with a letter, a digit or _)\n",
				o->server);
			return -EINVAL;
		}
	} else if (remote_parse_servers(o->server, o->servers, REMOTE_MAX_SERVERS, &o->nservers,
					&why) < 0) {
		if (why)
			fprintf(stderr, "rmemfs: %s\n", why);
		else
			fprintf(stderr, "rmemfs: '%s': a member set has at most %u servers\n", o->server,
				REMOTE_MAX_SERVERS);
		g_free(why);
		return -EINVAL;
	}
	if (validate_redundancy(o) < 0 || validate_pools(o) < 0)
		return -EINVAL;
	if (o->token_file && !*o->token_file) {
		fprintf(stderr, "rmemfs: token_file= needs a file name\n");
		return -EINVAL;
	}
	if (!o->transport) {
		o->transport = strdup("auto");
		return o->transport ? 0 : -ENOMEM;
	}
	if (strcmp(o->transport, "auto") && strcmp(o->transport, "tcp") &&
	    strcmp(o->transport, "rdma")) {
		fprintf(stderr, "rmemfs: transport=%s: expected auto, tcp or rdma\n", o->transport);
		return -EINVAL;
	}
	if (!strcmp(o->transport, "rdma") && !xport_available("rdma")) {
		fprintf(stderr, "rmemfs: transport=rdma: this rmemfs was built without RDMA support (rebuild with -Drdma=enabled)\n");
		return -EINVAL;
	}
	return 0;
}

/* block_size=, cache_size= (-o swap changes their defaults) and readahead= */
static int validate_cache(struct options *o)
{
	uint64_t sz;
	int rc;

	if (o->swap) {
		o->block_size = OPTIONS_SWAP_BLOCK_SIZE;
		o->cache_size = OPTIONS_SWAP_CACHE_SIZE;
	}
	if (o->block_size_str) {
		rc = units_parse_size(o->block_size_str, &sz);
		if (rc < 0 || sz < 4096 || sz > (1U << 20) || (sz & (sz - 1))) {
			fprintf(stderr, "rmemfs: block_size=%s: must be a power of two between 4K and 1M\n",
				o->block_size_str);
			return -EINVAL;
		}
		o->block_size = (uint32_t)sz;
	}
	if (o->cache_size_str) {
		rc = units_parse_size(o->cache_size_str, &sz);
		if (rc < 0) {
			fprintf(stderr, "rmemfs: cache_size=%s: not a size (use e.g. 64M, 1G)\n",
				o->cache_size_str);
			return -EINVAL;
		}
		o->cache_size = sz;
	}
	if (o->cache_size < 16ULL * o->block_size) {
		char cs[32], bs[32];

		units_format_size(o->cache_size, cs, sizeof(cs));
		units_format_size(o->block_size, bs, sizeof(bs));
		fprintf(stderr, "rmemfs: cache_size (%s) must hold at least 16 blocks of block_size (%s)\n",
			cs, bs);
		return -EINVAL;
	}
	if (o->readahead_str) {
		rc = units_parse_size(o->readahead_str, &sz);
		if (rc < 0 || sz > (1ULL << 30)) {
			fprintf(stderr, "rmemfs: readahead=%s: expected a size up to 1G (e.g. 128K, 0 for none)\n",
				o->readahead_str);
			return -EINVAL;
		}
		o->readahead = sz;
	}
	return 0;
}

/* qps=, poll=, the on/off switches and the timeouts */
static int validate_tuning(struct options *o)
{
	double secs = 0;
	uint64_t v;

	if (o->qps_str) {
		if (units_parse_uint(o->qps_str, 1, OPTIONS_MAX_QPS, &v) < 0) {
			fprintf(stderr, "rmemfs: qps=%s: expected a number of connections from 1 to %u\n",
				o->qps_str, OPTIONS_MAX_QPS);
			return -EINVAL;
		}
		o->qps = (unsigned int)v;
	}
	if (o->poll_str && xport_poll_mode_parse(o->poll_str, &o->poll_mode) < 0) {
		fprintf(stderr, "rmemfs: poll=%s: expected busy, event or hybrid\n", o->poll_str);
		return -EINVAL;
	}
	if (parse_on_off("writeback", o->writeback_str, &o->writeback) < 0 ||
	    parse_on_off("writeback_cache", o->writeback_cache_str, &o->writeback_cache) < 0)
		return -EINVAL;
	if (o->odirect_str && strcmp(o->odirect_str, "uncached") == 0) {
		o->odirect_uncached = true;
	} else if (o->odirect_str && strcmp(o->odirect_str, "kernel") == 0) {
		o->odirect_uncached = false;
	} else if (o->odirect_str) {
		fprintf(stderr, "rmemfs: odirect=%s: expected uncached or kernel\n", o->odirect_str);
		return -EINVAL;
	}
	if (o->uring_str && ring_mode_parse(o->uring_str, &o->uring) < 0) {
		fprintf(stderr, "rmemfs: uring=%s: expected auto, on or off\n", o->uring_str);
		return -EINVAL;
	}
	if (o->uring_poll_str) {
		if (units_parse_uint(o->uring_poll_str, 0, OPTIONS_MAX_URING_POLL_US, &v) < 0) {
			fprintf(stderr, "rmemfs: uring_poll=%s: expected microseconds from 0 to %u\n",
				o->uring_poll_str, OPTIONS_MAX_URING_POLL_US);
			return -EINVAL;
		}
		o->uring_poll_us = (unsigned int)v;
	}
	if (parse_timeout("entry_timeout", o->entry_timeout_str, false, &o->entry_timeout) < 0 ||
	    parse_timeout("attr_timeout", o->attr_timeout_str, false, &o->attr_timeout) < 0 ||
	    parse_timeout("reconnect_timeout", o->reconnect_timeout_str, true, &secs) < 0)
		return -EINVAL;
	if (o->reconnect_timeout_str)
		o->reconnect_timeout_ms = isinf(secs) ? -1 : (int)(secs * 1000);
	secs = 0;
	if (parse_timeout("refresh", o->refresh_str, false, &secs) < 0)
		return -EINVAL;
	if (o->refresh_str && (secs < 0.05 || secs > 60)) {
		fprintf(stderr, "rmemfs: refresh=%s: expected seconds between 0.05 and 60\n",
			o->refresh_str);
		return -EINVAL;
	}
	if (o->refresh_str)
		o->refresh_ms = (unsigned int)(secs * 1000 + 0.5);
	secs = 0;
	if (parse_timeout("cache_idle", o->cache_idle_str, false, &secs) < 0)
		return -EINVAL;
	if (o->cache_idle_str)
		o->cache_idle_ms = (unsigned int)(secs * 1000 + 0.5);
	return 0;
}

static int validate(struct options *o)
{
	int rc;

	rc = validate_server(o);
	if (rc == 0)
		rc = validate_cache(o);
	if (rc == 0)
		rc = validate_tuning(o);
	if (rc)
		return rc;
	/* combinations */
	if (o->format && o->read_only) {
		fprintf(stderr, "rmemfs: -o format cannot be combined with -o ro (formatting writes the pool)\n");
		return -EINVAL;
	}
	if (o->refresh_str && !o->read_only) {
		fprintf(stderr, "rmemfs: refresh= is for -o ro mounts (a reader following the writer)\n");
		return -EINVAL;
	}
	if (o->direct_io && o->writeback_cache_str && o->writeback_cache) {
		fprintf(stderr, "rmemfs: direct_io and writeback_cache=on exclude each other (direct_io bypasses the kernel's page cache)\n");
		return -EINVAL;
	}
	/*
	 * A reader follows the writer's sizes: the kernel's writeback cache keeps
	 * its own i_size and would not take a truncated one from us
	 */
	if (o->direct_io || o->read_only)
		o->writeback_cache = false;
	return 0;
}

static int add_arg(struct options *o, const char *arg)
{
	if (fuse_opt_add_arg(&o->args, arg) < 0) {
		fprintf(stderr, "rmemfs: out of memory\n");
		return -ENOMEM;
	}
	return 0;
}

int options_parse(struct options *o, int argc, char **argv)
{
	struct fuse_cmdline_opts cmd;
	char *arg, *joined, **esc;
	int rc;

	memset(o, 0, sizeof(*o));
	/* defaults before parsing */
	o->cache_size = options_default_cache_size();
	o->block_size = OPTIONS_DEFAULT_BLOCK_SIZE;
	o->qps = OPTIONS_DEFAULT_QPS;
	o->poll_mode = XPORT_POLL_HYBRID;
	o->readahead = OPTIONS_DEFAULT_READAHEAD;
	o->writeback = true;
	o->writeback_cache = true;
	o->odirect_uncached = true;
	o->uring_poll_us = RING_DEFAULT_POLL_US;
	o->uring = RING_OFF; /* until the known deadlock is gone: ARCHITECTURE, "The FUSE ring" */
	o->entry_timeout = OPTIONS_DEFAULT_TIMEOUT;
	o->attr_timeout = OPTIONS_DEFAULT_TIMEOUT;
	o->reconnect_timeout_ms = OPTIONS_DEFAULT_RECONNECT_S * 1000;
	o->refresh_ms = FOLLOW_DEFAULT_REFRESH_MS;
	o->cache_idle_ms = OPTIONS_DEFAULT_CACHE_IDLE_S * 1000;
	o->args = (struct fuse_args)FUSE_ARGS_INIT(argc, argv);

	if (fuse_opt_parse(&o->args, o, options_table, options_proc) < 0)
		return -EINVAL; /* libfuse or options_proc printed why */
	if (o->show_help || o->show_version)
		return 0;

	rc = validate(o);
	if (rc < 0)
		return rc;

	/* root serves every user: the kernel checks POSIX permissions for all */
	if (geteuid() == 0) {
		if (!o->default_permissions && add_arg(o, "-odefault_permissions") < 0)
			return -ENOMEM;
		o->default_permissions = 1;
		if (add_arg(o, "-oallow_other") < 0)
			return -ENOMEM;
	}
	/* shows as "127.0.0.1:7471 on /mnt type fuse.rmemfs" in /proc/mounts */
	if (add_arg(o, "-osubtype=rmemfs") < 0)
		return -ENOMEM;
	/* fuse_opt splits -o at commas; "\," keeps a member list in one name */
	esc = g_strsplit(o->server, ",", -1);
	joined = g_strjoinv("\\,", esc);
	arg = g_strdup_printf("-ofsname=%s", joined);
	rc = add_arg(o, arg);
	g_strfreev(esc);
	g_free(joined);
	g_free(arg);
	if (rc < 0)
		return rc;

	memset(&cmd, 0, sizeof(cmd));
	if (fuse_parse_cmdline(&o->args, &cmd) != 0)
		return -EINVAL; /* libfuse printed why */
	o->mountpoint = cmd.mountpoint;
	o->foreground = cmd.foreground || cmd.debug;
	o->debug = cmd.debug;
	o->singlethread = cmd.singlethread;
	o->clone_fd = cmd.clone_fd;
	o->max_idle_threads = cmd.max_idle_threads;
#if FUSE_USE_VERSION >= 312
	o->max_threads = cmd.max_threads;
	if (o->swap) /* libfuse's default (10) or more, given with -o max_threads */
		o->max_threads = MIN(o->max_threads, OPTIONS_SWAP_MAX_THREADS);
#endif
	if (cmd.show_help)
		o->show_help = 1;
	if (cmd.show_version)
		o->show_version = 1;
	if (o->show_help || o->show_version)
		return 0;
	if (!o->mountpoint) {
		fprintf(stderr, "rmemfs: missing MOUNTPOINT (usage: rmemfs SERVER[:PORT] MOUNTPOINT [options])\n");
		return -EINVAL;
	}
	return 0;
}

void options_free(struct options *o)
{
	if (!o)
		return;
	g_free(o->server);
	remote_servers_free(o->servers, o->nservers);
	free(o->replicas_str);
	free(o->ec_str);
	free(o->size_str);
	free(o->donors);
	free(o->mountpoint);
	free(o->transport);
	free(o->token_file);
	free(o->cache_size_str);
	free(o->block_size_str);
	free(o->qps_str);
	free(o->poll_str);
	free(o->readahead_str);
	free(o->writeback_str);
	free(o->writeback_cache_str);
	free(o->odirect_str);
	free(o->uring_str);
	free(o->uring_poll_str);
	free(o->entry_timeout_str);
	free(o->attr_timeout_str);
	free(o->reconnect_timeout_str);
	free(o->refresh_str);
	free(o->cache_idle_str);
	fuse_opt_free_args(&o->args);
	memset(o, 0, sizeof(*o));
}

void options_print_help(const char *prog)
{
	char cs[32], bs[32], ra[32];

	units_format_size(options_default_cache_size(), cs, sizeof(cs));
	units_format_size(OPTIONS_DEFAULT_BLOCK_SIZE, bs, sizeof(bs));
	units_format_size(OPTIONS_DEFAULT_READAHEAD, ra, sizeof(ra));
	printf("usage: %s SERVER[:PORT][/NAME][,SERVER[:PORT][/NAME]...] MOUNTPOINT [-f] [-d] [-s] [-o OPTIONS]\n"
	       "       %s NAME MOUNTPOINT -o donors=FILE [-o OPTIONS]\n"
	       "\n"
	       "Mount the memory pool served by a memserver at SERVER (default port %d;\n"
	       "IPv6 as [addr]:port; /NAME: the server's pool NAME instead of its default\n"
	       "pool), or one filesystem over several memservers, each unit of data kept\n"
	       "on `replicas` of them (or erasure-coded, ec=). From /etc/fstab:\n"
	       "  127.0.0.1:7471 /mnt/rmem fuse.rmemfs defaults,_netdev,token_file=/etc/rmemfs.token 0 0\n"
	       "\n"
	       "rmemfs options:\n"
	       "    -o transport=auto|tcp|rdma  how to reach the pool (default auto: RDMA when a\n"
	       "                           verbs device reaches the server, else TCP)\n"
	       "    -o token_file=FILE     file holding the memserver's access token\n"
	       "    -o cache_size=SIZE     client block cache size (default RAM/16 within\n"
	       "                           64M..1G: %s here)\n"
	       "                           the cache's ceiling: it grows with use in 16M\n"
	       "                           chunks and gives them back when memory runs short\n"
	       "    -o cache_idle=SECS     after this long without reads or writes the cache\n"
	       "                           gives back all but its first chunk (default 30;\n"
	       "                           0: never)\n"
	       "    -o block_size=SIZE     cache block size, power of two 4K..1M (default %s)\n"
	       "    -o readahead=SIZE      largest readahead window for sequential reads\n"
	       "                           (default %s; 0: none)\n"
	       "    -o writeback=on|off    on: the block cache writes data back later, by age\n"
	       "                           and dirty ratio, and at fsync (default on);\n"
	       "                           off: every write goes through to the pool\n"
	       "    -o writeback_cache=on|off  the kernel's writeback cache (default on;\n"
	       "                           write errors are then reported at fsync/close)\n"
	       "    -o odirect=uncached|kernel  O_DIRECT opens: uncached (default) bypasses\n"
	       "                           the page cache in FUSE, writers of one file run in\n"
	       "                           parallel (Linux >= 6.6, else kernel); kernel: the\n"
	       "                           kernel's O_DIRECT path, writers queue; mmap works\n"
	       "    -o uring=auto|on|off   the FUSE channel: off (default) /dev/fuse; auto:\n"
	       "                           io_uring where the kernel offers it (Linux >=\n"
	       "                           6.14, fuse's enable_uring=Y), else /dev/fuse;\n"
	       "                           on: io_uring or no mount (see rmemfs(8): a known\n"
	       "                           deadlock with direct writes beside cached readers)\n"
	       "    -o uring_poll=US       a ring thread that answered looks for the next\n"
	       "                           request this long before it sleeps, while no\n"
	       "                           other is being served (default %u; 0: never)\n"
	       "    -o direct_io           bypass the kernel page cache for every file\n"
	       "    -o format              format a pool that holds no rmemfs (never an rmemfs pool)\n"
	       "    -o size=SIZE           with format: create each named pool (SERVER/NAME)\n"
	       "                           that does not exist yet with SIZE (e.g. 4G)\n"
	       "    -o donors=FILE         the source is a pool NAME; FILE lists candidate\n"
	       "                           memservers (HOST[:PORT] a line). With format,size=\n"
	       "                           and replicas=R or ec=K+M: choose the members by\n"
	       "                           free capacity (power of two choices) and create\n"
	       "                           the set there; else mount the set the candidates\n"
	       "                           holding pool NAME form\n"
	       "    -o swap                serve a swap file (rmemfs-swap): lock the daemon's\n"
	       "                           memory, never wait for I/O to allocate, never be\n"
	       "                           OOM-killed; cache_size defaults to 4M, block_size\n"
	       "                           to 4K (needs root)\n"
	       "    -o qps=N               connections to the server, 1..%u (default %u)\n"
	       "    -o poll=busy|event|hybrid  completion polling (default hybrid:\n"
	       "                           spin 50 us, then sleep)\n"
	       "    -o entry_timeout=SECS  kernel name cache timeout (default 1)\n"
	       "    -o attr_timeout=SECS   kernel attribute cache timeout (default 1)\n"
	       "    -o reconnect_timeout=SECS|inf  how long to wait for a server that went\n"
	       "                           away before the filesystem fails (default %d;\n"
	       "                           0: fail at once; inf: wait forever). Meanwhile\n"
	       "                           requests wait and nothing dirty is dropped\n"
	       "    -o replicas=R          copies of each unit on distinct servers, 1..3\n"
	       "                           (default 2 with two or more servers, else 1;\n"
	       "                           a set keeps the number it was formatted with)\n"
	       "    -o ec=K+M              erasure-code instead: K data and M parity fragments\n"
	       "                           of each stripe on K+M distinct servers (K 2..8,\n"
	       "                           M 1..3): survives M lost servers for (K+M)/K the\n"
	       "                           memory; superblock and journal keep M+1 copies\n"
	       "    -o degraded            mount read-write although only a minority of the\n"
	       "                           member servers is up. Risk: another client that\n"
	       "                           reaches the other members may mount them too, and\n"
	       "                           the two copies of the filesystem then diverge\n"
	       "    -o ro                  mount read-only beside the writer (if any): any\n"
	       "                           number of machines (32 per pool) follow one\n"
	       "                           read-write mount. A reader sees only committed\n"
	       "                           states; a file opened after the writer's fsync()\n"
	       "                           and one refresh reads what it wrote; a read gives\n"
	       "                           bytes the file held at some committed moment or\n"
	       "                           an error, never another file's (rmemfs(8))\n"
	       "    -o refresh=SECS        -o ro: apply the writer's changes this often\n"
	       "                           (default 1, 0.05..60): the staleness bound\n"
	       "    -o default_permissions let the kernel check permissions (always on as root)\n"
	       "    -o allow_other         let other users in (always on as root)\n"
	       "    -h, --help             this text\n"
	       "    -V, --version          print versions\n"
	       "\n"
	       "Accepted and ignored (fstab): defaults, _netdev, auto, noauto, user, users,\n"
	       "nouser, owner, group, nofail, comment=..., x-systemd.* and other x-* options.\n"
	       "\n"
	       "FUSE options:\n",
	       prog, prog, PROTO_DEFAULT_PORT, cs, bs, ra, RING_DEFAULT_POLL_US, OPTIONS_MAX_QPS,
	       OPTIONS_DEFAULT_QPS,
	       OPTIONS_DEFAULT_RECONNECT_S);
	fflush(stdout);
	fuse_cmdline_help();
	fuse_lowlevel_help();
}
