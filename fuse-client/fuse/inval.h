/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * inval.h - replies to direct writes that the kernel's page cache may have
 * gone stale against: first the kernel drops its pages of the written range
 * (FUSE_NOTIFY_INVAL_INODE), then the write is answered.
 *
 * The kernel drops a direct write's range before it sends the write, but
 * not after an asynchronous one completes (io_submit, io_uring: fs/fuse
 * fuse_direct_IO -> fuse_aio_complete), nor after any write of a
 * FOPEN_DIRECT_IO file; a buffered read or a mapping's fault in between
 * fetches the old bytes and keeps them. So such a write (ops.c says which)
 * is answered here, after its range is dropped: a read after its completion
 * reads what it wrote, as on a local filesystem. Dropping pages waits for
 * reads in flight on them, which our request threads serve; so it is done on
 * a thread of its own, never on theirs (all of them waiting here for a read
 * none of them is free to serve would be a deadlock). Functions return 0 or
 * -errno.
 */
#ifndef RMEM_INVAL_H
#define RMEM_INVAL_H

#include <stddef.h>
#include <stdint.h>

#include <fuse_lowlevel.h>

struct inval;

/* start the thread that drops ranges and replies, for session se */
int inval_start(struct fuse_session *se, struct inval **out);

/* reply n (bytes written) to req once the kernel dropped its pages of ino's [off, off + n) */
void inval_reply_write(struct inval *iv, fuse_req_t req, uint64_t ino, uint64_t off, size_t n);

/* answer what is queued and end the thread; NULL-tolerant */
void inval_stop(struct inval *iv);

#endif /* RMEM_INVAL_H */
