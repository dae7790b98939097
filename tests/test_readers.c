// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test_readers.c - the reader slots (fuse-client/pool/readers.c) against a
 * real memserver, each reader and the writer a client of their own: joining
 * takes the first free slot and a full table is refused; the writer's scan
 * sees every reader and the smallest seq applied; a reader that stops
 * beating is expired and fenced (its beats and reads fail from then on);
 * leaving frees the slot; a damaged record counts as a reader at seq 0
 * until it times out; and a seeded random run of joins, beats and leaves
 * over several readers checked against a model after every step
 * (RMEMFS_READERS_SEED replays one; the seed is printed).
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <glib.h>

#include "layout.h"
#include "memserver_fx.h"
#include "readers.h"
#include "remote.h"

#define TIMEOUT_MS 600 /* RMEM_TEST_READERS_TIMEOUT_MS, set before any readers_new */
#define NREMOTES 6

struct fx {
	GPid pid;
	struct remote *w; /* the writer's client */
	struct readers *wr;
	struct remote *c[NREMOTES]; /* readers' clients */
	struct readers *rd[NREMOTES];
};

static void setup(struct fx *f, gconstpointer d)
{
	int i;

	f->w = tfx_memserver_start("64M", 0, &f->pid);
	f->wr = readers_new(f->w);
	for (i = 0; i < NREMOTES; i++) {
		f->c[i] = tfx_memserver_client();
		f->rd[i] = readers_new(f->c[i]);
	}
}

static void teardown(struct fx *f, gconstpointer d)
{
	int i;

	for (i = 0; i < NREMOTES; i++) {
		readers_destroy(f->rd[i]);
		remote_close(f->c[i]);
	}
	readers_destroy(f->wr);
	tfx_memserver_stop(&f->w, &f->pid);
}

static int scan(struct fx *f, uint64_t *min)
{
	int n = readers_scan(f->wr, min);

	g_assert_cmpint(n, >=, 0);
	return n;
}

static void test_join_scan(struct fx *f, gconstpointer d)
{
	struct reader_info info[LAYOUT_READER_SLOTS];
	uint64_t min;
	int n;

	g_assert_cmpint(scan(f, &min), ==, 0);
	g_assert_cmpuint(min, ==, UINT64_MAX);
	g_assert_cmpint(readers_join(f->rd[0], "alpha pid 1", NULL), ==, 0);
	g_assert_cmpint(readers_join(f->rd[1], "beta pid 2", NULL), ==, 0);
	g_assert_cmpint(scan(f, &min), ==, 2);
	g_assert_cmpuint(min, ==, 0); /* joined, nothing applied yet: everything held */
	g_assert_cmpint(readers_beat(f->rd[0], 10, 1, 5), ==, 0);
	g_assert_cmpint(readers_beat(f->rd[1], 7, 1, 5), ==, 0);
	g_assert_cmpint(scan(f, &min), ==, 2);
	g_assert_cmpuint(min, ==, 7);
	n = readers_list(f->wr, info, LAYOUT_READER_SLOTS);
	g_assert_cmpint(n, ==, 2);
	g_assert_cmpuint(info[0].slot, ==, 0);
	g_assert_cmpstr(info[0].host, ==, "alpha pid 1");
	g_assert_cmpuint(info[0].applied, ==, 10);
	g_assert_cmpuint(info[1].slot, ==, 1);
	g_assert_cmpuint(info[1].id, ==, remote_client_id(f->c[1]));
	g_assert_cmpint(readers_read_ok(f->rd[0]), ==, 0);
}

static void test_full(struct fx *f, gconstpointer d)
{
	struct readers *many[LAYOUT_READER_SLOTS];
	struct remote *rm[LAYOUT_READER_SLOTS];
	char *msg = NULL;
	uint64_t min;
	int i;

	for (i = 0; i < LAYOUT_READER_SLOTS; i++) {
		char host[32];

		rm[i] = tfx_memserver_client();
		many[i] = readers_new(rm[i]);
		g_snprintf(host, sizeof(host), "r%d", i);
		g_assert_cmpint(readers_join(many[i], host, NULL), ==, 0);
	}
	g_assert_cmpint(readers_join(f->rd[0], "one too many", &msg), ==, -ENOSPC);
	g_assert_nonnull(strstr(msg, "32 reader slots"));
	g_assert_nonnull(strstr(msg, "r31"));
	g_free(msg);
	g_assert_cmpint(scan(f, &min), ==, LAYOUT_READER_SLOTS);
	readers_leave(many[7]);
	g_assert_cmpint(readers_join(f->rd[0], "in slot 7", NULL), ==, 0);
	g_assert_cmpint(scan(f, &min), ==, LAYOUT_READER_SLOTS);
	for (i = 0; i < LAYOUT_READER_SLOTS; i++) {
		readers_destroy(many[i]);
		remote_close(rm[i]);
	}
}

static void test_expire(struct fx *f, gconstpointer d)
{
	uint8_t byte;
	uint64_t min;
	int i;

	g_assert_cmpuint(readers_timeout_ms(f->wr), ==, TIMEOUT_MS);
	g_assert_cmpint(readers_join(f->rd[0], "stops", NULL), ==, 0);
	g_assert_cmpint(readers_join(f->rd[1], "goes on", NULL), ==, 0);
	g_assert_cmpint(readers_beat(f->rd[0], 3, 1, 0), ==, 0);
	g_assert_cmpint(scan(f, &min), ==, 2);
	/* rd[1] beats on, rd[0] is silent: it goes, and with it the hold on seq 3 */
	for (i = 0; i < 200 && scan(f, &min) == 2; i++) {
		g_assert_cmpint(readers_beat(f->rd[1], 20 + i, 1, 0), ==, 0);
		g_usleep(TIMEOUT_MS * 100);
	}
	g_assert_cmpint(scan(f, &min), ==, 1);
	g_assert_cmpuint(min, >=, 20);
	/* fenced: its connection is cut, its beats and reads fail */
	g_assert_cmpint(remote_read(f->c[0], 0, &byte, 1), <, 0);
	g_assert_cmpint(readers_beat(f->rd[0], 4, 1, 0), ==, -ESTALE);
	g_assert_cmpint(readers_read_ok(f->rd[0]), <, 0);
	g_assert_cmpint(readers_read_ok(f->rd[1]), ==, 0);
}

static void test_leave(struct fx *f, gconstpointer d)
{
	struct reader_info info[2];
	uint64_t min;

	g_assert_cmpint(readers_join(f->rd[0], "a", NULL), ==, 0);
	g_assert_cmpint(readers_join(f->rd[1], "b", NULL), ==, 0);
	readers_leave(f->rd[0]);
	g_assert_cmpint(scan(f, &min), ==, 1);
	g_assert_cmpint(readers_join(f->rd[2], "c", NULL), ==, 0);
	g_assert_cmpint(scan(f, &min), ==, 2);
	g_assert_cmpint(readers_list(f->wr, info, 2), ==, 2);
	g_assert_cmpuint(info[0].slot, ==, 0); /* c took the slot a gave back */
	g_assert_cmpstr(info[0].host, ==, "c");
}

static void test_damaged(struct fx *f, gconstpointer d)
{
	uint8_t junk[LAYOUT_READER_REC_SIZE];
	uint64_t min, off = LAYOUT_SB_READERS_OFF + 5 * LAYOUT_READER_SLOT_SIZE +
			    LAYOUT_READER_REC_OFF;
	int i;

	for (i = 0; i < (int)sizeof(junk); i++)
		junk[i] = (uint8_t)(i * 37 + 1);
	g_assert_cmpint(readers_join(f->rd[0], "a", NULL), ==, 0);
	g_assert_cmpint(readers_beat(f->rd[0], 50, 1, 0), ==, 0);
	g_assert_cmpint(remote_write(f->w, off, junk, sizeof(junk)), ==, 0);
	g_assert_cmpint(scan(f, &min), ==, 2);
	g_assert_cmpuint(min, ==, 0); /* what it says cannot be read: hold everything */
	for (i = 0; i < 200 && scan(f, &min) == 2; i++) {
		g_assert_cmpint(readers_beat(f->rd[0], 50, 1, 0), ==, 0);
		g_usleep(TIMEOUT_MS * 100);
	}
	g_assert_cmpint(scan(f, &min), ==, 1);
	g_assert_cmpuint(min, ==, 50);
}

/* the model: who is in, and what each published */
struct model {
	bool in[NREMOTES];
	uint64_t applied[NREMOTES];
};

static void check(struct fx *f, const struct model *mo, guint32 seed, int step)
{
	uint64_t min, want = UINT64_MAX;
	int i, n = 0;

	for (i = 0; i < NREMOTES; i++) {
		if (!mo->in[i])
			continue;
		n++;
		want = MIN(want, mo->applied[i]);
	}
	if (scan(f, &min) != n || min != want)
		g_error("seed %u step %d: %d live readers with min %" G_GUINT64_FORMAT
			", the model says %d and %" G_GUINT64_FORMAT " (RMEMFS_READERS_SEED=%u replays)",
			seed, step, scan(f, &min), min, n, want, seed);
}

static void test_model(struct fx *f, gconstpointer d)
{
	const char *env = g_getenv("RMEMFS_READERS_SEED");
	guint32 seed = env ? (guint32)strtoul(env, NULL, 10) : g_random_int();
	GRand *rnd = g_rand_new_with_seed(seed);
	struct model mo = { 0 };
	int step, i;

	g_test_message("seed %u (RMEMFS_READERS_SEED=%u replays)", seed, seed);
	for (step = 0; step < 300; step++) {
		i = g_rand_int_range(rnd, 0, NREMOTES);
		switch (g_rand_int_range(rnd, 0, 4)) {
		case 0:
			if (mo.in[i])
				break;
			g_assert_cmpint(readers_join(f->rd[i], "model", NULL), ==, 0);
			mo.in[i] = true;
			mo.applied[i] = 0;
			break;
		case 1:
		case 2:
			if (!mo.in[i])
				break;
			mo.applied[i] += (uint64_t)g_rand_int_range(rnd, 0, 100);
			g_assert_cmpint(readers_beat(f->rd[i], mo.applied[i], 1, 0), ==, 0);
			break;
		default:
			if (!mo.in[i])
				break;
			readers_leave(f->rd[i]);
			mo.in[i] = false;
			break;
		}
		check(f, &mo, seed, step);
	}
	g_rand_free(rnd);
}

int main(int argc, char **argv)
{
	g_test_init(&argc, &argv, NULL);
	g_setenv("RMEM_TEST_READERS_TIMEOUT_MS", G_STRINGIFY(TIMEOUT_MS), TRUE);

#define ADD(path, fn) g_test_add(path, struct fx, NULL, setup, fn, teardown)
	ADD("/readers/join-scan", test_join_scan);
	ADD("/readers/full", test_full);
	ADD("/readers/expire", test_expire);
	ADD("/readers/leave", test_leave);
	ADD("/readers/damaged", test_damaged);
	ADD("/readers/model", test_model);
#undef ADD
	return g_test_run();
}
