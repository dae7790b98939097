/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * layout.h - the on-pool format of rmemfs (format version 3; versions 1 and 2
 * are read and upgraded, see LAYOUT_VERSION).
 *
 * Pool bytes [0, fs_size):
 *
 *   [0, 4 KiB)                 superblock (struct layout_sb)
 *   [journal_off, +journal_len) journal: transactions appended from its start
 *   [slot_off[0], +slot_len)   checkpoint slot 0
 *   [slot_off[1], +slot_len)   checkpoint slot 1
 *   [data_off, +data_blocks*4 KiB) file data, META_BLOCK_SIZE blocks
 *
 * journal_len = clamp(size/64, 1 MiB, 64 MiB), slot_len = clamp(size/32,
 * 1 MiB, 256 MiB) plus room for one checksum per data block (format 2),
 * both multiples of 4 KiB (layout_geometry()). An erasure-coded member set
 * places them by its zones instead (layout_geometry_zoned()).
 *
 * Fixed-width fields are little-endian. Four superblock words are touched only
 * through 64-bit RDMA atomics (ckpt_gen, lease_owner, lease_heartbeat) or are
 * zero: how a NIC orders the bytes of an atomic word is its business, so the
 * code never mixes plain reads/writes with atomics on them (it only ever
 * writes them as zero with a plain write, at format).
 *
 * Variable-size metadata (journal records, checkpoint payload) uses LEB128
 * varints (zigzag for signed values) to keep 100,000-entry directories small;
 * the layout_wr / layout_rd helpers below encode and decode them. Readers
 * never read past their buffer: a short or malformed buffer sets a sticky
 * error (-EBADMSG) that the caller checks once.
 *
 * Integrity: the superblock's static part, every journal transaction and
 * every checkpoint carry a CRC-32C (Castagnoli) and the filesystem's fs_id
 * (from the uuid), so stale bytes of an older generation or of an earlier
 * filesystem on the same pool are never taken for current ones. Format 2
 * adds a CRC-32C of every written data block, kept in the metadata (CSUM
 * records, the checkpoint's checksum section), not beside the data.
 */
#ifndef RMEM_LAYOUT_H
#define RMEM_LAYOUT_H

#include <assert.h>
#include <linux/types.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <glib.h>

/*
 * Format 2 added data block checksums (LAYOUT_REC_CSUM / LAYOUT_REC_HOT and
 * the checkpoint's tail); format 3 write-ahead checksums (LAYOUT_REC_CSUM_AHEAD
 * and the tail's pending blocks): an in-place write's CRC is durable before
 * its data goes out. An older pool is read as it is; a read-write mount
 * upgrades it, after which an older client refuses it as newer.
 */
#define LAYOUT_VERSION 3
#define LAYOUT_VERSION_CSUM 2 /* the first format with data checksums */
#define LAYOUT_VERSION_AHEAD 3 /* the first with write-ahead checksums */
#define LAYOUT_BLOCK 4096U
#define LAYOUT_SB_SIZE 4096U
#define LAYOUT_SB_MAGIC "RMEMFS\0\0"
#define LAYOUT_MIN_POOL (8ULL << 20) /* smaller pools are refused */
/*
 * A checkpoint is built in one GByteArray (guint lengths): slots - 256 MiB
 * plus the data blocks' CRCs, 4.125 bytes a block - stay below 4 GiB, so
 * pools above about 3.7 TiB are refused (layout_geometry: -EFBIG).
 */
#define LAYOUT_SLOT_MAX ((1ULL << 32) - 2 * LAYOUT_BLOCK)

/* superblock field offsets (bytes from pool offset 0) */
#define LAYOUT_SB_STATIC_LEN 112 /* bytes covered by sb_crc */
#define LAYOUT_SB_CKPT_GEN 128 /* atomics only */
#define LAYOUT_SB_CLEAN 136 /* plain le64: 1 after a clean unmount */
#define LAYOUT_SB_LEASE_OWNER 192 /* atomics only; own 64-byte line */
#define LAYOUT_SB_LEASE_HEARTBEAT 200 /* atomics only */
#define LAYOUT_SB_LEASE_HOLDER 256 /* char[64], NUL-terminated */
#define LAYOUT_SB_LEASE_HOLDER_LEN 64
#define LAYOUT_SB_LEASE_END 320 /* [192, 320) is the lease area */
/*
 * The reader slots (readers.c): [1024, 4096) of block 0, of every member.
 * A slot: le64 owner (atomics only), 8 zero bytes, then the record the
 * reader writes with plain WRITEs (LAYOUT_READER_REC_*).
 */
#define LAYOUT_SB_READERS_OFF 1024
#define LAYOUT_READER_SLOT_SIZE 96
#define LAYOUT_READER_SLOTS 32
#define LAYOUT_READER_REC_OFF 16 /* within a slot */
#define LAYOUT_READER_REC_SIZE 80
#define LAYOUT_READER_HOST_LEN 32

struct layout_sb {
	uint8_t magic[8]; /* LAYOUT_SB_MAGIC */
	__le32 version; /* LAYOUT_VERSION */
	__le32 block_size; /* LAYOUT_BLOCK */
	__le64 fs_size; /* pool bytes the filesystem uses */
	uint8_t uuid[16];
	__le64 journal_off;
	__le64 journal_len;
	__le64 slot_off[2];
	__le64 slot_len;
	__le64 data_off;
	__le64 data_blocks;
	__le64 format_time; /* seconds since the epoch */
	__le32 sb_crc; /* crc32c of bytes [0, LAYOUT_SB_STATIC_LEN) with this field 0 */
	__le32 reserved0;
	/* 112 */
	uint8_t reserved1[16];
	/* 128 */
	__le64 ckpt_gen; /* generation of the newest complete checkpoint (slot gen & 1) */
	__le64 clean; /* 1: cleanly unmounted; 0: mounted or crashed */
	uint8_t reserved2[48];
	/* 192 */
	__le64 lease_owner; /* 0: free; else the holder's random id */
	__le64 lease_heartbeat; /* the holder adds 1 every heartbeat */
	uint8_t reserved3[48];
	/* 256 */
	char lease_holder[LAYOUT_SB_LEASE_HOLDER_LEN]; /* "host pid N" */
	/* 320 */
};

static_assert(offsetof(struct layout_sb, sb_crc) == 104, "sb_crc offset");
static_assert(offsetof(struct layout_sb, ckpt_gen) == LAYOUT_SB_CKPT_GEN, "ckpt_gen offset");
static_assert(offsetof(struct layout_sb, clean) == LAYOUT_SB_CLEAN, "clean offset");
static_assert(offsetof(struct layout_sb, lease_owner) == LAYOUT_SB_LEASE_OWNER, "lease offset");
static_assert(offsetof(struct layout_sb, lease_heartbeat) == LAYOUT_SB_LEASE_HEARTBEAT, "hb");
static_assert(offsetof(struct layout_sb, lease_holder) == LAYOUT_SB_LEASE_HOLDER, "holder");
static_assert(sizeof(struct layout_sb) == LAYOUT_SB_LEASE_END, "sb size");

/* the superblock's static part in host form */
struct layout_geom {
	uint64_t fs_size;
	uint8_t uuid[16];
	uint64_t fs_id; /* first 8 uuid bytes, little-endian: tags txns and checkpoints */
	uint64_t journal_off;
	uint64_t journal_len;
	uint64_t slot_off[2];
	uint64_t slot_len;
	uint64_t data_off;
	uint64_t data_blocks;
	uint64_t format_time;
	uint32_t version; /* the superblock's format version */
};

/* compute the geometry for a pool of size bytes; -ENOSPC below LAYOUT_MIN_POOL */
int layout_geometry(uint64_t size, struct layout_geom *g);
/*
 * An erasure-coded member set (remote.h remote_zone): its address space
 * [0, zone_end) is replicated, [zone_end, size) is stripes of `stripe`
 * bytes. The superblock and the journal fill the replicated zone (journal
 * [4 KiB, zone_end), at least 1 MiB); the checkpoint slots start at
 * zone_end, each clamp(size/256, 1 MiB, 256 MiB) plus the checksum tail,
 * rounded up to whole stripes, so the slots and the data start on stripes
 * (counted from zone_end). -ENOSPC when the journal or the data do not fit,
 * -EFBIG as layout_geometry, -EINVAL for a stripe or zone_end that is not
 * a multiple of 4 KiB.
 */
int layout_geometry_zoned(uint64_t size, uint64_t zone_end, uint64_t stripe,
			  struct layout_geom *g);
/*
 * The least bytes the replicated zone of an ec=k+m set must hold, over raw
 * bytes of member slots: the superblock and a journal of clamp(S/256,
 * 1 MiB, 64 MiB), S = raw * k / (k + m) the coded zone's estimated size.
 */
uint64_t layout_zone_min(uint64_t raw, uint32_t k, uint32_t m);
/* fill the static part of *sb (g->version; lease, ckpt_gen, clean left zero) and its crc */
void layout_sb_pack(const struct layout_geom *g, struct layout_sb *sb);

enum layout_sb_kind {
	LAYOUT_SB_RMEMFS = 0, /* valid superblock of format 1..LAYOUT_VERSION */
	LAYOUT_SB_ZERO, /* all zero outside the lease area: a fresh pool */
	LAYOUT_SB_NEWER, /* rmemfs magic, newer format version */
	LAYOUT_SB_CORRUPT, /* rmemfs magic, but bad crc / version 0 / impossible geometry */
	LAYOUT_SB_FOREIGN, /* something else */
};

/*
 * Classify block 0 (LAYOUT_SB_SIZE bytes) and, for LAYOUT_SB_RMEMFS, unpack
 * the geometry (checked against pool_size). *version gets the format version
 * found (for messages). *why (may be NULL) names what is wrong for CORRUPT.
 */
enum layout_sb_kind layout_sb_classify(const void *block0, uint64_t pool_size,
				       struct layout_geom *g, uint32_t *version, const char **why);

/* ---- member sets ---- */

/*
 * A filesystem over several memservers (remote.h). Each member's pool:
 *
 *   [0, 4 KiB)          the superblock, the same static part on every member;
 *                       each member keeps its own lease words and a copy of
 *                       ckpt_gen and clean
 *   [4 KiB, 12 KiB)     two membership record slots (record events & 1 goes
 *                       to slot events & 1, so a torn write leaves the other)
 *   [12 KiB, 64 KiB)    the write-intent map: one bit per region of units
 *                       that may be written right now (intent.c)
 *   [64 KiB, ...)       unit slots of 1 << unit_shift bytes (place.h)
 *
 * The record names every member by its pool id, its place and state, and
 * carries an event counter that every membership change raises: the newest
 * record among the members is the truth, and a member it marks lost is never
 * read. A single-server pool has no record and no unit mapping (format 1 as
 * it always was).
 */
#define LAYOUT_SET_MAGIC "RMEMSET\0"
#define LAYOUT_SET_VERSION 2 /* the newest read; a set that v1 describes is written as v1 */
#define LAYOUT_SET_REC_OFF 4096ULL /* slot 0; slot 1 follows */
#define LAYOUT_SET_REC_SIZE 4096U
#define LAYOUT_SET_INTENT_OFF (12ULL << 10)
#define LAYOUT_SET_DATA_OFF (64ULL << 10)
#define LAYOUT_SET_MAX 12U
#define LAYOUT_SET_V1_MAX 8U /* the members a version-1 record holds */
#define LAYOUT_SET_ADDR_LEN 64

enum layout_member_state {
	LAYOUT_MEMBER_IN_SYNC = 0, /* holds every copy placed on it */
	LAYOUT_MEMBER_LOST = 1, /* missed writes: never read; rebuilt after a replace */
	LAYOUT_MEMBER_REBUILDING = 2, /* a blank replacement being filled */
};

struct layout_set_member {
	__le64 pool_id;
	__le64 pool_size;
	__le32 state; /* enum layout_member_state */
	__le32 reserved;
	__le64 rebuilt; /* REBUILDING: units copied so far */
	char addr[LAYOUT_SET_ADDR_LEN]; /* "host:port" it was last reached at, NUL-terminated */
};
static_assert(sizeof(struct layout_set_member) == 96, "set member size");

struct layout_set {
	uint8_t magic[8]; /* LAYOUT_SET_MAGIC */
	__le32 version; /* 1, or 2: erasure-coded or more than LAYOUT_SET_V1_MAX members */
	__le32 crc; /* crc32c of the version's span (LAYOUT_SET_V1/V2_LEN), this field 0 */
	uint8_t set_uuid[16];
	__le64 events;
	__le32 nmembers;
	__le32 replicas;
	__le32 place; /* the index of the member holding this copy */
	__le32 unit_shift;
	__le64 member_units; /* unit slots per member */
	__le32 ec_k; /* v2: data fragments per stripe; 0: a replicated set */
	__le32 ec_m; /* v2: parity fragments; replicas is ec_m + 1 (the replicated zone) */
	__le64 rep_units; /* v2, erasure-coded: units [0, rep_units) are replicated */
	uint8_t reserved[24];
	struct layout_set_member m[LAYOUT_SET_MAX];
};
static_assert(sizeof(struct layout_set) <= LAYOUT_SET_REC_SIZE, "set record size");
static_assert(offsetof(struct layout_set, ec_k) == 64 && offsetof(struct layout_set, m) == 104,
	      "version 1's layout");
/* the bytes each version's crc covers: version 1 is 8 members, and stays so */
#define LAYOUT_SET_V1_LEN \
	(offsetof(struct layout_set, m) + LAYOUT_SET_V1_MAX * sizeof(struct layout_set_member))
#define LAYOUT_SET_V2_LEN 1256U
static_assert(sizeof(struct layout_set) == LAYOUT_SET_V2_LEN, "a larger set needs version 3");

/* the record in host form */
struct layout_set_info {
	uint8_t set_uuid[16];
	uint64_t events;
	uint32_t nmembers, replicas, unit_shift;
	uint64_t member_units;
	uint32_t ec_k, ec_m; /* 0, 0: replicated */
	uint64_t rep_units;
	struct {
		uint64_t pool_id, pool_size, rebuilt;
		enum layout_member_state state;
		char addr[LAYOUT_SET_ADDR_LEN];
	} m[LAYOUT_SET_MAX];
};

/*
 * Version 1 for a replicated set of at most LAYOUT_SET_V1_MAX members (every
 * rmemfs reads it), else version 2.
 */
void layout_set_pack(const struct layout_set_info *in, uint32_t place, struct layout_set *out);
/*
 * Unpack a record slot (LAYOUT_SET_REC_SIZE bytes). 0 with *place set;
 * -ENODATA for no record (no magic); -EBADMSG for a damaged one (crc,
 * impossible counts or codes); -EPROTONOSUPPORT for a newer version.
 */
int layout_set_unpack(const void *blk, struct layout_set_info *out, uint32_t *place);

/* ---- journal transactions ---- */

#define LAYOUT_TXN_MAGIC 0x58544d52U /* "RMTX" little-endian */

struct layout_txn_hdr {
	__le32 magic;
	__le32 crc; /* crc32c of the whole txn (header with crc 0, then records) */
	__le64 fs_id;
	__le64 gen; /* checkpoint generation this txn follows */
	__le64 seq; /* consecutive within a generation, starting at the ckpt's first_seq */
	__le32 len; /* bytes, header included */
	__le32 nrec;
};
static_assert(sizeof(struct layout_txn_hdr) == 40, "txn header size");

/* record types (one byte, then the body) */
enum layout_rec {
	LAYOUT_REC_INODE = 1, /* layout_inode: create or update attributes */
	LAYOUT_REC_INODE_FREE = 2, /* uv ino: drop inode, extents, xattrs, symlink */
	LAYOUT_REC_DIRENT_ADD = 3, /* uv dir, uv ino, uv cookie, u8 type, u8 nlen, name */
	LAYOUT_REC_DIRENT_DEL = 4, /* uv dir, u8 nlen, name */
	LAYOUT_REC_EXT_SET = 5, /* uv ino, uv fblock, uv count, uv pblock, u8 state */
	LAYOUT_REC_EXT_CLEAR = 6, /* uv ino, uv fblock, uv count */
	LAYOUT_REC_XATTR_SET = 7, /* uv ino, uv nlen, name, uv vlen, value */
	LAYOUT_REC_XATTR_DEL = 8, /* uv ino, uv nlen, name */
	LAYOUT_REC_SYMLINK = 9, /* uv ino, uv len, target */
	/* format 2 */
	LAYOUT_REC_CSUM = 10, /* uv pblock, uv count, count x le32 crc: those blocks' CRC-32Cs */
	LAYOUT_REC_HOT = 11, /* uv region, u8 hot: in-place overwrites may be in flight there */
	/* format 3 */
	LAYOUT_REC_CSUM_AHEAD = 12, /* as CSUM: an in-place write of those CRCs may be in flight */
};

/*
 * Data checksums (format 2): one CRC-32C (layout_crc) per META_BLOCK_SIZE
 * data block, over the whole block as written. A region is
 * LAYOUT_CSUM_REGION_BLOCKS data blocks: the unit the HOT records name.
 */
#define LAYOUT_CSUM_REGION_BLOCKS 4096ULL

/* bytes of the checkpoint's checksum section for nused used blocks: crcs, presence bitmap */
static inline uint64_t layout_csum_section_len(uint64_t nused)
{
	return 4 * nused + (nused + 7) / 8;
}

/* ---- checkpoints ---- */

#define LAYOUT_CKPT_MAGIC "RMCKPT\0\0"
#define LAYOUT_CKPT_HDR_SIZE 128

struct layout_ckpt_hdr {
	uint8_t magic[8];
	__le32 version; /* LAYOUT_VERSION */
	__le32 hdr_crc; /* crc32c of this header with the field 0 */
	__le64 fs_id;
	__le64 gen;
	__le64 first_seq; /* seq of the first journal txn that follows */
	__le64 payload_len;
	__le32 payload_crc;
	__le32 reserved0;
	__le64 next_ino;
	__le64 ninodes;
	__le64 data_blocks; /* bits in the allocation bitmap of the payload */
	__le64 tail_len; /* format 2: payload bytes after the bitmap (checksums, hot set) */
	uint8_t reserved1[40];
};
static_assert(sizeof(struct layout_ckpt_hdr) == LAYOUT_CKPT_HDR_SIZE, "ckpt header size");

/*
 * Inode attributes as records and checkpoints carry them: the journal's
 * LAYOUT_REC_INODE body and the head of each inode in a checkpoint.
 * Inode numbers are 1 .. LAYOUT_INO_LIMIT - 1 (a reader refuses others, so
 * the next free number can never wrap to 0).
 */
#define LAYOUT_INO_LIMIT (1ULL << 63)

struct layout_inode {
	uint64_t ino;
	uint32_t mode;
	uint32_t nlink;
	uint32_t uid;
	uint32_t gid;
	uint64_t rdev;
	uint64_t size;
	struct timespec atime;
	struct timespec mtime;
	struct timespec ctime;
};

/* extent states on the pool (checkpoints, EXT_SET records) */
enum layout_ext_state {
	LAYOUT_EXT_WRITTEN = 0, /* blocks hold file data */
	LAYOUT_EXT_UNWRITTEN = 1, /* preallocated (fallocate): reads as zeros */
};

/* ---- crc32c ---- */

uint32_t layout_crc32c(uint32_t crc, const void *buf, size_t len);
/* crc32c of a whole buffer (initial ~0, final inversion) */
uint32_t layout_crc(const void *buf, size_t len);

/* ---- varint writer / reader ---- */

size_t layout_uv_len(uint64_t v);
size_t layout_sv_len(int64_t v); /* zigzag */

/*
 * An empty array with exactly room bytes allocated (g_byte_array_sized_new
 * rounds up to a power of two: under -o swap all of it is populated and
 * locked); appends past the room still grow it.
 */
GByteArray *layout_bytes_new(guint room);
void layout_put_u8(GByteArray *b, uint8_t v);
void layout_put_uv(GByteArray *b, uint64_t v);
void layout_put_sv(GByteArray *b, int64_t v);
void layout_put_bytes(GByteArray *b, const void *p, size_t len);

struct layout_rd {
	const uint8_t *p;
	const uint8_t *end;
	int err; /* 0 or -EBADMSG, sticky */
};

void layout_rd_init(struct layout_rd *rd, const void *buf, size_t len);
uint8_t layout_get_u8(struct layout_rd *rd);
uint64_t layout_get_uv(struct layout_rd *rd);
int64_t layout_get_sv(struct layout_rd *rd);
/* pointer to the next len bytes (NULL and err set if short) */
const uint8_t *layout_get_bytes(struct layout_rd *rd, size_t len);
static inline size_t layout_rd_left(const struct layout_rd *rd)
{
	return (size_t)(rd->end - rd->p);
}

/* inode attribute bodies */
size_t layout_inode_len(const struct layout_inode *in);
void layout_put_inode(GByteArray *b, const struct layout_inode *in);
/* -EBADMSG also for out-of-range values (nsec >= 1e9, 32-bit fields, ino 0 or >= the limit) */
int layout_get_inode(struct layout_rd *rd, struct layout_inode *in);
/* a file type an inode may have, and no bits beyond type and permissions */
bool layout_mode_ok(uint32_t mode);
/* a directory entry name: 1..255 bytes, no '/' or NUL, not "." or ".." */
bool layout_name_ok(const void *name, size_t nlen);
/* an extended attribute: a name of 1..255 bytes without NUL, a value of at most 64 KiB */
#define LAYOUT_XATTR_VALUE_MAX 65536
bool layout_xattr_ok(const void *name, size_t nlen, size_t vlen);

/* the bodies of a directory entry and of an extent, alike in journal records and checkpoints */
void layout_put_dirent(GByteArray *b, uint64_t ino, uint64_t cookie, uint8_t type, const char *name,
		       uint8_t nlen);
void layout_put_ext(GByteArray *b, uint64_t fblock, uint64_t count, uint64_t pblock, uint8_t state);
/* and their readers: 0 or -EBADMSG (sticky); *name points into the buffer */
int layout_get_dirent(struct layout_rd *rd, uint64_t *ino, uint64_t *cookie, uint8_t *type,
		      const uint8_t **name, uint8_t *nlen);
int layout_get_ext(struct layout_rd *rd, uint64_t *fblock, uint64_t *count, uint64_t *pblock,
		   uint8_t *state);
/* a length (uv) and that many bytes: the bytes (*len of them), NULL and err set if short */
const uint8_t *layout_get_counted(struct layout_rd *rd, size_t *len);

#endif /* RMEM_LAYOUT_H */
