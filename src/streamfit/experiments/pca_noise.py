"""FPL's three noise processes -- one fixed N, a Gaussian random walk,
independent draws -- with enough seeds for confidence intervals.

Against an oblivious sequence the expected gain of trial t depends only on
the law of the noise at t, and all three give N_t the law of sqrt(t) sigma N:
the paper's argument (Section 'Gaussian perturbations') implies equal expected
regret. Only the spread may differ.
"""
from __future__ import annotations

import numpy as np

from ..pca import PerturbedLeaderPCA
from ..simulate import make_ftl_adversary, make_spiked_stream
from . import _plot
from ._runner import Task
from ._stats import diff_ci, mean_ci
from ._types import Check, Experiment, Outcome

NOISES = ("fixed", "random_walk", "independent")


def _stream(name, n, k, T):
    if name == "adversary":
        return make_ftl_adversary(T, n, k)
    # one weak spike stream (the same for every seed: only FPL's noise varies)
    return make_spiked_stream(T, n, n_spikes=k, strength=n ** 1.25 / np.sqrt(k * T),
                              random_state=12345)


def run_noise(stream, n, k, T, noise, seed):
    X = _stream(stream, n, k, T)
    return float(PerturbedLeaderPCA(k, noise=noise, random_state=seed).partial_fit(X).regret_)


def _tasks(p):
    return [Task(run_noise, dict(stream=s, n=n, k=k, T=T, noise=z), seed)
            for s, (n, k, T) in p["streams"].items() for z in NOISES
            for seed in range(p["reps"])]


def _analyse(p, results):
    reps = p["reps"]
    streams = list(p["streams"])
    fig, axes = _plot.new_figure(len(streams), width=4.6)
    table = {k: [] for k in ("stream", "noise", "mean regret", "95% CI +-", "sd",
                             "minus fixed", "diff CI +- (Bonferroni)")}
    checks = []
    level = 1 - 0.05 / (len(NOISES) - 1)          # two comparisons per stream
    for si, (s, ax) in enumerate(zip(streams, axes)):
        vals = {}
        for zi, z in enumerate(NOISES):
            i = (si * len(NOISES) + zi) * reps
            vals[z] = np.array(results[i:i + reps])
        ok = True
        for zi, z in enumerate(NOISES):
            m, h = mean_ci(vals[z])
            d, dh = diff_ci(vals[z], vals["fixed"], level) if z != "fixed" else (0.0, 0.0)
            if z != "fixed":
                ok &= abs(d) <= dh
            for key, v in zip(table, (s, z, m, h, vals[z].std(ddof=1), d, dh)):
                table[key].append(v)
            jitter = zi + np.linspace(-0.15, 0.15, reps)
            ax.plot(jitter, vals[z], ".", color=f"C{zi}", alpha=0.5, ms=4)
            ax.errorbar([zi], [m], yerr=[h], fmt="o", color="k", capsize=4, ms=5)
        ax.set_xticks(range(len(NOISES)))
        ax.set_xticklabels(NOISES)
        n, k, T = p["streams"][s]
        _plot.finish(ax, xlabel="noise process", ylabel="regret", logx=False, logy=False,
                     legend=False, title=f"{s}: n = {n}, k = {k}, T = {T:,} ({reps} seeds; mean, "
                                         "95% CI)")
        diffs = [table["minus fixed"][-2], table["minus fixed"][-1]]
        checks.append(Check(f"{s}: random walk and independent noise match fixed noise in "
                            f"expected regret (differences {diffs[0]:+.2f}, {diffs[1]:+.2f}; "
                            f"{100 * level:.1f}% CIs contain 0)", bool(ok)))
    setting = (f"FPL with sigma 'auto' on two oblivious streams: FTL's adversary and one weak-"
               f"spike stream (strength n^(5/4) / sqrt(kT), fixed data seed); {reps} noise "
               "seeds per process (the previous table used 2). Means with Student-t 95% "
               "intervals; differences to fixed noise with Welch intervals at the Bonferroni "
               "level for two comparisons.")
    return Outcome(setting=setting, tables=[("Regret by noise process", table)],
                   figures={"pca_noise_processes": fig}, checks=checks)


EXPERIMENT = Experiment(
    name="pca-noise", paper="000",
    title="Noise processes: fixed, random walk, independent",
    claim=("N_t = sqrt(t) N with one N, or equivalently a sum of t independent copies (a "
           "random walk), or (for adaptive adversaries) a fresh draw each trial: N_t has the "
           "same law in each, and the bound holds alike; against an oblivious adversary the "
           "noise may be drawn once."),
    presets={"quick": dict(streams={"adversary": (10, 2, 4000), "weak spike": (32, 2, 1500)},
                           reps=16),
             "tiny": dict(streams={"adversary": (6, 2, 500), "weak spike": (8, 2, 300)}, reps=4),
             "full": dict(streams={"adversary": (10, 2, 20_000), "weak spike": (32, 2, 8000)},
                          reps=100)},
    tasks=_tasks, analyse=_analyse)
