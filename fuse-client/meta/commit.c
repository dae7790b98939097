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
#include "clock.h"
#include "csum.h"
#include "hold.h"
#include "journal.h"
#include "meta_int.h"
#include "remote.h"
#include "super.h"
#include "worker.h"

static bool lost(struct meta *m)
{
	return remote_failed(m->r); /* (a lost lease fails the remote too) */
}

/*
 * The queued transactions, to go to the old generation's journal before the
 * checkpoint commits (m->lock held): the checkpoint covers them anyway, but a
 * reader that applied the old journal to its end then goes straight on with
 * the new one instead of loading the checkpoint (follow.c). NULL: nothing
 * queued, or it does not fit the area (dropped; readers load the state).
 */
static GByteArray *take_for_readers(struct meta *m, uint64_t *off)
{
	uint64_t last;

	if (m->need_ckpt || !m->readers ||
	    journal_tail(m->j) + journal_pending_bytes(m->j) > m->g.journal_len) {
		journal_drop_pending(m->j);
		return NULL;
	}
	return journal_take(m->j, off, &last);
}

/* commit_lock and m->lock held; m->lock is dropped around pool I/O */
static int do_checkpoint(struct meta *m)
{
	uint64_t gen = m->durable_gen + 1;
	uint64_t first_seq = journal_next_seq(m->j);
	GByteArray *buf, *tail;
	uint64_t tail_off = 0;
	int rc;

	rc = ckpt_serialize(m, gen, first_seq, &buf);
	if (rc < 0)
		return rc;
	tail = take_for_readers(m, &tail_off);
	journal_reset(m->j, gen, 0, first_seq);
	m->need_ckpt = true;
	pthread_mutex_unlock(&m->lock);
	/* (a tail that fails to go out only costs the readers a load) */
	if (tail)
		remote_write(m->r, tail_off, tail->data, tail->len);
	rc = ckpt_write(m, gen, buf);
	if (!rc)
		rc = super_commit_ckpt_gen(m->sb, m->durable_gen, gen);
	pthread_mutex_lock(&m->lock);
	if (tail)
		journal_recycle(m->j, tail);
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
	hold_note_durable(m, m->durable_seq);
	hold_release(m);
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
	journal_recycle(m->j, buf);
	m->durable_seq = last;
	hold_note_durable(m, last);
	hold_release(m);
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

void commit_sweep_hot(struct meta *m, bool all)
{
	GArray *cold = g_array_new(FALSE, FALSE, sizeof(uint64_t));
	guint i;

	pthread_mutex_lock(&m->lock);
	if (!m->read_only && !lost(m))
		csum_hot_cold(m->csum, m->durable_seq, all, cold, &m->ckpt_bytes);
	if (cold->len) {
		/*
		 * The regions chosen have no write in flight: every write into
		 * them landed, so its CSUM_AHEAD record, before this in the
		 * journal, says what each block holds; HOT(region, 0) ends the
		 * alternative those records left (csum.h, pending blocks).
		 */
		journal_begin(m->j);
		for (i = 0; i < cold->len; i++)
			journal_rec_hot(m->j, g_array_index(cold, uint64_t, i), false);
		journal_commit(m->j);
	}
	pthread_mutex_unlock(&m->lock);
	g_array_free(cold, TRUE);
}

/* ---- the committer thread ---- */

static void *committer_main(void *arg)
{
	struct meta *m = arg;
	bool failing = false;
	int64_t swept = clock_now_ms();

	while (worker_wait(&m->committer, META_COMMIT_INTERVAL_MS) == 0) {
		bool work;
		int rc;

		if (clock_now_ms() - swept >= COMMIT_SWEEP_MS) {
			swept = clock_now_ms();
			commit_sweep_hot(m, false);
		}
		pthread_mutex_lock(&m->lock);
		work = journal_pending_bytes(m->j) || m->need_ckpt;
		pthread_mutex_unlock(&m->lock);
		hold_scan(m);
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
