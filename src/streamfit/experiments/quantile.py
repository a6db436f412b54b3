"""The online quantile regression paper's experiments (Shen, Xia & Zhou 2025, Section 3.1).

Each function runs one experiment on synthetic data from
:func:`streamfit.simulate.make_linear_stream` and returns a table: a dict of
equal-length lists (one row per setting), printable with :func:`format_table`.
Nothing here is tuned to a seed: every function takes the seeds to use.
"""
from __future__ import annotations

import time

import numpy as np

from ..quantile import OnlineQuantileRegressor, offline_quantile_regression
from ..schedules import ConstantSchedule, InverseTimeSchedule
from ..simulate import make_linear_stream

__all__ = ["stepsize_comparison", "offline_comparison", "regret_dynamics", "format_table",
           "CONSTANT_GRID", "INVERSE_TIME_GRID"]

# Log-spaced grids, 3 points a decade, wide enough that the best point is
# inside for both signal-to-noise ratios (unit-variance features).
CONSTANT_GRID = tuple(np.logspace(-5, 0, 16))
INVERSE_TIME_GRID = tuple(np.logspace(-1, 4, 16))


def _relerr(coef, beta):
    return float(np.linalg.norm(coef - beta) / np.linalg.norm(beta))


def _fit_error(est, X, y, beta):
    """Relative error of the final estimate, inf if the run diverged."""
    try:
        est.fit(X, y)
    except FloatingPointError:
        return float("inf")
    return _relerr(est.coef_, beta)


def stepsize_comparison(n_samples=100_000, n_features=100, *, snrs=(20.0, 200.0), tau=0.5,
                        seeds=(0,), constant_grid=CONSTANT_GRID,
                        inverse_time_grid=INVERSE_TIME_GRID):
    """Figure 4: the statistical schedule against constant and c/(t+1) stepsizes.

    Single-sample updates, beta_0 = 0, t_1.1 noise, no intercept (as in the
    paper). For each SNR and seed: the final relative error of the default
    statistical schedule (no oracle input), of the same with averaging, and of
    the best point of each comparator grid (an oracle choice, in hindsight).
    """
    table = {k: [] for k in ("snr", "seed", "statistical", "statistical_avg",
                             "best_constant", "best_constant_eta", "best_inverse_time",
                             "best_inverse_time_c", "constant_over_statistical",
                             "inverse_time_over_statistical")}
    for snr in snrs:
        for seed in seeds:
            X, y, beta = make_linear_stream(n_samples, n_features, tau=tau, snr=snr,
                                            random_state=seed)

            def err(schedule, average=False):
                est = OnlineQuantileRegressor(tau, schedule=schedule, average=average,
                                              fit_intercept=False)
                return _fit_error(est, X, y, beta)

            stat = err("statistical")
            const = [err(ConstantSchedule(c)) for c in constant_grid]
            inv = [err(InverseTimeSchedule(c)) for c in inverse_time_grid]
            row = {"snr": snr, "seed": seed, "statistical": stat,
                   "statistical_avg": err("statistical", average=True),
                   "best_constant": min(const),
                   "best_constant_eta": constant_grid[int(np.argmin(const))],
                   "best_inverse_time": min(inv),
                   "best_inverse_time_c": inverse_time_grid[int(np.argmin(inv))]}
            row["constant_over_statistical"] = row["best_constant"] / stat
            row["inverse_time_over_statistical"] = row["best_inverse_time"] / stat
            for k, v in row.items():
                table[k].append(v)
    return table


def offline_comparison(sizes=(20_000, 50_000), n_features=100, *, taus=(0.25, 0.75),
                       snr=20.0, seeds=(0,), batch_sizes=None, offline_method="highs"):
    """Figures 5 and 6: online estimates against offline quantile regression.

    For each sample size, tau and seed: relative errors and wall-clock times
    of single-sample updates (plain and averaged), batch updates (plain and
    averaged; batch size 100 at n <= 20,000 and 200 above, as in the paper) and
    the offline estimator (HiGHS LP by default). Errors are medians over seeds.
    """
    methods = {
        "single": lambda tau, bs: OnlineQuantileRegressor(tau, fit_intercept=False),
        "single_avg": lambda tau, bs: OnlineQuantileRegressor(tau, fit_intercept=False,
                                                              average=True),
        "batch": lambda tau, bs: OnlineQuantileRegressor(tau, mode="batch", batch_size=bs,
                                                         fit_intercept=False),
        "batch_avg": lambda tau, bs: OnlineQuantileRegressor(tau, mode="batch", batch_size=bs,
                                                             fit_intercept=False, average=True),
    }
    cols = ["n", "tau"] + [f"{m}_err" for m in methods] + ["offline_err"] + \
        [f"{m}_s" for m in methods] + ["offline_s", "single_avg_over_offline",
                                       "offline_time_over_single"]
    table = {c: [] for c in cols}
    for n in sizes:
        bs = (batch_sizes or {}).get(n, 100 if n <= 20_000 else 200)
        for tau in taus:
            errs = {m: [] for m in list(methods) + ["offline"]}
            secs = {m: [] for m in list(methods) + ["offline"]}
            for seed in seeds:
                X, y, beta = make_linear_stream(n, n_features, tau=tau, snr=snr,
                                                random_state=seed)
                for name, make in methods.items():
                    est = make(tau, bs)
                    runs = []
                    for _ in range(3):      # best of 3: a one-pass fit takes milliseconds
                        t0 = time.perf_counter()
                        est.fit(X, y)
                        runs.append(time.perf_counter() - t0)
                    secs[name].append(min(runs))
                    errs[name].append(_relerr(est.coef_, beta))
                t0 = time.perf_counter()
                coef, _ = offline_quantile_regression(X, y, tau, method=offline_method)
                secs["offline"].append(time.perf_counter() - t0)
                errs["offline"].append(_relerr(coef, beta))
            table["n"].append(n)
            table["tau"].append(tau)
            for m in errs:
                table[f"{m}_err"].append(float(np.median(errs[m])))
                table[f"{m}_s"].append(float(np.median(secs[m])))
            table["single_avg_over_offline"].append(table["single_avg_err"][-1]
                                                    / table["offline_err"][-1])
            table["offline_time_over_single"].append(table["offline_s"][-1]
                                                     / table["single_s"][-1])
    return table


def regret_dynamics(n_samples=100_000, n_features=100, *, snr=20.0, seed=0,
                    checkpoints=(1_000, 3_000, 10_000, 30_000, 100_000), constant_eta=None):
    """Figure 9 / Theorem 4: the prequential regret sum_t (rho(y_t - x_t'b_t)
    - rho(y_t - x_t'b*)) of single-sample updates with the statistical
    schedule grows like log T, against linearly for a constant stepsize:
    ``constant_eta``, by default the best constant of the Figure 4 grid at
    this size (pass it when stepsize_comparison has already found it)."""
    X, y, beta = make_linear_stream(n_samples, n_features, snr=snr, random_state=seed)
    r = y - X @ beta
    oracle = np.cumsum(r * (0.5 - (r < 0)))
    if constant_eta is None:
        constant_eta = stepsize_comparison(n_samples, n_features, snrs=(snr,),
                                           seeds=(seed,))["best_constant_eta"][0]
    ests = {"statistical": OnlineQuantileRegressor(fit_intercept=False),
            "constant": OnlineQuantileRegressor(
                fit_intercept=False, schedule=ConstantSchedule(constant_eta))}
    table = {"T": list(checkpoints), "statistical_regret": [], "constant_regret": []}
    for name, est in ests.items():
        start = 0
        for c in checkpoints:
            est.partial_fit(X[start:c], y[start:c])
            table[f"{name}_regret"].append(est.cumulative_loss_ - oracle[c - 1])
            start = c
    table["statistical_over_log_T"] = [g / np.log(t) for g, t in
                                       zip(table["statistical_regret"], checkpoints)]
    return table


def format_table(table, title=None):
    """Render a table (dict of equal-length lists) as aligned text."""
    cols = list(table)
    rows = list(zip(*(table[c] for c in cols)))

    def fmt(v):
        if isinstance(v, float):
            if 1e4 <= abs(v) < 1e9:
                return f"{v:.0f}"
            if v == 0 or np.isinf(v) or 1e-3 <= abs(v) < 1e4:
                return f"{v:.4g}"
            return f"{v:.3e}"
        return str(v)

    cells = [[fmt(v) for v in row] for row in rows]
    widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(cols)]
    lines = []
    if title:
        lines.append(title)
    lines.append("  ".join(c.rjust(w) for c, w in zip(cols, widths)))
    lines.append("  ".join("-" * w for w in widths))
    for r in cells:
        lines.append("  ".join(v.rjust(w) for v, w in zip(r, widths)))
    return "\n".join(lines)
