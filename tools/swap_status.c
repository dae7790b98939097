// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * swap_status.c - rmemfs-swap status [--json]: every rmemfs-backed swap area
 * (swap_find.h), as fixed columns for people or one JSON document for
 * scripts. Read-only, so any user may run it and no lock is taken.
 */
#define G_LOG_DOMAIN "rmemfs-swap"

#include <stdio.h>

#include "json.h"
#include "swap_cmd.h"
#include "units.h"

#define ROW_FMT "%-12s %10s %10s %6s  %-24s %-21s %s\n"

static void print_table(GPtrArray *devices)
{
	char size[32], used[32], prio[16];
	unsigned int i;

	if (devices->len == 0) {
		printf("no rmemfs swap\n");
		return;
	}
	printf(ROW_FMT, "device", "size", "used", "prio", "mount", "server", "file");
	for (i = 0; i < devices->len; i++) {
		const struct swap_device *d = g_ptr_array_index(devices, i);

		units_format_size(d->size, size, sizeof(size));
		units_format_size(d->used, used, sizeof(used));
		snprintf(prio, sizeof(prio), "%d", d->priority);
		printf(ROW_FMT, d->device, size, used, prio, d->mount_point, d->server,
		       d->backing_file);
	}
}

/* {"swaps": [{"device": ..., "size_bytes": N, "used_bytes": N, "priority": N, "mount": ...,
 * "server": ..., "backing_file": ...}]} */
static void print_json(GPtrArray *devices)
{
	unsigned int i;

	printf("{\"swaps\": [");
	for (i = 0; i < devices->len; i++) {
		const struct swap_device *d = g_ptr_array_index(devices, i);

		printf("%s\n  {\"device\": ", i ? "," : "");
		json_write_string(stdout, d->device);
		printf(
		    ", \"size_bytes\": %llu, \"used_bytes\": %llu, \"priority\": %d, \"mount\": ",
		    (unsigned long long)d->size, (unsigned long long)d->used, d->priority);
		json_write_string(stdout, d->mount_point);
		printf(", \"server\": ");
		json_write_string(stdout, d->server);
		printf(", \"backing_file\": ");
		json_write_string(stdout, d->backing_file);
		printf("}");
	}
	printf("%s]}\n", devices->len ? "\n" : "");
}

int swap_status(bool json)
{
	GPtrArray *mounts, *devices;
	int rc;

	rc = swap_find_mounts(&mounts);
	if (rc < 0)
		return rc;
	rc = swap_find_devices(mounts, NULL, 0, &devices);
	if (rc < 0)
		goto out;
	if (json)
		print_json(devices);
	else
		print_table(devices);
	g_ptr_array_unref(devices);
out:
	g_ptr_array_unref(mounts);
	return rc;
}
