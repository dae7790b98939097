# SPDX-License-Identifier: GPL-2.0-or-later
"""O_DIRECT, buffered I/O and shared mmap on one file.

An O_DIRECT open of a file without page-cached opens is direct
(FOPEN_DIRECT_IO: writers of one file run in parallel; MAP_SHARED works, as
rmemfs asks the kernel for FUSE_DIRECT_IO_ALLOW_MMAP); one of a file that has
cached opens, and every O_DIRECT open with -o odirect=kernel, goes through
the kernel's own O_DIRECT path. Either way the kernel keeps the three views
coherent: an O_DIRECT read first writes back dirty pages of its range
(buffered writes under the writeback cache, mmap stores, msync'd or not), an
O_DIRECT write writes back and drops the cached pages of its range. The
random tests mix all of them on one file through several descriptors (O_DIRECT
and buffered ones opened in both orders; one O_DIRECT descriptor alone; two),
a shared mapping of every read-write one, O_DIRECT writes both synchronous
and through io_submit (libaio), and compare every byte of the file with a
mirror after every step, with the writeback cache on (the default) and off.
RMEM_TEST_SEED replays another seed.

Asynchronous O_DIRECT writes: the kernel drops the cached pages of the range
before it sends the write but not after it completes, so a buffered read or a
mapping's fault meanwhile would keep the old bytes; rmemfs drops the range
again before it answers (fuse-client/fuse/inval.h), and the test with readers
running beside the writes checks that a read after the completion sees the
new bytes.
Direct opens need kernel 6.6 (FUSE 7.39); before, rmemfs sends every O_DIRECT
open the kernel's way and the tests of direct opens skip.
"""
import ctypes
import errno
import mmap
import os
import platform
import random
import threading

import pytest

from conftest import pattern, resident_pages, scaled, stats

BS = 4096
MAX_SIZE = 1 << 20
SEED = int(os.environ.get('RMEM_TEST_SEED', '909'))
WAIT = 30  # seconds any completion or thread may take


def direct_opens_supported():
    major, minor = (int(x) for x in platform.release().split('.')[:2])
    return (major, minor) >= (6, 6)


needs_direct_opens = pytest.mark.skipif(not direct_opens_supported(),
                                        reason='direct opens need kernel 6.6 (FUSE 7.39)')


def round_up(n):
    return (n + BS - 1) // BS * BS


@pytest.fixture(params=[[], ['writeback_cache=off']], ids=['writeback_cache', 'no-wbcache'])
def mnt(env, request):
    """A default mount (kernel caches on, as users run it), writeback cache on
    or off; a clean unmount with exit status 0 at the end."""
    server = env.server('64M')
    fs = env.rmemfs(server, options=request.param, caches=True)
    yield fs.mountpoint
    assert fs.unmount() == 0, f'rmemfs exit status at unmount:\n{fs.output()}'


@pytest.fixture
def kernel_odirect_mnt(env):
    """-o odirect=kernel: every O_DIRECT open takes the kernel's O_DIRECT path."""
    fs = env.rmemfs(env.server('64M'), options=['odirect=kernel'], caches=True)
    yield fs.mountpoint
    assert fs.unmount() == 0, f'rmemfs exit status at unmount:\n{fs.output()}'


# ---- io_submit(2) through libaio (what fio's libaio engine and databases use) ----

class _Iocb(ctypes.Structure):
    """struct iocb of <linux/aio_abi.h> (libaio's is the same 64 bytes)."""
    _fields_ = [('data', ctypes.c_uint64), ('key', ctypes.c_uint32),
                ('rw_flags', ctypes.c_int32), ('opcode', ctypes.c_uint16),
                ('reqprio', ctypes.c_int16), ('fildes', ctypes.c_uint32),
                ('buf', ctypes.c_uint64), ('nbytes', ctypes.c_uint64),
                ('offset', ctypes.c_int64), ('reserved2', ctypes.c_uint64),
                ('flags', ctypes.c_uint32), ('resfd', ctypes.c_uint32)]


class _IoEvent(ctypes.Structure):
    _fields_ = [('data', ctypes.c_uint64), ('obj', ctypes.c_uint64),
                ('res', ctypes.c_int64), ('res2', ctypes.c_int64)]


class _Timespec(ctypes.Structure):
    _fields_ = [('tv_sec', ctypes.c_long), ('tv_nsec', ctypes.c_long)]


IO_CMD_PWRITE = 1


def load_libaio():
    """libaio.so.1 (fio's libaio engine needs it), or None."""
    try:
        lib = ctypes.CDLL('libaio.so.1')
    except OSError:
        return None
    lib.io_setup.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_void_p)]
    lib.io_destroy.argtypes = [ctypes.c_void_p]
    lib.io_submit.argtypes = [ctypes.c_void_p, ctypes.c_long,
                              ctypes.POINTER(ctypes.POINTER(_Iocb))]
    lib.io_getevents.argtypes = [ctypes.c_void_p, ctypes.c_long, ctypes.c_long,
                                 ctypes.POINTER(_IoEvent), ctypes.POINTER(_Timespec)]
    return lib


class Aio:
    """One io_context; submit() sends writes at once and waits for all of
    their completions (at most WAIT seconds). libaio returns -errno."""

    DEPTH = 16

    def __init__(self, lib):
        self.lib = lib
        self.ctx = ctypes.c_void_p()
        rc = lib.io_setup(self.DEPTH, ctypes.byref(self.ctx))
        if rc < 0:
            raise OSError(-rc, f'io_setup: {os.strerror(-rc)}')

    def close(self):
        self.lib.io_destroy(self.ctx)

    def submit(self, fd, buf, pieces):
        """Writes buf[at:at + length] at off for each (off, at, length) of
        pieces (buf: a page-aligned mmap), all at once; their results, in order."""
        base = ctypes.addressof(ctypes.c_char.from_buffer(buf))
        n = len(pieces)
        assert 0 < n <= self.DEPTH
        cbs = [_Iocb(opcode=IO_CMD_PWRITE, fildes=fd, nbytes=length, offset=off,
                     buf=base + at, data=i) for i, (off, at, length) in enumerate(pieces)]
        ptrs = (ctypes.POINTER(_Iocb) * n)(*(ctypes.pointer(cb) for cb in cbs))
        rc = self.lib.io_submit(self.ctx, n, ptrs)
        if rc != n:
            raise OSError(-rc if rc < 0 else errno.EAGAIN, f'io_submit: {rc} of {n}')
        events = (_IoEvent * n)()
        rc = self.lib.io_getevents(self.ctx, n, n, events, ctypes.byref(_Timespec(WAIT, 0)))
        if rc != n:
            raise OSError(-rc if rc < 0 else errno.ETIMEDOUT, f'io_getevents: {rc} of {n}')
        results = [None] * n
        for ev in events:
            results[ev.data] = ev.res
        return results

    def write(self, fd, buf, length, off):
        """Writes buf[:length] at off; the result."""
        return self.submit(fd, buf, [(off, 0, length)])[0]


class Mismatch(AssertionError):
    pass


DIRECT_RW = os.O_RDWR | os.O_DIRECT
DIRECT_RO = os.O_RDONLY | os.O_DIRECT
# the descriptors of a Mixer, in the order they are opened: O_DIRECT ones
# opened before any buffered one are direct opens, the rest take the kernel's
# O_DIRECT path
LAYOUTS = {
    'cached-first': [('buffered', os.O_RDWR), ('direct', DIRECT_RW), ('direct-ro', DIRECT_RO)],
    'direct-first': [('direct', DIRECT_RW), ('buffered', os.O_RDWR), ('direct-ro', DIRECT_RO)],
    'one-direct': [('direct', DIRECT_RW)],
    'two-direct': [('direct', DIRECT_RW), ('direct2', DIRECT_RW)],
}


class Mixer:
    """One file, the descriptors of a layout, a shared mapping of each
    read-write one, and a bytearray mirror."""

    def __init__(self, path, seed, layout, aio_lib):
        self.rng = random.Random(seed)
        self.seed = seed
        self.mirror = bytearray()
        self.abuf = mmap.mmap(-1, MAX_SIZE + 2 * BS)  # page-aligned for O_DIRECT
        self.fds = {}
        self.maps = {}
        self.aio = None
        os.close(os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644))
        for name, flags in LAYOUTS[layout]:
            self.fds[name] = os.open(path, flags)
        flags = dict(LAYOUTS[layout])
        self.direct = [n for n in self.fds if flags[n] & os.O_DIRECT]
        self.direct_rw = [n for n in self.direct if flags[n] & os.O_RDWR]
        self.buffered = [n for n in self.fds if not flags[n] & os.O_DIRECT]
        self.rw = [n for n in self.fds if flags[n] & os.O_RDWR]
        if aio_lib:
            self.aio = Aio(aio_lib)

    def close(self):
        self.unmap()
        for fd in self.fds.values():
            os.close(fd)
        if self.aio:
            self.aio.close()
        self.abuf.close()

    # ---- the shared mappings, always as long as the file ----

    def unmap(self):
        for m in self.maps.values():
            m.close()
        self.maps.clear()

    def mapping(self, name):
        """A MAP_SHARED mapping of the whole file through descriptor name (None
        while the file is empty), made again after size changes."""
        size = len(self.mirror)
        m = self.maps.get(name)
        if m is not None and len(m) == size:
            return m
        if m is not None:
            m.close()
            del self.maps[name]
        if size == 0:
            return None
        self.maps[name] = mmap.mmap(self.fds[name], size, mmap.MAP_SHARED,
                                    mmap.PROT_READ | mmap.PROT_WRITE)
        return self.maps[name]

    # ---- I/O through the aligned buffer ----

    def dwrite(self, name, off, data, use_aio):
        view = memoryview(self.abuf)[:len(data)]
        try:
            view[:] = data
            if use_aio:
                return self.aio.write(self.fds[name], self.abuf, len(data), off)
            return os.pwritev(self.fds[name], [view], off)
        finally:
            view.release()

    def dread(self, name, off, length):
        view = memoryview(self.abuf)[:length]
        try:
            n = os.preadv(self.fds[name], [view], off)
            return bytes(view[:n])
        finally:
            view.release()

    def put(self, off, data):
        if off > len(self.mirror):
            self.mirror.extend(bytes(off - len(self.mirror)))
        self.mirror[off:off + len(data)] = data

    # ---- operations: each returns what it did (None: the layout has no descriptor for it) ----

    def op_dwrite(self):
        name = self.rng.choice(self.direct_rw)
        off = self.rng.randrange(0, MAX_SIZE // BS) * BS
        length = self.rng.randrange(1, min(16, (MAX_SIZE - off) // BS) + 1) * BS
        data = self.rng.randbytes(length)
        use_aio = self.aio is not None and self.rng.random() < 0.5
        how = 'io_submit' if use_aio else 'write'
        n = self.dwrite(name, off, data, use_aio)
        if n != length:
            raise Mismatch(f'O_DIRECT {how} ({name}) {off}+{length} returned {n}')
        self.put(off, data)
        return f'O_DIRECT {how} ({name}) {off}+{length}'

    def op_dread(self):
        off = self.rng.randrange(0, MAX_SIZE // BS) * BS
        length = self.rng.randrange(1, 17) * BS
        name = self.rng.choice(self.direct)
        self.expect(f'O_DIRECT read ({name})', off, self.dread(name, off, length),
                    self.mirror[off:off + length])
        return f'O_DIRECT read ({name}) {off}+{length}'

    def op_bwrite(self):
        if not self.buffered:
            return None
        off = self.rng.randrange(0, MAX_SIZE)
        length = self.rng.randrange(1, min(70_000, MAX_SIZE - off) + 1)
        data = self.rng.randbytes(length)
        n = os.pwrite(self.fds['buffered'], data, off)
        if n != length:
            raise Mismatch(f'buffered write {off}+{length} returned {n}')
        self.put(off, data)
        return f'buffered write {off}+{length}'

    def op_bread(self):
        if not self.buffered:
            return None
        off = self.rng.randrange(0, MAX_SIZE)
        length = self.rng.randrange(1, 70_000)
        self.expect('buffered read', off, os.pread(self.fds['buffered'], length, off),
                    self.mirror[off:off + length])
        return f'buffered read {off}+{length}'

    def op_truncate(self):
        old = len(self.mirror)
        size = self.rng.choice([0, self.rng.randrange(0, MAX_SIZE),
                                self.rng.randrange(0, MAX_SIZE // BS) * BS,
                                min(MAX_SIZE, old + self.rng.randrange(1, 50_000))])
        name = self.rng.choice(self.rw)
        self.unmap()  # no access beyond the new end through a stale mapping
        os.ftruncate(self.fds[name], size)
        if size < old:
            del self.mirror[size:]
        else:
            self.mirror.extend(bytes(size - old))
        return f'ftruncate ({name}) {old} -> {size}'

    def op_mstore(self):
        name = self.rng.choice(self.rw)
        m = self.mapping(name)
        if m is None:
            return None
        off = self.rng.randrange(0, len(m))
        length = self.rng.randrange(1, min(20_000, len(m) - off) + 1)
        data = self.rng.randbytes(length)
        m[off:off + length] = data
        self.mirror[off:off + length] = data
        sync = self.rng.random() < 0.3
        if sync:
            m.flush()
        return f'mmap store ({name}) {off}+{length}{" + msync" if sync else ""}'

    def op_mload(self):
        name = self.rng.choice(self.rw)
        m = self.mapping(name)
        if m is None:
            return None
        off = self.rng.randrange(0, len(m))
        length = self.rng.randrange(1, min(70_000, len(m) - off) + 1)
        self.expect(f'mmap load ({name})', off, m[off:off + length],
                    self.mirror[off:off + length])
        return f'mmap load ({name}) {off}+{length}'

    # ---- checks ----

    def expect(self, what, off, got, want):
        if got == want:
            return
        got, want = bytes(got), bytes(want)
        first = next((k for k in range(min(len(got), len(want))) if got[k] != want[k]),
                     min(len(got), len(want)))
        raise Mismatch(f'{what}: {len(got)} bytes from {off}, want {len(want)}; '
                       f'first difference at byte {off + first}')

    def check(self):
        """The whole file through every O_DIRECT descriptor first (they must
        write back what is dirty), then the buffered one, then through every
        mapping; sizes on every descriptor."""
        size = len(self.mirror)
        self.checked_bytes += size
        for name in self.direct:
            self.expect(f'whole file, O_DIRECT ({name})', 0,
                        self.dread(name, 0, round_up(size) + BS), self.mirror)
        for name in self.buffered:
            self.expect('whole file, buffered', 0,
                        os.pread(self.fds[name], size + BS, 0), self.mirror)
        for name in self.rw:
            m = self.mapping(name)
            if m is not None:
                self.expect(f'whole file, mmap ({name})', 0, m[:], self.mirror)
        for name, fd in self.fds.items():
            if os.fstat(fd).st_size != size:
                raise Mismatch(f'fstat ({name}) size {os.fstat(fd).st_size}, want {size}')

    def run(self, steps):
        ops = [(self.op_dwrite, 25), (self.op_dread, 10), (self.op_bwrite, 20),
               (self.op_bread, 8), (self.op_truncate, 8), (self.op_mstore, 20),
               (self.op_mload, 8)]
        funcs = [f for f, _ in ops]
        weights = [w for _, w in ops]
        history = []
        self.counts = {}
        self.checked_bytes = 0
        for step in range(steps):
            # a few operations between checks, so dirty pages meet O_DIRECT I/O
            for k in range(self.rng.randrange(1, 4)):
                fn = self.rng.choices(funcs, weights)[0]
                try:
                    did = fn()
                except Exception as e:
                    raise Mismatch(f'seed {self.seed}, step {step}.{k} ({fn.__name__}): {e}\n'
                                   + '\n'.join(history[-12:])) from e
                if did is not None:
                    self.counts[fn.__name__] = self.counts.get(fn.__name__, 0) + 1
                    history.append(f'step {step}.{k}: {did}')
            try:
                self.check()
            except Exception as e:
                raise Mismatch(f'seed {self.seed}, check after step {step}: {e}\n'
                               + '\n'.join(history[-12:])) from e


def run_mixer(mnt, layout, steps):
    print(f'seed {SEED} (RMEM_TEST_SEED replays another), {steps} steps')
    mixer = Mixer(os.path.join(mnt, 'mix'), SEED, layout, load_libaio())
    try:
        mixer.run(steps)
    finally:
        mixer.close()
    print(f'ops {mixer.counts}, mean size checked {mixer.checked_bytes // steps} bytes')


@pytest.mark.parametrize('layout', ['cached-first', 'direct-first'])
def test_odirect_buffered_mmap_mix(mnt, layout):
    run_mixer(mnt, layout, scaled(300, 50))


@needs_direct_opens
@pytest.mark.parametrize('layout', ['one-direct', 'two-direct'])
def test_mapped_odirect_descriptors(mnt, layout):
    """What a data-integrity tool does on one O_DIRECT descriptor (or two):
    O_DIRECT reads and writes (also io_submit) interleaved with loads and
    stores (msync'd or not) through a shared mapping of the same descriptor;
    every byte checked through each view after every step."""
    run_mixer(mnt, layout, scaled(200, 40))


def test_mmap_of_odirect_descriptor(kernel_odirect_mnt):
    """odirect=kernel: MAP_SHARED of an O_DIRECT descriptor works; an O_DIRECT
    read after a store and msync sees the store; O_DIRECT I/O leaves no
    page-cache copy."""
    p = os.path.join(kernel_odirect_mnt, 'direct-mapped')
    size = 64 * 1024
    buf = mmap.mmap(-1, size)
    buf.write(pattern(91, size))
    fd = os.open(p, os.O_RDWR | os.O_CREAT | os.O_DIRECT, 0o644)
    try:
        assert os.pwritev(fd, [buf], 0) == size
        assert os.preadv(fd, [buf], 0) == size
        assert resident_pages(fd, size) == 0, 'O_DIRECT I/O left pages in the page cache'
        m = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        try:
            assert m[:] == buf[:]
            m[5000:5011] = b'mmap store!'
            m.flush()
        finally:
            m.close()
        out = mmap.mmap(-1, size)
        assert os.preadv(fd, [out], 0) == size
        assert out[5000:5011] == b'mmap store!'
        assert out[:5000] == buf[:5000] and out[5011:] == buf[5011:]
    finally:
        os.close(fd)


def test_odirect_coherence_with_cached_pages(mnt):
    """Each direction once, by hand: O_DIRECT reads reach the daemon and see
    buffered writes and mmap stores not yet written back; buffered reads and
    mmap loads of cached pages see O_DIRECT writes."""
    p = os.path.join(mnt, 'coherent')
    size = 64 * 1024
    abuf = mmap.mmap(-1, size)
    bfd = os.open(p, os.O_RDWR | os.O_CREAT, 0o644)
    dfd = os.open(p, os.O_RDWR | os.O_DIRECT)
    try:
        want = bytearray(pattern(92, size))
        os.pwrite(bfd, want, 0)  # with the writeback cache: dirty pages
        written = stats(mnt)['bytes_written']
        read = stats(mnt)['bytes_read']
        assert os.preadv(dfd, [abuf], 0) == size and abuf[:] == want
        assert stats(mnt)['bytes_read'] >= read + size, 'the O_DIRECT read did not reach rmemfs'
        print(f'dirty pages written back by the O_DIRECT read: '
              f'{stats(mnt)["bytes_written"] - written} bytes')

        m = mmap.mmap(dfd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        try:
            m[8000:8100] = b'm' * 100  # no msync
            want[8000:8100] = b'm' * 100
            assert os.preadv(dfd, [abuf], 0) == size and abuf[:] == want

            assert os.pread(bfd, size, 0) == want and m[:] == want  # pages cached again
            abuf[:] = pattern(93, size)
            want[16384:16384 + 8192] = abuf[:8192]
            assert os.pwritev(dfd, [memoryview(abuf)[:8192]], 16384) == 8192
            assert os.pread(bfd, size, 0) == want
            assert m[:] == want
        finally:
            m.close()
    finally:
        os.close(dfd)
        os.close(bfd)
        abuf.close()


@needs_direct_opens
def test_direct_open_then_cached_open(mnt):
    """A lone O_DIRECT open is direct. A buffered open and mapping of the
    file meanwhile are cached, and the two stay coherent: the O_DIRECT read
    writes back dirty pages and mmap stores first, buffered reads and the
    mapping see O_DIRECT writes at once."""
    p = os.path.join(mnt, 'direct-first')
    size = 64 * 1024
    abuf = mmap.mmap(-1, size)
    with open(p, 'wb') as f:
        f.truncate(size)
    dfd = os.open(p, os.O_RDWR | os.O_DIRECT)
    bfd = m = None
    try:
        bfd = os.open(p, os.O_RDWR)
        want = bytearray(pattern(94, size))
        os.pwrite(bfd, want, 0)  # with the writeback cache: dirty pages
        written = stats(mnt)['bytes_written']
        assert os.preadv(dfd, [abuf], 0) == size and abuf[:] == want
        print(f'dirty pages written back by the O_DIRECT read: '
              f'{stats(mnt)["bytes_written"] - written} bytes')
        assert os.pread(bfd, size, 0) == want  # cached again
        abuf[:8192] = pattern(95, 8192)
        assert os.pwritev(dfd, [memoryview(abuf)[:8192]], 16384) == 8192
        want[16384:16384 + 8192] = pattern(95, 8192)
        assert os.pread(bfd, size, 0) == want
        m = mmap.mmap(bfd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        m[100:200] = b'x' * 100  # no msync
        want[100:200] = b'x' * 100
        assert os.preadv(dfd, [abuf], 0) == size and abuf[:] == want
        abuf[:4096] = pattern(96, 4096)
        assert os.pwritev(dfd, [memoryview(abuf)[:4096]], 32768) == 4096
        want[32768:36864] = pattern(96, 4096)
        assert m[:] == want
    finally:
        if m is not None:
            m.close()
        if bfd is not None:
            os.close(bfd)
        os.close(dfd)
        abuf.close()


@needs_direct_opens
def test_mapped_direct_descriptor(mnt):
    """Each direction once, by hand, on one direct O_DIRECT descriptor and a
    shared mapping of it: an O_DIRECT read sees stores through the mapping
    with and without msync (the kernel writes the range back first, as ext4
    does); loads through the mapping see O_DIRECT writes, synchronous and
    io_submit'ed, at once; O_DIRECT I/O itself leaves no page-cache copy."""
    aio_lib = load_libaio()
    p = os.path.join(mnt, 'mapped-direct')
    size = 64 * 1024
    abuf = mmap.mmap(-1, size)
    fd = os.open(p, os.O_RDWR | os.O_CREAT | os.O_DIRECT, 0o644)
    m = aio = None
    try:
        want = bytearray(pattern(97, size))
        abuf[:] = want
        assert os.pwritev(fd, [abuf], 0) == size
        assert resident_pages(fd, size) == 0, 'O_DIRECT I/O left pages in the page cache'
        m = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        assert m[:] == want
        for off, sync in ((5000, False), (40000, True)):
            m[off:off + 11] = b'mmap store!'
            want[off:off + 11] = b'mmap store!'
            if sync:
                m.flush()
            assert os.preadv(fd, [abuf], 0) == size
            assert abuf[:] == want, f'O_DIRECT read after a store at {off}, msync {sync}'
        abuf[:8192] = pattern(98, 8192)
        want[16384:24576] = abuf[:8192]
        assert os.pwritev(fd, [memoryview(abuf)[:8192]], 16384) == 8192
        assert m[:] == want, 'mapping after an O_DIRECT write'
        if aio_lib:
            aio = Aio(aio_lib)
            abuf[:4096] = pattern(99, 4096)
            want[57344:61440] = abuf[:4096]
            assert aio.write(fd, abuf, 4096, 57344) == 4096
            assert m[:] == want, 'mapping after an io_submit O_DIRECT write'
    finally:
        if aio is not None:
            aio.close()
        if m is not None:
            m.close()
        os.close(fd)
        abuf.close()


# how the page cache of the file gets filled beside the O_DIRECT writer
READERS = ['buffered-writer-last', 'buffered-writer-first', 'mapped']
PIECE = 64 * 1024  # the writes of one round, all in flight at once
NREADERS = 4


@needs_direct_opens
@pytest.mark.parametrize('readers', READERS)
def test_reads_after_async_direct_writes(mnt, readers):
    """xfstests generic/451: O_DIRECT writes through io_submit while two
    threads keep reading the file, buffered (the O_DIRECT descriptor opened
    after their opens: the kernel's O_DIRECT path; or before: a direct open)
    or through a shared mapping of another direct descriptor; after each
    write's completion a read must return what it wrote."""
    aio_lib = load_libaio()
    if aio_lib is None:
        pytest.skip('no libaio.so.1')
    p = os.path.join(mnt, 'aio-dio')
    size, rounds = 10 * PIECE, scaled(300, 50)
    with open(p, 'wb') as f:
        f.write(bytes(size))
    stop = threading.Event()
    fds, threads, errors = [], [], []
    buf = mmap.mmap(-1, size)
    aio = m = None

    def read_loop(read):
        try:
            while not stop.is_set():
                read()
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    try:
        if readers != 'buffered-writer-last':
            fds.append(os.open(p, os.O_RDWR | os.O_DIRECT))
        if readers == 'mapped':
            fds.append(os.open(p, os.O_RDWR | os.O_DIRECT))
            m = mmap.mmap(fds[-1], size, mmap.MAP_SHARED, mmap.PROT_READ)
            def read_after():
                return m[:]
            reads = [read_after] * NREADERS
        else:
            rfds = [os.open(p, os.O_RDONLY) for _ in range(NREADERS)]
            fds += rfds
            reads = [lambda fd=fd: os.pread(fd, size, 0) for fd in rfds]
            def read_after():
                fd = os.open(p, os.O_RDONLY)
                try:
                    return os.pread(fd, size, 0)
                finally:
                    os.close(fd)
        if readers == 'buffered-writer-last':
            fds.insert(0, os.open(p, os.O_RDWR | os.O_DIRECT))
        threads = [threading.Thread(target=read_loop, args=(r,)) for r in reads]
        for t in threads:
            t.start()
        aio = Aio(aio_lib)
        stale = []
        pieces = [(off, off, PIECE) for off in range(0, size, PIECE)]
        for i in range(rounds):
            buf[:] = bytes([0x55 + i % 2]) * size
            assert aio.submit(fds[0], buf, pieces) == [PIECE] * len(pieces)
            if read_after() != buf[:]:
                stale.append(i)
                if len(stale) == 10:
                    break  # enough to say it
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=WAIT)
        if aio is not None:
            aio.close()
        if m is not None:
            m.close()
        for fd in fds:
            os.close(fd)
        buf.close()
    assert not any(t.is_alive() for t in threads), 'a reader hung'
    assert not errors, errors
    assert not stale, f'reads after an io_submit write returned old bytes in rounds {stale}'


@needs_direct_opens
def test_parallel_direct_writers(mnt):
    """Four threads, each with its own O_DIRECT descriptor, write 4 KiB pieces
    interleaved within the same cache blocks of one file (FOPEN_PARALLEL_
    DIRECT_WRITES lets the kernel send them at once); every piece lands."""
    p = os.path.join(mnt, 'parallel')
    nthreads, rounds, piece = 4, scaled(64, 16), 4096
    size = nthreads * rounds * piece
    with open(p, 'wb') as f:
        f.truncate(size)  # no write past EOF: those the kernel serialises
    errors = []

    def writer(k):
        fd = os.open(p, os.O_WRONLY | os.O_DIRECT)
        buf = mmap.mmap(-1, piece)
        try:
            for r in range(rounds):
                i = r * nthreads + k  # neighbours in one 64 KiB block belong to others
                buf[:] = pattern(1000 + i, piece)
                assert os.pwritev(fd, [buf], i * piece) == piece
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)
        finally:
            buf.close()
            os.close(fd)

    threads = [threading.Thread(target=writer, args=(k,)) for k in range(nthreads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads), 'a writer hung'
    assert not errors, errors
    with open(p, 'rb') as f:
        data = f.read()
    for i in range(nthreads * rounds):
        assert data[i * piece:(i + 1) * piece] == pattern(1000 + i, piece), f'piece {i}'
