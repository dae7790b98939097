#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""growth.py - the helpers and the report of scripts/bench/growth.sh (issue 26's growth table).

  growth.py mount MNT PIDFILE LOG CMD...   run CMD (an rmemfs -f mount of MNT) in the
                                           background, its output appended to LOG; print the
                                           seconds from its exec to MNT being a mount point
                                           whose root lists; the daemon's pid into PIDFILE
  growth.py rss PID                        the VmRSS of PID in KiB
  growth.py build DIR                      results.txt, results.md, results.json from DIR/raw
  growth.py update-docs DIR DOC DOC_DIR    the table into DOC between the growth markers

growth.sh writes one raw/SET.tsv per data set (key<TAB>value lines) and raw/config.tsv.
"""

import json
import os
import subprocess
import sys
import time

from report import replace_block

BEGIN = '<!-- growth:begin -->'
END = '<!-- growth:end -->'
MOUNT_LIMIT_S = 300


def mount(mnt, pidfile, log, cmd):
    parent = os.stat(os.path.dirname(os.path.abspath(mnt))).st_dev
    with open(os.devnull, 'rb') as null_in, open(log, 'ab') as out:
        t0 = time.monotonic()
        p = subprocess.Popen(cmd, stdin=null_in, stdout=out, stderr=out)
    with open(pidfile, 'w') as f:
        f.write(f'{p.pid}\n')
    while True:
        try:
            if os.stat(mnt).st_dev != parent:
                break
        except OSError:
            pass
        if p.poll() is not None:
            sys.exit(f'growth: {cmd[0]} exited ({p.returncode}) before mounting {mnt}')
        if time.monotonic() - t0 > MOUNT_LIMIT_S:
            sys.exit(f'growth: {mnt} not mounted after {MOUNT_LIMIT_S} s')
        time.sleep(0.002)
    os.listdir(mnt)
    print(f'{time.monotonic() - t0:.4f}')


def rss_kib(pid):
    with open(f'/proc/{pid}/status') as f:
        for line in f:
            if line.startswith('VmRSS:'):
                return int(line.split()[1])
    return 0


def tsv(path):
    with open(path) as f:
        return dict(line.rstrip('\n').split('\t', 1) for line in f if '\t' in line)


def sets(d):
    """[(name, {key: value})] in the order growth.sh ran them"""
    cfg = tsv(os.path.join(d, 'raw', 'config.tsv'))
    out = []
    for name in cfg.get('sets', '').split(','):
        path = os.path.join(d, 'raw', f'{name}.tsv')
        if name and os.path.exists(path):
            out.append((name, tsv(path)))
    return cfg, out


def num(r, key):
    try:
        return float(r[key])
    except (KeyError, ValueError):
        return None


def fmt(v, spec):
    return '-' if v is None else format(v, spec)


def per(v, n, scale):
    return None if v is None or not n else v * scale / n


COLUMNS = ('set', 'files', 'data GiB', 'populate s', 'mount empty s', 'mount s', 'load s',
           'load us/file', 'ls -R s', 'ls -R us/entry', 'stat files/s', 'stat us/file',
           'stat us/file median dir', 'fsck s', 'fsck us/file', 'RSS empty MiB', 'RSS mount MiB', 'RSS after ls -R MiB', 'RSS after stat MiB',
           'RSS B/file')


def row(name, r):
    """the table's cells and the JSON record of one set"""
    files = int(r.get('files', 0))
    small = r.get('kind') == 'files'
    n = files if small else 0
    entries = files + int(r.get('dirs', 0))
    mount_s, ls_s, stat_s, fsck_s = (num(r, k) for k in ('mount_s', 'ls_s', 'stat_s', 'fsck_s'))
    empty_s = num(r, 'mount_empty_s')
    load_s, load0_s = num(r, 'mount_fs_s'), num(r, 'mount_empty_fs_s')
    grown_s = None if load_s is None or load0_s is None else load_s - load0_s
    kib = {k: num(r, k) for k in ('rss_empty_kib', 'rss_mount_kib', 'rss_ls_kib', 'rss_stat_kib')}
    mib = {k: None if v is None else v / 1024 for k, v in kib.items()}
    grown = None
    if n and kib['rss_mount_kib'] is not None and kib['rss_empty_kib'] is not None:
        grown = (kib['rss_mount_kib'] - kib['rss_empty_kib']) * 1024 / n
    rec = {
        'set': name, 'kind': r.get('kind'), 'files': files, 'dirs': int(r.get('dirs', 0)),
        'file_bytes': int(r.get('file_bytes', 0)), 'data_bytes': int(r.get('data_bytes', 0)),
        'pool': r.get('pool'), 'populate_s': num(r, 'populate_s'), 'mount_empty_s': empty_s,
        'mount_s': mount_s,
        **{k: num(r, k) for k in r if k.startswith(('mount_', 'mount_empty_')) and
           k.endswith(('_fs_s', '_cache_s', '_ckpt_s', '_derive_s', '_check_s'))},
        'mount2_s': num(r, 'mount2_s'), 'ls_s': ls_s, 'ls_entries': entries,
        'stat_s': stat_s, 'stat_files': files, 'stat_p50_us': num(r, 'stat_p50_us'),
        'stat_p99_us': num(r, 'stat_p99_us'),
        'stat_dir_med_us': num(r, 'stat_dir_med_us'), 'fsck_s': fsck_s,
        'fsck_rc': r.get('fsck_rc'),
        'fsck_maxrss_kib': num(r, 'fsck_maxrss_kib'), 'unmount_s': num(r, 'unmount_s'),
        **kib, 'rss_bytes_per_file': grown,
    }
    cells = [name, str(files), f"{int(r.get('data_bytes', 0)) / 2**30:.2f}",
             fmt(num(r, 'populate_s'), '.1f'), fmt(empty_s, '.3f'), fmt(mount_s, '.3f'),
             fmt(load_s, '.3f'),
             fmt(per(grown_s, n, 1e6), '.2f'), fmt(ls_s, '.2f'),
             fmt(per(ls_s, entries if small else 0, 1e6), '.2f'),
             fmt(None if not stat_s else files / stat_s, '.0f'),
             fmt(per(stat_s, n, 1e6), '.2f'),
             fmt(num(r, 'stat_dir_med_us') if small else None, '.2f'), fmt(fsck_s, '.2f'),
             fmt(per(fsck_s, n, 1e6), '.2f'),
             fmt(mib['rss_empty_kib'], '.1f'), fmt(mib['rss_mount_kib'], '.1f'),
             fmt(mib['rss_ls_kib'], '.1f'), fmt(mib['rss_stat_kib'], '.1f'), fmt(grown, '.0f')]
    return cells, rec


def build(d):
    cfg, got = sets(d)
    rows, recs = [], []
    for name, r in got:
        cells, rec = row(name, r)
        rows.append(cells)
        recs.append(rec)
    lines = [f"rmemfs growth: {cfg.get('machine')}; commit {cfg.get('commit')}; "
             f"build {cfg.get('buildtype')}; {cfg.get('date')}",
             f"small files of {cfg.get('file_bytes')} bytes in {cfg.get('dirs')} directories; "
             f"data as {cfg.get('data_file')} files written sequentially (1 MiB writes)",
             'every figure cold: a fresh mount after drop_caches (mount, ls -R and the stat '
             'pass each on its own fresh mount; fsck with nothing mounted)',
             '',
             '| ' + ' | '.join(COLUMNS) + ' |',
             '|' + '|'.join('---' if i == 0 else '--:' for i in range(len(COLUMNS))) + '|']
    lines += ['| ' + ' | '.join(c) + ' |' for c in rows]
    bad = [r['set'] for r in recs if r['fsck_rc'] not in (None, '0')]
    lines.append('')
    lines.append('fsck: ' + ('clean on every set' if not bad else 'NOT clean on ' + ', '.join(bad)))
    text = '\n'.join(lines) + '\n'
    with open(os.path.join(d, 'results.md'), 'w') as f:
        f.write(text)
    with open(os.path.join(d, 'results.txt'), 'w') as f:
        f.write(text)
    with open(os.path.join(d, 'results.json'), 'w') as f:
        json.dump({'config': cfg, 'sets': recs}, f, indent=1)
        f.write('\n')
    sys.stdout.write(text)


def update_docs(d, doc):
    with open(os.path.join(d, 'results.md')) as f:
        text = f.read()
    if replace_block(doc, BEGIN, END, f'{BEGIN}\n{text}{END}'):
        sys.exit(1)


def main(argv):
    if len(argv) >= 5 and argv[0] == 'mount':
        mount(argv[1], argv[2], argv[3], argv[4:])
    elif len(argv) == 2 and argv[0] == 'rss':
        print(rss_kib(int(argv[1])))
    elif len(argv) >= 2 and argv[0] == 'build':
        build(argv[1])
    elif len(argv) >= 3 and argv[0] == 'update-docs':
        update_docs(argv[1], argv[2])
    else:
        sys.exit(__doc__)


if __name__ == '__main__':
    main(sys.argv[1:])
