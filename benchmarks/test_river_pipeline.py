"""streamfit.river's QuantileRegressor against river's own quantile model, in
one river pipeline.

Both models sit in the same pipeline shape, ``preprocessing.StandardScaler()
| model``, and read the same stream of dict rows:

- ours: ``streamfit.river.QuantileRegressor(tau=0.5)`` (the statistical
  schedule: no learning rate to tune; the plain iterate);
- river: ``linear_model.LinearRegression(loss=optim.losses.Quantile(alpha=0.5))``
  with river's defaults (``optim.SGD(0.01)``, intercept_lr 0.01), as river's
  documentation builds a quantile regressor.

Timed per row, at d = 10 and d = 20 (rows of ``make_linear_stream``: x ~ N(0,
I_d) rescaled per feature and shifted, so that the scaler has work to do;
t_1.1 noise):

- prequential: ``predict_one(x)`` then ``learn_one(x, y)`` on every row, as
  river's ``evaluate.progressive_val_score`` runs a model;
- predict_one on held-out rows after the stream;
- learn_many on DataFrames of 500 rows (river's LinearRegression takes one
  step on the batch's mean gradient; ours one step per row, the same model as
  learn_one).

Accuracy: the held-out mean pinball loss at tau = 0.5 of each model after the
stream (learn_one and learn_many), beside the true line's and a constant
(the training median); river with a 10x larger learning rate,
``optim.SGD(0.1)``, is scored too (not timed) so that river's default rate is
not the whole story.

Rounds interleave the contenders in a rotating order; medians of rounds, of
process CPU time (every contender runs on one thread; on a shared machine
wall time also counts the waits for a core). BLAS on one thread (conftest).
The asserts: the models learn from learn_one (beat the constant), and ours
ends within 10% of the true line's pinball loss (it needs no tuning to get
there), from learn_one and from learn_many. No
speed floor: per row, ours pays the estimator layer's Python (a
``partial_fit`` of one row, about 7 us) which river's update does not; the
table shows the ratio.

    pytest benchmarks/test_river_pipeline.py -s                      # timed
    pytest benchmarks/test_river_pipeline.py --benchmark-disable -q  # smoke

The table prints in the terminal summary and (timed runs) goes to
.benchmarks/river_pipeline.txt.
"""
from __future__ import annotations

import time

import numpy as np
import pytest
from sklearn.metrics import mean_pinball_loss

from streamfit.simulate import make_linear_stream

from ._timing import blas_threads, interleave, record_ratios, seconds

DIMS = (10, 20)
TAU = 0.5
BATCH = 500
TIMED = {"rows": 20_000, "held_out": 2_000, "rounds": 5}
SMOKE = {"rows": 3_000, "held_out": 300, "rounds": 1}
CONTENDERS = ("ours", "river")
PHASES = {"preq": "prequential (predict_one + learn_one)", "predict": "predict_one",
          "many": f"learn_many ({BATCH} rows)"}


@pytest.fixture(scope="module")
def results():
    """(phase_name, d) -> list of seconds per row, one per round; ("accuracy", d) -> dict."""
    return {}


def pipeline(which, lr=None):
    from river import linear_model, optim, preprocessing

    from streamfit.river import QuantileRegressor

    if which == "ours":
        model = QuantileRegressor(tau=TAU)
    else:
        kwargs = {} if lr is None else {"optimizer": optim.SGD(lr)}
        model = linear_model.LinearRegression(loss=optim.losses.Quantile(alpha=TAU), **kwargs)
    return preprocessing.StandardScaler() | model


def cpu(times, fn, per):
    start = time.process_time()
    fn()
    times.append((time.process_time() - start) / per)


@pytest.mark.parametrize("d", DIMS)
def test_river_pipeline(benchmark, sizes, results, timed, d):
    pytest.importorskip("river", reason="river is not installed (pip install river): "
                        "river baseline skipped")
    pd = pytest.importorskip("pandas")
    n, n_held = sizes["rows"], sizes["held_out"]
    rounds = sizes["rounds"] if timed else 1
    benchmark.group = f"river pipeline, d={d}: ours prequential ({n} rows)"
    Z, y, beta = make_linear_stream(n + n_held, d, tau=TAU, random_state=d)
    X = Z * np.linspace(0.5, 5.0, d) + 2.0    # what the scaler is there for
    dicts = [{f"x{j:02d}": v for j, v in enumerate(row)} for row in X.tolist()]
    train, held = dicts[:n], dicts[n:]
    targets = y[:n].tolist()
    frame = pd.DataFrame(train)
    batches = [(frame.iloc[a:a + BATCH], pd.Series(y[a:a + BATCH])) for a in range(0, n, BATCH)]
    times = {(phase, who): [] for phase in PHASES for who in CONTENDERS}
    preds = {}

    def run(who):
        def go():
            model = pipeline(who)

            def preq():
                for x, t in zip(train, targets):
                    model.predict_one(x)
                    model.learn_one(x, t)

            def predict():
                preds[who, "one"] = [model.predict_one(x) for x in held]

            batch_model = pipeline(who)

            def many():
                for Xb, yb in batches:
                    batch_model.learn_many(Xb, yb)

            cpu(times["preq", who], preq, n)
            cpu(times["predict", who], predict, n_held)
            cpu(times["many", who], many, n)
            preds[who, "many"] = batch_model.predict_many(pd.DataFrame(held)).to_numpy()
        return go

    runs = {who: run(who) for who in CONTENDERS}
    interleave(benchmark, rounds, "ours", ["river"], lambda who, r: runs[who]())
    for key, t in times.items():
        assert len(t) == rounds, key
        results[key[0] + "_" + key[1], d] = t

    y_held = y[n:]

    def pinball(q):
        return float(mean_pinball_loss(y_held, q, alpha=TAU))

    tuned = pipeline("river", lr=0.1)
    for x, t in zip(train, targets):
        tuned.learn_one(x, t)
    acc = {"true": pinball(Z[n:] @ beta),     # the true tau-quantile line
           "constant": pinball(np.full(n_held, np.median(y[:n]))),
           "ours_one": pinball(preds["ours", "one"]), "ours_many": pinball(preds["ours", "many"]),
           "river_one": pinball(preds["river", "one"]),
           "river_many": pinball(preds["river", "many"]),
           "river_lr01": pinball([tuned.predict_one(x) for x in held])}
    results["accuracy", d] = acc
    # both learn from learn_one (river's default rate slowly: no bound on
    # how far); river's learn_many takes one step per batch, too few to ask
    # anything of it here
    for name in ("ours_one", "ours_many", "river_one", "river_lr01"):
        assert acc[name] < acc["constant"], f"{name} learnt nothing: {acc}"
    # ours needs no tuning to end near the true line, row by row or in
    # mini-batches (not the same model: river's scaler standardises a
    # mini-batch with the statistics after the whole batch, a row with
    # those after the row)
    assert acc["ours_one"] <= 1.10 * acc["true"], acc
    assert acc["ours_many"] <= 1.10 * acc["true"], acc

    med = {key: seconds(results, key, d) for key in
           [p + "_" + w for p in PHASES for w in CONTENDERS]}
    benchmark.extra_info.update(
        d=d, tau=TAU, rounds=rounds, rows=n, held_out_rows=n_held, batch=BATCH,
        blas_threads=blas_threads(), **{f"us_per_row_{k}": v * 1e6 for k, v in med.items()},
        **{f"pinball_{k}": v for k, v in acc.items()})
    record_ratios(benchmark, {
        f"ratio_speedup_{p}_vs_river": med[p + "_river"] / med[p + "_ours"] for p in PHASES})
    record_ratios(benchmark, {"ratio_error_pinball_vs_river": acc["ours_one"] / acc["river_one"]})


@pytest.fixture(scope="module", autouse=True)
def river_report(results, sizes, timed, publish_table):
    yield
    dims = [d for d in DIMS if ("accuracy", d) in results]
    if not dims:
        return
    how = (f"medians of {sizes['rounds']} interleaved rounds" if timed
           else "ONE run each under --benchmark-disable: indicative only")
    lines = [f"streamfit.river.QuantileRegressor against river's LinearRegression("
             f"loss=Quantile({TAU})), both behind preprocessing.StandardScaler() in one "
             f"pipeline; {sizes['rows']:,} rows, CPU time per row ({how})", "",
             f"{'us per row':12s}" + "".join(f"{label:>40s}" for label in PHASES.values())]
    for d in dims:
        for who in CONTENDERS:
            lines.append(f"{'d = ' + str(d) + ', ' + who:12s}" + "".join(
                f"{seconds(results, p + '_' + who, d) * 1e6:>40.2f}" for p in PHASES))
        lines.append(f"{'  river/ours':12s}" + "".join(
            f"{seconds(results, p + '_river', d) / seconds(results, p + '_ours', d):>39.2f}x"
            for p in PHASES))
    lines += ["", f"Held-out ({sizes['held_out']:,} rows) mean pinball loss at tau = {TAU}",
              f"{'':8s}{'true line':>10s}{'constant':>10s}{'ours':>8s}{'ours many':>11s}"
              f"{'river':>8s}{'river many':>12s}{'river SGD(0.1)':>16s}"]
    for d in dims:
        a = results["accuracy", d]
        lines.append(f"{'d = ' + str(d):8s}{a['true']:>10.3f}{a['constant']:>10.3f}"
                     f"{a['ours_one']:>8.3f}{a['ours_many']:>11.3f}{a['river_one']:>8.3f}"
                     f"{a['river_many']:>12.3f}{a['river_lr01']:>16.3f}")
    publish_table("\n".join(lines), "river_pipeline.txt")
