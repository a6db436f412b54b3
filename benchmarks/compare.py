"""Compare the ratios of two saved pytest-benchmark runs: a regression check
that holds across machines.

Every benchmark in benchmarks/ records its ratios to a baseline timed in the
same run in pytest-benchmark's ``extra_info``, named ``ratio_<kind>_<what>``
(``benchmarks/_timing.py:record_ratios``). The kind says which way is better:

==========  ============================================  ======
kind        ratio                                         better
==========  ============================================  ======
speedup     the baseline's time / ours                    higher
time        our time / the baseline's (or a floor's)      lower
error       our error / the baseline's                    lower
memory      our memory / the baseline's                   lower
==========  ============================================  ======

This script pairs the two runs' benchmarks by pytest-benchmark's ``fullname``
(``benchmarks/test_x.py::test_y[n=500]``), prints every ratio of each
(benchmark, ratio, better, saved, new, change = new / saved - 1, verdict) and
exits with status 1 when any ratio got worse by more than the margin m: a
higher-is-better ratio when new < saved / (1 + m), a lower-is-better one when
new > saved * (1 + m). (So a speed-up and its inverse, a time ratio, fail
together.) "better" marks a ratio that improved by more than the margin.

Absolute times are NOT compared: pytest-benchmark's own statistics and the
``median_*`` entries move between machines and with the load on a shared one,
while a ratio to a baseline timed in the same run moves much less. For an
absolute check on one machine use pytest-benchmark's own
``--benchmark-compare=0001 --benchmark-compare-fail=median:25%``.

Benchmarks, or ratios, found in only one of the runs (a size only timed runs
have, a baseline skipped because its package is missing, a new benchmark) are
listed, and are no failure. A ratio_ entry of an unknown kind is listed with
"?" and not compared. Standard library only.

Usage (from the repository root)::

    python -m pytest benchmarks/test_quantile_throughput.py --benchmark-autosave  # run 0001
    # ... change the code ...
    python -m pytest benchmarks/test_quantile_throughput.py --benchmark-autosave  # run 0002
    python benchmarks/compare.py 0001 0002 --margin 0.25
    python benchmarks/compare.py .benchmarks/Linux-CPython-3.11-64bit/0001_*.json latest

SAVED and NEW are each a JSON file (``--benchmark-json``, or a saved run), a
run number as pytest-benchmark numbers its saved runs (``0001`` or ``1``:
STORAGE/<this machine>/0001_*.json, any machine's folder if this one has none)
or ``latest`` (the highest number there). STORAGE is ``./.benchmarks``, or the
``.benchmarks`` beside this folder when there is none in the current
directory. Exit status: 0 no ratio worse than the margin, 1 some ratio worse,
2 bad arguments or a run that cannot be found or read.

The same from Python:

>>> saved = {"benchmarks": [
...     {"fullname": "b.py::test_a", "extra_info": {"ratio_speedup_ours_vs_numpy": 50.0,
...                                                 "ratio_time_ours_over_c": 1.2}},
...     {"fullname": "b.py::test_old", "extra_info": {"ratio_time_x_over_y": 2.0}}]}
>>> new = {"benchmarks": [
...     {"fullname": "b.py::test_a", "extra_info": {"ratio_speedup_ours_vs_numpy": 35.0,
...                                                 "ratio_time_ours_over_c": 1.1}}]}
>>> report = compare(saved, new, margin=0.25)
>>> [(row.ratio, row.verdict) for row in report.rows]
[('ratio_speedup_ours_vs_numpy', 'WORSE'), ('ratio_time_ours_over_c', 'ok')]
>>> report.only_saved, report.failed
(['b.py::test_old'], True)
>>> print(format_report(report))        # doctest: +NORMALIZE_WHITESPACE
benchmark     ratio                        better  saved  new  change  verdict
b.py::test_a  ratio_speedup_ours_vs_numpy  higher  50     35   -30.0%  WORSE
b.py::test_a  ratio_time_ours_over_c       lower   1.2    1.1   -8.3%  ok
<BLANKLINE>
benchmarks only in SAVED (not compared):
  b.py::test_old
<BLANKLINE>
1 of 2 ratios worse by more than 25% (margin 0.25)
"""
from __future__ import annotations

import argparse
import json
import math
import platform
import sys
from dataclasses import dataclass, field
from pathlib import Path

# ratio_<kind>_<what>: the kind's better direction (the same table as
# RATIO_KINDS in benchmarks/_timing.py; a test checks they agree)
DIRECTIONS = {"speedup": "higher", "time": "lower", "error": "lower", "memory": "lower"}
PREFIX = "ratio_"
DEFAULT_MARGIN = 0.25


def direction(name):
    """"higher" or "lower" (which way ratio `name` is better), None if its kind
    is unknown."""
    parts = name.split("_", 2)
    if len(parts) < 3 or parts[0] + "_" != PREFIX or not parts[2]:
        return None
    return DIRECTIONS.get(parts[1])


@dataclass
class Row:
    """One ratio of one benchmark in both runs."""
    benchmark: str
    ratio: str
    better: str | None          # "higher", "lower" or None (unknown kind)
    saved: float
    new: float
    change: float | None        # new / saved - 1
    verdict: str                # "WORSE", "better", "ok" or "?"


@dataclass
class Report:
    rows: list = field(default_factory=list)
    only_saved: list = field(default_factory=list)      # benchmarks only in the saved run
    only_new: list = field(default_factory=list)
    ratio_only_saved: list = field(default_factory=list)    # (benchmark, ratio)
    ratio_only_new: list = field(default_factory=list)
    no_ratios: list = field(default_factory=list)       # in both runs, no ratio_ entry
    margin: float = DEFAULT_MARGIN

    @property
    def worse(self):
        return [row for row in self.rows if row.verdict == "WORSE"]

    @property
    def failed(self):
        return bool(self.worse)


def ratios_of(run):
    """{benchmark fullname: {ratio name: value}} of a pytest-benchmark JSON
    document; every benchmark, with or without ratios."""
    if not isinstance(run, dict) or not isinstance(run.get("benchmarks"), list):
        raise ValueError("not a pytest-benchmark JSON document (no 'benchmarks' list)")
    out = {}
    for bench in run["benchmarks"]:
        name = bench.get("fullname") or bench.get("name")
        extra = bench.get("extra_info") or {}
        out[name] = {k: float(v) for k, v in extra.items()
                     if k.startswith(PREFIX) and isinstance(v, (int, float))
                     and not isinstance(v, bool)}
    return out


def judge(better, saved, new, margin):
    """(change, verdict) of one ratio."""
    if better is None or not all(math.isfinite(v) and v > 0 for v in (saved, new)):
        return (new / saved - 1 if saved else None), "?"
    change = new / saved - 1
    worse_by = saved / new if better == "higher" else new / saved     # > 1: got worse
    if worse_by > 1 + margin:
        return change, "WORSE"
    if 1 / worse_by > 1 + margin:
        return change, "better"
    return change, "ok"


def compare(saved, new, margin=DEFAULT_MARGIN):
    """Compare the ratios of two pytest-benchmark JSON documents (dicts);
    returns a Report (its `failed` is True when a ratio got worse by more
    than `margin`)."""
    if not (isinstance(margin, (int, float)) and math.isfinite(margin) and margin >= 0):
        raise ValueError(f"margin must be a finite number >= 0, got {margin!r}")
    a, b = ratios_of(saved), ratios_of(new)
    report = Report(margin=margin)
    report.only_saved = sorted(set(a) - set(b))
    report.only_new = sorted(set(b) - set(a))
    for bench in sorted(set(a) & set(b)):
        ra, rb = a[bench], b[bench]
        if not ra and not rb:
            report.no_ratios.append(bench)
        for name in sorted(set(ra) | set(rb)):
            if name not in rb:
                report.ratio_only_saved.append((bench, name))
            elif name not in ra:
                report.ratio_only_new.append((bench, name))
            else:
                better = direction(name)
                change, verdict = judge(better, ra[name], rb[name], margin)
                report.rows.append(Row(bench, name, better, ra[name], rb[name], change,
                                       verdict))
    return report


def format_report(report, saved_label="SAVED", new_label="NEW"):
    """The report as text: the table, then what was only in one run, then a
    summary line."""
    head = ("benchmark", "ratio", "better", "saved", "new", "change", "verdict")
    cells = [head] + [(r.benchmark, r.ratio, r.better or "?", f"{r.saved:.4g}", f"{r.new:.4g}",
                       f"{r.change:+.1%}" if r.change is not None else "n/a", r.verdict)
                      for r in report.rows]
    widths = [max(len(c[i]) for c in cells) for i in range(len(head))]
    right = {5}         # the change column, aligned on its sign and percent
    lines = ["  ".join(c[i].rjust(w) if i in right else c[i].ljust(w)
                       for i, w in enumerate(widths)).rstrip() for c in cells]
    if not report.rows:
        lines = ["no ratio found in both runs"]
    sections = [(f"benchmarks only in {saved_label} (not compared):", report.only_saved),
                (f"benchmarks only in {new_label} (not compared):", report.only_new),
                (f"ratios only in {saved_label} (not compared):",
                 [f"{b}  {r}" for b, r in report.ratio_only_saved]),
                (f"ratios only in {new_label} (not compared):",
                 [f"{b}  {r}" for b, r in report.ratio_only_new]),
                ("benchmarks with no ratio_* in extra_info (nothing to compare):",
                 report.no_ratios)]
    for title, items in sections:
        if items:
            lines += ["", title] + [f"  {item}" for item in items]
    unknown = sum(r.verdict == "?" for r in report.rows)
    lines += ["", f"{len(report.worse)} of {len(report.rows)} ratios worse by more than "
                  f"{report.margin:.0%} (margin {report.margin:g})"
              + (f"; {unknown} not judged (unknown kind: ratio_<kind>_ with kind in "
                 f"{', '.join(DIRECTIONS)})" if unknown else "")]
    return "\n".join(lines)


def machine_id():
    """pytest-benchmark's name for this machine's folder of saved runs."""
    return "-".join((platform.system(), platform.python_implementation(),
                     ".".join(platform.python_version_tuple()[:2]),
                     platform.architecture()[0]))


def default_storage():
    here = Path.cwd() / ".benchmarks"
    return here if here.is_dir() else Path(__file__).resolve().parent.parent / ".benchmarks"


def find_run(spec, storage):
    """The path of a run: a JSON file, a run number or "latest"; raises
    FileNotFoundError (with what was searched) otherwise."""
    path = Path(spec)
    if path.is_file():
        return path
    storage = Path(storage)
    if not (spec.isdigit() or spec == "latest"):
        raise FileNotFoundError(f"{spec!r}: no such file, and not a run number or 'latest'")
    mine = storage / machine_id()
    folders = [mine] if mine.is_dir() else sorted(p for p in storage.glob("*") if p.is_dir())
    runs = [p for folder in folders for p in folder.glob("[0-9][0-9][0-9][0-9]_*.json")]
    if spec == "latest":
        if not runs:
            raise FileNotFoundError(f"no saved runs in {storage} (pytest --benchmark-autosave "
                                    f"saves them there)")
        if len({p.parent for p in runs}) > 1:
            raise FileNotFoundError(f"'latest' is ambiguous: saved runs of several machines "
                                    f"in {storage} and none of this one ({mine.name}); "
                                    f"give a file")
        return max(runs, key=lambda p: p.name[:4])
    number = f"{int(spec):04d}"
    found = [p for p in runs if p.name.startswith(number + "_")]
    if len(found) != 1:
        where = ", ".join(str(f) for f in folders) or str(storage)
        raise FileNotFoundError(f"run {number}: {len(found) or 'no'} saved runs numbered so "
                                f"in {where}" + ("; give a file" if found else ""))
    return found[0]


def load(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="compare.py", description="Compare the ratio_* entries of two saved "
        "pytest-benchmark runs; exit 1 if any got worse by more than the margin. "
        "Absolute times are not compared.")
    parser.add_argument("saved", help="the run to compare against: a JSON file, a run "
                        "number (0001) or 'latest'")
    parser.add_argument("new", help="the new run: a JSON file, a run number or 'latest'")
    parser.add_argument("--margin", type=float, default=DEFAULT_MARGIN,
                        help="allowed relative worsening of a ratio (default %(default)s: "
                        "a speed-up may fall to saved / 1.25, a time ratio rise to "
                        "saved x 1.25)")
    parser.add_argument("--storage", default=None, help="folder of saved runs "
                        "(default ./.benchmarks, else the one beside benchmarks/)")
    args = parser.parse_args(argv)
    if not (math.isfinite(args.margin) and args.margin >= 0):
        parser.error(f"--margin must be a finite number >= 0, got {args.margin}")
    storage = args.storage or default_storage()
    runs = []
    for spec in (args.saved, args.new):
        try:
            path = find_run(spec, storage)
            runs.append((path, load(path)))
            ratios_of(runs[-1][1])
        except (OSError, ValueError) as exc:        # JSONDecodeError is a ValueError
            parser.exit(2, f"compare.py: {spec}: {exc}\n")
    (saved_path, saved), (new_path, new) = runs
    report = compare(saved, new, args.margin)
    print(f"SAVED: {saved_path}\nNEW:   {new_path}\n")
    print(format_report(report))
    return 1 if report.failed else 0


if __name__ == "__main__":
    sys.exit(main())
