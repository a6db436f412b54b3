"""Per-sample cost of the online low-rank quantile regression at d1 = d2 = 100,
r = 5, one BLAS thread: dense X, rank-one X = a b^T and matrix completion,
as ratios to the vector OnlineQuantileRegressor on d = 100 rows (the in-run
baseline), interleaved, medians; each beside the floor its arithmetic
allows, measured in the same run.

    pytest benchmarks/test_lowrank_throughput.py -s     # timed; prints the table
    pytest benchmarks --benchmark-disable -q            # smoke: one short run each

The floors are the step's unavoidable products done by BLAS at its batched
speed, many samples in one call (a step cannot batch them: each sample's
factors depend on the previous step):

- dense: X_t V and X_t^T U, one pass over X_t with 2 r multiply-adds per
  entry: the stacked samples (T d1, d2) times a (d2, 2 r) matrix;
- rank one: U a and V b, the complements a - U^T (U a), and the retraction's
  two (d, r + 1) x (r + 1, r) products: stacked, (T, d) x (d, r) twice per
  side and (T d, r + 1) x (r + 1, r) per side.

The core's SVD (O(r^3), a one-sided Jacobi of a 6 x 6 or 10 x 10 matrix)
and the schedule's bookkeeping are left out of the floors. The ratios are
also in the benchmark's extra_info (ratio_time_<kind>_over_vector,
ratio_time_<kind>_over_floor, see benchmarks/compare.py).
"""
from __future__ import annotations

import time

import numpy as np
import pytest

from streamfit import OnlineLowRankQuantileRegressor, OnlineQuantileRegressor
from streamfit.schedules import ConstantSchedule

from ._timing import record_ratios

D, R = 100, 5
ROUNDS = 5


@pytest.fixture(scope="module")
def data(timed):
    n = {"dense": 2_000, "rank1": 20_000, "index": 20_000, "vector": 20_000}
    if not timed:
        n = {k: v // 20 for k, v in n.items()}
    rng = np.random.default_rng(0)
    M = rng.standard_normal((D, R)) @ rng.standard_normal((R, D)) / D
    X = rng.standard_normal((n["dense"], D, D))
    A, B = rng.standard_normal((n["rank1"], D)), rng.standard_normal((n["rank1"], D))
    idx = np.column_stack([rng.integers(0, D, n["index"]), rng.integers(0, D, n["index"])])
    Xv = rng.standard_normal((n["vector"], D))
    return {"dense": (X, np.einsum("tij,ij->t", X, M)),
            "rank1": ((A, B), np.einsum("ti,ij,tj->t", A, M, B)),
            "index": (idx, M[idx[:, 0], idx[:, 1]]),
            "vector": (Xv, Xv @ M[0])}


def _fit(name, X, y):
    # a constant step: the same work every sample (the schedule's order
    # statistics are a few percent of the step at this size)
    if name == "vector":
        return OnlineQuantileRegressor(schedule=ConstantSchedule(1e-3)).fit(X, y)
    return OnlineLowRankQuantileRegressor(R, schedule=ConstantSchedule(1e-3),
                                          shape=(D, D)).fit(X, y)


def _floor_dense(X):
    """Seconds a sample for X_t V and X_t^T U at BLAS's batched speed: the
    stacked samples times a (d2, 2r) matrix, one pass over X."""
    W = np.ones((X.shape[2], 2 * R))
    flat = X.reshape(-1, X.shape[2])
    start = time.perf_counter()
    out = flat @ W
    assert np.isfinite(out[0]).all()
    return (time.perf_counter() - start) / X.shape[0]


def _floor_rank1(A):
    """Seconds a sample for a rank-one step's products at BLAS's batched
    speed: (T, d) x (d, r) twice per side (U a, and U^T coef for the
    complement) and the retraction, (T d, r + 1) x (r + 1, r) per side."""
    n = A.shape[0]
    U = np.ones((A.shape[1], R))
    big = np.ones((n * A.shape[1], R + 1))
    core = np.ones((R + 1, R))
    start = time.perf_counter()
    for _ in range(2):                  # the two sides
        p = A @ U
        q = A @ U                       # the complement's product
        u = big @ core
    assert np.isfinite(p[0] + q[0]).all() and np.isfinite(u[0]).all()
    return (time.perf_counter() - start) / n


def test_lowrank_per_sample_cost_against_the_vector_qr(benchmark, data, timed):
    times = {k: [] for k in data}
    floors = {"dense": [], "rank1": []}

    def one_round():
        for name, (X, y) in data.items():
            start = time.perf_counter()
            est = _fit(name, X, y)
            times[name].append((time.perf_counter() - start) / len(y))
            assert np.isfinite(est.coef_).all()
        floors["dense"].append(_floor_dense(data["dense"][0]))
        floors["rank1"].append(_floor_rank1(data["rank1"][0][0]))

    benchmark.pedantic(one_round, rounds=ROUNDS if timed else 1, iterations=1)
    med = {k: float(np.median(v)) * 1e6 for k, v in times.items()}
    floor = {k: float(np.median(v)) * 1e6 for k, v in floors.items()}
    floor["index"] = floor["rank1"]
    print(f"\nlow-rank QR, d1 = d2 = {D}, r = {R}, 1 BLAS thread, us/sample (median of "
          f"{len(times['vector'])} interleaved rounds; ratio to the vector QR at d = {D}; "
          "the floor of the step's products at BLAS's batched speed):")
    for name in ("dense", "rank1", "index", "vector"):
        extra = (f"   floor {floor[name]:7.2f} us, step / floor {med[name] / floor[name]:5.1f}x"
                 if name in floor else "")
        print(f"  {name:7s} {med[name]:9.2f} us   {med[name] / med['vector']:7.1f}x{extra}")
    record_ratios(benchmark, {**{f"ratio_time_{name}_over_vector": med[name] / med["vector"]
                                 for name in ("dense", "rank1", "index")},
                              **{f"ratio_time_{name}_over_floor": med[name] / floor[name]
                                 for name in ("dense", "rank1", "index")}})
    # rank-one samples cost O((d1 + d2) r^2), dense ones O(d1 d2 r): dense is dearer
    assert med["dense"] > med["rank1"]


def test_lowrank_learn_one_against_a_block(benchmark, data, timed):
    """A Python loop of learn_one over rank-one and completion samples,
    against the same rows in one block: the one-row call's cost beyond the
    step (its conversion and the compiled call)."""
    n = 2_000 if timed else 100
    (A, B), y1 = data["rank1"]
    idx, yi = data["index"]
    rows = {"rank1": ([(A[i], B[i]) for i in range(n)], y1[:n].tolist(), (A[:n], B[:n])),
            "index": ([(int(i), int(j)) for i, j in idx[:n]], yi[:n].tolist(), idx[:n])}
    times = {(k, how): [] for k in rows for how in ("one", "block")}

    def one_round():
        for name, (xs, ys, X) in rows.items():
            est = OnlineLowRankQuantileRegressor(R, schedule=ConstantSchedule(1e-3),
                                                 shape=(D, D))
            start = time.perf_counter()
            for x, v in zip(xs, ys):
                est.learn_one(x, v)
            times[(name, "one")].append((time.perf_counter() - start) / n)
            ref = OnlineLowRankQuantileRegressor(R, schedule=ConstantSchedule(1e-3),
                                                 shape=(D, D))
            start = time.perf_counter()
            ref.fit(X, np.asarray(ys))
            times[(name, "block")].append((time.perf_counter() - start) / n)
            np.testing.assert_array_equal(est.coef_, ref.coef_)

    benchmark.pedantic(one_round, rounds=ROUNDS if timed else 1, iterations=1)
    med = {k: float(np.median(v)) * 1e6 for k, v in times.items()}
    print(f"\nlow-rank learn_one in a Python loop against one block, d1 = d2 = {D}, r = {R}, "
          "us/sample (medians):")
    for name in rows:
        print(f"  {name:7s} learn_one {med[(name, 'one')]:7.2f} us   block "
              f"{med[(name, 'block')]:7.2f} us   ratio "
              f"{med[(name, 'one')] / med[(name, 'block')]:5.2f}x")
    record_ratios(benchmark, {f"ratio_time_{name}_learn_one_over_block":
                              med[(name, "one")] / med[(name, "block")] for name in rows})
