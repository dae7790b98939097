// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * swap_main.c - rmemfs-swap: swap on a file of an rmemfs mount, through a
 * loop device with direct I/O (far memory).
 *
 * main() parses the command line, checks what needs no system state (the
 * command, SIZE, --priority, root for on/off) and runs one command
 * (swap_cmd.h). Exit status: 0 done, 1 a check or a step failed (and nothing
 * was left changed), 2 a usage error.
 */
#define G_LOG_DOMAIN "rmemfs-swap"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "swap_cmd.h"
#include "swap_lock.h"
#include "units.h"

#define MAX_LOCK_WAIT_S 86400

enum { OPT_LOCK_WAIT = 0x100, OPT_PRIORITY };

/* clang-format off */
static const char usage_text[] =
	"Usage: rmemfs-swap on MOUNTPOINT SIZE [--priority N] [--lock-wait SECS]\n"
	"       rmemfs-swap off MOUNTPOINT|DEVICE [--lock-wait SECS]\n"
	"       rmemfs-swap status [--json]\n"
	"       rmemfs-swap --lock-path | --help | --version\n"
	"\n"
	"Swap on an rmemfs mount: a file MOUNTPOINT/" SWAP_FILE_NAME " on a loop device with\n"
	"direct I/O (a FUSE file cannot be a swap file itself).\n"
	"\n"
	"  on        create MOUNTPOINT/" SWAP_FILE_NAME " of SIZE bytes (K/M/G suffixes; a\n"
	"            multiple of the page size, at least 1M), write it whole, attach it to a\n"
	"            free loop device with direct I/O, mkswap -L rmemfs, swapon. The mount's\n"
	"            daemon must run with -o swap. A failed step undoes the ones before it.\n"
	"  off       swapoff, detach the loop device, remove the file: every rmemfs swap of\n"
	"            MOUNTPOINT (and what an interrupted 'on' left there), or DEVICE\n"
	"  status    every swap device backed by a file on an rmemfs mount: device, size,\n"
	"            used, priority, mount, server, file (any user may run it)\n"
	"\n"
	"  --priority N      swap priority 0..32767 (default: the kernel's, below the others)\n"
	"  --lock-wait SECS  how long on and off wait for the lock (default 60)\n"
	"  --json            status as one JSON document\n"
	"  --lock-path       print the path of the lock of swap experiments and exit\n"
	"  --help            this text\n"
	"  --version         the version\n"
	"\n"
	"on and off need root and hold an exclusive flock(2) on " SWAP_LOCK_PATH ",\n"
	"waiting for it (--lock-wait): swap is machine-wide, and swap experiments take the\n"
	"same lock. A caller that holds it passes the locked descriptor on (flock(1)\n"
	"does): rmemfs-swap then works under the caller's lock.\n"
	"Exit status: 0 done, 1 refused or failed (nothing left changed), 2 usage error.\n";
/* clang-format on */

struct swap_args {
	const char *command;
	const char *target;
	const char *size;
	const char *priority;
	const char *lock_wait;
	int json; /* flags: getopt_long sets them */
	int lock_path;
	int help;
	int version;
};

/* a usage error: its line, a pointer to --help, -EINVAL */
#define usage_error(fmt, ...)                                                                      \
	(SWAP_ERR(fmt, ##__VA_ARGS__), g_printerr("Try 'rmemfs-swap --help'.\n"), -EINVAL)

static int parse_args(int argc, char **argv, struct swap_args *a)
{
	const struct option longopts[] = {
	    {"help", no_argument, &a->help, 1},
	    {"version", no_argument, &a->version, 1},
	    {"lock-path", no_argument, &a->lock_path, 1},
	    {"lock-wait", required_argument, NULL, OPT_LOCK_WAIT},
	    {"priority", required_argument, NULL, OPT_PRIORITY},
	    {"json", no_argument, &a->json, 1},
	    {NULL, 0, NULL, 0},
	};
	const char *pos[3];
	int c, npos = 0, want;

	memset(a, 0, sizeof(*a));
	opterr = 0;
	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (c) {
		case 0: /* a flag */
			break;
		case OPT_LOCK_WAIT:
			a->lock_wait = optarg;
			break;
		case OPT_PRIORITY:
			a->priority = optarg;
			break;
		default:
			return usage_error("unknown option or missing value: %s", argv[optind - 1]);
		}
	}
	if (a->help || a->version || a->lock_path)
		return 0;
	while (optind < argc && npos < 3)
		pos[npos++] = argv[optind++];
	if (npos == 0)
		return usage_error("no command (on, off or status)");
	a->command = pos[0];
	if (strcmp(a->command, "on") == 0)
		want = 3;
	else if (strcmp(a->command, "off") == 0)
		want = 2;
	else if (strcmp(a->command, "status") == 0)
		want = 1;
	else
		return usage_error("unknown command '%s' (on, off or status)", a->command);
	if (npos != want || optind < argc)
		return usage_error("%s takes %s", a->command,
				   want == 3   ? "MOUNTPOINT SIZE"
				   : want == 2 ? "MOUNTPOINT or DEVICE"
					       : "no argument");
	if (a->priority && want != 3)
		return usage_error("--priority goes with on");
	if (a->json && want != 1)
		return usage_error("--json goes with status");
	if (a->lock_wait && want == 1)
		return usage_error("--lock-wait goes with on and off");
	a->target = want > 1 ? pos[1] : NULL;
	a->size = want > 2 ? pos[2] : NULL;
	return 0;
}

/* a whole number 0..max */
static int parse_number(const char *opt, const char *arg, long max, long *out)
{
	uint64_t v;

	if (units_parse_uint(arg, 0, (uint64_t)max, &v) < 0)
		return usage_error("%s '%s' is not a number from 0 to %ld", opt, arg, max);
	*out = (long)v;
	return 0;
}

static int parse_on(const struct swap_args *a, struct swap_on_args *on)
{
	uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
	long prio;

	on->mountpoint = a->target;
	on->priority = -1;
	if (units_parse_size(a->size, &on->size) < 0)
		return usage_error("SIZE '%s' is not a size (bytes, or with a K/M/G suffix)",
				   a->size);
	if (on->size % page)
		return usage_error("SIZE %s is not a multiple of the page size (%llu bytes)",
				   a->size, (unsigned long long)page);
	if (on->size < SWAP_MIN_SIZE)
		return usage_error("SIZE %s is too small (at least 1 MiB)", a->size);
	if (a->priority) {
		if (parse_number("--priority", a->priority, SWAP_PRIORITY_MAX, &prio) < 0)
			return -EINVAL;
		on->priority = (int)prio;
	}
	return 0;
}

int main(int argc, char **argv)
{
	long lock_wait = SWAP_LOCK_WAIT_S;
	struct swap_on_args on;
	struct swap_args a;

	if (parse_args(argc, argv, &a) < 0)
		return 2;
	if (a.help) {
		fputs(usage_text, stdout);
		return 0;
	}
	if (a.version) {
		printf("rmemfs-swap version %s\n", RMEM_VERSION);
		return 0;
	}
	if (a.lock_path) {
		printf("%s\n", SWAP_LOCK_PATH);
		return 0;
	}
	if (strcmp(a.command, "status") == 0)
		return swap_status(a.json) < 0 ? 1 : 0;
	if (a.lock_wait &&
	    parse_number("--lock-wait", a.lock_wait, MAX_LOCK_WAIT_S, &lock_wait) < 0)
		return 2;
	if (strcmp(a.command, "on") == 0 && parse_on(&a, &on) < 0)
		return 2;
	if (geteuid() != 0) {
		SWAP_ERR("%s needs root (loop devices and swapon(2) do)", a.command);
		return 1;
	}
	if (strcmp(a.command, "off") == 0)
		return swap_off(a.target, (unsigned int)lock_wait) < 0 ? 1 : 0;
	on.lock_wait_s = (unsigned int)lock_wait;
	return swap_on(&on) < 0 ? 1 : 0;
}
