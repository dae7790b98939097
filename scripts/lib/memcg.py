# SPDX-License-Identifier: GPL-2.0-or-later
"""memcg.py - a memory cgroup of one's own, for the tests (tests/fs/conftest.py) and the
benchmarks (scripts/bench/footprint.py): v1 where /sys/fs/cgroup/memory is, else cgroup2 with
the memory controller."""
import os
import time


class MemCgroup:
    """A memory cgroup of its own: v1 (memory.limit_in_bytes, memsw left unlimited) or v2
    (memory.max, memory.swap.max=max)."""

    V1 = '/sys/fs/cgroup/memory'

    def __init__(self, prefix='rmemfs-test'):
        self.path = None
        name = f'{prefix}-{os.getpid()}-{time.monotonic_ns() % 10**8}'
        if os.path.exists(os.path.join(self.V1, 'memory.limit_in_bytes')):
            self.v2 = False
            parent = self.V1
        else:
            self.v2 = True
            parent = self.v2_root()
        os.mkdir(os.path.join(parent, name))
        self.path = os.path.join(parent, name)
        if self.v2:
            self.write('memory.swap.max', 'max')

    @staticmethod
    def unavailable():
        if os.path.exists(os.path.join(MemCgroup.V1, 'memory.limit_in_bytes')):
            return None
        if MemCgroup.v2_root():
            return None
        return 'no memory cgroup (v1 /sys/fs/cgroup/memory, or v2 with +memory)'

    @staticmethod
    def v2_root():
        """A cgroup2 mount whose children get the memory controller, or None."""
        with open('/proc/self/mounts') as f:
            roots = [l.split()[1] for l in f if l.split()[2] == 'cgroup2']
        for root in roots:
            try:
                with open(os.path.join(root, 'cgroup.subtree_control')) as f:
                    if 'memory' in f.read().split():
                        return root
            except OSError:
                pass
        return None

    def write(self, name, value):
        with open(os.path.join(self.path, name), 'w') as f:
            f.write(str(value))

    def limit(self, nbytes):
        """nbytes, or None: no limit"""
        if self.v2:
            self.write('memory.max', 'max' if nbytes is None else nbytes)
        else:
            self.write('memory.limit_in_bytes', -1 if nbytes is None else nbytes)

    @property
    def procs(self):
        return os.path.join(self.path, 'cgroup.procs')

    def usage(self):
        """bytes charged to it now"""
        name = 'memory.current' if self.v2 else 'memory.usage_in_bytes'
        with open(os.path.join(self.path, name)) as f:
            return int(f.read())

    @staticmethod
    def join(procs):
        """move the calling process into the cgroup of procs (e.g. a child's preexec_fn)"""
        with open(procs, 'w') as f:
            f.write(str(os.getpid()))

    def remove(self):
        """rmdir, once its processes are gone (retried briefly: exits take a moment)."""
        end = time.monotonic() + 10
        while self.path and not self._rmdir():
            if time.monotonic() > end:
                return f'cannot remove cgroup {self.path}'
            time.sleep(0.1)
        return None

    def _rmdir(self):
        try:
            os.rmdir(self.path)
            return True
        except FileNotFoundError:
            return True
        except OSError:
            return False
