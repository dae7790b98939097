// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * scrub.c - comparing the copies of a member set (remote_scrub, remote.h):
 * rmemfs-fsck's check of the members themselves.
 *
 * Every unit is read from each member that is up and holds a copy, and the
 * copies are compared byte for byte; so is the static part of block 0,
 * which every member keeps. Copies differ only where a client died between
 * writing one copy and the next (writes it never acknowledged), or where
 * a member's memory was damaged. With three copies the majority is the
 * truth; with two, which is right cannot be told from the copies alone, and
 * the repair makes the first copy in placement order the truth - the copies
 * agree again, and every read returns the same bytes. (rmemfs-fsck checks
 * the data blocks against their checksums before this, and rewrites a bad
 * copy from a good one: what differs here is then what no checksum covers.)
 */
#define G_LOG_DOMAIN "rmemfs-remote"

#include "remote_int.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <glib.h>

static void say(struct remote_scrub *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void say(struct remote_scrub *s, const char *fmt, ...)
{
	va_list ap;
	char *line;

	if (!s->report)
		return;
	va_start(ap, fmt);
	line = g_strdup_vprintf(fmt, ap);
	va_end(ap);
	s->report(s->ctx, line);
	g_free(line);
}

/*
 * Compare unit u's copies (bufs: one unit each). The reference is the copy
 * most others agree with (three copies: a majority), ties going to the
 * first in placement order.
 */
int scrub_unit(struct remote *r, struct remote_scrub *s, uint64_t u, uint8_t **bufs)
{
	struct place_copy c[PLACE_MAX_REPLICAS];
	unsigned int agree[PLACE_MAX_REPLICAS] = { 0 };
	bool have[PLACE_MAX_REPLICAS] = { false };
	uint32_t k, j;
	int ref = -1, rc;

	place_unit(&r->place, u, c);
	for (k = 0; k < r->place.r; k++) {
		if (!atomic_load(&r->mem[c[k].member].up))
			continue;
		rc = member_read(r->mem[c[k].member].m, remote_slot_off(r, c[k].slot),
				 bufs[k], r->unit);
		if (rc < 0)
			return rc;
		have[k] = true;
		for (j = 0; j < k; j++) {
			if (have[j] && !memcmp(bufs[j], bufs[k], r->unit)) {
				agree[j]++;
				agree[k]++;
			}
		}
	}
	for (k = 0; k < r->place.r; k++)
		if (have[k] && (ref < 0 || agree[k] > agree[ref]))
			ref = (int)k;
	for (k = 0; k < r->place.r; k++) {
		if (!have[k] || (int)k == ref || !memcmp(bufs[ref], bufs[k], r->unit))
			continue;
		s->differ++;
		say(s, "unit %" G_GUINT64_FORMAT " (bytes %" G_GUINT64_FORMAT "..): the copy on %s "
		    "differs from the one on %s%s", (guint64)u, (guint64)(u * r->unit),
		    r->mem[c[k].member].name, r->mem[c[ref].member].name,
		    s->repair ? ": rewritten from it" : "");
		if (!s->repair)
			continue;
		rc = member_write(r->mem[c[k].member].m, remote_slot_off(r, c[k].slot),
				  bufs[ref], r->unit);
		if (rc < 0)
			return rc;
		s->repaired++;
	}
	return 0;
}

/* the static part of block 0 is the same on every member */
static int scrub_block0(struct remote *r, struct remote_scrub *s, uint8_t *ref, uint8_t *buf)
{
	bool have = false;
	unsigned int i;
	int rc;

	for (i = 0; i < r->n; i++) {
		if (!atomic_load(&r->mem[i].up))
			continue;
		rc = member_read(r->mem[i].m, 0, have ? buf : ref, LAYOUT_SB_STATIC_LEN);
		if (rc < 0)
			return rc;
		if (have && memcmp(ref, buf, LAYOUT_SB_STATIC_LEN)) {
			s->differ++;
			say(s, "the superblock on %s differs from the first member's", r->mem[i].name);
		}
		have = true;
	}
	return 0;
}

int remote_scrub(struct remote *r, struct remote_scrub *s)
{
	uint8_t *bufs[PLACE_MAX_REPLICAS];
	char scheme[64];
	uint64_t u, total;
	unsigned int k;
	int rc = 0;

	s->differ = s->repaired = 0;
	if (!r->set)
		return 0;
	total = place_units(&r->place);
	for (k = 0; k < PLACE_MAX_REPLICAS; k++)
		bufs[k] = g_malloc(r->unit);
	if (s->repair)
		pthread_rwlock_rdlock(&r->rb_lock);
	rc = scrub_block0(r, s, bufs[0], bufs[1]);
	for (u = 0; u < total && !rc; u++)
		rc = scrub_unit(r, s, u, bufs);
	if (s->repair)
		pthread_rwlock_unlock(&r->rb_lock);
	for (k = 0; k < PLACE_MAX_REPLICAS; k++)
		g_free(bufs[k]);
	if (r->ec_k) /* the stripes are not compared here */
		snprintf(scheme, sizeof(scheme), "ec %u+%u, the replicated zone's %u copies of",
			 r->ec_k, r->ec_m, r->place.r);
	else
		snprintf(scheme, sizeof(scheme), "replicas %u,", r->place.r);
	if (rc == 0)
		say(s, "member set: %u members (%u up), %s %" G_GUINT64_FORMAT " units of %"
		    G_GUINT64_FORMAT " KiB compared: %u differ", r->n, remote_quorum_up(r), scheme,
		    (guint64)total, (guint64)(r->unit >> 10), s->differ);
	return rc;
}
