# SPDX-License-Identifier: GPL-2.0-or-later
"""The client's own memory (issue 26): small after mount whatever cache_size
says, grown in chunks as the cache is used (up to 64 MiB on any use, beyond
that only when blocks it evicted are read or written again), given back when
the mount is idle and when memory runs short (a memory hog beside the client
in one memory cgroup), and the data unharmed by any of it.

The cache's state comes from the stats xattr (cache_chunks, cache_resident_bytes,
chunks_grown, chunks_released, pressure_releases, idle_releases); the client's
RSS from /proc/PID/status.
"""
import os
import subprocess
import sys
import time

import pytest

from conftest import MemCgroup, pattern, read_line, stats, wait_for

MIB = 1 << 20
CHUNK = 16 * MIB  # CACHE_CHUNK (fuse-client/data/cache_int.h)
GROW_FREE = 64 * MIB  # CACHE_GROW_FREE: grown to on any use
RSS_AFTER_MOUNT = 64 * MIB  # the bound, with the default options


def rss(pid):
    with open(f'/proc/{pid}/status') as f:
        for line in f:
            if line.startswith('VmRSS:'):
                return int(line.split()[1]) * 1024
    raise AssertionError(f'no VmRSS for {pid}')


def write_file(path, seed, nbytes):
    block = pattern(seed, MIB)
    with open(path, 'wb') as f:
        for _ in range(nbytes // MIB):
            f.write(block)
        f.flush()
        os.fsync(f.fileno())


def check_file(path, seed, nbytes):
    block = pattern(seed, MIB)
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)  # from the client, not the page cache
        for i in range(nbytes // MIB):
            assert os.pread(fd, MIB, i * MIB) == block, f'{path}: MiB {i}'
    finally:
        os.close(fd)


def fill_cache(mnt, path, seed, nbytes, passes=6):
    """Read path back until the cache holds it (each pass brings back blocks it
    evicted, which is what grows it past GROW_FREE); the cache's stats after."""
    for _ in range(passes):
        check_file(path, seed, nbytes)
        s = stats(mnt)
        if s['cache_resident_bytes'] >= nbytes - 2 * CHUNK:
            break
    return s


def test_small_after_mount_grows_with_use(env):
    """Defaults (cache_size RAM/16, up to 1 GiB): a few MiB after mount. A first
    write of 192 MiB goes through the cache without growing it to the file's size
    (nothing comes back), so does a first read after a remount; reading the file
    again grows it, a chunk at a time."""
    server = env.server('320M')
    fs = env.rmemfs(server, options=['cache_idle=0'])
    mnt = fs.mountpoint
    s = stats(mnt)
    assert s['cache_chunks'] == 1 and s['cache_resident_bytes'] <= CHUNK
    after_mount = rss(fs.proc.pid)
    assert after_mount <= RSS_AFTER_MOUNT, f'RSS after mount {after_mount / MIB:.1f} MiB'
    size = 192 * MIB
    path = os.path.join(mnt, 'big')
    write_file(path, 1, size)
    s = stats(mnt)
    if s['cache_chunks_max'] * CHUNK >= size:
        assert s['ghost_hits'] == 0 and s['cache_chunks'] * CHUNK < size, s
    # one sequential read on a fresh mount: readahead runs through GROW_FREE
    # (what it fetched and nobody read yet is no ghost), nothing comes back
    assert fs.unmount() == 0
    fs = env.rmemfs(server, mountpoint=mnt, options=['cache_idle=0'])
    check_file(path, 1, size)
    s = stats(mnt)
    if s['cache_chunks_max'] * CHUNK > GROW_FREE:
        assert s['ghost_hits'] == 0 and s['cache_chunks'] * CHUNK <= GROW_FREE, s
    s = fill_cache(mnt, path, 1, size)
    assert s['zero_copy'] == 'yes', s  # every chunk registered as it came
    if s['cache_chunks_max'] * CHUNK > GROW_FREE:
        assert s['ghost_hits'] > 0 and s['cache_chunks'] * CHUNK > GROW_FREE, s
        assert s['chunks_grown'] == s['cache_chunks'] - 1, s
        assert s['cache_resident_bytes'] <= s['cache_bytes']
    assert rss(fs.proc.pid) <= after_mount + s['cache_resident_bytes'] + 32 * MIB
    assert fs.unmount() == 0


def test_idle_gives_memory_back(env):
    """-o cache_idle=1: a second without reads or writes and every chunk but the first
    goes back; the data comes from the pool again, whole, and the cache grows anew."""
    server = env.server('256M')
    fs = env.rmemfs(server, options=['cache_size=256M', 'cache_idle=1'])
    mnt = fs.mountpoint
    size = 96 * MIB
    write_file(os.path.join(mnt, 'f'), 2, size)
    busy = stats(mnt)
    assert busy['cache_chunks'] > 1, busy
    assert wait_for(lambda: stats(mnt)['cache_chunks'] == 1, timeout=30, step=0.2), stats(mnt)
    s = stats(mnt)
    assert s['idle_releases'] >= 1 and s['chunks_released'] >= busy['cache_chunks'] - 1, s
    assert rss(fs.proc.pid) <= RSS_AFTER_MOUNT, f'RSS idle {rss(fs.proc.pid) / MIB:.1f} MiB'
    check_file(os.path.join(mnt, 'f'), 2, size)
    assert stats(mnt)['chunks_grown'] > busy['chunks_grown']
    assert fs.unmount() == 0
    fs = env.rmemfs(server, mountpoint=mnt)
    check_file(os.path.join(mnt, 'f'), 2, size)
    assert fs.unmount() == 0


# argv: cgroup.procs path, MiB, MiB per step. Joins the cgroup, takes its memory a step at
# a time (every page touched), says HELD and the MiB, and keeps it until stdin closes.
HOG = r"""
import mmap, os, sys, time
procs, total, step = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
with open(procs, 'w') as f:
    f.write(str(os.getpid()))
held = []
for _ in range(total // step):
    m = mmap.mmap(-1, step << 20, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    for off in range(0, step << 20, mmap.PAGESIZE):
        m[off] = 1
    held.append(m)
    time.sleep(0.1)
print('HELD', total, flush=True)
sys.stdin.read()
"""


def move_to(procs, pid):
    with open(procs, 'w') as f:
        f.write(str(pid))


@pytest.mark.skipif(MemCgroup.unavailable() is not None, reason=str(MemCgroup.unavailable()))
def test_memory_pressure_gives_memory_back(env):
    """The client and a hog in one memory cgroup: the client fills its cache, then the
    hog takes more than the cgroup has left. The client gives chunks back (nobody is
    OOM-killed), the hog gets all it asked for, and the data is whole."""
    if os.geteuid() != 0:
        pytest.skip('memory cgroups need root')
    limit, cached, hog_mib = 640 * MIB, 320 * MIB, 384
    server = env.server('512M')
    fs = env.rmemfs(server, options=['cache_size=512M', 'cache_idle=0'])
    mnt = fs.mountpoint
    cg = MemCgroup()
    hog = None
    root_procs = os.path.join(os.path.dirname(cg.path), 'cgroup.procs')
    try:
        cg.limit(limit)
        if not cg.v2:
            cg.write('memory.swappiness', 0)
        move_to(cg.procs, fs.proc.pid)
        write_file(os.path.join(mnt, 'f'), 3, cached)
        before = fill_cache(mnt, os.path.join(mnt, 'f'), 3, cached)
        assert before['cache_resident_bytes'] >= cached - 2 * CHUNK, before
        hog = subprocess.Popen([sys.executable, '-c', HOG, cg.procs, str(hog_mib), '8'],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
        line = read_line(hog, 120)
        assert line == f'HELD {hog_mib}\n', f'hog: {line!r} (exit {hog.poll()})'
        assert fs.proc.poll() is None, 'the client died'
        s = stats(mnt)
        assert s['pressure_releases'] >= 1 and s['chunks_released'] >= 1, s
        assert s['cache_resident_bytes'] + hog_mib * MIB <= limit, s
        assert rss(fs.proc.pid) + hog_mib * MIB <= limit
        check_file(os.path.join(mnt, 'f'), 3, cached)
        # the hog gone, the cache grows again with use
        hog.kill()
        hog.wait(30)
        grown = stats(mnt)['chunks_grown']
        assert wait_for(lambda: check_file(os.path.join(mnt, 'f'), 3, cached) or
                        stats(mnt)['chunks_grown'] > grown, timeout=60, step=0), stats(mnt)
    finally:
        if hog:
            hog.kill()
            hog.wait(30)
        if fs.proc.poll() is None:
            move_to(root_procs, fs.proc.pid)
        problem = cg.remove()
    assert problem is None, problem
    assert fs.unmount() == 0
