// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * layout.c - on-pool format helpers: geometry, superblock pack/classify,
 * member set records, CRC-32C, and the varint writer/reader the journal and
 * checkpoints use.
 * Pure functions on memory; nothing here touches the pool.
 */
#define G_LOG_DOMAIN "rmemfs-layout"

#include "layout.h"
#include "ec_codec.h"

#include <endian.h>
#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include <isa-l/crc.h>

/* ---- geometry and superblock ---- */

static uint64_t clamp_area(uint64_t v, uint64_t lo, uint64_t hi)
{
	if (v < lo)
		v = lo;
	if (v > hi)
		v = hi;
	return v & ~(uint64_t)(LAYOUT_BLOCK - 1);
}

static uint64_t round_up(uint64_t v, uint64_t to)
{
	return (v + to - 1) / to * to;
}

/*
 * Room for the checkpoint's tail on top of a slot (its worst case: every
 * data block used, every region hot), so the metadata capacity stays what
 * format 1 had. Sized for the data blocks there would be after meta_end
 * without it, an upper bound.
 */
static uint64_t slot_tail(uint64_t size, uint64_t meta_end)
{
	uint64_t d, regions, tail;

	if (size <= meta_end)
		return 0;
	d = (size - meta_end) / LAYOUT_BLOCK;
	regions = (d + LAYOUT_CSUM_REGION_BLOCKS - 1) / LAYOUT_CSUM_REGION_BLOCKS;
	tail = layout_csum_section_len(d) + 4 + regions * layout_uv_len(d);
	return round_up(tail, LAYOUT_BLOCK);
}

/* the two slots from slot_off[0] on, then the data: the rest of g from slot_len */
static int place_slots(uint64_t size, struct layout_geom *g)
{
	if (g->slot_len > LAYOUT_SLOT_MAX)
		return -EFBIG;
	g->slot_off[1] = g->slot_off[0] + g->slot_len;
	g->data_off = g->slot_off[1] + g->slot_len;
	if (g->data_off >= size)
		return -ENOSPC;
	g->data_blocks = (size - g->data_off) / LAYOUT_BLOCK;
	if (g->data_blocks < 256)
		return -ENOSPC;
	return 0;
}

int layout_geometry(uint64_t size, struct layout_geom *g)
{
	memset(g, 0, sizeof(*g));
	if (size < LAYOUT_MIN_POOL)
		return -ENOSPC;
	g->fs_size = size;
	g->journal_off = LAYOUT_SB_SIZE;
	g->journal_len = clamp_area(size / 64, 1ULL << 20, 64ULL << 20);
	g->slot_len = clamp_area(size / 32, 1ULL << 20, 256ULL << 20);
	g->version = LAYOUT_VERSION;
	g->slot_len += slot_tail(size, g->journal_off + g->journal_len + 2 * g->slot_len);
	g->slot_off[0] = g->journal_off + g->journal_len;
	return place_slots(size, g);
}

uint64_t layout_zone_min(uint64_t raw, uint32_t k, uint32_t m)
{
	uint64_t coded = raw * k / (k + m);

	return LAYOUT_SB_SIZE + clamp_area(coded / 256, 1ULL << 20, 64ULL << 20);
}

int layout_geometry_zoned(uint64_t size, uint64_t zone_end, uint64_t stripe,
			  struct layout_geom *g)
{
	uint64_t slot;

	memset(g, 0, sizeof(*g));
	if (!stripe || stripe % LAYOUT_BLOCK || zone_end % LAYOUT_BLOCK)
		return -EINVAL;
	if (size < LAYOUT_MIN_POOL || zone_end < LAYOUT_SB_SIZE + (1ULL << 20) || zone_end >= size)
		return -ENOSPC;
	g->fs_size = size;
	g->journal_off = LAYOUT_SB_SIZE;
	g->journal_len = zone_end - LAYOUT_SB_SIZE;
	g->version = LAYOUT_VERSION;
	slot = clamp_area(size / 256, 1ULL << 20, 256ULL << 20);
	g->slot_len = round_up(slot + slot_tail(size, zone_end + 2 * slot), stripe);
	g->slot_off[0] = zone_end;
	return place_slots(size, g);
}

void layout_sb_pack(const struct layout_geom *g, struct layout_sb *sb)
{
	memset(sb, 0, sizeof(*sb));
	memcpy(sb->magic, LAYOUT_SB_MAGIC, 8);
	sb->version = htole32(g->version);
	sb->block_size = htole32(LAYOUT_BLOCK);
	sb->fs_size = htole64(g->fs_size);
	memcpy(sb->uuid, g->uuid, 16);
	sb->journal_off = htole64(g->journal_off);
	sb->journal_len = htole64(g->journal_len);
	sb->slot_off[0] = htole64(g->slot_off[0]);
	sb->slot_off[1] = htole64(g->slot_off[1]);
	sb->slot_len = htole64(g->slot_len);
	sb->data_off = htole64(g->data_off);
	sb->data_blocks = htole64(g->data_blocks);
	sb->format_time = htole64(g->format_time);
	sb->sb_crc = htole32(layout_crc(sb, LAYOUT_SB_STATIC_LEN));
}

static bool area_ok(uint64_t off, uint64_t len, uint64_t lo, uint64_t size)
{
	return off >= lo && len > 0 && off % LAYOUT_BLOCK == 0 && len % LAYOUT_BLOCK == 0 &&
	       off + len > off && off + len <= size;
}

enum layout_sb_kind layout_sb_classify(const void *block0, uint64_t pool_size,
				       struct layout_geom *g, uint32_t *version, const char **why)
{
	const uint8_t *b = block0;
	struct layout_sb sb;
	uint32_t crc;
	size_t i;

	*version = 0;
	if (why)
		*why = NULL;
	memcpy(&sb, b, sizeof(sb));
	if (memcmp(sb.magic, LAYOUT_SB_MAGIC, 8) != 0) {
		for (i = 0; i < LAYOUT_SB_SIZE; i++) {
			if (i == LAYOUT_SB_LEASE_OWNER) {
				i = LAYOUT_SB_LEASE_END - 1;
				continue;
			}
			if (b[i])
				return LAYOUT_SB_FOREIGN;
		}
		return LAYOUT_SB_ZERO;
	}
	*version = le32toh(sb.version);
	if (*version > LAYOUT_VERSION)
		return LAYOUT_SB_NEWER;
	if (*version == 0) {
		if (why)
			*why = "format version 0";
		return LAYOUT_SB_CORRUPT;
	}
	crc = le32toh(sb.sb_crc);
	sb.sb_crc = 0;
	if (layout_crc(&sb, LAYOUT_SB_STATIC_LEN) != crc) {
		if (why)
			*why = "superblock checksum mismatch";
		return LAYOUT_SB_CORRUPT;
	}
	memset(g, 0, sizeof(*g));
	g->fs_size = le64toh(sb.fs_size);
	memcpy(g->uuid, sb.uuid, 16);
	memcpy(&g->fs_id, sb.uuid, 8);
	g->fs_id = le64toh(g->fs_id);
	g->journal_off = le64toh(sb.journal_off);
	g->journal_len = le64toh(sb.journal_len);
	g->slot_off[0] = le64toh(sb.slot_off[0]);
	g->slot_off[1] = le64toh(sb.slot_off[1]);
	g->slot_len = le64toh(sb.slot_len);
	g->data_off = le64toh(sb.data_off);
	g->data_blocks = le64toh(sb.data_blocks);
	g->format_time = le64toh(sb.format_time);
	g->version = *version;
	if (le32toh(sb.block_size) != LAYOUT_BLOCK) {
		if (why)
			*why = "unsupported block size";
		return LAYOUT_SB_CORRUPT;
	}
	if (g->fs_size > pool_size) {
		if (why)
			*why = "filesystem is larger than the pool";
		return LAYOUT_SB_CORRUPT;
	}
	if (!area_ok(g->journal_off, g->journal_len, LAYOUT_SB_SIZE, g->fs_size) ||
	    !area_ok(g->slot_off[0], g->slot_len, g->journal_off + g->journal_len, g->fs_size) ||
	    !area_ok(g->slot_off[1], g->slot_len, g->slot_off[0] + g->slot_len, g->fs_size) ||
	    g->data_blocks == 0 ||
	    !area_ok(g->data_off, g->data_blocks * LAYOUT_BLOCK, g->slot_off[1] + g->slot_len,
		     g->fs_size) ||
	    g->data_blocks > g->fs_size / LAYOUT_BLOCK) {
		if (why)
			*why = "impossible geometry";
		return LAYOUT_SB_CORRUPT;
	}
	return LAYOUT_SB_RMEMFS;
}

/* ---- member set records ---- */

static bool set_is_v2(const struct layout_set_info *in)
{
	return in->ec_k || in->nmembers > LAYOUT_SET_V1_MAX;
}

void layout_set_pack(const struct layout_set_info *in, uint32_t place, struct layout_set *out)
{
	bool v2 = set_is_v2(in);
	uint32_t i;

	memset(out, 0, sizeof(*out));
	memcpy(out->magic, LAYOUT_SET_MAGIC, 8);
	out->version = htole32(v2 ? 2 : 1);
	memcpy(out->set_uuid, in->set_uuid, 16);
	out->events = htole64(in->events);
	out->nmembers = htole32(in->nmembers);
	out->replicas = htole32(in->replicas);
	out->place = htole32(place);
	out->unit_shift = htole32(in->unit_shift);
	out->member_units = htole64(in->member_units);
	if (v2) {
		out->ec_k = htole32(in->ec_k);
		out->ec_m = htole32(in->ec_m);
		out->rep_units = htole64(in->rep_units);
	}
	for (i = 0; i < in->nmembers && i < LAYOUT_SET_MAX; i++) {
		out->m[i].pool_id = htole64(in->m[i].pool_id);
		out->m[i].pool_size = htole64(in->m[i].pool_size);
		out->m[i].state = htole32((uint32_t)in->m[i].state);
		out->m[i].rebuilt = htole64(in->m[i].rebuilt);
		memcpy(out->m[i].addr, in->m[i].addr, LAYOUT_SET_ADDR_LEN);
		out->m[i].addr[LAYOUT_SET_ADDR_LEN - 1] = 0;
	}
	out->crc = htole32(layout_crc(out, v2 ? LAYOUT_SET_V2_LEN : LAYOUT_SET_V1_LEN));
}

/* the erasure code of a version-2 record, or its absence, is one this rmemfs can hold */
static bool set_code_ok(const struct layout_set_info *s)
{
	uint64_t zone;

	if (!s->ec_k)
		return !s->ec_m && !s->rep_units && s->replicas <= 3;
	if (s->ec_k < EC_MIN_K || s->ec_k > EC_MAX_K || s->ec_m < EC_MIN_M || s->ec_m > EC_MAX_M ||
	    s->ec_k + s->ec_m > s->nmembers || s->replicas != s->ec_m + 1 || !s->rep_units)
		return false;
	/* the replicated zone's copies fit in the members */
	return !__builtin_mul_overflow(s->rep_units, (uint64_t)s->replicas, &zone) &&
	       zone <= (uint64_t)s->nmembers * s->member_units;
}

int layout_set_unpack(const void *blk, struct layout_set_info *out, uint32_t *place)
{
	struct layout_set rec;
	uint32_t crc, i, ver;

	memcpy(&rec, blk, sizeof(rec));
	memset(out, 0, sizeof(*out));
	if (memcmp(rec.magic, LAYOUT_SET_MAGIC, 8))
		return -ENODATA;
	ver = le32toh(rec.version);
	if (ver > LAYOUT_SET_VERSION)
		return -EPROTONOSUPPORT;
	crc = le32toh(rec.crc);
	rec.crc = 0;
	if (ver == 0 || layout_crc(&rec, ver == 1 ? LAYOUT_SET_V1_LEN : LAYOUT_SET_V2_LEN) != crc)
		return -EBADMSG;
	memcpy(out->set_uuid, rec.set_uuid, 16);
	out->events = le64toh(rec.events);
	out->nmembers = le32toh(rec.nmembers);
	out->replicas = le32toh(rec.replicas);
	out->unit_shift = le32toh(rec.unit_shift);
	out->member_units = le64toh(rec.member_units);
	if (ver >= 2) {
		out->ec_k = le32toh(rec.ec_k);
		out->ec_m = le32toh(rec.ec_m);
		out->rep_units = le64toh(rec.rep_units);
	}
	*place = le32toh(rec.place);
	if (out->nmembers < 1 || out->nmembers > (ver == 1 ? LAYOUT_SET_V1_MAX : LAYOUT_SET_MAX) ||
	    out->replicas < 1 || out->replicas > out->nmembers || *place >= out->nmembers ||
	    out->unit_shift < 12 || out->unit_shift > 30 || !set_code_ok(out))
		return -EBADMSG;
	for (i = 0; i < out->nmembers; i++) {
		out->m[i].pool_id = le64toh(rec.m[i].pool_id);
		out->m[i].pool_size = le64toh(rec.m[i].pool_size);
		out->m[i].state = (enum layout_member_state)le32toh(rec.m[i].state);
		out->m[i].rebuilt = le64toh(rec.m[i].rebuilt);
		memcpy(out->m[i].addr, rec.m[i].addr, LAYOUT_SET_ADDR_LEN);
		out->m[i].addr[LAYOUT_SET_ADDR_LEN - 1] = 0;
		if (out->m[i].state > LAYOUT_MEMBER_REBUILDING)
			return -EBADMSG;
	}
	return 0;
}

/* ---- crc32c (Castagnoli): ISA-L's for pages and more, the crc32 instruction below ---- */

/*
 * Buffers under a page (journal transactions, records): the CPU's crc32
 * instruction. ISA-L's routine for them is an AVX-512 one, whose first use
 * after a thread switch costs the daemon about 20x its loop time
 * (ARCHITECTURE "Data checksums").
 */
#if defined(__x86_64__) && defined(__GNUC__)
#define SMALL_CRC_MAX 4096U

__attribute__((target("sse4.2"))) static uint32_t crc32c_small(uint32_t crc, const uint8_t *p,
								 size_t len)
{
	uint64_t c = crc;

	while (len >= 8) {
		uint64_t v;

		memcpy(&v, p, 8);
		c = __builtin_ia32_crc32di(c, v);
		p += 8;
		len -= 8;
	}
	crc = (uint32_t)c;
	while (len--)
		crc = __builtin_ia32_crc32qi(crc, *p++);
	return crc;
}

static bool small_crc_ok(void)
{
	static int ok = -1;

	if (ok < 0)
		ok = __builtin_cpu_supports("sse4.2");
	return ok;
}
#else
#define SMALL_CRC_MAX 0U
static uint32_t crc32c_small(uint32_t crc, const uint8_t *p, size_t len) { return crc; }
static bool small_crc_ok(void) { return false; }
#endif

uint32_t layout_crc32c(uint32_t crc, const void *buf, size_t len)
{
	const unsigned char *p = buf;

	if (len < SMALL_CRC_MAX && small_crc_ok())
		return crc32c_small(crc, p, len);

	while (len > 0) { /* ISA-L takes an int length */
		int n = len > (1U << 30) ? 1 << 30 : (int)len;

		crc = crc32_iscsi((unsigned char *)p, n, crc);
		p += n;
		len -= n;
	}
	return crc;
}

uint32_t layout_crc(const void *buf, size_t len)
{
	return ~layout_crc32c(~0U, buf, len);
}

/* ---- varints ---- */

size_t layout_uv_len(uint64_t v)
{
	size_t n = 1;

	while (v >= 0x80) {
		v >>= 7;
		n++;
	}
	return n;
}

static uint64_t zigzag(int64_t v)
{
	return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}

size_t layout_sv_len(int64_t v)
{
	return layout_uv_len(zigzag(v));
}

void layout_put_u8(GByteArray *b, uint8_t v)
{
	g_byte_array_append(b, &v, 1);
}

void layout_put_uv(GByteArray *b, uint64_t v)
{
	uint8_t tmp[10];
	size_t n = 0;

	while (v >= 0x80) {
		tmp[n++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	tmp[n++] = (uint8_t)v;
	g_byte_array_append(b, tmp, (guint)n);
}

void layout_put_sv(GByteArray *b, int64_t v)
{
	layout_put_uv(b, zigzag(v));
}

GByteArray *layout_bytes_new(guint room)
{
	GByteArray *b = g_byte_array_new_take(g_malloc(MAX(room, 1U)), MAX(room, 1U));

	g_byte_array_set_size(b, 0);
	return b;
}

void layout_put_bytes(GByteArray *b, const void *p, size_t len)
{
	if (len)
		g_byte_array_append(b, p, (guint)len);
}

void layout_rd_init(struct layout_rd *rd, const void *buf, size_t len)
{
	rd->p = buf;
	rd->end = rd->p + len;
	rd->err = 0;
}

uint8_t layout_get_u8(struct layout_rd *rd)
{
	if (rd->err || rd->p >= rd->end) {
		rd->err = -EBADMSG;
		return 0;
	}
	return *rd->p++;
}

uint64_t layout_get_uv(struct layout_rd *rd)
{
	uint64_t v = 0;
	unsigned int shift = 0;

	while (!rd->err) {
		uint8_t c;

		if (rd->p >= rd->end || shift > 63) {
			rd->err = -EBADMSG;
			break;
		}
		c = *rd->p++;
		if (shift == 63 && (c & 0x7e)) {
			rd->err = -EBADMSG;
			break;
		}
		v |= (uint64_t)(c & 0x7f) << shift;
		if (!(c & 0x80))
			return v;
		shift += 7;
	}
	return 0;
}

int64_t layout_get_sv(struct layout_rd *rd)
{
	uint64_t u = layout_get_uv(rd);

	return (int64_t)(u >> 1) ^ -(int64_t)(u & 1);
}

const uint8_t *layout_get_bytes(struct layout_rd *rd, size_t len)
{
	const uint8_t *p;

	if (rd->err || (size_t)(rd->end - rd->p) < len) {
		rd->err = -EBADMSG;
		return NULL;
	}
	p = rd->p;
	rd->p += len;
	return p;
}

/* ---- inode attributes ---- */

static size_t ts_len(const struct timespec *ts)
{
	return layout_sv_len(ts->tv_sec) + layout_uv_len((uint64_t)ts->tv_nsec);
}

size_t layout_inode_len(const struct layout_inode *in)
{
	return layout_uv_len(in->ino) + layout_uv_len(in->mode) + layout_uv_len(in->nlink) +
	       layout_uv_len(in->uid) + layout_uv_len(in->gid) + layout_uv_len(in->rdev) +
	       layout_uv_len(in->size) + ts_len(&in->atime) + ts_len(&in->mtime) +
	       ts_len(&in->ctime);
}

static void put_ts(GByteArray *b, const struct timespec *ts)
{
	layout_put_sv(b, ts->tv_sec);
	layout_put_uv(b, (uint64_t)ts->tv_nsec);
}

void layout_put_inode(GByteArray *b, const struct layout_inode *in)
{
	layout_put_uv(b, in->ino);
	layout_put_uv(b, in->mode);
	layout_put_uv(b, in->nlink);
	layout_put_uv(b, in->uid);
	layout_put_uv(b, in->gid);
	layout_put_uv(b, in->rdev);
	layout_put_uv(b, in->size);
	put_ts(b, &in->atime);
	put_ts(b, &in->mtime);
	put_ts(b, &in->ctime);
}

void layout_put_dirent(GByteArray *b, uint64_t ino, uint64_t cookie, uint8_t type, const char *name,
		       uint8_t nlen)
{
	layout_put_uv(b, ino);
	layout_put_uv(b, cookie);
	layout_put_u8(b, type);
	layout_put_u8(b, nlen);
	layout_put_bytes(b, name, nlen);
}

void layout_put_ext(GByteArray *b, uint64_t fblock, uint64_t count, uint64_t pblock, uint8_t state)
{
	layout_put_uv(b, fblock);
	layout_put_uv(b, count);
	layout_put_uv(b, pblock);
	layout_put_u8(b, state);
}

int layout_get_dirent(struct layout_rd *rd, uint64_t *ino, uint64_t *cookie, uint8_t *type,
		      const uint8_t **name, uint8_t *nlen)
{
	*ino = layout_get_uv(rd);
	*cookie = layout_get_uv(rd);
	*type = layout_get_u8(rd);
	*nlen = layout_get_u8(rd);
	*name = layout_get_bytes(rd, *nlen);
	return rd->err;
}

int layout_get_ext(struct layout_rd *rd, uint64_t *fblock, uint64_t *count, uint64_t *pblock,
		   uint8_t *state)
{
	*fblock = layout_get_uv(rd);
	*count = layout_get_uv(rd);
	*pblock = layout_get_uv(rd);
	*state = layout_get_u8(rd);
	return rd->err;
}

const uint8_t *layout_get_counted(struct layout_rd *rd, size_t *len)
{
	uint64_t n = layout_get_uv(rd);

	*len = 0;
	if (rd->err || n > layout_rd_left(rd)) {
		rd->err = -EBADMSG;
		return NULL;
	}
	*len = (size_t)n;
	return layout_get_bytes(rd, *len);
}

static uint32_t get_u32(struct layout_rd *rd)
{
	uint64_t v = layout_get_uv(rd);

	if (v > UINT32_MAX)
		rd->err = -EBADMSG;
	return (uint32_t)v;
}

static void get_ts(struct layout_rd *rd, struct timespec *ts)
{
	uint64_t nsec;

	ts->tv_sec = (time_t)layout_get_sv(rd);
	nsec = layout_get_uv(rd);
	if (nsec >= 1000000000ULL)
		rd->err = -EBADMSG;
	ts->tv_nsec = (long)nsec;
}

int layout_get_inode(struct layout_rd *rd, struct layout_inode *in)
{
	in->ino = layout_get_uv(rd);
	in->mode = get_u32(rd);
	in->nlink = get_u32(rd);
	in->uid = get_u32(rd);
	in->gid = get_u32(rd);
	in->rdev = layout_get_uv(rd);
	in->size = layout_get_uv(rd);
	get_ts(rd, &in->atime);
	get_ts(rd, &in->mtime);
	get_ts(rd, &in->ctime);
	if (!rd->err &&
	    (in->ino == 0 || in->ino >= LAYOUT_INO_LIMIT || in->size > (uint64_t)INT64_MAX))
		rd->err = -EBADMSG;
	return rd->err;
}

bool layout_mode_ok(uint32_t mode)
{
	if (mode & ~(uint32_t)(S_IFMT | 07777))
		return false;
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

bool layout_name_ok(const void *name, size_t nlen)
{
	const char *s = name;

	if (!nlen || nlen > 255 || memchr(s, '/', nlen) || memchr(s, 0, nlen))
		return false;
	return !(nlen == 1 && s[0] == '.') && !(nlen == 2 && s[0] == '.' && s[1] == '.');
}

bool layout_xattr_ok(const void *name, size_t nlen, size_t vlen)
{
	return nlen && nlen <= 255 && !memchr(name, 0, nlen) && vlen <= LAYOUT_XATTR_VALUE_MAX;
}
