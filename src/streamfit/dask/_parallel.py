"""parallel_quantile_fit: divide-and-conquer quantile regression, one averaged
online fit per partition, in parallel, combined by a size-weighted mean."""
from __future__ import annotations

import copy
import numbers
import time
import uuid

import numpy as np

from ..quantile import OnlineQuantileRegressor
from ..schedules import StatisticalSchedule
from ._blocks import is_frame, resident_blocks, row_blocks, spread, submit_block
from ._chains import default_window, map_pinned
from ._client import connect
from ._client import nthreads as _nthreads
from ._state import add_note
from ._threads import host_threads, limited, share

__all__ = ["parallel_quantile_fit", "ParallelQuantileFit"]


def _fit_run(wheres, taus, params, init, r, min_rows, y_column, on_host, *parts):
    """On a worker: the averaged online fit of each tau on a run of
    partitions (``parts``: the partitions' X, y one after another, as many
    per partition as there are ``wheres``), chained in order as one stream
    -- ``fit`` on the first partition, ``partial_fit`` on the others --, in
    round ``r`` (0, 1, ...); BLAS and OpenMP threads limited to the worker's
    share of the host's cores (``on_host``: the task threads of the workers
    on this host). Returns (rows, coefs (m, d), intercepts (m,), seconds,
    the positions in the run of the partitions fitted (the non-empty ones))."""
    with limited(share(on_host)):
        return _fit_taus(wheres, taus, params, init, r, min_rows, y_column, parts)


def _split(where, min_rows, y_column, X, y=None):
    if y_column is not None:
        X, y = X.drop(columns=[y_column]), X[y_column]
    n = X.shape[0]
    if y.shape[0] != n:
        raise ValueError(f"parallel_quantile_fit: {where}: y has {y.shape[0]} rows but X has "
                         f"{n}; X and y must be split alike")
    if 0 < n < min_rows:
        raise ValueError(f"parallel_quantile_fit: {where} has {n} rows, fewer than "
                         f"min_partition_rows = {min_rows}: a partition's estimate is only "
                         f"as good as its size against d. Rechunk/repartition X and y into "
                         f"larger partitions, or lower min_partition_rows")
    return X, y


def _fit_taus(wheres, taus, params, init, r, min_rows, y_column, parts):
    start = time.perf_counter()
    k = len(parts) // len(wheres)
    pieces = [(where, _split(where, min_rows, y_column, *parts[j * k:(j + 1) * k]))
              for j, where in enumerate(wheres)]
    fitted = [j for j, (_, Xy) in enumerate(pieces) if Xy[0].shape[0]]     # empty: skipped
    pieces = [pieces[j] for j in fitted]
    n = sum(Xy[0].shape[0] for _, Xy in pieces)
    if n == 0:
        return 0, None, None, 0.0, []
    schedule = params.get("schedule")
    if r and isinstance(schedule, StatisticalSchedule):
        # a later round continues the clock of this run's earlier ones: the
        # start counts as the r n rows they read (Remark 3's warm start), so
        # the rounds are epochs of one averaged run, whose error keeps
        # falling towards the offline fit's; with the clock reset at every
        # round it stalled at ~1.4x offline (10^5 rows, d = 100, 8 partitions)
        schedule = copy.copy(schedule)
        schedule.t0 = schedule.t0 + r * n
        params = {**params, "schedule": schedule}
    coefs, intercepts = [], []
    for j, tau in enumerate(taus):
        est = OnlineQuantileRegressor(tau, average=True, **params)
        kwargs = {}
        if init is not None:
            kwargs["coef_init"] = init[0][j]
            if est.fit_intercept:
                kwargs["intercept_init"] = init[1][j]
        for p, (where, (X, y)) in enumerate(pieces):
            try:
                if p == 0:
                    est.fit(X, y, **kwargs)
                else:
                    _continue(est, X, y)
            except Exception as exc:
                add_note(exc, f"raised by OnlineQuantileRegressor(tau={tau}).fit on {where} "
                              f"in streamfit.dask.parallel_quantile_fit")
                raise
        coefs.append(est.coef_)
        intercepts.append(est.intercept_)
    return n, np.array(coefs), np.array(intercepts), time.perf_counter() - start, fitted


def _continue(est, X, y):
    """The stream continued over the next partition: one ``partial_fit``
    (mode "single": an update per row, exactly as ``fit`` over both
    partitions); in the block modes, blocks of the size ``fit`` uses
    (``batch_size``, default max(2 (d + 1), 16)), so that a partition is not
    one step."""
    if est.mode == "single":
        est.partial_fit(X, y)
        return
    bs = est.batch_size or max(2 * (X.shape[1] + 1), 16)
    for a in range(0, X.shape[0], bs):
        est.partial_fit(*(getattr(v, "iloc", v)[a:a + bs] for v in (X, y)))


def _runs(held, chosen, n_blocks):
    """The fits' runs of partitions, in order of their first partition: the
    partitions held in memory by one worker (``chosen``) form one run there,
    fitted as one stream; every other partition (computed during the call)
    is a run of its own. Returns [(partitions, worker or None)]."""
    by_worker = {}
    for i in sorted(chosen):
        by_worker.setdefault(chosen[i], []).append(i)
    runs = [(idx, w) for w, idx in by_worker.items()]
    runs += [([i], None) for i in range(n_blocks) if i not in held]
    return sorted(runs, key=lambda run: run[0][0])


class ParallelQuantileFit:
    """The result of :func:`parallel_quantile_fit`: the combined estimate and
    the estimates it combines, one per run of partitions fitted as one
    stream (the partitions a worker holds in memory; a partition computed
    during the call on its own).

    Attributes
    ----------
    tau : float or list of float
        As passed.
    coef_ : array (d,), or (m, d) for m taus
        The size-weighted mean of the runs' averaged estimates (of the last
        round).
    intercept_ : float, or array (m,)
    partition_coef_ : array (S, d) or (S, m, d)
        Each non-empty run's estimate in the last round.
    partition_intercept_ : array (S,) or (S, m)
    partition_sizes_ : int array (S,)
        Rows per non-empty run (the weights).
    partition_index_ : int array (S,)
        The first partition of X of each run.
    partition_runs_ : list of S tuples of int
        The partitions of X each run fitted, in the order fitted (empty ones
        are left out); ``(i,)`` for a partition fitted on its own.
    n_samples_seen_ : int
        Rows in all partitions (in each round).
    rounds_ : int
    history_ : list of (coef, intercept)
        The combined estimate after each round.
    partition_fit_seconds_ : array (rounds, S)
        Time each run's fits took on its worker (data access excluded).

    Examples
    --------
    >>> import numpy as np
    >>> from streamfit.dask import ParallelQuantileFit
    >>> fit = ParallelQuantileFit(0.5, [np.array([1.0, 2.0]),
    ...                                 np.array([3.0, 4.0])],
    ...                           [0.0, 1.0], [100, 300], [0, 1], [[0.01, 0.02]])
    >>> fit.coef_, fit.intercept_, fit.n_samples_seen_
    (array([2.5, 3.5]), 0.75, 400)
    >>> fit.partition_runs_
    [(0,), (1,)]
    >>> fit.predict(np.array([[1.0, 1.0]]))
    array([6.75])
    """

    def __init__(self, tau, partition_coef, partition_intercept, partition_sizes,
                 partition_index, partition_fit_seconds, history=None, partition_runs=None):
        self.tau = tau
        self.partition_coef_ = np.asarray(partition_coef, dtype=np.float64)
        self.partition_intercept_ = np.asarray(partition_intercept, dtype=np.float64)
        self.partition_sizes_ = np.asarray(partition_sizes, dtype=np.int64)
        self.partition_index_ = np.asarray(partition_index, dtype=np.int64)
        self.partition_runs_ = [tuple(int(i) for i in run) for run in partition_runs] \
            if partition_runs is not None else [(int(i),) for i in self.partition_index_]
        self.partition_fit_seconds_ = np.asarray(partition_fit_seconds, dtype=np.float64)
        self.coef_, self.intercept_ = _combine(self.partition_coef_, self.partition_intercept_,
                                               self.partition_sizes_)
        if np.ndim(tau) == 0:
            self.intercept_ = float(self.intercept_)
        self.n_samples_seen_ = int(self.partition_sizes_.sum())
        self.history_ = list(history) if history is not None else \
            [(self.coef_.copy(), self.intercept_)]
        self.rounds_ = len(self.history_)

    def __repr__(self):
        return (f"ParallelQuantileFit(tau={self.tau!r}, runs={len(self.partition_sizes_)}, "
                f"n_samples_seen_={self.n_samples_seen_}, rounds_={self.rounds_})")

    def predict(self, X):
        """Predicted quantiles X @ coef_.T + intercept_: shape (n,) for one
        tau, (n, m) for m taus, sorted across the taus at each row (the
        rearrangement of Chernozhukov, Fernandez-Val & Galichon, which never
        increases the check loss). X may be a NumPy or a Dask array."""
        import dask.array as da

        coef = np.atleast_2d(self.coef_)
        intercept = np.atleast_1d(self.intercept_)
        one = np.ndim(self.tau) == 0
        if isinstance(X, da.Array):
            if X.ndim != 2 or X.shape[1] != coef.shape[1]:
                raise ValueError(f"X must have shape (n_samples, {coef.shape[1]}), got "
                                 f"{X.shape}")
            out = X.rechunk({1: -1}).map_blocks(_predict_block, coef, intercept, one,
                                               np.argsort(np.atleast_1d(self.tau)),
                                               drop_axis=[1] if one else [],
                                               chunks=(X.chunks[0],) if one else
                                               (X.chunks[0], (coef.shape[0],)),
                                               dtype=np.float64)
            return out
        X = np.asarray(X, dtype=np.float64)
        if X.ndim != 2 or X.shape[1] != coef.shape[1]:
            raise ValueError(f"X must have shape (n_samples, {coef.shape[1]}), got {X.shape}")
        return _predict_block(X, coef, intercept, one, np.argsort(np.atleast_1d(self.tau)))


def _predict_block(X, coef, intercept, one, order):
    pred = X @ coef.T + intercept
    if one:
        return pred[:, 0]
    # sorted predictions go to the taus in increasing order
    out = np.empty_like(pred)
    out[:, order] = np.sort(pred, axis=1)
    return out


def _combine(coefs, intercepts, sizes):
    w = sizes / sizes.sum()
    return np.tensordot(w, coefs, axes=1), np.tensordot(w, intercepts, axes=1)


def _check_taus(tau):
    many = np.ndim(tau) > 0
    taus = list(np.atleast_1d(np.asarray(tau, dtype=object)))
    if not taus:
        raise ValueError("tau must be a float in (0, 1) or a non-empty list of them")
    for t in taus:
        if isinstance(t, bool) or not isinstance(t, numbers.Real) or not 0 < t < 1:
            raise ValueError(f"tau must be in (0, 1) (each of a list), got {t!r}")
    taus = [float(t) for t in taus]
    if len(set(taus)) != len(taus):
        raise ValueError(f"tau lists a quantile twice: {taus}")
    return taus, many


def _check_params(params, taus, d):
    params = dict(params or {})
    for name in ("tau", "average"):
        if name in params:
            raise TypeError(f"estimator_params may not set {name!r}: parallel_quantile_fit "
                            f"fits OnlineQuantileRegressor(tau, average=True)")
    # the parameters are checked here, on a throwaway fit of one row, rather
    # than on every partition
    OnlineQuantileRegressor(taus[0], average=True, **params).partial_fit(np.zeros((1, d)),
                                                                         np.zeros(1))
    return params


def _restart_params(params):
    """The estimator parameters of rounds after the first: a statistical
    schedule starts at phase two after its warm-up (``start="phase2"``, the
    paper's Remark 3 for a start already near the solution) instead of
    running phase one's large geometric steps again from the combined
    estimate; any other schedule is kept as it is."""
    schedule = params.get("schedule", "statistical")
    if isinstance(schedule, str) and schedule == "statistical":
        schedule = StatisticalSchedule()
    if not isinstance(schedule, StatisticalSchedule):
        return params
    schedule = copy.copy(schedule)
    schedule.start = "phase2"
    return {**params, "schedule": schedule}


def parallel_quantile_fit(X, y, tau=0.5, *, rounds=1, client=None, estimator_params=None,
                          min_partition_rows=None, timeout=None):
    """Quantile regression by divide and conquer: the partitions of (X, y)
    are fitted in parallel by the averaged online regressor, and the
    estimates are combined by their size-weighted mean.

    Partitions already in the workers' memory (persisted) are fitted where
    they are, one task per worker: the partitions a worker holds, in order,
    are one stream to one ``OnlineQuantileRegressor(tau, average=True)``
    (statistical schedule, Polyak-Ruppert average; ``fit`` on the first,
    ``partial_fit`` on the next: the state passes from partition to
    partition in the task, no row block moves), so there is one estimate
    per worker, over all its rows, as accurate as one fit of as many rows
    -- averaging many short partitions' estimates instead loses accuracy.
    A partition held by several workers goes to the one with the fewest
    rows so far. Partitions are never moved -- sending one costs more than
    fitting it (600 MB per 750,000 rows at d = 100, against 0.1 s of
    fitting) -- so the speed-up is bounded by how evenly the rows lie on
    the workers: with 11 and 6 equal partitions, the worker with 11 takes
    11/17 of the single fit's time (``client.rebalance()`` evens them out
    beforehand). Partitions computed during the call (not persisted) are
    each fitted on their own, on the worker that makes them, and each
    gives an estimate. Only the d + 1 numbers of each estimate come back.
    BLAS and OpenMP threads inside each fit are limited to the worker's
    share of its host's cores (two single-threaded workers on two cores:
    one each). The averaged online estimator is asymptotically normal, and
    Volgushev, Chao & Cheng (Ann. Statist. 2019) show that the mean of S
    local quantile regression estimators keeps the full-sample rate when
    each is large against d (S growing slower than about sqrt(N) / (d log
    N)).

    Parameters
    ----------
    X : Dask array (n_samples, n_features) or Dask DataFrame
    y : Dask array or Series split like X, or a column name of a DataFrame X
    tau : float in (0, 1), or a list of them
        With a list, each run of partitions fits every tau in turn on its
        data (the data is read once per tau and round).
    rounds : int, default 1
        ``rounds > 1``: iterative parameter mixing -- every run of
        partitions (a worker's persisted partitions, or one partition) is
        fitted again from the combined estimate of the previous round
        (``fit(X, y, coef_init=..., intercept_init=...)`` on its first
        partition), which removes much of the bias of short runs' early
        iterates; with one run per worker over millions of rows, round one
        is already about as accurate as one fit of all rows, and a second
        round is a second epoch over the data (twice the time). In those
        rounds a statistical schedule (the default) starts at phase two
        (``StatisticalSchedule(start="phase2")``, a copy of the one given):
        the start is already near the solution; and it continues the clock
        of the run's earlier rounds (``t0`` raised by the n rows of
        each earlier round: the start counts as r n iterates in the
        average), so that the rounds are epochs of one averaged run and the
        error keeps falling towards the offline estimator's with more
        rounds. Each round reads X again (persist it first if it fits in the
        cluster's memory).
    client : distributed.Client, scheduler address or None
        As for :func:`stream_fit`.
    estimator_params : dict, optional
        Other parameters of :class:`~streamfit.OnlineQuantileRegressor`
        (``schedule``, ``mode``, ``fit_intercept``, ...); not tau or average.
    min_partition_rows : int, default 20 (d + 1)
        Smaller non-empty partitions are an error (their estimates would
        weigh noise into the mean); empty ones are skipped.
    timeout : float, default 10
        Seconds to connect to a scheduler (the whole handshake), for the
        scheduler to answer each request, or to wait for a lost connection.

    Returns
    -------
    ParallelQuantileFit
        ``coef_``, ``intercept_``, ``predict``, and the runs' estimates,
        sizes and partitions.

    Examples
    --------
    >>> import dask.array as da
    >>> import numpy as np
    >>> from distributed import Client, LocalCluster
    >>> from streamfit.dask import parallel_quantile_fit
    >>> from streamfit.simulate import make_linear_stream
    >>> X, y, beta = make_linear_stream(40_000, 5, tau=0.5, random_state=0)
    >>> with LocalCluster(n_workers=2, processes=False,
    ...                   dashboard_address=":0") as cluster, \\
    ...         Client(cluster) as client:
    ...     fit = parallel_quantile_fit(da.from_array(X, chunks=10_000),
    ...                                 da.from_array(y, chunks=10_000), 0.5,
    ...                                 client=client)
    >>> fit.partition_sizes_, fit.coef_.shape
    (array([10000, 10000, 10000, 10000]), (5,))
    >>> bool(np.linalg.norm(fit.coef_ - beta) < 0.01 * np.linalg.norm(beta))
    True
    """
    taus, many = _check_taus(tau)
    if isinstance(rounds, bool) or not isinstance(rounds, numbers.Integral) or rounds < 1:
        raise ValueError(f"rounds must be an integer >= 1, got {rounds!r}")
    y_column = None
    if isinstance(y, str):
        if not (is_frame(X) and X.ndim == 2):
            raise TypeError("y may be a column name only when X is a Dask DataFrame")
        if y not in X.columns:
            raise ValueError(f"y: X has no column {y!r}")
        y_column, y = y, None
    elif y is None:
        raise TypeError("y is required: a Dask array or Series split like X, or a column "
                        "name of X")
    blocks = row_blocks(X, y)
    d = blocks.n_features - (y_column is not None)
    if min_partition_rows is None:
        min_rows = 20 * (d + 1)
    else:
        if isinstance(min_partition_rows, bool) or \
                not isinstance(min_partition_rows, numbers.Integral) or min_partition_rows < 1:
            raise ValueError(f"min_partition_rows must be a positive integer, got "
                             f"{min_partition_rows!r}")
        min_rows = int(min_partition_rows)
    for i, n in enumerate(blocks.rows):
        if n is not None and 0 < n < min_rows:
            raise ValueError(f"parallel_quantile_fit: {blocks.describe(i)} has {n} rows, fewer "
                             f"than min_partition_rows = {min_rows}: rechunk X and y into "
                             f"larger partitions, or lower min_partition_rows")
    if not any(n is None or n > 0 for n in blocks.rows):
        raise ValueError("X has no rows")
    params = _check_params(estimator_params, taus, d)
    later = _restart_params(params)
    run = uuid.uuid4().hex[:8]
    history, seconds, init = [], [], None
    with connect(client, timeout) as c:
        window = default_window(c)
        on_host = host_threads(c)
        # partitions already in the workers' memory (persisted): fitted where
        # they are, all at once, each worker's rows as even as the placement
        # allows; the others are computed block by block (map_pinned)
        held = resident_blocks(c, blocks)
        # {} when the scheduler is gone: map_pinned's waits say so
        nthreads = _nthreads(c) or {}
        chosen = spread({i: w for i, (_, w) in held.items()}, blocks.rows, nthreads)
        runs = _runs(held, chosen, len(blocks))
        resident = {g: ([f for i in idx for f in held[i][0]], w)
                    for g, (idx, w) in enumerate(runs) if w is not None}

        def describe(g):
            idx = runs[g][0]
            if len(idx) == 1:
                return blocks.describe(idx[0])
            unit = "chunks" if blocks.kinds[0] == "array" else "partitions"
            return f"{unit} {', '.join(map(str, idx))} of {len(blocks)}"

        for r in range(rounds):
            results = [None] * len(runs)

            def compute_block(g, place, attempt, r=r):
                # every partition of a run made (or fetched) on one worker
                chosen = []

                def same_place():
                    if not chosen:
                        chosen.append(place())
                    return chosen[0]

                futures, where = [], None
                for i in runs[g][0]:
                    part, w = submit_block(
                        c, blocks.items[i], same_place,
                        f"parallel_quantile_fit-block-{run}-{r}-{i}-{attempt}")
                    futures += part
                    where = where or w
                return futures, where

            def submit_task(g, block, workers, attempt, r=r, init=init):
                where = workers[0] if workers else None
                return c.submit(_fit_run, [blocks.describe(i) for i in runs[g][0]], taus,
                                params if r == 0 else later, init, r, min_rows,
                                y_column, on_host.get(where, 1), *block,
                                key=f"parallel_quantile_fit-{run}-{r}-{runs[g][0][0]}-{attempt}",
                                workers=workers, allow_other_workers=False, pure=False)

            def on_result(g, value):
                results[g] = value                  # d + 2 numbers per tau

            map_pinned(c, len(runs), compute_block, submit_task, on_result, window,
                       describe, f"streamfit.dask.parallel_quantile_fit, round {r + 1}",
                       timeout, resident)
            kept = [(g, res) for g, res in enumerate(results) if res[0] > 0]
            if not kept:
                raise ValueError("X has no rows")
            parts = [tuple(runs[g][0][j] for j in res[4]) for g, res in kept]
            sizes = np.array([res[0] for _, res in kept])
            coefs = np.stack([res[1] for _, res in kept])          # (S, m, d)
            intercepts = np.stack([res[2] for _, res in kept])     # (S, m)
            seconds.append([res[3] for _, res in kept])
            coef, intercept = _combine(coefs, intercepts, sizes)
            init = (coef, intercept)
            history.append((coef if many else coef[0],
                            intercept if many else float(intercept[0])))
    if not many:
        coefs, intercepts = coefs[:, 0], intercepts[:, 0]
    return ParallelQuantileFit(tau if many else taus[0], coefs, intercepts, sizes,
                               [p[0] for p in parts], seconds, history, parts)
