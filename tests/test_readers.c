// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test_readers.c - the reader slots (fuse-client/pool/readers.c) against a
 * real memserver, each reader and the writer a client of their own (two
 * remotes = two machines): joining takes the first free slot and a full
 * table is refused with the holders named; the writer's scan sees every
 * reader and the smallest seq applied; a reader that stops beating is
 * expired and fenced (its beats and reads fail from then on), so is a slot
 * claimed without a record; leaving frees the slot; a damaged record counts
 * as a reader at seq 0 (or keeps its last good values) and does not crash;
 * read_ok from several threads; a two-member set (a record damaged on one
 * member, expiry on both, a member killed); and a seeded random run of
 * joins, beats, leaves and readers that stop beating, checked against a
 * model after every step (the seed is printed; RMEMFS_READERS_SEED=N
 * replays one).
 *
 * The expiry timeout is shortened through RMEM_TEST_READERS_TIMEOUT_MS
 * (readers_new reads it), set in main before anything else.
 */
#include <endian.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <glib.h>

#include "clock.h"
#include "layout.h"
#include "memserver_fx.h"
#include "memserver_launch.h"
#include "readers.h"
#include "remote.h"
#include "super.h"

#define TIMEOUT_MS 600 /* RMEM_TEST_READERS_TIMEOUT_MS */
#define NREMOTES 6
#define MODEL_STEPS 300

struct fx {
	GPid pid;
	struct remote *w; /* the writer's client */
	struct readers *wr;
	struct remote *c[NREMOTES]; /* readers' clients */
	struct readers *rd[NREMOTES];
};

static uint64_t owner_off(unsigned int k)
{
	return LAYOUT_SB_READERS_OFF + (uint64_t)k * LAYOUT_READER_SLOT_SIZE;
}

static uint64_t rec_off(unsigned int k)
{
	return owner_off(k) + LAYOUT_READER_REC_OFF;
}

/* slot k's owner word on member i, read as the protocol does (an atomic) */
static uint64_t owner_of(struct remote *r, unsigned int i, unsigned int k)
{
	uint64_t old = 1;

	g_assert_cmpint(remote_member_cas(r, i, owner_off(k), 0, 0, &old), ==, 0);
	return old;
}

static bool rec_is_zero(struct remote *r, unsigned int i, unsigned int k)
{
	uint8_t b[LAYOUT_READER_REC_SIZE];
	size_t j;

	g_assert_cmpint(remote_member_read(r, i, rec_off(k), b, sizeof(b)), ==, 0);
	for (j = 0; j < sizeof(b); j++)
		if (b[j])
			return false;
	return true;
}

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

/* reader i gets a fresh client (the old one was fenced) */
static void renew(struct fx *f, int i)
{
	readers_destroy(f->rd[i]);
	remote_close(f->c[i]);
	f->c[i] = tfx_memserver_client();
	f->rd[i] = readers_new(f->c[i]);
}

static int scan(struct fx *f, uint64_t *min)
{
	int n = readers_scan(f->wr, min);

	g_assert_cmpint(n, >=, 0);
	return n;
}

/* scan until fewer than n readers are live (at most ~10 timeouts), beating keep meanwhile */
static int scan_until_below(struct fx *f, int n, struct readers *keep, uint64_t keep_applied,
			    uint64_t *min)
{
	int i, got = n;

	for (i = 0; i < 100 && got >= n; i++) {
		if (keep)
			g_assert_cmpint(readers_beat(keep, keep_applied, 1, 0), ==, 0);
		g_usleep(TIMEOUT_MS * 100);
		got = scan(f, min);
	}
	return got;
}

static void test_join_scan(struct fx *f, gconstpointer d)
{
	struct reader_info info[LAYOUT_READER_SLOTS];
	uint64_t min;
	char *msg = NULL;
	int n;

	g_assert_cmpuint(readers_timeout_ms(f->wr), ==, TIMEOUT_MS);
	g_assert_cmpint(scan(f, &min), ==, 0);
	g_assert_cmpuint(min, ==, UINT64_MAX);
	g_assert_cmpint(readers_list(f->wr, info, LAYOUT_READER_SLOTS), ==, 0);
	g_assert_cmpint(readers_join(f->rd[0], "alpha pid 1", NULL), ==, 0);
	g_assert_cmpint(readers_join(f->rd[1], "beta pid 2", NULL), ==, 0);
	g_assert_cmpuint(owner_of(f->w, 0, 0), ==, remote_client_id(f->c[0]));
	g_assert_cmpuint(owner_of(f->w, 0, 1), ==, remote_client_id(f->c[1]));
	g_assert_cmpuint(owner_of(f->w, 0, 2), ==, 0);
	g_assert_cmpint(readers_join(f->rd[0], "again", &msg), ==, -EALREADY);
	g_free(msg);
	g_assert_cmpint(scan(f, &min), ==, 2);
	g_assert_cmpuint(min, ==, 0); /* joined, nothing applied yet: everything held */
	g_assert_cmpint(readers_beat(f->rd[0], 10, 3, 5), ==, 0);
	g_assert_cmpint(readers_beat(f->rd[1], 7, 3, 6), ==, 0);
	g_assert_cmpint(scan(f, &min), ==, 2);
	g_assert_cmpuint(min, ==, 7);
	n = readers_list(f->wr, info, LAYOUT_READER_SLOTS);
	g_assert_cmpint(n, ==, 2);
	g_assert_cmpuint(info[0].slot, ==, 0);
	g_assert_cmpuint(info[0].id, ==, remote_client_id(f->c[0]));
	g_assert_cmpstr(info[0].host, ==, "alpha pid 1");
	g_assert_cmpuint(info[0].applied, ==, 10);
	g_assert_cmpuint(info[0].gen, ==, 3);
	g_assert_cmpuint(info[0].lag_ms, ==, 5);
	g_assert_cmpuint(info[1].slot, ==, 1);
	g_assert_cmpuint(info[1].id, ==, remote_client_id(f->c[1]));
	g_assert_cmpuint(info[1].applied, ==, 7);
	g_assert_cmpint(readers_list(f->wr, info, 1), ==, 1);
	g_assert_cmpint(readers_read_ok(f->rd[0]), ==, 0);
	/* past the deadline, the owner word answers (and pushes it) */
	g_usleep(TIMEOUT_MS * 600);
	g_assert_cmpint(readers_read_ok(f->rd[0]), ==, 0);
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
		g_assert_cmpuint(owner_of(f->w, 0, (unsigned int)i), ==, remote_client_id(rm[i]));
	}
	g_assert_cmpint(readers_join(f->rd[0], "one too many", &msg), ==, -ENOSPC);
	g_test_message("%s", msg);
	g_assert_true(g_str_has_prefix(msg, "all 32 reader slots of the pool are taken (readers: "
					    "r0, r1, "));
	g_assert_nonnull(strstr(msg, "r31)"));
	g_free(msg);
	g_assert_cmpint(readers_read_ok(f->rd[0]), ==, -ESTALE); /* it holds nothing */
	g_assert_cmpint(scan(f, &min), ==, LAYOUT_READER_SLOTS);
	readers_leave(many[7]);
	g_assert_cmpint(readers_join(f->rd[0], "in slot 7", NULL), ==, 0);
	g_assert_cmpuint(owner_of(f->w, 0, 7), ==, remote_client_id(f->c[0]));
	g_assert_cmpint(scan(f, &min), ==, LAYOUT_READER_SLOTS);
	for (i = 0; i < LAYOUT_READER_SLOTS; i++) {
		readers_destroy(many[i]);
		remote_close(rm[i]);
	}
}

static void test_expire(struct fx *f, gconstpointer d)
{
	struct reader_info info[2];
	uint8_t byte;
	uint64_t min;

	g_assert_cmpint(readers_join(f->rd[0], "stops", NULL), ==, 0);
	g_assert_cmpint(readers_join(f->rd[1], "goes on", NULL), ==, 0);
	g_assert_cmpint(readers_beat(f->rd[0], 3, 1, 0), ==, 0);
	g_assert_cmpint(readers_beat(f->rd[1], 20, 1, 0), ==, 0);
	g_assert_cmpint(scan(f, &min), ==, 2);
	g_assert_cmpuint(min, ==, 3);
	/* rd[1] beats on, rd[0] is silent: it goes, and with it the hold on seq 3 */
	g_assert_cmpint(scan_until_below(f, 2, f->rd[1], 20, &min), ==, 1);
	g_assert_cmpuint(min, ==, 20);
	g_assert_cmpint(readers_list(f->wr, info, 2), ==, 1);
	g_assert_cmpuint(info[0].id, ==, remote_client_id(f->c[1]));
	/* its slot is free and clean */
	g_assert_cmpuint(owner_of(f->w, 0, 0), ==, 0);
	g_assert_true(rec_is_zero(f->w, 0, 0));
	/* fenced: its connection is cut, its beats and reads fail */
	g_assert_cmpint(remote_read(f->c[0], 0, &byte, 1), <, 0);
	g_assert_cmpint(readers_beat(f->rd[0], 4, 1, 0), ==, -ESTALE);
	g_assert_cmpint(readers_read_ok(f->rd[0]), ==, -ESTALE);
	g_assert_cmpint(readers_beat(f->rd[0], 5, 1, 0), ==, -ESTALE);
	g_assert_cmpint(readers_read_ok(f->rd[1]), ==, 0);
	readers_leave(f->rd[0]); /* nothing to give back */
	/* the slot is free for another client */
	g_assert_cmpint(readers_join(f->rd[2], "next", NULL), ==, 0);
	g_assert_cmpuint(owner_of(f->w, 0, 0), ==, remote_client_id(f->c[2]));
}

/* the owner word of a reader that learns it was expired without being fenced */
static void test_owner_lost(struct fx *f, gconstpointer d)
{
	uint64_t old;

	g_assert_cmpint(readers_join(f->rd[0], "a", NULL), ==, 0);
	/* the writer cleared the owner word (the fence got lost: a memserver restart) */
	g_assert_cmpint(remote_member_cas(f->w, 0, owner_off(0), remote_client_id(f->c[0]), 0,
					  &old), ==, 0);
	g_assert_cmpuint(old, ==, remote_client_id(f->c[0]));
	/* before the deadline a completed read stands; past it, it does not */
	g_assert_cmpint(readers_read_ok(f->rd[0]), ==, 0);
	g_usleep(TIMEOUT_MS * 600);
	g_assert_cmpint(readers_read_ok(f->rd[0]), ==, -ESTALE);
	g_assert_cmpint(readers_beat(f->rd[0], 1, 1, 0), ==, -ESTALE);
	/* and a beat finds out too (slot 0 taken by someone, b goes to slot 1) */
	g_assert_cmpint(remote_member_cas(f->w, 0, owner_off(0), 0, 12345, &old), ==, 0);
	g_assert_cmpuint(old, ==, 0);
	g_assert_cmpint(readers_join(f->rd[1], "b", NULL), ==, 0);
	g_assert_cmpint(readers_beat(f->rd[1], 1, 1, 0), ==, 0);
	g_assert_cmpint(remote_member_cas(f->w, 0, owner_off(1), remote_client_id(f->c[1]), 777,
					  &old), ==, 0);
	g_assert_cmpint(readers_beat(f->rd[1], 2, 1, 0), ==, -ESTALE);
	g_assert_cmpint(readers_read_ok(f->rd[1]), ==, -ESTALE);
}

static void test_leave(struct fx *f, gconstpointer d)
{
	struct reader_info info[2];
	uint64_t min;

	g_assert_cmpint(readers_join(f->rd[0], "a", NULL), ==, 0);
	g_assert_cmpint(readers_join(f->rd[1], "b", NULL), ==, 0);
	g_assert_cmpint(readers_beat(f->rd[0], 4, 1, 0), ==, 0);
	readers_leave(f->rd[0]);
	g_assert_cmpuint(owner_of(f->w, 0, 0), ==, 0);
	g_assert_true(rec_is_zero(f->w, 0, 0));
	g_assert_cmpint(readers_read_ok(f->rd[0]), ==, -ESTALE);
	g_assert_cmpint(readers_beat(f->rd[0], 5, 1, 0), ==, -EINVAL);
	readers_leave(f->rd[0]); /* twice: nothing */
	g_assert_cmpint(scan(f, &min), ==, 1);
	g_assert_cmpint(readers_join(f->rd[2], "c", NULL), ==, 0);
	g_assert_cmpint(scan(f, &min), ==, 2);
	g_assert_cmpint(readers_list(f->wr, info, 2), ==, 2);
	g_assert_cmpuint(info[0].slot, ==, 0); /* c took the slot a gave back */
	g_assert_cmpstr(info[0].host, ==, "c");
	/* a rejoin of the same client starts at seq 0 again, in the first free slot */
	g_assert_cmpint(readers_join(f->rd[0], "a again", NULL), ==, 0);
	g_assert_cmpint(scan(f, &min), ==, 3);
	g_assert_cmpuint(min, ==, 0);
	g_assert_cmpint(readers_list(f->wr, info, 2), ==, 2);
	g_assert_cmpint(readers_beat(f->rd[0], 6, 1, 0), ==, 0);
	g_assert_cmpint(readers_read_ok(f->rd[0]), ==, 0);
}

static void junk(uint8_t *b, size_t len, unsigned int seed)
{
	size_t i;

	for (i = 0; i < len; i++)
		b[i] = (uint8_t)(i * 37 + seed);
}

static void test_damaged(struct fx *f, gconstpointer d)
{
	struct reader_info info[3];
	uint8_t bad[LAYOUT_READER_REC_SIZE];
	uint64_t min;

	junk(bad, sizeof(bad), 1);
	g_assert_cmpint(readers_join(f->rd[0], "a", NULL), ==, 0);
	g_assert_cmpint(readers_beat(f->rd[0], 50, 1, 0), ==, 0);
	/* garbage in a free slot: nobody's, held as a reader at seq 0 until the timeout */
	g_assert_cmpint(remote_write(f->w, rec_off(5), bad, sizeof(bad)), ==, 0);
	g_assert_cmpint(scan(f, &min), ==, 2);
	g_assert_cmpuint(min, ==, 0);
	g_assert_cmpint(readers_list(f->wr, info, 3), ==, 2);
	g_assert_cmpuint(info[1].slot, ==, 5);
	g_assert_cmpuint(info[1].id, ==, 0);
	g_assert_cmpint(scan_until_below(f, 2, f->rd[0], 50, &min), ==, 1);
	g_assert_cmpuint(min, ==, 50);
	g_assert_true(rec_is_zero(f->w, 0, 5));
	g_assert_cmpuint(owner_of(f->w, 0, 5), ==, 0);
	/* a live reader's record torn: its last good values stand until it beats again */
	junk(bad, sizeof(bad), 2);
	g_assert_cmpint(remote_write(f->w, rec_off(0), bad, sizeof(bad)), ==, 0);
	g_assert_cmpint(scan(f, &min), ==, 1);
	g_assert_cmpuint(min, ==, 50);
	g_assert_cmpint(readers_beat(f->rd[0], 60, 1, 0), ==, 0);
	g_assert_cmpint(scan(f, &min), ==, 1);
	g_assert_cmpuint(min, ==, 60);
	/* a torn record in a slot whose owner the writer never saw a good record of: seq 0 */
	g_assert_cmpint(readers_join(f->rd[1], "b", NULL), ==, 0);
	junk(bad, sizeof(bad), 3);
	g_assert_cmpint(remote_write(f->w, rec_off(1), bad, sizeof(bad)), ==, 0);
	g_assert_cmpint(scan(f, &min), ==, 2);
	g_assert_cmpuint(min, ==, 0);
	g_assert_cmpint(readers_list(f->wr, info, 3), ==, 2);
	g_assert_cmpuint(info[1].id, ==, remote_client_id(f->c[1])); /* by the owner word */
	g_assert_cmpint(readers_beat(f->rd[1], 70, 1, 0), ==, 0);
	g_assert_cmpint(scan(f, &min), ==, 2);
	g_assert_cmpuint(min, ==, 60);
	/* a whole table of garbage */
	{
		uint8_t *all = g_malloc(LAYOUT_READER_SLOTS * LAYOUT_READER_SLOT_SIZE);

		junk(all, LAYOUT_READER_SLOTS * LAYOUT_READER_SLOT_SIZE, 4);
		g_assert_cmpint(remote_write(f->w, rec_off(4), all, 1000), ==, 0);
		g_free(all);
	}
	g_assert_cmpint(scan(f, &min), >=, 2);
	g_assert_cmpuint(min, ==, 0);
}

/* a slot claimed (owner word set) by a client that died before writing its record */
static void test_claim(struct fx *f, gconstpointer d)
{
	uint64_t id = remote_client_id(f->c[3]), old, min;
	uint8_t byte;

	g_assert_cmpint(readers_join(f->rd[0], "a", NULL), ==, 0);
	g_assert_cmpint(remote_member_cas(f->c[3], 0, owner_off(1), 0, id, &old), ==, 0);
	g_assert_cmpuint(old, ==, 0);
	/* the table has the claim: the next reader goes to slot 2 */
	g_assert_cmpint(readers_join(f->rd[1], "b", NULL), ==, 0);
	g_assert_cmpuint(owner_of(f->w, 0, 2), ==, remote_client_id(f->c[1]));
	g_assert_cmpint(scan(f, &min), ==, 2);
	/* the claim goes after the timeout (a look every tenth scan): fenced */
	while (owner_of(f->w, 0, 1)) {
		g_assert_cmpint(readers_beat(f->rd[0], 1, 1, 0), ==, 0);
		g_assert_cmpint(readers_beat(f->rd[1], 1, 1, 0), ==, 0);
		g_usleep(TIMEOUT_MS * 50);
		g_assert_cmpint(scan(f, &min), ==, 2);
	}
	g_assert_cmpint(remote_read(f->c[3], 0, &byte, 1), <, 0);
	g_assert_cmpint(readers_join(f->rd[2], "c", NULL), ==, 0);
	g_assert_cmpuint(owner_of(f->w, 0, 1), ==, remote_client_id(f->c[2]));
}

struct hammer {
	struct readers *rd;
	gint stop;
	gint bad;
	gint calls;
};

static gpointer hammer_main(gpointer arg)
{
	struct hammer *h = arg;

	while (!g_atomic_int_get(&h->stop)) {
		if (readers_read_ok(h->rd) != 0)
			g_atomic_int_inc(&h->bad);
		g_atomic_int_inc(&h->calls);
	}
	return NULL;
}

/* read_ok from several threads while the reader beats: every read stands */
static void test_threads(struct fx *f, gconstpointer d)
{
	struct hammer h = { .rd = f->rd[0] };
	GThread *t[4];
	uint64_t t0;
	int i;

	g_assert_cmpint(readers_join(f->rd[0], "threads", NULL), ==, 0);
	for (i = 0; i < 4; i++)
		t[i] = g_thread_new("hammer", hammer_main, &h);
	t0 = clock_now_ns();
	for (i = 0; clock_now_ns() - t0 < 3ULL * TIMEOUT_MS * 1000000ULL; i++) {
		g_assert_cmpint(readers_beat(f->rd[0], (uint64_t)i, 1, 0), ==, 0);
		/* every other one past the deadline: the slow path, from several threads */
		g_usleep(i % 2 ? TIMEOUT_MS * 200 : TIMEOUT_MS * 700);
	}
	g_atomic_int_set(&h.stop, 1);
	for (i = 0; i < 4; i++)
		g_thread_join(t[i]);
	g_assert_cmpint(h.bad, ==, 0);
	g_assert_cmpint(h.calls, >, 0);
}

/* ---- a two-member set ---- */

struct set_fx {
	struct memserver_proc ms[2];
	struct remote *w; /* the writer: holds the lease, wrote the records */
	struct super *sb;
	struct readers *wr;
	struct remote *c[2];
	struct readers *rd[2];
};

static struct remote *set_open(struct set_fx *f, bool read_only)
{
	struct remote_server srv[2] = {
		{ .host = "127.0.0.1", .port = f->ms[0].tcp_port },
		{ .host = "127.0.0.1", .port = f->ms[1].tcp_port },
	};
	struct remote_config cfg;
	struct remote *r;
	char *msg = NULL;

	memset(&cfg, 0, sizeof(cfg));
	xport_params_init(&cfg.member.params);
	cfg.member.params.quiet = true;
	cfg.member.transport = "tcp";
	cfg.member.qps = 2;
	cfg.member.bounce_size = 1U << 20;
	cfg.member.reconnect_timeout_ms = 2000;
	cfg.servers = srv;
	cfg.nservers = 2;
	cfg.read_only = read_only;
	if (remote_open(&cfg, &r, &msg) < 0)
		g_error("opening the set: %s", msg);
	return r;
}

static void set_setup(struct set_fx *f, gconstpointer d)
{
	const char *const args[] = { "--size", "64M", "--port", "0", NULL };
	char *msg = NULL;
	int i;

	for (i = 0; i < 2; i++)
		memserver_launch(args, &f->ms[i]);
	f->w = set_open(f, false);
	f->sb = super_new(f->w);
	if (super_lease_acquire(f->sb, "writer", 0, SUPER_LEASE_WAIT, &msg) < 0)
		g_error("the set's lease: %s", msg);
	g_assert_true(remote_is_set(f->w));
	f->wr = readers_new(f->w);
	for (i = 0; i < 2; i++) {
		f->c[i] = set_open(f, true);
		g_assert_true(remote_is_set(f->c[i]));
		g_assert_cmpuint(remote_nmembers(f->c[i]), ==, 2);
		f->rd[i] = readers_new(f->c[i]);
	}
}

static void set_teardown(struct set_fx *f, gconstpointer d)
{
	int i;

	for (i = 0; i < 2; i++) {
		readers_destroy(f->rd[i]);
		remote_close(f->c[i]);
	}
	readers_destroy(f->wr);
	super_lease_release(f->sb);
	super_destroy(f->sb);
	remote_close(f->w);
	for (i = 0; i < 2; i++)
		tfx_memserver_kill(&f->ms[i].pid);
}

/* a record as a reader writes it (id 0: zeros), into slot k of member i */
static void put_rec(struct remote *r, unsigned int i, unsigned int k, uint64_t id,
		    uint64_t beat, uint64_t applied)
{
	uint8_t b[LAYOUT_READER_REC_SIZE] = { 0 };
	uint64_t w[5] = { htole64(id), htole64(beat), htole64(applied), 0, 0 };
	uint32_t crc;

	if (id) {
		memcpy(b, w, sizeof(w));
		memcpy(b + 48, "crafted", 7);
		crc = htole32(layout_crc(b, sizeof(b)));
		memcpy(b + 40, &crc, 4);
	}
	g_assert_cmpint(remote_member_write(r, i, rec_off(k), b, sizeof(b)), ==, 0);
}

static int set_scan(struct set_fx *f, uint64_t *min)
{
	int n = readers_scan(f->wr, min);

	g_assert_cmpint(n, >=, 0);
	return n;
}

static void test_set(struct set_fx *f, gconstpointer d)
{
	uint8_t bad[LAYOUT_READER_REC_SIZE], byte;
	uint64_t id0 = remote_client_id(f->c[0]), id1 = remote_client_id(f->c[1]), min;
	int i, n;

	g_assert_cmpint(readers_join(f->rd[0], "a", NULL), ==, 0);
	g_assert_cmpint(readers_join(f->rd[1], "b", NULL), ==, 0);
	for (i = 0; i < 2; i++) { /* the slot and the record on every member */
		g_assert_cmpuint(owner_of(f->w, (unsigned int)i, 0), ==, id0);
		g_assert_cmpuint(owner_of(f->w, (unsigned int)i, 1), ==, id1);
		g_assert_false(rec_is_zero(f->w, (unsigned int)i, 0));
	}
	g_assert_cmpint(readers_beat(f->rd[0], 9, 1, 0), ==, 0);
	g_assert_cmpint(readers_beat(f->rd[1], 12, 1, 0), ==, 0);
	g_assert_cmpint(set_scan(f, &min), ==, 2);
	g_assert_cmpuint(min, ==, 9);
	/* a's record damaged on member 0: member 1's copy stands */
	junk(bad, sizeof(bad), 5);
	g_assert_cmpint(remote_member_write(f->w, 0, rec_off(0), bad, sizeof(bad)), ==, 0);
	g_assert_cmpint(readers_beat(f->rd[1], 13, 1, 0), ==, 0);
	g_assert_cmpint(set_scan(f, &min), ==, 2);
	g_assert_cmpuint(min, ==, 9);
	/*
	 * Slot 3 holds different readers on the two members (a rebuilt member's
	 * stale copy, say): both count, by id.
	 */
	put_rec(f->w, 0, 3, 0x1111, 50, 5);
	put_rec(f->w, 1, 3, 0x2222, 2, 8);
	g_assert_cmpint(set_scan(f, &min), ==, 4);
	g_assert_cmpuint(min, ==, 5);
	put_rec(f->w, 0, 3, 0, 0, 0);
	put_rec(f->w, 1, 3, 0, 0, 0);
	g_assert_cmpint(set_scan(f, &min), ==, 2);
	g_assert_cmpuint(min, ==, 9);
	/* a stops: expired on both members, fenced on both */
	for (i = 0, n = 2; i < 100 && n == 2; i++) {
		g_assert_cmpint(readers_beat(f->rd[1], 14, 1, 0), ==, 0);
		g_usleep(TIMEOUT_MS * 100);
		n = set_scan(f, &min);
	}
	g_assert_cmpint(n, ==, 1);
	g_assert_cmpuint(min, ==, 14);
	for (i = 0; i < 2; i++) {
		g_assert_cmpuint(owner_of(f->w, (unsigned int)i, 0), ==, 0);
		g_assert_true(rec_is_zero(f->w, (unsigned int)i, 0));
		g_assert_cmpint(remote_member_read(f->c[0], (unsigned int)i, 0, &byte, 1), <, 0);
	}
	g_assert_cmpint(readers_beat(f->rd[0], 10, 1, 0), ==, -ESTALE);
	g_assert_cmpint(readers_read_ok(f->rd[0]), ==, -ESTALE);
	/* member 1 dies: b beats on with member 0, the writer scans member 0 */
	tfx_memserver_kill(&f->ms[1].pid);
	g_assert_cmpint(readers_beat(f->rd[1], 15, 1, 0), ==, 0);
	g_assert_false(remote_member_up(f->c[1], 1));
	g_assert_cmpint(readers_beat(f->rd[1], 16, 1, 0), ==, 0);
	g_assert_cmpint(set_scan(f, &min), ==, 1);
	g_assert_false(remote_member_up(f->w, 1));
	g_assert_cmpuint(min, ==, 16);
	g_assert_cmpint(readers_read_ok(f->rd[1]), ==, 0);
	readers_leave(f->rd[1]);
	g_assert_cmpuint(owner_of(f->w, 0, 1), ==, 0);
	g_assert_cmpint(set_scan(f, &min), ==, 0);
}

/* ---- the model ---- */

enum mstate { M_OUT, M_IN, M_STOPPED, M_EXPIRED };

struct model {
	enum mstate st[NREMOTES];
	uint64_t applied[NREMOTES];
	uint64_t beat_ns[NREMOTES]; /* when its last beat (or join) was issued */
	uint64_t seen_ns[NREMOTES]; /* end of the first scan after that beat: the writer saw it */
};

static void model_fail(guint32 seed, int step, const char *what)
{
	g_error("seed %u step %d: %s (RMEMFS_READERS_SEED=%u replays)", seed, step, what, seed);
}

/* one scan, compared with what the model allows; readers found expired become M_EXPIRED */
static void check(struct fx *f, struct model *mo, guint32 seed, int step)
{
	struct reader_info info[LAYOUT_READER_SLOTS];
	uint64_t min, want = UINT64_MAX, start, end, to_ns = TIMEOUT_MS * 1000000ULL;
	int i, j, n, ni, want_n = 0;
	bool listed;
	char *what;

	start = clock_now_ns();
	n = scan(f, &min);
	end = clock_now_ns();
	ni = readers_list(f->wr, info, LAYOUT_READER_SLOTS);
	if (ni != n)
		model_fail(seed, step, "the list and the count differ");
	for (i = 0; i < NREMOTES; i++) {
		for (j = 0, listed = false; j < ni && !listed; j++)
			listed = info[j].id == remote_client_id(f->c[i]);
		if (mo->st[i] != M_OUT && mo->st[i] != M_EXPIRED && !mo->seen_ns[i])
			mo->seen_ns[i] = end;
		switch (mo->st[i]) {
		case M_IN:
			if (!listed) {
				what = g_strdup_printf("reader %d is live but was not counted", i);
				model_fail(seed, step, what);
			}
			break;
		case M_STOPPED:
			if (!listed) {
				if (end - mo->beat_ns[i] < to_ns) {
					what = g_strdup_printf("reader %d expired after %"
							       G_GUINT64_FORMAT " ms", i,
							       (end - mo->beat_ns[i]) / 1000000);
					model_fail(seed, step, what);
				}
				mo->st[i] = M_EXPIRED;
			} else if (start > mo->seen_ns[i] && start - mo->seen_ns[i] >= to_ns) {
				what = g_strdup_printf("reader %d silent for %" G_GUINT64_FORMAT
						       " ms is still counted", i,
						       (start - mo->seen_ns[i]) / 1000000);
				model_fail(seed, step, what);
			}
			break;
		default:
			if (listed) {
				what = g_strdup_printf("reader %d is out but was counted", i);
				model_fail(seed, step, what);
			}
			break;
		}
		if (mo->st[i] == M_IN || mo->st[i] == M_STOPPED) {
			want_n++;
			want = MIN(want, mo->applied[i]);
		}
	}
	if (n != want_n || min != want) {
		what = g_strdup_printf("%d live readers with min %" G_GUINT64_FORMAT ", the model "
				       "says %d and %" G_GUINT64_FORMAT, n, min, want_n, want);
		model_fail(seed, step, what);
	}
}

static void model_beat(struct fx *f, struct model *mo, int i, guint32 seed, int step)
{
	uint64_t t0 = clock_now_ns();

	if (readers_beat(f->rd[i], mo->applied[i], 1, 0) != 0)
		model_fail(seed, step, "a live reader's beat failed");
	mo->beat_ns[i] = t0;
	mo->seen_ns[i] = 0;
}

static void test_model(struct fx *f, gconstpointer d)
{
	const char *env = g_getenv("RMEMFS_READERS_SEED");
	guint32 seed = env ? (guint32)strtoul(env, NULL, 10) : g_random_int();
	GRand *rnd = g_rand_new_with_seed(seed);
	struct model mo = { 0 };
	int step, i, op, expired = 0, stopped = 0;
	uint8_t byte;

	printf("# seed %u (RMEMFS_READERS_SEED=%u replays)\n", seed, seed);
	fflush(stdout);
	for (step = 0; step < MODEL_STEPS; step++) {
		/* the readers not stopped keep beating, whatever the dice say */
		for (i = 0; i < NREMOTES; i++)
			if (mo.st[i] == M_IN && clock_now_ns() - mo.beat_ns[i] >
						     TIMEOUT_MS * 1000000ULL / 4)
				model_beat(f, &mo, i, seed, step);
		i = g_rand_int_range(rnd, 0, NREMOTES);
		op = g_rand_int_range(rnd, 0, 10);
		if (op == 9) {
			g_usleep(TIMEOUT_MS * 1000 / 4);
		} else if (mo.st[i] == M_EXPIRED) {
			/* what an expired reader sees; then a new client in its place */
			if (readers_beat(f->rd[i], mo.applied[i] + 1, 1, 0) != -ESTALE ||
			    readers_read_ok(f->rd[i]) != -ESTALE ||
			    remote_read(f->c[i], 0, &byte, 1) == 0)
				model_fail(seed, step, "an expired reader can still beat or read");
			renew(f, i);
			mo.st[i] = M_OUT;
			expired++;
		} else if (mo.st[i] == M_OUT && op < 6) {
			mo.beat_ns[i] = clock_now_ns();
			if (readers_join(f->rd[i], "model", NULL) != 0)
				model_fail(seed, step, "a join failed");
			mo.st[i] = M_IN;
			mo.applied[i] = 0;
			mo.seen_ns[i] = 0;
		} else if (mo.st[i] == M_IN && op < 5) {
			mo.applied[i] += (uint64_t)g_rand_int_range(rnd, 0, 100);
			model_beat(f, &mo, i, seed, step);
		} else if (mo.st[i] == M_IN && op < 7) {
			readers_leave(f->rd[i]);
			mo.st[i] = M_OUT;
		} else if (mo.st[i] == M_IN && op == 7) {
			mo.st[i] = M_STOPPED; /* crashed, SIGSTOPped, cut off */
			stopped++;
		}
		check(f, &mo, seed, step);
	}
	g_test_message("%d readers stopped beating, %d of them seen expired", stopped, expired);
	g_rand_free(rnd);
}

int main(int argc, char **argv)
{
	g_setenv("RMEM_TEST_READERS_TIMEOUT_MS", G_STRINGIFY(TIMEOUT_MS), TRUE);
	g_test_init(&argc, &argv, NULL);

#define ADD(path, fn) g_test_add(path, struct fx, NULL, setup, fn, teardown)
	ADD("/readers/join-scan", test_join_scan);
	ADD("/readers/full", test_full);
	ADD("/readers/expire", test_expire);
	ADD("/readers/owner-lost", test_owner_lost);
	ADD("/readers/leave", test_leave);
	ADD("/readers/damaged", test_damaged);
	ADD("/readers/claim", test_claim);
	ADD("/readers/threads", test_threads);
	ADD("/readers/model", test_model);
#undef ADD
	g_test_add("/readers/set", struct set_fx, NULL, set_setup, test_set, set_teardown);
	return g_test_run();
}
