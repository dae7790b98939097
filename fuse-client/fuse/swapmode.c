// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * swapmode.c - `-o swap` (see swapmode.h): the daemon's memory is locked, its
 * allocations never wait for I/O, and the OOM killer passes it by.
 */
#define G_LOG_DOMAIN "rmemfs-swap"

#include "swapmode.h"

#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <glib.h>

#ifndef PR_SET_IO_FLUSHER
#define PR_SET_IO_FLUSHER 57 /* Linux 5.6 */
#endif

/* mlockall failing is fatal: an unlocked daemon can deadlock serving swap */
static int fail(const char *what, int err, const char *hint)
{
	fprintf(stderr, "rmemfs: -o swap: %s: %s%s\n", what, g_strerror(err), hint);
	return -err;
}

static int set_oom_score_adj(int adj)
{
	char text[16];
	int fd, len, rc = 0;

	fd = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	len = snprintf(text, sizeof(text), "%d\n", adj);
	if (write(fd, text, (size_t)len) != len)
		rc = -errno;
	close(fd);
	return rc;
}

/* stacks of threads created from now on, libfuse's included (it passes no size) */
static int set_thread_stack(size_t size)
{
	pthread_attr_t attr;
	int rc;

	rc = pthread_attr_init(&attr);
	if (rc)
		return -rc;
	rc = pthread_attr_setstacksize(&attr, size);
	if (!rc)
		rc = pthread_setattr_default_np(&attr);
	pthread_attr_destroy(&attr);
	return -rc;
}

/*
 * One arena, grown by SWAPMODE_HEAP_RESERVE and never trimmed: the small
 * allocations of the request path reuse pages that are already locked.
 */
static int reserve_heap(void)
{
	void *p;

	if (!mallopt(M_ARENA_MAX, 1) || !mallopt(M_MMAP_THRESHOLD, 2 * SWAPMODE_HEAP_RESERVE) ||
	    !mallopt(M_TRIM_THRESHOLD, 4 * SWAPMODE_HEAP_RESERVE))
		return -EINVAL;
	p = malloc(SWAPMODE_HEAP_RESERVE);
	if (!p)
		return -ENOMEM;
	memset(p, 0, SWAPMODE_HEAP_RESERVE);
	free(p);
	return 0;
}

int swapmode_enter(struct swapmode *sm)
{
	int rc;

	memset(sm, 0, sizeof(*sm));
	rc = set_thread_stack(SWAPMODE_THREAD_STACK);
	if (rc < 0)
		return fail("pthread_setattr_default_np", -rc, "");
	rc = reserve_heap();
	if (rc < 0)
		return fail("mallopt", -rc, "");
	if (mlockall(MCL_CURRENT | MCL_FUTURE) < 0)
		return fail("mlockall", errno, " (needs CAP_IPC_LOCK or a large enough ulimit -l)");

	/* our allocations never recurse into I/O, and reclaim does not throttle us */
	if (prctl(PR_SET_IO_FLUSHER, 1, 0, 0, 0) == 0)
		sm->io_flusher = true;
	else
		g_message("-o swap: prctl(PR_SET_IO_FLUSHER): %s (no CAP_SYS_RESOURCE): an allocation of this daemon may wait for swap I/O under memory pressure",
			  g_strerror(errno));
	rc = set_oom_score_adj(-1000);
	if (rc == 0)
		sm->oom_protected = true;
	else
		g_message("-o swap: oom_score_adj -1000: %s (no CAP_SYS_RESOURCE): the OOM killer may pick this daemon",
			  g_strerror(-rc));
	return 0;
}

/* locked bytes of this process (VmLck), or -errno */
static long long locked_bytes(void)
{
	char line[128];
	long long kb = -1;
	FILE *f;

	f = fopen("/proc/self/status", "re");
	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmLck: %lld kB", &kb) == 1)
			break;
	fclose(f);
	return kb < 0 ? -ENOENT : kb * 1024;
}

ssize_t swapmode_text(const struct swapmode *sm, char *buf, size_t cap)
{
	int n;

	if (sm)
		n = snprintf(buf, cap, "swap on\nswap_locked_bytes %lld\nswap_io_flusher %s\nswap_oom_protected %s\n",
			     locked_bytes(), sm->io_flusher ? "yes" : "no",
			     sm->oom_protected ? "yes" : "no");
	else
		n = snprintf(buf, cap, "swap off\n");
	return n < 0 || (size_t)n >= cap ? -ERANGE : n;
}
