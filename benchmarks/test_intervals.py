"""Calibrated prediction intervals (``OnlineIntervalRegressor``): the coverage
floors over replications, and what the calibration costs a row.

1. Floors: on the four streams of the ``qr-coverage`` experiment
   (stationary, a level shift at mid-stream, noise growing five-fold, a
   nonlinear heteroscedastic truth fitted linearly; d = 5, t_3 noise,
   alpha = 0.1), every replication's long-run (prequential) coverage after
   T = 20,000 rows must lie within 1% of 0.9, for ACI and for PID. ACI's
   bound (max(alpha, 1 - alpha) + gamma) / (gamma T) is 0.905% at this T
   for any sequence: T >= 18,100 is what the +-1% floor needs. The plain
   quantile pair (the same pair, no offset) must miss by more on the stream
   where it misses (noise growing in time: it lags). 100 replications with
   ``STREAMFIT_BENCH_FULL=1``, 20 by default, 3 under --benchmark-disable.

2. Cost: ``OnlineIntervalRegressor(method="aci" | "pid").fit`` against the
   plain two-quantile fit ``OnlineQuantileRegressor(tau=[0.05, 0.95]).fit``
   on the same rows (d = 5 and 50), ns per row and the ratio; the pair's
   coefficients must be the plain fit's bit for bit (the same kernel pass).
   Medians of interleaved rounds, BLAS on one thread (conftest).

    STREAMFIT_BENCH_FULL=1 pytest benchmarks/test_intervals.py -s
    pytest benchmarks/test_intervals.py --benchmark-disable -q           # smoke
"""
from __future__ import annotations

import os
import time

import numpy as np
import pytest

from streamfit import OnlineIntervalRegressor, OnlineQuantileRegressor
from streamfit.experiments.qr_coverage import ALPHA, STREAMS, make_coverage_stream
from streamfit.simulate import make_linear_stream

from ._timing import blas_threads, clock, interleave, record_ratios, seconds

FULL = os.environ.get("STREAMFIT_BENCH_FULL") == "1"
T = 20_000
TOLERANCE = 0.01
DIMS = (5, 50)
TIMED = {"reps": 100 if FULL else 20, "cost_rows": 200_000, "rounds": 7}
SMOKE = {"reps": 3, "cost_rows": 5_000, "rounds": 1}
CONTENDERS = {"pair": "plain pair (tau=[0.05, 0.95])", "aci": "ACI", "pid": "PID"}


@pytest.fixture(scope="module")
def results():
    return {}


@pytest.mark.parametrize("kind", STREAMS)
def test_coverage_floor(sizes, results, kind):
    reps = sizes["reps"]
    cov = {m: np.empty(reps) for m in ("aci", "pid", "plain")}
    width = {m: np.empty(reps) for m in ("aci", "pid", "plain")}
    for r in range(reps):
        X, y = make_coverage_stream(kind, T, random_state=r)
        for m in ("aci", "pid"):
            est = OnlineIntervalRegressor(alpha=ALPHA, method=m).fit(X, y)
            cov[m][r], width[m][r] = est.coverage_, est.interval_width_
        cov["plain"][r], width["plain"][r] = est.quantile_coverage_, est.quantile_width_
    results[("floor", kind)] = (cov, width)
    target = 1 - ALPHA
    for m in ("aci", "pid"):
        worst = np.abs(cov[m] - target).max()
        assert worst <= TOLERANCE, f"{m} on {kind}: a replication misses 0.9 by {worst:.4f}"
    if kind == "hetero":
        assert np.abs(cov["plain"] - target).mean() > \
            2 * max(np.abs(cov[m] - target).mean() for m in ("aci", "pid"))


@pytest.mark.parametrize("d", DIMS)
def test_interval_cost(benchmark, sizes, results, d):
    n, rounds = sizes["cost_rows"], sizes["rounds"]
    benchmark.group = f"calibrated intervals, d={d}: fit ({n} rows)"
    X, y, _ = make_linear_stream(n, d, random_state=d)
    times = {name: [] for name in CONTENDERS}
    models = {}
    makers = {"pair": lambda: OnlineQuantileRegressor(tau=[ALPHA / 2, 1 - ALPHA / 2]),
              "aci": lambda: OnlineIntervalRegressor(alpha=ALPHA),
              "pid": lambda: OnlineIntervalRegressor(alpha=ALPHA, method="pid")}

    def call(name, r):
        def run():
            models[name] = makers[name]().fit(X, y)
        clock(times[name], run, per=n)

    interleave(benchmark, rounds, "aci", ["pair", "pid"], call)
    results.update({(name, d): t for name, t in times.items()})
    for name in ("aci", "pid"):
        np.testing.assert_array_equal(models[name].coef_, models["pair"].coef_)
        np.testing.assert_array_equal(models[name].intercept_, models["pair"].intercept_)
        assert 0.8 < models[name].coverage_ < 1.0
    med = {name: seconds(results, name, d) for name in CONTENDERS}
    benchmark.extra_info.update(d=d, rows=n, rounds=rounds, blas_threads=blas_threads(),
                                **{f"ns_per_row_{k}": v * 1e9 for k, v in med.items()})
    record_ratios(benchmark, {"ratio_time_aci_vs_pair": med["aci"] / med["pair"],
                              "ratio_time_pid_vs_pair": med["pid"] / med["pair"]})


@pytest.fixture(scope="module", autouse=True)
def interval_report(results, sizes, timed, publish_table):
    yield
    lines = [f"Run {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
             + (f"medians of {sizes['rounds']} interleaved rounds" if timed
                else "ONE run each under --benchmark-disable: indicative only")
             + f", one BLAS thread, {os.cpu_count()} cores; load "
             + " ".join(f"{x:.1f}" for x in os.getloadavg())]
    kinds = [k for k in STREAMS if ("floor", k) in results]
    if kinds:
        lines += ["", f"Coverage after T = {T:,} rows, alpha = {ALPHA}, {sizes['reps']} "
                  "replications: mean (sd) [worst |gap|], mean width", ""]
        for k in kinds:
            cov, width = results["floor", k]
            cells = []
            for m in ("aci", "pid", "plain"):
                gap = np.abs(cov[m] - (1 - ALPHA)).max()
                cells.append(f"{m} {cov[m].mean():.4f} ({cov[m].std():.4f}) "
                             f"[{gap:.4f}], width {width[m].mean():.2f}")
            lines.append(f"{k:13s} " + "; ".join(cells))
    dims = [d for d in DIMS if ("aci", d) in results]
    if dims:
        lines += ["", f"ns per row, fit over {sizes['cost_rows']:,} rows (t_1.1 noise)", "",
                  f"{'':8s}" + "".join(f"{v:>32s}" for v in CONTENDERS.values())
                  + f"{'ACI / pair':>12s}{'PID / pair':>12s}"]
        for d in dims:
            ns = {k: seconds(results, k, d) * 1e9 for k in CONTENDERS}
            lines.append(f"d = {d:<4d}" + "".join(f"{ns[k]:>32,.0f}" for k in CONTENDERS)
                         + f"{ns['aci'] / ns['pair']:>11.2f}x{ns['pid'] / ns['pair']:>11.2f}x")
    if kinds or dims:
        publish_table("\n".join(lines), "intervals.txt")
