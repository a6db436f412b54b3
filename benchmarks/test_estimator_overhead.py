"""The estimator layer's cost over the raw kernel call, and single-row
partial_fit against river's learn_one.

- Overhead: OnlineQuantileRegressor.partial_fit (single-sample mode, default
  statistical schedule, past its warm-up) against the compiled kernel it
  calls (streamfit._kernels._quantile.sgd_single on the same state records,
  no validation, no copies), for calls of 1, 100 and 10,000 rows (d = 10).
  Reported per call: both times, the difference (the layer's overhead) and
  their ratio. Contenders alternate within each round; medians of rounds.
- Record checks: the kernels check every field of the state and parameter
  records a call is handed (a hand-edited or unpickled record is refused,
  never used as an index). Their cost per record, timed in C over the 1,000
  records of a 1,000-quantile check_records call, against a one-row
  sgd_single call (which pays it once) in the same run.
- river: a stream fed one row at a time, ours with partial_fit on (1, d)
  rows against river's LinearRegression(loss=Quantile(0.5)).learn_one on
  dicts (river's native input), both with the same constant stepsize (the
  same update, checked), and ours with its statistical schedule too.

All with one BLAS thread (the kernels call no BLAS).

    pytest benchmarks/test_estimator_overhead.py -s                  # timed
    pytest benchmarks/test_estimator_overhead.py --benchmark-disable # smoke

The table prints in the terminal summary and (timed runs) goes to
.benchmarks/estimator_overhead.txt; the ratios are also in each benchmark's
extra_info (ratio_*).
"""
from __future__ import annotations

import time

import numpy as np
import pytest

from streamfit import OnlineQuantileRegressor
from streamfit._kernels import _quantile as _k
from streamfit.schedules import ConstantSchedule
from streamfit.simulate import make_linear_stream

from ._timing import record_ratios

D = 10
RIVER_D = (10, 100)
ETA = 0.01
BLOCKS = (1, 100, 10_000)
TIMED = {"rows": 200_000, "rounds": 15, "river_rows": 5_000}
SMOKE = {"rows": 20_000, "rounds": 3, "river_rows": 500}


@pytest.fixture(scope="module")
def stream(sizes):
    X, y, beta = make_linear_stream(sizes["rows"] + 1000, D, random_state=0)
    return X, y


@pytest.fixture(scope="module")
def table():
    return {}


@pytest.fixture(scope="module", autouse=True)
def overhead_report(table, publish_table):
    yield
    if not table:
        return
    lines = [f"Estimator layer over the raw kernel: single-sample partial_fit, d = {D}, "
             "statistical schedule (medians of interleaved rounds)", "",
             f"{'rows per call':>14s}{'raw kernel us':>15s}{'partial_fit us':>16s}"
             f"{'overhead us':>13s}{'ratio':>8s}"]
    for m in BLOCKS:
        if ("overhead", m) in table:
            raw, est = table[("overhead", m)]
            lines.append(f"{m:>14,d}{raw:>15.2f}{est:>16.2f}{est - raw:>13.2f}"
                         f"{est / raw:>7.2f}x")
    if "checks" in table:
        per, row = table["checks"]
        lines += ["", f"Record checks: {per * 1e9:.0f} ns per record (state + params), a "
                  f"one-row kernel call {row * 1e9:.0f} ns: {per / row:.1%} of it"]
    rivers = [d for d in RIVER_D if ("river", d) in table]
    if rivers:
        lines += ["", "One row at a time (us per row; ours: partial_fit on a (1, d) row; river: "
                  "learn_one on a dict):",
                  f"{'d':>5s}{'ours, constant':>16s}{'ours, statistical':>19s}{'river':>9s}"
                  f"{'river / ours (constant)':>25s}"]
        for d in rivers:
            ours_c, ours_s, river = table[("river", d)]
            lines.append(f"{d:>5d}{ours_c:>16.2f}{ours_s:>19.2f}{river:>9.2f}"
                         f"{river / ours_c:>24.2f}x")
    publish_table("\n".join(lines), "estimator_overhead.txt")


def interleaved(rounds, contenders):
    """Median seconds of each contender, alternating their order every round."""
    times = {name: [] for name in contenders}
    names = list(contenders)
    for r in range(rounds):
        for name in (names if r % 2 == 0 else names[::-1]):
            start = time.perf_counter()
            contenders[name]()
            times[name].append(time.perf_counter() - start)
    return {name: float(np.median(t)) for name, t in times.items()}


@pytest.mark.parametrize("m", BLOCKS)
@pytest.mark.benchmark(group="quantile estimator overhead")
def test_partial_fit_overhead_over_the_kernel(benchmark, stream, sizes, table, m):
    X, y = stream
    est = OnlineQuantileRegressor().partial_fit(X[:1000], y[:1000])       # past the warm-up
    fit = est._fit_
    start = (fit.w.copy(), fit.wbar.copy(), fit.state.copy(), fit.window.copy())
    w, wbar, state, window = (a.copy() for a in start)
    params, empty = fit.params, np.zeros(0)
    calls = max(1, min(sizes["rows"] // m, 20_000))
    blocks = [(X[1000 + i * m:1000 + (i + 1) * m], y[1000 + i * m:1000 + (i + 1) * m])
              for i in range(calls)]

    def raw():
        for Xb, yb in blocks:
            _k.sgd_single(Xb, yb, empty, w, wbar, state, params, window, empty)

    def ours():
        for Xb, yb in blocks:
            est.partial_fit(Xb, yb)

    medians = interleaved(sizes["rounds"], {"raw": raw, "ours": ours})
    benchmark.pedantic(ours, rounds=1, iterations=1)
    table[("overhead", m)] = (medians["raw"] / calls * 1e6, medians["ours"] / calls * 1e6)
    record_ratios(benchmark, {"ratio_time_partial_fit_over_kernel":
                              medians["ours"] / medians["raw"]})
    # the same kernel on the same rows: the estimator ends where the raw calls do
    ref = OnlineQuantileRegressor().partial_fit(X[:1000], y[:1000])
    for Xb, yb in blocks:
        ref.partial_fit(Xb, yb)
    w, wbar, state, window = (a.copy() for a in start)
    raw()
    np.testing.assert_array_equal(ref._fit_.w, w)
    assert ref._fit_.state.tobytes() == state.tobytes()


@pytest.mark.benchmark(group="record checks")
def test_record_checks_cost(benchmark, stream, sizes, table):
    X, y = stream
    est = OnlineQuantileRegressor().partial_fit(X[:1000], y[:1000])       # past the warm-up
    fit = est._fit_
    m = 1000
    states = np.repeat(fit.state, m)
    params = np.repeat(fit.params, m)
    w, wbar, state, window = fit.w.copy(), fit.wbar.copy(), fit.state.copy(), fit.window.copy()
    empty = np.zeros(0)
    rows = [(X[1000 + i:1001 + i], y[1000 + i:1001 + i]) for i in range(1000)]

    def checks():
        _k.check_records(states, params)

    def one_row():
        for Xr, yr in rows:
            _k.sgd_single(Xr, yr, empty, w, wbar, state, params[:1], window, empty)

    medians = interleaved(sizes["rounds"], {"checks": checks, "one_row": one_row})
    benchmark.pedantic(checks, rounds=1, iterations=1)
    per, row = medians["checks"] / m, medians["one_row"] / len(rows)
    table["checks"] = (per, row)
    record_ratios(benchmark, {"ratio_time_record_check_over_one_row_call": per / row})
    # a field out of range is refused, naming it
    bad = states.copy()
    bad["fill"][7] = -1
    with pytest.raises(ValueError, match=r"states\[7\] record: field 'fill'"):
        _k.check_records(bad, params)


@pytest.mark.parametrize("d", RIVER_D)
@pytest.mark.benchmark(group="quantile one row at a time")
def test_single_row_partial_fit_against_river(benchmark, sizes, table, d):
    pytest.importorskip("river", reason="river is not installed (pip install river): "
                        "river baseline skipped")
    from river import linear_model, optim

    n = sizes["river_rows"]
    X, y, _ = make_linear_stream(n, d, random_state=1)
    rows = [(X[i:i + 1], y[i:i + 1]) for i in range(n)]
    dicts = [(dict(enumerate(r)), float(t)) for r, t in zip(X[:n].tolist(), y[:n])]
    models = {}

    def ours_constant():
        est = models["ours_constant"] = OnlineQuantileRegressor(schedule=ConstantSchedule(ETA))
        for Xr, yr in rows:
            est.partial_fit(Xr, yr)

    def ours_statistical():
        est = models["ours_statistical"] = OnlineQuantileRegressor()
        for Xr, yr in rows:
            est.partial_fit(Xr, yr)

    def river():
        model = models["river"] = linear_model.LinearRegression(
            optimizer=optim.SGD(ETA), loss=optim.losses.Quantile(0.5), intercept_lr=ETA)
        for x, t in dicts:
            model.learn_one(x, t)

    medians = interleaved(max(3, sizes["rounds"] // 3),
                          {"ours_constant": ours_constant, "ours_statistical": ours_statistical,
                           "river": river})
    benchmark.pedantic(ours_constant, rounds=1, iterations=1)
    table[("river", d)] = tuple(medians[k] / n * 1e6
                                for k in ("ours_constant", "ours_statistical", "river"))
    record_ratios(benchmark, {f"ratio_speedup_{k.removeprefix('ours_')}_vs_river":
                              medians["river"] / medians[k]
                              for k in ("ours_constant", "ours_statistical")})
    # the same update: the same coefficients
    ours, theirs = models["ours_constant"], models["river"]
    coef = np.array([theirs.weights.get(j, 0.0) for j in range(d)])
    np.testing.assert_allclose(np.append(ours.coef_, ours.intercept_),
                               np.append(coef, theirs.intercept), rtol=1e-10, atol=1e-12)
