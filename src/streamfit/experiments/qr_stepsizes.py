"""Figure 4 of Shen, Xia & Zhou (2025): the statistical stepsize schedule
against a constant stepsize and an O(1/t) one, single-sample updates."""
from __future__ import annotations

import numpy as np

from ..quantile import OnlineQuantileRegressor
from ..schedules import ConstantSchedule, InverseTimeSchedule, StatisticalSchedule
from . import _plot
from .quantile import CONSTANT_GRID, INVERSE_TIME_GRID
from ._qr_common import (D_PAPER, DECAY_PAPER, T_PAPER, checkpoints, default_decay, noise_facts,
                         paper_stream, run_path)
from ._runner import Task
from ._stats import check_above, check_below, check_inside, last_decade_slope, median
from ._types import CLAIM, CORRECTION, VARIANT, Experiment, Outcome


def run_figure4(n, d, snr, tau, n_points, seed):
    """One replication: error paths of the default statistical schedule (plain
    and averaged), of the same schedule at the paper's decay 0.5/d, and of
    every point of the constant and c/(t+1) grids."""
    X, y, beta = paper_stream(n, d, tau=tau, snr=snr, seed=seed)
    pts = checkpoints(n, n_points)

    def path(schedule="statistical", average=False, state=False):
        est = OnlineQuantileRegressor(tau, schedule=schedule, average=average,
                                      fit_intercept=False)
        return run_path(est, X, y, beta, pts, state=state)

    stat = path(state=True)
    paper = path(StatisticalSchedule(decay=DECAY_PAPER), state=True)
    return {"t": stat["t"], "statistical": stat["err"],
            "phase": stat.get("phase", []), "b0_hat": stat.get("b0", []),
            "paper": paper["err"], "paper_phase": paper.get("phase", []),
            "paper_b0_hat": paper.get("b0", []),
            "statistical_avg": path(average=True)["err"],
            "constant": [path(ConstantSchedule(c))["err"] for c in CONSTANT_GRID],
            "inverse_time": [path(InverseTimeSchedule(c))["err"] for c in INVERSE_TIME_GRID],
            "beta_norm": float(np.linalg.norm(beta))}


def _tasks(p):
    return [Task(run_figure4, dict(n=p["n"], d=p["d"], snr=snr, tau=0.5,
                                   n_points=p["n_points"]), seed)
            for snr in p["snrs"] for seed in range(p["reps"])]


#: the two statistical schedules of the figure: (label, result key, key prefix)
VARIANTS = (("default", "statistical", ""), ("paper's decay", "paper", "paper_"))


def _switch_error(res, gamma, key="statistical", prefix=""):
    """Error (in units of E|xi|) at the first checkpoint after phase one ended,
    and the sparsity estimate there; NaN if the phase is not reported."""
    phase = np.asarray(res[prefix + "phase"], float)
    after = np.flatnonzero(phase >= 2)
    if not after.size:
        return np.nan, np.nan
    i = after[0]
    return res[key][i] * res["beta_norm"] / gamma, res[prefix + "b0_hat"][i]


def _analyse(p, results):
    gamma, b0 = noise_facts(0.5)
    decay = {"default": default_decay(), "paper's decay": DECAY_PAPER}
    per_snr = {snr: results[i * p["reps"]:(i + 1) * p["reps"]] for i, snr in enumerate(p["snrs"])}
    fig, axes = _plot.new_figure(len(p["snrs"]), width=5.6, height=6.2)
    table = {k: [] for k in ("SNR", "schedule", "phase-one decay", "statistical",
                             "statistical+avg", "best constant", "eta", "best c/(t+1)", "c",
                             "const/stat", "1/t over stat", "last-decade slope",
                             "err at switch / E|xi|", "b0 estimate / (1/f(0))")}
    checks, headline, ratios = [], {}, {}
    for ax, (snr, res) in zip(axes, per_snr.items()):
        t = res[0]["t"]
        const_final = np.array([[r["constant"][j][-1] for r in res]
                                for j in range(len(CONSTANT_GRID))])
        inv_final = np.array([[r["inverse_time"][j][-1] for r in res]
                              for j in range(len(INVERSE_TIME_GRID))])
        jc = int(np.argmin(np.median(const_final, axis=1)))
        ji = int(np.argmin(np.median(inv_final, axis=1)))
        const, inv = median(const_final[jc]), median(inv_final[ji])
        avg = median([r["statistical_avg"][-1] for r in res])
        for label, key, prefix in VARIANTS:
            c = decay[label]
            stat = median([r[key][-1] for r in res])
            slope = last_decade_slope(t, np.median([r[key] for r in res], axis=0))
            sw = np.array([_switch_error(r, gamma, key, prefix) for r in res])
            sw_err, sw_b0 = median(sw[:, 0]), median(sw[:, 1]) / b0
            for k, v in zip(table, (snr, label, f"{c:g}/d", stat,
                                    avg if key == "statistical" else np.nan, const,
                                    CONSTANT_GRID[jc], inv, INVERSE_TIME_GRID[ji], const / stat,
                                    inv / stat, slope, sw_err, sw_b0)):
                table[k].append(v)
            paper = key == "paper"
            role = CLAIM if paper else VARIANT
            name = (f"Figure 4{'ab'[list(per_snr).index(snr)]} (SNR {snr:g}), "
                    f"{'the paper' if paper else 'the library'}'s decay {c:g}/d")
            stat_r = np.array([r[key][-1] for r in res])
            checks.append(check_above(
                np.log(const_final[jc] / stat_r), np.log(1.2),
                f"{name}: the statistical schedule ends below the best constant stepsize, "
                f"log(constant / statistical) at T", role=role, n_of="replications",
                requires="the whole 95% interval above log 1.2 (the constant's error at least "
                         "1.2x the statistical schedule's)"))
            if paper:
                checks.append(check_above(
                    np.log(inv_final[ji] / const_final[jc]), np.log(1.2),
                    f"{name}: O(1/t) 'considerably inferior' to the constant, log(O(1/t) / "
                    f"constant) at T", role=CLAIM, n_of="replications",
                    requires="the whole 95% interval above log 1.2"))
            slopes = [last_decade_slope(t, r[key]) for r in res]
            checks.append(check_inside(
                slopes, -0.75, -0.3, f"{name}: O(1/t) phase two (squared error), error's "
                f"last-decade log-log slope", role=role, n_of="replications", fmt="+.2f"))
            checks.append(check_below(
                sw[:, 0], 1.0, f"{name}: phase one ends at the noise level, error at the switch "
                f"in units of E|xi|", role=CLAIM if paper else CORRECTION,
                n_of="replications", center="median",
                requires="the whole 95% interval of the median at or below 1 E|xi|"))
            tag = "paper" if key == "paper" else "default"
            headline[f"snr{snr:g}_{tag}_switch_err_over_Exi"] = sw_err
            headline[f"snr{snr:g}_{tag}_final_rel_err"] = stat
        finals = {key: median([r[key][-1] for r in res]) for _, key, _ in VARIANTS}
        headline[f"snr{snr:g}_best_constant_over_default"] = const / finals["statistical"]
        ratios[snr] = finals["paper"] / finals["statistical"]
        # the figure: medians over replications, inter-quartile bands
        big = min(jc + 3, len(CONSTANT_GRID) - 1)
        _plot.path_band(ax, t, [r["statistical"] for r in res],
                        f"statistical, default decay {decay['default']:g}/d", color="C0")
        _plot.path_band(ax, t, [r["statistical_avg"] for r in res], "statistical, averaged",
                        color="C0", style="--")
        _plot.path_band(ax, t, [r["paper"] for r in res],
                        f"statistical, paper's decay {DECAY_PAPER:g}/d", color="C3", style="-.")
        # no slope for constants: they converge linearly, then stall
        _plot.path_band(ax, t, [r["constant"][jc] for r in res],
                        f"constant {CONSTANT_GRID[jc]:.1e} (best)", color="C1", slope="none")
        if big != jc and np.isfinite(np.median(const_final[big])):
            _plot.path_band(ax, t, [r["constant"][big] for r in res],
                            f"constant {CONSTANT_GRID[big]:.1e} (large)", color="C1",
                            style=":", slope="none")
        _plot.path_band(ax, t, [r["inverse_time"][ji] for r in res],
                        f"c/(t+1), c = {INVERSE_TIME_GRID[ji]:.2g} (best)", color="C2")
        ax.axhline(1.0 / snr, color="grey", lw=0.8, ls="-.", label="noise level E|xi| / ||b*||")
        for (label, key, prefix), marker in zip(VARIANTS, ("o", "s")):
            sw = [_switch_error(r, gamma, key, prefix)[0] for r in res]
            i = [np.flatnonzero(np.asarray(r[prefix + "phase"], float) >= 2) for r in res]
            ts = [t[j[0]] for j in i if j.size]
            if ts:
                ax.plot([np.median(ts)], [median(sw) / snr], marker, ms=7, mfc="none",
                        color="C0" if key == "statistical" else "C3",
                        label=f"phase one ends ({label})")
        _plot.finish(ax, xlabel="t (samples)", ylabel="relative error ||b_t - b*|| / ||b*||",
                     title=f"Figure 4{'ab'[list(per_snr).index(snr)]}: SNR {snr:g}, d = {p['d']}, "
                           f"t_1.1, tau = 0.5 ({p['reps']} reps)", below=True, fontsize=7.5, ncol=1)
    setting = (f"d = {p['d']}, T = {p['n']:,}, t_1.1 noise, tau = 0.5, beta_0 = 0, x ~ N(0, I), "
               f"{p['reps']} replications; 'moderate' and 'strong' SNR read as ||beta*|| / E|xi| "
               f"= {' and '.join(f'{s:g}' for s in p['snrs'])} (the paper gives no number for "
               "Figure 4; 20 and 200 are the values of its other figures). Statistical = the "
               "library's schedule, every constant estimated from the stream (no oracle "
               f"input), Ca = 20, Cb = 30, run twice: with the library's default phase-one "
               f"decay (1 - {decay['default']:g}/d)^t, and with the paper's (1 - "
               f"{DECAY_PAPER:g}/d)^t (StatisticalSchedule(decay={DECAY_PAPER:g})); the verdict "
               "is the paper's decay's, the default's criteria stand beside it. The comparators' constants are the best of 16-point log grids "
               "(constant 1e-5..1, c/(t+1) with c 0.1..1e4) by median final error, picked in "
               "hindsight -- a favour the statistical schedule does not get. Curves are medians "
               "over replications with inter-quartile bands; circles and squares mark the end "
               "of phase one (median switch time, error there).")
    notes = (f"**Decay.** The paper's phase one decays as (1 - {DECAY_PAPER:g}/d)^t; at that "
             "rate its stepsize shrinks faster than the error can follow and phase one "
             "stops above the noise level (`qr-phase-one` measures why), so the criterion "
             "'phase one ends at the noise level' fails at the paper's setting and holds at "
             f"the library's default {decay['default']:g}/d, which this experiment and "
             "`qr-phase-one` motivated. Final error at the paper's decay over the default's: "
             + ", ".join(f"{r:.2f}x (SNR {snr:g})" for snr, r in ratios.items())
             + "; the plateau test's inflated b0 at the stall gives phase two larger steps, "
             "which partly rescues a stalled phase one (`qr-phase-one`).")
    return Outcome(setting=setting, tables=[("Final relative errors (medians over "
                                             "replications)", table)],
                   figures={"fig4_stepsizes": fig}, checks=checks, notes=notes,
                   summary=headline)


EXPERIMENT = Experiment(
    name="qr-fig4", paper="001",
    title="Figure 4: statistical vs constant vs O(1/t) stepsizes",
    claim=("Single-sample updates, d = 100, T = 1e5, tau = 1/2, t_1.1 noise, first phase "
           "eta_t = (1 - 0.5/d)^t eta_0, second phase Ca = 20, Cb = 30 (Section 3.1); moderate "
           "and strong SNR panels. In the paper's words: 'our proposed stepsize scheme can "
           "ensure a linear convergence [...] in the first phase. The linear convergence "
           "behavior stops once the algorithm reaches at a sufficiently accurate estimate, "
           "i.e., when the error rate is dominated by the noise scale E|xi| [...] The error "
           "rate continues to decrease in the second phase, which is sub-linear and exhibits "
           "an O(1/t) convergence rate. [...] the constant stepsize scheme [...] cannot "
           "further improve the estimate [...] The performance under the O(1/t) stepsize "
           "scheme is considerably inferior to those under the other two.'"),
    presets={"quick": dict(n=T_PAPER, d=D_PAPER, snrs=(20.0, 200.0), reps=20, n_points=40),
             "tiny": dict(n=3000, d=10, snrs=(20.0, 200.0), reps=6, n_points=8),
             "full": dict(n=T_PAPER, d=D_PAPER, snrs=(20.0, 200.0), reps=50, n_points=50)},
    tasks=_tasks, analyse=_analyse)
