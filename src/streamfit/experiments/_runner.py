"""Where the experiments' replications run: in this process, or as Dask tasks.

Every experiment is a list of :class:`Task` objects, each a pure function of
(setting, seed) at module level, so that a task pickles to a worker and gives
the same result wherever it runs. BLAS is held to one thread inside every task
(a thread pool changes the order of floating-point sums, and two workers on
two cores gain nothing from it), so a Dask run and a sequential run of the
same seeds return identical numbers.

Tasks of all experiments are submitted at once (:meth:`submit`) and collected
experiment by experiment (:meth:`gather`), so the cluster stays busy while the
report writer analyses and draws what has already arrived.
"""
from __future__ import annotations

import contextlib
import os
import time
import uuid
from dataclasses import dataclass, field

from threadpoolctl import threadpool_limits

__all__ = ["Task", "SequentialRunner", "DaskRunner", "open_runner"]


@dataclass(frozen=True)
class Task:
    """One replication: ``func(**setting, seed=seed)``; ``func`` must live at
    module level (it travels to workers by reference). ``priority``: higher
    starts first on a cluster (a long task started last would run alone at
    the end, on one core); results do not depend on it."""

    func: object
    setting: dict = field(default_factory=dict)
    seed: int | None = None
    priority: int = 0


def execute(task):
    """Run one task with BLAS on one thread (the same in every runner);
    returns (result, seconds, CPU seconds of the process while it ran)."""
    t0, c0 = time.perf_counter(), time.process_time()
    with threadpool_limits(limits=1):
        if task.seed is None:
            out = task.func(**task.setting)
        else:
            out = task.func(**task.setting, seed=task.seed)
    return out, time.perf_counter() - t0, time.process_time() - c0


def _progress(total, desc, enabled):
    from tqdm.auto import tqdm
    return tqdm(total=total, desc=desc, unit="task", disable=not enabled or total == 0,
                leave=False, dynamic_ncols=True)


class SequentialRunner:
    """Runs the tasks one after the other in this process, when gathered."""

    workers = 0
    description = "sequential, in this process"
    #: CPU seconds of the tasks of the last gather (on a loaded machine the
    #: wall time overstates what an idle core would take; the CPU time less so)
    last_cpu = 0.0

    def submit(self, tasks):
        return list(tasks)

    def ready(self, pending):
        """Whether gather() would not wait: here tasks run when gathered."""
        return True

    def wait_any(self, pending):  # pragma: no cover - ready() is always True here
        return None

    def gather(self, pending, desc="", progress=False):
        """(results in task order, total seconds spent in the tasks)."""
        out = []
        with _progress(len(pending), desc, progress) as bar:
            for task in pending:
                out.append(execute(task))
                bar.update()
        self.last_cpu = sum(c for _, _, c in out)
        return [r for r, _, _ in out], sum(s for _, s, _ in out)


class DaskRunner:
    """Submits tasks to a ``distributed.Client`` and gathers them in order.

    A task that raises on a worker re-raises here, with its traceback; the
    futures of an experiment are released once gathered. Waits go through
    :func:`streamfit.dask._client.settle`, so a cluster left without workers
    (a nanny retires a worker that cannot unpickle a task: the scheduler would
    wait forever) or a lost scheduler fails within ``timeout`` seconds.
    """

    last_cpu = 0.0

    def __init__(self, client, description=None, timeout=60.0):
        self.client = client
        self.timeout = timeout
        self.workers = len(client.scheduler_info().get("workers", {}))
        self.description = description or f"Dask, {self.workers} worker(s)"

    def submit(self, tasks):
        tag = uuid.uuid4().hex[:8]
        return [self.client.submit(execute, task, pure=False, priority=task.priority,
                                   key=f"streamfit-{getattr(task.func, '__name__', 'task')}-"
                                       f"{tag}-{i}")
                for i, task in enumerate(tasks)]

    def ready(self, pending):
        """Whether every future of ``pending`` has finished (or failed)."""
        return all(f.done() for f in pending)

    def wait_any(self, pending):
        """Wait until one of ``pending`` finishes (bounded like gather)."""
        from ..dask._client import settle

        settle(self.client, [f for f in pending if not f.done()], "the report's tasks",
               self.timeout, return_when="FIRST_COMPLETED")

    def gather(self, pending, desc="", progress=False):
        from ..dask._client import settle

        try:
            with _progress(len(pending), desc, progress) as bar:
                remaining = list(pending)
                while remaining:
                    settle(self.client, remaining, f"the report's {desc or 'tasks'}",
                           self.timeout, return_when="FIRST_COMPLETED")
                    for future in [f for f in remaining if f.done()]:
                        if future.status == "error":
                            future.result()      # re-raises the worker's exception
                        bar.update()
                    remaining = [f for f in remaining if not f.done()]
            out = [future.result() for future in pending]
            self.last_cpu = sum(c for _, _, c in out)
            return [r for r, _, _ in out], sum(s for _, s, _ in out)
        finally:
            for future in pending:
                future.release()


@contextlib.contextmanager
def open_runner(*, workers=None, scheduler=None, timeout=30):
    """A runner for the report: ``workers=0`` runs in this process; otherwise a
    ``distributed.LocalCluster`` with ``workers`` single-threaded worker
    processes (default: one per core), started here and closed on exit, or
    the existing cluster at ``scheduler`` (an address such as
    ``tcp://10.0.0.5:8786``), which is left running.

    Examples
    --------
    >>> from streamfit.experiments import open_runner
    >>> with open_runner(workers=0) as runner:
    ...     runner.description
    'sequential, in this process'
    """
    if scheduler is None and workers == 0:
        yield SequentialRunner()
        return
    try:
        from distributed import Client
    except ImportError as exc:  # pragma: no cover - dask is part of the report's extra
        raise ImportError("running the report on Dask needs dask and distributed "
                          "(pip install 'streamfit[report]'), or pass --workers 0") from exc
    from ..dask._client import connect, local_cluster

    if scheduler is not None:
        with connect(scheduler, timeout) as client:
            yield DaskRunner(client, f"Dask cluster at {scheduler}")
        return
    n = workers or os.cpu_count() or 1
    with local_cluster(n) as cluster, connect(Client(cluster, set_as_default=False),
                                               timeout) as client:
        yield DaskRunner(client, f"Dask LocalCluster, {n} worker process(es)")
