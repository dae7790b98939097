// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * swap_lock.c - the swap experiments' flock (see swap_lock.h).
 *
 * The lock is never released with LOCK_UN, only by closing: a descriptor
 * inherited from a caller shares that caller's open file description, and
 * LOCK_UN on it would drop the caller's lock too. Who holds the lock comes
 * from /proc/locks (the pid that took it; for flock(1) that is flock itself
 * or the command it runs).
 */
#define G_LOG_DOMAIN "rmemfs-swap"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <glib.h>

#include "swap_lock.h"

#define POLL_MS 100

/* a descriptor this process inherited that is open on the lock file (not own_fd), or -1 */
static int inherited_fd(const struct stat *lock, int own_fd)
{
	struct dirent *e;
	struct stat st;
	int found = -1;
	DIR *dir;

	dir = opendir("/proc/self/fd");
	if (!dir)
		return -1;
	while (found < 0 && (e = readdir(dir))) {
		int fd = atoi(e->d_name);

		if (e->d_name[0] == '.' || fd == dirfd(dir) || fd == own_fd)
			continue;
		if (fstat(fd, &st) == 0 && st.st_dev == lock->st_dev && st.st_ino == lock->st_ino)
			found = fd;
	}
	closedir(dir);
	return found;
}

/* "1234 (farmem.sh)", or NULL when there is no such process */
static char *describe_pid(int pid)
{
	char path[64], *comm = NULL;

	snprintf(path, sizeof(path), "/proc/%d/comm", pid);
	if (!g_file_get_contents(path, &comm, NULL, NULL))
		return NULL;
	g_strchomp(comm);
	snprintf(path, sizeof(path), "%d (%.40s)", pid, comm);
	g_free(comm);
	return g_strdup(path);
}

/* the processes that have the lock file open (root sees them all), ", "-separated */
static char *openers(const struct stat *lock)
{
	GString *list = g_string_new(NULL);
	const char *name, *fd_name;
	GDir *proc, *fds;

	proc = g_dir_open("/proc", 0, NULL);
	while (proc && (name = g_dir_read_name(proc))) {
		char *dir = g_strdup_printf("/proc/%s/fd", name), *who = NULL;

		fds = NULL;
		if (g_ascii_isdigit(name[0]) && atoi(name) != getpid())
			fds = g_dir_open(dir, 0, NULL);
		while (fds && !who && (fd_name = g_dir_read_name(fds))) {
			char *fd_path = g_build_filename(dir, fd_name, NULL);
			struct stat st;

			if (stat(fd_path, &st) == 0 && st.st_dev == lock->st_dev &&
			    st.st_ino == lock->st_ino)
				who = describe_pid(atoi(name));
			g_free(fd_path);
		}
		if (who)
			g_string_append_printf(list, "%s%s", list->len ? ", " : "", who);
		if (fds)
			g_dir_close(fds);
		g_free(who);
		g_free(dir);
	}
	if (proc)
		g_dir_close(proc);
	return g_string_free(list, FALSE);
}

/*
 * "pid 1234 (farmem.sh)": who took the flock (/proc/locks), and, when that process is gone
 * (a child it started inherited the descriptor and keeps the lock), who has the file open.
 */
static char *holder(const struct stat *lock)
{
	char want[64], line[256], *result = NULL, *who, *open_by;
	FILE *f;

	snprintf(want, sizeof(want), "%02x:%02x:%llu", major(lock->st_dev), minor(lock->st_dev),
		 (unsigned long long)lock->st_ino);
	f = fopen("/proc/locks", "re");
	while (f && !result && fgets(line, sizeof(line), f)) {
		char type[16], dev_ino[64];
		int pid;

		/* "1: FLOCK  ADVISORY  WRITE 1234 00:1a:5678 0 EOF"; waiters have "->" first */
		if (sscanf(line, "%*d: %15s %*s %*s %d %63s", type, &pid, dev_ino) != 3 ||
		    strcmp(type, "FLOCK") != 0 || strcmp(dev_ino, want) != 0)
			continue;
		who = describe_pid(pid);
		if (who) {
			result = g_strdup_printf("pid %s", who);
		} else {
			open_by = openers(lock);
			result = g_strdup_printf("pid %d, gone; open in %s", pid,
						 open_by[0] ? open_by : "nothing we can see");
			g_free(open_by);
		}
		g_free(who);
	}
	if (f)
		fclose(f);
	return result ? result : g_strdup("another process");
}

int swap_lock_take(unsigned int wait_s, int *fd_out)
{
	struct stat st;
	char *who;
	unsigned int waited;
	int fd, rc;

	fd = open(SWAP_LOCK_PATH, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0 || fstat(fd, &st) < 0) {
		rc = -errno;
		g_printerr("rmemfs-swap: open %s: %s\n", SWAP_LOCK_PATH, g_strerror(-rc));
		if (fd >= 0)
			close(fd);
		return rc;
	}
	rc = inherited_fd(&st, fd);
	if (rc >= 0) {
		close(fd);
		fd = rc;
	}
	for (waited = 0; flock(fd, LOCK_EX | LOCK_NB) < 0; waited += POLL_MS) {
		rc = -errno;
		if (rc != -EWOULDBLOCK && rc != -EINTR) {
			g_printerr("rmemfs-swap: flock %s: %s\n", SWAP_LOCK_PATH, g_strerror(-rc));
			close(fd);
			return rc;
		}
		if (waited >= wait_s * 1000) {
			who = holder(&st);
			g_printerr(
			    "rmemfs-swap: %s is held by %s after %u s of waiting: another swap "
			    "experiment is running\n",
			    SWAP_LOCK_PATH, who, wait_s);
			g_free(who);
			close(fd);
			return -ETIMEDOUT;
		}
		if (waited == 0) {
			who = holder(&st);
			g_printerr(
			    "rmemfs-swap: another swap experiment holds %s (%s); waiting up to "
			    "%u s\n",
			    SWAP_LOCK_PATH, who, wait_s);
			g_free(who);
		}
		g_usleep(POLL_MS * 1000);
	}
	*fd_out = fd;
	return 0;
}

void swap_lock_release(int fd)
{
	if (fd >= 0)
		close(fd);
}
