/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * xport_connect.c - choosing a transport: by name ("tcp", "rdma", "auto"),
 * with the parameters' defaults filled in. The only file that chooses
 * between the ops tables, so the generic half (xport.c) depends on neither
 * transport (the RDMA one uses the TCP one to open a named pool first).
 */
#define G_LOG_DOMAIN "rmemfs-xport"

#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <glib.h>

#ifdef RMEM_HAVE_RDMA
#include <infiniband/verbs.h>
#endif

#include "xport.h"

#define XPORT_DEFAULT_SPIN_US 50
#define XPORT_DEFAULT_DEPTH 128
#define XPORT_DEFAULT_CONNECT_TIMEOUT_MS 5000
#define XPORT_DEFAULT_OP_TIMEOUT_MS 10000
static const struct xport_params xport_defaults = {
	.port = PROTO_DEFAULT_PORT,
	.poll_mode = XPORT_POLL_HYBRID,
	.spin_us = XPORT_DEFAULT_SPIN_US,
	.queue_depth = XPORT_DEFAULT_DEPTH,
	.connect_timeout_ms = XPORT_DEFAULT_CONNECT_TIMEOUT_MS,
	.op_timeout_ms = XPORT_DEFAULT_OP_TIMEOUT_MS,
};

void xport_params_init(struct xport_params *params)
{
	*params = xport_defaults;
}

int xport_params_client(struct xport_params *params, const char *host, uint16_t port,
			const char *token_file, const char *prog, const char *token_opt)
{
	int rc;

	xport_params_init(params);
	params->host = host;
	if (port)
		params->port = port;
	if (!token_file)
		return 0;
	rc = proto_token_load(token_file, params->token_hash);
	if (rc < 0)
		fprintf(stderr, "%s: %s%s: %s\n", prog, token_opt, token_file,
			rc == -EINVAL ? "the file holds no token" : g_strerror(-rc));
	return rc < 0 ? rc : 0;
}

/* the zero values documented in xport.h mean "default": implementations see real values */
static void xport_params_fill(struct xport_params *p, const struct xport_params *in)
{
	const struct xport_params *d = &xport_defaults;

	*p = *in;
	p->port = p->port ? p->port : d->port;
	p->spin_us = p->spin_us ? p->spin_us : d->spin_us;
	p->queue_depth = p->queue_depth ? p->queue_depth : d->queue_depth;
	if (p->connect_timeout_ms <= 0)
		p->connect_timeout_ms = d->connect_timeout_ms;
	if (p->op_timeout_ms <= 0)
		p->op_timeout_ms = d->op_timeout_ms;
}

bool xport_rdma_device_present(void)
{
#ifdef RMEM_HAVE_RDMA
	struct ibv_device **list;
	int n = 0;

	list = ibv_get_device_list(&n);
	if (!list)
		return false;
	ibv_free_device_list(list);
	return n > 0;
#else
	return false;
#endif
}

bool xport_available(const char *name)
{
	if (!name || strcmp(name, "auto") == 0 || strcmp(name, "tcp") == 0)
		return true;
#ifdef RMEM_HAVE_RDMA
	if (strcmp(name, "rdma") == 0)
		return true;
#endif
	return false;
}

static int xport_connect_ops(const struct xport_ops *ops, const struct xport_params *p,
			     struct xport **out)
{
	struct xport *x = NULL;
	int rc;

	rc = ops->connect(p, &x);
	if (rc == -EKEYREVOKED)
		g_message("%s %s:%u refuses client id %016" G_GINT64_MODIFIER "x: it was fenced "
			  "(another client took its lease over)",
			  ops->name, p->host, p->port, (guint64)p->client_id);
	if (rc)
		return rc;
	x->ops = ops;
	*out = x;
	return 0;
}

#ifdef RMEM_HAVE_RDMA
static bool xport_auto_falls_back(int rc)
{
	return rc == -ENODEV || rc == -ECONNREFUSED || rc == -EADDRNOTAVAIL ||
	       rc == -ETIMEDOUT || rc == -ENETUNREACH;
}
#endif

int xport_connect(const char *name, const struct xport_params *params, struct xport **out)
{
	struct xport_params p;
	char why[160];
	int rc;

	if (!params || !out || !params->host)
		return -EINVAL;
	xport_params_fill(&p, params);

	if (name && strcmp(name, "tcp") == 0)
		return xport_connect_ops(&xport_tcp_ops, &p, out);
	if (name && strcmp(name, "rdma") == 0) {
#ifdef RMEM_HAVE_RDMA
		return xport_connect_ops(&xport_rdma_ops, &p, out);
#else
		return -EPROTONOSUPPORT;
#endif
	}
	if (name && strcmp(name, "auto") != 0)
		return -EINVAL;

#ifdef RMEM_HAVE_RDMA
	if (xport_rdma_device_present()) {
		rc = xport_connect_ops(&xport_rdma_ops, &p, out);
		if (rc == 0) {
			if (!p.quiet)
				g_message("transport auto: using %s", (*out)->peer);
			return 0;
		}
		if (!xport_auto_falls_back(rc))
			return rc;
		snprintf(why, sizeof(why), "rdma to %s:%u failed (%s)", p.host, p.port,
			 g_strerror(-rc));
	} else {
		g_strlcpy(why, "no RDMA device", sizeof(why));
	}
#else
	g_strlcpy(why, "built without RDMA", sizeof(why));
#endif
	rc = xport_connect_ops(&xport_tcp_ops, &p, out);
	if (rc == 0 && !p.quiet)
		g_message("transport auto: %s, using %s", why, (*out)->peer);
	return rc;
}
