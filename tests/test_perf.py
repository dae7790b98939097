# SPDX-License-Identifier: GPL-2.0-or-later
"""rmem-perf against a real memserver over TCP on loopback.

Every test starts its own memserver (--port 0, ready line parsed, killed in a
finally block) and runs the built rmem-perf with a timeout. Covered: verified
READ/WRITE/CAS/FETCH_ADD at several sizes, queue depths and thread counts; the
table and JSON formats; that verification really fails when someone else
scribbles on the same bytes; a wrong token; a server killed or frozen mid-run;
bad arguments.

Run with /usr/bin/python3 -m pytest; RMEM_BUILD_DIR names the meson build
directory (set by tests/meson.build).
"""
import contextlib
import datetime
import json
import os
import re
import signal
import subprocess
import tempfile
import time

import pytest

from rmemtest import MEMSERVER, MemServerProc, daemon_env

BUILD_DIR = os.environ.get("RMEM_BUILD_DIR", "")
PERF = os.path.join(BUILD_DIR, "tools", "rmem-perf")

HEADER_COLUMNS = ["op", "size(B)", "qd", "thr", "iters", "MiB/s", "Mops", "lat_min(us)",
                  "lat_med(us)", "lat_p99(us)", "lat_p99.9(us)", "lat_max(us)"]

pytestmark = pytest.mark.skipif(
    not (os.access(MEMSERVER, os.X_OK) and os.access(PERF, os.X_OK)),
    reason="memserver / rmem-perf not built (set RMEM_BUILD_DIR)")


class Server(MemServerProc):
    """A memserver with a 64 MiB pool on an ephemeral loopback port."""

    def __init__(self, tmpdir, *args):
        super().__init__(["--size", "64M", "--port", "0", *args], tmpdir, pump_stderr=False)

    @property
    def addr(self):
        return f"127.0.0.1:{self.port}"

    def stop(self):
        """Stop the server; True if it was still alive (had not crashed)."""
        alive = self.alive()
        if alive:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(signal.SIGCONT)
        super().stop(timeout=5)
        return alive


@contextlib.contextmanager
def memserver(*args):
    with tempfile.TemporaryDirectory(prefix="rmem-perf-test-") as tmpdir:
        srv = Server(tmpdir, *args)
        try:
            yield srv
        finally:
            alive = srv.stop()
            assert alive, "memserver died during the test: " + srv.logs()


def perf(srv_addr, *args, timeout=120, transport=True):
    cmd = [PERF]
    if srv_addr:
        cmd.append(srv_addr)
    if transport:
        cmd += ["--transport", "tcp"]
    cmd += list(args)
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                          env=daemon_env())


def table_rows(stdout):
    """Check the column header and return the rows as lists of strings."""
    lines = [line for line in stdout.splitlines() if line and not line.startswith("#")]
    assert lines, stdout
    assert lines[0].split() == HEADER_COLUMNS, lines[0]
    rows = [line.split() for line in lines[1:]]
    for r in rows:
        assert len(r) == len(HEADER_COLUMNS), r
    return rows


def check_row_numbers(r):
    nums = [float(x) for x in r[5:]]
    assert all(x >= 0 for x in nums), r
    lat = nums[2:]  # min, med, p99, p99.9, max
    assert lat == sorted(lat), f"latencies out of order: {r}"
    assert lat[0] > 0, r


@pytest.fixture
def server():
    with memserver() as srv:
        yield srv


# ---- verified runs --------------------------------------------------------

VERIFY_CASES = [
    # (ops, size args, qd, threads, expected (op, size) rows)
    ("read,write", ["--sweep", "1:64K"], 1, 1,
     [(op, 1 << i) for op in ("read", "write") for i in range(17)]),
    ("write,read", ["--size", "1000"], 8, 3, [("write", 1000), ("read", 1000)]),
    ("read,write", ["--sweep", "256K:1M"], 4, 2,
     [(op, s) for op in ("read", "write") for s in (256 << 10, 512 << 10, 1 << 20)]),
    ("cas,fadd", [], 1, 1, [("cas", 8), ("fadd", 8)]),
    ("cas,fadd", [], 16, 4, [("cas", 8), ("fadd", 8)]),
    ("all", ["--size", "3"], 32, 2, [("read", 3), ("write", 3), ("cas", 8), ("fadd", 8)]),
]


@pytest.mark.parametrize("ops,size_args,qd,threads,expect", VERIFY_CASES)
def test_verify(server, ops, size_args, qd, threads, expect):
    iters = 300
    res = perf(server.addr, "--op", ops, *size_args, "--qd", str(qd), "--threads",
               str(threads), "--iters", str(iters), "--verify", "--region", "32M")
    assert res.returncode == 0, res.stderr
    rows = table_rows(res.stdout)
    assert [(r[0], int(r[1])) for r in rows] == expect
    for r in rows:
        assert int(r[2]) == qd and int(r[3]) == threads, r
        assert int(r[4]) == iters * threads, r  # every measured op completed and counted
        check_row_numbers(r)
    assert "# verify: ok" in res.stdout
    assert "mismatch" not in res.stderr


@pytest.mark.parametrize("poll", ["event", "hybrid"])
def test_poll_modes(server, poll):
    res = perf(server.addr, "--op", "all", "--size", "8K", "--qd", "4", "--threads", "2",
               "--iters", "300", "--verify", "--poll", poll, "--region", "8M")
    assert res.returncode == 0, res.stderr
    assert f"poll {poll}" in res.stdout
    assert len(table_rows(res.stdout)) == 4


def test_transport_auto(server):
    res = perf(server.addr, "--iters", "100", "--json", transport=False)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["transport"] in ("tcp", "rdma")


def test_rdma_transport_message():
    # without an RDMA build, or without a device that reaches 127.0.0.1:1, a clear error
    res = subprocess.run([PERF, "127.0.0.1:1", "--transport", "rdma", "--timeout", "2000"],
                         capture_output=True, text=True, timeout=60, env=daemon_env())
    assert res.returncode == 1
    assert ("this build has no RDMA transport" in res.stderr
            or "xport_connect(rdma, 127.0.0.1:1)" in res.stderr), res.stderr


def test_verify_across_regions():
    # 1 MiB regions: targets of 1000 bytes must never straddle a boundary
    with memserver("--chunk-size", "1M") as srv:
        res = perf(srv.addr, "--op", "write,read", "--size", "1000", "--qd", "4",
                   "--threads", "3", "--iters", "2000", "--verify")
        assert res.returncode == 0, res.stderr
        assert "in 64 region(s)" in res.stdout
        assert len(table_rows(res.stdout)) == 2


def test_json(server):
    res = perf(server.addr, "--op", "all", "--sweep", "512:2K", "--qd", "4", "--threads", "2",
               "--iters", "200", "--warmup", "10", "--verify", "--json", "--region", "8M")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["tool"] == "rmem-perf"
    assert doc["transport"] == "tcp"
    assert str(server.port) in doc["server"]
    datetime.datetime.fromisoformat(doc["timestamp"].replace("Z", "+00:00"))
    assert doc["pool_B"] == 64 << 20 and doc["region_B"] == 8 << 20
    assert doc["threads"] == 2 and doc["qd"] == 4 and doc["verify"] is True
    assert doc["warmup_ops_per_thread"] == 10 and doc["iters_per_thread"] == 200
    rows = doc["results"]
    assert [(r["op"], r["size_B"]) for r in rows] == [
        ("read", 512), ("read", 1024), ("read", 2048),
        ("write", 512), ("write", 1024), ("write", 2048), ("cas", 8), ("fadd", 8)]
    for r in rows:
        for key in ("ops", "warmup_ops", "bytes_B", "elapsed_s", "bw_MiB_s", "rate_Mops",
                    "lat_min_us", "lat_med_us", "lat_p99_us", "lat_p99_9_us", "lat_max_us",
                    "lat_mean_us", "verify_checked", "verify_mismatches"):
            assert isinstance(r[key], (int, float)) and r[key] >= 0, (key, r)
        assert r["ops"] == 400 and r["warmup_ops"] == 20
        assert r["bytes_B"] == r["ops"] * r["size_B"]
        assert r["verify_mismatches"] == 0 and r["verify_checked"] > 0
        assert r["elapsed_s"] > 0 and r["bw_MiB_s"] > 0 and r["rate_Mops"] > 0
        lat = [r["lat_min_us"], r["lat_med_us"], r["lat_p99_us"], r["lat_p99_9_us"],
               r["lat_max_us"]]
        assert lat == sorted(lat) and lat[0] > 0
        assert r["lat_min_us"] <= r["lat_mean_us"] <= r["lat_max_us"]
        # the rate is what the counts and the time say
        assert r["rate_Mops"] == pytest.approx(r["ops"] / r["elapsed_s"] / 1e6, rel=1e-3)


def test_duration(server):
    res = perf(server.addr, "--op", "write", "--size", "4K", "--qd", "8", "--duration", "0.3",
               "--json", "--region", "8M")
    assert res.returncode == 0, res.stderr
    (row,) = json.loads(res.stdout)["results"]
    assert row["ops"] > 0
    assert 0.29 <= row["elapsed_s"] < 5.0
    assert json.loads(res.stdout)["iters_per_thread"] == 0


# ---- verification must be able to fail -----------------------------------

def test_verify_detects_foreign_writes(server):
    # a second client keeps zeroing the bytes the verified reader filled
    writer = subprocess.Popen([PERF, server.addr, "--transport", "tcp", "--op", "write",
                               "--size", "4K", "--qd", "4", "--duration", "4",
                               "--region", "1M"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=daemon_env())
    try:
        assert writer.stdout.readline().startswith("# rmem-perf")
        time.sleep(0.3)
        res = perf(server.addr, "--op", "read", "--size", "4K", "--qd", "4", "--duration", "1",
                   "--verify", "--region", "1M", "--json", timeout=30)
        assert res.returncode == 1, res.stdout + res.stderr
        (row,) = json.loads(res.stdout)["results"]  # the figures are still reported
        assert row["verify_mismatches"] > 0 and row["verify_checked"] > 0
        assert "verify: read of 4096 bytes at pool offset 0x" in res.stderr
        assert "byte(s) differ" in res.stderr
        assert "verify FAILED for read of 4096 bytes" in res.stderr
    finally:
        writer.kill()
        writer.communicate(timeout=10)


@pytest.mark.parametrize("op", ["cas", "fadd"])
def test_verify_detects_concurrent_atomics(server, op):
    # two runs share the same counters: neither CAS chains nor FETCH_ADD sums can add up
    cmd = [PERF, server.addr, "--transport", "tcp", "--op", op, "--qd", "4", "--duration", "1",
           "--verify", "--region", "1M"]
    procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=daemon_env()) for _ in range(2)]
    try:
        outs = [p.communicate(timeout=60) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.communicate(timeout=10)
    codes = [p.returncode for p in procs]
    assert 1 in codes, outs
    assert set(codes) <= {0, 1}, outs
    errs = "".join(err for _, err in outs)
    assert f"verify FAILED for {op} of 8 bytes" in errs


# ---- bad flows -------------------------------------------------------------

def test_token():
    with tempfile.TemporaryDirectory() as d:
        good = os.path.join(d, "token")
        bad = os.path.join(d, "bad")
        with open(good, "w") as f:
            f.write("s3cret-token\n")
        with open(bad, "w") as f:
            f.write("wrong\n")
        with memserver("--token-file", good) as srv:
            res = perf(srv.addr, "--iters", "50", "--token-file", good)
            assert res.returncode == 0, res.stderr
            for args in (["--token-file", bad], []):
                res = perf(srv.addr, "--iters", "50", *args, timeout=30)
                assert res.returncode == 1
                assert "xport_connect(tcp, " in res.stderr
                assert "Operation not permitted" in res.stderr
                assert "refused the token" in res.stderr
                assert res.stdout == ""
            res = perf(srv.addr, "--token-file", os.path.join(d, "missing"), timeout=30)
            assert res.returncode == 1
            assert "--token-file /" in res.stderr and "No such file" in res.stderr


def _wait_for_table(proc, timeout=20):
    """Wait until rmem-perf printed its column header (it is connected and running)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        if line.startswith("op "):
            return
    raise AssertionError("rmem-perf did not start its table")


@pytest.mark.parametrize("threads", [1, 3])
def test_server_killed_mid_run(threads):
    with tempfile.TemporaryDirectory(prefix="rmem-perf-test-") as tmpdir:
        srv = Server(tmpdir)
        proc = None
        try:
            proc = subprocess.Popen([PERF, srv.addr, "--transport", "tcp", "--op", "read,write",
                                     "--qd", "8", "--threads", str(threads), "--duration", "30"],
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                    env=daemon_env())
            _wait_for_table(proc)
            time.sleep(0.5)
            srv.proc.kill()
            t0 = time.monotonic()
            _, err = proc.communicate(timeout=15)
            assert time.monotonic() - t0 < 10
            assert proc.returncode == 1, err
            assert re.search(r"completed with an error|xport_post|xport_poll", err), err
            assert "run aborted" in err
        finally:
            if proc and proc.poll() is None:
                proc.kill()
                proc.communicate(timeout=10)
            srv.stop()


def test_server_frozen_times_out(server):
    proc = subprocess.Popen([PERF, server.addr, "--transport", "tcp", "--qd", "4",
                             "--duration", "30", "--timeout", "1000", "--poll", "event"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=daemon_env())
    try:
        _wait_for_table(proc)
        time.sleep(0.3)
        server.proc.send_signal(signal.SIGSTOP)
        t0 = time.monotonic()
        _, err = proc.communicate(timeout=20)
        assert time.monotonic() - t0 < 10
        assert proc.returncode == 1, err
        assert "Connection timed out" in err, err
    finally:
        server.proc.send_signal(signal.SIGCONT)
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=10)


def test_connection_refused():
    with memserver() as srv:
        port = srv.port
    # the server is gone: nothing listens on its port any more
    res = perf(f"127.0.0.1:{port}", timeout=30)
    assert res.returncode == 1
    assert "xport_connect(tcp, 127.0.0.1:%d)" % port in res.stderr
    assert "Connection refused" in res.stderr


BAD_ARGS = [
    (["--qd", "0"], "--qd: 0 is out of range"),
    (["--qd", "x"], "--qd: 'x' is not a number"),
    (["--threads", "1000"], "--threads: 1000 is out of range"),
    (["--op", "copy"], "--op: unknown operation 'copy'"),
    (["--size", "0"], "--size: 0 is out of range"),
    (["--size", "64M"], "--size: 64M is out of range"),
    (["--size", "lots"], "--size: 'lots' is not a size"),
    (["--sweep", "8"], "--sweep: expected MIN:MAX"),
    (["--sweep", "3:64"], "--sweep: MIN 3 is not a power of two"),
    (["--sweep", "64:8"], "--sweep: MIN 64 is above MAX 8"),
    (["--size", "4K", "--sweep", "8:16"], "--size and --sweep are mutually exclusive"),
    (["--iters", "5", "--duration", "1"], "--iters and --duration are mutually exclusive"),
    (["--duration", "0"], "--duration: '0' is not a number of seconds"),
    (["--poll", "spin"], "--poll: 'spin' is not busy, event or hybrid"),
    (["--transport", "ib"], "--transport: 'ib' is not tcp, rdma or auto"),
    (["--region", "1K"], "--region: 1K is too small"),
    (["--frobnicate"], "unknown option '--frobnicate'"),
    (["--qd"], "option '--qd' needs a value"),
    (["a", "b"], "unexpected argument 'b'"),
    (["host:99999"], "server 'host:99999': expected [ADDRESS]"),
    (["[::1"], "server '[::1': expected [ADDRESS]"),
]


@pytest.mark.parametrize("args,message", BAD_ARGS)
def test_bad_arguments(args, message):
    res = perf(None, *args, timeout=30, transport=False)
    assert res.returncode == 1
    assert message in res.stderr
    assert "Try 'rmem-perf --help'" in res.stderr
    assert res.stdout == ""


def test_bad_arguments_against_pool():
    with memserver("--chunk-size", "1M") as srv:
        res = perf(srv.addr, "--region", "1G", timeout=30)
        assert res.returncode == 1
        assert "--region 1.0 GiB is larger than the server's pool (64.0 MiB)" in res.stderr
        res = perf(srv.addr, "--size", "2M", timeout=30)
        assert res.returncode == 1
        assert "does not fit in one region of the pool" in res.stderr
        res = perf(srv.addr, "--region", "64K", "--qd", "32", "--threads", "2", timeout=30)
        assert res.returncode == 1
        assert "is too small" in res.stderr and "fewer than --qd 32" in res.stderr


def test_help():
    res = perf(None, "--help", timeout=30, transport=False)
    assert res.returncode == 0
    assert res.stdout.startswith("Usage: rmem-perf [SERVER[:PORT][/NAME]]")
    for opt in ("--transport", "--token-file", "--op", "--size", "--sweep", "--qd",
                "--threads", "--iters", "--duration", "--verify", "--poll", "--json",
                "--region"):
        assert opt in res.stdout
