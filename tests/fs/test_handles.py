# SPDX-License-Identifier: GPL-2.0-or-later
"""File handles: name_to_handle_at(2) and open_by_handle_at(2), what an NFS
server and backup tools use. A handle carries the inode's node id; for an
inode the kernel no longer holds, it looks up "." by node id (and ".." to
reconnect a directory to the tree). A handle opens its file or directory after
the kernel forgot it, after renames, from either of two hard links, after a
remount (inode numbers persist) and on a reader; a file or directory with no
name left gives ESTALE, also one a crash lost (no new file gets its number).
The mount root's handle is a directory handle like any other.

open_by_handle_at needs CAP_DAC_READ_SEARCH and dropping the kernel's
dentries and inodes needs root: the tests skip without them."""
import contextlib
import errno
import os
import signal

import pytest

from conftest import (fsync_dir, mounted_fs, name_to_handle_at, open_by_handle_at, pattern,
                      wait_for)

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason='needs root (CAP_DAC_READ_SEARCH)')


@pytest.fixture(params=[False, True], ids=['kcache-off', 'kcache-on'])
def mounted(env, request):
    """Kernel caches off, then the default 1 s entry/attr caching."""
    yield from mounted_fs(env, caches=request.param)


def forget():
    """The kernel drops every unused dentry and inode (machine-wide, harmless):
    a handle of an inode nothing holds then reaches rmemfs by node id."""
    with open('/proc/sys/vm/drop_caches', 'w') as f:
        f.write('2')


@contextlib.contextmanager
def by_handle(mnt, handle, flags=os.O_RDONLY):
    mount_fd = os.open(mnt, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fd = open_by_handle_at(mount_fd, handle, flags)
    finally:
        os.close(mount_fd)
    try:
        yield fd
    finally:
        os.close(fd)


def read_by_handle(mnt, handle):
    """(st_ino, the whole content) of the file handle names."""
    with by_handle(mnt, handle) as fd:
        return os.fstat(fd).st_ino, os.pread(fd, 1 << 20, 0)


def list_by_handle(mnt, handle):
    with by_handle(mnt, handle, os.O_RDONLY | os.O_DIRECTORY) as fd:
        return sorted(os.listdir(fd))


def assert_stale(mnt, handle, flags=os.O_RDONLY):
    with pytest.raises(OSError) as e:
        with by_handle(mnt, handle, flags):
            pass
    assert e.value.errno == errno.ESTALE, f'open_by_handle_at: {e.value}'


def write_file(path, data, sync=False):
    with open(path, 'wb') as f:
        f.write(data)
        if sync:
            f.flush()
            os.fsync(f.fileno())


def inodes(mnt):
    """Inodes rmemfs holds (statfs: files - ffree), unlinked ones still referenced included."""
    st = os.statvfs(mnt)
    return st.f_files - st.f_ffree


def test_file(mounted):
    data = pattern(1, 100_000)
    write_file(mounted.p('f'), data)
    h = name_to_handle_at(mounted.p('f'))
    forget()
    assert read_by_handle(mounted.path, h) == (os.stat(mounted.p('f')).st_ino, data)
    forget()
    with by_handle(mounted.path, h, os.O_WRONLY) as fd:
        os.pwrite(fd, b'through the handle', 10)
    with open(mounted.p('f'), 'rb') as f:
        assert f.read() == data[:10] + b'through the handle' + data[28:]


def test_hard_links(mounted):
    before = inodes(mounted.path)
    data = pattern(2, 5000)
    write_file(mounted.p('a'), data)
    os.mkdir(mounted.p('d'))
    os.link(mounted.p('a'), mounted.p('d', 'b'))
    ino = os.stat(mounted.p('a')).st_ino
    ha, hb = name_to_handle_at(mounted.p('a')), name_to_handle_at(mounted.p('d', 'b'))
    assert ha == hb, 'two names of one inode give two handles'
    forget()
    assert read_by_handle(mounted.path, ha) == (ino, data)
    assert read_by_handle(mounted.path, hb) == (ino, data)
    os.unlink(mounted.p('a'))
    forget()
    assert read_by_handle(mounted.path, ha) == (ino, data)
    os.unlink(mounted.p('d', 'b'))
    os.rmdir(mounted.p('d'))
    forget()
    assert_stale(mounted.path, ha)
    assert_stale(mounted.path, hb)
    # every reference the lookups by node id took was given back: the inode is freed
    assert wait_for(lambda: inodes(mounted.path) == before, timeout=30), \
        f'{inodes(mounted.path) - before} inodes left behind'


def test_directories_and_root(mounted):
    os.makedirs(mounted.p('d', 'e'))
    write_file(mounted.p('d', 'x'), b'x')
    write_file(mounted.p('d', 'e', 'y'), b'in e')
    handles = {p: name_to_handle_at(mounted.p(*p.split('/')) if p else mounted.path)
               for p in ('', 'd', 'd/e')}
    forget()
    assert list_by_handle(mounted.path, handles['']) == sorted(os.listdir(mounted.path))
    assert list_by_handle(mounted.path, handles['d']) == ['e', 'x']
    forget()
    with by_handle(mounted.path, handles['d/e'], os.O_RDONLY | os.O_DIRECTORY) as dfd:
        assert os.listdir(dfd) == ['y']
        fd = os.open('y', os.O_RDONLY, dir_fd=dfd)
        try:
            assert os.read(fd, 100) == b'in e'
        finally:
            os.close(fd)
    # a directory handle never opens as a plain file for writing
    with pytest.raises(IsADirectoryError):
        with by_handle(mounted.path, handles['d'], os.O_WRONLY):
            pass


def test_renames(mounted):
    os.makedirs(mounted.p('d1', 'sub'))
    os.mkdir(mounted.p('d2'))
    data = pattern(3, 3000)
    write_file(mounted.p('d1', 'f'), data)
    write_file(mounted.p('d1', 'sub', 'z'), b'z')
    hf, hsub = name_to_handle_at(mounted.p('d1', 'f')), name_to_handle_at(mounted.p('d1', 'sub'))
    os.rename(mounted.p('d1', 'f'), mounted.p('d2', 'g'))
    os.rename(mounted.p('d1', 'sub'), mounted.p('d2', 'sub2'))
    os.rename(mounted.p('d2'), mounted.p('d1', 'd3'))
    forget()
    assert read_by_handle(mounted.path, hf)[1] == data
    assert list_by_handle(mounted.path, hsub) == ['z']
    # the directory reached by handle sits where it is now: its parent is d1/d3
    with by_handle(mounted.path, hsub, os.O_RDONLY | os.O_DIRECTORY) as dfd:
        pfd = os.open('..', os.O_RDONLY | os.O_DIRECTORY, dir_fd=dfd)
        try:
            assert sorted(os.listdir(pfd)) == ['g', 'sub2']
        finally:
            os.close(pfd)


def test_deleted(mounted):
    write_file(mounted.p('f'), b'old')
    os.mkdir(mounted.p('d'))
    ino = os.stat(mounted.p('f')).st_ino
    hf, hd = name_to_handle_at(mounted.p('f')), name_to_handle_at(mounted.p('d'))
    forget()
    assert read_by_handle(mounted.path, hf) == (ino, b'old')
    os.unlink(mounted.p('f'))
    os.rmdir(mounted.p('d'))
    forget()
    assert_stale(mounted.path, hf)
    assert_stale(mounted.path, hd, os.O_RDONLY | os.O_DIRECTORY)
    # new files get new numbers: the handle stays stale
    for i in range(20):
        write_file(mounted.p(f'new{i}'), b'new')
        assert os.stat(mounted.p(f'new{i}')).st_ino != ino
    forget()
    assert_stale(mounted.path, hf)


def test_remount(mounted):
    """The NFS server restart: handles taken before a remount open after it."""
    os.mkdir(mounted.p('d'))
    data = pattern(4, 20_000)
    write_file(mounted.p('d', 'f'), data)
    os.link(mounted.p('d', 'f'), mounted.p('g'))
    paths = ['', 'd', 'd/f', 'g']
    handles = {p: name_to_handle_at(mounted.p(*p.split('/')) if p else mounted.path)
               for p in paths}
    mounted.remount()
    assert {p: name_to_handle_at(mounted.p(*p.split('/')) if p else mounted.path)
            for p in paths} == handles, 'handles changed across a remount'
    forget()
    assert read_by_handle(mounted.path, handles['d/f'])[1] == data
    assert read_by_handle(mounted.path, handles['g'])[1] == data
    assert list_by_handle(mounted.path, handles['d']) == ['f']
    assert 'd' in list_by_handle(mounted.path, handles[''])


def test_crash_never_reuses_a_number(env):
    """A crash loses a file the kernel had (its handle given out): no file
    created after the recovery gets its inode number, so the handle is stale
    and never opens another file. Handles of durable files still open."""
    server = env.server('64M', backing_file=os.path.join(env.workdir, 'pool.img'))
    fs = env.rmemfs(server)
    mnt = fs.mountpoint
    write_file(os.path.join(mnt, 'kept'), b'kept', sync=True)
    fsync_dir(mnt)
    kept = name_to_handle_at(os.path.join(mnt, 'kept'))
    # nothing reaches the pool from here on: the memserver is stopped, then killed
    server.proc.send_signal(signal.SIGSTOP)
    try:
        os.mknod(os.path.join(mnt, 'lost'))
        lost_ino = os.stat(os.path.join(mnt, 'lost')).st_ino
        lost = name_to_handle_at(os.path.join(mnt, 'lost'))
        fs.kill9()
        server.stop(signal.SIGKILL)
    finally:
        if server.proc.poll() is None:
            server.proc.send_signal(signal.SIGCONT)
    server.start()
    env.rmemfs(server, mountpoint=mnt)
    assert not os.path.exists(os.path.join(mnt, 'lost'))
    for i in range(20):
        write_file(os.path.join(mnt, f'new{i}'), b'new')
        assert os.stat(os.path.join(mnt, f'new{i}')).st_ino != lost_ino, \
            'a new file got the number of the file the crash lost'
    forget()
    assert_stale(mnt, lost)
    assert read_by_handle(mnt, kept)[1] == b'kept'


def test_reader(env):
    """A read-only reader beside the writer answers handles of what it follows."""
    server = env.server('64M')
    w = env.rmemfs(server).mountpoint
    r = env.rmemfs(server, options=['ro', 'refresh=1']).mountpoint
    os.mkdir(os.path.join(w, 'd'))
    data = pattern(5, 10_000)
    write_file(os.path.join(w, 'd', 'f'), data, sync=True)
    fsync_dir(w)
    assert wait_for(lambda: os.path.exists(os.path.join(r, 'd', 'f')), timeout=30)
    h = name_to_handle_at(os.path.join(r, 'd', 'f'))
    assert h == name_to_handle_at(os.path.join(w, 'd', 'f'))
    forget()
    assert read_by_handle(r, h)[1] == data
    os.rename(os.path.join(w, 'd', 'f'), os.path.join(w, 'g'))
    fsync_dir(w)
    assert wait_for(lambda: os.path.exists(os.path.join(r, 'g')), timeout=30)
    forget()
    assert read_by_handle(r, h)[1] == data
    os.unlink(os.path.join(w, 'g'))
    fsync_dir(w)
    assert wait_for(lambda: not os.path.exists(os.path.join(r, 'g')), timeout=30)
    forget()
    assert_stale(r, h)
