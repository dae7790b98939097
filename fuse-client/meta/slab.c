// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * slab.c - records of one size without malloc's per-chunk header (slab.h).
 *
 * A page: its header, then per_page objects. Objects never handed out are
 * taken in address order (the last `fresh` of the page), so a new page is
 * touched only as far as it is used; freed ones are linked through their
 * first word and taken first. A page is on the partial list while it has both used and
 * free objects: full pages are on no list (a free puts them back), empty
 * ones are unmapped or become the spare.
 *
 * Under AddressSanitizer, objects not handed out are poisoned: a use after
 * slab_free is reported as it would be after free.
 */
#define G_LOG_DOMAIN "rmemfs-meta"

#include <assert.h>
#include <errno.h>
#include <string.h>
#include <sys/mman.h>

#include "list.h"
#include "slab.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#else
#define ASAN_POISON_MEMORY_REGION(addr, size) ((void)(addr), (void)(size))
#define ASAN_UNPOISON_MEMORY_REGION(addr, size) ((void)(addr), (void)(size))
#endif

struct slab_page {
	struct slab_page *prev, *next; /* on the partial list */
	void *free; /* freed objects, linked through their first word */
	uint32_t used; /* objects handed out */
	uint32_t fresh; /* objects never handed out: the last `fresh` of the page */
};

#define SLAB_HDR 32U /* the header, rounded up to keep objects 16-byte aligned */

static_assert(sizeof(struct slab_page) <= SLAB_HDR, "slab page header");

static uint8_t *page_objects(struct slab_page *p)
{
	return (uint8_t *)p + SLAB_HDR;
}

static struct slab_page *page_of(const void *obj)
{
	return (struct slab_page *)((uintptr_t)obj & ~(uintptr_t)(SLAB_PAGE_SIZE - 1));
}

/* a page-size mapping on a page-size boundary: map twice that, unmap the rest */
static struct slab_page *page_map(void)
{
	size_t len = 2 * SLAB_PAGE_SIZE, head;
	uint8_t *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		g_error("slab: mmap of %zu bytes: %s", len, g_strerror(errno));
	head = (SLAB_PAGE_SIZE - (uintptr_t)p % SLAB_PAGE_SIZE) % SLAB_PAGE_SIZE;
	if (head)
		munmap(p, head);
	munmap(p + head + SLAB_PAGE_SIZE, len - head - SLAB_PAGE_SIZE);
	return (struct slab_page *)(p + head);
}

static void page_unmap(struct slab *s, struct slab_page *p)
{
	ASAN_UNPOISON_MEMORY_REGION(p, SLAB_PAGE_SIZE); /* the range may be mapped again */
	if (munmap(p, SLAB_PAGE_SIZE) < 0)
		g_warning("slab: munmap: %s", g_strerror(errno));
	s->pages--;
}

/* an empty page, all fresh: the spare, or a new one */
static struct slab_page *page_get(struct slab *s)
{
	struct slab_page *p = s->spare;

	if (p) {
		s->spare = NULL;
	} else {
		p = page_map();
		s->pages++;
		if (!s->per_page)
			s->per_page = (SLAB_PAGE_SIZE - SLAB_HDR) / s->size;
		ASAN_POISON_MEMORY_REGION(page_objects(p), (size_t)s->per_page * s->size);
	}
	p->prev = p->next = NULL;
	p->free = NULL;
	p->used = 0;
	p->fresh = s->per_page;
	return p;
}

static void partial_add(struct slab *s, struct slab_page *p)
{
	p->prev = NULL;
	p->next = s->partial;
	if (s->partial)
		s->partial->prev = p;
	s->partial = p;
}

static void partial_del(struct slab *s, struct slab_page *p)
{
	LIST_UNLINK(s->partial, p, prev, next);
	p->prev = p->next = NULL;
}

/* one object of p (which has a free one) */
static void *page_take(struct slab *s, struct slab_page *p)
{
	void *obj = p->free;

	if (obj) {
		ASAN_UNPOISON_MEMORY_REGION(obj, s->size);
		memcpy(&p->free, obj, sizeof(void *));
	} else {
		obj = page_objects(p) + (size_t)(s->per_page - p->fresh--) * s->size;
		ASAN_UNPOISON_MEMORY_REGION(obj, s->size);
	}
	p->used++;
	return obj;
}

void *slab_alloc(struct slab *s)
{
	struct slab_page *p;
	void *obj;

	g_assert(s->size >= 8 && s->size <= SLAB_MAX_OBJECT && s->size % 8 == 0);
	g_mutex_lock(&s->lock);
	p = s->partial;
	if (!p) {
		p = page_get(s);
		partial_add(s, p);
	}
	obj = page_take(s, p);
	if (!p->free && !p->fresh)
		partial_del(s, p); /* full */
	s->objects++;
	g_mutex_unlock(&s->lock);
	memset(obj, 0, s->size);
	return obj;
}

void slab_free(struct slab *s, void *obj)
{
	struct slab_page *p;

	if (!obj)
		return;
	p = page_of(obj);
	g_mutex_lock(&s->lock);
	g_assert(p->used > 0);
	if (!p->free && !p->fresh)
		partial_add(s, p); /* was full */
	memcpy(obj, &p->free, sizeof(void *));
	ASAN_POISON_MEMORY_REGION(obj, s->size);
	p->free = obj;
	p->used--;
	s->objects--;
	if (!p->used) {
		partial_del(s, p);
		if (s->spare)
			page_unmap(s, p);
		else
			s->spare = p;
	}
	g_mutex_unlock(&s->lock);
}

void slab_usage(struct slab *s, uint64_t *pages, uint64_t *objects)
{
	g_mutex_lock(&s->lock);
	*pages = s->pages;
	*objects = s->objects;
	g_mutex_unlock(&s->lock);
}

void slab_shrink(struct slab *s)
{
	g_mutex_lock(&s->lock);
	if (s->spare) {
		page_unmap(s, s->spare);
		s->spare = NULL;
	}
	g_mutex_unlock(&s->lock);
}
