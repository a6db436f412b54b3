"""Beyond the paper: streams that change. Polyak-Ruppert averaging keeps an
old regime for ever; ``drift="restart"`` (a sign CUSUM on the prequential
check loss, csrc/_qr_drift.pxd) restarts the average from the iterate at an
alarm.

Three streams, d = 20, t_1.1 noise, tau = 0.5, x ~ N(0, I), ||beta|| = E|xi|
(SNR 1, where a moderate change stays below the schedule's own jump rule,
which restarts phase one when the residual scale jumps 4x):

* an abrupt change: every coefficient moves by delta ||beta|| / sqrt(d)
  (random signs) at row ``change``; the averaged iterate against a fresh
  averaged fit on the rows after the change, its time to recover (rows after
  the change until its error stays within 1.5x of the fresh fit's);
* a gradual drift: beta rotates at a constant angular speed in a plane,
  through ``angle`` radians over the stream;
* stationary streams (t_1.1 and Gaussian noise): no alarm, and the fit
  bit-identical to ``drift=None``.
"""
from __future__ import annotations

import numpy as np

from ..quantile import OnlineQuantileRegressor
from ..simulate import noise_mean_abs
from . import _plot
from ._runner import Task
from ._types import BEYOND, Check, Experiment, Outcome

D = 20
DF = 1.1
#: the floor: the averaged iterate within this factor of a fresh averaged fit
FLOOR = 1.5
BLOCK = 2_000           # rows per partial_fit call (the checkpoints' spacing)
#: the stationary streams: (noise, tau)
STATIONARY = (("t", 0.5), ("t", 0.1), ("gaussian", 0.5))


def _beta(d, rng):
    u = rng.standard_normal(d)
    return noise_mean_abs("t", DF) * u / np.linalg.norm(u)


def abrupt_stream(n, d, change, delta, seed):
    """(X, y, beta1, beta2): t_1.1 noise, beta1 on rows < change, then every
    coefficient moved by +-delta ||beta1|| / sqrt(d)."""
    rng = np.random.default_rng(seed)
    b1 = _beta(d, rng)
    b2 = b1 + delta * np.linalg.norm(b1) / np.sqrt(d) * rng.choice([-1.0, 1.0], d)
    X = rng.standard_normal((n, d))
    y = np.where(np.arange(n) < change, X @ b1, X @ b2) + rng.standard_t(DF, n)
    return X, y, b1, b2


def rotating_betas(rows, n, d, angle, seed):
    """beta at each of ``rows``: ||beta|| = E|xi|, turning at a constant
    speed through ``angle`` radians over n rows, in a random plane."""
    rng = np.random.default_rng(seed)
    q, _ = np.linalg.qr(rng.standard_normal((d, 2)))
    theta = angle * np.asarray(rows, float) / n
    return noise_mean_abs("t", DF) * (np.cos(theta)[:, None] * q[:, 0]
                                      + np.sin(theta)[:, None] * q[:, 1])


def gradual_stream(n, d, angle, seed):
    rng = np.random.default_rng(seed + 10_000)
    X = rng.standard_normal((n, d))
    B = rotating_betas(np.arange(n), n, d, angle, seed)
    return X, np.einsum("ij,ij->i", X, B) + rng.standard_t(DF, n)


def _rel(coef, beta):
    return float(np.linalg.norm(coef - beta) / np.linalg.norm(beta))


def _feed(models, X, y, points):
    """Feed every model (name -> (estimator, first row)) the rows up to each
    checkpoint (a model starting at a later row skips the earlier ones);
    returns name -> list of coef_ copies (None before the model's start)."""
    out = {name: [] for name in models}
    start = 0
    for p in points:
        for name, (est, first) in models.items():
            a = max(start, first)
            if a < p:
                est.partial_fit(X[a:p], y[a:p])
            out[name].append(est.coef_.copy() if p > first else None)
        start = p
    return out


def run_abrupt(n, change, delta, seed, d=D):
    """Error paths (against the current beta) of the plain iterate, the
    average without and with the drift test, and a fresh averaged fit from
    the change on; the alarms' rows."""
    X, y, b1, b2 = abrupt_stream(n, d, change, delta, seed)
    points = list(range(BLOCK, n + 1, BLOCK))
    models = {"plain": (OnlineQuantileRegressor(), 0),
              "average": (OnlineQuantileRegressor(average=True), 0),
              "restart": (OnlineQuantileRegressor(average=True, drift="restart"), 0),
              "fresh": (OnlineQuantileRegressor(average=True), change)}
    coefs = _feed(models, X, y, points)
    truth = [b1 if p <= change else b2 for p in points]
    err = {name: [np.nan if c is None else _rel(c, b) for c, b in zip(cs, truth)]
           for name, cs in coefs.items()}
    return {"t": points, **err, "alarms": models["restart"][0].drift_restart_rows_.tolist()}


def run_gradual(n, angle, seed, d=D):
    X, y = gradual_stream(n, d, angle, seed)
    points = list(range(BLOCK, n + 1, BLOCK))
    models = {"plain": (OnlineQuantileRegressor(), 0),
              "average": (OnlineQuantileRegressor(average=True), 0),
              "restart": (OnlineQuantileRegressor(average=True, drift="restart"), 0)}
    coefs = _feed(models, X, y, points)
    # the truth at the checkpoint's last row
    B = rotating_betas(np.asarray(points) - 1, n, d, angle, seed)
    err = {name: [_rel(c, b) for c, b in zip(cs, B)] for name, cs in coefs.items()}
    return {"t": points, **err, "alarms": models["restart"][0].drift_restart_rows_.tolist()}


def run_stationary(n, noise, tau, seed, d=D, chunk=1_000_000):
    """One stationary stream of n rows (made chunk by chunk; t_1.1 or
    Gaussian noise with its tau-quantile at 0): alarms of the drift test,
    and whether its fit is bit-identical to drift=None's."""
    from scipy import stats

    rng = np.random.default_rng(seed)
    beta = _beta(d, rng)
    dist = stats.t(DF) if noise == "t" else stats.norm()
    shift = float(dist.ppf(tau))
    on = OnlineQuantileRegressor(tau, average=True, drift="restart")
    off = OnlineQuantileRegressor(tau, average=True)
    for a in range(0, n, chunk):
        m = min(chunk, n - a)
        X = rng.standard_normal((m, d))
        eps = rng.standard_t(DF, m) if noise == "t" else rng.standard_normal(m)
        y = X @ beta + eps - shift
        on.partial_fit(X, y)
        off.partial_fit(X, y)
    same = bool(np.array_equal(on.coef_, off.coef_) and on.intercept_ == off.intercept_
                and on.cumulative_loss_ == off.cumulative_loss_)
    return {"alarms": on.drift_restart_rows_.tolist(), "identical": same}


def recovery_rows(t, err, fresh, change, floor=FLOOR):
    """Rows after the change until the error stays within floor x the fresh
    fit's at every later checkpoint (NaN: never)."""
    t, err, fresh = (np.asarray(v, float) for v in (t, err, fresh))
    ok = (t > change) & (err <= floor * fresh)
    for i in range(len(t)):
        if t[i] > change and ok[i:].all():
            return float(t[i] - change)
    return float("nan")


def _tasks(p):
    tasks = [Task(run_abrupt, dict(n=p["n"], change=p["change"], delta=delta), seed)
             for delta in p["deltas"] for seed in range(p["reps"])]
    tasks += [Task(run_gradual, dict(n=p["n"], angle=p["angle"]), seed)
              for seed in range(p["reps"])]
    tasks += [Task(run_stationary, dict(n=p["n_stationary"], noise=noise, tau=tau), seed,
                   priority=1)
              for noise, tau in STATIONARY for seed in range(p["reps_stationary"])]
    return tasks


def _analyse(p, results):
    k = len(p["deltas"]) * p["reps"]
    abrupt, gradual = results[:k], results[k:k + p["reps"]]
    stationary = results[k + p["reps"]:]
    table = {key: [] for key in ("delta", "seed", "plain", "average, drift=None",
                                 "average, drift='restart'", "fresh average",
                                 "restart / fresh", "alarms (rows after the change)",
                                 "rows to recover")}
    ratios, recover, late = [], [], []
    for i, res in enumerate(abrupt):
        delta, seed = p["deltas"][i // p["reps"]], i % p["reps"]
        ratio = res["restart"][-1] / res["fresh"][-1]
        rec = recovery_rows(res["t"], res["restart"], res["fresh"], p["change"])
        ratios.append(ratio)
        recover.append(rec)
        late += [a for a in res["alarms"] if a < p["change"]]
        for key, v in zip(table, (delta, seed, res["plain"][-1], res["average"][-1],
                                  res["restart"][-1], res["fresh"][-1], ratio,
                                  ", ".join(str(a - p["change"]) for a in res["alarms"]) or "-",
                                  rec)):
            table[key].append(v)
    g = {key: np.median([r[key][-1] for r in gradual]) for key in ("plain", "average",
                                                                   "restart")}
    g_mean = {key: np.median([np.mean(r[key][len(r[key]) // 3:]) for r in gradual])
              for key in ("plain", "average", "restart")}
    n_alarms_g = [len(r["alarms"]) for r in gradual]
    t_gradual = {"": ["final error (median)", "mean error over the last 2/3 (median)"],
                 "plain iterate": [g["plain"], g_mean["plain"]],
                 "average, drift=None": [g["average"], g_mean["average"]],
                 "average, drift='restart'": [g["restart"], g_mean["restart"]]}
    false_alarms = sum(len(r["alarms"]) for r in stationary)
    identical = sum(r["identical"] for r in stationary)
    rows = len(stationary) * p["n_stationary"]
    t_stat = {"noise": [], "tau": [], "streams": [], "rows each": [], "alarms": [],
              "bit-identical to drift=None": []}
    for j, (noise, tau) in enumerate(STATIONARY):
        part = stationary[j * p["reps_stationary"]:(j + 1) * p["reps_stationary"]]
        for key, v in zip(t_stat, ("t_1.1" if noise == "t" else "Gaussian", tau, len(part),
                                   p["n_stationary"], sum(len(r["alarms"]) for r in part),
                                   f"{sum(r['identical'] for r in part)} of {len(part)}")):
            t_stat[key].append(v)
    fig = _draw(p, abrupt[0], gradual[0])
    worst = float(np.max(ratios))
    checks = [
        Check(f"abrupt change at row {p['change']:,} of {p['n']:,}: the averaged iterate with "
              f"drift='restart' ends within {FLOOR}x of a fresh averaged fit on the rows after "
              f"the change in every stream (worst {worst:.2f}x over {len(ratios)} streams, "
              f"deltas {', '.join(f'{v:g}' for v in p['deltas'])}; drift=None: median "
              f"{np.median([r['average'][-1] / r['fresh'][-1] for r in abrupt]):.0f}x)",
              worst <= FLOOR),
        Check(f"no alarm before the change in {len(abrupt)} streams ({len(late)} alarms)",
              not late),
        Check(f"gradual drift (beta turns {p['angle']:g} rad over {p['n']:,} rows) tracked: "
              f"mean error over the last 2/3 of the stream {g_mean['restart']:.3g} with "
              f"drift='restart' against {g_mean['average']:.3g} with drift=None (<= 1/3 of "
              f"it; {np.median(n_alarms_g):.0f} alarms, median)",
              g_mean["restart"] <= g_mean["average"] / 3),
        Check(f"stationary streams: {false_alarms} alarms over {len(stationary)} streams of "
              f"{p['n_stationary']:,} rows ({rows:,} rows; t_1.1 noise at tau 0.5 and 0.1, "
              f"Gaussian at 0.5), {identical} of {len(stationary)} fits bit-identical to "
              "drift=None", false_alarms == 0 and identical == len(stationary)),
    ]
    setting = (f"d = {D}, t_1.1 noise, tau = 0.5, x ~ N(0, I), ||beta|| = E|xi| (SNR 1). Abrupt: "
               f"every coefficient moves by +-delta ||beta|| / sqrt(d) at row {p['change']:,} "
               f"of {p['n']:,}, {p['reps']} streams per delta; errors against the current "
               f"beta read every {BLOCK:,} rows (partial_fit blocks). Estimators: "
               "OnlineQuantileRegressor() (plain iterate), (average=True) with drift=None and "
               "drift='restart', and a fresh (average=True) started at the change. Rows to "
               f"recover: rows after the change until the error stays within {FLOOR}x of the "
               f"fresh fit's at every later checkpoint (a {BLOCK:,}-row grid). Gradual: beta "
               f"turns at a constant speed through {p['angle']:g} rad in a random plane over "
               f"the stream ({p['reps']} streams). Stationary: {p['reps_stationary']} streams "
               f"of {p['n_stationary']:,} rows per noise and tau.")
    summary = {"worst_restart_over_fresh": worst,
               "median_restart_over_fresh": float(np.median(ratios)),
               "median_rows_to_recover": float(np.nanmedian(recover)),
               "stationary_rows": rows, "stationary_false_alarms": false_alarms}
    return Outcome(setting=setting,
                   tables=[("Abrupt change: final relative errors", table),
                           ("Gradual drift: relative errors (medians over streams)", t_gradual),
                           ("Stationary streams: alarms of the drift test", t_stat)],
                   figures={"qr_drift": fig}, checks=checks, summary=summary,
                   notes=("The test is a CUSUM of the log-likelihood ratio of P(loss above "
                          "its running median) = 2/3 against 1/2, alarm at 25 (a mean time "
                          "to a false alarm of ~1.6e12 rows on any stationary stream, "
                          "whatever the noise's tails); an alarm restarts the average from "
                          "the plain iterate once the schedule has settled again, and the "
                          "last phase's clock (larger steps: the iterate travels faster)."))


def _draw(p, res, grad):
    fig, (a, b) = _plot.new_figure(2, width=6.0, height=4.4)
    t = np.asarray(res["t"])
    for key, label, style, color in (
            ("plain", "plain iterate", ":", "0.45"),
            ("average", "averaged, drift=None", "--", "C3"),
            ("restart", "averaged, drift='restart'", "-", "C0"),
            ("fresh", "fresh averaged fit from the change", "-.", "C2")):
        a.plot(t, res[key], style, color=color, lw=1.6, label=label)
    a.axvline(p["change"], color="k", lw=1, label=f"change (row {p['change']:,})")
    for j, r in enumerate(res["alarms"]):
        a.axvline(r, color="C0", lw=0.8, ls=(0, (2, 2)),
                  label="alarm: the average restarts" if j == 0 else None)
    _plot.finish(a, xlabel="rows seen", ylabel="relative error ||b_t - b|| / ||b||",
                 title=f"Abrupt change (delta {p['deltas'][0]:g}, seed 0), d = {D}, t_1.1",
                 logx=False, fontsize=7.5)
    tg = np.asarray(grad["t"])
    for key, label, style, color in (
            ("plain", "plain iterate", ":", "0.45"),
            ("average", "averaged, drift=None", "--", "C3"),
            ("restart", "averaged, drift='restart'", "-", "C0")):
        b.plot(tg, grad[key], style, color=color, lw=1.6, label=label)
    for j, r in enumerate(grad["alarms"]):
        b.axvline(r, color="C0", lw=0.6, ls=(0, (2, 2)), alpha=0.7,
                  label="alarms" if j == 0 else None)
    _plot.finish(b, xlabel="rows seen", ylabel="relative error against the current beta",
                 title=f"Gradual drift: beta turns {p['angle']:g} rad over {p['n']:,} rows",
                 logx=False, fontsize=7.5)
    return fig


EXPERIMENT = Experiment(
    name="qr-drift", paper="001", kind=BEYOND,
    title="Beyond the paper: drift, and restarting the average at a change",
    claim=("Beyond the paper: on a stream whose coefficients change, the plain iterate "
           "follows but the Polyak-Ruppert average keeps the old regime for ever. "
           "OnlineQuantileRegressor(average=True, drift='restart') tests the prequential "
           "check loss for a change (a CUSUM on whether each row's loss is above its running "
           "median: calibrated whatever the noise's tails) and restarts the average at an "
           "alarm: after an abrupt change it ends within 1.5x of a fresh averaged fit on the "
           "rows after the change, it tracks a gradual drift, and a stationary stream raises "
           "no alarm (the fit is then bit-identical to drift=None)."),
    presets={"tiny": dict(n=60_000, change=20_000, deltas=(0.3,), reps=1, angle=1.0,
                          n_stationary=50_000, reps_stationary=1),
             "quick": dict(n=300_000, change=100_000, deltas=(0.3, 1.0), reps=2, angle=1.0,
                           n_stationary=1_000_000, reps_stationary=1),
             "full": dict(n=300_000, change=100_000, deltas=(0.1, 0.3, 1.0), reps=5,
                          angle=1.0, n_stationary=10_000_000, reps_stationary=3)},
    tasks=_tasks, analyse=_analyse)
