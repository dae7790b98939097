"""Data block checksums (docs/ARCHITECTURE.md, "Data checksums").

A byte flipped in a memserver's backing file while the server is stopped -
what a bad DIMM, a stale writer or a bug would leave - must never come back
as file content: on one server the read of that block fails with EIO and the
daemon says which file and offset, while every other block and file reads
fine. A client killed in the middle of in-place overwrites must not turn the
checksums it had not made durable into false corruption reports.

The daemons run with G_DEBUG=fatal-criticals here (not fatal-warnings): a
checksum mismatch is reported as a GLib warning, and each test checks that
the warnings printed are exactly the ones it caused.
"""
import mmap
import os
import re
import signal
import subprocess
import sys
import textwrap
import time

from conftest import ctl, fsck, pattern, stats, wait_for

BS = 4096
NONFATAL = {'G_DEBUG': 'fatal-criticals'}


def direct_pread(path, off, n):
    """An O_DIRECT read (aligned buffer): what the application gets, no page cache."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    buf = mmap.mmap(-1, n)
    try:
        got = os.preadv(fd, [buf], off)
        return bytes(buf[:got])
    finally:
        buf.close()
        os.close(fd)


def flip_byte(image, needle, delta):
    """Flip one byte of the only copy of needle in the pool file image, at delta into it."""
    with open(image, 'r+b') as f:
        mm = mmap.mmap(f.fileno(), 0)
        try:
            at = mm.find(needle)
            assert at >= 0, 'the data is not in the backing file'
            assert mm.find(needle, at + 1) < 0, 'the data is in the backing file twice'
            mm[at + delta] ^= 0x5a
            mm.flush()
        finally:
            mm.close()
        return at


def test_flipped_byte_is_eio_on_one_server(env, tmp_path):
    img = str(tmp_path / 'pool.img')
    server = env.server('64M', backing_file=img)
    fs = env.rmemfs(server, extra_env=NONFATAL)
    a, b = os.path.join(fs.mountpoint, 'a'), os.path.join(fs.mountpoint, 'b')
    data_a, data_b = pattern(1, 64 * BS), pattern(2, 10 * BS + 123)
    for p, d in ((a, data_a), (b, data_b)):
        with open(p, 'wb') as f:
            f.write(d)
            os.fsync(f.fileno())
    ino = os.stat(a).st_ino
    assert fs.unmount() == 0
    server.stop()
    bad = 20  # the block of a that gets damaged
    flip_byte(img, data_a[bad * BS:(bad + 1) * BS], 100)
    server.start()

    fs = env.rmemfs(server, mountpoint=fs.mountpoint, extra_env=NONFATAL)
    try:
        direct_pread(a, bad * BS, BS)
        raise AssertionError('the damaged block was read without an error')
    except OSError as e:
        assert e.errno == 5, e
    # every other block of the file, and the other file, read as written
    for k in reversed(range(64)):
        if k != bad:
            assert direct_pread(a, k * BS, BS) == data_a[k * BS:(k + 1) * BS], f'block {k}'
    with open(b, 'rb') as f:
        assert f.read() == data_b
    # a buffered read across the damage fails too, and the kernel's retries add no line
    try:
        with open(a, 'rb') as f:
            f.read()
        raise AssertionError('a read across the damaged block succeeded')
    except OSError as e:
        assert e.errno == 5, e
    s = stats(fs.mountpoint)
    assert s['csum_errors'] == 1, s
    assert s['csum_verified'] >= 63, s
    warnings = fs.warnings()
    assert len(warnings) == 1, warnings
    assert f'inode {ino} offset {bad * BS} ' in warnings[0], warnings
    assert fs.unmount() == 0
    env.expected_warnings = True  # the one line above, checked


def test_flipped_byte_is_repaired_on_a_set(env):
    """replicas=2: the read returns the right bytes from the other copy, the
    bad copy is rewritten (the backing file is right again), the stats and
    one log line say so. A read goes to one copy (the unit's preferred one
    when the members are idle): the byte is flipped on the member that
    serves the block, found by trying the first, then the second."""
    mset = env.member_set(2, '64M', backed=(0, 1))
    fs = env.rmemfs(mset, options=['replicas=2'])
    a = os.path.join(fs.mountpoint, 'a')
    data = pattern(4, 32 * BS)
    with open(a, 'wb') as f:
        f.write(data)
        os.fsync(f.fileno())
    ino = os.stat(a).st_ino
    assert fs.unmount() == 0
    bad = 9
    block = data[bad * BS:(bad + 1) * BS]
    for damaged in mset.members:
        damaged.stop()
        at = flip_byte(damaged.backing_file, block, 7)
        damaged.start()
        fs = env.rmemfs(mset, mountpoint=fs.mountpoint, options=['replicas=2'])
        assert direct_pread(a, bad * BS, BS) == block
        s = stats(fs.mountpoint)
        assert s['csum_errors'] == 0, s
        if s['csum_repaired'] == 0:  # the other copy served it: put the byte back, try that one
            assert fs.unmount() == 0
            damaged.stop()
            with open(damaged.backing_file, 'r+b') as f:
                f.seek(at + 7)
                f.write(bytes([block[7]]))
            damaged.start()
            continue
        assert s['csum_repaired'] == 1, s
        with open(a, 'rb') as f:
            assert f.read() == data
        lines = [ln for ln in fs.output().splitlines() if 'was bad' in ln]
        assert len(lines) == 1, fs.output()
        assert f'inode {ino} offset {bad * BS} ' in lines[0] and damaged.addr in lines[0], lines
        assert fs.unmount() == 0
        damaged.stop()
        with open(damaged.backing_file, 'rb') as f:
            f.seek(at)
            assert f.read(BS) == block, 'the bad copy was not rewritten'
        damaged.start()
        return
    raise AssertionError('neither copy served the read of the damaged block')


def damaged_file(env, server, fs, image_of, blocks=16, bad=5):
    """Write a file, unmount, flip a byte of its block bad in image_of's
    backing file (that server stopped meanwhile). Its data, ino, offset in the image."""
    path = os.path.join(fs.mountpoint, 'f')
    data = pattern(5, blocks * BS)
    with open(path, 'wb') as f:
        f.write(data)
        os.fsync(f.fileno())
    ino = os.stat(path).st_ino
    assert fs.unmount() == 0
    image_of.stop()
    at = flip_byte(image_of.backing_file, data[bad * BS:(bad + 1) * BS], 33)
    image_of.start()
    return data, ino, at


def test_scrub_and_fsck_report_a_flipped_byte_on_one_server(env, tmp_path):
    server = env.server('64M', backing_file=str(tmp_path / 'pool.img'))
    fs = env.rmemfs(server)
    bad = 5
    data, ino, _ = damaged_file(env, server, fs, server, bad=bad)
    r = fsck(server)
    assert r.returncode == 1, f'{r.stdout}\n{r.stderr}'
    lines = [ln for ln in r.stdout.splitlines() if 'does not match its checksum' in ln]
    assert len(lines) == 1 and f'inode {ino} offset {bad * BS} ' in lines[0], r.stdout

    fs = env.rmemfs(server, mountpoint=fs.mountpoint, extra_env=NONFATAL)
    r = ctl(fs.mountpoint, 'scrub', '--wait')
    assert r.returncode == 1, f'{r.stdout}\n{r.stderr}'
    s = stats(fs.mountpoint)
    assert s['scrub'] == 'done' and s['scrub_errors'] == 1, s
    assert s['scrub_done'] == s['scrub_total'] >= 16, s
    assert s['scrub_repaired'] == 0, s
    warnings = fs.warnings()
    assert len(warnings) == 1 and f'inode {ino} offset {bad * BS} ' in warnings[0], warnings
    assert fs.unmount() == 0
    env.expected_warnings = True  # the one line above, checked


def test_scrub_and_fsck_repair_a_flipped_byte_on_a_set(env):
    """Scrub reads every copy: the flipped one is rewritten from the other
    whichever copy reads would have used; fsck --repair does the same."""
    mset = env.member_set(2, '64M', backed=(0, 1))
    fs = env.rmemfs(mset, options=['replicas=2'])
    bad = 5
    data, ino, at = damaged_file(env, mset, fs, mset.members[1], bad=bad)
    r = fsck(mset)
    assert r.returncode == 1, f'{r.stdout}\n{r.stderr}'
    assert f'inode {ino} offset {bad * BS} ' in r.stdout, r.stdout
    assert mset.members[1].addr in r.stdout, r.stdout

    fs = env.rmemfs(mset, mountpoint=fs.mountpoint, options=['replicas=2'])
    r = ctl(fs.mountpoint, 'scrub', '--wait')
    assert r.returncode == 0, f'{r.stdout}\n{r.stderr}'
    s = stats(fs.mountpoint)
    assert s['scrub'] == 'done' and s['scrub_repaired'] == 1 and s['scrub_errors'] == 0, s
    assert 'copies repaired' in r.stdout, r.stdout
    with open(os.path.join(fs.mountpoint, 'f'), 'rb') as f:
        assert f.read() == data
    assert fs.unmount() == 0
    r = fsck(mset)
    assert r.returncode == 0, f'{r.stdout}\n{r.stderr}'

    # once more, repaired by fsck --repair this time
    member = mset.members[0]
    member.stop()
    flip_byte(member.backing_file, data[bad * BS:(bad + 1) * BS], 44)
    member.start()
    r = fsck(mset, '--repair')
    assert r.returncode == 1 and 'rewritten from the copy on' in r.stdout, r.stdout
    r = fsck(mset)
    assert r.returncode == 0, f'{r.stdout}\n{r.stderr}'


WRITER = textwrap.dedent('''
    import os, random, sys
    path, blocks = sys.argv[1], int(sys.argv[2])
    fd = os.open(path, os.O_WRONLY)
    rng = random.Random(7)
    print('ready', flush=True)
    i = 0
    while True:
        b = rng.randrange(blocks)
        # whole blocks and parts of blocks (read-modify-write), in place
        off = b * 4096 + (rng.randrange(4096) if i % 3 == 0 else 0)
        n = 4096 if i % 3 else rng.randrange(1, 4096 - off % 4096 + 1)
        os.pwrite(fd, rng.randbytes(n), off)
        if i % 16 == 0:
            os.fdatasync(fd)
        i += 1
''')


def test_kill9_during_overwrites_leaves_no_false_errors(env):
    """kill -9 of the client while it overwrites written blocks in place: the
    remount settles each block it was writing on its new or its old checksum
    (journaled before the data: none holds other bytes), and every block reads."""
    server = env.server('64M')
    fs = env.rmemfs(server, options=['writeback=off'])
    path = os.path.join(fs.mountpoint, 'f')
    blocks = 2048  # 8 MiB: one hot region
    with open(path, 'wb') as f:
        f.write(pattern(3, blocks * BS))
        os.fsync(f.fileno())
    writer = subprocess.Popen([sys.executable, '-c', WRITER, path, str(blocks)],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert writer.stdout.readline().strip() == 'ready'
        assert wait_for(lambda: stats(fs.mountpoint)['hot_regions'] > 0, timeout=30)
        time.sleep(1)
        fs.kill9()
    finally:
        if writer.poll() is None:
            writer.send_signal(signal.SIGKILL)
        writer.wait(30)
        writer.stdout.close()

    fs2 = env.rmemfs(server, mountpoint=fs.mountpoint)
    with open(path, 'rb') as f:
        assert len(f.read()) == blocks * BS
    s = stats(fs2.mountpoint)
    assert s['csum_errors'] == 0, s
    assert re.search(r'while writing in place: \d+ blocks .* checked, \d+ hold the new bytes, '
                     r'\d+ the old, 0 neither', fs2.output()), fs2.output()
    assert s['hot_regions'] == 0, s
    assert fs2.unmount() == 0
