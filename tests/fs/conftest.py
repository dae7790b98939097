# SPDX-License-Identifier: GPL-2.0-or-later
"""Fixtures of the filesystem integration suite: a real memserver and a real
rmemfs mount (tests/fs, run by meson as suite 'fs' with RMEM_BUILD_DIR set).

Environment:
  RMEM_BUILD_DIR       the meson build directory (memserver/, fuse-client/)
  RMEM_TEST_TRANSPORT  tcp (default) or rdma: the -o transport= of every mount
  RMEM_TEST_HOST       address the memserver listens on (default 127.0.0.1;
                       the RDMA VM harness uses 10.77.0.1)
  RMEM_TEST_SCALE      multiplies the sizes and counts of heavy tests
                       (default 1; e.g. 0.1 under emulated RDMA)
  RMEM_TEST_CHANNEL    dev (default) or uring: the FUSE channel of every mount
                       the fixtures make (-o uring=off / -o uring=on); with
                       uring the session sets the fuse module's enable_uring
                       (root) and puts the old value back at its end, and
                       every test skips where the kernel has no FUSE ring

What the suite assumes of the machine, each checked where it is used (a
test skips with the reason when it is absent): /dev/fuse that this process
can open (all tests), root for mounting tmpfs/mount.fuse3, device nodes and
switching users (setpriv, or subprocess user=/extra_groups= with numeric ids
that need no passwd entry: 65534, 4242...), a set-user-ID fusermount3 and
/dev/fuse open to users for the unprivileged mount (granted for that test and
restored if not), loopback TCP on ephemeral ports. /etc/fuse.conf is not
needed (user mounts do not use allow_other).

Every daemon runs with G_DEBUG=fatal-warnings, and a test fails when one of
them printed a GLib WARNING/CRITICAL. Teardown always unmounts lazily and
kills what it started, even when the test failed.
"""
import contextlib
import ctypes
import ctypes.util
import errno
import os
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time

import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from rmemtest import (EXIT_TIMEOUT, MemServerProc, OutputPump, daemon_env,  # noqa: E402,F401
                      log_warnings, stop_process)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), 'scripts', 'lib'))
from memcg import MemCgroup  # noqa: E402,F401

BUILD = os.environ.get('RMEM_BUILD_DIR', '')
TRANSPORT = os.environ.get('RMEM_TEST_TRANSPORT', 'tcp')
HOST = os.environ.get('RMEM_TEST_HOST', '127.0.0.1')
SCALE = float(os.environ.get('RMEM_TEST_SCALE', '1'))
CHANNEL = os.environ.get('RMEM_TEST_CHANNEL', 'dev')
URING_PARAM = '/sys/module/fuse/parameters/enable_uring'

# A test whose requests are the same over every transport (a set's refusals, capacity,
# records, a crash's intent map, fsck; the metadata's remount equality): over RDMA (scripts/test-rdma.sh, emulated rxe, about 15 times
# slower for a set) it skips, and runs over TCP in the main and the ASan builds.
pool_logic_only = pytest.mark.skipif(TRANSPORT == 'rdma',
                                     reason='the same code over every transport: runs over TCP')

MOUNT_TIMEOUT = 30.0      # seconds for a mount to appear (takeover needs ~10 s)


def scaled(n, minimum=1):
    return max(minimum, int(n * SCALE))


def binary(rel):
    path = os.path.join(BUILD, rel)
    if not BUILD or not os.access(path, os.X_OK):
        pytest.fail(f'{rel} not built (RMEM_BUILD_DIR={BUILD!r})')
    return path


def fuse_unavailable():
    """Why FUSE mounts cannot work here, or None."""
    if not os.path.exists('/dev/fuse'):
        return 'no /dev/fuse'
    try:
        os.close(os.open('/dev/fuse', os.O_RDWR))
    except OSError as e:
        return f'/dev/fuse: {e.strerror}'
    if os.geteuid() != 0 and not shutil.which('fusermount3'):
        return 'no fusermount3 (and not root)'
    return None


def uring_unavailable():
    """Why the FUSE ring cannot be switched on here, or None."""
    if not os.path.exists(URING_PARAM):
        return f'no {URING_PARAM} (a kernel without FUSE over io_uring)'
    if os.geteuid() != 0:
        return f'{URING_PARAM} needs root to be set'
    return None


@contextlib.contextmanager
def enable_uring(value='Y'):
    """The fuse module's enable_uring set to value for the block, then put back."""
    with open(URING_PARAM) as f:
        old = f.read().strip()
    with open(URING_PARAM, 'w') as f:
        f.write(value)
    try:
        yield
    finally:
        with open(URING_PARAM, 'w') as f:
            f.write(old)


def pytest_collection_modifyitems(config, items):
    why = fuse_unavailable()
    if not why and CHANNEL == 'uring':
        why = uring_unavailable()
        why = why and f'the FUSE ring: {why}'
    if why:
        for item in items:
            item.add_marker(pytest.mark.skip(reason=f'FUSE unavailable: {why}'))


@pytest.fixture(scope='session', autouse=True)
def fuse_channel():
    """RMEM_TEST_CHANNEL=uring: the ring is on for the whole session."""
    if CHANNEL != 'uring' or uring_unavailable():
        yield
        return
    with enable_uring('Y'):
        yield


class MemServer:
    """A real memserver on an ephemeral port with a token."""

    def __init__(self, workdir, size='64M', backing_file=None, name='memserver', args=(),
                 token_file=None):
        self.workdir = workdir
        self.size = size
        self.backing_file = backing_file
        self.args = list(args)
        self.name = name
        self.token_file = token_file or os.path.join(workdir, f'{name}.token')
        self.log_path = os.path.join(workdir, f'{name}.log')  # its stderr (MemServerProc)
        self.proc = None
        self.pump = None
        self.port = None
        if not token_file:
            with open(self.token_file, 'w') as f:
                f.write(os.urandom(16).hex() + '\n')
            os.chmod(self.token_file, 0o600)

    @property
    def addr(self):
        host = f'[{HOST}]' if ':' in HOST else HOST
        return f'{host}:{self.port}'

    def start(self):
        """Start (again: on the port it had, with its pool file if any)."""
        args = ['--size', self.size, '--listen', HOST, '--port', str(self.port or 0),
                '--token-file', self.token_file,
                '--transport', 'tcp' if TRANSPORT == 'tcp' else 'auto']
        if self.backing_file:
            args += ['--backing-file', self.backing_file]
        binary('memserver/memserver')
        try:
            self.ms = MemServerProc(args + self.args, self.workdir, name=self.name)
        except AssertionError as e:
            pytest.fail(str(e))
        self.proc = self.ms.proc
        self.pump = self.ms.err
        self.port = self.ms.port
        return self

    def stop(self, sig=signal.SIGTERM):
        if self.proc:
            self.ms.stop(sig)

    def warnings(self):
        return log_warnings(self.pump.text()) if self.pump else []


class MemberSet:
    """Several memservers sharing one token, addressed as one rmemfs server
    argument (HOST:PORT,HOST:PORT,...): what Rmemfs needs of a server."""

    def __init__(self, members):
        self.members = list(members)
        self.workdir = self.members[0].workdir
        self.token_file = self.members[0].token_file

    @property
    def addr(self):
        return ','.join(m.addr for m in self.members)


def is_mounted(path):
    path = os.path.realpath(path)
    with open('/proc/self/mountinfo') as f:
        for line in f:
            fields = line.split()
            mnt = fields[4].encode().decode('unicode_escape')
            if mnt == path:
                return True
    return False


def lazy_unmount(path):
    if not is_mounted(path):
        return
    for cmd in (['fusermount3', '-u', '-z', path], ['umount', '-l', path]):
        if shutil.which(cmd[0]):
            subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           timeout=30)
            if not is_mounted(path):
                return


def daemons_of(mountpoint):
    """pids of the rmemfs processes serving mountpoint (by their command line)."""
    pids = []
    for pid in filter(str.isdigit, os.listdir('/proc')):
        try:
            with open(f'/proc/{pid}/cmdline', 'rb') as f:
                args = f.read().split(b'\0')
        except OSError:
            continue
        if args and os.path.basename(args[0]) == b'rmemfs' and mountpoint.encode() in args:
            pids.append(int(pid))
    return pids


def reap_untracked(mountpoint, timeout=EXIT_TIMEOUT):
    """After the unmount of a daemon the test did not start itself (daemon
    mode, mount.fuse3): wait for it to finish its unmount before the memserver
    goes (else it waits reconnect_timeout for the pool), then kill what is left."""
    lazy_unmount(mountpoint)
    if not wait_for(lambda: not daemons_of(mountpoint), timeout=timeout):
        for pid in daemons_of(mountpoint):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)


def unmount(path):
    """A normal (non-lazy) unmount; returns the tool's result."""
    if os.geteuid() == 0:
        cmd = ['umount', path]
    else:
        cmd = ['fusermount3', '-u', path]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60)


class MountFailed(Exception):
    pass


class Rmemfs:
    """One rmemfs process (foreground, -f) mounting a memserver's pool."""

    def __init__(self, server, mountpoint, options=(), name='rmemfs', extra_args=(),
                 extra_env=None):
        self.server = server
        self.mountpoint = mountpoint
        self.options = list(options)
        self.extra_args = list(extra_args)
        self.extra_env = dict(extra_env or {})
        self.log_path = os.path.join(server.workdir, f'{name}.log')
        self.proc = None
        self.pump = None

    def command(self, foreground=True):
        opts = [f'transport={TRANSPORT}', f'token_file={self.server.token_file}',
                'uring=on' if CHANNEL == 'uring' else 'uring=off'] + self.options
        cmd = [binary('fuse-client/rmemfs'), self.server.addr, self.mountpoint]
        if foreground:
            cmd.append('-f')
        return cmd + self.extra_args + ['-o', ','.join(opts)]

    def start(self, wait=True, timeout=MOUNT_TIMEOUT):
        self.proc = subprocess.Popen(self.command(), stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     env={**daemon_env(), **self.extra_env})
        self.pump = OutputPump(self.proc.stdout, self.log_path)
        if wait:
            self.wait_mounted(timeout)
        return self

    def wait_mounted(self, timeout=MOUNT_TIMEOUT):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if is_mounted(self.mountpoint):
                return
            if self.proc.poll() is not None:
                self.pump.join()
                raise MountFailed(f'rmemfs exited with {self.proc.returncode}:\n'
                                  f'{self.pump.text()}')
            time.sleep(0.05)
        raise MountFailed(f'no mount on {self.mountpoint} after {timeout} s:\n{self.pump.text()}')

    def unmount(self):
        """Clean unmount; returns rmemfs's exit status."""
        r = unmount(self.mountpoint)
        assert r.returncode == 0, f'umount failed: {r.stderr}'
        try:
            self.proc.wait(EXIT_TIMEOUT)
        except subprocess.TimeoutExpired:
            pytest.fail(f'rmemfs did not exit after unmount:\n{self.pump.text()}')
        self.pump.join()
        return self.proc.returncode

    def kill9(self):
        self.proc.kill()
        self.proc.wait(10)
        self.pump.join()
        lazy_unmount(self.mountpoint)

    def cleanup(self):
        lazy_unmount(self.mountpoint)
        if self.proc:
            stop_process(self.proc, signal.SIGTERM, 10)
            self.pump.join()

    def output(self):
        return self.pump.text() if self.pump else ''

    def warnings(self):
        return log_warnings(self.output())


def make_mountpoint(prefix='rmemfs-mnt-'):
    # world-traversable (tmp_path is 0700): the permission tests enter it as nobody
    d = tempfile.mkdtemp(prefix=prefix, dir='/tmp')
    os.chmod(d, 0o755)
    return d


class Env:
    """What a test gets: a workdir, servers and mounts it started, torn down at the end."""

    def __init__(self, workdir):
        self.workdir = workdir
        self.servers = []
        self.mounts = []
        self.mountpoints = []
        self.expected_warnings = False

    def server(self, size='64M', **kw):
        s = MemServer(self.workdir, size=size, name=f'memserver{len(self.servers)}', **kw)
        self.servers.append(s)
        return s.start()

    def member_set(self, n, size='64M', backed=()):
        """n memservers with one token (each stopped at teardown like any server);
        the ones whose index is in backed keep their pool in a file (member<i>.img)."""
        members = []
        for i in range(n):
            file = os.path.join(self.workdir, f'member{i}.img') if i in backed else None
            members.append(self.server(size, backing_file=file,
                                       token_file=members[0].token_file if members else None))
        return MemberSet(members)

    def mountpoint(self):
        d = make_mountpoint()
        self.mountpoints.append(d)
        return d

    def rmemfs(self, server, mountpoint=None, options=(), start=True, extra_args=(),
               caches=False, extra_env=None):
        """caches=False adds entry_timeout=0,attr_timeout=0 (the filesystem under test)."""
        mnt = mountpoint or self.mountpoint()
        opts = list(options)
        if not caches:
            opts += ['entry_timeout=0', 'attr_timeout=0']
        fs = Rmemfs(server, mnt, opts, name=f'rmemfs{len(self.mounts)}', extra_args=extra_args,
                    extra_env=extra_env)
        self.mounts.append(fs)
        if start:
            fs.start()
        return fs

    def teardown(self):
        problems = []
        for fs in reversed(self.mounts):
            try:
                fs.cleanup()
            except Exception as e:  # keep tearing down
                problems.append(f'cleanup of {fs.mountpoint}: {e}')
            problems += [f'{fs.log_path}: {w}' for w in fs.warnings()]
        for s in reversed(self.servers):
            try:
                s.stop()
            except Exception as e:
                problems.append(f'stop memserver: {e}')
            problems += [f'{s.log_path}: {w}' for w in s.warnings()]
        for d in self.mountpoints:
            try:
                if not is_mounted(d):
                    shutil.rmtree(d, ignore_errors=True)
            except OSError:
                pass
        return problems


@pytest.fixture
def env(tmp_path):
    e = Env(str(tmp_path))
    try:
        yield e
    finally:
        problems = e.teardown()
    if problems and not e.expected_warnings:
        pytest.fail('daemon trouble:\n' + '\n'.join(problems))


class Mounted:
    def __init__(self, env, server, fs):
        self.env = env
        self.server = server
        self.fs = fs
        self.path = fs.mountpoint

    def p(self, *parts):
        return os.path.join(self.path, *parts)

    def remount(self, options=None):
        """Clean unmount, then a new rmemfs process on the same pool."""
        rc = self.fs.unmount()
        assert rc == 0, f'rmemfs exit status {rc}:\n{self.fs.output()}'
        opts = self.fs.options if options is None else options
        fs = Rmemfs(self.server, self.path, opts, name=f'rmemfs{len(self.env.mounts)}')
        self.env.mounts.append(fs)
        self.fs = fs.start()
        return self


def mounted_fs(env, caches=False):
    """A fresh 64 MiB pool mounted (kernel caches off unless caches); a
    generator for fixtures: a clean unmount with exit status 0 at the end."""
    server = env.server('64M')
    fs = env.rmemfs(server, caches=caches)
    m = Mounted(env, server, fs)
    yield m
    if m.fs.proc and m.fs.proc.poll() is None and is_mounted(m.path):
        rc = m.fs.unmount()
        assert rc == 0, f'rmemfs exit status {rc} at unmount:\n{m.fs.output()}'


@pytest.fixture
def mounted(env):
    """A fresh 64 MiB pool mounted with the kernel caches off."""
    yield from mounted_fs(env)


@pytest.fixture
def refdir(tmp_path):
    d = tmp_path / 'ref'
    d.mkdir()
    return str(d)


# ---- syscalls Python's os module lacks ----

_libc = ctypes.CDLL(ctypes.util.find_library('c'), use_errno=True)
_libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
_libc.renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p,
                            ctypes.c_uint]

FALLOC_FL_KEEP_SIZE = 0x01
FALLOC_FL_PUNCH_HOLE = 0x02
FALLOC_FL_ZERO_RANGE = 0x10
RENAME_NOREPLACE = 1
RENAME_EXCHANGE = 2
AT_FDCWD = -100
UTIME_NOW = (1 << 30) - 1
UTIME_OMIT = (1 << 30) - 2


def _check(rc):
    if rc < 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
    return rc


def fallocate(fd, mode, off, length):
    _check(_libc.fallocate(fd, mode, off, length))


def renameat2(old, new, flags):
    _check(_libc.renameat2(AT_FDCWD, os.fsencode(old), AT_FDCWD, os.fsencode(new), flags))


class _timespec(ctypes.Structure):
    _fields_ = [('tv_sec', ctypes.c_long), ('tv_nsec', ctypes.c_long)]


def utimensat(path, atime, mtime, follow=True):
    """atime/mtime: (sec, nsec) tuples, or UTIME_NOW / UTIME_OMIT."""
    ts = (_timespec * 2)()
    for i, t in enumerate((atime, mtime)):
        if t in (UTIME_NOW, UTIME_OMIT):
            ts[i].tv_sec, ts[i].tv_nsec = 0, t
        else:
            ts[i].tv_sec, ts[i].tv_nsec = t
    flags = 0 if follow else 0x100  # AT_SYMLINK_NOFOLLOW
    _check(_libc.utimensat(AT_FDCWD, os.fsencode(path), ts, flags))


_libc.name_to_handle_at.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p,
                                    ctypes.POINTER(ctypes.c_int), ctypes.c_int]
_libc.open_by_handle_at.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int]
MAX_HANDLE_SZ = 128
_HANDLE_HEAD = struct.Struct('=Ii')  # struct file_handle: handle_bytes, handle_type


def name_to_handle_at(path):
    """path's file handle (symlinks not followed): (handle_type, bytes)."""
    buf = ctypes.create_string_buffer(_HANDLE_HEAD.size + MAX_HANDLE_SZ)
    _HANDLE_HEAD.pack_into(buf, 0, MAX_HANDLE_SZ, 0)
    mount_id = ctypes.c_int()
    _check(_libc.name_to_handle_at(AT_FDCWD, os.fsencode(path), buf, ctypes.byref(mount_id), 0))
    size, kind = _HANDLE_HEAD.unpack_from(buf)
    return kind, buf.raw[_HANDLE_HEAD.size:_HANDLE_HEAD.size + size]


def open_by_handle_at(mount_fd, handle, flags):
    """Open what handle (from name_to_handle_at) names on the filesystem of
    mount_fd; needs CAP_DAC_READ_SEARCH. Returns the descriptor."""
    kind, data = handle
    buf = ctypes.create_string_buffer(_HANDLE_HEAD.pack(len(data), kind) + data)
    return _check(_libc.open_by_handle_at(mount_fd, buf, flags))


_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                       ctypes.c_int64]
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
_libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]


def resident_pages(fd, length):
    """How many pages of the file's first length bytes are in the page cache
    (mincore(2) on a mapping that is never touched, so nothing is faulted in)."""
    if length == 0:
        return 0
    addr = _libc.mmap(None, length, 1, 1, fd, 0)  # PROT_READ, MAP_SHARED
    if addr == ctypes.c_void_p(-1).value:
        _check(-1)
    try:
        page = os.sysconf('SC_PAGE_SIZE')
        vec = ctypes.create_string_buffer((length + page - 1) // page)
        _check(_libc.mincore(addr, length, vec))
        return sum(b & 1 for b in vec.raw)
    finally:
        _libc.munmap(addr, length)


def outcome(fn, *args):
    """('ok', value) or ('err', errno name): comparable across filesystems."""
    try:
        return ('ok', fn(*args))
    except OSError as e:
        return ('err', errno.errorcode.get(e.errno, e.errno))


STATS = 'user.rmemfs.stats'


def stats(mnt):
    """The stats xattr as a dict: numbers as int, other values (latency lines,
    state, failure) as text."""
    out = {}
    for line in os.getxattr(mnt, STATS).decode().splitlines():
        key, _, value = line.partition(' ')
        out[key] = int(value) if value.isdigit() else value
    return out


def fsync_dir(path):
    """fsync of a directory: every metadata change so far durable (and so
    visible to readers)."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def log_lines(path):
    """The lines a workload subprocess has logged to path so far ([] before it exists)."""
    try:
        with open(path) as f:
            return f.read().splitlines()
    except FileNotFoundError:
        return []


def wait_for(cond, timeout=30.0, step=0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(step)
    return cond()


def fsck(server, *extra):
    """rmemfs-fsck on a server (or a member set); warnings are fatal in it."""
    cmd = [binary('fuse-client/rmemfs-fsck'), server.addr, *extra,
           '-o', f'token_file={server.token_file},transport={TRANSPORT}']
    env = dict(os.environ, G_DEBUG='fatal-warnings')
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)


def ctl(mnt, *args):
    """rmemfs-ctl MNT ARGS..."""
    return subprocess.run([binary('fuse-client/rmemfs-ctl'), mnt] + list(args),
                          capture_output=True, text=True, timeout=300)


def pattern(seed, n):
    """n deterministic, non-repeating-looking bytes."""
    import random
    return random.Random(seed).randbytes(n)


def read_line(proc, timeout):
    """The child's next stdout line ('' at EOF or timeout)."""
    box = []
    t = threading.Thread(target=lambda: box.append(proc.stdout.readline()), daemon=True)
    t.start()
    t.join(timeout)
    return box[0] if box else ''
