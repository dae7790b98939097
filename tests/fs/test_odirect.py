# SPDX-License-Identifier: GPL-2.0-or-later
"""O_DIRECT, buffered I/O and shared mmap on one file.

An O_DIRECT open of a file without page-cached opens is direct
(FOPEN_DIRECT_IO: writers of one file run in parallel, MAP_SHARED is
refused); one of a file that has cached opens, and every O_DIRECT open with
-o odirect=kernel, goes through the kernel's own O_DIRECT path, and a
MAP_SHARED mapping of it works. Either way the kernel keeps the three views
coherent: an O_DIRECT read first writes back dirty pages of its range
(buffered writes under the writeback cache, mmap stores), an O_DIRECT write
writes back and drops the cached pages of its range. The random test mixes
all of them on one file through several descriptors, opened in both orders,
and compares the file with a mirror after every step, with the writeback
cache on (the default) and off. RMEM_TEST_SEED replays another seed.
Direct opens need kernel 6.6 (FUSE 7.39); before, rmemfs sends every O_DIRECT
open the kernel's way and the tests of direct opens skip.
"""
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


class Mismatch(AssertionError):
    pass


class Mixer:
    """One file, an O_DIRECT and a buffered read-write descriptor, an O_DIRECT
    read-only one, and a shared mapping of one of them; a bytearray mirror."""

    def __init__(self, path, seed, direct_first):
        self.rng = random.Random(seed)
        self.seed = seed
        self.direct_first = direct_first
        self.mirror = bytearray()
        self.abuf = mmap.mmap(-1, MAX_SIZE + 2 * BS)  # page-aligned for O_DIRECT
        self.fds = {}
        self.map = None
        self.map_fd = None
        # direct first: the O_DIRECT descriptors are direct (no MAP_SHARED);
        # else they take the kernel's O_DIRECT path
        os.close(os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644))
        if not direct_first:
            self.fds['buffered'] = os.open(path, os.O_RDWR)
        self.fds['direct'] = os.open(path, os.O_RDWR | os.O_DIRECT)
        self.fds['buffered'] = self.fds.get('buffered') or os.open(path, os.O_RDWR)
        self.fds['direct-ro'] = os.open(path, os.O_RDONLY | os.O_DIRECT)

    def close(self):
        self.unmap()
        for fd in self.fds.values():
            os.close(fd)
        self.abuf.close()

    # ---- the shared mapping, always as long as the file ----

    def unmap(self):
        if self.map is not None:
            self.map.close()
            self.map = None

    def mapping(self):
        """A MAP_SHARED mapping of the whole file (None while it is empty),
        remapped after size changes, through the O_DIRECT or the buffered
        descriptor (picked at each remap)."""
        size = len(self.mirror)
        if self.map is not None and len(self.map) == size:
            return self.map
        self.unmap()
        if size == 0:
            return None
        self.map_fd = 'buffered' if self.direct_first else self.rng.choice(['direct', 'buffered'])
        self.map = mmap.mmap(self.fds[self.map_fd], size, mmap.MAP_SHARED,
                             mmap.PROT_READ | mmap.PROT_WRITE)
        return self.map

    # ---- I/O through the aligned buffer ----

    def dwrite(self, off, data):
        view = memoryview(self.abuf)[:len(data)]
        try:
            view[:] = data
            return os.pwritev(self.fds['direct'], [view], off)
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

    # ---- operations: each returns what it did ----

    def op_dwrite(self):
        off = self.rng.randrange(0, MAX_SIZE // BS) * BS
        length = self.rng.randrange(1, min(16, (MAX_SIZE - off) // BS) + 1) * BS
        data = self.rng.randbytes(length)
        n = self.dwrite(off, data)
        if n != length:
            raise Mismatch(f'O_DIRECT write {off}+{length} returned {n}')
        self.put(off, data)
        return f'O_DIRECT write {off}+{length}'

    def op_dread(self):
        off = self.rng.randrange(0, MAX_SIZE // BS) * BS
        length = self.rng.randrange(1, 17) * BS
        name = self.rng.choice(['direct', 'direct-ro'])
        self.expect(f'O_DIRECT read ({name})', off, self.dread(name, off, length),
                    self.mirror[off:off + length])
        return f'O_DIRECT read ({name}) {off}+{length}'

    def op_bwrite(self):
        off = self.rng.randrange(0, MAX_SIZE)
        length = self.rng.randrange(1, min(70_000, MAX_SIZE - off) + 1)
        data = self.rng.randbytes(length)
        n = os.pwrite(self.fds['buffered'], data, off)
        if n != length:
            raise Mismatch(f'buffered write {off}+{length} returned {n}')
        self.put(off, data)
        return f'buffered write {off}+{length}'

    def op_bread(self):
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
        name = self.rng.choice(['direct', 'buffered'])
        self.unmap()  # no access beyond the new end through a stale mapping
        os.ftruncate(self.fds[name], size)
        if size < old:
            del self.mirror[size:]
        else:
            self.mirror.extend(bytes(size - old))
        return f'ftruncate ({name}) {old} -> {size}'

    def op_mstore(self):
        m = self.mapping()
        if m is None:
            return self.op_bwrite()
        off = self.rng.randrange(0, len(m))
        length = self.rng.randrange(1, min(20_000, len(m) - off) + 1)
        data = self.rng.randbytes(length)
        m[off:off + length] = data
        self.mirror[off:off + length] = data
        sync = self.rng.random() < 0.3
        if sync:
            m.flush()
        return f'mmap store ({self.map_fd}) {off}+{length}{" + msync" if sync else ""}'

    def op_mload(self):
        m = self.mapping()
        if m is None:
            return self.op_bread()
        off = self.rng.randrange(0, len(m))
        length = self.rng.randrange(1, min(70_000, len(m) - off) + 1)
        self.expect(f'mmap load ({self.map_fd})', off, m[off:off + length],
                    self.mirror[off:off + length])
        return f'mmap load ({self.map_fd}) {off}+{length}'

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
        """The whole file through O_DIRECT first (it must write back what is
        dirty), then buffered, then through the mapping; sizes on every descriptor."""
        size = len(self.mirror)
        self.checked_bytes += size
        for name in ('direct', 'direct-ro'):
            self.expect(f'whole file, O_DIRECT ({name})', 0,
                        self.dread(name, 0, round_up(size) + BS), self.mirror)
        self.expect('whole file, buffered', 0,
                    os.pread(self.fds['buffered'], size + BS, 0), self.mirror)
        m = self.mapping()
        if m is not None:
            self.expect(f'whole file, mmap ({self.map_fd})', 0, m[:], self.mirror)
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
                self.counts[fn.__name__] = self.counts.get(fn.__name__, 0) + 1
                try:
                    history.append(f'step {step}.{k}: {fn()}')
                except Exception as e:
                    raise Mismatch(f'seed {self.seed}, step {step}.{k} ({fn.__name__}): {e}\n'
                                   + '\n'.join(history[-12:])) from e
            try:
                self.check()
            except Exception as e:
                raise Mismatch(f'seed {self.seed}, check after step {step}: {e}\n'
                               + '\n'.join(history[-12:])) from e


@pytest.mark.parametrize('direct_first', [False, True], ids=['cached-first', 'direct-first'])
def test_odirect_buffered_mmap_mix(mnt, direct_first):
    steps = scaled(300, 50)
    print(f'seed {SEED} (RMEM_TEST_SEED replays another), {steps} steps')
    mixer = Mixer(os.path.join(mnt, 'mix'), SEED, direct_first)
    try:
        mixer.run(steps)
    finally:
        mixer.close()
    print(f'ops {mixer.counts}, mean size checked {mixer.checked_bytes // steps} bytes')


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
    """A lone O_DIRECT open is direct: no MAP_SHARED, no page-cache copy. A
    buffered open and mapping of the file meanwhile are cached, and the two
    stay coherent: the O_DIRECT read writes back dirty pages and mmap stores
    first, buffered reads and the mapping see O_DIRECT writes at once."""
    p = os.path.join(mnt, 'direct-first')
    size = 64 * 1024
    abuf = mmap.mmap(-1, size)
    with open(p, 'wb') as f:
        f.truncate(size)
    dfd = os.open(p, os.O_RDWR | os.O_DIRECT)
    bfd = m = None
    try:
        with pytest.raises(OSError) as e:
            mmap.mmap(dfd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        assert e.value.errno == errno.ENODEV
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
