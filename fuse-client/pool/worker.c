// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * worker.c - background threads woken by an eventfd (worker.h).
 */
#define G_LOG_DOMAIN "rmemfs-pool"

#include "worker.h"

#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <glib.h>

int worker_start(struct worker *w, const char *name, void *(*fn)(void *), void *arg)
{
	int rc;

	w->name = name;
	w->stop = false;
	w->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (w->efd < 0) {
		rc = -errno;
		g_message("%s: eventfd: %s", name, g_strerror(-rc));
		return rc;
	}
	rc = -pthread_create(&w->thread, NULL, fn, arg);
	if (rc < 0) {
		g_message("%s: pthread_create: %s", name, g_strerror(-rc));
		close(w->efd);
		return rc;
	}
	w->running = true;
	return 0;
}

void worker_kick(struct worker *w)
{
	uint64_t one = 1;

	if (w->running && write(w->efd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		g_message("%s: eventfd write: %s", w->name, g_strerror(errno));
}

int worker_wait(struct worker *w, int timeout_ms)
{
	struct pollfd pfd = { .fd = w->efd, .events = POLLIN };
	uint64_t v;
	int n;

	n = poll(&pfd, 1, timeout_ms);
	if (n < 0 && errno != EINTR)
		return -errno;
	if (n > 0 && read(w->efd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		return -errno;
	return __atomic_load_n(&w->stop, __ATOMIC_ACQUIRE) ? -ECANCELED : 0;
}

void worker_stop(struct worker *w)
{
	if (!w->running)
		return;
	__atomic_store_n(&w->stop, true, __ATOMIC_RELEASE);
	worker_kick(w);
	pthread_join(w->thread, NULL);
	close(w->efd);
	w->running = false;
}
