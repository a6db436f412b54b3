"""Which Dask cluster a call runs on, and waits that cannot hang.

``client=None`` takes the current client (a ``distributed.Client`` made the
default, or the one of the worker a task runs on) and, when there is none,
starts a ``LocalCluster`` for the call and closes it afterwards; a string is a
scheduler address; a ``Client`` is used as it is and left open. Connecting
is bounded by ``timeout`` as a whole (the TCP connection, the handshake and
the client's registration: ``distributed.Client`` bounds each step but one,
and a listener that accepts and never answers held it forever); every
request to the scheduler is bounded by the call's timeout (:func:`ask`), and
waits for results poll the connection, so a scheduler that dies or stops
answering mid-call gives an error within about ``timeout`` seconds rather
than a hang.
"""
from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import numbers
import os
import threading
import time
from concurrent.futures import CancelledError

import dask
import distributed
from distributed import Client, LocalCluster

__all__ = ["connect", "settle", "ask", "WorkerLost", "SchedulerTimeout", "DEFAULT_TIMEOUT"]

DEFAULT_TIMEOUT = 10.0      # seconds
_POLL = 0.5                 # seconds between checks of the connection while waiting


# The timeout of the call being run (set by connect for its block): every
# request to the scheduler made on the call's behalf is bounded by it.
_CALL_TIMEOUT = contextvars.ContextVar("streamfit_dask_timeout", default=DEFAULT_TIMEOUT)

_TIMEOUTS = (TimeoutError, asyncio.TimeoutError)     # one class from Python 3.11 on


class SchedulerTimeout(TimeoutError, ConnectionError):
    """The Dask scheduler did not answer within the call's ``timeout``: it
    accepted the connection (or had accepted it) but sent nothing back --
    stopped (SIGSTOP, a debugger), swapping, overloaded, or not a Dask
    scheduler. A TimeoutError, and a ConnectionError like the other
    failures to reach a scheduler. The message names the address.

    Examples
    --------
    A listener that accepts connections and never answers:

    >>> import socket
    >>> import dask.array as da
    >>> from streamfit import OnlineQuantileRegressor
    >>> from streamfit.dask import SchedulerTimeout, stream_fit
    >>> deaf = socket.create_server(("127.0.0.1", 0))
    >>> address = f"tcp://127.0.0.1:{deaf.getsockname()[1]}"
    >>> X = da.ones((10, 2), chunks=5)
    >>> try:
    ...     stream_fit(OnlineQuantileRegressor(), X, X[:, 0],
    ...                client=address, timeout=1)
    ... except SchedulerTimeout as exc:
    ...     print(isinstance(exc, TimeoutError), address in str(exc))
    True True
    >>> deaf.close()
    """


class _ConnectionLost(ConnectionError):
    """The connection to the scheduler went away while a request waited."""


def scheduler_address(client):
    """The scheduler's address, for messages."""
    return getattr(getattr(client, "scheduler", None), "address", None) or "(unknown address)"


def ask(client, handler, **kwargs):
    """The scheduler's answer to one request -- its handler's name
    (``"ncores"``, ``"who_has"``, ``"identity"``) and arguments -- within the
    call's timeout, or :class:`~streamfit.dask.SchedulerTimeout`.
    ``Client.nthreads()``, ``who_has()`` and ``scheduler_info()`` wait for
    the answer without bound; this asks through the same connection pool
    with a deadline (a request cut by it is cancelled, and its connection
    closed, by the pool)."""
    timeout = _CALL_TIMEOUT.get()

    async def request():
        return await getattr(client.scheduler, handler)(**kwargs)

    try:
        return client.sync(request, callback_timeout=timeout)
    except _TIMEOUTS:
        if client.status != "running":
            # no answer because the scheduler is gone (killed: the client
            # lost its connection meanwhile), not because it is silent
            raise _ConnectionLost(f"lost the connection to the Dask scheduler at "
                                  f"{scheduler_address(client)} (client status "
                                  f"{client.status!r})") from None
        raise SchedulerTimeout(f"the Dask scheduler at {scheduler_address(client)} did not "
                               f"answer (a {handler!r} request) within {timeout:g} s: it is "
                               f"stopped, overloaded or not a Dask scheduler; nothing was "
                               f"kept") from None


class _BoundedClient(Client):
    """A ``distributed.Client`` whose connection to the scheduler -- the TCP
    connection, the comm handshake, the scheduler's info and its answer to
    the registration -- takes at most ``timeout`` in all. distributed bounds
    each step but the handshake's read (``distributed.comm.core.connect``
    awaits it without a deadline), so a listener that accepts and never
    answers, or a stopped scheduler, held ``Client(address, timeout=3)``
    forever. The bound is put around the one coroutine that does all of it
    (also used to reconnect): when it expires the coroutine is cancelled,
    and ``Client._start`` closes the client, as for any failed connection."""

    async def _ensure_connected(self, timeout=None):
        if timeout is None:
            return await super()._ensure_connected(timeout=timeout)
        try:
            return await asyncio.wait_for(super()._ensure_connected(timeout=timeout), timeout)
        except _TIMEOUTS:
            # (distributed also retries a refused connection until its
            # timeout: on a loaded machine this bound may expire first)
            raise SchedulerTimeout(f"client: no Dask scheduler answered at "
                                   f"{self.scheduler.address!r} within {timeout:g} s "
                                   f"(nothing listens there, or it accepted the connection "
                                   f"but never answered: a stopped or overloaded scheduler, "
                                   f"or not a Dask scheduler)") from None


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
    dashboard port (another cluster may hold 8787). The workers keep glibc's
    own heap trimming: Dask's nannies set MALLOC_TRIM_THRESHOLD_=65536 (for
    long-lived workers' unmanaged memory), which hands every freed block
    above 64 KiB back to the OS, so a task's next large allocation faults
    its pages in again. These clusters live for one call. Example: a tenth of
    the report's dense low-rank task, 1.96 million page faults with the
    setting, 55 thousand without."""
    with dask.config.set({"distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_": None}):
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
                c = _BoundedClient(client, set_as_default=False, timeout=timeout)
            except SchedulerTimeout:
                raise
            except (OSError, *_TIMEOUTS) as exc:
                raise SchedulerTimeout(f"client: no Dask scheduler answered at {client!r} "
                                       f"within {timeout:g} s ({exc})") from exc
            owned.append(c)
        elif isinstance(client, Client):
            c = client
        else:
            raise TypeError(f"client must be None, a distributed.Client or a scheduler "
                            f"address such as 'tcp://host:8786', got {type(client).__name__}")
        if c.status != "running":
            raise ConnectionError(f"client: the Dask client is {c.status!r}, not running")
        bound = _CALL_TIMEOUT.set(timeout)
        try:
            with c.as_current():
                yield c
        finally:
            _CALL_TIMEOUT.reset(bound)
    finally:
        for obj in reversed(owned):
            with contextlib.suppress(Exception):
                obj.close()


class WorkerLost(RuntimeError):
    """A worker that tasks are pinned to (it holds their data: a chunk, or
    the state a chain carries) died or was retired mid-call. Dask cannot
    run those tasks anywhere else, so the call stops and changes nothing:
    re-run it. ``workers``: the addresses of the workers that left.

    Examples
    --------
    >>> from streamfit.dask import WorkerLost
    >>> lost = WorkerLost("stream_fit: worker tcp://10.0.0.7:4033 left",
    ...                   {"tcp://10.0.0.7:4033"})
    >>> isinstance(lost, RuntimeError), sorted(lost.workers)
    (True, ['tcp://10.0.0.7:4033'])
    """

    def __init__(self, message, workers):
        super().__init__(message)
        self.workers = workers


def nthreads(client):
    """{worker address: threads}, asked within the call's timeout; None if
    the connection to the scheduler is gone (the callers' status checks
    say so). A scheduler that does not answer raises SchedulerTimeout."""
    try:
        return dict(ask(client, "ncores"))
    except (SchedulerTimeout, _ConnectionLost):
        raise
    except Exception:
        return None


def _workers(client):
    threads = nthreads(client)
    return None if threads is None else set(threads)


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
    that pending tasks are pinned to) gone raises
    :class:`~streamfit.dask.WorkerLost` at once
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
            try:
                alive = _workers(client)
            except (SchedulerTimeout, _ConnectionLost) as exc:
                raise type(exc)(f"{what}: {exc}") from None
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
