/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * follow.h - a read-only mount following the writer's metadata (rmemfs -o
 * ro): it takes a reader slot in the pool before loading (readers.h), then
 * every refresh interval applies the transactions the writer made durable
 * since, whole, under the metadata lock, tells the FUSE layer what changed
 * (to drop the kernel's and the block cache's copies), waits until no data
 * read mapped under the older state is in flight, and only then publishes
 * how far it got: the writer reuses space freed by a transaction only once
 * every live reader published it. Protocol and guarantees:
 * docs/ARCHITECTURE.md, "Readers beside the writer".
 */
#ifndef RMEM_FOLLOW_H
#define RMEM_FOLLOW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <glib.h>

struct meta;

#define FOLLOW_DEFAULT_REFRESH_MS 1000

/* a changed name: the kernel's entry dir/name is stale */
struct follow_entry {
	uint64_t dir;
	char name[];
};

struct follow_hooks {
	/*
	 * Called without locks after a refresh changed something: inos
	 * (uint64_t) whose attributes changed, data_inos those whose data did
	 * too (a subset), entries (struct follow_entry *) of names that
	 * appeared, went or now name another inode.
	 */
	void (*changed)(void *ctx, GArray *inos, GArray *data_inos, GPtrArray *entries);
	/* return once no data read that mapped blocks before this call is in flight */
	void (*drain)(void *ctx);
	/*
	 * Around applying transactions that change the data of existing regular
	 * files (inos ascending, no lock held): enter true before, so that no
	 * read of them straddles the change and no cached block of the older
	 * state survives it; enter false after.
	 */
	void (*guard)(void *ctx, const uint64_t *inos, guint n, bool enter);
	void *ctx;
};

/* mount.c: take a reader slot before the metadata is read; 0 or -errno with *err_msg */
int follow_join(struct meta *m, const char *host, char **err_msg);
/*
 * mount.c: the load is done: where the follower starts. load_again loads
 * the pool's newest state into a new struct meta beside m (sharing its pool
 * and superblock, without an allocator), for a reader that fell further
 * behind than the writer's journal; free_loaded frees one.
 */
typedef int (*follow_load_fn)(struct meta *m, struct meta **out, char **err_msg);
void follow_loaded(struct meta *m, follow_load_fn load_again, void (*free_loaded)(struct meta *f));
/* start the follower thread: refresh every refresh_ms */
int follow_start(struct meta *m, unsigned int refresh_ms, const struct follow_hooks *h);
/* stop the thread (NULL-tolerant, idempotent) */
void follow_stop(struct meta *m);
/* stop, and give the slot back (unmount) */
void follow_leave(struct meta *m);
/* is m a following reader? */
bool follow_active(const struct meta *m);
/*
 * After a data READ of the pool completed: may its bytes be returned? 0, or
 * -EIO once the writer expired this reader (its space may have been reused).
 */
int follow_read_ok(struct meta *m);
/*
 * Return once a whole refresh ran after the call (a data read that found a
 * checksum mismatch waits for the writer's newer checksums): 0, -EINVAL if
 * m follows nothing, -ETIMEDOUT after three refresh intervals and a second.
 */
int follow_wait_refresh(struct meta *m);
/* "key value" lines for the stats xattr; bytes written (truncated at cap) */
size_t follow_stats_text(struct meta *m, char *buf, size_t cap);

#endif /* RMEM_FOLLOW_H */
