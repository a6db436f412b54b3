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
from ._stats import fit_log_growth, fit_power_growth, log_model
from ._types import Check, Experiment, Outcome
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


def growth(t, r, start):
    """How the regret path grows on t >= start: a free power law b + A t^p
    (p near 0: logarithmic or slower; 1/2: square root; 1: linear) and the
    ratio of its increments over the two halves of [start, T] in log t (log
    growth: 1; t^p: (T / start)^(p/2))."""
    t, r = np.asarray(t, float), np.asarray(r, float)
    keep = t >= start
    pow_fit = fit_power_growth(t[keep], r[keep])
    T = t[-1]
    mid = np.sqrt(start * T)
    at = lambda x: np.interp(np.log(x), np.log(t), r)  # noqa: E731
    inc = (at(T) - at(mid)) / max(at(mid) - at(start), 1e-12) if T / start >= 4 else np.nan
    return pow_fit, float(inc)


def _analyse(p, results):
    reps = p["reps"]
    fig, (ax_a, ax_z, ax_b) = _plot.new_figure(3, width=4.8)
    table = {k: [] for k in ("schedule", "regret at T", "switch t1", "log fit A", "a", "b",
                             "log fit R^2", "fit from t", "power fit p",
                             "second / first half increment")}
    checks, fits = [], {}
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
        fits[name] = (log_fit, pow_fit, inc)
        for key, v in zip(table, (name, mean[-1], t1, log_fit["A"], log_fit["a"], log_fit["b"],
                                  log_fit["r2"], start, pow_fit["p"], inc)):
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
            ax_z.plot(tk, pow_fit["A"] * (tk ** pow_fit["p"] - tk[0] ** pow_fit["p"]), "--",
                      color="grey", lw=1, label=f"b + A t^p, fitted: p = {pow_fit['p']:.2f}")
        _plot.path_band(ax_b, t, [r["regret"] for r in res],
                        f"{name}: p = {pow_fit['p']:.2f}", color=f"C{i}", slope="none")
    _plot.finish(ax_a, xlabel="t (samples)", ylabel="regret against beta*", logy=False,
                 fontsize=6.5, title=f"Figure 9a: decay 0.05/d, Ca = 20, Cb = 30, d = {p['d']}, "
                                     f"SNR {p['snr']:g}")
    _plot.finish(ax_z, xlabel="t (samples)", ylabel="regret growth after phase one",
                 logy=False, fontsize=6.5, title="9a after phase one (log growth is a line)")
    _plot.finish(ax_b, xlabel="t (samples)", ylabel="regret against beta*", fontsize=6.5,
                 title="Figure 9b: other schedules (p: fitted exponent of b + A t^p)")
    log9a, pow9a, inc9a = fits[p["schedules"][0]]
    checks.append(Check(f"9a: after phase one the regret grows logarithmically, not as a "
                        f"power (power-fit exponent {pow9a['p']:.2f} <= 0.25; increment over the "
                        f"second half of log t / the first {inc9a:.2f} <= 1.5)",
                        bool(pow9a["p"] <= 0.25 and inc9a <= 1.5)))
    stat = [n for n in p["schedules"][1:] if n.startswith("statistical")]
    ps = [fits[n][1]["p"] for n in stat]
    checks.append(Check("9b: every other statistical variant grows logarithmically (power-fit "
                        f"exponents {', '.join(f'{x:.2f}' for x in ps)} <= 0.25)",
                        bool(all(x <= 0.25 for x in ps))))
    other = [n for n in p["schedules"] if not n.startswith("statistical")]
    notes = ("Logarithmic growth is tested on the mean regret over replications from twice "
             "the end of phase one on (and t >= the preset's fit_from): a free power law "
             "b + A t^p must choose an exponent near 0 (square-root growth gives p = 0.5, "
             "linear p = 1), and the increments over the two halves of that range in log t must "
             "match (log: ratio 1; t^p: (T/start)^(p/2)); a ratio below 1 is slower than log (the "
             "error is still settling onto its 1/t regime). The paper's b + A log(1 + t/a) is "
             "drawn on the same range (its R^2 is in the table; it cannot tell log from a "
             "small power, hence the two tests). Before that, phase one adds the constant "
             "that Theorem 4 bounds by C d ||beta_0 - beta*||: here most of the regret. "
             + ("The comparators show the test can fail: "
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
    return Outcome(setting=setting, tables=[("Regret growth (mean over replications)", table)],
                   figures={"fig9_regret": fig}, checks=checks, notes=notes)


EXPERIMENT = Experiment(
    name="qr-fig9", paper="001",
    title="Figure 9 / Theorem 4: logarithmic regret",
    claim=("Theorem 4: regret <= C1 (Cu/Cl) sqrt(Cu) d ||beta_0 - beta*|| + C2 Ca ... d "
           "log(1 + T/...), logarithmic in T. Figure 9a: d = 100 (the text: 200), SNR 20, "
           "T = 1e5, t_1.1, eta_t = (1 - 0.05/d)^t eta_0 then Ca/(t - t1 + Cb d): the regret "
           "runs parallel to a benchmark b + log(1 + t/a). 9b: other stepsize schemes, 'all "
           "showing a logarithmic trend ... albeit with different parameterizations'."),
    presets={"quick": dict(n=T_PAPER, d=D_PAPER, snr=20.0, schedules=tuple(SCHEDULES), reps=3,
                           n_points=50, fit_from=2000),
             "tiny": dict(n=4000, d=10, snr=20.0, schedules=("statistical, decay 0.05 (9a)",
                          "statistical, decay 0.5", "constant (best of grid)"), reps=1,
                          n_points=12, fit_from=200),
             "full": dict(n=T_PAPER, d=D_PAPER, snr=20.0, schedules=tuple(SCHEDULES), reps=50,
                          n_points=60, fit_from=2000)},
    tasks=_tasks, analyse=_analyse)
