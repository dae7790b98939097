// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * memserver_fx.c - a real memserver for the C integration tests (see
 * memserver_fx.h).
 */
#include "memserver_fx.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "memserver_launch.h"
#include "remote.h"

static unsigned short last_port; /* of the memserver started last */

static struct remote *open_remote(unsigned short port, unsigned int op_timeout_ms)
{
	struct remote_server srv = { .host = "127.0.0.1", .port = port };
	struct remote_config cfg;
	struct remote *r;

	memset(&cfg, 0, sizeof(cfg));
	xport_params_init(&cfg.member.params);
	cfg.member.params.quiet = true;
	if (op_timeout_ms)
		cfg.member.params.op_timeout_ms = op_timeout_ms;
	cfg.member.transport = "tcp";
	cfg.member.qps = 2;
	cfg.member.bounce_size = 1U << 20;
	cfg.servers = &srv;
	cfg.nservers = 1;
	g_assert_cmpint(remote_open(&cfg, &r, NULL), ==, 0);
	return r;
}

struct remote *tfx_memserver_start(const char *size, unsigned int op_timeout_ms, GPid *pid)
{
	const char *const args[] = { "--size", size, "--port", "0", NULL };
	struct memserver_proc ms;

	memserver_launch(args, &ms);
	*pid = ms.pid;
	last_port = ms.tcp_port;
	return open_remote(ms.tcp_port, op_timeout_ms);
}

struct remote *tfx_memserver_client(void)
{
	return open_remote(last_port, 0);
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
