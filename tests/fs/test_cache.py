# SPDX-License-Identifier: GPL-2.0-or-later
"""The block cache seen through a real mount: the statistics xattr, write-back
errors reported at fsync and at close, what unmount writes back, the kernel's
writeback cache (O_APPEND, shared mmap), readahead, a cache far smaller than
the data, and the memory bound under load.

Counters come from the virtual xattr user.rmemfs.stats of the root directory.
"""
import errno
import mmap
import os
import random

import pytest

from conftest import STATS, pattern, stats, wait_for


def test_stats_xattr(env):
    server = env.server('64M')
    fs = env.rmemfs(server)
    mnt = fs.mountpoint
    with open(os.path.join(mnt, 'f'), 'wb') as f:
        f.write(b'x' * 100_000)
    s = stats(mnt)
    for key in ('hits', 'misses', 'evictions', 'flushes', 'readahead_hits',
                'remote_bytes_read', 'remote_bytes_written', 'block_size', 'slots'):
        assert isinstance(s[key], int), key
    for key in ('lat_read_us', 'lat_write_us', 'lat_fsync_us'):
        assert 'p50' in s[key] and 'p99' in s[key], s[key]
    assert s['block_size'] == 64 << 10
    assert s['state'] == 'up' and s['outages'] == 0 and s['server'] == server.addr
    # read-only, and invisible to listxattr (the battery compares listings)
    assert STATS not in os.listxattr(mnt)
    for fn in (lambda: os.setxattr(mnt, STATS, b'0'), lambda: os.removexattr(mnt, STATS)):
        with pytest.raises(OSError) as e:
            fn()
        assert e.value.errno == errno.EPERM
    # only the root has it
    os.mkdir(os.path.join(mnt, 'd'))
    with pytest.raises(OSError) as e:
        os.getxattr(os.path.join(mnt, 'd'), STATS)
    assert e.value.errno == errno.ENODATA
    assert fs.unmount() == 0


def test_debug_prints_cache_summary(env):
    server = env.server('64M')
    fs = env.rmemfs(server, extra_args=['-d'])
    with open(os.path.join(fs.mountpoint, 'f'), 'wb') as f:
        f.write(pattern(1, 200_000))
    assert fs.unmount() == 0
    line = [l for l in fs.output().splitlines() if l.startswith('rmemfs: cache ')]
    assert line, fs.output()[-2000:]
    assert 'hits' in line[0] and 'flushes' in line[0] and 'written' in line[0]


def test_hits_misses_and_readahead(env):
    """Every read reaches the daemon (direct_io); the first pass misses and
    reads ahead, the second hits."""
    server = env.server('64M')
    fs = env.rmemfs(server, options=['direct_io'])
    mnt = fs.mountpoint
    data = pattern(2, 8 << 20)
    with open(os.path.join(mnt, 'f'), 'wb') as f:
        f.write(data)
        os.fsync(f.fileno())
    assert fs.unmount() == 0
    fs = env.rmemfs(server, mountpoint=mnt, options=['direct_io'])  # a cold cache
    with open(os.path.join(mnt, 'f'), 'rb') as f:
        got = b''.join(iter(lambda: f.read(128 << 10), b''))
    assert got == data
    s1 = stats(mnt)
    assert s1['misses'] > 0
    assert s1['readahead_blocks'] > 0
    assert s1['readahead_hits'] > s1['misses'], s1
    assert s1['remote_bytes_read'] >= len(data)
    with open(os.path.join(mnt, 'f'), 'rb') as f:
        assert f.read() == data
    s2 = stats(mnt)
    assert s2['misses'] == s1['misses']
    assert s2['hits'] - s1['hits'] >= len(data) // s1['block_size']
    assert s2['remote_bytes_read'] == s1['remote_bytes_read']
    assert fs.unmount() == 0


def test_unmount_writes_back(env):
    """Nothing fsync'd: a clean unmount still writes every cached byte."""
    server = env.server('64M')
    fs = env.rmemfs(server)
    mnt = fs.mountpoint
    files = {f'f{i}': pattern(10 + i, 50_000 * i + 123) for i in range(8)}
    for name, data in files.items():
        with open(os.path.join(mnt, name), 'wb') as f:
            f.write(data)
    assert fs.unmount() == 0
    env.rmemfs(server, mountpoint=mnt)
    for name, data in files.items():
        with open(os.path.join(mnt, name), 'rb') as f:
            assert f.read() == data, name


def test_flusher_writes_back_without_fsync(env):
    server = env.server('64M')
    fs = env.rmemfs(server, options=['direct_io'])
    mnt = fs.mountpoint
    with open(os.path.join(mnt, 'f'), 'wb') as f:
        f.write(pattern(3, 1 << 20))
    assert stats(mnt)['blocks_dirty'] > 0
    assert wait_for(lambda: stats(mnt)['blocks_dirty'] == 0, timeout=30)
    s = stats(mnt)
    assert s['flushes'] > 0 and s['remote_bytes_written'] >= 1 << 20
    assert fs.unmount() == 0


def test_fsync_reports_writeback_error(env):
    """The pool goes away under dirty data: fsync says so (EIO), and the
    error is reported once."""
    server = env.server('64M')
    fs = env.rmemfs(server, options=['reconnect_timeout=0'])
    env.expected_warnings = False
    p = os.path.join(fs.mountpoint, 'f')
    fd = os.open(p, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        os.write(fd, b'durable')
        os.fsync(fd)
        server.proc.kill()
        server.proc.wait(10)
        os.write(fd, pattern(4, 300_000))
        with pytest.raises(OSError) as e:
            os.fsync(fd)
        assert e.value.errno == errno.EIO
    finally:
        try:
            os.close(fd)
        except OSError:
            pass
    # the daemon cannot write back at unmount either: it says so and exits non-zero
    fs.unmount()


def test_close_reports_flusher_error(env):
    """A write-back error met by the flusher (no fsync anywhere) is
    reported by the next close of the file, once."""
    server = env.server('64M')
    # (long enough for the write below to be accepted before the lease heartbeat finds the
    # server gone and the mount fails)
    fs = env.rmemfs(server, options=['direct_io', 'reconnect_timeout=3'])
    p = os.path.join(fs.mountpoint, 'f')
    fd = os.open(p, os.O_WRONLY | os.O_CREAT, 0o644)
    server.proc.kill()
    server.proc.wait(10)
    os.write(fd, pattern(5, 200_000))  # direct_io: in the daemon's cache now
    assert wait_for(lambda: stats(fs.mountpoint)['flush_errors'] > 0, timeout=60)
    with pytest.raises(OSError) as e:
        os.close(fd)
    assert e.value.errno == errno.EIO
    fd = os.open(p, os.O_RDONLY)
    os.close(fd)  # reported already: no error now
    fs.unmount()


def test_o_append_with_writeback_cache(env):
    server = env.server('64M')
    fs = env.rmemfs(server, caches=True)
    p = os.path.join(fs.mountpoint, 'log')
    fds = [os.open(p, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644) for _ in range(2)]
    want = b''
    try:
        for i in range(200):
            rec = f'record {i} from fd {i % 2}\n'.encode() * (1 + i % 7)
            os.write(fds[i % 2], rec)
            want += rec
            if i % 50 == 49:
                os.fsync(fds[0])
    finally:
        for fd in fds:
            os.close(fd)
    assert os.stat(p).st_size == len(want)
    with open(p, 'rb') as f:
        assert f.read() == want
    assert fs.unmount() == 0
    env.rmemfs(server, mountpoint=fs.mountpoint)
    with open(p, 'rb') as f:
        assert f.read() == want


def test_shared_mmap_with_writeback_cache(env):
    server = env.server('64M')
    fs = env.rmemfs(server, caches=True)
    p = os.path.join(fs.mountpoint, 'mapped')
    size = 3 << 20
    base = bytearray(pattern(6, size))
    with open(p, 'wb') as f:
        f.write(base)
    rnd = random.Random(7)
    with open(p, 'r+b') as f:
        m = mmap.mmap(f.fileno(), size)
        for _ in range(300):
            off = rnd.randrange(size - 5000)
            chunk = rnd.randbytes(rnd.randrange(1, 5000))
            m[off:off + len(chunk)] = chunk
            base[off:off + len(chunk)] = chunk
        m.flush()
        m.close()
    with open(p, 'rb') as f:
        assert f.read() == base
    assert fs.unmount() == 0
    env.rmemfs(server, mountpoint=fs.mountpoint)
    with open(p, 'rb') as f:
        assert f.read() == base


@pytest.mark.parametrize('writeback', ['on', 'off'])
def test_small_cache_against_a_mirror(env, writeback):
    """16 blocks of cache for 8 MiB of data: evictions all the time, through
    O_DIRECT (every request reaches the cache), checked against a mirror."""
    server = env.server('64M')
    fs = env.rmemfs(server, options=['cache_size=1M', 'block_size=64K', 'direct_io',
                                     f'writeback={writeback}'])
    p = os.path.join(fs.mountpoint, 'f')
    size = 8 << 20
    mirror = bytearray(size)
    rnd = random.Random(8)
    fd = os.open(p, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        os.ftruncate(fd, size)
        for i in range(1500):
            off = rnd.randrange(size - 200_000)
            n = rnd.randrange(1, 200_000)
            if rnd.random() < 0.5:
                chunk = rnd.randbytes(n)
                assert os.pwrite(fd, chunk, off) == n
                mirror[off:off + n] = chunk
            else:
                assert os.pread(fd, n, off) == mirror[off:off + n], i
            if i % 500 == 499:
                os.fsync(fd)
    finally:
        os.close(fd)
    s = stats(fs.mountpoint)
    assert s['evictions'] > 0
    assert s['blocks_cached'] <= 16
    assert fs.unmount() == 0
    env.rmemfs(server, mountpoint=fs.mountpoint)
    with open(p, 'rb') as f:
        assert f.read() == mirror


def vm_hwm(pid):
    with open(f'/proc/{pid}/status') as f:
        for line in f:
            if line.startswith('VmHWM:'):
                return int(line.split()[1]) * 1024
    return 0


def test_memory_stays_bounded(env):
    """Writing and reading 4x the cache: the daemon's peak RSS stays within
    cache_size + 64 MiB."""
    cache = 32 << 20
    server = env.server('256M')
    fs = env.rmemfs(server, options=['cache_size=32M'])
    mnt = fs.mountpoint
    chunk = pattern(9, 1 << 20)
    for i in range(4):
        with open(os.path.join(mnt, f'big{i}'), 'wb') as f:
            for _ in range(32):
                f.write(chunk)
    os.sync()
    for i in range(4):
        with open(os.path.join(mnt, f'big{i}'), 'rb') as f:
            while f.read(1 << 20):
                pass
    peak = vm_hwm(fs.proc.pid)
    assert 0 < peak <= cache + (64 << 20), f'peak RSS {peak >> 20} MiB'
    assert fs.unmount() == 0


def test_unlink_while_writing_back(env):
    """Many small dirty files unlinked while the flushers write them back
    (some vanish between their batch being taken and its end): the daemon
    keeps going and nothing is left behind."""
    server = env.server('64M')
    fs = env.rmemfs(server, options=['direct_io'])
    mnt = fs.mountpoint
    free0 = os.statvfs(mnt).f_bfree
    data = pattern(11, 4096)
    for rnd in range(3):
        names = [os.path.join(mnt, f'r{rnd}-{i}') for i in range(1500)]
        for p in names:
            fd = os.open(p, os.O_WRONLY | os.O_CREAT, 0o644)
            os.write(fd, data)
            os.close(fd)
        for p in names:
            os.unlink(p)
    assert os.listdir(mnt) == []
    s = stats(mnt)  # the daemon is alive
    assert s['flushed_blocks'] + s['dirty_discarded'] > 0
    assert wait_for(lambda: stats(mnt)['blocks_dirty'] == 0, timeout=30)
    assert wait_for(lambda: os.statvfs(mnt).f_bfree >= free0, timeout=30)
    assert fs.unmount() == 0
