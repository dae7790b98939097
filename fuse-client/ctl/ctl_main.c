// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * ctl_main.c - rmemfs-ctl: look at and steer a mounted rmemfs.
 *
 *   rmemfs-ctl MOUNTPOINT status [--json]
 *   rmemfs-ctl MOUNTPOINT replace OLD NEW [--wait]
 *   rmemfs-ctl MOUNTPOINT scrub [--wait]
 *
 * The control channel is the mount itself: status reads the stats xattr of
 * the root (CACHE_STATS_XATTR, the pool's state first: remote.h) and
 * statvfs; replace sets REMOTE_REPLACE_XATTR, which the daemon serves for
 * root or its own user, and on failure reads its message back from the
 * stats; scrub sets VERIFY_SCRUB_XATTR alike and reads its progress
 * there. No socket, no daemon address to find: whoever can reach the mount
 * point (and is allowed to) controls it.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <glib.h>

#include "cache.h"
#include "json.h"
#include "remote.h"
#include "units.h"
#include "verify.h"

#define EXIT_FAIL 1
#define EXIT_USAGE 2
#define CTL_WAIT_POLL_MS 200

/* the stats text as name -> value; NULL after saying why */
static GHashTable *read_state(const char *mnt)
{
	char *buf = g_malloc(CACHE_STATS_MAX + 1), **lines;
	GHashTable *t;
	ssize_t n;
	int i;

	n = getxattr(mnt, CACHE_STATS_XATTR, buf, CACHE_STATS_MAX);
	if (n < 0) {
		fprintf(stderr, "rmemfs-ctl: %s: %s%s\n", mnt, g_strerror(errno),
			errno == ENODATA || errno == ENOTSUP ? " (not an rmemfs mount?)" : "");
		g_free(buf);
		return NULL;
	}
	buf[n] = 0;
	t = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
	lines = g_strsplit(buf, "\n", -1);
	for (i = 0; lines[i]; i++) {
		char *sp = strchr(lines[i], ' ');

		if (sp)
			g_hash_table_insert(t, g_strndup(lines[i], (gsize)(sp - lines[i])),
					    g_strdup(sp + 1));
	}
	g_strfreev(lines);
	g_free(buf);
	return t;
}

struct member_line {
	char *addr, *pool_id, *state;
	unsigned int done, total; /* rebuilding: units copied of all */
};

/* "ADDR STATE POOLID [DONE/TOTAL]" */
static void parse_member(const char *v, struct member_line *m)
{
	char **w = g_strsplit(v, " ", -1);

	memset(m, 0, sizeof(*m));
	m->addr = g_strdup(w[0] ? w[0] : "?");
	m->state = g_strdup(w[0] && w[1] ? w[1] : "?");
	m->pool_id = g_strdup(w[0] && w[1] && w[2] ? w[2] : "?");
	if (w[0] && w[1] && w[2] && w[3])
		sscanf(w[3], "%u/%u", &m->done, &m->total);
	g_strfreev(w);
}

static void free_member(struct member_line *m)
{
	g_free(m->addr);
	g_free(m->pool_id);
	g_free(m->state);
}

static unsigned int count_members(GHashTable *t)
{
	const char *v = g_hash_table_lookup(t, "members");

	return v ? (unsigned int)strtoul(v, NULL, 10) : 1;
}

/* member i of the state; a single-server mount is member 0 */
static void member_at(GHashTable *t, unsigned int i, struct member_line *m)
{
	char key[16];
	const char *v;

	g_snprintf(key, sizeof(key), "member%u", i);
	v = g_hash_table_lookup(t, key);
	if (v) {
		parse_member(v, m);
		return;
	}
	memset(m, 0, sizeof(*m));
	v = g_hash_table_lookup(t, "server");
	m->addr = g_strdup(v ? v : "?");
	v = g_hash_table_lookup(t, "state");
	m->state = g_strdup(v && !strcmp(v, "up") ? "in_sync" : v ? v : "?");
	m->pool_id = g_strdup("-");
}

static const char *lookup(GHashTable *t, const char *k, const char *dflt)
{
	const char *v = g_hash_table_lookup(t, k);

	return v ? v : dflt;
}

/* an erasure-coded set's "ec K+M" line (remote_state_text): its k and m */
static bool ec_of(GHashTable *t, unsigned int *k, unsigned int *m)
{
	const char *v = lookup(t, "ec", NULL);

	return v && sscanf(v, "%u+%u", k, m) == 2;
}

/* ---- readers beside the writer ("role", "reader.K" lines: meta_sharing_text) ---- */

struct reader_line {
	unsigned int slot;
	char id[17];
	unsigned long long applied, behind_txns, behind_ms;
	const char *host; /* into the value */
};

/* "reader.K id=HEX applied=N behind_txns=N behind_ms=N host=REST"; false if not one */
static bool reader_at(GHashTable *t, unsigned int slot, struct reader_line *r)
{
	char key[24];
	const char *v, *h;

	g_snprintf(key, sizeof(key), "reader.%u", slot);
	v = g_hash_table_lookup(t, key);
	if (!v)
		return false;
	memset(r, 0, sizeof(*r));
	r->slot = slot;
	if (sscanf(v, "id=%16s applied=%llu behind_txns=%llu behind_ms=%llu", r->id, &r->applied,
		   &r->behind_txns, &r->behind_ms) != 4)
		return false;
	h = strstr(v, " host=");
	r->host = h ? h + 6 : "?";
	return true;
}

#define CTL_READER_SLOTS 32

static void print_readers_json(GHashTable *t)
{
	const char *role = lookup(t, "role", NULL);
	struct reader_line r;
	unsigned int k, n = 0;

	if (!role)
		return;
	printf(", \"role\": ");
	json_write_string(stdout, role);
	if (!strcmp(role, "reader")) {
		printf(", \"reader\": {\"state\": ");
		json_write_string(stdout, lookup(t, "reader_state", "?"));
		printf(", \"lag_ms\": %s, \"refresh_ms\": %s, \"applied\": %s, "
		       "\"reloads\": %s}", lookup(t, "reader_lag_ms", "0"),
		       lookup(t, "reader_refresh_ms", "0"), lookup(t, "reader_applied", "0"),
		       lookup(t, "reader_reloads", "0"));
		return;
	}
	printf(", \"readers\": [");
	for (k = 0; k < CTL_READER_SLOTS; k++) {
		if (!reader_at(t, k, &r))
			continue;
		printf("%s{\"slot\": %u, \"id\": \"%s\", \"host\": ", n++ ? ", " : "", k, r.id);
		json_write_string(stdout, r.host);
		printf(", \"applied\": %llu, \"behind_txns\": %llu, \"behind_ms\": %llu}",
		       r.applied, r.behind_txns, r.behind_ms);
	}
	printf("]");
}

static void print_readers_text(GHashTable *t)
{
	const char *role = lookup(t, "role", NULL);
	struct reader_line r;
	unsigned int k;

	if (!role)
		return;
	if (!strcmp(role, "reader")) {
		printf("read-only, following the writer: %s, %s ms behind (refresh every %s ms), "
		       "applied seq %s, %s full loads\n", lookup(t, "reader_state", "?"),
		       lookup(t, "reader_lag_ms", "?"), lookup(t, "reader_refresh_ms", "?"),
		       lookup(t, "reader_applied", "?"), lookup(t, "reader_reloads", "0"));
		return;
	}
	printf("readers: %s\n", lookup(t, "readers", "0"));
	for (k = 0; k < CTL_READER_SLOTS; k++) {
		if (!reader_at(t, k, &r))
			continue;
		printf("  slot %2u  %-32s  id %s  applied %llu, behind %llu txns / %llu ms\n", k,
		       r.host, r.id, r.applied, r.behind_txns, r.behind_ms);
	}
}

static void print_json(const char *mnt, GHashTable *t, const struct statvfs *sv)
{
	unsigned int i, n = count_members(t), ec_k, ec_m;
	struct member_line m;

	printf("{\"mountpoint\": ");
	json_write_string(stdout, mnt);
	printf(", \"state\": ");
	json_write_string(stdout, lookup(t, "state", "?"));
	/* (an erasure-coded set: replicas are the journal's copies) */
	printf(", \"replicas\": %s", lookup(t, "replicas", "1"));
	if (ec_of(t, &ec_k, &ec_m))
		printf(", \"ec\": {\"k\": %u, \"m\": %u}", ec_k, ec_m);
	printf(", \"capacity_bytes\": %llu, \"free_bytes\": %llu, \"members\": [",
	       (unsigned long long)sv->f_blocks * sv->f_frsize,
	       (unsigned long long)sv->f_bavail * sv->f_frsize);
	for (i = 0; i < n; i++) {
		member_at(t, i, &m);
		printf("%s{\"index\": %u, \"address\": ", i ? ", " : "", i);
		json_write_string(stdout, m.addr);
		printf(", \"pool_id\": ");
		json_write_string(stdout, m.pool_id);
		printf(", \"state\": ");
		json_write_string(stdout, m.state);
		if (m.total)
			printf(", \"rebuilt_units\": %u, \"units\": %u", m.done, m.total);
		printf("}");
		free_member(&m);
	}
	printf("]");
	print_readers_json(t);
	printf(", \"checksums\": {\"blocks\": %s, \"verified\": %s, \"errors\": %s, "
	       "\"repaired\": %s, \"unverified\": %s, \"hot_regions\": %s}",
	       lookup(t, "csum_blocks", "0"), lookup(t, "csum_verified", "0"),
	       lookup(t, "csum_errors", "0"), lookup(t, "csum_repaired", "0"),
	       lookup(t, "csum_unverified", "0"), lookup(t, "hot_regions", "0"));
	printf(", \"scrub\": {\"state\": ");
	json_write_string(stdout, lookup(t, "scrub", "idle"));
	printf(", \"done\": %s, \"total\": %s, \"errors\": %s, \"repaired\": %s, "
	       "\"filled\": %s}",
	       lookup(t, "scrub_done", "0"), lookup(t, "scrub_total", "0"),
	       lookup(t, "scrub_errors", "0"), lookup(t, "scrub_repaired", "0"),
	       lookup(t, "scrub_filled", "0"));
	if (g_hash_table_lookup(t, "failure")) {
		printf(", \"failure\": ");
		json_write_string(stdout, lookup(t, "failure", ""));
	}
	printf("}\n");
}

static void print_text(const char *mnt, GHashTable *t, const struct statvfs *sv)
{
	unsigned int i, n = count_members(t), ec_k, ec_m;
	char cap[32], used[32];
	struct member_line m;

	units_format_size((uint64_t)sv->f_blocks * sv->f_frsize, cap, sizeof(cap));
	units_format_size((uint64_t)(sv->f_blocks - sv->f_bfree) * sv->f_frsize, used,
			  sizeof(used));
	printf("%s: %s, %s of %u member%s in sync, ", mnt, lookup(t, "state", "?"),
	       lookup(t, "members_up", n == 1 ? "1" : "?"), n, n == 1 ? "" : "s");
	if (ec_of(t, &ec_k, &ec_m))
		printf("ec %u+%u (journal %s copies)\n", ec_k, ec_m, lookup(t, "replicas", "?"));
	else
		printf("replicas %s\n", lookup(t, "replicas", "1"));
	printf("capacity %s, %s used\n", cap, used);
	printf("%3s  %-24s %-16s  %s\n", "#", "address", "pool id", "state");
	for (i = 0; i < n; i++) {
		member_at(t, i, &m);
		printf("%3u  %-24s %-16s  %s", i, m.addr, m.pool_id, m.state);
		if (m.total)
			printf(" %u/%u units (%u%%)", m.done, m.total, m.done * 100 / m.total);
		printf("\n");
		free_member(&m);
	}
	print_readers_text(t);
	printf("checksums: %s blocks; %s verified, %s bad, %s repaired, %s unverified reads; "
	       "%s hot regions\n",
	       lookup(t, "csum_blocks", "0"), lookup(t, "csum_verified", "0"),
	       lookup(t, "csum_errors", "0"), lookup(t, "csum_repaired", "0"),
	       lookup(t, "csum_unverified", "0"), lookup(t, "hot_regions", "0"));
	printf("scrub: %s, %s/%s blocks, %s bad, %s repaired, %s checksums computed\n",
	       lookup(t, "scrub", "idle"), lookup(t, "scrub_done", "0"),
	       lookup(t, "scrub_total", "0"), lookup(t, "scrub_errors", "0"),
	       lookup(t, "scrub_repaired", "0"), lookup(t, "scrub_filled", "0"));
	if (g_hash_table_lookup(t, "failure"))
		printf("failure: %s\n", lookup(t, "failure", ""));
}

static int cmd_status(const char *mnt, bool json)
{
	struct statvfs sv;
	GHashTable *t;

	if (statvfs(mnt, &sv) < 0) {
		fprintf(stderr, "rmemfs-ctl: %s: %s\n", mnt, g_strerror(errno));
		return EXIT_FAIL;
	}
	t = read_state(mnt);
	if (!t)
		return EXIT_FAIL;
	if (json)
		print_json(mnt, t, &sv);
	else
		print_text(mnt, t, &sv);
	g_hash_table_destroy(t);
	return 0;
}

/* is any member being rebuilt? Prints the progress line; -1 when the state cannot be read */
static int rebuilding(const char *mnt)
{
	GHashTable *t = read_state(mnt);
	unsigned int i, n;
	struct member_line m;
	int busy = 0;

	if (!t)
		return -1;
	n = count_members(t);
	for (i = 0; i < n; i++) {
		member_at(t, i, &m);
		if (!strcmp(m.state, "rebuilding")) {
			busy = 1;
			fprintf(stderr, "\rrebuilding member %u (%s): %u/%u units", i, m.addr,
				m.done, m.total);
		}
		free_member(&m);
	}
	g_hash_table_destroy(t);
	return busy;
}

static int cmd_replace(const char *mnt, const char *old, const char *new, bool wait)
{
	char *v = g_strdup_printf("%s %s", old, new);
	GHashTable *t;
	int rc;

	rc = setxattr(mnt, REMOTE_REPLACE_XATTR, v, strlen(v), 0);
	g_free(v);
	if (rc < 0) {
		int err = errno;

		t = read_state(mnt);
		fprintf(stderr, "rmemfs-ctl: replace %s by %s: %s\n", old, new,
			t && g_hash_table_lookup(t, "replace_error") ?
				(char *)g_hash_table_lookup(t, "replace_error") :
				g_strerror(err));
		if (t)
			g_hash_table_destroy(t);
		return EXIT_FAIL;
	}
	printf("%s takes the place of %s; rebuilding\n", new, old);
	while (wait && rebuilding(mnt) > 0)
		g_usleep(CTL_WAIT_POLL_MS * 1000);
	if (wait) {
		fprintf(stderr, "\n");
		return cmd_status(mnt, false);
	}
	return 0;
}

/*
 * Start the scrub; with wait, follow it to its end: exit 0 when it is done
 * and nothing stayed bad, EXIT_FAIL when a block stayed bad or it failed.
 */
static int cmd_scrub(const char *mnt, bool wait)
{
	GHashTable *t;
	char *state;
	bool ok;

	if (setxattr(mnt, VERIFY_SCRUB_XATTR, "start", 5, 0) < 0) {
		fprintf(stderr, "rmemfs-ctl: scrub: %s\n",
			errno == EBUSY ? "a scrub is running already" : g_strerror(errno));
		return EXIT_FAIL;
	}
	printf("scrub started\n");
	if (!wait)
		return 0;
	for (;;) {
		t = read_state(mnt);
		if (!t)
			return EXIT_FAIL;
		fprintf(stderr, "\rscrub: %s/%s blocks", lookup(t, "scrub_done", "0"),
			lookup(t, "scrub_total", "?"));
		if (strcmp(lookup(t, "scrub", "?"), "running"))
			break;
		g_hash_table_destroy(t);
		g_usleep(CTL_WAIT_POLL_MS * 1000);
	}
	fprintf(stderr, "\n");
	state = g_strdup(lookup(t, "scrub", "?"));
	ok = !strcmp(state, "done") && !strcmp(lookup(t, "scrub_errors", "0"), "0");
	printf("scrub %s: %s blocks, %s bad (not repaired), %s copies repaired, %s checksums "
	       "computed\n",
	       state, lookup(t, "scrub_done", "0"), lookup(t, "scrub_errors", "0"),
	       lookup(t, "scrub_repaired", "0"), lookup(t, "scrub_filled", "0"));
	g_free(state);
	g_hash_table_destroy(t);
	return ok ? 0 : EXIT_FAIL;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: rmemfs-ctl MOUNTPOINT status [--json]\n"
		   "       rmemfs-ctl MOUNTPOINT replace OLD NEW [--wait]\n"
		   "       rmemfs-ctl MOUNTPOINT scrub [--wait]\n"
		   "\n"
		   "status   the members (address, pool id, state: in_sync, lost, missing,\n"
		   "         rebuilding with progress), replicas (or ec K+M) and capacity\n"
		   "replace  put the blank memserver NEW (HOST:PORT, or HOST:PORT/NAME for its\n"
		   "         pool NAME, created the member's size if absent) in the place of\n"
		   "         the lost member OLD (its address, pool id, or memberN) and rebuild\n"
		   "         it in the background; --wait returns when the rebuild is done\n"
		   "scrub    read and check every data block against its checksum in the\n"
		   "         background, repairing bad copies on a member set; --wait follows\n"
		   "         it and exits 1 if a block stayed bad\n");
}

int main(int argc, char **argv)
{
	bool json = false, wait = false;
	char *args[4];
	int i, n = 0;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--json")) {
			json = true;
		} else if (!strcmp(argv[i], "--wait")) {
			wait = true;
		} else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			usage(stdout);
			return 0;
		} else if (n < 4) {
			args[n++] = argv[i];
		} else {
			n = 5;
		}
	}
	if (n == 2 && !strcmp(args[1], "status") && !wait)
		return cmd_status(args[0], json);
	if (n == 4 && !strcmp(args[1], "replace") && !json)
		return cmd_replace(args[0], args[2], args[3], wait);
	if (n == 2 && !strcmp(args[1], "scrub") && !json)
		return cmd_scrub(args[0], wait);
	usage(stderr);
	return EXIT_USAGE;
}
