// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * journal.c - transaction framing, record encoding, the pending buffer, and
 * replay (see journal.h for the contract, layout.h for the byte format).
 *
 * The buffer being built (j->txn) starts with room for the header; commit
 * fills the header (generation, sequence, length, CRC-32C over the whole txn)
 * and appends the txn to j->pending. Everything here runs under struct
 * meta's lock except journal_replay, which runs before the mount is live.
 */
#define G_LOG_DOMAIN "rmemfs-journal"

#include "journal.h"

#include <endian.h>
#include <errno.h>
#include <string.h>

#include "remote.h"

struct journal {
	uint64_t off; /* pool offset of the area */
	uint64_t len;
	uint64_t fs_id;
	uint64_t gen; /* generation new txns are tagged with */
	uint64_t tail; /* area bytes in use by this generation (written or being written) */
	uint64_t next_seq;
	GByteArray *pending; /* committed txns not yet handed to the writer */
	GByteArray *spare; /* a written buffer handed back empty: the next pending one */
	GByteArray *txn; /* the txn being built */
	uint32_t nrec;
};

/*
 * A quarter of the journal, or JOURNAL_WRITE_DUE if less: what the pending
 * buffer may hold before the committer is woken. The bound is for memory:
 * under -o swap every byte of the buffer stays resident and locked. The
 * buffer is made with exactly the room for that and for the transaction
 * that crosses it, so that it does not double on the way (a larger
 * transaction still grows it), and two such buffers take turns
 * (journal_recycle): under -o swap, 2 MiB arrays mapped, populated and
 * unmapped at each write-back of a swap-out were most of the daemon's peak.
 */
#define JOURNAL_WRITE_DUE (256U << 10)
#define JOURNAL_TXN_ROOM (64U << 10)

static uint64_t write_due(const struct journal *j)
{
	return MIN(j->len / 4, JOURNAL_WRITE_DUE);
}

static GByteArray *pending_new(const struct journal *j)
{
	return layout_bytes_new((guint)(write_due(j) + JOURNAL_TXN_ROOM));
}

struct journal *journal_new(uint64_t area_off, uint64_t area_len, uint64_t fs_id)
{
	struct journal *j = g_new0(struct journal, 1);

	j->off = area_off;
	j->len = area_len;
	j->fs_id = fs_id;
	j->next_seq = 1;
	j->pending = pending_new(j);
	j->txn = g_byte_array_new();
	return j;
}

void journal_destroy(struct journal *j)
{
	if (!j)
		return;
	g_byte_array_unref(j->pending);
	if (j->spare)
		g_byte_array_unref(j->spare);
	g_byte_array_unref(j->txn);
	g_free(j);
}

void journal_reset(struct journal *j, uint64_t gen, uint64_t tail, uint64_t next_seq)
{
	j->gen = gen;
	j->tail = tail;
	j->next_seq = next_seq;
}

uint64_t journal_tail(const struct journal *j)
{
	return j->tail;
}

uint64_t journal_pending_bytes(const struct journal *j)
{
	return j->pending->len;
}

/* ---- building ---- */

uint64_t journal_next_seq(const struct journal *j)
{
	return j->next_seq;
}

void journal_begin(struct journal *j)
{
	g_byte_array_set_size(j->txn, sizeof(struct layout_txn_hdr));
	j->nrec = 0;
}

uint64_t journal_commit(struct journal *j)
{
	struct layout_txn_hdr h;
	uint64_t seq;

	if (!j->nrec)
		return 0;
	seq = j->next_seq++;
	memset(&h, 0, sizeof(h));
	h.magic = htole32(LAYOUT_TXN_MAGIC);
	h.fs_id = htole64(j->fs_id);
	h.gen = htole64(j->gen);
	h.seq = htole64(seq);
	h.len = htole32(j->txn->len);
	h.nrec = htole32(j->nrec);
	memcpy(j->txn->data, &h, sizeof(h));
	h.crc = htole32(layout_crc(j->txn->data, j->txn->len));
	memcpy(j->txn->data, &h, sizeof(h));
	g_byte_array_append(j->pending, j->txn->data, j->txn->len);
	j->nrec = 0;
	g_byte_array_set_size(j->txn, sizeof(struct layout_txn_hdr));
	return seq;
}

static GByteArray *rec(struct journal *j, uint8_t type)
{
	j->nrec++;
	layout_put_u8(j->txn, type);
	return j->txn;
}

void journal_rec_inode(struct journal *j, const struct layout_inode *a)
{
	layout_put_inode(rec(j, LAYOUT_REC_INODE), a);
}

void journal_rec_inode_free(struct journal *j, uint64_t ino)
{
	layout_put_uv(rec(j, LAYOUT_REC_INODE_FREE), ino);
}

void journal_rec_dirent_add(struct journal *j, uint64_t dir, const char *name, size_t nlen,
			    uint64_t ino, uint8_t type, uint64_t cookie)
{
	GByteArray *b = rec(j, LAYOUT_REC_DIRENT_ADD);

	layout_put_uv(b, dir);
	layout_put_dirent(b, ino, cookie, type, name, (uint8_t)nlen);
}

void journal_rec_dirent_del(struct journal *j, uint64_t dir, const char *name, size_t nlen)
{
	GByteArray *b = rec(j, LAYOUT_REC_DIRENT_DEL);

	layout_put_uv(b, dir);
	layout_put_u8(b, (uint8_t)nlen);
	layout_put_bytes(b, name, nlen);
}

void journal_rec_ext_set(struct journal *j, uint64_t ino, uint64_t fb, uint64_t count,
			 uint64_t pb, uint8_t state)
{
	GByteArray *b = rec(j, LAYOUT_REC_EXT_SET);

	layout_put_uv(b, ino);
	layout_put_ext(b, fb, count, pb, state);
}

void journal_rec_ext_clear(struct journal *j, uint64_t ino, uint64_t fb, uint64_t count)
{
	GByteArray *b = rec(j, LAYOUT_REC_EXT_CLEAR);

	layout_put_uv(b, ino);
	layout_put_uv(b, fb);
	layout_put_uv(b, count);
}

void journal_rec_xattr_set(struct journal *j, uint64_t ino, const char *name, const void *value,
			   size_t len)
{
	GByteArray *b = rec(j, LAYOUT_REC_XATTR_SET);
	size_t nlen = strlen(name);

	layout_put_uv(b, ino);
	layout_put_uv(b, nlen);
	layout_put_bytes(b, name, nlen);
	layout_put_uv(b, len);
	layout_put_bytes(b, value, len);
}

void journal_rec_xattr_del(struct journal *j, uint64_t ino, const char *name)
{
	GByteArray *b = rec(j, LAYOUT_REC_XATTR_DEL);
	size_t nlen = strlen(name);

	layout_put_uv(b, ino);
	layout_put_uv(b, nlen);
	layout_put_bytes(b, name, nlen);
}

void journal_rec_symlink(struct journal *j, uint64_t ino, const char *target, size_t len)
{
	GByteArray *b = rec(j, LAYOUT_REC_SYMLINK);

	layout_put_uv(b, ino);
	layout_put_uv(b, len);
	layout_put_bytes(b, target, len);
}

void journal_rec_csum(struct journal *j, bool ahead, uint64_t pb, uint64_t count,
		      const uint32_t *crc)
{
	GByteArray *b = rec(j, ahead ? LAYOUT_REC_CSUM_AHEAD : LAYOUT_REC_CSUM);
	uint64_t i;

	layout_put_uv(b, pb);
	layout_put_uv(b, count);
	for (i = 0; i < count; i++) {
		__le32 w = htole32(crc[i]);

		layout_put_bytes(b, &w, 4);
	}
}

void journal_rec_csum_runs(struct journal *j, bool ahead, const uint64_t *pb, const uint32_t *crc,
			  size_t n)
{
	size_t i, start = 0;

	for (i = 1; i <= n; i++) {
		if (i < n && pb[i] == pb[i - 1] + 1)
			continue;
		journal_rec_csum(j, ahead, pb[start], (uint64_t)(i - start), crc + start);
		start = i;
	}
}

void journal_rec_hot(struct journal *j, uint64_t region, bool hot)
{
	GByteArray *b = rec(j, LAYOUT_REC_HOT);

	layout_put_uv(b, region);
	layout_put_u8(b, hot);
}

/* ---- flushing ---- */

GByteArray *journal_take(struct journal *j, uint64_t *pool_off, uint64_t *last_seq)
{
	GByteArray *buf;

	if (!j->pending->len)
		return NULL;
	buf = j->pending;
	j->pending = j->spare ? j->spare : pending_new(j);
	j->spare = NULL;
	*pool_off = j->off + j->tail;
	*last_seq = j->next_seq - 1;
	j->tail += buf->len;
	return buf;
}

void journal_unwrite(struct journal *j, GByteArray *buf)
{
	GByteArray *later = j->pending;

	j->tail -= buf->len;
	g_byte_array_append(buf, later->data, later->len);
	j->pending = buf;
	journal_recycle(j, later);
}

void journal_recycle(struct journal *j, GByteArray *buf)
{
	if (j->spare) {
		g_byte_array_unref(buf);
		return;
	}
	g_byte_array_set_size(buf, 0);
	j->spare = buf;
}

bool journal_needs_ckpt(const struct journal *j)
{
	return j->tail + j->pending->len > j->len / 4 * 3;
}

bool journal_write_due(const struct journal *j)
{
	return j->pending->len > write_due(j);
}

void journal_drop_pending(struct journal *j)
{
	g_byte_array_set_size(j->pending, 0);
}

/* ---- replay ---- */

/*
 * Bytes read per step; a transaction larger than this grows it. Small: under
 * -o swap every byte the daemon touches stays resident (ARCHITECTURE, "What
 * is local memory").
 */
#define REPLAY_WINDOW (1U << 20)
#define JOURNAL_REC_MIN 2 /* the smallest record: a type and a one-byte varint */

struct window {
	struct remote *r;
	uint64_t area_off;
	uint64_t area_len;
	uint8_t *buf;
	size_t cap;
	uint64_t base; /* area offset of buf[0] */
	size_t have;
	bool short_read; /* r NULL (journal_follow): the bytes ran out before the area did */
};

/* make [pos, pos+n) of the area available in the window; returns a pointer or NULL */
static const uint8_t *window_get(struct window *w, uint64_t pos, size_t n, int *rc)
{
	size_t want;

	*rc = 0;
	if (pos + n > w->area_len)
		return NULL;
	if (pos >= w->base && pos + n <= w->base + w->have)
		return w->buf + (pos - w->base);
	if (!w->r) {
		w->short_read = true; /* a window of bytes read before: what follows is unknown */
		return NULL;
	}
	if (n > w->cap) {
		w->cap = n;
		w->buf = g_realloc(w->buf, w->cap);
	}
	want = (size_t)MIN((uint64_t)w->cap, w->area_len - pos);
	*rc = remote_read(w->r, w->area_off + pos, w->buf, want);
	if (*rc < 0) {
		w->have = 0;
		return NULL;
	}
	w->base = pos;
	w->have = want;
	return w->buf;
}

static char *get_name(struct layout_rd *rd, size_t nlen)
{
	const uint8_t *p = layout_get_bytes(rd, nlen);

	return p ? g_strndup((const char *)p, nlen) : NULL;
}

/* a name or value of a record: its length (name: at most 255), then its bytes */
static void get_name_or_value(struct layout_rd *rd, struct journal_rec *r, bool name)
{
	size_t len;
	const uint8_t *p = layout_get_counted(rd, &len);

	if (!name) {
		r->vlen = len;
		r->value = p;
	} else if (p && len <= 255) {
		r->nlen = len;
		r->name = g_strndup((const char *)p, len);
	} else {
		rd->err = -EBADMSG;
	}
}

static void decode_body(struct layout_rd *rd, struct journal_rec *r)
{
	const uint8_t *p;
	uint8_t nlen;

	switch (r->type) {
	case LAYOUT_REC_INODE:
		layout_get_inode(rd, &r->inode);
		r->ino = r->inode.ino;
		break;
	case LAYOUT_REC_INODE_FREE:
		r->ino = layout_get_uv(rd);
		break;
	case LAYOUT_REC_DIRENT_ADD:
		r->dir = layout_get_uv(rd);
		if (!layout_get_dirent(rd, &r->ino, &r->cookie, &r->dtype, &p, &nlen)) {
			r->nlen = nlen;
			r->name = g_strndup((const char *)p, nlen);
		}
		break;
	case LAYOUT_REC_DIRENT_DEL:
		r->dir = layout_get_uv(rd);
		r->nlen = layout_get_u8(rd);
		r->name = get_name(rd, r->nlen);
		break;
	case LAYOUT_REC_EXT_SET:
		r->ino = layout_get_uv(rd);
		layout_get_ext(rd, &r->fblock, &r->count, &r->pblock, &r->state);
		break;
	case LAYOUT_REC_EXT_CLEAR:
		r->ino = layout_get_uv(rd);
		r->fblock = layout_get_uv(rd);
		r->count = layout_get_uv(rd);
		break;
	case LAYOUT_REC_XATTR_SET:
	case LAYOUT_REC_XATTR_DEL:
	case LAYOUT_REC_SYMLINK:
		r->ino = layout_get_uv(rd);
		if (r->type != LAYOUT_REC_SYMLINK)
			get_name_or_value(rd, r, true);
		if (r->type != LAYOUT_REC_XATTR_DEL)
			get_name_or_value(rd, r, false);
		break;
	case LAYOUT_REC_CSUM:
	case LAYOUT_REC_CSUM_AHEAD:
		r->pblock = layout_get_uv(rd);
		r->count = layout_get_uv(rd);
		if (!rd->err && (!r->count || r->count > layout_rd_left(rd) / 4)) {
			rd->err = -EBADMSG;
			break;
		}
		r->vlen = 4 * r->count;
		r->value = layout_get_bytes(rd, r->vlen);
		break;
	case LAYOUT_REC_HOT:
		r->pblock = layout_get_uv(rd);
		r->state = layout_get_u8(rd);
		break;
	default:
		rd->err = -EBADMSG;
	}
}

static int decode_rec(struct layout_rd *rd, struct journal_rec *r)
{
	memset(r, 0, sizeof(*r));
	r->type = layout_get_u8(rd);
	decode_body(rd, r);
	if (r->type == LAYOUT_REC_DIRENT_ADD || r->type == LAYOUT_REC_DIRENT_DEL) {
		if (!r->dir || !r->nlen || (r->type == LAYOUT_REC_DIRENT_ADD && !r->ino))
			rd->err = -EBADMSG;
	} else if (!journal_rec_is_csum(r->type) && !r->ino) {
		rd->err = -EBADMSG;
	}
	return rd->err;
}

static void recs_free(GArray *recs)
{
	guint i;

	for (i = 0; i < recs->len; i++)
		g_free(g_array_index(recs, struct journal_rec, i).name);
	g_array_free(recs, TRUE);
}

/* is h the header of transaction expect of generation gen at pos? if not, info says why */
static bool txn_hdr_ok(const struct journal *j, const struct layout_txn_hdr *h, uint64_t gen,
		       uint64_t expect, uint64_t pos, struct journal_replay_info *info)
{
	uint32_t len = le32toh(h->len), nrec = le32toh(h->nrec);

	if (le32toh(h->magic) != LAYOUT_TXN_MAGIC || le64toh(h->fs_id) != j->fs_id) {
		info->stop_reason = g_strdup("no transaction");
		return false;
	}
	if (le64toh(h->gen) != gen) {
		info->stop_reason = g_strdup_printf("transaction of generation %" G_GUINT64_FORMAT,
						    (guint64)le64toh(h->gen));
		return false;
	}
	if (le64toh(h->seq) != expect)
		info->stop_reason = g_strdup_printf("sequence %" G_GUINT64_FORMAT ", expected %"
						    G_GUINT64_FORMAT,
						    (guint64)le64toh(h->seq), (guint64)expect);
	else if (len < sizeof(*h) || len > j->len - pos)
		info->stop_reason = g_strdup_printf("bad transaction length %u", len);
	else if (nrec > (len - sizeof(*h)) / JOURNAL_REC_MIN)
		info->stop_reason = g_strdup_printf("%u records cannot fit a transaction of %u "
						    "bytes", nrec, len);
	else
		return true;
	info->torn = true;
	return false;
}

/*
 * Decode the records of transaction seq (len bytes at journal offset pos,
 * checksum right) and apply them. Every record is decoded before any is
 * applied. One that does not parse: without salvage, nothing is applied
 * and replay stops (-EUCLEAN); with salvage, the records before it are
 * applied, the rest of the transaction is dropped and said so in
 * info->damage, and replay goes on.
 *
 * A record before the bad one parsed, but the damage may have made it (a
 * DIRENT_DEL with a flipped type byte reads as a CSUM: the directory taken
 * for a block, the name's length for a count, the bytes after for CRCs). Most
 * records that are wrong this way are caught by the checks that follow
 * (apply.c, fsck.c), but a wrong CRC looks like data damage, and no repair
 * can tell the two apart: the blocks would read as corrupt for good. So the
 * CSUM records of a malformed transaction go through untrusted, dropping
 * the CRCs of the blocks they name, as a salvaged checkpoint drops its own
 * (ckpt.c): those blocks read unverified until a scrub gives them new ones.
 */
static int apply_txn(const uint8_t *txn, uint32_t len, uint32_t nrec, uint64_t seq, uint64_t pos,
		     bool salvage, int (*apply)(void *ctx, const struct journal_rec *rec),
		     void *ctx, struct journal_replay_info *info)
{
	GArray *recs = g_array_new(FALSE, TRUE, sizeof(struct journal_rec));
	struct layout_rd rd;
	struct journal_rec r;
	char *what = NULL;
	guint i;
	int rc = 0;

	layout_rd_init(&rd, txn + sizeof(struct layout_txn_hdr),
		       len - sizeof(struct layout_txn_hdr));
	while (recs->len < nrec && !decode_rec(&rd, &r))
		g_array_append_val(recs, r);
	if (rd.err) {
		g_free(r.name);
		what = g_strdup_printf("record %u of %u (type %u) does not parse", recs->len + 1,
				       nrec, r.type);
	} else if (layout_rd_left(&rd)) {
		what = g_strdup_printf("%zu bytes follow its %u records", layout_rd_left(&rd),
				       nrec);
	}
	if (what && !salvage) {
		info->torn = true;
		info->stop_reason = g_strdup_printf("transaction %" G_GUINT64_FORMAT " at journal "
						    "offset %" G_GUINT64_FORMAT " is malformed: %s",
						    (guint64)seq, (guint64)pos, what);
		rc = -EUCLEAN;
	} else if (what) {
		unsigned int csums = 0;
		char *msg;

		for (i = 0; i < recs->len; i++) {
			struct journal_rec *rec = &g_array_index(recs, struct journal_rec, i);

			rec->untrusted = rec->type == LAYOUT_REC_CSUM ||
					 rec->type == LAYOUT_REC_CSUM_AHEAD;
			csums += rec->untrusted;
		}
		msg = g_strdup_printf("journal: transaction %" G_GUINT64_FORMAT " at offset %"
				      G_GUINT64_FORMAT " is malformed: %s; %u records applied, the "
				      "rest dropped%s", (guint64)seq, (guint64)pos, what, recs->len,
				      csums ? "; the data block checksums its records set are "
				      "dropped (rmemfs-ctl scrub gives them new ones)" : "");
		if (!info->damage)
			info->damage = g_ptr_array_new_with_free_func(g_free);
		g_ptr_array_add(info->damage, msg);
	}
	for (i = 0; i < recs->len && !rc; i++)
		rc = apply(ctx, &g_array_index(recs, struct journal_rec, i));
	g_free(what);
	recs_free(recs);
	return rc;
}

void journal_replay_info_clear(struct journal_replay_info *info)
{
	g_free(info->stop_reason);
	if (info->damage)
		g_ptr_array_free(info->damage, TRUE);
	memset(info, 0, sizeof(*info));
}

/* replay transactions from area offset pos on, through window w */
static int replay_loop(struct journal *j, struct window *w, uint64_t pos, uint64_t gen,
		       uint64_t first_seq, bool salvage,
		       int (*apply)(void *ctx, const struct journal_rec *rec), void *ctx,
		       struct journal_replay_info *info)
{
	uint64_t expect = first_seq;
	int rc = 0;

	memset(info, 0, sizeof(*info));
	info->last_seq = first_seq - 1;
	info->bytes = pos;
	for (;;) {
		struct layout_txn_hdr h;
		const uint8_t *p;
		uint8_t *copy;
		uint32_t len;

		p = window_get(w, pos, sizeof(h), &rc);
		if (!p) {
			if (!rc)
				info->stop_reason = g_strdup(w->short_read ? "end of the bytes read" :
								 "end of the journal area");
			break;
		}
		memcpy(&h, p, sizeof(h));
		if (!txn_hdr_ok(j, &h, gen, expect, pos, info))
			break;
		len = le32toh(h.len);
		p = window_get(w, pos, len, &rc);
		if (!p) {
			if (!rc && w->short_read) {
				info->stop_reason = g_strdup("end of the bytes read");
			} else if (!rc) {
				info->torn = true;
				info->stop_reason = g_strdup("transaction runs past the area");
			}
			break;
		}
		copy = g_memdup2(p, len);
		memset(copy + offsetof(struct layout_txn_hdr, crc), 0, 4);
		if (layout_crc(copy, len) != le32toh(h.crc)) {
			g_free(copy);
			info->torn = true;
			info->stop_reason = g_strdup_printf("checksum mismatch in transaction %"
							    G_GUINT64_FORMAT " at journal offset %"
							    G_GUINT64_FORMAT,
							    (guint64)expect, (guint64)pos);
			break;
		}
		rc = apply_txn(copy, len, le32toh(h.nrec), expect, pos, salvage, apply, ctx, info);
		g_free(copy);
		if (rc)
			break;
		pos += len;
		info->txns++;
		info->bytes = pos;
		info->last_seq = expect;
		expect++;
	}
	return rc;
}

int journal_replay(struct journal *j, struct remote *r, uint64_t gen, uint64_t first_seq,
		   bool salvage, int (*apply)(void *ctx, const struct journal_rec *rec), void *ctx,
		   struct journal_replay_info *info)
{
	struct window w = {
		.r = r, .area_off = j->off, .area_len = j->len, .cap = MIN(REPLAY_WINDOW, j->len)
	};
	int rc;

	w.buf = g_malloc(w.cap);
	rc = replay_loop(j, &w, 0, gen, first_seq, salvage, apply, ctx, info);
	g_free(w.buf);
	return rc;
}

int journal_follow(struct journal *j, const uint8_t *buf, size_t len, uint64_t pos, uint64_t gen,
		   uint64_t first_seq, int (*apply)(void *ctx, const struct journal_rec *rec),
		   void *ctx, struct journal_replay_info *info, bool *more)
{
	struct window w = {
		.area_off = j->off, .area_len = j->len, .buf = (uint8_t *)buf, .cap = len,
		.base = pos, .have = len,
	};
	int rc;

	rc = replay_loop(j, &w, pos, gen, first_seq, false, apply, ctx, info);
	*more = w.short_read;
	return rc;
}
