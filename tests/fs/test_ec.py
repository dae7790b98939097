# SPDX-License-Identifier: GPL-2.0-or-later
"""Erasure-coded member sets (-o ec=K+M, issue 24; docs/ARCHITECTURE.md,
"Member sets"): K data fragments and M parity fragments per stripe, each on
its own member; [0, zone_end) of the address space (where the journal is)
keeps M + 1 copies, the rest is stripes.

What is checked here: the refusals (too few servers, the two schemes mixed,
a set formatted with the other scheme or another K+M); statfs equal to a
Python mirror of the zoned geometry for several K+M; data of every shape
(4 KiB O_DIRECT writes at random offsets, partial blocks, whole stripes)
across a remount; M members SIGKILLed during a verified write+read workload
with no application error, both replaced and rebuilt by decoding, then M
other members lost and every byte still there, then one loss more failing
loudly; a client dying in the middle of a stripe update (the test knob
RMEM_TEST_EC_TEAR) and a plain kill -9 of the client, each followed by a
remount, a clean rmemfs-fsck and every fsync'd byte read back, also by
decoding; rmemfs-fsck finding and repairing a damaged parity fragment,
located in a member's pool file through a Python mirror of place_stripe
(fuse-client/pool/place.c); reads with members down before the mount.

Verification reads are O_DIRECT (the kernel keeps file pages across opens)
on mounts with a small block cache, or on fresh mounts, so the bytes come
from the members and a lost member's fragments are really decoded.
RMEM_TEST_SEED replays another seed; sizes follow RMEM_TEST_SCALE.
"""
import errno
import itertools
import json
import math
import mmap
import os
import random
import re
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from conftest import (SCALE, MemberSet, MountFailed, ctl, fsck, is_mounted, log_lines,
                      pattern, pool_logic_only, scaled, stats, wait_for)
from test_members import mount_set, write_file

KIB = 1 << 10
MIB = 1 << 20
BS = 4096
FRAG = 64 << 10             # an erasure-coded set's unit: one fragment (record unit_shift 16)
SET_REC_OFF = 4096          # the two member record slots (layout.h struct layout_set)
SET_DATA_OFF = 64 << 10     # where a member's unit slots start
SEED = int(os.environ.get('RMEM_TEST_SEED', '2424'))
WAIT = 60.0                 # seconds any single wait below may take
REBUILD_WAIT = 240.0        # a decode rebuild of a 64 MiB member (emulated RDMA is slow)
RESYNC_WAIT = 180.0         # a mount after a crash: lease takeover, then the parity resync
SMALL_CACHE = 'cache_size=4M'  # reads of more than this come from the members


def seed_for(name):
    """The test's seed, printed (RMEM_TEST_SEED=N replays it)."""
    seed = SEED + sum(name.encode())
    print(f'{name}: seed {seed} (RMEM_TEST_SEED={SEED})')
    return seed


# ---- a mirror of the placement and the zoned geometry (place.c, layout.c) ----

class Stripes:
    """place_stripes_init / place_stripe of fuse-client/pool/place.c, line for line:
    every w-combination of n members in lexicographic order, visited with a
    stride prime to their number, each taken w times with its roles rotated;
    a partial last cycle holds the stripes, in order, whose every fragment fits."""

    def __init__(self, n, w, member_units):
        self.n, self.w = n, w
        self.comb = [list(c) for c in itertools.combinations(range(n), w)]  # next_comb's order
        self.ncomb = len(self.comb)
        s = max(1, (self.ncomb * 618 + 500) // 1000)
        while math.gcd(s, self.ncomb) != 1:
            s += 1
        self.stride = s
        fill = [0] * n
        self.rank = [[0] * w for _ in range(self.ncomb)]
        for j in range(self.ncomb):
            cj = j * self.stride % self.ncomb
            for k in range(w):
                self.rank[cj][k] = fill[self.comb[cj][k]]
                fill[self.comb[cj][k]] += 1
        self.per_cycle = fill[0] * w
        self.stripes = (member_units // self.per_cycle * self.ncomb * w +
                        self._partial(member_units % self.per_cycle))

    def _slot(self, c, t, pos):
        return self.rank[c][pos] * self.w + t

    def _partial(self, left):
        for idx in range(self.ncomb * self.w):
            c, t = idx // self.w * self.stride % self.ncomb, idx % self.w
            if any(self._slot(c, t, pos) >= left for pos in range(self.w)):
                return idx
        return self.ncomb * self.w

    def stripe(self, s):
        """The w fragments of stripe s, data first: [(member, fragment slot)]."""
        cycle, idx = divmod(s, self.ncomb * self.w)
        c, t = idx // self.w * self.stride % self.ncomb, idx % self.w
        out = []
        for i in range(self.w):
            pos = (i + t) % self.w
            out.append((self.comb[c][pos], cycle * self.per_cycle + self._slot(c, t, pos)))
        return out


def _area(v, lo, hi):
    """layout.c clamp_area: clamped, rounded down to a block."""
    return min(max(v, lo), hi) & ~(BS - 1)


def _uv_len(v):
    n = 1
    while v >= 0x80:
        v >>= 7
        n += 1
    return n


def _round_up(v, to):
    return (v + to - 1) // to * to


def ec_geometry(n, pool, k, m):
    """What a format of ec=k+m on n members of pool bytes each lays out: the
    record's member_units and rep_units, the slots the replicated zone takes
    on each member (rep_slots), the stripes, and the superblock's geometry
    (layout_geometry_zoned: journal [4096, zone_end), two checkpoint slots of
    whole stripes, then the data blocks)."""
    r = m + 1
    member_units = (pool - SET_DATA_OFF) // FRAG
    ncomb = math.comb(n, r)
    per_cycle = ncomb * r // n
    estimate = n * member_units * FRAG * k // (k + m)
    journal = _area(estimate // 256, MIB, 64 * MIB)
    cycles = -(-(BS + journal) // (ncomb * FRAG))
    rep_units, rep_slots = cycles * ncomb, cycles * per_cycle
    st = Stripes(n, k + m, member_units - rep_slots)
    zone_end = rep_units * FRAG
    size = zone_end + st.stripes * k * FRAG
    slot = _area(size // 256, MIB, 256 * MIB)
    # the checkpoint's checksum tail on top, as layout_geometry sizes it
    d = (size - zone_end - 2 * slot) // BS
    regions = (d + 4095) // 4096
    tail = 4 * d + (d + 7) // 8 + 4 + regions * _uv_len(d)
    slot_len = _round_up(slot + _round_up(tail, BS), k * FRAG)
    data_off = zone_end + 2 * slot_len
    return {'member_units': member_units, 'rep_units': rep_units, 'rep_slots': rep_slots,
            'stripes': st.stripes, 'zone_end': zone_end, 'size': size, 'slot_len': slot_len,
            'data_off': data_off, 'data_blocks': (size - data_off) // BS, 'placement': st}


def ec_logical_data_blocks(n, pool, k, m):
    """What statfs must report for ec=k+m on n members of pool bytes each."""
    return ec_geometry(n, pool, k, m)['data_blocks']


def read_record(img):
    """The newest valid-looking member record of a member's pool file (the
    fields of layout.h struct layout_set this test needs)."""
    best = None
    with open(img, 'rb') as f:
        for off in (SET_REC_OFF, SET_REC_OFF + 4096):
            f.seek(off)
            b = f.read(104)
            if b[:8] != b'RMEMSET\0':
                continue
            rec = {'version': int.from_bytes(b[8:12], 'little'),
                   'events': int.from_bytes(b[32:40], 'little'),
                   'nmembers': int.from_bytes(b[40:44], 'little'),
                   'replicas': int.from_bytes(b[44:48], 'little'),
                   'place': int.from_bytes(b[48:52], 'little'),
                   'unit_shift': int.from_bytes(b[52:56], 'little'),
                   'member_units': int.from_bytes(b[56:64], 'little'),
                   'ec_k': int.from_bytes(b[64:68], 'little'),
                   'ec_m': int.from_bytes(b[68:72], 'little'),
                   'rep_units': int.from_bytes(b[72:80], 'little')}
            if best is None or rec['events'] > best['events']:
                best = rec
    assert best, f'{img}: no member record'
    return best


# ---- I/O helpers ----

def direct_read(path, chunk=MIB):
    """The whole file through O_DIRECT (an aligned buffer): from the daemon,
    never from the kernel's page cache."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    buf = mmap.mmap(-1, chunk)
    out = bytearray()
    try:
        while True:
            n = os.preadv(fd, [buf], len(out))
            out += buf[:n]
            if n < chunk:
                return bytes(out)
    finally:
        buf.close()
        os.close(fd)


def check_direct(path, want):
    got = direct_read(path)
    assert len(got) == len(want), f'{path}: {len(got)} bytes, want {len(want)}'
    if got != want:
        at = next(i for i in range(len(want)) if got[i] != want[i])
        raise AssertionError(f'{path}: differs first at byte {at} of {len(want)}')


def refused(env, mset, options, mountpoint=None):
    """Mount options on mset, which must be refused: rmemfs's output."""
    fs = env.rmemfs(mset, mountpoint=mountpoint, options=list(options), start=False)
    with pytest.raises(MountFailed) as e:
        fs.start()
    assert not is_mounted(fs.mountpoint)
    return str(e.value)


# ---- a verified workload in its own process ----

# Files f0.. of one size under root, each first written whole and fsync'd
# (unless cfg['init'] is false: they exist already, with the content of
# cfg['init_seed']), then random operations until the stop file appears, an
# error, or max_ops: writes - 4 KiB O_DIRECT ('dwrite', 1..4 aligned blocks),
# partial blocks ('bwrite', buffered, any offset and length), whole stripes
# and more ('big', buffered) - each followed by an fsync, and reads (buffered
# and O_DIRECT) checked against the process's own model. The log says
# "op I FILE KIND OFF LEN" before a write and "done I" after its fsync, so
# the test can rebuild what each file must hold; "error" and "mismatch"
# lines end it. (A process, not a thread: the test starts memservers while
# it runs; see test_failure.py.)
WORKLOAD = textwrap.dedent(r'''
    import errno, json, mmap, os, random, sys
    cfg = json.loads(sys.argv[1])
    root, seed, n, size = cfg['root'], cfg['seed'], cfg['nfiles'], cfg['size']
    BS = 4096
    log = open(cfg['log'], 'a', buffering=1)
    rng = random.Random(seed)
    buf = mmap.mmap(-1, 1 << 20)  # page-aligned for O_DIRECT

    def data_of(s, i, length):
        return random.Random(s * 1000003 + i).randbytes(length)

    def fail(what):
        log.write(what + '\n')
        sys.exit(1)

    paths = [os.path.join(root, f'f{j}') for j in range(n)]
    model = []
    i = 0
    try:
        for j, p in enumerate(paths):
            d = data_of(cfg['init_seed'], -1 - j, size)
            if cfg['init']:
                fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                if os.write(fd, d) != size:
                    fail(f'error init {j} short write')
                os.fsync(fd)
                os.close(fd)
                log.write(f'init {j}\n')
            model.append(bytearray(d))
        bfd = [os.open(p, os.O_RDWR) for p in paths]
        dfd = [os.open(p, os.O_RDWR | os.O_DIRECT) for p in paths]
        while i < cfg['max_ops'] and not os.path.exists(cfg['stop']):
            j = rng.randrange(n)
            kind = rng.choice(cfg['kinds'])
            if kind == 'dwrite':
                ln = rng.randrange(1, 5) * BS
                off = rng.randrange(0, (size - ln) // BS + 1) * BS
            elif kind == 'bwrite':
                ln = rng.randrange(1, 3 * BS)
                off = rng.randrange(0, size - ln + 1)
            elif kind == 'big':
                ln = min(size, rng.randrange(1, 9) * (64 << 10) + rng.randrange(BS))
                off = rng.randrange(0, size - ln + 1)
            elif kind == 'dread':
                ln = rng.randrange(1, 33) * BS
                off = rng.randrange(0, (size - ln) // BS + 1) * BS if ln < size else 0
            else:
                ln = rng.randrange(1, 300_000)
                off = rng.randrange(0, size)
            if kind in ('dwrite', 'bwrite', 'big'):
                d = data_of(seed, i, ln)
                log.write(f'op {i} {j} {kind} {off} {ln}\n')
                if kind == 'dwrite':
                    buf[:ln] = d
                    view = memoryview(buf)[:ln]
                    k = os.pwritev(dfd[j], [view], off)
                    view.release()
                    os.fsync(dfd[j])
                else:
                    k = os.pwrite(bfd[j], d, off)
                    os.fsync(bfd[j])
                if k != ln:
                    fail(f'error {i} {kind} {off}+{ln} wrote {k}')
                model[j][off:off + ln] = d
                log.write(f'done {i}\n')
            else:
                if kind == 'dread':
                    view = memoryview(buf)[:ln]
                    k = os.preadv(dfd[j], [view], off)
                    got = bytes(view[:k])
                    view.release()
                else:
                    got = os.pread(bfd[j], ln, off)
                if got != bytes(model[j][off:off + ln]):
                    fail(f'mismatch {i} {kind} f{j} {off}+{ln}')
            i += 1
    except OSError as e:
        fail(f'error {i} {errno.errorcode.get(e.errno, e.errno)} {e}')
    log.write(f'end {i}\n')
''')

ALL_KINDS = ['dwrite', 'dwrite', 'bwrite', 'bwrite', 'big', 'read', 'dread']


class Workload:
    def __init__(self, root, workdir, name, seed, nfiles, size, init=True, init_seed=None,
                 max_ops=10**9, kinds=ALL_KINDS):
        self.root = root
        self.log_path = os.path.join(workdir, f'{name}.log')
        self.stop_path = os.path.join(workdir, f'{name}.stop')
        self.cfg = {'root': root, 'seed': seed, 'nfiles': nfiles, 'size': size,
                    'init': init, 'init_seed': seed if init_seed is None else init_seed,
                    'log': self.log_path, 'stop': self.stop_path, 'max_ops': max_ops,
                    'kinds': list(kinds)}
        self.proc = subprocess.Popen([sys.executable, '-c', WORKLOAD, json.dumps(self.cfg)],
                                     stdin=subprocess.DEVNULL)

    def lines(self):
        return log_lines(self.log_path)

    def done_ops(self):
        return sum(1 for l in self.lines() if l.startswith('done '))

    def problems(self):
        return [l for l in self.lines() if l.startswith(('error', 'mismatch'))]

    def wait_ops(self, n, timeout=WAIT):
        """Until n more writes are done (or it ended): the count."""
        ok = wait_for(lambda: self.done_ops() >= n or self.proc.poll() is not None, timeout)
        assert ok, f'the workload did only {self.done_ops()} writes in {timeout} s'
        return self.done_ops()

    def inited(self):
        return sum(1 for l in self.lines() if l.startswith('init ')) == self.cfg['nfiles']

    def stop(self, timeout=WAIT):
        """Ask it to stop; its exit status."""
        open(self.stop_path, 'w').close()
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            pytest.fail(f'the workload did not stop within {timeout} s')

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def expected(self):
        """What each file must hold: {name: bytes}, and the write that was in
        flight when it ended (its bytes may be old or new, each on its own):
        [(name, off, new bytes)]."""
        c = self.cfg
        files = [bytearray(random.Random(c['init_seed'] * 1000003 - 1 - j).randbytes(c['size']))
                 for j in range(c['nfiles'])]
        started, done = {}, set()
        for line in self.lines():
            w = line.split()
            if w[0] == 'op':
                started[int(w[1])] = (int(w[2]), int(w[4]), int(w[5]))
            elif w[0] == 'done':
                done.add(int(w[1]))
        maybe = []
        for i in sorted(started):
            j, off, ln = started[i]
            d = random.Random(c['seed'] * 1000003 + i).randbytes(ln)
            if i in done:
                files[j][off:off + ln] = d
            else:
                maybe.append((f'f{j}', off, d))
        assert len(maybe) <= 1, f'more than one write in flight: {maybe}'
        return {f'f{j}': bytes(files[j]) for j in range(c['nfiles'])}, maybe

    def verify(self, root=None, in_flight_ok=False):
        """Every file read back through O_DIRECT equals the model; the bytes of
        a write in flight at a crash (in_flight_ok) may each be old or new."""
        want, maybe = self.expected()
        assert in_flight_ok or not maybe, f'a write never finished: {maybe}'
        for name, data in want.items():
            got = bytearray(direct_read(os.path.join(root or self.root, name)))
            assert len(got) == len(data), f'{name}: {len(got)} bytes, want {len(data)}'
            for mname, off, new in maybe:
                if mname != name:
                    continue
                for x in range(len(new)):
                    g = got[off + x]
                    assert g in (data[off + x], new[x]), \
                        f'{name}: byte {off + x} (in flight) neither old nor new'
                    got[off + x] = data[off + x]
            if got != data:
                at = next(x for x in range(len(data)) if got[x] != data[x])
                raise AssertionError(f'{name}: an fsync\'d byte differs first at {at}')
        return sum(len(d) for d in want.values())


# ---- 1. refusals ----

@pool_logic_only
def test_refusals(env):
    """ec= with replicas=, ec= on fewer servers than K+M, K and M out of range:
    refused before anything is written. A set formatted ec=4+2 refuses
    replicas=2 and ec=3+1 by name and mounts without ec= (the record says
    it); a replicas=2 set refuses ec=2+1."""
    six = env.member_set(6, '16M')
    for opts, want in ((['ec=4+2', 'replicas=2'], 'ec= and replicas= exclude each other'),
                       (['replicas=2', 'ec=2+1'], 'ec= and replicas= exclude each other')):
        out = refused(env, six, opts)
        assert want in out, out
    out = refused(env, MemberSet(six.members[:5]), ['ec=4+2'])
    assert 'ec=4+2 needs at least 6 servers (5 given)' in out, out
    out = refused(env, MemberSet(six.members[:2]), ['ec=2+1'])
    assert 'ec=2+1 needs at least 3 servers (2 given)' in out, out
    for bad in ('ec=1+1', 'ec=9+1', 'ec=2+4', 'ec=2+0', 'ec=4', 'ec=four+two'):
        out = refused(env, six, [bad])
        assert bad in out, out  # the message names the value
    # nothing was written: the pools still take a new set
    fs = mount_set(env, six, ['ec=4+2'])
    mnt = fs.mountpoint
    data = pattern(seed_for('refusals'), 3 * MIB + 777)
    write_file(os.path.join(mnt, 'f'), data)
    assert fs.unmount() == 0
    for opts, want in ((['replicas=2'], 'the member set is erasure-coded (ec=4+2), not replicas=2'),
                       (['ec=3+1'], 'the member set is erasure-coded (ec=4+2), not ec=3+1'),
                       (['ec=2+2'], 'the member set is erasure-coded (ec=4+2), not ec=2+2')):
        out = refused(env, six, opts, mountpoint=mnt)
        assert want in out, out
    # without ec= the record decides; listed in another order too
    fs = mount_set(env, MemberSet(list(reversed(six.members))), mountpoint=mnt)
    r = ctl(mnt, 'status')
    assert r.returncode == 0 and 'up, 6 of 6 members in sync, ec 4+2' in r.stdout, r.stdout
    check_direct(os.path.join(mnt, 'f'), data)
    assert fs.unmount() == 0
    fs = mount_set(env, six, ['ec=4+2'], mountpoint=mnt)  # the same K+M again: fine
    check_direct(os.path.join(mnt, 'f'), data)
    assert fs.unmount() == 0

    three = env.member_set(3, '16M')
    fs = mount_set(env, three, ['replicas=2'])
    assert fs.unmount() == 0
    out = refused(env, three, ['ec=2+1'], mountpoint=fs.mountpoint)
    assert 'the member set keeps 2 copies of each unit, not ec=2+1' in out, out


# ---- 2. capacity ----

@pool_logic_only
@pytest.mark.parametrize('n, k, m', [(3, 2, 1), (4, 3, 1), (4, 2, 2), (6, 4, 2), (5, 2, 1)],
                         ids=['2+1', '3+1', '2+2', '4+2', '2+1-of-5'])
def test_capacity(env, n, k, m):
    """statfs: the stripes' data space less superblock, journal and
    checkpoint slots, exactly as the mirror of the zoned geometry computes
    it; about raw x K/(K+M). (2+1 on 5 members: stripes over 10 combinations
    visited with a stride, and a replicated zone over another 10.)"""
    pool = 64 * MIB
    mset = env.member_set(n, '64M')
    fs = mount_set(env, mset, [f'ec={k}+{m}'])
    sv = os.statvfs(fs.mountpoint)
    assert sv.f_frsize == 4096
    g = ec_geometry(n, pool, k, m)
    ratio = sv.f_blocks * 4096 / (n * pool)
    print(f'ec={k}+{m} on {n} x 64 MiB: {sv.f_blocks} data blocks (mirror {g["data_blocks"]}: '
          f'rep_units {g["rep_units"]}, {g["stripes"]} stripes, slots of {g["slot_len"]}), '
          f'data/raw {ratio:.3f} (K/(K+M) {k / (k + m):.3f})')
    assert sv.f_blocks == g['data_blocks']
    assert 0.85 * k / (k + m) < ratio < k / (k + m)
    if (k, m) == (4, 2):
        assert ratio >= 0.6
    doc = json.loads(ctl(fs.mountpoint, 'status', '--json').stdout)
    assert doc['capacity_bytes'] == sv.f_blocks * 4096
    assert doc['ec'] == {'k': k, 'm': m}, doc
    assert fs.unmount() == 0


# ---- 3. data of every shape, across a remount ----

@pytest.mark.parametrize('n, k, m', [(3, 2, 1), (6, 4, 2)], ids=['2+1', '4+2'])
def test_basic(env, n, k, m):
    """Files of assorted sizes around the block, fragment and stripe sizes;
    one file overwritten by 4 KiB O_DIRECT writes at random offsets and
    buffered writes of partial blocks; fsync'd, read back (O_DIRECT and
    buffered), and again after a remount; status shows the scheme."""
    seed = seed_for(f'basic {k}+{m}')
    rng = random.Random(seed)
    mset = env.member_set(n, '64M')
    fs = mount_set(env, mset, [f'ec={k}+{m}', SMALL_CACHE])
    mnt = fs.mountpoint
    stripe = k * FRAG
    sizes = [0, 1, 4095, 4096, 4097, FRAG - 1, FRAG + 1, stripe - 1, stripe, stripe + 1,
             3 * stripe + 5000, scaled(5 * MIB, 2 * stripe) + 333]
    files = {f's{i}': pattern(seed + i, sz) for i, sz in enumerate(sizes)}
    for name, data in files.items():
        write_file(os.path.join(mnt, name), data)
    # small writes over a file that already has stripes: O_DIRECT 4 KiB and partial blocks
    size = scaled(4 * MIB, 2 * stripe) // BS * BS
    model = bytearray(pattern(seed - 1, size))
    path = os.path.join(mnt, 'small')
    write_file(path, bytes(model))
    abuf = mmap.mmap(-1, 16 * BS)
    dfd = os.open(path, os.O_RDWR | os.O_DIRECT)
    bfd = os.open(path, os.O_RDWR)
    try:
        for i in range(scaled(300, 30)):
            if rng.random() < 0.5:
                ln = rng.choice([1, 1, 1, 2, 16]) * BS
                off = rng.randrange(0, (size - ln) // BS + 1) * BS
                d = rng.randbytes(ln)
                abuf[:ln] = d
                view = memoryview(abuf)[:ln]
                assert os.pwritev(dfd, [view], off) == ln
                view.release()
            else:
                ln = rng.randrange(1, 2 * BS)
                off = rng.randrange(0, size - ln + 1)
                d = rng.randbytes(ln)
                assert os.pwrite(bfd, d, off) == ln
            model[off:off + ln] = d
            if i % 50 == 49:
                os.fsync(bfd)
        os.fsync(bfd)
        os.fsync(dfd)
    finally:
        os.close(dfd)
        os.close(bfd)
        abuf.close()
    files['small'] = bytes(model)
    for name, data in files.items():
        check_direct(os.path.join(mnt, name), data)
        with open(os.path.join(mnt, name), 'rb') as f:
            assert f.read() == data, name
    r = ctl(mnt, 'status')
    assert r.returncode == 0, r.stderr
    assert f'up, {n} of {n} members in sync, ec {k}+{m} (journal {m + 1} copies)' in r.stdout, \
        r.stdout
    doc = json.loads(ctl(mnt, 'status', '--json').stdout)
    assert doc['ec'] == {'k': k, 'm': m} and doc['state'] == 'up', doc
    blocks = os.statvfs(mnt).f_blocks
    assert fs.unmount() == 0
    fs = mount_set(env, mset, [SMALL_CACHE], mountpoint=mnt)
    assert os.statvfs(mnt).f_blocks == blocks
    for name, data in files.items():
        check_direct(os.path.join(mnt, name), data)
    assert fs.unmount() == 0


# ---- 4. two members lost mid-I/O, replaced, two others lost; then one too many ----

def test_two_losses_replace_and_two_more(env):
    """6 members, ec=4+2: two members SIGKILLed, one after the other, during
    a verified write+read workload: no application error, every byte
    verified. Both replaced by blank memservers and rebuilt by decoding
    (status shows the progress, then in sync) while writes go on. Then two
    other members killed: every byte still there, in the running mount and
    in a fresh one. Then a third member of the six gone: more than M lost,
    the filesystem fails loudly (status failed, EIO)."""
    seed = seed_for('two losses')
    # the rebuilds walk every stripe: smaller pools where the files are smaller (RDMA's scale)
    pool = '64M' if SCALE >= 1 else '32M'
    mset = env.member_set(6, pool)
    fs = mount_set(env, mset, ['ec=4+2', SMALL_CACHE])
    mnt = fs.mountpoint
    r = ctl(mnt, 'status')
    assert 'up, 6 of 6 members in sync, ec 4+2 (journal 3 copies)' in r.stdout, r.stdout
    size = scaled(4 * MIB, 512 * KIB) // FRAG * FRAG
    os.mkdir(os.path.join(mnt, 'a'))
    wl = Workload(os.path.join(mnt, 'a'), env.workdir, 'wl-a', seed, 6, size)
    try:
        assert wait_for(lambda: wl.inited() or wl.proc.poll() is not None, WAIT), \
            'the workload did not write its files'
        n = wl.wait_ops(scaled(20, 5))
        mset.members[1].stop(signal.SIGKILL)
        n = wl.wait_ops(n + scaled(20, 5))
        mset.members[4].stop(signal.SIGKILL)
        wl.wait_ops(n + scaled(30, 8))
        assert wl.stop() == 0, wl.problems()
    finally:
        wl.kill()
    assert not wl.problems(), wl.problems()
    print(f'{wl.done_ops()} verified writes, {wl.verify()} bytes verified with 2 members lost')
    st = stats(mnt)
    assert st['state'] == 'degraded' and st['members_up'] == 4, st
    assert [st[f'member{i}'].split()[1] for i in (1, 4)] == ['lost', 'lost'], st

    # both replaced by blank servers, one after the other, while another workload writes
    os.mkdir(os.path.join(mnt, 'b'))
    wl2 = Workload(os.path.join(mnt, 'b'), env.workdir, 'wl-b', seed + 1, 2,
                   scaled(2 * MIB, 256 * KIB) // FRAG * FRAG)
    blanks = {}
    try:
        for i in (1, 4):
            blank = env.server(pool, token_file=mset.token_file)
            blanks[i] = blank
            r = ctl(mnt, 'replace', mset.members[i].addr, blank.addr)
            assert r.returncode == 0, r.stdout + r.stderr
            doc = json.loads(ctl(mnt, 'status', '--json').stdout)
            m = doc['members'][i]
            assert m['address'] == blank.addr and m['state'] in ('rebuilding', 'in_sync'), doc
            seen = [(m.get('rebuilt_units'), m.get('units'))] if m['state'] == 'rebuilding' else []
            deadline = time.monotonic() + REBUILD_WAIT
            while time.monotonic() < deadline:
                m = json.loads(ctl(mnt, 'status', '--json').stdout)['members'][i]
                if m['state'] == 'in_sync':
                    break
                assert m['state'] == 'rebuilding', m
                seen.append((m.get('rebuilt_units'), m.get('units')))
                time.sleep(0.1)
            assert m['state'] == 'in_sync', f'member {i} not rebuilt in {REBUILD_WAIT} s: {m}'
            print(f'member {i} rebuilt; progress seen: {seen[:3]}..{seen[-2:]}')
            assert any(t for _, t in seen), f'the rebuild was never seen in progress: {seen}'
            assert all(0 <= d <= t for d, t in seen if t), seen
        assert wl2.wait_ops(scaled(10, 3)) >= scaled(10, 3)
        assert wl2.stop() == 0, wl2.problems()
    finally:
        wl2.kill()
    assert not wl2.problems(), wl2.problems()
    r = ctl(mnt, 'status')
    assert r.returncode == 0 and 'up, 6 of 6 members in sync, ec 4+2' in r.stdout, r.stdout

    # two members that were never lost go: the rebuilt fragments carry every stripe
    for i in (0, 2):
        mset.members[i].stop(signal.SIGKILL)
    wl.verify()
    wl2.verify()
    assert wait_for(lambda: stats(mnt)['members_up'] == 4, 15), stats(mnt)
    assert fs.unmount() == 0
    left = MemberSet([blanks[4], mset.members[3], blanks[1], mset.members[5]])
    fs = mount_set(env, left, [SMALL_CACHE], mountpoint=mnt)
    st = stats(mnt)
    assert st['state'] == 'degraded' and st['members_up'] == 4, st
    print(f'{wl.verify() + wl2.verify()} bytes verified by a fresh mount, members 0 and 2 gone')

    # a third of the six gone: some stripes keep fewer than K fragments
    mset.members[3].stop(signal.SIGKILL)
    assert wait_for(lambda: stats(mnt)['state'] == 'failed', 15), stats(mnt)
    r = ctl(mnt, 'status')
    assert re.search(r'failed, 3 of 6 members in sync, ec 4\+2', r.stdout), r.stdout
    assert 'failure: ' in r.stdout, r.stdout
    assert 'FILESYSTEM FAILED' in fs.output(), fs.output()
    # what the client's cache still holds may be served (small runs fit in it: RDMA's
    # RMEM_TEST_SCALE); the rest is EIO, and nothing is ever wrong bytes
    want = wl.expected()[0]
    errors = []
    for name in sorted(want):
        try:
            assert direct_read(os.path.join(mnt, 'a', name)) == bytes(want[name]), name
        except OSError as e:
            errors.append(e.errno)
    assert set(errors) <= {errno.EIO}, errors
    with pytest.raises(OSError) as e:
        write_file(os.path.join(mnt, 'after'), b'x')
    assert e.value.errno == errno.EIO
    fs.unmount()  # a failed mount unmounts at once (its exit status says it failed)


# ---- 5. the client dying mid-stripe ----

def crash_then_check(env, mset, fs, wl, victim):
    """After the client crashed under the workload wl: a new mount (the
    write-intent map makes parity agree again), every fsync'd byte, a clean
    unmount, rmemfs-fsck clean; then member victim gone and every byte read
    by a fresh mount, by decoding."""
    mnt = fs.mountpoint
    assert not is_mounted(mnt)
    fs2 = mount_set(env, mset, [SMALL_CACHE], mountpoint=mnt, timeout=RESYNC_WAIT)
    print('\n'.join(l for l in fs2.output().splitlines() if 'parity' in l or 'region' in l))
    nbytes = wl.verify(in_flight_ok=True)
    assert fs2.unmount() == 0
    r = fsck(mset)
    assert r.returncode == 0 and 'no problems found' in r.stdout, r.stdout + r.stderr
    mset.members[victim].stop(signal.SIGKILL)
    left = MemberSet([mm for i, mm in enumerate(mset.members) if i != victim])
    fs3 = mount_set(env, left, [SMALL_CACHE], mountpoint=mnt)
    wl.verify(in_flight_ok=True)
    assert fs3.unmount() == 0
    print(f'{nbytes} fsync\'d bytes verified after the crash, and with member {victim} gone')


@pool_logic_only
def test_crash_mid_stripe(env):
    """ec=2+1 on 3 members: RMEM_TEST_EC_TEAR=N makes the client send only
    the data fragments of its Nth stripe write and _exit(9) (the parity
    never written) during a random small-write workload; then the checks of
    crash_then_check (member 0 lost: every stripe has a fragment there)."""
    seed = seed_for('tear')
    mset = env.member_set(3, '64M')
    size = scaled(2 * MIB, 256 * KIB) // FRAG * FRAG
    fs = mount_set(env, mset, ['ec=2+1', SMALL_CACHE])
    mnt = fs.mountpoint
    init = Workload(mnt, env.workdir, 'wl-init', seed, 4, size, max_ops=0)
    try:
        assert init.proc.wait(WAIT) == 0, init.problems()
    finally:
        init.kill()
    assert fs.unmount() == 0
    tear = random.Random(seed).randrange(12, 48)
    print(f'RMEM_TEST_EC_TEAR={tear}')
    fs = env.rmemfs(mset, mountpoint=mnt, options=[SMALL_CACHE],
                    extra_env={'RMEM_TEST_EC_TEAR': str(tear)})
    wl = Workload(mnt, env.workdir, 'wl-tear', seed + 1, 4, size, init=False, init_seed=seed,
                  kinds=['dwrite', 'dwrite', 'bwrite', 'big', 'read'])
    try:
        try:
            rc = fs.proc.wait(WAIT)
        except subprocess.TimeoutExpired:
            pytest.fail(f'RMEM_TEST_EC_TEAR={tear}: the client still runs after {WAIT} s '
                        f'({wl.done_ops()} writes)')
        assert rc == 9, f'the client exited with {rc}:\n{fs.output()}'
        assert wl.proc.wait(WAIT) != 0  # its mount went away under it
    finally:
        wl.kill()
    fs.kill9()  # (it is gone already: this collects it and unmounts lazily)
    assert wl.done_ops() > 0, wl.lines()[-5:]
    assert not [l for l in wl.lines() if l.startswith('mismatch')], wl.problems()
    print(f'{wl.done_ops()} writes fsync\'d before the tear')
    crash_then_check(env, mset, fs, wl, victim=0)


@pool_logic_only
def test_kill9_client_mid_writes(env):
    """ec=3+1 on 4 members: the client SIGKILLed during a random-write
    workload (4 KiB O_DIRECT and buffered, each fsync'd); then the checks of
    crash_then_check (member 2 lost)."""
    seed = seed_for('kill9')
    mset = env.member_set(4, '64M')
    size = scaled(2 * MIB, 256 * KIB) // FRAG * FRAG
    fs = mount_set(env, mset, ['ec=3+1', SMALL_CACHE])
    wl = Workload(fs.mountpoint, env.workdir, 'wl-kill9', seed, 4, size,
                  kinds=['dwrite', 'dwrite', 'bwrite', 'bwrite', 'big'])
    try:
        assert wait_for(lambda: wl.inited() or wl.proc.poll() is not None, WAIT)
        wl.wait_ops(scaled(40, 10))
        fs.kill9()
        assert wl.proc.wait(WAIT) != 0
    finally:
        wl.kill()
    assert not [l for l in wl.lines() if l.startswith('mismatch')], wl.problems()
    print(f'{wl.done_ops()} writes fsync\'d before the kill')
    crash_then_check(env, mset, fs, wl, victim=2)


# ---- 6. fsck and a damaged parity fragment ----

@pool_logic_only
def test_fsck_repairs_parity(env):
    """ec=2+1 on 4 members with pool files: a byte of the parity fragment
    of a stripe that holds file data, flipped behind the filesystem's back
    (found through the record and the mirror of place_stripe), is reported
    by rmemfs-fsck; --repair recomputes that fragment byte for byte as it
    was; the next check is clean; and with the member of a data fragment of
    that stripe gone, the file reads back by decoding with the repaired
    parity."""
    n, k, m = 4, 2, 1
    seed = seed_for('fsck parity')
    mset = env.member_set(n, '64M', backed=tuple(range(n)))
    imgs = [mm.backing_file for mm in mset.members]
    fs = mount_set(env, mset, [f'ec={k}+{m}'])
    data = pattern(seed, 4 * MIB)
    write_file(os.path.join(fs.mountpoint, 'x'), data)
    assert fs.unmount() == 0
    r = fsck(mset)
    assert r.returncode == 0 and 'no problems found' in r.stdout, r.stdout + r.stderr

    # the record and the layout this test reads the pool files by
    g = ec_geometry(n, 64 * MIB, k, m)
    rec = read_record(imgs[0])
    assert (rec['version'], rec['ec_k'], rec['ec_m'], rec['replicas'], rec['unit_shift']) == \
        (2, k, m, m + 1, 16), rec
    assert (rec['member_units'], rec['rep_units']) == (g['member_units'], g['rep_units']), \
        (rec, g)
    place = g['placement']
    where = {}
    for s in range(place.stripes):
        for role, (member, slot) in enumerate(place.stripe(s)):
            where[(member, slot)] = (s, role)

    def frag_off(member_slot):
        return SET_DATA_OFF + (g['rep_slots'] + member_slot) * FRAG

    # a 4 KiB piece of the file, in the middle: verbatim on exactly one member
    needle = data[2 * MIB + 8192:2 * MIB + 12288]
    found = []
    for i, img in enumerate(imgs):
        with open(img, 'rb') as f:
            mm = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
            try:
                at = mm.find(needle, frag_off(0))
                if at >= 0:
                    found.append((i, at))
            finally:
                mm.close()
    assert len(found) == 1, f'the piece of data is on {found}'
    member, at = found[0]
    slot, inner = divmod(at - frag_off(0), FRAG)
    stripe, role = where[(member, slot)]
    assert role < k, f'the data sits in fragment {role} of stripe {stripe}: a parity slot'
    frags = place.stripe(stripe)
    pmember, pslot = frags[k]
    print(f'data at member {member} offset {at}: stripe {stripe} fragment {role}; '
          f'its parity on member {pmember}, slot {pslot}')

    def parity_bytes():
        with open(imgs[pmember], 'rb') as f:
            f.seek(frag_off(pslot))
            return f.read(FRAG)
    good = parity_bytes()
    victim = mset.members[pmember]
    victim.stop()
    with open(imgs[pmember], 'r+b') as f:
        f.seek(frag_off(pslot) + inner + 100)
        f.write(bytes([good[inner + 100] ^ 0x5a]))
    victim.start()
    assert parity_bytes() != good

    r = fsck(mset)
    assert r.returncode == 1, r.stdout + r.stderr
    assert re.search(r'parity', r.stdout), r.stdout
    print('\n'.join(l for l in r.stdout.splitlines() if 'parity' in l))
    r = fsck(mset, '--repair')
    assert r.returncode == 1, r.stdout + r.stderr
    assert re.search(r'parity', r.stdout), r.stdout
    r = fsck(mset)
    assert r.returncode == 0 and 'no problems found' in r.stdout, r.stdout + r.stderr
    assert parity_bytes() == good, 'the repaired parity is not what the data encodes to'

    # the member of the data fragment goes: that stripe decodes through the repaired parity
    mset.members[member].stop(signal.SIGKILL)
    left = MemberSet([mm for i, mm in enumerate(mset.members) if i != member])
    fs = mount_set(env, left, [SMALL_CACHE], mountpoint=fs.mountpoint)
    check_direct(os.path.join(fs.mountpoint, 'x'), data)
    assert fs.unmount() == 0


# ---- 7. members down before the mount ----

def test_degraded_mounts(env):
    """ec=2+1 on 3 with one member down before the mount: a plain mount (two
    of three are a majority) reads every byte by decoding. ec=2+2 on 4 with
    two down: the plain mount is refused by the majority rule, -o degraded
    mounts, every byte reads back (two fragments decoded per stripe where
    both were data) and a new file can be written and read."""
    seed = seed_for('degraded')
    for n, k, m, down in ((3, 2, 1, (1,)), (4, 2, 2, (0, 3))):
        mset = env.member_set(n, '64M')
        fs = mount_set(env, mset, [f'ec={k}+{m}'])
        mnt = fs.mountpoint
        files = {f'f{i}': pattern(seed + i, sz) for i, sz in
                 enumerate([5000, FRAG * k + 1, scaled(6 * MIB, MIB) + 4321])}
        for name, data in files.items():
            write_file(os.path.join(mnt, name), data)
        assert fs.unmount() == 0
        for i in down:
            mset.members[i].stop(signal.SIGKILL)
        left = MemberSet([mm for i, mm in enumerate(mset.members) if i not in down])
        opts = [SMALL_CACHE]
        if 2 * len(left.members) <= n:
            out = refused(env, mset, opts, mountpoint=mnt)
            assert 'majority' in out and '-o degraded' in out, out
            opts.append('degraded')
        fs = mount_set(env, left, opts, mountpoint=mnt)
        st = stats(mnt)
        assert st['state'] == 'degraded' and st['members_up'] == n - len(down), st
        assert all(st[f'member{i}'].split()[1] == 'missing' for i in down), st
        for name, data in files.items():
            check_direct(os.path.join(mnt, name), data)
        new = pattern(seed - 1, scaled(MIB, 256 * KIB) + 99)
        write_file(os.path.join(mnt, 'new'), new)
        check_direct(os.path.join(mnt, 'new'), new)
        assert fs.unmount() == 0
        print(f'ec={k}+{m}: members {down} down, every byte decoded')
