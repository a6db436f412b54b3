"""Investigation: why phase one of the statistical schedule stalls above the
noise level at the paper's decay (1 - 0.5/d)^t, and why the sparsity b0 it
then estimates is inflated.

The mechanism, measured here against a model: far from beta*, one
sub-gradient step on the check loss changes ||e||^2 (e = beta_t - beta*) in
expectation by -2 eta a ||e|| + eta^2 b' d, with a = E[(1{z > 0} - tau) z] /
||e|| = 1/sqrt(2 pi) for z = x'e Gaussian and b' = (tau^2 + (1 - tau)^2) / 2.
No stepsize contracts ||e|| faster than (1 - a^2 / (2 b' d)) a step, i.e.
0.318/d at the median. A geometric stepsize decaying at 0.5/d outruns the
error: phase one removes a bounded factor of it and stops moving, wherever
the noise level is. The plateau test then ends phase one, and the sparsity
is estimated from residuals xi - x'e still dominated by x'e, so b0_hat is
1/f_r(0) of that mixture (about sqrt(2 pi) ||e||) instead of 1/f(0).
"""
from __future__ import annotations

import numpy as np
from scipy import integrate, special

from ..quantile import OnlineQuantileRegressor
from ..schedules import StatisticalSchedule
from . import _plot
from ._qr_common import D_PAPER, checkpoints, noise_facts, paper_stream, run_path
from ._runner import Task
from ._stats import median
from ._types import BEYOND, Check, Experiment, Outcome

# The paper's decay 0.5/d is given explicitly: the library's default became 0.2/d
# because of this experiment.
VARIANTS = ("decay 0.5", "decay 0.5 + oracle eta0", "decay 0.5 + oracle b0", "decay 0.3",
            "decay 0.2", "decay 0.1", "decay 0.2 + oracle b0")


def _schedule(variant, beta_norm, d, b0):
    kw = {}
    for part in variant.split(" + "):
        if part.startswith("decay"):
            kw["decay"] = float(part.split()[1])
        elif part == "oracle eta0":
            # the library's rule eta0 = 2 D0 / (d Cl tau*^2) with the true D0 = ||beta*||
            kw["eta0"] = 2.0 * beta_norm / d
        elif part == "oracle b0":
            kw["b0"] = b0
    return StatisticalSchedule(**kw)


def run_phase_one(n, d, snr, variant, n_points, seed):
    """One replication: error and schedule state along the stream."""
    X, y, beta = paper_stream(n, d, snr=snr, seed=seed)
    _, b0 = noise_facts(0.5)
    est = OnlineQuantileRegressor(0.5, fit_intercept=False,
                                  schedule=_schedule(variant, np.linalg.norm(beta), d, b0))
    out = run_path(est, X, y, beta, checkpoints(n, n_points), state=True)
    out["beta_norm"] = float(np.linalg.norm(beta))
    return out


def max_contraction_rate(tau):
    """Largest expected contraction of ||e|| per single-sample step, times d,
    far from beta* (Gaussian design, isotropic)."""
    return 1.0 / (2 * np.pi * (tau ** 2 + (1 - tau) ** 2))


def stall_factor(decay, k=2.0, tau=0.5):
    """u_inf = lim ||e_t|| / ||e_0|| of the drift model du/ds = -a k e^{-c s}
    + b' k^2 e^{-2 c s} / (2 u) (s = t/d, eta_t = k ||e_0|| / d e^{-c s}),
    valid while the error dominates the noise."""
    a, bp = 1 / np.sqrt(2 * np.pi), (tau ** 2 + (1 - tau) ** 2) / 2

    def rhs(s, u):
        return [-a * k * np.exp(-decay * s) + bp * k * k * np.exp(-2 * decay * s) / (2 * u[0])]

    def hit_floor(s, u):
        return u[0] - 1e-4
    hit_floor.terminal = True
    sol = integrate.solve_ivp(rhs, (0, 60 / decay), [1.0], events=hit_floor, rtol=1e-8)
    return float(sol.y[0, -1])


def mixed_sparsity(err, df=1.1):
    """1 / f_r(0) for r = xi - z, xi ~ t_df, z ~ N(0, err^2): what a sparsity
    estimate on residuals sees at error ``err`` (in units of the noise scale)."""
    c = np.exp(special.gammaln((df + 1) / 2) - special.gammaln(df / 2)) / np.sqrt(df * np.pi)
    if err <= 0:
        return 1.0 / c

    def integrand(u):
        # t_df density times the N(0, err^2) density, both even in u
        return c * (1 + u * u / df) ** (-(df + 1) / 2) * \
            np.exp(-0.5 * (u / err) ** 2) / (err * np.sqrt(2 * np.pi))
    f = 2 * integrate.quad(integrand, 0, 12 * err, points=[min(1.0, err)], limit=200)[0]
    return 1.0 / f


def _tasks(p):
    return [Task(run_phase_one, dict(n=p["n"], d=p["d"], snr=snr, variant=v,
                                     n_points=p["n_points"]), seed)
            for snr in p["snrs"] for v in p["variants"] for seed in range(p["reps"])]


def _at_switch(r):
    phase = np.asarray(r.get("phase", []), float)
    idx = np.flatnonzero(phase >= 2)
    if not idx.size:
        return None
    return int(idx[0])


def _analyse(p, results):
    gamma, b0 = noise_facts(0.5)
    reps, variants = p["reps"], list(p["variants"])
    table = {k: [] for k in ("SNR", "variant", "switch t", "err at switch / E|xi|",
                             "b0 estimate / (1/f(0))", "D0 estimate / ||b*||",
                             "final rel. err", "final err / E|xi|")}
    points = []           # (err at switch / noise scale, b0_hat / b0) for the model panel
    fig, axes = _plot.new_figure(3, width=5.0)
    summary = {}
    k = 0
    for si, snr in enumerate(p["snrs"]):
        for vi, v in enumerate(variants):
            res = results[k:k + reps]
            k += reps
            t = np.asarray(res[0]["t"])
            sw = []
            for r in res:
                i = _at_switch(r)
                if i is None:
                    sw.append((np.nan,) * 4)
                    continue
                e = r["err"][i] * r["beta_norm"] / gamma
                sw.append((t[i], e, r["b0"][i] / b0, r["d0"][i] / r["beta_norm"]))
                if "oracle b0" not in v:          # there b0 is given, not estimated
                    points.append((r["err"][i] * r["beta_norm"], r["b0"][i] / b0))
            sw = np.array(sw)
            fin = [r["err"][-1] for r in res]
            row = (snr, v, median(sw[:, 0]), median(sw[:, 1]), median(sw[:, 2]),
                   median(sw[:, 3]), median(fin), median(fin) * res[0]["beta_norm"] / gamma)
            for key, val in zip(table, row):
                table[key].append(val)
            summary[(snr, v)] = row
            if si < 2 and v in ("decay 0.5", "decay 0.2", "decay 0.5 + oracle b0", "decay 0.1"):
                ax = axes[si]
                errs = [np.asarray(r["err"]) * r["beta_norm"] / gamma for r in res]
                _plot.path_band(ax, t, errs, v, color=f"C{vi}", slope="none")
                if np.isfinite(row[2]):
                    ax.plot([row[2]], [row[3]], "o", color=f"C{vi}", ms=6, mfc="none")
    u_inf = stall_factor(0.5)
    for si, snr in enumerate(p["snrs"][:2]):
        ax = axes[si]
        ax.axhline(1.0, color="grey", ls="-.", lw=0.8, label="noise level E|xi|")
        ax.axhline(u_inf * snr, color="k", ls=":", lw=0.8,
                   label=f"drift model: decay 0.5 stalls at {u_inf:.3f} ||b*||")
        _plot.finish(ax, xlabel="t (samples)", ylabel="||b_t - b*|| / E|xi|",
                     title=f"SNR {snr:g}: error in units of E|xi| (circles: phase one ends)")
    ax = axes[2]
    pts = np.array(points)
    # paper_stream's noise has scale 1, so errors are in units of the noise scale
    grid = np.geomspace(max(pts[:, 0].min() / 2, 1e-2), pts[:, 0].max() * 2, 40)
    model = [mixed_sparsity(e) / b0 for e in grid]
    ax.plot(pts[:, 0] / gamma, pts[:, 1], "o", ms=4, alpha=0.6,
            label="b0 estimate at the switch (runs that estimate it)")
    ax.plot(grid / gamma, model, "k-", lw=1,
            label="1/f_r(0) of r = xi - x'e, x'e ~ N(0, ||e||^2)")
    ax.axhline(1.0, color="grey", ls="-.", lw=0.8, label="1/f(0) of the noise")
    _plot.finish(ax, xlabel="||b - b*|| / E|xi| at the switch", ylabel="b0 estimate / (1/f(0))",
                 title="the sparsity estimate sees the error, not the noise")
    # criteria: the paper's picture at its decay, the fix, and the model
    rate = max_contraction_rate(0.5)
    checks = []
    for snr in p["snrs"]:
        e = summary[(snr, "decay 0.5")][3]
        checks.append(Check(f"SNR {snr:g}, the paper's decay 0.5/d: phase one "
                            f"reaches the noise level (error at the switch {e:.2f} E|xi| <= 1)",
                            bool(e <= 1.0),
                            requires="the error at the switch at most E|xi|"))
    if "decay 0.2" in variants:
        es = [summary[(snr, "decay 0.2")][3] for snr in p["snrs"]]
        bs = [summary[(snr, "decay 0.2")][4] for snr in p["snrs"]]
        checks.append(Check(f"decay 0.2/d (below the largest contraction rate {rate:.3f}/d): "
                            f"error at the switch {max(es):.2f} E|xi| <= 1 and b0 within 2x "
                            f"(up to {max(bs):.2f}x) at every SNR",
                            max(es) <= 1.0 and max(bs) <= 2.0,
                            requires="at every SNR, the error at the switch at most E|xi| "
                                     "and b0 within a factor 2 of the oracle's"))
    # ||beta*|| = SNR E|xi| in paper_stream (tau = 0.5)
    stalls = [summary[(snr, "decay 0.5")][3] / snr for snr in p["snrs"]]
    checks.append(Check(f"the drift model predicts the decay-0.5 stall: measured error at the "
                        f"switch / ||b*|| = {', '.join(f'{s:.3f}' for s in stalls)} vs model "
                        f"{u_inf:.3f} (within 2x)",
                        all(0.5 <= s / u_inf <= 2.0 for s in stalls),
                        requires="every measured stall within a factor 2 of the model's"))
    rows = {"decay c": [], "stall factor u_inf (model)": [], "c / max rate": []}
    for c in (0.5, 0.4, 0.3, 0.2, 0.1):
        rows["decay c"].append(c)
        rows["stall factor u_inf (model)"].append(stall_factor(c))
        rows["c / max rate"].append(c / rate)
    notes = (
        "**Findings.** (1) The initial stepsize is not the cause: the D0 estimate is within a "
        "few percent of ||beta*|| and the oracle eta0 stalls the same. (2) The decay is: no "
        f"stepsize sequence contracts ||e|| faster than (1 - {rate:.3f}/d) per step at the median "
        "(Gaussian design), so (1 - 0.5/d)^t shrinks the stepsize faster than the error can "
        f"follow and phase one removes only a factor ~1/{u_inf:.3f} of the initial error "
        "(drift model, table above), whatever the SNR: at SNR 200 it stops an order of "
        "magnitude above the noise. Decays at or below 0.2/d reach the noise level. (3) The "
        "plateau test then switches at the stall, and the sparsity estimated from residuals "
        "xi - x'e measures the error, not the noise (right panel: the measured b0 follows "
        "1/f_r(0) of the mixture). Capped at that value, phase two takes steps b0_hat/b0 times "
        "too large, which partly rescues the stalled phase one; with the oracle b0 the "
        "continuity rule switches at the stall with the right b0 and phase two cannot "
        "recover within T at SNR 200 (final error in the table). (4) Theorem 1 asks for a "
        "decay c5 (Cl/Cu) / (d tau*^2) per step with c5 < 0.1, where the paper's tau* is "
        "max(tau, 1 - tau): at the median (tau*^2 = 1/4) and Cl = Cu that admits any decay "
        f"below {0.1 / 0.25:.1f}/d, beyond the contraction limit {rate:.3f}/d (reached at c5 = "
        f"{rate * 0.25:.3f}). c5 < 0.1 alone does not keep phase one inside it; the proof's "
        "further condition c5 <= c/(6C) ('sufficiently small') is what does. The experiments' "
        f"0.5/d is c5 = {0.5 * 0.25:.3f}, outside both. (The library counts the decay in "
        "units of 1/(d tau*^2) with its own tau*^2 = 4 max(tau, 1 - tau)^2, 1 at the median: "
        "its `decay` is 4 c5, so the default 0.2 is c5 = 0.05.)")
    setting = (f"d = {p['d']}, T = {p['n']:,}, t_1.1 noise, tau = 0.5, beta_0 = 0, SNR "
               f"{' and '.join(f'{s:g}' for s in p['snrs'])}, {p['reps']} replications. The "
               "library's StatisticalSchedule with one constant replaced at a time through its "
               "public parameters: the paper's decay 0.5 with every constant estimated, the same "
               "with the oracle eta0 = 2 ||beta*|| / d (the library's rule with the true D0) or "
               "the oracle b0 = 1/f(0) (which also switches by the paper's continuity rule), and "
               "smaller decays (the library's default is 0.2, chosen from this experiment). The switch is read from schedule_state_ at the first checkpoint after "
               f"phase one ended ({p['n_points']} log-spaced checkpoints).")
    return Outcome(setting=setting,
                   tables=[("At the end of phase one (medians)", table),
                           ("Drift model: fraction of the initial error left when the "
                            "geometric stepsize has decayed (eta0 = 2 ||e_0|| / d, tau = 0.5)",
                            rows)],
                   figures={"qr_phase_one": fig}, checks=checks, notes=notes)


EXPERIMENT = Experiment(
    name="qr-phase-one", paper="001", kind=BEYOND,
    title="Investigation: phase one stalls at the paper's decay (1 - 0.5/d)^t",
    claim=("Section 3.1, Figure 4: with eta_t = (1 - 0.5/d)^t eta_0 in phase one, 'our proposed "
           "stepsize scheme can ensure a linear convergence ... in the first phase. The linear "
           "convergence behavior stops once the algorithm reaches ... the noise scale E|xi|. "
           "Our proposed scheme then resets the stepsize.' Theorem 1 itself asks for "
           "eta_t = (1 - c5 (Cl/Cu) / (d tau*^2)) eta_(t-1) with c5 < 0.1 and tau* = "
           "max(tau, 1 - tau)."),
    presets={"quick": dict(n=30_000, d=D_PAPER, snrs=(20.0, 200.0), variants=VARIANTS, reps=3,
                           n_points=60),
             "tiny": dict(n=3000, d=10, snrs=(20.0, 200.0), variants=("decay 0.5",
                          "decay 0.5 + oracle b0", "decay 0.2"), reps=1, n_points=15),
             "full": dict(n=100_000, d=D_PAPER, snrs=(20.0, 200.0), variants=VARIANTS,
                          reps=50, n_points=80)},
    tasks=_tasks, analyse=_analyse)
