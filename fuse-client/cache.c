// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * cache.c - the pass-through block cache (see cache.h).
 *
 * Data goes straight between FUSE buffers and the pool through io.c; the
 * kernel page cache does all caching. Because nothing is ever held here,
 * flush, invalidate and forget have no work, and that is correct, not a
 * shortcut: the ordering they promise (dirty data in the pool before fsync's
 * meta_sync, no stale block after a truncate) holds trivially. The block
 * cache issue replaces this file behind cache.h.
 */
#define G_LOG_DOMAIN "rmemfs-cache"

#include "cache.h"

#include <errno.h>
#include <stdio.h>

#include <glib.h>

#include "io.h"
#include "units.h"

struct cache {
	struct io *io;
	struct cache_config cfg; /* kept for cache_describe; the pass-through uses none of it */
};

int cache_create(const struct cache_config *cfg, struct io *io, struct cache **out)
{
	struct cache *c;

	if (!cfg->block_size || (cfg->block_size & (cfg->block_size - 1)))
		return -EINVAL;
	c = g_new0(struct cache, 1);
	c->io = io;
	c->cfg = *cfg;
	if (cfg->writeback)
		g_message("writeback=on: this build has no block cache yet; writing through");
	g_debug("pass-through cache (cache_size and block_size wait for the block cache)");
	*out = c;
	return 0;
}

void cache_destroy(struct cache *c)
{
	g_free(c);
}

ssize_t cache_read(struct cache *c, uint64_t ino, uint64_t off, size_t len, void *buf)
{
	return io_read(c->io, ino, off, len, buf);
}

ssize_t cache_write(struct cache *c, uint64_t ino, uint64_t off, const void *buf, size_t len)
{
	return io_write(c->io, ino, off, buf, len);
}

int cache_flush(struct cache *c, uint64_t ino)
{
	return 0; /* writes went through: nothing is dirty here */
}

int cache_flush_all(struct cache *c)
{
	return 0;
}

void cache_invalidate(struct cache *c, uint64_t ino, uint64_t off, uint64_t len)
{
	/* nothing cached here; the kernel drops its own pages for these ops */
}

void cache_forget(struct cache *c, uint64_t ino)
{
}

void cache_describe(struct cache *c, char *buf, size_t cap)
{
	struct io_stats st;
	char rd[32], wr[32], zr[32];

	io_get_stats(c->io, &st);
	units_format_size(st.bytes_read, rd, sizeof(rd));
	units_format_size(st.bytes_written, wr, sizeof(wr));
	units_format_size(st.bytes_zeroed, zr, sizeof(zr));
	snprintf(buf, cap,
		 "cache: pass-through; io: %" G_GUINT64_FORMAT " reads (%s), %" G_GUINT64_FORMAT
		 " writes (%s), %s zeroed, %" G_GUINT64_FORMAT " copies",
		 st.reads, rd, st.writes, wr, zr, st.copies);
}
