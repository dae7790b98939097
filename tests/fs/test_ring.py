# SPDX-License-Identifier: GPL-2.0-or-later
"""FUSE over io_uring (-o uring=, fuse-client/fuse/ring.c): the channel chosen and said,
no silent fallback with uring=on, every request but INIT and FORGET served over the ring,
and the ways a mount ends with requests in flight on it - unmount, kill -9 of the daemon,
a connection abort - ending without a hang.

Each test sets the fuse module's enable_uring itself (root) and puts it back. The other
fs suites run over the ring too (meson suite 'ring': RMEM_TEST_CHANNEL=uring); the lost
memserver with requests in flight is test_failure.py's, run there.
"""
import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import (EXIT_TIMEOUT, MountFailed, enable_uring, is_mounted, lazy_unmount,
                      stats, uring_unavailable, wait_for)

pytestmark = pytest.mark.skipif(uring_unavailable() is not None,
                                reason=f'the FUSE ring: {uring_unavailable()}')

# requests the kernel sends over /dev/fuse even with the ring up
DEV_ONLY = ('fuse_init', 'fuse_forget', 'fuse_batch_forget', 'fuse_interrupt')

# a workload that keeps O_DIRECT writes and reads in flight until it fails; prints the errno
WORKLOAD = r'''
import errno, mmap, os, sys
path = sys.argv[1]
buf = mmap.mmap(-1, 4096)
buf.write(b'x' * 4096)
fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_DIRECT, 0o644)
print('running', flush=True)
i = 0
try:
    while True:
        os.pwrite(fd, buf, (i % 256) * 4096)
        os.preadv(fd, [buf], ((i * 7) % 256) * 4096)
        i += 1
except OSError as e:
    print(errno.errorcode.get(e.errno, e.errno), i, flush=True)
'''


def channel_line(fs):
    """The one line saying which channel serves (logged after INIT, which the mount
    does not wait for: the first request does)."""
    os.stat(fs.mountpoint)

    def lines():
        return [line for line in fs.output().splitlines() if 'FUSE channel:' in line]
    wait_for(lambda: lines(), timeout=10)
    assert len(lines()) == 1, f'expected one channel line:\n{fs.output()}'
    return lines()[0]


def ring_identity(mnt):
    """(requests over the ring, requests that should have been): equal when nothing that
    could go over the ring went over /dev/fuse."""
    s = stats(mnt)
    total = sum(v for k, v in s.items() if k.startswith('fuse_') and not k.endswith('_us')
                and k != 'fuse_ring_requests' and isinstance(v, int))
    dev_only = sum(s.get(k, 0) for k in DEV_ONLY)
    return s['fuse_ring_requests'], total - dev_only


def exercise(mnt):
    """One of most kinds of request: names, data (cached, O_DIRECT, mmap), xattrs."""
    d = os.path.join(mnt, 'd')
    os.mkdir(d)
    data = os.urandom(1 << 20)
    with open(os.path.join(d, 'a'), 'wb') as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    with open(os.path.join(d, 'a'), 'rb') as f:
        assert f.read() == data
    os.rename(os.path.join(d, 'a'), os.path.join(d, 'b'))
    os.setxattr(os.path.join(d, 'b'), 'user.k', b'v')
    assert os.getxattr(os.path.join(d, 'b'), 'user.k') == b'v'
    assert sorted(os.listdir(d)) == ['b']
    fd = os.open(os.path.join(d, 'b'), os.O_RDWR | os.O_DIRECT)
    try:
        import mmap
        buf = mmap.mmap(-1, 8192)
        buf.write(b'z' * 8192)
        assert os.pwrite(fd, buf, 4096) == 8192
        rd = mmap.mmap(-1, 8192)
        assert os.preadv(fd, [rd], 4096) == 8192 and rd[:] == buf[:]
    finally:
        os.close(fd)
    os.truncate(os.path.join(d, 'b'), 100)
    assert os.stat(os.path.join(d, 'b')).st_size == 100
    os.unlink(os.path.join(d, 'b'))
    os.rmdir(d)


def test_on_refused_where_the_kernel_has_it_off(env):
    """uring=on with enable_uring=N: no mount, and the message says what to do."""
    server = env.server()
    with enable_uring('N'):
        fs = env.rmemfs(server, options=['uring=on'], start=False)
        with pytest.raises(MountFailed) as e:
            fs.start()
    assert 'uring=on' in str(e.value) and 'enable_uring' in str(e.value)


def test_auto_falls_back_and_says_why(env):
    """uring=auto with the ring off in the kernel: /dev/fuse, one line saying why."""
    server = env.server()
    with enable_uring('N'):
        fs = env.rmemfs(server, options=['uring=auto'])
        exercise(fs.mountpoint)
        line = channel_line(fs)
        assert '/dev/fuse' in line and 'enable_uring' in line, line
        assert stats(fs.mountpoint)['fuse_ring_requests'] == 0
        assert fs.unmount() == 0


def test_off_says_so(env):
    server = env.server()
    with enable_uring('Y'):
        fs = env.rmemfs(server, options=['uring=off'])
        exercise(fs.mountpoint)
        assert '/dev/fuse (-o uring=off)' in channel_line(fs)
        assert stats(fs.mountpoint)['fuse_ring_requests'] == 0
        assert fs.unmount() == 0


@pytest.mark.parametrize('mode', ['on', 'auto'])
def test_every_request_over_the_ring(env, mode):
    """With the ring up, every request the kernel may send over it came over it: a
    daemon that fell back to /dev/fuse (or served some requests there) fails here."""
    server = env.server()
    with enable_uring('Y'):
        fs = env.rmemfs(server, options=[f'uring={mode}'])
        assert 'FUSE channel: io_uring' in channel_line(fs)
        exercise(fs.mountpoint)
        ring, expected = ring_identity(fs.mountpoint)
        assert ring == expected and ring > 50, (ring, expected)
        assert fs.unmount() == 0


def test_reply_from_another_thread(env):
    """A direct write into a range the kernel caches is answered by the invalidation
    thread (inval.h), not the ring thread that served it: the reply must reach its
    entry, and the cached reader sees the new bytes."""
    import mmap
    server = env.server()
    with enable_uring('Y'):
        fs = env.rmemfs(server, options=['uring=on'], caches=True)
        path = os.path.join(fs.mountpoint, 'f')
        with open(path, 'wb') as f:
            f.write(b'a' * 65536)
        cached = os.open(path, os.O_RDONLY)
        direct = os.open(path, os.O_RDWR | os.O_DIRECT)
        try:
            assert os.pread(cached, 65536, 0) == b'a' * 65536  # pages in the kernel
            buf = mmap.mmap(-1, 4096)
            for i in range(16):
                buf[:] = bytes([ord('b') + i]) * 4096
                assert os.pwrite(direct, buf, i * 4096) == 4096
                assert os.pread(cached, 4096, i * 4096) == buf[:]
        finally:
            os.close(cached)
            os.close(direct)
        assert fs.unmount() == 0


def start_workload(path):
    p = subprocess.Popen([sys.executable, '-c', WORKLOAD, path], stdout=subprocess.PIPE,
                         text=True)
    assert p.stdout.readline().strip() == 'running'
    time.sleep(0.5)  # requests in flight on the ring
    return p


def workload_end(p):
    """The errno name the workload stopped with; it must stop on its own."""
    try:
        out, _ = p.communicate(timeout=EXIT_TIMEOUT)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
        pytest.fail('the I/O in flight hung')
    return out.split()[0] if out.split() else ''


def fuse_connection(mnt):
    conns = '/sys/fs/fuse/connections'
    if not os.path.isdir(os.path.join(conns, '.')) or not os.listdir(conns):
        subprocess.run(['mount', '-t', 'fusectl', 'none', conns], check=False)
    path = os.path.join(conns, str(os.minor(os.stat(mnt).st_dev)))
    if not os.path.exists(os.path.join(path, 'abort')):
        pytest.skip(f'no {path}/abort (fusectl)')
    return path


@pytest.mark.parametrize('mode', ['on', 'off'])
def test_abort_with_requests_in_flight(env, mode):
    """An aborted connection ends the requests in flight with an error, the daemon exits,
    and nothing hangs."""
    server = env.server()
    with enable_uring('Y'):
        fs = env.rmemfs(server, options=[f'uring={mode}'])
        conn = fuse_connection(fs.mountpoint)
        p = start_workload(os.path.join(fs.mountpoint, 'f'))
        with open(os.path.join(conn, 'abort'), 'w') as f:
            f.write('1')
        assert workload_end(p) in ('ENOTCONN', 'ECONNABORTED')
        try:
            fs.proc.wait(EXIT_TIMEOUT)
        except subprocess.TimeoutExpired:
            pytest.fail(f'rmemfs did not exit after the abort:\n{fs.output()}')
        lazy_unmount(fs.mountpoint)


# a request the kernel is handing to a ring thread as the daemon dies ends with ECANCELED
# (fs/fuse/dev_uring.c, fuse_uring_send_in_task); over /dev/fuse that is ENOTCONN
KILLED = {'off': ('ENOTCONN', 'ECONNABORTED'), 'on': ('ENOTCONN', 'ECONNABORTED', 'ECANCELED')}


@pytest.mark.parametrize('mode', ['on', 'off'])
def test_kill9_with_requests_in_flight(env, mode):
    server = env.server()
    with enable_uring('Y'):
        fs = env.rmemfs(server, options=[f'uring={mode}'])
        p = start_workload(os.path.join(fs.mountpoint, 'f'))
        fs.proc.send_signal(signal.SIGKILL)
        assert workload_end(p) in KILLED[mode]
        fs.kill9()
        env.expected_warnings = True  # the next mount recovers the pool
        fs2 = env.rmemfs(server, options=[f'uring={mode}'])
        os.listdir(fs2.mountpoint)
        assert fs2.unmount() == 0


def test_unmount_with_requests_in_flight(env):
    """A lazy unmount while I/O runs: the I/O goes on until its file is closed, then the
    daemon finishes cleanly (exit status 0)."""
    server = env.server()
    with enable_uring('Y'):
        fs = env.rmemfs(server, options=['uring=on'])
        p = start_workload(os.path.join(fs.mountpoint, 'f'))
        subprocess.run(['umount', '-l', fs.mountpoint], check=True, timeout=30)
        assert not is_mounted(fs.mountpoint)
        time.sleep(0.5)
        assert p.poll() is None, 'the I/O of an open file failed after a lazy unmount'
        p.kill()
        p.wait()
        try:
            rc = fs.proc.wait(EXIT_TIMEOUT)
        except subprocess.TimeoutExpired:
            pytest.fail(f'rmemfs did not exit after the lazy unmount:\n{fs.output()}')
        assert rc == 0, fs.output()
