// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * rmem-touch.c - the page-touch microbenchmark and the compute job of the far-memory
 * experiment (scripts/farmem.sh): what an application sees when part of its memory is swap.
 *
 * Touch mode (rmem-touch SIZE): SIZE of private anonymous memory (THP off unless --thp,
 * so every page is its own 4 KiB fault), every page filled, then the measured phase
 * touches pages in order (--pattern seq) or uniformly at random (--pattern rand, seeded
 * xorshift). Each touch reads the whole page and checks it against what was written, then
 * (unless --read-only) writes a new generation into its stamp so the page is dirty again and
 * must be written back before it can be dropped. A page holds
 *
 *	word 0		stamp: page index, seed and generation, mixed into one word
 *	words 1..n-2	body: a pseudo-random function of (seed, page, word); with --fill half
 *			(the default) the second half of the page is zeros, so zram sees pages
 *			that compress about 2:1, with --fill random not at all
 *	word n-1	the stamp again (a page lost or torn in the middle shows)
 *
 * and a 1-byte generation per page is kept outside the measured memory (SIZE/4096 bytes).
 * Each touch is timed with CLOCK_MONOTONIC into the log-linear histogram of perf_stats.c.
 *
 * Sort mode (rmem-touch --sort SIZE): SIZE/8 random 64-bit keys, their sum and xor taken,
 * sorted in place by an introsort (median-of-three quicksort, insertion sort below 16
 * elements, heapsort past 2 log2(n) levels), then checked: ascending, same sum and xor. It is
 * here rather than in a program of its own so that the two jobs share the generator, the
 * clock, the memory setup and the output, and farmem.sh runs one binary. Quicksort is the
 * compute job because its partitions stream through memory the way most batch jobs do; the
 * library's qsort() was not used, as glibc's may allocate a second buffer of SIZE outside
 * the measured array.
 *
 * Output: a few "name value unit" lines, or one JSON object with --json. Exit status 0, 1
 * on a verification error (the first bad page or position is printed), 2 on bad usage or a
 * failed allocation.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <glib.h>

#include "clock.h"
#include "perf_stats.h"
#include "units.h"

enum touch_pattern { TOUCH_SEQ, TOUCH_RAND };
enum touch_fill { FILL_HALF, FILL_RANDOM, FILL_ZERO };

struct touch_opts {
	uint64_t size;
	enum touch_pattern pattern;
	enum touch_fill fill;
	uint64_t passes;
	uint64_t touches; /* 0: passes x pages */
	uint64_t seed;
	int write; /* the switches: getopt_long sets them */
	int json;
	int thp;
	int sort;
};

/* what a run measured, for the report */
struct touch_result {
	uint64_t pages;
	uint64_t touches;
	uint64_t errors;
	uint64_t first_bad; /* page (touch mode) or index (sort mode) of the first error */
	const char *first_what;
	double fill_s;
	double run_s;
	double verify_s;
	long majflt; /* major faults in the measured phase (pages read back from swap) */
	long minflt;
	struct perf_hist hist;
};

static const char *const pattern_names[] = {[TOUCH_SEQ] = "seq", [TOUCH_RAND] = "rand"};
static const char *const fill_names[] = {[FILL_HALF] = "half", [FILL_RANDOM] = "random",
					 [FILL_ZERO] = "zero"};

/* splitmix64: the page body generator, and the seed expander of the xorshift below */
static inline uint64_t mix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ULL;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

/* xorshift64*: the touch order and the sort's keys */
static inline uint64_t rng_next(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return x * 0x2545f4914f6cdd1dULL;
}

/* uniform in [0, n) without a division (Lemire's multiply-shift) */
static inline uint64_t rng_below(uint64_t *s, uint64_t n)
{
	return (uint64_t)(((unsigned __int128)rng_next(s) * n) >> 64);
}

static inline uint64_t page_stamp(uint64_t page, uint64_t seed, uint8_t gen)
{
	return mix64(page ^ (seed << 20) ^ ((uint64_t)gen << 56));
}

static inline uint64_t page_word(uint64_t page, uint64_t seed, size_t i)
{
	return mix64((page << 12 | i) ^ seed);
}

/* how many body words carry data: the rest stay zero */
static size_t body_words(enum touch_fill fill, size_t words)
{
	switch (fill) {
	case FILL_RANDOM:
		return words - 1;
	case FILL_ZERO:
		return 1;
	case FILL_HALF:
	default:
		return words / 2;
	}
}

static void page_fill(uint64_t *p, size_t words, size_t body, uint64_t page, uint64_t seed)
{
	size_t i;

	p[0] = page_stamp(page, seed, 0);
	for (i = 1; i < body; i++)
		p[i] = page_word(page, seed, i);
	/* fresh anonymous memory reads as zeros: the rest of the body is already right */
	p[words - 1] = p[0];
}

/* 0 if the page holds what page_fill and the last touch wrote, else -EIO and *what says where */
static int page_check(const uint64_t *p, size_t words, size_t body, uint64_t page, uint64_t seed,
		      uint8_t gen, const char **what)
{
	uint64_t stamp = page_stamp(page, seed, gen);
	uint64_t acc = 0;
	size_t i;

	if (p[0] != stamp) {
		*what = "head stamp";
		return -EIO;
	}
	if (p[words - 1] != stamp) {
		*what = "tail stamp";
		return -EIO;
	}
	for (i = 1; i < body; i++)
		acc |= p[i] ^ page_word(page, seed, i);
	for (; i < words - 1; i++)
		acc |= p[i];
	if (acc) {
		*what = "body";
		return -EIO;
	}
	return 0;
}

static double elapsed_s(uint64_t t0)
{
	return (double)(clock_now_ns() - t0) / 1e9;
}

static void record_error(struct touch_result *r, uint64_t where, const char *what)
{
	if (!r->errors++) {
		r->first_bad = where;
		r->first_what = what;
	}
}

static void faults(long *maj, long *min)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	*maj = ru.ru_majflt;
	*min = ru.ru_minflt;
}

/* the memory under test: private, anonymous, not reserved against overcommit */
static void *area_map(uint64_t size, bool thp)
{
	void *a = mmap(NULL, size, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

	if (a == MAP_FAILED) {
		fprintf(stderr, "rmem-touch: mmap of %" PRIu64 " bytes: %s\n", size,
			strerror(errno));
		return NULL;
	}
	if (!thp && madvise(a, size, MADV_NOHUGEPAGE))
		fprintf(stderr, "rmem-touch: madvise(MADV_NOHUGEPAGE): %s (pages may be huge)\n",
			strerror(errno));
	return a;
}

static int touch_run(const struct touch_opts *o, struct touch_result *r)
{
	size_t psize = (size_t)sysconf(_SC_PAGESIZE), words = psize / sizeof(uint64_t);
	size_t body = body_words(o->fill, words);
	uint64_t pages = o->size / psize, n, i, page = 0, t0, t;
	uint64_t rng = mix64(o->seed) | 1;
	long maj0, min0;
	uint8_t *gen;
	char *area;
	const char *what;

	if (!pages) {
		fprintf(stderr, "rmem-touch: SIZE must be at least one page (%zu bytes)\n", psize);
		return -EINVAL;
	}
	gen = calloc(pages, 1);
	if (!gen) {
		fprintf(stderr, "rmem-touch: no memory for %" PRIu64 " generation bytes\n", pages);
		return -ENOMEM;
	}
	area = area_map(pages * psize, o->thp);
	if (!area) {
		free(gen);
		return -ENOMEM;
	}
	r->pages = pages;

	t0 = clock_now_ns();
	for (i = 0; i < pages; i++)
		page_fill((uint64_t *)(area + i * psize), words, body, i, o->seed);
	r->fill_s = elapsed_s(t0);

	n = o->touches ? o->touches : o->passes * pages;
	faults(&maj0, &min0);
	t0 = clock_now_ns();
	for (i = 0; i < n; i++) {
		uint64_t *p;

		page = o->pattern == TOUCH_SEQ ? i % pages : rng_below(&rng, pages);
		p = (uint64_t *)(area + page * psize);
		t = clock_now_ns();
		if (page_check(p, words, body, page, o->seed, gen[page], &what))
			record_error(r, page, what);
		if (o->write) {
			gen[page]++;
			p[0] = p[words - 1] = page_stamp(page, o->seed, gen[page]);
		}
		perf_hist_add(&r->hist, clock_now_ns() - t);
	}
	r->run_s = elapsed_s(t0);
	faults(&r->majflt, &r->minflt);
	r->majflt -= maj0;
	r->minflt -= min0;
	r->touches = n;

	munmap(area, pages * psize);
	free(gen);
	return 0;
}

/* ---- sort mode ---- */

#define SORT_SMALL 16

static void sort_insertion(uint64_t *a, size_t n)
{
	size_t i, j;

	for (i = 1; i < n; i++) {
		uint64_t v = a[i];

		for (j = i; j > 0 && a[j - 1] > v; j--)
			a[j] = a[j - 1];
		a[j] = v;
	}
}

static void sort_sift_down(uint64_t *a, size_t root, size_t n)
{
	uint64_t v = a[root];
	size_t child;

	while ((child = 2 * root + 1) < n) {
		if (child + 1 < n && a[child + 1] > a[child])
			child++;
		if (a[child] <= v)
			break;
		a[root] = a[child];
		root = child;
	}
	a[root] = v;
}

static void sort_heap(uint64_t *a, size_t n)
{
	size_t i;

	for (i = n / 2; i-- > 0;)
		sort_sift_down(a, i, n);
	for (i = n; i-- > 1;) {
		uint64_t v = a[0];

		a[0] = a[i];
		a[i] = v;
		sort_sift_down(a, 0, i);
	}
}

static inline void swap64(uint64_t *x, uint64_t *y)
{
	uint64_t v = *x;

	*x = *y;
	*y = v;
}

/* introsort: recurse into the smaller part, loop on the larger (stack depth <= log2 n) */
static void sort_intro(uint64_t *a, size_t n, unsigned int depth)
{
	while (n > SORT_SMALL) {
		size_t lo = 0, hi = n - 1, mid = n / 2;
		uint64_t pivot;

		if (!depth--) {
			sort_heap(a, n);
			return;
		}
		if (a[mid] < a[lo])
			swap64(&a[mid], &a[lo]);
		if (a[hi] < a[lo])
			swap64(&a[hi], &a[lo]);
		if (a[hi] < a[mid])
			swap64(&a[hi], &a[mid]);
		pivot = a[mid];
		/* Hoare partition: a[0..hi] <= pivot <= a[hi+1..n) */
		for (;;) {
			while (a[lo] < pivot)
				lo++;
			while (a[hi] > pivot)
				hi--;
			if (lo >= hi)
				break;
			swap64(&a[lo++], &a[hi--]);
		}
		if (hi + 1 < n - hi - 1) {
			sort_intro(a, hi + 1, depth);
			a += hi + 1;
			n -= hi + 1;
		} else {
			sort_intro(a + hi + 1, n - hi - 1, depth);
			n = hi + 1;
		}
	}
	sort_insertion(a, n);
}

static int sort_run(const struct touch_opts *o, struct touch_result *r)
{
	uint64_t n = o->size / sizeof(uint64_t), i, sum = 0, xr = 0, sum2 = 0, xr2 = 0, t0;
	uint64_t rng = mix64(o->seed) | 1;
	unsigned int depth = 0;
	long maj0, min0;
	uint64_t *a;

	if (n < 2) {
		fprintf(stderr, "rmem-touch: --sort needs SIZE of at least 16 bytes\n");
		return -EINVAL;
	}
	a = area_map(n * sizeof(uint64_t), o->thp);
	if (!a)
		return -ENOMEM;
	r->pages = (n * sizeof(uint64_t) + 4095) / 4096;

	t0 = clock_now_ns();
	for (i = 0; i < n; i++) {
		a[i] = rng_next(&rng);
		sum += a[i];
		xr ^= a[i];
	}
	r->fill_s = elapsed_s(t0);

	for (i = n; i > 1; i >>= 1)
		depth += 2;
	faults(&maj0, &min0);
	t0 = clock_now_ns();
	sort_intro(a, n, depth);
	r->run_s = elapsed_s(t0);
	faults(&r->majflt, &r->minflt);
	r->majflt -= maj0;
	r->minflt -= min0;

	t0 = clock_now_ns();
	for (i = 0; i < n; i++) {
		if (i && a[i - 1] > a[i])
			record_error(r, i, "order");
		sum2 += a[i];
		xr2 ^= a[i];
	}
	if (sum2 != sum || xr2 != xr)
		record_error(r, n, "checksum");
	r->verify_s = elapsed_s(t0);
	r->touches = n;

	munmap(a, n * sizeof(uint64_t));
	return 0;
}

/* ---- output ---- */

static void report_text(const struct touch_opts *o, const struct touch_result *r)
{
	const struct perf_hist *h = &r->hist;
	char size[32];

	units_format_size(o->size, size, sizeof(size));
	if (o->sort) {
		printf("sort          %s (%" PRIu64 " 64-bit keys), seed %" PRIu64 "\n", size,
		       r->touches, o->seed);
		printf("fill          %.3f s\n", r->fill_s);
		printf("sort_time     %.3f s\n", r->run_s);
		printf("verify        %.3f s (%s)\n", r->verify_s,
		       r->errors ? "FAILED" : "sorted, sum and xor preserved");
		printf("total         %.3f s\n", r->fill_s + r->run_s + r->verify_s);
	} else {
		printf("touch         %s (%" PRIu64 " pages), %s, %s, fill %s, seed %" PRIu64 "\n",
		       size, r->pages, pattern_names[o->pattern],
		       o->write ? "read+write" : "read-only", fill_names[o->fill], o->seed);
		printf("fill          %.3f s\n", r->fill_s);
		printf("touches       %" PRIu64 " in %.3f s: %.0f touches/s, %.1f MiB/s\n",
		       r->touches, r->run_s, r->run_s > 0 ? r->touches / r->run_s : 0.0,
		       r->run_s > 0 ? r->touches * 4096.0 / r->run_s / 1048576.0 : 0.0);
		printf("latency       mean %.2f us, p50 %.2f us, p99 %.2f us, p99.9 %.2f us, "
		       "max %.2f us\n",
		       perf_hist_mean(h) / 1e3, perf_hist_percentile(h, 50.0) / 1e3,
		       perf_hist_percentile(h, 99.0) / 1e3, perf_hist_percentile(h, 99.9) / 1e3,
		       h->max_ns / 1e3);
	}
	printf("faults        %ld major, %ld minor (measured phase)\n", r->majflt, r->minflt);
	printf("errors        %" PRIu64 "\n", r->errors);
}

static void report_json(const struct touch_opts *o, const struct touch_result *r)
{
	const struct perf_hist *h = &r->hist;
	double rate = r->run_s > 0 ? r->touches / r->run_s : 0.0;

	printf("{\"tool\": \"rmem-touch\", \"mode\": \"%s\", \"size_B\": %" PRIu64
	       ", \"seed\": %" PRIu64 ", \"thp\": %s, ",
	       o->sort ? "sort" : "touch", o->size, o->seed, o->thp ? "true" : "false");
	if (o->sort) {
		printf("\"keys\": %" PRIu64 ", \"fill_s\": %.6f, \"sort_s\": %.6f, "
		       "\"verify_s\": %.6f, \"total_s\": %.6f, ",
		       r->touches, r->fill_s, r->run_s, r->verify_s,
		       r->fill_s + r->run_s + r->verify_s);
	} else {
		printf("\"pattern\": \"%s\", \"write\": %s, \"fill\": \"%s\", \"pages\": %" PRIu64
		       ", \"touches\": %" PRIu64 ", \"fill_s\": %.6f, \"run_s\": %.6f, "
		       "\"touches_s\": %.1f, \"MiB_s\": %.3f, \"lat_mean_us\": %.3f, "
		       "\"lat_p50_us\": %.3f, \"lat_p99_us\": %.3f, \"lat_p999_us\": %.3f, "
		       "\"lat_max_us\": %.3f, ",
		       pattern_names[o->pattern], o->write ? "true" : "false", fill_names[o->fill],
		       r->pages, r->touches, r->fill_s, r->run_s, rate, rate * 4096.0 / 1048576.0,
		       perf_hist_mean(h) / 1e3, perf_hist_percentile(h, 50.0) / 1e3,
		       perf_hist_percentile(h, 99.0) / 1e3, perf_hist_percentile(h, 99.9) / 1e3,
		       h->max_ns / 1e3);
	}
	printf("\"majflt\": %ld, \"minflt\": %ld, \"errors\": %" PRIu64, r->majflt, r->minflt,
	       r->errors);
	if (r->errors)
		printf(", \"first_error\": {\"at\": %" PRIu64 ", \"what\": \"%s\"}", r->first_bad,
		       r->first_what);
	printf("}\n");
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: rmem-touch SIZE [options]        page-touch microbenchmark\n"
		"       rmem-touch --sort SIZE [options] in-place sort of SIZE/8 random keys\n"
		"\n"
		"  --pattern seq|rand  touch order (default rand)\n"
		"  --passes N          touch passes x pages pages (default 1)\n"
		"  --touches N         touch exactly N pages instead\n"
		"  --read-only         only read and verify each page\n"
		"  --write             also write a new generation into it (default)\n"
		"  --fill half|random|zero  page body: half pseudo-random, half zeros (about 2:1\n"
		"                      for a compressor; default), all pseudo-random, or zeros\n"
		"  --seed N            generator seed (default 1)\n"
		"  --thp               leave transparent huge pages on (default: MADV_NOHUGEPAGE)\n"
		"  --json              one JSON object instead of the text lines\n"
		"\n"
		"Every page is verified on every touch; exit 1 on a verification error.\n");
}

/* a whole number of at least min; -EINVAL after saying what it must be */
static int parse_u64(const char *opt, const char *s, uint64_t min, uint64_t *out)
{
	if (units_parse_uint(s, min, UINT64_MAX, out) == 0)
		return 0;
	if (min)
		fprintf(stderr, "rmem-touch: %s: '%s' is not a whole number of at least %" PRIu64
			"\n", opt, s, min);
	else
		fprintf(stderr, "rmem-touch: %s: '%s' is not a whole number\n", opt, s);
	return -EINVAL;
}

/* *out = the index of s in names[n]; -EINVAL (with a message listing them) when it is none */
static int parse_name(const char *opt, const char *s, const char *const *names, size_t n,
		      unsigned int *out)
{
	size_t i;

	for (i = 0; i < n; i++) {
		if (!strcmp(s, names[i])) {
			*out = (unsigned int)i;
			return 0;
		}
	}
	fprintf(stderr, "rmem-touch: %s: '%s' is not one of", opt, s);
	for (i = 0; i < n; i++)
		fprintf(stderr, " %s", names[i]);
	fprintf(stderr, "\n");
	return -EINVAL;
}

enum { OPT_PATTERN = 256, OPT_PASSES, OPT_TOUCHES, OPT_FILL, OPT_SEED };

/* one option with a value (c from getopt_long); 0, or -EINVAL after saying what is wrong */
static int touch_opt(struct touch_opts *o, int c, const char *arg)
{
	unsigned int v;
	int rc;

	switch (c) {
	case OPT_PATTERN:
		rc = parse_name("--pattern", arg, pattern_names, G_N_ELEMENTS(pattern_names), &v);
		if (!rc)
			o->pattern = (enum touch_pattern)v;
		return rc;
	case OPT_FILL:
		rc = parse_name("--fill", arg, fill_names, G_N_ELEMENTS(fill_names), &v);
		if (!rc)
			o->fill = (enum touch_fill)v;
		return rc;
	case OPT_PASSES:
		return parse_u64("--passes", arg, 0, &o->passes);
	case OPT_TOUCHES:
		return parse_u64("--touches", arg, 1, &o->touches);
	case OPT_SEED:
		return parse_u64("--seed", arg, 0, &o->seed);
	}
	return -EINVAL;
}

static int parse_args(int argc, char **argv, struct touch_opts *o)
{
	const struct option longopts[] = {
	    {"pattern", required_argument, NULL, OPT_PATTERN},
	    {"passes", required_argument, NULL, OPT_PASSES},
	    {"touches", required_argument, NULL, OPT_TOUCHES},
	    {"read-only", no_argument, &o->write, 0},
	    {"write", no_argument, &o->write, 1},
	    {"fill", required_argument, NULL, OPT_FILL},
	    {"seed", required_argument, NULL, OPT_SEED},
	    {"thp", no_argument, &o->thp, 1},
	    {"json", no_argument, &o->json, 1},
	    {"sort", no_argument, &o->sort, 1},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	int c;

	*o = (struct touch_opts){
	    .pattern = TOUCH_RAND, .fill = FILL_HALF, .passes = 1, .seed = 1, .write = true};
	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		if (c == 0) /* a switch */
			continue;
		if (c == 'h') {
			usage(stdout);
			exit(0);
		}
		if (c == '?') {
			usage(stderr);
			return -EINVAL;
		}
		if (touch_opt(o, c, optarg))
			return -EINVAL;
	}
	if (optind != argc - 1) {
		usage(stderr);
		return -EINVAL;
	}
	if (units_parse_size(argv[optind], &o->size) || !o->size) {
		fprintf(stderr, "rmem-touch: SIZE: '%s' is not a size (e.g. 512M, 1G)\n",
			argv[optind]);
		return -EINVAL;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct touch_opts o;
	struct touch_result *r;
	int rc;

	if (parse_args(argc, argv, &o))
		return 2;
	/* the histogram is ~58 KiB: keep it off the stack */
	r = calloc(1, sizeof(*r));
	if (!r) {
		fprintf(stderr, "rmem-touch: out of memory\n");
		return 2;
	}
	perf_hist_reset(&r->hist);
	rc = o.sort ? sort_run(&o, r) : touch_run(&o, r);
	if (rc) {
		free(r);
		return 2;
	}
	if (o.json)
		report_json(&o, r);
	else
		report_text(&o, r);
	fflush(stdout);
	if (r->errors)
		fprintf(stderr,
			"rmem-touch: %" PRIu64 " verification error(s); the first at %s %" PRIu64
			" (%s)\n",
			r->errors, o.sort ? "index" : "page", r->first_bad, r->first_what);
	rc = r->errors ? 1 : 0;
	free(r);
	return rc;
}
