"""Beyond the paper: nine quantiles from one pass, drawn as a fan
chart over a 1-D feature, and the random-scaling confidence intervals of the
averaged median fit shrinking as the stream grows.

The stream is heteroscedastic and the linear quantile model holds for every
tau: x ~ U[0, 1], y = a + b x + (c + g x) xi with xi ~ N(0, 1), so the
tau-quantile of y given x is (a + c z_tau) + (b + g z_tau) x, z_tau the
normal tau-quantile; the lines fan out with x and the median's are (a, b).

References
----------
.. [1] Y. Shen, D. Xia and W.-X. Zhou, "Online Quantile Regression", Journal
   of Machine Learning Research 26 (2025).
.. [2] S. Lee, Y. Liao, M. H. Seo and Y. Shin, "Fast and Robust Online
   Inference with Stochastic Gradient Descent via Random Scaling", AAAI 2022.
"""
from __future__ import annotations

import numpy as np

from ..quantile import OnlineQuantileRegressor
from . import _plot
from ._qr_common import checkpoints
from ._runner import Task
from ._stats import loglog_slope
from ._types import BEYOND, Check, Experiment, Outcome

TAUS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
#: y = A + B x + (C + G x) xi
A, B, C, G = 1.0, 2.0, 0.2, 1.0
BLOCK = 1_000        # rows per partial_fit call: a stream arriving in blocks
ALPHA = 0.05


def fan_stream(n, seed):
    """(X, y) of the heteroscedastic stream: X of shape (n, 1) on [0, 1]."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(0.0, 1.0, n)
    return x[:, None], A + B * x + (C + G * x) * rng.standard_normal(n)


def true_quantiles(x, taus=TAUS):
    """The conditional tau-quantiles of the stream at ``x``: shape (len(x), len(taus))."""
    from scipy.stats import norm

    z = norm.ppf(np.asarray(taus, float))
    x = np.asarray(x, float)[:, None]
    return A + C * z + (B + G * z) * x


def run_fan(n, n_test, n_grid, n_scatter, seed):
    """One pass of ``OnlineQuantileRegressor(tau=TAUS)`` over n rows in blocks;
    its predicted quantile lines on a grid of x, the unsorted lines' crossing
    rate there, the fraction of held-out rows below each predicted line, and
    a subsample of the stream for the scatter."""
    X, y = fan_stream(n + n_test, seed)
    Xtr, ytr, Xte, yte = X[:n], y[:n], X[n:], y[n:]
    est = OnlineQuantileRegressor(tau=list(TAUS))
    for start in range(0, n, BLOCK):
        est.partial_fit(Xtr[start:start + BLOCK], ytr[start:start + BLOCK])
    grid = np.linspace(0.0, 1.0, n_grid)
    lines = est.predict(grid[:, None])
    raw = grid[:, None] @ est.coef_.T + est.intercept_      # before the rearrangement
    below = (yte[:, None] <= est.predict(Xte)).mean(axis=0)
    pick = np.random.default_rng(seed + 1).choice(n, size=min(n_scatter, n), replace=False)
    return {"grid": grid, "lines": lines, "raw_crossing": float(
        (np.diff(raw, axis=1) < 0).any(axis=1).mean()), "below": below,
        "coef": est.coef_.ravel().copy(), "intercept": np.asarray(est.intercept_).copy(),
        "scatter_x": Xtr[pick, 0], "scatter_y": ytr[pick]}


def run_intervals(n, start, n_points, seed):
    """One stream fed to ``OnlineQuantileRegressor(average=True,
    inference=True)`` (tau = 0.5) in blocks; ``conf_int(0.05)`` of the slope
    and the intercept read at roughly log-spaced checkpoints (NaN where the
    average does not hold two iterates yet)."""
    X, y = fan_stream(n, seed)
    est = OnlineQuantileRegressor(average=True, inference=True)
    cps = checkpoints(n, n_points, start)
    done, ci = 0, []
    for cp in cps:
        for s in range(done, cp, BLOCK):
            est.partial_fit(X[s:min(s + BLOCK, cp)], y[s:min(s + BLOCK, cp)])
        done = cp
        try:
            ci.append(est.conf_int(ALPHA))
        except ValueError:
            # the average starts once the schedule settles in its last phase
            # (after 500-900 rows here); until then there is no interval
            ci.append(np.full((2, 2), np.nan))
    ci = np.asarray(ci)                                     # (checkpoints, 2, 2)
    return {"n": cps, "slope": ci[:, 0, :], "intercept": ci[:, 1, :]}


def _tasks(p):
    return ([Task(run_fan, dict(n=p["n_fan"], n_test=p["n_test"], n_grid=p["n_grid"],
                                n_scatter=p["n_scatter"]), p["seed"])]
            + [Task(run_intervals, dict(n=p["n_ci"], start=p["ci_start"],
                                        n_points=p["ci_points"]), p["seed"] + r)
               for r in range(p["reps"])])


def _coverage_band(reps):
    """Coverage a correct 95% interval reaches over ``reps`` replications with
    probability ~0.997: 0.95 -+ 3 binomial standard deviations."""
    sd = np.sqrt(0.95 * 0.05 / reps)
    return 0.95 - 3 * sd, min(1.0, 0.95 + 3 * sd)


def _analyse(p, results):
    fan, paths = results[0], results[1:]
    taus = np.asarray(TAUS)
    grid, lines = fan["grid"], fan["lines"]
    truth = true_quantiles(grid)
    gaps = np.diff(lines, axis=1)
    sd_at = C + G * grid                                    # the noise's sd at each x
    line_err = float(np.max(np.abs(lines - truth) / sd_at[:, None]))
    below_err = float(np.max(np.abs(fan["below"] - taus)))
    n = np.asarray(paths[0]["n"])
    k = len(n)
    width = {name: np.array([[r[name][i, 1] - r[name][i, 0] for i in range(k)]
                             for r in paths]) for name in ("slope", "intercept")}
    truth_of = {"slope": B, "intercept": A}
    have = np.isfinite(width["slope"]).sum(axis=0)         # streams with an interval
    cover = {name: np.array([[r[name][i, 0] <= truth_of[name] <= r[name][i, 1]
                              for i in range(k)] for r in paths]).sum(axis=0)
             / np.maximum(have, 1) for name in ("slope", "intercept")}
    med_w = {name: np.array([np.median(w[np.isfinite(w)]) if w.size and np.isfinite(w).any()
                             else np.nan for w in width[name].T]) for name in width}
    # the width's decay rate over the last two decades (the first checkpoints
    # hold only a short average and are not yet in the 1/sqrt(n) regime)
    tail = n >= n[-1] / 100
    rate = {name: loglog_slope(n[tail], med_w[name][tail]) for name in width}
    lo_cov, hi_cov = _coverage_band(len(paths))

    fig = _draw(p, fan, truth, paths[0], len(paths), rate)

    checks = [
        Check(f"predict's 9 quantile lines are ordered at every one of {len(grid)} x "
              f"(smallest gap {gaps.min():.3g}; the unsorted lines cross at "
              f"{100 * fan['raw_crossing']:.1f}% of them)", bool(np.all(gaps >= 0))),
        Check(f"each line sits near its true quantile: largest error {line_err:.3f} noise sd "
              f"over the grid (<= 0.5), held-out fraction below each line within "
              f"{below_err:.3f} of its tau (<= 0.06)", line_err <= 0.5 and below_err <= 0.06),
        Check(f"the intervals shrink like 1/sqrt(n): median width's log-log slope over the "
              f"last two decades {rate['slope']:+.2f} (slope), {rate['intercept']:+.2f} "
              f"(intercept), within [-0.7, -0.3]",
              all(-0.7 <= rate[m] <= -0.3 for m in rate)),
        Check(f"95% intervals at n = {n[-1]:,} cover the truth in {100 * cover['slope'][-1]:.1f}%"
              f" (slope) and {100 * cover['intercept'][-1]:.1f}% (intercept) of {len(paths)} "
              f"streams (a correct interval: {100 * lo_cov:.1f}-{100 * hi_cov:.1f}%)",
              all(lo_cov <= cover[m][-1] <= hi_cov for m in cover)),
    ]
    table = {"n": [int(v) for v in n], "streams with an interval": [int(h) for h in have],
             "slope: median width": list(med_w["slope"]),
             "slope: coverage": list(cover["slope"]),
             "intercept: median width": list(med_w["intercept"]),
             "intercept: coverage": list(cover["intercept"]),
             f"stream {p['seed']}: slope interval": [
                 f"[{lo:.3f}, {hi:.3f}]" for lo, hi in paths[0]["slope"]]}
    t_fan = {"tau": list(taus), "true slope": list(B + G * _z(taus)),
             "fitted slope": list(fan["coef"]),
             "true intercept": list(A + C * _z(taus)),
             "fitted intercept": list(fan["intercept"]),
             "held-out fraction below": list(fan["below"])}
    setting = (f"x ~ U[0, 1], y = {A:g} + {B:g} x + ({C:g} + {G:g} x) xi, xi ~ N(0, 1): every "
               "conditional quantile is linear in x and the lines fan out with x (noise sd "
               f"{C:g} at x = 0, {C + G:g} at x = 1). Fan chart: one pass of "
               f"OnlineQuantileRegressor(tau=[0.1, ..., 0.9]) (default schedule, last iterate) "
               f"over {p['n_fan']:,} rows in blocks of {BLOCK:,}, lines from predict (sorted per "
               f"x), checked on a grid of {p['n_grid']} x and {p['n_test']:,} held-out rows. "
               f"Intervals: OnlineQuantileRegressor(average=True, inference=True) (tau = 0.5, "
               f"truth slope {B:g}, intercept {A:g}) fed with partial_fit in blocks of "
               f"{BLOCK:,}, conf_int(alpha={ALPHA}) read at {k} checkpoints from "
               f"{n[0]:,} to {n[-1]:,} rows; {len(paths)} independent streams for widths "
               f"(medians) and coverage, the figure shows stream {p['seed']}.")
    notes = ("Random-scaling intervals are valid as the average's window grows: at "
             f"n = {n[0]:,} the average holds only the iterates since the schedule's last "
             f"phase began and the intervals cover "
             f"{100 * cover['slope'][0]:.0f}% (slope) and {100 * cover['intercept'][0]:.0f}% "
             "(intercept) of the streams. The width is itself random (a random scale, not a "
             "consistent variance estimate), so one stream's interval need not shrink at "
             "every checkpoint, while the median width falls like 1/sqrt(n).")
    return Outcome(setting=setting,
                   tables=[("Fan chart: fitted lines against the truth", t_fan),
                           ("Intervals against n: median width and coverage over the "
                            "streams", table)],
                   figures={"qr_fan_chart": fig}, checks=checks, notes=notes)


def _z(taus):
    from scipy.stats import norm

    return norm.ppf(np.asarray(taus, float))


def _draw(p, fan, truth, path, reps, rate):
    from matplotlib.figure import Figure

    fig = Figure(figsize=(11.5, 5.2), layout="constrained")
    ax = fig.subplot_mosaic([["fan", "slope"], ["fan", "intercept"]],
                            width_ratios=[1.25, 1.0])
    a = ax["fan"]
    grid, lines = fan["grid"], fan["lines"]
    m = lines.shape[1]
    a.scatter(fan["scatter_x"], fan["scatter_y"], s=3, color="0.3", alpha=0.45, lw=0,
              label=f"stream ({len(fan['scatter_x']):,} of {p['n_fan']:,} rows)",
              rasterized=True, zorder=3)
    blues = ("#c6dbef", "#9ecae1", "#6baed6", "#4292c6")
    for j in range(m // 2):                    # (0.1, 0.9), (0.2, 0.8), ...: darker inside
        lo_t, hi_t = TAUS[j], TAUS[m - 1 - j]
        a.fill_between(grid, lines[:, j], lines[:, m - 1 - j], color=blues[j], alpha=0.55,
                       lw=0, label=f"{lo_t:g}-{hi_t:g} band")
    for j in range(m):
        a.plot(grid, lines[:, j], color="#08306b", lw=1.6 if j == m // 2 else 0.8)
    a.plot([], [], color="#08306b", lw=0.8, label="predicted quantiles (tau = 0.1..0.9)")
    for j in (0, m // 2, m - 1):
        a.plot(grid, truth[:, j], "--", color="C3", lw=1.0,
               label="true 0.1, 0.5, 0.9 quantiles" if j == 0 else None)
    a.set_xlim(0, 1)
    lo, hi = np.percentile(fan["scatter_y"], [0.5, 99.5])
    a.set_ylim(lo, hi)
    _plot.finish(a, xlabel="x (the feature)", ylabel="y",
                 title=f"Nine quantiles from one pass over {p['n_fan']:,} rows "
                       "(heteroscedastic stream)", logx=False, logy=False, legend=False)
    a.legend(fontsize=7.5, loc="upper left", framealpha=0.9)
    n = np.asarray(path["n"])
    for name, truth_v, color in (("slope", B, "C0"), ("intercept", A, "C2")):
        b = ax[name]
        ci = path[name]
        mid = ci.mean(axis=1)                   # the intervals are symmetric about z_k
        b.fill_between(n, ci[:, 0], ci[:, 1], color=color, alpha=0.18, lw=0)
        b.errorbar(n, mid, yerr=(ci[:, 1] - ci[:, 0]) / 2, fmt="o", ms=3, color=color,
                   capsize=2, lw=1, label=f"estimate and 95% interval, stream {p['seed']}")
        b.axhline(truth_v, color="k", lw=1, ls="--", label=f"true {name} = {truth_v:g}")
        b.plot([], [], " ", label=f"median width over {reps} streams ~ n^{rate[name]:.2f}")
        b.set_xlim(n[0] / 1.3, n[-1] * 1.3)
        with np.errstate(invalid="ignore"):
            span = np.nanmax(np.abs(ci - truth_v)) if np.isfinite(ci).any() else 1.0
        b.set_ylim(truth_v - 1.1 * span, truth_v + 1.1 * span)
        _plot.finish(b, xlabel="rows seen n (log scale)" if name == "intercept" else "",
                     ylabel=name, logy=False, legend=False,
                     title=f"{name.capitalize()} of the median fit: conf_int(alpha=0.05) "
                           "against n")
        b.legend(fontsize=7.5, loc="upper right", framealpha=0.9)
    return fig


EXPERIMENT = Experiment(
    name="qr-fan", paper="001", kind=BEYOND,
    title="Beyond the paper: nine quantiles in one pass, and online confidence intervals",
    claim=("Beyond the paper: OnlineQuantileRegressor(tau=[0.1, ..., 0.9]) fits "
           "all nine quantiles from one pass and predict never lets them cross; with "
           "average=True, inference=True, conf_int gives random-scaling intervals (Lee, Liao, "
           "Seo & Shin, AAAI 2022) that cover the truth at their nominal 95% and shrink like "
           "1/sqrt(n) as the stream grows."),
    presets={"tiny": dict(n_fan=3_000, n_test=2_000, n_grid=101, n_scatter=500, n_ci=6_000,
                          ci_start=2_000, ci_points=5, reps=3, seed=0),
             "quick": dict(n_fan=20_000, n_test=20_000, n_grid=201, n_scatter=2_500,
                           n_ci=200_000, ci_start=2_000, ci_points=12, reps=100, seed=0),
             "full": dict(n_fan=100_000, n_test=100_000, n_grid=401, n_scatter=2_500,
                          n_ci=1_000_000, ci_start=2_000, ci_points=16, reps=400, seed=0)},
    tasks=_tasks, analyse=_analyse)
