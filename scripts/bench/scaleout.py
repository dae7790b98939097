#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""scaleout.py - the report of scripts/bench/scaleout.sh.

  scaleout.py fio-line JSON RC          one job's line for the terminal
  scaleout.py build DIR                 DIR/results.txt, results.json, scaleout.png
  scaleout.py update-docs DIR DOC DOCDIR  the table into DOC between the scale-out
                                        markers, the chart into DOCDIR/scaleout.png

Every ratio compares runs of the same results directory (one machine, one run).
"""
import json
import os
import re
import shutil
import subprocess
import sys

JOBS = ['seq-write-1m', 'seq-read-1m', 'randread-4k-qd32']
MIB = 1 << 20
BEGIN, END = '<!-- scaleout:begin -->', '<!-- scaleout:end -->'
# (job, members, replicas) -> the least speed-up over one member, replicas 1 (the issue's)
TARGETS = {('seq-read-1m', 4, 1): 3.2, ('seq-write-1m', 4, 1): 3.2, ('seq-write-1m', 4, 2): 1.6}


def fio_result(path):
    """{'mibs', 'iops', 'errors'} of one fio JSON, or None when the job did not finish."""
    try:
        with open(path) as f:
            text = f.read()
        doc = json.loads(text[text.index('{'):])
    except (OSError, ValueError):
        return None
    job = doc['jobs'][0]
    rw = job['write'] if job['write']['io_bytes'] else job['read']
    return {'mibs': rw['bw_bytes'] / MIB, 'iops': rw['iops'], 'errors': 1 if job['error'] else 0}


def fio_line(path, rc):
    r = fio_result(path)
    if r is None or rc != '0':
        err = path[:-5] + '.err'
        last = ''
        if os.path.exists(err):
            lines = [ln for ln in open(err).read().splitlines() if ln.strip()]
            last = lines[-1] if lines else ''
        return f'FAILED (exit {rc}){": " + last if last else ""}'
    return f'{r["mibs"]:9.1f} MiB/s {r["iops"]:9.0f} IOPS  errors {r["errors"]}'


def load(d):
    raw = os.path.join(d, 'raw')
    cfg = {}
    with open(os.path.join(raw, 'config.tsv')) as f:
        for line in f:
            k, _, v = line.rstrip('\n').partition('\t')
            cfg[k] = v
    rows = []
    for name in sorted(os.listdir(raw)):
        m = re.fullmatch(r'(.+?)(-kill)?-(\d+)-(\d+)\.json', name)
        if not m or m.group(1) not in JOBS:
            continue
        r = fio_result(os.path.join(raw, name))
        rows.append({'job': m.group(1), 'kill': bool(m.group(2)), 'members': int(m.group(3)),
                     'replicas': int(m.group(4)), 'result': r})
    return cfg, rows


def find(rows, job, n, r, kill=False):
    for row in rows:
        if (row['job'], row['members'], row['replicas'], row['kill']) == (job, n, r, kill):
            return row['result']
    return None


def judge(rows):
    """Each row's ratio and verdict, computed from the rows themselves."""
    out = []
    for row in rows:
        res, job, n, r = row['result'], row['job'], row['members'], row['replicas']
        base = find(rows, job, 1, 1)
        e = dict(row)
        e['vs_one'] = res['mibs'] / base['mibs'] if res and base and base['mibs'] else None
        e['verdict'] = ''
        if row['kill']:
            whole = find(rows, job, n, r)
            e['vs_whole'] = res['mibs'] / whole['mibs'] if res and whole and whole['mibs'] else None
            floor = (n - 1) / n
            if res is None:
                e['verdict'] = 'FAILED: the job did not finish'
            elif res['errors']:
                e['verdict'] = 'MISSED: the application saw an error'
            elif e['vs_whole'] is not None:
                e['verdict'] = ('met' if e['vs_whole'] >= floor else 'MISSED') + \
                    f' (>= {floor:.2f} of the run without a kill, no errors)'
        elif (job, n, r) in TARGETS and e['vs_one'] is not None:
            t = TARGETS[(job, n, r)]
            e['verdict'] = ('met' if e['vs_one'] >= t else 'MISSED') + f' (>= {t}x)'
        out.append(e)
    order = {j: i for i, j in enumerate(JOBS)}
    out.sort(key=lambda e: (e['kill'], order[e['job']], e['replicas'], e['members']))
    return out


def table(cfg, rows):
    lines = [f'rmemfs scale-out: {cfg.get("members")} memservers in network namespaces, '
             f'each behind a veth pair limited to {cfg.get("rate")} each way (tc tbf); '
             f'file {cfg.get("size")}, random reads {cfg.get("runtime")} s; '
             f'commit {cfg.get("commit")}, {cfg.get("cpus")} CPUs, {cfg.get("date")}',
             '',
             f'{"job":<18} {"members":>7} {"replicas":>8} {"kill":>4} {"MiB/s":>9} '
             f'{"IOPS":>9} {"x 1 member":>10} {"errors":>6}  target']
    for e in rows:
        res = e['result']
        mibs = f'{res["mibs"]:9.1f}' if res else f'{"failed":>9}'
        iops = f'{res["iops"]:9.0f}' if res else f'{"-":>9}'
        ratio = f'{e["vs_one"]:9.2f}x' if e['vs_one'] is not None else f'{"-":>10}'
        errs = str(res['errors']) if res else '-'
        lines.append(f'{e["job"]:<18} {e["members"]:>7} {e["replicas"]:>8} '
                     f'{"yes" if e["kill"] else "":>4} {mibs} {iops} {ratio} {errs:>6}  '
                     f'{e["verdict"]}')
    return '\n'.join(lines) + '\n'


def chart(d, rows):
    if not shutil.which('gnuplot'):
        return None
    dat = os.path.join(d, 'raw', 'scaleout.dat')
    series = []
    with open(dat, 'w') as f:
        for job in JOBS:
            for r in (1, 2):
                pts = [(e['members'], e['result']['mibs']) for e in rows
                       if e['job'] == job and e['replicas'] == r and not e['kill'] and e['result']]
                if not pts:
                    continue
                f.write(f'# {job} replicas={r}\n')
                for n, v in sorted(pts):
                    f.write(f'{n} {v:.1f}\n')
                f.write('\n\n')
                series.append(f'{job}, replicas {r}')
    png = os.path.join(d, 'scaleout.png')
    plots = ', '.join(f"'{dat}' index {i} with linespoints title '{t}'"
                      for i, t in enumerate(series))
    script = (f"set terminal pngcairo size 900,520; set output '{png}';"
              "set xlabel 'members'; set ylabel 'MiB/s'; set key top left; set grid;"
              "set xtics 1; set title 'rmemfs over rate-limited memservers';"
              f"plot {plots}")
    if subprocess.run(['gnuplot', '-e', script], capture_output=True).returncode != 0:
        return None
    return png


def build(d):
    cfg, rows = load(d)
    rows = judge(rows)
    text = table(cfg, rows)
    with open(os.path.join(d, 'results.txt'), 'w') as f:
        f.write(text)
    with open(os.path.join(d, 'results.json'), 'w') as f:
        json.dump({'config': cfg, 'rows': rows}, f, indent=1)
    chart(d, rows)


def update_docs(d, doc, docdir):
    with open(os.path.join(d, 'results.txt')) as f:
        text = f.read()
    with open(doc) as f:
        page = f.read()
    if BEGIN not in page or END not in page:
        sys.exit(f'{doc} has no {BEGIN} ... {END} markers')
    head, rest = page.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    body = f'{BEGIN}\n```\n{text}```\n\n![scale-out](perf/scaleout.png)\n{END}'
    with open(doc, 'w') as f:
        f.write(head + body + tail)
    png = os.path.join(d, 'scaleout.png')
    if os.path.exists(png):
        os.makedirs(docdir, exist_ok=True)
        shutil.copy(png, os.path.join(docdir, 'scaleout.png'))


def main(argv):
    if len(argv) == 4 and argv[1] == 'fio-line':
        print(fio_line(argv[2], argv[3]))
    elif len(argv) == 3 and argv[1] == 'build':
        build(argv[2])
    elif len(argv) == 5 and argv[1] == 'update-docs':
        update_docs(argv[2], argv[3], argv[4])
    else:
        sys.exit(__doc__)


if __name__ == '__main__':
    main(sys.argv)
