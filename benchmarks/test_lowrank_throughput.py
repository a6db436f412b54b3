"""Per-sample cost of the online low-rank quantile regression at d1 = d2 = 100,
r = 5, one BLAS thread: dense X, rank-one X = a b^T and matrix completion,
as ratios to the vector OnlineQuantileRegressor on d = 100 rows (the in-run
baseline), interleaved, medians.

    pytest benchmarks/test_lowrank_throughput.py -s     # timed; prints the table
    pytest benchmarks --benchmark-disable -q            # smoke: one short run each

The ratios are also in the benchmark's extra_info (ratio_time_<kind>_over_vector).
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


def test_lowrank_per_sample_cost_against_the_vector_qr(benchmark, data, timed, bench_rounds):
    times = {k: [] for k in data}

    def one_round():
        for name, (X, y) in data.items():
            start = time.perf_counter()
            est = _fit(name, X, y)
            times[name].append((time.perf_counter() - start) / len(y))
            assert np.isfinite(est.coef_).all()

    benchmark.pedantic(one_round, rounds=bench_rounds(ROUNDS), iterations=1)
    med = {k: float(np.median(v)) * 1e6 for k, v in times.items()}
    print(f"\nlow-rank QR, d1 = d2 = {D}, r = {R}, 1 BLAS thread, us/sample (median of "
          f"{len(times['vector'])} interleaved rounds; ratio to the vector QR at d = {D}):")
    for name in ("dense", "rank1", "index", "vector"):
        print(f"  {name:7s} {med[name]:9.2f} us   {med[name] / med['vector']:7.1f}x")
    record_ratios(benchmark, {f"ratio_time_{name}_over_vector": med[name] / med["vector"]
                              for name in ("dense", "rank1", "index")})
    # rank-one samples cost O((d1 + d2) r^2), dense ones O(d1 d2 r): dense is dearer
    assert med["dense"] > med["rank1"]
