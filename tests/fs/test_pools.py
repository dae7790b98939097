# SPDX-License-Identifier: GPL-2.0-or-later
"""Memory donors: one memserver serving the named pools of several tenants,
rmemfs mounting HOST:PORT/NAME (creating it with -o format,size=), member
sets naming a pool on each member, the mount-side refusals in words, and
-o donors=FILE choosing the emptiest servers and later finding the set
(docs/ARCHITECTURE.md, "Memory donors"; rmemfs(8), "NAMED POOLS")."""
import os
import re
import signal
import socket
import struct
import threading

import pytest

from conftest import (HOST, MemServerProc, MountFailed, ctl, is_mounted, log_warnings,
                      pool_logic_only, scaled, stats)

MIB = 1 << 20


class PoolRef:
    """What Rmemfs needs of a server (addr, token_file, workdir), for
    HOST:PORT/NAME (or a set of them, or a donors= NAME)."""

    def __init__(self, addr, token_file, workdir):
        self.addr = addr
        self.token_file = token_file
        self.workdir = workdir


def pool(server, name, token_file=None):
    return PoolRef(f'{server.addr}/{name}', token_file or server.token_file, server.workdir)


def tenants(env, *names):
    """A --token-dir with one token file per tenant; {name: token file}."""
    d = os.path.join(env.workdir, 'tenants')
    os.makedirs(d, exist_ok=True)
    files = {}
    for n in names:
        files[n] = os.path.join(d, n)
        with open(files[n], 'w') as f:
            f.write(os.urandom(16).hex() + '\n')
        os.chmod(files[n], 0o600)
    return d, files


def donor(env, capacity, token_file=None, tenant_dir=None, size='1M'):
    """A memserver donating capacity (with a small default pool of size)."""
    args = ['--capacity', capacity]
    if tenant_dir:
        args += ['--token-dir', tenant_dir]
    return env.server(size, args=args, token_file=token_file)


def content(name, size):
    seed = name.encode() * (64 // len(name) + 1)
    return (bytes(range(256)) + seed[:64]) * (size // 320) + seed[:size % 320]


def write_check(root, prefix, n, size, errors):
    """n files written, fsync'd, read back; failures go to errors."""
    try:
        for i in range(n):
            path = os.path.join(root, f'{prefix}{i}')
            data = content(f'{prefix}{i}', size)
            with open(path, 'wb') as f:
                f.write(data)
                os.fsync(f.fileno())
            with open(path, 'rb') as f:
                if f.read() != data:
                    errors.append(f'{path}: read back differs')
    except OSError as e:
        errors.append(f'{root}: {e}')


def verify(root, prefix, n, size):
    for i in range(n):
        with open(os.path.join(root, f'{prefix}{i}'), 'rb') as f:
            assert f.read() == content(f'{prefix}{i}', size), f'{prefix}{i} differs'


def refused(env, ref, options):
    """Mount ref with options, which must fail: rmemfs's output."""
    fs = env.rmemfs(ref, options=options, start=False)
    with pytest.raises(MountFailed) as e:
        fs.start()
    assert not is_mounted(fs.mountpoint)
    return str(e.value)


def test_two_tenants_one_server(env):
    """Two tenants' filesystems on two pools of one memserver, written at
    once; each sees only its own files, and neither token reaches the other's pool."""
    tdir, tok = tenants(env, 'alice', 'bob')
    s = donor(env, '160M', tenant_dir=tdir)
    a = env.rmemfs(pool(s, 'alice-fs', tok['alice']), options=['format', 'size=64M'])
    b = env.rmemfs(pool(s, 'bob-fs', tok['bob']), options=['format', 'size=48M'])
    n, size = scaled(24, 4), 256 << 10
    errors = []
    threads = [threading.Thread(target=write_check, args=(fs.mountpoint, p, n, size, errors))
               for fs, p in ((a, 'a'), (b, 'b'))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert not any(t.is_alive() for t in threads), 'writers did not finish in 300 s'
    assert errors == []
    assert sorted(os.listdir(a.mountpoint)) == sorted(f'a{i}' for i in range(n))
    assert sorted(os.listdir(b.mountpoint)) == sorted(f'b{i}' for i in range(n))
    assert os.statvfs(b.mountpoint).f_blocks * os.statvfs(b.mountpoint).f_frsize <= 48 * MIB
    for fs in (a, b):
        assert fs.unmount() == 0, fs.output()
    # a later mount (no size=) finds each pool with its files
    a2 = env.rmemfs(pool(s, 'alice-fs', tok['alice']))
    verify(a2.mountpoint, 'a', n, size)
    # bob's token reaches neither alice's pool nor the default one (the admin's)
    out = refused(env, pool(s, 'alice-fs', tok['bob']), [])
    assert f'the token may not reach pool alice-fs on {s.addr}' in out
    out = refused(env, pool(s, 'alice-fs', tok['bob']), ['format', 'size=8M'])
    assert f'pool alice-fs on {s.addr} is another tenant\'s (name taken)' in out
    out = refused(env, PoolRef(s.addr, tok['bob'], s.workdir), [])
    assert f'the token may not reach the default pool of {s.addr}' in out
    assert a2.unmount() == 0


def test_member_set_of_named_pools(env):
    """A member set naming pool fs on each of three memservers: formatted
    with size=, the records keep HOST:PORT/fs, a later mount finds it."""
    first = donor(env, '128M')
    servers = [first] + [donor(env, '128M', token_file=first.token_file) for _ in range(2)]
    ref = PoolRef(','.join(f'{s.addr}/fs' for s in servers), first.token_file, first.workdir)
    fs = env.rmemfs(ref, options=['format', 'size=40M', 'replicas=2'])
    n, size = scaled(16, 4), 300 << 10
    errors = []
    write_check(fs.mountpoint, 'm', n, size, errors)
    assert errors == []
    status = ctl(fs.mountpoint, 'status')
    assert status.returncode == 0, status.stderr
    for s in servers:
        assert f'{s.addr}/fs' in status.stdout, status.stdout
    assert fs.unmount() == 0, fs.output()
    # listed in another order, without size=: the records place them
    ref2 = PoolRef(','.join(f'{s.addr}/fs' for s in reversed(servers)), first.token_file,
                   first.workdir)
    fs2 = env.rmemfs(ref2)
    verify(fs2.mountpoint, 'm', n, size)
    assert fs2.unmount() == 0


@pool_logic_only
def test_refusals(env):
    """Each refusal a mount can meet, in the words rmemfs(8) lists."""
    s = donor(env, '96M', size='16M')
    out = refused(env, pool(s, 'big'), ['format', 'size=1G'])
    assert re.search(rf'{re.escape(s.addr)} has no room for a 1\.0 GiB pool: '
                     r'80\.0 MiB free of 96\.0 MiB', out), out
    out = refused(env, pool(s, 'absent'), [])
    assert f'{s.addr} has no pool absent (create it with -o format,size=SIZE)' in out, out
    # a memserver with no default pool (--capacity without --size)
    bare = NoDefault(env, s.token_file)
    out = refused(env, PoolRef(bare.addr, s.token_file, env.workdir), [])
    assert f'{bare.addr} serves named pools only: name one, as {bare.addr}/NAME' in out, out
    # the options
    plain = PoolRef(s.addr, s.token_file, s.workdir)
    for ref, opts, words in ((pool(s, 'p'), ['size=8M'], 'give it with format'),
                             (plain, ['format', 'size=8M'], "'" + s.addr + "' names none"),
                             (pool(s, 'p'), ['format', 'size=100K'], 'at least 1M'),
                             (PoolRef(f'{s.addr}/-bad', s.token_file, s.workdir), [],
                              'is not a pool name')):
        out = refused(env, ref, opts)
        assert words in out, out
    # a member address longer than the member record keeps (63 characters): at format
    v6 = '[0000:0000:0000:0000:0000:0000:0000:0001]'
    ref = PoolRef(f'{v6}:{s.port}/{"n" * 31},{s.addr}/x', s.token_file, s.workdir)
    out = refused(env, ref, ['format', 'size=8M'])
    assert 'must fit 63 characters' in out, out


class NoDefault:
    """A memserver with --capacity and no --size (so no default pool),
    dressed as conftest's MemServer for env's teardown."""

    def __init__(self, env, token_file):
        self.name = f'memserver{len(env.servers)}'
        self.ms = MemServerProc(['--capacity', '64M', '--listen', HOST, '--port', '0',
                                 '--token-file', token_file, '--transport', 'tcp'],
                                env.workdir, name=self.name)
        self.port = self.ms.port
        self.log_path = self.ms.log_path
        env.servers.append(self)

    @property
    def addr(self):
        return f'[{HOST}]:{self.port}' if ':' in HOST else f'{HOST}:{self.port}'

    def stop(self):
        self.ms.stop()

    def warnings(self):
        return log_warnings(self.ms.stderr())


@pool_logic_only
def test_older_memserver(env, tmp_path):
    """A memserver that predates named pools answers a HELLO with a selection
    MALFORMED: said so, not taken for a broken pool."""
    magic, version = 0x524d454d, 2
    hdr = struct.Struct('>IHHIIQ')
    lsock = socket.socket()
    lsock.bind(('127.0.0.1', 0))
    lsock.listen(4)
    lsock.settimeout(0.2)
    port = lsock.getsockname()[1]
    seen = []
    stop = threading.Event()

    def serve():
        while not stop.is_set():
            try:
                conn, _ = lsock.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            try:
                with conn:
                    conn.settimeout(10)
                    head = conn.recv(hdr.size, socket.MSG_WAITALL)
                    if len(head) < hdr.size:
                        continue
                    _, _, typ, _, length, rid = hdr.unpack(head)
                    conn.recv(length, socket.MSG_WAITALL)
                    seen.append((typ, length))
                    conn.sendall(hdr.pack(magic, version, typ | 0x8000, 3, 0, rid))
            except OSError:
                continue

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    token = tmp_path / 'tok'
    token.write_text('x\n')
    try:
        out = refused(env, PoolRef(f'127.0.0.1:{port}/p', str(token), env.workdir),
                      ['transport=tcp'])
    finally:
        stop.set()
        t.join(10)
        lsock.close()
    assert f'127.0.0.1:{port} does not serve named pools (an older memserver?)' in out, out
    assert seen and seen[0][0] == 1  # a HELLO


# the choice is control sessions (TCP on every transport); the mount after it is
# test_member_set_of_named_pools'
@pool_logic_only
def test_donors_choose_the_emptiest(env):
    """donors= with format puts the set on the candidates with the most free
    capacity (power of two choices over three with room picks the two
    emptiest, always); one without room and an unreachable one are passed
    over; a later mount through donors= finds the set."""
    first = donor(env, '192M')
    tok = first.token_file
    cands = [first] + [donor(env, c, token_file=tok) for c in ('192M', '192M', '96M')]
    # fill: cands[0] 128M used (64M free), cands[1] 32M (160M), cands[2] none (192M),
    # cands[3] 64M used (32M free: no room for 48M)
    for s, fill in ((cands[0], '128M'), (cands[1], '32M'), (cands[3], '64M')):
        f = env.rmemfs(pool(s, 'filler'), options=['format', f'size={fill}'])
        assert f.unmount() == 0, f.output()
    dead = socket.socket()
    dead.bind(('127.0.0.1', 0))
    dead_port = dead.getsockname()[1]
    dead.close()  # nothing listens there
    file = os.path.join(env.workdir, 'donors')
    with open(file, 'w') as f:
        f.write('# candidates\n')
        for s in cands:
            f.write(f'{s.addr}   # {s.name}\n')
        f.write(f'127.0.0.1:{dead_port}\n\n')
    ref = PoolRef('shared', tok, env.workdir)
    fs = env.rmemfs(ref, options=[f'donors={file}', 'format', 'size=48M', 'replicas=2'])
    status = ctl(fs.mountpoint, 'status')
    assert status.returncode == 0, status.stderr
    chosen = {s.name for s in cands if f'{s.addr}/shared' in status.stdout}
    assert chosen == {cands[1].name, cands[2].name}, status.stdout
    assert f'127.0.0.1:{dead_port}' in fs.output()  # skipped, said so
    n, size = scaled(8, 2), 200 << 10
    errors = []
    write_check(fs.mountpoint, 'd', n, size, errors)
    assert errors == []
    assert fs.unmount() == 0, fs.output()
    # later: no format, no size: the candidates holding pool shared
    fs2 = env.rmemfs(ref, options=[f'donors={file}'])
    verify(fs2.mountpoint, 'd', n, size)
    assert fs2.unmount() == 0
    # three members of 96M: cands[1] and cands[2] have room, so refused, listing each
    out = refused(env, PoolRef('other', tok, env.workdir),
                  [f'donors={file}', 'format', 'size=96M', 'replicas=3'])
    assert 'fewer than 3 of the candidates' in out, out
    for s in cands:
        assert s.addr in out
    assert f'127.0.0.1:{dead_port} unreachable' in out
    # a pool no candidate holds
    out = refused(env, PoolRef('nowhere', tok, env.workdir), [f'donors={file}'])
    assert 'no candidate in' in out and 'holds a pool nowhere' in out, out


def test_replace_with_named_pool(env):
    """rmemfs-ctl replace takes HOST:PORT/NAME: the new pool is created the
    lost member's size and rebuilt; the record keeps its address with /NAME."""
    first = donor(env, '128M')
    tok = first.token_file
    servers = [first] + [donor(env, '128M', token_file=tok) for _ in range(2)]
    spare = donor(env, '128M', token_file=tok)
    ref = PoolRef(','.join(f'{s.addr}/r' for s in servers), tok, first.workdir)
    fs = env.rmemfs(ref, options=['format', 'size=32M', 'replicas=2'])
    n, size = scaled(6, 2), 128 << 10
    errors = []
    write_check(fs.mountpoint, 'r', n, size, errors)
    assert errors == []
    servers[1].stop(signal.SIGKILL)
    write_check(fs.mountpoint, 's', n, size, errors)  # the member is lost on the way
    assert errors == []
    assert stats(fs.mountpoint)['member1'].split()[1] == 'lost'
    r = ctl(fs.mountpoint, 'replace', f'{servers[1].addr}/r', f'{spare.addr}/r', '--wait')
    assert r.returncode == 0, r.stdout + r.stderr + fs.output()
    st = stats(fs.mountpoint)
    assert st['member1'].split()[:2] == [f'{spare.addr}/r', 'in_sync'], st
    servers[0].stop(signal.SIGKILL)  # the rebuilt member holds the other copies now
    verify(fs.mountpoint, 'r', n, size)
    verify(fs.mountpoint, 's', n, size)
    assert fs.unmount() == 0, fs.output()
