/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * options.h - the rmemfs command line.
 *
 *   rmemfs SERVER[:PORT][/NAME][,SERVER[:PORT][/NAME]...] MOUNTPOINT [-f] [-d] [-s] [-o OPTIONS]
 *   rmemfs NAME MOUNTPOINT -o donors=FILE [...]
 *
 * options.c owns one fuse_opt table (offsetof into struct options), sets the
 * defaults before parsing, validates every value with a specific message,
 * discards fstab noise (_netdev, defaults, nofail, x-systemd.*...) so the line
 * mount.fuse3 builds from /etc/fstab is accepted, and leaves libfuse's own
 * options (allow_other, default_permissions, ro, fsname=...) in `args` for
 * fuse_session_new(). main.c consumes the result.
 */
#ifndef RMEM_OPTIONS_H
#define RMEM_OPTIONS_H

#include <stdbool.h>
#include <stdint.h>

#include <fuse_lowlevel.h>

#include "remote.h"
#include "ring.h"
#include "xport.h"

/* cache_size default: RAM / OPTIONS_CACHE_RAM_DIV, within these bounds */
#define OPTIONS_CACHE_RAM_DIV 16
#define OPTIONS_MIN_DEFAULT_CACHE_SIZE (64ULL << 20)
#define OPTIONS_MAX_DEFAULT_CACHE_SIZE (1ULL << 30)
#define OPTIONS_DEFAULT_BLOCK_SIZE (64U << 10)
#define OPTIONS_DEFAULT_READAHEAD (4ULL << 20)
#define OPTIONS_DEFAULT_QPS 4U
#define OPTIONS_MAX_QPS 64U
#define OPTIONS_MAX_URING_POLL_US 10000U /* -o uring_poll=: 10 ms */
#define OPTIONS_DEFAULT_TIMEOUT 1.0 /* entry_timeout / attr_timeout, seconds */
#define OPTIONS_DEFAULT_RECONNECT_S 60 /* reconnect_timeout, seconds */
#define OPTIONS_DEFAULT_CACHE_IDLE_S 30 /* cache_idle, seconds */
/* -o swap defaults (docs/ARCHITECTURE.md, "Serving swap", says why) */
#define OPTIONS_SWAP_CACHE_SIZE (4ULL << 20)
#define OPTIONS_SWAP_BLOCK_SIZE (4U << 10)
#define OPTIONS_SWAP_MAX_THREADS 8U /* FUSE workers: each a locked stack and request buffer */

struct options {
	/*
	 * SERVER[:PORT][/NAME][,...] split; IPv6 literals without brackets.
	 * With donors= the servers are chosen (or found) by donors.h: main.c
	 * fills them in, and server is the pool NAME.
	 */
	char *server; /* as given on the command line */
	struct remote_server servers[REMOTE_MAX_SERVERS];
	unsigned int nservers;
	char *donors; /* -o donors=FILE: the candidate memservers */
	char *mountpoint; /* from fuse_parse_cmdline (malloc'd by libfuse) */

	/* raw -o values captured by fuse_opt (malloc'd), validated into the fields below */
	char *transport; /* "auto" | "tcp" | "rdma" */
	char *token_file;
	char *cache_size_str;
	char *block_size_str;
	char *qps_str;
	char *poll_str;
	char *readahead_str;
	char *writeback_str;
	char *writeback_cache_str;
	char *odirect_str;
	char *uring_str;
	char *uring_poll_str;
	char *entry_timeout_str;
	char *attr_timeout_str;
	char *reconnect_timeout_str;
	char *refresh_str;
	char *cache_idle_str;
	char *replicas_str;
	char *ec_str; /* "K+M" */
	char *size_str; /* -o size=: each named pool's size if format creates it */
	int degraded; /* -o degraded: read-write without a majority of the members */
	int direct_io;
	int format;
	int swap; /* -o swap: serve a swap device (swapmode.h) */
	int read_only; /* -o ro seen (also passed on to libfuse) */
	int default_permissions; /* -o default_permissions seen or added for root */
	int show_help;
	int show_version;

	/* validated values */
	uint64_t cache_size;
	uint32_t block_size; /* block cache granularity */
	unsigned int qps;
	enum xport_poll_mode poll_mode;
	uint64_t readahead; /* the block cache's largest readahead window; 0: none */
	bool writeback; /* the block cache writes back later (else through) */
	bool writeback_cache; /* the kernel's writeback cache */
	bool odirect_uncached; /* O_DIRECT opens may be FOPEN_DIRECT_IO (ops.c) */
	enum ring_mode uring; /* the FUSE channel (ring.h) */
	unsigned int uring_poll_us; /* a ring thread polls this long before it sleeps */
	double entry_timeout;
	double attr_timeout;
	int reconnect_timeout_ms; /* -1: wait forever */
	unsigned int refresh_ms; /* -o ro: how often the writer's changes are applied */
	unsigned int cache_idle_ms; /* the cache gives memory back after this long idle; 0: never */
	unsigned int replicas; /* 0: the default (remote.h) */
	unsigned int ec_k, ec_m; /* -o ec=K+M; 0, 0: none (copies) */
	uint64_t pool_size; /* -o size=: 0 when not given */

	/* from fuse_parse_cmdline */
	int foreground;
	int debug;
	int singlethread;
	int clone_fd;
	unsigned int max_idle_threads;
	unsigned int max_threads;

	int nonopt_count; /* positional arguments seen so far (parser state) */
	struct fuse_args args; /* what is left for fuse_session_new() */
};

/* the default cache_size on this machine: RAM / 16 within [64 MiB, 1 GiB] */
uint64_t options_default_cache_size(void);

/*
 * Parse argv into o (o is initialised here; free it with options_free).
 * Prints a specific message to stderr for every error and returns -EINVAL;
 * returns 0 on success (also when --help or --version was asked for: check
 * show_help / show_version).
 */
int options_parse(struct options *o, int argc, char **argv);
void options_free(struct options *o);
/* the usage text of rmemfs followed by libfuse's own option help */
void options_print_help(const char *prog);

#endif /* RMEM_OPTIONS_H */
