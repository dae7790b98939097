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
#include <stdarg.h>
#include <string.h>
#include <sys/stat.h>

#include "alloc.h"
#include "csum.h"
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
	struct meta *m;
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
	GPtrArray *xattrs = inode_xattrs(s->m, in);
	struct layout_inode a;
	guint i;

	inode_attr_get(in, &a);
	layout_put_inode(s->b, &a);
	put_le32(s->b, xattrs ? xattrs->len : 0);
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
	for (i = 0; xattrs && i < xattrs->len; i++) {
		struct meta_xattr *x = g_ptr_array_index(xattrs, i);
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

static uint64_t bitmap_count(const uint8_t *bm, uint64_t bytes)
{
	uint64_t i, n = 0;

	for (i = 0; i < bytes; i++)
		n += (uint64_t)__builtin_popcount(bm[i]);
	return n;
}

int ckpt_serialize(struct meta *m, uint64_t gen, uint64_t first_seq, GByteArray **out)
{
	struct layout_ckpt_hdr h;
	struct ser_ctx s = { .m = m };
	struct meta_inode **arr;
	uint64_t bm_bytes = (m->g.data_blocks + 7) / 8, expect = m->ckpt_bytes;
	bool tail = m->g.version >= LAYOUT_VERSION_CSUM;
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
	/* exactly the running count's bytes (a 3 MiB checkpoint cost 4 MiB when rounded) */
	s.b = layout_bytes_new((guint)m->ckpt_bytes);
	g_byte_array_set_size(s.b, LAYOUT_CKPT_HDR_SIZE);
	arr = inode_table_sorted(m, &n);
	for (i = 0; i < n; i++)
		put_inode(&s, arr[i]);
	g_free(arr);
	at = s.b->len;
	g_byte_array_set_size(s.b, (guint)(at + bm_bytes));
	alloc_export(s.bits, s.b->data + at, bm_bytes);
	alloc_destroy(s.bits);
	/*
	 * Format 2: the checksums of the blocks in use and the hot regions
	 * (csum.h), format 3 also the pending blocks. The running count has
	 * the first two for m->blocks_mapped blocks (a block two files use, a
	 * damaged filesystem until fsck repairs it, is in the bitmap once);
	 * the pending blocks' bytes are counted as they are written.
	 */
	expect -= csum_tail_len(m->csum, m->blocks_mapped);
	if (tail) {
		expect += csum_tail_len(m->csum, bitmap_count(s.b->data + at, bm_bytes));
		expect += csum_put_tail(m->csum, s.b->data + at, m->g.data_blocks,
					m->g.version >= LAYOUT_VERSION_AHEAD, s.b);
	}

	if (s.b->len != expect && !m->nfresh)
		g_warning("checkpoint is %u bytes but the running count says %" G_GUINT64_FORMAT,
			  s.b->len, (guint64)expect);
	if (s.b->len > m->g.slot_len) {
		g_byte_array_unref(s.b);
		return -ENOSPC;
	}
	memset(&h, 0, sizeof(h));
	memcpy(h.magic, LAYOUT_CKPT_MAGIC, 8);
	h.version = htole32(m->g.version); /* a version-1 pool keeps version-1 checkpoints */
	h.fs_id = htole64(m->g.fs_id);
	h.gen = htole64(gen);
	h.first_seq = htole64(first_seq);
	h.payload_len = htole64(s.b->len - LAYOUT_CKPT_HDR_SIZE);
	h.payload_crc = htole32(layout_crc(s.b->data + LAYOUT_CKPT_HDR_SIZE,
					   s.b->len - LAYOUT_CKPT_HDR_SIZE));
	h.next_ino = htole64(m->next_ino);
	h.ninodes = htole64(n);
	h.data_blocks = htole64(m->g.data_blocks);
	if (tail)
		h.tail_len = htole64(s.b->len - at - bm_bytes);
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

/*
 * Loading takes two passes over the inode records (the payload before the
 * bitmap). The scan only parses: it checks every count against the bytes
 * left, allocates nothing, and decides which bytes make which record and how
 * many of its items to take. The build then creates the inodes from those
 * records; an item that parses but cannot be used (an entry named "..", an
 * extent beyond the data area) is dropped there and reported.
 *
 * A mount takes the records as stored: the first record whose structure is
 * broken refuses the checkpoint, naming the record, its inode and its
 * payload offset. rmemfs-fsck salvages instead. Records are serialised in
 * ino order below the header's next_ino, so where a record's items run
 * wrong (a count larger than the items written, garbage items), the record
 * ends where the next plausible record begins: a larger ino below next_ino,
 * a valid type, every item parsing, and after it another plausible record
 * head or the end. Bytes that belong to no record are skipped up to the
 * next such start. The valid items of a damaged record are kept; a count
 * stored too small is followed past as long as valid items come. Trial
 * parses are budgeted (SALVAGE_BUDGET times the payload), so a salvage takes
 * time linear in the payload whatever the bytes.
 */

#define XATTR_MIN_BYTES 2 /* uv nlen, uv vlen */
#define SUB_MIN_BYTES 4 /* extent: 3 uv + u8; entry: 2 uv + 2 u8 */
#define PROBLEMS_MAX 1000 /* problems listed per checkpoint; the rest are counted */
#define SALVAGE_BUDGET 64

enum item_kind {
	ITEM_NONE,
	ITEM_XATTR,
	ITEM_EXTENT,
	ITEM_ENTRY,
};

static const char *const item_name[] = { "item", "xattr", "extent", "entry" };
static const char *const items_name[] = { "items", "xattrs", "extents", "entries" };

struct ckpt_item {
	const uint8_t *name, *value;
	size_t nlen, vlen;
	uint64_t ino, cookie, fblock, count, pblock;
	uint8_t type, state;
};

/* the head of one inode record: attributes, counts, symlink target */
struct ckpt_rec {
	struct layout_inode a;
	size_t off; /* payload offset of the record */
	size_t items; /* payload offset of its first xattr */
	uint32_t nx, nsub; /* xattrs, and extents or entries, as stored */
	const uint8_t *target;
	size_t tlen;
};

/* what a scan makes of one record: its offset and the items to build */
struct ckpt_take {
	size_t off;
	uint32_t nx, nsub;
	bool damaged; /* salvage: its items ran wrong (its ino may be wrong too) */
};

/* the inode records of one checkpoint, being read */
struct ckpt_src {
	struct meta *m;
	uint64_t gen;
	const uint8_t *buf;
	size_t len;
	uint64_t next_ino; /* the header's: every inode is below it */
	uint64_t budget; /* salvage: bytes trial parses may still read */
	unsigned int problems; /* reported so far */
	bool salvage; /* reading by the salvage rules */
	char *first; /* diagnose (no build): the first problem goes here, not to meta */
	bool diagnose;
};

enum rec_err {
	REC_OK,
	REC_ATTRS, /* the attributes do not parse */
	REC_TARGET, /* the symlink target runs past the end */
	REC_COUNTS, /* the counts cannot fit the bytes left */
	REC_ITEM, /* an item does not parse (or, checked for validity, cannot be used) */
};

/* where a record broke */
struct rec_fail {
	enum rec_err err;
	enum item_kind kind;
	uint32_t index, count; /* the item, of how many */
	size_t at; /* its payload offset */
};

static void ckpt_problem(struct ckpt_src *s, const char *fmt, ...) G_GNUC_PRINTF(2, 3);
static void ckpt_problem(struct ckpt_src *s, const char *fmt, ...)
{
	va_list ap;
	char *msg;

	if (s->problems++ >= PROBLEMS_MAX || (s->diagnose && s->first))
		return;
	va_start(ap, fmt);
	msg = g_strdup_vprintf(fmt, ap);
	va_end(ap);
	if (s->diagnose) {
		s->first = msg;
		return;
	}
	inode_load_problem(s->m, "checkpoint %" G_GUINT64_FORMAT ": %s", (guint64)s->gen, msg);
	g_free(msg);
}

/* a name from the pool, fit for a message (g_free it) */
static char *printable(const uint8_t *p, size_t n)
{
	char *raw = g_strndup((const char *)p, MIN(n, 255));
	char *out = g_strescape(raw, NULL);

	g_free(raw);
	return out;
}

static size_t rd_off(const struct ckpt_src *s, const struct layout_rd *rd)
{
	return (size_t)(rd->p - s->buf);
}

static enum item_kind sub_kind(uint32_t mode)
{
	if (S_ISREG(mode))
		return ITEM_EXTENT;
	return S_ISDIR(mode) ? ITEM_ENTRY : ITEM_NONE;
}

/* parse the head of the record at off into r; rd continues after it */
static enum rec_err rec_head(const struct ckpt_src *s, size_t off, struct ckpt_rec *r,
			     struct layout_rd *rd)
{
	uint64_t need;

	memset(r, 0, sizeof(*r));
	r->off = off;
	layout_rd_init(rd, s->buf + off, s->len - off);
	if (layout_get_inode(rd, &r->a))
		return REC_ATTRS;
	r->nx = get_le32(rd);
	if (S_ISLNK(r->a.mode) && !rd->err) {
		r->target = layout_get_counted(rd, &r->tlen);
		if (!r->target)
			return REC_TARGET;
	}
	if (sub_kind(r->a.mode) != ITEM_NONE)
		r->nsub = get_le32(rd);
	if (rd->err)
		return REC_ATTRS;
	r->items = rd_off(s, rd);
	need = (uint64_t)r->nx * XATTR_MIN_BYTES + (uint64_t)r->nsub * SUB_MIN_BYTES;
	return need > layout_rd_left(rd) ? REC_COUNTS : REC_OK;
}

/* parse one item; -EBADMSG if its structure is broken (nothing is allocated) */
static int item_get(struct layout_rd *rd, enum item_kind k, struct ckpt_item *it)
{
	uint8_t nlen;

	switch (k) {
	case ITEM_XATTR:
		it->name = layout_get_counted(rd, &it->nlen);
		it->value = layout_get_counted(rd, &it->vlen);
		break;
	case ITEM_EXTENT:
		layout_get_ext(rd, &it->fblock, &it->count, &it->pblock, &it->state);
		break;
	case ITEM_ENTRY:
		layout_get_dirent(rd, &it->ino, &it->cookie, &it->type, &it->name, &nlen);
		it->nlen = nlen;
		break;
	case ITEM_NONE:
		rd->err = -EBADMSG;
		break;
	}
	return rd->err;
}

/* why a parsed item cannot be used; NULL if it can */
static const char *item_bad(const struct ckpt_src *s, enum item_kind k, const struct ckpt_item *it)
{
	uint64_t nblocks = s->m->g.data_blocks;

	switch (k) {
	case ITEM_XATTR:
		if (!layout_xattr_ok(it->name, it->nlen, it->vlen))
			return "invalid name or value";
		return NULL;
	case ITEM_EXTENT:
		if (!it->count || it->fblock + it->count < it->fblock || it->pblock >= nblocks ||
		    it->count > nblocks - it->pblock || it->state > LAYOUT_EXT_UNWRITTEN)
			return "invalid extent";
		return NULL;
	case ITEM_ENTRY:
		if (!layout_name_ok(it->name, it->nlen))
			return "invalid name";
		/* (as stored, fsck reports an entry naming a missing inode by its name) */
		if (!it->ino || it->ino >= (s->salvage ? s->next_ino : LAYOUT_INO_LIMIT))
			return "no such inode number";
		return NULL;
	case ITEM_NONE:
		break;
	}
	return "no such item";
}

static enum rec_err item_fail(struct rec_fail *f, enum item_kind k, uint32_t i, uint32_t n,
			      size_t at)
{
	if (f) {
		f->err = REC_ITEM;
		f->kind = k;
		f->index = i;
		f->count = n;
		f->at = at;
	}
	return REC_ITEM;
}

/*
 * Parse the items of r (rd after its head) to the record's end; valid: an
 * item that parses but cannot be used fails too. The bytes read are charged
 * to the budget.
 */
static enum rec_err rec_items(struct ckpt_src *s, const struct ckpt_rec *r,
			      struct layout_rd *rd, bool valid, struct rec_fail *f)
{
	enum item_kind sk = sub_kind(r->a.mode);
	struct ckpt_item it;
	enum rec_err rc = REC_OK;
	uint32_t i;

	for (i = 0; i < r->nx && !rc; i++) {
		size_t at = rd_off(s, rd);

		if (item_get(rd, ITEM_XATTR, &it) || (valid && item_bad(s, ITEM_XATTR, &it)))
			rc = item_fail(f, ITEM_XATTR, i, r->nx, at);
	}
	for (i = 0; i < r->nsub && !rc; i++) {
		size_t at = rd_off(s, rd);

		if (item_get(rd, sk, &it) || (valid && item_bad(s, sk, &it)))
			rc = item_fail(f, sk, i, r->nsub, at);
	}
	s->budget -= MIN(s->budget, rd_off(s, rd) - r->off + 16);
	return rc;
}

/*
 * Does a plausible record head (ino above last, below next_ino, a valid
 * mode, counts that fit) start at off? Where a record must begin (aligned:
 * after one taken as stored), counts that do not fit only make the record
 * damaged.
 */
static bool head_plausible(const struct ckpt_src *s, size_t off, uint64_t last, bool aligned,
			   struct ckpt_rec *r, struct layout_rd *rd)
{
	enum rec_err err = off < s->len ? rec_head(s, off, r, rd) : REC_ATTRS;

	return (err == REC_OK || (aligned && err == REC_COUNTS)) && r->a.ino > last &&
	       r->a.ino < s->next_ino && layout_mode_ok(r->a.mode);
}

/* does a complete, plausible record start at off, followed by another head or the end? */
static bool rec_starts_at(struct ckpt_src *s, size_t off, uint64_t last)
{
	struct ckpt_rec r, next;
	struct layout_rd rd;
	size_t end;

	if (!s->budget || !head_plausible(s, off, last, false, &r, &rd) ||
	    rec_items(s, &r, &rd, false, NULL) != REC_OK)
		return false;
	end = rd_off(s, &rd);
	return end == s->len || head_plausible(s, end, r.a.ino, false, &next, &rd);
}

/* ---- loading: as stored ---- */

static char *rec_fail_text(const struct rec_fail *f, const struct ckpt_rec *r, size_t left)
{
	switch (f->err) {
	case REC_ATTRS:
		return g_strdup("its attributes do not parse");
	case REC_TARGET:
		return g_strdup_printf("its symlink target of %zu bytes runs past the end",
				       r->tlen);
	case REC_COUNTS:
		return g_strdup_printf("%u xattrs and %u %s cannot fit the %zu bytes left", r->nx,
				       r->nsub, items_name[sub_kind(r->a.mode)], left);
	case REC_ITEM:
		return g_strdup_printf("%s %u of %u, at payload offset %zu, does not parse",
				       item_name[f->kind], f->index + 1, f->count, f->at);
	case REC_OK:
		break;
	}
	return g_strdup("?");
}

static const char *rec_word(uint32_t mode)
{
	if (S_ISLNK(mode))
		return "symlink";
	return S_ISDIR(mode) ? "directory" : S_ISREG(mode) ? "file" : "inode";
}

/* check that the records parse as stored: ninodes of them, ascending, filling the bytes */
static int scan_stored(struct ckpt_src *s, uint64_t ninodes, char **why)
{
	struct rec_fail f = { 0 };
	struct ckpt_rec r;
	struct layout_rd rd;
	uint64_t i, last = 0;
	size_t off = 0;
	char *what = NULL, *who;

	for (i = 0; i < ninodes && off < s->len; i++) {
		f.err = rec_head(s, off, &r, &rd);
		if (!f.err && r.a.ino <= last) {
			what = g_strdup_printf("it follows inode %" G_GUINT64_FORMAT
					       " (records must ascend)", (guint64)last);
			break;
		}
		if (f.err || rec_items(s, &r, &rd, false, &f)) {
			what = rec_fail_text(&f, &r, s->len - r.items);
			break;
		}
		off = rd_off(s, &rd);
		last = r.a.ino;
	}
	if (what) {
		who = f.err == REC_ATTRS ? g_strdup("") :
					   g_strdup_printf("%s %" G_GUINT64_FORMAT ", ",
							   rec_word(r.a.mode), (guint64)r.a.ino);
		*why = g_strdup_printf("checkpoint %" G_GUINT64_FORMAT " is malformed: inode "
				       "record %" G_GUINT64_FORMAT " of %" G_GUINT64_FORMAT
				       " (%spayload offset %zu): %s",
				       (guint64)s->gen, (guint64)(i + 1), (guint64)ninodes, who,
				       off, what);
		g_free(who);
		g_free(what);
		return -EUCLEAN;
	}
	if (i < ninodes) {
		*why = g_strdup_printf("checkpoint %" G_GUINT64_FORMAT " is malformed: the inode "
				       "records end after %" G_GUINT64_FORMAT " of %"
				       G_GUINT64_FORMAT,
				       (guint64)s->gen, (guint64)i, (guint64)ninodes);
		return -EUCLEAN;
	}
	if (off < s->len) {
		*why = g_strdup_printf("checkpoint %" G_GUINT64_FORMAT " is malformed: %zu bytes "
				       "follow the last of %" G_GUINT64_FORMAT
				       " inode records (payload offset %zu)",
				       (guint64)s->gen, s->len - off, (guint64)ninodes, off);
		return -EUCLEAN;
	}
	/* entries may name any inode stored, whatever the header says */
	s->next_ino = MAX(s->next_ino, last + 1);
	return 0;
}

/* ---- loading: the build ---- */

static void build_xattr(struct ckpt_src *s, struct meta_inode *in, const struct ckpt_item *it)
{
	const char *bad = item_bad(s, ITEM_XATTR, it);
	char *name = printable(it->name, it->nlen);

	if (bad)
		ckpt_problem(s, "inode %" G_GUINT64_FORMAT ": xattr \"%s\": %s (dropped)",
			     (guint64)in->a.ino, name, bad);
	else if (inode_xattr_find(s->m, in, name, NULL))
		ckpt_problem(s, "inode %" G_GUINT64_FORMAT ": xattr \"%s\" stored twice (dropped)",
			     (guint64)in->a.ino, name);
	g_free(name);
	if (bad)
		return;
	name = g_strndup((const char *)it->name, it->nlen);
	if (!inode_xattr_find(s->m, in, name, NULL))
		inode_xattr_set(s->m, in, name, it->value, it->vlen);
	g_free(name);
}

static void build_extent(struct ckpt_src *s, struct meta_inode *in, const struct ckpt_item *it,
			 uint64_t *prev_end)
{
	if (item_bad(s, ITEM_EXTENT, it)) {
		ckpt_problem(s, "inode %" G_GUINT64_FORMAT ": invalid extent %" G_GUINT64_FORMAT
			     "+%" G_GUINT64_FORMAT " -> block %" G_GUINT64_FORMAT " (dropped)",
			     (guint64)in->a.ino, (guint64)it->fblock, (guint64)it->count,
			     (guint64)it->pblock);
		return;
	}
	if (it->fblock < *prev_end) {
		ckpt_problem(s, "inode %" G_GUINT64_FORMAT ": overlapping extent at file block %"
			     G_GUINT64_FORMAT " (dropped)", (guint64)in->a.ino,
			     (guint64)it->fblock);
		return;
	}
	*prev_end = it->fblock + it->count;
	inode_ext_set(s->m, in, it->fblock, it->count, it->pblock, it->state);
}

/*
 * Entries come in ascending cookie order; one that does not gets a new
 * cookie (appended), so that loading never inserts into the middle of the
 * cookie index (quadratic in a large directory).
 */
static void build_entry(struct ckpt_src *s, struct meta_inode *in, const struct ckpt_item *it,
			uint64_t *prev_cookie)
{
	const char *bad = item_bad(s, ITEM_ENTRY, it);
	uint64_t cookie = it->cookie;
	struct meta_dirent *d;
	char *name;

	if (bad) {
		name = printable(it->name, it->nlen);
		ckpt_problem(s, "directory %" G_GUINT64_FORMAT ": entry \"%s\" (inode %"
			     G_GUINT64_FORMAT "): %s (dropped)", (guint64)in->a.ino, name,
			     (guint64)it->ino, bad);
		g_free(name);
		return;
	}
	name = g_strndup((const char *)it->name, it->nlen);
	if (inode_dir_lookup(in, name)) {
		ckpt_problem(s, "directory %" G_GUINT64_FORMAT ": duplicate entry \"%s\" (dropped)",
			     (guint64)in->a.ino, name);
		g_free(name);
		return;
	}
	if (cookie >= 3 && cookie <= *prev_cookie) {
		ckpt_problem(s, "directory %" G_GUINT64_FORMAT ": entry \"%s\": cookie %"
			     G_GUINT64_FORMAT " is not above the previous %" G_GUINT64_FORMAT
			     " (renumbered)", (guint64)in->a.ino, name, (guint64)cookie,
			     (guint64)*prev_cookie);
		cookie = 0;
	}
	d = inode_dir_add(s->m, in, name, it->nlen, it->ino, it->type, cookie);
	*prev_cookie = d->cookie;
	g_free(name);
}

/* create the inode of the record at t->off with the items t takes; the end of those items */
static size_t build_rec(struct ckpt_src *s, const struct ckpt_take *t)
{
	struct meta *m = s->m;
	struct ckpt_item it = { 0 };
	struct ckpt_rec r;
	struct layout_rd rd;
	struct layout_inode a;
	struct meta_inode *in;
	enum item_kind sk;
	uint64_t prev = 0;
	uint32_t i;

	rec_head(s, t->off, &r, &rd); /* (scanned: it parses) */
	sk = sub_kind(r.a.mode);
	a = r.a;
	if (!layout_mode_ok(a.mode)) {
		ckpt_problem(s, "inode %" G_GUINT64_FORMAT ": invalid mode 0%o (made a file)",
			     (guint64)a.ino, a.mode);
		a.mode = S_IFREG | (a.mode & 07777);
	}
	in = inode_create(m, &a);
	if (!in) {
		ckpt_problem(s, "inode %" G_GUINT64_FORMAT " stored twice: the damaged record at "
			     "payload offset %zu dropped", (guint64)a.ino, t->off);
		return t->off;
	}
	if (r.target && memchr(r.target, 0, r.tlen)) {
		ckpt_problem(s, "symlink %" G_GUINT64_FORMAT ": its target holds a NUL byte (cut "
			     "there)", (guint64)a.ino);
		r.tlen = strnlen((const char *)r.target, r.tlen);
	}
	if (r.target)
		inode_symlink_set(m, in, (const char *)r.target, r.tlen);
	for (i = 0; i < t->nx && !item_get(&rd, ITEM_XATTR, &it); i++)
		build_xattr(s, in, &it);
	for (i = 0; i < t->nsub && !item_get(&rd, sk, &it); i++) {
		if (sk == ITEM_EXTENT)
			build_extent(s, in, &it, &prev);
		else
			build_entry(s, in, &it, &prev);
	}
	return rd_off(s, &rd);
}

/* ---- loading: salvage ---- */

/* skip bytes from `from` up to the next record start (or the end); *off gets it */
static void salvage_skip(struct ckpt_src *s, size_t from, uint64_t last, size_t *off)
{
	size_t q = from + 1;

	while (q < s->len && !rec_starts_at(s, q, last))
		q++;
	ckpt_problem(s, "payload bytes %zu to %zu (%zu bytes) hold no readable inode record "
		     "(dropped)%s", from, q, q - from,
		     s->budget ? "" : "; the salvage gave up searching: too damaged");
	*off = q;
}

/*
 * Parse the next item of a damaged record; false when the record ends
 * before it: it does not parse, or a complete record (ino above last)
 * starts where it does or inside its bytes (a length gone wrong swallows
 * the records after it).
 */
static bool salvage_item(struct ckpt_src *s, uint64_t last, struct layout_rd *rd,
			 enum item_kind k, struct ckpt_item *it)
{
	size_t b = rd_off(s, rd), q, e;

	if (b == s->len || rec_starts_at(s, b, last) || item_get(rd, k, it))
		return false;
	e = rd_off(s, rd);
	for (q = b + 1; q < e; q++)
		if (rec_starts_at(s, q, last))
			return false;
	return true;
}

static bool dtype_ok(uint8_t t)
{
	return t == DT_FIFO || t == DT_CHR || t == DT_DIR || t == DT_BLK || t == DT_REG ||
	       t == DT_LNK || t == DT_SOCK;
}

/*
 * A damaged record: take its items while they parse, up to where the next
 * record begins; past the stored count of a directory, entries are taken
 * while they are valid with a valid type (a count stored too small; the head
 * of a record too easily passes for an extent to follow extents so). *t gets
 * the items to build; returns where they end (after the last valid one).
 */
static size_t salvage_items(struct ckpt_src *s, const struct ckpt_rec *r, uint64_t last,
			    struct layout_rd *rd, struct ckpt_take *t)
{
	enum item_kind sk = sub_kind(r->a.mode);
	size_t good = r->items;
	struct ckpt_item it;
	uint32_t i, ngood = 0;

	t->off = r->off;
	t->nx = t->nsub = 0;
	t->damaged = true;
	for (i = 0; i < r->nx; i++) {
		if (!salvage_item(s, last, rd, ITEM_XATTR, &it)) {
			t->nx = ngood;
			return good;
		}
		if (!item_bad(s, ITEM_XATTR, &it)) {
			ngood = i + 1;
			good = rd_off(s, rd);
		}
	}
	t->nx = r->nx;
	good = rd_off(s, rd);
	ngood = 0;
	for (i = 0; sk != ITEM_NONE && i < UINT32_MAX; i++) {
		bool beyond = i >= r->nsub;

		if ((beyond && sk != ITEM_ENTRY) || !salvage_item(s, last, rd, sk, &it))
			break;
		if (item_bad(s, sk, &it) || (beyond && !dtype_ok(it.type))) {
			if (beyond)
				break;
			continue;
		}
		ngood = i + 1;
		good = rd_off(s, rd);
	}
	t->nsub = ngood;
	return good;
}

/*
 * The records to build from a damaged payload, each damage reported. A
 * record that parses whole, every item valid, and is followed by a
 * plausible head (or the end) is taken as stored; any other is damaged, and
 * after it the next record must be a complete one (rec_starts_at), else the
 * bytes up to one are skipped. Records must ascend from the last one taken
 * as stored: the ino of a damaged record may be damaged too, so it does not
 * count (a flipped large ino would hide every record after it).
 */
static GArray *salvage_plan(struct ckpt_src *s)
{
	GArray *plan = g_array_new(FALSE, FALSE, sizeof(struct ckpt_take));
	uint64_t last = 0;
	size_t off = 0;

	while (off < s->len) {
		struct ckpt_take t = { .off = off };
		struct ckpt_rec r, next;
		struct layout_rd rd, rd2;
		size_t end;

		if (!head_plausible(s, off, last, true, &r, &rd)) {
			salvage_skip(s, off, last, &off);
			continue;
		}
		if (rec_head(s, off, &r, &rd) == REC_OK &&
		    rec_items(s, &r, &rd, true, NULL) == REC_OK) {
			end = rd_off(s, &rd);
			if (end == s->len || head_plausible(s, end, r.a.ino, true, &next, &rd2)) {
				t.nx = r.nx;
				t.nsub = r.nsub;
				g_array_append_val(plan, t);
				last = r.a.ino;
				off = end;
				continue;
			}
		}
		rec_head(s, off, &r, &rd);
		end = salvage_items(s, &r, last, &rd, &t);
		g_array_append_val(plan, t);
		ckpt_problem(s, "%s %" G_GUINT64_FORMAT " (payload offset %zu) is damaged: of "
			     "its %u xattrs and %u %s, %u and %u are read, up to offset %zu",
			     rec_word(r.a.mode), (guint64)r.a.ino, off, r.nx, r.nsub,
			     items_name[sub_kind(r.a.mode)], t.nx, t.nsub, end);
		if (end < s->len && !rec_starts_at(s, end, last))
			salvage_skip(s, end, last, &off);
		else
			off = end;
	}
	return plan;
}

/* ---- loading: the checkpoint ---- */

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

/* build the records as stored (scan_stored passed) */
static void build_stored(struct ckpt_src *s, uint64_t ninodes)
{
	struct ckpt_take t = { 0 };
	struct ckpt_rec r;
	struct layout_rd rd;
	uint64_t i;

	for (i = 0; i < ninodes; i++) {
		rec_head(s, t.off, &r, &rd);
		t.nx = r.nx;
		t.nsub = r.nsub;
		t.off = build_rec(s, &t);
	}
}

/*
 * Where the damage of a payload that does not parse as stored begins, by
 * the salvage's rules (a record can parse wrongly long after the damage:
 * a count too large reads the next records as items). why gets it appended.
 */
static void diagnose(struct ckpt_src *s, char **why)
{
	struct ckpt_src d = *s;
	GArray *plan;
	char *both;

	d.salvage = true;
	d.diagnose = true;
	d.first = NULL;
	d.problems = 0;
	d.budget = SALVAGE_BUDGET * (uint64_t)s->len + (1U << 20);
	plan = salvage_plan(&d);
	g_array_free(plan, TRUE);
	if (!d.first)
		return;
	both = g_strdup_printf("%s; first damage: %s", *why, d.first);
	g_free(*why);
	g_free(d.first);
	*why = both;
}

/* salvage the records of a payload that does not parse as stored (why: the scan's verdict) */
static void build_salvaged(struct ckpt_src *s, uint64_t ninodes, const char *why)
{
	GArray *plan;
	guint i, pass;

	inode_load_problem(s->m, "%s; salvaging what parses", why);
	s->salvage = true;
	s->budget = SALVAGE_BUDGET * (uint64_t)s->len + (1U << 20);
	plan = salvage_plan(s);
	/* the records taken as stored first: a damaged one with the same ino yields */
	for (pass = 0; pass < 2; pass++)
		for (i = 0; i < plan->len; i++)
			if (g_array_index(plan, struct ckpt_take, i).damaged == pass)
				build_rec(s, &g_array_index(plan, struct ckpt_take, i));
	ckpt_problem(s, "%u inode records salvaged (the header says %" G_GUINT64_FORMAT ")",
		     plan->len, (guint64)ninodes);
	g_array_free(plan, TRUE);
}

/* read and check the header of checkpoint gen */
static int read_header(struct meta *m, uint64_t gen, struct layout_ckpt_hdr *h, char **why)
{
	uint64_t bm_bytes = (m->g.data_blocks + 7) / 8, plen, tail;
	uint32_t crc, version;
	int rc;

	rc = remote_read(m->r, m->g.slot_off[gen & 1], h, sizeof(*h));
	if (rc < 0) {
		*why = g_strdup_printf("reading checkpoint %" G_GUINT64_FORMAT ": %s",
				       (guint64)gen, g_strerror(-rc));
		return rc;
	}
	crc = le32toh(h->hdr_crc);
	h->hdr_crc = 0;
	version = le32toh(h->version);
	tail = le64toh(h->tail_len);
	if (memcmp(h->magic, LAYOUT_CKPT_MAGIC, 8) || layout_crc(h, sizeof(*h)) != crc ||
	    version < 1 || version > LAYOUT_VERSION || le64toh(h->fs_id) != m->g.fs_id ||
	    le64toh(h->gen) != gen || le64toh(h->data_blocks) != m->g.data_blocks ||
	    (version < LAYOUT_VERSION_CSUM && tail)) {
		*why = g_strdup_printf("checkpoint %" G_GUINT64_FORMAT
				       " (slot %u): header missing or damaged",
				       (guint64)gen, (unsigned int)(gen & 1));
		return -ENODATA;
	}
	plen = le64toh(h->payload_len);
	if (plen > m->g.slot_len - LAYOUT_CKPT_HDR_SIZE || plen < bm_bytes || tail > plen - bm_bytes) {
		*why = g_strdup_printf("checkpoint %" G_GUINT64_FORMAT ": bad payload length %"
				       G_GUINT64_FORMAT, (guint64)gen, (guint64)plen);
		return -ENODATA;
	}
	return 0;
}

int ckpt_first_seq(struct meta *m, uint64_t gen, uint64_t *first_seq)
{
	struct layout_ckpt_hdr h;
	char *why = NULL;
	int rc = read_header(m, gen, &h, &why);

	g_free(why);
	if (!rc)
		*first_seq = le64toh(h.first_seq);
	return rc;
}

int ckpt_load(struct meta *m, uint64_t gen, bool salvage, uint64_t *first_seq, char **why)
{
	struct ckpt_src s = { .m = m, .gen = gen, .budget = UINT64_MAX };
	struct layout_ckpt_hdr h;
	uint64_t plen, ninodes, tail, bm_bytes = (m->g.data_blocks + 7) / 8;
	uint8_t *payload;
	char *verdict = NULL;
	int rc;

	*why = NULL;
	rc = read_header(m, gen, &h, why);
	if (rc < 0)
		return rc;
	plen = le64toh(h.payload_len);
	payload = g_malloc(plen ? plen : 1);
	rc = remote_read(m->r, m->g.slot_off[gen & 1] + LAYOUT_CKPT_HDR_SIZE, payload, plen);
	if (rc < 0) {
		*why = g_strdup_printf("reading checkpoint %" G_GUINT64_FORMAT ": %s",
				       (guint64)gen, g_strerror(-rc));
		goto out;
	}
	if (layout_crc(payload, plen) != le32toh(h.payload_crc)) {
		verdict = g_strdup_printf("checkpoint %" G_GUINT64_FORMAT ": checksum mismatch",
					  (guint64)gen);
		rc = -EBADMSG;
		if (!salvage)
			goto out;
	}
	tail = le64toh(h.tail_len);
	s.buf = payload;
	s.len = plen - bm_bytes - tail;
	s.next_ino = le64toh(h.next_ino);
	ninodes = le64toh(h.ninodes);
	if (!verdict) {
		rc = scan_stored(&s, ninodes, &verdict);
		if (rc < 0 && !salvage) {
			diagnose(&s, &verdict);
			goto out;
		}
	}
	if (verdict)
		build_salvaged(&s, ninodes, verdict);
	else
		build_stored(&s, ninodes);
	if (s.problems > PROBLEMS_MAX)
		inode_load_problem(m, "checkpoint %" G_GUINT64_FORMAT ": %u more problems not "
				   "listed", (guint64)gen, s.problems - PROBLEMS_MAX);
	check_bitmap(m, payload + s.len);
	/*
	 * A version-2 checkpoint under a version-1 superblock: an upgrade that
	 * crashed before its superblock write. The filesystem is version 2 (every
	 * checkpoint written from now on keeps the tail); a read-write mount
	 * still rewrites the superblock (mount.c go_live asks the superblock).
	 */
	if (le32toh(h.version) > m->g.version && le32toh(h.version) <= LAYOUT_VERSION)
		m->g.version = le32toh(h.version);
	/*
	 * A salvaged payload (its CRC failed): the CRCs are positional over the
	 * stored bitmap, which may be damaged too - one flipped bit would shift
	 * every CRC after it onto the wrong block. Dropped: the blocks read
	 * unverified until a scrub gives them CRCs again.
	 */
	if (verdict && le32toh(h.version) >= LAYOUT_VERSION_CSUM)
		inode_load_problem(m, "checkpoint %" G_GUINT64_FORMAT ": salvaged, so its data "
				   "block checksums are dropped (rmemfs-ctl scrub gives them new "
				   "ones)", (guint64)gen);
	else if (le32toh(h.version) >= LAYOUT_VERSION_CSUM &&
	    csum_get_tail(m->csum, payload + s.len, m->g.data_blocks,
			  le32toh(h.version) >= LAYOUT_VERSION_AHEAD, payload + s.len + bm_bytes,
			  tail) < 0)
		inode_load_problem(m, "checkpoint %" G_GUINT64_FORMAT ": its checksum section "
				   "does not parse (the data blocks' checksums are dropped)",
				   (guint64)gen);
	m->ckpt_bytes += csum_tail_len(m->csum, 0) - 4; /* the hot regions loaded */
	if (s.next_ino > m->next_ino)
		m->next_ino = s.next_ino;
	*first_seq = le64toh(h.first_seq);
	rc = 0;
out:
	if (rc < 0 && verdict) {
		*why = verdict;
		verdict = NULL;
	}
	g_free(verdict);
	g_free(payload);
	return rc;
}
