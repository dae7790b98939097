#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""scaleout.py - the report of scripts/bench/scaleout.sh.

  scaleout.py fio-line JSON RC          one job's line for the terminal
  scaleout.py build DIR                 DIR/results.txt, results.json, scaleout.png (a --ec
                                        run: ec.png)
  scaleout.py update-docs DIR DOC DOCDIR  the table into DOC between the scale-out
                                        markers, the chart into DOCDIR/scaleout.png; a --ec
                                        run: between the ec markers of the "Erasure coding"
                                        section (added at the end of DOC when it has none),
                                        the chart into DOCDIR/ec.png

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
    """{'mibs', 'iops', 'errors'} of one fio JSON, or None when the job did not finish; with
    'p50_us', 'p99_us', 'p999_us' (total latency) when fio took percentiles of it."""
    try:
        with open(path) as f:
            text = f.read()
        doc = json.loads(text[text.index('{'):])
    except (OSError, ValueError):
        return None
    job = doc['jobs'][0]
    rw = job['write'] if job['write']['io_bytes'] else job['read']
    r = {'mibs': rw['bw_bytes'] / MIB, 'iops': rw['iops'], 'errors': 1 if job['error'] else 0}
    pct = rw.get('lat_ns', {}).get('percentile')
    if pct:
        for key, p in (('p50_us', '50.000000'), ('p99_us', '99.000000'), ('p999_us', '99.900000')):
            if p in pct:
                r[key] = pct[p] / 1000
    return r


def fio_line(path, rc):
    r = fio_result(path)
    if r is None or rc != '0':
        err = path[:-5] + '.err'
        last = ''
        if os.path.exists(err):
            lines = [ln for ln in open(err).read().splitlines() if ln.strip()]
            last = lines[-1] if lines else ''
        return f'FAILED (exit {rc}){": " + last if last else ""}'
    lat = f'  p99 {r["p99_us"]:.0f} us' if 'p99_us' in r else ''
    return f'{r["mibs"]:9.1f} MiB/s {r["iops"]:9.0f} IOPS  errors {r["errors"]}{lat}'


def read_config(d):
    cfg = {}
    with open(os.path.join(d, 'raw', 'config.tsv')) as f:
        for line in f:
            k, _, v = line.rstrip('\n').partition('\t')
            cfg[k] = v
    return cfg


def load(d):
    raw = os.path.join(d, 'raw')
    cfg = read_config(d)
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
    if read_config(d).get('mode') == 'ec':
        ec_build(d)
        return
    cfg, rows = load(d)
    rows = judge(rows)
    text = table(cfg, rows)
    with open(os.path.join(d, 'results.txt'), 'w') as f:
        f.write(text)
    with open(os.path.join(d, 'results.json'), 'w') as f:
        json.dump({'config': cfg, 'rows': rows}, f, indent=1)
    chart(d, rows)


def write_doc_block(d, doc, docdir, begin, end, name, title):
    """results.txt of d between the markers begin/end of doc, with chart name (copied to
    docdir)."""
    with open(os.path.join(d, 'results.txt')) as f:
        text = f.read()
    with open(doc) as f:
        page = f.read()
    if page.count(begin) != 1 or page.count(end) != 1:
        sys.exit(f'{doc}: want one {begin} ... {end} pair')
    head, rest = page.split(begin, 1)
    _, tail = rest.split(end, 1)
    body = f'{begin}\n```\n{text}```\n\n![{title}](perf/{name})\n{end}'
    with open(doc, 'w') as f:
        f.write(head + body + tail)
    png = os.path.join(d, name)
    if os.path.exists(png):
        os.makedirs(docdir, exist_ok=True)
        shutil.copy(png, os.path.join(docdir, name))


def update_docs(d, doc, docdir):
    if read_config(d).get('mode') == 'ec':
        ec_update_docs(d, doc, docdir)
        return
    write_doc_block(d, doc, docdir, BEGIN, END, 'scaleout.png', 'scale-out')


# ---- --ec: erasure coding against copies (issue 24) ----

# (results name under raw/ec/, the -o options the script mounts it with)
EC_CONFIGS = [('ec4+2', 'ec=4+2'), ('r3', 'replicas=3'), ('r1', 'replicas=1')]
# the slow-member runs: ec=4+2 as it reads by default, with late-binding reads, and copies
EC_SLOW = [('ec4+2', 'ec=4+2'), ('r3', 'replicas=3')]
EC_BEGIN, EC_END = '<!-- ec:begin -->', '<!-- ec:end -->'
# the section update-docs adds at the end of the page the first time
EC_SECTION = f"""
## Erasure coding: ec=4+2 against copies

`scripts/bench.sh --scale-out --ec` (`scripts/bench/scaleout.sh --help`) puts six memservers
in network namespaces behind veth pairs limited to 1 Gbit/s each way, as the scale-out run
does, and measures three configurations in the same run, each on fresh memservers:
`-o ec=4+2` and `replicas=3` (both survive two lost members) and `replicas=1`. For each: the
capacity statfs reports right after the format, as a fraction of the raw pool bytes of the six
members; a buffered 1 MiB sequential write (fsync at the end); the file read back after a
remount; 4 KiB random reads at QD32 (O_DIRECT, after another remount). Then the slow member:
the p99 of 4 KiB random reads at QD1 and QD32, healthy and with one member's link delayed by
`tc netem delay 2ms` (on the client's end of its link, under the rate limit; ping checks the
delay; on a kernel without sch_netem, a userspace relay in its place that adds the same 2 ms to
the RTT, checked with rmem-perf: `scripts/bench/scaleout.sh --help`), for ec=4+2 (which reads the fragments of a member it finds slow by decoding them from
the others) and for replicas=3 for comparison. The targets are issue 24's, each against the other configurations
of the same run.

```sh
sudo scripts/bench.sh --scale-out --ec --update-docs
```

{EC_BEGIN}
{EC_END}
"""


def ec_ratio(a, b):
    return a / b if a is not None and b else None


def ec_load(d):
    """The --ec results of d: (cfg, configs, slow), each configuration as a dict."""
    cfg = read_config(d)
    raw = os.path.join(d, 'raw', 'ec')
    raw_mib = int(cfg.get('members', 6)) * int(cfg.get('pool_mib', 0))

    def common(tag, opts):
        here = os.path.join(raw, tag)
        c = {'tag': tag, 'opts': cfg.get('opts:' + tag, opts), 'run': os.path.isdir(here),
             'refused': []}
        try:
            with open(os.path.join(here, 'refused.tsv')) as f:
                for line in f:
                    what, o, why = (line.rstrip('\n').split('\t') + ['', ''])[:3]
                    c['refused'].append({'when': what, 'opts': o, 'why': why})
        except OSError:
            pass
        # measured: the first mount (the format) worked
        c['mounted'] = c['run'] and not any(r['when'] == 'format' for r in c['refused'])
        return c, here

    configs = []
    for tag, opts in EC_CONFIGS:
        c, here = common(tag, opts)
        c['capacity'] = None
        try:
            with open(os.path.join(here, 'statfs.txt')) as f:
                blocks, bsize, frsize = (int(x) for x in f.read().split()[:3])
            mib = blocks * frsize / MIB
            c['capacity'] = {'f_blocks': blocks, 'f_bsize': bsize, 'f_frsize': frsize,
                             'mib': mib, 'raw_mib': raw_mib,
                             'of_raw': mib / raw_mib if raw_mib else None}
        except (OSError, ValueError):
            pass
        c['jobs'] = {j: fio_result(os.path.join(here, j + '.json')) for j in JOBS}
        configs.append(c)
    slow = []
    for tag, opts in EC_SLOW:
        c, here = common(tag, opts)
        c['p99'] = {}
        for qd in (1, 32):
            for state in ('healthy', 'slow'):
                c['p99'][f'qd{qd}-{state}'] = fio_result(
                    os.path.join(here, f'p99-qd{qd}-{state}.json'))
        c['slow_skipped'] = None
        try:
            with open(os.path.join(here, 'slow-skipped.txt')) as f:
                c['slow_skipped'] = f.read().strip() or 'skipped'
        except OSError:
            pass
        c['rtt_ms'] = {}
        try:
            with open(os.path.join(here, 'rtt.tsv')) as f:
                for line in f:
                    k, _, v = line.rstrip('\n').partition('\t')
                    lo, avg = (float(x) for x in v.split())
                    c['rtt_ms'][k] = {'min': lo, 'avg': avg}
        except (OSError, ValueError):
            pass
        slow.append(c)
    return cfg, configs, slow


def ec_why_not(c, what=None):
    """Why configuration c has no figure (what: the job), for the verdicts."""
    if not c['run']:
        return f'{c["opts"]} did not run'
    if not c['mounted']:
        r = next(r for r in c['refused'] if r['when'] == 'format')
        return f'the mount refused -o {r["opts"]}: {r["why"]}'
    if c['refused']:
        return f'a remount of {c["opts"]} failed: {c["refused"][0]["why"]}'
    if c.get('slow_skipped') and what and what.startswith('slowed'):
        return 'no slowed runs: ' + c['slow_skipped']
    return f'{what or "the job"} failed on {c["opts"]}'


def ec_targets(configs, slow):
    """The issue's targets: dicts with name, goal, value, detail, verdict."""
    by = {c['tag']: c for c in configs}
    sl = {c['tag']: c for c in slow}
    out = []

    def add(name, goal, value, detail, ok, why, judged=True):
        if value is None:
            verdict = 'NOT MEASURED: ' + why
        elif not judged:
            verdict = '(comparison)'
        else:
            verdict = 'met' if ok(value) else 'MISSED'
        out.append({'name': name, 'goal': goal, 'value': value, 'detail': detail,
                    'verdict': verdict})

    for tag, goal, judged in (('ec4+2', 0.65, True), ('r3', 0.33, False)):
        c = by[tag]
        cap = c['capacity']
        v = cap['of_raw'] if cap else None
        add(f'capacity {c["opts"]}', f'>= {goal:.2f} of raw' if judged else
            f'~{goal:.2f} of raw', v,
            f'{v:.3f} ({cap["mib"]:.0f} of {cap["raw_mib"]} MiB)' if v is not None else '',
            lambda x, g=goal: x >= g, ec_why_not(c, 'statfs'), judged)
    for job, base, goal, unit in (('seq-write-1m', 'r3', 1.6, 'mibs'),
                                  ('seq-read-1m', 'r1', 0.9, 'mibs'),
                                  ('randread-4k-qd32', 'r3', 0.8, 'iops')):
        e, b = by['ec4+2'], by[base]
        re_, rb = e['jobs'][job], b['jobs'][job]
        v = ec_ratio(re_ and re_[unit], rb and rb[unit])
        u = 'MiB/s' if unit == 'mibs' else 'IOPS'
        fmt = '{:.1f}' if unit == 'mibs' else '{:.0f}'
        detail = (f'{v:.2f}x ({fmt.format(re_[unit])} / {fmt.format(rb[unit])} {u})'
                  if v is not None else '')
        why = ec_why_not(e, job) if not re_ else ec_why_not(b, job)
        add(f'{job} {e["opts"]} / {b["opts"]}', f'>= {goal}x', v, detail,
            lambda x, g=goal: x >= g, why)
    for tag in ('ec4+2',):
        c = sl[tag]
        for qd in (1, 32):
            h, s = c['p99'][f'qd{qd}-healthy'], c['p99'][f'qd{qd}-slow']
            v = ec_ratio(s and s.get('p99_us'), h and h.get('p99_us'))
            detail = (f'{v:.2f}x ({s["p99_us"]:.0f} / {h["p99_us"]:.0f} us)'
                      if v is not None else '')
            add(f'slow-member p99 QD{qd} {c["opts"]}', '<= 2x healthy', v, detail,
                lambda x: x <= 2.0, ec_why_not(c, f'slowed p99 QD{qd}' if h else
                                               f'healthy p99 QD{qd}'))
    return out


def ec_table(cfg, configs, slow, targets):
    raw_mib = int(cfg.get('members', 6)) * int(cfg.get('pool_mib', 0))
    L = [f'rmemfs erasure coding: {cfg.get("members")} memservers in network namespaces, each '
         f'behind a veth pair limited to {cfg.get("rate")} each way (tc tbf); pools '
         f'{cfg.get("pool")} each (raw {raw_mib} MiB); file {cfg.get("size")}, random reads '
         f'{cfg.get("runtime")} s; commit {cfg.get("commit")}, {cfg.get("cpus")} CPUs, '
         f'{cfg.get("date")}' + (' (QUICK: a smoke run)' if cfg.get('quick') == '1' else ''),
         '',
         'capacity: statfs right after the format (f_blocks x f_frsize); write: seq-write-1m; '
         'read: seq-read-1m after a remount; QD32: randread-4k-qd32 (O_DIRECT, after a remount)',
         f'{"config":<20} {"capacity MiB":>12} {"x raw":>6} {"write MiB/s":>11} '
         f'{"read MiB/s":>10} {"QD32 MiB/s":>10} {"QD32 IOPS":>9} {"errors":>6}']
    for c in configs:
        if not c['mounted']:
            L.append(f'{c["opts"]:<20} {ec_why_not(c)}')
            continue
        cap = c['capacity']
        cells = [f'{cap["mib"]:12.1f}' if cap else f'{"-":>12}',
                 f'{cap["of_raw"]:6.3f}' if cap and cap['of_raw'] is not None else f'{"-":>6}']
        errs = 0
        for job, w in (('seq-write-1m', 11), ('seq-read-1m', 10), ('randread-4k-qd32', 10)):
            r = c['jobs'][job]
            cells.append(f'{r["mibs"]:{w}.1f}' if r else f'{"failed":>{w}}')
            errs += r['errors'] if r else 0
        r = c['jobs']['randread-4k-qd32']
        cells.append(f'{r["iops"]:9.0f}' if r else f'{"-":>9}')
        cells.append(f'{errs:>6}')
        L.append(f'{c["opts"]:<20} ' + ' '.join(cells))
    relay = cfg.get('slow_mode') == 'relay'
    if relay:
        how = (f'delayed {cfg.get("slow_delay")} by a userspace relay (netem missing in this '
               f'kernel, see below); healthy and slowed each on a fresh mount')
    else:
        how = f'tc netem delay {cfg.get("slow_delay")} ({cfg.get("slow_where")})'
    L += ['',
          f'slow member: member {cfg.get("slow_member")}, {how}; 4 KiB random reads, O_DIRECT, '
          f'{cfg.get("runtime")} s each, p99 of the total latency (fio lat); RTT: '
          f'{cfg.get("slow_check", "ping from the client, min RTT")}',
          f'{"config":<20} {"QD":>3} {"healthy p99 us":>14} {"slow p99 us":>11} '
          f'{"slow/healthy":>12} {"healthy IOPS":>12} {"slow IOPS":>9} {"RTT min ms":>16}']
    for qd in (1, 32):
        for c in slow:
            if not c['mounted']:
                L.append(f'{c["opts"]:<20} {qd:>3} {ec_why_not(c)}')
                continue
            h, s = c['p99'][f'qd{qd}-healthy'], c['p99'][f'qd{qd}-slow']
            hp = h.get('p99_us') if h else None
            sp = s.get('p99_us') if s else None
            ratio = ec_ratio(sp, hp)
            rtt = c['rtt_ms']
            ping = (f'{rtt["healthy"]["min"]:.2f} -> {rtt["slow"]["min"]:.2f}'
                    if 'healthy' in rtt and 'slow' in rtt else '-')
            skipped = c.get('slow_skipped')
            L.append(f'{c["opts"]:<20} {qd:>3} '
                     + (f'{hp:14.0f}' if hp is not None else f'{"failed":>14}') + ' '
                     + (f'{sp:11.0f}' if sp is not None else
                        f'{"skipped" if skipped else "failed":>11}') + ' '
                     + (f'{ratio:11.2f}x' if ratio is not None else f'{"-":>12}') + ' '
                     + (f'{h["iops"]:12.0f}' if h else f'{"-":>12}') + ' '
                     + (f'{s["iops"]:9.0f}' if s else f'{"-":>9}') + ' '
                     + f'{ping:>16}')
    L += ['', 'targets (issue 24; every ratio within this run)',
          f'{"target":<46} {"goal":<16} {"measured":<32} verdict']
    for t in targets:
        L.append(f'{t["name"]:<46} {t["goal"]:<16} {t["detail"] or "-":<32} {t["verdict"]}')
    notes = [f'{c["opts"]}: the mount refused ({r["when"]}): {r["why"]}'
             for c in configs + slow[1:2] for r in c['refused']]
    skipped = sorted({c['slow_skipped'] for c in slow if c.get('slow_skipped')})
    notes += [f'slowed runs skipped: {w}' for w in skipped]
    if relay:
        notes.append(f'member {cfg.get("slow_member")} slowed: {cfg.get("slow_where")}; '
                     f'{cfg.get("netem")}')
    if notes:
        L += [''] + notes
    return '\n'.join(L) + '\n'


def ec_chart(d, configs, slow):
    """ec.png: MiB/s of each job per configuration, and the p99s healthy and slowed."""
    if not shutil.which('gnuplot'):
        return None
    tput = os.path.join(d, 'raw', 'ec-throughput.dat')
    lat = os.path.join(d, 'raw', 'ec-p99.dat')
    with open(tput, 'w') as f:
        f.write('job ' + ' '.join(f'"{c["opts"]}"' for c in configs) + '\n')
        for job, label in zip(JOBS, ('seq write', 'seq read', 'rand read QD32')):
            vals = [c['jobs'][job]['mibs'] if c['jobs'][job] else float('nan') for c in configs]
            f.write(f'"{label}" ' + ' '.join(f'{v:.1f}' for v in vals) + '\n')
    with open(lat, 'w') as f:
        f.write('run healthy "member slowed"\n')
        for qd in (1, 32):
            for c in slow:
                vals = []
                for state in ('healthy', 'slow'):
                    r = c['p99'][f'qd{qd}-{state}']
                    vals.append(r['p99_us'] if r and 'p99_us' in r else float('nan'))
                f.write(f'"{c["opts"]} QD{qd}" '
                        + ' '.join(f'{v:.0f}' for v in vals) + '\n')
    png = os.path.join(d, 'ec.png')
    bars = ', '.join(f"'{tput}' using {i + 2}{':xtic(1)' if i == 0 else ''} "
                     f"title columnheader({i + 2})" for i in range(len(configs)))
    script = (f"set terminal pngcairo size 1200,520; set output '{png}';"
              "set datafile missing 'nan';"
              "set style data histograms; set style histogram clustered gap 1;"
              "set style fill solid 0.8 border -1; set grid ytics; set key top right;"
              "set multiplot layout 1,2 title 'rmemfs: ec=4+2 against copies, 6 members "
              "behind rate-limited links';"
              "set title 'throughput'; set ylabel 'MiB/s'; set yrange [0:*];"
              f"plot {bars};"
              "set title '4 KiB random read p99, one member slowed'; set ylabel 'us';"
              "set logscale y; set format y '%.0f'; set yrange [*:*]; set xtics rotate by -30;"
              f"plot '{lat}' using 2:xtic(1) title columnheader(2), "
              f"'' using 3 title columnheader(3);"
              "unset multiplot")
    res = subprocess.run(['gnuplot', '-e', script], capture_output=True, text=True)
    if res.returncode != 0:
        print(f'scaleout.py: gnuplot failed: {res.stderr.strip()}', file=sys.stderr)
        return None
    return png


def ec_build(d):
    cfg, configs, slow = ec_load(d)
    targets = ec_targets(configs, slow)
    text = ec_table(cfg, configs, slow, targets)
    with open(os.path.join(d, 'results.txt'), 'w') as f:
        f.write(text)
    with open(os.path.join(d, 'results.json'), 'w') as f:
        json.dump({'config': cfg, 'configs': configs, 'slow_member': slow, 'targets': targets},
                  f, indent=1)
    ec_chart(d, configs, slow)


def ec_update_docs(d, doc, docdir):
    with open(doc) as f:
        page = f.read()
    if EC_BEGIN not in page and EC_END not in page:
        with open(doc, 'w') as f:
            f.write(page.rstrip('\n') + '\n' + EC_SECTION)
    write_doc_block(d, doc, docdir, EC_BEGIN, EC_END, 'ec.png', 'erasure coding')


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
