/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * swap_lock.h - the machine-wide lock of swap experiments.
 *
 * Swap is global to the machine: two experiments that turn swap on and off at
 * the same time measure each other. Everything that does (rmemfs-swap on/off,
 * scripts/farmem.sh, tests/fs/test_swap.py) holds an exclusive flock(2) on
 * SWAP_LOCK_PATH for the whole time. A caller that holds the lock around
 * several rmemfs-swap runs passes its locked descriptor on to them (flock(1)
 * running a command, or a shell's `exec 9>LOCK; flock 9`, do that by
 * default; Python: pass_fds): rmemfs-swap finds it among its open
 * descriptors and goes on under the caller's lock instead of waiting for it.
 */
#ifndef RMEM_SWAP_LOCK_H
#define RMEM_SWAP_LOCK_H

#define SWAP_LOCK_PATH "/run/lock/rmemfs-swap.lock"
#define SWAP_LOCK_WAIT_S 60 /* default of --lock-wait */

/*
 * Take the lock, waiting up to wait_s seconds (and saying who holds it, once, when it has to
 * wait). *fd_out is the descriptor to give to swap_lock_release(). 0 or -errno (-ETIMEDOUT,
 * with a message naming the holder); prints its own message.
 */
int swap_lock_take(unsigned int wait_s, int *fd_out);

/* release (an inherited descriptor is only closed: the lock stays the caller's) */
void swap_lock_release(int fd);

#endif /* RMEM_SWAP_LOCK_H */
