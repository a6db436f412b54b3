"""stream_fit: the chunks of a Dask collection fed to partial_fit in order,
each call on the worker that holds the chunk."""
from __future__ import annotations

import numbers
import pickle
import uuid

from ._blocks import is_frame, resident_blocks, row_blocks, submit_block
from ._chains import drive_chains
from ._client import connect
from ._state import add_note, commit, take_state
from ._threads import host_threads, limited, share

__all__ = ["stream_fit"]

def _n_rows(part):
    return part.shape[0]


# Chunks made from scratch (generated, read) are made in groups of about this
# many bytes on one worker and fitted there by one task: a task costs
# milliseconds (a scheduler round trip, the state pickled and sent), a
# partial_fit of a thousand rows a tenth of one.
GROUP_BYTES = 32 << 20


def _bundle(*parts):
    return parts


def _fit_blocks(state, wheres, method, y_column, on_host, *parts, bundled=False):
    """On a worker: the estimator (unpickled from ``state``) after
    ``estimator.<method>`` on each of the blocks in turn (``parts``: the
    blocks' X, y, ... one after another, as many per block as there are
    ``wheres``' blocks; ``bundled``: one tuple of them), pickled again: the
    state stays an object between the chunks of one task."""
    if bundled:
        [parts] = parts
    estimator = pickle.loads(state)
    k = len(parts) // len(wheres)
    with limited(share(on_host)):
        for j, where in enumerate(wheres):
            _fit_one(estimator, where, method, y_column, *parts[j * k:(j + 1) * k])
    return pickle.dumps(estimator, protocol=pickle.HIGHEST_PROTOCOL)


def _fit_one(estimator, where, method, y_column, X, y=None, sample_weight=None):
    if y_column is not None:
        X, y = X.drop(columns=[y_column]), X[y_column]
    for name, other in (("y", y), ("sample_weight", sample_weight)):
        if other is not None and _n_rows(other) != _n_rows(X):
            raise ValueError(f"stream_fit: {where}: {name} has {_n_rows(other)} rows but X "
                             f"has {_n_rows(X)}; X and {name} must be split alike")
    args = (X,) if y is None else (X, y)
    kwargs = {} if sample_weight is None else {"sample_weight": sample_weight}
    try:
        getattr(estimator, method)(*args, **kwargs)
    except Exception as exc:
        add_note(exc, f"raised by {type(estimator).__name__}.{method} on {where} in "
                      f"streamfit.dask.stream_fit")
        raise


def _groups(client, blocks):
    """The chain's steps: runs of consecutive blocks that one task fits in
    turn, as (block indices, worker or None).

    Blocks already in the cluster (persisted) held by one worker form a run
    there, however many (their memory is spent already); blocks made from
    scratch form runs of about GROUP_BYTES, each made on one worker chosen
    when the run starts; any other block (computed from data in the cluster,
    where Dask puts it) is a step of its own."""
    from distributed import futures_of

    held = resident_blocks(client, blocks)
    width = 8 * ((blocks.n_features or 1) + len(blocks.kinds))     # bytes a row, about
    groups, run, key, size = [], [], None, 0
    last = None
    for i in range(len(blocks)):
        if i in held:
            holders = held[i][1]
            last = last if last in holders else holders[0]
            this, rows = ("held", last), 0
        elif blocks.rows[i] is not None and not futures_of(list(blocks.items[i])):
            this, rows = ("made",), blocks.rows[i] * width
        else:
            this, rows = None, 0
        if run and (this is None or this != key or size + rows > GROUP_BYTES):
            groups.append((run, key[1] if key and key[0] == "held" else None))
            run, size = [], 0
        run.append(i)
        key, size = this, size + rows
    if run:
        groups.append((run, key[1] if key and key[0] == "held" else None))
    return groups, held


def _describe_group(blocks, group):
    first, last = group[0], group[-1]
    if first == last:
        return blocks.describe(first)
    unit = "chunks" if blocks.kinds[0] == "array" else "partitions"
    return f"{unit} {first}..{last} of {len(blocks)}"


def _run_chain(client, blocks, state, method, y_column, prefetch, timeout):
    """The chain of block fits, a run of blocks a step (see drive_chains and
    _groups); returns the final state."""
    run = uuid.uuid4().hex[:8]
    groups, held = _groups(client, blocks)
    on_host = host_threads(client)
    made = {}           # future key -> block index, to name a block that fails

    def compute_block(g, place):
        indices, worker = groups[g]
        if worker is not None:
            futures = [f for i in indices for f in held[i][0]]
            if len(indices) == 1:
                return futures, worker
            # the run's chunks as one value, put together on their worker
            # ahead of the step: a step that depends on every chunk of the
            # run (hundreds of keys) waited twice as long to start (14-18 ms
            # against 7, measured at 1,000-row chunks), and that wait is on
            # the chain's critical path; this task is not
            return [client.submit(_bundle, *futures, key=f"stream_fit-run-{run}-{g}",
                                  workers=[worker], allow_other_workers=False,
                                  pure=False)], worker
        chosen = []

        def same_place():
            # every block of the run on the worker chosen for its first
            if not chosen:
                chosen.append(place())
            return chosen[0]

        futures, where = [], None
        for i in indices:
            block, w = submit_block(client, blocks.items[i], same_place,
                                    f"stream_fit-block-{run}-{i}")
            made.update({f.key: i for f in block})
            futures += block
            where = where or w
        return futures, where

    def submit_step(chain, g, previous, block, workers):
        indices, worker = groups[g]
        if worker is not None:
            workers = [worker]
        bundled = worker is not None and len(indices) > 1
        return client.submit(_fit_blocks, previous, [blocks.describe(i) for i in indices],
                             method, y_column, on_host.get(workers[0] if workers else None, 1),
                             *block, bundled=bundled, key=f"stream_fit-{run}-{g}",
                             workers=workers, allow_other_workers=False, pure=False)

    def describe_failed(g, future):
        i = made.get(future.key)
        return blocks.describe(i) if i is not None else _describe_group(blocks, groups[g][0])

    [state] = drive_chains(client, len(groups), compute_block, submit_step, [state],
                           lambda g: _describe_group(blocks, groups[g][0]),
                           "streamfit.dask.stream_fit", prefetch, timeout,
                           describe_failed=describe_failed)
    return state


def stream_fit(estimator, X, y=None, *, sample_weight=None, client=None, prefetch=2,
               timeout=None):
    """Feed the chunks of a Dask collection to ``estimator.partial_fit`` in
    order, each call on the worker that holds the chunk; consecutive chunks
    on one worker are fitted by one task, the estimator kept in memory
    between them.

    Like dask-ml's ``Incremental``, but the estimator's state travels from
    worker to worker and the data stays where it is: no chunk is ever sent to
    the client or to another worker. The result is bit for bit the estimator
    that ``partial_fit`` on each computed chunk in turn gives in memory (on
    workers with the same CPU type and BLAS thread count as the comparison).

    Parameters
    ----------
    estimator : estimator with ``partial_fit``
        Any of streamfit's online estimators (or a scikit-learn one that
        pickles); fitted or not: the stream continues from its state.
    X : Dask array (n_samples, n_features) or Dask DataFrame
        One ``partial_fit`` call per row chunk (array; chunks along the
        columns are joined first) or per partition (DataFrame, passed as the
        pandas DataFrame, so the estimator sees the column names). A 3-d Dask
        array of PSD matrices goes to ``partial_fit_dense`` (online PCA). Dask
        arrays need known chunk sizes (``X.compute_chunk_sizes()``).
    y : Dask array or Series, a column name of X, or None
        Split like X (the same row chunks or the same partitions). A column
        name of a DataFrame X is taken out of each partition on the worker, so
        that a partition read from storage is read once.
    sample_weight : Dask array or Series, optional
        Split like X, passed as ``partial_fit(..., sample_weight=...)``.
    client : distributed.Client, scheduler address, or None
        None: the current Dask client if there is one, else a LocalCluster
        (one process per core) started for this call and closed after it.
    prefetch : int, default 2
        Steps computed ahead of the one being fitted: about ``prefetch + 2``
        steps' chunks are in the cluster's memory at a time, besides chunks
        already held there. A step is one chunk, or a run of consecutive
        chunks of about 32 MB in all made from scratch on one worker.
    timeout : float, default 10
        Seconds to connect to a scheduler (the whole handshake), for the
        scheduler to answer each request, and to wait for a lost connection
        to come back before giving up.

    Returns
    -------
    estimator
        The estimator passed in, updated in place (as ``partial_fit`` does),
        once every chunk has been fitted. If a chunk fails (bad rows, a
        worker error, a lost scheduler), the error is raised here, with a
        note naming the chunk, and the estimator is left exactly as it was.

    Raises
    ------
    WorkerLost
        A worker holding the state or a chunk that a step is pinned to died
        or was retired mid-run (see Notes); a RuntimeError.
    SchedulerTimeout
        The scheduler did not answer within ``timeout`` (at the handshake
        or mid-run: stopped, overloaded, or not a Dask scheduler); a
        TimeoutError (and a ConnectionError) naming its address.
    ConnectionError
        The connection to the scheduler was lost for ``timeout`` seconds.
    RuntimeError
        The estimator changed while the chunks were fitted (another call
        fitted it or set its parameters): the cluster's result is not
        applied, and that call's update is kept.

    Notes
    -----
    The chain's steps are Dask tasks, each restricted to the worker holding
    its chunks: a run of consecutive chunks that one worker holds (a
    persisted collection: however many) or makes (chunks made from scratch:
    a run of about 32 MB is made on one worker), fitted in turn by one
    ``partial_fit`` call each. A step costs a few milliseconds (the state
    pickled, sent to the next worker, a scheduler round trip); a chunk
    within a step costs only its ``partial_fit`` call, so small chunks are
    cheap where consecutive chunks lie on one worker, and each switch of
    worker costs a step. Dask cannot re-run a step on another worker: its
    state and chunk are on the worker it is pinned to. So a worker that
    dies mid-run (or is retired) ends the call with
    :class:`~streamfit.dask.WorkerLost`,
    naming it, and the estimator is left as it was: re-run the call. Only a
    chunk still being made on the dying worker, that no step needs yet, is
    made again by Dask elsewhere, and the result is then the same.
    ``client.restart()`` during the call raises a RuntimeError. BLAS and
    OpenMP threads in a step are limited to the worker's share of its
    host's cores.

    Nothing is locked while the cluster works or the network is waited on:
    the estimator's state is taken as a copy of its state object (between
    two of its calls) and the result is published by one assignment of the
    fitted state object, so its fitted attributes stay readable, and its
    calls run, meanwhile. If another call changed the estimator in between,
    the commit raises RuntimeError and applies nothing (that call's update
    stays). Feed one estimator from one place: a call already under way at
    the instant of the commit could still lose its rows, as with ``fit``.

    Examples
    --------
    >>> import dask.array as da
    >>> import numpy as np
    >>> from distributed import Client, LocalCluster
    >>> from streamfit import OnlineQuantileRegressor
    >>> from streamfit.dask import stream_fit
    >>> from streamfit.simulate import make_linear_stream
    >>> X, y, beta = make_linear_stream(4000, 5, tau=0.5, random_state=0)
    >>> with LocalCluster(n_workers=2, processes=False,
    ...                   dashboard_address=":0") as cluster, \\
    ...         Client(cluster) as client:
    ...     est = stream_fit(OnlineQuantileRegressor(0.5),
    ...                      da.from_array(X, chunks=1000),
    ...                      da.from_array(y, chunks=1000), client=client)
    >>> same = OnlineQuantileRegressor(0.5)
    >>> for start in range(0, 4000, 1000):
    ...     same = same.partial_fit(X[start:start + 1000], y[start:start + 1000])
    >>> bool(np.array_equal(est.coef_, same.coef_)), est.n_samples_seen_
    (True, 4000)
    """
    if not callable(getattr(estimator, "partial_fit", None)):
        raise TypeError(f"estimator must have a partial_fit method, got "
                        f"{type(estimator).__name__}")
    if isinstance(prefetch, bool) or not isinstance(prefetch, numbers.Integral) or prefetch < 0:
        raise ValueError(f"prefetch must be a non-negative integer, got {prefetch!r}")
    y_column = None
    if isinstance(y, str):
        if not (is_frame(X) and X.ndim == 2):
            raise TypeError("y may be a column name only when X is a Dask DataFrame")
        if y not in X.columns:
            raise ValueError(f"y: X has no column {y!r}")
        y_column, y = y, None
    dense = callable(getattr(estimator, "partial_fit_dense", None))
    blocks = row_blocks(X, y, sample_weight, x_ndims=(2, 3) if dense else (2,))
    if y_column is not None:
        # checked here like a separate y would be: numbers only
        row_blocks(X[[y_column]])
    method = "partial_fit_dense" if getattr(X, "ndim", 2) == 3 else "partial_fit"

    # The estimator's state is taken (a copy of its state object, between two
    # of its calls) and the result committed (one assignment of the fitted
    # state object); nothing is locked while the cluster works (or does not
    # answer): its attributes stay readable, and other calls run, meanwhile.
    # A call that changed it in between makes the commit refuse, so neither
    # is lost.
    state = take_state(estimator)
    with connect(client, timeout) as c:
        fitted = _run_chain(c, blocks, state, method, y_column, int(prefetch), timeout)
    return commit(estimator, state, fitted)
