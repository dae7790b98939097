// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * inval.c - direct-write replies after the kernel dropped the range (inval.h).
 *
 * Request threads queue the write (inval_reply_write) and go back to
 * serving; one worker thread takes the whole queue at each kick and, for
 * each write in order, notifies the kernel and then replies. The kernel
 * counts a notification about an inode it no longer holds as -ENOENT:
 * nothing to drop. Any other failure is logged and the write answered
 * anyway (what it wrote is in the cache; only the kernel's copy may lag).
 */
#define G_LOG_DOMAIN "rmemfs-ops"

#include "inval.h"

#include <errno.h>
#include <pthread.h>

#include <glib.h>

#include "worker.h"

struct inval_write {
	fuse_req_t req;
	uint64_t ino;
	uint64_t off;
	size_t n;
};

struct inval {
	struct fuse_session *se;
	struct worker worker;
	pthread_mutex_t lock;
	GQueue queue; /* struct inval_write *, oldest first (lock) */
};

static void drop_and_reply(struct inval *iv, struct inval_write *w)
{
	int rc = fuse_lowlevel_notify_inval_inode(iv->se, w->ino, (off_t)w->off, (off_t)w->n);

	if (rc < 0 && rc != -ENOENT)
		g_message("dropping the kernel's pages of inode %" G_GUINT64_FORMAT
			  " [%" G_GUINT64_FORMAT ", +%zu) after a direct write: %s",
			  (guint64)w->ino, (guint64)w->off, w->n, g_strerror(-rc));
	fuse_reply_write(w->req, w->n);
	g_free(w);
}

static void *inval_main(void *arg)
{
	struct inval *iv = arg;
	GQueue batch = G_QUEUE_INIT;
	struct inval_write *w;
	int rc;

	do {
		rc = worker_wait(&iv->worker, -1);
		pthread_mutex_lock(&iv->lock);
		batch = iv->queue;
		g_queue_init(&iv->queue);
		pthread_mutex_unlock(&iv->lock);
		while ((w = g_queue_pop_head(&batch)))
			drop_and_reply(iv, w);
	} while (rc != -ECANCELED);
	return NULL;
}

int inval_start(struct fuse_session *se, struct inval **out)
{
	struct inval *iv = g_new0(struct inval, 1);
	int rc;

	iv->se = se;
	pthread_mutex_init(&iv->lock, NULL);
	g_queue_init(&iv->queue);
	rc = worker_start(&iv->worker, "direct-write invalidation", inval_main, iv);
	if (rc < 0) {
		pthread_mutex_destroy(&iv->lock);
		g_free(iv);
		return rc;
	}
	*out = iv;
	return 0;
}

void inval_reply_write(struct inval *iv, fuse_req_t req, uint64_t ino, uint64_t off, size_t n)
{
	struct inval_write *w = g_new(struct inval_write, 1);

	*w = (struct inval_write){ .req = req, .ino = ino, .off = off, .n = n };
	pthread_mutex_lock(&iv->lock);
	g_queue_push_tail(&iv->queue, w);
	pthread_mutex_unlock(&iv->lock);
	worker_kick(&iv->worker);
}

void inval_stop(struct inval *iv)
{
	if (!iv)
		return;
	worker_stop(&iv->worker); /* its last round answered what was queued */
	pthread_mutex_destroy(&iv->lock);
	g_free(iv);
}
