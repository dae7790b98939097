// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * cache_thread.c - starting the cache's background threads (write-back,
 * readahead): one way for both.
 */
#define G_LOG_DOMAIN "rmemfs-cache"

#include "cache_int.h"

int cache_threads_start(struct cache *c, void *(*fn)(void *), unsigned int n,
			pthread_t **threads, unsigned int *started, const char *what)
{
	unsigned int i;
	int rc;

	*threads = g_new0(pthread_t, n);
	for (i = 0; i < n; i++) {
		rc = -pthread_create(&(*threads)[i], NULL, fn, c);
		if (rc < 0) {
			g_message("pthread_create(%s): %s", what, g_strerror(-rc));
			return rc;
		}
		(*started)++;
	}
	return 0;
}
