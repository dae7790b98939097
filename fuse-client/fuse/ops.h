/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * ops.h - the FUSE lowlevel operations of rmemfs.
 *
 * ops.c translates each FUSE request into calls on meta (names, attributes,
 * xattrs, durability) and on the cache (file data; cache.h, which sits on
 * io.h), and replies exactly once on every path. main.c creates the session
 * with ops_lowlevel and a struct ops_ctx as its userdata.
 */
#ifndef RMEM_OPS_H
#define RMEM_OPS_H

#include <stdbool.h>
#include <stdint.h>

#include <fuse_lowlevel.h>

#include "devio.h"

struct meta;
struct io;
struct cache;
struct remote;
struct swapmode;
struct inval;

struct ops_ctx {
	struct fuse_session *se; /* for notifications to the kernel */
	struct meta *meta;
	struct io *io;
	struct cache *cache;
	struct remote *remote; /* its state heads the stats text */
	struct inval *inval; /* direct writes answered after the kernel dropped their range */
	double entry_timeout; /* seconds the kernel may cache names (and negative lookups) */
	double attr_timeout; /* seconds the kernel may cache attributes */
	bool direct_io; /* every open bypasses the page cache */
	bool writeback_cache; /* the kernel's writeback cache (off anyway with direct_io) */
	bool odirect_uncached; /* -o odirect=uncached: O_DIRECT opens may be direct */
	struct devio devio; /* /dev/fuse I/O: the kernel's INIT offer, what we ask beyond libfuse */
	bool default_permissions; /* the kernel checks permissions: access() is never asked */
	struct swapmode *swap; /* -o swap: the daemon is fit to serve swap; else NULL */
};

extern const struct fuse_lowlevel_ops ops_lowlevel;

#endif /* RMEM_OPS_H */
