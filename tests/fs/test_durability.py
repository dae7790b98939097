# SPDX-License-Identifier: GPL-2.0-or-later
"""Durability and ownership: remount equality, kill -9 then remount (fsync'd
data intact, rmemfs-fsck clean), one read-write mount per pool (a second mount
is refused naming the holder), takeover of a crashed holder's lease within
15 s, the memserver fencing a stopped holder whose lease was taken over, clean
shutdown on SIGTERM, umount(8)'s helper umount.fuse.rmemfs returning only once the
daemon has closed.
"""
import errno
import os
import random
import re
import signal
import stat
import subprocess
import sys
import textwrap
import time

import pytest

from conftest import (Rmemfs, binary, daemons_of, fsck, is_mounted, pattern, pool_logic_only,
                      scaled, unmount)


def snapshot_stats(base):
    """lstat + link target + xattrs of every path (no data read)."""
    out = {}
    for root, dirs, files in os.walk(base):
        for p in [root] + [os.path.join(root, n) for n in dirs + files]:
            rel = os.path.relpath(p, base)
            st = os.lstat(p)
            e = {'ino': st.st_ino, 'mode': st.st_mode, 'uid': st.st_uid, 'gid': st.st_gid,
                 'nlink': st.st_nlink, 'size': st.st_size, 'rdev': st.st_rdev,
                 'blocks': st.st_blocks, 'atime': st.st_atime_ns, 'mtime': st.st_mtime_ns,
                 'ctime': st.st_ctime_ns}
            if stat.S_ISLNK(st.st_mode):
                e['target'] = os.readlink(p)
            else:
                e['xattrs'] = {k: os.getxattr(p, k) for k in sorted(os.listxattr(p))}
            out[rel] = e
    return out


def snapshot_data(base):
    out = {}
    for root, dirs, files in os.walk(base):
        for n in files:
            p = os.path.join(root, n)
            if stat.S_ISREG(os.lstat(p).st_mode):
                with open(p, 'rb') as f:
                    out[os.path.relpath(p, base)] = f.read()
    return out


def build_tree(base):
    j = lambda *a: os.path.join(base, *a)  # noqa: E731
    os.makedirs(j('a', 'b', 'c'))
    os.mkdir(j('private'), 0o700)
    for i in range(20):
        with open(j('a', f'f{i}'), 'wb') as f:
            f.write(pattern(i, i * 3001))
    with open(j('a', 'b', 'big'), 'wb') as f:
        f.write(pattern(99, 3 << 20))
    with open(j('sparse'), 'wb') as f:
        f.seek(10 << 20)
        f.write(b'end of sparse')
    os.link(j('a', 'f3'), j('a', 'b', 'c', 'hardlink'))
    os.symlink('../a/f1', j('a', 'b', 'sym'))
    os.symlink('/absolute/dangling', j('dangling'))
    os.mkfifo(j('fifo'), 0o620)
    if os.geteuid() == 0:
        os.mknod(j('tty'), stat.S_IFCHR | 0o620, os.makedev(5, 0))
        os.chown(j('a', 'f5'), 1000, 2000)
        os.lchown(j('a', 'b', 'sym'), 3000, 4000)
    os.chmod(j('a', 'f6'), 0o4750)
    os.chmod(j('a', 'b'), 0o1777)
    os.setxattr(j('a', 'f7'), 'user.color', b'blue')
    os.setxattr(j('a', 'f7'), 'user.blob', bytes(range(256)) * 8)
    os.setxattr(j('a'), 'user.dir', b'x')
    if os.geteuid() == 0:
        os.setxattr(j('a', 'f8'), 'trusted.secret', b'root only')
    os.utime(j('a', 'f9'), ns=(1_111_111_111_222_333_444, 1_222_222_222_333_444_555))
    os.truncate(j('a', 'f10'), 100_000)
    with open(j('a', 'f11'), 'r+b') as f:
        f.seek(50_000)
        f.write(b'after a hole')


@pool_logic_only
def test_remount_equality(mounted):
    build_tree(mounted.path)
    data1 = snapshot_data(mounted.path)
    stats1 = snapshot_stats(mounted.path)   # after the reads: atimes have settled
    mounted.remount()
    stats2 = snapshot_stats(mounted.path)   # before any read in the new process
    assert sorted(stats1) == sorted(stats2)
    for k in stats1:
        assert stats1[k] == stats2[k], f'{k}: before {stats1[k]}\n after {stats2[k]}'
    assert snapshot_data(mounted.path) == data1
    # and once more, with the kernel caches on
    mounted.remount(options=[])
    assert snapshot_data(mounted.path) == data1


def write_synced(path, data):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


def test_kill9_then_remount(env):
    server = env.server('64M')
    fs = env.rmemfs(server)
    mnt = fs.mountpoint
    os.mkdir(os.path.join(mnt, 'd'))
    synced = {}
    for i in range(10):
        p = os.path.join('d', f'synced{i}')
        synced[p] = pattern(1000 + i, 5000 * i + 17)
        write_synced(os.path.join(mnt, p), synced[p])
    # more changes that were never fsync'd
    for i in range(10):
        with open(os.path.join(mnt, f'unsynced{i}'), 'wb') as f:
            f.write(pattern(2000 + i, 70_000))
    with open(os.path.join(mnt, 'd', 'synced1'), 'ab') as f:
        f.write(b'appended, not synced')
    fs.kill9()
    assert not is_mounted(mnt)

    r = fsck(server)
    assert r.returncode == 0, f'rmemfs-fsck after a crash:\n{r.stdout}\n{r.stderr}'

    fs2 = env.rmemfs(server, mountpoint=mnt)
    for p, data in synced.items():
        with open(os.path.join(mnt, p), 'rb') as f:
            got = f.read()
        if p == os.path.join('d', 'synced1'):
            assert got in (data, data + b'appended, not synced')
        else:
            assert got == data, p
    for i in range(10):  # unsynced files: absent, or readable without error
        try:
            with open(os.path.join(mnt, f'unsynced{i}'), 'rb') as f:
                f.read()
        except FileNotFoundError:
            pass
    # the recovered filesystem keeps working
    write_synced(os.path.join(mnt, 'after'), b'after recovery')
    assert fs2.unmount() == 0
    r = fsck(server)
    assert r.returncode == 0, f'rmemfs-fsck after a clean unmount:\n{r.stdout}\n{r.stderr}'


def test_overwrite_times_survive_a_crash_after_fsync(env):
    """An overwrite that moves no size journals its times with its data (at
    write-back, not when accepted): after fsync both survive kill -9."""
    server = env.server('64M')
    fs = env.rmemfs(server)
    p = os.path.join(fs.mountpoint, 'f')
    data = bytearray(pattern(1, 256 << 10))
    write_synced(p, bytes(data))
    os.utime(p, ns=(1_000_000_000, 1_000_000_000))
    fd = os.open(p, os.O_WRONLY)
    try:
        for off in (0, 64 << 10, 200 << 10):
            os.pwrite(fd, b'x' * 4096, off)
            data[off:off + 4096] = b'x' * 4096
        os.fsync(fd)
    finally:
        os.close(fd)
    st = os.stat(p)
    assert st.st_mtime_ns != 1_000_000_000 and st.st_size == len(data)
    fs.kill9()
    env.rmemfs(server, mountpoint=fs.mountpoint)
    st2 = os.stat(p)
    assert (st2.st_mtime_ns, st2.st_ctime_ns) == (st.st_mtime_ns, st.st_ctime_ns)
    with open(p, 'rb') as f:
        assert f.read() == bytes(data)


WRITER = textwrap.dedent('''
    import os, random, sys
    mnt, done_log = sys.argv[1], sys.argv[2]
    with open(done_log, 'a') as log:
        i = 0
        while True:
            data = random.Random(i).randbytes(1000 + (i * 7919) % 200_000)
            p = os.path.join(mnt, f'w{i % 40}')
            try:
                fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                os.write(fd, data)
                os.fsync(fd)
                os.close(fd)
            except OSError:
                sys.exit(0)
            log.write(f'{i}\\n')
            log.flush()
            i += 1
''')


def test_kill9_during_writes(env, tmp_path):
    server = env.server('128M')
    fs = env.rmemfs(server)
    done_log = tmp_path / 'done'
    writer = subprocess.Popen([sys.executable, '-c', WRITER, fs.mountpoint, str(done_log)])
    try:
        time.sleep(3)
        fs.kill9()
        writer.wait(30)
    finally:
        if writer.poll() is None:
            writer.kill()
            writer.wait()
    done = [int(x) for x in done_log.read_text().split()]
    assert len(done) > 5, 'the writer made no progress before the crash'

    r = fsck(server)
    assert r.returncode == 0, f'rmemfs-fsck after a crash mid-write:\n{r.stdout}\n{r.stderr}'
    env.rmemfs(server, mountpoint=fs.mountpoint)
    latest = {}
    for i in done:
        latest[i % 40] = i
    for slot, i in latest.items():
        data = random.Random(i).randbytes(1000 + (i * 7919) % 200_000)
        with open(os.path.join(fs.mountpoint, f'w{slot}'), 'rb') as f:
            got = f.read()
        # the write after it (same slot, i + 40) was in flight: it may be
        # durable, or its O_TRUNC alone, or nothing of it
        nxt = i + 40
        newer = random.Random(nxt).randbytes(1000 + (nxt * 7919) % 200_000)
        assert got in (data, b'', newer), f'w{slot}: fsync\'d version {i} lost'


def test_second_mount_refused(env):
    server = env.server('64M')
    fs1 = env.rmemfs(server)
    with open(os.path.join(fs1.mountpoint, 'mine'), 'wb') as f:
        f.write(b'first mount')
    t0 = time.monotonic()
    fs2 = env.rmemfs(server, start=False)
    fs2.start(wait=False)
    rc = fs2.proc.wait(30)
    fs2.pump.join()
    out = fs2.output()
    assert rc != 0
    assert time.monotonic() - t0 < 20
    assert re.search(r'mounted .*by .*pid %d' % fs1.proc.pid, out), out
    assert not is_mounted(fs2.mountpoint)

    # the same refusal in daemon mode: the launching process reports it
    mnt3 = env.mountpoint()
    r = subprocess.run(Rmemfs(server, mnt3, ['entry_timeout=0']).command(foreground=False),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and re.search(r'mounted .*by', r.stderr), r
    assert not is_mounted(mnt3)

    with open(os.path.join(fs1.mountpoint, 'mine'), 'rb') as f:
        assert f.read() == b'first mount'


def test_lease_takeover_after_crash(env):
    server = env.server('64M')
    fs1 = env.rmemfs(server)
    write_synced(os.path.join(fs1.mountpoint, 'kept'), b'survives the crash')
    fs1.kill9()
    t0 = time.monotonic()
    fs2 = env.rmemfs(server, mountpoint=fs1.mountpoint)
    took = time.monotonic() - t0
    assert took < 15, f'takeover took {took:.1f} s'
    with open(os.path.join(fs2.mountpoint, 'kept'), 'rb') as f:
        assert f.read() == b'survives the crash'
    print(f'lease taken over in {took:.1f} s')


def wait_stopped(pid, timeout=10):
    """Until every thread of pid is stopped (state T in /proc)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        states = set()
        for tid in os.listdir(f'/proc/{pid}/task'):
            with open(f'/proc/{pid}/task/{tid}/stat') as f:
                states.add(f.read().rsplit(')', 1)[1].split()[0])
        if states == {'T'}:
            return
        time.sleep(0.02)
    raise AssertionError(f'{pid} did not stop')


# Holds a file of the holder's mount open with written, unflushed data, and fsyncs it
# on request. A separate process: any fork+exec by a process holding that descriptor
# would close it in the child, and the close waits for the stopped daemon.
QUEUED_WRITER = r'''
import os, random, sys
path, seed, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
os.write(fd, random.Random(seed).randbytes(n))
print('written', flush=True)
sys.stdin.readline()
try:
    os.fsync(fd)
    print('fsync 0', flush=True)
except OSError as e:
    print('fsync', e.errno, flush=True)
try:
    os.close(fd)
except OSError:
    pass
'''


def test_stopped_holder_is_fenced_by_the_memserver(env, tmp_path):
    """A holder is SIGSTOPped with written data still queued (dirty in the page
    cache); rmemfs-fsck --repair takes its silent lease over, a second mount writes.
    When the holder runs again, not one byte it had queued reaches the pool: the
    memserver fenced it. RMEM_TEST_NO_SELF_FENCE=1 turns the holder's own
    time-based fencing off, so only the memserver's fence can stop it."""
    img = str(tmp_path / 'pool.img')
    server = env.server('64M', backing_file=img)
    fs1 = env.rmemfs(server, extra_env={'RMEM_TEST_NO_SELF_FENCE': '1'})
    write_synced(os.path.join(fs1.mountpoint, 'before'), b'fsync\'d before the takeover')
    seed, n = 0xfe4ce, 128 << 10
    writer = subprocess.Popen([sys.executable, '-c', QUEUED_WRITER,
                               os.path.join(fs1.mountpoint, 'queued'), str(seed), str(n)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    queued = pattern(seed, n)

    def landed():
        with open(img, 'rb') as f:
            pool = f.read()
        return [i for i in range(0, n, 4096) if queued[i:i + 4096] in pool]

    try:
        assert writer.stdout.readline() == 'written\n'
        # at once: rmemfs writes back what reached its cache after dirty_expire (1 s)
        fs1.proc.send_signal(signal.SIGSTOP)
        wait_stopped(fs1.proc.pid)
        assert not landed(), 'the queued data reached the pool before the takeover'

        r = fsck(server, '--repair', '-o', 'takeover_ms=1000')
        assert r.returncode in (0, 1), f'rmemfs-fsck --repair:\n{r.stdout}\n{r.stderr}'
        assert server.pump.wait_for(r'client [0-9a-f]+ fenced: [1-9]\d* connection', 10), \
            server.pump.text()
        fs2 = env.rmemfs(server)
        write_synced(os.path.join(fs2.mountpoint, 'second'), b'the new holder')

        fs1.proc.send_signal(signal.SIGCONT)
        writer.stdin.write('fsync\n')
        writer.stdin.flush()
        fsync_errno = int(writer.stdout.readline().split()[1])
        assert writer.wait(30) == 0
    finally:
        fs1.proc.send_signal(signal.SIGCONT)
        if writer.poll() is None:
            writer.kill()
            writer.wait(10)
    assert fs1.pump.wait_for(r'LEASE LOST', 15), fs1.output()
    blocks = landed()
    assert not blocks, f'{len(blocks)} blocks of the fenced holder reached the pool'
    assert fsync_errno == errno.EIO, \
        f'fsync of the fenced holder: {os.strerror(fsync_errno)}\n{fs1.output()}'
    with open(os.path.join(fs2.mountpoint, 'before'), 'rb') as f:
        assert f.read() == b'fsync\'d before the takeover'
    with open(os.path.join(fs2.mountpoint, 'second'), 'rb') as f:
        assert f.read() == b'the new holder'
    assert fs2.unmount() == 0, fs2.output()
    fs1.kill9()


def test_sigterm_is_a_clean_unmount(env):
    server = env.server('64M')
    fs = env.rmemfs(server)
    with open(os.path.join(fs.mountpoint, 'f'), 'wb') as f:
        f.write(b'not fsync\'d, but unmounted cleanly')
    fs.proc.send_signal(signal.SIGTERM)
    assert fs.proc.wait(30) == 0, fs.output()
    fs.pump.join()
    deadline = time.monotonic() + 10
    while is_mounted(fs.mountpoint) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not is_mounted(fs.mountpoint)
    t0 = time.monotonic()
    fs2 = env.rmemfs(server, mountpoint=fs.mountpoint)
    assert time.monotonic() - t0 < 5, 'the lease was not released at unmount'
    with open(os.path.join(fs2.mountpoint, 'f'), 'rb') as f:
        assert f.read() == b'not fsync\'d, but unmounted cleanly'


def umount_helper(mnt, *args):
    return subprocess.run([binary('fuse-client/umount.fuse.rmemfs'), mnt, *args],
                          capture_output=True, text=True, timeout=120)


def test_umount_helper_waits_for_the_daemon(env, tmp_path):
    """umount.fuse.rmemfs (what umount(8) runs for a fuse.rmemfs mount) returns only
    once the daemon has written back its cache, checkpointed and freed its lease: right
    after it the memserver stops (as systemd stops memserver@ after the mount at
    shutdown) and starts again from its pool file, and the next mount is clean (no
    journal recovery) and reads back every byte that was only in the cache."""
    if os.geteuid() != 0:
        pytest.skip('umount2() needs root')
    img = str(tmp_path / 'pool.img')
    server = env.server('256M', backing_file=img)
    fs = env.rmemfs(server, options=['cache_size=256M', 'writeback=on'])
    seed, n = 0xd1e7, scaled(96 << 20, 8 << 20)
    data = pattern(seed, n)
    with open(os.path.join(fs.mountpoint, 'dirty'), 'wb') as f:
        f.write(data)  # not fsync'ed: in the daemon's cache, mostly not yet written back
    t0 = time.monotonic()
    r = umount_helper(fs.mountpoint, '-v')
    took = time.monotonic() - t0
    print(f'seed {seed:#x}, {n >> 20} MiB dirty; the helper took {took:.2f} s')
    assert r.returncode == 0, f'umount.fuse.rmemfs exit {r.returncode}: {r.stderr}'
    assert not is_mounted(fs.mountpoint)
    exited = fs.proc.poll() is not None
    server.stop()  # at once, before anything else: what would cut a daemon still closing
    assert exited, (f'umount.fuse.rmemfs returned ({took:.2f} s) while the daemon was still '
                    f'closing:\n{r.stdout}{r.stderr}')
    assert fs.proc.returncode == 0, fs.output()
    fs.pump.join()
    server.start()
    fs2 = env.rmemfs(server, mountpoint=fs.mountpoint)
    with open(os.path.join(fs2.mountpoint, 'dirty'), 'rb') as f:
        assert f.read() == data, f'seed {seed:#x}: the data differs after the remount'
    assert fs2.unmount() == 0, fs2.output()
    assert 'unclean shutdown' not in fs2.output(), fs2.output()
    assert 'unclean shutdown' not in fs.output(), fs.output()


def test_umount_helper_without_a_daemon(env, tmp_path):
    """Where no rmemfs daemon answers (here a tmpfs) the helper just unmounts; an
    unmount that fails is umount(8)'s exit 32; bad arguments are its exit 1."""
    if os.geteuid() != 0:
        pytest.skip('mounting a tmpfs needs root')
    assert umount_helper(str(tmp_path), '-x').returncode == 1
    assert umount_helper(str(tmp_path)).returncode == 32  # not a mount point
    mnt = env.mountpoint()
    subprocess.run(['mount', '-t', 'tmpfs', 'tmpfs', mnt], check=True, timeout=30)
    try:
        r = umount_helper(mnt, '-v', '-n', '-t', 'tmpfs')
        assert r.returncode == 0, r.stderr
        assert 'no rmemfs daemon answers' in r.stdout, r.stdout
        assert not is_mounted(mnt)
    finally:
        if is_mounted(mnt):
            subprocess.run(['umount', '-l', mnt], timeout=30)
    assert not daemons_of(mnt)


@pool_logic_only
def test_many_remounts_stay_consistent(mounted):
    expected = {}
    for round_ in range(scaled(4, 2)):
        for i in range(20):
            name = f'r{round_}-{i}'
            expected[name] = pattern(round_ * 100 + i, 1000 * i)
            with open(mounted.p(name), 'wb') as f:
                f.write(expected[name])
        victim = f'r{round_}-0'
        os.unlink(mounted.p(victim))
        del expected[victim]
        mounted.remount()
        assert sorted(os.listdir(mounted.path)) == sorted(expected)
        for name, data in expected.items():
            with open(mounted.p(name), 'rb') as f:
                assert f.read() == data


def test_server_death_gives_errors_not_hangs(env):
    """The memserver dies under a mounted filesystem: file operations fail with
    an error within the transport's timeout instead of hanging, and the mount
    can still be taken down."""
    server = env.server('64M')
    fs = env.rmemfs(server, options=['direct_io', 'reconnect_timeout=1'])
    with open(os.path.join(fs.mountpoint, 'f'), 'wb') as f:
        f.write(pattern(5, 1 << 20))
    server.proc.kill()
    server.proc.wait(10)
    t0 = time.monotonic()
    errors = []
    for attempt in range(3):
        try:
            with open(os.path.join(fs.mountpoint, 'f'), 'rb') as f:
                f.read()
            with open(os.path.join(fs.mountpoint, f'g{attempt}'), 'wb') as f:
                f.write(b'x' * 65536)
                os.fsync(f.fileno())
        except OSError as e:
            errors.append(e.errno)
    assert errors, 'I/O kept succeeding without a server'
    assert time.monotonic() - t0 < 60
    r = unmount(fs.mountpoint)
    assert r.returncode == 0, r.stderr
    fs.proc.wait(60)
    assert fs.proc.returncode is not None
    print(f'errors: {errors}, rmemfs exit status {fs.proc.returncode}')
