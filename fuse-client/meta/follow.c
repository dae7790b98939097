// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * follow.c - a reader following the writer's metadata (follow.h).
 *
 * The pool holds the committed checkpoint G (named by ckpt_gen) and G's
 * journal; the reader is at (G, applied seq, journal offset). A refresh:
 *   - reads ckpt_gen;
 *   - reads G's journal from its offset on (no lock held) and applies the
 *     whole transactions it finds under m->lock (journal_follow: the magic,
 *     generation, sequence and CRC-32C checks of a replay; a transaction the
 *     writer is still writing fails its checksum and waits for the next
 *     refresh), so FUSE operations only ever see committed states;
 *   - if ckpt_gen moved to G+1 and G+1 begins right after what we applied
 *     (the writer writes its queued transactions to G's journal before it
 *     switches, commit.c), goes on with G+1's journal from its start;
 *     otherwise (we fell further behind than the journal keeps) loads the
 *     newest state whole (mount.c's loader) and takes its inodes, keeping
 *     the kernel's reference counts.
 * Then the FUSE layer drops what changed from the kernel's caches and the
 * block cache, waits for data reads that mapped blocks under the older
 * state (hooks->drain), and the next beat publishes the new applied seq: the
 * writer reuses blocks freed by a transaction only after that.
 *
 * Expired (the writer saw no beat for READERS_TIMEOUT_MS, took our slot and
 * had the memserver fence us): every read fails with -EIO from then on
 * (follow_read_ok), and refreshes stop; a remount reads again.
 */
#define G_LOG_DOMAIN "rmemfs-follow"

#include <dirent.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "follow.h"

#include "ckpt.h"
#include "clock.h"
#include "csum.h"
#include "inode.h"
#include "journal.h"
#include "meta_int.h"
#include "readers.h"
#include "remote.h"
#include "super.h"
#include "worker.h"

/* journal bytes read at a time: small when idle, doubling while there is more (up to 4 MiB) */
#define FOLLOW_CHUNK_MIN (16U << 10)
#define FOLLOW_CHUNK_MAX (4U << 20)
#define FOLLOW_BEAT_MS 1000U

struct follow {
	struct meta *m;
	struct follow_hooks h;
	unsigned int refresh_ms;
	struct worker w;
	bool started;
	follow_load_fn load_again;
	void (*free_loaded)(struct meta *f);
	/* [w's thread only] */
	uint64_t gen; /* the checkpoint generation followed */
	uint64_t pos; /* journal area offset after the last transaction applied */
	uint64_t applied; /* the last seq applied */
	uint64_t published; /* applied as of the last drain: what the beats say */
	uint64_t last_refresh_ns;
	GArray *inos, *data_inos; /* what the transactions being applied change */
	GPtrArray *entries;
	GArray *new_dirs; /* (uint64_t dir, uint64_t child) pairs: parents to set */
	GArray *guarded; /* existing regular files the transactions read change the data of */
	/* stats: atomics */
	_Atomic uint64_t caught_up_ns; /* the last refresh that reached the end of the journal */
	_Atomic uint64_t s_applied, s_gen, s_reloads, s_txns;
	_Atomic uint64_t s_refreshes; /* refreshes done (follow_wait_refresh) */
	_Atomic bool expired;
};

static struct follow *follow_new(struct meta *m)
{
	struct follow *f = g_new0(struct follow, 1);

	f->m = m;
	f->inos = g_array_new(FALSE, FALSE, sizeof(uint64_t));
	f->data_inos = g_array_new(FALSE, FALSE, sizeof(uint64_t));
	f->entries = g_ptr_array_new_with_free_func(g_free);
	f->new_dirs = g_array_new(FALSE, FALSE, sizeof(uint64_t));
	f->guarded = g_array_new(FALSE, FALSE, sizeof(uint64_t));
	return f;
}

static void follow_free(struct follow *f)
{
	g_array_free(f->inos, TRUE);
	g_array_free(f->data_inos, TRUE);
	g_ptr_array_free(f->entries, TRUE);
	g_array_free(f->new_dirs, TRUE);
	g_array_free(f->guarded, TRUE);
	g_free(f);
}

int follow_join(struct meta *m, const char *host, char **err_msg)
{
	char *name = host ? g_strdup(host) :
			    g_strdup_printf("%s pid %d", g_get_host_name(), (int)getpid());
	int rc;

	m->readers = readers_new(m->r);
	rc = readers_join(m->readers, name, err_msg);
	g_free(name);
	if (rc < 0) {
		readers_destroy(m->readers);
		m->readers = NULL;
		return rc;
	}
	m->follow = follow_new(m);
	return 0;
}

void follow_loaded(struct meta *m, follow_load_fn load_again, void (*free_loaded)(struct meta *f))
{
	struct follow *f = m->follow;

	f->load_again = load_again;
	f->free_loaded = free_loaded;
	f->gen = m->durable_gen;
	f->applied = f->published = m->durable_seq;
	f->pos = journal_tail(m->j);
	atomic_store(&f->caught_up_ns, clock_now_ns());
	atomic_store(&f->s_applied, f->applied);
	atomic_store(&f->s_gen, f->gen);
}

bool follow_active(const struct meta *m)
{
	return m->follow != NULL;
}

/* ---- what changed ---- */

static void note_entry(struct follow *f, uint64_t dir, const char *name)
{
	size_t n = strlen(name);
	struct follow_entry *e = g_malloc(sizeof(*e) + n + 1);

	e->dir = dir;
	memcpy(e->name, name, n + 1);
	g_ptr_array_add(f->entries, e);
}

static bool data_changed(const struct meta_inode *in, const struct journal_rec *r)
{
	return !in || in->a.size != r->inode.size || in->a.mtime.sec != r->inode.mtime.tv_sec ||
	       in->a.mtime.nsec != r->inode.mtime.tv_nsec;
}

/* journal_follow's apply: note what the record changes, then apply it (m->lock held) */
static int follow_apply(void *ctx, const struct journal_rec *r)
{
	struct follow *f = ctx;
	struct meta_inode *in;
	uint64_t pair[2];

	switch (r->type) {
	case LAYOUT_REC_DIRENT_ADD:
	case LAYOUT_REC_DIRENT_DEL:
		note_entry(f, r->dir, r->name);
		g_array_append_val(f->inos, r->dir);
		g_array_append_val(f->data_inos, r->dir);
		if (r->type == LAYOUT_REC_DIRENT_ADD && r->dtype == DT_DIR) {
			pair[0] = r->dir;
			pair[1] = r->ino;
			g_array_append_vals(f->new_dirs, pair, 2);
		}
		break;
	case LAYOUT_REC_INODE:
		g_array_append_val(f->inos, r->ino);
		in = inode_get(f->m, r->ino);
		if (data_changed(in, r))
			g_array_append_val(f->data_inos, r->ino);
		break;
	case LAYOUT_REC_EXT_SET:
	case LAYOUT_REC_EXT_CLEAR:
	case LAYOUT_REC_INODE_FREE:
		g_array_append_val(f->data_inos, r->ino);
		/* fall through */
	default:
		g_array_append_val(f->inos, r->ino);
		break;
	}
	return meta_apply_rec(f->m, r);
}

/* directories created by the transactions applied: their parent (m->lock held) */
static void set_parents(struct follow *f)
{
	guint i;

	for (i = 0; i + 1 < f->new_dirs->len; i += 2) {
		struct meta_inode *c = inode_get(f->m, g_array_index(f->new_dirs, uint64_t, i + 1));

		if (c && inode_dir(c))
			c->dir->parent = g_array_index(f->new_dirs, uint64_t, i);
	}
	g_array_set_size(f->new_dirs, 0);
}

/* journal_follow's first pass: which existing files' data will change (m->lock held) */
static int follow_survey(void *ctx, const struct journal_rec *r)
{
	struct follow *f = ctx;
	struct meta_inode *in;

	if (r->type != LAYOUT_REC_EXT_SET && r->type != LAYOUT_REC_EXT_CLEAR &&
	    r->type != LAYOUT_REC_INODE && r->type != LAYOUT_REC_INODE_FREE)
		return 0;
	in = inode_get(f->m, r->ino);
	if (in && S_ISREG(in->a.mode) && (r->type != LAYOUT_REC_INODE || data_changed(in, r)))
		g_array_append_val(f->guarded, r->ino);
	return 0;
}

static gint u64_order(gconstpointer a, gconstpointer b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* sort the surveyed inos and drop repeats */
static void unique_sorted(GArray *a)
{
	guint i, n = 0;

	g_array_sort(a, u64_order);
	for (i = 0; i < a->len; i++)
		if (!n || g_array_index(a, uint64_t, n - 1) != g_array_index(a, uint64_t, i))
			g_array_index(a, uint64_t, n++) = g_array_index(a, uint64_t, i);
	g_array_set_size(a, n);
}

/*
 * Apply what buf holds, whole transactions only: a survey pass first finds
 * the existing files whose data changes, the FUSE layer guards them
 * (hooks.guard), then the real pass. Both parse the same bytes alike.
 */
static int apply_buf(struct follow *f, const uint8_t *buf, size_t len,
		     struct journal_replay_info *info, bool *more)
{
	struct meta *m = f->m;
	bool guard;
	int rc;

	g_array_set_size(f->guarded, 0);
	if (f->h.guard) {
		pthread_mutex_lock(&m->lock);
		journal_follow(m->j, buf, len, f->pos, f->gen, f->applied + 1, follow_survey, f,
			       info, more);
		pthread_mutex_unlock(&m->lock);
		journal_replay_info_clear(info);
		unique_sorted(f->guarded);
	}
	guard = f->guarded->len > 0;
	if (guard)
		f->h.guard(f->h.ctx, (uint64_t *)(void *)f->guarded->data, f->guarded->len, true);
	pthread_mutex_lock(&m->lock);
	rc = journal_follow(m->j, buf, len, f->pos, f->gen, f->applied + 1, follow_apply, f, info,
			    more);
	set_parents(f);
	pthread_mutex_unlock(&m->lock);
	if (guard)
		f->h.guard(f->h.ctx, (uint64_t *)(void *)f->guarded->data, f->guarded->len, false);
	return rc;
}

/* ---- the journal ---- */

/*
 * Apply what G's journal holds past f->pos. 0 (however far it got; *end:
 * it reached what the writer has not written yet), or -EUCLEAN for a
 * transaction that passes its checksum but does not parse (only a bug
 * writes one: the caller loads the state whole instead).
 */
static int pull(struct follow *f, bool *end)
{
	struct meta *m = f->m;
	struct journal_replay_info info;
	uint8_t *buf = NULL;
	size_t len, chunk = FOLLOW_CHUNK_MIN;
	bool more = true;
	int rc = 0;

	*end = false;
	while (more && !rc) {
		len = (size_t)MIN((uint64_t)chunk, m->g.journal_len - f->pos);
		if (!len) {
			*end = true;
			break;
		}
		buf = g_realloc(buf, len);
		rc = remote_read(m->r, m->g.journal_off + f->pos, buf, len);
		if (rc < 0)
			break;
		rc = apply_buf(f, buf, len, &info, &more);
		g_debug("pull gen %" G_GUINT64_FORMAT " pos %" G_GUINT64_FORMAT " len %zu: %"
			G_GUINT64_FORMAT " txns, last %" G_GUINT64_FORMAT ", more %d, rc %d: %s",
			(guint64)f->gen, (guint64)f->pos, len, (guint64)info.txns,
			(guint64)info.last_seq, more, rc, info.stop_reason ? info.stop_reason : "");
		if (info.txns) {
			f->pos = info.bytes;
			f->applied = info.last_seq;
			atomic_fetch_add(&f->s_txns, info.txns);
		}
		if (more)
			chunk = MIN(chunk * 2, FOLLOW_CHUNK_MAX);
		if (!more && !rc)
			*end = true;
		if (rc < 0)
			g_message("following the journal: %s", info.stop_reason ? info.stop_reason :
				  g_strerror(-rc));
		journal_replay_info_clear(&info);
	}
	g_free(buf);
	return rc;
}

/* ---- loading the state whole ---- */

static void keep_refs(struct meta *m, struct meta_inode *from, struct meta *fresh,
		      struct meta_inode *to)
{
	to->nlookup = from->nlookup;
	inode_opens_set(fresh, to, inode_opens_get(m, from));
	to->pagecache = from->pagecache;
}

/* what the kernel may hold of old that fresh does not say the same way */
static void diff_inode(struct follow *f, struct meta_inode *old, struct meta_inode *fresh)
{
	GHashTableIter it;
	gpointer k, v;

	if (!fresh || !inode_attr_equal(old, fresh)) {
		g_array_append_val(f->inos, old->a.ino);
		g_array_append_val(f->data_inos, old->a.ino);
	}
	if (!inode_dir(old))
		return;
	g_hash_table_iter_init(&it, old->dir->by_name);
	while (g_hash_table_iter_next(&it, &k, &v)) {
		struct meta_dirent *d = v, *nd;
		char name[NAME_MAX + 1];

		inode_dirent_name(d, name);
		nd = fresh ? inode_dir_lookup(fresh, name) : NULL;
		if (!nd || nd->ino != d->ino)
			note_entry(f, old->a.ino, name);
	}
}

/* take fresh's state into m (m->lock held); fresh gets m's old one */
static void take_state(struct follow *f, struct meta *fresh)
{
	struct meta *m = f->m;
	GHashTableIter it;
	gpointer k, v;

	g_hash_table_iter_init(&it, m->inodes);
	while (g_hash_table_iter_next(&it, &k, &v)) {
		struct meta_inode *old = v, *in = g_hash_table_lookup(fresh->inodes, k);

		diff_inode(f, old, in);
		if (in)
			keep_refs(m, old, fresh, in);
	}
#define SWAP(field)                                \
	do {                                       \
		__typeof__(m->field) t = m->field; \
		m->field = fresh->field;           \
		fresh->field = t;                  \
	} while (0)
	SWAP(inodes);
	SWAP(xattrs); /* keyed by the inode records */
	SWAP(opens);
	SWAP(next_ino);
	SWAP(ckpt_bytes);
	SWAP(blocks_mapped);
	SWAP(j);
	SWAP(durable_gen);
	SWAP(durable_seq);
#undef SWAP
	csum_swap(m->csum, fresh->csum); /* the contents: the data path holds m->csum */
}

static int reload(struct follow *f)
{
	struct meta *m = f->m, *fresh = NULL;
	char *why = NULL;
	int rc;

	rc = f->load_again(m, &fresh, &why);
	if (rc < 0) {
		g_message("loading the filesystem again: %s (will retry)", why ? why :
			  g_strerror(-rc));
		g_free(why);
		return rc;
	}
	pthread_mutex_lock(&m->lock);
	take_state(f, fresh);
	f->gen = m->durable_gen;
	f->applied = m->durable_seq;
	f->pos = journal_tail(m->j);
	pthread_mutex_unlock(&m->lock);
	f->free_loaded(fresh);
	atomic_fetch_add(&f->s_reloads, 1);
	g_message("loaded the filesystem again at checkpoint %" G_GUINT64_FORMAT ", seq %"
		  G_GUINT64_FORMAT " (the writer's journal had moved past this reader)",
		  (guint64)f->gen, (guint64)f->applied);
	return 0;
}

/* ---- a refresh ---- */

/* the writer switched to checkpoint gen: go on with its journal if it starts where we are */
static int next_gen(struct follow *f, uint64_t gen)
{
	uint64_t first_seq;
	bool end;

	if (gen == f->gen + 1 && ckpt_first_seq(f->m, gen, &first_seq) == 0 &&
	    first_seq == f->applied + 1) {
		f->gen = gen;
		f->pos = 0;
		return pull(f, &end);
	}
	return reload(f);
}

static int refresh(struct follow *f)
{
	uint64_t t0 = clock_now_ns(), gen;
	bool end = false;
	int rc;

	rc = super_read_ckpt_gen(f->m->sb, &gen);
	if (rc < 0)
		return rc;
	if (gen == f->gen) {
		rc = pull(f, &end);
		if (rc == -EUCLEAN)
			rc = reload(f);
	} else {
		/* the rest of G's journal first: G+1 may begin right after it */
		rc = pull(f, &end) < 0 ? reload(f) : next_gen(f, gen);
		end = rc == 0;
	}
	if (!rc && end && f->gen == gen)
		atomic_store(&f->caught_up_ns, t0);
	return rc;
}

/* tell the FUSE layer what changed, wait out reads of the older state */
static void settle(struct follow *f)
{
	if (f->inos->len || f->entries->len) {
		if (f->h.changed)
			f->h.changed(f->h.ctx, f->inos, f->data_inos, f->entries);
		g_array_set_size(f->inos, 0);
		g_array_set_size(f->data_inos, 0);
		g_ptr_array_set_size(f->entries, 0);
	}
	if (f->applied != f->published && f->h.drain)
		f->h.drain(f->h.ctx);
	f->published = f->applied;
	atomic_store(&f->s_applied, f->applied);
	atomic_store(&f->s_gen, f->gen);
}

static uint64_t lag_ms(struct follow *f)
{
	uint64_t now = clock_now_ns(), t = atomic_load(&f->caught_up_ns);

	return now > t ? (now - t) / 1000000 : 0;
}

static void expired(struct follow *f)
{
	atomic_store(&f->expired, true);
	g_message("EXPIRED: the writer saw no beat from this reader for %u ms and gave its space "
		  "away; every read fails from now on (remount to read again)",
		  readers_timeout_ms(f->m->readers));
}

static void *follow_main(void *arg)
{
	struct follow *f = arg;
	unsigned int tick = MIN(f->refresh_ms, FOLLOW_BEAT_MS);
	int rc;

	while (worker_wait(&f->w, (int)tick) == 0 && !atomic_load(&f->expired)) {
		if (remote_failed(f->m->r))
			break; /* (the pool said why; every access fails from now on) */
		if (clock_now_ns() - f->last_refresh_ns >= f->refresh_ms * 1000000ULL) {
			f->last_refresh_ns = clock_now_ns();
			refresh(f);
			settle(f);
			atomic_fetch_add(&f->s_refreshes, 1);
		}
		rc = readers_beat(f->m->readers, f->published, f->gen, lag_ms(f));
		if (rc == -ESTALE)
			expired(f);
	}
	return NULL;
}

int follow_start(struct meta *m, unsigned int refresh_ms, const struct follow_hooks *h)
{
	struct follow *f = m->follow;
	int rc;

	if (!f)
		return 0;
	f->h = *h;
	f->refresh_ms = MAX(refresh_ms, 10U);
	f->last_refresh_ns = clock_now_ns();
	rc = worker_start(&f->w, "follower", follow_main, f);
	f->started = rc == 0;
	return rc;
}

void follow_stop(struct meta *m)
{
	if (m && m->follow && m->follow->started) {
		worker_stop(&m->follow->w);
		m->follow->started = false;
	}
}

void follow_leave(struct meta *m)
{
	if (!m || !m->follow)
		return;
	follow_stop(m);
	if (!atomic_load(&m->follow->expired))
		readers_leave(m->readers);
	follow_free(m->follow);
	m->follow = NULL;
}

int follow_read_ok(struct meta *m)
{
	struct follow *f = m->follow;
	int rc;

	if (!f)
		return 0;
	if (atomic_load(&f->expired))
		return -EIO;
	rc = readers_read_ok(m->readers);
	if (rc == -ESTALE && !atomic_exchange(&f->expired, true))
		expired(f);
	return rc < 0 ? -EIO : 0;
}

int follow_wait_refresh(struct meta *m)
{
	struct follow *f = m->follow;
	uint64_t start, deadline;

	if (!f || !f->started)
		return -EINVAL;
	/* two more: the one in progress at the call may have read the journal before it */
	start = atomic_load(&f->s_refreshes);
	deadline = clock_now_ns() + (3ULL * f->refresh_ms + 1000) * 1000000ULL;
	while (atomic_load(&f->s_refreshes) < start + 2) {
		if (clock_now_ns() > deadline || atomic_load(&f->expired))
			return -ETIMEDOUT;
		g_usleep(MIN(f->refresh_ms, 50U) * 1000);
	}
	return 0;
}

size_t follow_stats_text(struct meta *m, char *buf, size_t cap)
{
	struct follow *f = m->follow;
	int n;

	if (!f)
		return 0;
	n = snprintf(buf, cap,
		     "role reader\nreader_state %s\nreader_applied %" G_GUINT64_FORMAT
		     "\nreader_gen %" G_GUINT64_FORMAT "\nreader_lag_ms %" G_GUINT64_FORMAT
		     "\nreader_refresh_ms %u\nreader_txns %" G_GUINT64_FORMAT
		     "\nreader_reloads %" G_GUINT64_FORMAT "\n",
		     atomic_load(&f->expired) ? "expired" : remote_failed(m->r) ? "failed" : "live",
		     (guint64)atomic_load(&f->s_applied), (guint64)atomic_load(&f->s_gen),
		     (guint64)lag_ms(f), f->refresh_ms, (guint64)atomic_load(&f->s_txns),
		     (guint64)atomic_load(&f->s_reloads));
	return n < 0 ? 0 : MIN((size_t)n, cap ? cap - 1 : 0);
}
