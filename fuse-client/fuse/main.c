// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * main.c - the rmemfs program: rmemfs SERVER[:PORT] MOUNTPOINT [-f] [-d] [-o OPTIONS]
 *
 * Order of events, chosen so that every failure is reported on the terminal
 * (or to mount(8) through mount.fuse3) with a non-zero exit status:
 *   parse options -> load the token -> fuse_session_new (checks libfuse's
 *   options) -> [fork; the parent waits for the child's verdict] -> [-o swap:
 *   lock memory, swapmode.h] -> connect (remote_open) -> mount_open
 *   (superblock, lease, recovery) -> fuse_session_mount -> tell the parent
 *   "mounted", detach -> serve.
 * libfuse's fuse_daemonize() cannot be used: it forks after the mount, and
 * the threads mount_open starts (lease heartbeat, the committer) would not
 * survive a fork. So we fork first, before any thread exists, and do the
 * daemon's detaching ourselves once the mount stands.
 *
 * Unmount (fusermount3 -u / umount, or SIGTERM/SIGINT/SIGHUP through libfuse's
 * handlers) ends the loop; then the data is flushed (ops destroy), and
 * mount_close writes a checkpoint, marks the pool clean and frees the lease.
 */
#define G_LOG_DOMAIN "rmemfs"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <syslog.h>
#include <unistd.h>

#include <fuse_lowlevel.h>
#include <glib.h>

#include "cache.h"
#include "clock.h"
#include "config.h"
#include "devio.h"
#include "donors.h"
#include "follow.h"
#include "inval.h"
#include "io.h"
#include "meta.h"
#include "mount.h"
#include "ops.h"
#include "options.h"
#include "reader.h"
#include "remote.h"
#include "swapmode.h"

#define MAIN_BOUNCE_SIZE (2U << 20) /* per channel: a 1 MiB request and its padding */
#define MAIN_SWAP_BOUNCE_SIZE (256U << 10) /* -o swap: the data goes from the cache arena */
#define MAIN_LEASE_TAKEOVER_MS 10000

/* ---- detaching ---- */

/*
 * Fork. The parent waits until the child writes one byte to the pipe (it is
 * mounted: exit 0) or exits (it failed and printed why: exit with its
 * status). The child returns with *notify_fd set. Returns 0 or -errno.
 */
static int daemon_fork(int *notify_fd)
{
	int status, p[2];
	ssize_t n;
	pid_t pid;
	char c;

	if (pipe2(p, O_CLOEXEC) < 0) {
		fprintf(stderr, "rmemfs: pipe: %s\n", g_strerror(errno));
		return -errno;
	}
	pid = fork();
	if (pid < 0) {
		fprintf(stderr, "rmemfs: fork: %s\n", g_strerror(errno));
		close(p[0]);
		close(p[1]);
		return -errno;
	}
	if (pid > 0) {
		close(p[1]);
		do {
			n = read(p[0], &c, 1);
		} while (n < 0 && errno == EINTR);
		if (n == 1)
			_exit(0);
		while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
			;
		_exit(WIFEXITED(status) && WEXITSTATUS(status) ? WEXITSTATUS(status) : 1);
	}
	close(p[0]);
	*notify_fd = p[1];
	return 0;
}

/* the daemon's log goes to syslog once stderr is gone */
static GLogWriterOutput syslog_writer(GLogLevelFlags level, const GLogField *fields,
				      gsize n_fields, gpointer user_data)
{
	const char *domain = NULL, *message = NULL;
	int prio;
	gsize i;

	for (i = 0; i < n_fields; i++) {
		if (!strcmp(fields[i].key, "GLIB_DOMAIN"))
			domain = fields[i].value;
		else if (!strcmp(fields[i].key, "MESSAGE"))
			message = fields[i].value;
	}
	if (g_log_writer_default_would_drop(level, domain))
		return G_LOG_WRITER_HANDLED; /* debug output not asked for by G_MESSAGES_DEBUG */
	if (level & (G_LOG_LEVEL_ERROR | G_LOG_LEVEL_CRITICAL))
		prio = LOG_ERR;
	else if (level & G_LOG_LEVEL_WARNING)
		prio = LOG_WARNING;
	else if (level & (G_LOG_LEVEL_MESSAGE | G_LOG_LEVEL_INFO))
		prio = LOG_INFO;
	else
		prio = LOG_DEBUG;
	syslog(prio, "%s: %s", domain ? domain : "rmemfs", message ? message : "");
	return G_LOG_WRITER_HANDLED;
}

/* mounted: detach from the terminal and let the waiting parent exit 0 */
static void daemon_ready(int notify_fd)
{
	int nullfd;

	if (setsid() < 0)
		g_message("setsid: %s", g_strerror(errno));
	if (chdir("/") < 0)
		g_message("chdir /: %s", g_strerror(errno));
	openlog("rmemfs", LOG_PID, LOG_DAEMON);
	g_log_set_writer_func(syslog_writer, NULL, NULL);
	nullfd = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (nullfd >= 0) {
		dup2(nullfd, 0);
		dup2(nullfd, 1);
		dup2(nullfd, 2);
		if (nullfd > 2)
			close(nullfd);
	}
	if (write(notify_fd, "1", 1) != 1)
		g_message("telling the parent we are mounted: %s", g_strerror(errno));
	close(notify_fd);
}

/* ---- connection ---- */

static const char *connect_hint(int rc)
{
	switch (rc) {
	case -ECONNREFUSED:
		return " (is a memserver listening there?)";
	case -EPERM:
	case -EACCES:
		return " (the memserver refused the token: check -o token_file=)";
	case -ETIMEDOUT:
		return " (no answer: wrong address, firewall, or the server is stuck)";
	case -ENOENT:
		return " (the name does not resolve)";
	case -ENODEV:
		return " (no RDMA device reaches the server: try -o transport=tcp)";
	case -EPROTONOSUPPORT:
		return " (the server speaks another protocol version)";
	default:
		return "";
	}
}

static void print_stats(struct cache *cache, struct io *io)
{
	char line[512], pool[128];

	cache_describe(cache, line, sizeof(line));
	io_describe(io, pool, sizeof(pool));
	fprintf(stderr, "rmemfs: %s; %s\n", line, pool);
}

/*
 * -o donors=FILE: the servers of the set of pool o->server, chosen among
 * the candidates (format) or found there, into o->servers; -errno after
 * saying why
 */
static int resolve_donors(struct options *o, const struct xport_params *params)
{
	struct donors_request rq = {
		.file = o->donors,
		.name = o->server,
		.params = params,
		.create = o->format,
		.size = o->pool_size,
		.want = o->ec_k ? o->ec_k + o->ec_m : o->replicas,
	};
	char *err_msg = NULL;
	int rc;

	rc = donors_resolve(&rq, o->servers, REMOTE_MAX_SERVERS, &o->nservers, &err_msg);
	if (rc < 0)
		fprintf(stderr, "rmemfs: cannot %s pool %s with donors=%s: %s\n",
			o->format ? "place" : "find", o->server, o->donors, err_msg);
	g_free(err_msg);
	return rc;
}

/* the pool connection the options ask for; -errno after saying why */
static int remote_config(struct options *o, struct remote_config *rcfg)
{
	struct member_config *mc = &rcfg->member;

	memset(rcfg, 0, sizeof(*rcfg));
	if (xport_params_client(&mc->params, o->servers[0].host, o->servers[0].port,
				o->token_file, "rmemfs", "token_file=") < 0)
		return -EINVAL;
	if (o->donors && resolve_donors(o, &mc->params) < 0)
		return -EINVAL;
	mc->params.host = o->servers[0].host;
	mc->params.port = o->servers[0].port;
	mc->params.pool_create_size = o->pool_size;
	mc->transport = o->transport;
	mc->params.poll_mode = o->poll_mode;
	mc->qps = o->qps;
	mc->bounce_size = o->swap ? MAIN_SWAP_BOUNCE_SIZE : MAIN_BOUNCE_SIZE;
	mc->reconnect_timeout_ms = o->reconnect_timeout_ms;
	rcfg->servers = o->servers;
	rcfg->nservers = o->nservers;
	rcfg->replicas = o->replicas;
	rcfg->ec_k = o->ec_k;
	rcfg->ec_m = o->ec_m;
	rcfg->degraded = o->degraded;
	rcfg->format = o->format;
	rcfg->read_only = o->read_only;
	return 0;
}

static void ops_config(const struct options *o, struct ops_ctx *ctx)
{
	*ctx = (struct ops_ctx){
		.entry_timeout = o->entry_timeout,
		.attr_timeout = o->attr_timeout,
		.direct_io = o->direct_io,
		.writeback_cache = o->writeback_cache,
		.odirect_uncached = o->odirect_uncached,
		.default_permissions = o->default_permissions,
		.devio = { .ring_mode = o->uring,
			   .ring_poll_us = o->uring_poll_us,
			   .mountpoint = o->mountpoint },
	};
}

/* -o uring=on: refuse before mounting where the ring cannot be had; 0 or -1 after saying why */
static int check_uring(const struct options *o)
{
	const char *why = NULL;

	if (o->uring != RING_ON)
		return 0;
#ifdef RMEM_HAVE_FUSE_CUSTOM_IO
	if (ring_kernel_check(&why) == 0)
		return 0;
#else
	why = "this rmemfs was built with a libfuse older than 3.13 (no custom I/O)";
#endif
	fprintf(stderr, "rmemfs: -o uring=on: %s; -o uring=auto falls back to /dev/fuse\n", why);
	return -1;
}

/* mount the filesystem in the pool (taking its lease); -errno after saying why */
static int open_meta(const struct options *o, struct remote *remote, struct meta **meta)
{
	struct mount_opts mo;
	char *err_msg = NULL;
	int rc;

	memset(&mo, 0, sizeof(mo));
	mo.holder_name = g_strdup_printf("%s pid %d", g_get_host_name(), (int)getpid());
	mo.format = o->format;
	mo.read_only = o->read_only;
	mo.lease_takeover_ms = MAIN_LEASE_TAKEOVER_MS;
	mo.follow = o->read_only;
	rc = mount_open(remote, &mo, meta, &err_msg);
	if (rc < 0)
		fprintf(stderr, "rmemfs: cannot mount the pool at %s: %s\n", o->server,
			err_msg ? err_msg : g_strerror(-rc));
	g_free((char *)mo.holder_name);
	g_free(err_msg);
	return rc;
}

/* --help or --version */
static void print_info(const struct options *o, const char *prog)
{
	if (o->show_help) {
		options_print_help(prog);
		return;
	}
	printf("rmemfs version %s\n", RMEM_VERSION);
	fflush(stdout);
	fuse_lowlevel_version();
}

static int open_cache(const struct options *o, struct io *io, struct cache **cache)
{
	struct cache_config cfg = {
		.size = o->cache_size,
		.block_size = o->block_size,
		.readahead = o->readahead,
		.writeback = o->writeback,
		.idle_ms = o->cache_idle_ms,
		.resident = o->swap,
	};
	int rc = cache_create(&cfg, io, cache);

	if (rc < 0)
		fprintf(stderr, "rmemfs: cache_create: %s\n", g_strerror(-rc));
	return rc;
}

/* serve until unmounted or signalled: > 0 the signal, 0, or -errno */
static int session_loop(struct fuse_session *se, const struct options *o)
{
	int rc;

	if (o->singlethread)
		return fuse_session_loop(se);
#if FUSE_USE_VERSION >= 312
	struct fuse_loop_config *loop_cfg = fuse_loop_cfg_create();

	fuse_loop_cfg_set_clone_fd(loop_cfg, o->clone_fd);
	/* UINT_MAX: not given on the command line, keep libfuse's default */
	if (o->max_idle_threads != UINT_MAX)
		fuse_loop_cfg_set_idle_threads(loop_cfg, o->max_idle_threads);
	if (o->max_threads > 0 && o->max_threads != UINT_MAX)
		fuse_loop_cfg_set_max_threads(loop_cfg, o->max_threads);
	rc = fuse_session_loop_mt(se, loop_cfg);
	fuse_loop_cfg_destroy(loop_cfg);
#else
	struct fuse_loop_config loop_cfg = {
		.clone_fd = o->clone_fd,
		.max_idle_threads = o->max_idle_threads,
	};

	rc = fuse_session_loop_mt(se, &loop_cfg);
#endif
	return rc;
}

/* mount on the mountpoint and serve until unmounted or signalled: the exit status */
static int serve(struct fuse_session *se, const struct options *o, struct ops_ctx *ctx,
		 int *notify_fd)
{
	struct remote *remote = ctx->remote;
	int rc, status = 1;

	if (fuse_set_signal_handlers(se) != 0) {
		fprintf(stderr, "rmemfs: cannot install signal handlers\n");
		return 1;
	}
	if (fuse_session_mount(se, o->mountpoint) != 0) {
		fprintf(stderr, "rmemfs: cannot mount on %s (see the message above)\n",
			o->mountpoint);
		goto out_signals;
	}
	/* before the loop reads INIT: lets ops_init ask for what libfuse cannot (devio.h) */
	rc = devio_attach(se, &ctx->devio);
	if (rc < 0)
		g_message("custom /dev/fuse I/O: %s (O_DIRECT opens then take the kernel's path, "
			  "and requests come over /dev/fuse)",
			  g_strerror(-rc));
	g_message("mounted %s (%s, %s) on %s", o->server, remote_transport(remote),
		  o->read_only ? "read-only" : "read-write", o->mountpoint);
	if (inval_start(se, &ctx->inval) < 0) {
		fprintf(stderr, "rmemfs: cannot start the direct-write invalidation thread\n");
		goto out_unmount;
	}
	if (reader_start(ctx, o->refresh_ms) < 0) {
		fprintf(stderr, "rmemfs: cannot start following the writer\n");
		goto out_unmount;
	}
	if (*notify_fd >= 0) {
		daemon_ready(*notify_fd);
		*notify_fd = -1;
	}
	rc = session_loop(se, o);
	/* > 0: ended by that signal, which is a normal way to stop */
	status = rc < 0 ? 1 : 0;
	if (rc < 0)
		g_message("fuse_session_loop: %s", g_strerror(-rc));
out_unmount:
	follow_stop(ctx->meta); /* (it uses the cache, destroyed before the metadata) */
	inval_stop(ctx->inval); /* the loop has ended: nothing queues any more */
	ctx->inval = NULL;
	devio_detach(&ctx->devio); /* after the last deferred reply went into its ring entry */
	fuse_session_unmount(se);
out_signals:
	fuse_remove_signal_handlers(se);
	return status;
}

/*
 * The pool, its filesystem, io and the cache under ctx, served on the mountpoint; the exit
 * status. *se is destroyed here once serving began: its destroy callback flushes the cache.
 */
static int mount_and_serve(struct fuse_session **se, const struct options *o,
			   const struct remote_config *rcfg, struct ops_ctx *ctx, int *notify_fd)
{
	struct remote *remote = NULL;
	struct meta *meta = NULL;
	struct cache *cache = NULL;
	struct io *io = NULL;
	char *err_msg = NULL;
	int64_t t0 = clock_now_us(), t1, t2;
	int status = 1, rc;

	rc = remote_open(rcfg, &remote, &err_msg);
	if (rc < 0 && err_msg)
		fprintf(stderr, "rmemfs: cannot mount %s: %s\n", o->server, err_msg);
	else if (rc < 0)
		fprintf(stderr, "rmemfs: cannot reach the pool at %s over %s: %s%s\n", o->server,
			o->transport, g_strerror(-rc), connect_hint(rc));
	g_free(err_msg);
	if (rc < 0)
		return 1;
	t1 = clock_now_us();
	if (open_meta(o, remote, &meta) < 0)
		goto out_remote;
	t2 = clock_now_us();

	io = io_create(meta, remote, !o->read_only);
	if (open_cache(o, io, &cache) < 0)
		goto out_meta;
	g_debug("mount stages: connect %.3f s, filesystem %.3f s, cache %.3f s",
		(double)(t1 - t0) / 1e6, (double)(t2 - t1) / 1e6,
		(double)(clock_now_us() - t2) / 1e6);
	ctx->meta = meta;
	ctx->io = io;
	ctx->cache = cache;
	ctx->remote = remote;

	status = serve(*se, o, ctx, notify_fd);
out_meta:
	fuse_session_destroy(*se);
	*se = NULL;
	if (o->debug && cache)
		print_stats(cache, io);
	cache_destroy(cache);
	io_destroy(io);
	rc = mount_close(meta);
	if (rc < 0) {
		fprintf(stderr, "rmemfs: unmount did not complete cleanly: %s (the next mount recovers)\n",
			g_strerror(-rc));
		status = 1;
	}
out_remote:
	remote_close(remote);
	return status;
}

int main(int argc, char **argv)
{
	struct remote_config rcfg;
	struct swapmode swap;
	struct fuse_session *se;
	struct ops_ctx ctx;
	struct options o;
	int notify_fd = -1, status = 1, rc;

	/*
	 * A fixed mmap threshold. glibc raises it each time a large block is
	 * freed (the checkpoint buffer, megabytes with many files); the next
	 * ones then come from the heap and stay resident after free. Measured
	 * with 100,000 small files: 444 -> 357 bytes of RSS per file.
	 */
	mallopt(M_MMAP_THRESHOLD, 256 << 10);
	rc = options_parse(&o, argc, argv);
	if (rc < 0 || o.show_help || o.show_version) {
		if (rc == 0)
			print_info(&o, argv[0]);
		options_free(&o);
		return rc < 0 ? 2 : 0;
	}

	if (check_uring(&o) < 0 || remote_config(&o, &rcfg) < 0) {
		options_free(&o);
		return 1;
	}
	ops_config(&o, &ctx);

	se = fuse_session_new(&o.args, &ops_lowlevel, sizeof(ops_lowlevel), &ctx);
	if (!se) {
		options_free(&o); /* libfuse said which option it did not like */
		return 2;
	}
	ctx.se = se;

	if (!o.foreground && daemon_fork(&notify_fd) < 0)
		goto out_session;
	signal(SIGPIPE, SIG_IGN); /* a dead server is an error code, not a signal */
	/* before any thread or the cache exists: both are then locked as they come */
	if (o.swap) {
		if (swapmode_enter(&swap) < 0)
			goto out_session;
		ctx.swap = &swap;
	}
	status = mount_and_serve(&se, &o, &rcfg, &ctx, &notify_fd);
out_session:
	if (se)
		fuse_session_destroy(se);
	options_free(&o);
	if (notify_fd >= 0)
		close(notify_fd); /* the parent sees EOF and reports our status */
	return status;
}
