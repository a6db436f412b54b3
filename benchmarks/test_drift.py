"""Drift: ``OnlineQuantileRegressor(average=True, drift="restart")`` on
streams that change, against the same estimator with ``drift=None`` and a
fresh averaged fit on the rows after the change (the in-run baseline), and
the cost of the test: the ``drift=None`` row loop is the one without it.

Floors (d = 20, t_1.1 noise, tau = 0.5, ||beta|| = E|xi|, the streams of
:mod:`streamfit.experiments.qr_drift`):

* abrupt: every coefficient moves by +-delta ||beta|| / sqrt(d) at row 10^5
  of 3 x 10^5 (delta = 0.1, 0.3, 1; 3 seeds each): the averaged iterate's
  final relative error within 1.5x of the fresh averaged fit's in every
  stream, recovered (within 1.5x at every later checkpoint, every 2,000 rows) by
  5 x 10^4 rows after the change, no alarm before the change;
* gradual: beta turns through 1 rad at a constant speed over 3 x 10^5 rows:
  the mean error over the last 2/3 with the test at most 1/3 of drift=None's;
* stationary: no alarm on streams of 10^6 rows (``STREAMFIT_BENCH_FULL=1``:
  10^7) with t_1.1 noise at tau = 0.5 and 0.1 and Gaussian noise, and the
  fit bit-identical to drift=None's;
* cost: ns/row of the test's loop (drift="restart") over drift=None's, one
  BLAS thread (reported; the test adds one dot product a row).

    pytest benchmarks/test_drift.py -s
    STREAMFIT_BENCH_FULL=1 pytest benchmarks/test_drift.py -s     # 10^7-row streams

Under ``--benchmark-disable`` the streams shrink (the floors still assert).
"""
from __future__ import annotations

import os
import time

import numpy as np
import pytest

from streamfit import OnlineQuantileRegressor
from streamfit.experiments.qr_drift import (FLOOR, STATIONARY, recovery_rows, run_abrupt,
                                            run_gradual, run_stationary)

from ._timing import record_ratios

FULL = os.environ.get("STREAMFIT_BENCH_FULL") == "1"
DELTAS = (0.1, 0.3, 1.0)
SEEDS = (0, 1, 2)
RECOVER = 50_000            # rows after the change by which the floor holds for good


@pytest.fixture(scope="module")
def sizes(timed):
    # (rows, change, stationary rows, stationary seeds)
    if not timed:
        return 150_000, 50_000, 200_000, (0,)
    return 300_000, 100_000, 10**7 if FULL else 10**6, (0, 1, 2)


@pytest.fixture(scope="module")
def lines():
    return []


@pytest.fixture(scope="module", autouse=True)
def drift_report(lines, publish_table):
    yield
    if lines:
        publish_table("\n".join(["drift='restart' (d = 20, t_1.1, tau = 0.5)", ""] + lines),
                      "quantile_drift.txt")


@pytest.mark.benchmark(group="drift abrupt")
def test_abrupt_change(benchmark, sizes, lines):
    n, change = sizes[:2]
    res = {}
    benchmark.pedantic(lambda: res.update({(dl, s): run_abrupt(n, change, dl, s)
                                           for dl in DELTAS for s in SEEDS}),
                       rounds=1, iterations=1)
    lines.append(f"abrupt change at row {change:,} of {n:,}: final relative errors")
    lines.append(f"{'delta':>6s}{'seed':>5s}{'plain':>9s}{'avg None':>10s}{'restart':>9s}"
                 f"{'fresh':>9s}{'ratio':>7s}{'recover':>9s}  alarms after the change")
    ratios, stale, recover = [], [], []
    for (dl, s), r in res.items():
        ratio = r["restart"][-1] / r["fresh"][-1]
        rec = recovery_rows(r["t"], r["restart"], r["fresh"], change)
        ratios.append(ratio)
        stale.append(r["average"][-1] / r["fresh"][-1])
        recover.append(rec)
        lines.append(f"{dl:>6g}{s:>5d}{r['plain'][-1]:>9.4f}{r['average'][-1]:>10.4f}"
                     f"{r['restart'][-1]:>9.4f}{r['fresh'][-1]:>9.4f}{ratio:>7.2f}{rec:>9.0f}"
                     f"  {[a - change for a in r['alarms']]}")
        assert all(a >= change for a in r["alarms"]), "an alarm before the change"
    lines.append("")
    record_ratios(benchmark, {"ratio_error_restart_over_fresh_worst": max(ratios),
                              "ratio_error_none_over_fresh_median": float(np.median(stale))})
    assert max(ratios) <= FLOOR, f"restart / fresh up to {max(ratios):.2f}"
    assert np.nanmax(recover) <= RECOVER and not np.isnan(recover).any()


@pytest.mark.benchmark(group="drift gradual")
def test_gradual_drift(benchmark, sizes, lines):
    n = sizes[0]
    res = []
    benchmark.pedantic(lambda: res.extend(run_gradual(n, 1.0, s) for s in SEEDS),
                       rounds=1, iterations=1)
    mean = {k: [float(np.mean(r[k][len(r[k]) // 3:])) for r in res]
            for k in ("plain", "average", "restart")}
    lines.append(f"gradual drift, 1 rad over {n:,} rows: mean error over the last 2/3")
    for i, s in enumerate(SEEDS):
        lines.append(f"  seed {s}: plain {mean['plain'][i]:.4f}, average drift=None "
                     f"{mean['average'][i]:.4f}, drift='restart' {mean['restart'][i]:.4f} "
                     f"({len(res[i]['alarms'])} alarms)")
    lines.append("")
    worst = max(a / b for a, b in zip(mean["restart"], mean["average"]))
    record_ratios(benchmark, {"ratio_error_gradual_restart_over_none": worst})
    assert worst <= 1 / 3


@pytest.mark.benchmark(group="drift stationary")
def test_stationary_no_alarm(benchmark, sizes, lines):
    rows, seeds = sizes[2:]
    res = []
    benchmark.pedantic(lambda: res.extend((noise, tau, s, run_stationary(rows, noise, tau, s))
                                          for noise, tau in STATIONARY for s in seeds),
                       rounds=1, iterations=1)
    alarms = sum(len(r["alarms"]) for *_, r in res)
    lines.append(f"stationary: {alarms} alarms over {len(res)} streams of {rows:,} rows "
                 f"({len(res) * rows:,} rows; t_1.1 at tau 0.5 and 0.1, Gaussian at 0.5); "
                 f"{sum(r['identical'] for *_, r in res)} of {len(res)} fits bit-identical "
                 "to drift=None")
    lines.append("")
    assert alarms == 0
    assert all(r["identical"] for *_, r in res)


def _ns_per_row(X, y, **params):
    est = OnlineQuantileRegressor(**params).partial_fit(X[:2000], y[:2000])
    t0 = time.process_time()
    est.partial_fit(X[2000:], y[2000:])
    return (time.process_time() - t0) / (len(X) - 2000) * 1e9


@pytest.mark.benchmark(group="drift cost")
def test_cost_of_the_test(benchmark, timed, lines, bench_rounds):
    n, d = (200_000 if timed else 20_000), 100
    rng = np.random.default_rng(0)
    X = rng.standard_normal((n, d))
    y = X @ rng.standard_normal(d) + rng.standard_t(1.1, n)
    times = {"none": [], "restart": []}
    rounds = bench_rounds(5)

    def run():
        for _ in range(rounds):     # interleaved rounds, medians
            times["none"].append(_ns_per_row(X, y, average=True))
            times["restart"].append(_ns_per_row(X, y, average=True, drift="restart"))

    benchmark.pedantic(run, rounds=1, iterations=1)
    none, on = np.median(times["none"]), np.median(times["restart"])
    lines.append(f"cost at d = {d} (average=True, CPU time, medians of {rounds}): drift=None "
                 f"{none:.1f} ns/row, drift='restart' {on:.1f} ns/row ({on / none:.2f}x)")
    record_ratios(benchmark, {"ratio_time_restart_over_none": on / none})
    assert np.isfinite(on) and on > 0
