"""Online PCA experiments (Kotlowski & Warmuth, "PCA with Gaussian perturbations").

Each function returns a table: a dict of equal-length lists, rendered by
``format_table``. ``python -m streamfit`` runs them.
"""
from __future__ import annotations

import time

import numpy as np
import scipy.linalg
from threadpoolctl import threadpool_limits

from ..pca import (FollowTheLeaderPCA, MatrixEGPCA, MatrixGDPCA, PerturbedLeaderPCA,
                   auto_sigma, regret_bound)
from ..simulate import make_dense_stream, make_ftl_adversary, make_spiked_stream

__all__ = ["adversarial_regret", "noise_comparison", "stochastic_regret", "dense_regret",
           "comparator_regret", "pca_trial_time", "loglog_slope"]


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


def noise_comparison(n_features=10, n_components=2, n_trials=20_000, seeds=(0, 1, 2)):
    """FPL's three noise processes on the adversarial sequence, regret mean over
    seeds: fixed N, a Gaussian random walk, independent draws."""
    n, k = n_features, n_components
    X = make_ftl_adversary(n_trials, n, k)
    rows = {"noise": [], "regret_mean": [], "regret_sd": [], "bound": []}
    sigma = auto_sigma(n, k)
    for noise in ("fixed", "random_walk", "independent"):
        r = [PerturbedLeaderPCA(k, noise=noise, random_state=s).partial_fit(X).regret_
             for s in seeds]
        rows["noise"].append(noise)
        rows["regret_mean"].append(float(np.mean(r)))
        rows["regret_sd"].append(float(np.std(r)))
        rows["bound"].append(regret_bound(n_trials, n, k, sigma))
    return rows


def _leader_rows(n_components, seeds, checkpoints, make_data, bound, dense=False):
    """FTL's and FPL's regret at each checkpoint, one stream per seed
    (make_data(seed) -> (data, facts)), beside bound(T, fpl, facts) for the FPL
    estimator as it ended."""
    k = n_components
    rows = {"seed": [], "T": [], "ftl_regret": [], "fpl_regret": [], "bound": []}
    for s in seeds:
        data, facts = make_data(s)
        ftl = _regret_path(FollowTheLeaderPCA(k), data, checkpoints, dense)
        est = PerturbedLeaderPCA(k, random_state=s)
        fpl = _regret_path(est, data, checkpoints, dense)
        for T, r_ftl, r_fpl in zip(checkpoints, ftl, fpl):
            rows["seed"].append(s)
            rows["T"].append(T)
            rows["ftl_regret"].append(float(r_ftl))
            rows["fpl_regret"].append(float(r_fpl))
            rows["bound"].append(bound(T, est, facts))
    return rows


def stochastic_regret(n_features=50, n_components=3, checkpoints=(500, 2000, 8000),
                      seeds=(0, 1, 2)):
    """An i.i.d. spiked stream (unit-norm rows): here Follow the Leader is good
    and FPL pays for its noise, still within its bound."""
    n, k = n_features, n_components
    sigma = auto_sigma(n, k)
    return _leader_rows(
        k, seeds, checkpoints,
        lambda s: (make_spiked_stream(checkpoints[-1], n, n_spikes=k, random_state=100 + s),
                   None),
        lambda T, est, facts: regret_bound(T, n, k, sigma))


def dense_regret(n_features=30, n_components=3, checkpoints=(250, 1000, 4000), seeds=(0, 1, 2)):
    """Dense instances (second-moment matrices of 5-row mini-batches, eigenvalues
    <= 1): FPL's regret against the dense bound at its final sigma."""
    n, k = n_features, n_components

    def make_data(seed):
        Xs = make_dense_stream(checkpoints[-1], n, n_spikes=k, random_state=200 + seed)
        # the bound's eigenvalue scale and max tr(X^2), measured exactly
        return Xs, (float(np.linalg.eigvalsh(Xs)[:, -1].max()),
                    float(np.einsum("tij,tij->t", Xs, Xs).max()))

    def bound(T, est, facts):
        return regret_bound(T, n, k, est.sigma_, instances="dense", scale=facts[0],
                            max_trace_sq=facts[1])

    return _leader_rows(k, seeds, checkpoints, make_data, bound, dense=True)


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


def _best_time(run, repeats):
    best = np.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - t0)
    return best


def pca_trial_time(sizes=(250, 500, 1000), n_components=10, n_trials=None, seed=0):
    """Seconds per FPL trial (fixed noise, "auto" solver) on a spiked stream,
    beside one scipy eigh of the same perturbed matrix, full and top-k only, a
    trial of MEG and of GD (each a full dsyevd), and the fitted log-log slopes
    against n (best of 3 eighs for n <= 500). BLAS on one thread, as in
    ``pytest benchmarks`` (which also interleaves rounds, for the ratios quoted
    in the README): a thread pool slows a trial's many small BLAS calls on a
    busy machine far more than it speeds up one large eigh."""
    with threadpool_limits(limits=1):
        return _trial_time(sizes, n_components, n_trials, seed)


def _trial_time(sizes, n_components, n_trials, seed):
    k = n_components
    rows = {"n": [], "fpl_ms": [], "eigh_topk_ms": [], "eigh_full_ms": [], "meg_ms": [],
            "gd_ms": [], "topk/fpl": [], "full/fpl": [], "meg/fpl": [], "gd/fpl": [],
            "krylov_products_per_trial": []}
    for n in sizes:
        T = n_trials or max(20, 40_000 // n)
        X = make_spiked_stream(max(T + 5, 16), n, n_spikes=k, random_state=seed)
        est = PerturbedLeaderPCA(k, random_state=seed).partial_fit(X[:5])
        before = est.solver_stats_["products"]
        t0 = time.perf_counter()
        est.partial_fit(X[5:T + 5])
        fpl = (time.perf_counter() - t0) / T
        S = est.perturbed_matrix()
        repeats = 3 if n <= 500 else 1
        topk = _best_time(lambda: scipy.linalg.eigh(S, subset_by_index=[n - k, n - 1]),
                          repeats)
        full = _best_time(lambda: scipy.linalg.eigh(S), repeats)
        rows["n"].append(n)
        rows["fpl_ms"].append(fpl * 1e3)
        rows["eigh_topk_ms"].append(topk * 1e3)
        rows["eigh_full_ms"].append(full * 1e3)
        rows["topk/fpl"].append(topk / fpl)
        rows["full/fpl"].append(full / fpl)
        rows["krylov_products_per_trial"].append((est.solver_stats_["products"] - before) / T)
        for name, Est in (("meg", MatrixEGPCA), ("gd", MatrixGDPCA)):
            # a few trials, each a full eigendecomposition whatever the stream:
            # trials 9..14 hold none of MEG's restarts (after trials 1, 3, 7, 15),
            # which skip it
            m = 5 if n <= 500 else 2
            comparator = Est(k, random_state=seed).partial_fit(X[:8])
            t0 = time.perf_counter()
            comparator.partial_fit(X[8:8 + m])
            rows[f"{name}_ms"].append((time.perf_counter() - t0) / m * 1e3)
            rows[f"{name}/fpl"].append(rows[f"{name}_ms"][-1] / (fpl * 1e3))
    for name in ("fpl_ms", "eigh_topk_ms", "eigh_full_ms", "meg_ms", "gd_ms"):
        rows[f"slope_{name[:-3]}"] = [loglog_slope(rows["n"], rows[name])] * len(sizes)
    return rows
