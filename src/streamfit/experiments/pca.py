"""Online PCA experiments (Kotlowski & Warmuth, "PCA with Gaussian perturbations").

Each function returns a table: a dict of equal-length lists, rendered by
``format_table``. ``python -m streamfit`` runs them.
"""
from __future__ import annotations

import numpy as np

from ..pca import (FollowTheLeaderPCA, MatrixEGPCA, MatrixGDPCA, PerturbedLeaderPCA,
                   auto_sigma, regret_bound)
from ..simulate import make_ftl_adversary, make_spiked_stream

__all__ = ["adversarial_regret", "comparator_regret", "loglog_slope"]


def loglog_slope(x, y):
    """Least-squares slope of log y against log x."""
    return float(np.polyfit(np.log(np.asarray(x, float)), np.log(np.asarray(y, float)), 1)[0])


def _regret_path(est, X, checkpoints, dense=False):
    out, prev = [], 0
    for T in checkpoints:
        if dense:
            est.partial_fit_dense(X[prev:T], check_psd=False)
        else:
            est.partial_fit(X[prev:T])
        prev = T
        out.append(est.regret_)
    return out


def adversarial_regret(n_features=10, n_components=2, checkpoints=(1000, 3000, 10_000,
                                                                     30_000, 100_000),
                       seeds=(0, 1, 2, 3, 4)):
    """Regret on :func:`~streamfit.simulate.make_ftl_adversary`: Follow the Leader
    (linear in T) against FPL with the "auto" sigma and fixed noise (mean and
    standard deviation over seeds), beside the paper's bound at that sigma.
    The table's ``slope_*`` columns repeat the log-log slopes of the whole path."""
    n, k = n_features, n_components
    checkpoints = [int(T) for T in checkpoints]
    X = make_ftl_adversary(checkpoints[-1], n, k)
    ftl = _regret_path(FollowTheLeaderPCA(k), X, checkpoints)
    fpl = np.array([_regret_path(PerturbedLeaderPCA(k, random_state=s), X, checkpoints)
                    for s in seeds])
    sigma = auto_sigma(n, k)
    bound = [regret_bound(T, n, k, sigma) for T in checkpoints]
    mean = fpl.mean(axis=0)
    return {
        "T": checkpoints,
        "ftl_regret": [float(r) for r in ftl],
        "fpl_regret_mean": [float(r) for r in mean],
        "fpl_regret_sd": [float(r) for r in fpl.std(axis=0)],
        "bound": bound,
        "fpl/bound": [float(m / b) for m, b in zip(mean, bound)],
        "slope_ftl": [loglog_slope(checkpoints, ftl)] * len(checkpoints),
        "slope_fpl": [loglog_slope(checkpoints, mean)] * len(checkpoints),
    }


def comparator_regret(seeds=(0, 1, 2), adversarial=(10, 2, (1000, 5000, 30_000)),
                      spiked=(50, 3, (500, 1500, 4000))):
    """All four algorithms side by side: Follow the Leader, FPL (auto sigma, fixed
    noise), MEG and GD (eta "auto"), on the adversarial sequence for FTL and on
    an i.i.d. spiked stream (unit-norm rows), each given as (n, k, checkpoints).

    MEG's and GD's regret is the expected one, lambda_{1:k} - sum tr(W_t X_t):
    W_t does not depend on the seed, which only drives the sampled projections
    (``*_sampled``: the regret of the projections actually played, first seed).
    FPL's is the mean over seeds. Each algorithm's bound (MEG's and GD's from
    :meth:`~streamfit.pca.MatrixEGPCA.regret_bound`) sits beside it; slopes are
    log-log over the checkpoints of each stream."""
    rows = {name: [] for name in (
        "stream", "T", "ftl", "fpl_mean", "meg", "gd", "meg_sampled", "gd_sampled",
        "fpl_bound", "meg_bound", "gd_bound", "slope_fpl", "slope_meg", "slope_gd")}
    for stream, (n, k, checkpoints) in (("adversarial", adversarial), ("spiked", spiked)):
        checkpoints = [int(T) for T in checkpoints]
        if stream == "adversarial":
            X = make_ftl_adversary(checkpoints[-1], n, k)
        else:
            X = make_spiked_stream(checkpoints[-1], n, n_spikes=k, random_state=300)
        ftl = _regret_path(FollowTheLeaderPCA(k), X, checkpoints)
        fpl = np.mean([_regret_path(PerturbedLeaderPCA(k, random_state=s), X, checkpoints)
                       for s in seeds], axis=0)
        paths = {}
        for name, Est in (("meg", MatrixEGPCA), ("gd", MatrixGDPCA)):
            est, prev, path = Est(k, random_state=seeds[0]), 0, []
            for T in checkpoints:
                est.partial_fit(X[prev:T])
                prev = T
                path.append((est.regret_, est.best_gain_ - est.realized_gain_,
                             est.regret_bound()))
            paths[name] = np.array(path)     # (checkpoints, [expected, sampled, bound])
        sigma = auto_sigma(n, k)
        for i, T in enumerate(checkpoints):
            rows["stream"].append(f"{stream} n={n} k={k}")
            rows["T"].append(T)
            rows["ftl"].append(float(ftl[i]))
            rows["fpl_mean"].append(float(fpl[i]))
            for name in ("meg", "gd"):
                rows[name].append(float(paths[name][i, 0]))
                rows[f"{name}_sampled"].append(float(paths[name][i, 1]))
                rows[f"{name}_bound"].append(float(paths[name][i, 2]))
            rows["fpl_bound"].append(regret_bound(T, n, k, sigma))
            rows["slope_fpl"].append(loglog_slope(checkpoints, fpl))
            for name in ("meg", "gd"):
                rows[f"slope_{name}"].append(loglog_slope(checkpoints, paths[name][:, 0]))
    return rows


