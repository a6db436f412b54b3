"""stream_fit: the chunks of a Dask collection fed to partial_fit in order,
each call on the worker that holds the chunk."""
from __future__ import annotations

import numbers
import pickle
import uuid

from ._blocks import is_frame, row_blocks, submit_block
from ._chains import drive_chains
from ._client import connect
from ._state import add_note, adopt, caller_lock, snapshot

__all__ = ["stream_fit"]

def _n_rows(part):
    return part.shape[0]


def _fit_block(state, where, method, y_column, X, y=None, sample_weight=None):
    """On a worker: the estimator (unpickled from ``state``) after
    ``estimator.<method>`` on this block, pickled again."""
    estimator = pickle.loads(state)
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
    return pickle.dumps(estimator, protocol=pickle.HIGHEST_PROTOCOL)


def _run_chain(client, blocks, state, method, y_column, prefetch, timeout):
    """The chain of block fits (see drive_chains); returns the final state."""
    run = uuid.uuid4().hex[:8]

    def compute_block(i, place):
        return submit_block(client, blocks.items[i], place, f"stream_fit-block-{run}-{i}")

    def submit_step(chain, i, previous, block, workers):
        return client.submit(_fit_block, previous, blocks.describe(i), method, y_column,
                             *block, key=f"stream_fit-{run}-{i}", workers=workers,
                             allow_other_workers=False, pure=False)

    [state] = drive_chains(client, len(blocks), compute_block, submit_step, [state],
                           blocks.describe, "streamfit.dask.stream_fit", prefetch, timeout)
    return state


def stream_fit(estimator, X, y=None, *, sample_weight=None, client=None, prefetch=2,
               timeout=None):
    """Feed the chunks of a Dask collection to ``estimator.partial_fit`` in
    order, each call on the worker that holds the chunk.

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
        Chunks computed ahead of the one being fitted: about ``prefetch + 2``
        chunks are in the cluster's memory at a time.
    timeout : float, default 10
        Seconds to connect to a scheduler, and to wait for a lost connection
        to come back before giving up.

    Returns
    -------
    estimator
        The estimator passed in, updated in place (as ``partial_fit`` does),
        once every chunk has been fitted. If a chunk fails (bad rows, a
        worker error, a lost scheduler), the error is raised here, with a
        note naming the chunk, and the estimator is left exactly as it was.

    Notes
    -----
    Each chunk's fit is a Dask task restricted to the worker holding the
    chunk; a worker that dies mid-run makes Dask re-run the lost tasks (from
    the same states: the result is the same) or, after
    ``distributed.scheduler.allowed-failures`` deaths, raise
    ``distributed.KilledWorker``; ``client.restart()`` during the call
    raises a RuntimeError. The per-chunk overhead is a few milliseconds (a
    pickle of the state and a scheduler round trip): use chunks of at least
    thousands of rows.

    Examples
    --------
    >>> import dask.array as da
    >>> import numpy as np
    >>> from distributed import Client, LocalCluster
    >>> from streamfit import OnlineQuantileRegressor
    >>> from streamfit.dask import stream_fit
    >>> from streamfit.simulate import make_linear_stream
    >>> X, y, beta = make_linear_stream(4000, 5, tau=0.5, random_state=0)
    >>> with LocalCluster(n_workers=2, processes=False, dashboard_address=":0") as cluster, \\
    ...         Client(cluster) as client:
    ...     est = stream_fit(OnlineQuantileRegressor(0.5), da.from_array(X, chunks=1000),
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

    def fit_on_the_cluster():
        state = snapshot(estimator)
        with connect(client, timeout) as c:
            fitted = _run_chain(c, blocks, state, method, y_column, int(prefetch), timeout)
        return adopt(estimator, fitted)

    return caller_lock(estimator, fit_on_the_cluster)
