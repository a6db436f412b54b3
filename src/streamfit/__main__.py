"""The main job: run the paper experiments on built-in synthetic data and
print their tables.

    python -m streamfit            # the quick run (about a minute and a half)
    python -m streamfit --full     # the paper's sizes and 50 replications
    python -m streamfit --plots out/   # also save Figure 4's curves (needs matplotlib)
"""
from __future__ import annotations

import argparse
import os
import sys
import time

from .experiments import (format_table, least_squares_comparison, offline_comparison,
                          parameter_sensitivity, plot_paths, regret_dynamics,
                          stepsize_comparison, stepsize_paths)

EXPERIMENTS = ("stepsizes", "offline", "least-squares", "sensitivity", "regret")


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
    print(f"streamfit: online quantile regression experiments "
          f"(Shen, Xia & Zhou 2025), {n_seeds} seed(s) per setting\n")

    if "stepsizes" in todo:
        t0 = time.perf_counter()
        table = stepsize_comparison(seeds=seeds)
        print(format_table(table, "Figure 4 -- final relative error ||b - b*|| / ||b*||, "
                                  "d = 100, T = 1e5, t_1.1 noise, tau = 0.5, beta_0 = 0; "
                                  "best_* = best point of a 16-point grid (in hindsight)"))
        if args.plots:
            os.makedirs(args.plots, exist_ok=True)
            for snr in (20.0, 200.0):
                paths = stepsize_paths(snr=snr)
                out = os.path.join(args.plots, f"figure4_snr{int(snr)}.png")
                plot_paths(paths, out, f"Figure 4: d = 100, t_1.1 noise, SNR {snr:g}")
                print(f"saved {out}")
        print(f"[{time.perf_counter() - t0:.1f} s]\n")
    if "offline" in todo:
        t0 = time.perf_counter()
        table = offline_comparison(seeds=seeds[:max(1, n_seeds // 2)] if not args.full else seeds)
        print(format_table(table, "Figures 5/6 -- online vs offline quantile regression "
                                  "(HiGHS LP), d = 100, t_1.1 noise: median relative errors "
                                  "and seconds"))
        print(f"[{time.perf_counter() - t0:.1f} s]\n")
    if "least-squares" in todo:
        t0 = time.perf_counter()
        table = least_squares_comparison(seeds=seeds)
        print(format_table(table, "Figure 7 -- online quantile regression vs online least "
                                  "squares, d = 100, tau = 0.5, ||b*|| = 1000: relative errors"))
        print(f"[{time.perf_counter() - t0:.1f} s]\n")
    if "sensitivity" in todo:
        t0 = time.perf_counter()
        table = parameter_sensitivity(seeds=seeds)
        print(format_table(table, "Figure 8 -- final relative error as one schedule constant "
                                  "varies (defaults decay 0.5, Ca 20, Cb 30), d = 100, "
                                  "T = 1e5, SNR 20"))
        print(f"[{time.perf_counter() - t0:.1f} s]\n")
    if "regret" in todo:
        t0 = time.perf_counter()
        table = regret_dynamics()
        print(format_table(table, "Figure 9 / Theorem 4 -- prequential regret against beta*, "
                                  "statistical schedule vs the best constant, d = 100, SNR 20"))
        print(f"[{time.perf_counter() - t0:.1f} s]\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
