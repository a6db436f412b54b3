"""Issue 40, case 7: Dask calls against a scheduler that does not answer.

``stream_fit(..., client="tcp://host:port", timeout=3)`` against a listener
that accepts and never answers, or against a scheduler stopped with SIGSTOP,
had not returned after 900 s, and held the estimator's lock all along (a
fitted attribute read from another thread waited too). Here every such call
runs in a child process with a time limit (a regression hangs the child,
never the suite), against real sockets and a real LocalCluster in its own
process (stopped and resumed with signals; no mocks), and must:

- fail within about its ``timeout`` with a TimeoutError that names the
  scheduler's address (``SchedulerTimeout``, also a ConnectionError);
- leave the estimator as it was;
- let another thread read the estimator's fitted attributes while it waits
  (the read completes before the call returns).
"""
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest

pytest.importorskip("distributed")

from ._isolated import child_env  # noqa: E402

# the child that calls stream_fit: prints "@@started" once the call is under
# way, waits for a line on stdin (the test has stopped the scheduler, or
# not), reads the estimator from this thread, then reports one JSON line
_DRIVER = r"""
import json, sys, threading, time
import numpy as np
import dask.array as da
from streamfit import OnlineQuantileRegressor
from streamfit.dask import stream_fit

address, timeout, chunks, sleep, marker = (sys.argv[1], float(sys.argv[2]), int(sys.argv[3]),
                                           float(sys.argv[4]), sys.argv[5])


def slow(block):
    # on a worker: say that the run is under way, then take a while (dask
    # also calls this on an empty block, here, for its meta)
    if marker and block.size:
        open(marker, "a").close()
    time.sleep(sleep)
    return block


rng = np.random.default_rng(0)
X = rng.standard_normal((chunks * 100, 3))
y = X @ np.array([1.0, -2.0, 0.5]) + rng.standard_normal(chunks * 100)
est = OnlineQuantileRegressor().partial_fit(X[:300], y[:300])
before = (est.coef_.copy(), est.intercept_, est.n_samples_seen_)
Xd = da.from_array(X, chunks=100).map_blocks(slow, dtype=float)
yd = da.from_array(y, chunks=100)
out = {}


def run():
    t0 = time.monotonic()
    try:
        stream_fit(est, Xd, yd, client=address, timeout=timeout)
        out["error"] = None
    except BaseException as exc:
        out["error"] = type(exc).__name__
        out["mro"] = [c.__name__ for c in type(exc).__mro__]
        out["message"] = str(exc)
    out["elapsed"] = time.monotonic() - t0
    out["returned_at"] = time.monotonic()


thread = threading.Thread(target=run, daemon=True)
thread.start()
print("@@started", flush=True)
sys.stdin.readline()                       # the test has done its part
t0 = time.monotonic()
coef, n_seen = est.coef_.copy(), est.n_samples_seen_      # must not wait for the call
out["read_at"] = time.monotonic()
out["read_took"] = out["read_at"] - t0
thread.join(120)
out["alive"] = thread.is_alive()
out["unchanged"] = (bool(np.array_equal(est.coef_, before[0]))
                    and est.intercept_ == before[1] and est.n_samples_seen_ == before[2])
out["n_seen"] = int(est.n_samples_seen_)
print("@@result " + json.dumps(out), flush=True)
"""

# a LocalCluster in its own process (its scheduler runs there): prints its
# address, then waits to be stopped, resumed and killed
_CLUSTER = r"""
import logging, time
from distributed import LocalCluster
with LocalCluster(n_workers=1, threads_per_worker=1, processes=True, host="127.0.0.1",
                  dashboard_address=":0", silence_logs=logging.CRITICAL) as cluster:
    print("@@address " + cluster.scheduler_address, flush=True)
    time.sleep(900)
"""

LIMIT = 150         # seconds for any child: far above every bound asserted here


def _line(proc, prefix, limit=LIMIT):
    """The first stdout line of proc starting with prefix (an editable
    install may print its rebuild first); fails on EOF or after limit s."""
    found = {}

    def read():
        for line in proc.stdout:
            if line.startswith(prefix):
                found["line"] = line[len(prefix):].strip()
                return

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(limit)
    assert "line" in found, f"the child printed no {prefix!r} line within {limit} s"
    return found["line"]


class _Driver:
    def __init__(self, address, timeout, chunks=4, sleep=0.0, marker=""):
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _DRIVER, address, str(timeout), str(chunks), str(sleep),
             str(marker)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            text=True, env=child_env())

    def started(self):
        _line(self.proc, "@@started")

    def go(self):
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()

    def result(self):
        try:
            return json.loads(_line(self.proc, "@@result "))
        finally:
            self.close()

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(30)
        for pipe in (self.proc.stdin, self.proc.stdout):
            if not pipe.closed:
                pipe.close()


def _assert_timed_out(out, address, timeout):
    assert not out["alive"], out
    assert "TimeoutError" in out.get("mro", ()), out
    assert "ConnectionError" in out["mro"], out        # as the other failures to reach one
    assert address.replace("tcp://", "") in out["message"], out
    assert f"within {timeout:g} s" in out["message"], out
    # about the timeout: the bounded steps plus the close of the client made
    # for the call (a hang would be cut only by the child's limit)
    assert out["elapsed"] < timeout + 20, out
    assert out["unchanged"], out
    # the estimator was readable while the call waited on the network
    assert out["read_at"] < out["returned_at"], out


@pytest.fixture
def deaf_listener():
    """A TCP listener that accepts every connection and never sends a byte."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    held, stop = [], threading.Event()

    def accept():
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"tcp://127.0.0.1:{server.getsockname()[1]}", held
    finally:
        stop.set()
        thread.join(5)
        for conn in held:
            conn.close()
        server.close()


def test_a_listener_that_never_answers_fails_within_the_timeout(deaf_listener):
    address, held = deaf_listener
    driver = _Driver(address, timeout=3)
    try:
        driver.started()
        driver.go()                 # read the estimator while the call waits
        out = driver.result()
    finally:
        driver.close()
    assert held, "the driver never connected to the listener"
    _assert_timed_out(out, address, 3)
    assert "no Dask scheduler answered" in out["message"], out


@pytest.fixture
def cluster_process():
    """(address, pid) of a LocalCluster in a child process of its own session
    (scheduler included: SIGSTOP stops it); every process of the session is
    killed afterwards, stopped or not."""
    proc = subprocess.Popen([sys.executable, "-c", _CLUSTER], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True, env=child_env(),
                            start_new_session=True)
    try:
        address = _line(proc, "@@address ")
        yield address, proc.pid
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:  # pragma: no cover - already gone
            pass
        proc.wait(30)
        proc.stdout.close()


@pytest.mark.skipif(not hasattr(signal, "SIGSTOP"), reason="POSIX signals (SIGSTOP, killpg)")
def test_a_stopped_scheduler_fails_within_the_timeout(cluster_process, tmp_path):
    address, pid = cluster_process
    # the cluster works: a whole run against it succeeds (a generous bound:
    # a cluster just started on a loaded machine took over 10 s to answer
    # its first request)
    driver = _Driver(address, timeout=60)
    driver.started()
    driver.go()
    out = driver.result()
    assert out["error"] is None and out["n_seen"] == 300 + 400, out

    # stopped mid-run: once a worker computes the first chunk (each takes
    # 1 s), the scheduler is stopped
    marker = tmp_path / "computing"
    driver = _Driver(address, timeout=5, chunks=30, sleep=1.0, marker=marker)
    try:
        driver.started()
        deadline = time.monotonic() + LIMIT
        while not marker.exists():
            assert time.monotonic() < deadline, "no chunk was computed"
            time.sleep(0.05)
        os.kill(pid, signal.SIGSTOP)
        driver.go()
        out = driver.result()
    finally:
        driver.close()
    _assert_timed_out(out, address, 5)
    assert "did not answer" in out["message"], out      # a request mid-run, not the handshake

    # still stopped: connecting fails too (the TCP connection is accepted by
    # the kernel; the handshake is never answered)
    driver = _Driver(address, timeout=3)
    try:
        driver.started()
        driver.go()
        out = driver.result()
    finally:
        driver.close()
        os.kill(pid, signal.SIGCONT)
    _assert_timed_out(out, address, 3)
    assert "no Dask scheduler answered" in out["message"], out
