"""The best rank-k projection in hindsight for a stream stored as a Dask
array: sum_t X_t by blocks on the workers, then its top-k eigenvalues."""
from __future__ import annotations

import numbers
import uuid

import numpy as np

from .._errors import raise_for
from .._kernels._linalg import eigh_top
from ._blocks import is_frame, row_blocks, submit_block
from ._chains import default_window, map_pinned
from ._client import connect

__all__ = ["best_gain", "regret"]

def _block_sum(X):
    """On a worker: sum_t X_t over one block -- X^T X for rows (one BLAS
    syrk: numpy recognises the transposed product), the sum of the matrices
    for PSD instances."""
    X = np.asarray(X, dtype=np.float64)
    if X.ndim == 2:
        return X.T @ X
    return X.sum(axis=0)


def _instance_matrix_sum(blocks, client, what, timeout):
    """sum_t X_t: each block's share summed on the worker holding the block,
    the n x n results added here as they arrive."""
    total = []

    run = uuid.uuid4().hex[:8]

    def compute_block(i, place, attempt):
        return submit_block(client, blocks.items[i][:1], place,
                            f"best_gain-block-{run}-{i}-{attempt}")

    def submit_task(i, block, workers, attempt):
        # pure=False: a fresh key for every attempt
        return client.submit(_block_sum, block[0], workers=workers, allow_other_workers=False,
                             pure=False)

    def on_result(i, part):
        if total:
            total[0] += part
        else:
            total.append(part)

    window = default_window(client)
    map_pinned(client, len(blocks), compute_block, submit_task, on_result, window,
               blocks.describe, what, timeout)
    return total[0]


def _check_k(k, n):
    if isinstance(k, bool) or not isinstance(k, numbers.Integral):
        raise TypeError(f"n_components must be an integer, got {k!r}")
    if not 1 <= k <= n:
        raise ValueError(f"n_components must be in [1, n_features] = [1, {n}], got {k}")
    return int(k)


def _top_sum(C, k, where):
    C = np.ascontiguousarray(C, dtype=np.float64)
    if not np.isfinite(C).all():
        raise ValueError(f"{where}: sum_t X_t is not finite: X contains NaN or inf, or is "
                         f"too large for float64 arithmetic")
    code, w, _, _, _ = eigh_top(C, k, False)
    raise_for(code, where)
    return float(np.sum(w))


def best_gain(X, n_components, *, client=None, timeout=None):
    """lambda_{1:k}(sum_t X_t): the gain of the best fixed rank-k projection in
    hindsight for a stream stored as a Dask array.

    The n x n matrix sum_t X_t (X^T X for vector rows) is summed block by
    block, each block's share on the worker holding it, and the n x n shares
    are added as they arrive: only n x n matrices ever travel; its top-k eigenvalues come from streamfit's eigen-solver
    chain. The stream itself never needs to fit in any one memory.

    Parameters
    ----------
    X : Dask array (T, n) of vector instances, (T, n, n) of PSD instances, or
        a Dask DataFrame of rows
    n_components : int
        k.
    client, timeout
        As for :func:`stream_fit`.

    Returns
    -------
    float

    Examples
    --------
    >>> import dask.array as da
    >>> import numpy as np
    >>> from distributed import Client, LocalCluster
    >>> from streamfit.dask import best_gain
    >>> X = np.random.default_rng(0).standard_normal((3000, 6))
    >>> with LocalCluster(n_workers=2, processes=False,
    ...                   dashboard_address=":0") as cluster, \\
    ...         Client(cluster) as client:
    ...     gain = best_gain(da.from_array(X, chunks=1000), 2, client=client)
    >>> top = np.linalg.eigvalsh(X.T @ X)[-2:].sum()
    >>> bool(np.isclose(gain, top, rtol=1e-12))
    True
    """
    blocks = row_blocks(X, x_ndims=(2, 3))
    n = len(X.columns) if is_frame(X) else X.shape[-1]
    k = _check_k(n_components, n)
    with connect(client, timeout) as c:
        C = _instance_matrix_sum(blocks, c, "streamfit.dask.best_gain", timeout)
    return _top_sum(C, k, "streamfit.dask.best_gain")


def regret(estimator, X, *, client=None, timeout=None):
    """The regret of an online PCA estimator fitted on the stream X (a Dask
    array), computed on the cluster: ``best_gain(X, k) - cumulative_gain_``.

    The estimator must have played exactly the trials of X (its
    ``n_trials_`` is checked against X's rows when they are known, and its
    n_features and instance type against X's).

    Examples
    --------
    >>> import dask.array as da
    >>> import numpy as np
    >>> from distributed import Client, LocalCluster
    >>> from streamfit import PerturbedLeaderPCA
    >>> from streamfit.dask import regret, stream_fit
    >>> from streamfit.simulate import make_spiked_stream
    >>> X = make_spiked_stream(2000, 20, n_spikes=2, random_state=0)
    >>> X = da.from_array(X, chunks=500)
    >>> with LocalCluster(n_workers=2, processes=False,
    ...                   dashboard_address=":0") as cluster, \\
    ...         Client(cluster) as client:
    ...     fpl = stream_fit(PerturbedLeaderPCA(2, random_state=0), X,
    ...                      client=client)
    ...     r = regret(fpl, X, client=client)
    >>> bool(np.isclose(r, fpl.regret_, rtol=1e-9))
    True
    """
    for attr in ("n_trials_", "cumulative_gain_", "n_components_", "n_features_in_"):
        try:
            getattr(estimator, attr)
        except AttributeError:
            raise TypeError(f"estimator must be a fitted online PCA estimator (with {attr}); "
                            f"got {type(estimator).__name__}") from None
    dense = getattr(X, "ndim", 2) == 3
    kind = "dense" if dense else "vector"
    if getattr(estimator, "instances_", kind) != kind:
        raise ValueError(f"X holds {kind} instances, but the estimator was fitted with "
                         f"{estimator.instances_} instances")
    if is_frame(X):
        n, T = len(X.columns), None          # rows unknown until computed
    else:
        n, T = X.shape[-1], X.shape[0]
    if n != estimator.n_features_in_:
        raise ValueError(f"X has {n} features, but the estimator was fitted with "
                         f"{estimator.n_features_in_}")
    if T is not None and not np.isnan(T) and int(T) != estimator.n_trials_:
        raise ValueError(f"X has {int(T)} trials, but the estimator has played "
                         f"{estimator.n_trials_}: the regret compares the same stream")
    gain = best_gain(X, estimator.n_components_, client=client, timeout=timeout)
    return gain - estimator.cumulative_gain_
