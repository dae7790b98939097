// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * umount_main.c - umount.fuse.rmemfs: umount(8)'s helper for rmemfs mounts, which returns
 * only once the rmemfs daemon has finished closing.
 *
 *   umount.fuse.rmemfs MOUNTPOINT [-flnrv] [-N NAMESPACE] [-t TYPE]
 *
 * util-linux's umount runs /sbin/umount.fuse.rmemfs for a mount of type fuse.rmemfs (unless
 * given -i) with the arguments above (libmount's exec_helper): -l is MNT_DETACH, -f is
 * MNT_FORCE, -r remounts read-only when the unmount finds the mount busy, -N is a mount
 * namespace (/proc/PID/fd/N) to enter first, -n (no mtab) and -t (our own type) change
 * nothing here, -v says what happened.
 *
 * Why: the kernel's unmount of a plain FUSE mount returns at once; the daemon notices it
 * afterwards and only then writes back its dirty cache, writes its last checkpoint, marks
 * the pool clean and frees its lease. Whoever unmounted (systemd at shutdown) goes on to
 * stop the memserver or the network under it, and the next mount has to recover.
 *
 * How: the daemon tells its pid through OPS_PID_XATTR of the root (ops_xattr.h). We open a
 * pidfd for it BEFORE unmounting, and ask again after: the same answer then proves the
 * pidfd names the daemon (no pid reuse in between). Each question is asked by a child that
 * is killed when the daemon does not answer within UMOUNT_ASK_MS, so that a hung daemon
 * cannot hang the unmount nor keep the mount busy. We unmount with umount2() (never umount(8)
 * again: no recursion), or through fusermount3 -u when not root (umount(8) runs helpers
 * with the caller's own uid: a FUSE user mount's owner), then wait for the pidfd to become
 * readable, i.e. for the daemon to exit, for at most UMOUNT_WAIT_MS. A mount whose daemon
 * does not answer (not an rmemfs, an older one, another pid namespace) is just unmounted.
 *
 * Exit status as umount(8)'s: 0 unmounted (also when the wait ran out: the unmount itself
 * happened; a message says the daemon is still closing), 1 usage, 2 system error (the
 * namespace), 32 the unmount failed.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "ops_xattr.h"

#define UMOUNT_EX_OK 0
#define UMOUNT_EX_USAGE 1
#define UMOUNT_EX_SYSERR 2
#define UMOUNT_EX_FAIL 32

/* a daemon that serves has its answer ready: it takes no lock */
#define UMOUNT_ASK_MS 5000
/*
 * The whole wait for the daemon to close: below the 90 s that systemd gives a mount unit's
 * umount by default (DefaultTimeoutStartSec, the mount unit's TimeoutSec= and
 * x-systemd.mount-timeout=), so that we, not systemd's SIGTERM, end a wait that runs long and
 * say why. Closing writes back every dirty cache block at the pool's write speed: a cache of
 * gigabytes over a slow link can take this long; a daemon still busy then goes on closing.
 */
#define UMOUNT_WAIT_MS 80000
/* after this long, say what we are waiting for (systemd puts it in the journal) */
#define UMOUNT_NOTE_MS 3000

struct umount_args {
	const char *mnt;
	int flags; /* MNT_DETACH, MNT_FORCE */
	bool remount_ro; /* -r */
	bool verbose; /* -v */
	const char *ns; /* -N */
};

static const char *prog = "umount.fuse.rmemfs";

static void usage(FILE *f)
{
	fprintf(f,
		"usage: %s MOUNTPOINT [-flnrv] [-N NAMESPACE] [-t TYPE]\n"
		"umount(8) runs this for a fuse.rmemfs mount: it unmounts, then waits (at most\n"
		"%d s) until the rmemfs daemon has written back its cache and closed the pool.\n"
		"  -l          lazy unmount (MNT_DETACH)\n"
		"  -f          force the unmount (MNT_FORCE: aborts the FUSE connection)\n"
		"  -r          remount read-only when the mount is busy\n"
		"  -v          say what happened\n"
		"  -n          (no mtab to write: ignored)\n"
		"  -N NAMESPACE  the mount namespace to enter first (umount gives /proc/PID/fd/N)\n"
		"  -t TYPE     the mount's type (ignored)\n"
		"  --help      this text\n",
		prog, UMOUNT_WAIT_MS / 1000);
}

static int parse_args(int argc, char **argv, struct umount_args *a)
{
	int c;

	memset(a, 0, sizeof(*a));
	/* GNU getopt moves the mount point (util-linux passes it first) behind the options */
	while ((c = getopt(argc, argv, "flnrvN:t:")) != -1) {
		switch (c) {
		case 'f':
			a->flags |= MNT_FORCE;
			break;
		case 'l':
			a->flags |= MNT_DETACH;
			break;
		case 'r':
			a->remount_ro = true;
			break;
		case 'v':
			a->verbose = true;
			break;
		case 'N':
			a->ns = optarg;
			break;
		case 'n':
		case 't':
			break;
		default:
			return -EINVAL;
		}
	}
	if (optind != argc - 1)
		return -EINVAL;
	a->mnt = argv[optind];
	return 0;
}

static int enter_namespace(const char *ns)
{
	int fd, rc = 0;

	fd = open(ns, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (setns(fd, CLONE_NEWNS) < 0)
		rc = -errno;
	close(fd);
	return rc;
}

/*
 * The daemon's pid as OPS_PID_XATTR of mnt tells it to a child of ours (the child's own pid
 * in the answer's second field shows that we share the daemon's pid namespace); 0 if there
 * is no such answer within UMOUNT_ASK_MS.
 */
static pid_t ask_daemon_pid(const char *mnt)
{
	char buf[OPS_PID_MAX + 1];
	struct pollfd p;
	int fds[2], daemon_pid = 0, caller = 0;
	ssize_t n = 0;
	pid_t child;

	if (pipe2(fds, O_CLOEXEC) < 0)
		return 0;
	child = fork();
	if (child == 0) {
		close(fds[0]);
		n = getxattr(mnt, OPS_PID_XATTR, buf, OPS_PID_MAX);
		if (n > 0 && write(fds[1], buf, (size_t)n) != n)
			_exit(1);
		_exit(0);
	}
	close(fds[1]);
	if (child < 0) {
		close(fds[0]);
		return 0;
	}
	p = (struct pollfd){ .fd = fds[0], .events = POLLIN };
	if (poll(&p, 1, UMOUNT_ASK_MS) == 1)
		n = read(fds[0], buf, OPS_PID_MAX);
	else
		n = 0;
	close(fds[0]);
	/* a child stuck in the daemon's getxattr ends here (FUSE waits are killable) */
	kill(child, SIGKILL);
	waitpid(child, NULL, 0);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	if (sscanf(buf, "%d %d", &daemon_pid, &caller) != 2 || caller != child || daemon_pid <= 0)
		return 0;
	return daemon_pid;
}

/* a pidfd for the daemon behind mnt, opened while the mount stands; -1 if none answers */
static int open_daemon(const char *mnt, pid_t *pid)
{
	int fd;

	*pid = ask_daemon_pid(mnt);
	if (*pid <= 0)
		return -1;
	fd = (int)syscall(SYS_pidfd_open, *pid, 0);
	if (fd < 0)
		return -1;
	/* still there with the same pid after the pidfd was opened: the pidfd is the daemon */
	if (ask_daemon_pid(mnt) != *pid) {
		close(fd);
		return -1;
	}
	return fd;
}

/* fusermount3 -u [-z] -- mnt (a user's own FUSE mount): 0, 1 when it failed (and said why) */
static int fusermount_unmount(const struct umount_args *a)
{
	const char *argv[7];
	int status, i = 0;
	pid_t child;

	argv[i++] = "fusermount3";
	argv[i++] = "-u";
	if (a->flags & MNT_DETACH)
		argv[i++] = "-z";
	argv[i++] = "--";
	argv[i++] = a->mnt;
	argv[i] = NULL;
	child = fork();
	if (child < 0)
		return -errno;
	if (child == 0) {
		execvp(argv[0], (char *const *)argv);
		fprintf(stderr, "%s: %s: %s\n", prog, argv[0], strerror(errno));
		_exit(127);
	}
	if (waitpid(child, &status, 0) < 0)
		return -errno;
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}

/*
 * umount2() as root, fusermount3 for a user; -r turns a busy mount read-only instead.
 * 0, -errno, or 1 when fusermount3 failed and said why.
 */
static int unmount(const struct umount_args *a, bool *remounted)
{
	int rc;

	*remounted = false;
	if (getuid() != 0)
		return fusermount_unmount(a);
	rc = umount2(a->mnt, a->flags) < 0 ? -errno : 0;
	if (rc == -EBUSY && a->remount_ro) {
		if (mount(NULL, a->mnt, NULL, MS_REMOUNT | MS_RDONLY, NULL) < 0)
			return -errno;
		*remounted = true;
		return 0;
	}
	return rc;
}

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* wait for the pidfd to become readable (the daemon has exited); 0, -ETIMEDOUT or -errno */
static int wait_daemon(const struct umount_args *a, int pidfd, pid_t pid)
{
	struct pollfd p = { .fd = pidfd, .events = POLLIN };
	long long start = now_ms(), elapsed;
	bool noted = false;
	int rc;

	for (;;) {
		elapsed = now_ms() - start;
		if (!noted && elapsed >= UMOUNT_NOTE_MS) {
			fprintf(stderr,
				"%s: %s: waiting for the rmemfs daemon (pid %d) to write back its "
				"cache and close the pool (at most %d s)\n",
				prog, a->mnt, (int)pid, UMOUNT_WAIT_MS / 1000);
			noted = true;
		}
		if (elapsed >= UMOUNT_WAIT_MS)
			return -ETIMEDOUT;
		rc = poll(&p, 1, (int)((noted ? UMOUNT_WAIT_MS : UMOUNT_NOTE_MS) - elapsed));
		if (rc == 1)
			return 0;
		if (rc < 0 && errno != EINTR)
			return -errno;
	}
}

int main(int argc, char **argv)
{
	struct umount_args a;
	bool remounted;
	int pidfd, rc;
	pid_t pid = 0;

	if (argc == 2 && strcmp(argv[1], "--help") == 0) {
		usage(stdout);
		return UMOUNT_EX_OK;
	}
	if (parse_args(argc, argv, &a) < 0) {
		usage(stderr);
		return UMOUNT_EX_USAGE;
	}
	if (a.ns) {
		rc = enter_namespace(a.ns);
		if (rc < 0) {
			fprintf(stderr, "%s: setns %s: %s\n", prog, a.ns, strerror(-rc));
			return UMOUNT_EX_SYSERR;
		}
	}
	pidfd = open_daemon(a.mnt, &pid);
	if (pidfd < 0 && a.verbose)
		printf("%s: %s: no rmemfs daemon answers: unmounting without waiting\n", prog,
		       a.mnt);
	rc = unmount(&a, &remounted);
	if (rc != 0) {
		if (rc < 0)
			fprintf(stderr, "%s: %s: %s\n", prog, a.mnt, strerror(-rc));
		if (pidfd >= 0)
			close(pidfd);
		return UMOUNT_EX_FAIL;
	}
	if (pidfd >= 0 && !remounted) {
		rc = wait_daemon(&a, pidfd, pid);
		if (rc == -ETIMEDOUT)
			fprintf(stderr,
				"%s: %s: unmounted, but the rmemfs daemon (pid %d) is still closing "
				"after %d s; not waiting any longer\n",
				prog, a.mnt, (int)pid, UMOUNT_WAIT_MS / 1000);
		else if (rc < 0)
			fprintf(stderr, "%s: %s: unmounted; waiting for the daemon: %s\n", prog,
				a.mnt, strerror(-rc));
	}
	if (pidfd >= 0)
		close(pidfd);
	if (a.verbose)
		printf("%s: %s %s\n", prog, a.mnt, remounted ? "remounted read-only" : "unmounted");
	return UMOUNT_EX_OK;
}
