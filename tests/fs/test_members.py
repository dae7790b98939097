# SPDX-License-Identifier: GPL-2.0-or-later
"""One filesystem over several memservers: placement, replicas, losing a
member while the filesystem is in use, the majority rule, capacity, and
members listed in any order (docs/ARCHITECTURE.md, "Member sets")."""
import hashlib
import itertools
import json
import os
import re
import signal
import subprocess
import threading
import time

import pytest

from conftest import (EXIT_TIMEOUT, MOUNT_TIMEOUT, MemberSet, MountFailed, binary, ctl,
                      is_mounted, pool_logic_only, scaled)

MIB = 1 << 20
UNIT = 256 << 10            # placement unit (remote.c REMOTE_UNIT_SHIFT)
SET_DATA_OFF = 64 << 10     # where a member's units start (layout.h)


def stats(path):
    text = os.getxattr(path, 'user.rmemfs.stats').decode()
    out = {}
    for line in text.splitlines():
        k, _, v = line.partition(' ')
        out[k] = v
    return out


def content(name, size):
    """Deterministic bytes for one file (cheap to regenerate for the check)."""
    seed = hashlib.sha256(name.encode()).digest()
    block = (seed * (4096 // len(seed) + 1))[:4096]
    reps = size // 4096 + 1
    return (bytes(b ^ (i & 0xff) for i, b in enumerate(block)) * reps)[:size]


def write_file(path, data):
    with open(path, 'wb') as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def check_file(path, data):
    with open(path, 'rb') as f:
        got = f.read()
    assert len(got) == len(data), f'{path}: {len(got)} bytes, want {len(data)}'
    assert got == data, f'{path}: contents differ'


def mount_set(env, mset, options=(), mountpoint=None, timeout=None):
    """timeout: seconds for the mount to appear, when it has more to do than
    conftest's MOUNT_TIMEOUT allows for (a resync under emulated RDMA)."""
    if timeout is None:
        return env.rmemfs(mset, mountpoint=mountpoint, options=list(options))
    fs = env.rmemfs(mset, mountpoint=mountpoint, options=list(options), start=False)
    return fs.start(timeout=timeout)


class Workload:
    """Writes files (each fsync'd, then read back) on a thread until stopped;
    every error is kept, never swallowed."""

    def __init__(self, root, size, prefix='w', limit=None):
        self.root = root
        self.prefix = prefix
        self.limit = limit
        self.size = size
        self.written = []
        self.errors = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self):
        i = 0
        while not self.stop.is_set() and (self.limit is None or i < self.limit):
            name = f'{self.prefix}{i:04d}'
            data = content(name, self.size)
            try:
                write_file(os.path.join(self.root, name), data)
                check_file(os.path.join(self.root, name), data)
            except (OSError, AssertionError) as e:
                self.errors.append(f'{name}: {e}')
                return
            self.written.append(name)
            i += 1

    def verify(self, root=None):
        for name in self.written:
            check_file(os.path.join(root or self.root, name), content(name, self.size))


def wait_for(cond, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.05)
    return cond()


def test_kill_member_mid_write(env):
    """3 members, replicas=2: SIGKILL one during a verified write+read
    workload. No application error, every byte verified; the stats show the
    member lost; remounting without it works (a majority) and still every
    byte reads back."""
    mset = env.member_set(3, '64M')
    fs = mount_set(env, mset, ['replicas=2'])
    root = fs.mountpoint
    assert stats(root)['members'] == '3' and stats(root)['replicas'] == '2'
    wl = Workload(root, scaled(1 * MIB, 64 << 10))
    wl.thread.start()
    assert wait_for(lambda: len(wl.written) >= 5 or wl.errors, 60), 'workload did not start'
    victim = mset.members[1]
    victim.stop(signal.SIGKILL)
    n_at_kill = len(wl.written)
    assert wait_for(lambda: len(wl.written) >= n_at_kill + 10 or wl.errors, 60)
    wl.stop.set()
    wl.thread.join(60)
    assert not wl.errors, wl.errors
    wl.verify()
    st = stats(root)
    assert st['state'] == 'degraded', st
    assert st['members_up'] == '2', st
    assert st['member1'].split()[1] == 'lost', st
    assert fs.unmount() == 0
    # the two that are left form a majority: a plain mount works
    left = MemberSet([mset.members[2], mset.members[0]])
    fs2 = mount_set(env, left, mountpoint=fs.mountpoint)
    st = stats(fs2.mountpoint)
    assert st['state'] == 'degraded' and st['member1'].split()[1] == 'missing', st
    wl.verify(fs2.mountpoint)

    # a blank memserver takes member 1's place; writes go on during the rebuild
    blank = env.server('64M', token_file=mset.token_file)
    wl2 = Workload(fs2.mountpoint, scaled(512 << 10, 64 << 10), prefix='r', limit=40)
    wl2.thread.start()
    r = ctl(fs2.mountpoint, 'replace', victim.addr, blank.addr, '--wait')
    wl2.stop.set()
    wl2.thread.join(60)
    assert r.returncode == 0, r.stdout + r.stderr
    assert not wl2.errors, wl2.errors
    st = stats(fs2.mountpoint)
    assert st['state'] == 'up' and st['member1'].split()[:2] == [blank.addr, 'in_sync'], st
    # the rebuilt member now holds the only other copy of member 0's units
    mset.members[0].stop(signal.SIGKILL)
    wl.verify(fs2.mountpoint)
    wl2.verify()
    assert fs2.unmount() == 0
    # and a fresh client sees the same with member 0 gone for good
    fs3 = mount_set(env, MemberSet([blank, mset.members[2]]), mountpoint=fs.mountpoint)
    wl.verify(fs3.mountpoint)
    wl2.verify(fs3.mountpoint)
    assert fs3.unmount() == 0


def fsck(mset, *extra):
    return subprocess.run([binary('fuse-client/rmemfs-fsck'), mset.addr, '-o',
                           f'token_file={mset.token_file},transport=tcp'] + list(extra),
                          capture_output=True, text=True, timeout=EXIT_TIMEOUT)


def test_ctl_status_and_bad_replace(env):
    """status in text and JSON; replace refuses an in-sync member, an
    unknown one and a server that is not blank, each with its reason."""
    mset = env.member_set(3, '64M')
    fs = mount_set(env, mset, ['replicas=2'])
    r = ctl(fs.mountpoint, 'status', '--json')
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc['replicas'] == 2 and doc['state'] == 'up'
    assert [m['address'] for m in doc['members']] == [m.addr for m in mset.members]
    assert all(m['state'] == 'in_sync' for m in doc['members'])
    assert doc['capacity_bytes'] == os.statvfs(fs.mountpoint).f_blocks * 4096
    r = ctl(fs.mountpoint, 'status')
    assert r.returncode == 0 and 'up, 3 of 3 members in sync, replicas 2' in r.stdout, r.stdout
    spare = env.server('64M', token_file=mset.token_file)
    for old, new, want in ((mset.members[0].addr, spare.addr, 'in sync: only a lost member'),
                           ('member9', spare.addr, 'names no member'),
                           ('member1', mset.members[2].addr, None)):
        if want is None:
            mset.members[1].stop(signal.SIGKILL)
            # the lease heartbeat touches every member: it notices with no I/O at all
            assert wait_for(lambda: stats(fs.mountpoint)['member1'].split()[1] == 'lost', 15)
            want = 'is not blank'
        r = ctl(fs.mountpoint, 'replace', old, new)
        assert r.returncode == 1, r.stdout
        assert want in r.stderr, r.stderr
    assert ctl(fs.mountpoint, 'bogus').returncode == 2


@pool_logic_only
def test_two_members_one_down(env):
    """2 members, replicas=2, one down: a plain mount is refused with the
    majority explanation; -o degraded mounts and the data is all there."""
    mset = env.member_set(2, '64M')
    fs = mount_set(env, mset)
    assert stats(fs.mountpoint)['replicas'] == '2'  # the default for two servers
    data = content('two', 3 * MIB)
    write_file(os.path.join(fs.mountpoint, 'two'), data)
    assert fs.unmount() == 0
    mset.members[0].stop(signal.SIGKILL)
    lone = MemberSet([mset.members[1]])
    # the dead member is still listed: it cannot be reached
    fs2 = env.rmemfs(mset, mountpoint=fs.mountpoint, start=False)
    fs2.start(wait=False)
    fs2.proc.wait(MOUNT_TIMEOUT)
    fs2.pump.join()
    out = fs2.output()
    assert fs2.proc.returncode != 0, out
    assert 'majority' in out and '-o degraded' in out, out
    assert not is_mounted(fs.mountpoint)
    fs3 = env.rmemfs(lone, mountpoint=fs.mountpoint, options=['degraded'])
    check_file(os.path.join(fs3.mountpoint, 'two'), data)
    assert 'degraded' in fs3.output()
    assert fs3.unmount() == 0


def logical_data_blocks(members, member_size, r):
    """What statfs must report: the address space the placement gives
    (every member's units, r copies each), less superblock, journal and
    checkpoint slots (layout_geometry)."""
    units = (member_size - SET_DATA_OFF) // UNIT
    ncomb = len(list(itertools.combinations(range(members), r)))
    per_cycle = ncomb * r // members
    size = units // per_cycle * ncomb * UNIT

    def area(v, lo, hi):
        return min(max(v, lo), hi) & ~4095
    journal = area(size // 64, MIB, 64 * MIB)
    slot = area(size // 32, MIB, 256 * MIB)
    # format 2: each slot also holds a checksum per data block and the hot regions
    d = (size - (4096 + journal + 2 * slot)) // 4096
    regions = (d + 4095) // 4096
    uv_len = max(1, (d.bit_length() + 6) // 7)
    tail = 4 * d + (d + 7) // 8 + 4 + regions * uv_len
    slot += (tail + 4095) & ~4095
    return (size - (4096 + journal + 2 * slot)) // 4096


@pytest.mark.parametrize('replicas', [1, 2, 3])
def test_capacity(env, replicas):
    """statfs: the members' data areas summed, divided by the copies."""
    mset = env.member_set(3, '64M')
    fs = mount_set(env, mset, [f'replicas={replicas}'])
    sv = os.statvfs(fs.mountpoint)
    assert sv.f_frsize == 4096
    assert sv.f_blocks == logical_data_blocks(3, 64 * MIB, replicas)
    # roughly 3 x 64 MiB / replicas, less the metadata areas
    assert 0.85 * 3 * 64 * MIB / replicas < sv.f_blocks * 4096 < 3 * 64 * MIB / replicas
    assert fs.unmount() == 0


def test_twelve_members(env):
    """The largest set: twelve members (a version-2 member record), three
    copies; capacity, data, the status, members listed in another order, and
    a lost member read around."""
    mset = env.member_set(12, '16M')
    fs = mount_set(env, mset, ['replicas=3', 'qps=1'])
    sv = os.statvfs(fs.mountpoint)
    assert sv.f_blocks == logical_data_blocks(12, 16 * MIB, 3)
    data = content('twelve', 20 * MIB)
    write_file(os.path.join(fs.mountpoint, 'f'), data)
    r = ctl(fs.mountpoint, 'status')
    assert r.returncode == 0 and 'up, 12 of 12 members in sync, replicas 3' in r.stdout, r.stdout
    assert fs.unmount() == 0
    backwards = MemberSet(list(reversed(mset.members)))
    fs2 = mount_set(env, backwards, ['qps=1'], mountpoint=fs.mountpoint)
    mset.members[5].stop(signal.SIGKILL)
    check_file(os.path.join(fs2.mountpoint, 'f'), data)
    # (listed backwards: the set's member 5 is the eighth server given)
    assert wait_for(lambda: stats(fs2.mountpoint)['member5'].split()[1] == 'lost', 15)
    assert fs2.unmount() == 0


def test_newer_record_is_refused(env):
    """A set whose member records come from a newer rmemfs (version 3) is
    refused by name, with -o format too: never taken for blank pools."""
    mset = env.member_set(3, '64M', backed=(0, 1, 2))
    fs = mount_set(env, mset, ['replicas=2'])
    data = content('newer', 3 * MIB)
    write_file(os.path.join(fs.mountpoint, 'f'), data)
    assert fs.unmount() == 0
    for m in mset.members:
        m.stop()
    imgs = [os.path.join(env.workdir, f'member{i}.img') for i in range(3)]

    def set_versions(v):
        for img in imgs:
            with open(img, 'r+b') as f:
                for slot in (4096, 8192):
                    f.seek(slot + 8)
                    f.write(v.to_bytes(4, 'little'))
    set_versions(3)
    for m in mset.members:
        m.start()
    for srv, opts in ((mset, []), (mset, ['format']), (MemberSet(mset.members[:1]), ['format'])):
        fs2 = env.rmemfs(srv, mountpoint=fs.mountpoint, options=opts, start=False)
        with pytest.raises(MountFailed) as e:
            fs2.start()
        assert 'from a newer rmemfs' in str(e.value), str(e.value)
    for m in mset.members:
        m.stop()
    set_versions(1)  # the version they had: their crc holds again
    for m in mset.members:
        m.start()
    fs3 = mount_set(env, mset, mountpoint=fs.mountpoint)
    check_file(os.path.join(fs3.mountpoint, 'f'), data)
    assert fs3.unmount() == 0


@pool_logic_only
def test_order_and_non_member(env):
    """Members listed in another order mount the same filesystem; a server
    that is no member is refused by name; replicas= must match the set."""
    mset = env.member_set(3, '64M')
    fs = mount_set(env, mset, ['replicas=2'])
    data = content('order', 5 * MIB)
    write_file(os.path.join(fs.mountpoint, 'f'), data)
    assert fs.unmount() == 0
    backwards = MemberSet(list(reversed(mset.members)))
    fs2 = mount_set(env, backwards, mountpoint=fs.mountpoint)
    check_file(os.path.join(fs2.mountpoint, 'f'), data)
    assert fs2.unmount() == 0

    stranger = env.server('64M', token_file=mset.token_file)
    bad = MemberSet(mset.members + [stranger])
    for srv, opts, want in ((bad, [], f'{stranger.addr} is not a member'),
                            (mset, ['replicas=3'], 'keeps 2 copies')):
        fs3 = env.rmemfs(srv, mountpoint=fs.mountpoint, options=opts, start=False)
        with pytest.raises(MountFailed) as e:
            fs3.start()
        assert want in str(e.value)


def flip_a_byte(img_path, data, at, xor):
    """Damage a member's copy of file data behind the filesystem's back (its
    memserver stopped): byte `at` of a 4 KiB piece of data found in the pool
    file, from its second MiB (or, if the member holds no copy of that, a
    piece of its third)."""
    with open(img_path, 'r+b') as f:
        img = f.read()
        where = img.find(data[MIB:MIB + 4096], SET_DATA_OFF)
        if where < 0:
            where = img.find(data[2 * MIB + 4096:2 * MIB + 8192], SET_DATA_OFF)
        assert where >= 0, f'no copy of the file in {img_path}'
        f.seek(where + at)
        f.write(bytes([img[where + at] ^ xor]))


@pool_logic_only
def test_fsck_member_set(env):
    """rmemfs-fsck takes the member list like rmemfs and compares the copies:
    a copy damaged behind the filesystem's back is found, and --repair makes
    the copies agree - the data block's checksum tells the good copy, which
    is written over the bad one - so the next check is clean and the file
    reads as written whichever copy serves it."""
    mset = env.member_set(3, backed=(1,))
    damaged = mset.members[1]
    fs = mount_set(env, mset, ['replicas=2'])
    data = content('fsck', 4 * MIB)
    write_file(os.path.join(fs.mountpoint, 'x'), data)
    assert fs.unmount() == 0

    r = fsck(mset)
    assert r.returncode == 0, r.stdout + r.stderr
    assert 'no problems found' in r.stdout and '0 differ' in r.stdout, r.stdout
    # flip a byte of the file's data in member 1's copy, memserver stopped
    damaged.stop()
    flip_a_byte(damaged.backing_file, data, 100, 0xff)
    damaged.start()
    r = fsck(mset)
    assert r.returncode == 1, r.stdout + r.stderr
    assert re.search(r'unit \d+ .*: the copy on \S+ differs from the one on', r.stdout), r.stdout
    assert f'the copy on {damaged.addr} does not match its checksum' in r.stdout, r.stdout
    r = fsck(mset, '--repair')
    assert r.returncode == 1, r.stdout + r.stderr
    assert f'the copy on {damaged.addr} does not match its checksum' in r.stdout, r.stdout
    assert 'rewritten from the copy on' in r.stdout, r.stdout
    r = fsck(mset)
    assert r.returncode == 0 and '0 differ' in r.stdout, r.stdout + r.stderr
    fs2 = mount_set(env, mset, mountpoint=fs.mountpoint)
    with open(os.path.join(fs2.mountpoint, 'x'), 'rb') as f:
        got = f.read()
    assert got == data
    assert fs2.unmount() == 0
    # with member 1 gone the other copy serves the same bytes
    damaged.stop(signal.SIGKILL)
    fs3 = mount_set(env, MemberSet([mset.members[0], mset.members[2]]),
                    mountpoint=fs.mountpoint)
    with open(os.path.join(fs3.mountpoint, 'x'), 'rb') as f:
        assert f.read() == got
    assert fs3.unmount() == 0


def test_member_back_is_resynced(env):
    """A member whose memserver (backing file) restarts on its port while the
    filesystem is in use: it is dropped at once, noted units written without
    it, and once it answers again within reconnect_timeout only those are
    copied back (a resync, not a rebuild). Then the other original member
    goes, and every byte still reads back through the resynced one."""
    mset = env.member_set(3, backed=(1,))
    first, back = mset.members[0], mset.members[1]
    fs = mount_set(env, mset, ['replicas=2', 'reconnect_timeout=60'])
    wl = Workload(fs.mountpoint, scaled(256 << 10, 64 << 10), limit=150)
    wl.thread.start()
    assert wait_for(lambda: len(wl.written) >= 5 or wl.errors, 60)
    back.stop(signal.SIGKILL)
    assert wait_for(lambda: stats(fs.mountpoint)['member1'].split()[1] != 'in_sync', 15)
    n = len(wl.written)
    assert wait_for(lambda: len(wl.written) >= n + 10 or wl.errors, 60)
    back.start()
    assert wait_for(lambda: stats(fs.mountpoint)['member1'].split()[1] == 'in_sync', 30), \
        stats(fs.mountpoint)
    wl.stop.set()
    wl.thread.join(60)
    assert not wl.errors, wl.errors
    assert 'resyncing member 1' in fs.output(), fs.output()
    first.stop(signal.SIGKILL)
    wl.verify()
    assert fs.unmount() == 0


INTENT_OFF = 12 << 10       # the write-intent map on each member (layout.h)


@pool_logic_only
def test_write_intent_after_a_crash(env):
    """The write-intent map: set while writing, clear after a clean unmount;
    a client killed with writes in flight leaves bits set, and the next mount
    makes the copies of those regions agree before reading them (here one
    copy is made to differ by hand, as a client dying between two copies
    would), so rmemfs-fsck then finds no difference."""
    mset = env.member_set(3, backed=(0, 1, 2))
    imgs = [m.backing_file for m in mset.members]
    fs = mount_set(env, mset, ['replicas=2'])
    data = content('intent', 4 * MIB)
    write_file(os.path.join(fs.mountpoint, 'f'), data)
    with open(imgs[0], 'rb') as f:
        f.seek(INTENT_OFF)
        assert any(f.read(4096)), 'no write-intent bit while writing'
    assert fs.unmount() == 0
    for img in imgs:
        with open(img, 'rb') as f:
            f.seek(INTENT_OFF)
            assert not any(f.read(52 << 10)), f'{img}: bits left after a clean unmount'
    # a copy differs, and the map says where writes were in flight
    for m in mset.members:
        m.stop()
    flip_a_byte(imgs[1], data, 7, 0x5a)
    # (the byte is in a slot of member 1, not a unit number: mark every region, on one member)
    with open(imgs[0], 'r+b') as f:
        f.seek(INTENT_OFF)
        f.write(b'\xff' * 64)
    for m in mset.members:
        m.start()
    # the mount compares every region first (all 512 are marked): under the
    # RDMA harness's emulated rxe that took over 30 s once
    fs2 = mount_set(env, mset, mountpoint=fs.mountpoint, timeout=180)
    assert re.search(r'regions compared, [1-9]\d* units had copies that differed',
                     fs2.output()), fs2.output()
    assert fs2.unmount() == 0
    r = fsck(mset)
    assert r.returncode == 0 and '0 differ' in r.stdout, r.stdout + r.stderr


def test_stale_member_is_rebuilt_at_mount(env):
    """A member lost while the filesystem was mounted comes back with its old
    pool (a backing file) only after the unmount: the next mount finds it
    stale from the others' records, never reads it, and rebuilds it whole;
    then every byte reads back through it with another original member gone."""
    mset = env.member_set(3, backed=(1,))
    first, stale = mset.members[0], mset.members[1]
    fs = mount_set(env, mset, ['replicas=2'])
    before = content('before', 3 * MIB)
    write_file(os.path.join(fs.mountpoint, 'before'), before)
    stale.stop(signal.SIGKILL)
    after = content('after', 3 * MIB)
    write_file(os.path.join(fs.mountpoint, 'before'), after)  # overwrites what it holds
    assert fs.unmount() == 0
    stale.start()
    fs2 = mount_set(env, mset, mountpoint=fs.mountpoint)
    assert 'member 1 (%s) is lost (stale)' % stale.addr in fs2.output(), fs2.output()
    assert wait_for(lambda: stats(fs2.mountpoint)['member1'].split()[1] == 'in_sync', 60), \
        stats(fs2.mountpoint)
    assert 'rebuilding member 1' in fs2.output(), fs2.output()

    def holder():  # member 1's lease holder string, as its memserver maps the file
        with open(stale.backing_file, 'rb') as f:
            f.seek(256)
            return f.read(64).rstrip(b'\0')
    # let back in, it carries the lease too (the heartbeat takes its word)
    me = f'pid {fs2.proc.pid}'.encode()
    assert wait_for(lambda: holder().endswith(me), 10), holder()
    first.stop(signal.SIGKILL)
    check_file(os.path.join(fs2.mountpoint, 'before'), after)
    assert fs2.unmount() == 0
