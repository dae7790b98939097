#!/usr/bin/env python3
"""check-layers.py BUILD_DIR - the layers stay layers.

Reads the object files of a built tree (compile_commands.json names each object's
source) and checks, from what each object defines and what it calls:

  * no cycle between two source files (a.c calls b.c and b.c calls a.c, directly or
    through others), outside tests;
  * no cycle between two folders, and no folder calling one it may not see (LAYERS);
  * no #include "..." that reaches a folder it may not see, even by a relative path.

Prints what it finds and exits 1 if anything breaks a rule, 0 when the tree is clean.
"""
import json
import os
import re
import subprocess
import sys

# Each folder and the folders it may use (besides itself). common/ is below everything.
LAYERS = {
    'common': set(),
    'memserver': {'common'},
    'tools': {'common'},
    'fuse-client/pool': {'common'},
    'fuse-client/meta': {'common', 'fuse-client/pool'},
    'fuse-client/data': {'common', 'fuse-client/pool', 'fuse-client/meta'},
    'fuse-client/fsck': {'common', 'fuse-client/pool', 'fuse-client/meta'},
    'fuse-client/fuse': {'common', 'fuse-client/pool', 'fuse-client/meta', 'fuse-client/data'},
    'fuse-client/ctl': {'common', 'fuse-client/pool', 'fuse-client/data', 'fuse-client/fuse'},
}


def folder_of(path):
    return os.path.dirname(path)


def objects(build):
    """(source relative to the tree, object path) for every non-test object."""
    with open(os.path.join(build, 'compile_commands.json')) as f:
        cmds = json.load(f)
    top = os.path.realpath(os.path.join(build, cmds[0]['directory'], '..')) if cmds else ''
    seen = {}
    for c in cmds:
        src = os.path.realpath(os.path.join(c['directory'], c['file']))
        rel = os.path.relpath(src, top)
        if rel.startswith(('tests/', 'scripts/', '..')) or not rel.endswith('.c'):
            continue
        obj = os.path.join(c['directory'], c['output'])
        if os.path.exists(obj):
            seen[rel] = obj
    return top, seen


def symbols(obj):
    out = subprocess.run(['nm', obj], capture_output=True, text=True, check=True).stdout
    defined, undefined = set(), set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == 'U':
            undefined.add(parts[1])
        elif len(parts) == 3 and parts[1] in 'TDBR':
            defined.add(parts[2])
    return defined, undefined


def call_graph(srcs):
    owner, uses = {}, {}
    for src, obj in srcs.items():
        d, u = symbols(obj)
        for s in d:
            owner.setdefault(s, src)
        uses[src] = u
    graph = {src: set() for src in srcs}
    for src, u in uses.items():
        for s in u:
            dst = owner.get(s)
            if dst and dst != src:
                graph[src].add(dst)
    return graph


def sccs(graph):
    """Tarjan's strongly connected components with more than one member."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def include_faults(top, srcs):
    faults = []
    files = set(srcs)
    for src in list(files):
        folder = folder_of(src)
        files.update(os.path.join(folder, h) for h in os.listdir(os.path.join(top, folder))
                     if h.endswith('.h'))
    for f in sorted(files):
        folder = folder_of(f)
        allowed = LAYERS.get(folder)
        if allowed is None:
            continue
        with open(os.path.join(top, f)) as fh:
            for n, line in enumerate(fh, 1):
                m = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
                if not m or '/' not in m.group(1):
                    continue
                target = os.path.normpath(os.path.join(folder, os.path.dirname(m.group(1))))
                if target != folder and target not in allowed:
                    faults.append('%s:%d includes %s from %s, which it may not see'
                                  % (f, n, m.group(1), target))
    return faults


def main():
    if len(sys.argv) != 2:
        sys.exit('usage: check-layers.py BUILD_DIR')
    top, srcs = objects(sys.argv[1])
    if not srcs:
        sys.exit('check-layers: no objects under %s; build first' % sys.argv[1])
    graph = call_graph(srcs)
    faults = []
    for comp in sccs(graph):
        faults.append('file cycle: ' + ' <-> '.join(comp))
    fgraph = {}
    for src, dsts in graph.items():
        a = folder_of(src)
        for dst in dsts:
            b = folder_of(dst)
            if a == b:
                continue
            fgraph.setdefault(a, set()).add(b)
            if a in LAYERS and b not in LAYERS[a]:
                faults.append('%s calls into %s (%s), a folder it may not use' % (src, dst, b))
    for comp in sccs(fgraph):
        faults.append('folder cycle: ' + ' <-> '.join(comp))
    faults += include_faults(top, srcs)
    for f in faults:
        print(f)
    print('check-layers: %d sources, %d faults' % (len(srcs), len(faults)))
    return 1 if faults else 0


if __name__ == '__main__':
    sys.exit(main())
