# SPDX-License-Identifier: GPL-2.0-or-later
"""A battery of operations done on the mount and on a reference directory on
local disk; results (values or errno names) and the resulting state must match.
"""
import errno
import mmap
import os
import socket
import stat
import time

import pytest

from conftest import (FALLOC_FL_KEEP_SIZE, FALLOC_FL_PUNCH_HOLE, FALLOC_FL_ZERO_RANGE,
                      RENAME_EXCHANGE, RENAME_NOREPLACE, UTIME_NOW, UTIME_OMIT, fallocate,
                      mounted_fs, outcome, pattern, renameat2, utimensat)


@pytest.fixture(params=[False, True], ids=['kcache-off', 'kcache-on'])
def mounted(env, request):
    """Every battery test twice: kernel caches off (the filesystem itself
    answers everything), then with the default 1 s entry/attr caching and
    keep_cache, as users run it."""
    yield from mounted_fs(env, caches=request.param)


def same(mounted, refdir, fn):
    """Run fn(base) on both trees; the outcomes must be equal. Returns it."""
    got = outcome(fn, mounted.path)
    want = outcome(fn, refdir)
    assert got == want, f'rmemfs gave {got}, local disk gave {want}'
    return got


def tree(base):
    """Everything comparable about a tree except inode numbers and times."""
    out = {}
    for root, dirs, files in os.walk(base):
        for name in dirs + files:
            p = os.path.join(root, name)
            rel = os.path.relpath(p, base)
            st = os.lstat(p)
            entry = {'mode': st.st_mode, 'uid': st.st_uid, 'gid': st.st_gid,
                     'nlink': st.st_nlink if not stat.S_ISDIR(st.st_mode) else None}
            if stat.S_ISREG(st.st_mode):
                entry['size'] = st.st_size
                with open(p, 'rb') as f:
                    entry['data'] = f.read()
            elif stat.S_ISLNK(st.st_mode):
                entry['target'] = os.readlink(p)
            elif stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode):
                entry['rdev'] = st.st_rdev
            out[rel] = entry
    return out


def assert_same_tree(mounted, refdir):
    a, b = tree(mounted.path), tree(refdir)
    assert sorted(a) == sorted(b)
    for k in a:
        assert a[k] == b[k], f'{k}: rmemfs {a[k]} != local {b[k]}'


def write_file(path, data, flags=os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode=0o644):
    fd = os.open(path, flags, mode)
    try:
        return os.write(fd, data)
    finally:
        os.close(fd)


def read_file(path):
    with open(path, 'rb') as f:
        return f.read()


def test_create_write_read(mounted, refdir):
    data = pattern(1, 300_000)

    def fn(base):
        p = os.path.join(base, 'f')
        n = write_file(p, data)
        fd = os.open(p, os.O_RDWR)
        try:
            os.pwrite(fd, b'XYZ' * 1000, 4000)      # across a block boundary
            os.pwrite(fd, b'tail', 299_999)          # extends by 3
            r1 = os.pread(fd, 10_000, 3_000)
            r2 = os.pread(fd, 100, 299_990)          # short read at EOF
            r3 = os.pread(fd, 100, 400_000)          # past EOF
        finally:
            os.close(fd)
        return n, r1, r2, r3, os.stat(p).st_size, read_file(p)
    same(mounted, refdir, fn)
    assert_same_tree(mounted, refdir)


def test_exclusive_create_and_eexist(mounted, refdir):
    def fn(base):
        p = os.path.join(base, 'x')
        write_file(p, b'1')
        r = [outcome(os.open, p, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)]
        os.mkdir(os.path.join(base, 'd'))
        r.append(outcome(os.mkdir, os.path.join(base, 'd')))
        r.append(outcome(os.mkdir, p))
        r.append(outcome(os.symlink, 'x', p))
        r.append(outcome(os.link, p, os.path.join(base, 'd')))
        r.append(outcome(os.mknod, p, stat.S_IFIFO | 0o644))
        return r
    same(mounted, refdir, fn)


def test_append(mounted, refdir):
    def fn(base):
        p = os.path.join(base, 'log')
        write_file(p, b'start\n')
        for i in range(50):
            fd = os.open(p, os.O_WRONLY | os.O_APPEND)
            os.lseek(fd, 0, os.SEEK_SET)  # O_APPEND ignores the offset
            os.write(fd, f'line {i}\n'.encode() * (i + 1))
            os.close(fd)
        return read_file(p)
    same(mounted, refdir, fn)


def test_truncate_both_ways(mounted, refdir):
    data = pattern(2, 20_000)

    def fn(base):
        p = os.path.join(base, 't')
        write_file(p, data)
        out = []
        for size in (10_000, 4096, 5000, 100, 0, 9000, 12_289, 3):
            os.truncate(p, size)
            out.append((os.stat(p).st_size, read_file(p)))
        fd = os.open(p, os.O_RDWR)
        os.ftruncate(fd, 70_000)
        os.pwrite(fd, b'end', 69_997)
        os.close(fd)
        out.append(read_file(p))
        # O_TRUNC on open
        fd = os.open(p, os.O_WRONLY | os.O_TRUNC)
        os.close(fd)
        out.append(os.stat(p).st_size)
        return out
    same(mounted, refdir, fn)


def test_shrink_then_grow_reads_zeros(mounted):
    p = mounted.p('z')
    write_file(p, b'\xff' * 10_000)
    os.truncate(p, 5000)
    os.truncate(p, 10_000)
    assert read_file(p) == b'\xff' * 5000 + b'\0' * 5000
    # a write past EOF leaves zeros between the old EOF and the write
    os.truncate(p, 3000)
    fd = os.open(p, os.O_WRONLY)
    os.pwrite(fd, b'Q', 9000)
    os.close(fd)
    assert read_file(p) == b'\xff' * 3000 + b'\0' * 6000 + b'Q'


def test_truncate_updates_times(mounted):
    p = mounted.p('tt')
    write_file(p, b'abc')
    os.utime(p, ns=(1_000_000_000, 1_000_000_000))
    before = os.stat(p)
    os.truncate(p, 1)
    after = os.stat(p)
    assert after.st_mtime_ns > before.st_mtime_ns
    assert after.st_ctime_ns >= before.st_ctime_ns


def test_rename_variants(mounted, refdir):
    def fn(base):
        j = lambda *a: os.path.join(base, *a)  # noqa: E731
        os.makedirs(j('a', 'sub'))
        os.mkdir(j('b'))
        os.mkdir(j('empty'))
        os.mkdir(j('full'))
        write_file(j('full', 'x'), b'x')
        write_file(j('f1'), b'one')
        write_file(j('f2'), b'two')
        r = []
        r.append(outcome(os.rename, j('f1'), j('b', 'f1')))           # across directories
        r.append(outcome(os.rename, j('b', 'f1'), j('f2')))           # over a file
        r.append(outcome(os.rename, j('a', 'sub'), j('empty')))       # dir over empty dir
        r.append(outcome(os.rename, j('b'), j('full')))               # over non-empty dir
        r.append(outcome(os.rename, j('f2'), j('full')))              # file over dir
        r.append(outcome(os.rename, j('full'), j('f2')))              # dir over file
        r.append(outcome(os.rename, j('a'), j('a', 'inside')))        # into itself
        r.append(outcome(os.rename, j('nonexistent'), j('zz')))
        r.append(outcome(os.rename, j('f2'), j('f2')))                # to itself
        write_file(j('g1'), b'g1')
        write_file(j('g2'), b'g2')
        r.append(outcome(renameat2, j('g1'), j('g2'), RENAME_NOREPLACE))
        r.append(outcome(renameat2, j('g1'), j('g3'), RENAME_NOREPLACE))
        r.append(outcome(renameat2, j('g3'), j('g2'), RENAME_EXCHANGE))
        r.append(outcome(renameat2, j('g3'), j('full'), RENAME_EXCHANGE))  # file <-> dir
        r.append(outcome(renameat2, j('g2'), j('nothere'), RENAME_EXCHANGE))
        r.append(outcome(renameat2, j('g2'), j('g1'), RENAME_NOREPLACE | RENAME_EXCHANGE))
        r.append(sorted(os.listdir(base)))
        r.append(read_file(j('g3', 'x')) if os.path.isdir(j('g3')) else None)
        return r
    same(mounted, refdir, fn)
    assert_same_tree(mounted, refdir)


def test_rename_dir_updates_dotdot_and_nlink(mounted, refdir):
    def fn(base):
        j = lambda *a: os.path.join(base, *a)  # noqa: E731
        os.makedirs(j('p1', 'c'))
        os.mkdir(j('p2'))
        n = [os.stat(j('p1')).st_nlink, os.stat(j('p2')).st_nlink]
        os.rename(j('p1', 'c'), j('p2', 'c'))
        n += [os.stat(j('p1')).st_nlink, os.stat(j('p2')).st_nlink]
        n.append(os.path.samestat(os.stat(j('p2', 'c', '..')), os.stat(j('p2'))))
        return n
    same(mounted, refdir, fn)


def test_link_counts(mounted, refdir):
    def fn(base):
        j = lambda *a: os.path.join(base, *a)  # noqa: E731
        write_file(j('f'), b'data')
        os.mkdir(j('d'))
        out = [os.stat(j('f')).st_nlink]
        os.link(j('f'), j('d', 'hard'))
        out.append(os.stat(j('f')).st_nlink)
        out.append(os.path.samestat(os.stat(j('f')), os.stat(j('d', 'hard'))))
        out.append(outcome(os.link, j('d'), j('dirlink')))  # EPERM
        os.unlink(j('f'))
        out.append(os.stat(j('d', 'hard')).st_nlink)
        out.append(read_file(j('d', 'hard')))
        out.append(os.stat(base).st_nlink)
        os.mkdir(j('d', 'e'))
        out.append(os.stat(j('d')).st_nlink)
        os.rmdir(j('d', 'e'))
        out.append(os.stat(j('d')).st_nlink)
        return out
    same(mounted, refdir, fn)


def test_symlinks(mounted, refdir):
    def fn(base):
        j = lambda *a: os.path.join(base, *a)  # noqa: E731
        write_file(j('target'), b'pointed')
        os.symlink('target', j('rel'))
        os.symlink('/nonexistent/dangling', j('dangling'))
        long_target = 'x/' * 1000 + 'end'
        os.symlink(long_target, j('long'))
        out = [os.readlink(j('rel')), read_file(j('rel')), os.readlink(j('dangling')),
               os.readlink(j('long')) == long_target, os.lstat(j('long')).st_size,
               outcome(read_file, j('dangling')), stat.S_ISLNK(os.lstat(j('rel')).st_mode),
               outcome(os.readlink, j('target'))]
        return out
    same(mounted, refdir, fn)


def test_fifo_and_socket(mounted, refdir):
    def fn(base):
        j = lambda *a: os.path.join(base, *a)  # noqa: E731
        os.mkfifo(j('fifo'), 0o640)
        os.mknod(j('sock'), stat.S_IFSOCK | 0o600)
        os.mknod(j('plain'), 0o600)  # no type: a regular file
        return [oct(os.lstat(j(n)).st_mode) for n in ('fifo', 'sock', 'plain')]
    same(mounted, refdir, fn)

    # a FIFO on the mount carries data between two processes
    fifo = mounted.p('fifo')
    pid = os.fork()
    if pid == 0:
        try:
            with open(fifo, 'wb') as f:
                f.write(b'through the fifo')
        finally:
            os._exit(0)
    with open(fifo, 'rb') as f:
        assert f.read() == b'through the fifo'
    os.waitpid(pid, 0)

    # a unix socket bound on the mount
    path = mounted.p('live.sock')
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        srv.bind(path)
        srv.listen(1)
        assert stat.S_ISSOCK(os.lstat(path).st_mode)
        cli = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        cli.connect(path)
        conn, _ = srv.accept()
        cli.sendall(b'ping')
        assert conn.recv(4) == b'ping'
        conn.close()
        cli.close()
    finally:
        srv.close()


@pytest.mark.skipif(os.geteuid() != 0, reason='device nodes need root')
def test_device_nodes(mounted, refdir):
    def fn(base):
        j = lambda *a: os.path.join(base, *a)  # noqa: E731
        os.mknod(j('null'), stat.S_IFCHR | 0o666, os.makedev(1, 3))
        os.mknod(j('blk'), stat.S_IFBLK | 0o600, os.makedev(7, 200))
        return [(oct(os.lstat(j(n)).st_mode), os.lstat(j(n)).st_rdev) for n in ('null', 'blk')]
    same(mounted, refdir, fn)


def test_chmod_chown(mounted, refdir):
    def fn(base):
        j = lambda *a: os.path.join(base, *a)  # noqa: E731
        write_file(j('f'), b'x')
        os.symlink('f', j('l'))
        out = []
        for mode in (0o000, 0o4755, 0o2711, 0o1777, 0o644):
            os.chmod(j('f'), mode)
            out.append(oct(os.stat(j('f')).st_mode))
        os.chown(j('f'), 1234, 5678)
        out.append((os.stat(j('f')).st_uid, os.stat(j('f')).st_gid))
        os.chown(j('f'), -1, 42)
        out.append((os.stat(j('f')).st_uid, os.stat(j('f')).st_gid))
        os.lchown(j('l'), 77, 88)
        out.append((os.lstat(j('l')).st_uid, os.lstat(j('l')).st_gid, os.stat(j('l')).st_uid))
        os.chmod(j('f'), 0o6755)
        os.chown(j('f'), 1000, 1000)  # chown clears set-uid/set-gid
        out.append(oct(os.stat(j('f')).st_mode))
        return out
    same(mounted, refdir, fn)


def test_ctime_moves_on_change(mounted):
    p = mounted.p('c')
    write_file(p, b'x')
    steps = [lambda: os.chmod(p, 0o600), lambda: os.chown(p, 5, 5),
             lambda: os.setxattr(p, 'user.k', b'v'), lambda: os.link(p, p + '2'),
             lambda: os.rename(p + '2', p + '3'), lambda: write_file(p, b'yy', os.O_WRONLY)]
    for i, step in enumerate(steps):
        before = os.stat(p).st_ctime_ns
        # with the writeback cache the kernel keeps ctime, from its coarse
        # (tick) clock, which a loaded VM updates late: leave it many ticks
        time.sleep(0.05)
        step()
        assert os.stat(p).st_ctime_ns > before, 'step %d did not move ctime' % i


def test_utimes(mounted, refdir):
    def fn(base):
        p = os.path.join(base, 'u')
        write_file(p, b'x')
        out = []
        os.utime(p, ns=(1_234_567_891_123_456_789, 987_654_321_987_654_321))
        st = os.stat(p)
        out.append((st.st_atime_ns, st.st_mtime_ns))
        utimensat(p, UTIME_OMIT, (5, 500))
        st = os.stat(p)
        out.append((st.st_atime_ns, st.st_mtime_ns))
        utimensat(p, (7, 700), UTIME_OMIT)
        st = os.stat(p)
        out.append((st.st_atime_ns, st.st_mtime_ns))
        os.symlink('u', p + '.l')
        utimensat(p + '.l', (11, 0), (12, 0), follow=False)
        out.append(os.lstat(p + '.l').st_mtime_ns)
        return out
    same(mounted, refdir, fn)

    p = mounted.p('u')
    t0 = time.time_ns()
    utimensat(p, UTIME_NOW, UTIME_OMIT)
    st = os.stat(p)
    assert abs(st.st_atime_ns - t0) < 5_000_000_000 and st.st_mtime_ns == 5 * 10**9 + 500
    utimensat(p, UTIME_OMIT, UTIME_NOW)
    st = os.stat(p)
    assert abs(st.st_mtime_ns - t0) < 5_000_000_000
    ctime = st.st_ctime_ns
    time.sleep(0.01)
    utimensat(p, UTIME_OMIT, UTIME_OMIT)  # changes nothing, not even ctime
    assert os.stat(p).st_ctime_ns == ctime


def test_write_updates_mtime(mounted):
    p = mounted.p('m')
    write_file(p, b'x')
    os.utime(p, ns=(10**9, 10**9))
    with open(p, 'r+b') as f:
        f.write(b'y')
    st = os.stat(p)
    assert st.st_mtime_ns > 10**9 and st.st_ctime_ns >= st.st_mtime_ns - 10**9


def test_xattrs(mounted, refdir):
    def fn(base):
        p = os.path.join(base, 'x')
        write_file(p, b'x')
        out = []
        os.setxattr(p, 'user.a', b'alpha')
        os.setxattr(p, 'user.empty', b'')
        os.setxattr(p, 'trusted.t', b'\0binary\xff' * 100)
        out.append(sorted(os.listxattr(p)))
        out.append(os.getxattr(p, 'user.a'))
        out.append(os.getxattr(p, 'user.empty'))
        out.append(os.getxattr(p, 'trusted.t'))
        out.append(outcome(os.getxattr, p, 'user.missing'))
        out.append(outcome(os.setxattr, p, 'user.a', b'x', os.XATTR_CREATE))
        out.append(outcome(os.setxattr, p, 'user.new', b'x', os.XATTR_REPLACE))
        os.setxattr(p, 'user.a', b'replaced', os.XATTR_REPLACE)
        out.append(os.getxattr(p, 'user.a'))
        os.removexattr(p, 'user.a')
        out.append(outcome(os.removexattr, p, 'user.a'))
        out.append(sorted(os.listxattr(p)))
        os.mkdir(os.path.join(base, 'd'))
        os.setxattr(os.path.join(base, 'd'), 'user.dir', b'on a directory')
        out.append(os.getxattr(os.path.join(base, 'd'), 'user.dir'))
        big = b'v' * 1500  # ext4 keeps all of a file's xattrs in one 4 KiB block
        os.setxattr(p, 'user.big', big)
        out.append(os.getxattr(p, 'user.big') == big)
        return out
    same(mounted, refdir, fn)


def test_fallocate_modes(mounted, refdir):
    data = pattern(3, 64 * 1024)

    def fn(base):
        p = os.path.join(base, 'fa')
        write_file(p, data)
        fd = os.open(p, os.O_RDWR)
        out = []
        try:
            os.posix_fallocate(fd, 100_000, 20_000)               # mode 0: grows
            out.append(os.fstat(fd).st_size)
            fallocate(fd, FALLOC_FL_KEEP_SIZE, 200_000, 50_000)   # past EOF, size kept
            out.append(os.fstat(fd).st_size)
            fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 1000, 20_000)
            fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 32_768, 8192)
            out.append(os.fstat(fd).st_size)
            out.append(outcome(fallocate, fd, FALLOC_FL_PUNCH_HOLE, 0, 4096))
            os.pwrite(fd, b'after', 250_000)                      # into the KEEP_SIZE blocks
            out.append(os.pread(fd, 300_000, 0))
        finally:
            os.close(fd)
        return out
    same(mounted, refdir, fn)


def test_fallocate_space_accounting(mounted):
    p = mounted.p('space')
    write_file(p, b'')
    fd = os.open(p, os.O_RDWR)
    try:
        os.posix_fallocate(fd, 0, 1 << 20)
        assert os.fstat(fd).st_blocks * 512 >= 1 << 20
        assert os.pread(fd, 1 << 20, 0) == b'\0' * (1 << 20)
        fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, 1 << 20)
        assert os.fstat(fd).st_blocks == 0
        assert os.fstat(fd).st_size == 1 << 20
        # modes beyond allocate / keep-size / punch are refused cleanly
        with pytest.raises(OSError) as e:
            fallocate(fd, FALLOC_FL_ZERO_RANGE, 0, 4096)
        assert e.value.errno == errno.EOPNOTSUPP
    finally:
        os.close(fd)


def test_seek_data_hole(mounted, refdir):
    def fn(base):
        p = os.path.join(base, 's')
        fd = os.open(p, os.O_RDWR | os.O_CREAT, 0o644)
        out = []
        try:
            os.pwrite(fd, b'a' * 4096, 0)
            os.pwrite(fd, b'b' * 8192, 1 << 20)
            os.ftruncate(fd, 4 << 20)
            for off in (0, 100, 4096, 5000, (1 << 20) + 10, (1 << 20) + 8192, (4 << 20) - 1):
                out.append((off, outcome(os.lseek, fd, off, os.SEEK_DATA),
                            outcome(os.lseek, fd, off, os.SEEK_HOLE)))
            out.append(outcome(os.lseek, fd, 4 << 20, os.SEEK_DATA))
            out.append(outcome(os.lseek, fd, 5 << 20, os.SEEK_HOLE))
        finally:
            os.close(fd)
        return out
    same(mounted, refdir, fn)


def test_copy_file_range(mounted, refdir):
    src_data = pattern(4, 3 * 1024 * 1024 + 123)

    def fn(base):
        j = lambda *a: os.path.join(base, *a)  # noqa: E731
        write_file(j('src'), src_data)
        write_file(j('dst'), b'D' * 10_000)
        s = os.open(j('src'), os.O_RDONLY)
        d = os.open(j('dst'), os.O_RDWR)
        out = []
        try:
            out.append(os.copy_file_range(s, d, 2 * 1024 * 1024, 0, 5000))   # into the middle
            out.append(os.copy_file_range(s, d, 3 * 1024 * 1024, 100, 20_000))  # grows dst
            out.append(os.copy_file_range(s, d, 100, len(src_data) - 50, 0))  # short at EOF
            out.append(os.copy_file_range(s, d, 100, len(src_data) + 10, 0))  # past EOF: 0
            out.append(read_file(j('dst')))
            # within one file, non-overlapping, both directions
            out.append(os.copy_file_range(d, d, 4096, 0, 16_384))
            out.append(os.copy_file_range(d, d, 4096, 20_000, 0))
            out.append(read_file(j('dst')))
        finally:
            os.close(s)
            os.close(d)
        return out
    same(mounted, refdir, fn)


def test_statfs(mounted):
    st = os.statvfs(mounted.path)
    assert st.f_bsize == 4096 and st.f_frsize == 4096
    assert st.f_namemax == 255
    total = st.f_blocks * st.f_frsize
    assert 32 << 20 <= total <= 64 << 20, total  # a 64 MiB pool less its metadata areas
    assert 0 < st.f_bfree <= st.f_blocks and st.f_bavail <= st.f_bfree
    assert st.f_files > 0 and 0 < st.f_ffree <= st.f_files
    write_file(mounted.p('big'), b'b' * (4 << 20))
    st2 = os.statvfs(mounted.path)
    used = (st.f_bfree - st2.f_bfree) * 4096
    assert 4 << 20 <= used <= (4 << 20) + (256 << 10), used
    assert st2.f_ffree < st.f_ffree
    os.unlink(mounted.p('big'))
    deadline = time.monotonic() + 10  # freed blocks return once the journal is durable
    while time.monotonic() < deadline:
        if os.statvfs(mounted.path).f_bfree == st.f_bfree:
            break
        time.sleep(0.1)
    assert os.statvfs(mounted.path).f_bfree == st.f_bfree


def test_name_lengths(mounted, refdir):
    def fn(base):
        out = []
        for n in (255, 256, 1000):
            name = 'n' * n
            out.append(outcome(write_file, os.path.join(base, name), b'x'))
            out.append(outcome(os.mkdir, os.path.join(base, 'd' * n)))
            out.append(outcome(os.stat, os.path.join(base, name)))
        out.append(sorted(len(x) for x in os.listdir(base)))
        return [o if o[0] == 'err' else 'ok' for o in out[:-1]] + [out[-1]]
    same(mounted, refdir, fn)


def test_rmdir_and_unlink_errors(mounted, refdir):
    def fn(base):
        j = lambda *a: os.path.join(base, *a)  # noqa: E731
        os.makedirs(j('d', 'e'))
        write_file(j('f'), b'x')
        return [outcome(os.rmdir, j('d')), outcome(os.rmdir, j('f')), outcome(os.unlink, j('d')),
                outcome(os.rmdir, j('missing')), outcome(os.unlink, j('missing')),
                outcome(os.mkdir, j('f', 'sub')), outcome(os.rmdir, j('d', 'e')),
                outcome(os.rmdir, j('d')), outcome(os.listdir, j('f'))]
    same(mounted, refdir, fn)


def test_readdir_stable_while_deleting(mounted):
    d = mounted.p('many')
    os.mkdir(d)
    names = {f'entry-{i:05d}' for i in range(scaled_count(3000))}
    for n in names:
        write_file(os.path.join(d, n), b'')
    seen = []
    with os.scandir(d) as it:
        for e in it:
            seen.append(e.name)
            os.unlink(e.path)  # deleting what was returned must not skip or repeat
    assert sorted(seen) == sorted(names)
    assert os.listdir(d) == []


def scaled_count(n):
    from conftest import scaled
    return scaled(n, 100)


def test_readdir_types_and_inodes(mounted, refdir):
    def fn(base):
        j = lambda *a: os.path.join(base, *a)  # noqa: E731
        os.mkdir(j('dir'))
        write_file(j('file'), b'')
        os.symlink('file', j('link'))
        os.mkfifo(j('fifo'))
        out = []
        with os.scandir(base) as it:
            for e in sorted(it, key=lambda e: e.name):
                out.append((e.name, e.is_dir(follow_symlinks=False),
                            e.is_file(follow_symlinks=False), e.is_symlink(),
                            e.inode() == os.lstat(e.path).st_ino))
        return out
    same(mounted, refdir, fn)


def test_unlinked_open_file(mounted):
    p = mounted.p('ghost')
    free0 = os.statvfs(mounted.path).f_bfree
    fd = os.open(p, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        os.write(fd, b'g' * (1 << 20))
        os.unlink(p)
        assert not os.path.exists(p)
        assert os.fstat(fd).st_nlink == 0
        os.pwrite(fd, b'still here', 0)
        assert os.pread(fd, 10, 0) == b'still here'
    finally:
        os.close(fd)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and os.statvfs(mounted.path).f_bfree < free0:
        time.sleep(0.1)
    assert os.statvfs(mounted.path).f_bfree == free0


def test_shared_writable_mmap(mounted, refdir):
    data = pattern(5, 5 * 4096 + 100)

    def fn(base):
        p = os.path.join(base, 'mm')
        write_file(p, data)
        fd = os.open(p, os.O_RDWR)
        try:
            m = mmap.mmap(fd, len(data), mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
            m[10:20] = b'0123456789'
            m[4090:4110] = b'#' * 20
            m[-5:] = b'TAIL!'
            m.flush()
            seen_by_read = os.pread(fd, len(data), 0)
            m.close()
        finally:
            os.close(fd)
        return seen_by_read, read_file(p)
    same(mounted, refdir, fn)

    # a write() is visible through an existing mapping, and the mapped bytes after close
    p = mounted.p('mm')
    fd = os.open(p, os.O_RDWR)
    m = mmap.mmap(fd, 4096, mmap.MAP_SHARED)
    os.pwrite(fd, b'via write', 0)
    assert m[:9] == b'via write'
    m.close()
    os.close(fd)
    mounted.remount()
    assert read_file(mounted.p('mm'))[:9] == b'via write'


def test_o_direct(mounted):
    p = mounted.p('direct')
    buf = mmap.mmap(-1, 1 << 20)  # page-aligned buffer
    buf.write(pattern(6, 1 << 20))
    fd = os.open(p, os.O_RDWR | os.O_CREAT | os.O_DIRECT, 0o644)
    try:
        assert os.pwritev(fd, [buf], 0) == 1 << 20
        assert os.pwritev(fd, [memoryview(buf)[:4096]], 3 << 20) == 4096
        out = mmap.mmap(-1, 1 << 20)
        assert os.preadv(fd, [out], 0) == 1 << 20
        assert out[:] == buf[:]
    finally:
        os.close(fd)
    data = read_file(p)
    assert len(data) == (3 << 20) + 4096
    assert data[:1 << 20] == buf[:] and data[1 << 20:3 << 20] == b'\0' * (2 << 20)


def test_large_file_roundtrip(mounted):
    data = pattern(7, 16 << 20)
    p = mounted.p('large')
    with open(p, 'wb') as f:
        for i in range(0, len(data), 1 << 20):
            f.write(data[i:i + (1 << 20)])
    with open(p, 'rb') as f:
        assert f.read() == data
    mounted.remount()
    with open(p, 'rb') as f:
        assert f.read() == data
    assert os.stat(p).st_blocks * 512 >= len(data)


def test_setgid_directory_inheritance(mounted, refdir):
    def fn(base):
        d = os.path.join(base, 'sgid')
        os.mkdir(d)
        os.chown(d, 0, 4321)
        os.chmod(d, 0o2775)
        write_file(os.path.join(d, 'f'), b'')
        os.mkdir(os.path.join(d, 'sub'))
        f, s = os.stat(os.path.join(d, 'f')), os.stat(os.path.join(d, 'sub'))
        return f.st_gid, s.st_gid, oct(s.st_mode)
    if os.geteuid() != 0:
        pytest.skip('chown to another group needs root')
    same(mounted, refdir, fn)


def test_fsync_and_fdatasync(mounted):
    p = mounted.p('sync')
    fd = os.open(p, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        os.write(fd, b'durable')
        os.fsync(fd)
        os.fdatasync(fd)
    finally:
        os.close(fd)
    dfd = os.open(mounted.path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)
    assert read_file(p) == b'durable'


def test_access(mounted):
    p = mounted.p('acc')
    write_file(p, b'')
    os.chmod(p, 0o644)
    assert os.access(p, os.R_OK | os.W_OK)
    assert not os.access(p, os.X_OK)  # not even root executes a file without x bits
    os.chmod(p, 0o744)
    assert os.access(p, os.X_OK)
    assert not os.access(mounted.p('nope'), os.F_OK)
