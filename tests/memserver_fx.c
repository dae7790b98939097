// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * memserver_fx.c - a real memserver for the C integration tests (see
 * memserver_fx.h).
 */
#include "memserver_fx.h"

#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "remote.h"

/* the memserver dies with the test process, even when an assertion aborts it */
static void child_setup(gpointer unused)
{
	prctl(PR_SET_PDEATHSIG, SIGKILL);
}

/* the port of the server's ready line ("memserver: serving ... on tcp 127.0.0.1:PORT ...") */
static int ready_port(int out_fd)
{
	gint64 deadline = g_get_monotonic_time() + 10 * G_USEC_PER_SEC;
	char line[512] = "";
	size_t have = 0;
	char *p;
	int port;

	while (!memchr(line, '\n', have)) {
		struct pollfd pfd = { .fd = out_fd, .events = POLLIN };
		ssize_t n;

		g_assert_cmpint(g_get_monotonic_time(), <, deadline);
		if (poll(&pfd, 1, 200) <= 0)
			continue;
		n = read(out_fd, line + have, sizeof(line) - 1 - have);
		g_assert_cmpint(n, >, 0);
		have += (size_t)n;
		line[have] = 0;
	}
	p = strstr(line, "127.0.0.1:");
	g_assert_nonnull(p);
	port = atoi(p + strlen("127.0.0.1:"));
	g_assert_cmpint(port, >, 0);
	return port;
}

struct remote *tfx_memserver_start(const char *size, unsigned int op_timeout_ms, GPid *pid)
{
	const char *bd = g_getenv("RMEM_BUILD_DIR");
	char *bin = g_build_filename(bd ? bd : ".", "memserver", "memserver", NULL);
	char *argv[] = { bin, (char *)"--size", (char *)size, (char *)"--port", (char *)"0", NULL };
	struct remote_config cfg;
	struct remote *r;
	GError *err = NULL;
	int out_fd, port;

	if (!g_spawn_async_with_pipes(NULL, argv, NULL, G_SPAWN_DO_NOT_REAP_CHILD, child_setup, NULL,
				      pid, NULL, &out_fd, NULL, &err))
		g_error("spawning %s: %s", bin, err->message);
	g_free(bin);
	port = ready_port(out_fd);
	close(out_fd);

	memset(&cfg, 0, sizeof(cfg));
	xport_params_init(&cfg.params);
	cfg.params.host = "127.0.0.1";
	cfg.params.port = (uint16_t)port;
	cfg.params.quiet = true;
	if (op_timeout_ms)
		cfg.params.op_timeout_ms = op_timeout_ms;
	cfg.transport = "tcp";
	cfg.qps = 2;
	cfg.bounce_size = 1U << 20;
	g_assert_cmpint(remote_open(&cfg, &r), ==, 0);
	return r;
}

void tfx_memserver_kill(GPid *pid)
{
	int status;

	if (!*pid)
		return;
	kill(*pid, SIGKILL);
	waitpid(*pid, &status, 0);
	g_spawn_close_pid(*pid);
	*pid = 0;
}

void tfx_memserver_stop(struct remote **r, GPid *pid)
{
	int status, i;

	remote_close(*r);
	*r = NULL;
	if (!*pid)
		return;
	kill(*pid, SIGTERM);
	for (i = 0; i < 100; i++) {
		if (waitpid(*pid, &status, WNOHANG) == *pid) {
			g_spawn_close_pid(*pid);
			*pid = 0;
			return;
		}
		g_usleep(50000);
	}
	tfx_memserver_kill(pid);
}
