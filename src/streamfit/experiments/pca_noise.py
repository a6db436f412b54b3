"""FPL's three noise processes -- one fixed N, a Gaussian random walk,
independent draws -- with enough seeds for confidence intervals.

Against an oblivious sequence the expected gain of trial t depends only on
the law of the noise at t, and all three give N_t the law of sqrt(t) sigma N:
the paper's argument (Section 'Gaussian perturbations') implies equal expected
regret. Only the spread may differ.
"""
from __future__ import annotations

import numpy as np

from ..pca import PerturbedLeaderPCA, regret_bound
from ..simulate import make_ftl_adversary, make_spiked_stream
from . import _plot
from ._runner import Task
from ._stats import diff_ci, mean_ci
from ._types import Check, Experiment, Outcome

NOISES = ("fixed", "random_walk", "independent")
#: equal expected regret, tested as equivalence: the difference's interval
#: must lie within this fraction of fixed noise's mean regret
MARGIN = 0.2





def _stream(name, n, k, T):
    if name == "adversary":
        return make_ftl_adversary(T, n, k)
    # one weak spike stream (the same for every seed: only FPL's noise varies)
    return make_spiked_stream(T, n, n_spikes=k, strength=n ** 1.25 / np.sqrt(k * T),
                              random_state=12345)


def run_noise(stream, n, k, T, noise, seed):
    """(regret, the theorem's bound at FPL's sigma) of one seed."""
    X = _stream(stream, n, k, T)
    est = PerturbedLeaderPCA(k, noise=noise, random_state=seed).partial_fit(X)
    return float(est.regret_), regret_bound(T, n, k, est.sigma_)


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
            vals[z] = np.array([r[0] for r in results[i:i + reps]])
            bounds = [r[1] for r in results[i:i + reps]]
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
        base = vals["fixed"].mean()
        for z in NOISES[1:]:
            d, dh = diff_ci(vals[z], vals["fixed"], level)
            margin = MARGIN * base
            checks.append(Check(
                f"{s}: {z.replace('_', ' ')} noise has fixed noise's expected regret: "
                f"difference {d:+.2f}, {100 * level:.1f}% CI [{d - dh:+.2f}, {d + dh:+.2f}] "
                f"over {reps} seeds each (fixed noise's mean {base:.1f})",
                abs(d) + dh <= margin, against=abs(d) - dh > margin,
                requires=f"the whole interval inside +-{MARGIN:.0%} of fixed noise's mean "
                         f"(+-{margin:.1f})"))
        bound = float(np.min(bounds))
        worst = max(mean_ci(vals[z])[0] + mean_ci(vals[z])[1] for z in NOISES)
        checks.append(Check(f"{s}: the regret bound holds alike for the three processes: "
                            f"largest upper 95% CI end of the mean regret {worst:.1f} below "
                            f"the bound {bound:.1f}", worst < bound,
                            requires="every process's whole interval below the bound"))
    setting = (f"FPL with sigma 'auto' on two oblivious streams: FTL's adversary and one weak-"
               f"spike stream (strength n^(5/4) / sqrt(kT), fixed data seed); {reps} noise "
               "seeds per process. Means with Student-t 95% intervals; differences to fixed "
               "noise with Welch intervals at the Bonferroni level for two comparisons, judged "
               f"as an equivalence test (inside +-{MARGIN:.0%} of fixed noise's mean). The "
               "bound: the main theorem's at FPL's default sigma (streamfit.pca.regret_bound, "
               "with the sqrt(2)-corrected GOE term, see `pca-goe`).")
    return Outcome(setting=setting, tables=[("Regret by noise process", table)],
                   figures={"pca_noise_processes": fig}, checks=checks)


EXPERIMENT = Experiment(
    name="pca-noise", paper="000",
    title="Noise processes: fixed, random walk, independent",
    claim=("N_t = sqrt(t) N with one N; in the paper's words, 'we can also express N_t as a "
           "sum of t independent copies of N [...] We thus get an equivalent picture of our "
           "algorithm in which in each trial, an independent noise variable [...] is added': "
           "N_t has the same law in each (and for a fresh draw each trial), so against an "
           "oblivious sequence the expected regret, and the bound, are the same."),
    presets={"quick": dict(streams={"adversary": (10, 2, 4000), "weak spike": (32, 2, 1500)},
                           reps=48),
             "tiny": dict(streams={"adversary": (6, 2, 500), "weak spike": (8, 2, 300)}, reps=6),
             "full": dict(streams={"adversary": (10, 2, 20_000), "weak spike": (32, 2, 8000)},
                          reps=100)},
    tasks=_tasks, analyse=_analyse)
