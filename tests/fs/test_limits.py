# SPDX-License-Identifier: GPL-2.0-or-later
"""Limits and contention: ENOSPC with the mount staying usable, a 100,000-entry
directory, a sparse 4 GiB file on a 64 MiB pool, POSIX permission checks as
a non-root user, several processes writing at once.
"""
import errno
import json
import os
import shutil
import subprocess
import sys
import textwrap
import time

import pytest

from conftest import pattern, scaled


def wait_free(path, at_least, timeout=10):
    """Freed blocks come back once the journal that freed them is durable."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if os.statvfs(path).f_bfree >= at_least:
            return True
        time.sleep(0.1)
    return False


@pytest.mark.parametrize('kernel_wb', [True, False], ids=['writeback_cache', 'no-kcache'])
def test_enospc_and_recovery(env, kernel_wb):
    """With the kernel's writeback cache (the default) a write lands in the
    page cache and ENOSPC comes from the fsync (or close) after it, as with
    NFS; without it, from the write itself, and the size is exact."""
    server = env.server('16M')
    fs = env.rmemfs(server, options=[] if kernel_wb else ['writeback_cache=off'])
    mnt = fs.mountpoint
    free0 = os.statvfs(mnt).f_bfree
    chunk = pattern(1, 1 << 20)
    written = 0
    fd = os.open(os.path.join(mnt, 'filler'), os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        with pytest.raises(OSError) as e:
            for _ in range(64):
                n = os.write(fd, chunk)
                os.fsync(fd)
                written += n
        assert e.value.errno == errno.ENOSPC
    finally:
        try:
            os.close(fd)
        except OSError as e:  # the error was reported already; close may repeat it
            assert e.errno == errno.ENOSPC
    assert written >= (free0 * 4096) - (2 << 20), (written, free0)
    st = os.statvfs(mnt)
    assert st.f_bfree * 4096 < (1 << 20)

    # still usable: names, metadata, reads, small writes into what is left
    assert os.listdir(mnt) == ['filler']
    size = os.stat(os.path.join(mnt, 'filler')).st_size
    if kernel_wb:  # the kernel keeps the size of the write that failed in its page cache
        assert size in (written, written + len(chunk)), (size, written)
    else:
        assert size == written
    with open(os.path.join(mnt, 'filler'), 'rb') as f:
        assert f.read(1 << 20) == chunk
    os.mkdir(os.path.join(mnt, 'dir'))
    # delete, and the space is there again
    os.unlink(os.path.join(mnt, 'filler'))
    assert wait_free(mnt, free0 - 16), (os.statvfs(mnt).f_bfree, free0)
    with open(os.path.join(mnt, 'dir', 'again'), 'wb') as f:
        for _ in range(4):
            f.write(chunk)
    with open(os.path.join(mnt, 'dir', 'again'), 'rb') as f:
        assert f.read() == chunk * 4
    assert fs.unmount() == 0
    fs2 = env.rmemfs(server, mountpoint=mnt)
    with open(os.path.join(mnt, 'dir', 'again'), 'rb') as f:
        assert f.read() == chunk * 4
    assert fs2.unmount() == 0


def test_enospc_does_not_leak(env):
    """Hitting ENOSPC repeatedly gives every block back."""
    server = env.server('16M')
    fs = env.rmemfs(server)
    mnt = fs.mountpoint
    free0 = os.statvfs(mnt).f_bfree
    for round_ in range(3):
        with pytest.raises(OSError) as e:
            with open(os.path.join(mnt, f'f{round_}'), 'wb') as f:
                for _ in range(64):
                    f.write(b'x' * (1 << 20))
                    f.flush()
        assert e.value.errno == errno.ENOSPC
        os.unlink(os.path.join(mnt, f'f{round_}'))
        assert wait_free(mnt, free0), (round_, os.statvfs(mnt).f_bfree, free0)


def test_hundred_thousand_entries(env):
    n = scaled(100_000, 1000)
    server = env.server('512M' if n > 50_000 else '128M')  # metadata room for the entries
    fs = env.rmemfs(server)
    d = os.path.join(fs.mountpoint, 'big')
    os.mkdir(d)
    names = [f'entry-{i:06d}-{"x" * (i % 40)}' for i in range(n)]
    t0 = time.monotonic()
    for name in names:
        os.mknod(os.path.join(d, name), 0o644)
    t_create = time.monotonic() - t0
    for name in names[::7]:
        assert os.stat(os.path.join(d, name)).st_size == 0
    t0 = time.monotonic()
    listed = os.listdir(d)
    t_list = time.monotonic() - t0
    assert len(listed) == n and set(listed) == set(names)
    assert os.stat(d).st_nlink == 2

    fs.unmount()
    fs = env.rmemfs(server, mountpoint=fs.mountpoint)
    listed = os.listdir(d)
    assert len(listed) == n and set(listed) == set(names)
    for name in names[::101]:
        os.stat(os.path.join(d, name))

    t0 = time.monotonic()
    for name in names:
        os.unlink(os.path.join(d, name))
    t_delete = time.monotonic() - t0
    assert os.listdir(d) == []
    os.rmdir(d)
    print(f'{n} entries: create {t_create:.1f} s, list {t_list:.2f} s, delete {t_delete:.1f} s')


def drop_caches():
    with open('/proc/sys/vm/drop_caches', 'w') as f:
        f.write('3')


def test_highest_offsets(mounted):
    """A byte at the largest offsets a 64-bit file may hold (2^63 - 2 is the
    last byte of a file of size 2^63 - 1, the kernel's limit) is written,
    made durable and read back from the pool, also after a remount; one past
    it fails (the kernel says EINVAL: offset + count passes the limit). The block cache writes back whole blocks: the last one ends
    at 2^63, which once failed the write-back with EFBIG after the write had
    been accepted, and the byte read back as zero."""
    offs = [2**63 - 2, 2**63 - 4096 - 3, 2**62, 2**44 + 5]
    for i, off in enumerate(offs):
        fd = os.open(mounted.p(f'hi{i}'), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            assert os.pwrite(fd, bytes([0x40 + i]), off) == 1
            os.fsync(fd)
        finally:
            os.close(fd)
    fd = os.open(mounted.p('hi0'), os.O_WRONLY)
    try:
        with pytest.raises(OSError) as e:
            os.pwrite(fd, b'x', 2**63 - 1)
        assert e.value.errno in (errno.EFBIG, errno.EINVAL)
    finally:
        os.close(fd)
    for when in ('after dropping the caches', 'after a remount'):
        if when.endswith('remount'):
            mounted.remount()
        drop_caches()
        for i, off in enumerate(offs):
            fd = os.open(mounted.p(f'hi{i}'), os.O_RDONLY)
            try:
                got = os.pread(fd, 1, off)
                size = os.fstat(fd).st_size
            finally:
                os.close(fd)
            assert got == bytes([0x40 + i]), f'offset {off:#x} {when}: {got!r}'
            assert size == off + 1, f'offset {off:#x} {when}: size {size}'


def test_sparse_4g_file_on_small_pool(env):
    server = env.server('64M')
    fs = env.rmemfs(server)
    mnt = fs.mountpoint
    free0 = os.statvfs(mnt).f_bfree
    p = os.path.join(mnt, 'sparse')
    G = 1 << 30
    marks = {0: b'start', 2 * G + 12345: b'middle', 4 * G - 4096: b'last block'}
    fd = os.open(p, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        os.ftruncate(fd, 4 * G)
        for off, data in marks.items():
            os.pwrite(fd, data, off)
        st = os.fstat(fd)
        assert st.st_size == 4 * G
        assert st.st_blocks * 512 <= 4 * 4096
        for off, data in marks.items():
            assert os.pread(fd, len(data), off) == data
        assert os.pread(fd, 1 << 20, G + 7) == bytes(1 << 20)
        assert os.pread(fd, 100, 4 * G) == b''
        assert os.lseek(fd, 4096, os.SEEK_DATA) == 2 * G + 12288
        assert os.lseek(fd, 2 * G + 12345, os.SEEK_HOLE) == 2 * G + 16384
        # grow past the pool's size twice over, still sparse
        os.pwrite(fd, b'far', 9 * G)
        assert os.fstat(fd).st_size == 9 * G + 3
    finally:
        os.close(fd)
    assert free0 - os.statvfs(mnt).f_bfree <= 8
    assert fs.unmount() == 0
    env.rmemfs(server, mountpoint=mnt)
    with open(p, 'rb') as f:
        for off, data in list(marks.items()) + [(9 * G, b'far')]:
            f.seek(off)
            assert f.read(len(data)) == data
        f.seek(3 * G)
        assert f.read(1 << 20) == bytes(1 << 20)
    os.unlink(p)


NOBODY_SCRIPT = textwrap.dedent('''
    import errno, json, os, sys
    mnt = sys.argv[1]
    j = lambda *a: os.path.join(mnt, *a)
    def res(fn, *a):
        try:
            fn(*a)
            return 'ok'
        except OSError as e:
            return errno.errorcode[e.errno]
    def read(p):
        with open(p, 'rb') as f:
            return f.read()
    def write(p):
        with open(p, 'ab') as f:
            f.write(b'x')
    def create(p):
        os.close(os.open(p, os.O_CREAT | os.O_WRONLY, 0o644))
    out = {
        'uid': os.getuid(),
        'read_secret': res(read, j('secret')),
        'read_public': res(read, j('public')),
        'write_public': res(write, j('public')),
        'write_open': res(write, j('open')),
        'create_in_rootdir': res(create, j('rootdir', 'mine')),
        'mkdir_in_rootdir': res(os.mkdir, j('rootdir', 'sub')),
        'unlink_in_rootdir': res(os.unlink, j('rootdir', 'file')),
        'stat_in_private': res(os.stat, j('private', 'inside')),
        'list_private': res(os.listdir, j('private')),
        'chmod_root_file': res(os.chmod, j('public'), 0o666),
        'chown_root_file': res(os.chown, j('public'), 65534, 65534),
        'utime_explicit_root_file': res(os.utime, j('open'), (1, 1)),
        'utime_now_writable_root_file': res(os.utime, j('open'), None),
        'setxattr_root_file': res(os.setxattr, j('public'), 'user.x', b'1'),
        'trusted_visible': 'trusted.t' in os.listxattr(j('public')),
        'create_in_sticky': res(create, j('sticky', 'nobodys')),
        'chmod_own_file': res(os.chmod, j('sticky', 'nobodys'), 0o600),
        'chown_own_file_to_root': res(os.chown, j('sticky', 'nobodys'), 0, 0),
        'unlink_root_file_in_sticky': res(os.unlink, j('sticky', 'roots')),
        'unlink_own_file_in_sticky': res(os.unlink, j('sticky', 'nobodys')),
        'access_secret_r': os.access(j('secret'), os.R_OK),
        'access_public_r': os.access(j('public'), os.R_OK),
        'access_public_w': os.access(j('public'), os.W_OK),
        'exec_noexec': res(os.execv, j('public'), [j('public')]),
    }
    print(json.dumps(out))
''')


@pytest.mark.skipif(os.geteuid() != 0, reason='switching users needs root')
def test_permissions_as_nobody(mounted):
    if not shutil.which('setpriv'):
        pytest.skip('setpriv (util-linux) not installed')
    j = mounted.p
    with open(j('secret'), 'wb') as f:
        f.write(b'root only')
    os.chmod(j('secret'), 0o600)
    with open(j('public'), 'wb') as f:
        f.write(b'everyone reads')
    os.chmod(j('public'), 0o644)
    os.setxattr(j('public'), 'trusted.t', b'hidden')
    with open(j('open'), 'wb') as f:
        f.write(b'everyone writes')
    os.chmod(j('open'), 0o666)
    os.mkdir(j('rootdir'), 0o755)
    with open(j('rootdir', 'file'), 'wb'):
        pass
    os.mkdir(j('private'), 0o700)
    with open(j('private', 'inside'), 'wb'):
        pass
    os.mkdir(j('sticky'))
    os.chmod(j('sticky'), 0o1777)
    with open(j('sticky', 'roots'), 'wb'):
        pass
    os.chmod(j('sticky', 'roots'), 0o666)

    r = subprocess.run(['setpriv', '--reuid=65534', '--regid=65534', '--clear-groups',
                        sys.executable, '-c', NOBODY_SCRIPT, mounted.path],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    want = {
        'uid': 65534,
        'read_secret': 'EACCES', 'read_public': 'ok', 'write_public': 'EACCES',
        'write_open': 'ok', 'create_in_rootdir': 'EACCES', 'mkdir_in_rootdir': 'EACCES',
        'unlink_in_rootdir': 'EACCES', 'stat_in_private': 'EACCES', 'list_private': 'EACCES',
        'chmod_root_file': 'EPERM', 'chown_root_file': 'EPERM',
        'utime_explicit_root_file': 'EPERM', 'utime_now_writable_root_file': 'ok',
        'setxattr_root_file': 'EACCES', 'trusted_visible': False,
        'create_in_sticky': 'ok', 'chmod_own_file': 'ok', 'chown_own_file_to_root': 'EPERM',
        'unlink_root_file_in_sticky': 'EPERM', 'unlink_own_file_in_sticky': 'ok',
        'access_secret_r': False, 'access_public_r': True, 'access_public_w': False,
        'exec_noexec': 'EACCES',
    }
    assert got == want
    # and root's view afterwards
    assert os.path.exists(j('sticky', 'roots'))
    assert not os.path.exists(j('sticky', 'nobodys'))
    with open(j('open'), 'rb') as f:
        assert f.read() == b'everyone writesx'


CONCURRENT_WORKER = textwrap.dedent('''
    import os, random, sys
    mode, mnt, me, n = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    rng = random.Random(me)
    REC = 4096
    if mode == 'own':
        p = os.path.join(mnt, f'own{me}')
        data = random.Random(1000 + me).randbytes(n * REC)
        fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        pos = 0
        while pos < len(data):
            step = rng.choice([1, 100, 4096, 10_000, 65536, 300_000])
            os.pwrite(fd, data[pos:pos + step], pos)
            pos += step
        os.close(fd)
    elif mode == 'shared':
        # slots me, me+W, ...: disjoint; the last 64 slots: everyone, whole records
        W = int(sys.argv[5])
        fd = os.open(os.path.join(mnt, 'shared'), os.O_WRONLY)
        for k in range(me, n, W):
            os.pwrite(fd, bytes([me + 1]) * REC, k * REC)
        for seq in range(200):
            k = n + rng.randrange(64)
            os.pwrite(fd, (bytes([me + 1]) + seq.to_bytes(2, 'big')) * (REC // 3) + b'E', k * REC)
        os.close(fd)
    elif mode == 'append':
        fd = os.open(os.path.join(mnt, 'appended'), os.O_WRONLY | os.O_APPEND)
        for seq in range(n):
            rec = f'[{me:02d}:{seq:06d}]'.encode()
            os.write(fd, rec * (1000 // len(rec)) + b'\\n')
        os.close(fd)
''')


def run_workers(mode, mnt, workers, n, *extra):
    procs = [subprocess.Popen([sys.executable, '-c', CONCURRENT_WORKER, mode, mnt, str(w), str(n),
                               *map(str, extra)]) for w in range(workers)]
    try:
        for p in procs:
            assert p.wait(300) == 0
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()


def test_concurrent_writers(mounted):
    W = 4
    n = scaled(512, 64)  # records of 4 KiB per writer
    mnt = mounted.path

    run_workers('own', mnt, W, n)
    for w in range(W):
        with open(os.path.join(mnt, f'own{w}'), 'rb') as f:
            import random
            assert f.read() == random.Random(1000 + w).randbytes(n * 4096), f'own{w}'

    with open(os.path.join(mnt, 'shared'), 'wb') as f:
        f.truncate((n + 64) * 4096)
    run_workers('shared', mnt, W, n, W)
    with open(os.path.join(mnt, 'shared'), 'rb') as f:
        data = f.read()
    assert len(data) == (n + 64) * 4096
    for k in range(n):
        assert data[k * 4096:(k + 1) * 4096] == bytes([k % W + 1]) * 4096, f'slot {k}'
    for k in range(n, n + 64):
        rec = data[k * 4096:(k + 1) * 4096]
        if rec == bytes(4096):
            continue  # nobody picked this slot
        head = rec[:3]
        assert rec == head * (4096 // 3) + b'E' and 1 <= head[0] <= W, f'torn record {k}'

    with open(os.path.join(mnt, 'appended'), 'wb'):
        pass
    per = scaled(300, 50)
    run_workers('append', mnt, W, per)
    with open(os.path.join(mnt, 'appended'), 'rb') as f:
        lines = f.read().split(b'\n')[:-1]
    assert len(lines) == W * per
    seen = set()
    for line in lines:
        rec = line[:11]
        assert line == rec * (1000 // 11), 'torn append'
        seen.add(rec)
    assert len(seen) == W * per
    mounted.remount()
    with open(os.path.join(mnt, 'appended'), 'rb') as f:
        assert len(f.read().split(b'\n')[:-1]) == W * per
