// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * ckpt.c - serialise the metadata into a checkpoint slot and load it back
 * (format in ckpt.h and inode.c). The byte count ckpt_serialize produces is
 * checked against m->ckpt_bytes, the running total the primitives keep:
 * that total is what lets meta refuse growth before a checkpoint could
 * overflow its slot, so a mismatch is a bug worth a warning.
 */
#define G_LOG_DOMAIN "rmemfs-ckpt"

#include "ckpt.h"

#include <dirent.h>
#include <endian.h>
#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "alloc.h"
#include "meta_int.h"
#include "remote.h"

static void put_le32(GByteArray *b, uint32_t v)
{
	__le32 w = htole32(v);

	layout_put_bytes(b, &w, 4);
}

static uint32_t get_le32(struct layout_rd *rd)
{
	const uint8_t *p = layout_get_bytes(rd, 4);
	__le32 w;

	if (!p)
		return 0;
	memcpy(&w, p, 4);
	return le32toh(w);
}

struct ser_ctx {
	GByteArray *b;
	struct alloc *bits;
	uint32_t n;
};

static bool count_ext(struct meta_ext *e, void *ctx)
{
	struct ser_ctx *s = ctx;

	if (e->state != META_EXT_FRESH)
		s->n++;
	return true;
}

static bool put_ext(struct meta_ext *e, void *ctx)
{
	struct ser_ctx *s = ctx;

	if (e->state == META_EXT_FRESH)
		return true;
	layout_put_ext(s->b, e->fblock, e->count, e->pblock, e->state);
	alloc_mark(s->bits, e->pblock, e->count);
	return true;
}

static gint dirent_cookie_cmp(gconstpointer a, gconstpointer b)
{
	const struct meta_dirent *x = *(struct meta_dirent *const *)a;
	const struct meta_dirent *y = *(struct meta_dirent *const *)b;

	return x->cookie < y->cookie ? -1 : x->cookie > y->cookie;
}

/*
 * The entries of a directory, in cookie order, exactly as many as the count
 * written before them (inode_dir_count). The cookie index is walked with
 * its invariants checked (cookies ascend, no more entries than the name
 * set): should it ever disagree with the name set, the entries are written
 * from the name set instead, sorted here, and the bug is reported - a
 * checkpoint whose count and entries disagree cannot be loaded.
 */
static void put_entries(struct ser_ctx *s, struct meta_inode *in)
{
	guint want = inode_dir_count(in), n = 0, start = s->b->len;
	struct meta_dirent *d = inode_dir_next(in, 0);
	uint64_t after = 0;
	GHashTableIter it;
	gpointer k, v;
	GPtrArray *all;

	for (; d && n < want && d->cookie > after; d = inode_dir_next(in, after)) {
		layout_put_dirent(s->b, d->ino, d->cookie, d->type, d->name, d->nlen);
		after = d->cookie;
		n++;
	}
	if (n == want && !d)
		return;
	g_warning("directory %" G_GUINT64_FORMAT ": its cookie index walks %u entries of %u%s; "
		  "writing them from the name set", (guint64)in->a.ino, n, want,
		  d ? " and then goes wrong" : "");
	g_byte_array_set_size(s->b, start);
	all = g_ptr_array_sized_new(want);
	g_hash_table_iter_init(&it, in->dir->by_name);
	while (g_hash_table_iter_next(&it, &k, &v))
		g_ptr_array_add(all, k);
	g_ptr_array_sort(all, dirent_cookie_cmp);
	for (n = 0; n < all->len; n++) {
		d = g_ptr_array_index(all, n);
		layout_put_dirent(s->b, d->ino, d->cookie, d->type, d->name, d->nlen);
	}
	g_ptr_array_free(all, TRUE);
}

static void put_inode(struct ser_ctx *s, struct meta_inode *in)
{
	guint i;

	layout_put_inode(s->b, &in->a);
	put_le32(s->b, in->xattrs ? in->xattrs->len : 0);
	if (S_ISLNK(in->a.mode)) {
		size_t len = in->symlink ? strlen(in->symlink) : 0;

		layout_put_uv(s->b, len);
		layout_put_bytes(s->b, in->symlink, len);
	}
	if (S_ISREG(in->a.mode)) {
		s->n = 0;
		inode_ext_foreach(in, count_ext, s);
		put_le32(s->b, s->n);
	}
	if (S_ISDIR(in->a.mode))
		put_le32(s->b, inode_dir_count(in));
	for (i = 0; in->xattrs && i < in->xattrs->len; i++) {
		struct meta_xattr *x = g_ptr_array_index(in->xattrs, i);
		size_t nlen = strlen(x->name);

		layout_put_uv(s->b, nlen);
		layout_put_bytes(s->b, x->name, nlen);
		layout_put_uv(s->b, x->len);
		layout_put_bytes(s->b, x->value, x->len);
	}
	if (S_ISREG(in->a.mode))
		inode_ext_foreach(in, put_ext, s);
	if (S_ISDIR(in->a.mode))
		put_entries(s, in);
}

int ckpt_serialize(struct meta *m, uint64_t gen, uint64_t first_seq, GByteArray **out)
{
	struct layout_ckpt_hdr h;
	struct ser_ctx s = { 0 };
	struct meta_inode **arr;
	uint64_t bm_bytes = (m->g.data_blocks + 7) / 8;
	guint n, i;
	size_t at;
	int rc;

	*out = NULL;
	if (m->ckpt_bytes > m->g.slot_len) {
		g_warning("checkpoint needs %" G_GUINT64_FORMAT " bytes, slot holds %"
			  G_GUINT64_FORMAT, (guint64)m->ckpt_bytes, (guint64)m->g.slot_len);
		return -ENOSPC;
	}
	rc = alloc_new(m->g.data_blocks, &s.bits);
	if (rc < 0)
		return rc;
	s.b = g_byte_array_sized_new((guint)m->ckpt_bytes);
	g_byte_array_set_size(s.b, LAYOUT_CKPT_HDR_SIZE);
	arr = inode_table_sorted(m, &n);
	for (i = 0; i < n; i++)
		put_inode(&s, arr[i]);
	g_free(arr);
	at = s.b->len;
	g_byte_array_set_size(s.b, (guint)(at + bm_bytes));
	alloc_export(s.bits, s.b->data + at, bm_bytes);
	alloc_destroy(s.bits);

	if (s.b->len != m->ckpt_bytes && !m->nfresh)
		g_warning("checkpoint is %u bytes but the running count says %" G_GUINT64_FORMAT,
			  s.b->len, (guint64)m->ckpt_bytes);
	if (s.b->len > m->g.slot_len) {
		g_byte_array_unref(s.b);
		return -ENOSPC;
	}
	memset(&h, 0, sizeof(h));
	memcpy(h.magic, LAYOUT_CKPT_MAGIC, 8);
	h.version = htole32(LAYOUT_VERSION);
	h.fs_id = htole64(m->g.fs_id);
	h.gen = htole64(gen);
	h.first_seq = htole64(first_seq);
	h.payload_len = htole64(s.b->len - LAYOUT_CKPT_HDR_SIZE);
	h.payload_crc = htole32(layout_crc(s.b->data + LAYOUT_CKPT_HDR_SIZE,
					   s.b->len - LAYOUT_CKPT_HDR_SIZE));
	h.next_ino = htole64(m->next_ino);
	h.ninodes = htole64(n);
	h.data_blocks = htole64(m->g.data_blocks);
	h.hdr_crc = htole32(layout_crc(&h, sizeof(h)));
	memcpy(s.b->data, &h, sizeof(h));
	*out = s.b;
	return 0;
}

int ckpt_write(struct meta *m, uint64_t gen, const GByteArray *buf)
{
	int rc = remote_write(m->r, m->g.slot_off[gen & 1], buf->data, buf->len);

	if (rc < 0)
		g_message("writing checkpoint %" G_GUINT64_FORMAT ": %s", (guint64)gen,
			  g_strerror(-rc));
	return rc;
}

/* ---- loading ---- */

static bool name_ok(const char *name, size_t nlen)
{
	if (!nlen || memchr(name, '/', nlen) || memchr(name, 0, nlen))
		return false;
	return !(nlen == 1 && name[0] == '.') && !(nlen == 2 && name[0] == '.' && name[1] == '.');
}

static bool type_ok(uint32_t mode)
{
	switch (mode & S_IFMT) {
	case S_IFREG:
	case S_IFDIR:
	case S_IFLNK:
	case S_IFCHR:
	case S_IFBLK:
	case S_IFIFO:
	case S_IFSOCK:
		return true;
	}
	return false;
}

static void load_symlink(struct meta *m, struct layout_rd *rd, struct meta_inode *in)
{
	size_t len = (size_t)layout_get_uv(rd);
	const uint8_t *p;

	if (len > layout_rd_left(rd)) {
		rd->err = -EBADMSG;
		return;
	}
	p = layout_get_bytes(rd, len);
	if (p)
		inode_symlink_set(m, in, (const char *)p, len);
}

static void load_xattrs(struct meta *m, struct layout_rd *rd, struct meta_inode *in, uint32_t n)
{
	uint32_t i;

	for (i = 0; i < n && !rd->err; i++) {
		size_t nlen = (size_t)layout_get_uv(rd), vlen;
		const uint8_t *np, *vp;
		char *name;

		if (nlen > 255 || nlen > layout_rd_left(rd)) {
			rd->err = -EBADMSG;
			return;
		}
		np = layout_get_bytes(rd, nlen);
		vlen = (size_t)layout_get_uv(rd);
		if (vlen > layout_rd_left(rd)) {
			rd->err = -EBADMSG;
			return;
		}
		vp = layout_get_bytes(rd, vlen);
		if (rd->err)
			return;
		name = g_strndup((const char *)np, nlen);
		inode_xattr_set(m, in, name, vp, vlen);
		g_free(name);
	}
}

static void load_extents(struct meta *m, struct layout_rd *rd, struct meta_inode *in, uint32_t n)
{
	uint64_t prev_end = 0, ino = in->a.ino;
	uint32_t i;

	for (i = 0; i < n && !rd->err; i++) {
		uint64_t fb = layout_get_uv(rd), cnt = layout_get_uv(rd);
		uint64_t pb = layout_get_uv(rd);
		uint8_t st = layout_get_u8(rd);

		if (rd->err)
			return;
		if (!cnt || fb + cnt < fb || pb >= m->g.data_blocks ||
		    cnt > m->g.data_blocks - pb || st > LAYOUT_EXT_UNWRITTEN) {
			inode_load_problem(m, "inode %" G_GUINT64_FORMAT ": invalid extent %"
					   G_GUINT64_FORMAT "+%" G_GUINT64_FORMAT " -> block %"
					   G_GUINT64_FORMAT " (dropped)",
					   (guint64)ino, (guint64)fb, (guint64)cnt, (guint64)pb);
			continue;
		}
		if (fb < prev_end) {
			inode_load_problem(m, "inode %" G_GUINT64_FORMAT ": overlapping extent at "
					   "file block %" G_GUINT64_FORMAT " (dropped)",
					   (guint64)ino, (guint64)fb);
			continue;
		}
		prev_end = fb + cnt;
		inode_ext_set(m, in, fb, cnt, pb, st);
	}
}

static void load_entries(struct meta *m, struct layout_rd *rd, struct meta_inode *in, uint32_t n)
{
	uint32_t i;

	for (i = 0; i < n && !rd->err; i++) {
		uint64_t ino = layout_get_uv(rd), cookie = layout_get_uv(rd);
		uint8_t type = layout_get_u8(rd), nlen = layout_get_u8(rd);
		const uint8_t *np = layout_get_bytes(rd, nlen);
		char *name;

		if (rd->err)
			return;
		name = g_strndup((const char *)np, nlen);
		if (!name_ok((const char *)np, nlen) || !ino)
			inode_load_problem(m, "directory %" G_GUINT64_FORMAT ": invalid entry "
					   "\"%s\" (dropped)", (guint64)in->a.ino, name);
		else if (inode_dir_lookup(in, name))
			inode_load_problem(m, "directory %" G_GUINT64_FORMAT ": duplicate entry "
					   "\"%s\" (dropped)", (guint64)in->a.ino, name);
		else
			inode_dir_add(m, in, name, nlen, ino, type, cookie);
		g_free(name);
	}
}

static int load_inode(struct meta *m, struct layout_rd *rd)
{
	struct layout_inode a;
	struct meta_inode *in;
	uint32_t nx, nsub = 0;

	if (layout_get_inode(rd, &a))
		return rd->err;
	if (!type_ok(a.mode)) {
		inode_load_problem(m, "inode %" G_GUINT64_FORMAT ": invalid type 0%o",
				   (guint64)a.ino, a.mode & S_IFMT);
		a.mode = S_IFREG | (a.mode & 07777);
	}
	nx = get_le32(rd);
	in = inode_create(m, &a);
	if (!in) {
		inode_load_problem(m, "inode %" G_GUINT64_FORMAT " stored twice", (guint64)a.ino);
		return -EUCLEAN;
	}
	if (S_ISLNK(a.mode))
		load_symlink(m, rd, in);
	if (rd->err)
		return rd->err;
	if (S_ISREG(a.mode) || S_ISDIR(a.mode))
		nsub = get_le32(rd);
	load_xattrs(m, rd, in, nx);
	if (S_ISREG(a.mode))
		load_extents(m, rd, in, nsub);
	if (S_ISDIR(a.mode))
		load_entries(m, rd, in, nsub);
	return rd->err;
}

static bool mark_ext(struct meta_ext *e, void *ctx)
{
	alloc_mark(ctx, e->pblock, e->count);
	return true;
}

/* compare the stored bitmap with the one the extents give */
static void check_bitmap(struct meta *m, const uint8_t *stored)
{
	struct alloc *a;
	GHashTableIter it;
	gpointer k, v;
	uint64_t nbytes = (m->g.data_blocks + 7) / 8, i;
	uint8_t *mine;

	if (alloc_new(m->g.data_blocks, &a) < 0)
		return;
	g_hash_table_iter_init(&it, m->inodes);
	while (g_hash_table_iter_next(&it, &k, &v))
		inode_ext_foreach(v, mark_ext, a);
	mine = g_malloc(nbytes);
	alloc_export(a, mine, nbytes);
	alloc_destroy(a);
	for (i = 0; i < nbytes; i++) {
		uint8_t diff = mine[i] ^ stored[i];

		if (!diff)
			continue;
		m->load.bitmap_leaked += (uint64_t)__builtin_popcount(diff & stored[i]);
		m->load.bitmap_missing += (uint64_t)__builtin_popcount(diff & mine[i]);
	}
	g_free(mine);
}

int ckpt_load(struct meta *m, uint64_t gen, uint64_t *first_seq, char **why)
{
	struct layout_ckpt_hdr h;
	struct layout_rd rd;
	uint64_t plen, ninodes, i, bm_bytes;
	uint8_t *payload = NULL;
	uint32_t crc;
	const uint8_t *bm;
	int rc;

	*why = NULL;
	rc = remote_read(m->r, m->g.slot_off[gen & 1], &h, sizeof(h));
	if (rc < 0) {
		*why = g_strdup_printf("reading checkpoint %" G_GUINT64_FORMAT ": %s",
				       (guint64)gen, g_strerror(-rc));
		return rc;
	}
	crc = le32toh(h.hdr_crc);
	h.hdr_crc = 0;
	if (memcmp(h.magic, LAYOUT_CKPT_MAGIC, 8) || layout_crc(&h, sizeof(h)) != crc ||
	    le32toh(h.version) != LAYOUT_VERSION || le64toh(h.fs_id) != m->g.fs_id ||
	    le64toh(h.gen) != gen || le64toh(h.data_blocks) != m->g.data_blocks) {
		*why = g_strdup_printf("checkpoint %" G_GUINT64_FORMAT
				       " (slot %u): header missing or damaged",
				       (guint64)gen, (unsigned int)(gen & 1));
		return -EUCLEAN;
	}
	plen = le64toh(h.payload_len);
	bm_bytes = (m->g.data_blocks + 7) / 8;
	if (plen > m->g.slot_len - LAYOUT_CKPT_HDR_SIZE || plen < bm_bytes) {
		*why = g_strdup_printf("checkpoint %" G_GUINT64_FORMAT ": bad length",
				       (guint64)gen);
		return -EUCLEAN;
	}
	payload = g_malloc(plen ? plen : 1);
	rc = remote_read(m->r, m->g.slot_off[gen & 1] + LAYOUT_CKPT_HDR_SIZE, payload, plen);
	if (rc < 0) {
		*why = g_strdup_printf("reading checkpoint %" G_GUINT64_FORMAT ": %s",
				       (guint64)gen, g_strerror(-rc));
		goto out;
	}
	if (layout_crc(payload, plen) != le32toh(h.payload_crc)) {
		*why = g_strdup_printf("checkpoint %" G_GUINT64_FORMAT ": checksum mismatch",
				       (guint64)gen);
		rc = -EUCLEAN;
		goto out;
	}
	ninodes = le64toh(h.ninodes);
	layout_rd_init(&rd, payload, plen - bm_bytes);
	for (i = 0; i < ninodes; i++) {
		rc = load_inode(m, &rd);
		if (rc < 0)
			break;
	}
	if (rc < 0 || rd.err || layout_rd_left(&rd)) {
		*why = g_strdup_printf("checkpoint %" G_GUINT64_FORMAT
				       ": malformed at inode %" G_GUINT64_FORMAT,
				       (guint64)gen, (guint64)i);
		rc = -EUCLEAN;
		goto out;
	}
	bm = payload + (plen - bm_bytes);
	check_bitmap(m, bm);
	if (le64toh(h.next_ino) > m->next_ino)
		m->next_ino = le64toh(h.next_ino);
	*first_seq = le64toh(h.first_seq);
	rc = 0;
out:
	g_free(payload);
	return rc;
}
