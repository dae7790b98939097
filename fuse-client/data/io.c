// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * io.c - file data between FUSE buffers and the pool (see io.h for the
 * invariants and the locking).
 *
 * Each request is cut into steps of at most IO_CHUNK bytes (a FUSE read or
 * write of up to 1 MiB is one step): one extent_map() for the step, one
 * remote_readv()/remote_writev() carrying every piece of it (data, and the
 * zero padding of fresh blocks), then for writes one extent_write_done().
 */
#define G_LOG_DOMAIN "rmemfs-io"

#include "io.h"

#include "follow.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>

#include <glib.h>

#include "clock.h"
#include "extent.h"
#include "remote.h"
#include "units.h"
#include "verify.h"
#include "worker.h"

#define IO_BS ((uint64_t)META_BLOCK_SIZE)
#define IO_CHUNK (1U << 20) /* bytes per step */
#define IO_MAX_EXT ((IO_CHUNK / META_BLOCK_SIZE) + 1) /* blocks an unaligned step spans */
#define IO_SCRUB_BLOCKS 64U /* blocks the scrub checks at a time */

enum io_scrub_state {
	IO_SCRUB_IDLE,
	IO_SCRUB_RUNNING,
	IO_SCRUB_DONE,
	IO_SCRUB_FAILED,
};

static const char *const io_scrub_name[] = { "idle", "running", "done", "failed" };

struct io_lock {
	uint64_t ino; /* the hash key */
	unsigned int refs; /* protected by io->locks_mutex */
	pthread_rwlock_t rw; /* the inode's data lock */
};

struct io {
	struct meta *meta;
	struct remote *remote;
	bool update_atime;
	pthread_mutex_t locks_mutex; /* protects locks and every io_lock.refs */
	GHashTable *locks; /* &io_lock.ino -> struct io_lock */
	struct io_stats stats; /* updated with __atomic builtins */
	struct verify *verify; /* checksums of what is read and written */
	/* the scrub (io_scrub_start): one at a time, on its own thread */
	pthread_mutex_t scrub_lock; /* serialises starting and stopping it */
	struct worker scrub;
	_Atomic int scrub_state; /* enum io_scrub_state */
	_Atomic uint64_t scrub_done, scrub_total, scrub_errors, scrub_repaired, scrub_filled;
	/* a following reader's gate (io_follow): reads in flight per parity of the epoch */
	bool follower;
	_Atomic unsigned int gate_epoch;
	_Atomic unsigned long gate_busy[2];
};

/*
 * A read enters the gate before it maps blocks and leaves once their bytes
 * are here: io_drain moves the epoch on and waits out the reads of the old
 * one, so when it returns none that mapped blocks before it was called is
 * in flight (the follower then publishes what it applied). A read that
 * entered as the epoch moved counts again under the new one.
 */
static unsigned int gate_enter(struct io *io)
{
	unsigned int e;

	if (!io->follower)
		return 0;
	for (;;) {
		e = atomic_load(&io->gate_epoch);
		atomic_fetch_add(&io->gate_busy[e & 1], 1);
		if (atomic_load(&io->gate_epoch) == e)
			return e;
		atomic_fetch_sub(&io->gate_busy[e & 1], 1);
	}
}

/* leave the gate; a read that completed is checked against the writer's fence (follow.h) */
static int gate_leave(struct io *io, unsigned int e, int rc)
{
	if (!io->follower)
		return rc;
	if (rc >= 0 && follow_read_ok(io->meta) < 0)
		rc = -EIO;
	atomic_fetch_sub(&io->gate_busy[e & 1], 1);
	return rc;
}

void io_follow(struct io *io)
{
	io->follower = true;
	verify_destroy(io->verify);
	io->verify = verify_new(io->meta, io->remote, true);
}

void io_drain(struct io *io)
{
	unsigned int e = atomic_fetch_add(&io->gate_epoch, 1);

	while (atomic_load(&io->gate_busy[e & 1]))
		g_usleep(100);
}

static inline void io_count(uint64_t *counter, uint64_t n)
{
	__atomic_add_fetch(counter, n, __ATOMIC_RELAXED);
}

/* a pool access failed: say so, unless the pool is lost (remote_fail said that, once) */
static void G_GNUC_PRINTF(2, 3) io_report(struct io *io, const char *fmt, ...)
{
	va_list ap;

	if (remote_failed(io->remote))
		return;
	va_start(ap, fmt);
	g_logv(G_LOG_DOMAIN, G_LOG_LEVEL_MESSAGE, fmt, ap);
	va_end(ap);
}

/* set bits [from, to) of a bit mask */
static void mask_set(uint64_t *mask, uint64_t from, uint64_t to)
{
	for (; from < to; from++)
		mask[from / 64] |= 1ULL << (from % 64);
}

static inline uint64_t round_down(uint64_t v)
{
	return v & ~(IO_BS - 1);
}

static inline uint64_t round_up(uint64_t v)
{
	return (v + IO_BS - 1) & ~(IO_BS - 1);
}

/* ---- per-inode locks ---- */

void io_rwlock_init(pthread_rwlock_t *rw)
{
	pthread_rwlockattr_t attr;

	pthread_rwlockattr_init(&attr);
	/* a stream of readers must not starve a writer (a truncate) */
	pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	pthread_rwlock_init(rw, &attr);
	pthread_rwlockattr_destroy(&attr);
}

static struct io_lock *io_lock_get(struct io *io, uint64_t ino)
{
	struct io_lock *l;

	pthread_mutex_lock(&io->locks_mutex);
	l = g_hash_table_lookup(io->locks, &ino);
	if (!l) {
		l = g_new0(struct io_lock, 1);
		l->ino = ino;
		io_rwlock_init(&l->rw);
		g_hash_table_insert(io->locks, &l->ino, l);
	}
	l->refs++;
	pthread_mutex_unlock(&io->locks_mutex);
	return l;
}

static void io_lock_put(struct io *io, struct io_lock *l)
{
	pthread_mutex_lock(&io->locks_mutex);
	if (--l->refs == 0) {
		g_hash_table_remove(io->locks, &l->ino);
		pthread_rwlock_destroy(&l->rw);
		g_free(l);
	}
	pthread_mutex_unlock(&io->locks_mutex);
}

static struct io_lock *io_lock_read(struct io *io, uint64_t ino)
{
	struct io_lock *l = io_lock_get(io, ino);

	pthread_rwlock_rdlock(&l->rw);
	return l;
}

static struct io_lock *io_lock_write(struct io *io, uint64_t ino)
{
	struct io_lock *l = io_lock_get(io, ino);

	pthread_rwlock_wrlock(&l->rw);
	return l;
}

static void io_unlock(struct io *io, struct io_lock *l)
{
	pthread_rwlock_unlock(&l->rw);
	io_lock_put(io, l);
}

/* ---- helpers on a locked inode ---- */

/*
 * extent_map() promises extents that cover the range's blocks in order; check
 * it, so a bug there shows up as -EIO instead of uninitialised bytes.
 */
static int check_extents(uint64_t ino, uint64_t off, uint64_t len, const struct meta_extent *ext,
			 int n)
{
	uint64_t want = off / IO_BS, last = (off + len - 1) / IO_BS;
	int i;

	for (i = 0; i < n; i++) {
		if (ext[i].file_block != want || ext[i].count == 0)
			break;
		want += ext[i].count;
	}
	if (i == n && want > last)
		return 0;
	g_warning("extent_map(ino %" G_GUINT64_FORMAT ", %" G_GUINT64_FORMAT "+%" G_GUINT64_FORMAT
		  ") returned extents that do not cover the range",
		  ino, off, len);
	return -EIO;
}

/* extent_map of [off, off+len), checked to cover it all: the extents' count or -errno */
static int map_checked(struct io *io, uint64_t ino, uint64_t off, size_t len, bool alloc,
		       struct meta_extent *ext)
{
	int n = extent_map(io->meta, ino, off, len, alloc, ext, IO_MAX_EXT);

	if (n < 0)
		return n;
	return check_extents(ino, off, len, ext, n) < 0 ? -EIO : n;
}

/* one read step, mapped and read inside the gate (last: see verify_read_run) */
static int read_step(struct io *io, uint64_t ino, uint64_t off, size_t len, char *buf, bool last);

/*
 * A following reader whose read of a block does not pass its checksum
 * (verify_read_run's -EAGAIN: its CRC lags the writer's, or the read met an
 * in-place write in flight) leaves the gate - the follower cannot apply
 * newer states while reads are in it - waits for a refresh and reads again,
 * up to FOLLOW_READS times; the last failure is reported.
 */
#define FOLLOW_READS 4

static int io_read_step(struct io *io, uint64_t ino, uint64_t off, size_t len, char *buf)
{
	unsigned int e, i;
	int rc = -EAGAIN;

	for (i = 0; i < FOLLOW_READS && rc == -EAGAIN; i++) {
		if (i)
			follow_wait_refresh(io->meta);
		e = gate_enter(io);
		rc = gate_leave(io, e, read_step(io, ino, off, len, buf, i + 1 == FOLLOW_READS));
	}
	return rc;
}

static int read_step(struct io *io, uint64_t ino, uint64_t off, size_t len, char *buf, bool last)
{
	struct meta_extent ext[IO_MAX_EXT];
	struct verify_read vr;
	int n, i, rc;

	n = map_checked(io, ino, off, len, false, ext);
	if (n < 0)
		return n;

	verify_read_init(&vr, ino);
	for (i = 0; i < n; i++) {
		uint64_t es = ext[i].file_block * IO_BS, ee = es + ext[i].count * IO_BS;
		uint64_t s = MAX(es, off), e = MIN(ee, off + len);

		if (s >= e)
			continue;
		if (!ext[i].pool_off) {
			memset(buf + (s - off), 0, e - s);
			io_count(&io->stats.hole_bytes_read, e - s);
			continue;
		}
		verify_read_add(io->verify, &vr, es, ext[i].pool_off, s, e, buf + (s - off));
	}
	rc = verify_read_run(io->verify, &vr, last);
	if (rc < 0 && rc != -EAGAIN)
		io_report(io, "reading ino %" G_GUINT64_FORMAT " (%zu bytes): %s", ino, len,
			  g_strerror(-rc));
	verify_read_clear(&vr);
	return rc;
}

/*
 * Zero the allocated bytes of [from, to) (holes are left alone). Ranges past
 * EOF are fine: extent_map() reports them as holes unless blocks are allocated
 * there (fallocate KEEP_SIZE).
 */
static int io_zero_allocated(struct io *io, uint64_t ino, uint64_t from, uint64_t to)
{
	struct meta_extent ext[IO_MAX_EXT];
	struct verify_write vw;
	uint64_t zeroed;
	int n, i, rc;

	while (from < to) {
		uint64_t covered = from;

		n = extent_map(io->meta, ino, from, to - from, false, ext, IO_MAX_EXT);
		if (n < 0)
			return n;
		if (n == 0)
			return -EIO;
		verify_write_init(&vw);
		zeroed = 0;
		for (i = 0; i < n; i++) {
			uint64_t es = ext[i].file_block * IO_BS, ee = es + ext[i].count * IO_BS;
			uint64_t s = MAX(es, from), e = MIN(ee, to);

			/* written blocks: zeros written (whole blocks, with their checksums) */
			if (s < e && ext[i].pool_off) {
				verify_write_add(io->verify, &vw, ino, es, ee, ext[i].pool_off, false,
						 s, e, NULL);
				zeroed += e - s;
			}
			covered = MAX(covered, ee);
		}
		rc = verify_write_run(io->verify, &vw);
		verify_write_clear(&vw);
		if (rc < 0) {
			io_report(io, "zeroing in ino %" G_GUINT64_FORMAT ": %s", ino,
				  g_strerror(-rc));
			return rc;
		}
		io_count(&io->stats.bytes_zeroed, zeroed);
		if (covered <= from)
			return -EIO; /* no progress: extent_map broke its promise */
		from = covered;
	}
	return 0;
}

/* one write step: [off, off+len) with len <= IO_CHUNK */
static int io_write_step(struct io *io, uint64_t ino, uint64_t off, size_t len, const char *buf)
{
	struct meta_extent ext[IO_MAX_EXT];
	struct verify_write vw;
	uint64_t zeroed = 0;
	int n, i, rc;

	n = map_checked(io, ino, off, len, true, ext);
	if (n < 0)
		return n;

	verify_write_init(&vw);
	for (i = 0; i < n; i++) {
		uint64_t es = ext[i].file_block * IO_BS, ee = es + ext[i].count * IO_BS;
		uint64_t s = MAX(es, off), e = MIN(ee, off + len);

		if (!ext[i].pool_off) {
			g_warning("extent_map(alloc) left a hole in ino %" G_GUINT64_FORMAT, ino);
			verify_write_clear(&vw);
			return -EIO;
		}
		/* (a fresh extent lies inside the step's blocks: padding < one block) */
		zeroed += verify_write_add(io->verify, &vw, ino, es, ee, ext[i].pool_off,
					   ext[i].fresh, s, e, buf + (s - off));
	}
	rc = verify_write_run(io->verify, &vw);
	verify_write_clear(&vw);
	if (rc < 0) {
		io_report(io, "writing ino %" G_GUINT64_FORMAT " (%zu bytes): %s", ino, len,
			  g_strerror(-rc));
		return rc;
	}
	io_count(&io->stats.bytes_zeroed, zeroed);
	/* the data and its checksums are in: now the extents and the size may become durable */
	return extent_write_done(io->meta, ino, off, len);
}

static ssize_t io_read_locked(struct io *io, uint64_t ino, uint64_t off, size_t len, char *buf,
			      struct meta_attr *attr)
{
	size_t done = 0;
	int rc;

	rc = meta_getattr(io->meta, ino, attr);
	if (rc < 0)
		return rc;
	if (!S_ISREG(attr->mode))
		return -EINVAL;
	if (off >= attr->size || len == 0)
		return 0;
	len = MIN((uint64_t)len, attr->size - off);
	while (done < len) {
		size_t step = MIN(len - done, (size_t)IO_CHUNK);

		rc = io_read_step(io, ino, off + done, step, buf + done);
		if (rc < 0)
			return rc;
		done += step;
	}
	return done;
}

/* *written gets the bytes that landed even when a later step fails */
static int io_write_locked(struct io *io, uint64_t ino, uint64_t off, size_t len, const char *buf,
			   size_t *written)
{
	struct meta_attr attr;
	int rc;

	*written = 0;
	if (len == 0)
		return 0;
	rc = meta_getattr(io->meta, ino, &attr);
	if (rc < 0)
		return rc;
	if (!S_ISREG(attr.mode))
		return -EINVAL;
	if (off > attr.size) {
		/* bytes between EOF and the write must read as zeros */
		rc = io_zero_allocated(io, ino, attr.size, off);
		if (rc < 0)
			return rc;
	}
	while (*written < len) {
		size_t step = MIN(len - *written, (size_t)IO_CHUNK);

		rc = io_write_step(io, ino, off + *written, step, buf + *written);
		if (rc < 0)
			return rc;
		*written += step;
	}
	return 0;
}

/* relatime: atime moves when it is not newer than mtime/ctime, or a day old */
static void io_touch_atime(struct io *io, uint64_t ino, const struct meta_attr *attr)
{
	struct timespec now;

	clock_file_time(&now);
	if (attr->atime.tv_sec < attr->mtime.tv_sec ||
	    (attr->atime.tv_sec == attr->mtime.tv_sec && attr->atime.tv_nsec <= attr->mtime.tv_nsec) ||
	    attr->atime.tv_sec < attr->ctime.tv_sec ||
	    (attr->atime.tv_sec == attr->ctime.tv_sec && attr->atime.tv_nsec <= attr->ctime.tv_nsec) ||
	    now.tv_sec - attr->atime.tv_sec >= 24 * 3600)
		meta_touch_atime(io->meta, ino); /* best effort: a read never fails for it */
}

/* ---- public ---- */

struct io *io_create(struct meta *m, struct remote *r, bool update_atime)
{
	struct io *io = g_new0(struct io, 1);

	io->meta = m;
	io->remote = r;
	io->update_atime = update_atime;
	pthread_mutex_init(&io->locks_mutex, NULL);
	io->locks = g_hash_table_new(g_int64_hash, g_int64_equal);
	io->verify = verify_new(m, r, false);
	pthread_mutex_init(&io->scrub_lock, NULL);
	return io;
}

void io_destroy(struct io *io)
{
	if (!io)
		return;
	worker_stop(&io->scrub); /* (before the metadata goes: it journals checksums) */
	pthread_mutex_destroy(&io->scrub_lock);
	if (g_hash_table_size(io->locks))
		g_warning("io_destroy: %u inode locks still held", g_hash_table_size(io->locks));
	g_hash_table_destroy(io->locks);
	pthread_mutex_destroy(&io->locks_mutex);
	verify_destroy(io->verify);
	g_free(io);
}

ssize_t io_write(struct io *io, uint64_t ino, uint64_t off, const void *buf, size_t len)
{
	struct io_lock *l;
	size_t written;
	int rc;

	if (off + len < off)
		return -EFBIG;
	l = io_lock_write(io, ino);
	rc = io_write_locked(io, ino, off, len, buf, &written);
	io_unlock(io, l);
	if (written) {
		io_count(&io->stats.writes, 1);
		io_count(&io->stats.bytes_written, written);
		return written; /* a short write keeps what landed */
	}
	return rc;
}

int io_truncate(struct io *io, uint64_t ino, const struct meta_setattr *sa,
		const struct meta_cred *cred, struct meta_attr *out)
{
	struct meta_setattr s = *sa;
	struct meta_attr attr;
	struct io_lock *l;
	int rc;

	if (!(sa->valid & META_SET_SIZE))
		return meta_setattr(io->meta, ino, sa, cred, out);

	l = io_lock_write(io, ino);
	rc = meta_getattr(io->meta, ino, &attr);
	if (rc < 0)
		goto out_unlock;
	if (!S_ISREG(attr.mode)) {
		/* meta gives the right error (-EISDIR, -EINVAL) */
		rc = meta_setattr(io->meta, ino, sa, cred, out);
		goto out_unlock;
	}

	if (s.size != attr.size) {
		if (!(s.valid & (META_SET_MTIME | META_SET_MTIME_NOW)))
			s.valid |= META_SET_MTIME_NOW;
		if (!(s.valid & META_SET_CTIME)) {
			s.valid |= META_SET_CTIME;
			clock_file_time(&s.ctime);
		}
	}
	if (s.size < attr.size && s.size % IO_BS) {
		/* the new last block keeps only bytes below the new size */
		rc = io_zero_allocated(io, ino, s.size, MIN(attr.size, round_up(s.size)));
		if (rc < 0)
			goto out_unlock;
	} else if (s.size > attr.size) {
		rc = io_zero_allocated(io, ino, attr.size, s.size);
		if (rc < 0)
			goto out_unlock;
	}
	rc = meta_setattr(io->meta, ino, &s, cred, out);
out_unlock:
	io_unlock(io, l);
	return rc;
}

int io_fallocate(struct io *io, uint64_t ino, int mode, uint64_t off, uint64_t len)
{
	struct meta_attr attr;
	struct io_lock *l;
	uint64_t end = off + len;
	int rc;

	if (mode & ~(FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE))
		return -EOPNOTSUPP;
	if ((mode & FALLOC_FL_PUNCH_HOLE) && !(mode & FALLOC_FL_KEEP_SIZE))
		return -EOPNOTSUPP;
	if (len == 0 || end < off)
		return -EINVAL;

	l = io_lock_write(io, ino);
	rc = meta_getattr(io->meta, ino, &attr);
	if (rc < 0)
		goto out_unlock;
	if (!S_ISREG(attr.mode)) {
		rc = S_ISDIR(attr.mode) ? -EISDIR : -ENODEV;
		goto out_unlock;
	}

	if (mode & FALLOC_FL_PUNCH_HOLE) {
		uint64_t head_end = MIN(end, round_up(off));

		/* partial blocks at the edges keep their other bytes: zero ours */
		if (off % IO_BS) {
			rc = io_zero_allocated(io, ino, off, head_end);
			if (rc < 0)
				goto out_unlock;
		}
		if (end % IO_BS && round_down(end) >= head_end) {
			rc = io_zero_allocated(io, ino, MAX(off, round_down(end)), end);
			if (rc < 0)
				goto out_unlock;
		}
		rc = extent_punch_hole(io->meta, ino, off, len);
		goto out_unlock;
	}

	if (!(mode & FALLOC_FL_KEEP_SIZE) && end > attr.size) {
		rc = io_zero_allocated(io, ino, attr.size, end);
		if (rc < 0)
			goto out_unlock;
	}
	rc = extent_fallocate(io->meta, ino, off, len, mode);
out_unlock:
	io_unlock(io, l);
	return rc;
}

ssize_t io_copy_range(struct io *io, uint64_t ino_in, uint64_t off_in, uint64_t ino_out,
		      uint64_t off_out, size_t len)
{
	struct io_lock *l_in = NULL, *l_out;
	struct meta_attr attr;
	bool backward = false;
	size_t done = 0;
	ssize_t n = 0;
	char *buf;
	int rc;

	if (off_out + len < off_out || off_in + len < off_in)
		return -EFBIG;

	/* two inodes: ascending inode order, whatever the direction */
	if (ino_in == ino_out) {
		l_out = io_lock_write(io, ino_out);
	} else if (ino_in < ino_out) {
		l_in = io_lock_read(io, ino_in);
		l_out = io_lock_write(io, ino_out);
	} else {
		l_out = io_lock_write(io, ino_out);
		l_in = io_lock_read(io, ino_in);
	}

	rc = meta_getattr(io->meta, ino_in, &attr);
	if (rc < 0) {
		n = rc;
		goto out_unlock;
	}
	if (!S_ISREG(attr.mode)) {
		n = -EINVAL;
		goto out_unlock;
	}
	if (off_in >= attr.size || len == 0)
		goto out_unlock; /* n = 0 */
	len = MIN((uint64_t)len, attr.size - off_in);

	/* same file, destination above an overlapping source: copy from the end (memmove) */
	if (ino_in == ino_out && off_out > off_in && off_out < off_in + len)
		backward = true;

	buf = g_malloc(IO_CHUNK);
	while (done < len) {
		size_t step = MIN(len - done, (size_t)IO_CHUNK);
		uint64_t rel = backward ? len - done - step : done;
		size_t written;
		ssize_t got;

		got = io_read_locked(io, ino_in, off_in + rel, step, buf, &attr);
		if (got >= 0 && (size_t)got < step) /* the source cannot shrink under our lock */
			got = -EIO;
		if (got < 0) {
			rc = got;
			break;
		}
		rc = io_write_locked(io, ino_out, off_out + rel, step, buf, &written);
		if (!backward)
			done += written; /* forward: what landed is a prefix of the copy */
		else if (rc == 0)
			done += step;
		if (rc < 0)
			break;
	}
	g_free(buf);
	/* a backward copy that failed half-way has no meaningful partial count */
	if (rc < 0 && (backward || done == 0))
		n = rc;
	else
		n = done;
	if (n > 0) {
		io_count(&io->stats.copies, 1);
		io_count(&io->stats.bytes_copied, n);
	}
out_unlock:
	io_unlock(io, l_out);
	if (l_in)
		io_unlock(io, l_in);
	return n;
}

/* ---- for the block cache ---- */

struct meta *io_meta(struct io *io)
{
	return io->meta;
}

struct remote *io_remote(struct io *io)
{
	return io->remote;
}

/* map [off, off+len) completely (several extent_map calls if needed) into *ext */
static int map_all(struct io *io, uint64_t ino, uint64_t off, uint64_t len, bool alloc,
		   GArray *ext)
{
	struct meta_extent e[64];
	uint64_t end = off + len;
	int n, i;

	g_array_set_size(ext, 0);
	while (off < end) {
		uint64_t covered = off;

		n = extent_map(io->meta, ino, off, end - off, alloc, e, G_N_ELEMENTS(e));
		if (n < 0)
			return n;
		if (n == 0 || e[0].file_block != off / IO_BS)
			return -EIO;
		for (i = 0; i < n; i++) {
			if (i && e[i].file_block != e[i - 1].file_block + e[i - 1].count)
				return -EIO;
			covered = (e[i].file_block + e[i].count) * IO_BS;
		}
		g_array_append_vals(ext, e, n);
		if (covered <= off)
			return -EIO;
		off = covered;
	}
	return 0;
}

static int readv_gated(struct io *io, uint64_t ino, const struct io_piece *p, int n, bool last);

int io_readv(struct io *io, uint64_t ino, const struct io_piece *p, int n)
{
	unsigned int e, i;
	int rc = -EAGAIN;

	for (i = 0; i < FOLLOW_READS && rc == -EAGAIN; i++) { /* (see io_read_step) */
		if (i)
			follow_wait_refresh(io->meta);
		e = gate_enter(io);
		rc = gate_leave(io, e, readv_gated(io, ino, p, n, i + 1 == FOLLOW_READS));
	}
	return rc;
}

static int readv_gated(struct io *io, uint64_t ino, const struct io_piece *p, int n, bool last)
{
	struct verify_read vr;
	struct io_lock *l;
	GArray *ext;
	int k, rc = 0;
	guint i;

	ext = g_array_new(FALSE, FALSE, sizeof(struct meta_extent));
	verify_read_init(&vr, ino);
	l = io_lock_read(io, ino);
	for (k = 0; k < n && rc == 0; k++) {
		uint64_t off = p[k].off, end = p[k].off + p[k].len;

		if (!p[k].len)
			continue;
		rc = map_all(io, ino, off, p[k].len, false, ext);
		if (rc < 0)
			break;
		for (i = 0; i < ext->len; i++) {
			struct meta_extent *e = &g_array_index(ext, struct meta_extent, i);
			uint64_t es = e->file_block * IO_BS, ee = es + e->count * IO_BS;
			uint64_t s = MAX(es, off), t = MIN(ee, end);
			char *dst = (char *)p[k].buf + (s - off);

			if (s >= t)
				continue;
			if (!e->pool_off) {
				memset(dst, 0, t - s);
				io_count(&io->stats.hole_bytes_read, t - s);
				continue;
			}
			verify_read_add(io->verify, &vr, es, e->pool_off, s, t, dst);
			if (p[k].written)
				mask_set(p[k].written, (s - p[k].written_base) / IO_BS,
					 (t - 1 - p[k].written_base) / IO_BS + 1);
		}
	}
	if (rc == 0) {
		rc = verify_read_run(io->verify, &vr, last);
		if (rc < 0 && rc != -EAGAIN)
			io_report(io, "reading ino %" G_GUINT64_FORMAT " (%d pieces): %s", ino,
				  vr.b.cnt, g_strerror(-rc));
	}
	io_unlock(io, l);
	if (rc == 0) {
		io_count(&io->stats.reads, 1);
		io_count(&io->stats.bytes_read, vr.bytes);
	}
	verify_read_clear(&vr);
	g_array_free(ext, TRUE);
	return rc;
}

int io_reserve(struct io *io, uint64_t ino, uint64_t off, uint64_t len)
{
	GArray *ext;
	int rc;

	if (!len)
		return 0;
	if (off + len < off)
		return -EFBIG;
	ext = g_array_new(FALSE, FALSE, sizeof(struct meta_extent));
	rc = map_all(io, ino, off, len, true, ext);
	g_array_free(ext, TRUE);
	return rc;
}

int io_reserve_window(struct io *io, uint64_t ino, uint64_t off, uint64_t len, uint64_t woff,
		      uint64_t wlen, uint64_t *mask, unsigned int nwords)
{
	uint64_t first = (off - woff) / IO_BS, last = (off + len - 1 - woff) / IO_BS;
	struct meta_extent e[64];
	bool all = true;
	uint64_t b;
	int n, i, rc;

	if (!len || off < woff || off + len > woff + wlen || wlen / IO_BS > 64ULL * nwords)
		return -EINVAL;
	n = extent_map(io->meta, ino, woff, wlen, false, e, G_N_ELEMENTS(e));
	if (n < 0)
		return n;
	for (i = 0; i < n; i++)
		if (e[i].pool_off)
			mask_set(mask, e[i].file_block - woff / IO_BS,
				 e[i].file_block - woff / IO_BS + e[i].count);
	for (b = first; all && b <= last; b++)
		all = mask[b / 64] & (1ULL << (b % 64));
	if (all)
		return 0;
	rc = io_reserve(io, ino, off, len);
	if (rc == 0)
		mask_set(mask, first, last + 1);
	return rc;
}

int io_block_written(struct io *io, uint64_t ino, uint64_t off)
{
	struct meta_extent e;
	int n;

	n = extent_map(io->meta, ino, round_down(off), IO_BS, false, &e, 1);
	if (n < 0)
		return n;
	return n == 1 && e.pool_off != 0;
}

/* add file f's pieces to the batch (its inode lock held); 0 or -errno */
static int writeback_map(struct io *io, const struct io_wb_file *f, GArray *ext,
			 struct verify_write *vw, uint64_t *bytes)
{
	const struct io_piece *p = f->p;
	int k, rc;
	guint i;

	for (k = 0; k < f->n; k++) {
		uint64_t off = p[k].off, end = p[k].off + p[k].len;

		if (!p[k].len)
			continue;
		if (k && round_up(p[k - 1].off + p[k - 1].len) > round_down(off)) {
			g_warning("io_writeback_files(ino %" G_GUINT64_FORMAT
				  "): pieces overlap or share a block",
				  f->ino);
			return -EINVAL;
		}
		rc = map_all(io, f->ino, off, p[k].len, true, ext);
		if (rc < 0)
			return rc;
		for (i = 0; i < ext->len; i++) {
			struct meta_extent *e = &g_array_index(ext, struct meta_extent, i);
			uint64_t es = e->file_block * IO_BS, ee = es + e->count * IO_BS;
			uint64_t s = MAX(es, off), t = MIN(ee, end);

			if (!e->pool_off) {
				g_warning("extent_map(alloc) left a hole in ino %" G_GUINT64_FORMAT,
					  f->ino);
				return -EIO;
			}
			/* fresh blocks: the bytes no piece covers become zeros */
			io_count(&io->stats.bytes_zeroed,
				 verify_write_add(io->verify, vw, f->ino, es, ee, e->pool_off,
						  e->fresh, s, t, (char *)p[k].buf + (s - off)));
			*bytes += t - s;
		}
	}
	return 0;
}

int io_writeback_files(struct io *io, struct io_wb_file *f, int nf)
{
	struct io_lock **locks = g_new0(struct io_lock *, nf);
	struct verify_write vw;
	struct meta_attr attr;
	uint64_t bytes = 0;
	bool *opened = g_new0(bool, nf);
	GArray *ext;
	int k, rc = 0;

	ext = g_array_new(FALSE, FALSE, sizeof(struct meta_extent));
	verify_write_init(&vw);
	for (k = 0; k < nf; k++) {
		f[k].gone = false;
		if (k && f[k].ino <= f[k - 1].ino) {
			g_warning("io_writeback_files: inodes not in ascending order");
			f[k].rc = -EINVAL;
			continue;
		}
		/* an open reference: the inode (and its blocks) outlive this write */
		f[k].rc = meta_open(io->meta, f[k].ino);
		if (f[k].rc < 0)
			continue;
		opened[k] = true;
		locks[k] = io_lock_read(io, f[k].ino);
		f[k].rc = writeback_map(io, &f[k], ext, &vw, &bytes);
	}
	if (vw.b.cnt) {
		/* the data, then its checksums: both before the commits below */
		rc = verify_write_run(io->verify, &vw);
		if (rc < 0) {
			io_report(io, "writing back %d files (%d pieces): %s", nf, vw.b.cnt,
				  g_strerror(-rc));
			for (k = 0; k < nf; k++)
				if (f[k].rc == 0)
					f[k].rc = rc;
		}
	}
	/* the data is in the pool: now its blocks may become durable */
	for (k = 0; k < nf; k++) {
		int i;

		for (i = 0; i < f[k].n && f[k].rc == 0; i++)
			if (f[k].p[i].len)
				f[k].rc = extent_write_commit(io->meta, f[k].ino, f[k].p[i].off,
							      f[k].p[i].len);
	}
	if (rc == 0 && vw.b.cnt) {
		io_count(&io->stats.writes, 1);
		io_count(&io->stats.bytes_written, bytes);
	}
	for (k = nf; k-- > 0;) {
		if (locks[k])
			io_unlock(io, locks[k]);
		if (!opened[k])
			continue;
		meta_release(io->meta, f[k].ino);
		if (meta_getattr(io->meta, f[k].ino, &attr) == -ENOENT)
			f[k].gone = true;
	}
	g_array_free(ext, TRUE);
	verify_write_clear(&vw);
	g_free(locks);
	g_free(opened);
	return rc;
}

void io_note_read(struct io *io, uint64_t ino, const struct meta_attr *attr)
{
	if (io->update_atime)
		io_touch_atime(io, ino, attr);
}

void io_get_stats(struct io *io, struct io_stats *out)
{
	out->reads = __atomic_load_n(&io->stats.reads, __ATOMIC_RELAXED);
	out->writes = __atomic_load_n(&io->stats.writes, __ATOMIC_RELAXED);
	out->bytes_read = __atomic_load_n(&io->stats.bytes_read, __ATOMIC_RELAXED);
	out->bytes_written = __atomic_load_n(&io->stats.bytes_written, __ATOMIC_RELAXED);
	out->bytes_zeroed = __atomic_load_n(&io->stats.bytes_zeroed, __ATOMIC_RELAXED);
	out->hole_bytes_read = __atomic_load_n(&io->stats.hole_bytes_read, __ATOMIC_RELAXED);
	out->copies = __atomic_load_n(&io->stats.copies, __ATOMIC_RELAXED);
	out->bytes_copied = __atomic_load_n(&io->stats.bytes_copied, __ATOMIC_RELAXED);
}

ssize_t io_stats_text(struct io *io, char *buf, size_t cap)
{
	struct io_stats st;
	int n;

	ssize_t more;

	io_get_stats(io, &st);
	n = snprintf(buf, cap,
		     "remote_bytes_read %" G_GUINT64_FORMAT "\nremote_bytes_written %" G_GUINT64_FORMAT
		     "\nremote_bytes_zeroed %" G_GUINT64_FORMAT "\n",
		     st.bytes_read, st.bytes_written, st.bytes_zeroed);
	if (n < 0 || (size_t)n >= cap)
		return -ERANGE;
	more = verify_stats_text(io->verify, buf + n, cap - (size_t)n);
	if (more < 0)
		return more;
	n += (int)more;
	more = snprintf(buf + n, cap - (size_t)n,
			"scrub %s\nscrub_done %" G_GUINT64_FORMAT "\nscrub_total %" G_GUINT64_FORMAT
			"\nscrub_errors %" G_GUINT64_FORMAT "\nscrub_repaired %" G_GUINT64_FORMAT
			"\nscrub_filled %" G_GUINT64_FORMAT "\n",
			io_scrub_name[atomic_load(&io->scrub_state)],
			(guint64)atomic_load(&io->scrub_done), (guint64)atomic_load(&io->scrub_total),
			(guint64)atomic_load(&io->scrub_errors),
			(guint64)atomic_load(&io->scrub_repaired),
			(guint64)atomic_load(&io->scrub_filled));
	return more < 0 || (size_t)more >= cap - (size_t)n ? -ERANGE : n + more;
}

void io_describe(struct io *io, char *buf, size_t cap)
{
	char rd[32], wr[32];
	struct io_stats st;

	io_get_stats(io, &st);
	units_format_size(st.bytes_read, rd, sizeof(rd));
	units_format_size(st.bytes_written, wr, sizeof(wr));
	snprintf(buf, cap, "pool: %s read, %s written", rd, wr);
}

/* ---- scrub ---- */

/* check file blocks [fb, fb+count) of ino as they are mapped now, under its data lock */
static int scrub_run(struct io *io, uint64_t ino, uint64_t fb, uint64_t count,
		     struct verify_scrub *res)
{
	struct meta_extent ext[IO_SCRUB_BLOCKS];
	struct io_lock *l = io_lock_read(io, ino);
	int n, i, rc = 0;

	n = extent_map(io->meta, ino, fb * IO_BS, count * IO_BS, false, ext, IO_SCRUB_BLOCKS);
	if (n == -ENOENT || n == -EINVAL)
		n = 0; /* the file went, or is no longer a file: nothing to check */
	if (n < 0)
		rc = n;
	for (i = 0; i < n && rc == 0; i++)
		if (ext[i].pool_off)
			rc = verify_scrub(io->verify, ino, ext[i].file_block * IO_BS, ext[i].pool_off,
					  ext[i].count, res);
	io_unlock(io, l);
	return rc;
}

/*
 * Every written block of every file, IO_SCRUB_BLOCKS at a time, throttled
 * like a rebuild: after each step it sleeps as long as the step took.
 */
static void *scrub_main(void *arg)
{
	struct io *io = arg;
	GArray *runs = g_array_new(FALSE, FALSE, sizeof(struct extent_run));
	uint64_t total = 0, pause_ms = 0;
	enum io_scrub_state end = IO_SCRUB_DONE;
	guint i;
	int rc = 0;

	extent_written(io->meta, runs);
	for (i = 0; i < runs->len; i++)
		total += g_array_index(runs, struct extent_run, i).count;
	atomic_store(&io->scrub_total, total);
	for (i = 0; i < runs->len && rc == 0; i++) {
		struct extent_run *run = &g_array_index(runs, struct extent_run, i);
		uint64_t b;

		for (b = 0; b < run->count && rc == 0; b += IO_SCRUB_BLOCKS) {
			uint64_t n = MIN((uint64_t)IO_SCRUB_BLOCKS, run->count - b);
			struct verify_scrub res = { 0 };
			int64_t t0;

			if (worker_wait(&io->scrub, (int)MAX(pause_ms, 1U)) < 0) {
				end = IO_SCRUB_FAILED; /* unmount: cut short */
				rc = -ECANCELED;
				break;
			}
			t0 = clock_now_ms();
			rc = scrub_run(io, run->ino, run->file_block + b, n, &res);
			pause_ms = (uint64_t)(clock_now_ms() - t0);
			atomic_fetch_add(&io->scrub_errors, res.errors);
			atomic_fetch_add(&io->scrub_repaired, res.repaired);
			atomic_fetch_add(&io->scrub_filled, res.filled);
			atomic_fetch_add(&io->scrub_done, n);
		}
	}
	if (rc < 0 && rc != -ECANCELED) {
		end = IO_SCRUB_FAILED;
		io_report(io, "scrub: %s", g_strerror(-rc));
	}
	if (end == IO_SCRUB_DONE)
		g_message("scrub done: %" G_GUINT64_FORMAT " blocks, %" G_GUINT64_FORMAT " bad, %"
			  G_GUINT64_FORMAT " copies repaired, %" G_GUINT64_FORMAT
			  " checksums computed",
			  (guint64)total, (guint64)atomic_load(&io->scrub_errors),
			  (guint64)atomic_load(&io->scrub_repaired),
			  (guint64)atomic_load(&io->scrub_filled));
	atomic_store(&io->scrub_state, end);
	g_array_free(runs, TRUE);
	return NULL;
}

int io_scrub_start(struct io *io)
{
	int rc = 0;

	if (io->follower)
		return -EROFS;
	pthread_mutex_lock(&io->scrub_lock);
	if (atomic_load(&io->scrub_state) == IO_SCRUB_RUNNING) {
		rc = -EBUSY;
		goto out;
	}
	worker_stop(&io->scrub); /* the previous one's thread, finished */
	atomic_store(&io->scrub_done, 0);
	atomic_store(&io->scrub_total, 0);
	atomic_store(&io->scrub_errors, 0);
	atomic_store(&io->scrub_repaired, 0);
	atomic_store(&io->scrub_filled, 0);
	atomic_store(&io->scrub_state, IO_SCRUB_RUNNING);
	rc = worker_start(&io->scrub, "scrub", scrub_main, io);
	if (rc < 0)
		atomic_store(&io->scrub_state, IO_SCRUB_FAILED);
out:
	pthread_mutex_unlock(&io->scrub_lock);
	return rc;
}
