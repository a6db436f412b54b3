"""Sparse rows (issue 43): a CSR row costs O(its non-zeros), whatever n_features.

Workload: rows of NNZ = 20 non-zeros at columns drawn uniformly from
n_features (hashed-like), N(0, 1) values, y = x' beta + 1 + t_3 noise with
beta's first 20 columns non-zero; ``partial_fit`` on CSR blocks of 10^4
rows, mode "single", tau = 0.5, the default statistical schedule. Process
(CPU) time, medians of interleaved rounds, BLAS pinned to one thread (the
kernels call no BLAS).

Contenders, timed in the same rounds:

- ours on CSR rows at n_features = 2^10, 2^18 and 2^20: time per row must not
  grow with n_features (``ratio_time_sparse_2e20_vs_2e10``, ~1);
- ours with ``average=True`` at 2^18 (the lazy average: O(nnz) a row too);
- ours on the same values as dense rows of 20 columns (each row's non-zeros
  packed: the same arithmetic, the dense kernel's floor;
  ``ratio_time_sparse_2e18_vs_dense_d20``);
- scikit-learn's ``SGDRegressor(loss="epsilon_insensitive", epsilon=0)`` (the
  median's subgradient step, its own lazy scale) ``partial_fit`` on the same
  CSR blocks at 2^18 (``ratio_speedup_sparse_vs_sklearn``);
- ours on the same rows densified at 2^18 columns, on a few rows only (a
  dense row of 2^18 columns is 2 MB): what the sparse path saves.

``test_hashed_dict_learn_one``: ``learn_one`` on dicts of 30 features hashed
into 2^20 columns against ``learn_one`` on the same values as dense rows of 30
columns (``ratio_time_dict_learn_one_vs_dense_d30``; issue 43's floor is 1.5 us
a dict row).

    pytest benchmarks/test_sparse_throughput.py -s     # timed; prints the table
    pytest benchmarks/test_sparse_throughput.py --benchmark-disable -q   # smoke
"""
from __future__ import annotations

import time

import numpy as np
import pytest
import scipy.sparse as sp

from streamfit import OnlineQuantileRegressor

from ._timing import blas_threads, interleave, record_ratios

NNZ = 20
BLOCK = 10_000
WIDTHS = {"sparse_2e10": 2 ** 10, "sparse_2e18": 2 ** 18, "sparse_2e20": 2 ** 20}
DENSE_WIDE_ROWS = (200, 50)        # densified 2^18-column rows (timed, smoke)
ROWS = (100_000, 20_000)           # timed, smoke
ROUNDS = (7, 1)


def hashed_rows(n, d, seed):
    """n CSR rows of NNZ distinct columns in [0, d) (sorted), N(0, 1)
    values; the same values (and targets) for every d."""
    rng = np.random.default_rng(seed)
    # drawn first, so that they are the same for every d: the values, each
    # row's signal column (one of the first NNZ, beta's support) and the noise
    vals = rng.standard_normal((n, NNZ))
    first = rng.integers(0, NNZ, n)
    beta = np.linspace(-2.0, 2.0, NNZ)
    y = vals[:, 0] * beta[first] + 1.0 + rng.standard_t(3, n)
    # the row's other NNZ - 1 columns: hashed-like, uniform over the rest
    cols = np.empty((n, NNZ), dtype=np.int64)
    cols[:, 0] = first
    cols[:, 1:] = rng.integers(NNZ, d, (n, NNZ - 1))
    while True:         # rows with a repeated column drawn again
        srt = np.sort(cols, axis=1)
        bad = np.flatnonzero((srt[:, 1:] == srt[:, :-1]).any(axis=1))
        if not bad.size:
            break
        cols[bad, 1:] = rng.integers(NNZ, d, (bad.size, NNZ - 1))
    cols = np.sort(cols, axis=1).astype(np.int32)     # (the signal's column stays first)
    X = sp.csr_matrix((vals.ravel(), cols.ravel(), np.arange(0, n * NNZ + 1, NNZ)),
                      shape=(n, d))
    packed = np.ascontiguousarray(vals)      # each row's non-zeros, as 20 dense columns
    return X, np.asarray(y, dtype=np.float64), packed


@pytest.fixture(scope="module")
def table():
    out = {}
    yield out
    if out:
        print("\n" + "\n".join(out.get("lines", [])))


def test_sparse_rows_cost_nnz(benchmark, timed, table):
    n = ROWS[0] if timed else ROWS[1]
    rounds = ROUNDS[0] if timed else ROUNDS[1]
    n_wide = DENSE_WIDE_ROWS[0] if timed else DENSE_WIDE_ROWS[1]
    data = {name: hashed_rows(n, d, seed=3) for name, d in WIDTHS.items()}
    X18, y, packed = data["sparse_2e18"]
    wide = X18[:n_wide + 1].toarray()
    cpu = {name: [] for name in [*WIDTHS, "sparse_avg_2e18", "dense_d20", "sklearn_2e18",
                                 "dense_2e18"]}
    # the blocks cut beforehand; each model made and fed the first block
    # untimed (prepare): the model's O(n_features) allocation and its
    # warm-up are not a row's cost; the rest of the stream is timed
    parts = {name: [X[a:a + BLOCK] for a in range(0, n, BLOCK)]
             for name, (X, _, _) in data.items()}
    parts["dense_d20"] = [packed[a:a + BLOCK] for a in range(0, n, BLOCK)]
    ys = [y[a:a + BLOCK] for a in range(0, n, BLOCK)]
    timed_rows = n - BLOCK
    per = {name: timed_rows for name in cpu}
    per["dense_2e18"] = n_wide
    fits, live = {}, {}

    def prepare(name, r):
        from sklearn.linear_model import SGDRegressor

        if name == "sklearn_2e18":
            est = SGDRegressor(loss="epsilon_insensitive", epsilon=0.0, random_state=0)
        elif name == "sparse_avg_2e18":
            est = OnlineQuantileRegressor(0.5, average=True)
        else:
            est = OnlineQuantileRegressor(0.5)
        if name == "dense_2e18":
            est.partial_fit(wide[:1], y[:1])
        else:
            src = parts["sparse_2e18" if name in ("sklearn_2e18", "sparse_avg_2e18") else name]
            est.partial_fit(src[0], ys[0])
        live[name] = est

    def call(name, r):
        est = live.pop(name)
        if name == "dense_2e18":
            start = time.process_time()
            est.partial_fit(wide[1:], y[1:n_wide + 1])
            cpu[name].append((time.process_time() - start) / n_wide)
        else:
            src = parts["sparse_2e18" if name in ("sklearn_2e18", "sparse_avg_2e18") else name]
            start = time.process_time()
            for Xb, yb in zip(src[1:], ys[1:]):
                est.partial_fit(Xb, yb)
            cpu[name].append((time.process_time() - start) / per[name])
        fits[name] = est

    names = list(cpu)
    interleave(benchmark, rounds, "sparse_2e18", [m for m in names if m != "sparse_2e18"], call,
               prepare)

    # the sparse fits are those of the same rows dense (constant schedule:
    # the statistical schedule's d is the rows' stored non-zeros for sparse
    # rows, n_features for dense ones): checked where a dense copy fits
    Xs = data["sparse_2e10"][0]
    m = min(n, 20_000)
    small = OnlineQuantileRegressor(0.5, schedule="constant").partial_fit(Xs[:m].toarray(), y[:m])
    check = OnlineQuantileRegressor(0.5, schedule="constant").partial_fit(Xs[:m], y[:m])
    np.testing.assert_allclose(check.coef_, small.coef_, rtol=1e-12, atol=1e-12)
    # all widths fit the same signal (the first NNZ columns)
    beta = np.linspace(-2.0, 2.0, NNZ)
    for name in WIDTHS:
        err = np.linalg.norm(fits[name].coef_[:NNZ] - beta) / np.linalg.norm(beta)
        assert err < (0.35 if timed else 0.8), f"{name}: relative error {err:.3g}"

    us = {name: float(np.median(v)) * 1e6 for name, v in cpu.items()}
    ratios = {
        "ratio_time_sparse_2e20_vs_2e10": us["sparse_2e20"] / us["sparse_2e10"],
        "ratio_time_sparse_2e18_vs_dense_d20": us["sparse_2e18"] / us["dense_d20"],
        "ratio_time_sparse_avg_vs_plain_2e18": us["sparse_avg_2e18"] / us["sparse_2e18"],
        "ratio_speedup_sparse_vs_sklearn_2e18": us["sklearn_2e18"] / us["sparse_2e18"],
        "ratio_speedup_sparse_vs_dense_2e18": us["dense_2e18"] / us["sparse_2e18"],
    }
    record_ratios(benchmark, ratios)
    benchmark.extra_info.update({f"median_cpu_us_per_row_{k}": v for k, v in us.items()})
    benchmark.extra_info["blas_threads"] = blas_threads()
    lines = [f"sparse rows: {NNZ} non-zeros a row, {n} rows in CSR blocks of {BLOCK} (the "
             f"first untimed: {timed_rows} timed), tau 0.5, "
             f"statistical schedule; CPU us per row, median of {rounds} interleaved rounds; "
             f"BLAS threads {blas_threads()}"
             f"{'' if timed else ' (--benchmark-disable: indicative only)'}"]
    for name, v in us.items():
        lines.append(f"  {name:18s} {v:9.3f} us/row"
                     + (f"  ({per[name]} rows)" if per[name] != timed_rows else ""))
    for k, v in ratios.items():
        lines.append(f"  {k:40s} {v:8.2f}")
    table["lines"] = lines


DICT_FEATURES = 30
DICT_ROWS = (20_000, 2_000)        # timed, smoke


def test_hashed_dict_learn_one(benchmark, timed, table):
    """``learn_one`` on dicts of 30 features hashed into 2^20 columns (issue
    43's floor: <= 1.5 us a row), against ``learn_one`` on the same 30 values
    as a dense row of 30 columns (the same update without the dict and the
    hashing), CPU time, interleaved rounds."""
    n = DICT_ROWS[0] if timed else DICT_ROWS[1]
    rounds = ROUNDS[0] if timed else ROUNDS[1]
    rng = np.random.default_rng(4)
    names = [f"feature_{i}" for i in range(10 ** 5)]
    picks = rng.integers(0, len(names), (n, DICT_FEATURES))
    vals = rng.standard_normal((n, DICT_FEATURES))
    rows = [{names[j]: float(v) for j, v in zip(pj, pv)} for pj, pv in zip(picks, vals)]
    dense = [np.ascontiguousarray(v) for v in vals]
    y = [float(v) for v in vals[:, 0] + rng.standard_t(3, n)]
    warm = n // 10
    cpu = {"dict_2e20": [], "dense_d30": []}
    live = {}

    def prepare(name, r):
        if name == "dict_2e20":
            est = OnlineQuantileRegressor(0.5, hashing=2 ** 20)
            src = rows
        else:
            est = OnlineQuantileRegressor(0.5)
            src = dense
        for x, t in zip(src[:warm], y[:warm]):          # (allocation, warm-up: untimed)
            est.learn_one(x, t)
        live[name] = (est.learn_one, src)

    def call(name, r):
        learn, src = live.pop(name)
        start = time.process_time()
        for x, t in zip(src[warm:], y[warm:]):
            learn(x, t)
        cpu[name].append((time.process_time() - start) / (n - warm))

    interleave(benchmark, rounds, "dict_2e20", ["dense_d30"], call, prepare)
    us = {name: float(np.median(v)) * 1e6 for name, v in cpu.items()}
    ratios = {"ratio_time_dict_learn_one_vs_dense_d30": us["dict_2e20"] / us["dense_d30"]}
    record_ratios(benchmark, ratios)
    benchmark.extra_info.update({f"median_cpu_us_per_row_{k}": v for k, v in us.items()})
    benchmark.extra_info["blas_threads"] = blas_threads()
    lines = table.setdefault("lines", [])
    lines.append(f"learn_one: dicts of {DICT_FEATURES} features hashed into 2^20 columns vs "
                 f"dense rows of {DICT_FEATURES}; CPU us per row, median of {rounds} rounds"
                 f"{'' if timed else ' (--benchmark-disable: indicative only)'}")
    for name, v in us.items():
        lines.append(f"  {name:18s} {v:9.3f} us/row")
    for k, v in ratios.items():
        lines.append(f"  {k:40s} {v:8.2f}")
