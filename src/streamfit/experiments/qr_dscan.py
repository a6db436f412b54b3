"""Theorem 1 and Corollary 2 of Shen, Xia & Zhou (2025) against the
dimension: phase one ends after t1 = O(d log(||beta_0 - beta*|| / gamma))
samples, and the final error is ||beta_T - beta*||^2 <= C3 (d/T) b0^2. A
scan in d at a fixed signal-to-noise ratio (so the log factor is fixed) and
T a fixed multiple of d: t1 / d and the final error in units of d/T must not
move with d."""
from __future__ import annotations

import numpy as np

from ..quantile import OnlineQuantileRegressor
from . import _plot
from ._qr_common import checkpoints, noise_facts, paper_stream, run_path
from ._runner import Task
from ._stats import check_inside, loglog_slope, median
from ._types import SANITY, Check, Experiment, Outcome


def run_dscan(d, t_factor, snr, n_points, seed):
    """One replication at dimension d: the error path, the phase-one switch
    time and the normalised final error ||b_T - b*||^2 T / (b0^2 d)."""
    _, b0 = noise_facts(0.5)
    T = int(t_factor * d)
    X, y, beta = paper_stream(T, d, snr=snr, seed=np.random.SeedSequence([seed, d]))
    est = OnlineQuantileRegressor(0.5, fit_intercept=False)
    path = run_path(est, X, y, beta, checkpoints(T, n_points), state=True)
    switch = [t for t, ph in zip(path["t"], path["phase"]) if ph >= 2]
    t1 = float(est.schedule_state_["t_switch"]) if switch else float("nan")
    return {"t": path["t"], "err": path["err"], "t1": t1,
            "z": float(np.sum((est.coef_ - beta) ** 2) * T / (b0 ** 2 * d))}


def _tasks(p):
    return [Task(run_dscan, dict(d=d, t_factor=p["t_factor"], snr=p["snr"],
                                 n_points=p["n_points"]), seed, priority=d)
            for d in p["dims"] for seed in range(p["reps"])]


def _analyse(p, results):
    dims, reps = list(p["dims"]), p["reps"]
    res = {d: results[i * reps:(i + 1) * reps] for i, d in enumerate(dims)}
    t1 = {d: np.array([r["t1"] for r in res[d]]) for d in dims}
    z = {d: np.array([r["z"] for r in res[d]]) for d in dims}
    # per replication index: the slopes of log t1 and log z against log d
    # (replication i of every d is an independent stream; pairing them by
    # index gives one slope per index, whose spread is the slope's noise)
    s_t1 = [loglog_slope(dims, [t1[d][i] for d in dims]) for i in range(reps)]
    s_z = [loglog_slope(dims, [z[d][i] for d in dims]) for i in range(reps)]
    fig, (ax, ax2) = _plot.new_figure(2, width=5.2)
    for j, d in enumerate(dims):
        t = np.asarray(res[d][0]["t"], float)
        _plot.path_band(ax, t / d, [r["err"] for r in res[d]], f"d = {d}", color=f"C{j}",
                        slope="none")
    _plot.finish(ax, xlabel="t / d (samples per dimension)", ylabel="relative error",
                 title=f"Error against t/d, SNR {p['snr']:g} ({reps} reps a d)")
    ax2.plot(dims, [median(t1[d]) / d for d in dims], "o-", label="median t1 / d")
    ax2.plot(dims, [median(z[d]) for d in dims], "s-",
             label="median ||b_T - b*||^2 T / (b0^2 d)")
    _plot.finish(ax2, xlabel="d", ylabel="per dimension", logy=True,
                 title="Both flat in d: t1 = O(d), error^2 = O(d / T)")
    _plot.value_ticks(ax2, dims)
    table = {"d": dims, "T": [int(p["t_factor"] * d) for d in dims],
             "median t1": [median(t1[d]) for d in dims],
             "median t1 / d": [median(t1[d]) / d for d in dims],
             "median Z = err^2 T / (b0^2 d)": [median(z[d]) for d in dims],
             "final rel. err": [median([r["err"][-1] for r in res[d]]) for d in dims]}
    checks = [
        check_inside(s_t1, 0.8, 1.2, "Theorem 1: phase one ends after t1 = O(d log(...)) "
                     "samples (the log factor fixed by the SNR): log-log slope of t1 against d",
                     n_of="replications", fmt="+.2f",
                     requires="the whole 95% interval inside [0.8, 1.2] (t1 in proportion "
                              "to d; a d log d or d^2 phase fails)"),
        check_inside(s_z, -0.2, 0.2, "Corollary 2: the final error^2 is C3 (d/T) b0^2 at T "
                     "a fixed multiple of d: log-log slope of err^2 T / (b0^2 d) against d",
                     n_of="replications", fmt="+.2f",
                     requires="the whole 95% interval inside [-0.2, 0.2] (a rate in d^2/T or "
                              "sqrt(d/T) fails)"),
        Check(f"phase one ended in every run ({sum(np.isfinite(t1[d]).sum() for d in dims)} "
              f"of {reps * len(dims)})", all(np.isfinite(t1[d]).all() for d in dims),
              role=SANITY),
    ]
    setting = (f"d in {dims}, T = {p['t_factor']:g} d, t_1.1 noise, tau = 1/2, SNR "
               f"||beta*|| / E|xi| = {p['snr']:g} at every d (so log(||beta_0 - beta*|| / "
               "gamma) is fixed), beta_0 = 0, the library's statistical schedule (decay "
               f"0.2/d, every constant estimated), {reps} replications a d. t1: the schedule's "
               "switch time (its plateau test ends phase one). The slopes are fitted per "
               "replication index across d.")
    return Outcome(setting=setting, tables=[("Against d (medians)", table)],
                   figures={"qr_dscan": fig}, checks=checks,
                   summary={"t1_over_d": {str(d): median(t1[d]) / d for d in dims},
                            "z": {str(d): median(z[d]) for d in dims}})


EXPERIMENT = Experiment(
    name="qr-dscan", paper="001",
    title="Theorem 1 / Corollary 2 against d: t1 = O(d log), error^2 = O(d/T)",
    claim=("Theorem 1: 'the conclusion of phase one occurs after t1 = O(d log(||beta_0 - "
           "beta*|| / gamma)) iterations'; Corollary 2: for T >= C d max{1, log(...)}, "
           "||beta_T - beta*||^2 <= C3 (d/T) b0^2, 'the minimax optimal error rate'. No "
           "experiment in the paper varies d."),
    presets={"quick": dict(dims=(10, 20, 40, 80, 160), t_factor=500, snr=20.0, reps=8,
                           n_points=20),
             "tiny": dict(dims=(5, 10, 20), t_factor=300, snr=20.0, reps=4, n_points=8),
             "full": dict(dims=(10, 20, 40, 80, 160, 320), t_factor=1000, snr=20.0, reps=30,
                          n_points=30)},
    tasks=_tasks, analyse=_analyse)
