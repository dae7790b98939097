// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * metabench.c - the metadata job of scripts/bench.sh: create, stat or unlink
 * many small files in one directory and report ops/s and per-op latency.
 *
 *   metabench DIR PHASE [-n FILES] [-s BYTES] [-t SECS]
 *
 * PHASE is one of
 *   create  open(O_CREAT|O_EXCL|O_WRONLY) + write BYTES + close, for each file
 *   stat    stat() each file
 *   unlink  unlink() each file
 * Files are DIR/f0000000 .. DIR/f<FILES-1>. Phases run separately so that the
 * caller can make caches cold in between (remount, drop_caches). A phase stops
 * early after SECS seconds (0: no limit); the JSON then says "partial": true
 * and "ops" holds how many files it did, which the caller passes to the next
 * phase as -n. With -d N the kernel's dentry and inode caches are dropped
 * (drop_caches=2, needs root) after every N files, outside the timed
 * operations and the time limit: a FUSE daemon that holds a descriptor per
 * inode the kernel knows (passthrough_ll) then gets FORGETs and stays under
 * its descriptor limit. One JSON object goes to stdout:
 *   {"phase": .., "files": .., "ops": .., "errors": .., "first_error": "..",
 *    "elapsed_s": .., "ops_s": .., "lat_mean_us": .., "lat_p50_us": ..,
 *    "lat_p99_us": .., "lat_max_us": .., "partial": false}
 * and, for create, the mean of each step of an operation: "open_us",
 * "write_us", "close_us" (where a create's time goes, docs/PERFORMANCE.md).
 * A failed operation stops the phase and counts in "errors" (exit status 1).
 *
 * Built by bench.sh into its build directory with gcc -O2; not part of meson.
 */
#define _GNU_SOURCE

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"

#define METABENCH_NAME_MAX 32

enum metabench_phase {
	METABENCH_CREATE,
	METABENCH_STAT,
	METABENCH_UNLINK,
};


static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* write all of buf to fd; returns 0 or -errno */
static int write_all(int fd, const char *buf, size_t len)
{
	while (len > 0) {
		ssize_t n = write(fd, buf, len);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

enum metabench_step {
	METABENCH_OPEN,
	METABENCH_WRITE,
	METABENCH_CLOSE,
	METABENCH_STEPS
};

/*
 * one operation of the phase on path; returns 0 or -errno. A create adds
 * the time of its open, write and close to step_ns[].
 */
static int do_one(enum metabench_phase phase, const char *path, const char *data, size_t size,
		  uint64_t *step_ns)
{
	uint64_t t0, t1, t2;
	struct stat st;
	int fd, rc;

	switch (phase) {
	case METABENCH_CREATE:
		t0 = clock_now_ns();
		fd = open(path, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
		if (fd < 0)
			return -errno;
		t1 = clock_now_ns();
		rc = size ? write_all(fd, data, size) : 0;
		t2 = clock_now_ns();
		if (close(fd) < 0 && rc == 0)
			rc = -errno;
		step_ns[METABENCH_OPEN] += t1 - t0;
		step_ns[METABENCH_WRITE] += t2 - t1;
		step_ns[METABENCH_CLOSE] += clock_now_ns() - t2;
		return rc;
	case METABENCH_STAT:
		if (stat(path, &st) < 0)
			return -errno;
		return (size_t)st.st_size == size || size == 0 ? 0 : -EBADMSG;
	case METABENCH_UNLINK:
		return unlink(path) < 0 ? -errno : 0;
	}
	return -EINVAL;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: metabench DIR create|stat|unlink [-n FILES] [-s BYTES] [-t SECS] [-d N]\n"
		   "  -n FILES  how many files (default 100000)\n"
		   "  -s BYTES  bytes written per file by create, checked by stat (default 4096)\n"
		   "  -t SECS   stop the phase after SECS seconds (default 0: no limit)\n"
		   "  -d N      drop the kernel's dentry and inode caches after every N files,\n"
		   "            untimed (default 0: never; needs root)\n");
}

static int parse_u64(const char *s, uint64_t *out)
{
	char *end;

	errno = 0;
	*out = strtoull(s, &end, 10);
	return errno || end == s || *end || s[0] == '-' ? -EINVAL : 0;
}

struct metabench_args {
	const char *dir;
	enum metabench_phase phase;
	uint64_t files, size, limit_s, drop_every;
};

static const char *const phase_names[] = { "create", "stat", "unlink" };

/* 0, 1 after -h, or -EINVAL after the usage */
static int parse_args(int argc, char **argv, struct metabench_args *a)
{
	unsigned int i;
	int opt;

	a->files = 100000;
	a->size = 4096;
	a->limit_s = 0;
	a->drop_every = 0;
	if (argc < 3)
		goto usage;
	a->dir = argv[1];
	for (i = 0; i < 3 && strcmp(argv[2], phase_names[i]); i++)
		;
	if (i == 3)
		goto usage;
	a->phase = (enum metabench_phase)i;
	optind = 3;
	while ((opt = getopt(argc, argv, "n:s:t:d:h")) != -1) {
		uint64_t v;

		if (opt == 'h') {
			usage(stdout);
			return 1;
		}
		if (opt == '?' || parse_u64(optarg, &v) < 0)
			goto usage;
		if (opt == 'n')
			a->files = v;
		else if (opt == 's')
			a->size = v;
		else if (opt == 'd')
			a->drop_every = v;
		else
			a->limit_s = v;
	}
	if (a->size > (64U << 20) || strlen(a->dir) > 4096 - METABENCH_NAME_MAX) {
		fprintf(stderr, "metabench: -s at most 64M, DIR shorter than %d bytes\n",
			4096 - METABENCH_NAME_MAX);
		return -EINVAL;
	}
	return 0;
usage:
	usage(stderr);
	return -EINVAL;
}

struct metabench_result {
	uint64_t ops, errors, sum, elapsed, drops, drop_ns;
	uint64_t step_ns[METABENCH_STEPS];
	int partial;
	char first_error[256];
};

/* drop_caches=2: dentries and inodes; returns 0 or -errno */
static int drop_dentries(void)
{
	int fd = open("/proc/sys/vm/drop_caches", O_WRONLY | O_CLOEXEC), rc;

	if (fd < 0)
		return -errno;
	rc = write_all(fd, "2\n", 2);
	close(fd);
	return rc;
}

/* the phase over every file (or until the time limit), each latency into lat[] */
static void run_phase(const struct metabench_args *a, const char *data, uint64_t *lat,
		      struct metabench_result *r)
{
	uint64_t t0 = clock_now_ns();
	uint64_t t_end = a->limit_s ? t0 + a->limit_s * 1000000000ULL : UINT64_MAX;
	char path[4096];

	for (uint64_t i = 0; i < a->files; i++) {
		uint64_t t, b;
		int rc;

		snprintf(path, sizeof(path), "%s/f%07llu", a->dir, (unsigned long long)i);
		if (a->drop_every && i && i % a->drop_every == 0) {
			t = clock_now_ns();
			rc = drop_dentries();
			b = clock_now_ns();
			if (rc < 0) {
				r->errors++;
				snprintf(r->first_error, sizeof(r->first_error),
					 "drop_caches: %s", strerror(-rc));
				break;
			}
			r->drops++;
			r->drop_ns += b - t;
			t_end = t_end == UINT64_MAX ? t_end : t_end + (b - t);
		}
		t = clock_now_ns();
		if (t >= t_end) {
			r->partial = 1;
			break;
		}
		rc = do_one(a->phase, path, data, a->phase == METABENCH_UNLINK ? 0 : a->size,
			    r->step_ns);
		b = clock_now_ns();
		if (rc < 0) {
			r->errors++;
			/* the file name only: DIR may hold characters JSON would need escaped */
			snprintf(r->first_error, sizeof(r->first_error), "%s f%07llu: %s",
				 phase_names[a->phase], (unsigned long long)i, strerror(-rc));
			break;
		}
		lat[r->ops++] = b - t;
		r->sum += b - t;
	}
	r->elapsed = clock_now_ns() - t0 - r->drop_ns;
}

static void print_result(const struct metabench_args *a, struct metabench_result *r,
			 uint64_t *lat)
{
	uint64_t ops = r->ops;
	double div = ops ? 1000.0 * ops : 1.0;

	qsort(lat, ops, sizeof(*lat), cmp_u64);
#define PCT(p) (ops ? lat[(ops - 1) * (p) / 100] / 1000.0 : 0.0)
	printf("{\"phase\": \"%s\", \"files\": %llu, \"ops\": %llu, \"errors\": %llu, "
	       "\"first_error\": \"%s\", \"bytes_per_file\": %llu, \"elapsed_s\": %.6f, "
	       "\"ops_s\": %.1f, \"lat_mean_us\": %.2f, \"lat_p50_us\": %.2f, "
	       "\"lat_p99_us\": %.2f, \"lat_max_us\": %.2f, \"drops\": %llu, \"partial\": %s",
	       phase_names[a->phase], (unsigned long long)a->files, (unsigned long long)ops,
	       (unsigned long long)r->errors, r->first_error, (unsigned long long)a->size,
	       r->elapsed / 1e9, r->elapsed ? ops / (r->elapsed / 1e9) : 0.0,
	       ops ? r->sum / 1000.0 / ops : 0.0, PCT(50), PCT(99), PCT(100),
	       (unsigned long long)r->drops, r->partial ? "true" : "false");
#undef PCT
	if (a->phase == METABENCH_CREATE)
		printf(", \"open_us\": %.2f, \"write_us\": %.2f, \"close_us\": %.2f",
		       r->step_ns[METABENCH_OPEN] / div, r->step_ns[METABENCH_WRITE] / div,
		       r->step_ns[METABENCH_CLOSE] / div);
	printf("}\n");
}

int main(int argc, char **argv)
{
	struct metabench_result r = { 0 };
	struct metabench_args a;
	char *data = NULL;
	uint64_t *lat;
	int rc;

	rc = parse_args(argc, argv, &a);
	if (rc)
		return rc > 0 ? 0 : 2;
	lat = calloc(a.files ? a.files : 1, sizeof(*lat));
	if (a.size) {
		data = malloc(a.size);
		if (data)
			memset(data, 'm', a.size);
	}
	if (!lat || (a.size && !data)) {
		fprintf(stderr, "metabench: out of memory\n");
		free(lat);
		free(data);
		return 1;
	}
	run_phase(&a, data, lat, &r);
	print_result(&a, &r, lat);
	free(lat);
	free(data);
	return r.errors ? 1 : 0;
}
