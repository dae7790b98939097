/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * memserver_fx.h - a real memserver for the C integration tests of the
 * filesystem layers (test_cache, test_meta): started by memserver_launch()
 * on an ephemeral loopback port, with a remote (fuse-client/pool/remote.h)
 * opened to it over TCP. Failures are test failures (g_error / g_assert), so
 * none of these return an error.
 */
#ifndef RMEM_TESTS_MEMSERVER_FX_H
#define RMEM_TESTS_MEMSERVER_FX_H

#include <glib.h>

struct remote;

/*
 * Start a memserver with a pool of size ("64M"...) and return a remote to it
 * (2 channels, 1 MiB bounce; op_timeout_ms 0: the transport's default).
 * *pid gets the server's pid.
 */
struct remote *tfx_memserver_start(const char *size, unsigned int op_timeout_ms, GPid *pid);

/* one more client of the memserver started last (its own client id), as a second machine */
struct remote *tfx_memserver_client(void);

/* SIGKILL the server and reap it (a remote to it stays open; its ops fail); *pid = 0 */
void tfx_memserver_kill(GPid *pid);

/* close *r (NULL then), SIGTERM the server, SIGKILL after 5 s, reap; *pid = 0 */
void tfx_memserver_stop(struct remote **r, GPid *pid);

#endif /* RMEM_TESTS_MEMSERVER_FX_H */
