// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * mount.c - meta_mount / meta_unmount / meta_abandon: superblock checks,
 * format, lease, checkpoint load, journal replay, recovery, and the clean
 * shutdown.
 *
 * Mount order (read-write):
 *   probe block 0 -> refuse newer/foreign/damaged formats (unless -o format)
 *   take the lease, start the heartbeat, probe again (it may have changed
 *   while we waited) -> format if the pool is fresh (or the format of a
 *   previous client never completed: ckpt_gen still 0)
 *   load checkpoint ckpt_gen, replay the journal of that generation
 *   free orphans (unlinked while open when the last client stopped), derive
 *   directory parents, rebuild the allocator from the extents
 *   check (fsck.c, repairing what is safe; refusing on real damage)
 *   mark unclean; after a crash, a replay or a repair write a checkpoint so
 *   the recovered state stands on its own; start the flusher.
 */
#define G_LOG_DOMAIN "rmemfs-meta"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc.h"
#include "ckpt.h"
#include "fsck.h"
#include "journal.h"
#include "meta_int.h"
#include "remote.h"
#include "super.h"
#include "units.h"

static void set_err(char **err_msg, char *msg)
{
	if (err_msg && !*err_msg)
		*err_msg = msg;
	else
		g_free(msg);
}

/* ---- replay ---- */

static int apply_rec(void *ctx, const struct journal_rec *r)
{
	struct meta *m = ctx;
	struct meta_inode *in = NULL, *dir;
	struct meta_dirent *d;

	if (r->type != LAYOUT_REC_DIRENT_ADD && r->type != LAYOUT_REC_DIRENT_DEL)
		in = meta_inode_get(m, r->ino);
	switch (r->type) {
	case LAYOUT_REC_INODE:
		if (in && (in->a.mode & S_IFMT) != (r->inode.mode & S_IFMT)) {
			meta_load_problem(m, "journal: inode %" G_GUINT64_FORMAT " changes type",
					  (guint64)r->ino);
			meta_inode_destroy(m, in);
			in = NULL;
		}
		if (in) {
			in->a = r->inode;
			meta_inode_touch_acct(m, in);
		} else {
			meta_inode_create(m, &r->inode);
		}
		return 0;
	case LAYOUT_REC_INODE_FREE:
		if (in)
			meta_inode_destroy(m, in);
		return 0;
	case LAYOUT_REC_DIRENT_ADD:
	case LAYOUT_REC_DIRENT_DEL:
		dir = meta_inode_get(m, r->dir);
		if (!dir || !dir->dir) {
			meta_load_problem(m, "journal: entry \"%s\" in missing directory %"
					  G_GUINT64_FORMAT, r->name, (guint64)r->dir);
			return 0;
		}
		if (r->type == LAYOUT_REC_DIRENT_ADD) {
			meta_dir_add(m, dir, r->name, r->nlen, r->ino, r->dtype, r->cookie);
		} else {
			d = meta_dir_lookup(dir, r->name);
			if (d)
				meta_dir_del(m, dir, d);
		}
		return 0;
	default:
		break;
	}
	if (!in) {
		meta_load_problem(m, "journal: record %u for missing inode %" G_GUINT64_FORMAT,
				  r->type, (guint64)r->ino);
		return 0;
	}
	switch (r->type) {
	case LAYOUT_REC_EXT_SET:
		if (!S_ISREG(in->a.mode) || !r->count || r->fblock + r->count < r->fblock ||
		    r->pblock >= m->g.data_blocks || r->count > m->g.data_blocks - r->pblock ||
		    r->state > LAYOUT_EXT_UNWRITTEN) {
			meta_load_problem(m, "journal: invalid extent for inode %" G_GUINT64_FORMAT,
					  (guint64)r->ino);
			return 0;
		}
		meta_ext_set(m, in, r->fblock, r->count, r->pblock, r->state);
		break;
	case LAYOUT_REC_EXT_CLEAR:
		meta_ext_clear(m, in, r->fblock, r->count, true);
		break;
	case LAYOUT_REC_XATTR_SET:
		meta_xattr_set(m, in, r->name, r->value, r->vlen);
		break;
	case LAYOUT_REC_XATTR_DEL:
		meta_xattr_del(m, in, r->name);
		break;
	case LAYOUT_REC_SYMLINK:
		if (meta_symlink_set(m, in, (const char *)r->value, r->vlen) < 0)
			meta_load_problem(m, "journal: symlink target for non-symlink %"
					  G_GUINT64_FORMAT, (guint64)r->ino);
		break;
	}
	return 0;
}

uint64_t meta_free_orphans(struct meta *m, bool log)
{
	GHashTableIter it;
	gpointer k, v;
	GPtrArray *victims = g_ptr_array_new();
	guint i;
	uint64_t n;

	g_hash_table_iter_init(&it, m->inodes);
	while (g_hash_table_iter_next(&it, &k, &v)) {
		struct meta_inode *in = v;

		if (!in->a.nlink && !in->nlookup && !in->nopen && in->a.ino != META_ROOT_INO &&
		    (!in->dir || !meta_dir_count(in)))
			g_ptr_array_add(victims, in);
	}
	for (i = 0; i < victims->len; i++) {
		struct meta_inode *in = g_ptr_array_index(victims, i);

		if (log)
			g_debug("freeing orphan inode %" G_GUINT64_FORMAT, (guint64)in->a.ino);
		meta_inode_destroy(m, in);
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
		set_err(err_msg, g_strdup_printf("pool is too small for a filesystem (at least %llu "
						 "MiB)", LAYOUT_MIN_POOL >> 20));
		return rc;
	}
	if (rc < 0) {
		set_err(err_msg, g_strdup_printf("formatting the pool: %s", g_strerror(-rc)));
		return rc;
	}
	m = meta_new_empty(r, sb, super_geom(sb));
	journal_new(m->g.journal_off, m->g.journal_len, m->g.fs_id, &m->j);
	memset(&root, 0, sizeof(root));
	root.ino = META_ROOT_INO;
	root.mode = S_IFDIR | 0755;
	root.nlink = 2;
	root.uid = (uint32_t)getuid();
	root.gid = (uint32_t)getgid();
	meta_now(&root.mtime);
	root.atime = root.ctime = root.mtime;
	meta_inode_create(m, &root);
	rc = meta_build_alloc(m, NULL);
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
	meta_free(m);
	return rc;
}

/* ---- load ---- */

static int classify_err(enum layout_sb_kind kind, uint32_t version, const char *why,
			const struct meta_mount_opts *opts, char **err_msg)
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

static int load_existing(struct meta *m, unsigned int flags, char **err_msg)
{
	struct journal_replay_info info;
	uint64_t gen, first_seq = 1;
	char *why = NULL;
	bool clean = false;
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
	rc = ckpt_load(m, gen, &first_seq, &why);
	if (rc == -EUCLEAN && (flags & META_LOAD_FALLBACK) && gen > 1) {
		struct meta *fresh = meta_new_empty(m->r, m->sb, &m->g);
		char *why2 = NULL;

		/* start over on an empty meta: the damaged load left partial state */
		g_hash_table_remove_all(m->inodes);
		m->ckpt_bytes = fresh->ckpt_bytes;
		m->next_ino = fresh->next_ino;
		m->nfresh = 0;
		meta_free(fresh);
		if (ckpt_load(m, gen - 1, &first_seq, &why2) == 0) {
			meta_load_problem(m, "%s; using the previous checkpoint %" G_GUINT64_FORMAT
					  " (changes made after it are lost)",
					  why, (guint64)(gen - 1));
			gen--;
			rc = 0;
		}
		g_free(why2);
	}
	if (rc < 0) {
		set_err(err_msg, g_strdup_printf("%s; run rmemfs-fsck --repair",
						 why ? why : g_strerror(-rc)));
		g_free(why);
		return rc;
	}
	g_free(why);
	m->load.ckpt_gen = gen;
	if (super_read_clean(m->sb, &clean) == 0)
		m->load.was_clean = clean;
	rc = journal_replay(m->j, m->r, gen, first_seq, apply_rec, m, &info);
	if (rc < 0) {
		set_err(err_msg, g_strdup_printf("journal replay: %s (%s)", g_strerror(-rc),
						 info.stop_reason ? info.stop_reason : "?"));
		g_free(info.stop_reason);
		return rc;
	}
	m->load.replayed = info.txns;
	m->load.replay_bytes = info.bytes;
	m->load.torn_tail = info.torn;
	if (info.txns || !clean)
		g_message("%s: replayed %" G_GUINT64_FORMAT " journal transactions (%"
			  G_GUINT64_FORMAT " bytes); stopped at: %s",
			  clean ? "clean filesystem" : "recovering after an unclean shutdown",
			  (guint64)info.txns, (guint64)info.bytes,
			  info.stop_reason ? info.stop_reason : "?");
	g_free(info.stop_reason);
	journal_reset(m->j, gen, info.bytes, info.last_seq + 1);
	m->durable_gen = gen;
	m->durable_seq = info.last_seq;
	return 0;
}

int meta_load(struct remote *r, const struct meta_mount_opts *opts, unsigned int flags,
	      struct meta **out, char **err_msg)
{
	struct super *sb = NULL;
	struct meta *m = NULL;
	enum layout_sb_kind kind;
	uint32_t version;
	const char *why;
	char *holder = NULL;
	bool rw = !opts->read_only, formatted = false;
	enum super_lease_how how = SUPER_LEASE_WAIT;
	uint64_t gen = 0, dups = 0, orphans;
	int rc;

	*out = NULL;
	if (err_msg)
		*err_msg = NULL;
	super_new(r, &sb);
	rc = super_probe(sb, &kind, &version, &why);
	if (rc < 0) {
		set_err(err_msg, g_strdup_printf("reading the superblock: %s", g_strerror(-rc)));
		goto err_super;
	}
	rc = classify_err(kind, version, why, opts, err_msg);
	if (rc < 0)
		goto err_super;
	if (kind == LAYOUT_SB_RMEMFS && opts->format)
		g_message("the pool already holds an rmemfs filesystem: mounting it, not "
			  "formatting it");

	if (rw) {
		holder = opts->holder_name ? g_strdup(opts->holder_name) :
					     g_strdup_printf("%s pid %d", g_get_host_name(),
							     (int)getpid());
		/* foreign bytes in the lease word are no lease: -o format takes the word */
		if (opts->force_lease)
			how = SUPER_LEASE_FORCE;
		else if (kind == LAYOUT_SB_FOREIGN)
			how = SUPER_LEASE_FOREIGN;
		rc = super_lease_acquire(sb, holder, opts->lease_takeover_ms, how, err_msg);
		if (rc < 0)
			goto err_super;
		rc = super_heartbeat_start(sb);
		if (rc < 0) {
			set_err(err_msg, g_strdup("cannot start the lease heartbeat"));
			goto err_lease;
		}
		/* the pool may have changed while we waited for the lease */
		rc = super_probe(sb, &kind, &version, &why);
		if (rc < 0) {
			set_err(err_msg, g_strdup_printf("reading the superblock: %s",
							 g_strerror(-rc)));
			goto err_lease;
		}
		rc = classify_err(kind, version, why, opts, err_msg);
		if (rc < 0)
			goto err_lease;
		if (kind == LAYOUT_SB_RMEMFS) {
			rc = super_read_ckpt_gen(sb, &gen);
			if (rc < 0) {
				set_err(err_msg, g_strdup_printf("reading the superblock: %s",
								 g_strerror(-rc)));
				goto err_lease;
			}
			if (gen == 0)
				g_message("the format of this pool never completed: formatting "
					  "it again");
		}
		if (kind != LAYOUT_SB_RMEMFS || gen == 0) {
			rc = format_pool(&m, r, sb, err_msg);
			if (rc < 0)
				goto err_lease;
			formatted = true;
		}
	}
	if (!formatted) {
		m = meta_new_empty(r, sb, super_geom(sb));
		m->read_only = !rw;
		journal_new(m->g.journal_off, m->g.journal_len, m->g.fs_id, &m->j);
		rc = load_existing(m, flags, err_msg);
		if (rc < 0)
			goto err_meta;
		meta_derive_parents(m);
		orphans = meta_free_orphans(m, true);
		if (orphans)
			g_message("freed %" G_GUINT64_FORMAT " orphaned inodes (unlinked while open)",
				  (guint64)orphans);
		m->load.orphans = orphans;
		rc = meta_build_alloc(m, &dups);
		if (rc < 0 && rc != -ERANGE) {
			set_err(err_msg, g_strdup_printf("building the allocator: %s",
							 g_strerror(-rc)));
			goto err_meta;
		}
		rc = 0;
		if (!(flags & META_LOAD_NO_CHECK)) {
			struct fsck_report rep;

			fsck_report_init(&rep);
			fsck_check(m, FSCK_MOUNT, &rep);
			if (rep.unsafe) {
				set_err(err_msg,
					g_strdup_printf("the filesystem has %u errors that need "
							"rmemfs-fsck --repair (first: %s)",
							rep.unsafe, rep.first_unsafe));
				fsck_report_clear(&rep);
				rc = -EUCLEAN;
				goto err_meta;
			}
			if (rep.repaired)
				g_message("repaired %u problems while mounting", rep.repaired);
			m->load.repaired = rep.repaired;
			fsck_report_clear(&rep);
		}
	}
	if (rw) {
		rc = super_write_clean(sb, false);
		if (!rc && !formatted && !(flags & META_LOAD_NO_CHECK) &&
		    (m->load.replayed || !m->load.was_clean || m->load.orphans ||
		     m->load.repaired || m->load.problems->len))
			rc = meta_commit(m, true);
		if (rc < 0) {
			set_err(err_msg, g_strdup_printf("writing to the pool: %s", g_strerror(-rc)));
			goto err_meta;
		}
		rc = meta_flusher_start(m);
		if (rc < 0) {
			set_err(err_msg, g_strdup("cannot start the journal flusher"));
			goto err_meta;
		}
	}
	g_free(holder);
	*out = m;
	return 0;

err_meta:
	m->sb = NULL;
	meta_free(m);
err_lease:
	if (rw)
		super_lease_release(sb);
err_super:
	super_destroy(sb);
	g_free(holder);
	return rc;
}

int meta_mount(struct remote *r, const struct meta_mount_opts *opts, struct meta **out,
	       char **err_msg)
{
	return meta_load(r, opts, 0, out, err_msg);
}

int meta_unmount(struct meta *m)
{
	struct super *sb;
	int rc = 0, rc2;

	if (!m)
		return 0;
	sb = m->sb;
	meta_flusher_stop(m);
	if (!m->read_only) {
		bool need;

		pthread_mutex_lock(&m->lock);
		need = meta_free_orphans(m, false) || journal_pending_bytes(m->j) ||
		       journal_tail(m->j) || m->need_ckpt;
		pthread_mutex_unlock(&m->lock);
		if (need)
			rc = meta_commit(m, true);
		if (!rc)
			rc = super_write_clean(sb, true);
		if (rc < 0)
			g_message("unmount: the last changes may not be durable: %s",
				  g_strerror(-rc));
		rc2 = super_lease_release(sb);
		if (!rc)
			rc = rc2;
	}
	super_destroy(sb);
	m->sb = NULL;
	meta_free(m);
	return rc;
}

void meta_abandon(struct meta *m)
{
	if (!m)
		return;
	meta_flusher_stop(m);
	super_destroy(m->sb);
	m->sb = NULL;
	meta_free(m);
}
