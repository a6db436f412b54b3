"""The main job: reproduce both papers experiment by experiment and write a
report folder (report.md with per-experiment setting, claim, verdict, tables,
and PNG figures drawn like the papers').

    python -m streamfit                      # the quick preset: {QUICK_TIME}
    python -m streamfit --full               # the paper's sizes, 50 replications (hours)
    python -m streamfit --only qr-fig4 --only pca-goe --out my-report
    python -m streamfit --only qr-table1 --data PATH   # Table 1 on the news data
    python -m streamfit --scheduler tcp://host:8786   # on an existing Dask cluster
    python -m streamfit --workers 0          # no Dask: run in this process

Replications and grid points run as Dask tasks on a LocalCluster started and
closed by the command (one single-threaded worker process per core), or on
the cluster at --scheduler; results equal the sequential run's for the same
seeds. One line is printed per finished experiment (its verdict and times).
--only into a folder that holds a report updates those sections and keeps the
others.
"""
from __future__ import annotations

import argparse
import os
import shlex
import sys
import time

#: the quick preset's measured duration, as the docstring and the docs state
#: it (README, docs/install.md; the report's header holds each run's own)
QUICK_TIME = ("7 min 11 s of wall time and 796 s of CPU time on 2 idle cores for the 29 "
              "experiments it had then (2026-12-07; the 30th, qr-sparse, adds 14 s of CPU), "
              "longer on a shared machine; each report's header states its own run's wall "
              "and CPU time")
__doc__ = __doc__.replace("{QUICK_TIME}", QUICK_TIME)


def _parser(names):
    parser = argparse.ArgumentParser(prog="python -m streamfit", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--quick", dest="preset", action="store_const", const="quick",
                      help="the default replication counts: " + QUICK_TIME)
    size.add_argument("--full", dest="preset", action="store_const", const="full",
                      help="the papers' sizes and 50 replications (5 seeds a point for the "
                           "PCA scans, 20 for Theorem 5's million-sample runs, 100 for the GOE "
                           "and noise tables); hours on 2 cores")
    parser.set_defaults(preset="quick")
    parser.add_argument("--out", metavar="DIR", default="streamfit-report",
                        help="report folder (default ./streamfit-report); checked writable "
                             "before any work")
    parser.add_argument("--only", metavar="NAME", action="append", choices=names,
                        help="run only this experiment (repeatable): " + ", ".join(names))
    parser.add_argument("--data", metavar="PATH", default=None,
                        help="the news popularity data of the quantile paper's Table 1 (the "
                             "UCI 'News Popularity in Multiple Social Media Platforms' "
                             "folder or zip: News_Final.csv and Facebook_Economy.csv) for "
                             "qr-table1; without it qr-table1 is reported as not run")
    parser.add_argument("--reps", type=int, default=None, metavar="N",
                        help="replications per setting, overriding the preset")
    parser.add_argument("--scheduler", metavar="ADDRESS", default=None,
                        help="address of an existing Dask scheduler to run the tasks on")
    parser.add_argument("--workers", type=int, default=None, metavar="N",
                        help="worker processes of the local Dask cluster (default: one per "
                             "core); 0 runs every task in this process, without Dask")
    bars = parser.add_mutually_exclusive_group()
    bars.add_argument("--progress", dest="progress", action="store_true", default=None,
                      help="progress bars on stderr (the default when stderr is a terminal)")
    bars.add_argument("--no-progress", dest="progress", action="store_false",
                      help="no progress bars")
    parser.add_argument("--list", action="store_true", help="list the experiments and exit")
    return parser


def _check_report_dependencies():
    missing = []
    for name in ("matplotlib", "tqdm"):
        try:
            __import__(name)
        except ImportError:
            missing.append(name)
    if missing:
        raise SystemExit(f"python -m streamfit needs {' and '.join(missing)} for its figures and "
                         "progress bars: pip install 'streamfit[report]'")


def main(argv=None):
    from .experiments import EXPERIMENTS, open_runner, write_report
    from .experiments.report import ReportMergeError, _merge_plan, check_writable
    from .experiments.qr_table1 import check_news_data

    names = [e.name for e in EXPERIMENTS]
    parser = _parser(names)
    args = parser.parse_args(argv)
    if args.list:
        for e in EXPERIMENTS:
            print(f"{e.name:22s} [{e.paper}] {e.title}")
        return 0
    if args.workers is not None and args.workers < 0:
        parser.error("--workers must be >= 0")
    if args.reps is not None and args.reps < 1:
        parser.error("--reps must be >= 1")
    _check_report_dependencies()
    chosen = [e for e in EXPERIMENTS if not args.only or e.name in args.only]
    overrides = {e.name: {"reps": args.reps} for e in chosen
                 if args.reps is not None and "reps" in e.presets[args.preset]}
    if args.data is not None:
        if not any(e.name == "qr-table1" for e in chosen):
            parser.error("--data is the input of qr-table1, which this run does not include")
        try:
            check_news_data(args.data)
        except (OSError, ValueError) as exc:
            parser.error(f"--data {args.data}: {exc}")
        overrides.setdefault("qr-table1", {})["data"] = os.path.abspath(args.data)
    # before any work: a folder we cannot write, or a report we cannot update
    try:
        check_writable(args.out)
        _merge_plan(args.out, {e.name for e in chosen}, args.preset)
    except (PermissionError, ReportMergeError) as exc:
        parser.error(str(exc))
    command = "python -m streamfit " + shlex.join(sys.argv[1:] if argv is None else argv)
    print(f"streamfit: {len(chosen)} experiment(s), {args.preset} preset, report in "
          f"{args.out}/", flush=True)
    t0 = time.perf_counter()
    with open_runner(workers=args.workers, scheduler=args.scheduler) as runner:
        print(f"running on {runner.description}", flush=True)
        progress = sys.stderr.isatty() if args.progress is None else args.progress
        write_report(chosen, preset=args.preset, out=args.out, runner=runner,
                     progress=progress, overrides=overrides,
                     echo=lambda line: print(line, flush=True), command=command.strip())
    print(f"wrote {os.path.join(args.out, 'report.md')} in {time.perf_counter() - t0:.0f} s",
          flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
