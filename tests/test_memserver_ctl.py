# SPDX-License-Identifier: GPL-2.0-or-later
"""memserver-ctl against a real memserver: list, create, delete (in use, forced) and stats,
as the admin and as tenants, every refusal's words and exit status, --json, usage errors,
and what it says about servers it cannot talk to (nothing listening, one that never answers,
one that predates control sessions).

Every memserver runs with G_DEBUG=fatal-warnings and is killed at teardown; a test fails if
one dies or logs a warning. A pool's client is a raw TCP connection whose HELLO names the
pool (proto.h's wire structs, struct.pack).
Run: /usr/bin/python3 -m pytest tests/test_memserver_ctl.py (RMEM_BUILD_DIR set by meson).
"""

import hashlib
import json
import os
import re
import signal
import socket
import struct
import subprocess
import threading
import time

import pytest

from rmemtest import BUILD, MemServerProc, log_warnings

CTL = os.path.join(BUILD, 'tools', 'memserver-ctl')
TIMEOUT = 10  # seconds for any one step

MiB = 1 << 20
ADMIN = b'the admin token'
TENANTS = {'alice': b'alice token', 'bob': b'bob token'}

# ---- proto.h ----
MAGIC, VERSION, RESP = 0x524D454D, 2, 0x8000
HELLO = 1
OK, E_MALFORMED = 0, 3
HELLO_POOL = 0x1
HDR = struct.Struct('>IHHIIQ')          # magic version type status len id
HELLO_W = struct.Struct('>32sIIQ')      # token_hash flags reserved client_id
POOL_SEL_W = struct.Struct('>32sQII')   # name create_size flags reserved


# ---- servers, tokens, the tool ----

@pytest.fixture
def tokens(tmp_path):
    """The admin's token file and a --token-dir of two tenants: {'admin': path, NAME: path}."""
    tdir = tmp_path / 'tenants'
    tdir.mkdir()
    paths = {'admin': tmp_path / 'admin.token', 'dir': tdir}
    paths['admin'].write_bytes(ADMIN + b'\n')
    for name, tok in TENANTS.items():
        (tdir / name).write_bytes(tok + b'\n')
        paths[name] = tdir / name
    return paths


@pytest.fixture
def start(tmp_path):
    """start(args...) -> a ready MemServerProc; each is checked and killed at teardown."""
    servers = []

    def _start(*args):
        s = MemServerProc(['--port', '0', '--transport', 'tcp'] + list(args), tmp_path,
                          name='memserver%d' % len(servers), timeout=TIMEOUT)
        servers.append(s)
        return s
    yield _start
    for s in servers:
        alive = s.alive()
        s.stop(signal.SIGKILL)
        assert alive, 'memserver died: %s' % s.stderr()
        assert not log_warnings(s.stderr()), s.stderr()


@pytest.fixture
def srv(start, tokens):
    """64 MiB of capacity with a default pool of 8 MiB, the admin token and two tenants."""
    return start('--capacity', '64M', '--size', '8M', '--token-file', tokens['admin'],
                 '--token-dir', tokens['dir'])


def ctl(server, *args, token=None, addr=None, timeout=TIMEOUT):
    """Run memserver-ctl ADDR [--token-file TOKEN] ARGS; (exit status, stdout, stderr)."""
    cmd = [CTL, addr or '127.0.0.1:%d' % server.port]
    if token:
        cmd += ['--token-file', str(token)]
    r = subprocess.run(cmd + [str(a) for a in args], capture_output=True, text=True,
                       timeout=timeout)
    return r.returncode, r.stdout, r.stderr


def ctl_ok(server, *args, token=None):
    rc, out, err = ctl(server, *args, token=token)
    assert rc == 0 and not err, (rc, out, err)
    return out


def ctl_refused(server, *args, token=None):
    """The tool must exit 1 with one line on stderr: return that line, prefix stripped."""
    rc, out, err = ctl(server, *args, token=token)
    prefix = 'memserver-ctl: 127.0.0.1:%d: ' % server.port
    assert rc == 1 and not out and err.startswith(prefix) and err.count('\n') == 1, \
        (rc, out, err)
    return err[len(prefix):].rstrip('\n')


def pools(server, token):
    """--json list: the document."""
    return json.loads(ctl_ok(server, '--json', 'list', token=token))


def wait_free(server, token, free):
    """The free capacity comes back once a deleted pool's last client is gone."""
    deadline = time.monotonic() + TIMEOUT
    while True:
        doc = pools(server, token)
        if doc['free'] == free or time.monotonic() > deadline:
            return doc
        time.sleep(0.05)


def pool_client(server, name, token):
    """A connection of pool name (HELLO with the selection, no creation): the socket."""
    s = socket.create_connection(('127.0.0.1', server.port), timeout=TIMEOUT)
    hello = (HELLO_W.pack(hashlib.sha256(token).digest(), HELLO_POOL, 0, 0x1234)
             + POOL_SEL_W.pack(name.encode(), 0, 0, 0))
    s.sendall(HDR.pack(MAGIC, VERSION, HELLO, OK, len(hello), 1) + hello)
    magic, _, typ, status, length, _ = HDR.unpack(recv_exact(s, HDR.size))
    assert (magic, typ, status) == (MAGIC, HELLO | RESP, OK), status
    recv_exact(s, length)
    return s


def recv_exact(s, n):
    buf = b''
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        assert chunk, 'connection closed'
        buf += chunk
    return buf


# ---- list ----

def test_list_text(srv, tokens):
    out = ctl_ok(srv, 'list', token=tokens['admin']).splitlines()
    assert out[0] == 'capacity 64.0 MiB, free 56.0 MiB, 1 pool'
    assert out[1].split() == ['NAME', 'OWNER', 'SIZE', 'RESIDENT', 'CLIENTS', 'CLIENT', 'ID',
                              'FLAGS']
    row = out[2].split()
    assert row[:4] == ['(default)', '(admin)', '8.0', 'MiB'] and row[-3:] == ['0', '-', '-']
    assert len(out) == 3


def test_list_json(srv, tokens):
    doc = pools(srv, tokens['admin'])
    assert doc['capacity'] == 64 * MiB and doc['free'] == 56 * MiB
    assert len(doc['pools']) == 1
    p = doc['pools'][0]
    assert p['name'] == '' and p['default'] is True and p['owner'] == ''
    assert p['size'] == 8 * MiB and p['clients'] == 0 and p['client_id'] is None
    assert re.fullmatch(r'[0-9a-f]{16}', p['pool_id'])
    assert 0 <= p['resident'] <= p['size']
    assert not p['persistent'] and not p['deleting']


# ---- create, delete, who sees what ----

def test_create_delete_tenants(srv, tokens):
    out = ctl_ok(srv, 'create', 'a1', '16M', token=tokens['alice'])
    assert out == 'created pool a1 of 16.0 MiB on 127.0.0.1:%d\n' % srv.port
    ctl_ok(srv, 'create', 'b1', '3M', token=tokens['bob'])
    admin = pools(srv, tokens['admin'])
    assert admin['free'] == 37 * MiB
    assert {(p['name'], p['owner'], p['size']) for p in admin['pools']} == \
        {('', '', 8 * MiB), ('a1', 'alice', 16 * MiB), ('b1', 'bob', 3 * MiB)}
    # a tenant sees its own pools only, but the whole server's free capacity
    alice = pools(srv, tokens['alice'])
    assert [p['name'] for p in alice['pools']] == ['a1'] and alice['free'] == 37 * MiB
    text = ctl_ok(srv, 'list', token=tokens['bob'])
    assert 'b1' in text and 'a1' not in text and '(default)' not in text
    # another tenant's pool is no pool to bob; alice deletes her own, the admin bob's
    assert ctl_refused(srv, 'delete', 'a1', token=tokens['bob']) == 'no pool a1'
    assert ctl_ok(srv, 'delete', 'a1', token=tokens['alice']) == \
        'deleted pool a1 on 127.0.0.1:%d\n' % srv.port
    ctl_ok(srv, 'delete', 'b1', token=tokens['admin'])
    doc = wait_free(srv, tokens['admin'], 56 * MiB)
    assert doc['free'] == 56 * MiB and [p['name'] for p in doc['pools']] == ['']
    assert ctl_refused(srv, 'delete', 'a1', token=tokens['alice']) == 'no pool a1'


def test_create_rounds_up_to_a_mib(srv, tokens):
    ctl_ok(srv, 'create', 'odd', '1536K', token=tokens['admin'])
    p = [p for p in pools(srv, tokens['admin'])['pools'] if p['name'] == 'odd'][0]
    assert p['size'] == 2 * MiB and p['owner'] == ''


def test_create_refusals(srv, tokens):
    assert ctl_refused(srv, 'create', 'big', '100M', token=tokens['alice']) == \
        'no room for a 100.0 MiB pool (56.0 MiB free of 64.0 MiB)'
    ctl_ok(srv, 'create', 'taken', '1M', token=tokens['alice'])
    # taken, for its owner and for anyone else
    assert ctl_refused(srv, 'create', 'taken', '1M', token=tokens['alice']) == 'pool taken exists'
    assert ctl_refused(srv, 'create', 'taken', '1M', token=tokens['bob']) == 'pool taken exists'
    assert ctl_refused(srv, 'create', 'fill', '56M', token=tokens['bob']) == \
        'no room for a 56.0 MiB pool (55.0 MiB free of 64.0 MiB)'
    ctl_ok(srv, 'create', 'fill', '55M', token=tokens['bob'])
    assert ctl_refused(srv, 'create', 'more', '1M', token=tokens['alice']) == \
        'no room for a 1.0 MiB pool (0 B free of 64.0 MiB)'


def test_wrong_token(srv, tokens, tmp_path):
    wrong = tmp_path / 'wrong'
    wrong.write_bytes(b'not a token\n')
    assert ctl_refused(srv, 'list', token=wrong) == 'wrong token'
    assert ctl_refused(srv, 'list') == 'the memserver wants a token (--token-file FILE)'
    rc, out, err = ctl(srv, 'list', token=tmp_path / 'missing')
    assert rc == 1 and 'missing' in err and not out


# ---- a pool in use ----

def test_delete_busy_then_force(srv, tokens):
    ctl_ok(srv, 'create', 'busy', '4M', token=tokens['alice'])
    c1 = pool_client(srv, 'busy', TENANTS['alice'])
    c2 = pool_client(srv, 'busy', ADMIN)
    try:
        p = [p for p in pools(srv, tokens['alice'])['pools'] if p['name'] == 'busy'][0]
        assert p['clients'] == 2 and p['client_id'] == '0000000000001234'
        assert ctl_refused(srv, 'delete', 'busy', token=tokens['alice']) == \
            'pool busy has 2 clients: use --force to cut them off'
        c2.close()
        deadline = time.monotonic() + TIMEOUT
        while ctl(srv, 'delete', 'busy', token=tokens['admin'])[2].count('1 client:') == 0:
            assert time.monotonic() < deadline, 'the closed client is still counted'
            time.sleep(0.05)
        assert ctl_refused(srv, 'delete', 'busy', token=tokens['admin']) == \
            'pool busy has 1 client: use --force to cut it off'
        ctl_ok(srv, 'delete', 'busy', '--force', token=tokens['alice'])
        # the name is free at once; the server has closed the client's connection
        assert 'busy' not in [p['name'] for p in pools(srv, tokens['admin'])['pools']]
        c1.settimeout(TIMEOUT)
        assert c1.recv(1) == b''
        assert wait_free(srv, tokens['admin'], 56 * MiB)['free'] == 56 * MiB
    finally:
        c1.close()
        c2.close()


# ---- stats ----

def test_stats(srv, tokens):
    out = ctl_ok(srv, 'stats', token=tokens['admin'])
    rows = dict(line.split() for line in out.splitlines())
    assert set(rows) == {'clients_now', 'clients_total', 'auth_failures', 'bad_requests',
                         'reads', 'writes', 'atomics', 'bytes_read', 'bytes_written',
                         'rdma_connections'}
    assert int(rows['clients_now']) >= 1  # this session
    before = json.loads(ctl_ok(srv, '--json', 'stats', token=tokens['admin']))
    ctl(srv, 'list', token=tokens['dir'] / 'nobody')  # a missing file: never sent
    wrong = tokens['dir'].parent / 'wrong'
    wrong.write_bytes(b'wrong\n')
    ctl(srv, 'list', token=wrong)
    after = json.loads(ctl_ok(srv, '--json', 'stats', token=tokens['admin']))
    assert after['auth_failures'] == before['auth_failures'] + 1


# ---- a server without a token, and one without a default pool ----

def test_no_tokens_named_pools_only(start):
    s = start('--capacity', '16M')
    doc = pools(s, None)
    assert doc == {'capacity': 16 * MiB, 'free': 16 * MiB, 'pools': []}
    assert ctl_ok(s, 'list') == 'capacity 16.0 MiB, free 16.0 MiB, 0 pools\n'
    ctl_ok(s, 'create', 'p', '16M')
    assert pools(s, None)['pools'][0]['owner'] == ''


def test_size_only_has_no_room(start):
    """Without --capacity the capacity is the default pool's: named pools find no room."""
    s = start('--size', '8M')
    assert ctl_refused(s, 'create', 'p', '1M') == \
        'no room for a 1.0 MiB pool (0 B free of 8.0 MiB)'


def test_backing_dir_pools_are_persistent(start, tmp_path):
    pdir = tmp_path / 'pools'
    pdir.mkdir()
    s = start('--capacity', '16M', '--backing-dir', pdir)
    ctl_ok(s, 'create', 'kept', '2M')
    row = [l for l in ctl_ok(s, 'list').splitlines() if l.startswith('kept ')][0]
    assert row.split()[-1] == 'persistent'
    assert pools(s, None)['pools'][0]['persistent'] is True
    ctl_ok(s, 'delete', 'kept')
    deadline = time.monotonic() + TIMEOUT
    while os.path.exists(pdir / 'kept.pool'):
        assert time.monotonic() < deadline, 'the deleted pool kept its file'
        time.sleep(0.05)


# ---- servers it cannot talk to ----

def test_nothing_listening():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        port = s.getsockname()[1]
    r = subprocess.run([CTL, '127.0.0.1:%d' % port, 'list'], capture_output=True, text=True,
                       timeout=TIMEOUT)
    assert r.returncode == 1
    assert r.stderr == ('memserver-ctl: 127.0.0.1:%d: connect: connection refused '
                        '(no memserver listening?)\n' % port)


def fake_server(answer):
    """A listener whose every connection gets answer(hello header) (None: silence)."""
    ls = socket.socket()
    ls.bind(('127.0.0.1', 0))
    ls.listen(4)
    conns = []

    def serve():
        while True:
            try:
                c, _ = ls.accept()
            except OSError:
                return
            conns.append(c)
            hdr = HDR.unpack(recv_exact(c, HDR.size))
            recv_exact(c, hdr[4])
            reply = answer(hdr)
            if reply is not None:
                c.sendall(reply)
    t = threading.Thread(target=serve, daemon=True)
    t.start()
    return ls, conns, t


def test_silent_server_times_out():
    ls, conns, t = fake_server(lambda hdr: None)
    try:
        t0 = time.monotonic()
        r = subprocess.run([CTL, '127.0.0.1:%d' % ls.getsockname()[1], '--timeout', '1',
                            'list'], capture_output=True, text=True, timeout=TIMEOUT)
        assert r.returncode == 1 and 'connect: no answer within 1 s' in r.stderr, r.stderr
        assert time.monotonic() - t0 < 5
    finally:
        ls.close()
        for c in conns:
            c.close()
        t.join(TIMEOUT)


def test_server_without_control_sessions():
    """A memserver that predates control sessions refuses the HELLO flag as malformed."""
    def refuse(hdr):
        return HDR.pack(MAGIC, VERSION, HELLO | RESP, E_MALFORMED, 0, hdr[5])
    ls, conns, t = fake_server(refuse)
    try:
        port = ls.getsockname()[1]
        r = subprocess.run([CTL, '127.0.0.1:%d' % port, 'list'], capture_output=True,
                           text=True, timeout=TIMEOUT)
        assert r.returncode == 1
        assert r.stderr == ('memserver-ctl: 127.0.0.1:%d: connect: not a memserver that knows '
                            'control sessions (an older memserver?)\n' % port)
    finally:
        ls.close()
        for c in conns:
            c.close()
        t.join(TIMEOUT)


# ---- usage ----

@pytest.mark.parametrize('args', [
    [],
    ['127.0.0.1'],
    ['127.0.0.1', 'frobnicate'],
    ['127.0.0.1', 'list', 'extra'],
    ['127.0.0.1', 'create', 'p'],
    ['127.0.0.1', 'create', 'p', '512K'],
    ['127.0.0.1', 'create', 'p', 'lots'],
    ['127.0.0.1', 'create', '.p', '1M'],
    ['127.0.0.1', 'create', 'a' * 32, '1M'],
    ['127.0.0.1', 'delete'],
    ['127.0.0.1', 'delete', 'a/b'],
    ['127.0.0.1', '--json', 'create', 'p', '1M'],
    ['127.0.0.1', '--force', 'list'],
    ['127.0.0.1', '--timeout', '0', 'list'],
    ['127.0.0.1', '--bogus', 'list'],
    ['127.0.0.1:0', 'list'],
    ['127.0.0.1/pool', 'list'],
])
def test_usage_errors(args):
    r = subprocess.run([CTL] + args, capture_output=True, text=True, timeout=TIMEOUT)
    assert r.returncode == 2 and not r.stdout and 'memserver-ctl' in r.stderr, r


def test_help():
    r = subprocess.run([CTL, '--help'], capture_output=True, text=True, timeout=TIMEOUT)
    assert r.returncode == 0 and not r.stderr
    for word in ('list', 'create NAME SIZE', 'delete NAME [--force]', 'stats', '--token-file',
                 '--json', '--timeout'):
        assert word in r.stdout
