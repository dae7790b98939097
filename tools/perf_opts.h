/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * perf_opts.h - rmem-perf's command line: defaults, parsing, and the checks of
 * each value and of their combinations, each with its own message.
 */
#ifndef RMEM_PERF_OPTS_H
#define RMEM_PERF_OPTS_H

#include <stdbool.h>
#include <stdint.h>

#include "xport.h"

#define PERF_DEFAULT_SIZE 4096U
#define PERF_DEFAULT_ITERS 5000U
#define PERF_MAX_QD 1024U
#define PERF_MAX_THREADS 256U
#define PERF_MAX_OPS 4

struct perf_opts {
	char *host;
	uint16_t port; /* 0: PROTO_DEFAULT_PORT */
	char *pool; /* the server's named pool (SERVER/NAME); NULL: its default pool */
	const char *transport;
	const char *token_file;
	enum xport_op_type ops[PERF_MAX_OPS];
	unsigned int nops;
	uint32_t size_min, size_max;
	bool sweep, size_set;
	unsigned int qd, threads;
	uint64_t iters;
	bool iters_set;
	double duration_s;
	int64_t warmup; /* -1: default */
	bool verify;
	enum xport_poll_mode poll;
	const char *poll_name;
	bool json;
	uint64_t region; /* 0: default */
	uint64_t seed;
	bool seed_set;
	int timeout_ms; /* 0: transport default */
};

/*
 * Parse argv into o (defaults first). 0; 1 after printing --help (exit 0);
 * -EINVAL after printing what is wrong and a hint. Release o with
 * perf_opts_clear() whatever the result (it may hold an allocated host).
 */
int perf_opts_parse(int argc, char **argv, struct perf_opts *o);
void perf_opts_clear(struct perf_opts *o);

/*
 * The READ/WRITE sizes of the run (--size, or the --sweep powers of two) into
 * sizes[]; returns how many were stored, at most cap.
 */
unsigned int perf_opts_sizes(const struct perf_opts *o, uint32_t *sizes, unsigned int cap);
bool perf_op_is_atomic(enum xport_op_type op);

#endif /* RMEM_PERF_OPTS_H */
