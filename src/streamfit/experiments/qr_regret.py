"""Figure 9 / Theorem 4 of Shen, Xia & Zhou (2025): the regret of
single-sample updates grows like log T (9a: decay 0.05/d, fitted
b + A log(1 + t/a)); other stepsize schedules (9b)."""
from __future__ import annotations

import numpy as np

from ..quantile import OnlineQuantileRegressor
from ..schedules import ConstantSchedule, InverseTimeSchedule, StatisticalSchedule
from . import _plot
from ._qr_common import D_PAPER, T_PAPER, check_loss, checkpoints, paper_stream, run_path
from ._runner import Task
from ._stats import boxcox_model, check_below, check_inside, fit_boxcox_growth, \
    fit_log_growth, log_model, mean_ci
from ._types import Experiment, Outcome
from .quantile import CONSTANT_GRID, INVERSE_TIME_GRID

SCHEDULES = {
    "statistical, decay 0.05 (9a)": dict(decay=0.05),
    "statistical, decay 0.5": dict(decay=0.5),
    "statistical, decay 0.2": dict(decay=0.2),
    "statistical, decay 0.05, Ca = 5": dict(decay=0.05, Ca=5.0),
    "statistical, decay 0.05, Ca = 50": dict(decay=0.05, Ca=50.0),
    "constant (best of grid)": "constant",
    "c/(t+1) (best of grid)": "inverse_time",
}


def run_regret(n, d, snr, schedule, n_points, seed):
    """One replication: prequential regret sum_t rho(y_t - x_t'b_t) -
    rho(y_t - x_t'b*) at the checkpoints; for the comparators, of the grid
    point with the smallest regret at T on this stream (best in hindsight)."""
    X, y, beta = paper_stream(n, d, snr=snr, seed=seed)
    oracle = np.cumsum(check_loss(y - X @ beta, 0.5))
    pts = checkpoints(n, n_points)

    def path(sched, state=False):
        est = OnlineQuantileRegressor(0.5, fit_intercept=False, schedule=sched)
        return run_path(est, X, y, beta, pts, oracle_loss=oracle, state=state)

    spec = SCHEDULES[schedule]
    if isinstance(spec, dict):
        out = path(StatisticalSchedule(**spec), state=True)
        switch = [t for t, ph in zip(out["t"], out["phase"]) if ph >= 2]
        return {"t": out["t"], "regret": out["regret"], "switch": switch[0] if switch else None}
    grid = [ConstantSchedule(c) for c in CONSTANT_GRID] if spec == "constant" else \
        [InverseTimeSchedule(c) for c in INVERSE_TIME_GRID]
    runs = [path(s) for s in grid]
    best = min(runs, key=lambda r: r["regret"][-1])
    return {"t": best["t"], "regret": best["regret"], "switch": None}


def _tasks(p):
    return [Task(run_regret, dict(n=p["n"], d=p["d"], snr=p["snr"], schedule=s,
                                  n_points=p["n_points"]), seed)
            for s in p["schedules"] for seed in range(p["reps"])]


#: Box-Cox exponents within this distance of 0 count as logarithmic growth;
#: above it, faster than log (square root: 0.5)
P_BAND = 0.25
#: increment ratios (second half of log t over the first) within [1/R, R]
#: count as logarithmic growth; above R, faster
RATIO_BAND = 1.5


def growth(t, r, start):
    """How the regret path grows on t >= start: the Box-Cox exponent p of
    b + A ((t/t0)^p - 1) / p (0: logarithmic; 1/2: square root; 1: linear;
    below 0: levelling off) and the ratio of its increments over the two
    halves of [start, T] in log t (log growth: 1; t^p: (T / start)^(p/2))."""
    t, r = np.asarray(t, float), np.asarray(r, float)
    keep = t >= start
    pow_fit = fit_boxcox_growth(t[keep], r[keep])
    T = t[-1]
    mid = np.sqrt(start * T)
    at = lambda x: np.interp(np.log(x), np.log(t), r)  # noqa: E731
    inc = (at(T) - at(mid)) / max(at(mid) - at(start), 1e-12) if T / start >= 4 else np.nan
    return pow_fit, float(inc)


def _analyse(p, results):
    reps = p["reps"]
    fig, (ax_a, ax_z, ax_b) = _plot.new_figure(3, width=4.8)
    table = {k: [] for k in ("schedule", "regret at T", "switch t1", "log fit A", "a", "b",
                             "log fit R^2", "fit from t", "Box-Cox p (mean path)",
                             "p over reps", "p 95% CI +-", "second / first half increment")}
    checks, fits, p_each_of = [], {}, {}
    for i, name in enumerate(p["schedules"]):
        res = results[i * reps:(i + 1) * reps]
        t = np.asarray(res[0]["t"])
        mean = np.mean([r["regret"] for r in res], axis=0)
        sw = [r["switch"] for r in res if r["switch"] is not None]
        t1 = float(np.median(sw)) if sw else np.nan
        start = max(2 * t1, p["fit_from"]) if np.isfinite(t1) else p["fit_from"]
        # the paper's benchmark b + A log(1 + t/a), fitted where the claim is
        # about: after phase one, whose loss is a constant by Theorem 4
        keep = t >= start
        log_fit = fit_log_growth(t[keep], mean[keep])
        pow_fit, inc = growth(t, mean, start)
        # the exponent of each replication's path: its spread is the test's noise
        p_each = [growth(t, r["regret"], start)[0]["p"] for r in res]
        p_each_of[name] = p_each
        p_mean, p_half = mean_ci(p_each)
        fits[name] = (log_fit, pow_fit, inc, p_mean, p_half)
        for key, v in zip(table, (name, mean[-1], t1, log_fit["A"], log_fit["a"], log_fit["b"],
                                  log_fit["r2"], start, pow_fit["p"], p_mean, p_half, inc)):
            table[key].append(v)
        if name.endswith("(9a)"):
            ax_a.plot(t, mean, "o-", ms=3, color="C0", label=f"mean regret ({reps} reps)")
            for r in res:
                ax_a.plot(t, r["regret"], color="C0", alpha=0.2, lw=0.7)
            ax_a.plot(t[keep], log_model(t[keep], log_fit), "*:", color="C6", ms=5,
                      label=f"b + A log(1 + t/a): A = {log_fit['A']:.3g}, a = {log_fit['a']:.3g},"
                            f" b = {log_fit['b']:.3g} (R^2 {log_fit['r2']:.4f})")
            if np.isfinite(t1):
                ax_a.axvline(t1, color="grey", ls="--", lw=0.7, label=f"phase one ends ~{t1:.0f}")
            # the part the claim is about, enlarged: growth after phase one
            tk = t[keep]
            ax_z.plot(tk, mean[keep] - mean[keep][0], "o-", ms=3, color="C0",
                      label=f"mean regret - regret at t = {tk[0]:,.0f}")
            fitted = log_model(tk, log_fit)
            ax_z.plot(tk, fitted - fitted[0], "*:", color="C6", ms=5,
                      label="b + A log(1 + t/a), fitted")
            bc = boxcox_model(tk, pow_fit)
            ax_z.plot(tk, bc - bc[0], "--", color="grey", lw=1,
                      label=f"b + A ((t/t0)^p - 1)/p, fitted: p = {pow_fit['p']:.2f}")
        _plot.path_band(ax_b, t, [r["regret"] for r in res],
                        f"{name}: p = {pow_fit['p']:.2f}", color=f"C{i}", slope="none")
    _plot.finish(ax_a, xlabel="t (samples)", ylabel="regret against beta*", logy=False,
                 fontsize=6.5, title=f"Figure 9a: decay 0.05/d, Ca = 20, Cb = 30, d = {p['d']}, "
                                     f"SNR {p['snr']:g}")
    _plot.finish(ax_z, xlabel="t (samples)", ylabel="regret growth after phase one",
                 logy=False, fontsize=6.5, title="9a after phase one (log growth is a line)")
    _plot.finish(ax_b, xlabel="t (samples)", ylabel="regret against beta*", fontsize=6.5,
                 title="Figure 9b: other schedules (p: Box-Cox exponent, 0 = log)")
    log9a, pow9a, inc9a, p9a, h9a = fits[p["schedules"][0]]
    checks.append(check_below(
        p_each_of[p["schedules"][0]], P_BAND, "Theorem 4, 9a: after phase one the regret grows "
        "no faster than O(log T), Box-Cox exponent of each replication's path",
        n_of="replications", fmt="+.2f",
        requires=f"the whole 95% interval at or below {P_BAND} (0 is log, 1/2 square root)"))
    stat = [n for n in p["schedules"][1:] if n.startswith("statistical")]
    for n in stat:
        checks.append(check_below(
            p_each_of[n], P_BAND, f"Theorem 4, 9b, {n}: no faster than O(log T), Box-Cox "
            f"exponent", n_of="replications", fmt="+.2f",
            requires=f"the whole 95% interval at or below {P_BAND}"))
    checks.append(check_inside(
        p_each_of[p["schedules"][0]], -P_BAND, P_BAND, "Figure 9a: 'highly parallel growth' to "
        "b + log(1 + t/a), i.e. logarithmic, neither faster nor slower: Box-Cox exponent",
        n_of="replications", fmt="+.2f",
        requires=f"the whole 95% interval inside [-{P_BAND}, {P_BAND}] (0 is log; below, "
                 "growth levelling off faster than log)"))
    other = [n for n in p["schedules"] if not n.startswith("statistical")]
    slower = [n for n in p["schedules"] if n.startswith("statistical") and fits[n][2] < 1]
    notes = ("**How growth is tested.** On the mean regret over replications from twice the "
             "end of phase one on (and t >= the preset's fit_from), the curve "
             "b + A ((t/t0)^p - 1)/p is fitted with p free in [-2, 2]: p = 0 is exactly "
             "logarithmic, 1/2 square root, 1 linear, and p < 0 growth that levels off, slower "
             "than log (a power b + A t^p with p >= 0 would sit at its bound p = 0 for log and "
             "for anything slower alike, so it cannot test both sides). The increments over "
             "the two halves of that range in log t are compared as well (log: ratio 1; t^p: "
             "(T/start)^(p/2); below 1: slower than log). Theorem 4 is an upper bound, "
             "O(log T): the one-sided criteria test that nothing grows faster. Figure 9a's "
             "'runs parallel to b + log(1 + t/a)' is a two-sided statement: its criterion "
             "needs the exponent's confidence interval over replications inside the band and "
             "the increment ratio near 1. "
             + (f"Increment ratios below 1 ({'; '.join(slower)}) mean growth slower than log "
                "on this range: the excess loss is still settling onto its 1/t regime. "
                if slower else "")
             + "The paper's b + A log(1 + t/a) is drawn on the same range (its R^2 is in the "
             "table; it cannot tell log from a small power). Before that, phase one adds the "
             "constant that Theorem 4 bounds by C d ||beta_0 - beta*||: here most of the "
             "regret. "
             + ("The comparators show the one-sided test can fail: "
                + "; ".join(f"{n}: p = {fits[n][1]['p']:.2f}, half-range ratio {fits[n][2]:.2f}"
                            for n in other) + "." if other else ""))
    setting = (f"d = {p['d']} (the caption; the text says d = 200), T = {p['n']:,}, t_1.1 "
               f"noise, SNR {p['snr']:g}, tau = 0.5, beta_0 = 0, {reps} replications. Regret = "
               "sum over t of rho(y_t - x_t'b_t) - rho(y_t - x_t'b*) with b_t the iterate "
               "before the update (the estimator's prequential cumulative_loss_), one stream "
               "per replication, mean over replications. 9a: the library's statistical "
               "schedule with the paper's decay 0.05/d (Ca = 20, Cb = 30, other constants "
               "estimated). 9b: the figure's legend is not in the text; ours are the "
               "statistical schedule at other decays and Ca, plus a constant and a c/(t+1) "
               "stepsize (best grid point per stream) as contrasts.")
    summary = {"fig9a_boxcox_p": pow9a["p"], "fig9a_p_over_reps": p9a, "fig9a_p_ci": h9a,
               "fig9a_increment_ratio": inc9a}
    return Outcome(setting=setting, tables=[("Regret growth (mean over replications)", table)],
                   figures={"fig9_regret": fig}, checks=checks, notes=notes, summary=summary)


EXPERIMENT = Experiment(
    name="qr-fig9", paper="001",
    title="Figure 9 / Theorem 4: regret O(log T)",
    claim=("Theorem 4: regret <= C1 (Cu/Cl) sqrt(Cu) d ||beta_0 - beta*|| + C2 Ca ... d "
           "log(1 + T/...), logarithmic in T. Figure 9a: d = 100 (the text: 200), SNR 20, "
           "T = 1e5, t_1.1, eta_t = (1 - 0.05/d)^t eta_0 then Ca/(t - t1 + Cb d). In the "
           "paper's words: 'As shown in Figure 9a, the curves exhibit highly parallel growth "
           "patterns' to the benchmark b + log(1 + t/a); 'Figure 9b displays the regret values "
           "over time t under different stepsize schemes, all showing a logarithmic trend of "
           "the form b + log(1 + t/a), albeit with different parameterizations.'"),
    presets={"quick": dict(n=T_PAPER, d=D_PAPER, snr=20.0, schedules=tuple(SCHEDULES), reps=20,
                           n_points=50, fit_from=2000),
             "tiny": dict(n=4000, d=10, snr=20.0, schedules=("statistical, decay 0.05 (9a)",
                          "statistical, decay 0.5", "constant (best of grid)"), reps=6,
                          n_points=12, fit_from=200),
             "full": dict(n=T_PAPER, d=D_PAPER, snr=20.0, schedules=tuple(SCHEDULES), reps=50,
                          n_points=60, fit_from=2000)},
    tasks=_tasks, analyse=_analyse)
