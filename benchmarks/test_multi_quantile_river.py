"""Nine quantiles in one pass against river's nine quantile pipelines.

m = 9 quantiles, tau = 0.1, 0.2, ..., 0.9, at d = 10 and d = 100, learnt from
one stream with the same constant stepsize ETA for every contender:

- ours, ``OnlineQuantileRegressor(tau=[0.1, ..., 0.9],
  schedule=ConstantSchedule(ETA))``, fed two ways: one ``partial_fit`` call
  per (1, d) row (a stream that arrives row by row, the estimator layer paid
  on every row), and one ``fit`` over the whole stream (the compiled loop
  over rows; the same coefficients, checked);
- river as its users build quantile bands: one pipeline per quantile,
  ``preprocessing.StandardScaler() | linear_model.LinearRegression(
  optimizer=optim.SGD(ETA), intercept_lr=ETA, loss=optim.losses.Quantile(q))``,
  each row a dict (river's native input) given to the nine ``learn_one``;
- river's nine bare ``LinearRegression`` models (no scaler): the same update
  as ours, so their coefficients must equal ours (checked to 1e-10), which
  shows the speed comparison is between equal computations.

River learns one row at a time only, and is timed on fewer rows (river_rows)
than ours (ours_rows); everything is compared per row (river's cost per row
does not grow with the row count). Contenders alternate in a rotating order
within each round; medians of rounds. BLAS on one thread (conftest; the
kernels call no BLAS here).

Accuracy, so that the speed is not bought with a worse fit, or lost to a
better one: every model trained on the same river_rows rows is scored on
held-out rows by the mean pinball loss over the nine taus (with the true
quantile lines' loss as the floor, and ours with its default statistical
schedule for reference), and by the crossing rate: the fraction of held-out
rows at which some quantile line lies above the next one. Ours' ``predict``
rearranges (sorts) the m predictions of a row, so it never crosses (asserted);
its raw lines are river's bare lines.

Rows: ``make_linear_stream(noise="gaussian")``, x ~ N(0, I_d), homoscedastic,
so the true quantile lines are parallel, ||beta|| = 16 (Gaussian noise keeps
the held-out pinball loss from being dominated by a few t_1.1 outliers).

    pytest benchmarks/test_multi_quantile_river.py -s                      # timed
    pytest benchmarks/test_multi_quantile_river.py --benchmark-disable -q  # smoke

The table prints in the terminal summary and (timed runs) goes to
.benchmarks/multi_quantile_river.txt.
"""
from __future__ import annotations

import numpy as np
import pytest
from scipy import stats
from sklearn.metrics import mean_pinball_loss

from streamfit import OnlineQuantileRegressor
from streamfit.schedules import ConstantSchedule
from streamfit.simulate import make_linear_stream

from ._timing import blas_threads, clock, interleave, record_ratios, seconds

TAUS = tuple(k / 10 for k in range(1, 10))
DIMS = (10, 100)
# Large enough that a constant step gets near the quantile lines in the
# river_rows rows river is trained on (held-out pinball within 1.5-2x of the
# true lines' at 2,000 rows), small enough to stay stable at d = 100.
ETA = 0.03
TIMED = {"ours_rows": 20_000, "river_rows": 2_000, "held_out": 2_000, "rounds": 7}
SMOKE = {"ours_rows": 1_000, "river_rows": 200, "held_out": 200, "rounds": 1}
CONTENDERS = {"ours_rows": "ours, partial_fit per row", "ours_fit": "ours, one fit",
              "river_pipelines": "river, 9 pipelines", "river_bare": "river, 9 bare models"}
RTOL_SAME = 1e-10       # same update in float64: only summation order differs


@pytest.fixture(scope="module")
def results():
    """(name, d) -> list of seconds per row, one per round; ("accuracy", d) -> dict."""
    return {}


def river_models(scaled):
    """Nine river quantile models, one per tau, as river's users build them."""
    from river import linear_model, optim, preprocessing

    def one(q):
        model = linear_model.LinearRegression(optimizer=optim.SGD(ETA), intercept_lr=ETA,
                                              loss=optim.losses.Quantile(alpha=q))
        return preprocessing.StandardScaler() | model if scaled else model

    return [one(q) for q in TAUS]


def ours(**kwargs):
    kwargs.setdefault("schedule", ConstantSchedule(ETA))
    return OnlineQuantileRegressor(tau=list(TAUS), **kwargs)


def river_predict(models, dicts):
    return np.array([[m.predict_one(x) for m in models] for x in dicts])


def pinball(y, Q):
    """Mean over the taus of the mean pinball loss of column k at TAUS[k]."""
    return float(np.mean([mean_pinball_loss(y, Q[:, k], alpha=t) for k, t in enumerate(TAUS)]))


def crossing_rate(Q):
    """Fraction of rows whose m predicted quantiles are not in increasing order."""
    return float(np.mean(np.any(np.diff(Q, axis=1) < 0, axis=1)))


@pytest.mark.parametrize("d", DIMS)
def test_nine_quantiles_against_river(benchmark, sizes, results, timed, d):
    pytest.importorskip("river", reason="river is not installed (pip install river): "
                        "river baseline skipped")
    n_ours, n_river, n_held = sizes["ours_rows"], sizes["river_rows"], sizes["held_out"]
    rounds = sizes["rounds"] if timed else 1
    benchmark.group = f"9 quantiles, d={d}: ours partial_fit per row ({n_ours} rows)"
    X, y, beta = make_linear_stream(n_ours + n_held, d, noise="gaussian", random_state=d)
    X_held, y_held = X[n_ours:], y[n_ours:]
    X, y = X[:n_ours], y[:n_ours]
    rows = [(X[i:i + 1], y[i:i + 1]) for i in range(n_ours)]
    dicts = [dict(enumerate(r)) for r in X[:n_river].tolist()]
    targets = y[:n_river].tolist()
    times = {name: [] for name in CONTENDERS}
    models = {}

    def ours_rows():
        est = models["ours_rows"] = ours()
        for Xr, yr in rows:
            est.partial_fit(Xr, yr)

    def ours_fit():
        models["ours_fit"] = ours().fit(X, y)

    def river(name, scaled):
        def run():
            nine = models[name] = river_models(scaled)
            for x, t in zip(dicts, targets):
                for m in nine:
                    m.learn_one(x, t)
        return run

    runs = {"ours_rows": (ours_rows, n_ours), "ours_fit": (ours_fit, n_ours),
            "river_pipelines": (river("river_pipelines", True), n_river),
            "river_bare": (river("river_bare", False), n_river)}

    def call(name, r):
        fn, n = runs[name]
        clock(times[name], fn, per=n)

    interleave(benchmark, rounds, "ours_rows", ["ours_fit", "river_pipelines", "river_bare"],
               call)
    for name in CONTENDERS:
        assert len(times[name]) == rounds
    results.update({(name, d): t for name, t in times.items()})

    # one partial_fit per row and one fit: the same steps, the same coefficients
    np.testing.assert_array_equal(models["ours_rows"].coef_, models["ours_fit"].coef_)
    np.testing.assert_array_equal(models["ours_rows"].intercept_, models["ours_fit"].intercept_)

    # river's bare models take ours' update: trained on the same rows, the same lines
    prefix = ours().fit(X[:n_river], y[:n_river])
    bare = models["river_bare"]
    coef = np.array([[m.weights.get(j, 0.0) for j in range(d)] for m in bare])
    np.testing.assert_allclose(np.column_stack([prefix.coef_, prefix.intercept_]),
                               np.column_stack([coef, [m.intercept for m in bare]]),
                               rtol=RTOL_SAME, atol=1e-12)

    # accuracy on held-out rows, every model trained on the same n_river rows
    held_dicts = [dict(enumerate(r)) for r in X_held.tolist()]
    Q_pipes = river_predict(models["river_pipelines"], held_dicts)
    Q_bare = river_predict(bare, held_dicts)
    Q_ours = prefix.predict(X_held)
    Q_raw = X_held @ prefix.coef_.T + prefix.intercept_          # ours' lines, unsorted
    Q_stat = ours(schedule="statistical").fit(X[:n_river], y[:n_river]).predict(X_held)
    Q_true = (X_held @ beta)[:, None] + stats.norm.ppf(TAUS)[None, :]
    np.testing.assert_allclose(Q_raw, Q_bare, rtol=1e-9, atol=1e-9)
    # rearrangement: ours' predictions never cross, and sorting cannot raise
    # the check loss summed over the taus, at any row (sum_k rho_tau_k(y - q_k)
    # = sum_k tau_k (y - q_k) + sum_k (q_k - y)_+, and sum_k tau_k q_k is
    # largest with q sorted like tau; Chernozhukov et al. 2010)
    assert crossing_rate(Q_ours) == 0.0
    assert np.all(np.diff(Q_ours, axis=1) >= 0)
    assert pinball(y_held, Q_ours) <= pinball(y_held, Q_raw) * (1 + 1e-12)
    accuracy = {"pinball_true": pinball(y_held, Q_true), "pinball_ours": pinball(y_held, Q_ours),
                "pinball_river_bare": pinball(y_held, Q_bare),
                "pinball_river_pipelines": pinball(y_held, Q_pipes),
                "pinball_ours_statistical": pinball(y_held, Q_stat),
                "crossing_ours": crossing_rate(Q_ours), "crossing_ours_raw": crossing_rate(Q_raw),
                "crossing_river_bare": crossing_rate(Q_bare),
                "crossing_river_pipelines": crossing_rate(Q_pipes)}
    results[("accuracy", d)] = accuracy

    med = {name: seconds(results, name, d) for name in CONTENDERS}
    benchmark.extra_info.update(
        d=d, taus=list(TAUS), eta=ETA, rounds=rounds, ours_rows=n_ours, river_rows=n_river,
        held_out_rows=n_held, blas_threads=blas_threads(),
        **{f"us_per_row_{name}": med[name] * 1e6 for name in CONTENDERS},
        **accuracy)
    record_ratios(benchmark, {
        "ratio_speedup_rows_vs_river_pipelines": med["river_pipelines"] / med["ours_rows"],
        "ratio_speedup_fit_vs_river_pipelines": med["river_pipelines"] / med["ours_fit"],
        "ratio_speedup_rows_vs_river_bare": med["river_bare"] / med["ours_rows"],
        "ratio_speedup_fit_vs_river_bare": med["river_bare"] / med["ours_fit"]})


@pytest.fixture(scope="module", autouse=True)
def river_report(results, sizes, timed, publish_table):
    yield
    dims = [d for d in DIMS if ("ours_rows", d) in results]
    if not dims:
        return
    how = (f"medians of {sizes['rounds']} interleaved rounds" if timed
           else "ONE run each under --benchmark-disable: indicative only")
    us = {(name, d): seconds(results, name, d) * 1e6 for name in CONTENDERS for d in dims}
    lines = [f"Nine quantiles (tau = 0.1, ..., 0.9) learnt in one pass against river's nine "
             f"quantile models: constant steps eta = {ETA}, one BLAS thread ({how}); ours "
             f"on {sizes['ours_rows']:,} rows, river on {sizes['river_rows']:,}", "",
             "us per row" + "".join(f"{label:>27s}" for label in CONTENDERS.values())]
    for d in dims:
        lines.append(f"{'d = ' + str(d):10s}" +
                     "".join(f"{us[name, d]:>27.2f}" for name in CONTENDERS))
    lines += ["", "river / ours (higher: ours faster)"
              f"{'pipelines / partial_fit':>26s}{'pipelines / fit':>17s}"
              f"{'bare / partial_fit':>20s}{'bare / fit':>12s}"]
    for d in dims:
        cells = [us[river, d] / us[mine, d] for river in ("river_pipelines", "river_bare")
                 for mine in ("ours_rows", "ours_fit")]
        lines.append(f"{'d = ' + str(d):34s}{cells[0]:>25.1f}x{cells[1]:>16.0f}x"
                     f"{cells[2]:>19.1f}x{cells[3]:>11.0f}x")
    lines += ["", f"Held-out ({sizes['held_out']:,} rows) after {sizes['river_rows']:,} "
              "training rows: mean pinball loss over the 9 taus, and the share of rows at "
              "which some quantile line crosses the next",
              f"{'':10s}{'true lines':>11s}{'ours':>8s}{'river bare':>12s}"
              f"{'river pipelines':>17s}{'ours statistical':>18s}"
              f"{'| crossing: ours':>17s}{'ours raw lines':>16s}{'river bare':>12s}"
              f"{'river pipelines':>17s}"]
    for d in dims:
        a = results.get(("accuracy", d))
        if a is None:
            continue
        lines.append(f"{'d = ' + str(d):10s}{a['pinball_true']:>11.3f}{a['pinball_ours']:>8.3f}"
                     f"{a['pinball_river_bare']:>12.3f}{a['pinball_river_pipelines']:>17.3f}"
                     f"{a['pinball_ours_statistical']:>18.3f}"
                     f"{a['crossing_ours']:>16.1%} {a['crossing_ours_raw']:>15.1%}"
                     f"{a['crossing_river_bare']:>12.1%}{a['crossing_river_pipelines']:>17.1%}")
    lines += ["", "ours' raw lines are river bare's (the same update); ours' predict sorts "
              "each row's quantiles (rearrangement), which never raises the pinball loss"]
    publish_table("\n".join(lines), "multi_quantile_river.txt")
