# SPDX-License-Identifier: GPL-2.0-or-later
"""Data checksums across a client crash (issue 38; docs/ARCHITECTURE.md,
"Data checksums" and the write-intent map of "Member sets").

A client killed (kill -9) while it overwrites a block in place leaves its
region hot: the next read-write mount must not take what the pool then
holds as the truth for blocks that were not being written. Here a byte of
a file's first block is flipped behind the filesystem's back while another
block of the same file (and of the same 16 MiB hot region) is rewritten in
a loop, O_DIRECT and fsync'd; then the client is killed and the filesystem
mounted again:

- one server: the damaged block fails its checksum (EIO), exactly as it
  does after a clean unmount (the control), every other block reads as
  written, the block being written reads as one of the contents written;
- replicas=2 over three members, the byte flipped in one copy (each copy
  in turn, on fresh filesystems: the intent resync prefers one of them):
  the good bytes come back, csum_errors stays 0, rmemfs-fsck reports no bad
  block after the unmount;
- ec=2+1: a stripe torn by RMEM_TEST_EC_TEAR (the data fragment of a 4 KiB
  write out, its parity not; the tear is checked in the members' pool
  files against a Python mirror of the placement and of ISA-L's Cauchy
  parity), then the member of the stripe's other data fragment stopped:
  its blocks, decoded through the stale parity, come back as the written
  bytes or EIO, never other bytes;
- a seeded model over one server, replicas=2 and ec=2+1: random mixes of
  a flipped byte, a member lost, a client killed under a random-write
  workload and a torn stripe; every block afterwards reads as one of the
  contents it may hold, or EIO; where a good copy is intact, the good bytes.

The bytes are flipped in the live pool: a memserver maps its backing file
MAP_SHARED (memserver/pool.c, pool_map_file), so a byte changed through a
shared mapping of that file is changed in the pool the server serves, with
the server and the client running. Reads are O_DIRECT on fresh mounts (no
cache in the way). The daemons run with G_DEBUG=fatal-criticals where a
checksum warning may be printed, and each test checks which warnings it
got. RMEM_TEST_SEED replays another seed; sizes follow RMEM_TEST_SCALE.

Over RDMA: scripts/test-rdma.sh runs this whole file again in the soft-RoCE
guest with every mount on -o transport=rdma (RMEM_TEST_SCALE 0.1; one
trial of the model per layout there, the random mixes being TCP's job): the
order that matters here - a write-ahead checksum's journal write completed
before the data goes out, the resync's reads and rewrites of single copies,
the stripes' fragments - is the transport's, and the crash is a real one of
a client holding RDMA connections.
"""
import errno
import json
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

from conftest import TRANSPORT, MemberSet, fsck, log_lines, pattern, scaled, stats, wait_for
from test_checksums import NONFATAL, direct_pread, flip_byte
from test_ec import FRAG, SET_DATA_OFF, ec_geometry, read_record, seed_for

KIB = 1 << 10
MIB = 1 << 20
BS = 4096
REGION = 16 * MIB           # a hot region: LAYOUT_CSUM_REGION_BLOCKS (4096) data blocks
WAIT = 60.0                 # seconds any single wait below may take
MOUNT_WAIT = 90.0           # a mount after a crash: the lease takeover (10 s), then resyncs
FILE_SIZE = 440 * KIB       # 110 blocks
HOT_BLOCK = 64              # the block the writer rewrites (offset 256 KiB)
FLIP_AT = 100               # the byte of block 0 that is flipped


@pytest.fixture(autouse=True)
def drop_pool_files(env):
    """Each test's pool files go when it ends (unlinked while their memservers still map
    them, which release the space when the env stops them): the soft-RoCE guest's /tmp
    holds a few hundred MiB, and pytest keeps a test's directory after it."""
    yield
    for root, _, files in os.walk(env.workdir):
        for name in files:
            if name.endswith('.img'):
                os.unlink(os.path.join(root, name))


def block(data, k):
    return data[k * BS:(k + 1) * BS]


def write_file(path, data):
    with open(path, 'wb') as f:
        f.write(data)
        os.fsync(f.fileno())


def read_block(path, k):
    """('ok', bytes) or ('err', errno) of an O_DIRECT read of block k."""
    try:
        return ('ok', direct_pread(path, k * BS, BS))
    except OSError as e:
        return ('err', e.errno)


def find_all(img, needle):
    """Offsets of needle in the pool file img."""
    out = []
    with open(img, 'rb') as f:
        mm = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
        try:
            at = mm.find(needle)
            while at >= 0:
                out.append(at)
                at = mm.find(needle, at + 1)
        finally:
            mm.close()
    return out


def backed_set(env, n, tag, size='64M'):
    """n memservers with one token, each keeping its pool in <tag>-member<i>.img
    (env.member_set's names would collide with a second set in one test)."""
    members = []
    for i in range(n):
        members.append(env.server(size, backing_file=os.path.join(env.workdir,
                                                                   f'{tag}-member{i}.img'),
                                  token_file=members[0].token_file if members else None))
    return MemberSet(members)


def mount(env, server, mountpoint=None, options=(), extra_env=NONFATAL, timeout=MOUNT_WAIT):
    fs = env.rmemfs(server, mountpoint=mountpoint, options=list(options), start=False,
                    extra_env=extra_env)
    return fs.start(timeout=timeout)


# ---- a writer rewriting one block in place, in its own process ----

# Rewrites BS bytes at OFF of PATH with O_DIRECT, each write fsync'd,
# alternating between the contents of two seeds (conftest.pattern); after
# each it puts how many it did into COUNT (a file outside the mount).
WRITER = textwrap.dedent('''
    import mmap, os, random, sys
    path, off, count = sys.argv[1], int(sys.argv[2]), sys.argv[5]
    alt = [random.Random(int(s)).randbytes(4096) for s in sys.argv[3:5]]
    fd = os.open(path, os.O_RDWR | os.O_DIRECT)
    cfd = os.open(count, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    buf = mmap.mmap(-1, 4096)
    i = 0
    while True:
        buf[:] = alt[i % 2]
        os.pwritev(fd, [buf], off)
        os.fsync(fd)
        i += 1
        os.pwrite(cfd, b'%12d' % i, 0)
''')


class Writer:
    """WRITER on block k of path: its two contents, how many writes it did."""

    def __init__(self, workdir, path, k, seeds):
        self.count_path = os.path.join(workdir, f'writer-{os.getpid()}-{time.monotonic_ns()}')
        self.contents = [pattern(s, BS) for s in seeds]
        self.proc = subprocess.Popen([sys.executable, '-c', WRITER, path, str(k * BS),
                                      str(seeds[0]), str(seeds[1]), self.count_path],
                                     stdin=subprocess.DEVNULL, stderr=subprocess.PIPE)

    def count(self):
        try:
            with open(self.count_path, 'rb') as f:
                return int(f.read(12) or b'0')
        except (FileNotFoundError, ValueError):
            return 0

    def wait_writes(self, n, timeout=WAIT):
        ok = wait_for(lambda: self.count() >= n or self.proc.poll() is not None, timeout)
        if self.proc.poll() is not None:
            err = self.proc.stderr.read().decode(errors='replace')
            pytest.fail(f'the writer ended ({self.proc.returncode}) after {self.count()} '
                        f'writes:\n{err}')
        assert ok, f'the writer did only {self.count()} writes in {timeout} s'
        return self.count()

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(30)
        self.proc.stderr.close()


def overwrite_and_flip(env, fs, path, flip, crash, seed, copies, orig):
    """The writer rewrites block HOT_BLOCK of path (its bytes orig, its copies
    at [(pool file, offset)]) until its region is hot; flip() damages the
    pool behind the filesystem while it goes on; then the client is killed
    (crash) or the writer stopped and the filesystem cleanly unmounted.
    The writer's two contents, and whether every copy of the block was left
    torn (none holds orig or either content: a write cut short in its
    payload, which may then fail its checksum)."""
    w = Writer(env.workdir, path, HOT_BLOCK, (seed + 101, seed + 202))
    try:
        n = w.wait_writes(20)
        assert wait_for(lambda: stats(fs.mountpoint)['hot_regions'] > 0, WAIT), \
            stats(fs.mountpoint)
        flip()
        n = w.wait_writes(n + 20)  # in-place writes in flight after the damage too
        hot = stats(fs.mountpoint)['hot_regions']
        print(f'{n} writes of block {HOT_BLOCK}, {hot} hot regions: '
              f'{"kill -9 of the client" if crash else "clean unmount"}')
        if crash:
            fs.kill9()
            w.kill()
        else:
            w.kill()
            assert fs.unmount() == 0
    finally:
        w.kill()
    held = []
    for img, at in copies:
        with open(img, 'rb') as f:
            f.seek(at)
            held.append(f.read(BS))
    torn = not any(h in [orig] + w.contents for h in held)
    if torn:
        print(f'every copy of block {HOT_BLOCK} was left torn')
    return w.contents, torn


def differing(a, b):
    return sum(x != y for x, y in zip(a, b))


def check_blocks(path, data, maybe, bad=(), torn=()):
    """Every block of path O_DIRECT: block k in bad must fail with EIO, a
    block in maybe may hold any of maybe[k] (or fail with EIO if in torn),
    every other one data's."""
    for k in range(len(data) // BS):
        got = read_block(path, k)
        if k in bad:
            assert got[0] == 'err', (
                f'block {k}, damaged in the pool while no write touched it, read back without '
                f'an error ({differing(got[1], block(data, k))} bytes differ from what was '
                'written: the damage was served)')
            assert got[1] == errno.EIO, f'block {k}: {os.strerror(got[1])}, want EIO'
            continue
        if k in torn and got == ('err', errno.EIO):
            continue
        want = maybe.get(k, [block(data, k)])
        assert got[0] == 'ok', f'block {k}: {os.strerror(got[1])}' + (
            ' (its last write was cut short, but a copy held one of its contents)'
            if k in maybe else '')
        assert got[1] in want, f'block {k}: none of the {len(want)} contents it may hold'


def only(img, needle):
    """The one offset of needle in the pool file img."""
    at = find_all(img, needle)
    assert len(at) == 1, f'{img}: the block is at {at}'
    return at[0]


# ---- 1. one server ----

def test_crash_keeps_flipped_byte_eio_one_server(env, tmp_path):
    """One memserver, a backing file. Control first: a byte of block 0 of a
    file flipped while the writer rewrites its block 64, the writer stopped,
    a clean unmount, a remount: block 0 is EIO. Then the same on another
    file with the client killed instead of unmounted: block 0 must still be
    EIO (the bug: the mount recomputed the checksums of the crash's hot
    region from the pool, the damage included, and served it)."""
    seed = seed_for('crashsum one server')
    img = str(tmp_path / 'pool.img')
    server = env.server('64M', backing_file=img)
    fs = mount(env, server, options=['writeback=off'])
    mnt = fs.mountpoint
    for crash in (False, True):
        what = 'crash' if crash else 'control'
        path = os.path.join(mnt, what)
        data = pattern(seed + crash, FILE_SIZE)
        write_file(path, data)
        ino = os.stat(path).st_ino
        at0, at64 = only(img, block(data, 0)), only(img, block(data, HOT_BLOCK))
        assert at0 // REGION == at64 // REGION, \
            f'blocks 0 and {HOT_BLOCK} are in different hot regions ({at0}, {at64})'
        print(f'{what}: inode {ino}, block 0 at pool offset {at0}, block {HOT_BLOCK} at {at64}')

        def flip():
            flip_byte(img, block(data, 0), FLIP_AT)
        alt, torn = overwrite_and_flip(env, fs, path, flip, crash, seed, [(img, at64)],
                                       block(data, HOT_BLOCK))
        fs = mount(env, server, mountpoint=mnt, options=['writeback=off'])
        print('\n'.join(ln for ln in fs.output().splitlines() if 'region' in ln))
        check_blocks(path, data, {HOT_BLOCK: [block(data, HOT_BLOCK)] + alt}, bad={0},
                     torn={HOT_BLOCK} if torn else ())
        s = stats(mnt)
        assert s['csum_errors'] >= 1, s
        # one warning for block 0 (and the block being written, if the crash tore it)
        warnings = block_warnings(fs)
        assert [w for w in warnings if f'inode {ino} offset 0 ' in w], warnings
        assert all(f'inode {ino} offset 0 ' in w or
                   (torn and f'inode {ino} offset {HOT_BLOCK * BS} ' in w)
                   for w in warnings), warnings
        assert len(warnings) <= 1 + 2 * torn, warnings
        env.expected_warnings = True  # the ones of each remount, checked
    assert fs.unmount() == 0


# ---- 2. replicas=2 ----

@pytest.mark.parametrize('copy', [0, 1], ids=['first-copy', 'second-copy'])
def test_crash_serves_good_copy_replicas2(env, copy):
    """replicas=2 over three backed members: the byte of block 0 flipped in
    one of its two copies (the first member holding it, or the second)
    while block 64 is rewritten, then kill -9 and a remount: the intent
    resync must not copy the damaged copy over the good one, nor the hot
    region's recomputation bless it: block 0 reads the good bytes, no
    checksum error, and rmemfs-fsck finds no bad block after the unmount."""
    seed = seed_for(f'crashsum replicas copy {copy}')
    mset = backed_set(env, 3, f'r{copy}')
    imgs = [m.backing_file for m in mset.members]
    opts = ['replicas=2', 'writeback=off']
    fs = mount(env, mset, options=opts)
    mnt = fs.mountpoint
    path = os.path.join(mnt, 'f')
    data = pattern(seed, FILE_SIZE)
    write_file(path, data)
    holders = [i for i, img in enumerate(imgs) if find_all(img, block(data, 0))]
    assert len(holders) == 2, f'block 0 is on members {holders}, want two'
    copies64 = [(img, at) for img in imgs for at in find_all(img, block(data, HOT_BLOCK))]
    assert len(copies64) == 2, f'block {HOT_BLOCK} is at {copies64}, want two copies'
    damaged = holders[copy]
    print(f'block 0 on members {holders}; flipping the copy on member {damaged} '
          f'({mset.members[damaged].addr})')

    def flip():
        flip_byte(imgs[damaged], block(data, 0), FLIP_AT)
    alt, torn = overwrite_and_flip(env, fs, path, flip, True, seed, copies64,
                                   block(data, HOT_BLOCK))
    fs = mount(env, mset, mountpoint=mnt, options=opts)
    print('\n'.join(ln for ln in fs.output().splitlines()
                    if 'region' in ln or 'differ' in ln or 'bad' in ln))
    got = read_block(path, 0)
    assert got[0] == 'ok', (f'block 0 (one copy damaged, the other intact) failed after the '
                            f'crash: {os.strerror(got[1])}')
    if got[1] != block(data, 0):
        flipped = bytearray(block(data, 0))
        flipped[FLIP_AT] ^= 0x5a
        raise AssertionError(
            'block 0 read back wrong bytes after the crash: '
            + ('the damaged copy\'s' if got[1] == flipped else 'neither copy\'s'))
    check_blocks(path, data, {HOT_BLOCK: [block(data, HOT_BLOCK)] + alt},
                 torn={HOT_BLOCK} if torn else ())
    s = stats(mnt)
    assert s['csum_errors'] <= torn, s  # (block 64 torn on both copies fails with EIO)
    warnings = block_warnings(fs)
    assert all(torn and f'offset {HOT_BLOCK * BS} ' in w for w in warnings), warnings
    env.expected_warnings = True  # none, or block 64's: checked
    assert fs.unmount() == 0
    r = fsck(mset)
    print(r.stdout)
    bad = [ln for ln in r.stdout.splitlines() if 'does not match its checksum' in ln]
    assert r.returncode == 0 or not bad, f'rmemfs-fsck after the remount:\n{r.stdout}{r.stderr}'


# ---- random writes in their own process, and what they may have left ----

# cfg['ops']: [file, off, len, data seed, O_DIRECT, fsync] each. Before a
# write the log says "op I", after it (and its fsync) "done I"; an error
# says "error I ERRNO" and ends it, as does the stop file. The bytes of a
# write are conftest.pattern(data seed, len).
OPS = textwrap.dedent(r'''
    import json, mmap, os, random, sys
    with open(sys.argv[1]) as f:
        cfg = json.load(f)
    log = open(cfg['log'], 'a', buffering=1)
    buf = mmap.mmap(-1, 1 << 16)  # page-aligned for O_DIRECT
    bfd = [os.open(p, os.O_RDWR) for p in cfg['paths']]
    dfd = [os.open(p, os.O_RDWR | os.O_DIRECT) for p in cfg['paths']]
    for i, (j, off, ln, dseed, direct, sync) in enumerate(cfg['ops']):
        if os.path.exists(cfg['stop']):
            break
        d = random.Random(dseed).randbytes(ln)
        log.write(f'op {i}\n')
        try:
            if direct:
                buf[:ln] = d
                view = memoryview(buf)[:ln]
                n = os.pwritev(dfd[j], [view], off)
                view.release()
            else:
                n = os.pwrite(bfd[j], d, off)
            if n != ln:
                log.write(f'error {i} short {n}\n')
                sys.exit(1)
            if sync:
                os.fsync(dfd[j] if direct else bfd[j])
        except OSError as e:
            log.write(f'error {i} {e.errno}\n')
            sys.exit(1)
        log.write(f'done {i}\n')
    log.write('end\n')
''')


class Ops:
    """OPS over paths (the files exist, with their initial bytes)."""

    def __init__(self, workdir, name, paths, ops):
        self.ops = ops
        self.log_path = os.path.join(workdir, f'{name}.ops.log')
        self.stop_path = os.path.join(workdir, f'{name}.ops.stop')
        cfg_path = os.path.join(workdir, f'{name}.ops.json')
        with open(cfg_path, 'w') as f:
            json.dump({'ops': ops, 'paths': paths, 'log': self.log_path,
                       'stop': self.stop_path}, f)
        self.proc = subprocess.Popen([sys.executable, '-c', OPS, cfg_path],
                                     stdin=subprocess.DEVNULL)

    def lines(self):
        return log_lines(self.log_path)

    def done(self):
        return sum(1 for ln in self.lines() if ln.startswith('done '))

    def wait_done(self, n, timeout=WAIT):
        """Until n writes are done or the process ended: how many are done."""
        ok = wait_for(lambda: self.done() >= n or self.proc.poll() is not None, timeout)
        assert ok, f'the writes did only {self.done()} of {n} in {timeout} s'
        return self.done()

    def stop(self, timeout=WAIT):
        open(self.stop_path, 'w').close()
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            pytest.fail(f'the writes did not stop within {timeout} s')

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(30)

    def model(self, init):
        """What each file may hold after a crash: (cur, maybe, in_flight).
        cur[j] is file j with every write started applied; maybe[j] maps each
        block written since file j's last completed fsync to every content it
        held since (the durable one first: it may hold any of them, a write
        in flight old or new); in_flight is that write's index (or None)."""
        cur = [bytearray(d) for d in init]
        maybe = [{} for _ in init]
        started, done = [], set()
        for line in self.lines():
            w = line.split()
            if w[0] == 'op':
                started.append(int(w[1]))
            elif w[0] == 'done':
                done.add(int(w[1]))
        flight = [i for i in started if i not in done]
        assert not flight or flight == [started[-1]], f'writes never finished: {flight}'
        for i in started:
            j, off, ln, dseed, _, sync = self.ops[i]
            first, last = off // BS, (off + ln - 1) // BS
            for b in range(first, last + 1):
                maybe[j].setdefault(b, [bytes(cur[j][b * BS:(b + 1) * BS])])
            cur[j][off:off + ln] = pattern(dseed, ln)
            for b in range(first, last + 1):
                maybe[j][b].append(bytes(cur[j][b * BS:(b + 1) * BS]))
            if sync and i in done:
                maybe[j].clear()
        return cur, maybe, (flight[0] if flight else None)


def allowed_of(cur, maybe, b):
    return maybe.get(b, [block(cur, b)])


def block_warnings(fs):
    """The daemon's warnings, every one about a block of a file (a checksum
    mismatch of a read, or a block the crash recovery found matching no
    checksum: EIO the test allows)."""
    warnings = fs.warnings()
    other = [w for w in warnings if not re.search(r'inode \d+ offset \d+', w)]
    assert not other, other
    return warnings


# ---- a mirror of the parity (fuse-client/pool/ec_codec.c over ISA-L) ----

def _gf_mul(a, b):
    """GF(2^8) with ISA-L's polynomial x^8 + x^4 + x^3 + x^2 + 1."""
    p = 0
    while b:
        if b & 1:
            p ^= a
        b >>= 1
        a <<= 1
        if a & 0x100:
            a ^= 0x11d
    return p


def _gf_inv(a):
    return next(b for b in range(1, 256) if _gf_mul(a, b) == 1)


class Parity:
    """ec_codec_encode for K+M: the parity rows of ISA-L's
    gf_gen_cauchy1_matrix, row i in [K, K+M) and column j holding 1/(i ^ j)
    (for 2+1: parity = d0/2 + d1/3 in GF(2^8), not d0 ^ d1)."""

    def __init__(self, k, m):
        self.rows = [[bytes(_gf_mul(_gf_inv(i ^ j), x) for x in range(256)) for j in range(k)]
                     for i in range(k, k + m)]

    def encode(self, data):
        n = len(data[0])
        out = []
        for row in self.rows:
            acc = 0
            for table, frag in zip(row, data):
                acc ^= int.from_bytes(frag.translate(table), 'little')
            out.append(acc.to_bytes(n, 'little'))
        return out


class EcImages:
    """The stripes of an ec=K+M set in its members' pool files, by test_ec's
    mirror of place_stripe and the zoned geometry (checked against the
    member record)."""

    def __init__(self, imgs, pool, k, m):
        self.imgs, self.k, self.m = imgs, k, m
        self.g = ec_geometry(len(imgs), pool, k, m)
        rec = read_record(imgs[0])
        assert (rec['ec_k'], rec['ec_m'], rec['unit_shift']) == (k, m, 16), rec
        assert (rec['member_units'], rec['rep_units']) == \
            (self.g['member_units'], self.g['rep_units']), (rec, self.g)
        self.place = self.g['placement']
        self.parity = Parity(k, m)
        self.where = {}
        for s in range(self.place.stripes):
            for role, (member, slot) in enumerate(self.place.stripe(s)):
                self.where[(member, slot)] = (s, role)

    def frag_off(self, slot):
        """Where fragment slot slot starts in a member's pool file."""
        return SET_DATA_OFF + (self.g['rep_slots'] + slot) * FRAG

    def locate(self, member, at):
        """Byte at of member's pool file: (stripe, role, offset in the fragment)."""
        slot, inner = divmod(at - self.frag_off(0), FRAG)
        assert slot >= 0 and (member, slot) in self.where, (member, at)
        s, role = self.where[(member, slot)]
        return s, role, inner

    def scan(self):
        """(how many stripes holding bytes have parity that agrees with their
        data, [(stripe, [the parity roles that do not])])."""
        files = [open(p, 'rb') for p in self.imgs]
        mms = [mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ) for f in files]
        zero = bytes(FRAG)
        good, torn = 0, []
        try:
            for s in range(self.place.stripes):
                cols = [mms[mem][self.frag_off(slot):self.frag_off(slot) + FRAG]
                        for mem, slot in self.place.stripe(s)]
                if all(c == zero for c in cols):
                    continue
                want = self.parity.encode(cols[:self.k])
                bad = [self.k + i for i in range(self.m) if cols[self.k + i] != want[i]]
                if bad:
                    torn.append((s, bad))
                else:
                    good += 1
        finally:
            for mm in mms:
                mm.close()
            for f in files:
                f.close()
        return good, torn


# ---- 3. a torn stripe, then a member down ----

def test_torn_stripe_with_member_down_never_wrong_bytes(env):
    """ec=2+1 on three backed members. A 2 MiB file written and fsync'd,
    then 4 KiB O_DIRECT writes (each fsync'd) into its middle under
    RMEM_TEST_EC_TEAR=N: the client sends the data fragment of its Nth
    stripe write, not the parity, and exits 9. The pool files must show
    exactly that stripe's parity disagreeing with its data (else: "the
    stripe was not torn"), and the unacknowledged write's bytes in its data
    fragment; the stripe is the one the client names ("RMEM_TEST_EC_TEAR:
    the data of stripe S landed", where the knob says) and among those the
    next mount calls "STRIPE S MAY BE TORN". Then the member of the
    stripe's other data fragment is killed and the filesystem mounted on
    the two left: the block of that fragment at the torn column now
    decodes through the stale parity to bytes never written; every block
    of the file must read back as written (the torn block old or new) or
    fail with EIO."""
    seed = seed_for('crashsum torn stripe')
    rng = random.Random(seed)
    k, m = 2, 1
    mset = backed_set(env, k + m, 'ec')
    imgs = [mm.backing_file for mm in mset.members]
    opts = ['ec=2+1', 'writeback=off']
    fs = mount(env, mset, options=opts)
    mnt = fs.mountpoint
    path = os.path.join(mnt, 'f')
    nblocks = 512  # 2 MiB: 16 stripes of 2 x 64 KiB
    data = pattern(seed, nblocks * BS)
    write_file(path, data)
    ino = os.stat(path).st_ino
    assert fs.unmount() == 0
    ec = EcImages(imgs, 64 * MIB, k, m)
    good, torn = ec.scan()
    assert not torn, f'parity that differs from the data after a clean unmount: {torn} ' \
                     '(or the mirror of the parity is wrong)'
    assert good >= nblocks * BS // (k * FRAG), f'only {good} stripes hold bytes'

    tear = rng.randrange(3, 9)
    ops = [[0, rng.randrange(nblocks // 8, nblocks - nblocks // 8) * BS, BS, seed * 1000 + i,
            True, True] for i in range(tear + 40)]
    print(f'RMEM_TEST_EC_TEAR={tear}')
    fs = env.rmemfs(mset, mountpoint=mnt, options=opts, extra_env={'RMEM_TEST_EC_TEAR': str(tear)})
    wl = Ops(env.workdir, 'tear', [path], ops)
    try:
        try:
            rc = fs.proc.wait(WAIT)
        except subprocess.TimeoutExpired:
            pytest.fail(f'RMEM_TEST_EC_TEAR={tear}: the client still runs after {WAIT} s '
                        f'({wl.done()} writes)')
        assert rc == 9, f'the client exited with {rc}:\n{fs.output()}'
        wl.proc.wait(WAIT)
    finally:
        wl.kill()
    fs.kill9()  # (gone already: collects it and unmounts lazily)
    print('\n'.join(ln for ln in fs.output().splitlines() if 'RMEM_TEST_EC_TEAR' in ln))
    cur, maybe, flight = wl.model([data])
    assert flight is not None, f'no write was in flight when the client exited: {wl.lines()[-3:]}'
    new = pattern(ops[flight][3], BS)
    print(f'{wl.done()} writes acknowledged; write {flight} (file offset {ops[flight][1]}) '
          'in flight')

    # the tear, in the pool files
    good, torn = ec.scan()
    assert torn, (f'RMEM_TEST_EC_TEAR={tear}: the stripe was not torn: every stripe\'s parity '
                  'agrees with its data in the members\' pool files')
    assert len(torn) == 1, f'stripes torn: {torn}'
    s, bad_parity = torn[0]
    said = re.search(r'RMEM_TEST_EC_TEAR: the data of stripe (\d+) ', fs.output())
    assert not said or int(said[1]) == s, f'the client tore stripe {said[1]}, the pool files {s}'
    where = [(i, at) for i, img in enumerate(imgs) for at in find_all(img, new)]
    assert len(where) == 1, f'the unacknowledged write\'s bytes are at {where} in the pool files'
    member, at = where[0]
    s2, role, inner = ec.locate(member, at)
    assert s2 == s and role < k, \
        f'the unacknowledged write is in stripe {s2} fragment {role}, the torn stripe is {s}'
    frags = ec.place.stripe(s)
    nrole = 1 - role
    nmember, nslot = frags[nrole]
    with open(imgs[nmember], 'rb') as f:
        f.seek(ec.frag_off(nslot) + inner)
        nbytes = f.read(BS)
    neighbour = [b for b in range(nblocks) if block(cur[0], b) == nbytes]
    assert len(neighbour) == 1, \
        f'the other data fragment holds no block of the file at the torn column ({neighbour})'
    nblock = neighbour[0]
    print(f'torn: stripe {s} (parity {bad_parity} stale), its fragment {role} on member '
          f'{member} at +{inner}; the other data fragment on member {nmember} holds file '
          f'block {nblock} there')

    mset.members[nmember].stop(signal.SIGKILL)
    left = MemberSet([mm for i, mm in enumerate(mset.members) if i != nmember])
    fs = mount(env, left, mountpoint=mnt, options=['writeback=off'])  # (ec= wants 3 servers)
    logged = re.findall(r'STRIPE (\d+) MAY BE TORN', fs.output())
    print('\n'.join(ln for ln in fs.output().splitlines()
                    if f'STRIPE {s} ' in ln or 'region' in ln or 'parity' in ln))
    print(f'stripes said maybe torn: {logged}')
    assert not logged or str(s) in logged, f'stripe {s} torn, stripes said maybe torn: {logged}'
    st = stats(mnt)
    assert st['state'] == 'degraded' and st['members_up'] == 2, st
    eio, wrong = [], []
    for b in range(nblocks):
        got = read_block(path, b)
        if got[0] == 'err':
            assert got[1] == errno.EIO, f'block {b}: {os.strerror(got[1])}'
            eio.append(b)
        elif got[1] not in allowed_of(cur[0], maybe[0], b):
            wrong.append(b)
    print(f'EIO on blocks {eio}')
    assert not wrong, (
        f'blocks {wrong} read back bytes never written there'
        + (f' (block {nblock}: decoded through the stale parity of torn stripe {s})'
           if nblock in wrong else ''))
    for w in block_warnings(fs):
        assert f'inode {ino} offset ' in w, w
    assert fs.unmount() == 0
    env.expected_warnings = True  # the EIO blocks' warnings, checked above


# ---- 4. a seeded model under combined faults ----

MODEL_POOL, MODEL_POOL_BYTES = '32M', 32 * MIB  # each member's


def pick_faults(rng, layout):
    """A trial's faults: a flipped byte (in one copy), a member lost (during
    the writes or after the client ended), and how the client ends (kill -9,
    a torn stripe on ec, or a clean unmount); at least one of them."""
    f = {'flip': rng.random() < 0.7,
         'loss': None if layout == 'one-server' else rng.choice([None, None, 'during', 'after']),
         'end': rng.choice(['kill9', 'kill9', 'clean'] + (['tear', 'tear'] if layout == 'ec'
                                                           else [])),
         'writeback': rng.choice(['on', 'off'])}
    if not f['flip'] and not f['loss'] and f['end'] == 'clean':
        f['flip'] = True
    return f


def random_ops(rng, nfiles, nblocks, avoid, count):
    """count writes: O_DIRECT of 1 or 2 aligned blocks, or buffered of 1
    byte to 8 KiB anywhere (parts of blocks), each fsync'd or not; none
    touches block avoid (file, block)."""
    ops = []
    while len(ops) < count:
        j = rng.randrange(nfiles)
        if rng.random() < 0.5:
            ln = rng.choice([1, 1, 2]) * BS
            off = rng.randrange(0, nblocks * BS - ln + 1) // BS * BS
            direct = True
        else:
            ln = rng.randrange(1, 2 * BS)
            off = rng.randrange(0, nblocks * BS - ln + 1)
            direct = False
        if avoid and j == avoid[0] and off // BS <= avoid[1] <= (off + ln - 1) // BS:
            continue
        ops.append([j, off, ln, rng.randrange(1 << 40), direct, rng.random() < 0.5])
    return ops


def run_trial(env, layout, t, rng, f, nfiles, nblocks):
    """One trial on a fresh filesystem (see test_combined_faults_model)."""
    tag = f'{layout}-{t}'
    if layout == 'one-server':
        servers = [env.server(MODEL_POOL, backing_file=os.path.join(env.workdir, f'{tag}.img'))]
        target, opts = servers[0], []
    else:
        target = backed_set(env, 3, tag, MODEL_POOL)
        servers = target.members
        opts = ['replicas=2'] if layout == 'replicas2' else ['ec=2+1']
    opts.append(f'writeback={f["writeback"]}')
    imgs = [s.backing_file for s in servers]
    fs = mount(env, target, options=opts)
    mnt = fs.mountpoint
    paths = [os.path.join(mnt, f'f{j}') for j in range(nfiles)]
    init = [pattern(rng.randrange(1 << 40), nblocks * BS) for _ in paths]
    for p, d in zip(paths, init):
        write_file(p, d)
    assert fs.unmount() == 0

    fj, fb = rng.randrange(nfiles), rng.randrange(nblocks)  # the block a byte of is flipped
    ops = random_ops(rng, nfiles, nblocks, (fj, fb) if f['flip'] else None, 5000)
    needle = block(init[fj], fb)
    holders = [i for i, img in enumerate(imgs) if find_all(img, needle)]
    assert len(holders) == {'one-server': 1, 'replicas2': 2, 'ec': 1}[layout], holders
    flipped = rng.choice(holders) if f['flip'] else None
    lost = rng.randrange(len(servers)) if f['loss'] else None
    # where a copy of the flipped block that no fault touched stays reachable
    expect_good = (layout == 'replicas2' and flipped is not None and
                   any(h not in (flipped, lost) for h in holders))
    extra = dict(NONFATAL)
    if f['end'] == 'tear':
        extra['RMEM_TEST_EC_TEAR'] = str(rng.randrange(5, 30))
    a, b = rng.randrange(5, 30), rng.randrange(10, 40)
    print(f'trial {t}: {f}' + (f', RMEM_TEST_EC_TEAR={extra["RMEM_TEST_EC_TEAR"]}'
                               if f['end'] == 'tear' else '') +
          (f', byte flipped in f{fj} block {fb} on member {flipped} (copies on {holders})'
           if flipped is not None else '') +
          (f', member {lost} lost' if lost is not None else '') +
          f'; faults after {a} writes, the end {b} later')

    fs = mount(env, target, mountpoint=mnt, options=opts, extra_env=extra)
    wl = Ops(env.workdir, tag, paths, ops)
    try:
        n = wl.wait_done(a)
        if f['loss'] == 'during':
            servers[lost].stop(signal.SIGKILL)
        if flipped is not None:
            flip_byte(imgs[flipped], needle, rng.randrange(BS))
        wl.wait_done(n + b)
        if f['end'] == 'kill9':
            fs.kill9()
        elif f['end'] == 'tear':
            try:
                rc = fs.proc.wait(WAIT)
            except subprocess.TimeoutExpired:
                pytest.fail(f'RMEM_TEST_EC_TEAR={extra["RMEM_TEST_EC_TEAR"]}: the client '
                            f'still runs after '
                            f'{WAIT} s ({wl.done()} writes)')
            assert rc == 9, f'the client exited with {rc}:\n{fs.output()}'
            fs.kill9()  # (gone already: collects it and unmounts lazily)
        else:
            assert wl.stop() == 0, wl.lines()[-3:]
            assert fs.unmount() == 0
        try:
            wl.proc.wait(WAIT)
        except subprocess.TimeoutExpired:
            pytest.fail(f'the writes did not end within {WAIT} s of the client')
    finally:
        wl.kill()
    block_warnings(fs)
    cur, maybe, flight = wl.model(init)
    torn = ''
    if layout == 'ec' and f['end'] != 'clean':
        torn = EcImages(imgs, MODEL_POOL_BYTES, 2, 1).scan()[1]
        torn = f', stripes whose parity disagrees in the pool files: {torn}'
    print(f'trial {t}: {wl.done()} writes done, write {flight} in flight{torn}')
    if f['loss'] == 'after':
        servers[lost].stop(signal.SIGKILL)

    up = [s for i, s in enumerate(servers) if i != lost]
    target2 = up[0] if layout == 'one-server' else MemberSet(up)
    fs = mount(env, target2, mountpoint=mnt, options=[opts[-1]])
    # EIO is a fair answer where a block may have been damaged: flipped, written since its
    # last fsync (a write the crash cut short), or on ec with a member lost and a second
    # fault (the client did not unmount: a stripe torn while its other data fragment is
    # lost, RAID-5's hole; or a flipped fragment: decoding through it is wrong too)
    hole = layout == 'ec' and lost is not None and (f['end'] != 'clean' or flipped is not None)
    eio, wrong = [], []
    for j, p in enumerate(paths):
        for k in range(nblocks):
            got = read_block(p, k)
            what = f'f{j} block {k}'
            if (j, k) == (fj, fb) and flipped is not None:
                what += ' (its byte flipped on member %d)' % flipped
                if expect_good and got != ('ok', needle):
                    wrong.append(f'{what}: ' + ('EIO' if got[0] == 'err' else 'wrong bytes') +
                                 ' where an intact copy was reachable')
                    continue
            if got[0] == 'err':
                if got[1] != errno.EIO:
                    wrong.append(f'{what}: {os.strerror(got[1])}')
                elif (j, k) == (fj, fb) or k in maybe[j] or hole:
                    eio.append((j, k))
                else:
                    wrong.append(f'{what}: EIO, though fsync\'d and not written since '
                                 '(a false corruption report)')
            elif got[1] not in allowed_of(cur[j], maybe[j], k):
                wrong.append(f'{what}: bytes it never held '
                             f'({len(allowed_of(cur[j], maybe[j], k))} contents possible)')
    print(f'trial {t}: EIO on {eio}')
    assert not wrong, f'trial {t} ({f}): ' + '; '.join(wrong[:8])
    block_warnings(fs)
    assert fs.unmount() == 0
    for s in servers:
        s.stop()
    for img in imgs:
        os.unlink(img)


@pytest.mark.parametrize('layout', ['one-server', 'replicas2', 'ec'])
def test_combined_faults_model(env, layout):
    """Seeded trials on fresh filesystems (one memserver; replicas=2 over
    three; ec=2+1 over three; all with backing files): two files written
    and fsync'd, then a random-write workload (O_DIRECT 4 KiB writes,
    partial-block buffered writes, each fsync'd or not) with a mix of faults
    the seed picks: a byte flipped in one copy of a block no write touches,
    a member SIGKILLed during the writes or after the client ended, and the
    client killed (kill -9), torn mid-stripe (RMEM_TEST_EC_TEAR) or cleanly
    unmounted. A model keeps, for every block, the contents it may hold:
    its last fsync'd one and each it held since. After a remount on the
    members left, every block read O_DIRECT is one of those, or EIO; the
    flipped block reads good where a copy no fault touched is reachable
    (replicas=2); EIO only where damage is possible (the flipped block, a
    block written since its last fsync, any block of ec with a member lost
    and another fault), never for fsync'd blocks left alone."""
    seed = seed_for(f'crashsum model {layout}')
    # one trial a layout over emulated RDMA (the guest: its transport's order, not the mix)
    trials = 1 if TRANSPORT == 'rdma' else min(4, scaled(3, 2))
    nfiles, nblocks = 2, scaled(128, 32)
    for t in range(trials):
        rng = random.Random(seed * 100 + t)
        run_trial(env, layout, t, rng, pick_faults(rng, layout), nfiles, nblocks)
    env.expected_warnings = True  # every one about a block (block_warnings)
