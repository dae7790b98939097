// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * fsck_main.c - the rmemfs-fsck program: check (and with --repair, fix) the
 * filesystem in a memserver's pool.
 *
 *   rmemfs-fsck SERVER[:PORT][,SERVER[:PORT]...] [--repair] [--force] [-o token_file=F,transport=T]
 *
 * Exit status: 0 no problems, 1 problems found (and repaired with --repair),
 * 2 operational error (cannot connect, no filesystem, pool busy, bad usage).
 */
#define G_LOG_DOMAIN "rmemfs-fsck"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <glib.h>

#include "fsck.h"
#include "net.h"
#include "mount.h"
#include "proto.h"
#include "remote.h"
#include "xport.h"

#define EXIT_PROBLEMS 1
#define EXIT_ERROR 2

struct fsck_cli {
	const char *server; /* as given: SERVER[:PORT] */
	struct remote_server servers[REMOTE_MAX_SERVERS];
	unsigned int nservers;
	char *transport;
	char *token_file;
	int takeover_ms;
	gboolean repair, force, verbose;
};

static int parse_o(const char *opts, struct fsck_cli *cli)
{
	gchar **kv = g_strsplit(opts, ",", -1);
	int i, rc = 0;

	for (i = 0; kv[i] && !rc; i++) {
		char *eq = strchr(kv[i], '=');
		const char *val = eq ? eq + 1 : NULL;

		if (eq)
			*eq = 0;
		if (!kv[i][0])
			continue;
		if (strcmp(kv[i], "token_file") == 0 && val && *val) {
			g_free(cli->token_file);
			cli->token_file = g_strdup(val);
		} else if (strcmp(kv[i], "transport") == 0 && val &&
			   (!strcmp(val, "auto") || !strcmp(val, "tcp") || !strcmp(val, "rdma"))) {
			g_free(cli->transport);
			cli->transport = g_strdup(val);
		} else if (strcmp(kv[i], "takeover_ms") == 0 && val && *val) {
			char *end;
			long v = strtol(val, &end, 10);

			if (*end || v < 100 || v > 600000) {
				fprintf(stderr, "rmemfs-fsck: takeover_ms must be 100..600000\n");
				rc = -EINVAL;
			}
			cli->takeover_ms = (int)v;
		} else {
			fprintf(stderr, "rmemfs-fsck: unknown or malformed option '%s%s%s'\n", kv[i],
				val ? "=" : "", val ? val : "");
			rc = -EINVAL;
		}
	}
	g_strfreev(kv);
	return rc;
}

/* the command line into *cli; 0, or -EINVAL after saying what is wrong */
static int fsck_parse(int argc, char **argv, struct fsck_cli *cli)
{
	gchar **ovals = NULL;
	GError *gerr = NULL;
	GOptionContext *octx;
	char *why = NULL;
	int i, rc = -EINVAL;
	GOptionEntry entries[] = {
		{ "repair", 0, 0, G_OPTION_ARG_NONE, &cli->repair,
		  "repair what is found (takes the pool's lease)", NULL },
		{ "force", 0, 0, G_OPTION_ARG_NONE, &cli->force,
		  "check a pool a live client has mounted; with --repair take its lease", NULL },
		{ "verbose", 'v', 0, G_OPTION_ARG_NONE, &cli->verbose, "log progress", NULL },
		{ "option", 'o', 0, G_OPTION_ARG_STRING_ARRAY, &ovals,
		  "token_file=PATH, transport=auto|tcp|rdma, takeover_ms=N", "OPTS" },
		{ NULL }
	};

	octx = g_option_context_new("SERVER[:PORT][/NAME] - check an rmemfs filesystem");
	g_option_context_set_summary(octx,
				     "Exit status: 0 no problems, 1 problems found (repaired with "
				     "--repair), 2 error.");
	g_option_context_add_main_entries(octx, entries, NULL);
	if (!g_option_context_parse(octx, &argc, &argv, &gerr)) {
		fprintf(stderr, "rmemfs-fsck: %s\n", gerr->message);
		g_error_free(gerr);
		goto out;
	}
	if (argc != 2) {
		fprintf(stderr, "usage: rmemfs-fsck SERVER[:PORT][/NAME][,SERVER[:PORT][/NAME]...] [--repair] [--force] [-o OPTS]\n");
		goto out;
	}
	cli->server = argv[1];
	if (remote_parse_servers(cli->server, cli->servers, REMOTE_MAX_SERVERS, &cli->nservers,
				 &why) < 0) {
		fprintf(stderr, "rmemfs-fsck: bad server address %s (want HOST[:PORT][/NAME], or up "
			"to %u of them separated by commas)\n", why ? why : cli->server,
			REMOTE_MAX_SERVERS);
		g_free(why);
		goto out;
	}
	for (i = 0; ovals && ovals[i]; i++)
		if (parse_o(ovals[i], cli) < 0)
			goto out;
	rc = 0;
out:
	g_strfreev(ovals);
	g_option_context_free(octx);
	return rc;
}

/* one connection to the pool (each member); -errno after saying why */
static int fsck_connect(const struct fsck_cli *cli, struct remote **r)
{
	struct remote_config cfg;
	char *err_msg = NULL;
	int rc;

	memset(&cfg, 0, sizeof(cfg));
	if (xport_params_client(&cfg.member.params, cli->servers[0].host, cli->servers[0].port,
				cli->token_file, "rmemfs-fsck", "token_file=") < 0)
		return -EINVAL;
	cfg.member.params.quiet = true;
	cfg.member.transport = cli->transport ? cli->transport : "auto";
	cfg.member.qps = 1;
	cfg.member.bounce_size = 4U << 20;
	cfg.servers = cli->servers;
	cfg.nservers = cli->nservers;
	cfg.read_only = !cli->repair;
	rc = remote_open(&cfg, r, &err_msg);
	if (rc < 0)
		fprintf(stderr, "rmemfs-fsck: connecting to %s: %s\n", cli->server,
			err_msg ? err_msg : g_strerror(-rc));
	g_free(err_msg);
	return rc;
}

static void fsck_print_summary(const struct fsck_cli *cli, const struct fsck_report *rep)
{
	printf("%s: %" G_GUINT64_FORMAT " inodes (%" G_GUINT64_FORMAT " directories, %"
	       G_GUINT64_FORMAT " files, %" G_GUINT64_FORMAT " symlinks, %" G_GUINT64_FORMAT
	       " other), %" G_GUINT64_FORMAT " of %" G_GUINT64_FORMAT " blocks in use\n",
	       cli->server, (guint64)rep->inodes, (guint64)rep->dirs, (guint64)rep->files,
	       (guint64)rep->symlinks, (guint64)rep->others, (guint64)rep->blocks_used,
	       (guint64)rep->data_blocks);
	if (rep->problems)
		printf("%u problems found, %u repaired%s\n", rep->problems, rep->repaired,
		       cli->repair ? "" : " (run with --repair to fix them)");
	else
		printf("no problems found\n");
}

/* check (and repair) the pool behind r: the exit status */
static int fsck_run(const struct fsck_cli *cli, struct remote *r)
{
	struct fsck_opts fo = {
		.repair = cli->repair,
		.force = cli->force,
		.lease_takeover_ms = cli->takeover_ms,
	};
	struct fsck_report rep;
	char *err_msg = NULL;
	int rc, status = EXIT_ERROR;
	guint i;

	fsck_report_init(&rep);
	rc = mount_fsck(r, &fo, &rep, &err_msg);
	for (i = 0; i < rep.lines->len; i++)
		printf("%s\n", (char *)g_ptr_array_index(rep.lines, i));
	if (rc < 0) {
		fprintf(stderr, "rmemfs-fsck: %s\n", err_msg ? err_msg : g_strerror(-rc));
	} else {
		fsck_print_summary(cli, &rep);
		status = rep.problems ? EXIT_PROBLEMS : EXIT_SUCCESS;
	}
	g_free(err_msg);
	fsck_report_clear(&rep);
	return status;
}

int main(int argc, char **argv)
{
	struct fsck_cli cli = { 0 };
	struct remote *r = NULL;
	int status = EXIT_ERROR;

	if (fsck_parse(argc, argv, &cli) < 0)
		goto out;
	if (cli.verbose)
		g_setenv("G_MESSAGES_DEBUG", "all", TRUE);
	if (fsck_connect(&cli, &r) < 0)
		goto out;
	status = fsck_run(&cli, r);
	remote_close(r);
out:
	remote_servers_free(cli.servers, cli.nservers);
	g_free(cli.transport);
	g_free(cli.token_file);
	return status;
}
