# SPDX-License-Identifier: GPL-2.0-or-later
"""Random-operation integrity test: random writes, reads, truncates, holes,
fallocate, punch, copy_file_range, shared-mmap writes and reopens across
several files, each checked against an in-memory mirror after every step
(fixed seed, so a failure replays). Once buffered, once with O_DIRECT, and
the final state again after a remount.
"""
import collections
import mmap
import os
import random

import pytest

from conftest import FALLOC_FL_KEEP_SIZE, FALLOC_FL_PUNCH_HOLE, fallocate, mounted_fs, scaled

BS = 4096
MAX_SIZE = 768 * 1024
NFILES = 4


class Mismatch(AssertionError):
    pass


class Driver:
    def __init__(self, base, direct, seed):
        self.base = base
        self.direct = direct
        self.rng = random.Random(seed)
        self.mirror = [bytearray() for _ in range(NFILES)]
        self.paths = [os.path.join(base, f'file{i}') for i in range(NFILES)]
        self.fds = [None] * NFILES
        self.history = collections.deque(maxlen=25)
        self.counts = collections.Counter()
        for i in range(NFILES):
            os.close(os.open(self.paths[i], os.O_CREAT | os.O_TRUNC | os.O_WRONLY, 0o644))
            self.open(i)
        self.abuf = mmap.mmap(-1, 2 << 20)  # aligned buffer for O_DIRECT

    def open(self, i):
        flags = os.O_RDWR | (os.O_DIRECT if self.direct else 0)
        self.fds[i] = os.open(self.paths[i], flags)

    def close(self):
        for fd in self.fds:
            if fd is not None:
                os.close(fd)
        self.abuf.close()

    # ---- aligned I/O helpers ----

    def align(self, off, length):
        if not self.direct:
            return off, max(1, length)
        off -= off % BS
        length = max(BS, (length + BS - 1) // BS * BS)
        return off, length

    def pread(self, i, off, length):
        if not self.direct:
            return os.pread(self.fds[i], length, off)
        a_off = off - off % BS
        a_len = (off + length - a_off + BS - 1) // BS * BS
        view = memoryview(self.abuf)[:a_len]
        n = os.preadv(self.fds[i], [view], a_off)
        data = bytes(view[:n])
        view.release()
        return data[off - a_off:off - a_off + length]

    def pwrite(self, i, off, data):
        if not self.direct:
            return os.pwrite(self.fds[i], data, off)
        view = memoryview(self.abuf)[:len(data)]
        view[:] = data
        n = os.pwritev(self.fds[i], [view], off)
        view.release()
        return n

    # ---- checks ----

    def check_range(self, i, off, length, op):
        want = bytes(self.mirror[i][off:off + length])
        got = self.pread(i, off, length)
        if got != want:
            first = next((k for k in range(min(len(got), len(want))) if got[k] != want[k]),
                         min(len(got), len(want)))
            raise Mismatch(f'{op}: file{i} [{off}, +{length}) differs at byte {off + first} '
                           f'(got {len(got)} bytes, want {len(want)})\nlast ops:\n' +
                           '\n'.join(self.history))

    def check_size(self, i, op):
        size = os.fstat(self.fds[i]).st_size
        if size != len(self.mirror[i]):
            raise Mismatch(f'{op}: file{i} size {size} != {len(self.mirror[i])}\nlast ops:\n' +
                           '\n'.join(self.history))

    def check_all(self, op):
        for i in range(NFILES):
            self.check_size(i, op)
            self.check_range(i, 0, len(self.mirror[i]) + BS, op)

    # ---- operations ----

    def resize(self, i, size):
        m = self.mirror[i]
        if size < len(m):
            del m[size:]
        else:
            m.extend(bytes(size - len(m)))

    def op_write(self, i):
        r = self.rng
        off = r.randrange(0, MAX_SIZE)
        length = r.choice([1, 7, 100, 4095, 4096, 4097, 9000, 65536, r.randrange(1, 200_000)])
        off, length = self.align(off, length)
        length = min(length, MAX_SIZE + BS - off)
        data = r.randbytes(length)
        assert self.pwrite(i, off, data) == length
        if off > len(self.mirror[i]):
            self.resize(i, off)
        self.mirror[i][off:off + length] = data
        return f'write file{i} {off}+{length}', off, length

    def op_read(self, i):
        r = self.rng
        off = r.randrange(0, MAX_SIZE)
        length = r.randrange(1, 150_000)
        return f'read file{i} {off}+{length}', off, length

    def op_truncate(self, i):
        size = self.rng.choice([0, self.rng.randrange(0, MAX_SIZE),
                                self.rng.randrange(0, MAX_SIZE // BS) * BS])
        os.ftruncate(self.fds[i], size)
        old = len(self.mirror[i])
        self.resize(i, size)
        lo = max(0, min(old, size) - BS)
        return f'truncate file{i} {old}->{size}', lo, 2 * BS + abs(size - old)

    def op_punch(self, i):
        r = self.rng
        off = r.randrange(0, MAX_SIZE)
        length = r.randrange(1, 100_000)
        fallocate(self.fds[i], FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, off, length)
        m = self.mirror[i]
        end = min(off + length, len(m))
        if off < end:
            m[off:end] = bytes(end - off)
        return f'punch file{i} {off}+{length}', max(0, off - BS), length + 2 * BS

    def op_fallocate(self, i):
        r = self.rng
        off = r.randrange(0, MAX_SIZE)
        length = r.randrange(1, 100_000)
        keep = r.random() < 0.5
        fallocate(self.fds[i], FALLOC_FL_KEEP_SIZE if keep else 0, off, length)
        if not keep and off + length > len(self.mirror[i]):
            self.resize(i, off + length)
        return f'fallocate{" keep" if keep else ""} file{i} {off}+{length}', off, length

    def op_mmap(self, i):
        size = len(self.mirror[i])
        if size == 0:
            return self.op_write(i)
        r = self.rng
        off = r.randrange(0, size)
        length = min(size - off, r.randrange(1, 20_000))
        data = r.randbytes(length)
        # a buffered descriptor of its own: with O_DIRECT this mixes the two worlds
        fd = os.open(self.paths[i], os.O_RDWR)
        try:
            m = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
            m[off:off + length] = data
            m.flush()
            m.close()
        finally:
            os.close(fd)
        self.mirror[i][off:off + length] = data
        return f'mmap-write file{i} {off}+{length}', off, length

    def op_copy(self, i):
        r = self.rng
        j = r.randrange(NFILES)
        src_size = len(self.mirror[j])
        off_in = r.randrange(0, src_size + 1) if src_size else 0
        length = r.randrange(1, 150_000)
        off_out = r.randrange(0, MAX_SIZE)
        if i == j and not (off_out + length <= off_in or off_in + length <= off_out):
            off_out = (off_in + length) if off_in + 2 * length < MAX_SIZE else 0
            if off_out + length > off_in and off_out < off_in + length:
                return self.op_read(i)
        n = os.copy_file_range(self.fds[j], self.fds[i], length, off_in, off_out)
        want = max(0, min(length, src_size - off_in))
        if n != want:
            raise Mismatch(f'copy_file_range returned {n}, expected {want}')
        if n:
            chunk = bytes(self.mirror[j][off_in:off_in + n])
            if off_out > len(self.mirror[i]):
                self.resize(i, off_out)
            self.mirror[i][off_out:off_out + n] = chunk
        return f'copy file{j} {off_in} -> file{i} {off_out} +{length} = {n}', off_out, max(n, 1)

    def op_reopen(self, i):
        os.close(self.fds[i])
        self.fds[i] = None
        self.open(i)
        if self.rng.random() < 0.3:
            os.fsync(self.fds[i])
        return f'reopen file{i}', 0, len(self.mirror[i]) + BS

    def run(self, nops):
        ops = [(self.op_write, 30), (self.op_read, 20), (self.op_truncate, 8),
               (self.op_punch, 8), (self.op_fallocate, 8), (self.op_mmap, 8),
               (self.op_copy, 10), (self.op_reopen, 4)]
        funcs = [f for f, _ in ops]
        weights = [w for _, w in ops]
        for n in range(nops):
            i = self.rng.randrange(NFILES)
            fn = self.rng.choices(funcs, weights)[0]
            desc, off, length = fn(i)
            self.history.append(f'#{n} {desc}')
            self.counts[fn.__name__] += 1
            self.check_size(i, desc)
            self.check_range(i, off, length, desc)
            if n % 250 == 249:
                self.check_all(f'full check after #{n}')
        self.check_all('final check')


@pytest.fixture(params=[False, True], ids=['kcache-off', 'kcache-on'])
def mounted(env, request):
    yield from mounted_fs(env, caches=request.param)


@pytest.mark.parametrize('direct', [False, True], ids=['buffered', 'odirect'])
def test_random_operations(mounted, direct):
    nops = scaled(5000 if not direct else 2500, 200)
    d = Driver(mounted.path, direct, seed=4242 + direct)
    try:
        d.run(nops)
    finally:
        d.close()
    print(f'{nops} ops: {dict(d.counts)}')
    mirror = d.mirror

    # the same bytes after a clean unmount and a mount by a new process
    mounted.remount()
    for i in range(NFILES):
        with open(os.path.join(mounted.path, f'file{i}'), 'rb') as f:
            assert f.read() == bytes(mirror[i]), f'file{i} differs after remount'
