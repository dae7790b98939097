/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * reader.h - the FUSE side of a read-only mount that follows the writer
 * (follow.h): what the follower applied leaves the kernel's caches and the
 * block cache, and data reads are fenced against it (io.h).
 */
#ifndef RMEM_READER_H
#define RMEM_READER_H

struct ops_ctx;

/* start following (ctx fully set up: meta, io, cache, se); 0 when m follows nothing */
int reader_start(struct ops_ctx *ctx, unsigned int refresh_ms);

#endif /* RMEM_READER_H */
