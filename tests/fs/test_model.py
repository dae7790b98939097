# SPDX-License-Identifier: GPL-2.0-or-later
"""Model-based test of the namespace: random sequences of create, write,
truncate, unlink, rename (within and across directories, over existing names,
RENAME_NOREPLACE, RENAME_EXCHANGE), link, mkdir, rmdir, symlink and xattr
set/remove (values up to the 64 KiB limit, up to 120 names on an inode),
each applied to the mount and to an in-memory model of the whole tree: names,
types, inode identity, link counts, sizes, contents, symlink targets, xattrs.
Errors are part of the model: an operation the model says must fail must fail
with its errno.

Listings use getdents64 with a 512-byte buffer, so listing a large directory
takes hundreds of calls (each a READDIR from the last entry's cookie); some
listings create, unlink and rename entries between calls and then check what
POSIX promises: every entry present during the whole listing appears exactly
once; and what docs/ARCHITECTURE.md ("Listings during changes") adds: as no
name changes twice during one listing, no name appears twice, none that never
existed and none created during the listing; a file renamed within the
directory appears once, at most once if it was renamed over a name.

The tree is compared with the model after every listing (that directory), in
full at intervals, after a clean remount, and after a kill -9 and a mount that
replays the journal: then against the model as it was at the last full sync
(every written file and every directory fsync'd), while what came after it
(names of its own, "u...") may have survived or not and is removed. At the
end rmemfs-fsck finds no problem.

One directory holds thousands of entries under heavy churn, growing and
shrinking, so that the cookie index (meta/inode.c) gets holes, is compacted
(at 64 holes and half the array) and has cookies reused by renames over a
name; the sequence of issue 27 (rename over an entry that is not the last,
then unlink or rename that entry, then list) runs many times. The counts of
those events printed at the end come from a shadow of the cookie array kept
by the model (for information; nothing is asserted on them).

Directory sizes scale with RMEM_TEST_SCALE, operation counts with its square:
at 1, 24,000 + 8,000 operations over 4,000 + 300 entries (about a minute); at
0.1, the RDMA VM's scale, where a request costs ~10 ms, 300 + 150 operations
over 400 + 100 entries.

The seed comes from RMEMFS_MODEL_SEED or is drawn at random; it is printed,
and every failure message gives it with the last operations, so a failure
replays (with the same RMEM_TEST_SCALE):
RMEMFS_MODEL_SEED=N pytest tests/fs/test_model.py -k NAME.
"""
import bisect
import collections
import contextlib
import ctypes
import errno
import os
import platform
import random
import re
import shutil
import stat
import struct
import threading
import time

import pytest

from conftest import RENAME_EXCHANGE, RENAME_NOREPLACE, SCALE, Mounted, renameat2, scaled
from conftest import fsck

SEED_ENV = 'RMEMFS_MODEL_SEED'
REG, DIR, LNK = 'reg', 'dir', 'lnk'
DTYPE = {REG: 8, DIR: 4, LNK: 10}             # DT_REG, DT_DIR, DT_LNK
XATTR_VALUE_MAX = 65536                        # meta.c; the kernel's XATTR_SIZE_MAX too
MAX_FILE = 1 << 20                             # writes and truncates stay below
DATA_BUDGET = 24 << 20                         # file bytes the model lets live at once
XATTR_BUDGET = 1 << 20                         # xattr bytes (the checkpoint slot is 8 MiB)
LISTING_BUF = 512                              # getdents64 buffer: ~15 entries a call
# a guard against a daemon that stops answering (a readdir that loops forever holding the
# metadata lock, on the tree of issue 27), not a check of speed: no operation comes near it
HANG_LIMIT = 300                               # seconds one operation may take

# ---- getdents64 into a small buffer (os.scandir reads 32 KiB at a time) ----

SYS_GETDENTS64 = {'x86_64': 217, 'aarch64': 61, 'riscv64': 61, 'ppc64le': 202,
                  's390x': 220}.get(platform.machine())
_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
DIRENT64 = struct.Struct('=QqHB')              # d_ino, d_off, d_reclen, d_type; d_name


class Listing:
    """One pass over a directory, one getdents64 call per batch()."""

    def __init__(self, path, bufsize=LISTING_BUF):
        self.fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
        self.buf = ctypes.create_string_buffer(bufsize)
        self.calls = 0

    def batch(self):
        """The next records as (name, d_ino, d_type); [] at the end."""
        n = _libc.syscall(ctypes.c_long(SYS_GETDENTS64), ctypes.c_int(self.fd), self.buf,
                          ctypes.c_size_t(len(self.buf)))
        if n < 0:
            e = ctypes.get_errno()
            raise OSError(e, f'getdents64: {os.strerror(e)}')
        self.calls += 1
        raw = self.buf.raw[:n]
        out = []
        pos = 0
        while pos < n:
            ino, _, reclen, dtype = DIRENT64.unpack_from(raw, pos)
            name = raw[pos + DIRENT64.size:pos + reclen].split(b'\0', 1)[0]
            out.append((os.fsdecode(name), ino, dtype))
            pos += reclen
        return out

    def close(self):
        os.close(self.fd)


# ---- the model ----

class Mismatch(AssertionError):
    pass


class Bag:
    """A set with O(1) random choice."""

    def __init__(self):
        self.items = []
        self.pos = {}

    def __len__(self):
        return len(self.items)

    def add(self, x):
        if x not in self.pos:
            self.pos[x] = len(self.items)
            self.items.append(x)

    def discard(self, x):
        i = self.pos.pop(x, None)
        if i is None:
            return
        last = self.items.pop()
        if i < len(self.items):
            self.items[i] = last
            self.pos[last] = i

    def choice(self, rng):
        return self.items[rng.randrange(len(self.items))] if self.items else None


class CookieShadow:
    """rmemfs's cookie array of one directory as meta/inode.c keeps it: cookies
    in order, a removed entry leaves a hole, trailing holes go at the next
    insert, compaction at >= 64 holes and >= half the array; a rename keeps
    the entry's place as meta.c's rename_cookie says: within the directory its
    own cookie for a new name, the lower of the two over a name; from another
    directory over a name the replaced entry's cookie (its hole, or a new slot
    when a compaction took the hole away). Counts what the run exercised."""

    def __init__(self):
        self.slots = []          # cookies, ascending; a hole is a cookie not in live
        self.live = set()
        self.of = {}             # name -> cookie
        self.name_of = {}        # cookie -> name
        self.next = 3
        self.compactions = self.hole_reuses = self.inserts = 0

    def _trim(self):
        while self.slots and self.slots[-1] not in self.live:
            self.slots.pop()

    def _insert(self, name, cookie):
        self._trim()
        if not self.slots or self.slots[-1] < cookie:
            self.slots.append(cookie)
        else:
            i = bisect.bisect_left(self.slots, cookie)
            if i < len(self.slots) and self.slots[i] == cookie:
                self.hole_reuses += 1
            else:
                self.slots.insert(i, cookie)
                self.inserts += 1
        self.live.add(cookie)
        self.of[name] = cookie
        self.name_of[cookie] = name

    def add(self, name):
        self._insert(name, self.next)
        self.next += 1

    def remove(self, name):
        cookie = self.of.pop(name)
        self.live.discard(cookie)
        del self.name_of[cookie]
        holes = len(self.slots) - len(self.live)
        if holes >= 64 and holes >= len(self.slots) // 2:
            self.slots = [c for c in self.slots if c in self.live]
            self.compactions += 1

    def take_over(self, name):
        cookie = self.of[name]
        self.remove(name)
        self._insert(name, cookie)

    def move(self, old, new):
        """a rename within the directory"""
        if new not in self.of:
            self.of[new] = cookie = self.of.pop(old)
            self.name_of[cookie] = new
            return
        cookie = min(self.of[old], self.of[new])
        self.remove(old)
        self.remove(new)
        self._insert(new, cookie)

    def last(self):
        """the name with the highest cookie (None: empty)"""
        for cookie in reversed(self.slots):
            if cookie in self.live:
                return self.name_of[cookie]
        return None

    def reload(self):
        """After a mount: the checkpoint (and journal) give the live entries."""
        self.slots = sorted(self.live)


class Entries:
    """A directory's names with their cookies (CookieShadow), with O(1) random choice."""

    def __init__(self):
        self.map = {}
        self.names = Bag()
        self.cookies = CookieShadow()

    def __len__(self):
        return len(self.map)

    def __contains__(self, name):
        return name in self.map

    def get(self, name):
        return self.map.get(name)

    def items(self):
        return self.map.items()

    def add(self, name, node):
        self.map[name] = node
        self.names.add(name)
        self.cookies.add(name)

    def remove(self, name):
        node = self.map.pop(name)
        self.names.discard(name)
        self.cookies.remove(name)
        return node

    def take_over(self, name, node):
        """rename from another directory over name: the new entry takes the old one's cookie"""
        self.map[name] = node
        self.cookies.take_over(name)

    def move(self, old, new):
        """rename within the directory: the entry keeps its place (CookieShadow.move)"""
        self.map[new] = self.map.pop(old)
        self.names.discard(old)
        self.names.add(new)
        self.cookies.move(old, new)

    def swap(self, name, node):
        """RENAME_EXCHANGE: the entry stays, another inode behind it"""
        self.map[name] = node

    def choice(self, rng):
        return self.names.choice(rng)

    def last(self):
        return self.cookies.last()


class Node:
    __slots__ = ('kind', 'data', 'target', 'xattrs', 'entries', 'parent', 'name', 'nsub',
                 'links', 'ino', 'pool')

    def __init__(self, kind):
        self.kind = kind
        self.xattrs = {}
        self.ino = None
        self.data = bytearray() if kind == REG else None
        self.target = None
        self.links = [] if kind != DIR else None    # (dir node, name) of each name
        self.entries = Entries() if kind == DIR else None
        self.parent = self.name = None               # a directory's one name
        self.nsub = 0                                # subdirectories
        self.pool = 48                               # names f0..f<pool-1> (directories)

    def nlink(self):
        return 2 + self.nsub if self.kind == DIR else len(self.links)


def entry_name(n):
    """The n-th name of a directory's pool: mostly short, some long (up to 246
    bytes: records of many sizes), some with spaces and UTF-8."""
    if n % 97 == 5:
        return f'f{n}-' + 'x' * (180 + n % 60)
    if n % 89 == 7:
        return f'f{n} é ü'
    return f'f{n}'


class Model:
    def __init__(self):
        self.root = Node(DIR)
        self.dirs = [self.root]
        self.regs = Bag()
        self.others = Bag()          # symlinks
        self.ino_owner = {}          # inode number -> live node
        self.dirty = set()           # regular files written since the last sync
        self.data_bytes = 0
        self.xattr_bytes = 0
        self.most_xattrs = 0          # on one inode, at any time

    def relpath(self, node, name=None):
        parts = [] if name is None else [name]
        if node.kind != DIR:
            node, first = node.links[0]
            parts.append(first)
        while node.parent is not None:
            parts.append(node.name)
            node = node.parent
        if node is not self.root:      # the driver kept a removed directory: its own bug
            raise AssertionError(f'a removed directory is used ({"/".join(parts[::-1])})')
        return os.path.join(*reversed(parts)) if parts else ''

    def within(self, d, top):
        """d is top or below it"""
        while d is not None:
            if d is top:
                return True
            d = d.parent
        return False

    def depth(self, d):
        n = 0
        while d.parent is not None:
            n, d = n + 1, d.parent
        return n

    def _named(self, node, d, name):
        if node.kind == DIR:
            node.parent, node.name = d, name
            d.nsub += 1
        else:
            node.links.append((d, name))

    def _unnamed(self, node, d, name):
        if node.kind == DIR:
            d.nsub -= 1
            node.parent = None
        else:
            node.links.remove((d, name))

    def add(self, d, name, node):
        d.entries.add(name, node)
        self._named(node, d, name)
        if node.kind == DIR:
            self.dirs.append(node)
        elif node.kind == REG:
            self.regs.add(node)
        else:
            self.others.add(node)

    def _gone_if_unnamed(self, node):
        if node.kind == DIR:
            self.dirs.remove(node)
        elif node.links:
            return
        self.regs.discard(node)
        self.others.discard(node)
        self.dirty.discard(node)
        if node.ino is not None and self.ino_owner.get(node.ino) is node:
            del self.ino_owner[node.ino]
        if node.kind == REG:
            self.data_bytes -= len(node.data)
        self.xattr_bytes -= sum(len(v) for v in node.xattrs.values())

    def remove(self, d, name):
        node = d.entries.remove(name)
        self._unnamed(node, d, name)
        self._gone_if_unnamed(node)

    def rename(self, d1, n1, d2, n2):
        node, old = d1.entries.get(n1), d2.entries.get(n2)
        if d1 is d2:
            d1.entries.move(n1, n2)
        else:
            d1.entries.remove(n1)
        self._unnamed(node, d1, n1)
        if old is not None:
            if d1 is not d2:
                d2.entries.take_over(n2, node)
            self._unnamed(old, d2, n2)
            self._gone_if_unnamed(old)
        elif d1 is not d2:
            d2.entries.add(n2, node)
        self._named(node, d2, n2)

    def exchange(self, d1, n1, d2, n2):
        a, b = d1.entries.get(n1), d2.entries.get(n2)
        self._unnamed(a, d1, n1)
        self._unnamed(b, d2, n2)
        d1.entries.swap(n1, b)
        d2.entries.swap(n2, a)
        self._named(b, d1, n1)
        self._named(a, d2, n2)

    def set_data(self, node, data):
        self.data_bytes += len(data) - len(node.data)
        node.data = data
        self.dirty.add(node)

    def set_xattr(self, node, name, value):
        self.xattr_bytes += len(value) - len(node.xattrs.get(name, b''))
        node.xattrs[name] = value
        self.most_xattrs = max(self.most_xattrs, len(node.xattrs))

    def del_xattr(self, node, name):
        self.xattr_bytes -= len(node.xattrs.pop(name))


# ---- the driver: one operation on the mount and on the model at a time ----

def errname(e):
    return errno.errorcode.get(e, str(e))


def shown(names, n=8):
    """the first n names for a message, long ones shortened"""
    return [re.sub(r'x{20,}', lambda m: f'x*{len(m.group())}', x) for x in names[:n]]


class Driver:
    def __init__(self, env, server, fs, seed, cfg, test_name):
        self.env = env
        self.server = server
        self.mnt = Mounted(env, server, fs)
        self.seed = seed
        self.cfg = cfg
        self.test_name = test_name
        self.rng = random.Random(seed)
        self.model = Model()
        self.history = collections.deque(maxlen=40)
        self.counts = collections.Counter()
        self.n = 0                    # operations done
        self.calls = 0                # getdents64 calls
        self.biggest = 0
        self.watch = None             # (directory, touched names) during a listing
        self.heavy = []               # nodes that get many xattrs
        self.big = self.mid = None
        self.force_big = False        # pick_dir gives the big directory
        self.seconds = collections.Counter()    # where the time went (printed)
        self.progress = time.monotonic()        # when the last operation began
        self.hung = None                        # what the watchdog found
        self.stop = threading.Event()

    def watchdog(self):
        """If an operation does not return in HANG_LIMIT s, kill the daemon: the call waiting for
        it fails (ENOTCONN) and the test reports the seed and the operations."""
        while not self.stop.wait(5):
            if time.monotonic() - self.progress > HANG_LIMIT:
                self.hung = (f'an operation did not return in {HANG_LIMIT} s, rmemfs killed: '
                             f'{self.history[-1] if self.history else "?"}')
                self.mnt.fs.proc.kill()
                return

    @contextlib.contextmanager
    def timed(self, what):
        t0 = time.monotonic()
        try:
            yield
        finally:
            self.seconds[what] += time.monotonic() - t0

    # -- reporting --

    def fail(self, msg):
        raise Mismatch(self.context(msg))

    def context(self, msg):
        if self.hung:
            msg = f'{self.hung}\n{msg}'
        daemon = self.mnt.fs.output().splitlines()[-12:]
        scale = f'RMEM_TEST_SCALE={SCALE:g} ' if SCALE != 1 else ''
        return (f'{msg}\nseed {self.seed} (replay: {scale}{SEED_ENV}={self.seed} python3 -m '
                f'pytest tests/fs/test_model.py -k {self.test_name}), at operation #{self.n}\n'
                'last operations:\n  ' + '\n  '.join(self.history) +
                ('\nrmemfs output (last lines):\n  ' + '\n  '.join(daemon) if daemon else ''))

    def note(self, desc):
        self.history.append(f'#{self.n} {desc}')
        self.progress = time.monotonic()

    def show(self, node, name=None):
        """a path for messages: long names shortened"""
        return repr(shown([self.model.relpath(node, name) or '.'])[0])

    def real(self, node, name=None):
        rel = self.model.relpath(node, name)
        return os.path.join(self.mnt.path, rel) if rel else self.mnt.path

    def expect(self, err, fn, *args, **kw):
        """fn(*args, **kw) succeeds (err None) or fails with errno err."""
        try:
            r = fn(*args, **kw)
        except OSError as e:
            if err is not None and e.errno == err:
                return None
            self.fail(f'{errname(e.errno)} ({e}) where the model expects '
                      f'{"success" if err is None else errname(err)}')
        if err is not None:
            self.fail(f'success where the model expects {errname(err)}')
        return r

    def touched(self, d, *names):
        if self.watch and self.watch[0] is d:
            self.watch[1].update(names)

    # -- choosing --

    def pick_dir(self, min_entries=0):
        if self.force_big:
            return self.big
        r = self.rng.random()
        if r < self.cfg['p_big'] and len(self.big.entries) >= min_entries:
            return self.big
        if r < self.cfg['p_big'] + 0.2 and len(self.mid.entries) >= min_entries:
            return self.mid
        for _ in range(8):
            d = self.model.dirs[self.rng.randrange(len(self.model.dirs))]
            if len(d.entries) >= min_entries:
                return d
        return self.big

    def fresh_name(self, d, avoid=()):
        for _ in range(20):
            name = entry_name(self.rng.randrange(d.pool))
            if name not in d.entries and name not in avoid:
                return name
        return None

    def some_name(self, d, kinds=(REG, LNK, DIR), not_last=False, avoid=()):
        if not len(d.entries):
            return None
        last = d.entries.last() if not_last else None
        for _ in range(12):
            name = d.entries.choice(self.rng)
            if d.entries.get(name).kind in kinds and name != last and name not in avoid:
                return name
        return None

    def some_node(self, kinds):
        r = self.rng
        choices = []
        if REG in kinds and len(self.model.regs):
            choices.append(self.model.regs)
        if LNK in kinds and len(self.model.others):
            choices.append(self.model.others)
        if DIR in kinds:
            return self.model.dirs[r.randrange(len(self.model.dirs))] \
                if not choices or r.random() < 0.3 else r.choice(choices).choice(r)
        return r.choice(choices).choice(r) if choices else None

    def data(self, n):
        return self.rng.randbytes(n)

    # -- operations: each does one thing to the mount and the model and checks it --

    def create(self, d, name, how):
        """how: 'mknod', 'open' (O_EXCL, with data) or 'trunc' (O_TRUNC, name may exist)"""
        node = d.entries.get(name)
        size = self.rng.choice([0, 0, 1, 100, 2000, 4096, self.rng.randrange(1, 9000)])
        if self.rng.random() < 0.03:
            size = self.rng.randrange(50_000, 300_000)
        if self.model.data_bytes + size > DATA_BUDGET:
            size = 0
        if how == 'trunc' and node is not None and node.kind == LNK:
            return   # O_CREAT through a symlink creates its target: not this operation
        payload = self.data(size)
        self.note(f'create {how} {self.show(d, name)} +{size}')
        path = self.real(d, name)
        if how == 'mknod':
            err = errno.EEXIST if node else None
            self.expect(err, os.mknod, path, 0o644 | stat.S_IFREG)
            payload = b''
        else:
            flags = os.O_WRONLY | os.O_CREAT | (os.O_TRUNC if how == 'trunc' else os.O_EXCL)
            err = None
            if node is not None and (how != 'trunc' or node.kind == DIR):
                err = errno.EISDIR if how == 'trunc' else errno.EEXIST
            fd = self.expect(err, os.open, path, flags, 0o644)
            if fd is not None:
                try:
                    if payload:
                        os.write(fd, payload)
                finally:
                    os.close(fd)
        if err is not None:
            return
        self.touched(d, name)
        if node is None:
            node = Node(REG)
            self.model.add(d, name, node)
        self.model.set_data(node, bytearray(payload))
        if payload:
            self.check_file(node, 'after create')

    def unlink(self, d, name):
        node = d.entries.get(name)
        self.note(f'unlink {self.show(d, name)}')
        err = errno.ENOENT if node is None else errno.EISDIR if node.kind == DIR else None
        self.expect(err, os.unlink, self.real(d, name))
        if err is None:
            self.touched(d, name)
            self.model.remove(d, name)

    def rename(self, d1, n1, d2, n2, flags=0):
        m = self.model
        src, dst = d1.entries.get(n1), d2.entries.get(n2)
        how = {0: '', RENAME_NOREPLACE: ' noreplace', RENAME_EXCHANGE: ' exchange'}[flags]
        self.note(f'rename{how} {self.show(d1, n1)} -> {self.show(d2, n2)}'
                  f'{" (over)" if dst is not None else ""}')
        exchange = flags == RENAME_EXCHANGE
        err = None
        if src is None or (exchange and dst is None):
            err = errno.ENOENT
        elif flags == RENAME_NOREPLACE and dst is not None:
            err = errno.EEXIST
        elif dst is src:
            pass                                     # the same inode: nothing happens
        elif src.kind == DIR and m.within(d2, src):
            err = errno.EINVAL                       # into itself
        elif dst is not None and dst.kind == DIR and d1 is not d2 and m.within(d1, dst):
            err = errno.EINVAL if exchange else errno.ENOTEMPTY   # over its own ancestor
        elif dst is not None and not exchange:
            if src.kind == DIR and dst.kind != DIR:
                err = errno.ENOTDIR
            elif src.kind != DIR and dst.kind == DIR:
                err = errno.EISDIR
            elif dst.kind == DIR and len(dst.entries):
                err = errno.ENOTEMPTY
        src_path, dst_path = self.real(d1, n1), self.real(d2, n2)
        if flags:
            self.expect(err, renameat2, src_path, dst_path, flags)
        else:
            self.expect(err, os.rename, src_path, dst_path)
        if err is not None or dst is src:
            return
        self.touched(d1, n1)
        self.touched(d2, n2)
        if exchange:
            m.exchange(d1, n1, d2, n2)
        else:
            m.rename(d1, n1, d2, n2)

    def link(self, node, d, name):
        m = self.model
        self.note(f'link {self.show(node)} -> {self.show(d, name)}')
        err = errno.EEXIST if name in d.entries else None
        self.expect(err, os.link, self.real(node), self.real(d, name), follow_symlinks=False)
        if err is None:
            self.touched(d, name)
            m.add(d, name, node)

    def mkdir(self, d, name):
        self.note(f'mkdir {self.show(d, name)}')
        err = errno.EEXIST if name in d.entries else None
        self.expect(err, os.mkdir, self.real(d, name), 0o755)
        if err is None:
            self.touched(d, name)
            self.model.add(d, name, Node(DIR))

    def rmdir(self, d, name):
        node = d.entries.get(name)
        self.note(f'rmdir {self.show(d, name)}')
        err = errno.ENOENT if node is None else errno.ENOTDIR if node.kind != DIR else \
            errno.ENOTEMPTY if len(node.entries) else None
        self.expect(err, os.rmdir, self.real(d, name))
        if err is None:
            self.touched(d, name)
            self.model.remove(d, name)

    def symlink(self, d, name):
        r = self.rng
        if r.random() < 0.1:
            target = ''.join(r.choice('abc/.-_é') for _ in range(r.randrange(1, 4096)))
            target = target.encode()[:4095].decode(errors='ignore') or 'x'
        else:
            target = '../' * r.randrange(3) + entry_name(r.randrange(200))
        self.note(f'symlink {self.show(d, name)} -> {len(target)} bytes')
        err = errno.EEXIST if name in d.entries else None
        self.expect(err, os.symlink, target, self.real(d, name))
        if err is None:
            self.touched(d, name)
            node = Node(LNK)
            node.target = target
            self.model.add(d, name, node)
            got = os.readlink(self.real(d, name))
            if got != target:
                self.fail(f'readlink gives {len(got)} bytes, the target had {len(target)}')

    def write(self, node):
        r = self.rng
        size = len(node.data)
        off = r.choice([0, size, r.randrange(size + 1), r.randrange(size + 16384),
                        r.randrange(MAX_FILE // 4096) * 4096])
        n = r.choice([1, 7, 100, 4095, 4096, 4097, 65536, r.randrange(1, 20000)])
        n = max(1, min(n, MAX_FILE - off))
        if self.model.data_bytes + max(0, off + n - size) > DATA_BUDGET:
            return self.truncate(node, r.randrange(min(size, 4096) + 1))
        payload = self.data(n)
        self.note(f'write {self.show(node)} {off}+{n} (size {size})')
        fd = self.expect(None, os.open, self.real(node), os.O_WRONLY)
        try:
            if os.pwrite(fd, payload, off) != n:
                self.fail('short write')
        finally:
            os.close(fd)
        data = bytearray(node.data)
        if off > size:
            data.extend(bytes(off - size))
        data[off:off + n] = payload
        self.model.set_data(node, data)
        self.check_file(node, 'after write')

    def truncate(self, node, size=None):
        r = self.rng
        if size is None:
            size = r.choice([0, r.randrange(len(node.data) + 1),
                             min(MAX_FILE, len(node.data) + r.randrange(1, 70000))])
        if self.model.data_bytes + max(0, size - len(node.data)) > DATA_BUDGET:
            size = 0
        self.note(f'truncate {self.show(node)} {len(node.data)} -> {size}')
        self.expect(None, os.truncate, self.real(node), size)
        data = bytearray(node.data[:size])
        data.extend(bytes(size - len(data)))
        self.model.set_data(node, data)
        self.check_file(node, 'after truncate')

    def xattr_name(self, node, heavy):
        prefix = 'trusted.' if node.kind == LNK else 'user.'
        if self.rng.random() < 0.02:
            return prefix + 'n' * (255 - len(prefix))      # XATTR_NAME_MAX
        return f'{prefix}k{self.rng.randrange(120 if heavy else 6)}'

    def setxattr(self, node):
        r = self.rng
        heavy = node in self.heavy
        name = self.xattr_name(node, heavy)
        size = r.choice([0, 1, 10, 100, r.randrange(4096)])
        if r.random() < 0.08:
            size = r.choice([XATTR_VALUE_MAX, r.randrange(4096, XATTR_VALUE_MAX)])
        if self.model.xattr_bytes + size > XATTR_BUDGET:
            size = r.randrange(16)
        flags = r.choice([0, 0, 0, os.XATTR_CREATE, os.XATTR_REPLACE])
        too_big = r.random() < 0.01
        value = self.data(XATTR_VALUE_MAX + 1 if too_big else size)
        had = name in node.xattrs
        err = errno.E2BIG if too_big else \
            errno.EEXIST if flags == os.XATTR_CREATE and had else \
            errno.ENODATA if flags == os.XATTR_REPLACE and not had else None
        self.note(f'setxattr {self.show(node)} {name[:20]} {len(value)} bytes '
                  f'flags {flags}')
        self.expect(err, os.setxattr, self.real(node), name, value, flags,
                    follow_symlinks=False)
        if err is None:
            self.model.set_xattr(node, name, value)
        got = self.expect(None, os.getxattr, self.real(node), name, follow_symlinks=False) \
            if name in node.xattrs else None
        if got != node.xattrs.get(name):
            self.fail(f'getxattr {name}: {len(got)} bytes, the model has '
                      f'{len(node.xattrs[name])}')

    def removexattr(self, node):
        name = self.rng.choice(list(node.xattrs)) if node.xattrs and self.rng.random() < 0.9 \
            else self.xattr_name(node, False)
        self.note(f'removexattr {self.show(node)} {name[:20]}')
        err = None if name in node.xattrs else errno.ENODATA
        self.expect(err, os.removexattr, self.real(node), name, follow_symlinks=False)
        if err is None:
            self.model.del_xattr(node, name)

    # -- checks --

    def check_file(self, node, why, path=None):
        with open(path or self.real(node), 'rb') as f:
            got = f.read()
        want = bytes(node.data)
        if got != want:
            first = next((i for i in range(min(len(got), len(want))) if got[i] != want[i]),
                         min(len(got), len(want)))
            self.fail(f'{why}: {self.show(node)}: {len(got)} bytes read, the '
                      f'model has {len(want)}; first difference at byte {first}')

    def learn_ino(self, node, ino, where):
        if node.ino is None:
            owner = self.model.ino_owner.get(ino)
            if owner is not None and owner is not node:
                self.fail(f'{where}: inode {ino} is {self.show(node)} and also '
                          f'{self.show(owner)}')
            node.ino = ino
            self.model.ino_owner[ino] = node
        elif node.ino != ino:
            self.fail(f'{where}: inode number {ino}, it was {node.ino}')

    def compare_listing(self, d, seen, why):
        """seen: name -> [(d_ino, d_type), ...] from one listing without changes"""
        rel = self.show(d)
        dups = [n for n, v in seen.items() if len(v) > 1]
        missing = [n for n in d.entries.map if n not in seen]
        extra = [n for n in seen if n not in d.entries]
        if dups or missing or extra:
            self.fail(f'{why}: listing of {rel}: {len(seen)} names for {len(d.entries)} '
                      f'entries; missing {len(missing)} {shown(missing)}, unexpected '
                      f'{len(extra)} {shown(extra)}, twice {shown(dups)}')
        for name, [(ino, dtype)] in seen.items():
            node = d.entries.get(name)
            if dtype != DTYPE[node.kind]:
                self.fail(f'{why}: {self.show(d, name)}: d_type {dtype}, the model has a '
                          f'{node.kind}')
            self.learn_ino(node, ino, f'{why}: {self.show(d, name)}')

    def readdir(self, d, interleave=False):
        """List d with getdents64 into a small buffer and compare it with the model;
        with interleave, create, unlink and rename entries of d between calls."""
        rel = self.show(d)
        self.note(f'readdir {rel} ({len(d.entries)} entries'
                  f'{", changed while listing" if interleave else ""})')
        self.counts['readdir interleaved' if interleave else 'readdir'] += 1
        start = dict(d.entries.items()) if interleave else None
        touched = set()
        moves = []                    # (old, new, over): renames within d
        added = []                    # names created in d
        self.watch = (d, touched) if interleave else None
        seen = collections.defaultdict(list)
        records = 0
        lst = Listing(self.real(d))
        try:
            while True:
                batch = lst.batch()
                if not batch:
                    break
                records += len(batch)
                if records > 2 * (len(d.entries) + len(touched)) + 100:
                    self.fail(f'listing of {rel} does not end: {records} records for '
                              f'{len(d.entries)} entries ({len(seen)} names)')
                for name, ino, dtype in batch:
                    seen[name].append((ino, dtype))
                if interleave and self.rng.random() < 0.25:
                    for _ in range(self.rng.randrange(1, 4)):
                        self.change_while_listing(d, start, touched, moves, added)
        finally:
            self.watch = None
            self.calls += lst.calls
            lst.close()
        for dot in ('.', '..'):
            if len(seen.pop(dot, ())) != 1:
                self.fail(f'listing of {rel}: {dot!r} not listed exactly once')
        if not interleave:
            self.compare_listing(d, seen, 'readdir')
            return
        # POSIX: an entry neither added nor removed during the listing appears once;
        # here also (ARCHITECTURE.md, "Listings during changes"): no name twice (each
        # name changes at most once while listing), no name that was never there nor one
        # created meanwhile, a file renamed within d to a new name once, one renamed over
        # a name at most once
        stable = [n for n in start if n not in touched]
        missing = [n for n in stable if n not in seen]
        twice = [n for n, v in seen.items() if len(v) > 1]
        ghost = [n for n in seen if n not in start and n not in touched or n in added]
        moved = []
        for old, new, over in moves:
            inos = [ino for name in (old, new) for ino, _ in seen.get(name, ())]
            if over:
                inos = [i for i in inos if i == os.lstat(self.real(d, new)).st_ino]
            if len(inos) > 1 or (not over and not inos):
                moved.append(f'{old}->{new}{" (over)" if over else ""}: {len(inos)} times')
        if missing or twice or ghost or moved:
            self.fail(f'listing of {rel} while {len(touched)} names changed: '
                      f'{len(stable)} unchanged entries, missing {len(missing)} '
                      f'{shown(missing)}, twice {shown(twice)}, created meanwhile or never '
                      f'existed {shown(ghost)}, '
                      f'renamed within the directory and not listed once {shown(moved)}')
        for name in stable:
            (ino, dtype), node = seen[name][0], start[name]
            if dtype != DTYPE[node.kind]:
                self.fail(f'listing of {self.show(d, name)}: d_type {dtype}, the model has a '
                          f'{node.kind}')
            self.learn_ino(node, ino, f'listing of {self.show(d, name)}')
        self.readdir(d)     # and the whole directory again, now quiet

    def change_while_listing(self, d, start, touched, moves, added):
        """One change to d, of names that have not changed yet during this listing;
        renames within d go to moves as (old, new, over), created names to added."""
        r = self.rng
        avoid = set(start) | touched
        plain = (REG, LNK)
        x = self.some_name(d, plain, avoid=touched)
        what = r.random()
        if what < 0.3 or x is None:
            name = self.fresh_name(d, avoid)
            if name:
                self.create(d, name, 'mknod')
                added.append(name)
        elif what < 0.5:
            self.unlink(d, x)
        elif what < 0.7:
            name = self.fresh_name(d, avoid)
            if name:
                self.rename(d, x, d, name)
                moves.append((x, name, False))
        else:
            y = self.some_name(d, plain, not_last=True, avoid=touched | {x})
            if y and d.entries.get(y) is not d.entries.get(x):
                self.rename(d, x, d, y, RENAME_EXCHANGE if what > 0.9 else 0)
                if what <= 0.9:
                    moves.append((x, y, True))

    def check_node(self, node, path, st, why):
        rel = self.show(node)
        kind = REG if stat.S_ISREG(st.st_mode) else DIR if stat.S_ISDIR(st.st_mode) else \
            LNK if stat.S_ISLNK(st.st_mode) else oct(st.st_mode)
        if kind != node.kind:
            self.fail(f'{why}: {rel} is a {kind}, the model has a {node.kind}')
        self.learn_ino(node, st.st_ino, f'{why}: {rel}')
        if st.st_nlink != node.nlink():
            self.fail(f'{why}: {rel}: {st.st_nlink} links, the model has {node.nlink()}')
        if node.kind == REG:
            if st.st_size != len(node.data):
                self.fail(f'{why}: {rel}: size {st.st_size}, the model has '
                          f'{len(node.data)}')
            if node.data:
                self.check_file(node, why, path)
        elif node.kind == LNK:
            target = os.readlink(path)
            if target != node.target:
                self.fail(f'{why}: {rel}: a target of {len(target)} bytes, the model has '
                          f'{len(node.target)}')
        names = os.listxattr(path, follow_symlinks=False)
        if sorted(names) != sorted(node.xattrs):
            self.fail(f'{why}: {rel}: xattrs {sorted(names)[:10]}, the model has '
                      f'{sorted(node.xattrs)[:10]}')
        for name in names:
            if os.getxattr(path, name, follow_symlinks=False) != node.xattrs[name]:
                self.fail(f'{why}: {rel}: xattr {name} differs')

    def full_check(self, why):
        """Every directory listed (os.scandir), every inode stat'ed and read."""
        self.note(f'full check ({why})')
        with self.timed('full checks'):
            self._full_check(why)

    def _full_check(self, why):
        # names relative to an open directory: with entry_timeout=0 a path costs a LOOKUP
        # per component, and the VM's ~10 ms a request adds up
        checked = set()
        root = self.model.root
        self.check_node(root, self.mnt.path, os.lstat(self.mnt.path), why)
        for d in list(self.model.dirs):
            dfd = os.open(self.real(d), os.O_RDONLY | os.O_DIRECTORY)
            try:
                seen = collections.defaultdict(list)
                with os.scandir(dfd) as it:
                    for e in it:
                        t = DTYPE[DIR] if e.is_dir(follow_symlinks=False) else \
                            DTYPE[LNK] if e.is_symlink() else DTYPE[REG]
                        seen[e.name].append((e.inode(), t))
                self.compare_listing(d, seen, why)
                for name, node in d.entries.items():
                    if node not in checked:
                        checked.add(node)
                        st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
                        self.check_node(node, f'/proc/self/fd/{dfd}/{name}', st, why)
            finally:
                os.close(dfd)
        self.counts['full check'] += 1

    # -- the random sequence --

    def op_create(self):
        d = self.pick_dir()
        name = self.fresh_name(d) if self.rng.random() < 0.85 else self.some_name(d)
        if name:
            self.create(d, name, self.rng.choice(['mknod', 'mknod', 'open', 'trunc']))

    def op_unlink(self):
        d = self.pick_dir(1)
        if self.rng.random() < 0.03:
            return self.unlink(d, self.fresh_name(d) or 'none')
        name = self.some_name(d, (REG, LNK) if self.rng.random() < 0.98 else (DIR,))
        if name:
            self.unlink(d, name)

    def op_rename(self):
        r = self.rng
        d1 = self.pick_dir(1)
        d2 = d1 if r.random() < 0.6 else self.pick_dir()
        n1 = self.some_name(d1, (REG, LNK) if r.random() < 0.9 else (DIR,))
        if not n1:
            return
        n2 = self.fresh_name(d2) if r.random() < 0.45 else self.some_name(d2)
        if not n2 or d2.entries.get(n2) in (self.big, self.mid):
            return   # they stay (they could be replaced once empty)
        flags = r.choice([0] * 8 + [RENAME_NOREPLACE, RENAME_EXCHANGE])
        self.rename(d1, n1, d2, n2, flags)

    def op_issue27(self):
        """Rename over an entry Y that is not the directory's last (the new entry takes
        Y's cookie), then unlink Y, or rename it away, or over a third; then list."""
        r = self.rng
        d = self.pick_dir(3)
        y = self.some_name(d, (REG, LNK), not_last=True)
        src_dir = d if r.random() < 0.7 else self.pick_dir(1)
        x = self.some_name(src_dir, (REG, LNK), avoid={y} if src_dir is d else ())
        if not y or not x or src_dir.entries.get(x) is d.entries.get(y):
            return
        self.counts['issue27 sequence'] += 1
        self.rename(src_dir, x, d, y)
        what = r.random()
        if what < 0.4:
            self.unlink(d, y)
        elif what < 0.6:
            name = self.fresh_name(d)
            if name:
                self.rename(d, y, d, name)
        elif what < 0.8:
            z = self.some_name(d, (REG, LNK), not_last=True, avoid={y})
            if z and d.entries.get(z) is not d.entries.get(y):
                self.rename(d, y, d, z)
        else:
            other = self.pick_dir()
            name = self.fresh_name(other)
            if name and other is not d:
                self.rename(d, y, other, name)
        if d is not self.big or r.random() < self.cfg['p_list_big']:
            self.readdir(d, interleave=r.random() < 0.2)

    def op_write(self):
        node = self.model.regs.choice(self.rng)
        if node is not None:
            self.write(node)

    def op_truncate(self):
        node = self.model.regs.choice(self.rng)
        if node is not None:
            self.truncate(node)

    def op_link(self):
        node = self.some_node((REG, LNK))
        d = self.pick_dir()
        name = self.fresh_name(d) if self.rng.random() < 0.95 else self.some_name(d)
        if node is not None and name:
            self.link(node, d, name)

    def op_mkdir(self):
        d = self.pick_dir()
        if self.model.depth(d) >= 4 or len(self.model.dirs) > self.cfg['max_dirs']:
            return
        name = self.fresh_name(d) if self.rng.random() < 0.95 else self.some_name(d)
        if name:
            self.mkdir(d, name)

    def op_rmdir(self):
        d = self.model.dirs[self.rng.randrange(len(self.model.dirs))]
        if d.parent is None or d is self.big or d is self.mid:
            return
        if len(d.entries) and self.rng.random() < 0.7:   # empty it first, mostly
            for name in list(d.entries.map)[:8]:
                node = d.entries.get(name)
                if node.kind != DIR:
                    self.unlink(d, name)
                elif not len(node.entries) and node not in (self.big, self.mid):
                    self.rmdir(d, name)     # big and mid stay, even when empty
        self.rmdir(d.parent, d.name)

    def op_symlink(self):
        d = self.pick_dir()
        name = self.fresh_name(d) if self.rng.random() < 0.95 else self.some_name(d)
        if name:
            self.symlink(d, name)

    def op_setxattr(self):
        r = self.rng
        if self.heavy and r.random() < 0.3:
            node = r.choice(self.heavy)
            if node.kind == DIR and node.parent is None and node is not self.model.root:
                self.heavy.remove(node)
                return
            if node.kind != DIR and not node.links:
                self.heavy.remove(node)
                return
        else:
            node = self.some_node((REG, DIR, LNK) if os.geteuid() == 0 else (REG, DIR))
            if node is not None and len(self.heavy) < 4 and r.random() < 0.05:
                self.heavy.append(node)
        if node is not None:
            self.setxattr(node)

    def op_removexattr(self):
        node = self.some_node((REG, DIR, LNK) if os.geteuid() == 0 else (REG, DIR))
        if node is not None and (node.xattrs or self.rng.random() < 0.1):
            self.removexattr(node)

    def op_readdir(self):
        d = self.pick_dir()
        if d is self.big and self.rng.random() > self.cfg['p_list_big']:
            d = self.mid
        self.readdir(d, interleave=len(d.entries) > 10 and self.rng.random() < 0.3)

    OPS = {'create': 16, 'unlink': 12, 'rename': 16, 'issue27': 5, 'write': 8, 'truncate': 3,
           'link': 4, 'mkdir': 2, 'rmdir': 2, 'symlink': 3, 'setxattr': 7, 'removexattr': 3,
           'readdir': 3}

    def run(self, nops):
        """nops random operations; the big directory's size moves between targets."""
        weights = dict(self.OPS, **self.cfg.get('weights', {}))
        names = list(weights)
        funcs = [getattr(self, 'op_' + n) for n in names]
        w = [weights[n] for n in names]
        big_n = self.cfg['big']
        target = big_n
        t0, checks0 = time.monotonic(), self.seconds['full checks']
        for i in range(nops):
            if i % 1500 == 0:
                target = self.rng.choice([big_n, big_n, big_n // 4, big_n // 2])
            k = self.rng.choices(range(len(names)), w)[0]
            # half the creates and unlinks steer the big directory toward its target size
            if names[k] in ('create', 'unlink') and self.rng.random() < 0.5:
                k = names.index('create' if len(self.big.entries) < target else 'unlink')
                self.force_big = True
            try:
                funcs[k]()
            finally:
                self.force_big = False
            self.counts[names[k]] += 1
            self.n += 1
            self.biggest = max(self.biggest, len(self.big.entries))
            if self.n % self.cfg['full_every'] == 0:
                self.full_check(f'every {self.cfg["full_every"]} operations')
        self.seconds['operations'] += time.monotonic() - t0 - \
            (self.seconds['full checks'] - checks0)

    # -- setup, remounts, the crash --

    def setup(self):
        with self.timed('setup'):
            self._setup()

    def _setup(self):
        m = self.model
        mid = self.cfg['mid']
        for attr, name, pool in (('big', 'big', 2 * self.cfg['big']), ('mid', 'mid', 4 * mid)):
            self.mkdir(m.root, name)
            node = m.root.entries.get(name)
            node.pool = pool
            setattr(self, attr, node)
        for i in range(4):
            self.mkdir(m.root, f'd{i}')
        self.note(f'fill {self.cfg["big"]} + {mid} entries')
        for d, n in ((self.big, self.cfg['big']), (self.mid, mid)):
            for i in self.rng.sample(range(d.pool), n):
                name = entry_name(i)
                os.mknod(self.real(d, name), 0o644 | stat.S_IFREG)
                m.add(d, name, Node(REG))
        self.readdir(self.big)

    def sync(self):
        """fsync every file written since the last sync and every directory."""
        self.note(f'sync ({len(self.model.dirty)} files, {len(self.model.dirs)} directories)')
        for node in list(self.model.dirty):
            fd = os.open(self.real(node), os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        for d in self.model.dirs:
            fd = os.open(self.real(d), os.O_RDONLY | os.O_DIRECTORY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        self.model.dirty.clear()

    def reloaded(self):
        for d in self.model.dirs:
            d.entries.cookies.reload()

    def remount(self):
        self.note('clean unmount and mount')
        with self.timed('remount'):
            self.mnt.remount()
        self.reloaded()
        self.full_check('after a clean remount')

    def unsynced(self, k, cycle):
        """k operations after the sync on names of their own (u<cycle>-<i>): new files
        with data and xattrs, symlinks, directories, links and renames among them (to
        new names and over each other), unlinks; half-way an fsync of the root directory
        commits the journal so far. Returns every path they ever had."""
        r = self.rng
        live, ever = [], set()
        for i in range(k):
            if i == k // 2:
                fd = os.open(self.mnt.path, os.O_RDONLY | os.O_DIRECTORY)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
            d = self.pick_dir()
            rel = self.model.relpath(d, f'u{cycle}-{i}')
            path = os.path.join(self.mnt.path, rel)
            what = r.random()
            if what < 0.4 or not live:
                with open(path, 'wb') as f:
                    f.write(self.data(r.choice([0, 100, 5000, 70000])))
                if r.random() < 0.3:
                    os.setxattr(path, 'user.u', self.data(r.randrange(2000)))
            elif what < 0.5:
                os.symlink('u-target', path)
            elif what < 0.6:
                os.mkdir(path)
                with open(os.path.join(path, 'inner'), 'wb') as f:
                    f.write(b'inner')
            else:
                old = live[r.randrange(len(live))]
                if os.path.isdir(os.path.join(self.mnt.path, old)):
                    continue
                if what < 0.75:
                    os.link(os.path.join(self.mnt.path, old), path, follow_symlinks=False)
                elif what < 0.9:
                    over = live[r.randrange(len(live))]
                    if over != old and os.path.isfile(os.path.join(self.mnt.path, over)) \
                            and r.random() < 0.5:
                        path, rel = os.path.join(self.mnt.path, over), over
                        live.remove(over)
                    os.rename(os.path.join(self.mnt.path, old), path)
                    live.remove(old)
                else:
                    os.unlink(os.path.join(self.mnt.path, old))
                    live.remove(old)
                    continue
            live.append(rel)
            ever.add(rel)
        return ever

    def crash(self, cycle):
        """Sync, change more, kill -9, mount again (the journal replayed): the tree is
        the model's at the sync; the later changes are each there or not, readable."""
        with self.timed('sync'):
            self.sync()
        self.note('unsynced operations, kill -9')
        with self.timed('unsynced'):
            ever = self.unsynced(scaled(200, 20), cycle)
        self.mnt.fs.kill9()
        with self.timed('fsck'):
            r = fsck(self.server)
        if r.returncode != 0:
            self.fail(f'rmemfs-fsck after kill -9: exit {r.returncode}\n{r.stdout}{r.stderr}')
        with self.timed('mount after kill -9'):
            self.mnt.fs = self.env.rmemfs(self.server, mountpoint=self.mnt.path)
        self.reloaded()
        print('after kill -9:', *re.findall(r'replayed .*', self.mnt.fs.output())[:1])
        kept = 0
        for rel in sorted(ever, key=len, reverse=True):      # children first
            path = os.path.join(self.mnt.path, rel)
            try:
                st = os.lstat(path)
            except FileNotFoundError:
                continue
            kept += 1
            try:
                if stat.S_ISDIR(st.st_mode):
                    shutil.rmtree(path)
                    continue
                if stat.S_ISREG(st.st_mode):
                    with open(path, 'rb') as f:
                        f.read()
                os.listxattr(path, follow_symlinks=False)
                os.unlink(path)
            except OSError as e:
                self.fail(f'after kill -9: unsynced {rel!r}: {e}')
        print(f'kill -9: {kept} of {len(ever)} unsynced names were there')
        self.full_check('after kill -9 and a mount')

    def finish(self):
        self.full_check('at the end')
        self.note('unmount, rmemfs-fsck')
        with self.timed('unmount'):
            rc = self.mnt.fs.unmount()
        if rc != 0:
            self.fail(f'rmemfs exit status {rc} at unmount')
        with self.timed('fsck'):
            r = fsck(self.server)
        if r.returncode != 0 or 'no problems found' not in r.stdout:
            self.fail(f'rmemfs-fsck at the end: exit {r.returncode}\n{r.stdout}{r.stderr}')

    def report(self):
        if self.big is None:
            return f'seed {self.seed}: stopped in the setup'
        dirs = [d.entries.cookies for d in self.model.dirs]
        big = self.big.entries.cookies
        return (f'seed {self.seed}: {self.n} operations, {self.calls} getdents64 calls, '
                f'big directory up to {self.biggest} entries; cookie array (big / all '
                f'directories): {big.compactions} / {sum(c.compactions for c in dirs)} '
                f'compactions, {big.hole_reuses} / {sum(c.hole_reuses for c in dirs)} '
                f'cookies reused in their hole, {big.inserts} / '
                f'{sum(c.inserts for c in dirs)} after a compaction; up to '
                f'{self.model.most_xattrs} xattrs on an inode\n'
                f'{dict(sorted(self.counts.items()))}\nseconds: ' +
                ', '.join(f'{k} {v:.1f}' for k, v in self.seconds.items()))


# ---- the tests ----

def seed_of():
    s = os.environ.get(SEED_ENV)
    return int(s, 0) if s else random.SystemRandom().randrange(1 << 32)


def ops_scaled(n, minimum):
    """Operation counts scale with RMEM_TEST_SCALE squared: 0.1 is the RDMA VM's, where an
    operation costs ~50 ms (0.15 ms here) and the whole file must take a minute or so."""
    return scaled(n * SCALE, minimum)


# 'churn': one directory of thousands of entries under heavy churn; remount, kill -9.
# 'tree': more directories, links, symlinks, xattrs, renames of directories.
# Directory sizes scale with RMEM_TEST_SCALE, operation counts with its square.
CONFIGS = {
    'churn': dict(nops=ops_scaled(24000, 300), big=scaled(4000, 300), mid=scaled(100, 30),
                  p_big=0.55, p_list_big=0.4, full_every=scaled(8000), max_dirs=40, crash=True),
    'tree': dict(nops=ops_scaled(8000, 150), big=scaled(300, 100), mid=scaled(100, 30),
                 p_big=0.25, p_list_big=1.0, full_every=scaled(2500), max_dirs=120, crash=False,
                 weights={'mkdir': 8, 'rmdir': 6, 'link': 8, 'symlink': 6, 'setxattr': 14,
                          'removexattr': 6}),
}


@pytest.mark.parametrize('config', list(CONFIGS))
def test_model(env, config):
    if SYS_GETDENTS64 is None:
        pytest.skip(f'getdents64 syscall number unknown on {platform.machine()}')
    cfg = CONFIGS[config]
    seed = seed_of()
    print(f'{config}: seed {seed} (replay: {SEED_ENV}={seed}, RMEM_TEST_SCALE={SCALE:g})')
    server = env.server('256M')
    fs = env.rmemfs(server)       # kernel caches off: entry_timeout=0, attr_timeout=0
    d = Driver(env, server, fs, seed, cfg, config)
    part = cfg['nops'] // 3
    steps = [d.setup, lambda: d.run(part), d.remount, lambda: d.run(part),
             (lambda: d.crash(1)) if cfg['crash'] else d.remount,
             lambda: d.run(cfg['nops'] - 2 * part), d.finish]
    watchdog = threading.Thread(target=d.watchdog, daemon=True)
    watchdog.start()
    try:
        for step in steps:
            step()
    except Mismatch:
        raise
    except Exception as e:
        raise Mismatch(d.context(f'{type(e).__name__}: {e}')) from e
    finally:
        d.stop.set()
        watchdog.join()
        print(d.report())
