"""Investigation: how far the plain online iterate sits from offline quantile
regression, as a function of Ca, against Robbins-Monro theory.

With eta_t = c / (f(0) Cl t) in the 1/t phase (the paper's (b0/Cl) Ca / t
with b0 = 1/f(0), so c = Ca), the last iterate's asymptotic covariance is
c^2 / (2c - 1) times the efficient one (c > 1/2), so its error is
sqrt(c^2 / (2c - 1)) times the offline estimator's: 3.2x at the paper's
Ca = 20. Polyak-Ruppert averaging removes the dependence on c.
"""
from __future__ import annotations

import numpy as np

from ..quantile import OnlineQuantileRegressor
from ._frisch_newton import frisch_newton
from ..schedules import StatisticalSchedule
from . import _plot
from ._qr_common import D_PAPER, noise_facts, paper_stream
from ._runner import Task
from ._stats import median
from ._types import BEYOND, Check, Experiment, Outcome


def rm_factor(c):
    """sqrt(c^2 / (2c - 1)): error of SGD with steps c / (f(0) t) over the
    efficient error, asymptotically (inf for c <= 1/2)."""
    c = np.asarray(c, float)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(c > 0.5, np.sqrt(c * c / (2 * c - 1)), np.inf)
    return float(out) if out.ndim == 0 else out


def run_efficiency(n, d, tau, snr, cas, decay, seed):
    """One replication: final errors for each Ca (oracle b0, plain and averaged),
    of the default schedule, and of offline QR on the same data."""
    X, y, beta = paper_stream(n, d, tau=tau, snr=snr, seed=seed)
    _, b0 = noise_facts(tau)
    norm = np.linalg.norm(beta)

    def err(schedule, average):
        est = OnlineQuantileRegressor(tau, fit_intercept=False, schedule=schedule,
                                      average=average).fit(X, y)
        state = getattr(est, "schedule_state_", {}) or {}
        return float(np.linalg.norm(est.coef_ - beta) / norm), float(state.get("b0", np.nan))

    out = {"plain": [], "avg": []}
    for ca in cas:
        sched = StatisticalSchedule(Ca=ca, b0=b0, decay=decay)
        out["plain"].append(err(sched, False)[0])
        out["avg"].append(err(sched, True)[0])
    out["default"], out["default_b0"] = err("statistical", False)
    out["default_avg"] = err("statistical", True)[0]
    coef = frisch_newton(X, y, tau)
    out["offline"] = float(np.linalg.norm(coef - beta) / norm)
    out["beta_norm"] = float(norm)
    return out


def _tasks(p):
    return [Task(run_efficiency, dict(n=p["n"], d=p["d"], tau=p["tau"], snr=p["snr"],
                                      cas=p["cas"], decay=p["decay"]), seed)
            for seed in range(p["reps"])]


def _analyse(p, results):
    tau, n, d = p["tau"], p["n"], p["d"]
    _, b0 = noise_facts(tau)
    cas = np.asarray(p["cas"], float)
    off = median([r["offline"] for r in results])
    plain = np.array([median([r["plain"][i] for r in results]) for i in range(len(cas))])
    avg = np.array([median([r["avg"][i] for r in results]) for i in range(len(cas))])
    norm = results[0]["beta_norm"]
    asym = np.sqrt(tau * (1 - tau) * b0 ** 2 * d / n) / norm
    default = median([r["default"] for r in results]) / off
    default_avg = median([r["default_avg"] for r in results]) / off
    c_eff = p["Ca_paper"] * median([r["default_b0"] for r in results]) / b0
    fig, (ax,) = _plot.new_figure(1, width=6.4, height=4.4)
    for j, (name, vals) in enumerate((("plain last iterate (oracle b0)", plain),
                                      ("Polyak-Ruppert average (oracle b0)", avg))):
        per = np.array([[r[("plain", "avg")[j]][i] / r["offline"] for r in results]
                        for i in range(len(cas))])
        ax.plot(cas, vals / off, "o-", color=f"C{j}", ms=4, label=name)
        if per.shape[1] > 2:
            lo, hi = np.percentile(per, [25, 75], axis=1)
            ax.fill_between(cas, lo, hi, color=f"C{j}", alpha=0.15, lw=0)
    grid = np.geomspace(0.55, cas.max() * 1.2, 200)
    ax.plot(grid, rm_factor(grid), "k--", lw=1, label="Robbins-Monro sqrt(c^2 / (2c - 1))")
    ax.axhline(1.0, color="grey", lw=0.8, label="offline (exact LP) = 1")
    ax.axhline(asym / off, color="grey", lw=0.8, ls=":",
               label="offline asymptotic sqrt(tau(1-tau) d / n) / f(0)")
    ax.plot([c_eff], [default], "s", color="C3", ms=7,
            label=f"library default (b0 estimated: c = {c_eff:.0f})")
    ax.axvline(p["Ca_paper"], color="C3", lw=0.6, ls="--")
    _plot.finish(ax, xlabel="c = Ca (step c b0 / (Cl t) in the 1/t phase)",
                 ylabel="error / offline error (medians)",
                 title=f"Efficiency of the 1/t phase: n = {n:,}, d = {d}, tau = {tau}, "
                       f"t_1.1 ({p['reps']} reps)")
    i20 = int(np.argmin(abs(cas - p["Ca_paper"])))
    theory20 = float(rm_factor(cas[i20]))
    best = int(np.argmin(plain))
    theory = rm_factor(cas)
    table = {"Ca": list(cas), "plain / offline": list(plain / off),
             "averaged / offline": list(avg / off),
             # no 1/sqrt(t) rate at all for c <= 1/2: no factor to quote
             "theory sqrt(c^2/(2c-1))": [x if np.isfinite(x) else np.nan for x in theory]}
    checks = [
        Check(f"the paper's constants (Ca = {cas[i20]:g}, b0 = 1/f(0)): plain iterate / offline "
              f"= {plain[i20] / off:.2f} -- 'only slightly better' (<= 1.5) does not follow",
              plain[i20] / off <= 1.5),
        Check(f"Robbins-Monro explains it: measured {plain[i20] / off:.2f} vs theory "
              f"{theory20:.2f} at c = {cas[i20]:g} (within 25%)",
              abs(plain[i20] / off / theory20 - 1) <= 0.25),
        Check(f"the best plain Ca is near the efficient c = 1 (best at Ca = {cas[best]:g}, "
              f"{plain[best] / off:.2f}x offline; criterion Ca in [0.7, 3], <= 1.3x)",
              0.7 <= cas[best] <= 3 and plain[best] / off <= 1.3),
        Check(f"averaging at the paper's Ca = {cas[i20]:g}: {avg[i20] / off:.2f}x offline "
              f"(<= 1.3x; plain {plain[i20] / off:.2f}x)", avg[i20] / off <= 1.3),
    ]
    ge1 = cas >= 1
    lo, hi = float(np.min(avg[ge1] / off)), float(np.max(avg[ge1] / off))
    slight = 1.5      # "only slightly better", as `qr-fig5-6` judges it
    if avg[i20] / off <= slight:
        fig6 = (f"Judged as `qr-fig5-6` judges 'only slightly better' (<= {slight:g}x), the "
                f"paper's statement about Figure 6 holds for the averaged iterate at its "
                f"Ca = {cas[i20]:g} ({avg[i20] / off:.2f}x) and not for the plain one "
                f"({plain[i20] / off:.2f}x)" + ("; by this experiment's stricter 1.3x it does "
                                                 "not." if avg[i20] / off > 1.3 else "."))
    else:
        fig6 = (f"Even averaged, the iterate at the paper's Ca = {cas[i20]:g} is "
                f"{avg[i20] / off:.2f}x offline: the paper's 'only slightly better' "
                f"(<= {slight:g}x, as `qr-fig5-6` judges it) does not follow at n = {n:,}.")
    notes = (f"**The library's default** (b0 estimated) ends at {default:.2f}x offline plain and "
             f"{default_avg:.2f}x averaged. Its b0 estimate makes the effective c = "
             f"{c_eff:.1f} rather than Ca = {p['Ca_paper']:g}. **Averaging** (average=True) "
             f"removes most of the plain iterate's dependence on Ca, not all of it: over "
             f"Ca >= 1 the averaged error is {lo:.2f}-{hi:.2f}x offline at n = {n:,} "
             f"({avg[i20] / off:.2f}x at Ca = {cas[i20]:g}, against {plain[i20] / off:.2f}x "
             "plain)" + (", and stays above the offline error here" if lo > 1.05 else "")
             + "; it avoids the short-term "
             "cost Remark 3 attaches to a small Ca (see `qr-fig2`). The plain iterate is near "
             f"efficient only near c = 1 (best {plain[best] / off:.2f}x at Ca = {cas[best]:g}), "
             "which needs an accurate b0, and Ca < 1/2 loses the 1/sqrt(t) rate altogether. "
             + fig6)
    setting = (f"n = {n:,}, d = {d}, tau = {tau}, t_1.1 noise, SNR {p['snr']:g}, beta_0 = 0, "
               f"{p['reps']} replications. Plain and averaged runs of the library's "
               f"StatisticalSchedule(Ca=c, b0=1/f(0), decay={p['decay']}) so that the 1/t "
               "phase's step is exactly c / (f(0) Cl t) (decay 0.2 so that phase one reaches "
               "the noise level, see `qr-phase-one`); errors over the offline LP's on the "
               "same data. The paper's own setting is Ca = 20 with b0 = 1/f(0) in "
               "Theorem 1's stepsize -- c = 20.")
    return Outcome(setting=setting, tables=[("Error over the offline error, medians", table)],
                   figures={"qr_efficiency": fig}, checks=checks, notes=notes)


EXPERIMENT = Experiment(
    name="qr-efficiency", paper="001", kind=BEYOND,
    title="Investigation: plain iterate vs offline, error against Ca",
    claim=("Figure 6 (n = 50,000): 'offline learning achieves only slightly better accuracy "
           "than its online counterparts', with Ca = 20, Cb = 30 and the phase-two step "
           "(b0/Cl) Ca / (t - t1 + Cb d), b0 = 1/f(0) (Theorem 1)."),
    presets={"quick": dict(n=20_000, d=D_PAPER, tau=0.5, snr=20.0, decay=0.2, Ca_paper=20.0,
                           cas=(0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0, 10.0, 20.0, 40.0), reps=2),
             "tiny": dict(n=3000, d=5, tau=0.5, snr=20.0, decay=0.2, Ca_paper=20.0,
                          cas=(1.0, 20.0), reps=1),
             "full": dict(n=50_000, d=D_PAPER, tau=0.5, snr=20.0, decay=0.2, Ca_paper=20.0,
                          cas=(0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0, 10.0, 20.0, 40.0),
                          reps=50)},
    tasks=_tasks, analyse=_analyse)
