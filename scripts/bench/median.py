#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Medians over several full runs of scripts/bench.sh.

usage: scripts/bench/median.py [--baseline TARGET] DIR...

Each DIR is a results directory of scripts/bench.sh (its results.json). For
every job and target of the first run, prints the median figure (MiB/s for the
1 MiB jobs, IOPS or files/s otherwise) and the median of the per-run ratios to
the baseline target (default passthrough_ll) with each run's ratio beside it:
a ratio is taken within one run, where both ran on the same machine at the same
time, and only then is the median taken.
"""
import json
import statistics
import sys


def load(path):
    with open(f'{path}/results.json') as f:
        return json.load(f)


def figure(row):
    """the job's rate: MiB/s for 1 MiB jobs, else IOPS (files/s for metadata)"""
    if row['job'].startswith('seq-'):
        return row.get('mib_s')
    return row.get('iops')


def by_job(run):
    return {(r['job'], r['target']): r for r in run['results']}


def ratio(rows, job, target, base):
    a, b = rows.get((job, target)), rows.get((job, base))
    if not a or not b or not figure(a) or not figure(b):
        return None
    return figure(a) / figure(b)


def main(argv):
    base = 'passthrough_ll'
    if len(argv) > 2 and argv[1] == '--baseline':
        base, argv = argv[2], argv[2:]
    dirs = argv[1:]
    if not dirs:
        sys.exit(__doc__)
    runs = [by_job(load(d)) for d in dirs]
    print(f'median of {len(runs)} runs: {", ".join(dirs)}')
    print(f'{"job":22s}{"target":16s}{"median":>12s}  {"vs " + base:>14s}  per run')
    for job, target in runs[0]:
        vals = [figure(r[(job, target)]) for r in runs if (job, target) in r]
        vals = [v for v in vals if v]
        if not vals:
            continue
        ratios = [ratio(r, job, target, base) for r in runs]
        known = [x for x in ratios if x is not None]
        med = f'{statistics.median(known):.2f}x' if known and target != base else ''
        each = ' '.join('-' if x is None else f'{x:.2f}' for x in ratios) if med else ''
        print(f'{job:22s}{target:16s}{statistics.median(vals):12.1f}  {med:>14s}  {each}')


if __name__ == '__main__':
    main(sys.argv)
