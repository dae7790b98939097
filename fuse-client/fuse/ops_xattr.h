/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * ops_xattr.h - the virtual xattrs of the root that the FUSE front end answers itself.
 *
 * OPS_PID_XATTR is how umount.fuse.rmemfs (ctl/umount_main.c) finds the daemon behind a
 * mount before it unmounts, so that it can wait for the daemon to finish closing. Its
 * value is "DAEMON_PID CALLER_PID\n": the daemon's pid and the pid of the process that
 * asked, both as the daemon's pid namespace numbers them (the kernel translates the
 * caller's; 0 when it is not visible there). A caller that finds its own pid in the second
 * field shares the daemon's pid namespace, so the first field names the daemon for it too.
 * Read-only; listxattr does not show it; anyone who can reach the mount point may read it.
 */
#ifndef RMEM_OPS_XATTR_H
#define RMEM_OPS_XATTR_H

#define OPS_PID_XATTR "user.rmemfs.pid"
#define OPS_PID_MAX 32 /* the value's length never exceeds this */

#endif /* RMEM_OPS_XATTR_H */
