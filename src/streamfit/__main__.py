"""The main job: run the paper experiments on built-in synthetic data and
print their tables.

    python -m streamfit            # the quick run (about 100 s)
    python -m streamfit --full     # the paper's sizes and 50 replications
    python -m streamfit --plots out/   # also save Figure 4's curves (needs matplotlib)
"""
from __future__ import annotations

import argparse
import os
import sys
import time

from .experiments import (adversarial_regret, comparator_regret, dense_regret, format_table,
                          least_squares_comparison, noise_comparison, offline_comparison,
                          parameter_sensitivity, pca_trial_time, plot_paths, regret_dynamics,
                          stepsize_comparison, stepsize_paths, stochastic_regret)

EXPERIMENTS = ("pca-regret", "pca-noise", "pca-stochastic", "pca-dense", "pca-compare",
               "pca-time",
               "stepsizes", "offline", "least-squares", "sensitivity", "regret")


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m streamfit", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--full", action="store_true",
                        help="the paper's replication counts (50 offline fits per setting: "
                             "about an hour)")
    parser.add_argument("--seeds", type=int, default=None,
                        help="replications per setting (default 2 quick, 50 full)")
    parser.add_argument("--only", choices=EXPERIMENTS, action="append",
                        help="run only this experiment (repeatable)")
    parser.add_argument("--plots", metavar="DIR", default=None,
                        help="save Figure 4's error curves as PNG files in DIR "
                             "(needs matplotlib: pip install 'streamfit[plot]')")
    args = parser.parse_args(argv)
    n_seeds = args.seeds or (50 if args.full else 2)
    seeds = tuple(range(n_seeds))
    todo = args.only or EXPERIMENTS
    print(f"streamfit: online PCA (Kotlowski & Warmuth) and online quantile regression "
          f"(Shen, Xia & Zhou 2025) experiments, {n_seeds} seed(s) per setting\n")

    offline_seeds = seeds if args.full else seeds[:max(1, n_seeds // 2)]
    pca_seeds = tuple(range(max(3, n_seeds) if not args.full else max(10, n_seeds)))
    runs = {
        "pca-regret": (lambda: adversarial_regret(seeds=pca_seeds),
                       "Online PCA -- regret on the adversarial sequence for Follow the Leader "
                       "(make_ftl_adversary), n = 10, k = 2: FTL vs FPL (auto sigma, fixed "
                       "noise; mean/sd over seeds) vs the paper's bound; log-log slopes"),
        "pca-noise": (lambda: noise_comparison(seeds=pca_seeds),
                      "Online PCA -- FPL's noise processes on the same sequence, T = 20,000"),
        "pca-stochastic": (lambda: stochastic_regret(seeds=seeds),
                           "Online PCA -- i.i.d. spiked stream, n = 50, k = 3: FTL vs FPL "
                           "regret"),
        "pca-dense": (lambda: dense_regret(seeds=seeds),
                      "Online PCA -- dense instances (mini-batch second moments), n = 30, "
                      "k = 3: regret vs the dense bound"),
        "pca-compare": (lambda: comparator_regret(seeds=pca_seeds),
                        "Online PCA -- all four algorithms: FTL, FPL (auto sigma; mean over "
                        "seeds), MEG and GD (eta 'auto'; expected regret, and *_sampled: the "
                        "regret of the projections they sampled, one seed) beside their bounds, on "
                        "the FTL adversary (n = 10, k = 2) and an i.i.d. spiked stream "
                        "(n = 50, k = 3); log-log slopes per stream"),
        "pca-time": (lambda: pca_trial_time(sizes=(250, 500, 1000, 2000) if args.full
                                            else (250, 500, 1000)),
                     "Online PCA -- milliseconds per FPL trial (k = 10, spiked stream) vs one "
                     "scipy eigh of the same matrix (top-k only and full) and a trial of MEG "
                     "and of GD; slopes vs n; one BLAS thread, as in pytest benchmarks "
                     "(which interleave rounds for the README's ratios)"),
        "stepsizes": (lambda: stepsize_comparison(seeds=seeds),
                      "Figure 4 -- final relative error ||b - b*|| / ||b*||, d = 100, T = 1e5, "
                      "t_1.1 noise, tau = 0.5, beta_0 = 0; best_* = best point of a 16-point "
                      "grid (in hindsight)"),
        "offline": (lambda: offline_comparison(seeds=offline_seeds),
                    "Figures 5/6 -- online vs offline quantile regression (HiGHS LP), d = 100, "
                    "t_1.1 noise: median relative errors and seconds"),
        "least-squares": (lambda: least_squares_comparison(seeds=seeds),
                          "Figure 7 -- online quantile regression vs online least squares, "
                          "d = 100, tau = 0.5, ||b*|| = 1000: relative errors"),
        "sensitivity": (lambda: parameter_sensitivity(seeds=seeds),
                        "Figure 8 -- final relative error as one schedule constant varies "
                        "(defaults decay 0.5, Ca 20, Cb 30), d = 100, T = 1e5, SNR 20"),
        "regret": (lambda: regret_dynamics(constant_eta=best_constant.get((20.0, 0))),
                   "Figure 9 / Theorem 4 -- prequential regret against beta*, statistical "
                   "schedule vs the best constant, d = 100, SNR 20"),
    }
    best_constant = {}      # (snr, seed) -> the Figure 4 grid's best constant, once found
    for name in EXPERIMENTS:
        if name not in todo:
            continue
        t0 = time.perf_counter()
        run, title = runs[name]
        table = run()
        print(format_table(table, title))
        if name == "stepsizes":
            best_constant.update(zip(zip(table["snr"], table["seed"]),
                                     table["best_constant_eta"]))
        if name == "stepsizes" and args.plots:
            os.makedirs(args.plots, exist_ok=True)
            for i, (snr, seed) in enumerate(zip(table["snr"], table["seed"])):
                if seed != seeds[0]:
                    continue
                # the comparators' best constants from the table just run
                paths = stepsize_paths(snr=snr, seed=seed,
                                       constant_eta=table["best_constant_eta"][i],
                                       inverse_time_c=table["best_inverse_time_c"][i])
                out = os.path.join(args.plots, f"figure4_snr{int(snr)}.png")
                plot_paths(paths, out, f"Figure 4: d = 100, t_1.1 noise, SNR {snr:g}")
                print(f"saved {out}")
        print(f"[{time.perf_counter() - t0:.1f} s]\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
