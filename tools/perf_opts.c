// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * perf_opts.c - rmem-perf's command line (see perf_opts.h). getopt_long with
 * our own messages: every rejected value names the option, what was given
 * and what is accepted; the usage hint follows on a second line.
 */
#define G_LOG_DOMAIN "rmemfs-perf"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <glib.h>

#include "perf_opts.h"
#include "net.h"
#include "proto.h"
#include "units.h"

/* clang-format off */
static const char usage_text[] =
	"Usage: rmem-perf [SERVER[:PORT][/NAME]] [OPTIONS]\n"
	"\n"
	"Measure one-sided READ / WRITE / CAS / FETCH_ADD against a memserver, like\n"
	"perftest's ib_read_bw and ib_read_lat. SERVER defaults to 127.0.0.1, PORT to 7471;\n"
	"an IPv6 address goes in brackets: [::1]:7471. /NAME: the server's pool NAME\n"
	"(it must exist) instead of its default pool.\n"
	"\n"
	"  --transport tcp|rdma|auto  transport (default auto: RDMA if a device reaches\n"
	"                             the server, else TCP)\n"
	"  --token-file FILE          token the memserver was started with\n"
	"  --op read|write|cas|fadd|all  operation(s), comma-separated list allowed\n"
	"                             (default read; cas/fadd always move 8 bytes)\n"
	"  --size N                   bytes per READ/WRITE, K/M suffixes (default 4096)\n"
	"  --sweep MIN:MAX            every power of two from MIN to MAX instead of --size\n"
	"  --qd N                     ops in flight per thread (default 1)\n"
	"  --threads N                threads, each with its own connection (default 1)\n"
	"  --iters N                  measured ops per thread and row (default 5000)\n"
	"  --duration SECS            measure for this long per row instead of --iters\n"
	"  --warmup N                 warm-up ops per thread before each row, excluded from\n"
	"                             the figures (default max(2*qd, min(iters/10, 1000)))\n"
	"  --verify                   check data end to end: WRITE a pattern derived from\n"
	"                             (offset, pass, seed) and READ it back; exact CAS chains\n"
	"                             and FETCH_ADD sums; exit 1 on any mismatch\n"
	"  --seed N                   pattern seed (default: random, printed)\n"
	"  --poll busy|event|hybrid   how to wait for completions (default busy)\n"
	"  --region BYTES             how much of the pool to use, from its start\n"
	"                             (default min(pool, 256M)); split between threads\n"
	"  --timeout MS               fail an op with no progress for this long\n"
	"                             (default: the transport's, 10000)\n"
	"  --json                     print the results as one JSON document\n"
	"  --help                     this text\n"
	"\n"
	"Columns: size(B) bytes per op; iters measured ops completed (all threads);\n"
	"MiB/s and Mops over the measured wall time; latency from post to completion.\n"
	"Exit status: 0 on success, 1 on any error or verify mismatch.\n";
/* clang-format on */

static int G_GNUC_PRINTF(1, 2) usage_error(const char *fmt, ...)
{
	va_list ap;
	char *msg;

	va_start(ap, fmt);
	msg = g_strdup_vprintf(fmt, ap);
	va_end(ap);
	g_printerr("rmem-perf: %s\nTry 'rmem-perf --help'.\n", msg);
	g_free(msg);
	return -EINVAL;
}

static int parse_uint(const char *opt, const char *arg, uint64_t min, uint64_t max, uint64_t *out)
{
	int rc = units_parse_uint(arg, min, max, out);

	if (rc == -ERANGE)
		return usage_error("%s: %s is out of range (expected %" PRIu64 "..%" PRIu64 ")", opt,
				   arg, min, max);
	if (rc)
		return usage_error("%s: '%s' is not a number (expected %" PRIu64 "..%" PRIu64 ")",
				   opt, arg, min, max);
	return 0;
}

static int parse_size_arg(const char *opt, const char *arg, uint64_t min, uint64_t max,
			  uint64_t *out)
{
	int rc = units_parse_size(arg, out);

	if (rc)
		return usage_error("%s: '%s' is not a size (bytes, or with a K/M/G suffix)", opt,
				   arg);
	if (*out < min && max == UINT64_MAX)
		return usage_error("%s: %s is too small (at least %" PRIu64 " bytes)", opt, arg,
				   min);
	if (*out < min || *out > max)
		return usage_error("%s: %s is out of range (%" PRIu64 "..%" PRIu64 " bytes)", opt,
				   arg, min, max);
	return 0;
}

static int parse_ops(const char *arg, struct perf_opts *o)
{
	static const struct {
		const char *name;
		enum xport_op_type op;
	} names[] = {
	    {"read", XPORT_READ},
	    {"write", XPORT_WRITE},
	    {"cas", XPORT_CAS},
	    {"fadd", XPORT_FETCH_ADD},
	};
	char **parts = g_strsplit(arg, ",", -1);
	unsigned int i, j, k;
	int rc = 0;

	o->nops = 0;
	for (i = 0; parts[i] && !rc; i++) {
		bool all = !strcmp(parts[i], "all"), found = all;

		for (j = 0; j < G_N_ELEMENTS(names); j++) {
			if (!all && strcmp(parts[i], names[j].name))
				continue;
			found = true;
			for (k = 0; k < o->nops && o->ops[k] != names[j].op; k++)
				;
			if (k == o->nops)
				o->ops[o->nops++] = names[j].op;
		}
		if (!found)
			rc = usage_error("--op: unknown operation '%s' (expected read, write, cas, "
					 "fadd or all)",
					 parts[i]);
	}
	if (!rc && !o->nops)
		rc = usage_error("--op: no operation given");
	g_strfreev(parts);
	return rc;
}

static int parse_sweep(const char *arg, struct perf_opts *o)
{
	const char *colon = strchr(arg, ':');
	uint64_t lo, hi;
	char *min;
	int rc;

	if (!colon)
		return usage_error("--sweep: expected MIN:MAX, e.g. 8:1M, got '%s'", arg);
	min = g_strndup(arg, colon - arg);
	rc = parse_size_arg("--sweep MIN", min, 1, PROTO_MAX_IO, &lo);
	g_free(min);
	if (rc)
		return rc;
	rc = parse_size_arg("--sweep MAX", colon + 1, 1, PROTO_MAX_IO, &hi);
	if (rc)
		return rc;
	if (lo & (lo - 1))
		return usage_error("--sweep: MIN %" PRIu64 " is not a power of two", lo);
	if (hi & (hi - 1))
		return usage_error("--sweep: MAX %" PRIu64 " is not a power of two", hi);
	if (lo > hi)
		return usage_error("--sweep: MIN %" PRIu64 " is above MAX %" PRIu64, lo, hi);
	o->size_min = (uint32_t)lo;
	o->size_max = (uint32_t)hi;
	o->sweep = true;
	return 0;
}

static int parse_server(const char *arg, struct perf_opts *o)
{
	const char *why;
	uint16_t port;

	g_free(o->host);
	g_free(o->pool);
	if (net_parse_server_pool(arg, &o->host, &port, &o->pool, &why) == 0) {
		if (port)
			o->port = port;
		return 0;
	}
	return usage_error("server '%s': expected [ADDRESS], [ADDRESS]:PORT, HOST or HOST:PORT, "
			   "then /NAME for a named pool: it is %s", arg, why);
}

enum {
	OPT_TRANSPORT = 256,
	OPT_TOKEN_FILE,
	OPT_OP,
	OPT_SIZE,
	OPT_SWEEP,
	OPT_QD,
	OPT_THREADS,
	OPT_ITERS,
	OPT_DURATION,
	OPT_WARMUP,
	OPT_VERIFY,
	OPT_SEED,
	OPT_POLL,
	OPT_JSON,
	OPT_REGION,
	OPT_TIMEOUT,
	OPT_HELP,
};

static const struct option long_options[] = {
    {"transport", required_argument, NULL, OPT_TRANSPORT},
    {"token-file", required_argument, NULL, OPT_TOKEN_FILE},
    {"op", required_argument, NULL, OPT_OP},
    {"size", required_argument, NULL, OPT_SIZE},
    {"sweep", required_argument, NULL, OPT_SWEEP},
    {"qd", required_argument, NULL, OPT_QD},
    {"threads", required_argument, NULL, OPT_THREADS},
    {"iters", required_argument, NULL, OPT_ITERS},
    {"duration", required_argument, NULL, OPT_DURATION},
    {"warmup", required_argument, NULL, OPT_WARMUP},
    {"verify", no_argument, NULL, OPT_VERIFY},
    {"seed", required_argument, NULL, OPT_SEED},
    {"poll", required_argument, NULL, OPT_POLL},
    {"json", no_argument, NULL, OPT_JSON},
    {"region", required_argument, NULL, OPT_REGION},
    {"timeout", required_argument, NULL, OPT_TIMEOUT},
    {"help", no_argument, NULL, OPT_HELP},
    {NULL, 0, NULL, 0},
};

static void perf_defaults(struct perf_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->transport = "auto";
	o->ops[0] = XPORT_READ;
	o->nops = 1;
	o->size_min = o->size_max = PERF_DEFAULT_SIZE;
	o->qd = 1;
	o->threads = 1;
	o->iters = PERF_DEFAULT_ITERS;
	o->warmup = -1;
	o->poll = XPORT_POLL_BUSY;
	o->poll_name = "busy";
}

/* the whole-number options and the values each accepts */
static const struct perf_num_opt {
	int c;
	const char *name;
	uint64_t min, max;
} num_opts[] = {
	{ OPT_QD, "--qd", 1, PERF_MAX_QD },
	{ OPT_THREADS, "--threads", 1, PERF_MAX_THREADS },
	{ OPT_ITERS, "--iters", 1, 1ULL << 40 },
	{ OPT_WARMUP, "--warmup", 0, 1ULL << 40 },
	{ OPT_SEED, "--seed", 0, UINT64_MAX },
	{ OPT_TIMEOUT, "--timeout", 1, 3600000 },
};

/* a whole-number option (or an unknown one); 0, or -EINVAL after a usage message */
static int perf_opt_number(struct perf_opts *o, int c, char **argv)
{
	const struct perf_num_opt *n;
	uint64_t v;
	int rc;

	for (n = num_opts; n < num_opts + G_N_ELEMENTS(num_opts) && n->c != c; n++)
		;
	if (n == num_opts + G_N_ELEMENTS(num_opts))
		return usage_error("unknown option '%s'", argv[optind - 1]);
	rc = parse_uint(n->name, optarg, n->min, n->max, &v);
	if (rc)
		return rc;
	switch (c) {
	case OPT_QD:
		o->qd = (unsigned int)v;
		break;
	case OPT_THREADS:
		o->threads = (unsigned int)v;
		break;
	case OPT_ITERS:
		o->iters = v;
		o->iters_set = true;
		break;
	case OPT_WARMUP:
		o->warmup = (int64_t)v;
		break;
	case OPT_SEED:
		o->seed = v;
		o->seed_set = true;
		break;
	default:
		o->timeout_ms = (int)v;
	}
	return 0;
}

/* one option (c from getopt_long); 0, 1 after --help, or -EINVAL after a usage message */
static int perf_opt(struct perf_opts *o, int c, char **argv, bool *duration_set)
{
	uint64_t v;
	char *end;
	int rc = 0;

	switch (c) {
	case OPT_TRANSPORT:
		if (strcmp(optarg, "tcp") && strcmp(optarg, "rdma") &&
		    strcmp(optarg, "auto"))
			return usage_error("--transport: '%s' is not tcp, rdma or auto",
					   optarg);
		o->transport = optarg;
		break;
	case OPT_TOKEN_FILE:
		o->token_file = optarg;
		break;
	case OPT_OP:
		rc = parse_ops(optarg, o);
		break;
	case OPT_SIZE:
		rc = parse_size_arg("--size", optarg, 1, PROTO_MAX_IO, &v);
		o->size_min = o->size_max = (uint32_t)v;
		o->size_set = true;
		break;
	case OPT_SWEEP:
		rc = parse_sweep(optarg, o);
		break;
	case OPT_DURATION:
		o->duration_s = g_ascii_strtod(optarg, &end);
		if (!optarg[0] || *end || !(o->duration_s > 0.0) || o->duration_s > 86400.0)
			return usage_error("--duration: '%s' is not a number of seconds in "
					   "(0, 86400]",
					   optarg);
		*duration_set = true;
		break;
	case OPT_VERIFY:
		o->verify = true;
		break;
	case OPT_POLL:
		if (xport_poll_mode_parse(optarg, &o->poll))
			return usage_error("--poll: '%s' is not busy, event or hybrid",
					   optarg);
		o->poll_name = optarg;
		break;
	case OPT_JSON:
		o->json = true;
		break;
	case OPT_REGION:
		rc = parse_size_arg("--region", optarg, 4096, UINT64_MAX, &o->region);
		break;
	case 'h':
	case OPT_HELP:
		fputs(usage_text, stdout);
		return 1;
	case ':':
		return usage_error("option '%s' needs a value", argv[optind - 1]);
	default:
		return perf_opt_number(o, c, argv);
	}
	return rc;
}

/* the server and the combinations, after the options */
static int perf_finish(struct perf_opts *o, int argc, char **argv, bool duration_set)
{
	int rc;

	if (optind < argc) {
		rc = parse_server(argv[optind++], o);
		if (rc)
			return rc;
	}
	if (optind < argc)
		return usage_error("unexpected argument '%s' (one SERVER[:PORT] at most)",
				   argv[optind]);
	if (!o->host)
		o->host = g_strdup("127.0.0.1");
	if (o->sweep && o->size_set)
		return usage_error("--size and --sweep are mutually exclusive");
	if (duration_set && o->iters_set)
		return usage_error("--iters and --duration are mutually exclusive");
	if (duration_set)
		o->iters = 0;
	if (o->warmup < 0) {
		uint64_t w = o->iters ? MIN(o->iters / 10, 1000) : 1000;

		o->warmup = (int64_t)MAX(w, 2ULL * o->qd);
	}
	return 0;
}

int perf_opts_parse(int argc, char **argv, struct perf_opts *o)
{
	bool duration_set = false;
	int c, rc = 0;

	perf_defaults(o);
	opterr = 0;
	while (!rc && (c = getopt_long(argc, argv, ":h", long_options, NULL)) != -1)
		rc = perf_opt(o, c, argv, &duration_set);
	return rc ? rc : perf_finish(o, argc, argv, duration_set);
}

void perf_opts_clear(struct perf_opts *o)
{
	g_free(o->host);
	g_free(o->pool);
	o->host = NULL;
	o->pool = NULL;
}

bool perf_op_is_atomic(enum xport_op_type op)
{
	return op == XPORT_CAS || op == XPORT_FETCH_ADD;
}

unsigned int perf_opts_sizes(const struct perf_opts *o, uint32_t *sizes, unsigned int cap)
{
	uint64_t size = o->size_min;
	unsigned int n = 0;

	do {
		sizes[n++] = (uint32_t)size;
		size *= 2;
	} while (o->sweep && size <= o->size_max && n < cap);
	return n;
}
