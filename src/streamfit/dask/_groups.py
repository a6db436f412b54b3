"""fit_groups: one independent online model per group of a Dask DataFrame
(per sensor, per user), the models carried through the partitions on the
workers that hold them."""
from __future__ import annotations

import numbers
import pickle
import uuid
import zlib

import numpy as np
from dask import delayed
from sklearn.base import clone

from ._blocks import is_frame, row_blocks, submit_block
from ._chains import drive_chains
from ._client import connect, nthreads
from ._state import add_note

__all__ = ["fit_groups"]


def _plain(key):
    # numpy scalars and Python numbers of equal value hash alike
    if isinstance(key, tuple):
        return tuple(_plain(k) for k in key)
    return key.item() if isinstance(key, np.generic) else key


def _bucket(key, n_buckets):
    """The chain that carries group ``key``: a hash of its repr that is the
    same in every process (Python's hash() of a str is salted per process)."""
    return zlib.crc32(repr(_plain(key)).encode()) % n_buckets


def _split(part, where, by, columns, y, n_buckets):
    """On a worker: partition -> n_buckets lists of (group, X rows, y rows),
    the groups in order of first appearance, each group's rows in the
    partition's order."""
    keys = part[by]
    if (keys.isna().any(axis=None) if keys.ndim == 2 else keys.isna().any()):
        raise ValueError(f"fit_groups: {where}: the group column(s) {by!r} have missing "
                         f"values; drop or fill them first (a missing key names no group)")
    out = [[] for _ in range(n_buckets)]
    for key, rows in part.groupby(by, sort=False):
        out[_bucket(key, n_buckets)].append(
            (_plain(key), rows[columns], None if y is None else rows[y]))
    return out


def _fit_bucket(models, pieces, bucket, template, where):
    """On a worker: the bucket's models (group -> pickled estimator) after
    partial_fit on this partition's rows of each of its groups."""
    models = dict(models)
    for key, X, y in pieces[bucket]:
        estimator = pickle.loads(models[key] if key in models else template)
        try:
            estimator.partial_fit(X) if y is None else estimator.partial_fit(X, y)
        except Exception as exc:
            add_note(exc, f"raised by {type(estimator).__name__}.partial_fit for group "
                          f"{key!r} on {where} in streamfit.dask.fit_groups")
            raise
        models[key] = pickle.dumps(estimator, protocol=pickle.HIGHEST_PROTOCOL)
    return models


def _sorted(models):
    try:
        return dict(sorted(models.items()))
    except TypeError:           # keys of mixed types: first appearance order
        return models


def fit_groups(estimator, df, by, *, y=None, columns=None, n_buckets=None, client=None,
               prefetch=2, timeout=None):
    """One independent online model per group of a Dask DataFrame, in parallel.

    Each group's model is a fresh clone of ``estimator``; it sees the group's
    rows in the DataFrame's order, one ``partial_fit`` per partition that
    holds some of them -- the same models as routing each partition's rows
    to their group's model in memory::

        for part in partitions:
            for key, rows in part.groupby(by, sort=False):
                models.setdefault(key, clone(estimator)).partial_fit(rows[columns], rows[y])

    The groups are dealt by a hash of their key into ``n_buckets`` buckets;
    each bucket's models travel as one chain of tasks through the
    partitions, each step on the worker holding the partition, so no row
    ever leaves its worker: a worker holds a few partitions and the models
    of the buckets passing through, whatever the size of a group (no
    shuffle, nothing gathered in one place). The buckets proceed in
    parallel, staggered through the partitions.

    Parameters
    ----------
    estimator : estimator with ``partial_fit``
        The template (left untouched; scikit-learn's ``clone`` makes each
        group's copy).
    df : Dask DataFrame
    by : column name or list of column names
        The group key (a list gives tuple keys). Missing keys are an error.
    y : column name, optional
        The target (regressors); None for online PCA.
    columns : list of column names, optional
        The features; default every column but ``by`` and ``y``.
    n_buckets : int, optional
        Chains of models; default twice the cluster's threads (more
        buckets: smaller steps and more parallelism, more tasks).
    client, prefetch, timeout
        As for :func:`stream_fit`.

    Returns
    -------
    dict
        group key -> fitted estimator, sorted by key (when the keys sort).

    Examples
    --------
    >>> import dask.dataframe as dd
    >>> import numpy as np
    >>> import pandas as pd
    >>> from distributed import Client, LocalCluster
    >>> from streamfit import OnlineQuantileRegressor
    >>> from streamfit.dask import fit_groups
    >>> rng = np.random.default_rng(0)
    >>> df = pd.DataFrame({"sensor": rng.integers(0, 3, 6000),
    ...                    "x": rng.standard_normal(6000)})
    >>> df["y"] = (df["sensor"] + 1) * df["x"] + 0.1 * rng.standard_normal(6000)
    >>> with LocalCluster(n_workers=2, processes=False,
    ...                   dashboard_address=":0") as cluster, \\
    ...         Client(cluster) as client:
    ...     models = fit_groups(OnlineQuantileRegressor(0.5),
    ...                         dd.from_pandas(df, npartitions=4),
    ...                         "sensor", y="y", client=client)
    >>> list(models), [round(float(m.coef_[0]), 1) for m in models.values()]
    ([0, 1, 2], [1.0, 2.0, 3.0])
    """
    if not callable(getattr(estimator, "partial_fit", None)):
        raise TypeError(f"estimator must have a partial_fit method, got "
                        f"{type(estimator).__name__}")
    if not (is_frame(df) and df.ndim == 2):
        raise TypeError(f"df must be a Dask DataFrame, got {type(df).__name__}")
    by_list = list(by) if isinstance(by, (list, tuple)) else [by]
    if not by_list:
        raise ValueError("by must name at least one column")
    names = list(df.columns)
    for name, value in [("by", b) for b in by_list] + ([("y", y)] if y is not None else []):
        if value not in names:
            raise ValueError(f"{name}: df has no column {value!r}")
    if columns is None:
        columns = [c for c in names if c not in by_list and c != y]
    else:
        columns = list(columns)
        missing = [c for c in columns if c not in names]
        if missing:
            raise ValueError(f"columns: df has no column(s) {missing}")
        clash = [c for c in columns if c in by_list or c == y]
        if clash:
            raise ValueError(f"columns: {clash} are group keys or the target")
    if not columns:
        raise ValueError("fit_groups needs at least one feature column")
    row_blocks(df[columns])                      # numbers only (the keys may be anything)
    if y is not None:
        row_blocks(df[[y]])
    if n_buckets is not None and (isinstance(n_buckets, bool) or
                                  not isinstance(n_buckets, numbers.Integral) or n_buckets < 1):
        raise ValueError(f"n_buckets must be a positive integer, got {n_buckets!r}")
    if isinstance(prefetch, bool) or not isinstance(prefetch, numbers.Integral) or prefetch < 0:
        raise ValueError(f"prefetch must be a non-negative integer, got {prefetch!r}")
    template = pickle.dumps(clone(estimator), protocol=pickle.HIGHEST_PROTOCOL)
    by_arg = list(by) if isinstance(by, (list, tuple)) else by   # a list gives tuple keys
    parts = df.to_delayed()
    n = len(parts)

    def describe(i):
        return f"partition {i} of {n}"

    run = uuid.uuid4().hex[:8]
    with connect(client, timeout) as c:
        buckets = int(n_buckets) if n_buckets is not None else \
            max(1, 2 * sum((nthreads(c) or {}).values()))

        def compute_block(i, place):
            return submit_block(c, [delayed(_split, pure=False)(
                parts[i], describe(i), by_arg, columns, y, buckets,
                dask_key_name=f"fit_groups-split-{run}-{i}")], place,
                f"fit_groups-block-{run}-{i}")

        def submit_step(b, i, models, block, workers):
            return c.submit(_fit_bucket, models, block[0], b, template, describe(i),
                            key=f"fit_groups-{run}-{b}-{i}", workers=workers,
                            allow_other_workers=False, pure=False)

        final = drive_chains(c, n, compute_block, submit_step, [{}] * buckets, describe,
                             "streamfit.dask.fit_groups", int(prefetch), timeout)
    models = {}
    for bucket in final:
        for key, state in bucket.items():
            models[key] = pickle.loads(state)
    return _sorted(models)
