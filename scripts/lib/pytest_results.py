# pytest_results.py - a pytest plugin (-p pytest_results, with scripts/lib on PYTHONPATH) that
# writes each result to $RMEMFS_PYTEST_RESULTS as one JSON line, flushed as it happens, so a run
# stopped half-way (scripts/test-rdma.sh's time budget) still leaves the results it had.
#
# scripts/test-rdma.sh runs several test files in one pytest process (the interpreter and
# pytest's imports cost ~6 s a file in the emulated guest) and counts the results file by file
# from these lines:
#   {"collected": [NODEID, ...]}                     once, when collection is done
#   {"nodeid": ID, "when": W, "outcome": O, "duration": S}
#       W is collect, setup, call or teardown; O is passed, failed or skipped. Written for every
#       call, and for a setup or teardown that failed or skipped, and for a file that failed to
#       collect (nodeid: the file)
import json
import os

_out = None


def _write(rec):
    if _out is not None:
        _out.write(json.dumps(rec) + '\n')
        _out.flush()


def pytest_configure(config):
    global _out
    path = os.environ.get('RMEMFS_PYTEST_RESULTS')
    if path and _out is None:
        _out = open(path, 'a', encoding='utf-8')


def pytest_unconfigure(config):
    global _out
    if _out is not None:
        _out.close()
        _out = None


def pytest_collectreport(report):
    if report.failed:
        _write({'nodeid': report.nodeid, 'when': 'collect', 'outcome': 'failed',
                'duration': 0.0})


def pytest_collection_finish(session):
    _write({'collected': [item.nodeid for item in session.items]})


def pytest_runtest_logreport(report):
    if report.when == 'call' or report.outcome != 'passed':
        _write({'nodeid': report.nodeid, 'when': report.when, 'outcome': report.outcome,
                'duration': round(report.duration, 2)})
