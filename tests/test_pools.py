# SPDX-License-Identifier: GPL-2.0-or-later
"""Process-level tests of the memserver's pools (issue 25): --capacity, named pools
created on demand, tenants (--token-dir) and the admin (--token-file), the control
session and POOL_LIST/POOL_CREATE/POOL_DELETE spoken byte by byte (struct.pack of
proto.h's wire structs, as tests/test_memserver.py does), every refusal, isolation of
one tenant's connection from another's pool (keys, addresses, FENCE), fuzzing of the
new messages, creations and deletions racing with verified I/O (the capacity is never
overcommitted), and --backing-dir keeping every pool across a restart.

Every server runs with G_DEBUG=fatal-warnings and is checked to exit cleanly.
Run: /usr/bin/python3 -m pytest tests/test_pools.py (RMEM_BUILD_DIR set by meson).
"""

import hashlib
import os
import random
import socket
import struct
import threading
import time

import pytest

from rmemtest import READY_RE
from test_memserver import (CAS, E_AUTH, E_KEY, E_MALFORMED, E_RANGE, E_STATE, FENCE,
                            FETCH_ADD, HDR, HELLO, MAGIC, OK, PING, POOL_PERSISTENT, READ,
                            RESP, STATS, TIMEOUT, VERSION, WRITE, ATOMIC_W, HELLO_W, RW_W,
                            Client, Closed, Pool, Server, run_memserver)

# ---- proto.h: named pools ----
POOL_LIST, POOL_CREATE, POOL_DELETE = 10, 11, 12
E_FENCED, E_NOSPACE, E_EXIST, E_NOPOOL, E_BUSY, E_DENIED = 12, 13, 14, 15, 16, 17
HELLO_POOL, HELLO_CONTROL = 0x1, 0x2
DELETE_FORCE = 0x1
POOL_DELETING = 0x4
MAX_POOLS = 512
SEL_W = struct.Struct('>32sQII')          # name create_size flags reserved
DEL_W = struct.Struct('>32sII')           # name flags reserved
LIST_W = struct.Struct('>QQII')           # capacity free npools reserved
INFO_W = struct.Struct('>32s32sQQQQII')   # name owner size resident pool_id client_id clients flags
assert SEL_W.size == 48 and DEL_W.size == 40 and LIST_W.size == 24 and INFO_W.size == 104

MIB = 1 << 20
ADMIN = b'the admin token'
ALICE = b'alice token'
BOB = b'bob token'


def h(token):
    return hashlib.sha256(token).digest()


def name_bytes(name):
    return name.encode() if isinstance(name, str) else name


class PClient(Client):
    """A raw protocol client that knows pools."""

    def hello_pool(self, token, name=None, create=0, client_id=0):
        payload = HELLO_W.pack(h(token), HELLO_POOL if name is not None else 0, 0, client_id)
        if name is not None:
            payload += SEL_W.pack(name_bytes(name), create, 0, 0)
        status, resp = self.call(HELLO, payload)
        if status == OK:
            self.pool = Pool(resp)
        return status

    def control(self, token):
        status, resp = self.call(HELLO, HELLO_W.pack(h(token), HELLO_CONTROL, 0, 0))
        assert status != OK or resp == b''
        return status

    def pool_list(self):
        status, resp = self.call(POOL_LIST)
        assert status == OK, status
        cap, free, n, _ = LIST_W.unpack_from(resp)
        assert len(resp) == LIST_W.size + n * INFO_W.size
        pools = {}
        for i in range(n):
            f = INFO_W.unpack_from(resp, LIST_W.size + i * INFO_W.size)
            name = f[0].rstrip(b'\0').decode()
            pools[name] = dict(owner=f[1].rstrip(b'\0').decode(), size=f[2], resident=f[3],
                               pool_id=f[4], client_id=f[5], clients=f[6], flags=f[7])
        return cap, free, pools

    def create(self, name, size):
        return self.call(POOL_CREATE, SEL_W.pack(name_bytes(name), size, 0, 0))[0]

    def delete(self, name, force=False):
        return self.call(POOL_DELETE, DEL_W.pack(name_bytes(name),
                                                  DELETE_FORCE if force else 0, 0))[0]


def write_tokens(d, tenants):
    os.makedirs(d, exist_ok=True)
    for name, token in tenants.items():
        with open(os.path.join(d, name), 'wb') as f:
            f.write(token + b'\n')


@pytest.fixture
def tokens(tmp_path):
    """(admin token file, token dir with alice and bob)"""
    admin = tmp_path / 'admin'
    admin.write_bytes(ADMIN + b'\n')
    tdir = str(tmp_path / 'tenants')
    write_tokens(tdir, {'alice': ALICE, 'bob': BOB})
    return str(admin), tdir


@pytest.fixture
def start(tmp_path):
    servers = []

    def _start(*args, prefix=()):
        s = Server(list(args) + ['--transport', 'tcp'], tmp_path, prefix=prefix,
                   name='memserver%d' % len(servers))
        servers.append(s)
        return s
    yield _start
    for s in servers:
        s.kill()


@pytest.fixture
def srv(start, tokens):
    """64 MiB of capacity, a default pool of 8 MiB, the admin, alice and bob."""
    admin, tdir = tokens
    s = start('--port', '0', '--capacity', '64M', '--size', '8M', '--chunk-size', '1M',
              '--token-file', admin, '--token-dir', tdir)
    yield s
    s.assert_alive()
    s.stop_clean()


def ctl(s, token=ADMIN):
    c = PClient(s.port)
    assert c.control(token) == OK
    return c


def wait_free(s, want, timeout=TIMEOUT):
    """poll POOL_LIST until free == want (a deleted pool's memory goes when its clients do)"""
    deadline = time.monotonic() + timeout
    with ctl(s) as c:
        while True:
            free = c.pool_list()[1]
            if free == want:
                return
            assert time.monotonic() < deadline, 'free %d, want %d' % (free, want)
            time.sleep(0.02)


# ---- command line and ready line ----

def test_ready_line(start, tokens):
    admin, tdir = tokens
    s = start('--port', '0', '--capacity', '64M', '--size', '8M')
    assert ' 64.0 MiB capacity (default pool 8.0 MiB, 0 named pools) on tcp ' in s.ready
    assert READY_RE.match(s.ready)
    s.stop_clean()
    s = start('--port', '0', '--capacity', '64M', '--token-file', admin)
    assert 'serving 64.0 MiB capacity (no default pool, 0 named pools) on tcp' in s.ready
    with PClient(s.port) as c:           # no default pool: HELLO without a name finds none
        assert c.hello_pool(ADMIN) == E_NOPOOL
        assert c.is_closed()
    with ctl(s) as c:
        assert c.pool_list()[:2] == (64 * MIB, 64 * MIB)
    s.stop_clean()
    s = start('--port', '0', '--size', '8M')     # without --capacity: the old line, no room
    assert s.match.group('size') == '8.0 MiB' and s.match.group('pools') is None
    with ctl(s, b'') as c:
        assert c.pool_list()[:2] == (8 * MIB, 0)
        assert c.create('x', MIB) == E_NOSPACE
    s.stop_clean()


@pytest.mark.parametrize('args,message', [
    (['--capacity', 'lots'], "--capacity 'lots' is not a size"),
    (['--capacity', '512K'], '--capacity must be at least 1M'),
    (['--capacity', '16M', '--size', '32M'], '--size is larger than --capacity'),
    (['--capacity'], '--capacity needs a value'),
    (['--token-dir'], '--token-dir needs a value'),
])
def test_bad_options(args, message):
    r = run_memserver(args + ['--port', '0'] if args[-1] not in ('--capacity', '--token-dir')
                      else args)
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert message in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert r.stdout == ''


def test_bad_token_dirs(tmp_path):
    base = ['--port', '0', '--capacity', '16M', '--transport', 'tcp']
    r = run_memserver(base + ['--token-dir', str(tmp_path / 'nope')])
    assert r.returncode == 1 and 'cannot read --token-dir' in r.stderr, r.stderr
    dup = str(tmp_path / 'dup')
    write_tokens(dup, {'alice': ALICE, 'bob': ALICE})
    r = run_memserver(base + ['--token-dir', dup])
    assert r.returncode == 1 and 'the same token as' in r.stderr, r.stderr
    admin = tmp_path / 'admin'
    admin.write_bytes(BOB + b'\n')
    same = str(tmp_path / 'same')
    write_tokens(same, {'bob': BOB})
    r = run_memserver(base + ['--token-file', str(admin), '--token-dir', same])
    assert r.returncode == 1 and 'the same token as the admin' in r.stderr, r.stderr
    for bad in ('-dash', 'x' * 32, 'sp ace'):
        d = str(tmp_path / ('bad%d' % len(bad)))
        write_tokens(d, {bad: b'tok'})
        r = run_memserver(base + ['--token-dir', d])
        assert r.returncode == 1 and 'is not a tenant name' in r.stderr, r.stderr
    empty = str(tmp_path / 'empty')
    write_tokens(empty, {'carol': b''})
    r = run_memserver(base + ['--token-dir', empty])
    assert r.returncode == 1 and 'holds no token' in r.stderr, r.stderr


# ---- tenants, the admin, and every refusal ----

def test_refusals(srv):
    with PClient(srv.port) as c:                         # a token of nobody
        assert c.hello_pool(b'mallory', 'x', 4 * MIB) == E_AUTH
        assert c.is_closed()
    with PClient(srv.port) as c:                         # the default pool is the admin's
        assert c.hello_pool(ALICE) == E_DENIED
        assert c.is_closed()
    with PClient(srv.port) as c:
        assert c.hello_pool(ALICE, 'apool') == E_NOPOOL
        assert c.is_closed()
    for size in (0x1000, MIB - 1):                       # below a MiB
        with PClient(srv.port) as c:
            assert c.hello_pool(ALICE, 'apool', size) == E_MALFORMED
    alice = PClient(srv.port)
    assert alice.hello_pool(ALICE, 'apool', MIB + 1) == OK   # rounded up to whole MiBs
    assert alice.pool.size == 2 * MIB
    with PClient(srv.port) as c:                         # bob: not his, and the name is taken
        assert c.hello_pool(BOB, 'apool') == E_DENIED
    with PClient(srv.port) as c:
        assert c.hello_pool(BOB, 'apool', 4 * MIB) == E_EXIST
    with PClient(srv.port) as c:                         # alice again: the same pool
        assert c.hello_pool(ALICE, 'apool', 4 * MIB) == OK
        assert c.pool.pool_id == alice.pool.pool_id and c.pool.size == 2 * MIB
    with PClient(srv.port) as c:                         # the admin reaches it
        assert c.hello_pool(ADMIN, 'apool') == OK
    with ctl(srv, BOB) as c:
        cap, free, pools = c.pool_list()
        assert (cap, free) == (64 * MIB, 64 * MIB - 8 * MIB - 2 * MIB)
        assert pools == {}                               # bob sees no pool of alice's
        assert c.delete('apool') == E_NOPOOL             # nor learns of it
        assert c.create('apool', 4 * MIB) == E_EXIST
        assert c.create('big', 55 * MIB) == E_NOSPACE    # 54 MiB are free
        assert c.create('big', 1 << 63) == E_NOSPACE
        assert c.create('big', (1 << 64) - 1) == E_NOSPACE   # overflows when rounded
        assert c.create('small', 1000) == E_MALFORMED
        assert c.create('zero', 0) == E_MALFORMED
        assert c.create('bpool', 54 * MIB) == OK         # exactly what is free
        assert c.pool_list()[1] == 0
        assert c.create('more', MIB) == E_NOSPACE
        assert c.delete('bpool') == OK
    wait_free(srv, 54 * MIB)
    with ctl(srv, ALICE) as c:
        assert c.create('apool', 4 * MIB) == E_EXIST     # even for its owner
        _, _, pools = c.pool_list()
        assert list(pools) == ['apool']
        p = pools['apool']
        assert (p['owner'], p['size'], p['clients'], p['pool_id']) == \
            ('alice', 2 * MIB, 1, alice.pool.pool_id)
        assert c.delete('apool') == E_BUSY               # alice's connection uses it
        # a control session is no pool: data ops and FENCE are refused, it stays open
        for mtype, payload in ((READ, RW_W.pack(0, 0, 8)), (WRITE, RW_W.pack(0, 0, 4) + b'abcd'),
                               (CAS, ATOMIC_W.pack(0, 0, 0, 0, 0)),
                               (FETCH_ADD, ATOMIC_W.pack(0, 0, 0, 1, 0)),
                               (FENCE, struct.pack('>Q', 5))):
            assert c.call(mtype, payload)[0] == E_STATE
        assert c.call(PING, b'ping') == (OK, b'ping')
        assert c.call(STATS)[0] == OK
        assert c.hello_pool(ALICE, 'apool') == E_STATE   # a control session stays one
    with ctl(srv) as c:
        _, _, pools = c.pool_list()                      # the admin sees every pool
        assert set(pools) == {'', 'apool'} and pools['']['owner'] == ''
        # the default pool cannot be deleted (its name is empty)
        assert c.call(POOL_DELETE, DEL_W.pack(b'', 0, 0))[0] == E_STATE
        assert c.call(POOL_DELETE, DEL_W.pack(b'', DELETE_FORCE, 0))[0] == E_STATE
        assert c.delete('apool', force=True) == OK       # cuts alice off
        assert alice.is_closed()
        pools = c.pool_list()[2]                         # one listing: it may go meanwhile
        assert 'apool' not in pools or pools['apool']['flags'] & POOL_DELETING
    wait_free(srv, 56 * MIB)
    # a bound connection cannot switch pools
    with PClient(srv.port) as c:
        assert c.hello_pool(ALICE, 'again', 2 * MIB) == OK
        assert c.hello_pool(ALICE, 'other', 2 * MIB) == E_STATE
        assert c.control(ALICE) == E_STATE
        assert c.hello_pool(ALICE, 'again') == OK        # the same pool: fine
    alice.close()


def test_malformed_selections(srv):
    good_hello = HELLO_W.pack(h(ALICE), HELLO_POOL, 0, 0)
    cases = [
        good_hello + SEL_W.pack(b'-dash', MIB, 0, 0),            # bad first character
        good_hello + SEL_W.pack(b'a b', MIB, 0, 0),              # bad character
        good_hello + SEL_W.pack(b'x' * 32, MIB, 0, 0),           # no NUL
        good_hello + SEL_W.pack(b'', MIB, 0, 0),                 # empty name with the flag
        good_hello + SEL_W.pack(b'ok', MIB, 1, 0),               # reserved flags
        good_hello,                                              # flag without the selection
        HELLO_W.pack(h(ALICE), 0, 0, 0) + SEL_W.pack(b'ok', MIB, 0, 0),  # selection w/o flag
        HELLO_W.pack(h(ALICE), HELLO_POOL | HELLO_CONTROL, 0, 0) + SEL_W.pack(b'ok', 0, 0, 0),
        good_hello + SEL_W.pack(b'ok', MIB, 0, 0) + b'x',        # overlong
        (good_hello + SEL_W.pack(b'ok', MIB, 0, 0))[:-1],        # truncated
    ]
    for payload in cases:
        with PClient(srv.port) as c:
            assert c.call(HELLO, payload)[0] == E_MALFORMED, payload
            assert c.is_closed()
    with ctl(srv) as c:
        for payload in (b'', SEL_W.pack(b'ok', MIB, 0, 0)[:-1], SEL_W.pack(b'ok', MIB, 0, 0) + b'x',
                        SEL_W.pack(b'x' * 32, MIB, 0, 0), SEL_W.pack(b'.dot', MIB, 0, 0)):
            assert c.call(POOL_CREATE, payload)[0] == E_MALFORMED
        for payload in (b'', DEL_W.pack(b'ok', 2, 0), DEL_W.pack(b'ok', 0, 0)[:-1],
                        DEL_W.pack(b'x' * 32, 0, 0)):
            assert c.call(POOL_DELETE, payload)[0] == E_MALFORMED
        assert c.call(POOL_LIST, b'x')[0] == E_MALFORMED
        assert c.call(PING, b'alive') == (OK, b'alive')
        assert c.pool_list()[1] == 56 * MIB


# ---- isolation ----

def test_isolation(srv):
    """alice's connection with bob's keys and addresses gets E_KEY or E_RANGE, bob's
    bytes stay; her FENCE of bob's client id does not reach bob (fencing is per pool)."""
    ID_BOB = 0xb0b
    a = PClient(srv.port)
    b = PClient(srv.port)
    try:
        assert a.hello_pool(ALICE, 'a', 4 * MIB) == OK
        assert b.hello_pool(BOB, 'b', 4 * MIB, client_id=ID_BOB) == OK
        data = os.urandom(4096)
        assert b.pwrite(100, data) == OK
        baddr, bkey = b.pool.resolve(100, 4096)
        aaddr, akey = a.pool.resolve(0, 8)
        assert a.read(baddr, bkey, 4096)[0] == E_KEY
        assert a.write(baddr, bkey, b'z' * 4096) == E_KEY
        assert a.atomic(CAS, baddr & ~7, bkey, 0, 1)[0] == E_KEY
        assert a.atomic(FETCH_ADD, baddr & ~7, bkey, 1)[0] == E_KEY
        assert a.read(baddr, akey, 8)[0] in (E_KEY, E_RANGE)     # bob's address, her key
        assert a.write(baddr, akey, b'z' * 8) in (E_KEY, E_RANGE)
        assert b.pread(100, 4096) == data
        # fencing bob's id from alice's pool: bob keeps working, and may connect again
        assert a.call(FENCE, struct.pack('>Q', ID_BOB))[0] == OK
        assert b.pread(100, 4096) == data
        with PClient(srv.port) as b2:
            assert b2.hello_pool(BOB, 'b', client_id=ID_BOB) == OK
        # ... but on alice's pool that id is fenced now
        with PClient(srv.port) as x:
            assert x.hello_pool(ADMIN, 'a', client_id=ID_BOB) == E_FENCED
    finally:
        a.close()
        b.close()


# ---- fuzz ----

def test_fuzz_pool_messages(srv):
    seed = int(os.environ.get('RMEM_TEST_SEED', random.randrange(1 << 32)))
    print('seed', seed)
    rng = random.Random(seed)
    sizes = [0, 1, MIB - 1, MIB, MIB + 1, 3 * MIB, 1 << 63, (1 << 64) - 1,
             (1 << 64) - (1 << 19), (1 << 64) - MIB, 64 * MIB, 65 * MIB]
    names = [b'ok', b'p1', b'p2', b'', b'-x', b'x' * 31, b'x' * 32, b'a\0b', b'\xff\xfe',
             b'_u', b'.hidden', b'9lives']
    tokens = [ADMIN, ALICE, BOB, b'nobody']

    def rand_payload(mtype):
        r = rng.random()
        if r < 0.2:
            return os.urandom(rng.randrange(0, 200))
        if mtype == HELLO:
            flags = rng.choice([0, HELLO_POOL, HELLO_CONTROL, 3, 4, 0xffffffff])
            p = HELLO_W.pack(h(rng.choice(tokens)), flags, 0, rng.randrange(3))
            if rng.random() < 0.7:
                p += SEL_W.pack(rng.choice(names), rng.choice(sizes), rng.choice([0, 0, 1]), 0)
        elif mtype == POOL_CREATE:
            p = SEL_W.pack(rng.choice(names), rng.choice(sizes), rng.choice([0, 0, 1]), 0)
        elif mtype == POOL_DELETE:
            p = DEL_W.pack(rng.choice(names), rng.choice([0, 0, 1, 2]), 0)
        else:
            p = b''
        if rng.random() < 0.15:
            p = p[:rng.randrange(len(p) + 1)]
        elif rng.random() < 0.15:
            p += os.urandom(rng.randrange(1, 16))
        return p

    deadline = time.monotonic() + 8
    n = 0
    while time.monotonic() < deadline:
        with PClient(srv.port) as c:
            if rng.random() < 0.5:
                assert c.control(rng.choice(tokens[:3])) == OK
            for _ in range(rng.randrange(1, 12)):
                mtype = rng.choice([HELLO, POOL_LIST, POOL_CREATE, POOL_DELETE, READ])
                payload = rand_payload(mtype)
                try:
                    c.call(mtype, payload)
                except (Closed, ConnectionError, socket.timeout, AssertionError):
                    break
                n += 1
    assert n > 50
    # healthy: answers, and the books balance
    with ctl(srv) as c:
        cap, free, pools = c.pool_list()
        assert sum(p['size'] for p in pools.values()) + free <= cap
        for name in [n for n in pools if n]:
            assert c.delete(name, force=True) == OK
    wait_free(srv, 56 * MIB)


# ---- races: create and delete while others do verified I/O ----

def test_create_delete_races(start, tokens):
    admin, tdir = tokens
    s = start('--port', '0', '--capacity', '48M', '--token-file', admin, '--token-dir', tdir)
    seed = int(os.environ.get('RMEM_TEST_SEED', random.randrange(1 << 32)))
    print('seed', seed)
    stop = threading.Event()
    errors = []
    counts = {'io': 0, 'created': 0, 'lists': 0}

    def io_worker(token, name, wseed):
        rng = random.Random(wseed)
        try:
            with PClient(s.port) as c:
                assert c.hello_pool(token, name, 8 * MIB) == OK
                while not stop.is_set():
                    off = rng.randrange(0, 8 * MIB - 8192)
                    data = rng.randbytes(rng.randrange(1, 8192))
                    assert c.pwrite(off, data) == OK
                    assert c.pread(off, len(data)) == data
                    counts['io'] += 1
        except Exception as e:          # noqa: BLE001 - reported below
            errors.append('io %s: %r' % (name, e))

    def churn(token, prefix, wseed):
        rng = random.Random(wseed)
        try:
            with ctl(s, token) as c:
                while not stop.is_set():
                    name = '%s%d' % (prefix, rng.randrange(6))
                    if rng.random() < 0.5:
                        st = c.create(name, rng.randrange(1, 12) * MIB)
                        assert st in (OK, E_EXIST, E_NOSPACE), st
                        counts['created'] += st == OK
                    elif rng.random() < 0.5:
                        assert c.delete(name, force=rng.random() < 0.5) in (OK, E_NOPOOL, E_BUSY)
                    else:
                        # a connection to a churned pool: any refusal, or a short life
                        with PClient(s.port) as u:
                            st = u.hello_pool(token, name, 2 * MIB)
                            assert st in (OK, E_NOSPACE, E_NOPOOL), st
        except Exception as e:          # noqa: BLE001
            errors.append('churn %s: %r' % (prefix, e))

    def watcher():
        try:
            with ctl(s) as c:
                while not stop.is_set():
                    cap, free, pools = c.pool_list()
                    total = sum(p['size'] for p in pools.values())
                    assert total + free <= cap == 48 * MIB, (total, free, pools)
                    counts['lists'] += 1
        except Exception as e:          # noqa: BLE001
            errors.append('watcher: %r' % e)

    threads = [threading.Thread(target=io_worker, args=(ALICE, 'aio', seed)),
               threading.Thread(target=io_worker, args=(BOB, 'bio', seed + 1)),
               threading.Thread(target=churn, args=(ALICE, 'ac', seed + 2)),
               threading.Thread(target=churn, args=(BOB, 'bc', seed + 3)),
               threading.Thread(target=churn, args=(ADMIN, 'zc', seed + 4)),
               threading.Thread(target=watcher)]
    for t in threads:
        t.start()
    time.sleep(6)
    stop.set()
    for t in threads:
        t.join(TIMEOUT)
        assert not t.is_alive()
    assert not errors, errors
    assert counts['io'] > 20 and counts['created'] > 3 and counts['lists'] > 20, counts
    with ctl(s) as c:
        for name in [n for n in c.pool_list()[2] if n]:
            assert c.delete(name, force=True) == OK
    wait_free(s, 48 * MIB)
    s.stop_clean()


# ---- restart with a backing dir ----

def test_backing_dir_restart(start, tokens, tmp_path):
    admin, tdir = tokens
    bdir = tmp_path / 'pools'
    bdir.mkdir()
    args = ['--port', '0', '--capacity', '32M', '--token-file', admin, '--token-dir', tdir,
            '--backing-dir', str(bdir)]
    s = start(*args)
    blobs = {}
    ids = {}
    for token, name, size in ((ALICE, 'ap', 4 * MIB), (BOB, 'bp', 3 * MIB), (ADMIN, 'zp', MIB)):
        with PClient(s.port) as c:
            assert c.hello_pool(token, name, size) == OK
            assert c.pool.flags & POOL_PERSISTENT
            blobs[name] = os.urandom(65536)
            assert c.pwrite(size - 65536, blobs[name]) == OK
            ids[name] = c.pool.pool_id
    with ctl(s) as c:
        assert c.pool_list()[2]['ap']['resident'] >= 65536
    assert sorted(os.listdir(bdir)) == ['ap.pool', 'bp.pool', 'zp.pool']
    s.stop_clean()

    s = start(*args)
    assert '32.0 MiB capacity (no default pool, 3 named pools)' in s.ready
    with ctl(s) as c:
        cap, free, pools = c.pool_list()
        assert free == 32 * MIB - 8 * MIB
        assert {n: (p['owner'], p['size'], p['pool_id']) for n, p in pools.items()} == {
            'ap': ('alice', 4 * MIB, ids['ap']), 'bp': ('bob', 3 * MIB, ids['bp']),
            'zp': ('', MIB, ids['zp'])}
    for token, name, size in ((ALICE, 'ap', 4 * MIB), (BOB, 'bp', 3 * MIB), (ADMIN, 'zp', MIB)):
        with PClient(s.port) as c:
            assert c.hello_pool(token, name) == OK
            assert c.pool.pool_id == ids[name]
            assert c.pread(size - 65536, 65536) == blobs[name]
    with PClient(s.port) as c:
        assert c.hello_pool(BOB, 'ap') == E_DENIED
    with ctl(s, BOB) as c:
        assert c.delete('bp') == OK                     # its file goes with it
    assert sorted(os.listdir(bdir)) == ['ap.pool', 'zp.pool']
    s.stop_clean()

    # alice is no tenant any more: her pool stays, for the admin only
    os.unlink(os.path.join(tdir, 'alice'))
    s = start(*args)
    assert "belongs to 'alice', no longer a tenant" in s.stderr()
    with PClient(s.port) as c:
        assert c.hello_pool(ADMIN, 'ap') == OK
        assert c.pread(4 * MIB - 65536, 65536) == blobs['ap']
    s.stop_clean()

    # the pools must fit the capacity, else the memserver refuses to start, naming the file
    r = run_memserver(['--port', '0', '--capacity', '4M', '--token-file', admin,
                       '--backing-dir', str(bdir), '--transport', 'tcp'])
    assert r.returncode == 1, r.stderr
    assert 'ap.pool holds a 4.0 MiB pool but only' in r.stderr or \
        'zp.pool holds a 1.0 MiB pool but only' in r.stderr, r.stderr
    # a file that is no pool
    (bdir / 'junk.pool').write_bytes(b'not a pool' * 1000)
    r = run_memserver(args + ['--transport', 'tcp'])
    assert r.returncode == 1 and 'junk.pool' in r.stderr and 'not a memserver pool' in r.stderr
    r = run_memserver(['--port', '0', '--capacity', '8M', '--backing-dir',
                       str(tmp_path / 'nodir'), '--transport', 'tcp'])
    assert r.returncode == 1 and 'cannot read --backing-dir' in r.stderr, r.stderr


# a prefix that runs the memserver with files limited to 8 MiB (SIGXFSZ ignored: EFBIG)
FSIZE_8M = ['/usr/bin/python3', '-c',
            'import os, resource, signal, sys; signal.signal(signal.SIGXFSZ, signal.SIG_IGN); '
            'resource.setrlimit(resource.RLIMIT_FSIZE, (8 << 20, 8 << 20)); '
            'os.execv(sys.argv[1], sys.argv[1:])']


def test_backing_dir_failed_create(start, tokens, tmp_path):
    """A creation whose file cannot be made leaves no NAME.pool behind (an empty one would
    stop the next start), gives its capacity back, and the memserver restarts."""
    admin, tdir = tokens
    bdir = tmp_path / 'pools'
    bdir.mkdir()
    args = ['--port', '0', '--capacity', '64M', '--token-file', admin, '--token-dir', tdir,
            '--backing-dir', str(bdir)]
    s = start(*args, prefix=FSIZE_8M)
    with ctl(s, ALICE) as c:
        assert c.create('big', 16 * MIB) not in (OK, E_NOSPACE)   # the file system refuses
        assert os.listdir(bdir) == []
        assert c.pool_list()[1] == 64 * MIB
        assert c.create('small', 2 * MIB) == OK
    with PClient(s.port) as c:
        assert c.hello_pool(ALICE, 'big', 16 * MIB) not in (OK, E_NOSPACE)
    assert os.listdir(bdir) == ['small.pool']
    s.stop_clean()
    s = start(*args)
    assert '(no default pool, 1 named pool)' in s.ready
    s.stop_clean()


def test_backing_dir_stray_file(start, tokens, tmp_path):
    """A NAME.pool put into --backing-dir while the memserver runs is not served; a
    creation of NAME must not take it over (its bytes may be another tenant's)."""
    admin, tdir = tokens
    first, second = tmp_path / 'first', tmp_path / 'second'
    first.mkdir()
    second.mkdir()
    base = ['--port', '0', '--capacity', '16M', '--token-file', admin, '--token-dir', tdir]
    secret = os.urandom(4096)
    s = start(*base, '--backing-dir', str(first))
    with PClient(s.port) as c:
        assert c.hello_pool(ALICE, 'x', 4 * MIB) == OK
        assert c.pwrite(0, secret) == OK
    s.stop_clean()
    s = start(*base, '--backing-dir', str(second))
    stray = (first / 'x.pool').read_bytes()
    (second / 'x.pool').write_bytes(stray)
    with PClient(s.port) as c:
        st = c.hello_pool(BOB, 'x', 4 * MIB)
        leaked = st == OK and c.pread(0, 4096) == secret
        assert not leaked, "bob was given alice's bytes"
        assert st == E_EXIST
    with ctl(s, BOB) as c:
        assert c.create('x', 4 * MIB) == E_EXIST
        assert c.pool_list()[1] == 16 * MIB
    assert (second / 'x.pool').read_bytes() == stray       # left alone
    s.stop_clean()
