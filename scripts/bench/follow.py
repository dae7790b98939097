#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""follow.py - a reader that follows, for the rmemfs-readers target of scripts/bench.sh.

  follow.py loop MNT LOG FILES   until killed, every 0.5 s: list MNT/bench (what `ls -f`
                                 does: readdir, no sort, no stat), stat a few of the paths
                                 the jobs write (seq.dat, meta/, three of the FILES
                                 metadata files), read the reader's lag from its stats
                                 xattr; one tab-separated line per pass into LOG
  follow.py summary LOG          one line: what the reader saw over the whole target

One process per reader mount, so that the loop costs no fork per pass (it shares the CPUs
with the writer it is measured beside). Standard library only.
"""
import os
import statistics
import sys
import time

PERIOD = 0.5
FIELDS = ('time', 'listed', 'entries', 'seq_size', 'meta_files', 'state', 'lag_ms', 'applied',
          'reloads')


def reader_stats(mnt):
    """the reader's "name value" stats lines (user.rmemfs.stats of its root) as a dict"""
    try:
        text = os.getxattr(mnt, 'user.rmemfs.stats').decode(errors='replace')
    except OSError:
        return {}
    out = {}
    for line in text.splitlines():
        p = line.split(None, 1)
        if len(p) == 2:
            out[p[0]] = p[1].strip()
    return out


def cmd_loop(mnt, log, files):
    files = int(files)
    job = os.path.join(mnt, 'bench')
    metas = ['meta/f%07d' % i for i in sorted({0, files // 2, max(files - 1, 0)})]
    with open(log, 'a') as f:
        f.write('\t'.join(FIELDS) + '\n')
        while True:
            t0 = time.monotonic()
            try:
                entries, listed = len(os.listdir(job)), 1
            except OSError:
                entries, listed = 0, 0
            seq_size, meta_files = -1, 0
            for p in ['seq.dat', 'meta'] + metas:
                try:
                    st = os.stat(os.path.join(job, p))
                except OSError:
                    continue
                if p == 'seq.dat':
                    seq_size = st.st_size
                elif p != 'meta':
                    meta_files += 1
            s = reader_stats(mnt)
            f.write('%.3f\t%d\t%d\t%d\t%d\t%s\t%s\t%s\t%s\n' % (
                time.time(), listed, entries, seq_size, meta_files,
                s.get('reader_state', '-'), s.get('reader_lag_ms', '-'),
                s.get('reader_applied', '-'), s.get('reader_reloads', '-')))
            f.flush()
            time.sleep(max(0.0, PERIOD - (time.monotonic() - t0)))


def cmd_summary(log):
    rows = []
    try:
        with open(log) as f:
            for line in f:
                p = line.rstrip('\n').split('\t')
                if len(p) == len(FIELDS) and p[0] != 'time':
                    rows.append(dict(zip(FIELDS, p)))
    except OSError:
        pass
    if not rows:
        print('no pass recorded')
        return 0
    failed = sum(1 for r in rows if r['listed'] != '1')
    seq = [int(r['seq_size']) for r in rows if int(r['seq_size']) >= 0]
    meta = sum(1 for r in rows if r['meta_files'] != '0')
    lags = [int(r['lag_ms']) for r in rows if r['lag_ms'].isdigit()]
    out = ['%d passes, %d s (listing of bench/ failed in %d)' % (
        len(rows), round(float(rows[-1]['time']) - float(rows[0]['time'])), failed)]
    out.append('seq.dat seen in %d (up to %d MiB)' % (len(seq), max(seq) // 1048576)
               if seq else 'seq.dat never seen')
    out.append('metadata files seen in %d' % meta)
    if lags:
        out.append('lag median %d ms, max %d ms; last: %s, applied seq %s, %s full loads' % (
            statistics.median(lags), max(lags), rows[-1]['state'], rows[-1]['applied'],
            rows[-1]['reloads']))
    else:
        out.append('no reader_lag_ms in its stats (this rmemfs does not follow)')
    print('; '.join(out))
    return 0


def main(argv):
    cmds = {'loop': (cmd_loop, 3), 'summary': (cmd_summary, 1)}
    if len(argv) < 2 or argv[1] not in cmds or len(argv) - 2 != cmds[argv[1]][1]:
        print(__doc__, file=sys.stderr)
        return 2
    return cmds[argv[1]][0](*argv[2:])


if __name__ == '__main__':
    sys.exit(main(sys.argv))
