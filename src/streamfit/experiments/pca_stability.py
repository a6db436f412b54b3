"""The per-trial stability bound of Kotłowski & Warmuth's main theorem, the
first sum of their Lemma 1: for the perturbed leader P_t = P(X_<t + N_t) and
the 'be the perturbed leader' P~_t = P(X_<t + N_t + X_t) (the same noise,
the instance included),

    E tr((P~_t - P_t) X_t) <= r sqrt(tr(X_t^2)) / sqrt(2 pi t sigma^2),

r = 1 for unit vector instances, r = k for dense ones. Measured by Monte
Carlo over the noise N_t = sqrt(t) N, with common random numbers (each draw
gives both P_t and P~_t), at several t of a stream."""
from __future__ import annotations

import numpy as np

from ..pca import goe_matrix
from ..simulate import make_spiked_stream
from . import _plot
from ._runner import Task
from ._stats import mean_ci
from ._types import SANITY, Check, Experiment, Outcome


def _top_k(A, k):
    w, V = np.linalg.eigh(A)
    return V[:, -k:]


def run_stability(kind, n, k, sigma, t, draws, seed):
    """Monte Carlo of tr((P~_t - P_t) X_t) over ``draws`` noise draws at trial
    t of a fixed stream; returns the draws' values and the bound."""
    rng = np.random.default_rng([seed, t, n, k, 0 if kind == "vector" else 1])
    if kind == "vector":
        rows = make_spiked_stream(t, n, n_spikes=k, strength=2.0, random_state=seed)
        past = rows[:-1].T @ rows[:-1]
        X = np.outer(rows[-1], rows[-1])
        r = 1.0
    else:
        # dense instances: diagonal 0/1 matrices with a slight bias on k coordinates
        p = np.full(n, 0.5)
        p[:k] += 0.1
        D = (np.random.default_rng(seed).random((t, n)) < p).astype(float)
        past = np.diag(D[:-1].sum(axis=0))
        # a rotation, so that the instances are not diagonal in the solver's basis
        Q = np.linalg.qr(np.random.default_rng([seed, 1]).standard_normal((n, n)))[0]
        past = Q @ past @ Q.T
        X = Q @ np.diag(D[-1]) @ Q.T
        r = float(k)
    bound = r * np.sqrt(np.sum(X * X)) / np.sqrt(2 * np.pi * t * sigma ** 2)
    vals = []
    for _ in range(draws):
        N = np.sqrt(t) * goe_matrix(n, sigma, random_state=rng)
        V = _top_k(past + N, k)
        W = _top_k(past + N + X, k)
        vals.append(float(np.sum((W.T @ X) * W.T) - np.sum((V.T @ X) * V.T)))
    return {"values": vals, "bound": float(bound)}


def _tasks(p):
    return [Task(run_stability, dict(kind=kind, n=n, k=k, sigma=p["sigma"], t=t,
                                     draws=p["draws"]), seed)
            for kind, (n, k) in p["cases"].items() for t in p["trials"]
            for seed in range(p["streams"])]


def _analyse(p, results):
    cases, trials, S = dict(p["cases"]), list(p["trials"]), p["streams"]
    fig, axes = _plot.new_figure(len(cases), width=4.8)
    table = {k: [] for k in ("instances", "n", "k", "t", "mean gain difference",
                             "95% CI +-", "bound", "mean / bound")}
    checks, i = [], 0
    for ax, (kind, (n, k)) in zip(axes, cases.items()):
        ratios, worst, means, bounds, lowest = [], 0.0, [], [], np.inf
        for t in trials:
            res = results[i:i + S]
            i += S
            # each stream's bound at its own X_t: the ratio per draw, pooled
            vals = np.concatenate([np.asarray(r["values"]) / r["bound"] for r in res])
            m, h = mean_ci(vals)
            bound = float(np.mean([r["bound"] for r in res]))
            raw = np.concatenate([r["values"] for r in res])
            lowest = min(lowest, float(raw.min()))
            mr, hr = mean_ci(raw)
            worst = max(worst, m + h)
            ratios.append((t, m, h))
            means.append(mr)
            bounds.append(bound)
            for key, v in zip(table, (kind, n, k, t, mr, hr, bound, m)):
                table[key].append(v)
        ts = np.array(trials, float)
        ax.errorbar(ts, [m for _, m, _ in ratios], yerr=[h for _, _, h in ratios], fmt="o-",
                    capsize=3, label="E tr((P~_t - P_t) X_t) / bound, 95% CI")
        ax.axhline(1.0, color="k", ls="--", lw=1, label="the bound")
        _plot.finish(ax, xlabel="trial t", ylabel="measured / bound", logy=False,
                     title=f"{kind} instances, n = {n}, k = {k}, sigma = {p['sigma']:g}")
        _plot.value_ticks(ax, trials)
        checks.append(Check(
            f"{kind} instances (n = {n}, k = {k}): E tr((P~_t - P_t) X_t) <= r sqrt(tr X_t^2) "
            f"/ sqrt(2 pi t sigma^2) at every t in {trials}: largest upper 95% CI end of "
            f"measured / bound {worst:.3f} ({S} streams x {p['draws']} noise draws a t)",
            worst <= 1.0, requires="every t's whole 95% interval at or below 1",
            against=any(m - h > 1.0 for _, m, h in ratios)))
        checks.append(Check(
            f"{kind}: P~_t gains at least as much as P_t on X_t in every draw (it maximises "
            f"with X_t included; smallest difference {lowest:.2e})", lowest >= -1e-9,
            role=SANITY))
    setting = (f"Streams: vector = unit-norm rows of make_spiked_stream (k spikes, strength 2), "
               "dense = rotated diagonal 0/1 instances with P(1) = 0.6 on k coordinates and "
               f"0.5 elsewhere; sigma = {p['sigma']:g}; at each trial t in {trials}, "
               f"{p['streams']} streams and {p['draws']} draws of N_t = sqrt(t) N each, N a "
               "GOE matrix (streamfit.pca.goe_matrix); P_t and P~_t by a full "
               "eigendecomposition of X_<t + N_t and X_<t + N_t + X_t with the same draw "
               "(common random numbers). Measured / bound per draw (each stream's own "
               "tr(X_t^2)), mean and Student-t 95% interval.")
    notes = ("This is the first sum of Lemma 1, bounded trial by trial in the main theorem's "
             "proof (by the mean value theorem and the Gaussian density's derivative); its "
             "sum over t gives the bound's r sqrt(2 T max tr(X_t^2) / (pi sigma^2)) term. The "
             "second sum, sqrt(T) E lambda_1:k(N), is `pca-goe`'s.")
    return Outcome(setting=setting, tables=[("Per-trial stability term", table)],
                   figures={"pca_stability": fig}, checks=checks, notes=notes)


EXPERIMENT = Experiment(
    name="pca-stability", paper="000",
    title="Lemma 1's stability term, trial by trial, against its bound",
    claim=("The proof of the main theorem bounds the first sum of Lemma 1 trial by trial: "
           "'E[tr((P~_t - P_t) X_t)] <= r sqrt(tr(X_t^2)) / sqrt(2 pi t sigma^2)', with r = k "
           "for dense instances and r = 1 for sparse (unit vector) ones, P~_t the leader "
           "with X_t included and the same noise."),
    presets={"quick": dict(cases={"vector": (20, 2), "dense": (20, 2)}, sigma=1.0,
                           trials=(10, 100, 1000), streams=4, draws=400),
             "tiny": dict(cases={"vector": (8, 2), "dense": (8, 2)}, sigma=1.0,
                          trials=(10, 100), streams=2, draws=60),
             "full": dict(cases={"vector": (50, 3), "dense": (50, 3)}, sigma=1.0,
                          trials=(10, 100, 1000, 10000), streams=10, draws=2000)},
    tasks=_tasks, analyse=_analyse)
