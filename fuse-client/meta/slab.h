/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * slab.h - records of one size without malloc's per-chunk header, for the
 * inode records and directory entries that a large mount holds millions of
 * (docs/PERFORMANCE.md, "Client RAM per small file"). glibc puts an 8-byte
 * header before every chunk and rounds chunks to 16 bytes: a 112-byte inode
 * record takes 128 bytes there, 112 here.
 *
 * Objects come from 64 KiB pages mapped from the kernel on 64 KiB
 * boundaries, so an object finds its page by masking its address. A page whose
 * last object is freed goes back to the kernel (munmap), but for one empty
 * page per slab, kept against a create/delete loop mapping and unmapping a
 * page each time. Objects come zeroed; like g_malloc, slab_alloc aborts when
 * the kernel refuses memory. Each slab has its own mutex (a leaf lock).
 */
#ifndef RMEM_SLAB_H
#define RMEM_SLAB_H

#include <stddef.h>
#include <stdint.h>

#include <glib.h>

#define SLAB_PAGE_SIZE (64U * 1024)
#define SLAB_MAX_OBJECT 1024U /* larger objects belong to malloc */

struct slab_page;

/* fields are the slab's own (under lock); a zeroed slab with size set is ready (SLAB_INIT) */
struct slab {
	GMutex lock;
	uint32_t size; /* object bytes: a multiple of 8, 8 .. SLAB_MAX_OBJECT */
	uint32_t per_page; /* objects a page holds (0 until the first page) */
	struct slab_page *partial; /* pages with both used and free objects */
	struct slab_page *spare; /* an empty page kept, or NULL */
	uint64_t pages; /* pages mapped, the spare one included */
	uint64_t objects; /* objects handed out and not freed */
};

#define SLAB_INIT(bytes) { .size = (bytes) }

/* a zeroed object of s->size bytes */
void *slab_alloc(struct slab *s);
/* give back p (from slab_alloc on s; NULL is ignored) */
void slab_free(struct slab *s, void *p);
/* pages mapped and objects in use (for tests and statistics) */
void slab_usage(struct slab *s, uint64_t *pages, uint64_t *objects);
/* unmap the spare page, if any (a slab with no objects then holds no memory) */
void slab_shrink(struct slab *s);

#endif /* RMEM_SLAB_H */
