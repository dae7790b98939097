// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test_slab.c - the slab allocator (fuse-client/meta/slab.c) against a model:
 * seeded random allocations and frees over slabs of several sizes, in a
 * growing phase and a shrinking one. Every object comes zeroed, lies inside
 * its page, and is filled with a pattern of its own that must be intact
 * while it lives (two live objects that overlapped would break one). The
 * slab's counts must match the model's, and it may map no page beyond those
 * its live objects sit on plus one spare: empty pages go back. At the end
 * everything is freed and slab_shrink leaves no page mapped.
 * RMEMFS_SLAB_SEED replays a seed (printed).
 */
#include <stdlib.h>
#include <string.h>

#include <glib.h>

#include "slab.h"

#define OPS 60000
#define CHECK_EVERY 1999
#define PAGE_HEADER 32 /* slab.c's SLAB_HDR: objects start past it */

static const uint32_t sizes[] = { 8, 24, 112, 272, SLAB_MAX_OBJECT };
#define NSLABS G_N_ELEMENTS(sizes)

struct live {
	uint8_t *p;
	uint32_t id;
};

struct model {
	struct slab slabs[NSLABS];
	GArray *live[NSLABS]; /* struct live */
	guint32 seed;
	unsigned int op;
	uint32_t next_id;
};

#define MFAIL(md, fmt, ...)                                                               \
	g_error("slab model (seed %u, op %u): " fmt, (md)->seed, (md)->op, ##__VA_ARGS__)

static uint8_t pattern(uint32_t id, size_t i)
{
	return (uint8_t)(id * 31 + i * 7 + 1);
}

static void fill(struct live *l, uint32_t size)
{
	size_t i;

	for (i = 0; i < size; i++)
		l->p[i] = pattern(l->id, i);
}

static void check_object(struct model *md, const struct live *l, uint32_t size)
{
	size_t i;

	for (i = 0; i < size; i++)
		if (l->p[i] != pattern(l->id, i))
			MFAIL(md, "object %u (%u bytes) at %p: byte %zu changed", l->id, size,
			      (void *)l->p, i);
}

static gpointer page_of(const uint8_t *p)
{
	return GSIZE_TO_POINTER((uintptr_t)p & ~(uintptr_t)(SLAB_PAGE_SIZE - 1));
}

static void do_alloc(struct model *md, unsigned int k)
{
	struct live l = { .p = slab_alloc(&md->slabs[k]), .id = md->next_id++ };
	uintptr_t page = (uintptr_t)page_of(l.p);
	uint32_t i;

	if ((uintptr_t)l.p % 8 || (uintptr_t)l.p < page + PAGE_HEADER ||
	    (uintptr_t)l.p + sizes[k] > page + SLAB_PAGE_SIZE)
		MFAIL(md, "object at %p (%u bytes) is misplaced in its page", (void *)l.p,
		      sizes[k]);
	for (i = 0; i < sizes[k]; i++)
		if (l.p[i])
			MFAIL(md, "new object at %p not zeroed (byte %u)", (void *)l.p, i);
	fill(&l, sizes[k]);
	g_array_append_val(md->live[k], l);
}

static void do_free(struct model *md, unsigned int k, guint idx)
{
	struct live *l = &g_array_index(md->live[k], struct live, idx);

	check_object(md, l, sizes[k]);
	slab_free(&md->slabs[k], l->p);
	g_array_remove_index_fast(md->live[k], idx);
}

/* the slab's counts against the model; every live object intact */
static void check_slab(struct model *md, unsigned int k)
{
	GHashTable *pages = g_hash_table_new(g_direct_hash, g_direct_equal);
	uint64_t npages, nobjects;
	guint i;

	for (i = 0; i < md->live[k]->len; i++) {
		struct live *l = &g_array_index(md->live[k], struct live, i);

		check_object(md, l, sizes[k]);
		g_hash_table_add(pages, page_of(l->p));
	}
	slab_usage(&md->slabs[k], &npages, &nobjects);
	if (nobjects != md->live[k]->len)
		MFAIL(md, "%u-byte slab: %" G_GUINT64_FORMAT " objects, the model %u", sizes[k],
		      nobjects, md->live[k]->len);
	if (npages < g_hash_table_size(pages) || npages > g_hash_table_size(pages) + 1)
		MFAIL(md, "%u-byte slab: %" G_GUINT64_FORMAT " pages mapped, live objects on %u",
		      sizes[k], npages, g_hash_table_size(pages));
	g_hash_table_destroy(pages);
}

static void run_phase(struct model *md, GRand *rng, unsigned int ops, double p_alloc)
{
	unsigned int i, k;

	for (i = 0; i < ops; i++, md->op++) {
		k = (unsigned int)g_rand_int_range(rng, 0, NSLABS);
		if (!md->live[k]->len || g_rand_double(rng) < p_alloc)
			do_alloc(md, k);
		else
			do_free(md, k, (guint)g_rand_int_range(rng, 0, (gint32)md->live[k]->len));
		if (md->op % CHECK_EVERY == 0)
			check_slab(md, k);
	}
}

static void test_model(void)
{
	const char *env = g_getenv("RMEMFS_SLAB_SEED");
	struct model md = { 0 };
	uint64_t npages, nobjects;
	unsigned int k;
	GRand *rng;

	md.seed = env ? (guint32)strtoul(env, NULL, 0) : g_test_rand_int();
	g_test_message("slab model seed %u (RMEMFS_SLAB_SEED=%u replays it)", md.seed, md.seed);
	rng = g_rand_new_with_seed(md.seed);
	for (k = 0; k < NSLABS; k++) {
		md.slabs[k].size = sizes[k];
		md.live[k] = g_array_new(FALSE, FALSE, sizeof(struct live));
	}
	run_phase(&md, rng, OPS, 0.7); /* grows: pages fill and new ones are mapped */
	run_phase(&md, rng, OPS, 0.45); /* frees at random: pages empty and go back */
	for (k = 0; k < NSLABS; k++) {
		check_slab(&md, k);
		while (md.live[k]->len)
			do_free(&md, k, (guint)g_rand_int_range(rng, 0, (gint32)md.live[k]->len));
		check_slab(&md, k);
		slab_shrink(&md.slabs[k]);
		slab_usage(&md.slabs[k], &npages, &nobjects);
		g_assert_cmpuint(npages, ==, 0);
		g_assert_cmpuint(nobjects, ==, 0);
		g_array_free(md.live[k], TRUE);
	}
	g_rand_free(rng);
}

/* one object made and freed over and over keeps one page (the spare), not a map per loop */
static void test_spare(void)
{
	struct slab s = SLAB_INIT(112);
	uint64_t npages, nobjects;
	void *keep, *p;
	int i;

	keep = slab_alloc(&s);
	for (i = 0; i < 1000; i++)
		slab_free(&s, slab_alloc(&s));
	slab_usage(&s, &npages, &nobjects);
	g_assert_cmpuint(npages, ==, 1);
	g_assert_cmpuint(nobjects, ==, 1);
	slab_free(&s, keep);
	p = slab_alloc(&s); /* the spare page serves it */
	slab_usage(&s, &npages, &nobjects);
	g_assert_cmpuint(npages, ==, 1);
	slab_free(&s, p);
	slab_shrink(&s);
	slab_usage(&s, &npages, &nobjects);
	g_assert_cmpuint(npages, ==, 0);
}

int main(int argc, char **argv)
{
	g_test_init(&argc, &argv, NULL);
	g_test_add_func("/slab/model", test_model);
	g_test_add_func("/slab/spare", test_spare);
	return g_test_run();
}
