"""Section 3.1 of Shen, Xia & Zhou (2025) on online least squares: the
two-phase stepsize (a constant O(1/d), then O(1/(t + d))) 'to achieve
long-term statistical optimality', whose proof 'is almost identical to that
of Theorem 1': under Gaussian noise the iterates reach E||beta_t - beta*||^2
~ sigma^2 d / t, so the regret -- the sum of excess squared losses,
(1/2) sum_t E||beta_t - beta*||^2 for x ~ N(0, I) -- is the start's cost plus
O(sigma^2 d log T)."""
from __future__ import annotations

import numpy as np

from ..quantile import OnlineLeastSquaresRegressor
from . import _plot
from ._qr_common import checkpoints, paper_stream
from ._runner import Task
from ._stats import check_below, check_inside, last_decade_slope, median
from .qr_regret import P_BAND, growth
from ._types import Experiment, Outcome


def run_squared(n, d, snr, sigma, n_points, seed):
    """One replication: online least squares on Gaussian noise of scale
    ``sigma``: the error path and the prequential regret, the summed excess
    squared loss (y - x'b_t)^2/2 - (y - x'b*)^2/2."""
    # beta* the same for every sigma (||beta*|| = snr E|xi| at sigma = 1): were
    # it to grow with sigma, the whole problem would scale and the regret's
    # proportion to sigma^2 would hold by the learner's scale equivariance alone
    X, y, beta = paper_stream(n, d, snr=snr / sigma, noise="gaussian", seed=seed,
                              noise_scale=sigma)
    oracle = np.cumsum(0.5 * (y - X @ beta) ** 2)
    est = OnlineLeastSquaresRegressor(fit_intercept=False)
    pts = checkpoints(n, n_points, start=100)
    out = {"t": [], "err2": [], "regret": []}
    start = 0
    for p in pts:
        est.partial_fit(X[start:p], y[start:p])
        out["t"].append(int(p))
        out["err2"].append(float(np.sum((est.coef_ - beta) ** 2)))
        out["regret"].append(float(est.cumulative_loss_ - oracle[p - 1]))
        start = p
    return out


def _tasks(p):
    return [Task(run_squared, dict(n=p["n"], d=p["d"], snr=p["snr"], sigma=s,
                                   n_points=p["n_points"]), seed)
            for s in p["sigmas"] for seed in range(p["reps"])]


def _analyse(p, results):
    sig, reps = list(p["sigmas"]), p["reps"]
    res = {s: results[i * reps:(i + 1) * reps] for i, s in enumerate(sig)}
    t = np.asarray(res[sig[0]][0]["t"], float)
    late = int(np.searchsorted(t, t[-1] / 10))
    fig, (ax, ax2) = _plot.new_figure(2, width=5.2)
    for j, s in enumerate(sig):
        _plot.path_band(ax, t, [np.asarray(r["err2"]) / s ** 2 for r in res[s]],
                        f"sigma = {s:g}: ||b_t - b*||^2 / sigma^2", color=f"C{j}")
        ax2.plot(t, np.mean([r["regret"] for r in res[s]], axis=0) / s ** 2, "-",
                 color=f"C{j}", label=f"sigma = {s:g}: regret / sigma^2 (mean)")
    ax.plot(t, p["d"] / t, "k:", lw=1, label="d / t")
    _plot.finish(ax, xlabel="t", ylabel="squared error / sigma^2",
                 title=f"Online least squares, Gaussian noise, d = {p['d']} ({reps} reps)")
    _plot.finish(ax2, xlabel="t", ylabel="regret / sigma^2", logy=False,
                 title="Regret: a start-up cost, then log-like growth")
    lo = t[late]
    # per replication: the error's last-decade slope, the regret's growth exponent after T/10
    slopes = [last_decade_slope(t, r["err2"]) for r in res[sig[0]]]
    ps = [growth(t, r["regret"], lo)[0]["p"] for r in res[sig[0]]]
    inc = {s: np.array([r["regret"][-1] - r["regret"][late] for r in res[s]]) for s in sig}
    ratio = np.log(inc[sig[-1]] / inc[sig[0]]) / np.log(sig[-1] ** 2 / sig[0] ** 2)
    table = {"sigma": sig,
             "final ||b - b*||^2 / (sigma^2 d / T)": [
                 median([r["err2"][-1] for r in res[s]]) / (s ** 2 * p["d"] / t[-1])
                 for s in sig],
             "regret at T": [median([r["regret"][-1] for r in res[s]]) for s in sig],
             f"regret from {int(lo):,} to T": [median(inc[s]) for s in sig]}
    checks = [
        check_inside(slopes, -1.15, -0.85, f"phase two reaches the O(1/t) rate: last-decade "
                     f"log-log slope of ||b_t - b*||^2 (sigma = {sig[0]:g})",
                     n_of="replications", fmt="+.2f",
                     requires="the whole 95% interval inside [-1.15, -0.85]"),
        check_below(ps, P_BAND, f"the regret grows like log T after phase one: Box-Cox "
                    f"exponent of the regret path from t = {int(lo):,} (sigma = {sig[0]:g})",
                    n_of="replications", fmt="+.2f",
                    requires=f"the whole 95% interval at or below {P_BAND} (0 is log, 1/2 "
                             "square root)"),
        check_inside(ratio, 0.8, 1.2, f"... in proportion to sigma^2: the late regret's "
                     f"exponent in sigma^2 between sigma = {sig[0]:g} and {sig[-1]:g}",
                     n_of="replications", fmt=".2f",
                     requires="the whole 95% interval inside [0.8, 1.2] (1: sigma^2 log T)"),
    ]
    setting = (f"d = {p['d']}, T = {p['n']:,}, Gaussian noise of sd sigma in {sig}, "
               f"||beta*|| = {p['snr']:g} E|xi| at sigma = 1, the same beta* for every sigma, "
               "beta_0 = 0, x ~ N(0, I); "
               "OnlineLeastSquaresRegressor with the library's two-phase schedule (the "
               "paper's: a constant O(1/d) phase one, then Ca / (Cl (t - t1) + ...)); "
               f"{reps} replications. Regret: the prequential sum of (y - x'b_t)^2/2 minus "
               "beta*'s, whose mean is (1/2) sum_t E||b_t - b*||^2.")
    return Outcome(setting=setting, tables=[("Medians over replications", table)],
                   figures={"qr_squared": fig}, checks=checks)


EXPERIMENT = Experiment(
    name="qr-squared", paper="001",
    title="Section 3.1: online least squares' two-phase schedule, rate and regret",
    claim=("Section 3.1, for the squared loss with sub-Gaussian noise: 'an appropriate "
           "stepsize scheme for online least squares algorithm should also consists of two "
           "phases: a constant stepsize eta = O(1/d) in the first phase; a decaying stepsize "
           "schedule eta_t = O((t + d)^(-1)) in the second phase. The detailed proof of the "
           "convergence dynamics under this stepsize scheme is almost identical to that of "
           "Theorem 1': E||beta_t - beta*||^2 = O(sigma^2 d / t) after phase one, so the "
           "regret, sum_t E||beta_t - beta*||^2 / 2, is the start's cost plus "
           "O(sigma^2 d log T), as Theorem 4 has it for the check loss."),
    presets={"quick": dict(n=100_000, d=100, snr=20.0, sigmas=(1.0, 3.0), reps=12,
                           n_points=30),
             "tiny": dict(n=5000, d=10, snr=20.0, sigmas=(1.0, 3.0), reps=6, n_points=10),
             "full": dict(n=100_000, d=100, snr=20.0, sigmas=(1.0, 3.0), reps=50, n_points=40)},
    tasks=_tasks, analyse=_analyse)
