"""Compute threads inside a task: BLAS and OpenMP sized to the worker's
share of its host's cores.

Two single-threaded workers on a two-core host must run two compute
threads, not four: a task whose BLAS or OpenMP pool spreads over every core
competes with the other worker's task for the same cores. Dask's nanny sets
OMP_NUM_THREADS=1 (and the BLAS variables) in the processes it starts, but
not in a worker started otherwise, and a one-process cluster (threads)
inherits the client's settings; so every task states its limit itself.
"""
from __future__ import annotations

import contextlib
import os
import threading

from ._client import SchedulerTimeout, ask

__all__ = ["host_threads", "limited", "share"]

_controller = None
_blas_lock = threading.Lock()
_blas_users = 0
_blas_limit = None


def host_threads(client):
    """{worker address: worker threads on that worker's host} (the task
    threads that may run at once on the same cores), from the scheduler's
    view of the cluster; {} if the scheduler does not say."""
    try:
        workers = ask(client, "identity", n_workers=-1)["workers"]
    except SchedulerTimeout:
        raise
    except Exception:       # the scheduler is gone: the waits' checks say so
        return {}
    per_host = {}
    for info in workers.values():
        host = info.get("host")
        per_host[host] = per_host.get(host, 0) + int(info.get("nthreads", 1) or 1)
    return {w: per_host[info.get("host")] for w, info in workers.items()}


def share(threads_on_host):
    """On a worker: the compute threads one task may use, the host's cores
    (those this process may run on) divided by the task threads sharing
    them, at least one."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):       # pragma: no cover - not Linux
        cores = os.cpu_count() or 1
    return max(1, cores // max(1, int(threads_on_host or 1)))


def _controllers():
    global _controller
    if _controller is None:
        from threadpoolctl import ThreadpoolController

        every = ThreadpoolController()
        _controller = (every.select(user_api="blas"), every.select(user_api="openmp"))
    return _controller


@contextlib.contextmanager
def limited(threads):
    """BLAS and OpenMP limited to ``threads`` for the block (threadpoolctl).

    OpenMP's thread count is the calling thread's own setting: limited
    for this thread alone. BLAS's is the process's: several tasks running
    at once in one process (a worker with several threads, workers in one
    process) would each save and restore it around the others, and the
    last to leave could restore another's limit; so the first task in
    sets it, the last one out restores it (every task of a process asks
    the same). The controllers list the loaded libraries once per process
    (a few milliseconds; a limit then costs microseconds, which matters
    for tasks of small chunks); the libraries streamfit's kernels use are
    loaded by the time the first task runs."""
    global _blas_users, _blas_limit
    blas, openmp = _controllers()
    with _blas_lock:
        if _blas_users == 0:
            _blas_limit = blas.limit(limits=int(threads))
        _blas_users += 1
    try:
        with openmp.limit(limits=int(threads)):
            yield
    finally:
        with _blas_lock:
            _blas_users -= 1
            if _blas_users == 0:
                _blas_limit.restore_original_limits()
                _blas_limit = None
