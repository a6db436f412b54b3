"""The workloads benchmarks/gate.py measures: one entry per benchmark.

Each entry is a function ``setup(n)`` decorated with :func:`workload`; it
builds its data and estimator (not measured) and returns a function of no
arguments that does ``n`` units of work (rows, trials, calls, tasks). The gate
runs that function at each of the entry's two sizes and counts the
instructions it executes; ``(count(n2) - count(n1)) / (n2 - n1)`` is the cost
of one unit, with the start-up of the call (argument checks, allocations made
once per call) cancelled. So ``setup`` must make a run of ``n`` units cost a
fixed part plus ``n`` times the unit's cost: the same number of calls at both
sizes for a block workload, ``n`` calls for a per-call workload.

``gated=False`` marks a baseline (a NumPy loop, scipy): measured and set
against the benchmark named by ``against`` in the report (ratios), never a
verdict. ``band`` is the benchmark's noise band: its spread on identical code
(max/min - 1 over 10 gate runs on the project's shared 2-core machine with
another process busy on one core), rounded up; a change within the band of
the threshold counts as reaching it.

To add a benchmark, add one decorated function; to run only some,
``gate.py record DIR --only NAME ...``. Only the public API is used (the Dask
task is the exception: it is the private per-task function itself, see
``dask_task``).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

WORKLOADS = {}

# The default noise band: the largest spread measured on identical code over
# the gated benchmarks (see the module docstring), rounded up.
BAND = 0.005


@dataclass(frozen=True)
class Workload:
    name: str
    unit: str               # what one unit of work is: "row", "trial", "call", "task"
    sizes: tuple            # (n1, n2): units of work of the two measured runs
    setup: object           # setup(n) -> run(): n units of work
    gated: bool = True
    against: str | None = None      # a baseline: the benchmark it is compared with
    band: float = BAND
    when: object = None     # when() -> False: the build lacks the API (skipped)
    doc: str = ""


def workload(name, unit, sizes, *, gated=True, against=None, band=BAND, when=None):
    """Register ``setup`` as the workload ``name``. ``when``, a function of
    no arguments called in the measuring process, returns False when the
    build under test lacks the API the workload calls: it is then skipped
    (reported as absent, not failed)."""
    def register(setup):
        if name in WORKLOADS:
            raise ValueError(f"workload {name!r} registered twice")
        if not (len(sizes) == 2 and 0 < sizes[0] < sizes[1]):
            raise ValueError(f"workload {name!r}: sizes must be (n1, n2) with 0 < n1 < n2")
        doc = (setup.__doc__ or "").strip().split("\n\n")[0]
        WORKLOADS[name] = Workload(name, unit, tuple(sizes), setup, gated, against, band,
                                   when, " ".join(doc.split()))
        return setup
    return register


def preload(names=()):
    """Imports done once in the measuring process, before the runs are
    forked from it (each run would otherwise import them again). Dask and
    distributed only for a process that measures the Dask task: under
    Valgrind their import is a large part of a process's run time."""
    import streamfit  # noqa: F401
    if any(name.startswith("dask-") for name in names):
        try:
            import streamfit.dask  # noqa: F401
        except ImportError:        # no Dask: the dask-task workload is absent
            pass


def _importable(module):
    import importlib.util
    return importlib.util.find_spec(module) is not None


# -- data (made once per process, never measured) ------------------------------

_CACHE = {}


def linear_stream(n, d, seed=0):
    """(X, y) of streamfit.simulate.make_linear_stream, n rows of d features."""
    key = ("linear", n, d, seed)
    if key not in _CACHE:
        from streamfit.simulate import make_linear_stream
        X, y, _ = make_linear_stream(n, d, random_state=seed)
        _CACHE[key] = (X, y)
    return _CACHE[key]


def spiked_stream(n, dim, seed=0):
    key = ("spiked", n, dim, seed)
    if key not in _CACHE:
        from streamfit.simulate import make_spiked_stream
        _CACHE[key] = make_spiked_stream(n, dim, n_spikes=5, random_state=seed)
    return _CACHE[key]


# -- the quantile row loop ---------------------------------------------------------

def _rows(d, average, longest):
    def setup(n):
        from streamfit import OnlineQuantileRegressor
        # both sizes fit the first n rows of one stream: the larger fit is the
        # smaller one plus rows, so the difference counts rows only
        X, y = linear_stream(longest, d)
        X, y = X[:n], y[:n]

        def run():
            # one fit over the block: the statistical schedule's 50-row
            # warm-up and the call's checks are in both sizes and cancel
            OnlineQuantileRegressor(0.5, average=average, random_state=0).fit(X, y)
        return run
    return setup


# The averaged workloads must average between their two sizes: the average
# starts at the last phase's first plateau, after ~250 rows at d = 10 but
# ~5,400 at d = 100 on this stream (at 1,000 and 3,000 rows the d = 100
# average had not started, so the gate did not see averaging at d = 100).
_SIZES = {(10, False): (1_000, 3_000), (10, True): (1_000, 3_000),
          (100, False): (1_000, 3_000), (100, True): (8_000, 12_000)}
for _d in (10, 100):
    for _average in (False, True):
        _sizes = _SIZES[_d, _average]
        _name = f"quantile-rows-d{_d}" + ("-averaged" if _average else "")
        _setup = _rows(_d, _average, max(_sizes))
        _setup.__doc__ = (f"OnlineQuantileRegressor(0.5{', average=True' if _average else ''})"
                          f".fit over a block: single mode, statistical schedule, d = {_d}; "
                          f"instructions per row.")
        workload(_name, "row", _sizes)(_setup)


@workload("numpy-loop-rows-d10", "row", (200, 600), gated=False,
          against="quantile-rows-d10")
def numpy_rows(n):
    """Baseline: the same single-sample update (constant step) as a NumPy loop
    over the rows, d = 10."""
    X, y = linear_stream(n, 10)

    def run():
        w, b, eta, tau = np.zeros(X.shape[1]), 0.0, 1e-3, 0.5
        for x_i, y_i in zip(X, y.tolist()):
            g = (1.0 if y_i <= x_i @ w + b else 0.0) - tau
            w -= (eta * g) * x_i
            b -= eta * g
    return run


# -- FPL's trial ---------------------------------------------------------------------

FPL_N, FPL_K = 150, 5


@workload("fpl-trial", "trial", (10, 20))
def fpl_trial(n):
    """PerturbedLeaderPCA(5).partial_fit over a block of trials, n = 150, past
    its first decision; one thread (BLAS and OpenMP); instructions per trial."""
    from streamfit import PerturbedLeaderPCA
    X = spiked_stream(4 + n, FPL_N)
    est = PerturbedLeaderPCA(FPL_K, random_state=0).partial_fit(X[:4])
    block = X[4:]

    def run():
        est.partial_fit(block)
    return run


@workload("scipy-eigh-top-k", "solve", (1, 3), gated=False, against="fpl-trial")
def eigh_top_k(n):
    """Baseline: scipy's top-5 eigh (subset_by_index) of a 150 x 150 matrix,
    a trial's decision made from scratch."""
    import scipy.linalg
    X = spiked_stream(50, FPL_N)
    S = X.T @ X

    def run():
        for _ in range(n):
            scipy.linalg.eigh(S, subset_by_index=[FPL_N - FPL_K, FPL_N - 1], driver="evr")
    return run


# -- one row at a time -------------------------------------------------------------------

def _fitted_regressor(d):
    from streamfit import OnlineQuantileRegressor
    X, y = linear_stream(200, d, seed=1)
    # past the schedule's warm-up
    return OnlineQuantileRegressor(0.5, random_state=0).fit(X, y)


@workload("one-row-partial-fit", "row", (100, 300))
def one_row_partial_fit(n):
    """OnlineQuantileRegressor.partial_fit(X[i:i+1], y[i:i+1]), one call per row,
    d = 10: the one-row path as a scikit-learn user calls it."""
    est = _fitted_regressor(10)
    X, y = linear_stream(n, 10, seed=2)

    def run():
        for i in range(n):
            est.partial_fit(X[i:i + 1], y[i:i + 1])
    return run


# The same two paths through the compiled state object the estimators
# drive, called directly as a library with its own loop does: a slowdown
# of the estimator layer leaves these unchanged, one of the state object
# moves both.
@workload("kernel-learn-d10", "row", (1_000, 3_000))
def kernel_learn(n):
    """streamfit.kernels.LinearSGD(10, tau=0.5).learn over a block (single
    mode, statistical schedule), instructions per row."""
    from streamfit.kernels import LinearSGD
    X, y = linear_stream(n, 10)

    def run():
        LinearSGD(10, tau=0.5).learn(X, y)
    return run


@workload("kernel-learn-one-d10", "row", (100, 300))
def kernel_learn_one(n):
    """streamfit.kernels.LinearSGD.learn_one(x, y), one call per row, d = 10,
    past the schedule's warm-up."""
    from streamfit.kernels import LinearSGD
    X0, y0 = linear_stream(200, 10, seed=1)
    model = LinearSGD(10, tau=0.5)
    model.learn(X0, y0)
    return _learn_one_rows(model, n)


def _learn_one_rows(model, n):
    """run(): model.learn_one(x, y) over n rows of d = 10 (x a 1-D array),
    one call per row."""
    X, y = linear_stream(n, 10, seed=2)
    rows, targets = list(X), y.tolist()

    def run():
        for x, t in zip(rows, targets):
            model.learn_one(x, t)
    return run


def _has(name):
    from streamfit import OnlineQuantileRegressor
    return hasattr(OnlineQuantileRegressor, name)


# The event API (learn_one/predict_one, river's names) of this round's
# rewrite: measured once the build has it.
@workload("one-row-learn-one", "row", (100, 300), when=lambda: _has("learn_one"))
def one_row_learn_one(n):
    """OnlineQuantileRegressor.learn_one(x, y), one call per row (x a 1-D array),
    d = 10."""
    return _learn_one_rows(_fitted_regressor(10), n)


@workload("one-row-predict-one", "row", (100, 300), when=lambda: _has("predict_one"))
def one_row_predict_one(n):
    """OnlineQuantileRegressor.predict_one(x), one call per row, d = 10."""
    est = _fitted_regressor(10)
    X, _ = linear_stream(n, 10, seed=2)
    rows = list(X)

    def run():
        for x in rows:
            est.predict_one(x)
    return run


# -- the estimator's Python wrapper ---------------------------------------------------------

BLOCK = 16


@workload("wrapper-partial-fit", "call", (50, 150))
def wrapper_partial_fit(n):
    """OnlineQuantileRegressor.partial_fit on blocks of 16 rows, d = 10: the
    per-call cost of the estimator layer (checks, conversion, the kernel
    call), instructions per call."""
    est = _fitted_regressor(10)
    X, y = linear_stream(n * BLOCK, 10, seed=3)

    def run():
        for i in range(0, n * BLOCK, BLOCK):
            est.partial_fit(X[i:i + BLOCK], y[i:i + BLOCK])
    return run


@workload("wrapper-predict", "call", (50, 150))
def wrapper_predict(n):
    """OnlineQuantileRegressor.predict on blocks of 16 rows, d = 10,
    instructions per call."""
    est = _fitted_regressor(10)
    X, _ = linear_stream(n * BLOCK, 10, seed=3)

    def run():
        for i in range(0, n * BLOCK, BLOCK):
            est.predict(X[i:i + BLOCK])
    return run


# -- a Dask task ---------------------------------------------------------------------------------

def _has_dask_task():
    if not _importable("distributed"):
        return False
    from streamfit.dask import _stream
    return hasattr(_stream, "_fit_blocks")


@workload("dask-task", "task", (10, 20), when=_has_dask_task)
def dask_task(n):
    """The task streamfit.dask.stream_fit runs on a worker for each chunk
    (streamfit.dask._stream._fit_blocks: unpickle the estimator, limit BLAS
    and OpenMP threads, partial_fit, pickle it again), run in this process on
    chunks of 64 rows, d = 10, no cluster; instructions per task. The
    function is private: if the rewrite renames it, this entry follows."""
    import pickle

    from streamfit.dask import _stream

    state = pickle.dumps(_fitted_regressor(10), protocol=pickle.HIGHEST_PROTOCOL)
    X, y = linear_stream(n * 64, 10, seed=4)
    chunks = [(X[i:i + 64], y[i:i + 64]) for i in range(0, n * 64, 64)]

    def run():
        s = state
        for i, (Xc, yc) in enumerate(chunks):
            s = _stream._fit_blocks(s, [f"chunk {i}"], "partial_fit", None, 1, Xc, yc)
    return run
