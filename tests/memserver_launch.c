// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * memserver_launch.c - starting a memserver for the C tests (see
 * memserver_launch.h).
 */
#include "memserver_launch.h"

#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#define LAUNCH_READY_MS 10000

static void child_setup(gpointer parent)
{
	/* die with the test, even if it aborts before teardown */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != *(pid_t *)parent)
		_exit(127);
}

/* the first line of fd, within the deadline */
static void read_line(int fd, char *line, size_t cap)
{
	gint64 deadline = g_get_monotonic_time() + LAUNCH_READY_MS * 1000;
	size_t have = 0;

	line[0] = 0;
	while (!memchr(line, '\n', have)) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		ssize_t n;

		if (g_get_monotonic_time() > deadline)
			g_error("the memserver printed no ready line within %d ms", LAUNCH_READY_MS);
		if (poll(&pfd, 1, 100) <= 0)
			continue;
		n = read(fd, line + have, cap - 1 - have);
		if (n <= 0)
			g_error("the memserver exited before it was ready");
		have += (size_t)n;
		line[have] = 0;
	}
}

/* the port after "WHAT HOST:" in the ready line, 0 if there is none */
static uint16_t port_after(const char *line, const char *what)
{
	const char *p = strstr(line, what), *end;

	if (!p)
		return 0;
	end = strpbrk(p + strlen(what), " ,\n");
	if (!end)
		return 0;
	while (end > p && end[-1] != ':')
		end--;
	return (uint16_t)atoi(end);
}

void memserver_launch(const char *const *args, struct memserver_proc *ms)
{
	static pid_t parent;
	const char *bd = g_getenv("RMEM_BUILD_DIR");
	GPtrArray *argv = g_ptr_array_new_with_free_func(g_free);
	char **envp = g_environ_setenv(g_get_environ(), "G_DEBUG", "fatal-warnings", TRUE);
	GError *err = NULL;
	char line[512];
	int out_fd;

	parent = getpid();
	g_ptr_array_add(argv, g_build_filename(bd ? bd : ".", "memserver", "memserver", NULL));
	for (; *args; args++)
		g_ptr_array_add(argv, g_strdup(*args));
	g_ptr_array_add(argv, NULL);
	if (!g_spawn_async_with_pipes((const char *)NULL, (char **)argv->pdata, envp,
				      G_SPAWN_DO_NOT_REAP_CHILD, child_setup, &parent, &ms->pid,
				      NULL, &out_fd, NULL, &err))
		g_error("spawning %s: %s", (char *)argv->pdata[0], err->message);
	read_line(out_fd, line, sizeof(line));
	close(out_fd);
	g_assert_nonnull(strstr(line, "memserver: serving"));
	ms->tcp_port = port_after(line, "on tcp ");
	g_assert_cmpuint(ms->tcp_port, >, 0);
	ms->rdma_port = port_after(line, ", rdma ");
	if (!ms->rdma_port)
		ms->rdma_port = ms->tcp_port;
	g_strfreev(envp);
	g_ptr_array_unref(argv);
}
