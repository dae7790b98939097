// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * mount.c - mount_open / mount_close / mount_abandon and mount_fsck:
 * superblock checks, format, lease, checkpoint load, journal replay,
 * recovery, the clean shutdown, and the offline check of rmemfs-fsck.
 *
 * Mount order (read-write):
 *   probe block 0 -> refuse newer/foreign/damaged formats (unless -o format)
 *   take the lease, start the heartbeat, probe again (it may have changed
 *   while we waited) -> format if the pool is fresh (or the format of a
 *   previous client never completed: ckpt_gen still 0)
 *   load checkpoint ckpt_gen, replay the journal of that generation
 *   (read-write, after an unclean shutdown) skip the inode numbers the crashed
 *   writer may have given out
 *   free orphans (unlinked while open when the last client stopped), derive
 *   directory parents, rebuild the allocator from the extents
 *   check (fsck.c, repairing what is safe; refusing on real damage)
 *   wait until the live readers have applied the state loaded (hold_start:
 *   their slots in block 0), so none reads blocks this mount may reuse
 *   mark unclean; after a crash, a replay or a repair write a checkpoint so
 *   the recovered state stands on its own; start the committer.
 * Read-only (-o ro): take a reader slot (follow_join) before loading, so the
 * writer holds back the space this mount may still read.
 */
#define G_LOG_DOMAIN "rmemfs-meta"

#include <errno.h>
#include <malloc.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "mount.h"

#include "alloc.h"
#include "ckpt.h"
#include "checksum.h"
#include "clock.h"
#include "commit.h"
#include "csum.h"
#include "follow.h"
#include "fsck.h"
#include "hold.h"
#include "inode.h"
#include "journal.h"
#include "meta_int.h"
#include "readers.h"
#include "remote.h"
#include "super.h"
#include "units.h"

#define LOAD_NO_CHECK 0x1 /* fsck: load and replay, do not check or repair */
#define LOAD_SALVAGE 0x2 /* fsck: work around a damaged checkpoint or journal, report it */

static void set_err(char **err_msg, char *msg)
{
	if (err_msg && !*err_msg)
		*err_msg = msg;
	else
		g_free(msg);
}

static struct meta *new_meta(struct remote *r, struct super *sb, const struct layout_geom *g)
{
	struct meta *m = g_new0(struct meta, 1);

	pthread_mutex_init(&m->lock, NULL);
	pthread_mutex_init(&m->commit_lock, NULL);
	m->r = r;
	m->sb = sb;
	if (g)
		m->g = *g;
	m->inodes = inode_table_new();
	m->xattrs = inode_xattr_table_new();
	m->opens = inode_opens_table_new();
	m->next_ino = META_ROOT_INO + 1;
	m->csum = csum_new();
	/* header, allocation bitmap, and the tail's empty hot set (csum.h) */
	m->ckpt_bytes = LAYOUT_CKPT_HDR_SIZE + (m->g.data_blocks + 7) / 8 + 4;
	m->load.problems = g_ptr_array_new_with_free_func(g_free);
	return m;
}

/* free m and the superblock it owns (m->sb NULL: the caller's) */
static void free_meta(struct meta *m)
{
	if (!m)
		return;
	if (m->csum && m->r)
		remote_judge_drop(m->r); /* (checksum_judge's: it reads m->csum) */
	pthread_mutex_destroy(&m->lock);
	pthread_mutex_destroy(&m->commit_lock);
	g_ptr_array_free(m->load.problems, TRUE);
	super_destroy(m->sb);
	hold_free(m);
	readers_destroy(m->readers);
	g_hash_table_destroy(m->inodes);
	g_hash_table_destroy(m->xattrs);
	g_hash_table_destroy(m->opens);
	alloc_destroy(m->alloc);
	journal_destroy(m->j);
	csum_destroy(m->csum);
	g_free(m);
}

/* free every unlinked inode nothing refers to any more (at load: all of them) */
static uint64_t free_orphans(struct meta *m, bool log)
{
	GHashTableIter it;
	gpointer k, v;
	GPtrArray *victims = g_ptr_array_new();
	guint i;
	uint64_t n;

	g_hash_table_iter_init(&it, m->inodes);
	while (g_hash_table_iter_next(&it, &k, &v)) {
		struct meta_inode *in = v;

		if (!in->a.nlink && !in->nlookup && !in->is_open && in->a.ino != META_ROOT_INO &&
		    (!inode_dir(in) || !inode_dir_count(in)))
			g_ptr_array_add(victims, in);
	}
	for (i = 0; i < victims->len; i++) {
		struct meta_inode *in = g_ptr_array_index(victims, i);

		if (log)
			g_debug("freeing orphan inode %" G_GUINT64_FORMAT, (guint64)in->a.ino);
		inode_destroy(m, in);
	}
	n = victims->len;
	g_ptr_array_free(victims, TRUE);
	return n;
}

/* ---- format ---- */

static int format_pool(struct meta **out, struct remote *r, struct super *sb, char **err_msg)
{
	struct layout_inode root;
	struct meta *m;
	GByteArray *buf;
	char s1[32], s2[32], s3[32];
	int rc;

	rc = super_format(sb);
	if (rc == -ENOSPC) {
		set_err(err_msg, g_strdup_printf("pool is too small for a filesystem (at least "
						 "%llu MiB)", LAYOUT_MIN_POOL >> 20));
		return rc;
	}
	if (rc == -EFBIG) {
		set_err(err_msg, g_strdup_printf("pool is too large for one filesystem (its "
						 "checkpoints would pass 4 GiB): serve at most "
						 "3.7 TiB"));
		return rc;
	}
	if (rc < 0) {
		set_err(err_msg, g_strdup_printf("formatting the pool: %s", g_strerror(-rc)));
		return rc;
	}
	m = new_meta(r, sb, super_geom(sb));
	m->j = journal_new(m->g.journal_off, m->g.journal_len, m->g.fs_id);
	memset(&root, 0, sizeof(root));
	root.ino = META_ROOT_INO;
	root.mode = S_IFDIR | 0755;
	root.nlink = 2;
	root.uid = (uint32_t)getuid();
	root.gid = (uint32_t)getgid();
	clock_file_time(&root.mtime);
	root.atime = root.ctime = root.mtime;
	inode_create(m, &root);
	rc = inode_build_alloc(m, NULL);
	if (rc < 0)
		goto err;
	rc = ckpt_serialize(m, 1, 1, &buf);
	if (rc < 0)
		goto err;
	rc = ckpt_write(m, 1, buf);
	g_byte_array_unref(buf);
	if (!rc)
		rc = super_commit_ckpt_gen(sb, 0, 1);
	if (rc < 0)
		goto err;
	m->durable_gen = 1;
	m->durable_seq = 0;
	journal_reset(m->j, 1, 0, 1);
	units_format_size(m->g.data_blocks * META_BLOCK_SIZE, s1, sizeof(s1));
	units_format_size(m->g.journal_len, s2, sizeof(s2));
	units_format_size(m->g.slot_len, s3, sizeof(s3));
	g_message("formatted the pool: %s of data, %s journal, 2 x %s checkpoint slots", s1, s2,
		  s3);
	*out = m;
	return 0;
err:
	set_err(err_msg, g_strdup_printf("formatting the pool: %s", g_strerror(-rc)));
	m->sb = NULL;
	free_meta(m);
	return rc;
}

/* ---- load ---- */

static int classify_err(enum layout_sb_kind kind, uint32_t version, const char *why,
			const struct mount_opts *opts, char **err_msg)
{
	switch (kind) {
	case LAYOUT_SB_NEWER:
		set_err(err_msg, g_strdup_printf("pool was formatted by a newer rmemfs (format %u, "
						 "this is %u)",
						 version, LAYOUT_VERSION));
		return -EPROTONOSUPPORT;
	case LAYOUT_SB_FOREIGN:
		if (opts->format && !opts->read_only)
			return 0;
		set_err(err_msg, g_strdup("pool holds no rmemfs filesystem (use -o format to "
					  "format it)"));
		return -EMEDIUMTYPE;
	case LAYOUT_SB_CORRUPT:
		if (opts->format && !opts->read_only)
			return 0;
		set_err(err_msg, g_strdup_printf("the rmemfs superblock is damaged (%s); -o format "
						 "would reformat the pool, destroying its contents",
						 why ? why : "unknown"));
		return -EUCLEAN;
	case LAYOUT_SB_ZERO:
		if (!opts->read_only)
			return 0;
		set_err(err_msg, g_strdup("pool is empty (all zero): it holds no filesystem yet"));
		return -EMEDIUMTYPE;
	case LAYOUT_SB_RMEMFS:
		return 0;
	}
	return -EINVAL;
}

/*
 * Load the checkpoint *gen names. A mount takes it as stored or refuses it.
 * rmemfs-fsck (LOAD_SALVAGE) works around the damage and reports it as
 * problems: a payload that does not parse although its checksum is right (a
 * bug wrote it) is salvaged; a damaged header or payload checksum takes the
 * previous checkpoint in the other slot if that one loads (what came after
 * it is lost), else salvages this one.
 */
static int load_ckpt(struct meta *m, unsigned int flags, uint64_t *gen, uint64_t *first_seq,
		     bool *fell_back, char **err_msg)
{
	char *why = NULL, *why2 = NULL;
	int rc;

	rc = ckpt_load(m, *gen, false, first_seq, &why);
	if (rc == 0 || !(flags & LOAD_SALVAGE) ||
	    (rc != -ENODATA && rc != -EBADMSG && rc != -EUCLEAN))
		goto out;
	if (rc != -EUCLEAN && *gen > 1 && ckpt_load(m, *gen - 1, false, first_seq, &why2) == 0) {
		inode_load_problem(m, "%s; using the previous checkpoint %" G_GUINT64_FORMAT
				   " (changes made after it are lost)", why, (guint64)(*gen - 1));
		*fell_back = true;
		(*gen)--;
		rc = 0;
	} else if (rc != -ENODATA) {
		rc = ckpt_load(m, *gen, true, first_seq, &why2);
	}
	if (rc < 0 && why2) {
		char *both = g_strdup_printf("%s; %s", why, why2);

		g_free(why);
		why = both;
	}
out:
	if (rc < 0) {
		const char *hint = flags & LOAD_SALVAGE ? "" : "; run rmemfs-fsck --repair";

		set_err(err_msg, g_strdup_printf("%s%s", why ? why : g_strerror(-rc), hint));
		if (rc == -ENODATA || rc == -EBADMSG)
			rc = -EUCLEAN;
	}
	g_free(why);
	g_free(why2);
	return rc;
}

/*
 * After taking the previous checkpoint G-1, the journal area still holds
 * transactions of G (and the checkpoint the repair writes is numbered G
 * again): start the sequence numbers past any of them, so none can ever be
 * replayed as part of the new journal. G's first sequence number is at most
 * one journal area of transactions after G-1's, and G holds at most one
 * area more.
 */
static uint64_t seq_after_fallback(const struct meta *m, uint64_t next_seq)
{
	return next_seq + 2 * (m->g.journal_len / sizeof(struct layout_txn_hdr)) + 1;
}

/*
 * A writer that crashed may have given out inode numbers that never became
 * durable: to the kernel, and in file handles to NFS clients and backups. A
 * new file must not get one of them, or such a handle would open it (file
 * handles carry generation 0, see ops_init). Between two commits (a second
 * apart; longer only while the pool does not answer, until reconnect_timeout
 * fails it) no client creates anywhere near 2^32 files. The numbers last for
 * 2^31 crashes (LAYOUT_INO_LIMIT).
 */
#define INO_SKIP_AFTER_CRASH (1ULL << 32)

static int load_existing(struct meta *m, unsigned int flags, char **err_msg)
{
	struct journal_replay_info info;
	uint64_t gen, first_seq = 1, next_seq;
	bool clean = false, fell_back = false;
	guint i;
	int rc;

	rc = super_read_ckpt_gen(m->sb, &gen);
	if (rc < 0) {
		set_err(err_msg, g_strdup_printf("reading the checkpoint generation: %s",
						 g_strerror(-rc)));
		return rc;
	}
	if (gen == 0) {
		set_err(err_msg, g_strdup("the pool's format never completed (no checkpoint)"));
		return -EUCLEAN;
	}
	rc = load_ckpt(m, flags, &gen, &first_seq, &fell_back, err_msg);
	if (rc < 0)
		return rc;
	m->load.ckpt_gen = gen;
	if (super_read_clean(m->sb, &clean) == 0)
		m->load.was_clean = clean;
	rc = journal_replay(m->j, m->r, gen, first_seq, flags & LOAD_SALVAGE, meta_apply_rec, m, &info);
	if (rc < 0) {
		const char *hint = rc == -EUCLEAN ? "; run rmemfs-fsck --repair" : "";

		set_err(err_msg, g_strdup_printf("journal replay: %s%s",
						 info.stop_reason ? info.stop_reason :
								    g_strerror(-rc),
						 hint));
		journal_replay_info_clear(&info);
		return rc;
	}
	for (i = 0; info.damage && i < info.damage->len; i++)
		inode_load_problem(m, "%s", (char *)g_ptr_array_index(info.damage, i));
	m->load.replayed = info.txns;
	m->load.replay_bytes = info.bytes;
	m->load.torn_tail = info.torn;
	if (info.txns || !clean)
		g_message("%s: replayed %" G_GUINT64_FORMAT " journal transactions (%"
			  G_GUINT64_FORMAT " bytes); stopped at: %s",
			  clean ? "clean filesystem" : "recovering after an unclean shutdown",
			  (guint64)info.txns, (guint64)info.bytes,
			  info.stop_reason ? info.stop_reason : "?");
	if (!clean && !m->read_only)
		m->next_ino += INO_SKIP_AFTER_CRASH;
	next_seq = info.last_seq + 1;
	if (fell_back)
		next_seq = seq_after_fallback(m, next_seq);
	journal_reset(m->j, gen, info.bytes, next_seq);
	m->durable_gen = gen;
	m->durable_seq = info.last_seq;
	journal_replay_info_clear(&info);
	return 0;
}

/* read the superblock and judge what it holds */
static int probe(struct super *sb, const struct mount_opts *opts, enum layout_sb_kind *kind,
		 char **err_msg)
{
	uint32_t version;
	const char *why;
	int rc;

	rc = super_probe(sb, kind, &version, &why);
	if (rc < 0) {
		set_err(err_msg, g_strdup_printf("reading the superblock: %s", g_strerror(-rc)));
		return rc;
	}
	return classify_err(*kind, version, why, opts, err_msg);
}

/*
 * Take the lease and start its heartbeat, then probe again (the pool may
 * have changed while we waited). *format: the pool holds no filesystem, or
 * the format of a previous client never completed (ckpt_gen still 0).
 */
static int take_lease(struct super *sb, const struct mount_opts *opts, enum layout_sb_kind kind,
		      bool *format, char **err_msg)
{
	enum super_lease_how how = SUPER_LEASE_WAIT;
	uint64_t gen = 0;
	char *holder;
	int rc;

	holder = opts->holder_name ? g_strdup(opts->holder_name) :
				     g_strdup_printf("%s pid %d", g_get_host_name(), (int)getpid());
	/* foreign bytes in the lease word are no lease: -o format takes the word */
	if (opts->force_lease)
		how = SUPER_LEASE_FORCE;
	else if (kind == LAYOUT_SB_FOREIGN)
		how = SUPER_LEASE_FOREIGN;
	rc = super_lease_acquire(sb, holder, opts->lease_takeover_ms, how, err_msg);
	g_free(holder);
	if (rc < 0)
		return rc;
	rc = probe(sb, opts, &kind, err_msg);
	if (!rc && kind == LAYOUT_SB_RMEMFS) {
		rc = super_read_ckpt_gen(sb, &gen);
		if (rc < 0)
			set_err(err_msg, g_strdup_printf("reading the superblock: %s",
							 g_strerror(-rc)));
		else if (gen == 0)
			g_message("the format of this pool never completed: formatting it again");
	}
	if (rc < 0)
		goto err_lease;
	*format = kind != LAYOUT_SB_RMEMFS || gen == 0;
	return 0;

err_lease:
	super_lease_release(sb);
	return rc;
}

/* the mount-time check: repair what is safe, refuse the rest */
static int check(struct meta *m, char **err_msg)
{
	struct fsck_report rep;
	int rc;

	fsck_report_init(&rep);
	rc = fsck_check(m, FSCK_MOUNT, &rep);
	if (rc < 0) {
		set_err(err_msg, g_strdup_printf("repairing the filesystem while mounting: %s; run "
						 "rmemfs-fsck --repair",
						 g_strerror(-rc)));
	} else if (rep.unsafe) {
		set_err(err_msg, g_strdup_printf("the filesystem has %u errors that need "
						 "rmemfs-fsck --repair (first: %s)",
						 rep.unsafe, rep.first_unsafe));
		rc = -EUCLEAN;
	} else if (rep.repaired) {
		g_message("repaired %u problems while mounting", rep.repaired);
	}
	m->load.repaired = rep.repaired;
	fsck_report_clear(&rep);
	return rc;
}

/* seconds since *t, and *t moved to now (the load's stage times) */
static double lap(uint64_t *t)
{
	uint64_t now = clock_now_ns();
	double s = (double)(now - *t) / 1e9;

	*t = now;
	return s;
}

/* load the filesystem of an rmemfs pool: checkpoint, journal, orphans, allocator, check */
static int load(struct meta *m, unsigned int flags, char **err_msg)
{
	uint64_t dups = 0, orphans, t = clock_now_ns();
	double s_load, s_derive;
	int rc;

	m->j = journal_new(m->g.journal_off, m->g.journal_len, m->g.fs_id);
	rc = load_existing(m, flags, err_msg);
	if (rc < 0)
		return rc;
	s_load = lap(&t);
	inode_derive_parents(m);
	orphans = free_orphans(m, true);
	if (orphans)
		g_message("freed %" G_GUINT64_FORMAT " orphaned inodes (unlinked while open)",
			  (guint64)orphans);
	m->load.orphans = orphans;
	rc = inode_build_alloc(m, &dups);
	if (rc < 0 && rc != -ERANGE) {
		set_err(err_msg, g_strdup_printf("building the allocator: %s", g_strerror(-rc)));
		return rc;
	}
	s_derive = lap(&t);
	rc = (flags & LOAD_NO_CHECK) ? 0 : check(m, err_msg);
	g_debug("load of %u inodes: checkpoint and journal %.3f s, parents, orphans and "
		"allocator %.3f s, check %.3f s", g_hash_table_size(m->inodes), s_load, s_derive,
		lap(&t));
	return rc;
}

/*
 * After a crash: the set's copies agree by their checksums, and each block
 * an in-place write was cut short on holds its new or its old bytes, or is
 * said to be damaged (checksum.h checksum_recover). *changed: the state in
 * RAM moved (the checkpoint that follows makes it durable).
 */
static int recover_checksums(struct meta *m, bool *changed)
{
	struct checksum_recovery rec;
	int rc = checksum_recover(m, &rec);

	*changed = rec.regions || rec.pending || rec.dropped;
	if (rc < 0)
		g_message("recovering the data checksums after the last client: %s",
			  g_strerror(-rc));
	else if (rec.pending)
		g_message("the last client stopped while writing in place: %" G_GUINT64_FORMAT
			  " blocks it wrote since their regions were last settled checked, %"
			  G_GUINT64_FORMAT " hold the new bytes, %" G_GUINT64_FORMAT " the old, %"
			  G_GUINT64_FORMAT " neither (they fail with EIO); %" G_GUINT64_FORMAT
			  " copies rewritten to agree",
			  (guint64)rec.pending, (guint64)rec.kept_new, (guint64)rec.kept_old,
			  (guint64)rec.bad, (guint64)rec.rewritten);
	return rc;
}

/*
 * Mark the pool in use and start the committer. After a crash, a replay or
 * a repair, write a checkpoint first so the recovered state stands on its own.
 */
static int go_live(struct meta *m, bool formatted, unsigned int flags, char **err_msg)
{
	const struct meta_load_info *l = &m->load;
	/* the superblock's version: a crashed upgrade may have left a version-2 checkpoint */
	uint32_t from = super_geom(m->sb)->version;
	bool upgrade = from < LAYOUT_VERSION && !(flags & LOAD_NO_CHECK);
	bool recovered = false;
	int rc;

	rc = hold_start(m, err_msg);
	if (!rc)
		rc = super_write_clean(m->sb, false);
	/* (a new pool has nothing to recover, but a new set's keeper starts there) */
	if (!rc && !(flags & LOAD_NO_CHECK))
		rc = recover_checksums(m, &recovered);
	/* a version-1 pool: its next checkpoint is a version-2 one, then the superblock says so */
	if (upgrade)
		m->g.version = LAYOUT_VERSION;
	if (!rc && !formatted && !(flags & LOAD_NO_CHECK) &&
	    (l->replayed || !l->was_clean || l->orphans || l->repaired || l->problems->len ||
	     upgrade || recovered))
		rc = commit_write(m, true);
	if (!rc && upgrade) {
		rc = super_upgrade(m->sb);
		if (!rc && from < LAYOUT_VERSION_CSUM)
			g_message("upgraded the pool to format version %u (data checksums); its "
				  "existing data blocks have none until rewritten or scrubbed",
				  LAYOUT_VERSION);
		else if (!rc)
			g_message("upgraded the pool to format version %u (write-ahead checksums)",
				  LAYOUT_VERSION);
	}
	if (rc < 0) {
		set_err(err_msg, g_strdup_printf("writing to the pool: %s", g_strerror(-rc)));
		return rc;
	}
	rc = commit_start(m);
	if (rc < 0)
		set_err(err_msg, g_strdup("cannot start the journal committer"));
	return rc;
}

/* a loaded state the follower took the inodes of (follow.h) */
static void free_loaded(struct meta *f)
{
	if (f)
		f->sb = NULL; /* m's */
	free_meta(f);
}

/* the pool's newest state beside m, for a reader far behind (follow.h) */
static int load_again(struct meta *m, struct meta **out, char **err_msg)
{
	struct meta *f = new_meta(m->r, m->sb, &m->g);
	int rc;

	f->read_only = true;
	rc = load(f, 0, err_msg);
	if (rc < 0) {
		free_loaded(f);
		return rc;
	}
	alloc_destroy(f->alloc);
	f->alloc = NULL;
	*out = f;
	return 0;
}

static int load_fs(struct remote *r, const struct mount_opts *opts, unsigned int flags,
		   struct meta **out, char **err_msg)
{
	struct super *sb;
	struct meta *m = NULL;
	enum layout_sb_kind kind;
	bool rw = !opts->read_only, format = false;
	int rc;

	*out = NULL;
	if (err_msg)
		*err_msg = NULL;
	sb = super_new(r);
	rc = probe(sb, opts, &kind, err_msg);
	if (rc < 0)
		goto err_super;
	if (kind == LAYOUT_SB_RMEMFS && opts->format)
		g_message("the pool already holds an rmemfs filesystem: mounting it, not "
			  "formatting it");
	if (rw) {
		rc = take_lease(sb, opts, kind, &format, err_msg);
		if (rc < 0)
			goto err_super;
	}
	if (format) {
		rc = format_pool(&m, r, sb, err_msg);
		if (rc < 0)
			goto err_lease;
	} else {
		m = new_meta(r, sb, super_geom(sb));
		m->read_only = !rw;
		rc = opts->follow ? follow_join(m, opts->holder_name, err_msg) : 0;
		if (!rc)
			rc = load(m, flags, err_msg);
		if (rc < 0)
			goto err_meta;
	}
	if (rw) {
		rc = go_live(m, format, flags, err_msg);
		if (rc < 0)
			goto err_meta;
	} else if (opts->follow) {
		follow_loaded(m, load_again, free_loaded);
	}
	/*
	 * The load's temporaries (the check's sorted inode table and sets, the
	 * parse's buffers) below the mmap threshold leave free pages between
	 * what stays: give them back (at 10,000 files, 16 bytes a file).
	 */
	malloc_trim(0);
	*out = m;
	return 0;

err_meta:
	m->sb = NULL;
	follow_leave(m);
	free_meta(m);
err_lease:
	if (rw)
		super_lease_release(sb);
err_super:
	super_destroy(sb);
	return rc;
}

int mount_open(struct remote *r, const struct mount_opts *opts, struct meta **out,
	       char **err_msg)
{
	return load_fs(r, opts, 0, out, err_msg);
}

int mount_close(struct meta *m)
{
	struct super *sb;
	int rc = 0, rc2;

	if (!m)
		return 0;
	sb = m->sb;
	commit_stop(m); /* (stopping twice is fine: mount_abandon below) */
	if (!m->read_only) {
		bool need;

		commit_sweep_hot(m, true); /* nothing is in flight: no region needs to stay hot */
		pthread_mutex_lock(&m->lock);
		need = free_orphans(m, false) || journal_pending_bytes(m->j) ||
		       journal_tail(m->j) || m->need_ckpt;
		pthread_mutex_unlock(&m->lock);
		if (need)
			rc = commit_write(m, true);
		if (!rc)
			rc = super_write_clean(sb, true);
		if (rc < 0)
			g_message("unmount: the last changes may not be durable: %s",
				  g_strerror(-rc));
		rc2 = super_lease_release(sb);
		if (!rc)
			rc = rc2;
	}
	follow_leave(m);
	mount_abandon(m);
	return rc;
}

void mount_abandon(struct meta *m)
{
	if (m) {
		commit_stop(m);
		follow_stop(m);
	}
	free_meta(m);
}



/* ---- rmemfs-fsck ---- */

/* without --repair or --force: refuse a pool a live client has mounted */
static int fsck_refuse_live(struct remote *r, char **err_msg)
{
	struct super *sb;
	char *who = NULL;
	bool alive = false;
	int rc;

	sb = super_new(r);
	rc = super_lease_probe(sb, 3000, &alive, &who);
	super_destroy(sb);
	if (rc < 0) {
		*err_msg = g_strdup_printf("reading the lease: %s", g_strerror(-rc));
	} else if (alive) {
		*err_msg = g_strdup_printf("pool is mounted read-write by %s; its metadata changes "
					   "under the check (unmount it, or use --force)",
					   who);
		rc = -EBUSY;
	}
	g_free(who);
	return rc;
}

static void scrub_line(void *ctx, const char *line)
{
	g_ptr_array_add(((struct fsck_report *)ctx)->lines, g_strdup(line));
}

/* a member set: do its copies agree? Each difference counts as a problem */
static int scrub_members(struct meta *m, bool repair, struct fsck_report *rep,
			 char **err_msg)
{
	struct remote_judge j;
	struct remote_scrub s = { .judge = &j, .repair = repair, .report = scrub_line,
				  .ctx = rep };
	struct remote *r = m->r;
	int rc;

	if (!remote_is_set(r))
		return 0;
	checksum_judge(m, &j);
	rc = remote_scrub(r, &s);
	if (rc < 0)
		set_err(err_msg, g_strdup_printf("comparing the members' copies: %s",
						 g_strerror(-rc)));
	rep->problems += s.differ;
	rep->repaired += s.repaired;
	return rc;
}

/* every written block against its checksum (every copy, on a set) */
static int check_checksums(struct meta *m, bool repair, struct fsck_report *rep, char **err_msg)
{
	unsigned int bad = 0, repaired = 0;
	int rc = checksum_check(m, repair, scrub_line, rep, &bad, &repaired);

	if (rc < 0)
		set_err(err_msg, g_strdup_printf("checking the data blocks' checksums: %s",
						 g_strerror(-rc)));
	rep->problems += bad;
	rep->repaired += repaired;
	return rc;
}

/*
 * After a repair: load what was written as a mount does (no salvage) and
 * check it. A repair that leaves the pool unmountable, or with problems,
 * must not report success.
 */
static int fsck_verify(struct remote *r, char **err_msg)
{
	struct mount_opts mo = { .read_only = true };
	struct fsck_report rep;
	struct meta *m = NULL;
	char *msg = NULL;
	int rc;

	rc = load_fs(r, &mo, LOAD_NO_CHECK, &m, &msg);
	if (rc < 0) {
		set_err(err_msg, g_strdup_printf("the repaired filesystem does not load: %s",
						 msg ? msg : g_strerror(-rc)));
		g_free(msg);
		return rc;
	}
	fsck_report_init(&rep);
	rc = fsck_check(m, FSCK_CHECK, &rep);
	if (!rc && rep.problems) {
		set_err(err_msg, g_strdup_printf("the repaired filesystem still has %u problems "
						 "(first: %s)",
						 rep.problems,
						 rep.first_unsafe ? rep.first_unsafe :
						 (char *)g_ptr_array_index(rep.lines, 0)));
		rc = -EUCLEAN;
	}
	fsck_report_clear(&rep);
	mount_close(m);
	return rc;
}

int mount_fsck(struct remote *r, const struct fsck_opts *o, struct fsck_report *rep,
	       char **err_msg)
{
	struct mount_opts mo = { 0 };
	struct meta *m = NULL;
	char *holder;
	int rc, rc2;

	*err_msg = NULL;
	if (!o->repair && !o->force) {
		rc = fsck_refuse_live(r, err_msg);
		if (rc < 0)
			return rc;
	}
	holder = g_strdup_printf("rmemfs-fsck on %s pid %d", g_get_host_name(), (int)getpid());
	mo.read_only = !o->repair;
	mo.force_lease = o->force;
	mo.lease_takeover_ms = o->lease_takeover_ms;
	mo.holder_name = holder;
	rc = load_fs(r, &mo, LOAD_NO_CHECK | LOAD_SALVAGE, &m, err_msg);
	g_free(holder);
	if (rc < 0)
		return rc;
	rc = fsck_check(m, o->repair ? FSCK_REPAIR : FSCK_CHECK, rep);
	if (rc < 0)
		set_err(err_msg, g_strdup_printf("repairing: %s", g_strerror(-rc)));
	/* a repair holds the lease: settle what the last client's crash left, as a mount does */
	if (!rc && o->repair) {
		bool recovered;

		rc = recover_checksums(m, &recovered);
		if (rc < 0)
			set_err(err_msg, g_strdup_printf("recovering the data checksums: %s",
							 g_strerror(-rc)));
	}
	/*
	 * The checksums first: they tell a good copy from a bad one, where the
	 * comparison of copies alone (two of them) takes the first as the truth.
	 */
	if (!rc)
		rc = check_checksums(m, o->repair, rep, err_msg);
	if (!rc)
		rc = scrub_members(m, o->repair, rep, err_msg);
	if (!rc && o->repair) {
		rc = commit_write(m, true);
		if (rc < 0)
			set_err(err_msg, g_strdup_printf("writing the repaired metadata: %s",
							 g_strerror(-rc)));
	}
	rc2 = mount_close(m);
	if (!rc && rc2 < 0) {
		rc = rc2;
		set_err(err_msg, g_strdup_printf("releasing the pool: %s", g_strerror(-rc)));
	}
	if (!rc && o->repair && rep->repaired)
		rc = fsck_verify(r, err_msg);
	return rc;
}
