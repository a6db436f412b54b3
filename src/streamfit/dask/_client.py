"""Which Dask cluster a call runs on, and waits that cannot hang.

``client=None`` takes the current client (a ``distributed.Client`` made the
default, or the one of the worker a task runs on) and, when there is none,
starts a ``LocalCluster`` for the call and closes it afterwards; a string is a
scheduler address; a ``Client`` is used as it is and left open. Connecting
is bounded by ``timeout``; waits for results poll the connection, so a
scheduler that dies mid-call gives an error within about ``timeout`` seconds
rather than a hang.
"""
from __future__ import annotations

import contextlib
import logging
import numbers
import os
import threading
import time
from concurrent.futures import CancelledError

import distributed
from distributed import Client, LocalCluster

__all__ = ["connect", "settle", "WorkerLost", "DEFAULT_TIMEOUT"]

DEFAULT_TIMEOUT = 10.0      # seconds
_POLL = 0.5                 # seconds between checks of the connection while waiting


def check_timeout(timeout):
    if timeout is None:
        return DEFAULT_TIMEOUT
    if isinstance(timeout, bool) or not isinstance(timeout, numbers.Real) or not timeout > 0 \
            or timeout == float("inf"):
        raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
    return float(timeout)


def _current_client(timeout):
    try:
        return distributed.get_client(timeout=timeout)
    except ValueError:          # no default client, not inside a task
        return None


def local_cluster(n_workers=None):
    """A LocalCluster of ``n_workers`` (default: one per core) single-threaded
    worker processes: the estimators' Python layer holds the GIL, so
    processes, not threads, give the parallelism. Loopback only, no fixed
    dashboard port (another cluster may hold 8787)."""
    return LocalCluster(n_workers=n_workers or os.cpu_count() or 1, threads_per_worker=1,
                        processes=True, host="127.0.0.1", dashboard_address=":0",
                        silence_logs=logging.ERROR)


@contextlib.contextmanager
def connect(client=None, timeout=None):
    """``with connect(client, timeout) as c:`` -- the client to run on (see the
    module docstring), made current for the block (``distributed.wait`` and
    ``dask.compute`` inside use it), and closed afterwards if it was made
    here."""
    timeout = check_timeout(timeout)
    owned = []
    try:
        if client is None:
            c = _current_client(timeout)
            if c is None:
                cluster = local_cluster()
                owned.append(cluster)
                c = Client(cluster, set_as_default=False, timeout=timeout)
                owned.append(c)
        elif isinstance(client, str):
            try:
                c = Client(client, set_as_default=False, timeout=timeout)
            except (OSError, TimeoutError) as exc:
                raise ConnectionError(f"client: no Dask scheduler answered at {client!r} "
                                      f"within {timeout:g} s ({exc})") from exc
            owned.append(c)
        elif isinstance(client, Client):
            c = client
        else:
            raise TypeError(f"client must be None, a distributed.Client or a scheduler "
                            f"address such as 'tcp://host:8786', got {type(client).__name__}")
        if c.status != "running":
            raise ConnectionError(f"client: the Dask client is {c.status!r}, not running")
        with c.as_current():
            yield c
    finally:
        for obj in reversed(owned):
            with contextlib.suppress(Exception):
                obj.close()


class WorkerLost(RuntimeError):
    """A worker that tasks are pinned to (it holds their data) has left."""

    def __init__(self, message, workers):
        super().__init__(message)
        self.workers = workers


def _workers(client):
    try:
        return set(client.nthreads())
    except Exception:           # the scheduler is gone: settle's status check says so
        return None


def _cancel_reasons(futures):
    """The reasons distributed gives for cancelled futures ("unknown" when it
    has none, e.g. a task pinned to a worker that died; "scheduler-restart",
    ...)."""
    try:
        distributed.wait(futures)
    except CancelledError as exc:
        return {group.reason or "unknown" for group in getattr(exc, "error_groups", ())} \
            or {"unknown"}
    except Exception:           # pragma: no cover - anything else: no reason known
        return {"unknown"}
    return set()


def lost_with_a_worker(client, futures):
    """Whether some of the futures were cancelled by the scheduler without a
    reason -- what it does to a task pinned to a worker that died -- while the
    scheduler still answers (a restart or a lost connection give reasons)."""
    cancelled = [f for f in futures if f.cancelled()]
    return bool(cancelled) and _workers(client) is not None \
        and _cancel_reasons(cancelled) <= {"unknown"}


def _raise_cancelled(futures, what):
    """The error for cancelled futures: distributed's own wait (which returns
    at once for them) names the reason."""
    try:
        distributed.wait(futures)
    except CancelledError as exc:
        # FuturesCancelledError (distributed >= 2024.7) groups the futures by
        # reason; earlier versions raise a bare CancelledError
        reasons = sorted({group.reason for group in getattr(exc, "error_groups", ())})
        if "scheduler-connection-lost" in reasons:
            raise ConnectionError(f"{what}: lost the connection to the Dask scheduler "
                                  f"(the work was cancelled)") from exc
        why = {"scheduler-restart": "the cluster was restarted"}.get(
            reasons[0] if len(reasons) == 1 else None,
            f"cancelled ({', '.join(reasons) or 'no reason given'})")
        raise RuntimeError(f"{what}: the Dask work was cancelled: {why}; nothing was "
                           f"kept, re-run the call") from exc
    except Exception:           # pragma: no cover - anything else: the generic message
        pass
    raise RuntimeError(f"{what}: the Dask work was cancelled; nothing was kept, re-run "
                       f"the call")


def settle(client, futures, what, timeout=None, return_when="ALL_COMPLETED", pins=None):
    """Wait until every future (with ``return_when="FIRST_COMPLETED"``: one) is
    finished (done, erred or cancelled).

    Every ``_POLL`` seconds of waiting it checks the cluster: a connection to
    the scheduler lost, or no worker at all, for ``timeout`` seconds raises
    ConnectionError or RuntimeError; a worker among ``pins()`` (the workers
    that pending tasks are pinned to) gone raises :class:`WorkerLost` at once
    (those tasks would wait for it forever); cancelled futures raise
    RuntimeError (ConnectionError when the scheduler connection was lost).
    Messages name ``what`` (the call and the chunk it was at).

    The wait is an event set by the futures' done-callbacks, not
    ``distributed.wait(timeout=...)``: each of its timeouts raises an
    exception whose traceback cycle holds the futures until the garbage
    collector runs, and so keeps their data (whole partitions) in the
    cluster's memory long after the call has let go of them.
    """
    timeout = check_timeout(timeout)
    futures = list(futures)
    if not futures:
        return
    # futures already finished (a persisted collection's chunks) get no
    # callback: each one costs a message to the client's event loop, and a
    # run of a thousand held chunks was waited on like this at every step
    running = [f for f in futures if not f.done()]
    if return_when == "FIRST_COMPLETED":
        need = 1 if len(running) == len(futures) else 0
    else:
        need = len(running)
    event = threading.Event()
    finished = []
    guard = threading.Lock()

    def done(_):
        with guard:
            finished.append(None)
            if len(finished) >= need:
                event.set()

    if need == 0:
        event.set()
    for future in running if need else ():
        future.add_done_callback(done)
    running = None
    lost_since = None
    idle_since = None
    while not event.wait(_POLL):
        if client.status == "running":
            lost_since = None
            alive = _workers(client)
            gone = sorted(pins() - alive) if pins is not None and alive is not None else []
            if gone:
                raise WorkerLost(f"{what}: worker {', '.join(gone)} left (died or was "
                                 f"retired) while holding data or states of this call; "
                                 f"nothing was kept, re-run the call", gone)
            if alive is not None and not alive:
                # all workers died or left (a nanny gives up on a worker that
                # cannot unpickle its tasks, say): nothing would ever run
                now = time.monotonic()
                idle_since = idle_since or now
                if now - idle_since > timeout:
                    raise RuntimeError(f"{what}: the Dask cluster has had no worker for "
                                       f"{timeout:g} s (they died or left; see the workers' "
                                       f"logs); nothing was kept")
            else:
                idle_since = None
            continue
        if any(f.cancelled() for f in futures):
            break
        now = time.monotonic()
        lost_since = lost_since or now
        if client.status in ("closing", "closed") or now - lost_since > timeout:
            raise ConnectionError(f"{what}: lost the connection to the Dask scheduler "
                                  f"(client status {client.status!r})")
    cancelled = [f for f in futures if f.cancelled()]
    if cancelled:
        # the scheduler cancels tasks pinned to a worker that died, and that
        # can reach us before a poll above sees the worker gone
        # (or the worker is already replaced, at the same address): a pinned
        # task cancelled without a reason is taken as lost with its worker
        if pins is not None and lost_with_a_worker(client, cancelled):
            gone = sorted(pins() - (_workers(client) or set()))
            raise WorkerLost(f"{what}: {'worker ' + ', '.join(gone) if gone else 'a worker'} "
                             f"left (died or was retired) while holding data or states of "
                             f"this call; nothing was kept, re-run the call", gone)
        _raise_cancelled(cancelled, what)
