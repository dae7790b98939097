// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * commit.c - making metadata durable (commit.h): journal writes,
 * checkpoints, the committer thread, commit_sync().
 *
 * One writer at a time holds m->commit_lock (before m->lock). A journal
 * write takes the pending transactions under m->lock, writes them after the
 * journal's tail WITHOUT m->lock (metadata operations go on meanwhile and queue new
 * transactions), then marks them durable and releases the block frees they
 * carried. A failed write puts the bytes back in front of the queue; the
 * next attempt writes the same bytes at the same place.
 *
 * A checkpoint replaces the journal write when the journal would pass 3/4
 * of its area (or when forced): serialise everything under m->lock - that includes
 * every committed transaction, so the queue is dropped - and tag new
 * transactions with the next generation from now on; write the slot of
 * that generation (the other slot holds the committed checkpoint, intact),
 * then CAS the superblock's ckpt_gen from the old generation to the new one.
 * That 8-byte atomic is the commit point. Until it succeeds no transaction
 * of the new generation is written (they would overwrite the old
 * generation's journal, still needed if we crash now): need_ckpt stays set
 * and the next commit retries the whole checkpoint.
 */
#define G_LOG_DOMAIN "rmemfs-commit"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "commit.h"

#include "alloc.h"
#include "ckpt.h"
#include "journal.h"
#include "meta_int.h"
#include "remote.h"
#include "super.h"
#include "worker.h"

static bool lost(struct meta *m)
{
	return remote_failed(m->r); /* (a lost lease fails the remote too) */
}

/* commit_lock and m->lock held; m->lock is dropped around pool I/O */
static int do_checkpoint(struct meta *m)
{
	uint64_t gen = m->durable_gen + 1;
	uint64_t first_seq = journal_next_seq(m->j);
	GByteArray *buf;
	int rc;

	rc = ckpt_serialize(m, gen, first_seq, &buf);
	if (rc < 0)
		return rc;
	journal_drop_pending(m->j);
	journal_reset(m->j, gen, 0, first_seq);
	m->need_ckpt = true;
	pthread_mutex_unlock(&m->lock);
	rc = ckpt_write(m, gen, buf);
	if (!rc)
		rc = super_commit_ckpt_gen(m->sb, m->durable_gen, gen);
	pthread_mutex_lock(&m->lock);
	g_byte_array_unref(buf);
	if (rc < 0) {
		if (!lost(m)) /* (a failed pool said so once already) */
			g_message("checkpoint %" G_GUINT64_FORMAT " not committed: %s",
				  (guint64)gen, g_strerror(-rc));
		return -EIO;
	}
	g_debug("checkpoint %" G_GUINT64_FORMAT " committed (%" G_GUINT64_FORMAT " bytes)",
		(guint64)gen, (guint64)m->ckpt_bytes);
	m->durable_gen = gen;
	m->need_ckpt = false;
	m->ckpts++;
	m->durable_seq = first_seq - 1;
	alloc_release(m->alloc, m->durable_seq);
	return 0;
}

static int commit_locked(struct meta *m, bool force_ckpt)
{
	GByteArray *buf;
	uint64_t off, last;
	int rc;

	if (m->read_only)
		return -EROFS;
	if (lost(m))
		return -EIO;
	if (force_ckpt || m->need_ckpt || journal_needs_ckpt(m->j))
		return do_checkpoint(m);
	buf = journal_take(m->j, &off, &last);
	if (!buf)
		return 0;
	pthread_mutex_unlock(&m->lock);
	rc = remote_write(m->r, off, buf->data, buf->len);
	pthread_mutex_lock(&m->lock);
	if (rc < 0) {
		if (!lost(m))
			g_message("journal write of %u bytes: %s", buf->len, g_strerror(-rc));
		journal_unwrite(m->j, buf);
		return -EIO;
	}
	g_byte_array_unref(buf);
	m->durable_seq = last;
	alloc_release(m->alloc, last);
	return 0;
}

int commit_write(struct meta *m, bool force_ckpt)
{
	int rc;

	pthread_mutex_lock(&m->commit_lock);
	pthread_mutex_lock(&m->lock);
	rc = commit_locked(m, force_ckpt);
	pthread_mutex_unlock(&m->lock);
	pthread_mutex_unlock(&m->commit_lock);
	return rc;
}

int commit_sync(struct meta *m)
{
	uint64_t target;
	int rc = 0;

	pthread_mutex_lock(&m->lock);
	if (m->read_only) {
		pthread_mutex_unlock(&m->lock);
		return 0;
	}
	target = journal_next_seq(m->j) - 1;
	if (m->durable_seq >= target && !m->need_ckpt) {
		rc = lost(m) ? -EIO : 0;
		pthread_mutex_unlock(&m->lock);
		return rc;
	}
	pthread_mutex_unlock(&m->lock);

	pthread_mutex_lock(&m->commit_lock);
	pthread_mutex_lock(&m->lock);
	if (m->durable_seq < target || m->need_ckpt)
		rc = commit_locked(m, false);
	pthread_mutex_unlock(&m->lock);
	pthread_mutex_unlock(&m->commit_lock);
	return rc;
}

/* ---- the committer thread ---- */

static void *committer_main(void *arg)
{
	struct meta *m = arg;
	bool failing = false;

	while (worker_wait(&m->committer, META_COMMIT_INTERVAL_MS) == 0) {
		bool work;
		int rc;

		pthread_mutex_lock(&m->lock);
		work = journal_pending_bytes(m->j) || m->need_ckpt;
		pthread_mutex_unlock(&m->lock);
		if (!work)
			continue;
		rc = commit_write(m, false);
		if (rc < 0 && !failing && !lost(m))
			g_message("background metadata commit failed: %s (will retry)",
				  g_strerror(-rc));
		else if (rc == 0 && failing)
			g_message("background metadata commit works again");
		failing = rc < 0;
	}
	return NULL;
}

int commit_start(struct meta *m)
{
	return worker_start(&m->committer, "committer", committer_main, m);
}

void commit_stop(struct meta *m)
{
	worker_stop(&m->committer);
}

void commit_kick(struct meta *m)
{
	if (journal_write_due(m->j))
		worker_kick(&m->committer);
}
