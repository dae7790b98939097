# SPDX-License-Identifier: GPL-2.0-or-later
"""Failure semantics through a real mount (docs/ARCHITECTURE.md, "Failure
model"): a memserver that goes away and comes back with the same pool is
waited for (-o reconnect_timeout) and applications see nothing; a pool that
is lost - gone past the timeout, or another pool at the address - puts the
mount in a failed state that is said once, shown by the stats xattr, refuses
every change with EIO, and unmounts at once.

The memserver runs on a fixed port across its restarts (MemServer.start()
reuses the port it had); a backing file keeps its pool across a restart, an
anonymous pool is a new pool with a new pool id.
"""
import errno
import json
import os
import re
import subprocess
import sys
import time

import pytest

from conftest import (MountFailed, binary, pattern, stats, unmount, wait_for)

WAIT = 60.0  # seconds any single wait below may take before the test fails


# An application in its own process: pwrite + fsync of 4 KiB blocks in a loop until the
# stop file exists; its progress (iterations) in the progress file; at the end one JSON line:
# the errors it saw and, per block, the iteration whose bytes (pattern(i, 4096)) it holds.
# (Not a thread of the test: the test starts memservers, and a child of a process that holds
# files of the mount open closes them, which is a FUSE flush that waits out the outage.)
WRITER = r"""
import errno, json, os, random, sys
path, stop, progress = sys.argv[1:4]
fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
i, errors, last = 0, [], {}
while not os.path.exists(stop):
    try:
        os.pwrite(fd, random.Random(i).randbytes(4096), (i % 64) * 4096)
        os.fsync(fd)
        last[i % 64] = i
    except OSError as e:
        errors.append((i, errno.errorcode.get(e.errno, e.errno)))
    i += 1
    with open(progress + '.tmp', 'w') as f:
        f.write(str(len(last)) + ' ' + str(i))
    os.replace(progress + '.tmp', progress)
os.close(fd)
print(json.dumps({'errors': errors, 'last': last}))
"""


class Writer:
    def __init__(self, workdir, path):
        self.stop_file = os.path.join(workdir, 'writer.stop')
        self.progress_file = os.path.join(workdir, 'writer.progress')
        self.proc = subprocess.Popen([sys.executable, '-c', WRITER, path, self.stop_file,
                                      self.progress_file], stdout=subprocess.PIPE, text=True)

    def progress(self):
        """(blocks written, iterations)"""
        try:
            with open(self.progress_file) as f:
                return tuple(int(v) for v in f.read().split())
        except (OSError, ValueError):
            return (0, 0)

    def finish(self):
        """Stop it; its errors and the expected file content."""
        open(self.stop_file, 'w').close()
        try:
            out, _ = self.proc.communicate(timeout=2 * WAIT)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait(10)
        res = json.loads(out.strip().splitlines()[-1])
        last = {int(b): i for b, i in res['last'].items()}
        data = b''.join(pattern(last[b], 4096) if b in last else b'\0' * 4096
                        for b in range(max(last) + 1))
        return res['errors'], data


def lines(fs, regex):
    return [l for l in fs.output().splitlines() if re.search(regex, l)]


def assert_changes_fail(mnt):
    """Every operation that would change the filesystem fails with EIO."""
    changes = {
        'create': lambda: os.close(os.open(os.path.join(mnt, 'new'), os.O_CREAT | os.O_WRONLY)),
        'mkdir': lambda: os.mkdir(os.path.join(mnt, 'newdir')),
        'rename': lambda: os.rename(os.path.join(mnt, 'kept'), os.path.join(mnt, 'moved')),
        'unlink': lambda: os.unlink(os.path.join(mnt, 'kept')),
        'chmod': lambda: os.chmod(os.path.join(mnt, 'kept'), 0o600),
        'truncate': lambda: os.truncate(os.path.join(mnt, 'kept'), 1),
        'setxattr': lambda: os.setxattr(os.path.join(mnt, 'kept'), 'user.x', b'1'),
        'symlink': lambda: os.symlink('kept', os.path.join(mnt, 'link')),
    }
    for name, fn in changes.items():
        with pytest.raises(OSError) as e:
            fn()
        assert e.value.errno == errno.EIO, f'{name}: {e.value}'


def kill_under_mount(env, reconnect_timeout):
    """A mount holding a durable file 'kept', whose memserver was just killed."""
    server = env.server('64M')
    fs = env.rmemfs(server, options=[f'reconnect_timeout={reconnect_timeout}'])
    with open(os.path.join(fs.mountpoint, 'kept'), 'wb') as f:
        f.write(b'kept')
        f.flush()
        os.fsync(f.fileno())
    server.stop(sig=9)
    return server, fs


def quick_unmount(fs):
    """umount of a failed mount works at once; the daemon exits non-zero (it could not
    unmount cleanly)."""
    r = unmount(fs.mountpoint)
    assert r.returncode == 0, r.stderr
    fs.proc.wait(20)
    fs.pump.join()
    return fs.proc.returncode


def test_server_restart_is_invisible(env):
    """memserver with a backing file: SIGTERM, restarted 3 s later on the same port.
    A writer looping pwrite+fsync sees no error, dirty data written before the
    outage reaches the pool after it, the lease survives (a second mount is
    still refused), one line says the server went, one that it is back."""
    server = env.server('64M', backing_file=os.path.join(env.workdir, 'pool.img'))
    fs = env.rmemfs(server, options=['reconnect_timeout=30'])
    mnt = fs.mountpoint
    w = Writer(env.workdir, os.path.join(mnt, 'log'))
    try:
        assert wait_for(lambda: w.progress()[0] >= 32, WAIT)
        # dirty data on both sides of the outage: in the daemon's cache, not yet written back
        dirty = pattern(77, 3 << 20)
        with open(os.path.join(mnt, 'dirty'), 'wb') as f:
            f.write(dirty)
        server.stop()
        assert server.proc.returncode == 0
        time.sleep(3)
        server.start()
        assert wait_for(lambda: fs.pump.wait_for(r'is back after', 0) is not None, WAIT)
        # the writer goes on after the outage
        n = w.progress()[1]
        assert wait_for(lambda: w.progress()[1] >= n + 16, WAIT), 'no progress after the restart'
    finally:
        errors, log = w.finish()
    assert errors == [], f'the application saw errors during a 3 s outage: {errors}'
    with open(os.path.join(mnt, 'dirty'), 'rb+') as f:
        os.fsync(f.fileno())
    s = stats(mnt)
    assert s['state'] == 'up' and s['outages'] == 1 and s['away_ms'] >= 2500, s
    # the lease survived: another client is still refused
    other = env.rmemfs(server, mountpoint=env.mountpoint(), start=False)
    with pytest.raises(MountFailed, match='in use'):
        other.start()
    # one line for the outage, one for the end of it; nothing given up, nothing failed
    gone = lines(fs, r'lost \S+ \(.*\); waiting up to 30 s')
    back = lines(fs, r'is back after (\d+\.\d) s away')
    assert len(gone) == 1 and len(back) == 1, fs.output()
    assert float(re.search(r'after (\d+\.\d) s', back[0]).group(1)) >= 2.5
    for bad in ('given up', 'FILESYSTEM FAILED', 'commit failed', 'LEASE'):
        assert bad not in fs.output(), fs.output()
    # and the pool holds it all: a new process mounting the same pool reads it back
    assert fs.unmount() == 0, fs.output()
    fs2 = env.rmemfs(server, mountpoint=mnt)
    with open(os.path.join(mnt, 'log'), 'rb') as f:
        assert f.read() == log
    with open(os.path.join(mnt, 'dirty'), 'rb') as f:
        assert f.read() == dirty
    assert fs2.unmount() == 0


def test_another_pool_fails_loudly(env):
    """The memserver comes back with a blank anonymous pool: the mount fails once,
    naming the server and both pool ids; every change is refused with EIO, names
    and cached data stay readable, the stats xattr says failed, the dirty data that
    could not be written is reported (log and fsync), and umount works at once."""
    server, fs = kill_under_mount(env, 30)
    mnt = fs.mountpoint
    # written while the server is away: close hands it to the daemon's cache, whose
    # write-back waits for the server
    with open(os.path.join(mnt, 'dirty'), 'wb') as f:
        f.write(pattern(3, 1 << 20))
        ino = os.fstat(f.fileno()).st_ino
    server.start()
    m = fs.pump.wait_for(r'FILESYSTEM FAILED: (\S+) now serves another pool \(id ([0-9a-f]+)'
                         r'.* pool was \(id ([0-9a-f]+)', WAIT)
    assert m, fs.output()
    assert m.group(1) == server.addr and m.group(2) != m.group(3)
    # (one line per write-back batch: 16 blocks in all)
    given_up = rf'write-back of ino {ino}: .* given up, (\d+) dirty blocks not written'
    assert wait_for(lambda: sum(int(re.search(given_up, l).group(1))
                                for l in lines(fs, given_up)) == 16, WAIT), fs.output()
    fd = os.open(os.path.join(mnt, 'dirty'), os.O_RDONLY)
    try:
        with pytest.raises(OSError) as e:
            os.fsync(fd)
        assert e.value.errno == errno.EIO
    finally:
        os.close(fd)
    assert_changes_fail(mnt)
    assert sorted(os.listdir(mnt)) == ['dirty', 'kept']
    with open(os.path.join(mnt, 'kept'), 'rb') as f:
        assert f.read() == b'kept'  # (the daemon's cache still holds it)
    s = stats(mnt)
    assert s['state'] == 'failed' and 'another pool' in s['failure'], s
    assert len(lines(fs, 'FILESYSTEM FAILED')) == 1, fs.output()
    assert quick_unmount(fs) != 0


def test_server_gone_past_timeout(env):
    """No memserver for longer than reconnect_timeout=2: requests wait, then the
    mount fails (said once, with how long the server was away) and fails fast."""
    server, fs = kill_under_mount(env, 2)
    mnt = fs.mountpoint
    assert fs.pump.wait_for(r'lost \S+ \(.*\); waiting up to 2 s', WAIT), fs.output()
    assert fs.pump.wait_for(r'FILESYSTEM FAILED: \S+ unreachable for 2\.\d s', WAIT), \
        fs.output()
    assert_changes_fail(mnt)
    assert stats(mnt)['state'] == 'failed'
    assert quick_unmount(fs) != 0


def test_reconnect_timeout_zero_fails_at_once(env):
    """reconnect_timeout=0: the first request that cannot reach the server fails the
    mount; nothing waits."""
    server = env.server('64M')
    fs = env.rmemfs(server, options=['reconnect_timeout=0'])
    server.stop(sig=9)
    assert fs.pump.wait_for(r'FILESYSTEM FAILED: \S+ unreachable', WAIT), fs.output()
    assert 'waiting' not in fs.output()
    with pytest.raises(OSError) as e:
        os.mkdir(os.path.join(fs.mountpoint, 'd'))
    assert e.value.errno == errno.EIO
    assert quick_unmount(fs) != 0


def test_reconnect_timeout_option(env):
    """The option is in --help and bad values get a specific message."""
    out = subprocess.run([binary('fuse-client/rmemfs'), '--help'], capture_output=True,
                         text=True, timeout=30).stdout
    assert 'reconnect_timeout=SECS|inf' in out
    server = env.server('64M')
    for bad in ('abc', '-1', '1e9'):
        fs = env.rmemfs(server, options=[f'reconnect_timeout={bad}'], start=False)
        r = subprocess.run(fs.command(), capture_output=True, text=True, timeout=30)
        assert r.returncode == 2, r
        assert f'reconnect_timeout={bad}: expected seconds' in r.stderr and 'inf' in r.stderr
    for good in ('inf', '0', '2.5'):
        fs = env.rmemfs(server, options=[f'reconnect_timeout={good}'])
        assert fs.unmount() == 0
