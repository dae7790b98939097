# SPDX-License-Identifier: GPL-2.0-or-later
"""POSIX permission semantics the kernel leaves to the filesystem, compared
with a tmpfs on the same machine (the reference): clearing set-user-ID and
set-group-ID on write, truncate and chown, and chown/chgrp rules with
supplementary groups.

The same sequence runs on a fresh tmpfs and on a fresh rmemfs mount: root
sets files up, then a real unprivileged process does its part, then root
does its own; every step's outcome (value or errno name) and each file's
mode/uid/gid/size afterwards must be equal on both. A few absolute checks
keep the reference honest.

Assumes: it runs as root (to mount a tmpfs and to become another user;
skipped otherwise, and skipped if mount -t tmpfs fails); uid 4242 with
primary gid 4242 and supplementary gids 4243, 4244, and gid 5555, need no
/etc/passwd or /etc/group entry (the child calls setgroups/setgid/setuid
with the numbers, through subprocess's user/group/extra_groups) and they
only own files these tests create. Both mounts are removed in teardown.
"""
import json
import os
import stat
import subprocess
import sys
import tempfile
import textwrap

import pytest

from conftest import Mounted

USER_UID = 4242
USER_GID = 4242
USER_GROUPS = [4243, 4244]  # supplementary groups of the user
OTHER_GID = 5555  # a group the user is not in

pytestmark = pytest.mark.skipif(os.geteuid() != 0,
                                reason='needs root: mounts a tmpfs and switches to uid 4242')

# runs the steps (JSON on argv[2]) in argv[1]; prints {name: outcome}
STEP_SCRIPT = textwrap.dedent('''
    import errno, json, os, sys
    base, steps = sys.argv[1], json.loads(sys.argv[2])

    def write(p, flags):
        fd = os.open(p, flags)
        try:
            os.write(fd, b'x')
        finally:
            os.close(fd)

    def ftruncate(p):
        fd = os.open(p, os.O_WRONLY)
        try:
            os.ftruncate(fd, 1)
        finally:
            os.close(fd)

    def run(op, p):
        verb, _, arg = op.partition('_')
        if op == 'write':
            write(p, os.O_WRONLY)
        elif op == 'rdwr':
            write(p, os.O_RDWR)
        elif op == 'open_trunc':
            os.close(os.open(p, os.O_WRONLY | os.O_TRUNC))
        elif op == 'truncate':
            os.truncate(p, 1)
        elif op == 'ftruncate':
            ftruncate(p)
        elif verb == 'chgrp':
            os.chown(p, -1, int(arg))
        elif verb == 'chown':
            uid, _, gid = arg.partition('_')
            os.chown(p, int(uid), int(gid) if gid else -1)
        elif verb == 'chmod':
            os.chmod(p, int(arg, 8))
        else:
            raise ValueError(op)

    out = {'ids': [os.getuid(), os.getgid(), sorted(os.getgroups())]}
    for name, op, f in steps:
        try:
            run(op, os.path.join(base, f))
            out[name] = 'ok'
        except OSError as e:
            out[name] = errno.errorcode[e.errno]
    print(json.dumps(out))
''')


def run_steps(base, steps, as_user):
    ids = {}
    if as_user:
        ids = {'user': USER_UID, 'group': USER_GID, 'extra_groups': USER_GROUPS}
    r = subprocess.run([sys.executable, '-c', STEP_SCRIPT, base, json.dumps(steps)],
                       capture_output=True, text=True, timeout=120, **ids)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def sequence(base, files, user_steps, root_steps):
    """Set up as root, the user's steps, root's steps; what came out."""
    for name, (mode, uid, gid, is_dir) in files.items():
        p = os.path.join(base, name)
        if is_dir:
            os.mkdir(p)
        else:
            with open(p, 'wb') as f:
                f.write(b'data')
        os.chown(p, uid, gid)
        os.chmod(p, mode)  # after chown, which clears set-id bits
    out = {'user': run_steps(base, user_steps, as_user=True),
           'root': run_steps(base, root_steps, as_user=False)}
    for name in files:
        st = os.stat(os.path.join(base, name))
        size = None if stat.S_ISDIR(st.st_mode) else st.st_size
        out[name] = (oct(st.st_mode), st.st_uid, st.st_gid, size)
    return out


# Where the kernel's FUSE module itself differs from tmpfs: fs/fuse/dir.c
# fuse_setattr recomputes the bits a write or truncate kills and clears
# S_ISGID only on a group-executable file, while the VFS (tmpfs, ext4) also
# clears it for a writer outside the file's group (setattr_should_drop_sgid).
# rmemfs may give either; both are accepted for the mode 02767 files whose
# names start with this.
FUSE_KEEPS_SGID = 'sgid_nox'


def same_as_tmpfs(mounted, tmpfs, files, user_steps, root_steps=()):
    """Runs the sequence on both; returns rmemfs's outcome, which must equal tmpfs's."""
    want = sequence(tmpfs, files, user_steps, root_steps)
    got = sequence(mounted.path, files, user_steps, root_steps)
    assert want['user']['ids'][:2] == [USER_UID, USER_GID]
    assert set(USER_GROUPS) <= set(want['user']['ids'][2])
    diffs = []
    for k in want:
        if got[k] == want[k]:
            continue
        if k.startswith(FUSE_KEEPS_SGID) and got[k][0] == oct(stat.S_IFREG | 0o2767) and \
                got[k][1:] == want[k][1:]:
            continue
        diffs.append(f'{k}: rmemfs {got[k]} tmpfs {want[k]}')
    assert not diffs, 'rmemfs differs from tmpfs:\n' + '\n'.join(diffs)
    return got


@pytest.fixture
def tmpfs():
    """A fresh tmpfs (the reference), unmounted and removed afterwards."""
    d = tempfile.mkdtemp(prefix='rmemfs-ref-', dir='/tmp')
    mounted = False
    try:
        r = subprocess.run(['mount', '-t', 'tmpfs', '-o', 'size=16m,mode=0755', 'tmpfs', d],
                           capture_output=True, text=True, timeout=60)
        if r.returncode != 0:
            pytest.skip(f'cannot mount a reference tmpfs: {r.stderr.strip()}')
        mounted = True
        yield d
    finally:
        if mounted:
            subprocess.run(['umount', '-l', d], capture_output=True, timeout=60)
        os.rmdir(d)


@pytest.fixture(params=[[], ['writeback_cache=off']], ids=['writeback_cache', 'no-kcache'])
def mounted(env, request):
    """A fresh pool mounted with the kernel's writeback cache (the default) and without."""
    server = env.server('64M')
    fs = env.rmemfs(server, options=request.param)
    os.chmod(fs.mountpoint, 0o755)  # the user walks in
    m = Mounted(env, server, fs)
    yield m
    assert fs.unmount() == 0, fs.output()


def test_write_by_non_owner_clears_setid(mounted, tmpfs):
    """A user who may write a set-id file writes it (O_WRONLY and O_RDWR):
    S_ISUID goes, S_ISGID too where group-executable."""
    files, steps = {}, []
    for name, mode, gid in [('suid', 0o4777, 0), ('sgid', 0o2777, 0), ('both', 0o6777, 0),
                            ('sgid_nox', 0o2767, 0), ('sgid_mygroup', 0o2777, USER_GROUPS[0]),
                            ('plain', 0o0777, 0)]:
        for op, f in (('write', name), ('rdwr', name + '_rdwr')):
            files[f] = (mode, 0, gid, False)
            steps.append((f, op, f))
    got = same_as_tmpfs(mounted, tmpfs, files, steps)
    for f in ('suid', 'suid_rdwr', 'both', 'both_rdwr', 'sgid', 'sgid_rdwr'):
        assert got['user'][f] == 'ok'
        assert got[f][0] == '0o100777'


def test_write_by_root_keeps_setid(mounted, tmpfs):
    """CAP_FSETID: root's writes and truncates leave the bits alone."""
    files = {'w': (0o6777, USER_UID, USER_GID, False), 't': (0o6777, USER_UID, USER_GID, False)}
    got = same_as_tmpfs(mounted, tmpfs, files, [],
                        [('root_write', 'write', 'w'), ('root_truncate', 'truncate', 't')])
    assert got['w'][0] == got['t'][0] == '0o106777'


def test_truncate_by_non_owner_clears_setid(mounted, tmpfs):
    """truncate, ftruncate and open(O_TRUNC) by a user who may write."""
    files, steps = {}, []
    for op in ('truncate', 'ftruncate', 'open_trunc'):
        for name, mode in [('both', 0o6777), ('sgid_nox', 0o2767)]:
            f = f'{name}_{op}'
            files[f] = (mode, 0, 0, False)
            steps.append((f, op, f))
    got = same_as_tmpfs(mounted, tmpfs, files, steps)
    for op in ('truncate', 'ftruncate', 'open_trunc'):
        assert got['user'][f'both_{op}'] == 'ok'
        assert got[f'both_{op}'][0] == '0o100777'


def test_chown_chgrp_chmod_with_supplementary_groups(mounted, tmpfs):
    """The owner changes the group to any group it is in (supplementary ones
    too), never to another; only root changes the owner; chmod g+s sticks
    for a group the owner is in; nobody else changes anything."""
    files = {
        'supplementary': (0o644, USER_UID, USER_GID, False),
        'primary': (0o644, USER_UID, USER_GROUPS[1], False),
        'not_member': (0o644, USER_UID, USER_GID, False),
        'uid': (0o644, USER_UID, USER_GID, False),
        'same_uid': (0o644, USER_UID, USER_GID, False),
        'not_owner': (0o644, 0, USER_GID, False),
        'sgid_member': (0o755, USER_UID, USER_GROUPS[1], False),
        'sgid_not_member': (0o755, USER_UID, OTHER_GID, False),
        'chmod_not_owner': (0o777, 0, 0, False),
    }
    steps = [
        ('supplementary', f'chgrp_{USER_GROUPS[0]}', 'supplementary'),
        ('primary', f'chgrp_{USER_GID}', 'primary'),
        ('not_member', f'chgrp_{OTHER_GID}', 'not_member'),
        ('uid', 'chown_0', 'uid'),
        ('same_uid', f'chown_{USER_UID}', 'same_uid'),
        ('not_owner', f'chgrp_{USER_GROUPS[0]}', 'not_owner'),
        ('sgid_member', 'chmod_2755', 'sgid_member'),
        ('sgid_not_member', 'chmod_2755', 'sgid_not_member'),
        ('chmod_not_owner', 'chmod_0700', 'chmod_not_owner'),
    ]
    got = same_as_tmpfs(mounted, tmpfs, files, steps)
    assert got['user']['supplementary'] == 'ok'
    assert got['supplementary'][2] == USER_GROUPS[0]
    assert got['user']['not_member'] == got['user']['uid'] == 'EPERM'
    assert got['sgid_member'][0] == '0o102755'


def test_chown_clears_setid(mounted, tmpfs):
    """chown/chgrp of a regular file clears S_ISUID (and S_ISGID if
    group-executable), by the owner and by root; directories keep theirs."""
    files, user_steps, root_steps = {}, [], []
    for who, steps in (('user', user_steps), ('root', root_steps)):
        for mode in (0o6755, 0o2745, 0o4745, 0o6745):
            f = f'{who}_{mode:o}'
            files[f] = (mode, USER_UID, USER_GID, False)
            steps.append((f, f'chgrp_{USER_GROUPS[0]}', f))
        f = f'{who}_dir'
        files[f] = (0o6775, USER_UID, USER_GID, True)
        steps.append((f, f'chgrp_{USER_GROUPS[0]}', f))
    for mode in (0o6755, 0o2745):
        f = f'root_chown_{mode:o}'
        files[f] = (mode, USER_UID, USER_GID, False)
        root_steps.append((f, 'chown_1_1', f))
    got = same_as_tmpfs(mounted, tmpfs, files, user_steps, root_steps)
    for who in ('user', 'root'):
        assert got[who][f'{who}_6755'] == 'ok'
        assert got[f'{who}_6755'][0] == '0o100755'
