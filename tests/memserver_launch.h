/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * memserver_launch.h - the one way the C tests start a memserver:
 * $RMEM_BUILD_DIR/memserver/memserver with the given arguments and
 * G_DEBUG=fatal-warnings, dying with the test process even when an assertion
 * aborts it, and its ready line read (within 10 s) for the ports. Failures
 * are test failures (g_error / g_assert).
 */
#ifndef RMEM_TESTS_MEMSERVER_LAUNCH_H
#define RMEM_TESTS_MEMSERVER_LAUNCH_H

#include <stdint.h>

#include <glib.h>

struct memserver_proc {
	GPid pid;
	uint16_t tcp_port;
	uint16_t rdma_port; /* the TCP port when the server does not name another */
};

/* args: NULL-terminated, after the program name */
void memserver_launch(const char *const *args, struct memserver_proc *ms);

#endif /* RMEM_TESTS_MEMSERVER_LAUNCH_H */
