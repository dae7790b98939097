# SPDX-License-Identifier: GPL-2.0-or-later
"""The one way the Python tests start a memserver, and the process helpers
they share (test_memserver.py, test_perf.py, tests/fs/conftest.py).

A MemServerProc pumps the server's stdout and stderr into log files from
threads, waits (with a timeout) for the ready line - the only thing a
memserver prints on stdout - and parses it once, here.
"""
import os
import re
import signal
import subprocess
import threading
import time

BUILD = os.environ.get('RMEM_BUILD_DIR',
                       os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'build'))
MEMSERVER = os.path.join(BUILD, 'memserver', 'memserver')

READY_TIMEOUT = 20.0      # seconds for a memserver to print its ready line
EXIT_TIMEOUT = 30.0       # seconds for a daemon to exit after SIGTERM

# with --capacity: 'serving 8.0 GiB capacity (default pool 1.0 GiB, 3 named pools) on tcp ...'
READY_RE = re.compile(r'^memserver: serving (?P<size>\S+ \S+)(?P<pools> capacity \([^)]*\))? '
                      r'on tcp (?P<host>\S+):(?P<port>\d+)'
                      r'(?P<rdma> \(rdma: [^)]*\)|, rdma \S+ \(\S+\))$')
# GLib warnings, and sanitizer reports (UBSan reports and carries on)
WARNING_RE = re.compile(r'-(WARNING|CRITICAL|ERROR) \*\*|\*\*\s+(WARNING|CRITICAL|ERROR)|'
                        r'runtime error:|ERROR: \w+Sanitizer')


def log_warnings(text):
    return [line for line in text.splitlines() if WARNING_RE.search(line)]


def daemon_env():
    """The environment of every daemon under test: GLib warnings are fatal."""
    env = dict(os.environ)
    env['G_DEBUG'] = 'fatal-warnings'
    env.pop('G_MESSAGES_DEBUG', None)
    return env


def stop_process(proc, sig=signal.SIGTERM, timeout=EXIT_TIMEOUT):
    """Signal, wait, SIGKILL if needed. Returns the exit status."""
    if proc.poll() is None:
        try:
            proc.send_signal(sig)
        except ProcessLookupError:
            pass
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
    return proc.returncode


class OutputPump:
    """Reads a child's stream into a file and a list of lines, in a thread."""

    def __init__(self, stream, path):
        self.stream = stream
        self.path = path
        self.lines = []
        self.cond = threading.Condition()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        with open(self.path, 'a', errors='replace') as f:
            for raw in iter(self.stream.readline, b''):
                line = raw.decode(errors='replace')
                f.write(line)
                f.flush()
                with self.cond:
                    self.lines.append(line)
                    self.cond.notify_all()
        with self.cond:
            self.lines.append(None)  # EOF
            self.cond.notify_all()

    def wait_for(self, regex, timeout):
        """The first match of regex in a line, or None at EOF/timeout."""
        deadline = time.monotonic() + timeout
        pos = 0
        with self.cond:
            while True:
                while pos < len(self.lines):
                    line = self.lines[pos]
                    pos += 1
                    if line is None:
                        return None
                    m = re.search(regex, line)
                    if m:
                        return m
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self.cond.wait(left)

    def text(self):
        with self.cond:
            return ''.join(l for l in self.lines if l)

    def join(self, timeout=5):
        self.thread.join(timeout)


class MemServerProc:
    """A running memserver started with args (after the program; prefix goes
    before it, e.g. a wrapper). .port, .host and .match come from the ready
    line; .out is the pump of stdout. stderr goes to LOG_DIR/NAME.log: through
    a pump (.err, for wait_for) when pump_stderr, else straight to the file,
    so that what the server wrote is there the moment it wrote it. Raises
    AssertionError (after killing it) when no ready line comes in time."""

    def __init__(self, args, log_dir, name='memserver', prefix=(), env=None,
                 timeout=READY_TIMEOUT, pump_stderr=True):
        self.name = name
        self.log_path = os.path.join(str(log_dir), name + '.log')
        cmd = list(prefix) + [MEMSERVER] + [str(a) for a in args]
        self.err = None
        with open(self.log_path, 'ab') as log:
            self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                         stderr=subprocess.PIPE if pump_stderr else log,
                                         env=env or daemon_env())
        self.out = OutputPump(self.proc.stdout, os.path.join(str(log_dir), name + '.stdout'))
        if pump_stderr:
            self.err = OutputPump(self.proc.stderr, self.log_path)
        self.match = self.out.wait_for(READY_RE, timeout)
        if not self.match:
            self.stop(signal.SIGKILL)
            raise AssertionError(f'{name} did not become ready within {timeout:.0f} s:\n'
                                 f'{self.logs()}')
        self.ready = self.match.string.rstrip('\n')
        self.host = self.match.group('host')
        self.port = int(self.match.group('port'))

    def alive(self):
        return self.proc.poll() is None

    def stop(self, sig=signal.SIGTERM, timeout=EXIT_TIMEOUT):
        """Signal, wait (SIGKILL after timeout), collect the output; the exit status."""
        rc = stop_process(self.proc, sig, timeout)
        self.out.join()
        if self.err:
            self.err.join()
        return rc

    def stderr(self):
        if self.err:
            return self.err.text()
        with open(self.log_path, errors='replace') as f:
            return f.read()

    def logs(self):
        return self.out.text() + self.stderr()
