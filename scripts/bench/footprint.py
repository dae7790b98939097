#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""footprint.py - the rmemfs client's own memory through a day of use (issue 26); run by
scripts/bench/footprint.sh (scripts/bench.sh --footprint), which builds first.

usage: footprint.py BUILD_DIR OUT_DIR [--size MIB] [--idle SECS] [--hog MIB] [--quick]

For each cache setting (the defaults, then cache_size=64M) on a fresh memserver pool over TCP
on 127.0.0.1, the client's VmRSS and its cache's resident bytes (the stats xattr):
  mount      right after mounting an empty filesystem
  write      after writing --size MiB sequentially (1 MiB writes, fsync)
  read       after reading it back cold (page cache dropped; the client cache holds what
             it kept)
  idle       after --idle seconds without I/O (-o cache_idle=IDLE; default 30 s as rmemfs's)
  pressure   after a memory hog beside the client: both in one memory cgroup (v1, or
             cgroup2 with the memory controller) whose limit leaves the hog up to 256 MiB
             short unless the client gives memory back (the file read again first so the
             cache is full); the hog takes --hog MiB, 8 MiB every 0.1 s, and holds it
Also: whether the hog got all it asked for and the client lived (no OOM kill), and the
time a cold read of the file took in each setting. Writes results.txt (a markdown table)
and results.json into OUT_DIR. Everything it starts is stopped, and the cgroup removed, on
any exit.
"""
import json
import os
import re
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'lib'))
from memcg import MemCgroup  # noqa: E402

MIB = 1 << 20
HOG = r"""
import mmap, os, sys, time
procs, total = sys.argv[1], int(sys.argv[2])
with open(procs, 'w') as f:
    f.write(str(os.getpid()))
held = []
for _ in range(total // 8):
    m = mmap.mmap(-1, 8 << 20, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    for off in range(0, 8 << 20, mmap.PAGESIZE):
        m[off] = 1
    held.append(m)
    time.sleep(0.1)
print('HELD', flush=True)
sys.stdin.read()
"""


def rss(pid):
    with open(f'/proc/{pid}/status') as f:
        for line in f:
            if line.startswith('VmRSS:'):
                return int(line.split()[1]) * 1024
    return 0


def stats(mnt):
    out = {}
    for line in os.getxattr(mnt, 'user.rmemfs.stats').decode().splitlines():
        k, _, v = line.partition(' ')
        if v.isdigit():
            out[k] = int(v)
    return out


def wait_for(cond, timeout, step=0.1):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(step)
    return cond()


def drop_caches():
    subprocess.run(['sync'], check=False)
    with open('/proc/sys/vm/drop_caches', 'w') as f:
        f.write('3')


class Run:
    def __init__(self, build, out, label, opts, size_mib, idle, hog_mib):
        self.build, self.out, self.label = build, out, label
        self.opts, self.size, self.idle, self.hog_mib = opts, size_mib * MIB, idle, hog_mib
        self.work = os.path.join(out, 'raw', label)
        os.makedirs(self.work, exist_ok=True)
        self.mnt = os.path.join(self.work, 'mnt')
        os.makedirs(self.mnt, exist_ok=True)
        self.ms = self.fs = self.hog = self.cg = None
        self.rows = []

    def point(self, what, **extra):
        s = stats(self.mnt)
        row = {'point': what, 'rss': rss(self.fs.pid),
               'cache_resident': s.get('cache_resident_bytes'),
               'cache_bytes': s.get('cache_bytes'), **extra}
        self.rows.append(row)
        print('  %-10s RSS %7.1f MiB, cache resident %7.1f MiB' % (
            what, row['rss'] / MIB, (row['cache_resident'] or 0) / MIB), flush=True)

    def start(self):
        token = os.path.join(self.work, 'token')
        with open(token, 'w') as f:
            f.write('footprint-token\n')
        pool = self.size + 512 * MIB
        self.ms_log = open(os.path.join(self.work, 'memserver.log'), 'w')
        self.ms = subprocess.Popen([os.path.join(self.build, 'memserver/memserver'),
                                    '--listen', '127.0.0.1', '--port', '0', '--transport', 'tcp',
                                    '--size', str(pool), '--token-file', token],
                                   stdout=subprocess.PIPE, stderr=self.ms_log, text=True)
        port = None
        end = time.monotonic() + 60
        while port is None and time.monotonic() < end:
            line = self.ms.stdout.readline()
            if not line:
                break
            m = re.search(r'on tcp 127\.0\.0\.1:(\d+)', line)
            port = m.group(1) if m else None
        if port is None:
            raise RuntimeError('memserver did not start (see %s)' % self.ms_log.name)
        opts = ['transport=tcp', f'token_file={token}', 'format', f'cache_idle={self.idle}']
        opts += self.opts
        self.fs_log = open(os.path.join(self.work, 'rmemfs.log'), 'w')
        # the client starts in a memory cgroup of its own, without a limit until the hog comes
        self.cg = MemCgroup('rmemfs-footprint')
        if not self.cg.v2:
            self.cg.write('memory.swappiness', 0)
        procs = self.cg.procs
        self.fs = subprocess.Popen([os.path.join(self.build, 'fuse-client/rmemfs'),
                                    f'127.0.0.1:{port}', self.mnt, '-f', '-o', ','.join(opts)],
                                   stdout=self.fs_log, stderr=subprocess.STDOUT,
                                   preexec_fn=lambda: MemCgroup.join(procs))
        if not wait_for(lambda: os.path.ismount(self.mnt) or self.fs.poll() is not None, 60) \
                or not os.path.ismount(self.mnt):
            raise RuntimeError('rmemfs did not mount (see %s)' % self.fs_log.name)

    def dd(self, *args):
        t = time.monotonic()
        subprocess.run(['dd', 'bs=1M', f'count={self.size // MIB}', 'status=none', *args],
                       check=True)
        return time.monotonic() - t

    def run(self):
        f = os.path.join(self.mnt, 'data')
        self.start()
        time.sleep(1)
        self.point('mount')
        secs = self.dd('if=/dev/zero', f'of={f}', 'conv=fsync')
        self.point('write', mib_s=self.size / MIB / secs)
        drop_caches()
        secs = self.dd(f'if={f}', 'of=/dev/null')
        self.point('read', mib_s=self.size / MIB / secs)
        wait_for(lambda: stats(self.mnt).get('cache_chunks') == 1, self.idle + 10, 0.5)
        self.point('idle', waited_s=self.idle)
        drop_caches()
        self.dd(f'if={f}', 'of=/dev/null')
        self.point('read again')
        self.pressure()

    def pressure(self):
        # the cgroup leaves the hog `want` short (at most 256 MiB, at most what the cache can
        # give back) plus the 128 MiB of headroom the client keeps (twice its low watermark)
        resident = stats(self.mnt).get('cache_resident_bytes', 0)
        want = max(0, min(256 * MIB, resident - 32 * MIB))
        limit = self.cg.usage() + self.hog_mib * MIB + 128 * MIB - want
        self.cg.limit(limit)
        before = stats(self.mnt)
        t = time.monotonic()
        self.hog = subprocess.Popen([sys.executable, '-c', HOG,
                                     os.path.join(self.cg.path, 'cgroup.procs'),
                                     str(self.hog_mib)],
                                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        line = self.hog.stdout.readline()
        took = time.monotonic() - t
        after = stats(self.mnt)
        self.point('pressure', hog_held=line.strip() == 'HELD', client_alive=self.fs.poll() is None,
                   cgroup_limit=limit, hog_mib=self.hog_mib, hog_secs=took,
                   chunks_released=after.get('chunks_released', 0) -
                   before.get('chunks_released', 0),
                   pressure_releases=after.get('pressure_releases', 0) -
                   before.get('pressure_releases', 0),
                   idle_releases=after.get('idle_releases', 0) - before.get('idle_releases', 0))

    def stop(self):
        if self.hog:
            self.hog.kill()
            self.hog.wait(30)
        if self.fs:
            if os.path.ismount(self.mnt):
                subprocess.run(['umount', self.mnt], check=False)
            try:
                self.fs.wait(60)
            except subprocess.TimeoutExpired:
                self.fs.kill()
                self.fs.wait(10)
                subprocess.run(['umount', '-l', self.mnt], check=False)
        if self.cg:
            if self.fs.poll() is None:  # still there: out of the cgroup first
                with open(os.path.join(os.path.dirname(self.cg.path), 'cgroup.procs'), 'w') as f:
                    f.write(str(self.fs.pid))
            self.cg.remove()
        if self.ms:
            self.ms.send_signal(signal.SIGTERM)
            try:
                self.ms.wait(30)
            except subprocess.TimeoutExpired:
                self.ms.kill()
                self.ms.wait(10)


def table(runs):
    lines = ['| cache | point | client RSS (MiB) | cache resident (MiB) | notes |',
             '|---|---|---|---|---|']
    for label, rows in runs:
        for r in rows:
            notes = []
            if 'mib_s' in r:
                notes.append('%.0f MiB/s' % r['mib_s'])
            if r['point'] == 'idle':
                notes.append('after %d s idle' % r['waited_s'])
            if r['point'] == 'pressure':
                notes.append('hog of %d MiB in a cgroup of %.0f MiB with the client: %s in %.1f s; '
                             'client %s; %d chunks given back (%d times for pressure, %d for '
                             'idleness)' % (
                                 r['hog_mib'], r['cgroup_limit'] / MIB,
                                 'all of it held' if r['hog_held'] else 'NOT all held',
                                 r['hog_secs'], 'alive' if r['client_alive'] else 'DEAD',
                                 r['chunks_released'], r['pressure_releases'],
                                 r['idle_releases']))
            lines.append('| %s | %s | %.1f | %s | %s |' % (
                label, r['point'], r['rss'] / MIB,
                '%.0f' % (r['cache_resident'] / MIB) if r['cache_resident'] is not None else '-',
                '; '.join(notes)))
    return '\n'.join(lines)


def main(argv):
    build, out = argv[1], argv[2]
    args = argv[3:]
    size, idle, hog = 1024, 30, 1024

    def opt(name, default):
        return int(args[args.index(name) + 1]) if name in args else default
    if '--quick' in args:
        size, idle, hog = 128, 3, 384
    size, idle, hog = opt('--size', size), opt('--idle', idle), opt('--hog', hog)
    os.makedirs(out, exist_ok=True)
    runs = []
    for label, opts in (('default', []), ('cache_size=64M', ['cache_size=64M'])):
        print(f'{label}:', flush=True)
        r = Run(build, out, label, opts, size, idle, hog)
        try:
            r.run()
        finally:
            r.stop()
        runs.append((label, r.rows))
    text = table(runs)
    head = ('rmemfs client footprint, %s, %s of data, -o cache_idle=%d, hog %d MiB\n\n'
            % (time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime()), '%d MiB' % size, idle, hog))
    with open(os.path.join(out, 'results.txt'), 'w') as f:
        f.write(head + text + '\n')
    with open(os.path.join(out, 'results.json'), 'w') as f:
        json.dump({'size_mib': size, 'idle_s': idle, 'hog_mib': hog,
                   'runs': [{'cache': l, 'points': rows} for l, rows in runs]}, f, indent=1)
    print('\n' + head + text)
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
