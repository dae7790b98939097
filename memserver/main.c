/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * main.c - the memserver program: parse options, load the tenants, map the
 * default pool and adopt the backing dir's pools (registry.h), start the TCP
 * server and (when a device exists and the memlock limit allows it) the RDMA
 * server, print one ready line, wait for SIGINT/SIGTERM, tear down.
 *
 * Capacity: --capacity SIZE is the memory donated to every pool together;
 * without it the capacity is the default pool's size (named pools find no
 * room). --size (or --backing-file) makes a default pool: always without
 * --capacity, only when given with it.
 *
 * Transports: "tcp" serves TCP only; "auto" (the default) serves TCP and, when
 * an RDMA device exists and the pool can be pinned, RDMA as well; "rdma" is
 * auto that fails instead of falling back. TCP is served in every mode: it
 * also carries the out-of-band QP exchange of RDMA clients. The RDMA listener
 * uses the same port number (rdma_cm's port space is separate from TCP's).
 *
 * The signals are blocked in every thread and taken synchronously with
 * sigwaitinfo() here, so no handler ever runs in the middle of anything.
 */
#define G_LOG_DOMAIN "rmemfs-memserver"

#include <errno.h>
#include <getopt.h>
#include <glib.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include "config.h"
#include "memserver.h"
#include "net.h"
#include "notify.h"
#include "pool.h"
#include "proto.h"
#include "tcp_server.h"
#include "units.h"
#ifdef RMEM_HAVE_RDMA
#include "rdma_server.h"
#include "verbs.h"
#endif

#define MEMSERVER_EXIT_USAGE 2

enum memserver_transport {
	MEMSERVER_AUTO,
	MEMSERVER_TCP,
	MEMSERVER_RDMA,
};

struct memserver_opts {
	uint64_t size;
	bool size_set;
	uint64_t capacity; /* 0: not given */
	const char *token_dir;
	const char *backing_dir;
	uint64_t chunk_size;
	const char *listen;
	uint16_t port;
	enum memserver_transport transport;
	const char *token_file;
	const char *backing_file;
	int hugepages; /* the switches: getopt_long sets them */
	int mlock;
	int verbose;
	int insecure;
	unsigned int hello_timeout_s;
	unsigned int spin_us;
};

static void memserver_usage(FILE *f)
{
	fprintf(f,
		"usage: memserver [OPTION]...\n"
		"Serve a pool of this machine's memory to rmemfs clients over TCP and RDMA.\n"
		"\n"
		"  -s, --size SIZE          the default pool's size, K/M/G/T suffixes (default 1G;\n"
		"                           with --capacity: no default pool unless given)\n"
		"  -c, --capacity SIZE      memory donated to all pools together; clients create\n"
		"                           named pools in it (default: the default pool's size)\n"
		"  -l, --listen ADDR        address to listen on (default 127.0.0.1)\n"
		"  -p, --port PORT          TCP port, also the rdma_cm port (default %u;\n"
		"                           0: any free port)\n"
		"  -t, --transport T        tcp, rdma or auto (default auto: TCP, plus RDMA\n"
		"                           when a device exists; rdma: fail if RDMA cannot\n"
		"                           be served; TCP is served in every mode)\n"
		"  -k, --token-file FILE    the admin's token: it reaches every pool\n"
		"      --token-dir DIR      one token file per tenant, named after the tenant; a\n"
		"                           tenant creates and reaches only its own pools\n"
		"  -b, --backing-file FILE  keep the pool in FILE (mapped shared) so it\n"
		"                           survives a restart; created if missing or empty\n"
		"      --backing-dir DIR    keep each named pool in DIR/NAME.pool; at start every\n"
		"                           such file is served again\n"
		"  -H, --hugepages          back the pool with huge pages (reserve them first in\n"
		"                           /proc/sys/vm/nr_hugepages)\n"
		"      --mlock              lock all of memserver's memory (mlockall), so a\n"
		"                           memserver on the host it serves swap to is never\n"
		"                           swapped out itself\n"
		"      --chunk-size SIZE    split the pool into regions of SIZE, a power of two\n"
		"                           >= 1M (default 1G)\n"
		"      --insecure           allow a non-loopback --listen without a token\n"
		"      --hello-timeout SECS close a TCP connection that has not authenticated\n"
		"                           this long after connecting (default %u)\n"
		"      --spin-us USECS      a TCP connection thread polls its quiet socket this\n"
		"                           long before sleeping, so a client's next request is\n"
		"                           served without a wake-up (default %u; 0: never)\n"
		"  -v, --verbose            debug logging\n"
		"  -h, --help               this text\n"
		"  -V, --version            print the version\n"
		"\n"
		"When ready it prints one line to stdout, e.g.\n"
		"  memserver: serving 1.0 GiB on tcp 127.0.0.1:%u (rdma: no device)\n"
		"  memserver: serving 8.0 GiB capacity (default pool 1.0 GiB, 3 named pools) on tcp\n"
		"  127.0.0.1:%u (rdma: no device)\n",
		PROTO_DEFAULT_PORT, TCP_SERVER_HELLO_TIMEOUT_MS / 1000, TCP_SERVER_SPIN_US,
		PROTO_DEFAULT_PORT, PROTO_DEFAULT_PORT);
}

static int memserver_bad_size(const char *opt, const char *arg, int rc)
{
	if (rc == -ERANGE)
		fprintf(stderr, "memserver: %s '%s' is too large\n", opt, arg);
	else
		fprintf(stderr, "memserver: %s '%s' is not a size (use e.g. 512M, 4G)\n", opt,
			arg);
	return -EINVAL;
}

/* a whole-number option in [min, max]; what and range say what it must be */
static int memserver_uint(const char *opt, const char *arg, uint64_t min, uint64_t max,
			  const char *what, const char *range, uint64_t *out)
{
	if (units_parse_uint(arg, min, max, out) == 0)
		return 0;
	fprintf(stderr, "memserver: %s '%s' is not %s (%s)\n", opt, arg, what, range);
	return -EINVAL;
}

static void memserver_defaults(struct memserver_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->size = 1ULL << 30;
	o->chunk_size = POOL_DEFAULT_CHUNK;
	o->listen = "127.0.0.1";
	o->port = PROTO_DEFAULT_PORT;
	o->transport = MEMSERVER_AUTO;
	o->hello_timeout_s = TCP_SERVER_HELLO_TIMEOUT_MS / 1000;
	o->spin_us = TCP_SERVER_SPIN_US;
}

static int memserver_opt_chunk(struct memserver_opts *o, const char *arg)
{
	int rc = units_parse_size(arg, &o->chunk_size);

	if (rc)
		return memserver_bad_size("--chunk-size", arg, rc);
	if (o->chunk_size < POOL_MIN_CHUNK || (o->chunk_size & (o->chunk_size - 1))) {
		fprintf(stderr, "memserver: --chunk-size '%s' must be a power of two of at least 1M\n",
			arg);
		return -EINVAL;
	}
	return 0;
}

static int memserver_opt_transport(struct memserver_opts *o, const char *arg)
{
	if (!strcmp(arg, "tcp"))
		o->transport = MEMSERVER_TCP;
	else if (!strcmp(arg, "rdma"))
		o->transport = MEMSERVER_RDMA;
	else if (!strcmp(arg, "auto"))
		o->transport = MEMSERVER_AUTO;
	else {
		fprintf(stderr, "memserver: --transport '%s' is unknown: use tcp, rdma or auto\n",
			arg);
		return -EINVAL;
	}
	return 0;
}

enum { OPT_CHUNK_SIZE = 0x100, OPT_HELLO_TIMEOUT, OPT_SPIN_US, OPT_TOKEN_DIR, OPT_BACKING_DIR };

/* one option with a value; 0 or -EINVAL after saying what is wrong */
static int memserver_opt_value(struct memserver_opts *o, int c, const char *arg)
{
	uint64_t v;
	int rc;

	switch (c) {
	case 's':
		o->size_set = true;
		rc = units_parse_size(arg, &o->size);
		return rc ? memserver_bad_size("--size", arg, rc) : 0;
	case 'c':
		rc = units_parse_size(arg, &o->capacity);
		if (!rc && o->capacity < POOL_MIN_SIZE) {
			fprintf(stderr, "memserver: --capacity must be at least 1M\n");
			return -EINVAL;
		}
		return rc ? memserver_bad_size("--capacity", arg, rc) : 0;
	case OPT_TOKEN_DIR:
		o->token_dir = arg;
		return 0;
	case OPT_BACKING_DIR:
		o->backing_dir = arg;
		return 0;
	case OPT_CHUNK_SIZE:
		return memserver_opt_chunk(o, arg);
	case 'l':
		if (!*arg) {
			fprintf(stderr, "memserver: --listen needs an address\n");
			return -EINVAL;
		}
		o->listen = arg;
		return 0;
	case 'p':
		rc = memserver_uint("--port", arg, 0, 65535, "a port number",
				    "0-65535; 0 picks a free port", &v);
		o->port = (uint16_t)v;
		return rc;
	case 't':
		return memserver_opt_transport(o, arg);
	case 'k':
		o->token_file = arg;
		return 0;
	case 'b':
		o->backing_file = arg;
		return 0;
	case OPT_HELLO_TIMEOUT:
		rc = memserver_uint("--hello-timeout", arg, 1, 3600, "a number of seconds",
				    "1-3600", &v);
		o->hello_timeout_s = (unsigned int)v;
		return rc;
	case OPT_SPIN_US:
		rc = memserver_uint("--spin-us", arg, 0, 10000, "a number of microseconds",
				    "0-10000", &v);
		o->spin_us = (unsigned int)v;
		return rc;
	}
	return -EINVAL;
}

/* the combinations that cannot work; 0 or -EINVAL after saying why */
static int memserver_check(const struct memserver_opts *o)
{
	if (o->capacity && o->size_set && o->size > o->capacity) {
		fprintf(stderr, "memserver: --size is larger than --capacity (the default pool "
			"is part of the capacity)\n");
		return -EINVAL;
	}
	if (o->size < POOL_MIN_SIZE) {
		fprintf(stderr, "memserver: --size must be at least 1M\n");
		return -EINVAL;
	}
	if (o->hugepages && o->backing_file) {
		fprintf(stderr,
			"memserver: --hugepages and --backing-file cannot be combined (the "
			"backing file is mapped with normal pages)\n");
		return -EINVAL;
	}
#ifndef RMEM_HAVE_RDMA
	if (o->transport == MEMSERVER_RDMA) {
		fprintf(stderr,
			"memserver: --transport rdma: this memserver was built without RDMA "
			"(meson -Drdma=disabled, or rdma-core was missing)\n");
		return -EINVAL;
	}
#endif
	if (!net_is_loopback(o->listen) && !o->token_file && !o->token_dir && !o->insecure) {
		fprintf(stderr,
			"memserver: refusing to listen on %s without --token-file: anyone who can "
			"reach it could read and write the pool. Give a token (--token-file FILE "
			"or --token-dir DIR), listen on loopback, or pass --insecure.\n",
			o->listen);
		return -EINVAL;
	}
	return 0;
}

static int memserver_bad_option(int c, char **argv)
{
	if (c == ':')
		fprintf(stderr, "memserver: %s needs a value\n", argv[optind - 1]);
	else if (optopt)
		fprintf(stderr, "memserver: unknown option '-%c'\n", optopt);
	else
		fprintf(stderr, "memserver: unknown option '%s'\n", argv[optind - 1]);
	if (c != ':')
		fprintf(stderr, "Try 'memserver --help'.\n");
	return -EINVAL;
}

/*
 * The command line into *o: 0, or -EINVAL after printing what is wrong.
 * *done is set when --help or --version was answered (nothing to run).
 */
static int memserver_parse(int argc, char **argv, struct memserver_opts *o, bool *done)
{
	const struct option longopts[] = {
		{ "size", required_argument, NULL, 's' },
		{ "capacity", required_argument, NULL, 'c' },
		{ "token-dir", required_argument, NULL, OPT_TOKEN_DIR },
		{ "backing-dir", required_argument, NULL, OPT_BACKING_DIR },
		{ "listen", required_argument, NULL, 'l' },
		{ "port", required_argument, NULL, 'p' },
		{ "transport", required_argument, NULL, 't' },
		{ "token-file", required_argument, NULL, 'k' },
		{ "backing-file", required_argument, NULL, 'b' },
		{ "hugepages", no_argument, &o->hugepages, 1 },
		{ "chunk-size", required_argument, NULL, OPT_CHUNK_SIZE },
		{ "insecure", no_argument, &o->insecure, 1 },
		{ "mlock", no_argument, &o->mlock, 1 },
		{ "hello-timeout", required_argument, NULL, OPT_HELLO_TIMEOUT },
		{ "spin-us", required_argument, NULL, OPT_SPIN_US },
		{ "verbose", no_argument, &o->verbose, 1 },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	memserver_defaults(o);
	*done = false;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":s:c:l:p:t:k:b:HvhV", longopts, NULL)) != -1) {
		switch (c) {
		case 0: /* a switch */
			break;
		case 'H':
			o->hugepages = 1;
			break;
		case 'v':
			o->verbose = 1;
			break;
		case 'h':
			memserver_usage(stdout);
			*done = true;
			return 0;
		case 'V':
			printf("memserver (rmemfs) %s\n", RMEM_VERSION);
			*done = true;
			return 0;
		case ':':
		case '?':
			return memserver_bad_option(c, argv);
		default:
			if (memserver_opt_value(o, c, optarg))
				return -EINVAL;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "memserver: unexpected argument '%s'\n", argv[optind]);
		return -EINVAL;
	}
	return memserver_check(o);
}

static void memserver_setup_logging(bool verbose)
{
	/* stdout carries the ready line and nothing else */
	g_log_writer_default_set_use_stderr(TRUE);
	if (!verbose)
		return;
#if GLIB_CHECK_VERSION(2, 72, 0)
	g_log_set_debug_enabled(TRUE);
#else
	g_setenv("G_MESSAGES_DEBUG", "all", TRUE);
#endif
}

static int memserver_load_token(struct memserver *ms, const char *path)
{
	int rc;

	if (!path)
		return 0;
	rc = proto_token_load(path, ms->tenants.admin_hash);
	if (rc == -EINVAL)
		fprintf(stderr, "memserver: --token-file %s holds no token (it is empty)\n", path);
	else if (rc == -EFBIG)
		fprintf(stderr, "memserver: --token-file %s is larger than 4 KiB; a token is a "
			"short secret\n", path);
	else if (rc)
		fprintf(stderr, "memserver: cannot read --token-file %s: %s\n", path,
			g_strerror(-rc));
	else
		ms->tenants.have_admin = true;
	return rc;
}

/* the admin's token, then the tenants' (no token equal to another); 0, or -errno after saying why */
static int memserver_load_tokens(struct memserver *ms, const struct memserver_opts *o)
{
	char why[512];
	int rc = memserver_load_token(ms, o->token_file);

	if (rc || !o->token_dir)
		return rc;
	rc = tenant_load_dir(&ms->tenants, o->token_dir, why, sizeof(why));
	if (rc)
		fprintf(stderr, "memserver: %s\n", why);
	else if (!ms->tenants.ntenants)
		g_message("--token-dir %s holds no tenant yet", o->token_dir);
	return rc;
}

/* "host:port", bracketing IPv6 literals */
static void memserver_hostport(const char *host, unsigned int port, char *buf, size_t cap)
{
	snprintf(buf, cap, strchr(host, ':') ? "[%s]:%u" : "%s:%u", host, port);
}

#ifdef RMEM_HAVE_RDMA
/* true if this process holds CAP_IPC_LOCK (then RLIMIT_MEMLOCK does not apply) */
static bool memserver_has_ipc_lock(void)
{
	unsigned long long caps = 0;
	bool found = false;
	char line[256];
	FILE *f = fopen("/proc/self/status", "re");

	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f))
		found = sscanf(line, "CapEff: %llx", &caps) == 1;
	fclose(f);
	return found && (caps & (1ULL << 14)); /* CAP_IPC_LOCK */
}

/* 0 if the capacity can be pinned for RDMA; -ENOMEM after explaining how to raise the limit */
static int memserver_check_memlock(uint64_t size, bool fatal)
{
	char lim[32], need[32];
	struct rlimit rl;

	if (getrlimit(RLIMIT_MEMLOCK, &rl) < 0 || rl.rlim_cur == RLIM_INFINITY ||
	    rl.rlim_cur >= size || memserver_has_ipc_lock())
		return 0;
	units_format_size(rl.rlim_cur, lim, sizeof(lim));
	units_format_size(size, need, sizeof(need));
	fprintf(stderr,
		"memserver: the locked-memory limit (RLIMIT_MEMLOCK) is %s but RDMA must pin "
		"all %s of the pools. Raise it: run 'ulimit -l unlimited' (as root) in the shell that "
		"starts memserver, or add '* - memlock unlimited' to "
		"/etc/security/limits.conf, or set LimitMEMLOCK=infinity in its systemd unit.%s\n",
		lim, need, fatal ? "" : " Serving TCP only.");
	return -ENOMEM;
}

/*
 * Start the RDMA listener unless told not to. Fills @note with the ready
 * line's RDMA part. -errno only when RDMA was demanded and cannot be served.
 */
static int memserver_start_rdma(struct memserver *ms, const struct memserver_opts *o,
				uint16_t port, struct rdma_server **rs, char *note, size_t cap)
{
	bool fatal = o->transport == MEMSERVER_RDMA;
	struct verbs_device_list devs;
	char hp[96];
	int rc;

	*rs = NULL;
	if (o->transport == MEMSERVER_TCP) {
		snprintf(note, cap, " (rdma: off)");
		return 0;
	}
	rc = verbs_device_list_get(&devs);
	if (rc == 0)
		verbs_device_list_free(&devs);
	if (rc == -ENODEV)
		goto no_device;
	if (rc) {
		if (fatal) {
			fprintf(stderr, "memserver: cannot list RDMA devices: %s\n",
				g_strerror(-rc));
			return rc;
		}
		snprintf(note, cap, " (rdma: %s)", g_strerror(-rc));
		return 0;
	}
	rc = memserver_check_memlock(ms->reg.capacity, fatal);
	if (rc) {
		if (fatal)
			return rc;
		snprintf(note, cap, " (rdma: memlock limit too low)");
		return 0;
	}
	rc = rdma_server_start(ms, o->listen, port, rs);
	if (rc == -ENODEV)
		goto no_device;
	if (rc) {
		*rs = NULL;
		if (fatal) {
			fprintf(stderr, "memserver: cannot serve RDMA on %s port %u: %s\n",
				o->listen, port, g_strerror(-rc));
			return rc;
		}
		g_message("not serving RDMA: rdma_server_start on %s port %u: %s", o->listen,
			  port, g_strerror(-rc));
		snprintf(note, cap, " (rdma: %s)", g_strerror(-rc));
		return 0;
	}
	memserver_hostport(o->listen, port, hp, sizeof(hp));
	snprintf(note, cap, ", rdma %s (%s)", hp, rdma_server_devices(*rs));
	return 0;

no_device:
	if (fatal) {
		fprintf(stderr,
			"memserver: --transport rdma: this host has no RDMA device (see "
			"'ibv_devices'; for soft-RoCE: 'rdma link add rxe0 type rxe netdev "
			"IFACE')\n");
		return -ENODEV;
	}
	snprintf(note, cap, " (rdma: no device)");
	return 0;
}
#endif /* RMEM_HAVE_RDMA */

/* until SIGINT or SIGTERM: the exit status */
static int memserver_wait_for_signal(const sigset_t *set)
{
	siginfo_t si;
	int sig;

	do
		sig = sigwaitinfo(set, &si);
	while (sig < 0 && errno == EINTR);
	if (sig < 0) {
		g_warning("sigwaitinfo: %s; shutting down", g_strerror(errno));
		return EXIT_FAILURE;
	}
	g_message("%s received, shutting down", sig == SIGINT ? "SIGINT" : "SIGTERM");
	return EXIT_SUCCESS;
}

/* systemd's Type=notify: ready, with the ready line as the unit's status */
static void notify_ready(const char *what, const char *hp, const char *rdma_note)
{
	char *msg = g_strdup_printf("READY=1\nSTATUS=serving %s on tcp %s%s", what, hp,
				    rdma_note);
	int rc = notify_send(msg);

	if (rc < 0)
		g_warning("cannot tell the service manager we are ready ($NOTIFY_SOCKET): %s",
			  g_strerror(-rc));
	g_free(msg);
}

/* the ready line on stdout (what starts memservers waits for it) */
static void memserver_announce(const struct memserver *ms, const struct memserver_opts *o,
			       uint16_t port, const char *rdma_note)
{
	struct registry_pool *d = ms->reg.deflt;
	char what[160], size_str[32], cap_str[32], hp[96];
	unsigned int named = registry_named_count((struct registry *)&ms->reg);

	if (d)
		units_format_size(d->size, size_str, sizeof(size_str));
	units_format_size(ms->reg.capacity, cap_str, sizeof(cap_str));
	/* only a default pool: the form tests and scripts have always parsed */
	if (!o->capacity)
		snprintf(what, sizeof(what), "%s", size_str);
	else if (d)
		snprintf(what, sizeof(what), "%s capacity (default pool %s, %u named pool%s)",
			 cap_str, size_str, named, named == 1 ? "" : "s");
	else
		snprintf(what, sizeof(what), "%s capacity (no default pool, %u named pool%s)",
			 cap_str, named, named == 1 ? "" : "s");
	memserver_hostport(o->listen, port, hp, sizeof(hp));
	printf("memserver: serving %s on tcp %s%s\n", what, hp, rdma_note);
	fflush(stdout);
	notify_ready(what, hp, rdma_note);
	if (d)
		g_debug("default pool_id %016" PRIx64 ", %u region(s) of up to %" PRIu64
			" bytes%s", pool_id(d->pool), pool_region_count(d->pool),
			pool_chunk_size(d->pool), o->backing_file ? ", backing file" : "");
	g_debug("%s; %u tenant(s)", tenant_open_to_all(&ms->tenants) ? "no token required" :
		"tokens required", ms->tenants.ntenants);
}

/* the default pool (when there is one) into the registry; 0, or -errno after saying why */
static int memserver_open_default(struct memserver *ms, const struct memserver_opts *o)
{
	struct pool_params pp = {
		.size = o->size,
		.chunk_size = o->chunk_size,
		.hugepages = o->hugepages,
		.backing_file = o->backing_file,
	};
	struct pool *pool;
	char why[512];
	int rc;

	if (o->capacity && !o->size_set && !o->backing_file)
		return 0;
	rc = pool_open(&pp, &pool, why, sizeof(why));
	if (rc) {
		fprintf(stderr, "memserver: %s\n", why[0] ? why : g_strerror(-rc));
		return rc;
	}
	rc = registry_add(&ms->reg, pool, true, NULL);
	if (rc)
		fprintf(stderr, "memserver: cannot serve the default pool: %s\n", g_strerror(-rc));
	return rc;
}

/*
 * The pools: the default one, then the backing dir's; resident (and locked
 * with --mlock). 0, or -errno after saying why.
 */
static int memserver_open_pools(struct memserver *ms, const struct memserver_opts *o)
{
	char why[512];
	int rc = memserver_open_default(ms, o);

	if (rc)
		return rc;
	if (o->backing_dir) {
		rc = registry_adopt_dir(&ms->reg, why, sizeof(why));
		if (rc) {
			fprintf(stderr, "memserver: %s\n", why);
			return rc;
		}
	}
	/* the pool is resident now; MCL_FUTURE also locks each connection's stack */
	if (o->mlock && mlockall(MCL_CURRENT | MCL_FUTURE) < 0) {
		rc = -errno;
		fprintf(stderr, "memserver: --mlock: mlockall: %s (needs CAP_IPC_LOCK or 'ulimit -l' above the pool size)\n",
			g_strerror(-rc));
		return rc;
	}
	return 0;
}

/* the TCP listener (not serving yet); 0, or -errno after saying why */
static int memserver_listen_tcp(struct memserver *ms, const struct memserver_opts *o,
				struct tcp_server **ts)
{
	int rc = tcp_server_create(ms, o->listen, o->port, ts);

	if (rc == -EADDRINUSE)
		fprintf(stderr,
			"memserver: port %u on %s is already in use (another memserver?); pick "
			"another with --port\n",
			o->port, o->listen);
	else if (rc == -EADDRNOTAVAIL || rc == -ENOENT)
		fprintf(stderr, "memserver: cannot listen on %s: %s\n", o->listen,
			rc == -ENOENT ? "no such host" : "this host has no such address");
	else if (rc)
		fprintf(stderr, "memserver: cannot listen on %s port %u: %s\n", o->listen, o->port,
			g_strerror(-rc));
	if (rc)
		return rc;
	tcp_server_set_hello_timeout(*ts, (int)o->hello_timeout_s * 1000);
	tcp_server_set_spin(*ts, o->spin_us);
	return 0;
}

int main(int argc, char **argv)
{
	char rdma_note[160] = "";
	struct memserver_opts o;
	struct memserver ms;
	struct tcp_server *ts = NULL;
#ifdef RMEM_HAVE_RDMA
	struct rdma_server *rs = NULL;
#endif
	sigset_t sigs;
	int rc, status = EXIT_FAILURE;
	bool done;

	if (memserver_parse(argc, argv, &o, &done) < 0)
		return MEMSERVER_EXIT_USAGE;
	if (done)
		return EXIT_SUCCESS;
#ifndef RMEM_HAVE_RDMA
	if (o.transport != MEMSERVER_TCP)
		snprintf(rdma_note, sizeof(rdma_note), " (rdma: not built)");
	else
		snprintf(rdma_note, sizeof(rdma_note), " (rdma: off)");
#endif
	memserver_setup_logging(o.verbose);

	/* every thread started from here on inherits the blocked set */
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);
	signal(SIGPIPE, SIG_IGN);

	memset(&ms, 0, sizeof(ms));
	ms.verbose = o.verbose;
	if (memserver_load_tokens(&ms, &o)) {
		tenant_set_clear(&ms.tenants);
		return EXIT_FAILURE;
	}
	memserver_fence_init(&ms);
	registry_init(&ms.reg, o.capacity ? o.capacity : o.size, o.chunk_size, o.hugepages,
		      o.backing_dir, &ms.tenants);

	if (memserver_open_pools(&ms, &o))
		goto close_pools;
	if (memserver_listen_tcp(&ms, &o, &ts))
		goto close_pools;

#ifdef RMEM_HAVE_RDMA
	rc = memserver_start_rdma(&ms, &o, tcp_server_port(ts), &rs, rdma_note,
				  sizeof(rdma_note));
	if (rc)
		goto close_tcp;
#endif
	rc = tcp_server_run(ts);
	if (rc) {
		fprintf(stderr, "memserver: cannot start the TCP server: %s\n", g_strerror(-rc));
		goto stop_rdma;
	}

	memserver_announce(&ms, &o, tcp_server_port(ts), rdma_note);
	status = memserver_wait_for_signal(&sigs);
	notify_send("STOPPING=1");

	/* teardown in reverse order; client threads go before RDMA (they hold oob handles) */
	tcp_server_destroy(ts);
	ts = NULL;
stop_rdma:
#ifdef RMEM_HAVE_RDMA
	rdma_server_stop(rs);
close_tcp:
#endif
	tcp_server_destroy(ts);
close_pools:
	registry_destroy(&ms.reg); /* flushes the backing files */
	memserver_fence_destroy(&ms);
	tenant_set_clear(&ms.tenants);
	return status;
}
