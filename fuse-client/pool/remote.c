// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * remote.c - opening a plain pool or a member set and claiming it (remote.h):
 * connecting to the servers, reading their records and matching them to
 * places by pool id, the first records of a new set, the quorum rule, and
 * what applies to every member alike (the write deadline, the state text;
 * the cache arena: remote_arena.c). The members' states change in
 * remote_state.c; the data path is remote_io.c, replace remote_replace.c,
 * the keeper rebuild.c.
 */
#define G_LOG_DOMAIN "rmemfs-remote"

#include "remote_int.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>

#include <glib.h>

#include "ec_codec.h"
#include "net.h"
#include "refusal.h"

static_assert(REMOTE_MAX_SERVERS == LAYOUT_SET_MAX, "one limit on members");
static_assert(PLACE_MAX_MEMBERS == LAYOUT_SET_MAX, "one limit on members");

#define REMOTE_UNIT_SHIFT 18 /* 256 KiB units: see docs/ARCHITECTURE.md "Member sets" */
#define REMOTE_EC_UNIT_SHIFT 16 /* 64 KiB fragments: an erasure-coded set's units */

void remote_set_msg(char **err_msg, const char *fmt, ...)
{
	va_list ap;

	if (!err_msg || *err_msg)
		return;
	va_start(ap, fmt);
	*err_msg = g_strdup_vprintf(fmt, ap);
	va_end(ap);
}

static bool all_zero(const uint8_t *p, size_t len)
{
	size_t i;

	for (i = 0; i < len; i++)
		if (p[i])
			return false;
	return true;
}

int remote_read_records(struct member *m, struct remote_found *f)
{
	size_t len = LAYOUT_SET_REC_OFF + 2 * LAYOUT_SET_REC_SIZE;
	uint8_t *buf = g_malloc(len);
	struct layout_set_info info;
	uint32_t place, k;
	int rc, kind;

	memset(f, 0, sizeof(*f));
	f->kind = -ENODATA;
	rc = member_read(m, 0, buf, len);
	if (rc < 0)
		goto out;
	f->block0_zero = all_zero(buf, LAYOUT_SB_LEASE_OWNER) &&
			 all_zero(buf + LAYOUT_SB_LEASE_END, LAYOUT_SB_SIZE - LAYOUT_SB_LEASE_END);
	for (k = 0; k < 2; k++) {
		kind = layout_set_unpack(buf + LAYOUT_SET_REC_OFF + k * LAYOUT_SET_REC_SIZE, &info,
					 &place);
		if (kind == 0 && (f->kind != 0 || info.events > f->info.events)) {
			f->kind = 0;
			f->info = info;
			f->place = place;
		} else if (kind < 0 && f->kind != 0 && kind != -ENODATA) {
			f->kind = kind;
		}
	}
out:
	g_free(buf);
	return rc;
}

/* "host:port[/pool]" as a member record keeps it: false if it does not fit the record */
static bool member_name(char *dst, const struct remote_server *s)
{
	return net_format_server_pool(dst, LAYOUT_SET_ADDR_LEN, s->host, s->port, s->pool) <
	       LAYOUT_SET_ADDR_LEN;
}

/* connect to server i; a server that cannot be reached is left NULL (and said so) */
static int connect_server(struct remote *r, const struct remote_config *cfg, unsigned int i,
			  struct member **out, char **err_msg)
{
	struct member_config mc = cfg->member;
	char name[LAYOUT_SET_ADDR_LEN];
	int rc;

	member_name(name, &cfg->servers[i]);
	mc.params.host = cfg->servers[i].host;
	mc.params.port = cfg->servers[i].port;
	mc.params.pool = cfg->servers[i].pool;
	mc.params.client_id = r->client_id;
	mc.params.quiet = mc.params.quiet || i > 0; /* what "auto" picked: said once */
	rc = member_open(&mc, out);
	if (rc < 0) {
		char *why = refusal_text(&mc.params, rc, REMOTE_CREATE_HOW);

		/* a refusal is fatal, but a missing pool for a set that may do without it */
		if (why && (cfg->nservers == 1 || rc != -ENOENT || cfg->format)) {
			remote_set_msg(err_msg, "%s", why);
			g_free(why);
			return rc;
		}
		if (why) {
			g_message("member %s: %s", name, why);
			g_free(why);
			*out = NULL;
			return 0;
		}
	}
	if (rc < 0 && cfg->nservers == 1)
		return rc; /* the caller reports it, as it always did */
	if (rc < 0) {
		g_message("member %s: %s", name, g_strerror(-rc));
		if (rc == -EPERM || rc == -EPROTONOSUPPORT || rc == -EKEYREVOKED) {
			remote_set_msg(err_msg, "%s: %s", name, g_strerror(-rc));
			return rc;
		}
		*out = NULL;
	}
	return 0;
}

uint64_t remote_usable_units(uint64_t pool_size, unsigned int shift)
{
	return pool_size > LAYOUT_SET_DATA_OFF ? (pool_size - LAYOUT_SET_DATA_OFF) >> shift : 0;
}

static int ec_too_small(const struct remote *r, char **err_msg)
{
	remote_set_msg(err_msg, "the members' pools are too small for ec=%u+%u on %u members",
		       r->info.ec_k, r->info.ec_m, r->info.nmembers);
	return -ENOSPC;
}

/*
 * A new erasure-coded set's replicated zone (the record's rep_units): the
 * fewest whole placement cycles of ec_m + 1 copies that hold block 0 and
 * the journal (layout_zone_min). Whether a stripe fits beside it, open_set
 * finds out.
 */
static int ec_zone(struct remote *r, char **err_msg)
{
	struct layout_set_info *in = &r->info;
	uint64_t unit = 1ULL << in->unit_shift, raw, cycles;

	if (place_init(&r->place, in->nmembers, in->replicas, in->member_units) < 0)
		return ec_too_small(r, err_msg);
	raw = (uint64_t)in->nmembers * in->member_units * unit;
	cycles = layout_zone_min(raw, in->ec_k, in->ec_m);
	cycles = (cycles + r->place.ncomb * unit - 1) / (r->place.ncomb * unit);
	if (cycles * r->place.per_cycle >= in->member_units)
		return ec_too_small(r, err_msg);
	in->rep_units = cycles * r->place.ncomb;
	return 0;
}

/* a blank set: places in the order given, every server needed */
static int new_set(struct remote *r, const struct remote_config *cfg, struct member **mem,
		   const struct remote_found *f, char **err_msg)
{
	struct layout_set_info *in = &r->info;
	uint64_t units = UINT64_MAX;
	unsigned int i;

	in->nmembers = cfg->nservers;
	in->replicas = cfg->replicas ? cfg->replicas : (cfg->nservers >= 2 ? 2 : 1);
	in->unit_shift = REMOTE_UNIT_SHIFT;
	if (cfg->ec_k) {
		in->ec_k = cfg->ec_k;
		in->ec_m = cfg->ec_m;
		in->replicas = cfg->ec_m + 1; /* the replicated zone's copies */
		in->unit_shift = REMOTE_EC_UNIT_SHIFT;
	}
	if (getrandom(in->set_uuid, sizeof(in->set_uuid), 0) != sizeof(in->set_uuid))
		for (i = 0; i < sizeof(in->set_uuid); i++)
			in->set_uuid[i] = (uint8_t)g_random_int();
	for (i = 0; i < cfg->nservers; i++) {
		if (!member_name(r->mem[i].name, &cfg->servers[i])) {
			remote_set_msg(err_msg, "%s...: a member's address must fit %d characters "
				       "(the member record keeps it): use a shorter name or address",
				       r->mem[i].name, LAYOUT_SET_ADDR_LEN - 1);
			return -ENAMETOOLONG;
		}
		if (!mem[i]) {
			remote_set_msg(err_msg, "%s cannot be reached: a new member set needs every server",
				r->mem[i].name);
			return -EHOSTDOWN;
		}
		if (!f[i].block0_zero && !cfg->format) {
			remote_set_msg(err_msg, "%s holds data but no member record (a single-server "
				"filesystem?); -o format would destroy it", r->mem[i].name);
			return -EMEDIUMTYPE;
		}
		in->m[i].pool_id = member_pool_id(mem[i]);
		in->m[i].pool_size = member_size(mem[i]);
		g_strlcpy(in->m[i].addr, r->mem[i].name, LAYOUT_SET_ADDR_LEN);
		units = MIN(units, remote_usable_units(in->m[i].pool_size, in->unit_shift));
		r->mem[i].m = mem[i];
		mem[i] = NULL;
	}
	in->member_units = units;
	r->fresh = true;
	return in->ec_k ? ec_zone(r, err_msg) : 0;
}

/* which place of the record holds pool id; -1: none */
static int place_of(const struct layout_set_info *in, uint64_t pool_id)
{
	uint32_t i;

	for (i = 0; i < in->nmembers; i++)
		if (in->m[i].pool_id == pool_id)
			return (int)i;
	return -1;
}

/* the options' replicas= or ec= (if given) is what the set was formatted with */
static int scheme_check(const struct layout_set_info *in, const struct remote_config *cfg,
			char **err_msg)
{
	if (in->ec_k && cfg->replicas)
		remote_set_msg(err_msg, "the member set is erasure-coded (ec=%u+%u), not replicas=%u",
			       in->ec_k, in->ec_m, cfg->replicas);
	else if (in->ec_k && cfg->ec_k && (cfg->ec_k != in->ec_k || cfg->ec_m != in->ec_m))
		remote_set_msg(err_msg, "the member set is erasure-coded (ec=%u+%u), not ec=%u+%u",
			       in->ec_k, in->ec_m, cfg->ec_k, cfg->ec_m);
	else if (!in->ec_k && cfg->ec_k)
		remote_set_msg(err_msg, "the member set keeps %u copies of each unit, not ec=%u+%u",
			       in->replicas, cfg->ec_k, cfg->ec_m);
	else if (!in->ec_k && cfg->replicas && cfg->replicas != in->replicas)
		remote_set_msg(err_msg, "the member set keeps %u copies of each unit, not replicas=%u",
			       in->replicas, cfg->replicas);
	else
		return 0;
	return -EINVAL;
}

/* the servers hold a set: take the newest record and give each member its place */
static int join_set(struct remote *r, const struct remote_config *cfg, struct member **mem,
		    const struct remote_found *f, char **err_msg)
{
	const struct remote_found *best = NULL;
	char name[LAYOUT_SET_ADDR_LEN];
	unsigned int i;
	int p;

	for (i = 0; i < cfg->nservers; i++)
		if (mem[i] && f[i].kind == 0 && (!best || f[i].info.events > best->info.events))
			best = &f[i];
	r->info = best->info;
	for (i = 0; i < cfg->nservers; i++) {
		if (!mem[i])
			continue;
		member_name(name, &cfg->servers[i]);
		if (f[i].kind == -ENODATA) {
			remote_set_msg(err_msg, "%s is not a member of this filesystem (it holds no member "
				"record; rmemfs-ctl replace puts a blank server in a lost "
				"member's place)", name);
			return -EINVAL;
		}
		if (f[i].kind < 0) {
			remote_set_msg(err_msg, "%s: its member record is %s", name,
				f[i].kind == -EBADMSG ? "damaged" : "from a newer rmemfs");
			return f[i].kind;
		}
		p = place_of(&r->info, member_pool_id(mem[i]));
		if (memcmp(f[i].info.set_uuid, r->info.set_uuid, 16) || p < 0) {
			remote_set_msg(err_msg, "%s is not a member of this filesystem (%s)", name,
				memcmp(f[i].info.set_uuid, r->info.set_uuid, 16) ?
					"it belongs to another member set" :
					"its pool is no longer in the member set");
			return -EINVAL;
		}
		if (r->mem[p].m) {
			remote_set_msg(err_msg, "%s and %s are the same member", r->mem[p].name, name);
			return -EINVAL;
		}
		r->mem[p].m = mem[i];
		mem[i] = NULL;
		g_strlcpy(r->mem[p].name, name, sizeof(r->mem[p].name));
	}
	return scheme_check(&r->info, cfg, err_msg);
}

/* each place's runtime state from the record; names of members not listed */
static void init_states(struct remote *r, const struct remote_config *cfg)
{
	unsigned int i;

	r->n = r->info.nmembers;
	for (i = 0; i < r->n; i++) {
		struct remote_member *rm = &r->mem[i];
		bool in_sync = r->info.m[i].state == LAYOUT_MEMBER_IN_SYNC;

		if (!rm->m)
			g_strlcpy(rm->name, r->info.m[i].addr, sizeof(rm->name));
		atomic_store(&rm->up, rm->m && in_sync);
		atomic_store(&rm->recorded, !in_sync);
		if (rm->m && !in_sync)
			g_message("member %u (%s) is %s: not used until it is rebuilt", i, rm->name,
				  r->info.m[i].state == LAYOUT_MEMBER_LOST ? "lost (stale)" :
									    "being rebuilt");
		else if (!rm->m)
			g_message("member %u (pool %016" G_GINT64_MODIFIER "x, last at %s) is %s", i,
				  (guint64)r->info.m[i].pool_id, rm->name,
				  cfg->nservers < r->n ? "not listed" : "missing");
		if (rm->m)
			member_set_nowait(rm->m, remote_redundant(r));
		if (!atomic_load(&rm->up) && !atomic_load(&rm->recorded))
			atomic_fetch_add(&r->unrecorded, 1);
	}
}

/* does every unit keep a copy on a member that is up, every stripe ec_k fragments? */
static int check_copies(struct remote *r, char **err_msg)
{
	char *why = NULL;
	int rc;

	pthread_mutex_lock(&r->set_lock);
	rc = remote_loss_check(r, &why);
	pthread_mutex_unlock(&r->set_lock);
	if (rc < 0)
		remote_set_msg(err_msg, "too many members are missing or stale: %s", why);
	g_free(why);
	return rc;
}

/* a replicated set: every unit's copies (place.h) */
static int place_copies(struct remote *r, char **err_msg)
{
	int rc = place_init(&r->place, r->info.nmembers, r->info.replicas, r->info.member_units);

	if (rc < 0) {
		remote_set_msg(err_msg, rc == -EINVAL ? "replicas=%u needs at least as many servers (%u "
			"given), at most %u servers and 3 copies" : "the members' pools are too "
			"small for one placement cycle (replicas=%u, %u members, at most %u)",
			r->info.replicas, r->info.nmembers, PLACE_MAX_MEMBERS);
		return rc;
	}
	r->unit = 1ULL << r->info.unit_shift;
	r->size = place_units(&r->place) * r->unit;
	r->zone_end = r->size;
	return 0;
}

/*
 * An erasure-coded set (remote_int.h): the replicated zone takes the
 * members' first slots, rep_units units in whole cycles of ec_m + 1
 * copies; the stripes take the rest.
 */
static int place_coded(struct remote *r, char **err_msg)
{
	const struct layout_set_info *in = &r->info;
	uint64_t rep_slots = 0;
	int rc;

	rc = place_init(&r->place, in->nmembers, in->replicas, in->member_units);
	if (!rc) {
		rep_slots = in->rep_units / r->place.ncomb * r->place.per_cycle;
		rc = place_init(&r->place, in->nmembers, in->replicas, rep_slots);
	}
	if (rc < 0 || place_units(&r->place) != in->rep_units || rep_slots >= in->member_units) {
		remote_set_msg(err_msg, "the member record is damaged: a replicated zone of %"
			       G_GUINT64_FORMAT " units does not fit ec=%u+%u on %u members",
			       (guint64)in->rep_units, in->ec_k, in->ec_m, in->nmembers);
		return -EBADMSG;
	}
	r->stripes = g_new0(struct place_stripes, 1);
	if (place_stripes_init(r->stripes, in->nmembers, in->ec_k + in->ec_m,
			       in->member_units - rep_slots) < 0)
		return ec_too_small(r, err_msg);
	r->ec_k = in->ec_k;
	r->ec_m = in->ec_m;
	r->ec_slot0 = rep_slots;
	r->unit = 1ULL << in->unit_shift;
	r->zone_end = in->rep_units * r->unit;
	r->size = r->zone_end + r->stripes->stripes * r->ec_k * r->unit;
	rc = ec_init(r);
	if (rc < 0)
		remote_set_msg(err_msg, "setting up the erasure code (ec=%u+%u): %s", r->ec_k,
			       r->ec_m, g_strerror(-rc));
	return rc;
}

static int open_set(struct remote *r, const struct remote_config *cfg, struct member **mem,
		    char **err_msg)
{
	struct remote_found *f = g_new0(struct remote_found, cfg->nservers);
	bool any_member = false;
	unsigned int i;
	int rc = 0;

	for (i = 0; i < cfg->nservers; i++) {
		if (mem[i] && remote_read_records(mem[i], &f[i]) < 0) {
			g_message("reading the member record of %s: unreachable", member_server(mem[i]));
			member_close(mem[i]);
			mem[i] = NULL;
		}
		any_member = any_member || (mem[i] && f[i].kind == 0);
	}
	/*
	 * A record from a newer rmemfs on every member reached: never treat
	 * the set as a blank pool (-o format would destroy it).
	 */
	for (i = 0; !any_member && i < cfg->nservers; i++) {
		if (mem[i] && f[i].kind == -EPROTONOSUPPORT) {
			remote_set_msg(err_msg, "%s: its member record is from a newer rmemfs",
				       member_server(mem[i]));
			rc = -EPROTONOSUPPORT;
			goto out;
		}
	}
	if (!any_member && cfg->nservers == 1 && mem[0]) {
		r->n = 1;
		r->mem[0].m = mem[0];
		mem[0] = NULL;
		atomic_store(&r->mem[0].up, true);
		g_strlcpy(r->mem[0].name, member_server(r->mem[0].m), sizeof(r->mem[0].name));
		r->size = member_size(r->mem[0].m);
		goto out;
	}
	r->set = true;
	rc = any_member ? join_set(r, cfg, mem, f, err_msg) : new_set(r, cfg, mem, f, err_msg);
	if (rc < 0)
		goto out;
	rc = r->info.ec_k ? place_coded(r, err_msg) : place_copies(r, err_msg);
	if (rc < 0)
		goto out;
	init_states(r, cfg);
	intent_init(r);
	rc = lanes_new(r->n, &r->lanes);
	if (rc < 0)
		goto out;
	rc = check_copies(r, err_msg);
	if (!rc && !cfg->read_only)
		rc = remote_quorum(r, 0, err_msg);
out:
	g_free(f);
	return rc;
}

/*
 * rb_lock prefers its writer (the rebuild's unit copy, the intent sweep):
 * glibc's default lets a steady stream of writes, each holding it for
 * reading, keep a rebuild out for good. Nothing takes it twice for reading.
 */
static void rb_lock_init(pthread_rwlock_t *lock)
{
	pthread_rwlockattr_t a;

	pthread_rwlockattr_init(&a);
	pthread_rwlockattr_setkind_np(&a, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	pthread_rwlock_init(lock, &a);
	pthread_rwlockattr_destroy(&a);
}

/*
 * Recursive: work done under set_lock (the claim's intent recovery, a
 * rebuild step) may find a member gone or the pool failed, and recording
 * that takes set_lock again.
 */
static void set_lock_init(pthread_mutex_t *lock)
{
	pthread_mutexattr_t a;

	pthread_mutexattr_init(&a);
	pthread_mutexattr_settype(&a, PTHREAD_MUTEX_RECURSIVE);
	pthread_mutex_init(lock, &a);
	pthread_mutexattr_destroy(&a);
}

/* the limits of a configuration, before any server is reached */
static int config_check(const struct remote_config *cfg, char **err_msg)
{
	if (!cfg->nservers || cfg->nservers > LAYOUT_SET_MAX ||
	    cfg->replicas > REMOTE_MAX_REPLICAS) {
		remote_set_msg(err_msg, "%u servers, replicas=%u: rmemfs takes 1 to %u servers and 1 to 3 "
			"copies", cfg->nservers, cfg->replicas, LAYOUT_SET_MAX);
		return -EINVAL;
	}
	if (!cfg->ec_k)
		return 0;
	if (cfg->replicas)
		remote_set_msg(err_msg, "ec= and replicas= exclude each other");
	else if (cfg->ec_k < EC_MIN_K || cfg->ec_k > EC_MAX_K || cfg->ec_m < EC_MIN_M ||
		 cfg->ec_m > EC_MAX_M)
		remote_set_msg(err_msg, "ec=%u+%u: rmemfs takes %u to %u data and %u to %u parity "
			       "fragments", cfg->ec_k, cfg->ec_m, EC_MIN_K, EC_MAX_K, EC_MIN_M,
			       EC_MAX_M);
	else if (cfg->ec_k + cfg->ec_m > cfg->nservers)
		remote_set_msg(err_msg, "ec=%u+%u needs a member set of at least %u servers",
			       cfg->ec_k, cfg->ec_m, cfg->ec_k + cfg->ec_m);
	else
		return 0;
	return -EINVAL;
}

int remote_open(const struct remote_config *cfg, struct remote **out, char **err_msg)
{
	struct member *mem[LAYOUT_SET_MAX] = { 0 };
	struct remote *r;
	unsigned int i, reached = 0;
	int rc = 0;

	*out = NULL;
	if (err_msg)
		*err_msg = NULL;
	rc = config_check(cfg, err_msg);
	if (rc < 0)
		return rc;
	r = g_new0(struct remote, 1);
	set_lock_init(&r->set_lock);
	rb_lock_init(&r->rb_lock);
	atomic_store(&r->rb_member, -1);
	r->mcfg = cfg->member;
	r->transport = g_strdup(cfg->member.transport ? cfg->member.transport : "auto");
	r->mcfg.transport = r->transport;
	r->mcfg.params.host = NULL;
	r->degraded = cfg->degraded;
	r->reconnect_ms = cfg->member.reconnect_timeout_ms;
	r->client_id = cfg->member.params.client_id ? cfg->member.params.client_id :
						      proto_client_id_new();
	r->name = g_strdup(cfg->servers[0].host);
	for (i = 0; i < cfg->nservers; i++) {
		char nm[LAYOUT_SET_ADDR_LEN];

		member_name(nm, &cfg->servers[i]);
		if (i == 0) {
			g_free(r->name);
			r->name = g_strdup(nm);
		} else {
			char *t = g_strdup_printf("%s,%s", r->name, nm);

			g_free(r->name);
			r->name = t;
		}
		rc = connect_server(r, cfg, i, &mem[i], err_msg);
		if (rc < 0)
			goto err;
		reached += mem[i] != NULL;
	}
	if (!reached) {
		remote_set_msg(err_msg, "none of the servers can be reached");
		rc = -EHOSTDOWN;
		goto err;
	}
	rc = open_set(r, cfg, mem, err_msg);
	if (rc < 0)
		goto err;
	*out = r;
	return 0;

err:
	for (i = 0; i < cfg->nservers; i++)
		member_close(mem[i]);
	remote_close(r);
	return rc;
}

void remote_close(struct remote *r)
{
	unsigned int i;

	if (!r)
		return;
	rebuild_stop(r);
	lanes_free(r->lanes);
	if (r->intent_map)
		intent_free(r);
	ec_free(r);
	g_free(r->stripes);
	for (i = 0; i < LAYOUT_SET_MAX; i++) {
		member_close(r->mem[i].m);
		g_free(atomic_load(&r->dirty[i]));
	}
	pthread_rwlock_destroy(&r->rb_lock);
	pthread_mutex_destroy(&r->set_lock);
	g_free(r->arena_on);
	g_free(r->transport);
	g_free(r->failure);
	g_free(r->replace_error);
	g_free(r->name);
	g_free(r);
}

uint64_t remote_size(const struct remote *r)
{
	return r->size;
}

bool remote_zone(const struct remote *r, uint64_t *zone_end, uint64_t *stripe_bytes)
{
	if (!r->set || !r->ec_k)
		return false;
	*zone_end = r->zone_end;
	*stripe_bytes = (uint64_t)r->ec_k * r->unit;
	return true;
}

uint64_t remote_client_id(const struct remote *r)
{
	return r->client_id;
}

const char *remote_transport(const struct remote *r)
{
	unsigned int i;

	for (i = 0; i < r->n; i++)
		if (r->mem[i].m)
			return member_transport(r->mem[i].m);
	return "none";
}

const char *remote_name(const struct remote *r)
{
	return r->name;
}

bool remote_is_set(const struct remote *r)
{
	return r->set;
}

int remote_parse_servers(const char *list, struct remote_server *out, unsigned int max,
			 unsigned int *n, char **why)
{
	char **parts = g_strsplit(list, ",", -1);
	const char *what;
	unsigned int i;
	int rc = 0;

	*n = 0;
	if (why)
		*why = NULL;
	for (i = 0; parts[i] && !rc; i++) {
		if (i >= max) {
			rc = -EINVAL;
			break;
		}
		rc = net_parse_server_pool(parts[i], &out[i].host, &out[i].port, &out[i].pool,
					   &what);
		if (!rc)
			(*n)++;
		else if (why)
			*why = g_strdup_printf("'%s' is %s", parts[i], what);
	}
	g_strfreev(parts);
	if (!rc && !*n)
		rc = -EINVAL;
	if (rc < 0) {
		remote_servers_free(out, *n);
		*n = 0;
	}
	return rc;
}

void remote_servers_free(struct remote_server *s, unsigned int n)
{
	unsigned int i;

	for (i = 0; i < n; i++) {
		g_free(s[i].host);
		g_free(s[i].pool);
		s[i].host = NULL;
		s[i].pool = NULL;
	}
}

/* ---- the records ---- */

/*
 * A member that is reached but not in sync holds nothing to trust: a stale
 * one that came back, or a rebuild cut short. Rebuild it (set_lock held,
 * the records ours), going on from where a rebuild of the same pool stopped.
 */
static void rebuild_stale(struct remote *r)
{
	unsigned int i;
	uint64_t from;

	for (i = 0; i < r->n; i++) {
		if (!r->mem[i].m || atomic_load(&r->mem[i].up))
			continue;
		from = r->info.m[i].state == LAYOUT_MEMBER_REBUILDING ? r->info.m[i].rebuilt : 0;
		r->info.m[i].state = LAYOUT_MEMBER_REBUILDING;
		r->info.m[i].rebuilt = from;
		if (rebuild_start(r, i, from, false) == 0)
			return; /* one at a time; the others at a later mount */
	}
}

int remote_claim(struct remote *r)
{
	uint8_t *zero;
	unsigned int i;
	int rc = 0;

	if (!r->set)
		return 0;
	pthread_mutex_lock(&r->set_lock);
	if (r->fresh) {
		/* a new set: whatever block 0 held before is no superblock of it */
		zero = g_malloc0(LAYOUT_SB_SIZE);
		for (i = 0; i < r->n && !rc; i++) {
			rc = member_write(r->mem[i].m, 0, zero, LAYOUT_SB_LEASE_OWNER);
			if (!rc)
				rc = member_write(r->mem[i].m, LAYOUT_SB_LEASE_END, zero,
						  LAYOUT_SB_SIZE - LAYOUT_SB_LEASE_END);
		}
		g_free(zero);
	}
	if (!rc)
		rc = remote_write_records(r);
	if (!rc) {
		r->claimed = true;
		r->fresh = false;
		rc = intent_load(r);
	}
	pthread_mutex_unlock(&r->set_lock);
	if (rc < 0)
		g_message("writing the membership records: %s", g_strerror(-rc));
	return rc;
}

int remote_recover(struct remote *r, const struct remote_judge *j)
{
	int rc;

	if (!r->set || !r->claimed)
		return 0;
	/* the keeper's sweeps, resyncs and rebuilds wait: the copies agree first */
	pthread_rwlock_wrlock(&r->rb_lock);
	r->judge = *j;
	rc = intent_recover(r, j);
	pthread_rwlock_unlock(&r->rb_lock);
	/* the keeper (sweeps, returns, rebuilds) starts only now: no copy is taken before */
	pthread_mutex_lock(&r->set_lock);
	if (!rc)
		rc = rebuild_keeper_start(r);
	if (!rc) {
		rebuild_stale(r);
		if (atomic_load(&r->rb_member) >= 0)
			rc = remote_write_records(r);
	}
	pthread_mutex_unlock(&r->set_lock);
	if (rc < 0)
		g_message("recovering the member set after the last client: %s", g_strerror(-rc));
	return rc;
}

int remote_quorum(struct remote *r, unsigned int held, char **why)
{
	unsigned int up;

	if (!r->set)
		return 0;
	up = held ? held : remote_quorum_up(r);
	if (2 * up > r->n)
		return 0;
	if (r->degraded) {
		g_message("-o degraded: mounting read-write with %u of %u members (no majority)",
			  up, r->n);
		return 0;
	}
	remote_set_msg(why, "only %u of %u members are up: a read-write mount needs a majority (%u), so "
		"that two clients cut off from each other cannot both write; -o degraded mounts "
		"anyway, at that risk", up, r->n, r->n / 2 + 1);
	return -EHOSTDOWN;
}

/* ---- every member alike ---- */

void remote_set_write_deadline(struct remote *r, uint64_t deadline_ns)
{
	unsigned int i;

	for (i = 0; i < r->n; i++)
		if (r->mem[i].m)
			member_set_write_deadline(r->mem[i].m, deadline_ns);
}

static const char *state_name(const struct remote *r, unsigned int i)
{
	if (atomic_load(&((struct remote *)r)->mem[i].up))
		return "in_sync";
	if (atomic_load(&((struct remote *)r)->rb_member) == (int)i)
		return "rebuilding";
	return r->mem[i].m ? "lost" : "missing";
}

ssize_t remote_state_text(struct remote *r, char *buf, size_t cap)
{
	GString *s;
	unsigned int i, up = 0;
	ssize_t n;

	if (!r->set)
		return member_state_text(r->mem[0].m, buf, cap);
	s = g_string_new(NULL);
	pthread_mutex_lock(&r->set_lock);
	up = remote_quorum_up(r);
	g_string_append_printf(s, "state %s\nmembers %u\nmembers_up %u\nreplicas %u\nevents %"
			       G_GUINT64_FORMAT "\n",
			       r->failure ? "failed" : up < r->n ? "degraded" : "up", r->n, up,
			       r->info.replicas, (guint64)r->info.events);
	if (r->ec_k) { /* replicas: the copies of the journal's zone */
		g_string_append_printf(s, "ec %u+%u\n", r->ec_k, r->ec_m);
		g_string_append_printf(s, "ec_decoded_reads %lu\n", atomic_load(&r->ec_decoded));
	}
	for (i = 0; i < r->n; i++) {
		g_string_append_printf(s, "member%u %s %s %016" G_GINT64_MODIFIER "x", i,
				       r->mem[i].name, state_name(r, i),
				       (guint64)r->info.m[i].pool_id);
		if (atomic_load(&r->rb_member) == (int)i)
			g_string_append_printf(s, " %u/%u", r->rb_done_units, r->rb_total_units);
		g_string_append_c(s, '\n');
	}
	if (r->failure)
		g_string_append_printf(s, "failure %s\n", r->failure);
	if (r->replace_error)
		g_string_append_printf(s, "replace_error %s\n", r->replace_error);
	pthread_mutex_unlock(&r->set_lock);
	n = s->len < cap ? (ssize_t)s->len : -ERANGE;
	if (n >= 0)
		memcpy(buf, s->str, s->len);
	g_string_free(s, TRUE);
	return n;
}

void remote_judge_drop(struct remote *r)
{
	if (!r || !r->set)
		return;
	pthread_rwlock_wrlock(&r->rb_lock);
	memset(&r->judge, 0, sizeof(r->judge));
	pthread_rwlock_unlock(&r->rb_lock);
}

void remote_quiesce(struct remote *r)
{
	rebuild_stop(r);
	/* every write has ended: no region may differ between copies now */
	if (r->claimed && !atomic_load(&r->failed) && intent_sweep(r, true) < 0)
		g_message("clearing the write-intent map failed: the next mount compares copies");
}
