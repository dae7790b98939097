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
 * phase as -n. One JSON object goes to stdout:
 *   {"phase": .., "files": .., "ops": .., "errors": .., "first_error": "..",
 *    "elapsed_s": .., "ops_s": .., "lat_mean_us": .., "lat_p50_us": ..,
 *    "lat_p99_us": .., "lat_max_us": .., "partial": false}
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

#define METABENCH_NAME_MAX 32

enum metabench_phase {
	METABENCH_CREATE,
	METABENCH_STAT,
	METABENCH_UNLINK,
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

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

/* one operation of the phase on path; returns 0 or -errno */
static int do_one(enum metabench_phase phase, const char *path, const char *data, size_t size)
{
	struct stat st;
	int fd, rc;

	switch (phase) {
	case METABENCH_CREATE:
		fd = open(path, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
		if (fd < 0)
			return -errno;
		rc = size ? write_all(fd, data, size) : 0;
		if (close(fd) < 0 && rc == 0)
			rc = -errno;
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
	fprintf(f, "usage: metabench DIR create|stat|unlink [-n FILES] [-s BYTES] [-t SECS]\n"
		   "  -n FILES  how many files (default 100000)\n"
		   "  -s BYTES  bytes written per file by create, checked by stat (default 4096)\n"
		   "  -t SECS   stop the phase after SECS seconds (default 0: no limit)\n");
}

static int parse_u64(const char *s, uint64_t *out)
{
	char *end;

	errno = 0;
	*out = strtoull(s, &end, 10);
	return errno || end == s || *end || s[0] == '-' ? -EINVAL : 0;
}

int main(int argc, char **argv)
{
	uint64_t files = 100000, size = 4096, limit_s = 0, ops = 0, errors = 0, sum = 0;
	const char *phase_names[] = { "create", "stat", "unlink" };
	enum metabench_phase phase;
	char path[4096], first_error[256] = "";
	uint64_t *lat, t0, t_end, elapsed;
	const char *dir;
	char *data = NULL;
	int opt, partial = 0;

	if (argc < 3) {
		usage(stderr);
		return 2;
	}
	dir = argv[1];
	if (!strcmp(argv[2], "create"))
		phase = METABENCH_CREATE;
	else if (!strcmp(argv[2], "stat"))
		phase = METABENCH_STAT;
	else if (!strcmp(argv[2], "unlink"))
		phase = METABENCH_UNLINK;
	else {
		usage(stderr);
		return 2;
	}
	optind = 3;
	while ((opt = getopt(argc, argv, "n:s:t:h")) != -1) {
		uint64_t v;

		if (opt == 'h') {
			usage(stdout);
			return 0;
		}
		if (opt == '?' || parse_u64(optarg, &v) < 0) {
			usage(stderr);
			return 2;
		}
		if (opt == 'n')
			files = v;
		else if (opt == 's')
			size = v;
		else
			limit_s = v;
	}
	if (size > (64U << 20) || strlen(dir) > sizeof(path) - METABENCH_NAME_MAX) {
		fprintf(stderr, "metabench: -s at most 64M, DIR shorter than %zu bytes\n",
			sizeof(path) - METABENCH_NAME_MAX);
		return 2;
	}
	lat = calloc(files ? files : 1, sizeof(*lat));
	if (size) {
		data = malloc(size);
		if (data)
			memset(data, 'm', size);
	}
	if (!lat || (size && !data)) {
		fprintf(stderr, "metabench: out of memory\n");
		free(lat);
		free(data);
		return 1;
	}

	t0 = now_ns();
	t_end = limit_s ? t0 + limit_s * 1000000000ULL : UINT64_MAX;
	for (uint64_t i = 0; i < files; i++) {
		uint64_t a, b;
		int rc;

		snprintf(path, sizeof(path), "%s/f%07llu", dir, (unsigned long long)i);
		a = now_ns();
		if (a >= t_end) {
			partial = 1;
			break;
		}
		rc = do_one(phase, path, data, phase == METABENCH_UNLINK ? 0 : size);
		b = now_ns();
		if (rc < 0) {
			errors++;
			/* the file name only: DIR may hold characters JSON would need escaped */
			snprintf(first_error, sizeof(first_error), "%s f%07llu: %s",
				 phase_names[phase], (unsigned long long)i, strerror(-rc));
			break;
		}
		lat[ops++] = b - a;
		sum += b - a;
	}
	elapsed = now_ns() - t0;

	qsort(lat, ops, sizeof(*lat), cmp_u64);
#define PCT(p) (ops ? lat[(ops - 1) * (p) / 100] / 1000.0 : 0.0)
	printf("{\"phase\": \"%s\", \"files\": %llu, \"ops\": %llu, \"errors\": %llu, "
	       "\"first_error\": \"%s\", \"bytes_per_file\": %llu, \"elapsed_s\": %.6f, "
	       "\"ops_s\": %.1f, \"lat_mean_us\": %.2f, \"lat_p50_us\": %.2f, "
	       "\"lat_p99_us\": %.2f, \"lat_max_us\": %.2f, \"partial\": %s}\n",
	       phase_names[phase], (unsigned long long)files, (unsigned long long)ops,
	       (unsigned long long)errors, first_error, (unsigned long long)size,
	       elapsed / 1e9, elapsed ? ops / (elapsed / 1e9) : 0.0,
	       ops ? sum / 1000.0 / ops : 0.0, PCT(50), PCT(99), PCT(100),
	       partial ? "true" : "false");
#undef PCT
	free(lat);
	free(data);
	return errors ? 1 : 0;
}
