#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""pools.py - the report of scripts/bench/pools.sh (many pools on one memserver).

  pools.py build DIR                       results.txt from DIR/raw
  pools.py update-docs DIR DOC DOC_DIR     that table into DOC between the pools markers
"""

import glob
import json
import os
import re
import statistics
import sys

SETUPS = ('default', 'alone', 'beside-7')
ROWS = (('read', 1), ('read', 32), ('write', 1), ('write', 32))
BEGIN = '<!-- pools:begin -->'
END = '<!-- pools:end -->'
BAR = 0.95  # the bar: beside-7 within 5% of alone


def config(d):
    with open(os.path.join(d, 'raw', 'config.tsv')) as f:
        return dict(line.rstrip('\n').split('\t', 1) for line in f if '\t' in line)


def samples(d):
    """{(setup, op, qd): [(rate_Mops, lat_med_us, lat_p99_us), ...]} over the rounds"""
    out = {}
    pat = re.compile(r'^(default|alone|beside-7)-(\d+)-(read|write)-(\d+)\.json$')
    for path in sorted(glob.glob(os.path.join(d, 'raw', '*.json'))):
        m = pat.match(os.path.basename(path))
        if not m:
            continue
        with open(path) as f:
            r = json.load(f)['results'][0]
        key = (m.group(1), m.group(3), int(m.group(4)))
        out.setdefault(key, []).append((r['rate_Mops'] * 1e6, r['lat_med_us'], r['lat_p99_us']))
    return out


def med(vals, i):
    return statistics.median(v[i] for v in vals)


def build(d):
    cfg = config(d)
    s = samples(d)
    lines = [f"rmem-perf 4 KiB, TCP on 127.0.0.1, one memserver; pools of {cfg.get('pool')}, "
             f"{cfg.get('duration_s')} s per row, median of {cfg.get('rounds')} interleaved "
             f"rounds ({cfg.get('machine')})",
             '  default: --size (the default pool); alone: --capacity, tenant pool p0 only;',
             '  beside-7: p0 and seven other tenants\' pools, every pool filled with data',
             '',
             f"{'op':<6} {'QD':>3} {'default IOPS':>13} {'alone IOPS':>11} {'beside-7 IOPS':>14}"
             f" {'beside-7/alone':>15} {'alone/default':>14} {'p99 us alone/beside-7':>22}"]
    worst = None
    for op, qd in ROWS:
        got = [s.get((st, op, qd)) for st in SETUPS]
        if not all(got):
            lines.append(f'{op:<6} {qd:>3}  (missing)')
            continue
        iops = [med(g, 0) for g in got]
        p99 = [med(g, 2) for g in got]
        ratio = iops[2] / iops[1]
        worst = ratio if worst is None else min(worst, ratio)
        lines.append(f'{op:<6} {qd:>3} {iops[0]:>13.0f} {iops[1]:>11.0f} {iops[2]:>14.0f}'
                     f' {ratio:>14.3f}x {iops[1] / iops[0]:>13.3f}x'
                     f' {p99[1]:>11.1f}/{p99[2]:<10.1f}')
    spread = [max(v[0] for v in vals) / min(v[0] for v in vals) - 1 for vals in s.values()
              if min(v[0] for v in vals) > 0]
    if spread:
        lines.append(f'round-to-round spread of one set-up\'s IOPS (max/min - 1): median '
                     f'{statistics.median(spread) * 100:.0f} %, largest {max(spread) * 100:.0f} %')
    lines.append('')
    if worst is None:
        lines.append('target: no complete row')
    else:
        verdict = 'met' if worst >= BAR else 'MISSED'
        lines.append(f'target: beside-7 >= {BAR:.2f}x alone on every row: worst {worst:.3f}x,'
                     f' {verdict}')
    text = '\n'.join(lines) + '\n'
    with open(os.path.join(d, 'results.txt'), 'w') as f:
        f.write(text)
    sys.stdout.write(text)


def update_docs(d, doc):
    with open(os.path.join(d, 'results.txt')) as f:
        text = f.read()
    with open(doc) as f:
        page = f.read()
    if page.count(BEGIN) != 1 or page.count(END) != 1:
        sys.exit(f'{doc}: want one {BEGIN} ... {END} pair')
    head, rest = page.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    with open(doc, 'w') as f:
        f.write(f'{head}{BEGIN}\n```\n{text}```\n{END}{tail}')


def main(argv):
    if len(argv) >= 2 and argv[0] == 'build':
        build(argv[1])
    elif len(argv) >= 3 and argv[0] == 'update-docs':
        update_docs(argv[1], argv[2])
    else:
        sys.exit(__doc__)


if __name__ == '__main__':
    main(sys.argv[1:])
