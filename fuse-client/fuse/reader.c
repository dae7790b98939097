// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * reader.c - a following reader's kernel side (reader.h).
 *
 * After a refresh the follower names the inodes and the names that
 * changed. Names: the kernel forgets the entry (a name gone, or now another
 * inode). Inodes: the kernel drops the attributes, and where the data
 * changed (extents, size, mtime) its pages too, after the block cache
 * dropped its copies; the next open reads from the pool (close-to-open).
 * Files whose data is about to change are guarded while the follower
 * applies: the kernel drops their pages first, and the block cache holds
 * reads of them off until their older blocks are gone, so no read returns
 * a mix of the two states from here. Then the follower drains the data
 * reads that mapped blocks before it applied, so none is still reading a
 * block the writer may reuse once the new position is published.
 */
#define G_LOG_DOMAIN "rmemfs-reader"

#include <errno.h>
#include <string.h>

#include <glib.h>

#include "reader.h"

#include "cache.h"
#include "follow.h"
#include "io.h"
#include "ops.h"

static void drop_data(struct ops_ctx *ctx, uint64_t ino)
{
	if (ctx->cache && cache_begin_exclusive(ctx->cache, ino, UINT64_MAX) == 0)
		cache_end_exclusive(ctx->cache, ino, 0, UINT64_MAX);
}

static void inval_inode(struct ops_ctx *ctx, uint64_t ino, bool data)
{
	int rc = fuse_lowlevel_notify_inval_inode(ctx->se, ino, data ? 0 : -1, 0);

	if (rc < 0 && rc != -ENOENT)
		g_debug("invalidating inode %" G_GUINT64_FORMAT ": %s", (guint64)ino,
			g_strerror(-rc));
}

static void changed(void *arg, GArray *inos, GArray *data_inos, GPtrArray *entries)
{
	struct ops_ctx *ctx = arg;
	GHashTable *seen = g_hash_table_new(g_int64_hash, g_int64_equal);
	guint i;
	int rc;

	for (i = 0; i < entries->len; i++) {
		const struct follow_entry *e = g_ptr_array_index(entries, i);

		rc = fuse_lowlevel_notify_inval_entry(ctx->se, e->dir, e->name, strlen(e->name));
		if (rc < 0 && rc != -ENOENT)
			g_debug("invalidating entry %s: %s", e->name, g_strerror(-rc));
	}
	for (i = 0; i < data_inos->len; i++) {
		uint64_t *ino = &g_array_index(data_inos, uint64_t, i);

		if (!g_hash_table_add(seen, ino))
			continue;
		drop_data(ctx, *ino);
		inval_inode(ctx, *ino, true);
	}
	for (i = 0; i < inos->len; i++) {
		uint64_t *ino = &g_array_index(inos, uint64_t, i);

		if (g_hash_table_add(seen, ino))
			inval_inode(ctx, *ino, false);
	}
	g_hash_table_destroy(seen);
}

/*
 * Before: the kernel drops its pages of each file (a read then comes to us),
 * and the block cache shuts the file (reads wait, fetches in flight end);
 * after: the block cache drops the file's blocks and opens it again.
 */
static void guard(void *arg, const uint64_t *inos, guint n, bool enter)
{
	struct ops_ctx *ctx = arg;
	guint i;

	if (!ctx->cache)
		return;
	for (i = 0; i < n; i++) {
		if (!enter) {
			cache_end_exclusive(ctx->cache, inos[i], 0, UINT64_MAX);
			continue;
		}
		inval_inode(ctx, inos[i], true);
		if (cache_begin_exclusive(ctx->cache, inos[i], UINT64_MAX) < 0)
			g_error("cache_begin_exclusive on a reader (nothing dirty) failed");
	}
}

static void drain(void *arg)
{
	struct ops_ctx *ctx = arg;

	io_drain(ctx->io);
}

int reader_start(struct ops_ctx *ctx, unsigned int refresh_ms)
{
	struct follow_hooks h = {
		.changed = changed, .drain = drain, .guard = guard, .ctx = ctx,
	};

	if (!follow_active(ctx->meta))
		return 0;
	io_follow(ctx->io);
	return follow_start(ctx->meta, refresh_ms, &h);
}
