#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""check_man.py BUILD_DIR: every man page renders with man -l, and every option
that a program's --help lists appears in its page.

Assumes man-db (man -l) and col (bsdextrautils); says so and fails when they are
missing. Exit 77 (skipped) when the build has no man pages (scdoc not found).
"""
import os
import re
import shutil
import subprocess
import sys

# page -> the program whose --help it documents (relative to the build directory)
PAGES = {
    'rmemfs.8': 'fuse-client/rmemfs',
    'rmemfs-fsck.8': 'fuse-client/rmemfs-fsck',
    'rmemfs-ctl.8': 'fuse-client/rmemfs-ctl',
    'memserver.8': 'memserver/memserver',
    'memserver-ctl.8': 'tools/memserver-ctl',
    'rmemfs-swap.8': 'tools/rmemfs-swap',
    'rmem-perf.1': 'tools/rmem-perf',
    'rmem-touch.1': 'tools/rmem-touch',
    'umount.fuse.rmemfs.8': 'fuse-client/umount.fuse.rmemfs',
}
LONG = re.compile(r'(?<![\w-])--[a-z][a-z0-9-]*')
SHORT = re.compile(r'(?<![\w-])-[a-zA-Z](?![\w-])')
SUB = re.compile(r'(?<![\w-])-o\s+([a-z_]+)')


def render(path):
    env = dict(os.environ, LC_ALL='C', MANWIDTH='1000', MANROFFOPT='-rHY=0', MANPAGER='cat')
    out = subprocess.run(['man', '-l', path], env=env, capture_output=True, timeout=60)
    if out.returncode != 0 or out.stderr.strip():
        raise RuntimeError(f'man -l {path}: exit {out.returncode}: {out.stderr.decode()}')
    text = subprocess.run(['col', '-bx'], input=out.stdout, capture_output=True,
                          timeout=60).stdout.decode()
    if 'NAME' not in text or 'SYNOPSIS' not in text:
        raise RuntimeError(f'{path}: no NAME or SYNOPSIS section in the rendered page')
    return text


def help_options(prog):
    out = subprocess.run([prog, '--help'], capture_output=True, timeout=60)
    text = (out.stdout + out.stderr).decode()
    if out.returncode != 0 or len(text) < 100:
        raise RuntimeError(f'{prog} --help: exit {out.returncode}: {text[:200]}')
    opts = set(LONG.findall(text)) | set(SHORT.findall(text))
    opts |= {'-o ' + name for name in SUB.findall(text)}
    return opts


def present(opt, page):
    if opt.startswith('-o '):
        return re.search(r'(?<![\w-])' + re.escape(opt[3:]) + r'(?![\w])', page) is not None
    return re.search(r'(?<![\w-])' + re.escape(opt) + r'(?![\w-])', page) is not None


def main():
    build = sys.argv[1]
    for tool in ('man', 'col'):
        if not shutil.which(tool):
            print(f'check_man: {tool} is missing (packages man-db, bsdextrautils)')
            return 1
    mandir = os.path.join(build, 'man')
    failed = 0
    for page, prog in PAGES.items():
        path = os.path.join(mandir, page)
        if not os.path.exists(path):
            print(f'check_man: {path} was not built (scdoc missing?)')
            return 77
        try:
            text = render(path)
            missing = sorted(o for o in help_options(os.path.join(build, prog))
                             if not present(o, text))
        except (RuntimeError, OSError, subprocess.TimeoutExpired) as e:
            print(f'not ok {page}: {e}')
            failed += 1
            continue
        if missing:
            print(f'not ok {page}: options in {prog} --help but not in the page: '
                  + ', '.join(missing))
            failed += 1
        else:
            print(f'ok {page}: renders, documents every option of {os.path.basename(prog)} --help')
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
