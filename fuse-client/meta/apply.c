// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * apply.c - one journal record applied to the metadata in RAM: replay at
 * mount (mount.c) and a reader following the writer (follow.c). Records
 * are states, so applying one twice gives the same result; one that parses
 * but cannot be used is dropped and reported as a load problem.
 */
#define G_LOG_DOMAIN "rmemfs-meta"

#include <endian.h>
#include <string.h>
#include <sys/stat.h>

#include "csum.h"
#include "inode.h"
#include "journal.h"
#include "meta_int.h"

/*
 * CSUM, CSUM_AHEAD and HOT records (formats 2 and 3): the table, its
 * pending blocks and the hot set (csum.h). An untrusted CSUM (a malformed
 * transaction's, journal.c) clears its blocks' CRCs instead of setting them.
 */
static int apply_csum(struct meta *m, const struct journal_rec *r)
{
	uint64_t nregions = (m->g.data_blocks + LAYOUT_CSUM_REGION_BLOCKS - 1) /
			    LAYOUT_CSUM_REGION_BLOCKS;
	uint64_t i;
	__le32 w;

	if (r->type == LAYOUT_REC_HOT) {
		if (r->pblock >= nregions || r->state > 1) {
			inode_load_problem(m, "journal: invalid hot region %" G_GUINT64_FORMAT
					   " (record dropped)", (guint64)r->pblock);
			return 0;
		}
		csum_hot_set(m->csum, r->pblock, r->state, 0, &m->ckpt_bytes);
		return 0;
	}
	if (!r->count || r->pblock >= m->g.data_blocks ||
	    r->count > m->g.data_blocks - r->pblock || r->vlen != 4 * r->count) {
		inode_load_problem(m, "journal: checksums of invalid blocks %" G_GUINT64_FORMAT
				   "+%" G_GUINT64_FORMAT " (record dropped)",
				   (guint64)r->pblock, (guint64)r->count);
		return 0;
	}
	if (r->untrusted) {
		csum_clear(m->csum, r->pblock, r->count);
		return 0;
	}
	for (i = 0; i < r->count; i++) {
		memcpy(&w, r->value + 4 * i, 4);
		if (r->type == LAYOUT_REC_CSUM_AHEAD)
			csum_set_ahead(m->csum, r->pblock + i, le32toh(w));
		else
			csum_set(m->csum, r->pblock + i, le32toh(w));
	}
	return 0;
}

/*
 * EXT_SET: the file blocks take the pool blocks, freeing what they mapped -
 * which for an UNWRITTEN extent becoming WRITTEN (fallocate, then write)
 * or a written extent logged again (a commit after an in-place write) are
 * the same pool blocks, whose CRC the CSUM or CSUM_AHEAD records before this
 * one set: that CRC stays, pending or not (the live writer's commit_range
 * does not free them at all).
 */
static void ext_set_keep_crcs(struct meta *m, struct meta_inode *in, const struct journal_rec *r)
{
	uint32_t *crc = NULL, *old = NULL;
	bool *have = NULL, *pend = NULL, *had = NULL;
	uint64_t i;

	if (r->state == LAYOUT_EXT_WRITTEN) {
		crc = g_new(uint32_t, r->count);
		old = g_new(uint32_t, r->count);
		have = g_new(bool, r->count);
		pend = g_new(bool, r->count);
		had = g_new(bool, r->count);
		csum_get_run(m->csum, r->pblock, r->count, crc, have);
		for (i = 0; i < r->count; i++)
			pend[i] = have[i] && csum_pending(m->csum, r->pblock + i, &old[i], &had[i]);
	}
	inode_ext_set(m, in, r->fblock, r->count, r->pblock, r->state);
	for (i = 0; crc && i < r->count; i++) {
		if (!have[i])
			continue;
		if (pend[i] && had[i])
			csum_set(m->csum, r->pblock + i, old[i]);
		if (pend[i])
			csum_set_ahead(m->csum, r->pblock + i, crc[i]);
		else
			csum_set(m->csum, r->pblock + i, crc[i]);
	}
	g_free(crc);
	g_free(old);
	g_free(have);
	g_free(pend);
	g_free(had);
}

int meta_apply_rec(void *ctx, const struct journal_rec *r)
{
	struct meta *m = ctx;
	struct meta_inode *in = NULL, *dir;
	struct meta_dirent *d;

	if (journal_rec_is_csum(r->type))
		return apply_csum(m, r);
	if (r->type != LAYOUT_REC_DIRENT_ADD && r->type != LAYOUT_REC_DIRENT_DEL)
		in = inode_get(m, r->ino);
	switch (r->type) {
	case LAYOUT_REC_INODE:
		if (!layout_mode_ok(r->inode.mode)) {
			inode_load_problem(m, "journal: inode %" G_GUINT64_FORMAT ": invalid mode "
					   "0%o (record dropped)", (guint64)r->ino, r->inode.mode);
			return 0;
		}
		if (in && (in->a.mode & S_IFMT) != (r->inode.mode & S_IFMT)) {
			inode_load_problem(m, "journal: inode %" G_GUINT64_FORMAT " changes type",
					   (guint64)r->ino);
			inode_destroy(m, in);
			in = NULL;
		}
		if (in) {
			inode_attr_set(in, &r->inode);
			inode_touch_acct(m, in);
		} else {
			inode_create(m, &r->inode);
		}
		return 0;
	case LAYOUT_REC_INODE_FREE:
		if (in)
			inode_destroy(m, in);
		return 0;
	case LAYOUT_REC_DIRENT_ADD:
	case LAYOUT_REC_DIRENT_DEL:
		dir = inode_get(m, r->dir);
		if (!dir || !dir->dir) {
			inode_load_problem(m, "journal: entry \"%s\" in missing directory %"
					   G_GUINT64_FORMAT, r->name, (guint64)r->dir);
			return 0;
		}
		if (r->type == LAYOUT_REC_DIRENT_ADD) {
			if (!layout_name_ok(r->name, r->nlen) || r->ino >= LAYOUT_INO_LIMIT) {
				inode_load_problem(m, "journal: directory %" G_GUINT64_FORMAT
						   ": invalid entry for inode %" G_GUINT64_FORMAT
						   " (record dropped)",
						   (guint64)r->dir, (guint64)r->ino);
				return 0;
			}
			inode_dir_add(m, dir, r->name, r->nlen, r->ino, r->dtype, r->cookie);
		} else {
			d = inode_dir_lookup(dir, r->name);
			if (d)
				inode_dir_del(m, dir, d);
		}
		return 0;
	default:
		break;
	}
	if (!in) {
		inode_load_problem(m, "journal: record %u for missing inode %" G_GUINT64_FORMAT,
				   r->type, (guint64)r->ino);
		return 0;
	}
	switch (r->type) {
	case LAYOUT_REC_EXT_SET:
		if (!S_ISREG(in->a.mode) || !r->count || r->fblock + r->count < r->fblock ||
		    r->pblock >= m->g.data_blocks || r->count > m->g.data_blocks - r->pblock ||
		    r->state > LAYOUT_EXT_UNWRITTEN) {
			inode_load_problem(m, "journal: invalid extent for inode %"
					   G_GUINT64_FORMAT, (guint64)r->ino);
			return 0;
		}
		ext_set_keep_crcs(m, in, r);
		break;
	case LAYOUT_REC_EXT_CLEAR:
		inode_ext_clear(m, in, r->fblock, r->count, true);
		break;
	case LAYOUT_REC_XATTR_SET:
		if (!layout_xattr_ok(r->name, r->nlen, r->vlen)) {
			inode_load_problem(m, "journal: inode %" G_GUINT64_FORMAT ": invalid xattr "
					   "(record dropped)", (guint64)r->ino);
			return 0;
		}
		inode_xattr_set(m, in, r->name, r->value, r->vlen);
		break;
	case LAYOUT_REC_XATTR_DEL:
		inode_xattr_del(m, in, r->name);
		break;
	case LAYOUT_REC_SYMLINK:
		if (memchr(r->value, 0, r->vlen)) {
			inode_load_problem(m, "journal: symlink %" G_GUINT64_FORMAT ": its target "
					   "holds a NUL byte (record dropped)", (guint64)r->ino);
			return 0;
		}
		if (inode_symlink_set(m, in, (const char *)r->value, r->vlen) < 0)
			inode_load_problem(m, "journal: symlink target for non-symlink %"
					   G_GUINT64_FORMAT, (guint64)r->ino);
		break;
	}
	return 0;
}
