/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * ckpt.h - checkpoints: the whole metadata serialised into one of the two
 * checkpoint slots (slot gen & 1), so the journal can start over.
 *
 * A checkpoint is struct layout_ckpt_hdr (CRC'd) and a CRC'd payload: every
 * inode in ino order (attributes, xattrs, symlink target, extents, directory
 * entries in cookie order; encoding in inode.c's header comment), then the
 * allocation bitmap of the data area built from those extents, then (format
 * 2) the tail: the used blocks' checksums and the hot regions (csum.h), its
 * length in the header. A version-1 pool keeps version-1 checkpoints until a
 * read-write mount upgrades it. Committing it
 * is commit.c's job: write the slot, then CAS the superblock's ckpt_gen.
 *
 * Functions return 0 or -errno.
 */
#ifndef RMEM_CKPT_H
#define RMEM_CKPT_H

#include <stdbool.h>
#include <stdint.h>

#include <glib.h>

struct meta;

/*
 * Serialise m (m->lock held) as generation gen whose journal starts at
 * first_seq. FRESH extents are left out. -ENOSPC if it would not fit a slot.
 */
int ckpt_serialize(struct meta *m, uint64_t gen, uint64_t first_seq, GByteArray **out);
/* write a serialised checkpoint to the slot of its generation (no lock needed) */
int ckpt_write(struct meta *m, uint64_t gen, const GByteArray *buf);
/*
 * Load checkpoint gen into an empty meta (no allocator yet). Damage that
 * can be worked around (an entry with an invalid name, an extent beyond the
 * data area) is dropped and recorded in m->load.problems. A checkpoint that
 * cannot be taken as stored fails with *why (g_malloc'd) naming the damage:
 * -ENODATA header missing or damaged, or an impossible payload length;
 * -EBADMSG payload checksum mismatch; -EUCLEAN a payload that does not
 * parse (which record, which inode, at which payload offset); or the error
 * of reading the slot. Nothing is built then.
 *
 * salvage (rmemfs-fsck): a payload with a checksum mismatch or one that does
 * not parse is salvaged instead: every record that can be found is built,
 * with the valid items of damaged ones, and each thing dropped is recorded
 * as a problem (encoding and resynchronisation rules in ckpt.c). Only
 * -ENODATA and read errors fail then. Time and memory stay linear in the
 * slot size whatever the bytes.
 */
int ckpt_load(struct meta *m, uint64_t gen, bool salvage, uint64_t *first_seq, char **why);
/* the first journal seq of checkpoint gen, from its header alone: 0 or -errno (-ENODATA damaged) */
int ckpt_first_seq(struct meta *m, uint64_t gen, uint64_t *first_seq);

#endif /* RMEM_CKPT_H */
