"""Scale-out on Dask (``pip install 'streamfit[dask]'``).

- :func:`stream_fit`: a stream stored as a Dask array or DataFrame, fed to an
  estimator's ``partial_fit`` chunk by chunk on the workers that hold the
  chunks (the state travels, the data stays).
- :func:`parallel_quantile_fit`: quantile regression by divide and conquer,
  one averaged online fit per partition in parallel, combined by a
  size-weighted mean (and, with ``rounds > 1``, iterative parameter mixing).
- :func:`fit_groups`: one online model per group of a Dask DataFrame, the
  models carried through the partitions where they are.
- :func:`best_gain` and :func:`regret`: the best rank-k projection in
  hindsight of a stream stored as a Dask array, summed on the workers.

Which cluster: every function takes ``client=``: a ``distributed.Client``
(used as it is), a scheduler address such as ``"tcp://10.0.0.5:8786"``
(connected for the call, within ``timeout`` seconds), or None: the current
default client if there is one, else a ``LocalCluster`` of one process per
core, started for the call and closed after it. Worker processes are
started by spawning, so a script that relies on that default must guard its
entry point with ``if __name__ == "__main__":``. No wait can hang: a lost
scheduler, a cluster without workers or a worker that leaves while holding
this call's data gives an error within about ``timeout`` seconds: a
scheduler that stops answering raises
:class:`~streamfit.dask.SchedulerTimeout`, a worker that dies holding a
chain's state or chunk :class:`~streamfit.dask.WorkerLost` (re-run the
call; nothing was changed).

Every task that reads a chunk runs on the worker that holds the chunk
(pinned there): chunks never travel, only estimator states and small
results do.
"""
try:
    import distributed  # noqa: F401
    import dask.array  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError("streamfit.dask needs Dask: pip install 'streamfit[dask]' "
                      "(dask[array,dataframe] and distributed)") from exc

from ._client import SchedulerTimeout, WorkerLost
from ._groups import fit_groups
from ._parallel import ParallelQuantileFit, parallel_quantile_fit
from ._regret import best_gain, regret
from ._stream import stream_fit

__all__ = ["stream_fit", "parallel_quantile_fit", "ParallelQuantileFit", "fit_groups",
           "best_gain", "regret", "WorkerLost", "SchedulerTimeout"]
