"""The one quantile schedule on its three paths: what a row costs on each.

Every kernel that takes rows one at a time runs a row through the same
function (``quantile_row``, csrc/_qr_schedule.pxd): the single-quantile loop,
the multi-quantile loop (one call per quantile, the m iterates then updated
in one fused pass) and the low-rank loop. The ratios below compare paths of
one build, in one run:

1. nine quantiles (tau = 0.1, ..., 0.9) in one pass against nine
   single-quantile fits on the same rows, d = 100, statistical schedule;
   floor: one pass >= 1.8x faster. Each quantile's coef_ and intercept_
   must equal its separate fit's bit for bit.
2. the multi-quantile loop with m = 1 (``tau=[0.5]``) against the
   single-quantile loop (``tau=0.5``), d = 10 and d = 100: what the
   multi-quantile loop's bookkeeping costs for one quantile (no floor:
   ``tau=0.5`` never takes it). Bit for bit the same fit.
3. the low-rank loop (rank-one samples, d1 = d2 = 100, r = 5) with the
   statistical schedule against a constant stepsize: the schedule's share
   of a low-rank step (no floor; reported so that a schedule change that
   slows the low-rank kernel shows as a ratio).

Rows: ``make_linear_stream`` (t_1.1 noise), x ~ N(0, I_d). Contenders
alternate in a rotating order within each round; medians of rounds. BLAS on
one thread (conftest). Every contender runs on one thread, so the ratios
are of process CPU time (``time.process_time``): on a machine shared with
other jobs, wall time also counts the time the process waits for a core
(one pass against nine fits gave 1.3x to 2.0x in wall time within minutes,
1.8x to 1.9x in CPU time).

    pytest benchmarks/test_schedule_paths.py -s                          # timed
    STREAMFIT_BENCH_FLOORS=1 pytest benchmarks/test_schedule_paths.py -s # also assert the floor
    pytest benchmarks/test_schedule_paths.py --benchmark-disable -q      # smoke

The table prints in the terminal summary and (timed runs) goes to
.benchmarks/schedule_paths.txt.
"""
from __future__ import annotations

import os
import time

import numpy as np
import pytest

from streamfit import OnlineLowRankQuantileRegressor, OnlineQuantileRegressor
from streamfit.schedules import ConstantSchedule
from streamfit.simulate import make_linear_stream

from ._timing import blas_threads, interleave, record_ratios, seconds

TAUS = tuple(k / 10 for k in range(1, 10))
NINE_DIM, NINE_FLOOR = 100, 1.8        # one pass >= 1.8x faster than nine fits at d = 100
ONE_DIMS = (10, 100)
LR_DIM, LR_RANK = 100, 5
FLOORS = os.environ.get("STREAMFIT_BENCH_FLOORS") == "1"
# 60,000 rows at d = 100: past the warm-up and phase one (the statistical
# schedule's last phase starts after a few thousand rows), as a long stream is
TIMED = {"rows": 60_000, "lr_rows": 10_000, "rounds": 7}
SMOKE = {"rows": 3_000, "lr_rows": 500, "rounds": 1}


@pytest.fixture(scope="module")
def results():
    """(name, d) -> list of CPU seconds per row, one per round."""
    return {("load", "start"): os.getloadavg()}


def run_rounds(benchmark, rounds, runs, times):
    """Each of runs {name: (fn, rows)} once a round, interleaved; times[name]
    gets CPU seconds per row."""
    names = list(runs)

    def call(name, r):
        fn, n = runs[name]
        start = time.process_time()
        fn()
        times[name].append((time.process_time() - start) / n)

    interleave(benchmark, rounds, names[0], names[1:], call)
    for name in names:
        assert len(times[name]) == rounds


def test_nine_quantiles_in_one_pass(benchmark, sizes, results, timed):
    n, d = sizes["rows"], NINE_DIM
    benchmark.group = f"schedule paths: 9 quantiles, d={d} ({n} rows)"
    X, y, _ = make_linear_stream(n, d, random_state=d)
    models = {}
    runs = {"one_pass": (lambda: models.update(
                one_pass=OnlineQuantileRegressor(tau=list(TAUS)).fit(X, y)), n),
            "nine_fits": (lambda: models.update(
                nine_fits=[OnlineQuantileRegressor(tau=q).fit(X, y) for q in TAUS]), n)}
    times = {name: [] for name in runs}
    run_rounds(benchmark, sizes["rounds"], runs, times)
    # the same computation both ways, bit for bit
    for k, one in enumerate(models["nine_fits"]):
        np.testing.assert_array_equal(models["one_pass"].coef_[k], one.coef_)
        np.testing.assert_array_equal(models["one_pass"].intercept_[k], one.intercept_)
    med = {name: float(np.median(t)) for name, t in times.items()}
    results.update({(name, d): t for name, t in times.items()})
    speedup = med["nine_fits"] / med["one_pass"]
    benchmark.extra_info.update(d=d, rows=n, blas_threads=blas_threads(),
                                **{f"ns_per_row_{k}": v * 1e9 for k, v in med.items()})
    record_ratios(benchmark, {"ratio_speedup_one_pass_vs_nine_fits": speedup})
    if FLOORS and timed:
        assert speedup >= NINE_FLOOR, (f"nine quantiles in one pass only {speedup:.2f}x "
                                       f"faster than nine fits (floor {NINE_FLOOR}x)")


@pytest.mark.parametrize("d", ONE_DIMS)
def test_multi_loop_with_one_quantile(benchmark, sizes, results, d):
    n = sizes["rows"]
    benchmark.group = f"schedule paths: one quantile, d={d} ({n} rows)"
    X, y, _ = make_linear_stream(n, d, random_state=d)
    models = {}
    runs = {"single": (lambda: models.update(
                single=OnlineQuantileRegressor(tau=0.5).fit(X, y)), n),
            "multi_m1": (lambda: models.update(
                multi_m1=OnlineQuantileRegressor(tau=[0.5]).fit(X, y)), n)}
    times = {name: [] for name in runs}
    run_rounds(benchmark, sizes["rounds"], runs, times)
    np.testing.assert_array_equal(models["multi_m1"].coef_[0], models["single"].coef_)
    np.testing.assert_array_equal(models["multi_m1"].intercept_[0], models["single"].intercept_)
    results.update({(name, d): t for name, t in times.items()})
    med = {name: float(np.median(t)) for name, t in times.items()}
    benchmark.extra_info.update(d=d, rows=n, blas_threads=blas_threads(),
                                **{f"ns_per_row_{k}": v * 1e9 for k, v in med.items()})
    record_ratios(benchmark, {"ratio_time_multi_m1_vs_single": med["multi_m1"] / med["single"]})


def test_lowrank_schedule_share(benchmark, sizes, results):
    n, D, r = sizes["lr_rows"], LR_DIM, LR_RANK
    benchmark.group = f"schedule paths: low-rank, rank-one samples, d1=d2={D}, r={r} ({n} rows)"
    rng = np.random.default_rng(0)
    M = rng.standard_normal((D, r)) @ rng.standard_normal((r, D)) / D
    A, B = rng.standard_normal((n, D)), rng.standard_normal((n, D))
    y = np.einsum("ti,ij,tj->t", A, M, B) + 0.1 * rng.standard_t(1.1, n)
    models = {}

    def fit(name, **kw):
        return lambda: models.update({name: OnlineLowRankQuantileRegressor(
            r, shape=(D, D), **kw).fit((A, B), y)})

    runs = {"lr_statistical": (fit("lr_statistical"), n),
            "lr_constant": (fit("lr_constant", schedule=ConstantSchedule(1e-3)), n)}
    times = {name: [] for name in runs}
    run_rounds(benchmark, sizes["rounds"], runs, times)
    for est in models.values():
        assert np.all(np.isfinite(est.coef_)) and est.n_updates_ > 0
    results.update({(name, D): t for name, t in times.items()})
    med = {name: float(np.median(t)) for name, t in times.items()}
    benchmark.extra_info.update(d1=D, d2=D, rank=r, rows=n, blas_threads=blas_threads(),
                                **{f"ns_per_row_{k}": v * 1e9 for k, v in med.items()})
    record_ratios(benchmark, {"ratio_time_statistical_vs_constant":
                              med["lr_statistical"] / med["lr_constant"]})


@pytest.fixture(scope="module", autouse=True)
def paths_report(results, sizes, timed, publish_table):
    yield
    results[("load", "end")] = os.getloadavg()
    how = (f"CPU time, medians of {sizes['rounds']} interleaved rounds" if timed
           else "ONE run each under --benchmark-disable: indicative only")
    load = ", ".join(f"{when} {' '.join(f'{x:.1f}' for x in results['load', when])}"
                     for when in ("start", "end"))
    lines = [f"Run {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {how}, one BLAS "
             f"thread; load average (1, 5, 15 min) {load} on {os.cpu_count()} cores", "",
             f"{'path':44s}{'ns/row':>10s}{'rows/s':>14s}{'ratio':>10s}  floor"]

    def row(label, name, d, ratio=None, floor=""):
        s = seconds(results, name, d)
        if s is not None:
            lines.append(f"{label:44s}{s * 1e9:>10,.0f}{1 / s:>14,.0f}"
                         + (f"{ratio:>9.2f}x  {floor}" if ratio is not None else ""))

    def ratio_of(num, den, d):
        a, b = seconds(results, num, d), seconds(results, den, d)
        return None if a is None or b is None else a / b

    sp = ratio_of("nine_fits", "one_pass", NINE_DIM)
    row(f"9 fits, tau = 0.1..0.9, d = {NINE_DIM}", "nine_fits", NINE_DIM)
    if sp is not None:
        row(f"9 quantiles in one pass, d = {NINE_DIM} (speed-up)", "one_pass", NINE_DIM, sp,
            f">= {NINE_FLOOR}x {'met' if sp >= NINE_FLOOR else 'NOT met'}")
    for d in ONE_DIMS:
        row(f"single loop, tau = 0.5, d = {d}", "single", d)
        row(f"multi loop, tau = [0.5], d = {d} (time ratio)", "multi_m1", d,
            ratio_of("multi_m1", "single", d))
    row(f"low-rank, constant step, r = {LR_RANK}", "lr_constant", LR_DIM)
    row("low-rank, statistical schedule (time ratio)", "lr_statistical", LR_DIM,
        ratio_of("lr_statistical", "lr_constant", LR_DIM))
    lines += ["", "Every path takes a row through quantile_row (_qr_schedule.pxd); results "
              "equal bit for bit between the paths (asserted)."]
    publish_table("\n".join(lines), "schedule_paths.txt")
