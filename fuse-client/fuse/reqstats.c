// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * reqstats.c - per-kind FUSE request counts and daemon times (reqstats.h).
 *
 * Two clock reads per request and three relaxed atomic adds: cheap next to
 * the two context switches every request costs.
 */
#include "reqstats.h"

#include <errno.h>
#include <linux/fuse.h>
#include <stdio.h>

#include "clock.h"

/* the request this thread read last and has not answered yet */
static __thread struct {
	uint64_t unique; /* 0: none */
	uint64_t t0;
	uint32_t opcode;
} cur;

static const char *const names[REQSTATS_OPCODES] = {
	[FUSE_LOOKUP] = "lookup",	  [FUSE_FORGET] = "forget",
	[FUSE_GETATTR] = "getattr",	  [FUSE_SETATTR] = "setattr",
	[FUSE_READLINK] = "readlink",	  [FUSE_SYMLINK] = "symlink",
	[FUSE_MKNOD] = "mknod",		  [FUSE_MKDIR] = "mkdir",
	[FUSE_UNLINK] = "unlink",	  [FUSE_RMDIR] = "rmdir",
	[FUSE_RENAME] = "rename",	  [FUSE_LINK] = "link",
	[FUSE_OPEN] = "open",		  [FUSE_READ] = "read",
	[FUSE_WRITE] = "write",		  [FUSE_STATFS] = "statfs",
	[FUSE_RELEASE] = "release",	  [FUSE_FSYNC] = "fsync",
	[FUSE_SETXATTR] = "setxattr",	  [FUSE_GETXATTR] = "getxattr",
	[FUSE_LISTXATTR] = "listxattr",	  [FUSE_REMOVEXATTR] = "removexattr",
	[FUSE_FLUSH] = "flush",		  [FUSE_INIT] = "init",
	[FUSE_OPENDIR] = "opendir",	  [FUSE_READDIR] = "readdir",
	[FUSE_RELEASEDIR] = "releasedir", [FUSE_FSYNCDIR] = "fsyncdir",
	[FUSE_GETLK] = "getlk",		  [FUSE_SETLK] = "setlk",
	[FUSE_SETLKW] = "setlkw",	  [FUSE_ACCESS] = "access",
	[FUSE_CREATE] = "create",	  [FUSE_INTERRUPT] = "interrupt",
	[FUSE_BMAP] = "bmap",		  [FUSE_DESTROY] = "destroy",
	[FUSE_IOCTL] = "ioctl",		  [FUSE_POLL] = "poll",
	[FUSE_NOTIFY_REPLY] = "notify_reply", [FUSE_BATCH_FORGET] = "batch_forget",
	[FUSE_FALLOCATE] = "fallocate",	  [FUSE_READDIRPLUS] = "readdirplus",
	[FUSE_RENAME2] = "rename2",	  [FUSE_LSEEK] = "lseek",
	[FUSE_COPY_FILE_RANGE] = "copy_file_range",
};

void reqstats_read(struct reqstats *s, const void *buf, size_t n)
{
	const struct fuse_in_header *h = buf;

	cur.unique = 0;
	if (n < sizeof(*h) || h->opcode >= REQSTATS_OPCODES)
		return;
	__atomic_add_fetch(&s->count[h->opcode], 1, __ATOMIC_RELAXED);
	cur.unique = h->unique;
	cur.opcode = h->opcode;
	cur.t0 = clock_now_ns();
}

void reqstats_ring(struct reqstats *s)
{
	__atomic_add_fetch(&s->ring, 1, __ATOMIC_RELAXED);
}

void reqstats_reply(struct reqstats *s, const struct iovec *iov, int count)
{
	const struct fuse_out_header *h;

	if (count < 1 || iov[0].iov_len < sizeof(*h) || !cur.unique)
		return;
	h = iov[0].iov_base;
	if (h->unique != cur.unique)
		return;
	__atomic_add_fetch(&s->ns[cur.opcode], clock_now_ns() - cur.t0, __ATOMIC_RELAXED);
	__atomic_add_fetch(&s->timed[cur.opcode], 1, __ATOMIC_RELAXED);
	cur.unique = 0;
}

ssize_t reqstats_text(const struct reqstats *s, char *buf, size_t cap)
{
	size_t pos = 0;
	unsigned int op;
	int k;

	for (op = 0; op < REQSTATS_OPCODES; op++) {
		uint64_t n = __atomic_load_n(&s->count[op], __ATOMIC_RELAXED);
		uint64_t timed = __atomic_load_n(&s->timed[op], __ATOMIC_RELAXED);
		uint64_t ns = __atomic_load_n(&s->ns[op], __ATOMIC_RELAXED);
		char other[16];
		const char *name = names[op];

		if (!n)
			continue;
		if (!name) {
			snprintf(other, sizeof(other), "op%u", op);
			name = other;
		}
		k = snprintf(buf + pos, cap - pos, "fuse_%s %llu\nfuse_%s_us %.1f\n", name,
			     (unsigned long long)n, name, timed ? ns / 1000.0 / timed : 0.0);
		if (k < 0 || (size_t)k >= cap - pos)
			return -ERANGE;
		pos += (size_t)k;
	}
	k = snprintf(buf + pos, cap - pos, "fuse_ring_requests %llu\n",
		     (unsigned long long)__atomic_load_n(&s->ring, __ATOMIC_RELAXED));
	if (k < 0 || (size_t)k >= cap - pos)
		return -ERANGE;
	return (ssize_t)(pos + (size_t)k);
}
