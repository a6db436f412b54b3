"""Timing helpers the online PCA suites share (test_pca_throughput.py,
test_pca_comparators.py): a wall clock around one call, and the statistics of
a suite's results, a dict (name, n) -> list of seconds, one per round.

Plain functions, not fixtures: the suites' table and floor code calls them
outside any test. Imported relatively (``from ._timing import ...``):
pytest's importlib mode (pyproject.toml) puts no test folder on sys.path.
"""
from __future__ import annotations

import time

import numpy as np


def clock(times, fn, *args, per=1, **kwargs):
    """fn(*args, **kwargs), its wall time / per appended to times; returns None so
    that no result stays alive into the next contender's run."""
    start = time.perf_counter()
    fn(*args, **kwargs)
    times.append((time.perf_counter() - start) / per)


def seconds(results, name, n, stat="median"):
    """The median or min of results[name, n]; None if it is missing or empty."""
    times = results.get((name, n))
    if not times:
        return None
    return float(np.median(times)) if stat == "median" else float(np.min(times))


def ratio(results, num, den, n, stat="median"):
    """results[num] / results[den] at n (median or min times); None if either is missing."""
    a, b = seconds(results, num, n, stat), seconds(results, den, n, stat)
    return None if a is None or b is None else a / b


def missed(checks):
    """The failures among checks, (what, value, bound, value must be >= bound)
    each, as lines; a value of None (not measured) is no failure. A value is a
    ratio (shown with an x) unless `what` names a slope."""
    return [f"{what}: {value:.2f}{'' if 'slope' in what else 'x'} "
            f"{'<' if at_least else '>'} {bound:g}"
            for what, value, bound, at_least in checks
            if value is not None and (value < bound if at_least else value > bound)]
