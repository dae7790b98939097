/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * fsck.h - consistency checks of the metadata (and repairs), for the
 * mount-time recovery and rmemfs-fsck (both in mount.c).
 *
 * Checks on a loaded struct meta (checkpoint + replayed journal):
 *   - damage found while decoding (invalid extents or entries, bad cookies)
 *   - the stored allocation bitmap against the extents
 *   - the root directory exists and is a directory
 *   - blocks used by two files (or twice by one)
 *   - every directory entry names an existing inode of the entry's type
 *   - every directory has exactly one name; no directory loops
 *   - every inode is reachable from the root
 *   - link counts: files = number of names, directories = 2 + subdirectories
 *   - symlinks have targets; the next inode number is above every inode
 * Safe repairs (made by a mount too): link counts, entry types, the bitmap,
 * the next inode number. Others (FSCK_REPAIR only): dangling entries are
 * removed, extra names of a directory removed, unreachable inodes linked
 * into /lost+found as "#<ino>", shared blocks copied so each file owns its
 * own (or dropped to a hole when the pool is full).
 *
 * Repairs change RAM only; the caller writes a checkpoint afterwards.
 */
#ifndef RMEM_FSCK_H
#define RMEM_FSCK_H

#include <stdbool.h>
#include <stdint.h>

#include <glib.h>

struct meta;

enum fsck_mode {
	FSCK_CHECK = 0, /* report only */
	FSCK_MOUNT = 1, /* repair what is safe, count the rest as unsafe */
	FSCK_REPAIR = 2, /* repair everything */
};

struct fsck_report {
	unsigned int problems; /* damage found */
	unsigned int repaired;
	unsigned int unsafe; /* problems not repaired (need rmemfs-fsck --repair) */
	char *first_unsafe;
	GPtrArray *lines; /* char *: findings and notes, in order */
	uint64_t inodes, dirs, files, symlinks, others;
	uint64_t blocks_used, data_blocks;
};

void fsck_report_init(struct fsck_report *rep);
void fsck_report_clear(struct fsck_report *rep);

/* check (and repair, per mode) a loaded meta; returns 0 or -errno (I/O while repairing) */
int fsck_check(struct meta *m, enum fsck_mode mode, struct fsck_report *rep);

struct fsck_opts {
	bool repair;
	bool force; /* check a pool a live client has mounted / take its lease */
	int lease_takeover_ms; /* 0: default */
};

#endif /* RMEM_FSCK_H */
