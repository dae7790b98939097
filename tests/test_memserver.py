# SPDX-License-Identifier: GPL-2.0-or-later
"""Process-level tests of the memserver: command line, ready line, errors, and
its TCP protocol spoken byte by byte (struct.pack of proto.h's wire structs),
including malformed input, bad flows, many clients, garbage on the port, and a
backing file that survives a restart.

Every server runs with G_DEBUG=fatal-warnings; a test fails if the server dies
or logs a warning/critical. Servers are always killed in teardown.
Run: /usr/bin/python3 -m pytest tests/test_memserver.py (RMEM_BUILD_DIR set by meson).
"""

import hashlib
import os
import random
import re
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from rmemtest import MEMSERVER, MemServerProc, daemon_env

# ---- proto.h ----
MAGIC = 0x524D454D
VERSION = 2
DEFAULT_PORT = 7471
RESP = 0x8000
HELLO, READ, WRITE, CAS, FETCH_ADD, PING, STATS, QP_EXCHANGE, FENCE = range(1, 10)
(OK, E_AUTH, E_VERSION, E_MALFORMED, E_KEY, E_RANGE, E_ALIGN, E_TOOBIG, E_UNSUPPORTED,
 E_NOMEM, E_INTERNAL, E_STATE, E_FENCED) = range(13)
MAX_IO = 16 << 20
MAX_CTRL = 64 << 10
POOL_PERSISTENT = 0x1

HDR = struct.Struct('>IHHIIQ')          # magic version type status len id
HELLO_W = struct.Struct('>32sIIQ')      # token_hash flags reserved client_id
POOL_W = struct.Struct('>QQII')         # size pool_id nregions flags
REGION_W = struct.Struct('>QQII')       # addr len rkey reserved
RW_W = struct.Struct('>QII')            # addr rkey len
ATOMIC_W = struct.Struct('>QIIQQ')      # addr rkey reserved compare_add swap
QP_INFO_W = struct.Struct('>II16sHBBI')  # qpn psn gid lid mtu max_rd_atomic reserved
STATS_FIELDS = ('clients_now', 'clients_total', 'auth_failures', 'bad_requests', 'reads',
                'writes', 'atomics', 'bytes_read', 'bytes_written', 'rdma_connections')
assert HDR.size == 24 and HELLO_W.size == 48 and RW_W.size == 16 and ATOMIC_W.size == 32
assert QP_INFO_W.size == 32

TOKEN = b'correct horse battery staple'
TOKEN_HASH = hashlib.sha256(TOKEN).digest()
ZERO_HASH = bytes(32)

BAD_LOG_RE = re.compile(r'(-WARNING|-CRITICAL|-ERROR|ERROR: AddressSanitizer|runtime error:)')

TIMEOUT = 10


# ---- the server process ----

class Server(MemServerProc):
    """A running memserver; .port is the TCP port from its ready line."""

    def __init__(self, args, tmp_dir, prefix=(), name='memserver'):
        super().__init__(args, tmp_dir, name=name, prefix=prefix, timeout=TIMEOUT,
                         pump_stderr=False)

    def assert_alive(self):
        assert self.alive(), 'memserver died (rc %s): %s' % (self.proc.returncode, self.stderr())

    def kill(self):
        self.stop(signal.SIGKILL)

    def assert_clean_log(self):
        bad = [l for l in self.stderr().splitlines() if BAD_LOG_RE.search(l)]
        assert not bad, 'memserver logged: %s' % bad

    def stop_clean(self):
        """SIGTERM, exit status 0, nothing on stdout but the ready line, no warnings."""
        rc = self.stop(timeout=TIMEOUT)
        assert self.out.text() == self.ready + '\n', 'stdout: %r' % self.out.text()
        assert rc == 0, 'memserver exited %s: %s' % (rc, self.stderr())
        self.assert_clean_log()


def run_memserver(args, timeout=TIMEOUT, prefix=()):
    """Run a memserver that is expected to exit by itself (bad options etc.)."""
    return subprocess.run(list(prefix) + [MEMSERVER] + list(args), capture_output=True,
                          text=True, timeout=timeout, env=daemon_env())


@pytest.fixture
def start(tmp_path):
    """start(args...) -> Server; every server is killed at teardown."""
    servers = []

    def _start(*args, prefix=()):
        s = Server(args, tmp_path, prefix=prefix, name='memserver%d' % len(servers))
        servers.append(s)
        return s
    yield _start
    for s in servers:
        s.kill()


@pytest.fixture(scope='module')
def server(tmp_path_factory):
    """One token-protected server for the protocol tests: 64 MiB in 4 regions of 16 MiB."""
    d = tmp_path_factory.mktemp('memserver')
    token_file = os.path.join(str(d), 'token')
    with open(token_file, 'wb') as f:
        f.write(TOKEN + b'\n')
    s = Server(['--port', '0', '--size', '64M', '--chunk-size', '16M', '--token-file',
                token_file], d)
    try:
        yield s
        s.stop_clean()
    finally:
        s.kill()


@pytest.fixture
def srv(server):
    """The module server, checked to be alive after each test."""
    server.assert_alive()
    yield server
    server.assert_alive()


# ---- a raw protocol client ----

class Pool:
    def __init__(self, payload):
        self.size, self.pool_id, n, self.flags = POOL_W.unpack_from(payload)
        assert len(payload) == POOL_W.size + n * REGION_W.size
        self.regions = []
        for i in range(n):
            addr, length, rkey, _ = REGION_W.unpack_from(payload, POOL_W.size + i * REGION_W.size)
            self.regions.append((addr, length, rkey))

    def resolve(self, off, length=1):
        """pool offset -> (remote address, rkey); the range must not cross a region."""
        base = 0
        for addr, rlen, rkey in self.regions:
            if base <= off < base + rlen:
                assert off + length <= base + rlen
                return addr + off - base, rkey
            base += rlen
        raise ValueError('offset outside the pool')


class Closed(Exception):
    pass


class Client:
    def __init__(self, port, host='127.0.0.1', timeout=TIMEOUT):
        self.s = socket.create_connection((host, port), timeout=timeout)
        self.s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.next_id = 1000
        self.pool = None

    def close(self):
        self.s.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def new_id(self):
        self.next_id += 1
        return self.next_id

    def frame(self, mtype, payload=b'', mid=None, length=None, magic=MAGIC, version=VERSION,
              status=0):
        mid = self.new_id() if mid is None else mid
        length = len(payload) if length is None else length
        return mid, HDR.pack(magic, version, mtype, status, length, mid) + payload

    def send(self, mtype, payload=b'', **kw):
        mid, data = self.frame(mtype, payload, **kw)
        self.s.sendall(data)
        return mid

    def recv_exact(self, n):
        chunks = []
        while n:
            try:
                c = self.s.recv(min(n, 1 << 20))
            except ConnectionResetError:
                c = b''
            if not c:
                raise Closed()
            chunks.append(c)
            n -= len(c)
        return b''.join(chunks)

    def recv_msg(self):
        magic, version, mtype, status, length, mid = HDR.unpack(self.recv_exact(HDR.size))
        assert magic == MAGIC and version == VERSION
        payload = self.recv_exact(length) if length else b''
        return mtype, status, mid, payload

    def expect(self, mtype, mid):
        rtype, status, rid, payload = self.recv_msg()
        assert rtype == mtype | RESP, 'response type %#x to %#x' % (rtype, mtype)
        assert rid == mid
        if status != OK:
            assert payload == b''
        return status, payload

    def call(self, mtype, payload=b'', **kw):
        return self.expect(mtype, self.send(mtype, payload, **kw))

    def is_closed(self, timeout=5):
        """True once the server closed the connection (any pending bytes are drained)."""
        self.s.settimeout(timeout)
        try:
            while True:
                if not self.s.recv(65536):
                    return True
        except ConnectionResetError:
            return True
        except socket.timeout:
            return False

    def hello(self, token_hash=TOKEN_HASH, client_id=0):
        status, payload = self.call(HELLO, HELLO_W.pack(token_hash, 0, 0, client_id))
        if status == OK:
            self.pool = Pool(payload)
        return status

    def read(self, addr, rkey, n):
        return self.call(READ, RW_W.pack(addr, rkey, n))

    def write(self, addr, rkey, data):
        return self.call(WRITE, RW_W.pack(addr, rkey, len(data)) + data)[0]

    def atomic(self, mtype, addr, rkey, compare_add, swap=0):
        status, payload = self.call(mtype, ATOMIC_W.pack(addr, rkey, 0, compare_add, swap))
        return status, (struct.unpack('>Q', payload)[0] if status == OK else None)

    def stats(self):
        status, payload = self.call(STATS)
        assert status == OK and len(payload) == 8 * len(STATS_FIELDS)
        return dict(zip(STATS_FIELDS, struct.unpack('>%dQ' % len(STATS_FIELDS), payload)))

    # pool-offset helpers
    def pwrite(self, off, data):
        addr, rkey = self.pool.resolve(off, len(data))
        return self.write(addr, rkey, data)

    def pread(self, off, n):
        addr, rkey = self.pool.resolve(off, n)
        status, data = self.read(addr, rkey, n)
        assert status == OK, status
        return data


def authed(server):
    c = Client(server.port)
    assert c.hello() == OK
    return c


# ---- command line ----

def test_ready_line_port0_and_sigterm(start):
    s = start('--port', '0', '--size', '64M')
    assert s.match.group('size') == '64.0 MiB'
    assert s.host == '127.0.0.1'
    assert s.port != 0
    with Client(s.port) as c:
        assert c.hello(ZERO_HASH) == OK     # no --token-file: any token is accepted
        assert c.pool.size == 64 << 20
        assert len(c.pool.regions) == 1
        assert c.pool.pool_id != 0
        assert c.pool.flags & POOL_PERSISTENT == 0
    t0 = time.monotonic()
    s.stop_clean()
    assert time.monotonic() - t0 < 5


def test_notify_socket(tmp_path):
    """Type=notify: READY=1 with the ready line as STATUS once the port listens,
    STOPPING=1 at SIGTERM, to the datagram socket in $NOTIFY_SOCKET (a path or,
    with '@', an abstract name)."""
    for name in (str(tmp_path / 'notify'), '@rmemfs-test-notify-%d' % os.getpid()):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        sock.bind('\0' + name[1:] if name.startswith('@') else name)
        sock.settimeout(30)
        s = None
        try:
            env = dict(daemon_env(), NOTIFY_SOCKET=name)
            s = MemServerProc(['--port', '0', '--size', '8M', '--transport', 'tcp'], tmp_path,
                              name='notified', env=env)
            ready = sock.recv(4096).decode()
            assert ready.startswith('READY=1\n'), ready
            assert ready == 'READY=1\nSTATUS=' + s.ready[len('memserver: '):], ready
            assert s.stop(signal.SIGTERM) == 0
            s = None
            assert sock.recv(4096) == b'STOPPING=1'
        finally:
            if s is not None:
                s.stop(signal.SIGKILL)
            sock.close()


def test_sigint_exits_zero(start):
    s = start('--port', '0', '--size', '8M', '--transport', 'tcp')
    assert s.match.group('rdma') == ' (rdma: off)'
    rc = s.stop(signal.SIGINT)
    assert rc == 0, s.stderr()


def test_defaults(start):
    # default size (1 GiB, mapped lazily) and address
    s = start('--port', '0')
    assert s.match.group('size') == '1.0 GiB'
    assert s.host == '127.0.0.1'
    with Client(s.port) as c:
        assert c.hello() == OK
        assert c.pool.size == 1 << 30
    s.stop_clean()
    # default port, only if nobody else is using it right now
    probe = socket.socket()
    try:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        probe.bind(('127.0.0.1', DEFAULT_PORT))
    except OSError:
        pytest.skip('port %d busy: default port not checked' % DEFAULT_PORT)
    finally:
        probe.close()
    s = start('--size', '8M')
    assert s.port == DEFAULT_PORT
    s.stop_clean()


def test_help_and_version():
    r = run_memserver(['--help'])
    assert r.returncode == 0
    for word in ('--size', '--listen', '--port', '--transport', '--token-file',
                 '--backing-file', '--hugepages', '--verbose', '--insecure', str(DEFAULT_PORT)):
        assert word in r.stdout
    r = run_memserver(['--version'])
    assert r.returncode == 0
    assert re.match(r'^memserver \(rmemfs\) \d+\.\d+', r.stdout)


@pytest.mark.parametrize('args,message', [
    (['--size', 'lots'], "--size 'lots' is not a size"),
    (['--size', '99999999T'], "--size '99999999T' is too large"),
    (['--size', '4K'], '--size must be at least 1M'),
    (['--port', '70000'], "--port '70000' is not a port number"),
    (['--port', '-1'], "--port '-1' is not a port number"),
    (['--port', '12ab'], "--port '12ab' is not a port number"),
    (['--transport', 'carrier-pigeon'], "--transport 'carrier-pigeon' is unknown"),
    (['--chunk-size', '3M'], "--chunk-size '3M' must be a power of two"),
    (['--chunk-size', '512K'], "--chunk-size '512K' must be a power of two"),
    (['--hello-timeout', '0'], "--hello-timeout '0' is not a number of seconds"),
    (['--hello-timeout', '1.5'], "--hello-timeout '1.5' is not a number of seconds"),
    (['--spin-us', 'fast'], "--spin-us 'fast' is not a number of microseconds"),
    (['--spin-us', '-5'], "--spin-us '-5' is not a number of microseconds"),
    (['--spin-us', '10001'], "--spin-us '10001' is not a number of microseconds"),
    (['--hugepages', '--backing-file', '/tmp/x'], 'cannot be combined'),
    (['--listen', ''], '--listen needs an address'),
    (['--listen', '0.0.0.0'], 'refusing to listen on 0.0.0.0 without --token-file'),
    (['--size'], '--size needs a value'),
    (['--frobnicate'], "unknown option '--frobnicate'"),
    (['extra'], "unexpected argument 'extra'"),
])
def test_bad_options(args, message):
    r = run_memserver(args + ['--port', '0'] if args[-1] != '--size' else args)
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert message in r.stderr, r.stderr
    assert r.stdout == ''


def test_bad_runtime_values(tmp_path):
    # too many regions for one descriptor
    r = run_memserver(['--port', '0', '--size', '2G', '--chunk-size', '1M'])
    assert r.returncode == 1 and 'regions' in r.stderr and 'larger chunk size' in r.stderr
    # not a page multiple
    r = run_memserver(['--port', '0', '--size', '1048577'])
    assert r.returncode == 1 and 'not a multiple of the page size' in r.stderr
    # token files
    r = run_memserver(['--port', '0', '--size', '8M', '--token-file', str(tmp_path / 'nope')])
    assert r.returncode == 1 and 'cannot read --token-file' in r.stderr
    assert 'No such file' in r.stderr
    empty = tmp_path / 'empty'
    empty.write_bytes(b'\n')
    r = run_memserver(['--port', '0', '--size', '8M', '--token-file', str(empty)])
    assert r.returncode == 1 and 'holds no token' in r.stderr
    # a backing file in a directory that does not exist
    r = run_memserver(['--port', '0', '--size', '8M', '--backing-file',
                       str(tmp_path / 'no' / 'such' / 'dir')])
    assert r.returncode == 1 and 'cannot open backing file' in r.stderr


def test_transport_rdma_without_rdma():
    r = run_memserver(['--port', '0', '--size', '8M', '--transport', 'rdma'])
    if r.returncode == 0 or 'rdma' in r.stdout:
        pytest.skip('this host serves RDMA')
    assert r.returncode != 0
    assert ('built without RDMA' in r.stderr or 'no RDMA device' in r.stderr or
            'memlock' in r.stderr or 'cannot serve RDMA' in r.stderr), r.stderr


def test_hugepages_error_or_ok(start):
    r = None
    try:
        s = start('--port', '0', '--size', '8M', '--hugepages')
    except AssertionError as e:
        r = str(e)
    if r is None:
        with Client(s.port) as c:
            assert c.hello() == OK
        s.stop_clean()
        return
    assert '/proc/sys/vm/nr_hugepages' in r, r


def test_port_busy(start):
    s = start('--port', '0', '--size', '8M')
    r = run_memserver(['--port', str(s.port), '--size', '8M'])
    assert r.returncode == 1
    assert 'port %d on 127.0.0.1 is already in use' % s.port in r.stderr
    assert '--port' in r.stderr
    s.stop_clean()


def test_verbose_logs_to_stderr_only(start):
    s = start('--port', '0', '--size', '8M', '--verbose')
    with Client(s.port) as c:
        assert c.hello() == OK
    deadline = time.monotonic() + 5
    while 'connected' not in s.stderr() and time.monotonic() < deadline:
        time.sleep(0.05)
    s.stop_clean()      # also checks that stdout held the ready line only
    assert 'DEBUG' in s.stderr() and 'connected' in s.stderr()


# ---- non-loopback listening, inside a private network namespace ----

NETNS_ADDR = '10.99.0.1'
NETNS_SETUP = 'ip link set lo up && ip addr add %s/32 dev lo && exec "$0" "$@"' % NETNS_ADDR


def netns_prefix():
    """run the command in a new network namespace that has only lo (+ NETNS_ADDR on it)"""
    return ['unshare', '-n', 'sh', '-c', NETNS_SETUP]


def have_netns():
    if not shutil.which('unshare') or not shutil.which('ip') or not shutil.which('nsenter'):
        return False
    r = subprocess.run(netns_prefix() + ['true'], capture_output=True, timeout=TIMEOUT)
    return r.returncode == 0


NETNS_CLIENT = r'''
import hashlib, socket, struct, sys
port, token = int(sys.argv[1]), sys.argv[2].encode()
h = hashlib.sha256(token).digest() if token else bytes(32)
s = socket.create_connection((sys.argv[3], port), timeout=10)
s.sendall(struct.pack('>IHHIIQ', 0x524D454D, 2, 1, 0, 48, 7) + struct.pack('>32sIIQ', h, 0, 0, 0))
hdr = b''
while len(hdr) < 24:
    c = s.recv(24 - len(hdr))
    if not c:
        break
    hdr += c
print(struct.unpack('>IHHIIQ', hdr)[3])
'''


@pytest.mark.skipif(not have_netns(), reason='no network namespaces (unshare -n) here')
def test_non_loopback_needs_token(start, tmp_path):
    # refused without a token, before anything is bound
    r = run_memserver(['--listen', NETNS_ADDR, '--port', '0', '--size', '8M'],
                      prefix=netns_prefix())
    assert r.returncode == 2
    assert 'refusing to listen on %s without --token-file' % NETNS_ADDR in r.stderr
    assert '--insecure' in r.stderr

    # --insecure: accepted, and so is 0.0.0.0 (the namespace has no other interface)
    s = start('--listen', '0.0.0.0', '--insecure', '--port', '0', '--size', '8M',
              prefix=netns_prefix())
    assert s.host == '0.0.0.0'
    s.stop_clean()

    # with a token: served; the right token is accepted and a wrong one refused
    token_file = tmp_path / 'token'
    token_file.write_bytes(TOKEN)
    s = start('--listen', NETNS_ADDR, '--port', '0', '--size', '8M', '--token-file',
              str(token_file), prefix=netns_prefix())
    assert s.host == NETNS_ADDR
    for token, status in ((TOKEN.decode(), OK), ('wrong', E_AUTH), ('', E_AUTH)):
        r = subprocess.run(['nsenter', '-t', str(s.proc.pid), '-n', sys.executable, '-c',
                            NETNS_CLIENT, str(s.port), token, NETNS_ADDR],
                           capture_output=True, text=True, timeout=TIMEOUT)
        assert r.returncode == 0, r.stderr
        assert int(r.stdout) == status
    s.stop_clean()
    assert 'wrong or missing token' in s.stderr()


# ---- protocol: authentication and state ----

def test_hello_ok_pool_descriptor(srv):
    with authed(srv) as c:
        p = c.pool
        assert p.size == 64 << 20
        assert len(p.regions) == 4
        assert all(length == 16 << 20 for _, length, _ in p.regions)
        # regions are the server's real addresses, laid end to end
        for (a0, l0, _), (a1, _, _) in zip(p.regions, p.regions[1:]):
            assert a1 == a0 + l0
        assert len({rkey for _, _, rkey in p.regions}) == 4
        # a second HELLO on the same connection gives the same descriptor
        old = (p.size, p.pool_id, p.regions)
        assert c.hello() == OK
        assert (c.pool.size, c.pool.pool_id, c.pool.regions) == old


def test_hello_wrong_token(srv):
    before = authed(srv).stats()['auth_failures']
    for h in (hashlib.sha256(b'wrong').digest(), ZERO_HASH, TOKEN_HASH[:-1] + b'\0'):
        with Client(srv.port) as c:
            assert c.hello(h) == E_AUTH
            assert c.is_closed()
    with authed(srv) as c:
        assert c.stats()['auth_failures'] == before + 3
    assert 'wrong or missing token' in srv.stderr()


def test_hello_malformed(srv):
    with Client(srv.port) as c:
        status, _ = c.call(HELLO, HELLO_W.pack(TOKEN_HASH, 0, 0, 0)[:-1])
        assert status == E_MALFORMED
        assert c.is_closed()


@pytest.mark.parametrize('mtype,payload', [
    (READ, RW_W.pack(0, 0, 8)),
    (WRITE, RW_W.pack(0, 0, 8) + b'x' * 8),
    (CAS, ATOMIC_W.pack(0, 0, 0, 0, 0)),
    (FETCH_ADD, ATOMIC_W.pack(0, 0, 0, 1, 0)),
    (PING, b'hi'),
    (STATS, b''),
    (0x42, b'unknown type'),    # an unknown type too: only an authenticated peer is kept
])
def test_request_before_hello(srv, mtype, payload):
    with Client(srv.port) as c:
        status, _ = c.call(mtype, payload)
        assert status == E_STATE
        assert c.is_closed()


def test_request_after_failed_hello_is_not_served(srv):
    with Client(srv.port) as c:
        c.s.sendall(c.frame(HELLO, HELLO_W.pack(ZERO_HASH, 0, 0, 0))[1] +
                    c.frame(READ, RW_W.pack(0, 0, 8))[1])
        rtype, status, _, _ = c.recv_msg()
        assert (rtype, status) == (HELLO | RESP, E_AUTH)
        assert c.is_closed()


def test_hello_deadline(start):
    """A connection that has not authenticated --hello-timeout after connecting is
    closed (silent, half a header, a trickle of bytes); an authenticated one is not."""
    s = start('--port', '0', '--size', '8M', '--hello-timeout', '1')
    t0 = time.monotonic()
    idle = Client(s.port)                       # connects and says nothing
    partial = Client(s.port)                    # half a header, then nothing
    partial.s.sendall(HDR.pack(MAGIC, VERSION, HELLO, 0, HELLO_W.size, 1)[:10])
    short = Client(s.port)                      # a HELLO whose payload never completes
    short.s.sendall(HDR.pack(MAGIC, VERSION, HELLO, 0, HELLO_W.size, 2) + b'x' * 8)
    trickle = Client(s.port)                    # one byte every 200 ms: the limit is total
    good = Client(s.port)
    clients = (idle, partial, short, trickle, good)
    try:
        assert good.hello() == OK
        hello = (HDR.pack(MAGIC, VERSION, HELLO, 0, HELLO_W.size, 3) +
                 HELLO_W.pack(ZERO_HASH, 0, 0, 0))
        trickle_closed = None
        for i in range(len(hello)):
            r, _, _ = select.select([trickle.s], [], [], 0.2)
            if r:
                try:
                    closed = not trickle.s.recv(4096)
                except ConnectionResetError:
                    closed = True
                if closed:
                    trickle_closed = time.monotonic() - t0
                    break
            try:
                trickle.s.sendall(hello[i:i + 1])
            except OSError:
                trickle_closed = time.monotonic() - t0
                break
        assert trickle_closed is not None, 'a trickling client outlived the HELLO deadline'
        assert 0.9 <= trickle_closed < 4, trickle_closed
        for c in (idle, partial, short):
            assert c.is_closed(timeout=5)
        assert time.monotonic() - t0 < 6
        # past the deadline, the authenticated connection is served as before
        assert good.call(PING, b'still here') == (OK, b'still here')
        assert good.stats()['auth_failures'] >= 4
        assert s.stderr().count('no HELLO within 1000 ms') >= 4
        s.stop_clean()
    finally:
        for c in clients:
            c.close()


@pytest.mark.parametrize('spin', ['0', '10000'])
def test_spin_us(start, spin):
    """A connection thread polling its quiet socket (--spin-us) serves requests
    that come while it polls and after it went to sleep alike, sees a client's
    close, and does not hold up the shutdown."""
    s = start('--port', '0', '--size', '8M', '--spin-us', spin)
    with authed(s) as c, authed(s) as other:
        addr, _, rkey = c.pool.regions[0]
        for i in range(200):                    # back to back: inside the spin
            data = struct.pack('>Q', i) * 64
            assert c.write(addr + 512 * (i % 16), rkey, data) == OK
            assert c.read(addr + 512 * (i % 16), rkey, 512) == (OK, data)
        time.sleep(0.05)                        # past the 10 ms spin: asleep
        assert c.read(addr, rkey, 8) == (OK, struct.pack('>Q', 192))
        assert other.call(PING, b'x') == (OK, b'x')
    # both closed while their threads poll or sleep; a new client is served
    with authed(s) as c:
        assert c.stats()['clients_total'] >= 3
    t0 = time.monotonic()
    s.stop_clean()
    assert time.monotonic() - t0 < 5


# ---- protocol: malformed messages ----

def test_bad_magic_closes(srv):
    before = authed(srv).stats()['bad_requests']
    with Client(srv.port) as c:
        c.send(PING, b'x', magic=0x12345678)
        assert c.is_closed()
    with authed(srv) as c:
        c.s.sendall(HDR.pack(MAGIC ^ 1, VERSION, PING, 0, 0, 1))
        assert c.is_closed()
    with authed(srv) as c:
        assert c.stats()['bad_requests'] >= before + 2


@pytest.mark.parametrize('version,hello', [
    (VERSION + 1, HELLO_W.pack(TOKEN_HASH, 0, 0, 0)),
    # version 1 had no client id: such a client could not be fenced, so it is refused
    (1, struct.pack('>32sII', TOKEN_HASH, 0, 0)),
])
def test_bad_version(srv, version, hello):
    with Client(srv.port) as c:
        mid = c.send(HELLO, hello, version=version)
        rtype, status, rid, payload = c.recv_msg()
        assert (rtype, status, rid, payload) == (HELLO | RESP, E_VERSION, mid, b'')
        assert c.is_closed()


@pytest.mark.parametrize('mtype,length', [
    (READ, 0xFFFFFFFF),
    (PING, MAX_CTRL + 1),
    (HELLO, 1 << 20),
    (WRITE, MAX_IO + RW_W.size + 1),
    (0x77, MAX_CTRL + 1),
])
def test_oversize_length(srv, mtype, length):
    with authed(srv) as c:
        mid = c.send(mtype, b'', length=length)
        status, _ = c.expect(mtype, mid)
        assert status == E_TOOBIG
        assert c.is_closed()


def test_truncated_then_close(srv):
    before = authed(srv).stats()['bad_requests']
    # half a header
    with authed(srv) as c:
        c.s.sendall(HDR.pack(MAGIC, VERSION, PING, 0, 100, 5)[:10])
        c.s.shutdown(socket.SHUT_WR)
        assert c.is_closed()
    # a header promising 100 bytes, 10 sent
    with authed(srv) as c:
        c.send(PING, b'0123456789', length=100)
        c.s.shutdown(socket.SHUT_WR)
        assert c.is_closed()
    # a WRITE whose data stops early: the bytes that came may land, nothing else happens
    with authed(srv) as c:
        addr, rkey = c.pool.resolve(1 << 20, 4096)
        c.s.sendall(HDR.pack(MAGIC, VERSION, WRITE, 0, RW_W.size + 4096, 9) +
                    RW_W.pack(addr, rkey, 4096) + b'z' * 1000)
        c.s.shutdown(socket.SHUT_WR)
        assert c.is_closed()
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        with authed(srv) as c:
            if c.stats()['bad_requests'] >= before + 3:
                break
        time.sleep(0.05)
    else:
        pytest.fail('truncated messages not counted as bad requests')


def test_unknown_type_is_answered_and_connection_continues(srv):
    with authed(srv) as c:
        for mtype in (0, 13, 0x42, 0x7FFF, PING | RESP):
            status, payload = c.call(mtype, b'payload to be skipped')
            assert (status, payload) == (E_UNSUPPORTED, b'')
        status, payload = c.call(PING, b'still here')
        assert (status, payload) == (OK, b'still here')


def test_ping_echo(srv):
    with authed(srv) as c:
        for n in (0, 1, 1000, MAX_CTRL):
            data = os.urandom(n)
            assert c.call(PING, data) == (OK, data)


def test_qp_exchange_without_rdma(srv):
    qp = QP_INFO_W.pack(1, 2, bytes(16), 3, 4, 1, 0)
    with Client(srv.port) as c:
        status, _ = c.call(QP_EXCHANGE, HELLO_W.pack(ZERO_HASH, 0, 0, 0) + qp)
        assert status == E_AUTH
        assert c.is_closed()
    with Client(srv.port) as c:
        status, _ = c.call(QP_EXCHANGE, HELLO_W.pack(TOKEN_HASH, 0, 0, 0) + qp[:-1])
        assert status == E_MALFORMED
        assert c.is_closed()
    if ', rdma ' in srv.ready:
        pytest.skip('this server serves RDMA: the exchange is tested by the RDMA suite')
    with Client(srv.port) as c:
        status, _ = c.call(QP_EXCHANGE, HELLO_W.pack(TOKEN_HASH, 0, 0, 0) + qp)
        assert status == E_UNSUPPORTED
        # the token was good: the connection is authenticated and goes on
        assert c.call(PING, b'ok') == (OK, b'ok')


# ---- protocol: one-sided operations and their checks ----

def test_write_read_roundtrip_sizes(srv):
    rnd = random.Random(7)
    with authed(srv) as c:
        region_len = c.pool.regions[0][1]
        for n in (1, 7, 8, 4095, 4096, 4097, 65536, 1 << 20, 3 << 20):
            for _ in range(2):
                region = rnd.randrange(4)
                off = region * region_len + rnd.randrange(region_len - n + 1)
                data = rnd.randbytes(n)
                assert c.pwrite(off, data) == OK
                assert c.pread(off, n) == data


def test_max_io(srv):
    with authed(srv) as c:
        addr, rkey = c.pool.resolve(32 << 20, MAX_IO)
        data = random.Random(3).randbytes(MAX_IO)
        assert c.write(addr, rkey, data) == OK
        status, back = c.read(addr, rkey, MAX_IO)
        assert status == OK and hashlib.sha256(back).digest() == hashlib.sha256(data).digest()
        status, _ = c.read(addr, rkey, MAX_IO + 1)
        assert status == E_TOOBIG
        assert c.call(PING, b'x') == (OK, b'x')


def test_wrong_key_and_out_of_range(srv):
    with authed(srv) as c:
        regions = c.pool.regions
        keys = {k for _, _, k in regions}
        bad_key = next(k for k in range(1, 100) if k not in keys)
        a0, l0, k0 = regions[0]
        a3, l3, k3 = regions[3]
        before = c.stats()['bad_requests']
        cases = [
            ((a0, bad_key, 8), E_KEY),
            ((a0 + l0 - 4, k0, 8), E_RANGE),           # crosses into region 1
            ((a0 + l0, k0, 1), E_RANGE),               # region 1's byte with region 0's key
            ((a0 - 1, k0, 1), E_RANGE),
            ((a3 + l3, k3, 1), E_RANGE),               # one past the pool
            ((a3 + l3 - 1, k3, 1), OK),                # the pool's last byte
            ((0xFFFFFFFFFFFFFFFF, k0, 2), E_RANGE),    # wraps around
            ((a0 + 8, k0, 0xFFFFFFF0), E_TOOBIG),
        ]
        for (addr, rkey, n), want in cases:
            status, _ = c.read(addr, rkey, n)
            assert status == want, (hex(addr), rkey, n)
            if want in (E_KEY, E_RANGE):
                # a WRITE with the same fault: its data is read and dropped
                assert c.write(addr, rkey, b'w' * n) == want
        # the connection is still in step after all those refusals
        assert c.call(PING, b'sync') == (OK, b'sync')
        assert c.stats()['bad_requests'] >= before + 11
        # pool data next to the refused ranges is untouched by refused WRITEs
        assert c.write(a0 + l0 - 8, k0, b'A' * 8) == OK
        assert c.write(regions[1][0], regions[1][2], b'B' * 8) == OK
        assert c.write(a0 + l0 - 4, k0, b'X' * 8) == E_RANGE
        assert c.pread(l0 - 8, 8) == b'A' * 8
        assert c.pread(l0, 8) == b'B' * 8


def test_rw_malformed(srv):
    with authed(srv) as c:
        addr, rkey = c.pool.resolve(0, 16)
        # READ payload of the wrong size
        status, _ = c.call(READ, RW_W.pack(addr, rkey, 8) + b'extra')
        assert status == E_MALFORMED
        # WRITE whose rw.len disagrees with the data that follows
        status, _ = c.call(WRITE, RW_W.pack(addr, rkey, 100) + b'x' * 10)
        assert status == E_MALFORMED
        # WRITE shorter than its rw header
        status, _ = c.call(WRITE, b'short')
        assert status == E_MALFORMED
        status, _ = c.call(CAS, ATOMIC_W.pack(addr, rkey, 0, 0, 0)[:-1])
        assert status == E_MALFORMED
        assert c.call(PING, b'sync') == (OK, b'sync')


def test_atomics(srv):
    with authed(srv) as c:
        off = 5 << 20
        addr, rkey = c.pool.resolve(off, 64)
        assert c.write(addr, rkey, struct.pack('=Q', 41) + bytes(8)) == OK
        assert c.atomic(CAS, addr, rkey, 41, 100) == (OK, 41)       # match: swapped
        assert c.atomic(CAS, addr, rkey, 41, 200) == (OK, 100)      # mismatch: unchanged
        assert c.atomic(FETCH_ADD, addr, rkey, 5) == (OK, 100)
        assert c.atomic(FETCH_ADD, addr, rkey, (1 << 64) - 105) == (OK, 105)   # wraps to 0
        assert c.pread(off, 8) == struct.pack('=Q', 0)
        for mis in range(1, 8):
            assert c.atomic(CAS, addr + mis, rkey, 0, 1) == (E_ALIGN, None)
            assert c.atomic(FETCH_ADD, addr + mis, rkey, 1) == (E_ALIGN, None)
        assert c.pread(off, 16) == bytes(16)
        a3, l3, k3 = c.pool.regions[3]
        assert c.write(a3 + l3 - 8, k3, bytes(8)) == OK
        assert c.atomic(FETCH_ADD, a3 + l3, k3, 1)[0] == E_RANGE
        assert c.atomic(FETCH_ADD, a3 + l3 - 8, k3, 1) == (OK, 0)
        assert c.atomic(CAS, addr, k3 ^ 0x5A5A5A5A, 0, 1)[0] == E_KEY


def test_pipelined_requests(srv):
    """200 requests in one send, an error in the middle: responses come back in order."""
    rnd = random.Random(11)
    with authed(srv) as c:
        base = 6 << 20
        blobs = [rnd.randbytes(rnd.randrange(1, 9000)) for _ in range(100)]
        frames, expect = [], []
        for i, b in enumerate(blobs):
            addr, rkey = c.pool.resolve(base + i * 9000, len(b))
            mid, f = c.frame(WRITE, RW_W.pack(addr, rkey, len(b)) + b)
            frames.append(f)
            expect.append((WRITE, mid, OK, b''))
        mid, f = c.frame(READ, RW_W.pack(0, 0, 8))
        frames.append(f)
        expect.append((READ, mid, E_KEY, b''))
        for i, b in enumerate(blobs):
            addr, rkey = c.pool.resolve(base + i * 9000, len(b))
            mid, f = c.frame(READ, RW_W.pack(addr, rkey, len(b)))
            frames.append(f)
            expect.append((READ, mid, OK, b))
        # READ, then WRITE over the same bytes, then READ: each READ sees its own moment
        addr, rkey = c.pool.resolve(base, 4)
        for data in (b'1111', b'2222'):
            mid, f = c.frame(WRITE, RW_W.pack(addr, rkey, 4) + data)
            frames.append(f)
            expect.append((WRITE, mid, OK, b''))
            mid, f = c.frame(READ, RW_W.pack(addr, rkey, 4))
            frames.append(f)
            expect.append((READ, mid, OK, data))
        sender = threading.Thread(target=c.s.sendall, args=(b''.join(frames),))
        sender.start()
        try:
            for mtype, mid, status, payload in expect:
                rtype, rstatus, rid, rpayload = c.recv_msg()
                assert (rtype, rid, rstatus) == (mtype | RESP, mid, status)
                assert rpayload == payload
        finally:
            sender.join(TIMEOUT)


def test_stats_counts(srv):
    with authed(srv) as c:
        s0 = c.stats()
        assert c.pwrite(7 << 20, b'q' * 100) == OK
        c.pread(7 << 20, 50)
        addr, rkey = c.pool.resolve(7 << 20, 8)
        c.atomic(FETCH_ADD, addr, rkey, 1)
        s1 = c.stats()
        assert s1['writes'] == s0['writes'] + 1
        assert s1['reads'] == s0['reads'] + 1
        assert s1['atomics'] == s0['atomics'] + 1
        assert s1['bytes_written'] == s0['bytes_written'] + 100
        assert s1['bytes_read'] == s0['bytes_read'] + 50
        assert s1['clients_now'] >= 1
        assert s1['clients_total'] >= s1['clients_now']


# ---- many clients ----

def test_many_concurrent_clients(srv):
    n = 60
    barrier = threading.Barrier(n, timeout=30)
    counter_off = 8 << 20
    with authed(srv) as c:
        addr, rkey = c.pool.resolve(counter_off, 8)
        assert c.write(addr, rkey, bytes(8)) == OK
    errors = []

    def client(i):
        try:
            with authed(srv) as c:
                barrier.wait()
                if i == 0:
                    assert c.stats()['clients_now'] >= n
                barrier.wait()
                data = random.Random(i).randbytes(65536)
                off = (9 << 20) + i * 65536
                for _ in range(5):
                    assert c.pwrite(off, data) == OK
                    assert c.pread(off, len(data)) == data
                a, k = c.pool.resolve(counter_off, 8)
                for _ in range(50):
                    assert c.atomic(FETCH_ADD, a, k, 1)[0] == OK
                # CAS loop increments too
                for _ in range(10):
                    cur = struct.unpack('=Q', c.pread(counter_off, 8))[0]
                    while True:
                        st, old = c.atomic(CAS, a, k, cur, cur + 1)
                        assert st == OK
                        if old == cur:
                            break
                        cur = old
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append((i, repr(e)))
            barrier.abort()

    threads = [threading.Thread(target=client, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors[:5]
    with authed(srv) as c:
        assert struct.unpack('=Q', c.pread(counter_off, 8))[0] == n * 60


def garbage_connection(port, rnd, pool):
    """One misbehaving client; returns nothing, tolerates any socket error."""
    kind = rnd.randrange(8)
    try:
        s = socket.create_connection(('127.0.0.1', port), timeout=5)
    except OSError:
        return
    try:
        a0, l0, k0 = pool.regions[0]
        if kind == 0:       # pure noise
            s.sendall(rnd.randbytes(rnd.randrange(1, 8192)))
        elif kind == 1:     # valid magic and version, random everything else
            s.sendall(struct.pack('>IHHIIQ', MAGIC, VERSION, rnd.randrange(1 << 16),
                                  rnd.randrange(1 << 32), rnd.randrange(1 << 32),
                                  rnd.randrange(1 << 64)) + rnd.randbytes(rnd.randrange(256)))
        elif kind == 2:     # authenticated, then noise
            s.sendall(HDR.pack(MAGIC, VERSION, HELLO, 0, HELLO_W.size, 1) + HELLO_W.pack(TOKEN_HASH, 0, 0, 0)
                      + rnd.randbytes(rnd.randrange(1, 4096)))
        elif kind == 3:     # authenticated, then well-framed ops with random fields (region 0)
            out = HDR.pack(MAGIC, VERSION, HELLO, 0, HELLO_W.size, 1) + HELLO_W.pack(TOKEN_HASH, 0, 0, 0)
            for i in range(rnd.randrange(1, 40)):
                t = rnd.choice((READ, WRITE, CAS, FETCH_ADD, PING, STATS))
                addr = a0 + rnd.randrange(-4096, l0 + 4096) if rnd.random() < 0.7 \
                    else rnd.randrange(1 << 64)
                key = k0 if rnd.random() < 0.7 else rnd.randrange(1 << 32)
                if t == READ:
                    p = RW_W.pack(addr, key, rnd.randrange(0, 70000))
                elif t == WRITE:
                    n = rnd.randrange(0, 3000)
                    p = RW_W.pack(addr, key, n) + rnd.randbytes(n)
                elif t in (CAS, FETCH_ADD):
                    p = ATOMIC_W.pack(addr, key, 0, rnd.randrange(1 << 64), rnd.randrange(1 << 64))
                else:
                    p = rnd.randbytes(rnd.randrange(100))
                out += HDR.pack(MAGIC, VERSION, t, 0, len(p), i) + p
            s.sendall(out)
        elif kind == 4:     # a header that promises more than is ever sent
            s.sendall(HDR.pack(MAGIC, VERSION, HELLO, 0, HELLO_W.size, 1) + HELLO_W.pack(TOKEN_HASH, 0, 0, 0)
                      + HDR.pack(MAGIC, VERSION, WRITE, 0, RW_W.size + 100000, 2)
                      + RW_W.pack(a0, k0, 100000) + rnd.randbytes(rnd.randrange(5000)))
        elif kind == 5:     # connect and vanish
            pass
        elif kind == 6:     # half a header, then reset
            s.sendall(HDR.pack(MAGIC, VERSION, PING, 0, 10, 3)[:rnd.randrange(1, 24)])
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack('ii', 1, 0))
        else:               # garbage, and read whatever comes back until the server closes
            s.sendall(rnd.randbytes(rnd.randrange(24, 200)))
            s.settimeout(5)
            while s.recv(4096):
                pass
        if rnd.random() < 0.5:
            s.shutdown(socket.SHUT_WR)
            s.settimeout(2)
            while s.recv(65536):
                pass
    except OSError:
        pass
    finally:
        s.close()


def test_garbage_while_good_client_works(srv):
    stop = threading.Event()
    good = {'ops': 0, 'errors': []}
    region3 = 48 << 20   # the well-behaved client's area; garbage only aims at region 0

    def well_behaved():
        rnd = random.Random(99)
        try:
            with authed(srv) as c:
                while not stop.is_set():
                    n = rnd.randrange(1, 70000)
                    off = region3 + rnd.randrange((16 << 20) - n)
                    data = rnd.randbytes(n)
                    if c.pwrite(off, data) != OK:
                        good['errors'].append('write failed')
                    elif c.pread(off, n) != data:
                        good['errors'].append('read back differs at %d+%d' % (off, n))
                    good['ops'] += 1
        except Exception as e:  # noqa: BLE001 - reported below
            good['errors'].append(repr(e))

    with authed(srv) as c:
        pool = c.pool
        before = c.stats()['bad_requests']
    t = threading.Thread(target=well_behaved)
    t.start()
    try:
        master = random.Random(2024)
        seeds = [master.randrange(1 << 30) for _ in range(200)]
        with ThreadPoolExecutor(max_workers=8) as ex:
            list(ex.map(lambda seed: garbage_connection(srv.port, random.Random(seed), pool),
                        seeds))
    finally:
        stop.set()
        t.join(TIMEOUT)
    srv.assert_alive()
    assert not good['errors'], good['errors'][:5]
    assert good['ops'] > 0
    print('well-behaved client: %d verified round trips during the garbage' % good['ops'])
    with authed(srv) as c:
        assert c.call(PING, b'alive') == (OK, b'alive')
        assert c.stats()['bad_requests'] > before + 50


# ---- shutdown and persistence ----

def test_sigterm_with_clients_connected(start):
    s = start('--port', '0', '--size', '8M')
    idle = Client(s.port)                       # never says HELLO
    ready = Client(s.port)
    assert ready.hello() == OK
    mid_write = Client(s.port)                  # blocked in the middle of a WRITE's data
    assert mid_write.hello() == OK
    addr, rkey = mid_write.pool.resolve(0, 1 << 20)
    mid_write.s.sendall(HDR.pack(MAGIC, VERSION, WRITE, 0, RW_W.size + (1 << 20), 5) +
                        RW_W.pack(addr, rkey, 1 << 20) + b'x' * 1000)
    time.sleep(0.2)
    try:
        t0 = time.monotonic()
        s.stop_clean()
        assert time.monotonic() - t0 < 5
        for c in (idle, ready, mid_write):
            assert c.is_closed()
    finally:
        for c in (idle, ready, mid_write):
            c.close()


def test_backing_file_survives_restart(start, tmp_path):
    path = str(tmp_path / 'pool.img')
    s = start('--port', '0', '--size', '8M', '--chunk-size', '2M', '--backing-file', path)
    data = random.Random(5).randbytes(300000)
    off = (2 << 20) - 1000                      # spans regions 0 and 1
    with Client(s.port) as c:
        assert c.hello() == OK
        assert c.pool.flags & POOL_PERSISTENT
        pool_id = c.pool.pool_id
        assert c.pwrite(off, data[:1000]) == OK
        assert c.pwrite(off + 1000, data[1000:]) == OK
        addr, rkey = c.pool.resolve(4 << 20, 8)
        assert c.atomic(FETCH_ADD, addr, rkey, 12345) == (OK, 0)
    s.stop_clean()
    assert os.path.getsize(path) == (8 << 20) + 4096

    # a second server may not share the file while one runs
    s = start('--port', '0', '--size', '8M', '--chunk-size', '2M', '--backing-file', path)
    r = run_memserver(['--port', '0', '--size', '8M', '--backing-file', path])
    assert r.returncode == 1 and 'in use by another memserver' in r.stderr
    with Client(s.port) as c:
        assert c.hello() == OK
        assert c.pool.pool_id == pool_id
        assert c.pool.flags & POOL_PERSISTENT
        assert c.pread(off, 1000) + c.pread(off + 1000, len(data) - 1000) == data
        assert struct.unpack('=Q', c.pread(4 << 20, 8))[0] == 12345
    s.stop_clean()

    # another size is refused, and the file is left alone
    r = run_memserver(['--port', '0', '--size', '16M', '--backing-file', path])
    assert r.returncode == 1
    assert 'holds a pool of 8.0 MiB' in r.stderr and '--size 8M' in r.stderr
    assert os.path.getsize(path) == (8 << 20) + 4096

    # a file that is not a pool is not taken over
    junk = tmp_path / 'junk'
    junk.write_bytes(b'do not overwrite me')
    r = run_memserver(['--port', '0', '--size', '8M', '--backing-file', str(junk)])
    assert r.returncode == 1 and 'not a memserver pool file' in r.stderr
    assert junk.read_bytes() == b'do not overwrite me'


# ---- fencing (PROTO_FENCE) ----

ID_A, ID_B = 0xA11CE00000000001, 0xB0B0000000000002


def fence_payload(victim):
    return struct.pack('>Q', victim)


def test_fence_revokes_and_refuses(start):
    """FENCE(A) from B: every connection presenting A fails its next write with
    E_FENCED and is closed, A's bytes stay as they were, a new connection with A is
    refused; B and a client without an id (0) go on."""
    s = start('--port', '0', '--size', '16M')
    a1, a2, b, z = (Client(s.port) for _ in range(4))
    try:
        assert a1.hello(client_id=ID_A) == OK
        assert a2.hello(client_id=ID_A) == OK
        assert b.hello(client_id=ID_B) == OK
        assert z.hello() == OK
        assert a1.pwrite(4096, b'A' * 4096) == OK          # before the fence: lands
        addr, rkey = a1.pool.resolve(8192, 8)
        assert a1.atomic(FETCH_ADD, addr, rkey, 5) == (OK, 0)

        assert b.call(FENCE, fence_payload(ID_A)) == (OK, b'')

        assert a1.pwrite(4096, b'X' * 4096) == E_FENCED
        assert a1.is_closed()
        assert a2.atomic(CAS, addr, rkey, 5, 99) == (E_FENCED, None)
        assert a2.is_closed()
        assert b.pread(4096, 4096) == b'A' * 4096
        assert struct.unpack('=Q', b.pread(8192, 8))[0] == 5
        with Client(s.port) as again:
            assert again.hello(client_id=ID_A) == E_FENCED
            assert again.is_closed()
        assert b.pwrite(4096, b'B' * 4096) == OK
        assert b.atomic(CAS, addr, rkey, 5, 6) == (OK, 5)
        assert z.pwrite(0, b'Z' * 10) == OK
        assert z.pread(4096, 4096) == b'B' * 4096
        # fencing again is harmless; the set survives its connections
        assert z.call(FENCE, fence_payload(ID_A)) == (OK, b'')
    finally:
        for c in (a1, a2, b, z):
            c.close()
    assert 'fenced: 2 connection(s) revoked' in s.stderr()
    s.stop_clean()


def test_fence_malformed(start):
    s = start('--port', '0', '--size', '16M')
    with Client(s.port) as c:
        assert c.hello(client_id=ID_B) == OK
        assert c.call(FENCE, b'\x01' * 7) == (E_MALFORMED, b'')
        assert c.call(FENCE, b'\x01' * 9) == (E_MALFORMED, b'')
        assert c.call(FENCE, fence_payload(0)) == (E_MALFORMED, b'')   # 0: no lease holder
        assert c.call(FENCE, fence_payload(ID_B)) == (E_STATE, b'')    # itself
        assert c.pwrite(0, b'still served') == OK
    assert 'malformed FENCE (7 bytes' in s.stderr()
    with Client(s.port) as c:                     # only after HELLO
        assert c.call(FENCE, fence_payload(ID_A)) == (E_STATE, b'')
        assert c.is_closed()
    s.stop_clean()


def test_fence_cuts_a_stalled_write(start):
    """A WRITE of the victim stalled mid-payload does not hold the FENCE reply up for
    long, and nothing the victim sends after the reply reaches the pool."""
    s = start('--port', '0', '--size', '16M')
    a, b = Client(s.port), Client(s.port)
    try:
        assert a.hello(client_id=ID_A) == OK
        assert b.hello(client_id=ID_B) == OK
        n = 1 << 20
        addr, rkey = a.pool.resolve(1 << 20, n)
        a.s.sendall(HDR.pack(MAGIC, VERSION, WRITE, 0, RW_W.size + n, 5) +
                    RW_W.pack(addr, rkey, n) + b'x' * 4096)
        time.sleep(0.3)                             # the server is receiving into the pool
        t0 = time.monotonic()
        assert b.call(FENCE, fence_payload(ID_A)) == (OK, b'')
        assert time.monotonic() - t0 < 3
        try:
            a.s.sendall(b'y' * (n - 4096))
        except OSError:
            pass
        time.sleep(0.2)
        got = b.pread(1 << 20, n)
        assert got[4096:] == bytes(n - 4096), 'a write of the fenced client landed'
        assert got[:4096] in (b'x' * 4096, bytes(4096)) or set(got[:4096]) <= {0, ord('x')}
    finally:
        a.close()
        b.close()
    assert 'stalled mid-payload' in s.stderr()
    s.stop_clean()
