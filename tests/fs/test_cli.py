# SPDX-License-Identifier: GPL-2.0-or-later
"""The rmemfs command line: --help/--version, a specific message for every bad
option or value, clear mount failures (unreachable server, wrong token,
foreign pool) before detaching, the fstab path through mount(8)/mount.fuse3,
daemon mode, IPv6 literals, and -d statistics at unmount.
"""
import contextlib
import errno
import json
import os
import shutil
import socket
import stat
import subprocess
import sys
import textwrap
import time

import pytest

import conftest
from conftest import (HOST, TRANSPORT, MemServer, Rmemfs, binary, daemon_env, is_mounted,
                      lazy_unmount, pattern, reap_untracked, unmount)


def run_rmemfs(*args, timeout=60):
    return subprocess.run([binary('fuse-client/rmemfs'), *args], capture_output=True, text=True,
                          timeout=timeout, env=daemon_env(), stdin=subprocess.DEVNULL)


def test_help_lists_every_option():
    r = run_rmemfs('--help')
    assert r.returncode == 0, r.stderr
    text = r.stdout + r.stderr
    for opt in ('transport=', 'token_file=', 'cache_size=', 'block_size=', 'direct_io',
                'format', 'qps=', 'poll=', 'readahead=', 'writeback=', 'writeback_cache=',
                'entry_timeout=',
                'attr_timeout=', 'allow_other', 'default_permissions', '_netdev',
                'replicas=', 'ec=K+M', 'degraded', 'size=SIZE', 'donors=FILE',
                'SERVER[:PORT][/NAME][,SERVER[:PORT][/NAME]...] MOUNTPOINT',
                'NAME MOUNTPOINT -o donors=FILE'):
        assert opt in text, f'--help does not mention {opt}'
    assert run_rmemfs('-h').returncode == 0


def test_version():
    r = run_rmemfs('--version')
    assert r.returncode == 0
    assert 'rmemfs version' in r.stdout


@pytest.mark.parametrize('opts, message', [
    ('transport=carrier-pigeon', 'transport=carrier-pigeon: expected auto, tcp or rdma'),
    ('block_size=3000', 'block_size=3000: must be a power of two between 4K and 1M'),
    ('block_size=2M', 'block_size=2M: must be a power of two'),
    ('cache_size=lots', 'cache_size=lots: not a size'),
    ('cache_size=16K', 'must hold at least 16 blocks'),
    ('qps=0', 'qps=0: expected a number of connections'),
    ('qps=1000', 'qps=1000: expected a number of connections'),
    ('poll=sometimes', 'poll=sometimes: expected busy, event or hybrid'),
    ('readahead=far', 'readahead=far: expected a size'),
    ('writeback=maybe', 'writeback=maybe: expected on or off'),
    ('entry_timeout=-1', 'entry_timeout=-1: expected seconds'),
    ('attr_timeout=soon', 'attr_timeout=soon: expected seconds'),
    ('format,ro', 'format cannot be combined with -o ro'),
    ('direct_io,writeback_cache=on', 'direct_io and writeback_cache=on exclude each other'),
    ('writeback_cache=perhaps', 'writeback_cache=perhaps: expected on or off'),
    ('token_file=', 'token_file= needs a file name'),
    ('no_such_option', "unknown option"),
    ('replicas=4', 'replicas=4: must be 1..3 and at most the number of servers (1)'),
    ('replicas=2', 'replicas=2: must be 1..3 and at most the number of servers (1)'),
])
def test_bad_options_get_specific_messages(opts, message, tmp_path):
    r = run_rmemfs('127.0.0.1:7471', str(tmp_path), '-f', '-o', opts)
    assert r.returncode != 0
    assert message in r.stderr, r.stderr
    assert not is_mounted(str(tmp_path))


def test_member_limits(tmp_path):
    """Twelve servers at most; replicas= stays 1..3 (an ec= set's 4 copies are internal)."""
    thirteen = ','.join('127.0.0.1:%d' % (7471 + i) for i in range(13))
    r = run_rmemfs(thirteen, str(tmp_path), '-f')
    assert r.returncode != 0
    assert 'at most 12 servers' in r.stderr, r.stderr
    four = ','.join('127.0.0.1:%d' % (7471 + i) for i in range(4))
    r = run_rmemfs(four, str(tmp_path), '-f', '-o', 'replicas=4')
    assert r.returncode != 0
    assert 'replicas=4: must be 1..3 and at most the number of servers (4)' in r.stderr, r.stderr
    assert not is_mounted(str(tmp_path))


@pytest.mark.parametrize('servers, opts, message', [
    (3, 'ec=1+1', 'ec=1+1: K (data fragments) must be 2..8 and M (parity fragments) 1..3'),
    (12, 'ec=9+1', 'ec=9+1: K (data fragments) must be 2..8 and M (parity fragments) 1..3'),
    (6, 'ec=2+4', 'ec=2+4: K (data fragments) must be 2..8 and M (parity fragments) 1..3'),
    (3, 'ec=2+1,replicas=2', 'ec= and replicas= exclude each other'),
    (3, 'ec=4+2', 'ec=4+2 needs at least 6 servers (3 given)'),
    (5, 'ec=4+2', 'ec=4+2 needs at least 6 servers (5 given)'),
    (3, 'ec=abc', 'ec=abc: expected K+M, K data and M parity fragments (e.g. 4+2)'),
    (3, 'ec=2+', 'ec=2+: expected K+M'),
    (3, 'ec=-2+1', 'ec=-2+1: expected K+M'),
])
def test_ec_options(servers, opts, message, tmp_path):
    """ec=K+M is refused with their own message before any server is reached."""
    listed = ','.join('127.0.0.1:%d' % (7471 + i) for i in range(servers))
    r = run_rmemfs(listed, str(tmp_path), '-f', '-o', opts)
    assert r.returncode != 0
    assert message in r.stderr, r.stderr
    assert 'cannot be reached' not in r.stderr, r.stderr
    assert not is_mounted(str(tmp_path))


@pytest.mark.parametrize('args, message', [
    ([], 'missing SERVER'),
    (['127.0.0.1:7471'], 'missing MOUNTPOINT'),
    (['127.0.0.1:99999', '/tmp'], "'127.0.0.1:99999' is not SERVER[:PORT]"),
    (['127.0.0.1:port', '/tmp'], 'is not SERVER[:PORT]'),
    (['[::1', '/tmp'], 'is not SERVER[:PORT]'),
    (['host', '/tmp', 'extra'], "unexpected argument 'extra'"),
    (['host', '/nonexistent/mountpoint'], 'bad mount point'),
])
def test_bad_command_lines(args, message):
    r = run_rmemfs(*args)
    assert r.returncode != 0
    assert message in r.stderr, r.stderr


def test_fstab_noise_is_accepted(env):
    server = env.server()
    fs = env.rmemfs(server, options=['_netdev', 'defaults', 'auto', 'nofail', 'user',
                                     'x-systemd.automount', 'x-systemd.mount-timeout=30',
                                     'comment=hello', 'rw'])
    assert os.listdir(fs.mountpoint) == []


def free_port():
    s = socket.socket()
    s.bind((HOST, 0))
    port = s.getsockname()[1]
    s.close()
    return port


def test_unreachable_server_fails_before_detaching(tmp_path):
    t0 = time.monotonic()
    r = run_rmemfs(f'127.0.0.1:{free_port()}', str(tmp_path), '-o', 'transport=tcp')
    assert r.returncode != 0
    assert time.monotonic() - t0 < 20
    assert 'cannot reach the pool' in r.stderr and 'refused' in r.stderr.lower(), r.stderr
    assert not is_mounted(str(tmp_path))


def test_wrong_token_is_refused(env):
    server = env.server()
    bad = os.path.join(env.workdir, 'bad.token')
    with open(bad, 'w') as f:
        f.write('not the token\n')
    r = run_rmemfs(server.addr, env.mountpoint(), '-o', f'transport={TRANSPORT},token_file={bad}')
    assert r.returncode != 0
    assert 'token' in r.stderr, r.stderr
    r = run_rmemfs(server.addr, env.mountpoint(), '-o',
                   f'transport={TRANSPORT},token_file=/nonexistent/token')
    assert r.returncode != 0 and 'token_file=/nonexistent/token' in r.stderr, r.stderr


def pool_file_with(env, path, head):
    """A memserver backing file (made by a memserver) whose pool starts with head."""
    server = env.server('16M', backing_file=path)
    server.stop()
    with open(path, 'r+b') as f:  # the pool is the file's first 16 MiB
        f.write(head)
    return env.server('16M', backing_file=path)


def test_foreign_pool_refused_then_formatted(env, tmp_path):
    backing = str(tmp_path / 'pool.img')
    server = pool_file_with(env, backing, os.urandom(1 << 20))
    mnt = env.mountpoint()
    fs = env.rmemfs(server, mountpoint=mnt, start=False)
    fs.start(wait=False)
    assert fs.proc.wait(30) != 0
    fs.pump.join()
    assert 'holds no rmemfs' in fs.output() and '-o format' in fs.output(), fs.output()
    assert not is_mounted(mnt)

    fs = env.rmemfs(server, mountpoint=mnt, options=['format'])
    with open(os.path.join(mnt, 'kept'), 'wb') as f:
        f.write(b'on a file-backed pool')
    assert fs.unmount() == 0
    # -o format never formats an rmemfs pool: the file is still there
    fs = env.rmemfs(server, mountpoint=mnt, options=['format'])
    with open(os.path.join(mnt, 'kept'), 'rb') as f:
        assert f.read() == b'on a file-backed pool'
    assert fs.unmount() == 0

    # the pool survives a memserver restart (backing file)
    server.stop()
    server2 = env.server('16M', backing_file=backing)
    fs = env.rmemfs(server2, mountpoint=mnt)
    with open(os.path.join(mnt, 'kept'), 'rb') as f:
        assert f.read() == b'on a file-backed pool'


def test_daemon_mode_and_clean_unmount(env):
    server = env.server()
    mnt = env.mountpoint()
    fs = Rmemfs(server, mnt, ['entry_timeout=0'])
    r = subprocess.run(fs.command(foreground=False), capture_output=True, text=True,
                       timeout=60, env=daemon_env())
    try:
        assert r.returncode == 0, r.stderr
        assert is_mounted(mnt)  # mounted when the launcher returns
        with open(os.path.join(mnt, 'f'), 'wb') as f:
            f.write(b'daemon')
        assert unmount(mnt).returncode == 0
        # the daemon released the lease on its way out: a new mount is immediate
        t0 = time.monotonic()
        fs2 = env.rmemfs(server, mountpoint=mnt)
        assert time.monotonic() - t0 < 8
        with open(os.path.join(mnt, 'f'), 'rb') as f:
            assert f.read() == b'daemon'
        assert fs2.unmount() == 0
    finally:
        reap_untracked(mnt)


@pytest.mark.skipif(os.geteuid() != 0, reason='mounting through mount.fuse3 here needs root')
def test_fstab_line_through_mount_fuse3(env):
    """What mount(8) runs for the README's fstab line (mount(8) itself resets
    PATH for helpers, so it would need rmemfs installed in /usr/bin)."""
    server = env.server()
    mnt = env.mountpoint()
    path_env = dict(daemon_env())
    path_env['PATH'] = os.path.dirname(binary('fuse-client/rmemfs')) + ':' + path_env['PATH']
    opts = (f'defaults,_netdev,nofail,token_file={server.token_file},transport={TRANSPORT},'
            'entry_timeout=0')
    helper = shutil.which('mount.fuse3') or '/sbin/mount.fuse3'
    if not os.access(helper, os.X_OK):
        pytest.skip('mount.fuse3 (fuse3 package) not installed')
    r = subprocess.run([helper, server.addr, mnt, '-t', 'fuse.rmemfs', '-o', opts],
                       capture_output=True, text=True, timeout=60, env=path_env)
    try:
        assert r.returncode == 0, r.stderr
        assert is_mounted(mnt)
        with open('/proc/self/mountinfo') as f:
            line = next(l for l in f if l.split()[4] == mnt)
        assert 'fuse.rmemfs' in line and server.addr in line, line
        with open(os.path.join(mnt, 'x'), 'wb') as f:
            f.write(b'fstab')
        st = os.statvfs(mnt)
        assert st.f_blocks > 0
        assert subprocess.run(['umount', mnt], timeout=60).returncode == 0
    finally:
        reap_untracked(mnt)


def test_ipv6_literal(env):
    try:
        s = socket.socket(socket.AF_INET6)
        s.bind(('::1', 0))
        s.close()
    except OSError:
        pytest.skip('no IPv6 loopback here')
    if TRANSPORT != 'tcp':
        pytest.skip('IPv6 literal tested over TCP')
    server = MemServer(env.workdir, size='16M', name='memserver6')
    saved = conftest.HOST
    conftest.HOST = '::1'
    try:
        env.servers.append(server)
        server.start()
        assert server.addr.startswith('[::1]:')
        fs = env.rmemfs(server)
        with open(os.path.join(fs.mountpoint, 'v6'), 'wb') as f:
            f.write(b'over ::1')
        assert fs.unmount() == 0
    finally:
        conftest.HOST = saved


def test_debug_prints_stats_at_unmount(env):
    server = env.server()
    fs = env.rmemfs(server, extra_args=['-d'])
    data = pattern(9, 300_000)
    with open(os.path.join(fs.mountpoint, 'f'), 'wb') as f:
        f.write(data)
    with open(os.path.join(fs.mountpoint, 'f'), 'rb') as f:
        assert f.read() == data
    assert fs.unmount() == 0
    out = fs.output()
    assert 'rmemfs: cache ' in out
    assert 'hits' in out and 'misses' in out and 'flushes' in out and 'written' in out


def test_newer_format_refused(env, tmp_path):
    sb = bytearray(4096)
    sb[0:8] = b'RMEMFS\0\0'
    sb[8:12] = (7).to_bytes(4, 'little')  # format version 7
    sb[12:16] = (4096).to_bytes(4, 'little')
    server = pool_file_with(env, str(tmp_path / 'newer.img'), bytes(sb))
    for opts in ([], ['format']):  # -o format does not override a newer rmemfs either
        fs = env.rmemfs(server, options=opts, start=False)
        fs.start(wait=False)
        assert fs.proc.wait(30) != 0
        fs.pump.join()
        assert 'newer rmemfs' in fs.output() and 'format 7' in fs.output(), fs.output()
        assert not is_mounted(fs.mountpoint)


NOBODY = ['setpriv', '--reuid=65534', '--regid=65534', '--clear-groups']

USER_SCRIPT = textwrap.dedent('''
    import json, os, sys
    mnt = sys.argv[1]
    j = lambda *a: os.path.join(mnt, *a)
    with open(j('mine'), 'wb') as f:
        f.write(b'user data')
    os.mkdir(j('dir'))
    os.rename(j('mine'), j('dir', 'moved'))
    with open(j('dir', 'moved'), 'rb') as f:
        data = f.read().decode()
    os.chmod(j('dir', 'moved'), 0o000)
    no_access = os.access(j('dir', 'moved'), os.R_OK)
    os.chmod(j('dir', 'moved'), 0o640)
    print(json.dumps({'data': data, 'uid': os.stat(j('dir', 'moved')).st_uid,
                      'access_000': no_access,
                      'access_640_r': os.access(j('dir', 'moved'), os.R_OK),
                      'access_640_x': os.access(j('dir', 'moved'), os.X_OK)}))
''')


@contextlib.contextmanager
def dev_fuse_for_users():
    """An unprivileged mount needs /dev/fuse open to other users (libfuse
    opens it before it runs fusermount3): distributions ship it 0666, a fresh
    VM or container may have 0600. If so, o+rw is granted for the test and the
    mode restored afterwards (unless something else changed it meanwhile)."""
    mode = stat.S_IMODE(os.stat('/dev/fuse').st_mode)
    if mode & 0o006 == 0o006:
        yield
        return
    try:
        os.chmod('/dev/fuse', mode | 0o006)
    except OSError as e:
        pytest.skip(f'/dev/fuse is {mode:o} and cannot be opened to users: {e.strerror}')
    try:
        yield
    finally:
        if stat.S_IMODE(os.stat('/dev/fuse').st_mode) == mode | 0o006:
            os.chmod('/dev/fuse', mode)


def fusermount3_usable():
    """Why fusermount3 cannot mount for a user, or None."""
    path = shutil.which('fusermount3')
    if not path:
        return 'no fusermount3 (fuse3 package)'
    st = os.stat(path)
    if st.st_uid != 0 or not st.st_mode & stat.S_ISUID:
        return f'{path} is not set-user-ID root'
    return None


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which('setpriv'),
                    reason='needs root to become another user (setpriv)')
def test_mount_as_unprivileged_user(env):
    """An ordinary user mounts through fusermount3; without default_permissions
    rmemfs answers access() itself, and other users (root too) stay out.
    Assumes uid/gid 65534 (no passwd entry needed) may traverse /tmp, a
    set-user-ID fusermount3, and /dev/fuse open to users (granted for the
    test if it is not, see dev_fuse_for_users)."""
    why = fusermount3_usable()
    if why:
        pytest.skip(why)
    with dev_fuse_for_users():
        mount_as_user(env)


def mount_as_user(env):
    server = env.server()
    mnt = env.mountpoint()
    os.chown(mnt, 65534, 65534)
    token = mnt + '.token'
    shutil.copy(server.token_file, token)
    os.chown(token, 65534, 65534)
    try:
        fs = Rmemfs(server, mnt, ['entry_timeout=0', 'attr_timeout=0'], name='rmemfs-user')
        env.mounts.append(fs)
        cmd = [c.replace(server.token_file, token) for c in fs.command()]
        fs.proc = subprocess.Popen(NOBODY + cmd, stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   env=daemon_env())
        fs.pump = conftest.OutputPump(fs.proc.stdout, fs.log_path)
        fs.wait_mounted()
        r = subprocess.run(NOBODY + [sys.executable, '-c', USER_SCRIPT, mnt],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout) == {'data': 'user data', 'uid': 65534, 'access_000': False,
                                        'access_640_r': True, 'access_640_x': False}
        with pytest.raises(PermissionError):
            os.listdir(mnt)  # no allow_other: not even root gets in
        r = subprocess.run(NOBODY + ['fusermount3', '-u', mnt], capture_output=True, text=True,
                           timeout=60)
        assert r.returncode == 0, r.stderr
        assert fs.proc.wait(30) == 0, fs.output()
    finally:
        os.unlink(token)


def test_read_only_mount(env):
    server = env.server()
    fs = env.rmemfs(server)
    with open(os.path.join(fs.mountpoint, 'f'), 'wb') as f:
        f.write(b'read me')
    assert fs.unmount() == 0
    ro = env.rmemfs(server, mountpoint=fs.mountpoint, options=['ro'])
    with open(os.path.join(ro.mountpoint, 'f'), 'rb') as f:
        assert f.read() == b'read me'
    for fn in (lambda: open(os.path.join(ro.mountpoint, 'g'), 'wb'),
               lambda: os.mkdir(os.path.join(ro.mountpoint, 'd')),
               lambda: os.unlink(os.path.join(ro.mountpoint, 'f'))):
        with pytest.raises(OSError) as e:
            fn()
        assert e.value.errno == errno.EROFS
    # a read-only mount takes no lease: a read-write mount may start beside it
    t0 = time.monotonic()
    rw = env.rmemfs(server)
    assert time.monotonic() - t0 < 8
    assert rw.unmount() == 0
    assert ro.unmount() == 0


def proc_status(pid):
    """/proc/PID/status as a dict of its "Name: value" lines (values as text)."""
    with open(f'/proc/{pid}/status') as f:
        return dict(line.rstrip('\n').split(':\t', 1) for line in f if ':\t' in line)


def kib(value):
    assert value.endswith(' kB'), value
    return int(value[:-3].strip()) * 1024


def test_swap_mode_locks_client_and_memserver(env):
    """-o swap: the daemon's memory is locked (its 4 MiB cache of 4 KiB blocks
    included) and the stats say so; memserver --mlock locks its whole pool."""
    if os.geteuid() != 0:
        pytest.skip('-o swap and --mlock need root (CAP_IPC_LOCK)')
    server = env.server('128M', args=['--mlock'])
    assert kib(proc_status(server.proc.pid)['VmLck']) >= 128 << 20
    fs = env.rmemfs(server, options=['format', 'swap'])
    st = conftest.stats(fs.mountpoint)
    assert st['swap'] == 'on'
    assert st['block_size'] == 4096 and st['cache_bytes'] == 4 << 20
    assert st['swap_io_flusher'] in ('yes', 'no')
    status = proc_status(fs.proc.pid)
    locked = kib(status['VmLck'])
    # read a moment apart: a thread may have come or gone in between
    assert locked >= 4 << 20 and abs(locked - st['swap_locked_bytes']) <= 2 << 20
    # everything resident is locked: the stacks of its threads are small
    assert kib(status['VmRSS']) <= locked + (1 << 20)
    with open(f'/proc/{fs.proc.pid}/oom_score_adj') as f:
        assert (f.read().strip() == '-1000') == (st['swap_oom_protected'] == 'yes')
    # the filesystem works as ever
    with open(os.path.join(fs.mountpoint, 'f'), 'wb') as f:
        f.write(pattern(1, 1 << 20))
    with open(os.path.join(fs.mountpoint, 'f'), 'rb') as f:
        assert f.read() == pattern(1, 1 << 20)
    # without -o swap nothing is locked and the stats say "swap off"
    assert fs.unmount() == 0
    fs = env.rmemfs(server, mountpoint=fs.mountpoint)
    assert conftest.stats(fs.mountpoint)['swap'] == 'off'
    assert kib(proc_status(fs.proc.pid)['VmLck']) == 0
