/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * registry.c - the memserver's pools: capacity, names, owners, references
 * (registry.h says the rules; this file keeps them).
 */
#define G_LOG_DOMAIN "rmemfs-memserver"

#include "registry.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pool.h"
#include "units.h"
#include "why.h"

#define REGISTRY_UNIT (1ULL << 20) /* named pool sizes are whole MiBs */
#define REGISTRY_SUFFIX ".pool"

void registry_init(struct registry *reg, uint64_t capacity, uint64_t chunk_size,
		   bool hugepages, const char *backing_dir, const struct tenant_set *tenants)
{
	memset(reg, 0, sizeof(*reg));
	reg->capacity = capacity;
	reg->chunk_size = chunk_size;
	reg->hugepages = hugepages;
	reg->backing_dir = backing_dir;
	reg->tenants = tenants;
	pthread_mutex_init(&reg->lock, NULL);
	pthread_cond_init(&reg->created, NULL);
	pthread_rwlock_init(&reg->hook_lock, NULL);
}

/* an entry without memory yet (creating) or around a pool; NULL on ENOMEM */
static struct registry_pool *registry_pool_new(const char *name, const char *owner,
					       uint64_t size)
{
	struct registry_pool *p = g_try_new0(struct registry_pool, 1);

	if (!p)
		return NULL;
	g_strlcpy(p->name, name, sizeof(p->name));
	g_strlcpy(p->owner, owner, sizeof(p->owner));
	p->size = size;
	p->refs = 1; /* the registry's */
	return p;
}

/* the pool's TCP descriptor, packed once; 0 or -ENOMEM */
static int registry_pool_describe(struct registry_pool *p)
{
	struct proto_pool desc;
	ssize_t packed;
	int rc;

	rc = pool_describe(p->pool, &desc);
	if (rc)
		return rc;
	p->tcp_wire_len = proto_pool_wire_size(&desc);
	p->tcp_wire = g_try_malloc(p->tcp_wire_len);
	packed = p->tcp_wire ? proto_pool_pack(&desc, p->tcp_wire, p->tcp_wire_len) : -ENOMEM;
	proto_pool_clear(&desc);
	return packed < 0 ? (int)packed : 0;
}

static void registry_pool_free(struct registry_pool *p)
{
	if (!p)
		return;
	pool_close(p->pool);
	g_free(p->tcp_wire);
	g_free(p->path);
	free(p->fenced);
	g_free(p);
}

/* lock held */
static void registry_unlink(struct registry *reg, struct registry_pool *p)
{
	struct registry_pool **pp;

	for (pp = &reg->pools; *pp; pp = &(*pp)->next) {
		if (*pp == p) {
			*pp = p->next;
			return;
		}
	}
}

void registry_destroy(struct registry *reg)
{
	struct registry_pool *p;

	if (!reg)
		return;
	while ((p = reg->pools)) {
		reg->pools = p->next;
		if (p->refs > 1)
			g_message("pool '%s' still has %u reference(s) at stop", p->name,
				  p->refs - 1);
		registry_pool_free(p);
	}
	reg->deflt = NULL;
	pthread_rwlock_destroy(&reg->hook_lock);
	pthread_cond_destroy(&reg->created);
	pthread_mutex_destroy(&reg->lock);
}

/* a listed pool of that name (waiting out its creation), or NULL; lock held */
static struct registry_pool *registry_find(struct registry *reg, const char *name)
{
	struct registry_pool *p;

again:
	for (p = reg->pools; p; p = p->next) {
		if (p->deleting || strcmp(p->name, name))
			continue;
		if (p->creating) {
			pthread_cond_wait(&reg->created, &reg->lock);
			goto again;
		}
		return p;
	}
	return NULL;
}

int registry_add(struct registry *reg, struct pool *pool, bool is_default, const char *path)
{
	const char *name = is_default ? "" : pool_name(pool);
	struct registry_pool *p;
	int rc = 0;

	p = registry_pool_new(name, is_default ? "" : pool_owner(pool), pool_size(pool));
	if (!p) {
		pool_close(pool);
		return -ENOMEM;
	}
	p->pool = pool;
	p->pool_id = pool_id(pool);
	p->path = path ? g_strdup(path) : NULL;
	rc = registry_pool_describe(p);
	if (rc)
		goto err_free;
	pthread_mutex_lock(&reg->lock);
	if (p->size > reg->capacity - reg->used)
		rc = -ENOSPC;
	else if (reg->npools >= PROTO_MAX_POOLS)
		rc = -E2BIG;
	else if ((is_default && reg->deflt) || (!is_default && registry_find(reg, name)))
		rc = -EEXIST;
	if (!rc) {
		reg->used += p->size;
		reg->npools++;
		p->next = reg->pools;
		reg->pools = p;
		if (is_default)
			reg->deflt = p;
	}
	pthread_mutex_unlock(&reg->lock);
	if (!rc)
		return 0;
err_free:
	registry_pool_free(p);
	return rc;
}

/* one DIR/NAME.pool at start: 0, or -errno after filling @why */
static int registry_adopt_file(struct registry *reg, const char *file, char *why,
			       size_t why_len)
{
	size_t n = strlen(file) - strlen(REGISTRY_SUFFIX);
	char stem[PROTO_POOL_NAME_MAX] = "", a[32], b[32];
	struct pool_params pp = { .chunk_size = reg->chunk_size, .adopt = true };
	struct pool *pool;
	char *path;
	int rc;

	if (n < sizeof(stem))
		memcpy(stem, file, n);
	if (n >= sizeof(stem) || !proto_pool_name_valid(stem)) {
		why_set(why, why_len, "--backing-dir %s: %s is not named after a pool "
			     "(NAME.pool, NAME 1-31 of A-Z a-z 0-9 _ . -)", reg->backing_dir, file);
		return -EINVAL;
	}
	path = g_build_filename(reg->backing_dir, file, NULL);
	pp.backing_file = path;
	rc = pool_open(&pp, &pool, why, why_len);
	if (rc)
		goto out;
	if (strcmp(pool_name(pool), stem)) {
		why_set(why, why_len, "%s records the pool name '%s', not '%s'; rename it "
			     "to match or move it out of --backing-dir", path, pool_name(pool), stem);
		pool_close(pool);
		rc = -EINVAL;
		goto out;
	}
	if (pool_owner(pool)[0] && !tenant_known(reg->tenants, pool_owner(pool)))
		g_message("pool '%s' (%s) belongs to '%s', no longer a tenant in --token-dir: "
			  "only the admin reaches it", stem, path, pool_owner(pool));
	units_format_size(pool_size(pool), a, sizeof(a));
	rc = registry_add(reg, pool, false, path);
	if (rc == -ENOSPC || rc == -E2BIG) {
		units_format_size(reg->capacity - reg->used, b, sizeof(b));
		why_set(why, why_len,
			     "%s holds a %s pool but only %s of --capacity is left for it; raise "
			     "--capacity or move the file out of --backing-dir", path, a, b);
	} else if (rc) {
		why_set(why, why_len, "cannot serve %s: %s", path, g_strerror(-rc));
	} else {
		g_message("serving pool '%s' of %s from %s", stem, a, path);
	}
out:
	g_free(path);
	return rc;
}

static int registry_name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int registry_adopt_dir(struct registry *reg, char *why, size_t why_len)
{
	GPtrArray *files = g_ptr_array_new_with_free_func(g_free);
	struct dirent *e;
	unsigned int i;
	DIR *d;
	int rc = 0;

	d = opendir(reg->backing_dir);
	if (!d) {
		rc = -errno;
		why_set(why, why_len, "cannot read --backing-dir %s: %s", reg->backing_dir,
			     g_strerror(-rc));
		goto out;
	}
	while ((e = readdir(d))) {
		if (g_str_has_suffix(e->d_name, REGISTRY_SUFFIX))
			g_ptr_array_add(files, g_strdup(e->d_name));
	}
	closedir(d);
	/* sorted, so a capacity refusal names the same file every time */
	g_ptr_array_sort(files, registry_name_cmp);
	for (i = 0; !rc && i < files->len; i++)
		rc = registry_adopt_file(reg, g_ptr_array_index(files, i), why, why_len);
out:
	g_ptr_array_unref(files);
	return rc;
}

/* the size a creation maps: whole MiBs (huge pages with --hugepages); 0 if it overflows */
static uint64_t registry_round(const struct registry *reg, uint64_t size)
{
	uint64_t unit = REGISTRY_UNIT;

	if (reg->hugepages)
		unit = MAX(unit, pool_page_size(true));
	if (size > UINT64_MAX - (unit - 1))
		return 0;
	return (size + unit - 1) / unit * unit;
}

/* the chunk size for a pool of @size: the configured one, grown to fit the descriptor */
static uint64_t registry_chunk(const struct registry *reg, uint64_t size)
{
	uint64_t chunk = reg->chunk_size;

	while ((size - 1) / chunk + 1 > PROTO_MAX_REGIONS)
		chunk <<= 1;
	return chunk;
}

static uint32_t registry_status(int rc)
{
	if (rc == -ENOSPC)
		return PROTO_E_NOSPACE;
	if (rc == -ENOMEM)
		return PROTO_E_NOMEM;
	if (rc == -EEXIST)
		return PROTO_E_EXIST;
	return PROTO_E_INTERNAL;
}

/*
 * Make a new pool's empty file (pool_open fills it). A file already there is
 * not served (it came after the start): taking it over would hand its bytes,
 * maybe another tenant's, to the creator. 0 or -errno (-EEXIST).
 */
static int registry_file_make(const char *path, const char *name)
{
	int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	int rc = -errno;

	if (fd >= 0) {
		close(fd);
		return 0;
	}
	if (rc == -EEXIST)
		g_message("cannot create pool '%s': %s exists but is not served (a restart "
			  "adopts it; or remove it)", name, path);
	else
		g_message("cannot create pool '%s': %s: %s", name, path, g_strerror(-rc));
	return rc;
}

/*
 * Map a reserved entry (no lock held; the creating entry keeps its name, so
 * its file is this creation's alone). 0 or -errno, its file removed.
 */
static int registry_map(struct registry *reg, struct registry_pool *p)
{
	struct pool_params pp = {
		.size = p->size,
		.chunk_size = registry_chunk(reg, p->size),
		.hugepages = reg->hugepages && !reg->backing_dir,
		.name = p->name,
		.owner = p->owner,
	};
	char why[512];
	int rc;

	if (reg->backing_dir) {
		p->path = g_strdup_printf("%s/%s%s", reg->backing_dir, p->name, REGISTRY_SUFFIX);
		rc = registry_file_make(p->path, p->name);
		if (rc) {
			g_free(p->path);
			p->path = NULL;
			return rc;
		}
		pp.backing_file = p->path;
	}
	rc = pool_open(&pp, &p->pool, why, sizeof(why));
	if (rc) {
		g_message("cannot create pool '%s': %s", p->name, why[0] ? why : g_strerror(-rc));
		goto err_unlink;
	}
	p->pool_id = pool_id(p->pool);
	rc = registry_pool_describe(p);
	if (rc)
		goto err_unlink;
	return 0;

err_unlink:
	/* a failed creation leaves no file: the next start would refuse an empty one */
	if (p->path && unlink(p->path) < 0)
		g_message("removing %s: %s", p->path, g_strerror(errno));
	return rc;
}

/*
 * Create pool @name of @size for @who; lock held on entry and on return
 * (dropped while mapping). PROTO_OK and *out (the registry's entry, no
 * reference taken), or the refusal.
 */
static uint32_t registry_create_locked(struct registry *reg, const struct tenant_who *who,
				       const char *name, uint64_t size,
				       struct registry_pool **out)
{
	struct registry_pool *p;
	uint64_t rounded;
	int rc;

	if (size < REGISTRY_UNIT)
		return PROTO_E_MALFORMED;
	rounded = registry_round(reg, size);
	if (!rounded || rounded > reg->capacity - reg->used || reg->npools >= PROTO_MAX_POOLS)
		return PROTO_E_NOSPACE;
	p = registry_pool_new(name, who->name, rounded);
	if (!p)
		return PROTO_E_NOMEM;
	p->creating = true;
	reg->used += rounded;
	reg->npools++;
	p->next = reg->pools;
	reg->pools = p;
	pthread_mutex_unlock(&reg->lock);

	rc = registry_map(reg, p);

	pthread_mutex_lock(&reg->lock);
	p->creating = false;
	pthread_cond_broadcast(&reg->created);
	if (rc) {
		registry_unlink(reg, p);
		pthread_mutex_unlock(&reg->lock);
		registry_pool_free(p);
		pthread_mutex_lock(&reg->lock);
		reg->used -= rounded;
		reg->npools--;
		return registry_status(rc);
	}
	g_message("pool '%s' of %" PRIu64 " MiB created for %s%s", name, rounded >> 20,
		  who->admin ? "the admin" : "tenant ", who->name);
	*out = p;
	return PROTO_OK;
}

/* bind a connection (lock held) */
static void registry_bind(struct registry_pool *p, uint64_t client_id)
{
	p->refs++;
	p->conns++;
	if (client_id) {
		p->nlease++;
		p->client_id = client_id;
	}
}

uint32_t registry_open(struct registry *reg, const struct tenant_who *who, const char *name,
		       uint64_t create_size, uint64_t client_id, struct registry_pool **out)
{
	struct registry_pool *p;
	uint32_t st = PROTO_OK;

	*out = NULL;
	pthread_mutex_lock(&reg->lock);
	if (!name[0]) {
		p = reg->deflt;
		if (!p)
			st = PROTO_E_NOPOOL;
		else if (!who->admin)
			st = PROTO_E_DENIED;
	} else {
		p = registry_find(reg, name);
		if (p && !tenant_may_reach(who, p->owner))
			st = create_size ? PROTO_E_EXIST : PROTO_E_DENIED;
		else if (!p && !create_size)
			st = PROTO_E_NOPOOL;
		else if (!p)
			st = registry_create_locked(reg, who, name, create_size, &p);
	}
	if (st == PROTO_OK) {
		registry_bind(p, client_id);
		*out = p;
	}
	pthread_mutex_unlock(&reg->lock);
	return st;
}

uint32_t registry_open_id(struct registry *reg, const struct tenant_who *who, uint64_t pool_id,
			  uint64_t client_id, struct registry_pool **out)
{
	struct registry_pool *p;
	uint32_t st = PROTO_OK;

	if (!pool_id)
		return registry_open(reg, who, "", 0, client_id, out);
	*out = NULL;
	pthread_mutex_lock(&reg->lock);
	for (p = reg->pools; p; p = p->next) {
		if (!p->deleting && !p->creating && p->pool_id == pool_id)
			break;
	}
	if (!p)
		st = PROTO_E_NOPOOL;
	else if (!tenant_may_reach(who, p->owner))
		st = PROTO_E_DENIED;
	if (st == PROTO_OK) {
		registry_bind(p, client_id);
		*out = p;
	}
	pthread_mutex_unlock(&reg->lock);
	return st;
}

void registry_hold(struct registry *reg, struct registry_pool *p)
{
	pthread_mutex_lock(&reg->lock);
	p->refs++;
	pthread_mutex_unlock(&reg->lock);
}

void registry_put(struct registry *reg, struct registry_pool *p)
{
	uint64_t size;
	bool last;

	if (!p)
		return;
	pthread_mutex_lock(&reg->lock);
	last = --p->refs == 0;
	if (last)
		registry_unlink(reg, p);
	pthread_mutex_unlock(&reg->lock);
	if (!last)
		return;
	/* nobody can reach p any more: release, unmap, and only then give the capacity back */
	pthread_rwlock_rdlock(&reg->hook_lock);
	if (reg->release)
		reg->release(reg->release_ctx, p);
	pthread_rwlock_unlock(&reg->hook_lock);
	size = p->size;
	g_message("pool '%s' gone: %" PRIu64 " MiB back to the free capacity", p->name,
		  size >> 20);
	registry_pool_free(p);
	pthread_mutex_lock(&reg->lock);
	reg->used -= size;
	reg->npools--;
	pthread_mutex_unlock(&reg->lock);
}

void registry_close(struct registry *reg, struct registry_pool *p, uint64_t client_id)
{
	if (!p)
		return;
	pthread_mutex_lock(&reg->lock);
	p->conns--;
	if (client_id && --p->nlease == 0)
		p->client_id = 0;
	pthread_mutex_unlock(&reg->lock);
	registry_put(reg, p);
}

uint32_t registry_create(struct registry *reg, const struct tenant_who *who, const char *name,
			 uint64_t size)
{
	struct registry_pool *p;
	uint32_t st;

	pthread_mutex_lock(&reg->lock);
	if (registry_find(reg, name))
		st = PROTO_E_EXIST;
	else
		st = registry_create_locked(reg, who, name, size, &p);
	pthread_mutex_unlock(&reg->lock);
	return st;
}

uint32_t registry_delete(struct registry *reg, const struct tenant_who *who, const char *name,
			 bool force, struct registry_pool **victim)
{
	struct registry_pool *p;
	uint32_t st = PROTO_OK;

	*victim = NULL;
	pthread_mutex_lock(&reg->lock);
	p = name[0] ? registry_find(reg, name) : NULL;
	if (!name[0])
		st = PROTO_E_STATE;
	else if (!p || !tenant_may_reach(who, p->owner))
		st = PROTO_E_NOPOOL;
	else if (p->conns && !force)
		st = PROTO_E_BUSY;
	if (st == PROTO_OK) {
		p->deleting = true;
		*victim = p; /* the registry's reference, handed over */
		/* a new pool of this name must make its own file */
		if (p->path && unlink(p->path) < 0)
			g_message("removing %s: %s", p->path, g_strerror(errno));
		g_message("pool '%s' deleted%s (%u connection(s))", name,
			  force ? " by force" : "", p->conns);
	}
	pthread_mutex_unlock(&reg->lock);
	return st;
}

int registry_list(struct registry *reg, const struct tenant_who *who,
		  struct proto_pool_list *out)
{
	struct registry_pool **held;
	struct registry_pool *p;
	uint32_t n = 0, i;

	memset(out, 0, sizeof(*out));
	held = g_try_new0(struct registry_pool *, PROTO_MAX_POOLS);
	out->pools = g_try_new0(struct proto_pool_info, PROTO_MAX_POOLS);
	if (!held || !out->pools) {
		g_free(held);
		proto_pool_list_clear(out);
		return -ENOMEM;
	}
	pthread_mutex_lock(&reg->lock);
	out->capacity = reg->capacity;
	out->free = reg->capacity - reg->used;
	for (p = reg->pools; p && n < PROTO_MAX_POOLS; p = p->next) {
		struct proto_pool_info *info = &out->pools[n];

		if (p->creating || !tenant_may_reach(who, p->owner))
			continue;
		g_strlcpy(info->name, p->name, sizeof(info->name));
		g_strlcpy(info->owner, p->owner, sizeof(info->owner));
		info->size = p->size;
		info->pool_id = p->pool_id;
		info->client_id = p->client_id;
		info->clients = p->conns;
		info->flags = pool_flags(p->pool) | (p->deleting ? PROTO_POOL_DELETING : 0);
		p->refs++;
		held[n++] = p;
	}
	pthread_mutex_unlock(&reg->lock);
	/* mincore outside the lock: the references keep each mapping */
	for (i = 0; i < n; i++) {
		out->pools[i].resident = pool_resident(held[i]->pool);
		registry_put(reg, held[i]);
	}
	out->npools = n;
	g_free(held);
	return 0;
}

void registry_set_release(struct registry *reg, registry_release_fn fn, void *ctx)
{
	pthread_rwlock_wrlock(&reg->hook_lock);
	reg->release = fn;
	reg->release_ctx = fn ? ctx : NULL;
	pthread_rwlock_unlock(&reg->hook_lock);
}

unsigned int registry_named_count(struct registry *reg)
{
	unsigned int n;

	pthread_mutex_lock(&reg->lock);
	n = reg->npools - (reg->deflt ? 1 : 0);
	pthread_mutex_unlock(&reg->lock);
	return n;
}
